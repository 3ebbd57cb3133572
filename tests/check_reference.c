/*
 * check_reference.c - libbilling against the reference rater
 * (refrater.c): random catalogs and shuffled event streams, every
 * billing_rater_add status, every account's list of months, every
 * invoice from 2023-06 to 2029-12 line by line, the live credit balance
 * at every grant bound, a nanosecond either side, and elsewhere, and the
 * instant running resources exhaust the credit.
 *
 * The generator aims at what breaks bills: 2024-2027 in zones with both
 * DST directions (America/New_York, Europe/Berlin, Australia/Sydney) and
 * none (Asia/Shanghai), the leap day, year ends, 30-day months, events
 * starting at or a nanosecond around month starts, DST transitions,
 * price-version starts, term bounds and grant bounds; monthly terms
 * anchored on the 29th-31st or in a DST gap; cancellations inside a term
 * and exactly at a term boundary; duplicates and conflicting repeats in a
 * shuffled stream; quantities from 1e-9 to the largest allowed (1e18,
 * whose products spill out of 128 bits); CNY, JPY and KWD with every
 * rounding mode.
 *
 * Switches for rules that other branches are changing (GEN_*) stay off
 * until the reference's ref_rule_* functions follow them.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refrater.h"
#include "testrng.h"
#include "testutil.h"

/* Branch `fees`: a cancellation at or before the start means no term. */
#define GEN_CANCEL_AT_OR_BEFORE_START 1
/* Branch `fees`: a version without the fee of a plan refuses its terms. */
#define GEN_TERMS_WITHOUT_FEE 1

#define SEEDS 48
/* Under valgrind (20-50 times slower) a few seeds check memory; the rules are checked above. */
#define SEEDS_VALGRIND 3
#define N_BASE_EVENTS 160
/*
 * Dense streams: many short records of few keys around a few instants
 * (the rater's memo and interning paths, with boundaries in between).
 */
#define DENSE_SEEDS 16
#define DENSE_SEEDS_VALGRIND 2
#define N_DENSE_EVENTS 1024
#define N_HOT 3
#define N_EVENTS (N_DENSE_EVENTS * 2 + REF_MAX_SUBS)
#define FIRST_MONTH (2023 * 12 + 5)
#define LAST_MONTH (2029 * 12 + 11)
#define N_MONTHS (LAST_MONTH - FIRST_MONTH + 1)
#define N_POINTS 512

#define NS BILLING_NS_PER_SEC
#define HOUR (INT64_C(3600) * NS)
#define DAY (24 * HOUR)

static const char *const zones[] = {"America/New_York", "Europe/Berlin", "Australia/Sydney",
                                    "Asia/Shanghai"};
#define N_ZONES 4

/* From ISO 4217 (the test's own copy, not libbilling's table). */
static const struct {
    const char *code;
    int digits;
} currencies[] = {{"CNY", 2}, {"JPY", 0}, {"KWD", 3}};

static uint64_t rng;
/* Non-zero while a dense stream is generated; its instants. */
static int dense;
static billing_time_t hot[N_HOT];

static uint64_t rnd(void)
{
    return test_rnd(&rng);
}

static int pick(int n)
{
    return (int)(rnd() % (uint64_t)n);
}

static int64_t pick64(int64_t n)
{
    return (int64_t)(rnd() % (uint64_t)n);
}

/* Instants worth hitting exactly, and a nanosecond or a second around. */
typedef struct points {
    billing_time_t v[N_POINTS];
    int n;
} points;

static void point(points *p, billing_time_t t)
{
    if (p->n < N_POINTS)
        p->v[p->n++] = t;
}

static billing_time_t year_start(int y)
{
    return ref_local_to_utc("UTC", y, 1, 1, 0, 0, 0);
}

/* A random decimal below @whole with up to @frac fractional digits. */
static void decimal(char *out, size_t size, int whole, int frac)
{
    int f = pick(frac + 1);
    int i;
    size_t n;

    n = (size_t)snprintf(out, size, "%d", pick(whole));
    if (f == 0)
        return;
    out[n++] = '.';
    for (i = 0; i < f; i++)
        out[n++] = (char)('0' + pick(10));
    out[n] = '\0';
}

/* ---------------------------------------------------------------------- */
/* Catalog                                                                 */
/* ---------------------------------------------------------------------- */

static void add_rate(ref_spec *s, int v, billing_meter m, const char *model, const char *region)
{
    ref_rate *r = &s->rates[s->n_rates++];

    r->version = v;
    r->meter = m;
    snprintf(r->model, sizeof(r->model), "%s", model);
    snprintf(r->region, sizeof(r->region), "%s", region);
    decimal(r->price, sizeof(r->price), pick(4) == 0 ? 100 : 5, 6);
}

