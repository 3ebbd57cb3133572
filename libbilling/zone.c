/*
 * zone.c - time zones from TZif data (RFC 8536), UTC offsets, and what
 * is built on them with the civil calendar (civil.c): local months and the
 * monthly terms of subscriptions.
 *
 * Everything is integer arithmetic on seconds (int64) plus a separate
 * nanosecond part; transitions and offsets are whole seconds, so the
 * nanoseconds never change which offset applies.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "civil.h"
#include "internal.h"
#include "tzrule.h"
#include "zone.h"

/* Bounds on TZif input. */
#define TZIF_MAX_LEN ((size_t)1 << 20)
#define TZIF_HEADER_LEN 44
#define TZIF_MAX_TYPES 256
/* RFC 8536 section 3.2: utoff SHOULD be in -89999..93599 (-25h..26h). */
#define TZIF_UTOFF_MIN (-89999)
#define TZIF_UTOFF_MAX 93599

/* Any solution of "local = u + offset(u)" lies within this many seconds of local. */
#define OFFSET_SPAN 93600

/* Years bl_zone_from_civil accepts before the exact range check. */
#define CIVIL_YEAR_MIN 1000
#define CIVIL_YEAR_MAX 3000

/* Days from a month's edges within which its start or end may be ambiguous. */
#define EDGE_DAYS 3

#define NS BILLING_NS_PER_SEC
#define SECS_PER_DAY INT64_C(86400)

typedef struct zone_type {
    int32_t utoff; /* seconds east of UTC */
    int isdst;
} zone_type;

struct billing_zone {
    char *name;
    size_t n_trans;
    int64_t *trans;           /* transition instants, Unix seconds, ascending */
    unsigned char *trans_idx; /* index into types for each transition */
    size_t n_types;
    zone_type *types;
    int has_rule; /* a non-empty footer: used at and after the last transition */
    bl_tzrule rule;
};

/* The counts of one TZif header (RFC 8536 section 3.1). */
typedef struct tzif_header {
    unsigned char version; /* 0, '2', '3' or '4' */
    uint32_t isutcnt;
    uint32_t isstdcnt;
    uint32_t leapcnt;
    uint32_t timecnt;
    uint32_t typecnt;
    uint32_t charcnt;
} tzif_header;

/* Bytes not yet consumed. */
typedef struct reader {
    const unsigned char *p;
    size_t left;
} reader;

/* How bl_zone_from_civil's search ended. */
typedef struct resolved {
    int64_t secs;    /* the instant chosen, Unix seconds */
    int in_gap;      /* the wall time did not exist */
    int64_t gap_end; /* if in_gap: the transition that skipped it */
} resolved;

/* ---- integer helpers ------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* secs * NS + nsec, or -1 if that does not fit in an int64. */
static int secs_to_ns(int64_t secs, int32_t nsec, billing_time_t *out)
{
    if (secs > (INT64_MAX - nsec) / NS || secs < INT64_MIN / NS)
        return -1;
    *out = secs * NS + nsec;
    return 0;
}

/* ---- TZif parsing ---------------------------------------------------- */

static uint32_t get_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Two's-complement conversions written out, since a cast of a too-large unsigned is not portable. */
static int32_t get_i32(const unsigned char *p)
{
    uint32_t u = get_u32(p);

    if (u & UINT32_C(0x80000000))
        return -(int32_t)(~u) - 1;
    return (int32_t)u;
}

static int64_t get_i64(const unsigned char *p)
{
    uint64_t u = ((uint64_t)get_u32(p) << 32) | get_u32(p + 4);

    if (u & UINT64_C(0x8000000000000000))
        return -(int64_t)(~u) - 1;
    return (int64_t)u;
}

static const unsigned char *take(reader *r, size_t n)
{
    const unsigned char *p = r->p;

    r->p += n;
    r->left -= n;
    return p;
}

