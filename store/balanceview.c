/*
 * balanceview.c - an account's balance as one JSON document
 * (balanceview.h), for billingd's API and `billing account balance
 * --format json` alike.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "balanceview.h"
#include "invoices.h"

#define MSG_MAX 512
#define AMOUNT_MAX 256
/* Events running at the instant kept for the exhaustion estimate at most. */
#define RUNNING_MAX 100000

typedef struct grant_row {
    char id[129];
    char remaining[AMOUNT_MAX];
    char expires[40];
} grant_row;

/* Grown with the grants given (from one: accounts with two grow it, so the tests cover it), not
 * sized by the bound: 109 kB zeroed per balance before. */
typedef struct grant_list {
    grant_row *rows;
    size_t n;
    size_t cap;
    int nomem;
} grant_list;

/* A billing_grant_fn: a grant valid at the instant and what it has left. */
static int grant_add(void *arg, const char *grant, const char *remaining, billing_time_t expires_at)
{
    grant_list *g = arg;
    grant_row *r;

    if (g->n == BS_BALANCE_GRANTS_MAX)
        return 1;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 1;

        r = realloc(g->rows, cap * sizeof(*r));
        if (r == NULL) {
            g->nomem = 1;
            return 1;
        }
        g->rows = r;
        g->cap = cap;
    }
    r = &g->rows[g->n++];
    snprintf(r->id, sizeof(r->id), "%s", grant);
    snprintf(r->remaining, sizeof(r->remaining), "%s", remaining);
    billing_time_format(expires_at, r->expires, sizeof(r->expires));
    return 0;
}

static int by_id(const void *a, const void *b)
{
    return strcmp(((const grant_row *)a)->id, ((const grant_row *)b)->id);
}

/* The events running at an instant, for the exhaustion estimate. */
typedef struct running {
    billing_event **evs;
    size_t n;
    size_t cap;
    billing_time_t at;
    bs_status st;      /* why keep_running stopped (BS_OK: it did not) */
    char why[MSG_MAX]; /* and what to say, naming the event */
} running;

/*
 * A bs_event_fn: keep the events running at the instant. 0, or 1 with
 * run->st and run->why set: BS_ERR_FATAL when libbilling refuses a
 * stored row (its reason, the event named), or BS_ERR_NOMEM.
 */
static int keep_running(void *arg, const char *account, const char *id, const char *resource,
                        const char *meter, billing_time_t start, billing_time_t end,
                        const char *quantity, const char *model, const char *region)
{
    running *run = arg;
    char msg[MSG_MAX];
    billing_event *ev;
    billing_event **grown;
    billing_status lst;

    if (end <= run->at || start > run->at)
        return 0;
    if (run->n == run->cap) {
        size_t cap = run->cap ? 2 * run->cap : 16;

        if (cap > RUNNING_MAX)
            return 0;
        grown = realloc(run->evs, cap * sizeof(*grown));
        if (grown == NULL)
            goto nomem;
        run->evs = grown;
        run->cap = cap;
    }
    ev = billing_event_new();
    if (ev == NULL)
        goto nomem;
    lst = bs_event_set(ev, account, id, resource, meter, start, end, quantity, model, region, msg,
                       sizeof(msg));
    if (lst != BILLING_OK) {
        billing_event_destroy(ev);
        /* Not "no account" (BS_ERR_INVALID): the stored row is what libbilling refuses. */
        run->st = BS_ERR_FATAL;
        snprintf(run->why, sizeof(run->why), "account '%.128s': stored event '%.128s': %.200s",
                 account, id, msg[0] != '\0' ? msg : billing_strerror(lst));
        return 1;
    }
    run->evs[run->n++] = ev;
    return 0;
nomem:
    run->st = BS_ERR_NOMEM;
    snprintf(run->why, sizeof(run->why), "out of memory");
    return 1;
}

/*
 * When the credit runs out at the burn of the account's stored events
 * running at @at: from @in when given (read at @at), else from the store.
 */
