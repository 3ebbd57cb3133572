/*
 * apiread.c - the SQL of the HTTP API's catalog reads (apiread.h).
 */
#include "config.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiread.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define T(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

static const char *const sql[] = {
    [BS_API_PRICE_BOOKS] =
        "SELECT b.id, b.currency::text, b.rounding, coalesce((SELECT json_agg(json_build_object("
        "'label', v.label, 'effective_from', " T(
            "v.effective_from") ", 'revision', v.revision)"
                                " ORDER BY v.effective_from) FROM billing.current_price_versions v"
                                " WHERE v.book_id = b.id), '[]')::text FROM billing.price_books b "
                                "ORDER BY b.id",
    [BS_API_PLANS] =
        "SELECT p.id, p.period, p.model, p.region, p.refundable::text,"
        " coalesce((SELECT json_agg(json_build_object('version', v.label, 'fee', f.fee::text)"
        " ORDER BY v.effective_from) FROM billing.plan_fees f"
        " JOIN billing.current_price_versions v ON v.id = f.version_id"
        " WHERE f.plan_id = p.id), '[]')::text FROM billing.plans p ORDER BY p.id",
    [BS_API_GRANTS] = "SELECT g.id, g.currency::text, g.amount::text, " T("g.granted_at") ", " T(
        "g.expires_at") ", g.kinds::text, g.priority::text FROM billing.credit_grants g"
                        " WHERE g.account_id = $1::text ORDER BY g.id",
    [BS_API_SUBSCRIPTIONS] =
        "SELECT s.id, s.resource_id, s.plan_id, " T("s.start_at") ", s.terms::text, " T(
            "s.cancelled_at") " FROM billing.subscriptions s WHERE s.account_id = $1::text"
                              " ORDER BY s.id",
    [BS_API_CLOSES] = "SELECT to_char(m.month, 'YYYY-MM'), " T(
        "m.last_close") ", m.accounts::text,"
                        " count(*) FILTER (WHERE i.status = 'draft')::text,"
                        " count(*) FILTER (WHERE i.status = 'finalized')::text,"
                        " count(*) FILTER (WHERE i.status = 'void')::text FROM (SELECT month,"
                        " max(recorded_at) AS last_close, count(*) AS accounts FROM "
                        "billing.close_marks"
                        " GROUP BY month ORDER BY month DESC LIMIT " STR(
                            BS_API_CLOSES_MAX) ") m"
                                               " LEFT JOIN billing.invoices i"
                                               " ON i.month = m.month AND i.kind = 'invoice'"
                                               " GROUP BY m.month, m.last_close, m.accounts ORDER "
                                               "BY m.month DESC",
};

static const char *const names_books[] = {"id", "currency", "rounding", "versions"};
static const char *const names_plans[] = {"id", "period", "model", "region", "refundable", "fees"};
static const char *const names_grants[] = {"id",         "currency", "amount",  "granted_at",
                                           "expires_at", "kinds",    "priority"};
static const char *const names_subs[] = {"id",       "resource_id", "plan_id",
                                         "start_at", "terms",       "cancelled_at"};
static const char *const names_closes[] = {"month",  "last_close", "accounts",
                                           "drafts", "finalized",  "void"};
static const char *const *const names[] = {names_books, names_plans, names_grants, names_subs,
                                           names_closes};
static const char *const stmt[] = {"bs_api_books", "bs_api_plans", "bs_api_grants", "bs_api_subs",
                                   "bs_api_closes"};

bs_status bs_api_read(bs_conn *c, bs_api_list what, const char *account, bs_api_row_fn fn,
                      void *arg, bs_error *err)
{
    const char *params[1] = {account};
    const char *values[8];
    int nparams = what == BS_API_GRANTS || what == BS_API_SUBSCRIPTIONS;
    bs_api_row row;
    PGresult *res;
    int i;
    int j;

    if ((unsigned)what > BS_API_CLOSES || (nparams && account == NULL))
        return bs_error_set(err, BS_ERR_INVALID, "api read: bad list or no account");
    res = bs_query_prepared(c, stmt[what], sql[what], nparams, params, err);
    if (res == NULL)
        return err->status;
    row.n = PQnfields(res) < 8 ? PQnfields(res) : 8;
    row.names = names[what];
    row.values = values;
    for (i = 0; i < PQntuples(res); i++) {
        for (j = 0; j < row.n; j++)
            values[j] = PQgetisnull(res, i, j) ? NULL : PQgetvalue(res, i, j);
        if (fn(arg, &row) != 0)
            break;
    }
    PQclear(res);
    return BS_OK;
}

bs_status bs_account_exists(bs_conn *c, const char *id, int *found, bs_error *err)
{
    const char *params[1] = {id};
    PGresult *res;

    *found = 0;
    res = bs_query_prepared(c, "bs_account_exists",
                            "SELECT 1 FROM billing.accounts WHERE id = $1::text", 1, params, err);
    if (res == NULL)
        return err->status;
    *found = PQntuples(res) == 1;
    PQclear(res);
    return BS_OK;
}

bs_status bs_api_accounts(bs_conn *c, const char *query, const char *bound, int limit,
                          bs_api_row_fn fn, void *arg, bs_error *err)
{
    static const char *const cols[] = {"id", "name", "currency", "time_zone", "status"};
    char lim[16];
    const char *params[3];
    const char *values[5];
    bs_api_row row;
    PGresult *res;
    int i;
    int j;

    if (query == NULL)
        query = "";
    if (limit < 1 || limit > BS_API_ACCOUNTS_MAX || strlen(query) > BS_API_QUERY_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "accounts: limit 1..%d, query at most %d bytes",
                            BS_API_ACCOUNTS_MAX, BS_API_QUERY_MAX);
    snprintf(lim, sizeof(lim), "%d", limit);
    params[0] = query;
    params[1] = bound;
    params[2] = lim;
    res = bs_query_prepared(
        c, "bs_api_accounts",
        "SELECT a.id, a.name, a.currency::text, a.time_zone, a.status FROM billing.accounts a"
        " WHERE ($2::text IS NULL OR a.id = $2::text)"
        " AND ($1::text = '' OR strpos(lower(a.id), lower($1::text)) > 0"
        " OR strpos(lower(coalesce(a.name, '')), lower($1::text)) > 0)"
        " ORDER BY a.id LIMIT $3::int",
        3, params, err);
    if (res == NULL)
        return err->status;
    row.n = PQnfields(res) < 5 ? PQnfields(res) : 5;
    row.names = cols;
    row.values = values;
    for (i = 0; i < PQntuples(res); i++) {
        for (j = 0; j < row.n; j++)
            values[j] = PQgetisnull(res, i, j) ? NULL : PQgetvalue(res, i, j);
        if (fn(arg, &row) != 0)
            break;
    }
    PQclear(res);
    return BS_OK;
}
