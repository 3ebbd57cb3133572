/*
 * cmd_account.c - `billing account balance ACCOUNT`: the live credit
 * balance and the month's charges of an account (finalized months as
 * issued, close.h's close_give_history), computed by libbilling
 * from the aggregates stored by the ingest pipeline (the figures billingd
 * alerts on), so they match what `billing rate` gives for the same events.
 * With --at, the aggregates hold whole months, usage after the instant
 * too: the account's stored raw events are rated instead, each cut at
 * the instant as `billing rate --at` cuts it.
 */
#include "config.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "close.h"
#include "dbcli.h"
#include "ingest.h"
#include "invoices.h"
#include "migrate.h"

#define MSG_MAX 512
#define AMOUNT_MAX 256

typedef struct account_opts {
    const char *db;
    const char *book;
    const char *at;
} account_opts;

static void usage(FILE *out)
{
    fputs("Usage: billing account balance ACCOUNT [--at TIME] [--book ID] [--db CONNINFO]\n"
          "\n"
          "The credit left to ACCOUNT at TIME (default: now), exact, and the charges of\n"
          "the account's local month containing TIME, from the usage stored by billingd\n"
          "or `billing ingest` and the catalog loaded with `billing load`. With --at, the\n"
          "usage before TIME only (events running then cut there, as `billing rate --at`\n"
          "does); without it, all the usage stored. Months already finalized count as\n"
          "issued (what they took of each grant, and the account credit they left less\n"
          "any refunded out of band), as `billing close` counts them.\n"
          "\n"
          "Options:\n"
          "  --at TIME              RFC 3339 instant (default: now)\n"
          "  --book ID              price book (default: the only one)\n" DBCLI_DB_HELP
          "  --help                 print this help\n"
          "\n"
          "Prints `credit_remaining` (grants and account credit), then the month's\n"
          "`subtotal`, `credits`, `tax`, `total`, `currency`, `account_credit` (spent)\n"
          "and `account_credit_left` as key=value lines.\n"
          "Exit status: 0 shown; 2 usage error; 3 unknown account or invalid stored\n"
          "data; 4 internal error; 5 database error.\n",
          out);
}

enum { OPT_DB = 256, OPT_BOOK, OPT_AT, OPT_HELP };

