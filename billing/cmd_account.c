/*
 * cmd_account.c - `billing account balance ACCOUNT`: the live credit
 * balance and the month's charges of an account, computed by libbilling
 * from what the store holds (store/balance.h, bs_balance_rater: the
 * aggregates stored by the ingest pipeline, or with --at the raw events
 * cut at the instant, and finalized months as issued), so they match what
 * `billing rate` gives for the same events and what `billing close`
 * starts from. With --format json, the very document billingd's GET
 * /v1/accounts/{id}/balance answers (store/balanceview.h: the grants
 * valid at the instant and when the credit runs out too).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <time.h>

#include "balance.h"
#include "balanceview.h"
#include "cli.h"
#include "dbcli.h"
#include "migrate.h"

#define MSG_MAX 512
#define AMOUNT_MAX 256

typedef struct account_opts {
    const char *db;
    const char *book;
    int at_set;        /* --at given */
    billing_time_t at; /* ... the instant */
    int json;          /* --format json */
} account_opts;

static void usage(FILE *out)
{
    fputs("Usage: billing account balance ACCOUNT [--at TIME] [--format text|json] [--book ID]\n"
          "                               [--db CONNINFO]\n"
          "\n"
          "The credit left to ACCOUNT at TIME (default: now), exact, and the charges of\n"
          "the account's local month containing TIME, from the usage stored by billingd\n"
          "or `billing ingest` and the catalog loaded with `billing load`. With --at, the\n"
          "usage before TIME only (events running then cut there, as `billing rate --at`\n"
          "does); without it, all the usage stored. Months already finalized count as\n"
          "issued (what they took of each grant, and the account credit they left less\n"
          "any refunded out of band), as `billing close` counts them.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_ACCOUNT);
    fputs("\n"
          "Prints `credit_remaining` (grants and account credit), then the month's\n"
          "`subtotal`, `credits`, `tax`, `total`, `currency`, `account_credit` (spent)\n"
          "and `account_credit_left` as key=value lines; with --format json, one JSON\n"
          "object, the answer of billingd's GET /v1/accounts/ACCOUNT/balance?at=TIME:\n"
          "the same figures, each grant valid at TIME with what it has left and its\n"
          "expiry, and `exhausts_at`, when the credit runs out at the burn of the events\n"
          "running at TIME.\n"
          "Exit status: 0 shown; 2 usage error; 3 unknown account or invalid stored\n"
          "data; 4 internal error; 5 database error.\n",
          out);
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    account_opts *o = ctx;

    switch (id) {
    case CLI_OPT_DB:
        o->db = v->text;
        break;
    case CLI_OPT_BOOK:
        o->book = v->text;
        break;
    case CLI_OPT_AT:
        o->at_set = 1;
        o->at = v->instant;
        break;
    case CLI_OPT_FORMAT:
        o->json = strcmp(v->text, "json") == 0;
        break;
    default:
        return cli_usage_error("account", "bad option");
    }
    return CLI_EXIT_OK;
}

static int print_month(billing_rater *r, const char *account, billing_time_t at,
                       const billing_zone *zone)
{
    char msg[MSG_MAX];
    billing_invoice *inv = NULL;
    int year;
    int month;

    billing_zone_year_month(zone, at, &year, &month);
    if (billing_rater_invoice(r, account, year, month, &inv, msg, sizeof(msg)) != BILLING_OK) {
        cli_error("account balance: %s", msg);
        return CLI_EXIT_INPUT;
    }
    printf("month=%04d-%02d\nsubtotal=%s\ncredits=%s\ntax=%s\ntotal=%s\ncurrency=%s\n", year, month,
           billing_invoice_subtotal(inv), billing_invoice_credits(inv), billing_invoice_tax(inv),
           billing_invoice_total(inv), billing_invoice_currency(inv));
    printf("account_credit=%s\naccount_credit_left=%s\n", billing_invoice_account_credit(inv),
           billing_invoice_account_credit_left(inv));
    billing_invoice_destroy(inv);
    return CLI_EXIT_OK;
}

/* The balance as billingd's API answers it (store/balanceview.h), on one line. */
static int show_json(bs_conn *c, bs_catalog *cat, billing_rater *r, const char *account,
                     billing_time_t at)
{
    json_t *o = NULL;
    char *text;
    bs_error err;

    if (bs_balance_json(c, cat, r, account, at, NULL, &o, &err) != BS_OK)
        return dbcli_fail("account balance", &err);
    text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (text == NULL) {
        cli_error("account balance: out of memory");
        return CLI_EXIT_INTERNAL;
    }
    printf("%s\n", text);
    free(text);
    return CLI_EXIT_OK;
}

static int show(bs_conn *c, bs_catalog *cat, const char *account, billing_time_t at, int at_set,
                int json)
{
    char balance[AMOUNT_MAX];
    char when[40];
    billing_rater *r = NULL;
    billing_status st;
    bs_error err;
    int rc = CLI_EXIT_OK;

    if (bs_balance_rater(c, cat, account, at_set ? &at : NULL, at, &r, &err) != BS_OK)
        return dbcli_fail("account balance", &err);
    if (json) {
        rc = show_json(c, cat, r, account, at);
        goto out;
    }
    st = billing_rater_credit_balance(r, account, at, balance, sizeof(balance));
    if (st != BILLING_OK) {
        cli_error("account balance: account '%s': %s", account, billing_strerror(st));
        rc = CLI_EXIT_INPUT;
        goto out;
    }
    billing_time_format(at, when, sizeof(when));
    printf("account=%s\nat=%s\ncredit_remaining=%s\n", account, when, balance);
    rc = print_month(r, account, at, bs_catalog_zone(cat, account));
out:
    billing_rater_destroy(r);
    return rc;
}

/* --at, or now. */
static billing_time_t instant(const account_opts *o)
{
    return o->at_set ? o->at : (billing_time_t)time(NULL) * BILLING_NS_PER_SEC;
}

int cmd_account(int argc, char **argv)
{
    static const char *const verbs[] = {"balance", NULL};
    account_opts o;
    bs_catalog *cat = NULL;
    billing_time_t at;
    bs_error err;
    bs_conn *c;
    int first = 0;
    int verb = 0;
    int rc;

    memset(&o, 0, sizeof(o));
    rc = cli_verb_parse("account", CLI_CMD_ACCOUNT, verbs, argc, argv, take_option, &o, &verb,
                        &first);
    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (first != argc - 1)
        return cli_usage_error("account", "one ACCOUNT needed");
    at = instant(&o);
    c = dbcli_connect(o.db);
    if (c == NULL)
        return CLI_EXIT_DATABASE;
    if (bs_schema_require(c, &err) != BS_OK || (cat = bs_catalog_read(c, o.book, &err)) == NULL)
        rc = dbcli_fail("account balance", &err);
    else
        rc = show(c, cat, argv[first], at, o.at_set, o.json);
    bs_catalog_free(cat);
    bs_close(c);
    return rc;
}
