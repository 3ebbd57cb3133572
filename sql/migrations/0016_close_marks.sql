-- 0016_close_marks.sql - a re-close re-rates only the accounts whose
-- inputs changed (issue 28; doc/database.md, "Close marks").
--
--  * close_tallies: per account and bucket, how many raw events are
--    stored and a change counter that only grows (every event inserted or
--    deleted adds one). Kept by the database itself: statement-level
--    triggers with transition tables on usage_events, one aggregated
--    upsert per statement (rows sorted, so concurrent writers lock tally
--    rows in one order), so that no writer (billingd, `billing ingest`,
--    psql) can forget it. A bucket is the UTC month of start_time less two
--    days: the close of month M reads the events starting before the
--    first of M+1 plus two days (billing/close.c), which are exactly the
--    buckets up to M.
--  * close_marks: per account and month, the digest of everything the
--    account's draft was computed from (billing.close_mark_inputs), the
--    invoice the close left for that month, and the figures of the run
--    that a re-close skipping the account still reports (events rated and
--    refused, credit expired). Written in the transaction of the drafts.
--  * billing.close_marks_compare: each account's mark now and whether it
--    equals the stored one.
--
-- Detaching an archived partition fires no trigger: run `billing close
-- --full` after archiving (doc/operations.md).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

CREATE FUNCTION billing.close_bucket(p_start timestamptz) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN date_trunc('month', (p_start AT TIME ZONE 'UTC') - interval '2 days')::date;

CREATE TABLE billing.close_tallies (
    account_id text NOT NULL,
    bucket date NOT NULL,
    events bigint NOT NULL CONSTRAINT close_tallies_events_nonnegative CHECK (events >= 0),
    changes bigint NOT NULL CONSTRAINT close_tallies_changes_nonnegative CHECK (changes >= 0),
    PRIMARY KEY (account_id, bucket)
);
GRANT SELECT ON billing.close_tallies TO billing_app;

CREATE FUNCTION billing.close_tallies_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO billing.close_tallies AS t (account_id, bucket, events, changes)
        SELECT account_id, billing.close_bucket(start_time), count(*), count(*)
        FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (account_id, bucket) DO UPDATE
        SET events = t.events + EXCLUDED.events, changes = t.changes + EXCLUDED.changes;
    RETURN NULL;
END
$$;

CREATE FUNCTION billing.close_tallies_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO billing.close_tallies AS t (account_id, bucket, events, changes)
        SELECT account_id, billing.close_bucket(start_time), 0, count(*)
        FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (account_id, bucket) DO UPDATE
        SET events = greatest(t.events - EXCLUDED.changes, 0), changes = t.changes + EXCLUDED.changes;
    RETURN NULL;
END
$$;

CREATE TRIGGER usage_events_close_tally_insert AFTER INSERT ON billing.usage_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.close_tallies_insert();
CREATE TRIGGER usage_events_close_tally_delete AFTER DELETE ON billing.usage_events
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.close_tallies_delete();

INSERT INTO billing.close_tallies (account_id, bucket, events, changes)
    SELECT account_id, billing.close_bucket(start_time), count(*), count(*)
    FROM billing.usage_events GROUP BY 1, 2;

CREATE TABLE billing.close_marks (
    account_id text NOT NULL,
    month date NOT NULL CONSTRAINT close_marks_month_first_day CHECK (extract(day FROM month) = 1),
    mark text NOT NULL CONSTRAINT close_marks_mark_format CHECK (mark ~ '^[0-9a-f]{32}$'),
    -- The period's invoice (draft or finalized) the close left, if any.
    invoice_id bigint,
    events bigint NOT NULL CONSTRAINT close_marks_events_nonnegative CHECK (events >= 0),
    rejected bigint NOT NULL CONSTRAINT close_marks_rejected_nonnegative CHECK (rejected >= 0),
    expired billing.finite NOT NULL CONSTRAINT close_marks_expired_nonnegative CHECK (expired >= 0),
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, month)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON billing.close_marks TO billing_app;

-- What every account's draft of @p_month depends on besides its events,
-- shared by all accounts: the code computing it (@p_version), the price
-- book and every version, rate and fee of it (any change re-rates every
-- account of the book), the plans.
CREATE FUNCTION billing.close_catalog_digest(p_book text, p_version text) RETURNS text
LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT md5(concat_ws('|', p_version, p_book,
        (SELECT concat_ws(',', b.currency, b.rounding, b.xmin) FROM billing.price_books b
          WHERE b.id = p_book),
        (SELECT string_agg(v.id::text, ',' ORDER BY v.id) FROM billing.price_versions v
          WHERE v.book_id = p_book),
        (SELECT count(*) FROM billing.rates r JOIN billing.price_versions v ON v.id = r.version_id
          WHERE v.book_id = p_book),
        (SELECT count(*) FROM billing.plan_fees f JOIN billing.price_versions v ON v.id = f.version_id
          WHERE v.book_id = p_book),
        (SELECT string_agg(p.id || ':' || p.xmin, ',' ORDER BY p.id) FROM billing.plans p)));
