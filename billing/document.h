/*
 * document.h - the one model of a stored invoice that every writer
 * writes (JSON, CSV and the table in export.c, the PDF in pdf.c): the
 * store's typed rows (store/invoices.h: header, lines, grants; the
 * customer from the account, store/parties.h) and the seller of its price
 * book, built once per invoice, with what the writers share: header
 * fields by name, the totals in reconciliation order and their labels.
 * doc/architecture.md, "Invoice documents".
 */
#ifndef BILLING_DOCUMENT_H
#define BILLING_DOCUMENT_H

#include <stddef.h>
#include <stdint.h>

#include "invoices.h"
#include "parties.h"
#include "store.h"

/* A stored invoice as its documents show it. */
typedef struct doc_invoice {
    bs_invoice_rows *rows; /* header, lines, grants (owned) */
    bs_issuer *issuer;     /* the seller of its price book (owned); NULL without an issuer row */
} doc_invoice;

/*
 * doc_load - read invoice @id and its seller into @d. Returns BS_OK,
 * BS_ERR_INVALID when there is none, or a database error. Free with
 * doc_free.
 */
bs_status doc_load(bs_conn *c, int64_t id, doc_invoice *d, bs_error *err);

/*
 * doc_load_set - the @n invoices @ids (at most BS_INVOICE_SET_MAX) into
 * @d[0..n), in three statements for them all plus one per price book.
 * Returns BS_OK, BS_ERR_INVALID when one of them does not exist, or a
 * database error (then every @d is empty). Free each with doc_free.
 */
bs_status doc_load_set(bs_conn *c, const int64_t *ids, size_t n, doc_invoice *d, bs_error *err);

/* doc_free - free what doc_load filled in (an emptied @d may be freed again). */
void doc_free(doc_invoice *d);

/* The header of @d. */
#define DOC_HEAD(d) (&(d)->rows->head)

/*
 * A header field by key: the JSON key and the table's name of field
 * @off (offset of a `const char *` in bs_invoice_head).
 */
typedef struct doc_key {
    const char *key;
    size_t off;
} doc_key;

/* Every header field in the order JSON and the table write them. */
extern const doc_key doc_header_keys[];
extern const size_t doc_n_header_keys;

/* doc_key_value - the text of field @k of @d's header ("" when none). */
const char *doc_key_value(const doc_invoice *d, const doc_key *k);

/* doc_field - header field @key of @d ("number", "total", ...; "" for an unknown key). */
const char *doc_field(const doc_invoice *d, const char *key);

/*
 * One row of an invoice's totals: header field, label, @hide_zero (printed
 * only when not zero) and @taken_off (subtracted in the reconciliation:
 * printed with a leading minus).
 */
typedef struct doc_total {
    const char *key;
    const char *label;
    int hide_zero;
    int taken_off;
} doc_total;

/* The totals in reconciliation order, for the table and the PDF. */
extern const doc_total doc_totals[];
extern const size_t doc_n_totals;

/* doc_total_shown - non-zero when total row @t of @d is printed. */
int doc_total_shown(const doc_invoice *d, const doc_total *t);

/*
 * doc_total_label - the label of row @t for @d: the tax row names the
 * rate ("Tax at 6%"), and the last row says what the document's total
 * is: "Amount due" on an invoice, "Total credited" on a credit note,
 * "Amount due (void: nothing to pay)" on a voided invoice. The returned
 * string is @t's label or @buf.
 */
const char *doc_total_label(const doc_invoice *d, const doc_total *t, char *buf, size_t size);

/*
 * doc_total_text - the amount of row @t as printed: the header field,
 * with a minus for credit taken off (then written into @buf). The
 * returned string lives in @d or @buf.
 */
const char *doc_total_text(const doc_invoice *d, const doc_total *t, char *buf, size_t size);

#endif /* BILLING_DOCUMENT_H */
