/*
 * export.h - stored invoices out of the database as aligned tables, JSON,
 * CSV (RFC 4180), and files of each format including PDF (pdf.h): every
 * writer writes the one document model of document.h, each form driven
 * by the same column tables (columns.h). Uses pdf.h; pdf.c does not use
 * this file.
 */
#ifndef DOCUMENTS_EXPORT_H
#define DOCUMENTS_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "columns.h"
#include "document.h"
#include "pdf.h"

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

#endif /* DOCUMENTS_EXPORT_H */
