/*
 * balance.c - the live credit balance of an account (its grants and
 * account credit at an instant, as the next invoices will see them) and
 * the instant at which running usage exhausts that credit. Above the
 * invoices: it replays the months before as they do (invoice.c).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "invoice.h"
#include "zone.h"

/* ---------------------------------------------------------------------- */
/* Live balance                                                            */
/* ---------------------------------------------------------------------- */

/*
 * Apply credit, as invoices do, to every month up to the one containing
 * @now, with the charges rated so far. Clear @c even on error. The state
 * depends on @now's month alone: kept in the account's memo (bl_live_get),
 * so that the balance, the grants and the exhaustion of one request, and
 * the invoice of that month, compute the month once.
 */
static billing_status live_credit(billing_rater *r, size_t ai, billing_time_t now, bl_credit *c)
{
    const bl_account *a = BL_AT(r->cat->accounts, bl_account, ai);
    int32_t target;
    int year;
    int month;
    int kept;
    bl_month m;
    billing_status st;

    if (bl_credit_init(c, r->cat, ai) != 0)
        return BILLING_ERR_NOMEM;
    billing_zone_year_month(a->zone, now, &year, &month);
    target = bl_month_index(year, month);
    kept = bl_live_get(r, ai, target, c);
    if (kept != 0)
        return kept > 0 ? BILLING_OK : BILLING_ERR_NOMEM;
    /* The months before, as invoices see them: issued months take what the ledger holds
       (billing_rater_credit_issued), so the balance agrees with the next close after a late event. */
    st = bl_replay_months(r, ai, target, c);
    if (st != BILLING_OK)
        return st;
    bl_issued_later(bl_credit_memo_of(r, ai), target, c);
    if (bl_account_has_month(r, ai, target)) {
        st = bl_month_compute_amounts(r, ai, target, &m);
        if (st == BILLING_OK && bl_credit_apply(r->cat, ai, &m, c) != 0)
            st = BILLING_ERR_NOMEM;
        bl_month_release(r, &m);
    }
    if (st == BILLING_OK)
        bl_live_put(r, ai, target, c);
    return st;
}

static int grant_live(const bl_grant *g, billing_time_t now)
{
    return g->granted_at <= now && now < g->expires_at;
}

billing_status bl_credit_balance_q(billing_rater *r, size_t ai, billing_time_t now, mpq_t out)
{
    const bl_account *a = BL_AT(r->cat->accounts, bl_account, ai);
    bl_credit c;
    mpz_t sum;
    size_t i;
    billing_status st;

    st = live_credit(r, ai, now, &c);
    if (st != BILLING_OK) {
        bl_credit_clear(&c);
        return st;
    }
    mpz_init_set(sum, c.balance);
    for (i = 0; i < c.n; i++) {
        if (grant_live(BL_AT(r->cat->grants, bl_grant, a->grants[i]), now))
            mpz_add(sum, sum, c.remaining[i]);
    }
    bl_minor_to_q(out, sum, r->cat->digits);
    mpz_clear(sum);
    bl_credit_clear(&c);
    return BILLING_OK;
}

billing_status billing_rater_credit_grants(billing_rater *r, const char *account,
                                           billing_time_t now, billing_grant_fn fn, void *arg)
{
    size_t ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    const bl_account *a;
    const bl_grant *g;
    bl_credit c;
    char *text;
    size_t i;
    int stop = 0;
    billing_status st;

    if (r == NULL || fn == NULL)
        return BILLING_ERR_INVALID;
    if (ai == BL_NONE)
        return BILLING_ERR_UNKNOWN_ACCOUNT;
    a = BL_AT(r->cat->accounts, bl_account, ai);
    st = live_credit(r, ai, now, &c);
    for (i = 0; st == BILLING_OK && !stop && i < c.n; i++) {
        g = BL_AT(r->cat->grants, bl_grant, a->grants[i]);
        if (!grant_live(g, now))
            continue;
        text = bl_minor_to_string(c.remaining[i], r->cat->digits);
        if (text == NULL) {
            st = BILLING_ERR_NOMEM;
            break;
        }
        stop = fn(arg, g->id, text, g->expires_at);
        free(text);
    }
    bl_credit_clear(&c);
    return st;
}

