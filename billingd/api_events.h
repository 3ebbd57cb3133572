/*
 * api_events.h - group commit of POST /v1/events in store mode
 * (api.events=store): the events of requests that arrive while a commit
 * runs are stored together in the next one, one transaction of the
 * ingest pipeline (bs_ingest_batch, as `billing ingest`) for the whole
 * group instead of one per request. Each request gets the results of
 * its own events, exactly as if its events had been sent alone in the
 * order the group holds them: an id sent twice in one group is a
 * duplicate (or a conflict) the second time, as within one `billing
 * ingest` batch. A request is answered only once its group committed.
 */
#ifndef BILLINGD_API_EVENTS_H
#define BILLINGD_API_EVENTS_H

#include <stddef.h>

#include "ingest.h"
#include "store.h"

/* The requests waiting for, and in, a commit. */
typedef struct bd_group bd_group;

/* What became of one event: a copy of its bs_record_result, owned. */
typedef struct bd_event_result {
    bs_record_outcome outcome;
    const char *reason_code; /* static string, NULL unless rejected */
    char *event_id;          /* NULL if it could not be decoded */
    char *reason;            /* NULL unless rejected */
} bd_event_result;

/* bd_group_new - an empty group (bd_group_free), or NULL out of memory. */
bd_group *bd_group_new(void);

/* bd_group_free - free @g (NULL is fine); no call may be in progress. */
void bd_group_free(bd_group *g);

/*
 * bd_group_ingest - store the @n records @recs (1..BD_GROUP_MAX, borrowed
 * until the call returns) with the records of the requests calling it
 * meanwhile, in one bs_ingest_batch. The caller whose turn it is to
 * commit runs the transaction with its own pipeline @in and connection
 * @c (one per calling thread); the others wait. Fills @out[i] (room for
 * @n; bd_event_results_free) and @counts (records, stored, duplicates,
 * rejected of these @n). Returns BS_OK, or the batch's error in @err
 * (then every request of the group gets it, nothing of it stored).
 */
bs_status bd_group_ingest(bd_group *g, bs_ingest *in, bs_conn *c, const bs_record *recs, size_t n,
                          bd_event_result *out, bs_ingest_counts *counts, bs_error *err);

/* Most records of one call (a group holds more, up to BS_INGEST_BATCH_MAX). */
#define BD_GROUP_MAX 10000

/* bd_event_results_free - free what @n results of bd_group_ingest hold (not @r). */
void bd_event_results_free(bd_event_result *r, size_t n);

#endif
