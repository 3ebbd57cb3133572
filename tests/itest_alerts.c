/*
 * itest_alerts.c - billingd's credit threshold checks (billingd/alertcheck.h)
 * against the real PostgreSQL of scripts/pg.sh, without a broker: the
 * ingest pipeline runs the checker in each batch's transaction, as
 * billingd does, and the test collects what billingd would publish.
 *   - a batch with more than 256 accounts with credit, each crossing a
 *     threshold: exactly one alert each (none skipped);
 *   - the same events in batches of 1, 2, 3, 5, 8 and all at once: the
 *     same alerts, also when a trial expires between two records of one
 *     batch;
 *   - crossed_at is the instant the balance that libbilling computes
 *     over the events cut there (what `billing rate --at` does) reaches
 *     the threshold: at or below it then, above it a nanosecond before;
 *   - an account that used up its credit is checked again when its credit
 *     changes (a top-up): its new thresholds raise alerts;
 *   - events arriving out of month order (the issue 23 account: Jan 60,
 *     Dec 27.50, Dec 55, Jan 72 of 100.00): one 50%, 80% and 100% alert
 *     each, in batches of 1 and 4;
 *   - property: random orders and batch sizes of an account with four
 *     overlapping grants give exactly the alerts libbilling's balances
 *     imply, each once;
 *   - billing.credit_alerts is written with the batch, by the runtime
 *     role: a failed batch's rerun repeats the same alert_ids, a committed
 *     alert is never repeated;
 *   - every test again with the credit states kept between batches
 *     (bd_alert_cache, test case "postgresql-cache"), and the same alerts
 *     with and without them when another writer (`billing ingest`) adds
 *     events between two batches, after a restart, a rolled-back batch, a
 *     grant loaded between batches and a late event.
 *
 * Needs BILLING_PG_CONNINFO; without it every test FAILS, never skips.
 */
#include "config.h"

#include <check.h>
#include <gmp.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alertcheck.h"
#include "dbcatalog.h"
#include "eventjson.h"
#include "ingest.h"
#include "itestdb.h"
#include "itstream.h"
#include "load.h"
#include "sentalerts.h"
#include "testrng.h"

#define MSG 512
#define ALERTS_MAX 4096
#define MANY_ACCOUNTS 300
/* States the tests' caches keep. */
#define CACHE_ACCOUNTS 1000
/* 2026-01-11T00:00:00Z: student-b's trial (from 01-10T10:00Z) is valid. */
#define JAN_11 INT64_C(1768089600)
/* 2026-02-09T10:00:00Z: student-b's trial expires. */
#define TRIAL_END INT64_C(1770631200)

static char db[64];

/* 1: the hook keeps the accounts' credit states between batches (test case "postgresql-cache"). */
static int with_cache;

/* The bound on the stored events the states keep (bd_alert_cache_set_max_events). */
static size_t cache_events = BD_CACHE_EVENTS_DEFAULT;

/* One alert as billingd would publish it. */
typedef struct seen_alert {
    char alert_id[BS_ALERT_ID_MAX];
    char account[64];
    char event_id[64];
    char balance[64];
    char threshold[64];
    int pct;
    billing_time_t crossed_at;
    billing_time_t exhausted;
    size_t stored; /* records ingested when it was sent (the batch's included) */
} seen_alert;

typedef struct collector {
    bs_catalog *cat;
    int fail_once;  /* the hook fails its next call after the check (BS_ERR_RETRY) */
    int fail_fatal; /* the hook fails its next call after the check (BS_ERR_FATAL: no retry) */
    bd_alert_cache *cache; /* with_cache: made by the first batch */
    size_t stored;         /* records ingested by the end of the batch in progress */
    seen_alert alerts[ALERTS_MAX];
    size_t n;
} collector;

static const int pcts[] = {50, 80, 100};

static int collect(void *arg, const bd_crossing *x)
{
    collector *col = arg;
    seen_alert *a;

    ck_assert_uint_lt(col->n, ALERTS_MAX);
    a = &col->alerts[col->n++];
    snprintf(a->alert_id, sizeof(a->alert_id), "%s", x->alert_id);
    snprintf(a->account, sizeof(a->account), "%s", x->account);
    snprintf(a->event_id, sizeof(a->event_id), "%s", x->event_id);
    snprintf(a->balance, sizeof(a->balance), "%s", x->balance);
    snprintf(a->threshold, sizeof(a->threshold), "%s", x->threshold);
    a->pct = x->pct;
    a->crossed_at = x->crossed_at;
    a->exhausted = x->exhausted;
    a->stored = col->stored;
    return 0;
}

/* The bs_ingest_hook billingd installs, collecting instead of publishing. */
static bs_status hook(void *arg, bs_conn *c, const bs_record *recs, const bs_record_result *results,
                      size_t n, bs_error *err)
{
    collector *col = arg;
    bs_status st;

    if (with_cache && col->cache == NULL) {
        col->cache = bd_alert_cache_new(CACHE_ACCOUNTS);
        ck_assert_ptr_nonnull(col->cache);
        bd_alert_cache_set_max_events(col->cache, cache_events);
    }
    st = bd_alerts_check_cached(col->cache, c, col->cat, pcts, 3, recs, results, n, collect, col,
                                err);
    /* As billingd when the COMMIT fails after the alerts went out: the batch runs again. */
    if (st == BS_OK && col->fail_once) {
        col->fail_once = 0;
        return bs_error_set(err, BS_ERR_RETRY, "test: the batch fails once after its alerts");
    }
    if (st == BS_OK && col->fail_fatal) {
        col->fail_fatal = 0;
        return bs_error_set(err, BS_ERR_FATAL, "test: the batch fails after its alerts");
    }
    return st;
}

/* @n ten-minute records of 8 RTX 4090 (4.80 CNY an hour) for @account from @t0 (seconds). */
static void burn(its_stream *s, const char *account, const char *prefix, int64_t t0, int n)
{
    char line[512];
    char start[40];
    char end[40];
    int i;

    for (i = 0; i < n; i++) {
        billing_time_t t = (t0 + i * 600) * BILLING_NS_PER_SEC;

        billing_time_format(t, start, sizeof(start));
        billing_time_format(t + 600 * BILLING_NS_PER_SEC, end, sizeof(end));
        snprintf(line, sizeof(line),
                 "{\"id\":\"%s%02d\",\"account\":\"%s\",\"resource\":\"i-%s\","
                 "\"meter\":\"gpu\",\"start\":\"%s\",\"end\":\"%s\",\"quantity\":\"8\","
                 "\"model\":\"RTX4090\",\"region\":\"cn-east-1\"}",
                 prefix, i, account, account, start, end);
        ck_assert_uint_lt(s->n, ITS_MAX_RECORDS);
        s->rec[s->n] = strdup(line);
        s->len[s->n] = strlen(line);
        s->key[s->n++] = account;
    }
}

/* Ingest @s as billingd's protobuf records with the alert hook, in batches of @sizes (cycled). */
static void ingest_sized(bs_conn *c, collector *col, const its_stream *s, const size_t *sizes,
                         size_t n_sizes)
{
    static unsigned char bufs[ITS_MAX_RECORDS][BILLING_EVENT_WIRE_MAX];
    static bs_record recs[ITS_MAX_RECORDS];
    static bs_record_result res[ITS_MAX_RECORDS];
    char err_text[MSG];
    billing_event *ev = billing_event_new();
    bs_ingest *in;
    bs_error err;
    bs_status st;
    size_t b = 0;
    size_t i;
    size_t n;

    for (i = 0; i < s->n; i++) {
        memset(&recs[i], 0, sizeof(recs[i]));
        ck_assert_int_eq(bc_event_parse_json(ev, s->rec[i], s->len[i], err_text, sizeof(err_text)),
                         BILLING_OK);
        ck_assert_int_eq(billing_event_encode(ev, bufs[i], sizeof(bufs[i]), &recs[i].len),
                         BILLING_OK);
        recs[i].data = bufs[i];
        recs[i].format = BS_RECORD_PROTOBUF;
        recs[i].source = "test";
    }
    in = bs_ingest_new(col->cat, NULL);
    bs_ingest_set_hook(in, hook, col);
    for (i = 0; i < s->n; i += n) {
        n = s->n - i < sizes[b % n_sizes] ? s->n - i : sizes[b % n_sizes];
        b++;
        col->stored = i + n;
        st = bs_ingest_batch(in, c, &recs[i], n, NULL, 0, 0, &res[i], NULL, &err);
        /* As billingd: the kept states move on only with a batch that committed. */
        bd_alert_cache_done(col->cache, c, st == BS_OK);
        ck_assert_msg(st == BS_OK, "batch at %zu: %s", i, err.message);
    }
    bs_ingest_free(in);
    billing_event_destroy(ev);
}

/* Drop @col's catalog and the states that borrow it (a restart). */
static void drop_catalog(collector *col)
{
    bd_alert_cache_free(col->cache);
    col->cache = NULL;
    bs_catalog_free(col->cat);
    col->cat = NULL;
}

/* Ingest @s, @batch records at a time. */
static void ingest(bs_conn *c, collector *col, const its_stream *s, size_t batch)
{
    ingest_sized(c, col, s, &batch, 1);
}

static int time_cmp(const void *x, const void *y)
{
    billing_time_t a = *(const billing_time_t *)x;
    billing_time_t b = *(const billing_time_t *)y;

    return a < b ? -1 : a > b;
}

static int str_cmp(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* A fresh database with the example catalog, and @col reading it. */
static bs_conn *fresh(const char *tag, collector *col)
{
    bs_conn *c = itdb_fresh(tag, db, sizeof(db));
    bs_error err;

    its_load_example(c);
    memset(col, 0, sizeof(*col));
    col->cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(col->cat != NULL, "%s", err.message);
    return c;
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

/* The example accounts plus @n trial accounts "many-N" with 10.00 CNY each, into @path. */
static void many_accounts(const char *path, int n)
{
    char src[1024];
    char id[64];
    char grant[64];
    json_error_t jerr;
    json_t *root;
    int i;

    its_example_path(src, sizeof(src), "accounts.json");
    root = json_load_file(src, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", src, jerr.text);
    for (i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "many-%03d", i);
        snprintf(grant, sizeof(grant), "trial-many-%03d", i);
        json_array_append_new(json_object_get(root, "accounts"),
                              json_pack("{s:s, s:s, s:s, s:s}", "id", id, "currency", "CNY",
                                        "time_zone", "Asia/Shanghai", "tax_rate", "0"));
        json_array_append_new(
            json_object_get(root, "grants"),
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:i}", "id", grant, "account", id, "amount",
                      "10.00", "granted_at", "2026-01-10T00:00:00Z", "expires_at",
                      "2026-02-10T00:00:00Z", "applies_to", "usage", "priority", 0));
    }
    ck_assert_int_eq(json_dump_file(root, path, 0), 0);
    json_decref(root);
}

