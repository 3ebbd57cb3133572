/*
 * bench_store.c - raw usage events into PostgreSQL: rows per second of
 * the ways to insert them, each with the store's permanent dedupe
 * (billing.event_ids) and all the database's checks (doc/performance.md,
 * "Raw event insert").
 *
 *   bench_store [ROWS [BATCH [METHOD...]]]
 *
 * ROWS events (default 100000) are stored in transactions of BATCH events
 * (default 5000) by each METHOD (default: all), each in a fresh database
 * created from $BILLING_PG_CONNINFO's server (dropped afterwards):
 *   copy-binary    bs_events_ingest: binary COPY into a staging table, then
 *                  one set-based INSERT ... SELECT (what billingd uses)
 *   copy-text      the same with the text COPY format
 *   multirow-pipe  INSERTs of MULTIROW events each (VALUES lists with
 *                  parameters), pipelined
 *   single-pipe    one INSERT per event, pipelined
 *   single         one INSERT per event, one round trip each
 * Every method checks at the end that exactly ROWS events were stored.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "migrate.h"
#include "store.h"
#include "copy.h"
#include "events.h"

#define MULTIROW 100
#define EVENT_PARAMS 12
#define ACCOUNTS 100
#define TEXT_MAX 48
#define CONNINFO_MAX 2048
/* 2026-01-01T00:00:00Z: the events fill January 2026, one partition. */
#define BASE_TIME INT64_C(1767225600000000000)

/* One event as text parameters for the INSERT methods. */
typedef struct event_text {
    char id[TEXT_MAX];
    char account[TEXT_MAX];
    char resource[TEXT_MAX];
    char start[TEXT_MAX];
    char start_nanos[8];
    char end[TEXT_MAX];
    char end_nanos[8];
} event_text;

typedef struct bench {
    bs_conn *conn;
    const char *method;
    size_t rows;
    size_t batch;
    bs_event *events;  /* one batch */
    event_text *texts; /* one batch */
    const char **params;
    char *multirow_sql;
} bench;

/* The single-row statement: claim the id, then store the event if claimed. */
#define SQL_SINGLE                                                                             \
    "WITH v (event_id, account_id, resource_id, meter, start_time, start_nanos, end_time,"     \
    " end_nanos, quantity, model, region, source) AS (VALUES ($1::text, $2::text, $3::text,"   \
    " $4::text, $5::timestamptz, $6::smallint, $7::timestamptz, $8::smallint, $9::numeric,"    \
    " $10::text, $11::text, $12::text)),"                                                      \
    " ids AS (INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"               \
    "  SELECT event_id, start_time, billing.event_fingerprint(account_id, resource_id, meter," \
    "  start_time, start_nanos, end_time, end_nanos, quantity, model, region) FROM v"          \
    "  ON CONFLICT (id_hash) DO NOTHING RETURNING event_id)"                                   \
    " INSERT INTO billing.usage_events (event_id, account_id, resource_id, meter, start_time," \
    " start_nanos, end_time, end_nanos, quantity, model, region, source)"                      \
    " SELECT v.* FROM v JOIN ids USING (event_id)"

static const char *const meters[4] = {"gpu", "gpuless", "storage", "traffic"};

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what, const bs_error *err)
{
    fprintf(stderr, "bench_store: %s%s%s\n", what, err != NULL ? ": " : "",
            err != NULL ? err->message : "");
    exit(1);
}

