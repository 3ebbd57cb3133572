/*
 * rate_credit.h - events kept for a second look: those running at --at,
 * or all of them for --by resource.
 *
 * `billing rate --at INSTANT`: the credit each account
 * has left at that instant, from the library's live balance
 * (billing_rater_credit_balance), and, given the usage running at that
 * instant (events whose interval holds it), when it reaches zero
 * (billing_rater_credit_exhaustion).
 */
#ifndef BILLING_RATE_CREDIT_H
#define BILLING_RATE_CREDIT_H

#include <stddef.h>

#include "billing.h"

/* Most running events kept: each is a resource running at one instant. */
#define RUNNING_MAX 100000
/* Most events kept for --by resource (about 200 bytes each). */
#define KEPT_MAX 2000000

typedef struct rate_running rate_running;

/* running_new - an empty set for instant @at; NULL when out of memory. */
rate_running *running_new(billing_time_t at);

/*
 * running_new_every - a set that keeps every event noted (for --by
 * resource, which rates each resource's events again); NULL when out of
 * memory.
 */
rate_running *running_new_every(void);

/* running_destroy - free @r; NULL is a no-op. */
void running_destroy(rate_running *r);

/*
 * running_note - keep @ev (rated) when its interval holds the instant.
 * Returns 0, or -1 with a message when out of memory or past RUNNING_MAX.
 */
int running_note(rate_running *r, const billing_event *ev, char *err, size_t errsize);

/* running_forget - a repeat of @ev was taken back out of the rater: drop one copy. */
void running_forget(rate_running *r, const billing_event *ev);

/*
 * running_events - the kept events of @account, decoded into new events
 * in *@out (free with running_free); their count in *@n. Returns 0 or -1
 * when out of memory.
 */
int running_events(const rate_running *r, const char *account, billing_event ***out, size_t *n);

/* running_free - free what running_events gave. */
void running_free(billing_event **evs, size_t n);

#endif /* BILLING_RATE_CREDIT_H */
