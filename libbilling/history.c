/*
 * history.c - months whose invoices were issued, taken as issued when
 * invoices replay credit (billing_rater_credit_issued, billing.h; the replay is invoice.c's),
 * and the per-account credit memo that holds them with the replay's state.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "invoice.h"

/* Issued months per account at most: a close gives its finalized months (decades of them fit). */
#define ISSUED_MONTHS_MAX 1200

static void month_free(bl_issued_month *im, size_t n_grants)
{
    size_t g;

    if (im->taken == NULL)
        return;
    for (g = 0; g < n_grants; g++)
        mpz_clear(im->taken[g]);
    free(im->taken);
    mpz_clear(im->balance);
    im->taken = NULL;
}

static void months_free(bl_issued_month *months, size_t n, size_t n_grants)
{
    size_t i;

    for (i = 0; i < n; i++)
        month_free(&months[i], n_grants);
    free(months);
}

void bl_issued_free(bl_credit_memo *memo)
{
    months_free(memo->issued, memo->n_issued, memo->c_grants);
    memo->issued = NULL;
    memo->n_issued = 0;
}

/*
 * Free the rater's memos (billing_rater_destroy, through r->credit_memo_free):
 * those of the accounts it holds, the others have none.
 */
static void credit_memo_free(billing_rater *r)
{
    size_t i;
    bl_credit_memo *m;

    for (i = 0; i < r->n_accts; i++) {
        m = r->accts[i].credit_memo;
        if (m == NULL)
            continue;
        if (m->valid)
            bl_credit_clear(&m->c);
        if (m->live_valid)
            bl_credit_clear(&m->live);
        bl_issued_free(m);
        free(m);
        r->accts[i].credit_memo = NULL;
    }
}

bl_credit_memo *bl_credit_memo_of(billing_rater *r, size_t ai)
{
    bl_acct *x = bl_rater_acct(r, ai);

    if (x == NULL)
        return NULL;
    if (x->credit_memo == NULL) {
        x->credit_memo = calloc(1, sizeof(bl_credit_memo));
        /* The rater frees the memos through this pointer: it lies below this file. */
        r->credit_memo_free = credit_memo_free;
    }
    return x->credit_memo;
}

int bl_live_get(billing_rater *r, size_t ai, int32_t month, bl_credit *c)
{
    const bl_acct *x = bl_rater_acct_find(r, ai);
    const bl_credit_memo *memo = x != NULL ? x->credit_memo : NULL;

    if (memo == NULL || !memo->live_valid || memo->live_gen != r->gen || memo->live_month != month)
        return 0;
    return bl_credit_copy(c, &memo->live) == 0 ? 1 : -1;
}

void bl_live_put(billing_rater *r, size_t ai, int32_t month, const bl_credit *c)
{
    bl_credit_memo *memo = bl_credit_memo_of(r, ai);

    if (memo == NULL)
        return;
    if (!memo->live_valid) {
        if (bl_credit_init(&memo->live, r->cat, ai) != 0)
            return;
        memo->live_valid = 1;
    }
    if (bl_credit_copy(&memo->live, c) != 0) {
        bl_credit_clear(&memo->live);
        memo->live_valid = 0;
        return;
    }
    memo->live_month = month;
    memo->live_gen = r->gen;
}

size_t bl_issued_from(const bl_credit_memo *memo, int32_t month)
{
    size_t k = 0;

    while (memo != NULL && k < memo->n_issued && memo->issued[k].month < month)
        k++;
    return k;
}

int bl_issued_at(const bl_credit_memo *memo, size_t k, int32_t month)
{
    return memo != NULL && k < memo->n_issued && memo->issued[k].month == month;
}

void bl_issued_take(const bl_issued_month *im, bl_credit *c, mpz_t *before)
{
    size_t g;

    for (g = 0; g < c->n; g++) {
        mpz_sub(c->remaining[g], before != NULL ? before[g] : c->remaining[g], im->taken[g]);
        if (mpz_sgn(c->remaining[g]) < 0)
            mpz_set_ui(c->remaining[g], 0);
    }
    if (im->has_balance)
        mpz_set(c->balance, im->balance);
}

size_t bl_issued_until(const bl_credit_memo *memo, size_t k, int32_t month, bl_credit *c)
{
    while (memo != NULL && k < memo->n_issued && memo->issued[k].month < month)
        bl_issued_take(&memo->issued[k++], c, NULL);
    return k;
}

void bl_issued_later(const bl_credit_memo *memo, int32_t month, bl_credit *c)
{
    size_t k;
    size_t g;

    for (k = bl_issued_from(memo, month); memo != NULL && k < memo->n_issued; k++) {
        if (memo->issued[k].month == month)
            continue;
        for (g = 0; g < c->n; g++) {
            mpz_sub(c->remaining[g], c->remaining[g], memo->issued[k].taken[g]);
            if (mpz_sgn(c->remaining[g]) < 0)
                mpz_set_ui(c->remaining[g], 0);
        }
    }
}

mpz_t *bl_issued_snapshot_new(const bl_credit *c)
{
    mpz_t *snap = malloc((c->n ? c->n : 1) * sizeof(mpz_t));
    size_t g;

    for (g = 0; snap != NULL && g < c->n; g++)
        mpz_init(snap[g]);
    return snap;
}

void bl_issued_snapshot(mpz_t *snap, const bl_credit *c)
{
    size_t g;

    for (g = 0; g < c->n; g++)
        mpz_set(snap[g], c->remaining[g]);
}

