-- 0002_rejected_events_partitions.sql - the dead-letter table for events
-- that could not be accepted, and monthly partitions of usage_events.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- ---------------------------------------------------------------------
-- Rejected events: every payload that was not accepted, with why and its
-- original bytes, so that nothing consumed is ever silently lost. Append
-- only for the runtime role (no UPDATE or DELETE privilege); the owner
-- may purge old rows.
-- ---------------------------------------------------------------------
CREATE TABLE billing.rejected_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now(),
    -- "kafka:<topic>/<partition>@<offset>" or "file:<name>:<line>".
    source text NOT NULL CONSTRAINT rejected_events_source_length
        CHECK (octet_length(source) BETWEEN 1 AND 512),
    kafka_topic text CHECK (octet_length(kafka_topic) <= 249),
    kafka_partition integer CHECK (kafka_partition >= 0),
    kafka_offset bigint CHECK (kafka_offset >= 0),
    -- NULL when the payload could not be decoded far enough to find it.
    event_id text CONSTRAINT rejected_events_event_id_length CHECK (octet_length(event_id) <= 1024),
    -- Machine-readable: invalid, parse, conflict, unknown_account,
    -- no_price, range, too_large, finalized...
    reason_code text NOT NULL CONSTRAINT rejected_events_reason_code_format
        CHECK (reason_code ~ '^[a-z_]{1,32}$'),
    reason text NOT NULL CONSTRAINT rejected_events_reason_length
        CHECK (octet_length(reason) BETWEEN 1 AND 2048),
    payload bytea NOT NULL CONSTRAINT rejected_events_payload_size
        CHECK (octet_length(payload) <= 1048576),
    CONSTRAINT rejected_events_kafka_position
        CHECK ((kafka_topic IS NULL) = (kafka_partition IS NULL)
               AND (kafka_topic IS NULL) = (kafka_offset IS NULL))
);
CREATE INDEX rejected_events_received ON billing.rejected_events (received_at);
CREATE INDEX rejected_events_event_id ON billing.rejected_events (event_id) WHERE event_id IS NOT NULL;
CREATE TRIGGER rejected_events_immutable BEFORE UPDATE ON billing.rejected_events
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();

-- ---------------------------------------------------------------------
-- Monthly partitions of usage_events.
-- ---------------------------------------------------------------------

-- billing.event_partition_name: 'usage_events_YYYY_MM' of the month
-- containing @p_month.
CREATE FUNCTION billing.event_partition_name(p_month date) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 'usage_events_' || to_char(p_month, 'YYYY_MM');

-- billing.ensure_event_partitions: create the partitions of every UTC
-- month from @p_from to @p_to (inclusive, at most 120 months) that do not
-- exist yet. Rows that had landed in the DEFAULT partition for such a
-- month are moved into the new one in the same transaction, so the
-- partition can be attached and no event is lost. Returns how many
-- partitions were created. Safe to call concurrently (an advisory lock
-- serialises callers) and repeatedly; billingd calls it at start and
-- daily, `billing db migrate` for the months around now.
--
-- SECURITY DEFINER so that the runtime role can call it without DDL
-- rights; everything it creates is owned by billing_owner.
CREATE FUNCTION billing.ensure_event_partitions(p_from date, p_to date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_month date := date_trunc('month', p_from)::date;
    v_last date := date_trunc('month', p_to)::date;
    v_name text;
    v_lo timestamptz;
    v_hi timestamptz;
    v_moved bigint;
    v_created integer := 0;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR v_last < v_month
       OR v_last > (v_month + interval '119 months')::date THEN
        RAISE EXCEPTION 'ensure_event_partitions(%, %): need from <= to, at most 120 months',
                        p_from, p_to USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Key: 'bill' 'part' in ASCII; distinct from the migration lock.
    PERFORM pg_advisory_xact_lock(7091318301269258868);
    WHILE v_month <= v_last LOOP
        v_name := billing.event_partition_name(v_month);
        IF to_regclass(format('billing.%I', v_name)) IS NULL THEN
            v_lo := v_month::timestamp AT TIME ZONE 'UTC';
            v_hi := (v_month + interval '1 month')::timestamp AT TIME ZONE 'UTC';
            -- Keep writers out of the default partition while we look at it.
            LOCK TABLE billing.usage_events_default IN SHARE ROW EXCLUSIVE MODE;
            PERFORM 1 FROM billing.usage_events_default
                WHERE start_time >= v_lo AND start_time < v_hi LIMIT 1;
            IF NOT FOUND THEN
                EXECUTE format('CREATE TABLE billing.%I PARTITION OF billing.usage_events '
                               'FOR VALUES FROM (%L) TO (%L)', v_name, v_lo, v_hi);
            ELSE
                EXECUTE format('CREATE TABLE billing.%I (LIKE billing.usage_events '
                               'INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', v_name);
                EXECUTE format('WITH moved AS (DELETE FROM billing.usage_events_default '
                               'WHERE start_time >= $1 AND start_time < $2 RETURNING *) '
                               'INSERT INTO billing.%I SELECT * FROM moved', v_name)
                    USING v_lo, v_hi;
                GET DIAGNOSTICS v_moved = ROW_COUNT;
                EXECUTE format('ALTER TABLE billing.usage_events ATTACH PARTITION billing.%I '
                               'FOR VALUES FROM (%L) TO (%L)', v_name, v_lo, v_hi);
                RAISE NOTICE 'moved % events of % from the default partition', v_moved, v_name;
            END IF;
            v_created := v_created + 1;
        END IF;
        v_month := (v_month + interval '1 month')::date;
    END LOOP;
    RETURN v_created;
END
$$;
REVOKE ALL ON FUNCTION billing.ensure_event_partitions(date, date) FROM PUBLIC;

-- The months around the time of migration; later months come from
-- billingd and the batch tool calling the function.
SELECT billing.ensure_event_partitions((now() - interval '1 month')::date,
                                       (now() + interval '3 months')::date);
