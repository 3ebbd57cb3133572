/*
 * pdfwrite.c - the small PDF writer of pdfwrite.h.
 *
 * Fonts: each font file is loaded once per process (FreeType for its
 * character map, its TrueType tables kept as bytes). A document's text is
 * shown with CID fonts (Type0, Identity-H) whose glyphs are a subset of a
 * font file, numbered from 1 in the order they were added (0 is .notdef),
 * each with a ToUnicode map so that the text can be extracted. Font F0 is
 * the Latin font's printable ASCII and the en dash: made once, with its
 * font program, widths and map deflated once and copied into each
 * document. F1 (other characters of the Latin font) and F2 (the CJK
 * font) are made per document from the characters it draws, in the order
 * it draws them, so a document depends on its text alone.
 */
#include "config.h"

#include <cairo.h>
#include <errno.h>
#include <ft2build.h>
#include FT_FREETYPE_H
#include FT_TRUETYPE_TABLES_H
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pdfwrite.h"

/*
 * Deflate level of the per-document streams: level 1 makes files 1.5%
 * larger than level 6 and takes a third of the export's CPU off
 * (doc/performance.md, "PDF export written directly").
 */
#define Z_LEVEL 1
/* Longest logo drawn (billing.issuers bounds it to 1 MiB). */
#define LOGO_MAX (1024 * 1024)
/* Logos decoded and kept per process. */
#define LOGOS 8

/* ---------------------------------------------------------------------- */
/* Growing buffers                                                         */
/* ---------------------------------------------------------------------- */

typedef struct buf {
    unsigned char *d;
    size_t len;
    size_t cap;
    int oom; /* an allocation failed: the content is incomplete */
} buf;

