#!/bin/sh
# check-demo.sh - scripts/demo.sh, small (30 accounts), against the test
# services (BILLING_PG_CONNINFO, BILLING_KAFKA_BROKERS from
# var/services.env; without them the test FAILS, never skips), with this
# build tree and a database of its own:
#   - the run succeeds and its summary reconciles: the revenue per meter
#     adds up to the finalized invoices' subtotal, subtotal - credits + tax
#     = total, the rejected records equal the malformed records the
#     generator reports and the duplicates its replays;
#   - invoices are exported as PDF, JSON and CSV, two PNG pictures drawn;
#   - a second run reuses what the first did (produced, consumed, closed)
#     and prints the same summary;
#   - issue 27: trial credit amounts with the currency's decimals, reject
#     examples whole or cut at a word, export.log naming each file once,
#     burn-down labels stacked apart, no psql NOTICE on either run;
#   - SIGTERM (what Ctrl-C does) to a run serving /metrics stops the
#     billingd it started and leaves the services it did not start alone;
#   - billingd's /metrics and API ports: the ones given
#     (BILLING_DEMO_HTTP_PORT, BILLING_DEMO_API_PORT), or without them
#     free ones the demo finds and prints (the --serve run).
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-demo.XXXXXX") || exit 99
db="billing_demo_ck_$$"

. "$srcdir/tests/checklib.sh"

if [ -z "${BILLING_PG_CONNINFO:-}" ] || [ -z "${BILLING_KAFKA_BROKERS:-}" ]; then
    check "BILLING_PG_CONNINFO and BILLING_KAFKA_BROKERS are set (scripts/services.sh start && . var/services.env)" fail
    finish
fi
base=$BILLING_PG_CONNINFO
trap 'rm -rf "$tmp"; psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1' EXIT
# `make check` runs tests/ before bench/ is built.
[ -x "$builddir/bench/demo_month" ] || make -C "$builddir/bench" demo_month >/dev/null || exit 99
# Ports of its own for /metrics and the API, free now: found by binding
# port 0 (ports next to the broker's lie in the ephemeral range, where a
# client connection of the machine may hold them).
free_port() {
    python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}
BILLING_DEMO_HTTP_PORT=$(free_port)
BILLING_DEMO_API_PORT=$(free_port)
while [ "$BILLING_DEMO_API_PORT" = "$BILLING_DEMO_HTTP_PORT" ]; do BILLING_DEMO_API_PORT=$(free_port); done
export BILLING_DEMO_HTTP_PORT BILLING_DEMO_API_PORT

demo() {
    bash "$srcdir/scripts/demo.sh" --accounts 30 --seed 7 --build "$builddir" --services-env \
        --no-install --out "$tmp/out" --database "$db" "$@"
}

# The rows of the summary table titled $2 in file $1 ("a | b | c" lines).
rows() {
    awk -v t="$2" 'index($0, t) == 1 { on = 1; next }
                   on && /^ *$/ { exit }
                   on && /\|/ && !/^ *-/ { n++; if (n > 1) print }' "$1"
}
field() { # FILE TITLE COLUMN: that column of the first row
    rows "$1" "$2" | head -1 | awk -F'|' -v c="$3" '{ gsub(/ /, "", $c); print $c }'
}
sql() {
    psql "$base dbname=$db" -X -Atc "$1"
}

demo --fresh >"$tmp/run1.txt" 2>&1
rc=$?
check "the first run succeeds (exit $rc)" "$([ $rc -eq 0 ] && echo ok)"
[ $rc -eq 0 ] || { tail -40 "$tmp/run1.txt"; finish; }

report=$(sql "SELECT report FROM public.demo_runs")
malformed=$(printf '%s\n' "$report" | awk '$1 == "malformed" { print $2 }')
replays=$(printf '%s\n' "$report" | awk '$1 == "replays" { print $2 }')
rejected=$(field "$tmp/run1.txt" "Records of" 4)
dups=$(field "$tmp/run1.txt" "Records of" 3)
check "rejected records ($rejected) = the generator's malformed ($malformed)" \
    "$([ -n "$rejected" ] && [ "$rejected" = "$malformed" ] && echo ok)"
