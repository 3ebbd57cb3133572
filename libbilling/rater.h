/*
 * rater.h - the rater's state: aggregates and the dedupe set. Internal.
 *
 * An aggregate is the exact sum of quantity x time (or quantity, for
 * traffic) of every event piece with the same key: account, local month,
 * meter, rate (price version + price key) or covering subscription, and
 * credit epoch. Prices are applied once per aggregate at invoice time, so
 * rating an event is integer arithmetic only.
 */
#ifndef BILLING_RATER_H
#define BILLING_RATER_H

#include <gmp.h>

#include "catalog.h"
#include "decimal.h"

#define BL_RATE_NONE UINT32_MAX        /* covered by a subscription: no price */
#define BL_RATE_ZERO (UINT32_MAX - 1u) /* traffic without a rate: zero-rated */
#define BL_SUB_NONE UINT32_MAX
#define BL_ATTRS_NONE UINT32_MAX /* not included usage: no pair of its own */

/*
 * Most distinct (model, region) pairs of included usage that one rater
 * keeps: events name them freely, so the table is capped; a real cloud has
 * a few dozen.
 */
#define BL_ATTRS_MAX 4096

/* An event's own (model, region) pair, kept for included usage lines. */
typedef struct bl_attrs {
    char key[2 * BL_ATTR_MAX + 2]; /* model '\n' region: the map's key */
    char model[BL_ATTR_MAX + 1];
    char region[BL_ATTR_MAX + 1];
} bl_attrs;

typedef struct bl_aggkey {
    uint32_t account;
    int32_t month;  /* year * 12 + month - 1, in the account's zone */
    uint32_t rate;  /* index into cat->rates, BL_RATE_NONE or BL_RATE_ZERO */
    uint32_t sub;   /* covering subscription or BL_SUB_NONE */
    uint32_t epoch; /* credit epoch: number of grant bounds <= piece start */
    uint32_t meter;
    uint32_t attrs; /* included usage: the event's pair in r->attrs; else BL_ATTRS_NONE */
} bl_aggkey;

typedef struct bl_agg {
    bl_aggkey key;
    /*
     * Time meters: sum of quantity (nano-units) x duration (ns).
     * Traffic: sum of quantity (nano-units).
     */
    bl_i128 sum;
    uint64_t pieces; /* event pieces in the sum; 0 = empty (all removed) */
    int has_extra;
    mpq_t extra; /* overflow of `sum` and fractional traffic pieces */
} bl_agg;

typedef struct bl_month_cache {
    billing_time_t start;
    billing_time_t end;
    int32_t month;
} bl_month_cache;

/*
 * The dedupe set: ids are appended to an arena and described by a dense
 * array of entries; an open-addressing table of 8-byte slots (load at
 * most 3/4) points into it. About 16 + 11..21 bytes per id plus the id.
 */
typedef struct bl_seen {
    uint64_t fp;  /* fingerprint of the content */
    uint64_t off; /* offset of the id in the arena << 8 | its length */
} bl_seen;

typedef struct bl_seen_slot {
    uint32_t index; /* entry + 1; 0 = empty slot */
    uint32_t tag;   /* high half of the id's hash: most misses skip the arena */
} bl_seen_slot;

/*
 * Interning: an event's account and its (model, region) pair become small
 * numbers once per rater, found again by their bytes (hash, then an
 * exact comparison), with no allocation per event. Open addressing on a
 * power-of-two table kept at most half full.
 */
typedef struct bl_intern_slot {
    uint64_t hash;
    const char *key; /* the bytes, owned, each part zero-padded to whole words: an
                        * account id, or model then region; NULL = empty slot */
    uint32_t len;    /* first length << 8 | second length */
    uint32_t value;  /* account index or pair number */
} bl_intern_slot;

typedef struct bl_intern {
    bl_intern_slot *slots;
    size_t cap; /* power of two or 0 */
    size_t count;
    /*
     * The key found last (a slot's key: owned by the table, never moved),
     * its lengths and value; NULL before the first. Events of one account
     * or pair often come in a row (the alert check adds and takes back one
     * account's events per probe): they are compared with it first, with
     * no hash.
     */
    const char *last_key;
    uint32_t last_len;
    uint32_t last_value;
} bl_intern;

/*
 * Most distinct (model, region) pairs one rater interns: events name them
 * freely; past it, events of new pairs take the general path (slower,
 * same result).
 */
#define BL_PAIRS_MAX 4096
#define BL_PAIR_NONE UINT32_MAX

/*
 * The memo: for (account, meter, pair), the aggregate its last piece went
 * to and the interval [lo, hi) around it in which the local month, price
 * version, credit epoch and so the rate do not change. An event of the
 * same account, meter and pair inside that interval goes straight to the
 * aggregate. Only kept where no subscription can cover the piece. A
 * cache: two-way, sized from the number of aggregates (at most
 * BL_MEMO_MAX entries of 32 bytes), emptied when it grows.
 */
#define BL_MEMO_MIN 1024
#define BL_MEMO_MAX (1u << 18)

typedef struct bl_memo {
    billing_time_t lo;
    billing_time_t hi;
    uint32_t account; /* account index + 1; 0 = empty */
    uint32_t agg;     /* index into r->aggs */
    uint32_t pair;
    uint32_t meter;
} bl_memo;

struct bl_credit_memo; /* invoice.h, history.c */

/*
 * GMP values a month's pricing (month.c) works in, kept by the rater so
 * that each bl_month_compute does not allocate and free its temporaries:
 * the limbs stay allocated between calls (a rater is used by one thread
 * at a time). pow10 is 10^digits of the catalog, div_hour and div_gb the
 * constant divisors of the unit-hour and GB meters; q and z are scratch,
 * their values meaningless between calls.
 */
