/*
 * invoice.h - an account-month's charges before and after credit.
 * Internal to libbilling; shared by month.c (lines and pools), credit.c
 * (spending grants), history.c (issued months, the credit memo),
 * invoice.c (the replay, the public invoice), balance.c (the live
 * balance) and crossing.c, in that order: each uses only those before it.
 */
#ifndef BILLING_INVOICE_H
#define BILLING_INVOICE_H

#include <gmp.h>

#include "rater.h"

/* The part of a line's exact amount in one credit epoch. */
typedef struct bl_line_part {
    size_t epoch;
    mpq_t amount;
} bl_line_part;

/* Where a refund goes back to: the fee it refunds, charged in an earlier month. */
typedef struct bl_refund_part {
    int32_t month; /* the month of the refunded term's fee */
    size_t epoch;  /* the credit epoch of the term's start */
    mpq_t amount;  /* exact, > 0: what is given back */
} bl_refund_part;

typedef struct bl_line {
    /* Identity: lines with equal identity are one line. */
    billing_line_kind kind;
    billing_meter meter;   /* usage and included lines (fee and refund lines have none) */
    uint32_t rate;         /* usage lines: rate index or BL_RATE_ZERO */
    uint32_t attrs;        /* included lines: the events' pair in r->attrs */
    const char *attrs_key; /* ... and its key, to order lines by it, not by arrival */
    size_t plan;           /* included/fee/refund lines: plan index */
    size_t version;        /* fee/refund lines: version index */
    size_t sub;            /* refund lines: the subscription (one line each) */
    /* Refund lines: the unused span [span_start, span_end) of the term. */
    billing_time_t span_start;
    billing_time_t span_end;
    mpq_t quantity;
    mpq_t unit_price;
    mpq_t amount;
    mpz_t rounded;       /* amount in minor units */
    bl_line_part *parts; /* the exact amount by credit epoch, ascending epochs */
    size_t n_parts;
    size_t parts_init;       /* parts[0..parts_init) have their amount initialised (>= n_parts) */
    size_t cap_parts;        /* parts allocated */
    bl_refund_part *sources; /* refund lines: refunds of fees of earlier months */
    size_t n_sources;
    /*
     * While bl_month_compute adds a month's aggregates: non-zero when every
     * aggregate of this usage or included line so far had an integer sum,
     * kept unscaled (quantity's numerator and each part's amount, over 1;
     * amount still zero) until the line is scaled once by its meter's
     * divisor and its price (month.c, line_scale). Zero in a computed month.
     */
    int unscaled;
} bl_line;

/*
 * Charges of one account-month, with per-epoch pools that credit can pay.
 * The pools hold the invoice's own figures: each line's rounded amount is
 * spread over the epochs it covers, so credit pays what the invoice shows.
 */
typedef struct bl_month {
    size_t account;
    int32_t month;
    billing_time_t start;
    billing_time_t end;
    bl_line *lines;
    size_t n_lines;
    size_t cap_lines;
    size_t n_init;    /* lines[0..n_init) have their GMP values initialised (>= n_lines) */
    size_t n_pools;   /* epochs + 1 */
    size_t cap_pools; /* pools[0..2 * cap_pools) initialised (>= n_pools) */
    mpz_t *pools;     /* [epoch * 2 + (usage 0, fees 1)], minor units, >= 0 */
    mpz_t subtotal;   /* minor units */
    /*
     * bl_credit_apply's working storage, kept with the month's (and by
     * bl_month_release) so that applying credit allocates nothing once
     * grown: GMP values (scratch[0..n_scratch) initialised; their values
     * meaningless between calls) and indices (idx_size bytes at idx).
     */
    mpz_t *scratch;
    size_t n_scratch;
    void *idx;
    size_t idx_size;
    int amounts_only; /* bl_month_compute_amounts: see there */
} bl_month;

/*
 * bl_month_compute - the lines, subtotal and credit pools of account @ai
 * in month @month (year * 12 + month - 1). Returns BILLING_OK or
 * BILLING_ERR_NOMEM. Free with bl_month_clear even on error.
 */
billing_status bl_month_compute(billing_rater *r, size_t ai, int32_t month, bl_month *out);

/*
 * bl_month_compute_amounts - bl_month_compute for a caller that reads only
 * the lines' amounts, rounded amounts and parts, the subtotal and the
 * pools (credit and the balance): the same values, but a usage line's
 * amount and parts may be left unreduced (numerator and denominator with a
 * common factor: equal values, so rounded and added alike, while mpq_equal
 * may tell two equal ones apart), and usage lines' quantities are not
 * computed (meaningless). Not for anything printed.
 */
billing_status bl_month_compute_amounts(billing_rater *r, size_t ai, int32_t month, bl_month *out);

