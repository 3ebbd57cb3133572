/*
 * jsonbuf.c - JSON text into one buffer, with jansson's bytes (jsonbuf.h).
 */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jsonbuf.h"

void bc_jbuf_init(bc_jbuf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max;
}

/* Room for @n more bytes and a NUL; 0, or -1 (and @b failed). */
static int reserve(bc_jbuf *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->failed)
        return -1;
    if (n < b->cap - b->len)
        return 0;
    if (b->len >= b->max || n > b->max - b->len - 1) {
        b->failed = 1;
        return -1;
    }
    cap = b->cap > 0 ? b->cap : 4096;
    while (cap - b->len <= n)
        cap *= 2;
    if (cap > b->max)
        cap = b->max;
    p = realloc(b->p, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void bc_jbuf_raw(bc_jbuf *b, const char *s, size_t n)
{
    if (n == 0 || reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void bc_jbuf_int(bc_jbuf *b, int64_t v)
{
    char digits[24];
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    size_t i = sizeof(digits);

    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        digits[--i] = '-';
    bc_jbuf_raw(b, digits + i, sizeof(digits) - i);
}

/* Whether byte @c is written escaped: '"', '\\' and the control characters. */
static int must_escape(unsigned char c)
{
    return c < 0x20 || c == '"' || c == '\\';
}

/* The @n bytes at @s, which need no escape, quoted: one copy. */
static void put_plain(bc_jbuf *b, const char *s, size_t n)
{
    if (reserve(b, n + 2) != 0)
        return;
    b->p[b->len++] = '"';
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len++] = '"';
}

/*
 * The @n bytes at @s quoted, escaped by the rule of jsonbuf.h from @i on
 * (the @i bytes before need none): runs that need nothing are copied
 * whole, each byte that does is written as its escape; every byte from
 * 0x80 up is copied.
 */
static void put_escaped(bc_jbuf *b, const char *s, size_t i, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    /* The bytes with a short escape, and the letter of each. */
    static const char named[] = "\"\\\b\f\n\r\t";
    static const char names[] = "\"\\bfnrt";
    const char *short_esc;
    const char *run = s;
    const char *end = s + n;
    char esc[6];

    bc_jbuf_lit(b, "\"");
    for (s += i; s < end; s++) {
        unsigned char c = (unsigned char)*s;
        size_t k = 2;

        if (!must_escape(c))
            continue;
        bc_jbuf_raw(b, run, (size_t)(s - run));
        run = s + 1;
        esc[0] = '\\';
        short_esc = memchr(named, c, sizeof(named) - 1);
        if (short_esc != NULL) {
            esc[1] = names[short_esc - named];
        } else {
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            k = 6;
        }
        bc_jbuf_raw(b, esc, k);
    }
    bc_jbuf_raw(b, run, (size_t)(s - run));
    bc_jbuf_lit(b, "\"");
}

void bc_jbuf_strn_utf8(bc_jbuf *b, const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n && !must_escape((unsigned char)s[i]); i++)
        ;
    if (i == n)
        put_plain(b, s, n);
    else
        put_escaped(b, s, i, n);
}

int bc_jbuf_str(bc_jbuf *b, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i;
    size_t n;
    json_t *js;
    char *text;

    if (s == NULL)
        return -1;
    /* The usual case, printable ASCII with nothing to escape, copied as it is. */
    for (i = 0; u[i] != '\0' && u[i] < 0x80 && !must_escape(u[i]); i++)
        ;
    if (u[i] == '\0') {
        put_plain(b, s, i);
        return 0;
    }
    /* ASCII with escapes: the shared rule, the bytes jansson writes. */
    for (n = i; u[n] != '\0' && u[n] < 0x80; n++)
        ;
    if (u[n] == '\0') {
        put_escaped(b, s, i, n);
        return 0;
    }
    /* Non-ASCII as jansson validates and escapes it: the same bytes by construction. */
    js = json_string(s);
    if (js == NULL)
        return -1;
    text = json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(js);
    if (text == NULL) {
        b->failed = 1;
        return 0;
    }
    bc_jbuf_raw(b, text, strlen(text));
    free(text);
    return 0;
}

int bc_jbuf_member(bc_jbuf *b, const char *key, const char *s)
{
    size_t mark = b->len;

    bc_jbuf_raw(b, key, strlen(key));
    if (bc_jbuf_str(b, s) == 0)
        return 0;
    if (!b->failed)
        b->len = mark;
    return -1;
}

char *bc_jbuf_take(bc_jbuf *b)
{
    char *text = NULL;

    if (reserve(b, 0) == 0) {
        b->p[b->len] = '\0';
        text = b->p;
        b->p = NULL;
    }
    bc_jbuf_free(b);
    return text;
}

void bc_jbuf_free(bc_jbuf *b)
{
    free(b->p);
    bc_jbuf_init(b, b->max);
}
