-- 0004_guards.sql - guards that 0001-0003 left open (issue 9, items 10-16):
-- the ledger guard usable by the runtime role, a time-zone check that does
-- not scan pg_timezone_names per row (a foreign key) and refuses
-- host-dependent names,
-- TRUNCATE and DELETE refused on every event partition, ledger and
-- invoice invariants that bind every role, bounded partition creation;
-- subscriptions cancelled at or before their start and refund lines in
-- seconds, as libbilling rates them (issue 9 items 5 and 9, issue 16).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- ---------------------------------------------------------------------
-- Time zones (items 11 and 16).
-- ---------------------------------------------------------------------

-- billing.host_dependent_zone: names that mean something else on every
-- host, or nothing on most: 'localtime' (the host's own setting),
-- 'posixrules' (the default rules of POSIX strings), 'Factory' (no
-- offset, a placeholder), and Debian's 'posix/' and 'right/' copies (the
-- latter counts leap seconds). libbilling's loader refuses the same
-- (formats/zones.c, bc_zone_name_valid).
CREATE FUNCTION billing.host_dependent_zone(p_zone text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_zone IN ('localtime', 'posixrules', 'Factory') OR p_zone ~ '^(posix|right)(/|$)';

-- The zone names accounts may use: the server's IANA names without the
-- host-dependent ones. accounts_time_zone_known becomes a foreign key to
-- it instead of 0001's CHECK, which scanned pg_timezone_names (about 1,200
-- rows read from disk) for every row, even a row that ON CONFLICT DO
-- NOTHING then skipped: `billing load` of 1,000 accounts took 46 s. A
-- foreign key is an index lookup, made only when the zone is new or
-- changed. billing.refresh_time_zone_names adds names the server learned
-- since (a tzdata update); `billing db migrate` calls it at every run.
CREATE TABLE billing.time_zone_names (
    name text PRIMARY KEY
);
COMMENT ON TABLE billing.time_zone_names IS
    'IANA zone names accounts may use: the server''s, without host-dependent ones '
    '(billing.refresh_time_zone_names).';
GRANT SELECT ON billing.time_zone_names TO billing_app;

-- billing.refresh_time_zone_names: add the server's zone names that are
-- missing; returns how many. Names the server no longer knows stay (an
-- account may use them). SECURITY DEFINER: the migrating login need not
-- inherit the owner's rights.
CREATE FUNCTION billing.refresh_time_zone_names() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_added integer;
BEGIN
    INSERT INTO billing.time_zone_names (name)
        SELECT name FROM pg_catalog.pg_timezone_names WHERE NOT billing.host_dependent_zone(name)
        ON CONFLICT (name) DO NOTHING;
    GET DIAGNOSTICS v_added = ROW_COUNT;
    RETURN v_added;
END
$$;
REVOKE ALL ON FUNCTION billing.refresh_time_zone_names() FROM PUBLIC;
SELECT billing.refresh_time_zone_names();