/*
 * bl_month_pools - fill @m's pools from its rounded lines: each line's
 * rounded amount is cut by epoch at the rounded running sums of its exact
 * parts (so the parts add up to the line), usage and included lines to the
 * usage pool, fee and refund lines to the fee pool; a pool made negative
 * by a refund is zero (a refund is never credit to spend). Uses @r's
 * scratch (bl_scratch) and its catalog's digits and rounding.
 */
void bl_month_pools(billing_rater *r, bl_month *m);

/*
 * bl_line_part_add - add @amount to line @l's part in credit epoch
 * @epoch (so that credit can pay the line's rounded amount by epoch).
 * Returns 0, or -1 when out of memory.
 */
int bl_line_part_add(bl_line *l, size_t epoch, const mpq_t amount);

/*
 * bl_refund_source - account for @refund (exact, > 0) on refund line @l of
 * @m, given back for the term that started in month @fee_month, credit
 * epoch @fee_epoch. A fee on this same invoice is netted with its refund
 * in that epoch's pool; a fee of an earlier month is kept as a source, so
 * that the credit that paid it gets its share back (bl_credit_apply).
 * Returns 0, or -1 when out of memory.
 */
int bl_refund_source(bl_month *m, bl_line *l, int32_t fee_month, size_t fee_epoch,
                     const mpq_t refund);

/* bl_month_clear - free what bl_month_compute allocated. */
void bl_month_clear(bl_month *m);

/*
 * bl_month_release - done with @m (computed by bl_month_compute of @r,
 * even on error): as bl_month_clear, but its lines' GMP values and arrays
 * are kept by @r (at most BL_MONTH_SPARES months) for the next
 * bl_month_compute, which then allocates nothing for lines, parts and
 * pools the kept ones cover. @m is zeroed. Not thread-safe per rater.
 */
#define BL_MONTH_SPARES 2
void bl_month_release(billing_rater *r, bl_month *m);

/*
 * bl_account_months - the months (year * 12 + month - 1) in which account
 * @ai has usage, plan fees or refunds, ascending and distinct, in a malloc'd
 * array (caller frees) with the count in *@n; NULL with *n = 0 if none or
 * out of memory (then *n = (size_t)-1).
 */
int32_t *bl_account_months(billing_rater *r, size_t ai, size_t *n);

/*
 * bl_account_has_month - whether @month is one of bl_account_months'
 * months of account @ai (charges in it), without building the list.
 */
int bl_account_has_month(billing_rater *r, size_t ai, int32_t month);

/*
 * bl_account_has_month_before - whether one of bl_account_months' months of
 * account @ai is before @month, without building the list.
 */
int bl_account_has_month_before(billing_rater *r, size_t ai, int32_t month);

/* What grants paid of one month's fee pool: refunds of those fees go back pro rata. */
typedef struct bl_fee_paid {
    int32_t month;
    size_t epoch;
    mpz_t pool;      /* the pool before credit, minor units */
    mpz_t *by_grant; /* per grant */
} bl_fee_paid;

/*
 * Credit state of one account while walking its months in order, in minor
 * units: a grant's remainder drops by what each invoice applies and rises
 * by what refunds of fees it paid give back. The account balance is what
 * invoices below zero left to the customer (carried to the next invoices,
 * spent after every grant).
 */
typedef struct bl_credit {
    size_t n;         /* grants of the account, in application order */
    mpz_t *remaining; /* per grant */
    mpz_t *applied;   /* per grant, on the month just processed */
    mpz_t *returned;  /* per grant, given back by refunds on that month */
    mpz_t returned_total;
    bl_fee_paid *paid; /* fee pools paid by credit, in month order */
    size_t n_paid;
    size_t cap_paid;
    mpz_t balance;         /* account credit left after the month just processed */
    mpz_t balance_applied; /* account credit spent on the month just processed */
    mpz_t carried;         /* the month's excess below zero, added to the balance */
} bl_credit;

/*
 * A month whose invoice was issued (billing_rater_credit_issued): what it took from each
 * grant of the account (minor units, net of what its refunds gave back;
 * zero for grants it did not touch), and the account credit after it.
 */
typedef struct bl_issued_month {
    int32_t month;
    mpz_t *taken; /* per grant of the account, in application order */
    int has_balance;
    mpz_t balance;
} bl_issued_month;

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
    int32_t month; /* the state is after every month before this one */
    bl_credit c;
    /* billing_rater_credit_issued: months whose credit use is given, ascending. */
    struct bl_issued_month *issued;
    size_t n_issued;
    size_t c_grants; /* grants of the account when they were given */
    /*
     * The live credit (balance.c): the state after month live_month's
     * charges as rated at generation live_gen, which the balance, the
     * grants and the exhaustion of one instant all start from, and which
     * the invoice of that month computes too (bl_live_put): a balance
     * request computes its month once, not four times.
     */
    int live_valid;
    uint64_t live_gen;
    int32_t live_month;
    bl_credit live;
} bl_credit_memo;

