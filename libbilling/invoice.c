/*
 * invoice.c - the public invoice: one account, one local month, lines
 * rounded once each, credit applied in order, an amount below zero
 * carried to the account credit, tax on what is left rounded once, every
 * figure as text that reconciles exactly.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "invoice.h"
#include "zone.h"

typedef struct inv_line {
    billing_line_kind kind;
    const char *meter;
    const char *model;
    const char *region;
    const char *plan;
    const char *version;
    const char *subscription;
    const char *unit;
    billing_time_t span_start;
    billing_time_t span_end;
    /* Included lines: the events' own model and region (the rater's may go first). */
    char model_buf[BL_ATTR_MAX + 1];
    char region_buf[BL_ATTR_MAX + 1];
    char *quantity;
    char *unit_price;
    char *amount;
    char *amount_rounded;
} inv_line;

typedef struct inv_credit {
    const char *grant;
    char *amount;
    char *remaining;
} inv_credit;

struct billing_invoice {
    const char *account;
    const char *currency;
    int year;
    int month;
    billing_time_t start;
    billing_time_t end;
    inv_line *lines;
    size_t n_lines;
    inv_credit *credits;
    size_t n_credits;
    inv_credit *expired;
    size_t n_expired;
    inv_credit *returned;
    size_t n_returned;
    char *returned_total;
    char *subtotal;
    char *credit_total;
    char *account_credit;
    char *carried;
    char *account_credit_left;
    const char *tax_rate;
    char *tax;
    char *total;
};

void billing_invoice_destroy(billing_invoice *inv)
{
    size_t i;

    if (inv == NULL)
        return;
    for (i = 0; i < inv->n_lines; i++) {
        free(inv->lines[i].quantity);
        free(inv->lines[i].unit_price);
        free(inv->lines[i].amount);
        free(inv->lines[i].amount_rounded);
    }
    for (i = 0; i < inv->n_credits; i++) {
        free(inv->credits[i].amount);
        free(inv->credits[i].remaining);
    }
    for (i = 0; i < inv->n_expired; i++) {
        free(inv->expired[i].amount);
        free(inv->expired[i].remaining);
    }
    for (i = 0; i < inv->n_returned; i++) {
        free(inv->returned[i].amount);
        free(inv->returned[i].remaining);
    }
    free(inv->returned);
    free(inv->returned_total);
    free(inv->lines);
    free(inv->credits);
    free(inv->expired);
    free(inv->subtotal);
    free(inv->credit_total);
    free(inv->account_credit);
    free(inv->carried);
    free(inv->account_credit_left);
    free(inv->tax);
    free(inv->total);
    free(inv);
}

static const char *line_unit(billing_line_kind kind, billing_meter meter)
{
    if (kind == BILLING_LINE_FEE)
        return "term";
    if (kind == BILLING_LINE_REFUND)
        return "second";
    switch (meter) {
    case BILLING_METER_GPU:
        return "GPU-hour";
    case BILLING_METER_GPULESS:
        return "instance-hour";
    case BILLING_METER_STORAGE:
        return "GB-month";
    case BILLING_METER_TRAFFIC:
        return "GB";
    }
    return "";
}

/* Model, region, plan, version and subscription of a line, by kind. */
static void fill_labels(const billing_rater *r, const bl_line *l, inv_line *out)
{
    const billing_catalog *cat = r->cat;
    const bl_rate *rate;
    const bl_plan *plan;
    const bl_attrs *attrs;

    out->plan = "";
    out->version = "";
    out->subscription = "";
    out->model = "*";
    out->region = "*";
    if (l->plan != BL_NONE) {
        plan = BL_AT(cat->plans, bl_plan, l->plan);
        out->plan = plan->id;
        out->model = plan->model;
        out->region = plan->region;
    }
    if (l->attrs != BL_ATTRS_NONE) {
        /* What was used, which the plan's model and region need not be. */
        attrs = BL_AT(r->attrs, bl_attrs, l->attrs);
        strcpy(out->model_buf, attrs->model);
        strcpy(out->region_buf, attrs->region);
        out->model = out->model_buf;
        out->region = out->region_buf;
    }
    if (l->rate != BL_RATE_NONE && l->rate != BL_RATE_ZERO) {
        rate = BL_AT(cat->rates, bl_rate, l->rate);
        out->model = rate->model;
        out->region = rate->region;
        out->version = BL_AT(cat->versions, bl_version, rate->version)->id;
    }
    if (l->version != BL_NONE)
        out->version = BL_AT(cat->versions, bl_version, l->version)->id;
    if (l->sub != BL_NONE)
        out->subscription = BL_AT(cat->subs, bl_sub, l->sub)->id;
}

