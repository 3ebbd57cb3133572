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
 * rater (bl_rater_take_back, libbilling/takeback.h): counted as duplicates when identical to
 * the first, rejected as conflicts otherwise.
 */
#include "config.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "billing.h"
#include "cli.h"
#include "billing_config.h"
#include "dedupe.h"
#include "eventio.h"
#include "render.h"
#include "takeback.h"

#define ERR_MAX 1024
#define PATH_LEN 4096
/* Longest --from/--to range printed in full for one account: 100 years. */
#define RANGE_MONTHS_MAX 1200
#define NO_MONTH INT32_MIN
#define DEDUPE_MEMORY_DEFAULT (64u * 1024u * 1024u)

typedef enum { OUT_JSON, OUT_TABLE } out_format;

typedef struct rate_opts {
    const char *pricebook;
    const char *accounts;
    char **files;
    int n_files;
    out_format output;
    int input_format_set;
    bc_format input_format;
    int32_t from; /* year * 12 + month - 1, or NO_MONTH */
    int32_t to;
    const char *account;
    int strict;
    int dedupe;
    size_t dedupe_memory;
    const char *temp_dir;
    int verbose;
} rate_opts;

typedef struct rate_counts {
    uint64_t read;
    uint64_t rated;
    uint64_t duplicates;
    uint64_t rejected;
    uint64_t subs_rejected; /* subscriptions of the accounts file left out */
} rate_counts;

/* An event file, as the dedupe needs to know it. */
struct source {
    char *name;       /* in messages */
    bc_format format;
    int reread;       /* a regular file: events are read again, not kept */
    struct stat st;   /* ... and what it was, to notice a change */
    int fd;           /* open to read events again, or -1 */
};

typedef struct rate_ctx {
    rate_opts opts;
    rate_counts counts;
    billing_catalog *cat;
    billing_config_zones *zones;
    billing_rater *rater;
    billing_event *ev;
    bc_dedupe *dedupe;
    uint32_t src;          /* index of the file being read */
    struct source *srcs;   /* per file */
    int open_fds;          /* files open to read events again */
    char example_dir[PATH_LEN];
    char example_pricebook[PATH_LEN];
    char example_accounts[PATH_LEN];
    char example_events[PATH_LEN];
    char *example_argv[2];
} rate_ctx;

/* ---------------------------------------------------------------------- */
/* Command line                                                            */
/* ---------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fputs("Usage: billing rate [OPTIONS] [EVENT-FILE...]\n"
          "\n"
          "Rate usage events (JSON Lines or length-delimited protobuf; '-' is stdin)\n"
          "against a price book and accounts, and print the invoices.\n"
          "Without --pricebook, --accounts or event files, the shipped GPU-cloud\n"
          "example is used for what is missing, and stderr says which files.\n"
          "\n"
          "Options:\n"
          "  --pricebook FILE       price book (JSON)\n"
          "  --accounts FILE        accounts, subscriptions and credit grants (JSON)\n"
          "  --input-format FMT     jsonl or protobuf (default: by file extension,\n"
          "                         .jsonl/.json/.ndjson or .pb/.bin/.protobuf; stdin: jsonl)\n"
          "  --format FMT           json (default) or table\n"
          "  --month YYYY-MM        print this month only\n"
          "  --from YYYY-MM         print months from this one ...\n"
          "  --to YYYY-MM           ... to this one (default: every month with charges)\n"
          "  --account ID           print this account only (with a bounded range,\n"
          "                         every month of it, charged or not)\n"
          "  --strict               stop at the first rejected event, print no invoices\n"
          "                         (conflicting repeats are found after the last file)\n"
          "  --dedupe-memory SIZE   memory for finding repeated event ids before using\n"
          "                         temporary files (default 64M; suffix K, M or G)\n"
          "  --temp-dir DIR         where those files go (default: $TMPDIR or /tmp)\n"
          "  --verbose              say on stderr how the dedupe went (ids, runs, bytes)\n"
          "  --no-dedupe            do not look for repeated event ids (faster; only for\n"
          "                         input known to be unique)\n"
          "  --help                 print this help\n"
          "\n"
          "Exit status: 0 all events rated; 1 some events or subscriptions rejected\n"
          "(invoices of the others printed) or, with --strict, one rejected; 2 usage\n"
          "error; 3 unreadable or invalid input or configuration; 4 out of memory, a\n"
          "temporary file that cannot be written, an event file changed while being\n"
          "rated, or another internal error.\n",
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
    OPT_HELP
};

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
    else
        return cli_usage_error("rate", "--format '%s': expected json or table", arg);
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

/* One option (a cli_option_fn); returns CLI_EXIT_OK, CLI_EXIT_USAGE, or -1 for --help. */
static int take_option(void *ctx, int opt, const char *arg)
{
    rate_opts *o = ctx;

    switch (opt) {
    case OPT_PRICEBOOK:
        o->pricebook = arg;
        return CLI_EXIT_OK;
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
    case OPT_HELP:
        return -1;
    default:
        return cli_usage_error("rate", "unknown option");
    }
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
    o->dedupe_memory = DEDUPE_MEMORY_DEFAULT;
    rc = cli_getopt("rate", argc, argv, long_options, take_option, o, &first);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->from != NO_MONTH && o->to != NO_MONTH && o->from > o->to)
        return cli_usage_error("rate", "--from is after --to");
    o->files = argv + first;
    o->n_files = argc - first;
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------------------- */
/* The shipped example                                                     */
/* ---------------------------------------------------------------------- */

