#!/bin/sh
# check-api.sh - billingd's HTTP API (issue 25) with a real client (curl)
# against the real server in API-only mode and the private PostgreSQL
# (BILLING_PG_CONNINFO, a database of its own; without it the test FAILS,
# never skips). Every answer's status and body is checked against
# doc/openapi.yaml (tests/openapi-check.py), and:
#   - the example's events posted as JSON Lines, then again as a JSON
#     array: the second time all "duplicate", nothing stored twice; a
#     changed event with a used id is a "conflict" naming the id; an
#     invalid event is "rejected" with the reason text `billing rejected
#     list` shows;
#   - CloudEvents single and batch, and length-delimited protobuf, are
#     stored as the same events sent as JSON (id, time, subject, type, data
#     mapped as documented);
#   - the balance of an account with a grant equals, figure for figure,
#     `billing account balance` (the same store, the same instant's month);
#   - no key 401, a revoked or malformed key 401, a missing scope 403, a
#     key bound to an account gets 404 for every other account, with the
#     body an unknown account gets;
#   - a body over api.body_max 413, a burst past api.rate 429 with
#     Retry-After, headers sent slowly past api.request_ms: closed (or
#     408); a wrong method 405, a wrong media type 415;
#   - TLS (a certificate openssl makes): HTTPS answers, plain HTTP not;
#   - `billing load` of a new account while billingd runs: seen at once;
#   - /metrics counts the requests by route and status;
#   - SIGTERM with a request in flight (headers in, body not yet sent):
#     answered in full; every billingd exits 0; no sanitizer report.
# billingd's readiness is its log line (event=api_listening port=N, with
# api.listen on port 0), polled in a bounded loop. Prints a Check-style
# summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="$builddir/billingd/billingd"
ex="$srcdir/examples/gpu-cloud"
spec="$srcdir/doc/openapi.yaml"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-api.XXXXXX") || exit 99
pids=""

. "$srcdir/tests/checklib.sh"

api_scratch api
sql() {
    psql "$BILLING_PG_CONNINFO" -XAtc "$1"
}

# The example's accounts with one more grant for lab-a, valid now, and
# usage of lab-a now: a balance with credit left and a burn.
python3 - "$ex/accounts.json" "$tmp/accounts.json" "$tmp/now.jsonl" <<'EOF' || exit 99
import json, sys, time
d = json.load(open(sys.argv[1]))
now = int(time.time()) // 3600 * 3600
iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
d["grants"].append({"id": "api-lab-a", "account": "lab-a", "amount": "10000.00",
                    "granted_at": iso(now - 7200), "expires_at": "2100-01-01T00:00:00Z",
                    "applies_to": ["usage"], "priority": 0})
d["grants"].append({"id": "api-lab-a-small", "account": "lab-a", "amount": "0.50",
                    "granted_at": iso(now - 7200), "expires_at": "2099-01-01T00:00:00Z",
                    "applies_to": ["usage"], "priority": 0})
json.dump(d, open(sys.argv[2], "w"))
with open(sys.argv[3], "w") as f:
    f.write(json.dumps({"id": "now-1", "account": "lab-a", "resource": "i-now", "meter": "gpu",
                        "start": iso(now - 3600), "end": iso(now + 3600), "quantity": "1",
                        "model": "RTX4090", "region": "cn-east-1"}) + "\n")
EOF
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/accounts.json" >/dev/null || exit 99

key_of() {
    $billing apikey create "$@" 2>"$tmp/err" || {
        cat "$tmp/err" >&2
        exit 99
    }
}
admin=$(key_of --scope admin --label "check-api admin")
writer=$(key_of --scope events:write)
reader=$(key_of --scope accounts:read --account lab-a)
console=$(key_of --scope events:write --account lab-a)
spare=$(key_of --scope admin --label "a bucket of its own")
gone=$(key_of --scope admin)
gone_id=$(echo "$gone" | cut -d_ -f2)
$billing apikey revoke "$gone_id" >/dev/null || exit 99

# api NAME STATUS METHOD PATH KEY [CURL-ARGS...]: one request; the answer
# (in $tmp/hdr, $tmp/body) has STATUS and matches doc/openapi.yaml.
api() {
    name=$1
    want=$2
    method=$3
    path=$4
    key=$5
    shift 5
    if [ -n "$key" ]; then
        set -- -H "Authorization: Bearer $key" "$@"
    fi
    curl -sS -X "$method" -D "$tmp/hdr" -o "$tmp/body" "$@" "$url$path" 2>"$tmp/err"
    api_answer "$name" "$want" "$method" "$path"
}

