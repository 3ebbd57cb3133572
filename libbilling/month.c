/*
 * month.c - the charges of one account-month: usage lines priced once
 * per aggregate, plan fees of terms that start in the month, pro-rata
 * refunds of cancelled refundable terms (one line per subscription), and
 * the pools credit may pay.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "invoice.h"
#include "zone.h"

/*
 * The divisors of the quantities are the rater's (bl_scratch): ns per hour
 * x nano-units per unit (3.6 x 10^21) divides quantity x ns into
 * unit-hours; nano-units per unit x bytes per GB (10^18) divides traffic
 * nano-bytes into GB.
 */

static int32_t month_of_instant(const billing_zone *zone, billing_time_t t)
{
    int year;
    int month;

    billing_zone_year_month(zone, t, &year, &month);
    return bl_month_index(year, month);
}

static void month_bounds(const billing_zone *zone, int32_t m, billing_time_t *start,
                         billing_time_t *end)
{
    billing_zone_month_start(zone, m / 12, m % 12 + 1, start);
    billing_zone_month_start(zone, (m + 1) / 12, (m + 1) % 12 + 1, end);
}

void bl_month_clear(bl_month *m)
{
    size_t i;
    size_t e;

    /* Every line and part initialised, beyond those in use when storage was kept. */
    for (i = 0; i < m->n_init; i++) {
        for (e = 0; e < m->lines[i].parts_init; e++)
            mpq_clear(m->lines[i].parts[e].amount);
        free(m->lines[i].parts);
        for (e = 0; e < m->lines[i].n_sources; e++)
            mpq_clear(m->lines[i].sources[e].amount);
        free(m->lines[i].sources);
        mpq_clear(m->lines[i].quantity);
        mpq_clear(m->lines[i].unit_price);
        mpq_clear(m->lines[i].amount);
        mpz_clear(m->lines[i].rounded);
    }
    free(m->lines);
    for (i = 0; m->pools != NULL && i < 2 * m->cap_pools; i++)
        mpz_clear(m->pools[i]);
    free(m->pools);
    mpz_clear(m->subtotal);
    for (i = 0; i < m->n_scratch; i++)
        mpz_clear(m->scratch[i]);
    free(m->scratch);
    free(m->idx);
    memset(m, 0, sizeof(*m));
}

static void spare_free(billing_rater *r)
{
    size_t i;

    for (i = 0; i < r->n_month_spare; i++)
        bl_month_clear(&r->month_spare[i]);
    free(r->month_spare);
    r->month_spare = NULL;
    r->n_month_spare = 0;
}

void bl_month_release(billing_rater *r, bl_month *m)
{
    size_t i;
    size_t e;

    if (r->month_spare == NULL) {
        r->month_spare = malloc(BL_MONTH_SPARES * sizeof(bl_month));
        if (r->month_spare != NULL)
            r->month_spare_free = spare_free;
    }
    if (r->month_spare == NULL || r->n_month_spare == BL_MONTH_SPARES || m->pools == NULL) {
        bl_month_clear(m);
        return;
    }
    /* Refund sources are rare: not kept. */
    for (i = 0; i < m->n_lines; i++) {
        for (e = 0; e < m->lines[i].n_sources; e++)
            mpq_clear(m->lines[i].sources[e].amount);
        free(m->lines[i].sources);
        m->lines[i].sources = NULL;
        m->lines[i].n_sources = 0;
    }
    m->n_lines = 0;
    r->month_spare[r->n_month_spare++] = *m;
    memset(m, 0, sizeof(*m));
}

/*
 * @m ready for account @a's month: a kept month's storage (bl_month_release)
 * when there is one, with @n_pools zero pools; 0, or -1 when out of memory
 * (@m is then still one bl_month_clear frees).
 */
