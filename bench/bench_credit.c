/*
 * bench_credit.c - the library's share of billingd's credit alert check
 * (billingd/alertcheck.c), without PostgreSQL or Kafka: the calls it makes
 * on a rater, replayed on the business's workload of bench/billingd.sh
 * (ACCOUNTS accounts of gen_events --accounts-json --grants 10.00 --plans
 * 10: a 10.00 CNY trial for January, every tenth a monthly RTX 4090 plan;
 * the example price book's rates; Asia/Shanghai) and bench_rate's records
 * in random order.
 *
 * Usage: bench_credit [ACCOUNTS [EVENTS [BATCH]]]   (defaults 200 60000 5000)
 *
 *   1. rating: every record added (billing_rater_add), in batches of BATCH;
 *   2. balances: after each batch, one exact balance
 *      (billing_rater_credit_balance_q) per account the batch touched, at
 *      its latest record's end, as the check reads it once per batch;
 *   3. crossings: per account, its records in time order, the first fifth
 *      held by a rater of its own (dedupe off), the next SPAN (100) the
 *      span (about where the trial runs out);
 *      three levels between the balances before and after the span (a
 *      quarter, a half and three quarters of the fall, to the minor unit),
 *      each solved by billing_rater_credit_crossing.
 * Prints the calls, each phase's CPU seconds and a digest of every
 * balance and crossing (equal for two builds that give the same answers).
 * For instructions per call, run it under valgrind --tool=callgrind and
 * read the inclusive cost of billing_rater_add,
 * billing_rater_credit_balance_q and billing_rater_credit_crossing
 * (callgrind_annotate --inclusive=yes); LD_LIBRARY_PATH chooses the
 * library (the same program against an older libbilling.so).
 */
#include "config.h"

#include <gmp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "billing.h"
#include "workload.h"

#define MSG 256
/* 2026-01-01T00:00:00+08:00 and 2026-02-01T00:00:00+08:00. */
#define JAN_LOCAL (INT64_C(1767196800) - 8 * 3600)
#define FEB_LOCAL (JAN_LOCAL + INT64_C(31) * 86400)
#define NS BILLING_NS_PER_SEC
/* A sanity cap on the bench's sizes. */
#define MAX_ACCOUNTS 100000
/* The records of a crossing's span. */
#define SPAN 100

static uint64_t rng = UINT64_C(88172645463325252);
/* FNV-1a of every answer. */
static uint64_t digest = UINT64_C(14695981039346656037);

static void mix(const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;

    for (i = 0; i < n; i++) {
        digest ^= b[i];
        digest *= UINT64_C(1099511628211);
    }
}

static void mix_q(const mpq_t q)
{
    char *s = mpq_get_str(NULL, 10, q);

    mix(s, strlen(s));
    free(s);
}

static double cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static billing_zone *shanghai(void)
{
    unsigned char buf[8192];
    billing_zone *z = NULL;
    FILE *f = fopen("/usr/share/zoneinfo/Asia/Shanghai", "rb");
    size_t n;

    if (f == NULL)
        return billing_zone_new_utc();
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    if (billing_zone_new("Asia/Shanghai", buf, n, &z, NULL, 0) != BILLING_OK)
        return billing_zone_new_utc();
    return z;
}

static int check(billing_status st, const char *what, const char *msg)
{
    if (st == BILLING_OK)
        return 0;
    fprintf(stderr, "bench_credit: %s: %s %s\n", what, billing_strerror(st), msg ? msg : "");
    return -1;
}

