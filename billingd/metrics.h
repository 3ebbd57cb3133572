/*
 * metrics.h - billingd's /metrics (Prometheus text format 0.0.4) and
 * /healthz over libmicrohttpd, on a loopback address by default
 * (http.listen; "" turns it off).
 *
 * Every function is thread-safe. The consumer thread records; the
 * server's own thread renders. Every
 * update and the rendering take one mutex, held for a few hundred
 * nanoseconds per batch: the consumer never waits on a slow scraper for
 * longer than one rendering.
 */
#ifndef BILLINGD_METRICS_H
#define BILLINGD_METRICS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest.h"

typedef struct bd_metrics bd_metrics;

/*
 * bd_metrics_new - counters, and a server on @listen ("127.0.0.1:9464";
 * NULL or "" for no server). Returns NULL (logged with the system's and
 * libmicrohttpd's reason) if the address is bad or the port cannot be
 * bound. The server takes 16 connections at once, 8 from one address,
 * and closes a connection whose request has not been answered within
 * 5 s of its start (or of the previous answer on it), however slowly
 * the client keeps sending: a watchdog thread enforces that bound.
 */
bd_metrics *bd_metrics_new(const char *listen);

/*
 * bd_metrics_extra - a renderer whose text every /metrics page ends with
 * (the HTTP API's counters, api.h): @fn writes at most @size bytes into
 * @buf and returns how many. Set it before bd_metrics_new, for every
 * server made afterwards; NULL for none. Not thread-safe with a server
 * running.
 */
void bd_metrics_extra(size_t (*fn)(void *arg, char *buf, size_t size), void *arg);

/*
 * bd_metrics_status - the counters of the metrics made last and not
 * freed yet (the running consumer's, or the API-only server's), as JSON
 * for GET /v1/ops/status: {"healthy", "reason", "uptime_ms", "consumed",
 * "stored", "duplicates", "batches", "failures", "commit_ms_sum",
 * "alerts_published", "dead_letters_dropped", "rejected": {reason: n},
 * "lag": [{"topic", "partition", "lag" (null: unknown)}]}, every count an
 * integer since the start. Returns a new reference: JSON null when no
 * metrics exist, NULL when out of memory. Thread-safe.
 */
json_t *bd_metrics_status(void);

/* bd_metrics_free - stop the server and free; NULL is a no-op. */
void bd_metrics_free(bd_metrics *m);

/* A committed batch: its counts, the rejects by reason, its size and commit time. */
void bd_metrics_batch(bd_metrics *m, const bs_ingest_counts *k, const bs_record_result *res,
                      size_t n, int64_t commit_ms);

/*
 * One run of a batch's credit alert check (bd_alerts_hook): its time,
 * @check_ms, and the alerts it published. A batch that rolls back and
 * runs again is checked (and its alerts published) again.
 */
void bd_metrics_alert_check(bd_metrics *m, int64_t check_ms, uint64_t published);

/*
 * A batch rolled back (database or dead-letter trouble; @why, copied and
 * cut to fit, is shown by /healthz): unhealthy until bd_metrics_ok.
 */
void bd_metrics_failed(bd_metrics *m, const char *why);

/* Not consuming normally for @reason (copied; shown by /healthz) until bd_metrics_ok. */
void bd_metrics_unhealthy(bd_metrics *m, const char *reason);

/* Dead letters the topic refused for good (the records are in billing.rejected_events). */
void bd_metrics_dead_letters_dropped(bd_metrics *m, uint64_t n);

/*
 * The configured topics the broker's metadata lacks: @n of them, named
 * in @which ("role=name ...", copied and cut to fit). While @n > 0,
 * /healthz is 503 naming them and billingd_up is 0, whatever else
 * bd_metrics_ok says; @n == 0 clears it. Thread-safe, like every call here.
 */
void bd_metrics_topics_missing(bd_metrics *m, int n, const char *which);

/* Consumption runs normally again. */
void bd_metrics_ok(bd_metrics *m);

/* Records taken from Kafka; catalog reloads. */
void bd_metrics_consumed(bd_metrics *m, uint64_t n);
void bd_metrics_reload(bd_metrics *m);

/* The lag of a partition: high watermark minus the stored position (-1: unknown). */
void bd_metrics_lag(bd_metrics *m, const char *topic, int32_t partition, int64_t lag);

/* Forget the lag of partitions no longer assigned (all of them). */
void bd_metrics_lag_clear(bd_metrics *m);

#endif
