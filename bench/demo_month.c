/*
 * demo_month.c - a realistic month (January 2026, Asia/Shanghai) of the
 * GPU cloud for scripts/demo.sh: its accounts, its usage produced to
 * Kafka, and the credit alerts billingd published, read back.
 *
 *   demo_month accounts [--accounts N] [--seed S]          > accounts.json
 *   demo_month produce  [--accounts N] [--seed S] [--partitions P] BROKERS TOPIC
 *   demo_month topic    [--partitions P] BROKERS TOPIC
 *   demo_month alerts   BROKERS TOPIC                       > alerts.tsv
 *
 * Deterministic: the same --accounts and --seed give the same accounts
 * and the same records in the same order. Every account draws from its
 * own generator (seeded by S and its index), so `accounts` and `produce`
 * agree without sharing state. Integers only: quantities are written as
 * decimal text.
 *
 * The cloud (prices: examples/gpu-cloud/pricebook.json):
 * - students (20%, tax 0): a 10.00 trial credit at sign-up, valid 30
 *   days. Those who signed up in December use little of it in January,
 *   so it expires with a remainder. The others run sessions of one
 *   GPU-less setup hour then 1-3 hours of 8x RTX 4090 (4.80 an hour)
 *   until the trial is gone and beyond, on a disk billed every day,
 *   resized mid-month for a third of them.
 * - labs (15%): an a100x8-monthly subscription (included GPU-hours) on
 *   an instance that runs in stretches of hours, plus A100 bursts on a
 *   second instance (a GPU-less hour first), a 2 TB disk resized to 4 TB
 *   mid-month and billed while the instances are off.
 * - teams (65%): pay-as-you-go RTX 4090 runs, a third with daily passes
 *   (rtx4090x8-daily) overrun by an hour or two, a 500 GB disk.
 * - everyone: daily traffic records in bytes (zero-rated).
 * - about 0.3% of the records sent twice (identical: duplicates), and
 *   N/250 (at least 1) records of each malformed kind: bytes that are
 *   not protobuf (parse), an unknown account (unknown_account), an end
 *   before its start (invalid), a model without a price (no_price), a
 *   known id with other content (conflict).
 *
 * `produce` creates TOPIC with P partitions (default 4) when missing,
 * sends the records keyed by account with an idempotent producer in the
 * order of their end time, and prints on stdout what it sent and each
 * partition's end offset ("end_offset P OFFSET"): the positions billingd
 * has committed once it has caught up. `alerts` prints every
 * billing.v1.CreditAlert of TOPIC as a tab-separated line: alert_id,
 * account, kind, threshold, balance, currency, crossed_at (UTC).
 */
#include "config.h"

#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "billing.h"
#include "billing/v1/credit_alert.pb-c.h"

/* 2026-01-01T00:00:00+08:00 and the month's length. */
#define MONTH_START INT64_C(1767196800)
#define DAY 86400
#define HOUR 3600
#define MONTH_DAYS 31
#define MONTH_END (MONTH_START + MONTH_DAYS * DAY)
/* Bounds: ids of 5 digits; the accounts file stays small. */
#define ACCOUNTS_MAX 99999
#define PARTITIONS_MAX 256
#define ERRSTR 512
#define TIMEOUT_MS 30000
/* Replays: one record in REPLAY_EVERY is sent twice. */
#define REPLAY_EVERY 300
#define MALFORMED_PER 250

typedef enum kind {
    K_OK,
    K_REPLAY,
    K_PARSE,
    K_UNKNOWN_ACCOUNT,
    K_INVALID,
    K_NO_PRICE,
    K_CONFLICT,
    K_COUNT
} kind;

static const char *const kind_names[K_COUNT] = {"ok",      "replay",   "parse",   "unknown_account",
                                                "invalid", "no_price", "conflict"};

typedef enum acct_type { A_STUDENT, A_LAB, A_TEAM } acct_type;

