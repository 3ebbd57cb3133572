/*
 * document.c - the model of a stored invoice every writer writes. See
 * document.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "document.h"
#include "numfmt.h"

#define KEY(k, f) {k, offsetof(bs_invoice_head, f)}

/* Every header field, in the order JSON and `invoice show` write them. */
const doc_key doc_header_keys[] = {
    KEY("id", id),
    KEY("number", number),
    KEY("account", account),
    KEY("kind", kind),
    KEY("period", period),
    KEY("status", status),
    KEY("currency", currency),
    KEY("subtotal", subtotal),
    KEY("credits", credits),
    KEY("tax", tax),
    KEY("total", total),
    KEY("series", series),
    KEY("corrects", corrects),
    KEY("period_start", period_start),
    KEY("period_end", period_end),
    KEY("tax_rate", tax_rate),
    KEY("time_zone", time_zone),
    KEY("finalized_at", finalized_at),
    KEY("void_reason", void_reason),
    KEY("account_name", account_name),
    KEY("credit_returned", credit_returned),
    KEY("account_credit", account_credit),
    KEY("carried", carried),
    KEY("account_credit_left", account_credit_left),
    KEY("before_credit", before_credit),
    KEY("taxable", taxable),
    KEY("credit_remaining", credit_remaining),
    KEY("account_credit_refunded", account_credit_refunded),
    KEY("refund_tax", refund_tax),
    KEY("refunded_total", refunded_total),
    KEY("refund_method", refund_method),
    KEY("refund_reason", refund_reason),
    KEY("refund_reference", refund_reference),
};
const size_t doc_n_header_keys = sizeof(doc_header_keys) / sizeof(doc_header_keys[0]);

const char *doc_key_value(const doc_invoice *d, const doc_key *k)
{
    const char *v;

    memcpy(&v, (const char *)DOC_HEAD(d) + k->off, sizeof(v));
    return v != NULL ? v : "";
}

const char *doc_field(const doc_invoice *d, const char *key)
{
    size_t i;

    for (i = 0; i < doc_n_header_keys; i++) {
        if (strcmp(doc_header_keys[i].key, key) == 0)
            return doc_key_value(d, &doc_header_keys[i]);
    }
    return "";
}

/* ---------------------------------------------------------------------- */
/* Loading                                                                 */
/* ---------------------------------------------------------------------- */

/* The seller of @d's price book into @d (none without a book or an issuer row). */
static bs_status issuer_load(bs_conn *c, doc_invoice *d, bs_error *err)
{
    d->issuer = NULL;
    if (DOC_HEAD(d)->book[0] == '\0')
        return BS_OK;
    return bs_issuer_get(c, DOC_HEAD(d)->book, &d->issuer, err);
}

bs_status doc_load(bs_conn *c, int64_t id, doc_invoice *d, bs_error *err)
{
    bs_status st;

    memset(d, 0, sizeof(*d));
    st = bs_invoice_read(c, id, &d->rows, err);
    if (st == BS_OK)
        st = issuer_load(c, d, err);
    if (st != BS_OK)
        doc_free(d);
    return st;
}

/* A copy of @src (an issuer of the same book read for an earlier invoice), or NULL. */
static bs_issuer *issuer_copy(const bs_issuer *src)
{
    const char *const *f = (const char *const *)src;
    size_t n = sizeof(*src) / sizeof(const char *);
    size_t size = sizeof(*src);
    bs_issuer *copy;
    char *arena;
    size_t i;

    for (i = 0; i < n; i++)
        size += strlen(f[i]) + 1;
    copy = malloc(size);
    if (copy == NULL)
        return NULL;
    arena = (char *)(copy + 1);
    for (i = 0; i < n; i++) {
        size_t len = strlen(f[i]) + 1;
        memcpy(arena, f[i], len);
        ((const char **)copy)[i] = arena;
        arena += len;
    }
    return copy;
}

bs_status doc_load_set(bs_conn *c, const int64_t *ids, size_t n, doc_invoice *d, bs_error *err)
{
    bs_invoice_rows *rows[BS_INVOICE_SET_MAX];
    bs_status st;
    size_t i;

    memset(d, 0, n * sizeof(*d));
    if (n > BS_INVOICE_SET_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "%zu invoices in one read, at most %d", n,
                            BS_INVOICE_SET_MAX);
    st = bs_invoice_read_set(c, ids, n, rows, err);
    for (i = 0; st == BS_OK && i < n; i++)
        d[i].rows = rows[i];
    for (i = 0; st == BS_OK && i < n; i++) {
        /* The invoices of a chunk mostly share a book: read its seller once. */
        if (i > 0 && strcmp(DOC_HEAD(&d[i])->book, DOC_HEAD(&d[i - 1])->book) == 0) {
            if (d[i - 1].issuer != NULL && (d[i].issuer = issuer_copy(d[i - 1].issuer)) == NULL)
                st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        } else {
            st = issuer_load(c, &d[i], err);
        }
    }
    for (i = 0; st != BS_OK && i < n; i++)
        doc_free(&d[i]);
    return st;
}

void doc_free(doc_invoice *d)
{
    bs_invoice_rows_free(d->rows);
    free(d->issuer);
    memset(d, 0, sizeof(*d));
}

/* ---------------------------------------------------------------------- */
/* Totals                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * The invoice's totals in the order a customer reconciles them: what the
 * lines and refunds come to, the credit taken off, then tax and the amount
 * due (doc/operations.md, "Credit on invoices"). Rows whose zero cannot
 * confuse (returned, account credit, carried) are left out when zero;
 * what is taken off is printed with a minus.
 */
const doc_total doc_totals[] = {
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
const size_t doc_n_totals = sizeof(doc_totals) / sizeof(doc_totals[0]);

int doc_total_shown(const doc_invoice *d, const doc_total *t)
{
    const char *v = doc_field(d, t->key);

    return !t->hide_zero || strspn(v, "-0.") != strlen(v);
}

const char *doc_total_label(const doc_invoice *d, const doc_total *t, char *buf, size_t size)
{
    char pct[64];

    if (strcmp(t->key, "tax") == 0 && doc_field(d, "tax_rate")[0] != '\0' &&
        numfmt_percent(doc_field(d, "tax_rate"), pct, sizeof(pct)) == 0) {
        snprintf(buf, size, "Tax at %s", pct);
        return buf;
    }
    if (strcmp(t->key, "total") != 0)
        return t->label;
    if (strcmp(doc_field(d, "kind"), "credit_note") == 0)
        return "Total credited";
    if (strcmp(doc_field(d, "status"), "void") == 0)
        return "Amount due (void: nothing to pay)";
    return t->label;
}

const char *doc_total_text(const doc_invoice *d, const doc_total *t, char *buf, size_t size)
{
    const char *v = doc_field(d, t->key);

    if (!t->taken_off || strspn(v, "0.") == strlen(v))
        return v;
    snprintf(buf, size, "-%s", v);
    return buf;
}
