/*
 * decimal.c - exact decimal text <-> GMP rationals, rounding to minor
 * units, fixed-point quantities.
 *
 * Money never touches floating point: text is turned into an integer
 * numerator over a power of ten, and every later step stays in mpz/mpq.
 * Quantities are plain 128-bit integers of nano-units because they are
 * added up per event and a GMP value per event would be wasteful.
 */
#include "config.h"

#include <gmp.h> /* before billing.h (via internal.h): its decimal functions need it */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "decimal.h"

/* Significant digits accepted in a decimal argument (see billing.h). */
#define DECIMAL_DIGITS_MAX 40

/* Largest quantity: 10^18 whole units, i.e. 10^27 nano-units. */
#define QTY_MAX_UNITS INT64_C(1000000000000000000)
#define QTY_MAX_NANO ((bl_i128)QTY_MAX_UNITS * BL_QTY_SCALE)

typedef unsigned __int128 bl_u128;

/* The pieces of a literal "[+-]digits[.digits]", pointing into the text. */
typedef struct dec_parts {
    int negative;
    const char *int_digits;
    size_t int_len;
    const char *frac_digits; /* points at "" when there is no fraction */
    size_t frac_len;
} dec_parts;

/* ------------------------------------------------------------------ */
/* Lexing                                                              */
/* ------------------------------------------------------------------ */

static size_t count_digits(const char *s)
{
    size_t n = 0;

    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n;
}

/*
 * split_decimal - recognise exactly [+-]digits[.digits]. Both sides of the
 * point need a digit so that ".5" and "1." (ambiguous in some locales and
 * tools) are rejected rather than guessed at. Returns 0 or -1.
 */
static int split_decimal(const char *s, dec_parts *p)
{
    p->negative = 0;
    if (*s == '+' || *s == '-') {
        p->negative = *s == '-';
        s++;
    }
    p->int_digits = s;
    p->int_len = count_digits(s);
    if (p->int_len == 0)
        return -1;
    s += p->int_len;
    p->frac_digits = s;
    p->frac_len = 0;
    if (*s == '.') {
        s++;
        p->frac_digits = s;
        p->frac_len = count_digits(s);
        if (p->frac_len == 0)
            return -1;
        s += p->frac_len;
    }
    return *s == '\0' ? 0 : -1;
}

/* Digits from the first non-zero one; zero has none. */
static size_t significant_digits(const dec_parts *p)
{
    size_t lead = 0;
    size_t frac_lead = 0;

    while (lead < p->int_len && p->int_digits[lead] == '0')
        lead++;
    if (lead < p->int_len)
        return p->int_len - lead + p->frac_len;
    while (frac_lead < p->frac_len && p->frac_digits[frac_lead] == '0')
        frac_lead++;
    return p->frac_len - frac_lead;
}

/* Too long to be a decimal argument; never reads past limit + 1 bytes. */
static int too_long(const char *s)
{
    return strnlen(s, BL_DECIMAL_MAX + 1) > BL_DECIMAL_MAX;
}

/* ------------------------------------------------------------------ */
/* Rationals                                                           */
/* ------------------------------------------------------------------ */

int bl_q_parse(mpq_t out, const char *s, int allow_negative, int max_frac)
{
    dec_parts p;
    char digits[BL_DECIMAL_MAX + 1];
    size_t n;

    if (s == NULL || too_long(s))
        return -1;
    if (split_decimal(s, &p) != 0)
        return -1;
    if (p.negative && !allow_negative)
        return -1;
    if (max_frac >= 0 && p.frac_len > (size_t)max_frac)
        return -1;
    if (significant_digits(&p) > DECIMAL_DIGITS_MAX)
        return -1;
    /* "12.345" is 12345 / 10^3: join the digits, scale by the fraction. */
    n = p.int_len + p.frac_len;
    memcpy(digits, p.int_digits, p.int_len);
    memcpy(digits + p.int_len, p.frac_digits, p.frac_len);
    digits[n] = '\0';
    if (mpz_set_str(mpq_numref(out), digits, 10) != 0)
        return -1;
    if (p.negative)
        mpz_neg(mpq_numref(out), mpq_numref(out));
    mpz_ui_pow_ui(mpq_denref(out), 10, p.frac_len);
    mpq_canonicalize(out);
    return 0;
}

/*
 * terminating_exponent - the least k with den | 10^k, or -1 if there is
 * none (den has a prime factor other than 2 and 5). @den is positive.
 */
