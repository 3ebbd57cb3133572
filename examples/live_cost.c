/*
 * live_cost.c - a live-cost service loop, the reference an embedder copies:
 * load the catalog from the same price book and accounts files as the
 * `billing` tool, read usage events of one account from stdin as they
 * come, and after each print the account's remaining credit and the
 * instant at which it runs out if what is running keeps running (what a
 * control plane shows a trial user, or a scheduler stops an instance at).
 *
 * Build: cc live_cost.c $(pkg-config --cflags --libs libbilling-config)
 * Run:   live_cost PRICEBOOK.json ACCOUNTS.json ACCOUNT < events.txt
 *
 * Input: one event a line, fields separated by spaces, "-" for an empty
 * model or region; blank lines and lines starting with '#' are skipped:
 *   ID RESOURCE METER START END QUANTITY MODEL REGION
 *   i-d1-0001 i-d1 gpu 2026-01-25T10:00:00+08:00 2026-01-25T11:00:00+08:00 8 RTX4090 cn-east-1
 * Output, after each event:
 *   ID balance BALANCE exhausted-at INSTANT|never
 *
 * Every status is checked: a bad line is reported with its number and the
 * library's message and skipped (exit status 1 at the end); running out of
 * memory stops the loop. The event handle is one reusable buffer.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <billing/billing_config.h>

#define LINE_MAX_LEN 1024 /* longest input line: ids are at most 128 bytes */
#define RUNNING_MAX 64    /* resources tracked as running: a bound, not a guess */
#define FIELD_COUNT 8

/* What a resource is doing: its latest event, re-filled for the estimate. */
typedef struct running {
    char resource[129];
    billing_event *ev;
    billing_time_t end;
} running;

typedef struct loop {
    const char *account;
    billing_rater *rater;
    billing_event *ev; /* the reusable buffer every line is parsed into */
    running run[RUNNING_MAX];
    size_t n_run;
} loop;

/* Split @line into FIELD_COUNT space-separated fields; returns how many. */
static int split(char *line, char **field)
{
    int n = 0;
    char *save = NULL;
    char *tok = strtok_r(line, " \t\r\n", &save);

    while (tok != NULL && n < FIELD_COUNT + 1) {
        field[n++] = tok;
        tok = strtok_r(NULL, " \t\r\n", &save);
    }
    return n;
}

static const char *or_empty(const char *s)
{
    return strcmp(s, "-") == 0 ? "" : s;
}

/* Fill @ev from the fields of one line; BILLING_OK or the first failure's status. */
static billing_status fill(billing_event *ev, const char *account, char **f, billing_time_t *end,
                           char *err, size_t errsize)
{
    billing_meter meter;
    billing_time_t start;
    billing_status st;
    char why[256] = "";

    billing_event_reset(ev);
    if (billing_meter_parse(f[2], &meter) != BILLING_OK) {
        snprintf(err, errsize,
                 "event '%.128s': field 'meter': '%.32s' is not gpu, gpuless, "
                 "storage or traffic",
                 f[0], f[2]);
        return BILLING_ERR_INVALID;
    }
    st = billing_time_parse(f[3], &start, why, sizeof(why));
    if (st == BILLING_OK)
        st = billing_time_parse(f[4], end, why, sizeof(why));
    if (st == BILLING_OK)
        st = billing_event_set_quantity(ev, f[5], why, sizeof(why));
    if (st != BILLING_OK) {
        snprintf(err, errsize, "event '%.128s': %s", f[0], why);
        return st;
    }
    /* Checked by billing_rater_add, which names the event if end is not after start. */
    billing_event_set_interval(ev, start, *end);
    /* The setters copy (the buffer is reused); each status is checked. */
    st = billing_event_set_id(ev, f[0]);
    if (st == BILLING_OK)
        st = billing_event_set_account(ev, account);
    if (st == BILLING_OK)
        st = billing_event_set_resource(ev, f[1]);
    if (st == BILLING_OK)
        st = billing_event_set_meter(ev, meter);
    if (st == BILLING_OK)
        st = billing_event_set_model(ev, or_empty(f[6]));
    if (st == BILLING_OK)
        st = billing_event_set_region(ev, or_empty(f[7]));
    if (st != BILLING_OK)
        snprintf(err, errsize,
                 "event '%.128s': %s (id and resource: 1..128 bytes, model and "
                 "region: 0..64)",
                 f[0], billing_strerror(st));
    return st;
}

/* Remember what resource @f[1] runs now, for the exhaustion estimate. */
static billing_status track(loop *l, char **f, char *err, size_t errsize)
{
    size_t i;

    for (i = 0; i < l->n_run && strcmp(l->run[i].resource, f[1]) != 0; i++)
        ;
    if (i == l->n_run) {
        if (l->n_run == RUNNING_MAX) {
            snprintf(err, errsize, "more than %d resources running", RUNNING_MAX);
            return BILLING_ERR_TOO_LARGE;
        }
        l->run[i].ev = billing_event_new();
        if (l->run[i].ev == NULL)
            return BILLING_ERR_NOMEM;
        snprintf(l->run[i].resource, sizeof(l->run[i].resource), "%s", f[1]);
        l->n_run++;
    }
    return fill(l->run[i].ev, l->account, f, &l->run[i].end, err, errsize);
}

