-- 0011_credit_remaining.sql - what is left of each grant on an invoice, as
-- the close computed it (issue 23, 10; doc/database.md "Month-end close").
--
-- `billing invoice show` and the exports gave a grant's remaining from
-- the ledger: its balance as of the invoice. libbilling (and so `billing
-- rate`, which billing(1) says the close equals) gives what its replay of
-- every earlier month leaves, whether those months were closed or not:
-- with an earlier month never closed (its credit not yet in the ledger),
-- the two differed. The close now stores libbilling's figure beside
-- each applied and each returned credit; rows written before this
-- migration have none (NULL) and are read from the ledger as before.
-- The figure is part of a draft's content hash: the first close after
-- this migration recomputes the open drafts once (same figures, plus it).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

ALTER TABLE billing.invoice_credits
    ADD COLUMN remaining billing.finite
        CONSTRAINT invoice_credits_remaining_nonnegative CHECK (remaining >= 0);
ALTER TABLE billing.invoice_returned_credits
    ADD COLUMN remaining billing.finite
        CONSTRAINT invoice_returned_credits_remaining_nonnegative CHECK (remaining >= 0);
