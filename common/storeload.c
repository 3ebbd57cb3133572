/*
 * storeload.c - `billing load`: catalog files into the store. See
 * storeload.h and doc/database.md ("Loading").
 *
 * The files are first applied to a billing_catalog and a rater is built
 * from it, exactly as `billing rate` does: anything it would refuse is
 * refused here, with the same messages. Only then are the JSON trees
 * (whose shape is thereby known good) walked to write rows. Each kind of
 * row is written in a pipeline: an INSERT ... ON CONFLICT DO NOTHING
 * (counted as added), where allowed an UPDATE of what may change
 * (counted as changed), and a SELECT of stored rows that differ from the
 * file (refused: that would rewrite history).
 */
#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "configfile.h"
#include "storeload.h"
#include "util.h"
#include "zones.h"

#define MSG_MAX 1024
#define TIME_TEXT 48
#define NUM_TEXT 32

/* 'billload' in ASCII: one loader at a time per database. */
#define SQL_LOCK "SELECT pg_advisory_xact_lock(7091318301203063140)"

#define SQL_BOOK_INSERT                                                                        \
    "INSERT INTO billing.price_books (id, currency, rounding)"                                  \
    " VALUES ($1::text, $2::text, $3::text) ON CONFLICT (id) DO NOTHING"
#define SQL_BOOK_DIFFERS                                                                       \
    "SELECT 1 FROM billing.price_books WHERE id = $1::text"                                    \
    " AND (currency, rounding) IS DISTINCT FROM ($2::char(3), $3::text)"

#define SQL_PLAN_INSERT                                                                        \
    "INSERT INTO billing.plans (id, period, model, region, refundable)"                        \
    " VALUES ($1::text, $2::text, $3::text, $4::text, $5::boolean) ON CONFLICT (id) DO NOTHING"
#define SQL_PLAN_DIFFERS                                                                       \
    "SELECT 1 FROM billing.plans WHERE id = $1::text AND (period, model, region, refundable)"  \
    " IS DISTINCT FROM ($2::text, $3::text, $4::text, $5::boolean)"

/* A new revision unless the latest one of that start has the same content. */
#define SQL_VERSION_INSERT                                                                     \
    "INSERT INTO billing.price_versions (book_id, label, effective_from, revision, content_hash)" \
    " SELECT $1::text, $2::text, $3::timestamptz, coalesce(max(revision), 0) + 1, md5($4::text)" \
    " FROM billing.price_versions WHERE book_id = $1::text AND effective_from = $3::timestamptz" \
    " HAVING md5($4::text) IS DISTINCT FROM (array_agg(content_hash ORDER BY revision DESC))[1]" \
    " RETURNING id, revision"
#define SQL_RATE_INSERT                                                                        \
    "INSERT INTO billing.rates (version_id, meter, model, region, price)"                      \
    " VALUES ($1::bigint, $2::text, $3::text, $4::text, $5::numeric)"
#define SQL_FEE_INSERT                                                                         \
    "INSERT INTO billing.plan_fees (version_id, plan_id, fee)"                                 \
    " VALUES ($1::bigint, $2::text, $3::numeric)"

#define SQL_ACCOUNT_INSERT                                                                     \
    "INSERT INTO billing.accounts (id, currency, time_zone, tax_rate)"                         \
    " VALUES ($1::text, $2::text, $3::text, $4::numeric) ON CONFLICT (id) DO NOTHING"
#define SQL_ACCOUNT_UPDATE                                                                     \
    "UPDATE billing.accounts SET currency = $2::char(3), time_zone = $3::text,"               \
    " tax_rate = $4::numeric, updated_at = now() WHERE id = $1::text"                          \
    " AND (currency, time_zone, tax_rate) IS DISTINCT FROM ($2::char(3), $3::text, $4::numeric)"

#define SQL_SUB_INSERT                                                                         \
    "INSERT INTO billing.subscriptions (id, account_id, resource_id, plan_id, start_at, terms," \
    " cancelled_at) VALUES ($1::text, $2::text, $3::text, $4::text, $5::timestamptz,"          \
    " $6::integer, $7::timestamptz) ON CONFLICT (id) DO NOTHING"
#define SQL_SUB_CANCEL                                                                         \
    "UPDATE billing.subscriptions SET cancelled_at = $2::timestamptz, updated_at = now()"     \
    " WHERE id = $1::text AND cancelled_at IS NULL AND $2::timestamptz IS NOT NULL"
