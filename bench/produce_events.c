/*
 * produce_events.c - the benchmark workload (workload.h) as protobuf
 * UsageEvent records to a Kafka topic, keyed by account, for measuring
 * billingd (bench/billingd.sh, doc/performance.md).
 *
 *   produce_events [--json] [--ordered] [--rate N] [--accounts N] [--partitions N]
 *                  BROKERS TOPIC EVENTS
 *
 * Without --rate, as fast as the broker takes them (the backlog of the
 * throughput run). With --rate N, N events a second, each id carrying the
 * millisecond it was sent ("lat-<ms>-<n>") so that the latency from send
 * to commit can be read from billing.usage_events.received_at. Creates
 * TOPIC with --partitions partitions (default 4) if it does not exist.
 * --json sends the same events as JSON lines (billing rate's input) instead
 * of protobuf: what the physical reference of bench/billingd.sh copies.
 * --ordered sends the same records in time order: record n of EVENTS at
 * minute n * 30 days / EVENTS of January (bench_order_spec), a metering
 * stream where every instance reports minute after minute.
 */
#include "config.h"

#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "billing.h"
#include "workload.h"

#define MSG 512

typedef struct opts {
    int json;
    int ordered;
    long rate;
    int accounts;
    int partitions;
    const char *brokers;
    const char *topic;
    long events;
} opts;

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int parse(opts *o, int argc, char **argv)
{
    int i = 1;

    memset(o, 0, sizeof(*o));
    o->accounts = 1000;
    o->partitions = 4;
    if (i < argc && strcmp(argv[i], "--json") == 0) {
        o->json = 1;
        i++;
    }
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--ordered") == 0) {
            o->ordered = 1;
            i--; /* a flag without a value */
        } else if (strcmp(argv[i], "--rate") == 0)
            o->rate = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--accounts") == 0)
            o->accounts = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--partitions") == 0)
            o->partitions = atoi(argv[i + 1]);
        else
            return -1;
    }
    if (argc - i != 3 || o->accounts < 1 || o->partitions < 1)
        return -1;
    o->brokers = argv[i];
    o->topic = argv[i + 1];
    o->events = atol(argv[i + 2]);
    return o->events > 0 ? 0 : -1;
}

static void create_topic(rd_kafka_t *rk, const opts *o)
{
    char errstr[MSG];
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_NewTopic_t *nt =
        rd_kafka_NewTopic_new(o->topic, o->partitions, 1, errstr, sizeof(errstr));
    rd_kafka_event_t *ev;

    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_NewTopic_destroy(nt);
    ev = rd_kafka_queue_poll(q, 20000);
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
}

static int send_one(rd_kafka_t *rk, const opts *o, billing_event *ev, uint64_t *rng, long n)
{
    unsigned char buf[BILLING_EVENT_WIRE_MAX];
    char id[64];
    size_t len;
    spec s;
    int w;

    bench_make_spec(&s, rng, o->accounts);
    if (o->ordered)
        bench_order_spec(&s, n, o->events);
    if (o->rate > 0)
        snprintf(id, sizeof(id), "lat-%" PRId64 "-%ld", wall_ms(), n);
    else
        snprintf(id, sizeof(id), "ev-%ld", n);
    if (o->json) {
        snprintf(s.id, sizeof(s.id), "%.31s", id);
        w = bench_format_json(&s, (char *)buf, sizeof(buf));
        if (w < 1 || (size_t)w >= sizeof(buf))
            return -1;
        len = (size_t)w - 1; /* without its newline */
    } else {
        bench_fill_event(ev, &s, id);
        if (billing_event_encode(ev, buf, sizeof(buf), &len) != BILLING_OK)
            return -1;
    }
    while (
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_KEY(s.account, strlen(s.account)), RD_KAFKA_V_VALUE(buf, len),
                          RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(rk, 10);
    return 0;
}

/* Pace to o->rate: sleep until event @n is due (this is the load generator's clock). */
static void pace(const opts *o, int64_t started, long n, rd_kafka_t *rk)
{
    int64_t due;
    int64_t now;

    if (o->rate <= 0)
        return; /* no pace: not a division by zero */
    due = started + n * 1000 / o->rate;
    now = wall_ms();
    if (due > now)
        rd_kafka_poll(rk, (int)(due - now));
}

int main(int argc, char **argv)
{
    char errstr[MSG];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    billing_event *ev = billing_event_new();
    uint64_t rng = UINT64_C(88172645463325252);
    rd_kafka_t *rk;
    int64_t started;
    opts o;
    long n;

    if (parse(&o, argc, argv) != 0) {
        fprintf(stderr, "usage: produce_events [--json] [--ordered] [--rate N] [--accounts N] "
                        "[--partitions N] BROKERS TOPIC EVENTS\n");
        return 2;
    }
    rd_kafka_conf_set(conf, "bootstrap.servers", o.brokers, errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "linger.ms", o.rate > 0 ? "1" : "20", errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "compression.type", "lz4", errstr, sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (rk == NULL || ev == NULL) {
        fprintf(stderr, "produce_events: %s\n", errstr);
        return 1;
    }
    create_topic(rk, &o);
    started = wall_ms();
    for (n = 0; n < o.events; n++) {
        pace(&o, started, n, rk);
        if (send_one(rk, &o, ev, &rng, n) != 0)
            return 1;
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 60000);
    fprintf(stderr, "produced %ld events in %.1f s\n", o.events,
            (double)(wall_ms() - started) / 1000.0);
    rd_kafka_destroy(rk);
    billing_event_destroy(ev);
    return 0;
}