billing_status billing_rater_credit_balance(billing_rater *r, const char *account,
                                            billing_time_t now, char *buf, size_t size)
{
    size_t ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    mpq_t total;
    char *text;
    billing_status st;

    if (ai == BL_NONE)
        return BILLING_ERR_UNKNOWN_ACCOUNT;
    mpq_init(total);
    st = bl_credit_balance_q(r, ai, now, total);
    if (st != BILLING_OK) {
        mpq_clear(total);
        return st;
    }
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

/*
 * What is left to burn while walking time forward: each grant's remainder
 * (exact, in major units) and the account balance, which pays anything
 * and never expires.
 */
typedef struct burn_state {
    size_t n;
    mpq_t *left;
    mpq_t balance;
} burn_state;

static int burn_init(burn_state *b, const billing_catalog *cat, const bl_credit *c)
{
    size_t i;

    b->n = c->n;
    b->left = malloc((c->n ? c->n : 1) * sizeof(mpq_t));
    if (b->left == NULL)
        return -1;
    for (i = 0; i < c->n; i++) {
        mpq_init(b->left[i]);
        bl_minor_to_q(b->left[i], c->remaining[i], cat->digits);
    }
    mpq_init(b->balance);
    bl_minor_to_q(b->balance, c->balance, cat->digits);
    return 0;
}

static void burn_clear(burn_state *b)
{
    size_t i;

    for (i = 0; i < b->n; i++)
        mpq_clear(b->left[i]);
    free(b->left);
    mpq_clear(b->balance);
}

static int pays_usage_at(const billing_catalog *cat, const bl_account *a, const burn_state *b,
                         size_t i, billing_time_t t)
{
    const bl_grant *g = BL_AT(cat->grants, bl_grant, a->grants[i]);

    return (g->kinds & BILLING_CHARGE_USAGE) && grant_live(g, t) && mpq_sgn(b->left[i]) > 0;
}

/* Usable credit at @t: grants for usage live at t, and the balance. */
static void usable(const billing_catalog *cat, const bl_account *a, const burn_state *b,
                   billing_time_t t, mpq_t out)
{
    size_t i;

    mpq_set(out, b->balance);
    for (i = 0; i < b->n; i++) {
        if (pays_usage_at(cat, a, b, i, t))
            mpq_add(out, out, b->left[i]);
    }
}

/* The usable grant that expires first (then in application order), or BL_NONE. */
static size_t first_to_expire(const billing_catalog *cat, const bl_account *a, const burn_state *b,
                              billing_time_t t)
{
    size_t best = BL_NONE;
    size_t i;

    for (i = 0; i < b->n; i++) {
        if (!pays_usage_at(cat, a, b, i, t))
            continue;
        if (best == BL_NONE || BL_AT(cat->grants, bl_grant, a->grants[i])->expires_at <
                                   BL_AT(cat->grants, bl_grant, a->grants[best])->expires_at)
            best = i;
    }
    return best;
}

/*
 * Spend @amount at @t: the grant that expires first goes first, so that
 * as little as possible expires unused (the most credit invoices can
 * apply to the same usage), then the balance.
 */
static void spend(const billing_catalog *cat, const bl_account *a, burn_state *b, billing_time_t t,
                  mpq_t amount)
{
    mpq_t *from;
    size_t i;

    while (mpq_sgn(amount) > 0) {
        i = first_to_expire(cat, a, b, t);
        from = i != BL_NONE ? &b->left[i] : &b->balance;
        if (mpq_cmp(*from, amount) <= 0) {
            mpq_sub(amount, amount, *from);
            mpq_set_ui(*from, 0, 1);
        } else {
            mpq_sub(*from, *from, amount);
            mpq_set_ui(amount, 0, 1);
        }
        if (i == BL_NONE)
            break;
    }
}

/* The next instant after @t at which the burn or the usable credit changes. */
static billing_time_t next_change(const billing_catalog *cat, const bl_account *a, billing_time_t t)
{
    billing_time_t next = bl_zone_next_month_start(a->zone, t);
    const bl_grant *g;
    size_t i;

    for (i = 0; i < a->n_grants; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        if (g->expires_at > t && g->expires_at < next)
            next = g->expires_at;
        if (g->granted_at > t && g->granted_at < next)
            next = g->granted_at;
    }
    return next;
}

billing_status billing_rater_credit_exhaustion(billing_rater *r, const char *account,
                                               billing_time_t now,
                                               const billing_event *const *events, size_t n_events,
                                               billing_time_t *out, char *errbuf, size_t errsize)
{
    size_t ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    const bl_account *a;
    size_t version;
    bl_credit c;
    burn_state b;
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
    if (st == BILLING_OK && burn_init(&b, r->cat, &c) != 0)
        st = BILLING_ERR_NOMEM;
    bl_credit_clear(&c);
    if (st != BILLING_OK)
        return bl_seterr(errbuf, errsize, st, "out of memory");
    mpq_init(burn);
    mpq_init(avail);
    mpq_init(span);
    mpz_init(z);
    *out = INT64_MAX;
    /* Piecewise-constant burn between month starts and grant expiries; bounded walk. */
    for (steps = 0; steps < 10000; steps++) {
        usable(r->cat, a, &b, t, avail);
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
        spend(r->cat, a, &b, t, span);
        t = next;
        if (t >= BL_TIME_MAX)
            break;
    }
    burn_clear(&b);
    mpq_clear(burn);
    mpq_clear(avail);
    mpq_clear(span);
    mpz_clear(z);
    return st;
}
