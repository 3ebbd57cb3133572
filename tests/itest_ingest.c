/*
 * itest_ingest.c - the ingest pipeline (store/ingest.h) against the real
 * PostgreSQL of scripts/pg.sh: a stream with replays, conflicts, garbage,
 * unknown accounts and an oversized record, ingested in random batches,
 * leaves aggregates from which libbilling computes every invoice exactly
 * as a rater that saw the stream directly (what `billing rate` does);
 * a second pass stores nothing; a batch whose position check fails
 * commits nothing; split traffic keeps exact fractions; decoding and
 * rating on several threads stores exactly what one thread stores.
 *
 * Needs BILLING_PG_CONNINFO; without it every test FAILS, never skips.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbcatalog.h"
#include "events.h"
#include "ingest.h"
#include "itestdb.h"
#include "itstream.h"
#include "parallel.h"
#include "testrng.h"

static char db[64];

/* Two distinct events for the position test. */
#define EVENT_1                                                                          \
    "{\"id\":\"p-1\",\"account\":\"lab-a\",\"resource\":\"i-a1\",\"meter\":\"traffic\"," \
    "\"start\":\"2026-01-31T23:00:00+08:00\",\"end\":\"2026-02-01T02:00:00+08:00\","     \
    "\"quantity\":\"1\",\"model\":\"\",\"region\":\"cn-east-1\"}"
#define EVENT_2                                                                          \
    "{\"id\":\"p-2\",\"account\":\"lab-a\",\"resource\":\"i-a1\",\"meter\":\"traffic\"," \
    "\"start\":\"2026-01-31T23:00:00+08:00\",\"end\":\"2026-02-01T02:00:00+08:00\","     \
    "\"quantity\":\"1\",\"model\":\"\",\"region\":\"cn-east-1\"}"

/* Ingest @s in random batches of 1..@max records; returns the totals. */
static bs_ingest_counts ingest_stream(bs_conn *c, bs_ingest *in, const its_stream *s, uint64_t seed,
                                      size_t max)
{
    static bs_record recs[ITS_MAX_RECORDS];
    static bs_record_result res[ITS_MAX_RECORDS];
    static char sources[ITS_MAX_RECORDS][40];
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
        ck_assert_msg(bs_ingest_batch(in, c, &recs[i], n, NULL, 0, 0, &res[i], &k, &err) == BS_OK,
                      "batch at %zu: %s", i, err.message);
        bs_ingest_counts_add(&total, &k);
        i += n;
    }
    return total;
}

#define SQL_AGGS                                                                                 \
    "SELECT account_id, month, meter, rate_kind, price_version_id, rate_model, rate_region,"     \
    " subscription_id, epoch, quantity, quantity_den, event_count FROM billing.usage_aggregates" \
    " ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9"

