/*
 * rate_balance.c - the report of `billing rate --at INSTANT`: for each
 * account (or the one --account names), the credit left at the instant
 * and, at the price of what runs then, when it reaches zero. Both figures
 * are the library's (billing_rater_credit_balance and
 * billing_rater_credit_exhaustion). Per grant valid at the instant, what
 * remains is what the last invoice that used it left (the month of the
 * instant's invoice holds usage up to the instant only), or all of it.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "numfmt.h"
#include "rate_ctx.h"

/* Most grants listed for one account (the balance counts them all). */
#define GRANTS_SHOWN_MAX 64

/* A grant valid at the instant, and what remains of it. */
typedef struct grant_left {
    const char *id;
    char left[64];
    billing_time_t expires;
} grant_left;

/* One account's figures. */
typedef struct balance {
    const char *account;
    const billing_zone *zone;
    char left[64];       /* credit left, exact decimal */
    size_t running;      /* events running at the instant */
    billing_time_t zero; /* when it reaches zero; INT64_MAX: never */
    grant_left grants[GRANTS_SHOWN_MAX];
    size_t n_grants;
} balance;

/* The remainder of grant @id after an invoice, when it is one listed. */
static void set_left(balance *b, const char *id, const char *left)
{
    size_t i;

    for (i = 0; i < b->n_grants; i++) {
        if (strcmp(b->grants[i].id, id) == 0)
            snprintf(b->grants[i].left, sizeof(b->grants[i].left), "%s", left);
    }
}

/* What the invoice of @ym (year * 100 + month) leaves of each grant it uses. */
static int apply_invoice(rate_ctx *c, balance *b, int ym)
{
    char err[ERR_MAX];
    billing_invoice *inv;
    size_t i;

    if (billing_rater_invoice(c->rater, b->account, ym / 100, ym % 100, &inv, err, sizeof(err)) !=
        BILLING_OK) {
        cli_error("%s", err);
        return CLI_EXIT_INTERNAL;
    }
    for (i = 0; i < billing_invoice_credit_count(inv); i++)
        set_left(b, billing_invoice_credit_grant(inv, i), billing_invoice_credit_remaining(inv, i));
    for (i = 0; i < billing_invoice_returned_count(inv); i++)
        set_left(b, billing_invoice_returned_grant(inv, i),
                 billing_invoice_returned_remaining(inv, i));
    billing_invoice_destroy(inv);
    return CLI_EXIT_OK;
}

/* The grants valid at the instant, each with its amount before any invoice. */
static void valid_grants(rate_ctx *c, balance *b)
{
    rate_grant g;
    size_t i;

    for (i = 0;
         b->n_grants < GRANTS_SHOWN_MAX && rate_accounts_grant(c->accinfo, b->account, i, &g);
         i++) {
        if (g.granted > c->opts.at || g.expires <= c->opts.at)
            continue;
        b->grants[b->n_grants].id = g.id;
        b->grants[b->n_grants].expires = g.expires;
        snprintf(b->grants[b->n_grants].left, sizeof(b->grants[b->n_grants].left), "%s", g.amount);
        b->n_grants++;
    }
}

/* Walk the invoices up to the month of the instant, oldest first. */
static int grants_left(rate_ctx *c, balance *b)
{
    billing_months *list = NULL;
    billing_status st;
    size_t count;
    size_t i;
    int ym;
    int now;
    int year;
    int month;
    int rc = CLI_EXIT_OK;

    valid_grants(c, b);
    if (b->n_grants == 0)
        return CLI_EXIT_OK;
    st = billing_rater_months(c->rater, b->account, &list, NULL, 0);
    if (st == BILLING_ERR_NOMEM) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    if (st != BILLING_OK)
        return CLI_EXIT_OK;
    count = billing_months_count(list);
    billing_zone_year_month(b->zone, c->opts.at, &year, &month);
    now = year * 100 + month;
    for (i = 0; rc == CLI_EXIT_OK && i < count; i++) {
        ym = billing_months_year(list, i) * 100 + billing_months_month(list, i);
        if (ym >= now)
            break;
        rc = apply_invoice(c, b, ym);
    }
    if (rc == CLI_EXIT_OK)
        rc = apply_invoice(c, b, now);
    billing_months_destroy(list);
    return rc;
}

static int account_balance(rate_ctx *c, const char *account, balance *b)
{
    char err[ERR_MAX];
    billing_event **evs = NULL;
    billing_status st;

    memset(b, 0, sizeof(*b));
    b->account = account;
    b->zone = rate_accounts_zone(c->accinfo, c->zones, account);
    st = billing_rater_credit_balance(c->rater, account, c->opts.at, b->left, sizeof(b->left));
    if (st != BILLING_OK) {
        cli_error("account '%s': credit balance: %s", account, billing_strerror(st));
        return CLI_EXIT_INTERNAL;
    }
    if (running_events(c->running, account, &evs, &b->running) != 0) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    st = billing_rater_credit_exhaustion(c->rater, account, c->opts.at,
                                         (const billing_event *const *)evs, b->running, &b->zero,
                                         err, sizeof(err));
    running_free(evs, b->running);
    if (st != BILLING_OK) {
        cli_error("account '%s': %s", account, err);
        return CLI_EXIT_INTERNAL;
    }
    return b->zone != NULL ? grants_left(c, b) : CLI_EXIT_OK;
}

