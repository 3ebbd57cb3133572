/*
 * catalog.h - the catalog's internal layout, shared by the rating,
 * invoice and credit modules. Internal to libbilling.
 */
#ifndef BILLING_CATALOG_H
#define BILLING_CATALOG_H

#include <gmp.h>
#include <stddef.h>

#include "hash.h"
#include "internal.h"

#define BL_NONE ((size_t)-1)

/*
 * bl_arena: strings kept for the catalog's life (account and grant ids),
 * packed in chunks that never move, so that a million accounts cost a
 * few hundred allocations instead of a million.
 */
typedef struct bl_arena {
    char **chunks;
    size_t n_chunks;
    size_t cap_chunks;
    char *at; /* free room in the last chunk */
    size_t left;
} bl_arena;

/* bl_arena_strdup - a copy of the @len bytes at @s plus a NUL in @a; NULL if out of memory. */
const char *bl_arena_strdup(bl_arena *a, const char *s, size_t len);

/* bl_arena_free - free every string of @a; @a is then empty. */
void bl_arena_free(bl_arena *a);

/*
 * bl_decimal: a tax rate or grant amount, interned by the text it was given
 * as: the accounts of a big catalog mostly share a handful of tax rates and
 * trial amounts, parsed once through GMP and kept once. Never moves.
 */
typedef struct bl_decimal {
    char *given; /* the text as given: the intern key */
    char *text;  /* canonical decimal */
    mpq_t value;
    mpz_t minor; /* amounts: value in minor units (exact); 0 for tax rates */
} bl_decimal;

typedef struct bl_account {
    const char *id; /* in cat->strings */
    const billing_zone *zone;
    mpq_srcptr tax_rate;  /* interned (cat->decimals), shared */
    const char *tax_text; /* canonical decimal */
    size_t *grants;       /* after freeze: indices into cat->grants in application order,
                            * a slice of cat->grant_pool */
    size_t n_grants;
    billing_time_t *epochs; /* sorted distinct grant window bounds (after freeze; a slice
                             * of cat->epoch_pool) */
    size_t n_epochs;
    size_t *subs; /* indices into cat->subs, kept as added; sorted by resource
                            * then start at freeze */
    size_t n_subs;
    size_t cap_subs;
} bl_account;

typedef struct bl_rate {
    billing_meter meter;
    char model[BL_ATTR_MAX + 1]; /* "*" = any */
    char region[BL_ATTR_MAX + 1];
    char key[2 * BL_ATTR_MAX + 8]; /* "meter|model|region", for the version's map */
    size_t version;                /* index into cat->versions */
    mpq_t price;
    char *price_text;
} bl_rate;

typedef struct bl_version {
    char id[BL_ID_MAX + 1];
    billing_time_t from;
    bl_strmap rate_map; /* "meter|model|region" -> index into cat->rates */
    size_t *plan_fee;   /* per plan: index into cat->fees or BL_NONE (at freeze) */
} bl_version;

typedef struct bl_plan {
    char id[BL_ID_MAX + 1];
    billing_period period;
    char model[BL_ATTR_MAX + 1];
    char region[BL_ATTR_MAX + 1];
    int refundable;
} bl_plan;

/* Pending plan fees, resolved into versions at freeze (plans may come later). */
typedef struct bl_fee {
    size_t version;
    size_t plan;
    mpq_t fee;
    char *fee_text;
} bl_fee;

typedef struct bl_sub {
    char id[BL_ID_MAX + 1];
    size_t account;
    char resource[BL_ID_MAX + 1];
    size_t plan;
    billing_time_t start;
    int terms;
    int cancelled;               /* whether cancelled_at holds a cancellation */
    billing_time_t cancelled_at; /* any instant; at or before start = no term at all */
    billing_time_t *bounds;      /* terms + 1 instants, computed when added */
    billing_time_t end;          /* effective end: cancellation or last term end, >= start */
} bl_sub;

typedef struct bl_grant {
    const char *id; /* in cat->strings */
    size_t account;
    mpz_srcptr amount_minor; /* amount in minor units: interned (cat->decimals), shared */
    const char *amount_text;
    billing_time_t granted_at;
    billing_time_t expires_at;
    unsigned kinds;
    int priority;
} bl_grant;

/* A growable array of fixed-size elements. */
typedef struct bl_vec {
    void *data;
    size_t len;
    size_t cap;
} bl_vec;

