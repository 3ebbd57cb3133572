#!/bin/sh
# api-events-cpu.sh - billingd's CPU per event of POST /v1/events in
# batches of 1 000 (the figure of issue 25's goal), one mode, one build:
# user+sys of billingd (its /proc/PID/stat, every thread) and of the
# PostgreSQL server (bench/server-cpu.sh) over the load, divided by the
# events. Run it for the old and the new build alternately.
#
#   bench/api-events-cpu.sh BUILD_DIR MODE REQUESTS [PERF_DATA]
#
# MODE: store (api.events=store), kafka (api.events=kafka, billingd's
# consumer storing the same topic: the CPU counted until every event is
# stored), or produce (api.events=kafka, the consumer on an idle topic of
# its own: billingd's CPU is then the request path's and the producer's
# only). REQUESTS a connection, 4 connections (bench/api_load, new ids,
# the example's accounts), after a warm-up of 8 000 events. PERF_DATA:
# `perf record -g` of billingd over the load into that file.
# Needs scripts/services.sh's services (. var/services.env) and a build
# without sanitizers; api_load and demo_month come from BUILD_DIR.
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?BUILD_DIR}" && pwd)
mode=${2:?MODE: store, kafka or produce}
reqs=${3:?REQUESTS a connection}
perfout=${4:-}
billing="$build/billing/billing"
billingd="$build/billingd/billingd"
load="$build/bench/api_load"
ex="$srcdir/examples/gpu-cloud"
db="billing_bench_apicpu_$$"
base=${BILLING_PG_CONNINFO:?run scripts/services.sh start and . var/services.env}
brokers=${BILLING_KAFKA_BROKERS:?run scripts/services.sh start and . var/services.env}
topic="bench-api-cpu-$$-$(date +%s)"
tck=$(getconf CLK_TCK)
dpid=
ppid_=
cleanup() {
    for p in $ppid_ $dpid; do
        kill -INT "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT
case "$mode" in
    store | kafka | produce) ;;
    *) echo "api-events-cpu.sh: MODE is store, kafka or produce" >&2; exit 2 ;;
esac
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO
stored() {
    psql "$BILLING_PG_CONNINFO" -XAtc "SELECT count(*) FROM billing.usage_events"
}
$billing db migrate >/dev/null
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null
key=$($billing apikey create --scope admin)
"$build/bench/demo_month" topic --partitions 4 "$brokers" "$topic" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
case "$mode" in
    store) set -- --set api.events=store ;;
    kafka) set -- --set "topics=$topic" --set "group=bench-api-cpu-$$" \
        --set "kafka.bootstrap.servers=$brokers" ;;
    produce)
        "$build/bench/demo_month" topic --partitions 1 "$brokers" "$topic-idle" >/dev/null
        set -- --set "topics=$topic-idle" --set "group=bench-api-cpu-$$" \
            --set "kafka.bootstrap.servers=$brokers" --set api.events=kafka \
            --set "api.events_topic=$topic"
        ;;
esac
"$billingd" --set "db=$BILLING_PG_CONNINFO" --set "api.listen=127.0.0.1:$port" \
    --set http.listen= --set api.rate=1000000 "$@" >/dev/null 2>&1 &
dpid=$!
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/plans")" = 401 ]; do
    i=$((i + 1))
    [ $i -lt 300 ] && kill -0 "$dpid" 2>/dev/null || { echo "billingd did not start" >&2; exit 1; }
    sleep 0.1
done
sleep 3 # the consumer joins its group
"$load" 127.0.0.1 "$port" "$key" "warm-$mode" 1000 4 2 >/dev/null
# until the warm-up is stored (bounded; produce mode stores nothing)
i=0
while [ "$mode" != produce ] && [ "$(stored)" -lt 8000 ] && [ $i -lt 300 ]; do
    i=$((i + 1))
    sleep 0.1
done
. "$srcdir/bench/server-cpu.sh"
before=$(stored)
s0=$(server_cpu)
c0=$(awk '{ print $14 + $15 }' "/proc/$dpid/stat")
if [ -n "$perfout" ]; then
    perf record -q -g -o "$perfout" -p "$dpid" 2>/dev/null &
    ppid_=$!
    sleep 0.5
fi
out=$("$load" 127.0.0.1 "$port" "$key" "$mode-cpu" 1000 4 "$reqs") ||
    { echo "$out" >&2; echo "api_load: failures" >&2; exit 1; }
n=$((4 * 1000 * reqs))
i=0
while [ "$mode" = kafka ] && [ "$(stored)" -lt $((before + n)) ]; do
    i=$((i + 1))
    [ $i -lt 1200 ] || { echo "the consumer did not store the $n events in 120 s" >&2; exit 1; }
    sleep 0.1
done
c1=$(awk '{ print $14 + $15 }' "/proc/$dpid/stat")
s1=$(server_cpu)
if [ -n "$ppid_" ]; then
    kill -INT "$ppid_"
    wait "$ppid_" || true
    ppid_=
fi
eps=$(echo "$out" | sed -n 's/.*events_per_s=\([0-9]*\).*/\1/p')
echo "$mode $build events=$n events_per_s=$eps" \
    "billingd_cpu_s=$(echo "scale=2; ($c1 - $c0) / $tck" | bc)" \
    "billingd_us_per_event=$(echo "scale=2; ($c1 - $c0) * 1000000 / $tck / $n" | bc)" \
    "server_cpu_s=${s1:+$(echo "$s1 - $s0" | bc)}" "load=$(cut -d' ' -f1 /proc/loadavg)"
