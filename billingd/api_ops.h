/*
 * api_ops.h - the routes of billingd's HTTP API for the web console's
 * operations page, for admin keys not bound to an account:
 * GET /v1/rejected?reason=CODE&limit=N&all=1, the records the ingest
 * pipeline refused (billing.rejected_events, as `billing rejected list`
 * shows them), oldest first; and GET /v1/ops/status, the counters of
 * /metrics (metrics.h) as JSON, since /metrics is served on another
 * address (http.listen) the browser cannot read.
 */
#ifndef BILLINGD_API_OPS_H
#define BILLINGD_API_OPS_H

#include <jansson.h>
#include <microhttpd.h>
#include <stddef.h>

#include "store.h"

/* Most rows of one GET /v1/rejected. */
#define BD_REJECTED_MAX 1000

/*
 * bd_api_rejected - answer the request on @conn (its reason, limit and
 * all arguments) with the store connection @c. Returns 200 with *@body
 * set to {"data": [{"id", "received_at", "source", "event_id",
 * "reason_code", "reason", "size", "resolved"}...]} (id and size
 * integers, resolved a boolean; unresolved rows only unless all=1), 400
 * with the reason in @msg (limit outside 1..BD_REJECTED_MAX, default 100;
 * a reason over 64 bytes), or 0 for a database error in @err.
 */
unsigned bd_api_rejected(bs_conn *c, struct MHD_Connection *conn, json_t **body, char *msg,
                         size_t msgsize, bs_error *err);

/*
 * bd_api_ops_status - the body of GET /v1/ops/status: {"at" (RFC 3339
 * UTC, now), "consumer" (bd_metrics_status: null when billingd has no
 * metrics), "api" (@routes, taken: the API's requests per route, their
 * statuses and durations), "closes" (@closes, taken: the month-end closes
 * of the latest months, bs_api_read's BS_API_CLOSES rows)}. Returns a new
 * object, or NULL when out of memory (@routes and @closes are freed either
 * way).
 */
json_t *bd_api_ops_status(json_t *routes, json_t *closes);

#endif
