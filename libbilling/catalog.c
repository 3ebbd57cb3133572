/*
 * catalog.c - accounts, price-book versions, rates, plans, subscriptions
 * and credit grants: building, validating and freezing the catalog.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "decimal.h"
#include "zone.h"

void *bl_vec_push(bl_vec *v, size_t size)
{
    void *data;
    size_t ncap;

    if (v->len == v->cap) {
        ncap = v->cap == 0 ? 8 : v->cap * 2;
        data = realloc(v->data, ncap * size);
        if (data == NULL)
            return NULL;
        v->data = data;
        v->cap = ncap;
    }
    v->len++;
    return (char *)v->data + (v->len - 1) * size;
}

/* Chunk of the string arena: ids are at most BL_ID_MAX + 1 bytes, so one always fits. */
#define BL_ARENA_CHUNK ((size_t)1 << 20)

const char *bl_arena_strdup(bl_arena *a, const char *s, size_t len)
{
    char **chunks;
    char *p;
    size_t ncap;

    if (len >= BL_ARENA_CHUNK)
        return NULL;
    if (a->left < len + 1) {
        if (a->n_chunks == a->cap_chunks) {
            ncap = a->cap_chunks == 0 ? 16 : a->cap_chunks * 2;
            chunks = realloc(a->chunks, ncap * sizeof(*chunks));
            if (chunks == NULL)
                return NULL;
            a->chunks = chunks;
            a->cap_chunks = ncap;
        }
        /* Not zeroed: every byte handed out is written first. */
        a->at = malloc(BL_ARENA_CHUNK);
        if (a->at == NULL) {
            a->left = 0;
            return NULL;
        }
        a->chunks[a->n_chunks++] = a->at;
        a->left = BL_ARENA_CHUNK;
    }
    p = a->at;
    memcpy(p, s, len);
    p[len] = '\0';
    a->at += len + 1;
    a->left -= len + 1;
    return p;
}

void bl_arena_free(bl_arena *a)
{
    size_t i;

    for (i = 0; i < a->n_chunks; i++)
        free(a->chunks[i]);
    free(a->chunks);
    memset(a, 0, sizeof(*a));
}

/* Key functions for the string maps. */
static const char *account_key(const void *ctx, size_t i)
{
    return BL_AT(((const billing_catalog *)ctx)->accounts, bl_account, i)->id;
}

static const char *version_key(const void *ctx, size_t i)
{
    return BL_AT(((const billing_catalog *)ctx)->versions, bl_version, i)->id;
}

static const char *rate_key(const void *ctx, size_t i)
{
    return BL_AT(((const billing_catalog *)ctx)->rates, bl_rate, i)->key;
}

static const char *plan_key(const void *ctx, size_t i)
{
    return BL_AT(((const billing_catalog *)ctx)->plans, bl_plan, i)->id;
}

static const char *sub_key(const void *ctx, size_t i)
{
    return BL_AT(((const billing_catalog *)ctx)->subs, bl_sub, i)->id;
}

static const char *grant_key(const void *ctx, size_t i)
{
    return BL_AT(((const billing_catalog *)ctx)->grants, bl_grant, i)->id;
}

static const char *decimal_key(const void *ctx, size_t i)
{
    return (*BL_AT(((const billing_catalog *)ctx)->decimals, bl_decimal *, i))->given;
}

billing_catalog *billing_catalog_new(void)
{
    billing_catalog *cat = calloc(1, sizeof(*cat));

    if (cat == NULL)
        return NULL;
    cat->digits = -1;
    return cat;
}

static void free_accounts(billing_catalog *cat)
{
    size_t i;
    bl_account *a;

    for (i = 0; i < cat->accounts.len; i++) {
        a = BL_AT(cat->accounts, bl_account, i);
        free(a->subs);
    }
    free(cat->accounts.data);
    free(cat->grant_pool);
    free(cat->epoch_pool);
}

static void free_decimals(billing_catalog *cat)
{
    size_t i;
    bl_decimal *d;

    for (i = 0; i < cat->decimals.len; i++) {
        d = *BL_AT(cat->decimals, bl_decimal *, i);
        mpq_clear(d->value);
        mpz_clear(d->minor);
        free(d->given);
        free(d->text);
        free(d);
    }
    free(cat->decimals.data);
    bl_strmap_free(&cat->tax_map);
    bl_strmap_free(&cat->amount_map);
}

