-- 0014_parties.sql - who sends an invoice and who receives it (issue 27).
--
-- An invoice a cloud can send names both parties. The seller (the
-- issuer) belongs to a price book: the legal name, address, tax id,
-- contact, payment instructions, the footer and an optional logo that
-- every invoice rated with that book carries. The customer is the
-- account: its name (0005), e-mail, billing address, tax id and the
-- language its documents are written in ('en' or 'zh-Hans').
--
-- Every text is bounded here as well as by the loader (formats/,
-- doc/formats.md): a document is laid out from these cells, and an
-- unbounded cell would be an unbounded page. None of them takes part in
-- rating, so changing them never changes an amount; documents already
-- finalized keep the parties they were exported with only in their
-- exported files (the invoice rows hold amounts, not parties).
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

-- accounts.name is 0005's (the name printed on invoices).
ALTER TABLE billing.accounts
    ADD COLUMN email text
        CONSTRAINT accounts_email_form
        CHECK (char_length(email) <= 254 AND email ~ '^[^@[:space:]]+@[^@[:space:]]+$'),
    ADD COLUMN billing_address text
        CONSTRAINT accounts_billing_address_size
        CHECK (char_length(billing_address) BETWEEN 1 AND 1000),
    ADD COLUMN tax_id text
        CONSTRAINT accounts_tax_id_size CHECK (char_length(tax_id) BETWEEN 1 AND 64),
    ADD COLUMN language text NOT NULL DEFAULT 'en'
        CONSTRAINT accounts_language_known CHECK (language IN ('en', 'zh-Hans'));

-- The seller of the invoices rated with price book @book_id.
CREATE TABLE billing.issuers (
    book_id billing.ident PRIMARY KEY REFERENCES billing.price_books (id),
    legal_name text NOT NULL
        CONSTRAINT issuers_legal_name_size CHECK (char_length(legal_name) BETWEEN 1 AND 200),
    address text
        CONSTRAINT issuers_address_size CHECK (char_length(address) BETWEEN 1 AND 1000),
    tax_id text
        CONSTRAINT issuers_tax_id_size CHECK (char_length(tax_id) BETWEEN 1 AND 64),
    contact text
        CONSTRAINT issuers_contact_size CHECK (char_length(contact) BETWEEN 1 AND 500),
    payment_instructions text
        CONSTRAINT issuers_payment_size
        CHECK (char_length(payment_instructions) BETWEEN 1 AND 2000),
    footer text
        CONSTRAINT issuers_footer_size CHECK (char_length(footer) BETWEEN 1 AND 1000),
    -- PNG bytes, at most 1 MiB (the loader checks the signature).
    logo_png bytea
        CONSTRAINT issuers_logo_size CHECK (octet_length(logo_png) BETWEEN 1 AND 1048576),
    -- Days from the issue date to the due date of its invoices.
    payment_terms_days integer NOT NULL DEFAULT 30
        CONSTRAINT issuers_payment_terms_range CHECK (payment_terms_days BETWEEN 0 AND 365),
    updated_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON billing.issuers FROM PUBLIC;
CREATE TRIGGER issuers_no_delete BEFORE DELETE ON billing.issuers
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER issuers_no_truncate BEFORE TRUNCATE ON billing.issuers
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();

-- The runtime role loads the catalog (`billing load`) and reads it.
GRANT SELECT, INSERT ON billing.issuers TO billing_app;
GRANT UPDATE (legal_name, address, tax_id, contact, payment_instructions, footer, logo_png,
              payment_terms_days, updated_at) ON billing.issuers TO billing_app;
GRANT UPDATE (email, billing_address, tax_id, language) ON billing.accounts TO billing_app;
