/*
 * check_configfile.c - price book and accounts files: the shipped
 * example loads; every kind of mistake is reported with the file, the
 * JSON path and the reason; zone names cannot leave the zoneinfo tree.
 */
#include "config.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "billing.h"
#include "billing_config.h"
#include "util.h"

#define ERR 1024

#define RATES                                                                                     \
    "\"rates\":[{\"meter\":\"gpu\",\"model\":\"RTX4090\",\"region\":\"cn-east-1\",\"price\":\"0." \
    "60\"}]"
#define PB_VERSION "{\"id\":\"v1\",\"effective_from\":\"2026-01-01T00:00:00Z\"," RATES "}"
#define PRICEBOOK                                                                              \
    "{\"currency\":\"CNY\",\"plans\":[{\"id\":\"p\",\"period\":\"day\",\"model\":\"RTX4090\"," \
    "\"region\":\"cn-east-1\"}],\"versions\":[" PB_VERSION "]}"
#define ACCOUNT \
    "{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"Asia/Shanghai\",\"tax_rate\":\"0\"}"
/* An account refused by the library (tax above 1), in a well-formed element. */
#define TAX_106 "{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":\"1.06\"}"
/* A usage grant @id of @amount to account "a" for January 2026. */
#define GRANT(id, amount)                                                              \
    "{\"id\":\"" id "\",\"account\":\"a\",\"amount\":\"" amount "\","                  \
    "\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\"," \
    "\"applies_to\":[\"usage\"]}"

static billing_status pricebook(const char *text, char *err)
{
    billing_catalog *cat = billing_catalog_new();
    billing_status rc =
        billing_config_pricebook_parse(cat, text, strlen(text), "pb.json", err, ERR);

    billing_catalog_destroy(cat);
    return rc;
}

/* The accounts @text applied after the valid PRICEBOOK. */
static billing_status accounts(const char *text, char *err)
{
    billing_catalog *cat = billing_catalog_new();
    billing_config_zones *zones = billing_config_zones_new();
    billing_status rc;

    ck_assert_int_eq(
        billing_config_pricebook_parse(cat, PRICEBOOK, strlen(PRICEBOOK), "pb.json", err, ERR), 0);
    rc = billing_config_accounts_parse(cat, zones, text, strlen(text), "ac.json", err, ERR);
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
    return rc;
}

/* The paths of the shipped example's price book and accounts files. */
static void example_paths(char *pb, char *ac, size_t size)
{
    const char *src = getenv("top_srcdir");

    snprintf(pb, size, "%s/examples/gpu-cloud/pricebook.json", src ? src : "..");
    snprintf(ac, size, "%s/examples/gpu-cloud/accounts.json", src ? src : "..");
}

