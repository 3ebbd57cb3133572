#!/bin/sh
# check-tools.sh - the operator's side of the `billing` tool (issue 27),
# against the private PostgreSQL (BILLING_PG_CONNINFO; without it the test
# FAILS, never skips):
#   - -j N, -jN and --jobs=N are taken by close, rerate, rate and ingest;
#     an unknown option or a bad value is named as the user typed it;
#   - `ingest good nosuch` stores nothing and says which file; a failure
#     after some files are stored still prints the summary;
#   - `invoice export --out DIR` creates DIR with its parents; a bad
#     BILLING_PDF_FONT names the variable and the path, and no file is made;
#   - voiding twice names the invoice, never a SQLSTATE;
#   - progress (billing/progress.c): ingest, load, invoice export and close
#     print "billing: CMD: done/total ..." lines every
#     BILLING_PROGRESS_INTERVAL seconds (0 here: at every update, so the
#     test waits on no clock); --quiet and a long interval print none;
#   - every command (from `billing --help`) takes -h and --help: usage on
#     stdout, exit 0; rerate's help says what rerate does;
#   - an unknown time zone is named with the closest known names; a JSON
#     trailing comma is called that, at the comma's line and column;
#   - close marks: a re-close re-rates only the accounts whose events or
#     catalog changed, and leaves the drafts a full re-close leaves;
#   - close's summary: its charge rows (fees included) and adjustments sum
#     to the subtotal; events of other months are not counted as the
#     period's; a month that has not begun is warned about; a second
#     --finalize shows what the finalized invoices billed, not 0.00;
#   - invoice list: every row adds up (SUBTOTAL - CREDITS + ACCT CREDIT +
#     TAX = TOTAL); JSON credits_total is a string in list and show, and
#     list has no "credits" of another type; stored instants carry an offset.
# billing rate's tables wider than the terminal are said so (script(1)).
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-tools.XXXXXX") || exit 99
db="billing_tools_$$"

. "$srcdir/tests/checklib.sh"

need_pg
trap 'rm -rf "$tmp"; db_drop_all' EXIT
db_new "$db"
db_use "$db"
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null || exit 99

# expect NAME STATUS PATTERN CMD...: CMD exits STATUS and its output has PATTERN (grep -E).
expect() {
    name=$1
    want=$2
    pat=$3
    shift 3
    "$@" >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" "$tmp/out"; then
        check "$name" ok
    else
        check "$name" fail "status $rc (want $want): $(head -c 400 "$tmp/out")"
    fi
}

# ---- 1. bugs ---------------------------------------------------------------
expect "ingest good nosuch: refused before storing, naming the file" 3 \
    "nosuch.jsonl: No such file" $billing ingest "$ex/events.jsonl" "$tmp/nosuch.jsonl"
n=$(psql "$BILLING_PG_CONNINFO" -Atc "SELECT count(*) FROM billing.event_ids" 2>/dev/null)
[ "$n" = 0 ] && r=ok || r=fail
check "ingest good nosuch stored nothing ($n events)" $r
printf '{"broken' >"$tmp/bad.jsonl"
$billing ingest -j2 "$ex/events.jsonl" "$tmp/bad.jsonl" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && grep -qE "^[0-9]+ records: [0-9]+ stored" "$tmp/out" && r=ok || r=fail
check "ingest failing in its second file still prints its summary (exit $rc)" $r

for j in "-j4" "-j 4" "--jobs=4" "--jobs 4"; do
    # shellcheck disable=SC2086
    expect "close --period 2026-01 $j" 0 "^total " $billing close --period 2026-01 $j --quiet
    # shellcheck disable=SC2086
    expect "rerate --period 2026-01 $j" 0 "^total " $billing rerate --period 2026-01 $j
done
expect "rate -j2 (short option) rates" 0 '"invoices"' $billing rate --no-progress -j2 \
    --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" "$ex/events.jsonl"
expect "close -j0 names -j as typed" 2 "^billing: -j/--jobs '0': expected" \
    $billing close --period 2026-01 -j0
expect "close -jx names -j, not the period" 2 "^billing: -j/--jobs 'x': expected" \
    $billing close --period 2026-01 -jx
expect "an unknown short option is named, not the argument before it" 2 \
    "unknown or ambiguous option '-x'" $billing close --period 2026-01 -x
expect "--jobs=0 names --jobs" 2 "^billing: --jobs '0': expected" \
    $billing close --period 2026-01 --jobs=0

