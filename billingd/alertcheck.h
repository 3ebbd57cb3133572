/*
 * alertcheck.h - which credit alerts a batch makes due, and their
 * fields: the part of the credit alerts that needs PostgreSQL and
 * libbilling but no broker (alerts.c publishes what it finds).
 *
 * The alerts are a function of the stored events, not of their order of
 * arrival or of the batches. An account's credit epochs are the spans
 * between its grants' bounds (libbilling's numbering: the grants valid
 * are the same throughout one). Usage only lowers a balance, so the
 * credit of an epoch is lowest at the epoch's latest stored usage: there
 * the balance counts the stored usage of that epoch and the earlier ones
 * (the stored aggregates, epoch by epoch), read in the latest month with
 * usage of the epoch, with the grants valid in it - what `billing rate
 * --at` gives at that instant. Every threshold (percent of the epoch's
 * credit total) at or above that balance is due; one not yet in
 * billing.credit_alerts is recorded there, in the batch's transaction,
 * and reported. An alert's identity (alert_id) is the account, the
 * percent and the credit (total and grant ids), so a credit valid again
 * in a later epoch, or reached again by a later batch, never repeats it.
 * Only the epochs from the first the batch touches on can change.
 *
 * Fields, over the stored events when the alert is decided: crossed_at is
 * the first instant at which the usage before it (of the epoch's stored
 * events, cut there, on top of the earlier epochs) leaves the balance,
 * read at its last nanosecond before, at or below the threshold (the
 * epoch's start when the credit was already that low when it became
 * valid); event_id the event running then that started last; balance the
 * epoch's balance at its latest stored usage; exhausted the instant
 * libbilling computes for the credit to reach zero with the epoch's last
 * events still running. The search reads the epoch's stored events back
 * from the batch's latest usage of the account (a day, then four times
 * more, up to the start of the latest month with usage; then a month at
 * a time), until the balance before them is above the threshold: a
 * threshold a batch makes due is mostly reached near its latest usage,
 * so what is read grows with the batch, not with the events stored.
 * Past BD_EPOCH_EVENTS_MAX (alertcheck.c) it is skipped: crossed_at is
 * then the instant the balance was read and event_id is "".
 *
 * Not thread-safe: one call at a time per connection and catalog.
 */
#ifndef BILLINGD_ALERTCHECK_H
#define BILLINGD_ALERTCHECK_H

#include "dbcatalog.h"
#include "ingest.h"

/* Room for an amount written by the checker. */
#define BD_AMOUNT_MAX 256

/* One alert due; strings valid during the sink call only. */
typedef struct bd_crossing {
    const char *alert_id; /* account/NNpct/granted/grant ids (or md5-<hex> of them) */
    const char *account;
    const char *currency;
    const char *granted;   /* credit total of the grants valid, exact decimal */
    const char *balance;   /* balance at the epoch's latest stored usage, exact decimal */
    const char *threshold; /* the balance level reached, exact decimal */
    const char *event_id;  /* the stored event running when it was reached */
    int pct;               /* percent of the credit used */
    billing_time_t crossed_at;
    billing_time_t exhausted; /* projected zero with the latest usage running; INT64_MAX: never */
} bd_crossing;

/* Called once per alert, recorded as sent; non-zero stops with BS_ERR_FATAL. */
typedef int (*bd_crossing_fn)(void *arg, const bd_crossing *x);

/*
 * bd_alerts_check - the alerts of @pcts (@n of them, 1..100) that the
 * new records of a batch (@recs, @results, @n_recs: what a
 * bs_ingest_hook gets) make due, read and written inside the batch's
 * transaction on @c: the accounts' stored aggregates and events (which
 * hold the batch), credit grants, and billing.credit_alerts (each alert
 * found is inserted there before @fn is called for it). Every account of
 * the batch that has credit is checked, however many; one whose epochs
 * from the batch's on have every threshold recorded is skipped without
 * reading its aggregates. The records are not decoded again: each new
 * record's decoded event is in @results (bs_record_result.event).
 * Queries per batch, whatever its size: the grants and the sent alerts of
 * its accounts, the aggregates of the accounts that can still raise one;
 * and per epoch with an alert due its stored events from where the search
 * starts (one query per step back), and per alert an INSERT (prepared).
 * If the batch rolls back, so do the rows: its replay reports the same
 * alerts (same alert_id) again. Returns BS_OK or the error (in @err).
 */
bs_status bd_alerts_check(bs_conn *c, bs_catalog *cat, const int *pcts, size_t n,
                          const bs_record *recs, const bs_record_result *results, size_t n_recs,
                          bd_crossing_fn fn, void *arg, bs_error *err);

#endif
