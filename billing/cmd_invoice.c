/*
 * cmd_invoice.c - `billing invoice list|show|export|void|refund`: stored
 * invoices as tables, JSON, CSV (RFC 4180) or PDF (export.c), voids with
 * credit notes, and account credit refunded out of band (credit notes
 * too). One table of columns per kind of row drives every output form,
 * so that they cannot drift apart.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "dbcli.h"
#include "export.h"
#include "invoices.h"
#include "migrate.h"
#include "progress.h"

#define DEFAULT_LIMIT 1000
/* The most invoices --limit may ask for (and an export of a whole period takes). */
#define LIMIT_MAX CLI_LIMIT_MAX
#define PATH_MAX_LEN 4096
/* Most export workers (-j): each holds a connection, as `billing close -j` does. */
#define EXPORT_JOBS_MAX CLI_EXPORT_JOBS_MAX
/*
 * Invoices an export worker reads at once, in three statements for them
 * all instead of three each (at most BS_INVOICE_SET_MAX): the per-statement
 * cost on both sides was a third of an export's CPU.
 */
#define EXPORT_CHUNK 64

typedef struct invoice_opts {
    const char *db;
    const char *period;
    const char *account;
    const char *status;
    const char *series;
    const char *format;
    const char *out_dir;
    const char *reason;
    const char *amount;
    const char *reference;
    long limit;
    int limit_set;         /* --limit given: export only that many of a period */
    int jobs;              /* -j: export workers, each with a connection; 0: not given (1) */
    progress_meter *meter; /* export of a period: files written */
} invoice_opts;

static void usage(FILE *out)
{
    fputs("Usage: billing invoice list [--period YYYY-MM] [--account ID] [--status S]\n"
          "                            [--series S] [--limit N] [--format table|json]\n"
          "       billing invoice show NUMBER|ID [--format table|json]\n"
          "       billing invoice export (NUMBER|ID | --period YYYY-MM [--limit N])\n"
          "                              --format json|csv|pdf --out DIR [-j N]\n"
          "       billing invoice void NUMBER|ID --reason TEXT\n"
          "       billing invoice refund NUMBER|ID --amount X --reason TEXT --reference KEY\n"
          "                              [--method out_of_band]\n"
          "\n"
          "list: invoices and credit notes, by month and account (status draft,\n"
          "finalized or void). show: one invoice with its lines and credits.\n"
          "export: one invoice, or every invoice of a period, one file each into DIR\n"
          "(NUMBER.json, NUMBER.csv with one row per line per RFC 4180, NUMBER.pdf;\n"
          "drafts as draft-ID). void: a finalized invoice keeps its number and is\n"
          "marked void; a credit note (CN-YYYY-NNNNNN) that references it is issued,\n"
          "and the credit it used goes back to its grants. Close the month again to\n"
          "issue the corrected invoice. refund: X of the account credit left after\n"
          "the account's last finalized invoice was paid back to the customer's\n"
          "payment method outside billing (--method out_of_band, the only one); a\n"
          "credit note (CN-YYYY-NNNNNN) records it and later months no longer spend\n"
          "it. --reference KEY is unique per account: the same command run again\n"
          "prints the first credit note and records nothing. Without a refund,\n"
          "account credit stays on the account for later charges.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_INVOICE);
    fputs("\n"
          "Exit status: 0 done; 2 usage error; 3 no such invoice, or a change the\n"
          "database refuses (voiding a draft, refunding more than the account\n"
          "credit); 4 internal error; 5 database error.\n",
          out);
}

enum {
    OPT_DB = 256,
    OPT_PERIOD,
    OPT_ACCOUNT,
    OPT_STATUS,
    OPT_SERIES,
    OPT_FORMAT,
    OPT_OUT,
    OPT_REASON,
    OPT_AMOUNT,
    OPT_REFERENCE,
    OPT_METHOD,
    OPT_LIMIT,
    OPT_HELP
};

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    invoice_opts *o = ctx;

    switch (id) {
    case CLI_OPT_DB:
        o->db = v->text;
        break;
    case CLI_OPT_PERIOD:
        o->period = v->text;
        break;
    case CLI_OPT_ACCOUNT:
        o->account = v->text;
        break;
    case CLI_OPT_STATUS:
        o->status = v->text; /* draft|finalized|void */
        break;
    case CLI_OPT_SERIES:
        o->series = v->text;
        break;
    case CLI_OPT_FORMAT:
        o->format = v->text;
        break;
    case CLI_OPT_OUT:
        o->out_dir = v->text;
        break;
    case CLI_OPT_REASON:
        o->reason = v->text;
        break;
    case CLI_OPT_AMOUNT:
        o->amount = v->text;
        break;
    case CLI_OPT_REFERENCE:
        o->reference = v->text;
        break;
    case CLI_OPT_METHOD:
        /* out_of_band, the one way there is; a named option so that a second can join. */
        break;
    case CLI_OPT_LIMIT:
        o->limit = (long)v->n;
        o->limit_set = 1;
        break;
    case CLI_OPT_JOBS:
        o->jobs = (int)v->n;
        break;
    default:
        return cli_usage_error("invoice", "bad option");
    }
    return CLI_EXIT_OK;
}

