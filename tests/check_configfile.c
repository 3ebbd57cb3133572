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
#include "billing_config.h"
#include "util.h"

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
        ck_assert_int_eq(billing_config_pricebook_parse(cat, PRICEBOOK, strlen(PRICEBOOK), "pb.json", err, ERR),
                         0);
        /* b's grant must land only where b is, or the library refuses it (unknown account). */
        ck_assert_msg(billing_config_accounts_load_book(cat, zones, path, books[i], NULL, NULL, err, ERR) == 0,
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
