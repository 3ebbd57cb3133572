#!/bin/bash
# billingd.sh EVENTS [BATCH...] - billingd end to end on this machine,
# with the broker and PostgreSQL of scripts/services.sh (. var/services.env).
# Run from the build tree (a build without sanitizers): ../bench/billingd.sh
#
# WORKLOAD=business (the default, the business's own workload, issue 28):
# every account has a 10.00 CNY trial credit for January, every tenth a
# monthly RTX 4090 plan, and billingd publishes credit alerts (50, 80 and
# 100 %) to a topic of their own. WORKLOAD=plain: accounts without grants
# or plans, no alerts (the benchmark before issue 28).
# WORKLOAD=business-ordered: business's accounts, grants, plans and
# records, but produced in time order (produce_events --ordered: record n
# of EVENTS at minute n * 30 days / EVENTS of January, all accounts'
# records of one minute before the next minute's), as a metering stream
# comes; the random order of business gives nearly every batch a late
# event. The latency run's records are in order too.
#
# For each BATCH size (default 5000):
#   1. a fresh database "bench_billingd" (migrated, example price book,
#      gen_events accounts), a fresh 4-partition topic;
#   2. EVENTS records of the benchmark workload produced beforehand;
#   3. billingd started; events/s = records committed between the first
#      and the last commit / that time; billingd's peak RSS (VmHWM); the
#      alerts it raised.
# Then, with BATCH = $LAT_BATCH (default: the first size), the latency run:
# billingd consuming a topic fed at $LAT_RATE (10 000) events/s for 30 s;
# latency = received_at (written at insert) - the send time carried in each
# id; p50, p99, max. With alerts, the alert latency too: from the send of
# the event that made an alert due (the newest of its account in the batch
# that raised it) to the alert's row, written in that batch's transaction
# just before the alert is published and the batch commits.
# REFERENCE=1 adds the physical reference after the throughput runs: the
# same EVENTS events (as JSON lines, produce_events --json) from a topic
# into PostgreSQL by the plainest pipeline, kcat into psql's \copy of a
# table with a unique index on the event id, no rating; it needs kcat
# (apt-get install kcat). Its line ends with billingd_over_reference: the
# last throughput run's events/s over the reference's.
# BILLINGD names the billingd to measure (default: this build's), so that
# an older build runs against the same tools and services in one session.
# LAT_RATE=0: no latency run; LAT_ONLY=1: only the latency run (no
# throughput run; BATCH still names LAT_BATCH's default). Each throughput line ends with alerts_md5,
# an md5 of every alert's fields: an alert is decided over the events
# stored when its batch commits, so with events out of order two runs
# give the same md5 only when their batches are the same: PARTITIONS=1
# CONNECTIONS=1 (one partition, one committer: batches of BATCH
# consecutive records) makes them so, for comparing builds.
# ACCOUNTS (default 1000) sets the accounts of the catalog and the
# events; PARTITIONS (default 4) the topic's partitions. CONNECTIONS sets
# billingd's commit.connections (default 2); RATE_THREADS its rate.threads
# (unset: the key is not passed, so that builds older than it run too).
# HTTP_LISTEN sets http.listen (default empty: no endpoint, so that a
# billingd already running here, with its /metrics port, does not clash).
# Each throughput line also gives server_cpu_ms, PostgreSQL's CPU (user +
# sys, bench/server-cpu.sh) from billingd's start to the last commit, and
# rows_md5, an md5 of every stored event, dedupe row and aggregate (not
# their write times; the topic's name, new each run, left out of the
# source): equal for two builds or batch sizes that stored the same rows.
# The script stops with billingd's log if billingd exits before the end.
# Prints one line per run. Polls the committed positions (half a second).
set -eu
events=${1:?usage: billingd.sh EVENTS [BATCH...]}
shift
batches=${*:-5000}
workload=${WORKLOAD:-business}
billingd=${BILLINGD:-$(pwd)/billingd/billingd}
accounts=${ACCOUNTS:-1000}
produce=(--accounts "$accounts" --partitions "${PARTITIONS:-4}")
case $workload in
business | plain) ;;
business-ordered) produce=(--ordered "${produce[@]}") ;;
*) echo "billingd.sh: WORKLOAD=business|business-ordered|plain" >&2; exit 2 ;;
esac
kind=${workload%-ordered} # business or plain: the catalog and alerts
: "${BILLING_PG_CONNINFO:?load var/services.env}"
: "${BILLING_KAFKA_BROKERS:?load var/services.env}"
src=$(cd "$(dirname "$0")/.." && pwd)
# server_cpu: PostgreSQL's CPU seconds so far (empty when unknown).
. "$src/bench/server-cpu.sh"
bin=$(pwd)
base=$BILLING_PG_CONNINFO
db=bench_billingd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; true' EXIT