static void free_prices(billing_catalog *cat)
{
    size_t i;
    bl_version *v;
    bl_rate *r;
    bl_fee *f;

    for (i = 0; i < cat->versions.len; i++) {
        v = BL_AT(cat->versions, bl_version, i);
        bl_strmap_free(&v->rate_map);
        free(v->plan_fee);
    }
    for (i = 0; i < cat->rates.len; i++) {
        r = BL_AT(cat->rates, bl_rate, i);
        mpq_clear(r->price);
        free(r->price_text);
    }
    for (i = 0; i < cat->fees.len; i++) {
        f = BL_AT(cat->fees, bl_fee, i);
        mpq_clear(f->fee);
        free(f->fee_text);
    }
    free(cat->versions.data);
    free(cat->rates.data);
    free(cat->fees.data);
    free(cat->plans.data);
}

void billing_catalog_destroy(billing_catalog *cat)
{
    size_t i;

    if (cat == NULL)
        return;
    free_accounts(cat);
    free_prices(cat);
    for (i = 0; i < cat->subs.len; i++)
        free(BL_AT(cat->subs, bl_sub, i)->bounds);
    free(cat->subs.data);
    free(cat->grants.data);
    free_decimals(cat);
    bl_arena_free(&cat->strings);
    bl_strmap_free(&cat->account_map);
    bl_strmap_free(&cat->version_map);
    bl_strmap_free(&cat->plan_map);
    bl_strmap_free(&cat->sub_map);
    bl_strmap_free(&cat->grant_map);
    free(cat->vorder);
    free(cat->vfrom);
    free(cat->aorder);
    free(cat);
}

static billing_status check_open(const billing_catalog *cat, char *errbuf, size_t errsize)
{
    if (cat == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "catalog is NULL");
    if (cat->frozen)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE,
                         "catalog is frozen: a rater has been created from it");
    return BILLING_OK;
}

/* Parse a decimal argument into @out and its canonical text into *@text. */
static billing_status parse_decimal(mpq_t out, char **text, const char *what, const char *s,
                                    int max_frac, char *errbuf, size_t errsize)
{
    if (s == NULL || bl_q_parse(out, s, 0, max_frac) != 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                         "%s: '%.64s' is not a non-negative decimal%s", what, s ? s : "(null)",
                         max_frac >= 0 ? " with the currency's minor digits" : "");
    *text = bl_q_to_string(out);
    if (*text == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "%s: out of memory", what);
    return BILLING_OK;
}

billing_status billing_catalog_set_currency(billing_catalog *cat, const char *currency,
                                            billing_rounding rounding, char *errbuf, size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    int digits;

    if (st != BILLING_OK)
        return st;
    digits = billing_currency_digits(currency);
    if (digits < 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "currency '%.16s' is not an ISO 4217 code", currency ? currency : "");
    if (billing_rounding_name(rounding) == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "unknown rounding mode %d",
                         (int)rounding);
    if (cat->accounts.len > 0 && strcmp(cat->currency, currency) != 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE,
                         "currency cannot change after accounts were added");
    memcpy(cat->currency, currency, 4);
    cat->digits = digits;
    cat->rounding = rounding;
    return BILLING_OK;
}

static billing_status check_new_id_hashed(const bl_strmap *map, bl_strmap_key_fn key_of,
                                          const billing_catalog *cat, const char *kind,
                                          const char *id, uint64_t *hash, char *errbuf,
                                          size_t errsize)
{
    if (!bl_valid_id(id))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "%s id '%.140s' must be 1 to %d printable characters without spaces", kind,
                         id ? id : "(null)", BL_ID_MAX);
    *hash = bl_strmap_hash(id);
    if (bl_strmap_find_hashed(map, id, *hash, key_of, cat) != BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_EXISTS, "%s '%s' already exists", kind, id);
    return BILLING_OK;
}

static billing_status check_new_id(const bl_strmap *map, bl_strmap_key_fn key_of,
                                   const billing_catalog *cat, const char *kind, const char *id,
                                   char *errbuf, size_t errsize)
{
    uint64_t hash;

    return check_new_id_hashed(map, key_of, cat, kind, id, &hash, errbuf, errsize);
}

/* The interned decimal given as @given in @map, or NULL; *@hash receives its hash. */
static const bl_decimal *decimal_find(const billing_catalog *cat, const bl_strmap *map,
                                      const char *given, uint64_t *hash)
{
    size_t i;

    if (given == NULL)
        return NULL;
    *hash = bl_strmap_hash(given);
    i = bl_strmap_find_hashed(map, given, *hash, decimal_key, cat);
    return i == BL_NONE ? NULL : *BL_AT(cat->decimals, bl_decimal *, i);
}