-- Same signature as in 0001; what the foreign key below enforces.
CREATE OR REPLACE FUNCTION billing.valid_time_zone(p_zone text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT EXISTS (SELECT 1 FROM billing.time_zone_names WHERE name = p_zone);
END;

-- Accounts stored before this migration with a zone it now refuses must be
-- corrected first: say which, rather than fail on the foreign key.
DO $check$
DECLARE
    v_bad text;
BEGIN
    SELECT string_agg(format('%s (%s)', id, time_zone), ', ' ORDER BY id) INTO v_bad
        FROM (SELECT id, time_zone FROM billing.accounts
              WHERE time_zone NOT IN (SELECT name FROM billing.time_zone_names) LIMIT 20) a;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'accounts with a host-dependent or unknown time zone: %; give them an '
                        'IANA zone name, then migrate again', v_bad
            USING ERRCODE = 'check_violation';
    END IF;
END
$check$;
ALTER TABLE billing.accounts DROP CONSTRAINT accounts_time_zone_known;
ALTER TABLE billing.accounts ADD CONSTRAINT accounts_time_zone_known
    FOREIGN KEY (time_zone) REFERENCES billing.time_zone_names (name);

-- ---------------------------------------------------------------------
-- Credit ledger (items 10 and 13).
-- ---------------------------------------------------------------------

-- billing.credit_ledger_balance_guard, replacing 0001's. SECURITY DEFINER:
-- locking the grant row (FOR NO KEY UPDATE) needs UPDATE on credit_grants,
-- which the runtime role must not have. Besides 0001's rules:
--  * an apply or reverse names an invoice of the grant's own account and
--    currency (credit_ledger_invoice_account);
--  * reverses never return more than was applied (credit_ledger_reverse_applied),
--    so a balance never exceeds what was granted.
CREATE OR REPLACE FUNCTION billing.credit_ledger_balance_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_grant billing.credit_grants%ROWTYPE;
    v_balance numeric;
    v_expected numeric;
    v_applied numeric;
    v_reversed numeric;
BEGIN
    SELECT * INTO v_grant FROM billing.credit_grants WHERE id = NEW.grant_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NEW; -- the foreign key reports it
    END IF;
    SELECT sum(amount_minor),
           coalesce(-sum(amount_minor) FILTER (WHERE entry = 'apply'), 0),
           coalesce(sum(amount_minor) FILTER (WHERE entry = 'reverse'), 0)
        INTO v_balance, v_applied, v_reversed
        FROM billing.credit_ledger WHERE grant_id = NEW.grant_id;
    IF NEW.entry = 'grant' THEN
        -- numeric ^ numeric: with integer operands `^` would be float8.
        v_expected := v_grant.amount * 10::numeric ^ billing.currency_digits(v_grant.currency);
        IF NEW.amount_minor <> v_expected THEN
            PERFORM billing.violation('credit_ledger_grant_amount', TG_TABLE_NAME,
                format('grant %s: ledger grant entry %s differs from the granted %s minor units',
                       NEW.grant_id, NEW.amount_minor, v_expected), '23514');
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.invoice_id IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM billing.invoices i WHERE i.id = NEW.invoice_id
           AND i.account_id = v_grant.account_id AND i.currency = v_grant.currency) THEN
        PERFORM billing.violation('credit_ledger_invoice_account', TG_TABLE_NAME,
            format('grant %s of account %s: invoice %s is not an invoice of that account in %s',
                   NEW.grant_id, v_grant.account_id, NEW.invoice_id, v_grant.currency), '23514');
    END IF;
    IF NEW.entry = 'reverse' AND v_reversed + NEW.amount_minor > v_applied THEN
        PERFORM billing.violation('credit_ledger_reverse_applied', TG_TABLE_NAME,
            format('grant %s: reverse of %s minor units, but only %s applied and not yet reversed',
                   NEW.grant_id, NEW.amount_minor, v_applied - v_reversed), '23514');
    END IF;
    IF v_balance IS NULL OR v_balance + NEW.amount_minor < 0 THEN
        PERFORM billing.violation('credit_ledger_nonnegative_balance', TG_TABLE_NAME,
            format('grant %s: %s of %s minor units would leave balance %s', NEW.grant_id,
                   NEW.entry, NEW.amount_minor, coalesce(v_balance, 0) + NEW.amount_minor),
            '23514');
    END IF;
    RETURN NEW;
END
$$;

-- Credit applied on an invoice comes from a grant of that invoice's account.
CREATE FUNCTION billing.invoice_credits_account_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM billing.invoices i JOIN billing.credit_grants g
                       ON g.account_id = i.account_id AND g.currency = i.currency
                   WHERE i.id = NEW.invoice_id AND g.id = NEW.grant_id) THEN
        IF EXISTS (SELECT 1 FROM billing.invoices WHERE id = NEW.invoice_id)
           AND EXISTS (SELECT 1 FROM billing.credit_grants WHERE id = NEW.grant_id) THEN
            PERFORM billing.violation('invoice_credits_grant_account', TG_TABLE_NAME,
                format('grant %s is not a grant of the account and currency of invoice %s',
                       NEW.grant_id, NEW.invoice_id), '23514');
        END IF;
        -- otherwise a foreign key reports the missing row
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER invoice_credits_grant_account BEFORE INSERT OR UPDATE ON billing.invoice_credits
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_credits_account_guard();

