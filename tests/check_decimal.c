/*
 * check_decimal.c - decimal text, exact rounding, quantities, currencies
 * and rounding-mode names (libbilling/decimal.c, libbilling/currency.c).
 *
 * Table-driven cases pin down the documented behaviour row by row; the
 * property tests then check the rounding and printing invariants on a few
 * thousand pseudo-random values from a fixed seed, so failures replay.
 */
#include "config.h"

#include <check.h>
#include <gmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "decimal.h"
#include "internal.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define N_MODES 6

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* A value written as GMP "p/q" or "p", canonicalised. */
static void q_set(mpq_t q, const char *text)
{
    ck_assert_int_eq(mpq_set_str(q, text, 10), 0);
    mpq_canonicalize(q);
}

/* A rational from decimal text ("-0.125") or GMP fraction text ("1/3"). */
static void q_from(mpq_t q, const char *text)
{
    if (strchr(text, '/') != NULL)
        q_set(q, text);
    else
        ck_assert_msg(bl_q_parse(q, text, 1, -1) == 0, "cannot parse %s", text);
}

/* A signed 128-bit integer from decimal text, independent of the library. */
static bl_i128 i128_from(const char *text)
{
    unsigned __int128 mag = 0;
    int negative = text[0] == '-';
    const char *p = negative ? text + 1 : text;

    for (; *p != '\0'; p++)
        mag = mag * 10 + (unsigned)(*p - '0');
    if (negative)
        mag = 0 - mag;
    return (bl_i128)mag;
}

/* Assert that @v equals the decimal integer @expected. */
static void assert_i128_eq(bl_i128 v, const char *expected)
{
    mpz_t got;
    mpz_t want;

    mpz_init(got);
    mpz_init_set_str(want, expected, 10);
    bl_mpz_set_i128(got, v);
    ck_assert_msg(mpz_cmp(got, want) == 0, "expected %s", expected);
    mpz_clear(want);
    mpz_clear(got);
}

/* ------------------------------------------------------------------ */
/* bl_q_parse                                                          */
/* ------------------------------------------------------------------ */

/* Sixty zeros, for texts at the BL_DECIMAL_MAX boundary. */
#define Z60 "000000000000000000000000000000000000000000000000000000000000"

static const struct parse_ok {
    const char *text;
    int allow_negative;
    int max_frac;
    const char *value; /* GMP "p/q" */
} parse_ok[] = {
    {"0", 0, -1, "0"},
    {"12", 0, -1, "12"},
    {"-0.5", 1, -1, "-1/2"},
    {"+3.25", 0, -1, "13/4"},
    {"0.000", 0, -1, "0"},
    {"-0", 1, -1, "0"},
    {"007.50", 0, -1, "15/2"},
    {"-12.5", 1, -1, "-25/2"},
    {"0.0001", 0, -1, "1/10000"},
    {"1234567890123456789012345678901234567890", 0, -1, "1234567890123456789012345678901234567890"},
    {"1234567890123456789.012345678901234567890", 0, -1,
     "1234567890123456789012345678901234567890/1000000000000000000000"},
    /* Leading zeros are not significant: 64 characters, one digit. */
    {"0.0" Z60 "1", 0, -1, "1/100" Z60},
    {"1.25", 0, 2, "5/4"},
    {"5", 0, 0, "5"},
    {"0.06", 0, 2, "3/50"},
};

START_TEST(test_parse_accepts)
{
    const struct parse_ok *c = &parse_ok[_i];
    mpq_t got;
    mpq_t want;

    mpq_init(got);
    mpq_init(want);
    q_set(want, c->value);
    ck_assert_msg(bl_q_parse(got, c->text, c->allow_negative, c->max_frac) == 0, "rejected %s",
                  c->text);
    ck_assert_msg(mpq_equal(got, want), "%s parsed to the wrong value", c->text);
    mpq_clear(want);
    mpq_clear(got);
}
END_TEST

static const struct parse_bad {
    const char *text;
    int allow_negative;
    int max_frac;
} parse_bad[] = {
    {"", 1, -1},
    {"1.", 1, -1},
    {".5", 1, -1},
    {"-.5", 1, -1},
    {".", 1, -1},
    {"1e3", 1, -1},
    {"1E3", 1, -1},
    {" 1", 1, -1},
    {"1 ", 1, -1},
    {"1\n", 1, -1},
    {"--1", 1, -1},
    {"+-1", 1, -1},
    {"-+1", 1, -1},
    {"++1", 1, -1},
    {"-", 1, -1},
    {"+", 1, -1},
    {"0x10", 1, -1},
    {"1.2.3", 1, -1},
    {"1,5", 1, -1},
    {"abc", 1, -1},
    {"inf", 1, -1},
    {"NaN", 1, -1},
    {"1/3", 1, -1},
    {"-1", 0, -1},
    {"-0", 0, -1},
    {"-0.0", 0, -1},
    /* 41 significant digits, with and without a point. */
    {"12345678901234567890123456789012345678901", 1, -1},
    {"1234567890123456789012345678901234567890.1", 1, -1},
    {"0.12345678901234567890123456789012345678901", 1, -1},
    /* 65 characters, even though only one digit is significant. */
    {"0.00" Z60 "1", 1, -1},
    {"1.250", 1, 2},
    {"5.0", 1, 0},
    {"0.001", 1, 2},
};

START_TEST(test_parse_rejects)
{
    const struct parse_bad *c = &parse_bad[_i];
    mpq_t got;

    mpq_init(got);
    ck_assert_msg(bl_q_parse(got, c->text, c->allow_negative, c->max_frac) == -1, "accepted \"%s\"",
                  c->text);
    mpq_clear(got);
}
END_TEST