/*
 * The balance at @now, and when it runs out if every resource whose latest
 * event reaches @now keeps going at that event's quantity.
 */
static billing_status report(loop *l, const char *id, billing_time_t now, char *err, size_t errsize)
{
    const billing_event *burning[RUNNING_MAX];
    char balance[64];
    char when[40];
    billing_time_t out;
    billing_status st;
    size_t n = 0;
    size_t i;

    for (i = 0; i < l->n_run; i++) {
        if (l->run[i].end >= now)
            burning[n++] = l->run[i].ev;
    }
    st = billing_rater_credit_balance(l->rater, l->account, now, balance, sizeof(balance));
    if (st != BILLING_OK) {
        snprintf(err, errsize, "balance: %s", billing_strerror(st));
        return st;
    }
    st = billing_rater_credit_exhaustion(l->rater, l->account, now, burning, n, &out, err, errsize);
    if (st != BILLING_OK)
        return st;
    if (out == INT64_MAX)
        snprintf(when, sizeof(when), "never");
    else if (billing_time_format(out, when, sizeof(when)) < 0)
        snprintf(when, sizeof(when), "?");
    printf("%s balance %s exhausted-at %s\n", id, balance, when);
    return BILLING_OK;
}

/* One input line: rate it, then report. A bad event is reported and skipped. */
static billing_status one_line(loop *l, char *line, char *err, size_t errsize)
{
    char *f[FIELD_COUNT + 1];
    billing_time_t end;
    billing_status st;
    int n = split(line, f);

    if (n == 0 || f[0][0] == '#')
        return BILLING_OK;
    if (n != FIELD_COUNT) {
        snprintf(err, errsize, "%d fields instead of %d", n, FIELD_COUNT);
        return BILLING_ERR_INVALID;
    }
    st = fill(l->ev, l->account, f, &end, err, errsize);
    if (st != BILLING_OK)
        return st;
    st = billing_rater_add(l->rater, l->ev, err, errsize);
    if (st == BILLING_DUPLICATE) {
        printf("%s duplicate: already counted\n", f[0]);
        return BILLING_OK;
    }
    if (st != BILLING_OK)
        return st;
    st = track(l, f, err, errsize);
    if (st != BILLING_OK)
        return st;
    return report(l, f[0], end, err, errsize);
}

static int run(loop *l)
{
    char line[LINE_MAX_LEN];
    char err[512];
    unsigned long lineno = 0;
    billing_status st;
    int rc = 0;

    while (fgets(line, sizeof(line), stdin) != NULL) {
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(stdin)) {
            fprintf(stderr, "stdin:%lu: line longer than %d bytes\n", lineno, LINE_MAX_LEN - 2);
            return 1;
        }
        err[0] = '\0';
        st = one_line(l, line, err, sizeof(err));
        if (st == BILLING_ERR_NOMEM) {
            fprintf(stderr, "stdin:%lu: out of memory\n", lineno);
            return 1;
        }
        if (st != BILLING_OK) {
            fprintf(stderr, "stdin:%lu: %s (%s)\n", lineno, err, billing_strerror(st));
            rc = 1;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    billing_config_zones *zones = billing_config_zones_new();
    billing_catalog *cat = NULL;
    loop l;
    char err[512];
    billing_status st;
    size_t i;
    int rc = 1;

    memset(&l, 0, sizeof(l));
    if (argc != 4) {
        fprintf(stderr, "usage: %s PRICEBOOK.json ACCOUNTS.json ACCOUNT < events\n", argv[0]);
        goto out;
    }
    l.account = argv[3];
    l.ev = billing_event_new();
    if (zones == NULL || l.ev == NULL) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    /* The same loader and messages as `billing rate`; zones from $TZDIR. */
    st = billing_config_catalog_load(argv[1], argv[2], zones, &cat, err, sizeof(err));
    if (st != BILLING_OK) {
        fprintf(stderr, "%s (%s)\n", err, billing_strerror(st));
        goto out;
    }
    if (billing_rater_new(cat, &l.rater, err, sizeof(err)) != BILLING_OK) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    rc = run(&l);
out:
    for (i = 0; i < l.n_run; i++)
        billing_event_destroy(l.run[i].ev);
    billing_event_destroy(l.ev);
    billing_rater_destroy(l.rater);
    billing_catalog_destroy(cat);        /* after its raters */
    billing_config_zones_destroy(zones); /* after the catalogs that borrow its zones */
    return rc;
}
