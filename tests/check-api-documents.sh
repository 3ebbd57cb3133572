#!/bin/sh
# check-api-documents.sh - billingd's invoice, usage and quote routes
# (doc/http-api-documents.md) against a real billingd (API alone) and the
# private PostgreSQL (BILLING_PG_CONNINFO; without it the test FAILS, never
# skips), with curl. Its own database: the example loaded, its events
# ingested, January closed and finalized, one invoice voided (a credit
# note), February closed as a draft. Then:
#   - GET /v1/invoices/{number} (.json, .pdf, .csv, and Accept) gives the
#     very bytes `billing invoice export` writes, for every document;
#   - finalized and void documents: a strong ETag, Cache-Control, and 304
#     on If-None-Match; a draft: no-store and no ETag;
#   - the list: its filters, paging with next_after, the bound key's
#     account alone; scopes (403) and other accounts (404);
#   - usage: per meter, equal to the invoice's usage lines of the month
#     (exact quantities and amounts); by day, adding up to the month's,
#     cut at local midnight in Europe/Berlin across its 23-hour DST day;
#   - a quote of one GPU for one hour costs the price book's rate and
#     stores nothing (row counts of every table it could touch unchanged);
#   - every JSON answer validates against doc/openapi.yaml (tests/openapi-check.py).
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="$builddir/billingd/billingd"
ex="$srcdir/examples/gpu-cloud"
spec="$srcdir/doc/openapi.yaml"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-apidoc.XXXXXX") || exit 99
pids=""

. "$srcdir/tests/checklib.sh"

api_scratch apidoc
# The PDFs of the command line and of the server carry the same creation date.
SOURCE_DATE_EPOCH=1767225600
export SOURCE_DATE_EPOCH
sql() { psql "$BILLING_PG_CONNINFO" -XAtq -v ON_ERROR_STOP=1 "$@"; }
# exact(TEXT): a decimal or "p/q" of the API as a Fraction, for the Python checks below.
cat >"$tmp/exact.py" <<'EOF'
from decimal import Decimal
from fractions import Fraction
def exact(v):
    if "/" in v:
        n, d = v.split("/")
        return Fraction(int(n), int(d))
    return Fraction(Decimal(v))
EOF
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null || exit 99
$billing ingest "$ex/events.jsonl" >/dev/null 2>&1 || exit 99
$billing close --period 2026-01 --finalize --grace 0 --quiet >/dev/null 2>&1 || exit 99
$billing invoice void INV-2026-000002 --reason "wrong rate applied" >/dev/null 2>&1 || exit 99
$billing close --period 2026-02 --quiet >/dev/null 2>&1 || exit 99
# An account in Berlin: an event across midnight, traffic across midnight
# (a third of its bytes on one day), the 23-hour day of 2026-03-29, and an
# event running into April.
cat >"$tmp/berlin.json" <<'EOF'
{"accounts": [{"id": "berlin-e", "name": "Berlin E", "currency": "CNY", "time_zone": "Europe/Berlin", "tax_rate": "0"}]}
EOF
cat >"$tmp/berlin.jsonl" <<'EOF'
{"id":"be-1","account":"berlin-e","resource":"i-e1","meter":"gpu","start":"2026-03-10T22:00:00+01:00","end":"2026-03-11T03:00:00+01:00","quantity":"8","model":"RTX4090","region":"cn-east-1"}
{"id":"be-2","account":"berlin-e","resource":"i-e1","meter":"traffic","start":"2026-03-12T23:00:00+01:00","end":"2026-03-13T02:00:00+01:00","quantity":"1000","model":"","region":"cn-east-1"}
{"id":"be-3","account":"berlin-e","resource":"i-e2","meter":"gpu","start":"2026-03-28T23:00:00+01:00","end":"2026-03-30T01:00:00+02:00","quantity":"1","model":"A100-80G","region":"cn-east-1"}
{"id":"be-4","account":"berlin-e","resource":"d-e1","meter":"storage","start":"2026-03-29T00:00:00+01:00","end":"2026-03-30T00:00:00+02:00","quantity":"100","model":"","region":"cn-east-1"}
{"id":"be-5","account":"berlin-e","resource":"i-e3","meter":"gpuless","start":"2026-03-31T23:00:00+02:00","end":"2026-04-01T01:30:00+02:00","quantity":"1","model":"RTX4090","region":"cn-east-1"}
EOF
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/berlin.json" >/dev/null || exit 99
$billing ingest "$tmp/berlin.jsonl" >/dev/null 2>&1 || exit 99
for p in 2026-01 2026-02; do
    for f in json csv pdf; do
        $billing invoice export --format $f --out "$tmp/cli" --period $p >/dev/null 2>&1 || exit 99
    done
