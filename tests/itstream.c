/*
 * itstream.c - the shared stream of the pipeline suites. See itstream.h.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "eventjson.h"
#include "ingest.h"
#include "itestdb.h"
#include "itstream.h"
#include "load.h"
#include "testutil.h"

#define LINE_MAX_LEN 1024
#define MSG 512
#define BIG_RECORD (70u * 1024u)

/* Two traffic events split 1 h / 2 h across the local month end: thirds of a byte. */
#define SPLIT(n)                                                                                 \
    "{\"id\":\"split-" n "\",\"account\":\"lab-a\",\"resource\":\"i-a1\",\"meter\":\"traffic\"," \
    "\"start\":\"2026-01-31T23:00:00+08:00\",\"end\":\"2026-02-01T02:00:00+08:00\","             \
    "\"quantity\":\"1\",\"model\":\"\",\"region\":\"cn-east-1\"}"

static const char *const synthetic_accounts[] = {"lab-a", "student-b", "team-c", "new-d"};

void its_example_path(char *out, size_t size, const char *file)
{
    const char *d = getenv("top_srcdir");

    snprintf(out, size, "%s/examples/gpu-cloud/%s", d != NULL && d[0] != '\0' ? d : "..", file);
}

static void push(its_stream *s, const char *data, size_t len, const char *key)
{
    ck_assert_uint_lt(s->n, ITS_MAX_RECORDS);
    s->rec[s->n] = malloc(len + 1);
    ck_assert_ptr_nonnull(s->rec[s->n]);
    memcpy(s->rec[s->n], data, len);
    s->rec[s->n][len] = '\0';
    s->len[s->n] = len;
    s->key[s->n++] = key;
}

/* @line with the first @what replaced by @with. */
static void push_edited(its_stream *s, const char *line, const char *what, const char *with,
                        const char *key)
{
    char out[LINE_MAX_LEN * 2];
    const char *at = strstr(line, what);

    ck_assert_ptr_nonnull(at);
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - line), line, with, at + strlen(what));
    push(s, out, strlen(out), key);
}

/* The account of a JSON line, as a static key string. */
static const char *account_key(const char *line)
{
    size_t i;

    for (i = 0; i < sizeof(synthetic_accounts) / sizeof(synthetic_accounts[0]); i++) {
        char pat[64];

        snprintf(pat, sizeof(pat), "\"account\":\"%s\"", synthetic_accounts[i]);
        if (strstr(line, pat) != NULL)
            return synthetic_accounts[i];
    }
    return "other";
}

static void push_example(its_stream *s)
{
    char path[1024];
    char line[LINE_MAX_LEN];
    FILE *f;
    size_t len;
    int i = 0;

    its_example_path(path, sizeof(path), "events.jsonl");
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        len = strcspn(line, "\n");
        line[len] = '\0';
        push(s, line, len, account_key(line));
        if (i % 7 == 3)
            push(s, line, len, account_key(line)); /* replay */
        if (i % 11 == 5)
            push_edited(s, line, "\"quantity\":\"", "\"quantity\":\"1", account_key(line));
        if (i % 13 == 6)
            push(s,
                 "\x0a\x03"
                 "abc\xff\xff garbage",
                 16, "garbage");
        if (i % 17 == 8)
            push_edited(s, line, "\"account\":\"", "\"account\":\"ghost-", "ghost");
        i++;
    }
    fclose(f);
}

