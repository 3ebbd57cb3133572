#!/bin/sh
# api-events.sh - events per second into billingd's POST /v1/events
# (doc/http-api.md), in store mode (api.events=store: stored at once) and
# in Kafka mode (api.events=kafka: produced, answered once acknowledged,
# stored by the same billingd's consumer), against `billing ingest` of as
# many events generated the same way, in the same run: the ratio first.
# The services of scripts/services.sh (PostgreSQL and Kafka), a database
# and a topic of its own; the example's price book and accounts.
#
#   bench/api-events.sh [BUILD_DIR] [CONNECTIONS]    (default _rel, 4)
#
# The load client (bench/api_load.c) holds CONNECTIONS keep-alive
# connections, each sending its requests one after the other: batches of
# 1 (500 requests a connection), 100 (50) and 1000 (10) new events as
# JSON Lines (ROUNDS=N: N times as many requests, for steadier figures).
# For each mode and batch it prints the ratio of its events
# per second to `billing ingest`'s, the events per second, the latency of
# a request (p50, p99) and
# billingd's peak RSS so far (VmHWM). In Kafka mode it then waits
# (bounded) for the consumer to have stored every event, and prints how
# long that took after the last answer.
#
# PEER=1 also runs bench/peer-events (a small Go server doing what Kafka
# mode does, see its README) on the same topic while billingd's consumer
# stores it: for each batch size billingd then the peer, the same client
# and events, and first the ratio of billingd's events per second to the
# peer's. It needs Go (PATH or /usr/local/go/bin) and the modules of
# bench/peer-events/go.mod (the Go module proxy, or a module cache).
#
# Use a build without sanitizers (../configure CFLAGS='-O2 -g').
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$srcdir/_rel}" && pwd)
conns=${2:-4}
peer=${PEER:-0}
billing="$build/billing/billing"
billingd="$build/billingd/billingd"
load="$build/bench/api_load"
ex="$srcdir/examples/gpu-cloud"
db="billing_bench_apiev_$$"
base=${BILLING_PG_CONNINFO:?run scripts/services.sh start and . var/services.env}
brokers=${BILLING_KAFKA_BROKERS:?run scripts/services.sh start and . var/services.env}
topic="bench-api-events-$$-$(date +%s)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-apiev.XXXXXX")
dpid=
ppid_=
cleanup() {
    for p in $dpid $ppid_; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
    psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO
sql() {
    psql "$BILLING_PG_CONNINFO" -XAtc "$1"
}
$billing db migrate >/dev/null
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null
key=$($billing apikey create --scope admin)
"$build/bench/demo_month" topic --partitions 4 "$brokers" "$topic" >/dev/null

# requests a connection for a batch size (times ROUNDS)
rounds=${ROUNDS:-1}
requests() {
    case "$1" in
        1) echo $((500 * rounds)) ;;
        100) echo $((50 * rounds)) ;;
        *) echo $((10 * rounds)) ;;
    esac
}

# The baseline: `billing ingest` of as many events as the batch-of-1000 run sends.
"$load" 127.0.0.1 1 - base 1000 "$conns" "$(requests 1000)" "$tmp/base.jsonl"
base_n=$(grep -c . "$tmp/base.jsonl")
t0=$(date +%s%N)
$billing ingest "$tmp/base.jsonl" >/dev/null 2>&1
t1=$(date +%s%N)
base_eps=$(python3 -c "import sys; print(round(int(sys.argv[1]) * 1e9 / (int(sys.argv[2]) - int(sys.argv[3]))))" \
    "$base_n" "$t1" "$t0")
echo "baseline: billing ingest of $base_n events (JSON Lines): $base_eps events/s"

