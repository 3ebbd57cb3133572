/*
 * check_rater.c - the rater's per-account storage is sized by the
 * accounts it holds, not by the catalog (issue 25: a balance rates one
 * account of a catalog of 10 000 or 1 000 000), and holding many accounts
 * keeps each one's aggregates, month cache and credit memo apart. The
 * rater's private state (rater.h) is read, never written.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rater.h"
#include "testrng.h"
#include "testutil.h"

static billing_zone *shanghai;

static void setup(void)
{
    shanghai = tu_zone("Asia/Shanghai");
}

static void teardown(void)
{
    billing_zone_destroy(shanghai);
}

/* Account @i of the test catalogs. */
static void acct_name(char *buf, size_t size, unsigned i)
{
    snprintf(buf, size, "acct-%06u", i);
}

/* Add account @i with a 50.00 grant valid in 2026. */
static void add_account(billing_catalog *cat, unsigned i)
{
    char id[32];
    char gid[40];
    char err[256];

    acct_name(id, sizeof(id), i);
    tu_account(cat, id, shanghai, "0.06");
    snprintf(gid, sizeof(gid), "g-%s", id);
    ck_assert_msg(billing_catalog_add_grant(cat, gid, id, "50.00", tu_time("2026-01-01T00:00:00Z"),
                                            tu_time("2027-01-01T00:00:00Z"),
                                            BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0,
                                            err, sizeof(err)) == BILLING_OK,
                  "%s", err);
}

/* A catalog of the accounts 0..@n-1 (@only < @n: that account alone). */
static billing_catalog *catalog(unsigned n, unsigned only)
{
    billing_catalog *cat = tu_gpu_cloud();
    unsigned i;

    if (only < n) {
        add_account(cat, only);
        return cat;
    }
    for (i = 0; i < n; i++)
        add_account(cat, i);
    return cat;
}

/* Account @i's events: GPU hours in January and February, their lengths by @i. */
static void add_events(billing_rater *r, unsigned i)
{
    char id[32];
    char eid[48];
    char end[40];

    acct_name(id, sizeof(id), i);
    snprintf(eid, sizeof(eid), "%s-jan", id);
    snprintf(end, sizeof(end), "2026-01-10T%02u:%02u:00+08:00", 1 + i % 20, i % 60);
    TU_ADD(r, eid, id, "i-1", "gpu", "2026-01-10T00:00:00+08:00", end, "8", "RTX4090");
    snprintf(eid, sizeof(eid), "%s-feb", id);
    snprintf(end, sizeof(end), "2026-02-03T%02u:00:00+08:00", 1 + i % 7);
    TU_ADD(r, eid, id, "i-2", "gpu", "2026-02-03T00:00:00+08:00", end, "1", "A100-80G");
}

/* The invoices of January and February and the balance in February, as one string. */
static char *account_text(billing_rater *r, unsigned i)
{
    char id[32];
    char bal[64];
    char *jan;
    char *feb;
    char *out;
    size_t n;

    acct_name(id, sizeof(id), i);
    jan = tu_invoice_text(r, id, 2026, 1);
    feb = tu_invoice_text(r, id, 2026, 2);
    ck_assert_ptr_nonnull(jan);
    ck_assert_ptr_nonnull(feb);
    ck_assert_int_eq(
        billing_rater_credit_balance(r, id, tu_time("2026-02-20T00:00:00Z"), bal, sizeof(bal)),
        BILLING_OK);
    n = strlen(jan) + strlen(feb) + strlen(bal) + 2;
    out = malloc(n);
    ck_assert_ptr_nonnull(out);
    snprintf(out, n, "%s%s%s\n", jan, feb, bal);
    free(jan);
    free(feb);
    return out;
}

/* The text of account @i from a rater over a catalog holding it alone. */
static char *alone_text(unsigned i)
{
    billing_catalog *cat = catalog(i + 1, i);
    billing_rater *r = tu_new_rater(cat);
    char *text;

    add_events(r, i);
    text = account_text(r, i);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    return text;
}

/*
 * Three accounts of a catalog of 200 000 (its first, its middle, its
 * last): the rater's storage holds three, through rating, invoices and
 * balances (credit memos), and each answer equals that of a catalog
 * holding the account alone.
 */
START_TEST(test_big_catalog_few_accounts)
{
    const unsigned n = 200000;
    const unsigned held[3] = {0, n / 2, n - 1};
    billing_catalog *cat = catalog(n, n);
    billing_rater *r = tu_new_rater(cat);
    char *text;
    char *alone;
    size_t k;

    ck_assert_uint_eq(r->n_accts, 0);
    ck_assert_uint_eq(r->cap_accts, 0);
    for (k = 0; k < 3; k++)
        add_events(r, held[k]);
    for (k = 0; k < 3; k++) {
        text = account_text(r, held[k]);
        alone = alone_text(held[k]);
        ck_assert_str_eq(text, alone);
        free(text);
        free(alone);
    }
    ck_assert_uint_eq(r->n_accts, 3);
    ck_assert_uint_le(r->cap_accts, 16);
    ck_assert_uint_le(r->acct_slot_cap, 32);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * 3 000 accounts of a catalog of 3 000, their events shuffled: the
 * storage grows (and its table is rebuilt) many times, and every account
 * keeps its own aggregates, months and credit: each one's invoices and
 * balance equal those of a rater given its events alone.
 */
START_TEST(test_many_accounts_kept_apart)
{
    const unsigned n = 3000;
    billing_catalog *cat = catalog(n, n);
    billing_rater *r = tu_new_rater(cat);
    billing_rater *one;
    unsigned *order = malloc(n * sizeof(unsigned));
    uint64_t rng = UINT64_C(0x5eed0025);
    char *text;
    char *alone;
    unsigned i;
    unsigned j;
    unsigned t;

    ck_assert_ptr_nonnull(order);
    for (i = 0; i < n; i++)
        order[i] = i;
    for (i = n - 1; i > 0; i--) {
        j = (unsigned)(test_rnd(&rng) % (i + 1));
        t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (i = 0; i < n; i++)
        add_events(r, order[i]);
    ck_assert_uint_eq(r->n_accts, n);
    for (i = 0; i < n; i += 7) {
        text = account_text(r, i);
        one = tu_new_rater(cat);
        add_events(one, i);
        alone = account_text(one, i);
        ck_assert_str_eq(text, alone);
        ck_assert_uint_eq(one->n_accts, 1);
        billing_rater_destroy(one);
        free(text);
        free(alone);
    }
    free(order);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

static Suite *rater_suite(void)
{
    Suite *s = suite_create("rater");
    TCase *tc = tcase_create("storage");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_big_catalog_few_accounts);
    tcase_add_test(tc, test_many_accounts_kept_apart);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(rater_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
