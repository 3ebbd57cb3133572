-- 0012_refunds.sql - account credit refunded to the payment method out of
-- band (issue 23: "a policy question a customer will ask"; doc/pricing.md,
-- "Account credit: keep it or refund it").
--
-- A refund larger than a month's charges becomes account credit (0005's
-- invoices.carried), which only later charges spend. The operator may now
-- choose, per finalized invoice, to pay some or all of that account credit
-- back to the customer's payment method outside the system (a bank
-- transfer, a card refund made at the processor): `billing invoice refund`
-- records it as a credit note (series CN-YYYY) that references the
-- invoice, states the amount, method and reason, and takes the amount off
-- the account credit, so that later months do not also spend it.
--
--  * billing.invoice_refunds: one row per such credit note, keyed per
--    account by the operator's reference (a retried command finds its
--    row and records nothing twice); written only by billing.refund_invoice,
--    never changed or deleted;
--  * billing.refund_invoice: checks and records one refund (below);
--  * the account credit a later close starts from is the last finalized
--    month's account_credit_left less what was refunded against that
--    month (store/invoices.c, SQL_CREDIT_HISTORY).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

CREATE TABLE billing.invoice_refunds (
    credit_note_id bigint PRIMARY KEY REFERENCES billing.invoices (id),
    invoice_id bigint NOT NULL REFERENCES billing.invoices (id),
    account_id billing.ident NOT NULL REFERENCES billing.accounts (id),
    -- The account credit paid back (before tax, as account credit is),
    -- the tax on it at the invoice's rate, and what the customer gets.
    amount billing.finite NOT NULL
        CONSTRAINT invoice_refunds_amount_positive CHECK (amount > 0),
    tax billing.finite NOT NULL CONSTRAINT invoice_refunds_tax_nonnegative CHECK (tax >= 0),
    total billing.finite NOT NULL,
    method text NOT NULL
        CONSTRAINT invoice_refunds_method_known CHECK (method IN ('out_of_band')),
    reason text NOT NULL
        CONSTRAINT invoice_refunds_reason_length CHECK (octet_length(reason) BETWEEN 1 AND 1024),
    reference text NOT NULL
        CONSTRAINT invoice_refunds_reference_length
            CHECK (octet_length(reference) BETWEEN 1 AND 256),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT invoice_refunds_reference_unique UNIQUE (account_id, reference),
    CONSTRAINT invoice_refunds_total_reconciles CHECK (total = amount + tax)
);
CREATE INDEX invoice_refunds_invoice ON billing.invoice_refunds (invoice_id);
GRANT SELECT ON billing.invoice_refunds TO billing_app;

-- Money paid out is history: no UPDATE, DELETE or TRUNCATE (0010's path
-- for a superuser in maintenance aside).
CREATE TRIGGER invoice_refunds_append_only BEFORE UPDATE OR DELETE ON billing.invoice_refunds
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_unless_maintenance();
CREATE TRIGGER invoice_refunds_no_truncate BEFORE TRUNCATE ON billing.invoice_refunds
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();

-- billing.round_minor: nonnegative @p_value rounded to @p_digits decimals
-- with a price book's rounding mode (0001's price_books.rounding), as
-- libbilling rounds tax; for a nonnegative value floor is down and
-- ceiling is up.
CREATE FUNCTION billing.round_minor(p_value numeric, p_digits integer, p_mode text)
RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN round(CASE
    WHEN p_mode IN ('down', 'floor') THEN trunc(p_value, p_digits)
    WHEN p_mode IN ('up', 'ceiling') THEN ceil(p_value * 10::numeric ^ p_digits)
                                          / 10::numeric ^ p_digits
    WHEN p_mode = 'half-even'
         AND p_value * 10::numeric ^ p_digits - trunc(p_value * 10::numeric ^ p_digits) = 0.5
        THEN (trunc(p_value * 10::numeric ^ p_digits)
              + mod(trunc(p_value * 10::numeric ^ p_digits), 2)) / 10::numeric ^ p_digits
    ELSE p_value
END, p_digits);

