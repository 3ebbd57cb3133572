/*
 * daemon.h - billingd's consumer: Kafka records in batches through the
 * ingest pipeline (store/ingest.h), one PostgreSQL transaction per batch
 * that also moves the partitions' positions in billing.kafka_offsets.
 *
 * Exactly once: positions live in the database, written in the batch's
 * transaction with a compare-and-set (bs_offset_put); on assignment, and
 * after any failed batch, the consumer seeks every partition to the
 * position stored there. Kafka's own committed offsets are written after
 * each batch for lag tools only and never read.
 */
#ifndef BILLINGD_DAEMON_H
#define BILLINGD_DAEMON_H

#include <signal.h>
#include <stdint.h>

#include "conf.h"

/* Counters for /metrics and the final log line; read from the daemon's thread. */
typedef struct bd_stats {
    uint64_t consumed;   /* records taken from Kafka into batches */
    uint64_t stored;     /* new events committed */
    uint64_t duplicates; /* records whose id was stored before */
    uint64_t rejected;   /* records rejected (dead letters) */
    uint64_t batches;    /* batches committed */
    uint64_t db_errors;  /* batches that failed and were rolled back */
    uint64_t reloads;    /* catalog reloads */
} bd_stats;

/* bd_run's exit statuses besides 0 (see billingd(8), EXIT STATUS). */
enum {
    BD_EXIT_START = 1, /* could not start: database, catalog, Kafka configuration */
    BD_EXIT_TOPIC = 4, /* a configured topic does not exist on the broker */
    BD_EXIT_SCHEMA = 5 /* the database schema is not the one this billingd needs */
};

/*
 * bd_run - consume until *@stop becomes non-zero (set by a signal
 * handler), then commit the batch in flight, leave the group and return
 * 0. Returns BD_EXIT_START, BD_EXIT_TOPIC or BD_EXIT_SCHEMA after logging
 * why it could not start (bad Kafka property, database unreachable at
 * start, no catalog, a missing topic, a schema at another version), and
 * BD_EXIT_SCHEMA when a reconnected session finds such a schema (nothing
 * is committed on it). Blocks.
 */
int bd_run(const bd_config *cfg, volatile sig_atomic_t *stop);

#endif