END;

-- Each account in the currency of @p_book (or with @p_drafts_only, those with an open
-- draft of @p_month), in id order: its mark for the close of @p_month and
-- whether it equals the stored one (and the period's invoice is still the
-- one that close left). The mark is the md5 of the catalog digest, the
-- account row (zone, tax rate; xmin: any update), the sum of its event
-- change counters in the buckets up to @p_month, its subscriptions and
-- grants (xmin: a cancellation), and every invoice and credit note of the
-- account but the period's own invoice (other months' drafts,
-- finalizations, voids, refunds: history and late-usage adjustments come
-- from them).
CREATE FUNCTION billing.close_marks_compare(p_book text, p_month date, p_version text,
                                            p_drafts_only boolean)
RETURNS TABLE (account_id text, mark text, same boolean)
LANGUAGE sql STABLE
BEGIN ATOMIC
    WITH cat AS (SELECT billing.close_catalog_digest(p_book, p_version) AS d,
                        (SELECT b.currency FROM billing.price_books b WHERE b.id = p_book) AS cur),
    acc AS (SELECT a.id, concat_ws(',', a.xmin, a.time_zone, a.tax_rate, a.status) AS r
            FROM billing.accounts a CROSS JOIN cat
            WHERE a.currency = cat.cur
              AND (NOT p_drafts_only OR EXISTS (SELECT 1 FROM billing.invoices d
                   WHERE d.account_id = a.id AND d.month = p_month AND d.kind = 'invoice'
                     AND d.status = 'draft'))),
    t AS (SELECT t.account_id, sum(t.changes) AS c FROM billing.close_tallies t
          WHERE t.bucket <= p_month GROUP BY 1),
    s AS (SELECT s.account_id, string_agg(s.id || ':' || s.xmin, ',' ORDER BY s.id) AS c
          FROM billing.subscriptions s GROUP BY 1),
    g AS (SELECT g.account_id, string_agg(g.id || ':' || g.xmin, ',' ORDER BY g.id) AS c
          FROM billing.credit_grants g GROUP BY 1),
    i AS (SELECT i.account_id, string_agg(i.id || ':' || i.status || ':' || i.xmin, ','
                                          ORDER BY i.id) AS c
          FROM billing.invoices i
          WHERE i.month <> p_month OR i.kind <> 'invoice'
          GROUP BY 1),
    cur AS (SELECT i.account_id, i.id FROM billing.invoices i
            WHERE i.month = p_month AND i.kind = 'invoice' AND i.status IN ('draft', 'finalized')),
    m AS (SELECT acc.id, md5(concat_ws('|', cat.d, p_month, acc.id, acc.r, coalesce(t.c, 0),
                                       coalesce(s.c, ''), coalesce(g.c, ''), coalesce(i.c, ''))) AS mark
          FROM acc CROSS JOIN cat
          LEFT JOIN t ON t.account_id = acc.id
          LEFT JOIN s ON s.account_id = acc.id
          LEFT JOIN g ON g.account_id = acc.id
          LEFT JOIN i ON i.account_id = acc.id)
    SELECT m.id, m.mark, coalesce(k.mark = m.mark AND k.invoice_id IS NOT DISTINCT FROM cur.id, false)
    FROM m
    LEFT JOIN billing.close_marks k ON k.account_id = m.id AND k.month = p_month
    LEFT JOIN cur ON cur.account_id = m.id
    ORDER BY m.id;
END;
-- History guards (as 0010): the tallies only grow (a truncated or deleted
-- tally could climb back to a sum a stored mark holds and hide a change),
-- and the marks go with the drafts they describe.
CREATE TRIGGER close_tallies_no_truncate BEFORE TRUNCATE ON billing.close_tallies
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER close_tallies_no_delete BEFORE DELETE ON billing.close_tallies
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER close_marks_no_truncate BEFORE TRUNCATE ON billing.close_marks
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();
GRANT EXECUTE ON FUNCTION billing.close_catalog_digest(text, text) TO billing_app;
GRANT EXECUTE ON FUNCTION billing.close_marks_compare(text, date, text, boolean) TO billing_app;
