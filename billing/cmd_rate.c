/*
 * cmd_rate.c - `billing rate`: rate usage event files offline against a
 * price book and accounts, and print the invoices as JSON or tables.
 *
 * Every record read ends up in exactly one count of the summary (rated,
 * duplicate or rejected), and every rejected one in a message on stderr
 * that names the file, the line or offset, the event and the field.
 *
 * Dedupe with memory independent of the event count: every event is
 * rated as it is read (the rater's own id set is off), and remembered in
 * a bounded external sort (billing/dedupe.h) by id and place. After the
 * last file, the later occurrences of each id are read again from their
 * files (or from the sort, for stdin and pipes) and taken back out of the
 * rater (billing_rater_take_back, unchecked: the rater keeps no ids): counted as duplicates when identical to
 * the first, rejected as conflicts otherwise.
 */
#include "config.h"

#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "billing.h"
#include "cli.h"
#include "billing_config.h"
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
                return cli_usage_error("rate", "--pricebook: id '%s' given twice",
                                       o->book_ids[i]);
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

/* ---------------------------------------------------------------------- */
/* Catalog and rater                                                       */
/* ---------------------------------------------------------------------- */

static int account_known(const rate_ctx *c, const char *id)
{
    const billing_rater *r;
    size_t i;
    int b;

    for (b = 0; b < c->n_books; b++) {
        r = c->books[b].rater;
        for (i = 0; i < billing_rater_account_count(r); i++) {
            if (strcmp(billing_rater_account_id(r, i), id) == 0)
                return 1;
        }
    }
    return 0;
}

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

/* A subscription the library refused: reported, left out, and the run goes on. */
static void reject_subscription(void *arg, const char *message)
{
    rate_ctx *c = arg;

    cli_error("%s", message);
    c->counts.subs_rejected++;
}