/*
 * Intern @value (canonical text @text, which it takes in every case) as
 * @given in @map; with @digits >= 0 also in minor units. NULL if out of
 * memory.
 */
static const bl_decimal *decimal_add(billing_catalog *cat, bl_strmap *map, const char *given,
                                     uint64_t hash, const mpq_t value, char *text, int digits)
{
    bl_decimal *d = calloc(1, sizeof(*d));
    bl_decimal **slot;

    if (d == NULL)
        goto nomem;
    d->text = text;
    text = NULL;
    d->given = strdup(given);
    if (d->given == NULL)
        goto nomem;
    mpq_init(d->value);
    mpz_init(d->minor);
    mpq_set(d->value, value);
    /* Exact: amounts have at most `digits` decimals. */
    if (digits >= 0)
        bl_q_round_minor(d->minor, value, digits, BILLING_ROUND_DOWN);
    slot = bl_vec_push(&cat->decimals, sizeof(*slot));
    if (slot == NULL)
        goto nomem_value;
    *slot = d;
    if (bl_strmap_insert_hashed(map, hash, cat->decimals.len - 1) != 0) {
        cat->decimals.len--;
        goto nomem_value;
    }
    return d;
nomem_value:
    mpq_clear(d->value);
    mpz_clear(d->minor);
nomem:
    if (d != NULL) {
        free(d->given);
        free(d->text);
    }
    free(d);
    free(text);
    return NULL;
}

/* What a decimal field must hold beyond its syntax: BILLING_OK or an error naming @id. */
typedef billing_status (*decimal_check_fn)(const mpq_t q, const char *text, const char *id,
                                           char *errbuf, size_t errsize);

static billing_status check_tax(const mpq_t q, const char *text, const char *id, char *errbuf,
                                size_t errsize)
{
    if (mpz_cmp(mpq_numref(q), mpq_denref(q)) > 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         "account '%s': field 'tax_rate': %s is above 1", id, text);
    return BILLING_OK;
}

static billing_status check_amount(const mpq_t q, const char *text, const char *id, char *errbuf,
                                   size_t errsize)
{
    (void)text;
    if (mpq_sgn(q) <= 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "credit grant '%s': field 'amount' must be positive", id);
    return BILLING_OK;
}

/*
 * The value of field @field given as @given for object @id, interned in
 * @map: parsed and checked (@check) once per text. @digits: the most
 * fractional digits, and the minor units kept, or -1 for any and none.
 */
static billing_status decimal_of(billing_catalog *cat, bl_strmap *map, const char *field,
                                 int digits, decimal_check_fn check, const char *id,
                                 const char *given, const bl_decimal **out, char *errbuf,
                                 size_t errsize)
{
    billing_status st;
    uint64_t hash = 0;
    mpq_t q;
    char *text = NULL;

    *out = decimal_find(cat, map, given, &hash);
    if (*out != NULL)
        return BILLING_OK;
    mpq_init(q);
    st = parse_decimal(q, &text, field, given, digits, errbuf, errsize);
    if (st == BILLING_OK)
        st = check(q, text, id, errbuf, errsize);
    if (st != BILLING_OK) {
        free(text);
    } else {
        *out = decimal_add(cat, map, given, hash, q, text, digits);
        if (*out == NULL)
            st = bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "'%s': out of memory", id);
    }
    mpq_clear(q);
    return st;
}

billing_status billing_catalog_add_account(billing_catalog *cat, const char *id,
                                           const char *currency, const billing_zone *zone,
                                           const char *tax_rate, char *errbuf, size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    const bl_decimal *tax;
    bl_account *a;
    uint64_t hash;

    if (st != BILLING_OK)
        return st;
    st = check_new_id_hashed(&cat->account_map, account_key, cat, "account", id, &hash, errbuf,
                             errsize);
    if (st != BILLING_OK)
        return st;
    if (cat->digits < 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE,
                         "account '%s': set the catalog currency first", id);
    if (currency == NULL || strcmp(currency, cat->currency) != 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "account '%s': field 'currency': '%.16s' differs from the price book's %s",
                         id, currency ? currency : "(null)", cat->currency);
    if (zone == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_ZONE, "account '%s': field 'zone' is NULL",
                         id);
    st = decimal_of(cat, &cat->tax_map, "field 'tax_rate'", -1, check_tax, id, tax_rate, &tax,
                    errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    a = bl_vec_push(&cat->accounts, sizeof(*a));
    if (a == NULL)
        goto nomem;
    memset(a, 0, sizeof(*a));
    a->id = bl_arena_strdup(&cat->strings, id, strlen(id));
    a->zone = zone;
    a->tax_rate = tax->value;
    a->tax_text = tax->text;
    if (a->id == NULL ||
        bl_strmap_insert_hashed(&cat->account_map, hash, cat->accounts.len - 1) != 0) {
        cat->accounts.len--;
        goto nomem;
    }
    return BILLING_OK;
nomem:
    return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "account '%s': out of memory", id);
}

