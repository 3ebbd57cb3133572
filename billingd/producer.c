/*
 * producer.c - the idempotent producer of dead letters, credit alerts and the
 * events POST /v1/events queues (api.events=kafka).
 */
#include "config.h"

#include "producer.h"

#include "log.h"

#define MSG_MAX 512

rd_kafka_t *bd_producer_new(const bd_config *cfg,
                            void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                            void *opaque, char *errstr, size_t errsize)
{
    return bd_producer_new_props(cfg, NULL, 0, dr_cb, opaque, errstr, errsize);
}

rd_kafka_t *bd_producer_new_props(const bd_config *cfg, const char *const *props, size_t n,
                                  void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                                  void *opaque, char *errstr, size_t errsize)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    size_t i;

    for (i = 0; i < cfg->n_kafka; i++) {
        if (rd_kafka_conf_set(conf, cfg->kafka[i].key, cfg->kafka[i].value, errstr, errsize) !=
            RD_KAFKA_CONF_OK)
            goto error;
    }
    for (i = 0; i < n; i++) {
        if (rd_kafka_conf_set(conf, props[2 * i], props[2 * i + 1], errstr, errsize) !=
            RD_KAFKA_CONF_OK)
            goto error;
    }
    if (rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, errsize) != RD_KAFKA_CONF_OK)
        goto error;
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, opaque);
    /* rd_kafka_new owns @conf when it succeeds; on failure it is still ours. */
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errsize);
    if (rk != NULL)
        return rk;
error:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

int bd_producer_renew_if_fatal(rd_kafka_t **rk, const bd_config *cfg,
                               void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                               void *opaque, const char *event)
{
    char cause[MSG_MAX];
    char errstr[MSG_MAX];
    rd_kafka_resp_err_t e = rd_kafka_fatal_error(*rk, cause, sizeof(cause));
    rd_kafka_t *fresh;

    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    fresh = bd_producer_new(cfg, dr_cb, opaque, errstr, sizeof(errstr));
    bd_log("error", event, "error=%s cause=%s renewed=%s", bd_q(cause), bd_q(rd_kafka_err2name(e)),
           fresh != NULL ? "yes" : bd_q(errstr));
    if (fresh == NULL)
        return 1;
    rd_kafka_purge(*rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_destroy(*rk);
    *rk = fresh;
    return 1;
}
