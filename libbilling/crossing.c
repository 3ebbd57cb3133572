/*
 * crossing.c - when a credit balance crosses a level: the first instant
 * at which the usage before it, of a span's events cut there, leaves the
 * live balance at or below the level, and the event that took it there.
 * See billing_rater_credit_crossing in billing.h.
 *
 * When nothing in the span can raise the balance (no grant starts in it,
 * no cancellation refunds a fee from its month on, no traffic event's
 * bytes spread across a price version, month or grant bound as it is cut
 * later: see traffic_shifts), the balance only
 * falls as the instant grows, so the answer is the one instant whose
 * balance is at or below the level while the instant before's is above.
 * It is found in three steps, each probe rating the events starting before
 * the instant, cut there, on top of what the rater holds (no text):
 *  1. a search among the span's start and the events' ends, each probe
 *     where the balance would reach the level if it fell evenly between
 *     the two bounds known (halfway when that did not halve what is
 *     left), the rater moved from probe to probe (only the events between
 *     the two instants and those running are added or taken back);
 *  2. between the last end above the level and the first at or below,
 *     the instant solved for, not searched: while the events running do
 *     not change (up to the next start, month, credit epoch, price
 *     version or plan term), each invoice line's exact amount is linear
 *     in the instant, so the instant its rounded amounts have lowered the
 *     balance by the minor units needed is computed from the lines at
 *     both ends of that stretch (GMP, exact);
 *  3. that instant checked with two probes (it and the one before): the
 *     answer when they agree; otherwise (credit that does not pay the
 *     whole line, lines that round together) a binary search between the
 *     bounds found so far, as the former search did.
 * When the balance may rise in the span, the former search runs as it
 * was (bisection over ends, then to the nanosecond). Either way the rater
 * is left as it was.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "event.h"
#include "internal.h"
#include "invoice.h"
#include "zone.h"

/* An event of the span, and its index in the caller's array. */
typedef struct cx_item {
    const billing_event *ev;
    size_t index;
} cx_item;

typedef struct cx {
    billing_rater *r;
    const char *account;
    size_t ai;
    billing_time_t from;
    mpq_srcptr level;
    billing_status st; /* why a search stopped */
    mpq_t q;
    billing_event cut; /* an event whose end is cut at the probe's instant */
    char *errbuf;
    size_t errsize;
    /* The probes that move the rater (steps 1 to 3): what it holds of the span. */
    const cx_item *by_end;
    size_t n;
    billing_time_t t_cur; /* the instant its events are cut at (from: none added) */
    size_t n_whole;       /* by_end[0..n_whole) added whole (they end at or before t_cur) */
    size_t *cuts;         /* the indices in by_end of those added cut at t_cur */
    size_t n_cuts;
} cx;

/* By end, then start, then id: a total order of the span's events. */
static int end_cmp(const void *x, const void *y)
{
    const billing_event *a = ((const cx_item *)x)->ev;
    const billing_event *b = ((const cx_item *)y)->ev;

    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return strcmp(a->id, b->id);
}

/* @ev cut to end at @t (when it ends after it), as rated for a probe at @t. */
static const billing_event *cut_at(cx *x, const billing_event *ev, billing_time_t t)
{
    if (ev->end <= t)
        return ev;
    x->cut = *ev;
    x->cut.end = t;
    return &x->cut;
}

/*
 * With @items[0..@n) rated up to @t (those starting before it, cut there)
 * on top of what the rater holds, is the balance, read at @t's last
 * nanosecond before (at x->from for @t == from), at or below the level?
 * 1, 0, or -1 (error: the rater left as it was, message in x->errbuf).
 */
