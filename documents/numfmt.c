/*
 * numfmt.c - exact numbers for people: see numfmt.h.
 */
#include "config.h"

#include <gmp.h>
#include <stdio.h>
#include <string.h>

#include "numfmt.h"

/* Longest input accepted: libbilling's decimals have at most 40 significant digits. */
#define INPUT_MAX 200

int numfmt_parse(mpq_t q, const char *s)
{
    char digits[INPUT_MAX + 1];
    const char *dot = strchr(s, '.');
    size_t len = strlen(s);
    size_t scale;
    size_t ip;
    mpz_t den;

    if (len == 0 || len > INPUT_MAX)
        return -1;
    if (dot == NULL) {
        if (mpq_set_str(q, s, 10) != 0 || mpz_sgn(mpq_denref(q)) == 0)
            return -1;
        mpq_canonicalize(q);
        return 0;
    }
    ip = (size_t)(dot - s);
    scale = len - ip - 1;
    memcpy(digits, s, ip);
    memcpy(digits + ip, dot + 1, scale + 1);
    if (strchr(digits, '/') != NULL || mpz_set_str(mpq_numref(q), digits, 10) != 0)
        return -1;
    mpz_init(den);
    mpz_ui_pow_ui(den, 10, scale);
    mpz_set(mpq_denref(q), den);
    mpz_clear(den);
    mpq_canonicalize(q);
    return 0;
}

/* |@q| * 10^@scale rounded half away from zero, into @out. */
static void scaled_round(mpz_t out, const mpq_t q, int scale)
{
    mpz_t num;
    mpz_t den;
    mpz_t rem;

    mpz_inits(num, den, rem, NULL);
    mpz_abs(num, mpq_numref(q));
    mpz_ui_pow_ui(den, 10, (unsigned long)scale);
    mpz_mul(num, num, den);
    mpz_tdiv_qr(out, rem, num, mpq_denref(q));
    mpz_mul_2exp(rem, rem, 1);
    if (mpz_cmp(rem, mpq_denref(q)) >= 0)
        mpz_add_ui(out, out, 1);
    mpz_clears(num, den, rem, NULL);
}

/* Write @digits (an integer part) into @out with @sep every three digits. */
static size_t group(char *out, const char *digits, size_t n, const char *sep)
{
    size_t sl = strlen(sep);
    size_t w = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) {
            memcpy(out + w, sep, sl);
            w += sl;
        }
        out[w++] = digits[i];
    }
    return w;
}

/* Lay out the integer @v = |value| * 10^@scale with a decimal point and separators. */
static int layout(const mpz_t v, int negative, int scale, int min_scale, const char *sep, char *buf,
                  size_t size)
{
    char digits[NUMFMT_MAX];
    char out[3 * NUMFMT_MAX];
    size_t n;
    size_t ip;
    size_t w = 0;

    if (mpz_sizeinbase(v, 10) + (size_t)scale + 2 >= sizeof(digits) || strlen(sep) > 4)
        return -1;
    mpz_get_str(digits, 10, v);
    n = strlen(digits);
    if (n <= (size_t)scale) {
        memmove(digits + (size_t)scale + 1 - n, digits, n + 1);
        memset(digits, '0', (size_t)scale + 1 - n);
        n = (size_t)scale + 1;
    }
    /* Trailing zeros of the fraction go, down to min_scale. */
    while (scale > min_scale && digits[n - 1] == '0') {
        digits[--n] = '\0';
        scale--;
    }
    ip = n - (size_t)scale;
    if (negative && strspn(digits, "0") != n)
        out[w++] = '-';
    w += group(out + w, digits, ip, sep);
    if (scale > 0) {
        out[w++] = '.';
        memcpy(out + w, digits + ip, (size_t)scale);
        w += (size_t)scale;
    }
    out[w] = '\0';
    if (w >= size)
        return -1;
    memcpy(buf, out, w + 1);
    return 0;
}

int numfmt_decimal(const char *exact, int min_scale, int max_scale, const char *sep, char *buf,
                   size_t size)
{
    mpq_t q;
    mpz_t v;
    int rc = -1;

    if (min_scale < 0 || max_scale < min_scale || max_scale > 60)
        goto cut;
    mpq_init(q);
    mpz_init(v);
    if (numfmt_parse(q, exact) == 0) {
        scaled_round(v, q, max_scale);
        rc = layout(v, mpq_sgn(q) < 0, max_scale, min_scale, sep, buf, size);
    }
    mpz_clear(v);
    mpq_clear(q);
    if (rc == 0)
        return 0;
cut:
    if (size > 0)
        snprintf(buf, size, "%s", exact);
    return -1;
}

int numfmt_percent(const char *rate, char *buf, size_t size)
{
    char pct[NUMFMT_MAX];
    mpq_t q;
    mpz_t v;
    int rc = -1;

    mpq_init(q);
    mpz_init(v);
    if (numfmt_parse(q, rate) == 0) {
        /* A decimal rate times 100 is exact at the rate's own scale (at most 40 digits). */
        mpz_mul_ui(mpq_numref(q), mpq_numref(q), 100);
        mpq_canonicalize(q);
        scaled_round(v, q, 40);
        rc = layout(v, mpq_sgn(q) < 0, 40, 0, "", pct, sizeof(pct));
    }
    mpz_clear(v);
    mpq_clear(q);
    if (rc == 0 && snprintf(buf, size, "%s%%", pct) < (int)size)
        return 0;
    if (size > 0)
        snprintf(buf, size, "%s", rate);
    return -1;
}

int numfmt_add(const char *a, const char *b, int scale, char *out, size_t size)
{
    mpq_t x;
    mpq_t y;
    char *sum = NULL;
    int rc = -1;

    mpq_init(x);
    mpq_init(y);
    if (numfmt_parse(x, a) == 0 && numfmt_parse(y, b) == 0) {
        mpq_add(x, x, y);
        sum = mpq_get_str(NULL, 10, x);
    }
    mpq_clear(x);
    mpq_clear(y);
    if (sum != NULL && strlen(sum) <= INPUT_MAX)
        rc = numfmt_decimal(sum, scale, scale, "", out, size);
    if (sum != NULL) {
        void (*gmp_free)(void *, size_t);

        mp_get_memory_functions(NULL, NULL, &gmp_free);
        gmp_free(sum, strlen(sum) + 1);
    }
    return rc;
}
