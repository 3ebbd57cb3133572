/*
 * itest_plumbing.c - integration test of the plumbing billingd will stand
 * on, against the real services of scripts/services.sh:
 *
 *   protobuf UsageEvent -> Kafka (idempotent producer, acks=all)
 *     -> consumer group (manual synchronous commit) -> unpack
 *     -> PostgreSQL (parameterized INSERT, SELECT back).
 *
 * Needs BILLING_KAFKA_BROKERS and BILLING_PG_CONNINFO in the environment
 * (`scripts/services.sh start && . var/services.env`). A missing variable or
 * an unreachable service is a FAILURE, never a skip: a green run must mean
 * the plumbing was exercised.
 *
 * Every wait is bounded (TIMEOUT_MS); the Check timeout is set above the
 * sum. Names (topic, group, table) are unique per run so that runs never
 * see each other's data; the topic is deleted at the end.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "billing/v1/usage_event.pb-c.h"

#define TIMEOUT_MS 30000

/* An error message built by a helper; the test asserts on it after its
 * cleanup has run, so a failure does not leave a topic behind. */
static char failure[1024];

static int fail_with(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail_with(const char *fmt, ...)
{
    va_list ap;

    if (failure[0] != '\0')
        return -1; /* keep the first failure */
    va_start(ap, fmt);
    vsnprintf(failure, sizeof failure, fmt, ap);
    va_end(ap);
    return -1;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *need_env(const char *name)
{
    const char *v = getenv(name);

    ck_assert_msg(v != NULL && v[0] != '\0',
                  "%s is not set: start the services and load their environment "
                  "(scripts/services.sh start && . var/services.env), or run scripts/test.sh",
                  name);
    return v;
}

/* A name no other run uses: pid, wall clock, a counter. */
static void unique_name(char *buf, size_t size, const char *prefix)
{
    static unsigned counter;

    snprintf(buf, size, "%s-%ld-%lld-%u", prefix, (long)getpid(), (long long)time(NULL), counter++);
}

/* ---- Kafka ---------------------------------------------------------- */

static rd_kafka_conf_t *kafka_conf(const char *brokers)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[512];

    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, sizeof errstr) !=
        RD_KAFKA_CONF_OK)
        ck_abort_msg("bootstrap.servers: %s", errstr);
    return conf;
}

static void conf_set(rd_kafka_conf_t *conf, const char *key, const char *value)
{
    char errstr[512];

    if (rd_kafka_conf_set(conf, key, value, errstr, sizeof errstr) != RD_KAFKA_CONF_OK)
        ck_abort_msg("librdkafka %s=%s: %s", key, value, errstr);
}

/* Run one admin request (CreateTopics or DeleteTopics) on rk and wait for
 * its result event. Returns 0 or sets failure. */
static int kafka_admin_topic(rd_kafka_t *rk, const char *topic, int create)
{
    char errstr[512];
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(
        rk, create ? RD_KAFKA_ADMIN_OP_CREATETOPICS : RD_KAFKA_ADMIN_OP_DELETETOPICS);
    const rd_kafka_topic_result_t **results;
    rd_kafka_event_t *ev;
    size_t n = 0;
    int rc = 0;

    rd_kafka_AdminOptions_set_request_timeout(opts, TIMEOUT_MS, errstr, sizeof errstr);
    rd_kafka_AdminOptions_set_operation_timeout(opts, TIMEOUT_MS, errstr, sizeof errstr);
    if (create) {
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, 1, 1, errstr, sizeof errstr);
        ck_assert_msg(nt != NULL, "NewTopic: %s", errstr);
        rd_kafka_CreateTopics(rk, &nt, 1, opts, q);
        rd_kafka_NewTopic_destroy(nt);
    } else {
        rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
        rd_kafka_DeleteTopics(rk, &dt, 1, opts, q);
        rd_kafka_DeleteTopic_destroy(dt);
    }

    ev = rd_kafka_queue_poll(q, TIMEOUT_MS + 5000);
    if (ev == NULL) {
        rc = fail_with("%s topic %s: no answer from Kafka at %s within %d ms (is it running?)",
                       create ? "create" : "delete", topic, getenv("BILLING_KAFKA_BROKERS"),
                       TIMEOUT_MS + 5000);
    } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rc = fail_with("%s topic %s: %s (Kafka at %s)", create ? "create" : "delete", topic,
                       rd_kafka_event_error_string(ev), getenv("BILLING_KAFKA_BROKERS"));
    } else {
        if (create)
            results =
                rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        else
            results =
                rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
        if (n != 1)
            rc = fail_with("%s topic %s: %zu results", create ? "create" : "delete", topic, n);
        else if (rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR)
            rc = fail_with("%s topic %s: %s", create ? "create" : "delete", topic,
                           rd_kafka_topic_result_error_string(results[0]));
    }
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    return rc;
}

