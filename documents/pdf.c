/*
 * pdf.c - an invoice as a PDF a customer could receive: the layout, written
 * by pdfwrite.c (which embeds only the glyphs used: subsets, so a CJK font
 * costs kilobytes per invoice, not megabytes; the Latin font's ASCII is
 * made once per process and copied into each document).
 *
 * Two fonts from Debian: DejaVu Sans (fonts-dejavu-core) for Latin text
 * and Droid Sans Fallback (fonts-droid-fallback) for CJK, which has no
 * Latin letters; text is drawn in runs, each in the font that has it.
 * Paths can be changed with BILLING_PDF_FONT and BILLING_PDF_CJK_FONT.
 * The seller block comes from billing.issuers (the invoice's price
 * book), else BILLING_PDF_SELLER (lines separated by "\n"), by default
 * the package name. Labels are in the account's language (document.h).
 * The creation date in the document information is the time of writing,
 * or SOURCE_DATE_EPOCH (seconds since 1970, as reproducible builds set it) when that is set: then a file
 * depends on its invoice alone, byte for byte, whichever run or worker
 * (-j) wrote it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "columns.h"
#include "pdf.h"
#include "pdfwrite.h"

#define LATIN_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#define CJK_FONT "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf"

/* A4 in points, margins, row height. */
#define PAGE_W 595.0
#define PAGE_H 842.0
#define MARGIN 48.0
#define ROW 14.0

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);

    return v != NULL && v[0] != '\0' ? v : def;
}

/*
 * Load both fonts on first use (pdfwrite.c keeps them per process).
 * Returns 0, or -1 (errno ENOENT: a font is missing) with the variable
 * and path of the font that failed in @why when @why is not NULL.
 */
static int faces_why(char *why, size_t size)
{
    const char *latin = env_or("BILLING_PDF_FONT", LATIN_FONT);
    const char *cjk = env_or("BILLING_PDF_CJK_FONT", CJK_FONT);
    char failed[600];
    const char *var;

    if (pw_fonts(latin, cjk, failed, sizeof(failed)) == 0)
        return 0;
    if (why != NULL) {
        var = strcmp(failed, latin) == 0 ? "BILLING_PDF_FONT"
              : strcmp(failed, cjk) == 0 ? "BILLING_PDF_CJK_FONT"
                                         : NULL;
        if (var == NULL)
            snprintf(why, size, "%s", failed);
        else
            snprintf(why, size, "%s '%s': not a TrueType font FreeType can load%s", var, failed,
                     getenv(var) == NULL || getenv(var)[0] == '\0' ? " (the default path; set "
                                                                     "the variable)"
                                                                   : "");
    }
    errno = ENOENT;
    return -1;
}

static int faces(void)
{
    return faces_why(NULL, 0);
}

int export_pdf_fonts(char *why, size_t size)
{
    return faces_why(why, size);
}

/* ---------------------------------------------------------------------- */
/* Layout                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * A page being laid out: with @doc NULL nothing is drawn and only pages are
 * counted (the first pass, for "Page n of N"); the layout depends on the
 * invoice alone, never on text widths, so both passes break alike.
 */
typedef struct page {
    pw_doc *doc;
    const doc_invoice *inv;
    int no;    /* this page, from 1 */
    int total; /* pages of the document (0 in the counting pass) */
} page;

static void put(page *p, double x, double y, const char *s, double size)
{
    if (p->doc != NULL)
        pw_text(p->doc, x, y, s, size);
}

static void put_right(page *p, double right, double y, const char *s, double size)
{
    if (p->doc != NULL)
        pw_text(p->doc, right - pw_width(s, size), y, s, size);
}

/* The foot of the page: the issuer's footer and "Page n of N". */
static void foot(page *p)
{
    char buf[1100];
    const bs_issuer *is = p->inv->issuer;

    if (p->doc == NULL)
        return;
    if (is != NULL && is->footer[0] != '\0') {
        snprintf(buf, sizeof(buf), "%.1000s", is->footer);
        buf[strcspn(buf, "\n")] = '\0';
        pw_text(p->doc, MARGIN, PAGE_H - MARGIN + 20, buf, 7);
    }
    if (doc_language(p->inv) == DOC_ZH)
        snprintf(buf, sizeof(buf), "第 %d 页，共 %d 页", p->no, p->total);
    else
        snprintf(buf, sizeof(buf), "Page %d of %d", p->no, p->total);
    put_right(p, PAGE_W - MARGIN, PAGE_H - MARGIN + 20, buf, 8);
}