/* Fill the text of one line; returns -1 when out of memory. */
static int fill_line(const billing_rater *r, const bl_line *l, inv_line *out)
{
    int plan_line = l->kind == BILLING_LINE_FEE || l->kind == BILLING_LINE_REFUND;

    out->kind = l->kind;
    /* A fee or refund is for a plan's term, not for a metered quantity. */
    out->meter = plan_line ? "" : billing_meter_name(l->meter);
    out->unit = line_unit(l->kind, l->meter);
    out->span_start = l->span_start;
    out->span_end = l->span_end;
    fill_labels(r, l, out);
    out->quantity = bl_q_to_string(l->quantity);
    /* A refund is a share of the term's fee, not a price per second. */
    out->unit_price = l->kind == BILLING_LINE_REFUND ? calloc(1, 1) : bl_q_to_string(l->unit_price);
    out->amount = bl_q_to_string(l->amount);
    out->amount_rounded = bl_minor_to_string(l->rounded, r->cat->digits);
    if (out->quantity == NULL || out->unit_price == NULL || out->amount == NULL ||
        out->amount_rounded == NULL)
        return -1;
    return 0;
}

static int fill_lines(const billing_rater *r, const bl_month *m, billing_invoice *inv)
{
    size_t i;

    inv->lines = calloc(m->n_lines ? m->n_lines : 1, sizeof(inv_line));
    if (inv->lines == NULL)
        return -1;
    for (i = 0; i < m->n_lines; i++) {
        inv->n_lines++;
        if (fill_line(r, &m->lines[i], &inv->lines[i]) != 0)
            return -1;
    }
    return 0;
}

static int32_t month_of_instant(const billing_zone *zone, billing_time_t t)
{
    int year;
    int month;

    billing_zone_year_month(zone, t, &year, &month);
    return bl_month_index(year, month);
}

/* An entry of @list: grant @id, @amount and, if non-NULL, @remaining. */
static int add_entry(inv_credit *list, size_t *n, const char *id, const mpz_t amount,
                     const mpz_t *remaining, int digits)
{
    inv_credit *e = &list[(*n)++];

    e->grant = id;
    e->amount = bl_minor_to_string(amount, digits);
    e->remaining = remaining ? bl_minor_to_string(*remaining, digits) : NULL;
    return (e->amount == NULL || (remaining && e->remaining == NULL)) ? -1 : 0;
}

/*
 * What expires on this invoice of grant @i: its remainder in the month of
 * its expiry; after it, what refunds gave back to it (it can pay nothing).
 */
static const mpz_t *expiring(const bl_account *a, const bl_grant *g, const bl_month *m,
                             const bl_credit *c, size_t i)
{
    if (mpz_sgn(c->remaining[i]) <= 0 || g->expires_at > m->end)
        return NULL;
    if (month_of_instant(a->zone, g->expires_at - 1) == m->month)
        return (const mpz_t *)&c->remaining[i];
    return mpz_sgn(c->returned[i]) > 0 ? (const mpz_t *)&c->returned[i] : NULL;
}

/*
 * What is left of grant @i on this invoice, before what expires on it: its
 * remainder; for a grant that expired in an earlier month, only what
 * refunds gave back to it this month (what it had left then expired on
 * that month's invoice, though the replay keeps it in the remainder). The
 * ledger holds the same (doc/pricing.md, "Expiry").
 */
