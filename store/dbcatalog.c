/*
 * dbcatalog.c - the rating catalog read back from the store. See dbcatalog.h.
 *
 * Each kind of row is one query; each row goes through the same library
 * call `billing rate` makes for the files, so the store cannot hold a
 * catalog the library would refuse without the message saying which row.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing_config.h"
#include "dbcatalog.h"

#define LIBERR_MAX 512

/* Instants as microseconds since the epoch: timestamptz's own precision. */
#define US(col) "(extract(epoch FROM " col ") * 1000000)::bigint"

#define SQL_SNAPSHOT "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
#define SQL_BOOK                                             \
    "SELECT id, currency, rounding FROM billing.price_books" \
    " WHERE $1::text IS NULL OR id = $1::text ORDER BY id LIMIT 2"
#define SQL_VERSIONS                                                                 \
    "SELECT id, label, " US("effective_from") " FROM billing.current_price_versions" \
                                              " WHERE book_id = $1::text ORDER BY effective_from"
#define SQL_RATES                                                                    \
    "SELECT v.label, r.meter, r.model, r.region, r.price::text FROM billing.rates r" \
    " JOIN billing.current_price_versions v ON v.id = r.version_id WHERE v.book_id = $1::text"
#define SQL_PLANS \
    "SELECT id, period, model, region, refundable FROM billing.plans WHERE $1::text IS NOT NULL"
#define SQL_FEES                                                      \
    "SELECT v.label, f.plan_id, f.fee::text FROM billing.plan_fees f" \
    " JOIN billing.current_price_versions v ON v.id = f.version_id WHERE v.book_id = $1::text"
#define SQL_ACCOUNTS                                                                 \
    "SELECT a.id, a.currency, a.time_zone, a.tax_rate::text FROM billing.accounts a" \
    " JOIN billing.price_books b ON b.currency = a.currency WHERE b.id = $1::text"
#define SQL_SUBS                                                                                 \
    "SELECT s.id, s.account_id, s.resource_id, s.plan_id, " US(                                  \
        "s.start_at") ", s.terms, "                                                              \
                      " " US("s.cancelled_at") " FROM billing.subscriptions s"                   \
                                               " JOIN billing.accounts a ON a.id = s.account_id" \
                                               " JOIN billing.price_books b ON b.currency = "    \
                                               "a.currency WHERE b.id = $1::text"
#define SQL_GRANTS                                                                             \
    "SELECT g.id, g.account_id, g.amount::text, " US("g.granted_at") ", " US(                  \
        "g.expires_at") ", g.kinds, g.priority FROM billing.credit_grants g"                   \
                        " JOIN billing.price_books b ON b.currency = g.currency WHERE b.id = " \
                        "$1::text"

typedef struct account_zone {
    char *account;
    const billing_zone *zone;
} account_zone;

typedef struct version_ref {
    int64_t id;
    char *label;
} version_ref;

struct bs_catalog {
    billing_catalog *cat;
    billing_config_zones *zones;
    char *book;
    char currency[4];
    billing_rounding rounding;
    version_ref *versions;
    size_t n_versions;
    account_zone *zones_of;
    size_t n_zones_of;
    char liberr[LIBERR_MAX];
};

typedef billing_status (*row_fn)(bs_catalog *bc, const PGresult *res, int row);

/* Account zones by id, in byte order. */
static int zone_of_cmp(const void *a, const void *b)
{
    return strcmp(((const account_zone *)a)->account, ((const account_zone *)b)->account);
}

static const char *val(const PGresult *res, int row, int col)
{
    return PQgetvalue(res, row, col);
}

static billing_time_t ns(const PGresult *res, int row, int col)
{
    return (billing_time_t)strtoll(val(res, row, col), NULL, 10) * 1000;
}

static billing_status add_version(bs_catalog *bc, const PGresult *res, int row)
{
    version_ref *v = &bc->versions[bc->n_versions];

    v->id = strtoll(val(res, row, 0), NULL, 10);
    v->label = strdup(val(res, row, 1));
    if (v->label == NULL)
        return BILLING_ERR_NOMEM;
    bc->n_versions++;
    return billing_catalog_add_price_version(bc->cat, v->label, ns(res, row, 2), bc->liberr,
                                             sizeof(bc->liberr));
}

static billing_status add_rate(bs_catalog *bc, const PGresult *res, int row)
{
    billing_meter meter;

    if (billing_meter_parse(val(res, row, 1), &meter) != BILLING_OK)
        return BILLING_ERR_INVALID;
    return billing_catalog_set_rate(bc->cat, val(res, row, 0), meter, val(res, row, 2),
                                    val(res, row, 3), val(res, row, 4), bc->liberr,
                                    sizeof(bc->liberr));
}

