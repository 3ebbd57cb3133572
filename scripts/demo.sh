#!/bin/bash
# demo.sh - the whole pipeline in one command: a month of a GPU cloud
# (about 1 000 accounts) produced to Kafka, consumed by billingd into
# PostgreSQL exactly once, closed and finalized, then summarized from the
# database, with invoices exported and two pictures drawn.
#
#   scripts/demo.sh [--accounts N] [--seed S] [--partitions P] [--out DIR]
#                   [--serve] [--no-install] [--build DIR] [--services-env]
#                   [--database NAME] [--fresh]
#
# Steps (each says what it reused on a second run):
#  1. scripts/install-deps.sh (--no-install skips it);
#  2. an out-of-tree build without sanitizers in _build-demo/ (--build DIR:
#     an existing build tree, used as it is);
#  3. the services of scripts/services.sh (the same the tests use), started
#     unless already running; --services-env uses the ones named by
#     BILLING_PG_CONNINFO and BILLING_KAFKA_BROKERS and never starts or
#     stops them (tests/check-demo.sh);
#  4. database "billing_demo" (--database) on that server: migrated, the
#     GPU-cloud price book and the generated accounts loaded;
#  5. the month produced by bench/demo_month to a topic of P partitions
#     (default 4); what was produced is kept in the database (table
#     public.demo_runs), so a second run does not produce it again;
#  6. billingd runs until its positions in billing.kafka_offsets reach the
#     produced end offsets, then stops (--serve: keeps running, with its
#     /metrics, its HTTP API and the web console, until Ctrl-C);
#  7. the credit alerts billingd published are read from their topic into
#     public.demo_alerts; `billing close --finalize` closes the month;
#  8. the summary (every figure a SQL query), invoices exported as PDF,
#     JSON and CSV, and two PNG pictures (gnuplot) into DIR (demo-out/);
#     with --serve, the console's address and an operator key made for it
#     (`billing apikey create --scope admin`).
#
# Ctrl-C stops what this run started (billingd, the services) and nothing
# else. Ports: BILLING_PG_PORT, BILLING_KAFKA_PORT,
# BILLING_KAFKA_CONTROLLER_PORT as scripts/services.sh, and
# BILLING_DEMO_HTTP_PORT for billingd's /metrics and BILLING_DEMO_API_PORT
# for its API and console (--serve); by default each a loopback port free
# when billingd starts (bound to port 0 and released; printed), never the
# broker's port + N, which lies in the ephemeral range any client may hold.
set -eu

here=$(dirname "$0")
. "$here/lib.sh"

accounts=1000
seed=1
partitions=4
out=$BILLING_ROOT/demo-out
serve=0
install=1
build=
use_env=0
dbname=billing_demo
fresh=0
period=2026-01
http_port=${BILLING_DEMO_HTTP_PORT:-} # empty: billing_free_port when billingd starts
api_port=${BILLING_DEMO_API_PORT:-}
group=demo

usage() {
    sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

need_arg() {
    [ $# -ge 2 ] || billing_die "$1 needs a value"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --accounts) need_arg "$@"; accounts=$2; shift ;;
        --seed) need_arg "$@"; seed=$2; shift ;;
        --partitions) need_arg "$@"; partitions=$2; shift ;;
        --out) need_arg "$@"; out=$(billing_abs "$2"); shift ;;
        --build) need_arg "$@"; build=$(billing_abs "$2"); shift ;;
        --database) need_arg "$@"; dbname=$2; shift ;;
        --serve) serve=1 ;;
        --no-install) install=0 ;;
        --services-env) use_env=1 ;;
        --fresh) fresh=1 ;;
        --help | -h) usage ;;
        *) billing_log "unknown option '$1'"; usage ;;
    esac
    shift
done
for v in accounts seed partitions; do
    case "${!v}" in
        '' | *[!0-9]* | 0) billing_die "--$v '${!v}': expected a positive integer" ;;
    esac
done
case "$dbname" in
    [a-z]*[!a-z0-9_]* | [!a-z]*) billing_die "--database '$dbname': expected [a-z][a-z0-9_]*" ;;
esac

started_services=0
bd_pid=
say() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }

# Stop what this run started, and only that.
cleanup() {
    # Ctrl-C in `scripts/demo.sh | tee log` ends tee too: the first message
    # to the dead pipe kills this shell (SIGPIPE) and the EXIT trap lands
    # here, where a second message must not kill it before the services
    # are stopped.
    trap '' PIPE
    if [ -n "$bd_pid" ] && billing_pid_alive "$bd_pid"; then
        kill -TERM "$bd_pid" 2>/dev/null || true
        wait "$bd_pid" 2>/dev/null || true
    fi
    bd_pid=
    if [ "$started_services" = 1 ]; then
        note "stopping the services this run started" 2>/dev/null || true
        bash "$here/services.sh" stop >/dev/null 2>&1 || true
        started_services=0
    fi
}
interrupted() {
    trap '' INT TERM HUP
    cleanup
    billing_log "interrupted: stopped what this run started" 2>/dev/null || true
    exit 130
}
trap interrupted INT TERM HUP
trap cleanup EXIT

# ---------------------------------------------------------------------------
step_install() {
    say "1/8 dependencies"
    if [ "$install" = 1 ]; then
        bash "$here/install-deps.sh" | sed 's/^/   /'
    else
        note "skipped (--no-install)"
    fi
}

step_build() {
    say "2/8 build"
    if [ -n "$build" ]; then
        [ -x "$build/billingd/billingd" ] && [ -x "$build/bench/demo_month" ] ||
            billing_die "--build $build: no billingd/billingd or bench/demo_month there (make first)"
        note "using the build in $build"
        return
    fi
    build=$BILLING_ROOT/_build-demo
    if [ ! -f "$build/config.status" ]; then
        note "configuring in $build (no sanitizers; log $out/configure.log)"
        mkdir -p "$out"
        (billing_configure_build "$build") >"$out/configure.log" 2>&1 || {
            tail -20 "$out/configure.log"
            billing_die "configure failed (log: $out/configure.log)"
        }
    else
        note "reusing the configured tree $build"
    fi
    make -C "$build" -j2 >"$build/demo-make.log" 2>&1 || {
        tail -30 "$build/demo-make.log"
        billing_die "build failed (log: $build/demo-make.log)"
    }
    if grep -qE '^ +(CC|CCLD|GEN) ' "$build/demo-make.log"; then
        note "built ($(grep -cE '^ +(CC|CCLD) ' "$build/demo-make.log") objects and programs)"
    else
        note "build up to date: nothing recompiled"
    fi
}

step_services() {
    say "3/8 services"
    if [ "$use_env" = 1 ]; then
        : "${BILLING_PG_CONNINFO:?--services-env: load var/services.env first}"
        : "${BILLING_KAFKA_BROKERS:?--services-env: load var/services.env first}"
        note "using the services of the environment ($BILLING_KAFKA_BROKERS)"
        return
    fi
    if bash "$here/services.sh" status >/dev/null 2>&1; then
        note "reused: PostgreSQL and Kafka were already running"
    else
        bash "$here/services.sh" start 2>&1 | sed 's/^/   /'
        started_services=1
    fi
    # shellcheck disable=SC1090
    . "$BILLING_ENV_FILE"
}

# ---------------------------------------------------------------------------
base_conninfo=
db_conninfo=

# Every psql of the demo without NOTICEs ("relation ... already exists,
# skipping" of IF NOT EXISTS on a second run); warnings and errors still show.
psql() {
    PGOPTIONS="${PGOPTIONS:+$PGOPTIONS }-c client_min_messages=warning" command psql "$@"
}

q() { # SQL -> unaligned rows, fields separated by '|'
    psql "$db_conninfo" -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"
}

step_database() {
    say "4/8 database $dbname"
    base_conninfo=$BILLING_PG_CONNINFO
    db_conninfo="$(printf '%s' "$base_conninfo" | sed 's/dbname=[^ ]*//; s/  */ /g; s/ $//') dbname=$dbname"
    if [ "$fresh" = 1 ]; then
        psql "$base_conninfo dbname=postgres" -X -qc "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null
    fi
    if [ "$(psql "$base_conninfo dbname=postgres" -X -Atc \
        "SELECT count(*) FROM pg_database WHERE datname = '$dbname'")" = 0 ]; then
        psql "$base_conninfo dbname=postgres" -X -qc "CREATE DATABASE $dbname" >/dev/null
        note "created"
    else
        note "reused: the database exists"
    fi
    export BILLING_PG_CONNINFO=$db_conninfo
    "$build/billing/billing" db migrate | sed 's/^/   migrate: /'
    q "SELECT billing.ensure_event_partitions('2025-12-01', '2026-03-01')" >/dev/null
    mkdir -p "$out"
    "$build/bench/demo_month" accounts --accounts "$accounts" --seed "$seed" >"$out/accounts.json"
    "$build/billing/billing" load --pricebook "$BILLING_ROOT/examples/gpu-cloud/pricebook.json" \
        --accounts "$out/accounts.json" | sed 's/^/   load: /'
    q "CREATE TABLE IF NOT EXISTS public.demo_runs (
           accounts int, seed bigint, partitions int, topic text NOT NULL,
           report text NOT NULL, produced_at timestamptz NOT NULL DEFAULT now(),
           PRIMARY KEY (accounts, seed, partitions));
       CREATE TABLE IF NOT EXISTS public.demo_alerts (
           alert_id text PRIMARY KEY, account_id text NOT NULL, kind text NOT NULL,
           threshold numeric NOT NULL, balance numeric NOT NULL, currency text NOT NULL,
           crossed_at timestamptz NOT NULL)" >/dev/null
}

