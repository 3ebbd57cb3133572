/*
 * exact.h - exact numbers for the close: decimal and "p/q" strings to GMP
 * rationals and back, sums in minor units, rounding by a libbilling mode.
 * No floating point. Pure functions; thread-safe.
 */
#ifndef BILLING_EXACT_H
#define BILLING_EXACT_H

#include <gmp.h>
#include <stddef.h>

#include "billing.h"

/* exact_q_set - @s ("12.5", "-3", "7/3", at most 127 bytes) into @q. Returns 0 or -1. */
int exact_q_set(mpq_t q, const char *s);

/* exact_minor_add - add decimal @s, which has @digits fraction digits, to @acc in minor units. */
void exact_minor_add(mpz_t acc, const char *s, int digits);

/* exact_round_minor - @q (in minor units) to an integer by @mode, into @out. */
void exact_round_minor(mpz_t out, const mpq_t q, billing_rounding mode);

/* exact_minor_text - @minor minor units as a decimal with @digits digits into @buf. */
void exact_minor_text(char *buf, size_t size, const mpz_t minor, int digits);

/* exact_q_text - @q as a decimal when finite, else "p/q"; a new string (free()), NULL if out of memory. */
char *exact_q_text(const mpq_t q);

#endif /* BILLING_EXACT_H */
