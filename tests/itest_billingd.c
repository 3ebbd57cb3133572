/*
 * itest_billingd.c - billingd against the real broker and PostgreSQL of
 * scripts/services.sh. The shared stream (itstream.h: the example with
 * replays, conflicts, garbage and unknown accounts, plus synthetic
 * events) is produced as protobuf to a 4-partition topic keyed by
 * account; billingd runs as a child process. Then:
 *   - end to end: from the stored aggregates libbilling computes every
 *     invoice exactly as direct rating does; every reject is stored once
 *     and published to the dead-letter topic with its headers;
 *   - kill -9 at 20 random moments, restarting each time: the same
 *     database as one uninterrupted run;
 *   - two daemons, partitions moved between them by forced rebalances
 *     (one leaves and comes back, repeatedly): the same;
 *   - the broker restarted mid-stream (scripts/kafka.sh stop, start): the
 *     same;
 *   - rate.threads=2 stores the same events, aggregates and rejects as
 *     rate.threads=1;
 *   - the faults of issue 23 (case "faults"): a 1 MB record and a
 *     dead-letter topic refusing a record for good stop nothing; a missing
 *     topic or a schema at another version stops billingd at start (or
 *     after a reconnect); a load after a PostgreSQL restart is used; the
 *     lag grows during a database outage; slow HTTP clients are cut at the
 *     request bound; a failed bind says why.
 * Every wait is on committed state (the positions stored in the
 * database), never a fixed sleep.
 *
 * Needs BILLING_PG_CONNINFO and BILLING_KAFKA_BROKERS; without them every
 * test FAILS, never skips.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "billing/v1/credit_alert.pb-c.h"
#include "eventjson.h"
#include "itestdb.h"
#include "itstream.h"
#include "load.h"
#include "testrng.h"

#define PARTITIONS 4
#define TIMEOUT_MS 20000
#define WAIT_MS 120000
#define MSG 512
#define KILLS 20

static char db[64];
static char topic[64];
static char dlq_topic[80];
static char group[96];
/* billingd's /metrics address in the test that reads it; "" elsewhere (several daemons). */
static char http_listen[64];
/* The alerts topic in the test that reads it; "" elsewhere. */
static char alerts_topic[96];
/* billingd's rate.threads: 1 but in the test comparing thread counts. */
static int rate_threads = 1;
/* The dead-letter topic's max.message.bytes when set; whether produce() creates that topic. */
static const char *dlq_max_bytes;
static int dlq_create = 1;

static const char *brokers(void)
{
    const char *b = getenv("BILLING_KAFKA_BROKERS");

    ck_assert_msg(b != NULL && b[0] != '\0',
                  "BILLING_KAFKA_BROKERS is not set: scripts/services.sh start && . "
                  "var/services.env, or scripts/test.sh");
    return b;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static rd_kafka_conf_t *kconf(void)
{
    char errstr[MSG];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    ck_assert(rd_kafka_conf_set(conf, "bootstrap.servers", brokers(), errstr, sizeof(errstr)) ==
              RD_KAFKA_CONF_OK);
    return conf;
}

/* Create topic @name; with @key, the topic config @key=@value. */
static void create_topic_with(rd_kafka_t *rk, const char *name, int partitions, const char *key,
                              const char *value)
{
    char errstr[MSG];
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(name, partitions, 1, errstr, sizeof(errstr));
    const rd_kafka_topic_result_t **res;
    rd_kafka_event_t *ev;
    size_t n = 0;

    ck_assert_msg(nt != NULL, "%s", errstr);
    if (key != NULL)
        ck_assert_int_eq(rd_kafka_NewTopic_set_config(nt, key, value), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_NewTopic_destroy(nt);
    ev = rd_kafka_queue_poll(q, TIMEOUT_MS);
    ck_assert_msg(ev != NULL, "no answer from Kafka at %s", brokers());
    ck_assert_msg(rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR, "%s",
                  rd_kafka_event_error_string(ev));
    res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(rd_kafka_topic_result_error(res[0]) == RD_KAFKA_RESP_ERR_NO_ERROR, "%s: %s", name,
                  rd_kafka_topic_result_error_string(res[0]));
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
}

static void create_topic(rd_kafka_t *rk, const char *name, int partitions)
{
    create_topic_with(rk, name, partitions, NULL, NULL);
}

/* The record as produced: JSON events as protobuf, anything undecodable as is. */
static void encode(const its_stream *s, size_t i, billing_event *ev, unsigned char *buf,
                   size_t size, const void **data, size_t *len)
{
    char err[MSG];

    *data = s->rec[i];
    *len = s->len[i];
    if (bc_event_parse_json(ev, s->rec[i], s->len[i], err, sizeof(err)) != BILLING_OK)
        return;
    ck_assert_int_eq(billing_event_encode(ev, buf, size, len), BILLING_OK);
    *data = buf;
}

/* Produce the whole stream to @topic (keyed: one account stays in order), and wait for it. */
/* Records [@from, @to) of @s to the topic (created first when @create). */
static void produce_to(const its_stream *s, int create, size_t from, size_t to)
{
    char errstr[MSG];
    unsigned char buf[BILLING_EVENT_WIRE_MAX];
    billing_event *ev = billing_event_new();
    rd_kafka_conf_t *conf = kconf();
    rd_kafka_t *rk;
    const void *data;
    size_t len;
    size_t i;

    ck_assert(rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof(errstr)) ==
              RD_KAFKA_CONF_OK);
    ck_assert(rd_kafka_conf_set(conf, "message.max.bytes", "2000000", errstr, sizeof(errstr)) ==
              RD_KAFKA_CONF_OK);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    ck_assert_msg(rk != NULL, "%s", errstr);
    if (create) {
        create_topic(rk, topic, PARTITIONS);
        if (dlq_create)
            create_topic_with(rk, dlq_topic, 1, dlq_max_bytes ? "max.message.bytes" : NULL,
                              dlq_max_bytes);
    }
    for (i = from; i < to; i++) {
        encode(s, i, ev, buf, sizeof(buf), &data, &len);
        while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_KEY(s->key[i], strlen(s->key[i])),
                                 RD_KAFKA_V_VALUE((void *)data, len),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 100);
    }
    ck_assert_int_eq(rd_kafka_flush(rk, WAIT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
    billing_event_destroy(ev);
}

static void produce(const its_stream *s)
{
    produce_to(s, 1, 0, s->n);
}

static void produce_more(const its_stream *s)
{
    produce_to(s, 0, 0, s->n);
}

/* ---------------------------------------------------------------------- */
/* The daemon                                                              */
/* ---------------------------------------------------------------------- */

static void daemon_path(char *out, size_t size)
{
    const char *b = getenv("top_builddir");

    snprintf(out, size, "%s/billingd/billingd", b != NULL && b[0] != '\0' ? b : "..");
}

/* Start billingd on the test's topic and database; @instance: static member id or NULL. */
static int starts;
static char last_log[256];

static pid_t start_daemon(const char *instance, int batch)
{
    char path[1024];
    char conninfo[2048];
    char args[11][256];
    char log[256];
    pid_t pid;
    int fd;

    daemon_path(path, sizeof(path));
    itdb_conninfo(db, conninfo, sizeof(conninfo));
    snprintf(args[0], sizeof(args[0]), "topics=%s", topic);
    snprintf(args[1], sizeof(args[1]), "group=%s", group);
    snprintf(args[2], sizeof(args[2]), "kafka.bootstrap.servers=%s", brokers());
    snprintf(args[3], sizeof(args[3]), "batch.size=%d", batch);
    snprintf(args[4], sizeof(args[4]), "dead_letter_topic=%s", dlq_topic);
    snprintf(args[5], sizeof(args[5]), "kafka.group.instance.id=%s", instance ? instance : "");
    snprintf(args[6], sizeof(args[6]), "kafka.session.timeout.ms=%d", 6000);
    snprintf(args[7], sizeof(args[7]), "batch.linger.ms=%d", 50);
    snprintf(args[8], sizeof(args[8]), "http.listen=%s", http_listen);
    snprintf(args[9], sizeof(args[9]), "alerts.topic=%s", alerts_topic);
    snprintf(args[10], sizeof(args[10]), "rate.threads=%d", rate_threads);
    snprintf(log, sizeof(log), "billingd-%s-%d.log", group, ++starts);
    snprintf(last_log, sizeof(last_log), "%s", log);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid > 0)
        return pid;
    setenv("BILLING_PG_CONNINFO", conninfo, 1);
    fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0)
        dup2(fd, 2);
    if (instance != NULL)
        execl(path, "billingd", "--set", args[0], "--set", args[1], "--set", args[2], "--set",
              args[3], "--set", args[4], "--set", args[5], "--set", args[6], "--set", args[7],
              "--set", args[8], "--set", args[9], "--set", args[10], (char *)NULL);
    else
        execl(path, "billingd", "--set", args[0], "--set", args[1], "--set", args[2], "--set",
              args[3], "--set", args[4], "--set", args[6], "--set", args[7], "--set", args[8],
              "--set", args[9], "--set", args[10], (char *)NULL);
    _exit(127);
}

