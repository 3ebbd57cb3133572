/*
 * check_credit.c - credit grants through the public API, every figure
 * computed by hand: credit pays the invoice's rounded figures, allocation
 * across grants, invoices never below zero (account credit), the exact
 * bounds of a grant's window, the live balance and the exhaustion instant.
 */
#include "config.h"

#include <check.h>
#include <gmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define ADD(r, id, acct, res, meter, start, end, qty)                                    \
    do {                                                                                 \
        char err_[256] = "";                                                             \
        billing_status st_ = tu_add(r, id, acct, res, meter, start, end, qty, "RTX4090", \
                                    "cn-east-1", err_, sizeof(err_));                    \
        ck_assert_msg(st_ == BILLING_OK, "%s: %s", id, err_);                            \
    } while (0)

static void add_grant(billing_catalog *cat, const char *id, const char *acct, const char *amount,
                      const char *from, const char *to, unsigned kinds, int priority)
{
    char err[256];

    ck_assert_msg(billing_catalog_add_grant(cat, id, acct, amount, tu_time(from), tu_time(to),
                                            kinds, priority, err, sizeof(err)) == BILLING_OK,
                  "%s", err);
}

static void add_sub(billing_catalog *cat, const char *acct, const char *plan, const char *start,
                    const char *cancelled)
{
    char err[256];
    billing_time_t when = cancelled ? tu_time(cancelled) : 0;

    ck_assert_msg(billing_catalog_add_subscription(cat, "s", acct, "i-s", plan, tu_time(start), 1,
                                                   cancelled ? &when : NULL, err,
                                                   sizeof(err)) == BILLING_OK,
                  "%s", err);
}

