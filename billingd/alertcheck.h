/*
 * alertcheck.h - which credit thresholds a batch crosses, and when: the
 * part of the credit alerts that needs PostgreSQL and libbilling but no
 * broker (alerts.c publishes what it finds).
 *
 * Deterministic: an account's events are taken in arrival order (one
 * partition per account, so the same in every run) and the balance is
 * read at each event's last nanosecond (end - 1 ns), which decides the
 * month and the grants valid. Consecutive events with the same month and
 * the same grants valid form a segment, inside which the balance depends
 * only on the events rated (not on the instant): a threshold is crossed
 * in a segment when the balance before its events is above the level and
 * after them at or below. Batch boundaries only split segments, so the
 * same events give the same alerts whatever the batch sizes; a grant
 * that expires between two events is not a crossing (both sides of the
 * comparison use the same grants).
 *
 * The crossing instant is the first nanosecond at which the crossing
 * event, rated from its start up to that instant on top of the events
 * before it, leaves the balance at or below the level: what
 * `billing rate --at` gives over the same events.
 *
 * Not thread-safe: one call at a time per connection and catalog.
 */
#ifndef BILLINGD_ALERTCHECK_H
#define BILLINGD_ALERTCHECK_H

#include "dbcatalog.h"
#include "ingest.h"

/* Room for an amount written by the checker. */
#define BD_AMOUNT_MAX 256

/* One threshold crossed; strings valid during the sink call only. */
typedef struct bd_crossing {
    const char *account;
    const char *currency;
    const char *granted;   /* credit valid at the crossing, exact decimal */
    const char *balance;   /* balance right after the crossing event, exact decimal */
    const char *threshold; /* the balance level crossed, exact decimal */
    const char *event_id;  /* the event that crossed it */
    int pct;               /* percent of the credit used */
    billing_time_t crossed_at;
    billing_time_t exhausted; /* projected zero with that event running; INT64_MAX: never */
} bd_crossing;

/*
 * bd_alert_memo: the accounts known to have used every threshold of
 * their credit (balance at or below the lowest level) and for which
 * credit total: their later batches need no balance at all (usage only
 * lowers it) until their valid credit changes (a new grant, an expiry).
 * At most BD_MEMO_MAX accounts are remembered (the rest are only not
 * skipped). Not thread-safe.
 */
typedef struct bd_alert_memo bd_alert_memo;

/* Most accounts a memo holds: 2^17 slots at 60% load, a few MiB. */
#define BD_MEMO_MAX 78643

/* bd_alert_memo_new - an empty memo, or NULL when out of memory. Free with bd_alert_memo_free. */
bd_alert_memo *bd_alert_memo_new(void);

/* bd_alert_memo_clear - forget every account (after a batch that did not commit its alerts). */
void bd_alert_memo_clear(bd_alert_memo *m);

/* bd_alert_memo_free - free; NULL is a no-op. */
void bd_alert_memo_free(bd_alert_memo *m);

/* Called once per crossing, in arrival order per account; non-zero stops with BS_ERR_FATAL. */
typedef int (*bd_crossing_fn)(void *arg, const bd_crossing *x);

/*
 * bd_alerts_check - the crossings of @pcts (@n of them, 1..100) by the
 * new records of a batch (@recs, @results, @n_recs: what a
 * bs_ingest_hook gets), read inside the batch's transaction on @c: the
 * accounts' stored aggregates (which hold the batch) and credit grants.
 * Every account of the batch that has credit is checked, however many.
 * Calls @fn for each crossing. @memo (may be NULL) skips the accounts
 * that can cross nothing and learns new ones; clear it when the batch's
 * alerts were not delivered. Returns BS_OK or the error (in @err).
 */
bs_status bd_alerts_check(bs_conn *c, bs_catalog *cat, bd_alert_memo *memo, const int *pcts,
                          size_t n, const bs_record *recs, const bs_record_result *results,
                          size_t n_recs, bd_crossing_fn fn, void *arg, bs_error *err);

#endif