-- ---------------------------------------------------------------------
-- Invoices and numbers (item 13).
-- ---------------------------------------------------------------------

-- billing.invoices_guard, replacing 0001's: the lines check of
-- finalize_invoice is made here too, so that no UPDATE can finalize a
-- draft whose totals differ from its lines and applied credits.
CREATE OR REPLACE FUNCTION billing.invoices_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_next bigint;
    v_lines numeric;
    v_credits numeric;
BEGIN
    IF OLD.status <> 'draft' THEN
        PERFORM billing.violation('invoices_finalized_immutable', TG_TABLE_NAME,
            format('invoice %s is %s: %s refused', OLD.id, OLD.status, TG_OP));
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF NEW.id <> OLD.id OR NEW.account_id <> OLD.account_id OR NEW.kind <> OLD.kind THEN
        PERFORM billing.violation('invoices_identity', TG_TABLE_NAME,
            format('invoice %s: id, account and kind never change', OLD.id));
    END IF;
    IF NEW.status = 'finalized' THEN
        SELECT next_number INTO v_next FROM billing.invoice_series WHERE series = NEW.series;
        IF NEW.number IS DISTINCT FROM v_next - 1 THEN
            PERFORM billing.violation('invoices_number_from_series', TG_TABLE_NAME,
                format('invoice %s: number %s was not just assigned by series %s',
                       OLD.id, NEW.number, NEW.series));
        END IF;
        SELECT coalesce(sum(amount), 0) INTO v_lines
            FROM billing.invoice_lines WHERE invoice_id = NEW.id;
        SELECT coalesce(sum(amount), 0) INTO v_credits
            FROM billing.invoice_credits WHERE invoice_id = NEW.id;
        IF v_lines <> NEW.subtotal OR v_credits <> NEW.credits THEN
            PERFORM billing.violation('invoices_lines_reconcile', TG_TABLE_NAME,
                format('invoice %s: subtotal %s and credits %s do not match lines %s and credits %s',
                       NEW.id, NEW.subtotal, NEW.credits, v_lines, v_credits), '23514');
        END IF;
    END IF;
    RETURN NEW;
END
$$;

-- A number taken from a series must be on a finalized invoice when the
-- transaction commits: a series bumped by hand (or by anything but a
-- finalization) would leave a gap. Deferred, because finalize_invoice
-- takes the number before it stores it on the invoice.
CREATE FUNCTION billing.invoice_series_used_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.next_number > OLD.next_number AND NOT EXISTS (
           SELECT 1 FROM billing.invoices
           WHERE series = NEW.series AND number = NEW.next_number - 1 AND status = 'finalized') THEN
        PERFORM billing.violation('invoice_series_number_used', TG_TABLE_NAME,
            format('invoice series %s: number %s was taken but no invoice was finalized with it',
                   NEW.series, NEW.next_number - 1));
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER invoice_series_number_used AFTER UPDATE ON billing.invoice_series
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_series_used_guard();

-- ---------------------------------------------------------------------
-- Raw events (items 12 and 15).
-- ---------------------------------------------------------------------

-- Row DELETE of raw events is refused to everyone; the one exception is
-- ensure_event_partitions moving rows out of the DEFAULT partition, which
-- it announces with billing.partition_move while running as the owner (no
-- other role can be billing_owner without being a migrator).
CREATE FUNCTION billing.usage_events_delete_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'usage_events_default' AND current_user = 'billing_owner'
       AND current_setting('billing.partition_move', true) = 'on' THEN
        RETURN OLD;
    END IF;
    PERFORM billing.violation('usage_events_append_only', TG_TABLE_NAME,
        format('billing.%s is append-only: DELETE refused', TG_TABLE_NAME));
    RETURN NULL;
END
$$;
-- A row trigger on the partitioned table is cloned to every partition,
-- present and future.
CREATE TRIGGER usage_events_append_only BEFORE DELETE ON billing.usage_events
    FOR EACH ROW EXECUTE FUNCTION billing.usage_events_delete_guard();