static int b_room(buf *b, size_t n)
{
    size_t cap;
    unsigned char *grown;

    if (b->oom)
        return -1;
    if (b->len + n <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
        cap *= 2;
    grown = realloc(b->d, cap);
    if (grown == NULL) {
        b->oom = 1;
        return -1;
    }
    b->d = grown;
    b->cap = cap;
    return 0;
}

static void b_put(buf *b, const void *p, size_t n)
{
    if (n > 0 && b_room(b, n) == 0) {
        memcpy(b->d + b->len, p, n);
        b->len += n;
    }
}

static void b_str(buf *b, const char *s)
{
    b_put(b, s, strlen(s));
}

static void b_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void b_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b_room(b, 256) != 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf((char *)b->d + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (b_room(b, (size_t)n + 1) != 0)
            return;
        va_start(ap, fmt);
        vsnprintf((char *)b->d + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* Unsigned @v in decimal onto @b. */
static void b_uint(buf *b, unsigned long v)
{
    char s[24];
    size_t i = sizeof(s);

    do {
        s[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    b_put(b, s + i, sizeof(s) - i);
}

/* A number of points and a space: at most two decimals, no trailing zeros. */
static void b_num(buf *b, double v)
{
    long c = (long)(v * 100 + (v < 0 ? -0.5 : 0.5));
    unsigned long a = (unsigned long)(c < 0 ? -c : c);
    char frac[4] = {'.', (char)('0' + a % 100 / 10), (char)('0' + a % 10), ' '};

    if (c < 0)
        b_put(b, "-", 1);
    b_uint(b, a / 100);
    if (a % 100 == 0)
        b_put(b, " ", 1);
    else if (a % 10 == 0)
        b_put(b, (const char[]){frac[0], frac[1], ' '}, 3);
    else
        b_put(b, frac, 4);
}

/* A glyph number as four hex digits. */
static void b_hex4(buf *b, unsigned v)
{
    static const char hex[] = "0123456789ABCDEF";
    char s[4] = {hex[v >> 12 & 0xF], hex[v >> 8 & 0xF], hex[v >> 4 & 0xF], hex[v & 0xF]};

    b_put(b, s, 4);
}

static void b_be16(buf *b, unsigned v)
{
    unsigned char x[2] = {(unsigned char)(v >> 8), (unsigned char)v};

    b_put(b, x, 2);
}

static void b_be32(buf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};

    b_put(b, x, 4);
}

static unsigned be16(const unsigned char *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

/* @n bytes at @p deflated at @level onto @out. */
static void b_deflate(buf *out, const void *p, size_t n, int level)
{
    uLongf zn = compressBound((uLong)n);

    if (b_room(out, zn) != 0)
        return;
    if (compress2(out->d + out->len, &zn, p, (uLong)n, level) != Z_OK) {
        out->oom = 1;
        return;
    }
    out->len += zn;
}

/* ---------------------------------------------------------------------- */
/* Font files                                                              */
/* ---------------------------------------------------------------------- */

/* The TrueType tables a subset keeps, in the order of their tags. */
enum { T_CVT, T_FPGM, T_GLYF, T_HEAD, T_HHEA, T_HMTX, T_LOCA, T_MAXP, T_PREP, N_TABLES };
static const char tags[N_TABLES][5] = {"cvt ", "fpgm", "glyf", "head", "hhea",
                                       "hmtx", "loca", "maxp", "prep"};

typedef struct font_src {
    FT_Face face; /* its character map; used under fonts_lock */
    unsigned char *t[N_TABLES];
    size_t len[N_TABLES];
    unsigned upem;
    unsigned n_glyphs;
    unsigned n_hmetrics;
    int long_loca;
    char name[64]; /* PostScript name */
    int bbox[4];   /* in thousandths of an em */
    int ascent;
    int descent;
} font_src;

static pthread_mutex_t fonts_lock = PTHREAD_MUTEX_INITIALIZER;
static FT_Library ft;
static int fonts_state; /* 0 not tried, 1 loaded, -1 failed */
static char fonts_why[600];
static font_src latin;
static font_src cjk;

/* The glyph of @cp in @f (0: none). */
static unsigned src_gid(font_src *f, unsigned cp)
{
    unsigned g;

    pthread_mutex_lock(&fonts_lock);
    g = FT_Get_Char_Index(f->face, cp);
    pthread_mutex_unlock(&fonts_lock);
    return g < f->n_glyphs ? g : 0;
}

/* Advance of glyph @g in font units. */
static unsigned src_advance(const font_src *f, unsigned g)
{
    unsigned i = g < f->n_hmetrics ? g : f->n_hmetrics - 1;

    return be16(f->t[T_HMTX] + 4 * i);
}

/* The bytes of glyph @g in glyf: *@len 0 for an empty glyph. */
static const unsigned char *src_glyph(const font_src *f, unsigned g, size_t *len)
{
    const unsigned char *loca = f->t[T_LOCA];
    size_t a, b;

    if (f->long_loca) {
        a = be32(loca + 4 * g);
        b = be32(loca + 4 * g + 4);
    } else {
        a = 2 * (size_t)be16(loca + 2 * g);
        b = 2 * (size_t)be16(loca + 2 * g + 2);
    }
    if (b <= a || b > f->len[T_GLYF]) {
        *len = 0;
        return NULL;
    }
    *len = b - a;
    return f->t[T_GLYF] + a;
}

static int load_src(font_src *f, const char *path)
{
    size_t i;
    FT_ULong n;

    if (FT_New_Face(ft, path, 0, &f->face) != 0)
        return -1;
    if (!FT_IS_SFNT(f->face) || f->face->units_per_EM == 0)
        return -1;
    for (i = 0; i < N_TABLES; i++) {
        FT_ULong tag = FT_MAKE_TAG(tags[i][0], tags[i][1], tags[i][2], tags[i][3]);
        n = 0;
        if (FT_Load_Sfnt_Table(f->face, tag, 0, NULL, &n) != 0 || n == 0)
            continue;
        if ((f->t[i] = malloc(n)) == NULL || FT_Load_Sfnt_Table(f->face, tag, 0, f->t[i], &n) != 0)
            return -1;
        f->len[i] = n;
    }
    /* A TrueType-outline font with its tables whole. */
    if (f->len[T_GLYF] == 0 || f->len[T_LOCA] == 0 || f->len[T_HEAD] < 54 || f->len[T_HHEA] < 36 ||
        f->len[T_MAXP] < 6 || f->len[T_HMTX] < 4)
        return -1;
    f->upem = f->face->units_per_EM;
    f->n_glyphs = be16(f->t[T_MAXP] + 4);
    f->n_hmetrics = be16(f->t[T_HHEA] + 34);
    f->long_loca = be16(f->t[T_HEAD] + 50) != 0;
    if (f->n_glyphs == 0 || f->n_hmetrics == 0 || f->n_hmetrics > f->n_glyphs ||
        f->len[T_HMTX] < 4 * (size_t)f->n_hmetrics ||
        f->len[T_LOCA] < (f->long_loca ? 4 : 2) * ((size_t)f->n_glyphs + 1))
        return -1;
    snprintf(f->name, sizeof(f->name), "%s",
             FT_Get_Postscript_Name(f->face) ? FT_Get_Postscript_Name(f->face) : "Font");
    /* A name is a PDF name: keep it to letters, digits and '-'. */
    for (i = 0; f->name[i] != '\0'; i++)
        if (!((f->name[i] >= 'A' && f->name[i] <= 'Z') ||
              (f->name[i] >= 'a' && f->name[i] <= 'z') ||
              (f->name[i] >= '0' && f->name[i] <= '9') || f->name[i] == '-'))
            f->name[i] = '-';
    f->bbox[0] = (int)(f->face->bbox.xMin * 1000 / (long)f->upem);
    f->bbox[1] = (int)(f->face->bbox.yMin * 1000 / (long)f->upem);
    f->bbox[2] = (int)(f->face->bbox.xMax * 1000 / (long)f->upem);
    f->bbox[3] = (int)(f->face->bbox.yMax * 1000 / (long)f->upem);
    f->ascent = f->face->ascender * 1000 / (int)f->upem;
    f->descent = f->face->descender * 1000 / (int)f->upem;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Subsets                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct subset {
    font_src *src;
    size_t n;
    size_t cap;
    unsigned *gid; /* glyph in the font file of each glyph of the subset */
    unsigned *cp;  /* its character (0: .notdef or a part of a composite) */
    int oom;
} subset;

static void subset_init(subset *s, font_src *src)
{
    memset(s, 0, sizeof(*s));
    s->src = src;
}

static void subset_free(subset *s)
{
    free(s->gid);
    free(s->cp);
    memset(s, 0, sizeof(*s));
}

/* Append glyph @g for character @cp; returns its number in the subset. */
static unsigned subset_append(subset *s, unsigned g, unsigned cp)
{
    if (s->n == 0 && !s->oom && (g != 0 || cp != 0))
        subset_append(s, 0, 0);
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        unsigned *a = realloc(s->gid, cap * sizeof(*a));
        unsigned *c = a != NULL ? realloc(s->cp, cap * sizeof(*c)) : NULL;
        if (a != NULL)
            s->gid = a;
        if (c != NULL)
            s->cp = c;
        if (a == NULL || c == NULL || cap > 0xFFFF) {
            s->oom = 1;
            return 0;
        }
        s->cap = cap;
    }
    s->gid[s->n] = g;
    s->cp[s->n] = cp;
    return (unsigned)s->n++;
}

/* The number of character @cp in @s, added when new (0 when @s is full). */
static unsigned subset_char(subset *s, unsigned cp)
{
    size_t i;

    for (i = 1; i < s->n; i++)
        if (s->cp[i] == cp)
            return (unsigned)i;
    return subset_append(s, src_gid(s->src, cp), cp);
}

/* The first glyph of @s that is glyph @g of the font file (0: none). */
static unsigned subset_find(const subset *s, unsigned g)
{
    size_t i;

    for (i = 0; i < s->n; i++)
        if (s->gid[i] == g)
            return (unsigned)i;
    return 0;
}

/* The flags of a composite glyph's part: bytes of its arguments and transform. */
static size_t part_size(unsigned flags)
{
    size_t n = 4 + (flags & 0x1 ? 4 : 2);

    if (flags & 0x8)
        n += 2;
    else if (flags & 0x40)
        n += 4;
    else if (flags & 0x80)
        n += 8;
    return n;
}

/*
 * Visit the parts of composite glyph @p (@len bytes): @fn with the offset
 * of each part's glyph index. Stops at a malformed glyph.
 */
static void parts(const unsigned char *p, size_t len, void (*fn)(void *, size_t), void *arg)
{
    size_t at = 10;
    unsigned flags;

    if (len < 10 || (int16_t)be16(p) >= 0)
        return;
    do {
        if (at + 4 > len)
            return;
        flags = be16(p + at);
        if (at + part_size(flags) > len)
            return;
        fn(arg, at + 2);
        at += part_size(flags);
    } while (flags & 0x20);
}

typedef struct part_ctx {
    subset *s;
    const unsigned char *p;
    unsigned char *out;
} part_ctx;

static void add_part(void *arg, size_t at)
{
    part_ctx *c = arg;
    unsigned g = be16(c->p + at);

    if (g < c->s->src->n_glyphs && subset_find(c->s, g) == 0 && g != 0)
        subset_append(c->s, g, 0);
}

static void renumber_part(void *arg, size_t at)
{
    part_ctx *c = arg;

    put_be16(c->out + at, subset_find(c->s, be16(c->p + at)));
}

/* Add the parts of every composite glyph of @s (and theirs). */
static void subset_close(subset *s)
{
    size_t i;

    for (i = 0; i < s->n; i++) {
        size_t len;
        const unsigned char *p = src_glyph(s->src, s->gid[i], &len);
        part_ctx c = {s, p, NULL};
        if (p != NULL)
            parts(p, len, add_part, &c);
    }
}

static uint32_t checksum(const unsigned char *p, size_t n)
{
    uint32_t sum = 0;
    size_t i;

    for (i = 0; i + 4 <= n; i += 4)
        sum += be32(p + i);
    if (i < n) {
        unsigned char last[4] = {0, 0, 0, 0};
        memcpy(last, p + i, n - i);
        sum += be32(last);
    }
    return sum;
}

/* The TrueType font program of @s (closed) onto @out. */
static void subset_font(const subset *s, buf *out)
{
    const font_src *f = s->src;
    buf t[N_TABLES];
    size_t i, at, n_tables = 0;
    unsigned search = 1, log2 = 0;

    memset(t, 0, sizeof(t));
    for (i = 0; i < s->n; i++) {
        size_t len;
        const unsigned char *p = src_glyph(f, s->gid[i], &len);
        unsigned adv = src_advance(f, s->gid[i]);
        unsigned g = s->gid[i];
        unsigned lsb =
            g < f->n_hmetrics ? be16(f->t[T_HMTX] + 4 * g + 2)
            : f->len[T_HMTX] >= 4 * (size_t)f->n_hmetrics + 2 * ((size_t)g - f->n_hmetrics) + 2
                ? be16(f->t[T_HMTX] + 4 * f->n_hmetrics + 2 * (g - f->n_hmetrics))
                : 0;
        b_be32(&t[T_LOCA], (uint32_t)t[T_GLYF].len);
        if (p != NULL) {
            part_ctx c = {(subset *)s, p, NULL};
            size_t start = t[T_GLYF].len;
            b_put(&t[T_GLYF], p, len);
            if (!t[T_GLYF].oom) {
                c.out = t[T_GLYF].d + start;
                parts(p, len, renumber_part, &c);
            }
            while (t[T_GLYF].len % 4 != 0)
                b_put(&t[T_GLYF], "", 1);
        }
        b_be16(&t[T_HMTX], adv);
        b_be16(&t[T_HMTX], lsb);
    }
    b_be32(&t[T_LOCA], (uint32_t)t[T_GLYF].len);
    b_put(&t[T_HEAD], f->t[T_HEAD], f->len[T_HEAD]);
    b_put(&t[T_HHEA], f->t[T_HHEA], f->len[T_HHEA]);
    b_put(&t[T_MAXP], f->t[T_MAXP], f->len[T_MAXP]);
    b_put(&t[T_CVT], f->t[T_CVT], f->len[T_CVT]);
    b_put(&t[T_FPGM], f->t[T_FPGM], f->len[T_FPGM]);
    b_put(&t[T_PREP], f->t[T_PREP], f->len[T_PREP]);
    if (t[T_HEAD].oom || t[T_HHEA].oom || t[T_MAXP].oom) {
        out->oom = 1;
        goto done;
    }
    memset(t[T_HEAD].d + 8, 0, 4); /* checkSumAdjustment */
    put_be16(t[T_HEAD].d + 50, 1); /* long loca */
    put_be16(t[T_HHEA].d + 34, (unsigned)s->n);
    put_be16(t[T_MAXP].d + 4, (unsigned)s->n);
    for (i = 0; i < N_TABLES; i++) {
        if (t[i].oom)
            out->oom = 1;
        n_tables += t[i].len > 0;
    }
    while (search * 2 <= n_tables) {
        search *= 2;
        log2++;
    }
    b_be32(out, 0x00010000);
    b_be16(out, (unsigned)n_tables);
    b_be16(out, search * 16);
    b_be16(out, log2);
    b_be16(out, (unsigned)(n_tables * 16 - search * 16));
    at = 12 + 16 * n_tables;
    for (i = 0; i < N_TABLES; i++) {
        if (t[i].len == 0)
            continue;
        b_put(out, tags[i], 4);
        b_be32(out, checksum(t[i].d, t[i].len));
        b_be32(out, (uint32_t)at);
        b_be32(out, (uint32_t)t[i].len);
        at += (t[i].len + 3) / 4 * 4;
    }
    for (i = 0; i < N_TABLES; i++) {
        b_put(out, t[i].d, t[i].len);
        while (out->len % 4 != 0)
            b_put(out, "", 1);
    }
done:
    for (i = 0; i < N_TABLES; i++)
        free(t[i].d);
}

/* A code point as UTF-16BE hex digits. */
static void b_utf16(buf *b, unsigned cp)
{
    if (cp >= 0x10000 && cp <= 0x10FFFF) {
        cp -= 0x10000;
        b_printf(b, "%04X%04X", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
        b_printf(b, "%04X", cp <= 0xFFFF ? cp : 0xFFFD);
    }
}

/* The ToUnicode CMap of @s onto @out. */
static void subset_cmap(const subset *s, buf *out)
{
    size_t i, n = 0, done = 0;

    for (i = 1; i < s->n; i++)
        n += s->cp[i] != 0;
    b_str(out, "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
               "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
               "/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
               "1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n");
    for (i = 1; i < s->n; i++) {
        if (s->cp[i] == 0)
            continue;
        if (done % 100 == 0)
            b_printf(out, "%zu beginbfchar\n", n - done < 100 ? n - done : 100);
        b_printf(out, "<%04zX> <", i);
        b_utf16(out, s->cp[i]);
        b_str(out, ">\n");
        done++;
        if (done % 100 == 0 || done == n)
            b_str(out, "endbfchar\n");
    }
    b_str(out, "endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n");
}

/*
 * The parts of a subset font in a document, made once for F0 and per
 * document for F1 and F2: its name, the CIDFont's /W array, and the font
 * program and ToUnicode map as deflated streams.
 */
typedef struct font_parts {
    char name[80];
    buf widths;
    buf file; /* deflated */
    size_t file_len;
    buf cmap; /* deflated */
    const font_src *src;
} font_parts;

static void parts_free(font_parts *p)
{
    free(p->widths.d);
    free(p->file.d);
    free(p->cmap.d);
    memset(p, 0, sizeof(*p));
}

/* Make the parts of @s (closed here) at deflate @level. Returns 0, or -1 out of memory. */
static int parts_make(subset *s, font_parts *p, int level)
{
    buf raw = {NULL, 0, 0, 0};
    uint32_t h = 2166136261u;
    size_t i;
    char tag[7];

    memset(p, 0, sizeof(*p));
    p->src = s->src;
    subset_close(s);
    for (i = 0; i < s->n; i++)
        h = (h ^ s->gid[i]) * 16777619u;
    for (i = 0; i < 6; i++) {
        tag[i] = (char)('A' + h % 26);
        h /= 26;
    }
    tag[6] = '\0';
    snprintf(p->name, sizeof(p->name), "%s+%s", tag, s->src->name);
    b_str(&p->widths, "[0 [");
    for (i = 0; i < s->n; i++)
        b_num(&p->widths, src_advance(s->src, s->gid[i]) * 1000.0 / s->src->upem);
    b_str(&p->widths, "]]");
    subset_font(s, &raw);
    p->file_len = raw.len;
    b_deflate(&p->file, raw.d, raw.len, level);
    raw.len = 0;
    subset_cmap(s, &raw);
    b_deflate(&p->cmap, raw.d, raw.len, level);
    if (raw.oom)
        p->cmap.oom = 1;
    free(raw.d);
    if (s->oom || p->widths.oom || p->file.oom || p->cmap.oom) {
        parts_free(p);
        return -1;
    }
    return 0;
}

/* F0: the Latin font's printable ASCII and the en dash, made once. */
static subset base;
static font_parts base_parts;
static unsigned base_cid[128];
static unsigned base_adv[128];
static unsigned base_dash; /* the en dash's number in F0 */
#define EN_DASH 0x2013

static int fonts_load(const char *latin_path, const char *cjk_path)
{
    unsigned cp;

    if (FT_Init_FreeType(&ft) != 0) {
        snprintf(fonts_why, sizeof(fonts_why), "cannot start FreeType");
        return -1;
    }
    if (load_src(&latin, latin_path) != 0) {
        snprintf(fonts_why, sizeof(fonts_why), "%s", latin_path);
        return -1;
    }
    if (load_src(&cjk, cjk_path) != 0) {
        snprintf(fonts_why, sizeof(fonts_why), "%s", cjk_path);
        return -1;
    }
    subset_init(&base, &latin);
    for (cp = 0x20; cp < 0x7F; cp++) {
        unsigned g = (unsigned)FT_Get_Char_Index(latin.face, cp);
        base_cid[cp] = subset_append(&base, g < latin.n_glyphs ? g : 0, cp);
        base_adv[cp] = src_advance(&latin, g < latin.n_glyphs ? g : 0);
    }
    cp = (unsigned)FT_Get_Char_Index(latin.face, EN_DASH);
    base_dash = subset_append(&base, cp < latin.n_glyphs ? cp : 0, EN_DASH);
    if (parts_make(&base, &base_parts, 9) != 0) {
        snprintf(fonts_why, sizeof(fonts_why), "out of memory");
        return -1;
    }
    return 0;
}

int pw_fonts(const char *latin_path, const char *cjk_path, char *why, size_t size)
{
    int rc;

    pthread_mutex_lock(&fonts_lock);
    if (fonts_state == 0)
        fonts_state = fonts_load(latin_path, cjk_path) == 0 ? 1 : -1;
    rc = fonts_state == 1 ? 0 : -1;
    pthread_mutex_unlock(&fonts_lock);
    if (rc != 0 && why != NULL)
        snprintf(why, size, "%s", fonts_why);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Logos                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct logo {
    char *hex;
    int ok; /* 0: not a PNG cairo can read */
    int w, h;
    int gray;  /* rgb holds one gray byte a pixel */
    buf rgb;   /* deflated */
    buf alpha; /* deflated; empty when opaque */
} logo;

static pthread_mutex_t logos_lock = PTHREAD_MUTEX_INITIALIZER;
static logo logos[LOGOS];
static size_t logos_n;

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

/* Decode the PNG of @hex into @l: its pixels as RGB and alpha planes. */
static void logo_decode(logo *l, const char *hex)
{
    size_t n = strlen(hex) / 2;
    unsigned char *bytes;
    unsigned char *rgb = NULL;
    unsigned char *alpha = NULL;
    cairo_surface_t *img;
    png_src src;
    size_t i;
    int x, y, opaque = 1;
    size_t px_n;

    if (n == 0 || n > LOGO_MAX || (bytes = malloc(n)) == NULL)
        return;
    for (i = 0; i < n; i++) {
        int hi = hex_digit(hex[2 * i]);
        int lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            break;
        bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    src.p = bytes;
    src.left = i;
    img = cairo_image_surface_create_from_png_stream(png_read, &src);
    free(bytes);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS ||
        cairo_image_surface_get_width(img) <= 0 || cairo_image_surface_get_height(img) <= 0)
        goto done;
    cairo_surface_flush(img);
    l->w = cairo_image_surface_get_width(img);
    l->h = cairo_image_surface_get_height(img);
    rgb = malloc((size_t)l->w * (size_t)l->h * 3);
    alpha = malloc((size_t)l->w * (size_t)l->h);
    if (rgb == NULL || alpha == NULL)
        goto done;
    for (y = 0; y < l->h; y++) {
        const unsigned char *row = cairo_image_surface_get_data(img) +
                                   (size_t)y * (size_t)cairo_image_surface_get_stride(img);
        for (x = 0; x < l->w; x++) {
            uint32_t px;
            unsigned a, c;
            size_t at = (size_t)y * (size_t)l->w + (size_t)x;
            memcpy(&px, row + 4 * (size_t)x, 4);
            a = px >> 24;
            alpha[at] = (unsigned char)a;
            opaque &= a == 255;
            for (c = 0; c < 3; c++) {
                unsigned v = (px >> (16 - 8 * c)) & 0xFF;
                rgb[3 * at + c] = (unsigned char)(a == 0 ? 0 : (v * 255 + a / 2) / a);
            }
        }
    }
    /* A gray picture as gray (as cairo wrote it): a third of the bytes. */
    px_n = (size_t)l->w * (size_t)l->h;
    l->gray = 1;
    for (i = 0; i < px_n && l->gray; i++)
        l->gray = rgb[3 * i] == rgb[3 * i + 1] && rgb[3 * i] == rgb[3 * i + 2];
    for (i = 0; i < px_n && l->gray; i++)
        rgb[i] = rgb[3 * i];
    b_deflate(&l->rgb, rgb, px_n * (l->gray ? 1 : 3), 9);
    if (!opaque)
        b_deflate(&l->alpha, alpha, (size_t)l->w * (size_t)l->h, 9);
    l->ok = !l->rgb.oom && !l->alpha.oom;
done:
    free(rgb);
    free(alpha);
    cairo_surface_destroy(img);
}

static void logo_free(logo *l)
{
    free(l->hex);
    free(l->rgb.d);
    free(l->alpha.d);
    memset(l, 0, sizeof(*l));
}

/*
 * The logo of @hex: kept once decoded, for the first LOGOS logos of the
 * process (never dropped, as documents being written point to them);
 * past those, decoded into @own (the caller frees it with logo_free).
 * NULL: out of memory.
 */
static const logo *logo_get(const char *hex, logo *own)
{
    logo *l = NULL;
    size_t i;

    pthread_mutex_lock(&logos_lock);
    for (i = 0; i < logos_n && l == NULL; i++)
        if (strcmp(logos[i].hex, hex) == 0)
            l = &logos[i];
    if (l == NULL) {
        l = logos_n < LOGOS ? &logos[logos_n] : own;
        memset(l, 0, sizeof(*l));
        l->hex = strdup(hex);
        if (l->hex == NULL) {
            l = NULL;
        } else {
            logo_decode(l, hex);
            logos_n += l != own;
        }
    }
    pthread_mutex_unlock(&logos_lock);
    return l;
}

/* ---------------------------------------------------------------------- */
/* Documents                                                               */
/* ---------------------------------------------------------------------- */

struct pw_doc {
    buf out;      /* the file so far */
    size_t *off;  /* offset of each object, from number 1 */
    size_t n_obj; /* objects numbered */
    size_t cap_obj;
    double w, h;
    buf page;  /* the content of the page being drawn */
    int drawn; /* something is on the page */
    unsigned *pages;
    size_t n_pages;
    size_t cap_pages;
    unsigned pages_no; /* the page tree */
    unsigned res_no;   /* the resources every page shares */
    subset more;       /* F1: the Latin font's other characters */
    subset cjk;        /* F2 */
    const logo *logo;  /* Im0 */
    logo own;          /* Im0 when not kept per process */
    char title[600];
    char creator[128];
    char created[64];
    int oom;
};

static unsigned obj_new(pw_doc *d)
{
    if (d->n_obj == d->cap_obj) {
        size_t cap = d->cap_obj ? 2 * d->cap_obj : 32;
        size_t *a = realloc(d->off, cap * sizeof(*a));
        if (a == NULL) {
            d->oom = 1;
            return 1;
        }
        d->off = a;
        d->cap_obj = cap;
    }
    d->off[d->n_obj] = 0;
    return (unsigned)++d->n_obj;
}

static void obj_begin(pw_doc *d, unsigned no)
{
    d->off[no - 1] = d->out.len;
    b_printf(&d->out, "%u 0 obj\n", no);
}

/* Object @no: a stream of the (deflated unless @raw) @data with @dict's entries. */
static void obj_stream(pw_doc *d, unsigned no, const char *dict, const void *data, size_t n,
                       int deflated)
{
    obj_begin(d, no);
    b_printf(&d->out, "<< /Length %zu%s%s >>\nstream\n", n, deflated ? " /Filter /FlateDecode" : "",
             dict);
    b_put(&d->out, data, n);
    b_str(&d->out, "\nendstream\nendobj\n");
}

pw_doc *pw_begin(double w, double h, const char *title, const char *creator, const char *created)
{
    pw_doc *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->w = w;
    d->h = h;
    snprintf(d->title, sizeof(d->title), "%s", title);
    snprintf(d->creator, sizeof(d->creator), "%s", creator);
    snprintf(d->created, sizeof(d->created), "%s", created != NULL ? created : "");
    subset_init(&d->more, &latin);
    subset_init(&d->cjk, &cjk);
    b_str(&d->out, "%PDF-1.5\n%\xE2\xE3\xCF\xD3\n");
    d->pages_no = obj_new(d);
    d->res_no = obj_new(d);
    return d;
}

unsigned pw_decode(const unsigned char *s, size_t *len)
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
 * Character @cp: its font (0, 1, 2), its number there (*@cid; with @d
 * NULL, 0 for F1 and F2, which are per document) and its advance in
 * thousandths of an em (*@adv).
 */
static int glyph(pw_doc *d, unsigned cp, unsigned *cid, double *adv)
{
    font_src *f;
    unsigned g;

    if (cp < 0x7F && cp >= 0x20) {
        *cid = base_cid[cp];
        *adv = base_adv[cp] * 1000.0 / latin.upem;
        return 0;
    }
    if (cp == EN_DASH) {
        *cid = base_dash;
        *adv = src_advance(&latin, base.gid[*cid]) * 1000.0 / latin.upem;
        return 0;
    }
    f = cp >= PW_CJK_FIRST ? &cjk : &latin;
    if (d != NULL) {
        subset *s = cp >= PW_CJK_FIRST ? &d->cjk : &d->more;
        *cid = subset_char(s, cp);
        g = s->n > *cid ? s->gid[*cid] : 0;
    } else {
        *cid = 0;
        g = src_gid(f, cp);
    }
    *adv = src_advance(f, g) * 1000.0 / f->upem;
    return cp >= PW_CJK_FIRST ? 2 : 1;
}

double pw_text(pw_doc *d, double x, double y, const char *s, double size)
{
    const unsigned char *p = (const unsigned char *)s;
    double w = 0;
    int font = -1;

    while (*p != '\0') {
        size_t len;
        unsigned cp = pw_decode(p, &len);
        unsigned cid;
        double adv;
        int f = glyph(d, cp, &cid, &adv);
        if (d != NULL) {
            if (f != font) {
                if (font >= 0)
                    b_str(&d->page, "> Tj ET\n");
                b_str(&d->page, f == 0 ? "BT /F0 " : f == 1 ? "BT /F1 " : "BT /F2 ");
                b_num(&d->page, size);
                b_str(&d->page, "Tf ");
                b_num(&d->page, x + w);
                b_num(&d->page, d->h - y);
                b_str(&d->page, "Td <");
                font = f;
            }
            b_hex4(&d->page, cid);
        }
        w += adv * size / 1000;
        p += len;
    }
    if (font >= 0) {
        b_str(&d->page, "> Tj ET\n");
        d->drawn = 1;
    }
    return w;
}

double pw_width(const char *s, double size)
{
    return pw_text(NULL, 0, 0, s, size);
}

void pw_rgb(pw_doc *d, double r, double g, double b)
{
    b_num(&d->page, r);
    b_num(&d->page, g);
    b_num(&d->page, b);
    b_str(&d->page, "rg\n");
}

void pw_rule(pw_doc *d, double x0, double y0, double x1, double y1, double width)
{
    b_num(&d->page, width);
    b_str(&d->page, "w ");
    b_num(&d->page, x0);
    b_num(&d->page, d->h - y0);
    b_str(&d->page, "m ");
    b_num(&d->page, x1);
    b_num(&d->page, d->h - y1);
    b_str(&d->page, "l S\n");
    d->drawn = 1;
}

int pw_png_size(pw_doc *d, const char *hex, int *w, int *h)
{
    const logo *l;

    logo_free(&d->own);
    d->logo = NULL;
    l = logo_get(hex, &d->own);
    if (l == NULL || !l->ok)
        return -1;
    d->logo = l;
    *w = l->w;
    *h = l->h;
    return 0;
}

void pw_png(pw_doc *d, double x, double y, double w, double h)
{
    if (d->logo == NULL)
        return;
    b_str(&d->page, "q ");
    b_num(&d->page, w);
    b_str(&d->page, "0 0 ");
    b_num(&d->page, h);
    b_num(&d->page, x);
    b_num(&d->page, d->h - y - h);
    b_str(&d->page, "cm /Im0 Do Q\n");
    d->drawn = 1;
}

void pw_page(pw_doc *d)
{
    unsigned page, content;
    char dict[64];

    if (d->n_pages == d->cap_pages) {
        size_t cap = d->cap_pages ? 2 * d->cap_pages : 8;
        unsigned *a = realloc(d->pages, cap * sizeof(*a));
        if (a == NULL) {
            d->oom = 1;
            return;
        }
        d->pages = a;
        d->cap_pages = cap;
    }
    page = obj_new(d);
    content = obj_new(d);
    d->pages[d->n_pages++] = page;
    obj_begin(d, page);
    b_printf(&d->out, "<< /Type /Page /Parent %u 0 R /MediaBox [0 0 ", d->pages_no);
    b_num(&d->out, d->w);
    b_num(&d->out, d->h);
    b_printf(&d->out, "] /Contents %u 0 R /Resources %u 0 R >>\nendobj\n", content, d->res_no);
    d->off[content - 1] = d->out.len;
    b_printf(&d->out, "%u 0 obj\n", content);
    /* The length follows the stream, as an indirect object would cost one more. */
    {
        size_t at;
        b_str(&d->out, "<< /Length ");
        at = d->out.len;
        b_str(&d->out, "          /Filter /FlateDecode >>\nstream\n");
        {
            size_t start = d->out.len;
            size_t n;
            b_deflate(&d->out, d->page.d, d->page.len, Z_LEVEL);
            n = d->out.len - start;
            if (!d->out.oom) {
                snprintf(dict, sizeof(dict), "%-10zu", n);
                memcpy(d->out.d + at, dict, 10);
            }
        }
        b_str(&d->out, "\nendstream\nendobj\n");
    }
    if (d->page.oom)
        d->oom = 1;
    d->page.len = 0;
    d->drawn = 0;
}

/* The objects of font @p (name /F@no in the resources); returns the font's number. */
static unsigned font_objects(pw_doc *d, const font_parts *p)
{
    unsigned type0 = obj_new(d), cid = obj_new(d), desc = obj_new(d), file = obj_new(d),
             cmap = obj_new(d);
    const font_src *f = p->src;
    char dict[64];

    obj_begin(d, type0);
    b_printf(&d->out,
             "<< /Type /Font /Subtype /Type0 /BaseFont /%s /Encoding /Identity-H "
             "/DescendantFonts [%u 0 R] /ToUnicode %u 0 R >>\nendobj\n",
             p->name, cid, cmap);
    obj_begin(d, cid);
    b_printf(&d->out,
             "<< /Type /Font /Subtype /CIDFontType2 /BaseFont /%s /CIDSystemInfo << /Registry "
             "(Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor %u 0 R "
             "/CIDToGIDMap /Identity /W ",
             p->name, desc);
    b_put(&d->out, p->widths.d, p->widths.len);
    b_str(&d->out, " >>\nendobj\n");
    obj_begin(d, desc);
    b_printf(&d->out,
             "<< /Type /FontDescriptor /FontName /%s /Flags 4 /FontBBox [%d %d %d %d] "
             "/ItalicAngle 0 /Ascent %d /Descent %d /CapHeight %d /StemV 80 /FontFile2 %u 0 R "
             ">>\nendobj\n",
             p->name, f->bbox[0], f->bbox[1], f->bbox[2], f->bbox[3], f->ascent, f->descent,
             f->ascent, file);
    snprintf(dict, sizeof(dict), " /Length1 %zu", p->file_len);
    obj_stream(d, file, dict, p->file.d, p->file.len, 1);
    obj_stream(d, cmap, "", p->cmap.d, p->cmap.len, 1);
    return type0;
}

/* A PDF text string: UTF-16BE in hex, with its byte order mark. */
static void b_text(buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    b_str(b, "<FEFF");
    while (*p != '\0') {
        size_t len;
        b_utf16(b, pw_decode(p, &len));
        p += len;
    }
    b_str(b, ">");
}

/*
 * ISO 8601 "2026-02-01T00:00:00Z" (or "+08", "+08:00") as a PDF date
 * "D:20260201000000Z" in @buf; "" when it is not of that form.
 */
static void pdf_date(const char *iso, char *date, size_t size)
{
    const char *z = iso + 19;

    date[0] = '\0';
    if (strlen(iso) < 19 || iso[4] != '-' || iso[7] != '-' || iso[10] != 'T' || iso[13] != ':' ||
        iso[16] != ':')
        return;
    if (*z == 'Z' || *z == '\0')
        snprintf(date, size, "D:%.4s%.2s%.2s%.2s%.2s%.2sZ", iso, iso + 5, iso + 8, iso + 11,
                 iso + 14, iso + 17);
    else if ((*z == '+' || *z == '-') && strlen(z) >= 3)
        snprintf(date, size, "D:%.4s%.2s%.2s%.2s%.2s%.2s%c%.2s'%.2s'", iso, iso + 5, iso + 8,
                 iso + 11, iso + 14, iso + 17, *z, z + 1, strlen(z) >= 6 ? z + 4 : "00");
}

int pw_end(pw_doc *d, char **out, size_t *len)
{
    unsigned fonts[3] = {0, 0, 0};
    unsigned rgb = 0, alpha = 0, info, root;
    font_parts more, cjkp;
    size_t i, xref;
    char date[40];
    char dict[256];
    int rc = -1;

    memset(&more, 0, sizeof(more));
    memset(&cjkp, 0, sizeof(cjkp));
    *out = NULL;
    *len = 0;
    if (d->drawn || d->n_pages == 0)
        pw_page(d);
    fonts[0] = font_objects(d, &base_parts);
    if (d->more.n > 0) {
        if (parts_make(&d->more, &more, Z_LEVEL) != 0)
            d->oom = 1;
        else
            fonts[1] = font_objects(d, &more);
    }
    if (d->cjk.n > 0) {
        if (parts_make(&d->cjk, &cjkp, Z_LEVEL) != 0)
            d->oom = 1;
        else
            fonts[2] = font_objects(d, &cjkp);
    }
    if (d->logo != NULL) {
        rgb = obj_new(d);
        if (d->logo->alpha.len > 0) {
            alpha = obj_new(d);
            snprintf(dict, sizeof(dict),
                     " /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace "
                     "/DeviceGray /BitsPerComponent 8",
                     d->logo->w, d->logo->h);
            obj_stream(d, alpha, dict, d->logo->alpha.d, d->logo->alpha.len, 1);
        }
        snprintf(dict, sizeof(dict),
                 " /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /Device%s "
                 "/BitsPerComponent 8",
                 d->logo->w, d->logo->h, d->logo->gray ? "Gray" : "RGB");
        if (alpha != 0) {
            char with[320];
            snprintf(with, sizeof(with), "%s /SMask %u 0 R", dict, alpha);
            obj_stream(d, rgb, with, d->logo->rgb.d, d->logo->rgb.len, 1);
        } else {
            obj_stream(d, rgb, dict, d->logo->rgb.d, d->logo->rgb.len, 1);
        }
    }
    obj_begin(d, d->res_no);
    b_str(&d->out, "<< /ProcSet [/PDF /Text /ImageC] /Font <<");
    for (i = 0; i < 3; i++)
        if (fonts[i] != 0)
            b_printf(&d->out, " /F%zu %u 0 R", i, fonts[i]);
    b_str(&d->out, " >>");
    if (rgb != 0)
        b_printf(&d->out, " /XObject << /Im0 %u 0 R >>", rgb);
    b_str(&d->out, " >>\nendobj\n");
    obj_begin(d, d->pages_no);
    b_str(&d->out, "<< /Type /Pages /Kids [");
    for (i = 0; i < d->n_pages; i++)
        b_printf(&d->out, "%s%u 0 R", i ? " " : "", d->pages[i]);
    b_printf(&d->out, "] /Count %zu >>\nendobj\n", d->n_pages);
    info = obj_new(d);
    obj_begin(d, info);
    b_str(&d->out, "<< /Title ");
    b_text(&d->out, d->title);
    b_str(&d->out, " /Creator ");
    b_text(&d->out, d->creator);
    pdf_date(d->created, date, sizeof(date));
    if (date[0] != '\0')
        b_printf(&d->out, " /CreationDate (%s)", date);
    b_str(&d->out, " >>\nendobj\n");
    root = obj_new(d);
    obj_begin(d, root);
    b_printf(&d->out, "<< /Type /Catalog /Pages %u 0 R >>\nendobj\n", d->pages_no);
    xref = d->out.len;
    b_printf(&d->out, "xref\n0 %zu\n0000000000 65535 f \n", d->n_obj + 1);
    for (i = 0; i < d->n_obj; i++)
        b_printf(&d->out, "%010zu 00000 n \n", d->off[i]);
    b_printf(&d->out,
             "trailer\n<< /Size %zu /Root %u 0 R /Info %u 0 R >>\nstartxref\n%zu\n%%%%EOF\n",
             d->n_obj + 1, root, info, xref);
    if (!d->oom && !d->out.oom && !d->page.oom) {
        *out = (char *)d->out.d;
        *len = d->out.len;
        d->out.d = NULL;
        rc = 0;
    }
    parts_free(&more);
    parts_free(&cjkp);
    logo_free(&d->own);
    subset_free(&d->more);
    subset_free(&d->cjk);
    free(d->out.d);
    free(d->page.d);
    free(d->off);
    free(d->pages);
    free(d);
    if (rc != 0)
        errno = ENOMEM;
    return rc;
}
