-- 0024_ledger_grant_key_once.sql - the credit ledger's reference to its
-- grant checked once per statement instead of once per row (issue 28:
-- `billing load` of 1 M accounts with a grant each within 30 s).
--
-- The foreign key credit_ledger_grant_id_fkey ran a row trigger for every
-- ledger entry written: a look-up of the grant that locked it FOR KEY
-- SHARE, which writes the grant row again. For the opening entries of
-- 200 000 grants written by `billing load` it took 3.0 s of the ledger
-- INSERT's 8.0 s, and 0019's statement trigger credit_ledger_grant_amount
-- another 1.2 s, computing 10 ^ digits once per entry (doc/performance.md,
-- "`billing load`", branch h32).
--
-- The lock is not needed: a grant is never deleted nor changed
-- (credit_grants_append_only refuses both for every role, and
-- credit_grants_no_truncate refuses TRUNCATE), so a grant that a
-- statement sees stays. The key is now checked by the statement trigger
-- credit_ledger_grant_amount, in the same join with the grants that
-- checks the opening entries' amounts: an entry whose grant does not
-- exist is refused with the foreign key's name, credit_ledger_grant_id_fkey,
-- and its SQLSTATE, 23503 (foreign_key_violation), naming the grant; the
-- amount rule is unchanged (10 ^ digits computed once per currency). An
-- UPDATE of the ledger (refused by credit_ledger_append_only) is checked
-- the same way. The referenced side keeps its guarantee too: a DELETE or
-- an UPDATE of credit_grants (refused anyway) that would leave an entry
-- without its grant is refused with the same name and SQLSTATE.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

ALTER TABLE billing.credit_ledger DROP CONSTRAINT credit_ledger_grant_id_fkey;

CREATE OR REPLACE FUNCTION billing.credit_ledger_grant_amount_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad record;
BEGIN
    -- The first entry without its grant, else the first opening entry
    -- that is not the granted amount. numeric ^ numeric: with integer
    -- operands `^` would be float8. MATERIALIZED: once per currency.
    WITH unit AS MATERIALIZED (
        SELECT c.code, 10::numeric ^ c.digits AS unit FROM billing.currencies c)
    SELECT n.grant_id, n.amount_minor, g.id IS NULL AS missing, g.amount * u.unit AS expected
        INTO v_bad
        FROM added n
        LEFT JOIN billing.credit_grants g ON g.id = n.grant_id
        LEFT JOIN unit u ON u.code = g.currency
        WHERE g.id IS NULL OR (n.entry = 'grant' AND n.amount_minor <> g.amount * u.unit)
        ORDER BY g.id IS NULL DESC
        LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    ELSIF v_bad.missing THEN
        PERFORM billing.violation('credit_ledger_grant_id_fkey', TG_TABLE_NAME,
            format('ledger entry refers to grant %s, which does not exist in credit_grants',
                   v_bad.grant_id), '23503');
    ELSE
        PERFORM billing.violation('credit_ledger_grant_amount', TG_TABLE_NAME,
            format('grant %s: ledger grant entry %s differs from the granted %s minor units',
                   v_bad.grant_id, v_bad.amount_minor, v_bad.expected), '23514');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER credit_ledger_grant_amount_update AFTER UPDATE ON billing.credit_ledger
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_ledger_grant_amount_guard();

-- The referenced side: no grant an entry refers to may go.
CREATE FUNCTION billing.credit_grants_ledger_key_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id text;
BEGIN
    SELECT o.id INTO v_id
        FROM removed o
        WHERE NOT EXISTS (SELECT 1 FROM billing.credit_grants g WHERE g.id = o.id)
          AND EXISTS (SELECT 1 FROM billing.credit_ledger l WHERE l.grant_id = o.id)
        LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('credit_ledger_grant_id_fkey', 'credit_ledger',
            format('grant %s is still referenced from credit_ledger', v_id), '23503');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER credit_grants_ledger_key_delete AFTER DELETE ON billing.credit_grants
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_grants_ledger_key_guard();
CREATE TRIGGER credit_grants_ledger_key_update AFTER UPDATE ON billing.credit_grants
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_grants_ledger_key_guard();
