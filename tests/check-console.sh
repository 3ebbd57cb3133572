#!/bin/sh
# check-console.sh - the web console (billingd/console, doc/console.md) in a
# real headless Chromium driven by Selenium (tests/console-check.py),
# against billingd (consuming a topic of its own on the private Kafka,
# BILLING_KAFKA_BROKERS, and serving the API on a free loopback port) and
# the private PostgreSQL (BILLING_PG_CONNINFO; without them, or without
# chromium, chromedriver or python3-selenium, the test FAILS, never skips):
#   - static serving: the four files with their types, CSP and nosniff;
#     no path traversal (../, %2e%2e, an absolute path), 405 on POST;
#   - GET /v1/accounts?q=: search by name; a bound key lists its own only;
#   - in the browser: a bound key's page shows the balance figure for
#     figure as `billing account balance`; it cannot open another account
#     (UI and API 404); an operator key finds an account by name; a name
#     with <script> and <img onerror> is shown as text; the usage chart
#     per day has the days and amounts of GET .../usage?group_by=day; the
#     operations page shows the lag per partition and the counters of GET
#     /v1/ops/status, which a bound key may not read (403) and whose page
#     it is not offered; no request leaves loopback; no JavaScript error.
#     Screenshots in $tmp (kept with CONSOLE_SHOTS=DIR).
# The data: the example (examples/gpu-cloud) plus a grant in force now and
# usage this month for student-b, and an account with a hostile name.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="$builddir/billingd/billingd"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-console.XXXXXX") || exit 99
db="billing_console_$$"
pids=""

. "$srcdir/tests/checklib.sh"

# Debian's python3-selenium is in the system Python (a pyenv python3 may come first).
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
need_pg
if [ -z "${BILLING_KAFKA_BROKERS:-}" ]; then
    check "BILLING_KAFKA_BROKERS is set (scripts/services.sh start && . var/services.env)" fail
    finish
fi
for p in chromium chromedriver curl; do
    command -v $p >/dev/null || { check "$p is installed (scripts/install-deps.sh)" fail; finish; }
done
$py -c 'import selenium' 2>/dev/null ||
    { check "python3-selenium is installed (scripts/install-deps.sh)" fail; finish; }

cleanup() {
    billingd_stop_all
    rm -rf "$tmp"
    db_drop_all
}
trap cleanup EXIT
trap 'exit 99' INT TERM
db_new "$db"
db_use "$db"

# The example, a grant in force now and usage of this month for student-b
# (ended: the balance does not move while the test reads it), and an
# account whose name is markup.
$py - "$ex" "$tmp" <<'PY' || exit 99
import datetime, json, sys
ex, tmp = sys.argv[1], sys.argv[2]
now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
iso = lambda t: t.strftime('%Y-%m-%dT%H:%M:%SZ')
acc = json.load(open(ex + '/accounts.json'))
acc['accounts'].append({'id': 'x-hostile', 'currency': 'CNY', 'time_zone': 'Asia/Shanghai',
    'tax_rate': '0',
    'name': '<script>window.__pwned=1;alert(1)</script><img src=x onerror="window.__pwned=2">'})
# The account of the records billingd consumes (bench/produce_events: acct-000000).
acc['accounts'].append({'id': 'acct-000000', 'currency': 'CNY', 'time_zone': 'Asia/Shanghai',
    'tax_rate': '0', 'name': 'Produced usage'})
acc['grants'].append({'id': 'console-trial', 'account': 'student-b', 'amount': '25.00',
    'granted_at': iso(now - datetime.timedelta(days=5)),
    'expires_at': iso(now + datetime.timedelta(days=25)), 'applies_to': ['usage'], 'priority': 0})
json.dump(acc, open(tmp + '/accounts.json', 'w'), ensure_ascii=False)
with open(tmp + '/events.jsonl', 'w') as f:
    f.write(open(ex + '/events.jsonl').read())
    for i in range(2):
        s = now - datetime.timedelta(minutes=50 - 20 * i)
        f.write(json.dumps({'id': 'console-gpu-%d' % i, 'account': 'student-b', 'resource': 'i-b9',
            'meter': 'gpu', 'start': iso(s), 'end': iso(s + datetime.timedelta(minutes=15)),
            'quantity': '8', 'model': 'RTX4090', 'region': 'cn-east-1'}) + '\n')
