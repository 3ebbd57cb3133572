/*
 * pdf.c - an invoice as a PDF a customer could receive, drawn with cairo
 * (its PDF surface embeds only the glyphs used: a subset, so a CJK font
 * costs kilobytes per invoice, not megabytes).
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

#include <cairo-ft.h>
#include <cairo-pdf.h>
#include <cairo.h>
#include <errno.h>
#include <ft2build.h>
#include FT_FREETYPE_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "columns.h"
#include "pdf.h"

#define LATIN_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#define CJK_FONT "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf"

/* A4 in points, margins, row height. */
#define PAGE_W 595.0
#define PAGE_H 842.0
#define MARGIN 48.0
#define ROW 14.0
/* First code point drawn with the CJK font (CJK radicals and later). */
#define CJK_FIRST 0x2E80

/* Font faces are loaded once per process and shared (cairo font faces are thread-safe). */
static pthread_mutex_t faces_lock = PTHREAD_MUTEX_INITIALIZER;
static FT_Library ft;
static cairo_font_face_t *latin_face;
static cairo_font_face_t *cjk_face;

static cairo_font_face_t *load_face(const char *path)
{
    FT_Face face;
    cairo_font_face_t *f;

    if (FT_New_Face(ft, path, 0, &face) != 0)
        return NULL;
    f = cairo_ft_font_face_create_for_ft_face(face, 0);
    if (cairo_font_face_status(f) != CAIRO_STATUS_SUCCESS) {
        FT_Done_Face(face);
        return NULL;
    }
    return f;
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);

    return v != NULL && v[0] != '\0' ? v : def;
}

/*
 * Load both faces on first use. Returns 0, or -1 (errno ENOENT: a font is
 * missing) with the variable and path of the font that failed in @why
 * when @why is not NULL.
 */
static int faces_why(char *why, size_t size)
{
    const char *var = NULL;
    const char *path = NULL;
    int rc = 0;

    pthread_mutex_lock(&faces_lock);
    if (latin_face == NULL) {
        if (ft == NULL && FT_Init_FreeType(&ft) != 0)
            rc = -1;
        if (rc == 0) {
            var = "BILLING_PDF_FONT";
            path = env_or(var, LATIN_FONT);
            latin_face = load_face(path);
        }
        if (rc == 0 && latin_face != NULL) {
            var = "BILLING_PDF_CJK_FONT";
            path = env_or(var, CJK_FONT);
            cjk_face = load_face(path);
        }
        if (latin_face == NULL || cjk_face == NULL) {
            latin_face = NULL;
            rc = -1;
        }
    }
    pthread_mutex_unlock(&faces_lock);
    if (rc != 0 && why != NULL) {
        if (path == NULL)
            snprintf(why, size, "cannot start FreeType");
        else
            snprintf(why, size, "%s '%s': not a font FreeType can load%s", var, path,
                     getenv(var) == NULL || getenv(var)[0] == '\0' ? " (the default path; set "
                                                                     "the variable)"
                                                                   : "");
    }
    if (rc != 0)
        errno = ENOENT;
    return rc;
}

static int faces(void)
{
    return faces_why(NULL, 0);
}

int export_pdf_fonts(char *why, size_t size)
{
    return faces_why(why, size);
}

