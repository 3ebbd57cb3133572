/*
 * daemon.c - billingd's consumer loop. See daemon.h and
 * doc/architecture.md ("Exactly once").
 *
 * One thread consumes: librdkafka calls the rebalance callback from
 * rd_kafka_consumer_poll, so assignment and batches never run
 * concurrently. Commits run on commit lanes (commit.connections): a lane
 * owns the partitions whose number modulo the lane count is its own, and
 * has its own database connection and committer thread, so batches of
 * different partitions commit at once on several PostgreSQL backends.
 * Within a lane batches overlap by one: while its committer runs the
 * transaction of batch n, this thread fills, decodes and rates batch n+1
 * (two batch buffers, each with its own bs_ingest), on rate.threads
 * threads of its own (bs_ingest_set_threads). Batch n+1 is handed
 * over only once batch n has committed, so its positions start where n's
 * ended and a partition's commits stay in order; if any batch fails, every
 * batch being filled is dropped and all partitions are read again from
 * their stored positions. Everything else that uses a connection or the
 * catalog (assignment, recovery, catalog reload, shutdown) first waits for
 * every committer (wait_all), so no connection is used by two threads.
 * The dead-letter and alert hooks run on the committers, one at a time
 * (hook_lock).
 */
#include "config.h"

#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbcatalog.h"
#include "alerts.h"
#include "daemon.h"
#include "dlq.h"
#include "events.h"
#include "ingest.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"

#define POLL_MS 100
#define SEEK_TIMEOUT_MS 10000
#define SOURCE_MAX 300
#define TOPIC_MAX 249
#define MSG_MAX 512
#define BACKOFF_FIRST_MS 200
/* How often, while consumption is paused, the lag is asked of the broker; and how long a query may take. */
#define LAG_REFRESH_MS 1000
#define LAG_QUERY_MS 1000
/* How long to wait for the broker's metadata at start, per attempt. */
#define METADATA_MS 10000
/* Topics deleted while running: how often the metadata is asked, and how long it may take. */
#define TOPIC_WATCH_MS 2000
#define TOPIC_QUERY_MS 1000
/* Rejected records logged a second at most (log_rejected). */
#define REJECT_LOG_PER_S 10

/* One assigned partition. */
typedef struct bd_part {
    char topic[TOPIC_MAX + 1];
    int32_t partition;
    int64_t stored; /* next offset in kafka_offsets; -1: none stored */
    int ready;      /* stored is known and the consumer was positioned there */
} bd_part;

/* One batch: filled, then prepared (decoded, rated), then committed. */
typedef struct bd_batch {
    rd_kafka_message_t **msgs;
    bs_record *recs;
    bs_record_result *results;
    char (*sources)[SOURCE_MAX];
    bs_position *pos;
    size_t n;
    size_t np;
    int64_t first_ms;
    int64_t started;
    int64_t ms; /* from flush to commit */
    bs_ingest *in;
    /* What the committer found, read once it has been joined. */
    bs_status st;
    bs_error err;
    bs_ingest_counts k;
} bd_batch;

#define LANES_MAX 8

typedef struct bd_daemon bd_daemon;

/* A commit lane: its partitions' batches, committed in order on its connection. */
typedef struct bd_lane {
    bd_daemon *d;
    bs_conn *db; /* lane 0 shares the daemon's connection */
    bd_batch batches[2];
    bd_batch *fill;     /* the batch being filled */
    bd_batch *inflight; /* the batch the committer runs; NULL when none */
    pthread_t committer;
    int committed; /* the committer has finished the batch in flight (under d->lock) */
    unsigned long schema_session; /* the session of db whose schema was checked (committer) */
} bd_lane;

struct bd_daemon {
    const bd_config *cfg;
    volatile sig_atomic_t *stop;
    rd_kafka_t *rk;
    bd_dlq *dlq;
    bd_alerts *alerts;
    bs_conn *db;
    bs_conn *listen; /* LISTEN billing_catalog; NULL while broken */
    bs_catalog *cat;
    bd_metrics *metrics;
    bd_part *parts;
    size_t n_parts;
    size_t cap_parts;
    bd_lane lanes[LANES_MAX];
    size_t n_lanes;
    pthread_mutex_t lock;      /* guards the lanes' committed */
    pthread_mutex_t hook_lock; /* one hook (dead letters, alerts) at a time */
    /* Database trouble: when to try again, and the next pause. */
    int64_t retry_at_ms;
    long backoff_ms;
    /* The catalog may be stale (a reload failed, or LISTEN was lost): no batch is rated until
       a reload succeeds. */
    int stale;
    unsigned long db_schema_session; /* the session of db whose schema was checked */
    int64_t lag_at_ms;               /* next lag refresh while paused */
    int exit_code;                   /* non-zero: stop and exit with it (BD_EXIT_SCHEMA) */
    int64_t topics_at_ms;            /* next look for deleted topics */
    char topics_missing[MSG_MAX];    /* those found missing last time, "role=name ..." */
    /* Rejected records logged: at most REJECT_LOG_PER_S a second, the rest counted. */
    int64_t reject_second;
    unsigned reject_logged;
    uint64_t reject_suppressed;
    bd_stats stats;
};

/*
 * "kafka:TOPIC/PARTITION@OFFSET" into @out (SOURCE_MAX bytes, cut as
 * snprintf would): by hand, snprintf per record was a percent of
 * billingd's CPU.
 */