static void gen_versions(ref_spec *s, points *pts)
{
    int i;
    int v;

    s->n_versions = 2 + pick(3);
    for (v = 0; v < s->n_versions; v++) {
        snprintf(s->versions[v].id, REF_ID, "v%d", v + 1);
        /* v1 covers everything; the others start anywhere in 2024-2027. */
        s->versions[v].from =
            v == 0 ? year_start(2023) : year_start(2024) + pick64(4 * 365 * DAY) + pick64(NS);
        point(pts, s->versions[v].from);
        add_rate(s, v, BILLING_METER_GPU, "RTX4090", "cn-east-1");
        add_rate(s, v, BILLING_METER_GPU, "A100-80G", "*");
        if (pick(2))
            add_rate(s, v, BILLING_METER_GPU, "*", "us-west");
        add_rate(s, v, BILLING_METER_GPULESS, "*", "*");
        if (pick(2))
            add_rate(s, v, BILLING_METER_GPULESS, "RTX4090", "*");
        add_rate(s, v, BILLING_METER_STORAGE, "*", "*");
        if (pick(2))
            add_rate(s, v, BILLING_METER_TRAFFIC, "*", "*");
        for (i = 0; i < s->n_plans; i++) {
            if (GEN_TERMS_WITHOUT_FEE && pick(8) == 0)
                continue;
            s->fees[s->n_fees].version = v;
            s->fees[s->n_fees].plan = i;
            decimal(s->fees[s->n_fees].fee, REF_DEC, 3000, 2);
            s->n_fees++;
        }
    }
}

static void gen_plans(ref_spec *s)
{
    static const struct {
        const char *id;
        billing_period period;
        const char *model;
        int refundable;
    } plans[] = {{"day", BILLING_PERIOD_DAY, "RTX4090", 0},
                 {"day-r", BILLING_PERIOD_DAY, "RTX4090", 1},
                 {"month-r", BILLING_PERIOD_MONTH, "RTX4090", 1},
                 {"month", BILLING_PERIOD_MONTH, "A100-80G", 0}};
    int i;

    s->n_plans = 4;
    for (i = 0; i < s->n_plans; i++) {
        snprintf(s->plans[i].id, REF_ID, "%s", plans[i].id);
        s->plans[i].period = plans[i].period;
        snprintf(s->plans[i].model, REF_ID, "%s", plans[i].model);
        snprintf(s->plans[i].region, REF_ID, "%s", "cn-east-1");
        s->plans[i].refundable = plans[i].refundable;
    }
}

/* A start on a month-end anchor, in a DST gap or repeat, or anywhere. */
static billing_time_t sub_start(const char *zone, const points *trans)
{
    static const int days[] = {28, 29, 30, 31, 1, 15};
    int y = 2024 + pick(4);
    int mo = 1 + pick(12);
    int d = days[pick(6)];
    int h = pick(24);
    int dim = mo == 2                                       ? (y % 4 == 0 ? 29 : 28)
              : (mo == 4 || mo == 6 || mo == 9 || mo == 11) ? 30
                                                            : 31;
    billing_time_t t;

    if (trans->n > 0 && pick(3) == 0) {
        /* Months before a transition, at its local hour: later terms end in the gap or repeat. */
        t = trans->v[pick(trans->n)] + (pick(2) ? 1 : -1) * pick64(2 * HOUR);
        ref_utc_to_local(zone, t, &y, &mo, &d, &h);
        mo -= 1 + pick(3);
        if (mo < 1) {
            mo += 12;
            y--;
        }
        dim = 28;
        if (d > dim)
            d = dim;
        return ref_local_to_utc(zone, y, mo, d, h, pick(2) * 30, 0);
    }
    if (pick(4) == 0)
        return ref_local_to_utc(zone, y, mo, 1, 0, 0, 0); /* terms start at month starts */
    if (d > dim)
        d = dim;
    return ref_local_to_utc(zone, y, mo, d, h, pick(60), pick(60)) + (pick(4) ? 0 : pick64(NS));
}

static void gen_subs(ref_spec *s, int account, const points *trans)
{
    int n = pick(4);
    int i;
    ref_sub *sub;
    char res[8];

    for (i = 0; i < n; i++) {
        snprintf(res, sizeof(res), "r%d", i < 2 ? i : pick(2));
        sub = &s->subs[s->n_subs++];
        snprintf(sub->id, REF_ID, "s%d-%d", account, i);
        sub->account = account;
        snprintf(sub->resource, REF_ID, "%s", res);
        sub->plan = pick(s->n_plans);
        sub->terms = s->plans[sub->plan].period == BILLING_PERIOD_DAY ? 1 + pick(40) : 1 + pick(14);
        sub->start = sub_start(s->accounts[account].zone, trans);
        sub->cancelled = 0;
        if (i == 2) {
            /* A second subscription of r0 or r1, after the first surely ended. */
            sub->start =
                s->subs[s->n_subs - 3 + (res[1] - '0')].start + 32 * 14 * DAY + pick64(60 * DAY);
        }
    }
}