check "duplicates ($dups) = the generator's replays ($replays)" \
    "$([ -n "$dups" ] && [ "$dups" = "$replays" ] && echo ok)"
reasons=$(rows "$tmp/run1.txt" "Rejected records and why" | awk -F'|' '{ gsub(/ /, "", $1); print $1 }' | tr '\n' ' ')
check "every malformed kind is rejected for its reason ($reasons)" \
    "$([ "$reasons" = "conflict invalid no_price parse unknown_account " ] && echo ok)"

# Revenue per meter (printed) against the invoices' subtotal (printed), in
# exact numeric arithmetic.
lines=$(rows "$tmp/run1.txt" "Revenue of" | awk -F'|' '{ gsub(/ /, "", $5); printf "%s+", $5 } END { print 0 }')
subtotal=$(field "$tmp/run1.txt" "Invoices of" 3)
total=$(field "$tmp/run1.txt" "Invoices of" 6)
check "revenue per meter adds up to the invoices' subtotal ($lines = $subtotal)" \
    "$([ "$(sql "SELECT $lines = ${subtotal:-0} AND ${subtotal:-0} > 0")" = t ] && echo ok)"
check "the printed total is the finalized invoices' total ($total)" \
    "$([ "$(sql "SELECT sum(total) = ${total:-0} FROM billing.invoices WHERE status = 'finalized'")" = t ] && echo ok)"
check "the reconciliation rows are ok" \
    "$([ "$(rows "$tmp/run1.txt" "Reconciliation" | grep -c '| ok')" = 2 ] && echo ok)"
alerts=$(rows "$tmp/run1.txt" "Credit alerts" | awk -F'|' '{ s += $4 } END { print s + 0 }')
check "credit alerts were published and summarized ($alerts)" \
    "$([ "$alerts" -gt 0 ] && [ "$alerts" = "$(sql "SELECT count(*) FROM public.demo_alerts")" ] && echo ok)"

n_pdf=$(ls "$tmp/out/invoices/"*.pdf 2>/dev/null | wc -l)
ok=ok
for f in "$tmp/out/invoices/"*.pdf; do
    [ "$(head -c 5 "$f")" = "%PDF-" ] || ok=fail
    jq -e '.number' "${f%.pdf}.json" >/dev/null 2>&1 || ok=fail
    [ -s "${f%.pdf}.csv" ] || ok=fail
done
check "invoices exported as PDF, JSON and CSV ($n_pdf)" "$([ "$n_pdf" -ge 2 ] && echo $ok)"
ok=ok
for p in revenue-per-day credit-burn-down; do
    [ "$(head -c 4 "$tmp/out/$p.png" 2>/dev/null | tail -c 3)" = PNG ] || ok=fail
done
check "both pictures are PNG files" $ok

# Issue 27's demo fixes, each checked on this run's output.
digits=$(sql "SELECT digits FROM billing.currencies WHERE code = 'CNY'")
amounts=$(rows "$tmp/run1.txt" "Trial credit" | awk -F'|' '{ gsub(/ /, "", $4); print $4 }')
check "trial credit amounts have the currency's $digits decimals ($(echo $amounts))" \
    "$([ -n "$amounts" ] && [ "$digits" -gt 0 ] &&
        ! printf '%s\n' "$amounts" | grep -qvE "^-?[0-9]+\.[0-9]{$digits}\$" && echo ok)"
rows "$tmp/run1.txt" "Rejected records and why" |
    awk -F'|' '{ sub(/^ /, "", $3); sub(/ *$/, "", $3); print $3 }' >"$tmp/examples"
ok=ok
cut=0
while IFS= read -r ex; do
    [ ${#ex} -le 70 ] || ok=fail
    case $ex in
    *...) cut=$((cut + 1)) whole=${ex%...} sep=' ' ;;
    *) whole=$ex sep= ;;
    esac
    # Whole, or cut after a word: the reason goes on with a space there.
    n=$(printf "SELECT count(*) FROM billing.rejected_events WHERE reason = :'w' || :'s'
                OR (:'s' <> '' AND left(reason, length(:'w') + 1) = :'w' || :'s')\n" |
        psql "$base dbname=$db" -X -At -v w="$whole" -v s="$sep")
    [ "${n:-0}" -gt 0 ] || ok=fail
