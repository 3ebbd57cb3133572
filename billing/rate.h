/*
 * rate.h - the offline rater behind `billing rate`, as its command sees
 * it: the options of a run and rate_run. The run owns its state
 * (rate_ctx.h, private to the rate_*.c files); the files, each using only
 * those below it:
 *
 *   rate_run.c       the run: catalogs and raters loaded, reading, output
 *   rate_output.c    choosing the invoices and printing them (JSON, table, CSV)
 *   rate_balance.c   the credit report of --at
 *   rate_resources.c --by resource: an account's events rated per resource
 *   rate_report.c    the counts (JSON summary, text lines), JSON to stdout
 *   rate_parallel.c  reading and rating on -j N threads
 *   rate_read.c      reading and rating on one thread
 *   rate_repeats.c   repeated event ids taken back after the last file
 *   rate_ctx.c       the state: an account's book, temporary files, accounts in order
 *   rate_inputs.c    which inputs: the user's, or the shipped example
 *   rate_accounts.c, rate_prices.c, rate_credit.c: what the files say
 *     that the catalog does not keep (zones, prices as written, events
 *     running at --at); dedupe.c, rejects.c, progress.c below them all.
 */
#ifndef BILLING_RATE_H
#define BILLING_RATE_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"
#include "eventio.h"

#define ERR_MAX 1024
#define PATH_LEN 4096
/* Longest --from/--to range printed in full for one account: 100 years. */
#define RANGE_MONTHS_MAX 1200
#define NO_MONTH INT32_MIN
#define DEDUPE_MEMORY_DEFAULT (64u * 1024u * 1024u)
/* Most threads for -j: far more than the work can use, a bound on what a typo costs. */
#define JOBS_MAX 64
/*
 * Bytes of input per chunk with -j: large enough that handing a chunk over
 * costs nothing next to rating it (about 20 000 JSON events), small enough
 * that the ids a chunk keeps for the dedupe (about 40 bytes an event) stay
 * a few MiB. --chunk-bytes changes it (tests cut odd chunks).
 */
#define CHUNK_BYTES_DEFAULT ((uint64_t)4 << 20)
#define CHUNK_BYTES_MAX ((uint64_t)1 << 30)

typedef enum { OUT_JSON, OUT_TABLE, OUT_CSV } out_format;

/* Most price books in one run (each its own currency, catalog and rater). */
#define BOOKS_MAX 16

typedef struct rate_opts {
    const char *pricebook;           /* the first --pricebook's file, or the example's */
    const char *book_ids[BOOKS_MAX]; /* --pricebook ID=FILE: ID (NULL for a plain FILE) */
    const char *book_paths[BOOKS_MAX];
    char book_id_buf[BOOKS_MAX][130]; /* the ids, copied out of the arguments */
    int n_books;
    const char *accounts;
    char **files;
    int n_files;
    out_format output;
    int input_format_set;
    bc_format input_format;
    int32_t from; /* year * 12 + month - 1, or NO_MONTH */
    int32_t to;
    const char *account;
    int strict;
    int dedupe;
    size_t dedupe_memory;
    const char *temp_dir;
    int verbose;
    const char *thousands; /* --thousands, or NULL: the locale's (terminals) or none */
    int layout;            /* LAYOUT_* */
    int exact;             /* --exact */
    const char *rejects;   /* --rejects FILE, or NULL */
    int progress;          /* progress on a terminal (--no-progress clears it) */
    int at_set;            /* --at given: print the credit report, not invoices */
    int by_resource;       /* --by resource */
    int jobs;              /* -j: threads reading and rating (1: the sequential path) */
    uint64_t chunk_bytes;  /* --chunk-bytes: input per chunk with -j */
    billing_time_t at;
} rate_opts;

/* Table layout: compact on a terminal, full (every column, stable) otherwise. */
enum { LAYOUT_AUTO, LAYOUT_COMPACT, LAYOUT_FULL };

/*
 * rate_run - one run of `billing rate` with the options @o (checked by
 * the command line; no files given: the shipped example): read and rate
 * every event file, print the invoices or the credit report on stdout and
 * the messages on stderr. Returns the exit code billing(1) documents
 * (CLI_EXIT_*).
 */
int rate_run(const rate_opts *o);

#endif /* BILLING_RATE_H */
