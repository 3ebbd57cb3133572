/*
 * check_properties.c - invariants over random usage: order and batching
 * never change an invoice, splitting an event changes no exact amount,
 * every printed figure reconciles, credit is never over-applied, and
 * replaying everything changes nothing.
 */
#include "config.h"

#include <check.h>
#include <gmp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define N_EVENTS 400
#define N_ACCOUNTS 3
#define ROUNDS 6

typedef struct gen_event {
    char id[32];
    const char *account;
    char resource[16];
    billing_meter meter;
    billing_time_t start;
    billing_time_t end;
    char qty[32];
    const char *model;
} gen_event;

static const char *const accounts[N_ACCOUNTS] = {"acct-sh", "acct-ny", "acct-utc"};
static billing_zone *zones[N_ACCOUNTS];

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: deterministic, no libc global state. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static void setup(void)
{
    zones[0] = tu_zone("Asia/Shanghai");
    zones[1] = tu_zone("America/New_York");
    zones[2] = billing_zone_new_utc();
}

static void teardown(void)
{
    int i;

    for (i = 0; i < N_ACCOUNTS; i++)
        billing_zone_destroy(zones[i]);
}

/* Catalog with two price versions, a subscription and two grants per account. */
static billing_catalog *make_catalog(void)
{
    billing_catalog *cat = tu_gpu_cloud();
    char err[256];
    int i;
    char id[32];

    ck_assert_int_eq(billing_catalog_add_price_version(cat, "v2", tu_time("2026-02-14T05:00:00Z"),
                                                       err, sizeof(err)),
                     BILLING_OK);
    billing_catalog_set_rate(cat, "v2", BILLING_METER_GPU, "RTX4090", "cn-east-1", "0.55", err,
                             256);
    billing_catalog_set_rate(cat, "v2", BILLING_METER_GPU, "A100-80G", "cn-east-1", "1.7", err,
                             256);
    billing_catalog_set_rate(cat, "v2", BILLING_METER_GPULESS, "*", "*", "0.333", err, 256);
    billing_catalog_set_rate(cat, "v2", BILLING_METER_STORAGE, "*", "*", "0.21", err, 256);
    billing_catalog_set_rate(cat, "v2", BILLING_METER_TRAFFIC, "*", "*", "0.01", err, 256);
    billing_catalog_set_plan_fee(cat, "v2", "rtx-daily", "97.5", err, 256);
    billing_catalog_set_plan_fee(cat, "v2", "rtx-monthly", "2500", err, 256);
    for (i = 0; i < N_ACCOUNTS; i++) {
        ck_assert_int_eq(billing_catalog_add_account(cat, accounts[i], "CNY", zones[i], "0.06", err,
                                                     sizeof(err)),
                         BILLING_OK);
        snprintf(id, sizeof(id), "sub-%d", i);
        ck_assert_int_eq(billing_catalog_add_subscription(cat, id, accounts[i], "r1", "rtx-monthly",
                                                          tu_time("2026-01-20T03:00:00Z"), 2, NULL,
                                                          err, sizeof(err)),
                         BILLING_OK);
        snprintf(id, sizeof(id), "trial-%d", i);
        ck_assert_int_eq(billing_catalog_add_grant(cat, id, accounts[i], "10.00",
                                                   tu_time("2026-01-03T00:00:00Z"),
                                                   tu_time("2026-02-02T00:00:00Z"),
                                                   BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                         BILLING_OK);
        snprintf(id, sizeof(id), "prepaid-%d", i);
        ck_assert_int_eq(billing_catalog_add_grant(
                             cat, id, accounts[i], "3000.00", tu_time("2026-01-15T00:00:00Z"),
                             tu_time("2026-12-01T00:00:00Z"),
                             BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION, 1, err,
                             sizeof(err)),
                         BILLING_OK);
    }
    return cat;
}

static void gen(gen_event *ev, int i)
{
    static const billing_meter meters[4] = {BILLING_METER_GPU, BILLING_METER_GPULESS,
                                            BILLING_METER_STORAGE, BILLING_METER_TRAFFIC};
    billing_time_t base = tu_time("2026-01-01T00:00:00Z");

    snprintf(ev->id, sizeof(ev->id), "ev-%d", i);
    ev->account = accounts[rnd() % N_ACCOUNTS];
    snprintf(ev->resource, sizeof(ev->resource), "r%d", (int)(rnd() % 3));
    ev->meter = meters[rnd() % 4];
    /* Anywhere in Jan..Mar, up to ~3 days long, with sub-second precision. */
    ev->start = base + (billing_time_t)(rnd() % (85ULL * 86400)) * BILLING_NS_PER_SEC +
                (billing_time_t)(rnd() % 1000000000ULL);
    ev->end = ev->start + 1 + (billing_time_t)(rnd() % (3ULL * 86400 * BILLING_NS_PER_SEC));
    ev->model = (rnd() % 2) ? "RTX4090" : "A100-80G";
    if (ev->meter == BILLING_METER_TRAFFIC)
        snprintf(ev->qty, sizeof(ev->qty), "%" PRIu64, rnd() % UINT64_C(100000000000));
    else if (ev->meter == BILLING_METER_STORAGE)
        snprintf(ev->qty, sizeof(ev->qty), "%d.%03d", (int)(rnd() % 10000), (int)(rnd() % 1000));
    else
        snprintf(ev->qty, sizeof(ev->qty), "%d", 1 + (int)(rnd() % 8));
}

static void fill(const gen_event *g, billing_event *ev)
{
    char err[256];

    billing_event_reset(ev);
    billing_event_set_id(ev, g->id);
    billing_event_set_account(ev, g->account);
    billing_event_set_resource(ev, g->resource);
    billing_event_set_meter(ev, g->meter);
    billing_event_set_interval(ev, g->start, g->end);
    billing_event_set_quantity(ev, g->qty, err, sizeof(err));
    billing_event_set_model(ev, g->model);
    billing_event_set_region(ev, "cn-east-1");
}

static billing_status add(billing_rater *r, const gen_event *g, billing_event *ev)
{
    char err[256];
    billing_status st;

    fill(g, ev);
    st = billing_rater_add(r, ev, err, sizeof(err));
    ck_assert_msg(st == BILLING_OK || st == BILLING_DUPLICATE, "%s: %s", g->id, err);
    return st;
}

/* Every invoice of the @n accounts @names, January to @months 2026, as one string. */
static char *invoices_of(billing_rater *r, const char *const *names, int n, int months)
{
    char *out = NULL;
    size_t len = 0;
    char *one;
    size_t size;
    int a;
    int m;

    for (a = 0; a < n; a++) {
        for (m = 1; m <= months; m++) {
            one = tu_invoice_text(r, names[a], 2026, m);
            ck_assert_ptr_nonnull(one);
            size = strlen(one);
            out = realloc(out, len + size + 1);
            memcpy(out + len, one, size + 1);
            len += size;
            free(one);
        }
    }
    return out;
}

/* Every invoice of every account, Jan..Apr 2026, as one string. */
static char *all_invoices(billing_rater *r)
{
    return invoices_of(r, accounts, N_ACCOUNTS, 4);
}

/* Rate @evs (in @order, if not NULL) in one rater; its invoices as @invoices prints them. */
static char *rate_with(billing_catalog *cat, const gen_event *evs, const int *order, int n,
                       char *(*invoices)(billing_rater *))
{
    char err[256];
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    char *text;
    int i;

    ck_assert_msg(billing_rater_new(cat, &r, err, sizeof(err)) == BILLING_OK, "%s", err);
    for (i = 0; i < n; i++)
        add(r, &evs[order ? order[i] : i], ev);
    text = invoices(r);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    return text;
}

static char *rate_all(billing_catalog *cat, const gen_event *evs, const int *order, int n)
{
    return rate_with(cat, evs, order, n, all_invoices);
}

static void shuffle(int *v, int n)
{
    int i;
    int j;
    int t;

    for (i = n - 1; i > 0; i--) {
        j = (int)(rnd() % (uint64_t)(i + 1));
        t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

START_TEST(test_order_independence)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_EVENTS, sizeof(*evs));
    int order[N_EVENTS];
    char *reference;
    char *other;
    int i;
    int round;

    rng_state = UINT64_C(0x9e3779b97f4a7c15) + (uint64_t)_i;
    for (i = 0; i < N_EVENTS; i++) {
        gen(&evs[i], i);
        order[i] = i;
    }
    reference = rate_all(cat, evs, NULL, N_EVENTS);
    /* The random month must exercise every kind of line, credit and both versions. */
    ck_assert_ptr_nonnull(strstr(reference, "line 1 gpu"));
    ck_assert_ptr_nonnull(strstr(reference, "line 1 storage"));
    ck_assert_ptr_nonnull(strstr(reference, "line 1 traffic"));
    ck_assert_ptr_nonnull(strstr(reference, "line 2 gpu"));
    ck_assert_ptr_nonnull(strstr(reference, "line 3  RTX4090")); /* fee: no meter */
    ck_assert_ptr_nonnull(strstr(reference, "ver=v2"));
    ck_assert_ptr_nonnull(strstr(reference, "credit trial-"));
    ck_assert_ptr_nonnull(strstr(reference, "credit prepaid-"));
    for (round = 0; round < ROUNDS; round++) {
        shuffle(order, N_EVENTS);
        other = rate_all(cat, evs, order, N_EVENTS);
        ck_assert_str_eq(reference, other);
        free(other);
    }
    free(reference);
    free(evs);
    billing_catalog_destroy(cat);
}
END_TEST

/* Cut each time-based event into contiguous pieces with new ids. */
START_TEST(test_split_invariance)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_EVENTS, sizeof(*evs));
    gen_event *pieces = calloc(N_EVENTS * 4, sizeof(*pieces));
    char *whole;
    char *split;
    int i;
    int k;
    int n = 0;
    int cuts;
    billing_time_t t;
    billing_time_t step;

    rng_state = UINT64_C(0x1234567) + (uint64_t)_i;
    for (i = 0; i < N_EVENTS; i++) {
        gen(&evs[i], i);
        if (evs[i].meter == BILLING_METER_TRAFFIC)
            evs[i].meter = BILLING_METER_STORAGE; /* bytes are not split by time */
    }
    for (i = 0; i < N_EVENTS; i++) {
        cuts = 1 + (int)(rnd() % 4);
        t = evs[i].start;
        for (k = 0; k < cuts; k++) {
            pieces[n] = evs[i];
            snprintf(pieces[n].id, sizeof(pieces[n].id), "ev-%d-%d", i, k);
            step = (evs[i].end - t) / (cuts - k);
            if (k + 1 < cuts && step > 1)
                step = 1 + (billing_time_t)(rnd() % (uint64_t)step);
            pieces[n].start = t;
            pieces[n].end = (k + 1 == cuts) ? evs[i].end : t + step;
            if (pieces[n].end > pieces[n].start)
                n++;
            t = pieces[n - 1].end;
        }
    }
    whole = rate_all(cat, evs, NULL, N_EVENTS);
    split = rate_all(cat, pieces, NULL, n);
    ck_assert_str_eq(whole, split);
    free(whole);
    free(split);
    free(evs);
    free(pieces);
    billing_catalog_destroy(cat);
}
END_TEST

