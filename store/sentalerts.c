/*
 * sentalerts.c - the credit alerts already sent, the grants of a batch's
 * accounts, the raw events of a window, and an account's usage version,
 * in a batch's transaction. See sentalerts.h.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentalerts.h"

/* $1: the accounts (text[]). C collation: the order strcmp searches in. */
#define SQL_SENT_READ                                     \
    "SELECT s.alert_id FROM unnest($1::text[]) AS q (id)" \
    " JOIN billing.credit_alerts s ON s.account_id = q.id ORDER BY s.alert_id COLLATE \"C\""

/*
 * The alerts as arrays, one row per element, in their order; instants as
 * whole microseconds since the epoch plus nanoseconds: exact both ways.
 */
#define SQL_SENT_INSERT_MANY                                                                    \
    "INSERT INTO billing.credit_alerts (alert_id, account_id, pct, granted, grants, threshold," \
    " balance, crossed_at, crossed_nanos, event_id) SELECT q.id, q.account, q.pct, q.granted,"  \
    " q.grants::text[], q.threshold, q.balance,"                                                \
    " 'epoch'::timestamptz + q.us * interval '1 microsecond', q.ns, q.event"                    \
    " FROM unnest($1::text[], $2::text[], $3::smallint[], $4::numeric[], $5::text[],"           \
    " $6::numeric[], $7::numeric[], $8::bigint[], $9::smallint[], $10::text[])"                 \
    " WITH ORDINALITY AS q (id, account, pct, granted, grants, threshold, balance, us, ns,"     \
    " event, ord) ORDER BY q.ord ON CONFLICT (alert_id) DO NOTHING RETURNING alert_id"

#define SQL_WINDOW                                                                                \
    "SELECT event_id, resource_id, meter,"                                                        \
    " (extract(epoch FROM start_time) * 1000000)::bigint, start_nanos,"                           \
    " (extract(epoch FROM end_time) * 1000000)::bigint, end_nanos, quantity::text, model, region" \
    " FROM billing.usage_events WHERE account_id = $1"                                            \
    " AND start_time < 'epoch'::timestamptz + $2::bigint * interval '1 microsecond'"              \
    " AND end_time >= 'epoch'::timestamptz + $3::bigint * interval '1 microsecond'"               \
    " LIMIT $4::bigint"

/* $1: the accounts; instants as microseconds since the epoch, exact (numeric). */
#define SQL_GRANTS                                                                           \
    "SELECT g.account_id, g.amount::text,"                                                   \
    " (extract(epoch FROM g.granted_at) * 1000000)::bigint,"                                 \
    " (extract(epoch FROM g.expires_at) * 1000000)::bigint, a.currency, g.id,"               \
    " (SELECT coalesce(sum(t.changes), 0) FROM billing.close_tallies t"                      \
    " WHERE t.account_id = g.account_id)::text"                                              \
    " FROM unnest($1::text[]) AS q (id) JOIN billing.credit_grants g ON g.account_id = q.id" \
    " JOIN billing.accounts a ON a.id = g.account_id"                                        \
    " ORDER BY g.account_id COLLATE \"C\", g.id COLLATE \"C\""

struct bs_account_grants {
    PGresult *res; /* owns the strings */
    bs_account_grant *rows;
    size_t n;
};

struct bs_sent_alerts {
    char **ids;
    size_t n;
};