static const mpz_t *left_on(const bl_account *a, const bl_grant *g, const bl_month *m,
                            const bl_credit *c, size_t i)
{
    if (g->expires_at <= m->start && month_of_instant(a->zone, g->expires_at - 1) < m->month)
        return (const mpz_t *)&c->returned[i];
    return (const mpz_t *)&c->remaining[i];
}

/* Credit given back by refunds this month, with its total. */
static int fill_returned(const billing_catalog *cat, const bl_account *a, const bl_month *m,
                         const bl_credit *c, billing_invoice *inv)
{
    const bl_grant *g;
    size_t i;

    inv->returned = calloc(c->n ? c->n : 1, sizeof(inv_credit));
    inv->returned_total = bl_minor_to_string(c->returned_total, cat->digits);
    if (inv->returned == NULL || inv->returned_total == NULL)
        return -1;
    for (i = 0; i < c->n; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if (mpz_sgn(c->returned[i]) > 0 &&
            add_entry(inv->returned, &inv->n_returned, g->id, c->returned[i],
                      left_on(a, g, m, c, i), cat->digits) != 0)
            return -1;
    }
    return 0;
}

/* Credits applied this month, and grants expiring in it with a remainder. */
static int fill_credits(const billing_catalog *cat, const bl_account *a, const bl_month *m,
                        const bl_credit *c, billing_invoice *inv, mpz_t credit_total)
{
    const bl_grant *g;
    const mpz_t *gone;
    size_t i;
    int rc = 0;

    inv->credits = calloc(c->n ? c->n : 1, sizeof(inv_credit));
    inv->expired = calloc(c->n ? c->n : 1, sizeof(inv_credit));
    if (inv->credits == NULL || inv->expired == NULL || fill_returned(cat, a, m, c, inv) != 0)
        return -1;
    for (i = 0; i < c->n && rc == 0; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if (mpz_sgn(c->applied[i]) > 0) {
            mpz_add(credit_total, credit_total, c->applied[i]);
            rc = add_entry(inv->credits, &inv->n_credits, g->id, c->applied[i],
                           (const mpz_t *)&c->remaining[i], cat->digits);
        }
        gone = expiring(a, g, m, c, i);
        if (rc == 0 && gone != NULL)
            rc = add_entry(inv->expired, &inv->n_expired, g->id, *gone, NULL, cat->digits);
    }
    return rc;
}

/*
 * What is due: the subtotal less grant credit and account credit, with an
 * amount below zero carried to the account credit instead (so never below
 * zero); tax on it, rounded once; then the total.
 */
static int fill_totals(const billing_catalog *cat, const bl_account *a, const bl_month *m,
                       const bl_credit *c, const mpz_t credit_total, billing_invoice *inv)
{
    mpz_t net;
    mpz_t tax;
    mpz_t total;
    mpq_t q;

    mpz_init(net);
    mpz_init(tax);
    mpz_init(total);
    mpq_init(q);
    mpz_add(net, m->subtotal, c->returned_total);
    mpz_sub(net, net, credit_total);
    mpz_sub(net, net, c->balance_applied);
    mpz_add(net, net, c->carried);
    mpq_set_z(q, net);
    mpq_mul(q, q, a->tax_rate);
    bl_q_round_minor(tax, q, 0, cat->rounding); /* q is in minor units already */
    mpz_add(total, net, tax);
    inv->subtotal = bl_minor_to_string(m->subtotal, cat->digits);
    inv->credit_total = bl_minor_to_string(credit_total, cat->digits);
    inv->account_credit = bl_minor_to_string(c->balance_applied, cat->digits);
    inv->carried = bl_minor_to_string(c->carried, cat->digits);
    inv->account_credit_left = bl_minor_to_string(c->balance, cat->digits);
    inv->tax = bl_minor_to_string(tax, cat->digits);
    inv->total = bl_minor_to_string(total, cat->digits);
    inv->tax_rate = a->tax_text;
    mpz_clear(net);
    mpz_clear(tax);
    mpz_clear(total);
    mpq_clear(q);
    return (inv->subtotal && inv->credit_total && inv->account_credit && inv->carried &&
            inv->account_credit_left && inv->tax && inv->total)
               ? 0
               : -1;
}

