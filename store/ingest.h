/*
 * ingest.h - the ingest pipeline shared by billingd and `billing ingest`:
 * a batch of raw records (bytes and where they came from) is decoded,
 * validated and rated through libbilling against the catalog read from
 * the store, deduplicated forever against billing.event_ids, and written
 * in ONE transaction: the new raw events, their exact aggregates added to
 * billing.usage_aggregates, every rejected record (with its original
 * bytes and a reason code) in billing.rejected_events, and the Kafka
 * positions the batch accounts for. Either all of it commits or none:
 * replaying a batch after a crash gives duplicates only, so the database
 * looks as if each record had been processed exactly once.
 *
 * Reason codes of rejected records ([a-z_]{1,32}, stored and published):
 *   too_large        record over its size bound (protobuf 4 KiB, JSON 64 KiB)
 *   parse            undecodable bytes (not a UsageEvent / not JSON)
 *   invalid          a field is missing or invalid (message names it)
 *   range            a value outside the supported range
 *   unknown_account  the account is not in the catalog (yet)
 *   no_price         no price for the meter, model and region at that time
 *   conflict         the id was stored before with other content
 *
 * Not thread-safe: one bs_ingest per thread, with its own connection
 * (bs_ingest_set_threads makes threads of its own inside one call).
 */
#ifndef BILLING_STORE_INGEST_H
#define BILLING_STORE_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "dbcatalog.h"
#include "store.h"

/* How a record's bytes encode a UsageEvent. */
typedef enum bs_record_format {
    BS_RECORD_PROTOBUF = 0, /* billing.v1.UsageEvent message, no length prefix */
    BS_RECORD_JSON = 1      /* one JSON object (a JSON Lines line without its newline) */
} bs_record_format;

/* One raw record; everything borrowed for the duration of the call. */
typedef struct bs_record {
    const void *data;
    size_t len;
    bs_record_format format;
    const char *source;      /* 1..512 bytes: "kafka:t/0@42", "file:events.jsonl:7" */
    const char *kafka_topic; /* NULL when not from Kafka (partition, offset ignored) */
    int32_t kafka_partition;
    int64_t kafka_offset;
    /* Set when the reader already refused the record (a file's over-long line, whose bytes
     * were skipped): it is rejected with this code and message, @data kept as given. */
    const char *reject_code;
    const char *reject_reason;
} bs_record;

/* A consumer position to move in the batch's transaction (kafka_offsets). */
typedef struct bs_position {
    const char *topic;
    int32_t partition;
    int64_t expected; /* the stored next offset read at assignment; -1: none stored */
    int64_t next;     /* the offset after the batch's last record of that partition */
} bs_position;

/* What became of one record. */
typedef enum bs_record_outcome {
    BS_RECORD_NEW = 0,       /* stored and rated now */
    BS_RECORD_DUPLICATE = 1, /* its id was stored before (or earlier in the batch) identically */
    BS_RECORD_REJECTED = 2   /* in rejected_events; reason_code says why */
} bs_record_outcome;

typedef struct bs_record_result {
    bs_record_outcome outcome;
    const char *event_id;       /* NULL if it could not be decoded; owned by the handle */
    const billing_event *event; /* the decoded event (NULL if not decoded); owned by the handle */
    const char *reason_code;    /* static string, NULL unless rejected */
    const char *reason;         /* message naming event, field and cause; owned by the handle */
} bs_record_result;

/* Totals of one batch. */
typedef struct bs_ingest_counts {
    size_t records;
    size_t stored;
    size_t duplicates;
    size_t rejected;
    size_t aggregates; /* aggregate rows added to */
} bs_ingest_counts;

/* bs_ingest_counts_add - add @k to @total (both non-NULL). */
void bs_ingest_counts_add(bs_ingest_counts *total, const bs_ingest_counts *k);

/* Most records per batch (bs_events_ingest's bound). */
#define BS_INGEST_BATCH_MAX 100000
/* Largest JSON record accepted; protobuf records are bound by BILLING_EVENT_WIRE_MAX. */
#define BS_JSON_RECORD_MAX (64u * 1024u)

/* Options of bs_ingest_batch. */
enum {
    BS_INGEST_KEEP_REJECTS = 1 /* do not add rejected records to rejected_events (replay:
                                  they are there already) */
};

typedef struct bs_ingest bs_ingest;

/*
 * bs_ingest_new - a pipeline rating against @cat (borrowed; see
 * bs_ingest_set_catalog). @group names the consumer group whose
 * positions bs_ingest_batch moves (NULL when there are none: files).
 * Returns a new handle (bs_ingest_free) or NULL when out of memory.
 */
bs_ingest *bs_ingest_new(bs_catalog *cat, const char *group);

/* bs_ingest_free - free; NULL is a no-op. */
void bs_ingest_free(bs_ingest *in);

/* Most threads a bs_ingest decodes and rates on. */
#define BS_INGEST_THREADS_MAX 64

/*
 * bs_ingest_set_threads - decode and rate later batches on up to @n
 * threads (1..BS_INGEST_THREADS_MAX; 1, the default, uses only the
 * caller's): a batch is cut into contiguous slices of at least 256
 * records, one per thread, each rated into a rater of its own against the
 * shared catalog, and the raters are added together in slice order. The
 * results, counts and everything stored are the same for every @n.
 * The threads live for one bs_ingest_prepare, which returns once they are
 * joined; the hook is never called on them. Returns 0, or -1 (@n out of
 * range, or out of memory: the setting is unchanged).
 */
int bs_ingest_set_threads(bs_ingest *in, int n);

