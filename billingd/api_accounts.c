/*
 * api_accounts.c - GET /v1/accounts (api_accounts.h); the SQL is
 * store/apiread.c's bs_api_accounts.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_accounts.h"
#include "apiread.h"

/* Accounts listed when no limit is given. */
#define DEFAULT_LIMIT 50

/* A bs_api_row_fn: the row as an object of strings (null for NULL) appended to the array @arg. */
static int row_object(void *arg, const bs_api_row *row)
{
    json_t *o = json_object();
    int i;

    if (o == NULL)
        return 1;
    for (i = 0; i < row->n; i++) {
        json_t *v = row->values[i] != NULL ? json_string(row->values[i]) : json_null();

        if (v == NULL || json_object_set_new(o, row->names[i], v) != 0) {
            json_decref(o);
            return 1;
        }
    }
    return json_array_append_new(arg, o) != 0;
}

unsigned bd_api_accounts(bs_conn *c, struct MHD_Connection *conn, const char *bound, json_t **body,
                         char *msg, size_t msgsize, bs_error *err)
{
    const char *query = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "q");
    const char *lim = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit");
    long limit = DEFAULT_LIMIT;
    json_t *arr;
    char *end;

    *body = NULL;
    if (lim != NULL) {
        errno = 0;
        limit = strtol(lim, &end, 10);
        if (errno != 0 || end == lim || *end != '\0' || limit < 1 || limit > BS_API_ACCOUNTS_MAX) {
            snprintf(msg, msgsize, "limit: need a number in 1..%d", BS_API_ACCOUNTS_MAX);
            return 400;
        }
    }
    if (query != NULL && strlen(query) > BS_API_QUERY_MAX) {
        snprintf(msg, msgsize, "q: at most %d bytes", BS_API_QUERY_MAX);
        return 400;
    }
    arr = json_array();
    if (arr == NULL) {
        bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (bs_api_accounts(c, query, bound, (int)limit, row_object, arr, err) != BS_OK) {
        json_decref(arr);
        return 0;
    }
    *body = json_pack("{s:o}", "data", arr);
    if (*body == NULL) {
        bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        return 0;
    }
    return 200;
}