/* @n GPU events of a minute each across the example's accounts in January. */
static void push_synthetic(its_stream *s, size_t n)
{
    char line[LINE_MAX_LEN];
    char start[40];
    char end[40];
    const char *acct;
    billing_time_t t;
    size_t i;

    for (i = 0; i < n; i++) {
        acct = synthetic_accounts[i % 4];
        /* From 2026-01-10T00:00:00Z, a minute apart per account. */
        t = (INT64_C(1768003200) + (int64_t)(i / 4) * 60) * BILLING_NS_PER_SEC;
        billing_time_format(t, start, sizeof(start));
        billing_time_format(t + 60 * BILLING_NS_PER_SEC, end, sizeof(end));
        snprintf(line, sizeof(line),
                 "{\"id\":\"syn-%zu\",\"account\":\"%s\",\"resource\":\"r-%zu\","
                 "\"meter\":\"gpu\",\"start\":\"%s\",\"end\":\"%s\",\"quantity\":\"%zu\","
                 "\"model\":\"RTX4090\",\"region\":\"cn-east-1\"}",
                 i, acct, i % 16, start, end, 1 + i % 8);
        push(s, line, strlen(line), acct);
        if (i % 50 == 7)
            push(s, line, strlen(line), acct); /* replay */
    }
}

void its_ghost_accounts(const char *path)
{
    char src[1024];
    json_error_t jerr;
    json_t *root;
    json_t *list;
    size_t i;

    its_example_path(src, sizeof(src), "accounts.json");
    root = json_load_file(src, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", src, jerr.text);
    list = json_object_get(root, "accounts");
    for (i = 0; i < sizeof(synthetic_accounts) / sizeof(synthetic_accounts[0]); i++) {
        char id[64];

        snprintf(id, sizeof(id), "ghost-%s", synthetic_accounts[i]);
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s}", "id", id, "currency", "CNY",
                                              "time_zone", "Asia/Shanghai", "tax_rate", "0"));
    }
    ck_assert_int_eq(json_dump_file(root, path, 0), 0);
    json_decref(root);
}

void its_ghost_events(its_stream *s, const char *prefix)
{
    char path[1024];
    char line[LINE_MAX_LEN];
    char ided[LINE_MAX_LEN * 2];
    char with[64];
    const char *at;
    FILE *f;
    int i = 0;

    memset(s, 0, sizeof(*s));
    its_example_path(path, sizeof(path), "events.jsonl");
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    snprintf(with, sizeof(with), "\"id\":\"%s", prefix);
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (i++ % 17 != 8)
            continue;
        at = strstr(line, "\"id\":\"");
        ck_assert_ptr_nonnull(at);
        snprintf(ided, sizeof(ided), "%.*s%s%s", (int)(at - line), line, with, at + 6);
        push_edited(s, ided, "\"account\":\"", "\"account\":\"ghost-", "ghost");
    }
    fclose(f);
}

void its_build(its_stream *s, size_t synthetic, int oversized)
{
    char *big;

    memset(s, 0, sizeof(*s));
    push_example(s);
    push(s, SPLIT("1"), strlen(SPLIT("1")), "lab-a");
    push(s, SPLIT("2"), strlen(SPLIT("2")), "lab-a");
    push_synthetic(s, synthetic);
    if (!oversized)
        return;
    big = malloc(BIG_RECORD);
    ck_assert_ptr_nonnull(big);
    memset(big, ' ', BIG_RECORD);
    big[BIG_RECORD - 2] = '{';
    big[BIG_RECORD - 1] = '}';
    push(s, big, BIG_RECORD, "big");
    free(big);
}

void its_free(its_stream *s)
{
    size_t i;

    for (i = 0; i < s->n; i++)
        free(s->rec[i]);
    s->n = 0;
}

billing_catalog *its_file_catalog(billing_config_zones *zones)
{
    char path[1024];
    char err[MSG];
    billing_catalog *cat = billing_catalog_new();

    its_example_path(path, sizeof(path), "pricebook.json");
    ck_assert_msg(billing_config_pricebook_load(cat, path, err, sizeof(err)) == BILLING_OK, "%s",
                  err);
    its_example_path(path, sizeof(path), "accounts.json");
    ck_assert_msg(billing_config_accounts_load(cat, zones, path, err, sizeof(err)) == BILLING_OK,
                  "%s", err);
    return cat;
}

