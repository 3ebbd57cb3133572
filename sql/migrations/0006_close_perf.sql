-- 0006_close_perf.sql - month-end close at scale (issue 12; doc/performance.md,
-- "Month-end close"), and expired credit given back by a void (below).
--
-- The guard that keeps lines and applied credits of a non-draft invoice
-- unchanged (billing.invoice_children_guard, 0001) ran once per row: a
-- close inserts about seven lines per draft, and the row trigger's
-- SELECT ... FOR SHARE of the invoice took as long as the insert itself.
-- INSERT and DELETE now check once per statement, over the transition
-- table; UPDATE, which can move a row between invoices, keeps the row
-- trigger. The guarantees are the same:
-- - a statement that adds or removes rows of an invoice that is not a
--   draft fails with invoices_finalized_immutable, as before;
-- - every invoice touched is locked FOR SHARE before the statement ends,
--   so a concurrent billing.finalize_invoice (FOR UPDATE) either waits for
--   our commit and then sums our rows, or finalizes first and we see it
--   finalized once the lock is granted (READ COMMITTED re-reads the
--   locked row) and fail. Locks are taken in id order, so two statements
--   cannot deadlock on them.
-- The checks run after the rows are written (AFTER ... FOR EACH
-- STATEMENT is the only place a transition table exists); an error there
-- aborts the statement all the same. A missing invoice on INSERT is still
-- left to the foreign key, whose row checks run before statement triggers.

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- billing.invoice_children_statement_guard: the statement's invoices,
-- from new_rows (INSERT) or old_rows (DELETE), must all be drafts.
CREATE FUNCTION billing.invoice_children_statement_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_status text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        FOR v_id, v_status IN
            SELECT i.id, i.status FROM billing.invoices i
            WHERE i.id IN (SELECT invoice_id FROM new_rows) ORDER BY i.id FOR SHARE
        LOOP
            IF v_status <> 'draft' THEN
                PERFORM billing.violation('invoices_finalized_immutable', TG_TABLE_NAME,
                    format('invoice %s is %s: %s on %s refused', v_id, v_status, TG_OP,
                           TG_TABLE_NAME));
            END IF;
        END LOOP;
        RETURN NULL;
    END IF;
    FOR v_id, v_status IN
        SELECT i.id, i.status FROM billing.invoices i
        WHERE i.id IN (SELECT invoice_id FROM old_rows) ORDER BY i.id FOR SHARE
    LOOP
        IF v_status <> 'draft' THEN
            PERFORM billing.violation('invoices_finalized_immutable', TG_TABLE_NAME,
                format('invoice %s is %s: %s on %s refused', v_id, v_status, TG_OP,
                       TG_TABLE_NAME));
        END IF;
    END LOOP;
    -- A row whose invoice is gone (the old row trigger's 'missing').
    SELECT o.invoice_id INTO v_id FROM old_rows o
        WHERE NOT EXISTS (SELECT 1 FROM billing.invoices i WHERE i.id = o.invoice_id) LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('invoices_finalized_immutable', TG_TABLE_NAME,
            format('invoice %s is missing: %s on %s refused', v_id, TG_OP, TG_TABLE_NAME));
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER invoice_lines_finalized_immutable ON billing.invoice_lines;
CREATE TRIGGER invoice_lines_finalized_immutable BEFORE UPDATE ON billing.invoice_lines
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_children_guard();
CREATE TRIGGER invoice_lines_finalized_immutable_insert AFTER INSERT ON billing.invoice_lines
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_children_statement_guard();
CREATE TRIGGER invoice_lines_finalized_immutable_delete AFTER DELETE ON billing.invoice_lines
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_children_statement_guard();

DROP TRIGGER invoice_credits_finalized_immutable ON billing.invoice_credits;
CREATE TRIGGER invoice_credits_finalized_immutable BEFORE UPDATE ON billing.invoice_credits
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_children_guard();
CREATE TRIGGER invoice_credits_finalized_immutable_insert AFTER INSERT ON billing.invoice_credits
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_children_statement_guard();
CREATE TRIGGER invoice_credits_finalized_immutable_delete AFTER DELETE ON billing.invoice_credits
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_children_statement_guard();

-- billing.void_invoice, replacing 0005's: voiding an invoice on which
-- credit expired, then closing the month again, failed: the credit note
-- gave back only what the invoice applied, and the corrected draft's
-- 'expire' of the same credit overdrew the grant
-- (credit_ledger_nonnegative_balance). The credit note now gives back the
-- expired credit as well; the corrected draft takes it again.
CREATE OR REPLACE FUNCTION billing.void_invoice(p_invoice bigint, p_reason text, p_cn_series text)
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
    -- Per grant, the net of what the invoice took (applied and expired)
    -- and what its refunds gave back: a 'reverse' returns what it took, an
    -- 'apply' takes back what it gave. Expired credit comes back too: the
    -- corrected invoice of the month expires it again (0005 left it out,
    -- and the re-close then overdrew the grant).
    INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id, effective_at, note)
        SELECT grant_id, CASE WHEN sum(amount_minor) < 0 THEN 'reverse' ELSE 'apply' END,
               -sum(amount_minor), v_cn, now(),
               format('credit note for voided invoice %s', p_invoice)
        FROM billing.credit_ledger
        WHERE invoice_id = p_invoice AND entry IN ('apply', 'reverse', 'expire')
        GROUP BY grant_id HAVING sum(amount_minor) <> 0;
    PERFORM billing.finalize_invoice(v_cn);
    RETURN v_cn;
END
$$;
