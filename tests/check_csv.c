/*
 * check_csv.c - CSV cells as every CSV of the billing tool writes them
 * (documents/csv.c): RFC 4180 quoting, and cells a spreadsheet would run as
 * a formula (OWASP "CSV Injection": = + - @ tab CR first) written with a
 * leading single quote, except plain numbers such as "-12.50".
 * Table-driven; tests/check-csv.sh runs the same ids through the tool.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const struct cell_case {
    const char *value;
    const char *want; /* the cell's bytes */
} cell_cases[] = {
    /* Formula injection: every starting character OWASP names. */
    {"=HYPERLINK(\"http://evil.example\",\"x\")",
     "\"'=HYPERLINK(\"\"http://evil.example\"\",\"\"x\"\")\""},
    {"+cmd|'/C_calc'!A0", "\"'+cmd|'/C_calc'!A0\""},
    {"@SUM(1+1)", "\"'@SUM(1+1)\""},
    {"-2+3", "\"'-2+3\""},
    {"=1+1", "\"'=1+1\""},
    {"\t=1+1", "\"'\t=1+1\""},
    {"\r=1+1", "\"'\r=1+1\""},
    {"-", "\"'-\""},
    {"+12", "\"'+12\""},
    {"-1e5", "\"'-1e5\""},
    {"-12.", "\"'-12.\""},
    {"-.5", "\"'-.5\""},
    {"-7/3", "\"'-7/3\""},
    /* Numbers the tool writes stay numbers, negative ones included. */
    {"-12.50", "-12.50"},
    {"-0.60", "-0.60"},
    {"-3", "-3"},
    {"14.40", "14.40"},
    {"0", "0"},
    {"7/3", "7/3"},
    /* RFC 4180 as before; a formula character later in the cell is text. */
    {"a,b", "\"a,b\""},
    {"say \"hi\"", "\"say \"\"hi\"\"\""},
    {"two\nlines", "\"two\nlines\""},
    {"a=1", "a=1"},
    {"RTX4090", "RTX4090"},
    {"", ""},
};

static char *cell_text(const char *value, char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);

    ck_assert_ptr_nonnull(f);
    csv_cell(f, value);
    ck_assert_int_eq(fclose(f), 0);
    return *buf;
}

START_TEST(test_cell_table)
{
    const struct cell_case *t = &cell_cases[_i];
    char *buf = NULL;
    size_t len = 0;

    ck_assert_str_eq(cell_text(t->value, &buf, &len), t->want);
    free(buf);
}
END_TEST

START_TEST(test_cell_null_is_empty)
{
    char *buf = NULL;
    size_t len = 0;

    ck_assert_str_eq(cell_text(NULL, &buf, &len), "");
    ck_assert_int_eq(csv_neutralized(NULL), 0);
    free(buf);
}
END_TEST

static Suite *csv_suite(void)
{
    Suite *s = suite_create("csv");
    TCase *tc = tcase_create("csv");

    tcase_add_loop_test(tc, test_cell_table, 0, (int)N_ELEMS(cell_cases));
    tcase_add_test(tc, test_cell_null_is_empty);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(csv_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
