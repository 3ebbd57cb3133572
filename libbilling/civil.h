/*
 * civil.h - the civil calendar (proleptic Gregorian): days since
 * 1970-01-01 from a date and back, and the length of a month. Internal to
 * libbilling; the bottom of the time floor, below zone.c and tzrule.c
 * (which both use it, and neither of which it uses). Pure functions, so
 * every one is thread-safe. billing_civil_days (billing.h) is the public
 * face of bl_days_from_civil.
 */
#ifndef BILLING_CIVIL_H
#define BILLING_CIVIL_H

#include <stdint.h>

/*
 * bl_days_from_civil - days since 1970-01-01 of proleptic Gregorian y-m-d
 * (Howard Hinnant's algorithm; exact for every int year, month 1..12).
 */
int64_t bl_days_from_civil(int year, int month, int day);

/*
 * bl_civil_from_days - inverse of bl_days_from_civil. @days is clamped to
 * +-7e11 so that the year fits in an int.
 */
void bl_civil_from_days(int64_t days, int *year, int *month, int *day);

/* bl_days_in_month - 28..31, or 0 if @month is not 1..12. */
int bl_days_in_month(int year, int month);

#endif /* BILLING_CIVIL_H */