done <"$tmp/examples"
check "reject examples are whole or cut at a word with '...', within 70 characters ($cut cut)" \
    "$([ -s "$tmp/examples" ] && [ $cut -gt 0 ] && echo $ok)"
ok=ok
while IFS= read -r line; do
    f=${line%%: *}
    case $f in "$tmp/out/invoices/"*) [ -s "$f" ] || ok=fail ;; *) ok=fail ;; esac
done <"$tmp/out/export.log"
check "export.log: a line per file written, naming it, no line twice ($(wc -l <"$tmp/out/export.log") lines)" \
    "$([ "$(wc -l <"$tmp/out/export.log")" = $((3 * n_pdf)) ] &&
        [ "$(sort -u "$tmp/out/export.log" | wc -l)" = $((3 * n_pdf)) ] && echo $ok)"
# Burn-down labels: two labels closer than 5 % of the time axis are at
# least 0.6 CNY apart up and down (the chart's are 25 minutes apart).
span=$(($(date -u -d "$(tail -1 "$tmp/out/credit-burn-down.dat" | cut -d' ' -f1)" +%s) -
    $(date -u -d "$(head -1 "$tmp/out/credit-burn-down.dat" | cut -d' ' -f1)" +%s)))
while read -r t b label y; do
    echo "$(date -u -d "$t" +%s) $y $label"
done <"$tmp/out/credit-alerts.dat" >"$tmp/labels"
close=$(awk -v span="$span" '{ x[NR] = $1; y[NR] = $2; ok[NR] = NF == 3 }
    END { for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) {
              if (!ok[i] || !ok[j]) { print "bad"; exit }
              dy = y[i] - y[j]; if (dy < 0) dy = -dy
              if ((x[j] - x[i]) * 20 < span) { n++; if (dy < 0.6) { print "bad"; exit } } }
          print n + 0 }' "$tmp/labels")
check "burn-down chart: labels of alerts close in time are stacked apart ($close close pairs)" \
    "$([ "$close" != bad ] && [ "$close" -gt 0 ] && echo ok)"
# Each alert lies on the burn-down that `billing rate --at` computed on its
# own: before its crossed_at the credit was above its threshold, from the
# next second on at or below it (points in the same second are skipped).
while read -r t left; do
    echo "$(date -u -d "$t" +%s) $left"
done <"$tmp/out/credit-burn-down.dat" >"$tmp/burn"
while read -r t level label y; do
    echo "$(date -u -d "$t" +%s) $level $label"
done <"$tmp/out/credit-alerts.dat" >"$tmp/marks"
agree=$(awk 'NR == FNR { bt[NR] = $1; bl[NR] = $2; nb = NR; next }
    { for (i = 1; i <= nb; i++) {
          if (bt[i] < $1 && bl[i] + 0 <= $2 + 0) { print "bad " $3 " above " bt[i]; exit }
          if (bt[i] > $1 && bl[i] + 0 > $2 + 0) { print "bad " $3 " below " bt[i]; exit } }
      n++ }
    END { print n + 0 }' "$tmp/burn" "$tmp/marks")
check "each alert's threshold is crossed at its crossed_at on billing rate --at's burn-down ($agree alerts)" \
    "$(case $agree in bad*) ;; *) [ "$agree" -gt 0 ] && echo ok ;; esac)"
n=$(grep -c NOTICE "$tmp/run1.txt")
check "the first run prints no NOTICE ($n)" "$([ "$n" = 0 ] && echo ok)"

demo >"$tmp/run2.txt" 2>&1
rc=$?
n=$(grep -c "reused:" "$tmp/run2.txt")
check "the second run succeeds and reuses the database, the production, billingd's work and the close (exit $rc, $n reused)" \
    "$([ $rc -eq 0 ] && [ "$n" -ge 4 ] && grep -q "reused: already produced" "$tmp/run2.txt" &&
        grep -q "reused: billingd had already committed" "$tmp/run2.txt" &&
        grep -q "reused: 2026-01 already closed" "$tmp/run2.txt" && echo ok)"
