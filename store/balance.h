/*
 * balance.h - an account's credit as the store knows it, for every
 * program that shows or acts on it (`billing account balance`, `billing
 * close`, and any server): the usage stored by the ingest pipeline and
 * the credit that finalized months took, as the ledger holds it, given to
 * a libbilling rater. One definition, so that a balance shown, a balance
 * alerted on and a balance a close starts from cannot differ.
 */
#ifndef BILLING_STORE_BALANCE_H
#define BILLING_STORE_BALANCE_H

#include <billing/billing.h>

#include "apikeys.h"
#include "dbcatalog.h"
#include "invoices.h"
#include "store.h"

/* Rows of issued credit per account at most (months x grants): bounds what one account may ask. */
#define BS_ISSUED_ROWS_MAX 65536

/*
 * bs_history: the credit finalized months took (bs_credit_history,
 * invoices.h) for a list of accounts, read once and given to raters
 * account by account. Not thread-safe; one owner.
 */
typedef struct bs_history bs_history;

/*
 * bs_history_read - read the issued credit of the accounts of @accounts
 * (a JSON array of account ids) for the close of month @month
 * ("YYYY-MM-01": that month itself is left out). Returns BS_OK and the
 * history in *@out (freed with bs_history_free), or an error with *@out
 * NULL.
 */
bs_status bs_history_read(bs_conn *c, const char *accounts, const char *month, bs_history **out,
                          bs_error *err);

/*
 * bs_history_give - tell rater @r (dedupe off) what each finalized month
 * of account @id took from each grant, and the account credit after it
 * less what was refunded out of band (billing_rater_credit_issued).
 * Accounts must be given in the order of the list read, each at most
 * once; an account without history gets nothing. Returns BS_OK,
 * BS_ERR_INVALID (libbilling refused the rows, or more than
 * BS_ISSUED_ROWS_MAX of them; the message names the account) or
 * BS_ERR_NOMEM.
 */
bs_status bs_history_give(bs_history *h, billing_rater *r, const char *id, bs_error *err);

/* bs_history_free - free @h (NULL is fine). */
void bs_history_free(bs_history *h);

/*
 * bs_event_set - reset @ev and fill it with a stored event's fields, as
 * bs_event_fn (invoices.h) receives them, the interval [@start, @end).
 * Returns BILLING_OK or libbilling's refusal of a field (for the
 * quantity with a message in @msg; @msg is "" otherwise).
 */
billing_status bs_event_set(billing_event *ev, const char *account, const char *id,
                            const char *resource, const char *meter, billing_time_t start,
                            billing_time_t end, const char *quantity, const char *model,
                            const char *region, char *msg, size_t msgsize);

/*
 * bs_balance_rater - a new rater of @cat's catalog (dedupe off) holding
 * what the store knows of @account: every stored aggregate, or with @at
 * non-NULL the stored raw events starting before *@at, each cut there (as
 * `billing rate --at` cuts them); and the credit of the finalized months
 * before the account's local month of @now. Its credit balance and
 * invoices are then those `billing account balance` prints. Returns BS_OK
 * with the rater in *@out (the caller destroys it), or an error with
 * *@out NULL: BS_ERR_INVALID for a catalog or stored data libbilling
 * refuses (the message says which), BS_ERR_NOMEM, or a database error.
 */
bs_status bs_balance_rater(bs_conn *c, bs_catalog *cat, const char *account,
                           const billing_time_t *at, billing_time_t now, billing_rater **out,
                           bs_error *err);

/*
 * bs_balance_input: what one balance request of the HTTP API reads, all
 * in one round trip (bs_balance_fetch): the API key's row, the account's
 * stored aggregates, the credit of its finalized months and its stored
 * events running at the instant (the grants and what each has left come
 * from the rater: billing_rater_credit_grants). Not thread-safe; one owner.
 */
typedef struct bs_balance_input bs_balance_input;

/*
 * bs_balance_fetch - check @key as bs_apikey_check does (*@valid,
 * @auth) and, with @account non-NULL (an account @cat knows), read what
 * its balance at @now needs, the statements of bs_apikey_check,
 * bs_balance_rater (no @at) and the events running at @now sent together in libpq's pipeline mode, each prepared
 * once per session. Returns BS_OK with *@out (NULL without @account;
 * freed with bs_balance_input_free), or a database error with *@out
 * NULL and *@valid 0.
 */
bs_status bs_balance_fetch(bs_conn *c, bs_catalog *cat, const char *key, const char *account,
                           billing_time_t now, bs_apikey_auth *auth, int *valid,
                           bs_balance_input **out, bs_error *err);

/*
 * bs_balance_prepare - prepare on @c the statements bs_balance_fetch
 * sends (those already prepared on this session are left as they are),
 * so that a server can open its connections ready before its first
 * request instead of paying one round trip per statement then. Optional:
 * bs_balance_fetch prepares what is missing itself. Returns BS_OK or a
 * database error. Not thread-safe on one @c.
 */
bs_status bs_balance_prepare(bs_conn *c, bs_error *err);

/*
 * bs_balance_input_rater - the rater bs_balance_rater(@account, no @at,
 * @now) would return, from @in (read for the same account and instant
 * with @cat): the same figures. Returns as bs_balance_rater.
 */
bs_status bs_balance_input_rater(const bs_balance_input *in, bs_catalog *cat, const char *account,
                                 billing_rater **out, bs_error *err);

/*
 * bs_balance_input_running - to @fn, the account's stored events that
 * start at or before the instant and end after it (with perhaps a few
 * that end up to a millisecond before it: @fn sorts them out exactly).
 * Returns BS_OK, or BS_ERR_INVALID when @fn stopped or a stored instant
 * is out of range.
 */
bs_status bs_balance_input_running(const bs_balance_input *in, bs_event_fn fn, void *arg,
                                   bs_error *err);

/*
 * bs_balance_running - what bs_balance_input_running gives, for @account
 * at instant @at, read by the same prepared statement in one round trip
 * of its own (the balance at an instant other than the request's, and
 * `billing account balance`). Returns BS_OK, a database error, or
 * BS_ERR_INVALID as bs_balance_input_running.
 */
bs_status bs_balance_running(bs_conn *c, const char *account, billing_time_t at, bs_event_fn fn,
                             void *arg, bs_error *err);

/* bs_balance_input_free - free @in (NULL is fine). */
void bs_balance_input_free(bs_balance_input *in);

#endif
