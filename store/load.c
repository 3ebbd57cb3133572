/*
 * load.c - `billing load`: catalog files into the store. See
 * load.h and doc/database.md ("Loading").
 *
 * The files are applied to a billing_catalog and a rater is built from
 * it, exactly as `billing rate` does: anything it would refuse is refused
 * here, with the same messages, before any row but the temporary table's.
 * The accounts file is parsed once: each element the check applied is
 * copied from the check's own parse (copy_checked). The accounts
 * file is checked only when the files' digest is not the stored one
 * (SQL_DIGEST_GET): those same bytes were checked and loaded already. Each kind of
 * row is written LOAD_CHUNK_ROWS rows per statement (SQL_ROWS): an
 * INSERT ... ON CONFLICT DO NOTHING (counted as added), where allowed an
 * UPDATE of what may change (counted as changed), and a SELECT of stored
 * rows that differ from the file (refused: that would rewrite history).
 */
#include "config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "billing_config.h"
#include "copy.h"
#include "dbcatalog.h"
#include "load.h"
#include "md5.h"
#include "util.h"

#define MSG_MAX 1024
/*
 * Largest price book file `billing load` reads: it keeps the book's JSON
 * tree (about 10 times the text) to write the rows; a price book is small.
 */
#define LOAD_FILE_MAX (64u * 1024u * 1024u)
/*
 * Largest element of the accounts file (an account, a subscription, a
 * grant): the file itself is read up to libbilling-config's bound
 * (BILLING_CONFIG_FILE_MAX) and parsed element by element, never as a
 * tree.
 */
#define LOAD_ELEMENT_MAX (64u * 1024u * 1024u)
#define TIME_TEXT 48
#define NUM_TEXT 32

/* Running consumers reload the catalog when this load commits (dbcatalog.h). */
#define SQL_NOTIFY "SELECT pg_notify('" BS_CATALOG_CHANNEL "', $1::text)"

/* 'billload' in ASCII: one loader at a time per database. */
#define SQL_LOCK "SELECT pg_advisory_xact_lock(7091318301203063140)"
/*
 * The statements over load_rows hash the file's rows and the stored
 * accounts and grants (a million of each for issue 28's catalog, about
 * 60 MB): with the default 4 MB they split into batches written to
 * temporary files and read back. This transaction only.
 */
#define SQL_WORK_MEM "SET LOCAL work_mem = '64MB'"

#define SQL_BOOK_INSERT                                        \
    "INSERT INTO billing.price_books (id, currency, rounding)" \
    " VALUES ($1::text, $2::text, $3::text) ON CONFLICT (id) DO NOTHING"
#define SQL_BOOK_DIFFERS                                    \
    "SELECT 1 FROM billing.price_books WHERE id = $1::text" \
    " AND (currency, rounding) IS DISTINCT FROM ($2::char(3), $3::text)"

/*
 * The seller of the book's invoices (migration 0014): added, or updated
 * when any field differs; returns a row when it wrote one, "t" if added.
 */
#define SQL_ISSUER_UPSERT                                                                      \
    "INSERT INTO billing.issuers AS i (book_id, legal_name, address, tax_id, contact,"         \
    " payment_instructions, footer, logo_png, payment_terms_days) VALUES ($1::text, $2::text," \
    " $3::text, $4::text, $5::text, $6::text, $7::text, $8::bytea, $9::integer)"               \
    " ON CONFLICT (book_id) DO UPDATE SET legal_name = EXCLUDED.legal_name,"                   \
    " address = EXCLUDED.address, tax_id = EXCLUDED.tax_id, contact = EXCLUDED.contact,"       \
    " payment_instructions = EXCLUDED.payment_instructions, footer = EXCLUDED.footer,"         \
    " logo_png = EXCLUDED.logo_png, payment_terms_days = EXCLUDED.payment_terms_days,"         \
    " updated_at = now() WHERE (i.legal_name, i.address, i.tax_id, i.contact,"                 \
    " i.payment_instructions, i.footer, i.logo_png, i.payment_terms_days) IS DISTINCT FROM"    \
    " (EXCLUDED.legal_name, EXCLUDED.address, EXCLUDED.tax_id, EXCLUDED.contact,"              \
    " EXCLUDED.payment_instructions, EXCLUDED.footer, EXCLUDED.logo_png,"                      \
    " EXCLUDED.payment_terms_days) RETURNING (i.xmax = 0)::text"

/*
 * The book's display names (migration 0018), $1 a JSON array of [kind,
 * key, language, name]: added, or renamed when the name differs. Returns
 * the rows given, added and renamed.
 */
#define SQL_NAMES_UPSERT                                                                        \
    "WITH r AS (SELECT x->>0 AS kind, x->>1 AS key, x->>2 AS language, x->>3 AS name"           \
    " FROM json_array_elements($1::json) x), up AS (INSERT INTO billing.display_names AS n"     \
    " (kind, key, language, name) SELECT kind, key, language, name FROM r"                      \
    " ON CONFLICT (kind, key, language) DO UPDATE SET name = EXCLUDED.name, updated_at = now()" \
    " WHERE n.name IS DISTINCT FROM EXCLUDED.name RETURNING (n.xmax = 0) AS added)"             \
    " SELECT (SELECT count(*) FROM r)::text, count(*) FILTER (WHERE added)::text,"              \
    " count(*) FILTER (WHERE NOT added)::text FROM up"

/*
 * Rows of plans, accounts, subscriptions and grants are streamed by COPY
 * into the session's temporary table load_rows (SQL_ROWS_TABLE), one row
 * per element of the file (created by each attempt, dropped at its end,
 * so it belongs to the role that loads): its kind (a bs_load_kind), its ordinal n in
 * its array (from 1) and up to ROW_PARAMS strings or nulls (p1..p9, in the
 * order of the kind's params function). Then each statement of a kind
 * runs once over all its rows, set-based: an INSERT of the rows whose id
 * is not stored (counted as added), where allowed an UPDATE of the rows
 * that differ (IS DISTINCT FROM: a row that does not differ is not
 * touched; counted as changed), and a SELECT of the first stored row
 * that differs from the file (refused: that would rewrite history). $1 is
 * the kind. One statement per kind instead of one per row: a reload of a
 * million accounts that changes nothing writes no row.
 */
#define SQL_ROWS_TABLE                                                                      \
    "CREATE TEMPORARY TABLE load_rows (kind smallint NOT NULL, n bigint NOT NULL, p1 text," \
    " p2 text, p3 text, p4 text, p5 text, p6 text, p7 text, p8 text, p9 text) ON COMMIT DROP"
#define SQL_ROWS_COPY                                                                 \
    "COPY pg_temp.load_rows (kind, n, p1, p2, p3, p4, p5, p6, p7, p8, p9) FROM STDIN" \
    " (FORMAT binary)"
#define SQL_ROWS_ANALYZE "ANALYZE pg_temp.load_rows"
#define ROWS_COPY_COLS 11
#define SQL_ROWS                                                                                \
    "WITH r AS (SELECT n, p1, p2, p3, p4, p5, p6, p7, p8, p9 FROM pg_temp.load_rows WHERE kind" \
    " = $1::smallint)"
/*
 * Rows whose id is not stored yet: the others never reach the INSERT, whose
 * domain and CHECK evaluation (made before ON CONFLICT looks) would be most
 * of a reload that changes nothing. ON CONFLICT stays for the rest.
 */