billing_status billing_catalog_add_price_version(billing_catalog *cat, const char *version_id,
                                                 billing_time_t effective_from, char *errbuf,
                                                 size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    bl_version *v;
    size_t i;

    if (st != BILLING_OK)
        return st;
    st = check_new_id(&cat->version_map, version_key, cat, "price version", version_id, errbuf,
                      errsize);
    if (st != BILLING_OK)
        return st;
    if (effective_from < BL_TIME_MIN || effective_from > BL_TIME_MAX)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         "price version '%s': field 'effective_from' out of range", version_id);
    for (i = 0; i < cat->versions.len; i++) {
        if (BL_AT(cat->versions, bl_version, i)->from == effective_from)
            return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                             "price version '%s': field 'effective_from' equals that of '%s'",
                             version_id, BL_AT(cat->versions, bl_version, i)->id);
    }
    v = bl_vec_push(&cat->versions, sizeof(*v));
    if (v == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    memset(v, 0, sizeof(*v));
    strcpy(v->id, version_id);
    v->from = effective_from;
    bl_strmap_init(&v->rate_map);
    if (bl_strmap_insert(&cat->version_map, version_id, cat->versions.len - 1, version_key, cat) !=
        0) {
        cat->versions.len--;
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    }
    return BILLING_OK;
}

/* An attribute for a price key: "*" or 1..64 printable characters. */
static int valid_attr(const char *s)
{
    size_t n;

    if (s == NULL)
        return 0;
    n = strlen(s);
    return n > 0 && n <= BL_ATTR_MAX && bl_valid_id(s);
}

static void make_rate_key(char *out, size_t size, billing_meter meter, const char *model,
                          const char *region)
{
    size_t used = 0;
    const char *name = billing_meter_name(meter);

    /* Fields are bounded and contain no '|', so the key is unambiguous. */
    memcpy(out, name, strlen(name));
    used = strlen(name);
    out[used++] = '|';
    memcpy(out + used, model, strlen(model));
    used += strlen(model);
    out[used++] = '|';
    memcpy(out + used, region, strlen(region));
    used += strlen(region);
    out[used] = '\0';
    (void)size;
}

billing_status billing_catalog_set_rate(billing_catalog *cat, const char *version_id,
                                        billing_meter meter, const char *model, const char *region,
                                        const char *price, char *errbuf, size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    size_t vi;
    bl_version *v;
    bl_rate *r;
    char key[sizeof(r->key)];
    mpq_t q;
    char *text = NULL;

    if (st != BILLING_OK)
        return st;
    vi = version_id ? bl_strmap_find(&cat->version_map, version_id, version_key, cat) : BL_NONE;
    if (vi == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOT_FOUND, "price version '%.140s' not found",
                         version_id ? version_id : "(null)");
    if (billing_meter_name(meter) == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "rate: unknown meter %d",
                         (int)meter);
    if (!valid_attr(model) || !valid_attr(region) || strchr(model, '|') || strchr(region, '|'))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "rate in '%s': model and region must be \"*\" or 1 to %d printable "
                         "characters without spaces or '|'",
                         version_id, BL_ATTR_MAX);
    v = BL_AT(cat->versions, bl_version, vi);
    make_rate_key(key, sizeof(key), meter, model, region);
    if (bl_strmap_find(&v->rate_map, key, rate_key, cat) != BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_EXISTS,
                         "price version '%s' already has a %s rate for %s in %s", version_id,
                         billing_meter_name(meter), model, region);
    mpq_init(q);
    st = parse_decimal(q, &text, "field 'price'", price, -1, errbuf, errsize);
    if (st != BILLING_OK) {
        mpq_clear(q);
        return st;
    }
    r = bl_vec_push(&cat->rates, sizeof(*r));
    if (r == NULL)
        goto nomem;
    memset(r, 0, sizeof(*r));
    r->meter = meter;
    strcpy(r->model, model);
    strcpy(r->region, region);
    strcpy(r->key, key);
    r->version = vi;
    mpq_init(r->price);
    mpq_set(r->price, q);
    r->price_text = text;
    if (bl_strmap_insert(&v->rate_map, key, cat->rates.len - 1, rate_key, cat) != 0) {
        mpq_clear(r->price);
        cat->rates.len--;
        goto nomem;
    }
    mpq_clear(q);
    return BILLING_OK;
