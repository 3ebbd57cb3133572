/*
 * aggregate.c - reading a rater's aggregates out, and adding stored
 * aggregates back in, so that a store can keep the exact sums (billingd,
 * `billing ingest`) and invoices computed from them equal those computed
 * from the events.
 *
 * At the API a sum is in unit-nanoseconds (quantity x duration; traffic:
 * units), an exact rational written "N" or "N/D" in lowest terms. Inside,
 * the rater keeps nano-units, hence the factor 10^9 each way.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "rater.h"

/* Longest sum accepted by billing_rater_add_aggregate, in characters. */
#define AGG_SUM_TEXT_MAX 512

static void nano_scale(mpz_t out)
{
    mpz_ui_pow_ui(out, 10, 9);
}

/* The rater's value of @a in unit-nanoseconds. */
static void agg_units(const bl_agg *a, mpq_t out)
{
    mpq_t scale;

    mpq_init(scale);
    nano_scale(mpq_numref(scale));
    bl_agg_value(a, out);
    mpq_div(out, out, scale);
    mpq_clear(scale);
}

static billing_status write_sum(const bl_agg *a, char *buf, size_t size)
{
    mpq_t q;
    size_t need;
    billing_status st = BILLING_OK;

    mpq_init(q);
    agg_units(a, q);
    /* mpq_get_str needs digits of both parts, '/', sign and NUL. */
    need = mpz_sizeinbase(mpq_numref(q), 10) + mpz_sizeinbase(mpq_denref(q), 10) + 3;
    if (buf == NULL || need > size)
        st = BILLING_ERR_TOO_LARGE;
    else
        mpq_get_str(buf, 10, q);
    mpq_clear(q);
    return st;
}

billing_status billing_rater_aggregate(const billing_rater *r, size_t index, const char **account,
                                       int *year_month, billing_meter *meter,
                                       const char **price_version, const char **model,
                                       const char **region, const char **subscription,
                                       unsigned *epoch, uint64_t *pieces, char *sum, size_t sumsize)
{
    const bl_agg *a;
    const billing_catalog *cat;
    const bl_rate *rate = NULL;
    const bl_sub *sub = NULL;
    const bl_attrs *attrs = NULL;

    if (r == NULL || index >= r->n_aggs)
        return BILLING_ERR_INVALID;
    a = &r->aggs[index];
    cat = r->cat;
    if (a->key.rate != BL_RATE_NONE && a->key.rate != BL_RATE_ZERO)
        rate = BL_AT(cat->rates, bl_rate, a->key.rate);
    if (a->key.sub != BL_SUB_NONE)
        sub = BL_AT(cat->subs, bl_sub, a->key.sub);
    if (account != NULL)
        *account = BL_AT(cat->accounts, bl_account, a->key.account)->id;
    if (year_month != NULL)
        *year_month = (a->key.month / 12) * 100 + a->key.month % 12 + 1;
    if (meter != NULL)
        *meter = (billing_meter)a->key.meter;
    if (price_version != NULL)
        *price_version = rate ? BL_AT(cat->versions, bl_version, rate->version)->id : NULL;
    /* Included usage keeps the events' own pair, which its invoice line shows. */
    if (rate == NULL && a->key.attrs != BL_ATTRS_NONE)
        attrs = BL_AT(r->attrs, bl_attrs, a->key.attrs);
    if (model != NULL)
        *model = rate ? rate->model : attrs ? attrs->model : NULL;
    if (region != NULL)
        *region = rate ? rate->region : attrs ? attrs->region : NULL;
    if (subscription != NULL)
        *subscription = sub ? sub->id : NULL;
    if (epoch != NULL)
        *epoch = a->key.epoch;
    if (pieces != NULL)
        *pieces = a->pieces;
    if (sum == NULL)
        return BILLING_OK;
    return write_sum(a, sum, sumsize);
}