START_TEST(test_parse_bounds)
{
    mpq_t got;

    mpq_init(got);
    ck_assert_int_eq(strlen("0.0" Z60 "1"), BL_DECIMAL_MAX);
    ck_assert_int_eq(strlen("0.00" Z60 "1"), BL_DECIMAL_MAX + 1);
    ck_assert_int_eq(strlen("000" Z60 "1"), BL_DECIMAL_MAX);
    ck_assert_int_eq(bl_q_parse(got, NULL, 1, -1), -1);
    mpq_clear(got);
}
END_TEST

/* ------------------------------------------------------------------ */
/* bl_q_to_string                                                      */
/* ------------------------------------------------------------------ */

static const struct to_string_case {
    const char *value; /* GMP "p/q" */
    const char *text;
} to_string_cases[] = {
    {"1/3", "1/3"},
    {"1/8", "0.125"},
    {"-5/2", "-2.5"},
    {"100", "100"},
    {"0", "0"},
    {"0/7", "0"},
    {"-1/3", "-1/3"},
    {"3/6", "0.5"},
    {"1/10", "0.1"},
    {"-1/10000", "-0.0001"},
    {"1/1024", "0.0009765625"},
    {"7/12", "7/12"},
    {"-14/6", "-7/3"},
    {"-10", "-10"},
    {"1000000000000000000000000000000", "1000000000000000000000000000000"},
    {"123456789012345678901234567890/100", "1234567890123456789012345678.9"},
    {"-1/100" Z60, "-0.0" Z60 "1"},
};

START_TEST(test_to_string)
{
    const struct to_string_case *c = &to_string_cases[_i];
    mpq_t q;
    char *text;

    mpq_init(q);
    q_set(q, c->value);
    text = bl_q_to_string(q);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, c->text);
    free(text);
    mpq_clear(q);
}
END_TEST

/* ------------------------------------------------------------------ */
/* bl_q_round_minor                                                    */
/* ------------------------------------------------------------------ */

/* Expected minor units in enum order: half-up, half-even, down, up, floor, ceiling. */
static const struct round_case {
    const char *value;
    int digits;
    const char *minor[N_MODES];
} round_cases[] = {
    /* digits 2: ties, both signs */
    {"0.125", 2, {"13", "12", "12", "13", "12", "13"}},
    {"-0.125", 2, {"-13", "-12", "-12", "-13", "-13", "-12"}},
    {"0.135", 2, {"14", "14", "13", "14", "13", "14"}},
    {"-0.135", 2, {"-14", "-14", "-13", "-14", "-14", "-13"}},
    {"0.005", 2, {"1", "0", "0", "1", "0", "1"}},
    {"-0.005", 2, {"-1", "0", "0", "-1", "-1", "0"}},
    {"12.345", 2, {"1235", "1234", "1234", "1235", "1234", "1235"}},
    /* digits 2: non-ties */
    {"0.121", 2, {"12", "12", "12", "13", "12", "13"}},
    {"-0.121", 2, {"-12", "-12", "-12", "-13", "-13", "-12"}},
    {"0.129", 2, {"13", "13", "12", "13", "12", "13"}},
    {"-0.129", 2, {"-13", "-13", "-12", "-13", "-13", "-12"}},
    {"0.1250000001", 2, {"13", "13", "12", "13", "12", "13"}},
    {"-0.1249999999", 2, {"-12", "-12", "-12", "-13", "-13", "-12"}},
    {"1/3", 2, {"33", "33", "33", "34", "33", "34"}},
    {"-2/3", 2, {"-67", "-67", "-66", "-67", "-67", "-66"}},
    /* digits 2: exact values are never moved */
    {"0.12", 2, {"12", "12", "12", "12", "12", "12"}},
    {"-0.12", 2, {"-12", "-12", "-12", "-12", "-12", "-12"}},
    {"0", 2, {"0", "0", "0", "0", "0", "0"}},
    {"-7", 2, {"-700", "-700", "-700", "-700", "-700", "-700"}},
    /* digits 0 (JPY) */
    {"2.5", 0, {"3", "2", "2", "3", "2", "3"}},
    {"-2.5", 0, {"-3", "-2", "-2", "-3", "-3", "-2"}},
    {"3.5", 0, {"4", "4", "3", "4", "3", "4"}},
    {"-3.5", 0, {"-4", "-4", "-3", "-4", "-4", "-3"}},
    {"0.5", 0, {"1", "0", "0", "1", "0", "1"}},
    {"-0.5", 0, {"-1", "0", "0", "-1", "-1", "0"}},
    {"1/3", 0, {"0", "0", "0", "1", "0", "1"}},
    {"-1/3", 0, {"0", "0", "0", "-1", "-1", "0"}},
    {"2/3", 0, {"1", "1", "0", "1", "0", "1"}},
    {"-2/3", 0, {"-1", "-1", "0", "-1", "-1", "0"}},
    {"7", 0, {"7", "7", "7", "7", "7", "7"}},
    {"1000000000000000000000000000000.5",
     0,
     {"1000000000000000000000000000001", "1000000000000000000000000000000",
      "1000000000000000000000000000000", "1000000000000000000000000000001",
      "1000000000000000000000000000000", "1000000000000000000000000000001"}},
    /* digits 3 (KWD) */
    {"1.2345", 3, {"1235", "1234", "1234", "1235", "1234", "1235"}},
    {"-1.2345", 3, {"-1235", "-1234", "-1234", "-1235", "-1235", "-1234"}},
    {"1.2355", 3, {"1236", "1236", "1235", "1236", "1235", "1236"}},
    {"0.0005", 3, {"1", "0", "0", "1", "0", "1"}},
    {"-0.0005", 3, {"-1", "0", "0", "-1", "-1", "0"}},
    {"1.2341", 3, {"1234", "1234", "1234", "1235", "1234", "1235"}},
    {"-1.2349", 3, {"-1235", "-1235", "-1234", "-1235", "-1235", "-1234"}},
    {"2/3", 3, {"667", "667", "666", "667", "666", "667"}},
    {"-2/3", 3, {"-667", "-667", "-666", "-667", "-667", "-666"}},
    {"0.125", 3, {"125", "125", "125", "125", "125", "125"}},
    /* digits 9 */
    {"1/3", 9, {"333333333", "333333333", "333333333", "333333334", "333333333", "333333334"}},
};