/* "12.34" or "-0.05" -> minor units. */
static long long minor(const char *s)
{
    long long v = 0;
    int neg = 0;

    if (*s == '-') {
        neg = 1;
        s++;
    }
    for (; *s; s++) {
        if (*s != '.')
            v = v * 10 + (*s - '0');
    }
    return neg ? -v : v;
}

START_TEST(test_reconciliation_and_credit_bounds)
{
    billing_catalog *cat = make_catalog();
    gen_event g;
    billing_event *ev = billing_event_new();
    billing_rater *r;
    billing_invoice *inv;
    char err[256];
    long long sum;
    long long used[N_ACCOUNTS][2];
    size_t i;
    int a;
    int m;
    int n;

    billing_rater_new(cat, &r, err, sizeof(err));
    rng_state = UINT64_C(77) + (uint64_t)_i;
    for (n = 0; n < N_EVENTS; n++) {
        gen(&g, n);
        add(r, &g, ev);
    }
    memset(used, 0, sizeof(used));
    for (a = 0; a < N_ACCOUNTS; a++) {
        for (m = 1; m <= 4; m++) {
            ck_assert_int_eq(billing_rater_invoice(r, accounts[a], 2026, m, &inv, err, sizeof(err)),
                             BILLING_OK);
            sum = 0;
            for (i = 0; i < billing_invoice_line_count(inv); i++)
                sum += minor(billing_invoice_line_amount_rounded(inv, i));
            ck_assert_int_eq(sum, minor(billing_invoice_subtotal(inv)));
            sum = 0;
            for (i = 0; i < billing_invoice_credit_count(inv); i++) {
                long long c = minor(billing_invoice_credit_amount(inv, i));

                ck_assert_int_gt(c, 0);
                sum += c;
                used[a][strncmp(billing_invoice_credit_grant(inv, i), "trial", 5) == 0 ? 0 : 1] +=
                    c;
            }
            ck_assert_int_eq(sum, minor(billing_invoice_credits(inv)));
            ck_assert_int_le(sum, minor(billing_invoice_subtotal(inv)) > 0
                                      ? minor(billing_invoice_subtotal(inv))
                                      : 0);
            ck_assert_int_eq(
                minor(billing_invoice_subtotal(inv)) + minor(billing_invoice_returned(inv)) - sum -
                    minor(billing_invoice_account_credit(inv)) +
                    minor(billing_invoice_carried(inv)) + minor(billing_invoice_tax(inv)),
                minor(billing_invoice_total(inv)));
            ck_assert_int_ge(minor(billing_invoice_tax(inv)), 0);
            ck_assert_int_ge(minor(billing_invoice_total(inv)), 0);
            billing_invoice_destroy(inv);
        }
        ck_assert_int_le(used[a][0], 1000);
        ck_assert_int_le(used[a][1], 300000);
    }
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

START_TEST(test_replay_is_idempotent)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_EVENTS, sizeof(*evs));
    billing_event *ev = billing_event_new();
    billing_rater *r;
    char err[256];
    char *before;
    char *after;
    int i;

    rng_state = UINT64_C(4242) + (uint64_t)_i;
    billing_rater_new(cat, &r, err, sizeof(err));
    for (i = 0; i < N_EVENTS; i++) {
        gen(&evs[i], i);
        ck_assert_int_eq(add(r, &evs[i], ev), BILLING_OK);
    }
    before = all_invoices(r);
    for (i = N_EVENTS - 1; i >= 0; i--)
        ck_assert_int_eq(add(r, &evs[i], ev), BILLING_DUPLICATE);
    after = all_invoices(r);
    ck_assert_str_eq(before, after);
    ck_assert_uint_eq(billing_rater_event_count(r), N_EVENTS);
    free(before);
    free(after);
    free(evs);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Removing events gives exactly the state of never having added them,
 * whatever was added in between: rate the reference events interleaved
 * with others (some in months nothing else touches), take the others
 * back in another order, and compare every invoice and the month list.
 * Then misuse is refused and changes nothing (the regression test
 * remove_refuses_misuse below).
 */
/*
 * remove_refuses_misuse: removing an event that was never added, or one
 * whose content differs from the event rated under its id, is refused and
 * changes nothing. Before, with the dedupe off as billing_rater_remove
 * required, both were accepted whenever the aggregates were not empty and
 * corrupted the totals (and with the dedupe on removing was refused).
 */
START_TEST(test_remove_refuses_misuse)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_EVENTS + 1, sizeof(*evs));
    billing_event *ev = billing_event_new();
    billing_rater *r;
    char err[256];
    char *before;
    char *after;
    int i;

    rng_state = UINT64_C(4242);
    for (i = 0; i < N_EVENTS + 1; i++)
        gen(&evs[i], i);
    billing_rater_new(cat, &r, err, sizeof(err));
    for (i = 0; i < N_EVENTS; i++)
        add(r, &evs[i], ev);
    before = all_invoices(r);
    /* Never added; its account and month have charges, so nothing empty gives it away. */
    evs[N_EVENTS].start = evs[0].start;
    evs[N_EVENTS].end = evs[0].end;
    evs[N_EVENTS].account = evs[0].account;
    fill(&evs[N_EVENTS], ev);
    ck_assert_int_eq(billing_rater_remove(r, ev, err, sizeof(err)), BILLING_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err, evs[N_EVENTS].id));
    /* Same id as a rated event, other content. */
    fill(&evs[N_EVENTS], ev);
    billing_event_set_id(ev, evs[0].id);
    ck_assert_int_eq(billing_rater_remove(r, ev, err, sizeof(err)), BILLING_ERR_CONFLICT);
    after = all_invoices(r);
    ck_assert_str_eq(before, after);
    ck_assert_uint_eq(billing_rater_event_count(r), N_EVENTS);
    free(before);
    free(after);
    free(evs);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

START_TEST(test_remove_undoes_add)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(2 * N_EVENTS, sizeof(*evs));
    billing_event *ev = billing_event_new();
    int order[2 * N_EVENTS];
    billing_rater *r;
    char err[256];
    char *reference;
    char *after;
    int months[16];
    int n;
    int i;

    rng_state = UINT64_C(777) + (uint64_t)_i;
    for (i = 0; i < 2 * N_EVENTS; i++) {
        gen(&evs[i], i);
        order[i] = i;
        if (i >= N_EVENTS && i % 3 == 0) {
            /* Moved to June: aggregates that only removed events ever fill. */
            evs[i].start += 150LL * 86400 * BILLING_NS_PER_SEC;
            evs[i].end += 150LL * 86400 * BILLING_NS_PER_SEC;
        }
    }
    reference = rate_all(cat, evs, NULL, N_EVENTS);
    billing_rater_new(cat, &r, err, sizeof(err));
    shuffle(order, 2 * N_EVENTS);
    for (i = 0; i < 2 * N_EVENTS; i++)
        ck_assert_int_eq(add(r, &evs[order[i]], ev), BILLING_OK);
    shuffle(order, 2 * N_EVENTS);
    for (i = 0; i < 2 * N_EVENTS; i++) {
        if (order[i] < N_EVENTS)
            continue;
        fill(&evs[order[i]], ev);
        ck_assert_int_eq(billing_rater_remove(r, ev, err, sizeof(err)), BILLING_OK);
    }
    after = all_invoices(r);
    ck_assert_str_eq(reference, after);
    ck_assert_uint_eq(billing_rater_event_count(r), N_EVENTS);
    for (i = 0; i < N_ACCOUNTS; i++) {
        n = tu_months(r, accounts[i], months, 16);
        ck_assert_int_gt(n, 0);
        ck_assert_int_le(months[n - 1], 202604); /* June is empty again */
    }
    /* Removed already: refused, whatever its aggregates hold. */
    for (i = N_EVENTS; i < 2 * N_EVENTS; i++) {
        if (i % 3 == 0 && evs[i].meter != BILLING_METER_TRAFFIC)
            break;
    }
    fill(&evs[i], ev);
    ck_assert_int_eq(billing_rater_remove(r, ev, err, sizeof(err)), BILLING_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err, evs[i].id));
    /* Its id is free again: adding it rates it again, and removing it restores the state. */
    ck_assert_int_eq(add(r, &evs[i], ev), BILLING_OK);
    ck_assert_uint_eq(billing_rater_event_count(r), N_EVENTS + 1);
    ck_assert_int_eq(billing_rater_remove(r, ev, err, sizeof(err)), BILLING_OK);
    free(after);
    after = all_invoices(r);
    ck_assert_str_eq(reference, after);
    free(reference);
    free(after);
    billing_rater_destroy(r);
    /* With the rater's own dedupe off, it cannot check, so removing is refused. */
    billing_rater_new(cat, &r, err, sizeof(err));
    ck_assert_int_eq(billing_rater_set_dedupe(r, 0), BILLING_OK);
    ck_assert_int_eq(add(r, &evs[0], ev), BILLING_OK);
    fill(&evs[0], ev);
    ck_assert_int_eq(billing_rater_remove(r, ev, err, sizeof(err)), BILLING_ERR_STATE);
    ck_assert_uint_eq(billing_rater_event_count(r), 1);
    billing_rater_destroy(r);
    free(evs);
    billing_event_destroy(ev);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Invoices remember the credit state of the last month replayed. Asking
 * for months in any order, and after more events arrive, must give what a
 * fresh rater gives.
 */