nomem:
    free(text);
    mpq_clear(q);
    return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
}

billing_status billing_catalog_add_plan(billing_catalog *cat, const char *plan_id,
                                        billing_period period, const char *model,
                                        const char *region, int refundable, char *errbuf,
                                        size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    bl_plan *p;

    if (st != BILLING_OK)
        return st;
    st = check_new_id(&cat->plan_map, plan_key, cat, "plan", plan_id, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    if (period != BILLING_PERIOD_DAY && period != BILLING_PERIOD_MONTH)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "plan '%s': unknown period %d",
                         plan_id, (int)period);
    if (!valid_attr(model) || !valid_attr(region))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "plan '%s': model and region must be \"*\" or 1 to %d printable "
                         "characters",
                         plan_id, BL_ATTR_MAX);
    p = bl_vec_push(&cat->plans, sizeof(*p));
    if (p == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    memset(p, 0, sizeof(*p));
    strcpy(p->id, plan_id);
    p->period = period;
    strcpy(p->model, model);
    strcpy(p->region, region);
    p->refundable = refundable != 0;
    if (bl_strmap_insert(&cat->plan_map, plan_id, cat->plans.len - 1, plan_key, cat) != 0) {
        cat->plans.len--;
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    }
    return BILLING_OK;
}

billing_status billing_catalog_set_plan_fee(billing_catalog *cat, const char *version_id,
                                            const char *plan_id, const char *fee, char *errbuf,
                                            size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    size_t vi;
    size_t pi;
    size_t i;
    bl_fee *f;
    mpq_t q;
    char *text = NULL;

    if (st != BILLING_OK)
        return st;
    vi = version_id ? bl_strmap_find(&cat->version_map, version_id, version_key, cat) : BL_NONE;
    pi = plan_id ? bl_strmap_find(&cat->plan_map, plan_id, plan_key, cat) : BL_NONE;
    if (vi == BL_NONE || pi == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOT_FOUND, "%s '%.140s' not found",
                         vi == BL_NONE ? "price version" : "plan",
                         vi == BL_NONE ? (version_id ? version_id : "(null)") : plan_id);
    for (i = 0; i < cat->fees.len; i++) {
        f = BL_AT(cat->fees, bl_fee, i);
        if (f->version == vi && f->plan == pi)
            return bl_seterr(errbuf, errsize, BILLING_ERR_EXISTS,
                             "price version '%s' already sets the fee of plan '%s'", version_id,
                             plan_id);
    }
    mpq_init(q);
    st = parse_decimal(q, &text, "field 'fee'", fee, -1, errbuf, errsize);
    if (st != BILLING_OK) {
        mpq_clear(q);
        return st;
    }
    f = bl_vec_push(&cat->fees, sizeof(*f));
    if (f == NULL) {
        free(text);
        mpq_clear(q);
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    }
    f->version = vi;
    f->plan = pi;
    mpq_init(f->fee);
    mpq_set(f->fee, q);
    f->fee_text = text;
    mpq_clear(q);
    return BILLING_OK;
}

/* Prefix of every message about subscription @s: its id, account and plan. */
#define SUB_FMT "subscription '%s' (account '%s', plan '%s'): "
#define SUB_ARGS(cat, s)                                           \
    (s)->id, BL_AT((cat)->accounts, bl_account, (s)->account)->id, \
        BL_AT((cat)->plans, bl_plan, (s)->plan)->id

/*
 * Term bounds of @s (allocated into s->bounds) from its plan's period in
 * its account's zone, and its effective end. A cancellation at or before
 * the start leaves no term at all (end = start); one at or after the end
 * of the last term cancels nothing and is refused.
 */