typedef struct bl_scratch {
    mpz_t pow10;
    mpz_t div_hour;
    mpz_t div_gb;
    mpq_t q[3];
    mpz_t z[4];
} bl_scratch;

typedef struct bl_u32vec {
    uint32_t *data;
    size_t len;
    size_t cap;
} bl_u32vec;

/*
 * What the rater keeps for one account it holds (events, aggregates or
 * credit memos of its own): one entry of r->accts, found by the account's
 * catalog index through r->acct_slots (bl_rater_acct). Entries move when
 * r->accts grows: keep no pointer to one across a call that may add an
 * account.
 */
typedef struct bl_acct {
    uint32_t ai;                        /* the account's catalog index */
    bl_u32vec aggs;                     /* its aggregate indices */
    bl_month_cache month;               /* the last month seen */
    struct bl_credit_memo *credit_memo; /* for invoices (history.c), NULL until used */
} bl_acct;

struct billing_rater {
    billing_catalog *cat;
    uint64_t seed;
    uint64_t events;
    int dedupe;
    /* Aggregates. */
    bl_agg *aggs;
    size_t n_aggs;
    size_t cap_aggs;
    uint32_t *agg_slots; /* index + 1, 0 = empty */
    size_t agg_slot_cap;
    bl_rate_cache rates;   /* recent rate lookups */
    bl_vec attrs;          /* bl_attrs of included usage, at most BL_ATTRS_MAX */
    bl_strmap attr_map;    /* their keys -> index */
    bl_intern account_ids; /* account bytes -> catalog index */
    bl_intern pair_ids;    /* model and region bytes -> pair number */
    bl_memo *memo;         /* see bl_memo */
    size_t memo_cap;       /* power of two or 0 */
    unsigned memo_shift;   /* 64 - log2(memo_cap) */
    uint64_t gen;          /* changes whenever an event is added or removed */
    bl_scratch scratch;    /* month.c's temporaries (bl_scratch) */
    /*
     * Months given back by bl_month_release (invoice.h, month.c), their
     * lines' GMP values and arrays kept for the next bl_month_compute;
     * freed by month_spare_free (set by month.c, as credit_memo_free).
     */
    struct bl_month *month_spare;
    size_t n_month_spare;
    void (*month_spare_free)(billing_rater *r);
    /*
     * Frees the accounts' credit memos (NULL while there is none): set by
     * history.c, which owns the memos, so that billing_rater_destroy needs
     * none of the invoice code above the rater (no circle between the files).
     */
    void (*credit_memo_free)(billing_rater *r);
    /*
     * The accounts the rater holds, sized by what it holds and not by the
     * catalog, so that a rater for a few accounts of a large catalog (a
     * close batch, one balance) costs what it uses (doc/performance.md,
     * "Month-end close" and the balance section): accts in the order they
     * came, acct_slots an open-addressing table (load at most 1/2) of
     * their positions + 1 (0 = empty) by catalog index.
     */
    bl_acct *accts;
    size_t n_accts;
    size_t cap_accts;
    uint32_t *acct_slots;
    size_t acct_slot_cap; /* power of two or 0 */
    /* Dedupe. */
    bl_seen *seen; /* entries, in arrival order */
    size_t seen_count;
    size_t seen_cap;
    bl_seen_slot *seen_slots;
    size_t seen_slot_cap;
    char *arena;
    size_t arena_len;
    size_t arena_cap;
};

/* bl_month_index - year * 12 + month - 1. */
static inline int32_t bl_month_index(int year, int month)
{
    return (int32_t)(year * 12 + month - 1);
}

/*
 * bl_rater_acct - what @r keeps for account index @ai, added empty if it
 * held none (NULL when out of memory). bl_rater_acct_find - the same, or
 * NULL if @r holds nothing of @ai.
 */
bl_acct *bl_rater_acct(billing_rater *r, size_t ai);
const bl_acct *bl_rater_acct_find(const billing_rater *r, size_t ai);

/* bl_agg_value - the exact aggregate sum (sum + extra) into @out. */
void bl_agg_value(const bl_agg *a, mpq_t out);

/*
 * For aggregate.c (adding stored aggregates): bl_rater_reserve_aggs makes
 * room for @extra new aggregates of account index @account (0 or -1 when
 * out of memory); bl_rater_agg_get then finds or creates the aggregate of
 * @key; bl_rater_agg_add_q adds the exact rational @q (nano-units) to it.
 */
int bl_rater_reserve_aggs(billing_rater *r, uint32_t account, size_t extra);
bl_agg *bl_rater_agg_get(billing_rater *r, const bl_aggkey *key);
/*
 * bl_rater_attrs_intern - the index in r->attrs of the (model, region) pair
 * of included usage, added on first sight (at most BL_ATTRS_MAX pairs:
 * BILLING_ERR_TOO_LARGE past it). Messages name @what and @id.
 */
billing_status bl_rater_attrs_intern(billing_rater *r, const char *model, size_t model_len,
                                     const char *region, size_t region_len, const char *what,
                                     const char *id, uint32_t *out, char *errbuf, size_t errsize);
void bl_rater_agg_add_q(bl_agg *a, const mpq_t q);
/* bl_agg_add_i128 - add the integer @v (nano-units) to @a exactly, spilling into GMP on overflow. */
void bl_agg_add_i128(bl_agg *a, bl_i128 v);

#endif /* BILLING_RATER_H */
