/*
 * check_store.c - the parts of the store that need no server: SQLSTATE
 * classification, NUMERIC binary encoding, canonical decimals, splitting
 * instants for timestamptz. (itest_store.c tests them against PostgreSQL.)
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "copy.h"
#include "drafthash.h"
#include "load.h"
#include "md5.h"
#include "testutil.h"

/* Errors after which billingd checks the schema version again (issue 23 leftover A3). */
START_TEST(test_schema_suspect_sqlstates)
{
    static const struct {
        const char *state;
        int want;
    } cases[] = {
        {"42P01", 1}, /* undefined_table */
        {"42703", 1}, /* undefined_column */
        {"42883", 1}, /* undefined_function */
        {"42704", 1}, /* undefined_object */
        {"3F000", 1}, /* invalid_schema_name */
        {"0A000", 1}, /* feature_not_supported: cached plan must not change result type */
        {"23505", 0}, {"08006", 0}, {"22023", 0}, {"", 0}, {"427", 0}, {NULL, 0},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(bs_sqlstate_schema_suspect(cases[i].state) == cases[i].want, "%s",
                      cases[i].state != NULL ? cases[i].state : "NULL");
}
END_TEST

START_TEST(test_classify_sqlstate)
{
    static const struct {
        const char *state;
        bs_status want;
    } cases[] = {
        {"08006", BS_ERR_RETRY},      /* connection_failure */
        {"08001", BS_ERR_RETRY},      /* sqlclient_unable_to_establish_sqlconnection */
        {"40001", BS_ERR_RETRY},      /* serialization_failure */
        {"40P01", BS_ERR_RETRY},      /* deadlock_detected */
        {"55P03", BS_ERR_RETRY},      /* lock_not_available */
        {"53300", BS_ERR_RETRY},      /* too_many_connections */
        {"53100", BS_ERR_RETRY},      /* disk_full */
        {"57P01", BS_ERR_RETRY},      /* admin_shutdown */
        {"57P03", BS_ERR_RETRY},      /* cannot_connect_now */
        {"23505", BS_ERR_CONSTRAINT}, /* unique_violation */
        {"23514", BS_ERR_CONSTRAINT}, /* check_violation */
        {"23503", BS_ERR_CONSTRAINT}, /* foreign_key_violation */
        {"23000", BS_ERR_CONSTRAINT}, /* our guard triggers */
        {"42501", BS_ERR_FATAL},      /* insufficient_privilege */
        {"42P01", BS_ERR_FATAL},      /* undefined_table */
        {"22023", BS_ERR_FATAL},      /* invalid_parameter_value */
        {"57014", BS_ERR_FATAL},      /* query_canceled: a timeout would recur */
        {"40003", BS_ERR_FATAL},      /* statement_completion_unknown */
        {"", BS_ERR_FATAL},           {"0800", BS_ERR_FATAL}, {NULL, BS_ERR_FATAL},
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(bs_classify_sqlstate(cases[i].state) == cases[i].want, "%s",
                      cases[i].state != NULL ? cases[i].state : "NULL");
}
END_TEST

/* Encode @dec and compare with the expected bytes (header + digits). */
static void expect_numeric(const char *dec, const unsigned char *want, size_t len)
{
    unsigned char buf[64];
    long n = bs_numeric_encode(dec, buf, sizeof(buf));

    ck_assert_msg(n == (long)len, "%s: %ld bytes, expected %zu", dec, n, len);
    ck_assert_msg(memcmp(buf, want, len) == 0, "%s: wrong encoding", dec);
}

START_TEST(test_numeric_encoding)
{
    /* ndigits, weight, sign, dscale (16-bit each), then base-10000 digits. */
    static const unsigned char zero[] = {0, 0, 0, 0, 0, 0, 0, 0};
    static const unsigned char zero_scale2[] = {0, 0, 0, 0, 0, 0, 0, 2};
    static const unsigned char one_fifty[] = {0, 2, 0, 0, 0, 0, 0, 2, 0, 1, 0x13, 0x88};
    static const unsigned char tiny[] = {0, 1, 0xff, 0xff, 0, 0, 0, 4, 0, 1};
    static const unsigned char tinier[] = {0, 1, 0xff, 0xfe, 0, 0, 0, 5, 0x03, 0xe8};
    static const unsigned char big[] = {0, 3, 0, 1, 0, 0, 0, 1, 0, 1, 0x09, 0x29, 0x17, 0x70};
    static const unsigned char neg[] = {0, 1, 0, 0, 0x40, 0, 0, 0, 0, 7};
    static const unsigned char ten_k[] = {0, 1, 0, 1, 0, 0, 0, 0, 0, 1};
    unsigned char small[4];

    expect_numeric("0", zero, sizeof(zero));
    expect_numeric("-0", zero, sizeof(zero));
    expect_numeric("000", zero, sizeof(zero));
    expect_numeric("-0.00", zero_scale2, sizeof(zero_scale2));
    expect_numeric("1.50", one_fifty, sizeof(one_fifty));
    expect_numeric("+01.50", one_fifty, sizeof(one_fifty));
    expect_numeric("0.0001", tiny, sizeof(tiny));
    expect_numeric("0.00001", tinier, sizeof(tinier));
    expect_numeric("12345.6", big, sizeof(big));
    expect_numeric("-7", neg, sizeof(neg));
    expect_numeric("10000", ten_k, sizeof(ten_k));
    ck_assert_int_eq(bs_numeric_encode("1e5", small, sizeof(small)), -1);
    ck_assert_int_eq(bs_numeric_encode(".5", small, sizeof(small)), -1);
    ck_assert_int_eq(bs_numeric_encode("5.", small, sizeof(small)), -1);
    ck_assert_int_eq(bs_numeric_encode("", small, sizeof(small)), -1);
    ck_assert_int_eq(bs_numeric_encode("-", small, sizeof(small)), -1);
    ck_assert_int_eq(bs_numeric_encode("1.2.3", small, sizeof(small)), -1);
    ck_assert_int_eq(bs_numeric_encode("NaN", small, sizeof(small)), -1);
    ck_assert_int_eq(bs_numeric_encode("12345", small, sizeof(small)), -1); /* too small */
}
END_TEST

START_TEST(test_numeric_length_bound)
{
    char *long_dec = malloc(BS_DECIMAL_MAX + 2);
    unsigned char buf[8 + 2 * (BS_DECIMAL_MAX / 4 + 2)];

    ck_assert_ptr_nonnull(long_dec);
    memset(long_dec, '9', BS_DECIMAL_MAX);
    long_dec[BS_DECIMAL_MAX] = '\0';
    ck_assert_int_gt(bs_numeric_encode(long_dec, buf, sizeof(buf)), 0);
    long_dec[BS_DECIMAL_MAX] = '9';
    long_dec[BS_DECIMAL_MAX + 1] = '\0';
    ck_assert_int_eq(bs_numeric_encode(long_dec, buf, sizeof(buf)), -1);
    free(long_dec);
}
END_TEST

START_TEST(test_decimal_canonical)
{
    static const char *const cases[][2] = {
        {"0.60", "0.6"},
        {"0.600", "0.6"},
        {"+0.6", "0.6"},
        {"00012.500", "12.5"},
        {"-0", "0"},
        {"-0.000", "0"},
        {"0", "0"},
        {"10", "10"},
        {"-1.10", "-1.1"},
        {"2599.00", "2599"},
        {"0.000000001", "0.000000001"},
    };
    char out[32];
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(bs_decimal_canonical(cases[i][0], out, sizeof(out)), 0);
        ck_assert_str_eq(out, cases[i][1]);
    }
    ck_assert_int_eq(bs_decimal_canonical("1e3", out, sizeof(out)), -1);
    ck_assert_int_eq(bs_decimal_canonical("1.", out, sizeof(out)), -1);
    ck_assert_int_eq(bs_decimal_canonical(".1", out, sizeof(out)), -1);
    ck_assert_int_eq(bs_decimal_canonical("12345", out, 4), -1);
}
END_TEST

START_TEST(test_time_split)
{
    ck_assert_int_eq(bs_time_micros(INT64_C(1767571200123456789)), INT64_C(1767571200123456));
    ck_assert_int_eq(bs_time_nanos(INT64_C(1767571200123456789)), 789);
    /* Before 1970: toward the past, so that nanos stay in 0..999. */
    ck_assert_int_eq(bs_time_micros(-1), -1);
    ck_assert_int_eq(bs_time_nanos(-1), 999);
    ck_assert_int_eq(bs_time_micros(-1000), -1);
    ck_assert_int_eq(bs_time_nanos(-1000), 0);
    ck_assert_int_eq(bs_time_micros(0), 0);
}
END_TEST

START_TEST(test_error_helpers)
{
    bs_error err;

    ck_assert_int_eq(bs_error_set(&err, BS_ERR_INVALID, "x %d", 42), BS_ERR_INVALID);
    ck_assert_str_eq(err.message, "x 42");
    ck_assert_str_eq(err.sqlstate, "");
    ck_assert_int_eq(bs_error_set(NULL, BS_ERR_FATAL, "ignored"), BS_ERR_FATAL);
    ck_assert_str_ne(bs_strerror(BS_ERR_RETRY), bs_strerror(BS_ERR_FATAL));
    ck_assert_str_eq(bs_strerror((bs_status)42), "unknown store status");
    /* Connecting needs a string; nothing else is checked before libpq. */
    ck_assert_ptr_null(bs_connect(NULL, NULL, &err));
    ck_assert_int_eq(err.status, BS_ERR_INVALID);
}
END_TEST

/*
 * The drafts' content hash (billing.invoices.content_hash, which a
 * re-close compares) over strings that need escaping: an account and a
 * grant id with a quote and a backslash, a region with both, and prior-
 * period adjustments read back from the database whose text carries
 * control characters, DEL, non-ASCII UTF-8 and bytes that are not UTF-8
 * (a SQL_ASCII database holds them). The golden values are what the
 * store's own writer gave before it moved to the shared JSON writer
 * (formats/jsonbuf.c): a changed byte of escaping changes them, and every
 * stored draft would then re-close as changed.
 */
START_TEST(test_draft_hash_golden)
{
    billing_zone *z = tu_zone("Asia/Shanghai");
    billing_catalog *cat = tu_gpu_cloud();
    billing_rater *r;
    billing_invoice *inv = NULL;
    char err[256] = "";
    char hex[2 * BS_MD5_LEN + 1];
    const char *acct = "q\"a\\1";
    bs_adjustment adj[2] = {
        {2026, 1, "storage", "m\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "v\"1\\\t\n\r\b\f", "7/3", "GB-month", "0.20", "0.47"},
        {2025, 12, "gpu", "RTX4090", "\xff\xc3 cut \xed\xa0\x80", "v1", "2", "hour", "0.60",
         "1.20"},
    };
    bs_draft d = {NULL, NULL, 0, "12.34", "0.74", "13.08"};

    tu_account(cat, acct, z, "0.06");
    ck_assert_int_eq(billing_catalog_add_grant(cat, "g\"\\", acct, "5.00",
                                               tu_time("2026-01-01T00:00:00+08:00"),
                                               tu_time("2026-03-01T00:00:00+08:00"),
                                               BILLING_CHARGE_USAGE, 0, err, sizeof(err)),
                     BILLING_OK);
    r = tu_new_rater(cat);
    ck_assert_int_eq(tu_add(r, "e1", acct, "disk-1", "storage", "2026-02-01T00:00:00+08:00",
                            "2026-02-11T00:00:00+08:00", "100", "ssd\"x", "r\\e\"g", err,
                            sizeof(err)),
                     BILLING_OK);
    TU_ADD(r, "e2", acct, "i-1", "gpu", "2026-02-02T10:00:00+08:00", "2026-02-02T13:30:00+08:00",
           "1", "RTX4090");
    ck_assert_int_eq(billing_rater_invoice(r, acct, 2026, 2, &inv, err, sizeof(err)), BILLING_OK);
    d.inv = inv;
    ck_assert_int_eq(bs_draft_hash(&d, hex), 0);
    ck_assert_str_eq(hex, "a03e606cc9baee74e3a250480222d7d8");
    d.adj = adj;
    d.n_adj = 2;
    ck_assert_int_eq(bs_draft_hash(&d, hex), 0);
    ck_assert_str_eq(hex, "e5f84364fea9875183042095facd8298");
    billing_invoice_destroy(inv);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_zone_destroy(z);
}
END_TEST

/*
 * bs_md5 is RFC 1321's MD5 (its steps written out since h49): the RFC's
 * test suite, and every length from 0 to 300 bytes (each padding case: a
 * tail of 0 to 55 bytes in one block, 56 to 63 in two) through one digest
 * of all 301 digests, as Python's hashlib.md5 gives it.
 */
START_TEST(test_md5_vectors)
{
    static const char *const rfc[][2] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    unsigned char data[300];
    char hex[2 * BS_MD5_LEN + 1];
    char *all = malloc(301 * 2 * BS_MD5_LEN + 1);
    size_t i;

    ck_assert_ptr_nonnull(all);
    for (i = 0; i < sizeof(rfc) / sizeof(rfc[0]); i++) {
        bs_md5_hex(rfc[i][0], strlen(rfc[i][0]), hex);
        ck_assert_str_eq(hex, rfc[i][1]);
    }
    for (i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 7 + 3);
    for (i = 0; i <= sizeof(data); i++)
        bs_md5_hex(data, i, all + 2 * BS_MD5_LEN * i);
    bs_md5_hex(all, 301 * 2 * BS_MD5_LEN, hex);
    ck_assert_str_eq(hex, "cb441f7270246a6108bd418c9a9c94d1");
    free(all);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *s = suite_create("store_unit");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_classify_sqlstate);
    tcase_add_test(tc, test_schema_suspect_sqlstates);
    tcase_add_test(tc, test_numeric_encoding);
    tcase_add_test(tc, test_numeric_length_bound);
    tcase_add_test(tc, test_decimal_canonical);
    tcase_add_test(tc, test_time_split);
    tcase_add_test(tc, test_error_helpers);
    tcase_add_test(tc, test_draft_hash_golden);
    tcase_add_test(tc, test_md5_vectors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(store_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