/* Delivery report: the broker's final answer for our one message. */
struct delivery {
    int done;
    rd_kafka_resp_err_t err;
    int64_t offset;
};

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    struct delivery *d = msg->_private; /* the per-message opaque */

    (void)rk;
    (void)opaque;
    d->done = 1;
    d->err = msg->err;
    d->offset = msg->offset;
}

static int kafka_produce(const char *brokers, const char *topic, const char *key,
                         const uint8_t *value, size_t len, int64_t *offset)
{
    rd_kafka_conf_t *conf = kafka_conf(brokers);
    struct delivery d = {0, RD_KAFKA_RESP_ERR_NO_ERROR, -1};
    char errstr[512];
    rd_kafka_resp_err_t err;
    rd_kafka_t *rk;
    int rc = 0;

    /* What billingd's producers will use: no duplicates on retry. */
    conf_set(conf, "enable.idempotence", "true");
    conf_set(conf, "acks", "all");
    conf_set(conf, "message.timeout.ms", "30000");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "producer: %s", errstr);

    err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
                            RD_KAFKA_V_VALUE((void *)(uintptr_t)value, len),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&d),
                            RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rc = fail_with("produce to %s: %s", topic, rd_kafka_err2str(err));
    } else {
        err = rd_kafka_flush(rk, TIMEOUT_MS);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
            rc = fail_with("flush to %s at %s: %s", topic, brokers, rd_kafka_err2str(err));
        else if (!d.done)
            rc = fail_with("flush returned without a delivery report");
        else if (d.err != RD_KAFKA_RESP_ERR_NO_ERROR)
            rc = fail_with("delivery to %s failed: %s", topic, rd_kafka_err2str(d.err));
    }
    err = rd_kafka_fatal_error(rk, errstr, sizeof errstr);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        rc = fail_with("idempotent producer fatal error: %s", errstr);
    *offset = d.offset;
    rd_kafka_destroy(rk);
    return rc;
}

/* Consume from topic in consumer group `group` until one message arrives
 * (or the deadline), then commit it synchronously and check that the
 * group's committed offset moved past it. The payload is copied to *out. */
static int kafka_consume_one(const char *brokers, const char *topic, const char *group,
                             uint8_t **out, size_t *out_len, int64_t *offset)
{
    rd_kafka_conf_t *conf = kafka_conf(brokers);
    rd_kafka_topic_partition_list_t *subs;
    rd_kafka_message_t *msg = NULL;
    char errstr[512], last_error[512] = "none";
    rd_kafka_resp_err_t err;
    int64_t deadline = now_ms() + TIMEOUT_MS;
    rd_kafka_t *rk;
    int rc = 0;

    conf_set(conf, "group.id", group);
    conf_set(conf, "auto.offset.reset", "earliest");
    /* Offsets are committed by hand, after the work, as billingd will. */
    conf_set(conf, "enable.auto.commit", "false");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "consumer: %s", errstr);
    rd_kafka_poll_set_consumer(rk);

    subs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(subs, topic, RD_KAFKA_PARTITION_UA);
    err = rd_kafka_subscribe(rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rc = fail_with("subscribe %s: %s", topic, rd_kafka_err2str(err));
        goto out;
    }

    while (now_ms() < deadline) {
        msg = rd_kafka_consumer_poll(rk, 500);
        if (msg == NULL)
            continue;
        if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        /* Transient (a topic still propagating, a rebalance): retry until
         * the deadline, and report the last one if it passes. */
        snprintf(last_error, sizeof last_error, "%s", rd_kafka_message_errstr(msg));
        rd_kafka_message_destroy(msg);
        msg = NULL;
    }
    if (msg == NULL) {
        rc = fail_with("no message from %s in group %s within %d ms (Kafka at %s; last error: %s)",
                       topic, group, TIMEOUT_MS, brokers, last_error);
        goto out;
    }

    *out_len = msg->len;
    *out = malloc(msg->len ? msg->len : 1);
    ck_assert_ptr_nonnull(*out);
    memcpy(*out, msg->payload, msg->len);
    *offset = msg->offset;

    err = rd_kafka_commit_message(rk, msg, 0 /* synchronous */);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rc = fail_with("commit in group %s: %s", group, rd_kafka_err2str(err));
    } else {
        rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);

        rd_kafka_topic_partition_list_add(parts, topic, msg->partition);
        err = rd_kafka_committed(rk, parts, TIMEOUT_MS);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
            rc = fail_with("committed offsets of %s: %s", group, rd_kafka_err2str(err));
        else if (parts->elems[0].offset != msg->offset + 1)
            rc = fail_with("group %s committed offset %" PRId64 ", expected %" PRId64, group,
                           parts->elems[0].offset, msg->offset + 1);
        rd_kafka_topic_partition_list_destroy(parts);
    }
    rd_kafka_message_destroy(msg);

