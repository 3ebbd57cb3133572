/*
 * eventjson.c - strict parser for the flat JSON event object.
 *
 * Two steps: the syntax pass notes where each value's text lies (in the
 * line itself, or, for a string with escapes, in a bounded per-field
 * buffer it is unescaped into); then the fields are applied in a fixed
 * order, id first, so that every message can name the event whatever the
 * key order. Plain strings, nearly all of them, are scanned 16 bytes at a
 * time (SSE2) and never copied until their setter copies them into the
 * event. Nothing is allocated. No value is converted through floating
 * point: quantities stay text.
 *
 * Before all that, the usual line (members in schema order, no
 * whitespace, plain valid values: nearly every line) is read in one pass
 * and written into the event in place; any other line goes to the
 * general parser from its start, which alone writes messages. See "The
 * usual line" below.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "event.h"
#include "eventjson.h"
#include "utc20.h"
#include "util.h"

enum {
    F_ID,
    F_ACCOUNT,
    F_RESOURCE,
    F_METER,
    F_START,
    F_END,
    F_QUANTITY,
    F_MODEL,
    F_REGION,
    F_COUNT
};

static const char *const field_names[F_COUNT] = {
    "id", "account", "resource", "meter", "start", "end", "quantity", "model", "region",
};

static const size_t field_len[F_COUNT] = {2, 7, 8, 5, 5, 3, 8, 5, 6};

/* Longest value per field, as billing.h bounds them (timestamps and decimals: 64). */
static const size_t field_max[F_COUNT] = {128, 128, 128, 16, 64, 64, 64, 64, 64};

/* For the usual-line path: constant keys must reach memcmp, which then compiles to word compares. */
#ifdef __GNUC__
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

#define VALUE_MAX 128
#define KEY_MAX 16
#define REQUIRED_FIELDS                                                                          \
    ((1u << F_ID) | (1u << F_ACCOUNT) | (1u << F_RESOURCE) | (1u << F_METER) | (1u << F_START) | \
     (1u << F_END) | (1u << F_QUANTITY))

typedef struct jparse {
    const char *base;
    const char *p;
    const char *end;
    unsigned present;
    int next;                 /* field after the last one read: writers keep schema order */
    const char *val[F_COUNT]; /* each present field's text: in the line, or in esc */
    size_t len[F_COUNT];
    char esc[F_COUNT][VALUE_MAX + 1]; /* values with escapes, unescaped */
    char *errbuf;
    size_t errsize;
} jparse;

/* ---------------------------------------------------------------------- */
/* Messages                                                                */
/* ---------------------------------------------------------------------- */

static billing_status jfail(const jparse *jp, billing_status st, const char *fmt, ...)
    BC_PRINTF(3, 4);

/* "event 'ID': " (or "event: " before the id is known), then the message. */
static billing_status jfail(const jparse *jp, billing_status st, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (jp->errbuf == NULL || jp->errsize == 0)
        return st;
    if (jp->present & (1u << F_ID))
        n = snprintf(jp->errbuf, jp->errsize, "event '%.*s': ", (int)jp->len[F_ID], jp->val[F_ID]);
    else
        n = snprintf(jp->errbuf, jp->errsize, "event: ");
    if (n < 0 || (size_t)n >= jp->errsize)
        return st;
    va_start(ap, fmt);
    vsnprintf(jp->errbuf + n, jp->errsize - (size_t)n, fmt, ap);
    va_end(ap);
    return st;
}

static size_t column(const jparse *jp)
{
    return (size_t)(jp->p - jp->base) + 1;
}

static billing_status syntax(const jparse *jp, const char *what)
{
    if (jp->p >= jp->end)
        return jfail(jp, BILLING_ERR_PARSE, "column %zu: %s, found the end of the line", column(jp),
                     what);
    return jfail(jp, BILLING_ERR_PARSE, "column %zu: %s", column(jp), what);
}

/* ---------------------------------------------------------------------- */
/* Tokens                                                                  */
/* ---------------------------------------------------------------------- */

