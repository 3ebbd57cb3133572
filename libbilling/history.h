/*
 * history.h - an account's credit as issued, for the month-end close: not
 * part of the public API, not exported, not installed (reached by programs
 * linked with libbilling's objects statically, like takeback.h).
 *
 * Invoices replay credit from an account's first month with charges. The
 * store's close computes a month whose earlier months were issued already:
 * their credit is history, held by the ledger, and a late event of such a
 * month (or a month voided and issued again) must not change what credit
 * later months may use. The close therefore gives the rater the state the
 * ledger holds before the month it closes, and the replay takes it there.
 */
#ifndef BILLING_HISTORY_H
#define BILLING_HISTORY_H

#include <stddef.h>

#include "billing.h"

/*
 * bl_rater_credit_pin - the credit state of @account after local month
 * @year-@month, as issued: grant @grants[i] has @remaining[i] minor units
 * left (a decimal integer, >= 0) for i < @n, and the account credit is
 * @account_credit minor units (NULL: as the replay computes it). Invoices
 * of later months replay up to that month as always (refunds still find
 * what credit paid of a fee), then continue from this state; grants not
 * named keep the replay's remainder. Replaces an earlier pin of the
 * account. Returns BILLING_OK; BILLING_ERR_UNKNOWN_ACCOUNT,
 * BILLING_ERR_INVALID (an unknown grant or a malformed amount, named in
 * @errbuf), BILLING_ERR_RANGE (month) or BILLING_ERR_NOMEM, with nothing
 * changed. Not thread-safe per rater (like every rater call).
 */
billing_status bl_rater_credit_pin(billing_rater *r, const char *account, int year, int month,
                                   size_t n, const char *const *grants,
                                   const char *const *remaining, const char *account_credit,
                                   char *errbuf, size_t errsize);

#endif /* BILLING_HISTORY_H */
