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

/* An event of account 1 (i-1, gpu, RTX4090, cn-east-1, an hour of 2026-01-05) with id @id. */
static billing_event *plain_event(const char *id)
{
    return tu_event(id, "acct-000001", "i-1", "gpu", "2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z",
                    "1", "RTX4090", "cn-east-1");
}

/*
 * Add and take back @ev (dedupe off): both accept it, or both refuse it
 * as invalid, as @valid says.
 */
static void expect_valid(billing_rater *r, const billing_event *ev, int valid, const char *what,
                         size_t n, size_t pos, unsigned byte)
{
    billing_status want = valid ? BILLING_OK : BILLING_ERR_INVALID;
    billing_status st = billing_rater_add(r, ev, NULL, 0);

    ck_assert_msg(st == want, "%s of %zu bytes, byte %zu = 0x%02x: add gave %d, want %d", what, n,
                  pos, byte, (int)st, (int)want);
    st = billing_rater_take_back(r, ev, NULL, 0);
    ck_assert_msg(st == want, "%s of %zu bytes, byte %zu = 0x%02x: take-back gave %d, want %d",
                  what, n, pos, byte, (int)st, (int)want);
}

/*
 * The id and the resource of an event whose account and pair the rater
 * has interned (the path that checks only those two, a word at a time):
 * every byte value 1..255 at every position of ids of 1 to 20 bytes is
 * refused exactly when bl_valid_id_n refuses it (outside 0x21..0x7e),
 * and the bytes an earlier, longer value left past the end do not count.
 */
START_TEST(test_interned_event_ids_checked_bytewise)
{
    billing_catalog *cat = catalog(3, 3);
    billing_rater *r = tu_new_rater(cat);
    billing_event *ev = plain_event("warm");
    char id[32];
    size_t n;
    size_t pos;
    unsigned b;
    int field;

    billing_rater_set_dedupe(r, 0);
    ck_assert_int_eq(billing_rater_add(r, ev, NULL, 0), BILLING_OK);
    for (field = 0; field < 2; field++) {
        for (n = 1; n <= 20; n++) {
            for (pos = 0; pos < n; pos++) {
                for (b = 1; b < 256; b++) {
                    memset(id, 'k', n);
                    id[n] = '\0';
                    id[pos] = (char)b;
                    if (field == 0)
                        ck_assert_int_eq(billing_event_set_id(ev, id), BILLING_OK);
                    else
                        ck_assert_int_eq(billing_event_set_resource(ev, id), BILLING_OK);
                    expect_valid(r, ev, b >= 0x21 && b <= 0x7e, field ? "resource" : "id", n, pos,
                                 b);
                }
            }
        }
        ck_assert_int_eq(billing_event_set_id(ev, "warm"), BILLING_OK);
        ck_assert_int_eq(billing_event_set_resource(ev, "i-1"), BILLING_OK);
    }
    /* A longer value's bytes past the end: invalid ones, then the end on a word boundary. */
    for (n = 1; n <= 20; n++) {
        memset(id, 0x01, sizeof(id) - 1);
        id[sizeof(id) - 1] = '\0';
        memset(id, 'k', n);
        ck_assert_int_eq(billing_event_set_id(ev, id), BILLING_OK);
        expect_valid(r, ev, 0, "id", strlen(id), n, 0x01);
        id[n] = '\0';
        ck_assert_int_eq(billing_event_set_id(ev, id), BILLING_OK);
        expect_valid(r, ev, 1, "id", n, n, 0);
        ck_assert_int_eq(billing_event_set_resource(ev, "i-1\x7f\x7f\x7f\x7f\x7f\x7f"), BILLING_OK);
        expect_valid(r, ev, 0, "resource", 9, 3, 0x7f);
        ck_assert_int_eq(billing_event_set_resource(ev, id), BILLING_OK);
        expect_valid(r, ev, 1, "resource", n, n, 0);
    }
    billing_event_destroy(ev);
    ck_assert_uint_eq(billing_rater_event_count(r), 1);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Consecutive events of two accounts and two pairs whose bytes differ
 * but whose lengths do not (acct-000001 / acct-000002, RTX4090 / RTX4091,
 * cn-east-1 / cn-east-2, each pair priced differently): the rater compares an event with the account and
 * pair it found last, and these must not be taken for them. The invoices
 * (some events taken back and added again) equal those of every event in
 * a rater of its own, merged.
 */
START_TEST(test_last_interned_ids_compared_whole)
{
    billing_catalog *cat = catalog(3, 3);
    billing_rater *r;
    billing_rater *all;
    billing_rater *one;
    billing_event *evs[48];
    char eid[32];
    char acct[32];
    char err[256];
    char *got;
    char *want;
    unsigned i;
    unsigned a;

    ck_assert_int_eq(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "RTX4091", "cn-east-1",
                                              "0.70", err, sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "RTX4090", "cn-east-2",
                                              "0.65", err, sizeof(err)),
                     BILLING_OK);
    r = tu_new_rater(cat);
    all = tu_new_rater(cat);
    billing_rater_set_dedupe(r, 0);
    billing_rater_set_dedupe(all, 0);
    for (i = 0; i < 48; i++) {
        snprintf(eid, sizeof(eid), "e%u", i);
        evs[i] = plain_event(eid);
        acct_name(acct, sizeof(acct), 1 + i % 2);
        ck_assert_int_eq(billing_event_set_account(evs[i], acct), BILLING_OK);
        ck_assert_int_eq(billing_event_set_model(evs[i], i / 3 % 4 == 2 ? "RTX4091" : "RTX4090"),
                         BILLING_OK);
        ck_assert_int_eq(billing_event_set_region(evs[i], i / 3 % 2 ? "cn-east-2" : "cn-east-1"),
                         BILLING_OK);
        billing_event_set_interval(
            evs[i], tu_time("2026-01-05T00:00:00Z") + (billing_time_t)i * 3600 * 1000000000,
            tu_time("2026-01-05T00:30:00Z") + (billing_time_t)i * 3600 * 1000000000);
        ck_assert_int_eq(billing_rater_add(r, evs[i], err, sizeof(err)), BILLING_OK);
        one = tu_new_rater(cat);
        billing_rater_set_dedupe(one, 0);
        ck_assert_int_eq(billing_rater_add(one, evs[i], err, sizeof(err)), BILLING_OK);
        ck_assert_int_eq(billing_rater_merge(all, one, err, sizeof(err)), BILLING_OK);
        billing_rater_destroy(one);
    }
    for (i = 0; i < 48; i += 3)
        ck_assert_int_eq(billing_rater_take_back(r, evs[i], err, sizeof(err)), BILLING_OK);
    for (i = 0; i < 48; i += 3)
        ck_assert_int_eq(billing_rater_add(r, evs[i], err, sizeof(err)), BILLING_OK);
    for (a = 1; a <= 2; a++) {
        acct_name(acct, sizeof(acct), a);
        got = tu_invoice_text(r, acct, 2026, 1);
        want = tu_invoice_text(all, acct, 2026, 1);
        ck_assert_ptr_nonnull(got);
        ck_assert_ptr_nonnull(want);
        ck_assert_str_eq(got, want);
        free(got);
        free(want);
    }
    for (i = 0; i < 48; i++)
        billing_event_destroy(evs[i]);
    billing_rater_destroy(r);
    billing_rater_destroy(all);
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
    tcase_add_test(tc, test_interned_event_ids_checked_bytewise);
    tcase_add_test(tc, test_last_interned_ids_compared_whole);
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