#define SQL_ROWS_NEW(table) " NOT EXISTS (SELECT 1 FROM billing." table " x WHERE x.id = r.p1)"
/* The first row that differs, in file order: the refusal names it. */
#define SQL_ROWS_FIRST " ORDER BY r.n LIMIT 1"
/*
 * Each kind's INSERT is first run without this clause (row_kind.add_first),
 * inside a savepoint: a row whose id NOT EXISTS did not see can only be one
 * that a concurrent writer inserted since the statement's snapshot, and
 * then the INSERT fails with unique_violation and is run again with it (the
 * same statement as before: the same rows, counts and waits). Without it
 * PostgreSQL inserts plainly instead of by speculative insertion (an
 * arbiter probe, a token and a confirmation record per row): 25-35 % of
 * the backend's CPU of a first load's accounts and grants.
 */
#define SQL_ON_CONFLICT " ON CONFLICT (id) DO NOTHING"
/*
 * Before a statement whose NOT EXISTS reads the table it writes
 * (row_kind.if_empty), while that table is empty: its statistics may say
 * so (vacuumed or analyzed before any row), and the planner then answers
 * NOT EXISTS with a nested loop over a sequential scan of the table, which
 * visits every row the statement has inserted so far, once per row: a
 * first load grew quadratically (20 000 accounts took 8.8 s instead of
 * 0.6 s). Without nested loops it is a hash anti-join, which reads the
 * empty table once. A table with rows is left to the planner (index
 * probes for a small file into a large store: 0.1 s where a hash of a
 * million accounts takes 2 s). Reset after the statement.
 */
#define SQL_NO_NESTLOOP_IF_EMPTY(table)                                            \
    "SELECT set_config('enable_nestloop', 'off', true) WHERE NOT EXISTS (SELECT 1" \
    " FROM billing." table ")"
#define SQL_NESTLOOP_RESET "RESET enable_nestloop"

#define SQL_PLAN_ADD                                                              \
    SQL_ROWS " INSERT INTO billing.plans (id, period, model, region, refundable)" \
             " SELECT p1, p2, p3, p4, p5::boolean FROM r WHERE" SQL_ROWS_NEW("plans")
#define SQL_PLAN_INSERT SQL_PLAN_ADD SQL_ON_CONFLICT
#define SQL_PLAN_DIFFERS                                                    \
    SQL_ROWS " SELECT r.n, r.p1 FROM r JOIN billing.plans p ON p.id = r.p1" \
             " WHERE (p.period, p.model, p.region, p.refundable)"           \
             " IS DISTINCT FROM (r.p2, r.p3, r.p4, r.p5::boolean)" SQL_ROWS_FIRST

/*
 * A new revision unless the latest one of that start holds the same
 * content: the md5 of its stored label, rates and fees in the canonical
 * text of version_content (trim_scale gives bs_decimal_canonical's form;
 * COLLATE "C" sorts as strcmp), not the content_hash recorded when it was
 * loaded. Rates lost since (a TRUNCATE before migration 0010, a trigger
 * disabled) or rows added by hand make the stored version differ from
 * its file, and the load repairs it with a new revision instead of
 * reporting "0 changed".
 */
#define SQL_VERSION_INSERT                                                                         \
    "WITH latest AS (SELECT id, label, revision FROM billing.price_versions"                       \
    " WHERE book_id = $1::text AND effective_from = $3::timestamptz"                               \
    " ORDER BY revision DESC LIMIT 1),"                                                            \
    " stored AS (SELECT md5('label|' || l.label || E'\\n' || coalesce((SELECT"                     \
    " string_agg(x.line || E'\\n', '' ORDER BY x.line COLLATE \"C\") FROM ("                       \
    " SELECT 'rate|' || r.meter || '|' || r.model || '|' || r.region || '|'"                       \
    " || trim_scale(r.price)::text AS line FROM billing.rates r WHERE r.version_id = l.id"         \
    " UNION ALL SELECT 'fee|' || f.plan_id || '|' || trim_scale(f.fee)::text"                      \
    " FROM billing.plan_fees f WHERE f.version_id = l.id) x), '')) AS hash FROM latest l)"         \
    " INSERT INTO billing.price_versions (book_id, label, effective_from, revision, content_hash)" \
    " SELECT $1::text, $2::text, $3::timestamptz,"                                                 \
    " coalesce((SELECT revision FROM latest), 0) + 1, md5($4::text)"                               \
    " WHERE md5($4::text) IS DISTINCT FROM (SELECT hash FROM stored)"                              \
    " RETURNING id, revision"
#define SQL_RATE_INSERT                                                   \
    "INSERT INTO billing.rates (version_id, meter, model, region, price)" \
    " VALUES ($1::bigint, $2::text, $3::text, $4::text, $5::numeric)"
#define SQL_FEE_INSERT                                         \
    "INSERT INTO billing.plan_fees (version_id, plan_id, fee)" \
    " VALUES ($1::bigint, $2::text, $3::numeric)"

#define SQL_ACCOUNT_ADD                                                                       \
    SQL_ROWS " INSERT INTO billing.accounts (id, currency, time_zone, tax_rate, name,"        \
             " email, billing_address, tax_id, language)"                                     \
             " SELECT p1, p2, p3, p4::numeric, p5, p6, p7, p8, p9 FROM r WHERE" SQL_ROWS_NEW( \
                 "accounts")
#define SQL_ACCOUNT_INSERT SQL_ACCOUNT_ADD SQL_ON_CONFLICT
#define SQL_ACCOUNT_UPDATE                                                                        \
    SQL_ROWS " UPDATE billing.accounts a SET currency = r.p2::char(3),"                           \
             " time_zone = r.p3, tax_rate = r.p4::numeric, name = r.p5, email = r.p6,"            \
             " billing_address = r.p7, tax_id = r.p8, language = r.p9, updated_at = now() FROM r" \
             " WHERE a.id = r.p1 AND (a.currency, a.time_zone, a.tax_rate, a.name, a.email,"      \
             " a.billing_address, a.tax_id, a.language) IS DISTINCT FROM (r.p2::char(3), r.p3,"   \
             " r.p4::numeric, r.p5, r.p6, r.p7, r.p8, r.p9)"

#define SQL_SUB_ADD                                                                      \
    SQL_ROWS " INSERT INTO billing.subscriptions (id, account_id, resource_id, plan_id," \
             " start_at, terms, cancelled_at) SELECT p1, p2, p3, p4, p5::timestamptz,"   \
             " p6::integer, p7::timestamptz FROM r WHERE" SQL_ROWS_NEW("subscriptions")
#define SQL_SUB_INSERT SQL_SUB_ADD SQL_ON_CONFLICT
#define SQL_SUB_CANCEL                                                                 \
    SQL_ROWS " UPDATE billing.subscriptions s SET cancelled_at = r.p7::timestamptz,"   \
             " updated_at = now() FROM r WHERE s.id = r.p1 AND s.cancelled_at IS NULL" \
             " AND r.p7 IS NOT NULL"
#define SQL_SUB_DIFFERS                                                                    \
    SQL_ROWS                                                                               \
    " SELECT r.n, r.p1 FROM r JOIN billing.subscriptions s ON s.id = r.p1"                 \
    " WHERE (s.account_id, s.resource_id, s.plan_id, s.start_at, s.terms, s.cancelled_at)" \
    " IS DISTINCT FROM (r.p2, r.p3, r.p4, r.p5::timestamptz, r.p6::integer,"               \
    " r.p7::timestamptz)" SQL_ROWS_FIRST

#define SQL_GRANT_ADD                                                                           \
    SQL_ROWS " INSERT INTO billing.credit_grants (id, account_id, currency, amount,"            \
             " granted_at, expires_at, kinds, priority) SELECT r.p1, a.id, a.currency,"         \
             " r.p3::numeric, r.p4::timestamptz, r.p5::timestamptz, r.p6::smallint,"            \
             " r.p7::integer FROM r JOIN billing.accounts a ON a.id = r.p2 WHERE" SQL_ROWS_NEW( \
                 "credit_grants")
