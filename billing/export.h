/*
 * export.h - stored invoices out of the database: the rows of the store's
 * invoice queries (store/invoices.h) as aligned tables, JSON, CSV (RFC
 * 4180) and PDF (pdf.c), each form driven by the same column tables.
 */
#ifndef BILLING_EXPORT_H
#define BILLING_EXPORT_H

#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>

#include "store.h"

/*
 * One column of a result: JSON key, table header, result column, shown
 * in tables, right-aligned, and the column of a denominator (0: none):
 * exact quantities are stored as numerator and denominator and shown as
 * "n/d" when d is not 1.
 */
typedef struct export_column {
    const char *key;
    const char *header;
    int col;
    int in_table;
    int right;
    int den;
} export_column;

/* export_rows_json - @res as a JSON array of objects of @cols on @out. Returns 0 or -1. */
int export_rows_json(FILE *out, const PGresult *res, const export_column *cols, size_t n);

/* export_rows_table - @res as an aligned table of the @cols shown in tables. Returns 0 or -1. */
int export_rows_table(FILE *out, const PGresult *res, const export_column *cols, size_t n);

/*
 * One stored invoice: header (bs_invoice_header), lines, grants
 * (bs_invoice_grants, in application order: what the invoice applied,
 * returned and expired of each, and what is left).
 */
typedef struct export_invoice {
    PGresult *header;
    PGresult *lines;
    PGresult *grants;
} export_invoice;

/*
 * export_invoice_load - read invoice @id. Returns BS_OK, BS_ERR_INVALID
 * when there is none, or a database error. Free with export_invoice_free.
 */
bs_status export_invoice_load(bs_conn *c, int64_t id, export_invoice *inv, bs_error *err);
void export_invoice_free(export_invoice *inv);

/*
 * export_invoices_load - read the @n invoices @ids (at most
 * BS_INVOICE_SET_MAX) into @invs[0..n), in three statements for them all:
 * each as export_invoice_load reads it, row for row. Returns BS_OK, or
 * BS_ERR_INVALID when one of them does not exist, or a database error
 * (then every @invs is empty). Free each with export_invoice_free.
 */
bs_status export_invoices_load(bs_conn *c, const int64_t *ids, size_t n, export_invoice *invs,
                               bs_error *err);

/* Header fields by name, as the header columns call them ("number", "total", ...). */
const char *export_field(const export_invoice *inv, const char *key);

/* export_invoice_json / _table / _csv - one invoice on @out. Return 0 or -1. */
int export_invoice_json(FILE *out, const export_invoice *inv);
int export_invoice_table(FILE *out, const export_invoice *inv);
int export_invoice_csv(FILE *out, const export_invoice *inv);

/* export_format_known - non-zero for "json", "csv" and "pdf". */
int export_format_known(const char *format);

/*
 * export_invoice_file - write @inv as @format into directory @dir, named
 * after its number (drafts: "draft-ID"); the path goes to @path. Returns
 * 0, or -1 with errno set.
 */
int export_invoice_file(const export_invoice *inv, const char *format, const char *dir, char *path,
                        size_t size);

/*
 * export_invoice_pdf - the invoice as a PDF document at @path: seller and
 * customer blocks, number and dates, every line with quantity, unit price
 * and amount, credits, tax and totals, with an embedded CJK-capable font
 * (subset) so that names in Chinese render. Returns 0, or -1 with errno.
 */
int export_invoice_pdf(const export_invoice *inv, const char *path);

/*
 * export_pdf_fonts - load the fonts export_invoice_pdf needs (once per
 * process; thread-safe), so that a bad BILLING_PDF_FONT or
 * BILLING_PDF_CJK_FONT is found before any file is created. Returns 0, or
 * -1 with a message naming the variable and the path in @why.
 */
int export_pdf_fonts(char *why, size_t size);

/*
 * One row of an invoice's totals: header field, label, @hide_zero (printed
 * only when not zero) and @taken_off (subtracted in the reconciliation:
 * printed with a leading minus).
 */
typedef struct export_total {
    const char *key;
    const char *label;
    int hide_zero;
    int taken_off;
} export_total;

/* The totals in reconciliation order (export.c), for the table and the PDF. */
extern const export_total export_totals[];
extern const size_t export_n_totals;

/* export_total_shown - non-zero when total row @t of @inv is printed. */
int export_total_shown(const export_invoice *inv, const export_total *t);

/*
 * export_total_label - the label of row @t for @inv: the tax row names
 * the rate ("Tax at 6%"), and the last row says what the document's total
 * is: "Amount due" on an invoice, "Total credited" on a credit note,
 * "Amount due (void: nothing to pay)" on a voided invoice. The returned
 * string is @t's label or @buf.
 */
const char *export_total_label(const export_invoice *inv, const export_total *t, char *buf,
                               size_t size);

/*
 * export_total_text - the amount of row @t as printed: the header field,
 * with a minus for credit taken off (then written into @buf). The
 * returned string lives in @inv's result or @buf.
 */
const char *export_total_text(const export_invoice *inv, const export_total *t, char *buf,
                              size_t size);

/* The grant columns, in the order of bs_invoice_grants. */
extern const export_column export_grant_columns[];
extern const size_t export_n_grant_columns;

/* The line columns, in the order of bs_invoice_lines. */
extern const export_column export_line_columns[];
extern const size_t export_n_line_columns;

#endif /* BILLING_EXPORT_H */
