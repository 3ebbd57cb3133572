/*
 * invoices.h - month-end close in the store: the catalog read back from
 * the database, raw events streamed per batch of accounts, draft invoices
 * written from libbilling's invoices, finalization with gapless numbers,
 * voids with credit notes. doc/database.md, "Month-end close".
 *
 * Every function takes a connection that is not shared with another
 * thread (store.h). Strings handed in are borrowed for the call.
 */
#ifndef BILLING_STORE_INVOICES_H
#define BILLING_STORE_INVOICES_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"
#include "kindsums.h"
#include "parties.h"
#include "store.h"

/* Longest text of an invoice number ("INV-2026-000123"): prefix 32 + 20 digits. */
#define BS_NUMBER_TEXT_MAX 64

/*
 * bs_close_accounts - the ids of the accounts in @currency (every one,
 * or with @drafts_only only those with a draft invoice for @month,
 * "YYYY-MM-01"), in id order, as a JSON array text in *@out (caller
 * frees with free()). Returns BS_OK or an error.
 */
bs_status bs_close_accounts(bs_conn *c, const char *currency, const char *month, int drafts_only,
                            char **out, bs_error *err);

/*
 * bs_rejected_since - how many dead letters (billing.rejected_events)
 * were received at or after @since: events refused on the way in that
 * may belong to a period starting then, still waiting to be replayed.
 * Stores the count in *@count. Returns BS_OK or an error.
 */
bs_status bs_rejected_since(bs_conn *c, billing_time_t since, int64_t *count, bs_error *err);

/* bs_event_fn - receives each event of bs_events_fetch; non-zero stops with BS_ERR_INVALID. */
typedef int (*bs_event_fn)(void *arg, const char *account, const char *id, const char *resource,
                           const char *meter, billing_time_t start, billing_time_t end,
                           const char *quantity, const char *model, const char *region);

/*
 * bs_events_fetch - every stored raw event of the accounts in @accounts
 * (a JSON array of ids) that starts before @before, handed to @fn in no
 * particular order, streamed by one binary COPY (one row in memory at a
 * time) in a read-only transaction. Returns BS_OK, BS_ERR_INVALID when @fn
 * stopped or an instant is out of range, or a database error.
 */
bs_status bs_events_fetch(bs_conn *c, const char *accounts, billing_time_t before, bs_event_fn fn,
                          void *arg, bs_error *err);

/* A line of a prior month that reached the store after it was finalized. */
typedef struct bs_adjustment {
    int year, month;   /* the month it belongs to */
    const char *meter; /* "gpu", ... */
    const char *model; /* price key */
    const char *region;
    const char *price_version; /* label of the price version (that month's prices) */
    const char *quantity;      /* exact, "p/q" allowed */
    const char *unit;
    const char *unit_price;
    const char *amount; /* rounded to the minor unit */
} bs_adjustment;

/* One account's draft for the month being closed. */
typedef struct bs_draft {
    const billing_invoice *inv; /* the library's invoice of the month (borrowed) */
    const bs_adjustment *adj;   /* prior-period adjustment lines, or NULL */
    size_t n_adj;
    const char *subtotal; /* the invoice's figures including the adjustments */
    const char *tax;
    const char *total;
} bs_draft;

/* What became of a draft. */
typedef enum bs_draft_outcome {
    BS_DRAFT_NEW = 0,       /* created */
    BS_DRAFT_UPDATED = 1,   /* an open draft was recomputed with other content */
    BS_DRAFT_UNCHANGED = 2, /* an open draft had this exact content already */
    BS_DRAFT_FINALIZED = 3  /* the month is finalized for the account: left alone */
} bs_draft_outcome;

/*
 * bs_drafts_write - write the @n drafts of @d, all for month @month
 * ("YYYY-MM-01") of price book @book, for a batch of accounts @accounts
 * (JSON array; those without a draft in @d have no charges: an open
 * draft of theirs is emptied and voided, its ledger entries reversed),
 * in one transaction (retried on transient failures): per account, under an advisory lock that
 * serialises concurrent closes, a draft is created, recomputed (its old
 * lines and credits replaced, its ledger entries reversed) or left alone
 * when its content hash is unchanged or the month is finalized. Writes
 * lines, applied credits, and ledger entries: 'apply' per grant used,
 * 'expire' per grant that expired in the month. Drafts are numbered in
 * series @series (created if missing, prefix "@series-"). With @marks
 * (JSON, bs_close_marks_put) not NULL, the accounts' close marks are
 * recorded last in the same transaction. Fills @out[i].
 * Returns BS_OK or an error (nothing written).
 */
