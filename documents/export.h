/*
 * export.h - stored invoices out of the database as aligned tables, JSON,
 * CSV (RFC 4180) and PDF (pdf.c): every writer writes the one document
 * model of document.h, each form driven by the same column tables.
 */
#ifndef BILLING_EXPORT_H
#define BILLING_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "document.h"

/*
 * One column of a typed row (a struct of `const char *` fields): JSON
 * key, table header, offset of the field, shown in tables, right-aligned,
 * and the offset of a denominator (0: none): exact quantities are stored
 * as numerator and denominator and shown as "n/d" when d is not 1.
 */
typedef struct export_column {
    const char *key;
    const char *header;
    size_t off;
    int in_table;
    int right;
    size_t den;
} export_column;

/*
 * export_rows_json - the @n_rows rows at @rows (@stride bytes apart) as a
 * JSON array of objects of @cols on @out. Returns 0 or -1.
 */
int export_rows_json(FILE *out, const void *rows, size_t stride, size_t n_rows,
                     const export_column *cols, size_t n);

/* export_rows_table - the rows as an aligned table of the @cols shown in tables. Returns 0 or -1. */
int export_rows_table(FILE *out, const void *rows, size_t stride, size_t n_rows,
                      const export_column *cols, size_t n);

/* export_invoice_json / _table / _csv - one invoice on @out. Return 0 or -1. */
int export_invoice_json(FILE *out, const doc_invoice *inv);
int export_invoice_table(FILE *out, const doc_invoice *inv);
int export_invoice_csv(FILE *out, const doc_invoice *inv);

/* export_format_known - non-zero for "json", "csv" and "pdf". */
int export_format_known(const char *format);

/*
 * export_invoice_file - write @inv as @format into directory @dir, named
 * after its number (drafts: "draft-ID"); the path goes to @path. Returns
 * 0, or -1 with errno set.
 */
int export_invoice_file(const doc_invoice *inv, const char *format, const char *dir, char *path,
                        size_t size);

/*
 * export_invoice_pdf - the invoice as a PDF document at @path: seller and
 * customer blocks, number and dates, every line with quantity, unit price
 * and amount, credits, tax and totals, with an embedded CJK-capable font
 * (subset) so that names in Chinese render. Returns 0, or -1 with errno.
 */
int export_invoice_pdf(const doc_invoice *inv, const char *path);

/*
 * export_invoice_pdf_mem - the same PDF as export_invoice_pdf, into a
 * buffer *@out of *@len bytes (caller frees with free()). Its creation
 * date is SOURCE_DATE_EPOCH when set, else @created (cairo's ISO 8601
 * form, "2026-02-01T00:00:00Z"), else (NULL) the time of writing: with a
 * fixed @created, the bytes depend on the invoice alone. Returns 0, or -1
 * with errno.
 */
int export_invoice_pdf_mem(const doc_invoice *inv, const char *created, char **out, size_t *len);

/*
 * export_pdf_fonts - load the fonts export_invoice_pdf needs (once per
 * process; thread-safe), so that a bad BILLING_PDF_FONT or
 * BILLING_PDF_CJK_FONT is found before any file is created. Returns 0, or
 * -1 with a message naming the variable and the path in @why.
 */
int export_pdf_fonts(char *why, size_t size);

/* The columns of a bs_invoice_summary (`billing invoice list`, GET /v1/invoices). */
extern const export_column export_summary_columns[];
extern const size_t export_n_summary_columns;

/* The grant columns (bs_invoice_grant). */
extern const export_column export_grant_columns[];
extern const size_t export_n_grant_columns;

/* The line columns (bs_invoice_line). */
extern const export_column export_line_columns[];
extern const size_t export_n_line_columns;

/* export_cell - the text of column @c of the row at @row ("n/d" for a fraction, in @buf). */
const char *export_cell(const void *row, const export_column *c, char *buf, size_t size);

#endif /* BILLING_EXPORT_H */
