/*
 * copy.c - COPY FROM STDIN writer, binary and text formats.
 *
 * Binary format (PostgreSQL docs, "COPY", "Binary Format"): an 11-byte
 * signature, a 32-bit flags word and a 32-bit header-extension length;
 * then per row a 16-bit field count and, per field, a 32-bit length (-1
 * for NULL) and the type's binary ("send") representation, all integers
 * in network byte order; a 16-bit -1 ends the data.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"

#define MAX_COLUMNS 1600 /* PostgreSQL's own limit */

/* Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's timestamp epoch. */
#define PG_EPOCH_OFFSET_US INT64_C(946684800000000)

/* NUMERIC binary: base-10000 digits, sign words of numeric_recv. */
#define NBASE 10000
#define NUMERIC_POS 0x0000
#define NUMERIC_NEG 0x4000
#define NUMERIC_MAX_GROUPS (BS_DECIMAL_MAX / 4 + 2)

static const char copy_signature[11] = {'P',  'G',    'C',  'O',  'P', 'Y',
                                        '\n', '\377', '\r', '\n', '\0'};

struct bs_copy {
    bs_conn *conn;
    bs_copy_format format;
    int ncols;
    int field; /* fields written in the current row; -1 before the first row */
    uint64_t rows;
    bs_error err; /* first failure; status BS_OK while none */
    size_t len;
    unsigned char buf[BS_COPY_BUFFER];
};

/* ---------------------------------------------------------------------- */
/* Buffering                                                               */
/* ---------------------------------------------------------------------- */

static void fail(bs_copy *cp, bs_status st, const char *what)
{
    if (cp->err.status != BS_OK)
        return;
    bs_error_set(&cp->err, st, "COPY row %llu, field %d: %s", (unsigned long long)cp->rows,
                 cp->field + 1, what);
}

static void flush(bs_copy *cp)
{
    PGconn *pg = bs_pg(cp->conn);

    if (cp->len == 0 || cp->err.status != BS_OK)
        return;
    if (PQputCopyData(pg, (const char *)cp->buf, (int)cp->len) != 1)
        bs_error_set(&cp->err, BS_ERR_RETRY, "COPY: sending data: %s", PQerrorMessage(pg));
    cp->len = 0;
}

static void put(bs_copy *cp, const void *data, size_t len)
{
    if (cp->err.status != BS_OK)
        return;
    if (len > sizeof(cp->buf) - cp->len)
        flush(cp);
    if (len > sizeof(cp->buf)) {
        /* Bounded by BS_COPY_FIELD_MAX, so it fits an int. */
        if (cp->err.status == BS_OK && PQputCopyData(bs_pg(cp->conn), data, (int)len) != 1)
            fail(cp, BS_ERR_RETRY, "sending data failed");
        return;
    }
    memcpy(cp->buf + cp->len, data, len);
    cp->len += len;
}

static void put_u16(bs_copy *cp, uint16_t v)
{
    unsigned char b[2];

    b[0] = (unsigned char)(v >> 8);
    b[1] = (unsigned char)v;
    put(cp, b, 2);
}

static void put_u32(bs_copy *cp, uint32_t v)
{
    unsigned char b[4];

    b[0] = (unsigned char)(v >> 24);
    b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);
    b[3] = (unsigned char)v;
    put(cp, b, 4);
}

static void put_u64(bs_copy *cp, uint64_t v)
{
    put_u32(cp, (uint32_t)(v >> 32));
    put_u32(cp, (uint32_t)v);
}

static void put_str(bs_copy *cp, const char *s)
{
    put(cp, s, strlen(s));
}

/*
 * begin_field - account for one more field; in text format write the
 * separator. Returns 0 when the field may be written.
 */