static int month_start(billing_rater *r, bl_month *m, size_t n_pools)
{
    mpz_t *p;
    size_t i;

    if (r->n_month_spare > 0) {
        *m = r->month_spare[--r->n_month_spare];
        mpz_set_ui(m->subtotal, 0);
    } else {
        memset(m, 0, sizeof(*m));
        mpz_init(m->subtotal);
    }
    if (m->cap_pools < n_pools) {
        p = realloc(m->pools, 2 * n_pools * sizeof(mpz_t));
        if (p == NULL)
            return -1;
        m->pools = p;
        for (i = 2 * m->cap_pools; i < 2 * n_pools; i++)
            mpz_init(m->pools[i]);
        m->cap_pools = n_pools;
    }
    for (i = 0; i < 2 * n_pools; i++)
        mpz_set_ui(m->pools[i], 0);
    m->n_pools = n_pools;
    return 0;
}

/* Whether two lines have the same identity (they are then one line). */
static int same_line(const bl_line *a, const bl_line *b)
{
    return a->kind == b->kind && a->meter == b->meter && a->rate == b->rate &&
           a->attrs == b->attrs && a->plan == b->plan && a->version == b->version &&
           a->sub == b->sub;
}

/*
 * The line with the identity of @id (its kind ... sub fields), appended
 * with zero amounts and @unit_price (NULL: zero) if new; NULL if out of
 * memory.
 */
static bl_line *line_get(bl_month *m, const bl_line *id, mpq_srcptr unit_price)
{
    size_t i;
    bl_line *l;
    bl_line kept;
    void *p;

    for (i = 0; i < m->n_lines; i++) {
        if (same_line(&m->lines[i], id))
            return &m->lines[i];
    }
    if (m->n_lines == m->cap_lines) {
        p = realloc(m->lines, (m->cap_lines ? m->cap_lines * 2 : 8) * sizeof(bl_line));
        if (p == NULL)
            return NULL;
        m->lines = p;
        m->cap_lines = m->cap_lines ? m->cap_lines * 2 : 8;
    }
    l = &m->lines[m->n_lines];
    if (m->n_lines < m->n_init) {
        /* A kept line (bl_month_release): its values and parts, zeroed, under the new identity. */
        kept = *l;
        *l = *id;
        memcpy(l->quantity, kept.quantity, sizeof(mpq_t));
        memcpy(l->unit_price, kept.unit_price, sizeof(mpq_t));
        memcpy(l->amount, kept.amount, sizeof(mpq_t));
        memcpy(l->rounded, kept.rounded, sizeof(mpz_t));
        l->parts = kept.parts;
        l->parts_init = kept.parts_init;
        l->cap_parts = kept.cap_parts;
        l->n_parts = 0;
        l->sources = NULL;
        l->n_sources = 0;
        mpq_set_ui(l->quantity, 0, 1);
        mpq_set_ui(l->amount, 0, 1);
        mpz_set_ui(l->rounded, 0);
        if (unit_price != NULL)
            mpq_set(l->unit_price, unit_price);
        else
            mpq_set_ui(l->unit_price, 0, 1);
    } else {
        *l = *id;
        mpq_init(l->quantity);
        mpq_init(l->unit_price);
        if (unit_price != NULL)
            mpq_set(l->unit_price, unit_price);
        mpq_init(l->amount);
        mpz_init(l->rounded);
        m->n_init++;
    }
    m->n_lines++;
    return l;
}

/* An identity of kind @kind with nothing else set. */
static void line_id(bl_line *id, billing_line_kind kind)
{
    memset(id, 0, sizeof(*id));
    id->kind = kind;
    id->rate = BL_RATE_NONE;
    id->attrs = BL_ATTRS_NONE;
    id->plan = BL_NONE;
    id->version = BL_NONE;
    id->sub = BL_NONE;
}

/*
 * The divisor of @meter's quantities (the rater's, or @tmp for storage):
 * an aggregate's exact sum over it is the quantity in the meter's unit.
 */