/* --period YYYY-MM (checked by its kind) as the month date "YYYY-MM-01" in @buf; NULL when absent. */
static const char *month_param(const char *period, char *buf, size_t size)
{
    if (period == NULL)
        return NULL;
    snprintf(buf, size, "%.7s-01", period);
    return buf;
}

/* ---------------------------------------------------------------------- */
/* list and show                                                           */
/* ---------------------------------------------------------------------- */

static int list(bs_conn *c, const invoice_opts *o, int json)
{
    char month[32];
    const char *m = month_param(o->period, month, sizeof(month));
    bs_error err;
    bs_invoice_summary *rows;
    size_t n;
    int rc;

    if (bs_invoice_list(c, m, o->account, o->status, o->series, o->limit, &rows, &n, &err) != BS_OK)
        return dbcli_fail("invoice list", &err);
    rc = json ? export_rows_json(stdout, rows, sizeof(*rows), n, export_summary_columns,
                                 export_n_summary_columns)
              : export_rows_table(stdout, rows, sizeof(*rows), n, export_summary_columns,
                                  export_n_summary_columns);
    free(rows);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
}

static int find(bs_conn *c, const char *ref, int64_t *id)
{
    bs_error err;

    if (bs_invoice_find(c, ref, id, &err) != BS_OK)
        return dbcli_fail("invoice", &err);
    return CLI_EXIT_OK;
}

static int show(bs_conn *c, const char *ref, int json)
{
    doc_invoice inv;
    int64_t id;
    bs_error err;
    int rc = find(c, ref, &id);

    if (rc != CLI_EXIT_OK)
        return rc;
    if (doc_load(c, id, &inv, &err) != BS_OK)
        return dbcli_fail("invoice show", &err);
    rc = json ? export_invoice_json(stdout, &inv) : export_invoice_table(stdout, &inv);
    doc_free(&inv);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
}

/* ---------------------------------------------------------------------- */
/* export and void                                                         */
/* ---------------------------------------------------------------------- */

/* Write @inv's file; count it in *@count and on the meter. */
static int export_write(const doc_invoice *inv, const invoice_opts *o, size_t *count)
{
    char path[PATH_MAX_LEN];
    int rc = export_invoice_file(inv, o->format, o->out_dir, path, sizeof(path));

    if (rc != 0)
        cli_error("invoice export: %s: %s", path, strerror(errno != 0 ? errno : EIO));
    else
        (*count)++;
    progress_meter_add(o->meter, 1);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_INPUT;
}

static int export_one(bs_conn *c, int64_t id, const invoice_opts *o, size_t *count)
{
    doc_invoice inv;
    bs_error err;
    int rc;

    if (doc_load(c, id, &inv, &err) != BS_OK)
        return dbcli_fail("invoice export", &err);
    rc = export_write(&inv, o, count);
    doc_free(&inv);
    return rc;
}

/*
 * A period's export on -j N workers: each takes the next chunk of the
 * list until none is left or one of them failed, so that every invoice is
 * written once, by one worker, into the file it would have at -j 1 (a
 * file depends on its invoice alone). The list is only read (the summaries
 * may be read from several threads).
 */
