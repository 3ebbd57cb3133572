-- 0005_close.sql - month-end close: what `billing close`, `billing
-- invoice` and `billing rerate` need beyond 0001-0004 (doc/database.md,
-- "Month-end close"). Every guard of 0004 is kept: the functions and
-- constraints redefined here start from 0004's versions.
--
--  * usage_events gets an index by account, so that a close reads one
--    batch of accounts' events instead of scanning every partition;
--  * invoices get the hash of the content they were computed with (a
--    re-run that computes the same invoice writes nothing), and a void
--    reason and time;
--  * a finalized invoice may be voided: it keeps its number, and a credit
--    note in its own series references it (billing.void_invoice);
--  * a credit ledger 'expire' entry may name the invoice of the month in
--    which the grant expired, so that recomputing that draft can reverse
--    it like an 'apply';
--  * invoice series per year ("INV-2026" numbers as INV-2026-000123) are
--    created on demand by billing.ensure_invoice_series;
--  * invoices hold libbilling's other totals (credit returned to grants by
--    refunds, account credit spent and carried), and lines as libbilling
--    gives them (fee and refund lines without meter, refund lines without
--    a unit price).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- Time zones: 0004's foreign key to billing.time_zone_names already
-- replaces 0001's per-row scan of pg_timezone_names.

-- The name printed on invoices (any UTF-8 text, Chinese names included);
-- the id when none is set.
ALTER TABLE billing.accounts ADD COLUMN name text
    CONSTRAINT accounts_name_length CHECK (octet_length(name) BETWEEN 1 AND 256);
GRANT UPDATE (name) ON billing.accounts TO billing_app;

CREATE INDEX usage_events_account_start ON billing.usage_events (account_id, start_time);

ALTER TABLE billing.invoices
    ADD COLUMN content_hash text
        CONSTRAINT invoices_content_hash_format CHECK (content_hash ~ '^[0-9a-f]{32}$'),
    ADD COLUMN void_reason text
        CONSTRAINT invoices_void_reason_length CHECK (octet_length(void_reason) BETWEEN 1 AND 1024),
    ADD COLUMN voided_at timestamptz,
    -- libbilling's totals besides subtotal and credits (billing.h,
    -- "Totals"): credit given back to grants by refund lines, account
    -- credit spent, the excess below zero carried to the account credit,
    -- and the account credit left after the invoice.
    ADD COLUMN returned billing.finite NOT NULL DEFAULT 0
        CONSTRAINT invoices_returned_nonnegative CHECK (returned >= 0),
    ADD COLUMN account_credit billing.finite NOT NULL DEFAULT 0
        CONSTRAINT invoices_account_credit_nonnegative CHECK (account_credit >= 0),
    ADD COLUMN carried billing.finite NOT NULL DEFAULT 0
        CONSTRAINT invoices_carried_nonnegative CHECK (carried >= 0),
    ADD COLUMN account_credit_left billing.finite NOT NULL DEFAULT 0
        CONSTRAINT invoices_account_credit_left_nonnegative CHECK (account_credit_left >= 0),
    DROP CONSTRAINT invoices_total_reconciles,
    ADD CONSTRAINT invoices_total_reconciles
        CHECK (total = subtotal + returned - credits - account_credit + carried + tax),
    ADD CONSTRAINT invoices_void_reason_iff_void
        CHECK ((status = 'void') = (voided_at IS NOT NULL)),
    -- 0001 tied the number to status 'finalized'; a voided invoice keeps
    -- the number it was issued with.
    DROP CONSTRAINT invoices_number_iff_finalized,
    ADD CONSTRAINT invoices_number_iff_issued
        CHECK ((number IS NOT NULL) = (finalized_at IS NOT NULL)
               AND (status <> 'finalized' OR number IS NOT NULL)
               AND (status <> 'draft' OR number IS NULL));
CREATE INDEX invoices_month_status ON billing.invoices (month, status);

-- billing.invoices_guard, replacing 0004's (whose rules it keeps:
-- finalized invoices frozen, identity fixed, the number just taken from
-- its series, and the lines check of finalize_invoice). One change is
-- added: a finalized invoice may become void, which touches nothing but
-- status, void_reason, voided_at and updated_at. Void invoices are frozen
-- entirely.
CREATE OR REPLACE FUNCTION billing.invoices_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_next bigint;
    v_lines numeric;
    v_credits numeric;
