/*
 * kindsums.h - sums of invoice lines by kind, the one query shape the
 * close's summary reads from drafts (closemarks.c) and from finalized
 * invoices (invoices.c). Below both, so that neither file uses the other
 * for it (issue 24, tests/check-circles.sh).
 */
#ifndef BILLING_STORE_KINDSUMS_H
#define BILLING_STORE_KINDSUMS_H

#include <stdint.h>

#include "store.h"

/*
 * One kind of line and its sums: the meter's name, '' (plan fees and
 * refunds) or 'adjustment'; the amount (major units, exact text) and the
 * number of lines.
 */
typedef void (*bs_kind_sum_fn)(void *arg, const char *kind, const char *amount, int64_t lines);

/*
 * bs_kind_sums - for store modules: run @sql, whose rows are (kind,
 * amount, line count), and hand each row to @fn. Returns BS_OK or the
 * error.
 */
bs_status bs_kind_sums(bs_conn *c, const char *sql, int nparams, const char *const *params,
                       bs_kind_sum_fn fn, void *arg, bs_error *err);

#endif /* BILLING_STORE_KINDSUMS_H */