static mpz_srcptr meter_div(const bl_scratch *sc, billing_meter meter, billing_time_t month_len,
                            mpz_ptr tmp)
{
    switch (meter) {
    case BILLING_METER_GPU:
    case BILLING_METER_GPULESS:
        return sc->div_hour;
    case BILLING_METER_STORAGE:
        /* GB-months: the actual length of this local month (DST included). */
        mpz_set_si(tmp, month_len);
        mpz_mul_ui(tmp, tmp, (unsigned long)BL_QTY_SCALE);
        return tmp;
    case BILLING_METER_TRAFFIC:
        break;
    }
    return sc->div_gb;
}

/*
 * Quantity in the meter's unit from an aggregate's exact sum, into @out;
 * @div is scratch (the rater's).
 */
static void agg_quantity(const bl_scratch *sc, const bl_agg *a, billing_time_t month_len, mpq_t out,
                         mpq_t div)
{
    bl_agg_value(a, out);
    mpq_set_z(div, meter_div(sc, (billing_meter)a->key.meter, month_len, mpq_numref(div)));
    mpq_div(out, out, div);
}

/* Whether @a's exact sum is an integer (nothing rational beside its 128 bits). */
static int agg_integer(const bl_agg *a)
{
    return !a->has_extra || mpz_cmp_ui(mpq_denref(a->extra), 1) == 0;
}

/*
 * @q, an integer sum over 1, times @l's unit price over @div, not reduced
 * (bl_month_compute_amounts): no gcd.
 */
static void scale_unreduced(mpq_ptr q, const bl_line *l, mpz_srcptr div)
{
    mpz_mul(mpq_numref(q), mpq_numref(q), mpq_numref(l->unit_price));
    mpz_mul(mpq_denref(q), div, mpq_denref(l->unit_price));
}

/* line_scale for a month of amounts only: @l's amount and parts, unreduced. */
static void line_scale_amounts(bl_line *l, mpz_srcptr div, int priced)
{
    size_t i;

    if (!priced) {
        mpq_set_ui(l->amount, 0, 1);
        for (i = 0; i < l->n_parts; i++)
            mpq_set_ui(l->parts[i].amount, 0, 1);
        return;
    }
    /* The quantity's numerator holds the line's sum (over 1): it becomes the amount. */
    mpq_swap(l->amount, l->quantity);
    scale_unreduced(l->amount, l, div);
    if (l->n_parts == 1) {
        mpq_set(l->parts[0].amount, l->amount);
        return;
    }
    for (i = 0; i < l->n_parts; i++)
        scale_unreduced(l->parts[i].amount, l, div);
}

/*
 * Scale usage line @l, whose aggregates were all integers (l->unscaled):
 * their sums, kept over 1, divided once by the meter's divisor into the
 * quantity, then priced. The same canonical values as adding each
 * aggregate's quantity and amount (add_usage's general case), with one
 * division and one product a line (or a part) instead of one an aggregate.
 */
static void line_scale(billing_rater *r, bl_month *m, bl_line *l)
{
    mpz_srcptr div = meter_div(&r->scratch, l->meter, m->end - m->start, r->scratch.z[1]);
    int priced = mpq_sgn(l->unit_price) != 0;
    size_t i;

    l->unscaled = 0;
    if (m->amounts_only) {
        line_scale_amounts(l, div, priced);
        return;
    }
    mpz_set(mpq_denref(l->quantity), div);
    mpq_canonicalize(l->quantity);
    if (priced)
        mpq_mul(l->amount, l->quantity, l->unit_price);
    else
        mpq_set_ui(l->amount, 0, 1);
    if (l->n_parts == 1) {
        /* The one part holds every sum: its amount is the line's. */
        mpq_set(l->parts[0].amount, l->amount);
        return;
    }
    for (i = 0; i < l->n_parts; i++) {
        if (!priced) {
            mpq_set_ui(l->parts[i].amount, 0, 1);
            continue;
        }
        mpz_set(mpq_denref(l->parts[i].amount), div);
        mpq_canonicalize(l->parts[i].amount);
        mpq_mul(l->parts[i].amount, l->parts[i].amount, l->unit_price);
    }
}

