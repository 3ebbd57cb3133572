/*
 * export.c - stored invoices as tables, JSON and CSV. See export.h.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "export.h"
#include "invoices.h"
#include "numfmt.h"

/* Every column of bs_invoice_header, by position. */
static const char *const header_keys[] = {"id",
                                          "number",
                                          "account",
                                          "kind",
                                          "period",
                                          "status",
                                          "currency",
                                          "subtotal",
                                          "credits",
                                          "tax",
                                          "total",
                                          "series",
                                          "corrects",
                                          "period_start",
                                          "period_end",
                                          "tax_rate",
                                          "time_zone",
                                          "finalized_at",
                                          "void_reason",
                                          "account_name",
                                          "credit_returned",
                                          "account_credit",
                                          "carried",
                                          "account_credit_left",
                                          "before_credit",
                                          "taxable",
                                          "credit_remaining",
                                          "account_credit_refunded",
                                          "refund_tax",
                                          "refunded_total",
                                          "refund_method",
                                          "refund_reason",
                                          "refund_reference"};
#define N_HEADER_KEYS (sizeof(header_keys) / sizeof(header_keys[0]))

/* bs_invoice_lines; the quantity is shown as quantity/den when den is not 1. */
const export_column export_line_columns[] = {
    {"line", "#", 0, 1, 1, 0},
    {"kind", "KIND", 1, 1, 0, 0},
    {"meter", "METER", 2, 1, 0, 0},
    {"model", "MODEL", 3, 1, 0, 0},
    {"region", "REGION", 4, 1, 0, 0},
    {"plan", "PLAN", 5, 1, 0, 0},
    {"price_version", "VERSION", 6, 1, 0, 0},
    {"adjusts_period", "ADJUSTS", 7, 1, 0, 0},
    {"quantity", "QUANTITY", 8, 1, 1, 9},
    {"unit", "UNIT", 10, 1, 0, 0},
    {"unit_price", "UNIT PRICE", 11, 1, 1, 0},
    {"amount", "AMOUNT", 12, 1, 1, 0},
};
const size_t export_n_line_columns = sizeof(export_line_columns) / sizeof(export_line_columns[0]);

/* bs_invoice_grants: what the invoice did to each grant, and what is left of it. */
const export_column export_grant_columns[] = {
    {"grant", "GRANT", 0, 1, 0, 0},         {"applied", "APPLIED", 1, 1, 1, 0},
    {"returned", "RETURNED", 2, 1, 1, 0},   {"expired", "EXPIRED", 3, 1, 1, 0},
    {"remaining", "REMAINING", 4, 1, 1, 0},
};
const size_t export_n_grant_columns =
    sizeof(export_grant_columns) / sizeof(export_grant_columns[0]);

/* Longest cell printed in a table (ids and numbers are far shorter). */
#define CELL_MAX 256

/* cell - the text of column @c of row @row ("n/d" for a fraction). */
static const char *cell(const PGresult *res, int row, const export_column *c, char *buf,
                        size_t size)
{
    if (c->den > 0 && strcmp(PQgetvalue(res, row, c->den), "1") != 0) {
        snprintf(buf, size, "%s/%s", PQgetvalue(res, row, c->col), PQgetvalue(res, row, c->den));
        return buf;
    }
    return PQgetvalue(res, row, c->col);
}

