/*
 * rowtext.c - text cells of a libpq row into a struct's fields, by column
 * name. See rowtext.h.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rowtext.h"

int bs_rowtext_check(const PGresult *res, const bs_rowtext_field *map, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (PQfnumber(res, map[i].column) < 0)
            return -1;
    }
    return 0;
}

size_t bs_rowtext_size(const PGresult *res, int row, const bs_rowtext_field *map, size_t n)
{
    size_t size = 0;
    size_t i;

    for (i = 0; i < n; i++)
        size += (size_t)PQgetlength(res, row, PQfnumber(res, map[i].column)) + 1;
    return size;
}

char *bs_rowtext_fill(const PGresult *res, int row, const bs_rowtext_field *map, size_t n,
                      void *dst, char *arena)
{
    size_t i;

    for (i = 0; i < n; i++) {
        int col = PQfnumber(res, map[i].column);
        size_t len = (size_t)PQgetlength(res, row, col);
        memcpy(arena, PQgetvalue(res, row, col), len);
        arena[len] = '\0';
        memcpy((char *)dst + map[i].offset, &arena, sizeof(arena));
        arena += len + 1;
    }
    return arena;
}

bs_status bs_rowtext_query(bs_conn *c, const char *sql, int nparams, const char *const *params,
                           const bs_rowtext_field *map, size_t n, size_t size, const char *what,
                           void **out, size_t *rows, bs_error *err)
{
    PGresult *res;
    size_t text = 0;
    char *arena;
    char *base;
    int nrows;
    int r;

    *out = NULL;
    *rows = 0;
    res = bs_query(c, sql, nparams, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (bs_rowtext_check(res, map, n) != 0) {
        PQclear(res);
        return bs_error_set(err, BS_ERR_FATAL, "%s: a column is missing from the query", what);
    }
    nrows = PQntuples(res);
    for (r = 0; r < nrows; r++)
        text += bs_rowtext_size(res, r, map, n);
    base = malloc((size_t)nrows * size + text + 1);
    if (base == NULL) {
        PQclear(res);
        return bs_error_set(err, BS_ERR_NOMEM, "%s: out of memory", what);
    }
    arena = base + (size_t)nrows * size;
    for (r = 0; r < nrows; r++)
        arena = bs_rowtext_fill(res, r, map, n, base + (size_t)r * size, arena);
    PQclear(res);
    *out = base;
    *rows = (size_t)nrows;
    return BS_OK;
}
