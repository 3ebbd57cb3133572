#!/bin/sh
# api-balance.sh - GET /v1/accounts/{id}/balance at a steady rate with
# 10 000 accounts (issue 25: p99 <= 5 ms at 2 000 requests/s), beside
# GET /v1/accounts/{id}/grants (the key's check and one indexed query,
# no rating) at the same rate in the same run: the ratio of the two p99s
# first, then each one's latency. The services of scripts/services.sh
# (PostgreSQL), a database of its own: the example's price book,
# ACCOUNTS accounts from bench/gen_events (a 10.00 trial grant each, a
# monthly plan every 10th) and EVENTS events of theirs, stored with
# `billing ingest`; billingd serving the API alone.
#
#   bench/api-balance.sh [BUILD_DIR] [RATE] [SECONDS]   (default _rel, 2000, 20)
#   ACCOUNTS=10000 EVENTS=200000 CONNECTIONS=8 bench/api-balance.sh
#
# The load client (bench/api_get.c) sends RATE requests a second in all
# over CONNECTIONS keep-alive connections, each request for a random
# account, each at its scheduled instant (open loop: a request's latency
# runs from the instant it was due, so a stall counts against every
# request it delayed). billingd's peak RSS (VmHWM) is printed at the end.
#
# Use a build without sanitizers (../configure CFLAGS='-O2 -g').
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$srcdir/_rel}" && pwd)
rate=${2:-2000}
seconds=${3:-20}
accounts=${ACCOUNTS:-10000}
events=${EVENTS:-200000}
conns=${CONNECTIONS:-8}
billing="$build/billing/billing"
billingd="$build/billingd/billingd"
get="$build/bench/api_get"
gen="$build/bench/gen_events"
ex="$srcdir/examples/gpu-cloud"
db="billing_bench_apibal_$$"
base=${BILLING_PG_CONNINFO:?run scripts/services.sh start and . var/services.env}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-apibal.XXXXXX")
dpid=
cleanup() {
    if [ -n "$dpid" ]; then
        kill "$dpid" 2>/dev/null || true
        wait "$dpid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
    psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO
$billing db migrate >/dev/null
"$gen" --accounts-json --accounts "$accounts" --grants 10.00 --plans 10 >"$tmp/accounts.json"
"$gen" --accounts "$accounts" "$events" >"$tmp/events.jsonl"
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/accounts.json" >/dev/null
$billing ingest --quiet "$tmp/events.jsonl" >/dev/null 2>&1
key=$($billing apikey create --scope accounts:read)
echo "$accounts accounts, $events events stored; $rate requests/s for $seconds s on $conns connections"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$billingd" --set "db=$BILLING_PG_CONNINFO" --set "api.listen=127.0.0.1:$port" --set http.listen= \
    --set api.rate=1000000 >"$tmp/billingd.log" 2>&1 &
dpid=$!
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/plans")" = 401 ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || { tail -5 "$tmp/billingd.log"; exit 1; }
    kill -0 "$dpid"
    sleep 0.1
done
# A short warm-up of both routes (connections, prepared statements, pages).
"$get" 127.0.0.1 "$port" "$key" /v1/accounts/ /balance "$accounts" 200 2 "$conns" >/dev/null
"$get" 127.0.0.1 "$port" "$key" /v1/accounts/ /grants "$accounts" 200 2 "$conns" >/dev/null
balance=$("$get" 127.0.0.1 "$port" "$key" /v1/accounts/ /balance "$accounts" "$rate" "$seconds" "$conns")
grants=$("$get" 127.0.0.1 "$port" "$key" /v1/accounts/ /grants "$accounts" "$rate" "$seconds" "$conns")
p99() { echo "$1" | sed -n 's/.* p99_ms=\([0-9.]*\) .*/\1/p'; }
python3 -c "import sys; print('balance p99 / grants p99: %.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" \
    "$(p99 "$balance")" "$(p99 "$grants")"
echo "balance: $balance"
echo "grants:  $grants"
echo "billingd peak RSS: $(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$dpid/status")"