START_TEST(test_round_minor)
{
    const struct round_case *c = &round_cases[_i];
    mpq_t q;
    mpz_t got;
    mpz_t want;
    int mode;

    mpq_init(q);
    mpz_init(got);
    mpz_init(want);
    q_from(q, c->value);
    for (mode = 0; mode < N_MODES; mode++) {
        bl_q_round_minor(got, q, c->digits, (billing_rounding)mode);
        ck_assert_int_eq(mpz_set_str(want, c->minor[mode], 10), 0);
        ck_assert_msg(mpz_cmp(got, want) == 0, "%s at %d digits, %s: expected %s", c->value,
                      c->digits, billing_rounding_name((billing_rounding)mode), c->minor[mode]);
        /* The public rounder (monthend/exact.c's replacement) gives the same. */
        ck_assert_int_eq(billing_decimal_round(got, q, c->digits, (billing_rounding)mode),
                         BILLING_OK);
        ck_assert_int_eq(mpz_cmp(got, want), 0);
    }
    mpz_clear(want);
    mpz_clear(got);
    mpq_clear(q);
}
END_TEST

/* The output may share storage with the input's numerator. */
START_TEST(test_round_minor_aliased)
{
    mpq_t q;

    mpq_init(q);
    q_set(q, "-1/8");
    bl_q_round_minor(mpq_numref(q), q, 2, BILLING_ROUND_HALF_UP);
    ck_assert_int_eq(mpz_cmp_si(mpq_numref(q), -13), 0);
    mpq_clear(q);
}
END_TEST

/* ------------------------------------------------------------------ */
/* billing_decimal_parse, billing_decimal_round (public)               */
/* ------------------------------------------------------------------ */

/* Every form the close and billingd read (the store's numeric text, libbilling's p/q). */
START_TEST(test_public_parse)
{
    static const char *const ok[][2] = {{"12.5", "25/2"},
                                        {"-3", "-3"},
                                        {"+3.25", "13/4"},
                                        {"7/3", "7/3"},
                                        {"-14/6", "-7/3"},
                                        {"0.000", "0"},
                                        {"1234567890123456789012345678901234567890123456789.5",
                                         "2469135780246913578024691357802469135780246913579/2"}};
    static const char *const bad[] = {"",   ".5",   "1.",   "1e3",   " 1",  "1 ",  "7/0", "7/",
                                      "/3", "7/-3", "+7/3", "1.5/2", "abc", "--1", "0x10"};
    char err[256];
    char *text;
    mpq_t q;
    size_t i;

    mpq_init(q);
    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ck_assert_int_eq(billing_decimal_parse(q, ok[i][0], err, sizeof(err)), BILLING_OK);
        text = mpq_get_str(NULL, 10, q);
        ck_assert_str_eq(text, ok[i][1]);
        free(text);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(billing_decimal_parse(q, bad[i], err, sizeof(err)) == BILLING_ERR_PARSE,
                      "'%s' accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "not an exact decimal"));
    }
    ck_assert_int_eq(billing_decimal_parse(q, NULL, err, sizeof(err)), BILLING_ERR_INVALID);
    text = malloc(BILLING_DECIMAL_TEXT_MAX + 2);
    ck_assert_ptr_nonnull(text);
    memset(text, '9', BILLING_DECIMAL_TEXT_MAX);
    text[BILLING_DECIMAL_TEXT_MAX] = '\0';
    ck_assert_int_eq(billing_decimal_parse(q, text, err, sizeof(err)), BILLING_OK);
    text[BILLING_DECIMAL_TEXT_MAX] = '9';
    text[BILLING_DECIMAL_TEXT_MAX + 1] = '\0';
    ck_assert_int_eq(billing_decimal_parse(q, text, err, sizeof(err)), BILLING_ERR_TOO_LARGE);
    free(text);
    mpq_clear(q);
}
END_TEST