-- Statement triggers are not cloned: TRUNCATE of one partition skipped the
-- parent's usage_events_no_truncate. billing.guard_event_partition puts
-- it on partition @p_name (idempotent).
CREATE FUNCTION billing.guard_event_partition(p_name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgrelid = format('billing.%I', p_name)::regclass
                   AND tgname = 'usage_events_no_truncate') THEN
        EXECUTE format('CREATE TRIGGER usage_events_no_truncate BEFORE TRUNCATE ON billing.%I '
                       'FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate()', p_name);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION billing.guard_event_partition(text) FROM PUBLIC;
SELECT billing.guard_event_partition(c.relname)
    FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'billing.usage_events'::regclass;

-- billing.ensure_event_partitions, replacing 0002's. Also:
--  * bounded: months from 120 before the current UTC month to 12 after it,
--    at most 12 of them per call, so that a caller cannot create
--    thousands of tables (the DEFAULT partition keeps every other event);
--  * each new partition gets the TRUNCATE guard;
--  * the move out of DEFAULT is the one DELETE the row guard lets through.
CREATE OR REPLACE FUNCTION billing.ensure_event_partitions(p_from date, p_to date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_month date := date_trunc('month', p_from)::date;
    v_last date := date_trunc('month', p_to)::date;
    v_now date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
    v_name text;
    v_lo timestamptz;
    v_hi timestamptz;
    v_moved bigint;
    v_created integer := 0;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR v_last < v_month
       OR v_last > (v_month + interval '11 months')::date
       OR v_month < (v_now - interval '120 months')::date
       OR v_last > (v_now + interval '12 months')::date THEN
        RAISE EXCEPTION 'ensure_event_partitions(%, %): need from <= to, at most 12 months, '
                        'between % and % (120 months before this month to 12 after)',
                        p_from, p_to, (v_now - interval '120 months')::date,
                        (v_now + interval '12 months')::date
            USING ERRCODE = 'invalid_parameter_value';
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
                PERFORM set_config('billing.partition_move', 'on', true);
                EXECUTE format('WITH moved AS (DELETE FROM billing.usage_events_default '
                               'WHERE start_time >= $1 AND start_time < $2 RETURNING *) '
                               'INSERT INTO billing.%I SELECT * FROM moved', v_name)
                    USING v_lo, v_hi;
                GET DIAGNOSTICS v_moved = ROW_COUNT;
                PERFORM set_config('billing.partition_move', 'off', true);
                EXECUTE format('ALTER TABLE billing.usage_events ATTACH PARTITION billing.%I '
                               'FOR VALUES FROM (%L) TO (%L)', v_name, v_lo, v_hi);
                RAISE NOTICE 'moved % events of % from the default partition', v_moved, v_name;
            END IF;
            PERFORM billing.guard_event_partition(v_name);
            v_created := v_created + 1;
        END IF;
        v_month := (v_month + interval '1 month')::date;
    END LOOP;
    RETURN v_created;
END
$$;

-- ---------------------------------------------------------------------
-- Subscriptions and invoice lines as libbilling now rates them.
-- ---------------------------------------------------------------------

-- A cancellation at or before a subscription's start means "no term at
-- all" (doc/pricing.md, "Cancellation"): a customer may cancel what was
-- bought for later. 0001 refused it; libbilling decides what it means.
ALTER TABLE billing.subscriptions DROP CONSTRAINT subscriptions_cancel_after_start;

-- Refund lines are the unused span of a term, in seconds (libbilling's
-- billing_invoice_line_unit "second"); fee lines keep "term".
ALTER TABLE billing.invoice_lines DROP CONSTRAINT invoice_lines_unit_known;
ALTER TABLE billing.invoice_lines ADD CONSTRAINT invoice_lines_unit_known
    CHECK (unit IN ('GPU-hour', 'instance-hour', 'GB-month', 'GB', 'term', 'second'));

-- ---------------------------------------------------------------------
-- Currencies: the table follows libbilling/currency.c.
-- ---------------------------------------------------------------------

-- XAD (Arab Accounting Dinar, 2 minor digits) joined ISO 4217 List One in
-- 2025 and libbilling accepts it. ANG, BGN, CUC and SLL, since withdrawn,
-- stay: existing accounts' historical invoices are in them
-- (doc/pricing.md, "Currencies").
INSERT INTO billing.currencies (code, digits) VALUES ('XAD', 2);