START_TEST(test_stream_matches_direct_rating)
{
    its_stream *s = calloc(1, sizeof(*s));
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *fcat = its_file_catalog(zones);
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

    its_build(s, 0, 1);
    its_load_example(c);
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    in = bs_ingest_new(cat, NULL);
    direct = its_rate_directly(fcat, s, &rejects);
    k = ingest_stream(c, in, s, UINT64_C(0x1234567) + (uint64_t)_i, _i == 0 ? 1 : 250);
    ck_assert_uint_eq(k.records, s->n);
    ck_assert_uint_eq(k.stored, billing_rater_event_count(direct));
    ck_assert_uint_eq(k.rejected, rejects);
    ck_assert_uint_eq(k.stored + k.duplicates + k.rejected, s->n);
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
    stored = its_rate_from_store(c, cat);
    its_same_invoices(direct, stored);
    billing_rater_destroy(stored);
    /* The same stream again, batched otherwise: nothing new is stored or rated. */
    before = itdb_text(c, SQL_AGGS);
    k = ingest_stream(c, in, s, UINT64_C(99) + (uint64_t)_i, 97);
    ck_assert_uint_eq(k.stored, 0);
    after = itdb_text(c, SQL_AGGS);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    billing_rater_destroy(direct);
    bs_ingest_free(in);
    bs_catalog_free(cat);
    billing_catalog_destroy(fcat);
    billing_config_zones_destroy(zones);
    its_free(s);
    free(s);
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

    its_load_example(c);
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    in = bs_ingest_new(cat, "g1");
    memset(&rec, 0, sizeof(rec));
    rec.data = EVENT_1;
    rec.len = strlen(EVENT_1);
    rec.format = BS_RECORD_JSON;
    rec.source = "kafka:usage/0@0";
    rec.kafka_topic = "usage";
    ck_assert_int_eq(bs_ingest_batch(in, c, &rec, 1, &pos, 1, 0, &res, NULL, &err), BS_OK);
    ck_assert_int_eq(res.outcome, BS_RECORD_NEW);
    before = itdb_text(c, SQL_AGGS);
    /* The stored position is 1 now; a consumer that believes it is still unset fails. */
    rec.data = EVENT_2;
    rec.len = strlen(EVENT_2);
    rec.source = "kafka:usage/0@1";
    rec.kafka_offset = 1;
    pos.next = 2;
    ck_assert_int_eq(bs_ingest_batch(in, c, &rec, 1, &pos, 1, 0, &res, NULL, &err), BS_ERR_RETRY);
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

/*
 * The batch's tail is one pipeline (aggregates, rejects, positions): when
 * the last of several positions was moved by someone else, the reject,
 * the aggregates and the other positions sent before it are not kept.
 */
START_TEST(test_failed_last_position_commits_nothing)
{
    bs_conn *c = itdb_fresh("lastpos", db, sizeof(db));
    bs_catalog *cat;
    bs_ingest *in;
    bs_record rec[2];
    bs_record_result res[2];
    bs_position pos[2] = {{"usage", 0, -1, 1}, {"usage", 1, -1, 1}};
    bs_ingest_counts k;
    bs_error err;

    its_load_example(c);
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    in = bs_ingest_new(cat, "g1");
    memset(rec, 0, sizeof(rec));
    rec[0].data = EVENT_1;
    rec[0].len = strlen(EVENT_1);
    rec[0].format = BS_RECORD_JSON;
    rec[0].source = "kafka:usage/0@0";
    rec[0].kafka_topic = "usage";
    rec[1].data = "{x";
    rec[1].len = 2;
    rec[1].format = BS_RECORD_JSON;
    rec[1].source = "kafka:usage/1@0";
    rec[1].kafka_topic = "usage";
    rec[1].kafka_partition = 1;
    /* Partition 1's position is stored already: the batch believes it unset. */
    ck_assert_int_eq(bs_offset_put(c, "g1", "usage", 1, -1, 5, &err), BS_OK);
    ck_assert_int_eq(bs_ingest_batch(in, c, rec, 2, pos, 2, 0, res, &k, &err), BS_ERR_RETRY);
    ck_assert_ptr_nonnull(strstr(err.message, "usage/1 is no longer -1"));
    ck_assert_int_eq(res[1].outcome, BS_RECORD_REJECTED);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"), 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_aggregates"), 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events"), 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.kafka_offsets"), 1);
    /* With the right expectation all of it is stored, once. */
    pos[1].expected = 5;
    pos[1].next = 6;
    rec[1].kafka_offset = 5;
    ck_assert_int_eq(bs_ingest_batch(in, c, rec, 2, pos, 2, 0, res, &k, &err), BS_OK);
    ck_assert_int_eq(k.stored, 1);
    ck_assert_int_eq(k.rejected, 1);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"), 1);
    ck_assert_int_gt(itdb_long(c, "SELECT count(*) FROM billing.usage_aggregates"), 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events"), 1);
    ck_assert_int_eq(itdb_long(c, "SELECT sum(next_offset) FROM billing.kafka_offsets"), 7);
    bs_ingest_free(in);
    bs_catalog_free(cat);
    itdb_drop(c, db);
}
END_TEST