START_TEST(test_example_loads)
{
    char pb[512];
    char ac[512];
    char err[ERR] = "";
    billing_catalog *cat = billing_catalog_new();
    billing_config_zones *zones = billing_config_zones_new();
    billing_rater *r;

    example_paths(pb, ac, sizeof(pb));
    ck_assert_msg(billing_config_pricebook_load(cat, pb, err, sizeof(err)) == BILLING_OK, "%s",
                  err);
    ck_assert_msg(billing_config_accounts_load(cat, zones, ac, err, sizeof(err)) == BILLING_OK,
                  "%s", err);
    billing_rater_new(cat, &r, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_uint_eq(billing_rater_account_count(r), 4);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
}
END_TEST

/* Arrays in any order: grants before the accounts they name still load (applied in order). */
START_TEST(test_accounts_any_order)
{
    char err[ERR] = "";

    ck_assert_msg(accounts("{\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":\"10.00\","
                           "\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":"
                           "\"2026-02-01T00:00:00Z\",\"applies_to\":[\"usage\"]}],"
                           "\"description\":\"x\",\n\"accounts\" : [ " ACCOUNT " ] }\n",
                           err) == BILLING_OK,
                  "%s", err);
    ck_assert_int_eq(accounts("{\"accounts\":[]}", err), BILLING_OK);
}
END_TEST

/* The one-call loader gives the same catalog, and says why it failed the same way. */
START_TEST(test_catalog_load)
{
    char pb[512];
    char ac[512];
    char err[ERR] = "";
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *cat = NULL;
    billing_rater *r;

    example_paths(pb, ac, sizeof(pb));
    ck_assert_int_eq(billing_config_catalog_load(pb, ac, zones, &cat, err, sizeof(err)),
                     BILLING_OK);
    billing_rater_new(cat, &r, err, sizeof(err));
    ck_assert_msg(r != NULL, "%s", err);
    ck_assert_uint_eq(billing_rater_account_count(r), 4);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    cat = (billing_catalog *)1;
    ck_assert_int_eq(billing_config_catalog_load(pb, "/nonexistent/accounts.json", zones, &cat, err,
                                                 sizeof(err)),
                     BILLING_ERR_IO);
    ck_assert_ptr_null(cat);
    ck_assert_msg(strstr(err, "/nonexistent/accounts.json: No such file or directory") != NULL,
                  "%s", err);
    ck_assert_int_eq(billing_config_catalog_load(ac, NULL, zones, &cat, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_msg(strstr(err, "accounts.json: unknown field 'accounts'") != NULL, "%s", err);
    ck_assert_int_eq(billing_config_catalog_load(pb, ac, zones, NULL, err, sizeof(err)),
                     BILLING_ERR_INVALID);
    billing_config_zones_destroy(zones);
}
END_TEST

/* What is wrong, where, and the status that says why (as the catalog setters would). */
typedef struct bad_case {
    const char *text;
    const char *message;
    billing_status status;
} bad_case;

static const bad_case bad_pricebooks[] = {
    {"{", "pb.json:1:1: ", BILLING_ERR_PARSE},
    {"[]", "pb.json: must be an object, not an array", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"versions\":[]}", "pb.json: versions: at least one price version",
     BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"version\":[]}", "pb.json: unknown field 'version'",
     BILLING_ERR_INVALID},
    {"{\"versions\":[" PB_VERSION "]}", "pb.json: currency: missing", BILLING_ERR_INVALID},
    {"{\"currency\":\"XYZ\",\"versions\":[" PB_VERSION "]}", "pb.json: currency: currency 'XYZ'",
     BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"rounding\":\"bankers\",\"versions\":[" PB_VERSION "]}",
     "pb.json: rounding: 'bankers' is not half-up", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"currency\":\"JPY\",\"versions\":[" PB_VERSION "]}",
     "duplicate object key", BILLING_ERR_PARSE},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":\"2026-01-01\"," RATES
     "}]}",
     "pb.json: versions[0].effective_from: timestamp '2026-01-01'", BILLING_ERR_PARSE},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\",\"rates\":[{\"meter\":\"gpu\",\"model\":\"RTX4090\",\"region\":"
     "\"cn-east-1\",\"price\":0.60}]}]}",
     "pb.json: versions[0].rates[0].price: must be a string, not a number", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\",\"rates\":[{\"meter\":\"cpu\",\"model\":\"*\",\"region\":\"*\","
     "\"price\":\"1\"}]}]}",
     "pb.json: versions[0].rates[0].meter: 'cpu' is not \"gpu\"", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\",\"rates\":[{\"meter\":\"gpu\",\"model\":\"*\",\"region\":\"*\","
     "\"price\":\"-1\"}]}]}",
     "pb.json: versions[0].rates[0]: ", BILLING_ERR_PARSE},
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\",\"effective_from\":"
     "\"2026-01-01T00:00:00Z\"," RATES ",\"plan_fees\":[{\"plan\":\"nope\",\"fee\":\"1\"}]}]}",
     "pb.json: versions[0].plan_fees[0]: ", BILLING_ERR_NOT_FOUND},
    {"{\"currency\":\"CNY\",\"plans\":[{\"id\":\"p\",\"period\":\"week\",\"model\":\"m\","
     "\"region\":\"r\"}],\"versions\":[" PB_VERSION "]}",
     "pb.json: plans[0].period: 'week' is not \"day\" or \"month\"", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"plans\":[{\"id\":\"p\",\"period\":\"day\",\"model\":\"m\","
     "\"region\":\"r\",\"refundable\":\"yes\"}],\"versions\":[" PB_VERSION "]}",
     "pb.json: plans[0].refundable: must be true or false, not a string", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"plans\":{},\"versions\":[" PB_VERSION "]}",
     "pb.json: plans: must be an array, not an object", BILLING_ERR_INVALID},
    /* Issue 23 item 11: a version start finer than the microsecond the store keeps. */
    {"{\"currency\":\"CNY\",\"versions\":[{\"id\":\"v1\","
     "\"effective_from\":\"2026-01-01T00:00:00.000000999+08:00\"," RATES "}]}",
     "pb.json: versions[0].effective_from: '2026-01-01T00:00:00.000000999+08:00' is finer than a "
     "microsecond",
     BILLING_ERR_INVALID},
    /* The issuer (issue 27): bounded as migration 0014 bounds it. */
    {"{\"currency\":\"CNY\",\"issuer\":{\"address\":\"x\"},\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer.legal_name: missing", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"issuer\":\"Acme\",\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer: must be an object, not a string", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"issuer\":{\"legal_name\":\"A\",\"vat\":\"1\"},"
     "\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer: unknown field 'vat'", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"issuer\":{\"legal_name\":\"\"},\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer.legal_name: must not be empty", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"issuer\":{\"legal_name\":\"A\",\"payment_terms_days\":366},"
     "\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer.payment_terms_days: 366 is outside 0..365", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"issuer\":{\"legal_name\":\"A\",\"payment_terms_days\":-1},"
     "\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer.payment_terms_days: -1 is outside 0..365", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"issuer\":{\"legal_name\":\"A\",\"tax_id\":"
     "\"12345678901234567890123456789012345678901234567890123456789012345\"},"
     "\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer.tax_id: 65 characters, more than the 64 allowed", BILLING_ERR_INVALID},
    {"{\"currency\":\"CNY\",\"issuer\":{\"legal_name\":\"A\",\"logo\":"
     "\"nosuch-logo.png\"},\"versions\":[" PB_VERSION "]}",
     "pb.json: issuer.logo: nosuch-logo.png: ", BILLING_ERR_INVALID},
};

START_TEST(test_bad_pricebook)
{
    const bad_case *c = &bad_pricebooks[_i];
    char err[ERR] = "";

    ck_assert_int_eq(pricebook(c->text, err), c->status);
    ck_assert_msg(strstr(err, c->message) != NULL, "case %d: '%s' lacks '%s'", _i, err, c->message);
}
END_TEST