/* @out (PATH_LEN bytes) = @dir / @file; -1 when it does not fit. */
static int example_file(const char *dir, const char *file, char *out)
{
    size_t dl = strlen(dir);
    size_t fl = strlen(file);

    if (dl + 1 + fl >= PATH_LEN)
        return -1;
    memcpy(out, dir, dl);
    out[dl] = '/';
    memcpy(out + dl + 1, file, fl + 1);
    return 0;
}

/* @out (PATH_LEN bytes) = the example directory / @file. */
static int example_path(const rate_ctx *c, char *out, const char *file)
{
    if (example_file(c->example_dir, file, out) != 0) {
        cli_error("%s: path too long", c->example_dir);
        return -1;
    }
    return 0;
}

/*
 * The directory of the running program into @out (PATH_LEN bytes), with a
 * trailing "/.libs" removed: libtool runs an uninstalled program from
 * there. 0, or -1 when /proc/self/exe cannot be read.
 */
static int program_dir(char *out)
{
    ssize_t n = readlink("/proc/self/exe", out, PATH_LEN - 1);
    char *slash;

    if (n <= 0)
        return -1;
    out[n] = '\0';
    slash = strrchr(out, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    n = (ssize_t)strlen(out);
    if (n >= 6 && strcmp(out + n - 6, "/.libs") == 0)
        out[n - 6] = '\0';
    return 0;
}

/*
 * Where the GPU-cloud example lives: installed under pkgdatadir, or,
 * for a program run from its build tree, in billing/examples beside it
 * (a link to the source tree's examples, made by the build). No path of
 * the build machine is compiled in.
 */
static int find_example(rate_ctx *c)
{
    static const char sub[] = "/examples/gpu-cloud";
    char dirs[2][PATH_LEN];
    char probe[PATH_LEN];
    size_t n_dirs = 1;
    size_t len;
    size_t i;

    snprintf(dirs[0], PATH_LEN, "%s", BILLING_PKGDATADIR "/examples/gpu-cloud");
    if (program_dir(dirs[1]) == 0) {
        len = strlen(dirs[1]);
        if (len + sizeof(sub) <= PATH_LEN) {
            memcpy(dirs[1] + len, sub, sizeof(sub));
            n_dirs = 2;
        }
    }
    for (i = 0; i < n_dirs; i++) {
        if (example_file(dirs[i], "pricebook.json", probe) == 0 && access(probe, R_OK) == 0) {
            memcpy(c->example_dir, dirs[i], PATH_LEN);
            return 0;
        }
    }
    cli_error("no --pricebook, --accounts or event file given, and the shipped example is "
              "not installed (looked in %s%s%s)",
              dirs[0], n_dirs > 1 ? " and " : "", n_dirs > 1 ? dirs[1] : "");
    return -1;
}


/* Fill in what the command line left out from the example, saying so. */
static int apply_example_defaults(rate_ctx *c)
{
    rate_opts *o = &c->opts;

    if (o->pricebook != NULL && o->accounts != NULL && o->n_files > 0)
        return 0;
    if (find_example(c) != 0)
        return -1;
    if (example_path(c, c->example_pricebook, "pricebook.json") != 0 ||
        example_path(c, c->example_accounts, "accounts.json") != 0 ||
        example_path(c, c->example_events, "events.jsonl") != 0)
        return -1;
    if (o->pricebook == NULL) {
        o->pricebook = c->example_pricebook;
        cli_error("using the example price book %s", o->pricebook);
    }
    if (o->accounts == NULL) {
        o->accounts = c->example_accounts;
        cli_error("using the example accounts %s", o->accounts);
    }
    if (o->n_files == 0) {
        c->example_argv[0] = c->example_events;
        o->files = c->example_argv;
        o->n_files = 1;
        cli_error("using the example events %s", c->example_events);
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Catalog and rater                                                       */
/* ---------------------------------------------------------------------- */

static int account_known(const billing_rater *r, const char *id)
{
    size_t i;

    for (i = 0; i < billing_rater_account_count(r); i++) {
        if (strcmp(billing_rater_account_id(r, i), id) == 0)
            return 1;
    }
    return 0;
}

static const char *temp_dir(const rate_opts *o)
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

static int setup(rate_ctx *c)
{
    char err[ERR_MAX];
    int i;

    c->cat = billing_catalog_new();
    c->zones = billing_config_zones_new();
    c->ev = billing_event_new();
    if (c->cat == NULL || c->zones == NULL || c->ev == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    /* The price book first, so that each subscription is checked against it when added. */
    if (billing_config_pricebook_load(c->cat, c->opts.pricebook, err, sizeof(err)) != BILLING_OK ||
        billing_config_accounts_load_rejecting(c->cat, c->zones, c->opts.accounts,
                                               reject_subscription, c, err,
                                               sizeof(err)) != BILLING_OK) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    if (c->opts.strict && c->counts.subs_rejected > 0)
        return CLI_EXIT_REJECTED;
    c->rater = billing_rater_new(c->cat, err, sizeof(err));
    if (c->rater == NULL) {
        cli_error("%s + %s: %s", c->opts.pricebook, c->opts.accounts, err);
        return CLI_EXIT_INPUT;
    }
    /* Repeated ids are found by the bounded external sort, not in the rater. */
    billing_rater_set_dedupe(c->rater, 0);
    c->srcs = calloc((size_t)c->opts.n_files, sizeof(*c->srcs));
    if (c->srcs == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (i = 0; i < c->opts.n_files; i++)
        c->srcs[i].fd = -1;
    if (c->opts.dedupe) {
        c->dedupe = bc_dedupe_new(c->opts.dedupe_memory, temp_dir(&c->opts), err, sizeof(err));
        if (c->dedupe == NULL) {
            cli_error("%s", err);
            return CLI_EXIT_INTERNAL;
        }
    }
    if (c->opts.account != NULL && !account_known(c->rater, c->opts.account))
        return cli_usage_error("rate", "--account '%s' is not in %s", c->opts.account,
                               c->opts.accounts);
    return CLI_EXIT_OK;
}

static void teardown(rate_ctx *c)
{
    int i;

    if (c->srcs != NULL) {
        for (i = 0; i < c->opts.n_files; i++) {
            free(c->srcs[i].name);
            if (c->srcs[i].fd >= 0)
                close(c->srcs[i].fd);
        }
    }
    free(c->srcs);
    bc_dedupe_destroy(c->dedupe);
    billing_rater_destroy(c->rater);
    billing_catalog_destroy(c->cat);
    billing_config_zones_destroy(c->zones);
    billing_event_destroy(c->ev);
}

/* ---------------------------------------------------------------------- */
/* Reading and rating                                                      */
/* ---------------------------------------------------------------------- */

/* Hand the event just rated to the dedupe. Returns 0 or -1 with a message. */
static int remember(rate_ctx *c, bc_reader *rd, char *err, size_t errsize)
{
    bc_dedupe_where w;

    w.src = c->src;
    w.pos = bc_reader_position(rd);
    w.offset = bc_reader_offset(rd);
    w.check = bc_reader_record_hash(rd);
    return bc_dedupe_add(c->dedupe, c->ev, &w, !c->srcs[c->src].reread, err, errsize);
}

/* Rate the event just read; returns CLI_EXIT_OK, CLI_EXIT_REJECTED or CLI_EXIT_INTERNAL. */
static int rate_one(rate_ctx *c, bc_reader *rd)
{
    char err[ERR_MAX];
    billing_status st = billing_rater_add(c->rater, c->ev, err, sizeof(err));

    if (st == BILLING_OK) {
        c->counts.rated++;
        if (c->dedupe != NULL && remember(c, rd, err, sizeof(err)) != 0) {
            cli_error("%s: %s", bc_reader_where(rd), err);
            return CLI_EXIT_INTERNAL;
        }
        return CLI_EXIT_OK;
    }
    c->counts.rejected++;
    cli_error("%s: %s", bc_reader_where(rd), err);
    return st == BILLING_ERR_NOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_REJECTED;
}

static int file_format(const rate_ctx *c, const char *path, bc_format *out)
{
    if (c->opts.input_format_set) {
        *out = c->opts.input_format;
        return CLI_EXIT_OK;
    }
    if (bc_format_guess(path, out) != 0)
        return cli_usage_error("rate",
                               "%s: cannot tell the format from the name; use "
                               "--input-format jsonl or protobuf",
                               path);
    return CLI_EXIT_OK;
}

/* Read one record and rate it; returns an exit code, or -1 at the end of the input. */
static int step(rate_ctx *c, bc_reader *rd)
{
    char err[ERR_MAX];
    bc_read_result rr = bc_reader_next(rd, c->ev, err, sizeof(err));

    if (rr == BC_READ_EOF)
        return -1;
    if (rr == BC_READ_ERROR) {
        cli_error("%s: %s", bc_reader_where(rd), err);
        return CLI_EXIT_INPUT;
    }
    c->counts.read++;
    if (rr == BC_READ_EVENT)
        return rate_one(c, rd);
    c->counts.rejected++;
    cli_error("%s: %s", bc_reader_where(rd), err);
    return CLI_EXIT_REJECTED;
}

/* Rate every record of @path; returns CLI_EXIT_OK or the code to stop with. */
static int rate_file(rate_ctx *c, const char *path)
{
    char err[ERR_MAX];
    bc_format format;
    bc_reader *rd;
    int rc;

    rc = file_format(c, path, &format);
    if (rc != CLI_EXIT_OK)
        return rc;
    rd = bc_reader_open(path, format, err, sizeof(err));
    if (rd == NULL) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    c->srcs[c->src].format = format;
    c->srcs[c->src].reread =
        bc_reader_rereadable(rd) && stat(path, &c->srcs[c->src].st) == 0;
    c->srcs[c->src].name = strdup(bc_reader_name(rd));
    if (c->srcs[c->src].name == NULL) {
        bc_reader_close(rd);
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (;;) {
        rc = step(c, rd);
        if (rc == CLI_EXIT_REJECTED && !c->opts.strict)
            continue;
        if (rc != CLI_EXIT_OK)
            break;
    }
    bc_reader_close(rd);
    return rc == -1 ? CLI_EXIT_OK : rc;
}

enum { HIT_STOP_REJECTED = 1, HIT_STOP_INTERNAL = 2 };

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Most files kept open at once to read events again; past it, one at a time. */
#define FETCH_FDS_MAX 256

/* The file of source @src, open and unchanged since it was rated; -1 with a message. */
static int fetch_fd(rate_ctx *c, uint32_t src, char *err, size_t errsize)
{
    struct source *s = &c->srcs[src];
    struct stat st;
    int i;

    if (s->fd >= 0)
        return s->fd;
    if (c->open_fds >= FETCH_FDS_MAX) {
        for (i = 0; i < c->opts.n_files; i++) {
            if (c->srcs[i].fd >= 0) {
                close(c->srcs[i].fd);
                c->srcs[i].fd = -1;
            }
        }
        c->open_fds = 0;
    }
    s->fd = open(c->opts.files[src], O_RDONLY | O_CLOEXEC);
    if (s->fd < 0 || fstat(s->fd, &st) != 0 || !same_file(&st, &s->st)) {
        snprintf(err, errsize, "%s: changed or gone while being rated; rate it again", s->name);
        if (s->fd >= 0)
            close(s->fd);
        s->fd = -1;
        return -1;
    }
    c->open_fds++;
    return s->fd;
}

/*
 * Read an event again from its file (a bc_dedupe_fetch_fn), check that
 * its bytes are those rated, and encode it.
 */
static int fetch(void *arg, const bc_dedupe_where *w, const char *id, unsigned char *buf,
                 size_t *len, char *err, size_t errsize)
{
    rate_ctx *c = arg;
    const struct source *s = &c->srcs[w->src];
    uint64_t check = 0;
    char e[ERR_MAX];
    int fd = fetch_fd(c, w->src, err, errsize);

    if (fd < 0)
        return -1;
    if (bc_event_read_at(fd, s->format, w->offset, c->ev, &check, e, sizeof(e)) !=
            BC_READ_EVENT ||
        check != w->check || strcmp(billing_event_id(c->ev), id) != 0) {
        snprintf(err, errsize, "%s: changed while being rated (event '%s' is not as it was)",
                 s->name, id);
        return -1;
    }
    if (billing_event_encode(c->ev, buf, BILLING_EVENT_WIRE_MAX, len) != BILLING_OK) {
        snprintf(err, errsize, "event '%s': cannot be encoded", id);
        return -1;
    }
    return 0;
}

/* A later occurrence of an id (a bc_dedupe_fn): take it back out of the rater. */
static int take_back(void *arg, const bc_dedupe_hit *hit)
{
    rate_ctx *c = arg;
    char err[ERR_MAX];
    char where[PATH_LEN + 32];
    char first[PATH_LEN + 32];

    bc_location_format(where, sizeof(where), c->srcs[hit->where.src].name,
                       c->srcs[hit->where.src].format, hit->where.pos);
    if (billing_event_decode(c->ev, hit->event, hit->event_len, err, sizeof(err)) != BILLING_OK ||
        bl_rater_take_back(c->rater, c->ev, err, sizeof(err)) != BILLING_OK) {
        cli_error("%s: internal error taking back a repeated event: %s", where, err);
        return HIT_STOP_INTERNAL;
    }
    c->counts.rated--;
    if (hit->kind == BC_DEDUPE_DUPLICATE) {
        c->counts.duplicates++;
        return 0;
    }
    c->counts.rejected++;
    bc_location_format(first, sizeof(first), c->srcs[hit->first.src].name,
                       c->srcs[hit->first.src].format, hit->first.pos);
    cli_error("%s: event '%s': field 'id': already rated with different content at %s", where,
              hit->id, first);
    return c->opts.strict ? HIT_STOP_REJECTED : 0;
}

/*
 * After the last file: find every id rated more than once and keep only
 * its first occurrence. Returns an exit code.
 */
static int take_back_repeats(rate_ctx *c)
{
    char err[ERR_MAX];
    int rc = bc_dedupe_finish(c->dedupe, fetch, take_back, c, err, sizeof(err));
    bc_dedupe_stats st;

    if (c->opts.verbose) {
        bc_dedupe_get_stats(c->dedupe, &st);
        cli_error("dedupe: %" PRIu64 " events remembered (%" PRIu64 " kept whole, %" PRIu64
                  " read again) in %zu KiB of memory; %" PRIu64 " runs, %" PRIu64
                  " merges, %" PRIu64 " bytes written to temporary files in %s",
                  st.records, st.stored, st.fetched, c->opts.dedupe_memory >> 10, st.runs,
                  st.merges, st.spilled, temp_dir(&c->opts));
    }
    if (rc == 0)
        return CLI_EXIT_OK;
    if (rc == HIT_STOP_REJECTED)
        return CLI_EXIT_REJECTED;
    if (rc < 0)
        cli_error("%s", err);
    return CLI_EXIT_INTERNAL;
}

static int rate_all(rate_ctx *c)
{
    int i;
    int rc;

    for (i = 0; i < c->opts.n_files; i++) {
        c->src = (uint32_t)i;
        rc = rate_file(c, c->opts.files[i]);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return c->dedupe != NULL ? take_back_repeats(c) : CLI_EXIT_OK;
}

/* ---------------------------------------------------------------------- */
/* Choosing the invoices                                                   */
/* ---------------------------------------------------------------------- */

static int in_range(const rate_opts *o, int32_t m)
{
    return (o->from == NO_MONTH || m >= o->from) && (o->to == NO_MONTH || m <= o->to);
}

/* Every month of a bounded range, for one chosen account. */
static int32_t *range_months(const rate_opts *o, size_t *n)
{
    int32_t *months;
    int32_t m;

    *n = (size_t)(o->to - o->from) + 1;
    months = malloc(*n * sizeof(*months));
    for (m = o->from; months != NULL && m <= o->to; m++)
        months[m - o->from] = m;
    return months;
}

/* The months of @account with charges, within the range (NULL when out of memory). */
static int32_t *charged_months(rate_ctx *c, const char *account, size_t *n)
{
    billing_months *list = NULL;
    int32_t *months;
    size_t count;
    size_t i;

    *n = 0;
    if (billing_rater_months(c->rater, account, &list, NULL, 0) != BILLING_OK)
        return NULL;
    count = billing_months_count(list);
    months = malloc((count + 1) * sizeof(*months));
    for (i = 0; months != NULL && i < count; i++) {
        months[*n] = billing_months_year(list, i) * 12 + billing_months_month(list, i) - 1;
        if (in_range(&c->opts, months[*n]))
            (*n)++;
    }
    billing_months_destroy(list);
    return months;
}

/* The months to print for @account (malloc'd; NULL when out of memory). */
static int32_t *months_for(rate_ctx *c, const char *account, size_t *n)
{
    const rate_opts *o = &c->opts;

    if (o->account != NULL && o->from != NO_MONTH && o->to != NO_MONTH &&
        o->to - o->from < RANGE_MONTHS_MAX)
        return range_months(o, n);
    return charged_months(c, account, n);
}

typedef int (*invoice_fn)(rate_ctx *c, const billing_invoice *inv, void *arg);

/* Call @fn on each chosen invoice, in account then month order. */
static int for_each_invoice(rate_ctx *c, invoice_fn fn, void *arg)
{
    char err[ERR_MAX];
    billing_invoice *inv;
    const char *account;
    int32_t *months;
    size_t n;
    size_t a;
    size_t i;
    int rc = CLI_EXIT_OK;

    for (a = 0; rc == CLI_EXIT_OK && a < billing_rater_account_count(c->rater); a++) {
        account = billing_rater_account_id(c->rater, a);
        if (c->opts.account != NULL && strcmp(account, c->opts.account) != 0)
            continue;
        months = months_for(c, account, &n);
        if (months == NULL) {
            cli_error("out of memory");
            return CLI_EXIT_INTERNAL;
        }
        for (i = 0; rc == CLI_EXIT_OK && i < n; i++) {
            if (billing_rater_invoice(c->rater, account, months[i] / 12, months[i] % 12 + 1, &inv,
                                      err, sizeof(err)) != BILLING_OK) {
                cli_error("%s", err);
                rc = CLI_EXIT_INTERNAL;
                break;
            }
            rc = fn(c, inv, arg);
            billing_invoice_destroy(inv);
        }
        free(months);
    }
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Output                                                                  */
/* ---------------------------------------------------------------------- */

static int add_json_invoice(rate_ctx *c, const billing_invoice *inv, void *arg)
{
    json_t *item = render_invoice_json(inv);

    (void)c;
    if (item == NULL || json_array_append_new(arg, item) != 0) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

static json_t *summary_json(const rate_counts *n)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "events_read", (json_int_t)n->read,
                     "events_rated", (json_int_t)n->rated, "duplicates",
                     (json_int_t)n->duplicates, "rejected", (json_int_t)n->rejected,
                     "subscriptions_rejected", (json_int_t)n->subs_rejected);
}

static int print_json(rate_ctx *c)
{
    json_t *root = json_object();
    json_t *invoices = json_array();
    int rc = CLI_EXIT_INTERNAL;

    if (root == NULL || invoices == NULL ||
        json_object_set_new(root, "summary", summary_json(&c->counts)) != 0 ||
        json_object_set(root, "invoices", invoices) != 0) {
        cli_error("out of memory");
        goto done;
    }
    rc = for_each_invoice(c, add_json_invoice, invoices);
    if (rc != CLI_EXIT_OK)
        goto done;
    if (json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 ||
        fputc('\n', stdout) == EOF) {
        cli_error("writing the output failed");
        rc = CLI_EXIT_INTERNAL;
    }
done:
    json_decref(invoices);
    json_decref(root);
    return rc;
}

static int print_table_invoice(rate_ctx *c, const billing_invoice *inv, void *arg)
{
    (void)c;
    (void)arg;
    return render_invoice_table(stdout, inv) == 0 ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
}

static int print_table(rate_ctx *c)
{
    int rc = for_each_invoice(c, print_table_invoice, NULL);

    if (rc != CLI_EXIT_OK)
        return rc;
    printf("Events: %" PRIu64 " read, %" PRIu64 " rated, %" PRIu64 " duplicates, %" PRIu64
           " rejected\n",
           c->counts.read, c->counts.rated, c->counts.duplicates, c->counts.rejected);
    if (c->counts.subs_rejected > 0)
        printf("Subscriptions: %" PRIu64 " rejected\n", c->counts.subs_rejected);
    return CLI_EXIT_OK;
}

static int finish(rate_ctx *c)
{
    int rc = c->opts.output == OUT_TABLE ? print_table(c) : print_json(c);

    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("writing the output failed");
        return CLI_EXIT_INTERNAL;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (c->counts.subs_rejected > 0)
        cli_error("%" PRIu64 " subscription%s rejected", c->counts.subs_rejected,
                  c->counts.subs_rejected == 1 ? "" : "s");
    if (c->counts.rejected > 0)
        cli_error("%" PRIu64 " of %" PRIu64 " events rejected", c->counts.rejected, c->counts.read);
    return c->counts.rejected > 0 || c->counts.subs_rejected > 0 ? CLI_EXIT_REJECTED
                                                                 : CLI_EXIT_OK;
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
    if (apply_example_defaults(c) != 0) {
        rc = CLI_EXIT_INPUT;
        goto done;
    }
    rc = setup(c);
    if (rc == CLI_EXIT_OK)
        rc = rate_all(c);
    if (rc == CLI_EXIT_REJECTED)
        cli_error("--strict: stopped at the first rejected record; no invoices printed");
    else if (rc == CLI_EXIT_OK)
        rc = finish(c);
done:
    teardown(c);
    free(c);
    return rc;
}