static int below_at(cx *x, const cx_item *items, size_t n, billing_time_t t)
{
    billing_status st = BILLING_OK;
    size_t added = 0;
    size_t i;
    int rc = -1;

    for (i = 0; i < n; i++) {
        if (items[i].ev->start >= t)
            continue;
        st = billing_rater_add(x->r, cut_at(x, items[i].ev, t), x->errbuf, x->errsize);
        if (st != BILLING_OK) {
            x->st = st;
            goto out;
        }
        added = i + 1;
    }
    st = bl_credit_balance_q(x->r, x->ai, t > x->from ? t - 1 : x->from, x->q);
    if (st == BILLING_OK)
        rc = mpq_cmp(x->q, x->level) <= 0;
    else
        x->st = bl_seterr(x->errbuf, x->errsize, st, "account '%s': cannot compute its balance",
                          x->account);
out:
    /* Each was added just now: unchecked take-back, as it was cut. */
    for (i = added; i > 0; i--) {
        if (items[i - 1].ev->start < t)
            billing_rater_take_back(x->r, cut_at(x, items[i - 1].ev, t), NULL, 0);
    }
    return rc;
}

/* The candidate instant @j: the span's start (0), then the events' ends (by end). */
static billing_time_t candidate(const cx *x, const cx_item *by_end, size_t j)
{
    return j == 0 ? x->from : by_end[j - 1].ev->end;
}