typedef struct export_run {
    const invoice_opts *o;
    const bs_invoice_summary *list; /* bs_invoice_list */
    int n_list;
    int next; /* the next row to take (atomic) */
    int stop; /* a worker failed: the others take no more (atomic) */
} export_run;

typedef struct export_worker {
    export_run *run;
    pthread_t tid;
    size_t count; /* files written */
    int rc;
} export_worker;

/*
 * Rows [@first, @first + @n) of the run's list: read in three statements
 * for them all (export_invoices_load), then written one by one until a
 * worker fails.
 */
static int export_chunk(bs_conn *c, export_run *x, int first, int n, size_t *count)
{
    doc_invoice invs[EXPORT_CHUNK];
    int64_t ids[EXPORT_CHUNK] = {0};
    bs_error err;
    int rc = CLI_EXIT_OK;
    int i;

    for (i = 0; i < n; i++)
        ids[i] = strtoll(x->list[first + i].id, NULL, 10);
    if (doc_load_set(c, ids, (size_t)n, invs, &err) != BS_OK)
        return dbcli_fail("invoice export", &err);
    for (i = 0; i < n; i++) {
        if (rc == CLI_EXIT_OK && !__atomic_load_n(&x->stop, __ATOMIC_RELAXED))
            rc = export_write(&invs[i], x->o, count);
        doc_free(&invs[i]);
    }
    return rc;
}

/* Export chunks of @w's run on @c until none is left or a worker failed. */
static void export_rows(bs_conn *c, export_worker *w)
{
    export_run *x = w->run;
    int i;

    while (w->rc == CLI_EXIT_OK && !__atomic_load_n(&x->stop, __ATOMIC_RELAXED)) {
        i = __atomic_fetch_add(&x->next, EXPORT_CHUNK, __ATOMIC_RELAXED);
        if (i >= x->n_list)
            break;
        w->rc = export_chunk(c, x, i, x->n_list - i < EXPORT_CHUNK ? x->n_list - i : EXPORT_CHUNK,
                             &w->count);
    }
    if (w->rc != CLI_EXIT_OK)
        __atomic_store_n(&x->stop, 1, __ATOMIC_RELAXED);
}