# /metrics (http.listen) logs no port it was given: a free one, found by binding port 0.
mport=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
# The description itself: every schema valid JSON Schema, every $ref found,
# and the routes billingd/api.c serves (route_names) equal to the paths of
# doc/openapi.yaml (tests/openapi-check.py --routes).
python3 "$srcdir/tests/openapi-check.py" --routes "$spec" "$srcdir/billingd/api.c" >"$tmp/lint" 2>&1
[ $? -eq 0 ] && r=ok || r=fail
check "doc/openapi.yaml: valid schemas, every \$ref found, the routes of api.c and no other" $r "$(cat "$tmp/lint")"

billingd_start main --set "http.listen=127.0.0.1:$mport"
main_url=$url
main_pid=$pid

# ---- store connections opened at start --------------------------------------
# Before its first request billingd has its four store connections open,
# each with the balance's statements prepared: the last statement of
# each session is the running events' (the last bs_balance_prepare
# prepares), not a request's (doc/performance.md: opened on first use,
# a burst's first requests waited about 100 ms for them).
slots=$(sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
             AND pid <> pg_backend_pid() AND state = 'idle'
             AND query LIKE 'SELECT account_id, event_id, resource_id, meter,%'")
expect_eq "billingd opens its 4 store connections and prepares the balance before a request" \
    "$slots" 4
# A database that cannot be reached at start: billingd says so once (it
# does not wait for every slot's retries), listens anyway, and opens its
# store connections on the first requests, as before (not asserted here).
billingd_start nodb --set http.listen= --set "db=$BILLING_PG_CONNINFO dbname=billing_missing_$$"
expect_eq "a database missing at start: one api_slot_open_failed, then billingd listens" \
    "$(grep -c 'event=api_slot_open_failed' "$tmp/billingd-nodb.log")" 1
url=$main_url
pid=$main_pid

# ---- events ----------------------------------------------------------------
# The example repeats 2 of its events (a retried send): 2 duplicates.
lines=$(grep -c . "$ex/events.jsonl")
ids=$(python3 -c "import json, sys; print(len({json.loads(l)['id'] for l in open(sys.argv[1]) if l.strip()}))" \
    "$ex/events.jsonl")
api "JSON Lines" 200 POST /v1/events "$writer" -H "Content-Type: application/x-ndjson" \
    --data-binary "@$ex/events.jsonl"
expect_eq "JSON Lines: every event accepted once" \
    "$(jv 'd["events"], d["accepted"], d["duplicates"], d["rejected"], len(d["results"])')" \
    "($lines, $ids, $((lines - ids)), 0, $lines)"
stored=$(sql "SELECT count(*) FROM billing.usage_events")
expect_eq "JSON Lines: one stored row per event id" "$stored" "$ids"
python3 -c "import json, sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1]) if l.strip()]))" \
    "$ex/events.jsonl" >"$tmp/events.json"
api "the same events as a JSON array" 200 POST /v1/events "$writer" \
    -H "Content-Type: application/json" --data-binary "@$tmp/events.json"
expect_eq "the same events again: every one a duplicate" \
    "$(jv '(d["accepted"], d["duplicates"], sorted(set(r["status"] for r in d["results"])))')" \
    "(0, $lines, ['duplicate'])"
expect_eq "the same events again: nothing stored twice" "$(sql "SELECT count(*) FROM billing.usage_events")" "$ids"
python3 -c "import json, sys; e = json.loads(open(sys.argv[1]).readline()); e['quantity'] = '999'; print(json.dumps([e]))" \
    "$ex/events.jsonl" >"$tmp/changed.json"
first_id=$(python3 -c "import json, sys; print(json.loads(open(sys.argv[1]).readline())['id'])" "$ex/events.jsonl")
api "a changed event with a used id" 200 POST /v1/events "$writer" -H "Content-Type: application/json" \
    --data-binary "@$tmp/changed.json"
expect_eq "a changed event with a used id is a conflict naming the id" \
    "$(jv 'd["results"][0]["status"], d["results"][0]["id"]')" "('conflict', '$first_id')"
printf '[{"id":"bad-1","account":"lab-a","resource":"i-1","meter":"nosuch","start":"2026-01-05T10:00:00Z","end":"2026-01-05T11:00:00Z","quantity":"1"}]' >"$tmp/bad.json"
api "an invalid event" 200 POST /v1/events "$writer" -H "Content-Type: application/json" \
    --data-binary "@$tmp/bad.json"
expect_eq "an invalid event is rejected" "$(jv 'd["results"][0]["status"], d["rejected"]')" "('rejected', 1)"
reason=$(jv 'd["results"][0]["reason"]')
$billing rejected list >"$tmp/rejected" 2>&1
if [ -n "$reason" ] && grep -F -- "bad-1" "$tmp/rejected" | grep -qF -- "$reason"; then
    check "the rejection's reason is the text billing rejected list shows" ok
else
    check "the rejection's reason is the text billing rejected list shows" fail \
        "'$reason' vs $(cat "$tmp/rejected")"
fi
sed 's/"account":"lab-a"/"account":"team-c"/; s/"meter":"nosuch"/"meter":"gpu"/; s/bad-1/other-1/' \
    "$tmp/bad.json" >"$tmp/other.json"
api "an event of another account from a bound key" 200 POST /v1/events "$console" \
    -H "Content-Type: application/json" --data-binary "@$tmp/other.json"
expect_eq "an event of another account from a bound key is rejected, and not stored" \
    "$(jv 'd["results"][0]["status"], d["results"][0]["reason"]')/$(sql "SELECT count(*) FROM billing.usage_events WHERE event_id = 'other-1'")" \
    "('rejected', 'account: this key may send events of its own account only')/0"
python3 -c "import sys; sys.stdout.write('[' + ','.join(['{}'] * 10001) + ']')" >"$tmp/many.json"
api "10001 events in one request" 413 POST /v1/events "$writer" -H "Content-Type: application/json" \
    --data-binary "@$tmp/many.json"

# CloudEvents: the same events as JSON, single and batch.
cat >"$tmp/ce.json" <<'EOF'
{"specversion":"1.0","id":"ce-1","source":"check-api","type":"gpu","subject":"team-c","time":"2026-01-05T10:00:00Z","datacontenttype":"application/json","data":{"resource":"i-ce","end":"2026-01-05T12:00:00Z","quantity":"8","model":"RTX4090","region":"cn-east-1"}}
EOF
cat >"$tmp/ce-batch.json" <<'EOF'
[{"specversion":"1.0","id":"ce-2","source":"check-api","type":"gpu","subject":"team-c","time":"2026-01-06T10:00:00Z","data":{"resource":"i-ce","end":"2026-01-06T10:30:00Z","quantity":"2.5","model":"A100-80G","region":"cn-east-1"}},
 {"specversion":"1.0","id":"ce-3","source":"check-api","type":"storage","subject":"team-c","time":"2026-01-07T00:00:00Z","data":{"resource":"d-ce","end":"2026-01-08T00:00:00Z","quantity":"100","region":"cn-east-1"}}]
EOF
cat >"$tmp/js.json" <<'EOF'
[{"id":"js-1","account":"team-c","resource":"i-ce","meter":"gpu","start":"2026-01-05T10:00:00Z","end":"2026-01-05T12:00:00Z","quantity":"8","model":"RTX4090","region":"cn-east-1"},
 {"id":"js-2","account":"team-c","resource":"i-ce","meter":"gpu","start":"2026-01-06T10:00:00Z","end":"2026-01-06T10:30:00Z","quantity":"2.5","model":"A100-80G","region":"cn-east-1"},
 {"id":"js-3","account":"team-c","resource":"d-ce","meter":"storage","start":"2026-01-07T00:00:00Z","end":"2026-01-08T00:00:00Z","quantity":"100","region":"cn-east-1"}]
EOF
api "a CloudEvent" 200 POST /v1/events "$writer" -H "Content-Type: application/cloudevents+json" \
    --data-binary "@$tmp/ce.json"
expect_eq "a CloudEvent is accepted under its id" "$(jv 'd["accepted"], d["results"][0]["id"]')" "(1, 'ce-1')"
api "a CloudEvents batch" 200 POST /v1/events "$writer" \
    -H "Content-Type: application/cloudevents-batch+json" --data-binary "@$tmp/ce-batch.json"
expect_eq "a CloudEvents batch is accepted" "$(jv 'd["accepted"], [r["id"] for r in d["results"]]')" \
    "(2, ['ce-2', 'ce-3'])"
api "the same events as JSON" 200 POST /v1/events "$admin" -H "Content-Type: application/json" \
    --data-binary "@$tmp/js.json"
rows="SELECT account_id, resource_id, meter, start_time, start_nanos, end_time, end_nanos, quantity, model, region FROM billing.usage_events"
sql "$rows WHERE event_id LIKE 'ce-%' ORDER BY event_id" >"$tmp/ce.rows"
sql "$rows WHERE event_id LIKE 'js-%' ORDER BY event_id" >"$tmp/js.rows"
if [ "$(wc -l <"$tmp/ce.rows")" -eq 3 ] && cmp -s "$tmp/ce.rows" "$tmp/js.rows"; then
    check "CloudEvents are stored as the same events sent as JSON" ok
else
    check "CloudEvents are stored as the same events sent as JSON" fail "$(cat "$tmp/ce.rows") vs $(cat "$tmp/js.rows")"
fi
# Length-delimited protobuf (billing.v1.UsageEvent, proto/billing/v1), the
# same events again under other ids.
python3 - "$tmp/js.json" "$tmp/events.pb" "$tmp/truncated.pb" <<'EOF' || exit 99
import calendar, json, sys, time
def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
def text(num, s):
    data = s.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data
def stamp(num, s):
    inner = varint(1 << 3) + varint(calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ")))
    return varint(num << 3 | 2) + varint(len(inner)) + inner
meters = {"gpu": 1, "gpuless": 2, "storage": 3, "traffic": 4}
body = b""
for e in json.load(open(sys.argv[1])):
    m = (text(1, e["id"].replace("js-", "pb-")) + text(2, e["account"]) + text(3, e["resource"])
         + varint(4 << 3) + varint(meters[e["meter"]]) + stamp(5, e["start"]) + stamp(6, e["end"])
         + text(7, e["quantity"]) + (text(8, e["model"]) if e.get("model") else b"")
         + text(9, e["region"]))
    body += varint(len(m)) + m
open(sys.argv[2], "wb").write(body)
open(sys.argv[3], "wb").write(body[:-3])
EOF
api "protobuf, length-delimited" 200 POST /v1/events "$writer" -H "Content-Type: application/x-protobuf" \
    --data-binary "@$tmp/events.pb"
expect_eq "protobuf: every message accepted under its id" \
    "$(jv 'd["accepted"], [r["id"] for r in d["results"]]')" "(3, ['pb-1', 'pb-2', 'pb-3'])"
sql "$rows WHERE event_id LIKE 'pb-%' ORDER BY event_id" >"$tmp/pb.rows"
cmp -s "$tmp/pb.rows" "$tmp/js.rows" && r=ok || r=fail
check "protobuf events are stored as the same events sent as JSON" $r "$(cat "$tmp/pb.rows")"
api "the same protobuf again" 200 POST /v1/events "$writer" -H "Content-Type: application/x-protobuf" \
    --data-binary "@$tmp/events.pb"
expect_eq "the same protobuf again: duplicates" "$(jv 'd["accepted"], d["duplicates"]')" "(0, 3)"
api "protobuf cut short" 400 POST /v1/events "$writer" -H "Content-Type: application/x-protobuf" \
    --data-binary "@$tmp/truncated.pb"
api "protobuf of another account from a bound key" 200 POST /v1/events "$console" \
    -H "Content-Type: application/x-protobuf" --data-binary "@$tmp/events.pb"
expect_eq "protobuf of another account from a bound key: rejected" \
    "$(jv 'sorted(set(r["status"] + ": " + r.get("reason", "") for r in d["results"]))')" \
    "['rejected: account: this key may send events of its own account only']"
api "a CloudEvent of another specversion" 200 POST /v1/events "$writer" \
    -H "Content-Type: application/cloudevents+json" --data-binary '{"specversion":"0.3","id":"x"}'
expect_eq "a CloudEvent of another specversion is rejected" "$(jv 'd["results"][0]["status"]')" rejected
api "a body that is not JSON" 400 POST /v1/events "$writer" -H "Content-Type: application/json" \
    --data-binary '[{"id":'
api "an unknown media type" 415 POST /v1/events "$writer" -H "Content-Type: text/plain" \
    --data-binary 'x'

# ---- balance ---------------------------------------------------------------
api "usage now" 200 POST /v1/events "$writer" -H "Content-Type: application/x-ndjson" \
    --data-binary "@$tmp/now.jsonl"
api "balance" 200 GET /v1/accounts/lab-a/balance "$reader"
jv '"\n".join("%s=%s" % (k, d[k]) for k in ("account", "credit_remaining", "month", "subtotal", "credits", "tax", "total", "currency", "account_credit", "account_credit_left"))' >"$tmp/api.balance"
$billing account balance lab-a | grep -v '^at=' >"$tmp/cli.balance"
if cmp -s "$tmp/api.balance" "$tmp/cli.balance" && grep -q '^subtotal=[1-9]' "$tmp/cli.balance" &&
    grep -q '^credit_remaining=99[0-9][0-9]\.' "$tmp/cli.balance"; then
    check "the balance equals billing account balance, figure for figure" ok
else
    check "the balance equals billing account balance, figure for figure" fail \
        "$(tr '\n' ' ' <"$tmp/api.balance") vs $(tr '\n' ' ' <"$tmp/cli.balance")"
fi
# The small grant expires first: it is spent first, wholly.
expect_eq "the balance lists the grants valid now; what they have left adds up to the credit left" \
    "$(jv 'sorted((g["grant"], g["remaining"]) for g in d["grants"])[1:], sum(__import__("decimal").Decimal(g["remaining"]) for g in d["grants"]) == __import__("decimal").Decimal(d["credit_remaining"])')" \
    "([('api-lab-a-small', '0.00')], True)"
expect_eq "the balance says when the credit runs out at the running event's burn" \
    "$(jv 'd["running_events"], d["exhausts_at"] is not None')" "(1, True)"
api "grants" 200 GET /v1/accounts/lab-a/grants "$reader"
expect_eq "grants: the account's three grants" "$(jv '[g["id"] for g in d["data"]]')" \
    "['api-lab-a', 'api-lab-a-small', 'trial-lab-a']"
api "subscriptions" 200 GET /v1/accounts/lab-a/subscriptions "$admin"
expect_eq "subscriptions: as loaded" "$(jv 'len(d["data"])')" \
    "$(sql "SELECT count(*) FROM billing.subscriptions WHERE account_id = 'lab-a'")"
api "price books" 200 GET /v1/price-books "$admin"
api "plans" 200 GET /v1/plans "$admin"

# `billing load` of a new account while billingd runs: every serving
# thread sees it at its next request (LISTEN/NOTIFY), no restart.
api "a new account before billing load" 404 GET /v1/accounts/new-e/grants "$admin"
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
a = dict(d['accounts'][0], id='new-e')
d['accounts'].append(a)
json.dump(d, open(sys.argv[2], 'w'))" "$tmp/accounts.json" "$tmp/accounts-new.json" || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/accounts-new.json" >/dev/null || exit 99
codes=""
for i in 1 2 3 4 5 6 7 8; do
    codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin" \
        "$url/v1/accounts/new-e/grants")"
done
expect_eq "after billing load, every request sees the new account" "$codes" " 200 200 200 200 200 200 200 200"
printf '[{"id":"new-e-1","account":"new-e","resource":"i-e","meter":"gpu","start":"2026-01-05T10:00:00Z","end":"2026-01-05T11:00:00Z","quantity":"1","model":"RTX4090","region":"cn-east-1"}]' >"$tmp/new.json"
api "an event of the new account" 200 POST /v1/events "$writer" -H "Content-Type: application/json" \
    --data-binary "@$tmp/new.json"
expect_eq "an event of the new account is accepted" "$(jv 'd["accepted"]')" 1

# ---- keys and scopes ---------------------------------------------------------
api "no key" 401 GET /v1/accounts/lab-a/balance ""
grep -qi '^WWW-Authenticate: Bearer' "$tmp/hdr" && r=ok || r=fail
check "no key: WWW-Authenticate says Bearer" $r
api "a revoked key" 401 GET /v1/accounts/lab-a/balance "$gone"
api "a malformed key" 401 GET /v1/accounts/lab-a/balance "bk_1_nope"
api "a key without accounts:read" 403 GET /v1/accounts/lab-a/balance "$writer"
api "a key without events:write" 403 POST /v1/events "$reader" -H "Content-Type: application/json" \
    --data-binary "@$tmp/js.json"
api "a bound key on the catalog" 403 GET /v1/plans "$reader"
for route in balance grants subscriptions; do
    api "a bound key on another account's $route" 404 GET "/v1/accounts/team-c/$route" "$reader"
    sed 's/team-c/ACCOUNT/g' "$tmp/body" >"$tmp/other"
    api "an unknown account's $route" 404 GET "/v1/accounts/nosuch/$route" "$admin"
    sed 's/nosuch/ACCOUNT/g' "$tmp/body" >"$tmp/unknown"
    cmp -s "$tmp/other" "$tmp/unknown" && r=ok || r=fail
    check "another account's $route answers as an unknown account" $r "$(cat "$tmp/other") vs $(cat "$tmp/unknown")"
done
api "a wrong method" 405 DELETE /v1/plans "$admin"
api "GET on events" 405 GET /v1/events "$admin"
api "an unknown route" 404 GET /v1/nosuch "$admin"
api "an account id that is not UTF-8" 404 GET "/v1/accounts/%FF/balance" "$admin"
api "a Content-Type that is not UTF-8" 415 POST /v1/events "$writer" \
    -H "$(printf 'Content-Type: text/\377')" --data-binary x
api "the scheme bearer in lower case" 200 GET /v1/accounts/lab-a/grants "" \
    -H "Authorization: bearer $reader"
printf '\n  \n\t\r\n{"id":\n' >"$tmp/blank.jsonl"
api "JSON Lines with blank lines" 200 POST /v1/events "$writer" -H "Content-Type: application/x-ndjson" \
    --data-binary "@$tmp/blank.jsonl"
expect_eq "JSON Lines: lines of spaces, tabs and CR are skipped" "$(jv 'd["events"], d["results"][0]["reason_code"]')" \
    "(1, 'parse')"

grep -qE 'event=api_request method=GET route=/v1/accounts/\{id\}/balance status=404 ms=[0-9]+ key=[1-9][0-9]* client=127\.0\.0\.1' \
    "$tmp/billingd-main.log" && r=ok || r=fail
check "the access log has a line per answer (method, route, status, ms, key, client)" $r
# The whole secret after "bk_ID_": base64url, so it may hold '_' or start
# with '-' (a fixed string, never an option or a pattern).
grep -qF -e "${admin#bk_*_}" "$tmp/billingd-main.log" && r=fail || r=ok
check "the log never shows a key's secret" $r

# ---- metrics -----------------------------------------------------------------
curl -sS "http://127.0.0.1:$mport/metrics" >"$tmp/metrics" 2>&1
for want in 'billingd_api_requests_total{route="/v1/events",status="200"}' \
    'billingd_api_requests_total{route="/v1/accounts/{id}/balance",status="401"}' \
    'billingd_api_requests_total{route="/v1/plans",status="403"}' \
    'billingd_api_request_duration_seconds_count{route="/v1/accounts/{id}/balance"}'; do
    grep -qF "$want" "$tmp/metrics" && r=ok || r=fail
    check "/metrics has $want" $r
done

# ---- TLS (api.tls_cert, api.tls_key) --------------------------------------------
if openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/tls.key" \
    -out "$tmp/tls.crt" >/dev/null 2>&1; then
    billingd_start tls --set http.listen= --set "api.tls_cert=$tmp/tls.crt" --set "api.tls_key=$tmp/tls.key"
    grep -q 'event=api_listening .*tls=1' "$tmp/billingd-tls.log" && r=ok || r=fail
    check "TLS: billingd says it serves TLS" $r
    url="https://${url#http://}"
    api "TLS" 200 GET /v1/plans "$admin" --cacert "$tmp/tls.crt"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin" \
        "http://${url#https://}/v1/plans")
    [ "$code" != 200 ] && r=ok || r=fail
    check "TLS: plain HTTP is not answered ($code)" $r
else
    check "openssl makes a test certificate" fail
fi

# ---- limits --------------------------------------------------------------------
billingd_start limits --set http.listen= --set api.body_max=1024 --set api.rate=3 --set api.request_ms=1000 \
    --set api.connections_per_ip=2
python3 -c "import sys; sys.stdout.write('[' + ','.join(['{}'] * 600) + ']')" >"$tmp/big.json"
api "a body over api.body_max" 413 POST /v1/events "$writer" -H "Content-Type: application/json" \
    --data-binary "@$tmp/big.json"
api "a chunked body over api.body_max" 413 POST /v1/events "$writer" -H "Content-Type: application/json" \
    -H "Transfer-Encoding: chunked" --data-binary "@$tmp/big.json"
# A burst of requests on one connection past api.rate (3 a second).
python3 - "$url" "$admin" "$tmp/hdr" "$tmp/body" <<'EOF'
import http.client, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
for i in range(60):
    c.request("GET", "/v1/plans", headers={"Authorization": "Bearer " + sys.argv[2]})
    r = c.getresponse()
    body = r.read()
    if r.status == 429:
        with open(sys.argv[3], "w") as f:
            f.write("HTTP/1.1 %d %s\r\n" % (r.status, r.reason))
            for k, v in r.getheaders():
                f.write("%s: %s\r\n" % (k, v))
            f.write("\r\n")
        open(sys.argv[4], "wb").write(body)
        sys.exit(0)
sys.exit(1)
EOF
if [ $? -eq 0 ] && python3 "$srcdir/tests/openapi-check.py" "$spec" GET /v1/plans "$tmp/hdr" "$tmp/body" 2>"$tmp/err"; then
    check "a burst past api.rate: 429 with Retry-After, as doc/openapi.yaml says" ok
else
    check "a burst past api.rate: 429 with Retry-After, as doc/openapi.yaml says" fail "$(cat "$tmp/err")"
fi
# api.connections_per_ip (2): a third connection at once is closed unanswered
# (a key whose bucket the burst did not empty).
third=$(python3 - "$url" "$spare" <<'EOF'
import socket, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
req = ("GET /v1/plans HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % sys.argv[2]).encode()
socks = [socket.create_connection((u.hostname, u.port), timeout=5) for _ in range(3)]
out = []
for s in socks:
    try:
        s.sendall(req)
        got = s.recv(12)
        out.append(got[9:12].decode() if got else "closed")
    except OSError:
        out.append("closed")
print(" ".join(out))
EOF
)
expect_eq "api.connections_per_ip: the third connection at once is closed" "$third" "200 200 closed"
# Headers sent slowly, one line every 0.2 s: api.request_ms (1 s) bounds
# the whole request, not the time between two lines.
slow=$(python3 - "$url" "$tmp/hdr" "$tmp/body" <<'EOF'
import socket, sys, time, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
s = socket.create_connection((u.hostname, u.port), timeout=10)
start = time.monotonic()
s.sendall(b"GET /v1/plans HTTP/1.1\r\nHost: x\r\n")
got = b""
try:
    for i in range(50):
        s.sendall(b"X-Slow-%d: x\r\n" % i)
        time.sleep(0.2)
except OSError:
    pass
s.settimeout(3)
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
except OSError:
    pass
took = time.monotonic() - start
head, _, body = got.partition(b"\r\n\r\n")
open(sys.argv[2], "wb").write(head + b"\r\n\r\n")
open(sys.argv[3], "wb").write(body)
print("%.1f %s" % (took, head.split(b"\r\n")[0].decode("latin-1") if head else "closed"))
EOF
)
took=${slow%% *}
case "$slow" in
*" HTTP/1.1 408"*)
    if python3 "$srcdir/tests/openapi-check.py" "$spec" GET /v1/plans "$tmp/hdr" "$tmp/body" 2>"$tmp/err"; then
        r=ok
    else
        r=fail
    fi ;;
*" closed") r=ok ;;
*) r=fail ;;
esac
[ "${took%%.*}" -lt 5 ] || r=fail
check "headers sent slowly past api.request_ms: 408 or closed within it ($slow)" $r "$(cat "$tmp/err" 2>/dev/null)"

