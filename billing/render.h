/*
 * render.h - invoices as JSON (jansson trees, amounts as decimal strings)
 * or as aligned text tables. Used by `billing rate`; any command that
 * prints invoices should use it so that every output has one shape.
 */
#ifndef BILLING_RENDER_H
#define BILLING_RENDER_H

#include <jansson.h>
#include <stdio.h>

#include "billing.h"

/*
 * render_invoice_json - the invoice as a JSON object (schema in
 * doc/formats.md): account, currency, period, lines, credits,
 * expired_credits, subtotal, credits_total, tax_rate, tax, total.
 * Returns a new reference, or NULL when out of memory.
 */
json_t *render_invoice_json(const billing_invoice *inv);

/*
 * render_invoice_table - the invoice as a human-readable block on @out.
 * Returns 0, or -1 when out of memory.
 */
int render_invoice_table(FILE *out, const billing_invoice *inv);

/* render_kind_name - "usage", "included", "fee" or "refund". */
const char *render_kind_name(billing_line_kind kind);

#endif /* BILLING_RENDER_H */
