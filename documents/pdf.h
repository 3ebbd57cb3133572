/*
 * pdf.h - a stored invoice as a PDF document a customer could receive
 * (pdf.c, written by pdfwrite.c): the writer of the model of document.h that needs fonts.
 * Uses document.h and columns.h only; export.h's export_invoice_file
 * calls it for the "pdf" format.
 */
#ifndef DOCUMENTS_PDF_H
#define DOCUMENTS_PDF_H

#include <stddef.h>

#include "document.h"

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
 * date is SOURCE_DATE_EPOCH when set, else @created (ISO 8601
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

#endif /* DOCUMENTS_PDF_H */