static int parse_header(reader *r, tzif_header *h, char *errbuf, size_t errsize)
{
    const unsigned char *p;

    if (r->left < TZIF_HEADER_LEN) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: truncated header");
        return -1;
    }
    p = take(r, TZIF_HEADER_LEN);
    if (memcmp(p, "TZif", 4) != 0) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: bad magic (not a TZif file)");
        return -1;
    }
    h->version = p[4];
    if (h->version != 0 && (h->version < '2' || h->version > '4')) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: unsupported version byte 0x%02x",
                  h->version);
        return -1;
    }
    h->isutcnt = get_u32(p + 20);
    h->isstdcnt = get_u32(p + 24);
    h->leapcnt = get_u32(p + 28);
    h->timecnt = get_u32(p + 32);
    h->typecnt = get_u32(p + 36);
    h->charcnt = get_u32(p + 40);
    return 0;
}

/*
 * Size of the data block that follows @h with @tsize-byte times. Counts
 * are 32-bit, so the sum fits in 64 bits without overflow.
 */
static uint64_t block_size(const tzif_header *h, unsigned tsize)
{
    return (uint64_t)h->timecnt * (tsize + 1) + (uint64_t)h->typecnt * 6 + h->charcnt +
           (uint64_t)h->leapcnt * (tsize + 4) + h->isstdcnt + h->isutcnt;
}

/* Checks on the counts that do not need the data. */
static int check_counts(const tzif_header *h, char *errbuf, size_t errsize)
{
    if (h->typecnt == 0 || h->typecnt > TZIF_MAX_TYPES) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                  "TZif: local time type count %lu out of range (1..%d)", (unsigned long)h->typecnt,
                  TZIF_MAX_TYPES);
        return -1;
    }
    if (h->charcnt == 0) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: empty designation table");
        return -1;
    }
    if ((h->isstdcnt != 0 && h->isstdcnt != h->typecnt) ||
        (h->isutcnt != 0 && h->isutcnt != h->typecnt)) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                  "TZif: standard/UT indicator counts must be 0 or the type count");
        return -1;
    }
    if (h->leapcnt != 0) {
        /* right/ zones count leap seconds in their times; we do not model them. */
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                  "TZif: leap-second records are not supported");
        return -1;
    }
    return 0;
}

/* Which table a truncated block ends in, for a precise message. */
static const char *truncated_part(const tzif_header *h, unsigned tsize, size_t left)
{
    uint64_t need = (uint64_t)h->timecnt * tsize;

    if (left < need)
        return "transition table";
    need += h->timecnt;
    if (left < need)
        return "transition type indices";
    need += (uint64_t)h->typecnt * 6;
    if (left < need)
        return "local time types";
    need += h->charcnt;
    if (left < need)
        return "time zone designations";
    return "standard/UT indicators";
}

static int check_block_size(const reader *r, const tzif_header *h, unsigned tsize, char *errbuf,
                            size_t errsize)
{
    if (block_size(h, tsize) > r->left) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: truncated %s",
                  truncated_part(h, tsize, r->left));
        return -1;
    }
    return 0;
}

static int read_transitions(billing_zone *z, reader *r, const tzif_header *h, unsigned tsize,
                            char *errbuf, size_t errsize)
{
    size_t i;
    const unsigned char *p;

    for (i = 0; i < z->n_trans; i++) {
        p = take(r, tsize);
        z->trans[i] = tsize == 8 ? get_i64(p) : get_i32(p);
        if (i > 0 && z->trans[i] <= z->trans[i - 1]) {
            bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                      "TZif: transitions not strictly ascending at index %lu", (unsigned long)i);
            return -1;
        }
    }
    p = take(r, z->n_trans);
    for (i = 0; i < z->n_trans; i++) {
        if (p[i] >= h->typecnt) {
            bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                      "TZif: transition %lu uses type %u but there are only %lu types",
                      (unsigned long)i, p[i], (unsigned long)h->typecnt);
            return -1;
        }
        z->trans_idx[i] = p[i];
    }
    return 0;
}

