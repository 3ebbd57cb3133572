/*
 * export.c - stored invoices as tables, JSON and CSV, and as files of
 * each format (the PDF drawn by pdf.c). See export.h.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "export.h"
#include "numfmt.h"

/* Longest cell printed in a table (ids and numbers are far shorter). */
#define CELL_MAX 256

/* Row @r of the rows at @rows, @stride bytes apart. */
#define ROW_AT(rows, stride, r) ((const char *)(rows) + (size_t)(r) * (stride))

static json_t *row_json(const void *row, const export_column *cols, size_t n)
{
    json_t *o = json_object();
    char buf[CELL_MAX];
    size_t i;

    for (i = 0; o != NULL && i < n; i++) {
        if (json_object_set_new(o, cols[i].key,
                                json_string(export_cell(row, &cols[i], buf, sizeof(buf)))) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *rows_json(const void *rows, size_t stride, size_t n_rows, const export_column *cols,
                         size_t n)
{
    json_t *arr = json_array();
    size_t r;

    for (r = 0; arr != NULL && r < n_rows; r++) {
        if (json_array_append_new(arr, row_json(ROW_AT(rows, stride, r), cols, n)) != 0) {
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

int export_rows_json(FILE *out, const void *rows, size_t stride, size_t n_rows,
                     const export_column *cols, size_t n)
{
    return dump(out, rows_json(rows, stride, n_rows, cols, n));
}

int export_rows_table(FILE *out, const void *rows, size_t stride, size_t n_rows,
                      const export_column *cols, size_t n)
{
    size_t width[32];
    char buf[CELL_MAX];
    size_t i;
    size_t r;

    if (n > 32)
        return -1;
    for (i = 0; i < n; i++) {
        width[i] = strlen(cols[i].header);
        for (r = 0; r < n_rows; r++) {
            size_t w = strlen(export_cell(ROW_AT(rows, stride, r), &cols[i], buf, sizeof(buf)));
            if (w > width[i])
                width[i] = w;
        }
    }
    for (r = 0; r <= n_rows; r++) {
        const char *sep = "";
        for (i = 0; i < n; i++) {
            const char *v =
                r == 0 ? cols[i].header
                       : export_cell(ROW_AT(rows, stride, r - 1), &cols[i], buf, sizeof(buf));
            if (!cols[i].in_table)
                continue;
            fprintf(out, cols[i].right ? "%s%*s" : "%s%-*s", sep, (int)width[i], v);
            sep = "  ";
        }
        fputc('\n', out);
    }
    return ferror(out) ? -1 : 0;
}

/* The lines and grants of @inv as rows for the column tables. */
#define LINES(inv) (inv)->rows->lines, sizeof(bs_invoice_line), (inv)->rows->n_lines
#define GRANTS(inv) (inv)->rows->grants, sizeof(bs_invoice_grant), (inv)->rows->n_grants

/* ---------------------------------------------------------------------- */
/* One invoice                                                             */
/* ---------------------------------------------------------------------- */

/*
 * The invoice's credit per grant as `billing rate` writes it (doc/formats.md):
 * one array per figure, each of the grants rows (application order) whose
 * figure is not zero, with {"grant", "amount"} and, when @with_left, the
 * grant's "remaining" on the invoice (before what expires on it).
 */
static json_t *grant_list_json(const doc_invoice *inv, size_t off, int with_left)
{
    json_t *arr = json_array();
    size_t r;

    for (r = 0; arr != NULL && r < inv->rows->n_grants; r++) {
        const bs_invoice_grant *g = &inv->rows->grants[r];
        const char *am = export_field(g, off);
        json_t *e;
        if (strspn(am, "0.") == strlen(am))
            continue;
        e = with_left ? json_pack("{s:s, s:s, s:s}", "grant", g->grant, "amount", am, "remaining",
                                  g->remaining)
                      : json_pack("{s:s, s:s}", "grant", g->grant, "amount", am);
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
static json_t *invoice_json(const doc_invoice *inv)
{
    json_t *o = json_object();
    size_t i;

    for (i = 0; o != NULL && i < doc_n_header_keys; i++) {
        if (json_object_set_new(o, doc_header_keys[i].key,
                                json_string(doc_key_value(inv, &doc_header_keys[i]))) != 0)
            goto fail;
    }
    if (o == NULL ||
        json_object_set_new(o, "credits_total", json_string(doc_field(inv, "credits"))) != 0 ||
        json_object_set_new(o, "returned_total", json_string(doc_field(inv, "credit_returned"))) !=
            0 ||
        json_object_set_new(
            o, "lines", rows_json(LINES(inv), export_line_columns, export_n_line_columns)) != 0 ||
        json_object_set_new(o, "credits",
                            grant_list_json(inv, offsetof(bs_invoice_grant, applied), 1)) != 0 ||
        json_object_set_new(o, "expired_credits",
                            grant_list_json(inv, offsetof(bs_invoice_grant, expired), 0)) != 0 ||
        json_object_set_new(o, "returned_credits",
                            grant_list_json(inv, offsetof(bs_invoice_grant, returned), 1)) != 0 ||
        json_object_set_new(
            o, "grants", rows_json(GRANTS(inv), export_grant_columns, export_n_grant_columns)) != 0)
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* Each line's "description" and "quantity_shown" as the PDF prints them (document.h). */
static int lines_readable(json_t *lines, const doc_invoice *inv)
{
    char buf[512];
    size_t r;

    for (r = 0; r < inv->rows->n_lines; r++) {
        json_t *o = json_array_get(lines, r);
        doc_line_description(inv, &inv->rows->lines[r], buf, sizeof(buf));
        if (o == NULL || json_object_set_new(o, "description", json_string(buf)) != 0)
            return -1;
        doc_line_quantity(&inv->rows->lines[r], buf, sizeof(buf));
        if (json_object_set_new(o, "quantity_shown", json_string(buf)) != 0)
            return -1;
    }
    return 0;
}

/* The seller (null without an issuer row) and the customer, as the PDF names them. */
static int parties_json(json_t *o, const doc_invoice *inv)
{
    const bs_invoice_head *h = DOC_HEAD(inv);
    const bs_issuer *is = inv->issuer;
    json_t *seller = json_null();

    if (is != NULL)
        seller = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "legal_name", is->legal_name,
                           "address", is->address, "tax_id", is->tax_id, "contact", is->contact,
                           "payment_instructions", is->payment_instructions, "footer", is->footer,
                           "payment_terms_days", is->payment_terms_days);
    return json_object_set_new(o, "issue_date", json_string(h->issue_date)) |
           json_object_set_new(o, "due_date", json_string(h->due_date)) |
           json_object_set_new(o, "period_first", json_string(h->period_first)) |
           json_object_set_new(o, "period_last", json_string(h->period_last)) |
           json_object_set_new(o, "corrects_reason", json_string(h->corrects_reason)) |
           json_object_set_new(o, "price_book", json_string(h->book)) |
           json_object_set_new(o, "seller", seller) |
           json_object_set_new(o, "customer",
                               json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "account",
                                         h->customer.account, "name", h->customer.name, "email",
                                         h->customer.email, "billing_address",
                                         h->customer.billing_address, "tax_id", h->customer.tax_id,
                                         "language", h->customer.language));
}

int export_invoice_json(FILE *out, const doc_invoice *inv)
{
    json_t *o = invoice_json(inv);

    if (o != NULL &&
        (lines_readable(json_object_get(o, "lines"), inv) != 0 || parties_json(o, inv) != 0)) {
        json_decref(o);
        o = NULL;
    }
    return dump(out, o);
}

static void table_totals(FILE *out, const doc_invoice *inv)
{
    char label[CELL_MAX];
    char buf[CELL_MAX];
    size_t i;

    fputc('\n', out);
    for (i = 0; i < doc_n_totals; i++) {
        if (doc_total_shown(inv, &doc_totals[i]))
            fprintf(
                out, "%-36s %16s %s\n", doc_total_label(inv, &doc_totals[i], label, sizeof(label)),
                doc_total_text(inv, &doc_totals[i], buf, sizeof(buf)), doc_field(inv, "currency"));
    }
}

/* The dates and parties the PDF prints, under the JSON's keys (not empty ones). */
static void table_parties(FILE *out, const doc_invoice *inv)
{
    const bs_invoice_head *h = DOC_HEAD(inv);
    const char *rows[][2] = {
        {"issue_date", h->issue_date},
        {"due_date", h->due_date},
        {"period_first", h->period_first},
        {"period_last", h->period_last},
        {"price_book", h->book},
        {"seller", inv->issuer != NULL ? inv->issuer->legal_name : ""},
        {"customer_email", h->customer.email},
        {"customer_tax_id", h->customer.tax_id},
        {"language", h->customer.language},
    };
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i][1][0] != '\0')
            fprintf(out, "%-19s %s\n", rows[i][0], rows[i][1]);
    }
}

int export_invoice_table(FILE *out, const doc_invoice *inv)
{
    size_t i;

    for (i = 0; i < doc_n_header_keys; i++) {
        const char *v = doc_key_value(inv, &doc_header_keys[i]);
        if (v[0] != '\0')
            fprintf(out, "%-19s %s\n", doc_header_keys[i].key, v);
    }
    table_parties(out, inv);
    fputc('\n', out);
    if (export_rows_table(out, LINES(inv), export_line_columns, export_n_line_columns) != 0)
        return -1;
    table_totals(out, inv);
    if (inv->rows->n_grants > 0) {
        fputs("\ncredit grants (in application order; remaining: on this invoice, before what "
              "expires)\n",
              out);
        if (export_rows_table(out, GRANTS(inv), export_grant_columns, export_n_grant_columns) != 0)
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
                                              "refunded_total",          "refund_method",
                                              "refund_reason",           "refund_reference"};
#define N_CSV_REFUND (sizeof(csv_refund_keys) / sizeof(csv_refund_keys[0]))

/* One row: the invoice's fields, line @r's (none when @r < 0), the refund's. */
static void csv_row(FILE *out, const doc_invoice *inv, long r)
{
    char buf[512];
    size_t i;

    for (i = 0; i < N_CSV_INVOICE; i++)
        csv_field(out, doc_field(inv, csv_invoice_keys[i]), i == 0);
    for (i = 0; i < export_n_line_columns; i++)
        csv_field(
            out,
            r < 0 ? ""
                  : export_cell(&inv->rows->lines[r], &export_line_columns[i], buf, sizeof(buf)),
            0);
    for (i = 0; i < N_CSV_REFUND; i++)
        csv_field(out, doc_field(inv, csv_refund_keys[i]), 0);
    /* The line as the PDF reads it (document.h), last: the columns before stay put. */
    buf[0] = '\0';
    if (r >= 0)
        doc_line_description(inv, &inv->rows->lines[r], buf, sizeof(buf));
    csv_field(out, buf, 0);
    buf[0] = '\0';
    if (r >= 0)
        doc_line_quantity(&inv->rows->lines[r], buf, sizeof(buf));
    csv_field(out, buf, 0);
    fputs("\r\n", out);
}

int export_invoice_csv(FILE *out, const doc_invoice *inv)
{
    size_t i;
    size_t r;

    for (i = 0; i < N_CSV_INVOICE; i++)
        csv_field(out, csv_invoice_keys[i], i == 0);
    for (i = 0; i < export_n_line_columns; i++)
        csv_field(out, export_line_columns[i].key, 0);
    for (i = 0; i < N_CSV_REFUND; i++)
        csv_field(out, csv_refund_keys[i], 0);
    csv_field(out, "description", 0);
    csv_field(out, "quantity_shown", 0);
    fputs("\r\n", out);
    for (r = 0; r < inv->rows->n_lines; r++)
        csv_row(out, inv, (long)r);
    /* A credit note of a refund has no lines: one row says what it refunds. */
    if (inv->rows->n_lines == 0 && doc_field(inv, "refund_method")[0] != '\0')
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

int export_invoice_file(const doc_invoice *inv, const char *format, const char *dir, char *path,
                        size_t size)
{
    const char *number = doc_field(inv, "number");
    FILE *f;
    int rc;
    int n;

    if (number[0] != '\0')
        n = snprintf(path, size, "%s/%s.%s", dir, number, format);
    else
        n = snprintf(path, size, "%s/draft-%s.%s", dir, doc_field(inv, "id"), format);
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
