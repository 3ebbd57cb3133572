#!/bin/bash
# billingd-campaign.sh [ROUNDS] - the longer crash campaign outside CI:
# runs tests/itest_billingd (end to end; 20 kill -9; two daemons with
# forced rebalances; PostgreSQL connections dropped mid-stream; a catalog
# change without restart) ROUNDS times (default 20, each with fresh
# topics, databases and random kill moments), stopping at the first
# failure with its logs kept. Needs a build tree (BUILD, default _build)
# and the services (scripts/services.sh start; . var/services.env).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/_build}
rounds=${1:-20}
: "${BILLING_PG_CONNINFO:?start the services and load var/services.env}"
: "${BILLING_KAFKA_BROKERS:?start the services and load var/services.env}"
make -C "$build/tests" itest_billingd >/dev/null
cd "$build/tests"
for i in $(seq 1 "$rounds"); do
    if ! top_srcdir="$here" top_builddir="$build" ./itest_billingd >"campaign-$i.log" 2>&1; then
        echo "round $i of $rounds FAILED: $build/tests/campaign-$i.log"
        tail -5 "campaign-$i.log"
        exit 1
    fi
    echo "round $i of $rounds: $(grep '%:' "campaign-$i.log")"
    rm -f "campaign-$i.log"
done
echo "$rounds rounds passed ($((rounds * 20)) kill -9 in all)"