/* Load one price book and the accounts naming it (all of them when it is the only book). */
static int load_book(rate_ctx *c, rate_book *b)
{
    char err[ERR_MAX];

    b->cat = billing_catalog_new();
    if (b->cat == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    /* The price book first, so that each subscription is checked against it when added. */
    if (billing_config_pricebook_load(b->cat, b->path, err, sizeof(err)) != 0 ||
        billing_config_accounts_load_book(b->cat, c->zones, c->opts.accounts, b->id, reject_subscription, c,
                              err, sizeof(err)) != 0) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    billing_rater_new(b->cat, &b->rater, err, sizeof(err));
    if (b->rater == NULL) {
        cli_error("%s + %s: %s", b->path, c->opts.accounts, err);
        return CLI_EXIT_INPUT;
    }
    b->prices = rate_prices_load(b->path, err, sizeof(err));
    if (b->prices == NULL) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    /* Repeated ids are found by the bounded external sort, not in the rater. */
    billing_rater_set_dedupe(b->rater, 0);
    return CLI_EXIT_OK;
}

static int load_books(rate_ctx *c)
{
    char err[ERR_MAX];
    int i;
    int rc;

    c->n_books = c->opts.n_books > 0 ? c->opts.n_books : 1;
    for (i = 0; i < c->n_books; i++) {
        c->books[i].id = c->opts.n_books > 1 ? c->opts.book_ids[i] : NULL;
        c->books[i].path = c->opts.n_books > 0 ? c->opts.book_paths[i] : c->opts.pricebook;
        rc = load_book(c, &c->books[i]);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    c->cat = c->books[0].cat;
    c->rater = c->books[0].rater;
    c->accinfo = rate_accounts_load(c->opts.accounts, err, sizeof(err));
    if (c->accinfo == NULL ||
        (c->opts.n_books > 1 && rate_accounts_check_books(c->accinfo, c->opts.book_ids,
                                                          c->opts.n_books, c->opts.accounts, err,
                                                          sizeof(err)) != 0)) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    return CLI_EXIT_OK;
}

static int setup(rate_ctx *c)
{
    char err[ERR_MAX];
    int i;
    int rc;

    c->zones = billing_config_zones_new();
    c->ev = billing_event_new();
    if (c->zones == NULL || c->ev == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    rc = load_books(c);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (c->opts.strict && c->counts.subs_rejected > 0)
        return CLI_EXIT_REJECTED;
    if (c->opts.rejects != NULL) {
        c->rejects = rejects_open(c->opts.rejects, err, sizeof(err));
        if (c->rejects == NULL) {
            cli_error("%s", err);
            return CLI_EXIT_INPUT;
        }
    }
    if (c->opts.at_set && (c->running = running_new(c->opts.at)) == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    if (c->opts.by_resource && (c->kept = running_new_every()) == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    c->srcs = calloc((size_t)c->opts.n_files, sizeof(*c->srcs));
    if (c->srcs == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (i = 0; i < c->opts.n_files; i++)
        c->srcs[i].fd = -1;
    if (c->opts.dedupe) {
        c->dedupe =
            bc_dedupe_new(c->opts.dedupe_memory, rate_temp_dir(&c->opts), err, sizeof(err));
        if (c->dedupe == NULL) {
            cli_error("%s", err);
            return CLI_EXIT_INTERNAL;
        }
    }
    if (c->opts.account != NULL && !account_known(c, c->opts.account))
        return cli_usage_error("rate", "--account '%s' is not in %s", c->opts.account,
                               c->opts.accounts);
    return CLI_EXIT_OK;
}

static void teardown(rate_ctx *c)
{
    char err[ERR_MAX];
    int i;

    if (c->srcs != NULL) {
        for (i = 0; i < c->opts.n_files; i++) {
            free(c->srcs[i].name);
            if (c->srcs[i].fd >= 0)
                close(c->srcs[i].fd);
        }
    }
    free(c->srcs);
    rejects_close(c->rejects, err, sizeof(err));
    if (c->reaper_started)
        pthread_join(c->reaper, NULL);
    bc_dedupe_destroy(c->dedupe);
    rate_accounts_destroy(c->accinfo);
    running_destroy(c->running);
    running_destroy(c->kept);
    rate_resources_free(&c->res);
    for (i = 0; i < c->n_books; i++) {
        billing_rater_destroy(c->books[i].rater);
        billing_catalog_destroy(c->books[i].cat);
        rate_prices_destroy(c->books[i].prices);
    }
    billing_config_zones_destroy(c->zones);
    billing_event_destroy(c->ev);
}

/*
 * The locale's digit group separator when it is one of , ' _ or space (a
 * multibyte one would break the column alignment, which counts bytes), else
 * none.
 */
static void locale_thousands(char *out, size_t size)
{
    locale_t loc = newlocale(LC_NUMERIC_MASK, "", (locale_t)0);
    const char *sep = loc != (locale_t)0 ? nl_langinfo_l(THOUSEP, loc) : "";

    /* '.' groups only where ',' is the decimal point; our decimal point is always '.'. */
    snprintf(out, size, "%s", sep != NULL && strlen(sep) == 1 && strchr(", '_", sep[0]) != NULL
                                  ? sep
                                  : "");
    if (loc != (locale_t)0)
        freelocale(loc);
}

/* How tables look: a terminal gets a compact layout and the locale's grouping, a pipe a
 * stable one, unless options say otherwise. */
static void set_view(rate_ctx *c)
{
    int tty = isatty(STDOUT_FILENO);

    if (c->opts.thousands != NULL)
        snprintf(c->thousands, sizeof(c->thousands), "%s", c->opts.thousands);
    else if (tty)
        locale_thousands(c->thousands, sizeof(c->thousands));
    c->view.thousands = c->thousands;
    c->view.compact = c->opts.layout == LAYOUT_COMPACT || (c->opts.layout == LAYOUT_AUTO && tty);
    c->view.exact = c->opts.exact;
}

int cmd_rate(int argc, char **argv)
{
    rate_ctx *c = calloc(1, sizeof(*c));
    int rc;

    if (c == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    rc = parse_args(&c->opts, argc, argv);
    if (rc == -1) {
        usage(stdout);
        rc = CLI_EXIT_OK;
        goto done;
    }
    if (rc != CLI_EXIT_OK)
        goto done;
    rc = rate_check_inputs(c);
    if (rc != CLI_EXIT_OK)
        goto done;
    set_view(c);
    rc = setup(c);
    if (rc == CLI_EXIT_OK)
        rc = rate_all(c);
    if (rc == CLI_EXIT_OK || rc == CLI_EXIT_REJECTED)
        rc = rate_close_rejects(c) != CLI_EXIT_OK ? CLI_EXIT_INTERNAL : rc;
    if (rc == CLI_EXIT_REJECTED)
        cli_error("--strict: stopped at the first rejected record; no invoices printed");
    else if (rc == CLI_EXIT_OK)
        rc = rate_finish(c);
done:
    teardown(c);
    free(c);
    return rc;
}
