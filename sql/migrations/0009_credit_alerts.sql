-- 0009_credit_alerts.sql - the credit alerts billingd has sent (issue 23),
-- so that each is sent once whatever the order in which an account's
-- events arrive (doc/operations.md "Credit alerts").
--
-- billingd's alert check (billingd/alertcheck.c) decides from the stored
-- usage which thresholds of which credit are reached; whether one was
-- already sent is this table: a row is inserted, in the batch's own
-- transaction, for each alert published, and a reached threshold with a
-- row is not published again. The row commits with the events that made
-- the alert, so "already sent" is durable and exact: a batch that rolls
-- back (after publishing) leaves no row, and its replay publishes the
-- same alert_id again (the documented at-least-once repeat).
--
-- alert_id is the alert's identity, built by billingd from the account,
-- the percent, the credit total and the ids of the grants valid (the
-- credit); its parts are stored beside it for reading. Append-only: a
-- sent alert is history.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

CREATE TABLE billing.credit_alerts (
    alert_id text PRIMARY KEY
        CONSTRAINT credit_alerts_id_length CHECK (octet_length(alert_id) BETWEEN 1 AND 512),
    account_id billing.ident NOT NULL,
    pct smallint NOT NULL CONSTRAINT credit_alerts_pct_range CHECK (pct BETWEEN 1 AND 100),
    granted billing.finite NOT NULL CONSTRAINT credit_alerts_granted_positive CHECK (granted > 0),
    grants text[] NOT NULL,
    threshold billing.finite NOT NULL,
    balance billing.finite NOT NULL,
    crossed_at timestamptz NOT NULL,
    crossed_nanos smallint NOT NULL DEFAULT 0
        CONSTRAINT credit_alerts_nanos_range CHECK (crossed_nanos BETWEEN 0 AND 999),
    event_id text NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- The alert check reads the sent alerts of a batch's accounts.
CREATE INDEX credit_alerts_account ON billing.credit_alerts (account_id);
CREATE TRIGGER credit_alerts_append_only BEFORE UPDATE OR DELETE ON billing.credit_alerts
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER credit_alerts_no_truncate BEFORE TRUNCATE ON billing.credit_alerts
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();

-- The runtime role appends (billingd, in the batch's transaction) and reads.
GRANT SELECT, INSERT ON billing.credit_alerts TO billing_app;