/* Event @i of the run: deterministic, unique id, spread over accounts and meters. */
static void make_event(bench *b, size_t slot, size_t i)
{
    event_text *t = &b->texts[slot];
    bs_event *e = &b->events[slot];

    snprintf(t->id, sizeof(t->id), "ev-%zu", i);
    snprintf(t->account, sizeof(t->account), "acct-%zu", i % ACCOUNTS);
    snprintf(t->resource, sizeof(t->resource), "i-%zu", i % (ACCOUNTS * 4));
    memset(e, 0, sizeof(*e));
    e->id = t->id;
    e->account = t->account;
    e->resource = t->resource;
    e->meter = meters[i % 4];
    /* Spread over January: a minute each, overlapping freely. */
    e->start = BASE_TIME + (int64_t)(i % 2600000) * BILLING_NS_PER_SEC + (int64_t)(i % 1000);
    e->end = e->start + 60 * BILLING_NS_PER_SEC;
    e->quantity = i % 4 == 3 ? "1048576" : "8";
    e->model = "RTX4090";
    e->region = "cn-east-1";
    e->source = "bench";
    billing_time_format(bs_time_micros(e->start) * 1000, t->start, sizeof(t->start));
    billing_time_format(bs_time_micros(e->end) * 1000, t->end, sizeof(t->end));
    snprintf(t->start_nanos, sizeof(t->start_nanos), "%d", bs_time_nanos(e->start));
    snprintf(t->end_nanos, sizeof(t->end_nanos), "%d", bs_time_nanos(e->end));
}

/* The 12 text parameters of event @slot, at @out. */
static void event_params(const bench *b, size_t slot, const char **out)
{
    const event_text *t = &b->texts[slot];
    const bs_event *e = &b->events[slot];

    out[0] = e->id;
    out[1] = e->account;
    out[2] = e->resource;
    out[3] = e->meter;
    out[4] = t->start;
    out[5] = t->start_nanos;
    out[6] = t->end;
    out[7] = t->end_nanos;
    out[8] = e->quantity;
    out[9] = e->model;
    out[10] = e->region;
    out[11] = e->source;
}

/*
 * multirow_sql - SQL_SINGLE with MULTIROW rows in its VALUES list. Only
 * placeholders ($13, $14...) are generated; values stay parameters.
 */
static char *multirow_sql(void)
{
    size_t size = sizeof(SQL_SINGLE) + MULTIROW * 200;
    char *sql = malloc(size);
    const char *values_end = strstr(SQL_SINGLE, ")),");
    size_t n;
    int r;
    int p;

    if (sql == NULL || values_end == NULL)
        return NULL;
    n = (size_t)(values_end - SQL_SINGLE) + 1;
    memcpy(sql, SQL_SINGLE, n);
    for (r = 1; r < MULTIROW; r++) {
        n += (size_t)snprintf(sql + n, size - n, ", (");
        for (p = 1; p <= EVENT_PARAMS; p++)
            n += (size_t)snprintf(sql + n, size - n, "%s$%d", p > 1 ? ", " : "",
                                  r * EVENT_PARAMS + p);
        n += (size_t)snprintf(sql + n, size - n, ")");
    }
    snprintf(sql + n, size - n, "%s", values_end + 1);
    return sql;
}

/* ---------------------------------------------------------------------- */
/* Methods: each stores events [first, first + count) in the open transaction */
/* ---------------------------------------------------------------------- */

static void run_copy(bench *b, size_t count, bs_copy_format format)
{
    bs_event_outcome *out = malloc(count * sizeof(*out));
    bs_error err;
    size_t stored = 0;

    if (out == NULL)
        die("out of memory", NULL);
    if (bs_events_ingest(b->conn, b->events, count, format, out, &stored, &err) != BS_OK)
        die("ingest", &err);
    if (stored != count)
        die("ingest stored fewer events than sent", NULL);
    free(out);
}

static void run_single(bench *b, size_t count, int pipelined)
{
    const char *params[EVENT_PARAMS];
    bs_error err;
    size_t i;

    if (pipelined && bs_pipeline_begin(b->conn, &err) != BS_OK)
        die("pipeline", &err);
    for (i = 0; i < count; i++) {
        event_params(b, i, params);
        if (pipelined) {
            if (bs_pipeline_send(b->conn, "single", NULL, EVENT_PARAMS, params, NULL, &err) !=
                BS_OK)
                die("pipelined insert", &err);
        } else {
            PGresult *res =
                bs_query_prepared(b->conn, "single", SQL_SINGLE, EVENT_PARAMS, params, &err);

            if (res == NULL)
                die("insert", &err);
            PQclear(res);
        }
    }
    if (pipelined && bs_pipeline_end(b->conn, &err) != BS_OK)
        die("pipeline", &err);
}