/* Cancel about half the subscriptions: inside a term, or exactly at a term boundary. */
static void gen_cancellations(ref_spec *s, points *pts)
{
    ref_rater *r = ref_new(s);
    ref_sub *sub;
    billing_time_t first;
    billing_time_t last;
    int i;
    int k;

    for (i = 0; i < s->n_subs; i++) {
        sub = &s->subs[i];
        first = ref_sub_bound(r, i, 0);
        last = ref_sub_bound(r, i, sub->terms);
        point(pts, first);
        point(pts, last);
        point(pts, ref_sub_bound(r, i, pick(sub->terms)));
        if (pick(2))
            continue;
        k = 1 + pick(sub->terms);
        if (k < sub->terms && pick(3) == 0)
            sub->cancelled = ref_sub_bound(r, i, k);
        else if (GEN_CANCEL_AT_OR_BEFORE_START && pick(4) == 0)
            sub->cancelled = first - pick64(DAY);
        else
            sub->cancelled = first + 1 + pick64(last - first - 1);
        point(pts, sub->cancelled);
    }
    ref_destroy(r);
}

static void gen_grants(ref_spec *s, int account, points *pts)
{
    int n = pick(4);
    int i;
    ref_grant *g;
    char units[16];

    for (i = 0; i < n; i++) {
        g = &s->grants[s->n_grants++];
        snprintf(g->id, REF_ID, "g%d-%d", account, i);
        g->account = account;
        /* Whole units, then exactly the currency's minor digits. */
        snprintf(g->amount, REF_DEC, "%d", 1 + pick(pick(2) ? 50 : 5000));
        if (s->digits == 2)
            snprintf(units, sizeof(units), ".%02d", pick(100));
        else if (s->digits == 3)
            snprintf(units, sizeof(units), ".%03d", pick(1000));
        else
            units[0] = '\0';
        strcat(g->amount, units);
        g->granted =
            pts->n > 0 && pick(2) ? pts->v[pick(pts->n)] : year_start(2024) + pick64(4 * 365 * DAY);
        g->expires = g->granted + 1 + pick64(pick(2) ? 40 * DAY : 400 * DAY);
        g->kinds = 1 + (unsigned)pick(3);
        g->priority = pick(3);
        point(pts, g->granted);
        point(pts, g->expires);
    }
}

/*
 * For about half the cancelled refundable subscriptions, a grant that may
 * pay fees and usage over the whole subscription: a refund then meets
 * credit in its month (gen_stream adds usage there).
 */
static void gen_refund_credit(ref_spec *s)
{
    const ref_sub *sub;
    ref_grant *g;
    int i;

    for (i = 0; i < s->n_subs && s->n_grants < REF_MAX_GRANTS; i++) {
        sub = &s->subs[i];
        if (sub->cancelled == 0 || !s->plans[sub->plan].refundable || pick(2))
            continue;
        g = &s->grants[s->n_grants++];
        snprintf(g->id, REF_ID, "gr-%d", i);
        g->account = sub->account;
        /* Enough to pay every fee, so that some is left when the refund comes. */
        snprintf(g->amount, REF_DEC, "%d", 1 + pick(100000));
        g->granted = sub->start - pick64(DAY);
        g->expires = sub->cancelled + 1 + pick64(40 * DAY);
        g->kinds = BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION;
        g->priority = pick(3);
    }
}

static void gen_catalog(ref_spec *s, points *pts, points *trans)
{
    int c = pick(3);
    int a;
    static const char *const taxes[] = {"0", "0.06", "0.2", "0.125", "0.0725"};

    memset(s, 0, sizeof(*s));
    snprintf(s->currency, sizeof(s->currency), "%s", currencies[c].code);
    s->digits = currencies[c].digits;
    s->rounding = (billing_rounding)pick(6);
    gen_plans(s);
    gen_versions(s, pts);
    s->n_accounts = N_ZONES;
    for (a = 0; a < s->n_accounts; a++) {
        snprintf(s->accounts[a].id, REF_ID, "acct-%d", a);
        snprintf(s->accounts[a].zone, REF_ID, "%s", zones[a]);
        snprintf(s->accounts[a].tax, REF_DEC, "%s", taxes[pick(5)]);
        trans->n += ref_zone_transitions(zones[a], year_start(2024), year_start(2028),
                                         trans->v + trans->n, N_POINTS / 2 - trans->n);
    }
    for (a = 0; a < s->n_accounts; a++) {
        gen_subs(s, a, trans);
        gen_grants(s, a, pts);
    }
    gen_cancellations(s, pts);
    gen_refund_credit(s);
}