/* Wait until the log @path of a running daemon has a line with @needle or @other (may be NULL). */
static void wait_log_any(const char *path, const char *needle, const char *other, pid_t child)
{
    char line[4096];
    int64_t deadline = now_ms() + WAIT_MS;
    struct timespec tick = {0, 20 * 1000 * 1000};
    int status;
    FILE *f;

    for (;;) {
        f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            if (strstr(line, needle) != NULL || (other != NULL && strstr(line, other) != NULL)) {
                fclose(f);
                return;
            }
        }
        if (f != NULL)
            fclose(f);
        ck_assert_msg(now_ms() < deadline, "%s: no '%s' in %d ms", path, needle, WAIT_MS);
        ck_assert_msg(waitpid(child, &status, WNOHANG) == 0, "billingd exited (status %d)", status);
        nanosleep(&tick, NULL); /* the poll interval, not a wait for an outcome */
    }
}

static void wait_log(const char *path, const char *needle, pid_t child)
{
    wait_log_any(path, needle, NULL, child);
}

static int stop_daemon(pid_t pid, int sig)
{
    int status = 0;

    kill(pid, sig);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* Records accounted for: the sum of the stored next offsets of the group. */
static long progress(bs_conn *c)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT coalesce(sum(next_offset), 0) FROM billing.kafka_offsets"
             " WHERE consumer_group = '%s'",
             group);
    return itdb_long(c, sql);
}

/*
 * Wait until more than @after records are accounted for (or @total all
 * of them): polls the committed positions. Fails after WAIT_MS.
 */
static long wait_progress(bs_conn *c, long after, long total, pid_t child)
{
    int64_t deadline = now_ms() + WAIT_MS;
    struct timespec tick = {0, 20 * 1000 * 1000};
    long p;
    int status;

    for (;;) {
        p = progress(c);
        if (p > after || p >= total)
            return p;
        ck_assert_msg(now_ms() < deadline, "no progress past %ld of %ld records in %d ms", after,
                      total, WAIT_MS);
        if (child > 0)
            ck_assert_msg(waitpid(child, &status, WNOHANG) == 0, "billingd exited (status %d)",
                          status);
        nanosleep(&tick, NULL); /* the poll interval, not a wait for an outcome */
    }
}

/* ---------------------------------------------------------------------- */
/* Checks                                                                  */
/* ---------------------------------------------------------------------- */

/* Rounds of B leaving and coming back in test_two_daemons_rebalancing. */
#define REBALANCE_ROUNDS 4

static void names(const char *tag)
{
    snprintf(topic, sizeof(topic), "billingd-%ld-%s-%ld", (long)getpid(), tag, (long)time(NULL));
    snprintf(dlq_topic, sizeof(dlq_topic), "%s-dlq", topic);
    snprintf(group, sizeof(group), "g-%s", topic);
}

/* The database must hold exactly what rating the stream once gives. */
static void check_store(bs_conn *c, const its_stream *s)
{
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *fcat = its_file_catalog(zones);
    billing_rater *direct;
    billing_rater *stored;
    bs_catalog *cat;
    bs_error err;
    size_t rejects;

    direct = its_rate_directly(fcat, s, &rejects);
    ck_assert_int_eq(progress(c), (long)s->n);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"),
                     (long)billing_rater_event_count(direct));
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events"), (long)rejects);
    ck_assert_int_eq(itdb_long(c, "SELECT count(DISTINCT (kafka_partition, kafka_offset))"
                                  " FROM billing.rejected_events"),
                     (long)rejects);
    cat = bs_catalog_read(c, NULL, &err);
    ck_assert_msg(cat != NULL, "%s", err.message);
    stored = its_rate_from_store(c, cat);
    its_same_invoices(direct, stored);
    billing_rater_destroy(stored);
    billing_rater_destroy(direct);
    bs_catalog_free(cat);
    billing_catalog_destroy(fcat);
    billing_config_zones_destroy(zones);
}

