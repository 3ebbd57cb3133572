/*
 * rate_output.c - which invoices `billing rate` prints (months with
 * charges, a bounded range asked for, months a grant expires in) and how:
 * JSON, table or CSV, all through render.h.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "numfmt.h"
#include "rate_ctx.h"

/* ---------------------------------------------------------------------- */
/* Choosing the invoices                                                   */
/* ---------------------------------------------------------------------- */

static int in_range(const rate_opts *o, int32_t m)
{
    return (o->from == NO_MONTH || m >= o->from) && (o->to == NO_MONTH || m <= o->to);
}

/* Every month of a bounded range, for one chosen account. */
static int32_t *range_months(const rate_opts *o, size_t *n)
{
    int32_t *months;
    int32_t m;

    *n = (size_t)(o->to - o->from) + 1;
    months = malloc(*n * sizeof(*months));
    for (m = o->from; months != NULL && m <= o->to; m++)
        months[m - o->from] = m;
    return months;
}

/* The months of @account with charges, within the range (NULL when out of memory). */
static int32_t *charged_months(rate_ctx *c, const char *account, size_t *n)
{
    billing_months *list = NULL;
    int32_t *months;
    size_t count;
    size_t i;

    *n = 0;
    if (billing_rater_months(c->rater, account, &list, NULL, 0) != BILLING_OK)
        return NULL;
    count = billing_months_count(list);
    months = malloc((count + 1) * sizeof(*months));
    for (i = 0; months != NULL && i < count; i++) {
        months[*n] = billing_months_year(list, i) * 12 + billing_months_month(list, i) - 1;
        if (in_range(&c->opts, months[*n]))
            (*n)++;
    }
    billing_months_destroy(list);
    return months;
}

/* Most grant expiries of one account looked at for invoices without charges. */
#define EXPIRY_MONTHS_MAX 256

static int cmp_month(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a;
    int32_t y = *(const int32_t *)b;

    return (x > y) - (x < y);
}

/* Whether @m is in the sorted @months[0..n). */
static int has_month(const int32_t *months, size_t n, int32_t m)
{
    return bsearch(&m, months, n, sizeof(*months), cmp_month) != NULL;
}

/* Drop repeats from the sorted @months[0..*n); returns @months. */
static int32_t *unique(int32_t *months, size_t *n)
{
    size_t w = 0;
    size_t i;

    for (i = 0; i < *n; i++) {
        if (w == 0 || months[w - 1] != months[i])
            months[w++] = months[i];
    }
    *n = w;
    return months;
}

/* Every month of a bounded range was asked for, charged or not. */
static int whole_range(const rate_opts *o)
{
    return o->account != NULL && o->from != NO_MONTH && o->to != NO_MONTH &&
           o->to - o->from < RANGE_MONTHS_MAX;
}

/*
 * The months to look at for @account (malloc'd; NULL when out of memory),
 * sorted: those of @charged[0..n_charged) and those a grant may expire in
 * (whose invoices are printed only when they show an expiry).
 */
static int32_t *months_for(rate_ctx *c, const char *account, const billing_zone *zone,
                           const int32_t *charged, size_t n_charged, size_t *n)
{
    int32_t exp[EXPIRY_MONTHS_MAX];
    int32_t *months;
    size_t n_exp = rate_accounts_expiry_months(c->accinfo, zone, account, exp, EXPIRY_MONTHS_MAX);
    size_t i;

    if (whole_range(&c->opts))
        return range_months(&c->opts, n);
    if (n_exp > EXPIRY_MONTHS_MAX)
        n_exp = EXPIRY_MONTHS_MAX;
    months = malloc((n_charged + n_exp + 1) * sizeof(*months));
    if (months == NULL)
        return NULL;
    memcpy(months, charged, n_charged * sizeof(*months));
    *n = n_charged;
    for (i = 0; i < n_exp; i++) {
        if (in_range(&c->opts, exp[i]) && !has_month(charged, n_charged, exp[i]))
            months[(*n)++] = exp[i];
    }
    qsort(months, *n, sizeof(*months), cmp_month);
    return unique(months, n);
}

typedef int (*invoice_fn)(rate_ctx *c, const billing_invoice *inv, void *arg);