/*
 * 300 accounts with credit in one batch, each using 56% of its credit
 * (seven ten-minute records at 4.80 an hour: 5.60 of 10.00): one 50%
 * alert each. billingd used to check 256 accounts per batch and skip the
 * rest silently.
 */
START_TEST(test_alerts_past_256_accounts_in_one_batch)
{
    static char ids[MANY_ACCOUNTS][16];
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c = itdb_fresh("many", db, sizeof(db));
    char book[1024];
    char accounts[256];
    bs_load_counts k;
    bs_error err;
    size_t i;
    int per[MANY_ACCOUNTS];

    its_example_path(book, sizeof(book), "pricebook.json");
    snprintf(accounts, sizeof(accounts), "itest_alerts-%ld.json", (long)getpid());
    many_accounts(accounts, MANY_ACCOUNTS);
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s", err.message);
    remove(accounts);
    col->cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(col->cat != NULL, "%s", err.message);
    for (i = 0; i < MANY_ACCOUNTS; i++) {
        snprintf(ids[i], sizeof(ids[i]), "many-%03zu", i);
        burn(s, ids[i], ids[i], JAN_11, 7);
        per[i] = 0;
    }
    ingest(c, col, s, s->n);
    for (i = 0; i < col->n; i++) {
        ck_assert_int_eq(col->alerts[i].pct, 50);
        ck_assert_str_eq(col->alerts[i].balance, "4.4");
        per[atoi(col->alerts[i].account + strlen("many-"))]++;
    }
    for (i = 0; i < MANY_ACCOUNTS; i++)
        ck_assert_msg(per[i] == 1, "account many-%03zu: %d alerts, not 1", i, per[i]);
    ck_assert_uint_eq(col->n, MANY_ACCOUNTS);
    drop_catalog(col);
    its_free(s);
    free(s);
    free(col);
    itdb_drop(c, db);
}
END_TEST

/*
 * student-b's stream: 4.00 used early in its trial, then, on the trial's
 * last day, two records that take it past 50% (4.80, then 5.60), the
 * second ending ten minutes before the trial expires at 10:00Z, then
 * usage after the expiry. Every batch size gives the same alerts. Before
 * the fix the balances were read at the batch's last end: a batch
 * holding late-01 and records after the expiry read both after it (no
 * credit) and lost the 50% alert that batches of one raised (the demo's
 * 182 vs 183 "50% used" alerts).
 */
static void expiry_stream(its_stream *s)
{
    burn(s, "student-b", "early-", JAN_11, 5);
    burn(s, "student-b", "late-", TRIAL_END - 1800, 2);
    burn(s, "student-b", "after-", TRIAL_END, 6);
}

static void same_alerts(const collector *a, const collector *b, size_t batch)
{
    size_t i;

    ck_assert_msg(a->n == b->n, "batches of %zu: %zu alerts, not %zu", batch, b->n, a->n);
    for (i = 0; i < a->n; i++) {
        ck_assert_str_eq(a->alerts[i].event_id, b->alerts[i].event_id);
        ck_assert_int_eq(a->alerts[i].pct, b->alerts[i].pct);
        ck_assert_str_eq(a->alerts[i].balance, b->alerts[i].balance);
        ck_assert_int_eq(a->alerts[i].crossed_at, b->alerts[i].crossed_at);
        ck_assert_int_eq(a->alerts[i].exhausted, b->alerts[i].exhausted);
    }
}

START_TEST(test_alerts_same_for_every_batch_size)
{
    static const size_t sizes[] = {2, 3, 5, 8, 14};
    its_stream *s = calloc(1, sizeof(*s));
    collector *one = calloc(1, sizeof(*one));
    collector *other = calloc(1, sizeof(*other));
    bs_conn *c = fresh("batches", one);
    size_t i;

    expiry_stream(s);
    ingest(c, one, s, 1);
    /* 50% crossed by the second late record, before the expiry; 80%, 100% never. */
    ck_assert_uint_eq(one->n, 1);
    ck_assert_int_eq(one->alerts[0].pct, 50);
    ck_assert_str_eq(one->alerts[0].event_id, "late-01");
    drop_catalog(one);
    itdb_drop(c, db);
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        c = fresh("batches", other);
        ingest(c, other, s, sizes[i]);
        same_alerts(one, other, sizes[i]);
        drop_catalog(other);
        itdb_drop(c, db);
    }
    its_free(s);
    free(s);
    free(one);
    free(other);
}
END_TEST

/* An exact decimal ("4.4", "0", "-1.25") into @q. */
static void decimal_q(mpq_t q, const char *text)
{
    char digits[256];
    const char *dot = strchr(text, '.');
    size_t frac = dot != NULL ? strlen(dot + 1) : 0;

    ck_assert_uint_lt(strlen(text), sizeof(digits));
    snprintf(digits, sizeof(digits), "%.*s%s",
             (int)(dot != NULL ? (size_t)(dot - text) : strlen(text)), text,
             dot != NULL ? dot + 1 : "");
    ck_assert_int_eq(mpz_set_str(mpq_numref(q), digits, 10), 0);
    mpz_ui_pow_ui(mpq_denref(q), 10, (unsigned long)frac);
    mpq_canonicalize(q);
}

/* The balance libbilling gives over @s cut at @at (what `billing rate --at` does). */
static void balance_at(const its_stream *s, billing_time_t at, mpq_t out)
{
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *cat = its_file_catalog(zones);
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    char text[256];
    size_t i;

    ck_assert_int_eq(billing_rater_new(cat, &r, NULL, 0), BILLING_OK);
    for (i = 0; i < s->n; i++) {
        ck_assert_int_eq(bc_event_parse_json(ev, s->rec[i], s->len[i], NULL, 0), BILLING_OK);
        if (billing_event_start(ev) >= at)
            continue;
        if (billing_event_end(ev) > at)
            billing_event_set_interval(ev, billing_event_start(ev), at);
        ck_assert_int_eq(billing_rater_add(r, ev, NULL, 0), BILLING_OK);
    }
    ck_assert_int_eq(billing_rater_credit_balance(r, "student-b", at, text, sizeof(text)),
                     BILLING_OK);
    decimal_q(out, text);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
}

/*
 * The 30-record burn of student-b's 10.00 CNY, in batches of 7: each
 * alert's crossed_at is the first nanosecond at which the balance over
 * the events cut there is at or below the threshold. Before the fix it
 * was the end of the batch's last record, up to an hour late.
 */
START_TEST(test_alert_crossed_at_is_when_the_balance_crosses)
{
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c = fresh("crossed", col);
    mpq_t level;
    mpq_t at;
    mpq_t before;
    size_t i;

    mpq_inits(level, at, before, NULL);
    burn(s, "student-b", "burn-", JAN_11, 30);
    ingest(c, col, s, 7);
    ck_assert_uint_eq(col->n, 3);
    for (i = 0; i < col->n; i++) {
        decimal_q(level, col->alerts[i].threshold);
        balance_at(s, col->alerts[i].crossed_at, at);
        balance_at(s, col->alerts[i].crossed_at - 1, before);
        ck_assert_msg(mpq_cmp(at, level) <= 0 && mpq_cmp(before, level) > 0,
                      "alert %d%%: crossed_at is not when the balance reaches %s",
                      col->alerts[i].pct, col->alerts[i].threshold);
    }
    mpq_clears(level, at, before, NULL);
    drop_catalog(col);
    its_free(s);
    free(s);
    free(col);
    itdb_drop(c, db);
}
END_TEST

/* The example's accounts with a 20.00 CNY top-up for student-b from 2026-01-12, into @path. */
static void topup_accounts(const char *path)
{
    char src[1024];
    json_error_t jerr;
    json_t *root;

    its_example_path(src, sizeof(src), "accounts.json");
    root = json_load_file(src, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", src, jerr.text);
    json_array_append_new(json_object_get(root, "grants"),
                          json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:i}", "id",
                                    "topup-student-b", "account", "student-b", "amount", "20.00",
                                    "granted_at", "2026-01-12T00:00:00Z", "expires_at",
                                    "2026-03-01T00:00:00Z", "applies_to", "usage", "priority", 0));
    ck_assert_int_eq(json_dump_file(root, path, 0), 0);
    json_decref(root);
}

/*
 * student-b burns its 10.00 trial (three alerts), then gets a 20.00
 * top-up and burns on: the three thresholds of the new total (30.00) are
 * crossed too, although every threshold of the trial is recorded as sent
 * (the trial and the top-up valid together are another credit).
 */
