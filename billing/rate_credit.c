/*
 * rate_credit.c - the events running at --at, kept for the credit
 * report: see rate_credit.h. Each is kept encoded (billing_event_encode),
 * so that a copy costs its wire size, not a whole billing_event.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rate_credit.h"

struct running_event {
    char *account;
    char *id;
    unsigned char *wire;
    size_t len;
};

struct rate_running {
    int every;  /* keep every event, not only those running at @at */
    size_t max; /* most kept */
    billing_time_t at;
    struct running_event *evs;
    size_t n;
    size_t cap;
};

rate_running *running_new(billing_time_t at)
{
    rate_running *r = calloc(1, sizeof(*r));

    if (r != NULL) {
        r->at = at;
        r->max = RUNNING_MAX;
    }
    return r;
}

rate_running *running_new_every(void)
{
    rate_running *r = calloc(1, sizeof(*r));

    if (r != NULL) {
        r->every = 1;
        r->max = KEPT_MAX;
    }
    return r;
}

static void free_event(struct running_event *e)
{
    free(e->account);
    free(e->id);
    free(e->wire);
}

void running_destroy(rate_running *r)
{
    size_t i;

    if (r == NULL)
        return;
    for (i = 0; i < r->n; i++)
        free_event(&r->evs[i]);
    free(r->evs);
    free(r);
}

/* Room for one more; -1 when out of memory or full. */
static int grow(rate_running *r)
{
    struct running_event *evs;
    size_t cap;

    if (r->n < r->cap)
        return 0;
    if (r->cap >= r->max)
        return -1;
    cap = r->cap == 0 ? 64 : r->cap * 2;
    if (cap > r->max)
        cap = r->max;
    evs = realloc(r->evs, cap * sizeof(*evs));
    if (evs == NULL)
        return -1;
    r->evs = evs;
    r->cap = cap;
    return 0;
}

int running_note(rate_running *r, const billing_event *ev, char *err, size_t errsize)
{
    unsigned char wire[BILLING_EVENT_WIRE_MAX];
    struct running_event *e;
    billing_time_t start;
    billing_time_t end;
    size_t len;

    start = billing_event_start(ev);
    end = billing_event_end(ev);
    if (!r->every && (start > r->at || end <= r->at))
        return 0;
    if (billing_event_encode(ev, wire, sizeof(wire), &len) != BILLING_OK || grow(r) != 0)
        goto error;
    e = &r->evs[r->n];
    e->account = strdup(billing_event_account(ev));
    e->id = strdup(billing_event_id(ev));
    e->wire = malloc(len);
    e->len = len;
    if (e->account == NULL || e->id == NULL || e->wire == NULL) {
        free_event(e);
        goto error;
    }
    memcpy(e->wire, wire, len);
    r->n++;
    return 0;
error:
    if (r->every)
        snprintf(err, errsize,
                 "--by resource: more than %d events, or out of memory; "
                 "choose one --account or fewer months",
                 KEPT_MAX);
    else
        snprintf(err, errsize,
                 "--at: more than %d events running at that instant, or out of "
                 "memory",
                 RUNNING_MAX);
    return -1;
}

void running_forget(rate_running *r, const billing_event *ev)
{
    size_t i;

    for (i = r->n; i-- > 0;) {
        if (strcmp(r->evs[i].id, billing_event_id(ev)) == 0) {
            free_event(&r->evs[i]);
            r->evs[i] = r->evs[--r->n];
            return;
        }
    }
}

void running_free(billing_event **evs, size_t n)
{
    size_t i;

    for (i = 0; evs != NULL && i < n; i++)
        billing_event_destroy(evs[i]);
    free(evs);
}

int running_events(const rate_running *r, const char *account, billing_event ***out, size_t *n)
{
    billing_event **evs = calloc(r->n + 1, sizeof(*evs));
    char err[256];
    size_t i;

    *n = 0;
    *out = evs;
    if (evs == NULL)
        return -1;
    for (i = 0; i < r->n; i++) {
        if (strcmp(r->evs[i].account, account) != 0)
            continue;
        evs[*n] = billing_event_new();
        if (evs[*n] == NULL || billing_event_decode(evs[*n], r->evs[i].wire, r->evs[i].len, err,
                                                    sizeof(err)) != BILLING_OK) {
            billing_event_destroy(evs[*n]);
            running_free(evs, *n);
            *out = NULL;
            return -1;
        }
        (*n)++;
    }
    return 0;
}
