/*
 * check_zone.c - time zones, civil calendar, plan terms and RFC 3339 text
 * (libbilling/zone.c, libbilling/tzrule.c, libbilling/timefmt.c).
 *
 * Real zones come from the system's compiled tzdata ($TZDIR or
 * /usr/share/zoneinfo): the library itself never reads files, the test
 * does. Expected values come from three independent places: dates worked
 * out by hand (and cross-checked with Python's zoneinfo when written),
 * a minimal TZif reader in this file for the transition tables, and
 * glibc's localtime_r (a test-only oracle; the library may not use it)
 * for the POSIX TZ footer rules out to 2200.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "billing.h"
#include "internal.h"
#include "tzrule.h"
#include "zone.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define NS BILLING_NS_PER_SEC
#define HOUR INT64_C(3600)
#define DAY INT64_C(86400)
#define TZIF_BUF 4096

/*
 * Assertions for hot loops. Check's ck_assert* record the location of
 * every passing call too (through a file, when forking), which makes
 * loops of a million checks slow; these only act on failure.
 */
#define CHECK(cond)                            \
    do {                                       \
        if (!(cond))                           \
            ck_abort_msg("failed: %s", #cond); \
    } while (0)
#define CHECK_MSG(cond, ...)           \
    do {                               \
        if (!(cond))                   \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static const char *zoneinfo_dir(void)
{
    const char *dir = getenv("TZDIR");

    return dir != NULL && dir[0] != '\0' ? dir : "/usr/share/zoneinfo";
}

/* The bytes of compiled zone @name; the caller frees them. */
static unsigned char *read_tzif(const char *name, size_t *len)
{
    char path[512];
    FILE *f;
    unsigned char *buf;
    size_t cap = 1 << 20;

    snprintf(path, sizeof(path), "%s/%s", zoneinfo_dir(), name);
    f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (is tzdata installed?)", path);
    buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    *len = fread(buf, 1, cap, f);
    fclose(f);
    ck_assert_msg(*len > 0 && *len < cap, "cannot read %s", path);
    return buf;
}

static billing_zone *load_zone(const char *name)
{
    size_t len;
    unsigned char *data = read_tzif(name, &len);
    char err[256] = "";
    billing_zone *z = NULL;

    ck_assert_msg(billing_zone_new(name, data, len, &z, err, sizeof(err)) == BILLING_OK, "%s: %s",
                  name, err);
    free(data);
    ck_assert_str_eq(billing_zone_name(z), name);
    return z;
}

/* An RFC 3339 text that must parse. */
static billing_time_t ts(const char *text)
{
    billing_time_t t = 0;
    char err[256] = "";

    ck_assert_msg(billing_time_parse(text, &t, err, sizeof(err)) == BILLING_OK, "%s", err);
    return t;
}

static int32_t off_at(const billing_zone *z, const char *text)
{
    return billing_zone_offset(z, ts(text));
}

static bl_civil civ(int y, int mo, int d, int h, int mi, int s)
{
    bl_civil c;

    c.year = y;
    c.month = mo;
    c.day = d;
    c.hour = h;
    c.minute = mi;
    c.second = s;
    c.nsec = 0;
    return c;
}

static void assert_civil(const bl_civil *c, int y, int mo, int d, int h, int mi, int s)
{
    ck_assert_msg(c->year == y && c->month == mo && c->day == d && c->hour == h &&
                      c->minute == mi && c->second == s,
                  "got %04d-%02d-%02d %02d:%02d:%02d, want %04d-%02d-%02d %02d:%02d:%02d", c->year,
                  c->month, c->day, c->hour, c->minute, c->second, y, mo, d, h, mi, s);
}

static int civil_eq(const bl_civil *a, const bl_civil *b)
{
    return a->year == b->year && a->month == b->month && a->day == b->day && a->hour == b->hour &&
           a->minute == b->minute && a->second == b->second && a->nsec == b->nsec;
}

/* Seconds of the local wall time @c as if it were UTC. */
static int64_t local_secs(const bl_civil *c)
{
    return bl_days_from_civil(c->year, c->month, c->day) * DAY + c->hour * HOUR + c->minute * 60 +
           c->second;
}

/* Fixed-seed xorshift, so that failures replay. */
static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- building synthetic TZif files ---- */

typedef struct syn_zone {
    char version; /* 0, '2', '3', '4' */
    size_t n_trans;
    const int64_t *trans;
    const unsigned char *idx;
    size_t n_types;
    const int32_t *utoff;
    const unsigned char *isdst;
    const char *footer; /* without newlines; NULL for a v1 file */
} syn_zone;

static unsigned char *put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

static unsigned char *put64(unsigned char *p, int64_t v)
{
    p = put32(p, (uint32_t)((uint64_t)v >> 32));
    return put32(p, (uint32_t)(uint64_t)v);
}

static unsigned char *put_header(unsigned char *p, char version, size_t timecnt, size_t typecnt)
{
    memcpy(p, "TZif", 4);
    p[4] = (unsigned char)version;
    memset(p + 5, 0, 15);
    p = put32(p + 20, (uint32_t)typecnt); /* isutcnt */
    p = put32(p, (uint32_t)typecnt);      /* isstdcnt */
    p = put32(p, 0);                      /* leapcnt */
    p = put32(p, (uint32_t)timecnt);
    p = put32(p, (uint32_t)typecnt);
    return put32(p, 4); /* charcnt: "ABC\0" */
}

static unsigned char *put_block(unsigned char *p, const syn_zone *s, int tsize)
{
    size_t i;

    for (i = 0; i < s->n_trans; i++)
        p = tsize == 8 ? put64(p, s->trans[i]) : put32(p, (uint32_t)(int32_t)s->trans[i]);
    for (i = 0; i < s->n_trans; i++)
        *p++ = s->idx[i];
    for (i = 0; i < s->n_types; i++) {
        p = put32(p, (uint32_t)s->utoff[i]);
        *p++ = s->isdst[i];
        *p++ = 0;
    }
    memcpy(p, "ABC", 4);
    p += 4;
    memset(p, 0, 2 * s->n_types);
    return p + 2 * s->n_types;
}

/* Write @s as TZif into @buf (TZIF_BUF bytes); returns the length. */
static size_t build_tzif(const syn_zone *s, unsigned char *buf)
{
    unsigned char *p = buf;
    size_t flen;

    ck_assert_uint_lt(s->n_trans * 13 + s->n_types * 8 + 256, TZIF_BUF / 2);
    p = put_header(p, s->version, s->n_trans, s->n_types);
    p = put_block(p, s, 4);
    if (s->version == 0)
        return (size_t)(p - buf);
    p = put_header(p, s->version, s->n_trans, s->n_types);
    p = put_block(p, s, 8);
    flen = strlen(s->footer);
    ck_assert_uint_lt(flen, TZIF_BUF / 4);
    *p++ = '\n';
    memcpy(p, s->footer, flen);
    p += flen;
    *p++ = '\n';
    return (size_t)(p - buf);
}

/* A zone with no transitions and only the footer @footer (and one type @utoff). */
static billing_zone *footer_zone(const char *footer, int32_t utoff, char *err, size_t errsize)
{
    unsigned char buf[TZIF_BUF];
    unsigned char isdst = 0;
    syn_zone s = {'2', 0, NULL, NULL, 1, NULL, NULL, NULL};
    billing_zone *z = NULL;
    size_t len;

    s.utoff = &utoff;
    s.isdst = &isdst;
    s.footer = footer;
    len = build_tzif(&s, buf);
    billing_zone_new("Test/Footer", buf, len, &z, err, errsize); /* z is NULL on failure */
    return z;
}

/* Exercise every entry point on a zone that parsed from doubtful data. */
static void exercise_zone(const billing_zone *z)
{
    static const int64_t secs[] = {INT64_C(-2208988800), INT64_C(-1),         0,
                                   INT64_C(1772953200),  INT64_C(4102444800), INT64_C(7258118399)};
    size_t i;
    bl_civil c;
    billing_time_t t;
    billing_time_t out;
    int32_t off;
    int y;
    int m;

    for (i = 0; i < N_ELEMS(secs); i++) {
        t = secs[i] * NS;
        off = billing_zone_offset(z, t);
        CHECK(off <= 93599);
        CHECK(off >= -93599);
        bl_zone_to_civil(z, t, &c);
        (void)bl_zone_from_civil(z, &c, &out);
        (void)bl_zone_add_months(z, t, 13, &out);
        (void)bl_zone_next_month_start(z, t);
        billing_zone_year_month(z, t, &y, &m);
        CHECK(m >= 1);
        CHECK(m <= 12);
        (void)billing_zone_month_start(z, c.year, c.month, &out);
    }
}

/* ------------------------------------------------------------------ */
/* Civil calendar                                                      */
/* ------------------------------------------------------------------ */

static const struct days_case {
    int y, m, d;
    int64_t days;
} days_cases[] = {
    {1970, 1, 1, 0},      {1969, 12, 31, -1},     {2000, 2, 29, 11016},    {2000, 3, 1, 11017},
    {1900, 1, 1, -25567}, {1900, 3, 1, -25508},   {2200, 1, 1, 84006},     {2026, 1, 31, 20484},
    {1, 1, 1, -719162},   {1600, 2, 29, -135081}, {9999, 12, 31, 2932896}, {2100, 2, 28, 47540},
    {2100, 3, 1, 47541},
};

START_TEST(test_days_from_civil_table)
{
    size_t i;
    int y;
    int m;
    int d;

    for (i = 0; i < N_ELEMS(days_cases); i++) {
        const struct days_case *c = &days_cases[i];
        ck_assert_int_eq(bl_days_from_civil(c->y, c->m, c->d), c->days);
        bl_civil_from_days(c->days, &y, &m, &d);
        ck_assert_int_eq(y, c->y);
        ck_assert_int_eq(m, c->m);
        ck_assert_int_eq(d, c->d);
    }
}
END_TEST

/* Every day 1900..2200 in order: consecutive day numbers, exact round trip. */
START_TEST(test_days_every_day)
{
    int64_t expect = bl_days_from_civil(1900, 1, 1);
    int y;
    int m;
    int d;
    int ry;
    int rm;
    int rd;

    CHECK(expect == -25567);
    for (y = 1900; y < 2200; y++) {
        for (m = 1; m <= 12; m++) {
            for (d = 1; d <= bl_days_in_month(y, m); d++) {
                CHECK(bl_days_from_civil(y, m, d) == expect);
                bl_civil_from_days(expect, &ry, &rm, &rd);
                CHECK(ry == y && rm == m && rd == d);
                expect++;
            }
        }
    }
    CHECK(expect == bl_days_from_civil(2200, 1, 1));
    CHECK(expect == 84006);
}
END_TEST

START_TEST(test_days_in_month)
{
    ck_assert_int_eq(bl_days_in_month(1900, 2), 28);
    ck_assert_int_eq(bl_days_in_month(2000, 2), 29);
    ck_assert_int_eq(bl_days_in_month(2024, 2), 29);
    ck_assert_int_eq(bl_days_in_month(2026, 2), 28);
    ck_assert_int_eq(bl_days_in_month(2100, 2), 28);
    ck_assert_int_eq(bl_days_in_month(2026, 1), 31);
    ck_assert_int_eq(bl_days_in_month(2026, 4), 30);
    ck_assert_int_eq(bl_days_in_month(2026, 12), 31);
    ck_assert_int_eq(bl_days_in_month(2026, 0), 0);
    ck_assert_int_eq(bl_days_in_month(2026, 13), 0);
}
END_TEST

/* The public calendar (what store/invoices.c reads timestamp text with) agrees and range-checks. */
START_TEST(test_billing_civil_days)
{
    int64_t days = 42;

    ck_assert_int_eq(billing_civil_days(1970, 1, 1, &days), BILLING_OK);
    ck_assert_int_eq(days, 0);
    ck_assert_int_eq(billing_civil_days(2024, 2, 29, &days), BILLING_OK);
    ck_assert_int_eq(days, bl_days_from_civil(2024, 2, 29));
    ck_assert_int_eq(billing_civil_days(1899, 12, 31, &days), BILLING_OK);
    ck_assert_int_eq(days, -25568);
    days = 42;
    ck_assert_int_eq(billing_civil_days(2026, 2, 29, &days), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_civil_days(2026, 13, 1, &days), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_civil_days(2026, 4, 0, &days), BILLING_ERR_RANGE);
    ck_assert_int_eq(days, 42);
    ck_assert_int_eq(billing_civil_days(2026, 4, 1, NULL), BILLING_ERR_INVALID);
}
END_TEST

/* Civil days far outside the supported range stay defined (clamped, no overflow). */
START_TEST(test_civil_from_days_extremes)
{
    int y;
    int m;
    int d;

    bl_civil_from_days(INT64_MAX, &y, &m, &d);
    ck_assert_int_gt(y, 1000000000);
    bl_civil_from_days(INT64_MIN, &y, &m, &d);
    ck_assert_int_lt(y, -1000000000);
    ck_assert(m >= 1 && m <= 12 && d >= 1 && d <= 31);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Offsets of real zones                                               */
/* ------------------------------------------------------------------ */

START_TEST(test_utc)
{
    billing_zone *z = billing_zone_new_utc();
    billing_time_t t;

    ck_assert_ptr_nonnull(z);
    ck_assert_str_eq(billing_zone_name(z), "UTC");
    ck_assert_int_eq(off_at(z, "2026-07-01T00:00:00Z"), 0);
    ck_assert_int_eq(billing_zone_month_start(z, 1900, 1, &t), BILLING_OK);
    ck_assert_int_eq(t, BL_TIME_MIN);
    ck_assert_int_eq(billing_zone_month_start(z, 2200, 1, &t), BILLING_OK);
    ck_assert_int_eq(t, BL_TIME_MAX);
    ck_assert_int_eq(billing_zone_month_start(z, 2200, 2, &t), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_zone_month_start(z, 1899, 12, &t), BILLING_ERR_RANGE);
    billing_zone_destroy(z);
}
END_TEST

START_TEST(test_shanghai)
{
    billing_zone *z = load_zone("Asia/Shanghai");

    ck_assert_int_eq(off_at(z, "2026-01-15T00:00:00Z"), 28800);
    ck_assert_int_eq(off_at(z, "2026-07-01T00:00:00Z"), 28800);
    /* China observed DST 1986-1991. */
    ck_assert_int_eq(off_at(z, "1988-07-01T00:00:00Z"), 32400);
    ck_assert_int_eq(off_at(z, "1988-01-01T00:00:00Z"), 28800);
    ck_assert_int_eq(off_at(z, "2100-07-01T00:00:00Z"), 28800);
    ck_assert_int_eq(off_at(z, "2199-12-31T23:59:59Z"), 28800);
    billing_zone_destroy(z);
}
END_TEST

START_TEST(test_new_york_2026)
{
    billing_zone *z = load_zone("America/New_York");

    ck_assert_int_eq(off_at(z, "2026-01-15T12:00:00Z"), -18000);
    ck_assert_int_eq(off_at(z, "2026-03-08T06:59:59.999999999Z"), -18000);
    ck_assert_int_eq(off_at(z, "2026-03-08T07:00:00Z"), -14400);
    ck_assert_int_eq(off_at(z, "2026-07-01T00:00:00Z"), -14400);
    ck_assert_int_eq(off_at(z, "2026-11-01T05:59:59.999999999Z"), -14400);
    ck_assert_int_eq(off_at(z, "2026-11-01T06:00:00Z"), -18000);
    billing_zone_destroy(z);
}
END_TEST

/* Past the last transition in the file the footer rule must keep switching. */
START_TEST(test_new_york_2100_footer)
{
    billing_zone *z = load_zone("America/New_York");

    ck_assert_int_eq(off_at(z, "2100-01-15T00:00:00Z"), -18000);
    ck_assert_int_eq(off_at(z, "2100-07-15T00:00:00Z"), -14400);
    ck_assert_int_eq(off_at(z, "2100-03-14T06:59:59.999999999Z"), -18000);
    ck_assert_int_eq(off_at(z, "2100-03-14T07:00:00Z"), -14400);
    ck_assert_int_eq(off_at(z, "2100-11-07T05:59:59Z"), -14400);
    ck_assert_int_eq(off_at(z, "2100-11-07T06:00:00Z"), -18000);
    ck_assert_int_eq(off_at(z, "2199-12-31T23:59:59Z"), -18000);
    billing_zone_destroy(z);
}
END_TEST

START_TEST(test_london)
{
    billing_zone *z = load_zone("Europe/London");

    ck_assert_int_eq(off_at(z, "2026-01-15T00:00:00Z"), 0);
    ck_assert_int_eq(off_at(z, "2026-03-29T00:59:59Z"), 0);
    ck_assert_int_eq(off_at(z, "2026-03-29T01:00:00Z"), 3600);
    ck_assert_int_eq(off_at(z, "2026-10-25T00:59:59Z"), 3600);
    ck_assert_int_eq(off_at(z, "2026-10-25T01:00:00Z"), 0);
    ck_assert_int_eq(off_at(z, "2100-03-28T00:59:59Z"), 0);
    ck_assert_int_eq(off_at(z, "2100-03-28T01:00:00Z"), 3600);
    ck_assert_int_eq(off_at(z, "2100-10-31T01:00:00Z"), 0);
    /* British Standard Time: GMT+1 all year from 1968-10-27 to 1971-10-31. */
    ck_assert_int_eq(off_at(z, "1970-01-01T00:00:00Z"), 3600);
    billing_zone_destroy(z);
}
END_TEST

/* Southern hemisphere: DST spans the new year. */
START_TEST(test_sydney)
{
    billing_zone *z = load_zone("Australia/Sydney");

    ck_assert_int_eq(off_at(z, "2026-01-15T00:00:00Z"), 39600);
    ck_assert_int_eq(off_at(z, "2026-04-04T15:59:59Z"), 39600);
    ck_assert_int_eq(off_at(z, "2026-04-04T16:00:00Z"), 36000);
    ck_assert_int_eq(off_at(z, "2026-07-01T00:00:00Z"), 36000);
    ck_assert_int_eq(off_at(z, "2026-10-03T15:59:59Z"), 36000);
    ck_assert_int_eq(off_at(z, "2026-10-03T16:00:00Z"), 39600);
    ck_assert_int_eq(off_at(z, "2100-01-15T00:00:00Z"), 39600);
    ck_assert_int_eq(off_at(z, "2100-07-15T00:00:00Z"), 36000);
    ck_assert_int_eq(off_at(z, "2100-04-03T15:59:59Z"), 39600);
    ck_assert_int_eq(off_at(z, "2100-04-03T16:00:00Z"), 36000);
    ck_assert_int_eq(off_at(z, "2100-10-02T15:59:59Z"), 36000);
    ck_assert_int_eq(off_at(z, "2100-10-02T16:00:00Z"), 39600);
    ck_assert_int_eq(off_at(z, "2199-12-31T12:00:00Z"), 39600);
    billing_zone_destroy(z);
}
END_TEST

START_TEST(test_kolkata)
{
    billing_zone *z = load_zone("Asia/Kolkata");
    bl_civil c;

    ck_assert_int_eq(off_at(z, "2026-01-15T00:00:00Z"), 19800);
    ck_assert_int_eq(off_at(z, "2150-06-15T00:00:00Z"), 19800);
    bl_zone_to_civil(z, ts("2026-01-31T18:30:00Z"), &c);
    assert_civil(&c, 2026, 2, 1, 0, 0, 0);
    billing_zone_destroy(z);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Transition tables against an independent reader                     */
/* ------------------------------------------------------------------ */

/* Just enough of RFC 8536 to read a trusted file's 64-bit block. */
typedef struct ref_zone {
    size_t n;
    int64_t *trans;
    int32_t *utoff; /* offset after each transition */
    int32_t type0;
} ref_zone;

static uint32_t ref_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void ref_read(const unsigned char *d, size_t len, ref_zone *r)
{
    const unsigned char *h = d;
    const unsigned char *p;
    size_t i;
    uint32_t cnt[6];

    for (i = 0; i < 6; i++)
        cnt[i] = ref_u32(h + 20 + 4 * i);
    /* Skip the v1 block: times 4, idx 1, types 6, chars, leaps 8, indicators. */
    h += 44 + cnt[3] * 5 + cnt[4] * 6 + cnt[5] + cnt[2] * 8 + cnt[1] + cnt[0];
    ck_assert_uint_lt((size_t)(h - d), len);
    for (i = 0; i < 6; i++)
        cnt[i] = ref_u32(h + 20 + 4 * i);
    p = h + 44;
    r->n = cnt[3];
    r->trans = malloc((r->n + 1) * sizeof(*r->trans));
    r->utoff = malloc((r->n + 1) * sizeof(*r->utoff));
    ck_assert(r->trans != NULL && r->utoff != NULL);
    for (i = 0; i < r->n; i++)
        r->trans[i] = (int64_t)(((uint64_t)ref_u32(p + 8 * i) << 32) | ref_u32(p + 8 * i + 4));
    p += 8 * r->n;
    for (i = 0; i < r->n; i++)
        r->utoff[i] = (int32_t)ref_u32(p + r->n + 6 * p[i]);
    r->type0 = (int32_t)ref_u32(p + r->n);
}

/* Linear scan: the offset the table gives at @secs (before the footer takes over). */
static int32_t ref_offset(const ref_zone *r, int64_t secs)
{
    int32_t off = r->type0;
    size_t i;

    for (i = 0; i < r->n && r->trans[i] <= secs; i++)
        off = r->utoff[i];
    return off;
}

static void check_table(const char *name)
{
    size_t len;
    unsigned char *data = read_tzif(name, &len);
    billing_zone *z = load_zone(name);
    ref_zone r;
    size_t i;
    int64_t t;
    int64_t s;
    int32_t before;

    ref_read(data, len, &r);
    CHECK(r.n > 0);
    for (i = 0; i < r.n; i++) {
        t = r.trans[i];
        if (t <= INT64_MIN / NS + 1 || t >= INT64_MAX / NS)
            continue;
        before = i == 0 ? r.type0 : r.utoff[i - 1];
        CHECK_MSG(billing_zone_offset(z, t * NS) == r.utoff[i], "%s transition %zu", name, i);
        CHECK_MSG(billing_zone_offset(z, t * NS - 1) == before, "%s before %zu", name, i);
        /* The footer rule, when it takes over, must agree with the last type. */
        CHECK(billing_zone_offset(z, t * NS + NS / 2) == r.utoff[i]);
    }
    /* Brute force between transitions: every 3 days + 1 hour, 1900 to the last one. */
    for (s = INT64_C(-2208988800); s < r.trans[r.n - 1]; s += 3 * DAY + HOUR)
        CHECK_MSG(billing_zone_offset(z, s * NS) == ref_offset(&r, s), "%s at %lld", name,
                  (long long)s);
    free(r.trans);
    free(r.utoff);
    free(data);
    billing_zone_destroy(z);
}

START_TEST(test_transitions_exact)
{
    static const char *const names[] = {
        "America/New_York", "Asia/Shanghai", "Australia/Sydney", "Europe/London",
        "Asia/Kolkata",     "Europe/Dublin", "America/Nuuk",     "Australia/Lord_Howe"};
    size_t i;

    for (i = 0; i < N_ELEMS(names); i++)
        check_table(names[i]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Footer rules against glibc (test-only oracle)                       */
/* ------------------------------------------------------------------ */

static long libc_offset(int64_t secs)
{
    time_t tt = (time_t)secs;
    struct tm tm;

    ck_assert_ptr_nonnull(localtime_r(&tt, &tm));
    return tm.tm_gmtoff;
}

/* First second in (a, b] whose offset differs from a's. */
static int64_t find_change(const billing_zone *z, int64_t a, int64_t b)
{
    int32_t first = billing_zone_offset(z, a * NS);
    int64_t mid;

    while (b - a > 1) {
        mid = a + (b - a) / 2;
        if (billing_zone_offset(z, mid * NS) == first)
            a = mid;
        else
            b = mid;
    }
    return b;
}

static void check_against_libc(const char *name)
{
    billing_zone *z = load_zone(name);
    char tzvar[300];
    int64_t s;
    int64_t prev;
    int64_t change;
    int32_t off;
    int32_t prev_off;
    int changes = 0;

    snprintf(tzvar, sizeof(tzvar), ":%s", name);
    CHECK(setenv("TZ", tzvar, 1) == 0);
    tzset();
    prev = INT64_C(-2208988800);
    prev_off = billing_zone_offset(z, prev * NS);
    CHECK(prev_off == libc_offset(prev));
    for (s = prev + 90780; s < INT64_C(7258118400); s += 90780) {
        off = billing_zone_offset(z, s * NS);
        CHECK_MSG(off == libc_offset(s), "%s at %lld: %d vs libc %ld", name, (long long)s, off,
                  libc_offset(s));
        if (off != prev_off) {
            change = find_change(z, prev, s);
            CHECK(libc_offset(change) == billing_zone_offset(z, change * NS));
            CHECK(libc_offset(change - 1) == billing_zone_offset(z, change * NS - 1));
            changes++;
        }
        prev = s;
        prev_off = off;
    }
    /* Every one of these zones has changed its offset at least once since 1900. */
    CHECK_MSG(changes > 0, "%s: no change found", name);
    billing_zone_destroy(z);
}

START_TEST(test_footer_against_libc)
{
    static const char *const names[] = {
        "America/New_York",  "Europe/London",    "Australia/Sydney",    "Asia/Shanghai",
        "Asia/Kolkata",      "Asia/Jerusalem",   "America/Nuuk",        "Europe/Dublin",
        "America/Santiago",  "Pacific/Chatham",  "Australia/Lord_Howe", "Antarctica/Troll",
        "Africa/Casablanca", "America/Sao_Paulo"};
    size_t i;

    for (i = 0; i < N_ELEMS(names); i++)
        check_against_libc(names[i]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Footer rules, synthetic                                             */
/* ------------------------------------------------------------------ */

static const struct footer_case {
    const char *footer;
    const char *at;
    int32_t offset;
} footer_cases[] = {
    {"EST5EDT,M3.2.0,M11.1.0", "2026-03-08T06:59:59Z", -18000},
    {"EST5EDT,M3.2.0,M11.1.0", "2026-03-08T07:00:00Z", -14400},
    {"EST5EDT,M3.2.0,M11.1.0", "2026-11-01T06:00:00Z", -18000},
    /* v3: a time past 24:00 (Friday 02:00 written as Thursday 26:00). */
    {"IST-2IDT,M3.4.4/26,M10.5.0", "2026-03-26T23:59:59Z", 7200},
    {"IST-2IDT,M3.4.4/26,M10.5.0", "2026-03-27T00:00:00Z", 10800},
    {"IST-2IDT,M3.4.4/26,M10.5.0", "2026-10-24T22:59:59Z", 10800},
    {"IST-2IDT,M3.4.4/26,M10.5.0", "2026-10-24T23:00:00Z", 7200},
    /* v3: a negative time (the day before at 23:00). */
    {"<-02>2<-01>,M3.5.0/-1,M10.5.0/0", "2026-03-29T00:59:59Z", -7200},
    {"<-02>2<-01>,M3.5.0/-1,M10.5.0/0", "2026-03-29T01:00:00Z", -3600},
    {"<-02>2<-01>,M3.5.0/-1,M10.5.0/0", "2026-10-25T00:59:59Z", -3600},
    {"<-02>2<-01>,M3.5.0/-1,M10.5.0/0", "2026-10-25T01:00:00Z", -7200},
    /* Zero-based day numbers: day 59 is Mar 1, or Feb 29 in a leap year. */
    {"AAA-1BBB,59/0,300/0", "2027-02-28T22:59:59Z", 3600},
    {"AAA-1BBB,59/0,300/0", "2027-02-28T23:00:00Z", 7200},
    {"AAA-1BBB,59/0,300/0", "2027-10-27T21:59:59Z", 7200},
    {"AAA-1BBB,59/0,300/0", "2027-10-27T22:00:00Z", 3600},
    {"AAA-1BBB,59/0,300/0", "2028-02-27T23:00:00Z", 3600},
    {"AAA-1BBB,59/0,300/0", "2028-02-28T23:00:00Z", 7200},
    /* Julian days never count Feb 29: J60 is Mar 1 every year. */
    {"AAA-1BBB,J60/0,J300/0", "2028-02-29T22:59:59Z", 3600},
    {"AAA-1BBB,J60/0,J300/0", "2028-02-29T23:00:00Z", 7200},
    {"AAA-1BBB,J60/0,J300/0", "2028-10-26T21:59:59Z", 7200},
    {"AAA-1BBB,J60/0,J300/0", "2028-10-26T22:00:00Z", 3600},
    /* DST all year, as zic writes it. */
    {"EST5EDT,0/0,J365/25", "2030-01-01T00:00:00Z", -14400},
    {"EST5EDT,0/0,J365/25", "2030-01-01T05:00:00Z", -14400},
    {"EST5EDT,0/0,J365/25", "2030-07-01T00:00:00Z", -14400},
    {"EST5EDT,0/0,J365/25", "2032-12-31T23:59:59Z", -14400},
    /* Negative DST: winter is the "daylight" time. */
    {"IST-1GMT0,M10.5.0,M3.5.0/1", "2026-01-15T00:00:00Z", 0},
    {"IST-1GMT0,M10.5.0,M3.5.0/1", "2026-07-15T00:00:00Z", 3600},
    {"IST-1GMT0,M10.5.0,M3.5.0/1", "2026-03-29T01:00:00Z", 3600},
    {"IST-1GMT0,M10.5.0,M3.5.0/1", "2026-10-25T01:00:00Z", 0},
    /* Standard time only, quoted name, minutes in the offset. */
    {"<+0530>-5:30", "2150-01-01T00:00:00Z", 19800},
    {"<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45", "2026-07-01T00:00:00Z", 45900},
    {"<+1245>-12:45<+1345>,M9.5.0/2:45,M4.1.0/3:45", "2026-01-01T00:00:00Z", 49500},
    /* "24" hours: Saturday 24:00 is Sunday 00:00. */
    {"<-04>4<-03>,M9.1.6/24,M4.1.6/24", "2026-09-06T03:59:59Z", -14400},
    {"<-04>4<-03>,M9.1.6/24,M4.1.6/24", "2026-09-06T04:00:00Z", -10800},
    /* Week 5 means the last such weekday, even when the month has only 4. */
    {"XXX0YYY,M2.5.0/0,M10.1.0/0", "2026-02-22T00:00:00Z", 3600},
    {"XXX0YYY,M2.5.0/0,M10.1.0/0", "2026-02-21T23:59:59Z", 0},
    /* Explicit DST offset (two hours). */
    {"<+00>0<+02>-2,M3.5.0/1,M10.5.0/3", "2026-07-01T00:00:00Z", 7200},
    {"<+00>0<+02>-2,M3.5.0/1,M10.5.0/3", "2026-03-29T01:00:00Z", 7200},
    /* The extremes of a v3 time. */
    {"AAA0BBB,M3.1.0/167,M10.1.0/-167", "2026-03-07T22:59:59Z", 0},
    {"AAA0BBB,M3.1.0/167,M10.1.0/-167", "2026-03-07T23:00:00Z", 3600},
};

START_TEST(test_footer_rules)
{
    size_t i;
    char err[256];
    billing_zone *z;

    for (i = 0; i < N_ELEMS(footer_cases); i++) {
        const struct footer_case *c = &footer_cases[i];
        z = footer_zone(c->footer, 0, err, sizeof(err));
        ck_assert_msg(z != NULL, "%s: %s", c->footer, err);
        ck_assert_msg(off_at(z, c->at) == c->offset, "%s at %s: got %d want %d", c->footer, c->at,
                      off_at(z, c->at), c->offset);
        billing_zone_destroy(z);
    }
}
END_TEST

static const char *const bad_footers[] = {
    "EST",                         /* no offset */
    "ES5",                         /* name too short */
    "<AB>5",                       /* quoted name too short */
    "<ABC5",                       /* unterminated quote */
    "<A/C>5",                      /* bad character in quoted name */
    "EST5EDT",                     /* DST without rules */
    "EST5EDT4",                    /* DST without rules */
    "EST5EDT,M3.2.0",              /* no end rule */
    "EST5EDT,M13.2.0,M11.1.0",     /* month 13 */
    "EST5EDT,M3.6.0,M11.1.0",      /* week 6 */
    "EST5EDT,M3.2.7,M11.1.0",      /* weekday 7 */
    "EST5EDT,J0,J365",             /* Julian day 0 */
    "EST5EDT,366,0",               /* day 366 */
    "EST5EDT,M3.2.0/168,M11.1.0",  /* time past 167 hours */
    "EST5EDT,M3.2.0/2:60,M11.1.0", /* minute 60 */
    "EST25",                       /* offset past 24 hours */
    "EST5:60",                     /* offset minute 60 */
    "EST5 ",                       /* trailing space */
    "EST5EDT,M3.2.0,M11.1.0x",     /* trailing characters */
    "EST5EDT,M3.2.0,M11.1.0,",     /* trailing comma */
    "EST005",                      /* three-digit offset hours */
    "5EST",                        /* no name */
    /* One year's DST begins before the last one ended (found by fuzz_tzif). */
    "EST5EDT,M1.2.0/-167,365/6",
    "EST5EDT,J1/-100,J365/100",
};

START_TEST(test_footer_rejected)
{
    size_t i;
    char err[256];
    billing_zone *z;

    for (i = 0; i < N_ELEMS(bad_footers); i++) {
        err[0] = '\0';
        z = footer_zone(bad_footers[i], 0, err, sizeof(err));
        ck_assert_msg(z == NULL, "accepted footer '%s'", bad_footers[i]);
        ck_assert_msg(strstr(err, "TZif footer") != NULL, "%s: %s", bad_footers[i], err);
    }
}
END_TEST

/* A zone with a transition table and no footer keeps its last type. */
START_TEST(test_empty_footer_and_v1)
{
    static const int64_t trans[] = {INT64_C(1000000000), INT64_C(2000000000)};
    static const unsigned char idx[] = {1, 2};
    static const int32_t utoff[] = {3600, 7200, -1800};
    static const unsigned char isdst[] = {0, 1, 0};
    syn_zone s = {'2', 2, trans, idx, 3, utoff, isdst, ""};
    unsigned char buf[TZIF_BUF];
    size_t len;
    char err[256];
    billing_zone *z;
    char version;
    static const char versions[] = {'2', '3', '4', 0};
    size_t i;

    for (i = 0; i < N_ELEMS(versions); i++) {
        version = versions[i];
        s.version = version;
        s.footer = version == 0 ? NULL : "";
        len = build_tzif(&s, buf);
        billing_zone_new("Test/Table", buf, len, &z, err, sizeof(err));
        ck_assert_msg(z != NULL, "version %d: %s", version, err);
        ck_assert_int_eq(billing_zone_offset(z, 999999999 * NS), 3600);
        ck_assert_int_eq(billing_zone_offset(z, 1000000000 * NS - 1), 3600);
        ck_assert_int_eq(billing_zone_offset(z, 1000000000 * NS), 7200);
        ck_assert_int_eq(billing_zone_offset(z, 2000000000 * NS - 1), 7200);
        ck_assert_int_eq(billing_zone_offset(z, 2000000000 * NS), -1800);
        ck_assert_int_eq(billing_zone_offset(z, BL_TIME_MAX), -1800);
        ck_assert_int_eq(billing_zone_offset(z, BL_TIME_MIN), 3600);
        billing_zone_destroy(z);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Malformed TZif                                                      */
/* ------------------------------------------------------------------ */

/* Patch a 32-bit count in the second (v2) header of a synthetic file. */
static void patch_count(unsigned char *buf, size_t hdr2, int which, uint32_t v)
{
    put32(buf + hdr2 + 20 + 4 * which, v);
}

static void expect_error(const unsigned char *buf, size_t len, const char *fragment)
{
    char err[256] = "";
    billing_zone *z = NULL;

    ck_assert_msg(billing_zone_new("Test/Bad", buf, len, &z, err, sizeof(err)) != BILLING_OK,
                  "accepted data expected to fail with '%s'", fragment);
    ck_assert_ptr_null(z);
    ck_assert_msg(strstr(err, fragment) != NULL, "message '%s' lacks '%s'", err, fragment);
}

START_TEST(test_tzif_errors)
{
    static const int64_t trans[] = {INT64_C(1000000000), INT64_C(2000000000)};
    static const unsigned char idx[] = {1, 0};
    static const int32_t utoff[] = {3600, 7200};
    static const unsigned char isdst[] = {0, 1};
    syn_zone s = {'2', 2, trans, idx, 2, utoff, isdst, "AAA-1"};
    unsigned char good[TZIF_BUF];
    unsigned char buf[TZIF_BUF];
    size_t len = build_tzif(&s, good);
    /* v1 block: 2*4 + 2 + 2*6 + 4 + 2 + 2 = 30 bytes after the 44-byte header. */
    size_t hdr2 = 44 + 30;
    size_t body2 = hdr2 + 44;
    unsigned char *big;

    memcpy(buf, good, len);
    ck_assert_int_eq(memcmp(buf + hdr2, "TZif", 4), 0);
    expect_error(buf, 10, "truncated header");
    buf[2] = 'j';
    expect_error(buf, len, "bad magic");
    memcpy(buf, good, len);
    buf[4] = '5';
    expect_error(buf, len, "unsupported version");
    memcpy(buf, good, len);
    buf[hdr2 + 4] = '3';
    expect_error(buf, len, "version differs");
    memcpy(buf, good, len);
    patch_count(buf, hdr2, 3, 1000000);
    expect_error(buf, len, "truncated transition table");
    patch_count(buf, hdr2, 3, UINT32_MAX);
    expect_error(buf, len, "truncated transition table");
    memcpy(buf, good, len);
    expect_error(buf, body2 + 10, "truncated transition table");
    expect_error(buf, body2 + 17, "truncated transition type indices");
    expect_error(buf, body2 + 20, "truncated local time types");
    expect_error(buf, body2 + 30, "truncated time zone designations");
    expect_error(buf, body2 + 35, "truncated standard/UT");
    expect_error(buf, hdr2 + 10, "truncated header");
    expect_error(buf, 50, "truncated version 1");
    expect_error(buf, len - 1, "unterminated footer");
    expect_error(buf, body2 + 38, "missing footer");
    patch_count(buf, hdr2, 4, 0);
    expect_error(buf, len, "type count");
    patch_count(buf, hdr2, 4, 300);
    expect_error(buf, len, "type count");
    memcpy(buf, good, len);
    patch_count(buf, hdr2, 2, 1);
    expect_error(buf, len, "leap-second");
    memcpy(buf, good, len);
    patch_count(buf, hdr2, 5, 0);
    expect_error(buf, len, "designation");
    memcpy(buf, good, len);
    patch_count(buf, hdr2, 1, 1);
    expect_error(buf, len, "indicator counts");
    memcpy(buf, good, len);
    put64(buf + body2 + 8, 1000000000); /* second transition equals the first */
    expect_error(buf, len, "not strictly ascending");
    memcpy(buf, good, len);
    buf[body2 + 17] = 2; /* index of the second transition */
    expect_error(buf, len, "uses type 2");
    memcpy(buf, good, len);
    put32(buf + body2 + 18, 100000); /* type 0 utoff */
    expect_error(buf, len, "UTC offset");
    memcpy(buf, good, len);
    buf[body2 + 18 + 4] = 2; /* type 0 isdst */
    expect_error(buf, len, "DST flag");
    memcpy(buf, good, len);
    buf[body2 + 18 + 5] = 4; /* type 0 designation index == charcnt */
    expect_error(buf, len, "designation index");
    memcpy(buf, good, len);
    buf[body2 + 33] = 'x'; /* last designation byte */
    expect_error(buf, len, "NUL-terminated");
    memcpy(buf, good, len);
    buf[body2 + 34] = 7; /* an isstd indicator */
    expect_error(buf, len, "indicator is not 0 or 1");
    memcpy(buf, good, len);
    buf[len] = 'x';
    expect_error(buf, len + 1, "trailing bytes");
    big = calloc(1, ((size_t)1 << 20) + 1);
    ck_assert_ptr_nonnull(big);
    memcpy(big, good, len);
    expect_error(big, ((size_t)1 << 20) + 1, "limit");
    free(big);
    /* The unmodified file parses. */
    {
        char err[256];
        billing_zone *z = NULL;

        ck_assert_msg(billing_zone_new("Test/Good", good, len, &z, err, sizeof(err)) == BILLING_OK,
                      "%s", err);
        ck_assert_int_eq(billing_zone_offset(z, 1500000000 * NS), 7200);
        ck_assert_int_eq(billing_zone_offset(z, 2500000000 * NS), 3600);
        billing_zone_destroy(z);
    }
}
END_TEST

/* Every prefix of a real file is rejected without a crash; only the whole file parses. */
START_TEST(test_tzif_prefixes)
{
    static const char *const names[] = {"America/New_York", "Australia/Sydney", "Asia/Shanghai"};
    size_t i;
    size_t n;
    size_t len;
    unsigned char *data;
    unsigned char *copy;
    billing_zone *z;
    char err[256];

    for (i = 0; i < N_ELEMS(names); i++) {
        data = read_tzif(names[i], &len);
        for (n = 0; n <= len; n++) {
            /* An exact-size copy, so that valgrind sees any read past the end. */
            copy = malloc(n + 1);
            ck_assert_ptr_nonnull(copy);
            memcpy(copy, data, n);
            billing_zone_new(names[i], copy, n, &z, err, sizeof(err));
            if (n < len) {
                ck_assert_msg(z == NULL, "%s: prefix %zu accepted", names[i], n);
                ck_assert_str_ne(err, "");
            } else {
                ck_assert_msg(z != NULL, "%s: %s", names[i], err);
                exercise_zone(z);
            }
            billing_zone_destroy(z);
            free(copy);
        }
        free(data);
    }
}
END_TEST

/* Flipped bits and bytes anywhere: NULL or a zone whose every function works. */
START_TEST(test_tzif_flipped_bytes)
{
    static const unsigned char masks[] = {0x01, 0x80, 0xff, 0x10};
    size_t len;
    unsigned char *data = read_tzif("Europe/London", &len);
    unsigned char *copy = malloc(len);
    size_t i;
    size_t k;
    billing_zone *z;
    int accepted = 0;

    ck_assert_ptr_nonnull(copy);
    for (i = 0; i < len; i++) {
        for (k = 0; k < N_ELEMS(masks); k++) {
            memcpy(copy, data, len);
            copy[i] ^= masks[k];
            billing_zone_new("Europe/London", copy, len, &z, NULL, 0);
            if (z != NULL) {
                accepted++;
                exercise_zone(z);
            }
            billing_zone_destroy(z);
        }
    }
    /* Flips inside the v1 block, offsets and times are valid data. */
    ck_assert_int_gt(accepted, 0);
    free(copy);
    free(data);
}
END_TEST

/* Random mutations of a small valid file: overwrite, truncate, extend. */
START_TEST(test_tzif_random_mutations)
{
    static const int64_t trans[] = {INT64_C(-100), INT64_C(0), INT64_C(5000000)};
    static const unsigned char idx[] = {1, 0, 1};
    static const int32_t utoff[] = {-18000, -14400};
    static const unsigned char isdst[] = {0, 1};
    syn_zone s = {'3', 3, trans, idx, 2, utoff, isdst, "EST5EDT,M3.2.0,M11.1.0"};
    unsigned char good[TZIF_BUF];
    unsigned char buf[TZIF_BUF];
    size_t len = build_tzif(&s, good);
    size_t n;
    int iter;
    int j;
    billing_zone *z;

    for (iter = 0; iter < 20000; iter++) {
        memcpy(buf, good, len);
        n = len;
        for (j = 0; j < 1 + (int)(rng() % 4); j++)
            buf[rng() % len] = (unsigned char)rng();
        if (rng() % 4 == 0)
            n = (size_t)(rng() % (len + 1));
        billing_zone_new("Test/Fuzz", buf, n, &z, NULL, 0);
        if (z != NULL)
            exercise_zone(z);
        billing_zone_destroy(z);
    }
}
END_TEST

START_TEST(test_null_args)
{
    billing_zone *utc = billing_zone_new_utc();
    billing_zone *z = NULL;
    unsigned char byte = 0;
    char err[256];
    billing_time_t t = 0;
    bl_civil c = civ(2026, 1, 1, 0, 0, 0);
    int y = 0;
    int m = 0;

    ck_assert_int_eq(billing_zone_new(NULL, &byte, 1, &z, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_ptr_null(z);
    ck_assert_ptr_nonnull(strstr(err, "name"));
    ck_assert_int_eq(billing_zone_new("X", NULL, 0, &z, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_zone_new("", &byte, 1, &z, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_zone_new("has space", &byte, 1, &z, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_zone_new("X", &byte, 0, &z, NULL, 0), BILLING_ERR_PARSE);
    ck_assert_int_eq(billing_zone_new("X", &byte, 1, NULL, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "out is NULL"));
    ck_assert_ptr_null(z);
    billing_zone_destroy(NULL);
    ck_assert_ptr_null(billing_zone_name(NULL));
    ck_assert_int_eq(billing_zone_offset(NULL, 0), 0);
    ck_assert_int_eq(billing_zone_month_start(NULL, 2026, 1, &t), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_zone_month_start(utc, 2026, 1, NULL), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_zone_month_start(utc, 2026, 0, &t), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_zone_month_start(utc, 2026, 13, &t), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_zone_month_start(utc, -2147483647 - 1, 1, &t), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_zone_month_start(utc, 2147483647, 12, &t), BILLING_ERR_RANGE);
    billing_zone_year_month(NULL, ts("2026-03-01T00:00:00Z"), &y, &m);
    ck_assert(y == 2026 && m == 3);
    billing_zone_year_month(utc, 0, NULL, NULL);
    ck_assert_int_eq(bl_zone_from_civil(NULL, &c, &t), -1);
    ck_assert_int_eq(bl_zone_from_civil(utc, NULL, &t), -1);
    ck_assert_int_eq(bl_zone_from_civil(utc, &c, NULL), -1);
    ck_assert_int_eq(bl_zone_add_months(utc, 0, -1, &t), -1);
    ck_assert_int_eq(bl_zone_add_months(NULL, 0, 1, &t), -1);
    ck_assert_int_eq(bl_zone_add_months(utc, 0, 1, NULL), -1);
    ck_assert_int_eq(bl_zone_add_months(utc, 0, 2147483647, &t), -1);
    ck_assert_int_eq(bl_zone_next_month_start(NULL, 0), INT64_MAX);
    ck_assert_int_eq(bl_zone_next_month_start(utc, INT64_MAX), INT64_MAX);
    ck_assert_int_eq(billing_time_parse(NULL, &t, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_time_parse("2026-01-01T00:00:00Z", NULL, NULL, 0),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_time_format(0, NULL, 64), -1);
    billing_zone_destroy(utc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Local months                                                        */
/* ------------------------------------------------------------------ */

START_TEST(test_month_start_shanghai)
{
    billing_zone *z = load_zone("Asia/Shanghai");
    billing_time_t t;
    int y;
    int m;

    ck_assert_int_eq(billing_zone_month_start(z, 2026, 2, &t), BILLING_OK);
    ck_assert_int_eq(t, ts("2026-01-31T16:00:00Z"));
    billing_zone_year_month(z, t, &y, &m);
    ck_assert(y == 2026 && m == 2);
    billing_zone_year_month(z, t - 1, &y, &m);
    ck_assert(y == 2026 && m == 1);
    ck_assert_int_eq(bl_zone_next_month_start(z, t - 1), t);
    ck_assert_int_eq(bl_zone_next_month_start(z, t), ts("2026-02-28T16:00:00Z"));
    /* 1900-01 in Shanghai starts before 1900-01-01T00:00Z: out of range. */
    ck_assert_int_eq(billing_zone_month_start(z, 1900, 1, &t), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_zone_month_start(z, 1900, 2, &t), BILLING_OK);
    ck_assert_int_eq(billing_zone_month_start(z, 2200, 1, &t), BILLING_OK);
    ck_assert_int_eq(t, ts("2199-12-31T16:00:00Z"));
    billing_zone_destroy(z);
}
END_TEST

START_TEST(test_month_lengths_new_york)
{
    billing_zone *z = load_zone("America/New_York");
    billing_time_t mar;
    billing_time_t apr;
    billing_time_t nov;
    billing_time_t dec;

    ck_assert_int_eq(billing_zone_month_start(z, 2026, 3, &mar), BILLING_OK);
    ck_assert_int_eq(billing_zone_month_start(z, 2026, 4, &apr), BILLING_OK);
    ck_assert_int_eq(billing_zone_month_start(z, 2026, 11, &nov), BILLING_OK);
    ck_assert_int_eq(billing_zone_month_start(z, 2026, 12, &dec), BILLING_OK);
    ck_assert_int_eq(mar, ts("2026-03-01T05:00:00Z"));
    ck_assert_int_eq(apr, ts("2026-04-01T04:00:00Z"));
    /* The spring-forward day has 23 hours, the fall-back day 25. */
    ck_assert_int_eq(apr - mar, (31 * DAY - HOUR) * NS);
    ck_assert_int_eq(dec - nov, (30 * DAY + HOUR) * NS);
    ck_assert_int_eq(bl_zone_next_month_start(z, mar), apr);
    billing_zone_destroy(z);
}
END_TEST

/* Months tile the time line: year_month and next_month_start agree with month_start. */
static void check_month_tiling(const char *name)
{
    billing_zone *z = load_zone(name);
    int y;
    int m;
    int gy;
    int gm;
    billing_time_t start;
    billing_time_t next;
    bl_civil c;

    CHECK(billing_zone_month_start(z, 1900, 2, &start) == BILLING_OK);
    for (y = 1900; y < 2199; y++) {
        for (m = (y == 1900 ? 2 : 1); m <= 12; m++) {
            ck_assert_int_eq(
                billing_zone_month_start(z, m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, &next),
                BILLING_OK);
            CHECK_MSG(next > start, "%s %d-%d", name, y, m);
            billing_zone_year_month(z, start, &gy, &gm);
            CHECK_MSG(gy == y && gm == m, "%s %d-%d start is in %d-%d", name, y, m, gy, gm);
            billing_zone_year_month(z, next - 1, &gy, &gm);
            CHECK_MSG(gy == y && gm == m, "%s %d-%d end is in %d-%d", name, y, m, gy, gm);
            billing_zone_year_month(z, start + (next - start) / 2, &gy, &gm);
            CHECK_MSG(gy == y && gm == m, "%s %d-%d middle is in %d-%d", name, y, m, gy, gm);
            CHECK(bl_zone_next_month_start(z, start) == next);
            CHECK(bl_zone_next_month_start(z, next - 1) == next);
            /* Local midnight on the 1st unless a gap hid it. */
            bl_zone_to_civil(z, start, &c);
            CHECK_MSG(c.day == 1 && c.month == m, "%s %d-%d", name, y, m);
            CHECK((c.second + c.minute * 60 + c.hour * 3600) <= 3600);
            start = next;
        }
    }
    billing_zone_destroy(z);
}

START_TEST(test_month_tiling)
{
    check_month_tiling("America/New_York");
    check_month_tiling("Australia/Sydney");
    check_month_tiling("Asia/Shanghai");
    check_month_tiling("America/Sao_Paulo");
    check_month_tiling("America/Santiago");
}
END_TEST

/* Midnight inside a gap: the month starts at the end of the gap. */
START_TEST(test_month_start_in_gap)
{
    char err[256];
    /* DST starts Sunday Nov 1 2026 at 23:30 the day before: 23:30 -> 00:30. */
    billing_zone *z = footer_zone("AAA3BBB,M11.1.0/-0:30,M2.3.0/0", -10800, err, sizeof(err));
    billing_time_t t;
    bl_civil c = civ(2026, 11, 1, 0, 0, 0);

    ck_assert_msg(z != NULL, "%s", err);
    ck_assert_int_eq(billing_zone_month_start(z, 2026, 11, &t), BILLING_OK);
    ck_assert_int_eq(t, ts("2026-11-01T02:30:00Z"));
    /* A plain civil time in the gap moves forward by the gap's length. */
    ck_assert_int_eq(bl_zone_from_civil(z, &c, &t), 0);
    ck_assert_int_eq(t, ts("2026-11-01T03:00:00Z"));
    bl_zone_to_civil(z, t, &c);
    assert_civil(&c, 2026, 11, 1, 1, 0, 0);
    billing_zone_destroy(z);
}
END_TEST

/*
 * Fall-back at 00:30 on the 1st repeats 23:30-24:00 of the last day after
 * the month has started: those instants belong to the new month.
 */
START_TEST(test_month_of_repeated_hour)
{
    char err[256];
    billing_zone *z = footer_zone("AAA3BBB,M10.1.0/0,M3.1.0/0:30", -10800, err, sizeof(err));
    billing_time_t mar;
    billing_time_t apr;
    billing_time_t t = ts("2026-03-01T02:45:00Z");
    bl_civil c;
    int y;
    int m;

    ck_assert_msg(z != NULL, "%s", err);
    ck_assert_int_eq(billing_zone_month_start(z, 2026, 3, &mar), BILLING_OK);
    ck_assert_int_eq(mar, ts("2026-03-01T02:00:00Z"));
    ck_assert_int_eq(billing_zone_month_start(z, 2026, 4, &apr), BILLING_OK);
    bl_zone_to_civil(z, t, &c);
    assert_civil(&c, 2026, 2, 28, 23, 45, 0);
    billing_zone_year_month(z, t, &y, &m);
    ck_assert(y == 2026 && m == 3);
    ck_assert_int_eq(bl_zone_next_month_start(z, t), apr);
    ck_assert_int_eq(bl_zone_next_month_start(z, mar - 1), mar);
    billing_zone_destroy(z);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Wall time to instant                                                */
/* ------------------------------------------------------------------ */

static const struct civil_case {
    const char *zone;
    int y, mo, d, h, mi;
    const char *expect; /* NULL: -1 expected */
} civil_cases[] = {
    /* Gap: 02:30 does not exist, becomes 03:30 EDT. */
    {"America/New_York", 2026, 3, 8, 2, 30, "2026-03-08T07:30:00Z"},
    {"America/New_York", 2026, 3, 8, 2, 0, "2026-03-08T07:00:00Z"},
    {"America/New_York", 2026, 3, 8, 1, 59, "2026-03-08T06:59:00Z"},
    {"America/New_York", 2026, 3, 8, 3, 0, "2026-03-08T07:00:00Z"},
    /* Overlap: 01:30 happens twice; the earlier (EDT) wins. */
    {"America/New_York", 2026, 11, 1, 1, 30, "2026-11-01T05:30:00Z"},
    {"America/New_York", 2026, 11, 1, 0, 59, "2026-11-01T04:59:00Z"},
    {"America/New_York", 2026, 11, 1, 2, 0, "2026-11-01T07:00:00Z"},
    {"America/New_York", 2100, 3, 14, 2, 30, "2100-03-14T07:30:00Z"},
    {"America/New_York", 2100, 11, 7, 1, 30, "2100-11-07T05:30:00Z"},
    {"Australia/Sydney", 2026, 10, 4, 2, 30, "2026-10-03T16:30:00Z"},
    {"Australia/Sydney", 2026, 4, 5, 2, 30, "2026-04-04T15:30:00Z"},
    {"Australia/Lord_Howe", 2026, 10, 4, 2, 15, "2026-10-03T15:45:00Z"},
    {"Europe/London", 2026, 3, 29, 1, 30, "2026-03-29T01:30:00Z"},
    {"Europe/London", 2026, 10, 25, 1, 30, "2026-10-25T00:30:00Z"},
    {"Asia/Shanghai", 2026, 1, 31, 10, 0, "2026-01-31T02:00:00Z"},
    {"Asia/Shanghai", 1900, 1, 1, 0, 0, NULL},
    {"Asia/Shanghai", 2200, 1, 1, 7, 59, "2199-12-31T23:59:00Z"},
    {"Asia/Shanghai", 2200, 1, 1, 8, 1, NULL},
};

START_TEST(test_from_civil_table)
{
    size_t i;
    billing_zone *z;
    bl_civil c;
    billing_time_t t;
    int rc;

    for (i = 0; i < N_ELEMS(civil_cases); i++) {
        const struct civil_case *k = &civil_cases[i];
        z = load_zone(k->zone);
        c = civ(k->y, k->mo, k->d, k->h, k->mi, 0);
        rc = bl_zone_from_civil(z, &c, &t);
        if (k->expect == NULL) {
            ck_assert_msg(rc == -1, "case %zu accepted", i);
        } else {
            ck_assert_msg(rc == 0, "case %zu rejected", i);
            ck_assert_msg(t == ts(k->expect), "case %zu", i);
        }
        billing_zone_destroy(z);
    }
}
END_TEST

START_TEST(test_from_civil_invalid)
{
    billing_zone *z = billing_zone_new_utc();
    bl_civil bad[8];
    billing_time_t t;
    size_t i;

    for (i = 0; i < N_ELEMS(bad); i++)
        bad[i] = civ(2026, 2, 10, 12, 0, 0);
    bad[0].month = 13;
    bad[1].day = 29;
    bad[2].day = 0;
    bad[3].hour = 24;
    bad[4].minute = -1;
    bad[5].second = 60;
    bad[6].nsec = 1000000000;
    bad[7].year = -2147483647 - 1;
    for (i = 0; i < N_ELEMS(bad); i++)
        ck_assert_msg(bl_zone_from_civil(z, &bad[i], &t) == -1, "bad civil %zu accepted", i);
    bad[0] = civ(2026, 2, 10, 12, 0, 0);
    bad[0].nsec = 999999999;
    ck_assert_int_eq(bl_zone_from_civil(z, &bad[0], &t), 0);
    ck_assert_int_eq(t, ts("2026-02-10T12:00:00.999999999Z"));
    billing_zone_destroy(z);
}
END_TEST

/* Earliest instant showing @c, by trying every offset on a 15-minute grid; 1 if found. */
static int brute_from_civil(const billing_zone *z, const bl_civil *c, int64_t *secs)
{
    int64_t local = local_secs(c);
    int64_t k;

    /* Larger offsets give earlier instants. */
    for (k = 27 * 4; k >= -27 * 4; k--) {
        if (billing_zone_offset(z, (local - k * 900) * NS) == k * 900) {
            *secs = local - k * 900;
            return 1;
        }
    }
    return 0;
}

/* Around every change of 2026 in @name: every quarter hour of local time. */
static void check_from_civil_brute(const char *name)
{
    billing_zone *z = load_zone(name);
    int64_t s;
    int64_t start = ts("2026-01-01T00:00:00Z") / NS;
    int64_t end = ts("2027-01-01T00:00:00Z") / NS;
    int64_t q;
    int64_t want;
    int64_t before;
    billing_time_t got;
    bl_civil c;
    bl_civil shown;
    int tested = 0;

    for (s = start; s < end; s += HOUR) {
        if (billing_zone_offset(z, s * NS) == billing_zone_offset(z, (s + HOUR) * NS))
            continue;
        for (q = s - 2 * DAY; q < s + 2 * DAY; q += 900) {
            bl_zone_to_civil(z, q * NS, &c);
            c = civ(c.year, c.month, c.day, c.hour, c.minute, 0);
            CHECK(bl_zone_from_civil(z, &c, &got) == 0);
            if (brute_from_civil(z, &c, &want)) {
                CHECK_MSG(got == want * NS, "%s: earliest instant", name);
            } else {
                /* Gap: the offset in force before it, i.e. forward by the gap. */
                before = billing_zone_offset(z, (local_secs(&c) - 27 * HOUR) * NS);
                CHECK(got == ((local_secs(&c) - before) * NS));
                bl_zone_to_civil(z, got, &shown);
                CHECK(!civil_eq(&shown, &c));
            }
            tested++;
        }
    }
    CHECK(tested > 0);
    billing_zone_destroy(z);
}

START_TEST(test_from_civil_brute_force)
{
    check_from_civil_brute("America/New_York");
    check_from_civil_brute("Australia/Sydney");
    check_from_civil_brute("Australia/Lord_Howe");
    check_from_civil_brute("Pacific/Chatham");
    check_from_civil_brute("Europe/London");
}
END_TEST

/* Every hour 1901..2199: to_civil then from_civil comes back (or to the earlier twin). */
START_TEST(test_civil_round_trip)
{
    billing_zone *z = load_zone("America/New_York");
    int64_t s;
    bl_civil c;
    bl_civil again;
    billing_time_t t;

    for (s = ts("1901-01-01T00:00:00Z") / NS; s < ts("2199-01-01T00:00:00Z") / NS;
         s += 7 * HOUR + 37) {
        bl_zone_to_civil(z, s * NS + 123, &c);
        CHECK(c.nsec == 123);
        CHECK(bl_zone_from_civil(z, &c, &t) == 0);
        CHECK(t == s * NS + 123 || t == (s - HOUR) * NS + 123);
        bl_zone_to_civil(z, t, &again);
        CHECK(civil_eq(&again, &c));
    }
    billing_zone_destroy(z);
}
END_TEST

START_TEST(test_to_civil_negative)
{
    bl_civil c;

    bl_zone_to_civil(NULL, -1, &c);
    assert_civil(&c, 1969, 12, 31, 23, 59, 59);
    ck_assert_int_eq(c.nsec, 999999999);
    bl_zone_to_civil(NULL, BL_TIME_MIN, &c);
    assert_civil(&c, 1900, 1, 1, 0, 0, 0);
    bl_zone_to_civil(NULL, INT64_MIN, &c);
    assert_civil(&c, 1677, 9, 21, 0, 12, 43);
    ck_assert_int_eq(c.nsec, 145224192);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Monthly terms                                                       */
/* ------------------------------------------------------------------ */

static const struct term_case {
    const char *zone;
    const char *anchor;
    int k;
    const char *expect;
} term_cases[] = {
    /* Anchor 2026-01-31T10:00 in Shanghai (02:00Z): clamped, always from the anchor. */
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 0, "2026-01-31T02:00:00Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 1, "2026-02-28T02:00:00Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 2, "2026-03-31T02:00:00Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 3, "2026-04-30T02:00:00Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 13, "2027-02-28T02:00:00Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 25, "2028-02-29T02:00:00Z"},
    {"Asia/Shanghai", "2028-01-31T02:00:00Z", 1, "2028-02-29T02:00:00Z"},
    {"Asia/Shanghai", "2028-01-31T02:00:00Z", 2, "2028-03-31T02:00:00Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00.5Z", 1, "2026-02-28T02:00:00.5Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 2087, "2199-12-31T02:00:00Z"},
    {"Asia/Shanghai", "2026-01-31T02:00:00Z", 2088, NULL},
    /* Same wall time across DST: 09:00 EST then 09:00 EDT. */
    {"America/New_York", "2026-02-15T14:00:00Z", 1, "2026-03-15T13:00:00Z"},
    /* Anchor at 02:30: in the spring-forward gap it becomes 03:30 EDT. */
    {"America/New_York", "2026-02-08T07:30:00Z", 1, "2026-03-08T07:30:00Z"},
    /* Anchor at 01:30: in the overlap the earlier (EDT) instant. */
    {"America/New_York", "2026-10-01T05:30:00Z", 1, "2026-11-01T05:30:00Z"},
};

START_TEST(test_add_months)
{
    size_t i;
    billing_zone *z;
    billing_time_t t;
    int rc;

    for (i = 0; i < N_ELEMS(term_cases); i++) {
        const struct term_case *k = &term_cases[i];
        z = load_zone(k->zone);
        rc = bl_zone_add_months(z, ts(k->anchor), k->k, &t);
        if (k->expect == NULL) {
            ck_assert_msg(rc == -1, "term case %zu accepted", i);
        } else {
            ck_assert_msg(rc == 0, "term case %zu rejected", i);
            ck_assert_msg(t == ts(k->expect), "term case %zu", i);
        }
        billing_zone_destroy(z);
    }
}
END_TEST

/* Terms from a Jan 31 anchor end on each month's last day or the 31st, never drift. */
START_TEST(test_add_months_no_drift)
{
    billing_zone *z = load_zone("Asia/Shanghai");
    billing_time_t anchor = ts("2026-01-31T02:00:00Z");
    billing_time_t t;
    billing_time_t prev = anchor;
    bl_civil c;
    int k;

    for (k = 1; k <= 600; k++) {
        ck_assert_int_eq(bl_zone_add_months(z, anchor, k, &t), 0);
        ck_assert_int_gt(t, prev);
        bl_zone_to_civil(z, t, &c);
        ck_assert_int_eq(c.day, bl_days_in_month(c.year, c.month));
        ck_assert_int_eq(c.hour, 10);
        ck_assert_int_eq((c.year - 2026) * 12 + c.month - 1, k);
        prev = t;
    }
    billing_zone_destroy(z);
}
END_TEST

/* ------------------------------------------------------------------ */
/* RFC 3339 text                                                       */
/* ------------------------------------------------------------------ */

static const struct parse_ok_case {
    const char *text;
    int64_t secs;
    int32_t nsec;
} parse_ok_cases[] = {
    {"2026-01-31T16:00:00Z", INT64_C(1769875200), 0},
    {"2026-02-01T00:00:00+08:00", INT64_C(1769875200), 0},
    {"2026-02-01T00:00:00.5+08:00", INT64_C(1769875200), 500000000},
    {"2026-01-31t16:00:00z", INT64_C(1769875200), 0},
    {"2026-01-31 16:00:00Z", INT64_C(1769875200), 0},
    {"2026-01-31T11:00:00-05:00", INT64_C(1769875200), 0},
    {"2026-01-31T16:00:00-00:00", INT64_C(1769875200), 0},
    {"2026-01-31T21:30:00+05:30", INT64_C(1769875200), 0},
    {"2026-01-31T16:00:00.000000001Z", INT64_C(1769875200), 1},
    {"2026-01-31T16:00:00.123Z", INT64_C(1769875200), 123000000},
    {"2026-01-31T16:00:00.100000000Z", INT64_C(1769875200), 100000000},
    {"1970-01-01T00:00:00Z", 0, 0},
    {"1969-12-31T23:59:59.999999999Z", -1, 999999999},
    {"1900-01-01T00:00:00Z", INT64_C(-2208988800), 0},
    {"1900-01-01T08:00:00+08:00", INT64_C(-2208988800), 0},
    {"2200-01-01T00:00:00Z", INT64_C(7258118400), 0},
    {"2199-12-31T23:00:00-01:00", INT64_C(7258118400), 0},
    {"2024-02-29T00:00:00Z", INT64_C(1709164800), 0},
    {"2000-02-29T23:59:59+23:59", INT64_C(951782459), 0},
};

START_TEST(test_time_parse_ok)
{
    size_t i;
    billing_time_t t;
    char err[256];

    for (i = 0; i < N_ELEMS(parse_ok_cases); i++) {
        const struct parse_ok_case *c = &parse_ok_cases[i];
        err[0] = '\0';
        ck_assert_msg(billing_time_parse(c->text, &t, err, sizeof(err)) == BILLING_OK, "%s: %s",
                      c->text, err);
        ck_assert_msg(t == c->secs * NS + c->nsec, "%s: got %lld", c->text, (long long)t);
    }
}
END_TEST

static const struct parse_bad_case {
    const char *text;
    billing_status status;
    const char *fragment;
} parse_bad_cases[] = {
    {"2026-13-01T00:00:00Z", BILLING_ERR_PARSE, "month 13 out of range"},
    {"2026-00-10T00:00:00Z", BILLING_ERR_PARSE, "month 0 out of range"},
    {"2026-02-29T00:00:00Z", BILLING_ERR_PARSE, "day 29 out of range for 2026-02"},
    {"2026-04-31T00:00:00Z", BILLING_ERR_PARSE, "day 31"},
    {"2026-01-00T00:00:00Z", BILLING_ERR_PARSE, "day 0"},
    {"2026-01-01T24:00:00Z", BILLING_ERR_PARSE, "hour 24 out of range"},
    {"2026-01-01T23:60:00Z", BILLING_ERR_PARSE, "minute 60 out of range"},
    {"2026-12-31T23:59:60Z", BILLING_ERR_PARSE, "leap second"},
    {"2026-01-01T00:00:61Z", BILLING_ERR_PARSE, "second 61"},
    {"2026-01-01T00:00:00", BILLING_ERR_PARSE, "offset"},
    {"2026-01-01T00:00:00+0800", BILLING_ERR_PARSE, "offset hour"},
    {"2026-01-01T00:00:00+08", BILLING_ERR_PARSE, "offset hour"},
    {"2026-01-01T00:00:00+24:00", BILLING_ERR_PARSE, "offset hour 24"},
    {"2026-01-01T00:00:00+08:60", BILLING_ERR_PARSE, "offset minute 60"},
    {"2026-01-01T00:00:00+08:0", BILLING_ERR_PARSE, "offset minute"},
    {"2026-01-01T00:00:00.Z", BILLING_ERR_PARSE, "digits after '.'"},
    {"2026-01-01T00:00:00.1234567890Z", BILLING_ERR_PARSE, "more than 9 digits"},
    {"2026-01-01T00:00:00Zjunk", BILLING_ERR_PARSE, "unexpected characters"},
    {"2026-01-01T00:00:00Z ", BILLING_ERR_PARSE, "unexpected characters"},
    {"2026-01-01X00:00:00Z", BILLING_ERR_PARSE, "'T'"},
    {"2026-01-01", BILLING_ERR_PARSE, "'T'"},
    {"2026-01-01T00:00Z", BILLING_ERR_PARSE, "after the minute"},
    {"26-01-01T00:00:00Z", BILLING_ERR_PARSE, "year"},
    {"2026-1-01T00:00:00Z", BILLING_ERR_PARSE, "month"},
    {"2026/01/01T00:00:00Z", BILLING_ERR_PARSE, "'-' after the year"},
    {"2026-01-1T00:00:00Z", BILLING_ERR_PARSE, "day"},
    {"2026-01-01T0:00:00Z", BILLING_ERR_PARSE, "hour"},
    {"", BILLING_ERR_PARSE, "year"},
    {" 2026-01-01T00:00:00Z", BILLING_ERR_PARSE, "year"},
    {"+2026-01-01T00:00:00Z", BILLING_ERR_PARSE, "year"},
    {"1899-12-31T23:59:59Z", BILLING_ERR_RANGE, "supported range"},
    {"1900-01-01T00:00:00+00:01", BILLING_ERR_RANGE, "supported range"},
    {"2200-01-01T00:00:00.000000001Z", BILLING_ERR_RANGE, "supported range"},
    {"2199-12-31T23:00:01-01:00", BILLING_ERR_RANGE, "supported range"},
    {"0000-01-01T00:00:00Z", BILLING_ERR_RANGE, "supported range"},
    {"9999-12-31T23:59:59Z", BILLING_ERR_RANGE, "supported range"},
    {"2026-01-01T00:00:00.000000000000000000000000000000000000000000000000Z", BILLING_ERR_PARSE,
     "too long"},
};

START_TEST(test_time_parse_rejected)
{
    size_t i;
    billing_time_t t = 42;
    char err[256];

    for (i = 0; i < N_ELEMS(parse_bad_cases); i++) {
        const struct parse_bad_case *c = &parse_bad_cases[i];
        err[0] = '\0';
        ck_assert_msg(billing_time_parse(c->text, &t, err, sizeof(err)) == c->status,
                      "'%s' gave '%s'", c->text, err);
        ck_assert_msg(strstr(err, c->fragment) != NULL, "'%s': message '%s' lacks '%s'", c->text,
                      err, c->fragment);
        ck_assert_msg(strncmp(err, "timestamp '", 11) == 0, "%s", err);
        ck_assert_int_eq(t, 42);
    }
    /* Control bytes are not copied into messages; a small errbuf truncates. */
    ck_assert_int_eq(billing_time_parse("\x1b[31m", &t, err, sizeof(err)), BILLING_ERR_PARSE);
    ck_assert_ptr_null(strchr(err, '\x1b'));
    ck_assert_int_eq(billing_time_parse("2026-13-01T00:00:00Z", &t, err, 8), BILLING_ERR_PARSE);
    ck_assert_uint_eq(strlen(err), 7);
    ck_assert_int_eq(billing_time_parse("2026-13-01T00:00:00Z", &t, NULL, 0), BILLING_ERR_PARSE);
}
END_TEST

static const struct format_case {
    int64_t t;
    const char *text;
} format_cases[] = {
    {0, "1970-01-01T00:00:00Z"},
    {500000000, "1970-01-01T00:00:00.5Z"},
    {1, "1970-01-01T00:00:00.000000001Z"},
    {-1, "1969-12-31T23:59:59.999999999Z"},
    {-1000000000, "1969-12-31T23:59:59Z"},
    {-500000000, "1969-12-31T23:59:59.5Z"},
    {INT64_C(1769875200120000000), "2026-01-31T16:00:00.12Z"},
    {INT64_C(1769875200000000010), "2026-01-31T16:00:00.00000001Z"},
    {BL_TIME_MIN, "1900-01-01T00:00:00Z"},
    {BL_TIME_MAX, "2200-01-01T00:00:00Z"},
    {INT64_MIN, "1677-09-21T00:12:43.145224192Z"},
    {INT64_MAX, "2262-04-11T23:47:16.854775807Z"},
};

START_TEST(test_time_format)
{
    size_t i;
    char buf[64];
    size_t n;

    for (i = 0; i < N_ELEMS(format_cases); i++) {
        const struct format_case *c = &format_cases[i];
        n = strlen(c->text);
        ck_assert_int_eq(billing_time_format(c->t, buf, sizeof(buf)), (int)n);
        ck_assert_str_eq(buf, c->text);
        /* Exactly enough room, then one byte short. */
        ck_assert_int_eq(billing_time_format(c->t, buf, n + 1), (int)n);
        ck_assert_str_eq(buf, c->text);
        ck_assert_int_eq(billing_time_format(c->t, buf, n), -1);
    }
    ck_assert_int_eq(billing_time_format(0, buf, 0), -1);
}
END_TEST

/* format then parse gives the instant back, across the whole range, with all fraction lengths. */
START_TEST(test_time_round_trip)
{
    char buf[64];
    billing_time_t t;
    billing_time_t back;
    char err[256];
    int i;
    int64_t span = BL_TIME_MAX / NS - BL_TIME_MIN / NS;

    for (i = 0; i < 200000; i++) {
        t = (BL_TIME_MIN / NS + (int64_t)(rng() % (uint64_t)span)) * NS +
            (int64_t)(rng() % (uint64_t)NS);
        /* Cut some to whole seconds or fewer digits. */
        if (i % 3 == 0)
            t -= t % NS;
        else if (i % 3 == 1)
            t -= t % 1000;
        CHECK(billing_time_format(t, buf, sizeof(buf)) > 0);
        CHECK_MSG(billing_time_parse(buf, &back, err, sizeof(err)) == BILLING_OK, "%s: %s", buf,
                  err);
        CHECK_MSG(back == t, "%s", buf);
        /* No trailing zeros in a fraction. */
        CHECK(strchr(buf, '.') == NULL || strstr(buf, "0Z") == NULL);
    }
}
END_TEST

/*
 * "YYYY-MM-DDTHH:MM:SSZ" is read by a fixed-place fast path; the same
 * text with "+00:00" for "Z" goes through the general parser. Fields are
 * drawn around and beyond their bounds (month 0..13, day 0..32, hour
 * 0..25, minute and second 0..61, years past both ends of the range), a
 * byte is sometimes replaced or the text cut: both forms give the same
 * status and the same instant, and shorter texts never read past the NUL
 * (the sanitizer build checks that).
 */
START_TEST(test_time_parse_common_form)
{
    char fast[64];
    char slow[64];
    char *cut;
    billing_time_t a;
    billing_time_t b;
    billing_status sa;
    billing_status sb;
    char err[256];
    int i;

    for (i = 0; i < 200000; i++) {
        snprintf(fast, sizeof(fast), "%04d-%02d-%02dT%02d:%02d:%02dZ", 1898 + (int)(rng() % 305),
                 (int)(rng() % 14), (int)(rng() % 33), (int)(rng() % 26), (int)(rng() % 62),
                 (int)(rng() % 62));
        if (i % 5 == 0)
            fast[rng() % 20] = "0123456789-:TZ t/"[rng() % 17];
        if (i % 7 == 0)
            fast[rng() % 21] = '\0';
        snprintf(slow, sizeof(slow), "%s", fast);
        cut = strrchr(slow, 'Z');
        if (cut != NULL && cut[1] == '\0')
            strcpy(cut, "+00:00");
        a = -1;
        b = -1;
        sa = billing_time_parse(fast, &a, err, sizeof(err));
        sb = billing_time_parse(slow, &b, err, sizeof(err));
        if (strcmp(fast, slow) != 0) {
            CHECK_MSG(sa == sb, "%s: %d, %s: %d", fast, (int)sa, slow, (int)sb);
            CHECK_MSG(sa != BILLING_OK || a == b, "%s", fast);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Suite                                                               */
/* ------------------------------------------------------------------ */

static Suite *zone_suite(void)
{
    Suite *s = suite_create("zone");
    TCase *civil = tcase_create("civil");
    TCase *zones = tcase_create("zones");
    TCase *tzif = tcase_create("tzif");
    TCase *months = tcase_create("months");
    TCase *text = tcase_create("text");

    tcase_add_test(civil, test_days_from_civil_table);
    tcase_add_test(civil, test_days_every_day);
    tcase_add_test(civil, test_days_in_month);
    tcase_add_test(civil, test_civil_from_days_extremes);
    tcase_add_test(civil, test_billing_civil_days);
    tcase_add_test(civil, test_to_civil_negative);
    tcase_add_test(zones, test_utc);
    tcase_add_test(zones, test_shanghai);
    tcase_add_test(zones, test_new_york_2026);
    tcase_add_test(zones, test_new_york_2100_footer);
    tcase_add_test(zones, test_london);
    tcase_add_test(zones, test_sydney);
    tcase_add_test(zones, test_kolkata);
    tcase_add_test(zones, test_transitions_exact);
    tcase_add_test(zones, test_footer_against_libc);
    tcase_add_test(zones, test_footer_rules);
    tcase_add_test(zones, test_footer_rejected);
    tcase_add_test(zones, test_empty_footer_and_v1);
    tcase_add_test(tzif, test_tzif_errors);
    tcase_add_test(tzif, test_tzif_prefixes);
    tcase_add_test(tzif, test_tzif_flipped_bytes);
    tcase_add_test(tzif, test_tzif_random_mutations);
    tcase_add_test(tzif, test_null_args);
    tcase_add_test(months, test_month_start_shanghai);
    tcase_add_test(months, test_month_lengths_new_york);
    tcase_add_test(months, test_month_tiling);
    tcase_add_test(months, test_month_start_in_gap);
    tcase_add_test(months, test_month_of_repeated_hour);
    tcase_add_test(months, test_from_civil_table);
    tcase_add_test(months, test_from_civil_invalid);
    tcase_add_test(months, test_from_civil_brute_force);
    tcase_add_test(months, test_civil_round_trip);
    tcase_add_test(months, test_add_months);
    tcase_add_test(months, test_add_months_no_drift);
    tcase_add_test(text, test_time_parse_ok);
    tcase_add_test(text, test_time_parse_rejected);
    tcase_add_test(text, test_time_format);
    tcase_add_test(text, test_time_round_trip);
    tcase_add_test(text, test_time_parse_common_form);
    /* Generous: the brute-force and fuzz cases also run under valgrind. */
    tcase_set_timeout(zones, 300);
    tcase_set_timeout(tzif, 300);
    tcase_set_timeout(months, 300);
    tcase_set_timeout(text, 300);
    tcase_set_timeout(civil, 300);
    suite_add_tcase(s, civil);
    suite_add_tcase(s, zones);
    suite_add_tcase(s, tzif);
    suite_add_tcase(s, months);
    suite_add_tcase(s, text);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(zone_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
