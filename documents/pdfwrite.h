/*
 * pdfwrite.h - a small PDF writer for pdf.c's invoices (pdfwrite.c): text
 * in two TrueType fonts (a Latin one and a CJK one), rules, one PNG logo,
 * pages of A4. The fonts are embedded as subsets made here from the font
 * files' tables: the printable ASCII of the Latin font once per process
 * (deflated once, then copied into every document), and per document
 * only the glyphs beyond it. Every document depends on its drawing calls
 * alone, byte for byte. Uses FreeType (character maps, font tables),
 * zlib (streams) and cairo (reading the PNG) only.
 */
#ifndef DOCUMENTS_PDFWRITE_H
#define DOCUMENTS_PDFWRITE_H

#include <stddef.h>

/* First code point drawn with the CJK font (CJK radicals and later). */
#define PW_CJK_FIRST 0x2E80

/* A document being written (opaque). */
typedef struct pw_doc pw_doc;

/*
 * pw_fonts - load the Latin font at @latin and the CJK font at @cjk (once
 * per process; thread-safe; later calls return the first one's result).
 * Returns 0, or -1 with @why naming the path that failed (@why may be
 * NULL).
 */
int pw_fonts(const char *latin, const char *cjk, char *why, size_t size);

/*
 * pw_begin - a new document of pages @w x @h points (the fonts loaded),
 * with @title (UTF-8), @creator and @created (ISO 8601, e.g.
 * "2026-02-01T00:00:00Z"; NULL: no creation date) in its information
 * dictionary. Returns NULL when out of memory.
 */
pw_doc *pw_begin(double w, double h, const char *title, const char *creator, const char *created);

/*
 * pw_text - draw UTF-8 @s at (@x, @y) (points from the top left, @y the
 * baseline) in @size points, each character in the font that has it (CJK
 * from U+2E80 on). With @d NULL nothing is drawn. Returns the advance of
 * the whole text.
 */
double pw_text(pw_doc *d, double x, double y, const char *s, double size);

/* pw_width - the advance of UTF-8 @s at @size (as pw_text returns it). */
double pw_width(const char *s, double size);

/*
 * pw_decode - the code point of the UTF-8 character at @s (NUL-terminated)
 * and its length in bytes in *@len (1, as U+FFFD, for a malformed byte).
 */
unsigned pw_decode(const unsigned char *s, size_t *len);

/* pw_rgb - the fill colour of the text drawn next (0..1 each). */
void pw_rgb(pw_doc *d, double r, double g, double b);

/* pw_rule - a line of @width points from (@x0, @y0) to (@x1, @y1). */
void pw_rule(pw_doc *d, double x0, double y0, double x1, double y1, double width);

/*
 * pw_png_size - take the PNG whose bytes are the hex digits @hex as the
 * picture of @d (decoded once per process for the first few logos,
 * thread-safe) and give its width and height in pixels. Returns 0, or -1
 * when it is not a PNG that can be read (then @d has no picture).
 */
int pw_png_size(pw_doc *d, const char *hex, int *w, int *h);

/*
 * pw_png - draw the picture of @d (pw_png_size) into the box of @w x @h
 * points whose top left is (@x, @y); nothing without one.
 */
void pw_png(pw_doc *d, double x, double y, double w, double h);

/* pw_page - end the page being drawn; the next call draws on a new one. */
void pw_page(pw_doc *d);

/*
 * pw_end - finish @d (taken: freed here) into *@out of *@len bytes
 * (caller frees with free()). Returns 0, or -1 with errno (ENOMEM).
 */
int pw_end(pw_doc *d, char **out, size_t *len);

#endif /* DOCUMENTS_PDFWRITE_H */