/*
 * bl_replay_months - apply credit to @c (initialised by the caller) for
 * every month of account @ai with charges before @target, in order;
 * months whose invoices were issued take what they took then
 * (billing_rater_credit_issued). Leaves the memo at @target.
 * Used by invoices and by the live balance (balance.c), so that both see
 * issued months as the ledger holds them. BILLING_OK or
 * BILLING_ERR_NOMEM / a rating error. Not thread-safe per rater.
 */
billing_status bl_replay_months(billing_rater *r, size_t ai, int32_t target, bl_credit *c);

/*
 * bl_credit_memo_of - the memo of account @ai (NULL when out of memory:
 * replay from the start). The first call allocates every account's memo
 * and sets r->credit_memo_free (history.c).
 */
bl_credit_memo *bl_credit_memo_of(billing_rater *r, size_t ai);

/*
 * Issued months in the replay (history.c). bl_issued_from: the first of
 * @memo's issued months at or after @month (0 for a NULL memo).
 * bl_issued_until: take every issued month from index @k that is before
 * @month (no charges now, or replayed without them) into @c; returns the
 * index after them. bl_issued_at: whether issued month @k is @month.
 * bl_issued_take: @c after issued month @im: each grant's remainder
 * @before it less what it took (never below zero), the account credit as
 * issued (@before NULL: @c's remainders are those before it).
 * Snapshots hold @c's remainders (NULL when out of memory).
 */
size_t bl_issued_from(const bl_credit_memo *memo, int32_t month);
size_t bl_issued_until(const bl_credit_memo *memo, size_t k, int32_t month, bl_credit *c);
int bl_issued_at(const bl_credit_memo *memo, size_t k, int32_t month);
void bl_issued_take(const bl_issued_month *im, bl_credit *c, mpz_t *before);
/*
 * bl_issued_later - what issued months after @month took is not @c's to
 * spend on @month: each grant's remainder less it (never below zero). A
 * month issued again after later months were issued takes only what they
 * left (the ledger holds no more).
 */
void bl_issued_later(const bl_credit_memo *memo, int32_t month, bl_credit *c);
mpz_t *bl_issued_snapshot_new(const bl_credit *c);
void bl_issued_snapshot(mpz_t *snap, const bl_credit *c);
void bl_issued_snapshot_free(mpz_t *snap, const bl_credit *c);

/*
 * bl_live_get - @c (initialised by bl_credit_init for account @ai) set to
 * the live credit of @month kept in the account's memo when it is valid
 * for the rater's generation; 1 when set, 0 when not (compute it), -1
 * when out of memory (@c incomplete).
 * bl_live_put - keep @c as the live credit of @month for the rater's
 * generation (nothing kept when out of memory: the answer is right
 * anyway). Issued months given later forget it (billing_rater_credit_issued).
 */
int bl_live_get(billing_rater *r, size_t ai, int32_t month, bl_credit *c);
void bl_live_put(billing_rater *r, size_t ai, int32_t month, const bl_credit *c);

/* bl_issued_free - forget @memo's issued months. */
void bl_issued_free(bl_credit_memo *memo);

/* bl_credit_init - full grants for account @ai. Returns 0 or -1 (no memory). */
int bl_credit_init(bl_credit *c, const billing_catalog *cat, size_t ai);

/*
 * bl_credit_copy - @dst = @src; both initialised for the same account.
 * Returns 0, or -1 when out of memory (@dst is then incomplete: clear it
 * or copy again).
 */
int bl_credit_copy(bl_credit *dst, const bl_credit *src);

/* bl_credit_clear - free the state. */
void bl_credit_clear(bl_credit *c);

/*
 * bl_credit_balance_q - the live credit balance of account @ai at @now,
 * exactly as billing_rater_credit_balance writes it, into @out
 * (initialised by the caller). BILLING_OK or BILLING_ERR_NOMEM.
 */
billing_status bl_credit_balance_q(billing_rater *r, size_t ai, billing_time_t now, mpq_t out);

/*
 * bl_credit_apply - spend the account's grants, then its balance, on
 * month @m. First, refunds of fees that grants paid in earlier months give
 * each grant back its share (the fee's part it paid, pro rata; rounded
 * like the line). Then grants pay as much of the eligible pools as they can together
 * (a grant pays only pools of its kinds in epochs inside its window, never
 * more than its remainder, and all grants together never more than the
 * subtotal plus what went back to grants); among the allocations that pay the most, earlier grants in
 * application order pay as much as they can. The balance pays what is
 * left; below zero, the excess is carried to the balance.
 * Pools are consumed. Returns 0, or -1 when out of memory (then @c is
 * half-updated: clear it).
 */
int bl_credit_apply(const billing_catalog *cat, size_t ai, bl_month *m, bl_credit *c);

#endif /* BILLING_INVOICE_H */
