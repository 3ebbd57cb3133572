/*
 * api_parse.c - the HTTP API's routes and POST /v1/events bodies, read
 * with no connection (api_parse.h).
 */
#include "config.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_parse.h"
#include "billing.h"

#define MSG_MAX 512

/* Route of @method @url; @account gets the {id} (at most 128 bytes) of account routes. */
enum route bd_route_of(const char *url, char *account, size_t size, int *bad_account)
{
    static const struct {
        const char *suffix;
        enum route r;
    } tails[] = {{"/balance", R_BALANCE},
                 {"/grants", R_GRANTS},
                 {"/subscriptions", R_SUBSCRIPTIONS},
                 {"/usage", R_USAGE}};
    const char *p;
    const char *slash;
    size_t n;
    size_t i;

    *bad_account = 0;
    if (strcmp(url, "/v1/events") == 0)
        return R_EVENTS;
    if (strcmp(url, "/v1/price-books") == 0)
        return R_PRICE_BOOKS;
    if (strcmp(url, "/v1/plans") == 0)
        return R_PLANS;
    if (strcmp(url, "/v1/accounts") == 0)
        return R_ACCOUNTS;
    if (strcmp(url, "/v1/rejected") == 0)
        return R_REJECTED;
    if (strcmp(url, "/v1/invoices") == 0)
        return R_INVOICES;
    if (strcmp(url, "/v1/quote") == 0)
        return R_QUOTE;
    if (strcmp(url, "/v1/ops/status") == 0)
        return R_OPS_STATUS;
    if (strncmp(url, "/v1/invoices/", 13) == 0) {
        /* {number}: the invoice's number or id, maybe with .json, .pdf or .csv */
        n = strlen(url + 13);
        if (n < 1 || n >= size || strchr(url + 13, '/') != NULL)
            *bad_account = 1;
        else
            memcpy(account, url + 13, n + 1);
        return R_INVOICE;
    }
    if (strncmp(url, "/v1/accounts/", 13) != 0)
        return R_OTHER;
    p = url + 13;
    slash = strchr(p, '/');
    if (slash == NULL)
        return R_OTHER;
    for (i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        if (strcmp(slash, tails[i].suffix) != 0)
            continue;
        n = (size_t)(slash - p);
        if (n < 1 || n >= size) {
            *bad_account = 1;
        } else {
            memcpy(account, p, n);
            account[n] = '\0';
        }
        return tails[i].r;
    }
    return R_OTHER;
}

int bd_route_method_ok(enum route r, const char *method)
{
    return strcmp(method, r == R_EVENTS || r == R_QUOTE ? "POST" : "GET") == 0;
}

/* A CloudEvents 1.0 event as our event object: id, time->start, subject->account, type->meter. */
static json_t *from_cloudevent(json_t *ce, const char **why)
{
    json_t *data = json_object_get(ce, "data");
    json_t *ev;
    const char *key;
    json_t *v;

    *why = NULL;
    if (!json_is_object(ce) || !json_is_string(json_object_get(ce, "specversion"))) {
        *why = "not a CloudEvent: specversion missing";
        return NULL;
    }
    if (strcmp(json_string_value(json_object_get(ce, "specversion")), "1.0") != 0) {
        *why = "specversion: only 1.0";
        return NULL;
    }
    if (data != NULL && !json_is_object(data)) {
        *why = "data: must be an object (resource, end, quantity, model, region)";
        return NULL;
    }
    ev = data != NULL ? json_deep_copy(data) : json_object();
    if (ev == NULL)
        return NULL;
    if ((v = json_object_get(ce, "id")) != NULL)
        json_object_set(ev, "id", v);
    if ((v = json_object_get(ce, "subject")) != NULL)
        json_object_set(ev, "account", v);
    if ((v = json_object_get(ce, "type")) != NULL)
        json_object_set(ev, "meter", v);
    if ((v = json_object_get(ce, "time")) != NULL && json_object_get(ev, "start") == NULL)
        json_object_set(ev, "start", v);
    (void)key;
    return ev;
}

void bd_events_free(bd_events *b)
{
    size_t i;

    for (i = 0; b->lines == NULL && i < b->n; i++)
        free(b->texts[i]);
    free(b->recs);
    free(b->texts);
    free(b->sources);
    free(b->block);
    free(b->lines);
}

/* A source's bytes at most: "api:key", a signed 64-bit key, ':', an index, NUL. */
#define SOURCE_SLOT 64

/* The arrays of @n records and the block of their sources; 0, or -1 out of memory. */
static int batch_alloc(bd_events *b, size_t n)
{
    if (n == 0)
        n = 1;
    b->recs = calloc(n, sizeof(*b->recs));
    b->texts = calloc(n, sizeof(*b->texts));
    b->sources = calloc(n, sizeof(*b->sources));
    b->block = malloc(n * SOURCE_SLOT);
    return b->recs == NULL || b->texts == NULL || b->sources == NULL || b->block == NULL ? -1 : 0;
}

