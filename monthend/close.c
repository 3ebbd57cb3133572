/*
 * close.c - the month-end close engine (close.h).
 *
 * The catalog is read from the store once and frozen; workers then take
 * batches of CLOSE_BATCH accounts in id order. For a batch a worker makes
 * a rater (without its own dedupe: the store's event ids are unique),
 * streams the batch's raw events into it, asks libbilling for each
 * account's invoice of the period, adds prior-period adjustment lines for
 * usage of finalized months that reached the store after they were
 * finalized (close_late.c), and writes the drafts in one transaction. Every figure on a
 * draft is libbilling's, except where adjustments join it: then the
 * subtotal adds them and tax is recomputed on the post-credit amount as
 * libbilling computes it (doc/database.md, "Late events").
 *
 * Before anything is read, each account's close mark (store/closemarks.h:
 * a digest of its event tallies, catalog rows and other invoices, kept by
 * the database) is compared with the one stored with its draft: only the
 * accounts whose mark changed are re-rated (all with --full), the others
 * add their stored drafts to the summary.
 */
#include "config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "balance.h"
#include "close.h"
#include "close_late.h"
#include "closemarks.h"
#include "dbcatalog.h"
#include "exact.h"
#include "invoices.h"
#include "migrate.h"

#define MSG_MAX 1024
/* What a close mark depends on besides the data: the program that rates. */
#define CLOSE_MARK_VERSION "close-mark-1 " PACKAGE_VERSION

/* ---------------------------------------------------------------------- */
/* Shared state                                                            */
/* ---------------------------------------------------------------------- */

typedef struct close_run_ctx {
    const close_params *p;
    bs_catalog *stored;   /* the catalog read back from the store (dbcatalog.h) */
    billing_catalog *cat; /* its library catalog, frozen before the workers start */
    billing_rounding rounding;
    json_t *accounts; /* every account id to re-rate, in order */
    size_t n_accounts;
    bs_close_marks *marks;  /* every account examined, with its mark now */
    const char **todo_mark; /* the mark of each of @accounts */
    json_t *skipped;        /* the accounts not re-rated (mark unchanged) */
    char month_text[16];    /* YYYY-MM-01 */
    char series[32];        /* INV-YYYY */
    billing_time_t before;  /* events starting from here cannot reach the period */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    size_t next;         /* first account not yet taken */
    size_t done;         /* accounts finished */
    size_t running;      /* workers still running */
    int failed;          /* a worker failed: others stop taking batches */
    close_status status; /* the first failing worker's */
    close_result *s;
} close_run_ctx;

/* One worker's batch. */
typedef struct batch {
    close_run_ctx *x;
    billing_rater *r;
    billing_event *ev;
    uint64_t events; /* events inside their account's period */
    uint64_t rejected;
    size_t from;      /* the batch's first account in x->accounts */
    json_t *index;    /* account id -> its position in the batch */
    const char *last; /* the account of the last event (NULL: look up), at position @last_at */
    size_t last_at;
    uint64_t acc_events[CLOSE_BATCH]; /* per account of the batch, for its mark */
    uint64_t acc_rejected[CLOSE_BATCH];
    /* Per account of the batch: the month closed in its zone, if the zone is known. */
    billing_time_t period_start[CLOSE_BATCH];
    billing_time_t period_end[CLOSE_BATCH];
    unsigned char period_known[CLOSE_BATCH];
} batch;

/* ---------------------------------------------------------------------- */
/* Messages: through the caller's callback, never printed                  */
/* ---------------------------------------------------------------------- */

/* Report @kind with @x->lock held: count it, keep the first error. */
static void note_locked(close_run_ctx *x, close_note_kind kind, const char *text)
{
    if (kind == CLOSE_NOTE_ERROR && x->s->error[0] == '\0')
        snprintf(x->s->error, sizeof(x->s->error), "%s", text);
    if (kind == CLOSE_NOTE_WARNING)
        x->s->warnings++;
    if (x->p->on_note != NULL)
        x->p->on_note(x->p->arg, kind, text);
}