static void source_name(char *out, const char *topic, int32_t partition, int64_t offset)
{
    char buf[SOURCE_MAX + 8 + 2 * BS_INT64_TEXT_MAX];
    size_t len = strnlen(topic, SOURCE_MAX);
    char *p = buf;

    memcpy(p, "kafka:", 6);
    p += 6;
    memcpy(p, topic, len);
    p += len;
    *p++ = '/';
    p = bs_int64_text(p, partition);
    *p++ = '@';
    p = bs_int64_text(p, offset);
    len = (size_t)(p - buf);
    if (len > SOURCE_MAX - 1)
        len = SOURCE_MAX - 1;
    memcpy(out, buf, len);
    out[len] = '\0';
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------- */
/* Partitions                                                              */
/* ---------------------------------------------------------------------- */

static bd_part *find_part(bd_daemon *d, const char *topic, int32_t partition)
{
    size_t i;

    for (i = 0; i < d->n_parts; i++) {
        if (d->parts[i].partition == partition && strcmp(d->parts[i].topic, topic) == 0)
            return &d->parts[i];
    }
    return NULL;
}

static bd_part *add_part(bd_daemon *d, const char *topic, int32_t partition)
{
    bd_part *p = find_part(d, topic, partition);
    bd_part *grown;

    if (p != NULL)
        return p;
    if (d->n_parts == d->cap_parts) {
        grown = realloc(d->parts, (d->cap_parts * 2 + 8) * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        d->parts = grown;
        d->cap_parts = d->cap_parts * 2 + 8;
    }
    p = &d->parts[d->n_parts++];
    snprintf(p->topic, sizeof(p->topic), "%s", topic);
    p->partition = partition;
    p->stored = -1;
    p->ready = 0;
    return p;
}

static void remove_part(bd_daemon *d, const char *topic, int32_t partition)
{
    bd_part *p = find_part(d, topic, partition);

    if (p != NULL)
        *p = d->parts[--d->n_parts];
}

/* Read the stored position of @p; 0, or -1 (database trouble, logged). */
static int read_position(bd_daemon *d, bd_part *p)
{
    bs_error err;
    int found;

    if (bs_offset_get(d->db, d->cfg->group, p->topic, p->partition, &p->stored, &found, &err) ==
        BS_OK)
        return 0;
    bd_log("error", "position_read_failed", "topic=%s partition=%" PRId32 " error=%s", p->topic,
           p->partition, bd_q(err.message));
    return -1;
}

/* Where to start @p: its stored position, or the beginning when none is stored. */
static int64_t start_offset(const bd_part *p)
{
    return p->stored >= 0 ? p->stored : RD_KAFKA_OFFSET_BEGINNING;
}

/* Pause (or resume) every partition that is not ready (or every one, with @all). */
static void pause_parts(bd_daemon *d, int pause, int all)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)d->n_parts + 1);
    size_t i;

    for (i = 0; i < d->n_parts; i++) {
        if (all || !d->parts[i].ready)
            rd_kafka_topic_partition_list_add(l, d->parts[i].topic, d->parts[i].partition);
    }
    if (l->cnt > 0 && pause)
        rd_kafka_pause_partitions(d->rk, l);
    else if (l->cnt > 0)
        rd_kafka_resume_partitions(d->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
}

/* ---------------------------------------------------------------------- */
/* Batches                                                                 */
/* ---------------------------------------------------------------------- */

static void drop_batch(bd_batch *b)
{
    size_t i;

    for (i = 0; i < b->n; i++)
        rd_kafka_message_destroy(b->msgs[i]);
    b->n = 0;
}

/* The positions batch @b moves: one per partition, to after its last record. */
static size_t batch_positions(bd_daemon *d, bd_batch *b)
{
    size_t np = 0;
    size_t i;
    size_t j;
    const rd_kafka_message_t *m;
    bd_part *p;

    for (i = 0; i < b->n; i++) {
        m = b->msgs[i];
        for (j = 0; j < np; j++) {
            if (b->pos[j].partition == m->partition &&
                strcmp(b->pos[j].topic, rd_kafka_topic_name(m->rkt)) == 0)
                break;
        }
        if (j == np) {
            /* Batches hold assigned partitions only: flushed before any is revoked. */
            p = find_part(d, rd_kafka_topic_name(m->rkt), m->partition);
            if (p == NULL)
                continue;
            b->pos[np].topic = p->topic;
            b->pos[np].partition = p->partition;
            b->pos[np].expected = p->stored;
            np++;
        }
        b->pos[j].next = m->offset + 1;
    }
    return np;
}

/* Tell Kafka where we are, for lag tools only (never read back). */
static void commit_informational(bd_daemon *d, const bd_batch *b)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)b->np);
    size_t i;

    for (i = 0; i < b->np; i++)
        rd_kafka_topic_partition_list_add(l, b->pos[i].topic, b->pos[i].partition)->offset =
            b->pos[i].next;
    rd_kafka_commit(d->rk, l, 1);
    rd_kafka_topic_partition_list_destroy(l);
}

/*
 * A failed batch: stop consuming, try the database again later, resume
 * from what it holds. The batch being filled follows the failed one, so
 * it goes too: both are read again from the stored positions.
 */
/*
 * Stop consuming: drop every batch being filled, pause every partition
 * and read each again from its stored position once sync_parts runs,
 * no sooner than the backoff.
 */
static void stall(bd_daemon *d)
{
    size_t i;

    for (i = 0; i < d->n_lanes; i++)
        drop_batch(d->lanes[i].fill);
    for (i = 0; i < d->n_parts; i++)
        d->parts[i].ready = 0;
    pause_parts(d, 1, 1);
    d->retry_at_ms = now_ms() + d->backoff_ms;
    d->backoff_ms =
        d->backoff_ms * 2 > d->cfg->retry_max_ms ? d->cfg->retry_max_ms : d->backoff_ms * 2;
}

static void batch_failed(bd_daemon *d, bd_batch *b)
{

    d->stats.db_errors++;
    bd_metrics_failed(d->metrics, b->err.message);
    bd_log("error", "batch_failed", "records=%zu retry_ms=%ld error=%s", b->n, d->backoff_ms,
           bd_q(b->err.message));
    if (b->err.status == BS_ERR_SCHEMA) {
        /* Found on a reconnected session: nothing was committed; stop rather than retry. */
        bd_log("error", "schema_mismatch", "error=%s", bd_q(b->err.message));
        d->exit_code = BD_EXIT_SCHEMA;
    } else if (bs_sqlstate_schema_suspect(b->err.sqlstate)) {
        /* A statement found a table or column that is not as ours, on a session whose schema
           was checked when it began (no reconnect, so the in-transaction check did not run):
           check the version again before resuming (db_usable in sync_parts); another version
           stops billingd (exit 5), the same one is retried as any failure. */
        bd_log("warn", "schema_suspect", "sqlstate=%s recheck=yes", b->err.sqlstate);
        d->db_schema_session = 0;
    }
    drop_batch(b);
    stall(d);
}

/* Lag per partition of the batch: the cached high watermark minus the stored position. */
static void record_lag(bd_daemon *d, const bd_batch *b)
{
    int64_t lo;
    int64_t hi;
    size_t i;

    for (i = 0; i < b->np; i++) {
        if (rd_kafka_get_watermark_offsets(d->rk, b->pos[i].topic, b->pos[i].partition, &lo, &hi) ==
            RD_KAFKA_RESP_ERR_NO_ERROR)
            bd_metrics_lag(d->metrics, b->pos[i].topic, b->pos[i].partition,
                           hi >= b->pos[i].next ? hi - b->pos[i].next : 0);
    }
}