/* @v in decimal at @p; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
    char digits[20];
    size_t i = sizeof(digits);

    do {
        digits[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    memcpy(p, digits + i, sizeof(digits) - i);
    return p + (sizeof(digits) - i);
}

/* "api:key<@key>:<@i>" into @dst (SOURCE_SLOT bytes), as "api:key%" PRId64 ":%zu" prints. */
static void source_name(char *dst, int64_t key, size_t i)
{
    char *p = dst;

    memcpy(p, "api:key", 7);
    p += 7;
    if (key < 0)
        *p++ = '-';
    p = put_u64(p, key < 0 ? (uint64_t)0 - (uint64_t)key : (uint64_t)key);
    *p++ = ':';
    p = put_u64(p, (uint64_t)i);
    *p = '\0';
}

/* Add the record @text (taken; in b->lines if that is set) of element @i; @bad_code/@bad_reason
 * reject it as read. */
static int batch_add(bd_events *b, int64_t key, char *text, const char *bad_code,
                     const char *bad_reason)
{
    bs_record *r = &b->recs[b->n];

    b->sources[b->n] = b->block + b->n * SOURCE_SLOT;
    source_name(b->sources[b->n], key, b->n);
    b->texts[b->n] = text != NULL ? text : strdup("");
    if (b->texts[b->n] == NULL)
        return -1;
    memset(r, 0, sizeof(*r));
    r->data = b->texts[b->n];
    r->len = strlen(b->texts[b->n]);
    r->format = BS_RECORD_JSON;
    r->source = b->sources[b->n];
    r->reject_code = bad_code;
    r->reject_reason = bad_reason;
    b->n++;
    return 0;
}

/* Add the protobuf message of @len bytes at @data. */
static int batch_add_proto(bd_events *b, int64_t key, const unsigned char *data, size_t len)
{
    char *copy = malloc(len + 1);

    if (copy == NULL)
        return -1;
    memcpy(copy, data, len);
    copy[len] = '\0';
    if (batch_add(b, key, copy, NULL, NULL) != 0)
        return -1;
    b->recs[b->n - 1].len = len;
    b->recs[b->n - 1].format = BS_RECORD_PROTOBUF;
    return 0;
}

/* A base-128 varint of at most 5 bytes at @p (@avail bytes): its bytes, or 0 if malformed. */
static size_t varint(const unsigned char *p, size_t avail, uint64_t *v)
{
    size_t i;

    *v = 0;
    for (i = 0; i < avail && i < 5; i++) {
        *v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if ((p[i] & 0x80) == 0)
            return i + 1;
    }
    return 0;
}

/*
 * Length-delimited billing.v1.UsageEvent messages (each preceded by its
 * length as a varint, as Java's writeDelimitedTo and Go's protodelim
 * write them) into records; 0, or an HTTP status with a message.
 */
static unsigned parse_proto(const unsigned char *body, size_t len, int64_t key, bd_events *b,
                            char *msg, size_t msgsize)
{
    size_t n = 0;
    size_t off;
    size_t used;
    uint64_t mlen;
    int pass;

    for (pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (n > BD_EVENTS_MAX) {
                snprintf(msg, msgsize, "body: %zu events, at most %d per request", n,
                         BD_EVENTS_MAX);
                return 413;
            }
            if (batch_alloc(b, n) != 0) {
                snprintf(msg, msgsize, "out of memory");
                return 500;
            }
        }
        for (off = 0; off < len; off += (size_t)mlen) {
            used = varint(body + off, len - off, &mlen);
            if (used == 0 || mlen > len - off - used) {
                snprintf(msg, msgsize,
                         "body: offset %zu: %s (length-delimited billing.v1.UsageEvent expected)",
                         off, used == 0 ? "malformed length prefix" : "message past the end");
                return 400;
            }
            off += used;
            if (pass == 0)
                n++;
            else if (batch_add_proto(b, key, body + off, (size_t)mlen) != 0) {
                snprintf(msg, msgsize, "out of memory");
                return 500;
            }
        }
    }
    if (b->n == 0) {
        snprintf(msg, msgsize, "body: no events");
        return 400;
    }
    return 0;
}

/* Add JSON value @v (an event, or a CloudEvent when @ce). */
static int batch_add_json(bd_events *b, int64_t key, json_t *v, int ce)
{
    const char *why = NULL;
    json_t *ev = ce ? from_cloudevent(v, &why) : json_incref(v);
    char *text;

    if (ev == NULL && why == NULL)
        return -1;
    if (ev == NULL)
        return batch_add(b, key, json_dumps(v, JSON_COMPACT), "invalid", why);
    if (!json_is_object(ev)) {
        json_decref(ev);
        return batch_add(b, key, json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY), "invalid",
                         "an event must be a JSON object");
    }
    text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    return text != NULL ? batch_add(b, key, text, NULL, NULL) : -1;
}

