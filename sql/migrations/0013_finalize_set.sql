-- 0013_finalize_set.sql - number a batch of drafts in one statement
-- (issue 28: `billing close --finalize` of 100 000 drafts took ~40 s).
--
-- `billing close --finalize` called billing.finalize_invoice once per
-- draft: a row lock, two sums, an UPDATE of the series row and one of the
-- invoice (each with its trigger), so 100 000 drafts were half a million
-- statements inside PostgreSQL. billing.finalize_invoices numbers a batch
-- of drafts set-based: one pick (advisory locks in the order a close
-- takes them), one reconcile query, one series UPDATE per series and one
-- UPDATE of all the batch's invoices.
--
-- The numbers are the ones finalize_invoice gave: per series, in the
-- order of account_id, from the series' next number on, gapless. The
-- guards of 0001/0005 allowed a series to move by one only and an invoice
-- to take only the number just handed out; a block of numbers taken in
-- one go is now recorded in billing.invoice_number_blocks, which only the
-- owner (and so only the SECURITY DEFINER functions) can write, and both
-- guards accept a move, or a number, that a block of the current
-- transaction covers. The blocks are kept, append-only, as a record of
-- which transaction took which numbers.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- The numbers [first_number, last_number] of @series handed out at once
-- by transaction @xact (txid_current()), at @created_at.
CREATE TABLE billing.invoice_number_blocks (
    xact bigint NOT NULL,
    series billing.ident NOT NULL REFERENCES billing.invoice_series (series),
    first_number bigint NOT NULL,
    last_number bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (xact, series, first_number),
    CONSTRAINT invoice_number_blocks_order CHECK (last_number >= first_number)
);
REVOKE ALL ON billing.invoice_number_blocks FROM PUBLIC;
-- Read by the guards, which run as whoever updates.
GRANT SELECT ON billing.invoice_number_blocks TO billing_app;

-- A record of numbers handed out is history: no UPDATE, DELETE or
-- TRUNCATE (0010's path for a superuser in maintenance aside).
CREATE TRIGGER invoice_number_blocks_append_only
    BEFORE UPDATE OR DELETE ON billing.invoice_number_blocks
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER invoice_number_blocks_no_truncate BEFORE TRUNCATE ON billing.invoice_number_blocks
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();

-- True if the current transaction recorded the block of @p_series that
-- starts at @p_first and ends at @p_next - 1: a move of the series from
-- @p_first to @p_next that finalize_invoices made.
CREATE FUNCTION billing.invoice_number_block_taken(p_series text, p_first bigint, p_next bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM billing.invoice_number_blocks b
                   WHERE b.xact = txid_current() AND b.series = p_series
                   AND b.first_number = p_first AND b.last_number = p_next - 1)
$$;

-- billing.invoice_series_guard, replacing 0001's: a series moves by one,
-- or by exactly the block its transaction recorded.
CREATE OR REPLACE FUNCTION billing.invoice_series_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.series <> OLD.series
       OR (NEW.next_number <> OLD.next_number + 1
           AND NOT billing.invoice_number_block_taken(OLD.series, OLD.next_number,
                                                      NEW.next_number)) THEN
        PERFORM billing.violation('invoice_series_gapless', TG_TABLE_NAME,
            format('invoice series %s: numbers only advance one at a time', OLD.series));
    END IF;
    RETURN NEW;
END
$$;

-- billing.invoices_guard, replacing 0005's, whose rules it keeps. One
-- change: a draft finalized with a number of its transaction's block
-- (billing.finalize_invoices, which reconciled the whole batch's lines
-- and credits in one query before) passes without the per-row sums.
CREATE OR REPLACE FUNCTION billing.invoices_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_next bigint;
    v_in_block boolean;
    v_lines numeric;
    v_credits numeric;
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
    IF NEW.status = 'finalized' THEN
        -- One query per row: finalize_invoices runs this for every draft.
        SELECT s.next_number,
               NEW.number IS NOT NULL AND NEW.number <> s.next_number - 1
               AND EXISTS (SELECT 1 FROM billing.invoice_number_blocks b
                           WHERE b.xact = txid_current() AND b.series = s.series
                           AND b.last_number = s.next_number - 1
                           AND NEW.number BETWEEN b.first_number AND b.last_number)
            INTO v_next, v_in_block
            FROM billing.invoice_series s WHERE s.series = NEW.series;
        IF v_in_block THEN
            RETURN NEW;
        ELSIF NEW.number IS DISTINCT FROM v_next - 1 THEN
            PERFORM billing.violation('invoices_number_from_series', TG_TABLE_NAME,
                format('invoice %s: number %s was not just assigned by series %s',
                       OLD.id, NEW.number, NEW.series));
        END IF;
        SELECT coalesce(sum(amount), 0) INTO v_lines
            FROM billing.invoice_lines WHERE invoice_id = NEW.id;
        SELECT coalesce(sum(amount), 0) INTO v_credits
            FROM billing.invoice_credits WHERE invoice_id = NEW.id;
        IF v_lines <> NEW.subtotal OR v_credits <> NEW.credits THEN
            PERFORM billing.violation('invoices_lines_reconcile', TG_TABLE_NAME,
                format('invoice %s: subtotal %s and credits %s do not match lines %s and credits %s',
                       NEW.id, NEW.subtotal, NEW.credits, v_lines, v_credits), '23514');
        END IF;
    END IF;
    RETURN NEW;
END
$$;

-- billing.finalize_invoices: number and freeze up to @p_limit drafts of
-- @p_month (kind 'invoice') whose period ended @p_grace seconds ago or
-- more, the first by account_id. Returns how many drafts it picked and
-- how many of those it numbered (another finalizer may have numbered the
-- rest while we waited for their locks); the caller repeats while it
-- picks any.
--
-- Locks, in order: the picked accounts' advisory locks in the hash order
-- `billing close` takes them (a close rewriting one of the drafts
-- finishes first, a close that starts later sees the draft finalized);
-- the invoice rows in account order; the series rows in series order.
-- The batch is bounded because advisory locks live in the shared lock
-- table until commit (max_locks_per_transaction).
--
-- Gapless as finalize_invoice: each series row stays locked until the
-- caller commits; a rollback returns the block with it.
CREATE FUNCTION billing.finalize_invoices(p_month date, p_grace bigint, p_limit integer,
                                          OUT picked bigint, OUT numbered bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ids bigint[];
    v_bad record;
    v_series record;
    v_first bigint;
BEGIN
    SELECT count(*), array_agg(p2.id) INTO picked, v_ids
        FROM (SELECT p1.id, pg_advisory_xact_lock(p1.k)
              FROM (SELECT p0.id, p0.k FROM (
                        SELECT i.id, hashtextextended(i.account_id, 7091318301203063141) AS k
                        FROM billing.invoices i
                        WHERE i.month = p_month AND i.kind = 'invoice' AND i.status = 'draft'
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
    -- The lines check finalize_invoice made per draft, for the batch at once
    -- (each draft's lines and credits by their primary keys; OFFSET 0 keeps
    -- the drafts found by id, not by walking the account index for the
    -- ORDER BY); the first draft (in numbering order) that fails names itself.
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

REVOKE ALL ON FUNCTION billing.finalize_invoices(date, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION billing.finalize_invoices(date, bigint, integer) TO billing_app;
