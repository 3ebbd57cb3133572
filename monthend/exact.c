/*
 * exact.c - exact decimal and rational helpers of the close (exact.h):
 * GMP, never floating point. Parsing and rounding are libbilling's
 * (billing_decimal_parse, billing_decimal_round), not copies.
 */
#include "config.h"

#include <gmp.h> /* before billing.h: its exact decimal functions */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact.h"

/* exact_minor_add - add decimal @s with @digits fraction digits to @acc as minor units. */
void exact_minor_add(mpz_t acc, const char *s, int digits)
{
    mpq_t q;

    mpq_init(q);
    if (billing_decimal_parse(q, s, NULL, 0) == BILLING_OK) {
        mpz_t scale;
        mpz_init(scale);
        mpz_ui_pow_ui(scale, 10, (unsigned long)digits);
        mpz_mul(mpq_numref(q), mpq_numref(q), scale);
        mpq_canonicalize(q);
        mpz_add(acc, acc, mpq_numref(q)); /* integral: the amount has @digits digits */
        mpz_clear(scale);
    }
    mpq_clear(q);
}

/* exact_minor_text - @minor minor units as a decimal with @digits digits into @buf. */
void exact_minor_text(char *buf, size_t size, const mpz_t minor, int digits)
{
    char *s = mpz_get_str(NULL, 10, minor);
    const char *sign = s != NULL && s[0] == '-' ? "-" : "";
    const char *d = s == NULL ? "0" : s[0] == '-' ? s + 1 : s;
    size_t len = strlen(d);
    size_t k = (size_t)digits;

    if (k == 0)
        snprintf(buf, size, "%s%s", sign, d);
    else if (len <= k)
        snprintf(buf, size, "%s0.%.*s%s", sign, (int)(k - len),
                 "0000000000000000000000000000000000000000", d);
    else
        snprintf(buf, size, "%s%.*s.%s", sign, (int)(len - k), d, d + len - k);
    free(s);
}

/* exact_q_text - @q as a decimal when finite, else "p/q", into a new string. */
char *exact_q_text(const mpq_t q)
{
    mpz_t den;
    size_t twos = 0;
    size_t fives = 0;
    char *out;

    mpz_init_set(den, mpq_denref(q));
    while (mpz_divisible_ui_p(den, 2)) {
        mpz_divexact_ui(den, den, 2);
        twos++;
    }
    while (mpz_divisible_ui_p(den, 5)) {
        mpz_divexact_ui(den, den, 5);
        fives++;
    }
    if (mpz_cmp_ui(den, 1) == 0) {
        size_t digits = twos > fives ? twos : fives;
        mpz_t scaled;
        size_t need;
        mpz_init(scaled);
        mpz_ui_pow_ui(scaled, 10, digits);
        mpz_mul(scaled, scaled, mpq_numref(q));
        mpz_divexact(scaled, scaled, mpq_denref(q));
        need = mpz_sizeinbase(scaled, 10) + digits + 4;
        out = malloc(need);
        if (out != NULL)
            exact_minor_text(out, need, scaled, (int)digits);
        mpz_clear(scaled);
    } else {
        out = mpq_get_str(NULL, 10, q);
    }
    mpz_clear(den);
    return out;
}