#define SQL_GRANT_INSERT SQL_GRANT_ADD SQL_ON_CONFLICT
/* The grant's opening ledger entry, once. */
#define SQL_GRANT_LEDGER                                                                    \
    SQL_ROWS " INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor,"           \
             " effective_at, note) SELECT g.id, 'grant', trunc(g.amount * 10::numeric ^"    \
             " c.digits), g.granted_at, 'billing load' FROM r JOIN billing.credit_grants g" \
             " ON g.id = r.p1 JOIN billing.currencies c ON c.code = g.currency WHERE NOT"   \
             " EXISTS (SELECT 1 FROM billing.credit_ledger l WHERE l.grant_id = g.id"       \
             " AND l.entry = 'grant')"
#define SQL_GRANT_DIFFERS                                                                       \
    SQL_ROWS " SELECT r.n, r.p1 FROM r JOIN billing.credit_grants g ON g.id = r.p1"             \
             " WHERE (g.account_id, g.amount, g.granted_at, g.expires_at, g.kinds, g.priority)" \
             " IS DISTINCT FROM (r.p2, r.p3::numeric, r.p4::timestamptz, r.p5::timestamptz,"    \
             " r.p6::smallint, r.p7::integer)" SQL_ROWS_FIRST

/*
 * The accounts file last loaded (migration 0020): its md5 and how many
 * accounts, subscriptions and grants it had. A digest row exists only
 * while nothing but that load wrote those rows (its triggers forget it),
 * so a file with the stored md5 would add, change and refuse nothing:
 * its rows are counted unchanged without being copied or compared.
 */
#define SQL_DIGEST_GET                                         \
    "SELECT accounts::text, subscriptions::text, grants::text" \
    " FROM billing.load_digests WHERE accounts_md5 = decode($1::text, 'hex')"
/* After the load's statements, whose triggers forgot the old digest. */
#define SQL_DIGEST_PUT                                                                        \
    "INSERT INTO billing.load_digests AS d (accounts_md5, accounts, subscriptions, grants)"   \
    " VALUES (decode($1::text, 'hex'), $2::bigint, $3::bigint, $4::bigint) ON CONFLICT (one)" \
    " DO UPDATE SET accounts_md5 = EXCLUDED.accounts_md5, accounts = EXCLUDED.accounts,"      \
    " subscriptions = EXCLUDED.subscriptions, grants = EXCLUDED.grants, loaded_at = now()"

/* Progress is told after every so many rows copied. */
#define LOAD_PROGRESS_ROWS 10000

typedef struct load_ctx {
    const char *book_id;
    const char *pricebook_path;
    const char *accounts_path;
    json_t *book;                          /* the price book file, checked */
    char *book_text;                       /* its text, to check the accounts again */
    size_t book_len;                       /* its length */
    char *accounts;                        /* the accounts file's text; NULL if none */
    size_t accounts_len;                   /* its length */
    char accounts_md5[2 * BS_MD5_LEN + 1]; /* the files' digest, hex (read_files) */
    billing_catalog *cat;                  /* the price book applied; NULL once checked */
    billing_config_zones *zones;           /* for the accounts file's zones */
    int checked;                           /* the accounts file was checked (check_accounts) */
    int applied; /* an attempt applied accounts to @cat (or freed it): check_again renews it */
    int accounts_known; /* this attempt: the digest is stored, the file's rows are not copied */
    bs_load_counts *counts;
    bs_load_progress_fn progress; /* NULL: none */
    void *progress_arg;
    size_t rows_done;             /* rows written so far in this attempt */
    size_t rows_total;            /* rows of both files */
    size_t copied[BS_LOAD_KINDS]; /* rows of each kind copied in this attempt */
} load_ctx;

/* @n more rows written: tell the caller's progress function. */
static void rows_written(load_ctx *lc, size_t n)
{
    lc->rows_done += n;
    if (lc->progress != NULL)
        lc->progress(lc->progress_arg, lc->rows_done, lc->rows_total);
}

/* Rows the load writes: plans, versions, accounts, subscriptions, grants. */
static size_t count_rows(const load_ctx *lc)
{
    return lc->copied[BS_LOAD_PLANS] + json_array_size(json_object_get(lc->book, "versions")) +
           lc->copied[BS_LOAD_ACCOUNTS] + lc->copied[BS_LOAD_SUBSCRIPTIONS] +
           lc->copied[BS_LOAD_GRANTS];
}

const char *bs_load_kind_name(bs_load_kind kind)
{
    static const char *const names[BS_LOAD_KINDS] = {
        "price books",   "plans",         "price versions", "accounts",
        "subscriptions", "credit grants", "issuers",        "display names"};

    if ((unsigned)kind >= BS_LOAD_KINDS)
        return "?";
    return names[kind];
}

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

int bs_decimal_canonical(const char *in, char *out, size_t size)
{
    const char *p = in;
    const char *dot;
    size_t int_len;
    size_t frac_len = 0;
    int negative = 0;
    int n;

    if (*p == '+' || *p == '-')
        negative = *p++ == '-';
    int_len = strspn(p, "0123456789");
    if (int_len == 0)
        return -1;
    dot = p + int_len;
    if (*dot == '.') {
        frac_len = strspn(dot + 1, "0123456789");
        if (frac_len == 0 || dot[1 + frac_len] != '\0')
            return -1;
    } else if (*dot != '\0') {
        return -1;
    }
    while (int_len > 1 && *p == '0') {
        p++;
        int_len--;
    }
    while (frac_len > 0 && dot[frac_len] == '0')
        frac_len--;
    if (int_len == 1 && *p == '0' && frac_len == 0)
        negative = 0;
    n = snprintf(out, size, "%s%.*s%s%.*s", negative ? "-" : "", (int)int_len, p,
                 frac_len > 0 ? "." : "", (int)frac_len, frac_len > 0 ? dot + 1 : "");
    return n >= 0 && (size_t)n < size ? 0 : -1;
}

/* The string member @key of @obj, or NULL (absent or null). Shapes were checked. */
static const char *str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/*
 * time_text - instant @s (member @key) as RFC 3339 UTC into @out, or ""
 * when NULL (absent). The file reader (libbilling-config) has already
 * refused sub-microsecond digits, for `billing rate` too, with the file's
 * name and the element; the check stays so that timestamptz never rounds
 * one away.
 */
static bs_status time_text(const char *key, const char *s, char *out, bs_error *err)
{
    billing_time_t t;
    char msg[MSG_MAX];

    out[0] = '\0';
    if (s == NULL)
        return BS_OK;
    if (billing_time_parse(s, &t, msg, sizeof(msg)) != BILLING_OK)
        return bs_error_set(err, BS_ERR_INVALID, "%.64s: %.400s", key, msg);
    if (t % 1000 != 0)
        return bs_error_set(err, BS_ERR_INVALID,
                            "%.64s '%.64s': the store keeps instants to the microsecond", key, s);
    billing_time_format(t, out, TIME_TEXT);
    return BS_OK;
}

/* NULL for an empty time text: SQL NULL. */
static const char *or_null(const char *s)
{
    return s[0] != '\0' ? s : NULL;
}

/* ---------------------------------------------------------------------- */
/* Validation                                                              */
/* ---------------------------------------------------------------------- */

/*
 * Read @path into *@keep (*@keep_len bytes): the price book (@tree
 * non-NULL, small: LOAD_FILE_MAX) is applied to @cat with its parser and
 * kept as its JSON tree too, its md5 in @md5; the accounts file
 * (BILLING_CONFIG_FILE_MAX) is checked and copied later (check_accounts)
 * unless already loaded.
 */