START_TEST(test_invoice_order_and_changes)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_EVENTS, sizeof(*evs));
    billing_event *ev = billing_event_new();
    billing_rater *r;
    billing_rater *fresh;
    char err[256];
    char *want[N_ACCOUNTS * 4];
    char *got;
    int order[N_ACCOUNTS * 4];
    int i;

    rng_state = UINT64_C(99) + (uint64_t)_i;
    for (i = 0; i < N_EVENTS; i++)
        gen(&evs[i], i);
    billing_rater_new(cat, &fresh, err, sizeof(err));
    for (i = 0; i < N_EVENTS; i++)
        add(fresh, &evs[i], ev);
    for (i = 0; i < N_ACCOUNTS * 4; i++) {
        want[i] = tu_invoice_text(fresh, accounts[i / 4], 2026, i % 4 + 1);
        ck_assert_ptr_nonnull(want[i]);
        order[i] = i;
    }
    /*
     * February invoices before any event: the memo holds the credit left
     * after January's plan fee alone (prepaid 3000.00 - 2599.00).
     */
    billing_rater_new(cat, &r, err, sizeof(err));
    for (i = 0; i < N_ACCOUNTS; i++) {
        got = tu_invoice_text(r, accounts[i], 2026, 2);
        ck_assert_ptr_nonnull(got);
        free(got);
    }
    /* Events arrive; February again first: the memo is stale and must not be used. */
    for (i = 0; i < N_EVENTS; i++)
        add(r, &evs[i], ev);
    for (i = 0; i < N_ACCOUNTS; i++) {
        got = tu_invoice_text(r, accounts[i], 2026, 2);
        ck_assert_str_eq(got, want[i * 4 + 1]);
        free(got);
    }
    /* Any order gives the same invoices. */
    shuffle(order, N_ACCOUNTS * 4);
    for (i = 0; i < N_ACCOUNTS * 4; i++) {
        got = tu_invoice_text(r, accounts[order[i] / 4], 2026, order[i] % 4 + 1);
        ck_assert_str_eq(got, want[order[i]]);
        free(got);
    }
    for (i = 0; i < N_ACCOUNTS * 4; i++)
        free(want[i]);
    free(evs);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_rater_destroy(fresh);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A rater keeps the storage of the months it priced (bl_month_release)
 * and prices the next ones in it, whatever their account, month, lines,
 * credit epochs and refunds. Invoices and balances asked in a random
 * order, events added and taken away between them, from one long-lived
 * rater equal those of a new rater holding the same events, asked that
 * question alone.
 */
#define KEPT_STEPS 60

/* A new rater holding @evs[i] for in[i] set. */
static billing_rater *rater_of(billing_catalog *cat, const gen_event *evs, const int *in)
{
    billing_event *ev = billing_event_new();
    billing_rater *r = NULL;
    char err[256];
    int i;

    ck_assert_msg(billing_rater_new(cat, &r, err, sizeof(err)) == BILLING_OK, "%s", err);
    for (i = 0; i < N_EVENTS; i++) {
        if (in[i])
            add(r, &evs[i], ev);
    }
    billing_event_destroy(ev);
    return r;
}

START_TEST(test_months_kept_change_nothing)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_EVENTS, sizeof(*evs));
    int *in = calloc(N_EVENTS, sizeof(int));
    billing_event *ev = billing_event_new();
    billing_rater *r;
    billing_rater *fresh;
    billing_time_t base = tu_time("2026-01-01T00:00:00Z");
    billing_time_t now;
    char want[128];
    char got[128];
    char *want_text;
    char *got_text;
    const char *acct;
    int step;
    int month;
    int i;

    rng_state = UINT64_C(4242) + (uint64_t)_i;
    for (i = 0; i < N_EVENTS; i++) {
        gen(&evs[i], i);
        in[i] = (int)(rnd() % 4 != 0);
    }
    r = rater_of(cat, evs, in);
    for (step = 0; step < KEPT_STEPS; step++) {
        /* An event in or out: the months priced next differ from those kept. */
        i = (int)(rnd() % N_EVENTS);
        fill(&evs[i], ev);
        if (in[i])
            ck_assert_int_eq(billing_rater_remove(r, ev, NULL, 0), BILLING_OK);
        else
            add(r, &evs[i], ev);
        in[i] = !in[i];
        acct = accounts[rnd() % N_ACCOUNTS];
        fresh = rater_of(cat, evs, in);
        if (rnd() % 2) {
            month = 1 + (int)(rnd() % 4);
            want_text = tu_invoice_text(fresh, acct, 2026, month);
            got_text = tu_invoice_text(r, acct, 2026, month);
            ck_assert_ptr_nonnull(want_text);
            ck_assert_ptr_nonnull(got_text);
            ck_assert_str_eq(got_text, want_text);
            free(want_text);
            free(got_text);
        } else {
            now = base + (billing_time_t)(rnd() % (100ULL * 86400)) * BILLING_NS_PER_SEC;
            ck_assert_int_eq(billing_rater_credit_balance(fresh, acct, now, want, sizeof(want)),
                             BILLING_OK);
            ck_assert_int_eq(billing_rater_credit_balance(r, acct, now, got, sizeof(got)),
                             BILLING_OK);
            ck_assert_str_eq(got, want);
        }
        billing_rater_destroy(fresh);
    }
    billing_rater_destroy(r);
    billing_event_destroy(ev);
    free(in);
    free(evs);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * The rater's own id set through several growths and rehashes: every id
 * is remembered, a replay is all duplicates, a changed one a conflict.
 */
#define MANY_IDS 60000

START_TEST(test_dedupe_many_ids)
{
    billing_catalog *cat = make_catalog();
    billing_event *ev = billing_event_new();
    billing_rater *r;
    char err[256];
    gen_event g;
    billing_status want;
    int i;
    int pass;

    billing_rater_new(cat, &r, err, sizeof(err));
    for (pass = 0; pass < 3; pass++) {
        want = pass == 0 ? BILLING_OK : pass == 1 ? BILLING_DUPLICATE : BILLING_ERR_CONFLICT;
        for (i = 0; i < MANY_IDS; i++) {
            rng_state = UINT64_C(5150) + (uint64_t)i; /* the same event on every pass */
            gen(&g, 0);
            /* Ids of several lengths, sharing long prefixes. */
            snprintf(g.id, sizeof(g.id), "%s-%d", (i % 3) ? "e" : "event-with-a-long-prefix", i);
            g.meter = BILLING_METER_TRAFFIC;
            g.start = tu_time("2026-01-10T00:00:00Z") + (billing_time_t)i;
            g.end = g.start + 1;
            snprintf(g.qty, sizeof(g.qty), "%d", pass == 2 ? 2 : 1);
            fill(&g, ev);
            ck_assert_int_eq(billing_rater_add(r, ev, err, sizeof(err)), want);
        }
    }
    ck_assert_uint_eq(billing_rater_event_count(r), MANY_IDS);
    billing_rater_destroy(r);
    billing_event_destroy(ev);
    billing_catalog_destroy(cat);
}
END_TEST

/* Copy every aggregate of @from into @to through the public text form. */
static void copy_aggregates(const billing_rater *from, billing_rater *to)
{
    char sum[BILLING_AGG_SUM_MAX];
    char err[256];
    const char *account;
    const char *version;
    const char *model;
    const char *region;
    const char *sub;
    billing_meter meter;
    unsigned epoch;
    uint64_t pieces;
    int ym;
    size_t i;

    for (i = 0; i < billing_rater_aggregate_count(from); i++) {
        ck_assert_int_eq(billing_rater_aggregate(from, i, &account, &ym, &meter, &version, &model,
                                                 &region, &sub, &epoch, &pieces, sum, sizeof(sum)),
                         BILLING_OK);
        if (pieces == 0)
            continue;
        ck_assert_msg(billing_rater_add_aggregate(to, account, ym / 100, ym % 100, meter, version,
                                                  model, region, sub, epoch, pieces, sum, err,
                                                  sizeof(err)) == BILLING_OK,
                      "%s", err);
    }
}

/*
 * A store keeps the aggregates of each batch and sums them: invoices from
 * the summed aggregates of batches of any size must equal those of one
 * rater that saw every event (the aggregates are the whole state).
 */
START_TEST(test_aggregates_round_trip)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_EVENTS, sizeof(*evs));
    billing_event *ev = billing_event_new();
    billing_rater *total;
    billing_rater *batch = NULL;
    char err[256];
    char *reference;
    char *stored;
    int batch_size = 1 + (int)(_i * 37);
    int i;

    rng_state = UINT64_C(4242) + (uint64_t)_i;
    for (i = 0; i < N_EVENTS; i++)
        gen(&evs[i], i);
    reference = rate_all(cat, evs, NULL, N_EVENTS);
    billing_rater_new(cat, &total, err, sizeof(err));
    ck_assert_int_eq(billing_rater_set_dedupe(total, 0), BILLING_OK);
    for (i = 0; i < N_EVENTS; i++) {
        if (batch == NULL)
            billing_rater_new(cat, &batch, err, sizeof(err));
        add(batch, &evs[i], ev);
        if ((i + 1) % batch_size == 0 || i == N_EVENTS - 1) {
            copy_aggregates(batch, total);
            billing_rater_destroy(batch);
            batch = NULL;
        }
    }
    stored = all_invoices(total);
    ck_assert_str_eq(reference, stored);
    /* A key the catalog does not have is refused and changes nothing. */
    ck_assert_int_eq(billing_rater_add_aggregate(total, accounts[0], 2026, 1, BILLING_METER_GPU,
                                                 "no-such-version", "*", "*", NULL, 0, 1, "5", err,
                                                 sizeof(err)),
                     BILLING_ERR_NO_PRICE);
    ck_assert_int_eq(billing_rater_add_aggregate(total, accounts[0], 2026, 1, BILLING_METER_GPU,
                                                 NULL, NULL, NULL, NULL, 0, 1, "1/0", err,
                                                 sizeof(err)),
                     BILLING_ERR_INVALID);
    free(stored);
    stored = all_invoices(total);
    ck_assert_str_eq(reference, stored);
    free(stored);
    free(reference);
    billing_rater_destroy(total);
    billing_event_destroy(ev);
    free(evs);
    billing_catalog_destroy(cat);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Dense streams: the rater's memo and interning against the general path  */
