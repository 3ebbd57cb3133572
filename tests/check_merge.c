/*
 * check_merge.c - billing_rater_merge (billing.h), on which
 * `billing rate -j N` relies: raters given the parts of a stream, merged,
 * give every invoice one rater given the whole stream gives, whatever the
 * cut; an event can still be taken back from the merged rater; and the
 * merge refuses what it cannot do exactly. Through the shared library,
 * as the tool and the store use them.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define N_EVENTS 300
#define N_ACCOUNTS 2
#define MAX_PARTS 5

static const char *const accounts[N_ACCOUNTS] = {"acct-sh", "acct-utc"};
static billing_zone *zones[N_ACCOUNTS];
static billing_catalog *cat;
static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

/* tu_gpu_cloud with two accounts, one of them with a subscription (included usage lines). */
static void setup(void)
{
    char err[256];
    int i;

    zones[0] = tu_zone("Asia/Shanghai");
    zones[1] = billing_zone_new_utc();
    cat = tu_gpu_cloud();
    for (i = 0; i < N_ACCOUNTS; i++)
        tu_account(cat, accounts[i], zones[i], "0.06");
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "sub-1", "acct-sh", "r0", "rtx-monthly",
                                                      tu_time("2026-01-10T00:00:00Z"), 2, NULL, err,
                                                      sizeof(err)),
                     BILLING_OK);
}

static void teardown(void)
{
    int i;

    billing_catalog_destroy(cat);
    for (i = 0; i < N_ACCOUNTS; i++)
        billing_zone_destroy(zones[i]);
}

/* Event @i of the stream into @ev: any meter, model and length, Jan..Mar 2026. */
static void gen(billing_event *ev, int i)
{
    static const billing_meter meters[4] = {BILLING_METER_GPU, BILLING_METER_GPULESS,
                                            BILLING_METER_STORAGE, BILLING_METER_TRAFFIC};
    billing_time_t start = tu_time("2026-01-01T00:00:00Z") +
                           (billing_time_t)(rnd() % (80ULL * 86400)) * BILLING_NS_PER_SEC;
    char id[32];
    char res[8];
    char qty[32];

    snprintf(id, sizeof(id), "ev-%d", i);
    snprintf(res, sizeof(res), "r%d", (int)(rnd() % 2));
    snprintf(qty, sizeof(qty), "%d.%d", 1 + (int)(rnd() % 8), (int)(rnd() % 10));
    billing_event_reset(ev);
    billing_event_set_id(ev, id);
    billing_event_set_account(ev, accounts[rnd() % N_ACCOUNTS]);
    billing_event_set_resource(ev, res);
    billing_event_set_meter(ev, meters[rnd() % 4]);
    billing_event_set_interval(
        ev, start, start + 1 + (billing_time_t)(rnd() % (40ULL * 86400)) * BILLING_NS_PER_SEC);
    billing_event_set_quantity(ev, qty, NULL, 0);
    billing_event_set_model(ev, (rnd() % 2) ? "RTX4090" : "A100-80G");
    billing_event_set_region(ev, "cn-east-1");
}

static billing_rater *new_rater(void)
{
    billing_rater *r = tu_new_rater(cat);

    ck_assert_int_eq(billing_rater_set_dedupe(r, 0), BILLING_OK);
    return r;
}

/* Every invoice of every account, Jan..May 2026, as one string (caller frees). */
static char *all_invoices(billing_rater *r)
{
    char *out = calloc(1, 1);
    char *one;
    size_t len = 0;
    int a;
    int m;

    for (a = 0; a < N_ACCOUNTS; a++) {
        for (m = 1; m <= 5; m++) {
            one = tu_invoice_text(r, accounts[a], 2026, m);
            ck_assert_ptr_nonnull(one);
            out = realloc(out, len + strlen(one) + 1);
            memcpy(out + len, one, strlen(one) + 1);
            len += strlen(one);
            free(one);
        }
    }
    return out;
}

/* The stream rated by one rater, and by @parts raters (each event to a random one), merged. */
static void check_cut(int parts, uint64_t seed)
{
    billing_rater *whole = new_rater();
    billing_rater *part[MAX_PARTS];
    billing_rater *merged = new_rater();
    billing_event *ev = billing_event_new();
    char err[256];
    char *a;
    char *b;
    int i;

    for (i = 0; i < parts; i++)
        part[i] = new_rater();
    rng_state = seed;
    for (i = 0; i < N_EVENTS; i++) {
        gen(ev, i);
        ck_assert_int_eq(billing_rater_add(whole, ev, err, sizeof(err)), BILLING_OK);
        ck_assert_int_eq(billing_rater_add(part[rnd() % (uint64_t)parts], ev, err, sizeof(err)),
                         BILLING_OK);
    }
    for (i = 0; i < parts; i++)
        ck_assert_int_eq(billing_rater_merge(merged, part[i], err, sizeof(err)), BILLING_OK);
    ck_assert_uint_eq(billing_rater_event_count(merged), N_EVENTS);
    ck_assert_uint_eq(billing_rater_aggregate_count(merged), billing_rater_aggregate_count(whole));
    a = all_invoices(whole);
    b = all_invoices(merged);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    billing_event_destroy(ev);
    billing_rater_destroy(whole);
    billing_rater_destroy(merged);
    for (i = 0; i < parts; i++)
        billing_rater_destroy(part[i]);
}