static billing_status add_plan(bs_catalog *bc, const PGresult *res, int row)
{
    billing_period period =
        strcmp(val(res, row, 1), "day") == 0 ? BILLING_PERIOD_DAY : BILLING_PERIOD_MONTH;

    return billing_catalog_add_plan(bc->cat, val(res, row, 0), period, val(res, row, 2),
                                    val(res, row, 3), strcmp(val(res, row, 4), "t") == 0,
                                    bc->liberr, sizeof(bc->liberr));
}

static billing_status add_fee(bs_catalog *bc, const PGresult *res, int row)
{
    return billing_catalog_set_plan_fee(bc->cat, val(res, row, 0), val(res, row, 1),
                                        val(res, row, 2), bc->liberr, sizeof(bc->liberr));
}

static billing_status add_account(bs_catalog *bc, const PGresult *res, int row)
{
    account_zone *az = &bc->zones_of[bc->n_zones_of];
    const billing_zone *zone;
    billing_status st;

    st = billing_config_zones_get(bc->zones, val(res, row, 2), &zone, bc->liberr,
                                  sizeof(bc->liberr));
    if (st != BILLING_OK)
        return st;
    az->account = strdup(val(res, row, 0));
    if (az->account == NULL)
        return BILLING_ERR_NOMEM;
    az->zone = zone;
    bc->n_zones_of++;
    return billing_catalog_add_account(bc->cat, val(res, row, 0), val(res, row, 1), zone,
                                       val(res, row, 3), bc->liberr, sizeof(bc->liberr));
}

static billing_status add_sub(bs_catalog *bc, const PGresult *res, int row)
{
    /* NULL cancelled_at is "not cancelled"; every instant, 0 included, is a cancellation. */
    billing_time_t cancelled = PQgetisnull(res, row, 6) ? 0 : ns(res, row, 6);

    return billing_catalog_add_subscription(
        bc->cat, val(res, row, 0), val(res, row, 1), val(res, row, 2), val(res, row, 3),
        ns(res, row, 4), atoi(val(res, row, 5)), PQgetisnull(res, row, 6) ? NULL : &cancelled,
        bc->liberr, sizeof(bc->liberr));
}

static billing_status add_grant(bs_catalog *bc, const PGresult *res, int row)
{
    return billing_catalog_add_grant(bc->cat, val(res, row, 0), val(res, row, 1), val(res, row, 2),
                                     ns(res, row, 3), ns(res, row, 4),
                                     (unsigned)atoi(val(res, row, 5)), atoi(val(res, row, 6)),
                                     bc->liberr, sizeof(bc->liberr));
}