# ---------------------------------------------------------------------------
topic=
report=

report_get() { # KEY -> value from the generator's report
    printf '%s\n' "$report" | awk -v k="$1" '$1 == k { print $2 }'
}

step_produce() {
    say "5/8 a month of usage to Kafka"
    local key="accounts = $accounts AND seed = $seed AND partitions = $partitions"
    topic=$(q "SELECT topic FROM public.demo_runs WHERE $key")
    if [ -n "$topic" ]; then
        report=$(q "SELECT report FROM public.demo_runs WHERE $key")
        note "reused: already produced to topic $topic"
        return
    fi
    # A new topic per database: a dropped database never meets old records.
    topic=demo-usage-$dbname-$(date +%s)
    report=$("$build/bench/demo_month" produce --accounts "$accounts" --seed "$seed" \
        --partitions "$partitions" "$BILLING_KAFKA_BROKERS" "$topic")
    "$build/bench/demo_month" topic --partitions 1 "$BILLING_KAFKA_BROKERS" "$topic-alerts"
    "$build/bench/demo_month" topic --partitions 1 "$BILLING_KAFKA_BROKERS" "$topic-dead"
    # psql variables quote the report (-c would not interpolate them).
    echo "INSERT INTO public.demo_runs VALUES ($accounts, $seed, $partitions, :'topic', :'report')" |
        psql "$db_conninfo" -X -q -v ON_ERROR_STOP=1 -v topic="$topic" -v report="$report" >/dev/null
    note "produced to $topic: $(report_get records) records ($(report_get events) events," \
        "$(report_get replays) replays, $(report_get malformed) malformed)"
}

# Sum of the produced end offsets and of billingd's committed positions.
produced_end() {
    printf '%s\n' "$report" | awk '$1 == "end_offset" { s += $3 } END { print s + 0 }'
}
committed() {
    q "SELECT coalesce(sum(next_offset), 0) FROM billing.kafka_offsets
       WHERE consumer_group = '$group' AND topic = '$topic'"
}

# CPU time of process $1 so far: "user U s + sys S s" (/proc, clock ticks).
cpu_of() {
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "user %.2f s + sys %.2f s", $12 / hz, $13 / hz }' \
        "/proc/$1/stat" 2>/dev/null || echo "unknown"
}

step_consume() {
    say "6/8 billingd"
    local want have
    want=$(produced_end)
    have=$(committed)
    if [ "$have" -ge "$want" ] && [ "$serve" = 0 ]; then
        note "reused: billingd had already committed all $want records of $topic"
        return
    fi
    # The HTTP API on loopback (api_example asks it one balance); with
    # --serve the console too, its files from the source tree.
    if [ -z "$http_port" ]; then
        http_port=$(billing_free_port "$api_port") || billing_die "no free loopback port for /metrics"
    fi
    if [ -z "$api_port" ]; then
        api_port=$(billing_free_port "$http_port") || billing_die "no free loopback port for the API"
    fi
    note "billingd's /metrics on 127.0.0.1:$http_port, its API on 127.0.0.1:$api_port"
    local api=(--set "api.listen=127.0.0.1:$api_port")
    [ "$serve" = 0 ] || api+=(--set "api.console_dir=$BILLING_ROOT/billingd/console")
    "$build/billingd/billingd" --set "topics=$topic" --set "group=$group" \
        --set "alerts.topic=$topic-alerts" --set "dead_letter_topic=$topic-dead" \
        --set "http.listen=127.0.0.1:$http_port" "${api[@]}" \
        --set "kafka.bootstrap.servers=$BILLING_KAFKA_BROKERS" 2>"$out/billingd.log" &
    bd_pid=$!
    note "billingd (pid $bd_pid, log $out/billingd.log) consuming $want records from offset sum $have"
    local t0 t1
    t0=$(date +%s%N)
    # The synchronization is the committed positions reaching the end
    # offsets; the pause only spaces the queries.
    while [ "$(committed)" -lt "$want" ]; do
        billing_pid_alive "$bd_pid" || {
            tail -20 "$out/billingd.log"
            billing_die "billingd exited before catching up (log: $out/billingd.log)"
        }
        sleep 0.5
    done
    t1=$(date +%s%N)
    note "caught up: $want records committed in $(((t1 - t0) / 1000000)) ms wall;" \
        "billingd CPU $(cpu_of "$bd_pid")"
    curl -fsS "http://127.0.0.1:$http_port/metrics" >"$out/metrics.txt" 2>/dev/null ||
        note "(could not read /metrics)"
    api_example
    if [ "$serve" = 0 ]; then
        kill -TERM "$bd_pid"
        wait "$bd_pid" || billing_die "billingd did not stop cleanly (log: $out/billingd.log)"
        bd_pid=
    fi
}