static const bad_case bad_accounts[] = {
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"../../etc/passwd\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone '../../etc/passwd' is not a valid IANA zone name",
     BILLING_ERR_ZONE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"Mars/Olympus_Mons\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'Mars/Olympus_Mons': ", BILLING_ERR_ZONE},
    /* Host-dependent names (issue 9 item 16): refused though the host has the file. */
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"localtime\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'localtime' depends on the host's configuration",
     BILLING_ERR_ZONE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"posixrules\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'posixrules' depends on the host's configuration",
     BILLING_ERR_ZONE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"Factory\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0].time_zone: time zone 'Factory' depends on the host's configuration",
     BILLING_ERR_ZONE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\","
     "\"time_zone\":\"right/Asia/Shanghai\",\"tax_rate\":\"0\"}]}",
     "time zone 'right/Asia/Shanghai' depends on the host's configuration", BILLING_ERR_ZONE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":0}]}",
     "ac.json: accounts[0].tax_rate: must be a string, not a number", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"USD\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0]: ", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"tz\":\"UTC\",\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0]: unknown field 'tz'", BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","
     "\"resource\":\"i\",\"plan\":\"p\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":0}]}",
     "ac.json: subscriptions[0].terms: 0 is outside 1..1200", BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","
     "\"resource\":\"i\",\"plan\":\"p\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":\"1\"}]}",
     "ac.json: subscriptions[0].terms: must be an integer, not a string", BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","
     "\"resource\":\"i\",\"plan\":\"nope\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":1}]}",
     "ac.json: subscriptions[0]: ", BILLING_ERR_NOT_FOUND},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[\"cash\"]}]}",
     "ac.json: grants[0].applies_to: element 0 is not \"usage\" or \"subscription\"",
     BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"soon\","
     "\"applies_to\":[\"usage\"]}]}",
     "ac.json: grants[0].expires_at: timestamp 'soon'", BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[]}]}",
     "ac.json: grants[0].applies_to: must name at least one charge kind", BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"b\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[\"usage\"]}]}",
     "ac.json: grants[0]: ", BILLING_ERR_NOT_FOUND},
    /* A catalog boundary, the refused side (test_catalog_boundaries_accepted: the other). */
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-01-01T00:00:00Z\","
     "\"applies_to\":[\"usage\"]}]}",
     "ac.json: grants[0]: credit grant 'g': field 'expires_at' must be after 'granted_at' and both "
     "in range",
     BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "," ACCOUNT "]}", "ac.json: accounts[1]: ", BILLING_ERR_EXISTS},
    {"{}", "ac.json: accounts: missing", BILLING_ERR_INVALID},
    /* Streamed element by element: the same messages as the whole tree gives. */
    {"{\"accounts\":[" ACCOUNT ",]}", "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT " " ACCOUNT "]}", "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT "]} x", "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"description\":tru,\"accounts\":[" ACCOUNT "]}", "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",x}]}", "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT "],\"accounts\":[]}", "duplicate object key", BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT "],\"grant\":[]}", "ac.json: unknown field 'grant'",
     BILLING_ERR_INVALID},
    {"{\"accounts\":{}}", "ac.json: accounts: must be an array, not an object",
     BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT ",{\"id\":\"b\",\"id\":\"c\"}]}", "duplicate object key",
     BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT ",7]}", "ac.json: accounts[1]: must be an object, not a number",
     BILLING_ERR_INVALID},
    /* Flat elements (read without jansson) that the library refuses: its message, as on jansson's.
     */
    {"{\"accounts\":[{\"id\":\"a b\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0]: account id 'a b' must be 1 to 128 printable characters",
     BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"1.5\"}]}",
     "ac.json: accounts[0]: account 'a': field 'tax_rate': 1.5 is above 1", BILLING_ERR_RANGE},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[" GRANT("g", "10.001") "]}",
     "ac.json: grants[0]: field 'amount': '10.001' is not a non-negative decimal",
     BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[" GRANT("g", "1.00") "," GRANT("g", "1.00") "]}",
     "ac.json: grants[1]: credit grant 'g' already exists", BILLING_ERR_EXISTS},
    /* Flat in syntax, not in shape: jansson's path words it. */
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"1.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[\"usage\"],\"priority\":2000000}]}",
     "ac.json: grants[0].priority: 2000000 is outside -1000000..1000000", BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"1.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":[\"usage\"],\"priority\":1.5}]}",
     "ac.json: grants[0].priority: must be an integer, not a number", BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"1.00\",\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
     "\"applies_to\":\"usage\"}]}",
     "ac.json: grants[0].applies_to: must be an array, not a string", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\"}]}",
     "ac.json: accounts[0].tax_rate: missing", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"description\":null,\"book\":7}]}",
     "ac.json: accounts[0].book: must be a string, not a number", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\\u0020b\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[0]: account id 'a b' must be 1 to 128", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"id\":\"b\"}]}",
     "duplicate object key", BILLING_ERR_PARSE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\"},{\"id\":\"\xc3\xa9\",\"currency\":\"CNY\","
     "\"time_zone\":\"UTC\",\"tax_rate\":\"0\"}]}",
     "ac.json: accounts[1]: account id", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"x\":[\"y\"]}]}",
     "ac.json: accounts[0]: unknown field 'x'", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\"}  ,  {\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"tax_rate\":\"0\"}]}",
     "duplicate object key", BILLING_ERR_PARSE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\"]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"description\":01}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    /*
     * A refusal early and a syntax error later (found by fuzz_accounts): the
     * syntax error wins, as when jansson reads the whole file first.
     */
    {"{\"accounts\":[" TAX_106 "],\"subscriptions\":[{\"id\":\"s\",\"acci-1\",,\"plan\":\"p\"}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" TAX_106 ",{\"id\":\"b\",\"id\":\"c\"}]}", "duplicate object key",
     BILLING_ERR_PARSE},
    {"{\"accounts\":[" TAX_106 "],\"grants\":[{\"id\":\"\xff\"}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" TAX_106 "],\"grants\":[{\"id\":\"\\ud800\"}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" TAX_106 "],\"grants\":[{\"id\":1e999}]}", "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" TAX_106 "],\"grants\":[{\"id\":99999999999999999999}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" TAX_106 "],\"grants\":[{\"id\":\"a\\u0000\"}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"description\":1,\"accounts\":[" ACCOUNT "],\"description\":2}", "duplicate object key",
     BILLING_ERR_PARSE},
    /* Found by fuzz_accounts in the check itself: a number with a leading zero. */
    {"{\"accounts\":[" TAX_106 "],\"grants\":[{\"id\":\"g\",\"ay\":03}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" TAX_106 "],\"grants\":[{\"id\":\"g\",\"ay\":-00}]}",
     "ac.json:1:", BILLING_ERR_PARSE},
    /* Found by fuzz_accounts: a comma after the last top-level member was accepted. */
    {"{\"accounts\":[" ACCOUNT "],}", "ac.json:1:", BILLING_ERR_PARSE},
    {"{\"accounts\":[" ACCOUNT "] , }", "ac.json:1:", BILLING_ERR_PARSE},
    /*
     * Issue 23 item 11: catalog instants are whole microseconds, as the
     * store keeps them; `billing rate` billed what `billing load` refused.
     * A grant (the element-by-element path) and a subscription.
     */
    {"{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":\"a\",\"amount\":"
     "\"1.00\",\"granted_at\":\"2026-01-01T00:00:00.0000001Z\","
     "\"expires_at\":\"2026-02-01T00:00:00Z\",\"applies_to\":[\"usage\"]}]}",
     "ac.json: grants[0].granted_at: '2026-01-01T00:00:00.0000001Z' is finer than a microsecond",
     BILLING_ERR_INVALID},
    {"{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","
     "\"resource\":\"i\",\"plan\":\"p\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":1,"
     "\"cancelled_at\":\"2026-11-10T03:44:28.58978158Z\"}]}",
     "ac.json: subscriptions[0].cancelled_at: '2026-11-10T03:44:28.58978158Z' is finer than a "
     "microsecond: catalog instants are whole microseconds",
     BILLING_ERR_INVALID},
    /* Parties (issue 27): the bounds of migrations 0005 and 0014. */
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"language\":\"fr\"}]}",
     "ac.json: accounts[0].language: 'fr' is not \"en\" or \"zh-Hans\"", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"email\":\"a b@example.com\"}]}",
     "ac.json: accounts[0].email: 'a b@example.com' is not an address", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"email\":\"nobody.example.com\"}]}",
     "ac.json: accounts[0].email: 'nobody.example.com' is not an address", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"email\":\"a@b@c\"}]}",
     "ac.json: accounts[0].email: 'a@b@c' is not an address", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"name\":\"\"}]}",
     "ac.json: accounts[0].name: must be 1 to 256 bytes", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"name\":7}]}",
     "ac.json: accounts[0].name: must be a string, not a number", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"billing_address\":\"\"}]}",
     "ac.json: accounts[0].billing_address: must not be empty", BILLING_ERR_INVALID},
    {"{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
     "\"tax_rate\":\"0\",\"tax_id\":"
     "\"\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e"
     "\u7a0e"
     "\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e"
     "\u7a0e"
     "\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e"
     "\u7a0e"
     "\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e\u7a0e"
     "\u7a0e"
     "\u7a0e\"}]}",
     "ac.json: accounts[0].tax_id: 65 characters, more than the 64 allowed", BILLING_ERR_INVALID},
};