# SIGTERM with a request in flight: its headers are in (the server sent
# 100 Continue), SIGTERM, billingd says it is stopping (api_stopping),
# then the body: the request is answered in full.
mkfifo "$tmp/to-client" "$tmp/from-client" || exit 99
python3 - "$main_url" "$writer" "$tmp/js.json" "$tmp/to-client" "$tmp/from-client" >"$tmp/inflight" <<'EOF' &
import json, socket, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
body = json.dumps([dict(e, id=e["id"].replace("js-", "term-")) for e in json.load(open(sys.argv[3]))]).encode()
s = socket.create_connection((u.hostname, u.port), timeout=30)
s.sendall(b"POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
          b"Content-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
          % (sys.argv[2].encode(), len(body)))
got = b""
while b"\r\n\r\n" not in got:
    b = s.recv(1)
    if not b:
        break
    got += b
with open(sys.argv[5], "w") as f:
    f.write(got.split(b"\r\n")[0].decode("latin-1") + "\n")
open(sys.argv[4]).read()
s.sendall(body)
got = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
        head, _, rest = got.partition(b"\r\n\r\n")
        if rest and len(rest) >= int(dict(l.split(b": ", 1) for l in head.split(b"\r\n")[1:]).get(b"Content-Length", b"0")):
            break
