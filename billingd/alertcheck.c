/*
 * alertcheck.c - credit threshold crossings of a batch. See alertcheck.h.
 *
 * Cost per batch: each record is decoded twice (once to find its account,
 * once to rate it), one query reads the grants of every account of the
 * batch, one rater serves them all, and the stored aggregates are read
 * per account with credit (bs_aggregates_rate); balances are computed
 * twice per segment (usually one per account and batch), and the
 * crossing instant is searched only for a threshold actually crossed.
 * Amounts are exact GMP rationals; nothing is rounded.
 */
#include "config.h"

#include <gmp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alertcheck.h"
#include "eventjson.h"
#include "takeback.h"

#define MSG_MAX 512

/* $1: the batch's accounts; instants as microseconds since the epoch, exact (numeric). */
#define SQL_GRANTS                                                                                 \
    "SELECT g.account_id, g.amount::text,"                                                         \
    " (extract(epoch FROM g.granted_at) * 1000000)::bigint,"                                       \
    " (extract(epoch FROM g.expires_at) * 1000000)::bigint, a.currency"                            \
    " FROM billing.credit_grants g JOIN billing.accounts a ON a.id = g.account_id"                 \
    " WHERE g.account_id = ANY($1::text[]) ORDER BY g.account_id COLLATE \"C\""

/* Prepared once per connection: it runs in every batch's transaction. */
#define STMT_GRANTS "bd_alert_grants"

#define MEMO_SLOTS (1u << 17)

/* An account that has used all of @granted (slot empty: NULL account). */
typedef struct memo_slot {
    char *account;
    char *granted;
} memo_slot;

struct bd_alert_memo {
    memo_slot *slots;
    size_t used;
};

/* A new record of the batch and its account (decoded once to sort). */
typedef struct rec_ref {
    char *account;
    size_t index;
} rec_ref;

/* One account with credit and its events of the batch, in arrival order. */
typedef struct acct {
    const char *id;
    const char *currency;
    const PGresult *grants;
    int row0;
    int rows;
    const billing_zone *zone;
    billing_event **evs;
    size_t m;
} acct;

typedef struct check {
    billing_rater *r;
    bd_alert_memo *memo;
    const int *pcts;
    size_t n_pcts;
    int max_pct;
    bd_crossing_fn fn;
    void *arg;
    mpq_t before;
    mpq_t after;
    mpq_t level;
    mpq_t total;
    mpq_t q;
    char granted[BD_AMOUNT_MAX];
} check;

/* ---------------------------------------------------------------------- */
/* Exact amounts                                                           */
/* ---------------------------------------------------------------------- */

/* "12.5", "-3", "7/3" into @q; 0 or -1. */
static int q_parse(mpq_t q, const char *text)
{
    char digits[BD_AMOUNT_MAX];
    const char *dot = strchr(text, '.');
    size_t frac;
    size_t n;

    if (strchr(text, '/') != NULL || dot == NULL) {
        if (mpq_set_str(q, text, 10) != 0)
            return -1;
        mpq_canonicalize(q);
        return 0;
    }
    n = (size_t)(dot - text);
    frac = strlen(dot + 1);
    if (n + frac + 1 > sizeof(digits))
        return -1;
    memcpy(digits, text, n);
    memcpy(digits + n, dot + 1, frac + 1);
    if (mpz_set_str(mpq_numref(q), digits, 10) != 0)
        return -1;
    mpz_ui_pow_ui(mpq_denref(q), 10, frac);
    mpq_canonicalize(q);
    return 0;
}