bs_status bs_drafts_write(bs_conn *c, const char *accounts, const char *book, const char *month,
                          const char *series, const bs_draft *d, size_t n, const char *marks,
                          bs_draft_outcome *out, bs_error *err);

/*
 * bs_returned_unclosed - credit a close of @month would return to grants
 * (refunds of terms paid with credit) that the ledger does not hold as
 * applied: the month that applied it is not closed yet. @returned is a
 * JSON array of {"a": account, "g": grant, "am": amount in major units}.
 * Entries of the account's own invoices and credit notes of @month do
 * not count (a re-close reverses a draft's). On the first such grant, *@account, *@grant
 * and *@open (the earliest month in the 24 before @month since the grant
 * with no invoice of the account, "YYYY-MM", or "" if every one has one)
 * are set (the caller frees them) and BS_OK returned; all three stay NULL
 * when every return is covered. Not thread-safe per connection.
 */
bs_status bs_returned_unclosed(bs_conn *c, const char *returned, const char *month, char **account,
                               char **grant, char **open, bs_error *err);

/*
 * bs_credit_history - the credit the issued months of the accounts of
 * @accounts (JSON array) took, for the close of month @month
 * ("YYYY-MM-01"): for each other month with a finalized invoice of
 * the account, one row with an empty grant and the account credit left
 * after that invoice, and one row per grant whose ledger entries of that
 * month's invoices and credit notes (a voided invoice and its credit note
 * cancel) do not net to zero, with what they took (minor units, net of
 * credit given back by refunds). Result columns: account_id, month
 * (YYYY-MM), grant_id ("" for the account credit row), amount (minor
 * units), in the order of @accounts, then month. Each account is probed
 * on its own; with no transaction open on @c the read runs in a read-only
 * transaction of its own with JIT off (inside the caller's, with the
 * caller's settings). Caller PQclears. NULL with @err on failure.
 */
PGresult *bs_credit_history(bs_conn *c, const char *accounts, const char *month, bs_error *err);

/*
 * bs_credit_history's SQL, for a caller that prepares it and sends it
 * with other statements in one round trip (balance.h's bs_balance_fetch):
 * its parameters are @accounts and @month.
 */
extern const char bs_credit_history_sql[];

/* How many months back a close looks for late usage of finalized months. */
#define BS_LATE_MONTHS 24

/* One row of bs_billed_lines, as text (an empty meter: a finalized month without lines). */
typedef struct bs_billed_line {
    const char *account, *month, *meter, *model, *region, *version;
    const char *unit_price, *quantity, *quantity_den;
} bs_billed_line;

/*
 * bs_billed_lines - the usage lines billed so far, per account and month
 * in the BS_LATE_MONTHS months before @month, of every finalized invoice of the accounts in @accounts
 * (JSON array) plus the adjustment lines that refer to those months in
 * finalized invoices or in drafts of other months than @month (the
 * draft being rebuilt does not count). Also one row with an empty meter
 * per finalized month, so that a month whose invoice has no usage line
 * is still checked. Result columns: account_id, month (YYYY-MM-01),
 * meter, model, region, version label, unit_price, quantity,
 * quantity_den, as the fields of bs_billed_line, in the order of
 * @accounts: *@out[0..*@n) in one allocation (the caller frees it with
 * free()). Each account is probed on its own; with no transaction open
 * on @c the read runs in a read-only transaction of its own with JIT off.
 * Returns BS_OK or an error (*@out NULL).
 */
bs_status bs_billed_lines(bs_conn *c, const char *accounts, const char *month, bs_billed_line **out,
                          size_t *n, bs_error *err);

/*
 * bs_finalize_month - number and freeze every draft invoice of @month
 * whose period ended at least @grace_seconds ago, in batches of 1 000 per
 * transaction, each numbered by one call of billing.finalize_invoices
 * (migrations 0013, 0021; numbers per series in account order, gapless). A
 * draft another finalizer or a close holds is waited for, and left alone
 * if it was numbered meanwhile. *@done gets how many this call finalized,
 * *@waiting how many drafts are still in their grace period. Returns
 * BS_OK or an error.
 */
bs_status bs_finalize_month(bs_conn *c, const char *month, int64_t grace_seconds, size_t *done,
                            size_t *waiting, bs_error *err);

/*
 * bs_invoice_find - the id of invoice @ref: an invoice number as printed
 * ("INV-2026-000123") or a numeric id. Returns BS_OK with *@id set,
 * BS_ERR_INVALID when there is none (message names @ref), or an error.
 */
bs_status bs_invoice_find(bs_conn *c, const char *ref, int64_t *id, bs_error *err);

