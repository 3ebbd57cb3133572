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

#include "dbcatalog.h"
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

#endif
