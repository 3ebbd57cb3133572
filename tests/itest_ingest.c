/*
 * itest_ingest.c - the ingest pipeline (store/ingest.h) against the real
 * PostgreSQL of scripts/pg.sh: a stream with replays, conflicts, garbage,
 * unknown accounts and an oversized record, ingested in random batches,
 * leaves aggregates from which libbilling computes every invoice exactly
 * as a rater that saw the stream directly (what `billing rate` does);
 * a second pass stores nothing; a batch whose position check fails
 * commits nothing; split traffic keeps exact fractions.
 *
 * Needs BILLING_PG_CONNINFO; without it every test FAILS, never skips.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "configfile.h"
#include "eventjson.h"
#include "ingest.h"
#include "itestdb.h"
#include "load.h"
#include "testrng.h"
#include "testutil.h"
#include "zones.h"

#define MAX_RECORDS 2000
#define LINE_MAX_LEN 1024
#define MSG 512
#define BIG_RECORD (70u * 1024u)

/* Two traffic events split 1 h / 2 h across the local month end: thirds of a byte. */
#define SPLIT_1                                                                                \
    "{\"id\":\"split-1\",\"account\":\"lab-a\",\"resource\":\"i-a1\",\"meter\":\"traffic\","   \
    "\"start\":\"2026-01-31T23:00:00+08:00\",\"end\":\"2026-02-01T02:00:00+08:00\","           \
    "\"quantity\":\"1\",\"model\":\"\",\"region\":\"cn-east-1\"}"
#define SPLIT_2                                                                                \
    "{\"id\":\"split-2\",\"account\":\"lab-a\",\"resource\":\"i-a1\",\"meter\":\"traffic\","   \
    "\"start\":\"2026-01-31T23:00:00+08:00\",\"end\":\"2026-02-01T02:00:00+08:00\","           \
    "\"quantity\":\"1\",\"model\":\"\",\"region\":\"cn-east-1\"}"

typedef struct stream {
    char *rec[MAX_RECORDS];
    size_t len[MAX_RECORDS];
    size_t n;
} stream;

static char db[64];

static const char *srcdir(void)
{
    const char *d = getenv("top_srcdir");

    return d != NULL && d[0] != '\0' ? d : "..";
}

static void example_path(char *out, size_t size, const char *file)
{
    snprintf(out, size, "%s/examples/gpu-cloud/%s", srcdir(), file);
}

static void push(stream *s, const char *data, size_t len)
{
    ck_assert_uint_lt(s->n, MAX_RECORDS);
    s->rec[s->n] = malloc(len + 1);
    ck_assert_ptr_nonnull(s->rec[s->n]);
    memcpy(s->rec[s->n], data, len);
    s->rec[s->n][len] = '\0';
    s->len[s->n++] = len;
}

/* @line with the first @what replaced by @with. */
static void push_edited(stream *s, const char *line, const char *what, const char *with)
{
    char out[LINE_MAX_LEN * 2];
    const char *at = strstr(line, what);

    ck_assert_ptr_nonnull(at);
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - line), line, with, at + strlen(what));
    push(s, out, strlen(out));
}

/* The example's events with replays, conflicts, garbage, unknown accounts, one giant. */
static void build_stream(stream *s)
{
    char path[1024];
    char line[LINE_MAX_LEN];
    char *big;
    FILE *f;
    size_t len;
    int i = 0;

    memset(s, 0, sizeof(*s));
    example_path(path, sizeof(path), "events.jsonl");
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        len = strcspn(line, "\n");
        line[len] = '\0';
        push(s, line, len);
        if (i % 7 == 3)
            push(s, line, len); /* replay */
        if (i % 11 == 5)
            push_edited(s, line, "\"quantity\":\"", "\"quantity\":\"1"); /* conflict */
        if (i % 13 == 6)
            push(s, "\x0a\x03" "abc\xff\xff garbage", 16);
        if (i % 17 == 8)
            push_edited(s, line, "\"account\":\"", "\"account\":\"ghost-");
        i++;
    }
    fclose(f);
    push(s, SPLIT_1, strlen(SPLIT_1));
    push(s, SPLIT_2, strlen(SPLIT_2));
    big = malloc(BIG_RECORD);
    ck_assert_ptr_nonnull(big);
    memset(big, ' ', BIG_RECORD);
    big[BIG_RECORD - 2] = '{';
    big[BIG_RECORD - 1] = '}';
    push(s, big, BIG_RECORD);
    free(big);
}

