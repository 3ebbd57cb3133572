#!/bin/bash
# tally-cost.sh EVENTS [ROUNDS] - what the close tallies (migration 0016:
# statement-level triggers on usage_events, doc/database.md "Close marks")
# cost the ingest path. Two fresh databases, migrated and loaded alike
# (the example price book, 1 000 gen_events accounts); in the second the
# two tally triggers are dropped. Then `billing ingest` of the same EVENTS
# gen_events records (one file, batches of 20 000) into each, alternated
# ROUNDS times (default 2), each round into emptied copies. Prints the
# wall time and events/s of each and the ratio with / without.
#
# Run from a build tree without sanitizers, with the services of
# scripts/services.sh (. var/services.env): ../bench/tally-cost.sh 1000000
set -eu
events=${1:?usage: tally-cost.sh EVENTS [ROUNDS]}
rounds=${2:-2}
: "${BILLING_PG_CONNINFO:?load var/services.env}"
src=$(cd "$(dirname "$0")/.." && pwd)
bin=$(pwd)
base=$BILLING_PG_CONNINFO
tmp=$(mktemp -d)
dbs="bench_tally_on bench_tally_off"
cleanup() {
    rm -rf "$tmp"
    for d in $dbs; do
        psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
    done
}
trap cleanup EXIT

"$bin/bench/gen_events" --accounts-json --accounts 1000 >"$tmp/accounts.json"
"$bin/bench/gen_events" --accounts 1000 "$events" >"$tmp/events.jsonl"

fresh() { # DB TRIGGERS(on|off)
    psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null
    psql "$base dbname=postgres" -qc "CREATE DATABASE $1" >/dev/null
    BILLING_PG_CONNINFO="$base dbname=$1" "$bin/billing/billing" db migrate >/dev/null
    BILLING_PG_CONNINFO="$base dbname=$1" "$bin/billing/billing" load \
        --pricebook "$src/examples/gpu-cloud/pricebook.json" --accounts "$tmp/accounts.json" >/dev/null
    psql "$base dbname=$1" -qc "SELECT billing.ensure_event_partitions('2026-01-01', '2026-02-01')" >/dev/null
    if [ "$2" = off ]; then
        psql "$base dbname=$1" -qc "DROP TRIGGER usage_events_close_tally_insert ON billing.usage_events;
            DROP TRIGGER usage_events_close_tally_delete ON billing.usage_events" >/dev/null
    fi
}

run() { # DB -> seconds
    local t0 t1
    t0=$(date +%s%N)
    BILLING_PG_CONNINFO="$base dbname=$1" "$bin/billing/billing" ingest --quiet --batch 20000 \
        "$tmp/events.jsonl" >/dev/null 2>&1
    t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000000 ))
}

for r in $(seq 1 "$rounds"); do
    fresh bench_tally_on on
    fresh bench_tally_off off
    on=$(run bench_tally_on)
    off=$(run bench_tally_off)
    n=$(psql "$base dbname=bench_tally_on" -Atc "SELECT count(*) FROM billing.usage_events")
    m=$(psql "$base dbname=bench_tally_off" -Atc "SELECT count(*) FROM billing.usage_events")
    t=$(psql "$base dbname=bench_tally_on" -Atc "SELECT coalesce(sum(events), 0) FROM billing.close_tallies")
    [ "$n" = "$m" ] && [ "$n" = "$t" ] || { echo "round $r: stored $n and $m events, tallied $t" >&2; exit 1; }
    echo "round $r: $n events; with tallies $on ms ($((n * 1000 / on))/s), without $off ms ($((n * 1000 / off))/s); with / without $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3f", a / b }')"
done
