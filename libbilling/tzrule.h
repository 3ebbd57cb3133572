/*
 * tzrule.h - POSIX TZ strings ("EST5EDT,M3.2.0,M11.1.0"), as found in the
 * footer of TZif files, and the offsets they give. Internal to libbilling.
 * A parsed rule is plain data: every function here is thread-safe.
 */
#ifndef BILLING_TZRULE_H
#define BILLING_TZRULE_H

#include <stddef.h>
#include <stdint.h>

/* Largest |UTC offset| a rule can give: 24:59:59 plus one hour of DST. */
#define BL_TZRULE_OFFSET_MAX 93599

/* One transition date of a rule: when in the year and at what local time. */
typedef struct bl_tzdate {
    char kind;    /* 'J' (Jn: 1..365, Feb 29 never counted), 'D' (n: 0..365), 'M' */
    int day;      /* n of Jn or n */
    int month;    /* Mm.w.d: 1..12 */
    int week;     /* 1..5, 5 = last */
    int wday;     /* 0 (Sunday) .. 6 */
    int32_t secs; /* local time of day, -167h..167h (RFC 8536 version 3) */
} bl_tzdate;

typedef struct bl_tzrule {
    int32_t std_off; /* standard time, seconds east of UTC */
    int32_t dst_off; /* daylight time, seconds east of UTC */
    int has_dst;     /* 0: std_off all the time */
    bl_tzdate start; /* DST starts (given in standard local time) */
    bl_tzdate end;   /* DST ends (given in daylight local time) */
} bl_tzrule;

/*
 * bl_tzrule_parse - parse the @len bytes at @s (not NUL-terminated) as a
 * POSIX TZ string. A DST name without transition rules is rejected: zic
 * never writes one, and POSIX leaves its meaning to the implementation.
 * Returns 0, or -1 with a message in errbuf.
 */
int bl_tzrule_parse(const char *s, size_t len, bl_tzrule *out, char *errbuf, size_t errsize);

/* bl_tzrule_offset - the offset (seconds east) at instant @secs (Unix seconds). */
int32_t bl_tzrule_offset(const bl_tzrule *rule, int64_t secs);

/*
 * bl_tzrule_next - the first DST start or end strictly after @secs.
 * Returns 1 and stores it in *@next, or 0 if the rule has no DST.
 */
int bl_tzrule_next(const bl_tzrule *rule, int64_t secs, int64_t *next);

#endif /* BILLING_TZRULE_H */
