/*
 * rate_invoice.c - the smallest complete use of libbilling, written as the
 * reference an embedder copies: build a price book and an account, rate a
 * handful of GPU-cloud events, print the invoice. Every status is checked:
 * a failure prints the library's message (which names the object and the
 * field) and the program exits 1, freeing what it made.
 *
 * Build: cc rate_invoice.c $(pkg-config --cflags --libs libbilling-config)
 *
 * The rating library does no I/O: libbilling-config loads the time zone
 * by its IANA name from the system's zoneinfo ($TZDIR honoured). A program
 * that reads the tool's JSON files would call billing_config_catalog_load
 * instead of building the catalog by hand (see live_cost.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include <billing/billing_config.h>

#define ERR_MAX 512
#define DAY (INT64_C(86400) * BILLING_NS_PER_SEC)

/* Report a failed call: its status and message. Returns -1 for `return fail(...)`. */
static int fail(const char *what, billing_status st, const char *err)
{
    fprintf(stderr, "%s: %s (%s)\n", what, err[0] != '\0' ? err : "-", billing_strerror(st));
    return -1;
}

/* The price book: one version, rates per GPU-hour, instance-hour, GB-month. */
static int build_pricebook(billing_catalog *cat, billing_time_t from)
{
    static const struct {
        billing_meter meter;
        const char *model;
        const char *price;
    } rates[] = {{BILLING_METER_GPU, "RTX4090", "0.60"},
                 {BILLING_METER_GPULESS, "RTX4090", "0.48"},
                 {BILLING_METER_STORAGE, "*", "0.20"}};
    char err[ERR_MAX] = "";
    billing_status st;
    size_t i;

    st = billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, err, sizeof(err));
    if (st != BILLING_OK)
        return fail("currency", st, err);
    st = billing_catalog_add_price_version(cat, "2026-01", from, err, sizeof(err));
    if (st != BILLING_OK)
        return fail("price version", st, err);
    for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
        st = billing_catalog_set_rate(cat, "2026-01", rates[i].meter, rates[i].model, "*",
                                      rates[i].price, err, sizeof(err));
        if (st != BILLING_OK)
            return fail("rate", st, err);
    }
    return 0;
}

/* One account in Shanghai with 6% tax and a 30-day usage trial of 10.00. */
static int build_account(billing_catalog *cat, const billing_zone *zone, billing_time_t from)
{
    char err[ERR_MAX] = "";
    billing_status st;

    st = billing_catalog_add_account(cat, "lab-a", "CNY", zone, "0.06", err, sizeof(err));
    if (st != BILLING_OK)
        return fail("account", st, err);
    st = billing_catalog_add_grant(cat, "trial", "lab-a", "10.00", from, from + 30 * DAY,
                                   BILLING_CHARGE_USAGE, 0, err, sizeof(err));
    if (st != BILLING_OK)
        return fail("grant", st, err);
    return 0;
}

/* One usage record into the reusable buffer @ev; times are RFC 3339. */
static int rate(billing_rater *r, billing_event *ev, const char *id, billing_meter meter,
                const char *start, const char *end, const char *qty)
{
    char err[ERR_MAX] = "";
    billing_time_t s;
    billing_time_t e;
    billing_status st;

    billing_event_reset(ev);
    st = billing_time_parse(start, &s, err, sizeof(err));
    if (st == BILLING_OK)
        st = billing_time_parse(end, &e, err, sizeof(err));
    if (st != BILLING_OK)
        return fail(id, st, err);
    billing_event_set_interval(ev, s, e);
    st = billing_event_set_id(ev, id);
    if (st == BILLING_OK)
        st = billing_event_set_account(ev, "lab-a");
    if (st == BILLING_OK)
        st = billing_event_set_resource(ev, meter == BILLING_METER_STORAGE ? "disk-1" : "i-1");
    if (st == BILLING_OK)
        st = billing_event_set_meter(ev, meter);
    if (st == BILLING_OK)
        st = billing_event_set_model(ev, "RTX4090");
    if (st == BILLING_OK)
        st = billing_event_set_region(ev, "cn-east-1");
    if (st == BILLING_OK)
        st = billing_event_set_quantity(ev, qty, err, sizeof(err));
    if (st != BILLING_OK)
        return fail(id, st, err);
    /* BILLING_DUPLICATE (same id and content again) is not an error: nothing changes. */
    st = billing_rater_add(r, ev, err, sizeof(err));
    if (st != BILLING_OK && st != BILLING_DUPLICATE)
        return fail(id, st, err);
    return 0;
}