/* One account's draw: everything `accounts` writes and `produce` needs. */
typedef struct acct {
    acct_type type;
    int index;
    char id[16];
    uint64_t rng;
    int64_t signup;    /* students: the trial's grant instant */
    int64_t sub_start; /* labs and teams with passes */
    int terms;         /* 0: no subscription */
} acct;

typedef struct rec {
    int64_t sortkey; /* when the control plane sends it */
    int64_t start;
    int64_t end;
    uint32_t seq;
    int acct; /* index, or -1: an unknown account */
    billing_meter meter;
    kind kind;
    const char *model;
    char resource[24];
    char qty[24];
} rec;

typedef struct recs {
    rec *v;
    size_t n;
    size_t cap;
} recs;

typedef struct opts {
    const char *cmd;
    int accounts;
    uint64_t seed;
    int partitions;
    const char *brokers;
    const char *topic;
} opts;

typedef struct sent {
    int64_t end_offset[PARTITIONS_MAX];
    long failed;
} sent;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A value in [lo, hi]. */
static int64_t between(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

/* splitmix64: independent, non-zero seeds for each account. */
static uint64_t mix(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    x ^= x >> 31;
    return x != 0 ? x : 1;
}

static void acct_draw(acct *a, const opts *o, int i)
{
    uint64_t pick;

    memset(a, 0, sizeof(*a));
    a->index = i;
    a->rng = mix(o->seed * UINT64_C(1000003) + (uint64_t)i);
    pick = rnd(&a->rng) % 100;
    a->type = pick < 20 ? A_STUDENT : pick < 35 ? A_LAB : A_TEAM;
    snprintf(a->id, sizeof(a->id), "%s-%05d",
             a->type == A_STUDENT ? "stu"
             : a->type == A_LAB   ? "lab"
                                  : "team",
             i + 1);
    if (a->type == A_STUDENT) {
        /* A quarter signed up in December: their trial expires in January. */
        a->signup = MONTH_START + between(&a->rng, -25, 27) * DAY + between(&a->rng, 8, 22) * HOUR;
    } else if (a->type == A_LAB) {
        a->sub_start = MONTH_START + between(&a->rng, 0, 4) * DAY + 9 * HOUR;
        a->terms = 1;
    } else if (rnd(&a->rng) % 3 == 0) {
        a->sub_start = MONTH_START + between(&a->rng, 2, 25) * DAY + 8 * HOUR;
        a->terms = (int)between(&a->rng, 1, 3);
    }
}

static int push(recs *r, int account, const char *resource, billing_meter meter, int64_t start,
                int64_t end, const char *qty, const char *model)
{
    rec *x;

    if (end > MONTH_END)
        end = MONTH_END;
    if (start < MONTH_START)
        start = MONTH_START;
    if (end <= start)
        return 0;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 65536;
        rec *v = realloc(r->v, cap * sizeof(*v));

        if (v == NULL)
            return -1;
        r->v = v;
        r->cap = cap;
    }
    x = &r->v[r->n];
    memset(x, 0, sizeof(*x));
    x->sortkey = end;
    x->start = start;
    x->end = end;
    x->seq = (uint32_t)r->n;
    x->acct = account;
    x->meter = meter;
    x->kind = K_OK;
    x->model = model;
    snprintf(x->resource, sizeof(x->resource), "%s", resource);
    snprintf(x->qty, sizeof(x->qty), "%s", qty);
    r->n++;
    return 0;
}

/* Hourly records of @gpus GPUs (or, with 0, one GPU-less instance) over [from, to). */
static int hours(recs *r, const acct *a, const char *res, int64_t from, int64_t to, int gpus,
                 const char *model)
{
    int64_t t;

    for (t = from; t < to; t += HOUR) {
        if (push(r, a->index, res, gpus ? BILLING_METER_GPU : BILLING_METER_GPULESS, t,
                 t + HOUR < to ? t + HOUR : to, gpus ? "8" : "1", model) != 0)
            return -1;
    }
    return 0;
}

