/*
 * api_ops.c - GET /v1/rejected and GET /v1/ops/status (api_ops.h); the
 * SQL is store/rejected.c's bs_rejects_list, the one `billing rejected
 * list` uses; the counters are metrics.c's.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_ops.h"
#include "billing.h"
#include "metrics.h"
#include "rejected.h"

/* Rows when no limit is given. */
#define DEFAULT_LIMIT 100
/* Longest reason code asked for. */
#define REASON_MAX 64

/* A bs_reject_fn: the row as a JSON object appended to the array @arg. */
static int reject_json(void *arg, const bs_reject_row *row)
{
    json_t *o = json_pack(
        "{s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:b, s:o}", "id", (json_int_t)row->id, "received_at",
        row->received_at, "source", row->source, "event_id", row->event_id, "reason_code",
        row->reason_code, "reason", row->reason, "size", (json_int_t)row->size, "resolved",
        row->resolved, "account",
        row->account != NULL && row->account[0] != '\0' ? json_string(row->account) : json_null());

    return o == NULL || json_array_append_new(arg, o) != 0;
}

unsigned bd_api_rejected(bs_conn *c, struct MHD_Connection *conn, json_t **body, char *msg,
                         size_t msgsize, bs_error *err)
{
    const char *reason = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "reason");
    const char *lim = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit");
    const char *all = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "all");
    long limit = DEFAULT_LIMIT;
    json_t *arr;
    char *end;

    *body = NULL;
    if (lim != NULL) {
        errno = 0;
        limit = strtol(lim, &end, 10);
        if (errno != 0 || end == lim || *end != '\0' || limit < 1 || limit > BD_REJECTED_MAX) {
            snprintf(msg, msgsize, "limit: need a number in 1..%d", BD_REJECTED_MAX);
            return 400;
        }
    }
    if (reason != NULL && (*reason == '\0' || strlen(reason) > REASON_MAX)) {
        snprintf(msg, msgsize, "reason: a reason code of 1 to %d bytes", REASON_MAX);
        return 400;
    }
    if (all != NULL && strcmp(all, "0") != 0 && strcmp(all, "1") != 0) {
        snprintf(msg, msgsize, "all: 0 or 1");
        return 400;
    }
    arr = json_array();
    if (arr == NULL) {
        bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (bs_rejects_list(c, reason, limit, all != NULL && strcmp(all, "1") == 0, reject_json, arr,
                        err) != BS_OK) {
        json_decref(arr);
        return 0;
    }
    *body = json_pack("{s:o}", "data", arr);
    if (*body == NULL) {
        bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        return 0;
    }
    return 200;
}

json_t *bd_api_ops_status(json_t *routes, json_t *closes)
{
    char at[40];
    json_t *consumer = bd_metrics_status();

    billing_time_format((billing_time_t)time(NULL) * BILLING_NS_PER_SEC, at, sizeof(at));
    if (routes == NULL || consumer == NULL || closes == NULL) {
        json_decref(routes);
        json_decref(consumer);
        json_decref(closes);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o, s:o}", "at", at, "consumer", consumer, "api", routes,
                     "closes", closes);
}
