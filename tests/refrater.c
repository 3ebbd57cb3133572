/*
 * refrater.c - see refrater.h. Written from doc/pricing.md: each
 * function cites the rule it implements. Deliberately slow: every event
 * is cut into pieces and each piece priced on its own with GMP; an
 * invoice is the sum of the pieces that fall in its month.
 */
#include "config.h"

#include <gmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "refrater.h"

#define NS INT64_C(1000000000)
#define HOUR_NS (INT64_C(3600) * NS)
#define DAY_NS (INT64_C(86400) * NS)
#define NO_TIME INT64_MAX

/* One charge: a piece of usage, a term's fee or a refund. */
typedef struct ref_charge {
    int month; /* year * 12 + month - 1, local */
    billing_line_kind kind;
    char meter[16];
    char model[REF_ID];
    char region[REF_ID];
    char plan[REF_ID];
    char version[REF_ID];
    char sub[REF_ID];         /* refund lines: the cancelled subscription */
    billing_time_t span_from; /* refund lines: the unused span [from, to) */
    billing_time_t span_to;
    billing_time_t term_start; /* refund lines: the start of the refunded term */
    const char *unit;
    mpq_t unit_price;
    mpq_t quantity;
    mpq_t amount;
    billing_time_t at;    /* the instant credit eligibility is judged at */
    unsigned credit_kind; /* BILLING_CHARGE_USAGE or _SUBSCRIPTION */
} ref_charge;

struct ref_rater {
    const ref_spec *spec;
    billing_time_t *bounds[REF_MAX_SUBS]; /* terms + 1 instants */
    billing_time_t sub_end[REF_MAX_SUBS];
    billing_status sub_status[REF_MAX_SUBS]; /* BILLING_ERR_NO_PRICE: refused, not in the catalog */
    ref_event *events;                       /* kept events, in arrival order */
    size_t n_events;
    size_t cap_events;
    int grant_order[REF_MAX_GRANTS];
    int n_grant_order;
};

/* ====================================================================== */
/* Local time, through the C library                                       */
/* ====================================================================== */

static char current_zone[REF_ID];

static void use_zone(const char *zone)
{
    if (strcmp(current_zone, zone) == 0)
        return;
    snprintf(current_zone, sizeof(current_zone), "%s", zone);
    setenv("TZ", zone, 1);
    tzset();
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if (a % b != 0 && (a < 0) != (b < 0))
        q--;
    return q;
}

static long offset_at(int64_t sec)
{
    time_t t = (time_t)sec;
    struct tm tm;

    localtime_r(&t, &tm);
    return tm.tm_gmtoff;
}

/* Days from 1970-01-01 to a proleptic Gregorian date. */
static int64_t days_from_civil(int y, int m, int d)
{
    int64_t era;
    int64_t yoe;
    int64_t doy;
    int64_t doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return days[m - 1] + (m == 2 && leap);
}

/*
 * A local wall time to an instant (pricing.md, "Plans"): if it does not
 * exist (a spring-forward gap) the same time shifted forward by the gap,
 * which is the wall time read with the offset in force before the gap;
 * if it occurs twice, the earlier instant.
 */
static billing_time_t local_to_utc(const char *zone, int y, int mo, int d, int h, int mi, int s,
                                   int64_t ns)
{
    int64_t naive = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
    long cand[4];
    long low;
    int64_t best = 0;
    int found = 0;
    int i;

    use_zone(zone);
    cand[0] = offset_at(naive - 2 * 86400);
    cand[1] = offset_at(naive + 2 * 86400);
    cand[2] = offset_at(naive - cand[0]);
    cand[3] = offset_at(naive - cand[1]);
    low = cand[0];
    for (i = 0; i < 4; i++) {
        if (cand[i] < low)
            low = cand[i];
        if (offset_at(naive - cand[i]) == cand[i] && (!found || naive - cand[i] < best)) {
            best = naive - cand[i];
            found = 1;
        }
    }
    if (!found)
        best = naive - low;
    return best * NS + ns;
}

billing_time_t ref_local_to_utc(const char *zone, int year, int month, int day, int hour,
                                int minute, int second)
{
    return local_to_utc(zone, year, month, day, hour, minute, second, 0);
}

typedef struct wall {
    int y;
    int mo;
    int d;
    int h;
    int mi;
    int s;
    int64_t ns;
} wall;

static void utc_to_local(const char *zone, billing_time_t t, wall *w)
{
    int64_t sec = floor_div(t, NS);
    time_t tt = (time_t)sec;
    struct tm tm;

    use_zone(zone);
    localtime_r(&tt, &tm);
    w->y = tm.tm_year + 1900;
    w->mo = tm.tm_mon + 1;
    w->d = tm.tm_mday;
    w->h = tm.tm_hour;
    w->mi = tm.tm_min;
    w->s = tm.tm_sec;
    w->ns = t - sec * NS;
}

/* Start of local month @m (year * 12 + month - 1): local midnight on the 1st. */
static billing_time_t month_start(const char *zone, int m)
{
    return local_to_utc(zone, m / 12, m % 12 + 1, 1, 0, 0, 0, 0);
}

/* The local month whose [start, next start) holds @t. */
static int month_of(const char *zone, billing_time_t t)
{
    wall w;
    int m;

    utc_to_local(zone, t, &w);
    m = w.y * 12 + w.mo - 1;
    if (t < month_start(zone, m))
        m--;
    else if (t >= month_start(zone, m + 1))
        m++;
    return m;
}

/*
 * End of term @k of a monthly plan started at @start: the same local
 * wall-clock time on the anchor day, @k months later, clamped to the
 * month's last day, always counted from the original anchor.
 */
static billing_time_t add_months(const char *zone, billing_time_t start, int k)
{
    wall w;
    int m;
    int d;

    utc_to_local(zone, start, &w);
    m = w.y * 12 + w.mo - 1 + k;
    d = w.d;
    if (d > days_in_month(m / 12, m % 12 + 1))
        d = days_in_month(m / 12, m % 12 + 1);
    return local_to_utc(zone, m / 12, m % 12 + 1, d, w.h, w.mi, w.s, w.ns);
}

/* ====================================================================== */
/* Numbers                                                                 */
/* ====================================================================== */

/* Decimal text ("12", "0.000000001") to an exact rational. */
static void q_of_text(mpq_t out, const char *text)
{
    char digits[REF_DEC * 2];
    size_t n = 0;
    int frac = -1;
    const char *p;
    mpz_t den;

    for (p = text; *p != '\0'; p++) {
        if (*p == '.')
            frac = 0;
        else {
            digits[n++] = *p;
            if (frac >= 0)
                frac++;
        }
    }
    digits[n] = '\0';
    mpz_init(den);
    mpz_ui_pow_ui(den, 10, frac > 0 ? (unsigned long)frac : 0);
    mpz_set_str(mpq_numref(out), digits, 10);
    mpz_set(mpq_denref(out), den);
    mpq_canonicalize(out);
    mpz_clear(den);
}

/*
 * Round @q to whole 10^-@digits units with @mode (pricing.md, "Invoices
 * and rounding"): the count of minor units into @out.
 */
static void round_minor(mpz_t out, const mpq_t q, int digits, billing_rounding mode)
{
    mpz_t scaled_num;
    mpz_t rem;
    mpz_t twice;
    int up = 0;
    int half;
    int sign = mpq_sgn(q);

    mpz_init(scaled_num);
    mpz_init(rem);
    mpz_init(twice);
    mpz_ui_pow_ui(scaled_num, 10, (unsigned long)digits);
    mpz_mul(scaled_num, scaled_num, mpq_numref(q));
    mpz_fdiv_qr(out, rem, scaled_num, mpq_denref(q));
    mpz_mul_2exp(twice, rem, 1);
    half = mpz_cmp(twice, mpq_denref(q));
    if (mpz_sgn(rem) != 0) {
        if (mode == BILLING_ROUND_CEILING || (mode == BILLING_ROUND_UP && sign > 0) ||
            (mode == BILLING_ROUND_DOWN && sign < 0))
            up = 1;
        else if (mode == BILLING_ROUND_HALF_UP)
            up = half > 0 || (half == 0 && sign > 0);
        else if (mode == BILLING_ROUND_HALF_EVEN)
            up = half > 0 || (half == 0 && mpz_odd_p(out));
    }
    if (up)
        mpz_add_ui(out, out, 1);
    mpz_clear(scaled_num);
    mpz_clear(rem);
    mpz_clear(twice);
}

/*
 * The non-negative integer @abs written with a point @k digits from the
 * right ("5", k 2 -> "0.05"), with a '-' in front when @neg.
 */
