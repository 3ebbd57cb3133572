/*
 * check_configfile.c - price book and accounts files: the shipped
 * example loads; every kind of mistake is reported with the file, the
 * JSON path and the reason; zone names cannot leave the zoneinfo tree.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "billing.h"
#include "configfile.h"
#include "util.h"
#include "zones.h"

#define ERR 1024

#define RATES                                                                                      \
    "\"rates\":[{\"meter\":\"gpu\",\"model\":\"RTX4090\",\"region\":\"cn-east-1\",\"price\":\"0."  \
    "60\"}]"
#define PB_VERSION "{\"id\":\"v1\",\"effective_from\":\"2026-01-01T00:00:00Z\"," RATES "}"
#define PRICEBOOK                                                                                  \
    "{\"currency\":\"CNY\",\"plans\":[{\"id\":\"p\",\"period\":\"day\",\"model\":\"RTX4090\","     \
    "\"region\":\"cn-east-1\"}],\"versions\":[" PB_VERSION "]}"
#define ACCOUNT                                                                                    \
    "{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"Asia/Shanghai\",\"tax_rate\":\"0\"}"

static int pricebook(const char *text, char *err)
{
    billing_catalog *cat = billing_catalog_new();
    int rc = bc_pricebook_parse(cat, text, strlen(text), "pb.json", err, ERR);

    billing_catalog_destroy(cat);
    return rc;
}

/* The accounts @text applied after the valid PRICEBOOK. */
static int accounts(const char *text, char *err)
{
    billing_catalog *cat = billing_catalog_new();
    bc_zones *zones = bc_zones_new();
    int rc;

    ck_assert_int_eq(bc_pricebook_parse(cat, PRICEBOOK, strlen(PRICEBOOK), "pb.json", err, ERR), 0);
    rc = bc_accounts_parse(cat, zones, text, strlen(text), "ac.json", err, ERR);
    billing_catalog_destroy(cat);
    bc_zones_destroy(zones);
    return rc;
}

START_TEST(test_example_loads)
{
    const char *src = getenv("top_srcdir");
    char pb[512];
    char ac[512];
    char err[ERR] = "";
    billing_catalog *cat = billing_catalog_new();
    bc_zones *zones = bc_zones_new();
    billing_rater *r;

    snprintf(pb, sizeof(pb), "%s/examples/gpu-cloud/pricebook.json", src ? src : "..");
    snprintf(ac, sizeof(ac), "%s/examples/gpu-cloud/accounts.json", src ? src : "..");
    ck_assert_msg(bc_pricebook_load(cat, pb, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(bc_accounts_load(cat, zones, ac, err, sizeof(err)) == 0, "%s", err);
    r = billing_rater_new(cat, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_uint_eq(billing_rater_account_count(r), 4);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    bc_zones_destroy(zones);
}
END_TEST

typedef struct bad_case {
    const char *text;
    const char *message;
} bad_case;

static const bad_case bad_pricebooks[] = {
    {"{", "pb.json:1:1: "},
    {"[]", "pb.json: must be an object, not an array"},
    {"{\"currency\":\"CNY\",\"versions\":[]}", "pb.json: versions: at least one price version"},
    {"{\"currency\":\"CNY\",\"version\":[]}", "pb.json: unknown field 'version'"},
    {"{\"versions\":[" PB_VERSION "]}", "pb.json: currency: missing"},
    {"{\"currency\":\"XYZ\",\"versions\":[" PB_VERSION "]}", "pb.json: currency: currency 'XYZ'"},
    {"{\"currency\":\"CNY\",\"rounding\":\"bankers\",\"versions\":[" PB_VERSION "]}",
     "pb.json: rounding: 'bankers' is not half-up"},
    {"{\"currency\":\"CNY\",\"currency\":\"JPY\",\"versions\":[" PB_VERSION "]}",
     "duplicate object key"},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":\"2026-01-01\"," RATES
     "}]}",
     "pb.json: versions[0].effective_from: timestamp '2026-01-01'"},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\",\"rates\":[{\"meter\":\"gpu\",\"model\":\"RTX4090\",\"region\":"
     "\"cn-east-1\",\"price\":0.60}]}]}",
     "pb.json: versions[0].rates[0].price: must be a string, not a number"},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\",\"rates\":[{\"meter\":\"cpu\",\"model\":\"*\",\"region\":\"*\","
     "\"price\":\"1\"}]}]}",
     "pb.json: versions[0].rates[0].meter: 'cpu' is not \"gpu\""},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\",\"rates\":[{\"meter\":\"gpu\",\"model\":\"*\",\"region\":\"*\","
     "\"price\":\"-1\"}]}]}",
     "pb.json: versions[0].rates[0]: "},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\"," RATES ",\"plan_fees\":[{\"plan\":\"nope\",\"fee\":\"1\"}]}]}",
     "pb.json: versions[0].plan_fees[0]: "},
    {"{\"currency\":\"CNY\",\"plans\":[{\"id\":\"p\",\"period\":\"week\",\"model\":\"m\","
     "\"region\":\"r\"}],\"versions\":[" PB_VERSION "]}",
     "pb.json: plans[0].period: 'week' is not \"day\" or \"month\""},
    {"{\"currency\":\"CNY\",\"plans\":[{\"id\":\"p\",\"period\":\"day\",\"model\":\"m\","
     "\"region\":\"r\",\"refundable\":\"yes\"}],\"versions\":[" PB_VERSION "]}",
     "pb.json: plans[0].refundable: must be true or false, not a string"},
    {"{\"currency\":\"CNY\",\"plans\":{},\"versions\":[" PB_VERSION "]}",
     "pb.json: plans: must be an array, not an object"},
};

