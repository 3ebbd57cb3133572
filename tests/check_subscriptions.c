/*
 * check_subscriptions.c - subscriptions, their fees, cancellations and
 * refunds, with every figure computed by hand (doc/pricing.md): terms
 * without a fee, cancellation at or before the start, at the epoch, at a
 * term boundary and in a later term, refund lines, and included usage
 * labelled with what was used.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static billing_zone *shanghai;
static billing_zone *utc;

static void setup(void)
{
    shanghai = tu_zone("Asia/Shanghai");
    utc = billing_zone_new_utc();
    ck_assert_ptr_nonnull(utc);
}

static void teardown(void)
{
    billing_zone_destroy(shanghai);
    billing_zone_destroy(utc);
}

/* The shared helpers under this file's short names. */
#define ADD TU_ADD
#define assert_invoice tu_assert_invoice
#define new_rater tu_new_rater

/* Add a subscription that must be accepted; @cancel NULL for none. */
static void add_sub(billing_catalog *cat, const char *id, const char *acct, const char *res,
                    const char *plan, const char *start, int terms, const char *cancel)
{
    char err[256] = "";
    billing_time_t c = cancel != NULL ? tu_time(cancel) : 0;

    ck_assert_msg(billing_catalog_add_subscription(cat, id, acct, res, plan, tu_time(start), terms,
                                                   cancel != NULL ? &c : NULL, err,
                                                   sizeof(err)) == BILLING_OK,
                  "%s: %s", id, err);
}

/* The months with charges of @acct as "YYYYMM ..." (room for 8). */
static void assert_months(billing_rater *r, const char *acct, const char *expected)
{
    int months[8];
    char text[80] = "";
    size_t len = 0;
    int n = tu_months(r, acct, months, 8);
    int i;

    ck_assert_int_ge(n, 0);
    ck_assert_int_le(n, 8);
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%d", i ? " " : "", months[i]);
    ck_assert_str_eq(text, expected);
}

/*
 * A price book whose only fee for rtx-monthly is in v1 (2599.00, from
 * 2026-01-01); v2 from 2026-03-01+08:00 sets rates but no fee for it.
 */
static billing_catalog *book_v2_without_fee(void)
{
    billing_catalog *cat = billing_catalog_new();
    char err[256];

    ck_assert_int_eq(billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_plan(cat, "rtx-monthly", BILLING_PERIOD_MONTH, "RTX4090",
                                              "cn-east-1", 1, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_price_version(
                         cat, "v1", tu_time("2026-01-01T00:00:00+08:00"), err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_plan_fee(cat, "v1", "rtx-monthly", "2599.00", err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_price_version(
                         cat, "v2", tu_time("2026-03-01T00:00:00+08:00"), err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v2", BILLING_METER_GPU, "RTX4090", "cn-east-1",
                                              "0.60", err, 256),
                     BILLING_OK);
    return cat;
}

/*
 * Issue 9 item 4: February's term had its fee, March's was silently free
 * because v2 sets no fee for the plan. Refused, naming the subscription,
 * account, plan, term and version.
 */
START_TEST(test_term_without_fee_is_refused)
{
    billing_catalog *cat = book_v2_without_fee();
    billing_time_t start = tu_time("2026-02-05T00:00:00+08:00");
    char err[256] = "";

    tu_account(cat, "lab", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "sub-1", "lab", "i-1", "rtx-monthly",
                                                      start, 2, NULL, err, sizeof(err)),
                     BILLING_ERR_NO_PRICE);
    ck_assert_str_eq(err, "subscription 'sub-1' (account 'lab', plan 'rtx-monthly'): field 'plan': "
                          "term 2 starts at 2026-03-04T16:00:00Z, when price version 'v2' sets no "
                          "fee for the plan");
    /* One term, all in v1's time, is fine. */
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "sub-2", "lab", "i-1", "rtx-monthly",
                                                      start, 1, NULL, err, sizeof(err)),
                     BILLING_OK);
    billing_catalog_destroy(cat);
}
END_TEST