#define SQL_SUB_DIFFERS                                                                        \
    "SELECT 1 FROM billing.subscriptions WHERE id = $1::text AND (account_id, resource_id,"    \
    " plan_id, start_at, terms, cancelled_at) IS DISTINCT FROM ($2::text, $3::text, $4::text," \
    " $5::timestamptz, $6::integer, $7::timestamptz)"

#define SQL_GRANT_INSERT                                                                       \
    "INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at,"         \
    " expires_at, kinds, priority) SELECT $1::text, a.id, a.currency, $3::numeric,"            \
    " $4::timestamptz, $5::timestamptz, $6::smallint, $7::integer FROM billing.accounts a"     \
    " WHERE a.id = $2::text ON CONFLICT (id) DO NOTHING"
/* The grant's opening ledger entry, once. */
#define SQL_GRANT_LEDGER                                                                       \
    "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at, note)"    \
    " SELECT g.id, 'grant', trunc(g.amount * 10::numeric ^ c.digits), g.granted_at,"           \
    " 'billing load' FROM billing.credit_grants g JOIN billing.currencies c"                   \
    " ON c.code = g.currency WHERE g.id = $1::text AND NOT EXISTS (SELECT 1 FROM"              \
    " billing.credit_ledger l WHERE l.grant_id = g.id AND l.entry = 'grant')"
#define SQL_GRANT_DIFFERS                                                                      \
    "SELECT 1 FROM billing.credit_grants WHERE id = $1::text AND (account_id, amount,"         \
    " granted_at, expires_at, kinds, priority) IS DISTINCT FROM ($2::text, $3::numeric,"       \
    " $4::timestamptz, $5::timestamptz, $6::smallint, $7::integer)"

typedef struct load_ctx {
    const char *book_id;
    const char *pricebook_path;
    const char *accounts_path;
    json_t *book;     /* the price book file, checked */
    json_t *accounts; /* the accounts file, checked; NULL if none */
    bs_load_counts *counts;
} load_ctx;

