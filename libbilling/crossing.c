/*
 * crossing.c - when a credit balance crosses a level: the first instant
 * at which the usage before it, of a span's events cut there, leaves the
 * live balance at or below the level, and the event that took it there.
 * See billing_rater_credit_crossing in billing.h.
 *
 * The balance only falls as the instant grows (usage only lowers it), so
 * the instant is found by two binary searches: first among the span's
 * start and the events' ends, then to the nanosecond between the last
 * candidate above the level and the first at or below, where only the
 * events running then change. Each probe rates the events starting
 * before the instant, cut there, on top of what the rater holds, reads
 * the exact balance (no text) and takes them back: the rater is left as
 * it was. Cost: O(n log n) adds and take-backs for the first search and
 * O(running * 63) for the second.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "invoice.h"

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
                                             billing_time_t from, const mpq_t level,
                                             size_t *index, billing_time_t *at, char *errbuf,
                                             size_t errsize)
{
    cx_item *by_end;
    cx x;
    size_t i;
    int rc;

    if (r == NULL || account == NULL || (events == NULL && n > 0) || index == NULL || at == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "credit crossing: a NULL argument");
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
    mpq_init(x.q);
    rc = reached_at(&x, by_end, n, at);
    mpq_clear(x.q);
    free(by_end);
    if (rc != 0)
        return x.st;
    *index = reached_by(events, n, *at);
    return BILLING_OK;
}