static const struct option long_options[] = {
    {"db", required_argument, NULL, OPT_DB},
    {"book", required_argument, NULL, OPT_BOOK},
    {"at", required_argument, NULL, OPT_AT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int take_option(void *ctx, int opt, const char *arg)
{
    account_opts *o = ctx;

    switch (opt) {
    case OPT_DB:
        o->db = arg;
        return CLI_EXIT_OK;
    case OPT_BOOK:
        o->book = arg;
        return CLI_EXIT_OK;
    case OPT_AT:
        o->at = arg;
        return CLI_EXIT_OK;
    case OPT_HELP:
        return -1;
    default:
        return cli_usage_error("account", "bad option");
    }
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

/* What rate_cut receives. */
typedef struct cut_ctx {
    billing_rater *r;
    billing_event *ev;
    billing_time_t at;
    char msg[MSG_MAX];
} cut_ctx;

/* A bs_event_fn: rate a stored event up to the instant (it starts before it). */
static int rate_cut(void *arg, const char *account, const char *id, const char *resource,
                    const char *meter, billing_time_t start, billing_time_t end,
                    const char *quantity, const char *model, const char *region)
{
    cut_ctx *k = arg;
    billing_meter m;
    billing_status st;

    billing_event_reset(k->ev);
    st = billing_meter_parse(meter, &m);
    if (st == BILLING_OK)
        st = billing_event_set_id(k->ev, id);
    if (st == BILLING_OK)
        st = billing_event_set_account(k->ev, account);
    if (st == BILLING_OK)
        st = billing_event_set_resource(k->ev, resource);
    if (st == BILLING_OK)
        st = billing_event_set_meter(k->ev, m);
    if (st == BILLING_OK)
        st = billing_event_set_quantity(k->ev, quantity, k->msg, sizeof(k->msg));
    if (st == BILLING_OK)
        st = billing_event_set_model(k->ev, model);
    if (st == BILLING_OK)
        st = billing_event_set_region(k->ev, region);
    /* A level (GPUs, instances, GB) priced per unit of time: the part before the instant. */
    billing_event_set_interval(k->ev, start, end < k->at ? end : k->at);
    if (st == BILLING_OK)
        st = billing_rater_add(k->r, k->ev, k->msg, sizeof(k->msg));
    if (st == BILLING_OK)
        return 0;
    if (k->msg[0] == '\0')
        snprintf(k->msg, sizeof(k->msg), "stored event '%.128s': %s", id, billing_strerror(st));
    return -1;
}

/* The stored raw events of @account starting before @at, cut there, into @r. */
static int rate_events_before(bs_conn *c, billing_rater *r, const char *account, billing_time_t at)
{
    json_t *list = json_pack("[s]", account);
    char *text = list != NULL ? json_dumps(list, JSON_COMPACT) : NULL;
    cut_ctx k;
    bs_error err;
    bs_status st;
    int rc = CLI_EXIT_OK;

    memset(&k, 0, sizeof(k));
    k.r = r;
    k.at = at;
    k.ev = billing_event_new();
    if (text == NULL || k.ev == NULL) {
        cli_error("account balance: out of memory");
        rc = CLI_EXIT_INTERNAL;
        goto out;
    }
    st = bs_events_fetch(c, text, at, rate_cut, &k, &err);
    if (st == BS_ERR_INVALID && k.msg[0] != '\0') {
        cli_error("account balance: %s", k.msg);
        rc = CLI_EXIT_INPUT;
    } else if (st != BS_OK) {
        rc = dbcli_fail("account balance", &err);
    }
out:
    billing_event_destroy(k.ev);
    free(text);
    json_decref(list);
    return rc;
}

/* The usage of @account into @r: every stored aggregate, or with --at the events before it. */
static int rate_usage(bs_conn *c, bs_catalog *cat, billing_rater *r, const char *account,
                      const billing_time_t *at)
{
    bs_error err;

    if (at != NULL)
        return rate_events_before(c, r, account, *at);
    if (bs_aggregates_rate(c, cat, r, account, &err) != BS_OK)
        return dbcli_fail("account balance", &err);
    return CLI_EXIT_OK;
}

/*
 * Finalized months' credit as the ledger holds it (billing_rater_credit_issued), as the
 * next close takes it: a late event of a finalized month changes neither
 * the balance nor the month's credits here, as it changes neither on the
 * next draft (less account credit refunded out of band, billing invoice
 * refund). Every finalized month but the one containing @at counts.
 */
static int give_history(bs_conn *c, billing_rater *r, const char *account, billing_time_t at,
                        const billing_zone *zone)
{
    json_t *list = json_pack("[s]", account);
    char *text = list != NULL ? json_dumps(list, JSON_COMPACT) : NULL;
    char month[16];
    PGresult *history = NULL;
    bs_error err;
    int year;
    int mon;
    int row = 0;
    int rc = CLI_EXIT_OK;

    if (zone == NULL)
        goto out; /* an unknown account: the balance says so */
    if (text == NULL) {
        cli_error("account balance: out of memory");
        rc = CLI_EXIT_INTERNAL;
        goto out;
    }
    billing_zone_year_month(zone, at, &year, &mon);
    snprintf(month, sizeof(month), "%04d-%02d-01", year, mon);
    history = bs_credit_history(c, text, month, &err);
    if (history == NULL) {
        rc = dbcli_fail("account balance", &err);
        goto out;
    }
    if (close_give_history(r, "account balance", account, history, &row) != 0)
        rc = CLI_EXIT_INPUT;
out:
    PQclear(history);
    free(text);
    json_decref(list);
    return rc;
}

static int show(bs_conn *c, bs_catalog *cat, const char *account, billing_time_t at, int at_set)
{
    char msg[MSG_MAX];
    char balance[AMOUNT_MAX];
    char when[40];
    billing_rater *r;
    billing_status st;
    int rc = CLI_EXIT_OK;

    billing_rater_new(bs_catalog_lib(cat), &r, msg, sizeof(msg));
    if (r == NULL) {
        cli_error("account balance: catalog: %s", msg);
        return CLI_EXIT_INPUT;
    }
    billing_rater_set_dedupe(r, 0);
    rc = rate_usage(c, cat, r, account, at_set ? &at : NULL);
    if (rc == CLI_EXIT_OK)
        rc = give_history(c, r, account, at, bs_catalog_zone(cat, account));
    if (rc != CLI_EXIT_OK)
        goto out;
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

static int parse_at(const account_opts *o, billing_time_t *at)
{
    char msg[MSG_MAX];

    if (o->at == NULL) {
        *at = (billing_time_t)time(NULL) * BILLING_NS_PER_SEC;
        return CLI_EXIT_OK;
    }
    if (billing_time_parse(o->at, at, msg, sizeof(msg)) != BILLING_OK)
        return cli_usage_error("account", "--at: %s", msg);
    return CLI_EXIT_OK;
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
    rc =
        cli_verb_getopt("account", verbs, argc, argv, long_options, take_option, &o, &verb, &first);
    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (first != argc - 1)
        return cli_usage_error("account", "one ACCOUNT needed");
    rc = parse_at(&o, &at);
    if (rc != CLI_EXIT_OK)
        return rc;
    c = dbcli_connect(o.db);
    if (c == NULL)
        return CLI_EXIT_DATABASE;
    if (bs_schema_require(c, &err) != BS_OK || (cat = bs_catalog_read(c, o.book, &err)) == NULL)
        rc = dbcli_fail("account balance", &err);
    else
        rc = show(c, cat, argv[first], at, o.at != NULL);
    bs_catalog_free(cat);
    bs_close(c);
    return rc;
}