/* A daily disk of @gb GB from @from's day, resized to @gb2 on @resize_day (0: never). */
static int disk(recs *r, acct *a, int64_t from, int gb, int gb2, int resize_day)
{
    char res[24];
    char qty[16];
    int64_t day;
    int d;

    snprintf(res, sizeof(res), "d-%05d", a->index + 1);
    day = from < MONTH_START ? MONTH_START : MONTH_START + (from - MONTH_START) / DAY * DAY;
    for (; day < MONTH_END; day += DAY) {
        d = (int)((day - MONTH_START) / DAY);
        snprintf(qty, sizeof(qty), "%d", resize_day && d >= resize_day ? gb2 : gb);
        if (push(r, a->index, res, BILLING_METER_STORAGE, day, day + DAY, qty, "") != 0)
            return -1;
    }
    return 0;
}

/* Daily zero-rated traffic: the meter counts bytes, up to 90 GB a day. */
static int traffic(recs *r, acct *a)
{
    char res[24];
    char qty[24];
    int64_t day;
    int64_t bytes;

    snprintf(res, sizeof(res), "i-%05d-1", a->index + 1);
    for (day = MONTH_START; day < MONTH_END; day += DAY) {
        bytes = between(&a->rng, 1, 90000) * INT64_C(1000000) + between(&a->rng, 0, 999999);
        snprintf(qty, sizeof(qty), "%" PRId64, bytes);
        if (push(r, a->index, res, BILLING_METER_TRAFFIC, day, day + DAY, qty, "") != 0)
            return -1;
    }
    return 0;
}

/*
 * @n sessions in successive slots from @from: each a GPU-less setup hour
 * (when @setup) then @lo..@hi GPU hours. Slots do not overlap, so no two
 * records of an instance share an id.
 */
static int sessions(recs *r, acct *a, const char *res, int64_t from, int n, int lo, int hi,
                    int setup, const char *model)
{
    int64_t slot = (MONTH_END - from) / (n > 0 ? n : 1);
    int64_t t;
    int64_t len;
    int i;

    for (i = 0; i < n && slot > (hi + 2) * HOUR; i++) {
        t = from + i * slot + between(&a->rng, 0, slot / HOUR - hi - 2) * HOUR;
        len = between(&a->rng, lo, hi) * HOUR;
        if (setup && hours(r, a, res, t, t + HOUR, 0, model) != 0)
            return -1;
        if (setup)
            t += HOUR;
        if (hours(r, a, res, t, t + len, 8, model) != 0)
            return -1;
    }
    return 0;
}

static int gen_student(recs *r, acct *a)
{
    char res[24];
    int64_t from = a->signup < MONTH_START ? MONTH_START : a->signup;
    int resize = rnd(&a->rng) % 3 == 0 ? (int)between(&a->rng, 12, 20) : 0;
    int n = a->signup < MONTH_START ? 1 : (int)between(&a->rng, 2, 4);

    snprintf(res, sizeof(res), "i-%05d-1", a->index + 1);
    from = MONTH_START + (from - MONTH_START + HOUR - 1) / HOUR * HOUR;
    if (disk(r, a, from, 50, 100, resize) != 0)
        return -1;
    /* December sign-ups: one short run, leaving most of the trial to expire. */
    return sessions(r, a, res, from, n, 1, a->signup < MONTH_START ? 1 : 3, 1, "RTX4090");
}

/* The subscribed A100 machine runs in stretches: 8..40 hours on, 2..12 off. */
static int gen_lab_main(recs *r, acct *a)
{
    char res[24];
    int64_t t = a->sub_start;
    int64_t on;

    snprintf(res, sizeof(res), "i-%05d-1", a->index + 1);
    while (t < MONTH_END) {
        on = between(&a->rng, 8, 40) * HOUR;
        if (hours(r, a, res, t, t + on, 8, "A100-80G") != 0)
            return -1;
        t += on + between(&a->rng, 2, 12) * HOUR;
    }
    return 0;
}

