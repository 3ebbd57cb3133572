/*
 * producer.h - the idempotent Kafka producer that the dead-letter,
 * credit-alert and HTTP API (api.events=kafka) publishers share: the
 * config's kafka.* properties, then enable.idempotence, a delivery
 * callback and its opaque.
 */
#ifndef BILLINGD_PRODUCER_H
#define BILLINGD_PRODUCER_H

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

/*
 * bd_producer_new_props - bd_producer_new with @n more librdkafka
 * properties (@props: key, value, key, value...) set after the config's
 * and before enable.idempotence (the HTTP API's producer bounds
 * message.timeout.ms by api.produce_ms that way).
 */
rd_kafka_t *bd_producer_new_props(const bd_config *cfg, const char *const *props, size_t n,
                                  void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                                  void *opaque, char *errstr, size_t errsize);

/*
 * bd_producer_renew_if_fatal - if the producer *@rk is in a fatal state
 * (rd_kafka_fatal_error: the idempotent producer's sequence or epoch
 * broken; every produce fails from then on), log @event with the cause,
 * drop what it still queues (the batch that needed it fails) and replace
 * it by a new one made as bd_producer_new makes it. Returns 1 if it was
 * fatal (replaced, or kept when a new one could not be made: logged, and
 * tried again on the next call), 0 if not. Not thread-safe per producer.
 */
int bd_producer_renew_if_fatal(rd_kafka_t **rk, const bd_config *cfg,
                               void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                               void *opaque, const char *event);

#endif
