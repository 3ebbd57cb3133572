/*
 * api_events.c - group commit of POST /v1/events in store mode (api_events.h).
 *
 * A request appends itself to the pending list. When no commit runs, the
 * first request to see it takes the whole pending list (itself included),
 * commits it in one bs_ingest_batch on its own connection, copies each
 * request's results out of its pipeline, marks them done and wakes the
 * others; one of the requests that queued meanwhile then commits the next
 * group. The pipeline's results are copied because the committing
 * thread's pipeline is reused by its next request while the others may
 * still be answering.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api_events.h"

/* One request in a group. */
typedef struct member {
    struct member *next;
    const bs_record *recs;
    size_t n;
    bd_event_result *out;
    bs_ingest_counts *counts;
    bs_status st;
    bs_error err;
    int done;
} member;

struct bd_group {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    member *head; /* the next group, in arrival order */
    member **tail;
    size_t pending; /* records of the next group */
    int committing;
};

bd_group *bd_group_new(void)
{
    bd_group *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->tail = &g->head;
    return g;
}

void bd_group_free(bd_group *g)
{
    if (g == NULL)
        return;
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
}

void bd_event_results_free(bd_event_result *r, size_t n)
{
    size_t i;

    for (i = 0; r != NULL && i < n; i++) {
        free(r[i].event_id);
        free(r[i].reason);
        r[i].event_id = NULL;
        r[i].reason = NULL;
    }
}

/* Copy the results @res of member @m's records; 0, or -1 out of memory. */
static int copy_results(member *m, const bs_record_result *res)
{
    size_t i;

    memset(m->counts, 0, sizeof(*m->counts));
    m->counts->records = m->n;
    for (i = 0; i < m->n; i++) {
        bd_event_result *o = &m->out[i];

        o->outcome = res[i].outcome;
        o->reason_code = res[i].reason_code;
        if (res[i].event_id != NULL && (o->event_id = strdup(res[i].event_id)) == NULL)
            return -1;
        if (res[i].outcome == BS_RECORD_REJECTED &&
            (o->reason = strdup(res[i].reason != NULL ? res[i].reason : "")) == NULL)
            return -1;
        if (res[i].outcome == BS_RECORD_NEW)
            m->counts->stored++;
        else if (res[i].outcome == BS_RECORD_DUPLICATE)
            m->counts->duplicates++;
        else
            m->counts->rejected++;
    }
    return 0;
}

/* Commit the group @first (taken off the pending list) with @in and @c; set each member's result. */
static void commit(member *first, size_t total, bs_ingest *in, bs_conn *c)
{
    bs_record *recs = malloc(total * sizeof(*recs));
    bs_record_result *res = calloc(total, sizeof(*res));
    bs_error err;
    bs_status st;
    member *m;
    size_t at = 0;

    memset(&err, 0, sizeof(err));
    if (recs == NULL || res == NULL) {
        st = bs_error_set(&err, BS_ERR_NOMEM, "out of memory");
    } else {
        for (m = first; m != NULL; m = m->next) {
            memcpy(recs + at, m->recs, m->n * sizeof(*recs));
            at += m->n;
        }
        st = bs_ingest_batch(in, c, recs, total, NULL, 0, 0, res, NULL, &err);
    }
    at = 0;
    for (m = first; m != NULL; m = m->next) {
        m->st = st;
        m->err = err;
        if (st == BS_OK && copy_results(m, res + at) != 0) {
            bd_event_results_free(m->out, m->n);
            m->st = bs_error_set(&m->err, BS_ERR_NOMEM, "out of memory");
        }
        at += m->n;
    }
    free(recs);
    free(res);
}

bs_status bd_group_ingest(bd_group *g, bs_ingest *in, bs_conn *c, const bs_record *recs, size_t n,
                          bd_event_result *out, bs_ingest_counts *counts, bs_error *err)
{
    member self;
    member *first;
    member *m;
    size_t total;

    if (n == 0 || n > BD_GROUP_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "%zu records: 1 to %d per request", n,
                            BD_GROUP_MAX);
    memset(&self, 0, sizeof(self));
    memset(out, 0, n * sizeof(*out));
    self.recs = recs;
    self.n = n;
    self.out = out;
    self.counts = counts;
    pthread_mutex_lock(&g->lock);
    /* A group stays within one batch's bound. */
    while (g->pending > 0 && g->pending + n > BS_INGEST_BATCH_MAX)
        pthread_cond_wait(&g->cond, &g->lock);
    *g->tail = &self;
    g->tail = &self.next;
    g->pending += n;
    while (!self.done && g->committing)
        pthread_cond_wait(&g->cond, &g->lock);
    if (self.done) {
        pthread_mutex_unlock(&g->lock);
        *err = self.err;
        return self.st;
    }
    /* Our turn: the whole pending list, ourselves among it, is the group. */
    first = g->head;
    total = g->pending;
    g->head = NULL;
    g->tail = &g->head;
    g->pending = 0;
    g->committing = 1;
    pthread_mutex_unlock(&g->lock);
    commit(first, total, in, c);
    pthread_mutex_lock(&g->lock);
    for (m = first; m != NULL; m = m->next)
        m->done = 1;
    g->committing = 0;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    *err = self.err;
    return self.st;
}
