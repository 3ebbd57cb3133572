-- 0010_history_guards.sql - no TRUNCATE of any table, no DELETE of
-- history, for every role; one documented maintenance path (issue 23,
-- item 13; doc/database.md, "Maintenance").
--
-- 0001 and 0004 refused TRUNCATE on invoices, their lines and credits,
-- the ledger and the raw event tables only. As billing_owner (any
-- migrating login), TRUNCATE passed on rates, rejected_events,
-- schema_version, usage_aggregates and kafka_offsets, and DELETE on
-- rejected_events. On a copy of a closed month, TRUNCATE billing.rates
-- then `billing close` turned 2 880 drafts into 995 drafts at 0.00 and
-- 1 885 voided ones; `billing load` of the same files then said
-- "0 changed" (store/load.c now compares the stored rates too).
--
-- Now:
--  * every table of the schema refuses TRUNCATE (the tables 0001, 0004
--    and 0007 guarded keep their triggers; the others get
--    <table>_no_truncate here);
--  * history refuses DELETE: dead letters (0002 let the owner purge
--    them), applied migrations (and their UPDATE: a row changed or removed
--    makes the schema lie about itself), accounts (raw events name them
--    without a foreign key since 0007), price books (and their UPDATE:
--    currency and rounding never change), aggregates and Kafka positions
--    (billingd only upserts them: a deleted position replays its
--    partition from the start, a deleted aggregate undercounts);
--  * credit returned on an invoice (invoice_returned_credits, 0005)
--    changes only while the invoice is a draft, as its lines and applied
--    credits do (0006's guards; it had none);
--  * the guards added here give way to one thing: a superuser (the
--    current role, not a member of billing_owner) that has set
--    billing.maintenance to on, e.g. SET LOCAL billing.maintenance = on
--    in its transaction, to purge old dead letters or repair a broken
--    schema history. The older guards give way to nothing but DDL.
--
-- Reference tables (currencies, time_zone_names) refuse TRUNCATE but keep
-- row DELETE: a name in use is protected by its foreign keys, and an
-- unused one may go.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- billing.maintenance: whether the guards of this migration let the
-- current statement through: the current role is a superuser and the
-- session (or transaction) set billing.maintenance = on. A role that is
-- not a superuser may set the variable; it changes nothing for it.
CREATE FUNCTION billing.maintenance() RETURNS boolean
LANGUAGE sql STABLE
RETURN coalesce(current_setting('billing.maintenance', true) = 'on'
                AND (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user),
                false);

-- billing.refuse_unless_maintenance: a row (UPDATE, DELETE) or statement
-- (TRUNCATE) trigger raising integrity_constraint_violation named after
-- the trigger, unless billing.maintenance().
CREATE FUNCTION billing.refuse_unless_maintenance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF billing.maintenance() THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW; -- NULL for TRUNCATE, whose statement trigger result is ignored
    END IF;
    PERFORM billing.violation(TG_NAME, TG_TABLE_NAME,
        format('%s of billing.%s refused: it keeps history (a superuser may, after '
               'SET LOCAL billing.maintenance = on; doc/database.md, "Maintenance")',
               TG_OP, TG_TABLE_NAME));
    RETURN NULL;
END
$$;

-- ---------------------------------------------------------------------
-- TRUNCATE, on every table that did not refuse it yet.
-- ---------------------------------------------------------------------
CREATE TRIGGER schema_version_no_truncate BEFORE TRUNCATE ON billing.schema_version
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER currencies_no_truncate BEFORE TRUNCATE ON billing.currencies
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER time_zone_names_no_truncate BEFORE TRUNCATE ON billing.time_zone_names
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER accounts_no_truncate BEFORE TRUNCATE ON billing.accounts
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER price_books_no_truncate BEFORE TRUNCATE ON billing.price_books
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER price_versions_no_truncate BEFORE TRUNCATE ON billing.price_versions
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER rates_no_truncate BEFORE TRUNCATE ON billing.rates
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER plans_no_truncate BEFORE TRUNCATE ON billing.plans
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER plan_fees_no_truncate BEFORE TRUNCATE ON billing.plan_fees
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER subscriptions_no_truncate BEFORE TRUNCATE ON billing.subscriptions
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER credit_grants_no_truncate BEFORE TRUNCATE ON billing.credit_grants
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER invoice_series_no_truncate BEFORE TRUNCATE ON billing.invoice_series
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER invoice_returned_credits_no_truncate BEFORE TRUNCATE
    ON billing.invoice_returned_credits
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER usage_aggregates_no_truncate BEFORE TRUNCATE ON billing.usage_aggregates
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER kafka_offsets_no_truncate BEFORE TRUNCATE ON billing.kafka_offsets
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER rejected_events_no_truncate BEFORE TRUNCATE ON billing.rejected_events
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();

-- ---------------------------------------------------------------------
-- DELETE (and UPDATE where nothing may change) of history.
-- ---------------------------------------------------------------------
CREATE TRIGGER schema_version_append_only BEFORE UPDATE OR DELETE ON billing.schema_version
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER price_books_append_only BEFORE UPDATE OR DELETE ON billing.price_books
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER accounts_no_delete BEFORE DELETE ON billing.accounts
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER rejected_events_no_delete BEFORE DELETE ON billing.rejected_events
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER usage_aggregates_no_delete BEFORE DELETE ON billing.usage_aggregates
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER kafka_offsets_no_delete BEFORE DELETE ON billing.kafka_offsets
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();

-- ---------------------------------------------------------------------
-- Returned credit changes only on drafts, as lines and applied credits
-- (0006: per row for UPDATE, per statement for INSERT and DELETE).
-- ---------------------------------------------------------------------
CREATE TRIGGER invoice_returned_credits_finalized_immutable
    BEFORE UPDATE ON billing.invoice_returned_credits
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_children_guard();
CREATE TRIGGER invoice_returned_credits_finalized_immutable_insert
    AFTER INSERT ON billing.invoice_returned_credits
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_children_statement_guard();
CREATE TRIGGER invoice_returned_credits_finalized_immutable_delete
    AFTER DELETE ON billing.invoice_returned_credits
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_children_statement_guard();