static long terminating_exponent(const mpz_t den)
{
    mpz_t rest;
    mpz_t five;
    mp_bitcnt_t twos;
    mp_bitcnt_t fives;
    long k;

    mpz_init(rest);
    mpz_init_set_ui(five, 5);
    twos = mpz_scan1(den, 0);
    mpz_tdiv_q_2exp(rest, den, twos);
    fives = mpz_remove(rest, rest, five);
    k = -1;
    if (mpz_cmp_ui(rest, 1) == 0)
        k = (long)(twos > fives ? twos : fives);
    mpz_clear(five);
    mpz_clear(rest);
    return k;
}

/*
 * scaled_to_string - the text of m / 10^k with exactly k decimals ("-0.05"
 * for m = -5, k = 2; no point when k is 0). Malloc'd, or NULL.
 */
static char *scaled_to_string(const mpz_t m, size_t k)
{
    char *raw;
    char *text;
    const char *mag;
    size_t len;
    size_t width;
    size_t pad;
    size_t i;
    size_t pos;

    raw = malloc(mpz_sizeinbase(m, 10) + 2);
    if (raw == NULL)
        return NULL;
    mpz_get_str(raw, 10, m);
    mag = raw[0] == '-' ? raw + 1 : raw;
    len = strlen(mag);
    /* At least one digit before the point: 5 at k = 2 is "0.05". */
    width = len > k ? len : k + 1;
    pad = width - len;
    text = malloc(width + 3);
    if (text == NULL) {
        free(raw);
        return NULL;
    }
    pos = 0;
    if (mag != raw)
        text[pos++] = '-';
    for (i = 0; i < width; i++) {
        if (k > 0 && i == width - k)
            text[pos++] = '.';
        text[pos++] = i < pad ? '0' : mag[i - pad];
    }
    text[pos] = '\0';
    free(raw);
    return text;
}

/* "p/q" in lowest terms, sign on p. Malloc'd, or NULL. */
static char *fraction_to_string(const mpq_t q)
{
    char *text;

    text = malloc(mpz_sizeinbase(mpq_numref(q), 10) + mpz_sizeinbase(mpq_denref(q), 10) + 3);
    if (text == NULL)
        return NULL;
    mpq_get_str(text, 10, q);
    return text;
}

char *bl_q_to_string(const mpq_t q)
{
    long k;
    mpz_t scaled;
    char *text;

    k = terminating_exponent(mpq_denref(q));
    if (k < 0)
        return fraction_to_string(q);
    /*
     * q * 10^k is an integer; since q is in lowest terms and k is minimal
     * it does not end in 0, so printing it with k decimals leaves no
     * trailing zeros to strip.
     */
    mpz_init(scaled);
    mpz_ui_pow_ui(scaled, 10, (unsigned long)k);
    mpz_mul(scaled, scaled, mpq_numref(q));
    mpz_divexact(scaled, scaled, mpq_denref(q));
    text = scaled_to_string(scaled, (size_t)k);
    mpz_clear(scaled);
    return text;
}

/* Sign of 2 * rem - den: where the remainder lies relative to one half. */
static int compare_to_half(const mpz_t rem, const mpz_t den, mpz_t twice)
{
    mpz_mul_2exp(twice, rem, 1);
    return mpz_cmp(twice, den);
}

/*
 * directed_up - for the directed modes, whether a value strictly between
 * two integers, of sign @sign, rounds to the upper one (0 or 1); -1 for
 * the half modes, which need the remainder. An unknown mode behaves as
 * HALF_UP, the documented default, because rounding has no way to fail.
 */
static int directed_up(billing_rounding mode, int sign)
{
    switch (mode) {
    case BILLING_ROUND_FLOOR:
        return 0;
    case BILLING_ROUND_CEILING:
        return 1;
    case BILLING_ROUND_DOWN:
        return sign < 0;
    case BILLING_ROUND_UP:
        return sign > 0;
    case BILLING_ROUND_HALF_UP:
    case BILLING_ROUND_HALF_EVEN:
        break;
    }
    return -1;
}

/* half_up - the half modes: @half the sign of 2 rem - den, @odd whether floor_q is odd. */
static int half_up(billing_rounding mode, int sign, int half, int odd)
{
    if (half != 0)
        return half > 0;
    if (mode == BILLING_ROUND_HALF_EVEN)
        return odd;
    return sign > 0;
}

/*
 * rounds_up - whether a value strictly between floor_q and floor_q + 1
 * (remainder rem / den, rem > 0, value of sign @sign) rounds to
 * floor_q + 1 under @mode.
 */
