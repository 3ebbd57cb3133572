/*
 * fuzz_tzif.c - fuzz target for billing_zone_new, the parser of compiled
 * TZif zone files (RFC 8536, with the POSIX TZ footer); the input is the
 * file.
 *
 * Whatever the bytes, parsing must not crash, leak or read out of bounds,
 * and a refusal must come with a message. For a zone it accepts, at fixed
 * instants from 1900 to 2200 and at instants read from the input itself
 * (the first distinct in-range 64-bit big-endian words at any byte
 * offset, which include the file's own transition times, and the
 * instant just before each), the public
 * calendar functions must agree:
 *  - the UTC offset is within +-26 hours;
 *  - billing_zone_year_month(t) gives (y, m) with m in 1..12, and
 *    billing_zone_month_start(y, m) <= t < billing_zone_month_start of the
 *    next month (either may be out of range only within a month of the
 *    ends of 1900..2200);
 *  - a month start s is where the local clock first reaches midnight of
 *    the 1st: local(s - 1 ns) < midnight <= local(s), local(x) being
 *    x plus its offset, which is local midnight itself or, when a gap
 *    skips midnight, the end of the gap;
 *  - a month start lies in its own month, and months last 28 days minus
 *    52 hours to 31 days plus 52 hours (offsets differ by at most 52 h).
 */
#include "config.h"

#include <string.h>

#include "fuzzcommon.h"

#define NS BILLING_NS_PER_SEC
#define HOUR (INT64_C(3600) * NS)
#define DAY (INT64_C(86400) * NS)
/* The library's range, 1900-01-01 .. 2200-01-01 UTC (billing.h). */
#define TIME_MIN (INT64_C(-2208988800) * NS)
#define TIME_MAX (INT64_C(7258118400) * NS)
/* RFC 8536 bounds offsets to -25..26 hours; the library promises +-26 h. */
#define OFFSET_MAX (26 * 3600)
/* Instants read from one input, at most. */
#define DERIVED_MAX 48

static const char *const fixed_instants[] = {
    "1900-01-01T00:00:00Z", "1900-01-01T12:00:00Z",           "1900-02-01T00:00:00Z",
    "1901-12-13T20:45:52Z", "1969-12-31T23:59:59.999999999Z", "1970-01-01T00:00:00Z",
    "2000-02-29T12:00:00Z", "2026-01-31T16:00:00Z",           "2026-03-08T07:00:00Z",
    "2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z",           "2026-11-01T06:00:00Z",
    "2037-12-31T23:59:59Z", "2038-01-19T03:14:08Z",           "2100-02-28T23:59:59Z",
    "2199-12-01T00:00:00Z", "2199-12-31T23:59:59.999999999Z", "2200-01-01T00:00:00Z",
};
#define N_FIXED (sizeof(fixed_instants) / sizeof(fixed_instants[0]))

static billing_time_t fixed[N_FIXED];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[256] = "";
    size_t i;

    (void)argc;
    (void)argv;
    for (i = 0; i < N_FIXED; i++)
        FZ_CHECK(billing_time_parse(fixed_instants[i], &fixed[i], err, sizeof(err)) == BILLING_OK,
                 "%s", err);
    return 0;
}

/*
 * Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil). A copy of libbilling's civil.c on purpose: this target
 * checks the library's month starts against it, an oracle that must not
 * share the code under test (billing_civil_days would agree with a
 * broken bl_days_from_civil).
 */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era;
    int64_t yoe;
    int64_t doy;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* The wall clock of @z at @t, as nanoseconds since 1970-01-01T00:00 local. */
static int64_t local_ns(const billing_zone *z, billing_time_t t)
{
    int32_t off = billing_zone_offset(z, t);

    FZ_CHECK(off >= -OFFSET_MAX && off <= OFFSET_MAX, "offset %ld s at %lld ns", (long)off,
             (long long)t);
    return t + (int64_t)off * NS;
}

static void next_month(int *y, int *m)
{
    if (++*m > 12) {
        *m = 1;
        ++*y;
    }
}

/*
 * Month (@y, @m) starts at *@s: check where the clock stands there.
 * Returns 1 if the start is in range, 0 if the library says it is not.
 */
