/*
 * jsonbuf.c - JSON text into one buffer, as json_dumps(JSON_COMPACT |
 * JSON_ENSURE_ASCII) writes it (jsonbuf.h).
 */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jsonbuf.h"

void bd_jbuf_init(bd_jbuf *b)
{
    memset(b, 0, sizeof(*b));
}

/* Room for @n more bytes and a NUL; 0, or -1 (and @b failed). */
static int reserve(bd_jbuf *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->failed)
        return -1;
    if (n < b->cap - b->len)
        return 0;
    if (b->len >= BD_JBUF_MAX || n > BD_JBUF_MAX - b->len - 1) {
        b->failed = 1;
        return -1;
    }
    cap = b->cap > 0 ? b->cap : 4096;
    while (cap - b->len <= n)
        cap *= 2;
    if (cap > BD_JBUF_MAX)
        cap = BD_JBUF_MAX;
    p = realloc(b->p, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void bd_jbuf_raw(bd_jbuf *b, const char *s, size_t n)
{
    if (n == 0 || reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void bd_jbuf_int(bd_jbuf *b, int64_t v)
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
    bd_jbuf_raw(b, digits + i, sizeof(digits) - i);
}

int bd_jbuf_str(bd_jbuf *b, const char *s)
{
    const unsigned char *c;
    json_t *js;
    char *text;

    if (s == NULL)
        return -1;
    /* The usual case, printable ASCII with nothing to escape, copied as it is. */
    for (c = (const unsigned char *)s; *c >= 0x20 && *c < 0x80 && *c != '"' && *c != '\\'; c++)
        ;
    if (*c == '\0') {
        size_t n = (size_t)(c - (const unsigned char *)s);

        if (reserve(b, n + 2) != 0)
            return 0;
        b->p[b->len++] = '"';
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len++] = '"';
        return 0;
    }
    /* Anything else as jansson validates and escapes it: the same bytes by construction. */
    js = json_string(s);
    if (js == NULL)
        return -1;
    text = json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(js);
    if (text == NULL) {
        b->failed = 1;
        return 0;
    }
    bd_jbuf_raw(b, text, strlen(text));
    free(text);
    return 0;
}

int bd_jbuf_member(bd_jbuf *b, const char *key, const char *s)
{
    size_t mark = b->len;

    bd_jbuf_raw(b, key, strlen(key));
    if (bd_jbuf_str(b, s) == 0)
        return 0;
    if (!b->failed)
        b->len = mark;
    return -1;
}

char *bd_jbuf_take(bd_jbuf *b)
{
    char *text = NULL;

    if (reserve(b, 0) == 0) {
        b->p[b->len] = '\0';
        text = b->p;
        b->p = NULL;
    }
    bd_jbuf_free(b);
    return text;
}

void bd_jbuf_free(bd_jbuf *b)
{
    free(b->p);
    bd_jbuf_init(b);
}