static json_t *row_json(const PGresult *res, int row, const export_column *cols, size_t n)
{
    json_t *o = json_object();
    char buf[CELL_MAX];
    size_t i;

    for (i = 0; o != NULL && i < n; i++) {
        if (json_object_set_new(o, cols[i].key,
                                json_string(cell(res, row, &cols[i], buf, sizeof(buf)))) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *rows_json(const PGresult *res, const export_column *cols, size_t n)
{
    json_t *arr = json_array();
    int r;

    for (r = 0; arr != NULL && r < PQntuples(res); r++) {
        if (json_array_append_new(arr, row_json(res, r, cols, n)) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int dump(FILE *out, json_t *v)
{
    int rc = v != NULL ? json_dumpf(v, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : -1;

    if (rc == 0)
        fputc('\n', out);
    json_decref(v);
    return rc;
}

int export_rows_json(FILE *out, const PGresult *res, const export_column *cols, size_t n)
{
    return dump(out, rows_json(res, cols, n));
}

int export_rows_table(FILE *out, const PGresult *res, const export_column *cols, size_t n)
{
    size_t width[32];
    char buf[CELL_MAX];
    size_t i;
    int r;

    if (n > 32)
        return -1;
    for (i = 0; i < n; i++) {
        width[i] = strlen(cols[i].header);
        for (r = 0; r < PQntuples(res); r++) {
            size_t w = strlen(cell(res, r, &cols[i], buf, sizeof(buf)));
            if (w > width[i])
                width[i] = w;
        }
    }
    for (r = -1; r < PQntuples(res); r++) {
        const char *sep = "";
        for (i = 0; i < n; i++) {
            const char *v = r < 0 ? cols[i].header : cell(res, r, &cols[i], buf, sizeof(buf));
            if (!cols[i].in_table)
                continue;
            fprintf(out, cols[i].right ? "%s%*s" : "%s%-*s", sep, (int)width[i], v);
            sep = "  ";
        }
        fputc('\n', out);
    }
    return ferror(out) ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* One invoice                                                             */
/* ---------------------------------------------------------------------- */

bs_status export_invoice_load(bs_conn *c, int64_t id, export_invoice *inv, bs_error *err)
{
    memset(inv, 0, sizeof(*inv));
    inv->header = bs_invoice_header(c, id, err);
    if (inv->header != NULL && PQntuples(inv->header) != 1) {
        export_invoice_free(inv);
        return bs_error_set(err, BS_ERR_INVALID, "no invoice with id %lld", (long long)id);
    }
    if (inv->header != NULL)
        inv->lines = bs_invoice_lines(c, id, err);
    if (inv->lines != NULL)
        inv->grants = bs_invoice_grants(c, id, err);
    if (inv->grants == NULL) {
        export_invoice_free(inv);
        return err != NULL ? err->status : BS_ERR_FATAL;
    }
    return BS_OK;
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

/* Most columns rows_copy copies (the header has 33). */
#define COPY_COLS_MAX 64

/*
 * Rows [@first, @first + @n) and the first @ncols columns of @res as a
 * result of their own, as a query for one invoice returns it. NULL when
 * out of memory (or past COPY_COLS_MAX columns, which no read has).
 */
static PGresult *rows_copy(const PGresult *res, int first, int n, int ncols)
{
    PGresAttDesc att[COPY_COLS_MAX];
    PGresult *out;
    int r;
    int f;

    if (ncols > COPY_COLS_MAX)
        return NULL;
    for (f = 0; f < ncols; f++) {
        att[f].name = PQfname(res, f);
        att[f].tableid = PQftable(res, f);
        att[f].columnid = PQftablecol(res, f);
        att[f].format = PQfformat(res, f);
        att[f].typid = PQftype(res, f);
        att[f].typlen = PQfsize(res, f);
        att[f].atttypmod = PQfmod(res, f);
    }
    out = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
    if (out == NULL || !PQsetResultAttrs(out, ncols, att))
        goto fail;
    for (r = 0; r < n; r++) {
        for (f = 0; f < ncols; f++) {
            int null = PQgetisnull(res, first + r, f);
            if (!PQsetvalue(out, r, f, null ? NULL : PQgetvalue(res, first + r, f),
                            null ? -1 : PQgetlength(res, first + r, f)))
                goto fail;
        }
    }
    return out;
fail:
    PQclear(out);
    return NULL;
}

/* Invoice @id's rows of the set reads @h, @l and @g, into @inv. */
static bs_status split(export_invoice *inv, int64_t id, const PGresult *h, const PGresult *l,
                       const PGresult *g, bs_error *err)
{
    int hr = first_row(h, 0, id);
    int lr = first_row(l, PQnfields(l) - 1, id);
    int gr = first_row(g, PQnfields(g) - 1, id);

    if (rows_with(h, 0, hr, id) != 1)
        return bs_error_set(err, BS_ERR_INVALID, "no invoice with id %lld", (long long)id);
    inv->header = rows_copy(h, hr, 1, PQnfields(h));
    inv->lines = rows_copy(l, lr, rows_with(l, PQnfields(l) - 1, lr, id), PQnfields(l) - 1);
    inv->grants = rows_copy(g, gr, rows_with(g, PQnfields(g) - 1, gr, id), PQnfields(g) - 1);
    if (inv->header == NULL || inv->lines == NULL || inv->grants == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    return BS_OK;
}

bs_status export_invoices_load(bs_conn *c, const int64_t *ids, size_t n, export_invoice *invs,
                               bs_error *err)
{
    PGresult *h;
    PGresult *l = NULL;
    PGresult *g = NULL;
    bs_status st = BS_OK;
    size_t i;

    memset(invs, 0, n * sizeof(*invs));
    h = bs_invoice_headers(c, ids, n, err);
    if (h != NULL)
        l = bs_invoice_lines_of_set(c, ids, n, err);
    if (l != NULL)
        g = bs_invoice_grants_of_set(c, ids, n, err);
    if (g == NULL)
        st = err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; st == BS_OK && i < n; i++)
        st = split(&invs[i], ids[i], h, l, g, err);
    for (i = 0; st != BS_OK && i < n; i++)
        export_invoice_free(&invs[i]);
    PQclear(h);
    PQclear(l);
    PQclear(g);
    return st;
}

void export_invoice_free(export_invoice *inv)
{
    PQclear(inv->header);
    PQclear(inv->lines);
    PQclear(inv->grants);
    memset(inv, 0, sizeof(*inv));
}

const char *export_field(const export_invoice *inv, const char *key)
{
    size_t i;

    for (i = 0; i < N_HEADER_KEYS; i++) {
        if (strcmp(header_keys[i], key) == 0)
            return PQgetvalue(inv->header, 0, (int)i);
    }
    return "";
}

/*
 * The invoice's credit per grant as `billing rate` writes it (doc/formats.md):
 * one array per figure, each of the grants rows (application order) whose
 * figure is not zero, with {"grant", "amount"} and, when @with_left, the
 * grant's "remaining" on the invoice (before what expires on it).
 */
static json_t *grant_list_json(const PGresult *grants, int col, int with_left)
{
    json_t *arr = json_array();
    int r;

    for (r = 0; arr != NULL && r < PQntuples(grants); r++) {
        const char *am = PQgetvalue(grants, r, col);
        json_t *e;
        if (strspn(am, "0.") == strlen(am))
            continue;
        e = with_left ? json_pack("{s:s, s:s, s:s}", "grant", PQgetvalue(grants, r, 0), "amount",
                                  am, "remaining", PQgetvalue(grants, r, 4))
                      : json_pack("{s:s, s:s}", "grant", PQgetvalue(grants, r, 0), "amount", am);
        if (json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/*
 * Every header field; "credits" is the total in the header but the
 * grants' list in JSON (as in `billing rate`), so the total is also
 * "credits_total" and the returned credit "returned_total": the figures
 * of `billing rate --format json` under the same keys (account credit
 * apart: `account_credit`, `carried`, `account_credit_left` here).
 */
static json_t *invoice_json(const export_invoice *inv)
{
    json_t *o = json_object();
    size_t i;

    for (i = 0; o != NULL && i < N_HEADER_KEYS; i++) {
        if (json_object_set_new(o, header_keys[i],
                                json_string(PQgetvalue(inv->header, 0, (int)i))) != 0)
            goto fail;
    }
    if (o == NULL ||
        json_object_set_new(o, "credits_total", json_string(export_field(inv, "credits"))) != 0 ||
        json_object_set_new(o, "returned_total",
                            json_string(export_field(inv, "credit_returned"))) != 0 ||
        json_object_set_new(
            o, "lines", rows_json(inv->lines, export_line_columns, export_n_line_columns)) != 0 ||
        json_object_set_new(o, "credits", grant_list_json(inv->grants, 1, 1)) != 0 ||
        json_object_set_new(o, "expired_credits", grant_list_json(inv->grants, 3, 0)) != 0 ||
        json_object_set_new(o, "returned_credits", grant_list_json(inv->grants, 2, 1)) != 0 ||
        json_object_set_new(
            o, "grants", rows_json(inv->grants, export_grant_columns, export_n_grant_columns)) != 0)
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

int export_invoice_json(FILE *out, const export_invoice *inv)
{
    return dump(out, invoice_json(inv));
}

/*
 * The invoice's totals in the order a customer reconciles them: what the
 * lines and refunds come to, the credit taken off, then tax and the amount
 * due (doc/operations.md, "Credit on invoices"). Rows whose zero cannot
 * confuse (returned, account credit, carried) are left out when zero;
 * what is taken off is printed with a minus.
 */
const export_total export_totals[] = {
    {"subtotal", "Subtotal (lines)", 0, 0},
    {"credit_returned", "Credit returned to grants (refunds)", 1, 0},
    {"before_credit", "Total before credit", 0, 0},
    {"credits", "Credit applied", 0, 1},
    {"account_credit", "Account credit applied", 1, 1},
    {"carried", "Carried to account credit", 1, 0},
    {"taxable", "Taxable amount", 0, 0},
    {"tax", "Tax", 0, 0},
    {"total", "Amount due", 0, 0},
    /* A credit note of account credit refunded out of band (billing.refund_invoice). */
    {"account_credit_refunded", "Account credit refunded", 1, 0},
    {"refund_tax", "Tax on it refunded", 1, 0},
    {"refunded_total", "Refunded to the payment method", 1, 0},
};
const size_t export_n_totals = sizeof(export_totals) / sizeof(export_totals[0]);

/* Non-zero when total row @t of @inv is printed. */
int export_total_shown(const export_invoice *inv, const export_total *t)
{
    const char *v = export_field(inv, t->key);

    return !t->hide_zero || strspn(v, "-0.") != strlen(v);
}

const char *export_total_label(const export_invoice *inv, const export_total *t, char *buf,
                               size_t size)
{
    char pct[64];

    if (strcmp(t->key, "tax") == 0 && export_field(inv, "tax_rate")[0] != '\0' &&
        numfmt_percent(export_field(inv, "tax_rate"), pct, sizeof(pct)) == 0) {
        snprintf(buf, size, "Tax at %s", pct);
        return buf;
    }
    if (strcmp(t->key, "total") != 0)
        return t->label;
    if (strcmp(export_field(inv, "kind"), "credit_note") == 0)
        return "Total credited";
    if (strcmp(export_field(inv, "status"), "void") == 0)
        return "Amount due (void: nothing to pay)";
    return t->label;
}

/* The amount of total row @t: what is taken off is printed with a minus ("-12.00"). */
const char *export_total_text(const export_invoice *inv, const export_total *t, char *buf,
                              size_t size)
{
    const char *v = export_field(inv, t->key);

    if (!t->taken_off || strspn(v, "0.") == strlen(v))
        return v;
    snprintf(buf, size, "-%s", v);
    return buf;
}

static void table_totals(FILE *out, const export_invoice *inv)
{
    char label[CELL_MAX];
    char buf[CELL_MAX];
    size_t i;

    fputc('\n', out);
    for (i = 0; i < export_n_totals; i++) {
        if (export_total_shown(inv, &export_totals[i]))
            fprintf(out, "%-36s %16s %s\n",
                    export_total_label(inv, &export_totals[i], label, sizeof(label)),
                    export_total_text(inv, &export_totals[i], buf, sizeof(buf)),
                    export_field(inv, "currency"));
    }
}

int export_invoice_table(FILE *out, const export_invoice *inv)
{
    size_t i;

    for (i = 0; i < N_HEADER_KEYS; i++) {
        const char *v = PQgetvalue(inv->header, 0, (int)i);
        if (v[0] != '\0')
            fprintf(out, "%-19s %s\n", header_keys[i], v);
    }
    fputc('\n', out);
    if (export_rows_table(out, inv->lines, export_line_columns, export_n_line_columns) != 0)
        return -1;
    table_totals(out, inv);
    if (PQntuples(inv->grants) > 0) {
        fputs("\ncredit grants (in application order; remaining: on this invoice, before what "
              "expires)\n",
              out);
        if (export_rows_table(out, inv->grants, export_grant_columns, export_n_grant_columns) != 0)
            return -1;
    }
    return ferror(out) ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* CSV (RFC 4180): CRLF line ends, fields with comma, quote, CR or LF quoted */
/* ---------------------------------------------------------------------- */

/* One cell (csv.h: quoted, formulas made inert), after a comma unless @first. */
static void csv_field(FILE *out, const char *s, int first)
{
    if (!first)
        fputc(',', out);
    csv_cell(out, s);
}

/*
 * Invoice fields repeated on every row, then the line's columns: the
 * totals and credit too, so that a spreadsheet of one file reconciles
 * (lines sum to subtotal; before_credit - credits - account_credit +
 * carried = taxable; taxable + tax = total).
 */
static const char *const csv_invoice_keys[] = {
    "number",   "account",        "period",           "status",
    "currency", "subtotal",       "credit_returned",  "before_credit",
    "credits",  "account_credit", "carried",          "taxable",
    "tax",      "total",          "credit_remaining", "account_credit_left"};
#define N_CSV_INVOICE (sizeof(csv_invoice_keys) / sizeof(csv_invoice_keys[0]))

/*
 * What a credit note of account credit refunded out of band refunds, and
 * why: after the line columns (empty on other invoices), so that the
 * columns before them stay where they were.
 */
static const char *const csv_refund_keys[] = {"account_credit_refunded", "refund_tax",
                                              "refunded_total", "refund_method",
                                              "refund_reason", "refund_reference"};
#define N_CSV_REFUND (sizeof(csv_refund_keys) / sizeof(csv_refund_keys[0]))

/* One row: the invoice's fields, line @r's (none when @r < 0), the refund's. */
static void csv_row(FILE *out, const export_invoice *inv, int r)
{
    char buf[CELL_MAX];
    size_t i;

    for (i = 0; i < N_CSV_INVOICE; i++)
        csv_field(out, export_field(inv, csv_invoice_keys[i]), i == 0);
    for (i = 0; i < export_n_line_columns; i++)
        csv_field(out, r < 0 ? "" : cell(inv->lines, r, &export_line_columns[i], buf, sizeof(buf)),
                  0);
    for (i = 0; i < N_CSV_REFUND; i++)
        csv_field(out, export_field(inv, csv_refund_keys[i]), 0);
    fputs("\r\n", out);
}

int export_invoice_csv(FILE *out, const export_invoice *inv)
{
    size_t i;
    int r;

    for (i = 0; i < N_CSV_INVOICE; i++)
        csv_field(out, csv_invoice_keys[i], i == 0);
    for (i = 0; i < export_n_line_columns; i++)
        csv_field(out, export_line_columns[i].key, 0);
    for (i = 0; i < N_CSV_REFUND; i++)
        csv_field(out, csv_refund_keys[i], 0);
    fputs("\r\n", out);
    for (r = 0; r < PQntuples(inv->lines); r++)
        csv_row(out, inv, r);
    /* A credit note of a refund has no lines: one row says what it refunds. */
    if (PQntuples(inv->lines) == 0 && export_field(inv, "refund_method")[0] != '\0')
        csv_row(out, inv, -1);
    return ferror(out) ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Files                                                                   */
/* ---------------------------------------------------------------------- */

int export_format_known(const char *format)
{
    return strcmp(format, "json") == 0 || strcmp(format, "csv") == 0 || strcmp(format, "pdf") == 0;
}

int export_invoice_file(const export_invoice *inv, const char *format, const char *dir, char *path,
                        size_t size)
{
    const char *number = export_field(inv, "number");
    FILE *f;
    int rc;
    int n;

    if (number[0] != '\0')
        n = snprintf(path, size, "%s/%s.%s", dir, number, format);
    else
        n = snprintf(path, size, "%s/draft-%s.%s", dir, export_field(inv, "id"), format);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    errno = 0;
    if (strcmp(format, "pdf") == 0)
        return export_invoice_pdf(inv, path);
    f = fopen(path, "w");
    if (f == NULL)
        return -1;
    rc = strcmp(format, "csv") == 0 ? export_invoice_csv(f, inv) : export_invoice_json(f, inv);
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}
