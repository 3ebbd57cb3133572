/*
 * check_rating.c - the worked examples of doc/pricing.md, validation
 * errors, subscriptions, price changes and credit, through the public API.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static billing_zone *shanghai;
static billing_zone *new_york;

static void setup(void)
{
    shanghai = tu_zone("Asia/Shanghai");
    new_york = tu_zone("America/New_York");
}

static void teardown(void)
{
    billing_zone_destroy(shanghai);
    billing_zone_destroy(new_york);
}

/* The shared helpers under this file's short names. */
#define ADD TU_ADD
#define assert_invoice tu_assert_invoice
#define new_rater tu_new_rater

/* Example 1: a 3-hour run of an 8 x RTX 4090 instance, 6% tax. */
START_TEST(test_example_three_hour_run)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab-a", shanghai, "0.06");
    r = new_rater(cat);
    ADD(r, "e1", "lab-a", "i-1", "gpu", "2026-01-05T10:00:00+08:00", "2026-01-05T13:00:00+08:00",
        "8", "RTX4090");
    assert_invoice(
        r, "lab-a", 2026, 1,
        "lab-a 2026-01 CNY\n"
        "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=24 GPU-hour @0.6 = 14.4 -> 14.40\n"
        "subtotal 14.40 credits 0.00 tax 0.86@0.06 total 15.26\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Example 2: one GPU-less setup hour, then two hours with the 8 GPUs. */
START_TEST(test_example_gpuless_then_gpu)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab-b", shanghai, "0");
    r = new_rater(cat);
    ADD(r, "s1", "lab-b", "i-2", "gpuless", "2026-01-06T09:00:00+08:00",
        "2026-01-06T10:00:00+08:00", "1", "RTX4090");
    ADD(r, "g1", "lab-b", "i-2", "gpu", "2026-01-06T10:00:00+08:00", "2026-01-06T12:00:00+08:00",
        "8", "RTX4090");
    assert_invoice(r, "lab-b", 2026, 1,
                   "lab-b 2026-01 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=16 GPU-hour @0.6 = 9.6 -> 9.60\n"
                   "line 1 gpuless RTX4090 cn-east-1 plan= ver=v1 qty=1 instance-hour @0.48 = "
                   "0.48 -> 0.48\n"
                   "subtotal 10.08 credits 0.00 tax 0.00@0 total 10.08\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Example 3: a monthly subscription anchored on January 31. */
START_TEST(test_example_monthly_from_jan31)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    tu_account(cat, "lab-m", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "sub-1", "lab-m", "i-m", "rtx-monthly",
                                                      tu_time("2026-01-31T10:00:00+08:00"), 3, NULL,
                                                      err, sizeof(err)),
                     BILLING_OK);
    r = new_rater(cat);
    ADD(r, "m1", "lab-m", "i-m", "gpu", "2026-02-10T00:00:00+08:00", "2026-02-10T10:00:00+08:00",
        "8", "RTX4090");
    /* The third term ends 2026-04-30T10:00+08:00: one hour inside, one after. */
    ADD(r, "m2", "lab-m", "i-m", "gpu", "2026-04-30T09:00:00+08:00", "2026-04-30T11:00:00+08:00",
        "8", "RTX4090");
    assert_invoice(r, "lab-m", 2026, 1,
                   "lab-m 2026-01 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "subtotal 2599.00 credits 0.00 tax 0.00@0 total 2599.00\n");
    assert_invoice(r, "lab-m", 2026, 2,
                   "lab-m 2026-02 CNY\n"
                   "line 2 gpu RTX4090 cn-east-1 plan=rtx-monthly ver= qty=80 GPU-hour @0 = 0 -> "
                   "0.00\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "subtotal 2599.00 credits 0.00 tax 0.00@0 total 2599.00\n");
    assert_invoice(r, "lab-m", 2026, 3,
                   "lab-m 2026-03 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "subtotal 2599.00 credits 0.00 tax 0.00@0 total 2599.00\n");
    assert_invoice(r, "lab-m", 2026, 4,
                   "lab-m 2026-04 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=8 GPU-hour @0.6 = 4.8 -> 4.80\n"
                   "line 2 gpu RTX4090 cn-east-1 plan=rtx-monthly ver= qty=8 GPU-hour @0 = 0 -> "
                   "0.00\n"
                   "subtotal 4.80 credits 0.00 tax 0.00@0 total 4.80\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Example 4: a run across midnight at the end of January, Asia/Shanghai. */
START_TEST(test_example_month_end_midnight)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    int months[4];

    tu_account(cat, "lab-c", shanghai, "0");
    r = new_rater(cat);
    ADD(r, "x1", "lab-c", "i-3", "gpu", "2026-01-31T23:00:00+08:00", "2026-02-01T01:00:00+08:00",
        "8", "RTX4090");
    ck_assert_int_eq(tu_months(r, "lab-c", months, 4), 2);
    ck_assert_int_eq(months[0], 202601);
    ck_assert_int_eq(months[1], 202602);
    assert_invoice(r, "lab-c", 2026, 1,
                   "lab-c 2026-01 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=8 GPU-hour @0.6 = 4.8 -> 4.80\n"
                   "subtotal 4.80 credits 0.00 tax 0.00@0 total 4.80\n");
    assert_invoice(r, "lab-c", 2026, 2,
                   "lab-c 2026-02 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=8 GPU-hour @0.6 = 4.8 -> 4.80\n"
                   "subtotal 4.80 credits 0.00 tax 0.00@0 total 4.80\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Example 5: the spring-forward day in New York has 23 hours; March is
 * still exactly one month of storage. */
START_TEST(test_example_dst_new_york)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab-ny", new_york, "0");
    r = new_rater(cat);
    ADD(r, "d1", "lab-ny", "i-4", "gpu", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00",
        "8", "RTX4090");
    ADD(r, "d2", "lab-ny", "disk-1", "storage", "2026-03-01T00:00:00-05:00",
        "2026-04-01T00:00:00-04:00", "1000", NULL);
    assert_invoice(r, "lab-ny", 2026, 3,
                   "lab-ny 2026-03 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=184 GPU-hour @0.6 = 110.4 -> "
                   "110.40\n"
                   "line 1 storage * * plan= ver=v1 qty=1000 GB-month @0.2 = 200 -> 200.00\n"
                   "subtotal 310.40 credits 0.00 tax 0.00@0 total 310.40\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

static void add_trial(billing_catalog *cat, const char *acct)
{
    char err[256];

    ck_assert_int_eq(billing_catalog_add_grant(cat, "trial", acct, "10.00",
                                               tu_time("2026-01-10T00:00:00+08:00"),
                                               tu_time("2026-02-09T00:00:00+08:00"),
                                               BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                     BILLING_OK);
}

/* Example 6: 10.00 CNY of trial credit runs out 2 h 5 min into a 3-hour run. */
START_TEST(test_example_trial_credit_exhausted)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_event *running = billing_event_new();
    const billing_event *list[1];
    billing_time_t when;
    char buf[64];
    char err[256];

    tu_account(cat, "new-user", shanghai, "0");
    add_trial(cat, "new-user");
    r = new_rater(cat);
    /* Before any usage: the whole credit, gone at 12:05 with 8 GPUs running. */
    ck_assert_int_eq(billing_rater_credit_balance(
                         r, "new-user", tu_time("2026-01-10T10:00:00+08:00"), buf, sizeof(buf)),
                     BILLING_OK);
    ck_assert_str_eq(buf, "10");
    billing_event_set_meter(running, BILLING_METER_GPU);
    billing_event_set_quantity(running, "8", err, sizeof(err));
    billing_event_set_model(running, "RTX4090");
    billing_event_set_region(running, "cn-east-1");
    list[0] = running;
    ck_assert_int_eq(billing_rater_credit_exhaustion(r, "new-user",
                                                     tu_time("2026-01-10T10:00:00+08:00"), list, 1,
                                                     &when, err, sizeof(err)),
                     BILLING_OK);
    ck_assert(when == tu_time("2026-01-10T12:05:00+08:00"));
    ADD(r, "t1", "new-user", "i-5", "gpu", "2026-01-10T10:00:00+08:00", "2026-01-10T13:00:00+08:00",
        "8", "RTX4090");
    ck_assert_int_eq(billing_rater_credit_balance(
                         r, "new-user", tu_time("2026-01-10T13:00:00+08:00"), buf, sizeof(buf)),
                     BILLING_OK);
    ck_assert_str_eq(buf, "0");
    ck_assert_int_eq(billing_rater_credit_exhaustion(r, "new-user",
                                                     tu_time("2026-01-10T13:00:00+08:00"), list, 1,
                                                     &when, err, sizeof(err)),
                     BILLING_OK);
    ck_assert(when == tu_time("2026-01-10T13:00:00+08:00"));
    assert_invoice(
        r, "new-user", 2026, 1,
        "new-user 2026-01 CNY\n"
        "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=24 GPU-hour @0.6 = 14.4 -> 14.40\n"
        "credit trial 10.00 left 0.00\n"
        "subtotal 14.40 credits 10.00 tax 0.00@0 total 4.40\n");
    billing_event_destroy(running);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Example 7: a disk resized from 500 GB to 1000 GB in the middle of February. */
START_TEST(test_example_storage_resize)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab-s", shanghai, "0");
    r = new_rater(cat);
    ADD(r, "v1", "lab-s", "disk-9", "storage", "2026-02-01T00:00:00+08:00",
        "2026-02-15T00:00:00+08:00", "500", NULL);
    ADD(r, "v2", "lab-s", "disk-9", "storage", "2026-02-15T00:00:00+08:00",
        "2026-03-01T00:00:00+08:00", "1000", NULL);
    assert_invoice(r, "lab-s", 2026, 2,
                   "lab-s 2026-02 CNY\n"
                   "line 1 storage * * plan= ver=v1 qty=750 GB-month @0.2 = 150 -> 150.00\n"
                   "subtotal 150.00 credits 0.00 tax 0.00@0 total 150.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* A price change in the middle of a run splits it at the version boundary. */
START_TEST(test_price_change_splits_event)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    ck_assert_int_eq(billing_catalog_add_price_version(
                         cat, "v2", tu_time("2026-03-15T12:00:00+08:00"), err, sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v2", BILLING_METER_GPU, "RTX4090", "cn-east-1",
                                              "0.50", err, sizeof(err)),
                     BILLING_OK);
    tu_account(cat, "lab-p", shanghai, "0");
    r = new_rater(cat);
    ADD(r, "p1", "lab-p", "i-6", "gpu", "2026-03-15T11:00:00+08:00", "2026-03-15T13:00:00+08:00",
        "8", "RTX4090");
    assert_invoice(r, "lab-p", 2026, 3,
                   "lab-p 2026-03 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=8 GPU-hour @0.6 = 4.8 -> 4.80\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v2 qty=8 GPU-hour @0.5 = 4 -> 4.00\n"
                   "subtotal 8.80 credits 0.00 tax 0.00@0 total 8.80\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Cancelling a refundable monthly term refunds the unused part pro rata. */
START_TEST(test_cancel_refund_pro_rata)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    tu_account(cat, "lab-r", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_subscription(
                         cat, "sub-r", "lab-r", "i-r", "rtx-monthly",
                         tu_time("2026-05-01T00:00:00+08:00"), 1,
                         &(billing_time_t){tu_time("2026-05-16T00:00:00+08:00")}, err, sizeof(err)),
                     BILLING_OK);
    r = new_rater(cat);
    /* 16 of 31 days unused: 2599 x 16/31 = 41584/31 = 1341.419... */
    assert_invoice(r, "lab-r", 2026, 5,
                   "lab-r 2026-05 CNY\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1 term @2599 = 2599 -> "
                   "2599.00\n"
                   "line 4  RTX4090 cn-east-1 plan=rtx-monthly ver=v1 qty=1382400 second @ = "
                   "-41584/31 -> -1341.42\n"
                   "  refund of sub-r unused [2026-05-15T16:00:00Z, 2026-05-31T16:00:00Z)\n"
                   "subtotal 1257.58 credits 0.00 tax 0.00@0 total 1257.58\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* A non-refundable daily pass cancelled early refunds nothing; usage after
 * the cancellation is billed hourly. */
START_TEST(test_cancel_daily_no_refund)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    tu_account(cat, "lab-d", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_subscription(
                         cat, "day-1", "lab-d", "i-d", "rtx-daily",
                         tu_time("2026-06-01T08:00:00+08:00"), 2,
                         &(billing_time_t){tu_time("2026-06-02T20:00:00+08:00")}, err, sizeof(err)),
                     BILLING_OK);
    r = new_rater(cat);
    ADD(r, "u1", "lab-d", "i-d", "gpu", "2026-06-02T19:00:00+08:00", "2026-06-02T21:00:00+08:00",
        "8", "RTX4090");
    assert_invoice(r, "lab-d", 2026, 6,
                   "lab-d 2026-06 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=8 GPU-hour @0.6 = 4.8 -> 4.80\n"
                   "line 2 gpu RTX4090 cn-east-1 plan=rtx-daily ver= qty=8 GPU-hour @0 = 0 -> "
                   "0.00\n"
                   "line 3  RTX4090 cn-east-1 plan=rtx-daily ver=v1 qty=2 term @99 = 198 -> "
                   "198.00\n"
                   "subtotal 202.80 credits 0.00 tax 0.00@0 total 202.80\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Traffic is metered and shown at zero price when the book has no rate. */
START_TEST(test_traffic_zero_rated)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab-t", shanghai, "0");
    r = new_rater(cat);
    ADD(r, "n1", "lab-t", "i-7", "traffic", "2026-01-07T00:00:00+08:00",
        "2026-01-07T01:00:00+08:00", "1500000000", NULL);
    assert_invoice(r, "lab-t", 2026, 1,
                   "lab-t 2026-01 CNY\n"
                   "line 1 traffic * * plan= ver= qty=1.5 GB @0 = 0 -> 0.00\n"
                   "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Traffic is spread evenly over its event's interval: a piece cut at a
 * local month start or a price version gets bytes x its duration / the
 * event's duration, exactly. v2 (from Feb 1 02:00 +08:00) prices traffic
 * at 0.90 per GB; before it traffic is zero-rated. e1: 3 GB from Jan 31
 * 22:00 to Feb 1 04:00 (6 h): 1 GB in January, 1 GB in February before
 * v2, 1 GB after. e2: 1 GB from Feb 1 01:00 to 04:00: 1/3 GB before v2,
 * 2/3 GB after. February: 4/3 GB at 0 and 5/3 GB x 0.90 = 1.50.
 */
START_TEST(test_traffic_split_pro_rata)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    ck_assert_int_eq(billing_catalog_add_price_version(
                         cat, "v2", tu_time("2026-02-01T02:00:00+08:00"), err, sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v2", BILLING_METER_TRAFFIC, "*", "*", "0.90",
                                              err, sizeof(err)),
                     BILLING_OK);
    tu_account(cat, "lab-t", shanghai, "0");
    r = new_rater(cat);
    ADD(r, "e1", "lab-t", "i-7", "traffic", "2026-01-31T22:00:00+08:00",
        "2026-02-01T04:00:00+08:00", "3000000000", NULL);
    ADD(r, "e2", "lab-t", "i-7", "traffic", "2026-02-01T01:00:00+08:00",
        "2026-02-01T04:00:00+08:00", "1000000000", NULL);
    assert_invoice(r, "lab-t", 2026, 1,
                   "lab-t 2026-01 CNY\n"
                   "line 1 traffic * * plan= ver= qty=1 GB @0 = 0 -> 0.00\n"
                   "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    assert_invoice(r, "lab-t", 2026, 2,
                   "lab-t 2026-02 CNY\n"
                   "line 1 traffic * * plan= ver=v2 qty=5/3 GB @0.9 = 1.5 -> 1.50\n"
                   "line 1 traffic * * plan= ver= qty=4/3 GB @0 = 0 -> 0.00\n"
                   "subtotal 1.50 credits 0.00 tax 0.00@0 total 1.50\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Invalid events are refused with the event id and the field named. */
START_TEST(test_invalid_events_named)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    tu_account(cat, "lab-v", shanghai, "0");
    r = new_rater(cat);
    ck_assert_int_eq(tu_add(r, "bad-1", "lab-v", "i", "gpu", "2026-01-01T10:00:00Z",
                            "2026-01-01T10:00:00Z", "8", "RTX4090", "cn-east-1", err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "'bad-1'"));
    ck_assert_ptr_nonnull(strstr(err, "'end'"));
    ck_assert_int_eq(tu_add(r, "bad-2", "nobody", "i", "gpu", "2026-01-01T10:00:00Z",
                            "2026-01-01T11:00:00Z", "8", "RTX4090", "cn-east-1", err, sizeof(err)),
                     BILLING_ERR_UNKNOWN_ACCOUNT);
    ck_assert_ptr_nonnull(strstr(err, "'bad-2'"));
    ck_assert_ptr_nonnull(strstr(err, "'account'"));
    ck_assert_int_eq(tu_add(r, "bad-3", "lab-v", "i", "gpu", "2026-01-01T10:00:00Z",
                            "2026-01-01T11:00:00Z", "8", "H100", "cn-east-1", err, sizeof(err)),
                     BILLING_ERR_NO_PRICE);
    ck_assert_ptr_nonnull(strstr(err, "'bad-3'"));
    ck_assert_ptr_nonnull(strstr(err, "H100"));
    ck_assert_ptr_nonnull(strstr(err, "field 'model'"));
    /* Before the first price version there is no price either. */
    ck_assert_int_eq(tu_add(r, "bad-4", "lab-v", "i", "gpu", "2024-12-31T23:00:00Z",
                            "2025-01-01T01:00:00Z", "8", "RTX4090", "cn-east-1", err, sizeof(err)),
                     BILLING_ERR_NO_PRICE);
    /* Nothing of the refused events was counted. */
    ck_assert_uint_eq(billing_rater_event_count(r), 0);
    ck_assert_uint_eq(billing_rater_aggregate_count(r), 0);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Usage before the first price version: the message gave the model and
 * region as the reason and the instant in UTC only. It now names the
 * reason (the first version and when it starts) and the instant on the
 * account's own clock.
 */
START_TEST(test_no_price_before_first_version_says_when)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[512];

    tu_account(cat, "lab-v", shanghai, "0");
    r = new_rater(cat);
    ck_assert_int_eq(tu_add(r, "early", "lab-v", "i", "gpu", "2024-12-31T18:00:00Z",
                            "2024-12-31T19:00:00Z", "8", "RTX4090", "cn-east-1", err, sizeof(err)),
                     BILLING_ERR_NO_PRICE);
    ck_assert_msg(strstr(err, "before the first price version 'v1', which starts at "
                              "2025-01-01T00:00:00Z") != NULL,
                  "%s", err);
    ck_assert_msg(strstr(err, "2025-01-01 02:00:00 +08:00 Asia/Shanghai") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "2025-01-01T00:00:00Z (2025-01-01 08:00:00 +08:00 Asia/Shanghai)") !=
                      NULL,
                  "%s", err);
    ck_assert_msg(strstr(err, "field 'start'") != NULL, "%s", err);
    /* An unpriced model keeps its reason, with the local instant added. */
    ck_assert_int_eq(tu_add(r, "h100", "lab-v", "i", "gpu", "2026-01-01T10:00:00Z",
                            "2026-01-01T11:00:00Z", "8", "H100", "cn-east-1", err, sizeof(err)),
                     BILLING_ERR_NO_PRICE);
    ck_assert_msg(strstr(err,
                         "no gpu price for model 'H100' in region 'cn-east-1' at "
                         "2026-01-01T10:00:00Z (2026-01-01 18:00:00 +08:00 Asia/Shanghai)") != NULL,
                  "%s", err);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

START_TEST(test_event_setters_bounds)
{
    billing_event *ev = billing_event_new();
    char err[256];
    char longid[200];

    memset(longid, 'x', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    ck_assert_int_eq(billing_event_set_id(ev, longid), BILLING_ERR_TOO_LARGE);
    ck_assert_int_eq(billing_event_set_id(ev, ""), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_event_set_quantity(ev, "-1", err, sizeof(err)), BILLING_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(err, "'quantity'"));
    ck_assert_int_eq(billing_event_set_quantity(ev, "1.5e3", err, sizeof(err)), BILLING_ERR_PARSE);
    ck_assert_int_eq(billing_event_set_quantity(ev, "0.0000000001", err, sizeof(err)),
                     BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_event_set_meter(ev, (billing_meter)9), BILLING_ERR_INVALID);
    billing_event_destroy(ev);
    billing_event_destroy(NULL);
}
END_TEST

/* Same id and content: counted once. Same id, other content: a conflict. */
START_TEST(test_duplicates_and_conflicts)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];
    char *before;
    char *after;

    tu_account(cat, "lab-u", shanghai, "0");
    r = new_rater(cat);
    ADD(r, "dup", "lab-u", "i-8", "gpu", "2026-01-08T10:00:00+08:00", "2026-01-08T11:00:00+08:00",
        "8", "RTX4090");
    before = tu_invoice_text(r, "lab-u", 2026, 1);
    ck_assert_int_eq(tu_add(r, "dup", "lab-u", "i-8", "gpu", "2026-01-08T10:00:00+08:00",
                            "2026-01-08T11:00:00+08:00", "8", "RTX4090", "cn-east-1", err,
                            sizeof(err)),
                     BILLING_DUPLICATE);
    ck_assert_int_eq(tu_add(r, "dup", "lab-u", "i-8", "gpu", "2026-01-08T10:00:00+08:00",
                            "2026-01-08T12:00:00+08:00", "8", "RTX4090", "cn-east-1", err,
                            sizeof(err)),
                     BILLING_ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err, "'dup'"));
    after = tu_invoice_text(r, "lab-u", 2026, 1);
    ck_assert_str_eq(before, after);
    ck_assert_uint_eq(billing_rater_event_count(r), 1);
    free(before);
    free(after);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Credit order: priority first, then earliest expiry; subscription fees only
 * for grants that allow them; leftovers carry to the next month. */
START_TEST(test_credit_order_and_carry)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    tu_account(cat, "lab-k", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_grant(cat, "promo", "lab-k", "5.00",
                                               tu_time("2026-01-01T00:00:00+08:00"),
                                               tu_time("2026-03-01T00:00:00+08:00"),
                                               BILLING_CHARGE_USAGE, 1, err, sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_grant(
                         cat, "prepaid", "lab-k", "100.00", tu_time("2026-01-01T00:00:00+08:00"),
                         tu_time("2027-01-01T00:00:00+08:00"),
                         BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 0, err, sizeof(err)),
                     BILLING_OK);
    r = new_rater(cat);
    /* January: 4.80 of usage, paid by prepaid (priority 0) first. */
    ADD(r, "k1", "lab-k", "i-9", "gpu", "2026-01-09T10:00:00+08:00", "2026-01-09T11:00:00+08:00",
        "8", "RTX4090");
    /* February: 115.20 of usage; prepaid pays its remaining 95.20, promo 5.00. */
    ADD(r, "k2", "lab-k", "i-9", "gpu", "2026-02-09T00:00:00+08:00", "2026-02-10T00:00:00+08:00",
        "8", "RTX4090");
    assert_invoice(r, "lab-k", 2026, 1,
                   "lab-k 2026-01 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=8 GPU-hour @0.6 = 4.8 -> 4.80\n"
                   "credit prepaid 4.80 left 95.20\n"
                   "subtotal 4.80 credits 4.80 tax 0.00@0 total 0.00\n");
    assert_invoice(r, "lab-k", 2026, 2,
                   "lab-k 2026-02 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=192 GPU-hour @0.6 = 115.2 -> "
                   "115.20\n"
                   "credit prepaid 95.20 left 0.00\n"
                   "credit promo 5.00 left 0.00\n"
                   "subtotal 115.20 credits 100.20 tax 0.00@0 total 15.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Credit is spent only on usage inside its window; what is left at expiry is reported. */
START_TEST(test_credit_window_and_expiry)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;

    tu_account(cat, "lab-w", shanghai, "0");
    add_trial(cat, "lab-w"); /* 2026-01-10 .. 2026-02-09, Shanghai */
    r = new_rater(cat);
    /* Before the grant: not eligible. */
    ADD(r, "w1", "lab-w", "i-w", "gpu", "2026-01-09T22:00:00+08:00", "2026-01-10T02:00:00+08:00",
        "1", "RTX4090");
    assert_invoice(r, "lab-w", 2026, 1,
                   "lab-w 2026-01 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=4 GPU-hour @0.6 = 2.4 -> 2.40\n"
                   "credit trial 1.20 left 8.80\n"
                   "subtotal 2.40 credits 1.20 tax 0.00@0 total 1.20\n");
    assert_invoice(r, "lab-w", 2026, 2,
                   "lab-w 2026-02 CNY\n"
                   "expired trial 8.80\n"
                   "subtotal 0.00 credits 0.00 tax 0.00@0 total 0.00\n");
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

START_TEST(test_catalog_errors)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    char err[256];

    ck_assert_int_eq(billing_catalog_add_account(cat, "x", "USD", shanghai, "0", err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "currency"));
    ck_assert_int_eq(
        billing_catalog_add_account(cat, "x", "CNY", shanghai, "1.5", err, sizeof(err)),
        BILLING_ERR_RANGE);
    ck_assert_int_eq(
        billing_catalog_add_account(cat, "x", "CNY", shanghai, "abc", err, sizeof(err)),
        BILLING_ERR_PARSE);
    tu_account(cat, "x", shanghai, "0");
    ck_assert_int_eq(billing_catalog_add_account(cat, "x", "CNY", shanghai, "0", err, sizeof(err)),
                     BILLING_ERR_EXISTS);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "RTX4090", "cn-east-1",
                                              "0.7", err, sizeof(err)),
                     BILLING_ERR_EXISTS);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v9", BILLING_METER_GPU, "RTX4090", "cn-east-1",
                                              "0.7", err, sizeof(err)),
                     BILLING_ERR_NOT_FOUND);
    ck_assert_int_eq(billing_catalog_add_grant(cat, "g", "x", "10.001", 0, 1000,
                                               BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                     BILLING_ERR_PARSE);
    /* A subscription overlapping another of the same resource is refused when added. */
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "s1", "x", "i", "rtx-daily",
                                                      tu_time("2026-01-01T00:00:00Z"), 2, NULL, err,
                                                      sizeof(err)),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_subscription(cat, "s2", "x", "i", "rtx-daily",
                                                      tu_time("2026-01-02T00:00:00Z"), 1, NULL, err,
                                                      sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "overlap"));
    billing_rater_new(cat, &r, err, sizeof(err));
    ck_assert_ptr_nonnull(r);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_catalog_destroy(NULL);
    billing_rater_destroy(NULL);
    billing_invoice_destroy(NULL);
}
END_TEST

/*
 * reused_event_keeps_refused_value: the event is a reusable buffer; a
 * setter that refuses its value (too long an account, a malformed
 * quantity) used to leave the previous event's value in place, so an
 * event refilled without a reset was rated to the previous account or at
 * the previous quantity. Now the event is refused, naming the field,
 * until the field is set again.
 */
START_TEST(test_reused_event_refused_setter)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_event *ev = billing_event_new();
    billing_rater *r;
    char err[256];
    char long_id[200];

    tu_account(cat, "lab-a", shanghai, "0");
    r = new_rater(cat);
    billing_event_set_id(ev, "e1");
    billing_event_set_account(ev, "lab-a");
    billing_event_set_resource(ev, "i-1");
    billing_event_set_meter(ev, BILLING_METER_GPU);
    billing_event_set_interval(ev, tu_time("2026-01-05T10:00:00+08:00"),
                               tu_time("2026-01-05T11:00:00+08:00"));
    ck_assert_int_eq(billing_event_set_quantity(ev, "8", err, sizeof(err)), BILLING_OK);
    billing_event_set_model(ev, "RTX4090");
    billing_event_set_region(ev, "cn-east-1");
    ck_assert_int_eq(billing_rater_add(r, ev, err, sizeof(err)), BILLING_OK);
    /* Refilled without a reset: the new quantity is refused. */
    billing_event_set_id(ev, "e2");
    ck_assert_int_eq(billing_event_set_quantity(ev, "-1", err, sizeof(err)), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_rater_add(r, ev, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_msg(strstr(err, "event 'e2': field 'quantity'") != NULL, "%s", err);
    /* A long account id is refused; the event is not rated to 'lab-a'. */
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    ck_assert_int_eq(billing_event_set_quantity(ev, "1", err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_event_set_account(ev, long_id), BILLING_ERR_TOO_LARGE);
    ck_assert_int_eq(billing_rater_add(r, ev, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_msg(strstr(err, "event 'e2': field 'account'") != NULL, "%s", err);
    ck_assert_uint_eq(billing_rater_event_count(r), 1);
    /* Set again successfully, the field is usable. */
    ck_assert_int_eq(billing_event_set_account(ev, "lab-a"), BILLING_OK);
    ck_assert_int_eq(billing_rater_add(r, ev, err, sizeof(err)), BILLING_OK);
    assert_invoice(r, "lab-a", 2026, 1,
                   "lab-a 2026-01 CNY\n"
                   "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=9 GPU-hour @0.6 = 5.4 -> 5.40\n"
                   "subtotal 5.40 credits 0.00 tax 0.00@0 total 5.40\n");
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/* Every line kind has the name the tool prints; unknown values have none. */
START_TEST(test_line_kind_names)
{
    ck_assert_str_eq(billing_line_kind_name(BILLING_LINE_USAGE), "usage");
    ck_assert_str_eq(billing_line_kind_name(BILLING_LINE_INCLUDED), "included");
    ck_assert_str_eq(billing_line_kind_name(BILLING_LINE_FEE), "fee");
    ck_assert_str_eq(billing_line_kind_name(BILLING_LINE_REFUND), "refund");
    ck_assert_ptr_null(billing_line_kind_name((billing_line_kind)0));
    ck_assert_ptr_null(billing_line_kind_name((billing_line_kind)5));
}
END_TEST

/* The month list: a proper type, errors reported as everywhere else. */
START_TEST(test_months_list)
{
    billing_catalog *cat = tu_gpu_cloud();
    billing_months *months = (billing_months *)1;
    billing_rater *r;
    char err[256];

    tu_account(cat, "lab-c", shanghai, "0");
    r = new_rater(cat);
    ck_assert_int_eq(billing_rater_months(r, "lab-c", &months, err, sizeof(err)), BILLING_OK);
    ck_assert_uint_eq(billing_months_count(months), 0);
    billing_months_destroy(months);
    ADD(r, "x1", "lab-c", "i-3", "gpu", "2026-12-31T23:00:00+08:00", "2027-01-01T01:00:00+08:00",
        "8", "RTX4090");
    ck_assert_int_eq(billing_rater_months(r, "lab-c", &months, err, sizeof(err)), BILLING_OK);
    ck_assert_uint_eq(billing_months_count(months), 2);
    ck_assert_int_eq(billing_months_year(months, 0), 2026);
    ck_assert_int_eq(billing_months_month(months, 0), 12);
    ck_assert_int_eq(billing_months_year(months, 1), 2027);
    ck_assert_int_eq(billing_months_month(months, 1), 1);
    ck_assert_int_eq(billing_months_year(months, 2), 0);
    ck_assert_int_eq(billing_months_month(months, 2), 0);
    billing_months_destroy(months);
    ck_assert_int_eq(billing_rater_months(r, "nobody", &months, err, sizeof(err)),
                     BILLING_ERR_UNKNOWN_ACCOUNT);
    ck_assert_ptr_null(months);
    ck_assert_msg(strstr(err, "'nobody'") != NULL, "%s", err);
    billing_months_destroy(NULL);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

static Suite *rating_suite(void)
{
    Suite *s = suite_create("rating");
    TCase *ex = tcase_create("examples");
    TCase *core = tcase_create("core");

    tcase_add_checked_fixture(ex, setup, teardown);
    tcase_add_checked_fixture(core, setup, teardown);
    tcase_add_test(ex, test_example_three_hour_run);
    tcase_add_test(ex, test_no_price_before_first_version_says_when);
    tcase_add_test(ex, test_example_gpuless_then_gpu);
    tcase_add_test(ex, test_example_monthly_from_jan31);
    tcase_add_test(ex, test_example_month_end_midnight);
    tcase_add_test(ex, test_example_dst_new_york);
    tcase_add_test(ex, test_example_trial_credit_exhausted);
    tcase_add_test(ex, test_example_storage_resize);
    tcase_add_test(core, test_price_change_splits_event);
    tcase_add_test(core, test_cancel_refund_pro_rata);
    tcase_add_test(core, test_cancel_daily_no_refund);
    tcase_add_test(core, test_traffic_zero_rated);
    tcase_add_test(core, test_traffic_split_pro_rata);
    tcase_add_test(core, test_invalid_events_named);
    tcase_add_test(core, test_event_setters_bounds);
    tcase_add_test(core, test_duplicates_and_conflicts);
    tcase_add_test(core, test_credit_order_and_carry);
    tcase_add_test(core, test_credit_window_and_expiry);
    tcase_add_test(core, test_catalog_errors);
    tcase_add_test(core, test_reused_event_refused_setter);
    tcase_add_test(core, test_line_kind_names);
    tcase_add_test(core, test_months_list);
    suite_add_tcase(s, ex);
    suite_add_tcase(s, core);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(rating_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
