-- 0020_load_digest.sql - `billing load` skips an accounts file it has
-- already loaded when nothing else wrote its rows since (issue 28: an
-- unchanged reload of 1 M accounts within 5 s).
--
-- load_digests holds one row: the md5 of the last accounts file `billing
-- load` committed and how many accounts, subscriptions and grants it
-- had. Right after such a load the stored accounts, subscriptions, grants
-- and grants' opening ledger entries are what the file says; they stay so
-- until something writes one of those tables. Every such write forgets
-- the digest (the statement triggers below, whoever writes, whatever the
-- statement changes), so a load of a file with the stored digest (same
-- bytes) would add, change and refuse nothing: it counts the file's rows
-- unchanged without comparing them. The ledger only matters for a grant's
-- opening entry, which INSERT never removes (the ledger is append-only),
-- so only its UPDATE, DELETE and TRUNCATE (refused anyway, unless in
-- maintenance) forget. A write with triggers disabled (session_replication_role
-- = replica) does not forget: `DELETE FROM billing.load_digests` then
-- makes the next load compare every row again.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

CREATE TABLE billing.load_digests (
    one boolean PRIMARY KEY DEFAULT true CONSTRAINT load_digests_one_row CHECK (one),
    accounts_md5 bytea NOT NULL CONSTRAINT load_digests_md5_size CHECK (octet_length(accounts_md5) = 16),
    accounts bigint NOT NULL CONSTRAINT load_digests_accounts_nonnegative CHECK (accounts >= 0),
    subscriptions bigint NOT NULL CONSTRAINT load_digests_subscriptions_nonnegative CHECK (subscriptions >= 0),
    grants bigint NOT NULL CONSTRAINT load_digests_grants_nonnegative CHECK (grants >= 0),
    loaded_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON billing.load_digests FROM PUBLIC;
-- A digest is forgotten by DELETE; TRUNCATE is refused as on every table.
CREATE TRIGGER load_digests_no_truncate BEFORE TRUNCATE ON billing.load_digests
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();

-- SECURITY DEFINER: any role that may write accounts forgets the digest.
CREATE FUNCTION billing.load_digest_forget() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM billing.load_digests;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION billing.load_digest_forget() FROM PUBLIC;

CREATE TRIGGER accounts_load_digest_forget
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON billing.accounts
    FOR EACH STATEMENT EXECUTE FUNCTION billing.load_digest_forget();
CREATE TRIGGER subscriptions_load_digest_forget
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON billing.subscriptions
    FOR EACH STATEMENT EXECUTE FUNCTION billing.load_digest_forget();
CREATE TRIGGER credit_grants_load_digest_forget
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON billing.credit_grants
    FOR EACH STATEMENT EXECUTE FUNCTION billing.load_digest_forget();
CREATE TRIGGER credit_ledger_load_digest_forget
    AFTER UPDATE OR DELETE OR TRUNCATE ON billing.credit_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION billing.load_digest_forget();

-- The runtime role loads (`billing load`): it reads and records the digest.
GRANT SELECT, INSERT, UPDATE, DELETE ON billing.load_digests TO billing_app;
