/*
 * closemarks.c - close marks: which accounts changed since their draft
 * (closemarks.h, migration 0016).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "closemarks.h"
#include "invoiceprobe.h"

#define SQL_MARKS_READ                                                                   \
    "SELECT account_id, mark, same FROM billing.close_marks_compare($1::text, $2::date," \
    " $3::text, $4::boolean)"

/* clang-format off */
#define SQL_MARKS_PUT                                                                           \
    "INSERT INTO billing.close_marks AS k (account_id, month, mark, invoice_id, events,"        \
    " rejected, expired) SELECT x->>'a', $2::date, x->>'m', (SELECT i.id FROM billing.invoices" \
    " i WHERE " BS_SQL_INVOICE_PROBE("x->>'a'", "$2", "'draft', 'finalized'")                   \
    " ORDER BY i.id DESC LIMIT 1), (x->>'e')::bigint,"                                          \
    " (x->>'r')::bigint, (x->>'x')::numeric FROM jsonb_array_elements($1::jsonb) x"             \
    " ORDER BY 1 ON CONFLICT (account_id, month) DO UPDATE SET mark = EXCLUDED.mark,"           \
    " invoice_id = EXCLUDED.invoice_id, events = EXCLUDED.events,"                              \
    " rejected = EXCLUDED.rejected, expired = EXCLUDED.expired, recorded_at = now()"
/* clang-format on */

#define SQL_SUMS_ACCOUNTS "WITH a AS (SELECT x AS id FROM json_array_elements_text($1::json) x)"
/*
 * The accounts' invoices of the month, probed per account (invoiceprobe.h):
 * joined with `i.month = $2 AND i.status = 'draft'` while invoices had no
 * statistics, the planner scanned the month's drafts once per account (an
 * unchanged re-close of 100 000 accounts ran for minutes instead of 4 s;
 * doc/performance.md, "Month-end close", branch h43).
 */
/* clang-format off */
#define SQL_SUMS_PROBE(statuses)                                                                \
    " CROSS JOIN LATERAL (SELECT i.* FROM billing.invoices i WHERE "                            \
    BS_SQL_INVOICE_PROBE("a.id", "$2", statuses) " OFFSET 0) i"
#define SQL_SUMS_INVOICES SQL_SUMS_PROBE("'draft'")
#define SQL_SUMS_LINES                                                                        \
    SQL_SUMS_ACCOUNTS                                                                         \
    " SELECT CASE WHEN l.kind = 'adjustment' THEN 'adjustment'"                               \
    " ELSE coalesce(l.meter, '') END, sum(l.amount)::text, count(*) FROM a" SQL_SUMS_INVOICES \
    " JOIN billing.invoice_lines l ON l.invoice_id = i.id GROUP BY 1 ORDER BY 1"
#define SQL_SUMS_TOTALS                                                                        \
    SQL_SUMS_ACCOUNTS                                                                          \
    ", d AS (SELECT i.* FROM a" SQL_SUMS_INVOICES "),"                                         \
    " k AS (SELECT k.* FROM a JOIN billing.close_marks k ON k.account_id = a.id"               \
    " AND k.month = $2::date)"                                                                 \
    " SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM a"                                \
    SQL_SUMS_PROBE("'finalized'") "), (SELECT coalesce(sum(events), 0) FROM k),"               \
    " (SELECT coalesce(sum(rejected), 0) FROM k), (SELECT coalesce(sum(k.expired), 0)::text"   \
    " FROM k JOIN d ON d.account_id = k.account_id), (SELECT coalesce(sum(subtotal), 0)::text" \
    " FROM d), (SELECT coalesce(sum(credits), 0)::text FROM d),"                               \
    " (SELECT coalesce(sum(tax), 0)::text FROM d), (SELECT coalesce(sum(total), 0)::text"      \
    " FROM d)"
/* clang-format on */

void bs_close_marks_free(bs_close_marks *m)
{
    size_t i;

    if (m == NULL)
        return;
    for (i = 0; m->id != NULL && i < m->n; i++)
        free(m->id[i]);
    free(m->id);
    free(m->mark);
    free(m->same);
    free(m);
}

bs_status bs_close_marks_read(bs_conn *c, const char *book, const char *month, const char *version,
                              int drafts_only, bs_close_marks **out, bs_error *err)
{
    const char *params[4] = {book, month, version, drafts_only ? "true" : "false"};
    PGresult *res;
    bs_close_marks *m;
    size_t n;
    size_t i;

    *out = NULL;
    res = bs_query(c, SQL_MARKS_READ, 4, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    n = (size_t)PQntuples(res);
    m = calloc(1, sizeof(*m));
    if (m != NULL) {
        m->id = calloc(n + 1, sizeof(*m->id));
        m->mark = calloc(n + 1, sizeof(*m->mark));
        m->same = calloc(n + 1, 1);
    }
    if (m == NULL || m->id == NULL || m->mark == NULL || m->same == NULL)
        goto nomem;
    for (i = 0; i < n; i++) {
        m->id[i] = strdup(PQgetvalue(res, (int)i, 0));
        if (m->id[i] == NULL)
            goto nomem;
        m->n = i + 1;
        snprintf(m->mark[i], BS_MARK_TEXT, "%s", PQgetvalue(res, (int)i, 1));
        m->same[i] = strcmp(PQgetvalue(res, (int)i, 2), "t") == 0;
    }
    PQclear(res);
    *out = m;
    return BS_OK;
nomem:
    PQclear(res);
    bs_close_marks_free(m);
    return bs_error_set(err, BS_ERR_NOMEM, "close marks: out of memory");
}

bs_status bs_close_marks_put(bs_conn *c, const char *marks, const char *month, bs_error *err)
{
    const char *params[2] = {marks, month};

    return bs_command(c, SQL_MARKS_PUT, 2, params, NULL, err);
}

/* @v into @buf (BS_SUM_TEXT bytes); -1 if it does not fit. */
static int sum_text(char *buf, const char *v)
{
    return snprintf(buf, BS_SUM_TEXT, "%s", v) < BS_SUM_TEXT ? 0 : -1;
}

bs_status bs_close_marks_sums(bs_conn *c, const char *accounts, const char *month,
                              bs_kind_sum_fn fn, void *arg, bs_mark_sums *out, bs_error *err)
{
    const char *params[2] = {accounts, month};
    PGresult *res;
    int bad;

    memset(out, 0, sizeof(*out));
    if (bs_kind_sums(c, SQL_SUMS_LINES, 2, params, fn, arg, err) != BS_OK)
        return err != NULL ? err->status : BS_ERR_FATAL;
    res = bs_query(c, SQL_SUMS_TOTALS, 2, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    out->drafts = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    out->finalized = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    out->events = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    out->rejected = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
    bad = sum_text(out->expired, PQgetvalue(res, 0, 4)) |
          sum_text(out->subtotal, PQgetvalue(res, 0, 5)) |
          sum_text(out->credits, PQgetvalue(res, 0, 6)) |
          sum_text(out->tax, PQgetvalue(res, 0, 7)) | sum_text(out->total, PQgetvalue(res, 0, 8));
    PQclear(res);
    if (bad)
        return bs_error_set(err, BS_ERR_FATAL, "close marks: a sum longer than %d characters",
                            BS_SUM_TEXT - 1);
    return BS_OK;
}
