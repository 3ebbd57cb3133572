/*
 * rate_balance.c - the report of `billing rate --at INSTANT`: for each
 * account (or the one --account names), the credit left at the instant
 * and, at the price of what runs then, when it reaches zero. Both figures
 * are the library's (billing_rater_credit_balance and
 * billing_rater_credit_exhaustion); this file only lays them out.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "numfmt.h"
#include "rate.h"

/* One account's figures. */
typedef struct balance {
    const char *account;
    const billing_zone *zone;
    char left[64];      /* credit left, exact decimal */
    size_t running;     /* events running at the instant */
    billing_time_t zero; /* when it reaches zero; INT64_MAX: never */
} balance;

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
    return CLI_EXIT_OK;
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

static int add_json_balance(rate_ctx *c, const balance *b, void *arg)
{
    char zero[40];
    json_t *o;

    (void)c;
    if (b->zero != INT64_MAX && billing_time_format(b->zero, zero, sizeof(zero)) < 0)
        zero[0] = '\0';
    o = json_pack("{s:s, s:s, s:I, s:o}", "account", b->account, "credit_left", b->left,
                  "running_events", (json_int_t)b->running, "reaches_zero_at",
                  b->zero == INT64_MAX ? json_null() : json_string(zero));
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

    (void)arg;
    numfmt_decimal(b->left, scale > 0 ? scale : 0, 40, c->view.thousands, left, sizeof(left));
    printf("%s: at %s %s, credit left %s %s; %zu event%s running; reaches zero %s\n",
           b->account, render_local_time(b->zone, c->opts.at, 0, at, sizeof(at)),
           b->zone != NULL ? billing_zone_name(b->zone) : "UTC", left,
           currency != NULL ? currency : "", b->running,
           b->running == 1 ? "" : "s", zero_text(c, b, zero, sizeof(zero)));
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
