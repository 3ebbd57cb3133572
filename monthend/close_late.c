/*
 * close_late.c - late events of finalized months as adjustment lines
 * (close_late.h). A finalized month is recomputed from the raw events with
 * the batch's rater; what its invoices and earlier adjustments billed is
 * subtracted per month and price key; more usage than was billed becomes
 * an adjustment line priced at that month's prices.
 */
#include "config.h"

#include <gmp.h> /* before billing.h: its exact decimal functions */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "close_late.h"
#include "exact.h"

/* ---------------------------------------------------------------------- */
/* Late events: adjustment lines                                           */
/* ---------------------------------------------------------------------- */

/*
 * Same month and price key. Not the unit price: a price fixed after
 * finalization must not turn billed usage into adjustments (corrections
 * of finalized invoices go through credit notes); only more quantity does.
 */
static int same_key(const billed *a, const billed *b)
{
    return a->year == b->year && a->month == b->month && strcmp(a->meter, b->meter) == 0 &&
           strcmp(a->model, b->model) == 0 && strcmp(a->region, b->region) == 0 &&
           strcmp(a->version, b->version) == 0;
}

/* Add @k's quantity (negated when billed) to its row, creating it. Returns 0 or -1. */
static int accumulate(account_adj *a, const billed *k, const char *qty_text)
{
    size_t i;
    mpq_t q;

    mpq_init(q);
    if (billing_decimal_parse(q, qty_text, NULL, 0) != BILLING_OK) {
        mpq_clear(q);
        return -1;
    }
    if (!k->recomputed)
        mpq_neg(q, q);
    for (i = 0; i < a->n; i++) {
        if (same_key(&a->rows[i], k))
            break;
    }
    if (i == a->n && a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        billed *rows = cap <= BILLED_MAX ? realloc(a->rows, cap * sizeof(*rows)) : NULL;
        if (rows == NULL) {
            mpq_clear(q);
            return -1;
        }
        a->rows = rows;
        a->cap = cap;
    }
    if (i == a->n) {
        a->rows[i] = *k;
        mpq_init(a->rows[i].price);
        mpq_set(a->rows[i].price, k->price);
        mpq_init(a->rows[i].qty);
        a->n++;
    }
    mpq_add(a->rows[i].qty, a->rows[i].qty, q);
    if (k->recomputed) {
        /* The adjustment is priced at the month's price as computed now. */
        mpq_set(a->rows[i].price, k->price);
        a->rows[i].unit = k->unit;
        a->rows[i].unit_price = k->unit_price;
        a->rows[i].recomputed = 1;
    }
    mpq_clear(q);
    return 0;
}

/* The library's usage lines of @year-@month for @account, added to @a. */
static int add_recomputed(account_adj *a, billing_rater *r, const char *account, int year,
                          int month, billing_invoice **keep)
{
    billing_invoice *inv = NULL;
    size_t i;
    billed k;

    if (billing_rater_invoice(r, account, year, month, &inv, NULL, 0) != BILLING_OK)
        return -1;
    *keep = inv;
    for (i = 0; i < billing_invoice_line_count(inv); i++) {
        billing_line_kind kind = billing_invoice_line_kind(inv, i);
        if (kind != BILLING_LINE_USAGE && kind != BILLING_LINE_INCLUDED)
            continue;
        memset(&k, 0, sizeof(k));
        k.year = year;
        k.month = month;
        k.meter = billing_invoice_line_meter(inv, i);
        k.model = billing_invoice_line_model(inv, i);
        k.region = billing_invoice_line_region(inv, i);
        k.version = billing_invoice_line_price_version(inv, i);
        k.unit = billing_invoice_line_unit(inv, i);
        k.unit_price = billing_invoice_line_unit_price(inv, i);
        k.recomputed = 1;
        mpq_init(k.price);
        billing_decimal_parse(k.price, k.unit_price, NULL, 0);
        if (accumulate(a, &k, billing_invoice_line_quantity(inv, i)) != 0) {
            mpq_clear(k.price);
            return -1;
        }
        mpq_clear(k.price);
    }
    return 0;
}

static char *keep_text(account_adj *a, char *s)
{
    if (s != NULL)
        a->texts[a->n_texts++] = s;
    return s;
}

/* Turn rows with more usage than was billed into adjustment lines. */
int late_make_adjustments(account_adj *a, int digits, billing_rounding mode)
{
    size_t i;
    mpq_t amount;
    mpz_t minor;
    mpz_t scale;
    char buf[128];

    a->adj = calloc(a->n ? a->n : 1, sizeof(*a->adj));
    a->texts = calloc(a->n ? 2 * a->n : 1, sizeof(char *));
    if (a->adj == NULL || a->texts == NULL)
        return -1;
    mpq_init(amount);
    mpz_init(minor);
    mpz_init(scale);
    mpz_ui_pow_ui(scale, 10, (unsigned long)digits);
    for (i = 0; i < a->n; i++) {
        billed *b = &a->rows[i];
        bs_adjustment *j = &a->adj[a->n_adj];
        if (!b->recomputed || mpq_sgn(b->qty) <= 0)
            continue;
        mpq_mul(amount, b->qty, b->price);
        mpz_mul(mpq_numref(amount), mpq_numref(amount), scale);
        mpq_canonicalize(amount);
        billing_decimal_round(minor, amount, 0, mode);
        mpz_add(a->sum, a->sum, minor);
        exact_minor_text(buf, sizeof(buf), minor, digits);
        j->year = b->year;
        j->month = b->month;
        j->meter = b->meter;
        j->model = b->model;
        j->region = b->region;
        j->price_version = b->version;
        j->unit = b->unit;
        j->unit_price = b->unit_price;
        j->quantity = keep_text(a, exact_q_text(b->qty));
        j->amount = keep_text(a, strdup(buf));
        if (j->quantity == NULL || j->amount == NULL)
            break;
        a->n_adj++;
    }
    mpz_clear(scale);
    mpz_clear(minor);
    mpq_clear(amount);
    return i == a->n ? 0 : -1;
}

