/*
 * rate_report.c - what the invoices and the credit report of `billing
 * rate` both end with: the counts, as JSON ("summary") or as text lines,
 * and a JSON document written to stdout in large blocks.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rate_ctx.h"

static json_t *summary_json(const rate_counts *n)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "events_read", (json_int_t)n->read,
                     "events_rated", (json_int_t)n->rated, "duplicates", (json_int_t)n->duplicates,
                     "rejected", (json_int_t)n->rejected, "subscriptions_rejected",
                     (json_int_t)n->subs_rejected);
}

/* The summary, with where the rejected records went (--rejects) and what came after --at. */
json_t *rate_summary_json(const rate_ctx *c)
{
    json_t *s = summary_json(&c->counts);

    if (s != NULL && c->opts.rejects != NULL &&
        json_object_set_new(s, "rejects_file", json_string(c->opts.rejects)) != 0) {
        json_decref(s);
        return NULL;
    }
    if (s != NULL && c->opts.at_set &&
        json_object_set_new(s, "events_after_at", json_integer((json_int_t)c->counts.after_at)) !=
            0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

/*
 * JSON output gathered in blocks: jansson hands its dump over a token at
 * a time (json_dumpf makes an fwrite of each), a few bytes each.
 */
#define OUT_BLOCK (64u * 1024u)

typedef struct out_block {
    FILE *f;
    size_t len;
    char buf[OUT_BLOCK];
} out_block;

/* Write out what @o holds; 0 or -1. */
static int out_flush(out_block *o)
{
    size_t n = o->len;

    o->len = 0;
    return fwrite(o->buf, 1, n, o->f) == n ? 0 : -1;
}

/* A json_dump_callback_t: append @n bytes at @p to the block. */
static int out_put(const char *p, size_t n, void *arg)
{
    out_block *o = arg;

    if (n > OUT_BLOCK - o->len && out_flush(o) != 0)
        return -1;
    if (n >= OUT_BLOCK)
        return fwrite(p, 1, n, o->f) == n ? 0 : -1;
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    return 0;
}

int rate_dump_json(json_t *root)
{
    out_block *o = malloc(sizeof(*o));
    int rc = -1;

    if (o == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    o->f = stdout;
    o->len = 0;
    if (json_dump_callback(root, out_put, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 &&
        out_put("\n", 1, o) == 0)
        rc = out_flush(o);
    free(o);
    if (rc != 0) {
        cli_error("writing the output failed");
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

void rate_print_counts(FILE *out, const rate_counts *n)
{
    fprintf(out,
            "Events: %" PRIu64 " read, %" PRIu64 " rated, %" PRIu64 " duplicates, %" PRIu64
            " rejected\n",
            n->read, n->rated, n->duplicates, n->rejected);
    if (n->after_at > 0)
        fprintf(out, "Events after --at, not rated: %" PRIu64 "\n", n->after_at);
    if (n->subs_rejected > 0)
        fprintf(out, "Subscriptions: %" PRIu64 " rejected\n", n->subs_rejected);
}
