#!/bin/bash
# close-bench.sh - month-end close at scale (doc/performance.md, "Month-end
# close"): ACCOUNTS accounts with EVENTS_PER_ACCOUNT raw events each in
# November 2026, stored in a fresh database, then timed:
#   billing close --period 2026-11 -j JOBS   (first run: every draft new)
#   the same again                            (nothing changes)
#   billing close --finalize --grace 0        (and, read back, the numbering
#                                            alone: first to last batch start)
#   billing invoice export --period 2026-11 --format pdf (PDF_COUNT invoices),
#     once per -j of PDF_JOBS (default "1 2") when the binary takes -j,
#     else once; each export into a directory of its own (PDF files removed
#     just before would make ext4 search its inode bitmap for every new
#     file), with invoices/s
# Peak memory is the maximum resident set size from /usr/bin/time.
#
#   BILLING_PG_CONNINFO=... bench/close-bench.sh [ACCOUNTS [EVENTS_PER_ACCOUNT [JOBS]]]
#
# Run from the build directory (uses ./billing/billing, or $BILLING). With
# BASELINE=path/to/old/billing the same steps run first with that binary on
# an identical copy of the data, for an old/new ratio measured in one run;
# each run prints a digest of every stored draft, which must be equal.
# SETUP_ONLY=1 only sets up, and keeps the database (for profiling);
# FROM_DB=name skips the setup and times copies of that kept database
# (ACCOUNTS and EVENTS_PER_ACCOUNT are then what it holds). FIRST_ONLY=1
# times the first close alone (and prints its digest); ROUNDS=N runs the
# baseline and the new build alternated N times, each on a fresh copy.
# Every timed line ends with the 1-minute load average before and after. The events are
# generated inside PostgreSQL with generate_series (setup, not measured):
# every account has gpu hours on two models, gpuless hours, daily storage
# samples and traffic, a third of them a credit grant, a tenth a monthly
# plan, in five time zones.
set -eu