/*
 * Ingest @s on @threads threads into a fresh database, twice; its tables
 * into @out, identity ids included: the same batches must store the same
 * rows byte for byte.
 */
static void ingest_on_threads(const its_stream *s, int threads, char *out[ITS_TABLES],
                              bs_ingest_counts *first)
{
    bs_conn *c = itdb_fresh("threads", db, sizeof(db));
    bs_catalog *cat;
    bs_ingest *in;
    bs_ingest_counts again;
    bs_error err;

    its_load_example(c);
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    in = bs_ingest_new(cat, NULL);
    ck_assert_int_eq(bs_ingest_set_threads(in, 0), -1);
    ck_assert_int_eq(bs_ingest_set_threads(in, BS_INGEST_THREADS_MAX + 1), -1);
    ck_assert_int_eq(bs_ingest_set_threads(in, threads), 0);
    /* Batches of up to 3 000 records: cut in up to 4 slices of at least 256. */
    *first = ingest_stream(c, in, s, UINT64_C(0x7e57), 3000);
    again = ingest_stream(c, in, s, UINT64_C(0xa9a1), 3000);
    ck_assert_uint_eq(again.stored, 0);
    ck_assert_uint_eq(again.duplicates, first->stored + first->duplicates);
    its_dump(c, 1, out);
    bs_ingest_free(in);
    bs_catalog_free(cat);
    itdb_drop(c, db);
}

/* One thread and four store the same rows, ids included, and count alike. */
START_TEST(test_threads_store_the_same)
{
    its_stream *s = calloc(1, sizeof(*s));
    char *one[ITS_TABLES];
    char *four[ITS_TABLES];
    bs_ingest_counts k1;
    bs_ingest_counts k4;

    its_build(s, 12000, 1);
    ingest_on_threads(s, 1, one, &k1);
    ingest_on_threads(s, 4, four, &k4);
    ck_assert_uint_eq(k1.records, s->n);
    ck_assert_uint_gt(k1.stored, 12000);
    ck_assert_uint_gt(k1.rejected, 0);
    ck_assert_uint_eq(k4.stored, k1.stored);
    ck_assert_uint_eq(k4.duplicates, k1.duplicates);
    ck_assert_uint_eq(k4.rejected, k1.rejected);
    ck_assert_uint_eq(k4.aggregates, k1.aggregates);
    its_same_dump(one, four, "on 4 threads");
    its_free(s);
    free(s);
}
END_TEST

/* The slices of a batch: contiguous, in order, covering it once, as even as can be. */
START_TEST(test_slices_cover_the_batch)
{
    size_t begin;
    size_t end;
    size_t next;
    size_t n;
    size_t k;
    size_t m;

    ck_assert_uint_eq(bs_slice_count(0, 4, 256), 1);
    ck_assert_uint_eq(bs_slice_count(511, 4, 256), 1);
    ck_assert_uint_eq(bs_slice_count(512, 4, 256), 2);
    ck_assert_uint_eq(bs_slice_count(100000, 4, 256), 4);
    ck_assert_uint_eq(bs_slice_count(100000, 1000, 1), BS_SLICES_MAX);
    for (n = 0; n < 300; n += 7) {
        for (m = 1; m <= 9; m++) {
            next = 0;
            for (k = 0; k < m; k++) {
                bs_slice_bounds(n, m, k, &begin, &end);
                ck_assert_uint_eq(begin, next);
                ck_assert_uint_ge(end, begin);
                ck_assert_uint_le(end - begin, n / m + 1);
                ck_assert_uint_ge(end - begin, n / m);
                next = end;
            }
            ck_assert_uint_eq(next, n);
        }
    }
}
END_TEST

/* Each slice's job runs once, with its own bounds, whatever the count. */
static void mark_slice(void *arg, size_t k, size_t begin, size_t end)
{
    int *seen = arg;
    size_t i;

    for (i = begin; i < end; i++)
        seen[i] += (int)k + 1;
}