typedef int (*balance_fn)(rate_ctx *c, const balance *b, void *arg);

/* What for_each_balance hands to one_balance. */
struct balance_call {
    balance_fn fn;
    void *arg;
};

static int one_balance(rate_ctx *c, const char *account, void *arg)
{
    const struct balance_call *call = arg;
    balance b;
    int rc = account_balance(c, account, &b);

    return rc == CLI_EXIT_OK ? call->fn(c, &b, call->arg) : rc;
}

static int for_each_balance(rate_ctx *c, balance_fn fn, void *arg)
{
    struct balance_call call;

    call.fn = fn;
    call.arg = arg;
    return rate_for_each_account(c, one_balance, &call);
}

/* ---------------------------------------------------------------------- */
/* JSON                                                                    */
/* ---------------------------------------------------------------------- */

static json_t *grants_json(const balance *b)
{
    json_t *arr = json_array();
    json_t *o;
    char exp[40];
    size_t i;

    for (i = 0; arr != NULL && i < b->n_grants; i++) {
        billing_time_format(b->grants[i].expires, exp, sizeof(exp));
        o = json_pack("{s:s, s:s, s:s}", "grant", b->grants[i].id, "remaining", b->grants[i].left,
                      "expires_at", exp);
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int add_json_balance(rate_ctx *c, const balance *b, void *arg)
{
    char zero[40];
    json_t *o;

    (void)c;
    if (b->zero != INT64_MAX && billing_time_format(b->zero, zero, sizeof(zero)) < 0)
        zero[0] = '\0';
    o = json_pack("{s:s, s:s, s:o, s:I, s:o}", "account", b->account, "credit_left", b->left,
                  "grants", grants_json(b), "running_events", (json_int_t)b->running,
                  "reaches_zero_at", b->zero == INT64_MAX ? json_null() : json_string(zero));
    if (o == NULL || json_array_append_new(arg, o) != 0) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

static int print_json_balances(rate_ctx *c)
{
    json_t *root = json_object();
    json_t *list = json_array();
    char at[40];
    int rc = CLI_EXIT_INTERNAL;

    billing_time_format(c->opts.at, at, sizeof(at));
    if (root == NULL || list == NULL ||
        json_object_set_new(root, "summary", rate_summary_json(c)) != 0 ||
        json_object_set_new(root, "at", json_string(at)) != 0 ||
        json_object_set(root, "credit", list) != 0) {
        cli_error("out of memory");
        goto done;
    }
    rc = for_each_balance(c, add_json_balance, list);
    if (rc == CLI_EXIT_OK)
        rc = rate_dump_json(root);
done:
    json_decref(list);
    json_decref(root);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Table                                                                   */
/* ---------------------------------------------------------------------- */

/* When it reaches zero, on the account's clock; or why it does not. */
static const char *zero_text(const rate_ctx *c, const balance *b, char *buf, size_t size)
{
    char t[40];

    if (b->zero == INT64_MAX)
        return b->running == 0 ? "never (nothing running)" : "never (no charge running)";
    if (b->zero <= c->opts.at)
        return "now (no credit left)";
    snprintf(buf, size, "%s %s", render_local_time(b->zone, b->zero, 0, t, sizeof(t)),
             b->zone != NULL ? billing_zone_name(b->zone) : "UTC");
    return buf;
}

static int print_table_balance(rate_ctx *c, const balance *b, void *arg)
{
    const char *currency = rate_accounts_currency(c->accinfo, b->account);
    int scale = currency != NULL ? billing_currency_digits(currency) : 0;
    char left[NUMFMT_MAX];
    char zero[96];
    char at[40];
    size_t i;

    (void)arg;
    numfmt_decimal(b->left, scale > 0 ? scale : 0, 40, c->view.thousands, left, sizeof(left));
    printf("%s: at %s %s, credit left %s %s; %zu event%s running; reaches zero %s\n", b->account,
           render_local_time(b->zone, c->opts.at, 0, at, sizeof(at)),
           b->zone != NULL ? billing_zone_name(b->zone) : "UTC", left,
           currency != NULL ? currency : "", b->running, b->running == 1 ? "" : "s",
           zero_text(c, b, zero, sizeof(zero)));
    for (i = 0; i < b->n_grants; i++) {
        numfmt_decimal(b->grants[i].left, scale > 0 ? scale : 0, 40, c->view.thousands, left,
                       sizeof(left));
        printf("  grant %s: %s left, expires %s\n", b->grants[i].id, left,
               render_local_time(b->zone, b->grants[i].expires, 0, at, sizeof(at)));
    }
    return CLI_EXIT_OK;
}

int rate_print_credit(rate_ctx *c)
{
    int rc;

    if (c->opts.output != OUT_TABLE)
        return print_json_balances(c);
    rc = for_each_balance(c, print_table_balance, NULL);
    if (rc == CLI_EXIT_OK)
        rate_print_counts(stdout, &c->counts);
    return rc;
}