/*
 * Log the rejected records of committed batch @b, each with its source and
 * reason (what billing.rejected_events and the dead-letter topic keep),
 * at most REJECT_LOG_PER_S lines a second: a flood of bad records must
 * not drown the log. The lines left out are counted, and the count is
 * logged (event=rejected_suppressed) before the first rejected record of a
 * later second.
 */
static void log_rejected(bd_daemon *d, const bd_batch *b)
{
    int64_t second = now_ms() / 1000;
    size_t i;

    for (i = 0; i < b->n; i++) {
        if (b->results[i].outcome != BS_RECORD_REJECTED)
            continue;
        if (second != d->reject_second) {
            if (d->reject_suppressed > 0)
                bd_log("warn", "rejected_suppressed", "count=%" PRIu64 " per_s=%d",
                       d->reject_suppressed, REJECT_LOG_PER_S);
            d->reject_second = second;
            d->reject_logged = 0;
            d->reject_suppressed = 0;
        }
        if (d->reject_logged >= REJECT_LOG_PER_S) {
            d->reject_suppressed++;
            continue;
        }
        d->reject_logged++;
        bd_log("warn", "rejected", "source=%s event_id=%s reason_code=%s reason=%s",
               bd_q(b->recs[i].source),
               bd_q(b->results[i].event_id != NULL ? b->results[i].event_id : "-"),
               bd_q(b->results[i].reason_code != NULL ? b->results[i].reason_code : "-"),
               bd_q(b->results[i].reason != NULL ? b->results[i].reason : ""));
    }
}

/* The committed batch @b's metrics (thread-safe): counted as soon as it is in. */
static void batch_metrics(bd_daemon *d, bd_batch *b)
{
    b->ms = now_ms() - b->started;
    bd_metrics_batch(d->metrics, &b->k, b->results, b->n, b->ms);
}

static void batch_done(bd_daemon *d, bd_batch *b)
{
    const bs_ingest_counts *k = &b->k;
    int64_t ms = b->ms;
    size_t i;
    bd_part *p;

    for (i = 0; i < b->np; i++) {
        p = find_part(d, b->pos[i].topic, b->pos[i].partition);
        if (p != NULL)
            p->stored = b->pos[i].next;
    }
    record_lag(d, b);
    d->stats.batches++;
    d->stats.stored += k->stored;
    d->stats.duplicates += k->duplicates;
    d->stats.rejected += k->rejected;
    d->backoff_ms = BACKOFF_FIRST_MS;
    bd_log("info", "batch",
           "records=%zu stored=%zu duplicates=%zu rejected=%zu aggregates=%zu "
           "ms=%" PRId64,
           k->records, k->stored, k->duplicates, k->rejected, k->aggregates, ms);
    if (k->rejected > 0)
        log_rejected(d, b);
    commit_informational(d, b);
    drop_batch(b);
}

/* The committer thread of a lane: the transaction of one prepared batch. */
/*
 * Commit @b on lane @l, then tell the alert check whether it committed
 * (its kept credit states move on with the batch, or stay).
 */
static bs_status commit_batch(bd_daemon *d, bd_lane *l, bd_batch *b)
{
    bs_status st = bs_ingest_commit(b->in, l->db, b->pos, b->np, 0, &b->k, &b->err);

    if (d->alerts != NULL) {
        pthread_mutex_lock(&d->hook_lock);
        bd_alerts_done(d->alerts, l->db, st == BS_OK);
        pthread_mutex_unlock(&d->hook_lock);
    }
    return st;
}

static void *commit_main(void *arg)
{
    bd_lane *l = arg;
    bd_batch *b = l->inflight;

    b->st = commit_batch(l->d, l, b);
    if (b->st == BS_OK)
        batch_metrics(l->d, b);
    pthread_mutex_lock(&l->d->lock);
    l->committed = 1;
    pthread_mutex_unlock(&l->d->lock);
    return NULL;
}

/*
 * Wait for lane @l's batch in flight, if any, and account for it. Returns
 * 0, or -1 if it failed (then every batch being filled has been dropped).
 */
static int wait_committer(bd_daemon *d, bd_lane *l)
{
    bd_batch *b = l->inflight;

    if (b == NULL)
        return 0;
    pthread_join(l->committer, NULL);
    l->inflight = NULL;
    if (b->st != BS_OK) {
        batch_failed(d, b);
        return -1;
    }
    batch_done(d, b);
    return 0;
}

/* Wait for every lane: afterwards no thread but this one uses a connection. */
static void wait_all(bd_daemon *d)
{
    size_t i;

    for (i = 0; i < d->n_lanes; i++)
        wait_committer(d, &d->lanes[i]);
}

/*
 * Account for the lanes' batches that have finished, without waiting:
 * their metrics, lag and stored positions are then current even when no
 * batch follows them.
 */
static void reap_committers(bd_daemon *d)
{
    bd_lane *l;
    size_t i;
    int committed;

    for (i = 0; i < d->n_lanes; i++) {
        l = &d->lanes[i];
        if (l->inflight == NULL)
            continue;
        pthread_mutex_lock(&d->lock);
        committed = l->committed;
        pthread_mutex_unlock(&d->lock);
        if (committed)
            wait_committer(d, l);
    }
}

/* Hand the prepared batch @b to @l's committer, or commit it here if no thread can be made. */
static void start_commit(bd_daemon *d, bd_lane *l, bd_batch *b)
{
    b->np = batch_positions(d, b);
    l->committed = 0; /* no committer runs on this lane: no lock needed */
    l->inflight = b;
    l->fill = b == &l->batches[0] ? &l->batches[1] : &l->batches[0];
    if (pthread_create(&l->committer, NULL, commit_main, l) == 0)
        return;
    bd_log("warn", "committer_thread_failed", "records=%zu", b->n);
    l->inflight = NULL;
    b->st = commit_batch(d, l, b);
    if (b->st != BS_OK) {
        batch_failed(d, b);
        return;
    }
    batch_metrics(d, b);
    batch_done(d, b);
}