/* The instant the level is reached over @by_end[0..@n) (see the file's comment); 0 or -1. */
static int reached_at(cx *x, const cx_item *by_end, size_t n, billing_time_t *out)
{
    cx_item *running = NULL;
    billing_time_t lo;
    billing_time_t hi;
    billing_time_t mid;
    size_t jlo = 0;
    size_t jhi = n;
    size_t base;
    size_t added = 0;
    size_t m = 0;
    size_t j;
    int below = below_at(x, by_end, n, x->from);

    if (below != 0) {
        *out = x->from;
        return below < 0 ? -1 : 0;
    }
    /* candidate(jlo) above; candidate(jhi), the span's last usage, at or below (the caller's
       precondition). */
    while (jhi - jlo > 1) {
        j = jlo + (jhi - jlo) / 2;
        below = below_at(x, by_end, n, candidate(x, by_end, j));
        if (below < 0)
            return -1;
        if (below)
            jhi = j;
        else
            jlo = j;
    }
    lo = candidate(x, by_end, jlo);
    hi = candidate(x, by_end, jhi);
    /* Events ending at or before lo count whole; the others starting before hi are cut. */
    for (base = 0; base < n && by_end[base].ev->end <= lo; base++)
        ;
    running = malloc((n - base + 1) * sizeof(*running));
    if (running == NULL) {
        x->st = bl_seterr(x->errbuf, x->errsize, BILLING_ERR_NOMEM, "out of memory");
        return -1;
    }
    below = 0;
    for (; added < base && below == 0; added++) {
        x->st = billing_rater_add(x->r, by_end[added].ev, x->errbuf, x->errsize);
        if (x->st != BILLING_OK)
            below = -1;
    }
    if (below < 0)
        added--;
    for (j = base; j < n && below == 0; j++) {
        if (by_end[j].ev->start < hi)
            running[m++] = by_end[j];
    }
    while (below == 0 && hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        below = below_at(x, running, m, mid);
        if (below < 0)
            break;
        if (below) {
            hi = mid;
            below = 0;
        } else {
            lo = mid;
        }
    }
    for (j = added; j > 0; j--)
        billing_rater_take_back(x->r, by_end[j - 1].ev, NULL, 0);
    free(running);
    *out = hi;
    return below < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Probes that move the rater from instant to instant                      */
/* ---------------------------------------------------------------------- */

/* Take back what x holds of the span's events cut at x->t_cur (they were added: unchecked). */
static void take_back_cuts(cx *x)
{
    while (x->n_cuts > 0) {
        x->n_cuts--;
        billing_rater_take_back(x->r, cut_at(x, x->by_end[x->cuts[x->n_cuts]].ev, x->t_cur), NULL,
                                0);
    }
}

/*
 * Make the rater hold the span's events starting before @t, cut there:
 * those ending at or before @t whole (a prefix of by_end), the others
 * cut. Only what differs from the instant held is added or taken back.
 * 0, or -1 (x->st set; what the rater holds is still recorded in @x).
 */
static int move_to(cx *x, billing_time_t t)
{
    const cx_item *b = x->by_end;
    size_t k = x->n_whole;
    size_t j;

    take_back_cuts(x);
    while (k < x->n && b[k].ev->end <= t)
        k++;
    while (k > 0 && b[k - 1].ev->end > t)
        k--;
    while (x->n_whole > k) {
        x->n_whole--;
        billing_rater_take_back(x->r, b[x->n_whole].ev, NULL, 0);
    }
    x->t_cur = t;
    for (; x->n_whole < k; x->n_whole++) {
        x->st = billing_rater_add(x->r, b[x->n_whole].ev, x->errbuf, x->errsize);
        if (x->st != BILLING_OK)
            return -1;
    }
    for (j = k; j < x->n; j++) {
        if (b[j].ev->start >= t)
            continue;
        x->st = billing_rater_add(x->r, cut_at(x, b[j].ev, t), x->errbuf, x->errsize);
        if (x->st != BILLING_OK)
            return -1;
        x->cuts[x->n_cuts++] = j;
    }
    return 0;
}

/* Take back all that x holds of the span: the rater as it was. */
static void move_out(cx *x)
{
    take_back_cuts(x);
    while (x->n_whole > 0) {
        x->n_whole--;
        billing_rater_take_back(x->r, x->by_end[x->n_whole].ev, NULL, 0);
    }
}

/* below_at's answer at @t, the rater moved there; the balance stays in x->q. 1, 0 or -1. */
static int probe(cx *x, billing_time_t t)
{
    billing_status st;

    if (move_to(x, t) != 0)
        return -1;
    st = bl_credit_balance_q(x->r, x->ai, t > x->from ? t - 1 : x->from, x->q);
    if (st != BILLING_OK) {
        x->st = bl_seterr(x->errbuf, x->errsize, st, "account '%s': cannot compute its balance",
                          x->account);
        return -1;
    }
    return mpq_cmp(x->q, x->level) <= 0;
}

/*
 * Does a span event of traffic, cut at a probe of (from, @last], spread
 * its bytes across a bound where its pieces are priced apart: a price
 * version's start (another line), a local month start (another invoice)
 * or a grant bound (another credit epoch)? Its bytes are a total for the
 * interval (doc/pricing.md, "Traffic is spread evenly"): cut at t, the
 * piece before such a bound b (start < b) gets bytes x (b - start) /
 * (t - start), which shrinks as t grows while the piece after it grows by
 * as much. Bytes then move from the piece before b to the one after: from
 * a higher rate to a lower one, from one rounded line to another, out of
 * a grant's window, and the balance can rise although more usage is cut
 * in (check_properties' test_credit_crossing_traffic_spread_keeps_former_search:
 * a cheaper version, two months' lines rounded down). The grant bound is kept for safety:
 * the bytes then move into the epoch of the grants counted at the probe,
 * and no case was found where that raises the balance, but allocation
 * among grants is not proven monotone in that move; it costs only spans
 * with traffic running across a grant bound.
 */
static int traffic_shifts(const cx *x, billing_time_t last)
{
    const billing_catalog *cat = x->r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, x->ai);
    const billing_event *ev;
    billing_time_t until;
    billing_time_t b;
    size_t i;
    size_t k;

    for (i = 0; i < x->n; i++) {
        ev = x->by_end[i].ev;
        if (ev->meter != BILLING_METER_TRAFFIC || ev->end <= x->from || ev->start >= last)
            continue;
        /* A bound b with start < b < until: some probe t > b cuts the event after it. */
        until = ev->end < last ? ev->end : last;
        if (bl_zone_next_month_start(a->zone, ev->start) < until)
            return 1;
        k = bl_upper_bound(a->epochs, a->n_epochs, ev->start);
        if (k < a->n_epochs && a->epochs[k] < until)
            return 1;
        for (k = 0; k < cat->versions.len; k++) {
            b = BL_AT(cat->versions, bl_version, k)->from;
            if (b > ev->start && b < until)
                return 1;
        }
    }
    return 0;
}