static int gen_lab(recs *r, acct *a)
{
    char res[24];

    snprintf(res, sizeof(res), "i-%05d-2", a->index + 1);
    if (gen_lab_main(r, a) != 0)
        return -1;
    if (sessions(r, a, res, MONTH_START, (int)between(&a->rng, 3, 6), 2, 6, 1, "A100-80G") != 0)
        return -1;
    return disk(r, a, MONTH_START, 2000, 4000, (int)between(&a->rng, 10, 20));
}

static int gen_team(recs *r, acct *a)
{
    char res[24];
    int64_t pass_end = a->sub_start + (int64_t)a->terms * DAY;

    snprintf(res, sizeof(res), "i-%05d-1", a->index + 1);
    /* The pass instance runs through its passes and 0..2 hours past them. */
    if (a->terms > 0 &&
        hours(r, a, res, a->sub_start, pass_end + between(&a->rng, 0, 2) * HOUR, 8, "RTX4090"))
        return -1;
    snprintf(res, sizeof(res), "i-%05d-2", a->index + 1);
    if (sessions(r, a, res, MONTH_START, (int)between(&a->rng, 2, 6), 2, 8, (int)(rnd(&a->rng) % 2),
                 "RTX4090") != 0)
        return -1;
    return disk(r, a, MONTH_START, 500, 500, 0);
}

static int gen_account(recs *r, acct *a)
{
    int rc;

    if (a->type == A_STUDENT)
        rc = gen_student(r, a);
    else if (a->type == A_LAB)
        rc = gen_lab(r, a);
    else
        rc = gen_team(r, a);
    return rc != 0 ? rc : traffic(r, a);
}

/* A copy of record @i, sent @delay later, with @k and the changes @k needs. */
static int add_copy(recs *r, size_t i, kind k, int64_t delay)
{
    rec x = r->v[i];

    if (push(r, x.acct, x.resource, x.meter, x.start, x.end, x.qty, x.model) != 0)
        return -1;
    r->v[r->n - 1].sortkey = x.sortkey + delay;
    r->v[r->n - 1].kind = k;
    if (k == K_CONFLICT)
        snprintf(r->v[r->n - 1].qty, sizeof(r->v[0].qty), "%s", "3");
    else if (k == K_NO_PRICE)
        r->v[r->n - 1].model = "H100";
    else if (k == K_UNKNOWN_ACCOUNT)
        r->v[r->n - 1].acct = -1;
    return 0;
}

/* Only the first instance ("i-NNNNN-1") of an account has subscriptions. */
static int unsubscribed(const char *resource)
{
    size_t n = strlen(resource);

    return n > 2 && strcmp(resource + n - 2, "-2") == 0;
}

/* Replays and malformed records, drawn from the good ones with @rng. */
static int add_trouble(recs *r, uint64_t *rng, int accounts, long counts[K_COUNT])
{
    size_t good = r->n;
    long per = accounts / MALFORMED_PER > 0 ? accounts / MALFORMED_PER : 1;
    size_t i;
    int k;
    long j;

    for (i = 0; i < good; i++) {
        if (rnd(rng) % REPLAY_EVERY != 0)
            continue;
        if (add_copy(r, i, K_REPLAY, between(rng, 1, 48) * HOUR) != 0)
            return -1;
        counts[K_REPLAY]++;
    }
    for (k = K_PARSE; k < K_COUNT; k++) {
        for (j = 0; j < per; j++) {
            /*
             * GPU records of a second instance, which no subscription
             * covers: a no_price needs an hourly-priced meter (a plan's
             * instance includes any model, doc/pricing.md).
             */
            do
                i = (size_t)(rnd(rng) % good);
            while (r->v[i].meter != BILLING_METER_GPU || !unsubscribed(r->v[i].resource));
            if (add_copy(r, i, (kind)k, between(rng, 1, 6) * HOUR) != 0)
                return -1;
            counts[k]++;
        }
    }
    return 0;
}