/* Added before the version that lacks the fee: refused when rating starts, never free. */
START_TEST(test_term_without_fee_refused_at_freeze)
{
    billing_catalog *cat = billing_catalog_new();
    billing_time_t start = tu_time("2026-02-05T00:00:00+08:00");
    billing_rater *r = NULL;
    char err[256] = "";

    ck_assert_int_eq(billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_plan(cat, "rtx-monthly", BILLING_PERIOD_MONTH, "RTX4090",
                                              "cn-east-1", 1, err, 256),
                     BILLING_OK);
    tu_account(cat, "lab", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "sub-1", "lab", "i-1", "rtx-monthly",
                                                      start, 2, NULL, err, sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_price_version(
                         cat, "v1", tu_time("2026-01-01T00:00:00+08:00"), err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_plan_fee(cat, "v1", "rtx-monthly", "2599.00", err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_price_version(
                         cat, "v2", tu_time("2026-03-01T00:00:00+08:00"), err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_rater_new(cat, &r, err, sizeof(err)), BILLING_ERR_NO_PRICE);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(err, "subscription 'sub-1' (account 'lab', plan 'rtx-monthly')"));
    ck_assert_ptr_nonnull(strstr(err, "price version 'v2' sets no fee"));
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Issue 9 item 5: a term starting before the first price version was free,
 * whereas usage there is refused with "no price".
 */
START_TEST(test_term_before_first_version_is_refused)
{
    billing_catalog *cat = billing_catalog_new();
    char err[256] = "";

    ck_assert_int_eq(billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_plan(cat, "rtx-monthly", BILLING_PERIOD_MONTH, "RTX4090",
                                              "cn-east-1", 1, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_price_version(
                         cat, "v1", tu_time("2026-03-01T00:00:00+08:00"), err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_plan_fee(cat, "v1", "rtx-monthly", "2599.00", err, 256),
                     BILLING_OK);
    tu_account(cat, "lab", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "sub-1", "lab", "i-1", "rtx-monthly",
                                                      tu_time("2026-02-05T00:00:00+08:00"), 2, NULL,
                                                      err, sizeof(err)),
                     BILLING_ERR_NO_PRICE);
    ck_assert_str_eq(err, "subscription 'sub-1' (account 'lab', plan 'rtx-monthly'): field "
                          "'start': term 1 starts at 2026-02-04T16:00:00Z, before the first price "
                          "version: no fee");
    billing_catalog_destroy(cat);
}
END_TEST

/* tu_gpu_cloud plus version v0 from 1960 with the same daily fee (99.00). */
static billing_catalog *book_from_1960(void)
{
    billing_catalog *cat = tu_gpu_cloud();
    char err[256];

    ck_assert_int_eq(
        billing_catalog_add_price_version(cat, "v0", tu_time("1960-01-01T00:00:00Z"), err, 256),
        BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_plan_fee(cat, "v0", "rtx-daily", "99.00", err, 256),
                     BILLING_OK);
    return cat;
}

/*
 * Issue 9 item 8: a cancellation at instant 0 (1970-01-01T00:00:00Z, in
 * the supported range) meant "not cancelled". Three daily terms from
 * 1969-12-31T00:00Z cancelled at the end of the first: one term, 99.00.
 */
START_TEST(test_cancel_at_unix_epoch_is_a_cancellation)
{
    billing_catalog *cat = book_from_1960();
    billing_rater *r;

    tu_account(cat, "old", utc, "0");
    add_sub(cat, "day-0", "old", "i-0", "rtx-daily", "1969-12-31T00:00:00Z", 3,
            "1970-01-01T00:00:00Z");
    r = new_rater(cat);
    assert_invoice(r, "old", 1969, 12,
                   "old 1969-12 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v0 qty=1 term @99 = 99 -> 99.00\n"
                   "subtotal 99.00 credits 0.00 tax 0.00@0 total 99.00\n");
    assert_invoice(r, "old", 1970, 1,
                   "old 1970-01 CNY\n"
                   "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    assert_months(r, "old", "196912");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Issue 16: cancelling at or before the start stopped the whole run. It
 * means no term at all: no fee, and usage on the resource is billed as
 * without a subscription (3 h x 8 GPUs x 0.60 = 14.40).
 */
START_TEST(test_cancel_before_start_means_no_term)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "early", "lab", "i-1", "rtx-monthly", "2026-03-01T00:00:00+08:00", 3,
            "2026-02-20T12:00:00+08:00");
    add_sub(cat, "at-start", "lab", "i-2", "rtx-daily", "2026-03-05T00:00:00+08:00", 2,
            "2026-03-05T00:00:00+08:00");
    r = new_rater(cat);
    ADD(r, "u1", "lab", "i-1", "gpu", "2026-03-02T10:00:00+08:00", "2026-03-02T13:00:00+08:00", "8",
        "RTX4090");
    assert_invoice(r, "lab", 2026, 3,
                   "lab 2026-03 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=24 GPU-hour @0.6 = 14.4 -> "
                   "14.40\n"
                   "subtotal 14.40 credits 0.00 tax 0.00@0 total 14.40\n");
    assert_months(r, "lab", "202603");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A subscription cancelled before its start has no term, so another one
 * of the same instance may start inside the span it would have had:
 * daily passes from Feb 25 00:00, 10 terms, 4 starting in February
 * (4 x 99 = 396.00) and 6 in March (594.00). Before: "overlap", and
 * billing_rater_new failed for the whole catalog.
 */
START_TEST(test_cancelled_before_start_overlaps_nothing)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "later", "lab", "i-1", "rtx-monthly", "2026-03-01T00:00:00+08:00", 1,
            "2026-02-20T12:00:00+08:00");
    add_sub(cat, "passes", "lab", "i-1", "rtx-daily", "2026-02-25T00:00:00+08:00", 10, NULL);
    r = new_rater(cat);
    assert_invoice(r, "lab", 2026, 2,
                   "lab 2026-02 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v1 qty=4 term @99 = 396 -> "
                   "396.00\n"
                   "subtotal 396.00 credits 0.00 tax 0.00@0 total 396.00\n");
    assert_invoice(r, "lab", 2026, 3,
                   "lab 2026-03 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v1 qty=6 term @99 = 594 -> "
                   "594.00\n"
                   "subtotal 594.00 credits 0.00 tax 0.00@0 total 594.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Cancelled exactly at the end of term 1 of a refundable monthly plan:
 * January's fee only; no second term (mutant: term loop `<` -> `<=`),
 * no zero refund line (mutant: refund bound `<=` -> `<`), and no empty
 * February invoice (the cancellation refunds nothing).
 */
START_TEST(test_cancel_at_term_boundary)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "sub-1", "lab", "i-1", "rtx-monthly", "2026-01-05T09:00:00+08:00", 3,
            "2026-02-05T09:00:00+08:00");
    r = new_rater(cat);
    assert_invoice(r, "lab", 2026, 1,
                   "lab 2026-01 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "subtotal 2599.00 credits 0.00 tax 0.00@0 total 2599.00\n");
    assert_invoice(r, "lab", 2026, 2,
                   "lab 2026-02 CNY\n"
                   "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    assert_months(r, "lab", "202601");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A non-refundable daily pass cancelled in its second term, in the month
 * after that term's fee: nothing to refund, so no empty February invoice
 * (bl_account_months added the month of every cancellation).
 */
START_TEST(test_cancel_refunding_nothing_makes_no_invoice)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "day-1", "lab", "i-1", "rtx-daily", "2026-01-30T20:00:00+08:00", 2,
            "2026-02-01T10:00:00+08:00");
    r = new_rater(cat);
    assert_invoice(r, "lab", 2026, 1,
                   "lab 2026-01 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v1 qty=2 term @99 = 198 -> "
                   "198.00\n"
                   "subtotal 198.00 credits 0.00 tax 0.00@0 total 198.00\n");
    assert_months(r, "lab", "202601");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Anchored on Jan 31 in the leap year 2028 (Asia/Shanghai): terms start
 * Jan 31, Feb 29 and Mar 31, 10:00. sub-a is cancelled in its second term
 * (Feb 29 -> Mar 31, 31 days) on Mar 10 10:00: 21 days unused, refund
 * 2599 x 21/31 = 54579/31 = 1760.6129... -> 1760.61; its third term is
 * never charged. sub-b (same plan, other resource) starts Mar 1 and is
 * cancelled Mar 16 00:00: 16 of 31 days unused, 2599 x 16/31 = 41584/31
 * = 1341.4193... -> 1341.42. Two refunds of one plan: two lines, each
 * naming its subscription and unused span. Usage of i-c (no plan):
 * 400 h x 8 x 0.60 = 1920.00. March: 1920.00 + 2599.00 - 1760.61
 * - 1341.42 = 1416.97.
 */
START_TEST(test_refunds_in_later_term_leap_year)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "sub-a", "lab", "i-a", "rtx-monthly", "2028-01-31T10:00:00+08:00", 3,
            "2028-03-10T10:00:00+08:00");
    add_sub(cat, "sub-b", "lab", "i-b", "rtx-monthly", "2028-03-01T00:00:00+08:00", 1,
            "2028-03-16T00:00:00+08:00");
    r = new_rater(cat);
    ADD(r, "c1", "lab", "i-c", "gpu", "2028-03-02T00:00:00+08:00", "2028-03-18T16:00:00+08:00", "8",
        "RTX4090");
    assert_invoice(r, "lab", 2028, 1,
                   "lab 2028-01 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "subtotal 2599.00 credits 0.00 tax 0.00@0 total 2599.00\n");
    assert_invoice(r, "lab", 2028, 2,
                   "lab 2028-02 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "subtotal 2599.00 credits 0.00 tax 0.00@0 total 2599.00\n");
    assert_invoice(r, "lab", 2028, 3,
                   "lab 2028-03 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=3200 GPU-hour @0.6 = 1920 -> "
                   "1920.00\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "line 4  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1814400 second @ = "
                   "-54579/31 -> -1760.61\n"
                   "  refund of sub-a unused [2028-03-10T02:00:00Z, 2028-03-31T02:00:00Z)\n"
                   "line 4  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1382400 second @ = "
                   "-41584/31 -> -1341.42\n"
                   "  refund of sub-b unused [2028-03-15T16:00:00Z, 2028-03-31T16:00:00Z)\n"
                   "subtotal 1416.97 credits 0.00 tax 0.00@0 total 1416.97\n");
    assert_invoice(r, "lab", 2028, 4,
                   "lab 2028-04 CNY\n"
                   "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    assert_months(r, "lab", "202801 202802 202803");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Issue 9 item 9: 8 A100 GPU-hours on an RTX4090 plan's instance were
 * shown as "included RTX4090"; the fee line said "meter": "gpu". Included
 * usage shows the event's own model and region; fee lines have no meter.
 */
START_TEST(test_included_shows_event_model)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "sub-1", "lab", "i-1", "rtx-daily", "2026-04-01T00:00:00+08:00", 1, NULL);
    r = new_rater(cat);
    ADD(r, "a1", "lab", "i-1", "gpu", "2026-04-01T10:00:00+08:00", "2026-04-01T11:00:00+08:00", "8",
        "A100-80G");
    ck_assert_int_eq(tu_add(r, "a2", "lab", "i-1", "gpu", "2026-04-01T11:00:00+08:00",
                            "2026-04-01T12:00:00+08:00", "8", "RTX4090", "cn-north-2", err,
                            sizeof(err)),
                     BILLING_OK);
    assert_invoice(r, "lab", 2026, 4,
                   "lab 2026-04 CNY\n"
                   "line 2 gpu A100-80G cn-east-1 plan=rtx-daily ver= qty=8 GPU-hour @0 = 0 -> "
                   "0.00\n"
                   "line 2 gpu RTX4090 cn-north-2 plan=rtx-daily ver= qty=8 GPU-hour @0 = 0 -> "
                   "0.00\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v1 qty=1 term @99 = 99 -> 99.00\n"
                   "subtotal 99.00 credits 0.00 tax 0.00@0 total 99.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Included lines keep each event's (model, region) pair, so a rater keeps
 * at most 4096 of them: the next is refused naming the event and field,
 * and changes nothing.
 */
START_TEST(test_included_pairs_are_bounded)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char id[32];
    char model[32];
    char err[256] = "";
    int i;

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "sub-1", "lab", "i-1", "rtx-monthly", "2026-04-01T00:00:00+08:00", 1, NULL);
    r = new_rater(cat);
    for (i = 0; i < 4096; i++) {
        snprintf(id, sizeof(id), "e%d", i);
        snprintf(model, sizeof(model), "m%d", i);
        ADD(r, id, "lab", "i-1", "gpu", "2026-04-02T10:00:00+08:00", "2026-04-02T11:00:00+08:00",
            "1", model);
    }
    ck_assert_int_eq(tu_add(r, "one-more", "lab", "i-1", "gpu", "2026-04-02T10:00:00+08:00",
                            "2026-04-02T11:00:00+08:00", "1", "m4096", "cn-east-1", err,
                            sizeof(err)),
                     BILLING_ERR_TOO_LARGE);
    ck_assert_str_eq(err, "event 'one-more': field 'model': more than 4096 distinct models and "
                          "regions of usage inside subscriptions");
    ck_assert_uint_eq(billing_rater_event_count(r), 4096);
    /* A pair already kept is still accepted. */
    ADD(r, "again", "lab", "i-1", "gpu", "2026-04-02T11:00:00+08:00", "2026-04-02T12:00:00+08:00",
        "1", "m7");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Two subscriptions of one instance with overlapping terms: the second is
 * refused when added, naming both, and the catalog stays usable (before:
 * accepted, then billing_rater_new failed for every account). A monthly
 * term from Jan 5 09:00 ends Feb 5 09:00: a daily pass from Feb 4 overlaps,
 * one from Feb 5 09:00 does not.
 */
START_TEST(test_overlap_refused_when_added)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256] = "";

    tu_account(cat, "lab", shanghai, "0");
    add_sub(cat, "month", "lab", "i-1", "rtx-monthly", "2026-01-05T09:00:00+08:00", 1, NULL);
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "pass", "lab", "i-1", "rtx-daily",
                                                      tu_time("2026-02-04T00:00:00+08:00"), 1, NULL,
                                                      err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_str_eq(err, "subscription 'pass' (account 'lab', plan 'rtx-daily'): field 'start': "
                          "its terms overlap those of subscription 'month' of resource 'i-1'");
    add_sub(cat, "pass-2", "lab", "i-1", "rtx-daily", "2026-02-05T09:00:00+08:00", 1, NULL);
    add_sub(cat, "other", "lab", "i-2", "rtx-daily", "2026-02-04T00:00:00+08:00", 1, NULL);
    r = new_rater(cat);
    assert_invoice(r, "lab", 2026, 2,
                   "lab 2026-02 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v1 qty=2 term @99 = 198 -> "
                   "198.00\n"
                   "subtotal 198.00 credits 0.00 tax 0.00@0 total 198.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* A cancellation at or after the end of the last term cancels nothing: refused, named. */
START_TEST(test_cancel_after_end_is_refused)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_time_t c = tu_time("2026-01-03T00:00:00Z");
    char err[256] = "";

    tu_account(cat, "lab", utc, "0");
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "d", "lab", "i", "rtx-daily",
                                                      tu_time("2026-01-01T00:00:00Z"), 2, &c, err,
                                                      sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_str_eq(err, "subscription 'd' (account 'lab', plan 'rtx-daily'): field "
                          "'cancelled_at' is at or after the end of the last term");
    billing_catalog_destroy(cat);
}
END_TEST

/* Add a subscription that must be refused as overlapping @other. */
static void assert_overlap(billing_catalog *cat, const char *id, billing_time_t start,
                           const char *other)
{
    char err[256] = "";
    char expected[256];

    ck_assert_int_eq(billing_catalog_add_subscription(cat, id, "lab", "i-1", "rtx-daily", start, 1,
                                                      NULL, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    snprintf(expected, sizeof(expected),
             "subscription '%s' (account 'lab', plan 'rtx-daily'): field 'start': its terms "
             "overlap those of subscription '%s' of resource 'i-1'",
             id, other);
    ck_assert_str_eq(err, expected);
}

/*
 * Subscriptions of one resource exactly back to back are accepted on both
 * sides, 1 ns of overlap is refused on both sides. "mid" is a day pass
 * [Jan 10, Jan 11) UTC: one starting at Jan 11 00:00 (its end) is
 * accepted, one starting 1 ns before is refused; one ending exactly at
 * Jan 10 00:00 (its start) is accepted, one ending 1 ns after is refused.
 * The rater accepts the three back to back passes: 3 x 99.00.
 */
START_TEST(test_back_to_back_subscriptions)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_time_t jan9 = tu_time("2026-01-09T00:00:00Z");
    billing_time_t jan11 = tu_time("2026-01-11T00:00:00Z");
    billing_rater *r;

    tu_account(cat, "lab", utc, "0");
    add_sub(cat, "mid", "lab", "i-1", "rtx-daily", "2026-01-10T00:00:00Z", 1, NULL);
    assert_overlap(cat, "after-1ns", jan11 - 1, "mid");
    add_sub(cat, "after", "lab", "i-1", "rtx-daily", "2026-01-11T00:00:00Z", 1, NULL);
    assert_overlap(cat, "before-1ns", jan9 + 1, "mid");
    add_sub(cat, "before", "lab", "i-1", "rtx-daily", "2026-01-09T00:00:00Z", 1, NULL);
    r = new_rater(cat);
    assert_invoice(r, "lab", 2026, 1,
                   "lab 2026-01 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v1 qty=3 term @99 = 297 -> "
                   "297.00\n"
                   "subtotal 297.00 credits 0.00 tax 0.00@0 total 297.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

static Suite *subscriptions_suite(void)
{
    Suite *s = suite_create("subscriptions");
    TCase *tc = tcase_create("subscriptions");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_term_without_fee_is_refused);
    tcase_add_test(tc, test_term_without_fee_refused_at_freeze);
    tcase_add_test(tc, test_term_before_first_version_is_refused);
    tcase_add_test(tc, test_cancel_at_unix_epoch_is_a_cancellation);
    tcase_add_test(tc, test_cancel_before_start_means_no_term);
    tcase_add_test(tc, test_cancelled_before_start_overlaps_nothing);
    tcase_add_test(tc, test_cancel_at_term_boundary);
    tcase_add_test(tc, test_cancel_refunding_nothing_makes_no_invoice);
    tcase_add_test(tc, test_refunds_in_later_term_leap_year);
    tcase_add_test(tc, test_included_shows_event_model);
    tcase_add_test(tc, test_cancel_after_end_is_refused);
    tcase_add_test(tc, test_included_pairs_are_bounded);
    tcase_add_test(tc, test_overlap_refused_when_added);
    tcase_add_test(tc, test_back_to_back_subscriptions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(subscriptions_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
