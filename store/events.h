/*
 * events.h - raw usage events, dead letters and Kafka positions in
 * the store: what billingd writes in one transaction per batch so that
 * consuming is exactly once (events + aggregates + offsets commit
 * together or not at all).
 */
#ifndef BILLING_STORE_EVENTS_H
#define BILLING_STORE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"
#include "store.h"
#include "copy.h"

/* One event to store; strings are borrowed for the duration of the call. */
typedef struct bs_event {
    const char *id;       /* 1..128 bytes, unique forever */
    const char *account;  /* an account of billing.accounts */
    const char *resource; /* 1..128 bytes */
    const char *meter;    /* "gpu", "gpuless", "storage" or "traffic" */
    billing_time_t start; /* [start, end), nanoseconds */
    billing_time_t end;
    const char *quantity; /* non-negative decimal, at most 9 fraction digits */
    const char *model;    /* 0..64 bytes; NULL means "" */
    const char *region;   /* 0..64 bytes; NULL means "" */
    const char *source;   /* provenance, 0..512 bytes ("kafka:t/0@42"); NULL means "" */
} bs_event;

/* What became of each event of a batch. */
typedef enum bs_event_outcome {
    BS_EVENT_NEW = 0,       /* stored now */
    BS_EVENT_DUPLICATE = 1, /* its id was stored before with identical content: ignored */
    BS_EVENT_CONFLICT = 2   /* its id was stored before with other content: not stored */
} bs_event_outcome;

/* Most events per bs_events_ingest call. */
#define BS_EVENTS_BATCH_MAX 100000

/*
 * bs_events_ingest - store the @n events of @ev (1..BS_EVENTS_BATCH_MAX)
 * with permanent dedupe, inside the caller's open transaction (required:
 * the batch, its aggregates and its Kafka offsets commit together).
 *
 * First, optimistically, the first occurrence of each id is COPYed
 * (@format: BS_COPY_BINARY normally) with its fingerprint
 * (bs_event_fingerprint) straight into billing.event_ids and
 * billing.usage_events under a savepoint; later occurrences in the batch
 * are duplicates or conflicts of it. If an id is already stored (or
 * being stored by another transaction, which this call then waits for),
 * or the batch breaks a rule below, that is rolled back and the staging
 * path runs: the rows are COPYed into a session temporary table,
 * checked once for the whole batch (accounts exist, text lengths), then
 * moved by one set-based statement into billing.event_ids (first
 * occurrence of each id wins; an id whose md5 another id holds goes to
 * billing.event_id_collisions) and billing.usage_events. Either way the
 * outcome is the same. Fills @out[i] (room for @n) with each event's
 * outcome and *@n_new (may be NULL) with the count stored. An event the
 * database refuses (negative quantity, end <= start, unknown account...)
 * fails the whole call with BS_ERR_CONSTRAINT naming the constraint or
 * batch rule (usage_events_account_known, usage_events_*_length); the
 * transaction must then be rolled back (validate events with libbilling
 * first, and dead-letter what it rejects).
 */
bs_status bs_events_ingest(bs_conn *c, const bs_event *ev, size_t n, bs_copy_format format,
                           bs_event_outcome *out, size_t *n_new, bs_error *err);

/*
 * bs_event_fingerprint - the md5 of @e's content (every field but the id
 * and the source) into @fp, from the canonical bytes that SQL's
 * billing.event_fingerprint hashes (0001_initial.sql), so that rows
 * stored before and after 0006 compare. Returns 0, or -1 if a field is
 * missing, too long, or the quantity not a decimal. Thread-safe.
 */
int bs_event_fingerprint(const bs_event *e, unsigned char fp[16]);

/* A payload that could not be accepted. */
typedef struct bs_rejection {
    const char *source;      /* required, 1..512 bytes: "kafka:t/0@42" or "file:events.jsonl:7" */
    const char *kafka_topic; /* NULL when not from Kafka; then partition/offset are ignored */
    int32_t kafka_partition;
    int64_t kafka_offset;
    const char *event_id;    /* NULL if it could not be read */
    const char *reason_code; /* [a-z_]{1,32}: "invalid", "conflict", "unknown_account"... */
    const char *reason;      /* human-readable, 1..2048 bytes */
    const void *payload;     /* the original bytes, at most 1 MiB */
    size_t payload_len;
} bs_rejection;

/* bs_reject - append @r to billing.rejected_events. Returns BS_OK or an error. */
bs_status bs_reject(bs_conn *c, const bs_rejection *r, bs_error *err);

/*
 * bs_offset_get - the stored next offset of (@group, @topic, @partition)
 * into *@next; *@found is 0 (and *@next -1) when none is stored.
 */
bs_status bs_offset_get(bs_conn *c, const char *group, const char *topic, int32_t partition,
                        int64_t *next, int *found, bs_error *err);

/*
 * bs_offset_put - move the stored position from @expected (-1: none
 * stored yet) to @next, in the caller's transaction. If the stored value
 * is not @expected another consumer got there first (a rebalance, or a
 * zombie): returns BS_ERR_RETRY, and the transaction must be rolled back
 * and redone from the stored position.
 */
bs_status bs_offset_put(bs_conn *c, const char *group, const char *topic, int32_t partition,
                        int64_t expected, int64_t next, bs_error *err);

/*
 * bs_reject_send / bs_offset_send - bs_reject and bs_offset_put queued in
 * the open pipeline of @c (bs_pipeline_begin), so that a batch's rejects
 * and positions cost one round trip: their database errors are reported
 * by bs_pipeline_end (bs_reject_send reports a bad @r at once).
 * bs_offset_send sets *@moved to the rows the statement moved once
 * bs_pipeline_end has returned (so *@moved must stay valid until then);
 * bs_offset_moved then returns what bs_offset_put would have: BS_OK when
 * @moved is 1, BS_ERR_RETRY when another consumer moved the position.
 */
bs_status bs_reject_send(bs_conn *c, const bs_rejection *r, bs_error *err);
bs_status bs_offset_send(bs_conn *c, const char *group, const char *topic, int32_t partition,
                         int64_t expected, int64_t next, int64_t *moved, bs_error *err);
bs_status bs_offset_moved(const char *group, const char *topic, int32_t partition, int64_t expected,
                          int64_t moved, bs_error *err);

/*
 * bs_event_partitions - make sure usage_events has its monthly partitions
 * from @months_back months before the current UTC month to @months_ahead
 * after it (each 0..60), moving events that had landed in the default
 * partition (billing.ensure_event_partitions). The database makes at most
 * 12 months per call and none more than 12 months ahead (migration 0004):
 * beyond that it refuses the call (BS_ERR_FATAL, nothing created).
 * *@created (may be NULL) gets how many were created. Call at start and
 * daily (billingd), or at each `billing db migrate`.
 */
bs_status bs_event_partitions(bs_conn *c, int months_back, int months_ahead, int *created,
                              bs_error *err);

#endif /* BILLING_STORE_EVENTS_H */
