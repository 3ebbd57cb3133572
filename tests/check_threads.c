/*
 * check_threads.c - the thread-safety rule of billing.h, as an embedder
 * relies on it: one catalog, frozen, shared read-only by several threads,
 * each rating into its own rater (and computing invoices, balances and
 * exhaustion instants) gives exactly what one thread gives.
 *
 * The catalog is the shipped example (examples/gpu-cloud: subscriptions,
 * trial grants, four accounts in Asia/Shanghai) loaded through
 * libbilling-config; the events are generated, the same in every thread
 * but in a different order per thread (the result must not depend on it).
 *
 * Threads start together on a barrier, so that they rate at the same time.
 * `make check-helgrind` (tests/Makefile.am) runs this suite under
 * valgrind's helgrind, which reports any unsynchronised access to shared
 * memory; ThreadSanitizer builds (CFLAGS=-fsanitize=thread, without
 * --enable-sanitizers) run it as is.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <billing/billing_config.h>

#include "testutil.h"

#define N_THREADS 4
#define ERR_MAX 512

/* Events per run: enough to touch every account, meter and month; fewer under valgrind. */
static int n_events(void)
{
    const char *v = getenv("BILLING_THREADS_EVENTS");

    return v != NULL && atoi(v) > 0 ? atoi(v) : 3000;
}

static const char *const accounts[] = {"lab-a", "new-d", "student-b", "team-c"};
#define N_ACCOUNTS (sizeof(accounts) / sizeof(accounts[0]))

static billing_catalog *shared_cat;
static billing_config_zones *shared_zones;
static pthread_barrier_t start_line;