/* Every reject reached the dead-letter topic (at least once) with its headers. */
static void check_dead_letters(long rejects)
{
    char errstr[MSG];
    rd_kafka_conf_t *conf = kconf();
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_message_t *m;
    rd_kafka_headers_t *h;
    rd_kafka_t *rk;
    const void *v;
    size_t vlen;
    long seen = 0;
    int64_t deadline = now_ms() + WAIT_MS;

    rd_kafka_conf_set(conf, "group.id", dlq_topic, errstr, sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_topic_partition_list_add(l, dlq_topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ck_assert_int_eq(rd_kafka_assign(rk, l), RD_KAFKA_RESP_ERR_NO_ERROR);
    while (seen < rejects && now_ms() < deadline) {
        m = rd_kafka_consumer_poll(rk, 500);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            ck_assert_int_eq(rd_kafka_message_headers(m, &h), RD_KAFKA_RESP_ERR_NO_ERROR);
            ck_assert_int_eq(rd_kafka_header_get_last(h, "billing.reason_code", &v, &vlen),
                             RD_KAFKA_RESP_ERR_NO_ERROR);
            ck_assert_int_eq(rd_kafka_header_get_last(h, "billing.source.offset", &v, &vlen),
                             RD_KAFKA_RESP_ERR_NO_ERROR);
            seen++;
        }
        rd_kafka_message_destroy(m);
    }
    ck_assert_int_ge(seen, rejects);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

/* GET @path from billingd's HTTP server into @out (headers and body). */
/* The sum of the values of the /metrics lines starting with @prefix. */
static long metric_sum(const char *page, const char *prefix)
{
    const char *p = page;
    const char *sp;
    long sum = 0;

    while ((p = strstr(p, prefix)) != NULL) {
        if (p == page || p[-1] == '\n') {
            sp = strchr(p, ' ');
            if (sp != NULL)
                sum += atol(sp + 1);
        }
        p += strlen(prefix);
    }
    return sum;
}

static void http_get(const char *path, char *out, size_t size)
{
    struct sockaddr_in sa;
    char req[256];
    size_t len = 0;
    ssize_t r;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    const char *colon = strrchr(http_listen, ':');

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s",
                  http_listen, strerror(errno));
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    ck_assert(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    while (len + 1 < size && (r = read(fd, out + len, size - len - 1)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fd);
}

/*
 * Poll /metrics into @page until the sum of the counters named @prefix
 * (metric_sum) is at least @least and at most @most: billingd adds a
 * batch to its counters just after the commit that the test's progress
 * query already sees, and publishes alerts after it. Fails after WAIT_MS
 * with the last sum seen.
 */
static void wait_metric(const char *prefix, long least, long most, char *page, size_t size)
{
    int64_t deadline = now_ms() + WAIT_MS;
    struct timespec tick = {0, 20 * 1000 * 1000};
    long v;

    for (;;) {
        http_get("/metrics", page, size);
        v = metric_sum(page, prefix);
        if (v >= least && v <= most)
            return;
        ck_assert_msg(now_ms() < deadline, "/metrics: %s is %ld after %d ms, not in [%ld, %ld]",
                      prefix, v, WAIT_MS, least, most);
        nanosleep(&tick, NULL); /* the poll interval, not a wait for an outcome */
    }
}

/*
 * http.listen for the next billingd: a loopback port that is free now,
 * found by binding port 0 (a port chosen from the pid could lie in the
 * ephemeral range and be taken by a client connection: a CI run once
 * failed with "Address already in use").
 */
static void listen_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = 0;
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind: %s", strerror(errno));
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    snprintf(http_listen, sizeof(http_listen), "127.0.0.1:%d", (int)ntohs(sa.sin_port));
}

/* The alerts topic of the alert test: one partition, so alerts keep their order. */
static void create_alerts_topic(void)
{
    char errstr[MSG];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kconf(), errstr, sizeof(errstr));

    ck_assert_msg(rk != NULL, "%s", errstr);
    create_topic(rk, alerts_topic, 1);
    rd_kafka_destroy(rk);
}

/*
 * The exhaustion instant libbilling gives after the first @k records of
 * @s, with the last one running: what an alert raised by record k must say.
 */
static billing_time_t expected_exhaustion(const its_stream *s, int k)
{
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *cat = its_file_catalog(zones);
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    const billing_event *running[1];
    billing_time_t out = 0;
    int i;

    ck_assert_int_eq(billing_rater_new(cat, &r, NULL, 0), BILLING_OK);
    for (i = 0; i <= k; i++) {
        ck_assert_int_eq(bc_event_parse_json(ev, s->rec[i], s->len[i], NULL, 0), BILLING_OK);
        ck_assert_int_eq(billing_rater_add(r, ev, NULL, 0), BILLING_OK);
    }
    running[0] = ev;
    ck_assert_int_eq(billing_rater_credit_exhaustion(r, "student-b", billing_event_end(ev), running,
                                                     1, &out, NULL, 0),
                     BILLING_OK);
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    billing_config_zones_destroy(zones);
    return out;
}

/* Read every alert; count them per threshold in @seen (50, 80, 100) and check each. */
static int read_alerts(const its_stream *s, int *seen)
{
    char errstr[MSG];
    rd_kafka_conf_t *conf = kconf();
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    Billing__V1__CreditAlert *a;
    rd_kafka_message_t *m;
    rd_kafka_t *rk;
    billing_time_t ex;
    int total = 0;
    int done = 0;
    int k;

    rd_kafka_conf_set(conf, "group.id", alerts_topic, errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "enable.partition.eof", "true", errstr, sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_topic_partition_list_add(l, alerts_topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ck_assert_int_eq(rd_kafka_assign(rk, l), RD_KAFKA_RESP_ERR_NO_ERROR);
    while (!done) {
        m = rd_kafka_consumer_poll(rk, WAIT_MS);
        ck_assert_msg(m != NULL, "no end of the alerts topic within %d ms", WAIT_MS);
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            done = 1;
        } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            a = billing__v1__credit_alert__unpack(NULL, m->len, m->payload);
            ck_assert_ptr_nonnull(a);
            ck_assert_str_eq(a->account_id, "student-b");
            ck_assert_str_eq(a->currency, "CNY");
            k = atoi(a->event_id + strlen("burn-"));
            ck_assert_ptr_nonnull(a->exhausted_at);
            ex = expected_exhaustion(s, k);
            ck_assert_int_eq(a->exhausted_at->seconds * BILLING_NS_PER_SEC + a->exhausted_at->nanos,
                             ex);
            if (strcmp(a->threshold, "5") == 0)
                seen[0]++;
            else if (strcmp(a->threshold, "2") == 0)
                seen[1]++;
            else if (strcmp(a->threshold, "0") == 0)
                seen[2]++;
            total++;
            billing__v1__credit_alert__free_unpacked(a, NULL);
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return total;
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

/*
 * The end of a run: wait until the whole stream is committed, stop the
 * daemon cleanly, check the database against rating the stream once, and
 * free the stream (@s, calloc'd) and the database (@c).
 */
static void finish_stream(bs_conn *c, its_stream *s, pid_t pid)
{
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    check_store(c, s);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}

/*
 * The rejected records billingd's log @path names (event=rejected lines,
 * each checked to carry its source, code and reason) into *@logged, and
 * those it counted instead (event=rejected_suppressed) into *@suppressed.
 */
static void rejected_in_log(const char *path, long *logged, long *suppressed)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    const char *at;

    *logged = 0;
    *suppressed = 0;
    ck_assert_msg(f != NULL, "no log %s", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, " event=rejected ") != NULL) {
            ck_assert_msg(
                strstr(line, " source=kafka:") != NULL && strstr(line, " reason_code=-") == NULL &&
                    strstr(line, " reason_code=") != NULL && strstr(line, " reason=") != NULL,
                "incomplete: %s", line);
            (*logged)++;
        } else if ((at = strstr(line, " event=rejected_suppressed count=")) != NULL) {
            *suppressed += strtol(at + strlen(" event=rejected_suppressed count="), NULL, 10);
        }
    }
    fclose(f);
}

START_TEST(test_end_to_end)
{
    static char page[65536];
    long stored;
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("e2e", db, sizeof(db));
    char log[256];
    pid_t pid;
    size_t rejects;
    long logged;
    long suppressed;
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *fcat = its_file_catalog(zones);
    billing_rater *direct;

    names("e2e");
    its_build(s, 2000, 0);
    its_load_example(c);
    produce(s);
    listen_port();
    pid = start_daemon(NULL, 500);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    /* /metrics counts what was committed; /healthz says ok. */
    stored = itdb_long(c, "SELECT count(*) FROM billing.usage_events");
    wait_metric("billingd_events_stored_total ", stored, stored, page, sizeof(page));
    ck_assert_ptr_nonnull(strstr(page, "billingd_events_rejected_total{reason=\"parse\"}"));
    ck_assert_ptr_nonnull(strstr(page, "billingd_commit_latency_seconds_bucket{le=\"+Inf\"}"));
    /* Seconds, Prometheus's base unit: the 5 ms bound is 0.005. */
    ck_assert_ptr_nonnull(strstr(page, "billingd_commit_latency_seconds_bucket{le=\"0.005\"}"));
    ck_assert_int_gt(metric_sum(page, "process_resident_memory_bytes"), 0);
    ck_assert_int_gt(metric_sum(page, "process_open_fds"), 2);
    ck_assert_int_gt(metric_sum(page, "process_start_time_seconds"), 1700000000);
    ck_assert_ptr_nonnull(strstr(page, "\nprocess_cpu_seconds_total "));
    ck_assert_ptr_nonnull(strstr(page, "billingd_consumer_lag{topic="));
    http_get("/healthz", page, sizeof(page));
    ck_assert_ptr_nonnull(strstr(page, "200 OK"));
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    http_listen[0] = '\0';
    check_store(c, s);
    direct = its_rate_directly(fcat, s, &rejects);
    check_dead_letters((long)rejects);
    /* Each rejected record named in the log with its reason, or counted as left out. */
    rejected_in_log(log, &logged, &suppressed);
    ck_assert_int_ge(logged, 1);
    ck_assert_int_le(logged + suppressed, (long)rejects);
    billing_rater_destroy(direct);
    billing_catalog_destroy(fcat);
    billing_config_zones_destroy(zones);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

START_TEST(test_kill_9_twenty_times)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("kill", db, sizeof(db));
    uint64_t rng = UINT64_C(0x5eed) ^ (uint64_t)time(NULL);
    long done = 0;
    pid_t pid;
    int kills = 0;
    int extra;

    names("kill");
    its_build(s, 12000, 0);
    its_load_example(c);
    produce(s);
    pid = start_daemon("killed", 100);
    while (kills < KILLS && done < (long)s->n) {
        done = wait_progress(c, done, (long)s->n, pid);
        /* A random moment inside the next batches: 0..3 more committed-state polls. */
        for (extra = (int)(test_rnd(&rng) % 4); extra > 0; extra--)
            done = progress(c);
        stop_daemon(pid, SIGKILL);
        kills++;
        pid = start_daemon("killed", 100);
    }
    ck_assert_int_eq(kills, KILLS);
    finish_stream(c, s, pid);
}
END_TEST

START_TEST(test_two_daemons_rebalancing)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("rebalance", db, sizeof(db));
    long done = 0;
    long hi;
    pid_t a;
    pid_t b;
    int round;

    names("rebalance");
    its_build(s, 16000, 0);
    its_load_example(c);
    /*
     * The stream goes to Kafka a part per round, so that every round has
     * records left to move with the partitions, however fast the daemons
     * consume (all of it at once let a fast build finish in two rounds).
     */
    produce_to(s, 1, 0, s->n / REBALANCE_ROUNDS);
    a = start_daemon(NULL, 40);
    b = start_daemon(NULL, 40);
    for (round = 0; round < REBALANCE_ROUNDS; round++) {
        hi = (long)(s->n * (size_t)(round + 1) / REBALANCE_ROUNDS);
        if (round > 0)
            produce_to(s, 0, s->n * (size_t)round / REBALANCE_ROUNDS, (size_t)hi);
        /* B leaves (its partitions move to A), then comes back (they move again). */
        wait_log(last_log, "event=assigned", b);
        done = wait_progress(c, done, hi, a);
        ck_assert_int_eq(stop_daemon(b, SIGTERM), 0);
        done = wait_progress(c, done, hi, a);
        b = start_daemon(NULL, 40);
    }
    wait_progress(c, (long)s->n - 1, (long)s->n, a);
    /*
     * The last B may have been started just now: a SIGTERM before it has
     * set its handlers kills it (status 15) instead of a clean leave.
     * "started" is logged after they are set.
     */
    wait_log(last_log, "event=started", b);
    ck_assert_int_eq(stop_daemon(a, SIGTERM), 0);
    ck_assert_int_eq(stop_daemon(b, SIGTERM), 0);
    check_store(c, s);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/* PostgreSQL drops billingd's connections mid-stream, again and again: the same database. */
START_TEST(test_database_connections_lost)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("pgdown", db, sizeof(db));
    char sql[512];
    long done = 0;
    pid_t pid;
    int round;

    names("pgdown");
    its_build(s, 8000, 0);
    its_load_example(c);
    produce(s);
    pid = start_daemon(NULL, 100);
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
             " WHERE datname = '%s' AND pid <> pg_backend_pid()",
             db);
    for (round = 0; round < 10 && done < (long)s->n; round++) {
        done = wait_progress(c, done, (long)s->n, pid);
        itdb_long(c, sql);
    }
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    ck_assert_int_ge(round, 3);
    check_store(c, s);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * An account loaded while billingd runs is used without a restart: its
 * events before the load are rejected (unknown_account), after it stored.
 */
