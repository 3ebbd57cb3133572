/*
 * history.h - an account's credit as issued, for the month-end close: not
 * part of the public API, not exported, not installed (reached by programs
 * linked with libbilling's objects statically, like takeback.h).
 *
 * Invoices replay credit from an account's first month with charges. The
 * store's close computes a month whose earlier months were issued already:
 * their credit is history, held by the ledger, and a late event of such a
 * month must not change what credit later months may use. The close
 * therefore tells the rater what each issued month took, and the replay
 * takes that instead of re-rating them; months never issued are replayed.
 */
#ifndef BILLING_HISTORY_H
#define BILLING_HISTORY_H

#include <stddef.h>

#include "billing.h"

/* One figure of an issued month: what it took from a grant, or the account credit after it. */
typedef struct bl_issued_row {
    int year;
    int month;          /* local month of the account */
    const char *grant;  /* a grant of the account; NULL: @amount is the account credit left */
    const char *amount; /* minor units, a decimal integer (a grant's may be negative) */
} bl_issued_row;

/*
 * bl_rater_credit_issued - the months of @account whose invoices were
 * issued, and what each took from the account's grants (apply and expire,
 * less what its refunds gave back: the net of its ledger entries) and
 * left of the account credit, as @n rows in any order. When invoices
 * replay credit, each such month takes from the grants what is given
 * (every grant not named took nothing; a remainder never goes below
 * zero) instead of what re-rating it now would, and the account credit
 * after it is the given one when a row names it; months not named are
 * replayed as always (refunds still find what credit paid of a fee). The
 * invoice of a month before an issued one (a month issued again after
 * later months were) may spend only what the later issued months left.
 * Replaces what an earlier call gave for the account (@n 0: none).
 * Returns BILLING_OK; BILLING_ERR_UNKNOWN_ACCOUNT, BILLING_ERR_INVALID (an
 * unknown grant or a malformed amount, named in @errbuf), BILLING_ERR_RANGE
 * (a month) or BILLING_ERR_NOMEM, with nothing given. Not thread-safe
 * per rater (like every rater call).
 */
billing_status bl_rater_credit_issued(billing_rater *r, const char *account, size_t n,
                                      const bl_issued_row *rows, char *errbuf, size_t errsize);

#endif /* BILLING_HISTORY_H */