/* A message of the run (printf-style) to the caller, one at a time. */
static void note(close_run_ctx *x, close_note_kind kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void note(close_run_ctx *x, close_note_kind kind, const char *fmt, ...)
{
    char text[MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&x->lock);
    note_locked(x, kind, text);
    pthread_mutex_unlock(&x->lock);
}

/*
 * A store failure of step @what as an error message (with the constraint
 * or SQLSTATE when there is one), and the status it means: invalid input
 * or input the database's rules refuse, out of memory, or the database.
 */
static close_status store_fail(close_run_ctx *x, const char *what, const bs_error *err)
{
    if (err->constraint[0] != '\0')
        note(x, CLOSE_NOTE_ERROR, "%s: %s [%s, SQLSTATE %s]", what, err->message, err->constraint,
             err->sqlstate);
    else if (err->sqlstate[0] != '\0')
        note(x, CLOSE_NOTE_ERROR, "%s: %s [SQLSTATE %s]", what, err->message, err->sqlstate);
    else
        note(x, CLOSE_NOTE_ERROR, "%s: %s", what, err->message);
    switch (err->status) {
    case BS_ERR_INVALID:
    case BS_ERR_CONSTRAINT:
        return CLOSE_ERR_INPUT;
    case BS_ERR_NOMEM:
        return CLOSE_ERR_INTERNAL;
    default:
        return CLOSE_ERR_DATABASE;
    }
}

/* CLOSE_ERR_INTERNAL, after its message. */
static close_status out_of_memory(close_run_ctx *x)
{
    note(x, CLOSE_NOTE_ERROR, "close: out of memory");
    return CLOSE_ERR_INTERNAL;
}

/* A connection to the store of the run; NULL after a message. */
static bs_conn *connect_store(close_run_ctx *x)
{
    bs_error err;
    bs_conn *c = bs_connect(bs_conninfo(x->p->db), NULL, &err);

    if (c == NULL)
        note(x, CLOSE_NOTE_ERROR, "%s", err.message);
    return c;
}

/* ---------------------------------------------------------------------- */
/* Rating a batch                                                          */
/* ---------------------------------------------------------------------- */

/* An event libbilling refused: counted, the first CLOSE_REJECT_NOTES reported. */
static void note_rejection(close_run_ctx *x, const char *msg)
{
    char text[MSG_MAX + 16];

    pthread_mutex_lock(&x->lock);
    if (x->s->rejected < CLOSE_REJECT_NOTES) {
        snprintf(text, sizeof(text), "close: %s", msg);
        note_locked(x, CLOSE_NOTE_REJECTED, text);
    }
    x->s->rejected++;
    pthread_mutex_unlock(&x->lock);
}

/* The month closed in @account's zone into *@ps and *@pe: 1, or 0 if its zone is unknown. */
static int account_period(const close_run_ctx *x, const char *account, billing_time_t *ps,
                          billing_time_t *pe)
{
    const close_params *p = x->p;
    const billing_zone *z = bs_catalog_zone(x->stored, account);

    return z != NULL && billing_zone_month_start(z, p->year, p->month, ps) == BILLING_OK &&
           billing_zone_month_start(z, p->month == 12 ? p->year + 1 : p->year,
                                    p->month == 12 ? 1 : p->month + 1, pe) == BILLING_OK;
}

/* Each account's period, once per batch: the events of a batch interleave its accounts. */
static void batch_periods(batch *b, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const char *id = json_string_value(json_array_get(b->x->accounts, b->from + i));
        b->period_known[i] =
            (unsigned char)account_period(b->x, id, &b->period_start[i], &b->period_end[i]);
    }
}

/*
 * The position of @account in the batch, and whether it is one of the
 * batch's (else 0, and *@found 0). Events arrive in the store's order,
 * which interleaves the accounts (time order, mostly): one hash look-up
 * per change of account.
 */
static size_t batch_pos(batch *b, const char *account, int *found)
{
    json_t *v;

    if (b->last == NULL || strcmp(b->last, account) != 0) {
        v = json_object_get(b->index, account);
        b->last_at = v != NULL ? (size_t)json_integer_value(v) : 0;
        b->last = v != NULL
                      ? json_string_value(json_array_get(b->x->accounts, b->from + b->last_at))
                      : NULL;
        *found = v != NULL;
        return b->last_at;
    }
    *found = 1;
    return b->last_at;
}

/*
 * Whether the event [@start, @end) of the account at @at (@found: one of
 * the batch's, else @account's own zone is looked up) falls in the month
 * closed, in the account's zone: events of other months are rated (for
 * credit and history) but not counted as the period's.
 */
static int in_period(batch *b, size_t at, int found, const char *account, billing_time_t start,
                     billing_time_t end)
{
    billing_time_t ps = 0;
    billing_time_t pe = 0;
    int known;

    if (found) {
        known = b->period_known[at];
        ps = b->period_start[at];
        pe = b->period_end[at];
    } else {
        known = account_period(b->x, account, &ps, &pe);
    }
    if (!known)
        return 1;
    return start < pe && (end > ps || start >= ps);
}