static void account_adj_free(account_adj *a)
{
    size_t i;

    for (i = 0; i < a->n; i++) {
        mpq_clear(a->rows[i].price);
        mpq_clear(a->rows[i].qty);
    }
    for (i = 0; i < a->n_texts; i++)
        free(a->texts[i]);
    free(a->texts);
    free(a->adj);
    free(a->rows);
    mpz_clear(a->sum);
}

/* ---------------------------------------------------------------------- */
/* One account's draft                                                     */
/* ---------------------------------------------------------------------- */

/* The rows of @lines for @account (sorted by account: from @*row on). */
int late_load_billed(draft_slot *d, billing_rater *r, const char *account,
                     const bs_billed_line *lines, size_t n, size_t *row)
{
    billed k;

    for (; *row < n && strcmp(lines[*row].account, account) == 0; (*row)++) {
        const bs_billed_line *b = &lines[*row];
        size_t i;
        memset(&k, 0, sizeof(k));
        k.year = atoi(b->month);
        k.month = atoi(b->month + 5);
        /* A finalized month: recompute it once. */
        for (i = 0; i < d->n_prior; i++) {
            if (billing_invoice_year(d->prior[i]) == k.year &&
                billing_invoice_month(d->prior[i]) == k.month)
                break;
        }
        if (i == d->n_prior) {
            if (d->n_prior == sizeof(d->prior) / sizeof(d->prior[0]) ||
                add_recomputed(&d->adj, r, account, k.year, k.month, &d->prior[d->n_prior]) != 0)
                return -1;
            d->n_prior++;
        }
        if (b->meter[0] == '\0')
            continue;
        k.meter = b->meter;
        k.model = b->model;
        k.region = b->region;
        k.version = b->version;
        mpq_init(k.price);
        billing_decimal_parse(k.price, b->unit_price, NULL, 0);
        /* quantity/quantity_den as "q/d" */
        {
            char qty[256];
            snprintf(qty, sizeof(qty), "%s", b->quantity);
            if (strcmp(b->quantity_den, "1") != 0) {
                mpq_t a;
                mpq_t den;
                char *t;
                mpq_init(a);
                mpq_init(den);
                billing_decimal_parse(a, qty, NULL, 0);
                billing_decimal_parse(den, b->quantity_den, NULL, 0);
                mpq_div(a, a, den);
                t = mpq_get_str(NULL, 10, a);
                snprintf(qty, sizeof(qty), "%s", t != NULL ? t : "0");
                free(t);
                mpq_clear(den);
                mpq_clear(a);
            }
            if (accumulate(&d->adj, &k, qty) != 0) {
                mpq_clear(k.price);
                return -1;
            }
        }
        mpq_clear(k.price);
    }
    return 0;
}

/* Figures of a draft with adjustments: subtotal + adjustments, tax on the post-credit amount. */
void late_adjusted_figures(draft_slot *d, const billing_invoice *inv, int digits,
                           billing_rounding mode)
{
    mpz_t sub, cred, tax, total;
    mpq_t q;
    mpq_t rate;

    mpz_inits(sub, cred, tax, total, NULL);
    mpq_init(q);
    mpq_init(rate);
    exact_minor_add(sub, billing_invoice_subtotal(inv), digits);
    mpz_add(sub, sub, d->adj.sum);
    exact_minor_add(cred, billing_invoice_credits(inv), digits);
    /* libbilling's total: subtotal + returned - credits - account_credit + carried + tax. */
    exact_minor_add(cred, billing_invoice_account_credit(inv), digits);
    exact_minor_add(total, billing_invoice_returned(inv), digits);
    exact_minor_add(total, billing_invoice_carried(inv), digits);
    mpz_add(total, total, sub);
    mpz_sub(total, total, cred);
    billing_decimal_parse(rate, billing_invoice_tax_rate(inv), NULL, 0);
    mpq_set_z(q, total);
    mpq_mul(q, q, rate);
    billing_decimal_round(tax, q, 0, mode);
    mpz_add(total, total, tax);
    exact_minor_text(d->subtotal, sizeof(d->subtotal), sub, digits);
    exact_minor_text(d->tax, sizeof(d->tax), tax, digits);
    exact_minor_text(d->total, sizeof(d->total), total, digits);
    mpq_clear(rate);
    mpq_clear(q);
    mpz_clears(sub, cred, tax, total, NULL);
}

void late_draft_slot_free(draft_slot *d)
{
    size_t i;

    billing_invoice_destroy(d->inv);
    for (i = 0; i < d->n_prior; i++)
        billing_invoice_destroy(d->prior[i]);
    account_adj_free(&d->adj);
}