/*
 * bs_ingest_set_catalog - rate later batches against @cat (a catalog
 * change). Discards a batch prepared and not committed (bs_ingest_prepare),
 * so the old catalog may be freed once this returns.
 */
void bs_ingest_set_catalog(bs_ingest *in, bs_catalog *cat);

/*
 * bs_ingest_hook - called inside the batch's transaction after every
 * write and before COMMIT, with the records and their results (billingd
 * publishes the dead letters there, so that a failure to publish rolls
 * the batch back: at least once, never lost). Returning an error rolls
 * the batch back; BS_ERR_RETRY makes bs_transaction run it again. @c is
 * the batch's connection, inside its transaction (reads see the batch).
 */
typedef bs_status (*bs_ingest_hook)(void *arg, bs_conn *c, const bs_record *recs,
                                    const bs_record_result *results, size_t n, bs_error *err);

/* bs_ingest_set_hook - install @fn (NULL: none) with @arg for later batches. */
void bs_ingest_set_hook(bs_ingest *in, bs_ingest_hook fn, void *arg);

/*
 * bs_ingest_batch - run the pipeline over @n records (1..BS_INGEST_BATCH_MAX)
 * and move the @npos positions, in one transaction retried on transient
 * failures (bs_transaction; decoding is done once). @flags: 0 or
 * BS_INGEST_KEEP_REJECTS. Fills @results[i] (room for @n; valid until the
 * next call or bs_ingest_free) and @counts (may be NULL). A rejected
 * record is not an error. Returns BS_OK; BS_ERR_RETRY when the retries
 * ran out (including a position moved by another consumer: re-read the
 * positions); BS_ERR_INVALID for bad arguments; BS_ERR_NOMEM; or another
 * database error. Nothing is committed on error.
 */
bs_status bs_ingest_batch(bs_ingest *in, bs_conn *c, const bs_record *recs, size_t n,
                          const bs_position *pos, size_t npos, int flags, bs_record_result *results,
                          bs_ingest_counts *counts, bs_error *err);

/*
 * bs_ingest_prepare / bs_ingest_commit - bs_ingest_batch in two halves, so
 * that a consumer can decode and rate batch n+1 while batch n commits.
 * bs_ingest_prepare decodes and rates @n records (same limits and
 * @results as bs_ingest_batch) without any connection; @recs and
 * @results must stay valid until bs_ingest_commit returns.
 * bs_ingest_commit runs the transaction of the prepared batch (a retry
 * rates again from the records) and moves the @npos positions; returns as
 * bs_ingest_batch. A prepared batch is committed at most once; preparing
 * again discards one not committed. Not thread-safe per handle: use one
 * bs_ingest per batch in flight (they may share a catalog, which must not
 * be changed while either is in use).
 */
bs_status bs_ingest_prepare(bs_ingest *in, const bs_record *recs, size_t n,
                            bs_record_result *results, bs_error *err);
bs_status bs_ingest_commit(bs_ingest *in, bs_conn *c, const bs_position *pos, size_t npos,
                           int flags, bs_ingest_counts *counts, bs_error *err);

/*
 * bs_aggregates_rate - add the stored aggregates of @account (NULL: every
 * account of the catalog's currency) to @r, a rater of @cat's catalog with
 * dedupe off, so that its invoices and credit balance are those of every
 * event stored. A stored aggregate the catalog cannot price (a version no
 * longer in force lost the rate) fails with BS_ERR_INVALID naming it.
 */
bs_status bs_aggregates_rate(bs_conn *c, const bs_catalog *cat, billing_rater *r,
                             const char *account, bs_error *err);

/*
 * bs_aggregates_rate of one account in steps, for a caller that sends it
 * with other statements in one round trip (balance.h's bs_balance_fetch):
 * bs_agg_read_one_sql, prepared as BS_AGG_READ_ONE_STMT, takes the
 * catalog's price book (bs_catalog_book) and the account; then
 * bs_aggregates_add_rows adds the rows of @res to @r as bs_aggregates_rate
 * does (its errors).
 */
#define BS_AGG_READ_ONE_STMT "bs_agg_read_one"
extern const char bs_agg_read_one_sql[];
bs_status bs_aggregates_add_rows(const PGresult *res, billing_rater *r, bs_error *err);

/*
 * bs_epoch_fn - called by bs_aggregates_rate_by_epoch once per account
 * and credit epoch with usage, when the rater holds every stored
 * aggregate of that account's epoch and its earlier ones (and none of a
 * later one); @year, @month: the latest local month with usage in the
 * epoch. Non-zero stops the walk (BS_ERR_INVALID; the caller keeps its
 * own error).
 */
typedef int (*bs_epoch_fn)(void *arg, const char *account, unsigned epoch, int year, int month);

/*
 * bs_aggregates_rate_by_epoch - bs_aggregates_rate for the accounts of
 * @accounts (a text[] literal, bs_text_array), in one query: account by
 * account in bytewise (strcmp) order, each account's aggregates added in
 * credit epoch order (libbilling's epoch numbers: grant bounds at or
 * before the usage), calling @fn after each epoch's. The credit left at
 * the end of an epoch is then read from @r with no usage of a later epoch
 * of that account counted. Returns BS_OK, the error of
 * bs_aggregates_rate, or BS_ERR_INVALID when @fn stopped.
 */
bs_status bs_aggregates_rate_by_epoch(bs_conn *c, const bs_catalog *cat, billing_rater *r,
                                      const char *accounts, bs_epoch_fn fn, void *arg,
                                      bs_error *err);

#endif /* BILLING_STORE_INGEST_H */
