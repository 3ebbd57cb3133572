/*
 * columns.c - the column tables of the invoice model's typed rows, which
 * every writer walks (export.c: JSON, CSV, tables; pdf.c). See columns.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "columns.h"

#define LINE(f) offsetof(bs_invoice_line, f)
/* The lines; the quantity is shown as quantity/den when den is not 1. */
const export_column export_line_columns[] = {
    {"line", "#", LINE(line), 1, 1, 0},
    {"kind", "KIND", LINE(kind), 1, 0, 0},
    {"meter", "METER", LINE(meter), 1, 0, 0},
    {"model", "MODEL", LINE(model), 1, 0, 0},
    {"region", "REGION", LINE(region), 1, 0, 0},
    {"plan", "PLAN", LINE(plan), 1, 0, 0},
    {"price_version", "VERSION", LINE(price_version), 1, 0, 0},
    {"adjusts_period", "ADJUSTS", LINE(adjusts_period), 1, 0, 0},
    {"quantity", "QUANTITY", LINE(quantity), 1, 1, LINE(quantity_den)},
    {"unit", "UNIT", LINE(unit), 1, 0, 0},
    {"unit_price", "UNIT PRICE", LINE(unit_price), 1, 1, 0},
    {"amount", "AMOUNT", LINE(amount), 1, 1, 0},
    /* A refund's unused span (JSON and CSV; the description says it in the table). */
    {"unused_from", "UNUSED FROM", LINE(unused_from), 0, 0, 0},
    {"unused_to", "UNUSED TO", LINE(unused_to), 0, 0, 0},
};
const size_t export_n_line_columns = sizeof(export_line_columns) / sizeof(export_line_columns[0]);

#define SUMMARY(f) offsetof(bs_invoice_summary, f)
/* Columns of the rows of bs_invoice_list. */
const export_column export_summary_columns[] = {
    {"id", "ID", SUMMARY(id), 1, 1, 0},
    {"number", "NUMBER", SUMMARY(number), 1, 0, 0},
    {"account", "ACCOUNT", SUMMARY(account), 1, 0, 0},
    {"kind", "KIND", SUMMARY(kind), 1, 0, 0},
    {"period", "PERIOD", SUMMARY(period), 1, 0, 0},
    {"status", "STATUS", SUMMARY(status), 1, 0, 0},
    {"currency", "CUR", SUMMARY(currency), 1, 0, 0},
    {"subtotal", "SUBTOTAL", SUMMARY(subtotal), 1, 1, 0},
    {"credits_total", "CREDITS", SUMMARY(credits), 1, 1, 0},
    /* So that the row adds up: SUBTOTAL - CREDITS + ACCT CREDIT + TAX = TOTAL. */
    {"account_credit_net", "ACCT CREDIT", SUMMARY(account_credit_net), 1, 1, 0},
    {"tax", "TAX", SUMMARY(tax), 1, 1, 0},
    {"total", "TOTAL", SUMMARY(total), 1, 1, 0},
    {"series", "SERIES", SUMMARY(series), 0, 0, 0},
    {"corrects", "CORRECTS", SUMMARY(corrects), 0, 0, 0},
};
const size_t export_n_summary_columns =
    sizeof(export_summary_columns) / sizeof(export_summary_columns[0]);

#define GRANT(f) offsetof(bs_invoice_grant, f)
/* What the invoice did to each grant, and what is left of it. */
const export_column export_grant_columns[] = {
    {"grant", "GRANT", GRANT(grant), 1, 0, 0},
    {"applied", "APPLIED", GRANT(applied), 1, 1, 0},
    {"returned", "RETURNED", GRANT(returned), 1, 1, 0},
    {"expired", "EXPIRED", GRANT(expired), 1, 1, 0},
    {"remaining", "REMAINING", GRANT(remaining), 1, 1, 0},
};
const size_t export_n_grant_columns =
    sizeof(export_grant_columns) / sizeof(export_grant_columns[0]);

const char *export_field(const void *row, size_t off)
{
    const char *v;

    memcpy(&v, (const char *)row + off, sizeof(v));
    return v != NULL ? v : "";
}

const char *export_cell(const void *row, const export_column *c, char *buf, size_t size)
{
    if (c->den > 0 && strcmp(export_field(row, c->den), "1") != 0) {
        snprintf(buf, size, "%s/%s", export_field(row, c->off), export_field(row, c->den));
        return buf;
    }
    return export_field(row, c->off);
}
