/*
 * drafthash.c - the content hash of a draft invoice (drafthash.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drafthash.h"
#include "jsonbuf.h"

#define TIME_TEXT 48

/*
 * The longest text a draft's hash reads: a runaway guard only (a line
 * takes about 300 bytes of it, and the invoice in memory holds more than
 * that for every line).
 */
#define DRAFT_TEXT_MAX ((size_t)1 << 30)

/* @s, or NULL for NULL or "". */
static const char *nonempty(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : NULL;
}

/*
 * The text the content hash reads: the draft as compact JSON with sorted
 * keys, byte for byte what jansson's json_dumps(JSON_COMPACT |
 * JSON_SORT_KEYS) gave for the object drafts carried before (written
 * here directly: building that object was a sixth of the tool's time of
 * a close). Keys are written in strcmp order; strings escaped as jansson
 * escapes them: bc_jbuf_strn_utf8 (formats/jsonbuf.h, the string rule:
 * quote, backslash, control characters escaped; every other byte as is).
 */
static void ht_raw(bc_jbuf *t, const char *s)
{
    bc_jbuf_raw(t, s, strlen(s));
}

/* @key (its quotes, colon and the comma before it, as given), then @n bytes of @s as a string. */
static void ht_strn(bc_jbuf *t, const char *key, const char *s, size_t n)
{
    ht_raw(t, key);
    bc_jbuf_strn_utf8(t, s, n);
}

/* @key, then @s as a string, or null for NULL. */
static void ht_str(bc_jbuf *t, const char *key, const char *s)
{
    if (s == NULL) {
        ht_raw(t, key);
        ht_raw(t, "null");
    } else {
        ht_strn(t, key, s, strlen(s));
    }
}

/* "d" and "n".."q" of a line: @q ("12.5" or "7/3") as numerator and denominator. */
static void ht_quantity_kind(bc_jbuf *t, const char *am, const char *q, const char *kind,
                             const char *meter, const char *model, int line_no, const char *plan)
{
    const char *slash = strchr(q, '/');

    ht_str(t, ",\"am\":", am);
    ht_str(t, ",\"d\":", slash != NULL ? slash + 1 : "1");
    ht_str(t, ",\"k\":", kind);
    ht_str(t, ",\"m\":", meter);
    ht_str(t, ",\"mo\":", model);
    bc_jbuf_lit(t, ",\"n\":");
    bc_jbuf_int(t, line_no);
    ht_str(t, ",\"p\":", plan);
    ht_strn(t, ",\"q\":", q, slash != NULL ? (size_t)(slash - q) : strlen(q));
}

static void ht_line(bc_jbuf *t, const billing_invoice *inv, size_t i, int line_no)
{
    billing_time_t span[2];
    char from[40], to[40];
    int has_span = billing_invoice_line_span(inv, i, &span[0], &span[1]);

    if (has_span && (billing_time_format(span[0], from, sizeof(from)) < 0 ||
                     billing_time_format(span[1], to, sizeof(to)) < 0))
        t->failed = 1;
    ht_raw(t, "{\"adj\":null");
    ht_quantity_kind(
        t, billing_invoice_line_amount_rounded(inv, i), billing_invoice_line_quantity(inv, i),
        billing_line_kind_name(billing_invoice_line_kind(inv, i)),
        nonempty(billing_invoice_line_meter(inv, i)), billing_invoice_line_model(inv, i), line_no,
        nonempty(billing_invoice_line_plan(inv, i)));
    ht_str(t, ",\"r\":", billing_invoice_line_region(inv, i));
    ht_str(t, ",\"u\":", billing_invoice_line_unit(inv, i));
    ht_str(t, ",\"uf\":", has_span ? from : NULL);
    ht_str(t, ",\"up\":", nonempty(billing_invoice_line_unit_price(inv, i)));
    ht_str(t, ",\"ut\":", has_span ? to : NULL);
    ht_str(t, ",\"v\":", nonempty(billing_invoice_line_price_version(inv, i)));
    ht_raw(t, "}");
}

static void ht_adjustment(bc_jbuf *t, const bs_adjustment *a, int line_no)
{
    char month[16];

    snprintf(month, sizeof(month), "%04d-%02d-01", a->year, a->month);
    ht_str(t, "{\"adj\":", month);
    ht_quantity_kind(t, a->amount, a->quantity, "adjustment", a->meter, a->model, line_no, NULL);
    ht_str(t, ",\"r\":", a->region);
    ht_str(t, ",\"u\":", a->unit);
    ht_str(t, ",\"up\":", a->unit_price);
    ht_str(t, ",\"v\":", nonempty(a->price_version));
    ht_raw(t, "}");
}

