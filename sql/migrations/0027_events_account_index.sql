-- 0027_events_account_index.sql - usage_events indexed by account alone
-- (issue 28: billingd's server work per event; doc/performance.md,
-- "billingd, end to end", branch h55).
--
-- 0005 indexed usage_events by (account_id, start_time). Every event
-- billingd stores inserts one entry into it, row by row (the tallies'
-- transition table keeps COPY off the multi-insert path), at a random
-- place: keys of two columns are unique, so the index has one entry per
-- event, about a third of the heap's size, and each insert descends it
-- comparing text and then time. In the bench database after 300 000
-- events, 20 000 events inserted in arrival order (rolled back) took 250
-- to 320 ms with it and 95 to 210 ms with an index on account_id alone.
-- That index keeps one key per account and the heap positions of its
-- events in posting lists (B-tree deduplication): a fraction of the size,
-- and a new event lands at its account's posting list.
--
-- What the readers lose is the bound on start_time inside the index. None
-- of them has a lower bound on start_time (the close, the alert windows
-- and the running events read from an account's first event up to an
-- instant, keeping those that end after another one; the usage ends and
-- the events since an instant bound end_time, which no index held): they
-- already read every event of the account up to their upper bound, and
-- now also the account's events after it in the months the partition
-- bound does not prune (the month of the bound). Plans and times of each
-- reader before and after are in doc/performance.md.
--
-- The index is built on every partition in this transaction: on a large
-- store the migration takes the time of one index build per month kept.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

DROP INDEX billing.usage_events_account_start;
CREATE INDEX usage_events_account ON billing.usage_events (account_id);
