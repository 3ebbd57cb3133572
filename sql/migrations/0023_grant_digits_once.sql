-- 0023_grant_digits_once.sql - a grant's decimal places checked once per
-- statement instead of once per row (issue 28: `billing load` of 1 M
-- accounts with a grant each within 30 s).
--
-- 0001's CHECK credit_grants_minor_digits called the SQL function
-- billing.currency_digits (a look-up in billing.currencies) for every
-- grant written: 44 % of the INSERT of 200 000 grants by `billing load`
-- (doc/performance.md, "`billing load`", 2026-12-07, branch h29). The
-- same rule (the amount has no more decimal places than its currency's
-- minor unit; a currency that billing.currencies does not know passes, as
-- the CHECK's NULL did, and the account's foreign key refuses it anyway)
-- is now checked by a statement trigger over the statement's new rows
-- (transition table), one join with billing.currencies; a statement that
-- breaks it fails as before, with the same constraint name and SQLSTATE
-- (23514, check_violation), naming the first grant that breaks it. Grants
-- are append-only (credit_grants_append_only), but an UPDATE is checked
-- too.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

ALTER TABLE billing.credit_grants DROP CONSTRAINT credit_grants_minor_digits;

CREATE FUNCTION billing.credit_grants_minor_digits_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad record;
BEGIN
    SELECT n.id, n.amount, n.currency, c.digits
        INTO v_bad
        FROM added n
        JOIN billing.currencies c ON c.code = n.currency
        WHERE scale(trim_scale(n.amount)) > c.digits
        LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('credit_grants_minor_digits', TG_TABLE_NAME,
            format('credit grant %s: amount %s has more decimal places than %s''s %s',
                   v_bad.id, v_bad.amount, v_bad.currency, v_bad.digits), '23514');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER credit_grants_minor_digits AFTER INSERT ON billing.credit_grants
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_grants_minor_digits_guard();
CREATE TRIGGER credit_grants_minor_digits_update AFTER UPDATE ON billing.credit_grants
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_grants_minor_digits_guard();