/* The public rounder refuses digits out of 0..9 and unknown modes, leaving @out. */
START_TEST(test_public_round_refusals)
{
    mpq_t q;
    mpz_t got;

    mpq_init(q);
    mpz_init_set_ui(got, 42);
    mpq_set_ui(q, 1, 8);
    ck_assert_int_eq(billing_decimal_round(got, q, 10, BILLING_ROUND_DOWN), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_decimal_round(got, q, -1, BILLING_ROUND_DOWN), BILLING_ERR_RANGE);
    ck_assert_int_eq(billing_decimal_round(got, q, 2, (billing_rounding)N_MODES),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(mpz_cmp_ui(got, 42), 0);
    mpz_clear(got);
    mpq_clear(q);
}
END_TEST

/* ------------------------------------------------------------------ */
/* bl_minor_to_string, bl_minor_to_q                                   */
/* ------------------------------------------------------------------ */

static const struct minor_case {
    const char *minor;
    int digits;
    const char *text;
    const char *value; /* GMP "p/q" */
} minor_cases[] = {
    {"1235", 2, "12.35", "247/20"},
    {"-5", 2, "-0.05", "-1/20"},
    {"0", 2, "0.00", "0"},
    {"7", 2, "0.07", "7/100"},
    {"100", 2, "1.00", "1"},
    {"1200", 0, "1200", "1200"},
    {"-1200", 0, "-1200", "-1200"},
    {"0", 0, "0", "0"},
    {"1", 3, "0.001", "1/1000"},
    {"-1234", 3, "-1.234", "-617/500"},
    {"1000", 3, "1.000", "1"},
    {"-999", 3, "-0.999", "-999/1000"},
    {"5", 4, "0.0005", "1/2000"},
    {"123456789012345678901234567890", 2, "1234567890123456789012345678.90",
     "12345678901234567890123456789/10"},
};

START_TEST(test_minor_to_string)
{
    const struct minor_case *c = &minor_cases[_i];
    mpz_t minor;
    mpq_t got;
    mpq_t want;
    char *text;

    mpz_init_set_str(minor, c->minor, 10);
    mpq_init(got);
    mpq_init(want);
    text = bl_minor_to_string(minor, c->digits);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, c->text);
    bl_minor_to_q(got, minor, c->digits);
    q_set(want, c->value);
    ck_assert_msg(mpq_equal(got, want), "%s at %d digits", c->minor, c->digits);
    free(text);
    mpq_clear(want);
    mpq_clear(got);
    mpz_clear(minor);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Quantities                                                          */
/* ------------------------------------------------------------------ */

static const struct qty_case {
    const char *text;
    int rc;
    const char *nano; /* when rc == 0 */
} qty_cases[] = {
    {"0", 0, "0"},
    {"0.0", 0, "0"},
    {"1", 0, "1000000000"},
    {"+2", 0, "2000000000"},
    {"0.000000001", 0, "1"},
    {"1.5", 0, "1500000000"},
    {"0.123456789", 0, "123456789"},
    {"00000000000000000000001.5", 0, "1500000000"},
    {"1000000000000000000", 0, "1000000000000000000000000000"},
    {"1000000000000000000.000000000", 0, "1000000000000000000000000000"},
    {"999999999999999999.999999999", 0, "999999999999999999999999999"},
    {"000" Z60 "1", 0, "1000000000"},
    /* too large, too precise, too long */
    {"1000000000000000000.000000001", -2, NULL},
    {"1000000000000000001", -2, NULL},
    {"99999999999999999999999999999999999999999", -2, NULL},
    {"0.0000000001", -2, NULL},
    {"1.0000000000", -2, NULL},
    {"0000" Z60 "1", -2, NULL},
    /* negative */
    {"-1", -3, NULL},
    {"-0", -3, NULL},
    {"-1.5", -3, NULL},
    {"-0.0000000001", -3, NULL},
    /* malformed */
    {"", -1, NULL},
    {"-", -1, NULL},
    {"+", -1, NULL},
    {"1.", -1, NULL},
    {".5", -1, NULL},
    {"1e3", -1, NULL},
    {" 1", -1, NULL},
    {"1 ", -1, NULL},
    {"--1", -1, NULL},
    {"+-1", -1, NULL},
    {"-abc", -1, NULL},
    {"0x1", -1, NULL},
};

START_TEST(test_qty_parse)
{
    const struct qty_case *c = &qty_cases[_i];
    bl_i128 got = -42;

    ck_assert_msg(bl_qty_parse(&got, c->text) == c->rc, "\"%s\": expected %d", c->text, c->rc);
    if (c->rc == 0)
        assert_i128_eq(got, c->nano);
    else
        ck_assert_msg(got == -42, "\"%s\": output written on failure", c->text);
}
END_TEST

/* Both parsers on @text: same status, same value, nothing written on failure. */
static void assert_qty_parsers_agree(const char *text)
{
    bl_i128 fast = -42;
    bl_i128 general = -42;
    int rc_fast = bl_qty_parse(&fast, text);
    int rc_general = bl_qty_parse_general(&general, text);

    ck_assert_msg(rc_fast == rc_general, "\"%s\": fast path %d, general parser %d", text, rc_fast,
                  rc_general);
    ck_assert_msg(fast == general, "\"%s\": fast path and general parser differ", text);
}

/*
 * bl_qty_parse's fast path (at most 9 integer and 9 fraction digits)
 * against the general parser: around its length limits, with signs and
 * stray characters, and every string of up to 6 characters over a small
 * alphabet.
 */
START_TEST(test_qty_parse_fast_path)
{
    static const char *const edges[] = {
        "0",
        "+0",
        "-0",
        "9",
        "999999999",
        "+999999999",
        "1000000000",
        "9999999999",
        "0000000000",
        "000000000",
        "999999999.999999999",
        "999999999.9999999999",
        "9999999999.999999999",
        "0.000000001",
        "0.0000000001",
        "1.000000000",
        "1.0000000000",
        "123456789.123456789",
        "+123456789.123456789",
        "-123456789.123456789",
        "1.",
        ".1",
        "+.1",
        "1..1",
        "1.1.1",
        "1.1x",
        "1x",
        "x1",
        "",
        "+",
        "-",
        "+-1",
        "++1",
        "1 ",
        " 1",
        "1e3",
        "000000001.000000001",
        "999999999.",
        "999999999.x",
        "00000000000000000001",
    };
    static const char alphabet[] = "09.+-x";
    char text[8];
    size_t i;
    unsigned long n;
    unsigned long k;
    int len;

    for (i = 0; i < N_ELEMS(edges); i++)
        assert_qty_parsers_agree(edges[i]);
    for (len = 1; len <= 6; len++) {
        unsigned long total = 1;

        for (k = 0; k < (unsigned long)len; k++)
            total *= sizeof(alphabet) - 1;
        for (n = 0; n < total; n++) {
            unsigned long v = n;

            for (k = 0; k < (unsigned long)len; k++) {
                text[k] = alphabet[v % (sizeof(alphabet) - 1)];
                v /= sizeof(alphabet) - 1;
            }
            text[len] = '\0';
            assert_qty_parsers_agree(text);
        }
    }
}
END_TEST

/* Every length of integer and fraction digits around the fast path's limits. */
START_TEST(test_qty_parse_fast_path_lengths)
{
    char text[40];
    int ilen;
    int flen;
    int d;

    for (d = 0; d < 3; d++) {
        char digit = "091"[d];

        for (ilen = 0; ilen <= 12; ilen++) {
            for (flen = -1; flen <= 12; flen++) {
                memset(text, digit, (size_t)ilen);
                text[ilen] = '\0';
                if (flen >= 0) {
                    text[ilen] = '.';
                    memset(text + ilen + 1, '7', (size_t)flen);
                    text[ilen + 1 + flen] = '\0';
                }
                assert_qty_parsers_agree(text);
            }
        }
    }
}
END_TEST

START_TEST(test_qty_parse_null)
{
    bl_i128 got;

    ck_assert_int_eq(bl_qty_parse(&got, NULL), -1);
}
END_TEST

static const struct qty_text_case {
    const char *nano;
    const char *text;
} qty_text_cases[] = {
    {"0", "0"},
    {"1", "0.000000001"},
    {"100", "0.0000001"},
    {"123456789", "0.123456789"},
    {"1000000000", "1"},
    {"1500000000", "1.5"},
    {"-1500000000", "-1.5"},
    {"-1", "-0.000000001"},
    {"1000000000000000000000000000", "1000000000000000000"},
    {"170141183460469231731687303715884105727", "170141183460469231731687303715.884105727"},
    {"-170141183460469231731687303715884105728", "-170141183460469231731687303715.884105728"},
};

START_TEST(test_qty_to_string)
{
    const struct qty_text_case *c = &qty_text_cases[_i];
    char buf[48];
    int len;

    len = bl_qty_to_string(i128_from(c->nano), buf, sizeof buf);
    ck_assert_int_eq(len, (int)strlen(c->text));
    ck_assert_str_eq(buf, c->text);
    /* Exactly long enough, then one byte short. */
    ck_assert_int_eq(bl_qty_to_string(i128_from(c->nano), buf, (size_t)len + 1), len);
    ck_assert_int_eq(bl_qty_to_string(i128_from(c->nano), buf, (size_t)len), -1);
}
END_TEST

static const char *const i128_cases[] = {
    "0",
    "1",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "-18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "170141183460469231731687303715884105727",
    "-170141183460469231731687303715884105728",
};

START_TEST(test_mpz_set_i128)
{
    assert_i128_eq(i128_from(i128_cases[_i]), i128_cases[_i]);
}
END_TEST

START_TEST(test_i128_extremes)
{
    bl_i128 max = (bl_i128)(~(unsigned __int128)0 >> 1);
    bl_i128 min = -max - 1;

    assert_i128_eq(max, "170141183460469231731687303715884105727");
    assert_i128_eq(min, "-170141183460469231731687303715884105728");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Currencies and rounding names                                       */
/* ------------------------------------------------------------------ */

static const struct currency_case {
    const char *code;
    int digits;
} currency_cases[] = {
    {"CNY", 2},   {"USD", 2},  {"EUR", 2},  {"JPY", 0},  {"KRW", 0},  {"VND", 0},  {"ISK", 0},
    {"CLP", 0},   {"XOF", 0},  {"KWD", 3},  {"BHD", 3},  {"JOD", 3},  {"OMR", 3},  {"TND", 3},
    {"LYD", 3},   {"IQD", 3},  {"CLF", 4},  {"UYW", 4},  {"AED", 2},  {"ZWG", 2},  {"XCG", 2},
    {"SLE", 2},   {"XAD", 2},  {"XYZ", -1}, {"cny", -1}, {"Cny", -1}, {"", -1},    {"CN", -1},
    {"CNYY", -1}, {"CN1", -1}, {"C Y", -1}, {"XAU", -1}, {"XXX", -1}, {"XDR", -1}, {"HRK", -1},
    {"AAA", -1},  {"ZZZ", -1},
};

START_TEST(test_currency_digits)
{
    const struct currency_case *c = &currency_cases[_i];

    ck_assert_msg(billing_currency_digits(c->code) == c->digits, "%s: expected %d", c->code,
                  c->digits);
}
END_TEST

/*
 * Every three-letter code: a table out of order would hide some entries
 * from bsearch and lower the count; digits are always an ISO value.
 */
START_TEST(test_currency_every_code)
{
    char code[4];
    int known = 0;
    int a;
    int b;
    int c;
    int digits;

    code[3] = '\0';
    for (a = 'A'; a <= 'Z'; a++) {
        for (b = 'A'; b <= 'Z'; b++) {
            for (c = 'A'; c <= 'Z'; c++) {
                code[0] = (char)a;
                code[1] = (char)b;
                code[2] = (char)c;
                digits = billing_currency_digits(code);
                ck_assert(digits == -1 || digits == 0 || digits == 2 || digits == 3 || digits == 4);
                known += digits >= 0;
            }
        }
    }
    ck_assert_int_eq(known, 169);
    ck_assert_int_eq(billing_currency_digits(NULL), -1);
}
END_TEST

static const char *const rounding_names[N_MODES] = {"half-up", "half-even", "down",
                                                    "up",      "floor",     "ceiling"};

START_TEST(test_rounding_names)
{
    int mode;
    billing_rounding parsed;

    for (mode = 0; mode < N_MODES; mode++) {
        ck_assert_str_eq(billing_rounding_name((billing_rounding)mode), rounding_names[mode]);
        ck_assert_int_eq(billing_rounding_parse(rounding_names[mode], &parsed), BILLING_OK);
        ck_assert_int_eq(parsed, mode);
    }
    ck_assert_int_eq(BILLING_ROUND_HALF_UP, 0);
    ck_assert_int_eq(BILLING_ROUND_CEILING, N_MODES - 1);
    ck_assert_ptr_null(billing_rounding_name((billing_rounding)N_MODES));
    ck_assert_ptr_null(billing_rounding_name((billing_rounding)-1));
    ck_assert_int_eq(billing_rounding_parse("HALF-UP", &parsed), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rounding_parse("half_up", &parsed), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rounding_parse("", &parsed), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rounding_parse(NULL, &parsed), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rounding_parse("up", NULL), BILLING_ERR_INVALID);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Properties                                                          */
/* ------------------------------------------------------------------ */

#define PROPERTY_ROUNDS 3000

/* xorshift64: deterministic and identical on every platform, unlike rand(). */
static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

/* A signed integer of up to 128 random bits, small ones being common. */
static void random_mpz(mpz_t out, uint64_t *state)
{
    uint64_t words[2];
    uint64_t shape = next_random(state);

    words[0] = next_random(state) >> (shape % 64);
    words[1] = (shape & 0x300) == 0 ? next_random(state) : 0;
    mpz_import(out, 2, -1, sizeof words[0], 0, 0, words);
    if (shape & 0x400)
        mpz_neg(out, out);
}

/*
 * random_rational - one of: a general p/q; an exact tie at one of the
 * digit counts under test, (2j + 1) / (2 * 10^d); a terminating decimal.
 */
static void random_rational(mpq_t q, uint64_t *state)
{
    static const int tie_digits[] = {0, 2, 3};
    uint64_t kind = next_random(state) % 3;

    random_mpz(mpq_numref(q), state);
    if (kind == 0) {
        mpz_set_ui(mpq_denref(q), 1 + next_random(state) % 1000003);
    } else if (kind == 1) {
        mpz_mul_2exp(mpq_numref(q), mpq_numref(q), 1);
        mpz_add_ui(mpq_numref(q), mpq_numref(q), 1);
        mpz_ui_pow_ui(mpq_denref(q), 10, (unsigned long)tie_digits[next_random(state) % 3]);
        mpz_mul_2exp(mpq_denref(q), mpq_denref(q), 1);
    } else {
        mpz_ui_pow_ui(mpq_denref(q), 10, next_random(state) % 13);
    }
    mpq_canonicalize(q);
}

/* Check one rounding of @q against the definition of @mode. */
static void check_rounding(const mpq_t q, int digits, billing_rounding mode)
{
    mpz_t minor;
    mpq_t diff;
    mpq_t unit;
    mpq_t bound;
    int toward;
    int cmp;

    mpz_init(minor);
    mpq_init(diff);
    mpq_init(unit);
    mpq_init(bound);
    bl_q_round_minor(minor, q, digits, mode);
    bl_minor_to_q(diff, minor, digits);
    mpq_sub(diff, q, diff); /* q - r / 10^d */
    mpz_set_ui(mpq_numref(unit), 1);
    mpz_ui_pow_ui(mpq_denref(unit), 10, (unsigned long)digits);
    /* toward > 0: the result moved toward zero; < 0: away from zero. */
    toward = mpq_sgn(diff) * mpq_sgn(q);
    mpq_abs(diff, diff);
    if (mode == BILLING_ROUND_HALF_UP || mode == BILLING_ROUND_HALF_EVEN) {
        mpq_div_2exp(bound, unit, 1);
        cmp = mpq_cmp(diff, bound);
        ck_assert_msg(cmp <= 0, "%s moved by more than half a unit", rounding_names[mode]);
        if (cmp == 0 && mode == BILLING_ROUND_HALF_UP)
            ck_assert_msg(toward < 0, "half-up tie not away from zero");
        if (cmp == 0 && mode == BILLING_ROUND_HALF_EVEN)
            ck_assert_msg(mpz_even_p(minor), "half-even tie not even");
    } else {
        ck_assert_msg(mpq_cmp(diff, unit) < 0, "%s moved by a unit or more", rounding_names[mode]);
    }
    if (mode == BILLING_ROUND_DOWN)
        ck_assert_msg(toward >= 0, "down moved away from zero");
    if (mode == BILLING_ROUND_UP)
        ck_assert_msg(toward <= 0, "up moved toward zero");
    if (mode == BILLING_ROUND_FLOOR || mode == BILLING_ROUND_CEILING) {
        mpq_set_z(bound, minor);
        mpq_mul(bound, bound, unit); /* r / 10^d */
        cmp = mpq_cmp(bound, q);
        ck_assert_msg(mode == BILLING_ROUND_FLOOR ? cmp <= 0 : cmp >= 0, "%s wrong direction",
                      rounding_names[mode]);
    }
    mpq_clear(bound);
    mpq_clear(unit);
    mpq_clear(diff);
    mpz_clear(minor);
}

/* The rounding of @q * @pow10 under @mode by the definition, in GMP alone: the reference. */
static void reference_round(mpz_t out, const mpq_t q, const mpz_t pow10, int mode)
{
    mpz_t a;
    mpz_t rem;
    int sign;
    int up;
    int half;

    mpz_init(a);
    mpz_init(rem);
    mpz_mul(a, pow10, mpq_numref(q));
    sign = mpz_sgn(a);
    mpz_fdiv_qr(out, rem, a, mpq_denref(q));
    if (mpz_sgn(rem) != 0) {
        mpz_mul_2exp(rem, rem, 1);
        half = mpz_cmp(rem, mpq_denref(q));
        if (mode == BILLING_ROUND_FLOOR)
            up = 0;
        else if (mode == BILLING_ROUND_CEILING)
            up = 1;
        else if (mode == BILLING_ROUND_DOWN)
            up = sign < 0;
        else if (mode == BILLING_ROUND_UP)
            up = sign > 0;
        else if (half != 0)
            up = half > 0;
        else if (mode == BILLING_ROUND_HALF_EVEN)
            up = mpz_odd_p(out) != 0;
        else
            up = sign > 0; /* half-up, and an unknown mode */
        if (up)
            mpz_add_ui(out, out, 1);
    }
    mpz_clear(rem);
    mpz_clear(a);
}

/*
 * bl_q_round_pow with numerators and denominators of every size around
 * the 126 bits below which it divides in 128-bit integers (and far above,
 * where GMP divides), both signs, exact ties, every mode and an unknown
 * one: the same as the reference, and @rem and @tmp are only scratch.
 */
START_TEST(test_round_pow_around_128_bits)
{
    static const unsigned long bits[] = {1,   2,   20,  63,  64,  65,  100,
                                         124, 125, 126, 127, 128, 129, 200};
    static const unsigned digits[] = {0, 2, 9};
    gmp_randstate_t rs;
    mpq_t q;
    mpz_t pow10;
    mpz_t got;
    mpz_t want;
    mpz_t rem;
    mpz_t tmp;
    size_t nb;
    size_t db;
    size_t d;
    int round;
    int mode;

    gmp_randinit_default(rs);
    gmp_randseed_ui(rs, 28);
    mpq_init(q);
    mpz_init(pow10);
    mpz_init(got);
    mpz_init(want);
    mpz_init(rem);
    mpz_init(tmp);
    for (round = 0; round < 40; round++) {
        for (nb = 0; nb < N_ELEMS(bits); nb++) {
            for (db = 0; db < N_ELEMS(bits); db++) {
                /* The top bit set: exactly bits[] long; every fourth a tie (den 2k, num odd k). */
                mpz_urandomb(mpq_denref(q), rs, bits[db]);
                mpz_setbit(mpq_denref(q), bits[db] - 1);
                if (round % 4 == 3 && bits[db] > 1) {
                    mpz_clrbit(mpq_denref(q), 0);
                    mpz_tdiv_q_2exp(mpq_numref(q), mpq_denref(q), 1);
                    mpz_mul_ui(mpq_numref(q), mpq_numref(q), 2 * (unsigned long)round + 1);
                } else {
                    mpz_urandomb(mpq_numref(q), rs, bits[nb]);
                    mpz_setbit(mpq_numref(q), bits[nb] - 1);
                }
                if (round % 2 == 1)
                    mpz_neg(mpq_numref(q), mpq_numref(q));
                mpq_canonicalize(q);
                for (d = 0; d < N_ELEMS(digits); d++) {
                    mpz_ui_pow_ui(pow10, 10, digits[d]);
                    for (mode = 0; mode <= N_MODES; mode++) {
                        bl_q_round_pow(got, q, pow10, (billing_rounding)mode, rem, tmp);
                        reference_round(want, q, pow10, mode);
                        ck_assert_msg(mpz_cmp(got, want) == 0,
                                      "mode %d, digits %u, num %lu bits, den %lu bits, round %d",
                                      mode, digits[d], bits[nb], bits[db], round);
                    }
                }
            }
        }
    }
    mpz_clear(tmp);
    mpz_clear(rem);
    mpz_clear(want);
    mpz_clear(got);
    mpz_clear(pow10);
    mpq_clear(q);
    gmp_randclear(rs);
}
END_TEST

START_TEST(test_property_rounding)
{
    static const int digit_counts[] = {0, 2, 3, 9};
    uint64_t state = UINT64_C(0x9E3779B97F4A7C15);
    mpq_t q;
    int round;
    size_t d;
    int mode;

    mpq_init(q);
    for (round = 0; round < PROPERTY_ROUNDS; round++) {
        random_rational(q, &state);
        for (d = 0; d < N_ELEMS(digit_counts); d++) {
            for (mode = 0; mode < N_MODES; mode++)
                check_rounding(q, digit_counts[d], (billing_rounding)mode);
        }
    }
    mpq_clear(q);
}
END_TEST

/* Text of a terminating decimal: no trailing zero, no lone point, no "-0". */
static void check_decimal_text(const char *text)
{
    size_t len = strlen(text);

    ck_assert_str_ne(text, "-0");
    ck_assert_msg(text[len - 1] != '.', "%s ends in a point", text);
    if (strchr(text, '.') != NULL)
        ck_assert_msg(text[len - 1] != '0', "%s has a trailing zero", text);
}

START_TEST(test_property_to_string_round_trip)
{
    uint64_t state = UINT64_C(0xD1B54A32D192ED03);
    mpq_t q;
    mpq_t back;
    char *text;
    int round;

    mpq_init(q);
    mpq_init(back);
    for (round = 0; round < PROPERTY_ROUNDS; round++) {
        random_rational(q, &state);
        text = bl_q_to_string(q);
        ck_assert_ptr_nonnull(text);
        if (strchr(text, '/') != NULL) {
            q_set(back, text);
        } else {
            check_decimal_text(text);
            ck_assert_msg(bl_q_parse(back, text, 1, -1) == 0, "cannot parse back %s", text);
        }
        ck_assert_msg(mpq_equal(q, back), "%s does not round-trip", text);
        free(text);
    }
    mpq_clear(back);
    mpq_clear(q);
}
END_TEST

START_TEST(test_property_qty_round_trip)
{
    uint64_t state = UINT64_C(0x2545F4914F6CDD1D);
    bl_i128 max = (bl_i128)INT64_C(1000000000000000000) * BL_QTY_SCALE;
    bl_i128 v;
    bl_i128 back;
    char buf[48];
    int round;

    for (round = 0; round < PROPERTY_ROUNDS; round++) {
        v = (bl_i128)(((unsigned __int128)next_random(&state) << 64) | next_random(&state));
        v = (v < 0 ? -(v + 1) : v) % (max + 1);
        /* Mostly keep whole or short values, which have trailing zeros to strip. */
        if (round % 3 == 1)
            v -= v % BL_QTY_SCALE;
        ck_assert_int_gt(bl_qty_to_string(v, buf, sizeof buf), 0);
        ck_assert_msg(bl_qty_parse(&back, buf) == 0, "cannot parse back %s", buf);
        ck_assert_msg(back == v, "%s does not round-trip", buf);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The word-at-a-time id checks (status.c) against byte-by-byte ones   */
/* ------------------------------------------------------------------ */

/* Reference: every byte of the @n at @s within @lo..@hi, one at a time. */
static int ref_in_range(const char *s, size_t n, unsigned lo, unsigned hi)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if ((unsigned char)s[i] < lo || (unsigned char)s[i] > hi)
            return 0;
    }
    return 1;
}

/*
 * Every byte value at every position of ids of 1 to 20 bytes (both sides
 * of the 8-byte words and of the tail's 4, 2 and 1-byte loads): the fast
 * checks agree with bl_valid_id and with a byte loop.
 */
START_TEST(test_valid_id_n_every_byte)
{
    char s[24];
    size_t n;
    size_t pos;
    unsigned b;

    for (n = 1; n <= 20; n++) {
        for (pos = 0; pos < n; pos++) {
            for (b = 1; b <= 255; b++) {
                memset(s, 'a', sizeof(s));
                s[n] = '\0';
                s[pos] = (char)b;
                ck_assert_int_eq(!!bl_valid_id_n(s, n), !!bl_valid_id(s));
                ck_assert_int_eq(!!bl_valid_id_n(s, n), ref_in_range(s, n, 0x21, 0x7e));
                ck_assert_int_eq(!!bl_printable_n(s, n), ref_in_range(s, n, 0x20, 0x7e));
            }
        }
    }
}
END_TEST

START_TEST(test_valid_id_n_bounds)
{
    char s[BL_ID_MAX + 2];

    memset(s, 'x', sizeof(s));
    ck_assert(!bl_valid_id_n(s, 0));
    ck_assert(bl_valid_id_n(s, BL_ID_MAX));
    ck_assert(!bl_valid_id_n(s, BL_ID_MAX + 1));
    ck_assert(bl_printable_n(s, 0));
    ck_assert(bl_printable_n(" a ~", 4));
    ck_assert(!bl_valid_id_n(" a ~", 4));
}
END_TEST

/* ------------------------------------------------------------------ */

static Suite *decimal_suite(void)
{
    Suite *s = suite_create("decimal");
    TCase *tables = tcase_create("tables");
    TCase *properties = tcase_create("properties");

    tcase_add_loop_test(tables, test_parse_accepts, 0, N_ELEMS(parse_ok));
    tcase_add_loop_test(tables, test_parse_rejects, 0, N_ELEMS(parse_bad));
    tcase_add_test(tables, test_parse_bounds);
    tcase_add_loop_test(tables, test_to_string, 0, N_ELEMS(to_string_cases));
    tcase_add_loop_test(tables, test_round_minor, 0, N_ELEMS(round_cases));
    tcase_add_test(tables, test_round_minor_aliased);
    tcase_add_test(tables, test_public_parse);
    tcase_add_test(tables, test_public_round_refusals);
    tcase_add_loop_test(tables, test_minor_to_string, 0, N_ELEMS(minor_cases));
    tcase_add_loop_test(tables, test_qty_parse, 0, N_ELEMS(qty_cases));
    tcase_add_test(tables, test_qty_parse_null);
    tcase_add_test(tables, test_qty_parse_fast_path);
    tcase_add_test(tables, test_qty_parse_fast_path_lengths);
    tcase_add_loop_test(tables, test_qty_to_string, 0, N_ELEMS(qty_text_cases));
    tcase_add_loop_test(tables, test_mpz_set_i128, 0, N_ELEMS(i128_cases));
    tcase_add_test(tables, test_i128_extremes);
    tcase_add_loop_test(tables, test_currency_digits, 0, N_ELEMS(currency_cases));
    tcase_add_test(tables, test_currency_every_code);
    tcase_add_test(tables, test_rounding_names);
    tcase_add_test(tables, test_valid_id_n_every_byte);
    tcase_add_test(tables, test_valid_id_n_bounds);
    suite_add_tcase(s, tables);

    tcase_add_test(properties, test_property_rounding);
    tcase_add_test(properties, test_round_pow_around_128_bits);
    tcase_add_test(properties, test_property_to_string_round_trip);
    tcase_add_test(properties, test_property_qty_round_trip);
    /* Valgrind runs these about fifty times slower than native. */
    tcase_set_timeout(properties, 120);
    suite_add_tcase(s, properties);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(decimal_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
