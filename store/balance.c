/*
 * balance.c - an account's credit as the store knows it (balance.h): the
 * issued credit of finalized months, and a rater holding the stored usage.
 */
#include "config.h"

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