BEGIN
    IF OLD.status = 'finalized' AND TG_OP = 'UPDATE' AND NEW.status = 'void'
       AND (NEW.id, NEW.account_id, NEW.currency, NEW.kind, NEW.corrects_invoice_id, NEW.month,
            NEW.period_start, NEW.period_end, NEW.series, NEW.number, NEW.subtotal, NEW.credits,
            NEW.returned, NEW.account_credit, NEW.carried, NEW.account_credit_left,
            NEW.tax_rate, NEW.tax, NEW.total, NEW.created_at, NEW.finalized_at, NEW.content_hash)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.account_id, OLD.currency, OLD.kind, OLD.corrects_invoice_id, OLD.month,
            OLD.period_start, OLD.period_end, OLD.series, OLD.number, OLD.subtotal, OLD.credits,
            OLD.returned, OLD.account_credit, OLD.carried, OLD.account_credit_left,
            OLD.tax_rate, OLD.tax, OLD.total, OLD.created_at, OLD.finalized_at, OLD.content_hash)
    THEN
        RETURN NEW;
    END IF;
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

-- An 'expire' entry may now name the invoice of its month (recomputing a
-- draft reverses what the draft recorded, expiries included).
ALTER TABLE billing.credit_ledger
    DROP CONSTRAINT credit_ledger_invoice,
    ADD CONSTRAINT credit_ledger_invoice
        CHECK (CASE entry WHEN 'grant' THEN invoice_id IS NULL
                          WHEN 'expire' THEN true
                          ELSE invoice_id IS NOT NULL END);
CREATE INDEX credit_ledger_invoice_id ON billing.credit_ledger (invoice_id)
    WHERE invoice_id IS NOT NULL;

-- billing.credit_ledger_balance_guard, replacing 0004's and keeping its
-- rules (SECURITY DEFINER; the grant amount; an entry naming an invoice
-- names one of the grant's own account and currency; balance never below
-- zero). One rule is widened: a draft recomputed reverses its 'expire'
-- entries as well as its 'apply' ones, so reverses never exceed what
-- apply and expire entries took from the grant (0004: apply only). The
-- balance still never exceeds what was granted.
CREATE OR REPLACE FUNCTION billing.credit_ledger_balance_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_grant billing.credit_grants%ROWTYPE;
    v_balance numeric;
    v_expected numeric;
    v_taken numeric;
    v_reversed numeric;
BEGIN
    SELECT * INTO v_grant FROM billing.credit_grants WHERE id = NEW.grant_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NEW; -- the foreign key reports it
    END IF;
    SELECT sum(amount_minor),
           coalesce(-sum(amount_minor) FILTER (WHERE entry IN ('apply', 'expire')), 0),
           coalesce(sum(amount_minor) FILTER (WHERE entry = 'reverse'), 0)
        INTO v_balance, v_taken, v_reversed
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
    IF NEW.entry = 'reverse' AND v_reversed + NEW.amount_minor > v_taken THEN
        PERFORM billing.violation('credit_ledger_reverse_applied', TG_TABLE_NAME,
            format('grant %s: reverse of %s minor units, but only %s applied and not yet reversed',
                   NEW.grant_id, NEW.amount_minor, v_taken - v_reversed), '23514');
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

-- Credit that refund lines gave back to the grants that paid (libbilling's
-- billing_invoice_returned_*), per grant, as invoice_credits holds what
-- was applied; the ledger has the matching 'reverse' entries.
CREATE TABLE billing.invoice_returned_credits (
    invoice_id bigint NOT NULL REFERENCES billing.invoices (id),
    grant_id billing.ident NOT NULL REFERENCES billing.credit_grants (id),
    amount billing.finite NOT NULL
        CONSTRAINT invoice_returned_credits_amount_positive CHECK (amount > 0),
    PRIMARY KEY (invoice_id, grant_id)
);
-- A grant of the invoice's own account and currency, as for invoice_credits (0004).
CREATE TRIGGER invoice_returned_credits_grant_account
    BEFORE INSERT OR UPDATE ON billing.invoice_returned_credits
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_credits_account_guard();
GRANT SELECT, INSERT, DELETE ON billing.invoice_returned_credits TO billing_app;

-- Invoice lines as libbilling gives them: fee and refund lines have no
-- meter (NULL, which 0001 already allows); a refund line (the unused
-- span of a term, in seconds) has no unit price.
ALTER TABLE billing.invoice_lines ALTER COLUMN unit_price DROP NOT NULL,
    ADD CONSTRAINT invoice_lines_unit_price_refund_only
        CHECK (unit_price IS NOT NULL OR kind = 'refund');

