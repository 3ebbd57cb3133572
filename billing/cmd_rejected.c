/*
 * cmd_rejected.c - `billing rejected list|replay`: the records the ingest
 * pipeline refused (billing.rejected_events, with their original bytes),
 * and putting them through the pipeline again once the catalog is fixed
 * (an account created after its first events is the everyday case).
 *
 * A rejected row is never changed (the table is append-only): it counts
 * as resolved once its event id is stored, unless it was a conflict (the
 * id stored is the other content). Replaying a record that fails again
 * adds no second row.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dbcli.h"
#include "ingest.h"
#include "migrate.h"

/* Rejected rows replayed per transaction. */
#define PAGE 2000
#define TEXT_(x) #x
#define TEXT(x) TEXT_(x)
#define DEFAULT_LIMIT 100
/* The most rows --limit may ask for. */
#define LIMIT_MAX 100000000L

/* Stored: under its hash in event_ids, or (another id holds the hash) in event_id_collisions. */
#define RESOLVED                                                                               \
    "(r.reason_code <> 'conflict' AND (EXISTS (SELECT 1 FROM billing.event_ids e"             \
    " WHERE e.id_hash = decode(md5(r.event_id), 'hex') AND e.event_id = r.event_id)"           \
    " OR EXISTS (SELECT 1 FROM billing.event_id_collisions x WHERE x.event_id = r.event_id)))"
#define SQL_LIST                                                                               \
    "SELECT r.id, to_char(r.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"  \
    " r.source, coalesce(r.event_id, '-'), r.reason_code, r.reason, octet_length(r.payload),"  \
    " " RESOLVED " FROM billing.rejected_events r"                                            \
    " WHERE ($1::text IS NULL OR r.reason_code = $1::text) AND ($3::boolean OR NOT " RESOLVED  \
    ") ORDER BY r.id LIMIT $2::bigint"
#define SQL_PENDING                                                                            \
    "SELECT r.id, r.source, r.kafka_topic, r.kafka_partition, r.kafka_offset,"                 \
    " encode(r.payload, 'hex') FROM billing.rejected_events r WHERE r.id > $1::bigint"         \
    " AND ($2::text IS NULL OR r.reason_code = $2::text) AND NOT " RESOLVED                    \
    " ORDER BY r.id LIMIT " TEXT(PAGE)

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
          "Options:\n"
          "  --reason CODE          only this reason (invalid, parse, conflict,\n"
          "                         unknown_account, no_price, range, too_large)\n"
          "  --limit N              list at most N rows (default 100)\n"
          "  --all                  list resolved rows too\n"
          "  --book ID              price book to rate with (default: the only one)\n" DBCLI_DB_HELP
          "  --help                 print this help\n"
          "\n"
          "Exit status: 0 done (replay: every record now stored); 1 replay left some\n"
          "rejected; 2 usage error; 4 internal error; 5 database error.\n",
          out);
}

enum { OPT_DB = 256, OPT_BOOK, OPT_REASON, OPT_LIMIT, OPT_ALL, OPT_HELP };