/*
 * Earlier months matter to an invoice through the account's grants, and
 * through refunds that take an invoice below zero (account credit).
 */
static int carries_credit(const billing_catalog *cat, size_t ai)
{
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    const bl_sub *s;
    size_t i;

    for (i = 0; i < a->n_subs; i++) {
        s = BL_AT(cat->subs, bl_sub, a->subs[i]);
        if (BL_AT(cat->plans, bl_plan, s->plan)->refundable)
            return 1;
    }
    return a->n_grants > 0;
}

/*
 * Apply credit to every month with charges before @target, in order,
 * starting from the memo when it is still valid and not past @target, and
 * leave the memo at @target. Months whose invoices were issued take what
 * they took then (billing_rater_credit_issued), with or without charges now.
 */
billing_status bl_replay_months(billing_rater *r, size_t ai, int32_t target, bl_credit *c)
{
    bl_credit_memo *memo;
    int32_t *months;
    int32_t from = INT32_MIN;
    mpz_t *before = NULL;
    size_t n;
    size_t i;
    size_t k;
    int issued;
    bl_month m;
    billing_status st = BILLING_OK;

    if (!carries_credit(r->cat, ai))
        return BILLING_OK; /* earlier months change nothing */
    memo = bl_credit_memo_of(r, ai);
    if (memo != NULL && memo->valid && memo->gen == r->gen && memo->month <= target) {
        if (bl_credit_copy(c, &memo->c) != 0)
            return BILLING_ERR_NOMEM;
        from = memo->month;
    }
    /* Nothing before @target (an account's first month): no list to build and sort. */
    n = 0;
    months = bl_account_has_month_before(r, ai, target) ? bl_account_months(r, ai, &n) : NULL;
    if (months == NULL && n != 0)
        return BILLING_ERR_NOMEM;
    if (memo != NULL && memo->n_issued > 0 && (before = bl_issued_snapshot_new(c)) == NULL)
        st = BILLING_ERR_NOMEM;
    k = bl_issued_from(memo, from);
    for (i = 0; i < n && months[i] < target && st == BILLING_OK; i++) {
        if (months[i] < from)
            continue;
        k = bl_issued_until(memo, k, months[i], c);
        issued = bl_issued_at(memo, k, months[i]);
        if (issued)
            bl_issued_snapshot(before, c);
        st = bl_month_compute_amounts(r, ai, months[i], &m);
        if (st == BILLING_OK && bl_credit_apply(r->cat, ai, &m, c) != 0)
            st = BILLING_ERR_NOMEM;
        bl_month_release(r, &m);
        if (issued)
            bl_issued_take(&memo->issued[k++], c, before);
    }
    if (st == BILLING_OK)
        bl_issued_until(memo, k, target, c);
    bl_issued_snapshot_free(before, c);
    free(months);
    if (st != BILLING_OK || memo == NULL)
        return st;
    if (!memo->valid) {
        if (bl_credit_init(&memo->c, r->cat, ai) != 0)
            return BILLING_OK; /* no memo this time; the answer is right anyway */
        memo->valid = 1;
    }
    if (bl_credit_copy(&memo->c, c) != 0) {
        bl_credit_clear(&memo->c);
        memo->valid = 0; /* no memo this time; the answer is right anyway */
        return BILLING_OK;
    }
    memo->month = target;
    memo->gen = r->gen;
    return BILLING_OK;
}