static bs_status read_file(const char *path, billing_catalog *cat, json_t **tree,
                           char md5[2 * BS_MD5_LEN + 1], char **keep, size_t *keep_len,
                           bs_error *err)
{
    char msg[MSG_MAX];
    json_error_t jerr;
    char *text = NULL;
    size_t len;
    int rc;

    if (bc_read_file(path, tree != NULL ? LOAD_FILE_MAX : BILLING_CONFIG_FILE_MAX, &text, &len, msg,
                     sizeof(msg)) != 0)
        return bs_error_set(err, BS_ERR_INVALID, "%s", msg);
    *keep = text;
    *keep_len = len;
    if (tree == NULL)
        return BS_OK;
    rc = billing_config_pricebook_parse(cat, text, len, path, msg, sizeof(msg));
    if (rc == 0) {
        bs_md5_hex(text, len, md5);
        *tree = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (*tree == NULL) {
            snprintf(msg, sizeof(msg), "%s: %s", path, jerr.text);
            rc = -1;
        }
    }
    if (rc != 0)
        return bs_error_set(err, BS_ERR_INVALID, "%s", msg);
    return BS_OK;
}

/*
 * Read both files and check the price book (small); the accounts file is
 * checked by check_accounts. The digest that SQL_DIGEST_GET looks up is
 * the md5 of the accounts file's md5, the price book file's md5 and the
 * book id: the accounts file was checked against that price book, so the
 * same three need no second check.
 */
static bs_status read_files(load_ctx *lc, bs_error *err)
{
    char book_md5[2 * BS_MD5_LEN + 1];
    char key[4 * BS_MD5_LEN + BS_BOOK_ID_MAX + 4];
    int n;
    bs_status st;

    lc->cat = billing_catalog_new();
    lc->zones = billing_config_zones_new();
    if (lc->cat == NULL || lc->zones == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "loading: out of memory");
    st = read_file(lc->pricebook_path, lc->cat, &lc->book, book_md5, &lc->book_text, &lc->book_len,
                   err);
    if (st == BS_OK && lc->accounts_path != NULL)
        st = read_file(lc->accounts_path, NULL, NULL, NULL, &lc->accounts, &lc->accounts_len, err);
    if (st != BS_OK || lc->accounts == NULL)
        return st;
    bs_md5_hex(lc->accounts, lc->accounts_len, lc->accounts_md5);
    n = snprintf(key, sizeof(key), "%s %s %s", lc->accounts_md5, book_md5, lc->book_id);
    bs_md5_hex(key, (size_t)n, lc->accounts_md5);
    return BS_OK;
}

/* Release what the check of the files holds. */
static void check_done(load_ctx *lc)
{
    billing_catalog_destroy(lc->cat);
    billing_config_zones_destroy(lc->zones);
    lc->cat = NULL;
    lc->zones = NULL;
}

/*
 * Everything `billing rate` would check, including what only a rater
 * finds: the accounts file applied to the catalog of the price book
 * (@each, unless NULL, told about each element applied: the rows are
 * copied from this one parse; when it stops the parse, it sets @err and
 * *@each_st, returned), then a rater built from it. Once per load
 * (lc->checked), whatever attempt; the catalog of every account is freed
 * once checked.
 */
static bs_status check_accounts(load_ctx *lc, billing_config_each_fn each, void *each_arg,
                                const bs_status *each_st, bs_error *err)
{
    billing_rater *rater = NULL;
    char msg[MSG_MAX];

    if (lc->checked)
        return BS_OK;
    lc->applied = lc->accounts != NULL;
    if (lc->accounts != NULL &&
        billing_config_accounts_parse_each(lc->cat, lc->zones, lc->accounts, lc->accounts_len,
                                           lc->accounts_path, each, each_arg, msg,
                                           sizeof(msg)) != BILLING_OK)
        return each_st != NULL && *each_st != BS_OK ? *each_st
                                                    : bs_error_set(err, BS_ERR_INVALID, "%s", msg);
    billing_rater_new(lc->cat, &rater, msg, sizeof(msg));
    if (rater == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "%s%s%s: %s", lc->pricebook_path,
                            lc->accounts_path != NULL ? ", " : "",
                            lc->accounts_path != NULL ? lc->accounts_path : "", msg);
    billing_rater_destroy(rater);
    lc->checked = 1;
    check_done(lc);
    return BS_OK;
}

/* ---------------------------------------------------------------------- */
/* Rows: copied to load_rows, then written set-based                       */
/* ---------------------------------------------------------------------- */

#define ROW_PARAMS 9
#define ROW_STMTS 3

/* Text that the parameters of one row point into. */
typedef struct row_buf {
    char time1[TIME_TEXT];
    char time2[TIME_TEXT];
    char num1[NUM_TEXT];
    char num2[NUM_TEXT];
} row_buf;

/*
 * An element of a file: a JSON tree (a plan of the price book) or an
 * element of the accounts file as libbilling-config's check parsed it.
 */
typedef struct row_src {
    const json_t *json; /* NULL: @el */
    const billing_config_element *el;
} row_src;

/* String member @key of @s, or NULL. */
static const char *src_str(const row_src *s, const char *key)
{
    return s->json != NULL ? str(s->json, key) : billing_config_element_string(s->el, key);
}

/* Integer member @key of @s, or 0. */
static long long src_int(const row_src *s, const char *key)
{
    return s->json != NULL ? (long long)json_integer_value(json_object_get(s->json, key))
                           : billing_config_element_integer(s->el, key);
}

/* String @i of array member @key of @s, or NULL past its end. */
static const char *src_item(const row_src *s, const char *key, size_t i)
{
    return s->json != NULL ? json_string_value(json_array_get(json_object_get(s->json, key), i))
                           : billing_config_element_item(s->el, key, i);
}

/* Fill the ROW_PARAMS @params of element @src, their text in @buf. */
typedef bs_status (*row_params_fn)(const row_src *src, const char **params, row_buf *buf,
                                   bs_error *err);

/*
 * How rows of one kind are written: the statements run over its rows in
 * load_rows (SQL_ROWS), in order, and what they count. Statement `added`
 * counts the rows added, `changed` (if any) the rows changed, `differs`
 * (if any) returns the first row refused; the other rows are unchanged.
 */
typedef struct row_kind {
    bs_load_kind kind;
    const char *array; /* the file's array: "plans", "accounts"... */
    row_params_fn params;
    int nparams;                     /* how many of the ROW_PARAMS it fills */
    const char *stmts[ROW_STMTS];    /* NULL: no more statements */
    const char *add_first;           /* stmts[added] without SQL_ON_CONFLICT, tried first */
    const char *if_empty[ROW_STMTS]; /* NULL, or run before stmts[s] (SQL_NO_NESTLOOP_IF_EMPTY) */
    int added;
    int changed;
    int differs;
    const char *noun;    /* "plan": the refusal names "plan 'ID'" ... */
    const char *refusal; /* ... then says why */
} row_kind;

/* Plans come from the price book's tree only. */
static bs_status plan_params(const row_src *src, const char **params, row_buf *buf, bs_error *err)
{
    const json_t *p = src->json;

    (void)buf;
    (void)err;
    params[0] = str(p, "id");
    params[1] = str(p, "period");
    params[2] = str(p, "model");
    params[3] = str(p, "region");
    params[4] = json_is_true(json_object_get(p, "refundable")) ? "true" : "false";
    return BS_OK;
}

static bs_status account_params(const row_src *a, const char **params, row_buf *buf, bs_error *err)
{
    (void)buf;
    (void)err;
    params[0] = src_str(a, "id");
    params[1] = src_str(a, "currency");
    params[2] = src_str(a, "time_zone");
    params[3] = src_str(a, "tax_rate");
    params[4] = src_str(a, "name");
    params[5] = src_str(a, "email");
    params[6] = src_str(a, "billing_address");
    params[7] = src_str(a, "tax_id");
    params[8] = src_str(a, "language") != NULL ? src_str(a, "language") : "en";
    return BS_OK;
}

