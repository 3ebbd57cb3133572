/*
 * apiread.h - the catalog as billingd's HTTP API reads it (doc/http-api.md):
 * price books, plans, an account's credit grants and subscriptions, and
 * whether an account exists. Rows are handed over as named text cells
 * (NULL for SQL NULL), amounts as PostgreSQL prints NUMERIC: exact
 * decimal strings, never floating point. Instants are RFC 3339 UTC.
 */
#ifndef BILLING_STORE_APIREAD_H
#define BILLING_STORE_APIREAD_H

#include <stddef.h>

#include "store.h"

/* What bs_api_read lists. */
typedef enum bs_api_list {
    BS_API_PRICE_BOOKS = 0,   /* id, currency, rounding, versions (JSON array text) */
    BS_API_PLANS = 1,         /* id, period, model, region, refundable ("t"/"f"), fees (JSON) */
    BS_API_GRANTS = 2,        /* id, currency, amount, granted_at, expires_at, kinds, priority */
    BS_API_SUBSCRIPTIONS = 3, /* id, resource_id, plan_id, start_at, terms, cancelled_at */
    /*
     * Month-end closes, the latest BS_API_CLOSES_MAX months first: month
     * ("YYYY-MM"), last_close (the latest close mark written for it, RFC
     * 3339 UTC), accounts (with a close mark), drafts, finalized, void
     * (invoices of the month, credit notes excluded).
     */
    BS_API_CLOSES = 4
} bs_api_list;

/* Months BS_API_CLOSES lists at most. */
#define BS_API_CLOSES_MAX 24

/* One row: @n cells named @names, @values[i] NULL for SQL NULL; valid during the callback. */
typedef struct bs_api_row {
    int n;
    const char *const *names;
    const char *const *values;
} bs_api_row;

/* bs_api_row_fn - receives each row; non-zero stops. */
typedef int (*bs_api_row_fn)(void *arg, const bs_api_row *row);

/*
 * bs_api_read - the rows of @what, in id order; @account (required for
 * grants and subscriptions, ignored otherwise) selects the account's.
 * Returns BS_OK (also when @fn stopped), BS_ERR_INVALID without an
 * account where one is needed, or a database error.
 */
bs_status bs_api_read(bs_conn *c, bs_api_list what, const char *account, bs_api_row_fn fn,
                      void *arg, bs_error *err);

/* Most accounts bs_api_accounts lists. */
#define BS_API_ACCOUNTS_MAX 100
/* Longest search text of bs_api_accounts, in bytes. */
#define BS_API_QUERY_MAX 128

/*
 * bs_api_accounts - the accounts whose id or name contains @query (case
 * insensitive; "" or NULL: every account), in id order, at most @limit
 * (1..BS_API_ACCOUNTS_MAX); with @bound non-NULL only that account can
 * be listed. Rows: id, name (NULL when none), currency, time_zone,
 * status. Returns BS_OK, BS_ERR_INVALID for a bad limit or a query over
 * BS_API_QUERY_MAX bytes, or a database error.
 */
bs_status bs_api_accounts(bs_conn *c, const char *query, const char *bound, int limit,
                          bs_api_row_fn fn, void *arg, bs_error *err);

/* bs_account_exists - *@found 1 if account @id is stored, else 0. Returns BS_OK or an error. */
bs_status bs_account_exists(bs_conn *c, const char *id, int *found, bs_error *err);

#endif
