/*
 * balance.c - an account's credit as the store knows it (balance.h): the
 * issued credit of finalized months, and a rater holding the stored usage.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "ingest.h"
#include "invoices.h"

#define MSG_MAX 512

struct bs_history {
    PGresult *res; /* account_id, month (YYYY-MM), grant_id, amount; in the accounts' order */
    int row;       /* the next row to give */
};

bs_status bs_history_read(bs_conn *c, const char *accounts, const char *month, bs_history **out,
                          bs_error *err)
{
    bs_history *h = calloc(1, sizeof(*h));

    *out = NULL;
    if (h == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    h->res = bs_credit_history(c, accounts, month, err);
    if (h->res == NULL) {
        free(h);
        return err->status;
    }
    *out = h;
    return BS_OK;
}

bs_status bs_history_give(bs_history *h, billing_rater *r, const char *id, bs_error *err)
{
    billing_issued_row *rows = NULL;
    char msg[MSG_MAX];
    int first = h->row;
    int total = PQntuples(h->res);
    size_t n;
    bs_status st = BS_OK;

    while (h->row < total && strcmp(PQgetvalue(h->res, h->row, 0), id) == 0)
        h->row++;
    if (h->row == first)
        return BS_OK;
    if (h->row - first > BS_ISSUED_ROWS_MAX)
        return bs_error_set(err, BS_ERR_INVALID,
                            "account '%s': more than %d months x grants of issued credit", id,
                            BS_ISSUED_ROWS_MAX);
    rows = calloc((size_t)(h->row - first), sizeof(*rows));
    if (rows == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    for (n = 0; n < (size_t)(h->row - first); n++) {
        const char *month = PQgetvalue(h->res, first + (int)n, 1);
        const char *grant = PQgetvalue(h->res, first + (int)n, 2);

        rows[n].year = atoi(month);
        rows[n].month = atoi(month + 5);
        rows[n].grant = grant[0] != '\0' ? grant : NULL;
        rows[n].amount = PQgetvalue(h->res, first + (int)n, 3);
    }
    if (billing_rater_credit_issued(r, id, n, rows, msg, sizeof(msg)) != BILLING_OK)
        st = bs_error_set(err, BS_ERR_INVALID,
                          "account '%s': the ledger's credit of finalized months: %s", id, msg);
    free(rows);
    return st;
}

void bs_history_free(bs_history *h)
{
    if (h == NULL)
        return;
    PQclear(h->res);
    free(h);
}

/* What rate_cut receives. */
typedef struct cut_ctx {
    billing_rater *r;
    billing_event *ev;
    billing_time_t at;
    char msg[MSG_MAX];
} cut_ctx;

billing_status bs_event_set(billing_event *ev, const char *account, const char *id,
                            const char *resource, const char *meter, billing_time_t start,
                            billing_time_t end, const char *quantity, const char *model,
                            const char *region, char *msg, size_t msgsize)
{
    billing_meter m;
    billing_status st;

    billing_event_reset(ev);
    msg[0] = '\0';
    st = billing_meter_parse(meter, &m);
    if (st == BILLING_OK)
        st = billing_event_set_id(ev, id);
    if (st == BILLING_OK)
        st = billing_event_set_account(ev, account);
    if (st == BILLING_OK)
        st = billing_event_set_resource(ev, resource);
    if (st == BILLING_OK)
        st = billing_event_set_meter(ev, m);
    if (st == BILLING_OK)
        st = billing_event_set_quantity(ev, quantity, msg, msgsize);
    if (st == BILLING_OK)
        st = billing_event_set_model(ev, model);
    if (st == BILLING_OK)
        st = billing_event_set_region(ev, region);
    billing_event_set_interval(ev, start, end);
    return st;
}

/* A bs_event_fn: rate a stored event up to the instant (it starts before it). */
static int rate_cut(void *arg, const char *account, const char *id, const char *resource,
                    const char *meter, billing_time_t start, billing_time_t end,
                    const char *quantity, const char *model, const char *region)
{
    cut_ctx *k = arg;
    /* A level (GPUs, instances, GB) priced per unit of time: the part before the instant. */
    billing_status st =
        bs_event_set(k->ev, account, id, resource, meter, start, end < k->at ? end : k->at,
                     quantity, model, region, k->msg, sizeof(k->msg));

    if (st == BILLING_OK)
        st = billing_rater_add(k->r, k->ev, k->msg, sizeof(k->msg));
    if (st == BILLING_OK)
        return 0;
    if (k->msg[0] == '\0')
        snprintf(k->msg, sizeof(k->msg), "stored event '%.128s': %s", id, billing_strerror(st));
    return -1;
}

/* The stored raw events of the accounts of @list starting before @at, cut there, into @r. */
static bs_status rate_events_before(bs_conn *c, billing_rater *r, const char *list,
                                    billing_time_t at, bs_error *err)
{
    cut_ctx k;
    bs_status st;

    memset(&k, 0, sizeof(k));
    k.r = r;
    k.at = at;
    k.ev = billing_event_new();
    if (k.ev == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    st = bs_events_fetch(c, list, at, rate_cut, &k, err);
    if (st == BS_ERR_INVALID && k.msg[0] != '\0')
        st = bs_error_set(err, BS_ERR_INVALID, "%s", k.msg);
    billing_event_destroy(k.ev);
    return st;
}

/* The credit finalized months before @account's local month of @now took, into @r. */
static bs_status give_history(bs_conn *c, billing_rater *r, const char *account, const char *list,
                              const billing_zone *zone, billing_time_t now, bs_error *err)
{
    bs_history *h = NULL;
    char month[16];
    int year;
    int mon;
    bs_status st;

    if (zone == NULL)
        return BS_OK; /* an unknown account: its balance says so */
    billing_zone_year_month(zone, now, &year, &mon);
    snprintf(month, sizeof(month), "%04d-%02d-01", year, mon);
    st = bs_history_read(c, list, month, &h, err);
    if (st == BS_OK)
        st = bs_history_give(h, r, account, err);
    bs_history_free(h);
    return st;
}

bs_status bs_balance_rater(bs_conn *c, bs_catalog *cat, const char *account,
                           const billing_time_t *at, billing_time_t now, billing_rater **out,
                           bs_error *err)
{
    json_t *ids = json_pack("[s]", account);
    char *list = ids != NULL ? json_dumps(ids, JSON_COMPACT) : NULL;
    char msg[MSG_MAX];
    billing_rater *r = NULL;
    bs_status st;

    *out = NULL;
    if (list == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        goto out;
    }
    billing_rater_new(bs_catalog_lib(cat), &r, msg, sizeof(msg));
    if (r == NULL) {
        st = bs_error_set(err, BS_ERR_INVALID, "catalog: %s", msg);
        goto out;
    }
    billing_rater_set_dedupe(r, 0);
    if (at != NULL)
        st = rate_events_before(c, r, list, *at, err);
    else
        st = bs_aggregates_rate(c, cat, r, account, err);
    if (st == BS_OK)
        st = give_history(c, r, account, list, bs_catalog_zone(cat, account), now, err);
    if (st == BS_OK) {
        *out = r;
        r = NULL;
    }
out:
    billing_rater_destroy(r);
    free(list);
    json_decref(ids);
    return st;
}

/* ---------------------------------------------------------------------- */
/* The HTTP API's balance in one round trip                                */
/* ---------------------------------------------------------------------- */

/*
 * The account's stored events that may run at $2 (the instant plus a
 * nanosecond, as bs_events_fetch's bound is given): started before it,
 * ended at most a millisecond before it (the caller keeps exactly those
 * ending after the instant). Instants as microseconds since 1970 and the
 * nanoseconds apart, as the table keeps them.
 */
#define SQL_RUNNING                                                                        \
    "SELECT account_id, event_id, resource_id, meter,"                                     \
    " (extract(epoch FROM start_time) * 1000000)::bigint, start_nanos,"                    \
    " (extract(epoch FROM end_time) * 1000000)::bigint, end_nanos, quantity::text, model," \
    " region FROM billing.usage_events WHERE account_id = $1::text"                        \
    " AND start_time < $2::timestamptz AND end_time >= $2::timestamptz - interval '1 millisecond'"
#define RUNNING_STMT "bs_balance_running"
/*
 * The account's aggregates, the columns and order of bs_agg_read_one_sql
 * (bs_aggregates_add_rows reads them) without its joins of accounts and
 * price_books: those keep the accounts whose currency is the book's, and
 * the pipeline asks only for an account of the catalog, which holds no
 * other (dbcatalog.c's SQL_ACCOUNTS joins the same way).
 */
#define SQL_AGG_ONE                                                                         \
    "SELECT a.account_id, extract(year FROM a.month)::integer,"                             \
    " extract(month FROM a.month)::integer, a.meter, v.label, a.rate_model, a.rate_region," \
    " a.subscription_id, a.epoch, a.quantity::text || '/' || a.quantity_den::text,"         \
    " a.event_count FROM billing.usage_aggregates a"                                        \
    " LEFT JOIN billing.price_versions v ON v.id = a.price_version_id"                      \
    " WHERE a.account_id = $1::text AND a.event_count > 0 ORDER BY a.id"
#define AGG_STMT "bs_balance_agg"
/* Events running at once handed over at most (as many as the exhaustion estimate takes). */
#define RUNNING_MAX 100000

/* The statements of bs_balance_fetch, in the order they are sent. */
enum { Q_KEY, Q_AGG, Q_HISTORY, Q_RUNNING, N_Q };

/* Each one's name, text and parameters, by its Q_ index (bs_balance_prepare, bs_balance_fetch). */
static const struct {
    const char *name;
    const char *sql;
    int nparams;
} balance_stmts[N_Q] = {
    {BS_APIKEY_CHECK_STMT, bs_apikey_check_sql, 1},
    {AGG_STMT, SQL_AGG_ONE, 1},
    {"bs_balance_history", bs_credit_history_sql, 2},
    {RUNNING_STMT, SQL_RUNNING, 2},
};

struct bs_balance_input {
    PGresult *res[N_Q]; /* Q_KEY is NULL: the key is told at once */
};

/* One statement of a pipeline. */
typedef struct piped {
    const char *name;
    const char *sql;
    int nparams;
    const char *params[2];
} piped;

/*
 * Run the @n statements of @q (prepared first, one round trip each the
 * first time on a session) in one round trip, their results into @res.
 * Returns BS_OK, or the first statement's error (every result NULL).
 */
static bs_status pipeline_run(bs_conn *c, const piped *q, size_t n, PGresult **res, bs_error *err)
{
    PGconn *pg = bs_pg(c);
    PGresult *failed = NULL;
    PGresult *r;
    bs_status st = BS_OK;
    size_t i;
    size_t got = 0;
    size_t at = 0;
    int synced = 0;

    for (i = 0; i < n; i++) {
        res[i] = NULL;
        st = bs_prepare(c, q[i].name, q[i].sql, q[i].nparams, err);
        if (st != BS_OK)
            return st;
    }
    if (PQenterPipelineMode(pg) != 1)
        return bs_error_set(err, PQstatus(pg) == CONNECTION_OK ? BS_ERR_FATAL : BS_ERR_RETRY,
                            "balance: pipeline: %s", PQerrorMessage(pg));
    for (i = 0; i < n && st == BS_OK; i++)
        if (PQsendQueryPrepared(pg, q[i].name, q[i].nparams, q[i].params, NULL, NULL, 0) != 1)
            st = bs_error_set(err, BS_ERR_RETRY, "balance: %s: %s", q[i].name, PQerrorMessage(pg));
    if (st == BS_OK && PQpipelineSync(pg) != 1)
        st = bs_error_set(err, BS_ERR_RETRY, "balance: pipeline: %s", PQerrorMessage(pg));
    /*
     * Each statement's results then NULL, up to the sync's; after a
     * failure the later statements are aborted. Read up to the sync
     * whatever failed, so that the connection serves again.
     */
    while (st == BS_OK && !synced) {
        r = PQgetResult(pg);
        if (r == NULL) {
            if (PQstatus(pg) != CONNECTION_OK)
                break;
            got++;
            continue;
        }
        switch (PQresultStatus(r)) {
        case PGRES_PIPELINE_SYNC:
            synced = 1;
            break;
        case PGRES_TUPLES_OK:
            if (failed == NULL && got < n && res[got] == NULL) {
                res[got] = r;
                r = NULL;
            }
            break;
        case PGRES_PIPELINE_ABORTED:
            break;
        default:
            if (failed == NULL) {
                failed = r;
                at = got;
                r = NULL;
            }
            break;
        }
        PQclear(r);
    }
    if (st == BS_OK && !synced)
        st = bs_error_set(err, BS_ERR_RETRY, "balance: %s", PQerrorMessage(pg));
    if (st == BS_OK && failed != NULL)
        st = bs_error_set(err,
                          PQstatus(pg) == CONNECTION_OK
                              ? bs_classify_sqlstate(PQresultErrorField(failed, PG_DIAG_SQLSTATE))
                              : BS_ERR_RETRY,
                          "balance: %s: %s", at < n ? q[at].name : "pipeline",
                          PQresultErrorMessage(failed));
    PQclear(failed);
    if (PQexitPipelineMode(pg) != 1 && st == BS_OK)
        st = bs_error_set(err, BS_ERR_RETRY, "balance: pipeline: %s", PQerrorMessage(pg));
    if (st == BS_OK && got < n)
        st = bs_error_set(err, BS_ERR_FATAL, "balance: %zu of %zu results", got, n);
    if (st != BS_OK)
        for (i = 0; i < n; i++) {
            PQclear(res[i]);
            res[i] = NULL;
        }
    return st;
}

/* Statement @i of balance_stmts with its parameters (@p2 NULL for one). */
static piped stmt(int i, const char *p1, const char *p2)
{
    piped q = {balance_stmts[i].name, balance_stmts[i].sql, balance_stmts[i].nparams, {p1, p2}};

    return q;
}

bs_status bs_balance_prepare(bs_conn *c, bs_error *err)
{
    size_t i;
    bs_status st = BS_OK;

    for (i = 0; i < N_Q && st == BS_OK; i++)
        st = bs_prepare(c, balance_stmts[i].name, balance_stmts[i].sql, balance_stmts[i].nparams,
                        err);
    return st;
}

bs_status bs_balance_fetch(bs_conn *c, bs_catalog *cat, const char *key, const char *account,
                           billing_time_t now, bs_apikey_auth *auth, int *valid,
                           bs_balance_input **out, bs_error *err)
{
    const billing_zone *zone = account != NULL ? bs_catalog_zone(cat, account) : NULL;
    bs_balance_input *in = NULL;
    piped q[N_Q];
    PGresult *res[N_Q];
    char idtext[24];
    char month[16];
    char before[48];
    char *list = NULL;
    json_t *ids = NULL;
    size_t n = zone != NULL ? N_Q : Q_KEY + 1;
    bs_status st;
    int year;
    int mon;

    *out = NULL;
    *valid = 0;
    memset(auth, 0, sizeof(*auth));
    memset(q, 0, sizeof(q));
    if (bs_apikey_check_id(key, idtext) != 0)
        return BS_OK; /* malformed: nothing to ask */
    q[Q_KEY] = stmt(Q_KEY, idtext, NULL);
    if (zone != NULL) {
        ids = json_pack("[s]", account);
        list = ids != NULL ? json_dumps(ids, JSON_COMPACT) : NULL;
        in = calloc(1, sizeof(*in));
        if (list == NULL || in == NULL) {
            st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
            goto out;
        }
        billing_zone_year_month(zone, now, &year, &mon);
        snprintf(month, sizeof(month), "%04d-%02d-01", year % 10000, mon % 100);
        /* As bs_events_fetch(now + 1) bounds it, the one balance.c used before. */
        billing_time_format(now + 1, before, sizeof(before));
        q[Q_AGG] = stmt(Q_AGG, account, NULL);
        q[Q_HISTORY] = stmt(Q_HISTORY, list, month);
        q[Q_RUNNING] = stmt(Q_RUNNING, account, before);
    }
    st = pipeline_run(c, q, n, res, err);
    if (st != BS_OK)
        goto out;
    bs_apikey_check_rows(res[Q_KEY], key, auth, valid);
    PQclear(res[Q_KEY]);
    if (in != NULL) {
        memcpy(in->res, res, sizeof(res));
        in->res[Q_KEY] = NULL;
        *out = in;
        in = NULL;
    }
out:
    bs_balance_input_free(in);
    free(list);
    json_decref(ids);
    return st;
}

bs_status bs_balance_input_rater(const bs_balance_input *in, bs_catalog *cat, const char *account,
                                 billing_rater **out, bs_error *err)
{
    char msg[MSG_MAX];
    billing_rater *r = NULL;
    bs_history h;
    bs_status st;

    *out = NULL;
    billing_rater_new(bs_catalog_lib(cat), &r, msg, sizeof(msg));
    if (r == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "catalog: %s", msg);
    billing_rater_set_dedupe(r, 0);
    st = bs_aggregates_add_rows(in->res[Q_AGG], r, err);
    if (st == BS_OK) {
        /* The history as bs_history_read reads it; the input keeps its rows. */
        h.res = in->res[Q_HISTORY];
        h.row = 0;
        st = bs_history_give(&h, r, account, err);
    }
    if (st != BS_OK) {
        billing_rater_destroy(r);
        return st;
    }
    *out = r;
    return BS_OK;
}

/* Microseconds since 1970 (text) and nanoseconds (text) into *@out; 0, or -1 out of range. */
static int instant_of(const char *us, const char *ns, billing_time_t *out)
{
    char *end;
    long long v;
    long nanos;

    errno = 0;
    v = strtoll(us, &end, 10);
    if (errno != 0 || *end != '\0' || v <= -(INT64_MAX / 1000) || v >= INT64_MAX / 1000)
        return -1;
    nanos = strtol(ns, &end, 10);
    if (*end != '\0' || nanos < 0 || nanos > 999)
        return -1;
    *out = (billing_time_t)v * 1000 + nanos;
    return 0;
}

/* The rows of SQL_RUNNING in @res to @fn, as bs_balance_input_running says. */
static bs_status running_rows(const PGresult *res, bs_event_fn fn, void *arg, bs_error *err)
{
    billing_time_t start;
    billing_time_t end;
    int i;

    for (i = 0; i < PQntuples(res) && i < RUNNING_MAX; i++) {
        const char *id = PQgetvalue(res, i, 1);

        if (instant_of(PQgetvalue(res, i, 4), PQgetvalue(res, i, 5), &start) != 0 ||
            instant_of(PQgetvalue(res, i, 6), PQgetvalue(res, i, 7), &end) != 0)
            return bs_error_set(err, BS_ERR_INVALID, "event '%.128s': instant out of range", id);
        if (fn(arg, PQgetvalue(res, i, 0), id, PQgetvalue(res, i, 2), PQgetvalue(res, i, 3), start,
               end, PQgetvalue(res, i, 8), PQgetvalue(res, i, 9), PQgetvalue(res, i, 10)) != 0)
            return bs_error_set(err, BS_ERR_INVALID, "event '%.128s' was not accepted", id);
    }
    return BS_OK;
}

bs_status bs_balance_input_running(const bs_balance_input *in, bs_event_fn fn, void *arg,
                                   bs_error *err)
{
    return running_rows(in->res[Q_RUNNING], fn, arg, err);
}

bs_status bs_balance_running(bs_conn *c, const char *account, billing_time_t at, bs_event_fn fn,
                             void *arg, bs_error *err)
{
    char before[48];
    piped q;
    PGresult *res = NULL;
    bs_status st;

    billing_time_format(at + 1, before, sizeof(before));
    q = (piped){RUNNING_STMT, SQL_RUNNING, 2, {account, before}};
    st = pipeline_run(c, &q, 1, &res, err);
    if (st == BS_OK)
        st = running_rows(res, fn, arg, err);
    PQclear(res);
    return st;
}

void bs_balance_input_free(bs_balance_input *in)
{
    size_t i;

    if (in == NULL)
        return;
    for (i = 0; i < N_Q; i++)
        PQclear(in->res[i]);
    free(in);
}