/* The interesting instants of the calendar: month starts, leap day, year ends. */
static void calendar_points(const ref_spec *s, points *pts, const points *trans)
{
    int a;
    int y;
    int i;

    for (i = 0; i < trans->n; i++)
        point(pts, trans->v[i]);
    for (a = 0; a < s->n_accounts; a++) {
        for (y = 2024; y <= 2027; y++) {
            point(pts, ref_local_to_utc(s->accounts[a].zone, y, 1, 1, 0, 0, 0));
            point(pts, ref_local_to_utc(s->accounts[a].zone, y, 3, 1, 0, 0, 0));
            point(pts, ref_local_to_utc(s->accounts[a].zone, y, 1 + pick(12), 1, 0, 0, 0));
        }
        point(pts, ref_local_to_utc(s->accounts[a].zone, 2024, 2, 29, 0, 0, 0));
        point(pts, ref_local_to_utc(s->accounts[a].zone, 2024, 2, 29, 12, 0, 0));
        point(pts, ref_local_to_utc(s->accounts[a].zone, 2028, 1, 1, 0, 0, 0));
    }
}

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

static void gen_quantity(char *out, billing_meter m)
{
    switch (pick(24)) {
    case 0:
        snprintf(out, REF_DEC, "%s", "1000000000000000000"); /* the largest allowed */
        return;
    case 1:
        snprintf(out, REF_DEC, "%s", "999999999999999999.999999999");
        return;
    case 2:
        snprintf(out, REF_DEC, "%s", "0.000000001");
        return;
    case 3:
        snprintf(out, REF_DEC, "%s", "0");
        return;
    default:
        break;
    }
    if (m == BILLING_METER_GPU)
        snprintf(out, REF_DEC, "%d", 1 + pick(8));
    else if (m == BILLING_METER_GPULESS)
        snprintf(out, REF_DEC, "%d", 1 + pick(2));
    else if (m == BILLING_METER_STORAGE)
        decimal(out, REF_DEC, 20000, 9);
    else
        snprintf(out, REF_DEC, "%" PRId64, pick64(INT64_C(2000000000000)));
}

static billing_time_t gen_duration(void)
{
    switch (pick(5)) {
    case 0:
        return 1 + pick64(1000);
    case 1:
        return 1 + pick64(3600 * NS);
    case 2:
        return 1 + pick64(48 * HOUR);
    default:
        return 1 + pick64(45 * DAY);
    }
}

/*
 * Make @ev one of a dense stream: a one-minute record (or up to two hours)
 * within two hours of a hot instant, on two models and one region, so
 * that most events repeat an earlier key in the same month, version and
 * epoch, and some start, end or cross exactly at a boundary.
 */
static void gen_dense(ref_event *ev)
{
    static const char *const models[] = {"RTX4090", "A100-80G"};

    ev->start = hot[pick(N_HOT)];
    if (pick(4) != 0)
        ev->start += (pick64(240) - 120) * 60 * NS;
    ev->end = ev->start + (pick(4) != 0 ? 60 * NS : 1 + pick64(2 * HOUR));
    if (pick(8) == 0)
        ev->start -= 60 * NS; /* ends exactly at the hot instant, or crosses it */
    snprintf(ev->model, REF_ID, "%s", models[pick(2)]);
    snprintf(ev->region, REF_ID, "%s", "cn-east-1");
}

static void gen_event(ref_event *ev, int i, const points *pts)
{
    static const char *const models[] = {"RTX4090", "A100-80G", "H100", ""};
    static const char *const regions[] = {"cn-east-1", "us-west", ""};
    static const billing_time_t nudges[] = {0, 0, 1, -1, NS, -NS, HOUR, -HOUR};

    memset(ev, 0, sizeof(*ev));
    snprintf(ev->id, REF_ID, "e%d", i);
    if (pick(50) == 0)
        snprintf(ev->account, REF_ID, "%s", "ghost");
    else
        snprintf(ev->account, REF_ID, "acct-%d", pick(N_ZONES));
    snprintf(ev->resource, REF_ID, "r%d", pick(3));
    ev->meter = (billing_meter)pick(BILLING_METER_COUNT);
    if (pick(3))
        ev->start = pts->v[pick(pts->n)] + nudges[pick(8)] - (pick(2) ? gen_duration() / 2 : 0);
    else
        ev->start = year_start(2024) + pick64(4 * 365 * DAY);
    ev->end = ev->start + gen_duration();
    gen_quantity(ev->qty, ev->meter);
    snprintf(ev->model, REF_ID, "%s", models[pick(4)]);
    snprintf(ev->region, REF_ID, "%s", regions[pick(3)]);
    if (dense)
        gen_dense(ev);
}

/* An hour of an unsubscribed instance either side of each cancellation. */
static int gen_cancel_usage(const ref_spec *s, ref_event *evs)
{
    const ref_sub *sub;
    ref_event *ev;
    int n = 0;
    int i;

    for (i = 0; i < s->n_subs; i++) {
        sub = &s->subs[i];
        if (sub->cancelled == 0)
            continue;
        ev = &evs[n++];
        memset(ev, 0, sizeof(*ev));
        snprintf(ev->id, REF_ID, "c%d", i);
        snprintf(ev->account, REF_ID, "%s", s->accounts[sub->account].id);
        snprintf(ev->resource, REF_ID, "%s", "r-usage");
        ev->meter = BILLING_METER_GPULESS;
        ev->start = sub->cancelled - HOUR;
        ev->end = sub->cancelled + HOUR;
        snprintf(ev->qty, REF_DEC, "%d", 1 + pick(3));
    }
    return n;
}

