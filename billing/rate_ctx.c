/*
 * rate_ctx.c - the state of one run of `billing rate` (rate_ctx.h) and
 * what every step asks of it: the book of an account, where temporary
 * files go, and the accounts to print in order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rate_ctx.h"

void rate_use_account(rate_ctx *c, const char *account)
{
    const char *book = c->n_books > 1 ? rate_accounts_book(c->accinfo, account) : NULL;
    int i;

    c->cat = c->books[0].cat;
    c->rater = c->books[0].rater;
    for (i = 0; book != NULL && i < c->n_books; i++) {
        if (strcmp(book, c->books[i].id) == 0) {
            c->cat = c->books[i].cat;
            c->rater = c->books[i].rater;
            return;
        }
    }
}

const char *rate_temp_dir(const rate_opts *o)
{
    const char *dir = o->temp_dir != NULL ? o->temp_dir : getenv("TMPDIR");

    return dir != NULL && dir[0] != '\0' ? dir : "/tmp";
}

/* A render_view written_price: usage rates and plan fees as the price book writes them. */
static const char *written_price(const void *arg, const billing_invoice *inv, size_t i)
{
    const rate_prices *p = arg;
    const char *version = billing_invoice_line_price_version(inv, i);

    switch (billing_invoice_line_kind(inv, i)) {
    case BILLING_LINE_USAGE:
        return rate_prices_rate(p, version, billing_invoice_line_meter(inv, i),
                                billing_invoice_line_model(inv, i),
                                billing_invoice_line_region(inv, i));
    case BILLING_LINE_FEE:
        return rate_prices_fee(p, version, billing_invoice_line_plan(inv, i));
    default:
        return NULL;
    }
}

int rate_for_each_account(rate_ctx *c, rate_account_fn fn, void *arg)
{
    const char *account;
    size_t a;
    int b;
    int rc = CLI_EXIT_OK;

    for (b = 0; rc == CLI_EXIT_OK && b < c->n_books; b++) {
        for (a = 0; rc == CLI_EXIT_OK && a < billing_rater_account_count(c->books[b].rater); a++) {
            account = billing_rater_account_id(c->books[b].rater, a);
            if (c->opts.account != NULL && strcmp(account, c->opts.account) != 0)
                continue;
            c->cat = c->books[b].cat;
            c->rater = c->books[b].rater;
            c->view.written_price = written_price;
            c->view.written_arg = c->books[b].prices;
            rc = fn(c, account, arg);
        }
    }
    return rc;
}
