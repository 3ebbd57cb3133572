/*
 * numfmt.h - exact numbers (decimal strings or "p/q" fractions, as
 * libbilling writes them) shown to people: rounded for display, padded to
 * a scale, grouped by thousands, as a percentage. Exact arithmetic (GMP)
 * throughout; the exact value stays in JSON and CSV.
 */
#ifndef DOCUMENTS_NUMFMT_H
#define DOCUMENTS_NUMFMT_H

#include <gmp.h>
#include <stddef.h>

/* Longest number these functions write, with separators and sign. */
#define NUMFMT_MAX 160

/*
 * numfmt_parse - the exact value @s ("-12.345" or "p/q", at most 200
 * bytes, as libbilling writes them) into @q (initialized). Returns 0, or
 * -1 when @s is not such a number.
 */
int numfmt_parse(mpq_t q, const char *s);

/*
 * numfmt_decimal - @exact as a decimal with at most @max_scale and at
 * least @min_scale fraction digits: rounded half away from zero when it
 * has more than @max_scale (or is a fraction without a finite decimal
 * form), trailing zeros trimmed down to @min_scale. Then every three
 * digits of the integer part are separated by @sep ("" for none).
 * Writes into @buf of @size bytes. Returns 0, or -1 when @exact is not a
 * number or the result does not fit (then @buf holds @exact, cut).
 */
int numfmt_decimal(const char *exact, int min_scale, int max_scale, const char *sep, char *buf,
                   size_t size);

/*
 * numfmt_percent - the fraction @rate ("0.06") as a percentage ("6%",
 * "6.5%"), exact. Returns 0 or -1 as numfmt_decimal.
 */
int numfmt_percent(const char *rate, char *buf, size_t size);

/*
 * numfmt_add - @a + @b (exact decimals or fractions), written with exactly
 * @scale fraction digits (rounded half away from zero) into @out of @size
 * bytes, which may be @a. Returns 0, or -1 when either is not a number or
 * the sum does not fit.
 */
int numfmt_add(const char *a, const char *b, int scale, char *out, size_t size);

#endif /* DOCUMENTS_NUMFMT_H */