# ---- 2. progress -------------------------------------------------------------
BILLING_PROGRESS_INTERVAL=0 $billing ingest --batch 100 "$ex/events.jsonl" >"$tmp/out" 2>"$tmp/err"
n=$(grep -cE "^billing: ingest: [0-9]+/[0-9]+ kB \([0-9]+%\), [0-9]+00 records, [0-9]+ kB/s$" "$tmp/err")
[ "$n" -ge 4 ] && r=ok || r=fail
check "ingest prints a progress line per batch with BILLING_PROGRESS_INTERVAL=0 ($n)" $r
[ $r = ok ] || cat "$tmp/err"
BILLING_PROGRESS_INTERVAL=0 $billing ingest --quiet --batch 100 "$ex/events.jsonl" >"$tmp/out" 2>"$tmp/err"
[ ! -s "$tmp/err" ] && r=ok || r=fail
check "ingest --quiet prints no progress" $r
BILLING_PROGRESS_INTERVAL=3600 $billing ingest --batch 100 "$ex/events.jsonl" >"$tmp/out" 2>"$tmp/err"
[ ! -s "$tmp/err" ] && r=ok || r=fail
check "no progress line before the interval has passed" $r
BILLING_PROGRESS_INTERVAL=0 $billing load --pricebook "$ex/pricebook.json" \
    --accounts "$ex/accounts.json" >/dev/null 2>"$tmp/err"
grep -qE "^billing: load: 14/14 rows \(100%\), [0-9]+ rows/s$" "$tmp/err" && r=ok || r=fail
check "load prints progress in rows" $r
[ $r = ok ] || cat "$tmp/err"
# --full: the closes above left every close mark unchanged, so a plain
# re-close would re-rate no account.
BILLING_PROGRESS_INTERVAL=0 $billing close --period 2026-01 --full >/dev/null 2>"$tmp/err"
grep -qE "^billing: close: 4/4 accounts \(100%\), 425 events, [0-9]+ accounts/s$" "$tmp/err" \
    && r=ok || r=fail
check "close's progress line keeps its format" $r
[ $r = ok ] || cat "$tmp/err"
BILLING_PROGRESS_INTERVAL=0 $billing invoice export --format csv --out "$tmp/csv" \
    --period 2026-01 >/dev/null 2>"$tmp/err"
n=$(grep -cE "^billing: invoice export: [1-4]/4 invoices \([0-9]+%\), [0-9]+ invoices/s$" "$tmp/err")
[ "$n" -eq 4 ] && r=ok || r=fail
check "invoice export prints a progress line per file ($n)" $r
[ $r = ok ] || cat "$tmp/err"

# ---- 3. help and messages ------------------------------------------------------
cmds=$($billing --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
[ "$(echo "$cmds" | wc -w)" -ge 9 ] && r=ok || r=fail
check "billing --help lists the commands ($(echo $cmds))" $r
for c in $cmds; do
    for h in -h --help; do
        $billing "$c" $h >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ $rc -eq 0 ] && head -1 "$tmp/out" | grep -q "^Usage: billing $c" && [ ! -s "$tmp/err" ] \
            && r=ok || r=fail
        check "billing $c $h: usage on stdout, exit 0 ($rc)" $r
    done
done
$billing rerate --help >"$tmp/out"
grep -q "the month to recompute" "$tmp/out" && ! grep -q "month to close" "$tmp/out" && r=ok || r=fail
check "rerate --help says it recomputes, not closes" $r
jq '.accounts[0].time_zone = "Asia/Shangai"' "$ex/accounts.json" >"$tmp/tz.json"
expect "an unknown time zone is named, with the closest known one" 3 \
    "time zone 'Asia/Shangai': .*No such file or directory; did you mean 'Asia/Shanghai'\?" \
    $billing rate --pricebook "$ex/pricebook.json" --accounts "$tmp/tz.json" "$ex/events.jsonl"
printf '{\n  "accounts": [\n    {"id": "a"},\n  ]\n}\n' >"$tmp/comma.json"
expect "a JSON trailing comma is named with its line and column" 3 \
    "comma.json:3:16: trailing comma before '\]'" \
    $billing rate --pricebook "$ex/pricebook.json" --accounts "$tmp/comma.json" "$ex/events.jsonl"

# A table wider than the terminal is said so on stderr (a pseudo-terminal of 80
# columns from script(1)); on a wide one, and through a pipe, nothing is said.
rate_on_tty() { # COLUMNS: stdout and stderr of billing rate --format table on a terminal
    script -qec "stty cols $1; $billing rate --format table --pricebook '$ex/pricebook.json' \
        --accounts '$ex/accounts.json' '$ex/events.jsonl'" /dev/null 2>&1 </dev/null
}
if command -v script >/dev/null 2>&1; then
    rate_on_tty 80 >"$tmp/tty80"
    grep -aq "billing rate: the tables are [0-9]* columns wide, the terminal 80" "$tmp/tty80" &&
        r=ok || r=fail
    check "billing rate --format table on an 80-column terminal says the tables are wider" $r
    rate_on_tty 300 >"$tmp/tty300"
    grep -aq "columns wide, the terminal" "$tmp/tty300" && r=fail || r=ok
    grep -aq "^Invoice lab-a 2026-01" "$tmp/tty300" || r=fail
    check "... and on a 300-column one says nothing" $r
    $billing rate --format table --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" \
        "$ex/events.jsonl" 2>"$tmp/err" >/dev/null
    grep -q "columns wide" "$tmp/err" && r=fail || r=ok
    check "... nor through a pipe" $r