START_TEST(test_catalog_change_without_restart)
{
    its_stream *s = calloc(1, sizeof(*s));
    its_stream *late = calloc(1, sizeof(*late));
    bs_conn *c = itdb_fresh("catalog", db, sizeof(db));
    char book[1024];
    char accounts[1024];
    char log[256];
    bs_load_counts k;
    bs_error err;
    pid_t pid;
    long first;

    names("catalog");
    its_build(s, 400, 0);
    its_load_example(c);
    produce(s);
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    first = itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code ="
                         " 'unknown_account'");
    ck_assert_int_gt(first, 0);
    /* The ghost accounts arrive: the test's own accounts file with them. */
    its_example_path(book, sizeof(book), "pricebook.json");
    snprintf(accounts, sizeof(accounts), "%s.ghosts.json", group);
    its_ghost_accounts(accounts);
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s", err.message);
    wait_log(log, "event=catalog_reloaded", pid);
    /* The same ghost events again, under new ids: now they are stored. */
    its_ghost_events(late, "late-");
    produce_more(late);
    wait_progress(c, (long)(s->n + late->n) - 1, (long)(s->n + late->n), pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code"
                                  " = 'unknown_account'"),
                     first);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events WHERE event_id"
                                  " LIKE 'late-%'"),
                     (long)late->n);
    remove(accounts);
    its_free(s);
    its_free(late);
    free(s);
    free(late);
    itdb_drop(c, db);
}
END_TEST

/*
 * A trial account burning its 10.00 CNY credit (8 RTX 4090 at 0.60 a
 * GPU-hour: 4.80 an hour) in ten-minute records, one batch each: exactly
 * one alert per threshold (50, 80, 100% used), each with the exhaustion
 * instant the library computes for the usage running at that point.
 */
