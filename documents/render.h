/*
 * render.h - invoices as JSON (jansson trees, amounts as decimal strings)
 * or as aligned text tables. Used by `billing rate`; any command that
 * prints invoices should use it so that every output has one shape.
 */
#ifndef DOCUMENTS_RENDER_H
#define DOCUMENTS_RENDER_H

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
 * render_view - how the table form shows an invoice to a person. The
 * JSON form is always exact and in UTC; the table is for reading.
 */
typedef struct render_view {
    const billing_zone *zone; /* the account's zone, for local dates and times; NULL: UTC */
    const char *thousands;    /* digit group separator ("," "." " "); "" for none */
    int compact;              /* leave out VERSION and columns without a value (terminals) */
    int exact;                /* quantities exact ("60000/31"), not rounded to 4 places */
    /* The unit price of line @i as its price book writes it ("0.60"), or NULL: then it is
     * shown at the currency's scale. NULL function: always so. */
    const char *(*written_price)(const void *arg, const billing_invoice *inv, size_t i);
    const void *written_arg;
} render_view;

/*
 * render_invoice_table - the invoice as a human-readable block on @out:
 * the period as local dates of the account's zone, quantities rounded for
 * display, unit prices as the price book writes them (or at least at the
 * currency's scale), tax as a
 * percentage, numbers grouped as @view says. Returns 0, or -1 when a
 * number cannot be laid out (it is then shown as the library wrote it).
 */
int render_invoice_table(FILE *out, const billing_invoice *inv, const render_view *view);

/*
 * render_csv_header - the header row of the CSV form (RFC 4180, CRLF line
 * ends): account, month, currency, the JSON line keys, grant.
 */
void render_csv_header(FILE *out);

/*
 * render_invoice_csv - the invoice as CSV rows: one per line (exact and
 * rounded amounts), then one per summary figure with kind subtotal,
 * credit, returned_credit, expired_credit, account_credit, carried, tax,
 * total and the amount signed as it counts: total = subtotal +
 * returned_credit + credit + account_credit + carried + tax (credits
 * negative); expired_credit is shown, not counted. Returns 0.
 */
int render_invoice_csv(FILE *out, const billing_invoice *inv);

/*
 * render_metered_lines_json - the usage and included lines of @inv (those
 * that events account for) as a JSON array of line objects, as in
 * "lines". Returns a new reference, or NULL when out of memory.
 */
json_t *render_metered_lines_json(const billing_invoice *inv);

/* render_metered_count - how many usage and included lines @inv has. */
size_t render_metered_count(const billing_invoice *inv);

/*
 * render_resource_table - the usage and included lines of @inv (the
 * invoice of one resource's events alone) under "resource RESOURCE:", in
 * the table form's columns. Returns 0.
 */
int render_resource_table(FILE *out, const billing_invoice *inv, const char *resource,
                          const render_view *view);

/*
 * render_local_time - @at on the wall clock of @zone (NULL: UTC) as
 * "YYYY-MM-DD HH:MM:SS", or "YYYY-MM-DD" with @date_only, into @buf of
 * @size bytes (at least 20). Returns @buf, or "" when @at is out of range.
 */
const char *render_local_time(const billing_zone *zone, billing_time_t at, int date_only, char *buf,
                              size_t size);

/* render_kind_name - "usage", "included", "fee" or "refund". */
const char *render_kind_name(billing_line_kind kind);

#endif /* DOCUMENTS_RENDER_H */