/* The code point starting at @s and its length in bytes (1 for malformed bytes). */
static unsigned decode(const unsigned char *s, size_t *len)
{
    if (s[0] < 0x80) {
        *len = 1;
        return s[0];
    }
    if ((s[0] & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) {
        *len = 2;
        return ((unsigned)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if ((s[0] & 0xF0) == 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
        *len = 3;
        return ((unsigned)(s[0] & 0x0F) << 12) | ((unsigned)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    if ((s[0] & 0xF8) == 0xF0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
        (s[3] & 0xC0) == 0x80) {
        *len = 4;
        return ((unsigned)(s[0] & 0x07) << 18) | ((unsigned)(s[1] & 0x3F) << 12) |
               ((unsigned)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
    *len = 1;
    return 0xFFFD;
}

/*
 * Width of @text at @size; when @draw, draws it at (x, y) instead and
 * returns how far its runs before the last reach: the last run is not
 * measured, as nothing follows it (measuring was a tenth of a PDF's CPU).
 */
static double text_run(cairo_t *cr, double x, double y, const char *text, double size, int draw)
{
    const unsigned char *p = (const unsigned char *)text;
    char run[512];
    double w = 0;

    cairo_set_font_size(cr, size);
    while (*p != '\0') {
        size_t n = 0;
        size_t len;
        int cjk = decode(p, &len) >= CJK_FIRST;
        cairo_text_extents_t ext;
        while (p[n] != '\0' && n + 4 < sizeof(run)) {
            if ((decode(p + n, &len) >= CJK_FIRST) != cjk)
                break;
            n += len;
        }
        memcpy(run, p, n);
        run[n] = '\0';
        cairo_set_font_face(cr, cjk ? cjk_face : latin_face);
        if (draw) {
            cairo_move_to(cr, x + w, y);
            cairo_show_text(cr, run);
        }
        p += n;
        if (!draw || *p != '\0') {
            cairo_text_extents(cr, run, &ext);
            w += ext.x_advance;
        }
    }
    return w;
}

static void text(cairo_t *cr, double x, double y, const char *s, double size)
{
    text_run(cr, x, y, s, size, 1);
}

static void text_right(cairo_t *cr, double right, double y, const char *s, double size)
{
    text_run(cr, right - text_run(cr, 0, 0, s, size, 0), y, s, size, 1);
}

/* ---------------------------------------------------------------------- */
/* Layout                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * A page being laid out: with @cr NULL nothing is drawn and only pages are
 * counted (the first pass, for "Page n of N"); the layout depends on the
 * invoice alone, never on text widths, so both passes break alike.
 */
typedef struct page {
    cairo_t *cr;
    const doc_invoice *inv;
    int no;    /* this page, from 1 */
    int total; /* pages of the document (0 in the counting pass) */
} page;

static void put(page *p, double x, double y, const char *s, double size)
{
    if (p->cr != NULL)
        text(p->cr, x, y, s, size);
}

static void put_right(page *p, double right, double y, const char *s, double size)
{
    if (p->cr != NULL)
        text_right(p->cr, right, y, s, size);
}

/* The foot of the page: the issuer's footer and "Page n of N". */
static void foot(page *p)
{
    char buf[1100];
    const bs_issuer *is = p->inv->issuer;

    if (p->cr == NULL)
        return;
    if (is != NULL && is->footer[0] != '\0') {
        snprintf(buf, sizeof(buf), "%.1000s", is->footer);
        buf[strcspn(buf, "\n")] = '\0';
        text(p->cr, MARGIN, PAGE_H - MARGIN + 20, buf, 7);
    }
    if (doc_language(p->inv) == DOC_ZH)
        snprintf(buf, sizeof(buf), "第 %d 页，共 %d 页", p->no, p->total);
    else
        snprintf(buf, sizeof(buf), "Page %d of %d", p->no, p->total);
    text_right(p->cr, PAGE_W - MARGIN, PAGE_H - MARGIN + 20, buf, 8);
}

/* End this page, start the next. */
static void next_page(page *p)
{
    foot(p);
    if (p->cr != NULL)
        cairo_show_page(p->cr);
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

/* A PNG in memory, read by cairo. */
typedef struct png_src {
    const unsigned char *p;
    size_t left;
} png_src;

static cairo_status_t png_read(void *arg, unsigned char *data, unsigned int length)
{
    png_src *src = arg;

    if (length > src->left)
        return CAIRO_STATUS_READ_ERROR;
    memcpy(data, src->p, length);
    src->p += length;
    src->left -= length;
    return CAIRO_STATUS_SUCCESS;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Longest logo drawn (billing.issuers bounds it to 1 MiB). */
#define LOGO_MAX (1024 * 1024)
/* The box the logo is scaled into, at the top right. */
#define LOGO_W 140.0
#define LOGO_H 48.0

/*
 * The issuer's logo (PNG, hex from the store) scaled into the top right
 * box, keeping its proportions. A logo cairo cannot read is left out: the
 * document is still complete without it.
 */
static void logo(page *p)
{
    const bs_issuer *is = p->inv->issuer;
    size_t n = is != NULL ? strlen(is->logo_hex) / 2 : 0;
    unsigned char *bytes;
    cairo_surface_t *img;
    png_src src;
    double w, h, k;
    size_t i;

    if (p->cr == NULL || n == 0 || n > LOGO_MAX || (bytes = malloc(n)) == NULL)
        return;
    for (i = 0; i < n; i++) {
        int hi = hex_digit(is->logo_hex[2 * i]);
        int lo = hex_digit(is->logo_hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            break;
        bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    src.p = bytes;
    src.left = i;
    img = cairo_image_surface_create_from_png_stream(png_read, &src);
    free(bytes);
    if (cairo_surface_status(img) == CAIRO_STATUS_SUCCESS &&
        cairo_image_surface_get_width(img) > 0 && cairo_image_surface_get_height(img) > 0) {
        w = cairo_image_surface_get_width(img);
        h = cairo_image_surface_get_height(img);
        k = LOGO_W / w < LOGO_H / h ? LOGO_W / w : LOGO_H / h;
        cairo_save(p->cr);
        cairo_translate(p->cr, PAGE_W - MARGIN - w * k, MARGIN - 14);
        cairo_scale(p->cr, k, k);
        cairo_set_source_surface(p->cr, img, 0, 0);
        cairo_paint(p->cr);
        cairo_restore(p->cr);
    }
    cairo_surface_destroy(img);
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
    if (strcmp(h->status, "void") == 0 && p->cr != NULL) {
        cairo_set_source_rgb(p->cr, 0.8, 0, 0);
        text(p->cr, PAGE_W / 2 - 20, y + 6, "VOID", 28);
        cairo_set_source_rgb(p->cr, 0, 0, 0);
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
    if (p->cr == NULL)
        return;
    cairo_move_to(p->cr, MARGIN, y);
    cairo_line_to(p->cr, PAGE_W - MARGIN, y);
    cairo_set_line_width(p->cr, 0.5);
    cairo_stroke(p->cr);
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
        unsigned cp = decode(u + i, &len);
        cols += cp >= CJK_FIRST ? 2 : 1;
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
    if (p->cr == NULL)
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
static int draw(cairo_t *cr, const doc_invoice *inv, int total)
{
    page p = {cr, inv, 1, total};
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
    if (cr != NULL)
        cairo_show_page(cr);
    return p.no;
}

/*
 * SOURCE_DATE_EPOCH as cairo's ISO 8601 date ("2026-12-01T00:00:00Z") in
 * @buf; NULL when unset or not a plain count of seconds (then cairo
 * writes the current time, as without the variable).
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
 * Draw @inv on the PDF surface @s (taken: destroyed here), created at
 * @created (cairo's ISO 8601 date) unless SOURCE_DATE_EPOCH says
 * otherwise; NULL: the time of writing. Returns 0, or -1 with errno.
 */
static int render(cairo_surface_t *s, const doc_invoice *inv, const char *created)
{
    char date[32];
    const char *when = source_date(date, sizeof(date));
    cairo_t *cr;
    cairo_status_t st;

    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(s);
        errno = EIO;
        return -1;
    }
    cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_TITLE, doc_title(inv));
    cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, PACKAGE_STRING);
    if (when == NULL)
        when = created;
    if (when != NULL)
        cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATE_DATE, when);
    cr = cairo_create(s);
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw(cr, inv, draw(NULL, inv, 0));
    st = cairo_status(cr);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int export_invoice_pdf(const doc_invoice *inv, const char *path)
{
    if (faces() != 0)
        return -1;
    return render(cairo_pdf_surface_create(path, PAGE_W, PAGE_H), inv, NULL);
}

/* A growing buffer cairo writes a PDF into. */
typedef struct pdf_buf {
    char *data;
    size_t len;
    size_t cap;
} pdf_buf;

static cairo_status_t buf_write(void *closure, const unsigned char *data, unsigned int length)
{
    pdf_buf *b = closure;
    char *grown;
    size_t cap;

    if (b->len + length > b->cap) {
        cap = b->cap ? b->cap : 65536;
        while (cap < b->len + length)
            cap *= 2;
        grown = realloc(b->data, cap);
        if (grown == NULL)
            return CAIRO_STATUS_NO_MEMORY;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, length);
    b->len += length;
    return CAIRO_STATUS_SUCCESS;
}

int export_invoice_pdf_mem(const doc_invoice *inv, const char *created, char **out, size_t *len)
{
    pdf_buf b = {NULL, 0, 0};

    *out = NULL;
    *len = 0;
    if (faces() != 0)
        return -1;
    if (render(cairo_pdf_surface_create_for_stream(buf_write, &b, PAGE_W, PAGE_H), inv, created) !=
        0) {
        free(b.data);
        return -1;
    }
    *out = b.data;
    *len = b.len;
    return 0;
}
