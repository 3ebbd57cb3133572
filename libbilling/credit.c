/*
 * credit.c - spending credit grants: on invoices (minor units, rounded
 * down, never beyond the subtotal) and live (exact), plus the instant at
 * which running usage exhausts the credit.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "invoice.h"
#include "zone.h"

int bl_credit_init(bl_credit *c, const billing_catalog *cat, size_t ai, int exact)
{
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    const bl_grant *g;
    size_t i;

    memset(c, 0, sizeof(*c));
    c->exact = exact;
    c->remaining = malloc((a->n_grants ? a->n_grants : 1) * sizeof(mpq_t));
    c->applied = malloc((a->n_grants ? a->n_grants : 1) * sizeof(mpz_t));
    if (c->remaining == NULL || c->applied == NULL) {
        free(c->remaining);
        free(c->applied);
        return -1;
    }
    c->n = a->n_grants;
    for (i = 0; i < c->n; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        mpq_init(c->remaining[i]);
        bl_minor_to_q(c->remaining[i], g->amount_minor, cat->digits);
        mpz_init(c->applied[i]);
    }
    return 0;
}

void bl_credit_clear(bl_credit *c)
{
    size_t i;

    for (i = 0; i < c->n; i++) {
        mpq_clear(c->remaining[i]);
        mpz_clear(c->applied[i]);
    }
    free(c->remaining);
    free(c->applied);
    memset(c, 0, sizeof(*c));
}

/* Position of @t among the account's sorted epoch bounds. */
static size_t bound_index(const bl_account *a, billing_time_t t)
{
    /* Bounds < t are bounds <= t - 1: instants are integers within 1900..2200. */
    return bl_upper_bound(a->epochs, a->n_epochs, t - 1);
}

/* Take up to @limit from the pools of epochs [first, last] of the grant's kinds. */
static void take_from_pools(bl_month *m, size_t first, size_t last, unsigned kinds,
                            const mpq_t limit, mpq_t taken)
{
    static const billing_charge_kind order[2] = {BILLING_CHARGE_USAGE, BILLING_CHARGE_SUBSCRIPTION};
    mpq_t room;
    mpq_t *p;
    size_t e;
    int k;

    mpq_init(room);
    mpq_set_ui(taken, 0, 1);
    for (e = first; e <= last && e < m->n_pools; e++) {
        for (k = 0; k < 2; k++) {
            if (!(kinds & (unsigned)order[k]))
                continue;
            p = &m->pools[e * 2 + (size_t)k];
            mpq_sub(room, limit, taken);
            if (mpq_sgn(room) <= 0)
                goto done;
            if (mpq_cmp(*p, room) <= 0) {
                mpq_add(taken, taken, *p);
                mpq_set_ui(*p, 0, 1);
            } else {
                mpq_add(taken, taken, room);
                mpq_sub(*p, *p, room);
            }
        }
    }
done:
    mpq_clear(room);
}

void bl_credit_apply(const billing_catalog *cat, size_t ai, bl_month *m, bl_credit *c)
{
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    const bl_grant *g;
    mpq_t taken;
    mpq_t q;
    mpz_t cap;
    size_t i;

    mpq_init(taken);
    mpq_init(q);
    mpz_init(cap);
    /* Invoices never apply more credit than the subtotal: no negative total. */
    if (mpz_sgn(m->subtotal) > 0)
        mpz_set(cap, m->subtotal);
    for (i = 0; i < c->n; i++) {
        mpz_set_ui(c->applied[i], 0);
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if (mpq_sgn(c->remaining[i]) <= 0)
            continue;
        /* Epoch e covers [epochs[e-1], epochs[e]); inside the window: e in (gi, xi]. */
        take_from_pools(m, bound_index(a, g->granted_at) + 1, bound_index(a, g->expires_at),
                        g->kinds, c->remaining[i], taken);
        if (c->exact) {
            mpq_sub(c->remaining[i], c->remaining[i], taken);
            continue;
        }
        bl_q_round_minor(c->applied[i], taken, cat->digits, BILLING_ROUND_FLOOR);
        if (mpz_cmp(c->applied[i], cap) > 0)
            mpz_set(c->applied[i], cap);
        mpz_sub(cap, cap, c->applied[i]);
        bl_minor_to_q(q, c->applied[i], cat->digits);
        mpq_sub(c->remaining[i], c->remaining[i], q);
    }
    mpq_clear(taken);
    mpq_clear(q);
    mpz_clear(cap);
}

