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
          "Options:\n"
          "  --pricebook FILE       price book (JSON); several as --pricebook ID=FILE, each\n"
          "                         account naming its book (\"book\": ID): one run, an\n"
          "                         invoice per account in its book's currency\n"
          "  --accounts FILE        accounts, subscriptions and credit grants (JSON)\n"
          "  --input-format FMT     jsonl or protobuf (default: by file extension,\n"
          "                         .jsonl/.json/.ndjson or .pb/.bin/.protobuf; stdin: jsonl)\n"
          "  --format FMT           json (default), table (for people) or csv (RFC 4180:\n"
          "                         a row per line and per figure; counts on stderr)\n"
          "  --layout L             table: compact (leave out VERSION and empty columns;\n"
          "                         default on a terminal) or full (default otherwise)\n"
          "  --thousands SEP        table: group digits with SEP (',', ' ', '\\'', '_')\n"
          "                         or 'none' (default: the locale's on a terminal, none\n"
          "                         otherwise)\n"
          "  --exact                table: quantities exact (\"60000/31\"), not rounded\n"
          "  --month YYYY-MM        print this month only\n"
          "  --from YYYY-MM         print months from this one ...\n"
          "  --to YYYY-MM           ... to this one (default: every month with charges)\n"
          "  --account ID           print this account only (with a bounded range,\n"
          "                         every month of it, charged or not)\n"
          "  --rejects FILE         write each rejected event record, as read, with its\n"
          "                         place and reason to FILE (JSON Lines; stderr says\n"
          "                         how many went there)\n"
          "  --by resource          under each invoice, the usage lines of each resource\n"
          "                         (instance, disk) alone (json or table)\n"
          "  --at INSTANT           print, instead of invoices, each account's credit left\n"
          "                         at INSTANT and, at the price of the usage running\n"
          "                         then, when it reaches zero (json or table)\n"
          "  --strict               stop at the first rejected event, print no invoices\n"
          "                         (conflicting repeats are found after the last file)\n"
          "  --dedupe-memory SIZE   memory for finding repeated event ids before using\n"
          "                         temporary files (default 64M; suffix K, M or G)\n"
          "  --temp-dir DIR         where those files go (default: $TMPDIR or /tmp)\n"
          "  --no-progress          no progress line (shown only when stderr is a terminal:\n"
          "                         events read, rate, elapsed time, a bar for files)\n"
          "  --verbose              say on stderr how the dedupe went (ids, runs, bytes)\n"
          "  --no-dedupe            do not look for repeated event ids (faster; only for\n"
          "                         input known to be unique)\n"
          "  -j, --jobs N           read and rate on N threads (1 to 64; default: the\n"
          "                         number of processors online); the output is the\n"
          "                         same for every N. One thread is used for standard\n"
          "                         input and pipes, several price books, --strict,\n"
          "                         --at and --by\n"
          "  --chunk-bytes N        with -j, cut files into chunks of about N bytes\n"
          "                         (default 4194304; for tests and tuning)\n"
          "  --help                 print this help\n"
          "\n"
          "Exit status: 0 all events rated; 1 some events or subscriptions rejected\n"
          "(invoices of the others printed) or, with --strict, one rejected; 2 usage\n"
          "error; 3 unreadable or invalid input or configuration; 4 out of memory, a\n"
          "temporary file or --rejects file that cannot be written, an event file\n"
          "changed while being rated, or another internal error.\n",
          out);
}

/* "YYYY-MM" into year * 12 + month - 1. Returns 0 or -1. */
static int parse_month(const char *s, int32_t *out)
{
    int year = 0;
    int month = 0;
    int i;

    if (strlen(s) != 7 || s[4] != '-')
        return -1;
    for (i = 0; i < 7; i++) {
        if (i != 4 && (s[i] < '0' || s[i] > '9'))
            return -1;
    }
    for (i = 0; i < 4; i++)
        year = year * 10 + (s[i] - '0');
    month = (s[5] - '0') * 10 + (s[6] - '0');
    if (year < 1900 || year > 2199 || month < 1 || month > 12)
        return -1;
    *out = year * 12 + month - 1;
    return 0;
}