/* Event @i, the same in every thread: the subscribed resources i-a1 and i-c1 included. */
static void fill(billing_event *ev, int i)
{
    static const billing_meter meters[] = {BILLING_METER_GPU, BILLING_METER_GPULESS,
                                           BILLING_METER_STORAGE, BILLING_METER_TRAFFIC};
    static const char *const resources[N_ACCOUNTS][2] = {
        {"i-a1", "d-a1"}, {"i-d1", "d-d1"}, {"i-b1", "d-b1"}, {"i-c1", "d-c1"}};
    /* From 2026-01-01T00:00:00+08:00, one event every 17 minutes: 3000 reach February. */
    billing_time_t start =
        tu_time("2026-01-01T00:00:00+08:00") + (billing_time_t)i * 17 * 60 * BILLING_NS_PER_SEC;
    size_t a = (size_t)i % N_ACCOUNTS;
    billing_meter meter = meters[(i / 4) % 4];
    char id[32];
    char qty[32];
    char err[ERR_MAX];

    snprintf(id, sizeof(id), "ev-%06d", i);
    snprintf(qty, sizeof(qty), "%d.%03d", 1 + i % 8, (i * 7) % 1000);
    billing_event_reset(ev);
    ck_assert_int_eq(billing_event_set_id(ev, id), BILLING_OK);
    ck_assert_int_eq(billing_event_set_account(ev, accounts[a]), BILLING_OK);
    ck_assert_int_eq(billing_event_set_resource(ev, resources[a][meter == BILLING_METER_STORAGE]),
                     BILLING_OK);
    ck_assert_int_eq(billing_event_set_meter(ev, meter), BILLING_OK);
    billing_event_set_interval(ev, start, start + 3600 * BILLING_NS_PER_SEC);
    ck_assert_int_eq(billing_event_set_quantity(ev, qty, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_event_set_model(ev, i % 3 == 0 ? "A100-80G" : "RTX4090"), BILLING_OK);
    ck_assert_int_eq(billing_event_set_region(ev, "cn-east-1"), BILLING_OK);
}

/* Append @s to the growing string *@out. */
static void append(char **out, size_t *len, const char *s)
{
    size_t n = strlen(s);
    char *p = realloc(*out, *len + n + 1);

    ck_assert_ptr_nonnull(p);
    memcpy(p + *len, s, n + 1);
    *out = p;
    *len += n;
}

/* Everything a rater says about one account: invoices, balance, exhaustion. */
static void describe_account(billing_rater *r, billing_event *burn, const char *acct, char **out,
                             size_t *len)
{
    billing_months *months = NULL;
    const billing_event *burning[1] = {burn};
    billing_time_t now = tu_time("2026-01-20T12:00:00+08:00");
    billing_time_t when = 0;
    char line[256];
    char balance[64];
    char err[ERR_MAX];
    char *text;
    size_t i;

    ck_assert_int_eq(billing_rater_months(r, acct, &months, err, sizeof(err)), BILLING_OK);
    for (i = 0; i < billing_months_count(months); i++) {
        text = tu_invoice_text(r, acct, billing_months_year(months, i),
                               billing_months_month(months, i));
        ck_assert_ptr_nonnull(text);
        append(out, len, text);
        free(text);
    }
    billing_months_destroy(months);
    ck_assert_int_eq(billing_rater_credit_balance(r, acct, now, balance, sizeof(balance)),
                     BILLING_OK);
    ck_assert_int_eq(
        billing_rater_credit_exhaustion(r, acct, now, burning, 1, &when, err, sizeof(err)),
        BILLING_OK);
    snprintf(line, sizeof(line), "%s balance %s exhausted %lld\n", acct, balance, (long long)when);
    append(out, len, line);
}

/* Rate every event into a new rater of the shared catalog, in an order set by @seed. */
static char *rate_and_describe(unsigned seed)
{
    char err[ERR_MAX] = "";
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    int n = n_events();
    char *out = NULL;
    size_t len = 0;
    billing_status st;
    size_t a;
    int k;
    int i;

    ck_assert_msg(billing_rater_new(shared_cat, &r, err, sizeof(err)) == BILLING_OK, "%s", err);
    ck_assert_ptr_nonnull(ev);
    for (k = 0; k < n; k++) {
        /* A permutation of 0..n-1: i = (k * step + seed) mod n, step odd and prime to n. */
        i = (int)(((long long)k * 7919 + seed) % n);
        fill(ev, i);
        st = billing_rater_add(r, ev, err, sizeof(err));
        ck_assert_msg(st == BILLING_OK, "event %d: %s", i, err);
    }
    ck_assert_uint_eq(billing_rater_event_count(r), (uint64_t)n);
    for (a = 0; a < N_ACCOUNTS; a++) {
        fill(ev, (int)a); /* what burns: the account's first resource, as in event a */
        describe_account(r, ev, accounts[a], &out, &len);
    }
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    return out;
}

static void *thread_main(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    int rc = pthread_barrier_wait(&start_line);

    ck_assert(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
    return rate_and_describe(seed);
}

static void setup(void)
{
    const char *src = getenv("top_srcdir");
    char pb[512];
    char ac[512];
    char err[ERR_MAX] = "";
    billing_rater *first;

    snprintf(pb, sizeof(pb), "%s/examples/gpu-cloud/pricebook.json", src ? src : "..");
    snprintf(ac, sizeof(ac), "%s/examples/gpu-cloud/accounts.json", src ? src : "..");
    shared_zones = billing_config_zones_new();
    ck_assert_ptr_nonnull(shared_zones);
    ck_assert_msg(billing_config_catalog_load(pb, ac, shared_zones, &shared_cat, err,
                                              sizeof(err)) == BILLING_OK,
                  "%s", err);
    /* The first rater freezes the catalog: done before any thread reads it (billing.h). */
    billing_rater_new(shared_cat, &first, err, sizeof(err));
    ck_assert_msg(first != NULL, "%s", err);
    billing_rater_destroy(first);
}

static void teardown(void)
{
    billing_catalog_destroy(shared_cat);
    billing_config_zones_destroy(shared_zones);
}

/*
 * N_THREADS threads, each its own rater and its own order of the same
 * events, all against the one catalog at once: each result equals the
 * result of one thread alone.
 */
START_TEST(test_threads_match_one_thread)
{
    pthread_t tid[N_THREADS];
    void *result[N_THREADS];
    char *reference = rate_and_describe(0);
    size_t i;

    ck_assert_int_eq(pthread_barrier_init(&start_line, NULL, N_THREADS), 0);
    for (i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&tid[i], NULL, thread_main, (void *)(i * 131 + 1)), 0);
    for (i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_join(tid[i], &result[i]), 0);
    pthread_barrier_destroy(&start_line);
    ck_assert_ptr_nonnull(strstr(reference, "lab-a 2026-01 CNY"));
    for (i = 0; i < N_THREADS; i++) {
        ck_assert_ptr_nonnull(result[i]);
        ck_assert_msg(strcmp(reference, result[i]) == 0, "thread %zu differs from one thread", i);
        free(result[i]);
    }
    free(reference);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("shared catalog");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_threads_match_one_thread);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
