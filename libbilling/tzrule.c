/*
 * tzrule.c - POSIX TZ strings: the rule a TZif footer gives for instants
 * past the file's last transition (RFC 8536 section 3.3, POSIX.1-2017
 * section 8.3, including the version 3 extension of transition times
 * from -167 to 167 hours).
 */
#include "config.h"

#include "civil.h"
#include "internal.h"
#include "tzrule.h"

/* POSIX's default transition time of day: 02:00:00 local. */
#define DEFAULT_RULE_TIME 7200

/* The bytes still to parse. */
typedef struct cursor {
    const char *p;
    const char *end;
} cursor;

/* A DST start or end as a UTC instant, for sorting. */
typedef struct rule_event {
    int64_t at;
    int dst; /* 1: DST starts here, 0: it ends */
} rule_event;

/* Years of events collected around an instant: y-1 .. y+2. */
#define EVENT_YEARS 4

static int peek(const cursor *c)
{
    if (c->p >= c->end)
        return -1;
    return (unsigned char)*c->p;
}

static int is_digit(int ch)
{
    return ch >= '0' && ch <= '9';
}

static int is_alpha(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* Consume @ch if it is next; returns 1 if it was. */
static int accept(cursor *c, int ch)
{
    if (peek(c) != ch)
        return 0;
    c->p++;
    return 1;
}

/* 1..@maxdigits decimal digits (few enough that int cannot overflow). */
static int parse_num(cursor *c, int maxdigits, int *out)
{
    int n = 0;
    int value = 0;

    while (n < maxdigits && is_digit(peek(c))) {
        value = value * 10 + (peek(c) - '0');
        c->p++;
        n++;
    }
    if (n == 0 || is_digit(peek(c)))
        return -1;
    *out = value;
    return 0;
}

/* A zone abbreviation: 3+ letters, or 3+ of [A-Za-z0-9+-] between < and >. */
static int parse_name(cursor *c)
{
    int n = 0;
    int ch;

    if (accept(c, '<')) {
        for (ch = peek(c); ch != '>'; ch = peek(c)) {
            if (!(is_alpha(ch) || is_digit(ch) || ch == '+' || ch == '-'))
                return -1;
            c->p++;
            n++;
        }
        c->p++;
        return n >= 3 ? 0 : -1;
    }
    while (is_alpha(peek(c))) {
        c->p++;
        n++;
    }
    return n >= 3 ? 0 : -1;
}

/* [+-]h[h[h]][:mm[:ss]] with h <= @maxhours, as signed seconds. */
static int parse_hms(cursor *c, int maxdigits, int maxhours, int32_t *out)
{
    int sign = 1;
    int h;
    int m = 0;
    int s = 0;

    if (accept(c, '-'))
        sign = -1;
    else
        accept(c, '+');
    if (parse_num(c, maxdigits, &h) != 0 || h > maxhours)
        return -1;
    if (accept(c, ':')) {
        if (parse_num(c, 2, &m) != 0 || m > 59)
            return -1;
        if (accept(c, ':') && (parse_num(c, 2, &s) != 0 || s > 59))
            return -1;
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return 0;
}

/* A UTC offset in POSIX's sign convention (west positive), returned east positive. */
static int parse_offset(cursor *c, int32_t *east)
{
    int32_t west;

    if (parse_hms(c, 2, 24, &west) != 0)
        return -1;
    *east = -west;
    return 0;
}

static int parse_mdate(cursor *c, bl_tzdate *d)
{
    d->kind = 'M';
    if (parse_num(c, 2, &d->month) != 0 || d->month < 1 || d->month > 12)
        return -1;
    if (!accept(c, '.') || parse_num(c, 1, &d->week) != 0 || d->week < 1 || d->week > 5)
        return -1;
    if (!accept(c, '.') || parse_num(c, 1, &d->wday) != 0 || d->wday > 6)
        return -1;
    return 0;
}

/* Jn | n | Mm.w.d, then an optional /time. */
static int parse_date(cursor *c, bl_tzdate *d)
{
    int rc;

    d->day = 0;
    d->month = 0;
    d->week = 0;
    d->wday = 0;
    if (accept(c, 'J')) {
        d->kind = 'J';
        rc = parse_num(c, 3, &d->day) != 0 || d->day < 1 || d->day > 365 ? -1 : 0;
    } else if (accept(c, 'M')) {
        rc = parse_mdate(c, d);
    } else {
        d->kind = 'D';
        rc = parse_num(c, 3, &d->day) != 0 || d->day > 365 ? -1 : 0;
    }
    if (rc != 0)
        return -1;
    d->secs = DEFAULT_RULE_TIME;
    if (accept(c, '/'))
        return parse_hms(c, 3, 167, &d->secs);
    return 0;
}

static int fail(const cursor *c, const char *start, const char *what, char *errbuf, size_t errsize)
{
    bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif footer: %s at byte %ld", what,
              (long)(c->p - start));
    return -1;
}

/* The part after the DST name: [offset],start[/time],end[/time]. */
static int parse_dst_part(cursor *c, const char *start, bl_tzrule *out, char *errbuf,
                          size_t errsize)
{
    out->has_dst = 1;
    out->dst_off = out->std_off + 3600;
    if (peek(c) != ',' && peek(c) != -1 && parse_offset(c, &out->dst_off) != 0)
        return fail(c, start, "bad daylight-time offset", errbuf, errsize);
    if (peek(c) == -1)
        return fail(c, start, "daylight time without transition rules", errbuf, errsize);
    if (!accept(c, ',') || parse_date(c, &out->start) != 0)
        return fail(c, start, "bad DST start rule", errbuf, errsize);
    if (!accept(c, ',') || parse_date(c, &out->end) != 0)
        return fail(c, start, "bad DST end rule", errbuf, errsize);
    return 0;
}

static int periods_alternate(const bl_tzrule *rule);

int bl_tzrule_parse(const char *s, size_t len, bl_tzrule *out, char *errbuf, size_t errsize)
{
    cursor c;

    c.p = s;
    c.end = s + len;
    out->has_dst = 0;
    if (parse_name(&c) != 0)
        return fail(&c, s, "bad standard-time name", errbuf, errsize);
    if (parse_offset(&c, &out->std_off) != 0)
        return fail(&c, s, "bad standard-time offset", errbuf, errsize);
    out->dst_off = out->std_off;
    if (peek(&c) != -1) {
        if (parse_name(&c) != 0)
            return fail(&c, s, "bad daylight-time name", errbuf, errsize);
        if (parse_dst_part(&c, s, out, errbuf, errsize) != 0)
            return -1;
    }
    if (peek(&c) != -1)
        return fail(&c, s, "unexpected characters", errbuf, errsize);
    /*
     * Offsets are computed from the transitions of the years around an
     * instant, which is only right if starts and ends alternate: refuse a
     * rule whose DST period of one year begins before the last one ended
     * (possible with v3 rule times of up to 167 hours).
     */
    if (out->has_dst && !periods_alternate(out))
        return fail(&c, s, "DST periods of consecutive years overlap", errbuf, errsize);
    return 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* Day (since the epoch) on which @d falls in @year. */
static int64_t date_day(const bl_tzdate *d, int year)
{
    int64_t first;
    int64_t day;
    int wday_first;
    int dim;

    if (d->kind == 'J')
        return bl_days_from_civil(year, 1, 1) + d->day - 1 +
               (d->day >= 60 && bl_days_in_month(year, 2) == 29);
    if (d->kind == 'D')
        return bl_days_from_civil(year, 1, 1) + d->day;
    first = bl_days_from_civil(year, d->month, 1);
    /* 1970-01-01 was a Thursday (4). */
    wday_first = (int)(first + 4 - floor_div(first + 4, 7) * 7);
    day = first + (d->wday - wday_first + 7) % 7 + (int64_t)(d->week - 1) * 7;
    dim = bl_days_in_month(year, d->month);
    while (day - first >= dim)
        day -= 7;
    return day;
}

/*
 * Event order: by instant; on a tie the end comes first, so that a DST
 * period that ends exactly when the next one starts (DST all year, as zic
 * writes it: "EST5EDT,0/0,J365/25") stays DST.
 */
static int event_after(const rule_event *a, const rule_event *b)
{
    if (a->at != b->at)
        return a->at > b->at;
    return a->dst > b->dst;
}

/*
 * The DST starts and ends of the years around @secs, in time order. Four
 * years, because a v3 rule time of up to 167 hours can push a year's
 * transition into the next or previous calendar year.
 */
static void collect_events(const bl_tzrule *rule, int64_t secs, rule_event *ev)
{
    int year;
    int month;
    int day;
    int i;
    int j;
    rule_event tmp;

    bl_civil_from_days(floor_div(secs, 86400), &year, &month, &day);
    for (i = 0; i < EVENT_YEARS; i++) {
        ev[2 * i].at =
            date_day(&rule->start, year - 1 + i) * 86400 + rule->start.secs - rule->std_off;
        ev[2 * i].dst = 1;
        ev[2 * i + 1].at =
            date_day(&rule->end, year - 1 + i) * 86400 + rule->end.secs - rule->dst_off;
        ev[2 * i + 1].dst = 0;
    }
    for (i = 1; i < 2 * EVENT_YEARS; i++) {
        tmp = ev[i];
        for (j = i; j > 0 && event_after(&ev[j - 1], &tmp); j--)
            ev[j] = ev[j - 1];
        ev[j] = tmp;
    }
}

/* Years checked by periods_alternate: every year an instant in range can touch. */
#define CHECK_FIRST_YEAR 1897
#define CHECK_LAST_YEAR 2203

/* 1 if, over the supported range, DST starts and ends strictly alternate. */
static int periods_alternate(const bl_tzrule *rule)
{
    rule_event ev[2 * (CHECK_LAST_YEAR - CHECK_FIRST_YEAR + 1)];
    size_t n = 0;
    size_t i;
    size_t j;
    rule_event tmp;
    int year;

    for (year = CHECK_FIRST_YEAR; year <= CHECK_LAST_YEAR; year++) {
        ev[n].at = date_day(&rule->start, year) * 86400 + rule->start.secs - rule->std_off;
        ev[n++].dst = 1;
        ev[n].at = date_day(&rule->end, year) * 86400 + rule->end.secs - rule->dst_off;
        ev[n++].dst = 0;
    }
    /* Insertion sort: the events are nearly in order already. */
    for (i = 1; i < n; i++) {
        tmp = ev[i];
        for (j = i; j > 0 && event_after(&ev[j - 1], &tmp); j--)
            ev[j] = ev[j - 1];
        ev[j] = tmp;
    }
    for (i = 1; i < n; i++) {
        if (ev[i].dst == ev[i - 1].dst)
            return 0;
    }
    return 1;
}

int32_t bl_tzrule_offset(const bl_tzrule *rule, int64_t secs)
{
    rule_event ev[2 * EVENT_YEARS];
    int dst;
    int i;

    if (!rule->has_dst)
        return rule->std_off;
    collect_events(rule, secs, ev);
    dst = !ev[0].dst;
    for (i = 0; i < 2 * EVENT_YEARS && ev[i].at <= secs; i++)
        dst = ev[i].dst;
    return dst ? rule->dst_off : rule->std_off;
}

int bl_tzrule_next(const bl_tzrule *rule, int64_t secs, int64_t *next)
{
    rule_event ev[2 * EVENT_YEARS];
    int i;

    if (!rule->has_dst)
        return 0;
    collect_events(rule, secs, ev);
    for (i = 0; i < 2 * EVENT_YEARS; i++) {
        if (ev[i].at > secs) {
            *next = ev[i].at;
            return 1;
        }
    }
    return 0;
}