static billing_status add_usage(billing_rater *r, bl_month *m, const bl_agg *a)
{
    const billing_catalog *cat = r->cat;
    /* The rater's scratch, not temporaries of our own: no allocation once grown. */
    mpq_ptr qty = r->scratch.q[0];
    mpq_ptr amount = r->scratch.q[1];
    mpz_ptr sum = r->scratch.z[0];
    bl_line *l;
    bl_line id;
    const mpq_t *price = NULL;

    line_id(&id, a->key.sub != BL_SUB_NONE ? BILLING_LINE_INCLUDED : BILLING_LINE_USAGE);
    id.meter = (billing_meter)a->key.meter;
    if (id.kind == BILLING_LINE_INCLUDED) {
        id.plan = BL_AT(cat->subs, bl_sub, a->key.sub)->plan;
        id.attrs = a->key.attrs;
        id.attrs_key = BL_AT(r->attrs, bl_attrs, a->key.attrs)->key;
    } else {
        id.rate = a->key.rate;
        if (a->key.rate != BL_RATE_ZERO)
            price = (const mpq_t *)&BL_AT(cat->rates, bl_rate, a->key.rate)->price;
    }
    l = line_get(m, &id, price != NULL ? *price : NULL);
    if (l == NULL)
        return BILLING_ERR_NOMEM;
    if (agg_integer(a) && (l->unscaled || l->n_parts == 0)) {
        /* Integers added as they are; the line is scaled once (line_scale). */
        bl_mpz_set_i128(sum, a->sum);
        if (a->has_extra)
            mpz_add(sum, sum, mpq_numref(a->extra));
        mpz_add(mpq_numref(l->quantity), mpq_numref(l->quantity), sum);
        l->unscaled = 1;
        mpq_set_z(qty, sum);
        return bl_line_part_add(l, a->key.epoch, qty) == 0 ? BILLING_OK : BILLING_ERR_NOMEM;
    }
    if (l->unscaled)
        line_scale(r, m, l);
    agg_quantity(&r->scratch, a, m->end - m->start, qty, r->scratch.q[2]);
    if (price != NULL)
        mpq_mul(amount, qty, *price);
    else
        mpq_set_ui(amount, 0, 1);
    mpq_add(l->quantity, l->quantity, qty);
    mpq_add(l->amount, l->amount, amount);
    return bl_line_part_add(l, a->key.epoch, amount) == 0 ? BILLING_OK : BILLING_ERR_NOMEM;
}

static size_t epoch_at(const bl_account *a, billing_time_t t)
{
    return bl_upper_bound(a->epochs, a->n_epochs, t);
}

/* Fee line for term @k of @s if it starts in @m. */
static billing_status add_fee(billing_rater *r, bl_month *m, const bl_account *a, const bl_sub *s,
                              int k)
{
    const billing_catalog *cat = r->cat;
    billing_time_t ts = s->bounds[k];
    size_t version;
    const bl_fee *fee;
    bl_line *l;
    bl_line id;

    if (ts < m->start || ts >= m->end)
        return BILLING_OK;
    fee = bl_catalog_plan_fee(cat, s->plan, ts, &version);
    if (fee == NULL)
        return BILLING_ERR_STATE; /* refused when added and at freeze (bl_sub_check_fees) */
    line_id(&id, BILLING_LINE_FEE);
    id.plan = s->plan;
    id.version = version;
    l = line_get(m, &id, fee->fee);
    if (l == NULL)
        return BILLING_ERR_NOMEM;
    mpz_add_ui(mpq_numref(l->quantity), mpq_numref(l->quantity), 1);
    mpq_add(l->amount, l->amount, fee->fee);
    return bl_line_part_add(l, epoch_at(a, ts), fee->fee) == 0 ? BILLING_OK : BILLING_ERR_NOMEM;
}

