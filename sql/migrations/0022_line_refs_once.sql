-- 0022_line_refs_once.sql - an invoice line's plan and price version
-- checked once per statement instead of once per row (issue 28: a first
-- `billing close` of 100 000 accounts in <= 15 s).
--
-- The foreign keys invoice_lines_plan_id_fkey and
-- invoice_lines_price_version_id_fkey ran one RI trigger per inserted line
-- each (a `SELECT ... FOR KEY SHARE` for the price version, a call even
-- for a NULL plan): with the lines' invoice key, about half the time of the
-- close's INSERT of a batch's lines (doc/performance.md, "Month-end close").
-- The referenced rows cannot go away: plans and price_versions are
-- append-only (plans_append_only, price_versions_append_only refuse every
-- UPDATE and DELETE, *_no_truncate every TRUNCATE), so the only way to
-- break either reference is to write a line naming a plan or price version
-- that does not exist. The constraints are replaced by statement triggers
-- over the transition tables of every INSERT and UPDATE of invoice_lines,
-- which refuse such a line with the same SQLSTATE (23503,
-- foreign_key_violation) and the same constraint names as before. No lock
-- on the referenced row is needed: it can never be deleted. The line's
-- invoice keeps its foreign key (drafts are deleted and replaced).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- Every line of the statement (new_rows) names an existing plan and price
-- version, or none; the first that does not is refused as the foreign
-- key refused it.
CREATE FUNCTION billing.invoice_lines_refs_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_plan text;
    v_version bigint;
BEGIN
    SELECT n.plan_id INTO v_plan FROM new_rows n
        WHERE n.plan_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM billing.plans p WHERE p.id = n.plan_id) LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('invoice_lines_plan_id_fkey', TG_TABLE_NAME,
            format('insert or update on table "invoice_lines" violates foreign key constraint'
                   ' "invoice_lines_plan_id_fkey": plan %s is not in billing.plans', v_plan),
            '23503');
    END IF;
    SELECT n.price_version_id INTO v_version FROM new_rows n
        WHERE n.price_version_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM billing.price_versions v WHERE v.id = n.price_version_id)
        LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('invoice_lines_price_version_id_fkey', TG_TABLE_NAME,
            format('insert or update on table "invoice_lines" violates foreign key constraint'
                   ' "invoice_lines_price_version_id_fkey": price version %s is not in'
                   ' billing.price_versions', v_version),
            '23503');
    END IF;
    RETURN NULL;
END
$$;

ALTER TABLE billing.invoice_lines DROP CONSTRAINT invoice_lines_plan_id_fkey,
    DROP CONSTRAINT invoice_lines_price_version_id_fkey;
CREATE TRIGGER invoice_lines_refs_insert AFTER INSERT ON billing.invoice_lines
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_lines_refs_guard();
CREATE TRIGGER invoice_lines_refs_update AFTER UPDATE ON billing.invoice_lines
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoice_lines_refs_guard();