/*
 * Can the balance rise inside the span [from, @last]? When a grant starts
 * after from in it (its credit counts from then on; one starting at from
 * counts at every probe), or a cancellation of the month of from or later
 * refunds a fee, or a span event of traffic spreads its bytes across a
 * price version, month or grant bound as the probe's instant grows
 * (traffic_shifts). Then the answer is the former search's.
 */
static int may_rise(const cx *x, billing_time_t last)
{
    const billing_catalog *cat = x->r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, x->ai);
    const bl_grant *g;
    const bl_sub *s;
    billing_time_t month0;
    int year;
    int month;
    size_t i;

    for (i = 0; i < a->n_grants; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if (g->granted_at > x->from && g->granted_at <= last)
            return 1;
    }
    billing_zone_year_month(a->zone, x->from > BL_TIME_MIN ? x->from - 1 : x->from, &year, &month);
    if (billing_zone_month_start(a->zone, year, month, &month0) != BILLING_OK)
        return 1;
    for (i = 0; i < a->n_subs; i++) {
        s = BL_AT(cat->subs, bl_sub, a->subs[i]);
        if (s->cancelled && s->cancelled_at >= month0)
            return 1;
    }
    return traffic_shifts(x, last);
}

/* @t lowered to @limit when @limit is after @lo and before it. */
static billing_time_t cap_after(billing_time_t t, billing_time_t lo, billing_time_t limit)
{
    return limit > lo && limit < t ? limit : t;
}

/*
 * The end of the stretch from @lo (before @hi) over which each line's
 * exact amount is linear in the instant: the next start of a span event,
 * or end, month start, credit epoch bound, price version or plan term
 * bound after @lo, or @hi.
 */
static billing_time_t stretch_end(const cx *x, billing_time_t lo, billing_time_t hi)
{
    const billing_catalog *cat = x->r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, x->ai);
    const bl_sub *s;
    billing_time_t t = hi;
    size_t i;
    int k;

    for (i = 0; i < x->n; i++) {
        t = cap_after(t, lo, x->by_end[i].ev->start);
        t = cap_after(t, lo, x->by_end[i].ev->end);
    }
    t = cap_after(t, lo, bl_zone_next_month_start(a->zone, lo));
    i = bl_upper_bound(a->epochs, a->n_epochs, lo);
    if (i < a->n_epochs)
        t = cap_after(t, lo, a->epochs[i]);
    for (i = 0; i < cat->versions.len; i++)
        t = cap_after(t, lo, BL_AT(cat->versions, bl_version, i)->from);
    for (i = 0; i < a->n_subs; i++) {
        s = BL_AT(cat->subs, bl_sub, a->subs[i]);
        for (k = 0; k <= s->terms; k++)
            t = cap_after(t, lo, s->bounds[k]);
        if (s->cancelled)
            t = cap_after(t, lo, s->cancelled_at);
    }
    return t;
}

/* Whether two lines are one line (month.c's identity). */
static int line_same(const bl_line *a, const bl_line *b)
{
    return a->kind == b->kind && a->meter == b->meter && a->rate == b->rate &&
           a->attrs == b->attrs && a->plan == b->plan && a->version == b->version &&
           a->sub == b->sub;
}

/*
 * A line whose exact amount grows over a stretch: at its start, and its
 * growth over it. At lo + d its amount is a0 + da d / len, which is
 * (c0 + c1 d) / at's denominator: at is that fraction, not reduced (only
 * rounded: the rounding of a fraction does not change when both its terms
 * are multiplied by one positive integer), its numerator set per instant.
 */
typedef struct cx_line {
    mpq_t a0;
    mpq_t da;
    mpz_t r0; /* a0 rounded, minor units */
    mpz_t c0; /* a0's numerator x da's denominator x len */
    mpz_t c1; /* da's numerator x a0's denominator */
    mpq_t at; /* denominator a0's x da's x len, positive */
} cx_line;