/* @q (a finite decimal) as text, at most 12 fraction digits, into @buf. */
static void q_decimal(const mpq_t q, char *buf, size_t size)
{
    mpz_t scaled;
    mpz_t scale;
    char *s;
    size_t len;
    int k;

    mpz_init(scaled);
    mpz_init(scale);
    for (k = 0; k < 12; k++) {
        mpz_ui_pow_ui(scale, 10, (unsigned long)k);
        mpz_mul(scaled, mpq_numref(q), scale);
        if (mpz_divisible_p(scaled, mpq_denref(q)))
            break;
    }
    /* Past 12 digits (not a finite decimal here): truncated toward zero. */
    mpz_ui_pow_ui(scale, 10, (unsigned long)k);
    mpz_mul(scaled, mpq_numref(q), scale);
    mpz_tdiv_q(scaled, scaled, mpq_denref(q));
    s = mpz_get_str(NULL, 10, scaled);
    len = strlen(s);
    if (k == 0)
        snprintf(buf, size, "%s", s);
    else if (len > (size_t)k)
        snprintf(buf, size, "%.*s.%s", (int)(len - (size_t)k), s, s + len - (size_t)k);
    else
        snprintf(buf, size, "0.%0*d%s", k - (int)len, 0, s);
    free(s);
    mpz_clear(scaled);
    mpz_clear(scale);
}

/* ---------------------------------------------------------------------- */
/* Memo of exhausted accounts                                              */
/* ---------------------------------------------------------------------- */

bd_alert_memo *bd_alert_memo_new(void)
{
    bd_alert_memo *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return NULL;
    m->slots = calloc(MEMO_SLOTS, sizeof(*m->slots));
    if (m->slots == NULL) {
        free(m);
        return NULL;
    }
    return m;
}

void bd_alert_memo_clear(bd_alert_memo *m)
{
    size_t i;

    for (i = 0; m != NULL && i < MEMO_SLOTS; i++) {
        free(m->slots[i].account);
        free(m->slots[i].granted);
        m->slots[i].account = NULL;
        m->slots[i].granted = NULL;
    }
    if (m != NULL)
        m->used = 0;
}

void bd_alert_memo_free(bd_alert_memo *m)
{
    if (m == NULL)
        return;
    bd_alert_memo_clear(m);
    free(m->slots);
    free(m);
}

/* The slot of @account: its own, or the empty one where it would go (linear probing). */
static memo_slot *memo_slot_of(bd_alert_memo *m, const char *account)
{
    uint64_t h = UINT64_C(14695981039346656037);
    const unsigned char *p;
    size_t i;

    for (p = (const unsigned char *)account; *p != '\0'; p++)
        h = (h ^ *p) * UINT64_C(1099511628211);
    /* Never full (BD_MEMO_MAX < MEMO_SLOTS): the probe ends on an empty slot. */
    for (i = (size_t)(h & (MEMO_SLOTS - 1));; i = (i + 1) & (MEMO_SLOTS - 1)) {
        if (m->slots[i].account == NULL || strcmp(m->slots[i].account, account) == 0)
            return &m->slots[i];
    }
}

/* Has @account used all of @granted already? */
static int memo_exhausted(bd_alert_memo *m, const char *account, const char *granted)
{
    memo_slot *s;

    if (m == NULL)
        return 0;
    s = memo_slot_of(m, account);
    return s->account != NULL && strcmp(s->granted, granted) == 0;
}

/* Remember that @account has used all of @granted (silently not when full or out of memory). */
static void memo_note(bd_alert_memo *m, const char *account, const char *granted)
{
    memo_slot *s;
    char *g;

    if (m == NULL)
        return;
    s = memo_slot_of(m, account);
    if (s->account == NULL) {
        if (m->used == BD_MEMO_MAX)
            return;
        s->account = strdup(account);
        if (s->account == NULL)
            return;
        m->used++;
    }
    g = strdup(granted);
    if (g == NULL)
        return;
    free(s->granted);
    s->granted = g;
}

/* ---------------------------------------------------------------------- */
/* Segments: same month, same grants valid                                 */
/* ---------------------------------------------------------------------- */

static billing_time_t grant_time(const acct *a, int row, int col)
{
    return (billing_time_t)strtoll(PQgetvalue(a->grants, a->row0 + row, col), NULL, 10) * 1000;
}

static int grant_valid(const acct *a, int row, billing_time_t t)
{
    return grant_time(a, row, 2) <= t && t < grant_time(a, row, 3);
}