static void run_multirow(bench *b, size_t count)
{
    bs_error err;
    size_t i;

    if (count % MULTIROW != 0)
        die("BATCH must be a multiple of 100 for multirow-pipe", NULL);
    for (i = 0; i < count; i++)
        event_params(b, i, &b->params[i * EVENT_PARAMS]);
    if (bs_pipeline_begin(b->conn, &err) != BS_OK)
        die("pipeline", &err);
    for (i = 0; i < count; i += MULTIROW) {
        if (bs_pipeline_send(b->conn, "multirow", NULL, MULTIROW * EVENT_PARAMS,
                             &b->params[i * EVENT_PARAMS], NULL, &err) != BS_OK)
            die("pipelined multi-row insert", &err);
    }
    if (bs_pipeline_end(b->conn, &err) != BS_OK)
        die("pipeline", &err);
}

static void run_batch(bench *b, size_t first, size_t count)
{
    bs_error err;
    size_t i;

    for (i = 0; i < count; i++)
        make_event(b, i, first + i);
    if (bs_begin(b->conn, &err) != BS_OK)
        die("begin", &err);
    if (strcmp(b->method, "copy-binary") == 0)
        run_copy(b, count, BS_COPY_BINARY);
    else if (strcmp(b->method, "copy-text") == 0)
        run_copy(b, count, BS_COPY_TEXT);
    else if (strcmp(b->method, "multirow-pipe") == 0)
        run_multirow(b, count);
    else if (strcmp(b->method, "single-pipe") == 0)
        run_single(b, count, 1);
    else
        run_single(b, count, 0);
    if (bs_commit(b->conn, &err) != BS_OK)
        die("commit", &err);
}

/* ---------------------------------------------------------------------- */
/* Setup                                                                   */
/* ---------------------------------------------------------------------- */

static bs_conn *connect_to(const char *dbname)
{
    char conninfo[CONNINFO_MAX];
    const char *base = bs_conninfo(NULL);
    bs_error err;
    bs_conn *c;

    /* Later keywords win in a libpq keyword=value string. */
    if (strchr(base, '=') == NULL && base[0] != '\0')
        die("set BILLING_PG_CONNINFO as keyword=value pairs", NULL);
    snprintf(conninfo, sizeof(conninfo), "%s dbname=%s", base, dbname);
    c = bs_connect(conninfo, NULL, &err);
    if (c == NULL)
        die(dbname, &err);
    return c;
}

static void simple(bs_conn *c, const char *sql)
{
    bs_error err;

    if (bs_command(c, sql, 0, NULL, NULL, &err) != BS_OK)
        die(sql, &err);
}

/* A fresh migrated database named after the method (names are ours, never input). */
static bs_conn *fresh_db(const char *name)
{
    bs_conn *admin = connect_to("postgres");
    char sql[256];
    bs_error err;
    bs_conn *c;
    int i;

    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    simple(admin, sql);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    simple(admin, sql);
    bs_close(admin);
    c = connect_to(name);
    if (bs_migrate(c, 0, NULL, NULL, NULL, &err) != BS_OK)
        die("migrate", &err);
    simple(c, "SELECT billing.ensure_event_partitions('2026-01-01', '2026-02-01')");
    for (i = 0; i < ACCOUNTS; i++) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO billing.accounts (id, currency) VALUES ('acct-%d', 'CNY')", i);
        simple(c, sql);
    }
    return c;
}

