/*
 * dlq.c - the dead-letter topic. See dlq.h.
 */
#include "config.h"

#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlq.h"
#include "log.h"
#include "md5.h"
#include "producer.h"

#define MSG_MAX 512
#define HEADER_MAX 64
/* How long a batch waits for its dead letters before it is rolled back. */
#define FLUSH_MS 15000
/* How long a full producer queue may keep a dead letter waiting before the batch fails. */
#define QUEUE_FULL_MS 15000
#define QUEUE_POLL_MS 100

struct bd_dlq {
    rd_kafka_t *rk;
    const bd_config *cfg; /* to make the producer again after a fatal error */
    const char *topic;
    bd_metrics *metrics;
    int failed;               /* deliveries that failed and may pass, since the last batch */
    int dropped;              /* deliveries that failed for good, since the last batch */
    rd_kafka_resp_err_t last; /* the error of the last failed delivery */
};

/*
 * Failures that publishing the same message again cannot cure: the
 * message itself is refused (its size, its form), whatever the broker's
 * state. Everything else (transport, timeouts, leaders, a missing topic,
 * authorisation) may pass, or is the operator's to fix, and fails the
 * batch so that it is retried.
 */
static int permanent(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR__BAD_MSG:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
        return 1;
    default:
        return 0;
    }
}

/* The header @name of @m as a string into @out ("?" if absent). */
static const char *header(const rd_kafka_message_t *m, const char *name, char *out, size_t size)
{
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t len = 0;

    snprintf(out, size, "?");
    if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        rd_kafka_header_get_last(h, name, &v, &len) == RD_KAFKA_RESP_ERR_NO_ERROR && v != NULL)
        snprintf(out, size, "%.*s", (int)(len < size ? len : size - 1), (const char *)v);
    return out;
}

static void log_dropped(const char *topic, const char *partition, const char *offset,
                        rd_kafka_resp_err_t e)
{
    bd_log("error", "dead_letter_dropped",
           "topic=%s partition=%s offset=%s error=%s kept=billing.rejected_events", bd_q(topic),
           bd_q(partition), bd_q(offset), bd_q(rd_kafka_err2str(e)));
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    bd_dlq *q = opaque;
    char topic[HEADER_MAX * 4];
    char partition[HEADER_MAX];
    char offset[HEADER_MAX];

    (void)rk;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    if (permanent(m->err)) {
        q->dropped++;
        log_dropped(header(m, "billing.source.topic", topic, sizeof(topic)),
                    header(m, "billing.source.partition", partition, sizeof(partition)),
                    header(m, "billing.source.offset", offset, sizeof(offset)), m->err);
        return;
    }
    q->failed++;
    q->last = m->err;
    bd_log("error", "dead_letter_failed", "partition=%s offset=%s error=%s",
           bd_q(header(m, "billing.source.partition", partition, sizeof(partition))),
           bd_q(header(m, "billing.source.offset", offset, sizeof(offset))),
           bd_q(rd_kafka_err2str(m->err)));
}

rd_kafka_t *bd_dlq_producer(bd_dlq *q)
{
    return q->rk;
}

bd_dlq *bd_dlq_new(const bd_config *cfg, bd_metrics *metrics)
{
    char errstr[MSG_MAX];
    bd_dlq *q = calloc(1, sizeof(*q));

    snprintf(errstr, sizeof(errstr), "out of memory");
    if (q == NULL)
        goto error;
    q->cfg = cfg;
    q->topic = cfg->dead_letter_topic;
    q->metrics = metrics;
    q->rk = bd_producer_new(cfg, on_delivery, q, errstr, sizeof(errstr));
    if (q->rk == NULL)
        goto error;
    return q;
error:
    bd_log("error", "dead_letter_start_failed", "error=%s", bd_q(errstr));
    free(q);
    return NULL;
}

void bd_dlq_free(bd_dlq *q)
{
    if (q == NULL)
        return;
    rd_kafka_flush(q->rk, FLUSH_MS);
    rd_kafka_destroy(q->rk);
    free(q);
}

