/*
 * invoices.c - month-end close in the store. See invoices.h and
 * doc/database.md ("Month-end close").
 *
 * Drafts are written set-based: a batch of accounts' drafts travels by
 * binary COPY into temporary tables, and each step (lock, look up,
 * reverse, replace, insert lines, credits, ledger) is one statement over
 * them, whatever the batch size. Rows are joined to their invoice by (account, month),
 * which the one-open-draft index makes unique, so no ids travel back.
 */
#include "config.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "closemarks.h"
#include "copy.h"
#include "drafthash.h"
#include "invoices.h"
#include "invoiceprobe.h"
#include "kindsums.h"
#include "md5.h"
#include "rowtext.h"

#define MSG_MAX 1024
#define TIME_TEXT 48

#define SQL_ACCOUNTS_ALL                                                          \
    "SELECT coalesce(json_agg(id ORDER BY id), '[]')::text FROM billing.accounts" \
    " WHERE currency = $1::char(3)"
#define SQL_ACCOUNTS_DRAFTS                                                          \
    "SELECT coalesce(json_agg(DISTINCT account_id ORDER BY account_id), '[]')::text" \
    " FROM billing.invoices WHERE currency = $1::char(3) AND month = $2::date"       \
    " AND kind = 'invoice' AND status = 'draft'"