/* Base events, usage at cancellations, exact and conflicting repeats, shuffled. */
static int gen_stream(const ref_spec *s, ref_event *evs, const points *pts)
{
    int base = dense ? N_DENSE_EVENTS : N_BASE_EVENTS;
    int n = base;
    int i;
    int j;
    ref_event t;

    for (i = 0; i < N_HOT; i++)
        hot[i] = pts->v[pick(pts->n)];
    for (i = 0; i < base; i++)
        gen_event(&evs[i], i, pts);
    n += gen_cancel_usage(s, evs + n);
    for (i = 0; i < base / 8; i++) {
        evs[n] = evs[pick(base)];
        if (pick(3) == 0)
            evs[n].end += NS; /* same id, other content: a conflict */
        n++;
    }
    for (i = n - 1; i > 0; i--) {
        j = pick(i + 1);
        t = evs[i];
        evs[i] = evs[j];
        evs[j] = t;
    }
    return n;
}

/* ---------------------------------------------------------------------- */
/* libbilling from the same spec                                           */
/* ---------------------------------------------------------------------- */

#define OK(call) ck_assert_msg((call) == BILLING_OK, "%s", err)

static void lib_prices(billing_catalog *cat, const ref_spec *s)
{
    char err[256];
    int i;
    int order[REF_MAX_VERSIONS];
    int j;
    int t;

    /* Versions in any order: the library sorts them. */
    for (i = 0; i < s->n_versions; i++)
        order[i] = i;
    for (i = s->n_versions - 1; i > 0; i--) {
        j = pick(i + 1);
        t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (i = 0; i < s->n_versions; i++)
        OK(billing_catalog_add_price_version(cat, s->versions[order[i]].id,
                                             s->versions[order[i]].from, err, sizeof(err)));
    for (i = 0; i < s->n_rates; i++)
        OK(billing_catalog_set_rate(cat, s->versions[s->rates[i].version].id, s->rates[i].meter,
                                    s->rates[i].model, s->rates[i].region, s->rates[i].price, err,
                                    sizeof(err)));
    for (i = 0; i < s->n_plans; i++)
        OK(billing_catalog_add_plan(cat, s->plans[i].id, s->plans[i].period, s->plans[i].model,
                                    s->plans[i].region, s->plans[i].refundable, err, sizeof(err)));
    for (i = 0; i < s->n_fees; i++)
        OK(billing_catalog_set_plan_fee(cat, s->versions[s->fees[i].version].id,
                                        s->plans[s->fees[i].plan].id, s->fees[i].fee, err,
                                        sizeof(err)));
}

static billing_catalog *lib_catalog(const ref_spec *s, const ref_rater *ref, billing_zone **bz)
{
    billing_catalog *cat = billing_catalog_new();
    char err[256];
    billing_status st;
    int i;
    const ref_sub *sub;
    const ref_grant *g;

    OK(billing_catalog_set_currency(cat, s->currency, s->rounding, err, sizeof(err)));
    lib_prices(cat, s);
    for (i = 0; i < s->n_accounts; i++) {
        bz[i] = tu_zone(s->accounts[i].zone);
        OK(billing_catalog_add_account(cat, s->accounts[i].id, s->currency, bz[i],
                                       s->accounts[i].tax, err, sizeof(err)));
    }
    for (i = 0; i < s->n_subs; i++) {
        sub = &s->subs[i];
        st = billing_catalog_add_subscription(
            cat, sub->id, s->accounts[sub->account].id, sub->resource, s->plans[sub->plan].id,
            sub->start, sub->terms, sub->cancelled ? &sub->cancelled : NULL, err, sizeof(err));
        ck_assert_msg(st == ref_sub_status(ref, i), "subscription %s: %s, expected %s: %s", sub->id,
                      billing_strerror(st), billing_strerror(ref_sub_status(ref, i)), err);
    }
    for (i = 0; i < s->n_grants; i++) {
        g = &s->grants[i];
        OK(billing_catalog_add_grant(cat, g->id, s->accounts[g->account].id, g->amount, g->granted,
                                     g->expires, g->kinds, g->priority, err, sizeof(err)));
    }
    return cat;
}

static billing_status lib_add(billing_rater *r, billing_event *ev, const ref_event *e, char *err,
                              size_t errsize)
{
    billing_event_reset(ev);
    billing_event_set_id(ev, e->id);
    billing_event_set_account(ev, e->account);
    billing_event_set_resource(ev, e->resource);
    billing_event_set_meter(ev, e->meter);
    billing_event_set_interval(ev, e->start, e->end);
    ck_assert_int_eq(billing_event_set_quantity(ev, e->qty, err, errsize), BILLING_OK);
    billing_event_set_model(ev, e->model);
    billing_event_set_region(ev, e->region);
    return billing_rater_add(r, ev, err, errsize);
}

/*
 * The canonical text of a libbilling invoice: tu_invoice_text's, which
 * has the reference's format, with its lines sorted as the reference's.
 */
static char *append_row(char *line, const char *row, size_t len)
{
    size_t have = strlen(line);
    char *out = realloc(line, have + len + 1);

    memcpy(out + have, row, len);
    out[have + len] = '\0';
    return out;
}

static char *lib_invoice(billing_rater *r, const char *account, int m)
{
    char *text = tu_invoice_text(r, account, m / 12, m % 12 + 1);
    char *rows[4096];
    char *lines[4096];
    char *tail;
    char *out;
    char *p;
    size_t n_rows = 0;
    size_t n_lines = 0;
    size_t len = 0;
    size_t i;

    ck_assert_ptr_nonnull(text);
    /* Rows end in '\n': cut after each; the header is the first. */
    for (p = text; *p != '\0' && n_rows < 4096; p = strchr(p, '\n') + 1)
        rows[n_rows++] = p;
    tail = malloc(strlen(text) + 1);
    tail[0] = '\0';
    for (i = 1; i < n_rows; i++) {
        p = strchr(rows[i], '\n');
        if (strncmp(rows[i], "line ", 5) == 0) {
            lines[n_lines] = strndup(rows[i], (size_t)(p - rows[i]) + 1);
            n_lines++;
        } else if (strncmp(rows[i], "  refund of ", 12) == 0 && n_lines > 0) {
            /* The row under a refund line belongs to it (lines are sorted). */
            lines[n_lines - 1] = append_row(lines[n_lines - 1], rows[i], (size_t)(p - rows[i]) + 1);
        } else {
            memcpy(tail + len, rows[i], (size_t)(p - rows[i]) + 1);
            len += (size_t)(p - rows[i]) + 1;
            tail[len] = '\0';
        }
    }
    *strchr(text, '\n') = '\0';
    p = malloc(strlen(text) + 2);
    sprintf(p, "%s\n", text);
    out = ref_invoice_join(p, lines, n_lines, tail);
    for (i = 0; i < n_lines; i++)
        free(lines[i]);
    free(p);
    free(tail);
    free(text);
    return out;
}

/* ---------------------------------------------------------------------- */
/* The comparison                                                          */
/* ---------------------------------------------------------------------- */

static void compare_months(billing_rater *r, ref_rater *ref, const ref_spec *s, int a, int seed)
{
    int lib[256];
    int want[256];
    int n_lib = tu_months(r, s->accounts[a].id, lib, 256);
    int n_ref = ref_months(ref, a, want, 256);
    int i;

    ck_assert_msg(n_lib == n_ref, "seed %d %s: %d months with charges, reference %d", seed,
                  s->accounts[a].id, n_lib, n_ref);
    for (i = 0; i < n_ref && i < 256; i++)
        ck_assert_msg(lib[i] == (want[i] / 12) * 100 + want[i] % 12 + 1,
                      "seed %d %s: month %d is %d, reference %d", seed, s->accounts[a].id, i,
                      lib[i], (want[i] / 12) * 100 + want[i] % 12 + 1);
}

static void compare_invoices(billing_rater *r, ref_rater *ref, const ref_spec *s, int a, int seed)
{
    char *want[N_MONTHS];
    char *got;
    int m;

    ref_invoices(ref, a, FIRST_MONTH, LAST_MONTH, want);
    for (m = FIRST_MONTH; m <= LAST_MONTH; m++) {
        got = lib_invoice(r, s->accounts[a].id, m);
        ck_assert_msg(strcmp(got, want[m - FIRST_MONTH]) == 0,
                      "seed %d: invoice differs from the reference\nlibbilling:\n%sreference:\n%s",
                      seed, got, want[m - FIRST_MONTH]);
        free(got);
    }
    for (m = 0; m < N_MONTHS; m++)
        free(want[m]);
}

/*
 * The live balance at each grant bound of the account, a nanosecond
 * either side, and at a few other instants.
 */
static void compare_balances(billing_rater *r, ref_rater *ref, const ref_spec *s, int a,
                             const points *pts, int seed)
{
    billing_time_t at[3 * 2 * REF_MAX_GRANTS + 8];
    char got[4096];
    char *want;
    int n = 0;
    int i;
    int d;

    for (i = 0; i < s->n_grants; i++) {
        for (d = -1; d <= 1 && s->grants[i].account == a; d++) {
            at[n++] = s->grants[i].granted + d;
            at[n++] = s->grants[i].expires + d;
        }
    }
    for (i = 0; i < 8; i++)
        at[n++] = pts->v[pick(pts->n)];
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(
            billing_rater_credit_balance(r, s->accounts[a].id, at[i], got, sizeof(got)),
            BILLING_OK);
        want = ref_balance(ref, a, at[i]);
        ck_assert_msg(strcmp(got, want) == 0,
                      "seed %d %s: balance at %" PRId64 " is %s, reference %s", seed,
                      s->accounts[a].id, at[i], got, want);
        free(want);
    }
}

