#!/bin/bash
# finalize-bench.sh - the numbering of `billing close --finalize` alone,
# at any number of drafts (doc/performance.md, "Month-end close", the
# finalize guard once per statement):
#
#   BILLING_PG_CONNINFO=... bench/finalize-bench.sh [DRAFTS [ROUNDS]]
#   FROM_CLOSED=db BILLING_PG_CONNINFO=... bench/finalize-bench.sh - [ROUNDS]
#
# Makes a database of DRAFTS accounts with one draft each for November
# 2026 (two lines of 5.00, tax 0.60, ids in account order as a close
# writes them), then ROUNDS times (default 1), on a fresh copy each:
# with BASELINE=path/to/old/billing first, then ./billing/billing (or
# $BILLING), migrates the copy with that binary and numbers every draft
# the way that build's bs_finalize_month does (billing.finalize_invoices
# in batches of 500, or since migration 0021 of 1 000 each picking after
# the last account of the batch before, then a pass from the first), in
# a server-side loop with one commit per batch. Prints the wall time, the
# WAL written, and a digest of the numbers, which must be equal. Without
# the close before it (close-bench.sh times the whole `--finalize` step),
# so that 1 M drafts need no 1 M-account close first. Run from the build
# directory. The database is dropped at the end unless KEEP=1.
#
# FROM_CLOSED=name times the whole step instead: `billing close
# -j 2 --finalize --grace 0` (the unchanged re-close, then the numbering) on
# copies of that database, which a `billing close` of the period has
# already closed (e.g. one set up by `SETUP_ONLY=1 bench/close-bench.sh`,
# then closed once): wall time, the server's CPU seconds (as
# close-bench.sh counts them), the WAL written, the numbering's span
# (first to last batch start) and the digest of the numbers.
set -eu

drafts=${1:-100000}
rounds=${2:-1}
billing=${BILLING:-./billing/billing}
db=billing_bench_finalize_$$
base=${BILLING_PG_CONNINFO:?set BILLING_PG_CONNINFO (scripts/pg.sh start && . var/services.env)}
cleanup() {
    psql -q -d postgres -c "DROP DATABASE IF EXISTS ${db}_run WITH (FORCE)" >/dev/null 2>&1 || true
    [ -n "${KEEP:-}" ] ||
        psql -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
stamp() { date +%s.%N; }

if [ -n "${FROM_CLOSED:-}" ]; then
    # server_cpu as close-bench.sh counts it; 0 when unknown.
    . "$(dirname "$0")/server-cpu.sh"
    server_cpu0() {
        local s
        s=$(server_cpu)
        echo "${s:-0}"
    }
    step() {
        local bin=$1
        local run="${db}_run"
        psql -q -d postgres -c "CREATE DATABASE $run TEMPLATE $FROM_CLOSED"
        "$bin" db migrate --db "$base dbname=$run" >/dev/null
        psql -q -d "$run" -c "CHECKPOINT" 2>/dev/null || true # a clean start (superuser only)
        local lsn
        lsn=$(psql -tA -d "$run" -c "SELECT pg_current_wal_lsn()")
        local cpu
        cpu=$(server_cpu0)
        local t
        t=$(stamp)
        "$bin" close --db "$base dbname=$run" --period 2026-11 -j 2 --quiet --finalize --grace 0 |
            tail -n 1
        echo "$bin: close --finalize $(echo "$(stamp) - $t" | bc) s wall, server" \
            "$(echo "$(server_cpu0) - $cpu" | bc) s CPU, WAL $(psql -tA -d "$run" -c "SELECT
            pg_size_pretty(pg_current_wal_lsn() - '$lsn'::pg_lsn)")"
        psql -tA -d "$run" -c "SELECT 'numbering: ' || count(*) || ' in ' || count(DISTINCT
            finalized_at) || ' batches, first to last batch start ' || round(extract(epoch FROM
            max(finalized_at) - min(finalized_at)), 2) || ' s; digest of the numbers: '
            || md5(string_agg(account_id || ':' || series || ':' || number || ':' || status, ','
            ORDER BY account_id)) FROM billing.invoices WHERE month = '2026-11-01'
            AND kind = 'invoice'"
        psql -q -d postgres -c "DROP DATABASE $run WITH (FORCE)"
    }
    for _ in $(seq "$rounds"); do
        [ -z "${BASELINE:-}" ] || step "$BASELINE"
        step "$billing"
    done
    exit 0