done
admin=$($billing apikey create --scope admin) || exit 99
lab=$($billing apikey create --scope invoices:read --scope accounts:read --account lab-a) || exit 99
events=$($billing apikey create --scope events:write) || exit 99
accounts=$($billing apikey create --scope accounts:read) || exit 99

# billingd serving the API alone, /metrics on a free loopback port (the
# catalog, accounts included, is read at its start).
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || exit 99
billingd_start main --set "http.listen=127.0.0.1:$mport"

# get KEY PATH OUT [HEADER...]: the answer's body into OUT, its headers into
# OUT.h; prints the status.
get() {
    key=$1
    path=$2
    out=$3
    shift 3
    set -- "$@"
    hs=
    for h in "$@"; do hs="$hs -H '$h'"; done
    eval curl -s -o "'$out'" -D "'$out.h'" -w '%{http_code}' -H "'Authorization: Bearer $key'" \
        $hs "'$url$path'"
}
header() { grep -i "^$1:" "$2.h" | head -1 | sed 's/^[^:]*: *//' | tr -d '\r'; }
# valid METHOD PATH STATUS FILE: the answer in FILE (headers in FILE.h) has
# STATUS and conforms to the spec.
valid() { python3 "$srcdir/tests/openapi-check.py" --status "$3" "$spec" "$1" "$2" "$4.h" "$4" 2>&1; }
conforms=ok
conforms_why=
validate() {
    why=$(valid "$@") || { conforms=fail; conforms_why="$conforms_why $why"; }
}

