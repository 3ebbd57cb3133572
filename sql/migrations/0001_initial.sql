-- 0001_initial.sql - the billing schema: roles, reference data, catalog,
-- credit, raw events, aggregates, invoices and Kafka positions.
--
-- Applied by `billing db migrate` inside one transaction that also records
-- it in billing.schema_version. Never edit a migration once released: the
-- migrator compares a checksum of this text with the one recorded when it
-- was applied, and refuses to run on a mismatch. Change the schema with a
-- new, higher-numbered file instead.
--
-- Conventions (doc/database.md):
--  * everything lives in schema `billing`, owned by role billing_owner;
--  * money and quantities are NUMERIC (domain billing.finite: no NaN, no
--    infinities), never float, real or money;
--  * instants are timestamptz; raw events keep their nanoseconds in a
--    separate 0..999 column because timestamptz stops at microseconds;
--  * what must never happen is a named constraint or a trigger raising
--    SQLSTATE 23xxx with a constraint name, so that clients can report it.

-- ---------------------------------------------------------------------
-- Roles. They are cluster-wide, so they may exist already (another
-- database of the same cluster, or a DBA who created them): create them
-- only when missing. Creating needs CREATEROLE; without it, have a DBA run
--   CREATE ROLE billing_owner NOLOGIN; CREATE ROLE billing_app NOLOGIN;
--   GRANT billing_owner TO <migrating user>;
-- first (doc/database.md, "Roles").
-- ---------------------------------------------------------------------
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'billing_owner') THEN
        BEGIN
            CREATE ROLE billing_owner NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- created meanwhile by a migrator of another database
        END;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'billing_app') THEN
        BEGIN
            CREATE ROLE billing_app NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, 'billing_owner', 'MEMBER') THEN
        BEGIN
            EXECUTE pg_catalog.format('GRANT billing_owner TO %I', current_user);
        EXCEPTION WHEN unique_violation THEN
            NULL; -- granted meanwhile by a concurrent migrator
        END;
    END IF;
END
$roles$;

-- The schema is created by the migrating user (who needs CREATE on the
-- database) but owned by billing_owner; every object below is created as
-- billing_owner, so that no login role owns anything.
CREATE SCHEMA billing AUTHORIZATION billing_owner;
REVOKE ALL ON SCHEMA billing FROM PUBLIC;
SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

CREATE TABLE billing.schema_version (
    version integer PRIMARY KEY CONSTRAINT schema_version_positive CHECK (version > 0),
    name text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 128),
    checksum text NOT NULL CHECK (checksum ~ '^[0-9a-f]{32}$'),
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by text NOT NULL DEFAULT session_user
);
COMMENT ON TABLE billing.schema_version IS
    'Applied migrations: version, file name, md5 of the file text, when and by whom.';

-- ---------------------------------------------------------------------
-- Domains shared by the tables.
-- ---------------------------------------------------------------------

-- Catalog identifiers (accounts, plans, grants, subscriptions, price
-- versions): 1..128 bytes of printable ASCII without spaces, as
-- libbilling's bl_valid_id accepts.
CREATE DOMAIN billing.ident AS text
    CONSTRAINT ident_printable_1_128 CHECK (octet_length(VALUE) BETWEEN 1 AND 128
                                            AND VALUE !~ '[^!-~]');

-- Event ids and resource ids come from producers: any text of 1..128 bytes.
CREATE DOMAIN billing.event_ident AS text
    CONSTRAINT event_ident_1_128 CHECK (octet_length(VALUE) BETWEEN 1 AND 128);

-- GPU model and region attributes: 0..64 bytes.
CREATE DOMAIN billing.attr AS text
    CONSTRAINT attr_0_64 CHECK (octet_length(VALUE) <= 64);

-- Every amount and quantity. NUMERIC accepts 'NaN' and, since PostgreSQL
-- 14, infinities; none of them is money. NaN sorts above everything, so
-- the two bounds exclude all three.
CREATE DOMAIN billing.finite AS numeric
    CONSTRAINT finite_number CHECK (VALUE > '-Infinity' AND VALUE < 'Infinity');

-- ---------------------------------------------------------------------
-- Generic guards.
-- ---------------------------------------------------------------------

