#!/bin/bash
# insert-cost.sh [ROWS] [ROUNDS] - what each index and trigger on billingd's
# write path costs the server, one at a time (issue 28; doc/performance.md,
# "billingd, end to end", branch h58). Run after bench/billingd.sh, on the
# database it leaves (bench_billingd): ROWS (default 20 000) of its stored
# events, their ids changed, are inserted again into event_ids and then
# usage_events in the order billingd sends them (by the md5 of the id),
# inside a transaction that is rolled back, as they are and with one of
# these removed inside the transaction: the dedupe's primary key
# (event_ids_pkey), the index by account (usage_events_account), the close
# tallies' insert trigger, both of the last two. Prints, per variant and
# round, the backend's CPU (utime + stime from /proc, 10 ms ticks) of each
# INSERT; the variants alternate within each of ROUNDS (default 5) rounds.
#
# Needs the server on this machine (its backend's /proc) and a superuser
# role (the index drops): the services of scripts/services.sh
# (. var/services.env).
set -eu
rows=${1:-20000}
rounds=${2:-5}
: "${BILLING_PG_CONNINFO:?load var/services.env}"
db="$BILLING_PG_CONNINFO dbname=bench_billingd"

# The SQL of one variant: $1 its name, $2 what it removes first.
variant_sql() {
    cat <<SQL
BEGIN;
$2
CREATE TEMP TABLE src ON COMMIT DROP AS
    SELECT * FROM billing.usage_events ORDER BY md5(event_id) LIMIT $rows;
CREATE TEMP TABLE srcid ON COMMIT DROP AS
    SELECT e.* FROM billing.event_ids e JOIN src USING (event_id);
SELECT pg_backend_pid() AS pid \gset
\setenv BPID :pid
\! awk '{printf "%s %d ", "$1", \$14 + \$15}' /proc/\$BPID/stat
INSERT INTO billing.event_ids (event_id, start_time, fingerprint)
    SELECT event_id || 'x', start_time, fingerprint FROM srcid
    ORDER BY decode(md5(event_id || 'x'), 'hex');
\! awk '{printf "%d ", \$14 + \$15}' /proc/\$BPID/stat
INSERT INTO billing.usage_events (event_id, account_id, resource_id, meter, start_time,
        start_nanos, end_time, end_nanos, quantity, model, region, source)
    SELECT event_id || 'x', account_id, resource_id, meter, start_time, start_nanos,
        end_time, end_nanos, quantity, model, region, source FROM src
    ORDER BY decode(md5(event_id || 'x'), 'hex');
\! awk '{printf "%d\n", \$14 + \$15}' /proc/\$BPID/stat
ROLLBACK;
SQL
}

run() {
    variant_sql "$1" "$2" | psql "$db" -q -At -v ON_ERROR_STOP=1 |
        awk -v rows="$rows" '{ printf "%-16s event_ids %4d ms (%.1f us/row)  usage_events %4d ms (%.1f us/row)\n",
            $1, ($3 - $2) * 10, ($3 - $2) * 10000 / rows, ($4 - $3) * 10, ($4 - $3) * 10000 / rows }'
}

for r in $(seq "$rounds"); do
    echo "round $r"
    run as_is ""
    run no_ids_pkey "ALTER TABLE billing.event_ids DROP CONSTRAINT event_ids_pkey;"
    run no_acct_index "DROP INDEX billing.usage_events_account;"
    run no_tally "ALTER TABLE billing.usage_events DISABLE TRIGGER usage_events_close_tally_insert;"
    run no_index_tally "DROP INDEX billing.usage_events_account;
        ALTER TABLE billing.usage_events DISABLE TRIGGER usage_events_close_tally_insert;"
done