/*
 * Send lane @l's batch being filled on its way: decode and rate it while
 * the lane's previous one commits, then, once that one is in, hand it to
 * the committer: events, aggregates, rejects, dead letters and positions
 * at once.
 */
static int check_catalog(bd_daemon *d);

static void flush(bd_daemon *d, bd_lane *l)
{
    bd_batch *b = l->fill;

    if (b->n == 0)
        return;
    /*
     * A catalog change announced before these records were produced is
     * applied before they are rated; a catalog that may be stale drops
     * the batch (check_catalog stalls consumption) instead of rating it.
     */
    if (check_catalog(d) != 0 || b->n == 0)
        return;
    bd_metrics_consumed(d->metrics, b->n);
    b->started = now_ms();
    b->st = bs_ingest_prepare(b->in, b->recs, b->n, b->results, &b->err);
    if (wait_committer(d, l) != 0)
        return;
    if (b->st != BS_OK) {
        batch_failed(d, b);
        return;
    }
    start_commit(d, l, b);
}

/* Everything consumed is committed (or failed) when this returns. */
static void flush_all(bd_daemon *d)
{
    size_t i;

    for (i = 0; i < d->n_lanes; i++)
        flush(d, &d->lanes[i]);
    wait_all(d);
}

/* The lane of @partition: a partition always commits on the same lane, in order. */
static bd_lane *lane_of(bd_daemon *d, int32_t partition)
{
    return &d->lanes[(size_t)partition % d->n_lanes];
}

static int any_filled(const bd_daemon *d)
{
    size_t i;

    for (i = 0; i < d->n_lanes; i++) {
        if (d->lanes[i].fill->n > 0)
            return 1;
    }
    return 0;
}

static void drop_fills(bd_daemon *d)
{
    size_t i;

    for (i = 0; i < d->n_lanes; i++)
        drop_batch(d->lanes[i].fill);
}

static void add_message(bd_daemon *d, rd_kafka_message_t *m)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    bd_part *p = find_part(d, topic, m->partition);
    bd_batch *b = lane_of(d, m->partition)->fill;
    bs_record *r;

    /* Not ours, not positioned yet, or already stored: delivered again after a seek. */
    if (p == NULL || !p->ready || (p->stored >= 0 && m->offset < p->stored)) {
        rd_kafka_message_destroy(m);
        return;
    }
    if (b->n == 0)
        b->first_ms = now_ms();
    r = &b->recs[b->n];
    memset(r, 0, sizeof(*r));
    source_name(b->sources[b->n], topic, m->partition, m->offset);
    r->data = m->payload != NULL ? m->payload : "";
    r->len = m->len;
    r->format = BS_RECORD_PROTOBUF;
    r->source = b->sources[b->n];
    r->kafka_topic = p->topic;
    r->kafka_partition = m->partition;
    r->kafka_offset = m->offset;
    b->msgs[b->n++] = m;
    d->stats.consumed++;
}

/* ---------------------------------------------------------------------- */
/* Rebalances                                                              */
/* ---------------------------------------------------------------------- */

static int cooperative(rd_kafka_t *rk)
{
    return strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
}

/*
 * Resume the partitions of @parts that are ready. librdkafka keeps a
 * partition's pause across a revocation and a new assignment, so one
 * paused by a failed batch (batch_failed pauses all) and then reassigned
 * by a rebalance, as when the broker restarts, would stay paused forever:
 * sync_parts resumes only partitions that were not ready.
 */
static void resume_ready(bd_daemon *d, const rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts->cnt + 1);
    const bd_part *p;
    int i;

    for (i = 0; i < parts->cnt; i++) {
        p = find_part(d, parts->elems[i].topic, parts->elems[i].partition);
        if (p != NULL && p->ready)
            rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
    }
    if (l->cnt > 0)
        rd_kafka_resume_partitions(d->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
}

/* New partitions: start each at its stored position (or, if unreadable now, later). */
static void on_assign(bd_daemon *d, rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t rerr = RD_KAFKA_RESP_ERR_NO_ERROR;
    bd_part *p;
    int i;

    /* Positions are read on lane 0's connection. */
    wait_all(d);
    for (i = 0; i < parts->cnt; i++) {
        p = add_part(d, parts->elems[i].topic, parts->elems[i].partition);
        if (p == NULL)
            continue;
        p->ready = read_position(d, p) == 0;
        parts->elems[i].offset = p->ready ? start_offset(p) : RD_KAFKA_OFFSET_INVALID;
        bd_log("info", "assigned", "topic=%s partition=%" PRId32 " offset=%" PRId64 " ready=%d",
               p->topic, p->partition, p->stored, p->ready);
    }
    if (cooperative(d->rk))
        error = rd_kafka_incremental_assign(d->rk, parts);
    else
        rerr = rd_kafka_assign(d->rk, parts);
    if (error != NULL) {
        bd_log("error", "assign_failed", "error=%s", bd_q(rd_kafka_error_string(error)));
        rd_kafka_error_destroy(error);
    } else if (rerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        bd_log("error", "assign_failed", "error=%s", bd_q(rd_kafka_err2str(rerr)));
    }
    resume_ready(d, parts);
    pause_parts(d, 1, 0);
}

/* Partitions leaving: finish the batch while they are still ours, then let them go. */
static void on_revoke(bd_daemon *d, rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_error_t *error = NULL;
    int i;

    flush_all(d);
    drop_fills(d);
    bd_metrics_lag_clear(d->metrics);
    for (i = 0; i < parts->cnt; i++) {
        bd_log("info", "revoked", "topic=%s partition=%" PRId32, parts->elems[i].topic,
               parts->elems[i].partition);
        remove_part(d, parts->elems[i].topic, parts->elems[i].partition);
    }
    if (cooperative(d->rk)) {
        error = rd_kafka_incremental_unassign(d->rk, parts);
    } else {
        rd_kafka_assign(d->rk, NULL);
        d->n_parts = 0;
    }
    if (error != NULL)
        rd_kafka_error_destroy(error);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    bd_daemon *d = opaque;

    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        on_assign(d, parts);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        on_revoke(d, parts);
    } else {
        bd_log("error", "rebalance_failed", "error=%s", bd_q(rd_kafka_err2str(err)));
        wait_all(d);
        drop_fills(d);
        d->n_parts = 0;
        rd_kafka_assign(rk, NULL);
    }
}

/* ---------------------------------------------------------------------- */
/* Recovering from database trouble                                        */
/* ---------------------------------------------------------------------- */

