-- 0007_lean_events.sql - raw event tables that cost what they must
-- (doc/performance.md "Raw event insert", doc/database.md "Raw events").
--
-- Before this migration a stored event cost about 150 us of database time,
-- 80% of it per-row work that the pipeline already did once per batch:
--  * foreign keys from usage_events to accounts and to event_ids: one SPI
--    query per row each. They go. The pipeline statement
--    (store/events.c) checks the batch's accounts with one anti-join and
--    claims every id in event_ids in the same statement that writes
--    usage_events; that statement is the only writer (doc/database.md).
--  * domains with a regular expression per row on usage_events' text
--    columns. The columns become plain text and numeric; the bounds are
--    checked once per batch by the pipeline (store/events.c SQL_CHECK). The
--    plain CHECK constraints of 0001 (meter, nanoseconds, quantity, end
--    after start) stay: they are cheap and keep every writer honest.
--  * the content fingerprint, an SQL function per row: computed in C from
--    the same canonical bytes (billing.event_fingerprint is kept as their
--    definition, and the tests compare the two), COPYed with the row.
--  * two unique indexes on text: event_ids' (event_id) and (event_id,
--    start_time), and usage_events' primary key (event_id, start_time) on
--    every partition. The permanent id check is now keyed by the 16-byte
--    md5 of the id (id_hash, computed by the database so that it cannot
--    disagree with the id); usage_events has no unique index: an id has at
--    most one row because it is claimed in event_ids first.
--
-- Hash collisions: two different ids with one md5 (which can be made on
-- purpose) must both be storable and neither may be taken for a duplicate
-- of the other. event_ids holds the first id of each hash; any later id
-- whose hash is taken by another id is claimed in event_id_collisions,
-- keyed by the full id. An id is stored iff it is in event_ids under its
-- hash or in event_id_collisions.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

ALTER TABLE billing.usage_events DROP CONSTRAINT usage_events_id_registered;
ALTER TABLE billing.usage_events DROP CONSTRAINT usage_events_account_id_fkey;
ALTER TABLE billing.usage_events DROP CONSTRAINT usage_events_pkey;
-- Domain to base type: binary coercible, no table rewrite.
ALTER TABLE billing.usage_events
    ALTER COLUMN event_id TYPE text,
    ALTER COLUMN account_id TYPE text,
    ALTER COLUMN resource_id TYPE text,
    ALTER COLUMN quantity TYPE numeric,
    ALTER COLUMN model TYPE text,
    ALTER COLUMN region TYPE text;

ALTER TABLE billing.event_ids DROP CONSTRAINT event_ids_id_start;
ALTER TABLE billing.event_ids DROP CONSTRAINT event_ids_pkey;
ALTER TABLE billing.event_ids ALTER COLUMN event_id TYPE text;
ALTER TABLE billing.event_ids
    ADD COLUMN id_hash bytea GENERATED ALWAYS AS (decode(md5(event_id), 'hex')) STORED;

-- Ids whose md5 was already taken by another id: keyed by the full id.
CREATE TABLE billing.event_id_collisions (
    event_id text PRIMARY KEY,
    start_time timestamptz NOT NULL,
    fingerprint bytea NOT NULL
        CONSTRAINT event_id_collisions_fingerprint_md5 CHECK (octet_length(fingerprint) = 16),
    first_seen timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER event_id_collisions_append_only BEFORE UPDATE OR DELETE
    ON billing.event_id_collisions FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER event_id_collisions_no_truncate BEFORE TRUNCATE ON billing.event_id_collisions
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();

-- Stored ids that already collide (none, unless someone made them so):
-- the first seen keeps the hash, the others move to the collision table.
INSERT INTO billing.event_id_collisions (event_id, start_time, fingerprint, first_seen)
SELECT event_id, start_time, fingerprint, first_seen
FROM (SELECT e.*, row_number() OVER (PARTITION BY id_hash ORDER BY first_seen, event_id) AS n
      FROM billing.event_ids e) ranked
WHERE n > 1;
ALTER TABLE billing.event_ids DISABLE TRIGGER event_ids_append_only;
DELETE FROM billing.event_ids e USING billing.event_id_collisions c WHERE e.event_id = c.event_id;
ALTER TABLE billing.event_ids ENABLE TRIGGER event_ids_append_only;

ALTER TABLE billing.event_ids ADD CONSTRAINT event_ids_pkey PRIMARY KEY (id_hash);

-- Append-only for the runtime role, like event_ids (0003).
GRANT SELECT, INSERT ON billing.event_id_collisions TO billing_app;