START_TEST(test_credit_alerts)
{
    static char page[65536];
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("alerts", db, sizeof(db));
    char line[512];
    char start[40];
    char end[40];
    int seen[3] = {0, 0, 0};
    int total = 0;
    pid_t pid;
    int i;

    names("alerts");
    snprintf(alerts_topic, sizeof(alerts_topic), "%s-alerts", topic);
    for (i = 0; i < 30; i++) {
        billing_time_t t = (INT64_C(1768089600) + i * 600) * BILLING_NS_PER_SEC; /* 01-11 */

        billing_time_format(t, start, sizeof(start));
        billing_time_format(t + 600 * BILLING_NS_PER_SEC, end, sizeof(end));
        snprintf(line, sizeof(line),
                 "{\"id\":\"burn-%02d\",\"account\":\"student-b\",\"resource\":\"i-b9\","
                 "\"meter\":\"gpu\",\"start\":\"%s\",\"end\":\"%s\",\"quantity\":\"8\","
                 "\"model\":\"RTX4090\",\"region\":\"cn-east-1\"}",
                 i, start, end);
        s->rec[s->n] = strdup(line);
        s->len[s->n] = strlen(line);
        s->key[s->n++] = "student-b";
    }
    its_load_example(c);
    produce(s);
    create_alerts_topic();
    listen_port();
    pid = start_daemon(NULL, 1);
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    /* /metrics: the check ran once per batch (30 of one record), and published the alerts. */
    wait_metric("billingd_alert_check_seconds_count", 30, LONG_MAX, page, sizeof(page));
    wait_metric("billingd_alerts_published_total", 3, LONG_MAX, page, sizeof(page));
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    http_listen[0] = '\0';
    total = read_alerts(s, seen);
    ck_assert_int_eq(seen[0], 1);
    ck_assert_int_eq(seen[1], 1);
    ck_assert_int_eq(seen[2], 1);
    ck_assert_int_eq(total, 3);
    alerts_topic[0] = '\0';
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * PostgreSQL refuses billingd for longer than a batch's retries: the batch
 * fails, consumption pauses, and once connections are allowed again
 * billingd resumes from the stored positions: the same database.
 */
START_TEST(test_database_down_pauses_and_resumes)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("pgoff", db, sizeof(db));
    bs_conn *admin = itdb_connect("postgres");
    char sql[256];
    char log[256];
    pid_t pid;

    names("pgoff");
    its_build(s, 6000, 0);
    its_load_example(c);
    produce(s);
    pid = start_daemon(NULL, 50);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, 0, (long)s->n, pid);
    /* Down: no new connection, and the existing ones cut. */
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS false", db);
    itdb_exec(admin, sql);
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
             " WHERE datname = '%s'",
             db);
    itdb_long(admin, sql);
    bs_close(c);
    /* Stalled: by a failed batch, or by the lost LISTEN connection (the catalog may be stale). */
    wait_log_any(log, "event=batch_failed", "event=catalog_stale", pid);
    /* Up again. */
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS true", db);
    itdb_exec(admin, sql);
    wait_log(log, "event=resumed", pid);
    c = itdb_connect(db);
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    check_store(c, s);
    bs_close(admin);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * broker - run scripts/kafka.sh @cmd ("stop" or "start") on the broker
 * of BILLING_KAFKA_BROKERS: its port from there, its controller port from
 * BILLING_KAFKA_CONTROLLER_PORT or else from the server.properties the
 * script wrote (so that a restart never takes another broker's ports).
 * `start` returns once the broker is usable, `stop` once it is gone.
 */
static void broker(const char *cmd)
{
    char sh[1024];
    const char *src = getenv("top_srcdir");
    int status;

    ck_assert_msg(src != NULL, "top_srcdir is not set (run through make check)");
    snprintf(sh, sizeof(sh),
             "cd '%s' && port=${BILLING_KAFKA_BROKERS##*:} &&"
             " ctl=${BILLING_KAFKA_CONTROLLER_PORT:-$(sed -n"
             " 's/^controller.quorum.voters=.*:\\([0-9]*\\)$/\\1/p'"
             " \"${BILLING_VAR:-var}/kafka/server.properties\")} &&"
             " [ -n \"$ctl\" ] && BILLING_KAFKA_PORT=$port BILLING_KAFKA_CONTROLLER_PORT=$ctl"
             " scripts/kafka.sh %s >/dev/null",
             src, cmd);
    status = system(sh);
    ck_assert_msg(status == 0, "scripts/kafka.sh %s failed (status %d)", cmd, status);
}

/*
 * The broker restarts mid-stream: billingd keeps running, resumes when the
 * broker is back, and the database ends as after an uninterrupted run.
 * Half the stream is produced before the restart and half after, so that
 * the daemon has records to consume on both sides of it however fast it
 * is; the stop comes once some of the first half is committed.
 */
START_TEST(test_broker_restart)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("broker", db, sizeof(db));
    pid_t pid;

    names("broker");
    its_build(s, 6000, 0);
    its_load_example(c);
    produce_to(s, 1, 0, s->n / 2);
    pid = start_daemon(NULL, 50);
    wait_progress(c, 0, (long)s->n, pid);
    broker("stop");
    broker("start");
    produce_to(s, 0, s->n / 2, s->n);
    finish_stream(c, s, pid);
}
END_TEST

/*
 * Consume the produced stream @s on @threads rating threads into a fresh
 * database; its tables into @out without identity ids: billingd cuts its
 * batches where its timing falls, and the ids of aggregates and rejects
 * follow the batches; their contents may not.
 */
static void consume_on_threads(const its_stream *s, int threads, char *out[ITS_TABLES])
{
    bs_conn *c = itdb_fresh(threads == 1 ? "threads1" : "threadsn", db, sizeof(db));
    pid_t pid;

    its_load_example(c);
    snprintf(group, sizeof(group), "g-%s-%d", topic, threads);
    rate_threads = threads;
    /* Batches of up to 2 000 records: cut in slices of at least 256 on each thread. */
    pid = start_daemon(NULL, 2000);
    rate_threads = 1;
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    check_store(c, s);
    its_dump(c, 0, out);
    itdb_drop(c, db);
}