static int same_segment(const acct *a, billing_time_t t1, billing_time_t t2)
{
    int y1;
    int m1;
    int y2;
    int m2;
    int row;

    billing_zone_year_month(a->zone, t1, &y1, &m1);
    billing_zone_year_month(a->zone, t2, &y2, &m2);
    if (y1 != y2 || m1 != m2)
        return 0;
    for (row = 0; row < a->rows; row++) {
        if (grant_valid(a, row, t1) != grant_valid(a, row, t2))
            return 0;
    }
    return 1;
}

/* The credit granted and valid at @t into k->total and k->granted; 0 or -1. */
static int granted_at(check *k, const acct *a, billing_time_t t)
{
    int row;

    mpq_set_ui(k->total, 0, 1);
    for (row = 0; row < a->rows; row++) {
        if (!grant_valid(a, row, t))
            continue;
        if (q_parse(k->q, PQgetvalue(a->grants, a->row0 + row, 1)) != 0)
            return -1;
        mpq_add(k->total, k->total, k->q);
    }
    q_decimal(k->total, k->granted, sizeof(k->granted));
    return 0;
}

/* The instant at which a segment is read: an event's last nanosecond. */
static billing_time_t seen_at(const billing_event *ev)
{
    return billing_event_end(ev) - 1;
}

/* ---------------------------------------------------------------------- */
/* Balances                                                                */
/* ---------------------------------------------------------------------- */

/* Balance of @a at @now into @q (and @text when non-NULL); 0 or -1. */
static int balance(check *k, const acct *a, billing_time_t now, mpq_t q, char *text)
{
    char buf[BD_AMOUNT_MAX];

    if (billing_rater_credit_balance(k->r, a->id, now, buf, sizeof(buf)) != BILLING_OK)
        return -1;
    if (text != NULL)
        snprintf(text, BD_AMOUNT_MAX, "%s", buf);
    return q_parse(q, buf);
}

/* Is the balance at @now at or below k->level? -1 on error. */
static int at_or_below(check *k, const acct *a, billing_time_t now)
{
    if (balance(k, a, now, k->q, NULL) != 0)
        return -1;
    return mpq_cmp(k->q, k->level) <= 0;
}

/* Rate or take back events [@from, @to) of @a. */
static int add_events(check *k, const acct *a, size_t from, size_t to)
{
    size_t i;

    for (i = from; i < to; i++) {
        if (billing_rater_add(k->r, a->evs[i], NULL, 0) != BILLING_OK)
            return -1;
    }
    return 0;
}

static void take_back_events(check *k, const acct *a, size_t from, size_t to)
{
    size_t i;

    /* Each was rated (stored by the batch or added here): unchecked take-back. */
    for (i = to; i > from; i--)
        bl_rater_take_back(k->r, a->evs[i - 1], NULL, 0);
}

/*
 * With events before @c rated, the first instant in (start, end] of @c
 * at which @c rated from its start up to it leaves the balance at @now at
 * or below the level (it is at end). Binary search: the balance only
 * falls as the interval grows.
 */
static int crossing_instant(check *k, const acct *a, size_t c, billing_time_t now,
                            billing_time_t *out)
{
    billing_event *ev = a->evs[c];
    billing_time_t start = billing_event_start(ev);
    billing_time_t end = billing_event_end(ev);
    billing_time_t lo = start;
    billing_time_t hi = end;
    billing_time_t mid;
    int below;

    while (hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        billing_event_set_interval(ev, start, mid);
        if (billing_rater_add(k->r, ev, NULL, 0) != BILLING_OK)
            goto error;
        below = at_or_below(k, a, now);
        bl_rater_take_back(k->r, ev, NULL, 0);
        if (below < 0)
            goto error;
        if (below)
            hi = mid;
        else
            lo = mid;
    }
    billing_event_set_interval(ev, start, end);
    *out = hi;
    return 0;
error:
    billing_event_set_interval(ev, start, end);
    return -1;
}