/* Add @inv to the totals of its currency (exact: totals have the currency's digits). */
static int tally(rate_ctx *c, const billing_invoice *inv)
{
    const char *cur = billing_invoice_currency(inv);
    int scale = billing_currency_digits(cur);
    rate_total *t = NULL;
    int i;

    for (i = 0; i < c->n_totals; i++) {
        if (strcmp(c->totals[i].currency, cur) == 0)
            t = &c->totals[i];
    }
    if (t == NULL) {
        if (c->n_totals == BOOKS_MAX)
            return CLI_EXIT_OK;
        t = &c->totals[c->n_totals++];
        snprintf(t->currency, sizeof(t->currency), "%s", cur);
        snprintf(t->total, sizeof(t->total), "0");
    }
    t->invoices++;
    if (numfmt_add(t->total, billing_invoice_total(inv), scale > 0 ? scale : 0, t->total,
                   sizeof(t->total)) != 0) {
        cli_error("currency %s: the total does not fit", cur);
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

/* The invoices of one account, in month order. */
static int account_invoices(rate_ctx *c, const char *account, invoice_fn fn, void *arg)
{
    char err[ERR_MAX];
    const billing_zone *zone = rate_accounts_zone(c->accinfo, c->zones, account);
    billing_invoice *inv;
    int32_t *charged;
    int32_t *months = NULL;
    size_t n_charged;
    size_t n = 0;
    size_t i;
    int rc = CLI_EXIT_OK;

    charged = charged_months(c, account, &n_charged);
    if (charged != NULL)
        months = months_for(c, account, zone, charged, n_charged, &n);
    if (months == NULL) {
        free(charged);
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    c->view.zone = zone;
    if (c->kept != NULL)
        rc = rate_resources_build(c, account, &c->res);
    for (i = 0; rc == CLI_EXIT_OK && i < n; i++) {
        if (billing_rater_invoice(c->rater, account, months[i] / 12, months[i] % 12 + 1, &inv, err,
                                  sizeof(err)) != BILLING_OK) {
            cli_error("%s", err);
            rc = CLI_EXIT_INTERNAL;
            break;
        }
        if (whole_range(&c->opts) || has_month(charged, n_charged, months[i]) ||
            billing_invoice_expired_count(inv) > 0) {
            rc = fn(c, inv, arg);
            if (rc == CLI_EXIT_OK)
                rc = tally(c, inv);
        }
        billing_invoice_destroy(inv);
    }
    rate_resources_free(&c->res);
    free(months);
    free(charged);
    return rc;
}

/* What for_each_invoice hands to account_invoices. */
struct invoice_call {
    invoice_fn fn;
    void *arg;
};

static int account_invoices_cb(rate_ctx *c, const char *account, void *arg)
{
    const struct invoice_call *call = arg;

    return account_invoices(c, account, call->fn, call->arg);
}

/* Call @fn on each chosen invoice, in price book, account then month order. */
static int for_each_invoice(rate_ctx *c, invoice_fn fn, void *arg)
{
    struct invoice_call call;

    call.fn = fn;
    call.arg = arg;
    return rate_for_each_account(c, account_invoices_cb, &call);
}

/* ---------------------------------------------------------------------- */
/* Output                                                                  */
/* ---------------------------------------------------------------------- */

typedef int (*resource_fn)(rate_ctx *c, const billing_invoice *inv, const char *resource,
                           void *arg);

/* Call @fn on the invoice of each resource with metered lines in the month of @inv. */
static int for_each_resource(rate_ctx *c, const billing_invoice *inv, resource_fn fn, void *arg)
{
    char err[ERR_MAX];
    billing_invoice *ri;
    size_t i;
    int rc = CLI_EXIT_OK;

    for (i = 0; rc == CLI_EXIT_OK && i < c->res.n; i++) {
        if (billing_rater_invoice(c->res.raters[i], billing_invoice_account(inv),
                                  billing_invoice_year(inv), billing_invoice_month(inv), &ri, err,
                                  sizeof(err)) != BILLING_OK) {
            cli_error("--by resource: %s", err);
            return CLI_EXIT_INTERNAL;
        }
        if (render_metered_count(ri) > 0)
            rc = fn(c, ri, c->res.names[i], arg);
        billing_invoice_destroy(ri);
    }
    return rc;
}

static int add_json_resource(rate_ctx *c, const billing_invoice *ri, const char *resource,
                             void *arg)
{
    json_t *o;

    (void)c;
    o = json_pack("{s:s, s:o}", "resource", resource, "lines", render_metered_lines_json(ri));
    return o != NULL && json_array_append_new(arg, o) == 0 ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
}

/* "by_resource": [{"resource": R, "lines": [...]}], an added key of the invoice object. */
static int add_by_resource(rate_ctx *c, const billing_invoice *inv, json_t *item)
{
    json_t *list = json_array();
    int rc;

    if (list == NULL || json_object_set_new(item, "by_resource", list) != 0)
        return CLI_EXIT_INTERNAL;
    rc = for_each_resource(c, inv, add_json_resource, list);
    if (rc != CLI_EXIT_OK)
        cli_error("out of memory");
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Invoices as JSON text, written on a second thread                       */
/* ---------------------------------------------------------------------- */

/*
 * The invoices' JSON trees are built on the calling thread (the rater
 * is not thread-safe) and handed to a writer thread, which dumps each
 * as text and frees it: dumping and freeing cost as much as building,
 * and the run waits for all three after the events are rated. The text
 * is kept until the end, so that the summary comes first and a failure
 * prints nothing, as with one tree dumped at once; it is smaller than
 * the tree was.
 */
#define DUMP_QUEUE 64
/* An invoice's lines inside {"invoices": [...]}: two levels of JSON_INDENT(2) deeper. */
#define ITEM_INDENT "\n    "
#define ITEM_SEP "," ITEM_INDENT
#define JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER)

typedef struct text {
    char *p;
    size_t len;
    size_t cap;
} text;

typedef struct dumper {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast on every change: one producer, one consumer */
    json_t *queue[DUMP_QUEUE];
    size_t head;
    size_t n;
    int done;     /* no more invoices */
    int threaded; /* 0: dumped as they come, on the calling thread */
    int failed;   /* out of memory: the text is incomplete */
    size_t items;
    text out; /* the invoices, separated and indented as inside the document */
} dumper;

/* Append @n bytes at @p to @t; 0, or -1 when out of memory. */
static int text_put(text *t, const char *p, size_t n)
{
    size_t cap = t->cap ? t->cap : 65536;
    char *q;

    if (n > t->cap - t->len) {
        while (cap - t->len < n) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        q = realloc(t->p, cap);
        if (q == NULL)
            return -1;
        t->p = q;
        t->cap = cap;
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
    return 0;
}

/* A json_dump_callback_t: append to a text. */
static int text_put_cb(const char *p, size_t n, void *arg)
{
    return text_put(arg, p, n);
}

/* A json_dump_callback_t for an invoice: its text, every line but the first indented. */
static int item_put(const char *p, size_t n, void *arg)
{
    text *t = arg;
    const char *nl;

    /* JSON strings have no raw newline: each is one of the dump's line breaks. */
    while ((nl = memchr(p, '\n', n)) != NULL) {
        if (text_put(t, p, (size_t)(nl - p)) != 0 ||
            text_put(t, ITEM_INDENT, sizeof(ITEM_INDENT) - 1) != 0)
            return -1;
        n -= (size_t)(nl - p) + 1;
        p = nl + 1;
    }
    return text_put(t, p, n);
}

/* Dump @item after the ones before and free it. */
static void dump_item(dumper *d, json_t *item)
{
    if (!d->failed && ((d->items > 0 && text_put(&d->out, ITEM_SEP, sizeof(ITEM_SEP) - 1) != 0) ||
                       json_dump_callback(item, item_put, &d->out, JSON_FLAGS) != 0))
        d->failed = 1;
    d->items++;
    json_decref(item);
}

static void *dumper_main(void *arg)
{
    dumper *d = arg;
    json_t *item;

    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (d->n == 0 && !d->done)
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->n == 0) {
            pthread_mutex_unlock(&d->mu);
            return NULL;
        }
        item = d->queue[d->head];
        d->head = (d->head + 1) % DUMP_QUEUE;
        d->n--;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        dump_item(d, item);
    }
}

/* Hand @item (its reference) to the writer. */
static void dumper_push(dumper *d, json_t *item)
{
    if (!d->threaded) {
        dump_item(d, item);
        return;
    }
    pthread_mutex_lock(&d->mu);
    while (d->n == DUMP_QUEUE)
        pthread_cond_wait(&d->cv, &d->mu);
    d->queue[(d->head + d->n) % DUMP_QUEUE] = item;
    d->n++;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* Start the writer thread, or dump on this thread when there is none. */
static void dumper_start(dumper *d, pthread_t *tid)
{
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->threaded = pthread_create(tid, NULL, dumper_main, d) == 0;
}

/* Wait for the writer to dump every invoice handed over. */
static void dumper_finish(dumper *d, pthread_t tid)
{
    if (d->threaded) {
        pthread_mutex_lock(&d->mu);
        d->done = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(tid, NULL);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
}

/* An invoice_fn: the invoice's JSON (with --by resource, its shares) to the writer. */
static int queue_invoice(rate_ctx *c, const billing_invoice *inv, void *arg)
{
    json_t *item = render_invoice_json(inv);

    if (item != NULL && c->kept != NULL && add_by_resource(c, inv, item) != CLI_EXIT_OK) {
        json_decref(item);
        return CLI_EXIT_INTERNAL;
    }
    if (item == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    dumper_push(arg, item);
    return CLI_EXIT_OK;
}

/*
 * With several price books: per currency, the invoices printed and the
 * sum of their totals ("currencies" in the summary).
 */
static json_t *totals_json(const rate_ctx *c)
{
    json_t *arr = json_array();
    json_t *o;
    int i;

    for (i = 0; arr != NULL && i < c->n_totals; i++) {
        o = json_pack("{s:s, s:I, s:s}", "currency", c->totals[i].currency, "invoices",
                      (json_int_t)c->totals[i].invoices, "total", c->totals[i].total);
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* The same as text lines: "Total CNY: 3 invoices, 1234.00". */
static void print_totals(FILE *out, const rate_ctx *c)
{
    char total[NUMFMT_MAX];
    int scale;
    int i;

    for (i = 0; c->n_books > 1 && i < c->n_totals; i++) {
        scale = billing_currency_digits(c->totals[i].currency);
        numfmt_decimal(c->totals[i].total, scale > 0 ? scale : 0, 40, c->view.thousands, total,
                       sizeof(total));
        fprintf(out, "Total %s: %" PRIu64 " invoice%s, %s\n", c->totals[i].currency,
                c->totals[i].invoices, c->totals[i].invoices == 1 ? "" : "s", total);
    }
}

/*
 * Write @root, whose last member is an empty "invoices" array, with the
 * invoices' text @items (of @n_items invoices) in that array: the bytes
 * rate_dump_json would write for the whole tree. Returns an exit code.
 */
static int write_document(json_t *root, const text *items, size_t n_items)
{
    static const char tail[] = "[]\n}";
    text head = {NULL, 0, 0};
    size_t at;
    int ok;

    if (json_dump_callback(root, text_put_cb, &head, JSON_FLAGS) != 0 ||
        head.len < sizeof(tail) - 1 ||
        memcmp(head.p + head.len - (sizeof(tail) - 1), tail, sizeof(tail) - 1) != 0) {
        free(head.p);
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    at = head.len - (sizeof(tail) - 1) + 1; /* just after the array's '[' */
    if (n_items == 0)
        ok = fwrite(head.p, 1, head.len, stdout) == head.len;
    else
        ok = fwrite(head.p, 1, at, stdout) == at &&
             fwrite(ITEM_INDENT, 1, sizeof(ITEM_INDENT) - 1, stdout) == sizeof(ITEM_INDENT) - 1 &&
             fwrite(items->p, 1, items->len, stdout) == items->len &&
             fputs("\n  ]\n}", stdout) != EOF;
    free(head.p);
    if (!ok || fputc('\n', stdout) == EOF) {
        cli_error("writing the output failed");
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

static int print_json(rate_ctx *c)
{
    dumper *d = calloc(1, sizeof(*d));
    json_t *root = json_object();
    json_t *invoices = json_array();
    pthread_t tid;
    int rc = CLI_EXIT_INTERNAL;

    if (d == NULL || root == NULL || invoices == NULL ||
        json_object_set_new(root, "summary", rate_summary_json(c)) != 0 ||
        json_object_set(root, "invoices", invoices) != 0) {
        cli_error("out of memory");
        goto done;
    }
    dumper_start(d, &tid);
    rc = for_each_invoice(c, queue_invoice, d);
    dumper_finish(d, tid);
    if (rc == CLI_EXIT_OK && d->failed) {
        cli_error("out of memory");
        rc = CLI_EXIT_INTERNAL;
    }
    if (rc == CLI_EXIT_OK && c->n_books > 1 &&
        json_object_set_new(json_object_get(root, "summary"), "currencies", totals_json(c)) != 0) {
        cli_error("out of memory");
        rc = CLI_EXIT_INTERNAL;
    }
    if (rc == CLI_EXIT_OK)
        rc = write_document(root, &d->out, d->items);
done:
    if (d != NULL)
        free(d->out.p);
    free(d);
    json_decref(invoices);
    json_decref(root);
    return rc;
}

static int print_table_resource(rate_ctx *c, const billing_invoice *ri, const char *resource,
                                void *arg)
{
    return render_resource_table(arg, ri, resource, &c->view) == 0 ? CLI_EXIT_OK
                                                                   : CLI_EXIT_INTERNAL;
}

/* One invoice's table (and its resources with --by resource) on @arg, a FILE *. */
static int print_table_invoice(rate_ctx *c, const billing_invoice *inv, void *arg)
{
    FILE *out = arg;

    if (render_invoice_table(out, inv, &c->view) != 0)
        return CLI_EXIT_INTERNAL;
    if (c->kept == NULL)
        return CLI_EXIT_OK;
    fputs("  By resource (each share rounded on its own):\n", out);
    if (for_each_resource(c, inv, print_table_resource, out) != CLI_EXIT_OK)
        return CLI_EXIT_INTERNAL;
    fputc('\n', out);
    return CLI_EXIT_OK;
}

/* The widest line of @doc (@len bytes), in characters (UTF-8 lead bytes). */
static size_t widest_line(const char *doc, size_t len)
{
    size_t widest = 0;
    size_t width = 0;
    size_t i;

    for (i = 0; i < len; i++) {
        if (doc[i] == '\n') {
            widest = width > widest ? width : widest;
            width = 0;
        } else if (((unsigned char)doc[i] & 0xC0) != 0x80) {
            width++;
        }
    }
    return width > widest ? width : widest;
}

/*
 * The tables. On a terminal they are first written to memory to be
 * measured: wider than the terminal, a line on stderr says so and how to
 * read them (the tables themselves are the same bytes either way).
 */
static int print_table(rate_ctx *c)
{
    struct winsize ws;
    char *doc = NULL;
    size_t len = 0;
    size_t widest;
    FILE *mem = NULL;
    int rc;

    memset(&ws, 0, sizeof(ws));
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        mem = open_memstream(&doc, &len);
    rc = for_each_invoice(c, print_table_invoice, mem != NULL ? mem : stdout);
    if (mem != NULL) {
        fclose(mem);
        fwrite(doc, 1, len, stdout);
        widest = widest_line(doc, len);
        free(doc);
        if (widest > ws.ws_col) {
            fflush(stdout);
            fprintf(stderr,
                    "billing rate: the tables are %zu columns wide, the terminal %u: widen it,"
                    " or read them with | less -S, or use --format csv\n",
                    widest, (unsigned)ws.ws_col);
        }
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    rate_print_counts(stdout, &c->counts);
    print_totals(stdout, c);
    return CLI_EXIT_OK;
}

static int print_csv_invoice(rate_ctx *c, const billing_invoice *inv, void *arg)
{
    (void)c;
    (void)arg;
    return render_invoice_csv(stdout, inv) == 0 ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
}

/* CSV: stdout is the table alone, so that any CSV reader takes it; the counts go to stderr. */
static int print_csv(rate_ctx *c)
{
    int rc;

    render_csv_header(stdout);
    rc = for_each_invoice(c, print_csv_invoice, NULL);
    if (rc != CLI_EXIT_OK)
        return rc;
    rate_print_counts(stderr, &c->counts);
    print_totals(stderr, c);
    return CLI_EXIT_OK;
}

int rate_print_invoices(rate_ctx *c)
{
    return c->opts.output == OUT_TABLE ? print_table(c)
           : c->opts.output == OUT_CSV ? print_csv(c)
                                       : print_json(c);
}