/* Characters a string holds as they are: printable ASCII but '"' and '\\'. */
#define PLAIN16(c)                                                                        \
    PLAIN1(c), PLAIN1(c + 1), PLAIN1(c + 2), PLAIN1(c + 3), PLAIN1(c + 4), PLAIN1(c + 5), \
        PLAIN1(c + 6), PLAIN1(c + 7), PLAIN1(c + 8), PLAIN1(c + 9), PLAIN1(c + 10),       \
        PLAIN1(c + 11), PLAIN1(c + 12), PLAIN1(c + 13), PLAIN1(c + 14), PLAIN1(c + 15)
#define PLAIN1(c) ((c) >= 0x20 && (c) <= 0x7e && (c) != '"' && (c) != '\\')
static const unsigned char plain_char[256] = {
    PLAIN16(0x00), PLAIN16(0x10), PLAIN16(0x20), PLAIN16(0x30),
    PLAIN16(0x40), PLAIN16(0x50), PLAIN16(0x60), PLAIN16(0x70),
};

#ifdef __SSE2__
/* The bits of the bytes of @v that are not plain. */
static ALWAYS_INLINE int stop_mask(__m128i v)
{
    /* Signed bytes: below ' ' also catches 0x80..0xff; 0x7f, '"' and '\\' by equality. */
    const __m128i space = _mm_set1_epi8(' ');
    const __m128i del = _mm_set1_epi8(0x7f);
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    __m128i stop =
        _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(v, space), _mm_cmpeq_epi8(v, del)),
                     _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));

    return _mm_movemask_epi8(stop);
}
#endif

/*
 * The first byte at or after @p that is not plain (see plain_char), or
 * @end. The line starts at @base (<= @p): the last bytes are read as the
 * 16 that end the line when it has that many, rather than one at a time.
 */
