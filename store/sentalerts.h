/*
 * sentalerts.h - what billingd's credit alert check reads and writes in a
 * batch's transaction besides the aggregates: the credit alerts already
 * sent (billing.credit_alerts, migration 0009), the credit grants of the
 * batch's accounts and the raw events of one account inside a time
 * window. doc/database.md, doc/operations.md ("Credit alerts").
 *
 * Not thread-safe: one call at a time per connection.
 */
#ifndef BILLING_STORE_SENTALERTS_H
#define BILLING_STORE_SENTALERTS_H

#include <stddef.h>
#include <stdint.h>

#include "invoices.h"
#include "store.h"

/* Longest alert_id the table takes (its CHECK). */
#define BS_ALERT_ID_MAX 512

/* One alert to record as sent; everything borrowed for the call. */
typedef struct bs_sent_alert {
    const char *alert_id; /* identity: 1..BS_ALERT_ID_MAX bytes */
    const char *account;
    int pct;               /* 1..100 */
    const char *granted;   /* the credit total, exact decimal, > 0 */
    const char *grants;    /* the ids of the grants valid, a text[] literal (bs_text_array) */
    const char *threshold; /* exact decimal */
    const char *balance;   /* exact decimal */
    billing_time_t crossed_at;
    const char *event_id;
} bs_sent_alert;

/* The alert ids already sent for some accounts: a sorted set. */
typedef struct bs_sent_alerts bs_sent_alerts;

/*
 * bs_sent_alerts_read - the alert ids recorded for the accounts of
 * @accounts (a text[] literal, bs_text_array), one query, into *@out
 * (free with bs_sent_alerts_free). Returns BS_OK or the error.
 */
bs_status bs_sent_alerts_read(bs_conn *c, const char *accounts, bs_sent_alerts **out,
                              bs_error *err);

/* bs_sent_alerts_has - 1 when @alert_id is in @s, else 0. */
int bs_sent_alerts_has(const bs_sent_alerts *s, const char *alert_id);

/* bs_sent_alerts_free - free; NULL is a no-op. */
void bs_sent_alerts_free(bs_sent_alerts *s);

/* Most alerts bs_sent_alerts_record takes in one statement. */
#define BS_SENT_ALERTS_MAX 100000

/*
 * bs_sent_alerts_record - insert the @n alerts of @a (at most
 * BS_SENT_ALERTS_MAX) into billing.credit_alerts in one INSERT, in the
 * current transaction. @inserted[i] is 1 when a[i]'s row is new, 0 when
 * its alert_id was there already (committed by another transaction since
 * the read: then it must not be sent again) or comes earlier in @a (that
 * first one is the row written). Nothing written for @n == 0 (no statement). Returns
 * BS_OK or the error (BS_ERR_NOMEM, BS_ERR_INVALID for too many alerts).
 */
bs_status bs_sent_alerts_record(bs_conn *c, const bs_sent_alert *a, size_t n, int *inserted,
                                bs_error *err);

/*
 * bs_events_window - every stored raw event of @account that overlaps
 * [@from, @to) (starts before @to, ends after @from), handed to @fn in no
 * particular order, read in the current transaction (so it sees the
 * batch's own events). When there are more than @max_rows (the caller's
 * bound on memory and time), none is handed and *@more is set to 1 (else
 * 0). Returns BS_OK, BS_ERR_INVALID when @fn stopped, or a database
 * error.
 */
bs_status bs_events_window(bs_conn *c, const char *account, billing_time_t from, billing_time_t to,
                           long max_rows, bs_event_fn fn, void *arg, int *more, bs_error *err);

/* One credit grant of an account; strings owned by the bs_account_grants it came from. */
typedef struct bs_account_grant {
    const char *account;
    const char *id;
    const char *amount;        /* exact decimal, > 0 */
    const char *currency;      /* the account's currency */
    billing_time_t granted_at; /* whole microseconds, as nanoseconds */
    billing_time_t expires_at;
    /*
     * The account's change counter when read: the sum of its
     * billing.close_tallies changes (migration 0016), which every insert
     * or delete of one of its stored events raises, whoever writes it.
     * The same in every row of the account.
     */
    int64_t changes;
} bs_account_grant;

/* The credit grants of some accounts, by account then id (strcmp order). */
typedef struct bs_account_grants bs_account_grants;

/*
 * bs_account_grants_read - every credit grant of the accounts of
 * @accounts (a text[] literal, bs_text_array), one query (prepared once
 * per connection), read in the current transaction, into *@out (free with
 * bs_account_grants_free; NULL on error). Ordered by account, then grant
 * id, bytewise; each row carries its account's change counter
 * (bs_account_grant.changes), read by the same statement, so it is as
 * of that statement. Returns BS_OK, BS_ERR_NOMEM, or a database error.
 */
bs_status bs_account_grants_read(bs_conn *c, const char *accounts, bs_account_grants **out,
                                 bs_error *err);

/* bs_usage_end_fn - one account's latest stored event end (nanoseconds). */
typedef void (*bs_usage_end_fn)(void *arg, const char *account, billing_time_t end);

/*
 * bs_usage_ends_read - the latest end of the stored events of each
 * account of @accounts (a text[] literal, bs_text_array), one query in the
 * current transaction: @fn once per account that has events, in no
 * particular order. Reads each account's events (its index), so it costs
 * what those accounts stored: meant for an account once, not per batch.
 * Returns BS_OK or a database error.
 */
bs_status bs_usage_ends_read(bs_conn *c, const char *accounts, bs_usage_end_fn fn, void *arg,
                             bs_error *err);

/*
 * bs_events_since_read - the stored raw events of each of the @n
 * @accounts that end at or after the whole microsecond at or before its
 * instant in @froms (every event that ends after it, and perhaps a few
 * that end within that microsecond), at most @max_rows + 1 of each
 * account (more than @max_rows: the caller's bound was passed), in one
 * query in the current transaction (so it sees the batch's own events):
 * @fn once per event, with its account, in no particular order. Meant
 * for an account once (it reads what the account stored since @from),
 * not per batch. Returns BS_OK, BS_ERR_NOMEM, BS_ERR_INVALID when @fn
 * stopped, or a database error.
 */
bs_status bs_events_since_read(bs_conn *c, const char *const *accounts, const billing_time_t *froms,
                               size_t n, long max_rows, bs_event_fn fn, void *arg, bs_error *err);

/* bs_account_grants_count - how many grants @g holds (0 for NULL). */
size_t bs_account_grants_count(const bs_account_grants *g);

/* bs_account_grants_at - grant @i (< count) of @g, valid until @g is freed. */
const bs_account_grant *bs_account_grants_at(const bs_account_grants *g, size_t i);

/* bs_account_grants_free - free @g and its strings; NULL is a no-op. */
void bs_account_grants_free(bs_account_grants *g);

#endif /* BILLING_STORE_SENTALERTS_H */
