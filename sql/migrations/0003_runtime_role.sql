-- 0003_runtime_role.sql - what the runtime role billing_app may do.
--
-- billingd and the batch tool connect as a login role that is a member of
-- billing_app (GRANT billing_app TO <login>; doc/database.md). It gets
-- exactly what they need: read everything; append events, dead letters
-- and ledger entries; load the catalog; upsert aggregates and Kafka
-- positions; build draft invoices; finalize them only through
-- billing.finalize_invoice. It cannot delete events or ledger entries,
-- change price history, touch invoice numbers, or change a finalized
-- invoice (privileges here, and the triggers of 0001 for whoever owns the
-- tables).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

GRANT USAGE ON SCHEMA billing TO billing_app;
GRANT SELECT ON ALL TABLES IN SCHEMA billing TO billing_app;

-- Append-only for the runtime role.
GRANT INSERT ON billing.event_ids, billing.usage_events, billing.rejected_events,
                billing.credit_ledger
    TO billing_app;

-- The catalog, as `billing load` writes it: new rows, plus the few
-- columns that may legitimately change.
GRANT INSERT ON billing.accounts, billing.price_books, billing.price_versions, billing.rates,
                billing.plans, billing.plan_fees, billing.subscriptions, billing.credit_grants
    TO billing_app;
GRANT UPDATE (currency, time_zone, tax_rate, status, updated_at) ON billing.accounts TO billing_app;
GRANT UPDATE (cancelled_at, updated_at) ON billing.subscriptions TO billing_app;

-- Rating state: upserted in the consumer's transaction.
GRANT INSERT, UPDATE ON billing.usage_aggregates, billing.kafka_offsets TO billing_app;

-- Drafts. No UPDATE of number or finalized_at: only finalize_invoice
-- (running as the owner) sets them. DELETE is for discarding drafts; the
-- triggers refuse it on finalized invoices.
GRANT INSERT, DELETE ON billing.invoices TO billing_app;
GRANT UPDATE (status, series, month, period_start, period_end, currency, subtotal, credits,
              tax_rate, tax, total, updated_at)
    ON billing.invoices TO billing_app;
GRANT INSERT, UPDATE, DELETE ON billing.invoice_lines, billing.invoice_credits TO billing_app;

GRANT USAGE ON ALL SEQUENCES IN SCHEMA billing TO billing_app;

-- SECURITY DEFINER functions: nobody but the runtime role (and the owner).
REVOKE ALL ON FUNCTION billing.finalize_invoice(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION billing.finalize_invoice(bigint) TO billing_app;
GRANT EXECUTE ON FUNCTION billing.ensure_event_partitions(date, date) TO billing_app;