/* One to three resources running: a GPU instance, an instance without GPUs, a disk. */
static size_t gen_running(ref_event *run, billing_event **lib)
{
    static const billing_meter meters[3] = {BILLING_METER_GPU, BILLING_METER_GPULESS,
                                            BILLING_METER_STORAGE};
    char err[256];
    size_t n = 1 + (size_t)pick(3);
    size_t i;

    for (i = 0; i < n; i++) {
        memset(&run[i], 0, sizeof(run[i]));
        run[i].meter = meters[pick(3)];
        snprintf(run[i].model, REF_ID, "%s", "RTX4090");
        snprintf(run[i].region, REF_ID, "%s", "cn-east-1");
        if (run[i].meter == BILLING_METER_STORAGE)
            decimal(run[i].qty, REF_DEC, 100000, 3);
        else
            snprintf(run[i].qty, REF_DEC, "%d", 1 + pick(8));
        billing_event_reset(lib[i]);
        billing_event_set_meter(lib[i], run[i].meter);
        billing_event_set_model(lib[i], run[i].model);
        billing_event_set_region(lib[i], run[i].region);
        ck_assert_int_eq(billing_event_set_quantity(lib[i], run[i].qty, err, sizeof(err)),
                         BILLING_OK);
    }
    return n;
}