/* ---------------------------------------------------------------------- */

#define N_DENSE 2000
#define N_DENSE_ACCOUNTS (N_ACCOUNTS + 1)

/* The catalog's accounts and one more without subscriptions or grants. */
static const char *const dense_accounts[N_DENSE_ACCOUNTS] = {"acct-sh", "acct-ny", "acct-utc",
                                                             "acct-plain"};

/*
 * One-minute records (a quarter up to two hours long) of few keys within
 * two hours of an instant where a price version, a credit epoch, a
 * subscription or a local month starts: most repeat an earlier key in the
 * same interval, some touch or cross its bound.
 */
static void gen_dense(gen_event *ev, int i)
{
    static const char *const hot[] = {"2026-02-14T05:00:00Z", "2026-02-01T00:00:00Z",
                                      "2026-01-31T16:00:00Z", "2026-02-01T05:00:00Z",
                                      "2026-01-15T00:00:00Z", "2026-01-20T03:00:00Z",
                                      "2026-02-02T00:00:00Z"};
    static const billing_meter meters[4] = {BILLING_METER_GPU, BILLING_METER_GPULESS,
                                            BILLING_METER_STORAGE, BILLING_METER_TRAFFIC};
    billing_time_t minute = 60 * BILLING_NS_PER_SEC;

    gen(ev, i);
    snprintf(ev->id, sizeof(ev->id), "dense-%d", i);
    ev->account = dense_accounts[rnd() % N_DENSE_ACCOUNTS];
    ev->meter = meters[rnd() % 4];
    ev->start = tu_time(hot[rnd() % (sizeof(hot) / sizeof(hot[0]))]) +
                ((billing_time_t)(rnd() % 240) - 120) * minute;
    ev->end = ev->start + (rnd() % 4 ? minute : 1 + (billing_time_t)(rnd() % (120 * minute)));
    if (ev->meter == BILLING_METER_TRAFFIC)
        snprintf(ev->qty, sizeof(ev->qty), "%" PRIu64, rnd() % UINT64_C(100000000000));
    else
        snprintf(ev->qty, sizeof(ev->qty), "%d", 1 + (int)(rnd() % 8));
}

/* Every invoice of the dense accounts, Jan..Mar 2026, as one string. */
static char *dense_invoices(billing_rater *r)
{
    return invoices_of(r, dense_accounts, N_DENSE_ACCOUNTS, 3);
}

/* @got equals @want; else fail naming the first differing line (whole texts are too long for Check). */
static void assert_same_invoices(const char *want, const char *got, const char *what)
{
    size_t i = 0;
    size_t line = 0;

    while (want[i] != '\0' && want[i] == got[i])
        i++;
    while (line < i && want[i - line - 1] != '\n')
        line++;
    ck_assert_msg(want[i] == got[i],
                  "%s: invoices differ from the general path's at\n%.200s\n"
                  "general path:\n%.200s",
                  what, got + i - line, want + i - line);
}

static int by_account_then_start(const void *a, const void *b)
{
    const gen_event *x = a;
    const gen_event *y = b;
    int c = strcmp(x->account, y->account);

    if (c != 0)
        return c;
    return (x->start > y->start) - (x->start < y->start);
}

/* Rate each event in a rater of its own (the general path only), summing their aggregates. */
static char *dense_general_path(billing_catalog *cat, const gen_event *evs, int n)
{
    char err[256];
    billing_rater *total = NULL;
    billing_rater *one = NULL;
    billing_event *ev = billing_event_new();
    char *text;
    int i;

    ck_assert_msg(billing_rater_new(cat, &total, err, sizeof(err)) == BILLING_OK, "%s", err);
    ck_assert_int_eq(billing_rater_set_dedupe(total, 0), BILLING_OK);
    for (i = 0; i < n; i++) {
        ck_assert_msg(billing_rater_new(cat, &one, err, sizeof(err)) == BILLING_OK, "%s", err);
        ck_assert_int_eq(add(one, &evs[i], ev), BILLING_OK);
        copy_aggregates(one, total);
        billing_rater_destroy(one);
    }
    text = dense_invoices(total);
    billing_event_destroy(ev);
    billing_rater_destroy(total);
    return text;
}

/*
 * A dense stream gives the same invoices interleaved across accounts,
 * grouped by account in time order (one account at a time), and rated
 * event by event in raters of their own, where the memo and the interned
 * ids are never reused.
 */