typedef struct cx_model {
    cx_line *lines;
    size_t n;
    billing_time_t lo;
    billing_time_t len; /* the stretch's length, > 0 */
    mpz_t need;         /* the minor units the balance must fall by, >= 1 */
    mpq_t a;
    mpz_t r;
    mpz_t sum;
} cx_model;

/*
 * Has the balance fallen by m->need at @t, if the credit pays every line's
 * increase? In m->a and m->r and the rater's scratch: nothing allocated
 * per probe of the search.
 */
static int model_reached(cx_model *m, billing_rater *rater, billing_time_t t)
{
    bl_scratch *sc = &rater->scratch;
    mpq_ptr a = m->a;
    mpz_ptr r = m->r;
    size_t i;

    mpz_set_ui(m->sum, 0);
    for (i = 0; i < m->n; i++) {
        /* No gcd per probe: the amount's fraction as it comes, then rounded. */
        a = m->lines[i].at;
        mpz_mul_si(mpq_numref(a), m->lines[i].c1, (long)(t - m->lo));
        mpz_add(mpq_numref(a), mpq_numref(a), m->lines[i].c0);
        bl_q_round_pow(r, a, sc->pow10, rater->cat->rounding, sc->z[2], sc->z[3]);
        mpz_sub(r, r, m->lines[i].r0);
        mpz_add(m->sum, m->sum, r);
    }
    return mpz_cmp(m->sum, m->need) >= 0;
}

/* @l's c0, c1 and at's denominator from its a0 and da over a stretch of @len. */
static void line_terms(cx_line *l, billing_time_t len)
{
    mpz_init(l->c0);
    mpz_init(l->c1);
    mpq_init(l->at);
    mpz_mul(l->c0, mpq_numref(l->a0), mpq_denref(l->da));
    mpz_mul_si(l->c0, l->c0, (long)len);
    mpz_mul(l->c1, mpq_numref(l->da), mpq_denref(l->a0));
    mpz_mul(mpq_denref(l->at), mpq_denref(l->a0), mpq_denref(l->da));
    mpz_mul_si(mpq_denref(l->at), mpq_denref(l->at), (long)len);
}

/*
 * The lines of @m0 (at the stretch's start) and @m1 (at its end) that grow,
 * into @m; 0 or -1 (out of memory).
 */
static int model_lines(cx_model *m, const bl_month *m0, const bl_month *m1)
{
    const bl_line *before;
    size_t i;
    size_t j;

    m->lines = malloc((m1->n_lines + 1) * sizeof(*m->lines));
    if (m->lines == NULL)
        return -1;
    for (i = 0; i < m1->n_lines; i++) {
        before = NULL;
        for (j = 0; j < m0->n_lines && before == NULL; j++) {
            if (line_same(&m0->lines[j], &m1->lines[i]))
                before = &m0->lines[j];
        }
        if (before != NULL && mpq_equal(before->amount, m1->lines[i].amount))
            continue;
        mpq_init(m->lines[m->n].a0);
        mpq_init(m->lines[m->n].da);
        mpz_init(m->lines[m->n].r0);
        if (before != NULL) {
            mpq_set(m->lines[m->n].a0, before->amount);
            mpz_set(m->lines[m->n].r0, before->rounded);
        }
        mpq_sub(m->lines[m->n].da, m1->lines[i].amount, m->lines[m->n].a0);
        line_terms(&m->lines[m->n], m->len);
        m->n++;
    }
    return 0;
}

static void model_clear(cx_model *m)
{
    size_t i;

    for (i = 0; i < m->n; i++) {
        mpq_clear(m->lines[i].a0);
        mpq_clear(m->lines[i].da);
        mpz_clear(m->lines[i].r0);
        mpz_clear(m->lines[i].c0);
        mpz_clear(m->lines[i].c1);
        mpq_clear(m->lines[i].at);
    }
    free(m->lines);
    mpz_clears(m->need, m->r, m->sum, NULL);
    mpq_clear(m->a);
}