/* When the credit runs out, from each grant bound and a few other instants. */
static void compare_exhaustion(billing_rater *r, ref_rater *ref, const ref_spec *s, int a,
                               const points *pts, int seed)
{
    ref_event run[3];
    billing_event *lib[3];
    const billing_event *libc[3];
    billing_time_t got;
    billing_time_t want;
    billing_time_t at;
    billing_status st;
    char err[256];
    size_t n;
    int i;

    for (i = 0; i < 3; i++) {
        lib[i] = billing_event_new();
        libc[i] = lib[i];
    }
    for (i = 0; i < s->n_grants + 4; i++) {
        if (i < s->n_grants && s->grants[i].account != a)
            continue;
        at = i < s->n_grants ? s->grants[i].granted + pick(3) - 1 : pts->v[pick(pts->n)];
        n = gen_running(run, lib);
        st = billing_rater_credit_exhaustion(r, s->accounts[a].id, at, libc, n, &got, err,
                                             sizeof(err));
        ck_assert_msg(st == ref_exhaustion(ref, a, at, run, n, &want),
                      "seed %d %s at %" PRId64 ": status %d (%s)", seed, s->accounts[a].id, at, st,
                      err);
        ck_assert_msg(st != BILLING_OK || got == want,
                      "seed %d %s: credit from %" PRId64 " runs out at %" PRId64
                      ", reference %" PRId64,
                      seed, s->accounts[a].id, at, got, want);
    }
    for (i = 0; i < 3; i++)
        billing_event_destroy(lib[i]);
}

static void run_seed(int seed, int dense_stream, uint64_t *counts)
{
    static ref_spec spec;
    static ref_event evs[N_EVENTS];
    static points pts;
    static points trans;
    billing_zone *bz[REF_MAX_ACCOUNTS];
    billing_catalog *cat;
    billing_rater *r;
    ref_rater *ref;
    billing_event *ev = billing_event_new();
    char err[512];
    billing_status got;
    billing_status want;
    int n;
    int i;

    rng = UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(seed + 1);
    dense = dense_stream;
    pts.n = 0;
    trans.n = 0;
    gen_catalog(&spec, &pts, &trans);
    calendar_points(&spec, &pts, &trans);
    n = gen_stream(&spec, evs, &pts);
    ref = ref_new(&spec);
    cat = lib_catalog(&spec, ref, bz);
    billing_rater_new(cat, &r, err, sizeof(err));
    ck_assert_msg(r != NULL, "seed %d: %s", seed, err);
    for (i = 0; i < n; i++) {
        err[0] = '\0';
        got = lib_add(r, ev, &evs[i], err, sizeof(err));
        want = ref_add(ref, &evs[i]);
        ck_assert_msg(got == want, "seed %d event %s: libbilling %d (%s), reference %d", seed,
                      evs[i].id, got, err, want);
        counts[got < 0 ? -got + 1 : got]++;
    }
    for (i = 0; i < spec.n_accounts; i++) {
        compare_months(r, ref, &spec, i, seed);
        compare_invoices(r, ref, &spec, i, seed);
        compare_balances(r, ref, &spec, i, &pts, seed);
        compare_exhaustion(r, ref, &spec, i, &pts, seed);
    }
    ref_destroy(ref);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    for (i = 0; i < spec.n_accounts; i++)
        billing_zone_destroy(bz[i]);
}