/* The events of [@from, @c] that end with @c: the usage running when @c ends. */
static size_t running_with(const acct *a, size_t from, size_t c, const billing_event **out)
{
    size_t n = 0;
    size_t i;

    for (i = from; i <= c; i++) {
        if (billing_event_end(a->evs[i]) == billing_event_end(a->evs[c]))
            out[n++] = a->evs[i];
    }
    return n;
}

/*
 * Segment [@from, @to) of @a crosses k->level (all of it rated, the
 * balance at @now at or below, above before it): find the event that
 * crosses and when, report it, and leave the segment rated.
 */
static int report(check *k, const acct *a, size_t from, size_t to, billing_time_t now, int pct)
{
    char balance_text[BD_AMOUNT_MAX];
    char threshold[BD_AMOUNT_MAX];
    const billing_event **running = NULL;
    bd_crossing x;
    size_t c = to - 1;
    int below;
    int rc = -1;

    /* Take events back from the last until the balance is above the level again. */
    for (;;) {
        bl_rater_take_back(k->r, a->evs[c], NULL, 0);
        below = at_or_below(k, a, now);
        if (below <= 0 || c == from)
            break;
        c--;
    }
    if (below < 0)
        goto out;
    memset(&x, 0, sizeof(x));
    if (crossing_instant(k, a, c, now, &x.crossed_at) != 0 || add_events(k, a, c, c + 1) != 0 ||
        balance(k, a, now, k->q, balance_text) != 0)
        goto out;
    running = calloc(c - from + 1, sizeof(*running));
    if (running == NULL)
        goto out;
    x.exhausted = INT64_MAX;
    billing_rater_credit_exhaustion(k->r, a->id, billing_event_end(a->evs[c]), running,
                                    running_with(a, from, c, running), &x.exhausted, NULL, 0);
    q_decimal(k->level, threshold, sizeof(threshold));
    x.account = a->id;
    x.currency = a->currency;
    x.granted = k->granted;
    x.balance = balance_text;
    x.threshold = threshold;
    x.event_id = billing_event_id(a->evs[c]);
    x.pct = pct;
    if (k->fn(k->arg, &x) != 0)
        goto out;
    rc = add_events(k, a, c + 1, to);
out:
    free(running);
    return rc;
}

/* The balance at which @pct% of the credit is used: total * (100 - pct) / 100, in k->level. */
static void level_of(check *k, int pct)
{
    mpq_set_ui(k->level, (unsigned long)(100 - pct), 100);
    mpq_mul(k->level, k->level, k->total);
}

/* Rate segment [@from, @to) of @a (read at @now) and report each threshold it crosses. */
static int check_segment(check *k, const acct *a, size_t from, size_t to, billing_time_t now)
{
    size_t i;

    if (granted_at(k, a, now) != 0 || balance(k, a, now, k->before, NULL) != 0 ||
        add_events(k, a, from, to) != 0)
        return -1;
    if (mpq_sgn(k->total) <= 0)
        return 0;
    if (balance(k, a, now, k->after, NULL) != 0)
        return -1;
    for (i = 0; i < k->n_pcts; i++) {
        level_of(k, k->pcts[i]);
        if (mpq_cmp(k->before, k->level) > 0 && mpq_cmp(k->after, k->level) <= 0 &&
            report(k, a, from, to, now, k->pcts[i]) != 0)
            return -1;
    }
    level_of(k, k->max_pct);
    if (mpq_cmp(k->after, k->level) <= 0)
        memo_note(k->memo, a->id, k->granted);
    return 0;
}

/*
 * Can the batch's events of @a cross anything? Not when no credit is
 * valid at any of them (expired or future grants only), nor when the
 * memo says every threshold of the credit valid at each was crossed.
 */
static int can_cross(check *k, const acct *a)
{
    size_t i;

    for (i = 0; i < a->m; i++) {
        if (granted_at(k, a, seen_at(a->evs[i])) != 0)
            return 1;
        if (mpq_sgn(k->total) > 0 && !memo_exhausted(k->memo, a->id, k->granted))
            return 1;
    }
    return 0;
}