/* A worker beside the main thread, with a connection of its own. */
static void *export_thread(void *arg)
{
    export_worker *w = arg;
    bs_conn *c = dbcli_connect(w->run->o->db);

    if (c == NULL) {
        w->rc = CLI_EXIT_DATABASE;
        __atomic_store_n(&w->run->stop, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    export_rows(c, w);
    bs_close(c);
    return NULL;
}

/*
 * Every invoice of @list: on the main thread with @c, and on o->jobs - 1
 * more threads (no more than there are chunks of invoices; fewer if a
 * thread cannot start). Returns the first failing worker's exit code, else CLI_EXIT_OK;
 * the files written go to *@count.
 */
static int export_list(bs_conn *c, const bs_invoice_summary *list, int n_list,
                       const invoice_opts *o, size_t *count)
{
    export_worker w[EXPORT_JOBS_MAX];
    export_run x = {o, list, n_list, 0, 0};
    int jobs = o->jobs > 1 ? o->jobs : 1;
    int started;
    int rc = CLI_EXIT_OK;
    int i;

    memset(w, 0, sizeof(w));
    /* A worker beyond the list's chunks would only connect. */
    if (jobs > (n_list + EXPORT_CHUNK - 1) / EXPORT_CHUNK)
        jobs = (n_list + EXPORT_CHUNK - 1) / EXPORT_CHUNK;
    for (started = 1; started < jobs; started++) {
        w[started].run = &x;
        if (pthread_create(&w[started].tid, NULL, export_thread, &w[started]) != 0)
            break;
    }
    w[0].run = &x;
    export_rows(c, &w[0]);
    for (i = 0; i < started; i++) {
        if (i > 0)
            pthread_join(w[i].tid, NULL);
        *count += w[i].count;
        if (rc == CLI_EXIT_OK)
            rc = w[i].rc;
    }
    return rc;
}

/*
 * Before the first file: the fonts of a PDF export (a bad BILLING_PDF_FONT
 * is the configuration's fault, not the output file's), and --out DIR
 * created with its parents, as `mkdir -p` would.
 */
static int export_prepare(const char *format, const char *dir)
{
    char why[PATH_MAX_LEN + 128];
    char path[PATH_MAX_LEN];
    size_t i;
    size_t n = strlen(dir);

    if (strcmp(format, "pdf") == 0 && export_pdf_fonts(why, sizeof(why)) != 0) {
        cli_error("invoice export: %s", why);
        return CLI_EXIT_INPUT;
    }
    if (n >= sizeof(path)) {
        cli_error("invoice export: --out '%s': %s", dir, strerror(ENAMETOOLONG));
        return CLI_EXIT_INPUT;
    }
    memcpy(path, dir, n + 1);
    for (i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            cli_error("invoice export: cannot create '%s': %s", path, strerror(errno));
            return CLI_EXIT_INPUT;
        }
        path[i] = dir[i];
    }
    return CLI_EXIT_OK;
}

static int export_cmd(bs_conn *c, const invoice_opts *o, const char *ref)
{
    char month[32];
    const char *m = month_param(o->period, month, sizeof(month));
    bs_invoice_summary *list = NULL;
    size_t n_list = 0;
    bs_error err;
    size_t count = 0;
    int64_t id;
    int rc = CLI_EXIT_OK;

    if (o->format == NULL || !export_format_known(o->format) || o->out_dir == NULL)
        return cli_usage_error("invoice", "export needs --format json|csv|pdf and --out DIR");
    if ((ref == NULL) == (m == NULL))
        return cli_usage_error("invoice", "export one invoice (NUMBER|ID) or a --period");
    rc = export_prepare(o->format, o->out_dir);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ref != NULL) {
        rc = find(c, ref, &id);
        if (rc == CLI_EXIT_OK)
            rc = export_one(c, id, o, &count);
    } else {
        if (bs_invoice_list(c, m, o->account, o->status, o->series,
                            o->limit_set ? o->limit : LIMIT_MAX, &list, &n_list, &err) != BS_OK)
            return dbcli_fail("invoice export", &err);
        progress_meter_start(o->meter, stderr, progress_mode(stderr, 0), "invoice export",
                             "invoices", (uint64_t)n_list);
        rc = export_list(c, list, (int)n_list, o, &count);
        progress_meter_end(o->meter, count, NULL, 0);
        free(list);
    }
    fprintf(stderr, "billing: invoice export: %zu file(s) written to %s\n", count, o->out_dir);
    return rc;
}

/*
 * A void the database would refuse with a bare constraint error (voided
 * already, a draft, a credit note): said with the invoice's number.
 */
static int void_refused(bs_conn *c, int64_t id)
{
    doc_invoice inv;
    bs_error err;
    const char *number;
    const char *status;
    int rc = CLI_EXIT_OK;

    if (doc_load(c, id, &inv, &err) != BS_OK)
        return dbcli_fail("invoice void", &err);
    number = doc_field(&inv, "number");
    status = doc_field(&inv, "status");
    if (number[0] == '\0')
        number = doc_field(&inv, "id");
    if (strcmp(status, "void") == 0) {
        cli_error("invoice void: %s is void already (reason: %s); nothing changed", number,
                  doc_field(&inv, "void_reason"));
        rc = CLI_EXIT_INPUT;
    } else if (strcmp(status, "draft") == 0) {
        cli_error("invoice void: %s is a draft: only finalized invoices are voided (a new "
                  "close replaces a draft)",
                  number);
        rc = CLI_EXIT_INPUT;
    } else if (strcmp(doc_field(&inv, "kind"), "invoice") != 0) {
        cli_error("invoice void: %s is not an invoice but a %s: it cannot be voided", number,
                  strcmp(doc_field(&inv, "kind"), "credit_note") == 0 ? "credit note"
                                                                      : doc_field(&inv, "kind"));
        rc = CLI_EXIT_INPUT;
    }
    doc_free(&inv);
    return rc;
}

static int void_cmd(bs_conn *c, const invoice_opts *o, const char *ref)
{
    char cn[BS_NUMBER_TEXT_MAX];
    bs_error err;
    int64_t id;
    int rc;

    if (o->reason == NULL)
        return cli_usage_error("invoice", "void needs --reason TEXT");
    rc = find(c, ref, &id);
    if (rc == CLI_EXIT_OK)
        rc = void_refused(c, id);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (bs_invoice_void(c, id, o->reason, cn, &err) != BS_OK)
        return dbcli_fail("invoice void", &err);
    printf("voided %s; credit note %s\n", ref, cn);
    return CLI_EXIT_OK;
}