/*
 * The term of @s that its cancellation cuts short with a refund due, or -1
 * when nothing is refunded: not cancelled, a plan that is not refundable,
 * a cancellation at or before the start (no term at all) or exactly at a
 * term boundary (nothing unused), or a term whose fee is zero. *@fee and
 * *@version receive that term's fee.
 */
static int refunded_term(const billing_catalog *cat, const bl_sub *s, const bl_fee **fee,
                         size_t *version)
{
    billing_time_t c = s->cancelled_at;
    int k = 0;

    if (!s->cancelled || c <= s->start || !BL_AT(cat->plans, bl_plan, s->plan)->refundable)
        return -1;
    /* The cancellation lies before the end of the last term (checked when added). */
    while (k < s->terms && s->bounds[k + 1] <= c)
        k++;
    if (c <= s->bounds[k])
        return -1;
    *fee = bl_catalog_plan_fee(cat, s->plan, s->bounds[k], version);
    if (*fee == NULL || mpq_sgn((*fee)->fee) == 0)
        return -1;
    return k;
}

/* Refund of the unused part of the term containing the cancellation: one line per subscription. */
static billing_status add_refund(billing_rater *r, bl_month *m, const bl_account *a,
                                 const bl_sub *s)
{
    const billing_catalog *cat = r->cat;
    billing_time_t c = s->cancelled_at;
    size_t version;
    const bl_fee *fee;
    bl_line *l;
    bl_line id;
    mpq_t frac;
    mpq_t refund;
    int k;

    if (!s->cancelled || c < m->start || c >= m->end)
        return BILLING_OK;
    k = refunded_term(cat, s, &fee, &version);
    if (k < 0)
        return BILLING_OK;
    line_id(&id, BILLING_LINE_REFUND);
    id.plan = s->plan;
    id.version = version;
    id.sub = (size_t)(s - (const bl_sub *)cat->subs.data);
    id.span_start = c;
    id.span_end = s->bounds[k + 1];
    mpq_init(frac);
    mpq_init(refund);
    l = line_get(m, &id, frac); /* no unit price: frac is still 0 */
    if (l == NULL)
        goto done;
    /* Unused fraction of the term, to the nanosecond. */
    mpz_set_si(mpq_numref(frac), s->bounds[k + 1] - c);
    mpz_set_si(mpq_denref(frac), s->bounds[k + 1] - s->bounds[k]);
    mpq_canonicalize(frac);
    mpq_mul(refund, frac, fee->fee);
    /* Shown as the unused span in seconds (exact: nanoseconds / 10^9). */
    mpz_set_si(mpq_numref(l->quantity), s->bounds[k + 1] - c);
    mpz_set_si(mpq_denref(l->quantity), BILLING_NS_PER_SEC);
    mpq_canonicalize(l->quantity);
    mpq_sub(l->amount, l->amount, refund);
    if (bl_refund_source(m, l, month_of_instant(a->zone, s->bounds[k]), epoch_at(a, s->bounds[k]),
                         refund) != 0)
        l = NULL;
done:
    mpq_clear(frac);
    mpq_clear(refund);
    return l != NULL ? BILLING_OK : BILLING_ERR_NOMEM;
}

static billing_status add_subscriptions(billing_rater *r, bl_month *m, const bl_account *a)
{
    const bl_sub *s;
    size_t i;
    int k;
    billing_status st;

    for (i = 0; i < a->n_subs; i++) {
        s = BL_AT(r->cat->subs, bl_sub, a->subs[i]);
        for (k = 0; k < s->terms && s->bounds[k] < s->end; k++) {
            st = add_fee(r, m, a, s, k);
            if (st != BILLING_OK)
                return st;
        }
        st = add_refund(r, m, a, s);
        if (st != BILLING_OK)
            return st;
    }
    return BILLING_OK;
}

