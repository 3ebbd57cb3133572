/*
 * closemarks.h - what a re-close needs to know which accounts changed
 * since their draft was computed (migration 0016; doc/database.md, "Close
 * marks"): each account's close mark now against the stored one, the
 * marks written with the drafts, and what the drafts of the accounts a
 * close did not re-rate add to its summary.
 *
 * Not thread-safe: one call at a time per connection.
 */
#ifndef BILLING_STORE_CLOSEMARKS_H
#define BILLING_STORE_CLOSEMARKS_H

#include <stddef.h>
#include <stdint.h>

#include "kindsums.h"
#include "store.h"

/* A mark as text: 32 hex digits and the terminator. */
#define BS_MARK_TEXT 33
/* Longest sum text of bs_mark_sums. */
#define BS_SUM_TEXT 128

/* The accounts of a close, in id order, with their marks. */
typedef struct bs_close_marks {
    size_t n;
    char **id;                  /* account ids */
    char (*mark)[BS_MARK_TEXT]; /* each account's mark now */
    unsigned char *same;        /* 1: equal to the stored mark, its draft is current */
} bs_close_marks;

/*
 * bs_close_marks_read - the accounts in the currency of price book @book (with @drafts_only,
 * those with an open draft of @month, "YYYY-MM-01"), each with its close
 * mark for @month under @book and program version @version,
 * and whether that equals the mark stored by the close that wrote its
 * draft (billing.close_marks_compare). Into *@out (free with
 * bs_close_marks_free). Read before anything the close rates from, so a
 * change made during the close leaves a mark older than the draft: the
 * next close re-rates it. Returns BS_OK or the error.
 */
bs_status bs_close_marks_read(bs_conn *c, const char *book, const char *month, const char *version,
                              int drafts_only, bs_close_marks **out, bs_error *err);

/* bs_close_marks_free - free; NULL is a no-op. */
void bs_close_marks_free(bs_close_marks *m);

/*
 * bs_close_marks_put - record, in the current transaction (that of the
 * drafts, under their accounts' locks), the marks @marks of month @month:
 * a JSON array of {"a": account, "m": mark, "e": events rated, "r":
 * events refused, "x": credit expired (major units)}. Each row notes the
 * period's invoice the account has now (draft or finalized), if any.
 * Returns BS_OK or the error.
 */
bs_status bs_close_marks_put(bs_conn *c, const char *marks, const char *month, bs_error *err);

/* What the drafts of accounts a close did not re-rate hold. */
typedef struct bs_mark_sums {
    int64_t drafts;    /* accounts with an open draft of the month */
    int64_t finalized; /* accounts whose invoice of the month is finalized */
    int64_t events;    /* events rated, refused (as recorded with their marks) */
    int64_t rejected;
    char expired[BS_SUM_TEXT]; /* credit expired in the drafts, major units */
    char subtotal[BS_SUM_TEXT], credits[BS_SUM_TEXT], tax[BS_SUM_TEXT], total[BS_SUM_TEXT];
} bs_mark_sums;

/*
 * bs_close_marks_sums - the summary figures of the accounts @accounts (a
 * JSON array of ids) for month @month, read from their stored drafts and
 * marks: @fn gets the line sums per kind of the drafts, *@out the rest.
 * Returns BS_OK or the error.
 */
bs_status bs_close_marks_sums(bs_conn *c, const char *accounts, const char *month,
                              bs_kind_sum_fn fn, void *arg, bs_mark_sums *out, bs_error *err);

#endif /* BILLING_STORE_CLOSEMARKS_H */
