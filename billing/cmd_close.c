/*
 * cmd_close.c - `billing close` and `billing rerate`: the month-end close
 * into PostgreSQL (close.h), and `--finalize` to number the drafts.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "close.h"
#include "dbcli.h"
#include "invoices.h"
#include "migrate.h"
#include "progress.h"

#define DEFAULT_BOOK CLI_DEFAULT_BOOK
/* Default grace period before drafts may be finalized: 3 days. */
#define DEFAULT_GRACE_SECONDS (3 * 86400)

typedef struct close_opts {
    close_params p;
    const char *period;
    int finalize;
    int64_t grace;
    int quiet;
} close_opts;

static void usage(FILE *out, const char *cmd)
{
    if (strcmp(cmd, "rerate") == 0) {
        fputs("Usage: billing rerate --period YYYY-MM [-j N] [--book ID] [--db CONNINFO]\n"
              "\n"
              "Recompute the draft invoices of a period from the raw events with the\n"
              "stored catalog as it is now (after a price-book fix or a late price\n"
              "version). Finalized invoices are never touched: correct those with\n"
              "`billing invoice void` and a new close, or with adjustments.\n",
              out);
    } else {
        fputs("Usage: billing close --period YYYY-MM [-j N] [--full] [--finalize [--grace DURATION]]\n"
              "                     [--book ID] [--db CONNINFO] [--quiet]\n"
              "\n"
              "Build every account's invoice of the month (in the account's time zone) as\n"
              "a draft in the database, re-rating the stored raw events through libbilling:\n"
              "lines, fees, refunds, credits applied with their ledger entries, tax,\n"
              "totals. Usage of finalized earlier months that arrived after they were\n"
              "finalized becomes prior-period adjustment lines. Idempotent: a second run\n"
              "changes nothing; an interrupted run is completed by running it again.\n"
              "An account whose events, catalog rows and other invoices are unchanged\n"
              "since its draft was computed (its close mark) is not re-rated.\n"
              "\n"
              "With --finalize, drafts of the period whose grace period has passed are\n"
              "then numbered gaplessly (INV-YYYY-NNNNNN) and frozen.\n",
              out);
    }
    fputs("\nOptions:\n", out);
    cli_help_options(out, strcmp(cmd, "rerate") == 0 ? CLI_CMD_RERATE : CLI_CMD_CLOSE);
    fputs("\n"
          "Progress goes to stderr (a bar on a terminal, otherwise a line every\n"
          "BILLING_PROGRESS_INTERVAL seconds, default 5); the summary to stdout.\n"
          "Exit status: 0 done; 1 some stored events were refused by the rating\n"
          "library (listed; the rest is closed); 2 usage error; 3 invalid catalog or a\n"
          "change the database refuses; 4 internal error; 5 database error.\n",
          out);
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    close_opts *o = ctx;

    switch (id) {
    case CLI_OPT_DB:
        o->p.db = v->text;
        break;
    case CLI_OPT_BOOK:
        o->p.book = v->text;
        break;
    case CLI_OPT_PERIOD:
        o->period = v->text;
        o->p.year = v->month / 12;
        o->p.month = v->month % 12 + 1;
        break;
    case CLI_OPT_JOBS:
        o->p.jobs = (int)v->n;
        break;
    case CLI_OPT_FINALIZE:
        o->finalize = 1;
        break;
    case CLI_OPT_GRACE:
        o->grace = v->seconds;
        break;
    case CLI_OPT_QUIET:
        o->quiet = 1;
        break;
    case CLI_OPT_FULL:
        o->p.full = 1;
        break;
    default:
        return cli_usage_error("close", "bad option");
    }
    return CLI_EXIT_OK;
}

static int parse_args(close_opts *o, const char *cmd, int argc, char **argv)
{
    int first;
    int rc;

    memset(o, 0, sizeof(*o));
    o->p.book = DEFAULT_BOOK;
    o->p.jobs = 1;
    o->grace = DEFAULT_GRACE_SECONDS;
    rc = cli_parse(cmd, strcmp(cmd, "rerate") == 0 ? CLI_CMD_RERATE : CLI_CMD_CLOSE, argc, argv,
                   take_option, o, &first);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (first != argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[first]);
    if (o->period == NULL)
        return cli_usage_error(cmd, "--period YYYY-MM is required");
    o->p.drafts_only = strcmp(cmd, "rerate") == 0;
    o->p.progress = progress_mode(stderr, o->quiet);
    return CLI_EXIT_OK;
}

static int finalize(const close_opts *o)
{
    char month[16];
    size_t done;
    size_t waiting;
    bs_error err;
    bs_conn *c = dbcli_connect(o->p.db);
    int rc = CLI_EXIT_OK;

    if (c == NULL)
        return CLI_EXIT_DATABASE;
    snprintf(month, sizeof(month), "%04d-%02d-01", o->p.year, o->p.month);
    if (bs_finalize_month(c, month, o->grace, &done, &waiting, &err) != BS_OK)
        rc = dbcli_fail("close --finalize", &err);
    else
        printf("finalized              %zu (%zu drafts still in their grace period)\n", done,
               waiting);
    bs_close(c);
    return rc;
}

/*
 * A month that has not begun (UTC, today's clock) has no usage yet: closing
 * it is allowed (fees of plans paid ahead) but rarely meant.
 */
static void warn_future(const char *cmd, const close_opts *o)
{
    time_t now = time(NULL);
    struct tm t;

    if (gmtime_r(&now, &t) == NULL)
        return;
    if (o->p.year * 12 + o->p.month > (t.tm_year + 1900) * 12 + t.tm_mon + 1)
        cli_error("%s: warning: %s has not begun (today is %04d-%02d-%02d UTC): its drafts "
                  "have no usage yet",
                  cmd, o->period, t.tm_year + 1900, t.tm_mon + 1, t.tm_mday);
}

static int run(const char *cmd, int argc, char **argv)
{
    close_opts o;
    close_summary s;
    int rc = parse_args(&o, cmd, argc, argv);

    if (rc < 0) {
        usage(stdout, cmd);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    warn_future(cmd, &o);
    rc = close_run(&o.p, &s);
    if (rc == CLI_EXIT_OK || rc == CLI_EXIT_REJECTED)
        close_summary_print(stdout, &o.p, &s);
    close_summary_clear(&s);
    if ((rc == CLI_EXIT_OK || rc == CLI_EXIT_REJECTED) && o.finalize) {
        int frc = finalize(&o);
        if (frc != CLI_EXIT_OK)
            rc = frc;
    }
    return rc;
}

int cmd_close(int argc, char **argv)
{
    return run("close", argc, argv);
}

int cmd_rerate(int argc, char **argv)
{
    return run("rerate", argc, argv);
}
