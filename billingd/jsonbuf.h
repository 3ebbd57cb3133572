/*
 * jsonbuf.h - a JSON text written piece by piece into one growing
 * buffer: the bytes jansson's json_dumps(value, JSON_COMPACT |
 * JSON_ENSURE_ASCII) gives for the same values, without a json_t (and its
 * allocations) per value. POST /v1/events answers up to BD_EVENTS_MAX
 * entries this way (billingd/api.c). Not thread-safe per buffer; any
 * number of buffers on as many threads.
 */
#ifndef BILLINGD_JSONBUF_H
#define BILLINGD_JSONBUF_H

#include <stddef.h>
#include <stdint.h>

/* The largest text a buffer grows to (an events answer is at most a few MiB). */
#define BD_JBUF_MAX ((size_t)64 << 20)

typedef struct bd_jbuf {
    char *p;    /* the text so far (owned), not NUL-terminated until bd_jbuf_take */
    size_t len; /* its bytes */
    size_t cap; /* bytes allocated at @p */
    int failed; /* out of memory or over BD_JBUF_MAX: later writes do nothing */
} bd_jbuf;

/* bd_jbuf_init - an empty buffer in @b (nothing allocated yet). */
void bd_jbuf_init(bd_jbuf *b);

/*
 * bd_jbuf_raw - append the @n bytes at @s as they are (punctuation, keys
 * and literals the caller knows need no escaping).
 */
void bd_jbuf_raw(bd_jbuf *b, const char *s, size_t n);

/* bd_jbuf_lit - bd_jbuf_raw of the string literal @s. */
#define bd_jbuf_lit(b, s) bd_jbuf_raw((b), (s), sizeof(s) - 1)

/* bd_jbuf_int - append @v in decimal, as json_dumps writes a JSON integer. */
void bd_jbuf_int(bd_jbuf *b, int64_t v);

/*
 * bd_jbuf_str - append @s as a JSON string (quoted and escaped as
 * json_dumps with JSON_ENSURE_ASCII escapes it). Returns 0, or -1 with
 * nothing appended when json_string would refuse @s (NULL, or not valid
 * UTF-8): the caller then leaves the member out, as json_object_set_new
 * of that NULL value does.
 */
int bd_jbuf_str(bd_jbuf *b, const char *s);

/*
 * bd_jbuf_member - append @key (the literal bytes of ,"name": or
 * "name":) and the string @s, both or neither: 0, or -1 when @s is
 * refused as by bd_jbuf_str.
 */
int bd_jbuf_member(bd_jbuf *b, const char *key, const char *s);

/*
 * bd_jbuf_take - the NUL-terminated text (the caller frees it with
 * free()), or NULL if a write failed (nothing to free then). Either way
 * @b is empty again.
 */
char *bd_jbuf_take(bd_jbuf *b);

/* bd_jbuf_free - drop @b's text (no-op on an empty buffer). */
void bd_jbuf_free(bd_jbuf *b);

#endif
