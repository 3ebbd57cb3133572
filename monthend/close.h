/*
 * close.h - the month-end close engine shared by `billing close` and
 * `billing rerate`: every account's month re-rated from the raw events
 * in the store through libbilling, in batches of accounts (memory
 * bounded by one batch per worker), by N worker threads with a
 * connection each, written as drafts (store/invoices.h). A library
 * below the tool: it returns a status and a result object and reports
 * messages and progress through callbacks; it never prints or exits, so
 * a server can call it too.
 */
#ifndef MONTHEND_CLOSE_H
#define MONTHEND_CLOSE_H

#include <gmp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "billing.h"
#include "invoices.h" /* bs_draft_outcome */

/* Most worker threads (each holds one database connection). */
#define CLOSE_JOBS_MAX 64
/* Accounts per batch: one events query and one write transaction each. */
#define CLOSE_BATCH 1024

/* How a close ended; the tool maps each to an exit code (billing(1)). */
typedef enum close_status {
    CLOSE_OK = 0,       /* closed */
    CLOSE_REJECTED,     /* closed, but libbilling refused stored events (counted in the result) */
    CLOSE_ERR_INPUT,    /* the stored catalog is invalid, or the database refused a change */
    CLOSE_ERR_INTERNAL, /* out of memory, or a worker thread could not start */
    CLOSE_ERR_DATABASE  /* the database is unreachable, failing, or at the wrong schema version */
} close_status;

/* What a message of a run (close_note_fn) is about. */
typedef enum close_note_kind {
    CLOSE_NOTE_REJECTED, /* a stored event libbilling refused (the first CLOSE_REJECT_NOTES only) */
    CLOSE_NOTE_WARNING,  /* the run goes on: something the operator should know */
    CLOSE_NOTE_ERROR     /* why the run fails (the first one is also in close_result.error) */
} close_note_kind;

/* Rejected events reported through close_note_fn per run; all are counted. */
#define CLOSE_REJECT_NOTES 20

/*
 * close_note_fn - a message of a run, as it happens: @text names the
 * account, event or store error ("close: event 'e1': ..."), without a
 * program name or newline. Called by the workers one at a time (under
 * the run's lock): it must not call the engine.
 */
typedef void (*close_note_fn)(void *arg, close_note_kind kind, const char *text);

/* Where a run is (close_progress_fn). */
typedef enum close_phase {
    CLOSE_PHASE_START,  /* the accounts to re-rate are known: @total */
    CLOSE_PHASE_UPDATE, /* about four times a second while workers run */
    CLOSE_PHASE_END     /* the workers are done */
} close_phase;

/*
 * close_progress_fn - progress of a run: @done of @total accounts
 * re-rated so far, @events rated in the period. Called on the thread of
 * close_run, under the run's lock: it must not call the engine.
 */
typedef void (*close_progress_fn)(void *arg, close_phase phase, size_t done, size_t total,
                                  uint64_t events);

typedef struct close_params {
    const char *db;   /* libpq conninfo (bs_conninfo), or NULL for the environment's */
    const char *book; /* price book id */
    int year, month;  /* the period */
    int jobs;         /* 1..CLOSE_JOBS_MAX */
    int drafts_only;  /* rerate: only accounts that have a draft of the period */
    int full;         /* re-rate every account, even those whose close mark is unchanged */
    int progress;     /* the caller's own (the tool's PROGRESS_* mode); not read by the engine */
    close_progress_fn on_progress; /* or NULL */
    close_note_fn on_note;         /* or NULL */
    void *arg;                     /* handed to both */
} close_params;

/* What a run did: the summary `billing close` prints. Amounts in minor units of @currency. */
typedef struct close_result {
    int year, month; /* the period */
    char currency[4];
    int digits;
    size_t accounts;      /* accounts examined */
    size_t invoices;      /* accounts with an invoice for the period */
    size_t outcome[4];    /* by bs_draft_outcome */
    size_t skipped;       /* accounts not re-rated: close mark unchanged (in outcome too) */
    size_t adjustments;   /* prior-period adjustment lines written */
    size_t warnings;      /* CLOSE_NOTE_WARNING messages */
    uint64_t events;      /* events rated */
    uint64_t rejected;    /* events libbilling refused */
    int64_t dead_letters; /* rejected_events received since the period began (anywhere) */
    mpz_t by_meter[BILLING_METER_COUNT]; /* line amounts per meter */
    mpz_t fees;                          /* plan fee and refund lines (no meter) */
    mpz_t adjusted;                      /* adjustment line amounts */
    mpz_t subtotal, credits, expired, tax, total;
    size_t finalized; /* close_finalize: drafts numbered and frozen */
    size_t waiting;   /* close_finalize: drafts still in their grace period */
    char error[1024]; /* the first CLOSE_NOTE_ERROR of a failed run, else "" */
} close_result;

/*
 * close_run - close period @p into the store: every account's draft of
 * the month (re-rated, or kept when its close mark is unchanged), with
 * the workers, connections and memory bounds above. Fills @r
 * (initialised here; free with close_result_clear even on failure; its
 * figures are complete only for CLOSE_OK and CLOSE_REJECTED). Never
 * prints: messages go to @p->on_note, progress to @p->on_progress.
 * Returns CLOSE_OK, CLOSE_REJECTED (done; some events refused, counted),
 * or an error status with the reason in @r->error. No global state of
 * its own: runs with their own @p and @r may go on at once, in threads
 * or processes (concurrent closes of one period: tests/itest_close.c).
 */
close_status close_run(const close_params *p, close_result *r);

/*
 * close_finalize - number (gaplessly, per series) and freeze the drafts
 * of period @p whose period ended at least @grace seconds ago
 * (bs_finalize_month), as `billing close --finalize` does after a close:
 * @r->finalized and @r->waiting (initialised here; free with
 * close_result_clear; its other figures stay zero). Never prints:
 * messages go to @p->on_note. Returns CLOSE_OK or an error status with
 * the reason in @r->error.
 */
close_status close_finalize(const close_params *p, int64_t grace, close_result *r);

/* close_result_clear - free the result's numbers. */
void close_result_clear(close_result *r);

/*
 * close_parse_period - "YYYY-MM" into *@year, *@month. Returns 0, or -1
 * if malformed or outside 1900..2199.
 */
int close_parse_period(const char *text, int *year, int *month);

#endif /* MONTHEND_CLOSE_H */
