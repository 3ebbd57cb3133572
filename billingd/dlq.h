/*
 * dlq.h - the dead-letter topic: every record the pipeline rejects is
 * published there with its bytes and headers saying why and where it
 * came from:
 *
 *   billing.reason_code      "unknown_account", "parse", ... (store/ingest.h)
 *   billing.reason           the message naming event, field and cause
 *   billing.source.topic / billing.source.partition / billing.source.offset
 *   billing.original_length  the record's length in bytes (decimal)
 *   billing.md5              the md5 of the whole record (32 hex digits)
 *
 * The value is the whole record up to BD_DLQ_VALUE_MAX bytes, else its
 * first BD_DLQ_VALUE_MAX bytes: a dead letter shorter than
 * billing.original_length is a head, and billing.md5 identifies the
 * whole record, which billing.rejected_events keeps (to 1 MiB).
 *
 * Published inside the batch's transaction, before COMMIT (bs_ingest
 * hook), and waited for. A failure that retrying cannot cure for that
 * one message (too large for the topic, refused as invalid) does not
 * stop the batch: the record is in billing.rejected_events, the failure
 * is logged with its source partition and offset and counted in
 * billingd_dead_letters_dropped_total. Any other failure (broker down,
 * topic gone, timeout) rolls the batch back and it is retried. So every
 * reject reaches the topic at least once unless it cannot be published
 * at all; a crash between delivery and COMMIT can repeat one, and the
 * source headers identify the repeat.
 */
#ifndef BILLINGD_DLQ_H
#define BILLINGD_DLQ_H

#include <librdkafka/rdkafka.h>

#include "conf.h"
#include "ingest.h"
#include "metrics.h"

/*
 * The largest dead-letter value: the largest record a valid event can be
 * (JSON, 64 KiB; protobuf is 4 KiB), well under Kafka's default message
 * size (1 MB), so the head of a larger, garbage record always fits.
 */
#define BD_DLQ_VALUE_MAX BS_JSON_RECORD_MAX

typedef struct bd_dlq bd_dlq;

/*
 * bd_dlq_new - an idempotent producer for cfg->dead_letter_topic, counting
 * dropped dead letters in @metrics (not owned; outlives the bd_dlq; NULL:
 * not counted, only logged: the HTTP API's).
 * NULL (logged) on failure.
 */
bd_dlq *bd_dlq_new(const bd_config *cfg, bd_metrics *metrics);

/*
 * bd_dlq_producer - the producer in use (owned by @q; replaced, and the
 * old one destroyed, by the next bd_dlq_hook after a fatal error). For
 * tests that inject faults.
 */
rd_kafka_t *bd_dlq_producer(bd_dlq *q);

/* bd_dlq_free - flush and free; NULL is a no-op. */
void bd_dlq_free(bd_dlq *q);

/*
 * bd_dlq_hook - a bs_ingest_hook publishing the rejected records of a
 * batch (@arg: bd_dlq). Returns BS_OK when every dead letter was
 * delivered or failed for good (logged, counted), or BS_ERR_RETRY when
 * one failed in a way that may pass (the batch is rolled back). A
 * producer in a fatal state (rd_kafka_fatal_error: the idempotent
 * producer's sequence broken) is replaced by a new one, logged
 * (`dead_letter_producer_fatal`, the cause), and the batch fails with
 * BS_ERR_RETRY. One caller at a time.
 */
bs_status bd_dlq_hook(void *arg, bs_conn *c, const bs_record *recs, const bs_record_result *results,
                      size_t n, bs_error *err);

#endif
