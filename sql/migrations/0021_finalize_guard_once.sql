-- 0021_finalize_guard_once.sql - the number of a finalized draft checked
-- once per statement instead of once per row (issue 28: `billing close
-- --finalize` of 100 000 drafts in <= 5 s).
--
-- 0013 numbers a batch of 500 drafts in one UPDATE, but the invoices guard
-- (a plpgsql row trigger) still ran one query per draft to find the
-- transaction's block of numbers: a quarter of the numbering's time at
-- 100 000 drafts, and, because that query scanned invoice_number_blocks
-- (one row per batch ever numbered) for every draft, superlinear in the
-- drafts (1 M drafts took 20 times as long as 100 000).
--
-- Now the row trigger does not fire for the one change a finalization
-- makes (a draft becoming 'finalized', id, account and kind unchanged: its
-- WHEN clause, evaluated without calling plpgsql), and an AFTER UPDATE
-- statement trigger checks every such row of the statement at once from
-- its transition tables, with the same rules and the same violations as
-- before: the number is of a block of the current transaction (and the
-- series stands right after that block), or it is the number just taken
-- from the series (`finalize_invoice`), in which case the lines and
-- applied credits must add up to the invoice's subtotal and credits.
-- Every other UPDATE, and every DELETE, goes through the row guard as
-- before.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- billing.invoices_guard, replacing 0013's without its 'finalized' branch:
-- the trigger below no longer calls it for a finalization.
CREATE OR REPLACE FUNCTION billing.invoices_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'finalized' AND TG_OP = 'UPDATE' AND NEW.status = 'void'
       AND (NEW.id, NEW.account_id, NEW.currency, NEW.kind, NEW.corrects_invoice_id, NEW.month,
            NEW.period_start, NEW.period_end, NEW.series, NEW.number, NEW.subtotal, NEW.credits,
            NEW.returned, NEW.account_credit, NEW.carried, NEW.account_credit_left,
            NEW.tax_rate, NEW.tax, NEW.total, NEW.created_at, NEW.finalized_at, NEW.content_hash)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.account_id, OLD.currency, OLD.kind, OLD.corrects_invoice_id, OLD.month,
            OLD.period_start, OLD.period_end, OLD.series, OLD.number, OLD.subtotal, OLD.credits,
            OLD.returned, OLD.account_credit, OLD.carried, OLD.account_credit_left,
            OLD.tax_rate, OLD.tax, OLD.total, OLD.created_at, OLD.finalized_at, OLD.content_hash)
    THEN
        RETURN NEW;
    END IF;
    IF OLD.status <> 'draft' THEN
        PERFORM billing.violation('invoices_finalized_immutable', TG_TABLE_NAME,
            format('invoice %s is %s: %s refused', OLD.id, OLD.status, TG_OP));
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF NEW.id <> OLD.id OR NEW.account_id <> OLD.account_id OR NEW.kind <> OLD.kind THEN
        PERFORM billing.violation('invoices_identity', TG_TABLE_NAME,
            format('invoice %s: id, account and kind never change', OLD.id));
    END IF;
    -- A draft may become 'finalized' only with the identity kept, which the
    -- trigger's WHEN clause sends to invoices_finalized_numbers instead.
    RETURN NEW;
END
$$;

