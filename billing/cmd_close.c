/*
 * cmd_close.c - `billing close` and `billing rerate`: the month-end close
 * into PostgreSQL by the engine of monthend/ (close.h), whose messages,
 * progress and result are printed here, and `--finalize` to number the
 * drafts.
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
#include "exact.h"
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
        fputs("Usage: billing close --period YYYY-MM [-j N] [--full] [--finalize [--grace "
              "DURATION]]\n"
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

/* ---------------------------------------------------------------------- */
/* The engine's messages, progress and result, as the tool prints them     */
/* ---------------------------------------------------------------------- */

/* What the engine's callbacks print with: the progress on stderr. */
typedef struct close_view {
    progress_meter meter;
    int mode; /* PROGRESS_* */
} close_view;

/* Each message of the engine as "billing: close: ..." on stderr, as it happens. */
static void on_note(void *arg, close_note_kind kind, const char *text)
{
    (void)arg;
    (void)kind;
    cli_error("%s", text);
}

/* The engine's progress through progress.c (@arg: a close_view), ", N events" after. */
static void on_progress(void *arg, close_phase phase, size_t done, size_t total, uint64_t events)
{
    close_view *v = arg;
    char extra[64];

    if (phase == CLOSE_PHASE_START) {
        progress_meter_start(&v->meter, stderr, v->mode, "close", "accounts", total);
        return;
    }
    snprintf(extra, sizeof(extra), ", %llu events", (unsigned long long)events);
    if (phase == CLOSE_PHASE_END)
        progress_meter_end(&v->meter, done, extra, 1);
    else
        progress_meter_update(&v->meter, done, extra);
}

static void print_amount(FILE *out, const char *label, const mpz_t v, const close_result *s)
{
    char buf[128];

    exact_minor_text(buf, sizeof(buf), v, s->digits);
    fprintf(out, "%-22s %s %s\n", label, buf, s->currency);
}

/* The summary of a run on @out. */
static void print_result(FILE *out, const close_result *s)
{
    char label[64];
    int m;

    fprintf(out, "period                 %04d-%02d\n", s->year, s->month);
    fprintf(out, "accounts               %zu examined, %zu with an invoice\n", s->accounts,
            s->invoices);
    fprintf(out, "drafts                 %zu new, %zu recomputed, %zu unchanged\n",
            s->outcome[BS_DRAFT_NEW], s->outcome[BS_DRAFT_UPDATED], s->outcome[BS_DRAFT_UNCHANGED]);
    fprintf(out, "finalized (left alone) %zu\n", s->outcome[BS_DRAFT_FINALIZED]);
    fprintf(out, "not re-rated           %zu (close mark unchanged)\n", s->skipped);
    fprintf(out, "events                 %llu rated, %llu refused\n", (unsigned long long)s->events,
            (unsigned long long)s->rejected);
    for (m = 0; m < BILLING_METER_COUNT; m++) {
        snprintf(label, sizeof(label), "charges %s", billing_meter_name((billing_meter)m));
        print_amount(out, label, s->by_meter[m], s);
    }
    print_amount(out, "charges fees", s->fees, s);
    fprintf(out, "adjustment lines       %zu\n", s->adjustments);
    print_amount(out, "adjustments", s->adjusted, s);
    print_amount(out, "subtotal", s->subtotal, s);
    print_amount(out, "credit used", s->credits, s);
    print_amount(out, "credit expired", s->expired, s);
    print_amount(out, "tax", s->tax, s);
    print_amount(out, "total", s->total, s);
    fprintf(out,
            "rejected events        %lld received since the period began, not in any "
            "invoice until replayed\n",
            (long long)s->dead_letters);
}

/* The exit code of what the engine returned (billing(1)). */
static int exit_code(close_status st)
{
    switch (st) {
    case CLOSE_OK:
        return CLI_EXIT_OK;
    case CLOSE_REJECTED:
        return CLI_EXIT_REJECTED;
    case CLOSE_ERR_INPUT:
        return CLI_EXIT_INPUT;
    case CLOSE_ERR_DATABASE:
        return CLI_EXIT_DATABASE;
    case CLOSE_ERR_INTERNAL:
        break;
    }
    return CLI_EXIT_INTERNAL;
}

/* --finalize: number the drafts past their grace (the engine), print how many. */
static int finalize(const close_opts *o)
{
    close_result s;
    close_status st = close_finalize(&o->p, o->grace, &s);

    if (st == CLOSE_OK)
        printf("finalized              %zu (%zu drafts still in their grace period)\n", s.finalized,
               s.waiting);
    close_result_clear(&s);
    return exit_code(st);
}

static int run(const char *cmd, int argc, char **argv)
{
    close_opts o;
    close_view v;
    close_result s;
    close_status st;
    int rc = parse_args(&o, cmd, argc, argv);

    if (rc < 0) {
        usage(stdout, cmd);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    warn_future(cmd, &o);
    memset(&v, 0, sizeof(v));
    v.mode = o.p.progress;
    o.p.on_note = on_note;
    o.p.on_progress = on_progress;
    o.p.arg = &v;
    st = close_run(&o.p, &s);
    if (st == CLOSE_OK || st == CLOSE_REJECTED)
        print_result(stdout, &s);
    close_result_clear(&s);
    rc = exit_code(st);
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