START_TEST(test_rate_threads_store_the_same)
{
    its_stream *s = calloc(1, sizeof(*s));
    char *one[ITS_TABLES];
    char *two[ITS_TABLES];

    names("threads");
    its_build(s, 12000, 0);
    produce(s);
    consume_on_threads(s, 1, one);
    consume_on_threads(s, 2, two);
    its_same_dump(one, two, "with rate.threads=2");
    its_free(s);
    free(s);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Faults of issue 23                                                      */
/* ---------------------------------------------------------------------- */

/* One record @data of @len bytes to the topic, keyed @key. */
static void produce_raw(const char *key, const void *data, size_t len)
{
    char errstr[MSG];
    rd_kafka_conf_t *conf = kconf();
    rd_kafka_t *rk;

    ck_assert(rd_kafka_conf_set(conf, "message.max.bytes", "2000000", errstr, sizeof(errstr)) ==
              RD_KAFKA_CONF_OK);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    ck_assert_msg(rk != NULL, "%s", errstr);
    ck_assert_int_eq(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                       RD_KAFKA_V_KEY(key, strlen(key)),
                                       RD_KAFKA_V_VALUE((void *)data, len), RD_KAFKA_V_END),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_flush(rk, WAIT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(rk);
}

/* Whether the log @path has a line with @needle. */
static int log_has(const char *path, const char *needle)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    int found = 0;

    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

/* Wait for @pid to exit within @ms; its exit status, or -1 (then it was killed). */
static int wait_exit(pid_t pid, int ms)
{
    int64_t deadline = now_ms() + ms;
    struct timespec tick = {0, 20 * 1000 * 1000};
    int status;

    while (now_ms() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        nanosleep(&tick, NULL); /* the poll interval, not a wait for an outcome */
    }
    stop_daemon(pid, SIGKILL);
    return -1;
}

/* The dead letter of the record at @offset of partition @partition: value length and headers. */
static int find_dead_letter(int32_t partition, int64_t offset, size_t *vlen, char *length,
                            char *md5)
{
    char errstr[MSG];
    char want[24];
    rd_kafka_conf_t *conf = kconf();
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_message_t *m;
    rd_kafka_headers_t *h;
    rd_kafka_t *rk;
    const void *v;
    size_t n;
    int found = 0;
    int done = 0;

    snprintf(want, sizeof(want), "%" PRId64, offset);
    rd_kafka_conf_set(conf, "group.id", dlq_topic, errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "enable.partition.eof", "true", errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "fetch.max.bytes", "2000000", errstr, sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    ck_assert_msg(rk != NULL, "%s", errstr);
    rd_kafka_topic_partition_list_add(l, dlq_topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ck_assert_int_eq(rd_kafka_assign(rk, l), RD_KAFKA_RESP_ERR_NO_ERROR);
    while (!done) {
        m = rd_kafka_consumer_poll(rk, WAIT_MS);
        ck_assert_msg(m != NULL, "no end of the dead-letter topic within %d ms", WAIT_MS);
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            done = 1;
        } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
                   rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
                   rd_kafka_header_get_last(h, "billing.source.offset", &v, &n) ==
                       RD_KAFKA_RESP_ERR_NO_ERROR &&
                   n == strlen(want) && memcmp(v, want, n) == 0) {
            rd_kafka_header_get_last(h, "billing.source.partition", &v, &n);
            if (atoi(v) == partition) {
                found = 1;
                *vlen = m->len;
                ck_assert_int_eq(rd_kafka_header_get_last(h, "billing.original_length", &v, &n),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
                snprintf(length, 24, "%.*s", (int)n, (const char *)v);
                ck_assert_int_eq(rd_kafka_header_get_last(h, "billing.md5", &v, &n),
                                 RD_KAFKA_RESP_ERR_NO_ERROR);
                snprintf(md5, 33, "%.*s", (int)n, (const char *)v);
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return found;
}

#define HUGE_LEN 1040000

/*
 * A record of about 1 MB (under the broker's limit) among normal ones:
 * it is rejected, kept whole in billing.rejected_events, its dead letter
 * is a 64 KiB head with its length and md5 in headers, and every
 * partition goes on.
 */
START_TEST(test_huge_record_does_not_stop_billingd)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("huge", db, sizeof(db));
    unsigned char *huge = malloc(HUGE_LEN);
    char sql[512];
    char length[24];
    char md5[33];
    char *want_md5;
    size_t vlen = 0;
    long partition;
    long offset;
    pid_t pid;

    names("huge");
    memset(huge, 0xff, HUGE_LEN); /* not protobuf: a parse reject */
    its_build(s, 2000, 0);
    its_load_example(c);
    produce_to(s, 1, 0, 0);
    produce_raw("garbage", huge, HUGE_LEN);
    produce_more(s);
    pid = start_daemon(NULL, 500);
    wait_progress(c, (long)s->n, (long)s->n + 1, pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    ck_assert_int_eq(progress(c), (long)s->n + 1);
    /* The table keeps the record whole. */
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events"
                                  " WHERE octet_length(payload) = 1040000"),
                     1);
    partition = itdb_long(c, "SELECT kafka_partition FROM billing.rejected_events"
                             " WHERE octet_length(payload) = 1040000");
    offset = itdb_long(c, "SELECT kafka_offset FROM billing.rejected_events"
                          " WHERE octet_length(payload) = 1040000");
    /* Its dead letter: a head, the original length and the digest of the whole. */
    ck_assert(find_dead_letter((int32_t)partition, offset, &vlen, length, md5));
    ck_assert_uint_eq(vlen, 65536);
    ck_assert_str_eq(length, "1040000");
    snprintf(sql, sizeof(sql),
             "SELECT md5(payload) FROM billing.rejected_events WHERE octet_length(payload) ="
             " 1040000");
    want_md5 = itdb_text(c, sql);
    want_md5[strcspn(want_md5, "\n")] = '\0';
    ck_assert_str_eq(md5, want_md5);
    free(want_md5);
    free(huge);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * A dead-letter topic that refuses a dead letter for good (larger than its
 * max.message.bytes): the batch goes on, the record stays in the table,
 * the refusal is logged with the record's partition and offset and
 * counted in billingd_dead_letters_dropped_total.
 */
START_TEST(test_dead_letter_refused_for_good)
{
    static char page[65536];
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("dlqsmall", db, sizeof(db));
    char big[3000];
    char log[256];
    pid_t pid;
    long dropped;

    names("dlqsmall");
    memset(big, '#', sizeof(big)); /* not protobuf: a parse reject, too big for the topic */
    its_build(s, 1000, 0);
    its_load_example(c);
    dlq_max_bytes = "1000";
    produce_to(s, 1, 0, s->n / 2);
    dlq_max_bytes = NULL;
    produce_raw("garbage", big, sizeof(big));
    produce_to(s, 0, s->n / 2, s->n);
    listen_port();
    pid = start_daemon(NULL, 200);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)s->n, (long)s->n + 1, pid);
    http_get("/metrics", page, sizeof(page));
    dropped = metric_sum(page, "billingd_dead_letters_dropped_total");
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    http_listen[0] = '\0';
    ck_assert_int_ge(dropped, 1);
    ck_assert(log_has(log, "event=dead_letter_dropped"));
    ck_assert_int_eq(progress(c), (long)s->n + 1);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events"
                                  " WHERE octet_length(payload) = 3000"),
                     1);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/* A missing dead-letter topic: billingd says which and exits 4, never "started". */
START_TEST(test_missing_topic_refuses_to_start)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("notopic", db, sizeof(db));
    char log[256];
    char want[256];
    pid_t pid;

    names("notopic");
    its_build(s, 10, 0);
    its_load_example(c);
    dlq_create = 0;
    produce(s);
    dlq_create = 1;
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    ck_assert_int_eq(wait_exit(pid, 30000), 4);
    snprintf(want, sizeof(want), "event=topic_missing dead_letter_topic=%s", dlq_topic);
    ck_assert_msg(log_has(log, want), "no '%s' in %s", want, log);
    ck_assert(!log_has(log, "event=started"));
    ck_assert_int_eq(progress(c), 0);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * What a PostgreSQL restart looks like to billingd: every backend of it
 * terminated. An account loaded afterwards (its NOTIFY may be lost with
 * the LISTEN connection) is used for the events that follow.
 */
START_TEST(test_catalog_reloaded_after_postgresql_restart)
{
    its_stream *s = calloc(1, sizeof(*s));
    its_stream *late = calloc(1, sizeof(*late));
    bs_conn *c = itdb_fresh("pgrestart", db, sizeof(db));
    char book[1024];
    char accounts[1024];
    char log[256];
    char sql[512];
    bs_load_counts k;
    bs_error err;
    pid_t pid;
    long first;

    names("pgrestart");
    its_build(s, 400, 0);
    its_load_example(c);
    produce(s);
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    first = itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code ="
                         " 'unknown_account'");
    ck_assert_int_gt(first, 0);
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
             " WHERE datname = '%s' AND pid <> pg_backend_pid()",
             db);
    ck_assert_int_ge(itdb_long(c, sql), 2);
    its_example_path(book, sizeof(book), "pricebook.json");
    snprintf(accounts, sizeof(accounts), "%s.ghosts.json", group);
    its_ghost_accounts(accounts);
    ck_assert_msg(bs_load_catalog(c, "gpu", book, accounts, &k, &err) == BS_OK, "%s", err.message);
    its_ghost_events(late, "late-");
    produce_more(late);
    wait_progress(c, (long)(s->n + late->n) - 1, (long)(s->n + late->n), pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events WHERE event_id"
                                  " LIKE 'late-%'"),
                     (long)late->n);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.rejected_events WHERE reason_code"
                                  " = 'unknown_account'"),
                     first);
    remove(accounts);
    its_free(s);
    its_free(late);
    free(s);
    free(late);
    itdb_drop(c, db);
}
END_TEST

