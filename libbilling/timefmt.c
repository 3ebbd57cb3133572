/*
 * timefmt.c - RFC 3339 timestamps: billing_time_parse and
 * billing_time_format. Leap seconds (":60") are rejected: instants are
 * POSIX time, which has no place for them.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "utc20.h"
#include "zone.h"

/* Longest accepted input: date, time, 9 fraction digits, offset, and slack. */
#define TIME_TEXT_MAX 64
/* Characters of the input quoted in messages. */
#define QUOTE_MAX 40

#define NS BILLING_NS_PER_SEC

/* The parse in progress, with what a message needs. */
typedef struct tparse {
    const char *text;
    size_t pos;
    char quoted[QUOTE_MAX + 4];
    char *errbuf;
    size_t errsize;
} tparse;

/* The fields of a timestamp. */
typedef struct tfields {
    int year;
    int month;
    int day;
    int hour;
    int minute;
    int second;
    int32_t nsec;
    int32_t offset; /* seconds east of UTC */
} tfields;

/* Printable copy of the input for messages: control bytes shown as '?'. */
static void quote_text(tparse *tp)
{
    size_t i;
    unsigned char ch;

    for (i = 0; i < QUOTE_MAX && tp->text[i] != '\0'; i++) {
        ch = (unsigned char)tp->text[i];
        tp->quoted[i] = (ch < ' ' || ch > '~') ? '?' : (char)ch;
    }
    if (tp->text[i] != '\0') {
        memcpy(tp->quoted + i, "...", 3);
        i += 3;
    }
    tp->quoted[i] = '\0';
}

/* Messages quote the input; quoted only then, since nearly every timestamp parses. */
static billing_status perr(tparse *tp, billing_status status, const char *what)
{
    quote_text(tp);
    return bl_seterr(tp->errbuf, tp->errsize, status, "timestamp '%s': %s", tp->quoted, what);
}

/* A field outside its range: "month 13 out of range (1..12)". */
static billing_status range_err(tparse *tp, const char *field, int value, int lo, int hi)
{
    quote_text(tp);
    return bl_seterr(tp->errbuf, tp->errsize, BILLING_ERR_PARSE,
                     "timestamp '%s': %s %d out of range (%d..%d)", tp->quoted, field, value, lo,
                     hi);
}

/* Exactly @n digits. */
static int digits(tparse *tp, int n, int *out)
{
    int value = 0;
    int i;
    char ch;

    for (i = 0; i < n; i++) {
        ch = tp->text[tp->pos + (size_t)i];
        if (ch < '0' || ch > '9')
            return -1;
        value = value * 10 + (ch - '0');
    }
    tp->pos += (size_t)n;
    *out = value;
    return 0;
}

/* @n digits of a field called @name, then @sep unless it is '\0'. */
static billing_status field(tparse *tp, const char *name, int n, char sep, int *out)
{
    char msg[64];

    if (digits(tp, n, out) != 0) {
        snprintf(msg, sizeof(msg), "expected %d-digit %s at offset %lu", n, name,
                 (unsigned long)tp->pos);
        return perr(tp, BILLING_ERR_PARSE, msg);
    }
    if (sep == '\0')
        return BILLING_OK;
    if (tp->text[tp->pos] != sep) {
        snprintf(msg, sizeof(msg), "expected '%c' after the %s at offset %lu", sep, name,
                 (unsigned long)tp->pos);
        return perr(tp, BILLING_ERR_PARSE, msg);
    }
    tp->pos++;
    return BILLING_OK;
}

static billing_status parse_date(tparse *tp, tfields *f)
{
    billing_status st;
    int dim;
    char msg[80];

    st = field(tp, "year", 4, '-', &f->year);
    if (st == BILLING_OK)
        st = field(tp, "month", 2, '-', &f->month);
    if (st == BILLING_OK)
        st = field(tp, "day", 2, '\0', &f->day);
    if (st != BILLING_OK)
        return st;
    if (f->month < 1 || f->month > 12)
        return range_err(tp, "month", f->month, 1, 12);
    dim = bl_days_in_month(f->year, f->month);
    if (f->day < 1 || f->day > dim) {
        snprintf(msg, sizeof(msg), "day %d out of range for %04d-%02d (1..%d)", f->day, f->year,
                 f->month, dim);
        return perr(tp, BILLING_ERR_PARSE, msg);
    }
    return BILLING_OK;
}

/* '.' and 1..9 digits, scaled to nanoseconds. */
static billing_status parse_fraction(tparse *tp, tfields *f)
{
    int n = 0;
    char ch;

    f->nsec = 0;
    if (tp->text[tp->pos] != '.')
        return BILLING_OK;
    tp->pos++;
    for (ch = tp->text[tp->pos]; ch >= '0' && ch <= '9'; ch = tp->text[tp->pos]) {
        if (n == 9)
            return perr(tp, BILLING_ERR_PARSE,
                        "fraction has more than 9 digits (nanosecond precision)");
        f->nsec = f->nsec * 10 + (ch - '0');
        n++;
        tp->pos++;
    }
    if (n == 0)
        return perr(tp, BILLING_ERR_PARSE, "expected digits after '.'");
    for (; n < 9; n++)
        f->nsec *= 10;
    return BILLING_OK;
}

static billing_status parse_clock(tparse *tp, tfields *f)
{
    billing_status st;

    st = field(tp, "hour", 2, ':', &f->hour);
    if (st == BILLING_OK)
        st = field(tp, "minute", 2, ':', &f->minute);
    if (st == BILLING_OK)
        st = field(tp, "second", 2, '\0', &f->second);
    if (st != BILLING_OK)
        return st;
    if (f->hour > 23)
        return range_err(tp, "hour", f->hour, 0, 23);
    if (f->minute > 59)
        return range_err(tp, "minute", f->minute, 0, 59);
    if (f->second == 60)
        return perr(tp, BILLING_ERR_PARSE, "second 60 (a leap second) is not supported");
    if (f->second > 59)
        return range_err(tp, "second", f->second, 0, 59);
    return parse_fraction(tp, f);
}