static void print_invoice(const billing_invoice *inv)
{
    size_t i;

    printf("Invoice %s %04d-%02d (%s)\n", billing_invoice_account(inv), billing_invoice_year(inv),
           billing_invoice_month(inv), billing_invoice_currency(inv));
    for (i = 0; i < billing_invoice_line_count(inv); i++)
        printf("  %-8s %-8s %14s %-14s x %6s = %10s\n", billing_invoice_line_meter(inv, i),
               billing_invoice_line_model(inv, i), billing_invoice_line_quantity(inv, i),
               billing_invoice_line_unit(inv, i), billing_invoice_line_unit_price(inv, i),
               billing_invoice_line_amount_rounded(inv, i));
    for (i = 0; i < billing_invoice_credit_count(inv); i++)
        printf("  credit %-20s %41s-%s\n", billing_invoice_credit_grant(inv, i), "",
               billing_invoice_credit_amount(inv, i));
    printf("  subtotal %52s\n  credits  %52s\n  tax @%-5s %51s\n  total    %52s\n",
           billing_invoice_subtotal(inv), billing_invoice_credits(inv),
           billing_invoice_tax_rate(inv), billing_invoice_tax(inv), billing_invoice_total(inv));
}

static int rate_all(billing_rater *r, billing_event *ev)
{
    if (rate(r, ev, "e1", BILLING_METER_GPULESS, "2026-01-05T09:00:00+08:00",
             "2026-01-05T10:00:00+08:00", "1") != 0 ||
        rate(r, ev, "e2", BILLING_METER_GPU, "2026-01-05T10:00:00+08:00",
             "2026-01-05T13:00:00+08:00", "8") != 0 ||
        rate(r, ev, "e3", BILLING_METER_STORAGE, "2026-01-01T00:00:00+08:00",
             "2026-02-01T00:00:00+08:00", "500") != 0)
        return -1;
    return rate(r, ev, "e4", BILLING_METER_TRAFFIC, "2026-01-05T09:00:00+08:00",
                "2026-01-05T13:00:00+08:00", "73000000000");
}

int main(void)
{
    billing_zone *zone = NULL;
    billing_catalog *cat = billing_catalog_new();
    billing_event *ev = billing_event_new();
    billing_rater *r = NULL;
    billing_invoice *inv = NULL;
    billing_time_t from;
    billing_status st;
    char err[ERR_MAX] = "";
    int rc = 1;

    if (cat == NULL || ev == NULL) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    st = billing_config_zone_load("Asia/Shanghai", &zone, err, sizeof(err));
    if (st != BILLING_OK) {
        fail("zone", st, err);
        goto out;
    }
    st = billing_time_parse("2026-01-01T00:00:00+08:00", &from, err, sizeof(err));
    if (st != BILLING_OK) {
        fail("start", st, err);
        goto out;
    }
    if (build_pricebook(cat, from) != 0 || build_account(cat, zone, from) != 0)
        goto out;
    /* Freezes the catalog: from here it may be shared by raters in several threads. */
    st = billing_rater_new(cat, &r, err, sizeof(err));
    if (st != BILLING_OK) {
        /* An inconsistent catalog or no memory: the status and the message say which. */
        fail("rater", st, err);
        goto out;
    }
    if (rate_all(r, ev) != 0)
        goto out;
    st = billing_rater_invoice(r, "lab-a", 2026, 1, &inv, err, sizeof(err));
    if (st != BILLING_OK) {
        fail("invoice", st, err);
        goto out;
    }
    print_invoice(inv);
    rc = 0;
out:
    /* Reverse order of borrowing: invoice, rater, catalog, then the zone it borrows. */
    billing_invoice_destroy(inv);
    billing_rater_destroy(r);
    billing_event_destroy(ev);
    billing_catalog_destroy(cat);
    billing_zone_destroy(zone);
    return rc;
}