static bs_status sub_params(const row_src *s, const char **params, row_buf *buf, bs_error *err)
{
    bs_status st = time_text("start", src_str(s, "start"), buf->time1, err);

    if (st == BS_OK)
        st = time_text("cancelled_at", src_str(s, "cancelled_at"), buf->time2, err);
    snprintf(buf->num1, NUM_TEXT, "%lld", src_int(s, "terms"));
    params[0] = src_str(s, "id");
    params[1] = src_str(s, "account");
    params[2] = src_str(s, "resource");
    params[3] = src_str(s, "plan");
    params[4] = buf->time1;
    params[5] = buf->num1;
    params[6] = or_null(buf->time2);
    return st;
}

/* "applies_to" as billing_charge_kind bits (checked: an array of kinds). */
static unsigned grant_kinds(const row_src *g)
{
    unsigned kinds = 0;
    const char *k;
    size_t i;

    for (i = 0;; i++) {
        k = src_item(g, "applies_to", i);
        if (k == NULL)
            break;
        if (strcmp(k, "usage") == 0)
            kinds |= BILLING_CHARGE_USAGE;
        else if (strcmp(k, "subscription") == 0)
            kinds |= BILLING_CHARGE_SUBSCRIPTION;
    }
    return kinds;
}

static bs_status grant_params(const row_src *g, const char **params, row_buf *buf, bs_error *err)
{
    bs_status st = time_text("granted_at", src_str(g, "granted_at"), buf->time1, err);

    if (st == BS_OK)
        st = time_text("expires_at", src_str(g, "expires_at"), buf->time2, err);
    snprintf(buf->num1, NUM_TEXT, "%u", grant_kinds(g));
    snprintf(buf->num2, NUM_TEXT, "%lld", src_int(g, "priority"));
    params[0] = src_str(g, "id");
    params[1] = src_str(g, "account");
    params[2] = src_str(g, "amount");
    params[3] = buf->time1;
    params[4] = buf->time2;
    params[5] = buf->num1;
    params[6] = buf->num2;
    return st;
}

static const row_kind plan_rows = {
    BS_LOAD_PLANS,
    "plans",
    plan_params,
    5,
    {SQL_PLAN_INSERT, SQL_PLAN_DIFFERS, NULL},
    SQL_PLAN_ADD,
    {SQL_NO_NESTLOOP_IF_EMPTY("plans"), NULL, NULL},
    0,
    -1,
    1,
    "plan",
    "is stored with another definition: plans never change, give the new one a new id"};

static const row_kind account_rows = {BS_LOAD_ACCOUNTS,
                                      "accounts",
                                      account_params,
                                      9,
                                      {SQL_ACCOUNT_INSERT, SQL_ACCOUNT_UPDATE, NULL},
                                      SQL_ACCOUNT_ADD,
                                      {SQL_NO_NESTLOOP_IF_EMPTY("accounts"), NULL, NULL},
                                      0,
                                      1,
                                      -1,
                                      "account",
                                      ""};

static const row_kind subscription_rows = {
    BS_LOAD_SUBSCRIPTIONS,
    "subscriptions",
    sub_params,
    7,
    {SQL_SUB_INSERT, SQL_SUB_CANCEL, SQL_SUB_DIFFERS},
    SQL_SUB_ADD,
    {SQL_NO_NESTLOOP_IF_EMPTY("subscriptions"), NULL, NULL},
    0,
    1,
    2,
    "subscription",
    "is stored with other terms: only a first cancellation may change a subscription"};

static const row_kind grant_rows = {
    BS_LOAD_GRANTS,
    "grants",
    grant_params,
    7,
    {SQL_GRANT_INSERT, SQL_GRANT_LEDGER, SQL_GRANT_DIFFERS},
    SQL_GRANT_ADD,
    {SQL_NO_NESTLOOP_IF_EMPTY("credit_grants"), SQL_NO_NESTLOOP_IF_EMPTY("credit_ledger"), NULL},
    0,
    -1,
    2,
    "credit grant",
    "is stored with other terms: grants never change, give the new one a new id"};

/* Kinds whose rows come from the accounts file, in the order they are written. */
static const row_kind *const account_kinds[] = {&account_rows, &subscription_rows, &grant_rows};

/* Element @src of kind @k, the @n-th of its array (from 1), as a row of load_rows. */
static bs_status copy_item(bs_copy *cp, const row_kind *k, const row_src *src, size_t n,
                           bs_error *err)
{
    const char *params[ROW_PARAMS];
    row_buf buf;
    int i;
    bs_status st = k->params(src, params, &buf, err);

    if (st != BS_OK)
        return st;
    bs_copy_row(cp);
    bs_copy_int2(cp, (int16_t)k->kind);
    bs_copy_int8(cp, (int64_t)n);
    for (i = 0; i < ROW_PARAMS; i++)
        bs_copy_text(cp, i < k->nparams ? params[i] : NULL);
    return BS_OK;
}

/* What copy_checked needs. */
typedef struct copy_ctx {
    load_ctx *lc;
    bs_copy *cp;
    bs_error *err;
    bs_status st; /* why copy_checked stopped the parse */
} copy_ctx;

/* The kind of the accounts file's array @array, or NULL (then cc->st says why). */
static const row_kind *array_kind(copy_ctx *cc, const char *array)
{
    size_t i;

    for (i = 0; i < sizeof(account_kinds) / sizeof(account_kinds[0]); i++) {
        if (strcmp(account_kinds[i]->array, array) == 0)
            return account_kinds[i];
    }
    cc->st = bs_error_set(cc->err, BS_ERR_FATAL, "%s: unexpected array '%.32s'",
                          cc->lc->accounts_path, array);
    return NULL;
}

/*
 * Whether element @index of @array, @len bytes, is more than `billing
 * load` reads in one element (then cc->st says so).
 */
static int element_too_big(copy_ctx *cc, const char *array, size_t index, size_t len)
{
    if (len <= LOAD_ELEMENT_MAX)
        return 0;
    cc->st = bs_error_set(cc->err, BS_ERR_INVALID,
                          "%s: %s[%zu]: %zu bytes, more than the %u MiB `billing load` reads "
                          "in one element",
                          cc->lc->accounts_path, array, index, len, LOAD_ELEMENT_MAX >> 20);
    return 1;
}

/* Element @index of @k's array as a row, counted; 0, or -1 with cc->st. */
static int copy_counted(copy_ctx *cc, const row_kind *k, const row_src *src, size_t index)
{
    cc->st = copy_item(cc->cp, k, src, index + 1, cc->err);
    if (cc->st != BS_OK)
        return -1;
    cc->lc->copied[k->kind]++;
    return 0;
}

/*
 * One element of the accounts file as the check applied it (a
 * billing_config_each_fn): copied from libbilling-config's parse, which
 * is the only parse of the file.
 */
static int copy_checked(void *arg, const char *array, size_t index, const billing_config_element *e)
{
    copy_ctx *cc = arg;
    const row_kind *k = array_kind(cc, array);
    row_src src;

    if (k == NULL || element_too_big(cc, array, index, billing_config_element_size(e)))
        return -1;
    src.json = NULL;
    src.el = e;
    return copy_counted(cc, k, &src, index);
}

/*
 * A new catalog of the price book for an attempt after one that applied
 * the accounts (the transaction retried during the copy or after it):
 * the rows are copied from the check's parse, so it runs again.
 */
static bs_status check_again(load_ctx *lc, bs_error *err)
{
    char msg[MSG_MAX];

    if (!lc->applied)
        return BS_OK;
    check_done(lc);
    lc->applied = 0;
    lc->checked = 0;
    lc->cat = billing_catalog_new();
    lc->zones = billing_config_zones_new();
    if (lc->cat == NULL || lc->zones == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "loading: out of memory");
    if (billing_config_pricebook_parse(lc->cat, lc->book_text, lc->book_len, lc->pricebook_path,
                                       msg, sizeof(msg)) != BILLING_OK)
        return bs_error_set(err, BS_ERR_FATAL, "%s", msg); /* it was accepted before */
    return BS_OK;
}

