/*
 * cmd_ingest.c - `billing ingest FILE...`: usage event files (JSON Lines
 * or length-delimited protobuf, "-" for stdin) through the same ingest
 * pipeline as billingd (store/ingest.h): same dedupe, same rejects, same
 * aggregates, one transaction per batch. For operators without Kafka and
 * for backfills.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dbcli.h"
#include "eventio.h"
#include "ingest.h"
#include "migrate.h"
#include "progress.h"

#define DEFAULT_BATCH 5000
#define BATCH_MAX CLI_BATCH_MAX
/* Bytes of records and sources held for one batch: flushed early when full. */
#define ARENA_SIZE (16u * 1024u * 1024u)
#define SOURCE_MAX 512
#define MSG_MAX 1024

typedef struct ingest_opts {
    const char *db;
    const char *book;
    const char *format; /* NULL: guessed per file */
    long batch;
    long jobs;
    int quiet;
} ingest_opts;

/* One batch being filled: records whose bytes and sources live in the arena. */
typedef struct batch {
    bs_record recs[BATCH_MAX];
    bs_record_result results[BATCH_MAX];
    size_t n;
    char *arena;
    size_t used;
    char reasons[BATCH_MAX][MSG_MAX / 4];
} batch;

typedef struct ingest_run {
    const ingest_opts *o;
    bs_conn *c;
    bs_ingest *in;
    batch *b;
    bs_ingest_counts total;
    progress_meter meter; /* bytes of the inputs */
    uint64_t bytes_done;  /* of the inputs finished */
    uint64_t offset;      /* into the current input */
} ingest_run;