START_TEST(test_bad_accounts)
{
    const bad_case *c = &bad_accounts[_i];
    char err[ERR] = "";

    ck_assert_int_eq(accounts(c->text, err), c->status);
    ck_assert_msg(strstr(err, c->message) != NULL, "case %d: '%s' lacks '%s'", _i, err, c->message);
}
END_TEST

/*
 * Catalog boundary, the accepted side: a grant whose window is 1 us long,
 * the shortest a catalog instant allows (granted_at == expires_at is
 * refused, in bad_accounts; catalog instants are whole microseconds). Subscriptions
 * back to back: check_subscriptions (this price book has no fees).
 */
START_TEST(test_catalog_boundaries_accepted)
{
    char err[ERR] = "";

    ck_assert_msg(accounts("{\"accounts\":[" ACCOUNT "],\"grants\":[{\"id\":\"g\",\"account\":"
                           "\"a\",\"amount\":\"10.00\",\"granted_at\":\"2026-01-01T00:00:00Z\","
                           "\"expires_at\":\"2026-01-01T00:00:00.000001Z\",\"applies_to\":["
                           "\"usage\"]}]}",
                           err) == BILLING_OK,
                  "%s", err);
}
END_TEST

/*
 * The element-by-element reader and the whole-tree parser agree: the same
 * text with its first "accounts" key spelled with an escape ("acc\u006funts",
 * the same key to JSON) goes to the whole-tree parser; status and message
 * must be the same, for every bad case above.
 */
START_TEST(test_streaming_matches_tree)
{
    const bad_case *c = &bad_accounts[_i];
    const char *key = strstr(c->text, "\"accounts\"");
    char err_stream[ERR] = "";
    char err_tree[ERR] = "";
    char tree_text[2048];
    billing_status st_stream;
    billing_status st_tree;

    if (key == NULL)
        return;
    ck_assert_uint_lt(strlen(c->text) + 8, sizeof(tree_text));
    snprintf(tree_text, sizeof(tree_text), "%.*s\"acc\\u006funts\"%s", (int)(key - c->text),
             c->text, key + strlen("\"accounts\""));
    st_stream = accounts(c->text, err_stream);
    st_tree = accounts(tree_text, err_tree);
    ck_assert_int_eq(st_stream, st_tree);
    /* Syntax errors name a column, which the escape moves; the rest must match. */
    if (st_tree != BILLING_ERR_PARSE)
        ck_assert_str_eq(err_stream, err_tree);
}
END_TEST

/*
 * Accounts files of valid shapes, read flat (in place), with jansson, or
 * mixed element by element: accounts in both orders with grants, escapes,
 * non-ASCII and null descriptions, integer priorities, two kinds, tax rates
 * and amounts given as different texts of one value or as one text shared.
 */
static const char *const good_accounts[] = {
    "{\"grants\":[" GRANT("g1", "1.00") "," GRANT("g2", "1.0") "," GRANT("g3", "1.00") "," GRANT(
        "g4",
        "0.5") "],\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":\"Asia/Shanghai\","
               "\"tax_rate\":\"0.06\"},{\"id\":\"b\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
               "\"tax_rate\":\"0.060\"},{\"id\":\"c\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
               "\"tax_rate\":\"0.06\"}]}",
    "{ \"description\" : \"m\\u00e9lange\" ,\n \"accounts\" : [ { \"tax_rate\" : \"0.1\" ,"
    " \"time_zone\":\"UTC\", \"currency\":\"CNY\",\"id\":\"a\",\"description\":[\"x\",\"y\"]}"
    " ,\r\n{\"id\":\"b\\u0062\",\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":\"0\","
    "\"description\":null},{\"id\":\"c\",\"currency\":\"CNY\",\"time_zone\":\"UTC\","
    "\"tax_rate\":\"0.1\",\"description\":\"\xc3\xa9t\xc3\xa9\"} ],\"grants\":[{\"id\":\"g\","
    "\"account\":\"a\",\"amount\":\"3.50\",\"granted_at\":\"2026-01-01T00:00:00+08:00\","
    "\"expires_at\":\"2026-03-01T00:00:00Z\",\"applies_to\":[\"usage\",\"subscription\"],"
    "\"priority\":-3},{\"id\":\"h\",\"account\":\"a\",\"amount\":\"2\",\"priority\":0,"
    "\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
    "\"applies_to\":[ \"usage\" ]},{\"id\":\"i\",\"account\":\"bb\",\"amount\":\"1.25\","
    "\"granted_at\":\"2026-01-01T00:00:00Z\",\"expires_at\":\"2026-02-01T00:00:00Z\","
    "\"applies_to\":[\"us\\u0061ge\"],\"priority\":12}],\"subscriptions\":[]}",
    /* Parties (issue 27): none of them rates; ASCII ones take the flat path. */
    "{\"accounts\":[{\"id\":\"a\",\"name\":\"Lab A\",\"email\":\"a@lab.example\","
    "\"billing_address\":\"1 Road\\nCity\",\"tax_id\":\"T-1\",\"language\":\"en\","
    "\"currency\":\"CNY\",\"time_zone\":\"UTC\",\"tax_rate\":\"0.06\"},{\"id\":\"b\","
    "\"name\":\"\xe7\x8e\x8b\xe5\xb0\x8f\xe6\x98\x8e\",\"language\":\"zh-Hans\",\"currency\":"
    "\"CNY\","
    "\"time_zone\":\"Asia/Shanghai\",\"tax_rate\":\"0\"}]}",
};