# serve MODE SETTING...: billingd with the API on a free port; sets $port and $dpid.
serve() {
    name=$1
    shift
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$billingd" --set "db=$BILLING_PG_CONNINFO" --set "api.listen=127.0.0.1:$port" \
        --set http.listen= --set api.rate=1000000 "$@" >"$tmp/billingd-$name.log" 2>&1 &
    dpid=$!
    i=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/plans")" = 401 ]; do
        i=$((i + 1))
        if [ $i -ge 300 ] || ! kill -0 "$dpid" 2>/dev/null; then
            echo "billingd did not start" >&2
            tail "$tmp"/billingd-*.log >&2
            exit 1
        fi
        sleep 0.1
    done
}
stop() {
    kill "$dpid"
    wait "$dpid" || true
    dpid=
}
printf '%-6s %6s %10s %5s %8s %10s %8s %8s %9s\n' mode batch "x ingest" conns events events/s p50_ms p99_ms rss_MiB
# one MODE PORT PID BATCH: one load of BATCH-event requests; prints its row, sets $eps.
one() {
    out=$("$load" 127.0.0.1 "$2" "$key" "$1-$4" "$4" "$conns" "$(requests "$4")") ||
        { echo "$out" >&2; echo "api_load: failures in $1 mode, batch $4" >&2; exit 1; }
    rss=$(awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$3/status")
    eps=$(echo "$out" | sed -n 's/.*events_per_s=\([0-9]*\).*/\1/p')
    echo "$out" | python3 -c '
import sys
f = dict(kv.split("=") for kv in sys.stdin.read().split())
mode, batch, conns, base, rss = sys.argv[1:6]
eps = float(f["events_per_s"])
print("%-6s %6s %10.2f %5s %8s %10.0f %8s %8s %9s" % (mode, batch, eps / float(base), conns,
      f["events"], eps, f["p50_ms"], f["p99_ms"], rss))' "$1" "$4" "$conns" "$base_eps" "$rss"
    total=$((total + $4 * conns * $(requests "$4")))
}
run_mode() {
    mode=$1
    for batch in 1 100 1000; do
        if [ "$mode" = kafka ] && [ "$peer" = 1 ]; then
            one kafka "$port" "$dpid" "$batch" >"$tmp/row-kafka"
            ours=$eps
            one peer "$pport" "$ppid_" "$batch" >"$tmp/row-peer"
            echo "kafka / peer, batch $batch: $(python3 -c 'import sys; print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$ours" "$eps")"
            cat "$tmp/row-kafka" "$tmp/row-peer"
        else
            one "$mode" "$port" "$dpid" "$batch"
        fi
    done
}

total=0
serve store --set api.events=store
run_mode store
stop

total=0
serve kafka --set "topics=$topic" --set "group=bench-api-$$" --set "kafka.bootstrap.servers=$brokers"
before=$(sql "SELECT count(*) FROM billing.usage_events")
if [ "$peer" = 1 ]; then
    go=$(command -v go || echo /usr/local/go/bin/go)
    (cd "$srcdir/bench/peer-events" && "$go" build -o "$tmp/peer-events" .)
    pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$tmp/peer-events" -listen "127.0.0.1:$pport" -db "$BILLING_PG_CONNINFO" -conns 4 \
        -brokers "$brokers" -topic "$topic" >"$tmp/peer.log" 2>&1 &
    ppid_=$!
    i=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$pport/healthz")" = 204 ]; do
        i=$((i + 1))
        [ $i -lt 300 ] || { tail -5 "$tmp/peer.log"; exit 1; }
        kill -0 "$ppid_"
        sleep 0.1
    done
    # The same statuses from both for the same events (valid, invalid, and a
    # bad quantity), or the comparison means little.
    for who in "$port" "$pport"; do
        printf '%s\n' \
            '{"id":"check-'"$who"'-1","account":"lab-a","resource":"i-1","meter":"gpu","start":"2026-01-05T00:00:00Z","end":"2026-01-05T01:00:00Z","quantity":"2","model":"RTX4090","region":"cn-east-1"}' \
            '{"id":"check-'"$who"'-2","account":"lab-a","resource":"i-1","meter":"gpu","start":"2026-01-05T01:00:00Z","end":"2026-01-05T00:00:00Z","quantity":"2"}' \
            '{"id":"check-'"$who"'-3","account":"lab-a","resource":"i-1","meter":"gpu","start":"2026-01-05T00:00:00Z","end":"2026-01-05T01:00:00Z","quantity":"-2"}' |
            curl -s -H "Authorization: Bearer $key" -H 'Content-Type: application/x-ndjson' \
                --data-binary @- "http://127.0.0.1:$who/v1/events" |
            python3 -c 'import json, sys; print(" ".join(r["status"] for r in json.load(sys.stdin)["results"]))' \
                >"$tmp/check-$who"
    done
    cmp -s "$tmp/check-$port" "$tmp/check-$pport" ||
        { echo "the peer's statuses differ: billingd $(cat "$tmp/check-$port"), peer $(cat "$tmp/check-$pport")" >&2; exit 1; }
fi
run_mode kafka
t0=$(date +%s%N)
i=0
until [ "$(sql "SELECT count(*) FROM billing.usage_events WHERE event_id LIKE 'kafka-%' OR event_id LIKE 'peer-%'")" -ge "$total" ]; do
    i=$((i + 1))
    [ $i -lt 1200 ] || { echo "the consumer did not store the $total events in 120 s" >&2; exit 1; }
    sleep 0.1
done
t1=$(date +%s%N)
[ "$peer" != 1 ] || echo "peer: the consumer stored its events as billingd's (same topic); peer peak RSS $(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$ppid_/status")"
echo "kafka: the consumer had stored all $total events $(( (t1 - t0) / 1000000 )) ms after the last answer (rows before: $before)"
stop