static billing_catalog *make_catalog(const billing_zone *zone, int accounts)
{
    static const struct {
        billing_meter meter;
        const char *model;
        const char *price;
    } rates[] = {
        {BILLING_METER_GPU, "RTX4090", "0.60"},     {BILLING_METER_GPU, "A100-80G", "1.60"},
        {BILLING_METER_GPULESS, "RTX4090", "0.48"}, {BILLING_METER_GPULESS, "A100-80G", "1.28"},
        {BILLING_METER_STORAGE, "*", "0.20"},       {BILLING_METER_TRAFFIC, "*", "0"}};
    billing_catalog *cat = billing_catalog_new();
    char err[MSG];
    char id[32];
    char sub[32];
    char res[32];
    char grant[32];
    size_t i;
    int a;
    int rc = 0;

    if (cat == NULL)
        return NULL;
    rc |= check(billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, err, sizeof(err)),
                "currency", err);
    rc |= check(billing_catalog_add_price_version(cat, "2026-01", JAN_LOCAL * NS, err, sizeof(err)),
                "version", err);
    for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
        rc |= check(
            billing_catalog_set_rate(cat, "2026-01", rates[i].meter, rates[i].model,
                                     rates[i].meter == BILLING_METER_TRAFFIC ? "*" : "cn-east-1",
                                     rates[i].price, err, sizeof(err)),
            "rate", err);
    rc |= check(billing_catalog_add_plan(cat, "rtx4090x8-monthly", BILLING_PERIOD_MONTH, "RTX4090",
                                         "cn-east-1", 1, err, sizeof(err)),
                "plan", err);
    rc |= check(billing_catalog_set_plan_fee(cat, "2026-01", "rtx4090x8-monthly", "2599.00", err,
                                             sizeof(err)),
                "fee", err);
    for (a = 0; a < accounts && rc == 0; a++) {
        snprintf(id, sizeof(id), "acct-%06d", a);
        snprintf(grant, sizeof(grant), "trial-%06d", a);
        rc |= check(billing_catalog_add_account(cat, id, "CNY", zone, "0.06", err, sizeof(err)),
                    "account", err);
        rc |=
            check(billing_catalog_add_grant(cat, grant, id, "10.00", JAN_LOCAL * NS, FEB_LOCAL * NS,
                                            BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                  "grant", err);
        if (a % 10 == 0) {
            snprintf(sub, sizeof(sub), "plan-%06d", a);
            snprintf(res, sizeof(res), "i-%06d-0", a);
            rc |= check(billing_catalog_add_subscription(cat, sub, id, res, "rtx4090x8-monthly",
                                                         JAN_LOCAL * NS, 1, NULL, err, sizeof(err)),
                        "subscription", err);
        }
    }
    if (rc != 0) {
        billing_catalog_destroy(cat);
        return NULL;
    }
    return cat;
}

static int account_of(const spec *s)
{
    return atoi(s->account + 5);
}

static int by_account_time(const void *x, const void *y)
{
    const spec *a = x;
    const spec *b = y;
    int c = strcmp(a->account, b->account);

    if (c != 0)
        return c;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return strcmp(a->id, b->id);
}

/* Phases 1 and 2: the batches rated, then one balance per account touched. */
static int rate_and_balances(billing_catalog *cat, const spec *specs, long events, long batch,
                             int accounts, long *n_balances, double *t_add, double *t_bal)
{
    char err[MSG];
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    billing_time_t *latest = calloc((size_t)accounts, sizeof(billing_time_t));
    char id[32];
    mpq_t q;
    double t;
    long i;
    long k;
    int a;
    int rc = 0;

    mpq_init(q);
    if (ev == NULL || latest == NULL ||
        check(billing_rater_new(cat, &r, err, sizeof(err)), "rater", err) != 0)
        rc = -1;
    for (i = 0; rc == 0 && i < events; i += batch) {
        t = cpu_s();
        for (k = i; rc == 0 && k < events && k < i + batch; k++) {
            bench_fill_event(ev, &specs[k], specs[k].id);
            rc = check(billing_rater_add(r, ev, err, sizeof(err)), "add", err);
            a = account_of(&specs[k]);
            if (specs[k].end > latest[a])
                latest[a] = specs[k].end;
        }
        *t_add += cpu_s() - t;
        t = cpu_s();
        for (a = 0; rc == 0 && a < accounts; a++) {
            if (latest[a] == 0)
                continue;
            snprintf(id, sizeof(id), "acct-%06d", a);
            rc = check(billing_rater_credit_balance_q(r, id, latest[a], q), "balance", id);
            mix_q(q);
            latest[a] = 0;
            (*n_balances)++;
        }
        *t_bal += cpu_s() - t;
    }
    mpq_clear(q);
    billing_rater_destroy(r);
    billing_event_destroy(ev);
    free(latest);
    return rc;
}