/* Rate an 8-GPU hour on the 5th of January for @account. */
static void rate_one(billing_rater *r, billing_event *ev, const char *account)
{
    billing_time_t start = INT64_C(1767571200) * BILLING_NS_PER_SEC; /* 2026-01-05T00:00Z */
    char err[ERR] = "";

    billing_event_reset(ev);
    ck_assert_int_eq(billing_event_set_id(ev, account), BILLING_OK);
    ck_assert_int_eq(billing_event_set_account(ev, account), BILLING_OK);
    ck_assert_int_eq(billing_event_set_resource(ev, "i-1"), BILLING_OK);
    ck_assert_int_eq(billing_event_set_meter(ev, BILLING_METER_GPU), BILLING_OK);
    billing_event_set_interval(ev, start, start + 3600 * BILLING_NS_PER_SEC);
    ck_assert_int_eq(billing_event_set_quantity(ev, "8", err, ERR), BILLING_OK);
    ck_assert_int_eq(billing_event_set_model(ev, "RTX4090"), BILLING_OK);
    ck_assert_int_eq(billing_event_set_region(ev, "cn-east-1"), BILLING_OK);
    ck_assert_msg(billing_rater_add(r, ev, err, ERR) == BILLING_OK, "%s", err);
}

/* Each account's January invoice after one event: tax rate, credits, total. */
static void describe_account(billing_rater *r, const char *account, char *out, size_t size)
{
    billing_invoice *inv = NULL;
    char err[ERR] = "";
    size_t used;
    size_t i;

    ck_assert_msg(billing_rater_invoice(r, account, 2026, 1, &inv, err, ERR) == BILLING_OK, "%s",
                  err);
    used = strlen(out);
    snprintf(out + used, size - used, "%s tax %s total %s credits", account,
             billing_invoice_tax_rate(inv), billing_invoice_total(inv));
    for (i = 0; i < billing_invoice_credit_count(inv); i++) {
        used = strlen(out);
        snprintf(out + used, size - used, " %s=%s/%s", billing_invoice_credit_grant(inv, i),
                 billing_invoice_credit_amount(inv, i), billing_invoice_credit_remaining(inv, i));
    }
    used = strlen(out);
    snprintf(out + used, size - used, "\n");
    billing_invoice_destroy(inv);
}

/* The catalog @text gives, described account by account into @out. */
static void describe_accounts(const char *text, char *out, size_t size)
{
    billing_catalog *cat = billing_catalog_new();
    billing_config_zones *zones = billing_config_zones_new();
    billing_event *ev = billing_event_new();
    billing_rater *r = NULL;
    char err[ERR] = "";
    size_t i;

    out[0] = '\0';
    ck_assert_int_eq(
        billing_config_pricebook_parse(cat, PRICEBOOK, strlen(PRICEBOOK), "pb.json", err, ERR), 0);
    ck_assert_msg(billing_config_accounts_parse(cat, zones, text, strlen(text), "ac.json", err,
                                                ERR) == BILLING_OK,
                  "%s", err);
    ck_assert_msg(billing_rater_new(cat, &r, err, ERR) == BILLING_OK, "%s", err);
    for (i = 0; i < billing_rater_account_count(r); i++)
        rate_one(r, ev, billing_rater_account_id(r, i));
    for (i = 0; i < billing_rater_account_count(r); i++)
        describe_account(r, billing_rater_account_id(r, i), out, size);
    billing_rater_destroy(r);
    billing_event_destroy(ev);
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
}

/*
 * The flat reader and jansson build the same catalog: the same text with
 * its "accounts" key escaped goes to the whole-tree parser, and every
 * account's invoice must be the same (the tax rates and amounts given as
 * several texts of one value, or shared, included).
 */
START_TEST(test_flat_matches_tree)
{
    const char *text = good_accounts[_i];
    const char *key = strstr(text, "\"accounts\"");
    char tree_text[4096];
    char flat_desc[4096];
    char tree_desc[4096];

    ck_assert_ptr_nonnull(key);
    ck_assert_uint_lt(strlen(text) + 8, sizeof(tree_text));
    snprintf(tree_text, sizeof(tree_text), "%.*s\"acc\\u006funts\"%s", (int)(key - text), text,
             key + strlen("\"accounts\""));
    describe_accounts(text, flat_desc, sizeof(flat_desc));
    describe_accounts(tree_text, tree_desc, sizeof(tree_desc));
    ck_assert_str_eq(flat_desc, tree_desc);
    ck_assert_uint_gt(strlen(flat_desc), 0);
}
END_TEST

/* Every member `billing load` reads of an element, as text, in @out. */
typedef struct elem_desc {
    char *out;
    size_t size;
    size_t calls;
    size_t stop_at; /* stop the parse at this call (from 1); 0: never */
} elem_desc;

static const char *const elem_strings[] = {
    "id",     "currency", "time_zone",  "tax_rate",  "name", "email", "billing_address",
    "tax_id", "language", "account",    "resource",  "plan", "start", "cancelled_at",
    "amount", "book",     "granted_at", "expires_at"};

static void describe_member(elem_desc *d, const char *key, const char *value)
{
    size_t n = strlen(d->out);

    if (value != NULL)
        snprintf(d->out + n, d->size - n, " %s=%s", key, value);
}