/*
 * refund: the account credit paid back out of band. A retry with the same
 * --reference prints the credit note the first run issued.
 */
static int refund_cmd(bs_conn *c, const invoice_opts *o, const char *ref)
{
    char cn[BS_NUMBER_TEXT_MAX];
    char stale[256];
    bs_error err;
    int64_t id;
    int replayed = 0;
    int rc;

    if (o->amount == NULL || o->reason == NULL || o->reference == NULL)
        return cli_usage_error("invoice", "refund needs --amount X, --reason TEXT and "
                                          "--reference KEY");
    rc = find(c, ref, &id);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (bs_invoice_refund(c, id, o->amount, o->reason, o->reference, cn, &replayed, stale,
                          sizeof(stale), &err) != BS_OK)
        return dbcli_fail("invoice refund", &err);
    printf("%s %s of the account credit after %s to the payment method (out of band); "
           "credit note %s\n",
           replayed ? "already refunded" : "refunded", o->amount, ref, cn);
    /* Not an error: the draft is right once closed again (`close --finalize` closes first). */
    if (stale[0] != '\0')
        fprintf(stderr,
                "billing: invoice refund: the draft of %s spends the account credit as it "
                "was: close that month again before finalizing it\n",
                stale);
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                */
/* ---------------------------------------------------------------------- */

static int dispatch(bs_conn *c, const char *action, const invoice_opts *o, const char *ref)
{
    int json = o->format != NULL && strcmp(o->format, "json") == 0;

    if (strcmp(action, "list") == 0)
        return list(c, o, json);
    if (strcmp(action, "show") == 0)
        return show(c, ref, json);
    if (strcmp(action, "export") == 0)
        return export_cmd(c, o, ref);
    if (strcmp(action, "refund") == 0)
        return refund_cmd(c, o, ref);
    return void_cmd(c, o, ref);
}

int cmd_invoice(int argc, char **argv)
{
    invoice_opts o;
    progress_meter meter;
    const char *action;
    const char *ref = NULL;
    bs_error err;
    bs_conn *c;
    int first;
    int rc;

    memset(&o, 0, sizeof(o));
    memset(&meter, 0, sizeof(meter));
    o.meter = &meter;
    o.limit = DEFAULT_LIMIT;
    rc = cli_parse("invoice", CLI_CMD_INVOICE, argc, argv, take_option, &o, &first);
    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (first >= argc)
        return cli_usage_error("invoice", "say list, show, export, void or refund");
    action = argv[first++];
    if (strcmp(action, "list") != 0 && strcmp(action, "show") != 0 &&
        strcmp(action, "export") != 0 && strcmp(action, "void") != 0 &&
        strcmp(action, "refund") != 0)
        return cli_usage_error("invoice", "unknown action '%s' (list, show, export, void, refund)",
                               action);
    if (first < argc)
        ref = argv[first++];
    if (first < argc)
        return cli_usage_error("invoice", "unexpected argument '%s'", argv[first]);
    if (ref == NULL && (strcmp(action, "show") == 0 || strcmp(action, "void") == 0 ||
                        strcmp(action, "refund") == 0))
        return cli_usage_error("invoice", "%s needs an invoice NUMBER or ID", action);
    if (o.jobs > 0 && strcmp(action, "export") != 0)
        return cli_usage_error("invoice", "-j/--jobs belongs to export");
    if (o.format != NULL && strcmp(action, "export") != 0 && strcmp(o.format, "json") != 0 &&
        strcmp(o.format, "table") != 0)
        return cli_usage_error("invoice", "--format '%s': expected table or json", o.format);
    c = dbcli_connect(o.db);
    if (c == NULL)
        return CLI_EXIT_DATABASE;
    if (bs_schema_require(c, &err) != BS_OK)
        rc = dbcli_fail("invoice", &err);
    else
        rc = dispatch(c, action, &o, ref);
    bs_close(c);
    return rc;
}