static char *point_text(int neg, const mpz_t abs, unsigned long k)
{
    char *digits = mpz_get_str(NULL, 10, abs);
    size_t len = strlen(digits);
    size_t width = len > k ? len : k + 1; /* at least one digit before the point */
    char *out = malloc(width + 3);
    char *p = out;
    size_t pad = width - len;
    size_t i;

    if (neg)
        *p++ = '-';
    for (i = 0; i < width; i++) {
        if (k > 0 && i == width - k)
            *p++ = '.';
        *p++ = i < pad ? '0' : digits[i - pad];
    }
    *p = '\0';
    free(digits);
    return out;
}

/* Exact text: a decimal without trailing zeros when finite, else "p/q". */
static char *q_text(const mpq_t q)
{
    mpz_t d;
    mpz_t scaled;
    unsigned long twos;
    unsigned long fives = 0;
    unsigned long k;
    char *out;
    int neg;

    mpz_init_set(d, mpq_denref(q));
    twos = mpz_scan1(d, 0);
    mpz_fdiv_q_2exp(d, d, twos);
    while (mpz_divisible_ui_p(d, 5)) {
        mpz_divexact_ui(d, d, 5);
        fives++;
    }
    if (mpz_cmp_ui(d, 1) != 0) {
        mpz_clear(d);
        return mpq_get_str(NULL, 10, q);
    }
    k = twos > fives ? twos : fives;
    mpz_init(scaled);
    mpz_ui_pow_ui(scaled, 10, k);
    mpz_mul(scaled, scaled, mpq_numref(q));
    mpz_divexact(scaled, scaled, mpq_denref(q));
    neg = mpz_sgn(scaled) < 0;
    mpz_abs(scaled, scaled);
    out = point_text(neg, scaled, k);
    mpz_clear(scaled);
    mpz_clear(d);
    return out;
}

/* Minor units as text with exactly @digits decimals ("12.35", "-0.05", "7"). */
static char *minor_text(const mpz_t minor, int digits)
{
    mpz_t a;
    char *out;

    mpz_init(a);
    mpz_abs(a, minor);
    out = point_text(mpz_sgn(minor) < 0, a, (unsigned long)digits);
    mpz_clear(a);
    return out;
}

/* Text built with printf, malloc'd. */
static char *text_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *text_of(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *out;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    out = malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return out;
}

/* ====================================================================== */
/* The catalog (pricing.md, "Prices")                                      */
/* ====================================================================== */

/* The version in force at @t: the latest that started at or before it; -1 if none. */
static int version_at(const ref_spec *s, billing_time_t t)
{
    int best = -1;
    int i;

    for (i = 0; i < s->n_versions; i++) {
        if (s->versions[i].from <= t && (best < 0 || s->versions[i].from > s->versions[best].from))
            best = i;
    }
    return best;
}

/* The first version start after @t, or NO_TIME. */
static billing_time_t next_version_start(const ref_spec *s, billing_time_t t)
{
    billing_time_t next = NO_TIME;
    int i;

    for (i = 0; i < s->n_versions; i++) {
        if (s->versions[i].from > t && s->versions[i].from < next)
            next = s->versions[i].from;
    }
    return next;
}

static int find_rate(const ref_spec *s, int v, billing_meter m, const char *model,
                     const char *region)
{
    int i;

    for (i = 0; i < s->n_rates; i++) {
        if (s->rates[i].version == v && s->rates[i].meter == m &&
            strcmp(s->rates[i].model, model) == 0 && strcmp(s->rates[i].region, region) == 0)
            return i;
    }
    return -1;
}

/*
 * The rate of (meter, model, region) in version @v: keys tried in the order
 * (model, region), (model, *), (*, region), (*, *); an empty attribute is
 * "*". -1 if none.
 */
static int rate_of(const ref_spec *s, int v, billing_meter m, const char *model, const char *region)
{
    const char *models[2];
    const char *regions[2];
    int i;
    int j;
    int found;

    models[0] = model[0] ? model : "*";
    models[1] = "*";
    regions[0] = region[0] ? region : "*";
    regions[1] = "*";
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 2; j++) {
            found = find_rate(s, v, m, models[i], regions[j]);
            if (found >= 0)
                return found;
        }
    }
    return -1;
}

static int fee_of(const ref_spec *s, int v, int plan)
{
    int i;

    for (i = 0; i < s->n_fees; i++) {
        if (s->fees[i].version == v && s->fees[i].plan == plan)
            return i;
    }
    return -1;
}

static int account_index(const ref_spec *s, const char *id)
{
    int i;

    for (i = 0; i < s->n_accounts; i++) {
        if (strcmp(s->accounts[i].id, id) == 0)
            return i;
    }
    return -1;
}

/* ====================================================================== */
/* Rules the library is changing: one small function each                  */
/* ====================================================================== */

/*
 * The instant a subscription stops: its cancellation, else the end of its
 * last term. A cancellation at or before the start means no term at all
 * (pricing.md, "Cancellation"): it stops at its start.
 */
static billing_time_t ref_rule_sub_end(const ref_sub *s, const billing_time_t *bounds)
{
    if (s->cancelled == 0)
        return bounds[s->terms];
    return s->cancelled <= s->start ? s->start : s->cancelled;
}

/* A term is charged when it starts before the subscription stops. */
static int ref_rule_term_charged(billing_time_t term_start, billing_time_t sub_end)
{
    return term_start < sub_end;
}

/*
 * Whether the month of a cancellation has an invoice even when nothing is
 * charged in it. No (pricing.md, "Refund lines": a cancellation that
 * refunds nothing makes no invoice of its own; issue 16).
 */
static int ref_rule_cancel_lists_month(void)
{
    return 0;
}

/*
 * How a fee or refund line presents: no meter (pricing.md, "Fees are
 * charged in advance": a fee is for a plan's term), the plan's model and
 * region (billing.h, line accessors).
 */
static void ref_rule_plan_line(ref_charge *c, const ref_plan *p)
{
    c->meter[0] = '\0';
    snprintf(c->model, sizeof(c->model), "%s", p->model);
    snprintf(c->region, sizeof(c->region), "%s", p->region);
}

/*
 * The model and region an included line shows: the events' own, whatever
 * the plan names (pricing.md, "Included usage").
 */
static void ref_rule_included_attrs(ref_charge *c, const ref_plan *p, const ref_event *ev)
{
    (void)p;
    snprintf(c->model, sizeof(c->model), "%s", ev->model);
    snprintf(c->region, sizeof(c->region), "%s", ev->region);
}

/*
 * What credit may pay of one pool (a span's usage, or its fees net of
 * refunds and of the credit they give back): never below zero, since the
 * money part of a refund is not credit to spend (pricing.md, "Never below
 * zero").
 */
static void ref_rule_refund_in_pool(mpz_t pool)
{
    if (mpz_sgn(pool) < 0)
        mpz_set_ui(pool, 0);
}

/*
 * What all grants together may pay on an invoice: what it asks for, the
 * subtotal plus the credit given back to grants, and nothing when that is
 * below zero (pricing.md, "Never below zero").
 */
static void ref_rule_credit_cap(mpz_t cap, const mpz_t asked)
{
    mpz_set(cap, asked);
    if (mpz_sgn(cap) < 0)
        mpz_set_ui(cap, 0);
}

/*
 * Tax and total from @taxable = subtotal + returned - credits - account credit
 * + carried (pricing.md, "Invoices and rounding"): tax = round(rate x taxable)
 * with the price book's mode, never below zero; total = taxable + tax.
 */
static void ref_rule_total(mpz_t total, mpz_t tax, const mpz_t taxable, const mpq_t tax_rate,
                           billing_rounding mode)
{
    mpq_t q;

    mpq_init(q);
    mpq_set_z(q, taxable);
    mpq_mul(q, q, tax_rate);
    round_minor(tax, q, 0, mode);
    if (mpz_sgn(tax) < 0)
        mpz_set_ui(tax, 0);
    mpz_add(total, taxable, tax);
    mpq_clear(q);
}

/* ====================================================================== */
/* Subscriptions (pricing.md, "Plans and subscriptions")                   */
/* ====================================================================== */

static billing_time_t term_end(const ref_spec *s, const ref_sub *sub, int k)
{
    const ref_plan *p = &s->plans[sub->plan];

    if (p->period == BILLING_PERIOD_DAY)
        return sub->start + (billing_time_t)k * DAY_NS; /* 24 h whatever DST does */
    return add_months(s->accounts[sub->account].zone, sub->start, k);
}

/*
 * Every charged term has a fee (pricing.md, "Every charged term has a
 * fee"): one starting before the first price version, or in a version
 * without the plan's fee, refuses the subscription.
 */
static billing_status terms_priced(const ref_rater *r, int i)
{
    const ref_spec *s = r->spec;
    const ref_sub *sub = &s->subs[i];
    int v;
    int k;

    for (k = 0; k < sub->terms && ref_rule_term_charged(r->bounds[i][k], r->sub_end[i]); k++) {
        v = version_at(s, r->bounds[i][k]);
        if (v < 0 || fee_of(s, v, sub->plan) < 0)
            return BILLING_ERR_NO_PRICE;
    }
    return BILLING_OK;
}

