/*
 * rate_run.c - one run of `billing rate` (rate.h): the state it owns
 * (rate_ctx.h) made from the options, the catalogs and raters loaded,
 * every event file read and rated (on one thread, rate_read.c, or on
 * several, rate_parallel.c), and the invoices or the credit report
 * printed (rate_output.c, rate_balance.c).
 *
 * Every record read ends up in exactly one count of the summary (rated,
 * duplicate or rejected), and every rejected one in a message on stderr
 * that names the file, the line or offset, the event and the field.
 *
 * Dedupe with memory independent of the event count: every event is
 * rated as it is read (the rater's own id set is off), and remembered in
 * a bounded external sort (billing/dedupe.h) by id and place. After the
 * last file, the later occurrences of each id are read again from their
 * files (or from the sort, for stdin and pipes) and taken back out of the
 * rater (billing_rater_take_back, unchecked: the rater keeps no ids):
 * counted as duplicates when identical to the first, rejected as
 * conflicts otherwise (rate_repeats.c).
 */
#include "config.h"

#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "billing.h"
#include "billing_config.h"
#include "cli.h"
#include "rate_ctx.h"

static int account_known(const rate_ctx *c, const char *id)
{
    const billing_rater *r;
    size_t i;
    int b;

    for (b = 0; b < c->n_books; b++) {
        r = c->books[b].rater;
        for (i = 0; i < billing_rater_account_count(r); i++) {
            if (strcmp(billing_rater_account_id(r, i), id) == 0)
                return 1;
        }
    }
    return 0;
}

/* A subscription the library refused: reported, left out, and the run goes on. */
static void reject_subscription(void *arg, const char *message)
{
    rate_ctx *c = arg;

    cli_error("%s", message);
    c->counts.subs_rejected++;
}