/* A billing_config_each_fn: the element's members through the getters. */
static int describe_element(void *arg, const char *array, size_t index,
                            const billing_config_element *e)
{
    elem_desc *d = arg;
    size_t n = strlen(d->out);
    const char *item;
    size_t i;

    snprintf(d->out + n, d->size - n, "%s[%zu] size=%zu", array, index,
             billing_config_element_size(e));
    for (i = 0; i < sizeof(elem_strings) / sizeof(elem_strings[0]); i++)
        describe_member(d, elem_strings[i], billing_config_element_string(e, elem_strings[i]));
    n = strlen(d->out);
    snprintf(d->out + n, d->size - n,
             " terms=%lld priority=%lld applies_to=", billing_config_element_integer(e, "terms"),
             billing_config_element_integer(e, "priority"));
    for (i = 0;; i++) {
        item = billing_config_element_item(e, "applies_to", i);
        if (item == NULL)
            break;
        n = strlen(d->out);
        snprintf(d->out + n, d->size - n, "%s,", item);
    }
    n = strlen(d->out);
    snprintf(d->out + n, d->size - n, "\n");
    return ++d->calls == d->stop_at ? -1 : 0;
}

/* The same from jansson's tree of the element's text (a billing_config_element_fn). */
static int describe_split(void *arg, const char *array, size_t index, const char *text, size_t len)
{
    elem_desc *d = arg;
    json_error_t jerr;
    json_t *item = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    json_t *kinds;
    json_t *v;
    size_t n = strlen(d->out);
    size_t i;

    ck_assert_msg(item != NULL, "%s", jerr.text);
    snprintf(d->out + n, d->size - n, "%s[%zu] size=%zu", array, index, len);
    for (i = 0; i < sizeof(elem_strings) / sizeof(elem_strings[0]); i++)
        describe_member(d, elem_strings[i],
                        json_string_value(json_object_get(item, elem_strings[i])));
    n = strlen(d->out);
    snprintf(d->out + n, d->size - n, " terms=%lld priority=%lld applies_to=",
             (long long)json_integer_value(json_object_get(item, "terms")),
             (long long)json_integer_value(json_object_get(item, "priority")));
    kinds = json_object_get(item, "applies_to");
    json_array_foreach(kinds, i, v)
    {
        n = strlen(d->out);
        snprintf(d->out + n, d->size - n, "%s,", json_string_value(v));
    }
    n = strlen(d->out);
    snprintf(d->out + n, d->size - n, "\n");
    json_decref(item);
    return 0;
}

/* PRICEBOOK with a fee for its plan, so that subscriptions to it are accepted. */
#define PRICEBOOK_FEE                                                                          \
    "{\"currency\":\"CNY\",\"plans\":[{\"id\":\"p\",\"period\":\"day\",\"model\":\"RTX4090\"," \
    "\"region\":\"cn-east-1\"}],\"versions\":[{\"id\":\"v1\",\"effective_from\":"              \
    "\"2026-01-01T00:00:00Z\"," RATES ",\"plan_fees\":[{\"plan\":\"p\",\"fee\":\"1.00\"}]}]}"

/* billing_config_accounts_parse_each on @text after PRICEBOOK_FEE, into @d. */
static billing_status parse_each(const char *text, elem_desc *d, char *err)
{
    billing_catalog *cat = billing_catalog_new();
    billing_config_zones *zones = billing_config_zones_new();
    billing_status rc;

    ck_assert_int_eq(billing_config_pricebook_parse(cat, PRICEBOOK_FEE, strlen(PRICEBOOK_FEE),
                                                    "pb.json", err, ERR),
                     0);
    rc = billing_config_accounts_parse_each(cat, zones, text, strlen(text), "ac.json",
                                            describe_element, d, err, ERR);
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
    return rc;
}

/* A subscription (always jansson's) beside flat accounts and grants. */
#define WITH_SUBSCRIPTION                                                                       \
    "{\"accounts\":[" ACCOUNT "],\"subscriptions\":[{\"id\":\"s\",\"account\":\"a\","           \
    "\"resource\":\"i\\u002d1\",\"plan\":\"p\",\"start\":\"2026-01-01T00:00:00Z\",\"terms\":3," \
    "\"cancelled_at\":\"2026-01-02T00:00:00Z\"}],\"grants\":[" GRANT("g", "1.00") "]}"

/*
 * `billing load` copies the rows from the check's own parse: every
 * element, in the order, of the size and with the members that the split
 * hands over and jansson reads from it, whether the element was read
 * flat, by jansson, or the top level by the whole-tree parser (its key
 * escaped; then the size is that of the split's compact text).
 */
START_TEST(test_parse_each_matches_split)
{
    const char *text = _i < (int)(sizeof(good_accounts) / sizeof(good_accounts[0]))
                           ? good_accounts[_i]
                           : WITH_SUBSCRIPTION;
    const char *key = strstr(text, "\"accounts\"");
    char tree_text[4096];
    char split[8192] = "";
    char split_tree[8192] = "";
    char flat[8192] = "";
    char tree[8192] = "";
    char err[ERR] = "";
    elem_desc d = {split, sizeof(split), 0, 0};

    snprintf(tree_text, sizeof(tree_text), "%.*s\"acc\\u006funts\"%s", (int)(key - text), text,
             key + strlen("\"accounts\""));
    ck_assert_int_eq(
        billing_config_accounts_split(text, strlen(text), "ac.json", describe_split, &d, err, ERR),
        BILLING_OK);
    d.out = split_tree;
    ck_assert_int_eq(billing_config_accounts_split(tree_text, strlen(tree_text), "ac.json",
                                                   describe_split, &d, err, ERR),
                     BILLING_OK);
    d.out = flat;
    ck_assert_msg(parse_each(text, &d, err) == BILLING_OK, "%s", err);
    ck_assert_str_eq(flat, split);
    d.out = tree;
    ck_assert_msg(parse_each(tree_text, &d, err) == BILLING_OK, "%s", err);
    ck_assert_str_eq(tree, split_tree);
    ck_assert_ptr_nonnull(strstr(split, "accounts[0] size="));
}
END_TEST

/* The callback stops the parse: BILLING_ERR_INVALID, no element told after it. */
START_TEST(test_parse_each_stops)
{
    char out[4096] = "";
    char err[ERR] = "";
    elem_desc d = {out, sizeof(out), 0, 2};

    ck_assert_int_eq(parse_each(WITH_SUBSCRIPTION, &d, err), BILLING_ERR_INVALID);
    ck_assert_uint_eq(d.calls, 2);
    ck_assert_ptr_null(strstr(out, "grants[0]"));
    /* A refused element is never told: the one before it is. */
    out[0] = '\0';
    d.calls = 0;
    d.stop_at = 0;
    ck_assert_int_ne(parse_each("{\"accounts\":[" ACCOUNT "," TAX_106 "]}", &d, err), BILLING_OK);
    ck_assert_uint_eq(d.calls, 1);
}
END_TEST

