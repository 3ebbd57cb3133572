-- 0028_draft_rule_when.sql - the invoices' draft rule evaluated without a
-- function call per row (issue 28: a first `billing close` of 100 000
-- accounts in <= 15 s).
--
-- invoices_created_draft (0001), a PL/pgSQL row trigger, ran its function
-- for every invoice inserted (100 000 calls in a first close of 100 000
-- accounts, whose drafts' INSERT took 7.9 s of statement time, much of it
-- in row triggers: doc/performance.md, "Month-end close", branch h54) to
-- check that it is created as a draft without a number. The trigger and
-- its function stay, now with a WHEN condition: the condition is
-- evaluated by the executor, and the function runs only for a row that
-- breaks the rule, which it refuses as before (same name, same message,
-- same SQLSTATE, before the CHECK constraints, as a BEFORE row trigger).
--
-- Not changed: the credit ledger's row trigger credit_ledger_balance. A
-- statement trigger over the new entries (the same three rules entry by
-- entry with running sums by id, the grants locked FOR NO KEY UPDATE in
-- id order) cost more than the row trigger it replaced (doc/performance.md,
-- "Month-end close", branch h57, tried and not landed).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

DROP TRIGGER invoices_created_draft ON billing.invoices;
CREATE TRIGGER invoices_created_draft BEFORE INSERT ON billing.invoices
    FOR EACH ROW WHEN (NEW.status <> 'draft' OR NEW.number IS NOT NULL)
    EXECUTE FUNCTION billing.invoices_insert_guard();