enum {
    OPT_PRICEBOOK = 256,
    OPT_ACCOUNTS,
    OPT_ACCOUNT,
    OPT_FORMAT,
    OPT_INPUT_FORMAT,
    OPT_MONTH,
    OPT_FROM,
    OPT_TO,
    OPT_STRICT,
    OPT_NO_DEDUPE,
    OPT_DEDUPE_MEMORY,
    OPT_TEMP_DIR,
    OPT_VERBOSE,
    OPT_LAYOUT,
    OPT_THOUSANDS,
    OPT_EXACT,
    OPT_REJECTS,
    OPT_NO_PROGRESS,
    OPT_AT,
    OPT_BY,
    OPT_CHUNK_BYTES,
    OPT_HELP
};

/* Options with a short form too: their letter (cli_getopt makes "j:" of it). */
enum { OPT_JOBS = 'j' };

static const struct option long_options[] = {
    {"pricebook", required_argument, NULL, OPT_PRICEBOOK},
    {"accounts", required_argument, NULL, OPT_ACCOUNTS},
    {"account", required_argument, NULL, OPT_ACCOUNT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"input-format", required_argument, NULL, OPT_INPUT_FORMAT},
    {"month", required_argument, NULL, OPT_MONTH},
    {"from", required_argument, NULL, OPT_FROM},
    {"to", required_argument, NULL, OPT_TO},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"no-dedupe", no_argument, NULL, OPT_NO_DEDUPE},
    {"dedupe-memory", required_argument, NULL, OPT_DEDUPE_MEMORY},
    {"temp-dir", required_argument, NULL, OPT_TEMP_DIR},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"thousands", required_argument, NULL, OPT_THOUSANDS},
    {"exact", no_argument, NULL, OPT_EXACT},
    {"rejects", required_argument, NULL, OPT_REJECTS},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"at", required_argument, NULL, OPT_AT},
    {"by", required_argument, NULL, OPT_BY},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"chunk-bytes", required_argument, NULL, OPT_CHUNK_BYTES},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int month_option(const char *name, const char *arg, int32_t *out)
{
    if (parse_month(arg, out) != 0)
        return cli_usage_error("rate", "%s '%s': expected YYYY-MM (1900-01..2199-12)", name, arg);
    return CLI_EXIT_OK;
}

static int format_option(const char *arg, out_format *out)
{
    if (strcmp(arg, "json") == 0)
        *out = OUT_JSON;
    else if (strcmp(arg, "table") == 0)
        *out = OUT_TABLE;
    else if (strcmp(arg, "csv") == 0)
        *out = OUT_CSV;
    else
        return cli_usage_error("rate", "--format '%s': expected json, table or csv", arg);
    return CLI_EXIT_OK;
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

static int layout_option(const char *arg, int *out)
{
    if (strcmp(arg, "compact") == 0)
        *out = LAYOUT_COMPACT;
    else if (strcmp(arg, "full") == 0)
        *out = LAYOUT_FULL;
    else
        return cli_usage_error("rate", "--layout '%s': expected compact or full", arg);
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

/* "SIZE" with an optional K, M or G suffix (powers of 1024) into bytes. */
static int size_option(const char *name, const char *arg, size_t *out)
{
    unsigned long long v = 0;
    unsigned shift = 0;
    const char *p = arg;

    if (*p < '0' || *p > '9')
        goto bad;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (1ULL << 40))
            goto bad;
        v = v * 10 + (unsigned long long)(*p - '0');
    }
    if (*p == 'K' || *p == 'k')
        shift = 10;
    else if (*p == 'M' || *p == 'm')
        shift = 20;
    else if (*p == 'G' || *p == 'g')
        shift = 30;
    if (shift != 0)
        p++;
    if (*p != '\0' || v > (SIZE_MAX >> 1 >> shift) || (v << shift) < BC_DEDUPE_MEMORY_MIN ||
        (v << shift) > BC_DEDUPE_MEMORY_MAX)
        goto bad;
    *out = (size_t)(v << shift);
    return CLI_EXIT_OK;
bad:
    return cli_usage_error("rate", "%s '%s': expected a size from 64K to 64G (suffix K, M or G)",
                           name, arg);
}