static int read_types(billing_zone *z, reader *r, const tzif_header *h, char *errbuf,
                      size_t errsize)
{
    size_t i;
    const unsigned char *p;

    for (i = 0; i < z->n_types; i++) {
        p = take(r, 6);
        z->types[i].utoff = get_i32(p);
        z->types[i].isdst = p[4];
        if (z->types[i].utoff < TZIF_UTOFF_MIN || z->types[i].utoff > TZIF_UTOFF_MAX) {
            bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                      "TZif: type %lu UTC offset %ld out of range", (unsigned long)i,
                      (long)z->types[i].utoff);
            return -1;
        }
        if (p[4] > 1 || p[5] >= h->charcnt) {
            bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                      "TZif: type %lu has a bad DST flag or designation index", (unsigned long)i);
            return -1;
        }
    }
    return 0;
}

/* Designations, leap seconds (none) and the indicators: checked, not kept. */
static int read_rest(reader *r, const tzif_header *h, char *errbuf, size_t errsize)
{
    const unsigned char *chars = take(r, h->charcnt);
    const unsigned char *ind;
    size_t i;

    if (chars[h->charcnt - 1] != '\0') {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: designation table not NUL-terminated");
        return -1;
    }
    ind = take(r, (size_t)h->isstdcnt + h->isutcnt);
    for (i = 0; i < (size_t)h->isstdcnt + h->isutcnt; i++) {
        if (ind[i] > 1) {
            bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                      "TZif: standard/UT indicator is not 0 or 1");
            return -1;
        }
    }
    return 0;
}

/* What alloc_tables returns, through parse_tzif, when malloc fails (not a parse error). */
#define TZIF_NOMEM (-2)

static int alloc_tables(billing_zone *z, const tzif_header *h, char *errbuf, size_t errsize)
{
    z->n_trans = h->timecnt;
    z->n_types = h->typecnt;
    /* +1: malloc(0) may return NULL. */
    z->trans = malloc((z->n_trans + 1) * sizeof(*z->trans));
    z->trans_idx = malloc(z->n_trans + 1);
    z->types = malloc(z->n_types * sizeof(*z->types));
    if (z->trans == NULL || z->trans_idx == NULL || z->types == NULL) {
        bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "TZif: out of memory");
        return TZIF_NOMEM;
    }
    return 0;
}

/* The data block that follows header @h; its size has been checked. */
static int read_block(billing_zone *z, reader *r, const tzif_header *h, unsigned tsize,
                      char *errbuf, size_t errsize)
{
    int rc;

    if (check_counts(h, errbuf, errsize) != 0)
        return -1;
    if (check_block_size(r, h, tsize, errbuf, errsize) != 0)
        return -1;
    rc = alloc_tables(z, h, errbuf, errsize);
    if (rc != 0)
        return rc;
    if (read_transitions(z, r, h, tsize, errbuf, errsize) != 0)
        return -1;
    if (read_types(z, r, h, errbuf, errsize) != 0)
        return -1;
    return read_rest(r, h, errbuf, errsize);
}

/* "\n" TZ-string "\n" and nothing after it. */
static int read_footer(billing_zone *z, reader *r, char *errbuf, size_t errsize)
{
    const unsigned char *nl;
    size_t len;

    if (r->left < 2 || r->p[0] != '\n') {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: missing footer");
        return -1;
    }
    nl = memchr(r->p + 1, '\n', r->left - 1);
    if (nl == NULL) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: unterminated footer");
        return -1;
    }
    len = (size_t)(nl - (r->p + 1));
    if (len + 2 != r->left) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: trailing bytes after the footer");
        return -1;
    }
    if (len == 0)
        return 0;
    z->has_rule = 1;
    return bl_tzrule_parse((const char *)r->p + 1, len, &z->rule, errbuf, errsize);
}

/* Skip the version 1 block of a version 2+ file, checking only its size. */
static int skip_v1_block(reader *r, const tzif_header *h, char *errbuf, size_t errsize)
{
    uint64_t size = block_size(h, 4);

    if (size > r->left) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: truncated version 1 data block");
        return -1;
    }
    take(r, (size_t)size);
    return 0;
}

