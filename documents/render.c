/*
 * render.c - invoices as JSON or text. One table of line columns drives
 * both forms, so that they cannot drift apart.
 */
#include "config.h"

#include <string.h>

#include "csv.h"
#include "numfmt.h"
#include "render.h"

/* A line's cell: the accessor's string, or text formatted into @buf of @size bytes. */
typedef const char *(*line_getter)(const billing_invoice *inv, size_t i, char *buf, size_t size);

#define PLAIN_GETTER(name)                                                                      \
    static const char *get_##name(const billing_invoice *inv, size_t i, char *buf, size_t size) \
    {                                                                                           \
        (void)buf;                                                                              \
        (void)size;                                                                             \
        return billing_invoice_line_##name(inv, i);                                             \
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

/* How the table form shows a cell: as is, or as a number or instant for people. */
enum { AS_TEXT, AS_QUANTITY, AS_PRICE, AS_MONEY, AS_INSTANT };

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
    int shown_as; /* in the table */
    int compact;  /* kept in the compact table */
} line_columns[] = {
    {"kind", "KIND", get_kind, YES, YES, 0, AS_TEXT, 1},
    {"meter", "METER", get_meter, YES, YES, 0, AS_TEXT, 1},
    {"model", "MODEL", get_model, YES, YES, 0, AS_TEXT, 1},
    {"region", "REGION", get_region, YES, YES, 0, AS_TEXT, 1},
    {"plan", "PLAN", get_plan, YES, YES, 0, AS_TEXT, 1},
    {"price_version", "VERSION", get_price_version, YES, YES, 0, AS_TEXT, 0},
    {"subscription", "SUBSCRIPTION", get_subscription, IF_SET, IF_SET, 0, AS_TEXT, 1},
    {"unused_from", "UNUSED FROM", get_unused_from, IF_SET, IF_SET, 0, AS_INSTANT, 1},
    {"unused_to", "UNUSED TO", get_unused_to, IF_SET, IF_SET, 0, AS_INSTANT, 1},
    {"quantity", "QUANTITY", get_quantity, YES, YES, 1, AS_QUANTITY, 1},
    {"unit", "UNIT", get_unit, YES, YES, 0, AS_TEXT, 1},
    {"unit_price", "UNIT PRICE", get_unit_price, YES, YES, 1, AS_PRICE, 1},
    {"amount_exact", "EXACT", get_amount, YES, NO, 1, AS_TEXT, 0},
    {"amount", "AMOUNT", get_amount_rounded, YES, YES, 1, AS_MONEY, 1},
};
#define N_LINE_COLUMNS (sizeof(line_columns) / sizeof(line_columns[0]))

/* Room for any cell: an RFC 3339 instant is at most 30 characters, a number NUMFMT_MAX. */
#define CELL_MAX NUMFMT_MAX

/* Fraction digits a rounded quantity shows in the table. */
#define QUANTITY_SCALE 4

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

/* A line metered from events (usage or included), which a resource's events account for. */
static int metered(const billing_invoice *inv, size_t i)
{
    billing_line_kind k = billing_invoice_line_kind(inv, i);

    return k == BILLING_LINE_USAGE || k == BILLING_LINE_INCLUDED;
}

