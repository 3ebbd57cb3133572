/*
 * jsonbuf.h - JSON text written piece by piece into one growing buffer,
 * with jansson's bytes for the same values but without a json_t (and its
 * allocations) per value. One writer for the two places whose bytes are
 * fixed by what jansson wrote before: billingd's answers (POST
 * /v1/events, up to BD_EVENTS_MAX entries; billingd/api.c) and the
 * drafts' content hash (store/drafthash.c, stored in
 * billing.invoices.content_hash and compared by every re-close).
 *
 * The string rule, the one both share (jansson's dump.c):
 *   - '"' and '\\' are written \" and \\; the bytes 0x08, 0x0C, 0x0A,
 *     0x0D, 0x09 as \b \f \n \r \t; every other byte below 0x20 as \u00XX
 *     (upper-case hex). '/' and DEL (0x7F) are written as they are.
 *   - bc_jbuf_str (the API, JSON_ENSURE_ASCII): a byte from 0x80 up must
 *     be part of valid UTF-8 (else the string is refused, as json_string
 *     refuses it) and its code point is written \uXXXX, a surrogate pair
 *     above U+FFFF. Those strings go through jansson itself, so the bytes
 *     are jansson's by construction.
 *   - bc_jbuf_strn_utf8 (the content hash, json_dumps without
 *     JSON_ENSURE_ASCII): every byte from 0x80 up is copied as it is. For
 *     valid UTF-8 that is jansson's output; bytes that are not UTF-8 (a
 *     SQL_ASCII database can hand them back) are copied too, as the
 *     store's hash writer always did, so every string the store can hold
 *     keeps the hash it was stored with.
 *
 * Not thread-safe per buffer; any number of buffers on as many threads.
 */
#ifndef BILLING_FORMATS_JSONBUF_H
#define BILLING_FORMATS_JSONBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct bc_jbuf {
    char *p;    /* the text so far (owned), not NUL-terminated until bc_jbuf_take */
    size_t len; /* its bytes */
    size_t cap; /* bytes allocated at @p */
    size_t max; /* the most bytes the text (with its NUL) may take */
    int failed; /* out of memory or over @max: later writes do nothing */
} bc_jbuf;

/*
 * bc_jbuf_init - an empty buffer in @b (nothing allocated yet) whose text
 * may grow to @max bytes, its NUL included (as curl's dynbuf, every user
 * states its own cap).
 */
void bc_jbuf_init(bc_jbuf *b, size_t max);

/*
 * bc_jbuf_raw - append the @n bytes at @s as they are (punctuation, keys
 * and literals the caller knows need no escaping).
 */
void bc_jbuf_raw(bc_jbuf *b, const char *s, size_t n);

/* bc_jbuf_lit - bc_jbuf_raw of the string literal @s. */
#define bc_jbuf_lit(b, s) bc_jbuf_raw((b), (s), sizeof(s) - 1)

/* bc_jbuf_int - append @v in decimal, as json_dumps writes a JSON integer. */
void bc_jbuf_int(bc_jbuf *b, int64_t v);

/*
 * bc_jbuf_str - append @s as a JSON string, quoted and escaped as
 * json_dumps with JSON_ENSURE_ASCII escapes it (the rule above). Returns
 * 0, or -1 with nothing appended when json_string would refuse @s (NULL,
 * or not valid UTF-8): the caller then leaves the member out, as
 * json_object_set_new of that NULL value does.
 */
int bc_jbuf_str(bc_jbuf *b, const char *s);

/*
 * bc_jbuf_member - append @key (the literal bytes of ,"name": or
 * "name":) and the string @s, both or neither: 0, or -1 when @s is
 * refused as by bc_jbuf_str.
 */
int bc_jbuf_member(bc_jbuf *b, const char *key, const char *s);

/*
 * bc_jbuf_strn_utf8 - append the @n bytes at @s as a JSON string,
 * quoted and escaped as json_dumps without JSON_ENSURE_ASCII escapes
 * valid UTF-8; bytes from 0x80 up are copied whatever they are (the rule
 * above). Refuses nothing.
 */
void bc_jbuf_strn_utf8(bc_jbuf *b, const char *s, size_t n);

/*
 * bc_jbuf_take - the NUL-terminated text (the caller frees it with
 * free()), or NULL if a write failed (nothing to free then). Either way
 * @b is empty again, with the same cap.
 */
char *bc_jbuf_take(bc_jbuf *b);

/* bc_jbuf_free - drop @b's text, keep its cap (no-op on an empty buffer). */
void bc_jbuf_free(bc_jbuf *b);

#endif