/* The rate of (@version, @meter, @model, @region), spelled as stored ("*" included). */
static size_t find_rate(const billing_catalog *cat, const char *version, billing_meter meter,
                        const char *model, const char *region)
{
    const char *name = billing_meter_name(meter);
    size_t vi = BL_NONE;
    size_t i;
    const bl_rate *rt;

    for (i = 0; i < cat->versions.len && vi == BL_NONE; i++) {
        if (strcmp(BL_AT(cat->versions, bl_version, i)->id, version) == 0)
            vi = i;
    }
    if (vi == BL_NONE || name == NULL)
        return BL_NONE;
    /* Rates of one version are few; a scan keeps the map's key format private to catalog.c. */
    for (i = 0; i < cat->rates.len; i++) {
        rt = BL_AT(cat->rates, bl_rate, i);
        if (rt->version == vi && rt->meter == meter && strcmp(rt->model, model) == 0 &&
            strcmp(rt->region, region) == 0)
            return i;
    }
    return BL_NONE;
}

static size_t find_sub(const billing_catalog *cat, size_t ai, const char *id)
{
    size_t i;
    const bl_sub *s;

    for (i = 0; i < cat->subs.len; i++) {
        s = BL_AT(cat->subs, bl_sub, i);
        if (s->account == ai && strcmp(s->id, id) == 0)
            return i;
    }
    return BL_NONE;
}

/* Parse "N" or "N/D" (non-negative, D > 0) in unit-nanoseconds into nano-units. */
static int parse_sum(const char *text, mpq_t out)
{
    size_t len = strlen(text);
    size_t i;
    mpz_t scale;

    if (len == 0 || len > AGG_SUM_TEXT_MAX)
        return -1;
    for (i = 0; i < len; i++) {
        if ((text[i] < '0' || text[i] > '9') && text[i] != '/')
            return -1;
    }
    if (text[0] == '/' || text[len - 1] == '/' || strchr(text, '/') != strrchr(text, '/'))
        return -1;
    if (mpq_set_str(out, text, 10) != 0 || mpz_sgn(mpq_denref(out)) == 0)
        return -1;
    mpq_canonicalize(out);
    mpz_init(scale);
    nano_scale(scale);
    mpz_mul(mpq_numref(out), mpq_numref(out), scale);
    mpq_canonicalize(out);
    mpz_clear(scale);
    return 0;
}

/* Resolve the key of an aggregate to add; BILLING_OK or an error with a message. */
static billing_status resolve_key(billing_rater *r, const char *account, int year, int month,
                                  billing_meter meter, const char *price_version, const char *model,
                                  const char *region, const char *subscription, unsigned epoch,
                                  bl_aggkey *key, char *errbuf, size_t errsize)
{
    const billing_catalog *cat = r->cat;
    size_t ai = bl_catalog_account(cat, account);
    size_t rate;
    size_t sub;

    if (ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_UNKNOWN_ACCOUNT,
                         "aggregate: account '%s' is not a known account", account);
    if (year < 1900 || year > 2200 || month < 1 || month > 12 || billing_meter_name(meter) == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         "aggregate of '%s': month %d-%d or meter out of range", account, year,
                         month);
    if (epoch > BL_AT(cat->accounts, bl_account, ai)->n_epochs)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         "aggregate of '%s': credit epoch %u beyond the catalog's grants", account,
                         epoch);
    memset(key, 0, sizeof(*key));
    key->account = (uint32_t)ai;
    key->month = bl_month_index(year, month);
    key->meter = (uint32_t)meter;
    key->epoch = epoch;
    key->rate = meter == BILLING_METER_TRAFFIC ? BL_RATE_ZERO : BL_RATE_NONE;
    key->sub = BL_SUB_NONE;
    key->attrs = BL_ATTRS_NONE;
    if (price_version != NULL) {
        rate = find_rate(cat, price_version, meter, model ? model : "", region ? region : "");
        if (rate == BL_NONE)
            return bl_seterr(errbuf, errsize, BILLING_ERR_NO_PRICE,
                             "aggregate of '%s': no %s rate (%s, %s) in price version '%s'",
                             account, billing_meter_name(meter), model ? model : "",
                             region ? region : "", price_version);
        key->rate = (uint32_t)rate;
        return BILLING_OK;
    }
    if (subscription != NULL) {
        sub = find_sub(cat, ai, subscription);
        if (sub == BL_NONE)
            return bl_seterr(errbuf, errsize, BILLING_ERR_NOT_FOUND,
                             "aggregate of '%s': no subscription '%s' of that account", account,
                             subscription);
        key->rate = BL_RATE_NONE;
        key->sub = (uint32_t)sub;
        if (model == NULL)
            model = "";
        if (region == NULL)
            region = "";
        if (strlen(model) > BL_ATTR_MAX || strlen(region) > BL_ATTR_MAX)
            return bl_seterr(errbuf, errsize, BILLING_ERR_TOO_LARGE,
                             "aggregate of '%s': model or region longer than %d bytes", account,
                             BL_ATTR_MAX);
        return bl_rater_attrs_intern(r, model, strlen(model), region, strlen(region),
                                     "aggregate of", account, &key->attrs, errbuf, errsize);
    }
    if (meter != BILLING_METER_TRAFFIC)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "aggregate of '%s': only traffic may be zero-rated", account);
    return BILLING_OK;
}