static void free_stream(stream *s)
{
    size_t i;

    for (i = 0; i < s->n; i++)
        free(s->rec[i]);
}

/* The catalog files as `billing rate` reads them. */
static billing_catalog *file_catalog(bc_zones *zones)
{
    char path[1024];
    char err[MSG];
    billing_catalog *cat = billing_catalog_new();

    example_path(path, sizeof(path), "pricebook.json");
    ck_assert_msg(bc_pricebook_load(cat, path, err, sizeof(err)) == 0, "%s", err);
    example_path(path, sizeof(path), "accounts.json");
    ck_assert_msg(bc_accounts_load(cat, zones, path, err, sizeof(err)) == 0, "%s", err);
    return cat;
}

/* Rate the stream directly (dedupe on); *@rejects gets how many records it refuses. */
static billing_rater *rate_directly(billing_catalog *cat, const stream *s, size_t *rejects)
{
    char err[MSG];
    billing_rater *r = billing_rater_new(cat, err, sizeof(err));
    billing_event *ev = billing_event_new();
    billing_status st;
    size_t i;

    ck_assert_ptr_nonnull(r);
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

static void load_example(bs_conn *c)
{
    char book[1024];
    char accounts[1024];
    bs_load_counts k;
    bs_error err;

    example_path(book, sizeof(book), "pricebook.json");
    example_path(accounts, sizeof(accounts), "accounts.json");
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s",
                  err.message);
}

/* Ingest @s in random batches of 1..@max records; returns the totals. */
static bs_ingest_counts ingest_stream(bs_conn *c, bs_ingest *in, const stream *s, uint64_t seed,
                                      size_t max)
{
    static bs_record recs[MAX_RECORDS];
    static bs_record_result res[MAX_RECORDS];
    static char sources[MAX_RECORDS][40];
    bs_ingest_counts total;
    bs_ingest_counts k;
    bs_error err;
    size_t i = 0;
    size_t j;
    size_t n;

    memset(&total, 0, sizeof(total));
    for (j = 0; j < s->n; j++) {
        memset(&recs[j], 0, sizeof(recs[j]));
        snprintf(sources[j], sizeof(sources[j]), "file:stream:%zu", j + 1);
        recs[j].data = s->rec[j];
        recs[j].len = s->len[j];
        recs[j].format = BS_RECORD_JSON;
        recs[j].source = sources[j];
    }
    while (i < s->n) {
        n = 1 + (size_t)(test_rnd(&seed) % max);
        if (n > s->n - i)
            n = s->n - i;
        ck_assert_msg(bs_ingest_batch(in, c, &recs[i], n, NULL, 0, 0, &res[i], &k, &err) ==
                          BS_OK,
                      "batch at %zu: %s", i, err.message);
        total.records += k.records;
        total.stored += k.stored;
        total.duplicates += k.duplicates;
        total.rejected += k.rejected;
        i += n;
    }
    return total;
}

/* Every invoice of every account from @a and @b must be equal, month by month. */
static void same_invoices(billing_rater *a, billing_rater *b)
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
        na = billing_rater_months(a, acct, ma, 64);
        ck_assert_int_eq(na, billing_rater_months(b, acct, mb, 64));
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

/* A rater holding the stored aggregates. */
static billing_rater *rate_from_store(bs_conn *c, bs_catalog *cat)
{
    char err[MSG];
    bs_error berr;
    billing_rater *r = billing_rater_new(bs_catalog_lib(cat), err, sizeof(err));

    ck_assert_msg(r != NULL, "%s", err);
    billing_rater_set_dedupe(r, 0);
    ck_assert_msg(bs_aggregates_rate(c, cat, r, NULL, &berr) == BS_OK, "%s", berr.message);
    return r;
}

#define SQL_AGGS                                                                               \
    "SELECT account_id, month, meter, rate_kind, price_version_id, rate_model, rate_region,"   \
    " subscription_id, epoch, quantity, quantity_den, event_count FROM billing.usage_aggregates" \
    " ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9"