START_TEST(test_alerts_again_after_a_top_up)
{
    its_stream *s = calloc(1, sizeof(*s));
    its_stream *more = calloc(1, sizeof(*more));
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c = fresh("topup", col);
    char book[1024];
    char accounts[256];
    bs_load_counts k;
    bs_error err;
    size_t i;

    burn(s, "student-b", "trial-", JAN_11, 15);
    ingest(c, col, s, 4);
    ck_assert_uint_eq(col->n, 3);
    its_example_path(book, sizeof(book), "pricebook.json");
    snprintf(accounts, sizeof(accounts), "itest_alerts-topup-%ld.json", (long)getpid());
    topup_accounts(accounts);
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s", err.message);
    remove(accounts);
    drop_catalog(col);
    col->cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(col->cat != NULL, "%s", err.message);
    /* 30 records (24.00) from 01-12: the top-up's 20.00 runs out at the 25th. */
    burn(more, "student-b", "topup-", JAN_11 + 86400, 30);
    ingest(c, col, more, 4);
    ck_assert_uint_eq(col->n, 6);
    for (i = 3; i < 6; i++)
        ck_assert_int_eq(col->alerts[i].pct, pcts[i - 3]);
    ck_assert_str_eq(col->alerts[5].event_id, "topup-24");
    drop_catalog(col);
    its_free(s);
    its_free(more);
    free(s);
    free(more);
    free(col);
    itdb_drop(c, db);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Events out of month order                                               */
/* ---------------------------------------------------------------------- */

/* A grant of the accounts file own_catalog writes. */
typedef struct test_grant {
    const char *id;
    const char *amount;
    const char *from;
    const char *to;
} test_grant;

/*
 * The example's price book with its prices in force from 2025-11-01Z (so
 * that December 2025 has prices) into @book, and one account @account
 * (UTC, no tax) with @grants into @accounts; both loaded into @c.
 */
static void own_catalog(bs_conn *c, const char *account, const test_grant *grants, size_t n,
                        char *book, char *accounts)
{
    char src[1024];
    json_error_t jerr;
    json_t *root;
    json_t *list;
    bs_load_counts k;
    bs_error err;
    size_t i;

    snprintf(book, 256, "itest_alerts-book-%ld.json", (long)getpid());
    snprintf(accounts, 256, "itest_alerts-own-%ld.json", (long)getpid());
    its_example_path(src, sizeof(src), "pricebook.json");
    root = json_load_file(src, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", src, jerr.text);
    json_object_set_new(json_array_get(json_object_get(root, "versions"), 0), "effective_from",
                        json_string("2025-11-01T00:00:00Z"));
    /* The issuer's logo path is relative to the example's folder. */
    json_object_del(root, "issuer");
    ck_assert_int_eq(json_dump_file(root, book, 0), 0);
    json_decref(root);
    root = json_pack("{s:[{s:s, s:s, s:s, s:s}], s:[]}", "accounts", "id", account, "currency",
                     "CNY", "time_zone", "UTC", "tax_rate", "0", "grants");
    ck_assert_ptr_nonnull(root);
    list = json_object_get(root, "grants");
    for (i = 0; i < n; i++)
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:i}", "id", grants[i].id, "account",
                            account, "amount", grants[i].amount, "granted_at", grants[i].from,
                            "expires_at", grants[i].to, "applies_to", "usage", "priority", 0));
    ck_assert_int_eq(json_dump_file(root, accounts, 0), 0);
    json_decref(root);
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s", err.message);
}

/* A record of @qty RTX 4090 (0.60 CNY per GPU-hour) for @account over [@start, +@minutes). */
static void gpu_event(its_stream *s, const char *id, const char *account, const char *start,
                      int minutes, const char *qty)
{
    char line[512];
    char end[40];
    billing_time_t t;

    ck_assert_int_eq(billing_time_parse(start, &t, NULL, 0), BILLING_OK);
    billing_time_format(t + (billing_time_t)minutes * 60 * BILLING_NS_PER_SEC, end, sizeof(end));
    snprintf(line, sizeof(line),
             "{\"id\":\"%s\",\"account\":\"%s\",\"resource\":\"i-%s\",\"meter\":\"gpu\","
             "\"start\":\"%s\",\"end\":\"%s\",\"quantity\":\"%s\",\"model\":\"RTX4090\","
             "\"region\":\"cn-east-1\"}",
             id, account, id, start, end, qty);
    ck_assert_uint_lt(s->n, ITS_MAX_RECORDS);
    s->rec[s->n] = strdup(line);
    s->len[s->n] = strlen(line);
    s->key[s->n++] = account;
}

/* @col's alerts as a sorted, distinct list of alert_ids; count in *@n. Fails on a repeat. */
static char **alert_ids(const collector *col, size_t *n)
{
    char **ids = calloc(col->n + 1, sizeof(*ids));
    size_t i;

    ck_assert_ptr_nonnull(ids);
    for (i = 0; i < col->n; i++)
        ids[i] = strdup(col->alerts[i].alert_id);
    qsort(ids, col->n, sizeof(*ids), str_cmp);
    for (i = 1; i < col->n; i++)
        ck_assert_msg(strcmp(ids[i - 1], ids[i]) != 0, "alert %s sent twice", ids[i]);
    *n = col->n;
    return ids;
}

static void ids_free(char **ids, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

static void cut_balance(billing_catalog *cat, const char *account, const its_stream *s,
                        billing_time_t at, billing_time_t read, mpq_t out);

/* The catalog of @book and @accounts as `billing rate` reads it (zones in @zones). */
static billing_catalog *file_catalog(billing_config_zones *zones, const char *book,
                                     const char *accounts)
{
    char err[MSG];
    billing_catalog *cat = billing_catalog_new();

    ck_assert_msg(billing_config_pricebook_load(cat, book, err, sizeof(err)) == BILLING_OK, "%s",
                  err);
    ck_assert_msg(billing_config_accounts_load(cat, zones, accounts, err, sizeof(err)) ==
                      BILLING_OK,
                  "%s", err);
    return cat;
}

/*
 * Alert @x reached its threshold at crossed_at over @s (the events stored
 * when it was decided): the usage before it leaves the balance (read at
 * its last nanosecond before) at or below the threshold, the usage before
 * one nanosecond earlier above it. When crossed_at is where its credit
 * became valid (@at_bound), the balance was that low from the start: only
 * the first half holds.
 */
static void crossed_when_reached(billing_catalog *cat, const its_stream *s, const seen_alert *x,
                                 int at_bound)
{
    billing_time_t t = x->crossed_at;
    mpq_t level;
    mpq_t at;
    mpq_t before;

    mpq_inits(level, at, before, NULL);
    decimal_q(level, x->threshold);
    cut_balance(cat, x->account, s, t, at_bound ? t : t - 1, at);
    ck_assert_msg(mpq_cmp(at, level) <= 0, "alert %s: not at or below %s at crossed_at",
                  x->alert_id, x->threshold);
    if (!at_bound) {
        cut_balance(cat, x->account, s, t - 1, t - 2, before);
        ck_assert_msg(mpq_cmp(before, level) > 0, "alert %s: already at or below %s before",
                      x->alert_id, x->threshold);
    }
    mpq_clears(level, at, before, NULL);
}

/* The four events (Jan 60, Dec 27.50, Dec 55, Jan 72) for @account. */
static void out_of_order_events(its_stream *s, const char *account)
{
    gpu_event(s, "jan-60", account, "2026-01-10T00:00:00Z", 60, "100");
    gpu_event(s, "dec-27.50", account, "2025-12-10T00:00:00Z", 50, "55");
    gpu_event(s, "dec-55", account, "2025-12-20T00:00:00Z", 100, "55");
    gpu_event(s, "jan-72", account, "2026-01-20T00:00:00Z", 60, "120");
}

/*
 * The account: 100.00 of credit, no tax; 60.00 used in January,
 * then 27.50 and 55.00 in December, then 72.00 in January: the credit is
 * used up (`billing rate --at 2026-01-31` shows 0). Batches of 1 and of 4
 * both send exactly one 50%, one 80% and one 100% alert. Before, the
 * events were read in arrival order each at its own instant: December,
 * read after January, saw the balance go back up (50% sent again, with
 * another balance) and the last January event started from 0 (no 100%).
 */
START_TEST(test_alerts_once_each_when_months_arrive_out_of_order)
{
    static const test_grant grant = {"g100", "100.00", "2025-12-01T00:00:00Z",
                                     "2026-03-01T00:00:00Z"};
    static const size_t batches[] = {1, 4};
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    billing_config_zones *zones;
    billing_catalog *cat;
    char book[256];
    char accounts[256];
    char **ids;
    bs_conn *c;
    bs_error err;
    size_t n;
    size_t b;
    size_t i;

    out_of_order_events(s, "ooo");
    for (b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
        c = itdb_fresh("ooo", db, sizeof(db));
        own_catalog(c, "ooo", &grant, 1, book, accounts);
        memset(col, 0, sizeof(*col));
        col->cat = bs_catalog_read(c, NULL, &err);
        ck_assert_msg(col->cat != NULL, "%s", err.message);
        ingest(c, col, s, batches[b]);
        ids = alert_ids(col, &n);
        ck_assert_msg(n == 3, "batches of %zu: %zu alerts, not 3", batches[b], n);
        ck_assert_str_eq(ids[0], "ooo/100pct/100/g100");
        ck_assert_str_eq(ids[1], "ooo/50pct/100/g100");
        ck_assert_str_eq(ids[2], "ooo/80pct/100/g100");
        for (i = 0; i < col->n; i++) {
            if (col->alerts[i].pct == 100)
                ck_assert_str_eq(col->alerts[i].balance, "0");
        }
        /* All four stored when decided: crossed_at is when they reach each level. */
        if (batches[b] == 4) {
            zones = billing_config_zones_new();
            cat = file_catalog(zones, book, accounts);
            for (i = 0; i < col->n; i++)
                crossed_when_reached(cat, s, &col->alerts[i], 0);
            billing_catalog_destroy(cat);
            billing_config_zones_destroy(zones);
        }
        ids_free(ids, n);
        drop_catalog(col);
        itdb_drop(c, db);
        remove(book);
        remove(accounts);
    }
    its_free(s);
    free(s);
    free(col);
}
END_TEST

/* The late account's six records, in their arrival order (see the test below). */
static void late_events(its_stream *s)
{
    gpu_event(s, "late-jan02", "late", "2026-01-02T10:00:00Z", 60, "50");
    gpu_event(s, "late-jan30", "late", "2026-01-30T10:00:00Z", 60, "10");
    gpu_event(s, "late-jan05", "late", "2026-01-05T10:00:00Z", 60, "50");
    gpu_event(s, "late-jan31", "late", "2026-01-31T10:00:00Z", 60, "1");
    gpu_event(s, "late-jan20", "late", "2026-01-20T00:00:00Z", 60, "40");
    gpu_event(s, "late-jan12", "late", "2026-01-12T10:00:00Z", 60, "20");
}

/*
 * The crossing's window is read back from the batch's latest usage (a
 * day, then four times more, then whole months): a late event, far
 * before the stored ones, can put the crossing back there, and the window
 * must then reach it. 100.00 of credit from December; batches of 2, 2, 1
 * and 1 records, each alert decided over the events stored by then: Jan 2
 * 30.00 and Jan 30 6.00 (36 used), then Jan 5 30.00 with Jan 31 0.60
 * (50 % reached inside the Jan 5 event, 26 days before the batch's latest
 * usage: every step back is taken), Jan 20 24.00 (80 % inside it), Jan 12
 * 12.00 (100 % inside the Jan 30 event, after the batch's).
 * Each alert's crossed_at is where the balance over the events stored
 * then reaches its threshold, its event the one running there. A check
 * that took the day before the latest usage as its window without
 * checking the balance above the threshold there fails it.
 */
START_TEST(test_alerts_window_reaches_a_late_crossing)
{
    static const test_grant grant = {"g100", "100.00", "2025-12-01T00:00:00Z",
                                     "2026-03-01T00:00:00Z"};
    static const char *const by[] = {"late-jan05", "late-jan20", "late-jan30"};
    static const size_t sizes[] = {2, 2, 1, 1};
    its_stream *s = calloc(1, sizeof(*s));
    its_stream *stored = calloc(1, sizeof(*stored));
    collector *col = calloc(1, sizeof(*col));
    billing_config_zones *zones;
    billing_catalog *cat;
    char book[256];
    char accounts[256];
    bs_conn *c;
    bs_error err;
    size_t i;

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(stored);
    ck_assert_ptr_nonnull(col);
    late_events(s);
    c = itdb_fresh("late", db, sizeof(db));
    own_catalog(c, "late", &grant, 1, book, accounts);
    col->cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(col->cat != NULL, "%s", err.message);
    ingest_sized(c, col, s, sizes, sizeof(sizes) / sizeof(sizes[0]));
    ck_assert_uint_eq(col->n, 3);
    zones = billing_config_zones_new();
    cat = file_catalog(zones, book, accounts);
    for (i = 0; i < col->n; i++) {
        ck_assert_int_eq(col->alerts[i].pct, i == 0 ? 50 : i == 1 ? 80 : 100);
        ck_assert_uint_eq(col->alerts[i].stored, i + 4);
        ck_assert_str_eq(col->alerts[i].event_id, by[i]);
        /* The events stored when it was decided, and no others. */
        memcpy(stored, s, sizeof(*s));
        stored->n = col->alerts[i].stored;
        crossed_when_reached(cat, stored, &col->alerts[i], 0);
    }
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
    drop_catalog(col);
    itdb_drop(c, db);
    remove(book);
    remove(accounts);
    its_free(s);
    free(s);
    free(stored);
    free(col);
}
END_TEST

/*
 * billing.credit_alerts is written by the runtime role in the batch's
 * transaction: a batch that fails after its alerts went out leaves no row
 * (its rerun sends the same alert_ids again: the documented repeat), a
 * committed one leaves one row per alert, and replaying the events sends
 * nothing. The role can append and read, not change or delete.
 */
START_TEST(test_alerts_recorded_with_their_batch)
{
    static const test_grant grant = {"g100", "100.00", "2025-12-01T00:00:00Z",
                                     "2026-03-01T00:00:00Z"};
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c = itdb_fresh("recorded", db, sizeof(db));
    char book[256];
    char accounts[256];
    bs_error err;
    size_t i;

    out_of_order_events(s, "ooo");
    own_catalog(c, "ooo", &grant, 1, book, accounts);
    remove(book);
    remove(accounts);
    col->cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(col->cat != NULL, "%s", err.message);
    itdb_exec(c, "GRANT billing_app TO CURRENT_USER");
    itdb_exec(c, "SET ROLE billing_app");
    col->fail_once = 1;
    ingest(c, col, s, 4);
    /* Three alerts, sent twice: by the failed run and by the committed one. */
    ck_assert_uint_eq(col->n, 6);
    for (i = 0; i < 3; i++)
        ck_assert_str_eq(col->alerts[i].alert_id, col->alerts[i + 3].alert_id);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.credit_alerts"), 3);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.credit_alerts WHERE"
                                  " alert_id = 'ooo/100pct/100/g100' AND balance = 0"
                                  " AND grants = '{g100}' AND event_id <> ''"),
                     1);
    col->n = 0;
    ingest(c, col, s, 1);
    ck_assert_uint_eq(col->n, 0);
    ck_assert_int_ne(bs_command(c, "DELETE FROM billing.credit_alerts", 0, NULL, NULL, &err),
                     BS_OK);
    ck_assert_int_ne(bs_command(c, "UPDATE billing.credit_alerts SET pct = 1", 0, NULL, NULL, &err),
                     BS_OK);
    itdb_exec(c, "RESET ROLE");
    drop_catalog(col);
    its_free(s);
    free(s);
    free(col);
    itdb_drop(c, db);
}
END_TEST