fi

# ---- 4. summaries ---------------------------------------------------------------
$billing close --period 2026-01 --quiet >"$tmp/sum" 2>"$tmp/err"
sums=$(awk '/^(charges |adjustments )/ { n = $(NF - 1); gsub(/\./, "", n); s += n }
            /^subtotal / { t = $(NF - 1); gsub(/\./, "", t) } END { print s + 0, t + 0 }' "$tmp/sum")
[ "${sums% *}" = "${sums#* }" ] && grep -q "^charges fees " "$tmp/sum" && r=ok || r=fail
check "close's rows sum to its subtotal, fees included (rows, subtotal: $sums)" $r
[ $r = ok ] || cat "$tmp/sum"
grep -q "^events  *425 rated" "$tmp/sum" && r=ok || r=fail
check "close counts the month's 425 events" $r
expect "close of a month without events counts none of the others'" 0 "^events +0 rated" \
    $billing close --period 2026-03 --quiet
expect "closing a month that has not begun warns" 0 "warning: 2199-12 has not begun" \
    $billing close --period 2199-12 --quiet

expect "close --finalize numbers the drafts" 0 "^finalized +4 " \
    $billing close --period 2026-01 --finalize --grace 0
first_total=$(awk '/^total / { print $2 }' "$tmp/out")
$billing close --period 2026-01 --finalize --grace 0 --quiet >"$tmp/again" 2>&1
again_total=$(awk '/^total / { print $2 }' "$tmp/again")
grep -q "^finalized (left alone) 4" "$tmp/again" && [ -n "$first_total" ] &&
    [ "$first_total" = "$again_total" ] && ! grep -q "^charges fees  *0.00" "$tmp/again" && r=ok || r=fail
check "a second --finalize shows the stored money, not 0.00 ($first_total, $again_total)" $r
[ $r = ok ] || cat "$tmp/again"
BILLING_PDF_FONT="$tmp/no-font.ttf" $billing invoice export --format pdf --out "$tmp/pdf" \
    --period 2026-01 >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -qF "BILLING_PDF_FONT '$tmp/no-font.ttf'" "$tmp/out" && [ ! -e "$tmp/pdf" ] \
    && r=ok || r=fail
check "a bad BILLING_PDF_FONT names the variable and path, before any file (exit $rc)" $r
[ $r = ok ] || cat "$tmp/out"
expect "invoice export --out DIR creates DIR with its parents" 0 "4 file\\(s\\) written" \
    $billing invoice export --format json --out "$tmp/invoices/2026-01" --period 2026-01
[ -f "$tmp/invoices/2026-01/INV-2026-000001.json" ] && r=ok || r=fail
check "the exported files are in the new directory" $r
expect "void" 0 "^voided INV-2026-000002; credit note CN-" \
    $billing invoice void INV-2026-000002 --reason "test"
expect "voiding twice names the invoice" 3 "INV-2026-000002 is void already" \
    $billing invoice void INV-2026-000002 --reason "again"
# What each document's last row says it is, and the tax row its rate.
$billing invoice show INV-2026-000002 >"$tmp/void.txt" 2>&1
grep -q "^Amount due (void: nothing to pay) " "$tmp/void.txt" && grep -q "^Tax at [0-9.]*% " "$tmp/void.txt" &&
    r=ok || r=fail
check "a voided invoice's total row says there is nothing to pay; the tax row names its rate" $r
cn=$($billing invoice list --format json 2>/dev/null | jq -r '[.[] | select(.kind == "credit_note")][0].number')
$billing invoice show "$cn" >"$tmp/cn.txt" 2>&1
grep -q "^Total credited " "$tmp/cn.txt" && ! grep -q "^Amount due" "$tmp/cn.txt" && r=ok || r=fail
check "a credit note's total row is 'Total credited', not 'Amount due' ($cn)" $r
$billing invoice export INV-2026-000002 --format pdf --out "$tmp/voidpdf" >/dev/null 2>&1
pdftotext "$tmp/voidpdf/"*.pdf - 2>/dev/null | grep -q "Voided: test" && r=ok || r=fail
check "a voided invoice's PDF gives the reason" $r
grep -q SQLSTATE "$tmp/out" && r=fail || r=ok
check "voiding twice shows no SQLSTATE" $r

$billing invoice list >"$tmp/list"
bad=$(awk 'NR > 1 { t = NF; c = $(t - 3); gsub(/\./, "", c); a = $(t - 2); gsub(/\./, "", a);
        x = $(t - 1); gsub(/\./, "", x); s = $(t - 4); gsub(/\./, "", s); o = $t; gsub(/\./, "", o);
        if (s - c + a + x != o) print }' "$tmp/list")
[ -z "$bad" ] && grep -q "ACCT CREDIT" "$tmp/list" && r=ok || r=fail
check "invoice list rows add up with the account credit column" $r "$bad"
$billing invoice list --format json >"$tmp/list.json"
$billing invoice show INV-2026-000001 --format json >"$tmp/show.json"
[ "$(jq -r '.[0].credits_total | type' "$tmp/list.json")" = string ] &&
    [ "$(jq -r '.credits_total | type' "$tmp/show.json")" = string ] &&
    [ "$(jq -r '.[0] | has("credits")' "$tmp/list.json")" = false ] && r=ok || r=fail
check "JSON credits_total is a string in list and show" $r
jq -r '.finalized_at, .period_start' "$tmp/show.json" >"$tmp/times"
grep -cE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([+-][0-9]{2}:[0-9]{2}|Z)$' "$tmp/times" |
    grep -qx 2 && r=ok || r=fail
check "stored instants print as RFC 3339 with an offset ($(tr '\n' ' ' <"$tmp/times"))" $r

# ---- 5. close marks (issue 28) ----------------------------------------------
# In a database of its own: with nothing changed a re-close re-rates no
# account and keeps every draft; one late event re-rates its account alone,
# and that re-close leaves the same drafts as a full one.
db2="${db}_marks"
db_new "$db2"
BILLING_PG_CONNINFO="$base dbname=$db2" sh -c '
    b=$1; ex=$2; tmp=$3
    $b db migrate >/dev/null &&
    $b load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null &&
    $b ingest --quiet "$ex/events.jsonl" >/dev/null 2>&1 &&
    $b close --period 2026-01 >"$tmp/m1" 2>&1 &&
    $b close --period 2026-01 >"$tmp/m2" 2>&1 &&
    printf "%s\n" "{\"id\":\"mark-late-1\",\"account\":\"team-c\",\"resource\":\"d-c1\",\"meter\":\"storage\",\"start\":\"2026-01-20T00:00:00+08:00\",\"end\":\"2026-01-21T00:00:00+08:00\",\"quantity\":\"1000\",\"model\":\"\",\"region\":\"cn-east-1\"}" >"$tmp/late.jsonl" &&
    $b ingest --quiet "$tmp/late.jsonl" >/dev/null 2>&1 &&
    $b close --period 2026-01 >"$tmp/m3" 2>&1 &&
    $b invoice list --format json >"$tmp/m3.json" &&
    $b close --period 2026-01 --full >"$tmp/m4" 2>&1 &&
    $b invoice list --format json >"$tmp/m4.json"' sh "$billing" "$ex" "$tmp" || exit 99
grep -qE "^not re-rated +4 \(close mark unchanged\)$" "$tmp/m2" &&
    [ "$(grep -E '^total ' "$tmp/m1")" = "$(grep -E '^total ' "$tmp/m2")" ] && r=ok || r=fail
check "a re-close with nothing changed re-rates no account and keeps the total" $r
[ $r = ok ] || cat "$tmp/m1" "$tmp/m2"
grep -qE "^not re-rated +3 \(close mark unchanged\)$" "$tmp/m3" && grep -qE "^events +426 rated" "$tmp/m3" &&
    [ "$(grep -E '^total ' "$tmp/m2")" != "$(grep -E '^total ' "$tmp/m3")" ] && r=ok || r=fail
check "a late event re-rates its account alone and changes the total" $r
[ $r = ok ] || cat "$tmp/m3"
strip='[.[] | del(.created_at, .updated_at, .id)] | sort_by(.account)'
[ "$(grep -E '^total ' "$tmp/m3")" = "$(grep -E '^total ' "$tmp/m4")" ] &&
    jq -S "$strip" "$tmp/m3.json" >"$tmp/m3.s" && jq -S "$strip" "$tmp/m4.json" >"$tmp/m4.s" &&
    cmp -s "$tmp/m3.s" "$tmp/m4.s" && r=ok || r=fail
check "that re-close leaves the drafts a full re-close leaves" $r
[ $r = ok ] || { cat "$tmp/m3" "$tmp/m4"; diff "$tmp/m3.s" "$tmp/m4.s"; }

finish