static bs_status exhaustion(bs_conn *c, const bs_balance_input *in, billing_rater *r,
                            const char *account, billing_time_t at, billing_time_t *zero,
                            size_t *n_running, bs_error *err)
{
    char msg[MSG_MAX];
    running run;
    bs_status st = BS_OK;
    size_t i;

    memset(&run, 0, sizeof(run));
    run.at = at;
    *zero = INT64_MAX;
    if (in != NULL)
        st = bs_balance_input_running(in, keep_running, &run, err);
    else
        st = bs_balance_running(c, account, at, keep_running, &run, err);
    if (st != BS_OK && run.st != BS_OK) /* keep_running stopped it: say why */
        st = bs_error_set(err, run.st, "%s", run.why);
    if (st == BS_ERR_INVALID) { /* out of memory, or an instant out of range: not "no account" */
        st = BS_ERR_FATAL;
        if (err != NULL)
            err->status = st;
    }
    if (st != BS_OK)
        goto out;
    if (billing_rater_credit_exhaustion(r, account, at, (const billing_event *const *)run.evs,
                                        run.n, zero, msg, sizeof(msg)) != BILLING_OK)
        *zero = INT64_MAX;
    *n_running = run.n;
out:
    for (i = 0; i < run.n; i++)
        billing_event_destroy(run.evs[i]);
    free(run.evs);
    return st;
}

bs_status bs_balance_json(bs_conn *c, bs_catalog *cat, billing_rater *r, const char *account,
                          billing_time_t at, const bs_balance_input *in, json_t **out,
                          bs_error *err)
{
    char left[AMOUNT_MAX];
    char when[40];
    char month[16];
    char msg[MSG_MAX];
    const billing_zone *zone = bs_catalog_zone(cat, account);
    billing_time_t zero = INT64_MAX;
    billing_invoice *inv = NULL;
    grant_list g_ = {NULL, 0, 0, 0};
    grant_list *g = &g_;
    json_t *grants = NULL;
    json_t *o = NULL;
    size_t n_running = 0;
    bs_status st = BS_OK;
    billing_status lst;
    int year;
    int mon;
    size_t i;

    *out = NULL;
    if (zone == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "no account '%s'", account);
    /* The month's invoice first: the rater keeps its credit state, which the balance, the
       grants and the exhaustion below start from instead of computing the month again. */
    billing_zone_year_month(zone, at, &year, &mon);
    lst = billing_rater_invoice(r, account, year, mon, &inv, msg, sizeof(msg));
    if (lst == BILLING_ERR_UNKNOWN_ACCOUNT)
        return bs_error_set(err, BS_ERR_INVALID, "no account '%s'", account);
    if (lst != BILLING_OK)
        return bs_error_set(err, BS_ERR_FATAL, "account balance: %s", msg);
    if (billing_rater_credit_balance(r, account, at, left, sizeof(left)) != BILLING_OK) {
        st = bs_error_set(err, BS_ERR_INVALID, "no account '%s'", account);
        goto out;
    }
    if (billing_rater_credit_grants(r, account, at, grant_add, g) != BILLING_OK || g->nomem) {
        st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (g->n > 1)
        qsort(g->rows, g->n, sizeof(g->rows[0]), by_id);
    st = exhaustion(c, in, r, account, at, &zero, &n_running, err);
    if (st != BS_OK)
        goto out;
    grants = json_array();
    for (i = 0; grants != NULL && i < g->n; i++)
        json_array_append_new(grants,
                              json_pack("{s:s, s:s, s:s}", "grant", g->rows[i].id, "remaining",
                                        g->rows[i].remaining, "expires_at", g->rows[i].expires));
    billing_time_format(at, when, sizeof(when));
    snprintf(month, sizeof(month), "%04d-%02d", year % 10000, mon % 100);
    o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O}", "account", account, "at",
        when, "currency", billing_invoice_currency(inv), "credit_remaining", left, "month", month,
        "subtotal", billing_invoice_subtotal(inv), "credits", billing_invoice_credits(inv), "tax",
        billing_invoice_tax(inv), "total", billing_invoice_total(inv), "account_credit",
        billing_invoice_account_credit(inv), "account_credit_left",
        billing_invoice_account_credit_left(inv), "grants", grants != NULL ? grants : json_null());
    if (o == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (zero == INT64_MAX) {
        json_object_set_new(o, "exhausts_at", json_null());
    } else {
        billing_time_format(zero, when, sizeof(when));
        json_object_set_new(o, "exhausts_at", json_string(when));
    }
    json_object_set_new(o, "running_events", json_integer((json_int_t)n_running));
    *out = o;
out:
    json_decref(grants);
    free(g->rows);
    billing_invoice_destroy(inv);
    return st;
}