/*
 * Tax rates and amounts are interned by their text: one value given as
 * "1.00" and "1.0", or one text shared by several grants or accounts,
 * gives each its own exact figures. By hand, for good_accounts[0]: 8 GPU-h
 * at 0.60 is 4.80; a's grants pay 1.00 + 1.00 + 1.00 + 0.50 = 3.50, tax
 * 6% of 1.30 is 0.078 -> 0.08, total 1.38; b and c: 4.80 + 0.288 -> 5.09.
 */
START_TEST(test_interned_values_per_account)
{
    char desc[4096];

    describe_accounts(good_accounts[0], desc, sizeof(desc));
    ck_assert_str_eq(desc, "a tax 0.06 total 1.38 credits g1=1.00/0.00 g2=1.00/0.00 "
                           "g3=1.00/0.00 g4=0.50/0.00\n"
                           "b tax 0.06 total 5.09 credits\n"
                           "c tax 0.06 total 5.09 credits\n");
}
END_TEST

/* Twelve accounts a0..a11 into @text, the last in zone @last_zone, and @grants grants of a0. */
static void numbered_accounts(char *text, size_t size, const char *last_zone, int grants)
{
    size_t used;
    int i;

    snprintf(text, size, "{\"accounts\":[");
    for (i = 0; i < 12; i++) {
        used = strlen(text);
        snprintf(text + used, size - used,
                 "%s{\"id\":\"a%d\",\"currency\":\"CNY\",\"time_zone\":\"%s\","
                 "\"tax_rate\":\"0\"}",
                 i ? "," : "", i, i == 11 ? last_zone : "UTC");
    }
    used = strlen(text);
    snprintf(text + used, size - used, "],\"grants\":[");
    for (i = 0; i < grants; i++) {
        used = strlen(text);
        snprintf(text + used, size - used,
                 "%s{\"id\":\"g%d\",\"account\":\"a0\",\"amount\":\"%s\","
                 "\"granted_at\":\"2026-01-01T00:00:00Z\","
                 "\"expires_at\":\"2026-02-01T00:00:00Z\",\"applies_to\":[\"usage\"]}",
                 i ? "," : "", i, i == grants - 1 ? "0" : "1");
    }
    used = strlen(text);
    snprintf(text + used, size - used, "]}");
}

/* Element paths past one digit: "accounts[11]", "grants[10]" (built without printf). */
START_TEST(test_element_path_numbers)
{
    char text[8192];
    char err[ERR] = "";

    numbered_accounts(text, sizeof(text), "Mars/Base", 0);
    ck_assert_int_eq(accounts(text, err), BILLING_ERR_ZONE);
    ck_assert_msg(strstr(err, "ac.json: accounts[11].time_zone: time zone 'Mars/Base'") != NULL,
                  "%s", err);
    numbered_accounts(text, sizeof(text), "UTC", 11);
    ck_assert_int_eq(accounts(text, err), BILLING_ERR_INVALID);
    ck_assert_str_eq(err,
                     "ac.json: grants[10]: credit grant 'g10': field 'amount' must be positive");
}
END_TEST

START_TEST(test_zone_names)
{
    static const char *const good[] = {"Asia/Shanghai", "UTC",
                                       "Etc/GMT+8",     "America/Argentina/Buenos_Aires",
                                       "posixy/x",      "rightmost"};
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
        ck_assert_msg(billing_config_zone_name_valid(good[i]), "%s", good[i]);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!billing_config_zone_name_valid(bad[i]), "%s", bad[i]);
    ck_assert(!billing_config_zone_name_valid(NULL));
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
    billing_config_zones *set = billing_config_zones_new();
    const billing_zone *z;
    size_t i;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/Asia/Shanghai",
             getenv("TZDIR") != NULL && getenv("TZDIR")[0] != '\0' ? getenv("TZDIR")
                                                                   : "/usr/share/zoneinfo");
    ck_assert_msg(bc_read_file(path, BILLING_CONFIG_ZONE_FILE_MAX, &data, &len, err, sizeof(err)) ==
                      0,
                  "%s", err);
    setenv("TZDIR", dir, 1);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(data, 1, len, f), len);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(billing_config_zones_get(set, names[i], &z, err, sizeof(err)),
                         BILLING_ERR_ZONE);
        ck_assert_ptr_null(z);
        ck_assert_msg(strstr(err, "depends on the host's configuration") != NULL, "%s", err);
        unlink(path);
    }
    /* The same bytes under an ordinary name load from $TZDIR. */
    snprintf(path, sizeof(path), "%s/Test_Zone", dir);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(billing_config_zones_get(set, "Test_Zone", &z, err, sizeof(err)) == BILLING_OK,
                  "%s", err);
    unsetenv("TZDIR");
    unlink(path);
    rmdir(dir);
    free(data);
    billing_config_zones_destroy(set);
}
END_TEST

