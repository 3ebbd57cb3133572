/*
 * cmd_rate.c - `billing rate`: rate usage event files offline against a
 * price book and accounts, and print the invoices as JSON or tables. The
 * command line (its rows in options.c) and --help; the offline rater
 * (rate.h, rate_run) does the rest.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "billing.h"
#include "cli.h"
#include "rate.h"

/* ---------------------------------------------------------------------- */
/* Command line                                                            */
/* ---------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fputs("Usage: billing rate [OPTIONS] [EVENT-FILE...]\n"
          "\n"
          "Rate usage events (JSON Lines or length-delimited protobuf; '-' is stdin)\n"
          "against a price book and accounts, and print the invoices.\n"
          "Every input is required: --pricebook, --accounts and event files (or\n"
          "events piped to standard input). Given no input at all, the tool rates\n"
          "the shipped GPU-cloud example, and stderr says so.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_RATE);
    fputs("\n"
          "Exit status: 0 all events rated; 1 some events or subscriptions rejected\n"
          "(invoices of the others printed) or, with --strict, one rejected; 2 usage\n"
          "error; 3 unreadable or invalid input or configuration; 4 out of memory, a\n"
          "temporary file or --rejects file that cannot be written, an event file\n"
          "changed while being rated, or another internal error.\n",
          out);
}

/*
 * --pricebook FILE, or ID=FILE (repeatable: one run, several books and
 * currencies; each account names its book with "book"). ID is what comes
 * before the first '=' when that is an id without '/'.
 */
static int pricebook_option(rate_opts *o, const char *arg)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq != NULL ? (size_t)(eq - arg) : 0;

    if (o->n_books == BOOKS_MAX)
        return cli_usage_error("rate", "--pricebook: at most %d price books", BOOKS_MAX);
    o->book_ids[o->n_books] = NULL;
    o->book_paths[o->n_books] = arg;
    if (eq != NULL && n >= 1 && n <= 128 && memchr(arg, '/', n) == NULL) {
        memcpy(o->book_id_buf[o->n_books], arg, n);
        o->book_id_buf[o->n_books][n] = '\0';
        o->book_ids[o->n_books] = o->book_id_buf[o->n_books];
        o->book_paths[o->n_books] = eq + 1;
    }
    if (o->pricebook == NULL)
        o->pricebook = o->book_paths[o->n_books];
    o->n_books++;
    return CLI_EXIT_OK;
}

/* A digit group separator: one of a few characters a number can be read with, or none. */
static int thousands_option(const char *arg, const char **out)
{
    if (strcmp(arg, "none") == 0) {
        *out = "";
        return CLI_EXIT_OK;
    }
    if (strlen(arg) != 1 || strchr(", '_", arg[0]) == NULL)
        return cli_usage_error("rate",
                               "--thousands '%s': expected one of , ' _ (space) or none "
                               "(the decimal point is always '.')",
                               arg);
    *out = arg;
    return CLI_EXIT_OK;
}

/* The default of -j: the processors online, within 1..JOBS_MAX. */
static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (n < 1)
        return 1;
    return n > JOBS_MAX ? JOBS_MAX : (int)n;
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    rate_opts *o = ctx;

    switch (id) {
    case CLI_OPT_PRICEBOOK:
        return pricebook_option(o, v->text);
    case CLI_OPT_THOUSANDS:
        return thousands_option(v->text, &o->thousands);
    case CLI_OPT_ACCOUNTS:
        o->accounts = v->text;
        break;
    case CLI_OPT_ACCOUNT:
        o->account = v->text;
        break;
    case CLI_OPT_FORMAT:
        o->output = (out_format)v->choice; /* json|table|csv */
        break;
    case CLI_OPT_INPUT_FORMAT:
        o->input_format_set = 1;
        bc_format_parse(v->text, &o->input_format);
        break;
    case CLI_OPT_MONTH:
        o->from = v->month;
        o->to = v->month;
        break;
    case CLI_OPT_FROM:
        o->from = v->month;
        break;
    case CLI_OPT_TO:
        o->to = v->month;
        break;
    case CLI_OPT_STRICT:
        o->strict = 1;
        break;
    case CLI_OPT_NO_DEDUPE:
        o->dedupe = 0;
        break;
    case CLI_OPT_DEDUPE_MEMORY:
        o->dedupe_memory = (size_t)v->n;
        break;
    case CLI_OPT_TEMP_DIR:
        o->temp_dir = v->text;
        break;
    case CLI_OPT_VERBOSE:
        o->verbose = 1;
        break;
    case CLI_OPT_LAYOUT:
        o->layout = v->choice == 0 ? LAYOUT_COMPACT : LAYOUT_FULL; /* compact|full */
        break;
    case CLI_OPT_EXACT:
        o->exact = 1;
        break;
    case CLI_OPT_REJECTS:
        o->rejects = v->text;
        break;
    case CLI_OPT_NO_PROGRESS:
        o->progress = 0;
        break;
    case CLI_OPT_BY:
        o->by_resource = 1;
        break;
    case CLI_OPT_AT:
        o->at_set = 1;
        o->at = v->instant;
        break;
    case CLI_OPT_JOBS:
        o->jobs = (int)v->n;
        break;
    case CLI_OPT_CHUNK_BYTES:
        o->chunk_bytes = v->n;
        break;
    default:
        return cli_usage_error("rate", "unknown option");
    }
    return CLI_EXIT_OK;
}

/* Several books need an id each, all different. */
static int books_option_error(const rate_opts *o)
{
    int i;
    int j;

    for (i = 0; o->n_books > 1 && i < o->n_books; i++) {
        if (o->book_ids[i] == NULL)
            return cli_usage_error("rate",
                                   "--pricebook '%s': with several price books, each is "
                                   "ID=FILE (ID: the \"book\" its accounts name)",
                                   o->book_paths[i]);
        for (j = 0; j < i; j++) {
            if (strcmp(o->book_ids[i], o->book_ids[j]) == 0)
                return cli_usage_error("rate", "--pricebook: id '%s' given twice", o->book_ids[i]);
        }
    }
    return CLI_EXIT_OK;
}

/* Parse argv; returns CLI_EXIT_OK, CLI_EXIT_USAGE, or -1 when --help was given. */
static int parse_args(rate_opts *o, int argc, char **argv)
{
    int first;
    int rc;

    memset(o, 0, sizeof(*o));
    o->output = OUT_JSON;
    o->from = NO_MONTH;
    o->to = NO_MONTH;
    o->dedupe = 1;
    o->progress = 1;
    o->dedupe_memory = DEDUPE_MEMORY_DEFAULT;
    o->jobs = default_jobs();
    o->chunk_bytes = CHUNK_BYTES_DEFAULT;
    rc = cli_parse("rate", CLI_CMD_RATE, argc, argv, take_option, o, &first);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->from != NO_MONTH && o->to != NO_MONTH && o->from > o->to)
        return cli_usage_error("rate", "--from is after --to");
    if (o->by_resource && (o->output == OUT_CSV || o->at_set))
        return cli_usage_error("rate", "--by resource details invoices: --format json or table, "
                                       "without --at");
    if (books_option_error(o) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (o->at_set && o->output == OUT_CSV)
        return cli_usage_error("rate", "--at prints a credit report: --format json or table");
    o->files = argv + first;
    o->n_files = argc - first;
    return CLI_EXIT_OK;
}

int cmd_rate(int argc, char **argv)
{
    rate_opts o;
    int rc = parse_args(&o, argc, argv);

    if (rc == -1) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    return rate_run(&o);
}
