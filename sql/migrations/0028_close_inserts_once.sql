-- 0028_close_inserts_once.sql - the credit ledger's entries checked once
-- per statement instead of once per row, and the invoices' draft rule
-- evaluated without a function call per row (issue 28: a first `billing
-- close` of 100 000 accounts in <= 15 s).
--
-- In a first close of 100 000 accounts the INSERT of the drafts took 7.9 s
-- of statement time and that of their ledger entries 4.6 s, much of it in
-- row triggers (doc/performance.md, "Month-end close", branch h54):
--
--  * credit_ledger_balance (0001, 0005, 0019), a PL/pgSQL row trigger for
--    every entry but a grant's opening one: it locked the grant FOR NO KEY
--    UPDATE, summed the grant's ledger, and checked three rules against
--    the entries before it: an entry naming an invoice names one of the
--    grant's account and currency (credit_ledger_invoice_account), a
--    reverse never gives back more than apply and expire entries took
--    (credit_ledger_reverse_applied), and no entry takes the balance below
--    zero or comes before the grant's opening entry
--    (credit_ledger_nonnegative_balance).
--  * invoices_created_draft (0001), a PL/pgSQL row trigger for every
--    invoice: it is created as a draft without a number.
--
-- The ledger's rules are now checked by billing.credit_ledger_balance_
-- guard_set, a statement trigger over the statement's new rows (transition
-- table), with the same names, messages and SQLSTATE (23514), naming the
-- same entry: the first, in insertion order (the identity id), that breaks
-- one, each entry seeing what the row trigger saw, the grant's entries
-- written before the statement plus the statement's own earlier ones
-- (running sums by id over the transition table). Concurrent writers: the
-- statement's grants are locked FOR NO KEY UPDATE, as the row trigger
-- locked them, in id order, before the ledger is read with a new snapshot
-- (READ COMMITTED): a concurrent writer of the same grant waits for this
-- transaction, or this check for it, and then sees its entries, as
-- before. Under REPEATABLE READ the transaction's snapshot is read, as the
-- row trigger read it. An entry whose grant does not exist is left to
-- credit_ledger_grant_amount (0024), as before.
--
-- Two things differ only in which refusal a statement that breaks two
-- rules at once reports: the row trigger ran before the table's CHECK
-- constraints and the foreign key credit_ledger_invoice_id_fkey, the
-- statement trigger runs after them (an entry naming no invoice at all is
-- now refused by the foreign key, not by credit_ledger_invoice_account).
-- Nothing that was refused is accepted.
--
-- invoices_created_draft keeps its row trigger and function, now with a
-- WHEN condition: the function runs only for a row that breaks the rule,
-- which it refuses as before, before the CHECK constraints.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

DROP TRIGGER invoices_created_draft ON billing.invoices;
CREATE TRIGGER invoices_created_draft BEFORE INSERT ON billing.invoices
    FOR EACH ROW WHEN (NEW.status <> 'draft' OR NEW.number IS NOT NULL)
    EXECUTE FUNCTION billing.invoices_insert_guard();