/*
 * Step 2: the instant in (@lo, @t1] the lines' rounded amounts have
 * lowered the balance at @lo (x->q, above the level) to the level or
 * below, from the lines of @lo's month with the rater at @lo and at @t1
 * (a stretch: no line bends inside it). Into *@guess; *@beyond set when
 * not even @t1 is enough. 0, or -1 (x->st set). The rater is left at @t1.
 */
static int solve(cx *x, billing_time_t lo, billing_time_t t1, billing_time_t *guess, int *beyond)
{
    const billing_catalog *cat = x->r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, x->ai);
    cx_model m;
    bl_month m0;
    bl_month m1;
    billing_time_t b_lo;
    billing_time_t b_hi;
    billing_time_t mid;
    int32_t month;
    int year;
    int mon;
    int rc = -1;

    memset(&m, 0, sizeof(m));
    memset(&m0, 0, sizeof(m0));
    memset(&m1, 0, sizeof(m1));
    mpz_inits(m.need, m.r, m.sum, NULL);
    mpq_init(m.a);
    m.lo = lo;
    m.len = t1 - lo;
    /* need = ceil((balance - level) * 10^digits): the minor units to fall by. */
    mpq_sub(m.a, x->q, x->level);
    mpz_ui_pow_ui(m.r, 10, (unsigned long)cat->digits);
    mpz_mul(mpq_numref(m.a), mpq_numref(m.a), m.r);
    mpq_canonicalize(m.a);
    mpz_cdiv_q(m.need, mpq_numref(m.a), mpq_denref(m.a));
    billing_zone_year_month(a->zone, lo, &year, &mon);
    month = bl_month_index(year, mon);
    if (bl_month_compute_amounts(x->r, x->ai, month, &m0) != BILLING_OK || move_to(x, t1) != 0 ||
        bl_month_compute_amounts(x->r, x->ai, month, &m1) != BILLING_OK ||
        model_lines(&m, &m0, &m1) != 0) {
        if (x->st == BILLING_OK)
            x->st = bl_seterr(x->errbuf, x->errsize, BILLING_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = 0;
    *beyond = !model_reached(&m, x->r, t1);
    *guess = t1;
    if (*beyond)
        goto out;
    /* Not reached at b_lo, reached at b_hi: arithmetic only, no rating. */
    b_lo = lo;
    b_hi = t1;
    while (b_hi - b_lo > 1) {
        mid = b_lo + (b_hi - b_lo) / 2;
        if (model_reached(&m, x->r, mid))
            b_hi = mid;
        else
            b_lo = mid;
    }
    *guess = b_hi;
out:
    bl_month_release(x->r, &m0);
    bl_month_release(x->r, &m1);
    model_clear(&m);
    return rc;
}

/* The most stretches solved for before the plain binary search takes over. */
#define CX_SOLVES 4

/*
 * Where the balance (exact, @f_lo at candidate @jlo above the level,
 * @f_hi at @jhi at or below) would reach the level if it fell evenly over
 * time: the first candidate strictly between them at or after that
 * instant, or the last one before @jhi.
 */
static size_t interpolate(const cx *x, size_t jlo, size_t jhi, mpq_srcptr f_lo, mpq_srcptr f_hi)
{
    billing_time_t lo = candidate(x, x->by_end, jlo);
    billing_time_t hi = candidate(x, x->by_end, jhi);
    billing_time_t t;
    size_t j;
    mpq_t num;
    mpq_t den;
    mpz_t z;

    mpq_inits(num, den, NULL);
    mpz_init(z);
    mpq_sub(num, f_lo, x->level);
    mpq_sub(den, f_lo, f_hi);
    if (mpq_sgn(den) > 0) {
        mpq_div(num, num, den);
        mpz_set_si(z, hi - lo);
        mpz_mul(mpq_numref(num), mpq_numref(num), z);
        mpz_fdiv_q(z, mpq_numref(num), mpq_denref(num));
    }
    t = mpq_sgn(den) > 0 && mpz_cmp_si(z, hi - lo) < 0 ? lo + mpz_get_si(z) : hi;
    mpq_clears(num, den, NULL);
    mpz_clear(z);
    for (j = jlo + 1; j + 1 < jhi && candidate(x, x->by_end, j) < t; j++)
        ;
    return j;
}

/*
 * Step 1: candidates @*jlo (above the level) and @*jhi (at or below, or
 * the last) next to each other. The balance at the last candidate is read
 * first; then each probe is where the balance would reach the level if it
 * fell evenly between the two bounds (usage at a steady rate: one or two
 * probes), or halfway when that did not halve the candidates left (never
 * more than twice the probes of a binary search). 0 or -1. Expects x->q
 * to hold the balance at candidate 0; leaves there the one at *@jlo when
 * it read it (*@lo_known then 1).
 */
static int step1(cx *x, size_t *jlo, size_t *jhi, int *lo_known)
{
    int known = 1;
    mpq_t f_lo;
    mpq_t f_hi;
    size_t left;
    size_t j;
    int halve = 0;
    int below;
    int rc = -1;

    mpq_inits(f_lo, f_hi, NULL);
    mpq_set(f_lo, x->q);
    *jlo = 0;
    *jhi = x->n;
    if (x->n > 1) {
        below = probe(x, candidate(x, x->by_end, x->n));
        if (below < 0)
            goto out;
        mpq_set(f_hi, x->q);
        if (!below) {
            *jlo = x->n - 1; /* never reached: the last stretch, as the former search ends */
            known = 0;
        }
    }
    while (*jhi - *jlo > 1) {
        left = *jhi - *jlo;
        j = halve ? *jlo + left / 2 : interpolate(x, *jlo, *jhi, f_lo, f_hi);
        below = probe(x, candidate(x, x->by_end, j));
        if (below < 0)
            goto out;
        if (below) {
            *jhi = j;
            mpq_set(f_hi, x->q);
        } else {
            *jlo = j;
            mpq_set(f_lo, x->q);
        }
        halve = !halve && 2 * (*jhi - *jlo) > left;
    }
    rc = 0;
    if (known)
        mpq_set(x->q, f_lo);
out:
    mpq_clears(f_lo, f_hi, NULL);
    *lo_known = known && rc == 0;
    return rc;
}

/* Steps 1 to 3 (see the file's comment); 0 or -1. The rater still holds what x records. */
static int reached_at_solved(cx *x, billing_time_t *out)
{
    const cx_item *b = x->by_end;
    billing_time_t lo;
    billing_time_t hi;
    billing_time_t t1;
    billing_time_t g = 0;
    size_t jlo = 0;
    size_t jhi = x->n;
    int solves;
    int beyond;
    int lo_known;
    int below = probe(x, x->from);

    if (below != 0) {
        *out = x->from;
        return below < 0 ? -1 : 0;
    }
    /* Step 1. */
    if (step1(x, &jlo, &jhi, &lo_known) != 0)
        return -1;
    lo = candidate(x, b, jlo);
    hi = candidate(x, b, jhi);
    /* Steps 2 and 3: the first instant in (lo, hi] at or below, or hi when none is. */
    for (solves = 0; solves < CX_SOLVES && hi - lo > 1; solves++) {
        /* The balance at lo: read by step 1 (the rater only moved back there) or now. */
        if ((lo_known ? move_to(x, lo) : probe(x, lo)) < 0)
            return -1;
        lo_known = 0;
        t1 = stretch_end(x, lo, hi);
        if (solve(x, lo, t1, &g, &beyond) != 0)
            return -1;
        below = probe(x, g);
        if (below < 0)
            return -1;
        if (!below) {
            lo = g;
            lo_known = 1; /* x->q holds its balance */
            continue;
        }
        hi = g;
        if (beyond || hi - lo <= 1)
            break;
        below = probe(x, g - 1);
        if (below < 0)
            return -1;
        if (below)
            hi = g - 1;
        else
            lo = g - 1;
        break;
    }
    while (hi - lo > 1) {
        g = lo + (hi - lo) / 2;
        below = probe(x, g);
        if (below < 0)
            return -1;
        if (below)
            hi = g;
        else
            lo = g;
    }
    *out = hi;
    return 0;
}

/* Is @x's id before @y's? The tie rule among events that start together. */
static int id_before(const billing_event *x, const billing_event *y)
{
    return strcmp(x->id, y->id) < 0;
}

/*
 * The event that reached the level at @t: of those running then (start
 * before @t, end at or after it), the one that started last (ties: the
 * smallest id); when none is, the span's first event (ties: the smallest
 * id). Its index in @events.
 */
static size_t reached_by(const billing_event *const *events, size_t n, billing_time_t t)
{
    const billing_event *it;
    size_t best = SIZE_MAX;
    size_t i;

    for (i = 0; i < n; i++) {
        it = events[i];
        if (it->start >= t || it->end < t)
            continue;
        if (best == SIZE_MAX || it->start > events[best]->start ||
            (it->start == events[best]->start && id_before(it, events[best])))
            best = i;
    }
    if (best != SIZE_MAX)
        return best;
    for (i = 0; i < n; i++) {
        it = events[i];
        if (best == SIZE_MAX || it->start < events[best]->start ||
            (it->start == events[best]->start && id_before(it, events[best])))
            best = i;
    }
    return best;
}

billing_status billing_rater_credit_crossing(billing_rater *r, const char *account,
                                             const billing_event *const *events, size_t n,
                                             billing_time_t from, const mpq_t level, size_t *index,
                                             billing_time_t *at, char *errbuf, size_t errsize)
{
    cx_item *by_end;
    cx x;
    size_t i;
    int rc;

    if (r == NULL || account == NULL || (events == NULL && n > 0) || index == NULL || at == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "credit crossing: a NULL argument");
    memset(&x, 0, sizeof(x));
    x.ai = bl_catalog_account(r->cat, account);
    if (x.ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_UNKNOWN_ACCOUNT,
                         "credit crossing: unknown account '%s'", account);
    if (r->dedupe)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE,
                         "credit crossing: account '%s': needs the rater's dedupe off", account);
    for (i = 0; i < n; i++) {
        if (events[i] == NULL || events[i]->start < from || events[i]->end <= events[i]->start ||
            strcmp(events[i]->account, account) != 0)
            return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                             "credit crossing: account '%s': event %zu not in the span from "
                             "its start or of another account",
                             account, i);
    }
    by_end = malloc((n + 1) * sizeof(*by_end));
    if (by_end == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        by_end[i].ev = events[i];
        by_end[i].index = i;
    }
    qsort(by_end, n, sizeof(*by_end), end_cmp);
    x.r = r;
    x.from = from;
    x.account = account;
    x.level = level;
    x.st = BILLING_OK;
    x.errbuf = errbuf;
    x.errsize = errsize;
    x.by_end = by_end;
    x.n = n;
    x.t_cur = from;
    x.cuts = malloc((n + 1) * sizeof(*x.cuts));
    if (x.cuts == NULL) {
        free(by_end);
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    }
    mpq_init(x.q);
    if (n > 0 && !may_rise(&x, by_end[n - 1].ev->end)) {
        rc = reached_at_solved(&x, at);
        move_out(&x);
    } else {
        rc = reached_at(&x, by_end, n, at);
    }
    mpq_clear(x.q);
    free(x.cuts);
    free(by_end);
    if (rc != 0)
        return x.st;
    *index = reached_by(events, n, *at);
    return BILLING_OK;
}

billing_status billing_rater_credit_balance_q(billing_rater *r, const char *account,
                                              billing_time_t now, mpq_t out)
{
    size_t ai;

    if (r == NULL || account == NULL || out == NULL)
        return BILLING_ERR_INVALID;
    ai = bl_catalog_account(r->cat, account);
    if (ai == BL_NONE)
        return BILLING_ERR_UNKNOWN_ACCOUNT;
    return bl_credit_balance_q(r, ai, now, out);
}
