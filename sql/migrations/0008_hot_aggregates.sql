-- 0008_hot_aggregates.sql - room for HOT updates of the aggregates, and
-- the write instant of raw events as a default (doc/performance.md
-- "billingd, end to end"; doc/database.md "Raw events").
--
-- usage_aggregates is updated far more than it is inserted into: every
-- batch adds to the aggregates of its accounts' month (one upsert per
-- batch, store/ingest.c), so each row is rewritten once per batch that
-- touches it. None of the columns an update changes (quantity,
-- quantity_den, event_count, updated_at) is indexed, so PostgreSQL can
-- write the new version on the same page without touching the two
-- indexes (a HOT update) - if the page has room. At the default
-- fillfactor (100) the pages are full and nearly every update moves the
-- row to another page and inserts into both indexes. Fillfactor 50 keeps
-- half of each page free for the new versions, which the next update's
-- page pruning reclaims. It applies to pages written from now on; the
-- table is not rewritten (a VACUUM FULL or CLUSTER would apply it to the
-- rows already stored).
--
-- received_at: billingd now COPYs new events straight into usage_events
-- (store/events.c, the optimistic claim), which leaves received_at to its
-- default. The default becomes clock_timestamp(), the moment the row is
-- written, which is what the staging path writes explicitly: the time an
-- event waited before it was stored, not the start of its transaction.
-- SET DEFAULT on the partitioned table applies to its partitions.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

ALTER TABLE billing.usage_aggregates SET (fillfactor = 50);
ALTER TABLE billing.usage_events ALTER COLUMN received_at SET DEFAULT clock_timestamp();
