-- 0017_refund_span.sql - a refund line keeps the unused span it refunds
-- (issue 27: "Unused 4 d 0 h of <plan> from <instant>").
--
-- unused_from is the cancellation, unused_to the end of the cancelled
-- term: the span libbilling refunds pro rata (doc/pricing.md,
-- "Cancellation"), the very instants `billing rate` prints as
-- unused_from/unused_to. Only refund lines have them. Lines written
-- before this migration keep NULL (finalized invoices are frozen; an open
-- draft gets them at its next recomputation: `billing close --full`).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

ALTER TABLE billing.invoice_lines
    ADD COLUMN unused_from timestamptz,
    ADD COLUMN unused_to timestamptz,
    ADD CONSTRAINT invoice_lines_unused_span_refund_only
        CHECK ((unused_from IS NULL AND unused_to IS NULL)
               OR (kind = 'refund' AND unused_from IS NOT NULL AND unused_to IS NOT NULL
                   AND unused_to >= unused_from));
