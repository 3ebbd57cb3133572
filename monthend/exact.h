/*
 * exact.h - exact numbers for the close: sums of decimal strings in minor
 * units, and rationals back to text (parsing and rounding are
 * billing_decimal_parse and billing_decimal_round, billing.h).
 * No floating point. Pure functions; thread-safe.
 */
#ifndef MONTHEND_EXACT_H
#define MONTHEND_EXACT_H

#include <gmp.h>
#include <stddef.h>

#include "billing.h"

/* exact_minor_add - add decimal @s, which has @digits fraction digits, to @acc in minor units. */
void exact_minor_add(mpz_t acc, const char *s, int digits);

/* exact_minor_text - @minor minor units as a decimal with @digits digits into @buf. */
void exact_minor_text(char *buf, size_t size, const mpz_t minor, int digits);

/* exact_q_text - @q as a decimal when finite, else "p/q"; a new string (free()), NULL if out of memory. */
char *exact_q_text(const mpq_t q);

#endif /* MONTHEND_EXACT_H */