bs_status bs_sent_alerts_read(bs_conn *c, const char *accounts, bs_sent_alerts **out, bs_error *err)
{
    const char *params[1];
    bs_sent_alerts *s;
    PGresult *res;
    int i;

    *out = NULL;
    params[0] = accounts;
    /* Prepared once per connection: it runs in every batch's transaction. */
    res = bs_query_prepared(c, "bs_sent_alerts", SQL_SENT_READ, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    s = calloc(1, sizeof(*s));
    if (s != NULL)
        s->ids = calloc((size_t)PQntuples(res) + 1, sizeof(*s->ids));
    if (s == NULL || s->ids == NULL)
        goto nomem;
    for (i = 0; i < PQntuples(res); i++) {
        s->ids[s->n] = strdup(PQgetvalue(res, i, 0));
        if (s->ids[s->n] == NULL)
            goto nomem;
        s->n++;
    }
    PQclear(res);
    *out = s;
    return BS_OK;
nomem:
    PQclear(res);
    bs_sent_alerts_free(s);
    return bs_error_set(err, BS_ERR_NOMEM, "credit alerts: out of memory");
}

int bs_sent_alerts_has(const bs_sent_alerts *s, const char *alert_id)
{
    size_t lo = 0;
    size_t hi = s != NULL ? s->n : 0;
    size_t mid;
    int cmp;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        cmp = strcmp(s->ids[mid], alert_id);
        if (cmp == 0)
            return 1;
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

void bs_sent_alerts_free(bs_sent_alerts *s)
{
    size_t i;

    if (s == NULL)
        return;
    for (i = 0; i < s->n; i++)
        free(s->ids[i]);
    free(s->ids);
    free(s);
}

/* Floor of @t / 1000 (instants before 1970 round down too). */
static int64_t micros_floor(billing_time_t t)
{
    return t / 1000 - (t % 1000 < 0);
}

/* An alert's place in a bs_sent_alerts_record call, sorted by alert_id, then place. */
typedef struct id_place {
    const char *id;
    size_t i;
} id_place;

static int id_place_cmp(const void *x, const void *y)
{
    const id_place *a = x;
    const id_place *b = y;
    int cmp = strcmp(a->id, b->id);

    if (cmp != 0)
        return cmp;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int str_cmp(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* The columns of SQL_SENT_INSERT_MANY. */
#define SENT_COLS 10

/* Alert @a's column values into @row (its numbers written into @nums). */
static void sent_row(const bs_sent_alert *a, char nums[3][32], const char **row[SENT_COLS],
                     size_t at)
{
    int64_t us = micros_floor(a->crossed_at);

    snprintf(nums[0], sizeof(nums[0]), "%d", a->pct);
    snprintf(nums[1], sizeof(nums[1]), "%" PRId64, us);
    snprintf(nums[2], sizeof(nums[2]), "%d", (int)(a->crossed_at - us * 1000));
    row[0][at] = a->alert_id;
    row[1][at] = a->account;
    row[2][at] = nums[0];
    row[3][at] = a->granted;
    row[4][at] = a->grants;
    row[5][at] = a->threshold;
    row[6][at] = a->balance;
    row[7][at] = nums[1];
    row[8][at] = nums[2];
    row[9][at] = a->event_id;
}

bs_status bs_sent_alerts_record(bs_conn *c, const bs_sent_alert *a, size_t n, int *inserted,
                                bs_error *err)
{
    const char **row[SENT_COLS] = {NULL};
    char *lit[SENT_COLS] = {NULL};
    const char *params[SENT_COLS];
    char(*nums)[3][32] = NULL;
    id_place *order = NULL;
    const char **got = NULL;
    PGresult *res = NULL;
    size_t n_rows = 0;
    size_t n_got;
    size_t i;
    int k;
    bs_status st = BS_OK;

    if (n == 0)
        return BS_OK;
    if (n > BS_SENT_ALERTS_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "credit alerts: %zu in one statement, at most %d",
                            n, BS_SENT_ALERTS_MAX);
    memset(inserted, 0, n * sizeof(*inserted));
    order = malloc(n * sizeof(*order));
    nums = malloc(n * sizeof(*nums));
    for (k = 0; k < SENT_COLS; k++)
        row[k] = malloc(n * sizeof(*row[k]));
    if (order == NULL || nums == NULL)
        goto nomem;
    for (k = 0; k < SENT_COLS; k++) {
        if (row[k] == NULL)
            goto nomem;
    }
    /* Only the first of an alert_id is written (as one INSERT each would). */
    for (i = 0; i < n; i++) {
        order[i].id = a[i].alert_id;
        order[i].i = i;
    }
    qsort(order, n, sizeof(*order), id_place_cmp);
    for (i = 0; i < n; i++) {
        if (i == 0 || strcmp(order[i].id, order[i - 1].id) != 0)
            inserted[order[i].i] = -1;
    }
    for (i = 0; i < n; i++) {
        if (inserted[i] != 0) {
            sent_row(&a[i], nums[n_rows], row, n_rows);
            n_rows++;
        }
    }
    for (k = 0; k < SENT_COLS; k++) {
        lit[k] = bs_text_array(row[k], n_rows);
        if (lit[k] == NULL)
            goto nomem;
        params[k] = lit[k];
    }
    /* Prepared once per connection: one INSERT per batch's alerts, planned once. */
    res = bs_query_prepared(c, "bs_sent_insert_many", SQL_SENT_INSERT_MANY, SENT_COLS, params, err);
    if (res == NULL) {
        st = err != NULL ? err->status : BS_ERR_FATAL;
        goto out;
    }
    n_got = (size_t)PQntuples(res);
    got = malloc((n_got + 1) * sizeof(*got));
    if (got == NULL)
        goto nomem;
    for (i = 0; i < n_got; i++)
        got[i] = PQgetvalue(res, (int)i, 0);
    qsort(got, n_got, sizeof(*got), str_cmp);
    /* Written: returned by the INSERT (an alert_id already there is not). */
    for (i = 0; i < n; i++) {
        if (inserted[i] != 0)
            inserted[i] = bsearch(&a[i].alert_id, got, n_got, sizeof(*got), str_cmp) != NULL;
    }
    goto out;
nomem:
    st = bs_error_set(err, BS_ERR_NOMEM, "credit alerts: out of memory");
out:
    if (st != BS_OK)
        memset(inserted, 0, n * sizeof(*inserted));
    PQclear(res);
    free(got);
    for (k = 0; k < SENT_COLS; k++) {
        free(row[k]);
        free(lit[k]);
    }
    free(nums);
    free(order);
    return st;
}

/* One row of SQL_WINDOW to @fn, when it overlaps [@from, @to) exactly; 0 or -1 (stopped). */
static int feed_row(const PGresult *res, int i, const char *account, billing_time_t from,
                    billing_time_t to, bs_event_fn fn, void *arg)
{
    billing_time_t start =
        strtoll(PQgetvalue(res, i, 3), NULL, 10) * 1000 + strtoll(PQgetvalue(res, i, 4), NULL, 10);
    billing_time_t end =
        strtoll(PQgetvalue(res, i, 5), NULL, 10) * 1000 + strtoll(PQgetvalue(res, i, 6), NULL, 10);

    /* The query's bounds are whole microseconds, wider than the window. */
    if (start >= to || end <= from)
        return 0;
    return fn(arg, account, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
              start, end, PQgetvalue(res, i, 7), PQgetvalue(res, i, 8), PQgetvalue(res, i, 9));
}

bs_status bs_events_window(bs_conn *c, const char *account, billing_time_t from, billing_time_t to,
                           long max_rows, bs_event_fn fn, void *arg, int *more, bs_error *err)
{
    char to_us[32];
    char from_us[32];
    char limit[32];
    const char *params[4];
    PGresult *res;
    bs_status st = BS_OK;
    int i;

    /* to rounded up, from down: every event of the window is read. */
    snprintf(to_us, sizeof(to_us), "%" PRId64, micros_floor(to - 1) + 1);
    snprintf(from_us, sizeof(from_us), "%" PRId64, micros_floor(from));
    snprintf(limit, sizeof(limit), "%ld", max_rows + 1);
    params[0] = account;
    params[1] = to_us;
    params[2] = from_us;
    params[3] = limit;
    res = bs_query_prepared(c, "bs_events_window", SQL_WINDOW, 4, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    *more = PQntuples(res) > max_rows;
    for (i = 0; !*more && i < PQntuples(res) && st == BS_OK; i++) {
        if (feed_row(res, i, account, from, to, fn, arg) != 0)
            st = bs_error_set(err, BS_ERR_INVALID, "event '%.128s' was not accepted",
                              PQgetvalue(res, i, 0));
    }
    PQclear(res);
    return st;
}

/*
 * $1: the accounts. The latest end of each one's stored events, exact
 * (microseconds and the nanoseconds past them); none for an account
 * without events.
 */
#define SQL_USAGE_ENDS                                                                     \
    "SELECT q.id, m.us, m.ns FROM unnest($1::text[]) AS q (id) CROSS JOIN LATERAL"         \
    " (SELECT (extract(epoch FROM e.end_time) * 1000000)::bigint AS us, e.end_nanos AS ns" \
    " FROM billing.usage_events e WHERE e.account_id = q.id"                               \
    " ORDER BY e.end_time DESC, e.end_nanos DESC LIMIT 1) AS m"

bs_status bs_usage_ends_read(bs_conn *c, const char *accounts, bs_usage_end_fn fn, void *arg,
                             bs_error *err)
{
    const char *params[1];
    PGresult *res;
    billing_time_t end;
    int i;

    params[0] = accounts;
    /* Prepared once per connection: billingd's alert cache runs it when it warms accounts. */
    res = bs_query_prepared(c, "bs_usage_ends", SQL_USAGE_ENDS, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < PQntuples(res); i++) {
        end = strtoll(PQgetvalue(res, i, 1), NULL, 10) * 1000 +
              strtoll(PQgetvalue(res, i, 2), NULL, 10);
        fn(arg, PQgetvalue(res, i, 0), end);
    }
    PQclear(res);
    return BS_OK;
}

/*
 * $1: the accounts, $2: for each, the whole microsecond its events must
 * end at or after; $3: the most rows read of one account. The columns of
 * SQL_WINDOW after the account.
 */
#define SQL_SINCE                                                                                  \
    "SELECT q.id, e.event_id, e.resource_id, e.meter,"                                             \
    " (extract(epoch FROM e.start_time) * 1000000)::bigint, e.start_nanos,"                        \
    " (extract(epoch FROM e.end_time) * 1000000)::bigint, e.end_nanos, e.quantity::text, e.model," \
    " e.region FROM unnest($1::text[], $2::bigint[]) AS q (id, us) CROSS JOIN LATERAL"             \
    " (SELECT * FROM billing.usage_events u WHERE u.account_id = q.id"                             \
    " AND u.end_time >= 'epoch'::timestamptz + q.us * interval '1 microsecond' LIMIT $3::bigint) " \
    "e"

bs_status bs_events_since_read(bs_conn *c, const char *const *accounts, const billing_time_t *froms,
                               size_t n, long max_rows, bs_event_fn fn, void *arg, bs_error *err)
{
    const char *params[3];
    char limit[32];
    char *names = NULL;
    char *us = NULL;
    size_t len = 0;
    size_t i;
    PGresult *res = NULL;
    billing_time_t start;
    billing_time_t end;
    bs_status st = BS_OK;
    int r;

    if (n == 0)
        return BS_OK;
    names = bs_text_array(accounts, n);
    us = malloc(n * 24 + 3);
    if (names == NULL || us == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "events: out of memory");
        goto out;
    }
    us[len++] = '{';
    for (i = 0; i < n; i++)
        len +=
            (size_t)snprintf(us + len, 24, "%s%" PRId64, i > 0 ? "," : "", micros_floor(froms[i]));
    us[len++] = '}';
    us[len] = '\0';
    snprintf(limit, sizeof(limit), "%ld", max_rows + 1);
    params[0] = names;
    params[1] = us;
    params[2] = limit;
    /* Prepared once per connection: billingd's alert cache runs it when it warms accounts. */
    res = bs_query_prepared(c, "bs_events_since", SQL_SINCE, 3, params, err);
    if (res == NULL) {
        st = err != NULL ? err->status : BS_ERR_FATAL;
        goto out;
    }
    for (r = 0; r < PQntuples(res) && st == BS_OK; r++) {
        start = strtoll(PQgetvalue(res, r, 4), NULL, 10) * 1000 +
                strtoll(PQgetvalue(res, r, 5), NULL, 10);
        end = strtoll(PQgetvalue(res, r, 6), NULL, 10) * 1000 +
              strtoll(PQgetvalue(res, r, 7), NULL, 10);
        if (fn(arg, PQgetvalue(res, r, 0), PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
               PQgetvalue(res, r, 3), start, end, PQgetvalue(res, r, 8), PQgetvalue(res, r, 9),
               PQgetvalue(res, r, 10)) != 0)
            st = bs_error_set(err, BS_ERR_INVALID, "event '%.128s' was not accepted",
                              PQgetvalue(res, r, 1));
    }
out:
    PQclear(res);
    free(names);
    free(us);
    return st;
}

/* A microsecond column of SQL_GRANTS, in nanoseconds. */
static billing_time_t grant_nanos(const PGresult *res, int i, int col)
{
    return (billing_time_t)strtoll(PQgetvalue(res, i, col), NULL, 10) * 1000;
}

bs_status bs_account_grants_read(bs_conn *c, const char *accounts, bs_account_grants **out,
                                 bs_error *err)
{
    const char *params[1];
    bs_account_grants *g;
    bs_account_grant *r;
    int i;

    *out = NULL;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "credit grants: out of memory");
    params[0] = accounts;
    /* Prepared once per connection: it runs in every batch's transaction. */
    g->res = bs_query_prepared(c, "bs_account_grants", SQL_GRANTS, 1, params, err);
    if (g->res == NULL) {
        free(g);
        return err != NULL ? err->status : BS_ERR_FATAL;
    }
    g->rows = calloc((size_t)PQntuples(g->res) + 1, sizeof(*g->rows));
    if (g->rows == NULL) {
        bs_account_grants_free(g);
        return bs_error_set(err, BS_ERR_NOMEM, "credit grants: out of memory");
    }
    for (i = 0; i < PQntuples(g->res); i++) {
        r = &g->rows[g->n++];
        r->account = PQgetvalue(g->res, i, 0);
        r->amount = PQgetvalue(g->res, i, 1);
        r->granted_at = grant_nanos(g->res, i, 2);
        r->expires_at = grant_nanos(g->res, i, 3);
        r->currency = PQgetvalue(g->res, i, 4);
        r->id = PQgetvalue(g->res, i, 5);
        r->changes = strtoll(PQgetvalue(g->res, i, 6), NULL, 10);
    }
    *out = g;
    return BS_OK;
}

size_t bs_account_grants_count(const bs_account_grants *g)
{
    return g != NULL ? g->n : 0;
}

const bs_account_grant *bs_account_grants_at(const bs_account_grants *g, size_t i)
{
    return &g->rows[i];
}

void bs_account_grants_free(bs_account_grants *g)
{
    if (g == NULL)
        return;
    PQclear(g->res);
    free(g->rows);
    free(g);
}