/* Phase 3 for one account's @n records @s in time order. */
static int crossings(billing_catalog *cat, const spec *s, size_t n, long *n_cross, double *t_cross)
{
    char err[MSG];
    billing_rater *r = NULL;
    billing_event **span = calloc(n, sizeof(*span));
    size_t half = n / 5;
    size_t end_i = n - half > SPAN ? half + SPAN : n;
    size_t index;
    size_t i;
    billing_time_t at;
    billing_time_t end = 0;
    mpq_t before;
    mpq_t after;
    mpq_t level;
    mpz_t minor;
    double t;
    int j;
    int rc = 0;

    mpq_inits(before, after, level, NULL);
    mpz_init(minor);
    if (span == NULL || check(billing_rater_new(cat, &r, err, sizeof(err)), "rater", err) != 0)
        rc = -1;
    if (rc == 0)
        billing_rater_set_dedupe(r, 0);
    n = end_i;
    for (i = 0; rc == 0 && i < n; i++) {
        span[i] = billing_event_new();
        if (span[i] == NULL) {
            rc = -1;
            break;
        }
        bench_fill_event(span[i], &s[i], s[i].id);
        if (s[i].end > end)
            end = s[i].end;
        if (i < half)
            rc = check(billing_rater_add(r, span[i], err, sizeof(err)), "add", err);
    }
    if (rc == 0)
        rc = check(billing_rater_credit_balance_q(r, s[0].account, s[half].start, before),
                   "balance", s[0].account);
    for (i = half; rc == 0 && i < n; i++)
        rc = check(billing_rater_add(r, span[i], err, sizeof(err)), "add", err);
    if (rc == 0)
        rc = check(billing_rater_credit_balance_q(r, s[0].account, end, after), "balance",
                   s[0].account);
    for (i = half; rc == 0 && i < n; i++)
        rc = check(billing_rater_take_back(r, span[i], err, sizeof(err)), "take back", err);
    for (j = 1; rc == 0 && j <= 3 && mpq_cmp(after, before) < 0; j++) {
        /* before - (before - after) * j / 4, in whole minor units (cents). */
        mpq_sub(level, before, after);
        mpz_mul_ui(mpq_numref(level), mpq_numref(level), (unsigned long)j * 100);
        mpz_mul_ui(mpq_denref(level), mpq_denref(level), 4);
        mpz_tdiv_q(minor, mpq_numref(level), mpq_denref(level));
        mpq_set_z(level, minor);
        mpz_set_ui(minor, 100);
        mpq_set_den(level, minor);
        mpq_canonicalize(level);
        mpq_sub(level, before, level);
        t = cpu_s();
        rc = check(billing_rater_credit_crossing(
                       r, s[0].account, (const billing_event *const *)&span[half], n - half,
                       s[half].start, level, &index, &at, err, sizeof(err)),
                   "crossing", err);
        *t_cross += cpu_s() - t;
        mix(&at, sizeof(at));
        mix(&index, sizeof(index));
        (*n_cross)++;
    }
    for (i = 0; span != NULL && i < n; i++)
        billing_event_destroy(span[i]);
    free(span);
    billing_rater_destroy(r);
    mpq_clears(before, after, level, NULL);
    mpz_clear(minor);
    return rc;
}

int main(int argc, char **argv)
{
    int accounts = argc > 1 ? atoi(argv[1]) : 200;
    long events = argc > 2 ? atol(argv[2]) : 60000;
    long batch = argc > 3 ? atol(argv[3]) : 5000;
    billing_zone *zone = shanghai();
    billing_catalog *cat = NULL;
    spec *specs = NULL;
    long n_bal = 0;
    long n_cross = 0;
    double t_add = 0;
    double t_bal = 0;
    double t_cross = 0;
    long i;
    long j;
    int rc = 1;

    if (accounts <= 0 || accounts > MAX_ACCOUNTS || events <= 0 || batch <= 0 || zone == NULL) {
        fprintf(stderr, "usage: bench_credit [ACCOUNTS [EVENTS [BATCH]]]\n");
        goto done;
    }
    specs = calloc((size_t)events, sizeof(spec));
    cat = make_catalog(zone, accounts);
    if (specs == NULL || cat == NULL)
        goto done;
    for (i = 0; i < events; i++) {
        bench_make_spec(&specs[i], &rng, accounts);
        snprintf(specs[i].id, sizeof(specs[i].id), "ev-%ld", i);
    }
    if (rate_and_balances(cat, specs, events, batch, accounts, &n_bal, &t_add, &t_bal) != 0)
        goto done;
    qsort(specs, (size_t)events, sizeof(spec), by_account_time);
    for (i = 0; i < events; i = j) {
        for (j = i; j < events && strcmp(specs[j].account, specs[i].account) == 0; j++)
            ;
        if (j - i >= 4 && crossings(cat, &specs[i], (size_t)(j - i), &n_cross, &t_cross) != 0)
            goto done;
    }
    printf("accounts=%d events=%ld batch=%ld adds=%ld add_s=%.3f balances=%ld balance_s=%.3f "
           "crossings=%ld crossing_s=%.3f digest=%016" PRIx64 "\n",
           accounts, events, batch, events, t_add, n_bal, t_bal, n_cross, t_cross, digest);
    rc = 0;
done:
    free(specs);
    billing_catalog_destroy(cat);
    billing_zone_destroy(zone);
    return rc;
}
