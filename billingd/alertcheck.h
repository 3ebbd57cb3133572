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
 * Computed once (issue 24): with a bd_alert_cache, billingd keeps per
 * account, between batches, a rater holding its stored usage (what the
 * walk below read the first time), its change counter when that was
 * read (billing.close_tallies, migration 0016: every insert or delete of
 * a stored event raises it, whoever the writer), the grants it was
 * checked with, its latest stored end, and its latest epoch and month
 * with usage. A batch reads the counters with the grants (same
 * statement); a state is valid iff its counter plus the batch's new
 * events of the account is what was read and its grants are unchanged.
 * When the batch's events all lie in one epoch with no stored usage in a
 * later one, the balance is read from a valid state with the batch's
 * events added (nothing read back); when an alert is due and the batch's
 * events are in order (each starting at or after the state's latest
 * stored end) and the search would start at their earliest start, the
 * crossing is searched over them with the state below them, which is
 * the walk's search over the same window: the same fields. An alert due
 * with a late event (or a search starting elsewhere) is searched as the
 * walk does, over the epoch's stored events read back, on the state with
 * the batch's events (what the walk's rater holds there), so the account
 * is not walked nor warmed again. Every other account with credit (no
 * state, an invalid one, events in several epochs) is walked as below,
 * one query for all of them, and its state warmed from the walk's rater.
 * The states move on only when the batch commits (bd_alert_cache_done);
 * a rollback leaves them as they were.
 * Alerts found from states are sent before those of the walk (the
 * fields are the same; the order of a batch's alerts may differ from the
 * check without a cache). What the states' balances omit the walk omits
 * too: neither gives the rater the issued credit of finalized months
 * (store/balance.c), so a finalization changes neither.
 *
 * Not thread-safe: one call at a time per connection and catalog (and
 * per cache, with bd_alert_cache_done).
 */
#ifndef BILLINGD_ALERTCHECK_H
#define BILLINGD_ALERTCHECK_H

#include <stdint.h>

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

/* billingd's default alerts.cache_accounts. */
#define BD_CACHE_ACCOUNTS_DEFAULT 100000

/* billingd's default alerts.cache_events (about 120 bytes each: some 120 MB at most). */
#define BD_CACHE_EVENTS_DEFAULT 1000000

/*
 * The accounts' credit states kept between batches (see above). Bounded:
 * at most max_accounts accounts' usage held (the raters of the batches
 * that warmed them, 64 at most: the one with the fewest accounts still
 * used, then the least recently used, goes first when room is needed).
 * States of accounts this process no longer consumes (a revoked
 * partition) are not dropped: another consumer's events raise the
 * account's counter, so a state used again is found stale and warmed
 * anew; an idle one goes with its rater.
 */
typedef struct bd_alert_cache bd_alert_cache;

/* What the cache did since it was made (for tests and benchmarks). */
typedef struct bd_alert_cache_stats {
    uint64_t hits;      /* accounts of a batch with a valid state */
    uint64_t stale;     /* states found invalid (dropped) */
    uint64_t fast;      /* accounts checked from their state, no aggregate read */
    uint64_t windows;   /* accounts with an alert due placed over a window read back on the state */
    uint64_t kept;      /* ... placed over a window of the state's kept events (no read-back) */
    uint64_t unkept;    /* states whose kept events were dropped for the bounds (then read back) */
    uint64_t read;      /* states warmed with their epoch's events read once (one query a batch) */
    uint64_t warmed;    /* accounts walked and warmed */
    uint64_t evictions; /* raters dropped for room */
    uint64_t rollbacks; /* batches that did not commit */
    size_t accounts;    /* states held now */
} bd_alert_cache_stats;

/* bd_alert_cache_new - an empty cache of at most @max_accounts (>= 1) states; NULL: no memory. */
bd_alert_cache *bd_alert_cache_new(size_t max_accounts);

/*
 * bd_alert_cache_set_max_events - at most @max_events stored events kept
 * in all of @cache's states together (BD_CACHE_EVENTS_DEFAULT unless
 * set; 0: none kept). A state keeps every stored event of its account
 * when its first batch was all the account ever stored (its change
 * counter tells), else (billingd restarted on a database holding the
 * account's events, a state evicted and warmed again) its stored events
 * of its latest credit epoch with usage, read once when it is warmed (one
 * query for all the batch's warmed accounts, stats.read), and then each
 * batch's that moves it on: an alert due
 * that its batch alone cannot place (a late event) is then searched over
 * a window of those, not of events read back from the store. A state
 * that would pass the bound, or 65 536 events of one account, drops its
 * events (stats.unkept) and its windows are read back again. Not
 * thread-safe (as the cache).
 */
void bd_alert_cache_set_max_events(bd_alert_cache *cache, size_t max_events);

/* bd_alert_cache_free - free @cache and its states; NULL is a no-op. */
void bd_alert_cache_free(bd_alert_cache *cache);

/*
 * bd_alert_cache_forget - drop every state (and pending change): before
 * the catalog the states' raters borrow is freed (a reload).
 */
void bd_alert_cache_forget(bd_alert_cache *cache);

/*
 * bd_alerts_check_cached - bd_alerts_check with @cache's states (NULL:
 * none, as bd_alerts_check). What the batch changes in @cache is pending
 * on @c until bd_alert_cache_done(@cache, @c, ...) tells whether the
 * batch committed; a retry of the batch on @c replaces it. The batch's
 * events stay in the rater of each state it was checked from (they are
 * not added again at commit), and until bd_alert_cache_done that state
 * is busy: a batch on another connection touching the same account does
 * not use it but walks the account from the store, as without a state.
 * A rollback or retry takes the events back out, so the state is as it
 * was before the check. The results' events must stay valid until then.
 * At most 64 connections with a batch pending at once (past that a batch
 * is checked without states).
 */
bs_status bd_alerts_check_cached(bd_alert_cache *cache, bs_conn *c, bs_catalog *cat,
                                 const int *pcts, size_t n, const bs_record *recs,
                                 const bs_record_result *results, size_t n_recs, bd_crossing_fn fn,
                                 void *arg, bs_error *err);

/*
 * bd_alert_cache_done - the batch checked on @c committed (@committed 1:
 * its accounts' states move on by its events, the accounts it warmed are
 * kept) or not (0: nothing changes). No-op for NULL @cache or nothing
 * pending on @c.
 */
void bd_alert_cache_done(bd_alert_cache *cache, bs_conn *c, int committed);

/* bd_alert_cache_stats_get - what @cache did so far, into @out. */
void bd_alert_cache_stats_get(const bd_alert_cache *cache, bd_alert_cache_stats *out);

#endif