-- billing.refund_invoice: record that @p_amount of the account credit left
-- after finalized invoice @p_invoice was refunded to the payment method
-- out of band, for @p_reason, under the operator's @p_reference (unique per
-- account), with the tax on it at the invoice's tax rate (rounded as the
-- price book that priced the invoice rounds; half-up when none did): the
-- customer paid that tax on the refunded fee, and account credit, an
-- amount before tax, would have given it back as tax not charged later.
-- Issues in series @p_cn_series a credit note referencing the
-- invoice: no lines, totals zero, account_credit_left the account credit
-- after the refund. Returns the credit note's id; a retry with the same
-- reference, invoice and amount returns the first one's id and records
-- nothing. Refuses (integrity_constraint_violation, constraint named):
--  * an invoice that is not a finalized invoice (invoice_refunds_finalized_only);
--  * a month that is not the account's last finalized one: the account
--    credit now is the later month's (invoice_refunds_latest_month);
--  * an amount not positive or finer than the currency's minor unit
--    (invoice_refunds_amount_exact);
--  * more than the account credit left less earlier refunds of the month
--    (invoice_refunds_within_account_credit);
--  * a reference already used for another invoice or amount
--    (invoice_refunds_reference_reused).
-- Takes the account's advisory lock as `billing close` does, so that a
-- close of the next month sees the refund or runs before it entirely.
CREATE FUNCTION billing.refund_invoice(p_invoice bigint, p_amount numeric, p_reason text,
                                       p_reference text, p_cn_series text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_inv billing.invoices%ROWTYPE;
    v_old billing.invoice_refunds%ROWTYPE;
    v_digits smallint;
    v_refunded numeric;
    v_available numeric;
    v_later date;
    v_mode text;
    v_tax numeric;
    v_zero numeric;
    v_cn bigint;
    v_name text; -- the invoice as messages name it: its number, else its id
BEGIN
    SELECT * INTO v_inv FROM billing.invoices WHERE id = p_invoice;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'invoice % does not exist', p_invoice USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(v_inv.account_id, 7091318301203063141));
    SELECT * INTO v_inv FROM billing.invoices WHERE id = p_invoice FOR UPDATE;
    SELECT coalesce(billing.invoice_number_text(s.prefix, v_inv.number), 'id ' || p_invoice)
        INTO v_name FROM billing.invoice_series s WHERE s.series = v_inv.series;
    SELECT * INTO v_old FROM billing.invoice_refunds
        WHERE account_id = v_inv.account_id AND reference = p_reference;
    IF FOUND THEN
        IF v_old.invoice_id = p_invoice AND v_old.amount = p_amount THEN
            RETURN v_old.credit_note_id;
        END IF;
        PERFORM billing.violation('invoice_refunds_reference_reused', 'invoice_refunds',
            format('invoice %s: reference %s of account %s was already used for a refund of '
                   '%s on invoice %s', v_name, p_reference, v_inv.account_id, v_old.amount,
                   (SELECT billing.invoice_number_text(s.prefix, o.number)
                        FROM billing.invoices o JOIN billing.invoice_series s
                        ON s.series = o.series WHERE o.id = v_old.invoice_id)));
    END IF;
    IF v_inv.status <> 'finalized' OR v_inv.kind <> 'invoice' THEN
        PERFORM billing.violation('invoice_refunds_finalized_only', 'invoices',
            format('invoice %s is a %s %s: only a finalized invoice''s account credit can be '
                   'refunded', v_name, v_inv.status, replace(v_inv.kind, '_', ' ')));
    END IF;
    SELECT max(month) INTO v_later FROM billing.invoices
        WHERE account_id = v_inv.account_id AND kind = 'invoice' AND status = 'finalized'
        AND month > v_inv.month;
    IF v_later IS NOT NULL THEN
        PERFORM billing.violation('invoice_refunds_latest_month', 'invoices',
            format('invoice %s is of %s, but account %s has a finalized invoice of %s: refund '
                   'the account credit left after that one', v_name,
                   to_char(v_inv.month, 'YYYY-MM'), v_inv.account_id,
                   to_char(v_later, 'YYYY-MM')));
    END IF;
    v_digits := billing.currency_digits(v_inv.currency);
    IF p_amount IS NULL OR p_amount <= 0 OR p_amount <> round(p_amount, v_digits) THEN
        PERFORM billing.violation('invoice_refunds_amount_exact', 'invoice_refunds',
            format('invoice %s: refund amount %s must be positive, in whole minor units of %s '
                   '(%s decimals)', v_name, p_amount, v_inv.currency, v_digits), '23514');
    END IF;
    SELECT coalesce(sum(r.amount), 0) INTO v_refunded
        FROM billing.invoice_refunds r JOIN billing.invoices j ON j.id = r.invoice_id
        WHERE r.account_id = v_inv.account_id AND j.month = v_inv.month;
    v_available := v_inv.account_credit_left - v_refunded;
    IF p_amount > v_available THEN
        PERFORM billing.violation('invoice_refunds_within_account_credit', 'invoice_refunds',
            format('invoice %s: refund of %s %s exceeds the account credit available, %s '
                   '(%s left after the invoice, %s refunded already)', v_name, p_amount,
                   v_inv.currency, greatest(v_available, 0), v_inv.account_credit_left,
                   v_refunded), '23514');
    END IF;
    SELECT coalesce((SELECT b.rounding FROM billing.invoice_lines l
                         JOIN billing.price_versions v ON v.id = l.price_version_id
                         JOIN billing.price_books b ON b.id = v.book_id
                         WHERE l.invoice_id = p_invoice ORDER BY l.line_no LIMIT 1),
                    (SELECT min(b.rounding) FROM billing.price_books b
                         WHERE b.currency = v_inv.currency
                         HAVING count(DISTINCT b.rounding) = 1),
                    'half-up')
        INTO v_mode;
    v_tax := billing.round_minor(p_amount * v_inv.tax_rate, v_digits, v_mode);
    v_zero := round(0::numeric, v_digits); -- "0.00" as the invoices' figures read
    INSERT INTO billing.invoices (account_id, currency, kind, corrects_invoice_id, month,
                                  period_start, period_end, series, subtotal, credits, returned,
                                  account_credit, carried, account_credit_left, tax_rate,
                                  tax, total)
        VALUES (v_inv.account_id, v_inv.currency, 'credit_note', p_invoice, v_inv.month,
                v_inv.period_start, v_inv.period_end, p_cn_series, v_zero, v_zero, v_zero,
                v_zero, v_zero, v_available - p_amount, v_inv.tax_rate, v_zero, v_zero)
        RETURNING id INTO v_cn;
    INSERT INTO billing.invoice_refunds (credit_note_id, invoice_id, account_id, amount, tax,
                                         total, method, reason, reference)
        VALUES (v_cn, p_invoice, v_inv.account_id, p_amount, v_tax, p_amount + v_tax,
                'out_of_band', p_reason, p_reference);
    PERFORM billing.finalize_invoice(v_cn);
    RETURN v_cn;
END
$$;

REVOKE ALL ON FUNCTION billing.refund_invoice(bigint, numeric, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION billing.refund_invoice(bigint, numeric, text, text, text)
    TO billing_app;
