/*
 * bench_catalog.c - catalog scale for embedders (issue 13): a GPU cloud
 * with many registered accounts, most of them idle trial accounts.
 *
 * Builds an accounts file in memory (ACCOUNTS accounts in Asia/Shanghai,
 * each with a 10.00 usage trial grant), then times, on one thread:
 *  1. load: the price book file and the accounts text through
 *     libbilling-config (what `billing rate` and live_cost.c do);
 *  2. freeze: the first billing_rater_new;
 *  3. rate: one 1-hour gpu event per account (dedupe off, as billingd);
 *  4. invoice: each account's January 2026 invoice.
 * and prints the resident memory after each phase and the peak.
 *
 * Usage: bench_catalog PRICEBOOK.json [ACCOUNTS]   (default 1000000)
 * Goal (issue 13): 1 000 000 accounts load in <= 5 s and <= 1 GiB; rating
 * and invoicing one event each take <= 30 s.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <billing/billing_config.h>

#define ERR_MAX 512
#define ACCOUNT_TEXT_MAX 512 /* one account and its grant, as JSON */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Current resident set in MiB (/proc/self/statm), or -1. */
static long rss_mib(void)
{
    long pages = -1;
    long resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

/* CPU time of the process (user + system), in seconds: wall time depends on the machine's load. */
static double cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static long peak_mib(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* The accounts file: @n accounts "u0000001".., each with a trial grant. */
static char *accounts_text(long n, size_t *len)
{
    size_t cap = (size_t)n * 2 * ACCOUNT_TEXT_MAX + 64;
    char *text = malloc(cap);
    size_t at = 0;
    long i;

    if (text == NULL)
        return NULL;
    at += (size_t)snprintf(text + at, cap - at, "{\"accounts\":[");
    for (i = 0; i < n; i++)
        at += (size_t)snprintf(text + at, cap - at,
                               "%s{\"id\":\"u%07ld\",\"currency\":\"CNY\","
                               "\"time_zone\":\"Asia/Shanghai\",\"tax_rate\":\"0.06\"}",
                               i ? "," : "", i);
    at += (size_t)snprintf(text + at, cap - at, "],\"grants\":[");
    for (i = 0; i < n; i++)
        at += (size_t)snprintf(text + at, cap - at,
                               "%s{\"id\":\"trial-u%07ld\",\"account\":\"u%07ld\","
                               "\"amount\":\"10.00\",\"granted_at\":\"2026-01-01T00:00:00+08:00\","
                               "\"expires_at\":\"2026-01-31T00:00:00+08:00\","
                               "\"applies_to\":[\"usage\"]}",
                               i ? "," : "", i, i);
    at += (size_t)snprintf(text + at, cap - at, "]}");
    *len = at;
    return text;
}

static int rate_all(billing_rater *r, long n, char *err)
{
    billing_event *ev = billing_event_new();
    billing_time_t start = INT64_C(1767225600) * BILLING_NS_PER_SEC; /* 2026-01-01T00:00Z */
    billing_status st = BILLING_OK;
    char id[32];
    long i;

    if (ev == NULL)
        return -1;
    for (i = 0; i < n && st == BILLING_OK; i++) {
        billing_event_reset(ev);
        snprintf(id, sizeof(id), "u%07ld", i);
        billing_event_set_account(ev, id);
        billing_event_set_resource(ev, "i-1");
        snprintf(id, sizeof(id), "e%07ld", i);
        billing_event_set_id(ev, id);
        billing_event_set_meter(ev, BILLING_METER_GPU);
        billing_event_set_interval(ev, start + (i % 600) * 3600 * BILLING_NS_PER_SEC,
                                   start + (i % 600 + 1) * 3600 * BILLING_NS_PER_SEC);
        billing_event_set_quantity(ev, "8", err, ERR_MAX);
        billing_event_set_model(ev, "RTX4090");
        billing_event_set_region(ev, "cn-east-1");
        st = billing_rater_add(r, ev, err, ERR_MAX);
    }
    billing_event_destroy(ev);
    return st == BILLING_OK ? 0 : -1;
}

static int invoice_all(billing_rater *r, long n, char *err)
{
    billing_invoice *inv;
    char id[32];
    long i;

    for (i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "u%07ld", i);
        if (billing_rater_invoice(r, id, 2026, 1, &inv, err, ERR_MAX) != BILLING_OK)
            return -1;
        billing_invoice_destroy(inv);
    }
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *cat = billing_catalog_new();
    billing_rater *r = NULL;
    char err[ERR_MAX] = "";
    char *text;
    size_t len = 0;
    long base;
    double t0;
    double t;
    double c0;
    int rc = 1;

    if (argc < 2 || n <= 0 || zones == NULL || cat == NULL) {
        fprintf(stderr, "usage: %s PRICEBOOK.json [ACCOUNTS]\n", argv[0]);
        return 2;
    }
    text = accounts_text(n, &len);
    if (text == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    base = rss_mib();
    printf("accounts %ld, accounts text %.1f MB, RSS before loading %ld MiB\n", n, len / 1e6, base);
    t0 = now_s();
    c0 = cpu_s();
    if (billing_config_pricebook_load(cat, argv[1], err, sizeof(err)) != BILLING_OK ||
        billing_config_accounts_parse(cat, zones, text, len, "accounts", err, sizeof(err)) !=
            BILLING_OK) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    t = now_s();
    free(text);
    text = NULL;
    /* The text was counted in base and is freed now: what remains is the catalog. */
    printf("load     %6.2f s (CPU %6.2f s)  RSS %5ld MiB (catalog %ld MiB; peak %ld MiB)\n", t - t0,
           cpu_s() - c0, rss_mib(), rss_mib() - base + (long)(len >> 20), peak_mib());
    t0 = now_s();
    c0 = cpu_s();
    billing_rater_new(cat, &r, err, sizeof(err));
    if (r == NULL || billing_rater_set_dedupe(r, 0) != BILLING_OK) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    t = now_s();
    printf("freeze   %6.2f s (CPU %6.2f s)  RSS %5ld MiB\n", t - t0, cpu_s() - c0, rss_mib());
    t0 = now_s();
    c0 = cpu_s();
    if (rate_all(r, n, err) != 0) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    t = now_s();
    printf("rate     %6.2f s (CPU %6.2f s)  RSS %5ld MiB  aggregates %zu\n", t - t0, cpu_s() - c0,
           rss_mib(), billing_rater_aggregate_count(r));
    t0 = now_s();
    c0 = cpu_s();
    if (invoice_all(r, n, err) != 0) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    t = now_s();
    printf("invoice  %6.2f s (CPU %6.2f s)  RSS %5ld MiB\n", t - t0, cpu_s() - c0, rss_mib());
    printf("peak RSS %ld MiB\n", peak_mib());
    rc = 0;
out:
    free(text);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
    return rc;
}