except OSError:
    pass
print(got.split(b"\r\n")[0].decode("latin-1") if got else "closed")
print(got.partition(b"\r\n\r\n")[2].decode("latin-1"))
EOF
client=$!
read -r cont <"$tmp/from-client"
kill "$main_pid"
i=0
while [ $i -lt 600 ] && ! grep -q 'event=api_stopping' "$tmp/billingd-main.log"; do
    i=$((i + 1))
    sleep 0.05
done
echo go >"$tmp/to-client"
wait $client
case "$cont" in *" 100 "*) r=ok ;; *) r=fail ;; esac
check "a request in flight: the server asked for its body (100 Continue)" $r "$cont"
status=$(head -1 "$tmp/inflight")
accepted=$(tail -n +2 "$tmp/inflight" | python3 -c "import json, sys; print(json.load(sys.stdin)['accepted'])" 2>/dev/null)
[ "$status" = "HTTP/1.1 200 OK" ] && [ "$accepted" = 3 ] && r=ok || r=fail
check "SIGTERM with a request in flight: it is answered in full" $r "$(cat "$tmp/inflight")"

# ---- a balance is never stale (issue 25) -------------------------------------
# A balance request reads the key and the account's figures in one round
# trip (store/balance.c, bs_balance_fetch); whatever it keeps between
# requests, an event another process stores between two GETs changes the
# second answer exactly as it changes `billing account balance`'s.
balance_fields() {
    jv '"\n".join("%s=%s" % (k, d[k]) for k in ("account", "credit_remaining", "month", "subtotal", "credits", "tax", "total", "currency", "account_credit", "account_credit_left"))'
}
start stale --set http.listen=
api "balance before an ingest" 200 GET /v1/accounts/lab-a/balance "$reader"
balance_fields >"$tmp/stale.api1"
$billing account balance lab-a | grep -v '^at=' >"$tmp/stale.cli1"
api "the same balance again" 200 GET /v1/accounts/lab-a/balance "$reader"
balance_fields >"$tmp/stale.api2"
python3 - "$tmp/stale.jsonl" <<'EOF2' || exit 99
import json, sys, time
now = int(time.time())
iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"id": "stale-1", "account": "lab-a", "resource": "i-stale", "meter": "gpu",
                        "start": iso(now - 1800), "end": iso(now - 600), "quantity": "8",
                        "model": "A100-80G", "region": "cn-east-1"}) + "\n")