START_TEST(test_parallel_slices_run_each_once)
{
    static int seen[1000];
    size_t begin;
    size_t end;
    size_t k;
    size_t i;

    memset(seen, 0, sizeof(seen));
    ck_assert_uint_eq(bs_parallel_slices(1000, 7, mark_slice, seen), 6);
    for (k = 0; k < 7; k++) {
        bs_slice_bounds(1000, 7, k, &begin, &end);
        for (i = begin; i < end; i++)
            ck_assert_int_eq(seen[i], (int)k + 1);
    }
}
END_TEST

/*
 * Account ids that a text form must quote or escape ('"', '\\', ',',
 * braces, and the id NULL) land in usage_aggregates as themselves, never
 * as SQL NULL or split in two (written for the aggregates as text[]
 * parameters, tried in doc/performance.md, 2026-12-07 branch h39).
 */
#define ODD_ACCOUNT "q\"u\\o,{t}e"
#define ODD_EVENT(id, account_json)                                                       \
    "{\"id\":\"" id "\",\"account\":\"" account_json "\",\"resource\":\"i-a1\","          \
    "\"meter\":\"traffic\",\"start\":\"2026-01-10T01:00:00+08:00\","                      \
    "\"end\":\"2026-01-10T02:00:00+08:00\",\"quantity\":\"7\",\"model\":\"\",\"region\":" \
    "\"cn-east-1\"}"
START_TEST(test_aggregates_of_odd_account_ids)
{
    static const char *const payload[] = {ODD_EVENT("odd-1", "q\\\"u\\\\o,{t}e"),
                                          ODD_EVENT("odd-2", "NULL"),
                                          ODD_EVENT("odd-3", "q\\\"u\\\\o,{t}e")};
    bs_conn *c = itdb_fresh("odd", db, sizeof(db));
    bs_record recs[3];
    bs_record_result res[3];
    bs_ingest_counts k;
    bs_catalog *cat;
    bs_ingest *in;
    bs_error err;
    size_t i;

    its_load_example(c);
    itdb_exec(c, "INSERT INTO billing.accounts (id, currency, time_zone)"
                 " SELECT x.id, a.currency, a.time_zone FROM billing.accounts a,"
                 " (VALUES ('q\"u\\o,{t}e'), ('NULL')) x (id) WHERE a.id = 'lab-a'");
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    in = bs_ingest_new(cat, NULL);
    memset(recs, 0, sizeof(recs));
    for (i = 0; i < 3; i++) {
        recs[i].data = payload[i];
        recs[i].len = strlen(payload[i]);
        recs[i].format = BS_RECORD_JSON;
        recs[i].source = "file:odd";
    }
    ck_assert_msg(bs_ingest_batch(in, c, recs, 3, NULL, 0, 0, res, &k, &err) == BS_OK, "%s",
                  err.message);
    ck_assert_uint_eq(k.stored, 3);
    ck_assert_uint_eq(k.aggregates, 2);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_aggregates"), 2);
    ck_assert_int_eq(itdb_long(c, "SELECT event_count FROM billing.usage_aggregates"
                                  " WHERE account_id = '" ODD_ACCOUNT "'"),
                     2);
    ck_assert_int_eq(itdb_long(c, "SELECT event_count FROM billing.usage_aggregates"
                                  " WHERE account_id = 'NULL'"),
                     1);
    /* The other columns as the rater gave them: a NULL NULL, the numbers whole. */
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_aggregates"
                                  " WHERE subscription_id IS NULL AND month = '2026-01-01'"
                                  " AND meter = 'traffic' AND quantity = 7 * event_count"
                                  " AND quantity_den = 1"),
                     2);
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
    tcase_add_test(tc, test_failed_last_position_commits_nothing);
    tcase_add_test(tc, test_threads_store_the_same);
    tcase_add_test(tc, test_aggregates_of_odd_account_ids);
    suite_add_tcase(s, tc);
    tc = tcase_create("slices");
    tcase_add_test(tc, test_slices_cover_the_batch);
    tcase_add_test(tc, test_parallel_slices_run_each_once);
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
