/*
 * exact.c - exact decimal and rational helpers of the close (exact.h):
 * GMP, never floating point.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact.h"

/* exact_q_set - @s ("12.5", "-3", "7/3") into @q. Returns 0 or -1. */
int exact_q_set(mpq_t q, const char *s)
{
    const char *dot = strchr(s, '.');
    char buf[128];
    size_t frac;

    if (strchr(s, '/') != NULL) {
        if (mpq_set_str(q, s, 10) != 0 || mpz_sgn(mpq_denref(q)) == 0)
            return -1;
        mpq_canonicalize(q);
        return 0;
    }
    if (strlen(s) >= sizeof(buf))
        return -1;
    frac = dot != NULL ? strlen(dot + 1) : 0;
    snprintf(buf, sizeof(buf), "%.*s%s", dot != NULL ? (int)(dot - s) : (int)strlen(s), s,
             dot != NULL ? dot + 1 : "");
    if (mpz_set_str(mpq_numref(q), buf, 10) != 0)
        return -1;
    mpz_ui_pow_ui(mpq_denref(q), 10, frac);
    mpq_canonicalize(q);
    return 0;
}

/* exact_minor_add - add decimal @s with @digits fraction digits to @acc as minor units. */
void exact_minor_add(mpz_t acc, const char *s, int digits)
{
    mpq_t q;

    mpq_init(q);
    if (exact_q_set(q, s) == 0) {
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

/* exact_round_minor - @q (in minor units) to an integer by @mode, into @out. */
void exact_round_minor(mpz_t out, const mpq_t q, billing_rounding mode)
{
    mpz_t r;
    mpz_t twice;
    int cmp;
    int neg = mpq_sgn(q) < 0;

    mpz_init(r);
    mpz_init(twice);
    switch (mode) {
    case BILLING_ROUND_DOWN:
        mpz_tdiv_q(out, mpq_numref(q), mpq_denref(q));
        break;
    case BILLING_ROUND_UP:
        if (neg)
            mpz_fdiv_q(out, mpq_numref(q), mpq_denref(q));
        else
            mpz_cdiv_q(out, mpq_numref(q), mpq_denref(q));
        break;
    case BILLING_ROUND_FLOOR:
        mpz_fdiv_q(out, mpq_numref(q), mpq_denref(q));
        break;
    case BILLING_ROUND_CEILING:
        mpz_cdiv_q(out, mpq_numref(q), mpq_denref(q));
        break;
    default:
        /* Halves: compare twice the remainder of |q| with the denominator. */
        mpz_abs(twice, mpq_numref(q));
        mpz_tdiv_qr(out, r, twice, mpq_denref(q));
        mpz_mul_2exp(twice, r, 1);
        cmp = mpz_cmp(twice, mpq_denref(q));
        if (cmp > 0 || (cmp == 0 && (mode == BILLING_ROUND_HALF_UP || mpz_odd_p(out))))
            mpz_add_ui(out, out, 1);
        if (neg)
            mpz_neg(out, out);
        break;
    }
    mpz_clear(twice);
    mpz_clear(r);
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
        snprintf(buf, size, "%s0.%.*s%s", sign, (int)(k - len), "0000000000000000000000000000000000000000", d);
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