START_TEST(test_dense_memo_matches_general_path)
{
    billing_catalog *cat = make_catalog();
    gen_event *evs = calloc(N_DENSE, sizeof(*evs));
    char err[256];
    char *interleaved;
    char *grouped;
    char *general;
    int i;

    ck_assert_int_eq(billing_catalog_add_account(cat, dense_accounts[N_ACCOUNTS], "CNY", zones[2],
                                                 "0.06", err, sizeof(err)),
                     BILLING_OK);
    rng_state = UINT64_C(0x5eed) + (uint64_t)_i;
    for (i = 0; i < N_DENSE; i++)
        gen_dense(&evs[i], i);
    /* In one rater, nearly every event takes the memo. */
    interleaved = rate_with(cat, evs, NULL, N_DENSE, dense_invoices);
    general = dense_general_path(cat, evs, N_DENSE);
    assert_same_invoices(general, interleaved, "interleaved");
    qsort(evs, N_DENSE, sizeof(*evs), by_account_then_start);
    grouped = rate_with(cat, evs, NULL, N_DENSE, dense_invoices);
    assert_same_invoices(general, grouped, "grouped by account");
    /* Every kind of line and both versions appear, for the plain account too. */
    ck_assert_ptr_nonnull(strstr(general, "acct-plain 2026-02"));
    ck_assert_ptr_nonnull(strstr(general, "line 1 gpu"));
    ck_assert_ptr_nonnull(strstr(general, "ver=v2"));
    free(interleaved);
    free(grouped);
    free(general);
    free(evs);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * The oracle for billing_rater_credit_crossing: the crossing search
 * billingd's alert check ran before it moved into libbilling, kept as it
 * was (public calls only: events cut in place, added and taken back, the
 * balance read as text and parsed back).
 */
typedef struct cx_ev {
    billing_event *ev;
    billing_time_t start;
    billing_time_t end;
} cx_ev;

typedef struct cx_oracle {
    billing_rater *r;
    const char *account;
    billing_time_t lo;
    cx_ev *items;
    cx_ev **by_end;
    size_t n;
    mpq_t level;
    mpq_t q;
    /* When set: each crossing asked of a new rater holding only these (none of the span's
       aggregates made yet), not of r. */
    billing_catalog *cat;
    const gen_event *before;
    size_t n_before;
} cx_oracle;

static int cx_end_cmp(const void *x, const void *y)
{
    const cx_ev *a = *(cx_ev *const *)x;
    const cx_ev *b = *(cx_ev *const *)y;

    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return strcmp(billing_event_id(a->ev), billing_event_id(b->ev));
}

static int cx_below_at(cx_oracle *o, cx_ev *const *items, size_t n, billing_time_t t)
{
    char buf[256];
    size_t i;
    int rc;

    for (i = 0; i < n; i++) {
        if (items[i]->start >= t)
            continue;
        billing_event_set_interval(items[i]->ev, items[i]->start,
                                   items[i]->end < t ? items[i]->end : t);
        ck_assert_int_eq(billing_rater_add(o->r, items[i]->ev, NULL, 0), BILLING_OK);
    }
    ck_assert_int_eq(
        billing_rater_credit_balance(o->r, o->account, t > o->lo ? t - 1 : o->lo, buf, sizeof(buf)),
        BILLING_OK);
    ck_assert_int_eq(billing_decimal_parse(o->q, buf, NULL, 0), BILLING_OK);
    rc = mpq_cmp(o->q, o->level) <= 0;
    for (i = n; i > 0; i--) {
        if (items[i - 1]->start >= t)
            continue;
        ck_assert_int_eq(billing_rater_take_back(o->r, items[i - 1]->ev, NULL, 0), BILLING_OK);
        billing_event_set_interval(items[i - 1]->ev, items[i - 1]->start, items[i - 1]->end);
    }
    return rc;
}

static billing_time_t cx_candidate(const cx_oracle *o, size_t j)
{
    return j == 0 ? o->lo : o->by_end[j - 1]->end;
}

static billing_time_t cx_reached_at(cx_oracle *o)
{
    cx_ev **running = malloc((o->n + 1) * sizeof(*running));
    billing_time_t lo;
    billing_time_t hi;
    billing_time_t mid;
    size_t jlo = 0;
    size_t jhi = o->n;
    size_t base;
    size_t m = 0;
    size_t j;

    if (cx_below_at(o, o->by_end, o->n, o->lo)) {
        free(running);
        return o->lo;
    }
    while (jhi - jlo > 1) {
        j = jlo + (jhi - jlo) / 2;
        if (cx_below_at(o, o->by_end, o->n, cx_candidate(o, j)))
            jhi = j;
        else
            jlo = j;
    }
    lo = cx_candidate(o, jlo);
    hi = cx_candidate(o, jhi);
    for (base = 0; base < o->n && o->by_end[base]->end <= lo; base++)
        ck_assert_int_eq(billing_rater_add(o->r, o->by_end[base]->ev, NULL, 0), BILLING_OK);
    for (j = base; j < o->n; j++) {
        if (o->by_end[j]->start < hi)
            running[m++] = o->by_end[j];
    }
    while (hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        if (cx_below_at(o, running, m, mid))
            hi = mid;
        else
            lo = mid;
    }
    for (j = base; j > 0; j--)
        ck_assert_int_eq(billing_rater_take_back(o->r, o->by_end[j - 1]->ev, NULL, 0), BILLING_OK);
    free(running);
    return hi;
}

static size_t cx_reached_by(const cx_oracle *o, billing_time_t t)
{
    const cx_ev *it;
    size_t best = SIZE_MAX;
    size_t i;

    for (i = 0; i < o->n; i++) {
        it = &o->items[i];
        if (it->start >= t || it->end < t)
            continue;
        if (best == SIZE_MAX || it->start > o->items[best].start ||
            (it->start == o->items[best].start &&
             strcmp(billing_event_id(it->ev), billing_event_id(o->items[best].ev)) < 0))
            best = i;
    }
    if (best != SIZE_MAX)
        return best;
    for (i = 0; i < o->n; i++) {
        it = &o->items[i];
        if (best == SIZE_MAX || it->start < o->items[best].start ||
            (it->start == o->items[best].start &&
             strcmp(billing_event_id(it->ev), billing_event_id(o->items[best].ev)) < 0))
            best = i;
    }
    return best;
}

#define CX_SPAN_EVENTS 48
#define CX_LEVELS 16

/* Span event @i made of @g: in @items (and @evs), in @sorted's place to be sorted by end. */
static void cx_item(cx_ev *items, cx_ev **sorted, const billing_event **evs, int i,
                    const gen_event *g)
{
    items[i].ev = billing_event_new();
    fill(g, items[i].ev);
    items[i].start = g->start;
    items[i].end = g->end;
    evs[i] = items[i].ev;
    sorted[i] = &items[i];
}

/* @o set up for @account: a new rater of @cat (dedupe off), a span starting in the @days days
   from @from, at a random nanosecond. */
static void cx_start(cx_oracle *o, billing_catalog *cat, const char *account, billing_time_t from,
                     int days)
{
    char err[256];

    memset(o, 0, sizeof(*o));
    ck_assert_int_eq(billing_rater_new(cat, &o->r, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_rater_set_dedupe(o->r, 0), BILLING_OK);
    o->account = account;
    o->lo = from + (billing_time_t)(rnd() % ((uint64_t)days * 86400)) * BILLING_NS_PER_SEC +
            (billing_time_t)(rnd() % 1000000000ULL);
}

/*
 * CX_LEVELS crossings of @o's span (@evs, in @o's order) at random levels
 * between below the balance @end_bal after it and above @start_bal at
 * its start, some of them exactly at a balance the span passes through or
 * a minor unit above: each must be the former search's instant and event.
 */
static void cx_levels(cx_oracle *o, const billing_event *const *evs, mpq_srcptr start_bal,
                      mpq_srcptr end_bal)
{
    cx_ev *const *sorted = o->by_end;
    const char *account = o->account;
    size_t n = o->n;
    char err[256];
    billing_time_t at;
    billing_time_t want_at;
    size_t index;
    size_t want_index;
    billing_rater *r;
    billing_event *ev = billing_event_new();
    mpq_t span;
    size_t i;
    int round;

    mpq_init(span);
    mpq_sub(span, start_bal, end_bal);
    for (round = 0; round < CX_LEVELS; round++) {
        /* level = end - span/8 + span * k/1000, k in 0..1249: from below the end to above the
           start, with a random odd denominator now and then (not a finite decimal). */
        mpq_set_ui(o->level, (unsigned long)(rnd() % 1250), 1000);
        mpq_mul(o->level, o->level, span);
        mpq_add(o->level, o->level, end_bal);
        mpq_set_ui(o->q, 1, 8);
        mpq_mul(o->q, o->q, span);
        mpq_sub(o->level, o->level, o->q);
        if (round % 3 == 2) {
            mpq_set_ui(o->q, 1, 3 + 2 * (unsigned long)(rnd() % 50));
            mpq_add(o->level, o->level, o->q);
        }
        /* A rounding edge: exactly the balance at a random instant of the span (where a line's
           rounded amount steps), or one minor unit above it. */
        if (round % 4 == 1) {
            cx_below_at(o, o->by_end, o->n,
                        o->lo + 1 +
                            (billing_time_t)(rnd() % (uint64_t)(sorted[n - 1]->end - o->lo)));
            mpq_set(o->level, o->q);
            if (rnd() % 2 == 0) {
                mpq_set_ui(o->q, 1, 100);
                mpq_add(o->level, o->level, o->q);
            }
        }
        want_at = cx_reached_at(o);
        want_index = cx_reached_by(o, want_at);
        r = o->r;
        if (o->before != NULL) {
            ck_assert_int_eq(billing_rater_new(o->cat, &r, err, sizeof(err)), BILLING_OK);
            ck_assert_int_eq(billing_rater_set_dedupe(r, 0), BILLING_OK);
            for (i = 0; i < o->n_before; i++) {
                fill(&o->before[i], ev);
                ck_assert_int_eq(billing_rater_add(r, ev, err, sizeof(err)), BILLING_OK);
            }
        }
        ck_assert_msg(billing_rater_credit_crossing(r, account, evs, n, o->lo, o->level, &index,
                                                    &at, err, sizeof(err)) == BILLING_OK,
                      "%s", err);
        if (r != o->r)
            billing_rater_destroy(r);
        ck_assert_msg(at == want_at, "round %d: crossing at %" PRId64 ", former search %" PRId64,
                      round, (int64_t)at, (int64_t)want_at);
        ck_assert_uint_eq(index, want_index);
    }
    mpq_clear(span);
    billing_event_destroy(ev);
}

/*
 * billing_rater_credit_crossing gives what the former search gave: random
 * usage before a span start and random events in the span (overlapping,
 * ties in ends and starts), random levels between above the balance at
 * the span's start and below the one after it (including the crossing at
 * the start, and levels the span never reaches), and levels exactly at a
 * balance the span passes through (a rounded line's step, where the
 * solved instant must be exact): the same instant and the same event, and
 * the rater left as it was. The spans start before, inside and after a
 * grant's start (the former search kept where the balance may rise) and
 * across a grant's expiry and month starts, with two grants, overlapping
 * events of four meters at several rates and two price versions.
 * billing_rater_credit_balance_q gives the balances at the span's start
 * and end as billing_rater_credit_balance writes them.
 */
START_TEST(test_credit_crossing_matches_former_search)
{
    billing_catalog *cat = make_catalog();
    const char *account = accounts[_i % N_ACCOUNTS];
    billing_event *ev = billing_event_new();
    const billing_event *evs[CX_SPAN_EVENTS];
    cx_ev *sorted[CX_SPAN_EVENTS];
    cx_ev items[CX_SPAN_EVENTS];
    gen_event g;
    cx_oracle o;
    char err[256];
    char buf[256];
    char *before;
    char *after;
    billing_time_t bounds[4];
    billing_time_t at;
    size_t index;
    size_t n = 0;
    mpq_t start_bal;
    mpq_t end_bal;
    int i;

    rng_state = UINT64_C(4242) + (uint64_t)_i;
    bounds[0] = tu_time("2026-01-15T00:00:00Z");
    bounds[1] = tu_time("2026-02-02T00:00:00Z");
    bounds[2] = tu_time("2026-02-01T00:00:00Z");
    bounds[3] = tu_time("2026-01-31T16:00:00Z"); /* Shanghai's February */
    /* The span starts somewhere in 2026-01-10 .. 2026-02-09 (inside and across the grants). */
    cx_start(&o, cat, account, tu_time("2026-01-10T00:00:00Z"), 30);
    /* Usage before it, held by the rater (in billingd: the stored aggregates). */
    for (i = 0; i < 60; i++) {
        gen(&g, 10000 + i);
        g.account = account;
        if (g.start >= o.lo)
            continue;
        if (g.end > o.lo)
            g.end = o.lo;
        fill(&g, ev);
        ck_assert_msg(billing_rater_add(o.r, ev, err, sizeof(err)) == BILLING_OK, "%s", err);
    }
    /* The span's events: from its start on, some sharing starts and ends. */
    for (i = 0; i < CX_SPAN_EVENTS; i++) {
        gen(&g, i);
        g.account = account;
        g.start = o.lo + (billing_time_t)(rnd() % (12ULL * 86400 * BILLING_NS_PER_SEC));
        if (i > 0 && rnd() % 4 == 0)
            g.start = items[rnd() % (unsigned)i].start;
        g.end = g.start + 1 + (billing_time_t)(rnd() % (2ULL * 86400 * BILLING_NS_PER_SEC));
        if (i > 0 && rnd() % 4 == 0 && items[i - 1].end > g.start)
            g.end = items[i - 1].end;
        /* Some end exactly at a grant's bound or a month's start (the balance read before). */
        if (rnd() % 5 == 0 && bounds[i % 4] > g.start)
            g.end = bounds[i % 4];
        cx_item(items, sorted, evs, i, &g);
        n++;
    }
    o.items = items;
    o.n = n;
    qsort(sorted, n, sizeof(*sorted), cx_end_cmp);
    o.by_end = sorted;
    mpq_inits(o.level, o.q, start_bal, end_bal, NULL);
    /* The balance at the span's start, and after all of it. */
    ck_assert_int_eq(billing_rater_credit_balance(o.r, account, o.lo, buf, sizeof(buf)),
                     BILLING_OK);
    ck_assert_int_eq(billing_decimal_parse(start_bal, buf, NULL, 0), BILLING_OK);
    /* The same balance without text (the alert check's read). */
    ck_assert_int_eq(billing_rater_credit_balance_q(o.r, account, o.lo, o.q), BILLING_OK);
    ck_assert_msg(mpq_equal(o.q, start_bal), "balance_q differs from the balance's text %s", buf);
    ck_assert_int_eq(billing_rater_credit_balance_q(o.r, "no-such-account", o.lo, o.q),
                     BILLING_ERR_UNKNOWN_ACCOUNT);
    for (i = 0; i < (int)n; i++)
        ck_assert_int_eq(billing_rater_add(o.r, evs[i], NULL, 0), BILLING_OK);
    ck_assert_int_eq(
        billing_rater_credit_balance(o.r, account, sorted[n - 1]->end - 1, buf, sizeof(buf)),
        BILLING_OK);
    ck_assert_int_eq(billing_decimal_parse(end_bal, buf, NULL, 0), BILLING_OK);
    ck_assert_int_eq(billing_rater_credit_balance_q(o.r, account, sorted[n - 1]->end - 1, o.q),
                     BILLING_OK);
    ck_assert_msg(mpq_equal(o.q, end_bal), "balance_q differs from the balance's text %s", buf);
    for (i = (int)n; i > 0; i--)
        ck_assert_int_eq(billing_rater_take_back(o.r, evs[i - 1], NULL, 0), BILLING_OK);
    before = invoices_of(o.r, &account, 1, 4);
    cx_levels(&o, evs, start_bal, end_bal);
    /* The rater is as it was. */
    after = invoices_of(o.r, &account, 1, 4);
    ck_assert_str_eq(before, after);
    /* Refused: dedupe on, an event before the span, another account's. */
    ck_assert_int_eq(billing_rater_credit_crossing(o.r, account, evs, n, items[0].start + 1,
                                                   o.level, &index, &at, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rater_credit_crossing(o.r, accounts[(_i + 1) % N_ACCOUNTS], evs, n,
                                                   o.lo, o.level, &index, &at, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    free(before);
    free(after);
    billing_rater_destroy(o.r);
    ck_assert_int_eq(billing_rater_new(cat, &o.r, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_rater_credit_crossing(o.r, account, evs, n, o.lo, o.level, &index, &at,
                                                   err, sizeof(err)),
                     BILLING_ERR_STATE);
    billing_rater_destroy(o.r);
    mpq_clears(o.level, o.q, start_bal, end_bal, NULL);
    for (i = 0; i < (int)n; i++)
        billing_event_destroy(items[i].ev);
    billing_event_destroy(ev);
    billing_catalog_destroy(cat);
}
END_TEST

/* An event of a hand-made span. */
typedef struct cx_spec {
    billing_meter meter;
    const char *model;
    const char *qty;
    const char *start;
    const char *end;
} cx_spec;

/* @o set up for @account of @cat from @from, with the span @spec[0..@n) (items, sorted, evs). */
static void cx_spec_span(cx_oracle *o, billing_catalog *cat, const char *account, const char *from,
                         const cx_spec *spec, int n, cx_ev *items, cx_ev **sorted,
                         const billing_event **evs)
{
    char err[256];
    gen_event g;
    int i;

    memset(o, 0, sizeof(*o));
    ck_assert_int_eq(billing_rater_new(cat, &o->r, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_rater_set_dedupe(o->r, 0), BILLING_OK);
    o->account = account;
    o->lo = tu_time(from);
    for (i = 0; i < n; i++) {
        memset(&g, 0, sizeof(g));
        snprintf(g.id, sizeof(g.id), "spread-%d", i);
        g.account = account;
        snprintf(g.resource, sizeof(g.resource), "r9");
        g.meter = spec[i].meter;
        g.start = tu_time(spec[i].start);
        g.end = tu_time(spec[i].end);
        snprintf(g.qty, sizeof(g.qty), "%s", spec[i].qty);
        g.model = spec[i].model;
        cx_item(items, sorted, evs, i, &g);
    }
    o->items = items;
    o->n = (size_t)n;
    qsort(sorted, o->n, sizeof(*sorted), cx_end_cmp);
    o->by_end = sorted;
    mpq_inits(o->level, o->q, NULL);
}

/*
 * @count levels from @cents0 minor units (of 0.01) up by @step, every third
 * a third of a minor unit above: each crossing of @o's span must be the
 * former search's instant and event. Then @o and its span freed.
 */
static void cx_spec_levels(cx_oracle *o, const billing_event **evs, unsigned long cents0, int count,
                           unsigned long step)
{
    char err[256];
    billing_time_t at;
    billing_time_t want_at;
    size_t index;
    int i;

    for (i = 0; i < count; i++) {
        mpq_set_ui(o->level, cents0 + step * (unsigned long)i, 100);
        mpq_canonicalize(o->level);
        if (i % 3 == 0) {
            mpq_set_ui(o->q, 1, 300);
            mpq_add(o->level, o->level, o->q);
        }
        want_at = cx_reached_at(o);
        ck_assert_msg(billing_rater_credit_crossing(o->r, o->account, evs, o->n, o->lo, o->level,
                                                    &index, &at, err, sizeof(err)) == BILLING_OK,
                      "%s", err);
        ck_assert_msg(at == want_at, "level %d: crossing at %" PRId64 ", former search %" PRId64, i,
                      (int64_t)at, (int64_t)want_at);
        ck_assert_uint_eq(index, cx_reached_by(o, want_at));
    }
    mpq_clears(o->level, o->q, NULL);
    billing_rater_destroy(o->r);
    for (i = 0; i < (int)o->n; i++)
        billing_event_destroy(o->items[i].ev);
}

/* A CNY price book rounded by @mode: RTX4090 at 6.00/h, gpuless at 0.01/h, traffic at
   @traffic[0] per GB from 2025 and @traffic[1] from Jan 16 07:00 UTC; @account (UTC) with
   one usage grant of 1 000.00 from Jan 1 to Apr 1. */
static billing_catalog *spread_catalog(billing_rounding mode, const char *const traffic[2],
                                       const char *account)
{
    const char *const names[2] = {"v1", "v2"};
    billing_catalog *cat = billing_catalog_new();
    char err[256];
    int v;

    ck_assert_int_eq(billing_catalog_set_currency(cat, "CNY", mode, err, 256), BILLING_OK);
    ck_assert_int_eq(
        billing_catalog_add_price_version(cat, "v1", tu_time("2025-01-01T00:00:00Z"), err, 256),
        BILLING_OK);
    ck_assert_int_eq(
        billing_catalog_add_price_version(cat, "v2", tu_time("2026-01-16T07:00:00Z"), err, 256),
        BILLING_OK);
    for (v = 0; v < 2; v++) {
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_GPU, "RTX4090",
                                                  "cn-east-1", "6.00", err, 256),
                         BILLING_OK);
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_GPULESS, "*", "*",
                                                  "0.01", err, 256),
                         BILLING_OK);
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_TRAFFIC, "*", "*",
                                                  traffic[v], err, 256),
                         BILLING_OK);
    }
    ck_assert_int_eq(
        billing_catalog_add_account(cat, account, "CNY", zones[2], "0.06", err, sizeof(err)),
        BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_grant(cat, "g", account, "1000.00",
                                               tu_time("2026-01-01T00:00:00Z"),
                                               tu_time("2026-04-01T00:00:00Z"),
                                               BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                     BILLING_OK);
    return cat;
}

/*
 * A traffic event's bytes are a total for its interval, spread evenly over
 * it (doc/pricing.md): cut at a later instant, less of them fall before a
 * bound and more after it, and the balance can rise with no grant
 * starting and no refund. The crossing must then be the former search's,
 * at every level the span passes through.
 * 0: a price version at 07:00 prices traffic lower (1.00 then 0.10 per
 *    GB), rounded up (check_properties' random case 18: CNY, rounding up,
 *    v2 23 minutes before the crossing).
 * 1: a local month start, one rate, rounded down: January's and
 *    February's exact traffic add up to 100.005 wherever the event is cut,
 *    their rounded amounts to 100.00 or 99.99 as the bytes move to
 *    February, so the charge falls by a minor unit again and again while
 *    the GPU's rises.
 */
START_TEST(test_credit_crossing_traffic_spread_keeps_former_search)
{
    static const struct {
        billing_rounding mode;
        const char *traffic[2];
        const char *from;
        unsigned long cents0; /* the lowest level, minor units */
        unsigned long step;
        cx_spec spec[4];
    } shape[] = {
        {BILLING_ROUND_UP,
         {"1.00", "0.10"},
         "2026-01-16T06:40:00Z",
         98770,
         1,
         {{BILLING_METER_TRAFFIC, "", "10000000000", "2026-01-16T06:40:00Z",
           "2026-01-16T08:00:00Z"},
          {BILLING_METER_GPU, "RTX4090", "1", "2026-01-16T06:40:00Z", "2026-01-16T10:00:00Z"},
          {BILLING_METER_GPULESS, "", "1", "2026-01-16T06:40:00Z", "2026-01-16T07:10:00Z"},
          {BILLING_METER_GPULESS, "", "1", "2026-01-16T06:40:00Z", "2026-01-16T07:25:00Z"}}},
        {BILLING_ROUND_DOWN,
         {"1.00", "1.00"},
         "2026-01-31T23:00:00Z",
         88780,
         2,
         {{BILLING_METER_TRAFFIC, "", "100005000000", "2026-01-31T23:00:00Z",
           "2026-02-01T01:00:00Z"},
          {BILLING_METER_GPU, "RTX4090", "1", "2026-01-31T23:00:00Z", "2026-02-01T03:00:00Z"},
          {BILLING_METER_GPULESS, "", "1", "2026-01-31T23:00:00Z", "2026-02-01T00:10:00Z"},
          {BILLING_METER_GPULESS, "", "1", "2026-01-31T23:00:00Z", "2026-02-01T00:25:00Z"}}},
    };
    static const struct {
        const char *at;
        unsigned long cents; /* the balance there, minor units */
    } premise[] = {{"2026-01-16T07:00:00Z", 98799}, {"2026-01-16T07:20:00Z", 99048}};
    enum { N = 4 };
    const char *account = accounts[2];
    billing_catalog *cat = spread_catalog(shape[_i].mode, shape[_i].traffic, account);
    const billing_event *evs[N];
    cx_ev *sorted[N];
    cx_ev items[N];
    cx_oracle o;
    int k;

    cx_spec_span(&o, cat, account, shape[_i].from, shape[_i].spec, N, items, sorted, evs);
    if (_i == 0) {
        /* With u the hours since 06:40, after 07:00 the charge is 6u of GPU and 1 + 3/u of
           traffic (10/3u GB at 1.00, the rest at 0.10), plus the gpuless lines (0.01 each,
           rounded up): 12.01 at 07:00, 9.52 at 07:20. The balance rises from 987.99 to
           990.48. */
        for (k = 0; k < 2; k++) {
            mpq_set_ui(o.level, premise[k].cents, 100);
            mpq_canonicalize(o.level);
            ck_assert(cx_below_at(&o, o.by_end, o.n, tu_time(premise[k].at)));
            mpq_set_ui(o.level, premise[k].cents - 1, 100);
            mpq_canonicalize(o.level);
            ck_assert(!cx_below_at(&o, o.by_end, o.n, tu_time(premise[k].at)));
        }
    }
    cx_spec_levels(&o, evs, shape[_i].cents0, 300, shape[_i].step);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * A price book in @currency rounded by @mode: rates with more digits than
 * the currency (so every line's rounding matters), two price versions (the
 * second from mid-January), a monthly plan covering RTX4090 GPU usage;
 * each account with a plan when @plans, and 2 to 4 grants of random
 * amounts, windows, kinds and priorities (all before mid-January, some
 * expiring inside the spans).
 */
static billing_catalog *any_catalog(const char *currency, billing_rounding mode, int plans)
{
    static const char *const cny_prices[] = {"0.6037", "1.6009", "0.4813", "0.2071", "0.0113",
                                             "0.5519", "1.7003", "0.3331", "0.2149", "0.0097"};
    static const char *const jpy_prices[] = {"12.37", "33.9",  "9.61", "4.143", "0.227",
                                             "11.03", "35.77", "6.67", "4.29",  "0.193"};
    const char *const *price = strcmp(currency, "JPY") == 0 ? jpy_prices : cny_prices;
    const char *const names[2] = {"v1", "v2"};
    billing_catalog *cat = billing_catalog_new();
    char err[256];
    char id[32];
    char amount[32];
    billing_time_t granted;
    int digits = strcmp(currency, "JPY") == 0 ? 0 : 2;
    int v;
    int i;
    int k;

    ck_assert_int_eq(billing_catalog_set_currency(cat, currency, mode, err, 256), BILLING_OK);
    ck_assert_int_eq(
        billing_catalog_add_price_version(cat, "v1", tu_time("2025-01-01T00:00:00Z"), err, 256),
        BILLING_OK);
    ck_assert_int_eq(
        billing_catalog_add_price_version(cat, "v2", tu_time("2026-01-16T07:00:00Z"), err, 256),
        BILLING_OK);
    ck_assert_int_eq(billing_catalog_add_plan(cat, "rtx-monthly", BILLING_PERIOD_MONTH, "RTX4090",
                                              "cn-east-1", 1, err, 256),
                     BILLING_OK);
    for (v = 0; v < 2; v++) {
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_GPU, "RTX4090",
                                                  "cn-east-1", price[5 * v], err, 256),
                         BILLING_OK);
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_GPU, "A100-80G",
                                                  "cn-east-1", price[5 * v + 1], err, 256),
                         BILLING_OK);
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_GPULESS, "*", "*",
                                                  price[5 * v + 2], err, 256),
                         BILLING_OK);
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_STORAGE, "*", "*",
                                                  price[5 * v + 3], err, 256),
                         BILLING_OK);
        ck_assert_int_eq(billing_catalog_set_rate(cat, names[v], BILLING_METER_TRAFFIC, "*", "*",
                                                  price[5 * v + 4], err, 256),
                         BILLING_OK);
        ck_assert_int_eq(billing_catalog_set_plan_fee(cat, names[v], "rtx-monthly",
                                                      digits ? "2599.00" : "2599", err, 256),
                         BILLING_OK);
    }
    for (i = 0; i < N_ACCOUNTS; i++) {
        ck_assert_int_eq(billing_catalog_add_account(cat, accounts[i], currency, zones[i], "0.06",
                                                     err, sizeof(err)),
                         BILLING_OK);
        if (plans) {
            snprintf(id, sizeof(id), "sub-%d", i);
            ck_assert_int_eq(billing_catalog_add_subscription(
                                 cat, id, accounts[i], "r1", "rtx-monthly",
                                 tu_time("2025-12-20T03:00:00Z"), 3, NULL, err, sizeof(err)),
                             BILLING_OK);
        }
        for (k = 0; k < 2 + (int)(rnd() % 3); k++) {
            snprintf(id, sizeof(id), "g-%d-%d", i, k);
            /* 5 to 40 major units (times 100 in JPY) */
            if (digits)
                snprintf(amount, sizeof(amount), "%d.%02d", 5 + (int)(rnd() % 36),
                         (int)(rnd() % 100));
            else
                snprintf(amount, sizeof(amount), "%d", 500 + (int)(rnd() % 3600));
            granted = tu_time("2026-01-01T00:00:00Z") +
                      (billing_time_t)(rnd() % (14ULL * 86400)) * BILLING_NS_PER_SEC;
            ck_assert_int_eq(
                billing_catalog_add_grant(
                    cat, id, accounts[i], amount, granted,
                    granted + (billing_time_t)(60 + rnd() % 40) * 86400 * BILLING_NS_PER_SEC,
                    rnd() % 3 == 0 ? BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION
                                   : BILLING_CHARGE_USAGE,
                    (int)(rnd() % 2), err, sizeof(err)),
                BILLING_OK);
        }
    }
    return cat;
}