START_TEST(test_bad_pricebook)
{
    const bad_case *c = &bad_pricebooks[_i];
    char err[ERR] = "";

    ck_assert_int_eq(pricebook(c->text, err), -1);
    ck_assert_msg(strstr(err, c->message) != NULL, "case %d: '%s' lacks '%s'", _i, err, c->message);
}
END_TEST

static const bad_case bad_accounts[] = {
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"../../etc/passwd\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone '../../etc/passwd' is not a valid IANA zone name"},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"Mars/Olympus_Mons\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'Mars/Olympus_Mons': "},
    /* Host-dependent names (issue 9 item 16): refused though the host has the file. */
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"localtime\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'localtime' depends on the host's configuration"},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"posixrules\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'posixrules' depends on the host's configuration"},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"Factory\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'Factory' depends on the host's configuration"},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\","
     "\"time_zone\":\"right/Asia/Shanghai\",\"tax_rate\":\"0\"}]}",
     "time zone 'right/Asia/Shanghai' depends on the host's configuration"},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":0}]}",
     "ac.json: accounts[0].tax_rate: must be a string, not a number"},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"USD\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0]: "},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"tz\":\"UTC\",\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0]: unknown field 'tz'"},
    {"{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","
     "\"resource\":\"i\",\"plan\":\"p\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":0}]}",
     "ac.json: subscriptions[0].terms: 0 is outside 1..1200"},
    {"{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","
     "\"resource\":\"i\",\"plan\":\"p\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":\"1\"}]}",
     "ac.json: subscriptions[0].terms: must be an integer, not a string"},
    {"{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","
     "\"resource\":\"i\",\"plan\":\"nope\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":1}]}",
     "ac.json: subscriptions[0]: "},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[\"cash\"]}]}",
     "ac.json: grants[0].applies_to: element 0 is not \"usage\" or \"subscription\""},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"soon\","
     "\"applies_to\":[\"usage\"]}]}",
     "ac.json: grants[0].expires_at: timestamp 'soon'"},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[]}]}",
     "ac.json: grants[0].applies_to: must name at least one charge kind"},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"b\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[\"usage\"]}]}",
     "ac.json: grants[0]: "},
    {"{\"accounts\":[" ACCOUNT "," ACCOUNT "]}", "ac.json: accounts[1]: "},
    {"{}", "ac.json: accounts: missing"},
};

START_TEST(test_bad_accounts)
{
    const bad_case *c = &bad_accounts[_i];
    char err[ERR] = "";

    ck_assert_int_eq(accounts(c->text, err), -1);
    ck_assert_msg(strstr(err, c->message) != NULL, "case %d: '%s' lacks '%s'", _i, err, c->message);
}
END_TEST

START_TEST(test_zone_names)
{
    static const char *const good[] = {"Asia/Shanghai", "UTC", "Etc/GMT+8",
                                       "America/Argentina/Buenos_Aires", "posixy/x", "rightmost"};
    static const char *const bad[] = {
        "",
        "/etc/passwd",
        "../x",
        "Asia/../x",
        "Asia//Shanghai",
        "Asia/",
        ".hidden",
        "Asia/.x",
        "a b",
        "Asia\\Shanghai",
        "localtime",
        "posixrules",
        "Factory",
        "posix/Asia/Shanghai",
        "right/UTC",
        "posix",
        "Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    size_t i;

    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(bc_zone_name_valid(good[i]), "%s", good[i]);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!bc_zone_name_valid(bad[i]), "%s", bad[i]);
    ck_assert(!bc_zone_name_valid(NULL));
}
END_TEST

/*
 * A host-dependent name is refused by its name, even when $TZDIR (which is
 * honoured) holds a valid file of that name.
 */
START_TEST(test_zone_host_dependent_refused)
{
    static const char *const names[] = {"localtime", "posixrules", "Factory"};
    char dir[] = "/tmp/check_zones_host.XXXXXX";
    char path[256];
    char err[ERR];
    char *data = NULL;
    size_t len = 0;
    bc_zones *set = bc_zones_new();
    size_t i;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/Asia/Shanghai",
             getenv("TZDIR") != NULL && getenv("TZDIR")[0] != '\0' ? getenv("TZDIR")
                                                                   : "/usr/share/zoneinfo");
    ck_assert_msg(bc_read_file(path, BC_ZONE_FILE_MAX, &data, &len, err, sizeof(err)) == 0, "%s",
                  err);
    setenv("TZDIR", dir, 1);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(data, 1, len, f), len);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_ptr_null(bc_zones_get(set, names[i], err, sizeof(err)));
        ck_assert_msg(strstr(err, "depends on the host's configuration") != NULL, "%s", err);
        unlink(path);
    }
    /* The same bytes under an ordinary name load from $TZDIR. */
    snprintf(path, sizeof(path), "%s/Test_Zone", dir);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(bc_zones_get(set, "Test_Zone", err, sizeof(err)) != NULL, "%s", err);
    unsetenv("TZDIR");
    unlink(path);
    rmdir(dir);
    free(data);
    bc_zones_destroy(set);
}
END_TEST

