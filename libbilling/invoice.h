/*
 * invoice.h - an account-month's charges before and after credit.
 * Internal to libbilling; shared by invoice.c and credit.c.
 */
#ifndef BILLING_INVOICE_H
#define BILLING_INVOICE_H

#include <gmp.h>

#include "rater.h"

typedef struct bl_line {
    /* Identity: lines with equal identity are one line. */
    billing_line_kind kind;
    billing_meter meter;    /* usage and included lines (fee and refund lines have none) */
    uint32_t rate;          /* usage lines: rate index or BL_RATE_ZERO */
    uint32_t attrs;         /* included lines: the events' pair in r->attrs */
    const char *attrs_key;  /* ... and its key, to order lines by it, not by arrival */
    size_t plan;            /* included/fee/refund lines: plan index */
    size_t version;         /* fee/refund lines: version index */
    size_t sub;             /* refund lines: the subscription (one line each) */
    /* Refund lines: the unused span [span_start, span_end) of the term. */
    billing_time_t span_start;
    billing_time_t span_end;
    mpq_t quantity;
    mpq_t unit_price;
    mpq_t amount;
    mpz_t rounded;          /* amount in minor units */
} bl_line;

/* Charges of one account-month, with per-epoch pools that credit can pay. */
typedef struct bl_month {
    size_t account;
    int32_t month;
    billing_time_t start;
    billing_time_t end;
    bl_line *lines;
    size_t n_lines;
    size_t cap_lines;
    size_t n_pools;         /* epochs + 1 */
    mpq_t *pools;           /* [epoch * 2 + (kind - 1)], exact, >= 0 after clamping */
    mpz_t subtotal;         /* minor units */
} bl_month;

/*
 * bl_month_compute - the lines, subtotal and credit pools of account @ai
 * in month @month (year * 12 + month - 1). Returns BILLING_OK or
 * BILLING_ERR_NOMEM. Free with bl_month_clear even on error.
 */
billing_status bl_month_compute(billing_rater *r, size_t ai, int32_t month, bl_month *out);

/* bl_month_clear - free what bl_month_compute allocated. */
void bl_month_clear(bl_month *m);

/*
 * bl_account_months - the months (year * 12 + month - 1) in which account
 * @ai has usage, plan fees or refunds, ascending and distinct, in a malloc'd
 * array (caller frees) with the count in *@n; NULL with *n = 0 if none or
 * out of memory (then *n = (size_t)-1).
 */
int32_t *bl_account_months(billing_rater *r, size_t ai, size_t *n);

/*
 * Credit state of one account while walking its months in order. In
 * minor mode (invoices) a grant's remainder drops by what invoices apply,
 * rounded down to the minor unit and capped by the subtotal; in exact mode
 * (live balance) it drops by the exact amount consumed.
 */
typedef struct bl_credit {
    int exact;
    size_t n;               /* grants of the account, in application order */
    mpq_t *remaining;       /* per grant */
    mpz_t *applied;         /* minor mode: applied on the month just processed */
} bl_credit;

/*
 * Invoices replay credit from an account's first month with charges, so
 * that each month sees what earlier months used. bl_credit_memo keeps,
 * per account, the state after the last replay, so that invoices asked
 * for in ascending order replay each month once. It is valid while the
 * rater's generation (bumped by every add and remove) is unchanged.
 */
typedef struct bl_credit_memo {
    int valid;
    uint64_t gen;
    int32_t month;          /* the state is after every month before this one */
    bl_credit c;
} bl_credit_memo;

/* bl_credit_memo_free - free the rater's memos (billing_rater_destroy). */
void bl_credit_memo_free(billing_rater *r);

/* bl_credit_init - full grants for account @ai. Returns 0 or -1 (no memory). */
int bl_credit_init(bl_credit *c, const billing_catalog *cat, size_t ai, int exact);

/* bl_credit_clear - free the state. */
void bl_credit_clear(bl_credit *c);

/*
 * bl_credit_apply - spend the account's grants on month @m: in
 * application order, each grant pays the eligible pools of the epochs
 * inside its window, never more than its remainder. Pools are consumed.
 */
void bl_credit_apply(const billing_catalog *cat, size_t ai, bl_month *m, bl_credit *c);

#endif /* BILLING_INVOICE_H */