/*
 * The accounts file's rows, copied from the check's own parse
 * (copy_checked), then the rater built as `billing rate` builds it.
 */
static bs_status copy_accounts(load_ctx *lc, copy_ctx *cc, bs_error *err)
{
    bs_status st = check_again(lc, err);

    if (st != BS_OK)
        return st;
    return check_accounts(lc, copy_checked, cc, &cc->st, err);
}

/*
 * Every row of both files into load_rows: the book's plans from its tree,
 * then the accounts file's arrays element by element (memory does not
 * grow with the file), in one COPY; then ANALYZE, so that the statements
 * are planned for the rows there are.
 */
static bs_status copy_rows(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *plans = json_object_get(lc->book, "plans");
    copy_ctx cc;
    row_src src;
    size_t i;
    bs_status st = bs_command(c, SQL_ROWS_TABLE, 0, NULL, NULL, err);

    if (st != BS_OK)
        return st;
    cc.lc = lc;
    cc.err = err;
    cc.st = BS_OK;
    cc.cp = bs_copy_begin(c, SQL_ROWS_COPY, ROWS_COPY_COLS, BS_COPY_BINARY, err);
    if (cc.cp == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < json_array_size(plans) && st == BS_OK; i++) {
        src.json = json_array_get(plans, i);
        src.el = NULL;
        st = copy_item(cc.cp, &plan_rows, &src, i + 1, err);
    }
    lc->copied[BS_LOAD_PLANS] = json_array_size(plans);
    if (lc->accounts != NULL && !lc->accounts_known && st == BS_OK)
        st = copy_accounts(lc, &cc, err);
    if (st != BS_OK) {
        bs_copy_abort(cc.cp);
        return st;
    }
    st = bs_copy_end(cc.cp, NULL, err);
    if (st == BS_OK)
        st = bs_command(c, SQL_ROWS_ANALYZE, 0, NULL, NULL, err);
    return st;
}

/*
 * The rows of kind @k whose id is not stored, added (*@count of them):
 * k->add_first in a savepoint, and only if a concurrent writer's row made
 * it fail with unique_violation, k->stmts[k->added], which skips that row
 * (SQL_ON_CONFLICT).
 */
static bs_status add_rows(bs_conn *c, const row_kind *k, const char *const *params, int64_t *count,
                          bs_error *err)
{
    bs_error first;
    bs_status st = bs_command(c, "SAVEPOINT load_add", 0, NULL, NULL, err);

    if (st != BS_OK)
        return st;
    memset(&first, 0, sizeof(first));
    st = bs_command(c, k->add_first, 1, params, count, &first);
    if (st == BS_OK)
        return bs_command(c, "RELEASE SAVEPOINT load_add", 0, NULL, NULL, err);
    if (strcmp(first.sqlstate, "23505") != 0) {
        if (err != NULL)
            *err = first;
        return st;
    }
    st = bs_command(c, "ROLLBACK TO SAVEPOINT load_add", 0, NULL, NULL, err);
    if (st == BS_OK)
        st = bs_command(c, "RELEASE SAVEPOINT load_add", 0, NULL, NULL, err);
    *count = 0;
    if (st == BS_OK)
        st = bs_command(c, k->stmts[k->added], 1, params, count, err);
    return st;
}

/* Statement @s of kind @k (not its `differs`), *@count the rows it wrote. */
static bs_status run_stmt(bs_conn *c, const row_kind *k, int s, const char *const *params,
                          int64_t *count, bs_error *err)
{
    const char *if_empty = k->if_empty[s];
    bs_status st = BS_OK;

    if (if_empty != NULL)
        st = bs_command(c, if_empty, 0, NULL, NULL, err);
    if (st == BS_OK && s == k->added && k->add_first != NULL)
        st = add_rows(c, k, params, count, err);
    else if (st == BS_OK)
        st = bs_command(c, k->stmts[s], 1, params, count, err);
    if (st == BS_OK && if_empty != NULL)
        st = bs_command(c, SQL_NESTLOOP_RESET, 0, NULL, NULL, err);
    return st;
}

/* Run the statements of kind @k over its rows in load_rows; count them or refuse one. */
static bs_status load_rows(bs_conn *c, load_ctx *lc, const row_kind *k, bs_error *err)
{
    char kind[NUM_TEXT];
    const char *params[1];
    int64_t count;
    size_t added = 0;
    size_t changed = 0;
    PGresult *res;
    int s;
    bs_status st = BS_OK;

    snprintf(kind, sizeof(kind), "%d", (int)k->kind);
    params[0] = kind;
    /* The accounts file's digest is stored: its rows are stored as they are (SQL_DIGEST_GET). */
    s = lc->accounts_known && k->kind != BS_LOAD_PLANS ? ROW_STMTS : 0;
    for (; s < ROW_STMTS && k->stmts[s] != NULL && st == BS_OK; s++) {
        /* All rows were added from the file (its ids are unique): none differs. */
        if (s > k->added && (s == k->changed || s == k->differs) && added == lc->copied[k->kind])
            continue;
        if (s != k->differs) {
            count = 0;
            st = run_stmt(c, k, s, params, &count, err);
            if (s == k->added)
                added = (size_t)count;
            else if (s == k->changed)
                changed = (size_t)count;
            continue;
        }
        res = bs_query(c, k->stmts[s], 1, params, err);
        if (res == NULL)
            return err != NULL ? err->status : BS_ERR_FATAL;
        if (PQntuples(res) > 0)
            st = bs_error_set(err, BS_ERR_CONSTRAINT, "%s '%s' %s", k->noun, PQgetvalue(res, 0, 1),
                              k->refusal);
        PQclear(res);
    }
    if (st != BS_OK)
        return st;
    lc->counts->added[k->kind] += added;
    lc->counts->changed[k->kind] += changed;
    lc->counts->unchanged[k->kind] += lc->copied[k->kind] - added - changed;
    rows_written(lc, lc->copied[k->kind]);
    return BS_OK;
}

/*
 * Whether the accounts file's digest is stored (then lc->accounts_known,
 * and its counts as the rows copied): run before copy_rows, it starts the
 * attempt's counts of rows copied.
 */
