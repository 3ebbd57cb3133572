-- 0015_api_keys.sql - the keys of billingd's HTTP API (issue 25).
--
-- A key is shown once, when `billing apikey create` makes it, as
-- bk_<id>_<secret>: <id> is this table's id, <secret> 32 random bytes
-- (libsodium's randombytes_buf) in base64url. Only the BLAKE2b-256 hash
-- of the secret bytes (libsodium's crypto_generichash) is kept: a 256-bit
-- random secret cannot be guessed, so a fast hash is as strong as a slow
-- key derivation here, and the server checks a key per request in
-- microseconds. A key has one or more scopes and may be bound to one
-- account (it then reads that account alone). A key is never deleted:
-- revoking it sets revoked_at, once.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

CREATE TABLE billing.api_keys (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- crypto_generichash (BLAKE2b, 32 bytes) of the secret's 32 bytes.
    secret_hash bytea NOT NULL
        CONSTRAINT api_keys_hash_size CHECK (octet_length(secret_hash) = 32),
    scopes text[] NOT NULL
        CONSTRAINT api_keys_scopes_known
        CHECK (cardinality(scopes) BETWEEN 1 AND 4
               AND scopes <@ ARRAY['events:write', 'accounts:read', 'invoices:read', 'admin']),
    -- Bound to this account (it may not exist yet), or NULL for every account.
    account_id billing.ident,
    label text
        CONSTRAINT api_keys_label_size CHECK (char_length(label) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
        CONSTRAINT api_keys_revoked_after CHECK (revoked_at >= created_at)
);
REVOKE ALL ON billing.api_keys FROM PUBLIC;

-- Revoked once for good; never deleted.
CREATE FUNCTION billing.api_keys_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.revoked_at IS NOT NULL OR NEW.id <> OLD.id OR NEW.secret_hash <> OLD.secret_hash
       OR NEW.scopes <> OLD.scopes OR NEW.account_id IS DISTINCT FROM OLD.account_id
       OR NEW.label IS DISTINCT FROM OLD.label OR NEW.created_at <> OLD.created_at THEN
        PERFORM billing.violation('api_keys_revoke_once', 'api_keys',
                                  'billing.api_keys: only revoked_at may be set, and once');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER api_keys_revoke_once BEFORE UPDATE ON billing.api_keys
    FOR EACH ROW EXECUTE FUNCTION billing.api_keys_guard();
CREATE TRIGGER api_keys_no_delete BEFORE DELETE ON billing.api_keys
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER api_keys_no_truncate BEFORE TRUNCATE ON billing.api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();

GRANT SELECT, INSERT ON billing.api_keys TO billing_app;
GRANT UPDATE (revoked_at) ON billing.api_keys TO billing_app;
GRANT USAGE ON SEQUENCE billing.api_keys_id_seq TO billing_app;