static int parse_tzif(billing_zone *z, reader *r, char *errbuf, size_t errsize)
{
    tzif_header h1;
    tzif_header h2;
    int rc;

    if (parse_header(r, &h1, errbuf, errsize) != 0)
        return -1;
    if (h1.version == 0) {
        rc = read_block(z, r, &h1, 4, errbuf, errsize);
        if (rc != 0)
            return rc;
        if (r->left != 0) {
            bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: trailing bytes after the data");
            return -1;
        }
        return 0;
    }
    if (skip_v1_block(r, &h1, errbuf, errsize) != 0)
        return -1;
    if (parse_header(r, &h2, errbuf, errsize) != 0)
        return -1;
    if (h2.version != h1.version) {
        bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "TZif: second header's version differs");
        return -1;
    }
    rc = read_block(z, r, &h2, 8, errbuf, errsize);
    if (rc != 0)
        return rc;
    return read_footer(z, r, errbuf, errsize);
}

void billing_zone_destroy(billing_zone *zone)
{
    if (zone == NULL)
        return;
    free(zone->name);
    free(zone->trans);
    free(zone->trans_idx);
    free(zone->types);
    free(zone);
}

static billing_zone *zone_alloc(const char *name)
{
    billing_zone *z = calloc(1, sizeof(*z));
    size_t n = strlen(name);

    if (z == NULL)
        return NULL;
    z->name = malloc(n + 1);
    if (z->name == NULL) {
        free(z);
        return NULL;
    }
    memcpy(z->name, name, n + 1);
    return z;
}

billing_status billing_zone_new(const char *name, const unsigned char *tzif, size_t len,
                                billing_zone **out, char *errbuf, size_t errsize)
{
    billing_zone *z;
    reader r;

    if (out == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "zone: out is NULL");
    *out = NULL;
    if (!bl_valid_id(name) || tzif == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID,
                         "zone: name must be 1..%d printable characters and data non-NULL",
                         BL_ID_MAX);
    if (len > TZIF_MAX_LEN)
        return bl_seterr(errbuf, errsize, BILLING_ERR_TOO_LARGE,
                         "zone '%s': TZif data of %lu bytes exceeds the %lu-byte limit", name,
                         (unsigned long)len, (unsigned long)TZIF_MAX_LEN);
    z = zone_alloc(name);
    if (z == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "zone '%s': out of memory", name);
    r.p = tzif;
    r.left = len;
    switch (parse_tzif(z, &r, errbuf, errsize)) {
    case 0:
        *out = z;
        return BILLING_OK;
    case TZIF_NOMEM:
        billing_zone_destroy(z);
        return BILLING_ERR_NOMEM;
    default:
        billing_zone_destroy(z);
        return BILLING_ERR_PARSE;
    }
}

billing_zone *billing_zone_new_utc(void)
{
    billing_zone *z = zone_alloc("UTC");

    if (z == NULL)
        return NULL;
    z->types = malloc(sizeof(*z->types));
    if (z->types == NULL) {
        billing_zone_destroy(z);
        return NULL;
    }
    z->n_types = 1;
    z->types[0].utoff = 0;
    z->types[0].isdst = 0;
    return z;
}

const char *billing_zone_name(const billing_zone *zone)
{
    if (zone == NULL)
        return NULL;
    return zone->name;
}

/* ---- offsets --------------------------------------------------------- */

