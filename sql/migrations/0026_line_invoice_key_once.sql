-- 0026_line_invoice_key_once.sql - an invoice line's invoice checked once
-- per statement instead of once per row (issue 28: a first `billing close`
-- of 100 000 accounts in <= 15 s).
--
-- The foreign key invoice_lines_invoice_id_fkey ran an RI trigger per
-- inserted line, a `SELECT ... FOR KEY SHARE` of the invoice: 716 668 of
-- them in a first close of 100 000 accounts, beside the statement guard
-- invoice_lines_finalized_immutable_insert (0006), which already locks
-- every invoice of the statement FOR SHARE (a stronger lock) in id order
-- to check that it is a draft (doc/performance.md, "Month-end close",
-- branches h20, h36, h43).
--
-- The key is dropped and checked by that guard: its INSERT trigger now
-- runs billing.invoice_lines_insert_guard, which counts the invoices it
-- locked and, when fewer than the statement's distinct invoices, refuses
-- the first line whose invoice does not exist with the foreign key's name,
-- invoice_lines_invoice_id_fkey, and its SQLSTATE, 23503
-- (foreign_key_violation); a missing invoice is named before a finalized
-- one, as when the key's row checks ran first. Concurrent deletes:
--
--  * Lines -> invoices (INSERT): every invoice of the statement is locked
--    FOR SHARE before the statement ends, so a concurrent DELETE of it
--    waits for this transaction; one that committed first leaves the row
--    out of the lock (READ COMMITTED) and the line is refused, or fails
--    the lock with 40001 (REPEATABLE READ: deleted since the snapshot), as
--    the foreign key's lock did.
--  * Lines -> invoices (UPDATE): the row guard invoice_lines_finalized_
--    immutable (0001, 0006) locks the line's old and new invoice FOR SHARE
--    and already refused a missing one (invoices_finalized_immutable,
--    before the key's check ran): unchanged.
--  * The referenced side: a DELETE of invoices that leaves a line without
--    its invoice is refused by invoices_lines_key_delete, a statement
--    trigger over the deleted rows, with the same name and 23503. It looks
--    with a new snapshot after its rows are deleted (READ COMMITTED), so a
--    line inserted concurrently is seen: its INSERT held the invoice FOR
--    SHARE, which the DELETE waited for. Under REPEATABLE READ or
--    SERIALIZABLE (whose snapshot would not see that line) a DELETE of
--    invoices is refused with 40001 (serialization_failure), as 0025 does
--    for account keys; retried under READ COMMITTED, the default, it goes
--    through. An invoice's id never changes (invoices_identity) and
--    invoices cannot be truncated (invoices_no_truncate), so no UPDATE or
--    TRUNCATE can break the key.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- The statement's new lines (new_rows): every invoice exists and is a
-- draft. The invoices are locked FOR SHARE in id order (0006).
CREATE FUNCTION billing.invoice_lines_insert_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_status text;
    v_locked bigint := 0;
    v_frozen bigint;
    v_frozen_status text;
BEGIN
    FOR v_id, v_status IN
        SELECT i.id, i.status FROM billing.invoices i
        WHERE i.id IN (SELECT invoice_id FROM new_rows) ORDER BY i.id FOR SHARE
    LOOP
        v_locked := v_locked + 1;
        IF v_status <> 'draft' AND v_frozen IS NULL THEN
            v_frozen := v_id;
            v_frozen_status := v_status;
        END IF;
    END LOOP;
    IF v_locked < (SELECT count(DISTINCT n.invoice_id) FROM new_rows n) THEN
        SELECT n.invoice_id INTO v_id FROM new_rows n
            WHERE NOT EXISTS (SELECT 1 FROM billing.invoices i WHERE i.id = n.invoice_id)
            ORDER BY n.invoice_id LIMIT 1;
        PERFORM billing.violation('invoice_lines_invoice_id_fkey', TG_TABLE_NAME,
            format('insert or update on table "invoice_lines" violates foreign key constraint'
                   ' "invoice_lines_invoice_id_fkey": invoice %s is not in billing.invoices',
                   v_id),
            '23503');
    END IF;
    IF v_frozen IS NOT NULL THEN
        PERFORM billing.violation('invoices_finalized_immutable', TG_TABLE_NAME,
            format('invoice %s is %s: %s on %s refused', v_frozen, v_frozen_status, TG_OP,
                   TG_TABLE_NAME));
    END IF;
    RETURN NULL;
END
$$;

-- The referenced side: no invoice a line refers to may go.
CREATE FUNCTION billing.invoices_lines_key_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id bigint;
BEGIN
    SELECT o.id INTO v_id FROM removed o
        WHERE EXISTS (SELECT 1 FROM billing.invoice_lines l WHERE l.invoice_id = o.id)
        ORDER BY o.id LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('invoice_lines_invoice_id_fkey', 'invoice_lines',
            format('update or delete on table "invoices" violates foreign key constraint'
                   ' "invoice_lines_invoice_id_fkey" on table "invoice_lines": invoice %s is'
                   ' still referenced from invoice_lines', v_id),
            '23503');
    ELSIF billing.snapshot_per_transaction() THEN
        PERFORM 1 FROM removed LIMIT 1;
        IF FOUND THEN
            PERFORM billing.violation('invoice_lines_invoice_id_fkey', 'invoice_lines',
                'invoices are deleted under READ COMMITTED only, where a concurrent invoice'
                ' line is seen', '40001');
        END IF;
    END IF;
    RETURN NULL;
END
$$;

ALTER TABLE billing.invoice_lines DROP CONSTRAINT invoice_lines_invoice_id_fkey;
DROP TRIGGER invoice_lines_finalized_immutable_insert ON billing.invoice_lines;
CREATE TRIGGER invoice_lines_finalized_immutable_insert AFTER INSERT ON billing.invoice_lines
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_lines_insert_guard();
CREATE TRIGGER invoices_lines_key_delete AFTER DELETE ON billing.invoices
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoices_lines_key_guard();