ref_rater *ref_new(const ref_spec *spec)
{
    ref_rater *r = calloc(1, sizeof(*r));
    const ref_sub *sub;
    int i;
    int k;

    r->spec = spec;
    for (i = 0; i < spec->n_subs; i++) {
        sub = &spec->subs[i];
        r->bounds[i] = malloc(((size_t)sub->terms + 1) * sizeof(billing_time_t));
        for (k = 0; k <= sub->terms; k++)
            r->bounds[i][k] = term_end(spec, sub, k);
        r->sub_end[i] = ref_rule_sub_end(sub, r->bounds[i]);
        r->sub_status[i] = terms_priced(r, i);
        if (r->sub_status[i] != BILLING_OK)
            r->sub_end[i] = sub->start; /* refused: not in the catalog, no term */
    }
    return r;
}

billing_status ref_sub_status(const ref_rater *r, int sub)
{
    return r->sub_status[sub];
}

void ref_destroy(ref_rater *r)
{
    int i;

    if (r == NULL)
        return;
    for (i = 0; i < r->spec->n_subs; i++)
        free(r->bounds[i]);
    free(r->events);
    free(r);
}

/*
 * The subscription of @resource covering @t, or -1; *@next is then the
 * start of its next subscription after @t (NO_TIME if none).
 */
static int covering_sub(const ref_rater *r, int account, const char *resource, billing_time_t t,
                        billing_time_t *next)
{
    const ref_sub *sub;
    int i;

    *next = NO_TIME;
    for (i = 0; i < r->spec->n_subs; i++) {
        sub = &r->spec->subs[i];
        if (sub->account != account || strcmp(sub->resource, resource) != 0 ||
            r->sub_status[i] != BILLING_OK)
            continue;
        if (sub->start <= t && t < r->sub_end[i])
            return i;
        if (sub->start > t && sub->start < *next)
            *next = sub->start;
    }
    return -1;
}

/* The first bound of a grant of @account after @t (credit is judged per span), or NO_TIME. */
static billing_time_t next_grant_bound(const ref_spec *s, int account, billing_time_t t)
{
    billing_time_t next = NO_TIME;
    const ref_grant *g;
    int i;

    for (i = 0; i < s->n_grants; i++) {
        g = &s->grants[i];
        if (g->account != account)
            continue;
        if (g->granted > t && g->granted < next)
            next = g->granted;
        if (g->expires > t && g->expires < next)
            next = g->expires;
    }
    return next;
}

/* ====================================================================== */
/* Charges                                                                 */
/* ====================================================================== */

typedef struct charges {
    ref_charge *v;
    size_t n;
    size_t cap;
} charges;

static ref_charge *charge_new(charges *cs, int month, billing_line_kind kind, const char *unit,
                              billing_time_t at, unsigned credit_kind)
{
    ref_charge *c;

    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? cs->cap * 2 : 64;
        cs->v = realloc(cs->v, cs->cap * sizeof(ref_charge));
    }
    c = &cs->v[cs->n++];
    memset(c, 0, sizeof(*c));
    c->month = month;
    c->kind = kind;
    c->unit = unit;
    c->at = at;
    c->credit_kind = credit_kind;
    mpq_init(c->unit_price);
    mpq_init(c->quantity);
    mpq_init(c->amount);
    return c;
}

static void charges_clear(charges *cs)
{
    size_t i;

    for (i = 0; i < cs->n; i++) {
        mpq_clear(cs->v[i].unit_price);
        mpq_clear(cs->v[i].quantity);
        mpq_clear(cs->v[i].amount);
    }
    free(cs->v);
    memset(cs, 0, sizeof(*cs));
}

static const char *usage_unit(billing_meter m)
{
    static const char *const units[BILLING_METER_COUNT] = {"GPU-hour", "instance-hour", "GB-month",
                                                           "GB"};

    return units[m];
}

/*
 * The quantity of piece [a, b) of @ev in the meter's unit (pricing.md,
 * "Meters and units"): GPUs x hours, instances x hours, GB x the share of
 * the local month, or the piece's share of the bytes in GB.
 */
static void piece_quantity(const ref_rater *r, const ref_event *ev, int account, int month,
                           billing_time_t a, billing_time_t b, mpq_t out)
{
    const char *zone = r->spec->accounts[account].zone;
    mpq_t f;

    mpq_init(f);
    q_of_text(out, ev->qty);
    switch (ev->meter) {
    case BILLING_METER_GPU:
    case BILLING_METER_GPULESS:
        mpz_set_si(mpq_numref(f), b - a);
        mpz_set_si(mpq_denref(f), HOUR_NS);
        break;
    case BILLING_METER_STORAGE:
        mpz_set_si(mpq_numref(f), b - a);
        mpz_set_si(mpq_denref(f), month_start(zone, month + 1) - month_start(zone, month));
        break;
    case BILLING_METER_TRAFFIC:
        mpz_set_si(mpq_numref(f), b - a);
        mpz_set_si(mpq_denref(f), ev->end - ev->start);
        mpz_mul_ui(mpq_denref(f), mpq_denref(f), 1000000000UL);
        break;
    }
    mpq_canonicalize(f);
    mpq_mul(out, out, f);
    mpq_clear(f);
}

/* The charge of piece [a, b): included in @sub, priced at @rate, or zero-rated traffic. */
static void usage_charge(const ref_rater *r, const ref_event *ev, int account, int month,
                         billing_time_t a, billing_time_t b, int sub, int rate, charges *cs)
{
    const ref_spec *s = r->spec;
    ref_charge *c;

    c = charge_new(cs, month, sub >= 0 ? BILLING_LINE_INCLUDED : BILLING_LINE_USAGE,
                   usage_unit(ev->meter), a, BILLING_CHARGE_USAGE);
    snprintf(c->meter, sizeof(c->meter), "%s", billing_meter_name(ev->meter));
    piece_quantity(r, ev, account, month, a, b, c->quantity);
    if (sub >= 0) {
        snprintf(c->plan, sizeof(c->plan), "%s", s->plans[s->subs[sub].plan].id);
        ref_rule_included_attrs(c, &s->plans[s->subs[sub].plan], ev);
        return;
    }
    snprintf(c->model, sizeof(c->model), "%s", rate >= 0 ? s->rates[rate].model : "*");
    snprintf(c->region, sizeof(c->region), "%s", rate >= 0 ? s->rates[rate].region : "*");
    if (rate < 0)
        return; /* traffic without a rate: shown at 0 */
    snprintf(c->version, sizeof(c->version), "%s", s->versions[s->rates[rate].version].id);
    q_of_text(c->unit_price, s->rates[rate].price);
    mpq_mul(c->amount, c->quantity, c->unit_price);
}

static billing_time_t min_t(billing_time_t a, billing_time_t b)
{
    return a < b ? a : b;
}

/*
 * Cut @ev into pieces at every local month start, price version start,
 * subscription bound and grant bound, and price each. With @cs NULL only
 * checks that every piece has a price: BILLING_OK or BILLING_ERR_NO_PRICE.
 */
static billing_status walk_event(const ref_rater *r, const ref_event *ev, int account, charges *cs)
{
    const ref_spec *s = r->spec;
    const char *zone = s->accounts[account].zone;
    billing_time_t t = ev->start;
    billing_time_t end;
    billing_time_t next_sub;
    int month;
    int sub = -1;
    int v;
    int rate;

    while (t < ev->end) {
        month = month_of(zone, t);
        end = min_t(ev->end, month_start(zone, month + 1));
        end = min_t(end, next_version_start(s, t));
        end = min_t(end, next_grant_bound(s, account, t));
        if (ev->meter == BILLING_METER_GPU || ev->meter == BILLING_METER_GPULESS) {
            sub = covering_sub(r, account, ev->resource, t, &next_sub);
            end = min_t(end, sub >= 0 ? r->sub_end[sub] : next_sub);
        }
        v = version_at(s, t);
        rate = v >= 0 ? rate_of(s, v, ev->meter, ev->model, ev->region) : -1;
        if (sub < 0 && rate < 0 && ev->meter != BILLING_METER_TRAFFIC)
            return BILLING_ERR_NO_PRICE;
        if (cs != NULL)
            usage_charge(r, ev, account, month, t, end, sub, rate, cs);
        t = end;
    }
    return BILLING_OK;
}