static int rounds_up(billing_rounding mode, int sign, const mpz_t floor_q, const mpz_t rem,
                     const mpz_t den, mpz_t tmp)
{
    int up = directed_up(mode, sign);

    if (up >= 0)
        return up;
    return half_up(mode, sign, compare_to_half(rem, den, tmp), mpz_odd_p(floor_q) != 0);
}

#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
/*
 * Largest magnitude, in bits, of the scaled numerator and the denominator
 * that round_small takes: below 2^126, so that the quotient plus one and
 * twice the remainder fit a signed and an unsigned 128-bit integer.
 */
#define SMALL_BITS 126

/* |@z| (at most two limbs) as an unsigned 128-bit integer. */
static unsigned __int128 abs_u128(const mpz_t z)
{
    return (unsigned __int128)mpz_getlimbn(z, 1) << 64 | mpz_getlimbn(z, 0);
}

/* Non-zero if |@z| < 2^SMALL_BITS (mpz_size and mpz_getlimbn are inline: no call). */
static int is_small(const mpz_t z)
{
    return mpz_size(z) < 2 || (mpz_size(z) == 2 && (mpz_getlimbn(z, 1) >> (SMALL_BITS - 64)) == 0);
}

/*
 * round_small - bl_q_round_pow's rounding of @scaled / @den when both are
 * below 2^SMALL_BITS in magnitude (the usual month: a line's amount is
 * about 2^100 over 2^80), in 128-bit integers instead of a GMP division
 * (its cost was most of a month's rounding): the same floor, remainder and
 * decision. Returns 0 and sets @out, or -1 (nothing done) when too large.
 */
static int round_small(mpz_t out, const mpz_t scaled, const mpz_t den, billing_rounding mode)
{
    int sign = mpz_sgn(scaled);
    unsigned __int128 a;
    unsigned __int128 d;
    unsigned __int128 q;
    unsigned __int128 rem;
    bl_i128 floor_q;
    int up;

    if (!is_small(scaled) || !is_small(den))
        return -1;
    a = abs_u128(scaled);
    d = abs_u128(den);
    q = a / d;
    rem = a % d;
    /* Floor division, remainder in [0, den), as mpz_fdiv_qr: below zero, one further down. */
    if (sign < 0 && rem != 0) {
        q++;
        rem = d - rem;
    }
    floor_q = sign < 0 ? -(bl_i128)q : (bl_i128)q;
    up = 0;
    if (rem != 0) {
        up = directed_up(mode, sign);
        if (up < 0)
            up = half_up(mode, sign, 2 * rem > d ? 1 : 2 * rem < d ? -1 : 0, (int)(q & 1));
    }
    bl_mpz_set_i128(out, floor_q + up);
    return 0;
}
#endif

void bl_q_round_pow(mpz_t out, const mpq_t q, const mpz_t pow10, billing_rounding mode, mpz_t rem,
                    mpz_t tmp)
{
    int sign;

    mpz_mul(out, pow10, mpq_numref(q));
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
    if (round_small(out, out, mpq_denref(q), mode) == 0)
        return;
#endif
    sign = mpz_sgn(out);
    /* Floor division gives a remainder in [0, den) whatever the sign. */
    mpz_fdiv_qr(out, rem, out, mpq_denref(q));
    if (mpz_sgn(rem) != 0 && rounds_up(mode, sign, out, rem, mpq_denref(q), tmp))
        mpz_add_ui(out, out, 1);
}

void bl_q_round_minor(mpz_t out, const mpq_t q, int digits, billing_rounding mode)
{
    mpz_t pow10;
    mpz_t scaled;
    mpz_t rem;
    mpz_t tmp;

    /* Work in locals so that @out may be @q's own numerator. */
    mpz_init(pow10);
    mpz_init(scaled);
    mpz_init(rem);
    mpz_init(tmp);
    mpz_ui_pow_ui(pow10, 10, digits > 0 ? (unsigned long)digits : 0);
    bl_q_round_pow(scaled, q, pow10, mode, rem, tmp);
    mpz_swap(out, scaled);
    mpz_clear(tmp);
    mpz_clear(rem);
    mpz_clear(scaled);
    mpz_clear(pow10);
}

