-- 0025_account_keys_once.sql - an account's currency and time zone, and a
-- grant's account, checked once per statement instead of once per row
-- (issue 28: `billing load` of 1 M accounts with a grant each within 30 s).
--
-- Three foreign keys ran a row trigger for every row written: on the
-- INSERT of 200 000 accounts by `billing load`, accounts_currency_fkey
-- 3.0 s and accounts_time_zone_known 1.7 s of 7.6 s; on the INSERT of
-- their grants, credit_grants_account_currency 2.85 s of 5.4 s, each grant
-- locking its account row FOR KEY SHARE, which writes the account row
-- again (doc/performance.md, "`billing load`", branches h29, h32, h35).
--
-- They are dropped and checked by statement triggers over the statement's
-- new rows (transition tables), with the same constraint names and the
-- same SQLSTATE, 23503 (foreign_key_violation), naming the first row that
-- breaks the rule. Unlike plans and grants (0022, 0024), the referenced
-- rows can go: a currency or a zone name may be deleted, an account's
-- currency changed. So each rule is kept from both sides, and against a
-- concurrent writer:
--
--  * Accounts -> currencies, time_zone_names: the statement's distinct
--    currencies and zones (a few rows) are locked FOR KEY SHARE, as the
--    foreign keys locked them, in the same query that checks the rows
--    against them: a concurrent DELETE or key UPDATE of one waits for this
--    transaction, and one that came first is seen (READ COMMITTED: the row
--    is then missing and the account refused; REPEATABLE READ: the lock
--    fails with 40001, as the foreign key's did).
--  * Credit grants -> accounts (id, currency): one lock per account would
--    be the cost this removes, so under READ COMMITTED (the writers here)
--    the check takes a shared advisory lock, ACCOUNT_KEYS below, and a
--    statement that removes an account key (an UPDATE of its currency, a
--    DELETE in maintenance) takes it exclusively before it looks for
--    grants; whichever comes second sees the other's committed rows, since
--    each looks after its lock with a new snapshot. Under REPEATABLE READ
--    or SERIALIZABLE (whose snapshot would not see them) the grants'
--    accounts are locked FOR KEY SHARE instead, as the foreign key did.
--  * The referenced side: a DELETE or UPDATE of currencies, time_zone_names
--    or accounts that removes a key some row still refers to is refused
--    with the foreign key's name and 23503. Such a statement under
--    REPEATABLE READ or SERIALIZABLE is refused with 40001
--    (serialization_failure) even when nothing refers to the key: its
--    snapshot cannot see a referencing row committed since, which the
--    foreign key's own check (a second, newer snapshot) did; retried under
--    READ COMMITTED, the default, it goes through.
--
-- ACCOUNT_KEYS is the advisory lock (1651076204, 1801812339) ('bill',
-- 'keys' in ASCII), in the two-integer key space, apart from the bigint
-- key of `billing load`'s own lock.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

ALTER TABLE billing.accounts DROP CONSTRAINT accounts_currency_fkey,
    DROP CONSTRAINT accounts_time_zone_known;
ALTER TABLE billing.credit_grants DROP CONSTRAINT credit_grants_account_currency;

-- True when the transaction's snapshot is older than its statement (the
-- referenced side's guards cannot see rows committed since).
CREATE FUNCTION billing.snapshot_per_transaction() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT current_setting('transaction_isolation') <> 'read committed'
$$;

-- ---------------------------------------------------------------------
-- Accounts -> currencies, time_zone_names.
-- ---------------------------------------------------------------------

CREATE FUNCTION billing.accounts_refs_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad record;
    v_id text;
BEGIN
    -- The statement's distinct (currency, zone) pairs, read once; then one
    -- query: what is checked is what was locked (the hashed NOT IN reads
    -- each CTE whole, every lock taken, before the first pair passes).
    WITH k AS MATERIALIZED (
        SELECT DISTINCT n.currency, n.time_zone FROM added n),
    cur AS MATERIALIZED (
        SELECT c.code FROM billing.currencies c
        WHERE c.code IN (SELECT k.currency FROM k)
        FOR KEY SHARE OF c),
    zone AS MATERIALIZED (
        SELECT z.name FROM billing.time_zone_names z
        WHERE z.name IN (SELECT k.time_zone FROM k)
        FOR KEY SHARE OF z)
    SELECT k.currency, k.time_zone, k.currency NOT IN (SELECT code FROM cur) AS no_currency
        INTO v_bad
        FROM k
        WHERE k.currency NOT IN (SELECT code FROM cur) OR k.time_zone NOT IN (SELECT name FROM zone)
        LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT n.id INTO v_id FROM added n
        WHERE n.currency = v_bad.currency AND n.time_zone = v_bad.time_zone LIMIT 1;
    IF v_bad.no_currency THEN
        PERFORM billing.violation('accounts_currency_fkey', TG_TABLE_NAME,
            format('insert or update on table "accounts" violates foreign key constraint'
                   ' "accounts_currency_fkey": account %s: currency %s is not in'
                   ' billing.currencies', v_id, v_bad.currency), '23503');
    ELSE
        PERFORM billing.violation('accounts_time_zone_known', TG_TABLE_NAME,
            format('insert or update on table "accounts" violates foreign key constraint'
                   ' "accounts_time_zone_known": account %s: time zone %s is not in'
                   ' billing.time_zone_names', v_id, v_bad.time_zone), '23503');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER accounts_refs_insert AFTER INSERT ON billing.accounts
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.accounts_refs_guard();
CREATE TRIGGER accounts_refs_update AFTER UPDATE ON billing.accounts
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.accounts_refs_guard();

-- The referenced side: no currency or zone name an account uses may go.
-- TG_ARGV: the referenced table's key column, the accounts column that
-- refers to it, the constraint (identifiers from the triggers below).
CREATE FUNCTION billing.accounts_ref_key_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key text;
    v_used boolean;
BEGIN
    -- A key this statement removed (deleted, or changed by an UPDATE),
    -- one that accounts still use first.
    EXECUTE format('SELECT o.%1$I::text, EXISTS (SELECT 1 FROM billing.accounts a'
                   ' WHERE a.%3$I = o.%1$I) FROM removed o WHERE NOT EXISTS (SELECT 1'
                   ' FROM billing.%2$I r WHERE r.%1$I = o.%1$I) ORDER BY 2 DESC LIMIT 1',
                   TG_ARGV[0], TG_TABLE_NAME, TG_ARGV[1])
        INTO v_key, v_used;
    IF v_key IS NULL THEN
        RETURN NULL;
    ELSIF v_used THEN
        PERFORM billing.violation(TG_ARGV[2], 'accounts',
            format('%s %s is still referenced from accounts', TG_ARGV[1], v_key), '23503');
    ELSIF billing.snapshot_per_transaction() THEN
        PERFORM billing.violation(TG_ARGV[2], 'accounts',
            format('%s %s: a key of billing.%s is removed under READ COMMITTED only, where a'
                   ' concurrent account is seen', TG_ARGV[1], v_key, TG_TABLE_NAME), '40001');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER currencies_accounts_key_delete AFTER DELETE ON billing.currencies
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION billing.accounts_ref_key_guard('code', 'currency', 'accounts_currency_fkey');
CREATE TRIGGER currencies_accounts_key_update AFTER UPDATE ON billing.currencies
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION billing.accounts_ref_key_guard('code', 'currency', 'accounts_currency_fkey');
CREATE TRIGGER time_zone_names_accounts_key_delete AFTER DELETE ON billing.time_zone_names
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION billing.accounts_ref_key_guard('name', 'time_zone', 'accounts_time_zone_known');
CREATE TRIGGER time_zone_names_accounts_key_update AFTER UPDATE ON billing.time_zone_names
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION billing.accounts_ref_key_guard('name', 'time_zone', 'accounts_time_zone_known');

-- ---------------------------------------------------------------------
-- Credit grants -> accounts (id, currency).
-- ---------------------------------------------------------------------

CREATE FUNCTION billing.credit_grants_account_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad record;
BEGIN
    IF billing.snapshot_per_transaction() THEN
        -- As the foreign key: a lock on an account whose key changed since
        -- the snapshot fails with 40001.
        PERFORM 1 FROM billing.accounts a
            WHERE (a.id, a.currency) IN (SELECT n.account_id, n.currency FROM added n)
            FOR KEY SHARE OF a;
    ELSE
        -- ACCOUNT_KEYS, shared: a statement removing an account key waits
        -- for this transaction, or this check (a newer snapshot) for it.
        PERFORM pg_advisory_xact_lock_shared(1651076204, 1801812339);
    END IF;
    SELECT n.id, n.account_id, n.currency INTO v_bad
        FROM added n
        WHERE NOT EXISTS (SELECT 1 FROM billing.accounts a
                          WHERE a.id = n.account_id AND a.currency = n.currency)
        LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('credit_grants_account_currency', TG_TABLE_NAME,
            format('insert or update on table "credit_grants" violates foreign key constraint'
                   ' "credit_grants_account_currency": credit grant %s: account %s in %s is'
                   ' not in billing.accounts', v_bad.id, v_bad.account_id, v_bad.currency),
            '23503');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER credit_grants_account_insert AFTER INSERT ON billing.credit_grants
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_grants_account_guard();
CREATE TRIGGER credit_grants_account_update AFTER UPDATE ON billing.credit_grants
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_grants_account_guard();

-- The referenced side: no (account, currency) a grant refers to may go.
CREATE FUNCTION billing.accounts_grants_key_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad record;
BEGIN
    -- Most UPDATEs of accounts keep their keys: nothing to lock or look for.
    PERFORM 1 FROM removed o
        WHERE NOT EXISTS (SELECT 1 FROM billing.accounts a
                          WHERE a.id = o.id AND a.currency = o.currency)
        LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- ACCOUNT_KEYS, exclusive: grants' checks running now end first; the
    -- query below, a newer snapshot, sees what they committed.
    PERFORM pg_advisory_xact_lock(1651076204, 1801812339);
    SELECT o.id, o.currency INTO v_bad
        FROM removed o
        WHERE NOT EXISTS (SELECT 1 FROM billing.accounts a
                          WHERE a.id = o.id AND a.currency = o.currency)
          AND EXISTS (SELECT 1 FROM billing.credit_grants g
                      WHERE g.account_id = o.id AND g.currency = o.currency)
        LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('credit_grants_account_currency', 'credit_grants',
            format('account %s in %s is still referenced from credit_grants', v_bad.id,
                   v_bad.currency), '23503');
    ELSIF billing.snapshot_per_transaction() THEN
        PERFORM billing.violation('credit_grants_account_currency', 'credit_grants',
            'a key of billing.accounts (id, currency) is removed under READ COMMITTED only,'
            ' where a concurrent credit grant is seen', '40001');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER accounts_grants_key_delete AFTER DELETE ON billing.accounts
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION billing.accounts_grants_key_guard();
CREATE TRIGGER accounts_grants_key_update AFTER UPDATE ON billing.accounts
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION billing.accounts_grants_key_guard();