/* Index of the last transition at or before @secs; the caller checks trans[0] <= secs. */
static size_t last_at_or_before(const billing_zone *z, int64_t secs)
{
    size_t lo = 0;
    size_t hi = z->n_trans;
    size_t mid;

    /* Invariant: trans[lo] <= secs, and trans[hi] > secs or hi == n_trans. */
    while (hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        if (z->trans[mid] <= secs)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* RFC 8536 section 3.2: type 0 before the first transition, the footer from the last on. */
static int32_t offset_at(const billing_zone *z, int64_t secs)
{
    size_t n = z->n_trans;

    if (n == 0 || secs >= z->trans[n - 1]) {
        if (z->has_rule)
            return bl_tzrule_offset(&z->rule, secs);
        return n == 0 ? z->types[0].utoff : z->types[z->trans_idx[n - 1]].utoff;
    }
    if (secs < z->trans[0])
        return z->types[0].utoff;
    return z->types[z->trans_idx[last_at_or_before(z, secs)]].utoff;
}

int32_t billing_zone_offset(const billing_zone *zone, billing_time_t t)
{
    if (zone == NULL)
        return 0;
    return offset_at(zone, floor_div(t, NS));
}

/*
 * The first instant after @secs at which the offset may change: the next
 * table transition, or past the last one the footer's next DST change.
 * Returns 0 if there is none.
 */
static int next_change(const billing_zone *z, int64_t secs, int64_t *next)
{
    size_t n = z->n_trans;
    size_t i;

    if (n > 0 && secs < z->trans[n - 1]) {
        i = secs < z->trans[0] ? 0 : last_at_or_before(z, secs) + 1;
        *next = z->trans[i];
        return 1;
    }
    if (z->has_rule)
        return bl_tzrule_next(&z->rule, secs, next);
    return 0;
}

/* ---- local time ------------------------------------------------------ */

void bl_zone_to_civil(const billing_zone *zone, billing_time_t t, bl_civil *out)
{
    int64_t secs = t / NS;
    int64_t nsec = t % NS;
    int64_t local;
    int64_t days;
    int64_t sod;

    /* Floor, without forming secs * NS (which overflows near INT64_MIN). */
    if (nsec < 0) {
        nsec += NS;
        secs--;
    }
    local = secs + (zone == NULL ? 0 : offset_at(zone, secs));
    days = floor_div(local, SECS_PER_DAY);
    sod = local - days * SECS_PER_DAY;
    bl_civil_from_days(days, &out->year, &out->month, &out->day);
    out->hour = (int)(sod / 3600);
    out->minute = (int)(sod / 60 % 60);
    out->second = (int)(sod % 60);
    out->nsec = (int32_t)nsec;
}

static int civil_valid(const bl_civil *c)
{
    if (c->year < CIVIL_YEAR_MIN || c->year > CIVIL_YEAR_MAX)
        return 0;
    if (c->month < 1 || c->month > 12 || c->day < 1 || c->day > bl_days_in_month(c->year, c->month))
        return 0;
    if (c->hour < 0 || c->hour > 23 || c->minute < 0 || c->minute > 59)
        return 0;
    return c->second >= 0 && c->second <= 59 && c->nsec >= 0 && c->nsec < NS;
}

/*
 * Find the instants u with u + offset(u) == @local by walking the spans of
 * constant offset that overlap [local - OFFSET_SPAN, local + OFFSET_SPAN]
 * in time order: the first span that contains its solution gives the
 * earliest instant (the overlap rule). If none does, the wall time fell in
 * a gap: take the offset from before the first gap that skipped it, which
 * moves the result forward by the gap's length.
 */
static int resolve_local(const billing_zone *z, int64_t local, resolved *res)
{
    int64_t cur = local - OFFSET_SPAN;
    int64_t hi = local + OFFSET_SPAN;
    int64_t next;
    int64_t end;
    int32_t off = offset_at(z, cur);
    int32_t noff;
    int has_next;

    res->in_gap = 0;
    for (;;) {
        has_next = next_change(z, cur, &next) && next <= hi;
        end = has_next ? next : hi + 1;
        if (local - off >= cur && local - off < end) {
            res->secs = local - off;
            return 0;
        }
        if (!has_next)
            break;
        noff = offset_at(z, next);
        if (!res->in_gap && next + off <= local && local < next + noff) {
            res->in_gap = 1;
            res->secs = local - off;
            res->gap_end = next;
        }
        cur = next;
        off = noff;
    }
    return res->in_gap ? 0 : -1;
}

static int resolve_civil(const billing_zone *zone, const bl_civil *c, resolved *res)
{
    int64_t local;

    if (zone == NULL || c == NULL || !civil_valid(c))
        return -1;
    local = bl_days_from_civil(c->year, c->month, c->day) * SECS_PER_DAY + c->hour * 3600 +
            c->minute * 60 + c->second;
    return resolve_local(zone, local, res);
}

static int in_range(billing_time_t t)
{
    return t >= BL_TIME_MIN && t <= BL_TIME_MAX;
}

int bl_zone_from_civil(const billing_zone *zone, const bl_civil *c, billing_time_t *out)
{
    resolved res;
    billing_time_t t;

    if (out == NULL || resolve_civil(zone, c, &res) != 0)
        return -1;
    if (secs_to_ns(res.secs, c->nsec, &t) != 0 || !in_range(t))
        return -1;
    *out = t;
    return 0;
}

/* Local midnight starting @month of @year (any int64 instant, no range check). */
static int month_start(const billing_zone *zone, int year, int month, billing_time_t *out)
{
    bl_civil c;
    resolved res;

    memset(&c, 0, sizeof(c));
    c.year = year;
    c.month = month;
    c.day = 1;
    if (resolve_civil(zone, &c, &res) != 0)
        return -1;
    /* A month cannot start later than the end of the gap that hid its midnight. */
    return secs_to_ns(res.in_gap ? res.gap_end : res.secs, 0, out);
}

billing_status billing_zone_month_start(const billing_zone *zone, int year, int month,
                                        billing_time_t *out)
{
    billing_time_t t;

    if (zone == NULL || out == NULL)
        return BILLING_ERR_INVALID;
    if (month < 1 || month > 12 || month_start(zone, year, month, &t) != 0 || !in_range(t))
        return BILLING_ERR_RANGE;
    *out = t;
    return BILLING_OK;
}

static void step_month(int *year, int *month, int delta)
{
    int m = *month + delta;

    if (m > 12) {
        m -= 12;
        (*year)++;
    } else if (m < 1) {
        m += 12;
        (*year)--;
    }
    *month = m;
}

/*
 * The month whose [month_start, next month_start) holds @t. Usually the
 * local date's month; it differs only when a backward transition repeats
 * the last hour of a month after the new month has begun, and then the
 * month boundaries win so that months tile the time line.
 */
static void month_of(const billing_zone *zone, billing_time_t t, int *year, int *month)
{
    bl_civil c;
    billing_time_t bound;

    bl_zone_to_civil(zone, t, &c);
    *year = c.year;
    *month = c.month;
    /*
     * Offsets stay within +-26 hours, so a clock can jump back at most 52
     * hours: three days from either edge the local date decides alone.
     */
    if (c.day > EDGE_DAYS && c.day <= bl_days_in_month(c.year, c.month) - EDGE_DAYS)
        return;
    step_month(year, month, 1);
    if (month_start(zone, *year, *month, &bound) == 0 && t >= bound)
        return;
    step_month(year, month, -1);
    if (month_start(zone, *year, *month, &bound) == 0 && t < bound)
        step_month(year, month, -1);
}

void billing_zone_year_month(const billing_zone *zone, billing_time_t t, int *year, int *month)
{
    int y;
    int m;

    /* With a NULL zone month_start fails and this is the UTC month. */
    month_of(zone, t, &y, &m);
    if (year != NULL)
        *year = y;
    if (month != NULL)
        *month = m;
}

billing_time_t bl_zone_next_month_start(const billing_zone *zone, billing_time_t t)
{
    int year;
    int month;
    billing_time_t next;

    if (zone == NULL)
        return INT64_MAX;
    month_of(zone, t, &year, &month);
    step_month(&year, &month, 1);
    if (month_start(zone, year, month, &next) != 0 || next <= t)
        return INT64_MAX;
    return next;
}

int bl_zone_add_months(const billing_zone *zone, billing_time_t anchor, int k, billing_time_t *out)
{
    bl_civil c;
    int64_t index;
    int dim;

    if (zone == NULL || out == NULL || k < 0)
        return -1;
    bl_zone_to_civil(zone, anchor, &c);
    index = (int64_t)c.year * 12 + (c.month - 1) + k;
    if (index / 12 > CIVIL_YEAR_MAX)
        return -1;
    c.year = (int)(index / 12);
    c.month = (int)(index % 12) + 1;
    dim = bl_days_in_month(c.year, c.month);
    if (c.day > dim)
        c.day = dim;
    return bl_zone_from_civil(zone, &c, out);
}
