/*
 * rate_ctx.h - the state of one run of `billing rate` and the steps of
 * the rate_*.c files (private to them; the command sees rate.h alone).
 * rate.h maps the files.
 */
#ifndef BILLING_RATE_CTX_H
#define BILLING_RATE_CTX_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "billing.h"
#include "billing_config.h"
#include "dedupe.h"
#include "eventio.h"
#include "progress.h"
#include "rate.h"
#include "rate_accounts.h"
#include "rate_credit.h"
#include "rate_prices.h"
#include "rejects.h"
#include "render.h"

typedef struct rate_counts {
    uint64_t read;
    uint64_t rated;
    uint64_t duplicates;
    uint64_t rejected;
    uint64_t subs_rejected; /* subscriptions of the accounts file left out */
    uint64_t after_at;      /* with --at: events starting at or after it, not rated */
} rate_counts;

/* An event file, as the dedupe needs to know it. */
struct source {
    char *name; /* in messages */
    bc_format format;
    int reread;     /* a regular file: events are read again, not kept */
    struct stat st; /* ... and what it was, to notice a change */
    int fd;         /* open to read events again, or -1 */
};

/* One price book: its catalog (with the accounts naming it) and its rater. */
typedef struct rate_book {
    const char *id; /* NULL when only one book is given */
    const char *path;
    billing_catalog *cat;
    billing_rater *rater;
    rate_prices *prices; /* its prices as written, for tables */
} rate_book;

/* Invoice totals of one currency, for the summary of a run with several books. */
typedef struct rate_total {
    char currency[8];
    uint64_t invoices;
    char total[64];
} rate_total;

/* --by resource: one rater per resource of the account being printed. */
typedef struct rate_resources {
    size_t n;
    char **names;
    billing_rater **raters;
} rate_resources;

typedef struct rate_ctx {
    rate_opts opts;
    rate_counts counts;
    rate_book books[BOOKS_MAX];
    int n_books;
    billing_catalog *cat; /* the book of the account at hand (rate_use_account) */
    billing_rater *rater;
    rate_total totals[BOOKS_MAX];
    int n_totals;
    billing_config_zones *zones;
    billing_event *ev;
    rate_accounts *accinfo;
    rate_rejects *rejects;
    progress prog;
    rate_running *running; /* with --at: the events running at that instant */
    rate_running *kept;    /* with --by resource: every event rated */
    rate_resources res;    /* ... rated again per resource, for the account being printed */
    render_view view;
    char thousands[8];
    rate_dedupe *dedupe;
    /* -j: the thread closing the workers' dedupe files while invoices are written (teardown joins it) */
    pthread_t reaper;
    int reaper_started;
    uint32_t src;        /* index of the file being read */
    struct source *srcs; /* per file */
    int open_fds;        /* files open to read events again */
    char example_dir[PATH_LEN];
    char example_pricebook[PATH_LEN];
    char example_accounts[PATH_LEN];
    char example_events[PATH_LEN];
    char *example_argv[2];
} rate_ctx;

/* rate_use_account - make c->cat and c->rater those of @account's book (the first if unknown). */
void rate_use_account(rate_ctx *c, const char *account);

typedef int (*rate_account_fn)(rate_ctx *c, const char *account, void *arg);

/*
 * rate_for_each_account - call @fn on each account to print (all, or the
 * one of --account), book by book in --pricebook order, accounts in id
 * order, with c->cat and c->rater set to its book's.
 */
int rate_for_each_account(rate_ctx *c, rate_account_fn fn, void *arg);

/* rate_check_inputs - the inputs given, or the example for none; an exit code. */
int rate_check_inputs(rate_ctx *c);

/* rate_temp_dir - where temporary files go: --temp-dir, $TMPDIR or /tmp. */
const char *rate_temp_dir(const rate_opts *o);

/*
 * rate_parallel_ok - whether the run can read and rate on c->opts.jobs
 * threads (rate_parallel.c): more than one job, one price book, regular
 * files only, no --strict, --at or --by resource.
 */
int rate_parallel_ok(const rate_ctx *c);

/*
 * rate_parallel - rate_sequential on c->opts.jobs threads: every event file read
 * and rated, repeats taken back, with the messages, counts and --rejects
 * one thread gives, in the same order; the threads' totals end up in the
 * book's rater. Returns an exit code.
 */
int rate_parallel(rate_ctx *c);

/* rate_repeats.c */

/* rate_fetch - a rate_dedupe_fetch_fn (@arg: the rate_ctx): read an event again from its file. */
int rate_fetch(void *arg, const rate_dedupe_where *w, const char *id, unsigned char *buf,
               size_t *len, char *err, size_t errsize);

/* rate_take_back - a rate_dedupe_fn (@arg: the rate_ctx): take a later occurrence back. */
int rate_take_back(void *arg, const rate_dedupe_hit *hit);

/*
 * rate_take_back_repeats - after the last file, find every id rated more
 * than once among the records of @sets and keep only its first
 * occurrence, through @fetch and @fn (rate_fetch and rate_take_back, or
 * wrappers of them) with @arg; with --verbose, say how the dedupe went.
 * Returns an exit code.
 */
int rate_take_back_repeats(rate_ctx *c, rate_dedupe *const *sets, size_t n_sets,
                           rate_dedupe_fetch_fn fetch, rate_dedupe_fn fn, void *arg);

/*
 * rate_sequential - read and rate every event file on this thread, then
 * take back repeats (rate_read.c); an exit code.
 */
int rate_sequential(rate_ctx *c);

enum { CUT_KEEP, CUT_AFTER, CUT_ERROR };

/* rate_cut_at - with --at, an event as of that instant: CUT_KEEP, CUT_AFTER or CUT_ERROR. */
int rate_cut_at(rate_ctx *c, billing_event *ev, char *err, size_t errsize);

/* rate_close_rejects - close the --rejects file, saying where they went; an exit code. */
int rate_close_rejects(rate_ctx *c);

/*
 * rate_resources_build - rate the kept events of @account again, one
 * rater per resource, into @rr (freed with rate_resources_free). Returns
 * an exit code (message printed).
 */
int rate_resources_build(rate_ctx *c, const char *account, rate_resources *rr);

/* rate_resources_free - free what rate_resources_build made; empty is a no-op. */
void rate_resources_free(rate_resources *rr);

/* rate_print_credit - the --at credit report, as JSON or a table; an exit code. */
int rate_print_credit(rate_ctx *c);

/* rate_summary_json - the counts as the JSON "summary" object; NULL when out of memory. */
json_t *rate_summary_json(const rate_ctx *c);

/* rate_dump_json - @root on stdout, two-space indented, keys in order; an exit code. */
int rate_dump_json(json_t *root);

/* rate_print_counts - the counts as text lines on @out. */
void rate_print_counts(FILE *out, const rate_counts *n);

/*
 * rate_print_invoices - the chosen invoices and the counts on stdout, as
 * JSON, tables or CSV (counts on stderr then); an exit code.
 */
int rate_print_invoices(rate_ctx *c);

#endif /* BILLING_RATE_CTX_H */
