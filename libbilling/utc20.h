/*
 * utc20.h - the timestamp form nearly every event carries,
 * "YYYY-MM-DDTHH:MM:SSZ" (20 bytes), read at fixed places. Internal to
 * this tree: timefmt.c reads it before its general parser, and the JSON
 * event decoder's usual-line path (formats/eventjson.c) reads an event's
 * two timestamps with it, the date once when both share it.
 *
 * Only years 1900..2199 are taken: every such instant is inside the
 * supported range (BL_TIME_MIN..BL_TIME_MAX), so no range check is left
 * to do. Anything else is refused (-1) and left to billing_time_parse,
 * which decides and writes the message.
 */
#ifndef BILLING_UTC20_H
#define BILLING_UTC20_H

#include <stdint.h>

/*
 * A byte less '0', modulo 256 (0..255): 0..9 for a digit. OR of (that + 6)
 * over the digits: its bits above 3 are clear if and only if all were
 * digits (0..9 give 6..15, anything else 16..261).
 */
#define BL_UTC20_D(t, i) ((unsigned)(unsigned char)((unsigned char)(t)[i] - '0'))
#define BL_UTC20_PAIR(t, i) (BL_UTC20_D(t, i) * 10 + BL_UTC20_D(t, (i) + 1))
#define BL_UTC20_CHECK(t, i) ((BL_UTC20_D(t, i) + 6) | (BL_UTC20_D(t, (i) + 1) + 6))

/*
 * bl_utc20_date - the "YYYY-MM-DD" at @t (10 bytes readable), a valid date
 * of 1900..2199, as days since 1970-01-01 into *@days: 0, or -1.
 */
static inline int bl_utc20_date(const char *t, int64_t *days)
{
    /* Days before each month of a common year; February's leap day is added apart. */
    static const uint16_t before[13] = {0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    static const uint8_t dim[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    unsigned bad =
        BL_UTC20_CHECK(t, 0) | BL_UTC20_CHECK(t, 2) | BL_UTC20_CHECK(t, 5) | BL_UTC20_CHECK(t, 8);
    unsigned year = BL_UTC20_PAIR(t, 0) * 100 + BL_UTC20_PAIR(t, 2);
    unsigned month = BL_UTC20_PAIR(t, 5);
    unsigned day = BL_UTC20_PAIR(t, 8);
    unsigned leap;
    unsigned y;

    if ((bad & ~15u) != 0 || t[4] != '-' || t[7] != '-' || year < 1900 || year > 2199 ||
        month - 1 > 11)
        return -1;
    leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    if (day - 1 >= (unsigned)dim[month] + (month == 2 && leap))
        return -1;
    /* Leap days before @year, less the 477 before 1970. */
    y = year - 1;
    *days = ((int64_t)year - 1970) * 365 + (int64_t)(y / 4 - y / 100 + y / 400) - 477 +
            before[month] + (month > 2 && leap) + day - 1;
    return 0;
}

/*
 * bl_utc20_clock - the "THH:MM:SSZ" at @t + 10 (@t being the 20 bytes of
 * the form) as seconds into the day, 0..86399, or -1.
 */
static inline int32_t bl_utc20_clock(const char *t)
{
    unsigned bad = BL_UTC20_CHECK(t, 11) | BL_UTC20_CHECK(t, 14) | BL_UTC20_CHECK(t, 17);
    unsigned hour = BL_UTC20_PAIR(t, 11);
    unsigned minute = BL_UTC20_PAIR(t, 14);
    unsigned second = BL_UTC20_PAIR(t, 17);

    if ((bad & ~15u) != 0 || t[10] != 'T' || t[13] != ':' || t[16] != ':' || t[19] != 'Z' ||
        hour > 23 || minute > 59 || second > 59)
        return -1;
    return (int32_t)(hour * 3600 + minute * 60 + second);
}

/* bl_utc20_parse - the @len bytes at @t when they are the form, as an instant into *@out: 0, or -1. */
static inline int bl_utc20_parse(const char *t, size_t len, billing_time_t *out)
{
    int64_t days;
    int32_t secs;

    if (len != 20 || bl_utc20_date(t, &days) != 0)
        return -1;
    secs = bl_utc20_clock(t);
    if (secs < 0)
        return -1;
    *out = (days * 86400 + secs) * BILLING_NS_PER_SEC;
    return 0;
}

#endif /* BILLING_UTC20_H */
