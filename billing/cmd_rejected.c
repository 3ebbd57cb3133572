/*
 * cmd_rejected.c - `billing rejected list|replay`: the records the ingest
 * pipeline refused (billing.rejected_events, with their original bytes),
 * and putting them through the pipeline again once the catalog is fixed
 * (an account created after its first events is the everyday case).
 *
 * A rejected row is never changed (the table is append-only): it counts
 * as resolved once its event id is stored, unless it was a conflict (the
 * id stored is the other content). Replaying a record that fails again
 * adds no second row. The SQL is the store's (store/rejected.h).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dbcli.h"
#include "ingest.h"
#include "migrate.h"
#include "rejected.h"

#define DEFAULT_LIMIT 100
/* The most rows --limit may ask for. */
#define LIMIT_MAX CLI_LIMIT_MAX

typedef struct rejected_opts {
    const char *db;
    const char *book;
    const char *reason;
    long limit;
    int all;
} rejected_opts;

static void usage(FILE *out)
{
    fputs("Usage: billing rejected list [--reason CODE] [--limit N] [--all] [--db CONNINFO]\n"
          "       billing rejected replay [--reason CODE] [--book ID] [--db CONNINFO]\n"
          "\n"
          "list: the records the ingest pipeline (billingd, billing ingest) rejected and\n"
          "that are still unresolved (--all: resolved ones too), oldest first: id, when,\n"
          "where from, event id, reason code, reason, payload size.\n"
          "replay: put every unresolved rejected record (of reason CODE) through the\n"
          "pipeline again with the catalog as it is now. Those now accepted are stored\n"
          "and rated; the others stay as they are (no second row). A record is resolved\n"
          "once its event id is stored (a conflict never is). Payloads starting with '{'\n"
          "are JSON, others protobuf.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_REJECTED);
    fputs("\n"
          "Exit status: 0 done (replay: every record now stored); 1 replay left some\n"
          "rejected; 2 usage error; 4 internal error; 5 database error.\n",
          out);
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    rejected_opts *o = ctx;

    switch (id) {
    case CLI_OPT_DB:
        o->db = v->text;
        break;
    case CLI_OPT_BOOK:
        o->book = v->text;
        break;
    case CLI_OPT_REASON:
        if (strlen(v->text) < 1 || strlen(v->text) > 32 ||
            strspn(v->text, "abcdefghijklmnopqrstuvwxyz_") != strlen(v->text))
            return cli_usage_error("rejected", "--reason: '%s' is not a reason code", v->text);
        o->reason = v->text;
        break;
    case CLI_OPT_LIMIT:
        o->limit = (long)v->n;
        break;
    case CLI_OPT_ALL:
        o->all = 1;
        break;
    default:
        return cli_usage_error("rejected", "bad option");
    }
    return CLI_EXIT_OK;
}

/* A bs_reject_fn: one line per rejected record. */
static int print_row(void *arg, const bs_reject_row *row)
{
    (void)arg;
    printf("%" PRId64 " %s %s event=%s %s%s %" PRId64 "B: %s\n", row->id, row->received_at,
           row->source, row->event_id, row->reason_code, row->resolved ? " (resolved)" : "",
           row->size, row->reason);
    return 0;
}

static int list(bs_conn *c, const rejected_opts *o)
{
    bs_error err;

    if (bs_rejects_list(c, o->reason, o->limit, o->all, print_row, NULL, &err) != BS_OK)
        return dbcli_fail("rejected list", &err);
    return CLI_EXIT_OK;
}

/* Replay one page; *@last gets the highest rejected id seen, *@n the rows (0: done). */
static int replay_page(bs_conn *c, bs_ingest *in, const rejected_opts *o, int64_t *last,
                       bs_ingest_counts *total, size_t *n)
{
    static bs_record_result results[BS_REJECTS_PAGE];
    bs_reject_page page;
    bs_ingest_counts k;
    bs_error err;
    size_t i;
    int rc = CLI_EXIT_OK;

    *n = 0;
    if (bs_rejects_pending(c, *last, o->reason, &page, &err) != BS_OK)
        return dbcli_fail("rejected replay", &err);
    if (page.n > 0 && bs_ingest_batch(in, c, page.records, page.n, NULL, 0, BS_INGEST_KEEP_REJECTS,
                                      results, &k, &err) != BS_OK) {
        rc = dbcli_fail("rejected replay", &err);
        goto out;
    }
    for (i = 0; i < page.n; i++) {
        if (results[i].outcome == BS_RECORD_REJECTED)
            cli_error("rejected %" PRId64 " (%s): still %s: %s", page.ids[i],
                      page.records[i].source, results[i].reason_code, results[i].reason);
    }
    if (page.n > 0) {
        *last = page.ids[page.n - 1];
        bs_ingest_counts_add(total, &k);
    }
    *n = page.n;
out:
    bs_reject_page_free(&page);
    return rc;
}

static int replay(bs_conn *c, const rejected_opts *o)
{
    int64_t last = 0;
    bs_ingest_counts total;
    bs_catalog *cat;
    bs_ingest *in;
    bs_error err;
    size_t n = 1;
    int rc = CLI_EXIT_OK;

    memset(&total, 0, sizeof(total));
    cat = bs_catalog_read(c, o->book, &err);
    if (cat == NULL)
        return dbcli_fail("rejected replay", &err);
    in = bs_ingest_new(cat, NULL);
    if (in == NULL)
        rc = CLI_EXIT_INTERNAL;
    while (rc == CLI_EXIT_OK && n > 0)
        rc = replay_page(c, in, o, &last, &total, &n);
    if (rc == CLI_EXIT_OK)
        printf("%zu replayed: %zu stored, %zu duplicates, %zu still rejected\n", total.records,
               total.stored, total.duplicates, total.rejected);
    bs_ingest_free(in);
    bs_catalog_free(cat);
    if (rc == CLI_EXIT_OK && total.rejected > 0)
        rc = CLI_EXIT_REJECTED;
    return rc;
}

int cmd_rejected(int argc, char **argv)
{
    static const char *const verbs[] = {"list", "replay", NULL};
    rejected_opts o;
    bs_error err;
    bs_conn *c;
    int first = 0;
    int verb = 0;
    int rc;

    memset(&o, 0, sizeof(o));
    o.limit = DEFAULT_LIMIT;
    rc = cli_verb_parse("rejected", CLI_CMD_REJECTED, verbs, argc, argv, take_option, &o, &verb,
                        &first);
    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (first != argc)
        return cli_usage_error("rejected", "unexpected argument '%s'", argv[first]);
    c = dbcli_connect(o.db);
    if (c == NULL)
        return CLI_EXIT_DATABASE;
    if (bs_schema_require(c, &err) != BS_OK)
        rc = dbcli_fail("rejected", &err);
    else
        rc = verb == 0 ? list(c, &o) : replay(c, &o);
    bs_close(c);
    return rc;
}