static int begin_field(bs_copy *cp)
{
    if (cp->err.status != BS_OK)
        return -1;
    if (cp->field < 0) {
        fail(cp, BS_ERR_INVALID, "field written before bs_copy_row");
        return -1;
    }
    if (cp->field >= cp->ncols) {
        fail(cp, BS_ERR_INVALID, "more fields than columns");
        return -1;
    }
    if (cp->format == BS_COPY_TEXT && cp->field > 0)
        put(cp, "\t", 1);
    cp->field++;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Rows                                                                    */
/* ---------------------------------------------------------------------- */

static int end_row(bs_copy *cp)
{
    if (cp->field < 0)
        return 0;
    if (cp->field != cp->ncols) {
        fail(cp, BS_ERR_INVALID, "fewer fields than columns");
        return -1;
    }
    if (cp->format == BS_COPY_TEXT)
        put(cp, "\n", 1);
    cp->rows++;
    return 0;
}

void bs_copy_row(bs_copy *cp)
{
    if (end_row(cp) != 0)
        return;
    cp->field = 0;
    if (cp->format == BS_COPY_BINARY)
        put_u16(cp, (uint16_t)cp->ncols);
}

bs_copy *bs_copy_begin(bs_conn *c, const char *sql, int ncols, bs_copy_format format, bs_error *err)
{
    bs_copy *cp;
    PGresult *res;

    if (c == NULL || sql == NULL || ncols < 1 || ncols > MAX_COLUMNS ||
        (format != BS_COPY_BINARY && format != BS_COPY_TEXT)) {
        bs_error_set(err, BS_ERR_INVALID, "bs_copy_begin: bad arguments");
        return NULL;
    }
    cp = malloc(sizeof(*cp));
    if (cp == NULL) {
        bs_error_set(err, BS_ERR_NOMEM, "bs_copy_begin: out of memory");
        return NULL;
    }
    res = PQexec(bs_pg(c), sql);
    if (res == NULL || PQresultStatus(res) != PGRES_COPY_IN) {
        /* bs_query knows how to classify; re-run nothing, just describe. */
        bs_error_set(err, PQstatus(bs_pg(c)) == CONNECTION_OK ? BS_ERR_FATAL : BS_ERR_RETRY,
                     "COPY: %s",
                     res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(bs_pg(c)));
        if (err != NULL && res != NULL)
            snprintf(err->sqlstate, sizeof(err->sqlstate), "%s",
                     PQresultErrorField(res, PG_DIAG_SQLSTATE) != NULL
                         ? PQresultErrorField(res, PG_DIAG_SQLSTATE)
                         : "");
        PQclear(res);
        free(cp);
        return NULL;
    }
    PQclear(res);
    cp->conn = c;
    cp->format = format;
    cp->ncols = ncols;
    cp->field = -1;
    cp->rows = 0;
    cp->len = 0;
    bs_error_set(&cp->err, BS_OK, "%s", "");
    if (format == BS_COPY_BINARY) {
        put(cp, copy_signature, sizeof(copy_signature));
        put_u32(cp, 0); /* flags: no OIDs */
        put_u32(cp, 0); /* header extension length */
    }
    return cp;
}

/* Drain the results after PQputCopyEnd; returns the COPY's verdict. */
static bs_status copy_result(bs_copy *cp, uint64_t *rows, bs_error *err)
{
    PGconn *pg = bs_pg(cp->conn);
    PGresult *res;
    bs_status st = BS_OK;

    while ((res = PQgetResult(pg)) != NULL) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && st == BS_OK) {
            const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
            const char *cons = PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);

            st = PQstatus(pg) == CONNECTION_OK ? bs_classify_sqlstate(state) : BS_ERR_RETRY;
            bs_error_set(err, st, "COPY: %s", PQresultErrorMessage(res));
            if (err != NULL) {
                snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", state != NULL ? state : "");
                snprintf(err->constraint, sizeof(err->constraint), "%s", cons != NULL ? cons : "");
                err->message[strcspn(err->message, "\n")] = '\0';
            }
        } else if (PQresultStatus(res) == PGRES_COMMAND_OK && rows != NULL) {
            *rows = strtoull(PQcmdTuples(res), NULL, 10);
        }
        PQclear(res);
    }
    return st;
}

bs_status bs_copy_end(bs_copy *cp, uint64_t *rows, bs_error *err)
{
    bs_status st;

    if (cp == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "bs_copy_end: NULL writer");
    end_row(cp);
    if (cp->format == BS_COPY_BINARY)
        put_u16(cp, 0xFFFF); /* trailer: field count -1 */
    flush(cp);
    if (cp->err.status != BS_OK) {
        st = cp->err.status;
        if (err != NULL)
            *err = cp->err;
        bs_copy_abort(cp);
        return st;
    }
    if (PQputCopyEnd(bs_pg(cp->conn), NULL) != 1) {
        st = bs_error_set(err, BS_ERR_RETRY, "COPY: ending: %s", PQerrorMessage(bs_pg(cp->conn)));
        free(cp);
        return st;
    }
    st = copy_result(cp, rows, err);
    free(cp);
    return st;
}

void bs_copy_abort(bs_copy *cp)
{
    if (cp == NULL)
        return;
    if (PQputCopyEnd(bs_pg(cp->conn), "aborted by the client") == 1)
        copy_result(cp, NULL, NULL);
    free(cp);
}

/* ---------------------------------------------------------------------- */
/* Scalar fields                                                           */
/* ---------------------------------------------------------------------- */

void bs_copy_null(bs_copy *cp)
{
    if (begin_field(cp) != 0)
        return;
    if (cp->format == BS_COPY_BINARY)
        put_u32(cp, 0xFFFFFFFFu);
    else
        put(cp, "\\N", 2);
}

