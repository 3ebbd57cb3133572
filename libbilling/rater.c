/*
 * rater.c - validating events, permanent dedupe, splitting usage at every
 * boundary that changes its price (local month, price version, credit
 * epoch, subscription term) and accumulating exact integer aggregates.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "invoice.h"
#include "rater.h"
#include "zone.h"

/* Pieces of an event kept while splitting it, so that they are not looked up twice. */
#define FEW_PIECES 8

/* One piece of an event: [start, end) with everything that prices it. */
typedef struct bl_piece {
    billing_time_t start;
    billing_time_t end;
    billing_time_t lo; /* [lo, hi): around the piece, where its key stays the same */
    billing_time_t hi; /* (kept in the memo unless a subscription could cover it) */
    int memo;          /* non-zero if the piece may be kept in the memo */
    bl_aggkey key;
} bl_piece;

/* ---------------------------------------------------------------------- */
/* Interning                                                               */
/* ---------------------------------------------------------------------- */

/*
 * Interned keys are compared and hashed a word at a time. An event's
 * fields are arrays of BL_ID_MAX + 1 or BL_ATTR_MAX + 1 bytes, so the
 * words covering a field's @n bytes can always be read; the bytes past @n
 * are masked off. Interned copies are zero-padded to whole words.
 */
#define WORDS(n) (((n) + 7) / 8)

/* The word-wide reads below rely on the event's fields being arrays of whole words. */
#define EV_FIELD_SIZE(f) sizeof(((const billing_event *)NULL)->f)
_Static_assert(EV_FIELD_SIZE(id) >= 8 * WORDS(BL_ID_MAX) &&
                   EV_FIELD_SIZE(account) >= 8 * WORDS(BL_ID_MAX) &&
                   EV_FIELD_SIZE(resource) >= 8 * WORDS(BL_ID_MAX) &&
                   EV_FIELD_SIZE(model) >= 8 * WORDS(BL_ATTR_MAX) &&
                   EV_FIELD_SIZE(region) >= 8 * WORDS(BL_ATTR_MAX),
               "event fields too small for word-wide reads");