static billing_status sub_terms(const billing_catalog *cat, bl_sub *s, char *errbuf, size_t errsize)
{
    const bl_plan *plan = BL_AT(cat->plans, bl_plan, s->plan);
    const bl_account *a = BL_AT(cat->accounts, bl_account, s->account);
    int k;

    s->bounds = malloc(((size_t)s->terms + 1) * sizeof(billing_time_t));
    if (s->bounds == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, SUB_FMT "out of memory",
                         SUB_ARGS(cat, s));
    s->bounds[0] = s->start;
    for (k = 1; k <= s->terms; k++) {
        if (plan->period == BILLING_PERIOD_DAY) {
            s->bounds[k] = s->start + (billing_time_t)k * 86400 * BILLING_NS_PER_SEC;
        } else if (bl_zone_add_months(a->zone, s->start, k, &s->bounds[k]) != 0) {
            return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                             SUB_FMT "field 'terms': term %d ends out of range", SUB_ARGS(cat, s),
                             k);
        }
    }
    s->end = s->bounds[s->terms];
    if (!s->cancelled)
        return BILLING_OK;
    if (s->cancelled_at >= s->end)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         SUB_FMT "field 'cancelled_at' is at or after the end of the last term",
                         SUB_ARGS(cat, s));
    s->end = s->cancelled_at > s->start ? s->cancelled_at : s->start;
    return BILLING_OK;
}

/* The fee of @plan in force at @t, scanning what was added so far (no index yet). */
static const bl_fee *fee_scan(const billing_catalog *cat, size_t plan, billing_time_t t,
                              size_t *version)
{
    const bl_version *v;
    const bl_fee *f;
    size_t i;

    *version = BL_NONE;
    for (i = 0; i < cat->versions.len; i++) {
        v = BL_AT(cat->versions, bl_version, i);
        if (v->from <= t &&
            (*version == BL_NONE || v->from > BL_AT(cat->versions, bl_version, *version)->from))
            *version = i;
    }
    for (i = 0; *version != BL_NONE && i < cat->fees.len; i++) {
        f = BL_AT(cat->fees, bl_fee, i);
        if (f->version == *version && f->plan == plan)
            return f;
    }
    return NULL;
}

billing_status bl_sub_check_fees(const billing_catalog *cat, const bl_sub *s, int indexed,
                                 char *errbuf, size_t errsize)
{
    const bl_fee *fee;
    size_t version;
    char when[40];
    int k;

    for (k = 0; k < s->terms && s->bounds[k] < s->end; k++) {
        if (indexed)
            fee = bl_catalog_plan_fee(cat, s->plan, s->bounds[k], &version);
        else
            fee = fee_scan(cat, s->plan, s->bounds[k], &version);
        if (fee != NULL)
            continue;
        billing_time_format(s->bounds[k], when, sizeof(when));
        if (version == BL_NONE)
            return bl_seterr(errbuf, errsize, BILLING_ERR_NO_PRICE,
                             SUB_FMT "field 'start': term %d starts at %s, before the first "
                                     "price version: no fee",
                             SUB_ARGS(cat, s), k + 1, when);
        return bl_seterr(errbuf, errsize, BILLING_ERR_NO_PRICE,
                         SUB_FMT "field 'plan': term %d starts at %s, when price version '%s' "
                                 "sets no fee for the plan",
                         SUB_ARGS(cat, s), k + 1, when,
                         BL_AT(cat->versions, bl_version, version)->id);
    }
    return BILLING_OK;
}

/*
 * Refuse @s if its terms overlap those of a subscription of the same
 * resource of its account: one instance is covered by one plan at a time.
 * Linear in the account's subscriptions, which are few.
 */
static billing_status sub_check_overlap(const billing_catalog *cat, const bl_sub *s, char *errbuf,
                                        size_t errsize)
{
    const bl_account *a = BL_AT(cat->accounts, bl_account, s->account);
    const bl_sub *t;
    size_t i;

    for (i = 0; s->end > s->start && i < a->n_subs; i++) {
        t = BL_AT(cat->subs, bl_sub, a->subs[i]);
        if (t->end > t->start && t->start < s->end && s->start < t->end &&
            strcmp(t->resource, s->resource) == 0)
            return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                             SUB_FMT "field 'start': its terms overlap those of subscription '%s' "
                                     "of resource '%s'",
                             SUB_ARGS(cat, s), t->id, t->resource);
    }
    return BILLING_OK;
}

/* Room in @a's list for one more subscription; 0 or -1 (no memory). */
static int reserve_account_sub(bl_account *a)
{
    size_t ncap;
    size_t *p;

    if (a->n_subs < a->cap_subs)
        return 0;
    ncap = a->cap_subs ? 2 * a->cap_subs : 4;
    p = realloc(a->subs, ncap * sizeof(size_t));
    if (p == NULL)
        return -1;
    a->subs = p;
    a->cap_subs = ncap;
    return 0;
}

