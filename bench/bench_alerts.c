/*
 * bench_alerts.c - the cost of billingd's credit alert check
 * (billingd/alertcheck.c) in the ingest pipeline: ACCOUNTS trial accounts
 * (10.00 CNY each) run one RTX 4090 for HOURS hourly records (0.60 an
 * hour: every threshold crossed), interleaved by hour as a cloud's meters
 * report them, ingested as protobuf in batches of BATCH, with the check
 * in each batch's transaction ("on"), the check with the accounts'
 * credit states kept between batches as billingd keeps them
 * (alerts.cache_accounts: "cached"), or without a check ("off").
 *
 * Usage: bench_alerts on|cached|off DBNAME [ACCOUNTS [HOURS [BATCH [STORED]]]]
 *        (defaults 1000 24 5000 0; DBNAME is created and must not exist;
 *        BILLING_PG_CONNINFO names the server; top_srcdir the example)
 * STORED other trial accounts ("s-00000"...) with 10 hourly records each
 * are stored first, unmeasured: the check's cost must not grow with them
 * (issue 28), only with the accounts a batch touches.
 * Prints the records, alerts, wall time, this process's CPU (user+sys),
 * the PostgreSQL backend's CPU (from /proc, same machine) and the time of
 * the check per batch (median and max, ms; "on" and "cached"), and with
 * "cached" how many accounts were checked from their state (fast) and
 * walked (warmed).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "alertcheck.h"
#include "dbcatalog.h"
#include "ingest.h"
#include "load.h"
#include "migrate.h"

#define MSG 512
/* 2026-01-11T00:00:00Z, inside the trials. */
#define T0 INT64_C(1768089600)

static const int pcts[] = {50, 80, 100};

/* Records of the stored accounts per account (STORED). */
#define STORED_HOURS 10

typedef struct bench {
    bs_catalog *cat;
    bd_alert_cache *cache; /* "cached" */
    size_t alerts;
    double *check_ms; /* per batch */
    size_t checks;
    size_t checks_cap;
} bench;

static double now_s(void);

static int count(void *arg, const bd_crossing *x)
{
    (void)x;
    ((bench *)arg)->alerts++;
    return 0;
}