/*
 * Lane 0's connection, reconnected if broken, its schema checked once per
 * server session (at start and after every reconnect). Returns 0, or -1
 * with @err (a schema this billingd does not know also sets exit_code).
 * Only when no committer runs.
 */
static int db_usable(bd_daemon *d, bs_error *err)
{
    if (!bs_up(d->db) && bs_reconnect(d->db, err) != BS_OK)
        return -1;
    if (bs_sessions(d->db) == d->db_schema_session)
        return 0;
    if (bs_schema_require(d->db, err) != BS_OK) {
        if (err->status == BS_ERR_SCHEMA) {
            bd_log("error", "schema_mismatch", "error=%s", bd_q(err->message));
            d->exit_code = BD_EXIT_SCHEMA;
        }
        return -1;
    }
    d->db_schema_session = bs_sessions(d->db);
    return 0;
}

/* Seek every partition that is not ready to its stored position and resume it. */
static void sync_parts(bd_daemon *d)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)d->n_parts + 1);
    rd_kafka_error_t *error;
    bs_error err;
    bd_part *p;
    size_t i;
    int ok = 1;

    wait_all(d);
    if (db_usable(d, &err) != 0)
        ok = 0;
    for (i = 0; i < d->n_parts && ok; i++) {
        if (!d->parts[i].ready)
            ok = read_position(d, &d->parts[i]) == 0;
        if (ok && !d->parts[i].ready)
            rd_kafka_topic_partition_list_add(l, d->parts[i].topic, d->parts[i].partition)->offset =
                start_offset(&d->parts[i]);
    }
    if (!ok) {
        d->retry_at_ms = now_ms() + d->backoff_ms;
        d->backoff_ms =
            d->backoff_ms * 2 > d->cfg->retry_max_ms ? d->cfg->retry_max_ms : d->backoff_ms * 2;
        rd_kafka_topic_partition_list_destroy(l);
        return;
    }
    error = l->cnt > 0 ? rd_kafka_seek_partitions(d->rk, l, SEEK_TIMEOUT_MS) : NULL;
    if (error != NULL) {
        bd_log("error", "seek_failed", "error=%s", bd_q(rd_kafka_error_string(error)));
        rd_kafka_error_destroy(error);
        d->retry_at_ms = now_ms() + d->backoff_ms;
    } else {
        for (i = 0; i < (size_t)l->cnt; i++) {
            p = find_part(d, l->elems[i].topic, l->elems[i].partition);
            if (p != NULL)
                p->ready = 1;
        }
        pause_parts(d, 0, 1);
        bd_metrics_ok(d->metrics);
        if (l->cnt > 0)
            bd_log("info", "resumed", "partitions=%d", l->cnt);
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static int any_unready(const bd_daemon *d)
{
    size_t i;

    for (i = 0; i < d->n_parts; i++) {
        if (!d->parts[i].ready)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Catalog changes                                                         */
/* ---------------------------------------------------------------------- */

static int listen_start(bd_daemon *d)
{
    /* Short: the consumer thread waits meanwhile; a failure is retried after the backoff. */
    bs_retry retry = {2, 100, 500};
    bs_error err;

    if (d->listen == NULL)
        d->listen = bs_connect(bs_conninfo(d->cfg->db), &retry, &err);
    if (d->listen == NULL || bs_listen(d->listen, BS_CATALOG_CHANNEL, &err) != BS_OK) {
        bd_log("error", "listen_failed", "error=%s", bd_q(err.message));
        bs_close(d->listen);
        d->listen = NULL;
        return -1;
    }
    return 0;
}

/*
 * The catalog may be stale: rate nothing until a reload succeeds (the
 * loop retries it after the backoff). Batches being filled are dropped
 * and read again from the stored positions afterwards.
 */
static void mark_stale(bd_daemon *d, const char *why)
{
    if (!d->stale)
        bd_log("error", "catalog_stale", "reason=%s retry_ms=%ld", bd_q(why), d->backoff_ms);
    d->stale = 1;
    bd_metrics_unhealthy(d->metrics, "the catalog may be stale (reload failed), retrying");
    stall(d);
}

/*
 * Read the catalog on lane 0's connection. A server restart shows only
 * when the connection is used: a read that finds it closed reconnects
 * and reads once more.
 */
static bs_catalog *read_catalog(bd_daemon *d, bs_error *err)
{
    bs_catalog *cat;

    if (db_usable(d, err) != 0)
        return NULL;
    cat = bs_catalog_read(d->db, d->cfg->book, err);
    if (cat != NULL || err->status != BS_ERR_RETRY)
        return cat;
    if (bs_reconnect(d->db, err) != BS_OK || db_usable(d, err) != 0)
        return NULL;
    return bs_catalog_read(d->db, d->cfg->book, err);
}

/* Reload the catalog. Returns 0, or -1: then it is marked stale and consumption stalls. */
static int reload_catalog(bd_daemon *d)
{
    bs_catalog *cat;
    bs_error err;
    size_t i;

    /* The committers use the connections, and the catalog (aggregates, alerts). */
    wait_all(d);
    cat = read_catalog(d, &err);
    if (cat == NULL) {
        bd_log("error", "catalog_reload_failed", "error=%s", bd_q(err.message));
        mark_stale(d, err.message);
        return -1;
    }
    for (i = 0; i < 2 * d->n_lanes; i++)
        bs_ingest_set_catalog(d->lanes[i / 2].batches[i % 2].in, cat);
    /* The alert check's kept states borrow the catalog being freed. */
    bd_alerts_forget(d->alerts);
    bs_catalog_free(d->cat);
    d->cat = cat;
    d->stats.reloads++;
    bd_metrics_reload(d->metrics);
    bd_log("info", "catalog_reloaded", "book=%s", bs_catalog_book(cat));
    if (d->stale) {
        /* The partitions stalled with it resume in sync_parts, right away. */
        d->stale = 0;
        d->retry_at_ms = now_ms();
    }
    return 0;
}

/* LISTEN again and reload: changes made while we were not listening are unknown. */
static int relisten(bd_daemon *d)
{
    if (listen_start(d) != 0) {
        mark_stale(d, "cannot LISTEN " BS_CATALOG_CHANNEL);
        return -1;
    }
    return reload_catalog(d);
}

/*
 * Between batches and before rating one: reload the catalog when `billing
 * load` said it changed, or when changes may have been missed (LISTEN
 * lost). Returns 0 when the catalog is current as far as anyone said, -1
 * when it may be stale (consumption stalled until the loop reloads it).
 */
static int check_catalog(bd_daemon *d)
{
    int changed;

    if (d->stale)
        return -1;
    if (d->listen == NULL)
        return relisten(d);
    changed = bs_notified(d->listen);
    if (changed < 0) {
        bd_log("warn", "listen_lost", "error=%s", bd_q(bs_conn_message(d->listen)));
        bs_close(d->listen);
        d->listen = NULL;
        return relisten(d);
    }
    return changed > 0 ? reload_catalog(d) : 0;
}

/* A stale catalog, after the backoff: LISTEN (if lost) and reload. */
static void retry_catalog(bd_daemon *d)
{
    if (d->listen == NULL && listen_start(d) != 0) {
        d->retry_at_ms = now_ms() + d->backoff_ms;
        d->backoff_ms =
            d->backoff_ms * 2 > d->cfg->retry_max_ms ? d->cfg->retry_max_ms : d->backoff_ms * 2;
        return;
    }
    reload_catalog(d);
}

/* ---------------------------------------------------------------------- */
/* Lag                                                                     */
/* ---------------------------------------------------------------------- */

/*
 * While consumption is paused (database trouble, a stale catalog) no batch
 * brings the lag and the cached watermarks stop moving: ask the broker
 * for each partition's high watermark, at most every LAG_REFRESH_MS, and
 * count from the stored position (the beginning when none is known).
 * Stops at the first query that fails (broker down): tried again later.
 */
static void refresh_lag(bd_daemon *d)
{
    int64_t lo;
    int64_t hi;
    int64_t from;
    size_t i;

    if (!any_unready(d) || now_ms() < d->lag_at_ms)
        return;
    d->lag_at_ms = now_ms() + LAG_REFRESH_MS;
    for (i = 0; i < d->n_parts; i++) {
        if (rd_kafka_query_watermark_offsets(d->rk, d->parts[i].topic, d->parts[i].partition, &lo,
                                             &hi, LAG_QUERY_MS) != RD_KAFKA_RESP_ERR_NO_ERROR)
            return;
        from = d->parts[i].stored >= 0 ? d->parts[i].stored : lo;
        bd_metrics_lag(d->metrics, d->parts[i].topic, d->parts[i].partition,
                       hi > from ? hi - from : 0);
    }
}

/* ---------------------------------------------------------------------- */
/* Set-up and the loop                                                     */
/* ---------------------------------------------------------------------- */

static int set(rd_kafka_conf_t *conf, const char *key, const char *value)
{
    char errstr[MSG_MAX];

    if (rd_kafka_conf_set(conf, key, value, errstr, sizeof(errstr)) == RD_KAFKA_CONF_OK)
        return 0;
    bd_log("error", "kafka_config", "key=kafka.%s error=%s", key, bd_q(errstr));
    return -1;
}

static rd_kafka_t *make_consumer(bd_daemon *d)
{
    char errstr[MSG_MAX];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *topics;
    rd_kafka_t *rk;
    size_t i;
    int bad = 0;

    /* Positions come from the database: Kafka's auto commit and reset never decide. */
    bad |= set(conf, "group.id", d->cfg->group);
    bad |= set(conf, "enable.auto.commit", "false");
    bad |= set(conf, "enable.auto.offset.store", "false");
    bad |= set(conf, "auto.offset.reset", "earliest");
    for (i = 0; i < d->cfg->n_kafka; i++)
        bad |= set(conf, d->cfg->kafka[i].key, d->cfg->kafka[i].value);
    if (bad) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_opaque(conf, d);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (rk == NULL) {
        bd_log("error", "kafka_start_failed", "error=%s", bd_q(errstr));
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    topics = rd_kafka_topic_partition_list_new((int)d->cfg->n_topics);
    for (i = 0; i < d->cfg->n_topics; i++)
        rd_kafka_topic_partition_list_add(topics, d->cfg->topics[i], RD_KAFKA_PARTITION_UA);
    if (rd_kafka_subscribe(rk, topics) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        bd_log("error", "subscribe_failed", NULL);
        rd_kafka_destroy(rk);
        rk = NULL;
    }
    rd_kafka_topic_partition_list_destroy(topics);
    return rk;
}

static int alloc_batch(bd_daemon *d, bd_batch *b)
{
    size_t n = (size_t)d->cfg->batch_size;

    b->msgs = calloc(n, sizeof(*b->msgs));
    b->recs = calloc(n, sizeof(*b->recs));
    b->results = calloc(n, sizeof(*b->results));
    b->sources = calloc(n, sizeof(*b->sources));
    b->pos = calloc(n, sizeof(*b->pos));
    return b->msgs && b->recs && b->results && b->sources && b->pos ? 0 : -1;
}

static void free_batch(bd_batch *b)
{
    drop_batch(b);
    bs_ingest_free(b->in);
    free(b->msgs);
    free(b->recs);
    free(b->results);
    free(b->sources);
    free(b->pos);
}

/*
 * A lane's connection, reconnected inside its transaction since its schema
 * was last checked, may now reach another server: check it before the
 * batch commits there (once per session; on the committer's thread).
 */
static bs_status check_lane_schema(bd_daemon *d, bs_conn *c, bs_error *err)
{
    bd_lane *l = NULL;
    bs_status st;
    size_t i;

    for (i = 0; i < d->n_lanes && l == NULL; i++) {
        if (d->lanes[i].db == c)
            l = &d->lanes[i];
    }
    if (l == NULL || l->schema_session == bs_sessions(c))
        return BS_OK;
    st = bs_schema_require(c, err);
    if (st == BS_OK)
        l->schema_session = bs_sessions(c);
    return st;
}

/* Inside the batch's transaction, before COMMIT: the schema, dead letters, then credit alerts. */
static bs_status pre_commit(void *arg, bs_conn *c, const bs_record *recs,
                            const bs_record_result *results, size_t n, bs_error *err)
{
    bd_daemon *d = arg;
    bs_status st = check_lane_schema(d, c, err);
    int64_t started;

    if (st != BS_OK)
        return st;

    /* Committers of several lanes get here at once; the producers' state is shared. */
    pthread_mutex_lock(&d->hook_lock);
    if (d->dlq != NULL)
        st = bd_dlq_hook(d->dlq, c, recs, results, n, err);
    if (st == BS_OK && d->alerts != NULL) {
        started = now_ms();
        st = bd_alerts_hook(d->alerts, c, recs, results, n, err);
        bd_metrics_alert_check(d->metrics, now_ms() - started,
                               (uint64_t)bd_alerts_published(d->alerts));
    }
    pthread_mutex_unlock(&d->hook_lock);
    return st;
}

/* The lanes: batch buffers, a bs_ingest per buffer, a connection each but lane 0's. */
static int start_lanes(bd_daemon *d, const bs_retry *retry, bs_error *err)
{
    bd_lane *l;
    size_t i;
    int j;

    d->n_lanes = (size_t)d->cfg->commit_connections;
    for (i = 0; i < d->n_lanes; i++) {
        l = &d->lanes[i];
        l->d = d;
        l->fill = &l->batches[0];
        l->db = i == 0 ? d->db : bs_connect(bs_conninfo(d->cfg->db), retry, err);
        if (l->db == NULL)
            return -1;
        for (j = 0; j < 2; j++) {
            l->batches[j].in = bs_ingest_new(d->cat, d->cfg->group);
            if (alloc_batch(d, &l->batches[j]) != 0 || l->batches[j].in == NULL ||
                bs_ingest_set_threads(l->batches[j].in, (int)d->cfg->rate_threads) != 0) {
                bs_error_set(err, BS_ERR_NOMEM, "commit lane %zu: out of memory", i);
                return -1;
            }
            bs_ingest_set_hook(l->batches[j].in, pre_commit, d);
        }
    }
    return 0;
}

/* The topics billingd reads or writes, each with the configuration key naming it. */
static size_t topic_list(const bd_daemon *d, const char **names, const char **roles)
{
    size_t n = 0;
    size_t i;

    for (i = 0; i < d->cfg->n_topics; i++) {
        roles[n] = "topics";
        names[n++] = d->cfg->topics[i];
    }
    if (d->cfg->dead_letter_topic != NULL && d->cfg->dead_letter_topic[0] != '\0') {
        roles[n] = "dead_letter_topic";
        names[n++] = d->cfg->dead_letter_topic;
    }
    if (d->cfg->alerts_topic != NULL && d->cfg->alerts_topic[0] != '\0') {
        roles[n] = "alerts.topic";
        names[n++] = d->cfg->alerts_topic;
    }
    return n;
}

/*
 * The configured topics @md lacks (or reports with an error): their
 * count, and "role=name ..." in @which (cut to @size). @log_level: log
 * each as `topic_missing` at start, NULL to log nothing.
 */
static int missing_topics(const bd_daemon *d, const struct rd_kafka_metadata *md, char *which,
                          size_t size, const char *log_level)
{
    const char *names[BD_MAX_TOPICS + 2];
    const char *roles[BD_MAX_TOPICS + 2];
    size_t n = topic_list(d, names, roles);
    size_t used = 0;
    size_t i;
    int j;
    int missing = 0;

    which[0] = '\0';
    for (i = 0; i < n; i++) {
        for (j = 0; j < md->topic_cnt; j++) {
            if (strcmp(md->topics[j].topic, names[i]) == 0 &&
                md->topics[j].err == RD_KAFKA_RESP_ERR_NO_ERROR)
                break;
        }
        if (j < md->topic_cnt)
            continue;
        missing++;
        if (used < size)
            used += (size_t)snprintf(which + used, size - used, "%s%s=%s", used > 0 ? " " : "",
                                     roles[i], names[i]);
        if (log_level != NULL)
            bd_log(log_level, "topic_missing",
                   "%s=%s error=\"no such topic on the broker: "
                   "create it, or fix the configuration\"",
                   roles[i], bd_q(names[i]));
    }
    return missing;
}

/*
 * Every topic billingd reads or writes must exist: a missing one would
 * consume nothing, or fail every batch with rejects (dead letters) or
 * alerts, while billingd looked started. Asks the broker's metadata,
 * waiting while the broker does not answer. Returns 0, BD_EXIT_TOPIC
 * (logged, naming the topic), or BD_EXIT_START if stopped while waiting.
 */
static int check_topics(bd_daemon *d)
{
    const struct rd_kafka_metadata *md = NULL;
    char which[MSG_MAX];
    rd_kafka_resp_err_t e;
    int missing;

    while ((e = rd_kafka_metadata(d->rk, 1, NULL, &md, METADATA_MS)) !=
           RD_KAFKA_RESP_ERR_NO_ERROR) {
        bd_log("warn", "kafka_unreachable", "error=%s retry=yes", bd_q(rd_kafka_err2str(e)));
        if (*d->stop)
            return BD_EXIT_START;
    }
    missing = missing_topics(d, md, which, sizeof(which), "error");
    rd_kafka_metadata_destroy(md);
    d->topics_at_ms = now_ms() + TOPIC_WATCH_MS;
    return missing > 0 ? BD_EXIT_TOPIC : 0;
}

/*
 * While running, a topic deleted on the broker would only show as
 * kafka_error lines (consumed topic) or failing batches (dead letters,
 * alerts): every TOPIC_WATCH_MS ask the metadata again and make /healthz
 * 503 naming the missing topics until they exist again. A broker that
 * does not answer changes nothing (the lag and the batches say so).
 */
static void watch_topics(bd_daemon *d)
{
    const struct rd_kafka_metadata *md = NULL;
    char which[MSG_MAX];
    int missing;

    if (now_ms() < d->topics_at_ms)
        return;
    d->topics_at_ms = now_ms() + TOPIC_WATCH_MS;
    if (rd_kafka_metadata(d->rk, 1, NULL, &md, TOPIC_QUERY_MS) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    missing = missing_topics(d, md, which, sizeof(which), NULL);
    rd_kafka_metadata_destroy(md);
    if (strcmp(which, d->topics_missing) == 0)
        return;
    if (missing > 0)
        bd_log("error", "topic_lost",
               "missing=%d %s error=\"deleted on the broker: create it"
               " again\"",
               missing, which);
    else
        bd_log("info", "topic_restored", "was=%s", bd_q(d->topics_missing));
    snprintf(d->topics_missing, sizeof(d->topics_missing), "%s", which);
    bd_metrics_topics_missing(d->metrics, missing, which);
}

/*
 * Database (its schema checked), catalog, dead-letter producer, consumer,
 * topics. Returns 0 or the exit status (logged): BD_EXIT_START,
 * BD_EXIT_SCHEMA, BD_EXIT_TOPIC.
 */
static int start(bd_daemon *d)
{
    bs_retry retry = {5, 200, 2000};
    bs_error err;
    int rc;

    d->backoff_ms = BACKOFF_FIRST_MS;
    d->metrics = bd_metrics_new(d->cfg->http_listen);
    if (d->metrics == NULL)
        return BD_EXIT_START;
    d->db = bs_connect(bs_conninfo(d->cfg->db), &retry, &err);
    if (d->db != NULL && db_usable(d, &err) != 0) {
        bd_log("error", "start_failed", "error=%s", bd_q(err.message));
        return d->exit_code != 0 ? d->exit_code : BD_EXIT_START;
    }
    if (d->db == NULL || bs_event_partitions(d->db, 1, 3, NULL, &err) != BS_OK ||
        listen_start(d) != 0 || (d->cat = bs_catalog_read(d->db, d->cfg->book, &err)) == NULL ||
        start_lanes(d, &retry, &err) != 0) {
        bd_log("error", "start_failed", "error=%s", bd_q(err.message));
        return BD_EXIT_START;
    }
    if (d->cfg->dead_letter_topic != NULL && d->cfg->dead_letter_topic[0] != '\0') {
        d->dlq = bd_dlq_new(d->cfg, d->metrics);
        if (d->dlq == NULL)
            return BD_EXIT_START;
    }
    if (d->cfg->alerts_topic != NULL && d->cfg->alerts_topic[0] != '\0') {
        d->alerts = bd_alerts_new(d->cfg, &d->cat);
        if (d->alerts == NULL)
            return BD_EXIT_START;
    }
    d->rk = make_consumer(d);
    if (d->rk == NULL)
        return BD_EXIT_START;
    rc = check_topics(d);
    if (rc != 0)
        return rc;
    bd_log("info", "started",
           "group=%s topics=%zu book=%s batch=%ld linger_ms=%ld commit_connections=%zu"
           " rate_threads=%ld",
           d->cfg->group, d->cfg->n_topics, bs_catalog_book(d->cat), d->cfg->batch_size,
           d->cfg->linger_ms, d->n_lanes, d->cfg->rate_threads);
    return 0;
}

/* How long a poll may wait: until the first lane's batch has lingered enough, at most POLL_MS. */
static int poll_wait(const bd_daemon *d)
{
    int64_t now = now_ms();
    int64_t wait = POLL_MS;
    const bd_batch *b;
    size_t i;

    for (i = 0; i < d->n_lanes; i++) {
        b = d->lanes[i].fill;
        if (b->n > 0 && b->first_ms + d->cfg->linger_ms - now < wait)
            wait = b->first_ms + d->cfg->linger_ms - now;
    }
    return wait > 0 ? (int)wait : 0;
}

static void poll_once(bd_daemon *d)
{
    rd_kafka_message_t *m = rd_kafka_consumer_poll(d->rk, poll_wait(d));
    const bd_batch *b;
    size_t i;

    if (m != NULL && m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        add_message(d, m);
    } else if (m != NULL) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            bd_log("warn", "kafka_error", "error=%s", bd_q(rd_kafka_message_errstr(m)));
        rd_kafka_message_destroy(m);
    }
    /* The poll may have run a rebalance, which flushes: look at the batches afresh. */
    for (i = 0; i < d->n_lanes; i++) {
        b = d->lanes[i].fill;
        if (b->n > 0 &&
            (b->n >= (size_t)d->cfg->batch_size || now_ms() >= b->first_ms + d->cfg->linger_ms))
            flush(d, &d->lanes[i]);
    }
}

static size_t pending(const bd_daemon *d)
{
    size_t n = 0;
    size_t i;

    for (i = 0; i < d->n_lanes; i++)
        n += d->lanes[i].fill->n + (d->lanes[i].inflight ? d->lanes[i].inflight->n : 0);
    return n;
}

static void loop(bd_daemon *d)
{
    while (!*d->stop && d->exit_code == 0) {
        reap_committers(d);
        if (!any_filled(d))
            check_catalog(d);
        if (d->stale && now_ms() >= d->retry_at_ms)
            retry_catalog(d);
        if (!d->stale && any_unready(d) && now_ms() >= d->retry_at_ms)
            sync_parts(d);
        refresh_lag(d);
        watch_topics(d);
        poll_once(d);
    }
    bd_log("info", "stopping", "pending=%zu", pending(d));
    flush_all(d);
}

static void finish(bd_daemon *d)
{
    size_t i;

    wait_all(d);
    if (d->rk != NULL) {
        /* Leaves the group; the revoke callback commits nothing more (batches empty). */
        rd_kafka_consumer_close(d->rk);
    }
    for (i = 0; i < LANES_MAX; i++) {
        free_batch(&d->lanes[i].batches[0]);
        free_batch(&d->lanes[i].batches[1]);
        if (i > 0)
            bs_close(d->lanes[i].db);
    }
    if (d->rk != NULL)
        rd_kafka_destroy(d->rk);
    bd_dlq_free(d->dlq);
    bd_alerts_free(d->alerts);
    bd_metrics_free(d->metrics);
    bs_catalog_free(d->cat);
    bs_close(d->listen);
    bs_close(d->db);
    free(d->parts);
}

int bd_run(const bd_config *cfg, volatile sig_atomic_t *stop)
{
    bd_daemon d;
    int rc;

    memset(&d, 0, sizeof(d));
    pthread_mutex_init(&d.lock, NULL);
    pthread_mutex_init(&d.hook_lock, NULL);
    d.cfg = cfg;
    d.stop = stop;
    rc = start(&d);
    if (rc == 0) {
        loop(&d);
        rc = d.exit_code;
    }
    bd_log("info", "stopped",
           "consumed=%" PRIu64 " stored=%" PRIu64 " duplicates=%" PRIu64 " rejected=%" PRIu64
           " batches=%" PRIu64 " db_errors=%" PRIu64,
           d.stats.consumed, d.stats.stored, d.stats.duplicates, d.stats.rejected, d.stats.batches,
           d.stats.db_errors);
    finish(&d);
    pthread_mutex_destroy(&d.lock);
    pthread_mutex_destroy(&d.hook_lock);
    return rc;
}