/* Check a subscription about to be added; fills its term bounds. */
static billing_status sub_check_new(const billing_catalog *cat, bl_sub *s, char *errbuf,
                                    size_t errsize)
{
    billing_status st;

    if (!bl_valid_id(s->resource))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         SUB_FMT "field 'resource' is not a valid id", SUB_ARGS(cat, s));
    if (s->terms < 1 || s->terms > 1200)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         SUB_FMT "field 'terms': %d is not in 1..1200", SUB_ARGS(cat, s), s->terms);
    if (s->start < BL_TIME_MIN || s->start > BL_TIME_MAX)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE, SUB_FMT "field 'start' out of range",
                         SUB_ARGS(cat, s));
    if (s->cancelled && (s->cancelled_at < BL_TIME_MIN || s->cancelled_at > BL_TIME_MAX))
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         SUB_FMT "field 'cancelled_at' out of range", SUB_ARGS(cat, s));
    st = sub_terms(cat, s, errbuf, errsize);
    if (st == BILLING_OK)
        st = sub_check_overlap(cat, s, errbuf, errsize);
    /* Versions added later may change the fee in force: freeze checks again. */
    if (st == BILLING_OK && cat->versions.len > 0)
        st = bl_sub_check_fees(cat, s, 0, errbuf, errsize);
    return st;
}

