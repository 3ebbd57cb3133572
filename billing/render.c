/*
 * render.c - invoices as JSON or text. One table of line columns drives
 * both forms, so that they cannot drift apart.
 */
#include "config.h"

#include <string.h>

#include "render.h"

/* A line's cell: the accessor's string, or text formatted into @buf of @size bytes. */
typedef const char *(*line_getter)(const billing_invoice *inv, size_t i, char *buf, size_t size);

#define PLAIN_GETTER(name)                                                                         \
    static const char *get_##name(const billing_invoice *inv, size_t i, char *buf, size_t size)   \
    {                                                                                              \
        (void)buf;                                                                                 \
        (void)size;                                                                                \
        return billing_invoice_line_##name(inv, i);                                                \
    }

PLAIN_GETTER(meter)
PLAIN_GETTER(model)
PLAIN_GETTER(region)
PLAIN_GETTER(plan)
PLAIN_GETTER(price_version)
PLAIN_GETTER(subscription)
PLAIN_GETTER(quantity)
PLAIN_GETTER(unit)
PLAIN_GETTER(unit_price)
PLAIN_GETTER(amount)
PLAIN_GETTER(amount_rounded)

static const char *get_kind(const billing_invoice *inv, size_t i, char *buf, size_t size)
{
    (void)buf;
    (void)size;
    return render_kind_name(billing_invoice_line_kind(inv, i));
}

/* One end of a refund's unused span as RFC 3339, "" for other lines. */
static const char *span_end(const billing_invoice *inv, size_t i, char *buf, size_t size, int end)
{
    billing_time_t t[2];

    if (!billing_invoice_line_span(inv, i, &t[0], &t[1]) ||
        billing_time_format(t[end], buf, size) < 0)
        return "";
    return buf;
}

static const char *get_unused_from(const billing_invoice *inv, size_t i, char *buf, size_t size)
{
    return span_end(inv, i, buf, size, 0);
}

static const char *get_unused_to(const billing_invoice *inv, size_t i, char *buf, size_t size)
{
    return span_end(inv, i, buf, size, 1);
}

/* Where a column shows: never, always, or only when some line has a value. */
enum { NO = 0, YES = 1, IF_SET = 2 };

/*
 * The columns of an invoice line: JSON key, table header, getter, whether
 * the JSON object and the table show it, right alignment. The refund
 * columns (subscription, unused span) show only where they apply, so that
 * invoices without refunds keep their shape.
 */
static const struct line_column {
    const char *key;
    const char *header;
    line_getter get;
    int in_json;
    int in_table;
    int right;
} line_columns[] = {
    {"kind", "KIND", get_kind, YES, YES, 0},
    {"meter", "METER", get_meter, YES, YES, 0},
    {"model", "MODEL", get_model, YES, YES, 0},
    {"region", "REGION", get_region, YES, YES, 0},
    {"plan", "PLAN", get_plan, YES, YES, 0},
    {"price_version", "VERSION", get_price_version, YES, YES, 0},
    {"subscription", "SUBSCRIPTION", get_subscription, IF_SET, IF_SET, 0},
    {"unused_from", "UNUSED FROM", get_unused_from, IF_SET, IF_SET, 0},
    {"unused_to", "UNUSED TO", get_unused_to, IF_SET, IF_SET, 0},
    {"quantity", "QUANTITY", get_quantity, YES, YES, 1},
    {"unit", "UNIT", get_unit, YES, YES, 0},
    {"unit_price", "UNIT PRICE", get_unit_price, YES, YES, 1},
    {"amount_exact", "EXACT", get_amount, YES, NO, 1},
    {"amount", "AMOUNT", get_amount_rounded, YES, YES, 1},
};
#define N_LINE_COLUMNS (sizeof(line_columns) / sizeof(line_columns[0]))

/* Room for any cell a getter formats (an RFC 3339 instant is at most 30 characters). */
#define CELL_MAX 40

