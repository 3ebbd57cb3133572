/*
 * alertcheck.c - the credit alerts a batch makes due. See alertcheck.h.
 *
 * Cost per batch: no record is decoded again (the ingest's decoded events
 * come with the results); one query reads the grants of every account of
 * the batch and one the alerts already sent for them; one query reads the
 * stored aggregates of every account that can still raise an alert, added
 * to one rater account by account and epoch by epoch, with one balance per
 * epoch from the batch's first on, compared as GMP rationals (no text).
 * Only an alert actually due costs more: its epoch's stored events back
 * from the batch's latest usage (window_fill: a day, then more until the
 * balance before them is above the threshold) for the crossing instant
 * (libbilling's billing_rater_credit_crossing solves for it, exactly,
 * without text), the balance as text once, and one prepared INSERT.
 * Amounts are exact GMP rationals; nothing is rounded.
 *
 * With a bd_alert_cache (billingd), the grants query also reads each
 * account's change counter, and an account whose kept state is valid
 * costs no query at all: its batch's events are added to the state's
 * rater for one balance and stay there (the state moves on in
 * bd_alert_cache_done once the batch committed; a rollback or a retry
 * takes them back out, pending_undo, and until then the state is busy:
 * another connection's batch walks the account), and an alert due of an
 * in-order batch is searched over its events alone, one with a late
 * event over a window on the state: of the state's kept events (every
 * event the account stored, kept when its first batch was all it ever
 * stored, else those of its latest epoch with usage on, read once when
 * the state is warmed; moved on with each batch; bounded by
 * alerts.cache_events) with the batch's, or read back from the store
 * when it keeps none. Only the accounts without a valid state, or with
 * several epochs, are walked as above, and their states warmed from the
 * walk's rater (one more query for their latest stored ends, and one for
 * the events of those whose batch was not all they stored).
 */
#include "config.h"

#include <gmp.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alertcheck.h"
#include "balance.h"
#include "md5.h"
#include "sentalerts.h"

#define MSG_MAX 512

/* Most grants valid together that a credit key names. */
#define BD_GRANTS_MAX 4096

/*
 * Room for the credit key in an alert_id: with an account (128 bytes), the
 * percent and a total (64 bytes at most in one) it fits BS_ALERT_ID_MAX.
 */
#define BD_KEY_MAX 256

/* Most thresholds (alerts.thresholds takes 16). */
#define BD_PCTS_MAX 100

/*
 * Most stored events of one credit epoch read to find when a threshold
 * was reached (once per alert): bounds the memory and the time of the
 * search (a few hundred MB of events and rater at most).
 */
#define BD_EPOCH_EVENTS_MAX 1000000L

/*
 * The span of usage read first, back from the end of the latest month
 * with usage, for an alert's crossing (then four times more at each step,
 * up to that month's start): one day.
 */
#define BD_WINDOW_FIRST ((billing_time_t)24 * 3600 * BILLING_NS_PER_SEC)

/*
 * A new record of the batch, its account and its event's bounds: read
 * together while the event is in the cache (first_epoch, one_epoch and
 * kept_window would each read them again from the event, cold).
 */
typedef struct rec_ref {
    const char *account; /* the decoded event's, owned by the ingest */
    size_t index;
    billing_time_t start;
    billing_time_t end;
} rec_ref;

/* The credit of an epoch: the grants valid in it. */
typedef struct credit {
    char granted[BD_AMOUNT_MAX]; /* their total, exact decimal */
    char *grants;                /* their ids, a text[] literal (malloc'd) */
    char key[BD_KEY_MAX];        /* their ids in the alert_id */
} credit;

/* One account with credit: its grants, their bounds, and where the batch starts. */
typedef struct acct {
    const char *id;
    const char *currency;
    const bs_account_grants *grants; /* the batch's, from row0 on */
    size_t row0;
    size_t rows;
    const billing_zone *zone;
    billing_time_t *bounds;
    size_t n_bounds;
    unsigned first_epoch;       /* the lowest epoch the batch's events touch */
    billing_time_t first_start; /* the earliest start of the batch's events */
    billing_time_t last_end;    /* the latest end of the batch's events */
    const rec_ref *refs;        /* the batch's new records of the account */
    size_t m;
    int64_t changes;    /* its change counter, read in the batch (bs_account_grant) */
    uint64_t digest;    /* of its grant rows */
    struct centry *hit; /* its valid cached state, when its balance can be read there */
    int fast;           /* 1: checked from the cached state, no read-back */
    unsigned w_epoch;   /* walked: its latest epoch with usage */
    int w_month;        /* and that epoch's latest month with usage (month_index) */
    /*
     * The credit of first_epoch and which of its thresholds are not yet
     * sent, as can_cross found them: the check of that epoch (from the
     * state or the walk) takes them from here instead of computing the
     * total, its text, the key and each alert_id again.
     */
    int has_cr;                        /* 1: cr and total hold first_epoch's credit */
    credit cr;                         /* its grants, total and key */
    mpq_t total;                       /* its total (k->total when it is checked) */
    unsigned char unsent[BD_PCTS_MAX]; /* 1: k->pcts[i]'s alert of it not yet sent */
} acct;

/* A stored event of an epoch, cut to it (the interval it is rated with, whole). */
typedef struct wev {
    billing_event *ev;
    billing_time_t start;
    billing_time_t end;
} wev;

/* The stored events of a span [lo, hi) of one epoch, read month by month from its end. */
typedef struct window {
    billing_time_t lo;
    billing_time_t hi;
    billing_time_t from; /* the part being read: [from, to) */
    billing_time_t to;
    wev *items;
    size_t n;
    size_t cap;
    wev **by_end;             /* items by end, start, id */
    billing_time_t cut_start; /* earliest start of a quantity event cut at from by this read */
} window;

/*
 * A stored event kept whole in a credit state (what a window read would
 * give for it), in one piece of its kept's blocks: its fields as
 * window_add takes them.
 */
typedef struct kev {
    billing_time_t start;
    billing_time_t end;
    const char *meter; /* billing_meter_name's (static) */
    uint16_t off[4];   /* resource, quantity, model, region: where each starts in text */
    char text[];       /* id, resource, quantity, model, region, each NUL-ended */
} kev;

/*
 * Where a kept's events are: filled in order, freed together with it (a
 * kept event is never freed alone). One malloc for many events instead
 * of one each (kev_new was 3.6 % of billingd on the business bench,
 * half of it malloc and free).
 */
typedef struct kblock {
    struct kblock *next; /* the block filled before this one */
    size_t used;         /* bytes of mem taken */
    size_t cap;          /* bytes of mem */
    union {
        int64_t i; /* a kev's alignment (its times, its pointer) */
        void *p;
        char mem[1];
    } u;
} kblock;

/* A kev's alignment: its times' and its pointer's (C99 has no alignof). */
typedef struct kalign {
    char c;
    union {
        int64_t i;
        void *p;
    } u;
} kalign;
#define BD_KEV_ALIGN offsetof(kalign, u)

/* Size of a kept's first block, and the most any later one grows to (doubling). */
#define BD_KBLOCK_FIRST 512
#define BD_KBLOCK_MAX (64 * 1024)

/*
 * The stored events of an account kept in its state: every one it has
 * (its first batch was all it ever stored), or every one that ends after
 * the start of its latest epoch with usage when the state was warmed
 * (warm_read: all a window of the state's epochs can hold), then each
 * batch's that moved the state on, so that a window of them is read
 * here, not from the store. The events live in @blocks, which hold at
 * most twice the events' bytes plus BD_KBLOCK_FIRST (each block at most
 * twice its predecessor), so alerts.cache_events still bounds the memory.
 */
typedef struct kept {
    kev **items;
    size_t n;
    size_t cap;
    kblock *blocks; /* the latest block first; NULL: none yet */
} kept;

/* An alert due, recorded and reported when the check is done (send_all); one allocation. */
typedef struct outgoing {
    const char *account;  /* the acct's: valid for the check */
    const char *currency; /* its grants' */
    char *alert_id;       /* this and the strings below: in the same block */
    char *granted;
    char *grants;
    char *threshold;
    char *balance;
    char *event_id;
    int pct;
    billing_time_t crossed_at;
    billing_time_t exhausted;
} outgoing;

typedef struct check {
    bd_alert_cache *cache; /* NULL: no state between batches */
    struct pending *pend;  /* what the cache takes on if the batch commits */
    const bs_record_result *res;
    bs_conn *c;
    billing_rater *r;
    const bs_sent_alerts *sent;
    const int *pcts;
    size_t n_pcts;
    bd_crossing_fn fn;
    void *arg;
    acct *accts; /* the accounts that can raise an alert, bytewise */
    size_t n_accts;
    size_t cur;   /* the account the walk is at */
    bs_status st; /* why the walk stopped */
    bs_error *err;
    mpq_t balance;
    mpq_t level;
    mpq_t total;
    mpq_t q;
    char balance_text[BD_AMOUNT_MAX];
    const kept *kp; /* non-NULL: the windows of kacct are read from these and its batch */
    const acct *kacct;
    int read_back;  /* a window was read from the store since last cleared */
    outgoing **out; /* the alerts due, in the order found */
    size_t n_out;
    size_t cap_out;
} check;

/* ---------------------------------------------------------------------- */
/* Exact amounts                                                           */
/* ---------------------------------------------------------------------- */

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
/* Credit epochs: spans with the same grants valid                         */
/* ---------------------------------------------------------------------- */

/* Grant @row of @a. */
static const bs_account_grant *grant_of(const acct *a, size_t row)
{
    return bs_account_grants_at(a->grants, a->row0 + row);
}

static int time_cmp(const void *x, const void *y)
{
    billing_time_t a = *(const billing_time_t *)x;
    billing_time_t b = *(const billing_time_t *)y;

    return a < b ? -1 : a > b;
}

/* The grants' bounds, sorted and distinct, as libbilling numbers its epochs; 0 or -1. */
static int bounds_of(acct *a)
{
    size_t n = 0;
    size_t i;
    size_t row;

    a->bounds = malloc((2 * a->rows + 1) * sizeof(*a->bounds));
    if (a->bounds == NULL)
        return -1;
    for (row = 0; row < a->rows; row++) {
        a->bounds[n++] = grant_of(a, row)->granted_at;
        a->bounds[n++] = grant_of(a, row)->expires_at;
    }
    qsort(a->bounds, n, sizeof(*a->bounds), time_cmp);
    a->n_bounds = 0;
    for (i = 0; i < n; i++) {
        if (a->n_bounds == 0 || a->bounds[a->n_bounds - 1] != a->bounds[i])
            a->bounds[a->n_bounds++] = a->bounds[i];
    }
    return 0;
}