static char *recorded_alerts(bs_conn *c);

/*
 * A batch's alerts are recorded in one INSERT (bs_sent_alerts_record):
 * each field stored exactly (crossed_at to the nanosecond, before 1970
 * too), an alert_id repeated in the call written once (its first) and
 * flagged written once, one already stored flagged not written (so not
 * sent again), and no call for none.
 */
START_TEST(test_alerts_recorded_in_one_statement)
{
    static const test_grant grant = {"g100", "100.00", "2025-12-01T00:00:00Z",
                                     "2026-03-01T00:00:00Z"};
    bs_sent_alert a[3];
    int inserted[3];
    bs_conn *c = itdb_fresh("many", db, sizeof(db));
    char book[256];
    char accounts[256];
    bs_error err;
    char *rows;
    size_t i;

    own_catalog(c, "ooo", &grant, 1, book, accounts);
    remove(book);
    remove(accounts);
    memset(a, 0, sizeof(a));
    for (i = 0; i < 3; i++) {
        a[i].account = "ooo";
        a[i].granted = "100";
        a[i].grants = "{g100,\"g \\\"2\\\"\"}";
        a[i].event_id = i == 1 ? "" : "ev-1";
    }
    a[0].alert_id = "ooo/50pct/100/g100";
    a[0].pct = 50;
    a[0].threshold = "50";
    a[0].balance = "49.5";
    a[0].crossed_at = INT64_C(1768089600123456789);
    a[1].alert_id = "ooo/80pct/100/g100";
    a[1].pct = 80;
    a[1].threshold = "20";
    a[1].balance = "19.25";
    a[1].crossed_at = -INT64_C(1500); /* 1969-12-31T23:59:59.9999985Z */
    a[2] = a[0];
    a[2].balance = "1";
    inserted[0] = inserted[1] = inserted[2] = 7;
    ck_assert_int_eq(bs_sent_alerts_record(c, a, 3, inserted, &err), BS_OK);
    ck_assert_int_eq(inserted[0], 1);
    ck_assert_int_eq(inserted[1], 1);
    ck_assert_int_eq(inserted[2], 0);
    rows = recorded_alerts(c);
    ck_assert_str_eq(rows, "ooo/50pct/100/g100|ooo|50|100|{g100,\"g \\\"2\\\"\"}|50|49.5|"
                           "2026-01-11 00:00:00.123456+00|789|ev-1\n"
                           "ooo/80pct/100/g100|ooo|80|100|{g100,\"g \\\"2\\\"\"}|20|19.25|"
                           "1969-12-31 23:59:59.999998+00|500|\n");
    free(rows);
    /* Stored already (another transaction's, or an earlier batch's): not written again. */
    a[0].alert_id = "ooo/100pct/100/g100";
    a[0].pct = 100;
    ck_assert_int_eq(bs_sent_alerts_record(c, &a[0], 2, inserted, &err), BS_OK);
    ck_assert_int_eq(inserted[0], 1);
    ck_assert_int_eq(inserted[1], 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.credit_alerts"), 3);
    ck_assert_int_eq(bs_sent_alerts_record(c, a, 0, inserted, &err), BS_OK);
    itdb_drop(c, db);
}
END_TEST

/* The grants of the property test: windows that overlap, start and end inside usage. */
static const test_grant prop_grants[] = {
    {"ga", "50.00", "2025-12-01T00:00:00Z", "2026-02-01T00:00:00Z"},
    {"gb", "30.00", "2026-01-15T00:00:00Z", "2026-03-15T00:00:00Z"},
    {"gc", "40.00", "2026-02-10T00:00:00Z", "2026-04-01T00:00:00Z"},
    /* Inside gb's and gc's windows: gb+gc is valid before it and again after it. */
    {"gd", "20.00", "2026-03-05T00:00:00Z", "2026-03-10T00:00:00Z"},
};
#define PROP_GRANTS (sizeof(prop_grants) / sizeof(prop_grants[0]))

/* Grant @g's bounds. */
static void grant_window(size_t g, billing_time_t *from, billing_time_t *to)
{
    ck_assert_int_eq(billing_time_parse(prop_grants[g].from, from, NULL, 0), BILLING_OK);
    ck_assert_int_eq(billing_time_parse(prop_grants[g].to, to, NULL, 0), BILLING_OK);
}

/* libbilling's balance of @account over @s cut at @at, read at @read: `billing rate --at`. */
static void cut_balance(billing_catalog *cat, const char *account, const its_stream *s,
                        billing_time_t at, billing_time_t read, mpq_t out)
{
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    char text[256];
    size_t i;

    ck_assert_int_eq(billing_rater_new(cat, &r, NULL, 0), BILLING_OK);
    for (i = 0; i < s->n; i++) {
        ck_assert_int_eq(bc_event_parse_json(ev, s->rec[i], s->len[i], NULL, 0), BILLING_OK);
        if (billing_event_start(ev) >= at)
            continue;
        if (billing_event_end(ev) > at)
            billing_event_set_interval(ev, billing_event_start(ev), at);
        ck_assert_int_eq(billing_rater_add(r, ev, NULL, 0), BILLING_OK);
    }
    ck_assert_int_eq(billing_rater_credit_balance(r, account, read, text, sizeof(text)),
                     BILLING_OK);
    decimal_q(out, text);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
}

static int row_cmp(const void *x, const void *y)
{
    return strcmp(x, y);
}

/*
 * The alerts @s implies, straight from libbilling: for each span with the
 * same grants valid (credit epoch), the balance at its latest usage
 * instant (`billing rate --at` there, the epoch's lowest); each threshold
 * of its credit at or above it is one alert. Sorted alert_ids in @out.
 */
static size_t expected_alerts(billing_catalog *cat, const its_stream *s, char out[][128])
{
    billing_time_t bounds[2 * PROP_GRANTS];
    billing_event *ev = billing_event_new();
    char ids[128];
    billing_time_t lo;
    billing_time_t hi;
    billing_time_t last;
    billing_time_t from;
    billing_time_t to;
    size_t n_out = 0;
    size_t e;
    size_t g;
    size_t i;
    size_t p;
    int total;
    mpq_t bal;
    mpq_t level;

    mpq_inits(bal, level, NULL);
    for (g = 0; g < PROP_GRANTS; g++)
        grant_window(g, &bounds[2 * g], &bounds[2 * g + 1]);
    qsort(bounds, 2 * PROP_GRANTS, sizeof(bounds[0]), time_cmp);
    for (e = 0; e + 1 < 2 * PROP_GRANTS; e++) {
        lo = bounds[e];
        hi = bounds[e + 1];
        last = lo;
        for (i = 0; i < s->n; i++) {
            ck_assert_int_eq(bc_event_parse_json(ev, s->rec[i], s->len[i], NULL, 0), BILLING_OK);
            if (billing_event_start(ev) < hi && billing_event_end(ev) > lo) {
                to = billing_event_end(ev) < hi ? billing_event_end(ev) : hi;
                last = to > last ? to : last;
            }
        }
        if (last == lo || lo == hi)
            continue; /* no usage in this epoch */
        total = 0;
        ids[0] = '\0';
        for (g = 0; g < PROP_GRANTS; g++) {
            grant_window(g, &from, &to);
            if (from <= lo && lo < to) {
                total += atoi(prop_grants[g].amount);
                snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s%s",
                         ids[0] != '\0' ? "+" : "", prop_grants[g].id);
            }
        }
        if (total == 0)
            continue;
        cut_balance(cat, "prop", s, last, last - 1, bal);
        for (p = 0; p < 3; p++) {
            mpq_set_ui(level, (unsigned long)(total * (100 - pcts[p])), 100);
            if (mpq_cmp(bal, level) <= 0) {
                ck_assert_uint_lt(n_out, 64);
                snprintf(out[n_out++], 128, "prop/%dpct/%d/%s", pcts[p], total, ids);
            }
        }
    }
    qsort(out, n_out, 128, row_cmp);
    /* The same credit valid again later is the same alert. */
    for (i = 0, p = 0; i < n_out; i++) {
        if (p == 0 || strcmp(out[i], out[p - 1]) != 0)
            memmove(out[p++], out[i], 128);
    }
    n_out = p;
    billing_event_destroy(ev);
    mpq_clears(bal, level, NULL);
    return n_out;
}
/* Is @t a bound of one of prop_grants? */
static int prop_bound(billing_time_t t)
{
    billing_time_t from;
    billing_time_t to;
    size_t g;

    for (g = 0; g < PROP_GRANTS; g++) {
        grant_window(g, &from, &to);
        if (t == from || t == to)
            return 1;
    }
    return 0;
}

