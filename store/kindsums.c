/*
 * kindsums.c - sums of invoice lines by kind (kindsums.h).
 */
#include "config.h"

#include <stdlib.h>

#include "kindsums.h"

bs_status bs_kind_sums(bs_conn *c, const char *sql, int nparams, const char *const *params,
                       bs_kind_sum_fn fn, void *arg, bs_error *err)
{
    PGresult *res = bs_query(c, sql, nparams, params, err);
    int r;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (r = 0; r < PQntuples(res); r++)
        fn(arg, PQgetvalue(res, r, 0), PQgetvalue(res, r, 1),
           strtoll(PQgetvalue(res, r, 2), NULL, 10));
    PQclear(res);
    return BS_OK;
}
