/*
 * freeze.c - turning a catalog that was built in any order into the
 * indexed, validated form that rating reads: versions by start, plan fees
 * per version, a fee for every subscription term, grants in application
 * order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "zone.h"

/* qsort has no context argument; these comparators get it through arrays of pairs. */
typedef struct bl_sortkey {
    const billing_catalog *cat;
    size_t index;
} bl_sortkey;

static int cmp_version(const void *a, const void *b)
{
    const bl_sortkey *x = a;
    const bl_sortkey *y = b;
    billing_time_t fx = BL_AT(x->cat->versions, bl_version, x->index)->from;
    billing_time_t fy = BL_AT(y->cat->versions, bl_version, y->index)->from;

    return (fx > fy) - (fx < fy);
}

static int cmp_account(const void *a, const void *b)
{
    const bl_sortkey *x = a;
    const bl_sortkey *y = b;

    return strcmp(BL_AT(x->cat->accounts, bl_account, x->index)->id,
                  BL_AT(y->cat->accounts, bl_account, y->index)->id);
}

/* Application order of credit: priority, earliest expiry, earliest grant, id. */
static int cmp_grant(const void *a, const void *b)
{
    const bl_sortkey *x = a;
    const bl_sortkey *y = b;
    const bl_grant *g = BL_AT(x->cat->grants, bl_grant, x->index);
    const bl_grant *h = BL_AT(y->cat->grants, bl_grant, y->index);

    if (g->priority != h->priority)
        return g->priority < h->priority ? -1 : 1;
    if (g->expires_at != h->expires_at)
        return g->expires_at < h->expires_at ? -1 : 1;
    if (g->granted_at != h->granted_at)
        return g->granted_at < h->granted_at ? -1 : 1;
    return strcmp(g->id, h->id);
}

static int cmp_sub(const void *a, const void *b)
{
    const bl_sortkey *x = a;
    const bl_sortkey *y = b;
    const bl_sub *s = BL_AT(x->cat->subs, bl_sub, x->index);
    const bl_sub *t = BL_AT(y->cat->subs, bl_sub, y->index);
    int c = strcmp(s->resource, t->resource);

    if (c != 0)
        return c;
    return (s->start > t->start) - (s->start < t->start);
}

static int cmp_time(const void *a, const void *b)
{
    billing_time_t x = *(const billing_time_t *)a;
    billing_time_t y = *(const billing_time_t *)b;

    return (x > y) - (x < y);
}

/* Sort @n catalog indices with @cmp; writes them into @out. */
static int sort_indices(const billing_catalog *cat, const size_t *in, size_t n, size_t *out,
                        int (*cmp)(const void *, const void *))
{
    bl_sortkey *keys = malloc((n ? n : 1) * sizeof(*keys));
    size_t i;

    if (keys == NULL)
        return -1;
    for (i = 0; i < n; i++) {
        keys[i].cat = cat;
        keys[i].index = in ? in[i] : i;
    }
    qsort(keys, n, sizeof(*keys), cmp);
    for (i = 0; i < n; i++)
        out[i] = keys[i].index;
    free(keys);
    return 0;
}

static billing_status freeze_versions(billing_catalog *cat)
{
    size_t n = cat->versions.len;
    size_t i;
    size_t p;
    bl_version *v;
    bl_fee *f;

    cat->vorder = malloc((n ? n : 1) * sizeof(size_t));
    cat->vfrom = malloc((n ? n : 1) * sizeof(billing_time_t));
    if (cat->vorder == NULL || cat->vfrom == NULL)
        return BILLING_ERR_NOMEM;
    if (sort_indices(cat, NULL, n, cat->vorder, cmp_version) != 0)
        return BILLING_ERR_NOMEM;
    for (i = 0; i < n; i++)
        cat->vfrom[i] = BL_AT(cat->versions, bl_version, cat->vorder[i])->from;
    for (i = 0; i < n; i++) {
        v = BL_AT(cat->versions, bl_version, i);
        v->plan_fee = malloc((cat->plans.len ? cat->plans.len : 1) * sizeof(size_t));
        if (v->plan_fee == NULL)
            return BILLING_ERR_NOMEM;
        for (p = 0; p < cat->plans.len; p++)
            v->plan_fee[p] = BL_NONE;
    }
    for (i = 0; i < cat->fees.len; i++) {
        f = BL_AT(cat->fees, bl_fee, i);
        BL_AT(cat->versions, bl_version, f->version)->plan_fee[f->plan] = i;
    }
    return BILLING_OK;
}

/*
 * Refuse two subscriptions of one resource of @a (sorted by resource and
 * start) whose terms overlap. One cancelled at or before its start has no
 * term and overlaps nothing, so that a customer may cancel a subscription
 * bought for later and buy another.
 */
static billing_status check_overlaps(const billing_catalog *cat, const bl_account *a, char *errbuf,
                                     size_t errsize)
{
    const bl_sub *prev = NULL;
    const bl_sub *cur;
    size_t j;

    for (j = 0; j < a->n_subs; j++) {
        cur = BL_AT(cat->subs, bl_sub, a->subs[j]);
        if (cur->end == cur->start)
            continue;
        if (prev != NULL && strcmp(prev->resource, cur->resource) == 0 && prev->end > cur->start)
            return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                             "subscriptions '%s' and '%s' of resource '%s' (account '%s') overlap",
                             prev->id, cur->id, cur->resource, a->id);
        prev = cur;
    }
    return BILLING_OK;
}