/* Applied (@kind 0), expired (1) or returned (2) credits as an array, zero amounts left out. */
static void ht_credits(bc_jbuf *t, const char *key, const billing_invoice *inv, int kind)
{
    size_t n = kind == 0   ? billing_invoice_credit_count(inv)
               : kind == 1 ? billing_invoice_expired_count(inv)
                           : billing_invoice_returned_count(inv);
    const char *sep = "[";
    size_t i;

    ht_raw(t, key);
    for (i = 0; i < n; i++) {
        const char *am = kind == 0   ? billing_invoice_credit_amount(inv, i)
                         : kind == 1 ? billing_invoice_expired_amount(inv, i)
                                     : billing_invoice_returned_amount(inv, i);
        if (strspn(am, "0.") == strlen(am))
            continue;
        ht_raw(t, sep);
        sep = ",";
        ht_str(t, "{\"am\":", am);
        ht_str(t, ",\"g\":",
               kind == 0   ? billing_invoice_credit_grant(inv, i)
               : kind == 1 ? billing_invoice_expired_grant(inv, i)
                           : billing_invoice_returned_grant(inv, i));
        if (kind != 1)
            ht_str(t, ",\"rem\":",
                   kind == 0 ? billing_invoice_credit_remaining(inv, i)
                             : billing_invoice_returned_remaining(inv, i));
        ht_raw(t, "}");
    }
    ht_raw(t, sep[0] == '[' ? "[]" : "]");
}

/*
 * bs_draft_hash (drafthash.h) - the md5 of the text above, so that the same invoice always gives the same hash, the
 * one earlier versions stored. Computed here, as md5() would: sending
 * that text for the server to hash doubled the batch's JSON
 * (doc/performance.md, "Month-end close", 2026-12-06, the first close).
 */
int bs_draft_hash(const bs_draft *d, char hex[2 * BS_MD5_LEN + 1])
{
    const billing_invoice *inv = d->inv;
    size_t n = billing_invoice_line_count(inv);
    billing_time_t start;
    billing_time_t end;
    char ps[TIME_TEXT];
    char pe[TIME_TEXT];
    bc_jbuf t;
    size_t i;

    bc_jbuf_init(&t, DRAFT_TEXT_MAX);
    billing_invoice_period(inv, &start, &end);
    billing_time_format(start, ps, sizeof(ps));
    billing_time_format(end, pe, sizeof(pe));
    ht_str(&t, "{\"a\":", billing_invoice_account(inv));
    ht_str(&t, ",\"ac\":", billing_invoice_account_credit(inv));
    ht_str(&t, ",\"acl\":", billing_invoice_account_credit_left(inv));
    ht_str(&t, ",\"car\":", billing_invoice_carried(inv));
    ht_str(&t, ",\"cr\":", billing_invoice_credits(inv));
    ht_credits(&t, ",\"credits\":", inv, 0);
    ht_str(&t, ",\"cur\":", billing_invoice_currency(inv));
    ht_credits(&t, ",\"expired\":", inv, 1);
    ht_raw(&t, ",\"lines\":[");
    for (i = 0; i < n + d->n_adj; i++) {
        if (i > 0)
            ht_raw(&t, ",");
        if (i < n)
            ht_line(&t, inv, i, (int)i + 1);
        else
            ht_adjustment(&t, &d->adj[i - n], (int)i + 1);
    }
    ht_raw(&t, "]");
    ht_str(&t, ",\"pe\":", pe);
    ht_str(&t, ",\"ps\":", ps);
    ht_str(&t, ",\"ret\":", billing_invoice_returned(inv));
    ht_credits(&t, ",\"returned\":", inv, 2);
    ht_str(&t, ",\"sub\":", d->subtotal);
    ht_str(&t, ",\"tax\":", d->tax);
    ht_str(&t, ",\"tot\":", d->total);
    ht_str(&t, ",\"tr\":", billing_invoice_tax_rate(inv));
    ht_raw(&t, "}");
    if (t.failed) {
        bc_jbuf_free(&t);
        return -1;
    }
    bs_md5_hex(t.p, t.len, hex);
    bc_jbuf_free(&t);
    return 0;
}
