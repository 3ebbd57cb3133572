/*
 * document.h - the one model of a stored invoice that every writer
 * writes (JSON, CSV and the table in export.c, the PDF in pdf.c): the
 * store's typed rows (store/invoices.h: header, lines, grants; the
 * customer from the account, store/parties.h) and the seller of its price
 * book, built once per invoice, with what the writers share: header
 * fields by name, the totals in reconciliation order and their labels.
 * doc/architecture.md, "Invoice documents".
 */
#ifndef DOCUMENTS_DOCUMENT_H
#define DOCUMENTS_DOCUMENT_H

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
    const char *label_zh; /* the label in Simplified Chinese */
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

/* ---------------------------------------------------------------------- */
/* What a customer reads: labels, descriptions, quantities                 */
/* ---------------------------------------------------------------------- */

/* The language of a document: the account's (billing.accounts.language). */
typedef enum doc_lang { DOC_EN = 0, DOC_ZH = 1 } doc_lang;

/* doc_language - DOC_ZH for an account whose language is "zh-Hans", else DOC_EN. */
doc_lang doc_language(const doc_invoice *d);

/* The fixed texts of a document, each in English and Simplified Chinese. */
typedef enum doc_text_id {
    DOC_T_INVOICE,
    DOC_T_CREDIT_NOTE,
    DOC_T_DRAFT,
    DOC_T_VOID,
    DOC_T_FROM,
    DOC_T_BILL_TO,
    DOC_T_ACCOUNT,
    DOC_T_TAX_ID,
    DOC_T_NUMBER,
    DOC_T_PERIOD,
    DOC_T_ISSUED,
    DOC_T_DUE,
    DOC_T_CREDITS_INVOICE,
    DOC_T_REASON,
    DOC_T_VOIDED,
    DOC_T_DESCRIPTION,
    DOC_T_QUANTITY,
    DOC_T_UNIT,
    DOC_T_UNIT_PRICE,
    DOC_T_AMOUNT,
    DOC_T_CREDIT_LEFT,
    DOC_T_PAY,
    DOC_T_GRANTS,
    DOC_T_TIME_ZONE,
    DOC_T_COUNT
} doc_text_id;

/* doc_text - fixed text @id in @d's language. */
const char *doc_text(const doc_invoice *d, doc_text_id id);

/* doc_title - "INVOICE", "CREDIT NOTE", "DRAFT INVOICE (not issued)" or "INVOICE (VOID)". */
const char *doc_title(const doc_invoice *d);

/*
 * doc_unit_digits - the fraction digits a quantity of @unit is shown with
 * (doc/formats.md, "Invoice documents"): 3 for GPU-hour, instance-hour,
 * GB-month and GB, 0 for term; -1 for "second" (shown as a duration).
 */
int doc_unit_digits(const char *unit);

/*
 * doc_line_quantity - line @l's quantity as a customer reads it: a
 * decimal rounded (half away from zero) to doc_unit_digits of its unit
 * ("1935.484"), or for seconds a duration ("4 d 0 h"). The exact value
 * stays in JSON and CSV. Writes into @buf.
 */
void doc_line_quantity(const bs_invoice_line *l, char *buf, size_t size);

/*
 * doc_line_description - line @l described per meter, model and region in
 * @d's language ("GPU time, RTX4090, cn-east-1", "GPU-less instance time",
 * "Persistent disk", "Traffic (free)", "GPU time (included in plan)",
 * "Plan rtx4090x8-monthly",
 * "Unused 4 d 0 h of plan rtx4090x8-monthly"). Writes into @buf.
 */
void doc_line_description(const doc_invoice *d, const bs_invoice_line *l, char *buf, size_t size);

#endif /* DOCUMENTS_DOCUMENT_H */
