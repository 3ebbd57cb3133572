#!/bin/bash
# close-bench.sh - month-end close at scale (doc/performance.md, "Month-end
# close"): ACCOUNTS accounts with EVENTS_PER_ACCOUNT raw events each in
# November 2026, stored in a fresh database, then timed:
#   billing close --period 2026-11 -j JOBS   (first run: every draft new)
#   the same again                            (nothing changes)
#   billing close --finalize --grace 0
#   billing invoice export --period 2026-11 --format pdf (PDF_COUNT invoices)
# Peak memory is the maximum resident set size from /usr/bin/time.
#
#   BILLING_PG_CONNINFO=... bench/close-bench.sh [ACCOUNTS [EVENTS_PER_ACCOUNT [JOBS]]]
#
# Run from the build directory (uses ./billing/billing). The events are
# generated inside PostgreSQL with generate_series (setup, not measured):
# every account has gpu hours on two models, gpuless hours, daily storage
# samples and traffic, a third of them a credit grant, a tenth a monthly
# plan, in five time zones.
set -eu

accounts=${1:-100000}
per=${2:-100}
jobs=${3:-2}
pdf_count=${PDF_COUNT:-1000}
billing=${BILLING:-./billing/billing}
db=billing_bench_close_$$
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"; psql -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT

base=${BILLING_PG_CONNINFO:?set BILLING_PG_CONNINFO (scripts/pg.sh start && . var/services.env)}
conn="$base dbname=$db"
export PGHOST PGPORT PGUSER
psql -q -d postgres -c "CREATE DATABASE $db"
"$billing" db migrate --db "$conn" >/dev/null
"$billing" load --db "$conn" --pricebook "$src/tests/golden/pricebook.json" --book default >/dev/null

stamp() { date +%s.%N; }
since() { echo "$(stamp) - $1" | bc; }

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
CREATE TEMP TABLE gen AS
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
INSERT INTO event_ids (event_id, start_time, fingerprint)
    SELECT id, start, decode(md5(id), 'hex') FROM gen;
INSERT INTO usage_events (event_id, account_id, resource_id, meter, start_time, end_time,
                          quantity, model, region)
    SELECT id, account, resource, meter, start, start + len, qty, model, 'cn-east-1' FROM gen;
ANALYZE;
EOF
events=$(psql -tA -d "$db" -c "SELECT count(*) FROM billing.usage_events")
echo "setup: $accounts accounts, $events events in $(since "$t0") s"

measure() {
    local label=$1
    shift
    /usr/bin/time -f "%e s, max RSS %M KiB" -o "$work/time" "$@" >"$work/out" 2>"$work/err" ||
        { cat "$work/err"; exit 1; }
    echo "$label: $(cat "$work/time")"
}
measure "close (new drafts, -j $jobs)" "$billing" close --db "$conn" --period 2026-11 -j "$jobs" --quiet
grep -E "^(accounts|drafts|events|total) " "$work/out"
measure "close again (unchanged, -j $jobs)" "$billing" close --db "$conn" --period 2026-11 -j "$jobs" --quiet
grep -E "^drafts " "$work/out"
measure "finalize" "$billing" close --db "$conn" --period 2026-11 -j "$jobs" --quiet --finalize --grace 0
tail -n 1 "$work/out"
mkdir -p "$work/pdf"
measure "export $pdf_count PDF (--period, the first $pdf_count by --limit)" \
    "$billing" invoice export --db "$conn" --period 2026-11 --format pdf --out "$work/pdf" --limit "$pdf_count"
n=$(ls "$work/pdf" | wc -l)
size=$(du -sk "$work/pdf" | cut -f1)
echo "PDF: $n files, $size KiB"