static int by_sortkey(const void *pa, const void *pb)
{
    const rec *a = pa;
    const rec *b = pb;

    if (a->sortkey != b->sortkey)
        return a->sortkey < b->sortkey ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* ---------------------------------------------------------------------- */
/* accounts                                                                */
/* ---------------------------------------------------------------------- */

static void iso(char *buf, size_t size, int64_t t)
{
    time_t local = (time_t)(t + 8 * HOUR);
    struct tm tm;

    gmtime_r(&local, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%S+08:00", &tm);
}

static int print_accounts(const opts *o)
{
    const char *sep = "";
    char t1[40];
    char t2[40];
    acct a;
    int i;

    printf("{\n  \"description\": \"demo_month accounts --accounts %d --seed %" PRIu64
           ": students on a trial, labs on monthly A100 machines, teams\",\n  \"accounts\": [\n",
           o->accounts, o->seed);
    for (i = 0; i < o->accounts; i++) {
        acct_draw(&a, o, i);
        printf("%s    {\"id\": \"%s\", \"currency\": \"CNY\", \"time_zone\": \"Asia/Shanghai\", "
               "\"tax_rate\": \"%s\"}",
               i ? ",\n" : "", a.id, a.type == A_STUDENT ? "0" : "0.06");
    }
    printf("\n  ],\n  \"subscriptions\": [\n");
    for (i = 0; i < o->accounts; i++) {
        acct_draw(&a, o, i);
        if (a.terms == 0)
            continue;
        iso(t1, sizeof(t1), a.sub_start);
        printf("%s    {\"id\": \"sub-%s\", \"account\": \"%s\", \"resource\": \"i-%05d-1\", "
               "\"plan\": \"%s\", \"start\": \"%s\", \"terms\": %d, \"cancelled_at\": null}",
               sep, a.id, a.id, i + 1, a.type == A_LAB ? "a100x8-monthly" : "rtx4090x8-daily", t1,
               a.terms);
        sep = ",\n";
    }
    printf("\n  ],\n  \"grants\": [\n");
    sep = "";
    for (i = 0; i < o->accounts; i++) {
        acct_draw(&a, o, i);
        if (a.type != A_STUDENT)
            continue;
        iso(t1, sizeof(t1), a.signup);
        iso(t2, sizeof(t2), a.signup + 30 * DAY);
        printf("%s    {\"id\": \"trial-%s\", \"account\": \"%s\", \"amount\": \"10.00\", "
               "\"granted_at\": \"%s\", \"expires_at\": \"%s\", \"applies_to\": [\"usage\"], "
               "\"priority\": 0}",
               sep, a.id, a.id, t1, t2);
        sep = ",\n";
    }
    printf("\n  ]\n}\n");
    return fflush(stdout) == 0 ? 0 : 1;
}

/* ---------------------------------------------------------------------- */
/* produce                                                                 */
/* ---------------------------------------------------------------------- */

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    sent *s = opaque;

    (void)rk;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        s->failed++;
        fprintf(stderr, "demo_month: delivery failed: %s\n", rd_kafka_err2str(m->err));
        return;
    }
    if (m->partition >= 0 && m->partition < PARTITIONS_MAX &&
        m->offset + 1 > s->end_offset[m->partition])
        s->end_offset[m->partition] = m->offset + 1;
}

static rd_kafka_t *producer(const opts *o, sent *s)
{
    char errstr[ERRSTR];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;

    /* Idempotent: a retried send is never a second record (nor a duplicate we did not plan). */
    if (rd_kafka_conf_set(conf, "bootstrap.servers", o->brokers, errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "linger.ms", "20", errstr, sizeof(errstr)) ||
        rd_kafka_conf_set(conf, "compression.type", "lz4", errstr, sizeof(errstr))) {
        fprintf(stderr, "demo_month: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_opaque(conf, s);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL)
        fprintf(stderr, "demo_month: %s\n", errstr);
    return rk;
}

/* Create @topic with @partitions partitions; an existing topic is fine. */
static int create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
    char errstr[ERRSTR];
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, 1, errstr, sizeof(errstr));
    const rd_kafka_topic_result_t **res;
    const rd_kafka_CreateTopics_result_t *cr;
    rd_kafka_event_t *ev;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
    size_t n = 0;

    if (nt == NULL) {
        fprintf(stderr, "demo_month: topic '%s': %s\n", topic, errstr);
        rd_kafka_queue_destroy(q);
        return -1;
    }
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_NewTopic_destroy(nt);
    ev = rd_kafka_queue_poll(q, TIMEOUT_MS);
    cr = ev != NULL ? rd_kafka_event_CreateTopics_result(ev) : NULL;
    res = cr != NULL ? rd_kafka_CreateTopics_result_topics(cr, &n) : NULL;
    if (res != NULL && n == 1)
        e = rd_kafka_topic_result_error(res[0]);
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        fprintf(stderr, "demo_month: creating topic '%s': %s\n", topic, rd_kafka_err2str(e));
        return -1;
    }
    return 0;
}