static json_t *some_lines_json(const billing_invoice *inv, int metered_only)
{
    json_t *arr = json_array();
    size_t i;

    for (i = 0; arr != NULL && i < billing_invoice_line_count(inv); i++) {
        if (metered_only && !metered(inv, i))
            continue;
        if (append(arr, line_json(inv, i)) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *render_metered_lines_json(const billing_invoice *inv)
{
    return some_lines_json(inv, 1);
}

size_t render_metered_count(const billing_invoice *inv)
{
    size_t n = 0;
    size_t i;

    for (i = 0; i < billing_invoice_line_count(inv); i++)
        n += (size_t)metered(inv, i);
    return n;
}

static json_t *credits_json(const billing_invoice *inv, int which)
{
    json_t *arr = json_array();
    size_t n = which == CREDITS_RETURNED  ? billing_invoice_returned_count(inv)
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
        json_object_set_new(o, "lines", some_lines_json(inv, 0)) != 0 ||
        json_object_set_new(o, "credits", credits_json(inv, CREDITS_APPLIED)) != 0 ||
        json_object_set_new(o, "expired_credits", credits_json(inv, CREDITS_EXPIRED)) != 0 ||
        add_returned(o, inv) != 0 || add_str(o, "subtotal", billing_invoice_subtotal(inv)) != 0 ||
        add_str(o, "credits_total", billing_invoice_credits(inv)) != 0 ||
        add_account_credit(o, inv) != 0 ||
        add_str(o, "tax_rate", billing_invoice_tax_rate(inv)) != 0 ||
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

/* The invoice and how to show it: what every text function needs. */
typedef struct table {
    const billing_invoice *inv;
    const render_view *view;
    int scale; /* the currency's minor digits */
} table;

const char *render_local_time(const billing_zone *zone, billing_time_t at, int date_only, char *buf,
                              size_t size)
{
    int32_t off = zone != NULL ? billing_zone_offset(zone, at) : 0;
    char utc[40];

    if (billing_time_format(at + (billing_time_t)off * BILLING_NS_PER_SEC, utc, sizeof(utc)) < 0)
        return "";
    utc[date_only ? 10 : 19] = '\0';
    utc[10] = date_only ? '\0' : ' ';
    snprintf(buf, size, "%s", utc);
    return buf;
}

/* @t on the account's wall clock. */
static const char *local_time(const table *t, billing_time_t at, int date_only, char *buf,
                              size_t size)
{
    return render_local_time(t->view->zone, at, date_only, buf, size);
}

/* A money amount grouped, with at least the currency's digits; @raw when it cannot be. */
static const char *money(const table *t, const char *raw, char *buf, size_t size)
{
    if (raw == NULL || raw[0] == '\0')
        return raw;
    numfmt_decimal(raw, t->scale, 40, t->view->thousands, buf, size);
    return buf;
}

/* Digits after the decimal point of @s. */
static int scale_of(const char *s)
{
    const char *dot = strchr(s, '.');

    return dot != NULL ? (int)strlen(dot + 1) : 0;
}

/*
 * Line @row's unit price @v as its price book writes it, when the view
 * knows it and it is the same value; otherwise at the currency's scale.
 */
static const char *price(const table *t, size_t row, const char *v, char *buf, size_t size)
{
    const render_view *view = t->view;
    const char *w =
        view->written_price != NULL ? view->written_price(view->written_arg, t->inv, row) : NULL;
    char a[CELL_MAX];
    char b[CELL_MAX];

    if (w != NULL && numfmt_decimal(w, 0, 40, "", a, sizeof(a)) == 0 &&
        numfmt_decimal(v, 0, 40, "", b, sizeof(b)) == 0 && strcmp(a, b) == 0 &&
        numfmt_decimal(w, scale_of(w), scale_of(w), view->thousands, buf, size) == 0)
        return buf;
    return money(t, v, buf, size);
}

/* A cell as the table shows it, into @buf (CELL_MAX bytes); "" when the line has none. */
static const char *shown(const table *t, size_t row, size_t col, char *buf)
{
    const struct line_column *c = &line_columns[col];
    char raw[CELL_MAX];
    const char *v = c->get(t->inv, row, raw, sizeof(raw));
    billing_time_t at;

    if (v == NULL || v[0] == '\0')
        return "";
    switch (c->shown_as) {
    case AS_QUANTITY:
        if (t->view->exact)
            return v;
        numfmt_decimal(v, 0, QUANTITY_SCALE, t->view->thousands, buf, CELL_MAX);
        return buf;
    case AS_PRICE:
        return price(t, row, v, buf, CELL_MAX);
    case AS_MONEY:
        return money(t, v, buf, CELL_MAX);
    case AS_INSTANT:
        if (billing_time_parse(v, &at, NULL, 0) != BILLING_OK)
            return v == raw ? strcpy(buf, raw) : v;
        return local_time(t, at, 0, buf, CELL_MAX);
    default:
        return v == raw ? strcpy(buf, raw) : v;
    }
}

/* The text of a table cell into @buf; row SIZE_MAX is the header. */
static const char *cell(const table *t, size_t row, size_t col, char *buf)
{
    const char *s;

    if (row == SIZE_MAX)
        return line_columns[col].header;
    s = shown(t, row, col, buf);
    return s[0] == '\0' ? "-" : s;
}

/* Whether the table shows column @col, given whether some line has a value in it. */
static int column_shown(const table *t, size_t col, int set)
{
    const struct line_column *c = &line_columns[col];

    if (c->in_table == NO || (c->in_table == IF_SET && !set))
        return 0;
    if (t->view->compact)
        return c->compact && set;
    return 1;
}

/* Widths of the columns the table shows; 0 for those it leaves out. */
static void column_widths(const table *t, size_t *width)
{
    size_t n = billing_invoice_line_count(t->inv);
    char buf[CELL_MAX];
    size_t row;
    size_t col;
    size_t len;
    int set;

    for (col = 0; col < N_LINE_COLUMNS; col++) {
        width[col] = strlen(line_columns[col].header);
        set = 0;
        for (row = 0; row < n; row++) {
            set |= shown(t, row, col, buf)[0] != '\0';
            len = strlen(cell(t, row, col, buf));
            if (len > width[col])
                width[col] = len;
        }
        if (!column_shown(t, col, set))
            width[col] = 0;
    }
}

static void print_row(FILE *out, const table *t, size_t row, const size_t *width)
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
            fprintf(out, "%s%*s", sep, w, cell(t, row, col, buf));
        else
            fprintf(out, "%s%-*s", sep, w, cell(t, row, col, buf));
        sep = "  ";
    }
    fputc('\n', out);
}

/* A summary row: label on the left, amount right-aligned under AMOUNT, then a note. */
static void print_total(FILE *out, const table *t, int width, const char *label, const char *amount,
                        const char *note)
{
    char buf[CELL_MAX];
    const char *a = money(t, amount, buf, sizeof(buf));

    fprintf(out, INDENT "%-*s%s%s\n", width - (int)strlen(a), label, a, note);
}

/* "  (X left)" with X grouped. */
static const char *left_note(const table *t, const char *left, char *note, size_t size)
{
    char buf[CELL_MAX];

    snprintf(note, size, "  (%s left)", money(t, left, buf, sizeof(buf)));
    return note;
}

static void print_grant_credits(FILE *out, const table *t, int width)
{
    const billing_invoice *inv = t->inv;
    char label[200];
    char note[CELL_MAX + 16];
    char amount[CELL_MAX];
    size_t i;

    for (i = 0; i < billing_invoice_credit_count(inv); i++) {
        snprintf(label, sizeof(label), "credit %s", billing_invoice_credit_grant(inv, i));
        snprintf(amount, sizeof(amount), "-%s", billing_invoice_credit_amount(inv, i));
        left_note(t, billing_invoice_credit_remaining(inv, i), note, sizeof(note));
        print_total(out, t, width, label, amount, note);
    }
    for (i = 0; i < billing_invoice_returned_count(inv); i++) {
        snprintf(label, sizeof(label), "credit returned to %s",
                 billing_invoice_returned_grant(inv, i));
        left_note(t, billing_invoice_returned_remaining(inv, i), note, sizeof(note));
        print_total(out, t, width, label, billing_invoice_returned_amount(inv, i), note);
    }
    for (i = 0; i < billing_invoice_expired_count(inv); i++) {
        snprintf(label, sizeof(label), "expired credit %s", billing_invoice_expired_grant(inv, i));
        print_total(out, t, width, label, billing_invoice_expired_amount(inv, i),
                    "  (not charged)");
    }
}

static void print_credits(FILE *out, const table *t, int width)
{
    const billing_invoice *inv = t->inv;
    char note[CELL_MAX + 16];
    char amount[CELL_MAX];

    print_grant_credits(out, t, width);
    if (!has_account_credit(inv))
        return;
    left_note(t, billing_invoice_account_credit_left(inv), note, sizeof(note));
    if (!is_zero(billing_invoice_account_credit(inv))) {
        snprintf(amount, sizeof(amount), "-%s", billing_invoice_account_credit(inv));
        print_total(out, t, width, "account credit", amount, note);
    }
    if (!is_zero(billing_invoice_carried(inv)))
        print_total(out, t, width, "carried to account credit", billing_invoice_carried(inv), note);
}

/* "Invoice lab-a 2026-01 (CNY): 2026-01-01 to 2026-01-31, Asia/Shanghai" */
static void print_header(FILE *out, const table *t)
{
    billing_time_t start;
    billing_time_t end;
    char s[40];
    char e[40];

    billing_invoice_period(t->inv, &start, &end);
    fprintf(out, "Invoice %s %04d-%02d (%s): %s to %s, %s\n", billing_invoice_account(t->inv),
            billing_invoice_year(t->inv), billing_invoice_month(t->inv),
            billing_invoice_currency(t->inv), local_time(t, start, 1, s, sizeof(s)),
            local_time(t, end - 1, 1, e, sizeof(e)),
            t->view->zone != NULL ? billing_zone_name(t->view->zone) : "UTC");
}

int render_invoice_table(FILE *out, const billing_invoice *inv, const render_view *view)
{
    table t;
    size_t width[N_LINE_COLUMNS];
    size_t n = billing_invoice_line_count(inv);
    size_t row;
    size_t col;
    int total_width = 0;
    char label[NUMFMT_MAX + 8];
    char pct[NUMFMT_MAX];

    t.inv = inv;
    t.view = view;
    t.scale = billing_currency_digits(billing_invoice_currency(inv));
    if (t.scale < 0)
        t.scale = 0;
    print_header(out, &t);
    column_widths(&t, width);
    for (col = 0; col < N_LINE_COLUMNS; col++)
        total_width += width[col] != 0 ? (int)(width[col] + GAP) : 0;
    total_width -= GAP;
    if (n == 0)
        fputs(INDENT "(no charges)\n", out);
    else
        print_row(out, &t, SIZE_MAX, width);
    for (row = 0; row < n; row++)
        print_row(out, &t, row, width);
    print_total(out, &t, total_width, "subtotal", billing_invoice_subtotal(inv), "");
    print_credits(out, &t, total_width);
    numfmt_percent(billing_invoice_tax_rate(inv), pct, sizeof(pct));
    snprintf(label, sizeof(label), "tax at %s", pct);
    print_total(out, &t, total_width, label, billing_invoice_tax(inv), "");
    print_total(out, &t, total_width, "total", billing_invoice_total(inv), "");
    fputc('\n', out);
    return 0;
}

int render_resource_table(FILE *out, const billing_invoice *inv, const char *resource,
                          const render_view *view)
{
    table t;
    size_t width[N_LINE_COLUMNS];
    size_t row;

    t.inv = inv;
    t.view = view;
    t.scale = billing_currency_digits(billing_invoice_currency(inv));
    if (t.scale < 0)
        t.scale = 0;
    column_widths(&t, width);
    fprintf(out, INDENT "resource %s:\n", resource);
    print_row(out, &t, SIZE_MAX, width);
    for (row = 0; row < billing_invoice_line_count(inv); row++) {
        if (metered(inv, row))
            print_row(out, &t, row, width);
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* CSV (RFC 4180)                                                          */
/* ---------------------------------------------------------------------- */

/* One cell (csv.h: quoted, formulas made inert), @sep before it. */
static void csv_field(FILE *out, const char *sep, const char *v)
{
    fputs(sep, out);
    csv_cell(out, v);
}

void render_csv_header(FILE *out)
{
    size_t c;

    fputs("account,month,currency", out);
    for (c = 0; c < N_LINE_COLUMNS; c++)
        csv_field(out, ",", line_columns[c].key);
    fputs(",grant\r\n", out);
}

/* The fields every row starts with: account, "YYYY-MM", currency. */
static void csv_row_start(FILE *out, const billing_invoice *inv)
{
    char month[16];

    snprintf(month, sizeof(month), "%04d-%02d", billing_invoice_year(inv),
             billing_invoice_month(inv));
    csv_field(out, "", billing_invoice_account(inv));
    csv_field(out, ",", month);
    csv_field(out, ",", billing_invoice_currency(inv));
}

static void csv_line(FILE *out, const billing_invoice *inv, size_t i)
{
    char buf[CELL_MAX];
    size_t c;

    csv_row_start(out, inv);
    for (c = 0; c < N_LINE_COLUMNS; c++)
        csv_field(out, ",", line_columns[c].get(inv, i, buf, sizeof(buf)));
    fputs(",\r\n", out);
}

/* A summary row: @kind, @amount in both amount columns, @grant (or ""). */
static void csv_figure(FILE *out, const billing_invoice *inv, const char *kind, int negate,
                       const char *amount, const char *grant)
{
    char signed_amount[CELL_MAX];
    size_t c;

    if (negate && !is_zero(amount))
        snprintf(signed_amount, sizeof(signed_amount), "-%s", amount);
    else
        snprintf(signed_amount, sizeof(signed_amount), "%s", amount);
    csv_row_start(out, inv);
    for (c = 0; c < N_LINE_COLUMNS; c++) {
        if (line_columns[c].get == get_kind)
            csv_field(out, ",", kind);
        else if (line_columns[c].get == get_amount || line_columns[c].get == get_amount_rounded)
            csv_field(out, ",", signed_amount);
        else
            csv_field(out, ",", "");
    }
    csv_field(out, ",", grant);
    fputs("\r\n", out);
}

int render_invoice_csv(FILE *out, const billing_invoice *inv)
{
    size_t i;

    for (i = 0; i < billing_invoice_line_count(inv); i++)
        csv_line(out, inv, i);
    csv_figure(out, inv, "subtotal", 0, billing_invoice_subtotal(inv), "");
    for (i = 0; i < billing_invoice_returned_count(inv); i++)
        csv_figure(out, inv, "returned_credit", 0, billing_invoice_returned_amount(inv, i),
                   billing_invoice_returned_grant(inv, i));
    for (i = 0; i < billing_invoice_credit_count(inv); i++)
        csv_figure(out, inv, "credit", 1, billing_invoice_credit_amount(inv, i),
                   billing_invoice_credit_grant(inv, i));
    for (i = 0; i < billing_invoice_expired_count(inv); i++)
        csv_figure(out, inv, "expired_credit", 0, billing_invoice_expired_amount(inv, i),
                   billing_invoice_expired_grant(inv, i));
    if (has_account_credit(inv)) {
        csv_figure(out, inv, "account_credit", 1, billing_invoice_account_credit(inv), "");
        csv_figure(out, inv, "carried", 0, billing_invoice_carried(inv), "");
    }
    csv_figure(out, inv, "tax", 0, billing_invoice_tax(inv), "");
    csv_figure(out, inv, "total", 0, billing_invoice_total(inv), "");
    return 0;
}
