/*
 * testutil.h - helpers shared by the libbilling test suites: zones from
 * the system tzdata, the GPU-cloud price book, terse event building and
 * a canonical text form of invoices for comparisons.
 */
#ifndef BILLING_TESTUTIL_H
#define BILLING_TESTUTIL_H

#include "billing.h"

/* tu_zone - load IANA zone @name from $TZDIR or /usr/share/zoneinfo; aborts the test on failure. */
billing_zone *tu_zone(const char *name);

/* tu_time - parse an RFC 3339 timestamp; aborts the test on failure. */
billing_time_t tu_time(const char *text);

/*
 * tu_gpu_cloud - a catalog in CNY (half-up) with version "v1" from
 * 2025-01-01T00:00:00Z: gpu RTX4090 cn-east-1 0.60, A100-80G 1.60; gpuless
 * RTX4090 0.48, A100-80G 1.28; storage * * 0.20; plans rtx-daily (99.00),
 * rtx-monthly (2599.00, refundable). No accounts.
 */
billing_catalog *tu_gpu_cloud(void);

/* tu_account - add account @id in @zone with @tax (e.g. "0"); asserts success. */
void tu_account(billing_catalog *cat, const char *id, const billing_zone *zone, const char *tax);

/*
 * tu_event - a new event with these fields (as tu_add); fails the test if
 * a setter refuses one. The caller destroys it.
 */
billing_event *tu_event(const char *id, const char *account, const char *resource,
                        const char *meter, const char *start, const char *end, const char *qty,
                        const char *model, const char *region);

/*
 * tu_add - rate one event; returns the status. @meter by name, times as
 * RFC 3339, @model/@region may be NULL for empty.
 */
billing_status tu_add(billing_rater *r, const char *id, const char *account, const char *resource,
                      const char *meter, const char *start, const char *end, const char *qty,
                      const char *model, const char *region, char *err, size_t errsize);

/* TU_ADD - rate an event that must be accepted (region cn-east-1). */
#define TU_ADD(r, id, acct, res, meter, start, end, qty, model)                                   \
    do {                                                                                          \
        char err_[256] = "";                                                                      \
        billing_status st_ = tu_add(r, id, acct, res, meter, start, end, qty, model, "cn-east-1", \
                                    err_, sizeof(err_));                                          \
        ck_assert_msg(st_ == BILLING_OK, "%s: %s", id, err_);                                     \
    } while (0)

/* tu_new_rater - a rater for @cat; fails the test with the message if refused. */
billing_rater *tu_new_rater(billing_catalog *cat);

/*
 * tu_months - the months with charges of @account as year*100+month in
 * @out (room for @cap); returns how many there are (may exceed @cap), or
 * -1 when billing_rater_months fails. Compact for assertions only.
 */
int tu_months(billing_rater *r, const char *account, int *out, int cap);

/* tu_assert_invoice - the invoice of @acct for @y-@m is exactly @expected (tu_invoice_text). */
void tu_assert_invoice(billing_rater *r, const char *acct, int y, int m, const char *expected);

/*
 * tu_invoice_text - the whole invoice of @account for @year-@month as one
 * canonical string (caller frees); NULL when rating fails.
 */
char *tu_invoice_text(billing_rater *r, const char *account, int year, int month);

#endif