/* A plan of one day at @fee, in the price book's version v1. */
static void add_day_plan(billing_catalog *cat, const char *plan, const char *fee, int refundable)
{
    char err[256];

    ck_assert_int_eq(billing_catalog_add_plan(cat, plan, BILLING_PERIOD_DAY, "RTX4090", "cn-east-1",
                                              refundable, err, sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_plan_fee(cat, "v1", plan, fee, err, sizeof(err)),
                     BILLING_OK);
}

static billing_rater *new_rater(billing_catalog *cat)
{
    char err[256];
    billing_rater *r = NULL;

    ck_assert_msg(billing_rater_new(cat, &r, err, sizeof(err)) == BILLING_OK, "%s", err);
    return r;
}

/*
 * The invoice without its charge lines: credits, expiries, account credit
 * and totals (what this suite is about; line presentation is pinned by
 * check_rating and the golden files).
 */
static void assert_credit_part(billing_rater *r, const char *acct, int y, int m,
                               const char *expected)
{
    char *text = tu_invoice_text(r, acct, y, m);
    char *out;
    const char *p;
    const char *nl;
    size_t len = 0;

    ck_assert_ptr_nonnull(text);
    out = calloc(strlen(text) + 1, 1);
    ck_assert_ptr_nonnull(out);
    for (p = strchr(text, '\n') + 1; *p != '\0'; p = nl + 1) {
        nl = strchr(p, '\n');
        if (strncmp(p, "line ", 5) == 0 || strncmp(p, "  refund of ", 12) == 0)
            continue;
        memcpy(out + len, p, (size_t)(nl - p) + 1);
        len += (size_t)(nl - p) + 1;
    }
    ck_assert_str_eq(out, expected);
    free(out);
    free(text);
}

static void assert_balance(billing_rater *r, const char *acct, const char *when,
                           const char *expected)
{
    char buf[64];

    ck_assert_int_eq(billing_rater_credit_balance(r, acct, tu_time(when), buf, sizeof(buf)),
                     BILLING_OK);
    ck_assert_str_eq(buf, expected);
}

/* A running resource for the exhaustion questions. */
static billing_event *running(billing_meter meter, const char *qty)
{
    billing_event *ev = billing_event_new();
    char err[256];

    ck_assert_ptr_nonnull(ev);
    billing_event_set_meter(ev, meter);
    ck_assert_int_eq(billing_event_set_quantity(ev, qty, err, sizeof(err)), BILLING_OK);
    billing_event_set_model(ev, "RTX4090");
    billing_event_set_region(ev, "cn-east-1");
    return ev;
}

static billing_time_t exhaustion(billing_rater *r, const char *acct, const char *now,
                                 billing_event **evs, size_t n)
{
    billing_time_t when = 0;
    char err[256];

    ck_assert_msg(billing_rater_credit_exhaustion(r, acct, tu_time(now),
                                                  (const billing_event *const *)evs, n, &when, err,
                                                  sizeof(err)) == BILLING_OK,
                  "%s", err);
    return when;
}

/*
 * Issue 9 item 6: 1 GPU for 8 h 0 min 30 s is 961/120 GPU-hour x 0.60 =
 * 4.805, shown as 4.81. The trial's 10.00 covers it, so the invoice owes
 * nothing; the credit used to be rounded down to 4.80, leaving 0.01.
 */
START_TEST(test_covered_usage_leaves_nothing_to_pay)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "u6", shanghai, "0.06");
    add_grant(cat, "trial", "u6", "10.00", "2026-01-10T00:00:00+08:00", "2026-02-09T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    ADD(r, "e1", "u6", "i-1", "gpu", "2026-01-12T10:00:00+08:00", "2026-01-12T18:00:30+08:00", "1");
    assert_credit_part(r, "u6", 2026, 1,
                       "credit trial 4.81 left 5.19\n"
                       "subtotal 4.81 credits 4.81 tax 0.00@0.06 total 0.00\n");
    /* The live balance is what the invoices leave. */
    assert_balance(r, "u6", "2026-01-12T18:00:30+08:00", "5.19");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A line cut by a grant's start: 1 GPU from 20:00 to 04:00:30 the next
 * day is 4.805 -> 4.81; the 4 h before the grant are 2.40, the rounded
 * running sum after them is 4.81, so the grant's part is 4.81 - 2.40 =
 * 2.41 (not its exact 2.405 rounded down), and the two parts add up to
 * the line the invoice shows.
 */
START_TEST(test_credit_pays_its_part_of_a_rounded_line)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "u6b", shanghai, "0");
    add_grant(cat, "trial", "u6b", "10.00", "2026-01-10T00:00:00+08:00",
              "2026-02-09T00:00:00+08:00", BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    ADD(r, "e1", "u6b", "i-1", "gpu", "2026-01-09T20:00:00+08:00", "2026-01-10T04:00:30+08:00",
        "1");
    assert_credit_part(r, "u6b", 2026, 1,
                       "credit trial 2.41 left 7.59\n"
                       "subtotal 4.81 credits 2.41 tax 0.00@0 total 2.40\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Issue 9 item 7: grant A (priority 0, usage and fees, 100.00), grant B
 * (priority 1, usage only, 100.00), an 80.00 fee and 80.00 of usage. A
 * must leave the usage to B: A pays the fee and 20.00 of usage, B the
 * other 60.00, nothing is owed and B keeps 40.00. It used to be A on the
 * usage and 20.00 of the fee, B nothing, 60.00 to pay.
 */
START_TEST(test_grant_spent_first_on_what_later_grants_cannot_pay)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    add_day_plan(cat, "pass80", "80.00", 0);
    tu_account(cat, "u7", shanghai, "0");
    add_grant(cat, "A", "u7", "100.00", "2026-03-01T00:00:00+08:00", "2026-04-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0);
    add_grant(cat, "B", "u7", "100.00", "2026-03-01T00:00:00+08:00", "2026-04-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 1);
    add_sub(cat, "u7", "pass80", "2026-03-02T00:00:00+08:00", NULL);
    r = new_rater(cat);
    /* 8 GPUs for 16 h 40 min: 400/3 GPU-hour x 0.60 = 80.00, on another instance. */
    ADD(r, "u1", "u7", "i-other", "gpu", "2026-03-03T00:00:00+08:00", "2026-03-03T16:40:00+08:00",
        "8");
    assert_credit_part(r, "u7", 2026, 3,
                       "credit A 100.00 left 0.00\n"
                       "credit B 60.00 left 40.00\n"
                       "expired B 40.00\n"
                       "subtotal 160.00 credits 160.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Paying the most can take moving what earlier grants pay. A (priority 0,
 * all March, 100.00), B (priority 1, Mar 1-10, 50.00), C (priority 2, Mar
 * 1-5, 30.00); usage of 30.00 on Mar 2, 50.00 on Mar 6, 90.00 on Mar 12.
 * A alone would pay 30 + 50 + 20; B takes Mar 2 and 20.00 of Mar 6 while A
 * moves to Mar 12; C takes 20.00 of Mar 2 while B moves to Mar 6 and A to
 * Mar 12. All 170.00 is paid and C keeps 10.00, which expires. Without
 * moving, A paid 100.00, B and C nothing, and 70.00 was left to pay.
 */
START_TEST(test_allocation_moves_earlier_grants)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "um", shanghai, "0");
    add_grant(cat, "A", "um", "100.00", "2026-03-01T00:00:00+08:00", "2026-04-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_grant(cat, "B", "um", "50.00", "2026-03-01T00:00:00+08:00", "2026-03-10T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 1);
    add_grant(cat, "C", "um", "30.00", "2026-03-01T00:00:00+08:00", "2026-03-05T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 2);
    r = new_rater(cat);
    /* 10 GPUs at 0.60: 5 h = 30.00, 8 h 20 min = 50.00, 15 h = 90.00. */
    ADD(r, "m1", "um", "i-1", "gpu", "2026-03-02T00:00:00+08:00", "2026-03-02T05:00:00+08:00",
        "10");
    ADD(r, "m2", "um", "i-1", "gpu", "2026-03-06T00:00:00+08:00", "2026-03-06T08:20:00+08:00",
        "10");
    ADD(r, "m3", "um", "i-1", "gpu", "2026-03-12T00:00:00+08:00", "2026-03-12T15:00:00+08:00",
        "10");
    assert_credit_part(r, "um", 2026, 3,
                       "credit A 100.00 left 0.00\n"
                       "credit B 50.00 left 0.00\n"
                       "credit C 20.00 left 10.00\n"
                       "expired C 10.00\n"
                       "subtotal 170.00 credits 170.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A move is bounded by what the earlier grant pays of the pool it leaves.
 * A (priority 0, all March, 100.00) first pays 10.00 on Mar 2 and 90.00
 * on Mar 12; B (priority 1, Mar 1-10, 50.00) may pay only Mar 2, so A
 * moves its 10.00 there to Mar 12 and B pays 10.00, not 50.00.
 */
START_TEST(test_allocation_move_bounded_by_earlier_payment)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "uv", shanghai, "0");
    add_grant(cat, "A", "uv", "100.00", "2026-03-01T00:00:00+08:00", "2026-04-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_grant(cat, "B", "uv", "50.00", "2026-03-01T00:00:00+08:00", "2026-03-10T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 1);
    r = new_rater(cat);
    /* 10 GPUs at 0.60: 1 h 40 min = 10.00, 33 h 20 min = 200.00. */
    ADD(r, "v1", "uv", "i-1", "gpu", "2026-03-02T00:00:00+08:00", "2026-03-02T01:40:00+08:00",
        "10");
    ADD(r, "v2", "uv", "i-1", "gpu", "2026-03-12T00:00:00+08:00", "2026-03-13T09:20:00+08:00",
        "10");
    assert_credit_part(r, "uv", 2026, 3,
                       "credit A 100.00 left 0.00\n"
                       "credit B 10.00 left 40.00\n"
                       "expired B 40.00\n"
                       "subtotal 210.00 credits 110.00 tax 0.00@0 total 100.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Issue 16: a refund larger than the month's charges. A refundable
 * monthly term from Jan 31 10:00 is cancelled on Feb 14 10:00: 14 of its
 * 28 days unused, 2599 x 14/28 = 1299.50 back. February also has 48.00 of
 * usage and a usage grant of 100.00. The subtotal is 48.00 - 1299.50 =
 * -1251.50: no credit applies (credit never takes an invoice below zero),
 * the 1251.50 is carried to the account credit, tax and total are 0.00.
 * March's 4.80 is paid from the account credit. It used to be a total of
 * -1326.59 with tax -75.09.
 */
START_TEST(test_refund_beyond_charges_becomes_account_credit)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[1];

    tu_account(cat, "u16", shanghai, "0.06");
    add_grant(cat, "feb", "u16", "100.00", "2026-02-01T00:00:00+08:00", "2026-03-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_sub(cat, "u16", "rtx-monthly", "2026-01-31T10:00:00+08:00", "2026-02-14T10:00:00+08:00");
    r = new_rater(cat);
    ADD(r, "f1", "u16", "i-x", "gpu", "2026-02-20T00:00:00+08:00", "2026-02-20T10:00:00+08:00",
        "8");
    ADD(r, "m1", "u16", "i-x", "gpu", "2026-03-05T00:00:00+08:00", "2026-03-05T01:00:00+08:00",
        "8");
    assert_credit_part(r, "u16", 2026, 1,
                       "subtotal 2599.00 credits 0.00 tax 155.94@0.06 total 2754.94\n");
    assert_credit_part(r, "u16", 2026, 2,
                       "expired feb 100.00\n"
                       "account credit 0.00 carried 1251.50 left 1251.50\n"
                       "subtotal -1251.50 credits 0.00 tax 0.00@0.06 total 0.00\n");
    assert_credit_part(r, "u16", 2026, 3,
                       "account credit 4.80 carried 0.00 left 1246.70\n"
                       "subtotal 4.80 credits 0.00 tax 0.00@0.06 total 0.00\n");
    /* The account credit is part of the live balance (the grant is gone)... */
    assert_balance(r, "u16", "2026-03-06T00:00:00+08:00", "1246.7");
    /* ...and of the exhaustion: 1246.70 at 4.80 an hour lasts 259 h 43 min 45 s. */
    evs[0] = running(BILLING_METER_GPU, "8");
    ck_assert(exhaustion(r, "u16", "2026-03-06T00:00:00+08:00", evs, 1) ==
              tu_time("2026-03-16T19:43:45+08:00"));
    billing_event_destroy(evs[0]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * The cap at the subtotal when it is above zero: a refundable 24.00 day
 * pass from Jan 31 12:00 is cancelled at Feb 1 00:00, so February refunds
 * 12.00 of a fee paid in January, beside 48.00 of usage and a usage grant
 * of 100.00. The refund offsets the usage first: the subtotal is 36.00
 * and the grant pays 36.00, not the 48.00 of usage (which would make the
 * total -12.00).
 */
START_TEST(test_credit_capped_at_subtotal_after_refund)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    add_day_plan(cat, "day24", "24.00", 1);
    tu_account(cat, "uc", shanghai, "0");
    add_grant(cat, "feb", "uc", "100.00", "2026-02-01T00:00:00+08:00", "2026-03-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_sub(cat, "uc", "day24", "2026-01-31T12:00:00+08:00", "2026-02-01T00:00:00+08:00");
    r = new_rater(cat);
    ADD(r, "u1", "uc", "i-x", "gpu", "2026-02-20T00:00:00+08:00", "2026-02-20T10:00:00+08:00", "8");
    assert_credit_part(r, "uc", 2026, 2,
                       "credit feb 36.00 left 64.00\n"
                       "expired feb 64.00\n"
                       "subtotal 36.00 credits 36.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* A refundable monthly term from Jan 5 (31 days), cancelled on Feb 1: 4/31 unused. */
static void add_cancelled_monthly(billing_catalog *cat, const char *acct)
{
    add_sub(cat, acct, "rtx-monthly", "2026-01-05T00:00:00+08:00", "2026-02-01T00:00:00+08:00");
}

/*
 * Issue 16: a fee paid with credit is refunded to the credit, not as
 * money. The trial (3000.00, fees too) pays January's 2599.00 fee; the
 * cancellation on Feb 1 refunds 2599 x 4/31 = 335.35, which goes back to
 * the trial (736.35 left) and expires with it on Feb 15. February totals
 * 0.00; it used to be -355.47 (tax -20.12) while 401.00 expired.
 */
START_TEST(test_refund_of_credit_paid_fee_goes_back_to_grant)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "ur", shanghai, "0.06");
    add_grant(cat, "trial", "ur", "3000.00", "2026-01-01T00:00:00+08:00",
              "2026-02-15T00:00:00+08:00", BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0);
    add_cancelled_monthly(cat, "ur");
    r = new_rater(cat);
    assert_credit_part(r, "ur", 2026, 1,
                       "credit trial 2599.00 left 401.00\n"
                       "subtotal 2599.00 credits 2599.00 tax 0.00@0.06 total 0.00\n");
    assert_credit_part(r, "ur", 2026, 2,
                       "returned trial 335.35 left 736.35\n"
                       "expired trial 736.35\n"
                       "subtotal -335.35 credits 0.00 tax 0.00@0.06 total 0.00\n");
    assert_balance(r, "ur", "2026-02-03T00:00:00+08:00", "736.35");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* A billing_grant_fn: "GRANT REMAINING EXPIRES" lines appended to the 512-byte text @arg. */
static int list_grant(void *arg, const char *grant, const char *remaining,
                      billing_time_t expires_at)
{
    char when[40];
    char *t = arg;
    size_t n = strlen(t);

    billing_time_format(expires_at, when, sizeof(when));
    snprintf(t + n, 512 - n, "%s %s %s\n", grant, remaining, when);
    return 0;
}

/*
 * billing_rater_credit_grants: the grants valid at the instant with what
 * each has left, the terms billing_rater_credit_balance adds up (the
 * refund's 335.35 back in "trial", "promo" untouched); an expired grant
 * is left out.
 */
START_TEST(test_credit_grants_are_the_terms_of_the_balance)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char t[512] = "";

    tu_account(cat, "ur", shanghai, "0.06");
    add_grant(cat, "trial", "ur", "3000.00", "2026-01-01T00:00:00+08:00",
              "2026-02-15T00:00:00+08:00", BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0);
    add_grant(cat, "promo", "ur", "50.00", "2026-02-01T00:00:00+08:00", "2026-03-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 1);
    add_cancelled_monthly(cat, "ur");
    r = new_rater(cat);
    assert_balance(r, "ur", "2026-02-03T00:00:00+08:00", "786.35");
    ck_assert_int_eq(
        billing_rater_credit_grants(r, "ur", tu_time("2026-02-03T00:00:00+08:00"), list_grant, t),
        BILLING_OK);
    ck_assert_str_eq(t, "trial 736.35 2026-02-14T16:00:00Z\npromo 50.00 2026-02-28T16:00:00Z\n");
    t[0] = '\0';
    ck_assert_int_eq(
        billing_rater_credit_grants(r, "ur", tu_time("2026-02-20T00:00:00+08:00"), list_grant, t),
        BILLING_OK);
    ck_assert_str_eq(t, "promo 50.00 2026-02-28T16:00:00Z\n");
    ck_assert_int_eq(billing_rater_credit_grants(r, "nobody", 0, list_grant, t),
                     BILLING_ERR_UNKNOWN_ACCOUNT);
    ck_assert_int_eq(billing_rater_credit_grants(r, "ur", 0, NULL, t), BILLING_ERR_INVALID);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A fee paid partly with credit: the grant (1000.00) paid 1000/2599 of
 * the fee, so it gets back 335.35... x 1000/2599 = 10396000/80569 =
 * 129.03; the other 206.32 was money and is carried to the account credit.
 */
START_TEST(test_refund_of_part_credit_paid_fee_splits)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "up", shanghai, "0");
    add_grant(cat, "trial", "up", "1000.00", "2026-01-01T00:00:00+08:00",
              "2026-02-15T00:00:00+08:00", BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0);
    add_cancelled_monthly(cat, "up");
    r = new_rater(cat);
    assert_credit_part(r, "up", 2026, 1,
                       "credit trial 1000.00 left 0.00\n"
                       "subtotal 2599.00 credits 1000.00 tax 0.00@0 total 1599.00\n");
    assert_credit_part(r, "up", 2026, 2,
                       "returned trial 129.03 left 129.03\n"
                       "expired trial 129.03\n"
                       "account credit 0.00 carried 206.32 left 206.32\n"
                       "subtotal -335.35 credits 0.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Credit given back to a grant that has already expired (Jan 20) expires
 * at once: it is listed as expired on the invoice that gives it back.
 */
START_TEST(test_refund_to_expired_grant_expires)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "uz", shanghai, "0");
    add_grant(cat, "trial", "uz", "3000.00", "2026-01-01T00:00:00+08:00",
              "2026-01-20T00:00:00+08:00", BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0);
    add_cancelled_monthly(cat, "uz");
    r = new_rater(cat);
    assert_credit_part(r, "uz", 2026, 1,
                       "credit trial 2599.00 left 401.00\n"
                       "expired trial 401.00\n"
                       "subtotal 2599.00 credits 2599.00 tax 0.00@0 total 0.00\n");
    /* Left: only what came back (issue 23, 10); January's 401.00 expired on January's invoice. */
    assert_credit_part(r, "uz", 2026, 2,
                       "returned trial 335.35 left 335.35\n"
                       "expired trial 335.35\n"
                       "subtotal -335.35 credits 0.00 tax 0.00@0 total 0.00\n");
    assert_balance(r, "uz", "2026-02-03T00:00:00+08:00", "0");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A refund in the month of its fee is netted with the fee in the fee's
 * epoch. A fees-only grant valid Feb 1-10 pays a term from Feb 2 (28 days)
 * cancelled on Feb 16: 2599 - 1299.50 = 1299.50, not the 1152.00 of usage
 * after its window too (the refund was netted in the cancellation's epoch,
 * outside the window, so the grant paid 2451.50).
 */
START_TEST(test_same_month_refund_nets_with_its_fee)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "un", shanghai, "0");
    add_grant(cat, "G", "un", "3000.00", "2026-02-01T00:00:00+08:00", "2026-02-10T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 0);
    add_sub(cat, "un", "rtx-monthly", "2026-02-02T00:00:00+08:00", "2026-02-16T00:00:00+08:00");
    r = new_rater(cat);
    ADD(r, "u1", "un", "i-x", "gpu", "2026-02-17T00:00:00+08:00", "2026-02-27T00:00:00+08:00", "8");
    assert_credit_part(r, "un", 2026, 2,
                       "credit G 1299.50 left 1700.50\n"
                       "expired G 1700.50\n"
                       "subtotal 2451.50 credits 1299.50 tax 0.00@0 total 1152.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A grant pays from granted_at inclusive to expires_at exclusive: usage
 * that ends exactly at granted_at is not paid, usage from granted_at is;
 * of a run across expires_at only the hour before it is.
 */
START_TEST(test_credit_at_exact_window_bounds)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "ub", shanghai, "0");
    add_grant(cat, "trial", "ub", "10.00", "2026-01-10T00:00:00+08:00", "2026-02-09T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    ADD(r, "b1", "ub", "i-1", "gpu", "2026-01-09T22:00:00+08:00", "2026-01-10T00:00:00+08:00", "1");
    ADD(r, "b2", "ub", "i-1", "gpu", "2026-01-10T00:00:00+08:00", "2026-01-10T01:00:00+08:00", "1");
    ADD(r, "b3", "ub", "i-1", "gpu", "2026-02-08T23:00:00+08:00", "2026-02-09T01:00:00+08:00", "1");
    assert_credit_part(r, "ub", 2026, 1,
                       "credit trial 0.60 left 9.40\n"
                       "subtotal 1.80 credits 0.60 tax 0.00@0 total 1.20\n");
    assert_credit_part(r, "ub", 2026, 2,
                       "credit trial 0.60 left 8.80\n"
                       "expired trial 8.80\n"
                       "subtotal 1.20 credits 0.60 tax 0.00@0 total 0.60\n");
    /* The live balance counts the grant from granted_at, not at expires_at. */
    assert_balance(r, "ub", "2026-01-09T23:59:59.999999999+08:00", "0");
    assert_balance(r, "ub", "2026-01-10T00:00:00+08:00", "9.4");
    assert_balance(r, "ub", "2026-02-08T23:59:59.999999999+08:00", "8.8");
    assert_balance(r, "ub", "2026-02-09T00:00:00+08:00", "0");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* At expires_at a grant is gone: the credit is exhausted at once. */
/* The balance of @acct at @when as a string (the caller frees). */
static char *balance_text(billing_rater *r, const char *acct, const char *when)
{
    char buf[64];

    ck_assert_int_eq(billing_rater_credit_balance(r, acct, tu_time(when), buf, sizeof(buf)),
                     BILLING_OK);
    return strdup(buf);
}

/* A rater for "um" of @cat with events e1 and, when @both, e2 (February's usage). */
static billing_rater *um_rater(billing_catalog *cat, int both)
{
    billing_rater *r = new_rater(cat);

    ADD(r, "e1", "um", "i-1", "gpu", "2026-01-20T00:00:00+08:00", "2026-01-20T02:00:00+08:00", "1");
    ADD(r, "e2a", "um", "i-1", "gpu", "2026-02-02T00:00:00+08:00", "2026-02-02T03:00:00+08:00",
        "1");
    if (both)
        ADD(r, "e2", "um", "i-1", "gpu", "2026-02-03T00:00:00+08:00", "2026-02-03T04:00:00+08:00",
            "2");
    return r;
}

/*
 * The live credit of a month is kept between the balance, the grants,
 * the exhaustion and the invoice of that month (one computation per
 * request): it must follow every event added and every issued month
 * given, and the invoice asked first must leave the same balance a fresh
 * rater gives (with and without charges in the month asked).
 */
START_TEST(test_live_credit_kept_follows_the_rater)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_rater *fresh;
    billing_invoice *inv = NULL;
    billing_issued_row row = {2026, 1, "trial", "100"};
    const char *feb = "2026-02-10T00:00:00+08:00";
    const char *mar = "2026-03-10T00:00:00+08:00";
    char err[256];
    char *a;
    char *b;
    char *c;

    tu_account(cat, "um", shanghai, "0");
    add_grant(cat, "trial", "um", "10.00", "2026-01-01T00:00:00+08:00", "2026-04-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    /* The invoice first, then the balance (a month with charges, then one without). */
    r = um_rater(cat, 0);
    fresh = um_rater(cat, 0);
    ck_assert_int_eq(billing_rater_invoice(r, "um", 2026, 2, &inv, err, sizeof(err)), BILLING_OK);
    billing_invoice_destroy(inv);
    a = balance_text(r, "um", feb);
    b = balance_text(fresh, "um", feb);
    ck_assert_str_eq(a, b);
    ck_assert_str_ne(a, "10"); /* the usage is paid from the grant */
    free(a);
    free(b);
    ck_assert_int_eq(billing_rater_invoice(r, "um", 2026, 3, &inv, err, sizeof(err)), BILLING_OK);
    billing_invoice_destroy(inv);
    a = balance_text(r, "um", mar);
    b = balance_text(fresh, "um", mar);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    billing_rater_destroy(fresh);
    /* An event added after the balance was kept: the balance follows it. */
    a = balance_text(r, "um", feb);
    ADD(r, "e2", "um", "i-1", "gpu", "2026-02-03T00:00:00+08:00", "2026-02-03T04:00:00+08:00", "2");
    b = balance_text(r, "um", feb);
    ck_assert_str_ne(a, b);
    fresh = um_rater(cat, 1);
    c = balance_text(fresh, "um", feb);
    ck_assert_str_eq(b, c);
    free(a);
    free(c);
    /* January issued as taking 1.00 of the grant (less than its usage): the balance follows. */
    ck_assert_int_eq(billing_rater_credit_issued(r, "um", 1, &row, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_rater_credit_issued(fresh, "um", 1, &row, err, sizeof(err)),
                     BILLING_OK);
    a = balance_text(r, "um", feb);
    c = balance_text(fresh, "um", feb);
    ck_assert_str_ne(a, b);
    ck_assert_str_eq(a, c);
    free(a);
    free(b);
    free(c);
    billing_rater_destroy(fresh);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

START_TEST(test_exhaustion_at_expiry_instant)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[1];

    tu_account(cat, "ux", shanghai, "0");
    add_grant(cat, "trial", "ux", "10.00", "2026-01-10T00:00:00+08:00", "2026-02-09T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    evs[0] = running(BILLING_METER_GPU, "8");
    ck_assert(exhaustion(r, "ux", "2026-02-09T00:00:00+08:00", evs, 1) ==
              tu_time("2026-02-09T00:00:00+08:00"));
    /* One nanosecond earlier the grant still burns, until it expires. */
    ck_assert(exhaustion(r, "ux", "2026-02-08T23:59:59.999999999+08:00", evs, 1) ==
              tu_time("2026-02-09T00:00:00+08:00"));
    billing_event_destroy(evs[0]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * 7 GPUs burn 4.20 an hour: 10.00 lasts 50/21 h = 8571428571428.57 ns,
 * rounded down so the answer is never late.
 */
START_TEST(test_exhaustion_rounds_down_to_the_nanosecond)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[1];

    tu_account(cat, "un", shanghai, "0");
    add_grant(cat, "trial", "un", "10.00", "2026-01-10T00:00:00+08:00", "2026-02-09T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    evs[0] = running(BILLING_METER_GPU, "7");
    ck_assert(exhaustion(r, "un", "2026-01-10T10:00:00+08:00", evs, 1) ==
              tu_time("2026-01-10T10:00:00+08:00") + INT64_C(8571428571428));
    billing_event_destroy(evs[0]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * 1000 GB of disk burns 200.00 per local month. From Jan 17 00:00 the 15
 * days left of January's 31 burn 3000/31, leaving 100/31 of 100.00; at
 * February's rate (28 days) that lasts 14/31 day = 39019354838709.68 ns.
 */
START_TEST(test_exhaustion_across_month_start_with_storage)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[1];

    tu_account(cat, "us", shanghai, "0");
    add_grant(cat, "pre", "us", "100.00", "2026-01-01T00:00:00+08:00", "2026-06-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    evs[0] = running(BILLING_METER_STORAGE, "1000");
    ck_assert(exhaustion(r, "us", "2026-01-17T00:00:00+08:00", evs, 1) ==
              tu_time("2026-02-01T00:00:00+08:00") + INT64_C(39019354838709));
    billing_event_destroy(evs[0]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Across a grant's expiry, with 4 GPUs (2.40/h) and 1000 GB of disk
 * (200/744 per hour in January) burning 1241/465 an hour. "short" (10.00,
 * priority 1) expires at 12:00; "long" (10.00, priority 0) lasts. From
 * 10:00 the two hours to 12:00 are paid by the grant that expires first,
 * so "long" is whole at 12:00 and lasts 4650/1241 h more:
 * 13489121676067.69 ns. Spending "long" first (priority order) let 10.00
 * of "short" expire and ran out 1.75 h after noon instead.
 */
START_TEST(test_exhaustion_across_grant_expiry_with_storage)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[2];

    tu_account(cat, "ue", shanghai, "0");
    add_grant(cat, "long", "ue", "10.00", "2026-01-01T00:00:00+08:00", "2026-06-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_grant(cat, "short", "ue", "10.00", "2026-01-01T00:00:00+08:00", "2026-01-10T12:00:00+08:00",
              BILLING_CHARGE_USAGE, 1);
    r = new_rater(cat);
    evs[0] = running(BILLING_METER_GPU, "4");
    evs[1] = running(BILLING_METER_STORAGE, "1000");
    ck_assert(exhaustion(r, "ue", "2026-01-10T10:00:00+08:00", evs, 2) ==
              tu_time("2026-01-10T12:00:00+08:00") + INT64_C(13489121676067));
    billing_event_destroy(evs[0]);
    billing_event_destroy(evs[1]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * The exhaustion instant and the invoice agree. "long" (priority 0, 10.00)
 * and "short" (priority 1, 10.00, until 12:00); 8 GPUs burn 4.80 an hour
 * from 10:00. The walk spends "short" first (9.60 by noon, 0.40 expires),
 * then "long" lasts 2 h 5 min: 14:05. Running exactly until then costs
 * 19.60, and the invoice pays all of it: "short" 9.60 before noon, "long"
 * 10.00, total 0.00, balance 0.
 */
START_TEST(test_exhaustion_agrees_with_invoice)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[1];

    tu_account(cat, "ua", shanghai, "0");
    add_grant(cat, "long", "ua", "10.00", "2026-01-01T00:00:00+08:00", "2026-06-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_grant(cat, "short", "ua", "10.00", "2026-01-01T00:00:00+08:00", "2026-01-10T12:00:00+08:00",
              BILLING_CHARGE_USAGE, 1);
    r = new_rater(cat);
    evs[0] = running(BILLING_METER_GPU, "8");
    ck_assert(exhaustion(r, "ua", "2026-01-10T10:00:00+08:00", evs, 1) ==
              tu_time("2026-01-10T14:05:00+08:00"));
    ADD(r, "a1", "ua", "i-1", "gpu", "2026-01-10T10:00:00+08:00", "2026-01-10T14:05:00+08:00", "8");
    assert_credit_part(r, "ua", 2026, 1,
                       "credit long 10.00 left 0.00\n"
                       "credit short 9.60 left 0.40\n"
                       "expired short 0.40\n"
                       "subtotal 19.60 credits 19.60 tax 0.00@0 total 0.00\n");
    assert_balance(r, "ua", "2026-01-10T14:05:00+08:00", "0");
    billing_event_destroy(evs[0]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A grant that starts later adds to the credit from its start: 2.00 at
 * 0.60/h would be gone at 13:20, but at 12:00 a 10.00 grant starts, so
 * 0.80 + 10.00 last 18 h more: Jan 11 06:00. The walk used to ignore
 * grants not yet started and answered 13:20.
 */
START_TEST(test_exhaustion_counts_a_grant_starting_later)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[1];

    tu_account(cat, "ul", shanghai, "0");
    add_grant(cat, "now", "ul", "2.00", "2026-01-01T00:00:00+08:00", "2026-06-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_grant(cat, "later", "ul", "10.00", "2026-01-10T12:00:00+08:00", "2026-06-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    evs[0] = running(BILLING_METER_GPU, "1");
    ck_assert(exhaustion(r, "ul", "2026-01-10T10:00:00+08:00", evs, 1) ==
              tu_time("2026-01-11T06:00:00+08:00"));
    billing_event_destroy(evs[0]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Allocation against an independent maximum (min cut)                     */
/* ---------------------------------------------------------------------- */

#define RND_GRANTS 4
#define RND_EVENTS 6

typedef struct rnd_case {
    int n_grants;
    int from[RND_GRANTS]; /* window [from, to) in days of March 2026 (32 = Apr 1) */
    int to[RND_GRANTS];
    long amount[RND_GRANTS]; /* cents */
    int priority[RND_GRANTS];
    int order[RND_GRANTS]; /* application order */
    int n_events;
    int day[RND_EVENTS];
    long cents[RND_EVENTS];
} rnd_case;

/* Application order: priority, then earliest expiry, then earliest grant, then id. */
static int before_in_order(const rnd_case *c, int x, int y)
{
    if (c->priority[x] != c->priority[y])
        return c->priority[x] < c->priority[y];
    if (c->to[x] != c->to[y])
        return c->to[x] < c->to[y];
    if (c->from[x] != c->from[y])
        return c->from[x] < c->from[y];
    return x < y;
}

/*
 * The most credit the grants in @set (a bit mask) can pay, by max-flow
 * min-cut: over every subset X of them, the grants outside X give their
 * amount and the charges any grant in X may pay give theirs; the least
 * such sum is the maximum.
 */
static long max_credit(const rnd_case *c, unsigned set)
{
    long best = -1;
    long cut;
    unsigned x;
    int g;
    int e;
    int reach;

    for (x = 0; x < (1u << c->n_grants); x++) {
        if ((x & ~set) != 0)
            continue;
        cut = 0;
        for (g = 0; g < c->n_grants; g++)
            cut += ((set >> g) & 1u) && !((x >> g) & 1u) ? c->amount[g] : 0;
        for (e = 0; e < c->n_events; e++) {
            reach = 0;
            for (g = 0; g < c->n_grants; g++)
                reach |= ((x >> g) & 1u) && c->from[g] <= c->day[e] && c->day[e] < c->to[g];
            cut += reach ? c->cents[e] : 0;
        }
        if (best < 0 || cut < best)
            best = cut;
    }
    return best;
}

static void rnd_make(rnd_case *c, uint64_t *rng)
{
    int g;
    int h;
    int e;
    int t;

    c->n_grants = 2 + (int)(test_rnd(rng) % (RND_GRANTS - 1));
    for (g = 0; g < c->n_grants; g++) {
        c->from[g] = 1 + (int)(test_rnd(rng) % 28);
        c->to[g] = c->from[g] + 1 + (int)(test_rnd(rng) % (uint64_t)(32 - c->from[g]));
        c->amount[g] = 100 * (1 + (long)(test_rnd(rng) % 60));
        c->priority[g] = (int)(test_rnd(rng) % 3);
        c->order[g] = g;
    }
    for (g = 1; g < c->n_grants; g++) {
        for (h = g; h > 0 && before_in_order(c, c->order[h], c->order[h - 1]); h--) {
            t = c->order[h];
            c->order[h] = c->order[h - 1];
            c->order[h - 1] = t;
        }
    }
    c->n_events = 1 + (int)(test_rnd(rng) % RND_EVENTS);
    for (e = 0; e < c->n_events; e++) {
        c->day[e] = 1 + (int)(test_rnd(rng) % 31);
        c->cents[e] = 10 * (1 + (long)(test_rnd(rng) % 600)); /* 10 GPUs: 0.10 a minute */
    }
}

/* Build the account of case @c; returns the rater. */
static billing_rater *rnd_rater(billing_catalog *cat, const rnd_case *c)
{
    billing_rater *r;
    char id[16];
    char amount[32];
    char from[40];
    char to[40];
    char start[64];
    char end[64];
    int g;
    int e;

    tu_account(cat, "ur", shanghai, "0");
    for (g = 0; g < c->n_grants; g++) {
        snprintf(id, sizeof(id), "g%d", g);
        snprintf(amount, sizeof(amount), "%ld.%02ld", c->amount[g] / 100, c->amount[g] % 100);
        snprintf(from, sizeof(from), "2026-03-%02dT00:00:00+08:00", c->from[g]);
        if (c->to[g] == 32)
            snprintf(to, sizeof(to), "2026-04-01T00:00:00+08:00");
        else
            snprintf(to, sizeof(to), "2026-03-%02dT00:00:00+08:00", c->to[g]);
        add_grant(cat, id, "ur", amount, from, to, BILLING_CHARGE_USAGE, c->priority[g]);
    }
    r = new_rater(cat);
    for (e = 0; e < c->n_events; e++) {
        snprintf(id, sizeof(id), "e%d", e);
        snprintf(start, sizeof(start), "2026-03-%02dT10:00:00+08:00", c->day[e]);
        snprintf(end, sizeof(end), "2026-03-%02dT%02ld:%02ld:00+08:00", c->day[e],
                 10 + c->cents[e] / 10 / 60, c->cents[e] / 10 % 60);
        ADD(r, id, "ur", "i-1", "gpu", start, end, "10");
    }
    return r;
}

/* Minor units of a decimal with two places. */
static long cents_of(const char *text)
{
    long whole = 0;
    long frac = 0;
    int neg = text[0] == '-';

    ck_assert_int_eq(sscanf(text + neg, "%ld.%2ld", &whole, &frac), 2);
    return (neg ? -1 : 1) * (whole * 100 + frac);
}

/*
 * Random grants and usage in one month: the grants together pay the most
 * they can (min cut), and the k-th grant in application order pays what
 * the first k can pay minus what the first k - 1 can (the greedy vector).
 */
START_TEST(test_allocation_is_maximal_and_in_order)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_invoice *inv;
    billing_rater *r;
    rnd_case c;
    uint64_t rng = UINT64_C(0x9e3779b97f4a7c15) + (uint64_t)_i * 7919;
    char err[256];
    long paid[RND_GRANTS] = {0};
    long total = 0;
    long want;
    unsigned set = 0;
    size_t i;
    int k;

    rnd_make(&c, &rng);
    r = rnd_rater(cat, &c);
    ck_assert_int_eq(billing_rater_invoice(r, "ur", 2026, 3, &inv, err, sizeof(err)), BILLING_OK);
    for (i = 0; i < billing_invoice_credit_count(inv); i++)
        paid[billing_invoice_credit_grant(inv, i)[1] - '0'] =
            cents_of(billing_invoice_credit_amount(inv, i));
    for (k = 0; k < c.n_grants; k++) {
        want = -max_credit(&c, set);
        set |= 1u << c.order[k];
        want += max_credit(&c, set);
        ck_assert_msg(paid[c.order[k]] == want, "case %d: grant g%d paid %ld, expected %ld", _i,
                      c.order[k], paid[c.order[k]], want);
        total += want;
    }
    ck_assert_int_eq(cents_of(billing_invoice_credits(inv)), total);
    ck_assert_int_eq(cents_of(billing_invoice_total(inv)),
                     cents_of(billing_invoice_subtotal(inv)) - total);
    billing_invoice_destroy(inv);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Issue 23: the rules of doc/pricing.md that verification had to guess   */
/* ---------------------------------------------------------------------- */

/* Subscription @id of one term on its own resource (named after it). */
static void add_sub_id(billing_catalog *cat, const char *id, const char *acct, const char *plan,
                       const char *start, const char *cancelled)
{
    char err[256];
    billing_time_t when = cancelled ? tu_time(cancelled) : 0;

    ck_assert_msg(billing_catalog_add_subscription(cat, id, acct, id, plan, tu_time(start), 1,
                                                   cancelled ? &when : NULL, err,
                                                   sizeof(err)) == BILLING_OK,
                  "%s", err);
}

/* The invoice's whole text contains @needle. */
static void assert_invoice_has(billing_rater *r, const char *acct, int y, int m, const char *needle)
{
    char *text = tu_invoice_text(r, acct, y, m);

    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, needle) != NULL, "'%s' not in:\n%s", needle, text);
    free(text);
}

/*
 * Returned credit over three grants, in every rounding mode. Three fees
 * grants of 10.00 each pay a refundable 30.00 day pass from Jan 31 12:00
 * (one third each); it is cancelled 28 804 s before its end, so February
 * refunds 30 x 28804/86400 = 10.00138... and each grant's exact share is
 * a third of that, 3.333796... The grants get the running sum of the
 * negative shares, rounded with the line's mode, in application order
 * (g1, g2, g3: priorities 0, 1, 2, though added as g3, g1, g2), so
 * together exactly the refund line. Rounding each share alone would give
 * 9.99 (half-up, half-even, down, ceiling) or 10.02 (up, floor).
 */
typedef struct mode_case {
    billing_rounding mode;
    const char *line; /* the refund line, rounded */
    const char *february;
} mode_case;

#define RETURNED_FEB(a, b, c, line)                                                         \
    "returned g1 " a " left " a "\nreturned g2 " b " left " b "\nreturned g3 " c " left " c \
    "\nexpired g1 " a "\nexpired g2 " b "\nexpired g3 " c "\nsubtotal " line                \
    " credits 0.00 tax 0.00@0 total 0.00\n"

static const mode_case mode_cases[] = {
    {BILLING_ROUND_HALF_UP, "-10.00", RETURNED_FEB("3.33", "3.34", "3.33", "-10.00")},
    {BILLING_ROUND_HALF_EVEN, "-10.00", RETURNED_FEB("3.33", "3.34", "3.33", "-10.00")},
    {BILLING_ROUND_DOWN, "-10.00", RETURNED_FEB("3.33", "3.33", "3.34", "-10.00")},
    {BILLING_ROUND_UP, "-10.01", RETURNED_FEB("3.34", "3.33", "3.34", "-10.01")},
    {BILLING_ROUND_FLOOR, "-10.01", RETURNED_FEB("3.34", "3.33", "3.34", "-10.01")},
    {BILLING_ROUND_CEILING, "-10.00", RETURNED_FEB("3.33", "3.33", "3.34", "-10.00")},
};

START_TEST(test_returned_credit_is_a_running_sum_in_every_mode)
{
    const mode_case *mc = &mode_cases[_i];
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];
    char needle[64];

    ck_assert_int_eq(billing_catalog_set_currency(cat, "CNY", mc->mode, err, sizeof(err)),
                     BILLING_OK);
    add_day_plan(cat, "day30", "30.00", 1);
    tu_account(cat, "ug", shanghai, "0");
    add_grant(cat, "g3", "ug", "10.00", "2026-01-01T00:00:00+08:00", "2026-03-01T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 2);
    add_grant(cat, "g1", "ug", "10.00", "2026-01-01T00:00:00+08:00", "2026-03-01T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 0);
    add_grant(cat, "g2", "ug", "10.00", "2026-01-01T00:00:00+08:00", "2026-03-01T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 1);
    add_sub(cat, "ug", "day30", "2026-01-31T12:00:00+08:00", "2026-02-01T03:59:56+08:00");
    r = new_rater(cat);
    assert_credit_part(r, "ug", 2026, 1,
                       "credit g1 10.00 left 0.00\ncredit g2 10.00 left 0.00\n"
                       "credit g3 10.00 left 0.00\n"
                       "subtotal 30.00 credits 30.00 tax 0.00@0 total 0.00\n");
    snprintf(needle, sizeof(needle), "qty=28804 second @ = -7201/720 -> %s\n", mc->line);
    assert_invoice_has(r, "ug", 2026, 2, needle);
    assert_credit_part(r, "ug", 2026, 2, mc->february);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Account credit on an account without any grant: February's refund
 * (1299.50) is larger than its usage (48.00), so 1251.50 is carried;
 * March and April each spend 4.80 of it. April is asked for first, so
 * that it replays February and March itself.
 */
START_TEST(test_account_credit_without_any_grant)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *evs[1];

    tu_account(cat, "u0", shanghai, "0.06");
    add_sub(cat, "u0", "rtx-monthly", "2026-01-31T10:00:00+08:00", "2026-02-14T10:00:00+08:00");
    r = new_rater(cat);
    ADD(r, "f1", "u0", "i-x", "gpu", "2026-02-20T00:00:00+08:00", "2026-02-20T10:00:00+08:00", "8");
    ADD(r, "m1", "u0", "i-x", "gpu", "2026-03-05T00:00:00+08:00", "2026-03-05T01:00:00+08:00", "8");
    ADD(r, "a1", "u0", "i-x", "gpu", "2026-04-05T00:00:00+08:00", "2026-04-05T01:00:00+08:00", "8");
    assert_credit_part(r, "u0", 2026, 4,
                       "account credit 4.80 carried 0.00 left 1241.90\n"
                       "subtotal 4.80 credits 0.00 tax 0.00@0.06 total 0.00\n");
    assert_credit_part(r, "u0", 2026, 1,
                       "subtotal 2599.00 credits 0.00 tax 155.94@0.06 total 2754.94\n");
    assert_credit_part(r, "u0", 2026, 2,
                       "account credit 0.00 carried 1251.50 left 1251.50\n"
                       "subtotal -1251.50 credits 0.00 tax 0.00@0.06 total 0.00\n");
    assert_credit_part(r, "u0", 2026, 3,
                       "account credit 4.80 carried 0.00 left 1246.70\n"
                       "subtotal 4.80 credits 0.00 tax 0.00@0.06 total 0.00\n");
    assert_balance(r, "u0", "2026-02-13T00:00:00+08:00", "1251.5");
    assert_balance(r, "u0", "2026-03-06T00:00:00+08:00", "1246.7");
    /* 1246.70 at 4.80 an hour lasts 259 h 43 min 45 s. */
    evs[0] = running(BILLING_METER_GPU, "8");
    ck_assert(exhaustion(r, "u0", "2026-03-06T00:00:00+08:00", evs, 1) ==
              tu_time("2026-03-16T19:43:45+08:00"));
    billing_event_destroy(evs[0]);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Rule: a grant's part of a refund counts only what it paid of FEES, not
 * of usage. A (usage and fees, 1000.00, priority 0) and B (fees only,
 * 3000.00, priority 1) pay January's 600.00 of usage and the 2599.00
 * fee: A pays the usage (which B cannot) and 400.00 of the fee, B
 * 2199.00. The fee refunded in February (4/31 of it, 10396/31 = 335.35)
 * goes back 400/2599 to A (1600/31 = 51.61) and the rest, 283.74, to B;
 * A's 1000.00 of all charges does not count.
 */
START_TEST(test_returned_credit_counts_fees_not_usage)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "uf", shanghai, "0");
    add_grant(cat, "A", "uf", "1000.00", "2026-01-01T00:00:00+08:00", "2026-02-15T00:00:00+08:00",
              BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0);
    add_grant(cat, "B", "uf", "3000.00", "2026-01-01T00:00:00+08:00", "2026-02-15T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 1);
    add_cancelled_monthly(cat, "uf");
    r = new_rater(cat);
    /* 1000 GPU-hour x 0.60 = 600.00 */
    ADD(r, "u1", "uf", "i-x", "gpu", "2026-01-10T00:00:00+08:00", "2026-01-15T05:00:00+08:00", "8");
    assert_credit_part(r, "uf", 2026, 1,
                       "credit A 1000.00 left 0.00\ncredit B 2199.00 left 801.00\n"
                       "subtotal 3199.00 credits 3199.00 tax 0.00@0 total 0.00\n");
    assert_credit_part(r, "uf", 2026, 2,
                       "returned A 51.61 left 51.61\nreturned B 283.74 left 1084.74\n"
                       "expired A 51.61\nexpired B 1084.74\n"
                       "subtotal -335.35 credits 0.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Rule: the fees a grant's part is counted from are those of the
 * refunded term's month AND credit epoch (the span between two grant
 * bounds that holds the term's start). Two 2599.00 terms start in
 * January: x on the 5th, paid by A (fees, Jan 1-10), and y on the 15th,
 * paid by B (fees, Jan 10-31). y is cancelled on Feb 1 (14 of its 31 days
 * unused: 2599 x 14/31 = 1173.74). All of it goes back to B, which paid
 * all of y's epoch; none to A, which paid the same month's other epoch
 * (one pool for the month would give each half). Both grants expired in
 * January, so what B gets back expires at once; "left" is only what came
 * back this month (issue 23, 10): the 401.00 expired on January's invoice.
 */
START_TEST(test_returned_credit_counts_fees_of_the_term_start_epoch)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "ue", shanghai, "0");
    add_grant(cat, "A", "ue", "3000.00", "2026-01-01T00:00:00+08:00", "2026-01-10T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 0);
    add_grant(cat, "B", "ue", "3000.00", "2026-01-10T00:00:00+08:00", "2026-01-31T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 0);
    add_sub_id(cat, "x", "ue", "rtx-monthly", "2026-01-05T00:00:00+08:00", NULL);
    add_sub_id(cat, "y", "ue", "rtx-monthly", "2026-01-15T00:00:00+08:00",
               "2026-02-01T00:00:00+08:00");
    r = new_rater(cat);
    assert_credit_part(r, "ue", 2026, 1,
                       "credit A 2599.00 left 401.00\ncredit B 2599.00 left 401.00\n"
                       "expired A 401.00\nexpired B 401.00\n"
                       "subtotal 5198.00 credits 5198.00 tax 0.00@0 total 0.00\n");
    assert_credit_part(r, "ue", 2026, 2,
                       "returned B 1173.74 left 1173.74\nexpired B 1173.74\n"
                       "subtotal -1173.74 credits 0.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Rule: the fees of the term's start are counted AFTER netting that
 * invoice's own refunds. January has two 2599.00 terms from Jan 5; x is
 * cancelled on Jan 22 (14 of 31 days unused: 2599 x 14/31 = 1173.74
 * refunded in January), y on Feb 1 (335.35 in February). The fees pool
 * of January is 5198.00 - 1173.74 = 4024.26, of which G paid 1000.00, so
 * G gets back 10396/31 x 1000/4024.26 = 83.333... -> 83.33, and 252.02 is
 * the customer's; counted before netting (1000/5198) it would be 64.52.
 */
START_TEST(test_returned_credit_counts_fees_after_netting)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "uq", shanghai, "0");
    add_grant(cat, "G", "uq", "1000.00", "2026-01-01T00:00:00+08:00", "2026-01-31T00:00:00+08:00",
              BILLING_CHARGE_SUBSCRIPTION, 0);
    add_sub_id(cat, "x", "uq", "rtx-monthly", "2026-01-05T00:00:00+08:00",
               "2026-01-22T00:00:00+08:00");
    add_sub_id(cat, "y", "uq", "rtx-monthly", "2026-01-05T00:00:00+08:00",
               "2026-02-01T00:00:00+08:00");
    r = new_rater(cat);
    assert_credit_part(r, "uq", 2026, 1,
                       "credit G 1000.00 left 0.00\n"
                       "subtotal 4024.26 credits 1000.00 tax 0.00@0 total 3024.26\n");
    assert_credit_part(r, "uq", 2026, 2,
                       "returned G 83.33 left 83.33\nexpired G 83.33\n"
                       "account credit 0.00 carried 252.02 left 252.02\n"
                       "subtotal -335.35 credits 0.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Rule: "already expired" means expired before the refund's month. A
 * grant that expired EARLIER IN the refund's own month (the trial ends
 * Feb 10, the cancellation is on Feb 14) gets its part back into its
 * remainder on that month's invoice, where it pays that month's charges
 * inside its window (48.00 of usage on Feb 5), before the rest expires
 * on the same invoice. The trial paid the whole 2599.00 fee in January;
 * February refunds 14/28 of it, 1299.50; the usage of Feb 20 is after
 * the window and is the customer's: total 48.00.
 */
START_TEST(test_returned_to_grant_expired_earlier_in_the_month)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "ux", shanghai, "0");
    add_grant(cat, "trial", "ux", "2599.00", "2026-01-01T00:00:00+08:00",
              "2026-02-10T00:00:00+08:00", BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0);
    add_sub(cat, "ux", "rtx-monthly", "2026-01-31T10:00:00+08:00", "2026-02-14T10:00:00+08:00");
    r = new_rater(cat);
    ADD(r, "f5", "ux", "i-x", "gpu", "2026-02-05T00:00:00+08:00", "2026-02-05T10:00:00+08:00", "8");
    ADD(r, "f20", "ux", "i-x", "gpu", "2026-02-20T00:00:00+08:00", "2026-02-20T10:00:00+08:00",
        "8");
    assert_credit_part(r, "ux", 2026, 1,
                       "credit trial 2599.00 left 0.00\n"
                       "subtotal 2599.00 credits 2599.00 tax 0.00@0 total 0.00\n");
    assert_credit_part(r, "ux", 2026, 2,
                       "credit trial 48.00 left 1251.50\n"
                       "returned trial 1299.50 left 1251.50\n"
                       "expired trial 1251.50\n"
                       "subtotal -1203.50 credits 48.00 tax 0.00@0 total 48.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Rule: "the month in which it expires" is the month of the grant's last
 * valid instant (expires_at - 1 ns). A grant expiring exactly at the
 * local start of March is listed as expired on FEBRUARY's invoice; one
 * expiring 1 ns later, on March's. (The library's months are the months
 * with charges; `billing rate` adds the invoice of a month whose only
 * news is an expiry.)
 */
START_TEST(test_grant_expiring_at_month_start_expires_in_month_before)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "ua", shanghai, "0");
    tu_account(cat, "ub", shanghai, "0");
    add_grant(cat, "ga", "ua", "10.00", "2026-02-01T00:00:00+08:00", "2026-03-01T00:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_grant(cat, "gb", "ub", "10.00", "2026-02-01T00:00:00+08:00",
              "2026-03-01T00:00:00.000000001+08:00", BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    ADD(r, "a1", "ua", "i-1", "gpu", "2026-02-10T00:00:00+08:00", "2026-02-10T01:00:00+08:00", "8");
    ADD(r, "b1", "ub", "i-1", "gpu", "2026-02-10T00:00:00+08:00", "2026-02-10T01:00:00+08:00", "8");
    assert_credit_part(r, "ua", 2026, 2,
                       "credit ga 4.80 left 5.20\nexpired ga 5.20\n"
                       "subtotal 4.80 credits 4.80 tax 0.00@0 total 0.00\n");
    assert_credit_part(r, "ua", 2026, 3, "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    assert_credit_part(r, "ub", 2026, 2,
                       "credit gb 4.80 left 5.20\n"
                       "subtotal 4.80 credits 4.80 tax 0.00@0 total 0.00\n");
    assert_credit_part(r, "ub", 2026, 3,
                       "expired gb 5.20\n"
                       "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Rule: a line cut at the bounds of several grants' windows at once is
 * cut at the rounded running sums of its parts in time order. A pays
 * usage in [10:00, 11:00), B in [11:00, 12:00): 11:00 is a bound of both.
 * One GPU from 09:59:20 to 11:00:40 is 0.00666... + 0.60 + 0.00666... =
 * 0.61333..., shown as 0.61. The running sums round to 0.01, 0.61, 0.61,
 * so the parts are 0.01 (before A), 0.60 (A) and 0.00 (B): A pays 0.60,
 * B nothing, the customer 0.01. Rounding each part alone would give
 * 0.01 + 0.60 + 0.01 = 0.62, more than the line.
 */
START_TEST(test_line_cut_at_several_grant_bounds_at_once)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "uc", shanghai, "0");
    add_grant(cat, "A", "uc", "10.00", "2026-01-05T10:00:00+08:00", "2026-01-05T11:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    add_grant(cat, "B", "uc", "10.00", "2026-01-05T11:00:00+08:00", "2026-01-05T12:00:00+08:00",
              BILLING_CHARGE_USAGE, 0);
    r = new_rater(cat);
    ADD(r, "c1", "uc", "i-1", "gpu", "2026-01-05T09:59:20+08:00", "2026-01-05T11:00:40+08:00", "1");
    assert_invoice_has(r, "uc", 2026, 1, "= 46/75 -> 0.61\n");
    assert_credit_part(r, "uc", 2026, 1,
                       "credit A 0.60 left 9.40\nexpired A 9.40\nexpired B 10.00\n"
                       "subtotal 0.61 credits 0.60 tax 0.00@0 total 0.01\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Catalog boundary: a grant's window must be at least 1 ns long.
 * granted_at == expires_at is refused, naming the grant; expires_at 1 ns
 * later is accepted (and pays the 1 ns of usage inside it: 0.00).
 */
START_TEST(test_grant_window_must_not_be_empty)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_time_t t = tu_time("2026-01-05T10:00:00+08:00");
    char err[256] = "";

    tu_account(cat, "uw", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_grant(cat, "empty", "uw", "10.00", t, t,
                                               BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_str_eq(err, "credit grant 'empty': field 'expires_at' must be after 'granted_at' "
                          "and both in range");
    ck_assert_int_eq(billing_catalog_add_grant(cat, "tiny", "uw", "10.00", t, t + 1,
                                               BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                     BILLING_OK);
    r = new_rater(cat);
    ADD(r, "w1", "uw", "i-1", "gpu", "2026-01-05T10:00:00+08:00", "2026-01-05T11:00:00+08:00", "1");
    assert_credit_part(r, "uw", 2026, 1,
                       "expired tiny 10.00\n"
                       "subtotal 0.60 credits 0.00 tax 0.00@0 total 0.60\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Property of the running sum (random cases, every rounding mode in
 * turn): 2 to 6 fees grants whose amounts add up to exactly a monthly
 * fee of 2599.00 (from Jan 20 03:00 UTC, 31 days) pay it in January; the
 * term is cancelled at a random nanosecond of February before its end.
 * On February's invoice the grants together get back exactly the refund
 * line (the line's rounded amount, negated), each grant's part is at
 * least 0 and within 2 minor units of its exact share (amount x unused /
 * term), and nothing is carried to the account credit.
 */
START_TEST(test_returned_credit_adds_up_to_the_refund_line)
{
    static const billing_rounding modes[] = {BILLING_ROUND_HALF_UP, BILLING_ROUND_HALF_EVEN,
                                             BILLING_ROUND_DOWN,    BILLING_ROUND_UP,
                                             BILLING_ROUND_FLOOR,   BILLING_ROUND_CEILING};
    const billing_time_t term = INT64_C(31) * 86400 * BILLING_NS_PER_SEC;
    billing_time_t start = tu_time("2026-01-20T03:00:00Z");
    billing_time_t feb;
    billing_time_t cancel;
    billing_zone *utc = tu_zone("UTC");
    billing_catalog *cat = tu_gpu_cloud();
    billing_invoice *inv;
    billing_rater *r;
    uint64_t rng = UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)(_i + 1) * 2654435761u;
    long cut[6];
    long amount[6];
    long returned;
    long part;
    int n = 2 + (int)(test_rnd(&rng) % 5);
    int g;
    int h;
    char id[16];
    char text[32];
    char err[256];
    mpq_t share;
    mpq_t diff;

    ck_assert_int_eq(billing_catalog_set_currency(cat, "CNY", modes[_i % 6], err, sizeof(err)),
                     BILLING_OK);
    tu_account(cat, "up", utc, "0");
    /* n - 1 distinct cut points in (0, 259900) cents, sorted: the amounts between them. */
    for (g = 0; g < n - 1; g++) {
        do {
            cut[g] = 1 + (long)(test_rnd(&rng) % 259899);
            for (h = 0; h < g && cut[h] != cut[g]; h++)
                ;
        } while (h < g);
        for (h = g; h > 0 && cut[h - 1] > cut[h]; h--) {
            long t = cut[h];
            cut[h] = cut[h - 1];
            cut[h - 1] = t;
        }
    }
    for (g = 0; g < n; g++) {
        amount[g] = (g == n - 1 ? 259900 : cut[g]) - (g == 0 ? 0 : cut[g - 1]);
        snprintf(id, sizeof(id), "g%d", g);
        snprintf(text, sizeof(text), "%ld.%02ld", amount[g] / 100, amount[g] % 100);
        add_grant(cat, id, "up", text, "2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z",
                  BILLING_CHARGE_SUBSCRIPTION, g);
    }
    feb = tu_time("2026-02-01T00:00:00Z");
    cancel = feb + (billing_time_t)(test_rnd(&rng) % (uint64_t)(start + term - feb));
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "s", "up", "i-s", "rtx-monthly", start,
                                                      1, &cancel, err, sizeof(err)),
                     BILLING_OK);
    r = new_rater(cat);
    ck_assert_int_eq(billing_rater_invoice(r, "up", 2026, 2, &inv, err, sizeof(err)), BILLING_OK);
    ck_assert_uint_eq(billing_invoice_line_count(inv), 1);
    ck_assert_uint_eq(billing_invoice_returned_count(inv), (size_t)n);
    mpq_init(share);
    mpq_init(diff);
    returned = 0;
    for (g = 0; g < n; g++) {
        snprintf(id, sizeof(id), "g%d", g);
        ck_assert_str_eq(billing_invoice_returned_grant(inv, (size_t)g), id);
        part = cents_of(billing_invoice_returned_amount(inv, (size_t)g));
        ck_assert_int_ge(part, 0);
        returned += part;
        /* |part - amount x unused / term| < 2 cents */
        mpq_set_si(share, amount[g], 1);
        mpz_mul_si(mpq_numref(share), mpq_numref(share), (long)(start + term - cancel));
        mpz_set_si(mpq_denref(share), (long)term);
        mpq_canonicalize(share);
        mpq_set_si(diff, part, 1);
        mpq_sub(diff, diff, share);
        mpq_abs(diff, diff);
        ck_assert_msg(mpq_cmp_si(diff, 2, 1) < 0, "grant g%d: %ld cents", g, part);
    }
    ck_assert_int_eq(returned, -cents_of(billing_invoice_line_amount_rounded(inv, 0)));
    ck_assert_int_eq(cents_of(billing_invoice_returned(inv)), returned);
    ck_assert_int_eq(cents_of(billing_invoice_carried(inv)), 0);
    ck_assert_int_eq(cents_of(billing_invoice_total(inv)), 0);
    mpq_clear(share);
    mpq_clear(diff);
    billing_invoice_destroy(inv);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_zone_destroy(utc);
}
END_TEST

static Suite *credit_suite(void)
{
    Suite *s = suite_create("credit");
    TCase *inv = tcase_create("invoice");
    TCase *live = tcase_create("live");

    tcase_add_checked_fixture(inv, setup, teardown);
    tcase_add_checked_fixture(live, setup, teardown);
    tcase_add_test(inv, test_covered_usage_leaves_nothing_to_pay);
    tcase_add_test(inv, test_credit_grants_are_the_terms_of_the_balance);
    tcase_add_test(inv, test_credit_pays_its_part_of_a_rounded_line);
    tcase_add_test(inv, test_grant_spent_first_on_what_later_grants_cannot_pay);
    tcase_add_test(inv, test_allocation_moves_earlier_grants);
    tcase_add_test(inv, test_allocation_move_bounded_by_earlier_payment);
    tcase_add_test(inv, test_refund_beyond_charges_becomes_account_credit);
    tcase_add_test(inv, test_credit_capped_at_subtotal_after_refund);
    tcase_add_test(inv, test_refund_of_credit_paid_fee_goes_back_to_grant);
    tcase_add_test(inv, test_refund_of_part_credit_paid_fee_splits);
    tcase_add_test(inv, test_refund_to_expired_grant_expires);
    tcase_add_test(inv, test_same_month_refund_nets_with_its_fee);
    tcase_add_test(inv, test_credit_at_exact_window_bounds);
    tcase_add_loop_test(inv, test_returned_credit_is_a_running_sum_in_every_mode, 0,
                        (int)(sizeof(mode_cases) / sizeof(mode_cases[0])));
    tcase_add_loop_test(inv, test_returned_credit_adds_up_to_the_refund_line, 0, 60);
    tcase_add_test(inv, test_account_credit_without_any_grant);
    tcase_add_test(inv, test_returned_credit_counts_fees_not_usage);
    tcase_add_test(inv, test_returned_credit_counts_fees_of_the_term_start_epoch);
    tcase_add_test(inv, test_returned_credit_counts_fees_after_netting);
    tcase_add_test(inv, test_returned_to_grant_expired_earlier_in_the_month);
    tcase_add_test(inv, test_grant_expiring_at_month_start_expires_in_month_before);
    tcase_add_test(inv, test_line_cut_at_several_grant_bounds_at_once);
    tcase_add_test(inv, test_grant_window_must_not_be_empty);
    tcase_add_test(live, test_exhaustion_at_expiry_instant);
    tcase_add_test(live, test_exhaustion_rounds_down_to_the_nanosecond);
    tcase_add_test(live, test_exhaustion_across_month_start_with_storage);
    tcase_add_test(live, test_exhaustion_across_grant_expiry_with_storage);
    tcase_add_test(live, test_exhaustion_counts_a_grant_starting_later);
    tcase_add_test(live, test_exhaustion_agrees_with_invoice);
    tcase_add_test(live, test_live_credit_kept_follows_the_rater);
    tcase_add_loop_test(inv, test_allocation_is_maximal_and_in_order, 0, 200);
    suite_add_tcase(s, inv);
    suite_add_tcase(s, live);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(credit_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
