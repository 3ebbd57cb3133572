-- 0019_ledger_grant_bulk.sql - the grant entries of the credit ledger
-- checked once per statement instead of once per row (issue 28: `billing
-- load` of 1 M accounts with a grant each).
--
-- 0005's row trigger credit_ledger_balance ran for every ledger row; for
-- a grant's opening entry it locked the grant row (FOR NO KEY UPDATE,
-- which writes the row again), summed the grant's ledger and compared
-- the entry with the granted amount: two thirds of a first load of
-- accounts with a grant each (doc/performance.md, "`billing load`").
-- An opening entry depends on nothing but its grant, which never changes
-- (credit_grants is append-only) and has one opening entry at most
-- (credit_ledger_one_grant_entry), so it needs neither the lock nor the
-- balance. Now the row trigger fires for the other entries only (WHEN),
-- and the rule it applied to opening entries (credit_ledger_grant_amount:
-- the entry is the granted amount in minor units, same constraint name,
-- same message, same SQLSTATE 23514) is checked by a statement trigger
-- over the statement's new rows, set-based. A statement that breaks it
-- fails as before; the other entries' rules are untouched.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

DROP TRIGGER credit_ledger_balance ON billing.credit_ledger;
CREATE TRIGGER credit_ledger_balance BEFORE INSERT ON billing.credit_ledger
    FOR EACH ROW WHEN (NEW.entry <> 'grant')
    EXECUTE FUNCTION billing.credit_ledger_balance_guard();

CREATE FUNCTION billing.credit_ledger_grant_amount_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad record;
BEGIN
    -- numeric ^ numeric: with integer operands `^` would be float8.
    SELECT n.grant_id, n.amount_minor, g.amount * 10::numeric ^ c.digits AS expected
        INTO v_bad
        FROM added n
        JOIN billing.credit_grants g ON g.id = n.grant_id
        JOIN billing.currencies c ON c.code = g.currency
        WHERE n.entry = 'grant' AND n.amount_minor <> g.amount * 10::numeric ^ c.digits
        LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('credit_ledger_grant_amount', TG_TABLE_NAME,
            format('grant %s: ledger grant entry %s differs from the granted %s minor units',
                   v_bad.grant_id, v_bad.amount_minor, v_bad.expected), '23514');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER credit_ledger_grant_amount AFTER INSERT ON billing.credit_ledger
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_ledger_grant_amount_guard();
