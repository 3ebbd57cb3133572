/*
 * copy.h - bulk rows into PostgreSQL with COPY FROM STDIN, in the
 * binary format (default: no text parsing on the server, exact NUMERIC
 * encoding) or the text format (for comparison, doc/performance.md).
 *
 *   bs_copy *cp = bs_copy_begin(c, "COPY t (a, b) FROM STDIN (FORMAT binary)",
 *                               2, BS_COPY_BINARY, &err);
 *   for (...) {
 *       bs_copy_row(cp);
 *       bs_copy_text(cp, id);
 *       bs_copy_numeric(cp, "12.50");
 *   }
 *   st = bs_copy_end(cp, &rows, &err);   -- frees cp
 *
 * Field writers never fail visibly: the first bad value (malformed
 * decimal, wrong field count, oversized field) is remembered, later calls
 * do nothing, and bs_copy_end aborts the COPY and reports it. Rows are
 * buffered (BS_COPY_BUFFER bytes) and streamed; memory does not grow with
 * the row count.
 *
 * Not thread-safe; the connection is busy until bs_copy_end/abort.
 */
#ifndef BILLING_STORE_COPY_H
#define BILLING_STORE_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"
#include "store.h"

typedef enum bs_copy_format {
    BS_COPY_BINARY = 0, /* PGCOPY binary: the statement must say (FORMAT binary) */
    BS_COPY_TEXT = 1    /* tab-separated text: the statement must say (FORMAT text) */
} bs_copy_format;

/* Output buffer size: data is handed to libpq each time it fills. */
#define BS_COPY_BUFFER (256u * 1024u)
/* Largest single field accepted (a text value or a bytea). */
#define BS_COPY_FIELD_MAX (1024u * 1024u)
/* Longest decimal accepted by bs_copy_numeric (sign, digits and point). */
#define BS_DECIMAL_MAX 1000

typedef struct bs_copy bs_copy;

/*
 * bs_copy_begin - start the COPY @sql (a constant "COPY table (cols) FROM
 * STDIN (FORMAT binary|text)") whose rows have @ncols fields (1..1600).
 * Returns a writer (end it with bs_copy_end or bs_copy_abort) or NULL with
 * @err filled.
 */
bs_copy *bs_copy_begin(bs_conn *c, const char *sql, int ncols, bs_copy_format format,
                       bs_error *err);

/* bs_copy_row - start the next row; the previous one must have had exactly ncols fields. */
void bs_copy_row(bs_copy *cp);

/* Field writers, in column order. */
void bs_copy_null(bs_copy *cp);
/* bs_copy_text - a text value (NULL pointer: SQL NULL); at most BS_COPY_FIELD_MAX bytes. */
void bs_copy_text(bs_copy *cp, const char *s);
void bs_copy_int2(bs_copy *cp, int16_t v);
void bs_copy_int4(bs_copy *cp, int32_t v);
void bs_copy_int8(bs_copy *cp, int64_t v);
void bs_copy_bool(bs_copy *cp, int v);
/* bs_copy_bytea - @len raw bytes. */
void bs_copy_bytea(bs_copy *cp, const void *data, size_t len);
/*
 * bs_copy_numeric - an exact decimal "[+-]digits[.digits]" (no exponent,
 * at most BS_DECIMAL_MAX characters), keeping its scale ("1.50" stays
 * 1.50). NULL pointer: SQL NULL.
 */
void bs_copy_numeric(bs_copy *cp, const char *decimal);
/*
 * bs_copy_timestamptz - instant @t truncated toward the past to the
 * microsecond (timestamptz's resolution); bs_time_nanos gives the lost
 * nanoseconds for a separate column.
 */
void bs_copy_timestamptz(bs_copy *cp, billing_time_t t);

/*
 * bs_copy_end - finish: check the last row, send the trailer, wait for the
 * server's verdict. Stores the number of rows in *@rows (may be NULL).
 * Frees @cp. Returns BS_OK or the first error (a field error aborts the
 * COPY, so nothing of it is kept).
 */
bs_status bs_copy_end(bs_copy *cp, uint64_t *rows, bs_error *err);

/* bs_copy_abort - abandon the COPY (the server discards it) and free @cp; NULL is a no-op. */
void bs_copy_abort(bs_copy *cp);

/*
 * bs_time_micros / bs_time_nanos - split instant @t into whole
 * microseconds since the Unix epoch (rounded toward the past) and the
 * remaining 0..999 nanoseconds: t = micros * 1000 + nanos.
 */
int64_t bs_time_micros(billing_time_t t);
int bs_time_nanos(billing_time_t t);

/*
 * bs_numeric_encode - the binary (numeric_recv) form of @decimal into
 * @out (@size bytes). Returns the length, or -1 if @decimal is malformed
 * or @out too small. Exposed for tests.
 */
long bs_numeric_encode(const char *decimal, unsigned char *out, size_t size);

#endif /* BILLING_STORE_COPY_H */
