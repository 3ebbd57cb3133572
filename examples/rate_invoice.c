/*
 * rate_invoice.c - the smallest complete use of libbilling: build a price
 * book and an account, rate a handful of GPU-cloud events, print the
 * invoice. Build: cc rate_invoice.c $(pkg-config --cflags --libs libbilling)
 *
 * The time zone comes from the system's tzdata; the library itself never
 * reads files, it parses the bytes it is given.
 */
#include <stdio.h>
#include <stdlib.h>

#include <billing.h>

static billing_zone *load_zone(const char *name)
{
    char path[256];
    unsigned char *buf = malloc(1 << 20);
    size_t len;
    FILE *f;
    billing_zone *zone = NULL;
    char err[256];

    snprintf(path, sizeof(path), "/usr/share/zoneinfo/%s", name);
    f = fopen(path, "rb");
    if (f == NULL || buf == NULL) {
        fprintf(stderr, "cannot read %s\n", path);
        goto out;
    }
    len = fread(buf, 1, 1 << 20, f);
    zone = billing_zone_new(name, buf, len, err, sizeof(err));
    if (zone == NULL)
        fprintf(stderr, "%s: %s\n", path, err);
out:
    if (f != NULL)
        fclose(f);
    free(buf);
    return zone;
}

/* One usage record; times are RFC 3339. */
static int rate(billing_rater *r, const char *id, const char *meter, const char *start,
                const char *end, const char *qty)
{
    billing_event *ev = billing_event_new();
    billing_meter m;
    billing_time_t s;
    billing_time_t e;
    billing_status st;
    char err[256] = "";

    billing_meter_parse(meter, &m);
    billing_time_parse(start, &s, NULL, 0);
    billing_time_parse(end, &e, NULL, 0);
    billing_event_set_id(ev, id);
    billing_event_set_account(ev, "lab-a");
    billing_event_set_resource(ev, m == BILLING_METER_STORAGE ? "disk-1" : "i-1");
    billing_event_set_meter(ev, m);
    billing_event_set_interval(ev, s, e);
    billing_event_set_quantity(ev, qty, err, sizeof(err));
    billing_event_set_model(ev, "RTX4090");
    billing_event_set_region(ev, "cn-east-1");
    st = billing_rater_add(r, ev, err, sizeof(err));
    if (st < 0)
        fprintf(stderr, "rejected: %s\n", err);
    billing_event_destroy(ev);
    return st < 0 ? -1 : 0;
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

int main(void)
{
    billing_zone *zone = load_zone("Asia/Shanghai");
    billing_catalog *cat = billing_catalog_new();
    billing_rater *r = NULL;
    billing_invoice *inv = NULL;
    billing_time_t from;
    char err[256];
    int rc = 1;

    if (zone == NULL || cat == NULL)
        goto out;
    billing_time_parse("2026-01-01T00:00:00+08:00", &from, NULL, 0);
    billing_catalog_set_currency(cat, "CNY", BILLING_ROUND_HALF_UP, NULL, 0);
    billing_catalog_add_price_version(cat, "2026-01", from, NULL, 0);
    billing_catalog_set_rate(cat, "2026-01", BILLING_METER_GPU, "RTX4090", "*", "0.60", NULL, 0);
    billing_catalog_set_rate(cat, "2026-01", BILLING_METER_GPULESS, "RTX4090", "*", "0.48", NULL, 0);
    billing_catalog_set_rate(cat, "2026-01", BILLING_METER_STORAGE, "*", "*", "0.20", NULL, 0);
    billing_catalog_add_account(cat, "lab-a", "CNY", zone, "0.06", NULL, 0);
    billing_catalog_add_grant(cat, "trial", "lab-a", "10.00", from, from + INT64_C(30) * 86400 *
                              BILLING_NS_PER_SEC, BILLING_CHARGE_USAGE, 0, NULL, 0);
    r = billing_rater_new(cat, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    if (rate(r, "e1", "gpuless", "2026-01-05T09:00:00+08:00", "2026-01-05T10:00:00+08:00", "1") ||
        rate(r, "e2", "gpu", "2026-01-05T10:00:00+08:00", "2026-01-05T13:00:00+08:00", "8") ||
        rate(r, "e3", "storage", "2026-01-01T00:00:00+08:00", "2026-02-01T00:00:00+08:00", "500") ||
        rate(r, "e4", "traffic", "2026-01-05T09:00:00+08:00", "2026-01-05T13:00:00+08:00",
             "73000000000"))
        goto out;
    if (billing_rater_invoice(r, "lab-a", 2026, 1, &inv, err, sizeof(err)) != BILLING_OK) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    print_invoice(inv);
    rc = 0;
out:
    billing_invoice_destroy(inv);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_zone_destroy(zone);
    return rc;
}