static void usage(FILE *out)
{
    fputs("Usage: billing ingest [OPTIONS] FILE...\n"
          "\n"
          "Store usage events from files (JSON Lines or length-delimited protobuf; \"-\" is\n"
          "stdin) in the database through the pipeline billingd runs: each event is\n"
          "rated against the catalog loaded with `billing load`, deduplicated forever\n"
          "(an identical replay is a duplicate, the same id with other content a\n"
          "conflict), and stored with its exact aggregates; rejected records go to\n"
          "billing.rejected_events with their bytes and a reason (`billing rejected\n"
          "list`). Each batch is one transaction: running the same files again stores\n"
          "nothing new.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_INGEST);
    fputs("\n"
          "Progress goes to stderr (a bar on a terminal, otherwise a line every\n"
          "BILLING_PROGRESS_INTERVAL seconds, default 5). Every file is checked to be\n"
          "readable before anything is stored. Prints \"N records: S stored,\n"
          "D duplicates, R rejected\", also after a failure (what it counts is stored).\n"
          "Exit status: 0 all stored or duplicates; 1 some records rejected; 2 usage\n"
          "error; 3 unreadable file or invalid stored catalog; 4 internal error;\n"
          "5 database unreachable, failed, or not migrated.\n",
          out);
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    ingest_opts *o = ctx;

    switch (id) {
    case CLI_OPT_DB:
        o->db = v->text;
        break;
    case CLI_OPT_BOOK:
        o->book = v->text;
        break;
    case CLI_OPT_FORMAT:
        o->format = v->text;
        break;
    case CLI_OPT_BATCH:
        o->batch = (long)v->n;
        break;
    case CLI_OPT_JOBS:
        o->jobs = (long)v->n;
        break;
    case CLI_OPT_QUIET:
        o->quiet = 1;
        break;
    default:
        return cli_usage_error("ingest", "bad option");
    }
    return CLI_EXIT_OK;
}

static int parse_args(ingest_opts *o, int argc, char **argv, int *first)
{
    int rc;

    memset(o, 0, sizeof(*o));
    o->batch = DEFAULT_BATCH;
    o->jobs = 1;
    rc = cli_parse("ingest", CLI_CMD_INGEST, argc, argv, take_option, o, first);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (*first == argc)
        return cli_usage_error("ingest", "no input file (use - for stdin)");
    return CLI_EXIT_OK;
}

/* Copy @len bytes into the arena; NULL when it is full. */
static char *keep(batch *b, const void *data, size_t len)
{
    char *p;

    if (len + 1 > ARENA_SIZE - b->used)
        return NULL;
    p = b->arena + b->used;
    memcpy(p, data, len);
    p[len] = '\0';
    b->used += len + 1;
    return p;
}

static void report_rejects(const ingest_run *run)
{
    const batch *b = run->b;
    size_t i;

    if (run->o->quiet)
        return;
    for (i = 0; i < b->n; i++) {
        if (b->results[i].outcome == BS_RECORD_REJECTED)
            cli_error("%s: %s: %s", b->recs[i].source + 5, b->results[i].reason_code,
                      b->results[i].reason);
    }
}

static void show_progress(ingest_run *run)
{
    char extra[64];

    snprintf(extra, sizeof(extra), ", %zu records", run->total.records);
    progress_meter_update(&run->meter, run->bytes_done + run->offset, extra);
}

static int flush(ingest_run *run)
{
    bs_ingest_counts k;
    bs_error err;

    if (run->b->n == 0)
        return CLI_EXIT_OK;
    if (bs_ingest_batch(run->in, run->c, run->b->recs, run->b->n, NULL, 0, 0, run->b->results, &k,
                        &err) != BS_OK)
        return dbcli_fail("ingest", &err);
    report_rejects(run);
    bs_ingest_counts_add(&run->total, &k);
    show_progress(run);
    run->b->n = 0;
    run->b->used = 0;
    return CLI_EXIT_OK;
}

/* Add one record read from @r (bytes, or a reader's refusal in @msg) to the batch. */
static int add_record(ingest_run *run, bc_reader *r, bc_format f, const unsigned char *data,
                      size_t len, const char *msg)
{
    batch *b = run->b;
    char source[SOURCE_MAX];
    bs_record *rec;
    char *src;
    char *bytes;
    int rc;

    snprintf(source, sizeof(source), "file:%s", bc_reader_where(r));
    if (b->n == (size_t)run->o->batch || ARENA_SIZE - b->used < len + sizeof(source) + 2) {
        rc = flush(run);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    src = keep(b, source, strlen(source));
    bytes = keep(b, data ? (const void *)data : "", len);
    rec = &b->recs[b->n];
    memset(rec, 0, sizeof(*rec));
    rec->data = bytes;
    rec->len = len;
    rec->format = f == BC_FORMAT_PROTOBUF ? BS_RECORD_PROTOBUF : BS_RECORD_JSON;
    rec->source = src;
    if (msg != NULL) {
        snprintf(b->reasons[b->n], sizeof(b->reasons[b->n]), "%.*s",
                 (int)sizeof(b->reasons[b->n]) - 1, msg);
        rec->reject_code = "too_large";
        rec->reject_reason = b->reasons[b->n];
    }
    b->n++;
    return CLI_EXIT_OK;
}

static int ingest_file(ingest_run *run, const char *path)
{
    char msg[MSG_MAX];
    const unsigned char *data;
    size_t len;
    bc_format f = BC_FORMAT_JSONL;
    bc_reader *r;
    bc_read_result rr;
    int rc = CLI_EXIT_OK;

    if (run->o->format != NULL)
        bc_format_parse(run->o->format, &f);
    else if (bc_format_guess(path, &f) != 0)
        return cli_usage_error("ingest", "%s: cannot tell the format from the name: use --format",
                               path);
    r = bc_reader_open(path, f, msg, sizeof(msg));
    if (r == NULL) {
        cli_error("%s", msg);
        return CLI_EXIT_INPUT;
    }
    for (;;) {
        rr = bc_reader_next_raw(r, &data, &len, msg, sizeof(msg));
        if (rr == BC_READ_EOF)
            break;
        if (rr == BC_READ_ERROR) {
            cli_error("%s: %s", bc_reader_where(r), msg);
            rc = CLI_EXIT_INPUT;
            break;
        }
        run->offset = bc_reader_offset(r);
        rc = add_record(run, r, f, data, len, rr == BC_READ_REJECT ? msg : NULL);
        if (rc != CLI_EXIT_OK)
            break;
    }
    /* Records of this file must be stored before its reader (and their names) go. */
    if (rc == CLI_EXIT_OK)
        rc = flush(run);
    run->bytes_done += progress_file_sizes((char *const *)&path, 1) != PROGRESS_UNKNOWN
                           ? progress_file_sizes((char *const *)&path, 1)
                           : run->offset;
    run->offset = 0;
    bc_reader_close(r);
    return rc;
}

/*
 * Every input readable and of a known format before anything is stored:
 * a typo in the last name must not leave the first files half a backfill.
 */
static int check_inputs(const ingest_opts *o, int argc, char **argv, int first)
{
    bc_format f;
    FILE *fp;
    int i;

    for (i = first; i < argc; i++) {
        if (strcmp(argv[i], "-") == 0)
            continue;
        if (o->format == NULL && bc_format_guess(argv[i], &f) != 0)
            return cli_usage_error("ingest",
                                   "%s: cannot tell the format from the name: use "
                                   "--format",
                                   argv[i]);
        fp = fopen(argv[i], "rb");
        if (fp == NULL) {
            cli_error("ingest: %s: %s (nothing stored)", argv[i], strerror(errno));
            return CLI_EXIT_INPUT;
        }
        fclose(fp);
    }
    return CLI_EXIT_OK;
}

static int run_files(ingest_run *run, int argc, char **argv, int first)
{
    int rc = CLI_EXIT_OK;
    int i;

    progress_meter_start(&run->meter, stderr, progress_mode(stderr, run->o->quiet), "ingest", NULL,
                         progress_file_sizes(argv + first, argc - first));
    for (i = first; i < argc && rc == CLI_EXIT_OK; i++)
        rc = ingest_file(run, argv[i]);
    progress_meter_end(&run->meter, run->bytes_done, NULL, 0);
    /* What was stored before a failure is stored: say so. */
    printf("%zu records: %zu stored, %zu duplicates, %zu rejected\n", run->total.records,
           run->total.stored, run->total.duplicates, run->total.rejected);
    if (rc != CLI_EXIT_OK)
        return rc;
    return run->total.rejected > 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

int cmd_ingest(int argc, char **argv)
{
    ingest_opts o;
    ingest_run run;
    bs_catalog *cat = NULL;
    bs_error err;
    int first = 0;
    int rc = parse_args(&o, argc, argv, &first);

    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc == CLI_EXIT_OK)
        rc = check_inputs(&o, argc, argv, first);
    if (rc != CLI_EXIT_OK)
        return rc;
    memset(&run, 0, sizeof(run));
    run.o = &o;
    run.b = calloc(1, sizeof(*run.b));
    if (run.b == NULL || (run.b->arena = malloc(ARENA_SIZE)) == NULL) {
        cli_error("ingest: out of memory");
        rc = CLI_EXIT_INTERNAL;
        goto out;
    }
    run.c = dbcli_connect(o.db);
    if (run.c == NULL) {
        rc = CLI_EXIT_DATABASE;
        goto out;
    }
    if (bs_schema_require(run.c, &err) != BS_OK ||
        (cat = bs_catalog_read(run.c, o.book, &err)) == NULL) {
        rc = dbcli_fail("ingest", &err);
        goto out;
    }
    run.in = bs_ingest_new(cat, NULL);
    if (run.in == NULL || bs_ingest_set_threads(run.in, (int)o.jobs) != 0) {
        cli_error("ingest: out of memory");
        rc = CLI_EXIT_INTERNAL;
        goto out;
    }
    rc = run_files(&run, argc, argv, first);
out:
    bs_ingest_free(run.in);
    bs_catalog_free(cat);
    bs_close(run.c);
    if (run.b != NULL)
        free(run.b->arena);
    free(run.b);
    return rc;
}