/* Sort each account's subscriptions by (resource, start); refuse overlaps. */
static billing_status freeze_subs(billing_catalog *cat, char *errbuf, size_t errsize)
{
    size_t i;
    billing_status st;
    bl_account *a;

    for (i = 0; i < cat->subs.len; i++) {
        /* Terms were checked when added, fees against the versions known then. */
        st = bl_sub_check_fees(cat, BL_AT(cat->subs, bl_sub, i), 1, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
    }
    for (i = 0; i < cat->accounts.len; i++) {
        a = BL_AT(cat->accounts, bl_account, i);
        if (sort_indices(cat, a->subs, a->n_subs, a->subs, cmp_sub) != 0)
            return BILLING_ERR_NOMEM;
        /* Refused when added already; checked again as the invariant rating relies on. */
        st = check_overlaps(cat, a, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
    }
    return BILLING_OK;
}

/*
 * Give each account its slice of the grant and epoch pools: two
 * allocations for the whole catalog instead of two per account.
 */
static billing_status slice_grants(billing_catalog *cat)
{
    size_t i;
    size_t at = 0;
    bl_account *a;

    cat->grant_pool = malloc((cat->grants.len ? cat->grants.len : 1) * sizeof(size_t));
    cat->epoch_pool = malloc((cat->grants.len ? 2 * cat->grants.len : 1) * sizeof(billing_time_t));
    if (cat->grant_pool == NULL || cat->epoch_pool == NULL)
        return BILLING_ERR_NOMEM;
    for (i = 0; i < cat->grants.len; i++)
        BL_AT(cat->accounts, bl_account, BL_AT(cat->grants, bl_grant, i)->account)->n_grants++;
    for (i = 0; i < cat->accounts.len; i++) {
        a = BL_AT(cat->accounts, bl_account, i);
        a->grants = cat->grant_pool + at;
        a->epochs = cat->epoch_pool + 2 * at;
        at += a->n_grants;
        a->n_grants = 0;
    }
    return BILLING_OK;
}

/* Order each account's grants and collect its credit epochs. */
static billing_status freeze_grants(billing_catalog *cat)
{
    size_t i;
    size_t j;
    size_t n;
    bl_account *a;
    const bl_grant *g;

    if (slice_grants(cat) != BILLING_OK)
        return BILLING_ERR_NOMEM;
    for (i = 0; i < cat->grants.len; i++) {
        a = BL_AT(cat->accounts, bl_account, BL_AT(cat->grants, bl_grant, i)->account);
        a->grants[a->n_grants++] = i;
    }
    for (i = 0; i < cat->accounts.len; i++) {
        a = BL_AT(cat->accounts, bl_account, i);
        /* One grant (the usual trial) is in order already: no sort, no allocation. */
        if (a->n_grants > 1 && sort_indices(cat, a->grants, a->n_grants, a->grants, cmp_grant) != 0)
            return BILLING_ERR_NOMEM;
        for (j = 0; j < a->n_grants; j++) {
            g = BL_AT(cat->grants, bl_grant, a->grants[j]);
            a->epochs[2 * j] = g->granted_at;
            a->epochs[2 * j + 1] = g->expires_at;
        }
        qsort(a->epochs, 2 * a->n_grants, sizeof(billing_time_t), cmp_time);
        n = 0;
        for (j = 0; j < 2 * a->n_grants; j++) {
            if (n == 0 || a->epochs[n - 1] != a->epochs[j])
                a->epochs[n++] = a->epochs[j];
        }
        a->n_epochs = n;
    }
    return BILLING_OK;
}

/* Drop what a failed freeze built, so that a later freeze starts clean. */
static void reset_index(billing_catalog *cat)
{
    size_t i;
    bl_account *a;

    free(cat->vorder);
    free(cat->vfrom);
    free(cat->aorder);
    cat->vorder = NULL;
    cat->vfrom = NULL;
    cat->aorder = NULL;
    for (i = 0; i < cat->versions.len; i++) {
        free(BL_AT(cat->versions, bl_version, i)->plan_fee);
        BL_AT(cat->versions, bl_version, i)->plan_fee = NULL;
    }
    free(cat->grant_pool);
    free(cat->epoch_pool);
    cat->grant_pool = NULL;
    cat->epoch_pool = NULL;
    for (i = 0; i < cat->accounts.len; i++) {
        a = BL_AT(cat->accounts, bl_account, i);
        a->grants = NULL;
        a->epochs = NULL;
        a->n_grants = 0;
        a->n_epochs = 0;
    }
}

billing_status bl_catalog_freeze(billing_catalog *cat, char *errbuf, size_t errsize)
{
    billing_status st;

    if (cat->frozen)
        return BILLING_OK;
    reset_index(cat);
    if (cat->digits < 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_STATE, "catalog has no currency");
    st = freeze_versions(cat);
    if (st == BILLING_OK) {
        cat->aorder = malloc((cat->accounts.len ? cat->accounts.len : 1) * sizeof(size_t));
        if (cat->aorder == NULL ||
            sort_indices(cat, NULL, cat->accounts.len, cat->aorder, cmp_account) != 0)
            st = BILLING_ERR_NOMEM;
    }
    if (st == BILLING_OK)
        st = freeze_grants(cat);
    if (st == BILLING_OK)
        st = freeze_subs(cat, errbuf, errsize);
    if (st == BILLING_ERR_NOMEM)
        bl_seterr(errbuf, errsize, st, "out of memory while indexing the catalog");
    if (st != BILLING_OK)
        return st;
    cat->frozen = 1;
    return BILLING_OK;
}