-- billing.invoice_number_text: "INV-2026-000123" for series prefix
-- "INV-2026-" and number 123 (at least six digits).
CREATE FUNCTION billing.invoice_number_text(p_prefix text, p_number bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN p_prefix || lpad(p_number::text, greatest(6, length(p_number::text)), '0');

-- billing.ensure_invoice_series: create series @p_series with @p_prefix
-- unless it exists. SECURITY DEFINER: the runtime role may not insert
-- series itself (it could start one at any number).
CREATE FUNCTION billing.ensure_invoice_series(p_series text, p_prefix text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO billing.invoice_series (series, prefix) VALUES (p_series, p_prefix)
        ON CONFLICT (series) DO NOTHING;
END
$$;

-- billing.void_invoice: void finalized invoice @p_invoice (it keeps its
-- number) for @p_reason, and issue in series @p_cn_series a credit note
-- that references it: the same lines, credits, tax and totals, numbered
-- at once. Credit the voided invoice used goes back to its grants
-- ('reverse' ledger entries on the credit note), credit its refunds gave
-- back is taken again ('apply'). Returns the credit
-- note's id. The month can then be closed again: a new draft is built.
CREATE FUNCTION billing.void_invoice(p_invoice bigint, p_reason text, p_cn_series text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_inv billing.invoices%ROWTYPE;
    v_cn bigint;
BEGIN
    SELECT * INTO v_inv FROM billing.invoices WHERE id = p_invoice FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'invoice % does not exist', p_invoice USING ERRCODE = 'no_data_found';
    END IF;
    IF v_inv.status <> 'finalized' OR v_inv.kind <> 'invoice' THEN
        PERFORM billing.violation('invoices_void_finalized_only', 'invoices',
            format('invoice %s is a %s %s: only finalized invoices can be voided',
                   p_invoice, v_inv.status, replace(v_inv.kind, '_', ' ')));
    END IF;
    UPDATE billing.invoices SET status = 'void', void_reason = p_reason, voided_at = now(),
                                updated_at = now()
        WHERE id = p_invoice;
    INSERT INTO billing.invoices (account_id, currency, kind, corrects_invoice_id, month,
                                  period_start, period_end, series, subtotal, credits, returned,
                                  account_credit, carried, account_credit_left, tax_rate,
                                  tax, total, content_hash)
        VALUES (v_inv.account_id, v_inv.currency, 'credit_note', p_invoice, v_inv.month,
                v_inv.period_start, v_inv.period_end, p_cn_series, v_inv.subtotal,
                v_inv.credits, v_inv.returned, v_inv.account_credit, v_inv.carried,
                v_inv.account_credit_left, v_inv.tax_rate, v_inv.tax, v_inv.total,
                v_inv.content_hash)
        RETURNING id INTO v_cn;
    INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, model, region, plan_id,
                                       price_version_id, adjusts_month, description, quantity,
                                       quantity_den, unit, unit_price, amount)
        SELECT v_cn, line_no, kind, meter, model, region, plan_id, price_version_id,
               adjusts_month, description, quantity, quantity_den, unit, unit_price, amount
        FROM billing.invoice_lines WHERE invoice_id = p_invoice;
    INSERT INTO billing.invoice_credits (invoice_id, grant_id, amount)
        SELECT v_cn, grant_id, amount FROM billing.invoice_credits WHERE invoice_id = p_invoice;
    INSERT INTO billing.invoice_returned_credits (invoice_id, grant_id, amount)
        SELECT v_cn, grant_id, amount FROM billing.invoice_returned_credits
        WHERE invoice_id = p_invoice;
    -- Per grant, the net of what the invoice took and what its refunds gave
    -- back: a 'reverse' returns what it took, an 'apply' takes back what
    -- it gave.
    INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id, effective_at, note)
        SELECT grant_id, CASE WHEN sum(amount_minor) < 0 THEN 'reverse' ELSE 'apply' END,
               -sum(amount_minor), v_cn, now(),
               format('credit note for voided invoice %s', p_invoice)
        FROM billing.credit_ledger
        WHERE invoice_id = p_invoice AND entry IN ('apply', 'reverse')
        GROUP BY grant_id HAVING sum(amount_minor) <> 0;
    PERFORM billing.finalize_invoice(v_cn);
    RETURN v_cn;
END
$$;

GRANT UPDATE (content_hash, void_reason, voided_at, returned, account_credit, carried,
               account_credit_left) ON billing.invoices TO billing_app;

REVOKE ALL ON FUNCTION billing.ensure_invoice_series(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION billing.ensure_invoice_series(text, text) TO billing_app;
REVOKE ALL ON FUNCTION billing.void_invoice(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION billing.void_invoice(bigint, text, text) TO billing_app;