/* Rate seed @seed's stream, which must exercise what it claims to: rated, repeated, refused. */
static void check_stream(int seed, int dense_stream)
{
    uint64_t counts[16] = {0};

    run_seed(seed, dense_stream, counts);
    ck_assert_uint_gt(counts[BILLING_OK], (dense_stream ? N_DENSE_EVENTS : N_BASE_EVENTS) / 2);
    ck_assert_uint_gt(counts[BILLING_DUPLICATE] + counts[-BILLING_ERR_CONFLICT + 1], 0);
}

START_TEST(test_reference_streams)
{
    check_stream(_i, 0);
}
END_TEST

/* Dense streams: the rater's shortcuts for repeated keys against the reference. */
START_TEST(test_reference_dense_streams)
{
    check_stream(_i, 1);
}
END_TEST

/* The reference's own arithmetic on the worked examples of doc/pricing.md. */
START_TEST(test_reference_worked_example)
{
    static ref_spec s;
    ref_rater *r;
    ref_event ev;
    char *inv[1];

    memset(&s, 0, sizeof(s));
    snprintf(s.currency, 4, "CNY");
    s.digits = 2;
    s.rounding = BILLING_ROUND_HALF_UP;
    s.n_versions = 1;
    snprintf(s.versions[0].id, REF_ID, "v1");
    s.versions[0].from = tu_time("2025-01-01T00:00:00Z");
    s.n_rates = 1;
    s.rates[0].meter = BILLING_METER_GPU;
    snprintf(s.rates[0].model, REF_ID, "RTX4090");
    snprintf(s.rates[0].region, REF_ID, "cn-east-1");
    snprintf(s.rates[0].price, REF_DEC, "0.60");
    s.n_accounts = 1;
    snprintf(s.accounts[0].id, REF_ID, "a");
    snprintf(s.accounts[0].zone, REF_ID, "Asia/Shanghai");
    snprintf(s.accounts[0].tax, REF_DEC, "0.06");
    r = ref_new(&s);
    memset(&ev, 0, sizeof(ev));
    snprintf(ev.id, REF_ID, "e1");
    snprintf(ev.account, REF_ID, "a");
    snprintf(ev.resource, REF_ID, "i-1");
    ev.meter = BILLING_METER_GPU;
    ev.start = tu_time("2026-01-05T10:00:00+08:00");
    ev.end = tu_time("2026-01-05T13:00:00+08:00");
    snprintf(ev.qty, REF_DEC, "8");
    snprintf(ev.model, REF_ID, "RTX4090");
    snprintf(ev.region, REF_ID, "cn-east-1");
    ck_assert_int_eq(ref_add(r, &ev), BILLING_OK);
    ck_assert_int_eq(ref_add(r, &ev), BILLING_DUPLICATE);
    ref_invoices(r, 0, 2026 * 12, 2026 * 12, inv);
    /* Example 1: 24 GPU-hour x 0.60 = 14.40, tax 0.864 -> 0.86, total 15.26. */
    ck_assert_str_eq(inv[0], "a 2026-01 CNY\n"
                             "line 1 gpu RTX4090 cn-east-1 plan= ver=v1 qty=24 GPU-hour @0.6 = "
                             "14.4 -> 14.40\n"
                             "subtotal 14.40 credits 0.00 tax 0.86@0.06 total 15.26\n");
    free(inv[0]);
    ref_destroy(r);
}
END_TEST

/*
 * Seeds beyond the 48 that once showed the reference wrong (a run of seeds
 * 48-167): 64, 98 and 160 a refund's credit given back rounded as a
 * positive amount (one minor unit more than the line in the modes that
 * round a negative amount otherwise than its opposite, floor and
 * ceiling); 99 the money part of a refund of an earlier
 * month's fee netted with this month's fees (credit paid 21.27 less).
 */
static const int found_seeds[] = {64, 98, 99, 160};

START_TEST(test_reference_found_seeds)
{
    uint64_t counts[16] = {0};

    run_seed(found_seeds[_i], 0, counts);
}
END_TEST

static Suite *reference_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("core");
    const char *vg = getenv("BILLING_VALGRIND");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_reference_worked_example);
    tcase_add_loop_test(tc, test_reference_streams, 0,
                        vg != NULL && strcmp(vg, "1") == 0 ? SEEDS_VALGRIND : SEEDS);
    tcase_add_loop_test(tc, test_reference_dense_streams, 0,
                        vg != NULL && strcmp(vg, "1") == 0 ? DENSE_SEEDS_VALGRIND : DENSE_SEEDS);
    tcase_add_loop_test(tc, test_reference_found_seeds, 0,
                        (int)(sizeof(found_seeds) / sizeof(found_seeds[0])));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reference_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
