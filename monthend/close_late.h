/*
 * close_late.h - late events of finalized months as adjustment lines on a
 * month-end draft (close_late.c; doc/database.md, "Late events"). Used by
 * the close engine (close.c) for one account at a time; not thread-safe
 * per draft_slot, no shared state.
 */
#ifndef MONTHEND_CLOSE_LATE_H
#define MONTHEND_CLOSE_LATE_H

#include <gmp.h>

#include "billing.h"
#include "invoices.h"

/* Lines kept per account to compare with what was billed (bounded by prices, not events). */
#define BILLED_MAX 4096

/* A quantity billed (or recomputed) for one price key of one month. */
typedef struct billed {
    int year, month;
    const char *meter, *model, *region, *version, *unit, *unit_price;
    mpq_t price;
    mpq_t qty;
    int recomputed; /* 1: the library's figure; 0: what invoices billed */
} billed;

typedef struct account_adj {
    billed *rows;
    size_t n;
    size_t cap;
    bs_adjustment *adj;
    size_t n_adj;
    char **texts; /* strings the adjustments own */
    size_t n_texts;
    mpz_t sum; /* adjustment amounts, minor units */
} account_adj;

/* One account's draft: the library's invoice, the finalized months rechecked, adjustments. */
typedef struct draft_slot {
    billing_invoice *inv;
    billing_invoice *prior[BS_LATE_MONTHS]; /* finalized months rechecked, kept for their strings */
    size_t n_prior;
    account_adj adj;
    char subtotal[64], tax[64], total[64];
} draft_slot;

/*
 * late_load_billed - the rows of @lines[0..@n) (bs_billed_lines, sorted
 * by account) for @account, from *@row on, into @d: each finalized month
 * is recomputed once with @r and what was billed is subtracted. Returns 0
 * or -1 (out of memory, too many price keys or months).
 */
int late_load_billed(draft_slot *d, billing_rater *r, const char *account,
                     const bs_billed_line *lines, size_t n, size_t *row);

/* late_make_adjustments - rows with more usage than was billed as adjustment lines of @a. Returns 0
 * or -1. */
int late_make_adjustments(account_adj *a, int digits, billing_rounding mode);

/* late_adjusted_figures - subtotal + adjustments, tax on the post-credit amount, into @d's texts.
 */
void late_adjusted_figures(draft_slot *d, const billing_invoice *inv, int digits,
                           billing_rounding mode);

/* late_draft_slot_free - free what @d holds (the invoices too); @d itself is the caller's. */
void late_draft_slot_free(draft_slot *d);

#endif /* MONTHEND_CLOSE_LATE_H */