bs_status bs_close_accounts(bs_conn *c, const char *currency, const char *month, int drafts_only,
                            char **out, bs_error *err)
{
    const char *params[2] = {currency, month};
    PGresult *res;

    *out = NULL;
    res = bs_query(c, drafts_only ? SQL_ACCOUNTS_DRAFTS : SQL_ACCOUNTS_ALL, drafts_only ? 2 : 1,
                   params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    *out = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (*out == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "account list: out of memory");
    return BS_OK;
}

#define SQL_REJECTED_SINCE \
    "SELECT count(*) FROM billing.rejected_events WHERE received_at >= $1::timestamptz"

bs_status bs_rejected_since(bs_conn *c, billing_time_t since, int64_t *count, bs_error *err)
{
    char text[TIME_TEXT];
    const char *params[1] = {text};
    PGresult *res;

    billing_time_format(since, text, sizeof(text));
    res = bs_query(c, SQL_REJECTED_SINCE, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    *count = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return BS_OK;
}

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * The events stream out of one COPY in PostgreSQL's binary format:
 * instants as microseconds (plus the 0..999 nanoseconds column), text as
 * its bytes, the quantity as a binary numeric, written as numeric_out
 * would here (the server's numeric_out per event was a part of the
 * COPY's cost). Before, a cursor
 * was FETCHed 20 000 rows at a time in text: each FETCH ran the cursor
 * into a tuplestore before sending it, and formatting two timestamptz
 * per event was a third of that (doc/performance.md, "Month-end close",
 * 2026-12-06, the first close). COPY takes no parameters: they travel as
 * settings of the transaction, which the statement reads back.
 */
#define SQL_EVENTS_PARAMS                                          \
    "SELECT set_config('billing.close_accounts', $1::text, true)," \
    " set_config('billing.close_before', $2::timestamptz::text, true)"
#define SQL_EVENTS_COPY                                                               \
    "COPY (SELECT account_id, event_id, resource_id, meter, start_time, start_nanos," \
    " end_time, end_nanos, quantity, model, region FROM billing.usage_events"         \
    " WHERE account_id = ANY (ARRAY(SELECT json_array_elements_text("                 \
    " current_setting('billing.close_accounts')::json)))"                             \
    " AND start_time < current_setting('billing.close_before')::timestamptz)"         \
    " TO STDOUT (FORMAT binary)"
#define EVENT_FIELDS 11
/* The PGCOPY binary header: signature, flags, header extension length. */
#define COPY_SIGNATURE "PGCOPY\n\377\r\n\0"
#define COPY_HEADER 19
/* Microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01. */
#define PG_EPOCH_US INT64_C(946684800000000)

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/*
 * A binary timestamptz (@us, 8 bytes) and smallint nanoseconds (@ns, 2
 * bytes) into *@out. Returns 0, or -1 for infinities, values out of
 * range and nanoseconds outside 0..999.
 */
static int parse_instant(const unsigned char *us, const unsigned char *ns, billing_time_t *out)
{
    int64_t v = (int64_t)((uint64_t)be32(us) << 32 | be32(us + 4));
    int nanos = (int16_t)((uint16_t)(ns[0] << 8 | ns[1]));
    const int64_t lim = INT64_MAX / 1000 - PG_EPOCH_US - 1;

    if (v <= -lim || v >= lim || nanos < 0 || nanos > 999)
        return -1;
    *out = (v + PG_EPOCH_US) * 1000 + nanos;
    return 0;
}

/* Room for a stored quantity's text; a longer one is cut (and refused by the rater as too long). */
#define QUANTITY_TEXT 160
#define NUMERIC_POS 0x0000
#define NUMERIC_NEG 0x4000

/*
 * The binary numeric of @len bytes at @p as numeric_out writes it, into
 * @out (@size bytes, cut to fit). Returns 0, or -1 if it is malformed or
 * not a finite number.
 */
static int numeric_text(const unsigned char *p, int len, char *out, size_t size)
{
    int ndigits;
    int weight;
    int sign;
    int dscale;
    int g;
    int k;
    size_t n = 0;

    if (len < 8)
        return -1;
    ndigits = (int16_t)(uint16_t)(p[0] << 8 | p[1]);
    weight = (int16_t)(uint16_t)(p[2] << 8 | p[3]);
    sign = p[4] << 8 | p[5];
    dscale = p[6] << 8 | p[7];
    if (ndigits < 0 || len != 8 + 2 * ndigits || (sign != NUMERIC_POS && sign != NUMERIC_NEG) ||
        dscale > 0x3fff)
        return -1;
    for (g = 0; g < ndigits; g++) {
        if ((p[8 + 2 * g] << 8 | p[9 + 2 * g]) > 9999)
            return -1;
    }
#define DIGIT(g) ((g) >= 0 && (g) < ndigits ? p[8 + 2 * (g)] << 8 | p[9 + 2 * (g)] : 0)
#define PUT(ch)                    \
    do {                           \
        if (n + 1 < size)          \
            out[n++] = (char)(ch); \
    } while (0)
    if (sign == NUMERIC_NEG)
        PUT('-');
    if (weight < 0)
        PUT('0');
    /* Digits by hand: snprintf per group was a twentieth of the tool's time of a close. */
    for (g = 0; g <= weight; g++) {
        int v = DIGIT(g);
        int lead = g == 0; /* the first group without its leading zeros */
        for (k = 0; k < 4; k++) {
            static const int pow10[4] = {1000, 100, 10, 1};
            int dg = v / pow10[k] % 10;
            if (lead && dg == 0 && k < 3)
                continue;
            lead = 0;
            PUT('0' + dg);
        }
    }
    if (dscale > 0)
        PUT('.');
    for (k = 0; k < dscale; k++) {
        static const int pow10[4] = {1000, 100, 10, 1};
        PUT('0' + DIGIT(weight + 1 + k / 4) / pow10[k % 4] % 10);
    }
#undef PUT
#undef DIGIT
    out[n] = '\0';
    return 0;
}

/*
 * One tuple of the COPY (@len bytes at @row) to @fn: each field is
 * NUL-terminated in place (the byte after it is the next length's, read
 * first). Returns 1 at the trailer, 0 for a row, -1 malformed (message in
 * @err), -2 when @fn refused it.
 */
static int feed_copy_row(char *row, int len, bs_event_fn fn, void *arg, bs_error *err)
{
    const unsigned char *u = (const unsigned char *)row;
    char *field[EVENT_FIELDS];
    int flen[EVENT_FIELDS];
    billing_time_t start;
    billing_time_t end;
    char quantity[QUANTITY_TEXT];
    int at = 2;
    int i;

    if (len >= 2 && u[0] == 0xff && u[1] == 0xff)
        return 1;
    if (len < 2 || (u[0] << 8 | u[1]) != EVENT_FIELDS) {
        bs_error_set(err, BS_ERR_FATAL, "events: unexpected row in the COPY");
        return -1;
    }
    for (i = 0; i < EVENT_FIELDS; i++) {
        if (at + 4 > len) {
            bs_error_set(err, BS_ERR_FATAL, "events: truncated row in the COPY");
            return -1;
        }
        flen[i] = (int)be32(u + at);
        at += 4;
        if (flen[i] < 0 || flen[i] > len - at) {
            bs_error_set(err, BS_ERR_FATAL, "events: field %d of a row: bad length", i + 1);
            return -1;
        }
        field[i] = row + at;
        at += flen[i];
    }
    if (flen[4] != 8 || flen[5] != 2 || flen[6] != 8 || flen[7] != 2) {
        bs_error_set(err, BS_ERR_FATAL, "events: unexpected instant fields in the COPY");
        return -1;
    }
    if (parse_instant((const unsigned char *)field[4], (const unsigned char *)field[5], &start) !=
            0 ||
        parse_instant((const unsigned char *)field[6], (const unsigned char *)field[7], &end) !=
            0) {
        field[1][flen[1]] = '\0';
        bs_error_set(err, BS_ERR_INVALID, "event '%.128s': instant out of range", field[1]);
        return -2;
    }
    if (numeric_text((const unsigned char *)field[8], flen[8], quantity, sizeof(quantity)) != 0) {
        field[1][flen[1]] = '\0';
        bs_error_set(err, BS_ERR_INVALID, "event '%.128s': quantity malformed", field[1]);
        return -2;
    }
    /* Back to front: field i's terminator overwrites field i+1's length, read above. */
    for (i = EVENT_FIELDS - 1; i >= 0; i--) {
        if (i < 4 || i > 8)
            field[i][flen[i]] = '\0';
    }
    if (fn(arg, field[0], field[1], field[2], field[3], start, end, quantity, field[9],
           field[10]) != 0) {
        bs_error_set(err, BS_ERR_INVALID, "event '%.128s' was not accepted", field[1]);
        return -2;
    }
    return 0;
}

/*
 * The rows of the COPY to @fn until its end; after a failure the rest is
 * read and dropped, so that the connection is usable again. Returns BS_OK
 * or the first error.
 */
static bs_status feed_copy(bs_conn *c, bs_event_fn fn, void *arg, bs_error *err)
{
    PGconn *pg = bs_pg(c);
    bs_status st = BS_OK;
    int header = 1;
    int done = 0;
    PGresult *res;
    char *row;
    int len;
    int r;

    while ((len = PQgetCopyData(pg, &row, 0)) > 0) {
        char *at = row;
        if (header) {
            header = 0;
            if (len < COPY_HEADER || memcmp(row, COPY_SIGNATURE, 11) != 0) {
                if (st == BS_OK)
                    st = bs_error_set(err, BS_ERR_FATAL, "events: not a binary COPY");
                PQfreemem(row);
                continue;
            }
            /* The header arrives with the first row (or the trailer). */
            at += COPY_HEADER + be32((const unsigned char *)row + 15);
            len -= (int)(at - row);
        }
        if (st == BS_OK && !done && len > 0) {
            r = feed_copy_row(at, len, fn, arg, err);
            if (r == 1)
                done = 1;
            else if (r < 0)
                st = err != NULL && err->status != BS_OK ? err->status : BS_ERR_FATAL;
        }
        PQfreemem(row);
    }
    if (len == -2 && st == BS_OK)
        st = bs_error_set(err, BS_ERR_RETRY, "events: COPY: %s", PQerrorMessage(pg));
    while ((res = PQgetResult(pg)) != NULL) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && st == BS_OK) {
            bs_status cls = bs_classify_sqlstate(PQresultErrorField(res, PG_DIAG_SQLSTATE));
            if (PQstatus(pg) != CONNECTION_OK)
                cls = BS_ERR_RETRY;
            st = bs_error_set(err, cls, "events: COPY: %s", PQresultErrorMessage(res));
        }
        PQclear(res);
    }
    return st;
}

bs_status bs_events_fetch(bs_conn *c, const char *accounts, billing_time_t before, bs_event_fn fn,
                          void *arg, bs_error *err)
{
    char before_text[TIME_TEXT];
    const char *params[2];
    PGresult *res;
    bs_status st;

    billing_time_format(before, before_text, sizeof(before_text));
    params[0] = accounts;
    params[1] = before_text;
    st = bs_begin(c, err);
    if (st != BS_OK)
        return st;
    st = bs_command(c, "SET TRANSACTION READ ONLY", 0, NULL, NULL, err);
    if (st == BS_OK)
        st = bs_command(c, SQL_EVENTS_PARAMS, 2, params, NULL, err);
    if (st == BS_OK) {
        res = PQexec(bs_pg(c), SQL_EVENTS_COPY);
        if (PQresultStatus(res) == PGRES_COPY_OUT)
            st = feed_copy(c, fn, arg, err);
        else
            st =
                bs_error_set(err, PQstatus(bs_pg(c)) == CONNECTION_OK ? BS_ERR_FATAL : BS_ERR_RETRY,
                             "events: COPY: %s",
                             res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(bs_pg(c)));
        PQclear(res);
    }
    if (st != BS_OK) {
        bs_rollback(c);
        return st;
    }
    return bs_commit(c, err);
}

/* @s, or NULL for NULL or "". */
static const char *nonempty(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : NULL;
}

/* ---------------------------------------------------------------------- */
/* Writing drafts                                                          */
/* ---------------------------------------------------------------------- */

/*
 * The batch travels by binary COPY into three temporary tables, typed
 * columns, one row per draft (bs_batch: n, account, invoice id once
 * known, header figures, content hash), per line (bs_batch_lines) and
 * per credit applied, expired or returned (bs_batch_credits), which every
 * later statement reads. Before, the drafts travelled as one jsonb array
 * that the server parsed, stored compressed and decompressed again for
 * every `->>` (9 % of the server's time of a first close, and the casts
 * from text besides; doc/performance.md, "Month-end close").
 *
 * Invoices are found per draft by (account, month) or by id, never by
 * scanning the month: the write transaction turns hash and merge joins
 * and sequential scans off, because the planner's statistics of invoices
 * lag behind a close that is filling the table, and with them it scanned
 * every draft of the month for each batch (quadratic in accounts). JIT
 * is off too: the cost penalty of a disabled plan type made every
 * statement look expensive enough to compile, which took longer than
 * running it. The child tables are read through their primary keys'
 * order, each row joined to its draft by n.
 *
 * Made once per session and emptied at each commit (a rollback leaves
 * their rows dead): creating and dropping them, with their indexes, in
 * every batch's transaction was about 5 % of the server's time of a close.
 */
#define SQL_BATCH_TABLE                                                                      \
    "CREATE TEMPORARY TABLE IF NOT EXISTS bs_batch (n integer PRIMARY KEY,"                  \
    " a text NOT NULL UNIQUE, id bigint, cur text NOT NULL, ps timestamptz NOT NULL,"        \
    " pe timestamptz NOT NULL, tr numeric NOT NULL, sub numeric NOT NULL,"                   \
    " cr numeric NOT NULL, ret numeric NOT NULL, ac numeric NOT NULL, car numeric NOT NULL," \
    " acl numeric NOT NULL, tax numeric NOT NULL, tot numeric NOT NULL, h text NOT NULL)"    \
    " ON COMMIT DELETE ROWS"
#define SQL_BATCH_LINES_TABLE                                                           \
    "CREATE TEMPORARY TABLE IF NOT EXISTS bs_batch_lines (n integer, line_no integer,"  \
    " k text, m text, mo text, r text, p text, v text, adj text, q numeric, d numeric," \
    " u text, up numeric, am numeric, uf timestamptz, ut timestamptz,"                  \
    " PRIMARY KEY (n, line_no)) ON COMMIT DELETE ROWS"
/* e: 'apply' (credits), 'expire' (expired), 'return' (returned); s: the order in the invoice. */
#define SQL_BATCH_CREDITS_TABLE                                                            \
    "CREATE TEMPORARY TABLE IF NOT EXISTS bs_batch_credits (n integer, e text, s integer," \
    " g text NOT NULL, am numeric NOT NULL, rem numeric, PRIMARY KEY (n, e, s))"           \
    " ON COMMIT DELETE ROWS"
#define SQL_BATCH_COPY                                                               \
    "COPY bs_batch (n, a, cur, ps, pe, tr, sub, cr, ret, ac, car, acl, tax, tot, h)" \
    " FROM STDIN (FORMAT binary)"
#define BATCH_COLUMNS 15
#define SQL_BATCH_LINES_COPY                                                            \
    "COPY bs_batch_lines (n, line_no, k, m, mo, r, p, v, adj, q, d, u, up, am, uf, ut)" \
    " FROM STDIN (FORMAT binary)"
#define BATCH_LINE_COLUMNS 16
#define SQL_BATCH_CREDITS_COPY \
    "COPY bs_batch_credits (n, e, s, g, am, rem) FROM STDIN (FORMAT binary)"
#define BATCH_CREDIT_COLUMNS 6
#define SQL_BATCH_PLANNER                                                               \
    "SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin'," \
    " 'off', true), set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
/* Accounts (a JSON array of ids) locked in hash order, so that concurrent closes cannot deadlock. */
#define SQL_DRAFT_LOCK_IDS                                                                     \
    "SELECT count(*) FROM (SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT"              \
    " hashtextextended(a, 7091318301203063141) AS k FROM json_array_elements_text($1::json) a" \
    " ORDER BY k OFFSET 0) s) t"
#define SQL_SERIES "SELECT billing.ensure_invoice_series($1::text, $1::text || '-')"
/* The batch's invoices of the month, probed per draft (see SQL_DRAFT_STALE, invoiceprobe.h). */
#define SQL_BATCH_INVOICES(statuses)                                             \
    " FROM bs_batch b CROSS JOIN LATERAL (SELECT i.id, i.status, i.content_hash" \
    " FROM billing.invoices i WHERE " BS_SQL_INVOICE_PROBE("b.a", "$1", statuses) " OFFSET 0) i"
/* clang-format off */
#define SQL_DRAFT_EXISTING                                                  \
    "SELECT b.n, i.id, i.status, i.content_hash IS NOT DISTINCT FROM b.h" \
    SQL_BATCH_INVOICES("'draft', 'finalized'")
/* clang-format on */
/* Drafts not to write (unchanged, or their month finalized) leave the batch. */
#define SQL_BATCH_DROP "DELETE FROM bs_batch WHERE n = ANY ($1::integer[])"
/* clang-format off */
#define SQL_BATCH_OPEN                                         \
    "UPDATE bs_batch k SET id = o.id FROM (SELECT b.n, i.id" \
    SQL_BATCH_INVOICES("'draft'") ") o WHERE k.n = o.n"
/* clang-format on */
#define SQL_IDS "SELECT x::bigint FROM json_array_elements_text($1::json) x"
/*
 * A recomputed draft's ledger entries are undone per grant: what it took
 * (apply, expire) by a 'reverse', what its refunds gave back (a
 * 'reverse') by an 'apply' of the same amount.
 */
#define SQL_DRAFT_REVERSE                                                                      \
    "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"            \
    " effective_at, note) SELECT l.grant_id, CASE WHEN sum(l.amount_minor) < 0 THEN 'reverse'" \
    " ELSE 'apply' END, -sum(l.amount_minor), l.invoice_id,"                                   \
    " now(), 'draft recomputed' FROM billing.credit_ledger l WHERE l.invoice_id = ANY "        \
    "(ARRAY(" SQL_IDS ")) GROUP BY l.grant_id, l.invoice_id HAVING sum(l.amount_minor) <> 0"
#define SQL_DRAFT_DELETE_LINES \
    "DELETE FROM billing.invoice_lines WHERE invoice_id = ANY (ARRAY(" SQL_IDS "))"
#define SQL_DRAFT_DELETE_CREDITS \
    "DELETE FROM billing.invoice_credits WHERE invoice_id = ANY (ARRAY(" SQL_IDS "))"
#define SQL_DRAFT_DELETE_RETURNED \
    "DELETE FROM billing.invoice_returned_credits WHERE invoice_id = ANY (ARRAY(" SQL_IDS "))"
#define SQL_DRAFT_FIGURES                                                        \
    "period_start = b.ps, period_end = b.pe, tax_rate = b.tr, subtotal = b.sub," \
    " credits = b.cr, returned = b.ret, account_credit = b.ac, carried = b.car," \
    " account_credit_left = b.acl, tax = b.tax, total = b.tot, content_hash = b.h"
#define SQL_DRAFT_UPDATE                                                      \
    "UPDATE billing.invoices i SET " SQL_DRAFT_FIGURES ", updated_at = now()" \
    " FROM bs_batch b WHERE i.id = b.id"
/* New drafts: inserted, and their ids noted in the batch. */
#define SQL_DRAFT_INSERT                                                                  \
    "WITH ins AS (INSERT INTO billing.invoices (account_id, currency, month, series,"     \
    " period_start, period_end, tax_rate, subtotal, credits, returned, account_credit,"   \
    " carried, account_credit_left, tax, total, content_hash)"                            \
    " SELECT b.a, b.cur, $1::date, $2::text, b.ps, b.pe, b.tr, b.sub, b.cr, b.ret, b.ac," \
    " b.car, b.acl, b.tax, b.tot, b.h FROM bs_batch b WHERE b.id IS NULL ORDER BY b.n"    \
    " RETURNING id, account_id)"                                                          \
    " UPDATE bs_batch b SET id = ins.id FROM ins WHERE b.a = ins.account_id"
/* The drafts of the batch, each joined to its invoice. */
#define SQL_DRAFT_JOIN " FROM bs_batch b JOIN billing.invoices i ON i.id = b.id"
/*
 * Lines name the price version by label: the book's revision in force,
 * looked up once per statement (a subquery per line over the view cost
 * most of the statement).
 */
#define SQL_DRAFT_LINES                                                                    \
    "WITH v AS (SELECT DISTINCT ON (label) label, id FROM billing.current_price_versions"  \
    " WHERE book_id = $1::text ORDER BY label, effective_from DESC)"                       \
    " INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, model, region," \
    " plan_id, price_version_id, adjusts_month, quantity, quantity_den, unit, unit_price," \
    " amount, unused_from, unused_to) SELECT b.id, l.line_no, l.k, l.m, l.mo, l.r, l.p,"   \
    " v.id, l.adj::date, l.q, l.d, l.u, l.up, l.am, l.uf, l.ut FROM bs_batch_lines l"      \
    " JOIN bs_batch b ON b.n = l.n LEFT JOIN v ON v.label = l.v ORDER BY l.n, l.line_no"
/* A draft's credits of kind @e in its invoice's order. */
#define SQL_BATCH_CREDITS_OF(e) \
    " FROM bs_batch_credits c JOIN bs_batch b ON b.n = c.n WHERE c.e = '" e "' ORDER BY c.n, c.s"
#define SQL_DRAFT_CREDITS                                                           \
    "INSERT INTO billing.invoice_credits (invoice_id, grant_id, amount, remaining)" \
    " SELECT b.id, c.g, c.am, c.rem" SQL_BATCH_CREDITS_OF("apply")
/* Minor units: the amounts have exactly the currency's digits. */
#define SQL_DRAFT_RETURNED_ROWS                                                              \
    "INSERT INTO billing.invoice_returned_credits (invoice_id, grant_id, amount, remaining)" \
    " SELECT b.id, c.g, c.am, c.rem" SQL_BATCH_CREDITS_OF("return")
/* The batch's credit rows, each joined to its draft's invoice and currency. */
#define SQL_DRAFT_CREDIT_JOIN                                                       \
    " FROM bs_batch_credits c JOIN bs_batch b ON b.n = c.n JOIN billing.invoices i" \
    " ON i.id = b.id JOIN billing.currencies cu ON cu.code = i.currency"
/* Credit that refunds gave back to the grants that paid: 'reverse' entries, before the others. */
#define SQL_DRAFT_RETURNED                                                               \
    "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"      \
    " effective_at, note) SELECT c.g, 'reverse', trunc(c.am * 10::numeric ^ cu.digits)," \
    " i.id, i.period_end, 'billing close: refund'" SQL_DRAFT_CREDIT_JOIN                 \
    " WHERE c.e = 'return' ORDER BY c.n, c.s"
/* Per draft, what it applied, then what expired ('apply' < 'expire'). */
/* clang-format off */
#define SQL_DRAFT_LEDGER                                                                  \
    "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"       \
    " effective_at, note) SELECT c.g, c.e, -trunc(c.am * 10::numeric ^ cu.digits), i.id," \
    " CASE c.e WHEN 'apply' THEN i.period_end ELSE g.expires_at END, 'billing close'"     \
    SQL_DRAFT_CREDIT_JOIN " JOIN billing.credit_grants g ON g.id = c.g"                   \
    " WHERE c.e IN ('apply', 'expire') ORDER BY c.n, c.e, c.s"
/* clang-format on */

/*
 * Open drafts of the batch's accounts that the recomputation no longer
 * gives (their usage moved: a finalized month voided and closed again
 * takes back its adjustments): emptied and voided, ledger entries reversed.
 */
/*
 * Driven by the batch's accounts, one probe of the open-draft index each:
 * written as `account_id = ANY (...)`, the planner (statistics of invoices
 * lagging behind the close filling it) scanned every draft of the month
 * by invoices_month_status for each batch, 100 ms a batch at 20 000
 * accounts, quadratic in the accounts (doc/performance.md, "Month-end
 * close", 2026-12-06, the first close). A plain join did the same while
 * the statistics said invoices was empty (a first close): the lookup is
 * a LATERAL subquery kept apart by OFFSET 0, so it can only be probed
 * per account.
 */
/* clang-format off */
#define SQL_DRAFT_STALE                                                                         \
    "SELECT coalesce(json_agg(i.id), '[]')::text FROM json_array_elements_text($1::json) a(id)" \
    " CROSS JOIN LATERAL (SELECT i.id FROM billing.invoices i WHERE "                           \
    BS_SQL_INVOICE_PROBE("a.id", "$2", "'draft'") " OFFSET 0) i"                                   \
    " WHERE NOT EXISTS (SELECT 1 FROM bs_batch b WHERE b.a = a.id)"
/* clang-format on */
#define SQL_DRAFT_VOID_STALE                                                                      \
    "UPDATE billing.invoices SET status = 'void', void_reason = 'recomputed: no charges',"        \
    " voided_at = now(), subtotal = 0, credits = 0, returned = 0, account_credit = 0, carried = " \
    "0,"                                                                                          \
    " account_credit_left = 0, tax = 0, total = 0, content_hash = NULL,"                          \
    " updated_at = now() WHERE id = ANY (ARRAY(" SQL_IDS "))"

/* The parameters a statement of the write may take, by position in write_ctx.params. */
enum { P_ACCOUNTS, P_MONTH, P_SERIES, P_BOOK, P_IDS, P_COUNT };

/* A statement and the parameters it takes ($1, $2... in this order; -1 ends). */
typedef struct write_step {
    const char *sql;
    int param[3];
} write_step;

typedef struct write_ctx {
    const char *params[P_COUNT];      /* accounts (JSON), month, series, book, ids (JSON) */
    const bs_draft *d;                /* every draft of the batch */
    char (*hash)[2 * BS_MD5_LEN + 1]; /* the content hash of each */
    const char *marks;                /* close marks to record (closemarks.h), or NULL */
    size_t n;
    bs_draft_outcome *out;
} write_ctx;

/* Run @steps in order with their parameters from @x. */
static bs_status run_steps(bs_conn *c, const write_step *steps, size_t n, const write_ctx *x,
                           bs_error *err)
{
    const char *params[3];
    size_t i;
    int k;
    bs_status st;

    for (i = 0; i < n; i++) {
        for (k = 0; k < 3 && steps[i].param[k] >= 0; k++)
            params[k] = x->params[steps[i].param[k]];
        st = bs_command(c, steps[i].sql, k, params, NULL, err);
        if (st != BS_OK)
            return st;
    }
    return BS_OK;
}

/* Append ",@v" (or "@v" first) to the array literal @buf of @cap bytes. Returns 0 or -1. */
static int array_add(char *buf, size_t cap, size_t *len, size_t v)
{
    int w = snprintf(buf + *len, cap - *len, "%s%zu", *len > 1 ? "," : "", v);

    if (w < 0 || (size_t)w >= cap - *len)
        return -1;
    *len += (size_t)w;
    return 0;
}

/*
 * classify - read the batch's existing invoices, set each outcome, drop
 * the drafts not to write from bs_batch, and collect the ids of drafts
 * being replaced into @ids. *@writes gets how many drafts are left to write.
 */
static bs_status classify(bs_conn *c, write_ctx *x, json_t *ids, size_t *writes, bs_error *err)
{
    const char *params[1] = {x->params[P_MONTH]};
    PGresult *res = bs_query(c, SQL_DRAFT_EXISTING, 1, params, err);
    /* "{n,n,...}": at most CLOSE_BATCH-sized batches, 11 bytes a number. */
    size_t cap = 16 + 12 * x->n;
    char *drop = malloc(cap);
    size_t len = 1;
    size_t i;
    int r;
    bs_status st = BS_OK;

    if (res == NULL) {
        free(drop);
        return err != NULL ? err->status : BS_ERR_FATAL;
    }
    if (drop == NULL) {
        PQclear(res);
        return bs_error_set(err, BS_ERR_NOMEM, "drafts: out of memory");
    }
    drop[0] = '{';
    for (i = 0; i < x->n; i++)
        x->out[i] = BS_DRAFT_NEW;
    *writes = x->n;
    for (r = 0; r < PQntuples(res); r++) {
        i = (size_t)strtoull(PQgetvalue(res, r, 0), NULL, 10);
        if (i >= x->n)
            continue;
        if (strcmp(PQgetvalue(res, r, 2), "finalized") == 0)
            x->out[i] = BS_DRAFT_FINALIZED;
        else if (strcmp(PQgetvalue(res, r, 3), "t") == 0)
            x->out[i] = BS_DRAFT_UNCHANGED;
        else {
            x->out[i] = BS_DRAFT_UPDATED;
            json_array_append_new(ids, json_string(PQgetvalue(res, r, 1)));
            continue;
        }
        (*writes)--;
        if (array_add(drop, cap, &len, i) != 0)
            st = bs_error_set(err, BS_ERR_NOMEM, "drafts: batch too large");
    }
    PQclear(res);
    drop[len++] = '}';
    drop[len] = '\0';
    if (st == BS_OK && len > 2) {
        params[0] = drop;
        st = bs_command(c, SQL_BATCH_DROP, 1, params, NULL, err);
    }
    free(drop);
    return st;
}

/* Void the batch's drafts that have no charges any more. */
static bs_status void_stale(bs_conn *c, write_ctx *x, bs_error *err)
{
    static const write_step replace[] = {{SQL_DRAFT_REVERSE, {P_IDS, -1}},
                                         {SQL_DRAFT_DELETE_LINES, {P_IDS, -1}},
                                         {SQL_DRAFT_DELETE_CREDITS, {P_IDS, -1}},
                                         {SQL_DRAFT_DELETE_RETURNED, {P_IDS, -1}},
                                         {SQL_DRAFT_VOID_STALE, {P_IDS, -1}}};
    const char *params[2] = {x->params[P_ACCOUNTS], x->params[P_MONTH]};
    PGresult *res = bs_query(c, SQL_DRAFT_STALE, 2, params, err);
    char *ids;
    bs_status st;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    ids = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (ids == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "drafts: out of memory");
    x->params[P_IDS] = ids;
    st = strcmp(ids, "[]") == 0
             ? BS_OK
             : run_steps(c, replace, sizeof(replace) / sizeof(replace[0]), x, err);
    x->params[P_IDS] = NULL;
    free(ids);
    return st;
}

/* @q ("12.5" or "7/3") as its numerator and denominator fields. */
static void copy_quantity(bs_copy *cp, const char *q)
{
    char num[BS_DECIMAL_MAX + 2];
    const char *slash = strchr(q, '/');
    size_t len = slash != NULL ? (size_t)(slash - q) : 0;

    if (slash == NULL) {
        bs_copy_numeric(cp, q);
        bs_copy_numeric(cp, "1");
        return;
    }
    if (len >= sizeof(num))
        len = sizeof(num) - 1; /* too long for a decimal: refused as one */
    memcpy(num, q, len);
    num[len] = '\0';
    bs_copy_numeric(cp, num);
    bs_copy_numeric(cp, slash + 1);
}

/* Line @i of draft @n's invoice, line number @line_no. */
static void copy_line(bs_copy *cp, int n, const billing_invoice *inv, size_t i, int line_no)
{
    billing_time_t t[2];
    int span = billing_invoice_line_span(inv, i, &t[0], &t[1]);

    bs_copy_row(cp);
    bs_copy_int4(cp, n);
    bs_copy_int4(cp, line_no);
    bs_copy_text(cp, billing_line_kind_name(billing_invoice_line_kind(inv, i)));
    bs_copy_text(cp, nonempty(billing_invoice_line_meter(inv, i)));
    bs_copy_text(cp, billing_invoice_line_model(inv, i));
    bs_copy_text(cp, billing_invoice_line_region(inv, i));
    bs_copy_text(cp, nonempty(billing_invoice_line_plan(inv, i)));
    bs_copy_text(cp, nonempty(billing_invoice_line_price_version(inv, i)));
    bs_copy_null(cp); /* adjusts no month */
    copy_quantity(cp, billing_invoice_line_quantity(inv, i));
    bs_copy_text(cp, billing_invoice_line_unit(inv, i));
    bs_copy_numeric(cp, nonempty(billing_invoice_line_unit_price(inv, i)));
    bs_copy_numeric(cp, billing_invoice_line_amount_rounded(inv, i));
    /* A refund's unused span [cancellation, end of the term): instants of the catalog. */
    if (span) {
        bs_copy_timestamptz(cp, t[0]);
        bs_copy_timestamptz(cp, t[1]);
    } else {
        bs_copy_null(cp);
        bs_copy_null(cp);
    }
}

/* Prior-period adjustment @a of draft @n, line number @line_no. */
static void copy_adjustment(bs_copy *cp, int n, const bs_adjustment *a, int line_no)
{
    char month[16];

    snprintf(month, sizeof(month), "%04d-%02d-01", a->year, a->month);
    bs_copy_row(cp);
    bs_copy_int4(cp, n);
    bs_copy_int4(cp, line_no);
    bs_copy_text(cp, "adjustment");
    bs_copy_text(cp, a->meter);
    bs_copy_text(cp, a->model);
    bs_copy_text(cp, a->region);
    bs_copy_null(cp); /* no plan */
    bs_copy_text(cp, nonempty(a->price_version));
    bs_copy_text(cp, month);
    copy_quantity(cp, a->quantity);
    bs_copy_text(cp, a->unit);
    bs_copy_numeric(cp, a->unit_price);
    bs_copy_numeric(cp, a->amount);
    bs_copy_null(cp);
    bs_copy_null(cp);
}

/* A credit row of draft @n: kind @e, order @s; zero amounts are left out. */
static void copy_credit(bs_copy *cp, int n, const char *e, int s, const char *grant,
                        const char *amount, const char *remaining)
{
    if (strspn(amount, "0.") == strlen(amount))
        return;
    bs_copy_row(cp);
    bs_copy_int4(cp, n);
    bs_copy_text(cp, e);
    bs_copy_int4(cp, s);
    bs_copy_text(cp, grant);
    bs_copy_numeric(cp, amount);
    bs_copy_numeric(cp, remaining);
}

/* Draft @n's header row. */
static void copy_header(bs_copy *cp, int n, const bs_draft *d, const char *hash)
{
    const billing_invoice *inv = d->inv;
    billing_time_t start;
    billing_time_t end;

    billing_invoice_period(inv, &start, &end);
    bs_copy_row(cp);
    bs_copy_int4(cp, n);
    bs_copy_text(cp, billing_invoice_account(inv));
    bs_copy_text(cp, billing_invoice_currency(inv));
    bs_copy_timestamptz(cp, start);
    bs_copy_timestamptz(cp, end);
    bs_copy_numeric(cp, billing_invoice_tax_rate(inv));
    bs_copy_numeric(cp, d->subtotal);
    bs_copy_numeric(cp, billing_invoice_credits(inv));
    bs_copy_numeric(cp, billing_invoice_returned(inv));
    bs_copy_numeric(cp, billing_invoice_account_credit(inv));
    bs_copy_numeric(cp, billing_invoice_carried(inv));
    bs_copy_numeric(cp, billing_invoice_account_credit_left(inv));
    bs_copy_numeric(cp, d->tax);
    bs_copy_numeric(cp, d->total);
    bs_copy_text(cp, hash);
}

/* The batch's drafts (@what: 0 headers, 1 lines, 2 credits) by one COPY. */
static bs_status copy_drafts(bs_conn *c, const write_ctx *x, int what, bs_error *err)
{
    static const char *const sql[] = {SQL_BATCH_COPY, SQL_BATCH_LINES_COPY, SQL_BATCH_CREDITS_COPY};
    static const int ncols[] = {BATCH_COLUMNS, BATCH_LINE_COLUMNS, BATCH_CREDIT_COLUMNS};
    bs_copy *cp = bs_copy_begin(c, sql[what], ncols[what], BS_COPY_BINARY, err);
    size_t i;
    size_t l;

    if (cp == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < x->n; i++) {
        const bs_draft *d = &x->d[i];
        const billing_invoice *inv = d->inv;
        size_t n_lines = billing_invoice_line_count(inv);
        int n = (int)i;

        if (what == 0) {
            copy_header(cp, n, d, x->hash[i]);
        } else if (what == 1) {
            for (l = 0; l < n_lines; l++)
                copy_line(cp, n, inv, l, (int)l + 1);
            for (l = 0; l < d->n_adj; l++)
                copy_adjustment(cp, n, &d->adj[l], (int)(n_lines + l) + 1);
        } else {
            for (l = 0; l < billing_invoice_credit_count(inv); l++)
                copy_credit(cp, n, "apply", (int)l, billing_invoice_credit_grant(inv, l),
                            billing_invoice_credit_amount(inv, l),
                            billing_invoice_credit_remaining(inv, l));
            for (l = 0; l < billing_invoice_expired_count(inv); l++)
                copy_credit(cp, n, "expire", (int)l, billing_invoice_expired_grant(inv, l),
                            billing_invoice_expired_amount(inv, l), NULL);
            for (l = 0; l < billing_invoice_returned_count(inv); l++)
                copy_credit(cp, n, "return", (int)l, billing_invoice_returned_grant(inv, l),
                            billing_invoice_returned_amount(inv, l),
                            billing_invoice_returned_remaining(inv, l));
        }
    }
    return bs_copy_end(cp, NULL, err);
}

/* The batch into bs_batch and its child tables, the accounts locked, the series there. */
static bs_status write_prepare(bs_conn *c, write_ctx *x, bs_error *err)
{
    static const write_step steps[] = {
        {SQL_BATCH_PLANNER, {-1}},
        {SQL_BATCH_TABLE, {-1}},
        {SQL_BATCH_LINES_TABLE, {-1}},
        {SQL_BATCH_CREDITS_TABLE, {-1}},
        {SQL_DRAFT_LOCK_IDS, {P_ACCOUNTS, -1}},
        {SQL_SERIES, {P_SERIES, -1}},
    };
    bs_status st = run_steps(c, steps, sizeof(steps) / sizeof(steps[0]), x, err);
    int what;

    for (what = 0; what < 3 && st == BS_OK; what++)
        st = copy_drafts(c, x, what, err);
    return st;
}

static bs_status write_tx(bs_conn *c, void *arg, bs_error *err)
{
    static const write_step replace[] = {
        {SQL_DRAFT_REVERSE, {P_IDS, -1}},
        {SQL_DRAFT_DELETE_LINES, {P_IDS, -1}},
        {SQL_DRAFT_DELETE_CREDITS, {P_IDS, -1}},
        {SQL_DRAFT_DELETE_RETURNED, {P_IDS, -1}},
        {SQL_BATCH_OPEN, {P_MONTH, -1}},
        {SQL_DRAFT_UPDATE, {-1}},
        {SQL_DRAFT_INSERT, {P_MONTH, P_SERIES, -1}},
    };
    /* Returned credit goes back to the grants before the draft's own entries take from them. */
    static const write_step children[] = {
        {SQL_DRAFT_LINES, {P_BOOK, -1}}, {SQL_DRAFT_CREDITS, {-1}}, {SQL_DRAFT_RETURNED_ROWS, {-1}},
        {SQL_DRAFT_RETURNED, {-1}},      {SQL_DRAFT_LEDGER, {-1}},
    };
    write_ctx *x = arg;
    json_t *ids = json_array();
    char *ids_text = NULL;
    size_t writes = 0;
    bs_status st = BS_ERR_NOMEM;

    if (ids == NULL)
        goto done;
    st = write_prepare(c, x, err);
    if (st == BS_OK)
        st = void_stale(c, x, err);
    if (st == BS_OK)
        st = classify(c, x, ids, &writes, err);
    if (st != BS_OK || writes == 0)
        goto marks;
    ids_text = json_dumps(ids, JSON_COMPACT);
    if (ids_text == NULL) {
        st = bs_error_set(err, BS_ERR_NOMEM, "drafts: out of memory");
        goto done;
    }
    x->params[P_IDS] = ids_text;
    st = run_steps(c, replace, sizeof(replace) / sizeof(replace[0]), x, err);
    if (st == BS_OK)
        st = run_steps(c, children, sizeof(children) / sizeof(children[0]), x, err);
marks:
    /* Last: each mark notes the invoice the batch left. */
    if (st == BS_OK && x->marks != NULL)
        st = bs_close_marks_put(c, x->marks, x->params[P_MONTH], err);
done:
    if (st == BS_ERR_NOMEM && (err == NULL || err->status != BS_ERR_NOMEM))
        bs_error_set(err, BS_ERR_NOMEM, "drafts: out of memory");
    x->params[P_IDS] = NULL;
    free(ids_text);
    json_decref(ids);
    return st;
}

bs_status bs_drafts_write(bs_conn *c, const char *accounts, const char *book, const char *month,
                          const char *series, const bs_draft *d, size_t n, const char *marks,
                          bs_draft_outcome *out, bs_error *err)
{
    write_ctx x;
    size_t i;
    bs_status st;

    memset(&x, 0, sizeof(x));
    x.params[P_ACCOUNTS] = accounts;
    x.params[P_BOOK] = book;
    x.params[P_MONTH] = month;
    x.params[P_SERIES] = series;
    x.n = n;
    x.marks = marks;
    x.out = out;
    x.d = d;
    x.hash = calloc(n + 1, sizeof(*x.hash));
    if (x.hash == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "drafts: out of memory");
    for (i = 0; i < n; i++) {
        if (bs_draft_hash(&d[i], x.hash[i]) != 0) {
            free(x.hash);
            return bs_error_set(err, BS_ERR_NOMEM, "drafts: out of memory");
        }
    }
    st = bs_transaction(c, write_tx, &x, err);
    free(x.hash);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Credit returned before the month that applied it is closed              */
/* ---------------------------------------------------------------------- */

/*
 * What the ledger holds as taken from each grant (apply, expire) and not
 * given back (reverse), leaving out the entries of the account's own
 * invoices and credit notes of the month (a re-close reverses a draft's;
 * a finalized month's invoice is left alone); then, for the first return it does not cover, the
 * earliest month without an invoice of the account since the grant.
 */
#define SQL_RETURNED_UNCLOSED                                                                  \
    "WITH r AS (SELECT x->>'a' AS a, x->>'g' AS g, sum((x->>'am')::numeric) AS am"             \
    " FROM json_array_elements($1::json) x GROUP BY 1, 2), bad AS (SELECT r.a, r.g,"           \
    " g.granted_at FROM r JOIN billing.credit_grants g ON g.id = r.g JOIN billing.currencies"  \
    " cu ON cu.code = g.currency WHERE r.am * 10::numeric ^ cu.digits > coalesce((SELECT"      \
    " -sum(l.amount_minor) FROM billing.credit_ledger l LEFT JOIN billing.invoices j"          \
    " ON j.id = l.invoice_id WHERE l.grant_id = g.id AND l.entry IN ('apply', 'expire',"       \
    " 'reverse') AND NOT (j.account_id IS NOT DISTINCT FROM r.a AND j.month = $2::date)), 0)"  \
    " ORDER BY r.a, r.g LIMIT 1)"                                                              \
    " SELECT bad.a, bad.g, coalesce((SELECT to_char(m, 'YYYY-MM') FROM generate_series("       \
    " greatest(date_trunc('month', bad.granted_at), $2::date - interval '24 months'),"         \
    " $2::date - interval '1 month', interval '1 month') m WHERE NOT EXISTS (SELECT 1"         \
    " FROM billing.invoices i WHERE i.account_id = bad.a AND i.month = m::date"                \
    " AND i.kind = 'invoice' AND i.status IN ('draft', 'finalized')) ORDER BY m LIMIT 1), '')" \
    " FROM bad"

bs_status bs_returned_unclosed(bs_conn *c, const char *returned, const char *month, char **account,
                               char **grant, char **open, bs_error *err)
{
    const char *params[2] = {returned, month};
    PGresult *res = bs_query(c, SQL_RETURNED_UNCLOSED, 2, params, err);
    int found;

    *account = NULL;
    *grant = NULL;
    *open = NULL;
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    found = PQntuples(res) == 1;
    if (found) {
        *account = strdup(PQgetvalue(res, 0, 0));
        *grant = strdup(PQgetvalue(res, 0, 1));
        *open = strdup(PQgetvalue(res, 0, 2));
    }
    PQclear(res);
    if (found && (*account == NULL || *grant == NULL || *open == NULL)) {
        free(*account);
        free(*grant);
        free(*open);
        *account = *grant = *open = NULL;
        return bs_error_set(err, BS_ERR_NOMEM, "returned credit: out of memory");
    }
    return BS_OK;
}

/* ---------------------------------------------------------------------- */
/* Reads by account probes, without JIT                                    */
/* ---------------------------------------------------------------------- */

/*
 * The close's per-batch reads of finalized months (bs_billed_lines,
 * bs_credit_history) probe each account on its own; the planner's default
 * estimates for such probes, without statistics, make a statement look
 * expensive enough to compile, and JIT took 2.4 s for a statement that
 * then ran in 14 ms (doc/performance.md, "Month-end close", h43). They
 * run in a read-only transaction of their own with JIT off; inside a
 * caller's transaction, the caller's settings stay as they are.
 */
#define SQL_NO_JIT_BEGIN "BEGIN READ ONLY"
#define SQL_NO_JIT "SET LOCAL jit = off"

/* Returns 1 when a transaction was begun here, 0 when the caller's is open, -1 with @err. */
static int no_jit_begin(bs_conn *c, bs_error *err)
{
    if (bs_in_transaction(c))
        return 0;
    if (bs_command(c, SQL_NO_JIT_BEGIN, 0, NULL, NULL, err) != BS_OK)
        return -1;
    if (bs_command(c, SQL_NO_JIT, 0, NULL, NULL, err) != BS_OK) {
        bs_rollback(c);
        return -1;
    }
    return 1;
}

/* Ends what no_jit_begin began (@own): commits after @st == BS_OK, else rolls back. */
static bs_status no_jit_end(bs_conn *c, int own, bs_status st, bs_error *err)
{
    if (!own)
        return st;
    if (st != BS_OK) {
        bs_rollback(c);
        return st;
    }
    return bs_commit(c, err);
}

/* ---------------------------------------------------------------------- */
/* Billed lines (for late events)                                          */
/* ---------------------------------------------------------------------- */

/* BS_LATE_MONTHS as text, for the SQL constant. */
#define STR_(x) #x
#define STR(x) STR_(x)
#define BS_LATE_MONTHS_TEXT STR(BS_LATE_MONTHS)
/*
 * Each account of $1 probed on its own (LATERAL ... OFFSET 0), its
 * invoices' month and status compared through expressions no index can
 * take (invoiceprobe.h), its lines and its finalized months looked up by
 * invoice and by account: with `i.account_id = ANY (...)` and plain
 * comparisons, while invoices had no statistics (the close of the month
 * after a finalized one, right after a restore or a load), the planner
 * read the finalized invoices through invoices_month_status and joined
 * the lines by hash, about 10 s a batch of 1 024 accounts at 100 000
 * finalized invoices (966 s of statement time in one close;
 * doc/performance.md, "Month-end close", branch h48). Run with JIT off
 * (bs_billed_lines): the probes' default estimates look dear.
 */
#define SQL_BILLED                                                                                 \
    "SELECT b.* FROM json_array_elements_text($1::json) WITH ORDINALITY a(id, n)"                  \
    " CROSS JOIN LATERAL (SELECT i.account_id AS account, to_char(coalesce(l.adjusts_month,"       \
    " i.month), 'YYYY-MM-DD') AS month, l.meter AS meter, l.model AS model, l.region AS region,"   \
    " coalesce(v.label, '') AS version, l.unit_price::text AS unit_price,"                         \
    " l.quantity::text AS quantity, l.quantity_den::text AS quantity_den"                          \
    " FROM billing.invoices i"                                                                     \
    " CROSS JOIN LATERAL (SELECT l.* FROM billing.invoice_lines l WHERE l.invoice_id = i.id"       \
    " OFFSET 0) l"                                                                                 \
    " LEFT JOIN billing.price_versions v ON v.id = l.price_version_id"                             \
    " WHERE i.account_id = a.id AND i.kind = 'invoice'"                                            \
    " AND (((i.status || '') = 'finalized' AND (i.month + 0) < $2::date"                           \
    " AND l.kind IN ('usage', 'included'))"                                                        \
    " OR (l.kind = 'adjustment' AND ((i.status || '') = 'finalized'"                               \
    " OR ((i.status || '') = 'draft' AND (i.month + 0) <> $2::date))))"                            \
    " AND coalesce(l.adjusts_month, i.month) IN (SELECT f.month FROM billing.invoices f"           \
    " WHERE f.account_id = i.account_id AND f.kind = 'invoice' AND (f.status || '') = 'finalized'" \
    " AND (f.month + 0) < $2::date"                                                                \
    " AND (f.month + 0) >= $2::date - interval '" BS_LATE_MONTHS_TEXT " months')"                  \
    " UNION ALL SELECT f.account_id, to_char(f.month, 'YYYY-MM-DD'), '', '', '', '', '0', '0',"    \
    " '1' FROM billing.invoices f WHERE f.account_id = a.id AND f.kind = 'invoice'"                \
    " AND (f.status || '') = 'finalized' AND (f.month + 0) < $2::date"                             \
    " AND (f.month + 0) >= $2::date - interval '" BS_LATE_MONTHS_TEXT " months' OFFSET 0) b"       \
    " ORDER BY a.n"

static const bs_rowtext_field billed_fields[] = {
    BS_ROWTEXT(bs_billed_line, account),      BS_ROWTEXT(bs_billed_line, month),
    BS_ROWTEXT(bs_billed_line, meter),        BS_ROWTEXT(bs_billed_line, model),
    BS_ROWTEXT(bs_billed_line, region),       BS_ROWTEXT(bs_billed_line, version),
    BS_ROWTEXT(bs_billed_line, unit_price),   BS_ROWTEXT(bs_billed_line, quantity),
    BS_ROWTEXT(bs_billed_line, quantity_den),
};

bs_status bs_billed_lines(bs_conn *c, const char *accounts, const char *month, bs_billed_line **out,
                          size_t *n, bs_error *err)
{
    const char *params[2] = {accounts, month};
    void *rows = NULL;
    int own;
    bs_status st;

    *out = NULL;
    *n = 0;
    own = no_jit_begin(c, err);
    if (own < 0)
        return err->status;
    st = bs_rowtext_query(c, SQL_BILLED, 2, params, billed_fields,
                          sizeof(billed_fields) / sizeof(billed_fields[0]), sizeof(**out),
                          "billed lines", &rows, n, err);
    st = no_jit_end(c, own, st, err);
    if (st != BS_OK) {
        free(rows);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return st;
}

/* ---------------------------------------------------------------------- */
/* Credit as issued (for late events and re-issued invoices)               */
/* ---------------------------------------------------------------------- */

/*
 * Per account of $1, each month but $2 with a finalized invoice: the
 * account credit left after it less what was refunded out of band
 * against the month (billing.refund_invoice, 0012: paid back, so no later
 * month spends it; never below zero, should a re-issued month leave less
 * than was refunded), then per grant the net its ledger entries
 * took (entries of every invoice and credit note of the month: a voided
 * invoice and its credit note cancel).
 */
#define SQL_CREDIT_HISTORY                                                                     \
    "WITH a AS (SELECT x.id, x.n FROM json_array_elements_text($1::json) WITH ORDINALITY"      \
    " x(id, n)), f AS (SELECT a.id, a.n, i.month, round(greatest(i.account_credit_left"        \
    " - coalesce((SELECT sum(r.amount) FROM billing.invoice_refunds r JOIN billing.invoices k" \
    " ON k.id = r.invoice_id WHERE r.account_id = a.id AND k.month = i.month), 0), 0)"         \
    " * 10::numeric ^ cu.digits) AS acl FROM a JOIN billing.invoices i ON i.account_id = a.id" \
    " AND i.kind = 'invoice' AND i.status = 'finalized' AND i.month <> $2::date"               \
    " JOIN billing.currencies cu ON cu.code = i.currency)"                                     \
    " SELECT id, to_char(month, 'YYYY-MM'), g, am FROM (SELECT f.id, f.n, f.month, '' AS g,"   \
    " f.acl::text AS am FROM f UNION ALL SELECT f.id, f.n, f.month, l.grant_id,"               \
    " (-sum(l.amount_minor))::text FROM f JOIN billing.invoices j ON j.account_id = f.id"      \
    " AND j.month = f.month JOIN billing.credit_ledger l ON l.invoice_id = j.id"               \
    " GROUP BY f.id, f.n, f.month, l.grant_id HAVING sum(l.amount_minor) <> 0) r"              \
    " ORDER BY n, month, g"

const char bs_credit_history_sql[] = SQL_CREDIT_HISTORY;

/*
 * The same rows for a batch of accounts, each account's invoices and
 * ledger entries probed by account: month and status are compared through
 * expressions no index can take (as invoiceprobe.h does), so that only
 * the indexes leading with the account serve them. With the statement
 * above, while invoices had no statistics (a close right after a restore
 * or a load, before autovacuum's first analyze), the planner read every
 * finalized invoice through invoices_month_status by status and hashed
 * them, once per batch: 170 to 290 ms a batch of 1 024 accounts at 100 000
 * finalized drafts (doc/performance.md, "Month-end close", branches h43
 * and h48). The probes' default estimates make the statement look dear
 * enough to compile (2.4 s of JIT before 14 ms of execution), so it runs
 * with JIT off (bs_credit_history).
 */
#define SQL_CREDIT_HISTORY_PROBED                                                                  \
    "WITH a AS (SELECT x.id, x.n FROM json_array_elements_text($1::json) WITH ORDINALITY"          \
    " x(id, n)), f AS (SELECT a.id, a.n, i.month, round(greatest(i.account_credit_left"            \
    " - coalesce((SELECT sum(r.amount) FROM billing.invoice_refunds r JOIN billing.invoices k"     \
    " ON k.id = r.invoice_id WHERE r.account_id = a.id AND k.month = i.month), 0), 0)"             \
    " * 10::numeric ^ cu.digits) AS acl FROM a CROSS JOIN LATERAL (SELECT i.month,"                \
    " i.account_credit_left, i.currency FROM billing.invoices i WHERE i.account_id = a.id"         \
    " AND i.kind = 'invoice' AND (i.status || '') = 'finalized' AND (i.month + 0) <> $2::date"     \
    " OFFSET 0) i JOIN billing.currencies cu ON cu.code = i.currency)"                             \
    " SELECT id, to_char(month, 'YYYY-MM'), g, am FROM (SELECT f.id, f.n, f.month, '' AS g,"       \
    " f.acl::text AS am FROM f UNION ALL SELECT f.id, f.n, f.month, l.grant_id,"                   \
    " (-sum(l.amount_minor))::text FROM f CROSS JOIN LATERAL (SELECT j.id FROM billing.invoices j" \
    " WHERE j.account_id = f.id AND (j.month + 0) = f.month OFFSET 0) j CROSS JOIN LATERAL"        \
    " (SELECT l.grant_id, l.amount_minor FROM billing.credit_ledger l WHERE l.invoice_id = j.id"   \
    " OFFSET 0) l GROUP BY f.id, f.n, f.month, l.grant_id HAVING sum(l.amount_minor) <> 0) r"      \
    " ORDER BY n, month, g"
PGresult *bs_credit_history(bs_conn *c, const char *accounts, const char *month, bs_error *err)
{
    const char *params[2] = {accounts, month};
    PGresult *res;
    int own = no_jit_begin(c, err);

    if (own < 0)
        return NULL;
    res = bs_query(c, SQL_CREDIT_HISTORY_PROBED, 2, params, err);
    if (no_jit_end(c, own, res != NULL ? BS_OK : err->status, err) != BS_OK) {
        PQclear(res);
        return NULL;
    }
    return res;
}

/* ---------------------------------------------------------------------- */
/* Finalizing                                                              */
/* ---------------------------------------------------------------------- */

/*
 * One batch of drafts numbered set-based by billing.finalize_invoices
 * (0013, 0021): it takes the accounts' advisory locks in the hash order a
 * close takes them (a close recomputing one of them finishes first, and a
 * finalizer never numbers a draft a close is rewriting; two finalizers
 * queue on the same locks without deadlock), then numbers the batch in
 * account order. The batch (1 000 drafts, 500 before 0021: one commit
 * and its WAL flush per batch) is bounded by the shared lock table, which
 * holds the advisory locks until commit. $3 is the last
 * account of the batch before: each batch picks after it, so none walks
 * again over the drafts the run has numbered ('' starts from the first).
 */
#define SQL_FINALIZE_BATCH                                     \
    "SELECT picked, numbered, coalesce(last_account, '') FROM" \
    " billing.finalize_invoices($1::date, $2::bigint, 1000, $3::text)"
/* An account id is a billing.ident: at most 128 bytes. */
#define FINALIZE_ACCOUNT_MAX 128
#define SQL_FINALIZE_WAITING                                                            \
    "SELECT count(*) FROM billing.invoices WHERE month = $1::date AND kind = 'invoice'" \
    " AND status = 'draft' AND period_end + make_interval(secs => $2::bigint) > now()"

typedef struct finalize_ctx {
    const char *params[3];
    char after[FINALIZE_ACCOUNT_MAX + 1]; /* the last account picked, $3 */
    int64_t picked;                       /* drafts picked by the last batch */
    int64_t done;                         /* of which this finalizer numbered */
} finalize_ctx;

static bs_status finalize_tx(bs_conn *c, void *arg, bs_error *err)
{
    finalize_ctx *x = arg;
    PGresult *res = bs_query(c, SQL_FINALIZE_BATCH, 3, x->params, err);

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    x->picked = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    x->done = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    snprintf(x->after, sizeof(x->after), "%s", PQgetvalue(res, 0, 2));
    PQclear(res);
    return BS_OK;
}

bs_status bs_finalize_month(bs_conn *c, const char *month, int64_t grace_seconds, size_t *done,
                            size_t *waiting, bs_error *err)
{
    char grace[32];
    char after[FINALIZE_ACCOUNT_MAX + 1] = "";
    finalize_ctx x;
    PGresult *res;
    bs_status st;

    snprintf(grace, sizeof(grace), "%lld", (long long)grace_seconds);
    x.params[0] = month;
    x.params[1] = grace;
    x.params[2] = after;
    *done = 0;
    *waiting = 0;
    /*
     * Batches from the first account to the last; then one pass more from
     * the first, for drafts whose grace ended meanwhile (or that a close
     * wrote), until a pass from the first picks none.
     */
    for (;;) {
        x.done = 0;
        x.picked = 0;
        x.after[0] = '\0';
        st = bs_transaction(c, finalize_tx, &x, err);
        if (st != BS_OK)
            return st;
        *done += (size_t)x.done;
        if (x.picked == 0 && after[0] == '\0')
            break;
        snprintf(after, sizeof(after), "%s", x.picked > 0 ? x.after : "");
    }
    res = bs_query(c, SQL_FINALIZE_WAITING, 2, x.params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    *waiting = (size_t)strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return BS_OK;
}

/* ---------------------------------------------------------------------- */
/* Finding, voiding, listing                                               */
/* ---------------------------------------------------------------------- */

#define SQL_NUMBER_TEXT "billing.invoice_number_text(s.prefix, i.number)"
#define SQL_FIND_NUMBER                                                                        \
    "SELECT i.id FROM billing.invoices i JOIN billing.invoice_series s ON s.series = i.series" \
    " WHERE i.number IS NOT NULL AND " SQL_NUMBER_TEXT " = $1::text"
#define SQL_FIND_ID "SELECT id FROM billing.invoices WHERE id = $1::bigint"

bs_status bs_invoice_find(bs_conn *c, const char *ref, int64_t *id, bs_error *err)
{
    const char *params[1] = {ref};
    int numeric = ref[0] != '\0' && strspn(ref, "0123456789") == strlen(ref) && strlen(ref) < 19;
    PGresult *res = bs_query(c, numeric ? SQL_FIND_ID : SQL_FIND_NUMBER, 1, params, err);
    bs_status st = BS_OK;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (PQntuples(res) != 1)
        st = bs_error_set(err, BS_ERR_INVALID,
                          "no invoice '%.128s' (give a number such as "
                          "INV-2026-000123, or an id)",
                          ref);
    else
        *id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return st;
}

#define SQL_CN_SERIES "SELECT 'CN-' || to_char(now() AT TIME ZONE 'UTC', 'YYYY')"
/* Called once, on its own: in a WHERE clause it would run for every row scanned. */
#define SQL_VOID "SELECT billing.void_invoice($1::bigint, $2::text, $3::text)"
#define SQL_NUMBER_OF                                                                  \
    "SELECT " SQL_NUMBER_TEXT " FROM billing.invoices i JOIN billing.invoice_series s" \
    " ON s.series = i.series WHERE i.id = $1::bigint"

/*
 * cn_series - this year's credit note series ("CN-2026") into @series,
 * its numbering row made if missing: what a void and a refund number
 * their credit note in. Returns BS_OK or the error.
 */
static bs_status cn_series(bs_conn *c, char *series, size_t size, bs_error *err)
{
    const char *params[1];
    PGresult *res = bs_query(c, SQL_CN_SERIES, 0, NULL, err);

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    snprintf(series, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    params[0] = series;
    return bs_command(c, SQL_SERIES, 1, params, NULL, err);
}

typedef struct void_ctx {
    const char *id;
    const char *reason;
    char *cn_number;
} void_ctx;

static bs_status void_tx(bs_conn *c, void *arg, bs_error *err)
{
    void_ctx *x = arg;
    const char *params[3];
    char series[32];
    char cn_id[32];
    PGresult *res;

    if (cn_series(c, series, sizeof(series), err) != BS_OK)
        return err != NULL ? err->status : BS_ERR_FATAL;
    params[0] = x->id;
    params[1] = x->reason;
    params[2] = series;
    res = bs_query(c, SQL_VOID, 3, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    snprintf(cn_id, sizeof(cn_id), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    params[0] = cn_id;
    res = bs_query(c, SQL_NUMBER_OF, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    snprintf(x->cn_number, BS_NUMBER_TEXT_MAX, "%s",
             PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return BS_OK;
}

bs_status bs_invoice_void(bs_conn *c, int64_t id, const char *reason, char *cn_number,
                          bs_error *err)
{
    char id_text[32];
    void_ctx x;

    if (reason == NULL || reason[0] == '\0' || strlen(reason) > 1024)
        return bs_error_set(err, BS_ERR_INVALID, "--reason must be 1..1024 bytes");
    snprintf(id_text, sizeof(id_text), "%lld", (long long)id);
    x.id = id_text;
    x.reason = reason;
    x.cn_number = cn_number;
    return bs_transaction(c, void_tx, &x, err);
}

#define SQL_REFUND \
    "SELECT billing.refund_invoice($1::bigint, $2::numeric, $3::text, $4::text, $5::text)"
/*
 * The credit note $1's number, and whether its refund was recorded by an
 * earlier transaction (a retry: rows of this one have created_at = now()).
 */
#define SQL_REFUND_NOTE                                                                      \
    "SELECT " SQL_NUMBER_TEXT ", (r.created_at <> now())::text FROM billing.invoices i JOIN" \
    " billing.invoice_series s ON s.series = i.series JOIN billing.invoice_refunds r"        \
    " ON r.credit_note_id = i.id WHERE i.id = $1::bigint"

/*
 * Later months of invoice $1's account with a draft: written before the
 * refund, they spend the account credit as it was until closed again.
 */
#define SQL_REFUND_STALE                                                                 \
    "SELECT coalesce(string_agg(to_char(d.month, 'YYYY-MM'), ' ' ORDER BY d.month), '')" \
    " FROM billing.invoices i JOIN billing.invoices d ON d.account_id = i.account_id"    \
    " AND d.kind = 'invoice' AND d.status = 'draft' AND d.month > i.month"               \
    " WHERE i.id = $1::bigint"

typedef struct refund_ctx {
    const char *id;
    const char *amount;
    const char *reason;
    const char *reference;
    char *cn_number;
    int *replayed;
    char *stale;
    size_t stale_size;
} refund_ctx;

static bs_status refund_tx(bs_conn *c, void *arg, bs_error *err)
{
    refund_ctx *x = arg;
    const char *params[5];
    char series[32];
    char cn_id[32];
    PGresult *res;

    if (cn_series(c, series, sizeof(series), err) != BS_OK)
        return err != NULL ? err->status : BS_ERR_FATAL;
    params[0] = x->id;
    params[1] = x->amount;
    params[2] = x->reason;
    params[3] = x->reference;
    params[4] = series;
    res = bs_query(c, SQL_REFUND, 5, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    snprintf(cn_id, sizeof(cn_id), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    params[0] = cn_id;
    res = bs_query(c, SQL_REFUND_NOTE, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (PQntuples(res) == 1) {
        snprintf(x->cn_number, BS_NUMBER_TEXT_MAX, "%s", PQgetvalue(res, 0, 0));
        *x->replayed = strcmp(PQgetvalue(res, 0, 1), "true") == 0;
    }
    PQclear(res);
    params[0] = x->id;
    res = bs_query(c, SQL_REFUND_STALE, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    snprintf(x->stale, x->stale_size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return BS_OK;
}

bs_status bs_invoice_refund(bs_conn *c, int64_t id, const char *amount, const char *reason,
                            const char *reference, char *cn_number, int *replayed, char *stale,
                            size_t stale_size, bs_error *err)
{
    char id_text[32];
    refund_ctx x;

    if (reason == NULL || reason[0] == '\0' || strlen(reason) > 1024)
        return bs_error_set(err, BS_ERR_INVALID, "--reason must be 1..1024 bytes");
    if (reference == NULL || reference[0] == '\0' || strlen(reference) > 256)
        return bs_error_set(err, BS_ERR_INVALID, "--reference must be 1..256 bytes");
    /* Digits and at most one point; the database checks the minor unit and the sign. */
    if (amount == NULL || amount[0] == '\0' || strlen(amount) > 40 ||
        strspn(amount, "0123456789.") != strlen(amount) ||
        strchr(amount, '.') != strrchr(amount, '.'))
        return bs_error_set(err, BS_ERR_INVALID,
                            "--amount '%.64s': expected a decimal such as "
                            "1251.50",
                            amount != NULL ? amount : "");
    snprintf(id_text, sizeof(id_text), "%lld", (long long)id);
    x.id = id_text;
    x.amount = amount;
    x.reason = reason;
    x.reference = reference;
    x.cn_number = cn_number;
    x.replayed = replayed;
    x.stale = stale;
    x.stale_size = stale_size;
    *replayed = 0;
    cn_number[0] = '\0';
    if (stale_size > 0)
        stale[0] = '\0';
    return bs_transaction(c, refund_tx, &x, err);
}

#define SQL_INVOICE_COLUMNS                                                                      \
    "SELECT i.id, CASE WHEN i.number IS NULL THEN '' ELSE " SQL_NUMBER_TEXT " END AS number,"    \
    " i.account_id AS account, i.kind, to_char(i.month, 'YYYY-MM') AS period, i.status,"         \
    " i.currency, i.subtotal::text AS subtotal, i.credits::text AS credits, i.tax::text AS tax," \
    " i.total::text AS total, i.series,"                                                         \
    " coalesce(billing.invoice_number_text(os.prefix, o.number), '') AS corrects"
#define SQL_INVOICE_FROM                                                            \
    " FROM billing.invoices i JOIN billing.invoice_series s ON s.series = i.series" \
    " LEFT JOIN billing.invoices o ON o.id = i.corrects_invoice_id"                 \
    " LEFT JOIN billing.invoice_series os ON os.series = o.series"
#define SQL_LIST                                                                            \
    SQL_INVOICE_COLUMNS                                                                     \
    ", (i.returned - i.account_credit + i.carried)::text AS "                               \
    "account_credit_net" SQL_INVOICE_FROM                                                   \
    " WHERE ($1::date IS NULL OR i.month = $1::date) AND ($2::text IS NULL OR i.account_id" \
    " = $2::text) AND ($3::text IS NULL OR i.status = $3::text) AND ($4::text IS NULL OR"   \
    " i.series = $4::text) ORDER BY i.month, i.account_id, i.id LIMIT $5::bigint"
/*
 * A grant's balance as of an invoice, in major units: its 'grant' entry
 * and every entry of an invoice or credit note of an earlier month, or of
 * the same month created no later (ids are in creation order: a credit
 * note voiding this invoice comes after it, the corrected invoice after
 * the credit note). A recomputed draft's 'reverse' entries carry its own
 * id, so they cancel what the earlier computation took.
 */
#define SQL_GRANT_REMAINING                                                                   \
    "round(coalesce((SELECT sum(l.amount_minor) FROM billing.credit_ledger l"                 \
    " LEFT JOIN billing.invoices j ON j.id = l.invoice_id WHERE l.grant_id = g.id"            \
    " AND (l.entry = 'grant' OR j.month < i.month OR (j.month = i.month AND j.id <= i.id)))," \
    " 0) / 10::numeric ^ cu.digits, cu.digits)"
/* What invoice i expired of grant g (x: the lateral of SQL_GRANT_ROWS), in major units. */
#define SQL_GRANT_EXPIRED                                                                   \
    "CASE WHEN i.kind = 'credit_note' THEN 1 ELSE -1 END * x.net / 10::numeric ^ cu.digits" \
    " - x.applied + x.returned"
/*
 * The grants of invoice i's account and currency granted before its
 * period ended, each with what the invoice applied, returned (refunds)
 * and expired of it and what is left: those with any of the four. What
 * is left is what the grant holds on the invoice before what expires on
 * it (doc/pricing.md, "Expiry": "credit trial 2599.00 (401.00 left),
 * expired trial 401.00"), as billing rate gives it: the ledger balance
 * as of the invoice plus what the invoice expired.
 *
 * What expired is read from the net of the invoice's ledger entries on
 * the grant, never from its 'expire' entries alone: a recomputed draft
 * keeps the 'expire' entries of every earlier computation, each undone by
 * a 'reverse' (SQL_DRAFT_REVERSE), so summing them counted the expiry once
 * per computation. The net of an invoice's entries is what its current
 * computation took, -(applied + expired - returned); a credit note's is
 * the opposite of the invoice it voids, whose figures it repeats.
 */
#define SQL_GRANT_ROWS                                                                         \
    "SELECT g.id AS grant_id, g.priority, g.expires_at, g.granted_at,"                         \
    " round(x.applied, cu.digits) AS applied, round(x.returned, cu.digits) AS returned,"       \
    " round(" SQL_GRANT_EXPIRED ", cu.digits) AS expired, round(coalesce(x.left_applied,"      \
    " x.left_returned, CASE WHEN i.kind = 'credit_note' THEN " SQL_GRANT_REMAINING             \
    " ELSE " SQL_GRANT_REMAINING " + round(" SQL_GRANT_EXPIRED ", cu.digits) END), cu.digits)" \
    " AS remaining"                                                                            \
    " FROM billing.credit_grants g JOIN billing.currencies cu ON cu.code = g.currency"         \
    " CROSS JOIN LATERAL (SELECT coalesce(c.amount, 0) AS applied, c.remaining AS"             \
    " left_applied, coalesce(r.amount, 0) AS returned, r.remaining AS left_returned,"          \
    " coalesce((SELECT sum(l.amount_minor)"                                                    \
    " FROM billing.credit_ledger l WHERE l.grant_id = g.id AND l.invoice_id = i.id), 0)"       \
    " AS net FROM (SELECT 1) one LEFT JOIN billing.invoice_credits c ON c.invoice_id = i.id"   \
    " AND c.grant_id = g.id LEFT JOIN billing.invoice_returned_credits r"                      \
    " ON r.invoice_id = i.id AND r.grant_id = g.id) x"                                         \
    " WHERE g.account_id = i.account_id AND g.currency = i.currency"                           \
    " AND g.granted_at < i.period_end"
/* Application order (doc/pricing.md, "Order"), as libbilling lists grants; ids byte-wise. */
#define SQL_GRANT_ORDER "priority, expires_at, granted_at, grant_id COLLATE \"C\""
#define SQL_GRANT_COLUMNS                                                                   \
    "SELECT r.grant_id AS grant, r.applied::text AS applied, r.returned::text AS returned," \
    " r.expired::text AS expired, r.remaining::text AS remaining"
#define SQL_GRANTS_FROM " FROM billing.invoices i CROSS JOIN LATERAL (" SQL_GRANT_ROWS ") r"
#define SQL_GRANTS_SHOWN \
    " AND (r.applied <> 0 OR r.returned <> 0 OR r.expired <> 0 OR r.remaining <> 0)"
#define SQL_GRANTS                                                                \
    SQL_GRANT_COLUMNS SQL_GRANTS_FROM " WHERE i.id = $1::bigint" SQL_GRANTS_SHOWN \
                                      " ORDER BY r." SQL_GRANT_ORDER
/* The grants of a set of invoices, by invoice, then in application order; the invoice's id last. */
#define SQL_GRANTS_OF_SET                                                \
    SQL_GRANT_COLUMNS ", i.id AS invoice_id" SQL_GRANTS_FROM             \
                      " WHERE i.id = ANY($1::bigint[])" SQL_GRANTS_SHOWN \
                      " ORDER BY i.id, r." SQL_GRANT_ORDER
/* Dates in the account's zone, as the customer reads them. */
/*
 * An instant in the account's zone as RFC 3339 with its offset ("Z" for
 * UTC), as `billing rate` writes instants: "2026-01-01T00:00:00+08:00".
 */
#define SQL_OFFSET(col)                                                                    \
    "(SELECT CASE WHEN o = 0 THEN 'Z' ELSE CASE WHEN o < 0 THEN '-' ELSE '+' END"          \
    " || to_char(abs(o) / 3600, 'FM00') || ':' || to_char(abs(o) % 3600 / 60, 'FM00') END" \
    " FROM (SELECT extract(epoch FROM (" col " AT TIME ZONE a.time_zone) - (" col          \
    " AT TIME ZONE 'UTC'))::int AS o) off)"
#define SQL_LOCAL(col) \
    "(to_char(" col    \
    " AT TIME ZONE a.time_zone, 'YYYY-MM-DD\"T\"HH24:MI:SS') || " SQL_OFFSET(col) ")"
/* The price book of invoice i: its lines' (or those of the invoice it credits), else the only book. */
#define SQL_INVOICE_BOOK                                                                    \
    " LEFT JOIN LATERAL (SELECT coalesce(min(v.book_id), (SELECT min(b.id)"                 \
    " FROM billing.price_books b HAVING count(*) = 1)) AS id FROM billing.invoice_lines bl" \
    " JOIN billing.price_versions v ON v.id = bl.price_version_id"                          \
    " WHERE bl.invoice_id IN (i.id, coalesce(i.corrects_invoice_id, i.id))) bk ON true"     \
    " LEFT JOIN billing.issuers iss ON iss.book_id = bk.id"
/* A date of the account's zone, "" for NULL. */
#define SQL_LOCAL_DAY(expr) "coalesce(to_char(" expr ", 'YYYY-MM-DD'), '')"
/*
 * Left as written: clang-format 14 cuts this macro's strings into pieces of
 * two characters (the SQL_LOCAL() calls between them confuse it).
 */
/* clang-format off */
#define SQL_HEADER_FROM                                                                        \
    SQL_INVOICE_COLUMNS ", " SQL_LOCAL("i.period_start") " AS period_start, "                  \
    SQL_LOCAL("i.period_end") " AS period_end,"                                                \
    " i.tax_rate::text AS tax_rate, a.time_zone, coalesce(" SQL_LOCAL("i.finalized_at")        \
    ", '') AS finalized_at, coalesce(i.void_reason, '') AS void_reason,"                       \
    " coalesce(a.name, a.id) AS account_name, i.returned::text AS credit_returned,"            \
    " i.account_credit::text AS account_credit, i.carried::text AS carried,"                   \
    " i.account_credit_left::text AS account_credit_left,"                                     \
    " (i.subtotal + i.returned)::text AS before_credit, (i.subtotal + i.returned - i.credits"  \
    " - i.account_credit + i.carried)::text AS taxable, coalesce((SELECT sum(r.remaining)"     \
    " FROM (" SQL_GRANT_ROWS ") r), 0)::text AS credit_remaining,"                             \
    " coalesce(rf.amount::text, '') AS account_credit_refunded,"                               \
    " coalesce(rf.tax::text, '') AS refund_tax, coalesce(rf.total::text, '') AS refunded_total,"\
    " coalesce(rf.method, '') AS refund_method, coalesce(rf.reason, '') AS refund_reason,"     \
    " coalesce(rf.reference, '') AS refund_reference,"                                         \
    " coalesce(o.void_reason, '') AS corrects_reason,"                                         \
    " " SQL_LOCAL_DAY("i.period_start AT TIME ZONE a.time_zone") " AS period_first,"           \
    " " SQL_LOCAL_DAY("(i.period_end AT TIME ZONE a.time_zone) - interval '1 day'")            \
    " AS period_last, " SQL_LOCAL_DAY("i.finalized_at AT TIME ZONE a.time_zone")              \
    " AS issue_date, " SQL_LOCAL_DAY("(i.finalized_at AT TIME ZONE a.time_zone)::date"         \
    " + coalesce(iss.payment_terms_days, 30)") " AS due_date, coalesce(bk.id, '') AS book,"    \
    " coalesce(a.email, '') AS email, coalesce(a.billing_address, '') AS billing_address,"     \
    " coalesce(a.tax_id, '') AS customer_tax_id, a.language" SQL_INVOICE_FROM                   \
    " JOIN billing.accounts a ON a.id = i.account_id"                                          \
    " LEFT JOIN billing.invoice_refunds rf ON rf.credit_note_id = i.id" SQL_INVOICE_BOOK
/* clang-format on */
#define SQL_HEADER SQL_HEADER_FROM " WHERE i.id = $1::bigint"
/* The headers of a set of invoices ($1: bigint[]), by id. */
#define SQL_HEADERS SQL_HEADER_FROM " WHERE i.id = ANY($1::bigint[]) ORDER BY i.id"
/*
 * An instant of a refund's span as billing_time_format writes it (UTC, "Z",
 * only the fractional digits needed), so that the stored line reads as
 * `billing rate` prints it; "" for NULL.
 */
#define SPAN_TEXT(col)                                                                          \
    "coalesce(rtrim(rtrim(to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')," \
    " '0'), '.') || 'Z', '')"
/*
 * The display name of catalog key @col of kind @kind (migration 0018) in
 * the account's language, else in English, else "".
 */
#define SQL_NAME(kind, col)                                                          \
    "coalesce((SELECT n.name FROM billing.display_names n WHERE n.kind = '" kind "'" \
    " AND n.key = " col " AND n.language IN (la.language, 'en')"                     \
    " ORDER BY n.language = la.language DESC LIMIT 1), '')"
/* Left as written, as SQL_HEADER_FROM above. */
/* clang-format off */
#define SQL_LINE_COLUMNS                                                                       \
    "SELECT l.line_no AS line, l.kind, coalesce(l.meter, '') AS meter, l.model, l.region,"     \
    " coalesce(l.plan_id, '') AS plan, coalesce(v.label, '') AS price_version,"                \
    " coalesce(to_char(l.adjusts_month, 'YYYY-MM'), '') AS adjusts_period,"                    \
    " l.quantity::text AS quantity, l.quantity_den::text AS quantity_den, l.unit,"             \
    " l.unit_price::text AS unit_price, l.amount::text AS amount,"                             \
    " " SPAN_TEXT("l.unused_from") " AS unused_from,"                                          \
    " " SPAN_TEXT("l.unused_to") " AS unused_to,"                                              \
    " coalesce(to_char(l.unused_from AT TIME ZONE la.time_zone, 'YYYY-MM-DD HH24:MI'), '')"    \
    " AS unused_from_local,"                                                                   \
    " " SQL_NAME("model", "l.model") " AS model_name,"                                         \
    " " SQL_NAME("region", "l.region") " AS region_name,"                                      \
    " " SQL_NAME("plan", "l.plan_id") " AS plan_name"
/* clang-format on */
#define SQL_LINES_FROM                                                               \
    " FROM billing.invoice_lines l LEFT JOIN billing.price_versions v"               \
    " ON v.id = l.price_version_id JOIN billing.invoices li ON li.id = l.invoice_id" \
    " JOIN billing.accounts la ON la.id = li.account_id"
#define SQL_LINES \
    SQL_LINE_COLUMNS SQL_LINES_FROM " WHERE l.invoice_id = $1::bigint ORDER BY l.line_no"
/* The lines of a set of invoices, by invoice and line, with the invoice's id last. */
#define SQL_LINES_OF_SET                                           \
    SQL_LINE_COLUMNS ", l.invoice_id AS invoice_id" SQL_LINES_FROM \
                     " WHERE l.invoice_id = ANY($1::bigint[]) ORDER BY l.invoice_id, l.line_no"
#define SQL_CREDITS                                                                 \
    "SELECT c.grant_id, c.amount::text FROM billing.invoice_credits c JOIN"         \
    " billing.credit_grants g ON g.id = c.grant_id WHERE c.invoice_id = $1::bigint" \
    " ORDER BY g.priority, g.expires_at, g.granted_at, g.id COLLATE \"C\""

#define SUMMARY(f) BS_ROWTEXT(bs_invoice_summary, f)
static const bs_rowtext_field summary_fields[] = {
    SUMMARY(id),       SUMMARY(number),
    SUMMARY(account),  SUMMARY(kind),
    SUMMARY(period),   SUMMARY(status),
    SUMMARY(currency), SUMMARY(subtotal),
    SUMMARY(credits),  SUMMARY(tax),
    SUMMARY(total),    SUMMARY(series),
    SUMMARY(corrects), SUMMARY(account_credit_net),
};
#define N_SUMMARY (sizeof(summary_fields) / sizeof(summary_fields[0]))

/* The rows of @sql (summary columns) with @n_params @params into *@out[0..*@n). */
static bs_status summaries(bs_conn *c, const char *sql, int n_params, const char *const *params,
                           bs_invoice_summary **out, size_t *n, bs_error *err)
{
    void *rows;
    bs_status st;

    st = bs_rowtext_query(c, sql, n_params, params, summary_fields, N_SUMMARY, sizeof(**out),
                          "invoice list", &rows, n, err);
    *out = rows;
    return st;
}

bs_status bs_invoice_list(bs_conn *c, const char *month, const char *account, const char *status,
                          const char *series, long limit, bs_invoice_summary **out, size_t *n,
                          bs_error *err)
{
    char limit_text[32];
    const char *params[5] = {month, account, status, series, limit_text};

    snprintf(limit_text, sizeof(limit_text), "%ld", limit);
    return summaries(c, SQL_LIST, 5, params, out, n, err);
}

/* bs_invoice_search: the filters of bs_invoice_filter, then the page after an id. */
#define SQL_SEARCH                                                                            \
    SQL_INVOICE_COLUMNS                                                                       \
    ", (i.returned - i.account_credit + i.carried)::text AS "                                 \
    "account_credit_net" SQL_INVOICE_FROM                                                     \
    " WHERE ($1::date IS NULL OR i.month = $1::date) AND ($2::text IS NULL OR i.account_id"   \
    " = $2::text) AND ($3::text IS NULL OR i.status = $3::text) AND ($4::text IS NULL OR"     \
    " i.kind = $4::text) AND ($5::text IS NULL OR (i.number IS NOT NULL AND " SQL_NUMBER_TEXT \
    " = $5::text)) AND i.id > $6::bigint ORDER BY i.id LIMIT $7::bigint"

bs_status bs_invoice_search(bs_conn *c, const bs_invoice_filter *f, bs_invoice_summary **out,
                            size_t *n, bs_error *err)
{
    char after[32];
    char limit[32];
    const char *params[7] = {f->month, f->account, f->status, f->kind, f->number, after, limit};

    snprintf(after, sizeof(after), "%" PRId64, f->after);
    snprintf(limit, sizeof(limit), "%ld", f->limit);
    return summaries(c, SQL_SEARCH, 7, params, out, n, err);
}

#define SQL_FINALIZED_WHERE                                                      \
    " WHERE i.month = $1::date AND i.currency = $2::text AND i.kind = 'invoice'" \
    " AND i.status = 'finalized'"
#define SQL_FINALIZED_LINES                                                                    \
    "SELECT CASE WHEN l.kind = 'adjustment' THEN 'adjustment' ELSE coalesce(l.meter, '') END," \
    " sum(l.amount)::text, count(*) FROM billing.invoice_lines l JOIN billing.invoices i"      \
    " ON i.id = l.invoice_id" SQL_FINALIZED_WHERE " GROUP BY 1 ORDER BY 1"
#define SQL_FINALIZED_TOTALS                                                               \
    "SELECT coalesce(sum(i.subtotal), 0)::text AS subtotal,"                               \
    " coalesce(sum(i.credits), 0)::text AS credits, coalesce(sum(i.tax), 0)::text AS tax," \
    " coalesce(sum(i.total), 0)::text AS total"                                            \
    " FROM billing.invoices i" SQL_FINALIZED_WHERE

static const bs_rowtext_field totals_fields[] = {
    BS_ROWTEXT(bs_money_totals, subtotal),
    BS_ROWTEXT(bs_money_totals, credits),
    BS_ROWTEXT(bs_money_totals, tax),
    BS_ROWTEXT(bs_money_totals, total),
};

bs_status bs_invoice_finalized_sums(bs_conn *c, const char *month, const char *currency,
                                    bs_kind_sum_fn fn, void *arg, bs_money_totals **totals,
                                    bs_error *err)
{
    const char *params[2] = {month, currency};
    void *rows = NULL;
    size_t n = 0;
    bs_status st;

    *totals = NULL;
    st = bs_kind_sums(c, SQL_FINALIZED_LINES, 2, params, fn, arg, err);
    if (st == BS_OK)
        st = bs_rowtext_query(c, SQL_FINALIZED_TOTALS, 2, params, totals_fields,
                              sizeof(totals_fields) / sizeof(totals_fields[0]), sizeof(**totals),
                              "finalized sums", &rows, &n, err);
    if (st == BS_OK && n != 1) {
        free(rows);
        return bs_error_set(err, BS_ERR_FATAL, "finalized sums: %zu rows, not one", n);
    }
    *totals = rows;
    return st;
}

/*
 * One statement with the invoice id as its only parameter, prepared once
 * per connection under @name: an export reads thousands of invoices, and
 * planning the header and grant queries (correlated subqueries per grant)
 * took longer than running them.
 */
static PGresult *by_id(bs_conn *c, const char *name, const char *sql, int64_t id, bs_error *err)
{
    char id_text[32];
    const char *params[1] = {id_text};

    snprintf(id_text, sizeof(id_text), "%lld", (long long)id);
    return bs_query_prepared(c, name, sql, 1, params, err);
}

PGresult *bs_invoice_lines(bs_conn *c, int64_t id, bs_error *err)
{
    return by_id(c, "bs_invoice_lines", SQL_LINES, id, err);
}

PGresult *bs_invoice_credits(bs_conn *c, int64_t id, bs_error *err)
{
    return by_id(c, "bs_invoice_credits", SQL_CREDITS, id, err);
}

PGresult *bs_invoice_grants(bs_conn *c, int64_t id, bs_error *err)
{
    return by_id(c, "bs_invoice_grants", SQL_GRANTS, id, err);
}

/*
 * One statement over a set of invoices ($1: their ids as a bigint[]
 * literal), prepared once per connection as by_id is: an export reads a
 * chunk of invoices in three statements instead of three per invoice.
 */
static PGresult *by_ids(bs_conn *c, const char *name, const char *sql, const int64_t *ids, size_t n,
                        bs_error *err)
{
    char text[BS_INVOICE_SET_MAX * 21 + 3];
    const char *params[1] = {text};
    size_t len = 0;
    size_t i;

    if (n > BS_INVOICE_SET_MAX) {
        bs_error_set(err, BS_ERR_INVALID, "%zu invoices in one read, at most %d", n,
                     BS_INVOICE_SET_MAX);
        return NULL;
    }
    text[len++] = '{';
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%lld", i > 0 ? "," : "",
                                (long long)ids[i]);
    text[len++] = '}';
    text[len] = '\0';
    return bs_query_prepared(c, name, sql, 1, params, err);
}

/* ---------------------------------------------------------------------- */
/* Typed reads: the rows above as structs, fields found by column name     */
/* ---------------------------------------------------------------------- */

#define HEAD(f) BS_ROWTEXT(bs_invoice_head, f)
static const bs_rowtext_field head_fields[] = {
    HEAD(id),
    HEAD(number),
    HEAD(account),
    HEAD(kind),
    HEAD(period),
    HEAD(status),
    HEAD(currency),
    HEAD(subtotal),
    HEAD(credits),
    HEAD(tax),
    HEAD(total),
    HEAD(series),
    HEAD(corrects),
    HEAD(period_start),
    HEAD(period_end),
    HEAD(tax_rate),
    HEAD(time_zone),
    HEAD(finalized_at),
    HEAD(void_reason),
    HEAD(account_name),
    HEAD(credit_returned),
    HEAD(account_credit),
    HEAD(carried),
    HEAD(account_credit_left),
    HEAD(before_credit),
    HEAD(taxable),
    HEAD(credit_remaining),
    HEAD(account_credit_refunded),
    HEAD(refund_tax),
    HEAD(refunded_total),
    HEAD(refund_method),
    HEAD(refund_reason),
    HEAD(refund_reference),
    HEAD(corrects_reason),
    HEAD(period_first),
    HEAD(period_last),
    HEAD(issue_date),
    HEAD(due_date),
    HEAD(book),
    {"account", offsetof(bs_invoice_head, customer.account)},
    {"account_name", offsetof(bs_invoice_head, customer.name)},
    {"email", offsetof(bs_invoice_head, customer.email)},
    {"billing_address", offsetof(bs_invoice_head, customer.billing_address)},
    {"customer_tax_id", offsetof(bs_invoice_head, customer.tax_id)},
    {"language", offsetof(bs_invoice_head, customer.language)},
};
#define N_HEAD (sizeof(head_fields) / sizeof(head_fields[0]))

#define LINE(f) BS_ROWTEXT(bs_invoice_line, f)
static const bs_rowtext_field line_fields[] = {
    LINE(line),       LINE(kind),         LINE(meter),         LINE(model),
    LINE(region),     LINE(plan),         LINE(price_version), LINE(adjusts_period),
    LINE(quantity),   LINE(quantity_den), LINE(unit),          LINE(unit_price),
    LINE(amount),     LINE(unused_from),  LINE(unused_to),     LINE(unused_from_local),
    LINE(model_name), LINE(region_name),  LINE(plan_name),
};
#define N_LINE (sizeof(line_fields) / sizeof(line_fields[0]))

#define GRANT(f) BS_ROWTEXT(bs_invoice_grant, f)
static const bs_rowtext_field grant_fields[] = {
    GRANT(grant), GRANT(applied), GRANT(returned), GRANT(expired), GRANT(remaining),
};
#define N_GRANT (sizeof(grant_fields) / sizeof(grant_fields[0]))

/* The rows of one invoice in three results: header row @hr, @nl lines from @lr, @ng grants from @gr. */
typedef struct rows_src {
    const PGresult *h, *l, *g;
    int hr, lr, nl, gr, ng;
} rows_src;

static bs_invoice_rows *rows_build(const rows_src *s)
{
    size_t size = sizeof(bs_invoice_rows) + (size_t)s->nl * sizeof(bs_invoice_line) +
                  (size_t)s->ng * sizeof(bs_invoice_grant);
    bs_invoice_line *lines;
    bs_invoice_grant *grants;
    bs_invoice_rows *rows;
    char *arena;
    int r;

    size += bs_rowtext_size(s->h, s->hr, head_fields, N_HEAD);
    for (r = 0; r < s->nl; r++)
        size += bs_rowtext_size(s->l, s->lr + r, line_fields, N_LINE);
    for (r = 0; r < s->ng; r++)
        size += bs_rowtext_size(s->g, s->gr + r, grant_fields, N_GRANT);
    rows = calloc(1, size);
    if (rows == NULL)
        return NULL;
    lines = (bs_invoice_line *)(rows + 1);
    grants = (bs_invoice_grant *)(lines + s->nl);
    arena = (char *)(grants + s->ng);
    arena = bs_rowtext_fill(s->h, s->hr, head_fields, N_HEAD, &rows->head, arena);
    for (r = 0; r < s->nl; r++)
        arena = bs_rowtext_fill(s->l, s->lr + r, line_fields, N_LINE, &lines[r], arena);
    for (r = 0; r < s->ng; r++)
        arena = bs_rowtext_fill(s->g, s->gr + r, grant_fields, N_GRANT, &grants[r], arena);
    rows->lines = lines;
    rows->n_lines = (size_t)s->nl;
    rows->grants = grants;
    rows->n_grants = (size_t)s->ng;
    return rows;
}

/* BS_OK when the three results have every column the structs need. */
static bs_status rows_check(const PGresult *h, const PGresult *l, const PGresult *g, bs_error *err)
{
    if (bs_rowtext_check(h, head_fields, N_HEAD) != 0 ||
        bs_rowtext_check(l, line_fields, N_LINE) != 0 ||
        bs_rowtext_check(g, grant_fields, N_GRANT) != 0)
        return bs_error_set(err, BS_ERR_FATAL, "invoice read: a column is missing from a query");
    return BS_OK;
}

bs_status bs_invoice_read(bs_conn *c, int64_t id, bs_invoice_rows **out, bs_error *err)
{
    PGresult *h;
    PGresult *l = NULL;
    PGresult *g = NULL;
    bs_status st = BS_OK;

    *out = NULL;
    h = by_id(c, "bs_invoice_header", SQL_HEADER, id, err);
    if (h != NULL && PQntuples(h) != 1)
        st = bs_error_set(err, BS_ERR_INVALID, "no invoice with id %lld", (long long)id);
    else if (h != NULL)
        l = bs_invoice_lines(c, id, err);
    if (l != NULL)
        g = bs_invoice_grants(c, id, err);
    if (st == BS_OK && g == NULL)
        st = err != NULL ? err->status : BS_ERR_FATAL;
    if (st == BS_OK)
        st = rows_check(h, l, g, err);
    if (st == BS_OK) {
        rows_src s = {h, l, g, 0, 0, PQntuples(l), 0, PQntuples(g)};
        *out = rows_build(&s);
        if (*out == NULL)
            st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    }
    PQclear(h);
    PQclear(l);
    PQclear(g);
    return st;
}

/* The first row of @res (ordered by the id in column @col) whose id is not below @id. */
static int first_row(const PGresult *res, int col, int64_t id)
{
    int lo = 0;
    int hi = PQntuples(res);

    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strtoll(PQgetvalue(res, mid, col), NULL, 10) < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* How many rows of @res from @row on have the id @id in column @col. */
static int rows_with(const PGresult *res, int col, int row, int64_t id)
{
    int n = 0;

    while (row + n < PQntuples(res) && strtoll(PQgetvalue(res, row + n, col), NULL, 10) == id)
        n++;
    return n;
}

bs_status bs_invoice_read_set(bs_conn *c, const int64_t *ids, size_t n, bs_invoice_rows **out,
                              bs_error *err)
{
    PGresult *h;
    PGresult *l = NULL;
    PGresult *g = NULL;
    bs_status st = BS_OK;
    size_t i;

    memset(out, 0, n * sizeof(*out));
    h = by_ids(c, "bs_invoice_headers", SQL_HEADERS, ids, n, err);
    if (h != NULL)
        l = by_ids(c, "bs_invoice_lines_of_set", SQL_LINES_OF_SET, ids, n, err);
    if (l != NULL)
        g = by_ids(c, "bs_invoice_grants_of_set", SQL_GRANTS_OF_SET, ids, n, err);
    if (g == NULL)
        st = err != NULL ? err->status : BS_ERR_FATAL;
    if (st == BS_OK)
        st = rows_check(h, l, g, err);
    for (i = 0; st == BS_OK && i < n; i++) {
        int hc = PQfnumber(h, "id");
        int lc = PQfnumber(l, "invoice_id");
        int gc = PQfnumber(g, "invoice_id");
        rows_src s = {h,
                      l,
                      g,
                      first_row(h, hc, ids[i]),
                      first_row(l, lc, ids[i]),
                      0,
                      first_row(g, gc, ids[i]),
                      0};
        if (rows_with(h, hc, s.hr, ids[i]) != 1) {
            st = bs_error_set(err, BS_ERR_INVALID, "no invoice with id %lld", (long long)ids[i]);
            break;
        }
        s.nl = rows_with(l, lc, s.lr, ids[i]);
        s.ng = rows_with(g, gc, s.gr, ids[i]);
        out[i] = rows_build(&s);
        if (out[i] == NULL)
            st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    }
    for (i = 0; st != BS_OK && i < n; i++) {
        bs_invoice_rows_free(out[i]);
        out[i] = NULL;
    }
    PQclear(h);
    PQclear(l);
    PQclear(g);
    return st;
}

void bs_invoice_rows_free(bs_invoice_rows *rows)
{
    free(rows);
}