/* Lines in a stable order: kind, meter, then price key. */
static int cmp_line(const void *x, const void *y)
{
    const bl_line *a = x;
    const bl_line *b = y;

    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->meter != b->meter)
        return a->meter < b->meter ? -1 : 1;
    if (a->rate != b->rate)
        return a->rate < b->rate ? -1 : 1;
    if (a->attrs != b->attrs)
        return strcmp(a->attrs_key, b->attrs_key); /* pairs are interned in arrival order */
    if (a->plan != b->plan)
        return a->plan < b->plan ? -1 : 1;
    if (a->version != b->version)
        return a->version < b->version ? -1 : 1;
    return (a->sub > b->sub) - (a->sub < b->sub);
}

/* Below this many lines an insertion sort is cheaper than qsort's calls and merge buffers. */
#define FEW_LINES 16

/*
 * @lines in cmp_line's order. Distinct lines never compare equal (it
 * orders every field of their identity), so any sort gives one order.
 */
static void sort_lines(bl_line *lines, size_t n)
{
    bl_line t;
    size_t i;
    size_t j;

    if (n > FEW_LINES) {
        qsort(lines, n, sizeof(bl_line), cmp_line);
        return;
    }
    for (i = 1; i < n; i++) {
        if (cmp_line(&lines[i - 1], &lines[i]) <= 0)
            continue;
        t = lines[i];
        for (j = i; j > 0 && cmp_line(&lines[j - 1], &t) > 0; j--)
            lines[j] = lines[j - 1];
        lines[j] = t;
    }
}

/* bl_month_compute, or bl_month_compute_amounts when @amounts_only. */
static billing_status month_compute(billing_rater *r, size_t ai, int32_t month, bl_month *m,
                                    int amounts_only)
{
    const billing_catalog *cat = r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    const bl_acct *x = bl_rater_acct_find(r, ai);
    /* A copy: r->accts may move while the month is priced. */
    const bl_u32vec v_ = x != NULL ? x->aggs : (bl_u32vec){NULL, 0, 0};
    const bl_u32vec *v = &v_;
    billing_status st = BILLING_OK;
    size_t i;

    if (month_start(r, m, a->n_epochs + 1) != 0)
        return BILLING_ERR_NOMEM;
    m->amounts_only = amounts_only;
    m->account = ai;
    m->month = month;
    month_bounds(a->zone, month, &m->start, &m->end);
    for (i = 0; i < v->len && st == BILLING_OK; i++) {
        if (r->aggs[v->data[i]].key.month == month && r->aggs[v->data[i]].pieces > 0)
            st = add_usage(r, m, &r->aggs[v->data[i]]);
    }
    for (i = 0; i < m->n_lines && st == BILLING_OK; i++) {
        if (m->lines[i].unscaled)
            line_scale(r, m, &m->lines[i]);
    }
    if (st == BILLING_OK)
        st = add_subscriptions(r, m, a);
    if (st != BILLING_OK)
        return st;
    sort_lines(m->lines, m->n_lines);
    for (i = 0; i < m->n_lines; i++) {
        bl_q_round_pow(m->lines[i].rounded, m->lines[i].amount, r->scratch.pow10, cat->rounding,
                       r->scratch.z[2], r->scratch.z[3]);
        mpz_add(m->subtotal, m->subtotal, m->lines[i].rounded);
    }
    bl_month_pools(r, m);
    return BILLING_OK;
}

billing_status bl_month_compute(billing_rater *r, size_t ai, int32_t month, bl_month *m)
{
    return month_compute(r, ai, month, m, 0);
}

billing_status bl_month_compute_amounts(billing_rater *r, size_t ai, int32_t month, bl_month *m)
{
    return month_compute(r, ai, month, m, 1);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a;
    int32_t y = *(const int32_t *)b;

    return (x > y) - (x < y);
}