const char *render_kind_name(billing_line_kind kind)
{
    const char *name = billing_line_kind_name(kind);

    return name != NULL ? name : "unknown";
}

/* ---------------------------------------------------------------------- */
/* JSON                                                                    */
/* ---------------------------------------------------------------------- */

/* Add "key": "value"; -1 when out of memory (json_object_set_new frees the value). */
static int add_str(json_t *o, const char *key, const char *value)
{
    return json_object_set_new(o, key, json_string(value != NULL ? value : ""));
}

/* Append @item to @arr, or drop the whole array on failure. */
static int append(json_t *arr, json_t *item)
{
    return item == NULL ? -1 : json_array_append_new(arr, item);
}

static json_t *line_json(const billing_invoice *inv, size_t i)
{
    json_t *o = json_object();
    char buf[CELL_MAX];
    const char *v;
    size_t c;

    for (c = 0; o != NULL && c < N_LINE_COLUMNS; c++) {
        v = line_columns[c].get(inv, i, buf, sizeof(buf));
        if (line_columns[c].in_json == NO ||
            (line_columns[c].in_json == IF_SET && (v == NULL || v[0] == '\0')))
            continue;
        if (add_str(o, line_columns[c].key, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* Which list of grants a credits array shows. */
enum { CREDITS_APPLIED, CREDITS_EXPIRED, CREDITS_RETURNED };

static json_t *credit_json(const billing_invoice *inv, size_t i, int which)
{
    json_t *o = json_object();
    int failed;

    if (o == NULL)
        return NULL;
    if (which == CREDITS_RETURNED)
        failed = add_str(o, "grant", billing_invoice_returned_grant(inv, i)) != 0 ||
                 add_str(o, "amount", billing_invoice_returned_amount(inv, i)) != 0 ||
                 add_str(o, "remaining", billing_invoice_returned_remaining(inv, i)) != 0;
    else if (which == CREDITS_EXPIRED)
        failed = add_str(o, "grant", billing_invoice_expired_grant(inv, i)) != 0 ||
                 add_str(o, "amount", billing_invoice_expired_amount(inv, i)) != 0;
    else
        failed = add_str(o, "grant", billing_invoice_credit_grant(inv, i)) != 0 ||
                 add_str(o, "amount", billing_invoice_credit_amount(inv, i)) != 0 ||
                 add_str(o, "remaining", billing_invoice_credit_remaining(inv, i)) != 0;
    if (failed) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *lines_json(const billing_invoice *inv)
{
    json_t *arr = json_array();
    size_t i;

    for (i = 0; arr != NULL && i < billing_invoice_line_count(inv); i++) {
        if (append(arr, line_json(inv, i)) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *credits_json(const billing_invoice *inv, int which)
{
    json_t *arr = json_array();
    size_t n = which == CREDITS_RETURNED ? billing_invoice_returned_count(inv)
               : which == CREDITS_EXPIRED ? billing_invoice_expired_count(inv)
                                           : billing_invoice_credit_count(inv);
    size_t i;

    for (i = 0; arr != NULL && i < n; i++) {
        if (append(arr, credit_json(inv, i, which)) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int is_zero(const char *amount)
{
    return strspn(amount, "0.") == strlen(amount);
}

/* Account credit is rare (a refund beyond a month's charges): shown only when there is some. */
static int has_account_credit(const billing_invoice *inv)
{
    return !is_zero(billing_invoice_account_credit(inv)) ||
           !is_zero(billing_invoice_carried(inv)) ||
           !is_zero(billing_invoice_account_credit_left(inv));
}

static int add_account_credit(json_t *o, const billing_invoice *inv)
{
    json_t *ac;

    if (!has_account_credit(inv))
        return 0;
    ac = json_pack("{s:s, s:s, s:s}", "applied", billing_invoice_account_credit(inv), "carried",
                   billing_invoice_carried(inv), "left", billing_invoice_account_credit_left(inv));
    return json_object_set_new(o, "account_credit", ac);
}

/* Credit given back to grants by refunds: shown only when there is some. */
static int add_returned(json_t *o, const billing_invoice *inv)
{
    if (billing_invoice_returned_count(inv) == 0)
        return 0;
    if (json_object_set_new(o, "returned_credits", credits_json(inv, CREDITS_RETURNED)) != 0)
        return -1;
    return add_str(o, "returned_total", billing_invoice_returned(inv));
}

static json_t *period_json(const billing_invoice *inv)
{
    billing_time_t start;
    billing_time_t end;
    char s[40];
    char e[40];

    billing_invoice_period(inv, &start, &end);
    if (billing_time_format(start, s, sizeof(s)) < 0 || billing_time_format(end, e, sizeof(e)) < 0)
        return NULL;
    return json_pack("{s:i, s:i, s:s, s:s}", "year", billing_invoice_year(inv), "month",
                     billing_invoice_month(inv), "start", s, "end", e);
}

json_t *render_invoice_json(const billing_invoice *inv)
{
    json_t *o = json_object();

    /* || keeps the keys in this order: the output's shape is part of the interface. */
    if (o == NULL || add_str(o, "account", billing_invoice_account(inv)) != 0 ||
        add_str(o, "currency", billing_invoice_currency(inv)) != 0 ||
        json_object_set_new(o, "period", period_json(inv)) != 0 ||
        json_object_set_new(o, "lines", lines_json(inv)) != 0 ||
        json_object_set_new(o, "credits", credits_json(inv, CREDITS_APPLIED)) != 0 ||
        json_object_set_new(o, "expired_credits", credits_json(inv, CREDITS_EXPIRED)) != 0 ||
        add_returned(o, inv) != 0 || add_str(o, "subtotal", billing_invoice_subtotal(inv)) != 0 ||
        add_str(o, "credits_total", billing_invoice_credits(inv)) != 0 ||
        add_account_credit(o, inv) != 0 || add_str(o, "tax_rate", billing_invoice_tax_rate(inv)) != 0 ||
        add_str(o, "tax", billing_invoice_tax(inv)) != 0 ||
        add_str(o, "total", billing_invoice_total(inv)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---------------------------------------------------------------------- */
/* Text                                                                    */
/* ---------------------------------------------------------------------- */

#define GAP 2
#define INDENT "  "

/* The text of a table cell into @buf; row SIZE_MAX is the header. */
static const char *cell(const billing_invoice *inv, size_t row, size_t col, char *buf)
{
    const char *s;

    if (row == SIZE_MAX)
        return line_columns[col].header;
    s = line_columns[col].get(inv, row, buf, CELL_MAX);
    return (s == NULL || s[0] == '\0') ? "-" : s;
}

/* Widths of the columns the table shows; 0 for those it leaves out. */
static void column_widths(const billing_invoice *inv, size_t *width)
{
    size_t n = billing_invoice_line_count(inv);
    char buf[CELL_MAX];
    const char *v;
    size_t row;
    size_t col;
    size_t len;
    int set;

    for (col = 0; col < N_LINE_COLUMNS; col++) {
        width[col] = strlen(line_columns[col].header);
        set = 0;
        for (row = 0; row < n; row++) {
            v = line_columns[col].get(inv, row, buf, sizeof(buf));
            set |= v != NULL && v[0] != '\0';
            len = strlen(cell(inv, row, col, buf));
            if (len > width[col])
                width[col] = len;
        }
        if (line_columns[col].in_table == NO || (line_columns[col].in_table == IF_SET && !set))
            width[col] = 0;
    }
}

static void print_row(FILE *out, const billing_invoice *inv, size_t row, const size_t *width)
{
    char buf[CELL_MAX];
    size_t col;
    int w;
    const char *sep = INDENT;

    for (col = 0; col < N_LINE_COLUMNS; col++) {
        if (width[col] == 0)
            continue;
        w = (int)width[col];
        if (line_columns[col].right)
            fprintf(out, "%s%*s", sep, w, cell(inv, row, col, buf));
        else
            fprintf(out, "%s%-*s", sep, w, cell(inv, row, col, buf));
        sep = "  ";
    }
    fputc('\n', out);
}

/* A summary row: label on the left, amount right-aligned under AMOUNT, then a note. */
static void print_total(FILE *out, int width, const char *label, const char *amount,
                        const char *note)
{
    fprintf(out, INDENT "%-*s%s%s\n", width - (int)strlen(amount), label, amount, note);
}

static void print_credits(FILE *out, const billing_invoice *inv, int width)
{
    char label[200];
    char note[80];
    char amount[64];
    size_t i;

    for (i = 0; i < billing_invoice_credit_count(inv); i++) {
        snprintf(label, sizeof(label), "credit %s", billing_invoice_credit_grant(inv, i));
        snprintf(amount, sizeof(amount), "-%s", billing_invoice_credit_amount(inv, i));
        snprintf(note, sizeof(note), "  (%s left)", billing_invoice_credit_remaining(inv, i));
        print_total(out, width, label, amount, note);
    }
    for (i = 0; i < billing_invoice_returned_count(inv); i++) {
        snprintf(label, sizeof(label), "credit returned to %s", billing_invoice_returned_grant(inv, i));
        snprintf(note, sizeof(note), "  (%s left)", billing_invoice_returned_remaining(inv, i));
        print_total(out, width, label, billing_invoice_returned_amount(inv, i), note);
    }
    for (i = 0; i < billing_invoice_expired_count(inv); i++) {
        snprintf(label, sizeof(label), "expired credit %s", billing_invoice_expired_grant(inv, i));
        snprintf(note, sizeof(note), "  (not charged)");
        print_total(out, width, label, billing_invoice_expired_amount(inv, i), note);
    }
    if (!has_account_credit(inv))
        return;
    snprintf(note, sizeof(note), "  (%s left)", billing_invoice_account_credit_left(inv));
    if (!is_zero(billing_invoice_account_credit(inv))) {
        snprintf(amount, sizeof(amount), "-%s", billing_invoice_account_credit(inv));
        print_total(out, width, "account credit", amount, note);
    }
    if (!is_zero(billing_invoice_carried(inv)))
        print_total(out, width, "carried to account credit", billing_invoice_carried(inv), note);
}

static void print_header(FILE *out, const billing_invoice *inv)
{
    billing_time_t start;
    billing_time_t end;
    char s[40];
    char e[40];

    billing_invoice_period(inv, &start, &end);
    billing_time_format(start, s, sizeof(s));
    billing_time_format(end, e, sizeof(e));
    fprintf(out, "Invoice %s %04d-%02d (%s), %s to %s\n", billing_invoice_account(inv),
            billing_invoice_year(inv), billing_invoice_month(inv), billing_invoice_currency(inv), s,
            e);
}

int render_invoice_table(FILE *out, const billing_invoice *inv)
{
    size_t width[N_LINE_COLUMNS];
    size_t n = billing_invoice_line_count(inv);
    size_t row;
    size_t col;
    int total_width = 0;
    char label[64];

    print_header(out, inv);
    column_widths(inv, width);
    for (col = 0; col < N_LINE_COLUMNS; col++)
        total_width += width[col] != 0 ? (int)(width[col] + GAP) : 0;
    total_width -= GAP;
    if (n == 0)
        fputs(INDENT "(no charges)\n", out);
    else
        print_row(out, inv, SIZE_MAX, width);
    for (row = 0; row < n; row++)
        print_row(out, inv, row, width);
    print_total(out, total_width, "subtotal", billing_invoice_subtotal(inv), "");
    print_credits(out, inv, total_width);
    snprintf(label, sizeof(label), "tax at %s", billing_invoice_tax_rate(inv));
    print_total(out, total_width, label, billing_invoice_tax(inv), "");
    print_total(out, total_width, "total", billing_invoice_total(inv), "");
    fputc('\n', out);
    return 0;
}