void bl_issued_snapshot_free(mpz_t *snap, const bl_credit *c)
{
    size_t g;

    if (snap == NULL)
        return;
    for (g = 0; g < c->n; g++)
        mpz_clear(snap[g]);
    free(snap);
}

/* ---------------------------------------------------------------------- */
/* Giving the issued months                                                */
/* ---------------------------------------------------------------------- */

/* @text as a whole number of minor units (a sign allowed when @signed_ok) into @out. */
static int minor_parse(mpz_t out, const char *text, int signed_ok)
{
    size_t len = text != NULL ? strlen(text) : 0;
    size_t sign = signed_ok && len > 1 && text[0] == '-';

    if (len == 0 || len > 64 || strspn(text + sign, "0123456789") != len - sign)
        return -1;
    return mpz_set_str(out, text, 10);
}

/* The month of @months with index @month, added (zeroed) if missing; NULL when out of memory. */
static bl_issued_month *month_get(bl_issued_month **months, size_t *n, size_t n_grants,
                                  int32_t month)
{
    bl_issued_month *im;
    size_t i;
    size_t g;

    for (i = 0; i < *n; i++) {
        if ((*months)[i].month == month)
            return &(*months)[i];
    }
    if (*n == ISSUED_MONTHS_MAX)
        return NULL;
    im = realloc(*months, (*n + 1) * sizeof(*im));
    if (im == NULL)
        return NULL;
    *months = im;
    im = &im[*n];
    memset(im, 0, sizeof(*im));
    im->month = month;
    im->taken = malloc((n_grants ? n_grants : 1) * sizeof(mpz_t));
    if (im->taken == NULL)
        return NULL;
    for (g = 0; g < n_grants; g++)
        mpz_init(im->taken[g]);
    mpz_init(im->balance);
    (*n)++;
    return im;
}

/* Index of grant @id among account @a's, or a->n_grants. */
static size_t grant_index(const billing_catalog *cat, const bl_account *a, const char *id)
{
    size_t g;

    for (g = 0; g < a->n_grants; g++) {
        if (strcmp(BL_AT(cat->grants, bl_grant, a->grants[g])->id, id) == 0)
            break;
    }
    return g;
}

static int month_cmp(const void *x, const void *y)
{
    const bl_issued_month *a = x;
    const bl_issued_month *b = y;

    return (a->month > b->month) - (a->month < b->month);
}

/* @rows into a new sorted array *@out of *@n months. */
static billing_status rows_read(const billing_catalog *cat, const bl_account *a, size_t n_rows,
                                const billing_issued_row *rows, bl_issued_month **out, size_t *n,
                                char *errbuf, size_t errsize)
{
    const billing_issued_row *row;
    bl_issued_month *im;
    size_t g;
    size_t i;

    for (i = 0; i < n_rows; i++) {
        row = &rows[i];
        if (row->year < 1900 || row->year > 2199 || row->month < 1 || row->month > 12)
            return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE, "month %04d-%02d out of range",
                             row->year, row->month);
        g = row->grant != NULL ? grant_index(cat, a, row->grant) : 0;
        if (row->grant != NULL && g == a->n_grants)
            return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                             "grant '%.140s' is not a grant of the account", row->grant);
        im = month_get(out, n, a->n_grants, bl_month_index(row->year, row->month));
        if (im == NULL)
            return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
        if (minor_parse(row->grant != NULL ? im->taken[g] : im->balance, row->amount,
                        row->grant != NULL) != 0)
            return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                             "%04d-%02d: '%.64s' is not a number of minor units", row->year,
                             row->month, row->amount != NULL ? row->amount : "(null)");
        if (row->grant == NULL)
            im->has_balance = 1;
    }
    if (*n > 1) /* no rows: *out is NULL, which qsort must not be given */
        qsort(*out, *n, sizeof(**out), month_cmp);
    return BILLING_OK;
}

billing_status billing_rater_credit_issued(billing_rater *r, const char *account, size_t n,
                                           const billing_issued_row *rows, char *errbuf,
                                           size_t errsize)
{
    size_t ai;
    const bl_account *a;
    bl_credit_memo *memo;
    bl_issued_month *months = NULL;
    size_t n_months = 0;
    billing_status st;

    if (r == NULL || (rows == NULL && n > 0))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "rater or rows are NULL");
    ai = account ? bl_catalog_account(r->cat, account) : BL_NONE;
    if (ai == BL_NONE)
        return bl_seterr(errbuf, errsize, BILLING_ERR_UNKNOWN_ACCOUNT, "account '%.140s' not found",
                         account ? account : "(null)");
    a = BL_AT(r->cat->accounts, bl_account, ai);
    memo = bl_credit_memo_of(r, ai);
    if (memo == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    st = rows_read(r->cat, a, n, rows, &months, &n_months, errbuf, errsize);
    if (st != BILLING_OK) {
        months_free(months, n_months, a->n_grants);
        return st;
    }
    bl_issued_free(memo);
    memo->issued = months;
    memo->n_issued = n_months;
    memo->c_grants = a->n_grants;
    /* A memo replayed without these months is stale. */
    if (memo->valid) {
        bl_credit_clear(&memo->c);
        memo->valid = 0;
    }
    if (memo->live_valid) {
        bl_credit_clear(&memo->live);
        memo->live_valid = 0;
    }
    return BILLING_OK;
}
