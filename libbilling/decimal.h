/*
 * decimal.h - exact decimal text <-> GMP rationals, rounding to minor
 * units, fixed-point quantities. Internal to libbilling.
 *
 * No floating point anywhere. Every function is pure and thread-safe.
 */
#ifndef BILLING_DECIMAL_H
#define BILLING_DECIMAL_H

#include <gmp.h>
#include <stddef.h>

#include "billing.h"

/* Quantities are fixed point: an integer count of 10^-9 units. */
#define BL_QTY_SCALE_DIGITS 9
#define BL_QTY_SCALE INT64_C(1000000000)
/* Largest quantity accepted: 10^18 units = 10^27 nano-units. */

typedef __int128 bl_i128;

/*
 * bl_q_parse - parse decimal text @s ("12", "-0.5", "+3.25", ".5" is
 * rejected, "1e3" is rejected) into @out. At most BL_DECIMAL_MAX
 * characters and 40 significant digits. @allow_negative: 0 rejects a
 * leading '-'. @max_frac: maximum fractional digits, or -1 for no limit
 * (bounded by the length). Returns 0 on success, -1 if malformed (out is
 * then unspecified).
 */
int bl_q_parse(mpq_t out, const char *s, int allow_negative, int max_frac);

/*
 * bl_q_to_string - exact text of @q: a decimal without trailing zeros
 * ("12.5", "-0.0001", "3") when the reduced denominator has only factors 2
 * and 5, otherwise "p/q" in lowest terms ("1/3"). Returns a malloc'd
 * string (caller frees) or NULL when out of memory.
 */
char *bl_q_to_string(const mpq_t q);

/*
 * bl_q_round_minor - round @q to a whole number of 10^-@digits units with
 * @mode, storing the count of minor units in @out (e.g. q = 12.345,
 * digits 2, half-up -> 1235). @digits in 0..9.
 */
void bl_q_round_minor(mpz_t out, const mpq_t q, int digits, billing_rounding mode);

/*
 * bl_q_round_pow - bl_q_round_minor with 10^digits given as @pow10 and
 * the temporaries @rem and @tmp given by the caller, so that nothing is
 * allocated once their limbs have grown (month.c rounds every line and
 * part of a month with the rater's). @out, @rem and @tmp must be distinct
 * from each other and from @q's numerator and denominator.
 */
void bl_q_round_pow(mpz_t out, const mpq_t q, const mpz_t pow10, billing_rounding mode, mpz_t rem,
                    mpz_t tmp);

/*
 * bl_minor_to_string - text of @minor units with @digits decimals, always
 * exactly @digits after the point ("12.35", "-0.05", "1200" for digits 0).
 * Returns a malloc'd string or NULL when out of memory.
 */
char *bl_minor_to_string(const mpz_t minor, int digits);

/*
 * bl_minor_to_q - the rational value of @minor units with @digits
 * decimals (1235, 2 -> 12.35).
 */
void bl_minor_to_q(mpq_t out, const mpz_t minor, int digits);

/*
 * bl_qty_parse - parse a non-negative quantity with at most 9 fractional
 * digits and value at most 10^18 into nano-units (*out = value * 10^9).
 * Same syntax as bl_q_parse ("+" allowed). Returns 0; -1 if malformed
 * (BILLING_ERR_PARSE); -2 if too large, longer than BL_DECIMAL_MAX
 * characters or with more than 9 fractional digits, even zeros
 * (BILLING_ERR_RANGE); -3 if negative: a well-formed number with a
 * leading '-', "-0" included (the caller reports "negative quantity").
 */
int bl_qty_parse(bl_i128 *out, const char *s);

/*
 * bl_qty_parse_general - the same parser without bl_qty_parse's fast path
 * for short quantities ("8", "0.5", at most 9 + 9 digits): same answers
 * for every input; tests compare the two.
 */
int bl_qty_parse_general(bl_i128 *out, const char *s);

/* bl_mpz_set_i128 - set @out to @v exactly, INT128_MIN included. */
void bl_mpz_set_i128(mpz_t out, bl_i128 v);

/*
 * bl_qty_to_string - nano-units @v as decimal text without trailing zeros
 * into @buf (at least 48 bytes). Returns the length, or -1 (nothing
 * written) if @buf is NULL or too small.
 */
int bl_qty_to_string(bl_i128 v, char *buf, size_t size);

#endif /* BILLING_DECIMAL_H */