/* $TZDIR is honoured, and a bad or huge zone file is reported, not trusted. */
START_TEST(test_zone_files)
{
    char dir[] = "/tmp/check_zones.XXXXXX";
    char path[256];
    char err[ERR];
    const billing_zone *z;
    const billing_zone *z2;
    billing_config_zones *set = billing_config_zones_new();
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
    ck_assert_int_eq(truncate(path, BILLING_CONFIG_ZONE_FILE_MAX + 1), 0);
    setenv("TZDIR", dir, 1);
    ck_assert_int_eq(billing_config_zones_get(set, "Bad", &z, err, sizeof(err)), BILLING_ERR_ZONE);
    ck_assert_ptr_null(z);
    ck_assert_msg(strstr(err, "time zone 'Bad': ") != NULL, "%s", err);
    ck_assert_int_eq(billing_config_zones_get(set, "Huge", &z, err, sizeof(err)), BILLING_ERR_ZONE);
    ck_assert_ptr_null(z);
    ck_assert_msg(strstr(err, "larger than 1048576 bytes") != NULL, "%s", err);
    ck_assert_int_eq(billing_config_zones_get(set, "Missing", &z, err, sizeof(err)),
                     BILLING_ERR_ZONE);
    ck_assert_ptr_null(z);
    ck_assert_msg(strstr(err, "No such file or directory") != NULL, "%s", err);
    ck_assert_int_eq(billing_config_zones_get(set, "UTC", &z, err, sizeof(err)), BILLING_OK);
    ck_assert_ptr_nonnull(z);
    ck_assert_int_eq(billing_config_zones_get(set, "UTC", &z2, err, sizeof(err)), BILLING_OK);
    ck_assert_ptr_eq(z2, z);
    unsetenv("TZDIR");
    ck_assert_int_eq(billing_config_zones_get(set, "Asia/Shanghai", &z, err, sizeof(err)),
                     BILLING_OK);
    billing_config_zones_destroy(set);
    snprintf(path, sizeof(path), "%s/Bad", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/Huge", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

/*
 * billing_config_accounts_load_book: one price book's accounts, with their grants (and
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
    billing_config_zones *zones = billing_config_zones_new();
    int fd = mkstemp(path);
    size_t i;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    for (i = 0; i < 3; i++) {
        cat = billing_catalog_new();
        ck_assert_int_eq(
            billing_config_pricebook_parse(cat, PRICEBOOK, strlen(PRICEBOOK), "pb.json", err, ERR),
            0);
        /* b's grant must land only where b is, or the library refuses it (unknown account). */
        ck_assert_msg(billing_config_accounts_load_book(cat, zones, path, books[i], NULL, NULL, err,
                                                        ERR) == 0,
                      "%s", err);
        billing_rater_new(cat, &r, err, sizeof(err));
        ck_assert_msg(r != NULL, "%s", err);
        ck_assert_uint_eq(billing_rater_account_count(r), want[i]);
        if (i == 0)
            ck_assert_str_eq(billing_rater_account_id(r, 0), "a");
        billing_rater_destroy(r);
        billing_catalog_destroy(cat);
    }
    unlink(path);
    billing_config_zones_destroy(zones);
    ck_assert_int_ne(accounts("{\"accounts\":[{\"id\":\"a\",\"currency\":\"CNY\",\"time_zone\":"
                              "\"UTC\",\"tax_rate\":\"0\",\"book\":1}]}",
                              err),
                     0);
    ck_assert_msg(strstr(err, "accounts[0].book: must be a string") != NULL, "%s", err);
}
END_TEST

/* @n bytes of @data into file @name of directory @dir. */
static void put_file(const char *dir, const char *name, const void *data, size_t n)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/*
 * The issuer's logo is a PNG file named relative to the price book (issue
 * 27): a PNG beside the book loads; a file without the PNG signature and
 * one over 1 MiB are refused naming the field and the file.
 */
START_TEST(test_issuer_logo)
{
    static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    static const char *const logos[] = {"logo.png", "text.png", "big.png"};
    static const char *const want[] = {NULL, "text.png: not a PNG file", "big.png: larger than"};
    char dir[] = "/tmp/check_logo.XXXXXX";
    char book[512];
    char text[1024];
    char err[ERR] = "";
    char *big = calloc(1, BC_LOGO_MAX + 1);
    billing_catalog *cat;
    billing_status st;
    size_t i;

    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    memcpy(big, png, sizeof(png) - 1);
    put_file(dir, "logo.png", png, sizeof(png) - 1);
    put_file(dir, "text.png", "GIF89a not a png", 16);
    put_file(dir, "big.png", big, BC_LOGO_MAX + 1);
    snprintf(book, sizeof(book), "%s/pb.json", dir);
    for (i = 0; i < 3; i++) {
        snprintf(
            text, sizeof(text),
            "{\"currency\":\"CNY\",\"issuer\":{\"legal_name\":\"\xe7\xa4\xba\xe4\xbe\x8b Co.\","
            "\"logo\":\"%s\",\"payment_terms_days\":0},\"versions\":[" PB_VERSION "]}",
            logos[i]);
        put_file(dir, "pb.json", text, strlen(text));
        cat = billing_catalog_new();
        st = billing_config_pricebook_load(cat, book, err, ERR);
        billing_catalog_destroy(cat);
        if (want[i] == NULL) {
            ck_assert_msg(st == BILLING_OK, "%s", err);
        } else {
            ck_assert_int_eq(st, BILLING_ERR_INVALID);
            ck_assert_msg(strstr(err, "pb.json: issuer.logo: ") != NULL &&
                              strstr(err, want[i]) != NULL,
                          "'%s' lacks '%s'", err, want[i]);
        }
    }
    for (i = 0; i < 3; i++) {
        snprintf(text, sizeof(text), "%s/%s", dir, logos[i]);
        unlink(text);
    }
    unlink(book);
    rmdir(dir);
    free(big);
}
END_TEST

static Suite *configfile_suite(void)
{
    Suite *s = suite_create("configfile");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_example_loads);
    tcase_add_test(tc, test_catalog_load);
    tcase_add_test(tc, test_accounts_any_order);
    tcase_add_loop_test(tc, test_streaming_matches_tree, 0,
                        sizeof(bad_accounts) / sizeof(bad_accounts[0]));
    tcase_add_loop_test(tc, test_bad_pricebook, 0,
                        (int)(sizeof(bad_pricebooks) / sizeof(bad_pricebooks[0])));
    tcase_add_loop_test(tc, test_bad_accounts, 0,
                        (int)(sizeof(bad_accounts) / sizeof(bad_accounts[0])));
    tcase_add_test(tc, test_catalog_boundaries_accepted);
    tcase_add_test(tc, test_zone_names);
    tcase_add_loop_test(tc, test_flat_matches_tree, 0,
                        (int)(sizeof(good_accounts) / sizeof(good_accounts[0])));
    tcase_add_loop_test(tc, test_parse_each_matches_split, 0,
                        (int)(sizeof(good_accounts) / sizeof(good_accounts[0])) + 1);
    tcase_add_test(tc, test_parse_each_stops);
    tcase_add_test(tc, test_element_path_numbers);
    tcase_add_test(tc, test_interned_values_per_account);
    tcase_add_test(tc, test_accounts_of_one_book);
    tcase_add_test(tc, test_zone_files);
    tcase_add_test(tc, test_zone_host_dependent_refused);
    tcase_add_test(tc, test_issuer_logo);
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