fresh_db() {
    psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
    psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null
    export BILLING_PG_CONNINFO="$base dbname=$db"
    "$bin/billing/billing" db migrate >/dev/null
    if [ "$kind" = business ]; then
        "$bin/bench/gen_events" --accounts-json --accounts "$accounts" --grants 10.00 --plans 10
    else
        "$bin/bench/gen_events" --accounts-json --accounts "$accounts"
    fi >"$tmp/accounts.json"
    "$bin/billing/billing" load --pricebook "$src/examples/gpu-cloud/pricebook.json" \
        --accounts "$tmp/accounts.json" >/dev/null
    psql "$BILLING_PG_CONNINFO" -qc "SELECT billing.ensure_event_partitions('2026-01-01', '2026-02-01')" >/dev/null
}

# The throughput loop's poll: one psql session kept open (a coprocess),
# not a psql a poll, whose backend start would add about 40 ms of the
# server's CPU a poll to server_cpu_ms.
poll_open() {
    coproc POLL { psql "$BILLING_PG_CONNINFO" -Atq; }
}
poll_progress() { # sets p
    echo "SELECT coalesce(sum(next_offset), 0) FROM billing.kafka_offsets;" >&"${POLL[1]}"
    read -r p <&"${POLL[0]}"
}
poll_close() {
    local poll_pid=$POLL_PID
    exec {POLL[1]}>&-
    wait "$poll_pid" || true
}

progress() {
    psql "$BILLING_PG_CONNINFO" -Atc "SELECT coalesce(sum(next_offset), 0) FROM billing.kafka_offsets"
}

start_daemon() { # TOPIC BATCH
    local alerts=()
    if [ "$kind" = business ]; then
        "$bin/bench/demo_month" topic --partitions 1 "$BILLING_KAFKA_BROKERS" "$1-alerts" >/dev/null
        alerts=(--set "alerts.topic=$1-alerts" --set alerts.thresholds=50,80,100)
    fi
    "$billingd" --set "topics=$1" --set group=bench --set "batch.size=$2" \
        --set batch.linger.ms=200 --set "kafka.bootstrap.servers=$BILLING_KAFKA_BROKERS" \
        --set kafka.fetch.max.bytes=104857600 --set "commit.connections=${CONNECTIONS:-2}" \
        --set "http.listen=${HTTP_LISTEN:-}" "${alerts[@]}" \
        ${RATE_THREADS:+--set "rate.threads=$RATE_THREADS"} 2>"$tmp/billingd.log" &
    pid=$!
}

alerts_raised() {
    psql "$BILLING_PG_CONNINFO" -Atc "SELECT count(*) FROM billing.credit_alerts"
}

# The alerts' md5 over every field they carry but sent_at: equal for two
# runs (builds, batch sizes) that raised the same alerts.
alerts_md5() {
    psql "$BILLING_PG_CONNINFO" -Atc "SELECT coalesce(md5(string_agg(concat_ws('|', alert_id,
        account_id, pct, granted, grants, threshold, balance, crossed_at, crossed_nanos, event_id),
        ',' ORDER BY alert_id COLLATE \"C\")), '-') FROM billing.credit_alerts"
}