static billing_status build(billing_rater *r, size_t ai, int32_t target, billing_invoice *inv)
{
    const billing_catalog *cat = r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    bl_credit c;
    bl_month m;
    mpz_t credit_total;
    billing_status st;
    int live;

    if (bl_credit_init(&c, cat, ai) != 0)
        return BILLING_ERR_NOMEM;
    mpz_init(credit_total);
    st = bl_replay_months(r, ai, target, &c);
    if (st == BILLING_OK) /* not in the memo: it holds for @target only */
        bl_issued_later(bl_credit_memo_of(r, ai), target, &c);
    /* The live credit of @target (balance.c) is this state after the month's charges, or
       before them when it has none: kept, a balance asking next computes no month again. */
    live = st == BILLING_OK && bl_account_has_month(r, ai, target);
    if (st == BILLING_OK && !live)
        bl_live_put(r, ai, target, &c);
    if (st == BILLING_OK)
        st = bl_month_compute(r, ai, target, &m);
    else
        memset(&m, 0, sizeof(m)), mpz_init(m.subtotal);
    if (st == BILLING_OK && bl_credit_apply(cat, ai, &m, &c) != 0)
        st = BILLING_ERR_NOMEM;
    if (st == BILLING_OK && live)
        bl_live_put(r, ai, target, &c);
    if (st == BILLING_OK) {
        inv->start = m.start;
        inv->end = m.end;
        if (fill_lines(r, &m, inv) != 0 || fill_credits(cat, a, &m, &c, inv, credit_total) != 0 ||
            fill_totals(cat, a, &m, &c, credit_total, inv) != 0)
            st = BILLING_ERR_NOMEM;
    }
    bl_month_release(r, &m);
    bl_credit_clear(&c);
    mpz_clear(credit_total);
    return st;
}

billing_status billing_rater_invoice(billing_rater *r, const char *account, int year, int month,
                                     billing_invoice **out, char *errbuf, size_t errsize)
{
    size_t ai;
    billing_invoice *inv;
    billing_status st;

    *out = NULL;
    ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    if (ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_UNKNOWN_ACCOUNT, "account '%.140s' not found",
                         account ? account : "(null)");
    if (year < 1900 || year > 2199 || month < 1 || month > 12)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE, "month %04d-%02d out of range", year,
                         month);
    inv = calloc(1, sizeof(*inv));
    if (inv == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    inv->account = BL_AT(r->cat->accounts, bl_account, ai)->id;
    inv->currency = r->cat->currency;
    inv->year = year;
    inv->month = month;
    st = build(r, ai, bl_month_index(year, month), inv);
    if (st != BILLING_OK) {
        billing_invoice_destroy(inv);
        return bl_seterr(errbuf, errsize, st, "invoice of '%s' for %04d-%02d: %s", account, year,
                         month, billing_strerror(st));
    }
    *out = inv;
    return BILLING_OK;
}

/* Months are month indexes (year * 12 + month - 1), as bl_account_months gives them. */
struct billing_months {
    int32_t *index;
    size_t len;
};

billing_status billing_rater_months(billing_rater *r, const char *account, billing_months **out,
                                    char *errbuf, size_t errsize)
{
    size_t ai;
    billing_months *list;

    if (out != NULL)
        *out = NULL;
    if (r == NULL || out == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "months: NULL argument");
    ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    if (ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_UNKNOWN_ACCOUNT, "account '%.140s' not found",
                         account ? account : "(null)");
    list = calloc(1, sizeof(*list));
    if (list == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "months of '%s': out of memory",
                         account);
    list->index = bl_account_months(r, ai, &list->len);
    if (list->index == NULL && list->len != 0) {
        free(list);
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "months of '%s': out of memory",
                         account);
    }
    *out = list;
    return BILLING_OK;
}

size_t billing_months_count(const billing_months *months)
{
    return months != NULL ? months->len : 0;
}

int billing_months_year(const billing_months *months, size_t i)
{
    if (months == NULL || i >= months->len)
        return 0;
    return months->index[i] / 12;
}

int billing_months_month(const billing_months *months, size_t i)
{
    if (months == NULL || i >= months->len)
        return 0;
    return months->index[i] % 12 + 1;
}

void billing_months_destroy(billing_months *months)
{
    if (months == NULL)
        return;
    free(months->index);
    free(months);
}

/* ---------------------------------------------------------------------- */
/* Accessors                                                               */
/* ---------------------------------------------------------------------- */

const char *billing_invoice_account(const billing_invoice *inv)
{
    return inv->account;
}

const char *billing_invoice_currency(const billing_invoice *inv)
{
    return inv->currency;
}