with open(tmp + '/bad.jsonl', 'w') as f:
    f.write(json.dumps({'id': 'console-bad-0', 'account': 'nobody', 'resource': 'i-x',
        'meter': 'gpu', 'start': iso(now - datetime.timedelta(hours=2)),
        'end': iso(now - datetime.timedelta(hours=1)), 'quantity': '1', 'model': 'RTX4090',
        'region': 'cn-east-1'}) + '\n')
PY
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/accounts.json" >/dev/null || exit 99
$billing ingest "$tmp/events.jsonl" >/dev/null 2>&1 || exit 99
# One record refused (unknown account), for the rejected events page: exit 1.
$billing ingest "$tmp/bad.jsonl" >/dev/null 2>&1
[ $? = 1 ] || exit 99
bound=$($billing apikey create --scope accounts:read --scope invoices:read --account student-b \
    --label console 2>/dev/null) || exit 99
operator=$($billing apikey create --scope accounts:read --scope invoices:read --scope admin \
    --label console 2>/dev/null) || exit 99
# January's invoices, for the invoice pages (when the API has them).
$billing close --period 2026-01 --finalize --grace 0 --quiet >/dev/null 2>&1 || exit 99
$billing account balance student-b >"$tmp/balance.txt" || exit 99

# A topic of its own (2 partitions) with 20 events of acct-000000, which
# billingd consumes (the lag of the operations page) while it serves the
# API on a free loopback port.
topic=console-usage-$$
"$builddir/bench/produce_events" --rate 10000 --accounts 1 --partitions 2 "$BILLING_KAFKA_BROKERS" "$topic" 20 \
    >/dev/null 2>"$tmp/produce.log" || { check "20 events produced to $topic" fail "$(tail -3 "$tmp/produce.log")"; finish; }
billingd_start console --set api.console_dir="$srcdir/billingd/console" --set "topics=$topic" \
    --set "group=console-$$" --set "kafka.bootstrap.servers=$BILLING_KAFKA_BROKERS"

# The operations route: admin keys of every account; it reports the 20
# events stored and the lag of their partition once billingd has them.
stored=
i=0
while [ $i -lt 600 ]; do
    stored=$(curl -s -H "Authorization: Bearer $operator" "$url/v1/ops/status" |
        $py -c 'import json,sys; c=json.load(sys.stdin)["consumer"]; print(c["stored"], len(c["lag"]))' 2>/dev/null)
    [ "$stored" = "20 1" ] && break
    kill -0 $pid 2>/dev/null || break
    i=$((i + 1))
    sleep 0.1
done
check "GET /v1/ops/status: the 20 events consumed and the lag of their partition" \
    "$([ "$stored" = "20 1" ] && echo ok)" "stored and partitions: $stored; $(tail -3 "$tmp/billingd-console.log")"
curl -s -D "$tmp/ops.h" -o "$tmp/ops" -H "Authorization: Bearer $operator" "$url/v1/ops/status"
$py "$srcdir/tests/openapi-check.py" --status 200 "$srcdir/doc/openapi.yaml" GET /v1/ops/status \
    "$tmp/ops.h" "$tmp/ops" 2>"$tmp/ops.err"
check "GET /v1/ops/status answers as doc/openapi.yaml says" "$([ $? = 0 ] && echo ok)" "$(cat "$tmp/ops.err")"
curl -s -D "$tmp/ops.h" -o "$tmp/ops" -H "Authorization: Bearer $bound" "$url/v1/ops/status"
$py "$srcdir/tests/openapi-check.py" --status 403 "$srcdir/doc/openapi.yaml" GET /v1/ops/status \
    "$tmp/ops.h" "$tmp/ops" 2>"$tmp/ops.err"
check "a bound key may not read the operations status (403, as doc/openapi.yaml says)" \
    "$([ $? = 0 ] && echo ok)" "$(cat "$tmp/ops.err")"