static void md5_hex(const void *data, size_t len, char out[2 * BS_MD5_LEN + 1])
{
    unsigned char d[BS_MD5_LEN];
    size_t i;

    bs_md5(data, len, d);
    for (i = 0; i < BS_MD5_LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static rd_kafka_resp_err_t produce(bd_dlq *q, const bs_record *r, const bs_record_result *res)
{
    char partition[16];
    char offset[24];
    char length[24];
    char md5[2 * BS_MD5_LEN + 1];
    const char *topic = r->kafka_topic != NULL ? r->kafka_topic : "";
    size_t len = r->len > BD_DLQ_VALUE_MAX ? BD_DLQ_VALUE_MAX : r->len;

    snprintf(partition, sizeof(partition), "%" PRId32, r->kafka_partition);
    snprintf(offset, sizeof(offset), "%" PRId64, r->kafka_offset);
    snprintf(length, sizeof(length), "%zu", r->len);
    md5_hex(r->data, r->len, md5);
    return rd_kafka_producev(
        q->rk, RD_KAFKA_V_TOPIC(q->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_VALUE((void *)r->data, len),
        RD_KAFKA_V_HEADER("billing.reason_code", res->reason_code, -1),
        RD_KAFKA_V_HEADER("billing.reason", res->reason ? res->reason : "", -1),
        RD_KAFKA_V_HEADER("billing.source.topic", topic, -1),
        RD_KAFKA_V_HEADER("billing.source.partition", partition, -1),
        RD_KAFKA_V_HEADER("billing.source.offset", offset, -1),
        RD_KAFKA_V_HEADER("billing.original_length", length, -1),
        RD_KAFKA_V_HEADER("billing.md5", md5, -1), RD_KAFKA_V_END);
}

/*
 * Queue one dead letter, waiting while the producer's queue is full.
 * Returns NO_ERROR (queued, or refused for good: then logged and counted
 * in q->dropped), or the error that fails the batch.
 */
static rd_kafka_resp_err_t publish(bd_dlq *q, const bs_record *r, const bs_record_result *res)
{
    char partition[16];
    char offset[24];
    rd_kafka_resp_err_t e = produce(q, r, res);
    int waited = 0;

    while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL && waited < QUEUE_FULL_MS) {
        rd_kafka_poll(q->rk, QUEUE_POLL_MS);
        waited += QUEUE_POLL_MS;
        e = produce(q, r, res);
    }
    if (!permanent(e))
        return e;
    snprintf(partition, sizeof(partition), "%" PRId32, r->kafka_partition);
    snprintf(offset, sizeof(offset), "%" PRId64, r->kafka_offset);
    log_dropped(r->kafka_topic != NULL ? r->kafka_topic : "", partition, offset, e);
    q->dropped++;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* A producer in a fatal state is replaced (producer.h); 1 if it was: the batch fails. */
static int renew_if_fatal(bd_dlq *q)
{
    return bd_producer_renew_if_fatal(&q->rk, q->cfg, on_delivery, q, "dead_letter_producer_fatal");
}

bs_status bd_dlq_hook(void *arg, bs_conn *c, const bs_record *recs, const bs_record_result *results,
                      size_t n, bs_error *err)
{
    bd_dlq *q = arg;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    size_t sent = 0;
    size_t i;

    (void)c;
    q->failed = 0;
    q->dropped = 0;
    if (renew_if_fatal(q))
        return bs_error_set(err, BS_ERR_RETRY,
                            "dead-letter topic %s: the producer had a fatal "
                            "error; made again",
                            q->topic);
    for (i = 0; i < n && e == RD_KAFKA_RESP_ERR_NO_ERROR; i++) {
        if (results[i].outcome != BS_RECORD_REJECTED)
            continue;
        e = publish(q, &recs[i], &results[i]);
        sent++;
    }
    if (sent > 0 && e == RD_KAFKA_RESP_ERR_NO_ERROR)
        e = rd_kafka_flush(q->rk, FLUSH_MS);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR && renew_if_fatal(q))
        return bs_error_set(err, BS_ERR_RETRY,
                            "dead-letter topic %s: the producer had a fatal "
                            "error (%s); made again",
                            q->topic, rd_kafka_err2str(e));
    if (q->dropped > 0 && q->metrics != NULL)
        bd_metrics_dead_letters_dropped(q->metrics, (uint64_t)q->dropped);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR && q->failed > 0)
        e = q->last;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return bs_error_set(err, BS_ERR_RETRY, "dead-letter topic %s: %s", q->topic,
                            rd_kafka_err2str(e));
    return BS_OK;
}