/* crossed_when_reached over the first x->stored records of @s: those stored when it was sent. */
static void crossed_over_prefix(billing_catalog *cat, const its_stream *s, const seen_alert *x)
{
    its_stream *prefix = calloc(1, sizeof(*prefix));
    size_t i;

    ck_assert_ptr_nonnull(prefix);
    for (i = 0; i < x->stored; i++) {
        prefix->rec[i] = s->rec[i];
        prefix->len[i] = s->len[i];
        prefix->key[i] = s->key[i];
    }
    prefix->n = x->stored;
    crossed_when_reached(cat, prefix, x, prop_bound(x->crossed_at));
    free(prefix); /* the records are @s's */
}

/* Rounds of the property test: each a fresh database. */
#define PROP_ROUNDS 10

/* "prop"'s events: several months, some across a grant's bound or a month's, one without credit. */
static void prop_events(its_stream *s)
{
    gpu_event(s, "nov-20", "prop", "2025-11-20T00:00:00Z", 60, "5");
    gpu_event(s, "dec-05", "prop", "2025-12-05T00:00:00Z", 60, "20");
    gpu_event(s, "dec-20", "prop", "2025-12-20T00:00:00Z", 60, "25");
    gpu_event(s, "jan-10", "prop", "2026-01-10T00:00:00Z", 60, "10");
    gpu_event(s, "jan-14", "prop", "2026-01-14T23:00:00Z", 120, "10");
    gpu_event(s, "jan-20", "prop", "2026-01-20T00:00:00Z", 60, "30");
    gpu_event(s, "jan-31", "prop", "2026-01-31T23:30:00Z", 60, "10");
    gpu_event(s, "feb-05", "prop", "2026-02-05T00:00:00Z", 60, "10");
    gpu_event(s, "feb-09", "prop", "2026-02-09T23:00:00Z", 120, "5");
    gpu_event(s, "feb-12", "prop", "2026-02-12T00:00:00Z", 60, "20");
    gpu_event(s, "mar-01", "prop", "2026-03-01T00:00:00Z", 60, "30");
    gpu_event(s, "mar-07", "prop", "2026-03-07T00:00:00Z", 60, "10");
    gpu_event(s, "mar-12", "prop", "2026-03-12T00:00:00Z", 60, "10");
    gpu_event(s, "mar-20", "prop", "2026-03-20T00:00:00Z", 60, "15");
    gpu_event(s, "mar-25", "prop", "2026-03-25T00:00:00Z", 60, "40");
}

