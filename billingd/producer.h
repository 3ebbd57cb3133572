/*
 * producer.h - the idempotent Kafka producer that the dead-letter and
 * credit-alert publishers share: the config's kafka.* properties, then
 * enable.idempotence, a delivery callback and its opaque.
 */
#ifndef BD_PRODUCER_H
#define BD_PRODUCER_H

#include <librdkafka/rdkafka.h>

#include "conf.h"

/*
 * bd_producer_new - a producer from @cfg's kafka.* properties with
 * idempotence on, delivery reports to @dr_cb with @opaque. Returns the
 * handle (free with rd_kafka_destroy), or NULL with the reason in @errstr
 * of @errsize bytes. Not thread-safe with changes to @cfg.
 */
rd_kafka_t *bd_producer_new(const bd_config *cfg,
                            void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                            void *opaque, char *errstr, size_t errsize);

#endif