static bs_status digest_get(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const char *params[1];
    PGresult *res;

    memset(lc->copied, 0, sizeof(lc->copied));
    lc->accounts_known = 0;
    if (lc->accounts == NULL)
        return BS_OK;
    params[0] = lc->accounts_md5;
    res = bs_query(c, SQL_DIGEST_GET, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (PQntuples(res) == 1) {
        lc->accounts_known = 1;
        lc->copied[BS_LOAD_ACCOUNTS] = strtoul(PQgetvalue(res, 0, 0), NULL, 10);
        lc->copied[BS_LOAD_SUBSCRIPTIONS] = strtoul(PQgetvalue(res, 0, 1), NULL, 10);
        lc->copied[BS_LOAD_GRANTS] = strtoul(PQgetvalue(res, 0, 2), NULL, 10);
    }
    PQclear(res);
    return BS_OK;
}

/* Record the accounts file just loaded as the stored digest (migration 0020). */
static bs_status digest_put(bs_conn *c, const load_ctx *lc, bs_error *err)
{
    char counts[3][NUM_TEXT];
    const char *params[4];

    if (lc->accounts == NULL || lc->accounts_known)
        return BS_OK;
    snprintf(counts[0], NUM_TEXT, "%zu", lc->copied[BS_LOAD_ACCOUNTS]);
    snprintf(counts[1], NUM_TEXT, "%zu", lc->copied[BS_LOAD_SUBSCRIPTIONS]);
    snprintf(counts[2], NUM_TEXT, "%zu", lc->copied[BS_LOAD_GRANTS]);
    params[0] = lc->accounts_md5;
    params[1] = counts[0];
    params[2] = counts[1];
    params[3] = counts[2];
    return bs_command(c, SQL_DIGEST_PUT, 4, params, NULL, err);
}

/* ---------------------------------------------------------------------- */
/* Price book and versions                                                 */
/* ---------------------------------------------------------------------- */

/* Most parameters a statement of the book takes (SQL_ISSUER_UPSERT's). */
#define QUERY_PARAMS_MAX 9

/*
 * query_owned - run @sql with the @n text parameters that follow (NULL:
 * SQL NULL), then free @owned (one of them that the caller allocated, or
 * NULL) whatever the outcome. Returns BS_OK with the result in *@res (the
 * caller PQclears it), or the error (@err says it) with *@res NULL.
 */
static bs_status query_owned(bs_conn *c, const char *sql, char *owned, PGresult **res,
                             bs_error *err, int n, ...)
{
    const char *params[QUERY_PARAMS_MAX];
    va_list ap;
    int i;

    va_start(ap, n);
    for (i = 0; i < n && i < QUERY_PARAMS_MAX; i++)
        params[i] = va_arg(ap, const char *);
    va_end(ap);
    *res = n <= QUERY_PARAMS_MAX ? bs_query(c, sql, n, params, err) : NULL;
    free(owned);
    if (*res != NULL)
        return BS_OK;
    if (n > QUERY_PARAMS_MAX)
        return bs_error_set(err, BS_ERR_FATAL, "load: %d parameters, more than %d", n,
                            QUERY_PARAMS_MAX);
    return err != NULL ? err->status : BS_ERR_FATAL;
}

static bs_status load_book(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const char *rounding = str(lc->book, "rounding");
    const char *params[3];
    int64_t added = 0;
    int64_t differs = 0;
    bs_status st;

    params[0] = lc->book_id;
    params[1] = str(lc->book, "currency");
    params[2] = rounding != NULL ? rounding : "half-up";
    st = bs_command(c, SQL_BOOK_INSERT, 3, params, &added, err);
    if (st == BS_OK)
        st = bs_command(c, SQL_BOOK_DIFFERS, 3, params, &differs, err);
    if (st != BS_OK)
        return st;
    if (differs > 0)
        return bs_error_set(err, BS_ERR_CONSTRAINT,
                            "price book '%s' is stored with another currency or rounding: it "
                            "would change what was billed; load this file as another --book",
                            lc->book_id);
    if (added > 0)
        lc->counts->added[BS_LOAD_BOOKS]++;
    else
        lc->counts->unchanged[BS_LOAD_BOOKS]++;
    return BS_OK;
}

/* @n bytes as bytea's hex input ("\\x89504e..."); malloc'd, NULL when out of memory. */
static char *bytea_hex(const char *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *out = malloc(2 * n + 3);
    size_t i;

    if (out == NULL)
        return NULL;
    out[0] = '\\';
    out[1] = 'x';
    for (i = 0; i < n; i++) {
        out[2 + 2 * i] = digits[(unsigned char)bytes[i] >> 4];
        out[3 + 2 * i] = digits[(unsigned char)bytes[i] & 15];
    }
    out[2 + 2 * n] = '\0';
    return out;
}

/* The [kind, key, language, name] rows of "names" @kind of the book onto @rows. */
static int name_rows(const json_t *names, const char *kind, const char *as, json_t *rows)
{
    const char *key;
    json_t *v;

    json_object_foreach(json_object_get(names, kind), key, v)
    {
        const char *lang;
        json_t *text;

        if (json_is_string(v)) {
            if (json_array_append_new(rows, json_pack("[s,s,s,O]", as, key, "en", v)) != 0)
                return -1;
            continue;
        }
        json_object_foreach(v, lang, text)
        {
            if (json_array_append_new(rows, json_pack("[s,s,s,O]", as, key, lang, text)) != 0)
                return -1;
        }
    }
    return 0;
}

/* The book's display names, when the file has them (names it leaves out stay stored). */
static bs_status load_names(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *names = json_object_get(lc->book, "names");
    json_t *rows;
    char *text = NULL;
    PGresult *res;
    size_t given, added, renamed;
    bs_status st;

    if (names == NULL)
        return BS_OK;
    rows = json_array();
    if (rows == NULL || name_rows(names, "models", "model", rows) != 0 ||
        name_rows(names, "regions", "region", rows) != 0 ||
        name_rows(names, "plans", "plan", rows) != 0 ||
        (text = json_dumps(rows, JSON_COMPACT)) == NULL) {
        json_decref(rows);
        return bs_error_set(err, BS_ERR_NOMEM, "display names: out of memory");
    }
    json_decref(rows);
    st = query_owned(c, SQL_NAMES_UPSERT, text, &res, err, 1, text);
    if (st != BS_OK)
        return st;
    given = strtoul(PQgetvalue(res, 0, 0), NULL, 10);
    added = strtoul(PQgetvalue(res, 0, 1), NULL, 10);
    renamed = strtoul(PQgetvalue(res, 0, 2), NULL, 10);
    PQclear(res);
    lc->counts->added[BS_LOAD_NAMES] += added;
    lc->counts->changed[BS_LOAD_NAMES] += renamed;
    lc->counts->unchanged[BS_LOAD_NAMES] += given - added - renamed;
    return BS_OK;
}

/* The book's issuer, when the file has one (a file without leaves the stored one). */
static bs_status load_issuer(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *is = json_object_get(lc->book, "issuer");
    const json_t *days = json_object_get(is, "payment_terms_days");
    char resolved[4096];
    char msg[MSG_MAX];
    char num[NUM_TEXT];
    char *logo = NULL;
    char *hex = NULL;
    size_t len = 0;
    PGresult *res;
    bs_status st = BS_OK;

    if (is == NULL)
        return BS_OK;
    if (str(is, "logo") != NULL) {
        if (bc_read_logo(lc->pricebook_path, str(is, "logo"), resolved, sizeof(resolved), &logo,
                         &len, msg, sizeof(msg)) != 0)
            return bs_error_set(err, BS_ERR_INVALID, "%s: issuer.logo: %s", lc->pricebook_path,
                                msg);
        hex = bytea_hex(logo, len);
        free(logo);
        if (hex == NULL)
            return bs_error_set(err, BS_ERR_NOMEM, "issuer logo: out of memory");
    }
    snprintf(num, sizeof(num), "%lld", days != NULL ? (long long)json_integer_value(days) : 30LL);
    st = query_owned(c, SQL_ISSUER_UPSERT, hex, &res, err, 9, lc->book_id, str(is, "legal_name"),
                     str(is, "address"), str(is, "tax_id"), str(is, "contact"),
                     str(is, "payment_instructions"), str(is, "footer"), hex, num);
    if (st != BS_OK)
        return st;
    if (PQntuples(res) == 0)
        lc->counts->unchanged[BS_LOAD_ISSUERS]++;
    else if (strcmp(PQgetvalue(res, 0, 0), "true") == 0)
        lc->counts->added[BS_LOAD_ISSUERS]++;
    else
        lc->counts->changed[BS_LOAD_ISSUERS]++;
    PQclear(res);
    return st;
}

static int compare_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "rate|meter|model|region|price" or "fee|plan|fee", canonical decimals; malloc'd. */
static char *content_line(const json_t *item, int is_rate)
{
    char amount[NUM_TEXT * 4];
    const char *value = str(item, is_rate ? "price" : "fee");
    size_t size;
    char *line;

    if (value == NULL || bs_decimal_canonical(value, amount, sizeof(amount)) != 0)
        return NULL;
    size = strlen(amount) + 16 +
           (is_rate ? strlen(str(item, "meter")) + strlen(str(item, "model")) +
                          strlen(str(item, "region"))
                    : strlen(str(item, "plan")));
    line = malloc(size);
    if (line == NULL)
        return NULL;
    if (is_rate)
        snprintf(line, size, "rate|%s|%s|%s|%s", str(item, "meter"), str(item, "model"),
                 str(item, "region"), amount);
    else
        snprintf(line, size, "fee|%s|%s", str(item, "plan"), amount);
    return line;
}

/*
 * version_content - the canonical text of price version @v whose md5 is
 * its content hash: its label, then its rates and fees, sorted, with
 * decimals in canonical form (so "0.60" and "0.6" are the same price).
 * Returns a malloc'd string or NULL when out of memory.
 */
static char *version_content(const json_t *v)
{
    const json_t *rates = json_object_get(v, "rates");
    const json_t *fees = json_object_get(v, "plan_fees");
    size_t n_rates = json_array_size(rates);
    size_t n = n_rates + json_array_size(fees);
    char **lines = calloc(n + 1, sizeof(*lines));
    size_t total = strlen(str(v, "id")) + 8;
    char *text = NULL;
    size_t len;
    size_t i;

    if (lines == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        lines[i] = i < n_rates ? content_line(json_array_get(rates, i), 1)
                               : content_line(json_array_get(fees, i - n_rates), 0);
        if (lines[i] == NULL)
            goto done;
        total += strlen(lines[i]) + 1;
    }
    qsort(lines, n, sizeof(*lines), compare_lines);
    text = malloc(total);
    if (text == NULL)
        goto done;
    len = (size_t)snprintf(text, total, "label|%s\n", str(v, "id"));
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, total - len, "%s\n", lines[i]);
done:
    for (i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    return text;
}

/* The rates and fees of new version row @id, pipelined. */
static bs_status load_version_rows(bs_conn *c, const json_t *v, const char *id, bs_error *err)
{
    const json_t *rates = json_object_get(v, "rates");
    const json_t *fees = json_object_get(v, "plan_fees");
    const char *params[5];
    const json_t *item;
    size_t i;
    bs_status st = bs_pipeline_begin(c, err);

    if (st != BS_OK)
        return st;
    /* A failed send is reported again by bs_pipeline_end. */
    params[0] = id;
    for (i = 0; i < json_array_size(rates); i++) {
        item = json_array_get(rates, i);
        params[1] = str(item, "meter");
        params[2] = str(item, "model");
        params[3] = str(item, "region");
        params[4] = str(item, "price");
        bs_pipeline_send(c, NULL, SQL_RATE_INSERT, 5, params, NULL, NULL);
    }
    for (i = 0; i < json_array_size(fees); i++) {
        item = json_array_get(fees, i);
        params[1] = str(item, "plan");
        params[2] = str(item, "fee");
        bs_pipeline_send(c, NULL, SQL_FEE_INSERT, 3, params, NULL, NULL);
    }
    return bs_pipeline_end(c, err);
}

static bs_status load_version(bs_conn *c, load_ctx *lc, const json_t *v, bs_error *err)
{
    char from[TIME_TEXT];
    char *content;
    PGresult *res;
    bs_status st = time_text("effective_from", str(v, "effective_from"), from, err);

    if (st != BS_OK)
        return st;
    content = version_content(v);
    if (content == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "price version '%s': out of memory", str(v, "id"));
    st = query_owned(c, SQL_VERSION_INSERT, content, &res, err, 4, lc->book_id, str(v, "id"), from,
                     content);
    if (st != BS_OK)
        return st;
    if (PQntuples(res) == 0) {
        lc->counts->unchanged[BS_LOAD_VERSIONS]++;
        PQclear(res);
        return BS_OK;
    }
    if (strcmp(PQgetvalue(res, 0, 1), "1") == 0)
        lc->counts->added[BS_LOAD_VERSIONS]++;
    else
        lc->counts->changed[BS_LOAD_VERSIONS]++;
    st = load_version_rows(c, v, PQgetvalue(res, 0, 0), err);
    PQclear(res);
    return st;
}

static bs_status load_versions(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *versions = json_object_get(lc->book, "versions");
    size_t i;
    bs_status st = BS_OK;

    for (i = 0; i < json_array_size(versions) && st == BS_OK; i++) {
        st = load_version(c, lc, json_array_get(versions, i), err);
        rows_written(lc, 1);
    }
    return st;
}

/* ---------------------------------------------------------------------- */
/* Entry point                                                             */
/* ---------------------------------------------------------------------- */

/* The whole load, one transaction (bs_transaction may run it again). */
static bs_status load_tx(bs_conn *c, void *arg, bs_error *err)
{
    load_ctx *lc = arg;
    bs_status st;

    memset(lc->counts, 0, sizeof(*lc->counts));
    lc->rows_done = 0;
    st = bs_command(c, SQL_LOCK, 0, NULL, NULL, err);
    if (st == BS_OK)
        st = bs_command(c, SQL_WORK_MEM, 0, NULL, NULL, err);
    if (st == BS_OK)
        st = digest_get(c, lc, err);
    /* The accounts file is checked as its rows are copied (copy_accounts). */
    if (st == BS_OK)
        st = copy_rows(c, lc, err);
    lc->rows_total = count_rows(lc);
    if (st == BS_OK)
        st = load_book(c, lc, err);
    if (st == BS_OK)
        st = load_issuer(c, lc, err);
    if (st == BS_OK)
        st = load_names(c, lc, err);
    if (st == BS_OK)
        st = load_rows(c, lc, &plan_rows, err);
    if (st == BS_OK)
        st = load_versions(c, lc, err);
    if (st == BS_OK && lc->accounts != NULL)
        st = load_rows(c, lc, &account_rows, err);
    if (st == BS_OK && lc->accounts != NULL)
        st = load_rows(c, lc, &subscription_rows, err);
    if (st == BS_OK && lc->accounts != NULL)
        st = load_rows(c, lc, &grant_rows, err);
    if (st == BS_OK)
        st = digest_put(c, lc, err);
    /* Delivered at commit only, so listeners never read a half-loaded catalog. */
    if (st == BS_OK)
        st = bs_command(c, SQL_NOTIFY, 1, &lc->book_id, NULL, err);
    return st;
}

bs_status bs_load_catalog(bs_conn *c, const char *book_id, const char *pricebook_path,
                          const char *accounts_path, bs_load_counts *counts, bs_error *err)
{
    return bs_load_catalog_progress(c, book_id, pricebook_path, accounts_path, counts, NULL, NULL,
                                    err);
}

bs_status bs_load_catalog_progress(bs_conn *c, const char *book_id, const char *pricebook_path,
                                   const char *accounts_path, bs_load_counts *counts,
                                   bs_load_progress_fn progress, void *progress_arg, bs_error *err)
{
    load_ctx lc;
    bs_status st;

    memset(counts, 0, sizeof(*counts));
    if (c == NULL || book_id == NULL || pricebook_path == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "bs_load_catalog: missing argument");
    if (strlen(book_id) > BS_BOOK_ID_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "price book id longer than %d bytes",
                            BS_BOOK_ID_MAX);
    memset(&lc, 0, sizeof(lc));
    lc.book_id = book_id;
    lc.pricebook_path = pricebook_path;
    lc.accounts_path = accounts_path;
    lc.counts = counts;
    lc.progress = progress;
    lc.progress_arg = progress_arg;
    st = read_files(&lc, err);
    /* Without an accounts file, everything is checked before the transaction. */
    if (st == BS_OK && lc.accounts == NULL)
        st = check_accounts(&lc, NULL, NULL, NULL, err);
    if (st == BS_OK)
        st = bs_transaction(c, load_tx, &lc, err);
    check_done(&lc);
    json_decref(lc.book);
    free(lc.book_text);
    free(lc.accounts);
    return st;
}