fi

psql -q -d postgres -c "CREATE DATABASE $db"
"${BASELINE:-$billing}" db migrate --db "$base dbname=$db" >/dev/null
t0=$(stamp)
psql -q -d "$db" -v n="$drafts" <<'EOF'
SET search_path = billing, pg_catalog;
INSERT INTO accounts (id, currency)
    SELECT 'acct-' || lpad(a::text, 7, '0'), 'CNY' FROM generate_series(0, :n - 1) a;
-- Setup only: the rows are consistent by construction, the guards and
-- foreign keys are back on before anything is timed.
ALTER TABLE invoices DISABLE TRIGGER ALL;
ALTER TABLE invoice_lines DISABLE TRIGGER ALL;
INSERT INTO invoices (account_id, currency, month, period_start, period_end, subtotal, tax,
                      total)
    SELECT 'acct-' || lpad(a::text, 7, '0'), 'CNY', '2026-11-01', '2026-11-01Z', '2026-12-01Z',
           10.00, 0.60, 10.60
    FROM generate_series(0, :n - 1) a;
INSERT INTO invoice_lines (invoice_id, line_no, kind, meter, quantity, unit, unit_price, amount)
    SELECT id, l, 'usage', 'gpu', 5, 'GPU-hour', 1, 5.00 FROM invoices, generate_series(1, 2) l;
ALTER TABLE invoices ENABLE TRIGGER ALL;
ALTER TABLE invoice_lines ENABLE TRIGGER ALL;
VACUUM ANALYZE;
EOF
echo "setup: $drafts drafts in $(echo "$(stamp) - $t0" | bc) s"

# number BIN: the numbering of a fresh copy, as BIN's build does it.
number() {
    local bin=$1
    local run="${db}_run"
    local loop
    psql -q -d postgres -c "CREATE DATABASE $run TEMPLATE $db"
    "$bin" db migrate --db "$base dbname=$run" >/dev/null
    if [ "$(psql -tA -d "$run" -c "SELECT to_regprocedure(
            'billing.finalize_invoices(date, bigint, integer, text)') IS NOT NULL")" = t ]; then
        loop="LOOP SELECT * INTO r FROM billing.finalize_invoices('2026-11-01', 0, 1000, a);
              COMMIT; EXIT WHEN r.picked = 0 AND a = ''; a := coalesce(r.last_account, '');
              END LOOP;"
    else
        loop="LOOP SELECT * INTO r FROM billing.finalize_invoices('2026-11-01', 0, 500);
              COMMIT; EXIT WHEN r.picked = 0; END LOOP;"
    fi
    psql -q -d "$run" -c "CHECKPOINT" 2>/dev/null || true # a clean start (superuser only)
    local lsn
    lsn=$(psql -tA -d "$run" -c "SELECT pg_current_wal_lsn()")
    local t
    t=$(stamp)
    psql -q -d "$run" -c "DO \$\$ DECLARE r record; a text := ''; BEGIN $loop END \$\$"
    echo "$bin: $(echo "$(stamp) - $t" | bc) s, WAL $(psql -tA -d "$run" -c "SELECT
        pg_size_pretty(pg_current_wal_lsn() - '$lsn'::pg_lsn)"); $(psql -tA -d "$run" -c "SELECT
        count(*) || ' numbered in ' || count(DISTINCT finalized_at) || ' batches, digest '
        || md5(string_agg(account_id || ':' || series || ':' || number, ',' ORDER BY account_id))
        FROM billing.invoices WHERE status = 'finalized'")"
    psql -q -d postgres -c "DROP DATABASE $run WITH (FORCE)"
}

for _ in $(seq "$rounds"); do
    [ -z "${BASELINE:-}" ] || number "$BASELINE"
    number "$billing"
done