out:
    err = rd_kafka_consumer_close(rk);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_with("consumer close: %s", rd_kafka_err2str(err));
    rd_kafka_destroy(rk);
    return rc;
}

/* ---- PostgreSQL ----------------------------------------------------- */

static PGconn *pg_connect(void)
{
    const char *conninfo = need_env("BILLING_PG_CONNINFO");
    PGconn *conn = PQconnectdb(conninfo);

    ck_assert_ptr_nonnull(conn);
    if (PQstatus(conn) != CONNECTION_OK) {
        char msg[512];

        snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
        PQfinish(conn);
        ck_abort_msg("PostgreSQL unreachable with BILLING_PG_CONNINFO='%s': %s", conninfo, msg);
    }
    return conn;
}

static void pg_exec_ok(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);

    ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
                  PQerrorMessage(conn));
    PQclear(res);
}

/* ---- tests ---------------------------------------------------------- */

/* Both services answer: a clear message here saves reading timeouts in the
 * end-to-end test below. */
START_TEST(test_services_reachable)
{
    const char *brokers = need_env("BILLING_KAFKA_BROKERS");
    const struct rd_kafka_metadata *md = NULL;
    char errstr[512];
    rd_kafka_resp_err_t err;
    rd_kafka_t *rk;
    PGconn *conn;
    PGresult *res;

    conn = pg_connect();
    res = PQexec(conn, "SELECT current_setting('server_version_num')::int");
    ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
    ck_assert_int_ge(atoi(PQgetvalue(res, 0, 0)), 130000);
    PQclear(res);
    PQfinish(conn);

    rk = rd_kafka_new(RD_KAFKA_PRODUCER, kafka_conf(brokers), errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "producer: %s", errstr);
    err = rd_kafka_metadata(rk, 1, NULL, &md, 10000);
    ck_assert_msg(err == RD_KAFKA_RESP_ERR_NO_ERROR,
                  "Kafka unreachable at BILLING_KAFKA_BROKERS=%s: %s", brokers,
                  rd_kafka_err2str(err));
    ck_assert_int_ge(md->broker_cnt, 1);
    rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
}
END_TEST