billing_status billing_catalog_add_subscription(billing_catalog *cat, const char *subscription_id,
                                                const char *account, const char *resource,
                                                const char *plan_id, billing_time_t start,
                                                int terms, const billing_time_t *cancelled_at,
                                                char *errbuf, size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    bl_account *a;
    bl_sub n;
    bl_sub *s;

    if (st != BILLING_OK)
        return st;
    st =
        check_new_id(&cat->sub_map, sub_key, cat, "subscription", subscription_id, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    memset(&n, 0, sizeof(n));
    n.account = account ? bl_catalog_account(cat, account) : BL_NONE;
    n.plan = plan_id ? bl_strmap_find(&cat->plan_map, plan_id, plan_key, cat) : BL_NONE;
    if (n.account == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOT_FOUND,
                         "subscription '%s': field 'account': '%.140s' not found", subscription_id,
                         account ? account : "(null)");
    if (n.plan == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOT_FOUND,
                         "subscription '%s' (account '%s'): field 'plan': '%.140s' not found",
                         subscription_id, account, plan_id ? plan_id : "(null)");
    if (resource == NULL || strlen(resource) > BL_ID_MAX)
        resource = "";
    strcpy(n.id, subscription_id);
    strcpy(n.resource, resource);
    n.start = start;
    n.terms = terms;
    n.cancelled = cancelled_at != NULL;
    n.cancelled_at = cancelled_at != NULL ? *cancelled_at : 0;
    st = sub_check_new(cat, &n, errbuf, errsize);
    if (st != BILLING_OK)
        goto error;
    a = BL_AT(cat->accounts, bl_account, n.account);
    if (reserve_account_sub(a) != 0)
        goto nomem;
    s = bl_vec_push(&cat->subs, sizeof(*s));
    if (s == NULL)
        goto nomem;
    *s = n;
    if (bl_strmap_insert(&cat->sub_map, subscription_id, cat->subs.len - 1, sub_key, cat) != 0) {
        cat->subs.len--;
        goto nomem;
    }
    a->subs[a->n_subs++] = cat->subs.len - 1;
    return BILLING_OK;
nomem:
    st = bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
error:
    free(n.bounds);
    return st;
}

billing_status billing_catalog_add_grant(billing_catalog *cat, const char *grant_id,
                                         const char *account, const char *amount,
                                         billing_time_t granted_at, billing_time_t expires_at,
                                         unsigned kinds, int priority, char *errbuf, size_t errsize)
{
    billing_status st = check_open(cat, errbuf, errsize);
    const bl_decimal *amt;
    uint64_t hash;
    size_t ai;
    bl_grant *g;

    if (st != BILLING_OK)
        return st;
    st = check_new_id_hashed(&cat->grant_map, grant_key, cat, "credit grant", grant_id, &hash,
                             errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    ai = account ? bl_catalog_account(cat, account) : BL_NONE;
    if (ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOT_FOUND,
                         "credit grant '%s': field 'account': '%.140s' not found", grant_id,
                         account ? account : "(null)");
    if (expires_at <= granted_at || granted_at < BL_TIME_MIN || expires_at > BL_TIME_MAX)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "credit grant '%s': field 'expires_at' must be after 'granted_at' and "
                         "both in range",
                         grant_id);
    if (kinds == 0 || (kinds & ~(unsigned)(BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION)))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "credit grant '%s': field 'applies_to' must name usage and/or "
                         "subscription",
                         grant_id);
    st = decimal_of(cat, &cat->amount_map, "field 'amount'", cat->digits, check_amount, grant_id,
                    amount, &amt, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    g = bl_vec_push(&cat->grants, sizeof(*g));
    if (g == NULL)
        goto nomem;
    memset(g, 0, sizeof(*g));
    g->id = bl_arena_strdup(&cat->strings, grant_id, strlen(grant_id));
    g->account = ai;
    g->amount_minor = amt->minor;
    g->amount_text = amt->text;
    g->granted_at = granted_at;
    g->expires_at = expires_at;
    g->kinds = kinds;
    g->priority = priority;
    if (g->id == NULL || bl_strmap_insert_hashed(&cat->grant_map, hash, cat->grants.len - 1) != 0) {
        cat->grants.len--;
        goto nomem;
    }
    return BILLING_OK;
nomem:
    return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
}

size_t bl_catalog_account(const billing_catalog *cat, const char *id)
{
    return bl_strmap_find(&cat->account_map, id, account_key, cat);
}

size_t bl_catalog_account_n(const billing_catalog *cat, const char *id, size_t len)
{
    return bl_strmap_find_n(&cat->account_map, id, len, account_key, cat);
}

size_t bl_catalog_version_at(const billing_catalog *cat, billing_time_t t)
{
    size_t lo = 0;
    size_t hi = cat->versions.len;
    size_t mid;

    /* Find the last version whose start is <= t. */
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (cat->vfrom[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? BL_NONE : cat->vorder[lo - 1];
}

size_t bl_catalog_rate(const billing_catalog *cat, size_t version, billing_meter meter,
                       const char *model, const char *region)
{
    const bl_version *v = BL_AT(cat->versions, bl_version, version);
    const char *models[2];
    const char *regions[2];
    char key[2 * BL_ATTR_MAX + 8];
    size_t found;
    int i;
    int j;

    models[0] = model[0] ? model : "*";
    models[1] = "*";
    regions[0] = region[0] ? region : "*";
    regions[1] = "*";
    /* Model is more specific than region: (m,r), (m,*), (*,r), (*,*). */
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 2; j++) {
            make_rate_key(key, sizeof(key), meter, models[i], regions[j]);
            found = bl_strmap_find(&v->rate_map, key, rate_key, cat);
            if (found != BL_NONE)
                return found;
        }
    }
    return BL_NONE;
}

const bl_fee *bl_catalog_plan_fee(const billing_catalog *cat, size_t plan, billing_time_t t,
                                  size_t *version)
{
    size_t vi = bl_catalog_version_at(cat, t);
    const bl_version *v;

    *version = vi;
    if (vi == BL_NONE)
        return NULL;
    v = BL_AT(cat->versions, bl_version, vi);
    if (v->plan_fee[plan] == BL_NONE)
        return NULL;
    return BL_AT(cat->fees, bl_fee, v->plan_fee[plan]);
}

size_t bl_catalog_rate_cached(const billing_catalog *cat, bl_rate_cache *cache, size_t version,
                              billing_meter meter, const char *model, size_t model_len,
                              const char *region, size_t region_len)
{
    uint64_t h = bl_hash_bytes(model, model_len, (uint64_t)version << 8 | (uint64_t)meter);
    bl_rate_memo *m;

    h = bl_hash_bytes(region, region_len, h);
    m = &cache->slot[h & (BL_RATE_CACHE_SLOTS - 1)];
    if (m->meter == (uint32_t)meter + 1 && m->version == version && m->model_len == model_len &&
        m->region_len == region_len && memcmp(m->model, model, model_len) == 0 &&
        memcmp(m->region, region, region_len) == 0)
        return m->rate;
    m->rate = bl_catalog_rate(cat, version, meter, model, region);
    m->meter = (uint32_t)meter + 1;
    m->version = (uint32_t)version;
    m->model_len = (uint8_t)model_len;
    m->region_len = (uint8_t)region_len;
    memcpy(m->model, model, model_len);
    memcpy(m->region, region, region_len);
    return m->rate;
}
