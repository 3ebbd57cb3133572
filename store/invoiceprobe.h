/*
 * invoiceprobe.h - how the store's statements find one account's invoice
 * of a month (private to store/).
 *
 * BS_SQL_INVOICE_PROBE(acc, month, statuses): the condition on invoice
 * alias `i` of account @acc (an SQL expression), month @month (a
 * parameter such as "$1", cast to date) and kind 'invoice', status among
 * @statuses (an SQL list such as "'draft', 'finalized'"). Month and
 * status are compared through expressions that no index can take, so
 * that only the indexes leading with the account (invoices_one_open_draft,
 * invoices_account_month: one row per month of the account) can serve
 * the look-up. With plain `i.month = $1 AND i.status = ...`, while
 * invoices had no statistics (a first close fills it faster than
 * autovacuum analyzes it), the planner took invoices_month_status
 * (month, status) and read every invoice of the month for each account:
 * three batches of a 100 000-account close took 18 s each
 * (doc/performance.md, "Month-end close", branch h36).
 */
#ifndef BILLING_STORE_INVOICEPROBE_H
#define BILLING_STORE_INVOICEPROBE_H

#define BS_SQL_INVOICE_PROBE(acc, month, statuses)                                      \
    "i.account_id = " acc " AND (i.month + 0) = " month "::date AND i.kind = 'invoice'" \
    " AND (i.status || '') IN (" statuses ")"

#endif