/* A database whose latest schema version is not recorded: billingd refuses to start (5). */
START_TEST(test_schema_checked_at_start)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("schemastart", db, sizeof(db));
    char log[256];
    pid_t pid;

    names("schemastart");
    its_build(s, 10, 0);
    its_load_example(c);
    produce(s);
    /* Only the maintenance path (migration 0010) can remove a recorded version. */
    itdb_exec(c, "SET billing.maintenance = on");
    itdb_exec(c, "DELETE FROM billing.schema_version WHERE version = (SELECT max(version)"
                 " FROM billing.schema_version)");
    itdb_exec(c, "RESET billing.maintenance");
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    ck_assert_int_eq(wait_exit(pid, 30000), 5);
    ck_assert(log_has(log, "event=schema_mismatch"));
    ck_assert_int_eq(progress(c), 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"), 0);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * The schema becomes newer while billingd runs, and its connections are
 * cut: the reconnected sessions find it, nothing more is committed, and
 * billingd exits 5.
 */
START_TEST(test_schema_checked_after_reconnect)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("schemare", db, sizeof(db));
    char sql[512];
    char log[256];
    long events;
    pid_t pid;

    names("schemare");
    its_build(s, 2000, 0);
    its_load_example(c);
    produce_to(s, 1, 0, s->n / 2);
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)(s->n / 2) - 1, (long)(s->n / 2), pid);
    events = itdb_long(c, "SELECT count(*) FROM billing.usage_events");
    itdb_exec(c, "INSERT INTO billing.schema_version (version, name, checksum) SELECT"
                 " max(version) + 1, 'from_the_future', md5('x') FROM billing.schema_version");
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
             " WHERE datname = '%s' AND pid <> pg_backend_pid()",
             db);
    itdb_long(c, sql);
    produce_to(s, 0, s->n / 2, s->n);
    ck_assert_int_eq(wait_exit(pid, WAIT_MS), 5);
    ck_assert(log_has(log, "event=schema_mismatch"));
    ck_assert_int_eq(progress(c), (long)(s->n / 2));
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"), events);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * The schema changed under a session that never reconnects (a table
 * renamed, a version recorded): the in-transaction check does not run,
 * the batch fails on the missing table; billingd checks the version
 * again before it resumes and exits 5 instead of retrying for ever.
 */
START_TEST(test_schema_change_without_reconnect_exits_5)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("schemanore", db, sizeof(db));
    char log[256];
    long events;
    pid_t pid;

    names("schemanore");
    its_build(s, 2000, 0);
    its_load_example(c);
    produce_to(s, 1, 0, s->n / 2);
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)(s->n / 2) - 1, (long)(s->n / 2), pid);
    events = itdb_long(c, "SELECT count(*) FROM billing.usage_events");
    itdb_exec(c, "ALTER TABLE billing.usage_aggregates RENAME TO usage_aggregates_moved");
    itdb_exec(c, "INSERT INTO billing.schema_version (version, name, checksum) SELECT"
                 " max(version) + 1, 'from_the_future', md5('x') FROM billing.schema_version");
    produce_to(s, 0, s->n / 2, s->n);
    wait_log(log, "event=batch_failed", pid);
    ck_assert_int_eq(wait_exit(pid, 30000), 5);
    ck_assert(log_has(log, "event=schema_suspect"));
    ck_assert(log_has(log, "event=schema_mismatch"));
    ck_assert_int_eq(progress(c), (long)(s->n / 2));
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.usage_events"), events);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/*
 * PostgreSQL down while records keep coming: billingd_consumer_lag shows
 * them (the broker's high watermark minus the stored positions).
 */
START_TEST(test_lag_during_database_outage)
{
    static char page[65536];
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("lagout", db, sizeof(db));
    bs_conn *admin = itdb_connect("postgres");
    char sql[256];
    char log[256];
    struct timespec tick = {0, 100 * 1000 * 1000};
    int64_t deadline;
    long lag = 0;
    size_t half;
    pid_t pid;

    names("lagout");
    its_build(s, 2000, 0);
    half = s->n / 2;
    its_load_example(c);
    produce_to(s, 1, 0, half);
    listen_port();
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)half - 1, (long)half, pid);
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS false", db);
    itdb_exec(admin, sql);
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '%s'",
             db);
    itdb_long(admin, sql);
    bs_close(c);
    produce_to(s, 0, half, s->n);
    wait_log_any(log, "event=batch_failed", "event=catalog_stale", pid);
    deadline = now_ms() + 30000;
    while (lag != (long)(s->n - half) && now_ms() < deadline) {
        nanosleep(&tick, NULL); /* the poll interval, not a wait for an outcome */
        http_get("/metrics", page, sizeof(page));
        lag = metric_sum(page, "billingd_consumer_lag{");
    }
    ck_assert_int_eq(lag, (long)(s->n - half));
    /* Unhealthy, saying why. */
    http_get("/healthz", page, sizeof(page));
    ck_assert_msg(strstr(page, "503") != NULL && strstr(page, "unhealthy: ") != NULL, "%s", page);
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS true", db);
    itdb_exec(admin, sql);
    c = itdb_connect(db);
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    http_listen[0] = '\0';
    check_store(c, s);
    bs_close(admin);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/* Delete topic @name on the broker. */
static void delete_topic(const char *name)
{
    char errstr[MSG];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, kconf(), errstr, sizeof(errstr));
    rd_kafka_queue_t *q;
    rd_kafka_DeleteTopic_t *dt;
    rd_kafka_event_t *ev;

    ck_assert_msg(rk != NULL, "%s", errstr);
    q = rd_kafka_queue_new(rk);
    dt = rd_kafka_DeleteTopic_new(name);
    rd_kafka_DeleteTopics(rk, &dt, 1, NULL, q);
    rd_kafka_DeleteTopic_destroy(dt);
    ev = rd_kafka_queue_poll(q, TIMEOUT_MS);
    ck_assert_msg(ev != NULL, "no answer from Kafka at %s", brokers());
    ck_assert_msg(rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR, "%s",
                  rd_kafka_event_error_string(ev));
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

/* Poll /healthz until its page has @needle (within 30 s); returns it in @page. */
static void wait_health(const char *needle, char *page, size_t size)
{
    struct timespec tick = {0, 100 * 1000 * 1000};
    int64_t deadline = now_ms() + 30000;

    for (;;) {
        http_get("/healthz", page, size);
        if (strstr(page, needle) != NULL)
            return;
        ck_assert_msg(now_ms() < deadline, "/healthz never had '%s': %s", needle, page);
        nanosleep(&tick, NULL); /* the poll interval, not a wait for an outcome */
    }
}

/*
 * The dead-letter topic deleted while billingd runs: /healthz 503 naming
 * it (billingd_topics_missing 1, a topic_lost line), 200 again once it
 * exists again; then every record is stored exactly once.
 */