/* Run @sql with the book id and feed every row to @fn; @what names the rows in messages. */
static bs_status read_rows(bs_conn *c, bs_catalog *bc, const char *sql, row_fn fn, const char *what,
                           bs_error *err)
{
    const char *params[1];
    PGresult *res;
    billing_status lst = BILLING_OK;
    int i;

    params[0] = bc->book;
    res = bs_query(c, sql, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (fn == add_version) {
        bc->versions = calloc((size_t)PQntuples(res) + 1, sizeof(version_ref));
        if (bc->versions == NULL)
            lst = BILLING_ERR_NOMEM;
    }
    if (fn == add_account) {
        bc->zones_of = calloc((size_t)PQntuples(res) + 1, sizeof(account_zone));
        if (bc->zones_of == NULL)
            lst = BILLING_ERR_NOMEM;
    }
    for (i = 0; i < PQntuples(res) && lst == BILLING_OK; i++) {
        bc->liberr[0] = '\0';
        lst = fn(bc, res, i);
        if (lst != BILLING_OK)
            bs_error_set(err, lst == BILLING_ERR_NOMEM ? BS_ERR_NOMEM : BS_ERR_INVALID,
                         "stored %s of price book %s: %s %s: %s", what, bc->book, what,
                         val(res, i, 0), bc->liberr[0] ? bc->liberr : billing_strerror(lst));
    }
    PQclear(res);
    if (lst != BILLING_OK)
        return lst == BILLING_ERR_NOMEM ? BS_ERR_NOMEM : BS_ERR_INVALID;
    /* Sorted by id (byte order, not the database's collation) for bs_catalog_zone's search. */
    if (fn == add_account)
        qsort(bc->zones_of, bc->n_zones_of, sizeof(*bc->zones_of), zone_of_cmp);
    return BS_OK;
}

/* Find the book (the only one when @book_id is NULL) and set the currency. */
static bs_status read_book(bs_conn *c, bs_catalog *bc, const char *book_id, bs_error *err)
{
    const char *params[1];
    PGresult *res;
    billing_rounding rounding = BILLING_ROUND_HALF_UP;
    bs_status st = BS_OK;

    params[0] = book_id;
    res = bs_query(c, SQL_BOOK, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (PQntuples(res) != 1) {
        st = bs_error_set(err, BS_ERR_INVALID,
                          PQntuples(res) == 0 ? "no price book %s%s in the store (billing load)"
                                              : "%s%sseveral price books in the store: name one",
                          book_id ? "named " : "", book_id ? book_id : "");
        goto out;
    }
    bc->book = strdup(val(res, 0, 0));
    billing_rounding_parse(val(res, 0, 2), &rounding);
    snprintf(bc->currency, sizeof(bc->currency), "%s", val(res, 0, 1));
    bc->rounding = rounding;
    if (bc->book == NULL)
        st = bs_error_set(err, BS_ERR_NOMEM, "reading the catalog: out of memory");
    else if (billing_catalog_set_currency(bc->cat, val(res, 0, 1), rounding, bc->liberr,
                                          sizeof(bc->liberr)) != BILLING_OK)
        st = bs_error_set(err, BS_ERR_INVALID, "price book %s: %s", bc->book, bc->liberr);
out:
    PQclear(res);
    return st;
}

static bs_status read_all(bs_conn *c, bs_catalog *bc, const char *book_id, bs_error *err)
{
    static const struct {
        const char *sql;
        row_fn fn;
        const char *what;
    } parts[] = {
        {SQL_VERSIONS, add_version, "price version"},
        {SQL_RATES, add_rate, "rate of version"},
        {SQL_PLANS, add_plan, "plan"},
        {SQL_FEES, add_fee, "plan fee of version"},
        {SQL_ACCOUNTS, add_account, "account"},
        {SQL_SUBS, add_sub, "subscription"},
        {SQL_GRANTS, add_grant, "credit grant"},
    };
    size_t i;
    bs_status st = read_book(c, bc, book_id, err);

    for (i = 0; i < sizeof(parts) / sizeof(parts[0]) && st == BS_OK; i++)
        st = read_rows(c, bc, parts[i].sql, parts[i].fn, parts[i].what, err);
    return st;
}

bs_catalog *bs_catalog_read(bs_conn *c, const char *book_id, bs_error *err)
{
    bs_catalog *bc = calloc(1, sizeof(*bc));
    bs_status st;

    if (bc == NULL || (bc->cat = billing_catalog_new()) == NULL ||
        (bc->zones = billing_config_zones_new()) == NULL) {
        bs_catalog_free(bc);
        bs_error_set(err, BS_ERR_NOMEM, "reading the catalog: out of memory");
        return NULL;
    }
    st = bs_command(c, SQL_SNAPSHOT, 0, NULL, NULL, err);
    if (st == BS_OK)
        st = read_all(c, bc, book_id, err);
    bs_rollback(c);
    if (st != BS_OK) {
        bs_catalog_free(bc);
        return NULL;
    }
    return bc;
}

void bs_catalog_free(bs_catalog *bc)
{
    size_t i;

    if (bc == NULL)
        return;
    billing_catalog_destroy(bc->cat);
    billing_config_zones_destroy(bc->zones);
    for (i = 0; i < bc->n_versions; i++)
        free(bc->versions[i].label);
    free(bc->versions);
    for (i = 0; i < bc->n_zones_of; i++)
        free(bc->zones_of[i].account);
    free(bc->zones_of);
    free(bc->book);
    free(bc);
}

billing_catalog *bs_catalog_lib(bs_catalog *bc)
{
    return bc->cat;
}

const char *bs_catalog_book(const bs_catalog *bc)
{
    return bc->book;
}

const char *bs_catalog_currency(const bs_catalog *bc)
{
    return bc->currency;
}

billing_rounding bs_catalog_rounding(const bs_catalog *bc)
{
    return bc->rounding;
}

int64_t bs_catalog_version_id(const bs_catalog *bc, const char *label)
{
    size_t i;

    for (i = 0; i < bc->n_versions; i++) {
        if (strcmp(bc->versions[i].label, label) == 0)
            return bc->versions[i].id;
    }
    return -1;
}

const char *bs_catalog_version_label(const bs_catalog *bc, int64_t id)
{
    size_t i;

    for (i = 0; i < bc->n_versions; i++) {
        if (bc->versions[i].id == id)
            return bc->versions[i].label;
    }
    return NULL;
}

const billing_zone *bs_catalog_zone(const bs_catalog *bc, const char *account)
{
    account_zone key;
    const account_zone *az;

    /*
     * A binary search: the close asks once per account of its batches and
     * a linear one made a close of 100 000 accounts quadratic (5 * 10^9
     * string comparisons).
     */
    key.account = (char *)account;
    az = bc->n_zones_of == 0
             ? NULL
             : bsearch(&key, bc->zones_of, bc->n_zones_of, sizeof(*bc->zones_of), zone_of_cmp);
    return az != NULL ? az->zone : NULL;
}