/* The epoch of instant @t: how many bounds are at or before it (libbilling's numbering). */
static unsigned epoch_of(const acct *a, billing_time_t t)
{
    size_t lo = 0;
    size_t hi = a->n_bounds;
    size_t mid;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (a->bounds[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (unsigned)lo;
}

/* First instant of epoch @e (>= 1). */
static billing_time_t epoch_start(const acct *a, unsigned e)
{
    return a->bounds[e - 1];
}

/* The instant after epoch @e (INT64_MAX for the last, open one). */
static billing_time_t epoch_end(const acct *a, unsigned e)
{
    return e < a->n_bounds ? a->bounds[e] : INT64_MAX;
}

static void credit_clear(credit *cr)
{
    free(cr->grants);
    memset(cr, 0, sizeof(*cr));
}

/*
 * The key of a set of grant ids (@ids, @n, sorted) into @key (BD_KEY_MAX
 * bytes): joined by '+', or when that does not fit, "md5-" and the md5 of
 * the joined ids in hex. 0, or -1 when out of memory.
 */
static int credit_key(const char *const *ids, size_t n, char *key)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char digest[BS_MD5_LEN];
    char *joined;
    size_t len = 1;
    size_t at = 0;
    size_t i;
    int j;

    for (i = 0; i < n; i++)
        len += strlen(ids[i]) + 1;
    joined = malloc(len);
    if (joined == NULL)
        return -1;
    for (i = 0; i < n; i++) {
        if (i > 0)
            joined[at++] = '+';
        memcpy(joined + at, ids[i], strlen(ids[i]));
        at += strlen(ids[i]);
    }
    joined[at] = '\0';
    if (at < BD_KEY_MAX) {
        memcpy(key, joined, at + 1);
        free(joined);
        return 0;
    }
    bs_md5(joined, at, digest);
    free(joined);
    memcpy(key, "md5-", 4);
    for (j = 0; j < BS_MD5_LEN; j++) {
        key[4 + 2 * j] = hex[digest[j] >> 4];
        key[5 + 2 * j] = hex[digest[j] & 15];
    }
    key[4 + 2 * BS_MD5_LEN] = '\0';
    return 0;
}

/*
 * The credit of epoch @e of @a: the grants valid in it (at its start),
 * their total in k->total and @cr. Returns 1 when there is credit, 0 when
 * none (epoch 0, past the last bound, or no grant valid), -1 on error.
 */
static int credit_of(check *k, const acct *a, unsigned e, credit *cr)
{
    const char *ids[BD_GRANTS_MAX];
    const bs_account_grant *g;
    billing_time_t t;
    size_t n = 0;
    size_t row;

    credit_clear(cr);
    mpq_set_ui(k->total, 0, 1);
    if (e == 0 || e > a->n_bounds)
        return 0;
    t = epoch_start(a, e);
    for (row = 0; row < a->rows; row++) {
        g = grant_of(a, row);
        if (g->granted_at > t || t >= g->expires_at)
            continue;
        if (n == BD_GRANTS_MAX || billing_decimal_parse(k->q, g->amount, NULL, 0) != BILLING_OK)
            return -1;
        mpq_add(k->total, k->total, k->q);
        ids[n++] = g->id;
    }
    if (n == 0 || mpq_sgn(k->total) <= 0)
        return 0;
    q_decimal(k->total, cr->granted, sizeof(cr->granted));
    cr->grants = bs_text_array(ids, n);
    if (cr->grants == NULL || credit_key(ids, n, cr->key) != 0)
        return -1;
    return 1;
}

/*
 * At most @max bytes of @s at @id + *@at (*@at moves past them), never
 * past BS_ALERT_ID_MAX - 1 bytes in all: what snprintf's "%.<max>s" would
 * write there.
 */
static void id_put(char *id, size_t *at, const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    if (n > BS_ALERT_ID_MAX - 1 - *at)
        n = BS_ALERT_ID_MAX - 1 - *at;
    memcpy(id + *at, s, n);
    *at += n;
}

/*
 * The alert_id of @pct of credit @cr of @a into @id (BS_ALERT_ID_MAX
 * bytes): "%.128s/%dpct/%.64s/%s" of the account, @pct, the total and the
 * key, put together without snprintf (three per account and batch were
 * 0.9 % of billingd's instructions on the business bench).
 */
static void alert_id(const acct *a, int pct, const credit *cr, char *id)
{
    char num[BS_INT64_TEXT_MAX + 1];
    size_t at = 0;

    /* Ids are at most 128 bytes (billing.ident); a total in 64 digits is 10^64. */
    *bs_int64_text(num, pct) = '\0';
    id_put(id, &at, a->id, 128);
    id_put(id, &at, "/", 1);
    id_put(id, &at, num, sizeof(num));
    id_put(id, &at, "pct/", 4);
    id_put(id, &at, cr->granted, 64);
    id_put(id, &at, "/", 1);
    id_put(id, &at, cr->key, sizeof(cr->key));
    id[at] = '\0';
}

/* Which thresholds of credit @cr of @a are not yet sent: @unsent[i] 1 for k->pcts[i]'s. */
static void unsent_of(check *k, const acct *a, const credit *cr, unsigned char *unsent)
{
    char id[BS_ALERT_ID_MAX];
    size_t i;

    for (i = 0; i < k->n_pcts; i++) {
        alert_id(a, k->pcts[i], cr, id);
        unsent[i] = !bs_sent_alerts_has(k->sent, id);
    }
}

/* Free what @a holds (its bounds, its first epoch's credit); @a stays usable. */
static void acct_clear(acct *a)
{
    free(a->bounds);
    a->bounds = NULL;
    credit_clear(&a->cr); /* also what a credit_of that failed half-way left */
    if (a->has_cr)
        mpq_clear(a->total);
    a->has_cr = 0;
}

/* The balance at which @pct% of the credit (k->total) is used: total * (100 - pct) / 100. */
static void level_of(check *k, int pct)
{
    mpq_set_ui(k->level, (unsigned long)(100 - pct), 100);
    mpq_mul(k->level, k->level, k->total);
}

/*
 * Can the batch's events of @a raise an alert? Only the epochs from the
 * first the batch touches on can change (a balance depends on the usage
 * of its epoch and the earlier ones), and only those with credit and a
 * threshold not yet sent. 1 yes, 0 no, -1 error.
 */
static int can_cross(check *k, acct *a)
{
    char id[BS_ALERT_ID_MAX];
    credit cr;
    unsigned e = a->first_epoch;
    size_t i;
    int has;
    int rc = 0;

    memset(&cr, 0, sizeof(cr));
    /* The first epoch's credit and sent thresholds, kept in @a for its check. */
    has = credit_of(k, a, e, &a->cr);
    if (has < 0)
        return -1;
    if (has > 0) {
        mpq_init(a->total);
        mpq_set(a->total, k->total);
        a->has_cr = 1;
        unsent_of(k, a, &a->cr, a->unsent);
        for (i = 0; i < k->n_pcts; i++)
            rc |= a->unsent[i];
    }
    for (e = a->first_epoch + 1; e <= a->n_bounds && rc == 0; e++) {
        has = credit_of(k, a, e, &cr);
        if (has < 0)
            rc = -1;
        for (i = 0; has > 0 && i < k->n_pcts && rc == 0; i++) {
            alert_id(a, k->pcts[i], &cr, id);
            rc = !bs_sent_alerts_has(k->sent, id);
        }
    }
    credit_clear(&cr);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Balances                                                                */
/* ---------------------------------------------------------------------- */

/* Balance of @a at @now into @q, exact (no text); 0 or -1. */
static int balance(check *k, const acct *a, billing_time_t now, mpq_t q)
{
    return billing_rater_credit_balance_q(k->r, a->id, now, q) == BILLING_OK ? 0 : -1;
}

/* ---------------------------------------------------------------------- */
/* The stored events of an epoch, and when a threshold was reached         */
/* ---------------------------------------------------------------------- */

static void window_clear(window *w)
{
    size_t i;

    for (i = 0; i < w->n; i++)
        billing_event_destroy(w->items[i].ev);
    free(w->items);
    free(w->by_end);
    memset(w, 0, sizeof(*w));
}

/* A bs_event_fn: a stored event, cut to the part read (the rest is read with another part or
 * is in the aggregates of another epoch). */
static int window_add(void *arg, const char *account, const char *id, const char *resource,
                      const char *meter, billing_time_t start, billing_time_t end,
                      const char *quantity, const char *model, const char *region)
{
    window *w = arg;
    char msg[MSG_MAX];
    wev *grown;
    wev *it;

    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        grown = realloc(w->items, w->cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        w->items = grown;
    }
    it = &w->items[w->n];
    it->ev = billing_event_new();
    if (it->ev == NULL)
        return -1;
    w->n++;
    it->start = start > w->from ? start : w->from;
    it->end = end < w->to ? end : w->to;
    if (bs_event_set(it->ev, account, id, resource, meter, it->start, it->end, quantity, model,
                     region, msg, sizeof(msg)) != BILLING_OK)
        return -1;
    /* A quantity (not a time) meter's event is not split pro rata by a cut. */
    if (start < w->from && start < w->cut_start &&
        billing_event_meter(it->ev) == BILLING_METER_TRAFFIC)
        w->cut_start = start;
    return 0;
}

/* By end, then start, then id: a total order of the stored events. */
static int end_cmp(const void *x, const void *y)
{
    const wev *a = *(wev *const *)x;
    const wev *b = *(wev *const *)y;

    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return strcmp(billing_event_id(a->ev), billing_event_id(b->ev));
}

/* ---------------------------------------------------------------------- */
/* Stored events kept in a state                                           */
/* ---------------------------------------------------------------------- */

/* Round @n up to a kev's alignment. */
static size_t kev_round(size_t n)
{
    return (n + BD_KEV_ALIGN - 1) / BD_KEV_ALIGN * BD_KEV_ALIGN;
}

/*
 * @size bytes for a kev in @kp's latest block, or in a new one (of twice
 * the latest's size, up to BD_KBLOCK_MAX, or @size when more); NULL (no
 * memory: @kp as it was).
 */
static void *kept_alloc(kept *kp, size_t size)
{
    kblock *b = kp->blocks;
    size_t cap;
    void *at;

    size = kev_round(size);
    if (b == NULL || b->cap - b->used < size) {
        cap =
            b == NULL ? BD_KBLOCK_FIRST : (b->cap < BD_KBLOCK_MAX / 2 ? 2 * b->cap : BD_KBLOCK_MAX);
        if (cap < size)
            cap = size;
        b = malloc(offsetof(kblock, u) + cap);
        if (b == NULL)
            return NULL;
        b->next = kp->blocks;
        b->used = 0;
        b->cap = cap;
        kp->blocks = b;
    }
    at = b->u.mem + b->used;
    b->used += size;
    return at;
}

/* @ev (decoded, stored by a batch) as a kept event of @kp, or NULL (no memory: @kp as it was). */
static kev *kev_new(kept *kp, const billing_event *ev)
{
    char qty[BILLING_QUANTITY_TEXT_MAX];
    const char *meter = billing_meter_name(billing_event_meter(ev));
    const char *f[5];
    size_t len[5];
    size_t total = 0;
    size_t i;
    kev *e;

    if (meter == NULL || billing_event_quantity(ev, qty, sizeof(qty)) < 0)
        return NULL;
    f[0] = billing_event_id(ev);
    f[1] = billing_event_resource(ev);
    f[2] = qty;
    f[3] = billing_event_model(ev);
    f[4] = billing_event_region(ev);
    for (i = 0; i < 5; i++) {
        len[i] = strlen(f[i]) + 1;
        total += len[i];
    }
    e = kept_alloc(kp, sizeof(*e) + total);
    if (e == NULL)
        return NULL;
    e->start = billing_event_start(ev);
    e->end = billing_event_end(ev);
    e->meter = meter;
    total = 0;
    for (i = 0; i < 5; i++) {
        if (i > 0)
            e->off[i - 1] = (uint16_t)total; /* at most 128 + 128 + 48 + 64 + 4 bytes before */
        memcpy(e->text + total, f[i], len[i]);
        total += len[i];
    }
    return e;
}

/* Free @kp and its events; NULL is a no-op. */
static void kept_free(kept *kp)
{
    kblock *b;

    if (kp == NULL)
        return;
    while (kp->blocks != NULL) {
        b = kp->blocks;
        kp->blocks = b->next;
        free(b);
    }
    free(kp->items);
    free(kp);
}

/* Where @kp's events end: kept_rewind takes every event pushed since back out. */
typedef struct kmark {
    kblock *blocks; /* the latest block then */
    size_t used;    /* its bytes taken then */
    size_t n;       /* the events then */
} kmark;

static void kept_mark(const kept *kp, kmark *m)
{
    m->blocks = kp->blocks;
    m->used = kp->blocks != NULL ? kp->blocks->used : 0;
    m->n = kp->n;
}

/* @kp as it was at @m: the events pushed since, and the blocks they took, go. */
static void kept_rewind(kept *kp, const kmark *m)
{
    kblock *b;

    while (kp->blocks != m->blocks) {
        b = kp->blocks;
        kp->blocks = b->next;
        free(b);
    }
    if (kp->blocks != NULL)
        kp->blocks->used = m->used;
    kp->n = m->n;
}

/* Keep a copy of @ev in @kp; 0 or -1 (no memory: @kp as it was). */
static int kept_push(kept *kp, const billing_event *ev)
{
    size_t cap;
    kev **grown;
    kev *e;

    if (kp->n == kp->cap) {
        cap = kp->cap ? 2 * kp->cap : 16;
        grown = realloc(kp->items, cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        kp->items = grown;
        kp->cap = cap;
    }
    e = kev_new(kp, ev);
    if (e == NULL)
        return -1;
    kp->items[kp->n++] = e;
    return 0;
}

/* Does [@start, @end) overlap [@from, @to)? As bs_events_window decides (exactly). */
static int overlaps(billing_time_t start, billing_time_t end, billing_time_t from,
                    billing_time_t to)
{
    return start < to && end > from;
}

/* A batch's event to window_add, as bs_events_window would give its stored row; 0 or -1. */
static int feed_event(window *w, const billing_event *ev)
{
    char qty[BILLING_QUANTITY_TEXT_MAX];
    const char *meter = billing_meter_name(billing_event_meter(ev));

    if (meter == NULL || billing_event_quantity(ev, qty, sizeof(qty)) < 0)
        return -1;
    return window_add(w, billing_event_account(ev), billing_event_id(ev),
                      billing_event_resource(ev), meter, billing_event_start(ev),
                      billing_event_end(ev), qty, billing_event_model(ev),
                      billing_event_region(ev));
}

/*
 * bs_events_window for k->kacct (@a) from its state's kept events
 * (k->kp) and its batch's: together, every event of @a the store holds in
 * the batch's transaction (the state is valid: nothing else changed its
 * stored events). The same events, whole, in another order (the search
 * does not depend on it). BS_OK, or the error (k->err set).
 */
static bs_status kept_window(check *k, const acct *a, billing_time_t from, billing_time_t to,
                             long max_rows, window *w, int *more)
{
    const billing_event *ev;
    const kev *e;
    long n = 0;
    size_t i;

    for (i = 0; i < k->kp->n; i++)
        n += overlaps(k->kp->items[i]->start, k->kp->items[i]->end, from, to);
    for (i = 0; i < a->m; i++)
        n += overlaps(a->refs[i].start, a->refs[i].end, from, to);
    *more = n > max_rows;
    for (i = 0; !*more && i < k->kp->n; i++) {
        e = k->kp->items[i];
        if (overlaps(e->start, e->end, from, to) &&
            window_add(w, a->id, e->text, e->text + e->off[0], e->meter, e->start, e->end,
                       e->text + e->off[1], e->text + e->off[2], e->text + e->off[3]) != 0)
            goto fail;
    }
    for (i = 0; !*more && i < a->m; i++) {
        ev = k->res[a->refs[i].index].event;
        if (overlaps(a->refs[i].start, a->refs[i].end, from, to) && feed_event(w, ev) != 0)
            goto fail;
    }
    return BS_OK;
fail:
    return bs_error_set(k->err, BS_ERR_INVALID,
                        "alerts: account '%s': a kept event was not accepted", a->id);
}

/*
 * Read the stored events of [@from, w->lo) into @w, take them out of the
 * rater (they are in its aggregates) and start @w at @from. With @whole,
 * a bound @from would cut an event of a quantity meter at (its part after
 * @from would not be its share) moves back to that event's start, but
 * never before @floor (where whole no longer holds: the cut is made, as
 * at a month's start). 1 when they are more than BD_EPOCH_EVENTS_MAX with
 * those read before (nothing read then), 0, or -1 (k->st set).
 */
static int window_extend(check *k, const acct *a, window *w, billing_time_t from, int whole,
                         billing_time_t floor)
{
    size_t before = w->n;
    size_t i;
    int more = 0;

    for (;;) {
        w->from = from;
        w->to = w->lo;
        w->cut_start = from;
        if (k->kp != NULL && k->kacct == a) {
            k->st = kept_window(k, a, from, w->lo, BD_EPOCH_EVENTS_MAX - (long)w->n, w, &more);
        } else {
            k->read_back = 1;
            k->st = bs_events_window(k->c, a->id, from, w->lo, BD_EPOCH_EVENTS_MAX - (long)w->n,
                                     window_add, w, &more, k->err);
        }
        if (k->st != BS_OK)
            return -1;
        if (more)
            return 1;
        if (!whole || w->cut_start >= from || from <= floor)
            break;
        /* Read again from that event's start: what was just read is dropped. */
        while (w->n > before)
            billing_event_destroy(w->items[--w->n].ev);
        from = w->cut_start > floor ? w->cut_start : floor;
    }
    w->lo = from;
    /* Each is in the stored aggregates the rater holds: unchecked take-back. */
    for (i = before; i < w->n; i++)
        billing_rater_take_back(k->r, w->items[i].ev, NULL, 0);
    return 0;
}

/* @w's events by end, start and id in w->by_end; 0 or -1. */
static int window_sort(window *w)
{
    size_t i;

    w->by_end = malloc((w->n + 1) * sizeof(*w->by_end));
    if (w->by_end == NULL)
        return -1;
    for (i = 0; i < w->n; i++)
        w->by_end[i] = &w->items[i];
    qsort(w->by_end, w->n, sizeof(*w->by_end), end_cmp);
    return 0;
}

/* Rate @items[0..@n) as they are (cut to the epoch); 0 or -1. */
static int add_all(check *k, wev *const *items, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (billing_rater_add(k->r, items[i]->ev, NULL, 0) != BILLING_OK) {
            while (i > 0)
                billing_rater_take_back(k->r, items[--i]->ev, NULL, 0);
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The epochs of an account                                                */
/* ---------------------------------------------------------------------- */

/* @s copied at *@p, which moves past the copy; the copy. */
static char *put(char **p, const char *s)
{
    size_t len = strlen(s) + 1;
    char *at = *p;

    memcpy(at, s, len);
    *p += len;
    return at;
}

/*
 * The alert of k->pcts[@i] for credit @cr, reached at @at by the event
 * @event_id ("": none named), the epoch's balance in k->balance_text:
 * kept in k->out, recorded and reported by send_all when the check is
 * done. 0 or -1 (k->st set).
 */
static int send_event(check *k, const acct *a, const credit *cr, size_t i, billing_time_t at,
                      const char *event_id, billing_time_t exhausted)
{
    char id[BS_ALERT_ID_MAX];
    char threshold[BD_AMOUNT_MAX];
    outgoing **grown;
    outgoing *o;
    size_t cap;
    char *p;

    alert_id(a, k->pcts[i], cr, id);
    level_of(k, k->pcts[i]);
    q_decimal(k->level, threshold, sizeof(threshold));
    if (k->n_out == k->cap_out) {
        cap = k->cap_out ? 2 * k->cap_out : 64;
        grown = realloc(k->out, cap * sizeof(*grown));
        if (grown == NULL)
            goto nomem;
        k->out = grown;
        k->cap_out = cap;
    }
    o = malloc(sizeof(*o) + strlen(id) + strlen(cr->granted) + strlen(cr->grants) +
               strlen(threshold) + strlen(k->balance_text) + strlen(event_id) + 6);
    if (o == NULL)
        goto nomem;
    p = (char *)(o + 1);
    o->alert_id = put(&p, id);
    o->granted = put(&p, cr->granted);
    o->grants = put(&p, cr->grants);
    o->threshold = put(&p, threshold);
    o->balance = put(&p, k->balance_text);
    o->event_id = put(&p, event_id);
    o->account = a->id;
    o->currency = a->currency;
    o->pct = k->pcts[i];
    o->crossed_at = at;
    o->exhausted = exhausted;
    k->out[k->n_out++] = o;
    return 0;
nomem:
    k->st = bs_error_set(k->err, BS_ERR_NOMEM, "alerts: out of memory");
    return -1;
}

/* Report @o (written by this batch) to k->fn; 0 or -1 (k->st set). */
static int report(check *k, const outgoing *o)
{
    bd_crossing x;

    memset(&x, 0, sizeof(x));
    x.alert_id = o->alert_id;
    x.account = o->account;
    x.currency = o->currency;
    x.granted = o->granted;
    x.balance = o->balance;
    x.threshold = o->threshold;
    x.event_id = o->event_id;
    x.pct = o->pct;
    x.crossed_at = o->crossed_at;
    x.exhausted = o->exhausted;
    if (k->fn(k->arg, &x) != 0) {
        k->st = bs_error_set(k->err, BS_ERR_FATAL, "alerts: account '%s': %s not sent", o->account,
                             o->alert_id);
        return -1;
    }
    return 0;
}

/*
 * Record the alerts due (k->out) in one INSERT (per BS_SENT_ALERTS_MAX),
 * then report those it wrote, in the order found. One not written was
 * recorded by another transaction since the sent alerts were read, or
 * earlier in the batch, and is not sent again. 0 or -1 (k->st set).
 */
static int send_all(check *k)
{
    bs_sent_alert *recs = calloc(k->n_out + 1, sizeof(*recs));
    int *inserted = calloc(k->n_out + 1, sizeof(*inserted));
    const outgoing *o;
    size_t from;
    size_t n;
    size_t i;
    int rc = -1;

    if (recs == NULL || inserted == NULL) {
        k->st = bs_error_set(k->err, BS_ERR_NOMEM, "alerts: out of memory");
        goto out;
    }
    for (i = 0; i < k->n_out; i++) {
        o = k->out[i];
        recs[i].alert_id = o->alert_id;
        recs[i].account = o->account;
        recs[i].pct = o->pct;
        recs[i].granted = o->granted;
        recs[i].grants = o->grants;
        recs[i].threshold = o->threshold;
        recs[i].balance = o->balance;
        recs[i].crossed_at = o->crossed_at;
        recs[i].event_id = o->event_id;
    }
    for (from = 0; from < k->n_out; from += n) {
        n = k->n_out - from < BS_SENT_ALERTS_MAX ? k->n_out - from : BS_SENT_ALERTS_MAX;
        k->st = bs_sent_alerts_record(k->c, &recs[from], n, &inserted[from], k->err);
        if (k->st != BS_OK)
            goto out;
    }
    for (i = 0; i < k->n_out; i++) {
        if (inserted[i] && report(k, k->out[i]) != 0)
            goto out;
    }
    rc = 0;
out:
    free(recs);
    free(inserted);
    return rc;
}

/* send_event for the alert reached by the window's event @by (NULL: none). */
static int send_one(check *k, const acct *a, const credit *cr, size_t i, billing_time_t at,
                    const wev *by, billing_time_t exhausted)
{
    return send_event(k, a, cr, i, at, by != NULL ? billing_event_id(by->ev) : "", exhausted);
}

/*
 * The epoch's stored events from where the search must start into @w,
 * taken out of the rater, until the usage before them leaves the balance
 * above the highest level to find (@pct, the lowest percent due), or to
 * the epoch's start. A threshold a batch makes due is reached near the
 * epoch's latest usage (the balance was above it before the batch), so
 * the span read first is from the batch's earliest start, or when that is
 * earlier the last BD_WINDOW_FIRST before the latest end of the batch's
 * events (or the end of the latest month with usage, when earlier), then
 * four times that, and so on, while it holds events; back
 * in the month of @now, the rest of that month and then a month at a
 * time from the latest back. The span always reaches the epoch's end:
 * stored events later than the batch's are read with it. Where the search starts
 * does not change what it finds: the balance only falls within an epoch,
 * and it is above the levels where the span starts. 1 when that is more
 * than BD_EPOCH_EVENTS_MAX events, 0, or -1 (k->st set).
 */
static int window_fill(check *k, const acct *a, unsigned e, billing_time_t now, int pct, window *w)
{
    billing_time_t floor = epoch_start(a, e);
    billing_time_t span = BD_WINDOW_FIRST;
    billing_time_t mend;
    billing_time_t from;
    int year;
    int month;
    int rc;

    memset(w, 0, sizeof(*w));
    w->lo = epoch_end(a, e);
    w->hi = w->lo;
    /* The end of @now's month: the latest month with usage. */
    billing_zone_year_month(a->zone, now, &year, &month);
    if (billing_zone_month_start(a->zone, month == 12 ? year + 1 : year,
                                 month == 12 ? 1 : month + 1, &mend) != BILLING_OK)
        mend = now; /* no short span: from the month's start on, a month at a time */
    else if (mend > w->lo)
        mend = w->lo;
    /* From the batch's latest usage back (stored usage later than it is read too). */
    if (a->last_end > now && a->last_end < mend)
        mend = a->last_end;
    from = mend - span > now ? mend - span : now;
    /* A stream in order: the batch's own events (and later ones stored) may be enough. */
    if (a->first_start > from && a->first_start < mend)
        from = a->first_start;
    for (;;) {
        /* Short spans read first keep whole the quantity events they would cut. */
        rc = window_extend(k, a, w, from, from > now, floor);
        if (rc != 0 || w->lo == floor)
            return rc;
        level_of(k, pct);
        if (balance(k, a, w->lo - 1, k->q) != 0) {
            k->st = bs_error_set(k->err, BS_ERR_FATAL,
                                 "alerts: account '%s': cannot compute its balance", a->id);
            return -1;
        }
        if (mpq_cmp(k->q, k->level) > 0 && w->n > 0)
            return 0;
        if (w->lo > now) {
            /* Four times more back from mend, past what is read (then the month's start). */
            span *= 4;
            while (span < mend - now && mend - span >= w->lo)
                span *= 4;
            from = span < mend - now ? mend - span : now;
            continue;
        }
        if (mpq_cmp(k->q, k->level) > 0)
            return 0;
        billing_zone_year_month(a->zone, w->lo - 1, &year, &month);
        if (billing_zone_month_start(a->zone, year, month, &from) != BILLING_OK || from < floor)
            from = floor;
    }
}

/*
 * When and by which event each threshold due was reached, over @w's
 * events (the rater holding the usage before them): libbilling's
 * crossing search. 0 or -1.
 */
static int search_all(check *k, const acct *a, const window *w, const int *fresh,
                      billing_time_t *at, const wev **by)
{
    const billing_event **evs = malloc((w->n + 1) * sizeof(*evs));
    size_t index;
    size_t i;
    int rc = 0;

    if (evs == NULL)
        return -1;
    for (i = 0; i < w->n; i++)
        evs[i] = w->items[i].ev;
    for (i = 0; i < k->n_pcts && rc == 0; i++) {
        if (!fresh[i])
            continue;
        level_of(k, k->pcts[i]);
        if (billing_rater_credit_crossing(k->r, a->id, evs, w->n, w->lo, k->level, &index, &at[i],
                                          NULL, 0) != BILLING_OK)
            rc = -1;
        else
            by[i] = index < w->n ? &w->items[index] : NULL;
    }
    free(evs);
    return rc;
}

/*
 * The new alerts of epoch @e (@fresh flags which thresholds), its balance
 * read at @now: the epoch's stored events from where the search must
 * start replace its aggregates in the rater, the instant each threshold
 * was reached is searched, the events are put back, and each alert is
 * recorded and reported. Beyond BD_EPOCH_EVENTS_MAX events there is no
 * search: crossed_at is @now and no event is named. 0 or -1 (k->st set).
 */
static int send_epoch(check *k, const acct *a, unsigned e, billing_time_t now, const credit *cr,
                      const int *fresh)
{
    const billing_event **running = NULL;
    billing_time_t at[BD_PCTS_MAX];
    const wev *by[BD_PCTS_MAX];
    billing_time_t exhausted = INT64_MAX;
    window w;
    size_t n_running = 0;
    size_t i;
    int searched;
    int pct = 0;
    int rc;

    /* The epoch's balance as text, once per epoch with an alert due (the rater still whole). */
    if (billing_rater_credit_balance(k->r, a->id, now, k->balance_text, sizeof(k->balance_text)) !=
        BILLING_OK) {
        k->st = bs_error_set(k->err, BS_ERR_FATAL,
                             "alerts: account '%s': cannot compute its balance", a->id);
        return -1;
    }
    for (i = k->n_pcts; i > 0; i--)
        pct = fresh[i - 1] && (pct == 0 || k->pcts[i - 1] < pct) ? k->pcts[i - 1] : pct;
    rc = window_fill(k, a, e, now, pct, &w);
    if (rc < 0)
        goto out;
    /* Too many events to search (rc 1), or none (aggregates without events): no search. */
    searched = rc == 0 && w.n > 0;
    rc = -1;
    if (window_sort(&w) != 0 || (searched && search_all(k, a, &w, fresh, at, by) != 0) ||
        add_all(k, w.by_end, w.n) != 0) {
        k->st = bs_error_set(k->err, BS_ERR_FATAL,
                             "alerts: account '%s': cannot compute its balance", a->id);
        goto out;
    }
    running = malloc((w.n + 1) * sizeof(*running));
    if (running == NULL) {
        k->st = bs_error_set(k->err, BS_ERR_NOMEM, "alerts: out of memory");
        goto out;
    }
    /* The events ending last are what is running at the epoch's latest usage. */
    for (i = w.n; i > 0 && w.by_end[i - 1]->end == w.by_end[w.n - 1]->end; i--)
        running[n_running++] = w.by_end[i - 1]->ev;
    if (n_running > 0)
        billing_rater_credit_exhaustion(k->r, a->id, w.by_end[w.n - 1]->end, running, n_running,
                                        &exhausted, NULL, 0);
    for (i = 0; i < k->n_pcts; i++) {
        if (fresh[i] &&
            send_one(k, a, cr, i, searched ? at[i] : now, searched ? by[i] : NULL, exhausted) != 0)
            goto out;
    }
    rc = 0;
out:
    free(running);
    window_clear(&w);
    return rc;
}

/*
 * The thresholds of the credit in k->total due in epoch @e of @a, whose
 * latest month with usage is @year-@month: the balance read at that
 * month's start (or the epoch's, when later; into *@now), each threshold
 * at or above it not yet sent (@unsent, unsent_of's) flagged in @fresh.
 * 1 when any is, 0, or -1 (no balance).
 */
static int thresholds_due(check *k, const acct *a, unsigned e, int year, int month,
                          const unsigned char *unsent, int *fresh, billing_time_t *now)
{
    size_t i;
    int any = 0;

    if (billing_zone_month_start(a->zone, year, month, now) != BILLING_OK)
        return -1;
    if (*now < epoch_start(a, e))
        *now = epoch_start(a, e);
    if (balance(k, a, *now, k->balance) != 0)
        return -1;
    for (i = 0; i < k->n_pcts; i++) {
        level_of(k, k->pcts[i]);
        fresh[i] = unsent[i] && mpq_cmp(k->balance, k->level) <= 0;
        any |= fresh[i];
    }
    return any;
}

/*
 * A bs_epoch_fn: the rater holds the stored usage of epochs up to @e,
 * which is where its credit is lowest (usage only lowers it). Read the
 * balance there, in the latest month with usage; every threshold at or
 * above it not yet sent is a new alert.
 */
static int on_epoch(void *arg, const char *account, unsigned e, int year, int month)
{
    check *k = arg;
    acct *a;
    unsigned char unsent[BD_PCTS_MAX];
    const unsigned char *un = unsent;
    int fresh[BD_PCTS_MAX];
    billing_time_t now;
    const credit *use = NULL;
    credit cr;
    int any = 0;
    int has;
    int rc = -1;

    memset(&cr, 0, sizeof(cr));
    /* The accounts of the walk come in the order of k->accts (both bytewise). */
    while (k->cur < k->n_accts && strcmp(k->accts[k->cur].id, account) < 0)
        k->cur++;
    if (k->cur == k->n_accts || strcmp(k->accts[k->cur].id, account) != 0)
        return 0;
    a = &k->accts[k->cur];
    /* The epochs come in order: the last one seen is the account's latest (the cache keeps it). */
    a->w_epoch = e;
    a->w_month = year * 12 + month - 1;
    if (e < a->first_epoch)
        return 0;
    if (e == a->first_epoch) {
        /* can_cross's: the same credit, and the sent alerts have not changed since. */
        if (!a->has_cr)
            return 0;
        mpq_set(k->total, a->total);
        use = &a->cr;
        un = a->unsent;
    } else {
        has = credit_of(k, a, e, &cr);
        if (has <= 0) {
            if (has < 0)
                k->st = bs_error_set(k->err, BS_ERR_NOMEM, "alerts: account '%s': grants", a->id);
            credit_clear(&cr);
            return has < 0 ? -1 : 0;
        }
        use = &cr;
        unsent_of(k, a, &cr, unsent);
    }
    /* An instant of the epoch in that month: the month's start, or the epoch's when later. */
    any = thresholds_due(k, a, e, year, month, un, fresh, &now);
    if (any < 0)
        goto fail;
    rc = any ? send_epoch(k, a, e, now, use, fresh) : 0;
    credit_clear(&cr);
    return rc;
fail:
    k->st = bs_error_set(k->err, BS_ERR_FATAL, "alerts: account '%s': cannot compute its balance",
                         a->id);
    credit_clear(&cr);
    return -1;
}
/* ---------------------------------------------------------------------- */
/* The credit state kept between batches (bd_alert_cache)                  */
/* ---------------------------------------------------------------------- */

/*
 * Most raters (slabs) the cache holds: the accounts warmed by one batch
 * share one (the rater its walk filled), so a slab goes when the last of
 * its accounts does, or as a whole when the least recently used one must
 * make room.
 */
#define BD_SLABS_MAX 64

/* A rater holding the stored usage of the accounts one batch warmed. */
typedef struct slab {
    billing_rater *r; /* NULL: free */
    size_t live;      /* entries that use it */
    size_t total;     /* accounts warmed into it (also those gone since: their usage stays) */
    uint64_t used;    /* tick of the last batch that used it */
} slab;

/* An account's state: its usage is in slabs[slot].r. */
typedef struct centry {
    struct centry *next; /* hash chain */
    char *account;
    unsigned slot;
    int64_t stamp;            /* its change counter (close_tallies) the usage matches */
    billing_time_t usage_end; /* the latest end of its stored events */
    uint64_t digest;          /* of the grant rows it was checked with */
    unsigned max_epoch;       /* the latest credit epoch with stored usage */
    int month;                /* the latest month with usage in it (month_index) */
    uint64_t ver;             /* changes whenever the entry does */
    kept *kp;                 /* every stored event of the account, or NULL: not kept */
    int busy; /* its rater holds the events of a batch checked, not yet done (pending_undo) */
} centry;

/* A valid state the batch's events move on, if it commits. */
typedef struct phit {
    char *account;
    uint64_t ver; /* the entry's when checked: applied only if still the same */
    int64_t stamp;
    billing_time_t usage_end;
    unsigned max_epoch;
    int month;
    size_t *recs; /* the batch's records of the account (bs_record_result.event) */
    size_t n;
    int kept;   /* 1: copies of them are in the entry's kept since @mark (keep_hit) */
    kmark mark; /* where they start there: pending_undo takes them back out */
} phit;

/* An account warmed by the batch's walk, into pending.warm. */
typedef struct pwarm {
    char *account;
    int64_t stamp;
    billing_time_t usage_end; /* INT64_MAX until read */
    uint64_t digest;
    unsigned max_epoch; /* from the walk */
    int month;
    /* its stored events of its latest epoch with usage on (warm_kept, warm_read); or NULL */
    kept *kp;
    size_t n_read; /* rows warm_read handed for it */
} pwarm;

/* What a batch in its transaction on one connection would change. */
typedef struct pending {
    bs_conn *c; /* NULL: free */
    const bs_record_result *res;
    phit *hits;
    size_t n_hits;
    size_t cap_hits;     /* hits' room (doubled when full) */
    billing_rater *warm; /* the walk's rater: the stored usage of the warmed accounts */
    pwarm *warmed;
    size_t n_warmed;
} pending;

/* Batches in flight at once (billingd: one per commit lane). */
#define BD_PENDING_MAX 64

/*
 * Most stored events kept for one account: a window of more is read from
 * the store (as one of more than BD_EPOCH_EVENTS_MAX is not searched).
 */
#define BD_KEPT_ACCOUNT_MAX 65536

struct bd_alert_cache {
    size_t max_accounts;
    size_t max_events;     /* the bound on the events kept in all states */
    size_t n_kept;         /* the events kept in all states now */
    const bs_catalog *cat; /* the catalog the raters borrow */
    slab slabs[BD_SLABS_MAX];
    centry **buckets;
    size_t n_buckets; /* a power of two, or 0 */
    size_t n_entries;
    uint64_t tick;
    uint64_t ver;
    pending pend[BD_PENDING_MAX];
    bd_alert_cache_stats stats;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;

    for (i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static uint64_t str_hash(const char *s)
{
    return fnv(UINT64_C(0xcbf29ce484222325), s, strlen(s) + 1);
}

bd_alert_cache *bd_alert_cache_new(size_t max_accounts)
{
    bd_alert_cache *cache = calloc(1, sizeof(*cache));

    if (cache != NULL) {
        cache->max_accounts = max_accounts;
        cache->max_events = BD_CACHE_EVENTS_DEFAULT;
    }
    return cache;
}

void bd_alert_cache_set_max_events(bd_alert_cache *cache, size_t max_events)
{
    cache->max_events = max_events;
}

/* Drop @e's kept events (if any): its windows are read from the store again. */
static void entry_unkeep(bd_alert_cache *cache, centry *e)
{
    if (e->kp == NULL)
        return;
    cache->n_kept -= e->kp->n;
    kept_free(e->kp);
    e->kp = NULL;
}

static centry **entry_link(bd_alert_cache *cache, const char *account)
{
    centry **p;

    if (cache->n_buckets == 0)
        return NULL;
    p = &cache->buckets[str_hash(account) & (cache->n_buckets - 1)];
    while (*p != NULL && strcmp((*p)->account, account) != 0)
        p = &(*p)->next;
    return p;
}

static centry *entry_find(bd_alert_cache *cache, const char *account)
{
    centry **p = entry_link(cache, account);

    return p != NULL ? *p : NULL;
}

static void slab_free(slab *sl)
{
    billing_rater_destroy(sl->r);
    memset(sl, 0, sizeof(*sl));
}

/* Take @account's entry out (if any); its slab goes with its last entry. */
static void entry_drop(bd_alert_cache *cache, const char *account)
{
    centry **p = entry_link(cache, account);
    centry *e = p != NULL ? *p : NULL;

    if (e == NULL)
        return;
    *p = e->next;
    cache->n_entries--;
    if (--cache->slabs[e->slot].live == 0)
        slab_free(&cache->slabs[e->slot]);
    entry_unkeep(cache, e);
    free(e->account);
    free(e);
}

/* Every entry of slab @slot out, and the slab. */
static void slab_evict(bd_alert_cache *cache, unsigned slot)
{
    centry **p;
    centry *e;
    size_t b;

    for (b = 0; b < cache->n_buckets; b++) {
        p = &cache->buckets[b];
        while ((e = *p) != NULL) {
            if (e->slot != slot) {
                p = &e->next;
                continue;
            }
            *p = e->next;
            cache->n_entries--;
            entry_unkeep(cache, e);
            free(e->account);
            free(e);
        }
    }
    slab_free(&cache->slabs[slot]);
}

static void pending_clear(pending *p)
{
    size_t i;

    for (i = 0; i < p->n_hits; i++) {
        free(p->hits[i].account);
        free(p->hits[i].recs);
    }
    for (i = 0; i < p->n_warmed; i++) {
        free(p->warmed[i].account);
        kept_free(p->warmed[i].kp);
    }
    free(p->hits);
    free(p->warmed);
    billing_rater_destroy(p->warm);
    memset(p, 0, sizeof(*p));
}

void bd_alert_cache_forget(bd_alert_cache *cache)
{
    unsigned i;

    if (cache == NULL)
        return;
    for (i = 0; i < BD_SLABS_MAX; i++) {
        if (cache->slabs[i].r != NULL)
            slab_evict(cache, i);
    }
    for (i = 0; i < BD_PENDING_MAX; i++)
        pending_clear(&cache->pend[i]);
    cache->cat = NULL;
}

void bd_alert_cache_free(bd_alert_cache *cache)
{
    if (cache == NULL)
        return;
    bd_alert_cache_forget(cache);
    free(cache->buckets);
    free(cache);
}

void bd_alert_cache_stats_get(const bd_alert_cache *cache, bd_alert_cache_stats *out)
{
    *out = cache->stats;
    out->accounts = cache->n_entries;
}

/* The pending changes of connection @c (a new one when @make), or NULL. */
static pending *pending_of(bd_alert_cache *cache, bs_conn *c, int make)
{
    size_t i;

    for (i = 0; i < BD_PENDING_MAX; i++) {
        if (cache->pend[i].c == c)
            return &cache->pend[i];
    }
    for (i = 0; make && i < BD_PENDING_MAX; i++) {
        if (cache->pend[i].c == NULL) {
            cache->pend[i].c = c;
            return &cache->pend[i];
        }
    }
    return NULL;
}

/* Room for @n more entries in the table; 0 or -1. */
static int table_grow(bd_alert_cache *cache, size_t n)
{
    size_t want = cache->n_buckets ? cache->n_buckets : 1024;
    centry **buckets;
    centry *e;
    size_t b;

    while (want < cache->n_entries + n)
        want *= 2;
    if (want == cache->n_buckets)
        return 0;
    buckets = calloc(want, sizeof(*buckets));
    if (buckets == NULL)
        return -1;
    for (b = 0; b < cache->n_buckets; b++) {
        while ((e = cache->buckets[b]) != NULL) {
            cache->buckets[b] = e->next;
            e->next = buckets[str_hash(e->account) & (want - 1)];
            buckets[str_hash(e->account) & (want - 1)] = e;
        }
    }
    free(cache->buckets);
    cache->buckets = buckets;
    cache->n_buckets = want;
    return 0;
}

/*
 * Make @p's walk rater a slab holding its warmed accounts: the least
 * recently used slabs go first while the accounts would pass
 * max_accounts or no slot is free. Nothing when they are more than
 * max_accounts alone (or out of memory: the accounts are warmed again).
 */
static void install_warm(bd_alert_cache *cache, pending *p)
{
    size_t total = 0;
    unsigned slot = BD_SLABS_MAX;
    unsigned i;
    unsigned lru;
    size_t j;
    centry *e;
    centry **head;

    if (p->n_warmed == 0 || p->n_warmed > cache->max_accounts)
        return;
    for (;;) {
        total = 0;
        slot = BD_SLABS_MAX;
        lru = BD_SLABS_MAX;
        for (i = 0; i < BD_SLABS_MAX; i++) {
            if (cache->slabs[i].r == NULL) {
                slot = slot == BD_SLABS_MAX ? i : slot;
                continue;
            }
            total += cache->slabs[i].total;
            if (lru == BD_SLABS_MAX || cache->slabs[i].used < cache->slabs[lru].used)
                lru = i;
        }
        if (slot < BD_SLABS_MAX && total + p->n_warmed <= cache->max_accounts)
            break;
        slab_evict(cache, lru);
        cache->stats.evictions++;
    }
    for (j = 0; j < p->n_warmed; j++)
        entry_drop(cache, p->warmed[j].account);
    if (table_grow(cache, p->n_warmed) != 0)
        return;
    cache->slabs[slot].r = p->warm;
    cache->slabs[slot].total = p->n_warmed;
    cache->slabs[slot].used = cache->tick;
    p->warm = NULL;
    for (j = 0; j < p->n_warmed; j++) {
        if (p->warmed[j].usage_end == INT64_MAX)
            continue; /* no stored event read: never in order, so not kept */
        e = calloc(1, sizeof(*e));
        if (e == NULL)
            break;
        e->account = p->warmed[j].account;
        p->warmed[j].account = NULL;
        e->slot = slot;
        e->stamp = p->warmed[j].stamp;
        e->usage_end = p->warmed[j].usage_end;
        e->digest = p->warmed[j].digest;
        e->max_epoch = p->warmed[j].max_epoch;
        e->month = p->warmed[j].month;
        e->ver = ++cache->ver;
        if (p->warmed[j].kp != NULL && cache->n_kept + p->warmed[j].kp->n <= cache->max_events) {
            e->kp = p->warmed[j].kp;
            p->warmed[j].kp = NULL;
            cache->n_kept += e->kp->n;
        } else if (p->warmed[j].kp != NULL) {
            cache->stats.unkept++;
        }
        head = &cache->buckets[str_hash(e->account) & (cache->n_buckets - 1)];
        e->next = *head;
        *head = e;
        cache->n_entries++;
        cache->slabs[slot].live++;
    }
    if (cache->slabs[slot].live == 0)
        slab_free(&cache->slabs[slot]);
}

/*
 * The kept events of @e (a hit's state, busy) moved on by its batch's
 * (@h, from @res): copies added, or all dropped (counted in
 * stats.unkept) when they would pass BD_KEPT_ACCOUNT_MAX or the cache's
 * max_events, or there is no memory. Done when the batch is checked,
 * while its events are still in the processor's cache (at commit they
 * were read cold again: a twentieth of billingd); pending_undo takes the
 * copies back out if the batch does not commit.
 */
static void keep_hit(bd_alert_cache *cache, const bs_record_result *res, phit *h, centry *e)
{
    size_t i;

    if (e->kp == NULL)
        return;
    if (e->kp->n + h->n > BD_KEPT_ACCOUNT_MAX || cache->n_kept + h->n > cache->max_events) {
        cache->stats.unkept++;
        entry_unkeep(cache, e);
        return;
    }
    kept_mark(e->kp, &h->mark);
    for (i = 0; i < h->n; i++) {
        if (kept_push(e->kp, res[h->recs[i]].event) != 0) {
            kept_rewind(e->kp, &h->mark);
            cache->stats.unkept++;
            entry_unkeep(cache, e);
            return;
        }
    }
    cache->n_kept += h->n;
    h->kept = 1;
}

/*
 * Move a hit's state on by the batch's events of its account (@p->res):
 * its rater holds them already (check_from_state left them there).
 */
static void apply_hit(bd_alert_cache *cache, const phit *h)
{
    centry *e = entry_find(cache, h->account);

    if (e == NULL || e->ver != h->ver || !e->busy) {
        /* Changed by another batch since it was checked: warmed again when next needed. */
        entry_drop(cache, h->account);
        return;
    }
    e->busy = 0;
    e->stamp = h->stamp;
    e->usage_end = h->usage_end;
    e->max_epoch = h->max_epoch;
    e->month = h->month;
    e->ver = ++cache->ver;
}

/*
 * Take the events a check added to the states of @p's hits back out:
 * the batch did not commit (or is tried again), so each state is as it
 * was before the check. A state changed or gone since holds none of them.
 */
static void pending_undo(bd_alert_cache *cache, pending *p)
{
    const phit *h;
    billing_rater *r;
    centry *e;
    size_t i;
    size_t j;

    for (i = 0; i < p->n_hits; i++) {
        h = &p->hits[i];
        e = entry_find(cache, h->account);
        if (e == NULL || e->ver != h->ver || !e->busy)
            continue;
        r = cache->slabs[e->slot].r;
        for (j = h->n; j > 0; j--)
            billing_rater_take_back(r, p->res[h->recs[j - 1]].event, NULL, 0);
        /* The copies keep_hit added (none when it dropped the kept events since). */
        if (h->kept && e->kp != NULL) {
            kept_rewind(e->kp, &h->mark);
            cache->n_kept -= h->n;
        }
        e->busy = 0;
    }
}

void bd_alert_cache_done(bd_alert_cache *cache, bs_conn *c, int committed)
{
    pending *p = cache != NULL ? pending_of(cache, c, 0) : NULL;
    size_t i;

    if (p == NULL)
        return;
    if (committed) {
        for (i = 0; i < p->n_hits; i++)
            apply_hit(cache, &p->hits[i]);
        install_warm(cache, p);
    } else {
        /* Rolled back: the states go back to what they were before the batch. */
        pending_undo(cache, p);
        cache->stats.rollbacks++;
    }
    pending_clear(p);
}

/* The digest of @a's grant rows: any change to them (a grant added, an amount) changes it. */
static uint64_t grants_digest(const bs_account_grants *grants, size_t row0, size_t rows)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    const bs_account_grant *g;
    size_t i;

    for (i = 0; i < rows; i++) {
        g = bs_account_grants_at(grants, row0 + i);
        h = fnv(h, g->id, strlen(g->id) + 1);
        h = fnv(h, g->amount, strlen(g->amount) + 1);
        h = fnv(h, &g->granted_at, sizeof(g->granted_at));
        h = fnv(h, &g->expires_at, sizeof(g->expires_at));
    }
    return h;
}

/* ---------------------------------------------------------------------- */
/* An account checked from its cached state                                */
/* ---------------------------------------------------------------------- */

/* The batch's event @i of @a. */
static const billing_event *batch_event(const check *k, const acct *a, size_t i)
{
    return k->res[a->refs[i].index].event;
}

/* Take back the first @n batch events of @a from k->r (each added there). */
static void take_back_batch(check *k, const acct *a, size_t n)
{
    while (n > 0)
        billing_rater_take_back(k->r, batch_event(k, a, --n), NULL, 0);
}

/* Add the batch's events of @a to k->r; 0, or -1 with none added. */
static int add_batch(check *k, const acct *a)
{
    size_t i;

    for (i = 0; i < a->m; i++) {
        if (billing_rater_add(k->r, batch_event(k, a, i), NULL, 0) != BILLING_OK) {
            take_back_batch(k, a, i);
            return -1;
        }
    }
    return 0;
}

/* The local month of instant @t of @a as year * 12 + month - 1. */
static int month_index(const acct *a, billing_time_t t)
{
    int year;
    int month;

    billing_zone_year_month(a->zone, t, &year, &month);
    return year * 12 + month - 1;
}

/*
 * Can @a's balance be read from its state @e? Its batch's events all lie
 * in one credit epoch and the state has no usage in a later one: the
 * state with them then holds exactly the usage of that epoch and the
 * earlier ones, what the walk's rater holds there.
 */
static int one_epoch(const acct *a, const centry *e)
{
    unsigned ep = a->first_epoch;
    size_t i;

    if (e->max_epoch > ep)
        return 0;
    for (i = 0; i < a->m; i++) {
        if (epoch_of(a, a->refs[i].start) != ep || a->refs[i].end > epoch_end(a, ep))
            return 0;
    }
    return 1;
}

/*
 * The start of the first span window_fill reads for epoch @e of @a at
 * @now: the check from the state is the same only when that is the
 * batch's earliest start (the span then holds the batch's events, whole).
 */
static billing_time_t window_first(const acct *a, unsigned e, billing_time_t now)
{
    billing_time_t mend;
    billing_time_t from;
    int year;
    int month;

    billing_zone_year_month(a->zone, now, &year, &month);
    if (billing_zone_month_start(a->zone, month == 12 ? year + 1 : year,
                                 month == 12 ? 1 : month + 1, &mend) != BILLING_OK)
        return now;
    if (mend > epoch_end(a, e))
        mend = epoch_end(a, e);
    if (a->last_end > now && a->last_end < mend)
        mend = a->last_end;
    from = mend - BD_WINDOW_FIRST > now ? mend - BD_WINDOW_FIRST : now;
    if (a->first_start > from && a->first_start < mend)
        from = a->first_start;
    return from;
}

/*
 * on_epoch and send_epoch for @a's one epoch (one_epoch), from its state
 * @st (k->r, the state's slab) and its batch's events, which are added
 * for the check and stay in the state when it succeeds (taken back by
 * pending_undo if the batch does not commit; on failure here, at once).
 * The fields are those of the walk: the balance at the start
 * of the latest month with usage (the month of the batch's latest end,
 * or the state's), and when an alert is due and every event of the batch
 * starts at or after the state's latest stored end (in order), the
 * crossing searched over the batch's events from their earliest start
 * with the state below them: that span is what window_fill reads first
 * (the stored events it reads end after its start), and the search is
 * the walk's. Otherwise (a late event, the balance before the batch
 * already at the lowest level due, a search starting elsewhere) the
 * walk's own search (send_epoch: the window read back from the batch's
 * latest usage) runs on the state with the batch's events, which hold
 * what the walk's rater holds at this epoch; the window's events go back
 * into the state after it, and the batch's are taken back. 0 or -1
 * (k->st set). (On h17's branch this gave other alerts than the walk on
 * the business benchmark at batch 20 000; on main after h34 it gives the
 * same md5 at batches of 20 000, 5 000 and 2 000, in random and in time
 * order, and itest_alerts compares it with the walk.)
 */
static int check_from_state(check *k, const acct *a, const centry *st)
{
    const billing_event **evs = NULL;
    const billing_event **running = NULL;
    billing_time_t at[BD_PCTS_MAX];
    size_t idx[BD_PCTS_MAX];
    billing_time_t exhausted = INT64_MAX;
    billing_time_t now;
    billing_time_t last = INT64_MIN;
    unsigned e = a->first_epoch;
    int fresh[BD_PCTS_MAX];
    const credit *cr = &a->cr; /* can_cross's, with a->total and a->unsent */
    size_t n_running = 0;
    size_t i;
    int ym;
    int pct = 0;
    int any = 0;
    int added = 0;
    int rc = -1;

    if (add_batch(k, a) != 0)
        goto fail;
    added = 1;
    rc = 0;
    if (!a->has_cr)
        goto out;
    mpq_set(k->total, a->total);
    /* The latest month with usage in the epoch: the batch's latest, or the state's. */
    ym = month_index(a, a->last_end - 1);
    if (st->max_epoch == e && st->month > ym)
        ym = st->month;
    any = thresholds_due(k, a, e, ym / 12, ym % 12 + 1, a->unsent, fresh, &now);
    if (any < 0)
        goto fail;
    for (i = 0; i < k->n_pcts; i++)
        pct = fresh[i] && (pct == 0 || k->pcts[i] < pct) ? k->pcts[i] : pct;
    rc = 0;
    if (!any)
        goto out;
    /* A late event (before the state's usage ends), or a search starting elsewhere. */
    if (a->first_start < st->usage_end || window_first(a, e, now) != a->first_start ||
        a->m > (size_t)BD_EPOCH_EVENTS_MAX)
        goto window;
    if (billing_rater_credit_balance(k->r, a->id, now, k->balance_text, sizeof(k->balance_text)) !=
        BILLING_OK)
        goto fail;
    take_back_batch(k, a, a->m);
    added = 0;
    if (a->first_start > epoch_start(a, e)) {
        level_of(k, pct);
        if (balance(k, a, a->first_start - 1, k->q) != 0)
            goto fail;
        /* The crossing is further back: read the window, as the walk does. */
        if (mpq_cmp(k->q, k->level) <= 0) {
            if (add_batch(k, a) != 0)
                goto fail;
            added = 1;
            goto window;
        }
    }
    evs = malloc((a->m + 1) * sizeof(*evs));
    running = malloc((a->m + 1) * sizeof(*running));
    if (evs == NULL || running == NULL)
        goto fail;
    for (i = 0; i < a->m; i++) {
        evs[i] = batch_event(k, a, i);
        last = billing_event_end(evs[i]) > last ? billing_event_end(evs[i]) : last;
    }
    for (i = 0; i < k->n_pcts; i++) {
        if (!fresh[i])
            continue;
        level_of(k, k->pcts[i]);
        if (billing_rater_credit_crossing(k->r, a->id, evs, a->m, a->first_start, k->level, &idx[i],
                                          &at[i], NULL, 0) != BILLING_OK)
            goto fail;
    }
    if (add_batch(k, a) != 0)
        goto fail;
    added = 1;
    /* The events ending last are what is running at the epoch's latest usage. */
    for (i = 0; i < a->m; i++) {
        if (billing_event_end(evs[i]) == last)
            running[n_running++] = evs[i];
    }
    billing_rater_credit_exhaustion(k->r, a->id, last, running, n_running, &exhausted, NULL, 0);
    for (i = 0; i < k->n_pcts; i++) {
        if (fresh[i] &&
            send_event(k, a, cr, i, at[i], idx[i] < a->m ? billing_event_id(evs[idx[i]]) : "",
                       exhausted) != 0) {
            rc = -1;
            goto out;
        }
    }
    rc = 0;
    goto out;
window:
    /*
     * The walk's window search, on the state with the batch's events: no
     * walk, no warming; its window from the state's kept events when it
     * has them (no read-back).
     */
    k->kp = st->kp;
    k->kacct = a;
    k->read_back = 0;
    rc = send_epoch(k, a, e, now, cr, fresh);
    if (k->read_back)
        k->cache->stats.windows++;
    else
        k->cache->stats.kept++;
    k->kp = NULL;
    k->kacct = NULL;
    goto out;
fail:
    k->st = bs_error_set(k->err, BS_ERR_FATAL, "alerts: account '%s': cannot compute its balance",
                         a->id);
    rc = -1;
out:
    /* Done: the state keeps them (pending_undo if the batch does not commit). */
    if (added && rc != 0)
        take_back_batch(k, a, a->m);
    free(evs);
    free(running);
    return rc;
}
/*
 * Note @a's state to move on by its batch's events if the batch commits
 * (@usage_end after): check_from_state left them in its rater.
 */
static int pend_hit(check *k, const acct *a, const centry *e)
{
    pending *p = k->pend;
    phit *grown;
    phit *h;
    size_t cap;
    size_t i;

    if (p->n_hits == p->cap_hits) {
        cap = p->cap_hits ? 2 * p->cap_hits : 64;
        grown = realloc(p->hits, cap * sizeof(*grown));
        if (grown == NULL)
            return -1;
        p->hits = grown;
        p->cap_hits = cap;
    }
    h = &p->hits[p->n_hits];
    memset(h, 0, sizeof(*h));
    h->account = strdup(a->id);
    h->recs = malloc((a->m + 1) * sizeof(*h->recs));
    if (h->account == NULL || h->recs == NULL) {
        free(h->account);
        free(h->recs);
        return -1;
    }
    p->n_hits++;
    h->ver = e->ver;
    h->stamp = a->changes;
    h->usage_end = a->last_end > e->usage_end ? a->last_end : e->usage_end;
    h->max_epoch = e->max_epoch;
    h->month = e->month;
    for (i = 0; i < a->m; i++) {
        billing_time_t last = a->refs[i].end - 1;
        unsigned ep = epoch_of(a, last);

        h->recs[i] = a->refs[i].index;
        if (ep > h->max_epoch || (ep == h->max_epoch && month_index(a, last) > h->month)) {
            h->month = month_index(a, last);
            h->max_epoch = ep;
        }
    }
    h->n = a->m;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The batch                                                               */
/* ---------------------------------------------------------------------- */

/* A distinct account of the batch and the index sorted_refs first gave it. */
typedef struct named {
    const char *name;
    size_t first;
} named;

static int named_cmp(const void *x, const void *y)
{
    return strcmp(((const named *)x)->name, ((const named *)y)->name);
}

/*
 * The batch's new records by account, then arrival, from the events the
 * ingest decoded (never decoded again); count in *@n_refs. The distinct
 * accounts (a few per thousand records) are found by hash and sorted
 * alone; the records follow by a stable counting sort on their account's
 * rank: the order of a sort by (account, index), without a string
 * comparison per pair of records.
 */
static rec_ref *sorted_refs(const bs_record_result *res, size_t n, size_t *n_refs)
{
    rec_ref *refs = calloc(n > 0 ? n : 1, sizeof(*refs));
    rec_ref *tmp = NULL;
    const char **acc = NULL;
    const char **distinct = NULL;
    size_t *of = NULL;  /* per record: its account's number, then its rank */
    size_t *pos = NULL; /* per number: its rank; then per rank, where its records go */
    named *names = NULL;
    size_t n_names;
    size_t k = 0;
    size_t i;
    size_t sum;

    if (refs == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        if (res[i].outcome != BS_RECORD_NEW || res[i].event == NULL)
            continue;
        refs[k].account = billing_event_account(res[i].event);
        refs[k].start = billing_event_start(res[i].event);
        refs[k].end = billing_event_end(res[i].event);
        refs[k++].index = i;
    }
    tmp = malloc((k > 0 ? k : 1) * sizeof(*tmp));
    acc = malloc((k > 0 ? k : 1) * sizeof(*acc));
    distinct = malloc((k > 0 ? k : 1) * sizeof(*distinct));
    of = malloc((k > 0 ? k : 1) * sizeof(*of));
    pos = calloc(k + 1, sizeof(*pos));
    names = malloc((k > 0 ? k : 1) * sizeof(*names));
    if (tmp == NULL || acc == NULL || distinct == NULL || of == NULL || pos == NULL ||
        names == NULL)
        goto fail;
    for (i = 0; i < k; i++)
        acc[i] = refs[i].account;
    n_names = bs_strings_index(acc, k, of, distinct);
    if (n_names == (size_t)-1)
        goto fail;
    for (i = 0; i < n_names; i++) {
        names[i].name = distinct[i];
        names[i].first = i;
    }
    qsort(names, n_names, sizeof(*names), named_cmp);
    /* Each record's rank; each rank's count, then its first place: a stable scatter. */
    for (i = 0; i < n_names; i++)
        pos[names[i].first] = i;
    for (i = 0; i < k; i++)
        of[i] = pos[of[i]];
    memset(pos, 0, (k + 1) * sizeof(*pos));
    for (i = 0; i < k; i++)
        pos[of[i]]++;
    for (sum = 0, i = 0; i < n_names; i++) {
        size_t c = pos[i];

        pos[i] = sum;
        sum += c;
    }
    for (i = 0; i < k; i++)
        tmp[pos[of[i]]++] = refs[i];
    if (k > 0)
        memcpy(refs, tmp, k * sizeof(*refs));
    goto out;
fail:
    free(refs);
    refs = NULL;
out:
    free(tmp);
    free(acc);
    free(distinct);
    free(of);
    free(pos);
    free(names);
    *n_refs = k;
    return refs;
}

/* The distinct accounts of @refs (sorted) or of @accts, as a PostgreSQL text[] literal. */
static char *accounts_array(const rec_ref *refs, const acct *accts, size_t n)
{
    const char **names = malloc((n > 0 ? n : 1) * sizeof(*names));
    size_t i;
    char *out;

    if (names == NULL)
        return NULL;
    for (i = 0; i < n; i++)
        names[i] = refs != NULL ? refs[i].account : accts[i].id;
    out = bs_text_array_distinct(names, n);
    free(names);
    return out;
}

/* The lowest epoch the @m records of @refs touch (each from its start on), their bounds. */
static void first_epoch(acct *a, const rec_ref *refs, size_t m)
{
    unsigned e;
    size_t i;

    a->first_epoch = (unsigned)a->n_bounds + 1;
    a->first_start = INT64_MAX;
    a->last_end = INT64_MIN;
    for (i = 0; i < m; i++) {
        if (refs[i].start < a->first_start)
            a->first_start = refs[i].start;
        e = epoch_of(a, refs[i].start);
        if (e < a->first_epoch)
            a->first_epoch = e;
        if (refs[i].end > a->last_end)
            a->last_end = refs[i].end;
    }
}

/*
 * Set up @a for the account of refs[0..m), whose grants start at @row0 of
 * @grants. 1 when its batch can raise an alert (@a then holds its bounds:
 * free them), 0 when not, -1 (@err set).
 */
static int one_account(check *k, bs_catalog *cat, const bs_account_grants *grants, size_t row0,
                       const rec_ref *refs, size_t m, acct *a, bs_error *err)
{
    centry *e = NULL;
    int can;

    memset(a, 0, sizeof(*a));
    a->id = refs[0].account;
    a->currency = bs_account_grants_at(grants, row0)->currency;
    a->grants = grants;
    a->row0 = row0;
    a->refs = refs;
    a->m = m;
    while (row0 + a->rows < bs_account_grants_count(grants) &&
           strcmp(bs_account_grants_at(grants, row0 + a->rows)->account, a->id) == 0)
        a->rows++;
    a->zone = bs_catalog_zone(cat, a->id);
    if (a->zone == NULL)
        return 0;
    if (bounds_of(a) != 0) {
        bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
        return -1;
    }
    first_epoch(a, refs, m);
    if (k->cache != NULL) {
        /*
         * Valid iff nothing but this batch changed its stored events since
         * (its change counter moved by exactly the batch's new events:
         * another billingd, `billing ingest` or psql raise it too) and its
         * grants are the ones it was kept with.
         */
        a->changes = grant_of(a, 0)->changes;
        a->digest = grants_digest(grants, row0, a->rows);
        e = entry_find(k->cache, a->id);
        /* Busy: it holds the events of another connection's batch not yet done. */
        if (e != NULL &&
            (e->digest != a->digest || e->stamp + (int64_t)m != a->changes || e->busy)) {
            entry_drop(k->cache, a->id);
            k->cache->stats.stale++;
            e = NULL;
        }
        k->cache->stats.hits += e != NULL;
    }
    can = can_cross(k, a);
    if (can < 0)
        bs_error_set(err, BS_ERR_NOMEM, "alerts: account '%s': grants", a->id);
    else if (can == 0 && e != NULL) {
        /*
         * No alert left to find: the state goes rather than move on by
         * the batch (its rater's adds were a tenth of billingd on the
         * business bench). Nothing needs it until the account can raise
         * one again (a grant, a later epoch, a late event), and then the
         * walk warms it again.
         */
        entry_drop(k->cache, a->id);
    } else if (can > 0 && e != NULL && one_epoch(a, e))
        a->hit = e;
    if (can <= 0)
        acct_clear(a);
    return can;
}

/*
 * The accounts of @refs that can raise an alert, into k->accts: the
 * accounts and the rows of @grants are walked together (both in strcmp
 * order). BS_OK or the error.
 */
static bs_status can_alert(check *k, bs_catalog *cat, const bs_account_grants *grants,
                           const rec_ref *refs, size_t n, bs_error *err)
{
    size_t from = 0;
    size_t to;
    size_t row = 0;
    size_t n_grants = bs_account_grants_count(grants);
    size_t n_accounts = n > 0;
    size_t i;
    int can;

    /* One acct per distinct account (@refs by account), not per record. */
    for (i = 1; i < n; i++)
        n_accounts += refs[i].account != refs[i - 1].account &&
                      strcmp(refs[i].account, refs[i - 1].account) != 0;
    k->accts = calloc(n_accounts > 0 ? n_accounts : 1, sizeof(*k->accts));
    if (k->accts == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    while (from < n) {
        for (to = from + 1; to < n && strcmp(refs[to].account, refs[from].account) == 0; to++)
            ;
        while (row < n_grants &&
               strcmp(bs_account_grants_at(grants, row)->account, refs[from].account) < 0)
            row++;
        if (row < n_grants &&
            strcmp(bs_account_grants_at(grants, row)->account, refs[from].account) == 0) {
            can = one_account(k, cat, grants, row, &refs[from], to - from, &k->accts[k->n_accts],
                              err);
            if (can < 0)
                return err->status;
            k->n_accts += (size_t)can;
        }
        from = to;
    }
    return BS_OK;
}

/*
 * The accounts that can raise an alert, walked over their stored
 * aggregates in one query (on_epoch per account and epoch).
 */
static bs_status walk(check *k, bs_catalog *cat, bs_error *err)
{
    char *array = accounts_array(NULL, k->accts, k->n_accts);
    bs_status st;

    if (array == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    k->st = BS_OK;
    k->err = err;
    k->cur = 0;
    st = bs_aggregates_rate_by_epoch(k->c, cat, k->r, array, on_epoch, k, err);
    /* Stopped by on_epoch: its own status and message. */
    if (st == BS_ERR_INVALID && k->st != BS_OK)
        st = k->st;
    free(array);
    return st;
}

/*
 * The accounts whose balance their cached state gives (a->hit): checked
 * from it, each then noted to move on if the batch commits. 0, or -1
 * (k->st set).
 */
static int check_hits(check *k)
{
    billing_rater *walk_r = k->r;
    slab *sl;
    acct *a;
    size_t i;
    int rc = 0;

    k->st = BS_OK;
    for (i = 0; i < k->n_accts && rc == 0; i++) {
        a = &k->accts[i];
        if (a->hit == NULL)
            continue;
        sl = &k->cache->slabs[a->hit->slot];
        sl->used = k->cache->tick;
        k->r = sl->r;
        rc = check_from_state(k, a, a->hit);
        /* A search that failed half-way may leave the state changed: found stale next time. */
        if (rc != 0)
            a->hit->stamp = INT64_MIN;
        if (rc == 0) {
            /* The batch's events stay in the state (the trial's): moved on if it commits. */
            a->fast = 1;
            k->cache->stats.fast++;
            if (pend_hit(k, a, a->hit) != 0) {
                take_back_batch(k, a, a->m);
                k->st = bs_error_set(k->err, BS_ERR_NOMEM, "alerts: out of memory");
                rc = -1;
            } else {
                a->hit->busy = 1;
                keep_hit(k->cache, k->res, &k->pend->hits[k->pend->n_hits - 1], a->hit);
            }
        }
        k->r = walk_r;
    }
    return rc;
}

/* The accounts not checked from a state first, in their order; how many. */
static size_t slow_first(check *k)
{
    acct *sorted = malloc((k->n_accts + 1) * sizeof(*sorted));
    size_t n = 0;
    size_t at;
    size_t i;

    if (sorted == NULL)
        return SIZE_MAX;
    for (i = 0; i < k->n_accts; i++) {
        if (!k->accts[i].fast)
            sorted[n++] = k->accts[i];
    }
    at = n;
    for (i = 0; i < k->n_accts; i++) {
        if (k->accts[i].fast)
            sorted[at++] = k->accts[i];
    }
    free(k->accts);
    k->accts = sorted;
    return n;
}

/* The state-to-be of warmed account @account in @p (bytewise), or NULL. */
static pwarm *pwarm_find(pending *p, const char *account)
{
    size_t lo = 0;
    size_t hi = p->n_warmed;
    size_t mid;
    int cmp;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        cmp = strcmp(p->warmed[mid].account, account);
        if (cmp == 0)
            return &p->warmed[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A bs_usage_end_fn: the latest stored end of a warmed account (@arg: pending). */
static void on_usage_end(void *arg, const char *account, billing_time_t end)
{
    pwarm *w = pwarm_find(arg, account);

    if (w != NULL)
        w->usage_end = end;
}

/*
 * The kept events of walked account @a's state-to-be @w: its batch's,
 * when they are every event it ever stored (its change counter, which
 * only grows, is just the batch's new events) and within the bounds;
 * else none. 0, or -1 (no memory).
 */
static int warm_kept(check *k, const acct *a, pwarm *w)
{
    size_t i;

    if (a->changes != (int64_t)a->m || a->m > BD_KEPT_ACCOUNT_MAX)
        return 0;
    w->kp = calloc(1, sizeof(*w->kp));
    if (w->kp == NULL)
        return -1;
    for (i = 0; i < a->m; i++) {
        if (kept_push(w->kp, batch_event(k, a, i)) != 0)
            return -1;
    }
    return 0;
}

/* What warm_read fills: the batch's pending states and its events kept so far. */
typedef struct since {
    check *k;
    size_t total;
    billing_event *ev; /* each row checked in it (bs_event_set), then kept from it */
    bs_status st;      /* why on_since stopped (BS_OK: it did not) */
    char why[MSG_MAX]; /* and what to say, naming the event */
} since;

/*
 * A bs_event_fn: one stored event of a warmed account read by warm_read,
 * kept in its state-to-be; past BD_KEPT_ACCOUNT_MAX of the account, or
 * the cache's max_events with those kept before, the account keeps none.
 * 0, or -1 with sn->st and sn->why set: BS_ERR_INVALID when libbilling
 * refuses the row (libbilling's reason and the event named), or
 * BS_ERR_NOMEM.
 */
static int on_since(void *arg, const char *account, const char *id, const char *resource,
                    const char *meter, billing_time_t start, billing_time_t end,
                    const char *quantity, const char *model, const char *region)
{
    since *sn = arg;
    pwarm *w = pwarm_find(sn->k->pend, account);
    char msg[MSG_MAX];
    billing_status lst;

    if (w == NULL || w->kp == NULL)
        return 0;
    w->n_read++;
    if (w->n_read > BD_KEPT_ACCOUNT_MAX ||
        sn->k->cache->n_kept + sn->total + 1 > sn->k->cache->max_events) {
        /* Over a bound: nothing kept (its windows are read back, as before). */
        sn->total -= w->kp->n;
        kept_free(w->kp);
        w->kp = NULL;
        sn->k->cache->stats.unkept++;
        return 0;
    }
    lst = bs_event_set(sn->ev, account, id, resource, meter, start, end, quantity, model, region,
                       msg, sizeof(msg));
    if (lst != BILLING_OK) {
        sn->st = BS_ERR_INVALID;
        snprintf(sn->why, sizeof(sn->why),
                 "alerts: account '%.128s': stored event '%.128s': %.200s", account, id,
                 msg[0] != '\0' ? msg : billing_strerror(lst));
        return -1;
    }
    if (kept_push(w->kp, sn->ev) != 0) {
        sn->st = BS_ERR_NOMEM;
        snprintf(sn->why, sizeof(sn->why), "alerts: out of memory");
        return -1;
    }
    sn->total++;
    return 0;
}

/*
 * The kept events of the walked accounts (the first @n of k->accts) whose
 * batch was not all they ever stored (warm_kept kept nothing): their
 * stored events from the start of their latest epoch with usage on (the
 * batch's with them: every event a window of a later check can hold,
 * since a state serves only that epoch and later ones), read once, in
 * one query for all of them. BS_OK or the error.
 */
static bs_status warm_read(check *k, size_t n, bs_error *err)
{
    pending *p = k->pend;
    const char **names = malloc((n + 1) * sizeof(*names));
    billing_time_t *froms = malloc((n + 1) * sizeof(*froms));
    since sn;
    size_t m = 0;
    size_t i;
    bs_status st = BS_OK;

    if (names == NULL || froms == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) {
        /* Epoch 0 (before every grant) has no start: its windows are read back. */
        if (p->warmed[i].kp != NULL || k->accts[i].w_epoch == 0 || k->cache->max_events == 0)
            continue;
        p->warmed[i].kp = calloc(1, sizeof(*p->warmed[i].kp));
        if (p->warmed[i].kp == NULL) {
            st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
            goto out;
        }
        names[m] = k->accts[i].id;
        froms[m++] = epoch_start(&k->accts[i], k->accts[i].w_epoch);
    }
    sn.k = k;
    sn.total = 0;
    sn.st = BS_OK;
    sn.why[0] = '\0';
    sn.ev = billing_event_new();
    if (sn.ev == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
        goto out;
    }
    st = bs_events_since_read(k->c, names, froms, m, BD_KEPT_ACCOUNT_MAX, on_since, &sn, err);
    if (st != BS_OK && sn.st != BS_OK) /* on_since stopped it: say why */
        st = bs_error_set(err, sn.st, "%s", sn.why);
    if (st == BS_OK)
        k->cache->stats.read += m;
    billing_event_destroy(sn.ev);
out:
    free(names);
    free(froms);
    return st;
}

/*
 * The walked accounts (the first @n of k->accts, bytewise) become the
 * cached states of the walk's rater, which then holds their stored usage
 * with the batch's (read after the ingest), if the batch commits; their
 * latest stored ends read in one query. BS_OK or the error.
 */
static bs_status warm(check *k, size_t n, bs_error *err)
{
    pending *p = k->pend;
    char *array;
    bs_status st;
    size_t i;

    p->warmed = calloc(n, sizeof(*p->warmed));
    if (p->warmed == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    for (i = 0; i < n; i++) {
        p->warmed[i].account = strdup(k->accts[i].id);
        if (p->warmed[i].account == NULL)
            return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
        p->n_warmed++;
        p->warmed[i].stamp = k->accts[i].changes;
        p->warmed[i].usage_end = INT64_MAX;
        p->warmed[i].digest = k->accts[i].digest;
        p->warmed[i].max_epoch = k->accts[i].w_epoch;
        p->warmed[i].month = k->accts[i].w_month;
        if (warm_kept(k, &k->accts[i], &p->warmed[i]) != 0)
            return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    }
    st = warm_read(k, n, err);
    if (st != BS_OK)
        return st;
    array = accounts_array(NULL, k->accts, n);
    if (array == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    st = bs_usage_ends_read(k->c, array, on_usage_end, p, err);
    free(array);
    if (st == BS_OK) {
        p->warm = k->r;
        k->r = NULL;
        k->cache->stats.warmed += n;
    }
    return st;
}

/* The rater and the sent alerts of the accounts of @array, then the accounts that can alert. */
static bs_status run(check *k, bs_catalog *cat, const char *array, const bs_account_grants *grants,
                     const rec_ref *refs, size_t n_refs, bs_error *err)
{
    char msg[MSG_MAX];
    bs_sent_alerts *sent = NULL;
    bs_status st;
    size_t all;
    size_t n_slow;
    size_t i;

    st = bs_sent_alerts_read(k->c, array, &sent, err);
    if (st != BS_OK)
        return st;
    if (billing_rater_new(bs_catalog_lib(cat), &k->r, msg, sizeof(msg)) != BILLING_OK) {
        bs_sent_alerts_free(sent);
        return bs_error_set(err, BS_ERR_INVALID, "alerts: %s", msg);
    }
    billing_rater_set_dedupe(k->r, 0);
    k->sent = sent;
    k->err = err;
    mpq_inits(k->balance, k->level, k->total, k->q, NULL);
    st = can_alert(k, cat, grants, refs, n_refs, err);
    if (st == BS_OK && k->cache != NULL && check_hits(k) != 0)
        st = k->st;
    all = k->n_accts;
    n_slow = st == BS_OK && k->cache != NULL ? slow_first(k) : all;
    if (n_slow == SIZE_MAX)
        st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    if (st == BS_OK && n_slow > 0) {
        k->n_accts = n_slow; /* the walk's, in order */
        st = walk(k, cat, err);
        if (st == BS_OK && k->cache != NULL)
            st = warm(k, n_slow, err);
    }
    if (st == BS_OK && send_all(k) != 0)
        st = k->st;
    for (i = 0; i < k->n_out; i++)
        free(k->out[i]);
    free(k->out);
    k->out = NULL;
    k->n_out = 0;
    k->cap_out = 0;
    for (i = 0; i < all; i++)
        acct_clear(&k->accts[i]);
    free(k->accts);
    k->accts = NULL;
    k->n_accts = 0;
    mpq_clears(k->balance, k->level, k->total, k->q, NULL);
    billing_rater_destroy(k->r);
    k->r = NULL;
    bs_sent_alerts_free(sent);
    return st;
}

bs_status bd_alerts_check_cached(bd_alert_cache *cache, bs_conn *c, bs_catalog *cat,
                                 const int *pcts, size_t n, const bs_record *recs,
                                 const bs_record_result *results, size_t n_recs, bd_crossing_fn fn,
                                 void *arg, bs_error *err)
{
    bs_account_grants *grants = NULL;
    rec_ref *refs;
    char *array = NULL;
    size_t n_refs = 0;
    check k;
    bs_status st = BS_OK;

    (void)recs; /* the ingest decoded them: results[i].event */
    if (n > BD_PCTS_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "alerts: more than %d thresholds", BD_PCTS_MAX);
    memset(&k, 0, sizeof(k));
    if (cache != NULL) {
        /* The raters borrow the catalog: another one (a reload) makes every state go. */
        if (cache->cat != cat)
            bd_alert_cache_forget(cache);
        cache->cat = cat;
        cache->tick++;
        k.pend = pending_of(cache, c, 1);
        if (k.pend != NULL) {
            /* A retry of the batch: what its earlier attempt noted goes. */
            pending_undo(cache, k.pend);
            pending_clear(k.pend);
            k.pend->c = c;
            k.pend->res = results;
            k.cache = cache;
        }
    }
    k.res = results;
    refs = sorted_refs(results, n_recs, &n_refs);
    if (refs == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    if (n_refs == 0)
        goto out;
    array = accounts_array(refs, NULL, n_refs);
    if (array == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
        goto out;
    }
    st = bs_account_grants_read(c, array, &grants, err);
    if (st != BS_OK || bs_account_grants_count(grants) == 0)
        goto out;
    k.c = c;
    k.pcts = pcts;
    k.n_pcts = n;
    k.fn = fn;
    k.arg = arg;
    st = run(&k, cat, array, grants, refs, n_refs, err);
out:
    bs_account_grants_free(grants);
    free(array);
    free(refs);
    return st;
}

bs_status bd_alerts_check(bs_conn *c, bs_catalog *cat, const int *pcts, size_t n,
                          const bs_record *recs, const bs_record_result *results, size_t n_recs,
                          bd_crossing_fn fn, void *arg, bs_error *err)
{
    return bd_alerts_check_cached(NULL, c, cat, pcts, n, recs, results, n_recs, fn, arg, err);
}