int32_t *bl_account_months(billing_rater *r, size_t ai, size_t *n)
{
    const billing_catalog *cat = r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    const bl_acct *x = bl_rater_acct_find(r, ai);
    const bl_u32vec v_ = x != NULL ? x->aggs : (bl_u32vec){NULL, 0, 0};
    const bl_u32vec *v = &v_;
    const bl_sub *s;
    const bl_fee *fee;
    size_t version;
    size_t cap = v->len + 1;
    size_t count = 0;
    size_t i;
    int32_t *out;
    int k;

    for (i = 0; i < a->n_subs; i++)
        cap += (size_t)BL_AT(cat->subs, bl_sub, a->subs[i])->terms + 1;
    out = malloc(cap * sizeof(int32_t));
    if (out == NULL) {
        *n = (size_t)-1;
        return NULL;
    }
    for (i = 0; i < v->len; i++) {
        if (r->aggs[v->data[i]].pieces > 0)
            out[count++] = r->aggs[v->data[i]].key.month;
    }
    for (i = 0; i < a->n_subs; i++) {
        s = BL_AT(cat->subs, bl_sub, a->subs[i]);
        for (k = 0; k < s->terms && s->bounds[k] < s->end; k++)
            out[count++] = month_of_instant(a->zone, s->bounds[k]);
        /* A cancellation makes a month only when it refunds something. */
        if (refunded_term(cat, s, &fee, &version) >= 0)
            out[count++] = month_of_instant(a->zone, s->cancelled_at);
    }
    qsort(out, count, sizeof(int32_t), cmp_i32);
    *n = 0;
    for (i = 0; i < count; i++) {
        if (*n == 0 || out[*n - 1] != out[i])
            out[(*n)++] = out[i];
    }
    return out;
}

/* Is @m @month (@before 0), or before it (@before 1)? */
static int month_match(int32_t m, int32_t month, int before)
{
    return before ? m < month : m == month;
}

/* bl_account_has_month (@before 0) or bl_account_has_month_before (@before 1). */
static int has_month(billing_rater *r, size_t ai, int32_t month, int before)
{
    const billing_catalog *cat = r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    const bl_acct *x = bl_rater_acct_find(r, ai);
    const bl_sub *s;
    const bl_fee *fee;
    size_t version;
    size_t i;
    int k;

    for (i = 0; x != NULL && i < x->aggs.len; i++) {
        if (r->aggs[x->aggs.data[i]].pieces > 0 &&
            month_match(r->aggs[x->aggs.data[i]].key.month, month, before))
            return 1;
    }
    /* As bl_account_months: the terms' starts, and a cancellation that refunds. */
    for (i = 0; i < a->n_subs; i++) {
        s = BL_AT(cat->subs, bl_sub, a->subs[i]);
        for (k = 0; k < s->terms && s->bounds[k] < s->end; k++) {
            if (month_match(month_of_instant(a->zone, s->bounds[k]), month, before))
                return 1;
        }
        if (refunded_term(cat, s, &fee, &version) >= 0 &&
            month_match(month_of_instant(a->zone, s->cancelled_at), month, before))
            return 1;
    }
    return 0;
}

int bl_account_has_month(billing_rater *r, size_t ai, int32_t month)
{
    return has_month(r, ai, month, 0);
}

int bl_account_has_month_before(billing_rater *r, size_t ai, int32_t month)
{
    return has_month(r, ai, month, 1);
}

/* ---------------------------------------------------------------------- */
/* Pools: the invoice's rounded figures by epoch                           */
/* ---------------------------------------------------------------------- */

