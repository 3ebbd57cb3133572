-- 0006_close_perf.sql - month-end close at scale (issue 12; doc/performance.md,
-- "Month-end close"). Numbered 0006 on branch close12 so that the tree
-- builds (gen-migrations.sh wants consecutive versions); the raw-event
-- migration of branch perf11 is also 0006: whichever merges second is
-- renumbered.
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