static bs_status hook(void *arg, bs_conn *c, const bs_record *recs, const bs_record_result *results,
                      size_t n, bs_error *err)
{
    bench *b = arg;
    double t = now_s();
    bs_status st =
        bd_alerts_check_cached(b->cache, c, b->cat, pcts, 3, recs, results, n, count, b, err);

    /* A retried batch overwrites its own slot: one figure per batch. */
    if (b->checks < b->checks_cap)
        b->check_ms[b->checks] = (now_s() - t) * 1000;
    return st;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* utime + stime of process @pid in seconds (fields 14 and 15 of /proc/PID/stat). */
static double proc_cpu_s(int pid)
{
    char path[64];
    char buf[1024];
    unsigned long ut = 0;
    unsigned long st = 0;
    char *p;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (f == NULL || fgets(buf, sizeof(buf), f) == NULL) {
        if (f != NULL)
            fclose(f);
        return 0;
    }
    fclose(f);
    p = strrchr(buf, ')');
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void die(const char *what, const bs_error *err)
{
    fprintf(stderr, "bench_alerts: %s: %s\n", what, err != NULL ? err->message : "failed");
    exit(1);
}

/* One trial account (10.00 CNY, January 2026) named @prefix-@i, as JSON. */
static void account(FILE *f, const char *prefix, int i, int first)
{
    fprintf(f,
            "%s{\"id\": \"%s-%05d\", \"currency\": \"CNY\", \"time_zone\": "
            "\"Asia/Shanghai\", \"tax_rate\": \"0\"}",
            first ? "" : ",", prefix, i);
}

static void grant(FILE *f, const char *prefix, int i, int first)
{
    fprintf(f,
            "%s{\"id\": \"trial-%s-%05d\", \"account\": \"%s-%05d\", \"amount\": \"10.00\", "
            "\"granted_at\": \"2026-01-10T00:00:00Z\", \"expires_at\": "
            "\"2026-02-10T00:00:00Z\", \"applies_to\": [\"usage\"], \"priority\": 0}",
            first ? "" : ",", prefix, i, prefix, i);
}

/* @n trial accounts "b-..." and @stored "s-...", as an accounts file at @path. */
static void write_accounts(const char *path, int n, int stored)
{
    FILE *f = fopen(path, "w");
    int i;

    if (f == NULL)
        die(path, NULL);
    fputs("{\"accounts\": [", f);
    for (i = 0; i < n; i++)
        account(f, "b", i, i == 0);
    for (i = 0; i < stored; i++)
        account(f, "s", i, n == 0 && i == 0);
    fputs("], \"subscriptions\": [], \"grants\": [", f);
    for (i = 0; i < n; i++)
        grant(f, "b", i, i == 0);
    for (i = 0; i < stored; i++)
        grant(f, "s", i, n == 0 && i == 0);
    fputs("]}\n", f);
    fclose(f);
}

static bs_conn *fresh_db(const char *name, int accounts, int stored)
{
    char conninfo[1024];
    char sql[256];
    char book[1024];
    char path[256];
    const char *top = getenv("top_srcdir");
    bs_load_counts k;
    bs_error err;
    bs_conn *admin = bs_connect(bs_conninfo(NULL), NULL, &err);
    bs_conn *c;

    if (admin == NULL)
        die("connect", &err);
    snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\"", name);
    if (bs_command(admin, sql, 0, NULL, NULL, &err) != BS_OK)
        die(sql, &err);
    bs_close(admin);
    snprintf(conninfo, sizeof(conninfo), "%s dbname=%s", bs_conninfo(NULL), name);
    c = bs_connect(conninfo, NULL, &err);
    if (c == NULL || bs_migrate(c, 0, NULL, NULL, NULL, &err) != BS_OK)
        die("migrate", &err);
    snprintf(book, sizeof(book), "%s/examples/gpu-cloud/pricebook.json", top ? top : "..");
    snprintf(path, sizeof(path), "bench_alerts-%d.json", (int)getpid());
    write_accounts(path, accounts, stored);
    if (bs_load_catalog(c, "gpu", book, path, &k, &err) != BS_OK)
        die("load", &err);
    remove(path);
    return c;
}

/* Record @i: hour i / accounts of account @who-(i % accounts), as protobuf into @buf. */
static size_t make_record(billing_event *ev, const char *who, int i, int accounts,
                          unsigned char *buf)
{
    char id[32];
    char account[16];
    billing_time_t start = (T0 + (int64_t)(i / accounts) * 3600) * BILLING_NS_PER_SEC;
    size_t len = 0;

    snprintf(id, sizeof(id), "%s-e-%d", who, i);
    snprintf(account, sizeof(account), "%s-%05d", who, i % accounts);
    billing_event_reset(ev);
    billing_event_set_id(ev, id);
    billing_event_set_account(ev, account);
    billing_event_set_resource(ev, account);
    billing_event_set_meter(ev, BILLING_METER_GPU);
    billing_event_set_interval(ev, start, start + 3600 * BILLING_NS_PER_SEC);
    billing_event_set_quantity(ev, "1", NULL, 0);
    billing_event_set_model(ev, "RTX4090");
    billing_event_set_region(ev, "cn-east-1");
    billing_event_encode(ev, buf, BILLING_EVENT_WIRE_MAX, &len);
    return len;
}

/* Store STORED_HOURS records of each of @stored accounts "s-...", without the check. */
static void store_others(bs_catalog *cat, bs_conn *c, int stored, unsigned char *bufs,
                         bs_record *recs, bs_record_result *res, size_t room)
{
    billing_event *ev = billing_event_new();
    bs_ingest *in = bs_ingest_new(cat, NULL);
    size_t n = (size_t)stored * STORED_HOURS;
    size_t i;
    size_t m;
    size_t j;
    bs_error err;

    if (ev == NULL || in == NULL)
        die("out of memory", NULL);
    for (i = 0; i < n; i += m) {
        m = n - i < room ? n - i : room;
        for (j = 0; j < m; j++) {
            memset(&recs[j], 0, sizeof(recs[j]));
            recs[j].data = bufs + j * BILLING_EVENT_WIRE_MAX;
            recs[j].len =
                make_record(ev, "s", (int)(i + j), stored, bufs + j * BILLING_EVENT_WIRE_MAX);
            recs[j].format = BS_RECORD_PROTOBUF;
            recs[j].source = "bench";
        }
        if (bs_ingest_batch(in, c, recs, m, NULL, 0, 0, res, NULL, &err) != BS_OK)
            die("stored batch", &err);
    }
    bs_ingest_free(in);
    billing_event_destroy(ev);
}

static int ms_cmp(const void *x, const void *y)
{
    double a = *(const double *)x;
    double b = *(const double *)y;

    return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
    int accounts = argc > 3 ? atoi(argv[3]) : 1000;
    int hours = argc > 4 ? atoi(argv[4]) : 24;
    size_t batch = argc > 5 ? (size_t)atol(argv[5]) : 5000;
    int stored = argc > 6 ? atoi(argv[6]) : 0;
    size_t n = (size_t)accounts * (size_t)hours;
    unsigned char *bufs;
    bs_record *recs;
    bs_record_result *res;
    billing_event *ev = billing_event_new();
    bench b;
    bd_alert_cache_stats cs;
    bs_conn *c;
    bs_ingest *in;
    bs_error err;
    bs_status st;
    size_t i;
    size_t m;
    double wall;
    double cpu;
    double pg;

    if (argc < 3 ||
        (strcmp(argv[1], "on") != 0 && strcmp(argv[1], "off") != 0 &&
         strcmp(argv[1], "cached") != 0) ||
        accounts < 1 || hours < 1 || batch < 1 || batch > BS_INGEST_BATCH_MAX || stored < 0) {
        fputs("usage: bench_alerts on|cached|off DBNAME [ACCOUNTS [HOURS [BATCH [STORED]]]]\n",
              stderr);
        return 2;
    }
    bufs = malloc(n * BILLING_EVENT_WIRE_MAX);
    recs = calloc(n, sizeof(*recs));
    res = calloc(n, sizeof(*res));
    if (bufs == NULL || recs == NULL || res == NULL || ev == NULL)
        die("out of memory", NULL);
    c = fresh_db(argv[2], accounts, stored);
    memset(&b, 0, sizeof(b));
    b.cat = bs_catalog_read(c, NULL, &err);
    if (b.cat == NULL)
        die("catalog", &err);
    b.checks_cap = n / batch + 1;
    b.check_ms = calloc(b.checks_cap, sizeof(*b.check_ms));
    if (b.check_ms == NULL)
        die("out of memory", NULL);
    store_others(b.cat, c, stored, bufs, recs, res, n < batch ? n : batch);
    for (i = 0; i < n; i++) {
        recs[i].data = bufs + i * BILLING_EVENT_WIRE_MAX;
        recs[i].len = make_record(ev, "b", (int)i, accounts, bufs + i * BILLING_EVENT_WIRE_MAX);
        recs[i].format = BS_RECORD_PROTOBUF;
        recs[i].source = "bench";
    }
    in = bs_ingest_new(b.cat, NULL);
    if (strcmp(argv[1], "off") != 0)
        bs_ingest_set_hook(in, hook, &b);
    if (strcmp(argv[1], "cached") == 0)
        b.cache = bd_alert_cache_new(BD_CACHE_ACCOUNTS_DEFAULT);
    wall = now_s();
    cpu = cpu_s();
    pg = proc_cpu_s(PQbackendPID(bs_pg(c)));
    for (i = 0; i < n; i += m) {
        m = n - i < batch ? n - i : batch;
        st = bs_ingest_batch(in, c, &recs[i], m, NULL, 0, 0, &res[i], NULL, &err);
        bd_alert_cache_done(b.cache, c, st == BS_OK);
        if (st != BS_OK)
            die("batch", &err);
        b.checks += b.checks < b.checks_cap;
    }
    wall = now_s() - wall;
    cpu = cpu_s() - cpu;
    pg = proc_cpu_s(PQbackendPID(bs_pg(c))) - pg;
    qsort(b.check_ms, b.checks, sizeof(*b.check_ms), ms_cmp);
    printf("alerts=%s records=%zu accounts=%d stored_accounts=%d batch=%zu alerts_raised=%zu "
           "wall_s=%.2f cpu_s=%.2f pg_backend_cpu_s=%.2f check_ms_p50=%.1f check_ms_max=%.1f\n",
           argv[1], n, accounts, stored, batch, b.alerts, wall, cpu, pg,
           b.checks > 0 ? b.check_ms[b.checks / 2] : 0.0,
           b.checks > 0 ? b.check_ms[b.checks - 1] : 0.0);
    if (b.cache != NULL) {
        bd_alert_cache_stats_get(b.cache, &cs);
        printf("cache: fast=%" PRIu64 " warmed=%" PRIu64 " stale=%" PRIu64 " hits=%" PRIu64
               " accounts=%zu\n",
               cs.fast, cs.warmed, cs.stale, cs.hits, cs.accounts);
        bd_alert_cache_free(b.cache);
    }
    free(b.check_ms);
    bs_ingest_free(in);
    bs_catalog_free(b.cat);
    bs_close(c);
    billing_event_destroy(ev);
    free(bufs);
    free(recs);
    free(res);
    return 0;
}
