/*
 * rowtext.h - typed results out of libpq's: the text cells of a result row
 * copied into the `const char *` fields of a caller's struct, each field
 * found by its column's name (the SQL's alias), never by its position, so
 * that a struct and its SQL cannot drift apart silently. Store-internal.
 */
#ifndef BILLING_STORE_ROWTEXT_H
#define BILLING_STORE_ROWTEXT_H

#include <libpq-fe.h>
#include <stddef.h>

#include "store.h"

/* One field: the column name and the offset of a `const char *` in the struct. */
typedef struct bs_rowtext_field {
    const char *column;
    size_t offset;
} bs_rowtext_field;

#define BS_ROWTEXT(type, field)       \
    {                                 \
#field, offsetof(type, field) \
    }

/*
 * bs_rowtext_check - 0 when every field of @map names a column of @res,
 * else -1 (a programming error: the SQL lost an alias).
 */
int bs_rowtext_check(const PGresult *res, const bs_rowtext_field *map, size_t n);

/* bs_rowtext_size - bytes the @n fields of row @row take as NUL-terminated text. */
size_t bs_rowtext_size(const PGresult *res, int row, const bs_rowtext_field *map, size_t n);

/*
 * bs_rowtext_fill - copy the fields of row @row into the struct at @dst,
 * their text at @arena (bs_rowtext_size bytes free, NULL cells as "").
 * Returns the arena position past the copied text.
 */
char *bs_rowtext_fill(const PGresult *res, int row, const bs_rowtext_field *map, size_t n,
                      void *dst, char *arena);

/*
 * bs_rowtext_query - run @sql with its @nparams text parameters and hand
 * its rows back as an array of structs of @size bytes, each filled through
 * @map (@n fields), in one allocation: *@out (the caller frees it with
 * free(); NULL when there are no rows is not guaranteed: free it anyway),
 * *@rows rows. @what names the read in the errors. Returns BS_OK, or an
 * error with *@out NULL and *@rows 0.
 */
bs_status bs_rowtext_query(bs_conn *c, const char *sql, int nparams, const char *const *params,
                           const bs_rowtext_field *map, size_t n, size_t size, const char *what,
                           void **out, size_t *rows, bs_error *err);

#endif /* BILLING_STORE_ROWTEXT_H */