EOF2
$billing ingest --quiet "$tmp/stale.jsonl" >/dev/null 2>&1 || check "billing ingest of one more event of lab-a" fail
api "balance after the ingest" 200 GET /v1/accounts/lab-a/balance "$reader"
balance_fields >"$tmp/stale.api3"
$billing account balance lab-a | grep -v '^at=' >"$tmp/stale.cli3"
if cmp -s "$tmp/stale.api1" "$tmp/stale.cli1" && cmp -s "$tmp/stale.api1" "$tmp/stale.api2" &&
    cmp -s "$tmp/stale.api3" "$tmp/stale.cli3" && ! cmp -s "$tmp/stale.api1" "$tmp/stale.api3"; then
    check "an event stored between two balances changes the second exactly as the CLI's" ok
else
    check "an event stored between two balances changes the second exactly as the CLI's" fail \
        "before: $(tr '\n' ' ' <"$tmp/stale.api1") (CLI $(tr '\n' ' ' <"$tmp/stale.cli1")); after: $(tr '\n' ' ' <"$tmp/stale.api3") (CLI $(tr '\n' ' ' <"$tmp/stale.cli3"))"
fi

# SIGTERM: every billingd stops with status 0, and no sanitizer (a
# --enable-sanitizers build) reported anything in its log.
for p in $pids; do
    kill "$p" 2>/dev/null
    wait "$p"
    rc=$?
    [ $rc -eq 0 ] && r=ok || r=fail
    check "billingd (pid $p) stops on SIGTERM with status 0" $r "status $rc"
done
pids=""
if grep -lE "runtime error|AddressSanitizer|LeakSanitizer|ThreadSanitizer" "$tmp"/billingd-*.log >"$tmp/san"; then
    check "no sanitizer report in billingd's logs" fail "$(cat "$tmp/san")"
else
    check "no sanitizer report in billingd's logs" ok
fi

finish
