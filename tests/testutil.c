/*
 * testutil.c - see testutil.h.
 */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

billing_zone *tu_zone(const char *name)
{
    const char *dir = getenv("TZDIR");
    char path[512];
    unsigned char *buf;
    size_t len;
    FILE *f;
    billing_zone *z;
    char err[256];

    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "/usr/share/zoneinfo", name);
    f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    buf = malloc(1 << 20);
    ck_assert_ptr_nonnull(buf);
    len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    billing_zone_new(name, buf, len, &z, err, sizeof(err));
    free(buf);
    ck_assert_msg(z != NULL, "zone %s: %s", name, err);
    return z;
}

billing_time_t tu_time(const char *text)
{
    billing_time_t t;
    char err[256];

    ck_assert_msg(billing_time_parse(text, &t, err, sizeof(err)) == BILLING_OK, "%s", err);
    return t;
}

billing_catalog *tu_gpu_cloud(void)
{
    billing_catalog *cat = billing_catalog_new();
    char err[256];

    ck_assert_ptr_nonnull(cat);
    ck_assert_int_eq(billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(
        billing_catalog_add_price_version(cat, "v1", tu_time("2025-01-01T00:00:00Z"), err, 256),
        BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "RTX4090", "cn-east-1",
                                              "0.60", err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "A100-80G", "cn-east-1",
                                              "1.60", err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPULESS, "RTX4090",
                                              "cn-east-1", "0.48", err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPULESS, "A100-80G",
                                              "cn-east-1", "1.28", err, 256),
                     BILLING_OK);
    ck_assert_int_eq(
        billing_catalog_set_rate(cat, "v1", BILLING_METER_STORAGE, "*", "*", "0.20", err, 256),
        BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_plan(cat, "rtx-daily", BILLING_PERIOD_DAY, "RTX4090",
                                              "cn-east-1", 0, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_plan(cat, "rtx-monthly", BILLING_PERIOD_MONTH, "RTX4090",
                                              "cn-east-1", 1, err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_plan_fee(cat, "v1", "rtx-daily", "99.00", err, 256),
                     BILLING_OK);
    ck_assert_int_eq(billing_catalog_set_plan_fee(cat, "v1", "rtx-monthly", "2599.00", err, 256),
                     BILLING_OK);
    return cat;
}

void tu_account(billing_catalog *cat, const char *id, const billing_zone *zone, const char *tax)
{
    char err[256];

    ck_assert_msg(billing_catalog_add_account(cat, id, "CNY", zone, tax, err, sizeof(err)) ==
                      BILLING_OK,
                  "%s", err);
}

billing_event *tu_event(const char *id, const char *account, const char *resource,
                        const char *meter, const char *start, const char *end, const char *qty,
                        const char *model, const char *region)
{
    billing_event *ev = billing_event_new();
    billing_meter m;
    char err[256] = "";

    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(billing_meter_parse(meter, &m), BILLING_OK);
    ck_assert_int_eq(billing_event_set_id(ev, id), BILLING_OK);
    ck_assert_int_eq(billing_event_set_account(ev, account), BILLING_OK);
    ck_assert_int_eq(billing_event_set_resource(ev, resource), BILLING_OK);
    ck_assert_int_eq(billing_event_set_meter(ev, m), BILLING_OK);
    billing_event_set_interval(ev, tu_time(start), tu_time(end));
    ck_assert_msg(billing_event_set_quantity(ev, qty, err, sizeof(err)) == BILLING_OK, "%s", err);
    ck_assert_int_eq(billing_event_set_model(ev, model ? model : ""), BILLING_OK);
    ck_assert_int_eq(billing_event_set_region(ev, region ? region : ""), BILLING_OK);
    return ev;
}

billing_status tu_add(billing_rater *r, const char *id, const char *account, const char *resource,
                      const char *meter, const char *start, const char *end, const char *qty,
                      const char *model, const char *region, char *err, size_t errsize)
{
    billing_event *ev = tu_event(id, account, resource, meter, start, end, qty, model, region);
    billing_status st;

    st = billing_rater_add(r, ev, err, errsize);
    billing_event_destroy(ev);
    return st;
}

/* Append formatted text to a growing buffer. */
static void cat_text(char **buf, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void cat_text(char **buf, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    *buf = realloc(*buf, *len + (size_t)n + 1);
    ck_assert_ptr_nonnull(*buf);
    va_start(ap, fmt);
    vsnprintf(*buf + *len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    *len += (size_t)n;
}

static int is_zero(const char *amount)
{
    return strspn(amount, "0.") == strlen(amount);
}

char *tu_invoice_text(billing_rater *r, const char *account, int year, int month)
{
    billing_invoice *inv;
    char err[256];
    char *buf = NULL;
    size_t len = 0;
    size_t i;
    billing_time_t from;
    billing_time_t to;
    char from_text[40];
    char to_text[40];

    if (billing_rater_invoice(r, account, year, month, &inv, err, sizeof(err)) != BILLING_OK)
        return NULL;
    cat_text(&buf, &len, "%s %04d-%02d %s\n", billing_invoice_account(inv), year, month,
             billing_invoice_currency(inv));
    for (i = 0; i < billing_invoice_line_count(inv); i++) {
        cat_text(&buf, &len, "line %d %s %s %s plan=%s ver=%s qty=%s %s @%s = %s -> %s\n",
                 (int)billing_invoice_line_kind(inv, i), billing_invoice_line_meter(inv, i),
                 billing_invoice_line_model(inv, i), billing_invoice_line_region(inv, i),
                 billing_invoice_line_plan(inv, i), billing_invoice_line_price_version(inv, i),
                 billing_invoice_line_quantity(inv, i), billing_invoice_line_unit(inv, i),
                 billing_invoice_line_unit_price(inv, i), billing_invoice_line_amount(inv, i),
                 billing_invoice_line_amount_rounded(inv, i));
        if (billing_invoice_line_span(inv, i, &from, &to)) {
            billing_time_format(from, from_text, sizeof(from_text));
            billing_time_format(to, to_text, sizeof(to_text));
            cat_text(&buf, &len, "  refund of %s unused [%s, %s)\n",
                     billing_invoice_line_subscription(inv, i), from_text, to_text);
        }
    }
    for (i = 0; i < billing_invoice_credit_count(inv); i++)
        cat_text(&buf, &len, "credit %s %s left %s\n", billing_invoice_credit_grant(inv, i),
                 billing_invoice_credit_amount(inv, i), billing_invoice_credit_remaining(inv, i));
    for (i = 0; i < billing_invoice_returned_count(inv); i++)
        cat_text(&buf, &len, "returned %s %s left %s\n", billing_invoice_returned_grant(inv, i),
                 billing_invoice_returned_amount(inv, i),
                 billing_invoice_returned_remaining(inv, i));
    for (i = 0; i < billing_invoice_expired_count(inv); i++)
        cat_text(&buf, &len, "expired %s %s\n", billing_invoice_expired_grant(inv, i),
                 billing_invoice_expired_amount(inv, i));
    /* Account credit only when there is some, so most invoices read as before. */
    if (!is_zero(billing_invoice_account_credit(inv)) || !is_zero(billing_invoice_carried(inv)) ||
        !is_zero(billing_invoice_account_credit_left(inv)))
        cat_text(&buf, &len, "account credit %s carried %s left %s\n",
                 billing_invoice_account_credit(inv), billing_invoice_carried(inv),
                 billing_invoice_account_credit_left(inv));
    cat_text(&buf, &len, "subtotal %s credits %s tax %s@%s total %s\n",
             billing_invoice_subtotal(inv), billing_invoice_credits(inv), billing_invoice_tax(inv),
             billing_invoice_tax_rate(inv), billing_invoice_total(inv));
    billing_invoice_destroy(inv);
    return buf;
}

billing_rater *tu_new_rater(billing_catalog *cat)
{
    char err[256];
    billing_rater *r = NULL;

    ck_assert_msg(billing_rater_new(cat, &r, err, sizeof(err)) == BILLING_OK, "%s", err);
    return r;
}

void tu_assert_invoice(billing_rater *r, const char *acct, int y, int m, const char *expected)
{
    char *text = tu_invoice_text(r, acct, y, m);

    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, expected);
    free(text);
}

int tu_months(billing_rater *r, const char *account, int *out, int cap)
{
    billing_months *list = NULL;
    size_t n;
    size_t i;

    if (billing_rater_months(r, account, &list, NULL, 0) != BILLING_OK)
        return -1;
    n = billing_months_count(list);
    for (i = 0; i < n && i < (size_t)cap; i++)
        out[i] = billing_months_year(list, i) * 100 + billing_months_month(list, i);
    billing_months_destroy(list);
    return (int)n;
}