/* ---------------------------------------------------------------------- */
/* Live balance                                                            */
/* ---------------------------------------------------------------------- */

/* Run exact credit over every month up to the one containing @now. */
static billing_status live_credit(billing_rater *r, size_t ai, billing_time_t now, bl_credit *c)
{
    const bl_account *a = BL_AT(r->cat->accounts, bl_account, ai);
    int32_t *months;
    size_t n;
    size_t i;
    int year;
    int month;
    bl_month m;
    billing_status st = BILLING_OK;

    if (bl_credit_init(c, r->cat, ai, 1) != 0)
        return BILLING_ERR_NOMEM;
    months = bl_account_months(r, ai, &n);
    if (months == NULL && n != 0)
        return BILLING_ERR_NOMEM;
    billing_zone_year_month(a->zone, now, &year, &month);
    for (i = 0; i < n && months[i] <= bl_month_index(year, month); i++) {
        st = bl_month_compute(r, ai, months[i], &m);
        if (st == BILLING_OK)
            bl_credit_apply(r->cat, ai, &m, c);
        bl_month_clear(&m);
        if (st != BILLING_OK)
            break;
    }
    free(months);
    return st;
}

static int grant_live(const bl_grant *g, billing_time_t now)
{
    return g->granted_at <= now && now < g->expires_at;
}