/* Text-format escaping: backslash, tab, newline and carriage return. */
static void put_escaped(bs_copy *cp, const char *s, size_t n)
{
    size_t i;
    size_t start = 0;

    for (i = 0; i < n; i++) {
        const char *esc = NULL;

        if (s[i] == '\\')
            esc = "\\\\";
        else if (s[i] == '\t')
            esc = "\\t";
        else if (s[i] == '\n')
            esc = "\\n";
        else if (s[i] == '\r')
            esc = "\\r";
        if (esc == NULL)
            continue;
        put(cp, s + start, i - start);
        put_str(cp, esc);
        start = i + 1;
    }
    put(cp, s + start, n - start);
}

void bs_copy_text(bs_copy *cp, const char *s)
{
    size_t n;

    if (s == NULL) {
        bs_copy_null(cp);
        return;
    }
    n = strnlen(s, BS_COPY_FIELD_MAX + 1);
    if (begin_field(cp) != 0)
        return;
    if (n > BS_COPY_FIELD_MAX) {
        fail(cp, BS_ERR_INVALID, "text longer than BS_COPY_FIELD_MAX");
        return;
    }
    if (cp->format == BS_COPY_BINARY) {
        put_u32(cp, (uint32_t)n);
        put(cp, s, n);
    } else {
        put_escaped(cp, s, n);
    }
}

/* Integers: 2, 4 or 8 bytes big-endian in binary; decimal in text. */
static void put_int(bs_copy *cp, int64_t v, int bytes)
{
    char text[24];

    if (begin_field(cp) != 0)
        return;
    if (cp->format == BS_COPY_TEXT) {
        snprintf(text, sizeof(text), "%lld", (long long)v);
        put_str(cp, text);
        return;
    }
    put_u32(cp, (uint32_t)bytes);
    if (bytes == 2)
        put_u16(cp, (uint16_t)v);
    else if (bytes == 4)
        put_u32(cp, (uint32_t)v);
    else
        put_u64(cp, (uint64_t)v);
}

void bs_copy_int2(bs_copy *cp, int16_t v)
{
    put_int(cp, v, 2);
}

void bs_copy_int4(bs_copy *cp, int32_t v)
{
    put_int(cp, v, 4);
}

void bs_copy_int8(bs_copy *cp, int64_t v)
{
    put_int(cp, v, 8);
}

void bs_copy_bool(bs_copy *cp, int v)
{
    unsigned char b = v ? 1 : 0;

    if (begin_field(cp) != 0)
        return;
    if (cp->format == BS_COPY_TEXT) {
        put_str(cp, v ? "t" : "f");
        return;
    }
    put_u32(cp, 1);
    put(cp, &b, 1);
}

void bs_copy_bytea(bs_copy *cp, const void *data, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = data;
    char pair[2];
    size_t i;

    if (begin_field(cp) != 0)
        return;
    if (len > BS_COPY_FIELD_MAX) {
        fail(cp, BS_ERR_INVALID, "bytea longer than BS_COPY_FIELD_MAX");
        return;
    }
    if (cp->format == BS_COPY_BINARY) {
        put_u32(cp, (uint32_t)len);
        put(cp, data, len);
        return;
    }
    /* "\x..." hex input, with COPY's own backslash escaped. */
    put_str(cp, "\\\\x");
    for (i = 0; i < len; i++) {
        pair[0] = hex[p[i] >> 4];
        pair[1] = hex[p[i] & 15];
        put(cp, pair, 2);
    }
}

/* ---------------------------------------------------------------------- */
/* Time                                                                    */
/* ---------------------------------------------------------------------- */

int64_t bs_time_micros(billing_time_t t)
{
    int64_t us = t / 1000;

    if (t % 1000 < 0)
        us--; /* C truncates toward zero; we want the floor */
    return us;
}

int bs_time_nanos(billing_time_t t)
{
    return (int)(t - bs_time_micros(t) * 1000);
}

void bs_copy_timestamptz(bs_copy *cp, billing_time_t t)
{
    char text[48];
    int64_t us = bs_time_micros(t);

    if (cp->format == BS_COPY_BINARY) {
        if (begin_field(cp) != 0)
            return;
        put_u32(cp, 8);
        put_u64(cp, (uint64_t)(us - PG_EPOCH_OFFSET_US));
        return;
    }
    /* RFC 3339 in UTC with at most 6 fractional digits: exact for timestamptz. */
    if (billing_time_format(us * 1000, text, sizeof(text)) < 0) {
        if (begin_field(cp) == 0)
            fail(cp, BS_ERR_INVALID, "instant out of range");
        return;
    }
    if (begin_field(cp) != 0)
        return;
    put_str(cp, text);
}

/* ---------------------------------------------------------------------- */
/* NUMERIC                                                                 */
/* ---------------------------------------------------------------------- */

/* A parsed decimal: sign, integer digits without leading zeros, fraction digits. */
typedef struct decimal_parts {
    int negative;
    const char *int_digits;
    size_t int_len;
    const char *frac_digits;
    size_t frac_len;
} decimal_parts;