static void record_id(char *buf, size_t size, const rec *x, const acct *accts)
{
    if (x->kind == K_OK || x->kind == K_REPLAY || x->kind == K_CONFLICT)
        snprintf(buf, size, "%s/%s/%s/%" PRId64, accts[x->acct].id, x->resource,
                 x->meter == BILLING_METER_GPU       ? "gpu"
                 : x->meter == BILLING_METER_GPULESS ? "gpuless"
                 : x->meter == BILLING_METER_STORAGE ? "storage"
                                                     : "traffic",
                 x->start);
    else
        snprintf(buf, size, "bad-%s-%" PRIu32, kind_names[x->kind], x->seq);
}

/* The wire bytes of @x into @buf; *@len. */
static int encode(billing_event *ev, const rec *x, const acct *accts, unsigned char *buf,
                  size_t *len)
{
    static const char garbage[] = "\xff\xff\xff\xff not a protobuf UsageEvent";
    char id[96];
    int64_t end = x->kind == K_INVALID ? x->start - HOUR : x->end;

    if (x->kind == K_PARSE) {
        memcpy(buf, garbage, sizeof(garbage) - 1);
        *len = sizeof(garbage) - 1;
        return 0;
    }
    record_id(id, sizeof(id), x, accts);
    billing_event_reset(ev);
    billing_event_set_id(ev, id);
    billing_event_set_account(ev, x->acct >= 0 ? accts[x->acct].id : "ghost-account");
    billing_event_set_resource(ev, x->resource);
    billing_event_set_meter(ev, x->meter);
    billing_event_set_interval(ev, x->start * BILLING_NS_PER_SEC, end * BILLING_NS_PER_SEC);
    billing_event_set_quantity(ev, x->qty, NULL, 0);
    billing_event_set_model(ev, x->model);
    billing_event_set_region(ev, "cn-east-1");
    return billing_event_encode(ev, buf, BILLING_EVENT_WIRE_MAX, len) == BILLING_OK ? 0 : -1;
}

static int send_all(rd_kafka_t *rk, const opts *o, const recs *r, const acct *accts)
{
    unsigned char buf[BILLING_EVENT_WIRE_MAX];
    billing_event *ev = billing_event_new();
    const char *key;
    size_t len;
    size_t i;
    int rc = -1;

    if (ev == NULL)
        return -1;
    for (i = 0; i < r->n; i++) {
        if (encode(ev, &r->v[i], accts, buf, &len) != 0) {
            fprintf(stderr, "demo_month: record %zu does not encode\n", i);
            goto out;
        }
        /* Keyed by account: an account's records stay in order on one partition. */
        key = r->v[i].acct >= 0 ? accts[r->v[i].acct].id : "ghost-account";
        while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(buf, len),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        rd_kafka_poll(rk, 0);
    }
    rc = rd_kafka_flush(rk, 10 * TIMEOUT_MS) == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
out:
    billing_event_destroy(ev);
    return rc;
}