/* The word at @s with only its first @n (1..7) bytes kept, in memory order (any endianness). */
static inline uint64_t word_head(const char *s, size_t n)
{
    static const unsigned char ones[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint64_t w;
    uint64_t mask;

    memcpy(&w, s, 8);
    memcpy(&mask, ones + 8 - n, 8);
    return w & mask;
}

/* Non-zero if a byte of @w is outside 0x21..0x7e (printable ASCII but space). */
static inline uint64_t word_not_graph(uint64_t w)
{
    const uint64_t high = UINT64_C(0x8080808080808080);
    uint64_t low = w & ~high; /* each byte below 0x80: the sums below carry into no other byte */

    /* A high bit set; or, on the low seven bits, below 0x21 or above 0x7e. */
    return (w | ~(low + UINT64_C(0x5f5f5f5f5f5f5f5f)) | (low + UINT64_C(0x0101010101010101))) &
           high;
}

/*
 * bl_valid_id_n (status.c) for an event's id field of @n bytes, read a
 * word at a time (the field is an array of whole words, static assertion
 * above; the bytes past @n count as 'A', which is valid), without a call:
 * the rater checks an event's id and resource on every add and take-back.
 */
static BL_ALWAYS_INLINE int field_valid_id(const char *s, size_t n)
{
    static const unsigned char ones[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint64_t bad = 0;
    uint64_t w;
    uint64_t mask;
    size_t i;

    if (n == 0 || n > BL_ID_MAX)
        return 0;
    for (i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        bad |= word_not_graph(w);
    }
    if (i < n) {
        memcpy(&w, s + i, 8);
        memcpy(&mask, ones + 8 - (n - i), 8);
        bad |= word_not_graph((w & mask) | (UINT64_C(0x4141414141414141) & ~mask));
    }
    return bad == 0;
}

/* Hash of the @n bytes at @s (readable to a whole word), continuing @h. */
static inline uint64_t field_hash(const char *s, size_t n, uint64_t h)
{
    size_t i;
    uint64_t w;

    for (i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * UINT64_C(0x9e3779b97f4a7c15) + n;
    }
    if (i < n)
        h = (h ^ word_head(s + i, n - i)) * UINT64_C(0x9e3779b97f4a7c15) + n;
    return h ^ (h >> 29);
}

/* Non-zero if the @n bytes at @s equal the zero-padded copy @key. */
static BL_ALWAYS_INLINE int field_eq(const char *key, const char *s, size_t n)
{
    size_t i;
    uint64_t k;
    uint64_t w;

    for (i = 0; i + 8 <= n; i += 8) {
        memcpy(&k, key + i, 8);
        memcpy(&w, s + i, 8);
        if (k != w)
            return 0;
    }
    memcpy(&k, key + i, 8);
    return i == n || k == word_head(s + i, n - i);
}

static void intern_free(bl_intern *t)
{
    size_t i;

    for (i = 0; i < t->cap; i++)
        free((char *)t->slots[i].key);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

/*
 * The value interned for the bytes @a (@alen) followed by @b (@blen), of
 * hash @h, or UINT32_MAX when absent.
 */
static inline uint32_t intern_find(bl_intern *t, uint64_t h, const char *a, size_t alen,
                                   const char *b, size_t blen)
{
    uint32_t len = (uint32_t)(alen << 8 | blen);
    size_t i;
    const bl_intern_slot *s;

    if (t->cap == 0)
        return UINT32_MAX;
    for (i = (size_t)h & (t->cap - 1); (s = &t->slots[i])->key != NULL;
         i = (i + 1) & (t->cap - 1)) {
        if (s->hash == h && s->len == len && field_eq(s->key, a, alen) &&
            field_eq(s->key + 8 * WORDS(alen), b, blen)) {
            t->last_key = s->key;
            t->last_len = len;
            t->last_value = s->value;
            return s->value;
        }
    }
    return UINT32_MAX;
}

/*
 * The value of the key intern_find found last (or intern_copy added) if
 * it is @a (@alen) followed by @b (@blen), else UINT32_MAX: no hash.
 */
static BL_ALWAYS_INLINE uint32_t intern_last(const bl_intern *t, const char *a, size_t alen,
                                             const char *b, size_t blen)
{
    if (t->last_key != NULL && t->last_len == (uint32_t)(alen << 8 | blen) &&
        field_eq(t->last_key, a, alen) && field_eq(t->last_key + 8 * WORDS(alen), b, blen))
        return t->last_value;
    return UINT32_MAX;
}

static void intern_place(bl_intern_slot *slots, size_t cap, const bl_intern_slot *from)
{
    size_t i = (size_t)from->hash & (cap - 1);

    while (slots[i].key != NULL)
        i = (i + 1) & (cap - 1);
    slots[i] = *from;
}

/*
 * Remember that @key (lengths packed as in bl_intern_slot), of hash @h,
 * is @value; the key is not present. Returns 0, or -1 when out of memory
 * (table unchanged: interning is only a shortcut).
 */
static int intern_add(bl_intern *t, uint64_t h, const char *key, uint32_t len, uint32_t value)
{
    size_t ncap;
    size_t i;
    bl_intern_slot *slots;
    bl_intern_slot s;

    if ((t->count + 1) * 2 > t->cap) {
        ncap = t->cap ? t->cap * 2 : 64;
        slots = calloc(ncap, sizeof(*slots));
        if (slots == NULL)
            return -1;
        for (i = 0; i < t->cap; i++) {
            if (t->slots[i].key != NULL)
                intern_place(slots, ncap, &t->slots[i]);
        }
        free(t->slots);
        t->slots = slots;
        t->cap = ncap;
    }
    s.hash = h;
    s.key = key;
    s.len = len;
    s.value = value;
    intern_place(t->slots, t->cap, &s);
    t->count++;
    return 0;
}

static uint64_t account_hash(const billing_rater *r, const billing_event *ev)
{
    return bl_hash_mix(field_hash(ev->account, ev->account_len, r->seed));
}

static uint64_t pair_hash(const billing_rater *r, const billing_event *ev)
{
    return bl_hash_mix(
        field_hash(ev->region, ev->region_len, field_hash(ev->model, ev->model_len, r->seed ^ 1u)));
}

/*
 * Intern the bytes @a (@alen) and @b (@blen), of hash @h, as @value in a
 * zero-padded copy. Returns 0, or -1 when out of memory (nothing kept:
 * interning is only a shortcut).
 */
static int intern_copy(bl_intern *t, uint64_t h, const char *a, size_t alen, const char *b,
                       size_t blen, uint32_t value)
{
    char *key = calloc(WORDS(alen) + WORDS(blen) + 1, 8);

    if (key == NULL)
        return -1;
    memcpy(key, a, alen);
    memcpy(key + 8 * WORDS(alen), b, blen);
    if (intern_add(t, h, key, (uint32_t)(alen << 8 | blen), value) != 0) {
        free(key);
        return -1;
    }
    t->last_key = key;
    t->last_len = (uint32_t)(alen << 8 | blen);
    t->last_value = value;
    return 0;
}

/* The pair number of @ev's model and region, interned on first sight; BL_PAIR_NONE past the cap. */
static uint32_t pair_intern(billing_rater *r, const billing_event *ev, uint64_t h)
{
    uint32_t v = intern_find(&r->pair_ids, h, ev->model, ev->model_len, ev->region, ev->region_len);

    if (v != UINT32_MAX)
        return v;
    v = (uint32_t)r->pair_ids.count;
    if (v >= BL_PAIRS_MAX ||
        intern_copy(&r->pair_ids, h, ev->model, ev->model_len, ev->region, ev->region_len, v) != 0)
        return BL_PAIR_NONE;
    return v;
}

/* ---------------------------------------------------------------------- */
/* The memo                                                                */
/* ---------------------------------------------------------------------- */

/* The first of the two entries where (@ai, @pair, @meter) may be kept. */
static inline size_t memo_bucket(const billing_rater *r, size_t ai, uint32_t pair,
                                 billing_meter meter)
{
    uint64_t k =
        ((uint64_t)ai << 16 | (uint64_t)pair << 2 | (uint64_t)meter) * UINT64_C(0x9e3779b97f4a7c15);

    return (size_t)(k >> r->memo_shift) & ~(size_t)1;
}

static inline int memo_is(const bl_memo *m, size_t ai, uint32_t pair, billing_meter meter)
{
    return m->account == (uint32_t)ai + 1 && m->pair == pair && m->meter == (uint32_t)meter;
}

/* The memo entry whose aggregate takes all of @ev, or NULL. */
static inline bl_memo *memo_find(const billing_rater *r, const billing_event *ev, size_t ai,
                                 uint32_t pair)
{
    bl_memo *m;
    size_t b;
    int i;

    if (r->memo_cap == 0 || pair == BL_PAIR_NONE)
        return NULL;
    b = memo_bucket(r, ai, pair, ev->meter);
    for (i = 0; i < 2; i++) {
        m = &r->memo[b + (size_t)i];
        if (memo_is(m, ai, pair, ev->meter))
            return ev->start >= m->lo && ev->end <= m->hi ? m : NULL;
    }
    return NULL;
}

/* Size the memo for the aggregates there are (emptying it), if it can grow. */
static void memo_size(billing_rater *r)
{
    size_t cap = BL_MEMO_MIN;
    unsigned bits = 10;
    bl_memo *memo;

    if (r->memo_cap >= BL_MEMO_MAX || r->n_aggs * 4 <= r->memo_cap)
        return;
    while (cap < r->n_aggs * 4 && cap < BL_MEMO_MAX) {
        cap *= 2;
        bits++;
    }
    memo = calloc(cap, sizeof(*memo));
    if (memo == NULL)
        return;
    free(r->memo);
    r->memo = memo;
    r->memo_cap = cap;
    r->memo_shift = 64 - bits;
}

/* Keep piece @p of @ev (account @ai, pair @pair), added to aggregate @agg, in the memo. */
static void memo_put(billing_rater *r, const billing_event *ev, size_t ai, uint32_t pair,
                     const bl_piece *p, const bl_agg *agg)
{
    bl_memo *m;
    size_t b;

    if (!p->memo || pair == BL_PAIR_NONE)
        return;
    memo_size(r);
    if (r->memo_cap == 0)
        return;
    b = memo_bucket(r, ai, pair, ev->meter);
    m = &r->memo[b];
    if (memo_is(&r->memo[b + 1], ai, pair, ev->meter))
        m = &r->memo[b + 1];
    else if (!memo_is(m, ai, pair, ev->meter))
        r->memo[b + 1] = *m; /* a new key goes first, the older entry second */
    m->lo = p->lo;
    m->hi = p->hi;
    m->account = (uint32_t)ai + 1;
    m->agg = (uint32_t)(agg - r->aggs);
    m->pair = pair;
    m->meter = (uint32_t)ev->meter;
}

/* NS_PER_HOUR_X_NANO and NANO_X_GB of month.c, as their factors (each fits an unsigned long). */
static void scratch_init(bl_scratch *s, int digits)
{
    size_t i;

    mpz_init(s->pow10);
    mpz_ui_pow_ui(s->pow10, 10, digits > 0 ? (unsigned long)digits : 0);
    /* ns per hour x nano-units per unit: 3600 x 10^9 x 10^9. */
    mpz_init_set_ui(s->div_hour, 3600);
    mpz_mul_ui(s->div_hour, s->div_hour, 1000000000UL);
    mpz_mul_ui(s->div_hour, s->div_hour, 1000000000UL);
    /* nano-units per unit x bytes per GB: 10^9 x 10^9. */
    mpz_init_set_ui(s->div_gb, 1000000000UL);
    mpz_mul_ui(s->div_gb, s->div_gb, 1000000000UL);
    for (i = 0; i < sizeof(s->q) / sizeof(s->q[0]); i++)
        mpq_init(s->q[i]);
    for (i = 0; i < sizeof(s->z) / sizeof(s->z[0]); i++)
        mpz_init(s->z[i]);
}

static void scratch_clear(bl_scratch *s)
{
    size_t i;

    mpz_clear(s->pow10);
    mpz_clear(s->div_hour);
    mpz_clear(s->div_gb);
    for (i = 0; i < sizeof(s->q) / sizeof(s->q[0]); i++)
        mpq_clear(s->q[i]);
    for (i = 0; i < sizeof(s->z) / sizeof(s->z[0]); i++)
        mpz_clear(s->z[i]);
}

billing_status billing_rater_new(billing_catalog *cat, billing_rater **out, char *errbuf,
                                 size_t errsize)
{
    billing_rater *r = NULL;
    billing_status st;

    if (out == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "rater: out is NULL");
    *out = NULL;
    if (cat == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "catalog is NULL");
    st = bl_catalog_freeze(cat, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        goto nomem;
    r->cat = cat;
    r->dedupe = 1;
    /* Per-rater seed: hash-flooding inputs cannot be precomputed for every process. */
    r->seed = bl_hash_mix((uint64_t)(uintptr_t)r ^ UINT64_C(0x2545f4914f6cdd1d));
    scratch_init(&r->scratch, cat->digits);
    /* Per-account storage comes with the accounts (bl_rater_acct). */
    *out = r;
    return BILLING_OK;
nomem:
    billing_rater_destroy(r);
    return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
}

void billing_rater_destroy(billing_rater *r)
{
    size_t i;

    if (r == NULL)
        return;
    scratch_clear(&r->scratch);
    for (i = 0; i < r->n_aggs; i++) {
        if (r->aggs[i].has_extra)
            mpq_clear(r->aggs[i].extra);
    }
    if (r->credit_memo_free != NULL)
        r->credit_memo_free(r);
    if (r->month_spare_free != NULL)
        r->month_spare_free(r);
    for (i = 0; i < r->n_accts; i++)
        free(r->accts[i].aggs.data);
    free(r->accts);
    free(r->acct_slots);
    intern_free(&r->account_ids);
    intern_free(&r->pair_ids);
    free(r->memo);
    bl_strmap_free(&r->attr_map);
    free(r->attrs.data);
    free(r->aggs);
    free(r->agg_slots);
    free(r->seen);
    free(r->seen_slots);
    free(r->arena);
    free(r);
}

billing_status billing_rater_set_dedupe(billing_rater *r, int on)
{
    if (r->events > 0)
        return BILLING_ERR_STATE;
    r->dedupe = on != 0;
    return BILLING_OK;
}

uint64_t billing_rater_event_count(const billing_rater *r)
{
    return r->events;
}

size_t billing_rater_aggregate_count(const billing_rater *r)
{
    return r->n_aggs;
}

size_t billing_rater_account_count(const billing_rater *r)
{
    return r->cat->accounts.len;
}

const char *billing_rater_account_id(const billing_rater *r, size_t index)
{
    if (index >= r->cat->accounts.len)
        return NULL;
    return BL_AT(r->cat->accounts, bl_account, r->cat->aorder[index])->id;
}

void bl_agg_value(const bl_agg *a, mpq_t out)
{
    /* An integer over 1 is canonical: no temporary. */
    bl_mpz_set_i128(mpq_numref(out), a->sum);
    mpz_set_ui(mpq_denref(out), 1);
    if (a->has_extra)
        mpq_add(out, out, a->extra);
}

/* ---------------------------------------------------------------------- */
/* Validation                                                              */
/* ---------------------------------------------------------------------- */

static billing_status validate(const billing_event *ev, char *errbuf, size_t errsize)
{
    const char *id = (ev->set & BL_EV_ID) ? ev->id : "(no id)";
    const char *refused = ev->refused ? bl_event_refused_field(ev) : NULL;

    if (refused != NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': field '%s': the value given to its setter was refused", id,
                         refused);
    if (!(ev->set & BL_EV_ID))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "event: field 'id' is missing");
    if (!bl_valid_id_n(ev->id, ev->id_len))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': field 'id' must be printable ASCII without spaces", id);
    if (!(ev->set & BL_EV_ACCOUNT) || !bl_valid_id_n(ev->account, ev->account_len))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "event '%s': field 'account' is %s",
                         id, (ev->set & BL_EV_ACCOUNT) ? "not a valid id" : "missing");
    if (!(ev->set & BL_EV_RESOURCE) || !bl_valid_id_n(ev->resource, ev->resource_len))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "event '%s': field 'resource' is %s",
                         id, (ev->set & BL_EV_RESOURCE) ? "not a valid id" : "missing");
    if (!(ev->set & BL_EV_METER))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': field 'meter' is missing", id);
    if (!(ev->set & BL_EV_INTERVAL))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': field 'start' is missing", id);
    if (ev->end <= ev->start)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': field 'end' must be after 'start'", id);
    if (ev->start < BL_TIME_MIN || ev->end > BL_TIME_MAX)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         "event '%s': field '%s' is outside 1900..2200", id,
                         ev->start < BL_TIME_MIN ? "start" : "end");
    if (!(ev->set & BL_EV_QUANTITY))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': field 'quantity' is missing", id);
    if (!bl_printable_n(ev->model, ev->model_len) || !bl_printable_n(ev->region, ev->region_len))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': field '%s' has non-printable characters", id,
                         bl_printable_n(ev->model, ev->model_len) ? "region" : "model");
    return BILLING_OK;
}