billing_status billing_rater_credit_balance(billing_rater *r, const char *account,
                                            billing_time_t now, char *buf, size_t size)
{
    size_t ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    const bl_account *a;
    bl_credit c;
    mpq_t total;
    char *text;
    size_t i;
    billing_status st;

    if (ai == BL_NONE)
        return BILLING_ERR_UNKNOWN_ACCOUNT;
    a = BL_AT(r->cat->accounts, bl_account, ai);
    st = live_credit(r, ai, now, &c);
    if (st != BILLING_OK) {
        bl_credit_clear(&c);
        return st;
    }
    mpq_init(total);
    for (i = 0; i < c.n; i++) {
        if (grant_live(BL_AT(r->cat->grants, bl_grant, a->grants[i]), now))
            mpq_add(total, total, c.remaining[i]);
    }
    bl_credit_clear(&c);
    text = bl_q_to_string(total);
    mpq_clear(total);
    if (text == NULL)
        return BILLING_ERR_NOMEM;
    st = strlen(text) < size ? BILLING_OK : BILLING_ERR_TOO_LARGE;
    if (st == BILLING_OK)
        memcpy(buf, text, strlen(text) + 1);
    free(text);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Exhaustion                                                              */
/* ---------------------------------------------------------------------- */

/*
 * Burn of the running usage per nanosecond at instant @t (storage depends
 * on the length of the local month containing @t).
 */
static billing_status burn_rate(billing_rater *r, const bl_account *a, size_t version,
                                const billing_event *const *events, size_t n, billing_time_t t,
                                mpq_t out, char *errbuf, size_t errsize)
{
    const billing_event *ev;
    size_t i;
    size_t rate;
    mpq_t term;
    mpz_t z;
    billing_time_t ms;
    billing_time_t me;
    int year;
    int month;

    mpq_set_ui(out, 0, 1);
    mpq_init(term);
    mpz_init(z);
    billing_zone_year_month(a->zone, t, &year, &month);
    billing_zone_month_start(a->zone, year, month, &ms);
    me = bl_zone_next_month_start(a->zone, t);
    for (i = 0; i < n; i++) {
        ev = events[i];
        if (ev->meter == BILLING_METER_TRAFFIC)
            continue;
        rate = bl_catalog_rate(r->cat, version, ev->meter, ev->model, ev->region);
        if (rate == BL_NONE) {
            mpq_clear(term);
            mpz_clear(z);
            return bl_seterr(errbuf, errsize, BILLING_ERR_NO_PRICE,
                             "event '%s': no %s price for model '%s' in region '%s'", ev->id,
                             billing_meter_name(ev->meter), ev->model, ev->region);
        }
        bl_mpz_set_i128(z, ev->qty);
        mpq_set_z(term, z);
        mpq_mul(term, term, BL_AT(r->cat->rates, bl_rate, rate)->price);
        /* price x qty per unit-hour (or unit-month) -> per nanosecond */
        if (ev->meter == BILLING_METER_STORAGE)
            mpz_set_si(z, me - ms);
        else
            mpz_set_si(z, INT64_C(3600) * BILLING_NS_PER_SEC);
        mpz_mul_ui(z, z, (unsigned long)BL_QTY_SCALE);
        mpz_mul(mpq_denref(term), mpq_denref(term), z);
        mpq_canonicalize(term);
        mpq_add(out, out, term);
    }
    mpq_clear(term);
    mpz_clear(z);
    return BILLING_OK;
}

/* Usable credit at @t: grants for usage, live at t, in application order. */
static void usable(const billing_catalog *cat, const bl_account *a, const bl_credit *c,
                   billing_time_t t, mpq_t out)
{
    const bl_grant *g;
    size_t i;

    mpq_set_ui(out, 0, 1);
    for (i = 0; i < c->n; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if ((g->kinds & BILLING_CHARGE_USAGE) && grant_live(g, t) && mpq_sgn(c->remaining[i]) > 0)
            mpq_add(out, out, c->remaining[i]);
    }
}

/* Spend @amount from the usable grants in application order. */
static void spend(const billing_catalog *cat, const bl_account *a, bl_credit *c, billing_time_t t,
                  mpq_t amount)
{
    const bl_grant *g;
    size_t i;

    for (i = 0; i < c->n && mpq_sgn(amount) > 0; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if (!(g->kinds & BILLING_CHARGE_USAGE) || !grant_live(g, t) ||
            mpq_sgn(c->remaining[i]) <= 0)
            continue;
        if (mpq_cmp(c->remaining[i], amount) <= 0) {
            mpq_sub(amount, amount, c->remaining[i]);
            mpq_set_ui(c->remaining[i], 0, 1);
        } else {
            mpq_sub(c->remaining[i], c->remaining[i], amount);
            mpq_set_ui(amount, 0, 1);
        }
    }
}

/* The next instant after @t at which the burn or the usable credit changes. */
static billing_time_t next_change(const billing_catalog *cat, const bl_account *a,
                                  billing_time_t t)
{
    billing_time_t next = bl_zone_next_month_start(a->zone, t);
    const bl_grant *g;
    size_t i;

    for (i = 0; i < a->n_grants; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if (g->expires_at > t && g->expires_at < next)
            next = g->expires_at;
    }
    return next;
}

billing_status billing_rater_credit_exhaustion(billing_rater *r, const char *account,
                                               billing_time_t now,
                                               const billing_event *const *events,
                                               size_t n_events, billing_time_t *out, char *errbuf,
                                               size_t errsize)
{
    size_t ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    const bl_account *a;
    size_t version;
    bl_credit c;
    mpq_t burn;
    mpq_t avail;
    mpq_t span;
    mpz_t z;
    billing_time_t t = now;
    billing_time_t next;
    billing_status st;
    int steps;

    if (ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_UNKNOWN_ACCOUNT, "account '%.140s' not found",
                         account ? account : "(null)");
    a = BL_AT(r->cat->accounts, bl_account, ai);
    version = bl_catalog_version_at(r->cat, now);
    if (version == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NO_PRICE, "no price version at that instant");
    st = live_credit(r, ai, now, &c);
    if (st != BILLING_OK) {
        bl_credit_clear(&c);
        return bl_seterr(errbuf, errsize, st, "out of memory");
    }
    mpq_init(burn);
    mpq_init(avail);
    mpq_init(span);
    mpz_init(z);
    *out = INT64_MAX;
    /* Piecewise-constant burn between month starts and grant expiries; bounded walk. */
    for (steps = 0; steps < 10000; steps++) {
        usable(r->cat, a, &c, t, avail);
        if (mpq_sgn(avail) <= 0) {
            *out = t;
            break;
        }
        st = burn_rate(r, a, version, events, n_events, t, burn, errbuf, errsize);
        if (st != BILLING_OK || mpq_sgn(burn) == 0)
            break;
        next = next_change(r->cat, a, t);
        mpq_div(span, avail, burn); /* ns until the usable credit is gone */
        mpz_fdiv_q(z, mpq_numref(span), mpq_denref(span));
        if (mpz_cmp_si(z, next - t) < 0) {
            *out = t + mpz_get_si(z);
            break;
        }
        mpz_set_si(mpq_numref(span), next - t);
        mpz_set_ui(mpq_denref(span), 1);
        mpq_mul(span, span, burn);
        spend(r->cat, a, &c, t, span);
        t = next;
        if (t >= BL_TIME_MAX)
            break;
    }
    bl_credit_clear(&c);
    mpq_clear(burn);
    mpq_clear(avail);
    mpq_clear(span);
    mpz_clear(z);
    return st;
}
