/*
 * check_numfmt.c - exact numbers laid out for people (documents/numfmt.c):
 * display rounding half away from zero, padding to a scale, thousands
 * grouping, percentages and exact sums, table-driven.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const struct decimal_case {
    const char *exact;
    int min_scale;
    int max_scale;
    const char *sep;
    const char *want; /* NULL: refused */
} decimal_cases[] = {
    /* The table: 60000/31 GB-month shown as a rounded decimal. */
    {"60000/31", 0, 4, ",", "1,935.4839"},
    {"60000/31", 0, 4, "", "1935.4839"},
    {"1/3", 0, 4, "", "0.3333"},
    {"2/3", 0, 4, "", "0.6667"},
    /* Half away from zero, both signs; a negative that rounds to zero has no sign. */
    {"0.00005", 0, 4, "", "0.0001"},
    {"-0.00005", 0, 4, "", "-0.0001"},
    {"0.00004", 0, 4, "", "0"},
    {"-0.00004", 0, 4, "", "0"},
    {"-1341.4193548", 2, 2, ",", "-1,341.42"},
    /* Unit prices at the currency's scale, as a price book writes them. */
    {"0.6", 2, 40, "", "0.60"},
    {"2599", 2, 40, ",", "2,599.00"},
    {"0.0125", 2, 40, "", "0.0125"},
    {"0", 2, 40, "", "0.00"},
    {"24", 0, 4, "", "24"},
    {"1.5", 0, 4, "", "1.5"},
    /* Grouping: every three digits of the integer part only. */
    {"1234567.891", 0, 4, " ", "1 234 567.891"},
    {"123456", 0, 0, "'", "123'456"},
    {"12345", 0, 0, "_", "12_345"},
    {"999", 0, 0, ",", "999"},
    {"1000", 0, 0, ",", "1,000"},
    {"-1000000", 2, 2, ",", "-1,000,000.00"},
    /* Not numbers. */
    {"abc", 0, 4, "", NULL},
    {"1/0", 0, 4, "", NULL},
    {"", 0, 4, "", NULL},
    {"1.2.3", 0, 4, "", NULL},
};

START_TEST(test_decimal_table)
{
    const struct decimal_case *t = &decimal_cases[_i];
    char buf[NUMFMT_MAX];
    int rc = numfmt_decimal(t->exact, t->min_scale, t->max_scale, t->sep, buf, sizeof(buf));

    if (t->want == NULL) {
        ck_assert_msg(rc == -1, "'%s' accepted as '%s'", t->exact, buf);
        return;
    }
    ck_assert_msg(rc == 0, "'%s' refused", t->exact);
    ck_assert_str_eq(buf, t->want);
}
END_TEST

/* A buffer too small gets the input cut, never an overflow. */
START_TEST(test_decimal_small_buffer)
{
    char buf[6];

    ck_assert_int_eq(numfmt_decimal("1234567", 0, 0, ",", buf, sizeof(buf)), -1);
    ck_assert_str_eq(buf, "12345");
}
END_TEST

static const struct {
    const char *rate;
    const char *want;
} percent_cases[] = {
    {"0.06", "6%"}, {"0.065", "6.5%"},  {"0", "0%"},
    {"1", "100%"},  {"0.125", "12.5%"}, {"0.0001", "0.01%"},
};

START_TEST(test_percent_table)
{
    char buf[NUMFMT_MAX];

    ck_assert_int_eq(numfmt_percent(percent_cases[_i].rate, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, percent_cases[_i].want);
}
END_TEST

static const struct {
    const char *a;
    const char *b;
    int scale;
    const char *want;
} add_cases[] = {
    {"0", "15.26", 2, "15.26"},   {"15.26", "2.60", 2, "17.86"}, {"1.10", "2.205", 2, "3.31"},
    {"100", "-0.01", 2, "99.99"}, {"0", "1000", 0, "1000"},      {"0.001", "0.002", 3, "0.003"},
};

START_TEST(test_add_table)
{
    char buf[64];

    snprintf(buf, sizeof(buf), "%s", add_cases[_i].a);
    ck_assert_int_eq(numfmt_add(buf, add_cases[_i].b, add_cases[_i].scale, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, add_cases[_i].want);
}
END_TEST

static Suite *numfmt_suite(void)
{
    Suite *s = suite_create("numfmt");
    TCase *tc = tcase_create("numfmt");

    tcase_add_loop_test(tc, test_decimal_table, 0, (int)N_ELEMS(decimal_cases));
    tcase_add_test(tc, test_decimal_small_buffer);
    tcase_add_loop_test(tc, test_percent_table, 0, (int)N_ELEMS(percent_cases));
    tcase_add_loop_test(tc, test_add_table, 0, (int)N_ELEMS(add_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(numfmt_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
