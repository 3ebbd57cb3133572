/*
 * check_status.c - status codes, meter names and version.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"

START_TEST(test_strerror_every_code)
{
    int code;

    for (code = BILLING_ERR_IO; code <= BILLING_DUPLICATE; code++) {
        const char *s = billing_strerror((billing_status)code);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_ne(s, "unknown status");
    }
    ck_assert_str_eq(billing_strerror((billing_status)42), "unknown status");
}
END_TEST

START_TEST(test_meter_round_trip)
{
    int m;
    billing_meter parsed;

    for (m = 0; m < BILLING_METER_COUNT; m++) {
        const char *name = billing_meter_name((billing_meter)m);
        ck_assert_ptr_nonnull(name);
        ck_assert_int_eq(billing_meter_parse(name, &parsed), BILLING_OK);
        ck_assert_int_eq(parsed, m);
    }
    ck_assert_ptr_null(billing_meter_name((billing_meter)BILLING_METER_COUNT));
    ck_assert_int_eq(billing_meter_parse("GPU", &parsed), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_meter_parse("", &parsed), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_meter_parse(NULL, &parsed), BILLING_ERR_INVALID);
}
END_TEST

/* The constructors that can fail for several reasons say which through billing_status. */
START_TEST(test_rater_new_reports_why)
{
    billing_catalog *cat = billing_catalog_new();
    billing_rater *r = (billing_rater *)&r; /* not NULL: the call must clear it */
    char err[256] = "";

    ck_assert_ptr_nonnull(cat);
    ck_assert_int_eq(billing_rater_new(NULL, &r, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(err, "catalog is NULL"));
    ck_assert_int_eq(billing_rater_new(cat, NULL, err, sizeof(err)), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_rater_new(cat, &r, err, sizeof(err)), BILLING_ERR_STATE);
    ck_assert_ptr_null(r);
    ck_assert_str_eq(err, "catalog has no currency");
    ck_assert_int_eq(
        billing_catalog_set_currency(cat, "USD", BILLING_ROUND_HALF_EVEN, err, sizeof(err)),
        BILLING_OK);
    ck_assert_int_eq(billing_rater_new(cat, &r, NULL, 0), BILLING_OK);
    ck_assert_ptr_nonnull(r);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
}
END_TEST

START_TEST(test_zone_new_reports_why)
{
    static const unsigned char junk[] = "not a TZif file at all, but long enough to have a header";
    billing_zone *z = NULL;
    char err[256] = "";

    ck_assert_int_eq(billing_zone_new("Test/Junk", junk, sizeof(junk), &z, err, sizeof(err)),
                     BILLING_ERR_PARSE);
    ck_assert_ptr_null(z);
    ck_assert_ptr_nonnull(strstr(err, "bad magic"));
    ck_assert_int_eq(billing_zone_new("Test/Big", junk, (size_t)2 << 20, &z, err, sizeof(err)),
                     BILLING_ERR_TOO_LARGE);
    ck_assert_int_eq(billing_zone_new("../x y", junk, sizeof(junk), &z, err, sizeof(err)),
                     BILLING_ERR_INVALID);
}
END_TEST

/* The header's version macros work in #if, as an embedder uses them. */
#if !defined(BILLING_VERSION_NUMBER) || BILLING_VERSION_NUMBER < 0x000100
#error "BILLING_VERSION_NUMBER missing or below 0.1.0"
#endif

START_TEST(test_version)
{
    char text[32];

    ck_assert_str_eq(billing_version(), PACKAGE_VERSION);
    snprintf(text, sizeof(text), "%d.%d.%d", BILLING_VERSION_MAJOR, BILLING_VERSION_MINOR,
             BILLING_VERSION_PATCH);
    /* configure took PACKAGE_VERSION from the macros, and the library is this tree's. */
    ck_assert_str_eq(text, PACKAGE_VERSION);
    ck_assert_str_eq(text, billing_version());
    ck_assert_int_eq(BILLING_VERSION_NUMBER, (BILLING_VERSION_MAJOR << 16) |
                                                 (BILLING_VERSION_MINOR << 8) |
                                                 BILLING_VERSION_PATCH);
    ck_assert(BILLING_VERSION_MINOR <= 255 && BILLING_VERSION_PATCH <= 255);
}
END_TEST

static Suite *status_suite(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_strerror_every_code);
    tcase_add_test(tc, test_meter_round_trip);
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_rater_new_reports_why);
    tcase_add_test(tc, test_zone_new_reports_why);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(status_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