/* End this page, start the next. */
static void next_page(page *p)
{
    foot(p);
    if (p->doc != NULL)
        pw_page(p->doc);
    p->no++;
}

/* Up to @max lines of @s (lines separated by "\n") at (x, y). Returns the next y. */
static double lines_of(page *p, double x, double y, const char *s, int max, double size)
{
    char line[256];
    int i;

    for (i = 0; i < max && *s != '\0'; i++) {
        size_t n = strcspn(s, "\n");
        snprintf(line, sizeof(line), "%.*s", (int)(n < 255 ? n : 255), s);
        put(p, x, y, line, size);
        y += ROW;
        s += n;
        if (*s == '\n')
            s++;
    }
    return y;
}

/*
 * The seller: billing.issuers of the invoice's price book; without one,
 * BILLING_PDF_SELLER (lines separated by "\n"), by default the package name.
 */
static double seller_block(page *p, double y)
{
    const bs_issuer *is = p->inv->issuer;
    char buf[256];
    double y0 = y;

    put(p, MARGIN, y, doc_text(p->inv, DOC_T_FROM), 8);
    y += ROW;
    if (is == NULL)
        return lines_of(p, MARGIN, y, env_or("BILLING_PDF_SELLER", PACKAGE_NAME), 5, 9);
    put(p, MARGIN, y, is->legal_name, 11);
    y = lines_of(p, MARGIN, y + ROW, is->address, 4, 9);
    if (is->tax_id[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s %s", doc_text(p->inv, DOC_T_TAX_ID), is->tax_id);
        put(p, MARGIN, y, buf, 9);
        y += ROW;
    }
    y = lines_of(p, MARGIN, y, is->contact, 2, 9);
    return y > y0 ? y : y0;
}

/* The customer: name, billing address, tax id, e-mail, account. */
static double customer_block(page *p, double y)
{
    const bs_party *cu = &DOC_HEAD(p->inv)->customer;
    char buf[512];

    put(p, 330, y, doc_text(p->inv, DOC_T_BILL_TO), 8);
    put(p, 330, y + ROW, cu->name, 11);
    y = lines_of(p, 330, y + 2 * ROW, cu->billing_address, 4, 9);
    if (cu->tax_id[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s %s", doc_text(p->inv, DOC_T_TAX_ID), cu->tax_id);
        put(p, 330, y, buf, 9);
        y += ROW;
    }
    if (cu->email[0] != '\0') {
        put(p, 330, y, cu->email, 9);
        y += ROW;
    }
    snprintf(buf, sizeof(buf), "%s %s", doc_text(p->inv, DOC_T_ACCOUNT), cu->account);
    put(p, 330, y, buf, 9);
    y += ROW;
    snprintf(buf, sizeof(buf), "%s %s, %s", doc_text(p->inv, DOC_T_TIME_ZONE),
             DOC_HEAD(p->inv)->time_zone, DOC_HEAD(p->inv)->currency);
    put(p, 330, y, buf, 9);
    return y + ROW;
}

/* "Label: value" at (x, y) when @value is not empty. Returns the next y. */
static double field(page *p, double x, double y, doc_text_id label, const char *value)
{
    char buf[512];

    if (value[0] == '\0')
        return y;
    snprintf(buf, sizeof(buf), "%s: %.400s", doc_text(p->inv, label), value);
    put(p, x, y, buf, 9);
    return y + ROW;
}

/* The box the logo is scaled into, at the top right. */
#define LOGO_W 140.0
#define LOGO_H 48.0

/*
 * The issuer's logo (PNG, hex from the store) scaled into the top right
 * box, keeping its proportions. A logo that cannot be read is left out:
 * the document is still complete without it.
 */
static void logo(page *p)
{
    const bs_issuer *is = p->inv->issuer;
    int w, h;
    double k;

    if (p->doc == NULL || is == NULL || is->logo_hex[0] == '\0' ||
        pw_png_size(p->doc, is->logo_hex, &w, &h) != 0)
        return;
    k = LOGO_W / w < LOGO_H / h ? LOGO_W / w : LOGO_H / h;
    pw_png(p->doc, PAGE_W - MARGIN - w * k, MARGIN - 14, w * k, h * k);
}

/* Header: title, VOID, seller and customer, number, dates, what a credit note credits. */
static double header(page *p)
{
    const doc_invoice *inv = p->inv;
    const bs_invoice_head *h = DOC_HEAD(inv);
    int note = strcmp(h->kind, "credit_note") == 0;
    char buf[512];
    double y = MARGIN + 10;
    double ys;
    double yc;

    put(p, MARGIN, y, doc_title(inv), 18);
    logo(p);
    if (strcmp(h->status, "void") == 0 && p->doc != NULL) {
        pw_rgb(p->doc, 0.8, 0, 0);
        pw_text(p->doc, PAGE_W / 2 - 20, y + 6, "VOID", 28);
        pw_rgb(p->doc, 0, 0, 0);
    }
    y += 2 * ROW;
    ys = seller_block(p, y);
    yc = customer_block(p, y);
    y = (ys > yc ? ys : yc) + ROW;
    snprintf(buf, sizeof(buf), "%s: %s", doc_text(inv, DOC_T_NUMBER),
             h->number[0] != '\0'          ? h->number
             : doc_language(inv) == DOC_ZH ? "（草稿）"
                                           : "(draft)");
    put(p, MARGIN, y, buf, 10);
    y += ROW;
    snprintf(buf, sizeof(buf), "%s: %s (%s – %s)", doc_text(inv, DOC_T_PERIOD), h->period,
             h->period_first, h->period_last);
    put(p, MARGIN, y, buf, 9);
    y += ROW;
    y = field(p, MARGIN, y, DOC_T_ISSUED, h->issue_date);
    if (!note && strcmp(h->status, "finalized") == 0)
        y = field(p, MARGIN, y, DOC_T_DUE, h->due_date);
    y = field(p, MARGIN, y, DOC_T_CREDITS_INVOICE, h->corrects);
    if (note)
        y = field(p, MARGIN, y, DOC_T_REASON,
                  h->corrects_reason[0] != '\0' ? h->corrects_reason : h->refund_reason);
    /* Cut like the refund's reason: the line must stay on the page. */
    y = field(p, MARGIN, y, DOC_T_VOIDED, h->void_reason);
    if (h->refund_method[0] != '\0') {
        snprintf(buf, sizeof(buf),
                 "Account credit refunded to the payment method (%s), "
                 "reference %.100s",
                 h->refund_method, h->refund_reference);
        put(p, MARGIN, y, buf, 9);
        y += ROW;
    }
    return y + ROW;
}

/* Column x positions of the line table (right edges for numbers). */
#define X_NO MARGIN
#define X_DESC (MARGIN + 20)
#define X_QTY 380.0
#define X_UNIT 385.0
#define X_PRICE 490.0
#define X_AMOUNT (PAGE_W - MARGIN)

static void rule(page *p, double y)
{
    if (p->doc == NULL)
        return;
    pw_rule(p->doc, MARGIN, y, PAGE_W - MARGIN, y, 0.5);
}

static double table_head(page *p, double y)
{
    put(p, X_NO, y, "#", 8);
    put(p, X_DESC, y, doc_text(p->inv, DOC_T_DESCRIPTION), 8);
    put_right(p, X_QTY, y, doc_text(p->inv, DOC_T_QUANTITY), 8);
    put(p, X_UNIT, y, doc_text(p->inv, DOC_T_UNIT), 8);
    put_right(p, X_PRICE, y, doc_text(p->inv, DOC_T_UNIT_PRICE), 8);
    put_right(p, X_AMOUNT, y, doc_text(p->inv, DOC_T_AMOUNT), 8);
    rule(p, y + 4);
    return y + ROW + 2;
}

/*
 * Columns of a description's line in the table: 8 pt text between X_DESC
 * and the widest quantity ("20 d 11 h 30 min"), a wide character (CJK)
 * counting two. Counted in characters, not measured, so that both passes
 * of the layout break alike.
 */
#define DESC_COLUMNS 54

/*
 * Where @s's first line ends: its whole length when it fits DESC_COLUMNS,
 * else the last space that does (or the last character that does, for a
 * word longer than a line).
 */
static size_t desc_break(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, space = 0, cols = 0, len;

    while (u[i] != '\0') {
        unsigned cp = pw_decode(u + i, &len);
        cols += cp >= PW_CJK_FIRST ? 2 : 1;
        if (cols > DESC_COLUMNS)
            return space > 0 ? space : i;
        if (cp == ' ')
            space = i;
        i += len;
    }
    return i;
}

static double line_row(page *p, const bs_invoice_line *l, double y)
{
    char buf[512];
    size_t cut;
    double y_next;

    doc_line_description(p->inv, l, buf, sizeof(buf));
    cut = desc_break(buf);
    /* A description too long for its column goes on over a second line. */
    y_next = buf[cut] != '\0' ? y + 2 * ROW : y + ROW;
    if (p->doc == NULL)
        return y_next;
    put(p, X_NO, y, l->line, 8);
    if (buf[cut] != '\0') {
        put(p, X_DESC + 8, y + ROW, buf + cut + (buf[cut] == ' '), 8);
        buf[cut] = '\0';
    }
    put(p, X_DESC, y, buf, 8);
    doc_line_quantity(l, buf, sizeof(buf));
    put_right(p, X_QTY, y, buf, 8);
    put(p, X_UNIT, y, strcmp(l->unit, "second") == 0 ? "" : l->unit, 8);
    put_right(p, X_PRICE, y, l->unit_price, 8);
    put_right(p, X_AMOUNT, y, l->amount, 8);
    return y_next;
}

static double total_row(page *p, double y, const char *label, const char *value,
                        const char *currency, double size)
{
    char buf[128];

    put_right(p, X_PRICE - 60, y, label, size);
    snprintf(buf, sizeof(buf), "%s %s", value, currency);
    put_right(p, X_AMOUNT, y, buf, size);
    return y + ROW + 2;
}

/*
 * The totals in reconciliation order (doc_totals, as `billing invoice show`
 * prints them), then the account credit left after the invoice.
 */
static double totals(page *p, double y)
{
    const doc_invoice *inv = p->inv;
    const char *cur = DOC_HEAD(inv)->currency;
    char label[128];
    char buf[128];
    size_t i;

    rule(p, y - ROW + 4);
    for (i = 0; i < doc_n_totals; i++) {
        const doc_total *t = &doc_totals[i];
        if (doc_total_shown(inv, t))
            y = total_row(p, y, doc_total_label(inv, t, label, sizeof(label)),
                          doc_total_text(inv, t, buf, sizeof(buf)), cur,
                          strcmp(t->key, "total") == 0 ? 12 : 9);
    }
    if (strcmp(DOC_HEAD(inv)->kind, "invoice") == 0)
        y = total_row(p, y, doc_text(inv, DOC_T_CREDIT_LEFT), DOC_HEAD(inv)->account_credit_left,
                      cur, 9);
    return y;
}

/* Columns of the grants block: label at X_DESC, amounts right-aligned here. */
static const double grant_x[] = {X_DESC, X_QTY, X_PRICE - 60, X_PRICE, X_AMOUNT};

/* Each credit grant: applied, returned and expired here, and what is left of it. */
static double grants(page *p, double y)
{
    const doc_invoice *inv = p->inv;
    char buf[64];
    size_t c;
    size_t r;

    if (inv->rows->n_grants == 0)
        return y;
    y += ROW;
    put(p, X_DESC, y, doc_text(inv, DOC_T_GRANTS), 9);
    y += ROW;
    for (c = 0; c < export_n_grant_columns; c++) {
        if (c == 0)
            put(p, grant_x[c], y, export_grant_columns[c].header, 8);
        else
            put_right(p, grant_x[c], y, export_grant_columns[c].header, 8);
    }
    for (r = 0; r < inv->rows->n_grants; r++) {
        const bs_invoice_grant *g = &inv->rows->grants[r];
        y += ROW;
        for (c = 0; c < export_n_grant_columns; c++) {
            const char *v = export_cell(g, &export_grant_columns[c], buf, sizeof(buf));
            if (c == 0)
                put(p, grant_x[c], y, v, 8);
            else
                put_right(p, grant_x[c], y, v, 8);
        }
    }
    return y + ROW;
}

/* The issuer's payment instructions, on invoices that are to be paid. */
static double payment(page *p, double y)
{
    const bs_issuer *is = p->inv->issuer;

    if (is == NULL || is->payment_instructions[0] == '\0' ||
        strcmp(DOC_HEAD(p->inv)->kind, "invoice") != 0 ||
        strcmp(DOC_HEAD(p->inv)->status, "void") == 0)
        return y;
    y += ROW;
    put(p, X_DESC, y, doc_text(p->inv, DOC_T_PAY), 9);
    return lines_of(p, X_DESC, y + ROW, is->payment_instructions, 6, 8);
}

/* Lines the closing block (totals, credit left, grants, payment) needs. */
static double closing_rows(const doc_invoice *inv)
{
    size_t i, shown = 0;

    for (i = 0; i < doc_n_totals; i++)
        shown += doc_total_shown(inv, &doc_totals[i]) != 0;
    return (double)shown + 12 + (double)inv->rows->n_grants;
}

/*
 * Lay out the whole invoice, starting new pages as the lines need (the
 * table's head repeated on each), with "Page n of N" at every foot.
 * Returns the number of pages.
 */
static int draw(pw_doc *doc, const doc_invoice *inv, int total)
{
    page p = {doc, inv, 1, total};
    double y = header(&p);
    size_t r;

    y = table_head(&p, y);
    for (r = 0; r < inv->rows->n_lines; r++) {
        if (y > PAGE_H - MARGIN - 2 * ROW) {
            next_page(&p);
            y = table_head(&p, MARGIN + 10);
        }
        y = line_row(&p, &inv->rows->lines[r], y);
    }
    /* The closing block stays together on one page. */
    if (y > PAGE_H - MARGIN - closing_rows(inv) * (ROW + 2)) {
        next_page(&p);
        y = MARGIN + 10;
    }
    y = totals(&p, y + ROW);
    y = grants(&p, y);
    payment(&p, y);
    foot(&p);
    if (doc != NULL)
        pw_page(doc);
    return p.no;
}

/*
 * SOURCE_DATE_EPOCH as an ISO 8601 date ("2026-12-01T00:00:00Z") in @buf;
 * NULL when unset or not a plain count of seconds.
 */
static const char *source_date(char *buf, size_t size)
{
    const char *v = getenv("SOURCE_DATE_EPOCH");
    struct tm tm;
    time_t t;

    /* At most 11 digits: year 5138, so that time_t cannot overflow. */
    if (v == NULL || v[0] == '\0' || strlen(v) > 11 || strspn(v, "0123456789") != strlen(v))
        return NULL;
    t = (time_t)strtoll(v, NULL, 10);
    if (gmtime_r(&t, &tm) == NULL || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return NULL;
    return buf;
}

/*
 * @inv as a PDF in *@out of *@len bytes, created at SOURCE_DATE_EPOCH
 * when set, else at @created (ISO 8601), else now. Returns 0, or -1 with
 * errno.
 */
static int render(const doc_invoice *inv, const char *created, char **out, size_t *len)
{
    char date[32];
    const char *when = source_date(date, sizeof(date));
    time_t now;
    struct tm tm;
    pw_doc *d;

    *out = NULL;
    *len = 0;
    if (faces() != 0)
        return -1;
    if (when == NULL)
        when = created;
    if (when == NULL) {
        now = time(NULL);
        if (gmtime_r(&now, &tm) != NULL &&
            strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm) != 0)
            when = date;
    }
    d = pw_begin(PAGE_W, PAGE_H, doc_title(inv), PACKAGE_STRING, when);
    if (d == NULL) {
        errno = ENOMEM;
        return -1;
    }
    draw(d, inv, draw(NULL, inv, 0));
    return pw_end(d, out, len);
}

int export_invoice_pdf(const doc_invoice *inv, const char *path)
{
    char *bytes;
    size_t len, done = 0;
    int fd;
    int rc = 0;

    if (render(inv, NULL, &bytes, &len) != 0)
        return -1;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        free(bytes);
        return -1;
    }
    /* One write for the whole file (stdio wrote it in 4 KiB pieces). */
    while (rc == 0 && done < len) {
        ssize_t n = write(fd, bytes + done, len - done);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno != EINTR)
            rc = -1;
    }
    if (close(fd) != 0)
        rc = -1;
    free(bytes);
    return rc;
}

int export_invoice_pdf_mem(const doc_invoice *inv, const char *created, char **out, size_t *len)
{
    return render(inv, created, out, len);
}