/* "[-]digits/digits" with a non-zero denominator into @out; 0 or -1. */
static int parse_ratio(mpq_t out, const char *s, const char *slash)
{
    const char *num = *s == '-' ? s + 1 : s;
    size_t num_len = count_digits(num);

    if (num_len == 0 || num + num_len != slash)
        return -1;
    if (count_digits(slash + 1) == 0 || slash[1 + count_digits(slash + 1)] != '\0')
        return -1;
    if (mpq_set_str(out, s, 10) != 0 || mpz_sgn(mpq_denref(out)) == 0)
        return -1;
    mpq_canonicalize(out);
    return 0;
}

/* A decimal of any length (bounded by the caller) into @out; 0 or -1. */
static int parse_long_decimal(mpq_t out, const char *s)
{
    dec_parts p;
    char *digits;

    if (split_decimal(s, &p) != 0)
        return -1;
    digits = malloc(p.int_len + p.frac_len + 1);
    if (digits == NULL)
        return -2;
    memcpy(digits, p.int_digits, p.int_len);
    memcpy(digits + p.int_len, p.frac_digits, p.frac_len);
    digits[p.int_len + p.frac_len] = '\0';
    if (mpz_set_str(mpq_numref(out), digits, 10) != 0) {
        free(digits);
        return -1;
    }
    free(digits);
    if (p.negative)
        mpz_neg(mpq_numref(out), mpq_numref(out));
    mpz_ui_pow_ui(mpq_denref(out), 10, p.frac_len);
    mpq_canonicalize(out);
    return 0;
}

billing_status billing_decimal_parse(mpq_t out, const char *text, char *errbuf, size_t errsize)
{
    const char *slash;
    int rc;

    if (text == NULL || out == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "decimal text is NULL");
    if (strnlen(text, BILLING_DECIMAL_TEXT_MAX + 1) > BILLING_DECIMAL_TEXT_MAX)
        return bl_seterr(errbuf, errsize, BILLING_ERR_TOO_LARGE,
                         "decimal '%.32s...' is longer than %d bytes", text,
                         BILLING_DECIMAL_TEXT_MAX);
    slash = strchr(text, '/');
    rc = slash != NULL ? parse_ratio(out, text, slash) : parse_long_decimal(out, text);
    if (rc == -2)
        return bl_seterr(errbuf, errsize, BILLING_ERR_NOMEM, "out of memory");
    if (rc != 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                         "'%.64s' is not an exact decimal or p/q", text);
    return BILLING_OK;
}

billing_status billing_decimal_round(mpz_t out, const mpq_t q, int digits, billing_rounding mode)
{
    if (digits < 0 || digits > 9)
        return BILLING_ERR_RANGE;
    if ((int)mode < BILLING_ROUND_HALF_UP || (int)mode > BILLING_ROUND_CEILING)
        return BILLING_ERR_INVALID;
    bl_q_round_minor(out, q, digits, mode);
    return BILLING_OK;
}

char *bl_minor_to_string(const mpz_t minor, int digits)
{
    return scaled_to_string(minor, digits > 0 ? (size_t)digits : 0);
}

void bl_minor_to_q(mpq_t out, const mpz_t minor, int digits)
{
    mpz_set(mpq_numref(out), minor);
    mpz_ui_pow_ui(mpq_denref(out), 10, digits > 0 ? (unsigned long)digits : 0);
    mpq_canonicalize(out);
}

/* ------------------------------------------------------------------ */
/* Quantities                                                          */
/* ------------------------------------------------------------------ */

/*
 * digits_value - the value of @n decimal digits, or -1 once it exceeds
 * @limit. Checking after every digit keeps the accumulator below
 * 10 * limit + 9, far inside 128 bits for the limits used here.
 */
static int digits_value(const char *s, size_t n, bl_i128 limit, bl_i128 *out)
{
    bl_i128 v = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        v = v * 10 + (s[i] - '0');
        if (v > limit)
            return -1;
    }
    *out = v;
    return 0;
}

/* The value of the digits at @s into *@v, and their count, stopping after 10. */
static int short_digits(const char *s, uint64_t *v)
{
    int n = 0;

    *v = 0;
    while (n <= 9 && s[n] >= '0' && s[n] <= '9') {
        *v = *v * 10 + (uint64_t)(s[n] - '0');
        n++;
    }
    return n;
}

/*
 * qty_parse_short - the short form nearly every event carries, "+"
 * optional, 1 to 9 integer digits, optionally '.' and 1 to 9 fraction
 * digits, computed in 64 bits: its value is below 10^18 nano-units, far
 * inside every limit, so it needs none of the general checks. Returns 0,
 * or -1 for anything else (left to bl_qty_parse_general, which decides).
 */
