/*
 * dlq.h - the dead-letter topic: every record the pipeline rejects is
 * published there with its original bytes and key, and headers saying
 * why and where it came from:
 *
 *   billing.reason_code   "unknown_account", "parse", ... (store/ingest.h)
 *   billing.reason        the message naming event, field and cause
 *   billing.source.topic / billing.source.partition / billing.source.offset
 *
 * Published inside the batch's transaction, before COMMIT (bs_ingest
 * hook), and waited for: a batch whose dead letters cannot be delivered
 * is rolled back and retried. So every reject reaches the topic at least
 * once; a crash between delivery and COMMIT can repeat one, and the
 * source headers identify the repeat.
 */
#ifndef BILLINGD_DLQ_H
#define BILLINGD_DLQ_H

#include "conf.h"
#include "ingest.h"

typedef struct bd_dlq bd_dlq;

/* bd_dlq_new - an idempotent producer for cfg->dead_letter_topic; NULL (logged) on failure. */
bd_dlq *bd_dlq_new(const bd_config *cfg);

/* bd_dlq_free - flush and free; NULL is a no-op. */
void bd_dlq_free(bd_dlq *q);

/* bd_dlq_hook - a bs_ingest_hook publishing the rejected records of a batch (@arg: bd_dlq). */
bs_status bd_dlq_hook(void *arg, bs_conn *c, const bs_record *recs,
                      const bs_record_result *results, size_t n, bs_error *err);

#endif