struct billing_catalog {
    char currency[4];
    int digits; /* minor digits, -1 until set */
    billing_rounding rounding;
    int frozen;
    bl_vec accounts; /* bl_account */
    bl_vec versions; /* bl_version, sorted by `from` at freeze */
    bl_vec rates;    /* bl_rate */
    bl_vec plans;    /* bl_plan */
    bl_vec fees;     /* bl_fee */
    bl_vec subs;     /* bl_sub */
    bl_vec grants;   /* bl_grant */
    bl_strmap account_map;
    bl_strmap version_map;
    bl_strmap plan_map;
    bl_strmap sub_map;
    bl_strmap grant_map;
    bl_arena strings;  /* account and grant ids */
    bl_vec decimals;   /* bl_decimal *, tax rates and grant amounts */
    bl_strmap tax_map; /* text as given -> index into decimals */
    bl_strmap amount_map;
    /* Built at freeze: */
    size_t *grant_pool;         /* every account's grants, account by account */
    billing_time_t *epoch_pool; /* every account's epochs, 2 per grant at most */
    size_t *vorder;             /* version indices sorted by `from` */
    billing_time_t *vfrom;      /* their `from`, same order */
    size_t *aorder;             /* account indices sorted by id */
};

#define BL_AT(vec, type, i) (&((type *)(vec).data)[(i)])

/* bl_vec_push - room for one more element of @size bytes; NULL if out of memory. */
void *bl_vec_push(bl_vec *v, size_t size);

/*
 * bl_catalog_freeze - validate and index the catalog for rating: sort
 * versions, resolve plan fees, compute subscription terms, order grants.
 * Idempotent. Returns BILLING_OK or an error with a message.
 */
billing_status bl_catalog_freeze(billing_catalog *cat, char *errbuf, size_t errsize);

/* bl_catalog_account - index of account @id or BL_NONE. */
size_t bl_catalog_account(const billing_catalog *cat, const char *id);

/* The same for the @len bytes at @id (an event's account, whose length is known). */
size_t bl_catalog_account_n(const billing_catalog *cat, const char *id, size_t len);

/*
 * bl_catalog_version_at - index (in sorted order) of the version in force
 * at @t, or BL_NONE if @t is before every version.
 */
size_t bl_catalog_version_at(const billing_catalog *cat, billing_time_t t);

/*
 * bl_catalog_rate - the rate of @meter for (@model, @region) in version
 * @version, trying exact, (model, *), (*, region), (*, *). BL_NONE if none.
 */
size_t bl_catalog_rate(const billing_catalog *cat, size_t version, billing_meter meter,
                       const char *model, const char *region);

/*
 * bl_rate_cache: remembers recent bl_catalog_rate answers, so that the
 * usual stream of events with a handful of (model, region) pairs costs
 * one short hash and compare per lookup instead of up to four key builds
 * and map probes. Owned by one rater (not shared between threads); the
 * catalog is frozen, so answers never go stale. Zeroed = empty.
 */
#define BL_RATE_CACHE_SLOTS 64

typedef struct bl_rate_memo {
    size_t rate; /* the answer (may be BL_NONE) */
    uint32_t version;
    uint32_t meter; /* billing_meter + 1; 0 = empty slot */
    uint8_t model_len;
    uint8_t region_len;
    char model[BL_ATTR_MAX];
    char region[BL_ATTR_MAX];
} bl_rate_memo;

typedef struct bl_rate_cache {
    bl_rate_memo slot[BL_RATE_CACHE_SLOTS];
} bl_rate_cache;

/* bl_catalog_rate_cached - bl_catalog_rate through @cache; same answers. */
size_t bl_catalog_rate_cached(const billing_catalog *cat, bl_rate_cache *cache, size_t version,
                              billing_meter meter, const char *model, size_t model_len,
                              const char *region, size_t region_len);

/*
 * bl_sub_check_fees - refuse subscription @s if a term it charges (one
 * starting before s->end) has no fee: before the first price version, or
 * in a version that sets none for its plan. Uses the frozen index when
 * @indexed, otherwise scans the versions and fees added so far. Returns
 * BILLING_OK or BILLING_ERR_NO_PRICE with a message naming the
 * subscription, its account and plan, and the term.
 */
billing_status bl_sub_check_fees(const billing_catalog *cat, const bl_sub *s, int indexed,
                                 char *errbuf, size_t errsize);

/*
 * bl_catalog_plan_fee - the fee of plan @plan in the version in force at
 * @t; NULL if that version sets none. *@version receives the version index.
 */
const bl_fee *bl_catalog_plan_fee(const billing_catalog *cat, size_t plan, billing_time_t t,
                                  size_t *version);

#endif /* BILLING_CATALOG_H */