accounts=${1:-100000}
per=${2:-100}
jobs=${3:-2}
pdf_count=${PDF_COUNT:-1000}
pdf_jobs=${PDF_JOBS:-1 2}
billing=${BILLING:-./billing/billing}
db=${FROM_DB:-billing_bench_close_$$}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
cleanup() {
    rm -rf "$work"
    for d in "${db}_baseline" "${db}_new"; do
        psql -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true
    done
    [ -n "${FROM_DB:-}" ] ||
        psql -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

base=${BILLING_PG_CONNINFO:?set BILLING_PG_CONNINFO (scripts/pg.sh start && . var/services.env)}
conn="$base dbname=$db"
export PGHOST PGPORT PGUSER
stamp() { date +%s.%N; }
since() { echo "$(stamp) - $1" | bc; }

if [ -z "${FROM_DB:-}" ]; then
psql -q -d postgres -c "CREATE DATABASE $db"
# The baseline's schema if there is one; each run migrates its own copy.
"${BASELINE:-$billing}" db migrate --db "$conn" >/dev/null
"${BASELINE:-$billing}" load --db "$conn" --pricebook "$src/tests/golden/pricebook.json" --book default >/dev/null

t0=$(stamp)
psql -q -d "$db" -v accounts="$accounts" -v per="$per" <<'EOF'
SET search_path = billing, pg_catalog;
INSERT INTO accounts (id, currency, time_zone, tax_rate)
    SELECT 'acct-' || lpad(a::text, 6, '0'), 'CNY',
           (ARRAY['Asia/Shanghai', 'America/New_York', 'Europe/London', 'UTC', 'Asia/Tokyo'])[a % 5 + 1],
           (ARRAY[0.06, 0, 0.13])[a % 3 + 1]
    FROM generate_series(0, :accounts - 1) a;
INSERT INTO credit_grants (id, account_id, currency, amount, granted_at, expires_at, kinds)
    SELECT 'trial-' || a, 'acct-' || lpad(a::text, 6, '0'), 'CNY', 10.00,
           '2026-10-20Z', '2026-11-20Z', 1
    FROM generate_series(0, :accounts - 1, 3) a;
INSERT INTO credit_ledger (grant_id, entry, amount_minor, effective_at)
    SELECT id, 'grant', 1000, granted_at FROM credit_grants;
INSERT INTO subscriptions (id, account_id, resource_id, plan_id, start_at, terms)
    SELECT 'sub-' || a, 'acct-' || lpad(a::text, 6, '0'), 'i-' || a || '-0', 'rtx-monthly',
           '2026-10-05T01:00:00Z', 3
    FROM generate_series(0, :accounts - 1, 10) a;
-- Event k of account a: kinds by k % 10, one hour each (storage: a day), through November.
-- Generated into an unlogged staging table, then loaded with the raw-event
-- tables' key and index dropped and rebuilt afterwards: one sort per
-- index instead of 20 000 000 random b-tree insertions (the row-by-row
-- load took 28 minutes for 10 000 000 events). They come back under their
-- own names (migration 0007's), so the schema is the migrations' own.
SET maintenance_work_mem = '512MB';
SET work_mem = '256MB';
CREATE UNLOGGED TABLE gen AS
    SELECT 'e-' || a || '-' || k AS id, 'acct-' || lpad(a::text, 6, '0') AS account,
           CASE WHEN k % 10 < 5 THEN 'gpu' WHEN k % 10 < 7 THEN 'gpuless'
                WHEN k % 10 < 9 THEN 'storage' ELSE 'traffic' END AS meter,
           'i-' || a || '-' || (k % 3) AS resource,
           timestamptz '2026-11-01T00:00:00Z' + ((k * 7 + a) % 700) * interval '1 hour' AS start,
           CASE WHEN k % 10 IN (7, 8) THEN interval '1 day' ELSE interval '1 hour' END AS len,
           CASE WHEN k % 10 < 5 THEN (k % 8 + 1)::numeric WHEN k % 10 < 7 THEN 1
                WHEN k % 10 < 9 THEN 500 + a % 1000 ELSE 1000000000 + k END AS qty,
           CASE WHEN k % 10 >= 7 THEN '' WHEN k % 4 = 0 THEN 'A100-80G' ELSE 'RTX4090' END AS model
    FROM generate_series(0, :accounts - 1) a, generate_series(0, :per - 1) k;
BEGIN;
DROP INDEX usage_events_account;
ALTER TABLE event_ids DROP CONSTRAINT event_ids_pkey;
INSERT INTO event_ids (event_id, start_time, fingerprint)
    SELECT id, start, decode(md5(id), 'hex') FROM gen;
INSERT INTO usage_events (event_id, account_id, resource_id, meter, start_time, end_time,
                          quantity, model, region)
    SELECT id, account, resource, meter, start, start + len, qty, model, 'cn-east-1' FROM gen;
ALTER TABLE event_ids ADD CONSTRAINT event_ids_pkey PRIMARY KEY (id_hash);
CREATE INDEX usage_events_account ON usage_events (account_id);
COMMIT;
DROP TABLE gen;
ANALYZE;
EOF
events=$(psql -tA -d "$db" -c "SELECT count(*) FROM billing.usage_events")
echo "setup: $accounts accounts, $events events in $(since "$t0") s"
else
    echo "from $db: $(psql -tA -d "$db" -c "SELECT count(*) FROM billing.accounts") accounts," \
        "$(psql -tA -d "$db" -c "SELECT count(*) FROM billing.usage_events") events"
fi

# server_cpu: the PostgreSQL server's CPU seconds so far (empty when unknown).
. "$(dirname "$0")/server-cpu.sh"

measure() {
    local label=$1
    local before
    shift
    local load0
    before=$(server_cpu)
    load0=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "%e s wall, %U s user + %S s sys, max RSS %M KiB" -o "$work/time" "$@" \
        >"$work/out" 2>"$work/err" || { cat "$work/err"; exit 1; }
    if [ -n "$before" ]; then
        echo "$label: $(cat "$work/time"); server $(echo "$(server_cpu) - $before" | bc) s CPU;" \
            "load $load0-$(cut -d' ' -f1 /proc/loadavg)"
    else
        echo "$label: $(cat "$work/time"); load $load0-$(cut -d' ' -f1 /proc/loadavg)"
    fi
}

# The timed steps with binary $1 on a fresh copy of the set-up database,
# so that a baseline and the new build close identical data.
run_steps() {
    local bin=$1
    local name=$2
    local copy="${db}_$name"
    local cconn="$base dbname=$copy"
    psql -q -d postgres -c "CREATE DATABASE $copy TEMPLATE $db"
    echo "== $name: $bin"
    "$bin" db migrate --db "$cconn" >/dev/null
    measure "close (new drafts, -j $jobs)" "$bin" close --db "$cconn" --period 2026-11 -j "$jobs" --quiet
    grep -E "^(accounts|drafts|events|total) " "$work/out"
    if [ -z "${FIRST_ONLY:-}" ]; then
        measure "close again (unchanged, -j $jobs)" "$bin" close --db "$cconn" --period 2026-11 -j "$jobs" --quiet
        grep -E "^drafts " "$work/out"
    fi
    psql -tA -d "$copy" -c "SELECT 'digest of every draft: ' || md5(string_agg(i.account_id || ':' || i.subtotal || ':' ||
        i.credits || ':' || i.tax || ':' || i.total || ':' || coalesce(l.lines, ''), ',' ORDER BY i.account_id))
        FROM billing.invoices i LEFT JOIN (SELECT invoice_id, string_agg(line_no || '/' || kind || '/' ||
        quantity || '/' || amount, ';' ORDER BY line_no) AS lines FROM billing.invoice_lines GROUP BY invoice_id) l
        ON l.invoice_id = i.id WHERE i.month = '2026-11-01'"
    if [ -n "${FIRST_ONLY:-}" ]; then
        psql -q -d postgres -c "DROP DATABASE $copy WITH (FORCE)"
        return
    fi
    measure "finalize" "$bin" close --db "$cconn" --period 2026-11 -j "$jobs" --quiet --finalize --grace 0
    tail -n 1 "$work/out"
    # The numbering alone (the step closes first): finalized_at is each
    # batch's transaction start, so the span from the first to the last is
    # the numbering less its last batch (of 500). The digest of the numbers
    # must be equal between the baseline and the new build.
    psql -tA -d "$copy" -c "SELECT 'numbering: ' || count(*) || ' invoices in ' || count(DISTINCT finalized_at)
        || ' batches, first to last batch start ' || round(extract(epoch FROM max(finalized_at) - min(finalized_at)), 2)
        || ' s; digest of the numbers: ' || md5(string_agg(account_id || ':' || series || ':' || number || ':' || status,
        ',' ORDER BY account_id)) FROM billing.invoices WHERE month = '2026-11-01' AND kind = 'invoice'"
    # A binary from before `invoice export -j` exports once, on one thread.
    local js="$pdf_jobs"
    "$bin" invoice --help | grep -q -- "--jobs" || js=old
    for j in $js; do
        local dir="$work/pdf-$name-$j"
        local opt=""
        [ "$j" = old ] || opt="-j $j"
        local t0
        t0=$(stamp)
        # shellcheck disable=SC2086
        measure "export $pdf_count PDF (--period, the first $pdf_count by --limit) ${opt:-(no -j)}" \
            "$bin" invoice export --db "$cconn" --period 2026-11 --format pdf --out "$dir" \
            --limit "$pdf_count" $opt
        local secs
        secs=$(since "$t0")
        n=$(ls "$dir" | wc -l)
        size=$(du -sk "$dir" | cut -f1)
        echo "PDF ${opt:-(no -j)}: $n files, $size KiB, $(echo "$n / $secs" | bc) invoices/s"
    done
    psql -q -d postgres -c "DROP DATABASE $copy WITH (FORCE)"
}

if [ -n "${SETUP_ONLY:-}" ]; then
    # For profiling: keep the set-up database and say its name.
    trap 'rm -rf "$work"' EXIT
    echo "database: $db (kept; drop it when done)"
    exit 0
fi
rounds=${ROUNDS:-1}
for round in $(seq 1 "$rounds"); do
    [ "$rounds" -eq 1 ] || echo "=== round $round of $rounds"
    if [ -n "${BASELINE:-}" ]; then
        run_steps "$BASELINE" baseline
    fi
    run_steps "$billing" new
done
