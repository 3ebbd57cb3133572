/*
 * rejects.c - rejected records kept as JSON Lines: see rejects.h.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rejects.h"

struct rate_rejects {
    FILE *f;
    char *path;
    uint64_t count;
    int failed; /* errno of the first failed write, or 0 */
};

rate_rejects *rejects_open(const char *path, char *err, size_t errsize)
{
    rate_rejects *rj = calloc(1, sizeof(*rj));

    if (rj == NULL || (rj->path = strdup(path)) == NULL) {
        snprintf(err, errsize, "--rejects %s: out of memory", path);
        goto error;
    }
    rj->f = fopen(path, "w");
    if (rj->f == NULL) {
        snprintf(err, errsize, "--rejects %s: %s", path, strerror(errno));
        goto error;
    }
    return rj;
error:
    if (rj != NULL)
        free(rj->path);
    free(rj);
    return NULL;
}

/* @len bytes as base64 (RFC 4648, padded): a new JSON string, or NULL. */
static json_t *base64(const unsigned char *p, size_t len)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((len + 2) / 3 * 4 + 1);
    size_t w = 0;
    size_t i;
    uint32_t v;
    json_t *s;

    if (out == NULL)
        return NULL;
    for (i = 0; i < len; i += 3) {
        v = (uint32_t)p[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < len)
            v |= p[i + 2];
        out[w++] = abc[v >> 18 & 63];
        out[w++] = abc[v >> 12 & 63];
        out[w++] = i + 1 < len ? abc[v >> 6 & 63] : '=';
        out[w++] = i + 2 < len ? abc[v & 63] : '=';
    }
    out[w] = '\0';
    s = json_string(out);
    free(out);
    return s;
}

/* The record's bytes under the key that says how to read them. */
static int add_record(json_t *o, bc_format format, const unsigned char *rec, size_t len)
{
    json_t *v;

    if (rec == NULL)
        return 0;
    if (format == BC_FORMAT_PROTOBUF)
        return json_object_set_new(o, "protobuf_base64", base64(rec, len));
    /* The line as a string, not parsed: a number re-printed by a JSON library could differ
     * from the one read (jansson reads non-integers as binary floats). */
    v = json_stringn((const char *)rec, len);
    if (v != NULL)
        return json_object_set_new(o, "text", v);
    return json_object_set_new(o, "bytes_base64", base64(rec, len));
}

int rejects_write(rate_rejects *rj, const char *source, bc_format format, uint64_t pos,
                  const char *reason, const unsigned char *rec, size_t len, bc_format rec_format)
{
    json_t *o = json_object();
    int rc = -1;

    if (o == NULL || json_object_set_new(o, "source", json_string(source)) != 0 ||
        json_object_set_new(o, format == BC_FORMAT_PROTOBUF ? "offset" : "line",
                            json_integer((json_int_t)pos)) != 0 ||
        json_object_set_new(o, "reason", json_string(reason)) != 0 ||
        add_record(o, rec_format, rec, len) != 0) {
        if (rj->failed == 0)
            rj->failed = ENOMEM;
        goto done;
    }
    if (json_dumpf(o, rj->f, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0 ||
        fputc('\n', rj->f) == EOF) {
        if (rj->failed == 0)
            rj->failed = errno != 0 ? errno : EIO;
        goto done;
    }
    rj->count++;
    rc = 0;
done:
    json_decref(o);
    return rc;
}

uint64_t rejects_count(const rate_rejects *rj)
{
    return rj != NULL ? rj->count : 0;
}

int rejects_close(rate_rejects *rj, char *err, size_t errsize)
{
    int rc = 0;

    if (rj == NULL)
        return 0;
    if (fclose(rj->f) != 0 && rj->failed == 0)
        rj->failed = errno != 0 ? errno : EIO;
    if (rj->failed != 0) {
        snprintf(err, errsize, "--rejects %s: writing failed: %s", rj->path, strerror(rj->failed));
        rc = -1;
    }
    free(rj->path);
    free(rj);
    return rc;
}
