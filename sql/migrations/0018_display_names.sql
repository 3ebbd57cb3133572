-- 0018_display_names.sql - what documents call a model, a region and a
-- plan (issue 27: "GPU time, 8 x RTX 4090, cn-east-1").
--
-- A price book may carry display names ("names" in doc/formats.md):
-- per kind (model, region, plan), per catalog key, per language ('en',
-- the fallback, and 'zh-Hans'). Keys are the catalog's own (the model
-- "RTX4090", the region "cn-east-1", the plan "rtx4090x8-monthly"), which
-- are one namespace for every book, so the names are too: the last book
-- loaded that names a key sets its name. None of it takes part in rating;
-- an invoice's lines name their key, and a document shows the name the
-- account's language has (else the 'en' one, else the key) when it is
-- written, so a name changed later changes documents exported later, never
-- an amount.
--
-- Applied by `billing db migrate` in one transaction; never edit it once
-- released (see 0001_initial.sql).

SET LOCAL ROLE billing_owner;
SET LOCAL search_path = billing, pg_catalog;

CREATE TABLE billing.display_names (
    kind text NOT NULL CONSTRAINT display_names_kind_known CHECK (kind IN ('model', 'region', 'plan')),
    key text NOT NULL CONSTRAINT display_names_key_size CHECK (octet_length(key) BETWEEN 1 AND 128),
    language text NOT NULL CONSTRAINT display_names_language_known CHECK (language IN ('en', 'zh-Hans')),
    name text NOT NULL CONSTRAINT display_names_name_size CHECK (char_length(name) BETWEEN 1 AND 100),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key, language)
);
REVOKE ALL ON billing.display_names FROM PUBLIC;
-- A name is replaced by loading another, never deleted (as issuers).
CREATE TRIGGER display_names_no_delete BEFORE DELETE ON billing.display_names
    FOR EACH ROW EXECUTE FUNCTION billing.refuse_change();
CREATE TRIGGER display_names_no_truncate BEFORE TRUNCATE ON billing.display_names
    FOR EACH STATEMENT EXECUTE FUNCTION billing.refuse_unless_maintenance();

-- The runtime role loads the catalog (`billing load`) and reads it.
GRANT SELECT, INSERT ON billing.display_names TO billing_app;
GRANT UPDATE (name, updated_at) ON billing.display_names TO billing_app;