-- billing.violation: raise what every guard below raises: SQLSTATE
-- @p_sqlstate (integrity_constraint_violation unless said), message
-- @p_message, and @p_constraint as the constraint name, which clients
-- report (the store's bs_error.constraint) and tests check.
CREATE FUNCTION billing.violation(p_constraint text, p_table text, p_message text,
                                  p_sqlstate text DEFAULT '23000') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = p_message, ERRCODE = p_sqlstate,
                          CONSTRAINT = p_constraint, TABLE = p_table, SCHEMA = 'billing';
END
$$;

-- billing.refuse_change: a row trigger for append-only tables. Raises
-- integrity_constraint_violation with the trigger's name as the
-- constraint name (the same on every partition of a partitioned table).
CREATE FUNCTION billing.refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM billing.violation(TG_NAME, TG_TABLE_NAME,
                              format('billing.%s is append-only: %s refused', TG_TABLE_NAME, TG_OP));
    RETURN NULL;
END
$$;

-- billing.refuse_truncate: TRUNCATE skips row triggers, so every guarded
-- table also refuses it (removing the trigger is a deliberate DDL step).
CREATE FUNCTION billing.refuse_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM billing.violation(TG_NAME, TG_TABLE_NAME,
                              format('TRUNCATE of billing.%s refused', TG_TABLE_NAME));
    RETURN NULL;
END
$$;

-- ---------------------------------------------------------------------
-- Reference data.
-- ---------------------------------------------------------------------

-- ISO 4217 currencies with their minor-unit digits: the list of
-- libbilling/currency.c (metals and funds without a minor unit left out).
CREATE TABLE billing.currencies (
    code char(3) PRIMARY KEY CONSTRAINT currencies_code_format CHECK (code ~ '^[A-Z]{3}$'),
    digits smallint NOT NULL CONSTRAINT currencies_digits_range CHECK (digits BETWEEN 0 AND 4)
);
INSERT INTO billing.currencies (code, digits) VALUES
    ('AED', 2), ('AFN', 2), ('ALL', 2), ('AMD', 2), ('ANG', 2), ('AOA', 2), ('ARS', 2),
    ('AUD', 2), ('AWG', 2), ('AZN', 2), ('BAM', 2), ('BBD', 2), ('BDT', 2), ('BGN', 2),
    ('BHD', 3), ('BIF', 0), ('BMD', 2), ('BND', 2), ('BOB', 2), ('BOV', 2), ('BRL', 2),
    ('BSD', 2), ('BTN', 2), ('BWP', 2), ('BYN', 2), ('BZD', 2), ('CAD', 2), ('CDF', 2),
    ('CHE', 2), ('CHF', 2), ('CHW', 2), ('CLF', 4), ('CLP', 0), ('CNY', 2), ('COP', 2),
    ('COU', 2), ('CRC', 2), ('CUC', 2), ('CUP', 2), ('CVE', 2), ('CZK', 2), ('DJF', 0),
    ('DKK', 2), ('DOP', 2), ('DZD', 2), ('EGP', 2), ('ERN', 2), ('ETB', 2), ('EUR', 2),
    ('FJD', 2), ('FKP', 2), ('GBP', 2), ('GEL', 2), ('GHS', 2), ('GIP', 2), ('GMD', 2),
    ('GNF', 0), ('GTQ', 2), ('GYD', 2), ('HKD', 2), ('HNL', 2), ('HTG', 2), ('HUF', 2),
    ('IDR', 2), ('ILS', 2), ('INR', 2), ('IQD', 3), ('IRR', 2), ('ISK', 0), ('JMD', 2),
    ('JOD', 3), ('JPY', 0), ('KES', 2), ('KGS', 2), ('KHR', 2), ('KMF', 0), ('KPW', 2),
    ('KRW', 0), ('KWD', 3), ('KYD', 2), ('KZT', 2), ('LAK', 2), ('LBP', 2), ('LKR', 2),
    ('LRD', 2), ('LSL', 2), ('LYD', 3), ('MAD', 2), ('MDL', 2), ('MGA', 2), ('MKD', 2),
    ('MMK', 2), ('MNT', 2), ('MOP', 2), ('MRU', 2), ('MUR', 2), ('MVR', 2), ('MWK', 2),
    ('MXN', 2), ('MXV', 2), ('MYR', 2), ('MZN', 2), ('NAD', 2), ('NGN', 2), ('NIO', 2),
    ('NOK', 2), ('NPR', 2), ('NZD', 2), ('OMR', 3), ('PAB', 2), ('PEN', 2), ('PGK', 2),
    ('PHP', 2), ('PKR', 2), ('PLN', 2), ('PYG', 0), ('QAR', 2), ('RON', 2), ('RSD', 2),
    ('RUB', 2), ('RWF', 0), ('SAR', 2), ('SBD', 2), ('SCR', 2), ('SDG', 2), ('SEK', 2),
    ('SGD', 2), ('SHP', 2), ('SLE', 2), ('SLL', 2), ('SOS', 2), ('SRD', 2), ('SSP', 2),
    ('STN', 2), ('SVC', 2), ('SYP', 2), ('SZL', 2), ('THB', 2), ('TJS', 2), ('TMT', 2),
    ('TND', 3), ('TOP', 2), ('TRY', 2), ('TTD', 2), ('TWD', 2), ('TZS', 2), ('UAH', 2),
    ('UGX', 0), ('USD', 2), ('USN', 2), ('UYI', 0), ('UYU', 2), ('UYW', 4), ('UZS', 2),
    ('VED', 2), ('VES', 2), ('VND', 0), ('VUV', 0), ('WST', 2), ('XAF', 0), ('XCD', 2),
    ('XCG', 2), ('XOF', 0), ('XPF', 0), ('YER', 2), ('ZAR', 2), ('ZMW', 2), ('ZWG', 2);

-- billing.currency_digits: minor digits of a currency, NULL if unknown.
CREATE FUNCTION billing.currency_digits(p_code text) RETURNS smallint
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT digits FROM billing.currencies WHERE code = p_code;
END;

-- billing.valid_time_zone: is @p_zone an IANA zone name this server
-- knows? pg_timezone_names rather than a trial conversion, which would
-- also accept POSIX strings such as 'UTC+3' and abbreviations.
CREATE FUNCTION billing.valid_time_zone(p_zone text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names WHERE name = p_zone);
END;

-- ---------------------------------------------------------------------
-- Accounts.
-- ---------------------------------------------------------------------
CREATE TABLE billing.accounts (
    id billing.ident PRIMARY KEY,
    currency char(3) NOT NULL REFERENCES billing.currencies (code),
    time_zone text NOT NULL DEFAULT 'Asia/Shanghai'
        CONSTRAINT accounts_time_zone_known CHECK (billing.valid_time_zone(time_zone)),
    tax_rate billing.finite NOT NULL DEFAULT 0
        CONSTRAINT accounts_tax_rate_range CHECK (tax_rate >= 0 AND tax_rate <= 1),
    status text NOT NULL DEFAULT 'active'
        CONSTRAINT accounts_status_known CHECK (status IN ('active', 'suspended', 'closed')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- Target of the (account, currency) foreign keys of grants and
    -- invoices: their currency is the account's, by construction.
    CONSTRAINT accounts_id_currency UNIQUE (id, currency)
);

-- ---------------------------------------------------------------------
-- Price books, their versions, rates, plans and plan fees.
--
-- A price version is identified by (book, effective_from). Its rows are
-- never updated or deleted: loading a changed price for an existing
-- effective_from adds a new *revision*, and the highest revision is the
-- one in force from then on; what was rated or invoiced keeps pointing at
-- the revision it used (price_versions.id).
-- ---------------------------------------------------------------------
CREATE TABLE billing.price_books (
    id billing.ident PRIMARY KEY,
    currency char(3) NOT NULL REFERENCES billing.currencies (code),
    rounding text NOT NULL DEFAULT 'half-up'
        CONSTRAINT price_books_rounding_known
        CHECK (rounding IN ('half-up', 'half-even', 'down', 'up', 'floor', 'ceiling')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE billing.price_versions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    book_id billing.ident NOT NULL REFERENCES billing.price_books (id),
    label billing.ident NOT NULL,
    effective_from timestamptz NOT NULL,
    revision integer NOT NULL DEFAULT 1 CONSTRAINT price_versions_revision_positive CHECK (revision >= 1),
    content_hash text NOT NULL CONSTRAINT price_versions_hash_format CHECK (content_hash ~ '^[0-9a-f]{32}$'),
    loaded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT price_versions_unique UNIQUE (book_id, effective_from, revision)
);

-- The revision of each version in force now.
CREATE VIEW billing.current_price_versions AS
    SELECT DISTINCT ON (book_id, effective_from) *
    FROM billing.price_versions
    ORDER BY book_id, effective_from, revision DESC;

CREATE TABLE billing.rates (
    version_id bigint NOT NULL REFERENCES billing.price_versions (id),
    meter text NOT NULL
        CONSTRAINT rates_meter_known CHECK (meter IN ('gpu', 'gpuless', 'storage', 'traffic')),
    model billing.attr NOT NULL,
    region billing.attr NOT NULL,
    price billing.finite NOT NULL CONSTRAINT rates_price_nonnegative CHECK (price >= 0),
    PRIMARY KEY (version_id, meter, model, region)
);

CREATE TABLE billing.plans (
    id billing.ident PRIMARY KEY,
    period text NOT NULL CONSTRAINT plans_period_known CHECK (period IN ('day', 'month')),
    model billing.attr NOT NULL,
    region billing.attr NOT NULL,
    refundable boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE billing.plan_fees (
    version_id bigint NOT NULL REFERENCES billing.price_versions (id),
    plan_id billing.ident NOT NULL REFERENCES billing.plans (id),
    fee billing.finite NOT NULL CONSTRAINT plan_fees_fee_nonnegative CHECK (fee >= 0),
    PRIMARY KEY (version_id, plan_id)
);

CREATE TRIGGER price_versions_append_only BEFORE UPDATE OR DELETE ON billing.price_versions
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER rates_append_only BEFORE UPDATE OR DELETE ON billing.rates
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER plans_append_only BEFORE UPDATE OR DELETE ON billing.plans
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER plan_fees_append_only BEFORE UPDATE OR DELETE ON billing.plan_fees
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();

-- ---------------------------------------------------------------------
-- Subscriptions. Terms are not stored: they follow from start, plan
-- period, term count and the account's time zone by libbilling's calendar
-- rules, and storing them would be a second truth to keep in step.
-- ---------------------------------------------------------------------
CREATE TABLE billing.subscriptions (
    id billing.ident PRIMARY KEY,
    account_id billing.ident NOT NULL REFERENCES billing.accounts (id),
    resource_id billing.ident NOT NULL,
    plan_id billing.ident NOT NULL REFERENCES billing.plans (id),
    start_at timestamptz NOT NULL,
    terms integer NOT NULL CONSTRAINT subscriptions_terms_range CHECK (terms BETWEEN 1 AND 1200),
    cancelled_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT subscriptions_cancel_after_start CHECK (cancelled_at > start_at)
);
CREATE INDEX subscriptions_account ON billing.subscriptions (account_id);

-- A subscription may be cancelled once; nothing else about it changes
-- (that would rewrite what was billed).
CREATE FUNCTION billing.subscriptions_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE'
       OR (NEW.id, NEW.account_id, NEW.resource_id, NEW.plan_id, NEW.start_at, NEW.terms)
          IS DISTINCT FROM (OLD.id, OLD.account_id, OLD.resource_id, OLD.plan_id, OLD.start_at, OLD.terms)
       OR (OLD.cancelled_at IS NOT NULL AND NEW.cancelled_at IS DISTINCT FROM OLD.cancelled_at) THEN
        PERFORM billing.violation('subscriptions_history', TG_TABLE_NAME,
            format('subscription %s: only a first cancellation may change it', OLD.id));
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER subscriptions_history BEFORE UPDATE OR DELETE ON billing.subscriptions
    FOR EACH ROW EXECUTE FUNCTION billing.subscriptions_guard();

-- ---------------------------------------------------------------------
-- Credit: grants (immutable) and the append-only ledger of what happened
-- to them, in minor units (fen for CNY) as integral NUMERIC.
-- ---------------------------------------------------------------------
CREATE TABLE billing.credit_grants (
    id billing.ident PRIMARY KEY,
    account_id billing.ident NOT NULL,
    currency char(3) NOT NULL,
    amount billing.finite NOT NULL CONSTRAINT credit_grants_amount_positive CHECK (amount > 0),
    granted_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    kinds smallint NOT NULL DEFAULT 3
        CONSTRAINT credit_grants_kinds_range CHECK (kinds BETWEEN 1 AND 3),
    priority integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT credit_grants_account_currency FOREIGN KEY (account_id, currency)
        REFERENCES billing.accounts (id, currency),
    CONSTRAINT credit_grants_expiry_after_grant CHECK (expires_at > granted_at),
    CONSTRAINT credit_grants_minor_digits
        CHECK (scale(trim_scale(amount)) <= billing.currency_digits(currency))
);
CREATE INDEX credit_grants_account ON billing.credit_grants (account_id);
CREATE TRIGGER credit_grants_append_only BEFORE UPDATE OR DELETE ON billing.credit_grants
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();

-- Invoices are defined below; the ledger refers to them.
CREATE TABLE billing.invoice_series (
    series billing.ident PRIMARY KEY,
    prefix text NOT NULL DEFAULT '' CONSTRAINT invoice_series_prefix_length CHECK (octet_length(prefix) <= 32),
    next_number bigint NOT NULL DEFAULT 1
        CONSTRAINT invoice_series_next_positive CHECK (next_number >= 1),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO billing.invoice_series (series, prefix) VALUES ('INV', 'INV-'), ('CN', 'CN-');

-- Numbers are handed out one at a time by billing.finalize_invoice; a
-- series never moves backwards, jumps, or disappears.
CREATE FUNCTION billing.invoice_series_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.series <> OLD.series OR NEW.next_number <> OLD.next_number + 1 THEN
        PERFORM billing.violation('invoice_series_gapless', TG_TABLE_NAME,
            format('invoice series %s: numbers only advance one at a time', OLD.series));
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER invoice_series_gapless BEFORE UPDATE OR DELETE ON billing.invoice_series
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_series_guard();

CREATE TABLE billing.invoices (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id billing.ident NOT NULL,
    currency char(3) NOT NULL,
    kind text NOT NULL DEFAULT 'invoice'
        CONSTRAINT invoices_kind_known CHECK (kind IN ('invoice', 'credit_note')),
    corrects_invoice_id bigint REFERENCES billing.invoices (id),
    month date NOT NULL CONSTRAINT invoices_month_first_day CHECK (extract(day FROM month) = 1),
    period_start timestamptz NOT NULL,
    period_end timestamptz NOT NULL,
    status text NOT NULL DEFAULT 'draft'
        CONSTRAINT invoices_status_known CHECK (status IN ('draft', 'finalized', 'void')),
    series billing.ident NOT NULL DEFAULT 'INV' REFERENCES billing.invoice_series (series),
    number bigint,
    subtotal billing.finite NOT NULL DEFAULT 0,
    credits billing.finite NOT NULL DEFAULT 0 CONSTRAINT invoices_credits_nonnegative CHECK (credits >= 0),
    tax_rate billing.finite NOT NULL DEFAULT 0
        CONSTRAINT invoices_tax_rate_range CHECK (tax_rate >= 0 AND tax_rate <= 1),
    tax billing.finite NOT NULL DEFAULT 0,
    total billing.finite NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    finalized_at timestamptz,
    CONSTRAINT invoices_account_currency FOREIGN KEY (account_id, currency)
        REFERENCES billing.accounts (id, currency),
    CONSTRAINT invoices_period_order CHECK (period_end > period_start),
    CONSTRAINT invoices_total_reconciles CHECK (total = subtotal - credits + tax),
    CONSTRAINT invoices_number_iff_finalized
        CHECK ((status = 'finalized') = (number IS NOT NULL)
               AND (status = 'finalized') = (finalized_at IS NOT NULL)),
    CONSTRAINT invoices_number_positive CHECK (number >= 1),
    CONSTRAINT invoices_credit_note_target
        CHECK ((kind = 'credit_note') = (corrects_invoice_id IS NOT NULL)),
    CONSTRAINT invoices_series_number_unique UNIQUE (series, number)
);
-- One open draft per account and month: late events land on it.
CREATE UNIQUE INDEX invoices_one_open_draft ON billing.invoices (account_id, month)
    WHERE status = 'draft' AND kind = 'invoice';
CREATE INDEX invoices_account_month ON billing.invoices (account_id, month);

CREATE TABLE billing.invoice_lines (
    invoice_id bigint NOT NULL REFERENCES billing.invoices (id),
    line_no integer NOT NULL CONSTRAINT invoice_lines_line_no_positive CHECK (line_no >= 1),
    kind text NOT NULL CONSTRAINT invoice_lines_kind_known
        CHECK (kind IN ('usage', 'included', 'fee', 'refund', 'adjustment')),
    meter text CONSTRAINT invoice_lines_meter_known CHECK (meter IN ('gpu', 'gpuless', 'storage', 'traffic')),
    model billing.attr NOT NULL DEFAULT '',
    region billing.attr NOT NULL DEFAULT '',
    plan_id billing.ident REFERENCES billing.plans (id),
    price_version_id bigint REFERENCES billing.price_versions (id),
    -- Adjustment lines: the month the late usage belongs to.
    adjusts_month date,
    description text NOT NULL DEFAULT '' CHECK (octet_length(description) <= 1024),
    -- Exact quantity as a fraction (libbilling quantities may be
    -- rationals such as 1/3 GPU-hour); den is 1 for decimal quantities.
    quantity billing.finite NOT NULL CONSTRAINT invoice_lines_quantity_nonnegative CHECK (quantity >= 0),
    quantity_den billing.finite NOT NULL DEFAULT 1 CONSTRAINT invoice_lines_den_positive CHECK (quantity_den > 0),
    unit text NOT NULL CONSTRAINT invoice_lines_unit_known
        CHECK (unit IN ('GPU-hour', 'instance-hour', 'GB-month', 'GB', 'term')),
    unit_price billing.finite NOT NULL CONSTRAINT invoice_lines_unit_price_nonnegative CHECK (unit_price >= 0),
    -- Rounded to the currency's minor unit: what is billed.
    amount billing.finite NOT NULL,
    PRIMARY KEY (invoice_id, line_no),
    CONSTRAINT invoice_lines_refund_sign CHECK (kind <> 'refund' OR amount <= 0),
    CONSTRAINT invoice_lines_charge_sign CHECK (kind IN ('refund', 'adjustment') OR amount >= 0),
    CONSTRAINT invoice_lines_adjustment_month CHECK ((kind = 'adjustment') = (adjusts_month IS NOT NULL))
);

CREATE TABLE billing.invoice_credits (
    invoice_id bigint NOT NULL REFERENCES billing.invoices (id),
    grant_id billing.ident NOT NULL REFERENCES billing.credit_grants (id),
    amount billing.finite NOT NULL CONSTRAINT invoice_credits_amount_positive CHECK (amount > 0),
    PRIMARY KEY (invoice_id, grant_id)
);

-- Finalized (and void) invoices are frozen: no UPDATE, no DELETE. A draft
-- may be edited, voided, deleted, or finalized, the last only with a
-- number just taken from its series (see billing.finalize_invoice).
CREATE FUNCTION billing.invoices_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_next bigint;
BEGIN
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
        SELECT next_number INTO v_next FROM billing.invoice_series WHERE series = NEW.series;
        IF NEW.number IS DISTINCT FROM v_next - 1 THEN
            PERFORM billing.violation('invoices_number_from_series', TG_TABLE_NAME,
                format('invoice %s: number %s was not just assigned by series %s',
                       OLD.id, NEW.number, NEW.series));
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER invoices_finalized_immutable BEFORE UPDATE OR DELETE ON billing.invoices
    FOR EACH ROW EXECUTE FUNCTION billing.invoices_guard();

-- An invoice is created as a draft without a number.
CREATE FUNCTION billing.invoices_insert_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status <> 'draft' OR NEW.number IS NOT NULL THEN
        PERFORM billing.violation('invoices_created_draft', TG_TABLE_NAME,
                                  'invoices are created as drafts without a number');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER invoices_created_draft BEFORE INSERT ON billing.invoices
    FOR EACH ROW EXECUTE FUNCTION billing.invoices_insert_guard();

-- Lines and applied credits change only while their invoice is a draft.
-- FOR SHARE makes a concurrent finalization wait for us (or us for it,
-- then see the new status): no line can slip in after the number.
CREATE FUNCTION billing.invoice_children_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_status text;
BEGIN
    -- The invoice the row leaves (UPDATE, DELETE), then the one it joins
    -- (INSERT, UPDATE); both must be drafts. A missing invoice on INSERT
    -- is left to the foreign key, which names itself.
    FOREACH v_id IN ARRAY CASE TG_OP WHEN 'INSERT' THEN ARRAY[NEW.invoice_id]
                                     WHEN 'DELETE' THEN ARRAY[OLD.invoice_id]
                                     ELSE ARRAY[OLD.invoice_id, NEW.invoice_id] END LOOP
        SELECT status INTO v_status FROM billing.invoices WHERE id = v_id FOR SHARE;
        IF v_status <> 'draft' OR (v_status IS NULL AND TG_OP <> 'INSERT') THEN
            PERFORM billing.violation('invoices_finalized_immutable', TG_TABLE_NAME,
                format('invoice %s is %s: %s on %s refused', v_id,
                       coalesce(v_status, 'missing'), TG_OP, TG_TABLE_NAME));
        END IF;
    END LOOP;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER invoice_lines_finalized_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON billing.invoice_lines
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_children_guard();
CREATE TRIGGER invoice_credits_finalized_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON billing.invoice_credits
    FOR EACH ROW EXECUTE FUNCTION billing.invoice_children_guard();

-- billing.finalize_invoice: give draft @p_invoice the next number of its
-- series and freeze it. Returns the number.
--
-- Gapless under concurrency: the series row is locked by the UPDATE until
-- the caller commits, so finalizers of one series queue; one that rolls
-- back returns its number with it. Lock order is always invoice, then
-- series, so two finalizers cannot deadlock. SECURITY DEFINER: the
-- runtime role may not touch series or numbers directly.
CREATE FUNCTION billing.finalize_invoice(p_invoice bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_inv billing.invoices%ROWTYPE;
    v_lines numeric;
    v_credits numeric;
    v_number bigint;
BEGIN
    SELECT * INTO v_inv FROM billing.invoices WHERE id = p_invoice FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'invoice % does not exist', p_invoice USING ERRCODE = 'no_data_found';
    END IF;
    IF v_inv.status <> 'draft' THEN
        PERFORM billing.violation('invoices_finalized_immutable', 'invoices',
            format('invoice %s is %s already', p_invoice, v_inv.status));
    END IF;
    SELECT coalesce(sum(amount), 0) INTO v_lines FROM billing.invoice_lines WHERE invoice_id = p_invoice;
    SELECT coalesce(sum(amount), 0) INTO v_credits FROM billing.invoice_credits WHERE invoice_id = p_invoice;
    IF v_lines <> v_inv.subtotal OR v_credits <> v_inv.credits THEN
        PERFORM billing.violation('invoices_lines_reconcile', 'invoices',
            format('invoice %s: subtotal %s and credits %s do not match lines %s and credits %s',
                   p_invoice, v_inv.subtotal, v_inv.credits, v_lines, v_credits), '23514');
    END IF;
    UPDATE billing.invoice_series SET next_number = next_number + 1
        WHERE series = v_inv.series
        RETURNING next_number - 1 INTO v_number;
    UPDATE billing.invoices
        SET status = 'finalized', number = v_number, finalized_at = now(), updated_at = now()
        WHERE id = p_invoice;
    RETURN v_number;
END
$$;

CREATE TABLE billing.credit_ledger (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    grant_id billing.ident NOT NULL REFERENCES billing.credit_grants (id),
    entry text NOT NULL
        CONSTRAINT credit_ledger_entry_known CHECK (entry IN ('grant', 'expire', 'apply', 'reverse')),
    -- Minor units of the grant's currency: +grant, -apply, -expire, +reverse.
    amount_minor billing.finite NOT NULL
        CONSTRAINT credit_ledger_integral CHECK (amount_minor = trunc(amount_minor)),
    invoice_id bigint REFERENCES billing.invoices (id),
    effective_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    note text NOT NULL DEFAULT '' CHECK (octet_length(note) <= 1024),
    CONSTRAINT credit_ledger_sign CHECK (CASE WHEN entry IN ('grant', 'reverse') THEN amount_minor > 0
                                              ELSE amount_minor < 0 END),
    CONSTRAINT credit_ledger_invoice CHECK ((entry IN ('apply', 'reverse')) = (invoice_id IS NOT NULL))
);
CREATE UNIQUE INDEX credit_ledger_one_grant_entry ON billing.credit_ledger (grant_id)
    WHERE entry = 'grant';
CREATE INDEX credit_ledger_grant ON billing.credit_ledger (grant_id);

-- A grant's first entry is its 'grant' of exactly the granted amount, and
-- no entry may take its balance below zero. Locking the grant row
-- serialises writers of one grant, so two concurrent applies cannot both
-- see the same balance.
CREATE FUNCTION billing.credit_ledger_balance_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_grant billing.credit_grants%ROWTYPE;
    v_balance numeric;
    v_expected numeric;
BEGIN
    SELECT * INTO v_grant FROM billing.credit_grants WHERE id = NEW.grant_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NEW; -- the foreign key reports it
    END IF;
    SELECT sum(amount_minor) INTO v_balance FROM billing.credit_ledger WHERE grant_id = NEW.grant_id;
    IF NEW.entry = 'grant' THEN
        -- numeric ^ numeric: with integer operands `^` would be float8.
        v_expected := v_grant.amount * 10::numeric ^ billing.currency_digits(v_grant.currency);
        IF NEW.amount_minor <> v_expected THEN
            PERFORM billing.violation('credit_ledger_grant_amount', TG_TABLE_NAME,
                format('grant %s: ledger grant entry %s differs from the granted %s minor units',
                       NEW.grant_id, NEW.amount_minor, v_expected), '23514');
        END IF;
        RETURN NEW;
    END IF;
    IF v_balance IS NULL OR v_balance + NEW.amount_minor < 0 THEN
        PERFORM billing.violation('credit_ledger_nonnegative_balance', TG_TABLE_NAME,
            format('grant %s: %s of %s minor units would leave balance %s', NEW.grant_id,
                   NEW.entry, NEW.amount_minor, coalesce(v_balance, 0) + NEW.amount_minor),
            '23514');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER credit_ledger_balance BEFORE INSERT ON billing.credit_ledger
    FOR EACH ROW EXECUTE FUNCTION billing.credit_ledger_balance_guard();
CREATE TRIGGER credit_ledger_append_only BEFORE UPDATE OR DELETE ON billing.credit_ledger
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();

CREATE VIEW billing.credit_balances AS
    SELECT g.id AS grant_id, g.account_id, g.currency, g.granted_at, g.expires_at,
           coalesce(sum(l.amount_minor), 0) AS balance_minor
    FROM billing.credit_grants g
    LEFT JOIN billing.credit_ledger l ON l.grant_id = g.id
    GROUP BY g.id;

-- ---------------------------------------------------------------------
-- Raw usage events: every accepted event, its id unique forever.
--
-- usage_events is partitioned by month of start_time (UTC) so that old
-- months can be detached and archived. A primary key of a partitioned
-- table must contain the partition key, so permanent uniqueness of the id
-- lives in the unpartitioned event_ids, never archived: usage_events'
-- (event_id, start_time) must exist in event_ids, whose key is event_id
-- alone, so one id can have one start and therefore one row.
-- ---------------------------------------------------------------------
CREATE TABLE billing.event_ids (
    event_id billing.event_ident PRIMARY KEY,
    start_time timestamptz NOT NULL,
    -- md5 of the event's content (billing.event_fingerprint): the same id
    -- with other content is a conflict, even after its month is archived.
    fingerprint bytea NOT NULL CONSTRAINT event_ids_fingerprint_md5 CHECK (octet_length(fingerprint) = 16),
    first_seen timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT event_ids_id_start UNIQUE (event_id, start_time)
);
CREATE TRIGGER event_ids_append_only BEFORE UPDATE OR DELETE ON billing.event_ids
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();

CREATE TABLE billing.usage_events (
    event_id billing.event_ident NOT NULL,
    account_id billing.ident NOT NULL REFERENCES billing.accounts (id),
    resource_id billing.event_ident NOT NULL,
    meter text NOT NULL
        CONSTRAINT usage_events_meter_known CHECK (meter IN ('gpu', 'gpuless', 'storage', 'traffic')),
    start_time timestamptz NOT NULL,
    start_nanos smallint NOT NULL DEFAULT 0
        CONSTRAINT usage_events_start_nanos_range CHECK (start_nanos BETWEEN 0 AND 999),
    end_time timestamptz NOT NULL,
    end_nanos smallint NOT NULL DEFAULT 0
        CONSTRAINT usage_events_end_nanos_range CHECK (end_nanos BETWEEN 0 AND 999),
    quantity billing.finite NOT NULL
        CONSTRAINT usage_events_quantity_nonnegative CHECK (quantity >= 0),
    model billing.attr NOT NULL DEFAULT '',
    region billing.attr NOT NULL DEFAULT '',
    -- Where it came from: "kafka:<topic>/<partition>@<offset>" or "file:<name>:<line>".
    source text NOT NULL DEFAULT '' CHECK (octet_length(source) <= 512),
    received_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT usage_events_quantity_bounds CHECK (quantity <= 1e18 AND scale(quantity) <= 9),
    CONSTRAINT usage_events_end_after_start CHECK ((end_time, end_nanos) > (start_time, start_nanos)),
    PRIMARY KEY (event_id, start_time),
    CONSTRAINT usage_events_id_registered FOREIGN KEY (event_id, start_time)
        REFERENCES billing.event_ids (event_id, start_time)
) PARTITION BY RANGE (start_time);
-- Months without their own partition land here: nothing is ever refused
-- for lack of a partition (billing.ensure_event_partitions moves them).
CREATE TABLE billing.usage_events_default PARTITION OF billing.usage_events DEFAULT;
CREATE TRIGGER usage_events_immutable BEFORE UPDATE ON billing.usage_events
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();

-- billing.event_fingerprint: md5 of an event's content, every field
-- length-prefixed so that no two different events encode alike, numbers
-- in a form independent of their written scale (1.50 = 1.5) and of the
-- session's DateStyle and TimeZone.
CREATE FUNCTION billing.event_fingerprint(account text, resource text, meter text,
                                          start_time timestamptz, start_nanos smallint,
                                          end_time timestamptz, end_nanos smallint,
                                          quantity numeric, model text, region text)
RETURNS bytea LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN decode(md5(concat_ws('|',
    octet_length(account), account, octet_length(resource), resource, meter,
    (extract(epoch FROM start_time) * 1000000)::bigint, start_nanos,
    (extract(epoch FROM end_time) * 1000000)::bigint, end_nanos,
    trim_scale(quantity), octet_length(model), model, octet_length(region), region)), 'hex');

-- ---------------------------------------------------------------------
-- Rated usage aggregates, mirroring libbilling's aggregate key
-- (libbilling/rater.h, bl_aggkey): account, local month, meter, rate
-- (price version revision + price key) or covering subscription, credit
-- epoch. quantity/quantity_den is the exact sum of quantity x duration in
-- unit-nanoseconds (traffic: units), a fraction because traffic split
-- across months can be one.
-- ---------------------------------------------------------------------
CREATE TABLE billing.usage_aggregates (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id billing.ident NOT NULL REFERENCES billing.accounts (id),
    month date NOT NULL CONSTRAINT usage_aggregates_month_first_day CHECK (extract(day FROM month) = 1),
    meter text NOT NULL
        CONSTRAINT usage_aggregates_meter_known CHECK (meter IN ('gpu', 'gpuless', 'storage', 'traffic')),
    rate_kind text NOT NULL
        CONSTRAINT usage_aggregates_rate_kind_known CHECK (rate_kind IN ('priced', 'included', 'zero')),
    price_version_id bigint REFERENCES billing.price_versions (id),
    rate_model billing.attr,
    rate_region billing.attr,
    subscription_id billing.ident REFERENCES billing.subscriptions (id),
    epoch integer NOT NULL DEFAULT 0 CONSTRAINT usage_aggregates_epoch_nonnegative CHECK (epoch >= 0),
    quantity billing.finite NOT NULL DEFAULT 0
        CONSTRAINT usage_aggregates_quantity_nonnegative CHECK (quantity >= 0),
    quantity_den billing.finite NOT NULL DEFAULT 1
        CONSTRAINT usage_aggregates_den_positive CHECK (quantity_den > 0),
    event_count bigint NOT NULL DEFAULT 0 CONSTRAINT usage_aggregates_count_nonnegative CHECK (event_count >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT usage_aggregates_rate_shape CHECK (
        CASE rate_kind
            WHEN 'priced' THEN price_version_id IS NOT NULL AND rate_model IS NOT NULL
                               AND rate_region IS NOT NULL AND subscription_id IS NULL
            WHEN 'included' THEN subscription_id IS NOT NULL AND price_version_id IS NULL
            ELSE meter = 'traffic' AND price_version_id IS NULL AND subscription_id IS NULL
        END),
    CONSTRAINT usage_aggregates_key UNIQUE NULLS NOT DISTINCT
        (account_id, month, meter, rate_kind, price_version_id, rate_model, rate_region,
         subscription_id, epoch)
);

-- ---------------------------------------------------------------------
-- Kafka consumer positions, written in the same transaction as the
-- events and aggregates they account for (exactly once).
-- ---------------------------------------------------------------------
CREATE TABLE billing.kafka_offsets (
    consumer_group text NOT NULL CHECK (octet_length(consumer_group) BETWEEN 1 AND 255),
    topic text NOT NULL CHECK (octet_length(topic) BETWEEN 1 AND 249),
    partition integer NOT NULL CONSTRAINT kafka_offsets_partition_nonnegative CHECK (partition >= 0),
    next_offset bigint NOT NULL CONSTRAINT kafka_offsets_offset_nonnegative CHECK (next_offset >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic, partition)
);

-- TRUNCATE would bypass every row guard above.
CREATE TRIGGER invoices_no_truncate BEFORE TRUNCATE ON billing.invoices
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();
CREATE TRIGGER invoice_lines_no_truncate BEFORE TRUNCATE ON billing.invoice_lines
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();
CREATE TRIGGER invoice_credits_no_truncate BEFORE TRUNCATE ON billing.invoice_credits
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();
CREATE TRIGGER credit_ledger_no_truncate BEFORE TRUNCATE ON billing.credit_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();
CREATE TRIGGER event_ids_no_truncate BEFORE TRUNCATE ON billing.event_ids
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();
CREATE TRIGGER usage_events_no_truncate BEFORE TRUNCATE ON billing.usage_events
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_truncate();
