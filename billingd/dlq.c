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
#include "producer.h"

#define MSG_MAX 512
/* How long a batch waits for its dead letters before it is rolled back. */
#define FLUSH_MS 15000

struct bd_dlq {
    rd_kafka_t *rk;
    const char *topic;
    int failed; /* deliveries that failed since the last batch */
};

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    bd_dlq *q = opaque;

    (void)rk;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        q->failed++;
        bd_log("error", "dead_letter_failed", "error=%s", bd_q(rd_kafka_err2str(m->err)));
    }
}

bd_dlq *bd_dlq_new(const bd_config *cfg)
{
    char errstr[MSG_MAX];
    bd_dlq *q = calloc(1, sizeof(*q));

    snprintf(errstr, sizeof(errstr), "out of memory");
    if (q == NULL)
        goto error;
    q->topic = cfg->dead_letter_topic;
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

static rd_kafka_resp_err_t publish(bd_dlq *q, const bs_record *r, const bs_record_result *res)
{
    char partition[16];
    char offset[24];
    const char *topic = r->kafka_topic != NULL ? r->kafka_topic : "";

    snprintf(partition, sizeof(partition), "%" PRId32, r->kafka_partition);
    snprintf(offset, sizeof(offset), "%" PRId64, r->kafka_offset);
    return rd_kafka_producev(
        q->rk, RD_KAFKA_V_TOPIC(q->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_VALUE((void *)r->data, r->len),
        RD_KAFKA_V_HEADER("billing.reason_code", res->reason_code, -1),
        RD_KAFKA_V_HEADER("billing.reason", res->reason ? res->reason : "", -1),
        RD_KAFKA_V_HEADER("billing.source.topic", topic, -1),
        RD_KAFKA_V_HEADER("billing.source.partition", partition, -1),
        RD_KAFKA_V_HEADER("billing.source.offset", offset, -1), RD_KAFKA_V_END);
}

bs_status bd_dlq_hook(void *arg, bs_conn *c, const bs_record *recs,
                      const bs_record_result *results, size_t n, bs_error *err)
{
    bd_dlq *q = arg;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    size_t sent = 0;
    size_t i;

    (void)c;
    q->failed = 0;
    for (i = 0; i < n && e == RD_KAFKA_RESP_ERR_NO_ERROR; i++) {
        if (results[i].outcome != BS_RECORD_REJECTED)
            continue;
        e = publish(q, &recs[i], &results[i]);
        sent++;
    }
    if (sent == 0)
        return BS_OK;
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        e = rd_kafka_flush(q->rk, FLUSH_MS);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR || q->failed > 0)
        return bs_error_set(err, BS_ERR_FATAL, "dead-letter topic %s: %s", q->topic,
                            e != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_err2str(e)
                                                            : "delivery failed");
    return BS_OK;
}