const char *bs_load_kind_name(bs_load_kind kind)
{
    static const char *const names[BS_LOAD_KINDS] = {
        "price books", "plans", "price versions", "accounts", "subscriptions", "credit grants"};

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
 * time_text - instant string @key of @obj as RFC 3339 UTC into @out, or
 * "" when absent. Refuses sub-microsecond digits, which timestamptz would
 * round away.
 */
static bs_status time_text(const json_t *obj, const char *key, char *out, bs_error *err)
{
    const char *s = str(obj, key);
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

/* Read @path, apply it to @cat with @apply's parser, and keep its JSON tree. */
static bs_status read_checked(const char *path, billing_catalog *cat, bc_zones *zones,
                              json_t **tree, bs_error *err)
{
    char msg[MSG_MAX];
    json_error_t jerr;
    char *text = NULL;
    size_t len;
    int rc;

    if (bc_read_file(path, BC_CONFIG_FILE_MAX, &text, &len, msg, sizeof(msg)) != 0)
        return bs_error_set(err, BS_ERR_INVALID, "%s", msg);
    if (zones == NULL)
        rc = bc_pricebook_parse(cat, text, len, path, msg, sizeof(msg));
    else
        rc = bc_accounts_parse(cat, zones, text, len, path, msg, sizeof(msg));
    if (rc == 0) {
        *tree = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (*tree == NULL)
            snprintf(msg, sizeof(msg), "%s: %s", path, jerr.text);
    }
    free(text);
    if (rc != 0 || *tree == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "%s", msg);
    return BS_OK;
}

/* Everything `billing rate` would check, including what only a rater finds. */
static bs_status validate(load_ctx *lc, bs_error *err)
{
    billing_catalog *cat = billing_catalog_new();
    bc_zones *zones = bc_zones_new();
    billing_rater *rater = NULL;
    char msg[MSG_MAX];
    bs_status st = BS_ERR_NOMEM;

    if (cat == NULL || zones == NULL) {
        bs_error_set(err, st, "loading: out of memory");
        goto done;
    }
    st = read_checked(lc->pricebook_path, cat, NULL, &lc->book, err);
    if (st == BS_OK && lc->accounts_path != NULL)
        st = read_checked(lc->accounts_path, cat, zones, &lc->accounts, err);
    if (st != BS_OK)
        goto done;
    rater = billing_rater_new(cat, msg, sizeof(msg));
    if (rater == NULL)
        st = bs_error_set(err, BS_ERR_INVALID, "%s%s%s: %s", lc->pricebook_path,
                          lc->accounts_path != NULL ? ", " : "",
                          lc->accounts_path != NULL ? lc->accounts_path : "", msg);
done:
    billing_rater_destroy(rater);
    billing_catalog_destroy(cat);
    bc_zones_destroy(zones);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Pipelined writes                                                        */
/* ---------------------------------------------------------------------- */

/* Row counts of the statements of one phase: @per statements for each of @n items. */
typedef struct phase {
    int64_t *counts;
    size_t n;
    size_t per;
} phase;

static bs_status phase_begin(bs_conn *c, phase *p, size_t n, size_t per, bs_error *err)
{
    p->n = n;
    p->per = per;
    p->counts = calloc(n * per + 1, sizeof(*p->counts));
    if (p->counts == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "loading: out of memory");
    return bs_pipeline_begin(c, err);
}

static int64_t *slot(phase *p, size_t item, size_t stmt)
{
    return &p->counts[item * p->per + stmt];
}

/* Send one statement of item @i, unless an earlier one failed. */
static bs_status send(bs_conn *c, phase *p, size_t i, size_t stmt, const char *sql, int n,
                      const char *const *params, bs_error *err)
{
    return bs_pipeline_send(c, NULL, sql, n, params, slot(p, i, stmt), err);
}

static bs_status phase_end(bs_conn *c, bs_status st, bs_error *err)
{
    bs_error end_err;
    bs_status end = bs_pipeline_end(c, &end_err);

    if (st != BS_OK)
        return st;
    if (end != BS_OK && err != NULL)
        *err = end_err;
    return end;
}

/* Count item @i from its statement counts: added, changed, or else unchanged. */
static void tally(bs_load_counts *k, bs_load_kind kind, int64_t added, int64_t changed)
{
    if (added > 0)
        k->added[kind]++;
    else if (changed > 0)
        k->changed[kind]++;
    else
        k->unchanged[kind]++;
}

/* ---------------------------------------------------------------------- */
/* Price book, plans, versions                                             */
/* ---------------------------------------------------------------------- */

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
    tally(lc->counts, BS_LOAD_BOOKS, added, 0);
    return BS_OK;
}

static void plan_params(const json_t *p, const char **params)
{
    params[0] = str(p, "id");
    params[1] = str(p, "period");
    params[2] = str(p, "model");
    params[3] = str(p, "region");
    params[4] = json_is_true(json_object_get(p, "refundable")) ? "true" : "false";
}

static bs_status load_plans(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *plans = json_object_get(lc->book, "plans");
    size_t n = json_array_size(plans);
    const char *params[5];
    phase p;
    size_t i;
    bs_status st = phase_begin(c, &p, n, 2, err);

    for (i = 0; i < n && st == BS_OK; i++) {
        plan_params(json_array_get(plans, i), params);
        st = send(c, &p, i, 0, SQL_PLAN_INSERT, 5, params, err);
        if (st == BS_OK)
            st = send(c, &p, i, 1, SQL_PLAN_DIFFERS, 5, params, err);
    }
    st = phase_end(c, st, err);
    for (i = 0; i < n && st == BS_OK; i++) {
        if (*slot(&p, i, 1) > 0)
            st = bs_error_set(err, BS_ERR_CONSTRAINT,
                              "plan '%s' is stored with another definition: plans never "
                              "change, give the new one a new id",
                              str(json_array_get(plans, i), "id"));
        else
            tally(lc->counts, BS_LOAD_PLANS, *slot(&p, i, 0), 0);
    }
    free(p.counts);
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
    size = strlen(amount) + 16 + (is_rate ? strlen(str(item, "meter")) + strlen(str(item, "model")) +
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
    snprintf(text, total, "label|%s\n", str(v, "id"));
    for (i = 0; i < n; i++) {
        strcat(text, lines[i]);
        strcat(text, "\n");
    }
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

    params[0] = id;
    for (i = 0; i < json_array_size(rates) && st == BS_OK; i++) {
        item = json_array_get(rates, i);
        params[1] = str(item, "meter");
        params[2] = str(item, "model");
        params[3] = str(item, "region");
        params[4] = str(item, "price");
        st = bs_pipeline_send(c, NULL, SQL_RATE_INSERT, 5, params, NULL, err);
    }
    for (i = 0; i < json_array_size(fees) && st == BS_OK; i++) {
        item = json_array_get(fees, i);
        params[1] = str(item, "plan");
        params[2] = str(item, "fee");
        st = bs_pipeline_send(c, NULL, SQL_FEE_INSERT, 3, params, NULL, err);
    }
    return phase_end(c, st, err);
}

static bs_status load_version(bs_conn *c, load_ctx *lc, const json_t *v, bs_error *err)
{
    char from[TIME_TEXT];
    const char *params[4];
    char *content;
    PGresult *res;
    bs_status st = time_text(v, "effective_from", from, err);

    if (st != BS_OK)
        return st;
    content = version_content(v);
    if (content == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "price version '%s': out of memory",
                            str(v, "id"));
    params[0] = lc->book_id;
    params[1] = str(v, "id");
    params[2] = from;
    params[3] = content;
    res = bs_query(c, SQL_VERSION_INSERT, 4, params, err);
    free(content);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
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

    for (i = 0; i < json_array_size(versions) && st == BS_OK; i++)
        st = load_version(c, lc, json_array_get(versions, i), err);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Accounts, subscriptions, grants                                         */
/* ---------------------------------------------------------------------- */

static bs_status load_accounts(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *accounts = json_object_get(lc->accounts, "accounts");
    size_t n = json_array_size(accounts);
    const char *params[4];
    const json_t *a;
    phase p;
    size_t i;
    bs_status st = phase_begin(c, &p, n, 2, err);

    for (i = 0; i < n && st == BS_OK; i++) {
        a = json_array_get(accounts, i);
        params[0] = str(a, "id");
        params[1] = str(a, "currency");
        params[2] = str(a, "time_zone");
        params[3] = str(a, "tax_rate");
        st = send(c, &p, i, 0, SQL_ACCOUNT_INSERT, 4, params, err);
        if (st == BS_OK)
            st = send(c, &p, i, 1, SQL_ACCOUNT_UPDATE, 4, params, err);
    }
    st = phase_end(c, st, err);
    for (i = 0; i < n && st == BS_OK; i++)
        tally(lc->counts, BS_LOAD_ACCOUNTS, *slot(&p, i, 0), *slot(&p, i, 1));
    free(p.counts);
    return st;
}

/* Parameters of subscription @s; times go to @start and @cancelled (TIME_TEXT bytes). */
static bs_status sub_params(const json_t *s, const char **params, char *start, char *cancelled,
                            char *terms, bs_error *err)
{
    bs_status st = time_text(s, "start", start, err);

    if (st == BS_OK)
        st = time_text(s, "cancelled_at", cancelled, err);
    snprintf(terms, NUM_TEXT, "%lld", (long long)json_integer_value(json_object_get(s, "terms")));
    params[0] = str(s, "id");
    params[1] = str(s, "account");
    params[2] = str(s, "resource");
    params[3] = str(s, "plan");
    params[4] = start;
    params[5] = terms;
    params[6] = or_null(cancelled);
    return st;
}

static bs_status load_subscriptions(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *subs = json_object_get(lc->accounts, "subscriptions");
    size_t n = json_array_size(subs);
    char start[TIME_TEXT];
    char cancelled[TIME_TEXT];
    char terms[NUM_TEXT];
    const char *params[7];
    const char *cancel_params[2];
    phase p;
    size_t i;
    bs_status st = phase_begin(c, &p, n, 3, err);

    for (i = 0; i < n && st == BS_OK; i++) {
        st = sub_params(json_array_get(subs, i), params, start, cancelled, terms, err);
        cancel_params[0] = params[0];
        cancel_params[1] = params[6];
        if (st == BS_OK)
            st = send(c, &p, i, 0, SQL_SUB_INSERT, 7, params, err);
        if (st == BS_OK)
            st = send(c, &p, i, 1, SQL_SUB_CANCEL, 2, cancel_params, err);
        if (st == BS_OK)
            st = send(c, &p, i, 2, SQL_SUB_DIFFERS, 7, params, err);
    }
    st = phase_end(c, st, err);
    for (i = 0; i < n && st == BS_OK; i++) {
        if (*slot(&p, i, 2) > 0)
            st = bs_error_set(err, BS_ERR_CONSTRAINT,
                              "subscription '%s' is stored with other terms: only a first "
                              "cancellation may change a subscription",
                              str(json_array_get(subs, i), "id"));
        else
            tally(lc->counts, BS_LOAD_SUBSCRIPTIONS, *slot(&p, i, 0), *slot(&p, i, 1));
    }
    free(p.counts);
    return st;
}

/* "applies_to" as billing_charge_kind bits. */
static unsigned grant_kinds(const json_t *g)
{
    const json_t *arr = json_object_get(g, "applies_to");
    unsigned kinds = 0;
    size_t i;

    for (i = 0; i < json_array_size(arr); i++) {
        const char *k = json_string_value(json_array_get(arr, i));

        if (k != NULL && strcmp(k, "usage") == 0)
            kinds |= BILLING_CHARGE_USAGE;
        else if (k != NULL && strcmp(k, "subscription") == 0)
            kinds |= BILLING_CHARGE_SUBSCRIPTION;
    }
    return kinds;
}

/* Parameters of grant @g; @granted, @expires TIME_TEXT bytes, @kinds, @priority NUM_TEXT. */
static bs_status grant_params(const json_t *g, const char **params, char *granted, char *expires,
                              char *kinds, char *priority, bs_error *err)
{
    bs_status st = time_text(g, "granted_at", granted, err);

    if (st == BS_OK)
        st = time_text(g, "expires_at", expires, err);
    snprintf(kinds, NUM_TEXT, "%u", grant_kinds(g));
    snprintf(priority, NUM_TEXT, "%lld",
             (long long)json_integer_value(json_object_get(g, "priority")));
    params[0] = str(g, "id");
    params[1] = str(g, "account");
    params[2] = str(g, "amount");
    params[3] = granted;
    params[4] = expires;
    params[5] = kinds;
    params[6] = priority;
    return st;
}

static bs_status load_grants(bs_conn *c, load_ctx *lc, bs_error *err)
{
    const json_t *grants = json_object_get(lc->accounts, "grants");
    size_t n = json_array_size(grants);
    char granted[TIME_TEXT];
    char expires[TIME_TEXT];
    char kinds[NUM_TEXT];
    char priority[NUM_TEXT];
    const char *params[7];
    phase p;
    size_t i;
    bs_status st = phase_begin(c, &p, n, 3, err);

    for (i = 0; i < n && st == BS_OK; i++) {
        st = grant_params(json_array_get(grants, i), params, granted, expires, kinds, priority,
                          err);
        if (st == BS_OK)
            st = send(c, &p, i, 0, SQL_GRANT_INSERT, 7, params, err);
        if (st == BS_OK)
            st = send(c, &p, i, 1, SQL_GRANT_LEDGER, 1, params, err);
        if (st == BS_OK)
            st = send(c, &p, i, 2, SQL_GRANT_DIFFERS, 7, params, err);
    }
    st = phase_end(c, st, err);
    for (i = 0; i < n && st == BS_OK; i++) {
        if (*slot(&p, i, 2) > 0)
            st = bs_error_set(err, BS_ERR_CONSTRAINT,
                              "credit grant '%s' is stored with other terms: grants never "
                              "change, give the new one a new id",
                              str(json_array_get(grants, i), "id"));
        else
            tally(lc->counts, BS_LOAD_GRANTS, *slot(&p, i, 0), 0);
    }
    free(p.counts);
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
    st = bs_command(c, SQL_LOCK, 0, NULL, NULL, err);
    if (st == BS_OK)
        st = load_book(c, lc, err);
    if (st == BS_OK)
        st = load_plans(c, lc, err);
    if (st == BS_OK)
        st = load_versions(c, lc, err);
    if (st == BS_OK && lc->accounts != NULL)
        st = load_accounts(c, lc, err);
    if (st == BS_OK && lc->accounts != NULL)
        st = load_subscriptions(c, lc, err);
    if (st == BS_OK && lc->accounts != NULL)
        st = load_grants(c, lc, err);
    return st;
}

bs_status bs_load_catalog(bs_conn *c, const char *book_id, const char *pricebook_path,
                          const char *accounts_path, bs_load_counts *counts, bs_error *err)
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
    st = validate(&lc, err);
    if (st == BS_OK)
        st = bs_transaction(c, load_tx, &lc, err);
    json_decref(lc.book);
    json_decref(lc.accounts);
    return st;
}