/* Load one price book and the accounts naming it (all of them when it is the only book). */
static int load_book(rate_ctx *c, rate_book *b)
{
    char err[ERR_MAX];

    b->cat = billing_catalog_new();
    if (b->cat == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    /* The price book first, so that each subscription is checked against it when added. */
    if (billing_config_pricebook_load(b->cat, b->path, err, sizeof(err)) != 0 ||
        billing_config_accounts_load_book(b->cat, c->zones, c->opts.accounts, b->id,
                                          reject_subscription, c, err, sizeof(err)) != 0) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    billing_rater_new(b->cat, &b->rater, err, sizeof(err));
    if (b->rater == NULL) {
        cli_error("%s + %s: %s", b->path, c->opts.accounts, err);
        return CLI_EXIT_INPUT;
    }
    b->prices = rate_prices_load(b->path, err, sizeof(err));
    if (b->prices == NULL) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    /* Repeated ids are found by the bounded external sort, not in the rater. */
    billing_rater_set_dedupe(b->rater, 0);
    return CLI_EXIT_OK;
}

static int load_books(rate_ctx *c)
{
    char err[ERR_MAX];
    int i;
    int rc;

    c->n_books = c->opts.n_books > 0 ? c->opts.n_books : 1;
    for (i = 0; i < c->n_books; i++) {
        c->books[i].id = c->opts.n_books > 1 ? c->opts.book_ids[i] : NULL;
        c->books[i].path = c->opts.n_books > 0 ? c->opts.book_paths[i] : c->opts.pricebook;
        rc = load_book(c, &c->books[i]);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    c->cat = c->books[0].cat;
    c->rater = c->books[0].rater;
    c->accinfo = rate_accounts_load(c->opts.accounts, err, sizeof(err));
    if (c->accinfo == NULL ||
        (c->opts.n_books > 1 &&
         rate_accounts_check_books(c->accinfo, c->opts.book_ids, c->opts.n_books, c->opts.accounts,
                                   err, sizeof(err)) != 0)) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    return CLI_EXIT_OK;
}

static int setup(rate_ctx *c)
{
    char err[ERR_MAX];
    int i;
    int rc;

    c->zones = billing_config_zones_new();
    c->ev = billing_event_new();
    if (c->zones == NULL || c->ev == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    rc = load_books(c);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (c->opts.strict && c->counts.subs_rejected > 0)
        return CLI_EXIT_REJECTED;
    if (c->opts.rejects != NULL) {
        c->rejects = rejects_open(c->opts.rejects, err, sizeof(err));
        if (c->rejects == NULL) {
            cli_error("%s", err);
            return CLI_EXIT_INPUT;
        }
    }
    if (c->opts.at_set && (c->running = running_new(c->opts.at)) == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    if (c->opts.by_resource && (c->kept = running_new_every()) == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    c->srcs = calloc((size_t)c->opts.n_files, sizeof(*c->srcs));
    if (c->srcs == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (i = 0; i < c->opts.n_files; i++)
        c->srcs[i].fd = -1;
    if (c->opts.dedupe) {
        c->dedupe =
            rate_dedupe_new(c->opts.dedupe_memory, rate_temp_dir(&c->opts), err, sizeof(err));
        if (c->dedupe == NULL) {
            cli_error("%s", err);
            return CLI_EXIT_INTERNAL;
        }
    }
    if (c->opts.account != NULL && !account_known(c, c->opts.account))
        return cli_usage_error("rate", "--account '%s' is not in %s", c->opts.account,
                               c->opts.accounts);
    return CLI_EXIT_OK;
}

static void teardown(rate_ctx *c)
{
    char err[ERR_MAX];
    int i;

    if (c->srcs != NULL) {
        for (i = 0; i < c->opts.n_files; i++) {
            free(c->srcs[i].name);
            if (c->srcs[i].fd >= 0)
                close(c->srcs[i].fd);
        }
    }
    free(c->srcs);
    rejects_close(c->rejects, err, sizeof(err));
    if (c->reaper_started)
        pthread_join(c->reaper, NULL);
    rate_dedupe_destroy(c->dedupe);
    rate_accounts_destroy(c->accinfo);
    running_destroy(c->running);
    running_destroy(c->kept);
    rate_resources_free(&c->res);
    for (i = 0; i < c->n_books; i++) {
        billing_rater_destroy(c->books[i].rater);
        billing_catalog_destroy(c->books[i].cat);
        rate_prices_destroy(c->books[i].prices);
    }
    billing_config_zones_destroy(c->zones);
    billing_event_destroy(c->ev);
}

/*
 * The locale's digit group separator when it is one of , ' _ or space (a
 * multibyte one would break the column alignment, which counts bytes), else
 * none.
 */
static void locale_thousands(char *out, size_t size)
{
    locale_t loc = newlocale(LC_NUMERIC_MASK, "", (locale_t)0);
    const char *sep = loc != (locale_t)0 ? nl_langinfo_l(THOUSEP, loc) : "";

    /* '.' groups only where ',' is the decimal point; our decimal point is always '.'. */
    snprintf(out, size, "%s",
             sep != NULL && strlen(sep) == 1 && strchr(", '_", sep[0]) != NULL ? sep : "");
    if (loc != (locale_t)0)
        freelocale(loc);
}

/* How tables look: a terminal gets a compact layout and the locale's grouping, a pipe a
 * stable one, unless options say otherwise. */
static void set_view(rate_ctx *c)
{
    int tty = isatty(STDOUT_FILENO);

    if (c->opts.thousands != NULL)
        snprintf(c->thousands, sizeof(c->thousands), "%s", c->opts.thousands);
    else if (tty)
        locale_thousands(c->thousands, sizeof(c->thousands));
    c->view.thousands = c->thousands;
    c->view.compact = c->opts.layout == LAYOUT_COMPACT || (c->opts.layout == LAYOUT_AUTO && tty);
    c->view.exact = c->opts.exact;
}

/* Read and rate every event file, then take back repeats; an exit code. */
static int rate_all(rate_ctx *c)
{
    if (rate_parallel_ok(c))
        return rate_parallel(c);
    return rate_sequential(c);
}

/* Print the invoices (or the credit report) and the counts; an exit code. */
static int finish(rate_ctx *c)
{
    int rc = c->opts.at_set ? rate_print_credit(c) : rate_print_invoices(c);

    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("writing the output failed");
        return CLI_EXIT_INTERNAL;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (c->counts.subs_rejected > 0)
        cli_error("%" PRIu64 " subscription%s rejected", c->counts.subs_rejected,
                  c->counts.subs_rejected == 1 ? "" : "s");
    if (c->counts.rejected > 0)
        cli_error("%" PRIu64 " of %" PRIu64 " events rejected", c->counts.rejected, c->counts.read);
    return c->counts.rejected > 0 || c->counts.subs_rejected > 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

int rate_run(const rate_opts *o)
{
    rate_ctx *c = calloc(1, sizeof(*c));
    int rc;
    int i;

    if (c == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    c->opts = *o;
    /* The ids of --pricebook ID=FILE point into the options' own buffer: into the copy's. */
    for (i = 0; i < o->n_books; i++) {
        if (o->book_ids[i] == o->book_id_buf[i])
            c->opts.book_ids[i] = c->opts.book_id_buf[i];
    }
    rc = rate_check_inputs(c);
    if (rc != CLI_EXIT_OK)
        goto done;
    set_view(c);
    rc = setup(c);
    if (rc == CLI_EXIT_OK)
        rc = rate_all(c);
    if (rc == CLI_EXIT_OK || rc == CLI_EXIT_REJECTED)
        rc = rate_close_rejects(c) != CLI_EXIT_OK ? CLI_EXIT_INTERNAL : rc;
    if (rc == CLI_EXIT_REJECTED)
        cli_error("--strict: stopped at the first rejected record; no invoices printed");
    else if (rc == CLI_EXIT_OK)
        rc = finish(c);
done:
    teardown(c);
    free(c);
    return rc;
}
