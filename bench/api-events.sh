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
# JSON Lines. For each mode and batch it prints the ratio of its events
# per second to `billing ingest`'s, the events per second, the latency of
# a request (p50, p99) and
# billingd's peak RSS so far (VmHWM). In Kafka mode it then waits
# (bounded) for the consumer to have stored every event, and prints how
# long that took after the last answer.
#
# Use a build without sanitizers (../configure CFLAGS='-O2 -g').
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$srcdir/_rel}" && pwd)
conns=${2:-4}
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
sql() {
    psql "$BILLING_PG_CONNINFO" -XAtc "$1"
}
$billing db migrate >/dev/null
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null
key=$($billing apikey create --scope admin)
"$build/bench/demo_month" topic --partitions 4 "$brokers" "$topic" >/dev/null

# requests a connection for a batch size
requests() {
    case "$1" in
        1) echo 500 ;;
        100) echo 50 ;;
        *) echo 10 ;;
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
run_mode() {
    mode=$1
    for batch in 1 100 1000; do
        out=$("$load" 127.0.0.1 "$port" "$key" "$mode-$batch" "$batch" "$conns" "$(requests "$batch")") ||
            { echo "$out" >&2; echo "api_load: failures in $mode mode, batch $batch" >&2; exit 1; }
        rss=$(awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$dpid/status")
        echo "$out" | python3 -c '
import sys
f = dict(kv.split("=") for kv in sys.stdin.read().split())
mode, batch, conns, base, rss = sys.argv[1:6]
eps = float(f["events_per_s"])
print("%-6s %6s %10.2f %5s %8s %10.0f %8s %8s %9s" % (mode, batch, eps / float(base), conns,
      f["events"], eps, f["p50_ms"], f["p99_ms"], rss))' "$mode" "$batch" "$conns" "$base_eps" "$rss"
        total=$((total + batch * conns * $(requests "$batch")))
    done
}

total=0
serve store --set api.events=store
run_mode store
stop

total=0
serve kafka --set "topics=$topic" --set "group=bench-api-$$" --set "kafka.bootstrap.servers=$brokers"
before=$(sql "SELECT count(*) FROM billing.usage_events")
run_mode kafka
t0=$(date +%s%N)
i=0
until [ "$(sql "SELECT count(*) FROM billing.usage_events WHERE event_id LIKE 'kafka-%'")" -ge "$total" ]; do
    i=$((i + 1))
    [ $i -lt 1200 ] || { echo "the consumer did not store the $total events in 120 s" >&2; exit 1; }
    sleep 0.1
done
t1=$(date +%s%N)
echo "kafka: the consumer had stored all $total events $(( (t1 - t0) / 1000000 )) ms after the last answer (rows before: $before)"
stop