static ALWAYS_INLINE const char *scan_plain(const char *p, const char *end, const char *base)
{
#ifdef __SSE2__
    int mask;

    while (end - p >= 16) {
        mask = stop_mask(_mm_loadu_si128((const __m128i *)(const void *)p));
        if (mask != 0)
            return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
    if (end - base >= 16 && p < end) {
        /* Bit i is the byte end - 16 + i: p's is bit 16 - (end - p). */
        mask = stop_mask(_mm_loadu_si128((const __m128i *)(const void *)(end - 16))) >>
               (16 - (end - p));
        return mask != 0 ? p + __builtin_ctz((unsigned)mask) : end;
    }
#else
    (void)base;
#endif
    while (p < end && plain_char[(unsigned char)*p])
        p++;
    return p;
}

static void skip_ws(jparse *jp)
{
    while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r'))
        jp->p++;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The character of the escape at jp->p (after the backslash), or -1. */
static int unescape(jparse *jp)
{
    static const char plain[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
    int v = 0;
    int h;
    int i;
    const char *m;

    if (jp->p >= jp->end)
        return -1;
    if (*jp->p != 'u') {
        m = strchr(plain, *jp->p);
        if (*jp->p == '\0' || m == NULL || (m - plain) % 2 != 0)
            return -1;
        jp->p++;
        return (unsigned char)m[1];
    }
    if (jp->end - jp->p < 5)
        return -1;
    for (i = 1; i <= 4; i++) {
        h = hex_value(jp->p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    jp->p += 5;
    return v;
}

/*
 * The string at jp->p (opening quote included): its text into *@text and
 * *@len, which is the line itself for a plain string and otherwise @out
 * (room for @max bytes and a NUL), where it is unescaped. Returns 0, -1
 * for a syntax error (message written), -2 if longer than @max, -3 for a
 * character that is not printable ASCII (the caller names the field).
 */
static int read_string(jparse *jp, char *out, size_t max, const char **text, size_t *len,
                       billing_status *st)
{
    /* Locals, not jp->p: stores through @out may alias jp and force reloads. */
    const char *p = jp->p + 1;
    const char *end = jp->end;
    size_t n = 0;
    int c;

    /* Nearly every value is plain: find its end and point at it. */
    p = scan_plain(p, end, jp->base);
    n = (size_t)(p - (jp->p + 1));
    if (p < end && *p == '"' && n <= max) {
        *text = jp->p + 1;
        *len = n;
        jp->p = p + 1;
        return 0;
    }
    /* Otherwise (escapes, a control or non-ASCII byte, too long, no end) one character at a time. */
    p = jp->p + 1;
    n = 0;

    while (p < end && *p != '"') {
        c = (unsigned char)*p++;
        if (c == '\\') {
            jp->p = p;
            c = unescape(jp);
            p = jp->p;
            if (c < 0) {
                *st = syntax(jp, "invalid escape sequence in a string");
                return -1;
            }
        }
        if (c < 0x20 || c > 0x7e) {
            jp->p = p;
            return -3;
        }
        if (n >= max)
            return -2;
        out[n++] = (char)c;
    }
    jp->p = p;
    if (p >= end) {
        *st = syntax(jp, "unterminated string");
        return -1;
    }
    jp->p++;
    out[n] = '\0';
    *text = out;
    *len = n;
    return 0;
}

/* The JSON number at jp->p, as text; exponents are refused so the text is the exact value. */
static billing_status read_number(jparse *jp, int f)
{
    const char *start = jp->p;
    size_t n;

    if (jp->p < jp->end && *jp->p == '-')
        jp->p++;
    if (jp->end - jp->p >= 2 && jp->p[0] == '0' && jp->p[1] >= '0' && jp->p[1] <= '9')
        return syntax(jp, "a JSON number cannot have a leading zero");
    while (jp->p < jp->end && ((*jp->p >= '0' && *jp->p <= '9') || *jp->p == '.'))
        jp->p++;
    if (jp->p < jp->end && (*jp->p == 'e' || *jp->p == 'E'))
        return jfail(jp, BILLING_ERR_PARSE,
                     "field '%s': exponent notation is not accepted; write \"%s\" as an exact "
                     "decimal string",
                     field_names[f], field_names[f]);
    n = (size_t)(jp->p - start);
    if (n > field_max[f])
        return jfail(jp, BILLING_ERR_TOO_LARGE, "field '%s' is longer than %zu characters",
                     field_names[f], field_max[f]);
    jp->val[f] = start;
    jp->len[f] = n;
    return BILLING_OK;
}

static int is_literal(const jparse *jp, const char *word)
{
    size_t n = strlen(word);

    return (size_t)(jp->end - jp->p) >= n && memcmp(jp->p, word, n) == 0;
}

/* A string value of field @f, or the JSON forms some fields also allow. */
static billing_status read_value(jparse *jp, int f)
{
    billing_status st = BILLING_OK;
    int rc;

    if (jp->p < jp->end && *jp->p == '"') {
        rc = read_string(jp, jp->esc[f], field_max[f], &jp->val[f], &jp->len[f], &st);
        if (rc == -2)
            return jfail(jp, BILLING_ERR_TOO_LARGE, "field '%s' is longer than %zu characters",
                         field_names[f], field_max[f]);
        if (rc == -3)
            return jfail(jp, BILLING_ERR_INVALID,
                         "field '%s': character at column %zu is not printable ASCII",
                         field_names[f], column(jp) - 1);
        return rc == 0 ? BILLING_OK : st;
    }
    if (f == F_QUANTITY && jp->p < jp->end && (*jp->p == '-' || (*jp->p >= '0' && *jp->p <= '9')))
        return read_number(jp, f);
    if ((f == F_MODEL || f == F_REGION) && is_literal(jp, "null")) {
        jp->p += 4;
        jp->val[f] = "";
        jp->len[f] = 0;
        return BILLING_OK;
    }
    if (jp->p >= jp->end || strchr("{[tfn-0123456789", *jp->p) == NULL || *jp->p == '\0')
        return syntax(jp, "expected a value");
    return jfail(jp, BILLING_ERR_INVALID, "field '%s' must be a string%s", field_names[f],
                 f == F_QUANTITY ? " or a number" : "");
}

/* ---------------------------------------------------------------------- */
/* The object                                                              */
/* ---------------------------------------------------------------------- */

/* Length first: one memcmp per key instead of a strcmp per field name. */
static int field_index(const char *key, size_t len)
{
    int i;

    for (i = 0; i < F_COUNT; i++) {
        if (len == field_len[i] && key[0] == field_names[i][0] &&
            memcmp(key, field_names[i], len) == 0)
            return i;
    }
    return -1;
}

/*
 * The field named by the key at jp->p (its opening quote), matched where
 * it lies and jp->p moved past it; or -1, jp->p unmoved, when the key is
 * not a plain known name (escapes, unknown): read_member then reads it
 * the general way, which also writes the message. Saves a copy a member.
 */
static int plain_key(jparse *jp)
{
    const char *k = jp->p + 1;
    const char *p = k;
    int f;

    p = scan_plain(p, jp->end, jp->base);
    if (p >= jp->end || *p != '"')
        return -1;
    f = jp->next;
    /* Most lines list the fields in schema order: try the expected one first. */
    if (f >= F_COUNT || (size_t)(p - k) != field_len[f] ||
        memcmp(k, field_names[f], field_len[f]) != 0)
        f = field_index(k, (size_t)(p - k));
    if (f >= 0)
        jp->p = p + 1;
    return f;
}

/* One "key": value member. */
static billing_status read_member(jparse *jp)
{
    char buf[KEY_MAX + 1];
    const char *key = NULL;
    size_t len = 0;
    billing_status st = BILLING_OK;
    int rc = 0;
    int f;

    if (jp->p >= jp->end || *jp->p != '"')
        return syntax(jp, "expected a field name in double quotes");
    f = plain_key(jp);
    if (f < 0) {
        rc = read_string(jp, buf, KEY_MAX, &key, &len, &st);
        if (rc == -1)
            return st;
        f = rc == 0 ? field_index(key, len) : -1;
    }
    if (f < 0 && rc == 0)
        return jfail(jp, BILLING_ERR_INVALID, "unknown field '%.*s'", (int)len, key);
    if (f < 0)
        return jfail(jp, BILLING_ERR_INVALID, "unknown field '(long or non-ASCII name)'");
    if (jp->present & (1u << f))
        return jfail(jp, BILLING_ERR_INVALID, "field '%s' appears twice", field_names[f]);
    skip_ws(jp);
    if (jp->p >= jp->end || *jp->p != ':')
        return syntax(jp, "expected ':' after the field name");
    jp->p++;
    skip_ws(jp);
    st = read_value(jp, f);
    if (st == BILLING_OK)
        jp->present |= 1u << f;
    jp->next = f + 1;
    return st;
}

static billing_status read_object(jparse *jp)
{
    billing_status st;

    skip_ws(jp);
    if (jp->p >= jp->end || *jp->p != '{')
        return syntax(jp, "expected '{' at the start of the event");
    jp->p++;
    skip_ws(jp);
    if (jp->p < jp->end && *jp->p == '}') {
        jp->p++;
        return BILLING_OK;
    }
    for (;;) {
        st = read_member(jp);
        if (st != BILLING_OK)
            return st;
        skip_ws(jp);
        if (jp->p < jp->end && *jp->p == '}')
            break;
        if (jp->p >= jp->end || *jp->p != ',')
            return syntax(jp, "expected ',' or '}'");
        jp->p++;
        skip_ws(jp);
    }
    jp->p++;
    skip_ws(jp);
    if (jp->p < jp->end)
        return syntax(jp, "unexpected characters after the event object");
    return BILLING_OK;
}

/* ---------------------------------------------------------------------- */
/* Applying the fields                                                     */
/* ---------------------------------------------------------------------- */

static billing_status missing(const jparse *jp, int f)
{
    return jfail(jp, BILLING_ERR_INVALID, "field '%s' is missing", field_names[f]);
}

/* Field @f's text as a string in @buf of VALUE_MAX + 1 bytes (values are bounded by field_max). */
static const char *text_of(const jparse *jp, int f, char *buf)
{
    memcpy(buf, jp->val[f], jp->len[f]);
    buf[jp->len[f]] = '\0';
    return buf;
}

static billing_status apply_meter(const jparse *jp, billing_event *ev)
{
    char buf[VALUE_MAX + 1];
    billing_meter meter;

    if (billing_meter_parse(text_of(jp, F_METER, buf), &meter) != BILLING_OK)
        return jfail(jp, BILLING_ERR_INVALID,
                     "field 'meter': '%s' is not \"gpu\", \"gpuless\", \"storage\" or "
                     "\"traffic\"",
                     buf);
    billing_event_set_meter(ev, meter);
    return BILLING_OK;
}

static billing_status apply_time(const jparse *jp, int f, billing_time_t *out)
{
    char why[160];

    if (billing_time_parse_n(jp->val[f], jp->len[f], out, why, sizeof(why)) != BILLING_OK)
        return jfail(jp, BILLING_ERR_PARSE, "field '%s': %s", field_names[f], why);
    return BILLING_OK;
}

static billing_status apply_quantity(const jparse *jp, billing_event *ev)
{
    char buf[VALUE_MAX + 1];
    char why[160];
    billing_status st =
        billing_event_set_quantity(ev, text_of(jp, F_QUANTITY, buf), why, sizeof(why));

    if (st != BILLING_OK)
        return jfail(jp, st, "%s", why);
    return BILLING_OK;
}

/* Convert field @f (present), or report it; start and end go together. */
static billing_status apply_field(const jparse *jp, billing_event *ev, int f, billing_time_t *start)
{
    billing_time_t end;
    billing_status st;

    switch (f) {
    case F_METER:
        return apply_meter(jp, ev);
    case F_START:
        return apply_time(jp, F_START, start);
    case F_END:
        st = apply_time(jp, F_END, &end);
        if (st == BILLING_OK)
            billing_event_set_interval(ev, *start, end);
        return st;
    case F_QUANTITY:
        return apply_quantity(jp, ev);
    default:
        return BILLING_OK;
    }
}

/* Every field in schema order, so the first problem reported is the first field's. */
static billing_status apply_fields(const jparse *jp, billing_event *ev)
{
    billing_time_t start = 0;
    billing_status st;
    int f;

    /*
     * Lengths were bounded while reading, so these setters cannot fail but
     * for an empty id, account or resource, which the rater then refuses.
     */
    billing_event_set_text(ev, BILLING_TEXT_ID, jp->val[F_ID], jp->len[F_ID]);
    billing_event_set_text(ev, BILLING_TEXT_ACCOUNT, jp->val[F_ACCOUNT], jp->len[F_ACCOUNT]);
    billing_event_set_text(ev, BILLING_TEXT_RESOURCE, jp->val[F_RESOURCE], jp->len[F_RESOURCE]);
    billing_event_set_text(ev, BILLING_TEXT_MODEL, jp->val[F_MODEL], jp->len[F_MODEL]);
    billing_event_set_text(ev, BILLING_TEXT_REGION, jp->val[F_REGION], jp->len[F_REGION]);
    for (f = 0; f < F_COUNT; f++) {
        if ((REQUIRED_FIELDS & (1u << f)) && !(jp->present & (1u << f)))
            return missing(jp, f);
        st = apply_field(jp, ev, f, &start);
        if (st != BILLING_OK)
            return st;
    }
    return BILLING_OK;
}

billing_status bc_event_parse_json_general(billing_event *ev, const char *text, size_t len,
                                           char *errbuf, size_t errsize)
{
    jparse jp;
    billing_status st;
    int f;

    billing_event_reset(ev);
    jp.base = text;
    jp.p = text;
    jp.end = text + len;
    jp.present = 0;
    jp.next = 0;
    jp.errbuf = errbuf;
    jp.errsize = errsize;
    /* Absent fields read as empty. */
    for (f = 0; f < F_COUNT; f++) {
        jp.val[f] = "";
        jp.len[f] = 0;
    }
    st = read_object(&jp);
    if (st != BILLING_OK)
        return st;
    return apply_fields(&jp, ev);
}

/* ---------------------------------------------------------------------- */
/* The usual line, in one pass                                             */
/* ---------------------------------------------------------------------- */

/*
 * Nearly every line is what our writers and generators produce: the
 * members in schema order, model and region optional, no whitespace,
 * every value a plain string, everything valid. Such a line is read in
 * one pass: keys matched as fixed text, each value scanned once and
 * copied straight into the event. Any other line, valid or not, goes to
 * the general parser from its start, which alone writes messages; the
 * fuzz target checks that both give the same event on the lines the
 * usual path takes.
 */

/*
 * Non-zero if the @n (4..16) bytes of @lit are at @p, before @end: two
 * overlapping words compared, no memcmp call.
 */
static ALWAYS_INLINE int literal_at(const char *p, const char *end, const char *lit, size_t n)
{
    uint64_t a;
    uint64_t b;
    uint64_t c;
    uint64_t d;
    uint32_t e;
    uint32_t g;
    uint32_t h;
    uint32_t k;

    if ((size_t)(end - p) < n)
        return 0;
    if (n < 8) {
        memcpy(&e, p, 4);
        memcpy(&g, lit, 4);
        memcpy(&h, p + n - 4, 4);
        memcpy(&k, lit + n - 4, 4);
        return ((e ^ g) | (h ^ k)) == 0;
    }
    memcpy(&a, p, 8);
    memcpy(&b, lit, 8);
    memcpy(&c, p + n - 8, 8);
    memcpy(&d, lit + n - 8, 8);
    return ((a ^ b) | (c ^ d)) == 0;
}

/*
 * What lies between values on a usual line, indexed by field: from the
 * previous value's closing quote (or the line's start) to this value's
 * opening quote.
 */
static const struct usual_key {
    char text[16];
    size_t len;
} usual_keys[F_COUNT] = {
    {"{\"id\":\"", 7},          {"\",\"account\":\"", 13}, {"\",\"resource\":\"", 14},
    {"\",\"meter\":\"", 11},    {"\",\"start\":\"", 11},   {"\",\"end\":\"", 9},
    {"\",\"quantity\":\"", 14}, {"\",\"model\":\"", 11},   {"\",\"region\":\"", 12},
};

/*
 * Field @f's member at @p (its key as usual_keys has it, which the caller
 * has checked): its value noted in @jp (plain, 1..field_max[f] bytes, or
 * 0.. for model and region) and its closing quote returned, or NULL.
 */
static ALWAYS_INLINE const char *usual_value(jparse *jp, const char *p, int f)
{
    const char *q;
    size_t n;

    p += usual_keys[f].len;
    q = scan_plain(p, jp->end, jp->base);
    n = (size_t)(q - p);
    if (q >= jp->end || *q != '"' || n > field_max[f] || (n == 0 && f < F_MODEL))
        return NULL;
    jp->val[f] = p;
    jp->len[f] = n;
    return q;
}

/* The members of a usual line into @jp: 0, or -1 for any other line. */
static int usual_members(jparse *jp)
{
    const char *p = jp->base;
    int f;

    /* Unrolled, the keys and their lengths become constants. */
#if defined(__GNUC__)
#pragma GCC unroll 9
#endif
    for (f = 0; f < F_COUNT; f++) {
        if (literal_at(p, jp->end, usual_keys[f].text, usual_keys[f].len))
            p = usual_value(jp, p, f);
        else if (f < F_MODEL)
            return -1;
        if (p == NULL)
            return -1;
    }
    if (jp->end - p != 2 || p[1] != '}')
        return -1;
    return 0;
}

/* The meter named by field F_METER's text, or -1 (the general path names the problem). */
static int usual_meter(const jparse *jp)
{
    const char *t = jp->val[F_METER];

    switch (jp->len[F_METER]) {
    case 3:
        return memcmp(t, "gpu", 3) == 0 ? (int)BILLING_METER_GPU : -1;
    case 7:
        if (memcmp(t, "gpuless", 7) == 0)
            return BILLING_METER_GPULESS;
        if (memcmp(t, "storage", 7) == 0)
            return BILLING_METER_STORAGE;
        return memcmp(t, "traffic", 7) == 0 ? (int)BILLING_METER_TRAFFIC : -1;
    default:
        return -1;
    }
}

/* 1..9 digits at @p (before @end) into *@v: their count, or 0. */
static int usual_digits(const char *p, const char *end, uint64_t *v)
{
    int n = 0;

    *v = 0;
    while (p + n < end && n < 10 && p[n] >= '0' && p[n] <= '9') {
        *v = *v * 10 + (uint64_t)(p[n] - '0');
        n++;
    }
    return n <= 9 ? n : 0;
}

/*
 * The quantity of the form billing_event_set_quantity reads in 64 bits,
 * 1..9 digits and optionally '.' and 1..9 digits, in nano-units: 0, or -1
 * for any other text (then the general path decides).
 */
static int usual_quantity(const jparse *jp, bl_i128 *out)
{
    static const uint64_t scale[BL_QTY_SCALE_DIGITS + 1] = {
        1000000000, 100000000, 10000000, 1000000, 100000, 10000, 1000, 100, 10, 1};
    const char *p = jp->val[F_QUANTITY];
    const char *end = p + jp->len[F_QUANTITY];
    uint64_t whole;
    uint64_t frac = 0;
    int n;
    int f = 0;

    n = usual_digits(p, end, &whole);
    if (n == 0)
        return -1;
    p += n;
    if (p < end && *p == '.') {
        f = usual_digits(p + 1, end, &frac);
        if (f == 0)
            return -1;
        p += 1 + f;
    }
    if (p != end)
        return -1;
    *out = (bl_i128)(whole * (uint64_t)BL_QTY_SCALE + frac * scale[f]);
    return 0;
}

/*
 * The interval: both timestamps in the fixed-place UTC form, the date read
 * once when they share it (nearly every event), or else each read by
 * billing_time_parse_n. 0, or -1 if either is not a valid timestamp.
 */
static int usual_interval(const jparse *jp, billing_time_t *start, billing_time_t *end)
{
    const char *s = jp->val[F_START];
    const char *e = jp->val[F_END];
    int64_t sday;
    int64_t eday;
    int32_t ssec;
    int32_t esec;

    if (jp->len[F_START] == 20 && jp->len[F_END] == 20 && bl_utc20_date(s, &sday) == 0) {
        ssec = bl_utc20_clock(s);
        esec = bl_utc20_clock(e);
        if (memcmp(s, e, 10) == 0)
            eday = sday;
        else if (bl_utc20_date(e, &eday) != 0)
            esec = -1;
        if (ssec >= 0 && esec >= 0) {
            *start = (sday * 86400 + ssec) * BILLING_NS_PER_SEC;
            *end = (eday * 86400 + esec) * BILLING_NS_PER_SEC;
            return 0;
        }
    }
    if (billing_time_parse_n(s, jp->len[F_START], start, NULL, 0) != BILLING_OK ||
        billing_time_parse_n(e, jp->len[F_END], end, NULL, 0) != BILLING_OK)
        return -1;
    return 0;
}

billing_status bc_event_parse_json_usual(billing_event *ev, const char *text, size_t len)
{
    jparse jp;
    billing_time_t start;
    billing_time_t end;
    bl_i128 qty;
    int meter;

    jp.base = text;
    jp.end = text + len;
    jp.val[F_MODEL] = "";
    jp.len[F_MODEL] = 0;
    jp.val[F_REGION] = "";
    jp.len[F_REGION] = 0;
    if (usual_members(&jp) != 0)
        return BILLING_ERR_PARSE;
    meter = usual_meter(&jp);
    if (meter < 0 || usual_quantity(&jp, &qty) != 0 || usual_interval(&jp, &start, &end) != 0)
        return BILLING_ERR_PARSE;
    bl_event_put_text(ev->id, &ev->id_len, jp.val[F_ID], jp.len[F_ID]);
    bl_event_put_text(ev->account, &ev->account_len, jp.val[F_ACCOUNT], jp.len[F_ACCOUNT]);
    bl_event_put_text(ev->resource, &ev->resource_len, jp.val[F_RESOURCE], jp.len[F_RESOURCE]);
    bl_event_put_text(ev->model, &ev->model_len, jp.val[F_MODEL], jp.len[F_MODEL]);
    bl_event_put_text(ev->region, &ev->region_len, jp.val[F_REGION], jp.len[F_REGION]);
    ev->meter = (billing_meter)meter;
    ev->start = start;
    ev->end = end;
    ev->qty = qty;
    ev->set = BL_EV_ALL;
    ev->refused = 0;
    return BILLING_OK;
}

billing_status bc_event_parse_json(billing_event *ev, const char *text, size_t len, char *errbuf,
                                   size_t errsize)
{
    if (ev != NULL && text != NULL && bc_event_parse_json_usual(ev, text, len) == BILLING_OK)
        return BILLING_OK;
    return bc_event_parse_json_general(ev, text, len, errbuf, errsize);
}
