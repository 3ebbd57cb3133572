/*
 * bench_rate.c - throughput of libbilling's rating core: typical GPU-cloud
 * events (gpu, gpuless, storage, traffic over many accounts and
 * resources, one month) rated into per-invoice aggregates on one thread.
 *
 * Prints events/s (building the events included), core events/s and
 * latency percentiles of batches of 1024 events (billing_rater_add only),
 * peak resident memory and the number of aggregates, with dedupe on and
 * off.
 * Usage: bench_rate [EVENTS] [ACCOUNTS] [on|off]  (defaults 5000000, 1000,
 * both dedupe modes; one of them alone for a profile).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "billing.h"
#include "workload.h"

#define BATCH 1024

static uint64_t rng = UINT64_C(88172645463325252);

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long peak_rss_kib(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static billing_catalog *make_catalog(billing_zone *zone, int accounts)
{
    billing_catalog *cat = billing_catalog_new();
    char id[32];
    int i;

    billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, NULL, 0);
    billing_catalog_add_price_version(cat, "v1", 0, NULL, 0);
    billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "RTX4090", "cn-east-1", "0.60", NULL, 0);
    billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "A100-80G", "cn-east-1", "1.60", NULL,
                             0);
    billing_catalog_set_rate(cat, "v1", BILLING_METER_GPULESS, "RTX4090", "cn-east-1", "0.48", NULL,
                             0);
    billing_catalog_set_rate(cat, "v1", BILLING_METER_GPULESS, "A100-80G", "cn-east-1", "1.28",
                             NULL, 0);
    billing_catalog_set_rate(cat, "v1", BILLING_METER_STORAGE, "*", "*", "0.20", NULL, 0);
    for (i = 0; i < accounts; i++) {
        snprintf(id, sizeof(id), "acct-%06d", i);
        billing_catalog_add_account(cat, id, "CNY", zone, "0.06", NULL, 0);
    }
    return cat;
}

/* A pool of distinct event shapes; ids are made unique per event at run time. */
static void make_specs(spec *s, int n, int accounts)
{
    int i;

    for (i = 0; i < n; i++)
        bench_make_spec(&s[i], &rng, accounts);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* Print one line of results; @core is the time spent in billing_rater_add only. */
static void report(billing_rater *r, int dedupe, long events, uint64_t total, uint64_t core,
                   uint64_t *lat, size_t n_lat)
{
    qsort(lat, n_lat, sizeof(uint64_t), cmp_u64);
    printf("dedupe=%s events=%ld seconds=%.3f events/s=%" PRIu64 " core-events/s=%" PRIu64
           " batch%d-latency-us p50=%" PRIu64 " p99=%" PRIu64 " p999=%" PRIu64
           " aggregates=%zu peak-rss-MiB=%ld\n",
           dedupe ? "on " : "off", events, (double)total / 1e9,
           (uint64_t)((double)events * 1e9 / (double)total),
           (uint64_t)((double)events * 1e9 / (double)core), BATCH,
           n_lat ? lat[n_lat / 2] / 1000 : 0, n_lat ? lat[n_lat * 99 / 100] / 1000 : 0,
           n_lat ? lat[n_lat * 999 / 1000] / 1000 : 0, billing_rater_aggregate_count(r),
           peak_rss_kib() / 1024);
}

/*
 * Each batch of events is built first (ids formatted, setters called),
 * then rated: events/s counts both, core-events/s and the batch latency
 * only billing_rater_add.
 */
static int run(billing_catalog *cat, const spec *specs, int n_specs, long events, int dedupe)
{
    char err[256];
    billing_rater *r = NULL;
    billing_event *ev[BATCH];
    uint64_t *lat = malloc(sizeof(uint64_t) * (size_t)(events / BATCH + 1));
    size_t n_lat = 0;
    uint64_t t0;
    uint64_t tb;
    uint64_t core = 0;
    long i;
    long n;
    long k;
    char id[48];
    int rc = 0;

    memset(ev, 0, sizeof(ev));
    for (k = 0; k < BATCH; k++)
        ev[k] = billing_event_new();
    if (billing_rater_new(cat, &r, err, sizeof(err)) != BILLING_OK || ev[BATCH - 1] == NULL ||
        lat == NULL) {
        fprintf(stderr, "bench_rate: setup failed: %s\n", err);
        return 1;
    }
    billing_rater_set_dedupe(r, dedupe);
    t0 = now_ns();
    for (i = 0; i < events && rc == 0; i += n) {
        n = events - i < BATCH ? events - i : BATCH;
        for (k = 0; k < n; k++) {
            snprintf(id, sizeof(id), "ev-%ld", i + k);
            bench_fill_event(ev[k], &specs[(i + k) % n_specs], id);
        }
        tb = now_ns();
        for (k = 0; k < n && rc == 0; k++) {
            if (billing_rater_add(r, ev[k], err, sizeof(err)) != BILLING_OK) {
                fprintf(stderr, "bench_rate: %s\n", err);
                rc = 1;
            }
        }
        tb = now_ns() - tb;
        core += tb;
        if (n == BATCH)
            lat[n_lat++] = tb;
    }
    if (rc == 0)
        report(r, dedupe, events, now_ns() - t0, core, lat, n_lat);
    free(lat);
    for (k = 0; k < BATCH; k++)
        billing_event_destroy(ev[k]);
    billing_rater_destroy(r);
    return rc;
}

int main(int argc, char **argv)
{
    long events = argc > 1 ? atol(argv[1]) : 5000000;
    int accounts = argc > 2 ? atoi(argv[2]) : 1000;
    const char *only = argc > 3 ? argv[3] : "";
    int n_specs = 1 << 16;
    spec *specs = malloc(sizeof(spec) * (size_t)n_specs);
    billing_zone *zone = billing_zone_new_utc();
    billing_catalog *cat;
    int rc;

    if (specs == NULL || zone == NULL || events <= 0 || accounts <= 0)
        return 2;
    cat = make_catalog(zone, accounts);
    make_specs(specs, n_specs, accounts);
    rc = strcmp(only, "on") != 0 ? run(cat, specs, n_specs, events, 0) : 0;
    if (rc == 0 && strcmp(only, "off") != 0)
        rc = run(cat, specs, n_specs, events, 1);
    billing_catalog_destroy(cat);
    billing_zone_destroy(zone);
    free(specs);
    return rc;
}