START_TEST(test_deleted_topic_makes_healthz_503)
{
    static char page[65536];
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("topicgone", db, sizeof(db));
    char want[256];
    char log[256];
    rd_kafka_t *rk;
    char errstr[MSG];
    size_t half;
    pid_t pid;

    names("topicgone");
    its_build(s, 2000, 0);
    half = s->n / 2;
    its_load_example(c);
    produce_to(s, 1, 0, half);
    listen_port();
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    wait_progress(c, (long)half - 1, (long)half, pid);
    wait_health("200 OK", page, sizeof(page));
    delete_topic(dlq_topic);
    snprintf(want, sizeof(want), "topic missing on the broker: dead_letter_topic=%s", dlq_topic);
    wait_health(want, page, sizeof(page));
    ck_assert_msg(strstr(page, "503") != NULL, "%s", page);
    http_get("/metrics", page, sizeof(page));
    ck_assert_int_eq(metric_sum(page, "billingd_topics_missing "), 1);
    ck_assert_int_eq(metric_sum(page, "billingd_up "), 0);
    snprintf(want, sizeof(want), "event=topic_lost missing=1 dead_letter_topic=%s", dlq_topic);
    ck_assert_msg(log_has(log, want), "no '%s' in %s", want, log);
    ck_assert_int_eq(progress(c), (long)half);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, kconf(), errstr, sizeof(errstr));
    ck_assert_msg(rk != NULL, "%s", errstr);
    create_topic(rk, dlq_topic, 1);
    rd_kafka_destroy(rk);
    wait_health("200 OK", page, sizeof(page));
    ck_assert(log_has(log, "event=topic_restored"));
    produce_to(s, 0, half, s->n);
    wait_progress(c, (long)s->n - 1, (long)s->n, pid);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    http_listen[0] = '\0';
    check_store(c, s);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/* A connection to billingd's HTTP server from @source (a loopback address); -1 if refused. */
static int http_connect(const char *source)
{
    struct sockaddr_in sa;
    struct timeval tv = {2, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    const char *colon = strrchr(http_listen, ':');

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, source, &sa.sin_addr);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

#define SLOW_CLIENTS 16
/* billingd's whole-request bound (metrics.c, HTTP_REQUEST_MS), and a margin for a loaded machine. */
#define REQUEST_BOUND_MS 5000
#define MARGIN_MS 3000

/*
 * Sixteen clients trickling header lines (each line resets MHD's own
 * timeout): a 17th client from another address gets /healthz at once, and
 * every trickling connection is closed within the whole-request bound.
 */
START_TEST(test_http_slow_clients)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("slowhttp", db, sizeof(db));
    int slow[SLOW_CLIENTS];
    int open_ = 0;
    char buf[4096];
    struct timespec tick = {0, 200 * 1000 * 1000};
    int64_t started;
    size_t len;
    ssize_t r;
    pid_t pid;
    int fd;
    int i;

    names("slowhttp");
    its_build(s, 10, 0);
    its_load_example(c);
    produce(s);
    listen_port();
    pid = start_daemon(NULL, 100);
    wait_log(last_log, "event=started", pid);
    started = now_ms();
    for (i = 0; i < SLOW_CLIENTS; i++) {
        slow[i] = http_connect("127.0.0.1");
        if (slow[i] >= 0 && send(slow[i], "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL) != 23) {
            close(slow[i]);
            slow[i] = -1;
        }
    }
    /* A normal client, now: served while the others trickle. */
    fd = http_connect("127.0.0.2");
    ck_assert_int_ge(fd, 0);
    ck_assert(write(fd, "GET /healthz HTTP/1.0\r\n\r\n", 25) == 25);
    len = 0;
    while (len + 1 < sizeof(buf) && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = '\0';
    close(fd);
    ck_assert_msg(strstr(buf, "200 OK") != NULL, "no answer to the 17th client: '%s'", buf);
    /* Trickle a header line per tick: every slow connection is cut within the bound. */
    do {
        nanosleep(&tick, NULL); /* the trickle's pace, part of the attack */
        open_ = 0;
        for (i = 0; i < SLOW_CLIENTS; i++) {
            if (slow[i] < 0)
                continue;
            /* A closed connection fails the write (EPIPE, no signal) or has its end to read. */
            if (send(slow[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) != 11 ||
                recv(slow[i], buf, sizeof(buf), MSG_DONTWAIT) == 0) {
                close(slow[i]);
                slow[i] = -1;
                continue;
            }
            open_++;
        }
    } while (open_ > 0 && now_ms() - started < REQUEST_BOUND_MS + MARGIN_MS);
    ck_assert_msg(open_ == 0, "%d trickling connections still open after %d ms", open_,
                  REQUEST_BOUND_MS + MARGIN_MS);
    ck_assert_int_eq(stop_daemon(pid, SIGTERM), 0);
    http_listen[0] = '\0';
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

/* A port that cannot be bound: billingd exits 1 and says why. */
START_TEST(test_http_bind_failure_says_why)
{
    its_stream *s = calloc(1, sizeof(*s));
    bs_conn *c = itdb_fresh("bindfail", db, sizeof(db));
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    char log[256];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    pid_t pid;

    names("bindfail");
    its_build(s, 10, 0);
    its_load_example(c);
    produce(s);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(http_listen, sizeof(http_listen), "127.0.0.1:%d", ntohs(sa.sin_port));
    pid = start_daemon(NULL, 100);
    snprintf(log, sizeof(log), "%s", last_log);
    ck_assert_int_eq(wait_exit(pid, 30000), 1);
    http_listen[0] = '\0';
    close(fd);
    ck_assert(log_has(log, "event=http_start_failed"));
    ck_assert_msg(log_has(log, "Address already in use"), "no reason in %s", log);
    its_free(s);
    free(s);
    itdb_drop(c, db);
}
END_TEST

static Suite *billingd_suite(void)
{
    Suite *s = suite_create("billingd");
    TCase *tc = tcase_create("broker");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_end_to_end);
    tcase_add_test(tc, test_kill_9_twenty_times);
    tcase_add_test(tc, test_two_daemons_rebalancing);
    tcase_add_test(tc, test_database_connections_lost);
    tcase_add_test(tc, test_database_down_pauses_and_resumes);
    tcase_add_test(tc, test_catalog_change_without_restart);
    tcase_add_test(tc, test_credit_alerts);
    tcase_add_test(tc, test_broker_restart);
    suite_add_tcase(s, tc);
    /* The faults of issue 23, to run alone: CK_RUN_CASE=faults. */
    tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_huge_record_does_not_stop_billingd);
    tcase_add_test(tc, test_dead_letter_refused_for_good);
    tcase_add_test(tc, test_missing_topic_refuses_to_start);
    tcase_add_test(tc, test_catalog_reloaded_after_postgresql_restart);
    tcase_add_test(tc, test_schema_checked_at_start);
    tcase_add_test(tc, test_schema_checked_after_reconnect);
    tcase_add_test(tc, test_schema_change_without_reconnect_exits_5);
    tcase_add_test(tc, test_lag_during_database_outage);
    tcase_add_test(tc, test_deleted_topic_makes_healthz_503);
    tcase_add_test(tc, test_http_slow_clients);
    tcase_add_test(tc, test_http_bind_failure_says_why);
    suite_add_tcase(s, tc);
    /* Its own case, to run alone: CK_RUN_CASE=threads. */
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_rate_threads_store_the_same);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(billingd_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