/* Add line @l's rounded amount to the pools of kind @k, cut by epoch (the rater's scratch). */
static void spread_line(billing_rater *r, const bl_line *l, size_t k, bl_month *m)
{
    bl_scratch *sc = &r->scratch;
    mpq_ptr sum = sc->q[0];
    mpz_ptr upto = sc->z[0];
    mpz_ptr before = sc->z[1];
    size_t i;
    size_t e;

    mpz_set_ui(before, 0);
    for (i = 0; i < l->n_parts; i++) {
        e = l->parts[i].epoch;
        /* The rounded running sum ends at the line's rounded amount. */
        if (i > 0) {
            mpq_add(sum, sum, l->parts[i].amount);
            bl_q_round_pow(upto, sum, sc->pow10, r->cat->rounding, sc->z[2], sc->z[3]);
        } else if (l->n_parts == 1 && mpq_equal(l->parts[0].amount, l->amount)) {
            mpz_set(upto, l->rounded); /* the sum is the amount, rounded already */
        } else {
            bl_q_round_pow(upto, l->parts[0].amount, sc->pow10, r->cat->rounding, sc->z[2],
                           sc->z[3]);
            mpq_set(sum, l->parts[0].amount);
        }
        mpz_add(m->pools[e * 2 + k], m->pools[e * 2 + k], upto);
        mpz_sub(m->pools[e * 2 + k], m->pools[e * 2 + k], before);
        mpz_set(before, upto);
    }
}

void bl_month_pools(billing_rater *r, bl_month *m)
{
    const bl_line *l;
    size_t i;

    for (i = 0; i < m->n_lines; i++) {
        l = &m->lines[i];
        spread_line(r, l, (l->kind == BILLING_LINE_FEE || l->kind == BILLING_LINE_REFUND) ? 1 : 0,
                    m);
    }
    for (i = 0; i < 2 * m->n_pools; i++) {
        if (mpz_sgn(m->pools[i]) < 0)
            mpz_set_ui(m->pools[i], 0); /* a refund is never credit to spend */
    }
}

int bl_line_part_add(bl_line *l, size_t epoch, const mpq_t amount)
{
    bl_line_part *p;
    bl_line_part spare;
    size_t cap;
    size_t i = 0;

    while (i < l->n_parts && l->parts[i].epoch < epoch)
        i++;
    if (i < l->n_parts && l->parts[i].epoch == epoch) {
        mpq_add(l->parts[i].amount, l->parts[i].amount, amount);
        return 0;
    }
    if (l->n_parts == l->cap_parts) {
        cap = l->cap_parts ? 2 * l->cap_parts : 2;
        p = realloc(l->parts, cap * sizeof(*p));
        if (p == NULL)
            return -1;
        l->parts = p;
        l->cap_parts = cap;
    }
    p = l->parts;
    /* GMP values may move: their limbs stay where they are. */
    if (l->n_parts < l->parts_init) {
        /* The first unused part's value (a month kept by bl_month_release) goes to @i. */
        spare = p[l->n_parts];
        memmove(&p[i + 1], &p[i], (l->n_parts - i) * sizeof(*p));
        p[i] = spare;
    } else {
        memmove(&p[i + 1], &p[i], (l->n_parts - i) * sizeof(*p));
        mpq_init(p[i].amount);
        l->parts_init++;
    }
    l->n_parts++;
    p[i].epoch = epoch;
    mpq_set(p[i].amount, amount);
    return 0;
}

int bl_refund_source(bl_month *m, bl_line *l, int32_t fee_month, size_t fee_epoch,
                     const mpq_t refund)
{
    bl_refund_part *p;
    mpq_t back;
    int rc;

    if (fee_month == m->month) {
        /* The fee is on this invoice: credit pays the two netted. */
        mpq_init(back);
        mpq_neg(back, refund);
        rc = bl_line_part_add(l, fee_epoch, back);
        mpq_clear(back);
        return rc;
    }
    p = realloc(l->sources, (l->n_sources + 1) * sizeof(*p));
    if (p == NULL)
        return -1;
    l->sources = p;
    p = &l->sources[l->n_sources++];
    p->month = fee_month;
    p->epoch = fee_epoch;
    mpq_init(p->amount);
    mpq_set(p->amount, refund);
    return 0;
}