START_TEST(test_merge_equals_one_rater)
{
    int parts;

    for (parts = 1; parts <= MAX_PARTS; parts++)
        check_cut(parts, UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(parts + _i * 7));
}
END_TEST

/* Taking back every other event from the merged rater leaves what rating only the rest gives. */
START_TEST(test_take_back_after_merge)
{
    billing_rater *rest = new_rater();
    billing_rater *part[2];
    billing_rater *merged = new_rater();
    billing_event *ev = billing_event_new();
    char err[256];
    char *a;
    char *b;
    int i;

    part[0] = new_rater();
    part[1] = new_rater();
    rng_state = 42;
    for (i = 0; i < N_EVENTS; i++) {
        gen(ev, i);
        ck_assert_int_eq(billing_rater_add(part[i % 3 == 0], ev, err, sizeof(err)), BILLING_OK);
        if (i % 2 == 1)
            ck_assert_int_eq(billing_rater_add(rest, ev, err, sizeof(err)), BILLING_OK);
    }
    ck_assert_int_eq(billing_rater_merge(merged, part[0], err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_rater_merge(merged, part[1], err, sizeof(err)), BILLING_OK);
    rng_state = 42;
    for (i = 0; i < N_EVENTS; i++) {
        gen(ev, i);
        if (i % 2 == 0)
            ck_assert_int_eq(billing_rater_take_back(merged, ev, err, sizeof(err)), BILLING_OK);
    }
    a = all_invoices(rest);
    b = all_invoices(merged);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    billing_event_destroy(ev);
    billing_rater_destroy(rest);
    billing_rater_destroy(merged);
    billing_rater_destroy(part[0]);
    billing_rater_destroy(part[1]);
}
END_TEST

START_TEST(test_merge_refuses_dedupe_and_other_catalogs)
{
    billing_rater *a = tu_new_rater(cat);
    billing_rater *b = new_rater();
    billing_catalog *other = tu_gpu_cloud();
    billing_rater *c;
    char err[256];

    tu_account(other, "acct-x", zones[1], "0");
    c = tu_new_rater(other);
    ck_assert_int_eq(billing_rater_set_dedupe(c, 0), BILLING_OK);
    ck_assert_int_eq(billing_rater_merge(b, a, err, sizeof(err)), BILLING_ERR_STATE);
    ck_assert_int_eq(billing_rater_merge(b, c, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rater_merge(NULL, b, err, sizeof(err)), BILLING_ERR_INVALID);
    billing_rater_destroy(a);
    billing_rater_destroy(b);
    billing_rater_destroy(c);
    billing_catalog_destroy(other);
}
END_TEST

/*
 * billing_rater_credit_issued's stated checks, through the public API: a
 * NULL rater or rows are refused (not a crash), and an unknown account,
 * a month out of range or an amount that is not an integer give nothing.
 */
START_TEST(test_credit_issued_refusals)
{
    billing_rater *r = new_rater();
    billing_issued_row row = {2026, 3, NULL, "1200"};
    char err[256];

    ck_assert_int_eq(billing_rater_credit_issued(NULL, "acct-sh", 1, &row, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rater_credit_issued(r, "acct-sh", 1, NULL, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rater_credit_issued(r, "nobody", 1, &row, err, sizeof(err)),
                     BILLING_ERR_UNKNOWN_ACCOUNT);
    row.month = 13;
    ck_assert_int_eq(billing_rater_credit_issued(r, "acct-sh", 1, &row, err, sizeof(err)),
                     BILLING_ERR_RANGE);
    row.month = 3;
    row.amount = "12.5";
    ck_assert_int_eq(billing_rater_credit_issued(r, "acct-sh", 1, &row, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "12.5"));
    row.amount = "1200";
    ck_assert_int_eq(billing_rater_credit_issued(r, "acct-sh", 1, &row, err, sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_rater_credit_issued(r, "acct-sh", 0, NULL, err, sizeof(err)),
                     BILLING_OK);
    billing_rater_destroy(r);
}
END_TEST

static Suite *merge_suite(void)
{
    Suite *s = suite_create("merge");
    TCase *tc = tcase_create("merge");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_merge_equals_one_rater, 0, 4);
    tcase_add_test(tc, test_take_back_after_merge);
    tcase_add_test(tc, test_merge_refuses_dedupe_and_other_catalogs);
    tcase_add_test(tc, test_credit_issued_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(merge_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
