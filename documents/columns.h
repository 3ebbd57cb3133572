/*
 * columns.h - the typed rows of the invoice model (store/invoices.h:
 * lines, grants, list rows) as columns: JSON key, table header, where the
 * field is. Every writer of documents/ walks the same tables, so JSON,
 * CSV, the table and the PDF name and order the fields alike. Constant
 * data and pure functions; thread-safe.
 */
#ifndef DOCUMENTS_COLUMNS_H
#define DOCUMENTS_COLUMNS_H

#include <stddef.h>

#include "invoices.h"

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

/* export_field - the `const char *` field at offset @off of the row at @row ("" when NULL). */
const char *export_field(const void *row, size_t off);

#endif /* DOCUMENTS_COLUMNS_H */