static int all_digits(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
    }
    return n > 0;
}

/* Split "[+-]digits[.digits]"; returns -1 if malformed or too long. */
static int decimal_split(const char *s, decimal_parts *d)
{
    size_t n = strnlen(s, BS_DECIMAL_MAX + 1);
    const char *dot;

    if (n == 0 || n > BS_DECIMAL_MAX)
        return -1;
    d->negative = s[0] == '-';
    if (s[0] == '-' || s[0] == '+') {
        s++;
        n--;
    }
    dot = memchr(s, '.', n);
    d->int_digits = s;
    d->int_len = dot != NULL ? (size_t)(dot - s) : n;
    d->frac_digits = dot != NULL ? dot + 1 : s + n;
    d->frac_len = dot != NULL ? n - d->int_len - 1 : 0;
    if (!all_digits(d->int_digits, d->int_len))
        return -1;
    if (dot != NULL && !all_digits(d->frac_digits, d->frac_len))
        return -1;
    while (d->int_len > 0 && d->int_digits[0] == '0') {
        d->int_digits++;
        d->int_len--;
    }
    return 0;
}

/* Base-10000 group @g of the digit string @s of @n digits, padded to whole groups. */
static int group_value(const char *s, size_t n, size_t first_width, size_t g, int left_pad)
{
    size_t start;
    size_t width = 4;
    int v = 0;
    size_t i;

    if (left_pad) {
        /* Integer part: the first group holds first_width digits, the rest 4. */
        start = g == 0 ? 0 : first_width + (g - 1) * 4;
        if (g == 0)
            width = first_width;
        for (i = 0; i < width; i++)
            v = v * 10 + (s[start + i] - '0');
        return v;
    }
    /* Fraction: groups of 4 from the point, the last padded with zeros. */
    start = g * 4;
    for (i = 0; i < 4; i++)
        v = v * 10 + (start + i < n ? s[start + i] - '0' : 0);
    return v;
}

long bs_numeric_encode(const char *decimal, unsigned char *out, size_t size)
{
    decimal_parts d;
    int digits[NUMERIC_MAX_GROUPS];
    size_t n_int;
    size_t n_frac;
    size_t first = 0;
    size_t count = 0;
    size_t i;
    int weight;
    unsigned sign;
    size_t need;

    if (decimal == NULL || decimal_split(decimal, &d) != 0)
        return -1;
    n_int = (d.int_len + 3) / 4;
    n_frac = (d.frac_len + 3) / 4;
    for (i = 0; i < n_int; i++)
        digits[count++] =
            group_value(d.int_digits, d.int_len, d.int_len % 4 == 0 ? 4 : d.int_len % 4, i, 1);
    for (i = 0; i < n_frac; i++)
        digits[count++] = group_value(d.frac_digits, d.frac_len, 0, i, 0);
    weight = (int)n_int - 1;
    /* numeric_recv keeps what we send; strip zero groups as PostgreSQL would. */
    while (first < count && digits[first] == 0) {
        first++;
        weight--;
    }
    while (count > first && digits[count - 1] == 0)
        count--;
    if (count == first)
        weight = 0;
    need = 8 + 2 * (count - first);
    if (out == NULL || size < need)
        return -1;
    out[0] = (unsigned char)((count - first) >> 8);
    out[1] = (unsigned char)(count - first);
    out[2] = (unsigned char)((unsigned)weight >> 8);
    out[3] = (unsigned char)weight;
    sign = count > first && d.negative ? NUMERIC_NEG : NUMERIC_POS; /* -0 is 0 */
    out[4] = (unsigned char)(sign >> 8);
    out[5] = (unsigned char)sign;
    out[6] = (unsigned char)(d.frac_len >> 8);
    out[7] = (unsigned char)d.frac_len;
    for (i = first; i < count; i++) {
        out[8 + 2 * (i - first)] = (unsigned char)(digits[i] >> 8);
        out[9 + 2 * (i - first)] = (unsigned char)digits[i];
    }
    return (long)need;
}

void bs_copy_numeric(bs_copy *cp, const char *decimal)
{
    unsigned char enc[8 + 2 * NUMERIC_MAX_GROUPS];
    long n;

    if (decimal == NULL) {
        bs_copy_null(cp);
        return;
    }
    n = bs_numeric_encode(decimal, enc, sizeof(enc));
    if (begin_field(cp) != 0)
        return;
    if (n < 0) {
        fail(cp, BS_ERR_INVALID, "not a decimal number");
        return;
    }
    if (cp->format == BS_COPY_BINARY) {
        put_u32(cp, (uint32_t)n);
        put(cp, enc, (size_t)n);
    } else {
        put_str(cp, decimal);
    }
}
