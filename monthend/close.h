/*
 * close.h - the month-end close engine shared by `billing close` and
 * `billing rerate`: every account's month re-rated from the raw events
 * in the store through libbilling, in batches of accounts (memory
 * bounded by one batch per worker), by N worker threads with a
 * connection each, written as drafts (store/invoices.h).
 */
#ifndef BILLING_CLOSE_H
#define BILLING_CLOSE_H

#include <gmp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "billing.h"

/* Most worker threads (each holds one database connection). */
#define CLOSE_JOBS_MAX 64
/* Accounts per batch: one events query and one write transaction each. */
#define CLOSE_BATCH 256

typedef struct close_params {
    const char *db;     /* --db, or NULL */
    const char *book;   /* price book id */
    int year, month;    /* the period */
    int jobs;           /* 1..CLOSE_JOBS_MAX */
    int drafts_only;    /* rerate: only accounts that have a draft of the period */
    int full;           /* re-rate every account, even those whose close mark is unchanged */
    int progress;       /* PROGRESS_OFF, _LINES or _TERMINAL (progress.h) on stderr */
} close_params;

/* What a run did; amounts in minor units of @currency. */
typedef struct close_summary {
    char currency[4];
    int digits;
    size_t accounts;          /* accounts examined */
    size_t invoices;          /* accounts with an invoice for the period */
    size_t outcome[4];        /* by bs_draft_outcome */
    size_t skipped;           /* accounts not re-rated: close mark unchanged (in outcome too) */
    size_t adjustments;       /* prior-period adjustment lines written */
    uint64_t events;          /* events rated */
    uint64_t rejected;        /* events libbilling refused */
    int64_t dead_letters;     /* rejected_events received since the period began (anywhere) */
    mpz_t by_meter[BILLING_METER_COUNT]; /* line amounts per meter */
    mpz_t fees;               /* plan fee and refund lines (no meter) */
    mpz_t adjusted;           /* adjustment line amounts */
    mpz_t subtotal, credits, expired, tax, total;
} close_summary;

/*
 * close_run - close period @p into the store. Fills @s (initialised
 * here; free with close_summary_clear even on failure). Prints errors on
 * stderr. Returns a CLI_EXIT_* code.
 */
int close_run(const close_params *p, close_summary *s);

/* close_summary_clear - free the summary's numbers. */
void close_summary_clear(close_summary *s);

/* close_summary_print - the summary on @out, as `billing close` prints it. */
void close_summary_print(FILE *out, const close_params *p, const close_summary *s);

/*
 * close_parse_period - "YYYY-MM" into *@year, *@month. Returns 0, or -1
 * if malformed or outside 1900..2199.
 */
int close_parse_period(const char *text, int *year, int *month);


#endif /* BILLING_CLOSE_H */
