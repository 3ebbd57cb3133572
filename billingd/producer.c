/*
 * producer.c - the idempotent producer of dead letters and credit alerts.
 */
#include "config.h"

#include "producer.h"

rd_kafka_t *bd_producer_new(const bd_config *cfg,
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
    if (rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, errsize) !=
        RD_KAFKA_CONF_OK)
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
