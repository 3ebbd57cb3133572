#!/bin/sh
# check-api-blocked.sh - a request blocked in its handler does not stall
# the other connections (billingd/api.c's threading model) against the
# private PostgreSQL (BILLING_PG_CONNINFO, a database of its own); without
# it the test FAILS, never skips:
#   - 100 keep-alive connections opened and answered once (GET /console/,
#     which needs no store connection);
#   - a POST /v1/events (api.events=store) held on a table lock (a psql
#     session), waited for in pg_stat_activity until it waits on the lock;
#   - while it is blocked, a GET on each of the 100 connections and on 8
#     new ones: every one answered (within 20 s), and the POST still
#     waiting afterwards; with libmicrohttpd's thread pool, the
#     connections its thread had accepted waited for the POST;
#   - the lock released: the POST answered 200, its events accepted, as
#     doc/openapi.yaml says.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="$builddir/billingd/billingd"
ex="$srcdir/examples/gpu-cloud"
spec="$srcdir/doc/openapi.yaml"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-api-blocked.XXXXXX") || exit 99
pids=""
lockpid=""
cpid=""

. "$srcdir/tests/checklib.sh"

api_scratch apiblk
trap 'exec 3>&- 4>&- 2>/dev/null; [ -z "$lockpid" ] || wait "$lockpid"; [ -z "$cpid" ] || wait "$cpid"; billingd_stop_all; db_drop_all; rm -rf "$tmp"' EXIT
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null || exit 99
key=$($billing apikey create --scope events:write) || exit 99
sql() {
    psql "$BILLING_PG_CONNINFO" -XAtc "$1"
}
# poll NAME QUERY WANT: poll QUERY (bounded: 60 s) until it prints WANT; one check.
poll() {
    i=0
    got=$(sql "$2")
    while [ "$got" != "$3" ] && [ $i -lt 600 ]; do
        sleep 0.1
        i=$((i + 1))
        got=$(sql "$2")
    done
    expect_eq "$1" "$got" "$3"
}
# wait_line NAME FILE LINE: wait (bounded: 60 s) until FILE has LINE; one check.
wait_line() {
    i=0
    while ! grep -qx "$3" "$2" && [ $i -lt 600 ]; do
        kill -0 "$cpid" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    expect_eq "$1" "$(grep -x "$3" "$2")" "$3"
}

python3 - "$tmp/body.jsonl" <<'EOF' || exit 99
import json, sys
with open(sys.argv[1], "w") as f:
    for k in range(3):
        f.write(json.dumps({"id": "blk-%d" % k, "account": "lab-a", "resource": "i-%d" % k,
                            "meter": "gpu", "start": "2026-01-05T0%d:00:00Z" % k,
                            "end": "2026-01-05T0%d:30:00Z" % k, "quantity": "1",
                            "model": "RTX4090", "region": "cn-east-1"}) + "\n")
EOF

billingd_start blk --set api.events=store --set http.listen= --set api.connections_per_ip=200

# The client: 100 keep-alive connections answered once, "ready"; on a line of its
# input, a GET on each and on 8 new connections, at once; "answered N" (within 20 s).
mkfifo "$tmp/client.in" "$tmp/lock" || exit 99
: >"$tmp/client.out"
cat >"$tmp/client.py" <<'EOF'
import http.client, sys, time
host, port = sys.argv[1], int(sys.argv[2])
def get(c):
    c.request("GET", "/console/")
    r = c.getresponse()
    r.read()
    return r.status
old = [http.client.HTTPConnection(host, port, timeout=20) for _ in range(100)]
for c in old:
    get(c)
print("ready", flush=True)
sys.stdin.readline()
new = [http.client.HTTPConnection(host, port, timeout=20) for _ in range(8)]
until = time.monotonic() + 20
for c in old + new:
    c.request("GET", "/console/")
n = 0
for c in old + new:
    try:
        c.sock.settimeout(max(0.1, until - time.monotonic()))
        r = c.getresponse()
        r.read()
        n += 1
    except Exception as e:
        print("not answered: %r" % e, file=sys.stderr)
print("answered %d" % n, flush=True)
EOF
python3 "$tmp/client.py" 127.0.0.1 "$port" <"$tmp/client.in" >"$tmp/client.out" \
    2>"$tmp/client.err" &
cpid=$!
exec 4>"$tmp/client.in"
wait_line "100 keep-alive connections answered" "$tmp/client.out" ready

psql "$BILLING_PG_CONNINFO" -XAtq <"$tmp/lock" >"$tmp/lock.out" 2>&1 &
lockpid=$!
exec 3>"$tmp/lock"
echo "BEGIN; LOCK TABLE billing.usage_events IN EXCLUSIVE MODE;" >&3
poll "the table lock is held" "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE c.relname = 'usage_events' AND l.mode = 'ExclusiveLock' AND l.granted" 1
curl -sS -m 120 -D "$tmp/hdr" -o "$tmp/body" -H "Authorization: Bearer $key" \
    -H "Content-Type: application/x-ndjson" --data-binary "@$tmp/body.jsonl" \
    "$url/v1/events" 2>"$tmp/err" &
ppid=$!
me="datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
waiting="SELECT count(*) FROM pg_stat_activity WHERE $me AND wait_event_type = 'Lock'"
poll "the POST waits on the lock" "$waiting" 1

echo go >&4
exec 4>&-
wait "$cpid"
cpid=""
expect_eq "every connection answered while the POST is blocked" \
    "$(grep '^answered' "$tmp/client.out")" "answered 108"
expect_eq "the POST still waits on the lock after the GETs" \
    "$(sql "$waiting")/$(kill -0 "$ppid" 2>/dev/null && echo running)" "1/running"

echo "COMMIT;" >&3
exec 3>&-
wait "$lockpid"
lockpid=""
wait "$ppid"
api_answer "the POST, once the lock is released" 200 POST /v1/events
expect_eq "its three events accepted" "$(jv 'd["accepted"]')" 3
expect_eq "and stored" "$(sql "SELECT count(*) FROM billing.usage_events WHERE event_id LIKE 'blk-%'")" 3
[ ! -s "$tmp/client.err" ] || cat "$tmp/client.err"
finish