/* The default of -j: the processors online, within 1..JOBS_MAX. */
static int default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (n < 1)
        return 1;
    return n > JOBS_MAX ? JOBS_MAX : (int)n;
}

/* One option (a cli_option_fn); returns CLI_EXIT_OK, CLI_EXIT_USAGE, or -1 for --help. */
static int take_option(void *ctx, int opt, const char *arg)
{
    rate_opts *o = ctx;
    uint64_t n = 0;
    int rc;

    switch (opt) {
    case OPT_PRICEBOOK:
        return pricebook_option(o, arg);
    case OPT_ACCOUNTS:
        o->accounts = arg;
        return CLI_EXIT_OK;
    case OPT_ACCOUNT:
        o->account = arg;
        return CLI_EXIT_OK;
    case OPT_FORMAT:
        return format_option(arg, &o->output);
    case OPT_INPUT_FORMAT:
        o->input_format_set = 1;
        if (bc_format_parse(arg, &o->input_format) != 0)
            return cli_usage_error("rate", "--input-format '%s': expected jsonl or protobuf", arg);
        return CLI_EXIT_OK;
    case OPT_MONTH:
        if (month_option("--month", arg, &o->from) != CLI_EXIT_OK)
            return CLI_EXIT_USAGE;
        o->to = o->from;
        return CLI_EXIT_OK;
    case OPT_FROM:
        return month_option("--from", arg, &o->from);
    case OPT_TO:
        return month_option("--to", arg, &o->to);
    case OPT_STRICT:
        o->strict = 1;
        return CLI_EXIT_OK;
    case OPT_NO_DEDUPE:
        o->dedupe = 0;
        return CLI_EXIT_OK;
    case OPT_DEDUPE_MEMORY:
        return size_option("--dedupe-memory", arg, &o->dedupe_memory);
    case OPT_TEMP_DIR:
        o->temp_dir = arg;
        return CLI_EXIT_OK;
    case OPT_VERBOSE:
        o->verbose = 1;
        return CLI_EXIT_OK;
    case OPT_LAYOUT:
        return layout_option(arg, &o->layout);
    case OPT_THOUSANDS:
        return thousands_option(arg, &o->thousands);
    case OPT_EXACT:
        o->exact = 1;
        return CLI_EXIT_OK;
    case OPT_REJECTS:
        o->rejects = arg;
        return CLI_EXIT_OK;
    case OPT_NO_PROGRESS:
        o->progress = 0;
        return CLI_EXIT_OK;
    case OPT_BY:
        if (strcmp(arg, "resource") != 0)
            return cli_usage_error("rate", "--by '%s': expected resource", arg);
        o->by_resource = 1;
        return CLI_EXIT_OK;
    case OPT_AT:
        o->at_set = 1;
        if (billing_time_parse(arg, &o->at, NULL, 0) != BILLING_OK)
            return cli_usage_error("rate",
                                   "--at '%s': expected an RFC 3339 instant with an offset "
                                   "(2026-01-05T12:00:00+08:00)",
                                   arg);
        return CLI_EXIT_OK;
    case OPT_JOBS:
        rc = cli_count("rate", "--jobs", arg, JOBS_MAX, "a number of threads", &n);
        o->jobs = (int)n;
        return rc;
    case OPT_CHUNK_BYTES:
        return cli_count("rate", "--chunk-bytes", arg, CHUNK_BYTES_MAX, "a size in bytes",
                         &o->chunk_bytes);
    case OPT_HELP:
        return -1;
    default:
        return cli_usage_error("rate", "unknown option");
    }
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
    rc = cli_getopt("rate", argc, argv, long_options, take_option, o, &first);
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
