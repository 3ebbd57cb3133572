/*
 * api_accounts.h - GET /v1/accounts?q=TEXT&limit=N of billingd's HTTP API
 * (doc/http-api.md): the accounts whose id or name contains TEXT, for the
 * web console's search. A key bound to an account lists that account
 * alone (when it matches).
 */
#ifndef BILLINGD_API_ACCOUNTS_H
#define BILLINGD_API_ACCOUNTS_H

#include <jansson.h>
#include <microhttpd.h>
#include <stddef.h>

#include "store.h"

/*
 * bd_api_accounts - answer the request on @conn (its q and limit
 * arguments) with the store connection @c, for a key bound to @bound
 * (NULL: unbound). Returns 200 with *@body set to
 * {"data": [{"id", "name", "currency", "time_zone", "status"}...]}
 * (name null when none), 400 with the reason in @msg (a bad limit, q
 * over 128 bytes), or 0 for a database error in @err.
 */
unsigned bd_api_accounts(bs_conn *c, struct MHD_Connection *conn, const char *bound, json_t **body,
                         char *msg, size_t msgsize, bs_error *err);

#endif