/* The fee of every charged term, and the refund of a cancelled refundable one. */
static void sub_charges(const ref_rater *r, int i, charges *cs)
{
    const ref_spec *s = r->spec;
    const ref_sub *sub = &s->subs[i];
    const ref_plan *p = &s->plans[sub->plan];
    const char *zone = s->accounts[sub->account].zone;
    const billing_time_t *b = r->bounds[i];
    billing_time_t c = sub->cancelled;
    ref_charge *ch;
    mpq_t frac;
    int fee;
    int v;
    int k;

    if (r->sub_status[i] != BILLING_OK)
        return; /* refused by the catalog */
    for (k = 0; k < sub->terms && ref_rule_term_charged(b[k], r->sub_end[i]); k++) {
        /* A fee is charged in advance, at the price in force at the term's start. */
        v = version_at(s, b[k]);
        fee = fee_of(s, v, sub->plan);
        ch = charge_new(cs, month_of(zone, b[k]), BILLING_LINE_FEE, "term", b[k],
                        BILLING_CHARGE_SUBSCRIPTION);
        ref_rule_plan_line(ch, p);
        snprintf(ch->plan, sizeof(ch->plan), "%s", p->id);
        snprintf(ch->version, sizeof(ch->version), "%s", s->versions[v].id);
        q_of_text(ch->unit_price, s->fees[fee].fee);
        mpq_set_ui(ch->quantity, 1, 1);
        mpq_set(ch->amount, ch->unit_price);
    }
    if (c == 0 || c <= sub->start || !p->refundable)
        return;
    for (k = 0; k < sub->terms && b[k + 1] <= c; k++)
        ;
    v = version_at(s, b[k]);
    fee = v >= 0 ? fee_of(s, v, sub->plan) : -1;
    if (k >= sub->terms || c <= b[k] || fee < 0)
        return; /* cancelled at a term boundary: nothing of a term is unused */
    /* fee x unused / term length, to the nanosecond, on the month of cancellation;
     * one line per subscription, its quantity the unused span in seconds. */
    ch = charge_new(cs, month_of(zone, c), BILLING_LINE_REFUND, "second", c,
                    BILLING_CHARGE_SUBSCRIPTION);
    ref_rule_plan_line(ch, p);
    snprintf(ch->plan, sizeof(ch->plan), "%s", p->id);
    snprintf(ch->version, sizeof(ch->version), "%s", s->versions[v].id);
    snprintf(ch->sub, sizeof(ch->sub), "%s", sub->id);
    ch->span_from = c;
    ch->span_to = b[k + 1];
    ch->term_start = b[k];
    mpq_init(frac);
    mpz_set_si(mpq_numref(frac), b[k + 1] - c);
    mpz_set_si(mpq_denref(frac), b[k + 1] - b[k]);
    mpq_canonicalize(frac);
    q_of_text(ch->amount, s->fees[fee].fee);
    mpq_mul(ch->amount, frac, ch->amount);
    mpq_neg(ch->amount, ch->amount);
    mpz_set_si(mpq_numref(ch->quantity), b[k + 1] - c);
    mpz_set_si(mpq_denref(ch->quantity), NS);
    mpq_canonicalize(ch->quantity);
    mpq_clear(frac);
}

static void account_charges(const ref_rater *r, int account, charges *cs)
{
    size_t i;
    int j;

    for (i = 0; i < r->n_events; i++) {
        if (account_index(r->spec, r->events[i].account) == account)
            walk_event(r, &r->events[i], account, cs);
    }
    for (j = 0; j < r->spec->n_subs; j++) {
        if (r->spec->subs[j].account == account)
            sub_charges(r, j, cs);
    }
}

/* ====================================================================== */
/* Events: identity (pricing.md, "Events: identity and errors")            */
/* ====================================================================== */

static int same_content(const ref_event *a, const ref_event *b)
{
    return strcmp(a->account, b->account) == 0 && strcmp(a->resource, b->resource) == 0 &&
           a->meter == b->meter && a->start == b->start && a->end == b->end &&
           strcmp(a->qty, b->qty) == 0 && strcmp(a->model, b->model) == 0 &&
           strcmp(a->region, b->region) == 0;
}

billing_status ref_add(ref_rater *r, const ref_event *ev)
{
    int account = account_index(r->spec, ev->account);
    size_t i;

    if (account < 0)
        return BILLING_ERR_UNKNOWN_ACCOUNT;
    for (i = 0; i < r->n_events; i++) {
        if (strcmp(r->events[i].id, ev->id) == 0)
            return same_content(&r->events[i], ev) ? BILLING_DUPLICATE : BILLING_ERR_CONFLICT;
    }
    if (walk_event(r, ev, account, NULL) != BILLING_OK)
        return BILLING_ERR_NO_PRICE;
    if (r->n_events == r->cap_events) {
        r->cap_events = r->cap_events ? r->cap_events * 2 : 256;
        r->events = realloc(r->events, r->cap_events * sizeof(ref_event));
    }
    r->events[r->n_events++] = *ev;
    return BILLING_OK;
}

/* ====================================================================== */
/* Invoices (pricing.md, "Invoices and rounding", "Credit")                */
/* ====================================================================== */

char *ref_line_text(int kind, const char *meter, const char *model, const char *region,
                    const char *plan, const char *version, const char *qty, const char *unit,
                    const char *unit_price, const char *amount, const char *rounded)
{
    return text_of("line %d %s %s %s plan=%s ver=%s qty=%s %s @%s = %s -> %s\n", kind, meter, model,
                   region, plan, version, qty, unit, unit_price, amount, rounded);
}

static int cmp_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *ref_invoice_join(const char *head, char **lines, size_t n, const char *tail)
{
    size_t len = strlen(head) + strlen(tail) + 1;
    size_t i;
    char *out;

    qsort(lines, n, sizeof(char *), cmp_text);
    for (i = 0; i < n; i++)
        len += strlen(lines[i]);
    out = malloc(len);
    strcpy(out, head);
    for (i = 0; i < n; i++)
        strcat(out, lines[i]);
    strcat(out, tail);
    return out;
}

/* Charges that make one line: same kind, meter, price key, version, plan and unit price. */
static int same_line(const ref_charge *a, const ref_charge *b)
{
    return a->kind == b->kind && strcmp(a->meter, b->meter) == 0 &&
           strcmp(a->model, b->model) == 0 && strcmp(a->region, b->region) == 0 &&
           strcmp(a->plan, b->plan) == 0 && strcmp(a->version, b->version) == 0 &&
           strcmp(a->sub, b->sub) == 0 && mpq_equal(a->unit_price, b->unit_price);
}

