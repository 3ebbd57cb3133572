#!/bin/bash
# pg-sizing.sh [CONNINFO] - PostgreSQL sizing figures of a database that
# billingd has filled (scripts/demo.sh's billing_demo by default), for
# doc/scaling.md; re-run it after a schema change.
#
# Prints, from pg_total_relation_size (tables with their indexes and
# TOAST; partitions summed): bytes per stored event (usage_events plus
# event_ids), per aggregate (usage_aggregates) and per rejected record;
# the ingest rate (rows/s) from the events' received_at, first to last;
# and a month for 1 M accounts extrapolated from the events per account
# here. Run VACUUM ANALYZE first for stable sizes (done here).
set -eu
here=$(dirname "$0")
. "$here/lib.sh"
if [ $# -ge 1 ]; then
    conninfo=$1
else
    [ -f "$BILLING_ENV_FILE" ] || billing_die "no $BILLING_ENV_FILE: give a CONNINFO"
    # shellcheck disable=SC1090
    . "$BILLING_ENV_FILE"
    conninfo="$BILLING_PG_CONNINFO dbname=billing_demo"
fi
q() { psql "$conninfo" -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }

q "VACUUM ANALYZE" >/dev/null
# Size of a table with its partitions (inheritance tree), indexes and TOAST.
size_sql="(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
           WHERE c.oid IN (SELECT relid FROM pg_partition_tree(('billing.' || %s)::regclass)
                           UNION SELECT ('billing.' || %s)::regclass))"
tsize() { q "SELECT $(printf "$size_sql" "'$1'" "'$1'")"; }

events=$(q "SELECT count(*) FROM billing.usage_events")
aggs=$(q "SELECT count(*) FROM billing.usage_aggregates")
rejected=$(q "SELECT count(*) FROM billing.rejected_events")
accounts=$(q "SELECT count(DISTINCT account_id) FROM billing.usage_events")
[ "$events" -gt 0 ] || billing_die "no events in this database"
ev_bytes=$(tsize usage_events)
id_bytes=$(tsize event_ids)
agg_bytes=$(tsize usage_aggregates)
rej_bytes=$(tsize rejected_events)
secs=$(q "SELECT extract(epoch FROM max(received_at) - min(received_at)) FROM billing.usage_events")

echo "events=$events accounts=$accounts aggregates=$aggs rejected=$rejected"
echo "usage_events_bytes=$ev_bytes event_ids_bytes=$id_bytes usage_aggregates_bytes=$agg_bytes rejected_events_bytes=$rej_bytes"
q "SELECT 'bytes_per_event=' || round(($ev_bytes + $id_bytes)::numeric / $events)
          || ' (usage_events ' || round($ev_bytes::numeric / $events)
          || ' + event_ids ' || round($id_bytes::numeric / $events) || ')'
          || ' bytes_per_aggregate=' || round($agg_bytes::numeric / greatest($aggs, 1))
          || ' bytes_per_rejected=' || CASE WHEN $rejected > 0
             THEN round($rej_bytes::numeric / $rejected)::text ELSE 'n/a' END"
q "SELECT 'ingest_rows_per_s=' || CASE WHEN $secs > 0 THEN round($events / $secs::numeric)::text
          ELSE 'n/a' END || ' (received_at, first to last, ' || round($secs::numeric, 1) || ' s)'"
q "SELECT 'per_1M_accounts_month: events=' || round($events * 1000000.0 / $accounts)
          || ' events_GiB=' || round(($ev_bytes + $id_bytes) * 1000000.0 / $accounts / 1073741824, 1)
          || ' aggregates=' || round($aggs * 1000000.0 / $accounts)
          || ' aggregates_MiB=' || round($agg_bytes * 1000000.0 / $accounts / 1048576, 1)"