/*
 * bs_invoice_void - void the finalized invoice @id for @reason and issue
 * its credit note in series "CN-YYYY" (year of today, UTC). Writes the
 * credit note's number into @cn_number (BS_NUMBER_TEXT_MAX bytes).
 * Returns BS_OK, BS_ERR_CONSTRAINT (not finalized), or an error.
 */
bs_status bs_invoice_void(bs_conn *c, int64_t id, const char *reason, char *cn_number,
                          bs_error *err);

/*
 * bs_invoice_refund - record that @amount (major units, as text: exact to
 * the currency's minor unit) of the account credit left after finalized
 * invoice @id was refunded to the payment method out of band, for
 * @reason (1..1024 bytes), under @reference (1..256 bytes, unique per
 * account: a retry with the same reference, invoice and amount records
 * nothing and returns the first credit note). Issues a credit note in
 * series "CN-YYYY" whose number goes into @cn_number
 * (BS_NUMBER_TEXT_MAX bytes); *@replayed is 1 when the reference had
 * been recorded already. Later closes start from the account credit less
 * the refund (doc/pricing.md, "Account credit: keep it or refund it");
 * the later months of the account that have a draft, written before it,
 * go into @stale ("YYYY-MM YYYY-MM", empty when none; @stale_size bytes,
 * cut to fit).
 * Returns BS_OK, BS_ERR_INVALID (bad argument), BS_ERR_CONSTRAINT (not a
 * finalized invoice, not the account's last finalized month, more than
 * the account credit available, a reference reused; the message names
 * the invoice and the figures), or an error. Blocks on the account's
 * close lock. Not thread-safe on one connection.
 */
bs_status bs_invoice_refund(bs_conn *c, int64_t id, const char *amount, const char *reason,
                            const char *reference, char *cn_number, int *replayed, char *stale,
                            size_t stale_size, bs_error *err);

/* Money sums of a set of invoices, exact text in major units. */
typedef struct bs_money_totals {
    const char *subtotal, *credits, *tax, *total;
} bs_money_totals;

/*
 * bs_invoice_finalized_sums - what the finalized invoices of @month
 * ("YYYY-MM-01") in @currency billed, for a close that left them alone:
 * @fn gets each kind of line with its sums; *@totals (one struct, freed
 * with free()) the subtotal, credits, tax and total. Returns BS_OK, or an
 * error with *@totals NULL.
 */
bs_status bs_invoice_finalized_sums(bs_conn *c, const char *month, const char *currency,
                                    bs_kind_sum_fn fn, void *arg, bs_money_totals **totals,
                                    bs_error *err);

/* One row of bs_invoice_list: an invoice's figures, as text. */
typedef struct bs_invoice_summary {
    const char *id, *number, *account, *kind, *period, *status, *currency;
    const char *subtotal, *credits, *tax, *total, *series, *corrects;
    /*
     * Credit returned to grants, minus account credit applied, plus what
     * was carried to account credit: subtotal - credits +
     * account_credit_net + tax = total.
     */
    const char *account_credit_net;
} bs_invoice_summary;

/*
 * bs_invoice_list - invoices matching the filters (NULL: any): @month
 * "YYYY-MM-01", @account, @status, @series; ordered by month, account,
 * id; at most @limit rows, into *@out[0..*@n) (one allocation: the
 * caller frees it with free()). Returns BS_OK or an error (*@out NULL).
 */
bs_status bs_invoice_list(bs_conn *c, const char *month, const char *account, const char *status,
                          const char *series, long limit, bs_invoice_summary **out, size_t *n,
                          bs_error *err);

/* What bs_invoice_search selects: NULL (or 0) for any. */
typedef struct bs_invoice_filter {
    const char *month; /* "YYYY-MM-01" */
    const char *account;
    const char *status; /* draft, finalized, void */
    const char *kind;   /* invoice, credit_note */
    const char *number; /* as printed ("INV-2026-000123") */
    int64_t after;      /* only ids above it (paging; 0: from the first) */
    long limit;         /* at most this many rows */
} bs_invoice_filter;

/*
 * bs_invoice_search - invoices matching @f, in id order, into
 * *@out[0..*@n) as bs_invoice_list returns them (one allocation: the
 * caller frees it with free()). Returns BS_OK or an error (*@out NULL).
 */
bs_status bs_invoice_search(bs_conn *c, const bs_invoice_filter *f, bs_invoice_summary **out,
                            size_t *n, bs_error *err);

/*
 * bs_invoice_lines - lines of invoice @id in order. Columns: line_no,
 * kind, meter, model, region, plan_id, version label, adjusts_month,
 * quantity, quantity_den, unit, unit_price, amount. Caller PQclears.
 */