/* RFC 3339 in UTC, the fraction without trailing zeros (as billing.h prints instants). */
static void utc_text(billing_time_t t, char *buf, size_t size)
{
    time_t sec = (time_t)floor_div(t, NS);
    long ns = (long)(t - (int64_t)sec * NS);
    struct tm tm;
    char frac[12] = "";
    int len;

    gmtime_r(&sec, &tm);
    if (ns != 0) {
        snprintf(frac, sizeof(frac), ".%09ld", ns);
        for (len = (int)strlen(frac); frac[len - 1] == '0'; len--)
            frac[len - 1] = '\0';
    }
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d%sZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

/* A refund line names its subscription and the unused span on a row of its own. */
static char *with_refund_row(char *line, const ref_charge *c)
{
    char from[40];
    char to[40];
    char *out;

    if (c->kind != BILLING_LINE_REFUND)
        return line;
    utc_text(c->span_from, from, sizeof(from));
    utc_text(c->span_to, to, sizeof(to));
    out = text_of("%s  refund of %s unused [%s, %s)\n", line, c->sub, from, to);
    free(line);
    return out;
}

/* The lines of month @m: each charge of the month joins the first of its line. */
static size_t month_lines(const charges *cs, int m, int digits, billing_rounding mode, char **lines,
                          mpz_t subtotal)
{
    size_t n = 0;
    size_t i;
    size_t j;
    mpq_t qty;
    mpq_t amount;
    mpz_t rounded;
    char *t[5];

    mpq_init(qty);
    mpq_init(amount);
    mpz_init(rounded);
    mpz_set_ui(subtotal, 0);
    for (i = 0; i < cs->n; i++) {
        if (cs->v[i].month != m)
            continue;
        for (j = 0; j < i && !(cs->v[j].month == m && same_line(&cs->v[j], &cs->v[i])); j++)
            ;
        if (j < i)
            continue; /* counted with its first charge */
        mpq_set_ui(qty, 0, 1);
        mpq_set_ui(amount, 0, 1);
        for (j = i; j < cs->n; j++) {
            if (cs->v[j].month == m && same_line(&cs->v[j], &cs->v[i])) {
                mpq_add(qty, qty, cs->v[j].quantity);
                mpq_add(amount, amount, cs->v[j].amount);
            }
        }
        /* Each line is rounded once. */
        round_minor(rounded, amount, digits, mode);
        mpz_add(subtotal, subtotal, rounded);
        t[0] = q_text(qty);
        /* A refund has no unit price: its amount is the fee's unused share. */
        t[1] =
            cs->v[i].kind == BILLING_LINE_REFUND ? text_of("%s", "") : q_text(cs->v[i].unit_price);
        t[2] = q_text(amount);
        t[3] = minor_text(rounded, digits);
        lines[n] =
            ref_line_text((int)cs->v[i].kind, cs->v[i].meter, cs->v[i].model, cs->v[i].region,
                          cs->v[i].plan, cs->v[i].version, t[0], cs->v[i].unit, t[1], t[2], t[3]);
        lines[n] = with_refund_row(lines[n], &cs->v[i]);
        n++;
        for (j = 0; j < 4; j++)
            free(t[j]);
    }
    mpq_clear(qty);
    mpq_clear(amount);
    mpz_clear(rounded);
    return n;
}

/* The distinct grant bounds of @account, ascending; returns how many. */
static int grant_bounds(const ref_spec *s, int account, billing_time_t *out)
{
    int n = 0;
    int i;
    int j;
    int k;
    billing_time_t t;

    for (i = 0; i < s->n_grants; i++) {
        for (k = 0; k < 2 && s->grants[i].account == account; k++) {
            t = k == 0 ? s->grants[i].granted : s->grants[i].expires;
            for (j = 0; j < n && out[j] != t; j++)
                ;
            if (j == n)
                out[n++] = t;
        }
    }
    for (i = 1; i < n; i++) {
        for (j = i; j > 0 && out[j - 1] > out[j]; j--) {
            t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    }
    return n;
}

/* The span of an instant among the grant bounds: how many bounds are <= t. */
static int span_of(const billing_time_t *bounds, int n, billing_time_t t)
{
    int e = 0;

    while (e < n && bounds[e] <= t)
        e++;
    return e;
}

/*
 * Grants of @account in the order they are spent: lowest priority
 * number, then earliest expiry, then earliest grant, then id.
 */
static int grant_order(const ref_spec *s, int account, int *out)
{
    int n = 0;
    int i;
    int j;
    int t;
    const ref_grant *a;
    const ref_grant *b;

    for (i = 0; i < s->n_grants; i++) {
        if (s->grants[i].account == account)
            out[n++] = i;
    }
    for (i = 1; i < n; i++) {
        for (j = i; j > 0; j--) {
            a = &s->grants[out[j - 1]];
            b = &s->grants[out[j]];
            if (a->priority < b->priority ||
                (a->priority == b->priority &&
                 (a->expires < b->expires ||
                  (a->expires == b->expires &&
                   (a->granted < b->granted ||
                    (a->granted == b->granted && strcmp(a->id, b->id) < 0))))))
                break;
            t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    }
    return n;
}

/* What grant @j (-1: the pool's total) paid of the fees of span @span of month @month. */
typedef struct fee_paid {
    int month;
    int span;
    int j;
    mpz_t amount;
} fee_paid;

typedef struct credit_state {
    int order[REF_MAX_GRANTS];
    int n;
    mpz_t rem[REF_MAX_GRANTS]; /* each grant's remainder, in minor units */
    mpz_t account_credit;      /* minor units, spent after every grant */
    billing_time_t bounds[2 * REF_MAX_GRANTS];
    int n_bounds;
    fee_paid *paid;
    size_t n_paid;
    size_t cap_paid;
} credit_state;

static void paid_add(credit_state *cr, int month, int span, int j, const mpz_t amount)
{
    if (cr->n_paid == cr->cap_paid) {
        cr->cap_paid = cr->cap_paid ? cr->cap_paid * 2 : 64;
        cr->paid = realloc(cr->paid, cr->cap_paid * sizeof(fee_paid));
    }
    cr->paid[cr->n_paid].month = month;
    cr->paid[cr->n_paid].span = span;
    cr->paid[cr->n_paid].j = j;
    mpz_init_set(cr->paid[cr->n_paid].amount, amount);
    cr->n_paid++;
}

/* What paid_add recorded for (@month, @span, @j), or 0. */
static void paid_get(const credit_state *cr, int month, int span, int j, mpz_t out)
{
    size_t i;

    mpz_set_ui(out, 0);
    for (i = 0; i < cr->n_paid; i++) {
        if (cr->paid[i].month == month && cr->paid[i].span == span && cr->paid[i].j == j)
            mpz_add(out, out, cr->paid[i].amount);
    }
}

/*
 * Add the line of month @m whose first charge is @i to @pools, cut at the
 * grant bounds by rounding its running sum (pricing.md, "Credit pays the
 * invoice's figures"): the parts before a bound add up to the rounded
 * running sum there, so the parts add up to the line.
 */
static void line_parts(const ref_spec *s, const credit_state *cr, const charges *cs, int m,
                       size_t i, mpz_t *pools)
{
    int k = cs->v[i].credit_kind == BILLING_CHARGE_USAGE ? 0 : 1;
    mpq_t run;
    mpz_t before;
    mpz_t after;
    size_t j;
    int e;

    mpq_init(run);
    mpz_init(before);
    mpz_init(after);
    for (e = 0; e <= cr->n_bounds; e++) {
        for (j = i; j < cs->n; j++) {
            if (cs->v[j].month == m && same_line(&cs->v[j], &cs->v[i]) &&
                span_of(cr->bounds, cr->n_bounds, cs->v[j].at) == e)
                mpq_add(run, run, cs->v[j].amount);
        }
        round_minor(after, run, s->digits, s->rounding);
        mpz_add(pools[e * 2 + k], pools[e * 2 + k], after);
        mpz_sub(pools[e * 2 + k], pools[e * 2 + k], before);
        mpz_set(before, after);
    }
    mpq_clear(run);
    mpz_clear(before);
    mpz_clear(after);
}

/* The first charge of month @m of each line, so that each line is cut once. */
static int first_of_line(const charges *cs, int m, size_t i)
{
    size_t j;

    if (cs->v[i].month != m)
        return 0;
    for (j = 0; j < i; j++) {
        if (cs->v[j].month == m && same_line(&cs->v[j], &cs->v[i]))
            return 0;
    }
    return 1;
}

/*
 * A refund of a fee charged on an earlier invoice is not netted with this
 * invoice's fees: its credit part goes back to the grants that paid, its
 * money part is the customer's and lowers only what the invoice asks for
 * (pricing.md, "Refunds go back the way the fee was paid").
 */
static int earlier_refund(const charges *cs, size_t i, const char *zone)
{
    const ref_charge *c = &cs->v[i];

    return c->kind == BILLING_LINE_REFUND && month_of(zone, c->term_start) != c->month;
}

/*
 * Credit given back by the refunds of month @m (pricing.md, "Refunds go
 * back the way the fee was paid"): each grant its share of the refund, in
 * proportion to what it paid of the fees of the term's start (month and
 * span), rounded as a running sum over the grants in application order.
 * Into @back[j].
 */
static void refunds_back(const ref_spec *s, const credit_state *cr, const charges *cs, int m,
                         const char *zone, mpz_t *back)
{
    const ref_charge *c;
    mpz_t total;
    mpz_t paid;
    mpz_t before;
    mpz_t after;
    mpq_t run;
    mpq_t share;
    size_t i;
    int m0;
    int e0;
    int j;

    mpz_init(total);
    mpz_init(paid);
    mpz_init(before);
    mpz_init(after);
    mpq_init(run);
    mpq_init(share);
    for (i = 0; i < cs->n; i++) {
        c = &cs->v[i];
        if (c->month != m || c->kind != BILLING_LINE_REFUND)
            continue;
        m0 = month_of(zone, c->term_start);
        e0 = span_of(cr->bounds, cr->n_bounds, c->term_start);
        if (m0 == m)
            continue; /* the fee is on the same invoice: simply netted */
        paid_get(cr, m0, e0, -1, total);
        if (mpz_sgn(total) <= 0)
            continue;
        mpq_set_ui(run, 0, 1);
        mpz_set_ui(before, 0);
        for (j = 0; j < cr->n; j++) {
            paid_get(cr, m0, e0, j, paid);
            mpq_set_z(share, paid);
            mpz_set(mpq_denref(share), total);
            mpq_canonicalize(share);
            mpq_mul(share, share, c->amount);
            /* Rounded like the line, as a negative amount: never more than it shows. */
            mpq_add(run, run, share);
            round_minor(after, run, s->digits, s->rounding);
            mpz_sub(back[j], back[j], after);
            mpz_add(back[j], back[j], before);
            mpz_set(before, after);
        }
    }
    mpz_clear(total);
    mpz_clear(paid);
    mpz_clear(before);
    mpz_clear(after);
    mpq_clear(run);
    mpq_clear(share);
}

/* ---- Allocation: a flow network (pricing.md, "Allocation") ---- */

/*
 * Source 0, grants 1..n, pools n+1..n+np2, the invoice's cap n+np2+1,
 * sink n+np2+2. cap[a * size + b] is the capacity left from a to b.
 */
typedef struct flow_net {
    int size;
    mpz_t *cap;
} flow_net;

static void net_init(flow_net *g, int size)
{
    int i;

    g->size = size;
    g->cap = malloc((size_t)size * (size_t)size * sizeof(mpz_t));
    for (i = 0; i < size * size; i++)
        mpz_init(g->cap[i]);
}

static void net_clear(flow_net *g)
{
    int i;

    for (i = 0; i < g->size * g->size; i++)
        mpz_clear(g->cap[i]);
    free(g->cap);
}

/* Edmonds-Karp: push shortest augmenting paths from 0 to size - 1; the flow into @value. */
static void net_maxflow(flow_net *g, mpz_t value)
{
    int n = g->size;
    int *prev = malloc((size_t)n * sizeof(int));
    int *queue = malloc((size_t)n * sizeof(int));
    mpz_t push;
    int head;
    int tail;
    int a;
    int b;

    mpz_init(push);
    mpz_set_ui(value, 0);
    for (;;) {
        for (a = 0; a < n; a++)
            prev[a] = -1;
        prev[0] = 0;
        head = 0;
        tail = 0;
        queue[tail++] = 0;
        while (head < tail && prev[n - 1] < 0) {
            a = queue[head++];
            for (b = 0; b < n; b++) {
                if (prev[b] < 0 && mpz_sgn(g->cap[a * n + b]) > 0) {
                    prev[b] = a;
                    queue[tail++] = b;
                }
            }
        }
        if (prev[n - 1] < 0)
            break;
        mpz_set(push, g->cap[prev[n - 1] * n + n - 1]);
        for (b = n - 1; b != 0; b = prev[b]) {
            if (mpz_cmp(g->cap[prev[b] * n + b], push) < 0)
                mpz_set(push, g->cap[prev[b] * n + b]);
        }
        for (b = n - 1; b != 0; b = prev[b]) {
            mpz_sub(g->cap[prev[b] * n + b], g->cap[prev[b] * n + b], push);
            mpz_add(g->cap[b * n + prev[b]], g->cap[b * n + prev[b]], push);
        }
        mpz_add(value, value, push);
    }
    mpz_clear(push);
    free(prev);
    free(queue);
}

/* Whether grant @j may pay pool @p (span p / 2, usage when p is even). */
static int may_pay(const ref_spec *s, const credit_state *cr, int j, int p)
{
    const ref_grant *g = &s->grants[cr->order[j]];
    unsigned kind = p % 2 == 0 ? BILLING_CHARGE_USAGE : BILLING_CHARGE_SUBSCRIPTION;
    int first = span_of(cr->bounds, cr->n_bounds, g->granted);
    int last = span_of(cr->bounds, cr->n_bounds, g->expires) - 1;

    return (g->kinds & kind) && p / 2 >= first && p / 2 <= last;
}

/*
 * The network with grant i's supply @supply[i] (i < @upto; 0 after),
 * every pool and the invoice's @cap.
 */
static void net_build(flow_net *g, const ref_spec *s, const credit_state *cr, const mpz_t *pools,
                      const mpz_t *supply, int upto, const mpz_t cap)
{
    int np2 = (cr->n_bounds + 1) * 2;
    int n = g->size;
    int j;
    int p;

    for (j = 0; j < n * n; j++)
        mpz_set_ui(g->cap[j], 0);
    for (j = 0; j < upto; j++) {
        mpz_set(g->cap[0 * n + 1 + j], supply[j]);
        for (p = 0; p < np2; p++) {
            if (may_pay(s, cr, j, p))
                mpz_set(g->cap[(1 + j) * n + 1 + cr->n + p], pools[p]);
        }
    }
    for (p = 0; p < np2; p++)
        mpz_set(g->cap[(1 + cr->n + p) * n + n - 2], pools[p]);
    mpz_set(g->cap[(n - 2) * n + n - 1], cap);
}

/*
 * Pay month @m's pools (pricing.md, "Allocation"): the grants together pay
 * as much as they can; of the ways to pay that much, the first grant in
 * application order pays as much as it can, then the second... (flows from
 * sources form a polymatroid, so taking each grant's maximum in turn, the
 * earlier ones fixed, reaches the maximum). Into @applied[j]; what each
 * grant paid of each span's fees is recorded for later refunds.
 */
static void allocate(const ref_spec *s, credit_state *cr, int m, const mpz_t *pools,
                     const mpz_t cap, mpz_t *applied)
{
    int np2 = (cr->n_bounds + 1) * 2;
    flow_net g;
    mpz_t value;
    mpz_t before;
    int n = cr->n + np2 + 3;
    int j;
    int e;

    mpz_init(value);
    mpz_init(before);
    net_init(&g, n);
    for (j = 0; j < cr->n; j++) {
        mpz_set(applied[j], cr->rem[j]);
        net_build(&g, s, cr, pools, applied, j + 1, cap);
        net_maxflow(&g, value);
        mpz_sub(applied[j], value, before);
        mpz_set(before, value);
    }
    /* The last network is the final allocation: record who paid which fees. */
    for (e = 0; e <= cr->n_bounds; e++) {
        if (mpz_sgn(pools[e * 2 + 1]) == 0)
            continue;
        paid_add(cr, m, e, -1, pools[e * 2 + 1]);
        for (j = 0; j < cr->n; j++)
            paid_add(cr, m, e, j, g.cap[(1 + cr->n + e * 2 + 1) * n + 1 + j]);
    }
    net_clear(&g);
    mpz_clear(value);
    mpz_clear(before);
}

/* Append "@label @grant @amount[ left @left]\n" to *@text. */
static void text_grant(char **text, const char *label, const char *grant, const mpz_t amount,
                       const mpz_t *left, int digits)
{
    char *a = minor_text(amount, digits);
    char *l = left != NULL ? minor_text(*left, digits) : NULL;
    char *t;

    if (l != NULL)
        t = text_of("%s%s %s %s left %s\n", *text, label, grant, a, l);
    else
        t = text_of("%s%s %s %s\n", *text, label, grant, a);
    free(*text);
    *text = t;
    free(a);
    free(l);
}

/*
 * The invoice's rows for the grants: credit applied, credit given back,
 * then expired (pricing.md, "Expiry": a grant that expires this month with
 * a remainder; one that expired before lists what it got back at once).
 */
static char *credit_rows(const ref_spec *s, const credit_state *cr, int m, const char *zone,
                         const mpz_t *applied, const mpz_t *back)
{
    const ref_grant *g;
    char *rows[3];
    char *out;
    int expiry;
    int j;

    for (j = 0; j < 3; j++)
        rows[j] = text_of("%s", "");
    for (j = 0; j < cr->n; j++) {
        g = &s->grants[cr->order[j]];
        expiry = month_of(zone, g->expires - 1);
        if (mpz_sgn(applied[j]) > 0)
            text_grant(&rows[0], "credit", g->id, applied[j], &cr->rem[j], s->digits);
        if (mpz_sgn(back[j]) > 0)
            text_grant(&rows[1], "returned", g->id, back[j], &cr->rem[j], s->digits);
        if (expiry < m && mpz_sgn(back[j]) > 0)
            text_grant(&rows[2], "expired", g->id, back[j], NULL, s->digits);
        else if (expiry == m && mpz_sgn(cr->rem[j]) > 0)
            text_grant(&rows[2], "expired", g->id, cr->rem[j], NULL, s->digits);
    }
    out = text_of("%s%s%s", rows[0], rows[1], rows[2]);
    for (j = 0; j < 3; j++)
        free(rows[j]);
    return out;
}

/*
 * Spend the grants on month @m: credit given back by refunds first, then
 * the allocation, then expiry. Returns the credit, returned and expired
 * rows of the invoice text; the sums into @credits and @returned.
 */
static char *apply_credit(const ref_spec *s, credit_state *cr, const charges *cs, int m,
                          const char *zone, const mpz_t subtotal, mpz_t credits, mpz_t returned)
{
    int np2 = (cr->n_bounds + 1) * 2;
    mpz_t *pools = malloc((size_t)np2 * sizeof(mpz_t));
    mpz_t back[REF_MAX_GRANTS];
    mpz_t applied[REF_MAX_GRANTS];
    mpz_t cap;
    char *out;
    const ref_grant *g;
    size_t i;
    int j;
    int p;

    mpz_init(cap);
    for (p = 0; p < np2; p++)
        mpz_init(pools[p]);
    for (j = 0; j < cr->n; j++) {
        mpz_init(back[j]);
        mpz_init(applied[j]);
    }
    for (i = 0; i < cs->n; i++) {
        if (first_of_line(cs, m, i) && !earlier_refund(cs, i, zone))
            line_parts(s, cr, cs, m, i, pools);
    }
    refunds_back(s, cr, cs, m, zone, back);
    for (p = 0; p < np2; p++)
        ref_rule_refund_in_pool(pools[p]);
    mpz_set_ui(returned, 0);
    for (j = 0; j < cr->n; j++)
        mpz_add(returned, returned, back[j]);
    mpz_add(cap, subtotal, returned);
    ref_rule_credit_cap(cap, cap);
    for (j = 0; j < cr->n; j++) {
        /* A grant that expired before this month lists what it gets back as expired. */
        g = &s->grants[cr->order[j]];
        if (month_of(zone, g->expires - 1) >= m)
            mpz_add(cr->rem[j], cr->rem[j], back[j]);
    }
    allocate(s, cr, m, pools, cap, applied);
    mpz_set_ui(credits, 0);
    for (j = 0; j < cr->n; j++) {
        mpz_sub(cr->rem[j], cr->rem[j], applied[j]);
        mpz_add(credits, credits, applied[j]);
    }
    out = credit_rows(s, cr, m, zone, applied, back);
    for (p = 0; p < np2; p++)
        mpz_clear(pools[p]);
    free(pools);
    for (j = 0; j < cr->n; j++) {
        mpz_clear(back[j]);
        mpz_clear(applied[j]);
    }
    mpz_clear(cap);
    return out;
}

static int first_month(const charges *cs, int fallback)
{
    int m = fallback;
    size_t i;

    for (i = 0; i < cs->n; i++) {
        if (cs->v[i].month < m)
            m = cs->v[i].month;
    }
    return m;
}

/*
 * Account credit (pricing.md, "Account credit"): an invoice asking for
 * less than zero carries the excess; otherwise the account credit pays
 * what the grants left, after every grant. Returns the row (or "") and
 * the amount tax is computed on into @taxable.
 */
static char *account_credit(const ref_spec *s, credit_state *cr, const mpz_t subtotal,
                            const mpz_t returned, const mpz_t credits, mpz_t taxable)
{
    mpz_t spent;
    mpz_t carried;
    char *t[3];
    char *out;

    mpz_init(spent);
    mpz_init(carried);
    mpz_add(taxable, subtotal, returned);
    if (mpz_sgn(taxable) < 0) {
        mpz_neg(carried, taxable);
        mpz_add(cr->account_credit, cr->account_credit, carried);
    } else {
        mpz_sub(spent, taxable, credits);
        if (mpz_cmp(spent, cr->account_credit) > 0)
            mpz_set(spent, cr->account_credit);
        mpz_sub(cr->account_credit, cr->account_credit, spent);
    }
    mpz_sub(taxable, taxable, credits);
    mpz_sub(taxable, taxable, spent);
    mpz_add(taxable, taxable, carried);
    out = text_of("%s", "");
    if (mpz_sgn(spent) != 0 || mpz_sgn(carried) != 0 || mpz_sgn(cr->account_credit) != 0) {
        free(out);
        t[0] = minor_text(spent, s->digits);
        t[1] = minor_text(carried, s->digits);
        t[2] = minor_text(cr->account_credit, s->digits);
        out = text_of("account credit %s carried %s left %s\n", t[0], t[1], t[2]);
        free(t[0]);
        free(t[1]);
        free(t[2]);
    }
    mpz_clear(spent);
    mpz_clear(carried);
    return out;
}

/* The whole text of the invoice of month @m. */
static char *invoice_text(const ref_spec *s, int account, credit_state *cr, const charges *cs,
                          int m)
{
    const ref_account *a = &s->accounts[account];
    char **lines = malloc((cs->n + 1) * sizeof(char *));
    size_t n;
    size_t i;
    mpz_t subtotal;
    mpz_t credits;
    mpz_t returned;
    mpz_t taxable;
    mpz_t tax;
    mpz_t total;
    mpq_t rate;
    char *credit_text;
    char *acct_text;
    char *head;
    char *tail;
    char *t[4];
    char *out;

    mpz_init(subtotal);
    mpz_init(credits);
    mpz_init(returned);
    mpz_init(taxable);
    mpz_init(tax);
    mpz_init(total);
    mpq_init(rate);
    n = month_lines(cs, m, s->digits, s->rounding, lines, subtotal);
    credit_text = apply_credit(s, cr, cs, m, a->zone, subtotal, credits, returned);
    acct_text = account_credit(s, cr, subtotal, returned, credits, taxable);
    q_of_text(rate, a->tax);
    ref_rule_total(total, tax, taxable, rate, s->rounding);
    t[0] = minor_text(subtotal, s->digits);
    t[1] = minor_text(credits, s->digits);
    t[2] = minor_text(tax, s->digits);
    t[3] = minor_text(total, s->digits);
    head = text_of("%s %04d-%02d %s\n", a->id, m / 12, m % 12 + 1, s->currency);
    tail = text_of("%s%ssubtotal %s credits %s tax %s@%s total %s\n", credit_text, acct_text, t[0],
                   t[1], t[2], a->tax, t[3]);
    out = ref_invoice_join(head, lines, n, tail);
    for (i = 0; i < n; i++)
        free(lines[i]);
    for (i = 0; i < 4; i++)
        free(t[i]);
    free(lines);
    free(head);
    free(tail);
    free(credit_text);
    free(acct_text);
    mpz_clear(subtotal);
    mpz_clear(credits);
    mpz_clear(returned);
    mpz_clear(taxable);
    mpz_clear(tax);
    mpz_clear(total);
    mpq_clear(rate);
    return out;
}

/* Every grant of @account whole, in application order; no account credit. */
static void credit_init(const ref_spec *s, int account, credit_state *cr)
{
    mpq_t q;
    int j;

    memset(cr, 0, sizeof(*cr));
    mpq_init(q);
    cr->n = grant_order(s, account, cr->order);
    cr->n_bounds = grant_bounds(s, account, cr->bounds);
    for (j = 0; j < cr->n; j++) {
        mpz_init(cr->rem[j]);
        q_of_text(q, s->grants[cr->order[j]].amount);
        round_minor(cr->rem[j], q, s->digits, BILLING_ROUND_FLOOR); /* exact: minor digits */
    }
    mpz_init(cr->account_credit);
    mpq_clear(q);
}

static void credit_clear(credit_state *cr)
{
    size_t i;
    int j;

    for (j = 0; j < cr->n; j++)
        mpz_clear(cr->rem[j]);
    mpz_clear(cr->account_credit);
    for (i = 0; i < cr->n_paid; i++)
        mpz_clear(cr->paid[i].amount);
    free(cr->paid);
}

/*
 * The credit state the invoices leave up to the month holding @now
 * (pricing.md, "Live balance").
 */
static void live_credit(ref_rater *r, int account, billing_time_t now, credit_state *cr)
{
    charges cs = {NULL, 0, 0};
    int until = month_of(r->spec->accounts[account].zone, now);
    int m;

    account_charges(r, account, &cs);
    credit_init(r->spec, account, cr);
    for (m = first_month(&cs, until); m <= until; m++)
        free(invoice_text(r->spec, account, cr, &cs, m));
    charges_clear(&cs);
}

static int grant_valid(const ref_grant *g, billing_time_t t)
{
    return g->granted <= t && t < g->expires;
}

/* Minor units @z as an exact amount. */
static void q_of_minor(mpq_t out, const mpz_t z, int digits)
{
    mpq_set_z(out, z);
    mpz_ui_pow_ui(mpq_denref(out), 10, (unsigned long)digits);
    mpq_canonicalize(out);
}

char *ref_balance(ref_rater *r, int account, billing_time_t now)
{
    credit_state cr;
    mpz_t sum;
    mpq_t q;
    char *out;
    int j;

    live_credit(r, account, now, &cr);
    mpz_init_set(sum, cr.account_credit);
    mpq_init(q);
    for (j = 0; j < cr.n; j++) {
        if (grant_valid(&r->spec->grants[cr.order[j]], now))
            mpz_add(sum, sum, cr.rem[j]);
    }
    q_of_minor(q, sum, r->spec->digits);
    out = q_text(q);
    mpz_clear(sum);
    mpq_clear(q);
    credit_clear(&cr);
    return out;
}

/* ---- Exhaustion (pricing.md, "Credit": "Exhaustion") ---- */

/*
 * The exact credit the walk spends: each grant's remainder and the
 * account credit, as amounts (the burn is exact, not in minor units).
 */
typedef struct walk_credit {
    int n;
    mpq_t left[REF_MAX_GRANTS];
    mpq_t account;
} walk_credit;

static void walk_init(walk_credit *w, const credit_state *cr, int digits)
{
    int j;

    w->n = cr->n;
    for (j = 0; j < cr->n; j++) {
        mpq_init(w->left[j]);
        q_of_minor(w->left[j], cr->rem[j], digits);
    }
    mpq_init(w->account);
    q_of_minor(w->account, cr->account_credit, digits);
}

static void walk_clear(walk_credit *w)
{
    int j;

    for (j = 0; j < w->n; j++)
        mpq_clear(w->left[j]);
    mpq_clear(w->account);
}

/* Credit that may pay usage at @t: usage grants valid at @t, with a remainder. */
static int usable_grant(const ref_spec *s, const credit_state *cr, const walk_credit *w, int j,
                        billing_time_t t)
{
    const ref_grant *g = &s->grants[cr->order[j]];

    return (g->kinds & BILLING_CHARGE_USAGE) && grant_valid(g, t) && mpq_sgn(w->left[j]) > 0;
}

/* Usable grants and the account credit, which pays any charge. */
static void usable(const ref_spec *s, const credit_state *cr, const walk_credit *w,
                   billing_time_t t, mpq_t out)
{
    int j;

    mpq_set(out, w->account);
    for (j = 0; j < cr->n; j++) {
        if (usable_grant(s, cr, w, j, t))
            mpq_add(out, out, w->left[j]);
    }
}

/*
 * What the running usage costs per nanosecond at @t: hourly rates of the
 * version in force at @now; storage per nanosecond of the local month
 * holding @t. -1 if a resource has no price.
 */
static int burn_at(const ref_rater *r, int account, billing_time_t now, const ref_event *evs,
                   size_t n, billing_time_t t, mpq_t out)
{
    const ref_spec *s = r->spec;
    const char *zone = s->accounts[account].zone;
    int v = version_at(s, now);
    int m = month_of(zone, t);
    int rate;
    size_t i;
    mpq_t term;
    mpq_t per;

    mpq_init(term);
    mpq_init(per);
    mpq_set_ui(out, 0, 1);
    for (i = 0; i < n && mpq_sgn(out) >= 0; i++) {
        if (evs[i].meter == BILLING_METER_TRAFFIC)
            continue;
        rate = v >= 0 ? rate_of(s, v, evs[i].meter, evs[i].model, evs[i].region) : -1;
        if (rate < 0) {
            mpq_set_si(out, -1, 1);
            break;
        }
        q_of_text(term, evs[i].qty);
        q_of_text(per, s->rates[rate].price);
        mpq_mul(term, term, per);
        mpz_set_ui(mpq_numref(per), 1);
        mpz_set_si(mpq_denref(per), evs[i].meter == BILLING_METER_STORAGE
                                        ? month_start(zone, m + 1) - month_start(zone, m)
                                        : HOUR_NS);
        mpq_mul(term, term, per);
        mpq_add(out, out, term);
    }
    mpq_clear(term);
    mpq_clear(per);
    return mpq_sgn(out) < 0 ? -1 : 0;
}

/* Take up to @amount from @from. */
static void take_from(mpq_t from, mpq_t amount)
{
    if (mpq_cmp(from, amount) <= 0) {
        mpq_sub(amount, amount, from);
        mpq_set_ui(from, 0, 1);
    } else {
        mpq_sub(from, from, amount);
        mpq_set_ui(amount, 0, 1);
    }
}

/*
 * Spend @amount (pricing.md, "Exhaustion"): from the usable grant that
 * expires first (ties in application order), then the next, then the
 * account credit.
 */
static void spend(const ref_spec *s, const credit_state *cr, walk_credit *w, billing_time_t t,
                  mpq_t amount)
{
    int best;
    int j;

    while (mpq_sgn(amount) > 0) {
        best = -1;
        for (j = 0; j < cr->n; j++) {
            if (usable_grant(s, cr, w, j, t) &&
                (best < 0 || s->grants[cr->order[j]].expires < s->grants[cr->order[best]].expires))
                best = j;
        }
        if (best < 0)
            break;
        take_from(w->left[best], amount);
    }
    take_from(w->account, amount);
}

/*
 * The next instant the burn or the usable credit changes: a local month
 * start, a grant's start or its expiry.
 */
static billing_time_t next_change(const ref_spec *s, int account, billing_time_t t)
{
    const char *zone = s->accounts[account].zone;
    billing_time_t next = month_start(zone, month_of(zone, t) + 1);
    const ref_grant *g;
    int i;

    for (i = 0; i < s->n_grants; i++) {
        g = &s->grants[i];
        if (g->account != account)
            continue;
        if (g->expires > t && g->expires < next)
            next = g->expires;
        if (g->granted > t && g->granted < next)
            next = g->granted;
    }
    return next;
}

billing_status ref_exhaustion(ref_rater *r, int account, billing_time_t now, const ref_event *evs,
                              size_t n, billing_time_t *out)
{
    const ref_spec *s = r->spec;
    const billing_time_t end_of_range = INT64_C(7258118400) * NS; /* 2200-01-01 */
    billing_status st = BILLING_OK;
    billing_time_t t = now;
    billing_time_t next;
    credit_state cr;
    walk_credit w;
    mpq_t avail;
    mpq_t burn;
    mpq_t span;
    mpz_t ns;
    int steps;

    if (version_at(s, now) < 0)
        return BILLING_ERR_NO_PRICE; /* nothing to price the running usage with */
    live_credit(r, account, now, &cr);
    walk_init(&w, &cr, s->digits);
    mpq_init(avail);
    mpq_init(burn);
    mpq_init(span);
    mpz_init(ns);
    *out = INT64_MAX;
    /* The burn is constant between changes: walk from change to change. */
    for (steps = 0; steps < 10000 && t < end_of_range; steps++) {
        usable(s, &cr, &w, t, avail);
        if (mpq_sgn(avail) <= 0) {
            *out = t;
            break;
        }
        if (burn_at(r, account, now, evs, n, t, burn) != 0) {
            st = BILLING_ERR_NO_PRICE;
            break;
        }
        if (mpq_sgn(burn) == 0)
            break;
        next = next_change(s, account, t);
        /* Rounded down to the nanosecond, so the answer is never late. */
        mpq_div(span, avail, burn);
        mpz_fdiv_q(ns, mpq_numref(span), mpq_denref(span));
        if (mpz_cmp_si(ns, next - t) < 0) {
            *out = t + mpz_get_si(ns);
            break;
        }
        mpq_set_si(span, next - t, 1);
        mpq_mul(span, span, burn);
        spend(s, &cr, &w, t, span);
        t = next;
    }
    mpq_clear(avail);
    mpq_clear(burn);
    mpq_clear(span);
    mpz_clear(ns);
    walk_clear(&w);
    credit_clear(&cr);
    return st;
}

void ref_invoices(ref_rater *r, int account, int first, int last, char **out)
{
    const ref_spec *s = r->spec;
    charges cs = {NULL, 0, 0};
    credit_state cr;
    char *text;
    int m;

    account_charges(r, account, &cs);
    credit_init(s, account, &cr);
    /* Credit carries from the first month with charges. */
    for (m = first_month(&cs, first); m <= last; m++) {
        text = invoice_text(s, account, &cr, &cs, m);
        if (m >= first)
            out[m - first] = text;
        else
            free(text);
    }
    credit_clear(&cr);
    charges_clear(&cs);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a;
    int y = *(const int *)b;

    return (x > y) - (x < y);
}

int ref_months(ref_rater *r, int account, int *out, int cap)
{
    const ref_spec *s = r->spec;
    charges cs = {NULL, 0, 0};
    int *all;
    size_t n = 0;
    size_t i;
    int j;
    int count = 0;

    account_charges(r, account, &cs);
    all = malloc((cs.n + (size_t)s->n_subs + 1) * sizeof(int));
    for (i = 0; i < cs.n; i++)
        all[n++] = cs.v[i].month;
    for (j = 0; j < s->n_subs && ref_rule_cancel_lists_month(); j++) {
        if (s->subs[j].account == account && s->subs[j].cancelled != 0)
            all[n++] = month_of(s->accounts[account].zone, s->subs[j].cancelled);
    }
    qsort(all, n, sizeof(int), cmp_int);
    for (i = 0; i < n; i++) {
        if (i > 0 && all[i] == all[i - 1])
            continue;
        if (count < cap)
            out[count] = all[i];
        count++;
    }
    free(all);
    charges_clear(&cs);
    return count;
}

billing_time_t ref_sub_bound(const ref_rater *r, int sub, int k)
{
    return r->bounds[sub][k];
}

void ref_utc_to_local(const char *zone, billing_time_t t, int *year, int *month, int *day,
                      int *hour)
{
    wall w;

    utc_to_local(zone, t, &w);
    *year = w.y;
    *month = w.mo;
    *day = w.d;
    *hour = w.h;
}

int ref_zone_transitions(const char *zone, billing_time_t from, billing_time_t to,
                         billing_time_t *out, int cap)
{
    const int64_t step = 6 * 3600;
    int64_t t = floor_div(from, NS);
    int64_t lo;
    int64_t hi;
    int64_t mid;
    int n = 0;

    use_zone(zone);
    for (; t < floor_div(to, NS) && n < cap; t += step) {
        if (offset_at(t) == offset_at(t + step))
            continue;
        lo = t;
        hi = t + step;
        while (hi - lo > 1) {
            mid = lo + (hi - lo) / 2;
            if (offset_at(mid) == offset_at(lo))
                lo = mid;
            else
                hi = mid;
        }
        out[n++] = hi * NS;
    }
    return n;
}