static void report(const opts *o, const recs *r, const acct *accts, const long counts[K_COUNT],
                   const sent *s)
{
    long types[3] = {0, 0, 0};
    long malformed = 0;
    int i;

    for (i = 0; i < o->accounts; i++)
        types[accts[i].type]++;
    for (i = K_PARSE; i < K_COUNT; i++)
        malformed += counts[i];
    printf("accounts %d\nstudents %ld\nlabs %ld\nteams %ld\n", o->accounts, types[A_STUDENT],
           types[A_LAB], types[A_TEAM]);
    printf("records %zu\nevents %ld\nreplays %ld\nmalformed %ld\n", r->n,
           (long)r->n - counts[K_REPLAY] - malformed, counts[K_REPLAY], malformed);
    for (i = K_PARSE; i < K_COUNT; i++)
        printf("malformed.%s %ld\n", kind_names[i], counts[i]);
    for (i = 0; i < o->partitions && i < PARTITIONS_MAX; i++)
        printf("end_offset %d %" PRId64 "\n", i, s->end_offset[i]);
}

static int produce(const opts *o)
{
    long counts[K_COUNT] = {0};
    uint64_t rng = mix(o->seed);
    acct *accts = calloc((size_t)o->accounts, sizeof(*accts));
    recs r = {NULL, 0, 0};
    sent s;
    rd_kafka_t *rk = NULL;
    int rc = 1;
    int i;

    memset(&s, 0, sizeof(s));
    if (accts == NULL)
        goto out;
    for (i = 0; i < o->accounts; i++) {
        acct_draw(&accts[i], o, i);
        if (gen_account(&r, &accts[i]) != 0)
            goto out;
    }
    if (add_trouble(&r, &rng, o->accounts, counts) != 0)
        goto out;
    qsort(r.v, r.n, sizeof(*r.v), by_sortkey);
    rk = producer(o, &s);
    if (rk == NULL || create_topic(rk, o->topic, o->partitions) != 0)
        goto out;
    if (send_all(rk, o, &r, accts) != 0 || s.failed > 0) {
        fprintf(stderr, "demo_month: %ld records not delivered to '%s'\n", s.failed, o->topic);
        goto out;
    }
    report(o, &r, accts, counts, &s);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    if (rk != NULL)
        rd_kafka_destroy(rk);
    free(r.v);
    free(accts);
    if (rc != 0 && r.v == NULL)
        fprintf(stderr, "demo_month: out of memory\n");
    return rc;
}