static const struct option long_options[] = {
    {"db", required_argument, NULL, OPT_DB},         {"book", required_argument, NULL, OPT_BOOK},
    {"reason", required_argument, NULL, OPT_REASON}, {"limit", required_argument, NULL, OPT_LIMIT},
    {"all", no_argument, NULL, OPT_ALL},             {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int take_option(void *ctx, int opt, const char *arg)
{
    rejected_opts *o = ctx;
    uint64_t n = 0;
    int rc;

    switch (opt) {
    case OPT_DB:
        o->db = arg;
        return CLI_EXIT_OK;
    case OPT_BOOK:
        o->book = arg;
        return CLI_EXIT_OK;
    case OPT_REASON:
        if (strlen(arg) < 1 || strlen(arg) > 32 || strspn(arg, "abcdefghijklmnopqrstuvwxyz_") !=
                                                       strlen(arg))
            return cli_usage_error("rejected", "--reason: '%s' is not a reason code", arg);
        o->reason = arg;
        return CLI_EXIT_OK;
    case OPT_LIMIT:
        rc = cli_count("rejected", "--limit", arg, LIMIT_MAX, "a number of rows", &n);
        o->limit = (long)n;
        return rc;
    case OPT_ALL:
        o->all = 1;
        return CLI_EXIT_OK;
    case OPT_HELP:
        return -1;
    default:
        return cli_usage_error("rejected", "bad option");
    }
}

static int list(bs_conn *c, const rejected_opts *o)
{
    char limit[24];
    const char *params[3];
    bs_error err;
    PGresult *res;
    int i;

    snprintf(limit, sizeof(limit), "%ld", o->limit);
    params[0] = o->reason;
    params[1] = limit;
    params[2] = o->all ? "true" : "false";
    res = bs_query(c, SQL_LIST, 3, params, &err);
    if (res == NULL)
        return dbcli_fail("rejected list", &err);
    for (i = 0; i < PQntuples(res); i++)
        printf("%s %s %s event=%s %s%s %sB: %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
               PQgetvalue(res, i, 2), PQgetvalue(res, i, 3), PQgetvalue(res, i, 4),
               strcmp(PQgetvalue(res, i, 7), "t") == 0 ? " (resolved)" : "",
               PQgetvalue(res, i, 6), PQgetvalue(res, i, 5));
    PQclear(res);
    return CLI_EXIT_OK;
}

static int hexval(char h)
{
    return h <= '9' ? h - '0' : h - 'a' + 10;
}

/* Decode the hex of @hex in place; returns the byte count. */
static size_t unhex(char *hex)
{
    size_t n = strlen(hex) / 2;
    size_t i;

    for (i = 0; i < n; i++)
        hex[i] = (char)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    return n;
}

/* Row @i of a SQL_PENDING page as a record (its texts stay in @res). */
static void to_record(PGresult *res, int i, bs_record *rec)
{
    char *payload = PQgetvalue(res, i, 5);

    memset(rec, 0, sizeof(*rec));
    rec->len = unhex(payload);
    rec->data = payload;
    /* Our protobuf messages start with a field tag, never '{' (field 15, wire type 3). */
    rec->format = rec->len > 0 && payload[0] == '{' ? BS_RECORD_JSON : BS_RECORD_PROTOBUF;
    rec->source = PQgetvalue(res, i, 1);
    if (!PQgetisnull(res, i, 2)) {
        rec->kafka_topic = PQgetvalue(res, i, 2);
        rec->kafka_partition = (int32_t)atol(PQgetvalue(res, i, 3));
        rec->kafka_offset = strtoll(PQgetvalue(res, i, 4), NULL, 10);
    }
}

/* Replay one page; *@last gets the highest rejected id seen, *@n the rows (0: done). */
static int replay_page(bs_conn *c, bs_ingest *in, const rejected_opts *o, char *last,
                       size_t lastsize, bs_ingest_counts *total, int *n)
{
    static bs_record recs[PAGE];
    static bs_record_result results[PAGE];
    const char *params[2] = {last, o->reason};
    bs_ingest_counts k;
    bs_error err;
    PGresult *res = bs_query(c, SQL_PENDING, 2, params, &err);
    int i;

    if (res == NULL)
        return dbcli_fail("rejected replay", &err);
    *n = PQntuples(res);
    for (i = 0; i < *n; i++)
        to_record(res, i, &recs[i]);
    if (*n > 0 && bs_ingest_batch(in, c, recs, (size_t)*n, NULL, 0, BS_INGEST_KEEP_REJECTS,
                                  results, &k, &err) != BS_OK) {
        PQclear(res);
        return dbcli_fail("rejected replay", &err);
    }
    for (i = 0; i < *n; i++) {
        if (results[i].outcome == BS_RECORD_REJECTED)
            cli_error("rejected %s (%s): still %s: %s", PQgetvalue(res, i, 0), recs[i].source,
                      results[i].reason_code, results[i].reason);
    }
    if (*n > 0) {
        snprintf(last, lastsize, "%s", PQgetvalue(res, *n - 1, 0));
        bs_ingest_counts_add(total, &k);
    }
    PQclear(res);
    return CLI_EXIT_OK;
}

static int replay(bs_conn *c, const rejected_opts *o)
{
    char last[24] = "0";
    bs_ingest_counts total;
    bs_catalog *cat;
    bs_ingest *in;
    bs_error err;
    int n = 1;
    int rc = CLI_EXIT_OK;

    memset(&total, 0, sizeof(total));
    cat = bs_catalog_read(c, o->book, &err);
    if (cat == NULL)
        return dbcli_fail("rejected replay", &err);
    in = bs_ingest_new(cat, NULL);
    if (in == NULL)
        rc = CLI_EXIT_INTERNAL;
    while (rc == CLI_EXIT_OK && n > 0)
        rc = replay_page(c, in, o, last, sizeof(last), &total, &n);
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
    rc = cli_verb_getopt("rejected", verbs, argc, argv, long_options, take_option, &o, &verb,
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
