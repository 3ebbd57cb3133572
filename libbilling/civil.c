/*
 * civil.c - the civil calendar (proleptic Gregorian), below zone.c and
 * tzrule.c: both need it, so it lives in neither (it did live in zone.c,
 * which made zone.c and tzrule.c use each other).
 */
#include "config.h"

#include "billing.h"
#include "civil.h"

static int is_leap(int year)
{
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

/* Howard Hinnant's days_from_civil (http://howardhinnant.github.io/date_algorithms.html). */
int64_t bl_days_from_civil(int year, int month, int day)
{
    int64_t y = (int64_t)year - (month <= 2);
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t mp = month > 2 ? month - 3 : month + 9;
    int64_t doy = (153 * mp + 2) / 5 + day - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + doe - 719468;
}

/*
 * Days are clamped to +-7e11 (about +-1.9 billion years) so that the year
 * fits in an int; every instant in billing_time_t is far inside that.
 */
void bl_civil_from_days(int64_t days, int *year, int *month, int *day)
{
    const int64_t limit = INT64_C(700000000000);
    int64_t z;
    int64_t era;
    int64_t doe;
    int64_t yoe;
    int64_t doy;
    int64_t mp;
    int m;

    if (days > limit)
        days = limit;
    if (days < -limit)
        days = -limit;
    z = days + 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = (int)(yoe + era * 400 + (m <= 2));
    *month = m;
    *day = (int)(doy - (153 * mp + 2) / 5 + 1);
}

int bl_days_in_month(int year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    if (month < 1 || month > 12)
        return 0;
    if (month == 2 && is_leap(year))
        return 29;
    return days[month - 1];
}

billing_status billing_civil_days(int year, int month, int day, int64_t *days)
{
    if (days == NULL)
        return BILLING_ERR_INVALID;
    if (month < 1 || month > 12 || day < 1 || day > bl_days_in_month(year, month))
        return BILLING_ERR_RANGE;
    *days = bl_days_from_civil(year, month, day);
    return BILLING_OK;
}