/* A bs_event_fn: rate one stored event. Refusals are counted, not fatal. */
static int add_event(void *arg, const char *account, const char *id, const char *resource,
                     const char *meter, billing_time_t start, billing_time_t end,
                     const char *quantity, const char *model, const char *region)
{
    batch *b = arg;
    char msg[MSG_MAX];
    billing_status st = bs_event_set(b->ev, account, id, resource, meter, start, end, quantity,
                                     model, region, msg, sizeof(msg));
    int found;
    size_t at;

    if (st == BILLING_OK)
        st = billing_rater_add(b->r, b->ev, msg, sizeof(msg));
    at = batch_pos(b, account, &found);
    if (st == BILLING_OK || st == BILLING_DUPLICATE) {
        if (in_period(b, at, found, account, start, end)) {
            b->events++;
            b->acc_events[at]++;
        }
        return 0;
    }
    if (msg[0] == '\0')
        snprintf(msg, sizeof(msg), "event '%.128s': %s", id, billing_strerror(st));
    b->rejected++;
    b->acc_rejected[at]++;
    note_rejection(b->x, msg);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Late events: adjustment lines                                           */
/* ---------------------------------------------------------------------- */

static void tally(close_run_ctx *x, const bs_draft *d, const bs_draft_outcome *out, size_t n,
                  size_t n_accounts, const batch *b)
{
    close_result *s = x->s;
    size_t i;
    size_t l;

    pthread_mutex_lock(&x->lock);
    s->accounts += n_accounts;
    s->invoices += n;
    s->events += b->events;
    for (i = 0; i < n; i++) {
        const billing_invoice *inv = d[i].inv;
        billing_meter m;
        s->outcome[out[i]]++;
        if (out[i] == BS_DRAFT_FINALIZED)
            continue; /* not written: its month was closed before */
        s->adjustments += d[i].n_adj;
        for (l = 0; l < billing_invoice_line_count(inv); l++) {
            if (billing_meter_parse(billing_invoice_line_meter(inv, l), &m) == BILLING_OK)
                exact_minor_add(s->by_meter[m], billing_invoice_line_amount_rounded(inv, l),
                                s->digits);
            else /* a plan's fee or refund: no meter */
                exact_minor_add(s->fees, billing_invoice_line_amount_rounded(inv, l), s->digits);
        }
        for (l = 0; l < d[i].n_adj; l++)
            exact_minor_add(s->adjusted, d[i].adj[l].amount, s->digits);
        for (l = 0; l < billing_invoice_expired_count(inv); l++)
            exact_minor_add(s->expired, billing_invoice_expired_amount(inv, l), s->digits);
        exact_minor_add(s->subtotal, d[i].subtotal, s->digits);
        exact_minor_add(s->credits, billing_invoice_credits(inv), s->digits);
        exact_minor_add(s->tax, d[i].tax, s->digits);
        exact_minor_add(s->total, d[i].total, s->digits);
    }
    x->done += n_accounts;
    pthread_cond_broadcast(&x->changed);
    pthread_mutex_unlock(&x->lock);
}

/* The draft of account @id into @slot/@d; 1 if there is one, 0 if none, -1 on failure. */
static int build_draft(batch *b, const char *id, const bs_billed_line *lines, size_t n_lines,
                       size_t *row, bs_history *history, draft_slot *slot, bs_draft *d)
{
    close_run_ctx *x = b->x;
    char msg[MSG_MAX];

    memset(slot, 0, sizeof(*slot));
    mpz_init(slot->adj.sum);
    bs_error err;

    if (bs_history_give(history, b->r, id, &err) != BS_OK) {
        store_fail(x, "close", &err);
        return -1;
    }
    if (billing_rater_invoice(b->r, id, x->p->year, x->p->month, &slot->inv, msg, sizeof(msg)) !=
        BILLING_OK) {
        note(x, CLOSE_NOTE_ERROR, "close: account '%s': %s", id, msg);
        return -1;
    }
    if (late_load_billed(slot, b->r, id, lines, n_lines, row) != 0 ||
        late_make_adjustments(&slot->adj, x->s->digits, x->rounding) != 0) {
        note(x, CLOSE_NOTE_ERROR, "close: account '%s': out of memory or too many price keys", id);
        return -1;
    }
    /*
     * A month whose only figure is a grant expiring with a remainder has an
     * invoice too, as `billing rate` prints it (doc/formats.md): without it
     * the ledger never got the 'expire' and the grant kept its remainder.
     */
    if (billing_invoice_line_count(slot->inv) == 0 && slot->adj.n_adj == 0 &&
        billing_invoice_expired_count(slot->inv) == 0)
        return 0;
    late_adjusted_figures(slot, slot->inv, x->s->digits, x->rounding);
    if (slot->adj.n_adj == 0) {
        snprintf(slot->subtotal, sizeof(slot->subtotal), "%s", billing_invoice_subtotal(slot->inv));
        snprintf(slot->tax, sizeof(slot->tax), "%s", billing_invoice_tax(slot->inv));
        snprintf(slot->total, sizeof(slot->total), "%s", billing_invoice_total(slot->inv));
    }
    d->inv = slot->inv;
    d->adj = slot->adj.adj;
    d->n_adj = slot->adj.n_adj;
    d->subtotal = slot->subtotal;
    d->tax = slot->tax;
    d->total = slot->total;
    return 1;
}

/* The credit the @n drafts @d return to grants, as bs_returned_unclosed reads it; NULL if none. */
static char *returned_text(const bs_draft *d, size_t n)
{
    json_t *arr = json_array();
    char *text = NULL;
    size_t i;
    size_t k;

    for (i = 0; arr != NULL && i < n; i++) {
        for (k = 0; k < billing_invoice_returned_count(d[i].inv); k++) {
            const char *am = billing_invoice_returned_amount(d[i].inv, k);
            if (strspn(am, "0.") == strlen(am))
                continue;
            json_array_append_new(
                arr, json_pack("{s:s, s:s, s:s}", "a", billing_invoice_account(d[i].inv), "g",
                               billing_invoice_returned_grant(d[i].inv, k), "am", am));
        }
    }
    if (json_array_size(arr) > 0)
        text = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return text;
}

/*
 * Credit a refund returns must have been applied by the month that paid
 * the term: if that month is not closed yet, the ledger would refuse the
 * return in the middle of the batch with a message about minor units.
 * Refuse the close instead, naming the month to close first. Returns
 * CLOSE_OK or the error status (message reported).
 */
static close_status check_returned(close_run_ctx *x, bs_conn *c, const bs_draft *d, size_t n)
{
    char *text = returned_text(d, n);
    char *account = NULL;
    char *grant = NULL;
    char *open = NULL;
    bs_error err;
    close_status rc = CLOSE_OK;

    if (text == NULL)
        return CLOSE_OK;
    if (bs_returned_unclosed(c, text, x->month_text, &account, &grant, &open, &err) != BS_OK)
        rc = store_fail(x, "close", &err);
    else if (account != NULL && open[0] != '\0') {
        note(x, CLOSE_NOTE_ERROR,
             "close: account '%s': %04d-%02d returns credit to grant '%s' that an earlier "
             "month applied, but %s is not closed: close %s first (months that return "
             "credit are closed in order)",
             account, x->p->year, x->p->month, grant, open, open);
        rc = CLOSE_ERR_INPUT;
    } else if (account != NULL) {
        note(x, CLOSE_NOTE_ERROR,
             "close: account '%s': %04d-%02d returns more credit to grant '%s' than the "
             "ledger holds as applied",
             account, x->p->year, x->p->month, grant);
        rc = CLOSE_ERR_INPUT;
    }
    free(account);
    free(grant);
    free(open);
    free(text);
    return rc;
}

/*
 * The close marks of accounts [@from, @to) as bs_close_marks_put takes
 * them, with what the batch rated for each; @has[i]: account i has a draft
 * in @slots. NULL if out of memory.
 */
static char *marks_text(batch *b, size_t from, size_t to, const draft_slot *slots, const int *has)
{
    close_run_ctx *x = b->x;
    json_t *arr = json_array();
    char text[128];
    mpz_t expired;
    char *out = NULL;
    size_t i;
    size_t l;

    mpz_init(expired);
    for (i = 0; arr != NULL && i < to - from; i++) {
        mpz_set_ui(expired, 0);
        for (l = 0; has[i] && l < billing_invoice_expired_count(slots[i].inv); l++)
            exact_minor_add(expired, billing_invoice_expired_amount(slots[i].inv, l), x->s->digits);
        exact_minor_text(text, sizeof(text), expired, x->s->digits);
        if (json_array_append_new(arr, json_pack("{s:O, s:s, s:I, s:I, s:s}", "a",
                                                 json_array_get(x->accounts, from + i), "m",
                                                 x->todo_mark[from + i], "e",
                                                 (json_int_t)b->acc_events[i], "r",
                                                 (json_int_t)b->acc_rejected[i], "x", text)) != 0)
            goto done;
    }
    if (arr != NULL)
        out = json_dumps(arr, JSON_COMPACT);
done:
    mpz_clear(expired);
    json_decref(arr);
    return out;
}

/* Drafts of accounts [@from, @to) of the run, written in one transaction. */
static close_status write_batch(batch *b, bs_conn *c, const char *acc_text, size_t from, size_t to)
{
    close_run_ctx *x = b->x;
    size_t n = to - from;
    draft_slot *slots = calloc(n, sizeof(*slots));
    bs_draft *d = calloc(n, sizeof(*d));
    bs_draft_outcome *out = calloc(n, sizeof(*out));
    int *has = calloc(n, sizeof(*has));
    char *marks = NULL;
    bs_billed_line *lines = NULL;
    size_t n_lines = 0;
    bs_history *history = NULL;
    size_t k = 0;
    size_t i;
    size_t row = 0;
    close_status rc = CLOSE_ERR_INTERNAL;
    bs_error err;

    if (slots == NULL || d == NULL || out == NULL || has == NULL)
        goto done;
    if (bs_billed_lines(c, acc_text, x->month_text, &lines, &n_lines, &err) != BS_OK ||
        bs_history_read(c, acc_text, x->month_text, &history, &err) != BS_OK) {
        rc = store_fail(x, "close", &err);
        goto done;
    }
    for (i = 0; i < n; i++) {
        const char *id = json_string_value(json_array_get(x->accounts, from + i));
        has[i] = build_draft(b, id, lines, n_lines, &row, history, &slots[i], &d[k]);
        if (has[i] < 0)
            goto done;
        k += (size_t)has[i];
    }
    rc = check_returned(x, c, d, k);
    if (rc != CLOSE_OK)
        goto done;
    rc = CLOSE_ERR_INTERNAL;
    marks = marks_text(b, from, to, slots, has);
    if (marks == NULL)
        goto done;
    if (bs_drafts_write(c, acc_text, x->p->book, x->month_text, x->series, d, k, marks, out,
                        &err) != BS_OK) {
        rc = store_fail(x, "close", &err);
        goto done;
    }
    tally(x, d, out, k, n, b);
    rc = CLOSE_OK;
done:
    for (i = 0; slots != NULL && i < n; i++)
        late_draft_slot_free(&slots[i]);
    free(lines);
    bs_history_free(history);
    free(marks);
    free(has);
    free(out);
    free(d);
    free(slots);
    return rc;
}

static close_status run_batch(close_run_ctx *x, bs_conn *c, billing_event *ev, size_t from,
                              size_t to)
{
    json_t *ids = json_array();
    char *acc_text = NULL;
    batch b;
    bs_error err;
    size_t i;
    close_status rc = CLOSE_ERR_INTERNAL;

    memset(&b, 0, sizeof(b));
    b.x = x;
    b.ev = ev;
    b.from = from;
    b.index = json_object();
    billing_rater_new(x->cat, &b.r, NULL, 0);
    for (i = from; ids != NULL && b.index != NULL && i < to; i++) {
        json_array_append(ids, json_array_get(x->accounts, i));
        json_object_set_new(b.index, json_string_value(json_array_get(x->accounts, i)),
                            json_integer((json_int_t)(i - from)));
    }
    acc_text = ids != NULL ? json_dumps(ids, JSON_COMPACT) : NULL;
    if (b.r == NULL || acc_text == NULL || b.index == NULL ||
        billing_rater_set_dedupe(b.r, 0) != BILLING_OK)
        goto done;
    batch_periods(&b, to - from);
    if (bs_events_fetch(c, acc_text, x->before, add_event, &b, &err) != BS_OK) {
        rc = store_fail(x, "close: reading events", &err);
        goto done;
    }
    rc = write_batch(&b, c, acc_text, from, to);
done:
    if (rc == CLOSE_ERR_INTERNAL)
        out_of_memory(x);
    free(acc_text);
    json_decref(ids);
    json_decref(b.index);
    billing_rater_destroy(b.r);
    return rc;
}

/* Take the next batch: 1 with [*from, *to), 0 when none is left or a worker failed. */
static int take_batch(close_run_ctx *x, size_t *from, size_t *to)
{
    int got;

    pthread_mutex_lock(&x->lock);
    got = !x->failed && x->next < x->n_accounts;
    if (got) {
        *from = x->next;
        *to = x->next + CLOSE_BATCH < x->n_accounts ? x->next + CLOSE_BATCH : x->n_accounts;
        x->next = *to;
    }
    pthread_mutex_unlock(&x->lock);
    return got;
}

static void worker_fail(close_run_ctx *x, close_status rc)
{
    pthread_mutex_lock(&x->lock);
    if (!x->failed)
        x->status = rc;
    x->failed = 1;
    pthread_mutex_unlock(&x->lock);
}

static void *worker(void *arg)
{
    close_run_ctx *x = arg;
    bs_conn *c = connect_store(x);
    billing_event *ev = billing_event_new();
    size_t from;
    size_t to;
    close_status rc;

    if (c != NULL && ev == NULL)
        note(x, CLOSE_NOTE_ERROR, "close: out of memory");
    if (c == NULL || ev == NULL)
        worker_fail(x, c == NULL ? CLOSE_ERR_DATABASE : CLOSE_ERR_INTERNAL);
    while (c != NULL && ev != NULL && take_batch(x, &from, &to)) {
        rc = run_batch(x, c, ev, from, to);
        if (rc != CLOSE_OK)
            worker_fail(x, rc);
    }
    billing_event_destroy(ev);
    bs_close(c);
    pthread_mutex_lock(&x->lock);
    x->running--;
    pthread_cond_broadcast(&x->changed);
    pthread_mutex_unlock(&x->lock);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Progress                                                                */
/* ---------------------------------------------------------------------- */

/* Progress to the caller, with x->lock held. */
static void show_progress(close_run_ctx *x, close_phase phase)
{
    if (x->p->on_progress != NULL)
        x->p->on_progress(x->p->arg, phase, x->done, x->n_accounts, x->s->events);
}

/* Wait for the workers, reporting progress about four times a second. */
static void wait_workers(close_run_ctx *x)
{
    struct timespec until;

    pthread_mutex_lock(&x->lock);
    show_progress(x, CLOSE_PHASE_START);
    while (x->running > 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&x->changed, &x->lock, &until);
        show_progress(x, CLOSE_PHASE_UPDATE);
    }
    show_progress(x, CLOSE_PHASE_END);
    pthread_mutex_unlock(&x->lock);
}

/* ---------------------------------------------------------------------- */
/* The run                                                                 */
/* ---------------------------------------------------------------------- */

int close_parse_period(const char *text, int *year, int *month)
{
    char tail;

    if (strlen(text) != 7 || text[4] != '-' || sscanf(text, "%4d-%2d%c", year, month, &tail) != 2)
        return -1;
    if (*year < 1900 || *year > 2199 || *month < 1 || *month > 12)
        return -1;
    return 0;
}

static void result_init(close_result *s)
{
    int i;

    memset(s, 0, sizeof(*s));
    for (i = 0; i < BILLING_METER_COUNT; i++)
        mpz_init(s->by_meter[i]);
    mpz_inits(s->fees, s->adjusted, s->subtotal, s->credits, s->expired, s->tax, s->total, NULL);
}

void close_result_clear(close_result *s)
{
    int i;

    for (i = 0; i < BILLING_METER_COUNT; i++)
        mpz_clear(s->by_meter[i]);
    mpz_clears(s->fees, s->adjusted, s->subtotal, s->credits, s->expired, s->tax, s->total, NULL);
}

/*
 * The accounts to re-rate into x->accounts (every one with --full or for
 * rerate, else those whose mark changed), the others into x->skipped.
 * Returns 0, or -1 if out of memory.
 */
static int select_accounts(close_run_ctx *x)
{
    const bs_close_marks *m = x->marks;
    int all = x->p->full || x->p->drafts_only;
    size_t i;

    x->accounts = json_array();
    x->skipped = json_array();
    x->todo_mark = calloc(m->n + 1, sizeof(*x->todo_mark));
    if (x->accounts == NULL || x->skipped == NULL || x->todo_mark == NULL)
        return -1;
    for (i = 0; i < m->n; i++) {
        if (all || !m->same[i]) {
            x->todo_mark[json_array_size(x->accounts)] = m->mark[i];
            if (json_array_append_new(x->accounts, json_string(m->id[i])) != 0)
                return -1;
        } else if (json_array_append_new(x->skipped, json_string(m->id[i])) != 0) {
            return -1;
        }
    }
    x->n_accounts = json_array_size(x->accounts);
    return 0;
}

/* Load and freeze the catalog, list the accounts. Returns CLOSE_OK or the error status. */
static close_status prepare(close_run_ctx *x, bs_conn *c)
{
    const close_params *p = x->p;
    billing_rater *probe;
    billing_zone *utc;
    billing_time_t since;
    char msg[MSG_MAX];
    bs_error err;

    if (bs_schema_require(c, &err) != BS_OK)
        return store_fail(x, "close", &err);
    /* Marks first: whatever changes from here on makes them older than the drafts. */
    if (bs_close_marks_read(c, p->book, x->month_text, CLOSE_MARK_VERSION, p->drafts_only,
                            &x->marks, &err) != BS_OK)
        return store_fail(x, "close", &err);
    /* The same catalog reader as billingd and `billing ingest` (store/dbcatalog.c). */
    x->stored = bs_catalog_read(c, p->book, &err);
    if (x->stored == NULL)
        return store_fail(x, "close", &err);
    x->cat = bs_catalog_lib(x->stored);
    x->rounding = bs_catalog_rounding(x->stored);
    snprintf(x->s->currency, sizeof(x->s->currency), "%s", bs_catalog_currency(x->stored));
    x->s->digits = billing_currency_digits(x->s->currency);
    /* The first rater freezes the catalog: before the workers share it. */
    billing_rater_new(x->cat, &probe, msg, sizeof(msg));
    if (probe == NULL) {
        note(x, CLOSE_NOTE_ERROR, "close: the stored catalog is refused: %s", msg);
        return CLOSE_ERR_INPUT;
    }
    billing_rater_destroy(probe);
    if (select_accounts(x) != 0)
        return out_of_memory(x);
    /* Zones are at most 14 h ahead of UTC: two days past the UTC month covers every zone. */
    utc = billing_zone_new_utc();
    if (utc == NULL)
        return out_of_memory(x);
    billing_zone_month_start(utc, p->month == 12 ? p->year + 1 : p->year,
                             p->month == 12 ? 1 : p->month + 1, &x->before);
    billing_zone_month_start(utc, p->year, p->month, &since);
    billing_zone_destroy(utc);
    x->before += 2 * 86400 * BILLING_NS_PER_SEC;
    /* Zones are at most 14 h ahead: the period began after this in every zone. */
    since -= 14 * 3600 * BILLING_NS_PER_SEC;
    if (bs_rejected_since(c, since, &x->s->dead_letters, &err) != BS_OK)
        return store_fail(x, "close", &err);
    return CLOSE_OK;
}

static int start_workers(close_run_ctx *x, pthread_t *threads, int *started)
{
    int i;

    *started = 0;
    for (i = 0; i < x->p->jobs; i++) {
        pthread_mutex_lock(&x->lock);
        x->running++;
        pthread_mutex_unlock(&x->lock);
        if (pthread_create(&threads[i], NULL, worker, x) != 0) {
            pthread_mutex_lock(&x->lock);
            x->running--;
            pthread_mutex_unlock(&x->lock);
            worker_fail(x, CLOSE_ERR_INTERNAL);
            note(x, CLOSE_NOTE_ERROR, "close: cannot start worker thread %d", i + 1);
            break;
        }
        (*started)++;
    }
    return *started > 0 ? 0 : -1;
}

/* A bs_kind_sum_fn: a kind of line of the drafts not re-rated, into the summary. */
static void add_kind(void *arg, const char *kind, const char *amount, int64_t lines)
{
    close_result *s = arg;
    billing_meter m;

    if (strcmp(kind, "adjustment") == 0) {
        exact_minor_add(s->adjusted, amount, s->digits);
        s->adjustments += (size_t)lines;
    } else if (billing_meter_parse(kind, &m) == BILLING_OK) {
        exact_minor_add(s->by_meter[m], amount, s->digits);
    } else {
        exact_minor_add(s->fees, amount, s->digits);
    }
}

/*
 * The accounts not re-rated (their mark unchanged) keep their drafts: the
 * summary adds what those hold, and what their last re-rating counted.
 */
static close_status add_skipped(close_run_ctx *x, bs_conn *c)
{
    close_result *s = x->s;
    char *ids;
    bs_mark_sums sums;
    bs_error err;
    bs_status st;

    s->skipped = json_array_size(x->skipped);
    if (s->skipped == 0)
        return CLOSE_OK;
    ids = json_dumps(x->skipped, JSON_COMPACT);
    if (ids == NULL)
        return out_of_memory(x);
    st = bs_close_marks_sums(c, ids, x->month_text, add_kind, s, &sums, &err);
    free(ids);
    if (st != BS_OK)
        return store_fail(x, "close", &err);
    s->accounts += s->skipped;
    s->invoices += (size_t)(sums.drafts + sums.finalized);
    s->outcome[BS_DRAFT_UNCHANGED] += (size_t)sums.drafts;
    s->outcome[BS_DRAFT_FINALIZED] += (size_t)sums.finalized;
    s->events += (uint64_t)sums.events;
    exact_minor_add(s->expired, sums.expired, s->digits);
    exact_minor_add(s->subtotal, sums.subtotal, s->digits);
    exact_minor_add(s->credits, sums.credits, s->digits);
    exact_minor_add(s->tax, sums.tax, s->digits);
    exact_minor_add(s->total, sums.total, s->digits);
    if (sums.rejected > 0) {
        note(x, CLOSE_NOTE_WARNING,
             "close: %lld stored events of accounts not re-rated (unchanged since their "
             "draft) were refused when they were rated: `billing close --full` lists them",
             (long long)sums.rejected);
        s->rejected += (uint64_t)sums.rejected;
    }
    return CLOSE_OK;
}

/*
 * Accounts whose month was finalized before are left alone, but the
 * summary shows the period's money: add what their invoices billed, as
 * stored, so that a second `close --finalize` does not print 0.00.
 */
static close_status add_finalized(close_run_ctx *x, bs_conn *c)
{
    close_result *s = x->s;
    bs_money_totals *totals;
    bs_error err;

    if (s->outcome[BS_DRAFT_FINALIZED] == 0)
        return CLOSE_OK;
    if (bs_invoice_finalized_sums(c, x->month_text, s->currency, add_kind, s, &totals, &err) !=
        BS_OK)
        return store_fail(x, "close", &err);
    exact_minor_add(s->subtotal, totals->subtotal, s->digits);
    exact_minor_add(s->credits, totals->credits, s->digits);
    exact_minor_add(s->tax, totals->tax, s->digits);
    exact_minor_add(s->total, totals->total, s->digits);
    free(totals);
    return CLOSE_OK;
}

close_status close_run(const close_params *p, close_result *s)
{
    close_run_ctx x;
    pthread_t threads[CLOSE_JOBS_MAX];
    bs_conn *c = NULL;
    int started = 0;
    close_status rc;
    int i;

    result_init(s);
    s->year = p->year;
    s->month = p->month;
    memset(&x, 0, sizeof(x));
    x.p = p;
    x.s = s;
    pthread_mutex_init(&x.lock, NULL);
    pthread_cond_init(&x.changed, NULL);
    snprintf(x.month_text, sizeof(x.month_text), "%04d-%02d-01", p->year, p->month);
    snprintf(x.series, sizeof(x.series), "INV-%04d", p->year);
    c = connect_store(&x);
    rc = c == NULL ? CLOSE_ERR_DATABASE : prepare(&x, c);
    if (rc == CLOSE_OK && start_workers(&x, threads, &started) == 0)
        wait_workers(&x);
    for (i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    if (rc == CLOSE_OK && x.failed)
        rc = x.status;
    if (rc == CLOSE_OK)
        rc = add_skipped(&x, c);
    if (rc == CLOSE_OK)
        rc = add_finalized(&x, c);
    bs_close(c);
    if (rc == CLOSE_OK && s->rejected > 0)
        rc = CLOSE_REJECTED;
    json_decref(x.accounts);
    json_decref(x.skipped);
    free(x.todo_mark);
    bs_close_marks_free(x.marks);
    bs_catalog_free(x.stored);
    pthread_cond_destroy(&x.changed);
    pthread_mutex_destroy(&x.lock);
    return rc;
}

close_status close_finalize(const close_params *p, int64_t grace, close_result *s)
{
    close_run_ctx x;
    bs_conn *c;
    bs_error err;
    close_status rc = CLOSE_OK;

    result_init(s);
    s->year = p->year;
    s->month = p->month;
    memset(&x, 0, sizeof(x));
    x.p = p;
    x.s = s;
    pthread_mutex_init(&x.lock, NULL);
    snprintf(x.month_text, sizeof(x.month_text), "%04d-%02d-01", p->year, p->month);
    c = connect_store(&x);
    if (c == NULL)
        rc = CLOSE_ERR_DATABASE;
    else if (bs_finalize_month(c, x.month_text, grace, &s->finalized, &s->waiting, &err) != BS_OK)
        rc = store_fail(&x, "close --finalize", &err);
    bs_close(c);
    pthread_mutex_destroy(&x.lock);
    return rc;
}