billing_status billing_rater_add_aggregate(billing_rater *r, const char *account, int year,
                                           int month, billing_meter meter,
                                           const char *price_version, const char *model,
                                           const char *region, const char *subscription,
                                           unsigned epoch, uint64_t pieces, const char *sum,
                                           char *errbuf, size_t errsize)
{
    bl_aggkey key;
    bl_agg *a;
    mpq_t q;
    billing_status st;

    if (r == NULL || account == NULL || sum == NULL || pieces == 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "aggregate: rater, account and sum needed, pieces >= 1");
    if (r->dedupe)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE,
                         "aggregate of '%s': adding aggregates needs the rater's dedupe off",
                         account);
    st = resolve_key(r, account, year, month, meter, price_version, model, region, subscription,
                     epoch, &key, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    mpq_init(q);
    if (parse_sum(sum, q) != 0) {
        mpq_clear(q);
        return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                         "aggregate of '%s': sum '%.40s' is not N or N/D", account, sum);
    }
    if (bl_rater_reserve_aggs(r, key.account, 1) != 0) {
        mpq_clear(q);
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "aggregate: out of memory");
    }
    a = bl_rater_agg_get(r, &key);
    a->pieces += pieces;
    bl_rater_agg_add_q(a, q);
    mpq_clear(q);
    r->gen++;
    return BILLING_OK;
}

/* The index in @dst of the (model, region) pair of @src's aggregate @from (the rest of the key is
 * the catalog's, shared by both). */
static billing_status merge_attrs(billing_rater *dst, const billing_rater *src, const bl_agg *from,
                                  uint32_t *out, char *errbuf, size_t errsize)
{
    const bl_attrs *a;

    if (from->key.attrs == BL_ATTRS_NONE) {
        *out = BL_ATTRS_NONE;
        return BILLING_OK;
    }
    a = BL_AT(src->attrs, bl_attrs, from->key.attrs);
    return bl_rater_attrs_intern(
        dst, a->model, strlen(a->model), a->region, strlen(a->region), "aggregate of",
        BL_AT(src->cat->accounts, bl_account, from->key.account)->id, out, errbuf, errsize);
}

billing_status billing_rater_merge(billing_rater *dst, const billing_rater *src, char *errbuf,
                                   size_t errsize)
{
    const bl_agg *from;
    bl_aggkey key;
    bl_agg *to;
    billing_status st;
    size_t i;

    if (dst == NULL || src == NULL || dst->cat != src->cat)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "merge: two raters of the same catalog needed");
    if (dst->dedupe || src->dedupe)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE, "merge: needs the dedupe off");
    /* In @src's arrival order: @dst's order then depends on the order of merges only. */
    for (i = 0; i < src->n_aggs; i++) {
        from = &src->aggs[i];
        if (from->pieces == 0)
            continue;
        key = from->key;
        st = merge_attrs(dst, src, from, &key.attrs, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
        if (bl_rater_reserve_aggs(dst, key.account, 1) != 0)
            return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "merge: out of memory");
        to = bl_rater_agg_get(dst, &key);
        to->pieces += from->pieces;
        bl_agg_add_i128(to, from->sum);
        if (from->has_extra)
            bl_rater_agg_add_q(to, from->extra);
    }
    dst->events += src->events;
    dst->gen++;
    return BILLING_OK;
}