/* ---------------------------------------------------------------------- */
/* Splitting                                                               */
/* ---------------------------------------------------------------------- */

static int is_time_meter(billing_meter m)
{
    return m != BILLING_METER_TRAFFIC;
}

/* The local month containing @t, cached per account because events of one
 * account mostly fall in the same month (into *@scratch, uncached, when out
 * of memory). */
static const bl_month_cache *month_of(billing_rater *r, size_t ai, const bl_account *a,
                                      billing_time_t t, bl_month_cache *scratch)
{
    bl_acct *x = bl_rater_acct(r, ai);
    bl_month_cache *mc = x != NULL ? &x->month : scratch;
    int year;
    int month;

    if (x != NULL && t >= mc->start && t < mc->end)
        return mc;
    billing_zone_year_month(a->zone, t, &year, &month);
    billing_zone_month_start(a->zone, year, month, &mc->start);
    mc->end = bl_zone_next_month_start(a->zone, t);
    mc->month = bl_month_index(year, month);
    return mc;
}

size_t bl_upper_bound(const billing_time_t *v, size_t n, billing_time_t t)
{
    size_t lo = 0;
    size_t hi = n;
    size_t mid;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (v[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * The subscription of @resource covering @t, or the start of the next one
 * (into *next_start) when none covers it.
 */
static size_t covering_sub(const billing_catalog *cat, const bl_account *a, const char *resource,
                           billing_time_t t, billing_time_t *next_start)
{
    size_t lo = 0;
    size_t hi = a->n_subs;
    size_t mid;
    size_t i;
    const bl_sub *s;

    /* Subscriptions are sorted by (resource, start): find the first of resource. */
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (strcmp(BL_AT(cat->subs, bl_sub, a->subs[mid])->resource, resource) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (i = lo; i < a->n_subs; i++) {
        s = BL_AT(cat->subs, bl_sub, a->subs[i]);
        if (strcmp(s->resource, resource) != 0)
            break;
        if (t < s->start) {
            *next_start = s->start;
            return BL_NONE;
        }
        if (t < s->end)
            return a->subs[i];
    }
    return BL_NONE;
}

static const char *attrs_key(const void *ctx, size_t i)
{
    return BL_AT(((const billing_rater *)ctx)->attrs, bl_attrs, i)->key;
}

/*
 * The index of a (model, region) pair of included usage, kept on first
 * sight so that included lines show what was used, not what the plan
 * names. Messages name @what ("event", "aggregate of") and @id. Lengths
 * are at most BL_ATTR_MAX (checked by the callers).
 */
billing_status bl_rater_attrs_intern(billing_rater *r, const char *model, size_t model_len,
                                     const char *region, size_t region_len, const char *what,
                                     const char *id, uint32_t *out, char *errbuf, size_t errsize)
{
    char key[2 * BL_ATTR_MAX + 2];
    size_t i;
    bl_attrs *a;

    memcpy(key, model, model_len);
    key[model_len] = '\n';
    memcpy(key + model_len + 1, region, region_len);
    key[model_len + 1 + region_len] = '\0';
    i = bl_strmap_find(&r->attr_map, key, attrs_key, r);
    if (i == BL_NONE) {
        if (r->attrs.len >= BL_ATTRS_MAX)
            return bl_seterr(errbuf, errsize, BILLING_ERR_TOO_LARGE,
                             "%s '%s': field 'model': more than %d distinct models and regions "
                             "of usage inside subscriptions",
                             what, id, BL_ATTRS_MAX);
        a = bl_vec_push(&r->attrs, sizeof(*a));
        if (a == NULL)
            return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "%s '%s': out of memory", what,
                             id);
        memcpy(a->key, key, sizeof(key));
        memcpy(a->model, model, model_len);
        a->model[model_len] = '\0';
        memcpy(a->region, region, region_len);
        a->region[region_len] = '\0';
        if (bl_strmap_insert(&r->attr_map, key, r->attrs.len - 1, attrs_key, r) != 0) {
            r->attrs.len--;
            return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "%s '%s': out of memory", what,
                             id);
        }
        i = r->attrs.len - 1;
    }
    *out = (uint32_t)i;
    return BILLING_OK;
}

static billing_status event_attrs(billing_rater *r, const billing_event *ev, uint32_t *out,
                                  char *errbuf, size_t errsize)
{
    return bl_rater_attrs_intern(r, ev->model, ev->model_len, ev->region, ev->region_len, "event",
                                 ev->id, out, errbuf, errsize);
}

static billing_time_t min_time(billing_time_t a, billing_time_t b)
{
    return a < b ? a : b;
}

static billing_time_t max_time(billing_time_t a, billing_time_t b)
{
    return a > b ? a : b;
}

/* @t as "2025-12-02 10:00:00 +08:00 Asia/Shanghai", the account's wall clock. */
static void format_local(const billing_zone *zone, billing_time_t t, char *buf, size_t size)
{
    int32_t off = billing_zone_offset(zone, t);
    int32_t a = off < 0 ? -off : off;
    char utc[40];

    billing_time_format(t + (billing_time_t)off * 1000000000, utc, sizeof(utc));
    /* utc is "YYYY-MM-DDTHH:MM:SS[.fff]Z": the wall clock once shifted by the offset. */
    utc[10] = ' ';
    utc[strlen(utc) - 1] = '\0';
    snprintf(buf, size, "%s %c%02d:%02d %s", utc, off < 0 ? '-' : '+', (int)(a / 3600),
             (int)(a / 60 % 60), billing_zone_name(zone));
}

/*
 * The message for usage no rate covers. Before the first price version
 * the reason is not the model or region but the date, and it says when
 * prices start; the instant is given in the account's time zone too,
 * since that is the calendar its owner reads.
 */
static billing_status no_price(const billing_rater *r, const billing_event *ev, const bl_account *a,
                               billing_time_t t, size_t vpos, char *errbuf, size_t errsize)
{
    const bl_version *first;
    char when[40];
    char local[96];
    char start[40];
    char start_local[96];

    billing_time_format(t, when, sizeof(when));
    format_local(a->zone, t, local, sizeof(local));
    if (vpos == 0 && r->cat->versions.len > 0) {
        first = BL_AT(r->cat->versions, bl_version, r->cat->vorder[0]);
        billing_time_format(first->from, start, sizeof(start));
        format_local(a->zone, first->from, start_local, sizeof(start_local));
        return bl_seterr(errbuf, errsize, BILLING_ERR_NO_PRICE,
                         "event '%s': field 'start': usage at %s (%s) is before the first "
                         "price version '%s', which starts at %s (%s)",
                         ev->id, when, local, first->id, start, start_local);
    }
    return bl_seterr(errbuf, errsize, BILLING_ERR_NO_PRICE,
                     "event '%s': field 'model': no %s price for model '%s' in region '%s' "
                     "at %s (%s)",
                     ev->id, billing_meter_name(ev->meter), ev->model[0] ? ev->model : "*",
                     ev->region[0] ? ev->region : "*", when, local);
}

/*
 * Describe the piece of @ev that starts at @t: its end and its aggregate
 * key. Returns BILLING_OK or BILLING_ERR_NO_PRICE (message written).
 */
static billing_status next_piece(billing_rater *r, const billing_event *ev, size_t ai,
                                 billing_time_t t, bl_piece *p, char *errbuf, size_t errsize)
{
    const billing_catalog *cat = r->cat;
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    bl_month_cache scratch;
    const bl_month_cache *mc = month_of(r, ai, a, t, &scratch);
    billing_time_t end = min_time(ev->end, mc->end);
    billing_time_t sub_next = BL_TIME_MAX;
    size_t vpos = bl_upper_bound(cat->vfrom, cat->versions.len, t);
    size_t epoch = bl_upper_bound(a->epochs, a->n_epochs, t);
    size_t sub = BL_NONE;
    size_t rate;

    if (vpos < cat->versions.len)
        end = min_time(end, cat->vfrom[vpos]);
    if (epoch < a->n_epochs)
        end = min_time(end, a->epochs[epoch]);
    if (a->n_subs > 0 && (ev->meter == BILLING_METER_GPU || ev->meter == BILLING_METER_GPULESS)) {
        sub = covering_sub(cat, a, ev->resource, t, &sub_next);
        if (sub != BL_NONE)
            end = min_time(end, BL_AT(cat->subs, bl_sub, sub)->end);
        else
            end = min_time(end, sub_next);
    }
    p->start = t;
    p->end = end;
    p->lo = mc->start;
    p->hi = mc->end;
    if (vpos > 0)
        p->lo = max_time(p->lo, cat->vfrom[vpos - 1]);
    if (vpos < cat->versions.len)
        p->hi = min_time(p->hi, cat->vfrom[vpos]);
    if (epoch > 0)
        p->lo = max_time(p->lo, a->epochs[epoch - 1]);
    if (epoch < a->n_epochs)
        p->hi = min_time(p->hi, a->epochs[epoch]);
    p->memo =
        !(a->n_subs > 0 && (ev->meter == BILLING_METER_GPU || ev->meter == BILLING_METER_GPULESS));
    memset(&p->key, 0, sizeof(p->key));
    p->key.account = (uint32_t)ai;
    p->key.month = mc->month;
    p->key.meter = (uint32_t)ev->meter;
    p->key.epoch = (uint32_t)epoch;
    p->key.sub = sub == BL_NONE ? BL_SUB_NONE : (uint32_t)sub;
    p->key.attrs = BL_ATTRS_NONE;
    if (sub != BL_NONE) {
        p->key.rate = BL_RATE_NONE;
        return event_attrs(r, ev, &p->key.attrs, errbuf, errsize);
    }
    rate = vpos == 0 ? BL_NONE
                     : bl_catalog_rate_cached(cat, &r->rates, cat->vorder[vpos - 1], ev->meter,
                                              ev->model, ev->model_len, ev->region, ev->region_len);
    if (rate == BL_NONE && ev->meter == BILLING_METER_TRAFFIC) {
        p->key.rate = BL_RATE_ZERO;
        return BILLING_OK;
    }
    if (rate == BL_NONE)
        return no_price(r, ev, a, t, vpos, errbuf, errsize);
    p->key.rate = (uint32_t)rate;
    return BILLING_OK;
}

/* ---------------------------------------------------------------------- */
/* Aggregates                                                              */
/* ---------------------------------------------------------------------- */

/*
 * Each pair of fields times its own odd constant (a bijection, so keys
 * that differ in one pair never collide before the mix), then one
 * finalising mix. Four chained mixes made a long chain of dependent
 * multiplies on every piece; these four products run side by side.
 */
static uint64_t key_hash(const bl_aggkey *k, uint64_t seed)
{
    uint64_t a = ((uint64_t)k->account << 32 | (uint32_t)k->month) * UINT64_C(0x9e3779b97f4a7c15);
    uint64_t b = ((uint64_t)k->rate << 32 | k->sub) * UINT64_C(0xc2b2ae3d27d4eb4f);
    uint64_t c = ((uint64_t)k->epoch << 32 | k->meter) * UINT64_C(0x165667b19e3779f9);
    uint64_t d = ((uint64_t)k->attrs + 1) * UINT64_C(0xd6e8feb86659fd93);

    return bl_hash_mix(a ^ b ^ c ^ d ^ seed);
}

static int key_eq(const bl_aggkey *a, const bl_aggkey *b)
{
    return a->account == b->account && a->month == b->month && a->rate == b->rate &&
           a->sub == b->sub && a->epoch == b->epoch && a->meter == b->meter && a->attrs == b->attrs;
}

static void slot_place(uint32_t *slots, size_t cap, uint64_t h, uint32_t value)
{
    size_t i = (size_t)h & (cap - 1);

    while (slots[i] != 0)
        i = (i + 1) & (cap - 1);
    slots[i] = value;
}

/*
 * @p (@cap elements of @size) grown by doubling to hold @need (> 0): the new
 * block (or @p when it is big enough), or NULL with @p untouched.
 */
static void *grow(void *p, size_t *cap, size_t need, size_t size, size_t first)
{
    size_t ncap = *cap ? *cap : first;
    void *q;

    if (need <= *cap)
        return p;
    while (ncap < need)
        ncap *= 2;
    q = realloc(p, ncap * size);
    if (q != NULL)
        *cap = ncap;
    return q;
}

/*
 * The position in r->acct_slots of account index @ai: its slot, or the
 * empty slot where it would go (r->acct_slot_cap > 0).
 */
static inline size_t acct_pos(const billing_rater *r, size_t ai)
{
    size_t mask = r->acct_slot_cap - 1;
    size_t i = (size_t)(((uint64_t)ai * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & mask;
    uint32_t s;

    while ((s = r->acct_slots[i]) != 0 && r->accts[s - 1].ai != ai)
        i = (i + 1) & mask;
    return i;
}

const bl_acct *bl_rater_acct_find(const billing_rater *r, size_t ai)
{
    uint32_t s;

    if (r->acct_slot_cap == 0)
        return NULL;
    s = r->acct_slots[acct_pos(r, ai)];
    return s != 0 ? &r->accts[s - 1] : NULL;
}

bl_acct *bl_rater_acct(billing_rater *r, size_t ai)
{
    size_t ncap;
    size_t i;
    uint32_t s;
    uint32_t *slots;
    bl_acct *accts;
    bl_acct *x;

    if (r->acct_slot_cap > 0 && (s = r->acct_slots[acct_pos(r, ai)]) != 0)
        return &r->accts[s - 1];
    if (ai >= r->cat->accounts.len)
        return NULL;
    accts = grow(r->accts, &r->cap_accts, r->n_accts + 1, sizeof(bl_acct), 16);
    if (accts == NULL)
        return NULL;
    r->accts = accts;
    if ((r->n_accts + 1) * 2 > r->acct_slot_cap) {
        ncap = r->acct_slot_cap ? 2 * r->acct_slot_cap : 32;
        slots = calloc(ncap, sizeof(uint32_t));
        if (slots == NULL)
            return NULL;
        free(r->acct_slots);
        r->acct_slots = slots;
        r->acct_slot_cap = ncap;
        for (i = 0; i < r->n_accts; i++)
            r->acct_slots[acct_pos(r, r->accts[i].ai)] = (uint32_t)i + 1;
    }
    x = &r->accts[r->n_accts];
    memset(x, 0, sizeof(*x)); /* month: start == end is empty and forces a lookup */
    x->ai = (uint32_t)ai;
    r->acct_slots[acct_pos(r, ai)] = (uint32_t)++r->n_accts;
    return x;
}

/* Make room for @extra new aggregates so that adding them cannot fail. */
static int reserve_aggs(billing_rater *r, size_t ai, size_t extra)
{
    size_t need = r->n_aggs + extra;
    size_t ncap;
    size_t i;
    bl_agg *aggs;
    uint32_t *slots;
    uint32_t *data;
    bl_acct *x = bl_rater_acct(r, ai);
    bl_u32vec *v;

    if (need > UINT32_MAX - 2 || x == NULL)
        return -1;
    v = &x->aggs;
    aggs = grow(r->aggs, &r->cap_aggs, need, sizeof(bl_agg), 64);
    if (aggs == NULL)
        return -1;
    r->aggs = aggs;
    if (need * 2 > r->agg_slot_cap) {
        ncap = r->agg_slot_cap ? r->agg_slot_cap : 128;
        while (ncap < need * 2)
            ncap *= 2;
        slots = calloc(ncap, sizeof(uint32_t));
        if (slots == NULL)
            return -1;
        for (i = 0; i < r->n_aggs; i++)
            slot_place(slots, ncap, key_hash(&r->aggs[i].key, r->seed), (uint32_t)i + 1);
        free(r->agg_slots);
        r->agg_slots = slots;
        r->agg_slot_cap = ncap;
    }
    data = grow(v->data, &v->cap, v->len + extra, sizeof(uint32_t), 16);
    if (data == NULL)
        return -1;
    v->data = data;
    return 0;
}

/* The aggregate for @key, created empty if new (room reserved beforehand). */
static bl_agg *agg_get(billing_rater *r, const bl_aggkey *key)
{
    uint64_t h = key_hash(key, r->seed);
    size_t i = (size_t)h & (r->agg_slot_cap - 1);
    bl_agg *a;
    bl_u32vec *v;

    while (r->agg_slots[i] != 0) {
        a = &r->aggs[r->agg_slots[i] - 1];
        if (key_eq(&a->key, key))
            return a;
        i = (i + 1) & (r->agg_slot_cap - 1);
    }
    a = &r->aggs[r->n_aggs];
    a->key = *key;
    a->sum = 0;
    a->pieces = 0;
    a->has_extra = 0;
    r->agg_slots[i] = (uint32_t)++r->n_aggs;
    /* Found: reserve_aggs added the account. */
    v = &r->accts[r->acct_slots[acct_pos(r, key->account)] - 1].aggs;
    v->data[v->len++] = (uint32_t)(r->n_aggs - 1);
    return a;
}

/* The aggregate for @key, or NULL if there is none. */
static bl_agg *agg_find(const billing_rater *r, const bl_aggkey *key)
{
    uint64_t h = key_hash(key, r->seed);
    size_t i;
    bl_agg *a;

    if (r->agg_slot_cap == 0)
        return NULL;
    for (i = (size_t)h & (r->agg_slot_cap - 1); r->agg_slots[i] != 0;
         i = (i + 1) & (r->agg_slot_cap - 1)) {
        a = &r->aggs[r->agg_slots[i] - 1];
        if (key_eq(&a->key, key))
            return a;
    }
    return NULL;
}

static void agg_extra_add(bl_agg *a, const mpq_t q)
{
    if (!a->has_extra) {
        mpq_init(a->extra);
        a->has_extra = 1;
    }
    mpq_add(a->extra, a->extra, q);
}

/* Add the integer @v to the aggregate, spilling into GMP on overflow. */
void bl_agg_add_i128(bl_agg *a, bl_i128 v)
{
    bl_i128 s;
    mpq_t q;
    mpz_t z;

    if (!__builtin_add_overflow(a->sum, v, &s)) {
        a->sum = s;
        return;
    }
    mpz_init(z);
    mpq_init(q);
    bl_mpz_set_i128(z, v);
    mpq_set_z(q, z);
    agg_extra_add(a, q);
    mpq_clear(q);
    mpz_clear(z);
}

/*
 * Add (@sign 1) or take away (@sign -1) the usage of @ev in [@start, @end)
 * to the sum of @a. Quantities and durations are never negative, so
 * negating a product cannot overflow. A quantity below 2^63 times a
 * duration (below 2^64 ns) is a 64 x 64 -> 128-bit product below 2^127,
 * which cannot overflow; larger ones are checked.
 */
static void agg_add_usage_general(bl_agg *a, const billing_event *ev, billing_time_t start,
                                  billing_time_t end, int sign)
{
    uint64_t dur64 = (uint64_t)(end - start);
    bl_i128 dur = (bl_i128)dur64;
    bl_i128 prod;
    mpz_t z;
    mpq_t q;

    if (is_time_meter(ev->meter) && (ev->qty >> 63) == 0) {
        prod = (bl_i128)((unsigned __int128)(uint64_t)ev->qty * dur64);
        bl_agg_add_i128(a, sign > 0 ? prod : -prod);
        return;
    }
    if (is_time_meter(ev->meter) && !__builtin_mul_overflow(ev->qty, dur, &prod)) {
        bl_agg_add_i128(a, sign > 0 ? prod : -prod);
        return;
    }
    if (!is_time_meter(ev->meter) && start == ev->start && end == ev->end) {
        bl_agg_add_i128(a, sign > 0 ? ev->qty : -ev->qty);
        return;
    }
    /* Rare: a product beyond 128 bits, or the share of a split traffic event. */
    mpz_init(z);
    mpq_init(q);
    bl_mpz_set_i128(z, ev->qty);
    mpq_set_z(q, z);
    bl_mpz_set_i128(z, dur);
    mpz_mul(mpq_numref(q), mpq_numref(q), z);
    if (!is_time_meter(ev->meter)) {
        /* The piece's share of the event's quantity: qty * dur / (end - start). */
        bl_mpz_set_i128(z, (bl_i128)(ev->end - ev->start));
        mpz_set(mpq_denref(q), z);
        mpq_canonicalize(q);
    }
    if (sign < 0)
        mpq_neg(q, q);
    agg_extra_add(a, q);
    mpq_clear(q);
    mpz_clear(z);
}

/*
 * agg_add_usage_general without a call for the usual piece: a quantity
 * below 2^63 of a time meter, or a whole traffic event, whose product
 * does not overflow the sum (the same value as the general path gives).
 */
static BL_ALWAYS_INLINE void agg_add_usage(bl_agg *a, const billing_event *ev, billing_time_t start,
                                           billing_time_t end, int sign)
{
    bl_i128 v;
    bl_i128 s;

    if (is_time_meter(ev->meter) && (ev->qty >> 63) == 0)
        v = (bl_i128)((unsigned __int128)(uint64_t)ev->qty * (uint64_t)(end - start));
    else if (!is_time_meter(ev->meter) && start == ev->start && end == ev->end)
        v = ev->qty;
    else
        v = -1;
    if (v >= 0 && !__builtin_add_overflow(a->sum, sign > 0 ? v : -v, &s)) {
        a->sum = s;
        return;
    }
    agg_add_usage_general(a, ev, start, end, sign);
}

/*
 * Add (@sign 1) or take away (@sign -1) the piece @p of @ev; returns its
 * aggregate. Taking away needs the aggregate to exist (billing_rater_remove
 * checks).
 */
static bl_agg *add_piece(billing_rater *r, const billing_event *ev, const bl_piece *p, int sign)
{
    bl_agg *a = sign > 0 ? agg_get(r, &p->key) : agg_find(r, &p->key);

    if (sign > 0) {
        a->pieces++;
    } else if (--a->pieces == 0) {
        /* Everything in it was taken away: it is exactly zero. */
        a->sum = 0;
        if (a->has_extra)
            mpq_set_ui(a->extra, 0, 1);
        return a;
    }
    agg_add_usage(a, ev, p->start, p->end, sign);
    return a;
}

int bl_rater_reserve_aggs(billing_rater *r, uint32_t account, size_t extra)
{
    return reserve_aggs(r, account, extra);
}

bl_agg *bl_rater_agg_get(billing_rater *r, const bl_aggkey *key)
{
    return agg_get(r, key);
}

void bl_rater_agg_add_q(bl_agg *a, const mpq_t q)
{
    agg_extra_add(a, q);
}

/* ---------------------------------------------------------------------- */
/* Dedupe                                                                  */
/* ---------------------------------------------------------------------- */

static bl_seen *seen_find(const billing_rater *r, const billing_event *ev, uint64_t h)
{
    size_t i;
    const bl_seen_slot *slot;
    bl_seen *e;

    if (r->seen_slot_cap == 0)
        return NULL;
    for (i = (size_t)h & (r->seen_slot_cap - 1); (slot = &r->seen_slots[i])->index != 0;
         i = (i + 1) & (r->seen_slot_cap - 1)) {
        if (slot->tag != (uint32_t)(h >> 32))
            continue;
        e = &r->seen[slot->index - 1];
        if ((e->off & 0xff) == ev->id_len &&
            memcmp(r->arena + (e->off >> 8), ev->id, ev->id_len) == 0)
            return e;
    }
    return NULL;
}

static void seen_place(bl_seen_slot *slots, size_t cap, uint64_t h, size_t index)
{
    size_t i = (size_t)h & (cap - 1);

    while (slots[i].index != 0)
        i = (i + 1) & (cap - 1);
    slots[i].index = (uint32_t)(index + 1);
    slots[i].tag = (uint32_t)(h >> 32);
}

static uint64_t seen_hash(const billing_rater *r, const char *id, size_t len)
{
    return bl_hash_bytes(id, len, r->seed);
}

/* Make room for one more id of @id_len bytes, so that seen_add cannot fail. */
static int seen_reserve(billing_rater *r, size_t id_len)
{
    size_t ncap;
    size_t i;
    bl_seen_slot *t;
    bl_seen *seen;
    char *arena;
    const bl_seen *e;

    if (r->seen_count + 1 >= UINT32_MAX)
        return -1;
    seen = grow(r->seen, &r->seen_cap, r->seen_count + 1, sizeof(bl_seen), 1024);
    if (seen == NULL)
        return -1;
    r->seen = seen;
    arena = grow(r->arena, &r->arena_cap, r->arena_len + id_len, 1, 65536);
    if (arena == NULL)
        return -1;
    r->arena = arena;
    if ((r->seen_count + 1) * 4 > r->seen_slot_cap * 3) {
        ncap = r->seen_slot_cap ? r->seen_slot_cap * 2 : 2048;
        t = calloc(ncap, sizeof(*t));
        if (t == NULL)
            return -1;
        for (i = 0; i < r->seen_count; i++) {
            e = &r->seen[i];
            seen_place(t, ncap, seen_hash(r, r->arena + (e->off >> 8), e->off & 0xff), i);
        }
        free(r->seen_slots);
        r->seen_slots = t;
        r->seen_slot_cap = ncap;
    }
    return 0;
}

static void seen_add(billing_rater *r, const billing_event *ev, uint64_t h, uint64_t fp)
{
    bl_seen *e = &r->seen[r->seen_count];

    e->fp = fp;
    e->off = (uint64_t)r->arena_len << 8 | ev->id_len;
    memcpy(r->arena + r->arena_len, ev->id, ev->id_len);
    r->arena_len += ev->id_len;
    seen_place(r->seen_slots, r->seen_slot_cap, h, r->seen_count);
    r->seen_count++;
}

/* ---------------------------------------------------------------------- */
/* Rating one event                                                        */
/* ---------------------------------------------------------------------- */

/*
 * Walk the event's pieces: count them (@mode 0), add them (1), take them
 * away (-1), or check that each has a non-empty aggregate to be taken
 * away from (2: BILLING_ERR_INVALID if one has not).
 */
static billing_status walk(billing_rater *r, const billing_event *ev, size_t ai, int mode,
                           size_t *count, char *errbuf, size_t errsize)
{
    billing_time_t t = ev->start;
    bl_piece p;
    billing_status st;
    const bl_agg *a;

    *count = 0;
    while (t < ev->end) {
        st = next_piece(r, ev, ai, t, &p, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
        if (mode == 1 || mode == -1)
            add_piece(r, ev, &p, mode);
        if (mode == 2 && ((a = agg_find(r, &p.key)) == NULL || a->pieces == 0))
            return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                             "event '%s': not rated by this rater, nothing to remove", ev->id);
        (*count)++;
        t = p.end;
    }
    return BILLING_OK;
}

/*
 * Walk the event's pieces once, keeping them in @few when there are at
 * most FEW_PIECES (nearly always one): adding them then needs no second
 * walk, which would look the month, price version, epoch and rate up
 * again. Their count into *@count. Returns BILLING_OK or the error of the
 * first piece that cannot be priced.
 */
static billing_status split(billing_rater *r, const billing_event *ev, size_t ai, bl_piece *few,
                            size_t *count, char *errbuf, size_t errsize)
{
    billing_time_t t = ev->start;
    bl_piece p;
    billing_status st;

    *count = 0;
    while (t < ev->end) {
        st = next_piece(r, ev, ai, t, &p, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
        if (*count < FEW_PIECES)
            few[*count] = p;
        (*count)++;
        t = p.end;
    }
    return BILLING_OK;
}

/* Validate @ev and find its account; BILLING_OK or an error naming the field. */
static billing_status event_account(const billing_rater *r, const billing_event *ev, size_t *ai,
                                    char *errbuf, size_t errsize)
{
    billing_status st = validate(ev, errbuf, errsize);

    if (st != BILLING_OK)
        return st;
    *ai = bl_catalog_account_n(r->cat, ev->account, ev->account_len);
    if (*ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_UNKNOWN_ACCOUNT,
                         "event '%s': field 'account': '%s' is not a known account", ev->id,
                         ev->account);
    return BILLING_OK;
}

/* Every field an event must have. */
#define EV_REQUIRED \
    (BL_EV_ID | BL_EV_ACCOUNT | BL_EV_RESOURCE | BL_EV_METER | BL_EV_INTERVAL | BL_EV_QUANTITY)

/*
 * The checks of validate() that interning does not answer: an interned
 * account is a known valid id, an interned pair is printable.
 */
static BL_ALWAYS_INLINE int valid_but_interned(const billing_event *ev)
{
    return ev->refused == 0 && (ev->set & EV_REQUIRED) == EV_REQUIRED && ev->end > ev->start &&
           ev->start >= BL_TIME_MIN && ev->end <= BL_TIME_MAX &&
           field_valid_id(ev->id, ev->id_len) && field_valid_id(ev->resource, ev->resource_len);
}

/*
 * event_ids for an event not interned yet (or invalid): validate() and
 * the catalog decide, with the same messages, and the rater interns the
 * account and pair for next time.
 */
static billing_status event_ids_new(billing_rater *r, const billing_event *ev, size_t *ai,
                                    uint32_t *pair, char *errbuf, size_t errsize)
{
    uint32_t acc = UINT32_MAX;
    uint64_t ha = 0;
    uint64_t hp = 0;
    billing_status st;

    if (valid_but_interned(ev))
        acc =
            intern_find(&r->account_ids, account_hash(r, ev), ev->account, ev->account_len, "", 0);
    st = event_account(r, ev, ai, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    ha = account_hash(r, ev);
    hp = pair_hash(r, ev);
    if (acc == UINT32_MAX)
        intern_copy(&r->account_ids, ha, ev->account, ev->account_len, "", 0, (uint32_t)*ai);
    *pair = pair_intern(r, ev, hp);
    return BILLING_OK;
}

/*
 * Validate @ev, its account into *@ai and its pair number into *@pair
 * (BL_PAIR_NONE past BL_PAIRS_MAX). Seen before, the account and pair are
 * found by their bytes: first against the last found (consecutive events
 * of one account or pair), then by hash; otherwise event_ids_new.
 */
static BL_ALWAYS_INLINE billing_status event_ids(billing_rater *r, const billing_event *ev,
                                                 size_t *ai, uint32_t *pair, char *errbuf,
                                                 size_t errsize)
{
    uint32_t acc;
    uint32_t p;

    if (!valid_but_interned(ev))
        return event_ids_new(r, ev, ai, pair, errbuf, errsize);
    acc = intern_last(&r->account_ids, ev->account, ev->account_len, "", 0);
    if (acc == UINT32_MAX)
        acc =
            intern_find(&r->account_ids, account_hash(r, ev), ev->account, ev->account_len, "", 0);
    p = intern_last(&r->pair_ids, ev->model, ev->model_len, ev->region, ev->region_len);
    if (p == UINT32_MAX)
        p = intern_find(&r->pair_ids, pair_hash(r, ev), ev->model, ev->model_len, ev->region,
                        ev->region_len);
    if (acc == UINT32_MAX || p == UINT32_MAX)
        return event_ids_new(r, ev, ai, pair, errbuf, errsize);
    *ai = acc;
    *pair = p;
    return BILLING_OK;
}

/* Rate @ev through the memo entry @m: one piece, its aggregate known. */
static void add_memo(billing_rater *r, const billing_event *ev, const bl_memo *m)
{
    bl_agg *a = &r->aggs[m->agg];

    a->pieces++;
    agg_add_usage(a, ev, ev->start, ev->end, 1);
}

billing_status billing_rater_add(billing_rater *r, const billing_event *ev, char *errbuf,
                                 size_t errsize)
{
    bl_piece few[FEW_PIECES];
    billing_status st;
    size_t ai;
    size_t i;
    size_t pieces = 0;
    uint64_t h = 0;
    uint64_t fp = 0;
    bl_seen *s = NULL;
    uint32_t pair;
    const bl_memo *m;
    bl_agg *a;

    if (r == NULL || ev == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "rater or event is NULL");
    st = event_ids(r, ev, &ai, &pair, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    if (r->dedupe) {
        h = seen_hash(r, ev->id, ev->id_len);
        /* Live entries keep the low bit set; 0 marks an id taken back (billing_rater_remove). */
        fp = bl_event_fingerprint(ev) | 1u;
        s = seen_find(r, ev, h);
        if (s != NULL && s->fp == fp)
            return BILLING_DUPLICATE;
        if (s != NULL && s->fp != 0)
            return bl_seterr(errbuf, errsize, BILLING_ERR_CONFLICT,
                             "event '%s': id already counted with different content", ev->id);
    }
    m = memo_find(r, ev, ai, pair);
    if (m == NULL) {
        /* Validate every piece before changing anything: an event is all or nothing. */
        st = split(r, ev, ai, few, &pieces, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
    }
    if ((m == NULL && reserve_aggs(r, ai, pieces) != 0) ||
        (r->dedupe && s == NULL && seen_reserve(r, ev->id_len) != 0))
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "event '%s': out of memory", ev->id);
    if (m != NULL) {
        add_memo(r, ev, m);
    } else if (pieces <= FEW_PIECES) {
        for (i = 0; i < pieces; i++) {
            a = add_piece(r, ev, &few[i], 1);
            memo_put(r, ev, ai, pair, &few[i], a);
        }
    } else {
        walk(r, ev, ai, 1, &pieces, NULL, 0);
    }
    if (r->dedupe && s != NULL)
        s->fp = fp;
    else if (r->dedupe)
        seen_add(r, ev, h, fp);
    r->events++;
    r->gen++;
    return BILLING_OK;
}

/* Subtract @ev's pieces from the aggregates of account @ai: all or nothing. */
static billing_status take_back(billing_rater *r, const billing_event *ev, size_t ai, char *errbuf,
                                size_t errsize)
{
    billing_status st;
    size_t pieces;

    st = walk(r, ev, ai, 2, &pieces, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    walk(r, ev, ai, -1, &pieces, NULL, 0);
    r->events--;
    r->gen++;
    return BILLING_OK;
}

billing_status billing_rater_remove(billing_rater *r, const billing_event *ev, char *errbuf,
                                    size_t errsize)
{
    billing_status st;
    size_t ai;
    bl_seen *s;

    if (r == NULL || ev == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "rater or event is NULL");
    /* Only the dedupe set can tell that this very event was added. */
    if (!r->dedupe)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE,
                         "event '%s': removing an event needs the rater's dedupe on",
                         (ev->set & BL_EV_ID) ? ev->id : "(no id)");
    st = event_account(r, ev, &ai, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    s = seen_find(r, ev, seen_hash(r, ev->id, ev->id_len));
    if (s == NULL || s->fp == 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOT_FOUND,
                         "event '%s': not rated by this rater (never added, or removed already)",
                         ev->id);
    if (s->fp != (bl_event_fingerprint(ev) | 1u))
        return bl_seterr(errbuf, errsize, BILLING_ERR_CONFLICT,
                         "event '%s': differs from the event rated with that id", ev->id);
    st = take_back(r, ev, ai, errbuf, errsize);
    if (st == BILLING_OK)
        s->fp = 0;
    return st;
}

/*
 * Take back @ev, all of which the memo entry @m's aggregate holds: the one
 * piece take_back's walk would find there, without walking (as
 * billing_rater_add's add_memo adds it).
 */
static billing_status take_back_memo(billing_rater *r, const billing_event *ev, const bl_memo *m,
                                     char *errbuf, size_t errsize)
{
    bl_agg *a = &r->aggs[m->agg];

    if (a->pieces == 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "event '%s': not rated by this rater, nothing to remove", ev->id);
    if (--a->pieces == 0) {
        /* Everything in it was taken away: it is exactly zero (add_piece). */
        a->sum = 0;
        if (a->has_extra)
            mpq_set_ui(a->extra, 0, 1);
    } else {
        agg_add_usage(a, ev, ev->start, ev->end, -1);
    }
    r->events--;
    r->gen++;
    return BILLING_OK;
}

billing_status billing_rater_take_back(billing_rater *r, const billing_event *ev, char *errbuf,
                                       size_t errsize)
{
    billing_status st;
    size_t ai;
    uint32_t pair;
    const bl_memo *m;

    if (r == NULL || ev == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "rater or event is NULL");
    if (r->dedupe)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE,
                         "event '%s': taking events back unchecked needs the rater's dedupe off",
                         (ev->set & BL_EV_ID) ? ev->id : "(no id)");
    /* As billing_rater_add: interned ids, then the memo when it holds the whole event. */
    st = event_ids(r, ev, &ai, &pair, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    m = memo_find(r, ev, ai, pair);
    if (m != NULL)
        return take_back_memo(r, ev, m, errbuf, errsize);
    return take_back(r, ev, ai, errbuf, errsize);
}