int billing_invoice_year(const billing_invoice *inv)
{
    return inv->year;
}

int billing_invoice_month(const billing_invoice *inv)
{
    return inv->month;
}

void billing_invoice_period(const billing_invoice *inv, billing_time_t *start, billing_time_t *end)
{
    *start = inv->start;
    *end = inv->end;
}

size_t billing_invoice_line_count(const billing_invoice *inv)
{
    return inv->n_lines;
}

static const inv_line *line_at(const billing_invoice *inv, size_t i)
{
    return i < inv->n_lines ? &inv->lines[i] : NULL;
}

billing_line_kind billing_invoice_line_kind(const billing_invoice *inv, size_t i)
{
    const inv_line *l = line_at(inv, i);

    return l ? l->kind : (billing_line_kind)0;
}

#define LINE_FIELD(name, field)                                                   \
    const char *billing_invoice_line_##name(const billing_invoice *inv, size_t i) \
    {                                                                             \
        const inv_line *l = line_at(inv, i);                                      \
        return l ? l->field : NULL;                                               \
    }

LINE_FIELD(meter, meter)
LINE_FIELD(model, model)
LINE_FIELD(region, region)
LINE_FIELD(plan, plan)
LINE_FIELD(price_version, version)
LINE_FIELD(subscription, subscription)
LINE_FIELD(quantity, quantity)
LINE_FIELD(unit, unit)
LINE_FIELD(unit_price, unit_price)
LINE_FIELD(amount, amount)
LINE_FIELD(amount_rounded, amount_rounded)

int billing_invoice_line_span(const billing_invoice *inv, size_t i, billing_time_t *start,
                              billing_time_t *end)
{
    const inv_line *l = line_at(inv, i);

    if (l == NULL || l->kind != BILLING_LINE_REFUND)
        return 0;
    *start = l->span_start;
    *end = l->span_end;
    return 1;
}

size_t billing_invoice_credit_count(const billing_invoice *inv)
{
    return inv->n_credits;
}

/* A field of entry @i of one of the invoice's grant lists; NULL out of range. */
#define ENTRY_FIELD(name, list, count, field)                                \
    const char *billing_invoice_##name(const billing_invoice *inv, size_t i) \
    {                                                                        \
        return i < inv->count ? inv->list[i].field : NULL;                   \
    }

ENTRY_FIELD(credit_grant, credits, n_credits, grant)
ENTRY_FIELD(credit_amount, credits, n_credits, amount)
ENTRY_FIELD(credit_remaining, credits, n_credits, remaining)
ENTRY_FIELD(expired_grant, expired, n_expired, grant)
ENTRY_FIELD(expired_amount, expired, n_expired, amount)
ENTRY_FIELD(returned_grant, returned, n_returned, grant)
ENTRY_FIELD(returned_amount, returned, n_returned, amount)
ENTRY_FIELD(returned_remaining, returned, n_returned, remaining)

size_t billing_invoice_expired_count(const billing_invoice *inv)
{
    return inv->n_expired;
}

size_t billing_invoice_returned_count(const billing_invoice *inv)
{
    return inv->n_returned;
}

const char *billing_invoice_returned(const billing_invoice *inv)
{
    return inv->returned_total;
}

const char *billing_invoice_subtotal(const billing_invoice *inv)
{
    return inv->subtotal;
}

const char *billing_invoice_credits(const billing_invoice *inv)
{
    return inv->credit_total;
}

const char *billing_invoice_account_credit(const billing_invoice *inv)
{
    return inv->account_credit;
}

const char *billing_invoice_carried(const billing_invoice *inv)
{
    return inv->carried;
}

const char *billing_invoice_account_credit_left(const billing_invoice *inv)
{
    return inv->account_credit_left;
}

const char *billing_invoice_tax_rate(const billing_invoice *inv)
{
    return inv->tax_rate;
}

const char *billing_invoice_tax(const billing_invoice *inv)
{
    return inv->tax;
}

const char *billing_invoice_total(const billing_invoice *inv)
{
    return inv->total;
}
