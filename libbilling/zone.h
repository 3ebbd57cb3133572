/*
 * zone.h - time zones (TZif), local wall-clock times and plan terms (the
 * civil calendar itself is civil.h, which this includes).
 * Internal to libbilling. A billing_zone is immutable after
 * billing_zone_new, so every function here is thread-safe.
 */
#ifndef BILLING_ZONE_H
#define BILLING_ZONE_H

#include <stdint.h>

#include "billing.h"
#include "civil.h"

/* Supported range of instants: 1900-01-01 .. 2200-01-01 UTC. */
#define BL_TIME_MIN (INT64_C(-2208988800) * BILLING_NS_PER_SEC)
#define BL_TIME_MAX (INT64_C(7258118400) * BILLING_NS_PER_SEC)

/* A local (wall-clock) date and time. */
typedef struct bl_civil {
    int year;
    int month;    /* 1..12 */
    int day;      /* 1..31 */
    int hour;     /* 0..23 */
    int minute;   /* 0..59 */
    int second;   /* 0..59 */
    int32_t nsec; /* 0..999999999 */
} bl_civil;

/*
 * bl_zone_to_civil - local wall-clock time of instant @t in @zone (NULL:
 * UTC). Defined for every int64 instant; nanoseconds are floored, so -1
 * is 1969-12-31T23:59:59.999999999.
 */
void bl_zone_to_civil(const billing_zone *zone, billing_time_t t, bl_civil *out);

/*
 * bl_zone_from_civil - the instant at which the wall clock of @zone shows
 * @c. In a DST gap (the time does not exist) the result is shifted forward
 * by the gap's length (02:30 on a spring-forward day -> 03:30 new time);
 * in an overlap (the time occurs twice) the earlier instant is chosen.
 * Returns 0, or -1 if a field of @c is out of its range (month 1..12, day
 * valid for the month, hour 0..23, minute and second 0..59, nsec
 * 0..999999999), an argument is NULL, or the instant is outside
 * [BL_TIME_MIN, BL_TIME_MAX].
 */
int bl_zone_from_civil(const billing_zone *zone, const bl_civil *c, billing_time_t *out);

/*
 * bl_zone_next_month_start - the start of the local month following the
 * one containing @t (local midnight of the 1st, as billing_zone_month_start).
 * Always > @t. "The month containing @t" is the one whose
 * [start, next start) holds @t, as billing_zone_year_month reports it, so
 * months tile the time line even where a backward transition repeats the
 * last hour of a month. Not range-checked (any instant before 2262 works);
 * returns INT64_MAX if @zone is NULL or the result does not fit an int64.
 */
billing_time_t bl_zone_next_month_start(const billing_zone *zone, billing_time_t t);

/*
 * bl_zone_add_months - end of monthly term number @k (k >= 1) of a
 * subscription anchored at instant @anchor: the same local wall-clock time
 * as @anchor, on the anchor's day of the month, @k months later, the day
 * clamped to the month's last day (anchor Jan 31: Feb 28/29, Mar 31,
 * Apr 30, ...), resolved with bl_zone_from_civil's gap/overlap rules.
 * k == 0 gives the anchor's wall time resolved the same way. Returns 0, or
 * -1 if k < 0, an argument is NULL or the result is out of range.
 */
int bl_zone_add_months(const billing_zone *zone, billing_time_t anchor, int k, billing_time_t *out);

#endif /* BILLING_ZONE_H */