#define CX_ANY_EVENTS 32

/*
 * Over random price books (CNY and JPY, every rounding mode, with and
 * without plans, several grants), random usage before the span (two
 * meters: the span's events make new aggregates of the month) and random
 * spans in January (some running into February), every crossing is the
 * former search's, which reads each balance whole
 * (billing_rater_credit_balance). Each crossing is asked of a new rater
 * holding only the usage before the span.
 */
START_TEST(test_credit_crossing_any_catalog_matches_former_search)
{
    billing_catalog *cat;
    const char *account = accounts[_i % N_ACCOUNTS];
    billing_event *ev = billing_event_new();
    const billing_event *evs[CX_ANY_EVENTS];
    cx_ev *sorted[CX_ANY_EVENTS];
    cx_ev items[CX_ANY_EVENTS];
    gen_event before[40];
    gen_event g;
    cx_oracle o;
    char err[256];
    mpq_t start_bal;
    mpq_t end_bal;
    int i;

    rng_state = UINT64_C(977) + (uint64_t)_i;
    cat = any_catalog(_i % 2 ? "JPY" : "CNY", (billing_rounding)(_i / 2 % 6), _i % 3 != 2);
    /* After every grant's start: the balance only falls in the span. */
    cx_start(&o, cat, account, tu_time("2026-01-15T00:00:00Z"), 14);
    /* Usage before it of two meters: the span's events make new aggregates of the month. */
    for (i = 0; i < 40; i++) {
        gen(&g, 10000 + i);
        g.account = account;
        if (g.start >= o.lo || g.meter == BILLING_METER_GPULESS || g.meter == BILLING_METER_TRAFFIC)
            continue;
        if (g.end > o.lo)
            g.end = o.lo;
        fill(&g, ev);
        ck_assert_msg(billing_rater_add(o.r, ev, err, sizeof(err)) == BILLING_OK, "%s", err);
        before[o.n_before++] = g;
    }
    o.cat = cat;
    o.before = before;
    for (i = 0; i < CX_ANY_EVENTS; i++) {
        gen(&g, i);
        g.account = account;
        g.start = o.lo + (billing_time_t)(rnd() % (3ULL * 86400 * BILLING_NS_PER_SEC));
        if (i > 0 && rnd() % 4 == 0)
            g.start = items[rnd() % (unsigned)i].start;
        g.end = g.start + 1 + (billing_time_t)(rnd() % (86400ULL * BILLING_NS_PER_SEC));
        cx_item(items, sorted, evs, i, &g);
    }
    o.items = items;
    o.n = CX_ANY_EVENTS;
    qsort(sorted, o.n, sizeof(*sorted), cx_end_cmp);
    o.by_end = sorted;
    mpq_inits(o.level, o.q, start_bal, end_bal, NULL);
    ck_assert_int_eq(billing_rater_credit_balance_q(o.r, account, o.lo, start_bal), BILLING_OK);
    for (i = 0; i < (int)o.n; i++)
        ck_assert_int_eq(billing_rater_add(o.r, evs[i], NULL, 0), BILLING_OK);
    ck_assert_int_eq(
        billing_rater_credit_balance_q(o.r, account, sorted[o.n - 1]->end - 1, end_bal),
        BILLING_OK);
    for (i = (int)o.n; i > 0; i--)
        ck_assert_int_eq(billing_rater_take_back(o.r, evs[i - 1], NULL, 0), BILLING_OK);
    cx_levels(&o, evs, start_bal, end_bal);
    mpq_clears(o.level, o.q, start_bal, end_bal, NULL);
    billing_rater_destroy(o.r);
    for (i = 0; i < (int)o.n; i++)
        billing_event_destroy(items[i].ev);
    billing_event_destroy(ev);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * Where the balance rises inside the span (a grant starting in it), the
 * former search's answer is kept even though the balance is at or below
 * the level at more than one stretch: trial credit spent before the
 * prepaid grant starts, the prepaid credit spent after it. A search that
 * looked for the first instant at or below would answer the early
 * stretch differently from the former binary search's probes.
 */
START_TEST(test_credit_crossing_rise_keeps_former_search)
{
    static const struct {
        const char *model;
        const char *qty;
        const char *start;
        const char *end;
    } spec[] = {
        {"A100-80G", "1", "2026-01-10T00:00:00Z", "2026-01-11T00:00:00Z"},
        {"RTX4090", "1", "2026-01-11T00:00:00Z", "2026-01-12T00:00:00Z"},
        {"RTX4090", "1", "2026-01-12T00:00:00Z", "2026-01-13T00:00:00Z"},
        {"RTX4090", "1", "2026-01-16T00:00:00Z", "2026-01-17T00:00:00Z"},
        {"RTX4090", "1", "2026-01-17T00:00:00Z", "2026-01-18T00:00:00Z"},
        {"A100-80G", "32", "2026-01-20T00:00:00Z", "2026-01-24T00:00:00Z"},
    };
    enum { N = sizeof(spec) / sizeof(spec[0]) };
    billing_catalog *cat = make_catalog();
    const char *account = accounts[2];
    const billing_event *evs[N];
    cx_ev *sorted[N];
    cx_ev items[N];
    gen_event g;
    cx_oracle o;
    char err[256];
    billing_time_t at;
    billing_time_t want_at;
    size_t index;
    int i;

    memset(&o, 0, sizeof(o));
    ck_assert_int_eq(billing_rater_new(cat, &o.r, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_rater_set_dedupe(o.r, 0), BILLING_OK);
    o.account = account;
    o.lo = tu_time("2026-01-10T00:00:00Z");
    for (i = 0; i < N; i++) {
        memset(&g, 0, sizeof(g));
        snprintf(g.id, sizeof(g.id), "rise-%d", i);
        g.account = account;
        snprintf(g.resource, sizeof(g.resource), "r9");
        g.meter = BILLING_METER_GPU;
        g.start = tu_time(spec[i].start);
        g.end = tu_time(spec[i].end);
        snprintf(g.qty, sizeof(g.qty), "%s", spec[i].qty);
        g.model = spec[i].model;
        cx_item(items, sorted, evs, i, &g);
    }
    o.items = items;
    o.n = N;
    qsort(sorted, N, sizeof(*sorted), cx_end_cmp);
    o.by_end = sorted;
    mpq_inits(o.level, o.q, NULL);
    mpq_set_ui(o.level, 5, 1);
    /* Below at the end of the first event (trial spent), above at the fourth (prepaid). */
    ck_assert(cx_below_at(&o, o.by_end, o.n, items[0].end));
    ck_assert(!cx_below_at(&o, o.by_end, o.n, items[3].end));
    ck_assert(cx_below_at(&o, o.by_end, o.n, items[N - 1].end));
    want_at = cx_reached_at(&o);
    ck_assert_msg(billing_rater_credit_crossing(o.r, account, evs, N, o.lo, o.level, &index, &at,
                                                err, sizeof(err)) == BILLING_OK,
                  "%s", err);
    ck_assert_int_eq(at, want_at);
    ck_assert_uint_eq(index, cx_reached_by(&o, want_at));
    mpq_clears(o.level, o.q, NULL);
    billing_rater_destroy(o.r);
    for (i = 0; i < N; i++)
        billing_event_destroy(items[i].ev);
    billing_catalog_destroy(cat);
}
END_TEST

/* One grant's remainder from billing_rater_credit_grants. */
typedef struct grant_left {
    const char *grant;
    long long left;
    int found;
} grant_left;

static int find_grant(void *arg, const char *grant, const char *remaining,
                      billing_time_t expires_at)
{
    grant_left *g = arg;

    (void)expires_at;
    if (strcmp(grant, g->grant) != 0)
        return 0;
    g->left = minor(remaining);
    g->found = 1;
    return 1;
}

/*
 * The live balance prices its months for amounts only (unreduced, no
 * quantities: bl_month_compute_amounts), the invoice its own month in full:
 * each grant's remainder read live inside a month, from a rater that never
 * made an invoice, is what that month's invoice (another rater, the same
 * events) says the grant has left. Lines with parts in several credit
 * epochs, traffic cut at month and version starts (rational sums beside
 * integer ones on one line), storage decimals.
 */
START_TEST(test_live_grants_match_invoice_remaining)
{
    static const char *const instants[4][2] = {{"2026-01-15T00:00:00Z", "2026-01-25T00:00:00Z"},
                                               {"2026-02-01T12:00:00Z", "2026-02-25T00:00:00Z"},
                                               {"2026-03-05T00:00:00Z", "2026-03-15T00:00:00Z"},
                                               {"2026-04-15T00:00:00Z", "2026-04-15T00:00:00Z"}};
    billing_catalog *cat = make_catalog();
    billing_event *ev = billing_event_new();
    billing_rater *live;
    billing_rater *inv_r;
    billing_invoice *inv;
    gen_event g;
    grant_left left;
    char err[256];
    char id[32];
    size_t i;
    size_t checked = 0;
    int a;
    int k;
    int m;
    int n;

    /* Grants larger than the usage of their windows: each pays exactly the pools of the epochs
       it covers, so what it has left depends on every line's parts, not only on the totals. */
    for (a = 0; a < N_ACCOUNTS; a++) {
        snprintf(id, sizeof(id), "window-%d", a);
        ck_assert_int_eq(billing_catalog_add_grant(cat, id, accounts[a], "100000.00",
                                                   tu_time("2026-01-10T07:00:00Z"),
                                                   tu_time("2026-01-20T00:00:00Z"),
                                                   BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                         BILLING_OK);
        snprintf(id, sizeof(id), "across-%d", a);
        ck_assert_int_eq(billing_catalog_add_grant(cat, id, accounts[a], "100000.00",
                                                   tu_time("2026-02-20T00:00:00Z"),
                                                   tu_time("2026-03-10T00:00:00Z"),
                                                   BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                         BILLING_OK);
    }
    ck_assert_int_eq(billing_rater_new(cat, &live, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_rater_new(cat, &inv_r, err, sizeof(err)), BILLING_OK);
    rng_state = UINT64_C(4711) + (uint64_t)_i;
    for (n = 0; n < N_EVENTS; n++) {
        gen(&g, n);
        add(live, &g, ev);
        add(inv_r, &g, ev);
    }
    for (a = 0; a < N_ACCOUNTS; a++) {
        for (m = 1; m <= 4; m++) {
            ck_assert_int_eq(
                billing_rater_invoice(inv_r, accounts[a], 2026, m, &inv, err, sizeof(err)),
                BILLING_OK);
            for (i = 0; i < billing_invoice_credit_count(inv); i++) {
                for (k = 0; k < 2; k++) {
                    left.grant = billing_invoice_credit_grant(inv, i);
                    left.found = 0;
                    ck_assert_int_eq(billing_rater_credit_grants(live, accounts[a],
                                                                 tu_time(instants[m - 1][k]),
                                                                 find_grant, &left),
                                     BILLING_OK);
                    if (!left.found)
                        continue; /* not valid at that instant */
                    ck_assert_msg(left.left == minor(billing_invoice_credit_remaining(inv, i)),
                                  "%s, month %d, grant %s: live %lld, invoice %s", accounts[a], m,
                                  left.grant, left.left, billing_invoice_credit_remaining(inv, i));
                    checked++;
                }
            }
            billing_invoice_destroy(inv);
        }
    }
    ck_assert_uint_gt(checked, 3);
    billing_event_destroy(ev);
    billing_rater_destroy(live);
    billing_rater_destroy(inv_r);
    billing_catalog_destroy(cat);
}
END_TEST

/*
 * billing_rater_take_back through the memo (an event inside one memoised
 * aggregate) or the walk: taking back a random half of the events leaves
 * the invoices of a rater that only ever held the other half, and taking
 * back the rest those of a rater that held nothing (no month left with an
 * emptied aggregate).
 */
START_TEST(test_take_back_leaves_the_other_half)
{
    billing_catalog *cat = make_catalog();
    billing_event *ev = billing_event_new();
    gen_event *evs = calloc(N_EVENTS, sizeof(*evs));
    int *kept = calloc(N_EVENTS, sizeof(*kept));
    billing_rater *r;
    char err[256];
    char *after;
    char *fresh;
    int n_kept = 0;
    int n;

    ck_assert_int_eq(billing_rater_new(cat, &r, err, sizeof(err)), BILLING_OK);
    billing_rater_set_dedupe(r, 0);
    rng_state = UINT64_C(99) + (uint64_t)_i;
    for (n = 0; n < N_EVENTS; n++) {
        gen(&evs[n], n);
        add(r, &evs[n], ev);
    }
    for (n = 0; n < N_EVENTS; n++) {
        if (rnd() % 2 == 0) {
            kept[n_kept++] = n;
            continue;
        }
        fill(&evs[n], ev);
        ck_assert_int_eq(billing_rater_take_back(r, ev, err, sizeof(err)), BILLING_OK);
    }
    ck_assert_uint_eq(billing_rater_event_count(r), (uint64_t)n_kept);
    after = all_invoices(r);
    fresh = rate_all(cat, evs, kept, n_kept);
    ck_assert_str_eq(after, fresh);
    free(after);
    free(fresh);
    /* Then the rest: every aggregate emptied, as if nothing had been rated. */
    for (n = 0; n < n_kept; n++) {
        fill(&evs[kept[n]], ev);
        ck_assert_int_eq(billing_rater_take_back(r, ev, err, sizeof(err)), BILLING_OK);
    }
    ck_assert_uint_eq(billing_rater_event_count(r), 0);
    after = all_invoices(r);
    fresh = rate_all(cat, evs, kept, 0);
    ck_assert_str_eq(after, fresh);
    free(after);
    free(fresh);
    free(kept);
    free(evs);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

static Suite *properties_suite(void)
{
    Suite *s = suite_create("properties");
    TCase *tc = tcase_create("random");

    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_order_independence, 0, 3);
    tcase_add_loop_test(tc, test_split_invariance, 0, 3);
    tcase_add_loop_test(tc, test_reconciliation_and_credit_bounds, 0, 3);
    tcase_add_loop_test(tc, test_replay_is_idempotent, 0, 2);
    tcase_add_loop_test(tc, test_remove_undoes_add, 0, 3);
    tcase_add_test(tc, test_remove_refuses_misuse);
    tcase_add_loop_test(tc, test_invoice_order_and_changes, 0, 3);
    tcase_add_loop_test(tc, test_months_kept_change_nothing, 0, 4);
    tcase_add_test(tc, test_dedupe_many_ids);
    tcase_add_loop_test(tc, test_aggregates_round_trip, 0, 3);
    tcase_add_loop_test(tc, test_dense_memo_matches_general_path, 0, 3);
    tcase_add_loop_test(tc, test_credit_crossing_matches_former_search, 0, 12);
    tcase_add_test(tc, test_credit_crossing_rise_keeps_former_search);
    tcase_add_loop_test(tc, test_credit_crossing_traffic_spread_keeps_former_search, 0, 2);
    tcase_add_loop_test(tc, test_credit_crossing_any_catalog_matches_former_search, 0, 30);
    tcase_add_loop_test(tc, test_live_grants_match_invoice_remaining, 0, 4);
    tcase_add_loop_test(tc, test_take_back_leaves_the_other_half, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(properties_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