-- The statement's new ledger entries (added): 0005's rules, entry by
-- entry in id order. SECURITY DEFINER: locking the grants needs UPDATE on
-- credit_grants, which the runtime role must not have.
CREATE FUNCTION billing.credit_ledger_balance_guard_set() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad record;
BEGIN
    -- The grants of the entries checked, locked in id order: writers of
    -- one grant queue, as behind the row trigger's lock.
    PERFORM 1 FROM billing.credit_grants g
        WHERE g.id IN (SELECT n.grant_id FROM added n WHERE n.entry <> 'grant')
        ORDER BY g.id
        FOR NO KEY UPDATE OF g;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- A new snapshot (READ COMMITTED) after the locks: per grant, the
    -- entries written before this statement are all it sees less the
    -- statement's own.
    WITH s AS MATERIALIZED (
        SELECT n.grant_id, count(*) AS cnt, sum(n.amount_minor) AS bal,
               coalesce(-sum(n.amount_minor) FILTER (WHERE n.entry IN ('apply', 'expire')), 0)
                   AS taken,
               coalesce(sum(n.amount_minor) FILTER (WHERE n.entry = 'reverse'), 0) AS rev
            FROM added n
            WHERE n.grant_id IN (SELECT a.grant_id FROM added a WHERE a.entry <> 'grant')
            GROUP BY n.grant_id),
    prior AS MATERIALIZED (
        SELECT s.grant_id, g.account_id, g.currency, t.cnt - s.cnt AS cnt, t.bal - s.bal AS bal,
               t.taken - s.taken AS taken, t.rev - s.rev AS rev
            FROM s
            JOIN billing.credit_grants g ON g.id = s.grant_id
            CROSS JOIN LATERAL (
                SELECT count(*) AS cnt, coalesce(sum(l.amount_minor), 0) AS bal,
                       coalesce(-sum(l.amount_minor) FILTER (WHERE l.entry IN ('apply', 'expire')),
                                0) AS taken,
                       coalesce(sum(l.amount_minor) FILTER (WHERE l.entry = 'reverse'), 0) AS rev
                    FROM billing.credit_ledger l WHERE l.grant_id = s.grant_id) t),
    -- Each entry with the sums of the statement's entries of its grant
    -- before it.
    run AS (
        SELECT n.id, n.grant_id, n.entry, n.amount_minor, n.invoice_id,
               count(*) OVER w - 1 AS cnt,
               coalesce(sum(n.amount_minor) OVER w, 0) - n.amount_minor AS bal,
               coalesce(-sum(n.amount_minor) FILTER (WHERE n.entry IN ('apply', 'expire'))
                            OVER w, 0)
                   + CASE WHEN n.entry IN ('apply', 'expire') THEN n.amount_minor ELSE 0 END
                   AS taken,
               coalesce(sum(n.amount_minor) FILTER (WHERE n.entry = 'reverse') OVER w, 0)
                   - CASE WHEN n.entry = 'reverse' THEN n.amount_minor ELSE 0 END AS rev
            FROM added n
            WHERE n.grant_id IN (SELECT p.grant_id FROM prior p)
            WINDOW w AS (PARTITION BY n.grant_id ORDER BY n.id
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)),
    checked AS (
        SELECT r.id, r.grant_id, r.entry, r.amount_minor, r.invoice_id, p.account_id, p.currency,
               p.rev + r.rev AS rev, p.taken + r.taken AS taken,
               CASE WHEN p.cnt + r.cnt > 0 THEN p.bal + r.bal END AS bal,
               r.invoice_id IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM billing.invoices i
                   WHERE i.id = r.invoice_id AND i.account_id = p.account_id
                     AND i.currency = p.currency) AS foreign_invoice
            FROM run r
            JOIN prior p ON p.grant_id = r.grant_id
            WHERE r.entry <> 'grant')
    SELECT c.* INTO v_bad
        FROM checked c
        WHERE c.foreign_invoice
           OR (c.entry = 'reverse' AND c.rev + c.amount_minor > c.taken)
           OR c.bal IS NULL OR c.bal + c.amount_minor < 0
        ORDER BY c.id
        LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    ELSIF v_bad.foreign_invoice THEN
        PERFORM billing.violation('credit_ledger_invoice_account', TG_TABLE_NAME,
            format('grant %s of account %s: invoice %s is not an invoice of that account in %s',
                   v_bad.grant_id, v_bad.account_id, v_bad.invoice_id, v_bad.currency), '23514');
    ELSIF v_bad.entry = 'reverse' AND v_bad.rev + v_bad.amount_minor > v_bad.taken THEN
        PERFORM billing.violation('credit_ledger_reverse_applied', TG_TABLE_NAME,
            format('grant %s: reverse of %s minor units, but only %s applied and not yet reversed',
                   v_bad.grant_id, v_bad.amount_minor, v_bad.taken - v_bad.rev), '23514');
    END IF;
    PERFORM billing.violation('credit_ledger_nonnegative_balance', TG_TABLE_NAME,
        format('grant %s: %s of %s minor units would leave balance %s', v_bad.grant_id,
               v_bad.entry, v_bad.amount_minor, coalesce(v_bad.bal, 0) + v_bad.amount_minor),
        '23514');
    RETURN NULL;
END
$$;

DROP TRIGGER credit_ledger_balance ON billing.credit_ledger;
CREATE TRIGGER credit_ledger_balance AFTER INSERT ON billing.credit_ledger
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION billing.credit_ledger_balance_guard_set();