static void drop_db(const char *name)
{
    bs_conn *admin = connect_to("postgres");
    char sql[256];

    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    simple(admin, sql);
    bs_close(admin);
}

static void check_stored(bench *b)
{
    bs_error err;
    PGresult *res = bs_query(b->conn, "SELECT count(*) FROM billing.usage_events", 0, NULL, &err);

    if (res == NULL)
        die("count", &err);
    if (strtoull(PQgetvalue(res, 0, 0), NULL, 10) != b->rows)
        die("the database holds another number of events than was sent", NULL);
    PQclear(res);
}

static void run_method(bench *b, const char *method)
{
    char dbname[64];
    bs_error err;
    int64_t t0;
    int64_t ns;
    size_t first;
    size_t count;
    const char *dash;
    size_t n;

    /* Database name: the method without its dash ("copybinary"). */
    dash = strchr(method, '-');
    n = dash != NULL ? (size_t)(dash - method) : strlen(method);
    snprintf(dbname, sizeof(dbname), "bench_store_%ld_%.*s%s", (long)getpid(), (int)n, method,
             dash != NULL ? dash + 1 : "");
    b->method = method;
    b->conn = fresh_db(dbname);
    if (bs_prepare(b->conn, "single", SQL_SINGLE, EVENT_PARAMS, &err) != BS_OK ||
        bs_prepare(b->conn, "multirow", b->multirow_sql, MULTIROW * EVENT_PARAMS, &err) != BS_OK)
        die("prepare", &err);
    t0 = now_ns();
    for (first = 0; first < b->rows; first += count) {
        count = b->rows - first < b->batch ? b->rows - first : b->batch;
        run_batch(b, first, count);
    }
    ns = now_ns() - t0;
    check_stored(b);
    printf("%-14s %10zu rows %8" PRId64 " ms %10" PRId64 " rows/s\n", method, b->rows, ns / 1000000,
           ns > 0 ? (int64_t)((uint64_t)b->rows * 1000000000u / (uint64_t)ns) : 0);
    fflush(stdout);
    bs_close(b->conn);
    drop_db(dbname);
}

static size_t arg_size(const char *s, size_t dflt, size_t max)
{
    char *end;
    unsigned long long v;

    if (s == NULL)
        return dflt;
    v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || v == 0 || v > max)
        die("ROWS and BATCH must be positive integers (BATCH at most 100000)", NULL);
    return (size_t)v;
}

static int known_method(const char *name, const char *const *all, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (strcmp(name, all[i]) == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const all[] = {"copy-binary", "copy-text", "multirow-pipe", "single-pipe",
                                      "single"};
    bench b;
    int i;

    memset(&b, 0, sizeof(b));
    b.rows = arg_size(argc > 1 ? argv[1] : NULL, 100000, 100000000);
    b.batch = arg_size(argc > 2 ? argv[2] : NULL, 5000, BS_EVENTS_BATCH_MAX);
    b.events = calloc(b.batch, sizeof(*b.events));
    b.texts = calloc(b.batch, sizeof(*b.texts));
    b.params = calloc(b.batch * EVENT_PARAMS, sizeof(*b.params));
    b.multirow_sql = multirow_sql();
    if (b.events == NULL || b.texts == NULL || b.params == NULL || b.multirow_sql == NULL)
        die("out of memory", NULL);
    for (i = 3; i < argc; i++) {
        if (!known_method(argv[i], all, sizeof(all) / sizeof(all[0])))
            die(argv[i], NULL);
    }
    printf("%zu events in transactions of %zu, %d accounts, one monthly partition\n", b.rows,
           b.batch, ACCOUNTS);
    for (i = 3; i < argc; i++)
        run_method(&b, argv[i]);
    for (i = 0; argc <= 3 && i < (int)(sizeof(all) / sizeof(all[0])); i++)
        run_method(&b, all[i]);
    free(b.events);
    free(b.texts);
    free(b.params);
    free(b.multirow_sql);
    return 0;
}