-- The row guard, as before but for a finalization (its own trigger for
-- DELETE: a DELETE trigger's WHEN cannot name NEW).
DROP TRIGGER invoices_finalized_immutable ON billing.invoices;
CREATE TRIGGER invoices_finalized_immutable BEFORE UPDATE ON billing.invoices
    FOR EACH ROW
    WHEN (OLD.status <> 'draft' OR NEW.status <> 'finalized' OR NEW.id <> OLD.id
          OR NEW.account_id <> OLD.account_id OR NEW.kind <> OLD.kind)
    EXECUTE FUNCTION billing.invoices_guard();
CREATE TRIGGER invoices_finalized_immutable_delete BEFORE DELETE ON billing.invoices
    FOR EACH ROW EXECUTE FUNCTION billing.invoices_guard();

-- The finalizations of one UPDATE statement, checked at once: the drafts
-- of @old_rows that are 'finalized' in @new_rows (same id). The first
-- offending row, by series and number, names itself.
CREATE FUNCTION billing.invoices_finalize_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_bad record;
BEGIN
    -- The finalized drafts whose number no block of this transaction
    -- covers (a block counts while its series stands right after it: the
    -- block this transaction took last); the blocks are read once, and a
    -- batch of finalize_invoices leaves none. Each left must carry the
    -- number its series handed out last (finalize_invoice), and its lines
    -- and applied credits must add up.
    WITH cur AS MATERIALIZED (
        SELECT b.series, b.first_number, b.last_number
        FROM billing.invoice_number_blocks b
        JOIN billing.invoice_series s ON s.series = b.series
                                      AND b.last_number = s.next_number - 1
        WHERE b.xact = txid_current()),
    f AS MATERIALIZED (
        SELECT n.id, n.number, n.series, n.subtotal, n.credits
        FROM new_rows n JOIN old_rows o ON o.id = n.id AND o.status = 'draft'
        WHERE n.status = 'finalized'
        AND NOT EXISTS (SELECT 1 FROM cur WHERE cur.series = n.series
                        AND n.number BETWEEN cur.first_number AND cur.last_number))
    SELECT f.id, f.number, f.series, f.subtotal, f.credits,
           f.number IS DISTINCT FROM s.next_number - 1 AS not_last,
           coalesce(l.s, 0) AS lines, coalesce(c.s, 0) AS creds
        INTO v_bad
        FROM f
        LEFT JOIN billing.invoice_series s ON s.series = f.series
        LEFT JOIN LATERAL (SELECT sum(x.amount) AS s FROM billing.invoice_lines x
                           WHERE x.invoice_id = f.id) l ON true
        LEFT JOIN LATERAL (SELECT sum(x.amount) AS s FROM billing.invoice_credits x
                           WHERE x.invoice_id = f.id) c ON true
        WHERE f.number IS DISTINCT FROM s.next_number - 1
        OR coalesce(l.s, 0) <> f.subtotal OR coalesce(c.s, 0) <> f.credits
        ORDER BY not_last DESC, f.series, f.number LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    ELSIF v_bad.not_last THEN
        PERFORM billing.violation('invoices_number_from_series', TG_TABLE_NAME,
            format('invoice %s: number %s was not just assigned by series %s',
                   v_bad.id, v_bad.number, v_bad.series));
    END IF;
    PERFORM billing.violation('invoices_lines_reconcile', TG_TABLE_NAME,
        format('invoice %s: subtotal %s and credits %s do not match lines %s and credits %s',
               v_bad.id, v_bad.subtotal, v_bad.credits, v_bad.lines, v_bad.creds), '23514');
    RETURN NULL;
END
$$;
CREATE TRIGGER invoices_finalized_numbers AFTER UPDATE ON billing.invoices
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION billing.invoices_finalize_guard();

-- billing.finalize_invoices, as 0013's but for one thing: it picks the
-- drafts of accounts after @p_after only, and says in @last_account the
-- last account it picked, for the caller to pass as @p_after next time.
-- 0013's pick walked the month's open-draft index from its first account,
-- over the entries of every draft numbered so far in the run (dead until
-- a vacuum), so each batch cost more than the one before. '' picks from
-- the first account (a caller ends with such a pass, for drafts whose
-- grace ended during the run).
CREATE FUNCTION billing.finalize_invoices(p_month date, p_grace bigint, p_limit integer,
                                          p_after text, OUT picked bigint,
                                          OUT numbered bigint, OUT last_account text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ids bigint[];
    v_bad record;
    v_series record;
    v_first bigint;
BEGIN
    SELECT count(*), array_agg(p2.id), max(p2.account_id) INTO picked, v_ids, last_account
        FROM (SELECT p1.id, p1.account_id, pg_advisory_xact_lock(p1.k)
              FROM (SELECT p0.id, p0.account_id, p0.k FROM (
                        SELECT i.id, i.account_id,
                               hashtextextended(i.account_id, 7091318301203063141) AS k
                        FROM billing.invoices i
                        WHERE i.month = p_month AND i.kind = 'invoice' AND i.status = 'draft'
                        AND i.account_id > p_after
                        AND i.period_end + make_interval(secs => p_grace) <= now()
                        ORDER BY i.account_id LIMIT p_limit) p0
                    ORDER BY p0.k OFFSET 0) p1) p2;
    numbered := 0;
    IF picked = 0 THEN
        RETURN;
    END IF;
    -- Still drafts once the locks are held, row-locked in account order.
    SELECT array_agg(s.id ORDER BY s.account_id) INTO v_ids
        FROM (SELECT i.id, i.account_id FROM billing.invoices i
              WHERE i.id = ANY (v_ids) AND i.status = 'draft'
              ORDER BY i.account_id FOR UPDATE) s;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    -- The lines check, for the batch at once (see 0013).
    SELECT r.id, r.subtotal, r.credits, r.lines, r.creds INTO v_bad
        FROM (SELECT i.id, i.account_id, i.subtotal, i.credits,
                     coalesce(l.s, 0) AS lines, coalesce(c.s, 0) AS creds
              FROM billing.invoices i
              LEFT JOIN LATERAL (SELECT sum(x.amount) AS s FROM billing.invoice_lines x
                                 WHERE x.invoice_id = i.id) l ON true
              LEFT JOIN LATERAL (SELECT sum(x.amount) AS s FROM billing.invoice_credits x
                                 WHERE x.invoice_id = i.id) c ON true
              WHERE i.id = ANY (v_ids) OFFSET 0) r
        WHERE r.lines <> r.subtotal OR r.creds <> r.credits
        ORDER BY r.account_id LIMIT 1;
    IF FOUND THEN
        PERFORM billing.violation('invoices_lines_reconcile', 'invoices',
            format('invoice %s: subtotal %s and credits %s do not match lines %s and credits %s',
                   v_bad.id, v_bad.subtotal, v_bad.credits, v_bad.lines, v_bad.creds), '23514');
    END IF;
    FOR v_series IN SELECT i.series, count(*) AS n FROM billing.invoices i
                    WHERE i.id = ANY (v_ids) GROUP BY i.series ORDER BY i.series LOOP
        SELECT s.next_number INTO v_first FROM billing.invoice_series s
            WHERE s.series = v_series.series FOR UPDATE;
        INSERT INTO billing.invoice_number_blocks (xact, series, first_number, last_number)
            VALUES (txid_current(), v_series.series, v_first, v_first + v_series.n - 1);
        UPDATE billing.invoice_series SET next_number = next_number + v_series.n
            WHERE series = v_series.series;
    END LOOP;
    UPDATE billing.invoices i
        SET status = 'finalized', number = b.first_number + n.rn - 1, finalized_at = now(),
            updated_at = now()
        FROM (SELECT x.id, x.series,
                     row_number() OVER (PARTITION BY x.series ORDER BY x.account_id) AS rn
              FROM billing.invoices x WHERE x.id = ANY (v_ids)) n
        JOIN billing.invoice_series s ON s.series = n.series
        -- The block just taken: the series stands right after it.
        JOIN billing.invoice_number_blocks b ON b.xact = txid_current() AND b.series = n.series
                                               AND b.last_number = s.next_number - 1
        WHERE i.id = n.id;
    GET DIAGNOSTICS numbered = ROW_COUNT;
END
$$;

REVOKE ALL ON FUNCTION billing.finalize_invoices(date, bigint, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION billing.finalize_invoices(date, bigint, integer, text) TO billing_app;

-- 0013's three-argument form, kept for callers of before: the same batch,
-- picked from the first account.
CREATE OR REPLACE FUNCTION billing.finalize_invoices(p_month date, p_grace bigint,
                                                     p_limit integer, OUT picked bigint,
                                                     OUT numbered bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT f.picked, f.numbered FROM billing.finalize_invoices(p_month, p_grace, p_limit, '') f
$$;