/* $TZDIR is honoured, and a bad or huge zone file is reported, not trusted. */
START_TEST(test_zone_files)
{
    char dir[] = "/tmp/check_zones.XXXXXX";
    char path[256];
    char err[ERR];
    const billing_zone *z;
    bc_zones *set = bc_zones_new();
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/Bad", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a TZif file", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/Huge", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    /* A sparse file just over the 1 MiB bound. */
    ck_assert_int_eq(truncate(path, BC_ZONE_FILE_MAX + 1), 0);
    setenv("TZDIR", dir, 1);
    ck_assert_ptr_null(bc_zones_get(set, "Bad", err, sizeof(err)));
    ck_assert_msg(strstr(err, "time zone 'Bad': ") != NULL, "%s", err);
    ck_assert_ptr_null(bc_zones_get(set, "Huge", err, sizeof(err)));
    ck_assert_msg(strstr(err, "larger than 1048576 bytes") != NULL, "%s", err);
    ck_assert_ptr_null(bc_zones_get(set, "Missing", err, sizeof(err)));
    ck_assert_msg(strstr(err, "No such file or directory") != NULL, "%s", err);
    z = bc_zones_get(set, "UTC", err, sizeof(err));
    ck_assert_ptr_nonnull(z);
    ck_assert_ptr_eq(bc_zones_get(set, "UTC", err, sizeof(err)), z);
    unsetenv("TZDIR");
    ck_assert_ptr_nonnull(bc_zones_get(set, "Asia/Shanghai", err, sizeof(err)));
    bc_zones_destroy(set);
    snprintf(path, sizeof(path), "%s/Bad", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/Huge", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

/*
 * bc_accounts_load_book: one price book's accounts, with their grants (and
 * subscriptions, filtered alike), and nothing of the others'; NULL loads
 * every account.
 * A "book" that is not a string is refused naming the field.
 */
START_TEST(test_accounts_of_one_book)
{
    static const char text[] =
        "{\"accounts\":["
        "{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":\"0\","
        "\"book\":\"cn\"},"
        "{\"id\":\"b\",\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":\"0\","
        "\"book\":\"other\"},"
        "{\"id\":\"c\",\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":\"0\"}],"
        "\"grants\":[{\"id\":\"g\",\"account\":\"b\",\"amount\":\"1.00\","
        "\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
        "\"applies_to\":[\"usage\"]}]}";
    static const char *const books[] = {"cn", "other", NULL};
    static const size_t want[] = {1, 1, 3};
    char path[] = "/tmp/check_books.XXXXXX";
    char err[ERR] = "";
    billing_catalog *cat;
    billing_rater *r;
    bc_zones *zones = bc_zones_new();
    int fd = mkstemp(path);
    size_t i;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    for (i = 0; i < 3; i++) {
        cat = billing_catalog_new();
        ck_assert_int_eq(bc_pricebook_parse(cat, PRICEBOOK, strlen(PRICEBOOK), "pb.json", err, ERR),
                         0);
        /* b's grant must land only where b is, or the library refuses it (unknown account). */
        ck_assert_msg(bc_accounts_load_book(cat, zones, path, books[i], NULL, NULL, err, ERR) == 0,
                      "%s", err);
        r = billing_rater_new(cat, err, sizeof(err));
        ck_assert_msg(r != NULL, "%s", err);
        ck_assert_uint_eq(billing_rater_account_count(r), want[i]);
        if (i == 0)
            ck_assert_str_eq(billing_rater_account_id(r, 0), "a");
        billing_rater_destroy(r);
        billing_catalog_destroy(cat);
    }
    unlink(path);
    bc_zones_destroy(zones);
    ck_assert_int_ne(accounts("{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":"
                              "\"UTC\",\"tax_rate\":\"0\",\"book\":1}]}",
                              err),
                     0);
    ck_assert_msg(strstr(err, "accounts[0].book: must be a string") != NULL, "%s", err);
}
END_TEST

static Suite *configfile_suite(void)
{
    Suite *s = suite_create("configfile");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_example_loads);
    tcase_add_loop_test(tc, test_bad_pricebook, 0,
                        (int)(sizeof(bad_pricebooks) / sizeof(bad_pricebooks[0])));
    tcase_add_loop_test(tc, test_bad_accounts, 0,
                        (int)(sizeof(bad_accounts) / sizeof(bad_accounts[0])));
    tcase_add_test(tc, test_zone_names);
    tcase_add_test(tc, test_accounts_of_one_book);
    tcase_add_test(tc, test_zone_files);
    tcase_add_test(tc, test_zone_host_dependent_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(configfile_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