static int qty_parse_short(bl_i128 *out, const char *s)
{
    static const uint64_t scale[BL_QTY_SCALE_DIGITS + 1] = {
        1000000000, 100000000, 10000000, 1000000, 100000, 10000, 1000, 100, 10, 1};
    uint64_t whole;
    uint64_t frac = 0;
    int n;
    int f = 0;

    if (*s == '+')
        s++;
    n = short_digits(s, &whole);
    if (n == 0 || n > 9)
        return -1;
    s += n;
    if (*s == '.') {
        f = short_digits(s + 1, &frac);
        if (f == 0 || f > 9)
            return -1;
        s += 1 + f;
    }
    if (*s != '\0')
        return -1;
    /* f tenths, hundredths...: scaled up to nano-units. */
    *out = (bl_i128)(whole * (uint64_t)BL_QTY_SCALE + frac * scale[f]);
    return 0;
}

int bl_qty_parse(bl_i128 *out, const char *s)
{
    if (s != NULL && qty_parse_short(out, s) == 0)
        return 0;
    return bl_qty_parse_general(out, s);
}

int bl_qty_parse_general(bl_i128 *out, const char *s)
{
    dec_parts p;
    bl_i128 whole;
    bl_i128 frac;
    bl_i128 total;
    size_t i;

    if (s == NULL)
        return -1;
    if (too_long(s))
        return -2;
    if (split_decimal(s, &p) != 0)
        return -1;
    if (p.negative)
        return -3;
    if (p.frac_len > BL_QTY_SCALE_DIGITS)
        return -2;
    if (digits_value(p.int_digits, p.int_len, QTY_MAX_UNITS, &whole) != 0)
        return -2;
    if (digits_value(p.frac_digits, p.frac_len, BL_QTY_SCALE - 1, &frac) != 0)
        return -2;
    /* "0.5" is 5 tenths: scale the fraction up to nano-units. */
    for (i = p.frac_len; i < BL_QTY_SCALE_DIGITS; i++)
        frac *= 10;
    total = whole * BL_QTY_SCALE + frac;
    if (total > QTY_MAX_NANO)
        return -2;
    *out = total;
    return 0;
}

void bl_mpz_set_i128(mpz_t out, bl_i128 v)
{
    bl_u128 mag;
    uint64_t words[2];

    /* Negate in unsigned arithmetic: -v overflows for the minimum value. */
    mag = (bl_u128)v;
    if (v < 0)
        mag = 0 - mag;
#if ULONG_MAX >= UINT64_MAX
    /* Most values (a rounded amount, a usual aggregate) fit a word: no import. */
    if ((mag >> 64) == 0) {
        mpz_set_ui(out, (unsigned long)mag);
        if (v < 0)
            mpz_neg(out, out);
        return;
    }
#endif
    words[0] = (uint64_t)mag;
    words[1] = (uint64_t)(mag >> 64);
    mpz_import(out, 2, -1, sizeof words[0], 0, 0, words);
    if (v < 0)
        mpz_neg(out, out);
}

/*
 * reversed_digits - the digits of @u, least significant first, padded
 * with zeros to at least BL_QTY_SCALE_DIGITS + 1 so that there is always a
 * whole-unit digit. Returns the count (at most 39 + 1).
 */
static int reversed_digits(bl_u128 u, char *rev)
{
    int n = 0;

    do {
        rev[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u != 0 || n <= BL_QTY_SCALE_DIGITS);
    return n;
}

int bl_qty_to_string(bl_i128 v, char *buf, size_t size)
{
    char rev[48];
    char text[48];
    bl_u128 mag;
    int n;
    int skip;
    int len;
    int i;

    mag = (bl_u128)v;
    if (v < 0)
        mag = 0 - mag;
    n = reversed_digits(mag, rev);
    /* Trailing zeros of the fraction are not printed, nor a lone point. */
    skip = 0;
    while (skip < BL_QTY_SCALE_DIGITS && rev[skip] == '0')
        skip++;
    len = 0;
    if (v < 0)
        text[len++] = '-';
    for (i = n - 1; i >= BL_QTY_SCALE_DIGITS; i--)
        text[len++] = rev[i];
    if (skip < BL_QTY_SCALE_DIGITS)
        text[len++] = '.';
    for (i = BL_QTY_SCALE_DIGITS - 1; i >= skip; i--)
        text[len++] = rev[i];
    text[len] = '\0';
    if (buf == NULL || size <= (size_t)len)
        return -1;
    memcpy(buf, text, (size_t)len + 1);
    return len;
}