# ---- one document, every form ---------------------------------------
same=ok
why=
n=0
for f in "$tmp"/cli/*.json; do
    name=$(basename "$f" .json)
    case $name in draft-*) ref=${name#draft-} ;; *) ref=$name ;; esac
    for form in json pdf csv; do
        code=$(get "$admin" "/v1/invoices/$ref.$form" "$tmp/a.$form")
        if [ "$code" != 200 ] || ! cmp -s "$tmp/a.$form" "$tmp/cli/$name.$form"; then
            same=fail
            why="$why $name.$form($code)"
        fi
        validate GET "/v1/invoices/{number}" 200 "$tmp/a.$form"
    done
    n=$((n + 1))
done
check "JSON, PDF and CSV of all $n documents equal billing invoice export's bytes" $same "$why"
[ "$n" -ge 6 ] && ls "$tmp"/cli/CN-*.json >/dev/null 2>&1 && ls "$tmp"/cli/draft-*.json >/dev/null 2>&1 && r=ok || r=fail
check "the documents include finalized, void, credit note and draft ($n)" $r
code=$(get "$admin" /v1/invoices/INV-2026-000001 "$tmp/acc.pdf" "Accept: application/pdf")
cmp -s "$tmp/acc.pdf" "$tmp/cli/INV-2026-000001.pdf" && [ "$code" = 200 ] && r=ok || r=fail
check "Accept: application/pdf without a suffix gives the PDF" $r "$code"
code=$(get "$admin" /v1/invoices/INV-2026-000001 "$tmp/acc.csv" "Accept: text/csv")
cmp -s "$tmp/acc.csv" "$tmp/cli/INV-2026-000001.csv" && r=ok || r=fail
check "Accept: text/csv without a suffix gives the CSV" $r "$code"
get "$admin" /v1/invoices/INV-2026-000001 "$tmp/plain" >/dev/null
cmp -s "$tmp/plain" "$tmp/cli/INV-2026-000001.json" && [ "$(header Content-Type "$tmp/plain")" = application/json ] && r=ok || r=fail
check "no suffix and no Accept: JSON" $r

# ---- caching ----------------------------------------------------------
for doc in INV-2026-000001.pdf INV-2026-000002.json INV-2026-000001.csv; do
    get "$admin" "/v1/invoices/$doc" "$tmp/e1" >/dev/null
    etag=$(header ETag "$tmp/e1")
    sum=$(md5sum "$tmp/e1" | cut -d' ' -f1)
    [ "$etag" = "\"$sum\"" ] && r=ok || r=fail
    check "$doc: a strong ETag, the digest of its bytes" $r "$etag vs $sum"
    [ "$(header Cache-Control "$tmp/e1")" = "private, no-cache" ] && r=ok || r=fail
    check "$doc: Cache-Control private, no-cache" $r "$(header Cache-Control "$tmp/e1")"
    code=$(get "$admin" "/v1/invoices/$doc" "$tmp/e2" "If-None-Match: $etag")
    [ "$code" = 304 ] && [ ! -s "$tmp/e2" ] && [ "$(header ETag "$tmp/e2")" = "$etag" ] && r=ok || r=fail
    check "$doc: If-None-Match with its ETag answers 304, empty" $r "$code"
    code=$(get "$admin" "/v1/invoices/$doc" "$tmp/e3" 'If-None-Match: "0123"')
    [ "$code" = 200 ] && r=ok || r=fail
    check "$doc: another ETag answers 200" $r "$code"
done
code=$(get "$admin" /v1/invoices/INV-2026-000002.pdf "$tmp/v1")
get "$admin" /v1/invoices/INV-2026-000002.pdf "$tmp/v2" >/dev/null
[ "$(header ETag "$tmp/v1")" = "$(header ETag "$tmp/v2")" ] && r=ok || r=fail
check "a void document's PDF: the same ETag from one request to the next" $r
draft=$(sql -c "SELECT id FROM billing.invoices WHERE status = 'draft' ORDER BY id LIMIT 1")
code=$(get "$admin" "/v1/invoices/$draft" "$tmp/d")
[ "$code" = 200 ] && [ "$(header Cache-Control "$tmp/d")" = no-store ] && [ -z "$(header ETag "$tmp/d")" ] && r=ok || r=fail
check "a draft: Cache-Control no-store, no ETag" $r "$code"

# ---- the list -------------------------------------------------------
code=$(get "$admin" "/v1/invoices?period=2026-01&status=finalized" "$tmp/l")
validate GET /v1/invoices 200 "$tmp/l"
$billing invoice list --period 2026-01 --status finalized --format json >"$tmp/l.cli" 2>/dev/null
python3 - "$tmp/l" "$tmp/l.cli" <<'EOF' && r=ok || r=fail
import json, sys
api = json.load(open(sys.argv[1]))
cli = sorted(json.load(open(sys.argv[2])), key=lambda x: int(x["id"]))  # the API: id order
ok = api["data"] == cli and api["next_after"] is None
if not ok:
    print(api, cli)
sys.exit(0 if ok else 1)
EOF
check "the list of a period and status equals billing invoice list --format json (in id order)" $r "$code"
get "$admin" "/v1/invoices?kind=credit_note" "$tmp/cn" >/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; sys.exit(0 if len(d)==1 and d[0]["kind"]=="credit_note" and d[0]["corrects"]=="INV-2026-000002" else 1)' "$tmp/cn" && r=ok || r=fail
check "kind=credit_note: the credit note of the void invoice" $r
get "$admin" "/v1/invoices?number=INV-2026-000003" "$tmp/num" >/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; sys.exit(0 if [x["number"] for x in d]==["INV-2026-000003"] else 1)' "$tmp/num" && r=ok || r=fail
check "number=: that invoice alone" $r
all=$(sql -c "SELECT string_agg(id::text, ',' ORDER BY id) FROM billing.invoices")
after=
pages=0
ids=
while [ $pages -lt 20 ]; do
    get "$admin" "/v1/invoices?limit=2${after:+&after=$after}" "$tmp/p" >/dev/null
    validate GET /v1/invoices 200 "$tmp/p"
    ids="$ids$(python3 -c 'import json,sys; print("".join(","+x["id"] for x in json.load(open(sys.argv[1]))["data"]))' "$tmp/p")"
    after=$(python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["next_after"]; print(n or "")' "$tmp/p")
    pages=$((pages + 1))
    [ -z "$after" ] && break
done
[ "${ids#,}" = "$all" ] && r=ok || r=fail
check "pages of 2 through next_after: every invoice once, in id order" $r "${ids#,} vs $all"
code=$(get "$admin" "/v1/invoices?limit=1001" "$tmp/big")
[ "$code" = 400 ] && r=ok || r=fail
validate GET /v1/invoices 400 "$tmp/big"
check "limit over 1000: 400" $r "$code"
code=$(get "$admin" "/v1/invoices?period=2026-13" "$tmp/bad")
[ "$code" = 400 ] && grep -q "period '2026-13': expected YYYY-MM" "$tmp/bad" && r=ok || r=fail
check "a bad period: 400 naming it" $r "$code"

# ---- keys -------------------------------------------------------------
get "$lab" /v1/invoices "$tmp/lab" >/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; sys.exit(0 if d and all(x["account"]=="lab-a" for x in d) else 1)' "$tmp/lab" && r=ok || r=fail
check "a key bound to lab-a lists lab-a's documents alone" $r
code=$(get "$lab" "/v1/invoices?account=team-c" "$tmp/x")
[ "$code" = 404 ] && r=ok || r=fail
check "the bound key asking for team-c's list: 404" $r "$code"
validate GET /v1/invoices 404 "$tmp/x"
for doc in INV-2026-000004 INV-2026-000004.pdf INV-2026-000002.csv; do
    code=$(get "$lab" "/v1/invoices/$doc" "$tmp/x")
    [ "$code" = 404 ] && r=ok || r=fail
    check "the bound key asking for another account's $doc: 404" $r "$code"
done
code=$(get "$lab" /v1/invoices/INV-2026-000001.pdf "$tmp/x")
[ "$code" = 200 ] && r=ok || r=fail
check "the bound key reads its own invoice" $r "$code"
code=$(get "$lab" /v1/accounts/team-c/usage "$tmp/x")
[ "$code" = 404 ] && r=ok || r=fail
check "the bound key asking for team-c's usage: 404" $r "$code"
for k in "$events" "$accounts"; do
    code=$(get "$k" /v1/invoices "$tmp/x")
    [ "$code" = 403 ] && r=ok || r=fail
    check "a key without invoices:read: 403" $r "$code"
done
code=$(get "$events" /v1/accounts/lab-a/usage "$tmp/x")
[ "$code" = 403 ] && r=ok || r=fail
check "usage without accounts:read: 403" $r "$code"
code=$(get "$admin" /v1/invoices/INV-2026-999999 "$tmp/x")
[ "$code" = 404 ] && r=ok || r=fail
validate GET "/v1/invoices/{number}" 404 "$tmp/x"
check "an unknown number: 404" $r "$code"

# ---- usage equals the invoice's lines -----------------------------------
# usage_eq.py USAGE INVOICE: the usage answer per meter equals the
# invoice's usage and included lines, quantities and amounts (exact).
cat >"$tmp/usage_eq.py" <<'EOF'
import json, sys
from collections import defaultdict
from fractions import Fraction
from exact import exact
usage = json.load(open(sys.argv[1]))
inv = json.load(open(sys.argv[2]))
want_q = defaultdict(Fraction)
want_a = defaultdict(Fraction)
for l in inv["lines"]:
    if l["kind"] in ("usage", "included"):
        q = exact(l["quantity"])
        if l.get("quantity_den"):
            q /= int(l["quantity_den"])
        want_q[l["meter"]] += q
        want_a[l["meter"]] += exact(l["amount"])
got_q = {r["meter"]: exact(r["quantity"]) for r in usage["data"]}
got_a = {r["meter"]: exact(r["amount"]) for r in usage["data"]}
ok = got_q == dict(want_q) and got_a == dict(want_a)
if not ok:
    print(dict(want_q), got_q, dict(want_a), got_a)
sys.exit(0 if ok and want_q else 1)
EOF
usage_ok=ok
usage_why=
for acct in lab-a new-d student-b team-c; do
    code=$(get "$admin" "/v1/accounts/$acct/usage?from=2026-01&to=2026-01&group_by=meter" "$tmp/u")
    validate GET "/v1/accounts/{id}/usage" 200 "$tmp/u"
    number=$(sql -c "SELECT billing.invoice_number_text(s.prefix, i.number) FROM billing.invoices i JOIN billing.invoice_series s ON s.series = i.series WHERE i.account_id = '$acct' AND i.month = '2026-01-01' AND i.kind = 'invoice' ORDER BY i.id LIMIT 1")
    PYTHONPATH="$tmp" python3 "$tmp/usage_eq.py" "$tmp/u" "$tmp/cli/$number.json" ||
        { usage_ok=fail; usage_why="$usage_why $acct($code)"; }
done
check "usage per meter equals each invoice's usage lines of 2026-01 (exact)" $usage_ok "$usage_why"
for by in model region month; do
    code=$(get "$admin" "/v1/accounts/lab-a/usage?from=2026-01&group_by=$by" "$tmp/u")
    [ "$code" = 200 ] && r=ok || r=fail
    validate GET "/v1/accounts/{id}/usage" 200 "$tmp/u"
    check "usage group_by=$by" $r "$code"
done
for acct in lab-a student-b team-c; do
    get "$admin" "/v1/accounts/$acct/usage?from=2026-01&group_by=meter" "$tmp/um" >/dev/null
    code=$(get "$admin" "/v1/accounts/$acct/usage?from=2026-01&group_by=resource" "$tmp/ur")
    validate GET "/v1/accounts/{id}/usage" 200 "$tmp/ur"
    PYTHONPATH="$tmp" python3 - "$tmp/um" "$tmp/ur" <<'EOF' && r=ok || r=fail
import json, sys
from collections import defaultdict
from fractions import Fraction
from exact import exact
by_meter = {r["meter"]: exact(r["quantity"]) for r in json.load(open(sys.argv[1]))["data"]}
rows = json.load(open(sys.argv[2]))["data"]
summed = defaultdict(Fraction)
for r in rows:
    summed[r["meter"]] += exact(r["quantity"])
ok = dict(summed) == by_meter and len({r["resource"] for r in rows}) > 1
if not ok:
    print(by_meter, dict(summed))
sys.exit(0 if ok else 1)
EOF
    check "$acct: usage by resource (raw events) sums per meter to the aggregates' quantities" $r "$code"
done
# ---- usage by day ----------------------------------------------------------
# daysum DAYFILE MONTHFILE [EXPECT...]: the days' rows add up per meter to the
# month's (quantities and amounts exact); each EXPECT "day meter quantity"
# is a row of the days.
daysum() {
    PYTHONPATH="$tmp" python3 - "$@" <<'EOF'
import json, sys
from collections import defaultdict
from fractions import Fraction
from exact import exact
days = json.load(open(sys.argv[1]))
month = json.load(open(sys.argv[2]))
q = defaultdict(Fraction)
a = defaultdict(Fraction)
for r in days["data"]:
    q[r["meter"]] += exact(r["quantity"])
    a[r["meter"]] += exact(r["amount"])
want_q = {r["meter"]: exact(r["quantity"]) for r in month["data"]}
want_a = {r["meter"]: exact(r["amount"]) for r in month["data"]}
ok = dict(q) == want_q and dict(a) == want_a and len(days["data"]) >= len(month["data"]) > 0
if not ok:
    print("days", dict(q), dict(a), "month", want_q, want_a)
rows = {(r["day"], r["meter"]): r["quantity"] for r in days["data"]}
for e in sys.argv[3:]:
    day, meter, quantity = e.split()
    if rows.get((day, meter)) != quantity:
        print("%s %s: %s, expected %s" % (day, meter, rows.get((day, meter)), quantity))
        ok = False
sys.exit(0 if ok else 1)
EOF
}
for acct in lab-a student-b team-c new-d; do
    code=$(get "$admin" "/v1/accounts/$acct/usage?from=2026-01&group_by=day" "$tmp/ud")
    validate GET "/v1/accounts/{id}/usage" 200 "$tmp/ud"
    get "$admin" "/v1/accounts/$acct/usage?from=2026-01&group_by=month" "$tmp/um" >/dev/null
    why=$(daysum "$tmp/ud" "$tmp/um") && r=ok || r=fail
    check "$acct: usage by day of 2026-01 adds up per meter to the month's (exact)" $r "$code $why"
done
code=$(get "$admin" "/v1/accounts/berlin-e/usage?from=2026-03&group_by=day" "$tmp/ud")
validate GET "/v1/accounts/{id}/usage" 200 "$tmp/ud"
get "$admin" "/v1/accounts/berlin-e/usage?from=2026-03&group_by=month" "$tmp/um" >/dev/null
why=$(daysum "$tmp/ud" "$tmp/um" "2026-03-10 gpu 16" "2026-03-11 gpu 24" \
    "2026-03-12 traffic 1/3000000" "2026-03-13 traffic 1/1500000" \
    "2026-03-28 gpu 1" "2026-03-29 gpu 23" "2026-03-30 gpu 1" "2026-03-29 storage 2300/743" \
    "2026-03-31 gpuless 1") && r=ok || r=fail
check "berlin-e: days cut at local midnight (23 h on 2026-03-29), traffic pro rata, adding up to March" $r "$code $why"
code=$(get "$admin" "/v1/accounts/berlin-e/usage?from=2026-03-29&group_by=day" "$tmp/ud1")
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["from"]=="2026-03-29" and d["to"]=="2026-03-29" and {r["day"] for r in d["data"]}=={"2026-03-29"} else 1)' "$tmp/ud1" && r=ok || r=fail
check "from=YYYY-MM-DD alone: that day alone" $r "$code"
code=$(get "$admin" "/v1/accounts/berlin-e/usage?from=2026-03-31&to=2026-04-01&group_by=day" "$tmp/ud2")
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r={(x["day"],x["meter"]):x["quantity"] for x in d["data"]}; sys.exit(0 if r=={("2026-03-31","gpuless"):"1",("2026-04-01","gpuless"):"1.5"} else 1)' "$tmp/ud2" && r=ok || r=fail
check "a day range across a month end: the event split at midnight of the 1st" $r "$code $(cat "$tmp/ud2")"
code=$(get "$admin" "/v1/accounts/berlin-e/usage?from=2026-01&to=2026-04&group_by=day" "$tmp/u")
[ "$code" = 400 ] && grep -q "3 months" "$tmp/u" && r=ok || r=fail
validate GET "/v1/accounts/{id}/usage" 400 "$tmp/u"
check "usage group_by=day over more than 3 months: 400" $r "$code"
code=$(get "$admin" "/v1/accounts/berlin-e/usage?from=2026-02-30&group_by=day" "$tmp/u")
[ "$code" = 400 ] && grep -q "from '2026-02-30'" "$tmp/u" && r=ok || r=fail
check "usage group_by=day from a day that does not exist: 400 naming it" $r "$code"
code=$(get "$lab" "/v1/accounts/berlin-e/usage?group_by=day" "$tmp/u")
[ "$code" = 404 ] && r=ok || r=fail
check "the bound key asking for berlin-e's days: 404" $r "$code"
code=$(get "$admin" "/v1/accounts/nobody/usage" "$tmp/u")
[ "$code" = 404 ] && r=ok || r=fail
check "usage of an unknown account: 404" $r "$code"

# ---- quotes ---------------------------------------------------------------
counts() {
    sql -c "SELECT (SELECT count(*) FROM billing.usage_events) || ' ' ||
        (SELECT count(*) FROM billing.usage_aggregates) || ' ' ||
        (SELECT coalesce(sum(quantity), 0) FROM billing.usage_aggregates) || ' ' ||
        (SELECT count(*) FROM billing.invoices) || ' ' ||
        (SELECT count(*) FROM billing.invoice_lines) || ' ' ||
        (SELECT count(*) FROM billing.credit_ledger) || ' ' ||
        (SELECT count(*) FROM billing.rejected_events)"
}
before=$(counts)
quote() {
    curl -s -o "$2" -D "$2.h" -w '%{http_code}' -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' --data-binary "$3" "$url/v1/quote"
}
rate=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print([r["price"] for r in p["versions"][-1]["rates"] if r["meter"]=="gpu" and r["model"]=="RTX4090" and r["region"]=="cn-east-1"][0])' "$ex/pricebook.json")
code=$(quote "$admin" "$tmp/q" '{"account":"team-c","meter":"gpu","model":"RTX4090","region":"cn-east-1","quantity":"1","start":"2026-03-02T00:00:00+08:00","seconds":3600}')
validate POST /v1/quote 200 "$tmp/q"
python3 -c 'import json,sys; q=json.load(open(sys.argv[1])); sys.exit(0 if q["charge"]==sys.argv[2] else 1)' "$tmp/q" "$rate" && r=ok || r=fail
check "a quote of one RTX4090 for one hour costs the price book's rate ($rate)" $r "$code $(cat "$tmp/q")"
code=$(quote "$admin" "$tmp/q2" '{"account":"team-c","model":"RTX4090","region":"cn-east-1","start":"2026-03-02T00:00:00+08:00","end":"2026-03-02T02:00:00+08:00","quantity":"8"}')
python3 -c 'import json,sys; from decimal import Decimal as D; q=json.load(open(sys.argv[1])); sys.exit(0 if D(q["charge"])==D(sys.argv[2])*16 else 1)' "$tmp/q2" "$rate" && r=ok || r=fail
check "eight GPUs for two hours (start and end): 16 times the rate" $r "$code $(cat "$tmp/q2")"
code=$(quote "$admin" "$tmp/q3" '{"account":"lab-a","model":"RTX4090","region":"cn-east-1","start":"2026-01-10T00:00:00+08:00","seconds":3600}')
[ "$code" = 200 ] && r=ok || r=fail
validate POST /v1/quote 200 "$tmp/q3"
check "a quote of lab-a inside its plan's term" $r "$code $(cat "$tmp/q3")"
fee=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print([f["fee"] for f in p["versions"][-1]["plan_fees"] if f["plan"]=="rtx4090x8-daily"][0])' "$ex/pricebook.json")
code=$(quote "$admin" "$tmp/qp" '{"account":"team-c","model":"RTX4090","region":"cn-east-1","quantity":"8","start":"2026-03-02T00:00:00+08:00","seconds":3600,"plan":"rtx4090x8-daily"}')
validate POST /v1/quote 200 "$tmp/qp"
python3 -c 'import json,sys; q=json.load(open(sys.argv[1])); sys.exit(0 if q["charge"]==sys.argv[2] and q["plan"]=="rtx4090x8-daily" else 1)' "$tmp/qp" "$fee" && r=ok || r=fail
check "eight GPUs for an hour on plan rtx4090x8-daily: the day's fee ($fee), the usage included" $r "$code $(cat "$tmp/qp")"
code=$(quote "$admin" "$tmp/qn" '{"account":"team-c","seconds":3600,"plan":"no-such-plan"}')
[ "$code" = 400 ] && grep -q "no-such-plan" "$tmp/qn" && r=ok || r=fail
check "a quote with an unknown plan: 400 naming it" $r "$code $(cat "$tmp/qn")"
[ "$(counts)" = "$before" ] && r=ok || r=fail
check "quotes store nothing (events, aggregates, invoices, lines, ledger, dead letters)" $r "$before vs $(counts)"
code=$(quote "$lab" "$tmp/q4" '{"account":"team-c","seconds":3600}')
[ "$code" = 404 ] && r=ok || r=fail
validate POST /v1/quote 404 "$tmp/q4"
check "the bound key quoting for team-c: 404" $r "$code"
code=$(quote "$admin" "$tmp/q5" '{"account":"lab-a","meter":"gpux","seconds":3600}')
[ "$code" = 400 ] && r=ok || r=fail
validate POST /v1/quote 400 "$tmp/q5"
check "a quote of an unknown meter: 400" $r "$code $(cat "$tmp/q5")"
code=$(quote "$admin" "$tmp/q6" '{"account":"lab-a","quantity":"abc","seconds":3600}')
[ "$code" = 400 ] && r=ok || r=fail
check "a quote of a bad quantity: 400" $r "$code $(cat "$tmp/q6")"
code=$(quote "$admin" "$tmp/q7" '{"account":"lab-a"}')
[ "$code" = 400 ] && r=ok || r=fail
check "a quote without a duration: 400" $r "$code"
code=$(quote "$admin" "$tmp/q8" 'not json')
[ "$code" = 400 ] && r=ok || r=fail
check "a quote that is not JSON: 400" $r "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin" "$url/v1/quote")
[ "$code" = 405 ] && r=ok || r=fail
check "GET /v1/quote: 405" $r "$code"

check "every answer validates against doc/openapi.yaml" $conforms "$conforms_why"
curl -s "http://127.0.0.1:$mport/metrics" >"$tmp/metrics"
grep -q 'billingd_api_requests_total{route="/v1/invoices/{number}",status="304"}' "$tmp/metrics" && r=ok || r=fail
check "/metrics counts the 304s of /v1/invoices/{number}" $r

# ---- a random scenario: the API's documents and usage are the CLI's ----
# 30 accounts (a trial grant each, a monthly plan every 6th), 2 000 events
# drawn from a seed (bench/gen_events; BILLING_TEST_SEED=S repeats a run),
# closed as drafts; then for every draft the API's JSON, PDF and CSV are
# `billing invoice export`'s bytes and its usage per meter the draft's lines.
seed=${BILLING_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "random scenario: BILLING_TEST_SEED=$seed"
"$builddir/bench/gen_events" --accounts-json --accounts 30 --grants 40.00 --plans 6 >"$tmp/sc.json" &&
    "$builddir/bench/gen_events" --seed "$seed" --accounts 30 2000 >"$tmp/sc.jsonl" || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/sc.json" >/dev/null || exit 99
$billing ingest "$tmp/sc.jsonl" >/dev/null 2>&1 || exit 99
$billing close --period 2026-01 --grace 0 --quiet >/dev/null 2>&1 || exit 99
for f in json csv pdf; do
    $billing invoice export --format $f --out "$tmp/sc" --period 2026-01 >/dev/null 2>&1 || exit 99
done
kill "$pid" && wait "$pid"
pids=""
billingd_start random --set "http.listen=127.0.0.1:$mport"
same=ok
why=
n=0
for f in "$tmp"/sc/draft-*.json; do
    name=$(basename "$f" .json)
    for form in json pdf csv; do
        code=$(get "$admin" "/v1/invoices/${name#draft-}.$form" "$tmp/a.$form")
        if [ "$code" != 200 ] || ! cmp -s "$tmp/a.$form" "$tmp/sc/$name.$form"; then
            same=fail
            why="$why $name.$form($code)"
        fi
    done
    acct=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["account"])' "$f")
    code=$(get "$admin" "/v1/accounts/$acct/usage?from=2026-01&to=2026-01&group_by=meter" "$tmp/u")
    PYTHONPATH="$tmp" python3 "$tmp/usage_eq.py" "$tmp/u" "$f" >/dev/null ||
        { same=fail; why="$why usage:$acct($code)"; }
    n=$((n + 1))
done
[ "$n" -ge 25 ] || { same=fail; why="$why only $n drafts"; }
check "seed $seed: the $n drafts' JSON, PDF and CSV and usage per meter as billing gives them" $same "$why"
finish