static int month_start_ok(const billing_zone *z, int y, int m, billing_time_t *s)
{
    int64_t midnight = days_from_civil(y, m, 1) * DAY;
    billing_status st = billing_zone_month_start(z, y, m, s);
    int y2;
    int m2;

    if (st != BILLING_OK) {
        FZ_CHECK(st == BILLING_ERR_RANGE, "month_start(%d, %d): %s", y, m, billing_strerror(st));
        return 0;
    }
    FZ_CHECK(*s >= TIME_MIN && *s <= TIME_MAX, "month_start(%d, %d) = %lld is out of range", y, m,
             (long long)*s);
    FZ_CHECK(local_ns(z, *s - 1) < midnight && midnight <= local_ns(z, *s),
             "month_start(%d, %d) = %lld is not where the clock reaches midnight (local %lld ns "
             "before, %lld at, midnight %lld)",
             y, m, (long long)*s, (long long)local_ns(z, *s - 1), (long long)local_ns(z, *s),
             (long long)midnight);
    billing_zone_year_month(z, *s, &y2, &m2);
    FZ_CHECK(y2 == y && m2 == m, "month_start(%d, %d) = %lld lies in month %d-%d", y, m,
             (long long)*s, y2, m2);
    return 1;
}

static void check_instant(const billing_zone *z, billing_time_t t)
{
    billing_time_t s = 0;
    billing_time_t e = 0;
    int y;
    int m;
    int ny;
    int nm;
    int has_s;
    int has_e;

    if (t < TIME_MIN || t > TIME_MAX)
        return;
    (void)local_ns(z, t);
    billing_zone_year_month(z, t, &y, &m);
    FZ_CHECK(m >= 1 && m <= 12 && y >= 1899 && y <= 2200, "year_month(%lld) = %d-%d", (long long)t,
             y, m);
    ny = y;
    nm = m;
    next_month(&ny, &nm);
    has_s = month_start_ok(z, y, m, &s);
    has_e = month_start_ok(z, ny, nm, &e);
    FZ_CHECK(has_s || t < TIME_MIN + 32 * DAY, "no start for month %d-%d of %lld", y, m,
             (long long)t);
    FZ_CHECK(has_e || t >= TIME_MAX - 32 * DAY, "no start for the month after %d-%d of %lld", y, m,
             (long long)t);
    FZ_CHECK(!has_s || s <= t, "year_month(%lld) = %d-%d, which starts later, at %lld",
             (long long)t, y, m, (long long)s);
    FZ_CHECK(!has_e || t < e, "year_month(%lld) = %d-%d, but the next month starts at %lld",
             (long long)t, y, m, (long long)e);
    if (has_s && has_e)
        FZ_CHECK(e - s >= 28 * DAY - 52 * HOUR && e - s <= 31 * DAY + 52 * HOUR,
                 "month %d-%d lasts %lld ns", y, m, (long long)(e - s));
}

/* A big-endian 64-bit word as a signed number of seconds. */
static int64_t be64(const uint8_t *p)
{
    uint64_t u = 0;
    int i;

    for (i = 0; i < 8; i++)
        u = u << 8 | p[i];
    return (u & UINT64_C(0x8000000000000000)) ? -(int64_t)(~u) - 1 : (int64_t)u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char name[] = "Fuzz/Zone";
    char err[256] = "";
    billing_zone *z = NULL;
    int64_t seen[DERIVED_MAX];
    size_t n_seen = 0;
    int64_t secs;
    size_t i;
    size_t j;

    if (billing_zone_new(name, data, size, &z, err, sizeof(err)) != BILLING_OK) {
        FZ_CHECK(z == NULL, "a zone returned with a failure");
        fz_check_message("billing_zone_new", err, sizeof(err));
        return 0;
    }
    FZ_CHECK(strcmp(billing_zone_name(z), name) == 0, "zone name '%s'", billing_zone_name(z));
    for (i = 0; i < N_FIXED; i++)
        check_instant(z, fixed[i]);
    for (i = 0; i + 8 <= size && n_seen < DERIVED_MAX; i++) {
        secs = be64(data + i);
        if (secs < TIME_MIN / NS || secs > TIME_MAX / NS)
            continue;
        for (j = 0; j < n_seen && seen[j] != secs; j++)
            continue;
        if (j < n_seen)
            continue;
        seen[n_seen++] = secs;
        check_instant(z, secs * NS);
        check_instant(z, secs * NS - 1);
    }
    billing_zone_destroy(z);
    return 0;
}