billing_rater *its_rate_directly(billing_catalog *cat, const its_stream *s, size_t *rejects)
{
    char err[MSG];
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    billing_status st;
    size_t i;

    ck_assert_msg(billing_rater_new(cat, &r, err, sizeof(err)) == BILLING_OK, "%s", err);
    *rejects = 0;
    for (i = 0; i < s->n; i++) {
        st = s->len[i] > BS_JSON_RECORD_MAX
                 ? BILLING_ERR_TOO_LARGE
                 : bc_event_parse_json(ev, s->rec[i], s->len[i], err, sizeof(err));
        if (st == BILLING_OK)
            st = billing_rater_add(r, ev, err, sizeof(err));
        if (st != BILLING_OK && st != BILLING_DUPLICATE)
            (*rejects)++;
    }
    billing_event_destroy(ev);
    return r;
}

void its_load_example(bs_conn *c)
{
    char book[1024];
    char accounts[1024];
    bs_load_counts k;
    bs_error err;

    its_example_path(book, sizeof(book), "pricebook.json");
    its_example_path(accounts, sizeof(accounts), "accounts.json");
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s", err.message);
}

billing_rater *its_rate_from_store(bs_conn *c, bs_catalog *cat)
{
    char err[MSG];
    bs_error berr;
    billing_rater *r = NULL;

    ck_assert_msg(billing_rater_new(bs_catalog_lib(cat), &r, err, sizeof(err)) == BILLING_OK, "%s",
                  err);
    billing_rater_set_dedupe(r, 0);
    ck_assert_msg(bs_aggregates_rate(c, cat, r, NULL, &berr) == BS_OK, "%s", berr.message);
    return r;
}

void its_same_invoices(billing_rater *a, billing_rater *b)
{
    int ma[64];
    int mb[64];
    int na;
    int k;
    size_t i;
    const char *acct;
    char *ta;
    char *tb;

    ck_assert_uint_eq(billing_rater_account_count(a), billing_rater_account_count(b));
    for (i = 0; i < billing_rater_account_count(a); i++) {
        acct = billing_rater_account_id(a, i);
        na = tu_months(a, acct, ma, 64);
        ck_assert_int_eq(na, tu_months(b, acct, mb, 64));
        ck_assert_int_gt(na, 0);
        for (k = 0; k < na; k++) {
            ck_assert_int_eq(ma[k], mb[k]);
            ta = tu_invoice_text(a, acct, ma[k] / 100, ma[k] % 100);
            tb = tu_invoice_text(b, acct, ma[k] / 100, ma[k] % 100);
            ck_assert_ptr_nonnull(ta);
            ck_assert_ptr_nonnull(tb);
            ck_assert_str_eq(ta, tb);
            free(ta);
            free(tb);
        }
    }
}

/* Tables of its_dump; rows as jsonb text without the times of writing. */
static const char *const dumped[ITS_TABLES] = {"usage_aggregates", "usage_events", "event_ids",
                                               "rejected_events", "kafka_offsets"};

void its_dump(bs_conn *c, int ids, char *out[ITS_TABLES])
{
    char sql[512];
    size_t i;

    for (i = 0; i < ITS_TABLES; i++) {
        snprintf(sql, sizeof(sql),
                 "SELECT (to_jsonb(t) - 'received_at' - 'first_seen' - 'updated_at'%s)::text"
                 " FROM billing.%s t ORDER BY 1",
                 ids ? "" : " - 'id' - 'consumer_group'", dumped[i]);
        out[i] = itdb_text(c, sql);
    }
}

void its_same_dump(char *a[ITS_TABLES], char *b[ITS_TABLES], const char *what)
{
    size_t i;

    /* An empty aggregates or events table would make the comparison vacuous. */
    ck_assert_msg(strlen(a[0]) > 0 && strlen(a[1]) > 0, "nothing stored");
    for (i = 0; i < ITS_TABLES; i++) {
        ck_assert_msg(strcmp(a[i], b[i]) == 0, "billing.%s differs %s", dumped[i], what);
        free(a[i]);
        free(b[i]);
    }
}