# Static serving: types and headers; nothing but the known files.
hdr() { curl -s -D - -o /dev/null "$@" | tr -d '\r'; }
ok_headers=ok
for f in "/console/:text/html" "/console/app.js:text/javascript" "/console/app.css:text/css" \
    "/console/icon.svg:image/svg+xml"; do
    h=$(hdr "$url${f%%:*}")
    echo "$h" | grep -q "^HTTP/1.1 200" || ok_headers="fail ${f%%:*} status"
    echo "$h" | grep -qi "^content-type: ${f#*:}" || ok_headers="fail ${f%%:*} type"
    echo "$h" | grep -qi "^x-content-type-options: nosniff" || ok_headers="fail ${f%%:*} nosniff"
    echo "$h" | grep -qi "^content-security-policy: default-src 'none'; script-src 'self';" ||
        ok_headers="fail ${f%%:*} csp"
done
check "the console's files with their type, CSP and nosniff" "${ok_headers%% *}" "${ok_headers#* }"
bad=
for p in /console/../billingd/console.c /console/..%2fconsole.c /console/%2e%2e/console.c \
    /console//etc/passwd /console/app.js/ /console/APP.JS /console/.%2e/api.c; do
    code=$(curl -s --path-as-is -o "$tmp/body" -w '%{http_code}' "$url$p")
    if [ "$code" != 404 ] || grep -q "include" "$tmp/body"; then bad="$bad $p:$code"; fi
done
check "no path traversal: other paths are 404" "$([ -z "$bad" ] && echo ok)" "$bad"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/console/app.js")
check "POST to the console is 405" "$([ "$code" = 405 ] && echo ok)" "got $code"
code=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$url/console")
check "/console redirects to /console/" "$([ "$code" = "301 $url/console/" ] && echo ok)" "got $code"

# The accounts route.
get() { curl -s -H "Authorization: Bearer $1" "$url$2"; }
out=$(get "$operator" "/v1/accounts?q=vision")
check "GET /v1/accounts?q= finds by name (case insensitive)" \
    "$(echo "$out" | grep -q '"data":\[{"id":"lab-a"' && echo ok)" "$out"
out=$(get "$bound" "/v1/accounts")
check "a bound key lists its own account only" \
    "$(echo "$out" | grep -q '^{"data":\[{"id":"student-b"[^]]*}\]}$' && echo ok)" "$out"
out=$(get "$bound" "/v1/accounts?q=lab")
check "a bound key's search finds no other account" \
    "$([ "$out" = '{"data":[]}' ] && echo ok)" "$out"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $operator" \
    "$url/v1/accounts?q=$($py -c 'print("a" * 129)')")
check "a search over 128 bytes is 400" "$([ "$code" = 400 ] && echo ok)" "got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $bound" \
    "$url/v1/accounts/lab-a/balance")
check "the API: a bound key does not find another account (404)" \
    "$([ "$code" = 404 ] && echo ok)" "got $code"

# The invoice pages appear when the API has GET /v1/invoices: then one of
# lab-a's invoices is compared with `billing invoice export --format json`.
invoice=
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $operator" "$url/v1/invoices")
if [ "$code" = 200 ]; then
    $billing invoice export --format json --out "$tmp/json" --period 2026-01 >/dev/null 2>&1 || exit 99
    invoice=$(grep -l '"account": *"lab-a"' "$tmp"/json/*.json | head -1)
    [ -n "$invoice" ] || { check "billing invoice export wrote lab-a's invoice" fail; finish; }
fi

out=$(get "$operator" "/v1/rejected")
check "GET /v1/rejected lists the refused record with its reason" \
    "$(echo "$out" | grep -q '"event_id":"console-bad-0","reason_code":"unknown_account"' && echo ok)" "$out"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $bound" "$url/v1/rejected")
check "a bound key may not list rejected events (403)" "$([ "$code" = 403 ] && echo ok)" "got $code"

# The browser.
$py "$srcdir/tests/console-check.py" --url "$url" --bound "$bound" --operator "$operator" \
    --balance "$tmp/balance.txt" --shots "${CONSOLE_SHOTS:-$tmp}" --downloads "$tmp/downloads" \
    --topic "$topic" \
    ${invoice:+--invoice "$invoice"} >"$tmp/browser.out" 2>&1
rc=$?
while IFS= read -r line; do
    case $line in
    "ok "*) check "${line#ok }" ok ;;
    "FAIL "*) n=${line#FAIL }; check "${n%%: *}" fail "${n#*: }" ;;
    esac
done <"$tmp/browser.out"
check "the browser checks ran to their end" "$([ $rc = 0 ] && echo ok)" \
    "exit $rc: $(tail -5 "$tmp/browser.out")"
finish