START_TEST(test_stream_matches_direct_rating)
{
    stream s;
    bc_zones *zones = bc_zones_new();
    billing_catalog *fcat = file_catalog(zones);
    bs_conn *c = itdb_fresh("stream", db, sizeof(db));
    bs_catalog *cat;
    bs_ingest *in;
    billing_rater *direct;
    billing_rater *stored;
    bs_ingest_counts k;
    bs_error err;
    size_t rejects;
    char *before;
    char *after;

    build_stream(&s);
    load_example(c);
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    in = bs_ingest_new(cat, NULL);
    direct = rate_directly(fcat, &s, &rejects);
    k = ingest_stream(c, in, &s, UINT64_C(0x1234567) + (uint64_t)_i, _i == 0 ? 1 : 250);
    ck_assert_uint_eq(k.records, s.n);
    ck_assert_uint_eq(k.stored, billing_rater_event_count(direct));
    ck_assert_uint_eq(k.rejected, rejects);
    ck_assert_uint_eq(k.stored + k.duplicates + k.rejected, s.n);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"), (long)k.stored);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events"), (long)rejects);
    /* Every kind of reject was seen, with its bytes. */
    ck_assert_int_gt(itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code"
                                  " = 'conflict'"),
                     0);
    ck_assert_int_gt(itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code"
                                  " = 'unknown_account' AND convert_from(payload, 'UTF8') LIKE"
                                  " '%ghost-%'"),
                     0);
    ck_assert_int_gt(itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code"
                                  " = 'parse'"),
                     0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code"
                                  " = 'too_large' AND octet_length(payload) = 71680"),
                     1);
    /* Split traffic: thirds of a byte in January and February, exact, always reduced. */
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_aggregates WHERE meter ="
                                  " 'traffic' AND account_id = 'lab-a' AND quantity_den = 3"),
                     2);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_aggregates"
                                  " WHERE gcd(quantity, quantity_den) <> 1"),
                     0);
    stored = rate_from_store(c, cat);
    same_invoices(direct, stored);
    billing_rater_destroy(stored);
    /* The same stream again, batched otherwise: nothing new is stored or rated. */
    before = itdb_text(c, SQL_AGGS);
    k = ingest_stream(c, in, &s, UINT64_C(99) + (uint64_t)_i, 97);
    ck_assert_uint_eq(k.stored, 0);
    after = itdb_text(c, SQL_AGGS);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    billing_rater_destroy(direct);
    bs_ingest_free(in);
    bs_catalog_free(cat);
    billing_catalog_destroy(fcat);
    bc_zones_destroy(zones);
    free_stream(&s);
    itdb_drop(c, db);
}
END_TEST

/* A batch whose Kafka position was moved by someone else leaves no trace. */
START_TEST(test_failed_position_commits_nothing)
{
    bs_conn *c = itdb_fresh("position", db, sizeof(db));
    bs_catalog *cat;
    bs_ingest *in;
    bs_record rec;
    bs_record_result res;
    bs_position pos = {"usage", 0, -1, 1};
    bs_error err;
    char *before;
    char *after;

    load_example(c);
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    in = bs_ingest_new(cat, "g1");
    memset(&rec, 0, sizeof(rec));
    rec.data = SPLIT_1;
    rec.len = strlen(SPLIT_1);
    rec.format = BS_RECORD_JSON;
    rec.source = "kafka:usage/0@0";
    rec.kafka_topic = "usage";
    ck_assert_int_eq(bs_ingest_batch(in, c, &rec, 1, &pos, 1, 0, &res, NULL, &err), BS_OK);
    ck_assert_int_eq(res.outcome, BS_RECORD_NEW);
    before = itdb_text(c, SQL_AGGS);
    /* The stored position is 1 now; a consumer that believes it is still unset fails. */
    rec.data = SPLIT_2;
    rec.len = strlen(SPLIT_2);
    rec.source = "kafka:usage/0@1";
    rec.kafka_offset = 1;
    pos.next = 2;
    ck_assert_int_eq(bs_ingest_batch(in, c, &rec, 1, &pos, 1, 0, &res, NULL, &err),
                     BS_ERR_RETRY);
    after = itdb_text(c, SQL_AGGS);
    ck_assert_str_eq(before, after);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"), 1);
    ck_assert_int_eq(itdb_long(c, "SELECT next_offset FROM billing.kafka_offsets"), 1);
    /* With the right expectation it goes through. */
    pos.expected = 1;
    ck_assert_int_eq(bs_ingest_batch(in, c, &rec, 1, &pos, 1, 0, &res, NULL, &err), BS_OK);
    ck_assert_int_eq(itdb_long(c, "SELECT next_offset FROM billing.kafka_offsets"), 2);
    free(before);
    free(after);
    bs_ingest_free(in);
    bs_catalog_free(cat);
    itdb_drop(c, db);
}
END_TEST

static Suite *ingest_suite(void)
{
    Suite *s = suite_create("ingest");
    TCase *tc = tcase_create("pipeline");

    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_stream_matches_direct_rating, 0, 2);
    tcase_add_test(tc, test_failed_position_commits_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ingest_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