START_TEST(test_event_through_kafka_into_postgres)
{
    const char *brokers = need_env("BILLING_KAFKA_BROKERS");
    char topic[128], group[128], event_id[128];
    char account[] = "acct-42", resource[] = "inst-7f3a";
    char quantity[] = "1024.500000001"; /* 9 fractional digits: exactness */
    char gpu_model[] = "RTX4090", region[] = "cn-east-1";
    Billing__V1__UsageEvent ev = BILLING__V1__USAGE_EVENT__INIT;
    Billing__V1__Timestamp start = BILLING__V1__TIMESTAMP__INIT;
    Billing__V1__Timestamp end = BILLING__V1__TIMESTAMP__INIT;
    Billing__V1__UsageEvent *got = NULL;
    uint8_t *wire, *payload = NULL;
    size_t len, payload_len = 0;
    int64_t produced_at = -1, consumed_at = -2;
    char errstr[512];
    rd_kafka_t *admin;
    PGconn *conn;
    PGresult *res;
    const char *params[3];

    unique_name(topic, sizeof topic, "billing-itest");
    unique_name(group, sizeof group, "billing-itest-group");
    unique_name(event_id, sizeof event_id, "evt");
    failure[0] = '\0';

    /* The event, on the wire. */
    ev.event_id = event_id;
    ev.account_id = account;
    ev.resource_id = resource;
    ev.meter = BILLING__V1__METER__METER_GPU;
    start.seconds = 1735689600; /* 2025-01-01T00:00:00Z */
    end.seconds = 1735693200;
    end.nanos = 500000000;
    ev.start = &start;
    ev.end = &end;
    ev.quantity = quantity;
    ev.gpu_model = gpu_model;
    ev.region = region;
    len = billing__v1__usage_event__get_packed_size(&ev);
    wire = malloc(len);
    ck_assert_ptr_nonnull(wire);
    ck_assert_uint_eq(billing__v1__usage_event__pack(&ev, wire), len);

    /* Kafka: create the topic, produce, consume in a group, delete. */
    admin = rd_kafka_new(RD_KAFKA_PRODUCER, kafka_conf(brokers), errstr, sizeof errstr);
    ck_assert_msg(admin != NULL, "admin client: %s", errstr);
    if (kafka_admin_topic(admin, topic, 1) == 0) {
        if (kafka_produce(brokers, topic, event_id, wire, len, &produced_at) == 0)
            kafka_consume_one(brokers, topic, group, &payload, &payload_len, &consumed_at);
        kafka_admin_topic(admin, topic, 0);
    }
    rd_kafka_destroy(admin);
    free(wire);
    ck_assert_msg(failure[0] == '\0', "%s", failure);
    ck_assert_int_eq(consumed_at, produced_at);

    /* Unpack what came back: every field survived. */
    got = billing__v1__usage_event__unpack(NULL, payload_len, payload);
    free(payload);
    ck_assert_msg(got != NULL, "consumed message is not a UsageEvent");
    ck_assert_str_eq(got->event_id, event_id);
    ck_assert_str_eq(got->account_id, account);
    ck_assert_str_eq(got->resource_id, resource);
    ck_assert_int_eq(got->meter, BILLING__V1__METER__METER_GPU);
    ck_assert_ptr_nonnull(got->start);
    ck_assert_ptr_nonnull(got->end);
    ck_assert_int_eq(got->start->seconds, 1735689600);
    ck_assert_int_eq(got->start->nanos, 0);
    ck_assert_int_eq(got->end->seconds, 1735693200);
    ck_assert_int_eq(got->end->nanos, 500000000);
    ck_assert_str_eq(got->quantity, quantity);
    ck_assert_str_eq(got->gpu_model, gpu_model);
    ck_assert_str_eq(got->region, region);

    /* PostgreSQL: store it with a parameterized INSERT, read it back.
     * numeric keeps the exact decimal, scale included. */
    conn = pg_connect();
    pg_exec_ok(conn, "SET statement_timeout = '30s'");
    pg_exec_ok(conn, "CREATE TEMP TABLE itest_usage_event ("
                     " event_id text PRIMARY KEY,"
                     " account_id text NOT NULL,"
                     " quantity numeric NOT NULL)");
    params[0] = got->event_id;
    params[1] = got->account_id;
    params[2] = got->quantity;
    res = PQexecParams(conn,
                       "INSERT INTO itest_usage_event (event_id, account_id, quantity)"
                       " VALUES ($1, $2, $3::numeric)",
                       3, NULL, params, NULL, NULL, 0);
    ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK, "INSERT: %s", PQerrorMessage(conn));
    ck_assert_str_eq(PQcmdTuples(res), "1");
    PQclear(res);

    res = PQexecParams(conn,
                       "SELECT event_id, account_id, quantity::text FROM itest_usage_event"
                       " WHERE event_id = $1",
                       1, NULL, params, NULL, NULL, 0);
    ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "SELECT: %s", PQerrorMessage(conn));
    ck_assert_int_eq(PQntuples(res), 1);
    ck_assert_str_eq(PQgetvalue(res, 0, 0), event_id);
    ck_assert_str_eq(PQgetvalue(res, 0, 1), account);
    ck_assert_str_eq(PQgetvalue(res, 0, 2), quantity);
    PQclear(res);

    pg_exec_ok(conn, "DROP TABLE itest_usage_event");
    PQfinish(conn);
    billing__v1__usage_event__free_unpacked(got, NULL);
}
END_TEST

static Suite *plumbing_suite(void)
{
    Suite *s = suite_create("plumbing");
    TCase *tc = tcase_create("services");

    /* Above the sum of the bounded waits (create, produce, consume,
     * delete: 30 s each at worst). */
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_services_reachable);
    tcase_add_test(tc, test_event_through_kafka_into_postgres);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(plumbing_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