/* @s in the order of a random permutation into @out. */
static void shuffled(const its_stream *s, its_stream *out, uint64_t *rng)
{
    size_t idx[ITS_MAX_RECORDS];
    size_t i;
    size_t j;
    size_t t;

    for (i = 0; i < s->n; i++)
        idx[i] = i;
    for (i = s->n; i > 1; i--) {
        j = (size_t)(test_rnd(rng) % i);
        t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
    for (i = 0; i < s->n; i++) {
        out->rec[i] = strdup(s->rec[idx[i]]);
        out->len[i] = s->len[idx[i]];
        out->key[i] = s->key[idx[i]];
    }
    out->n = s->n;
}

/*
 * Property: "prop"'s events (several months, four grants whose windows
 * overlap, events across their bounds, a credit valid in two epochs) in
 * random orders and random batch sizes always send the same alerts, each
 * once, and exactly those that libbilling's balances imply: per span
 * with the same grants valid, each threshold at or above the balance at
 * its latest usage; each crossed_at is when the events stored then reach
 * its threshold. Before, the alerts depended on the order (a threshold
 * lost or sent twice).
 */
START_TEST(test_alerts_same_for_any_order_and_batches)
{
    static char expected[64][128];
    its_stream *s = calloc(1, sizeof(*s));
    its_stream *perm = calloc(1, sizeof(*perm));
    collector *col = calloc(1, sizeof(*col));
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *cat;
    uint64_t rng = UINT64_C(0x9e3779b97f4a7c15);
    size_t sizes[ITS_MAX_RECORDS];
    char book[256];
    char accounts[256];
    size_t n_expected;
    size_t round;
    size_t n;
    size_t i;
    char **ids;
    bs_conn *c;
    bs_error err;

    prop_events(s);
    for (round = 0; round < PROP_ROUNDS; round++) {
        c = itdb_fresh("prop", db, sizeof(db));
        own_catalog(c, "prop", prop_grants, PROP_GRANTS, book, accounts);
        if (round == 0) {
            cat = file_catalog(zones, book, accounts);
            n_expected = expected_alerts(cat, s, expected);
            billing_catalog_destroy(cat);
            /* Thresholds of several credits, not all of each: the property has teeth. */
            ck_assert_uint_ge(n_expected, 6);
        }
        memset(col, 0, sizeof(*col));
        col->cat = bs_catalog_read(c, NULL, &err);
        ck_assert_msg(col->cat != NULL, "%s", err.message);
        shuffled(s, perm, &rng);
        for (i = 0; i < perm->n; i++)
            sizes[i] = 1 + (size_t)(test_rnd(&rng) % (round % 2 == 0 ? 3 : perm->n));
        ingest_sized(c, col, perm, sizes, perm->n);
        ids = alert_ids(col, &n);
        for (i = 0; i < n && i < n_expected; i++)
            ck_assert_msg(strcmp(ids[i], expected[i]) == 0, "round %zu: alert %s, expected %s",
                          round, ids[i], expected[i]);
        ck_assert_msg(n == n_expected, "round %zu: %zu alerts, expected %zu", round, n, n_expected);
        ids_free(ids, n);
        cat = file_catalog(zones, book, accounts);
        for (i = 0; i < col->n; i++)
            crossed_over_prefix(cat, perm, &col->alerts[i]);
        billing_catalog_destroy(cat);
        its_free(perm);
        drop_catalog(col);
        itdb_drop(c, db);
        remove(book);
        remove(accounts);
    }
    billing_config_zones_destroy(zones);
    its_free(s);
    free(s);
    free(perm);
    free(col);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* The credit states kept between batches                                  */
/* ---------------------------------------------------------------------- */

/* The message of one_batch's last failed batch. */
static char batch_err[MSG];

/* A batch's records, as one_batch gives them to the ingest (they stay valid until it is done). */
typedef struct batch_bufs {
    unsigned char bufs[64][BILLING_EVENT_WIRE_MAX];
    bs_record recs[64];
    bs_record_result res[64];
} batch_bufs;

/*
 * Ingest records [@from, @to) of @s in one batch through @b on @c, with
 * the alert hook @fn (@arg; NULL: without, as `billing ingest`); then,
 * when @before_done is not NULL, call it with @arg before the batch is
 * done in the cache (as billingd, after the COMMIT).
 */
static bs_status batch_on(batch_bufs *b, bs_conn *c, collector *col, const its_stream *s,
                          size_t from, size_t to, bs_ingest_hook fn, void *arg,
                          void (*before_done)(void *))
{
    char err_text[MSG];
    billing_event *ev = billing_event_new();
    bs_ingest *in = bs_ingest_new(col->cat, NULL);
    bs_error err;
    bs_status st;
    size_t i;

    ck_assert_uint_le(to - from, 64);
    for (i = from; i < to; i++) {
        memset(&b->recs[i - from], 0, sizeof(b->recs[0]));
        ck_assert_int_eq(bc_event_parse_json(ev, s->rec[i], s->len[i], err_text, sizeof(err_text)),
                         BILLING_OK);
        ck_assert_int_eq(
            billing_event_encode(ev, b->bufs[i - from], sizeof(b->bufs[0]), &b->recs[i - from].len),
            BILLING_OK);
        b->recs[i - from].data = b->bufs[i - from];
        b->recs[i - from].format = BS_RECORD_PROTOBUF;
        b->recs[i - from].source = "test";
    }
    if (fn != NULL)
        bs_ingest_set_hook(in, fn, arg);
    st = bs_ingest_batch(in, c, b->recs, to - from, NULL, 0, 0, b->res, NULL, &err);
    if (st != BS_OK)
        snprintf(batch_err, sizeof(batch_err), "%s", err.message);
    if (before_done != NULL)
        before_done(arg);
    if (fn != NULL)
        bd_alert_cache_done(col->cache, c, st == BS_OK);
    bs_ingest_free(in);
    billing_event_destroy(ev);
    return st;
}

/* Ingest records [@from, @to) of @s in one batch with the alert hook (@hooked) or without. */
static bs_status one_batch(bs_conn *c, collector *col, const its_stream *s, size_t from, size_t to,
                           int hooked)
{
    static batch_bufs b;

    return batch_on(&b, c, col, s, from, to, hooked ? hook : NULL, col, NULL);
}

/* The alerts recorded, every field but sent_at, in alert_id order (caller frees). */
static char *recorded_alerts(bs_conn *c)
{
    return itdb_text(c, "SELECT alert_id, account_id, pct, granted, grants, threshold, balance,"
                        " crossed_at, crossed_nanos, event_id FROM billing.credit_alerts"
                        " ORDER BY alert_id COLLATE \"C\"");
}

/* The alerts a plan recorded on @c (caller frees); then its catalog, stream and database go. */
static char *plan_done(bs_conn *c, collector *col, its_stream *s)
{
    char *out = recorded_alerts(c);

    drop_catalog(col);
    its_free(s);
    free(s);
    free(col);
    itdb_drop(c, db);
    return out;
}

/* plan_done, what the cache did (if any) into @stats first. */
static char *plan_done_stats(bs_conn *c, collector *col, its_stream *s, bd_alert_cache_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    if (col->cache != NULL)
        bd_alert_cache_stats_get(col->cache, stats);
    return plan_done(c, col, s);
}

/*
 * student-b's trial (10.00; 0.80 a record) through batches with and
 * without the alert hook, a restart, a batch rolled back, a top-up loaded
 * between batches and a late event; the alerts recorded with @cached
 * states kept, or without. What the cache did into @stats[0] (before the
 * restart) and @stats[1] (after the load).
 */
static char *cache_plan(int cached, bd_alert_cache_stats *stats)
{
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c;
    char book[1024];
    char accounts[256];
    bs_load_counts k;
    bs_error err;
    size_t i;

    with_cache = cached;
    c = fresh("cache", col);
    burn(s, "student-b", "r-", JAN_11, 17);
    burn(s, "student-b", "early-", JAN_11 - 3600, 1);
    memset(stats, 0, 2 * sizeof(*stats));
    /* One record a batch, in order: 50% is crossed by r-06, found from the state. */
    for (i = 0; i < 7; i++)
        ck_assert_int_eq(one_batch(c, col, s, i, i + 1, 1), BS_OK);
    ck_assert_uint_eq(col->n, 1);
    /* Another writer: r-07, r-08 stored without a check (7.20 used). */
    ck_assert_int_eq(one_batch(c, col, s, 7, 9, 0), BS_OK);
    /* r-09 takes it to 8.00: 80% due only counting what the other writer stored. */
    ck_assert_int_eq(one_batch(c, col, s, 9, 10, 1), BS_OK);
    ck_assert_uint_eq(col->n, 2);
    if (col->cache != NULL)
        bd_alert_cache_stats_get(col->cache, &stats[0]);
    /* A restart: the states are lost. */
    bd_alert_cache_free(col->cache);
    col->cache = NULL;
    ck_assert_int_eq(one_batch(c, col, s, 10, 11, 1), BS_OK);
    /* r-11, r-12 (100% due) in a batch that fails after its check, then again. */
    col->fail_fatal = 1;
    ck_assert_int_ne(one_batch(c, col, s, 11, 13, 1), BS_OK);
    ck_assert_int_eq(one_batch(c, col, s, 11, 13, 1), BS_OK);
    /* A 20.00 top-up loaded between batches, before the catalog is read again. */
    its_example_path(book, sizeof(book), "pricebook.json");
    snprintf(accounts, sizeof(accounts), "itest_alerts-cache-%ld.json", (long)getpid());
    topup_accounts(accounts);
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s", err.message);
    remove(accounts);
    ck_assert_int_eq(one_batch(c, col, s, 13, 14, 1), BS_OK);
    if (col->cache != NULL)
        bd_alert_cache_stats_get(col->cache, &stats[1]);
    /* Then read again, as billingd on the load's notification. */
    bd_alert_cache_free(col->cache);
    col->cache = NULL;
    bs_catalog_free(col->cat);
    col->cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(col->cat != NULL, "%s", err.message);
    ck_assert_int_eq(one_batch(c, col, s, 14, 16, 1), BS_OK);
    /* A late event: before everything stored. */
    ck_assert_int_eq(one_batch(c, col, s, 16, 18, 1), BS_OK);
    return plan_done(c, col, s);
}

/*
 * The same alerts, every field, with the states kept and without; and
 * the states were used (the 50% found from one, nothing read back), found
 * stale after the other writer and after the load.
 */
START_TEST(test_alerts_same_with_states_kept)
{
    bd_alert_cache_stats plain[2];
    bd_alert_cache_stats kept[2];
    char *without = cache_plan(0, plain);
    char *with = cache_plan(1, kept);

    ck_assert_str_eq(with, without);
    /* 50% at r-06, 80% at r-09 (its 2.00 reached at its end), 100% at r-12. */
    ck_assert_ptr_nonnull(strstr(without, "student-b/50pct/10/trial-student-b|"));
    ck_assert_ptr_nonnull(strstr(without, "|r-06\n"));
    ck_assert_ptr_nonnull(strstr(without, "|2|2|2026-01-11 01:39:56.25+00|0|r-09"));
    ck_assert_ptr_nonnull(strstr(without, "|r-12"));
    /* From the states: r-01 to r-06 (the 50% among them); stale after the other writer. */
    ck_assert_uint_ge(kept[0].fast, 6);
    ck_assert_uint_ge(kept[0].stale, 1);
    /* After the load: stale by its grants alone (no event was written). */
    ck_assert_uint_ge(kept[1].stale, 1);
    ck_assert_uint_eq(plain[0].fast + plain[1].fast, 0);
    free(without);
    free(with);
}
END_TEST

/*
 * student-b's trial (10.00; 0.80 a record) a record a batch, with @cached
 * states kept or without: a batch checked from the state fails after its
 * check and is rolled back, another fails once and runs again on its
 * connection (a retry), each around a crossing (50% at r-06, 80% at r-09).
 * The alerts recorded; what the cache did into @stats.
 */
static char *rollback_plan(int cached, bd_alert_cache_stats *stats)
{
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c;
    size_t i;

    with_cache = cached;
    c = fresh("rollback", col);
    burn(s, "student-b", "r-", JAN_11, 17);
    for (i = 0; i < 5; i++)
        ck_assert_int_eq(one_batch(c, col, s, i, i + 1, 1), BS_OK);
    /* r-05, r-06 (50% due): checked, then rolled back twice, then stored. */
    col->fail_fatal = 1;
    ck_assert_int_ne(one_batch(c, col, s, 5, 7, 1), BS_OK);
    col->fail_fatal = 1;
    ck_assert_int_ne(one_batch(c, col, s, 5, 7, 1), BS_OK);
    ck_assert_int_eq(one_batch(c, col, s, 5, 7, 1), BS_OK);
    ck_assert_int_eq(one_batch(c, col, s, 7, 8, 1), BS_OK);
    /* r-08, r-09 (80% due): the batch fails once after its check and runs again. */
    col->fail_once = 1;
    ck_assert_int_eq(one_batch(c, col, s, 8, 10, 1), BS_OK);
    for (i = 10; i < 17; i++)
        ck_assert_int_eq(one_batch(c, col, s, i, i + 1, 1), BS_OK);
    return plan_done_stats(c, col, s, stats);
}

/*
 * A batch checked from a state keeps its events there for when it
 * commits (no second add): rolled back or tried again, the state is as
 * before it, so the alerts are the walk's, every field.
 */
START_TEST(test_alerts_same_after_a_rollback_from_the_state)
{
    bd_alert_cache_stats plain;
    bd_alert_cache_stats kept;
    char *without = rollback_plan(0, &plain);
    char *with = rollback_plan(1, &kept);

    ck_assert_str_eq(with, without);
    ck_assert_ptr_nonnull(strstr(without, "|r-06\n"));
    ck_assert_ptr_nonnull(strstr(without, "|r-09"));
    ck_assert_ptr_nonnull(strstr(without, "|r-12"));
    /* The failed batches were checked from the state, and rolled back. */
    ck_assert_uint_ge(kept.fast, 10);
    ck_assert_uint_ge(kept.rollbacks, 2);
    /* And the state served again after each: warmed once, by the first batch. */
    ck_assert_uint_eq(kept.warmed, 1);
    /* With every alert sent (100% at r-12), the state went at once (never found stale). */
    ck_assert_uint_eq(kept.accounts, 0);
    ck_assert_uint_eq(kept.stale, 0);
    free(without);
    free(with);
}
END_TEST

/*
 * Two connections' batches of one account, ordered by events (no sleep):
 * A's batch is checked (from the state, when kept: the state is then
 * busy with it) and waits, uncommitted, until B's batch on another
 * connection (rows no lock of A's holds: another month) was checked; B
 * is done in the cache only after A.
 */
typedef struct two {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: A checked; 2: B checked; 3: A committed and done in the cache */
    collector *col;
    bs_conn *cb; /* B's connection */
    const its_stream *s;
    size_t b_from; /* B's records */
    size_t b_to;
    bs_status b_st;
} two;

/* Raise @t's stage to @stage (and tell whoever waits). */
static void two_set(two *t, int stage)
{
    pthread_mutex_lock(&t->mu);
    if (t->stage < stage)
        t->stage = stage;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Wait until @t's stage is @stage or later. */
static void two_wait(two *t, int stage)
{
    pthread_mutex_lock(&t->mu);
    while (t->stage < stage)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

/* A's hook: the check, stage 1, then (before A's COMMIT) wait for B's check. */
static bs_status hook_a(void *arg, bs_conn *c, const bs_record *recs,
                        const bs_record_result *results, size_t n, bs_error *err)
{
    two *t = arg;
    bs_status st = hook(t->col, c, recs, results, n, err);

    two_set(t, 1);
    two_wait(t, 2);
    return st;
}

/* B's hook: the check, then stage 2. */
static bs_status hook_b(void *arg, bs_conn *c, const bs_record *recs,
                        const bs_record_result *results, size_t n, bs_error *err)
{
    two *t = arg;
    bs_status st = hook(t->col, c, recs, results, n, err);

    two_set(t, 2);
    return st;
}

/* B committed: done in the cache once A was. */
static void b_before_done(void *arg)
{
    two_wait(arg, 3);
}

/* B's batch, on its own connection and thread. */
static void *run_b(void *arg)
{
    two *t = arg;
    batch_bufs *b = malloc(sizeof(*b));

    ck_assert_ptr_nonnull(b);
    two_wait(t, 1);
    t->b_st = batch_on(b, t->cb, t->col, t->s, t->b_from, t->b_to, hook_b, t, b_before_done);
    /* Failed before its check: A is not left waiting. */
    two_set(t, 2);
    free(b);
    return NULL;
}

/*
 * student-b's trial (10.00) a record a batch, with @cached states kept or
 * without: r-00 to r-04, then r-05 (A, this connection) and feb-00 (B,
 * another connection, February 5) ordered as struct two says, then r-06
 * to r-16. The alerts recorded; what the cache did into @stats.
 */
static char *busy_plan(int cached, bd_alert_cache_stats *stats)
{
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    batch_bufs *b = malloc(sizeof(*b));
    two t;
    pthread_t th;
    bs_conn *c;
    size_t i;

    ck_assert_ptr_nonnull(b);
    with_cache = cached;
    c = fresh("busy", col);
    burn(s, "student-b", "r-", JAN_11, 17);
    burn(s, "student-b", "feb-", JAN_11 + 25 * 86400, 1);
    for (i = 0; i < 5; i++)
        ck_assert_int_eq(one_batch(c, col, s, i, i + 1, 1), BS_OK);
    memset(&t, 0, sizeof(t));
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    t.col = col;
    t.cb = itdb_connect(db);
    t.s = s;
    t.b_from = 17;
    t.b_to = 18;
    /* B starts once A was checked, and is checked before A commits. */
    ck_assert_int_eq(pthread_create(&th, NULL, run_b, &t), 0);
    ck_assert_int_eq(batch_on(b, c, col, s, 5, 6, hook_a, &t, NULL), BS_OK);
    two_set(&t, 3);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(t.b_st, BS_OK);
    bs_close(t.cb);
    pthread_cond_destroy(&t.cv);
    pthread_mutex_destroy(&t.mu);
    for (i = 7; i < 17; i++)
        ck_assert_int_eq(one_batch(c, col, s, i, i + 1, 1), BS_OK);
    free(b);
    return plan_done_stats(c, col, s, stats);
}

/*
 * The busy state: another connection's batch (B, feb-00) checked while
 * the state holds a batch (A, r-05) not yet committed drops the state and
 * walks the account over what its transaction sees (not A's events). On
 * A's state, with A's events, B would send the 50% at feb-00; the walk
 * sends it later, at r-07. The alerts are those without states, every
 * field; a later batch warms the state again.
 */
START_TEST(test_alerts_busy_state_walked_by_another_connection)
{
    bd_alert_cache_stats plain;
    bd_alert_cache_stats kept;
    char *without = busy_plan(0, &plain);
    char *with = busy_plan(1, &kept);

    ck_assert_str_eq(with, without);
    ck_assert_ptr_nonnull(strstr(without, "|50|10|{trial-student-b}|5|3.6|"));
    ck_assert_ptr_nonnull(strstr(without, "|r-07\n"));
    /* B found the state busy (counted stale) and walked; a later batch warmed it again. */
    ck_assert_uint_ge(kept.stale, 1);
    ck_assert_uint_ge(kept.warmed, 2);
    free(without);
    free(with);
}
END_TEST

/*
 * A stored event libbilling refuses (a resource id past its 128 bytes,
 * written by psql) among those a warmed state reads once: the batch
 * fails with libbilling's reason and the event named, not a bare
 * "not accepted".
 */
START_TEST(test_alerts_warm_read_names_a_refused_stored_event)
{
    its_stream *s = calloc(1, sizeof(*s));
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c;

    with_cache = 1;
    c = fresh("refused", col);
    burn(s, "student-b", "r-", JAN_11, 2);
    /* Another writer first: the hooked batch is not all it stored, so its state reads them. */
    ck_assert_int_eq(one_batch(c, col, s, 0, 1, 0), BS_OK);
    itdb_exec(c, "INSERT INTO billing.usage_events (event_id, account_id, resource_id, meter,"
                 " start_time, end_time, quantity, model) VALUES ('refused-1', 'student-b',"
                 " repeat('x', 200), 'gpu', '2026-01-11 00:00:00+00', '2026-01-11 00:10:00+00',"
                 " 8, 'RTX4090')");
    ck_assert_int_ne(one_batch(c, col, s, 1, 2, 1), BS_OK);
    ck_assert_msg(strstr(batch_err, "stored event 'refused-1': ") != NULL, "%s", batch_err);
    ck_assert_msg(strstr(batch_err, "account 'student-b'") != NULL, "%s", batch_err);
    free(plan_done(c, col, s));
}
END_TEST

/* The example's events (examples/gpu-cloud/events.jsonl) into @s, in file order. */
static void example_events(its_stream *s)
{
    char path[1024];
    char line[4096];
    FILE *f;

    its_example_path(path, sizeof(path), "events.jsonl");
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0')
            continue;
        ck_assert_uint_lt(s->n, ITS_MAX_RECORDS);
        s->rec[s->n] = strdup(line);
        s->len[s->n] = strlen(line);
        s->key[s->n++] = "example";
    }
    fclose(f);
}

/* The alerts recorded for @s in batches of @batch, with states kept (@cached) or not. */
static char *example_alerts(int cached, const its_stream *s, size_t batch,
                            bd_alert_cache_stats *stats)
{
    collector *col = calloc(1, sizeof(*col));
    bs_conn *c;
    char *out;

    with_cache = cached;
    c = fresh("example", col);
    ingest(c, col, s, batch);
    memset(stats, 0, sizeof(*stats));
    if (col->cache != NULL)
        bd_alert_cache_stats_get(col->cache, stats);
    out = recorded_alerts(c);
    drop_catalog(col);
    free(col);
    itdb_drop(c, db);
    return out;
}

/*
 * The example's month (three trials, plans with included usage, storage
 * and traffic) in random orders and batches of 40 and 150: the same
 * alerts, every field, with the states kept and without, also when an
 * alert is due in a batch with late events.
 */
START_TEST(test_alerts_same_with_states_kept_out_of_order)
{
    static const size_t batches[] = {40, 150};
    its_stream *s = calloc(1, sizeof(*s));
    its_stream *perm = calloc(1, sizeof(*perm));
    uint64_t rng = UINT64_C(0x2545f4914f6cdd1d);
    bd_alert_cache_stats plain;
    bd_alert_cache_stats kept;
    uint64_t used = 0;
    char *without;
    char *with;
    size_t round;
    size_t b;

    example_events(s);
    ck_assert_uint_gt(s->n, 100);
    for (round = 0; round < 2; round++) {
        shuffled(s, perm, &rng);
        for (b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
            without = example_alerts(0, perm, batches[b], &plain);
            with = example_alerts(1, perm, batches[b], &kept);
            ck_assert_msg(strcmp(with, without) == 0,
                          "round %zu, batches of %zu:\nkept:\n%s\nwithout:\n%s", round, batches[b],
                          with, without);
            ck_assert_uint_gt(strlen(without), 0);
            used += kept.fast;
            free(without);
            free(with);
        }
        its_free(perm);
    }
    /* The states were used. */
    ck_assert_uint_gt(used, 0);
    its_free(s);
    free(s);
    free(perm);
}
END_TEST

/* The late account's database (100.00 of credit from December), its catalog's files. */
typedef struct late_db {
    bs_conn *c;
    char book[256];
    char accounts[256];
} late_db;

/* A fresh database @name for the late account into @ld, its catalog in @col (states: @cached). */
static void late_open(int cached, const char *name, collector *col, late_db *ld)
{
    static const test_grant grant = {"g100", "100.00", "2025-12-01T00:00:00Z",
                                     "2026-03-01T00:00:00Z"};
    bs_error err;

    with_cache = cached;
    ld->c = itdb_fresh(name, db, sizeof(db));
    own_catalog(ld->c, "late", &grant, 1, ld->book, ld->accounts);
    memset(col, 0, sizeof(*col));
    col->cat = bs_catalog_read(ld->c, NULL, &err);
    ck_assert_msg(col->cat != NULL, "%s", err.message);
}

/* What the cache did (if any) into @stats; then @ld's catalog, database and files go. */
static void late_close(collector *col, late_db *ld, bd_alert_cache_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    if (col->cache != NULL)
        bd_alert_cache_stats_get(col->cache, stats);
    drop_catalog(col);
    itdb_drop(ld->c, db);
    remove(ld->book);
    remove(ld->accounts);
}

/*
 * The late account's alerts over @s in batches of @sizes, states kept
 * (@cached) or not; its first @other records stored first by another
 * writer (no check, as `billing ingest`), each batch after them alone.
 */
static void late_alerts_after(int cached, const its_stream *s, size_t other, const size_t *sizes,
                              size_t n_sizes, collector *col, bd_alert_cache_stats *stats)
{
    late_db ld;
    bs_conn *c;

    late_open(cached, "lstate", col, &ld);
    c = ld.c;
    if (other == 0) {
        ingest_sized(c, col, s, sizes, n_sizes);
    } else {
        size_t b = 0;
        size_t i;
        size_t n;

        ck_assert_int_eq(one_batch(c, col, s, 0, other, 0), BS_OK);
        for (i = other; i < s->n; i += n) {
            n = s->n - i < sizes[b % n_sizes] ? s->n - i : sizes[b % n_sizes];
            b++;
            col->stored = i + n;
            ck_assert_int_eq(one_batch(c, col, s, i, i + n, 1), BS_OK);
        }
    }
    late_close(col, &ld, stats);
}

/* late_alerts_after with no other writer. */
static void late_alerts(int cached, const its_stream *s, const size_t *sizes, size_t n_sizes,
                        collector *col, bd_alert_cache_stats *stats)
{
    late_alerts_after(cached, s, 0, sizes, n_sizes, col, stats);
}

/* Every field of @with's alerts is @without's. */
static void same_seen(const collector *with, const collector *without)
{
    const seen_alert *x;
    const seen_alert *y;
    size_t i;

    ck_assert_uint_eq(with->n, without->n);
    for (i = 0; i < without->n; i++) {
        x = &with->alerts[i];
        y = &without->alerts[i];
        ck_assert_str_eq(x->alert_id, y->alert_id);
        ck_assert_str_eq(x->event_id, y->event_id);
        ck_assert_str_eq(x->balance, y->balance);
        ck_assert_str_eq(x->threshold, y->threshold);
        ck_assert_int_eq(x->crossed_at, y->crossed_at);
        ck_assert_int_eq(x->exhausted, y->exhausted);
        ck_assert_uint_eq(x->stored, y->stored);
    }
}

/*
 * A late event's crossing searched on the kept state: the late account of
 * test_alerts_window_reaches_a_late_crossing (batches of 2, 2, 1 and 1,
 * each later one holding an event before the state's latest usage, the
 * 100 % crossed inside an event an earlier batch stored) gives the same
 * alerts, every field, with the state as without, and the state served
 * all three: warmed once by the first batch, never walked again (each
 * alert searched over a window on the state with its batch's events). The
 * first batch was all the account ever stored, so the state keeps its
 * events and each batch's after: the three windows come from them, none
 * is read back from the store (h46). A search on the state without the
 * batch's events, or on a state the search left changed, fails it.
 */
START_TEST(test_alerts_late_crossing_searched_on_the_state)
{
    static const size_t sizes[] = {2, 2, 1, 1};
    its_stream *s = calloc(1, sizeof(*s));
    collector *with = calloc(1, sizeof(*with));
    collector *without = calloc(1, sizeof(*without));
    bd_alert_cache_stats kept;
    bd_alert_cache_stats plain;

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(with);
    ck_assert_ptr_nonnull(without);
    late_events(s);
    late_alerts(0, s, sizes, sizeof(sizes) / sizeof(sizes[0]), without, &plain);
    late_alerts(1, s, sizes, sizeof(sizes) / sizeof(sizes[0]), with, &kept);
    ck_assert_uint_eq(without->n, 3);
    same_seen(with, without);
    ck_assert_str_eq(without->alerts[2].event_id, "late-jan30");
    /* Warmed by the first batch only; the three late alerts found on the state, over its events. */
    ck_assert_uint_eq(kept.warmed, 1);
    ck_assert_uint_eq(kept.windows, 0);
    ck_assert_uint_eq(kept.kept, 3);
    ck_assert_uint_eq(kept.unkept, 0);
    ck_assert_uint_eq(kept.fast, 3);
    ck_assert_uint_eq(plain.warmed + plain.windows + plain.fast, 0);
    its_free(s);
    free(s);
    free(with);
    free(without);
}
END_TEST

/*
 * The late account of test_alerts_late_crossing_searched_on_the_state in
 * batches of 2, 2, 1 and 1, states kept (@cached) or not, its second
 * batch (the 50 % alert, late: searched over a window) checked and
 * rolled back once, then checked, failed once and tried again on its
 * connection, before it commits.
 */
static void late_alerts_rolled_back(int cached, const its_stream *s, collector *col,
                                    bd_alert_cache_stats *stats)
{
    late_db ld;
    bs_conn *c;

    late_open(cached, "lroll", col, &ld);
    c = ld.c;
    col->stored = 2;
    ck_assert_int_eq(one_batch(c, col, s, 0, 2, 1), BS_OK);
    col->stored = 4;
    col->fail_fatal = 1;
    ck_assert_int_ne(one_batch(c, col, s, 2, 4, 1), BS_OK);
    col->fail_once = 1;
    ck_assert_int_eq(one_batch(c, col, s, 2, 4, 1), BS_OK);
    col->stored = 5;
    ck_assert_int_eq(one_batch(c, col, s, 4, 5, 1), BS_OK);
    col->stored = 6;
    ck_assert_int_eq(one_batch(c, col, s, 5, 6, 1), BS_OK);
    late_close(col, &ld, stats);
}

/*
 * A batch checked from a state copies its events into the state's kept
 * events at the check, while they are in the processor's cache (h59), not
 * at commit: a rollback or a retry takes the copies back out with the
 * batch. late_alerts_rolled_back: its later two alerts are searched over
 * windows of the kept events (no read-back), which hold each stored event
 * once, so every field of every alert (those of the attempts that failed
 * too) is the walk's. Copies left behind by the rollback or the retry
 * count the 50 % batch's events two or three times in those windows and
 * fail it.
 */
START_TEST(test_alerts_kept_copies_go_with_a_rollback)
{
    its_stream *s = calloc(1, sizeof(*s));
    collector *with = calloc(1, sizeof(*with));
    collector *without = calloc(1, sizeof(*without));
    bd_alert_cache_stats kept;
    bd_alert_cache_stats plain;

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(with);
    ck_assert_ptr_nonnull(without);
    late_events(s);
    late_alerts_rolled_back(0, s, without, &plain);
    late_alerts_rolled_back(1, s, with, &kept);
    /* 50 % three times (two attempts failed), then 80 % and 100 %. */
    ck_assert_uint_eq(without->n, 5);
    same_seen(with, without);
    ck_assert_str_eq(without->alerts[4].event_id, "late-jan30");
    /* Every alert found on the state, over its kept events; nothing dropped or read back. */
    ck_assert_uint_eq(kept.warmed, 1);
    ck_assert_uint_eq(kept.windows, 0);
    ck_assert_uint_eq(kept.kept, 5);
    ck_assert_uint_eq(kept.unkept, 0);
    ck_assert_uint_ge(kept.rollbacks, 1);
    its_free(s);
    free(s);
    free(with);
    free(without);
}
END_TEST

/*
 * The states' kept events and their bounds (h46): the late account of
 * test_alerts_late_crossing_searched_on_the_state, every field of its
 * three alerts equal to those without states in each case:
 *  - bound 4 events: the first two batches (4 events) are kept and the
 *    first late alert placed over them; the third batch's would pass it,
 *    so after it commits the events go (unkept) and its own alert was
 *    still placed over them; the last one's window is read back;
 *  - bound 0: nothing kept, each window read back;
 *  - two events stored first by another writer (a check that starts on
 *    a database already holding the account's events: billingd
 *    restarted): the first checked batch is not all the account stored
 *    (its counter says so), so the walk that warms its state reads its
 *    stored events of its epoch once (h51: one query, with the batch's),
 *    and each later window on the state (two: the first alert is the
 *    walk's) is placed over them, none read back. Keeping that batch's
 *    events alone would miss the other two: the 100 % alert is reached
 *    inside one of them (late-jan30), and the alerts would differ; so
 *    would keeping the two read without the batch's;
 *  - the same with a bound of 3 events: the read (four events) passes
 *    it, nothing is kept, and the two windows are read back (issue 24).
 */
START_TEST(test_alerts_late_crossing_kept_events_bounded)
{
    static const size_t sizes[] = {2, 2, 1, 1};
    static const size_t after[] = {2, 1, 1};
    its_stream *s = calloc(1, sizeof(*s));
    collector *with = calloc(1, sizeof(*with));
    collector *without = calloc(1, sizeof(*without));
    bd_alert_cache_stats st;
    bd_alert_cache_stats plain;

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(with);
    ck_assert_ptr_nonnull(without);
    late_events(s);
    late_alerts(0, s, sizes, 4, without, &plain);
    ck_assert_uint_eq(without->n, 3);

    cache_events = 4;
    late_alerts(1, s, sizes, 4, with, &st);
    same_seen(with, without);
    ck_assert_uint_eq(st.warmed, 1);
    ck_assert_uint_eq(st.kept, 2);
    ck_assert_uint_eq(st.windows, 1);
    ck_assert_uint_eq(st.unkept, 1);

    cache_events = 0;
    late_alerts(1, s, sizes, 4, with, &st);
    same_seen(with, without);
    ck_assert_uint_eq(st.warmed, 1);
    ck_assert_uint_eq(st.kept, 0);
    ck_assert_uint_eq(st.windows, 3);
    ck_assert_uint_eq(st.unkept, 1);

    cache_events = BD_CACHE_EVENTS_DEFAULT;
    late_alerts_after(0, s, 2, after, 3, without, &plain);
    ck_assert_uint_eq(without->n, 3);
    late_alerts_after(1, s, 2, after, 3, with, &st);
    same_seen(with, without);
    ck_assert_uint_eq(st.warmed, 1);
    /* Read once when warmed; the first checked batch's alert is the walk's, two over the state. */
    ck_assert_uint_eq(st.read, 1);
    ck_assert_uint_eq(st.kept, 2);
    ck_assert_uint_eq(st.unkept, 0);
    ck_assert_uint_eq(st.windows, 0);

    cache_events = 3;
    late_alerts_after(1, s, 2, after, 3, with, &st);
    same_seen(with, without);
    ck_assert_uint_eq(st.warmed, 1);
    ck_assert_uint_eq(st.read, 1);
    ck_assert_uint_eq(st.kept, 0);
    ck_assert_uint_eq(st.unkept, 1);
    ck_assert_uint_eq(st.windows, 2);
    cache_events = BD_CACHE_EVENTS_DEFAULT;
    its_free(s);
    free(s);
    free(with);
    free(without);
}
END_TEST

static void cache_on(void)
{
    with_cache = 1;
}

/* The tests run without and with the credit states kept (a test case each). */
static void add_common(TCase *tc)
{
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_alerts_past_256_accounts_in_one_batch);
    tcase_add_test(tc, test_alerts_same_for_every_batch_size);
    tcase_add_test(tc, test_alert_crossed_at_is_when_the_balance_crosses);
    tcase_add_test(tc, test_alerts_again_after_a_top_up);
    tcase_add_test(tc, test_alerts_once_each_when_months_arrive_out_of_order);
    tcase_add_test(tc, test_alerts_same_for_any_order_and_batches);
    tcase_add_test(tc, test_alerts_recorded_with_their_batch);
    tcase_add_test(tc, test_alerts_window_reaches_a_late_crossing);
    tcase_add_test(tc, test_alerts_recorded_in_one_statement);
}

static Suite *alerts_suite(void)
{
    Suite *s = suite_create("alerts");
    TCase *tc = tcase_create("postgresql");

    add_common(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("postgresql-cache");
    tcase_add_checked_fixture(tc, cache_on, NULL);
    add_common(tc);
    tcase_add_test(tc, test_alerts_same_with_states_kept);
    tcase_add_test(tc, test_alerts_same_with_states_kept_out_of_order);
    tcase_add_test(tc, test_alerts_same_after_a_rollback_from_the_state);
    tcase_add_test(tc, test_alerts_busy_state_walked_by_another_connection);
    tcase_add_test(tc, test_alerts_warm_read_names_a_refused_stored_event);
    tcase_add_test(tc, test_alerts_late_crossing_searched_on_the_state);
    tcase_add_test(tc, test_alerts_kept_copies_go_with_a_rollback);
    tcase_add_test(tc, test_alerts_late_crossing_kept_events_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(alerts_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