# One account's live balance through billingd's HTTP API, as a cloud's
# console asks it: a key bound to that account (accounts:read), the curl
# line kept for the report, the answer in $out/balance.json.
api_example() {
    local key
    api_acct=$(q "SELECT id FROM billing.accounts ORDER BY id LIMIT 1")
    key=$("$build/billing/billing" apikey create --scope accounts:read --account "$api_acct" \
        --label demo-balance --db "$db_conninfo" | sed -n 's/.*\(bk_[A-Za-z0-9_-]*\).*/\1/p' |
        head -1)
    [ -n "$key" ] || billing_die "billing apikey create gave no key"
    api_curl="curl -s -H 'Authorization: Bearer $key' http://127.0.0.1:$api_port/v1/accounts/$api_acct/balance"
    curl -fsS -H "Authorization: Bearer $key" \
        "http://127.0.0.1:$api_port/v1/accounts/$api_acct/balance" >"$out/balance.json" ||
        billing_die "GET /v1/accounts/$api_acct/balance failed (log: $out/billingd.log)"
    note "GET /v1/accounts/$api_acct/balance answered ($out/balance.json)"
}

step_close() {
    say "7/8 alerts and month-end"
    "$build/bench/demo_month" alerts "$BILLING_KAFKA_BROKERS" "$topic-alerts" >"$out/alerts.tsv"
    psql "$db_conninfo" -X -q -v ON_ERROR_STOP=1 >/dev/null <<EOF
CREATE TEMP TABLE a (LIKE public.demo_alerts);
\copy a FROM '$out/alerts.tsv'
INSERT INTO public.demo_alerts SELECT * FROM a ON CONFLICT (alert_id) DO NOTHING;
EOF
    note "$(wc -l <"$out/alerts.tsv") credit alerts read from $topic-alerts" \
        "($(q "SELECT count(*) FROM public.demo_alerts") distinct)"
    if [ "$(q "SELECT count(*) FROM billing.invoices WHERE month = '$period-01'
               AND status = 'finalized'")" -gt 0 ]; then
        note "reused: $period already closed and finalized"
        return
    fi
    "$build/billing/billing" close --period "$period" -j 2 --finalize --grace 0 --quiet \
        >"$out/close.txt" || {
        cat "$out/close.txt"
        billing_die "billing close failed"
    }
    note "closed and finalized $period ($out/close.txt)"
}

# ---------------------------------------------------------------------------
. "$here/demo-report.sh"

main() {
    step_install
    step_build
    step_services
    step_database
    step_produce
    step_consume
    step_close
    say "8/8 results"
    report_all
    if [ "$serve" = 1 ] && [ -n "$bd_pid" ]; then
        local key
        key=$("$build/billing/billing" apikey create --scope admin --label demo-console \
            --db "$db_conninfo" | sed -n 's/.*\(bk_[A-Za-z0-9_-]*\).*/\1/p' | head -1)
        [ -n "$key" ] || billing_die "billing apikey create gave no key"
        printf '\nThe web console: http://127.0.0.1:%s/console/\n' "$api_port"
        printf '   sign in with the operator key %s\n' "$key"
        printf '   (made now by billing apikey create --scope admin; doc/console.md)\n'
        note "billingd keeps running (--serve): curl -s http://127.0.0.1:$http_port/metrics;" \
            "Ctrl-C stops it"
        wait "$bd_pid" || true
        bd_pid=
    fi
}

main