# The stored rows' md5: every raw event (but received_at, the moment it was
# written), every dedupe row and every aggregate (but updated_at). Equal for
# two runs (builds, batch sizes) that stored the same rows.
rows_md5() {
    psql "$BILLING_PG_CONNINFO" -Atc "SELECT md5(
        (SELECT coalesce(string_agg(concat_ws('|', event_id, account_id, resource_id, meter,
            start_time, start_nanos, end_time, end_nanos, quantity, model, region,
            regexp_replace(source, '^kafka:[^/]*/', 'kafka:TOPIC/')),
            ',' ORDER BY event_id COLLATE \"C\"), '') FROM billing.usage_events)
        || (SELECT coalesce(string_agg(concat_ws('|', event_id, start_time, encode(fingerprint,
            'hex'), encode(id_hash, 'hex')), ',' ORDER BY event_id COLLATE \"C\"), '')
            FROM billing.event_ids)
        || (SELECT coalesce(string_agg(concat_ws('|', account_id, month, meter, rate_kind,
            price_version_id, rate_model, rate_region, subscription_id, epoch, quantity,
            quantity_den, event_count), ',' ORDER BY account_id COLLATE \"C\", month, meter
            COLLATE \"C\", rate_kind COLLATE \"C\", price_version_id, rate_model COLLATE \"C\",
            rate_region COLLATE \"C\", subscription_id COLLATE \"C\", epoch), '')
            FROM billing.usage_aggregates))"
}

# PostgreSQL's CPU between two server_cpu readings (ms), or - when unknown.
server_ms() {
    if [ -n "$1" ] && [ -n "$2" ]; then
        echo "$1 $2" | awk '{ printf "%d", ($2 - $1) * 1000 }'
    else
        echo -
    fi
}

stop_daemon() {
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

now_ms() { date +%s%3N; }

# Stop, with its log, when billingd is gone before the work is done.
alive() {
    kill -0 "$pid" 2>/dev/null && return 0
    echo "billingd.sh: billingd exited early; its log:" >&2
    cat "$tmp/billingd.log" >&2
    pid=
    exit 1
}

# billingd's CPU time so far (user + sys, ms): what it costs beside the wall time.
cpu_ms() {
    awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"
}

psql "$base dbname=postgres" -Atc "SELECT 'postgresql ' || string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'synchronous_commit', 'fsync', 'wal_level', 'max_wal_size', 'checkpoint_timeout', 'wal_compression', 'work_mem')"
for batch in $batches; do
    [ "${LAT_ONLY:-0}" = 1 ] && break
    fresh_db
    topic=bench-$(date +%s%N)
    "$bin/bench/produce_events" "${produce[@]}" "$BILLING_KAFKA_BROKERS" "$topic" "$events" \
        2>"$tmp/produce.log"
    poll_open
    s0=$(server_cpu)
    start_daemon "$topic" "$batch"
    first=0
    p=0
    while [ "$p" -lt "$events" ]; do
        sleep 0.5 # the poll interval of a measurement, not a synchronization
        alive
        poll_progress
        if [ "$first" = 0 ] && [ "$p" -gt 0 ]; then
            first=$p
            t0=$(now_ms)
        fi
    done
    t1=$(now_ms)
    rss=$(awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$pid/status")
    cpu=$(cpu_ms "$pid")
    s1=$(server_cpu)
    stop_daemon
    poll_close
    # What the kept credit states did (billingd's alert_cache line at exit; none before h17).
    cache=$(sed -n 's/.*event=alert_cache \(.*\)/\1/p' "$tmp/billingd.log" | tail -1)
    rate=$(( (events - first) * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1) ))
    echo "workload=$workload batch=$batch rate_threads=${RATE_THREADS:-default} events=$events" \
        "events_per_s=$rate wall_ms=$((t1 - t0)) billingd_cpu_ms=$cpu peak_rss_mib=$rss" \
        "alerts=$(alerts_raised) alerts_md5=$(alerts_md5)" \
        "server_cpu_ms=$(server_ms "$s0" "$s1") rows_md5=$(rows_md5)${cache:+ cache: $cache}"
done

# The physical reference: the same events as JSON lines, kcat into \copy.
if [ "${REFERENCE:-0}" = 1 ]; then
    if ! command -v kcat >/dev/null; then
        echo "reference skipped: kcat is not installed (apt-get install kcat)"
    else
        fresh_db
        topic=ref-$(date +%s%N)
        "$bin/bench/produce_events" --json "${produce[@]}" "$BILLING_KAFKA_BROKERS" "$topic" "$events" \
            2>"$tmp/produce.log"
        psql "$BILLING_PG_CONNINFO" -qc "CREATE TABLE public.reference (doc jsonb NOT NULL)" \
            -c "CREATE UNIQUE INDEX reference_id ON public.reference ((doc->>'id'))"
        t0=$(now_ms)
        kcat -C -b "$BILLING_KAFKA_BROKERS" -t "$topic" -o beginning -e -q -f '%s\n' |
            psql "$BILLING_PG_CONNINFO" -qc "\\copy public.reference (doc) FROM pstdin"
        t1=$(now_ms)
        n=$(psql "$BILLING_PG_CONNINFO" -Atc "SELECT count(*) FROM public.reference")
        ref=$((n * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1)))
        # The last throughput run's events/s over the reference's, two decimals.
        echo "reference=kcat+copy events=$n events_per_s=$ref wall_ms=$((t1 - t0))" \
            "billingd_over_reference=$(awk -v a="$rate" -v b="$ref" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
    fi
fi

# Latency at a steady LAT_RATE events/s (default 10 000) for 30 s; LAT_RATE=0 skips it.
lat_rate=${LAT_RATE:-10000}
[ "$lat_rate" -gt 0 ] || exit 0
lat_events=$((lat_rate * 30))
batch=${LAT_BATCH:-${batches%% *}}
fresh_db
topic=lat-$(date +%s%N)
"$bin/bench/produce_events" --rate 1 "${produce[@]}" "$BILLING_KAFKA_BROKERS" "$topic" 1 2>/dev/null
start_daemon "$topic" "$batch"
until grep -q "event=assigned" "$tmp/billingd.log"; do alive; sleep 0.2; done
"$bin/bench/produce_events" --rate "$lat_rate" "${produce[@]}" "$BILLING_KAFKA_BROKERS" "$topic" "$lat_events" \
    2>"$tmp/produce.log"
until [ "$(progress)" -ge $((lat_events + 1)) ]; do alive; sleep 0.5; done
rss=$(awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$pid/status")
cpu=$(cpu_ms "$pid")
stop_daemon
psql "$BILLING_PG_CONNINFO" -Atc "
    WITH l AS (SELECT extract(epoch FROM received_at) * 1000
                      - split_part(event_id, '-', 2)::bigint AS ms
               FROM billing.usage_events WHERE event_id LIKE 'lat-%')
    SELECT 'workload=$workload batch=$batch rate=$lat_rate/s events=' || count(*)
           || ' p50_ms=' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))
           || ' p99_ms=' || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))
           || ' max_ms=' || round(max(ms)) || ' peak_rss_mib=$rss billingd_cpu_ms=$cpu' FROM l"
[ "$kind" = business ] || exit 0
# An alert's trigger: the newest event of its account in the batch that raised
# it (the batch's transaction began at its events' received_at, before the
# alert's sent_at; the latest such batch of the account).
psql "$BILLING_PG_CONNINFO" -Atc "
    WITH a AS (SELECT c.alert_id, c.sent_at,
                      (SELECT max(split_part(e.event_id, '-', 2)::bigint) FROM billing.usage_events e
                        WHERE e.account_id = c.account_id AND e.event_id LIKE 'lat-%'
                          AND e.received_at = (SELECT max(x.received_at) FROM billing.usage_events x
                                                WHERE x.account_id = c.account_id
                                                  AND x.received_at <= c.sent_at)) AS sent_ms
               FROM billing.credit_alerts c),
         l AS (SELECT extract(epoch FROM sent_at) * 1000 - sent_ms AS ms FROM a WHERE sent_ms IS NOT NULL)
    SELECT 'alerts=' || count(*)
           || ' alert_p50_ms=' || coalesce(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::text, '-')
           || ' alert_p99_ms=' || coalesce(round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms))::text, '-')
           || ' alert_max_ms=' || coalesce(round(max(ms))::text, '-') FROM l"