PGresult *bs_invoice_lines(bs_conn *c, int64_t id, bs_error *err);

/* bs_invoice_credits - credits applied on invoice @id: grant_id, amount. Caller PQclears. */
PGresult *bs_invoice_credits(bs_conn *c, int64_t id, bs_error *err);

/*
 * bs_invoice_grants - the credit grants of invoice @id's account and
 * currency granted before its period ended, with what the invoice
 * applied, returned (refunds), expired of each and the grant's remaining
 * balance as of the invoice (after it and every invoice or credit note of
 * earlier months), in major units; grants with all four zero left out.
 * Columns: grant_id, applied, returned, expired, remaining. Caller PQclears.
 */
PGresult *bs_invoice_grants(bs_conn *c, int64_t id, bs_error *err);

/* Most invoices bs_invoice_read_set takes at once. */
#define BS_INVOICE_SET_MAX 256

/* ---------------------------------------------------------------------- */
/* Typed reads of stored invoices, for their documents (documents/document.h) */
/* ---------------------------------------------------------------------- */

/*
 * One stored invoice's header: every field as text, "" when it has none.
 * Amounts in major units with the currency's digits; instants in the
 * account's zone as RFC 3339 with offset; dates "YYYY-MM-DD".
 */
typedef struct bs_invoice_head {
    const char *id, *number, *account, *kind, *period, *status, *currency;
    const char *subtotal, *credits, *tax, *total, *series;
    const char *corrects;                  /* number of the invoice a credit note credits */
    const char *period_start, *period_end; /* instants, end exclusive */
    const char *tax_rate, *time_zone, *finalized_at, *void_reason, *account_name;
    const char *credit_returned, *account_credit, *carried, *account_credit_left;
    const char *before_credit, *taxable, *credit_remaining;
    const char *account_credit_refunded, *refund_tax, *refunded_total; /* refund credit notes */
    const char *refund_method, *refund_reason, *refund_reference;
    const char *corrects_reason;            /* void reason of the invoice a credit note credits */
    const char *period_first, *period_last; /* the period's first and last day, account zone */
    const char *issue_date;                 /* day of finalization, account zone ("" for drafts) */
    const char *due_date; /* issue_date + the issuer's payment terms (30 without one) */
    const char *book;     /* price book of its lines (the only book when none) */
    bs_party customer;    /* store/parties.h: the account as its documents name it */
} bs_invoice_head;

/* One line of a stored invoice (text as bs_invoice_lines returns it). */
typedef struct bs_invoice_line {
    const char *line, *kind, *meter, *model, *region, *plan, *price_version, *adjusts_period;
    const char *quantity, *quantity_den; /* exact: numerator and denominator */
    const char *unit, *unit_price, *amount;
    /* A refund's unused span, RFC 3339 UTC as billing_time_format writes it; "" otherwise. */
    const char *unused_from, *unused_to;
    const char *unused_from_local; /* unused_from in the account's zone, "YYYY-MM-DD HH:MM"; "" */
    /* Display names (migration 0018) in the account's language, else English; "" for none. */
    const char *model_name, *region_name, *plan_name;
} bs_invoice_line;

/* What an invoice did to a credit grant, and what is left of it (bs_invoice_grants). */
typedef struct bs_invoice_grant {
    const char *grant, *applied, *returned, *expired, *remaining;
} bs_invoice_grant;

/* A stored invoice: header, lines in order, grants in application order. One allocation. */
typedef struct bs_invoice_rows {
    bs_invoice_head head;
    const bs_invoice_line *lines;
    size_t n_lines;
    const bs_invoice_grant *grants;
    size_t n_grants;
} bs_invoice_rows;

/*
 * bs_invoice_read - invoice @id into *@out (free with bs_invoice_rows_free).
 * Returns BS_OK, BS_ERR_INVALID when there is none, or a database error
 * (*@out NULL).
 */
bs_status bs_invoice_read(bs_conn *c, int64_t id, bs_invoice_rows **out, bs_error *err);

/*
 * bs_invoice_read_set - the @n invoices @ids (at most BS_INVOICE_SET_MAX)
 * into @out[0..n), in three statements for them all, each as
 * bs_invoice_read reads it. Returns BS_OK, or BS_ERR_INVALID when one of
 * them does not exist, or a database error (then every @out is NULL).
 */
bs_status bs_invoice_read_set(bs_conn *c, const int64_t *ids, size_t n, bs_invoice_rows **out,
                              bs_error *err);

/* bs_invoice_rows_free - free a result of bs_invoice_read (NULL allowed). */
void bs_invoice_rows_free(bs_invoice_rows *rows);

#endif /* BILLING_STORE_INVOICES_H */