/* Parse the body as @type into records; 0, or an HTTP status with a message in @msg. */
unsigned bd_events_parse(const char *type, const char *body, size_t len, int64_t key, bd_events *b,
                         char *msg, size_t msgsize)
{
    int ce = 0;
    int lines = 0;
    json_error_t jerr;
    json_t *doc = NULL;
    size_t n = 0;
    size_t i;
    const char *p;

    if (type == NULL)
        type = "application/json";
    if (strncmp(type, "application/cloudevents-batch+json", 34) == 0) {
        ce = 1;
    } else if (strncmp(type, "application/cloudevents+json", 28) == 0) {
        ce = 2;
    } else if (strncmp(type, "application/x-ndjson", 20) == 0 ||
               strncmp(type, "application/jsonl", 17) == 0) {
        lines = 1;
    } else if (strncmp(type, "application/x-protobuf", 22) == 0 ||
               strncmp(type, "application/protobuf", 20) == 0) {
        return parse_proto((const unsigned char *)body, len, key, b, msg, msgsize);
    } else if (strncmp(type, "application/json", 16) != 0) {
        snprintf(msg, msgsize,
                 "Content-Type '%.64s': expected application/json, application/x-ndjson, "
                 "application/cloudevents+json, application/cloudevents-batch+json or "
                 "application/x-protobuf",
                 type);
        return 415;
    }
    if (lines) {
        for (p = body; p < body + len; p++)
            n += *p == '\n';
        n++;
    } else {
        doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (doc == NULL) {
            snprintf(msg, msgsize, "body: line %d column %d: %s", jerr.line, jerr.column,
                     jerr.text);
            return 400;
        }
        if (ce == 2) {
            n = 1;
        } else if (!json_is_array(doc)) {
            json_decref(doc);
            snprintf(msg, msgsize, "body: expected a JSON array of events");
            return 400;
        } else {
            n = json_array_size(doc);
        }
    }
    if (n > BD_EVENTS_MAX) {
        json_decref(doc);
        snprintf(msg, msgsize, "body: %zu events, at most %d per request", n, BD_EVENTS_MAX);
        return 413;
    }
    if (batch_alloc(b, n) != 0)
        goto nomem;
    if (lines) {
        const char *end = body + len;
        /* Every line and its NUL, one after the other: at most the body and a NUL a line. */
        char *to = b->lines = malloc(len + n + 1);

        if (to == NULL)
            goto nomem;

        for (p = body; p < end;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t l = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
            char *text;
            size_t k;

            if (l > 0 && p[l - 1] == '\r')
                l--;
            /* Blank lines (spaces, tabs, CR only) carry nothing, as in `billing ingest`. */
            for (k = 0; k < l && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'); k++)
                ;
            if (k < l) {
                text = to;
                memcpy(to, p, l);
                to[l] = '\0';
                to += l + 1;
                if (batch_add(b, key, text, NULL, NULL) != 0)
                    goto nomem;
            }
            p = nl != NULL ? nl + 1 : end;
        }
    } else if (ce == 2) {
        if (batch_add_json(b, key, doc, 1) != 0)
            goto nomem;
    } else {
        for (i = 0; i < n; i++)
            if (batch_add_json(b, key, json_array_get(doc, i), ce) != 0)
                goto nomem;
    }
    json_decref(doc);
    if (b->n == 0) {
        snprintf(msg, msgsize, "body: no events");
        return 400;
    }
    return 0;
nomem:
    json_decref(doc);
    snprintf(msg, msgsize, "out of memory");
    return 500;
}

int bd_events_bind(bd_events *b, const char *bound)
{
    char msg[MSG_MAX];
    billing_event *pev = billing_event_new();
    size_t i;

    if (pev == NULL)
        return -1;
    for (i = 0; i < b->n; i++) {
        int proto = b->recs[i].format == BS_RECORD_PROTOBUF;
        json_t *ev =
            b->recs[i].reject_code == NULL && !proto ? json_loads(b->texts[i], 0, NULL) : NULL;
        json_t *acc = json_object_get(ev, "account");
        const char *account = json_is_string(acc) ? json_string_value(acc) : NULL;

        /* A message that does not decode is rejected by the pipeline, with its reason. */
        if (proto && b->recs[i].reject_code == NULL &&
            billing_event_decode(pev, b->recs[i].data, b->recs[i].len, msg, sizeof(msg)) ==
                BILLING_OK)
            account = billing_event_account(pev);
        if (account != NULL && strcmp(account, bound) != 0) {
            b->recs[i].reject_code = "invalid";
            b->recs[i].reject_reason = "account: this key may send events of its own account only";
        }
        json_decref(ev);
    }
    billing_event_destroy(pev);
    return 0;
}