/* 'Z' or +HH:MM / -HH:MM ("-00:00", RFC 3339's unknown offset, counts as UTC). */
static billing_status parse_offset(tparse *tp, tfields *f)
{
    char ch = tp->text[tp->pos];
    int sign;
    int hh;
    int mm;
    billing_status st;

    f->offset = 0;
    if (ch == 'Z' || ch == 'z') {
        tp->pos++;
        return BILLING_OK;
    }
    if (ch != '+' && ch != '-')
        return perr(tp, BILLING_ERR_PARSE, "expected 'Z' or an offset (+HH:MM) after the time");
    sign = ch == '-' ? -1 : 1;
    tp->pos++;
    st = field(tp, "offset hour", 2, ':', &hh);
    if (st == BILLING_OK)
        st = field(tp, "offset minute", 2, '\0', &mm);
    if (st != BILLING_OK)
        return st;
    if (hh > 23)
        return range_err(tp, "offset hour", hh, 0, 23);
    if (mm > 59)
        return range_err(tp, "offset minute", mm, 0, 59);
    f->offset = sign * (hh * 3600 + mm * 60);
    return BILLING_OK;
}

static billing_status parse_fields(tparse *tp, tfields *f)
{
    billing_status st;
    char sep;

    st = parse_date(tp, f);
    if (st != BILLING_OK)
        return st;
    sep = tp->text[tp->pos];
    if (sep != 'T' && sep != 't' && sep != ' ')
        return perr(tp, BILLING_ERR_PARSE, "expected 'T' between the date and the time");
    tp->pos++;
    st = parse_clock(tp, f);
    if (st == BILLING_OK)
        st = parse_offset(tp, f);
    if (st != BILLING_OK)
        return st;
    if (tp->text[tp->pos] != '\0')
        return perr(tp, BILLING_ERR_PARSE, "unexpected characters after the offset");
    return BILLING_OK;
}

/* The instant of @f into *@out: 0, or -1 outside 1900..2200. */
static int to_instant(const tfields *f, billing_time_t *out)
{
    int64_t secs = bl_days_from_civil(f->year, f->month, f->day) * 86400 + f->hour * 3600 +
                   f->minute * 60 + f->second - f->offset;

    if (secs < BL_TIME_MIN / NS || secs > BL_TIME_MAX / NS ||
        (secs == BL_TIME_MAX / NS && f->nsec > 0))
        return -1;
    *out = secs * NS + f->nsec;
    return 0;
}

billing_status billing_time_parse(const char *text, billing_time_t *out, char *errbuf,
                                  size_t errsize)
{
    tparse tp;
    tfields f;
    billing_status st;

    if (text == NULL || out == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "timestamp: NULL argument");
    tp.text = text;
    tp.pos = 0;
    tp.errbuf = errbuf;
    tp.errsize = errsize;
    if (bl_utc20_parse(text, strnlen(text, 21), out) == 0)
        return BILLING_OK;
    /* strnlen bound first: the digit readers stop at NUL, so this only caps messages and work. */
    if (strnlen(text, TIME_TEXT_MAX + 1) > TIME_TEXT_MAX)
        return perr(&tp, BILLING_ERR_PARSE, "too long");
    st = parse_fields(&tp, &f);
    if (st != BILLING_OK)
        return st;
    if (to_instant(&f, out) != 0)
        return perr(&tp, BILLING_ERR_RANGE,
                    "outside the supported range 1900-01-01T00:00:00Z..2200-01-01T00:00:00Z");
    return BILLING_OK;
}

/*
 * The common form is read in place. Anything else is copied out with a
 * NUL: every timestamp accepted fits in TIME_TEXT_MAX, and one byte more
 * is enough for billing_time_parse to refuse a longer one as too long,
 * quoting the same first characters.
 */
billing_status billing_time_parse_n(const char *text, size_t len, billing_time_t *out, char *errbuf,
                                    size_t errsize)
{
    char buf[TIME_TEXT_MAX + 2];
    size_t n = len < TIME_TEXT_MAX + 1 ? len : TIME_TEXT_MAX + 1;

    if (text == NULL || out == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "timestamp: NULL argument");
    if (bl_utc20_parse(text, len, out) == 0)
        return BILLING_OK;
    if (memchr(text, '\0', n) != NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "timestamp: contains a NUL byte");
    memcpy(buf, text, n);
    buf[n] = '\0';
    return billing_time_parse(buf, out, errbuf, errsize);
}

/* ".5", ".000000001": the fraction without trailing zeros, or "" for none. */
static void format_fraction(int32_t nsec, char *buf)
{
    int len = 9;
    int i;

    buf[0] = '\0';
    if (nsec == 0)
        return;
    buf[0] = '.';
    for (i = 9; i >= 1; i--) {
        buf[i] = (char)('0' + nsec % 10);
        nsec /= 10;
    }
    while (buf[len] == '0')
        len--;
    buf[len + 1] = '\0';
}

int billing_time_format(billing_time_t t, char *buf, size_t size)
{
    bl_civil c;
    char frac[11];
    char tmp[48];
    int n;

    bl_zone_to_civil(NULL, t, &c);
    format_fraction(c.nsec, frac);
    n = snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d%sZ", c.year, c.month, c.day,
                 c.hour, c.minute, c.second, frac);
    if (buf == NULL || n < 0 || (size_t)n >= size)
        return -1;
    memcpy(buf, tmp, (size_t)n + 1);
    return n;
}
