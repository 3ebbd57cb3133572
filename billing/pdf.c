/*
 * pdf.c - an invoice as a PDF a customer could receive, drawn with cairo
 * (its PDF surface embeds only the glyphs used: a subset, so a CJK font
 * costs kilobytes per invoice, not megabytes).
 *
 * Two fonts from Debian: DejaVu Sans (fonts-dejavu-core) for Latin text
 * and Droid Sans Fallback (fonts-droid-fallback) for CJK, which has no
 * Latin letters; text is drawn in runs, each in the font that has it.
 * Paths can be changed with BILLING_PDF_FONT and BILLING_PDF_CJK_FONT.
 * The seller block comes from BILLING_PDF_SELLER (lines separated by
 * "\n"), by default the package name. The creation date in the document
 * information is the time of writing, or SOURCE_DATE_EPOCH (seconds since
 * 1970, as reproducible builds set it) when that is set: then a file
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

#include "export.h"

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

static const char *title(const doc_invoice *inv)
{
    if (strcmp(doc_field(inv, "kind"), "credit_note") == 0)
        return "CREDIT NOTE";
    if (strcmp(doc_field(inv, "status"), "draft") == 0)
        return "DRAFT INVOICE (not issued)";
    if (strcmp(doc_field(inv, "status"), "void") == 0)
        return "INVOICE (VOID)";
    return "INVOICE";
}

static void seller_block(cairo_t *cr, double y)
{
    const char *seller = env_or("BILLING_PDF_SELLER", PACKAGE_NAME);
    char line[256];
    const char *p = seller;
    int i;

    for (i = 0; i < 5 && *p != '\0'; i++) {
        size_t n = strcspn(p, "\n");
        snprintf(line, sizeof(line), "%.*s", (int)(n < 255 ? n : 255), p);
        text(cr, MARGIN, y + i * ROW, line, i == 0 ? 11 : 9);
        p += n;
        if (*p == '\n')
            p++;
    }
}

/* Header: title, seller and customer, number, dates. Returns the next y. */
static double header(cairo_t *cr, const doc_invoice *inv)
{
    char buf[512];
    double y = MARGIN + 10;

    text(cr, MARGIN, y, title(inv), 18);
    y += 2 * ROW;
    seller_block(cr, y);
    text(cr, 330, y, "Bill to", 9);
    text(cr, 330, y + ROW, doc_field(inv, "account_name"), 11);
    snprintf(buf, sizeof(buf), "Account %s", doc_field(inv, "account"));
    text(cr, 330, y + 2 * ROW, buf, 9);
    snprintf(buf, sizeof(buf), "Time zone %s, currency %s", doc_field(inv, "time_zone"),
             doc_field(inv, "currency"));
    text(cr, 330, y + 3 * ROW, buf, 9);
    y += 6 * ROW;
    snprintf(buf, sizeof(buf), "Number: %s",
             doc_field(inv, "number")[0] != '\0' ? doc_field(inv, "number") : "(draft)");
    text(cr, MARGIN, y, buf, 10);
    if (doc_field(inv, "corrects")[0] != '\0') {
        snprintf(buf, sizeof(buf), "Credits invoice %s", doc_field(inv, "corrects"));
        text(cr, 330, y, buf, 10);
    }
    y += ROW;
    snprintf(buf, sizeof(buf), "Period: %s (%s to %s)", doc_field(inv, "period"),
             doc_field(inv, "period_start"), doc_field(inv, "period_end"));
    text(cr, MARGIN, y, buf, 9);
    y += ROW;
    if (doc_field(inv, "finalized_at")[0] != '\0') {
        snprintf(buf, sizeof(buf), "Issued: %s", doc_field(inv, "finalized_at"));
        text(cr, MARGIN, y, buf, 9);
        y += ROW;
    }
    if (doc_field(inv, "void_reason")[0] != '\0') {
        /* Cut like the refund's reason: the line must stay on the page. */
        snprintf(buf, sizeof(buf), "Voided: %.300s", doc_field(inv, "void_reason"));
        text(cr, MARGIN, y, buf, 9);
        y += ROW;
    }
    if (doc_field(inv, "refund_method")[0] != '\0') {
        snprintf(buf, sizeof(buf), "Account credit refunded to the payment method (%s), "
                                   "reference %.100s", doc_field(inv, "refund_method"),
                 doc_field(inv, "refund_reference"));
        text(cr, MARGIN, y, buf, 9);
        y += ROW;
        snprintf(buf, sizeof(buf), "Reason: %.300s", doc_field(inv, "refund_reason"));
        text(cr, MARGIN, y, buf, 9);
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

static void rule(cairo_t *cr, double y)
{
    cairo_move_to(cr, MARGIN, y);
    cairo_line_to(cr, PAGE_W - MARGIN, y);
    cairo_set_line_width(cr, 0.5);
    cairo_stroke(cr);
}

static double table_head(cairo_t *cr, double y)
{
    text(cr, X_NO, y, "#", 8);
    text(cr, X_DESC, y, "Description", 8);
    text_right(cr, X_QTY, y, "Quantity", 8);
    text(cr, X_UNIT, y, "Unit", 8);
    text_right(cr, X_PRICE, y, "Unit price", 8);
    text_right(cr, X_AMOUNT, y, "Amount", 8);
    rule(cr, y + 4);
    return y + ROW + 2;
}

/* "gpu RTX4090 cn-east-1, plan x, version v1, adjusts 2026-10" for line @l. */
static void description(const bs_invoice_line *l, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s %s %s %s", l->kind, l->meter, l->model, l->region);

    if (n >= 0 && (size_t)n < size && l->plan[0] != '\0')
        n += snprintf(buf + n, size - (size_t)n, ", plan %s", l->plan);
    if (n >= 0 && (size_t)n < size && l->adjusts_period[0] != '\0')
        snprintf(buf + n, size - (size_t)n, ", for %s", l->adjusts_period);
}

static double line_row(cairo_t *cr, const bs_invoice_line *l, double y)
{
    char buf[512];

    text(cr, X_NO, y, l->line, 8);
    description(l, buf, sizeof(buf));
    text(cr, X_DESC, y, buf, 8);
    if (strcmp(l->quantity_den, "1") == 0)
        snprintf(buf, sizeof(buf), "%.40s", l->quantity);
    else
        snprintf(buf, sizeof(buf), "%.20s/%.20s", l->quantity, l->quantity_den);
    text_right(cr, X_QTY, y, buf, 8);
    text(cr, X_UNIT, y, l->unit, 8);
    text_right(cr, X_PRICE, y, l->unit_price, 8);
    text_right(cr, X_AMOUNT, y, l->amount, 8);
    return y + ROW;
}

static double total_row(cairo_t *cr, double y, const char *label, const char *value,
                        const char *currency, double size)
{
    char buf[128];

    text_right(cr, X_PRICE - 60, y, label, size);
    snprintf(buf, sizeof(buf), "%s %s", value, currency);
    text_right(cr, X_AMOUNT, y, buf, size);
    return y + ROW + 2;
}

/* The totals in reconciliation order (doc_totals, as `billing invoice show` prints them). */
static double totals(cairo_t *cr, const doc_invoice *inv, double y)
{
    const char *cur = doc_field(inv, "currency");
    char label[128];
    char buf[128];
    size_t i;

    rule(cr, y - ROW + 4);
    for (i = 0; i < doc_n_totals; i++) {
        const doc_total *t = &doc_totals[i];
        if (doc_total_shown(inv, t))
            y = total_row(cr, y, doc_total_label(inv, t, label, sizeof(label)),
                          doc_total_text(inv, t, buf, sizeof(buf)), cur,
                          i + 1 == doc_n_totals ? 12 : 9);
    }
    return y;
}

/* Columns of the grants block: label at X_DESC, amounts right-aligned here. */
static const double grant_x[] = {X_DESC, X_QTY, X_PRICE - 60, X_PRICE, X_AMOUNT};

/* Each credit grant: applied, returned and expired here, and what is left of it. */
static double grants(cairo_t *cr, const doc_invoice *inv, double y)
{
    char buf[64];
    size_t c;
    size_t r;

    if (inv->rows->n_grants == 0)
        return y;
    y += ROW;
    text(cr, X_DESC, y, "Credit grants (remaining on this invoice, before what expires)", 9);
    y += ROW;
    for (c = 0; c < export_n_grant_columns; c++) {
        if (c == 0)
            text(cr, grant_x[c], y, export_grant_columns[c].header, 8);
        else
            text_right(cr, grant_x[c], y, export_grant_columns[c].header, 8);
    }
    for (r = 0; r < inv->rows->n_grants; r++) {
        const bs_invoice_grant *g = &inv->rows->grants[r];
        y += ROW;
        for (c = 0; c < export_n_grant_columns; c++) {
            const char *v = export_cell(g, &export_grant_columns[c], buf, sizeof(buf));
            if (c == 0)
                text(cr, grant_x[c], y, v, 8);
            else
                text_right(cr, grant_x[c], y, v, 8);
        }
    }
    return y + ROW;
}

/* Draw the whole invoice, starting new pages as the lines need. */
static void draw(cairo_t *cr, const doc_invoice *inv)
{
    double y = header(cr, inv);
    size_t r;

    y = table_head(cr, y);
    for (r = 0; r < inv->rows->n_lines; r++) {
        if (y > PAGE_H - MARGIN - 6 * ROW) {
            cairo_show_page(cr);
            y = table_head(cr, MARGIN + 10);
        }
        y = line_row(cr, &inv->rows->lines[r], y);
    }
    /* Totals and grants stay together on one page. */
    if (y > PAGE_H - MARGIN - ((double)doc_n_totals + 4 + (double)inv->rows->n_grants) * (ROW + 2)) {
        cairo_show_page(cr);
        y = MARGIN + 10;
    }
    y = totals(cr, inv, y + ROW);
    grants(cr, inv, y);
    cairo_show_page(cr);
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

int export_invoice_pdf(const doc_invoice *inv, const char *path)
{
    char date[32];
    cairo_surface_t *s;
    cairo_t *cr;
    cairo_status_t st;

    if (faces() != 0)
        return -1;
    s = cairo_pdf_surface_create(path, PAGE_W, PAGE_H);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(s);
        errno = EIO;
        return -1;
    }
    cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_TITLE, title(inv));
    cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, PACKAGE_STRING);
    if (source_date(date, sizeof(date)) != NULL)
        cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATE_DATE, date);
    cr = cairo_create(s);
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw(cr, inv);
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