static int topic_only(const opts *o)
{
    sent s;
    rd_kafka_t *rk;
    int rc;

    memset(&s, 0, sizeof(s));
    rk = producer(o, &s);
    if (rk == NULL)
        return 1;
    rc = create_topic(rk, o->topic, o->partitions) == 0 ? 0 : 1;
    rd_kafka_destroy(rk);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* alerts                                                                  */
/* ---------------------------------------------------------------------- */

static void print_alert(const rd_kafka_message_t *m)
{
    static const char *const kinds[] = {"unspecified", "low", "exhausted", "expired"};
    Billing__V1__CreditAlert *a =
        billing__v1__credit_alert__unpack(NULL, m->len, (const uint8_t *)m->payload);
    char when[40] = "";
    time_t t;
    struct tm tm;

    if (a == NULL) {
        fprintf(stderr, "demo_month: partition %d offset %" PRId64 ": not a CreditAlert\n",
                m->partition, m->offset);
        return;
    }
    if (a->crossed_at != NULL) {
        t = (time_t)a->crossed_at->seconds;
        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a->alert_id, a->account_id,
           a->kind >= 0 && a->kind <= 3 ? kinds[a->kind] : "unknown", a->threshold, a->balance,
           a->currency, when);
    billing__v1__credit_alert__free_unpacked(a, NULL);
}

/* Assign every partition of @o->topic from its start; the high watermarks into @hi. */
static int assign_all(rd_kafka_t *rk, const opts *o, int64_t *hi, int *n)
{
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_topic_partition_list_t *l;
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, o->topic, NULL);
    int64_t lo;
    int i;
    int rc = -1;

    if (t == NULL || rd_kafka_metadata(rk, 0, t, &md, TIMEOUT_MS) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "demo_month: no topic '%s'\n", o->topic);
        goto out;
    }
    *n =
        md->topics[0].partition_cnt < PARTITIONS_MAX ? md->topics[0].partition_cnt : PARTITIONS_MAX;
    l = rd_kafka_topic_partition_list_new(*n);
    for (i = 0; i < *n; i++) {
        if (rd_kafka_query_watermark_offsets(rk, o->topic, i, &lo, &hi[i], TIMEOUT_MS))
            hi[i] = 0;
        rd_kafka_topic_partition_list_add(l, o->topic, i)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rc = rd_kafka_assign(rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
    rd_kafka_topic_partition_list_destroy(l);
out:
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    if (t != NULL)
        rd_kafka_topic_destroy(t);
    return rc;
}

static int read_alerts(const opts *o)
{
    char errstr[ERRSTR];
    int64_t hi[PARTITIONS_MAX];
    int64_t next[PARTITIONS_MAX];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_message_t *m;
    rd_kafka_t *rk;
    int n = 0;
    int done;
    int i;

    memset(next, 0, sizeof(next));
    rd_kafka_conf_set(conf, "bootstrap.servers", o->brokers, errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "group.id", "demo-month-alerts", errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr, sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL || assign_all(rk, o, hi, &n) != 0) {
        if (rk != NULL)
            rd_kafka_destroy(rk);
        return 1;
    }
    for (;;) {
        for (done = 1, i = 0; i < n; i++)
            done &= next[i] >= hi[i];
        if (done)
            break;
        m = rd_kafka_consumer_poll(rk, TIMEOUT_MS);
        if (m == NULL) {
            fprintf(stderr, "demo_month: alerts: nothing for %d s\n", TIMEOUT_MS / 1000);
            break;
        }
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition < n) {
            print_alert(m);
            next[m->partition] = m->offset + 1;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return done && fflush(stdout) == 0 ? 0 : 1;
}

/* ---------------------------------------------------------------------- */

static int usage(void)
{
    fputs("usage: demo_month accounts [--accounts N] [--seed S]\n"
          "       demo_month produce [--accounts N] [--seed S] [--partitions P] BROKERS TOPIC\n"
          "       demo_month topic [--partitions P] BROKERS TOPIC\n"
          "       demo_month alerts BROKERS TOPIC\n",
          stderr);
    return 2;
}

static int parse(opts *o, int argc, char **argv)
{
    char *end;
    long v;
    int i;

    memset(o, 0, sizeof(*o));
    o->accounts = 1000;
    o->seed = 1;
    o->partitions = 4;
    if (argc < 2)
        return -1;
    o->cmd = argv[1];
    for (i = 2; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        v = strtol(argv[i + 1], &end, 10);
        if (*end != '\0' || v < 1) {
            fprintf(stderr, "demo_month: %s '%s': expected a positive integer\n", argv[i],
                    argv[i + 1]);
            return -1;
        }
        if (strcmp(argv[i], "--accounts") == 0 && v <= ACCOUNTS_MAX)
            o->accounts = (int)v;
        else if (strcmp(argv[i], "--seed") == 0)
            o->seed = (uint64_t)v;
        else if (strcmp(argv[i], "--partitions") == 0 && v <= PARTITIONS_MAX)
            o->partitions = (int)v;
        else {
            fprintf(stderr, "demo_month: bad option '%s %s'\n", argv[i], argv[i + 1]);
            return -1;
        }
    }
    if (strcmp(o->cmd, "accounts") == 0)
        return i == argc ? 0 : -1;
    if (argc - i != 2)
        return -1;
    o->brokers = argv[i];
    o->topic = argv[i + 1];
    return 0;
}

int main(int argc, char **argv)
{
    opts o;

    if (parse(&o, argc, argv) != 0)
        return usage();
    if (strcmp(o.cmd, "accounts") == 0)
        return print_accounts(&o);
    if (strcmp(o.cmd, "produce") == 0)
        return produce(&o);
    if (strcmp(o.cmd, "topic") == 0)
        return topic_only(&o);
    if (strcmp(o.cmd, "alerts") == 0)
        return read_alerts(&o);
    return usage();
}