sed -n '/^Accounts$/,/^Invoices exported/p' "$tmp/run1.txt" >"$tmp/sum1"
sed -n '/^Accounts$/,/^Invoices exported/p' "$tmp/run2.txt" >"$tmp/sum2"
check "the second run prints the same summary" \
    "$([ -s "$tmp/sum1" ] && cmp -s "$tmp/sum1" "$tmp/sum2" && echo ok)"
n=$(grep -c NOTICE "$tmp/run2.txt")
check "the second run prints no NOTICE either ($n)" "$([ "$n" = 0 ] && echo ok)"
check "... and its export.log has no line twice" \
    "$([ "$(sort "$tmp/out/export.log" | uniq -d | wc -l)" = 0 ] && [ -s "$tmp/out/export.log" ] && echo ok)"

check "the first run's billingd took the ports given (BILLING_DEMO_HTTP_PORT, BILLING_DEMO_API_PORT)" \
    "$(grep -qF "billingd's /metrics on 127.0.0.1:$BILLING_DEMO_HTTP_PORT, its API on 127.0.0.1:$BILLING_DEMO_API_PORT" \
        "$tmp/run1.txt" && echo ok)"

# --serve keeps billingd running; SIGTERM stops it and nothing else.
# Not through demo(): $! must be demo.sh itself, not a subshell around it.
# No ports given: the demo finds free ones itself and prints them.
env -u BILLING_DEMO_HTTP_PORT -u BILLING_DEMO_API_PORT \
    bash "$srcdir/scripts/demo.sh" --accounts 30 --seed 7 --build "$builddir" --services-env \
    --no-install --out "$tmp/out" --database "$db" --serve >"$tmp/run3.txt" 2>&1 &
pid=$!
i=0
until grep -q "Ctrl-C stops it" "$tmp/run3.txt" || ! kill -0 $pid 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 1200 ] || break # 60 s: a bound, not the synchronization
    sleep 0.05
done
bd=$(sed -n 's/.*billingd (pid \([0-9]*\),.*/\1/p' "$tmp/run3.txt" | head -1)
http3=$(sed -n "s/.*billingd's \/metrics on 127.0.0.1:\([0-9]*\), its API on 127.0.0.1:[0-9]*$/\1/p" "$tmp/run3.txt")
api3=$(sed -n "s/.*billingd's \/metrics on 127.0.0.1:[0-9]*, its API on 127.0.0.1:\([0-9]*\)$/\1/p" "$tmp/run3.txt")
metrics=$(curl -fsS "http://127.0.0.1:${http3:-0}/metrics" 2>/dev/null | grep -c '^billingd_')
# The console's address and key the run printed, and that key reading the accounts.
url=$(sed -n 's|^The web console: \(http://127.0.0.1:[0-9]*/console/\)$|\1|p' "$tmp/run3.txt")
key=$(sed -n 's/^   sign in with the operator key \(bk_[A-Za-z0-9_-]*\)$/\1/p' "$tmp/run3.txt")
page=$(curl -fsS "$url" 2>/dev/null | grep -c '<script src=')
accounts=$(curl -fsS -H "Authorization: Bearer $key" \
    "http://127.0.0.1:${api3:-0}/v1/accounts?limit=100" 2>/dev/null | jq '.data | length')
kill -TERM $pid 2>/dev/null
wait $pid
alive=no
[ -n "$bd" ] && kill -0 "$bd" 2>/dev/null && alive=yes
check "without BILLING_DEMO_*_PORT the demo prints the ports it found (/metrics ${http3:-none}, API ${api3:-none}), distinct" \
    "$([ -n "$http3" ] && [ -n "$api3" ] && [ "$http3" != "$api3" ] && echo ok)"
check "--serve serves /metrics ($metrics series), and SIGTERM stops its billingd (pid $bd, alive: $alive)" \
    "$([ -n "$bd" ] && [ "$metrics" -gt 0 ] && [ $alive = no ] && echo ok)"
check "--serve prints the console's address and an operator key that reads the accounts ($url, $accounts accounts)" \
    "$([ -n "$url" ] && [ -n "$key" ] && [ "$page" -ge 1 ] && [ "${accounts:-0}" -ge 30 ] && echo ok)"
check "... and leaves the services it did not start running" \
    "$([ "$(sql "SELECT 1")" = 1 ] && echo ok)"
finish