/* Every segment of @a's events, from the state before the batch. */
static int check_account(check *k, const acct *a)
{
    size_t from = 0;
    size_t to;
    billing_time_t now;

    take_back_events(k, a, 0, a->m);
    while (from < a->m) {
        now = seen_at(a->evs[from]);
        for (to = from + 1; to < a->m && same_segment(a, now, seen_at(a->evs[to])); to++)
            ;
        if (check_segment(k, a, from, to, now) != 0)
            return -1;
        from = to;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The batch                                                               */
/* ---------------------------------------------------------------------- */

/* Decode a record in its format (protobuf from Kafka, JSON from files); 0 or -1. */
static int decode_record(billing_event *ev, const bs_record *rec)
{
    billing_status st;

    if (rec->format == BS_RECORD_PROTOBUF)
        st = billing_event_decode(ev, rec->data, rec->len, NULL, 0);
    else
        st = bc_event_parse_json(ev, rec->data, rec->len, NULL, 0);
    return st == BILLING_OK ? 0 : -1;
}

static int ref_cmp(const void *x, const void *y)
{
    const rec_ref *a = x;
    const rec_ref *b = y;
    int c = strcmp(a->account, b->account);

    if (c != 0)
        return c;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The batch's new records by account, then arrival; count in *@n_refs. */
static rec_ref *sorted_refs(const bs_record *recs, const bs_record_result *res, size_t n,
                            size_t *n_refs)
{
    rec_ref *refs = calloc(n > 0 ? n : 1, sizeof(*refs));
    billing_event *ev = billing_event_new();
    size_t k = 0;
    size_t i;

    if (refs == NULL || ev == NULL)
        goto error;
    for (i = 0; i < n; i++) {
        if (res[i].outcome != BS_RECORD_NEW || decode_record(ev, &recs[i]) != 0)
            continue;
        refs[k].account = strdup(billing_event_account(ev));
        refs[k].index = i;
        if (refs[k++].account == NULL)
            goto error;
    }
    qsort(refs, k, sizeof(*refs), ref_cmp);
    billing_event_destroy(ev);
    *n_refs = k;
    return refs;
error:
    while (refs != NULL && k > 0)
        free(refs[--k].account);
    free(refs);
    billing_event_destroy(ev);
    return NULL;
}

static void refs_free(rec_ref *refs, size_t n)
{
    size_t i;

    for (i = 0; refs != NULL && i < n; i++)
        free(refs[i].account);
    free(refs);
}

/* The batch's distinct accounts (@refs sorted) as a PostgreSQL text[] literal (malloc'd). */
static char *accounts_array(const rec_ref *refs, size_t n)
{
    const char **names = malloc(n * sizeof(*names));
    size_t i;
    char *out;

    if (names == NULL)
        return NULL;
    for (i = 0; i < n; i++)
        names[i] = refs[i].account;
    out = bs_text_array_distinct(names, n);
    free(names);
    return out;
}

/* Decode the @m records of @refs into a->evs; 0 or -1. */
static int decode_events(acct *a, const bs_record *recs, const rec_ref *refs, size_t m)
{
    size_t i;

    a->evs = calloc(m, sizeof(*a->evs));
    if (a->evs == NULL)
        return -1;
    for (a->m = 0; a->m < m; a->m++) {
        a->evs[a->m] = billing_event_new();
        if (a->evs[a->m] == NULL)
            return -1;
        i = refs[a->m].index;
        if (decode_record(a->evs[a->m], &recs[i]) != 0)
            return -1;
    }
    return 0;
}

static void acct_clear(acct *a)
{
    size_t i;

    for (i = 0; a->evs != NULL && i < a->m; i++)
        billing_event_destroy(a->evs[i]);
    free(a->evs);
    a->evs = NULL;
    a->m = 0;
}

/* Check the account of refs[0..m) whose grants start at @row0 of @grants. */
static bs_status one_account(check *k, bs_conn *c, bs_catalog *cat, const PGresult *grants,
                             int row0, const bs_record *recs, const rec_ref *refs, size_t m,
                             bs_error *err)
{
    acct a;
    bs_status st;

    memset(&a, 0, sizeof(a));
    a.id = refs[0].account;
    a.currency = PQgetvalue(grants, row0, 4);
    a.grants = grants;
    a.row0 = row0;
    while (row0 + a.rows < PQntuples(grants) &&
           strcmp(PQgetvalue(grants, row0 + a.rows, 0), a.id) == 0)
        a.rows++;
    a.zone = bs_catalog_zone(cat, a.id);
    if (a.zone == NULL)
        return BS_OK;
    st = BS_OK;
    if (decode_events(&a, recs, refs, m) != 0) {
        st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
        goto out;
    }
    if (!can_cross(k, &a))
        goto out;
    st = bs_aggregates_rate(c, cat, k->r, a.id, err);
    if (st != BS_OK)
        goto out;
    if (check_account(k, &a) != 0)
        st = bs_error_set(err, BS_ERR_FATAL, "alerts: account '%s': cannot compute its balance",
                          a.id);
out:
    acct_clear(&a);
    return st;
}

/* Walk the accounts of @refs and the rows of @grants (both in strcmp order) together. */
static bs_status all_accounts(check *k, bs_conn *c, bs_catalog *cat, const PGresult *grants,
                              const bs_record *recs, const rec_ref *refs, size_t n, bs_error *err)
{
    size_t from = 0;
    size_t to;
    int row = 0;
    bs_status st = BS_OK;

    while (from < n && st == BS_OK) {
        for (to = from + 1; to < n && strcmp(refs[to].account, refs[from].account) == 0; to++)
            ;
        while (row < PQntuples(grants) &&
               strcmp(PQgetvalue(grants, row, 0), refs[from].account) < 0)
            row++;
        if (row < PQntuples(grants) && strcmp(PQgetvalue(grants, row, 0), refs[from].account) == 0)
            st = one_account(k, c, cat, grants, row, recs, &refs[from], to - from, err);
        from = to;
    }
    return st;
}

bs_status bd_alerts_check(bs_conn *c, bs_catalog *cat, bd_alert_memo *memo, const int *pcts,
                          size_t n, const bs_record *recs, const bs_record_result *results,
                          size_t n_recs, bd_crossing_fn fn, void *arg, bs_error *err)
{
    char msg[MSG_MAX];
    const char *params[1];
    PGresult *grants = NULL;
    rec_ref *refs;
    char *array = NULL;
    size_t n_refs = 0;
    size_t i;
    check k;
    bs_status st;

    memset(&k, 0, sizeof(k));
    refs = sorted_refs(recs, results, n_recs, &n_refs);
    if (refs == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    if (n_refs == 0) {
        refs_free(refs, n_refs);
        return BS_OK;
    }
    array = accounts_array(refs, n_refs);
    if (array == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
        goto out;
    }
    params[0] = array;
    grants = bs_query_prepared(c, STMT_GRANTS, SQL_GRANTS, 1, params, err);
    if (grants == NULL) {
        st = err != NULL ? err->status : BS_ERR_FATAL;
        goto out;
    }
    st = BS_OK;
    if (PQntuples(grants) == 0)
        goto out;
    if (billing_rater_new(bs_catalog_lib(cat), &k.r, msg, sizeof(msg)) != BILLING_OK) {
        st = bs_error_set(err, BS_ERR_INVALID, "alerts: %s", msg);
        goto out;
    }
    billing_rater_set_dedupe(k.r, 0);
    k.memo = memo;
    k.pcts = pcts;
    k.n_pcts = n;
    for (i = 0; i < n; i++)
        k.max_pct = pcts[i] > k.max_pct ? pcts[i] : k.max_pct;
    k.fn = fn;
    k.arg = arg;
    mpq_inits(k.before, k.after, k.level, k.total, k.q, NULL);
    st = all_accounts(&k, c, cat, grants, recs, refs, n_refs, err);
    mpq_clears(k.before, k.after, k.level, k.total, k.q, NULL);
    billing_rater_destroy(k.r);
out:
    PQclear(grants);
    free(array);
    refs_free(refs, n_refs);
    return st;
}
