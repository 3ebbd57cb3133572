/*
 * rowtext.c - text cells of a libpq row into a struct's fields, by column
 * name. See rowtext.h.
 */
#include "config.h"

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
