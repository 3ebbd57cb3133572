/*
 * bench_decode.c - event decoding alone, from memory (issue 15: 2 M events
 * a second per core for each format).
 *
 *   bench_decode [EVENTS [ROUNDS [json|protobuf]]]
 *
 * Builds EVENTS (default 1 000 000) of bench_rate's workload (workload.h)
 * once as JSON Lines lines (gen_events's form) and once as protobuf
 * UsageEvent messages, then decodes every line with bc_event_parse_json
 * and every message with billing_event_decode (or only the format named),
 * ROUNDS times (default 3), and prints the best round of each as events
 * per CPU-second of this process. An extra first round, not timed, checks
 * every event and prints a checksum of the decoded fields: a build of an
 * older tree must print the same one for the same arguments
 * (bench/decode-compare.sh builds and runs both).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "billing.h"
#include "eventjson.h"
#include "workload.h"

/* Every event of one format, back to back, with each one's offset. */
typedef struct corpus {
    unsigned char *bytes;
    size_t *offset; /* events + 1 entries */
    size_t used;
    size_t size;
} corpus;

static int corpus_add(corpus *c, const void *data, size_t len, long n)
{
    unsigned char *grown;

    if (c->size - c->used < len) {
        c->size = (c->size + len) * 2;
        grown = realloc(c->bytes, c->size);
        if (grown == NULL)
            return -1;
        c->bytes = grown;
    }
    memcpy(c->bytes + c->used, data, len);
    c->offset[n] = c->used;
    c->used += len;
    c->offset[n + 1] = c->used;
    return 0;
}

static int build(corpus *json, corpus *pb, long events)
{
    uint64_t rng = UINT64_C(88172645463325252);
    billing_event *ev = billing_event_new();
    unsigned char msg[BILLING_EVENT_WIRE_MAX];
    char line[512];
    spec s;
    size_t len;
    long n;
    int rc = ev == NULL ? -1 : 0;

    for (n = 0; n < events && rc == 0; n++) {
        bench_make_spec(&s, &rng, 1000);
        snprintf(s.id, sizeof(s.id), "ev-%ld", n);
        bench_fill_event(ev, &s, s.id);
        rc = bench_format_json(&s, line, sizeof(line)) > 0 ? 0 : -1;
        if (rc == 0)
            rc = corpus_add(json, line, strlen(line) - 1, n); /* the line without its newline */
        if (rc == 0)
            rc = billing_event_encode(ev, msg, sizeof(msg), &len) == BILLING_OK ? 0 : -1;
        if (rc == 0)
            rc = corpus_add(pb, msg, len, n);
    }
    billing_event_destroy(ev);
    return rc;
}

static double cpu_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* FNV-1a over the decoded fields, to compare builds. */
static uint64_t mix(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t i;

    for (i = 0; i < len; i++)
        h = (h ^ p[i]) * UINT64_C(1099511628211);
    return h;
}

static uint64_t event_sum(uint64_t h, const billing_event *ev)
{
    char qty[BILLING_QUANTITY_TEXT_MAX];
    billing_time_t t[2];
    int m = (int)billing_event_meter(ev);

    t[0] = billing_event_start(ev);
    t[1] = billing_event_end(ev);
    billing_event_quantity(ev, qty, sizeof(qty));
    h = mix(h, billing_event_id(ev), strlen(billing_event_id(ev)));
    h = mix(h, billing_event_account(ev), strlen(billing_event_account(ev)));
    h = mix(h, billing_event_resource(ev), strlen(billing_event_resource(ev)));
    h = mix(h, billing_event_model(ev), strlen(billing_event_model(ev)));
    h = mix(h, billing_event_region(ev), strlen(billing_event_region(ev)));
    h = mix(h, qty, strlen(qty));
    h = mix(h, &m, sizeof(m));
    return mix(h, t, sizeof(t));
}

/*
 * One round over @c; the CPU seconds it took, or a negative value if an
 * event was refused. Checksums the decoded events into *@sum unless @sum
 * is NULL (the timed rounds).
 */
static double decode_all(const corpus *c, long events, int json, billing_event *ev, uint64_t *sum)
{
    char err[256];
    double t0 = cpu_seconds();
    const unsigned char *p;
    size_t len;
    billing_status st;
    long n;

    for (n = 0; n < events; n++) {
        p = c->bytes + c->offset[n];
        len = c->offset[n + 1] - c->offset[n];
        if (json)
            st = bc_event_parse_json(ev, (const char *)p, len, err, sizeof(err));
        else
            st = billing_event_decode(ev, p, len, err, sizeof(err));
        if (st != BILLING_OK) {
            fprintf(stderr, "bench_decode: event %ld refused: %s\n", n, err);
            return -1;
        }
        if (sum != NULL)
            *sum = event_sum(*sum, ev);
    }
    return cpu_seconds() - t0;
}

static int run(const char *name, const corpus *c, long events, int rounds, int json)
{
    billing_event *ev = billing_event_new();
    uint64_t sum = UINT64_C(14695981039346656037);
    double best = 0;
    double t;
    int i;

    if (ev == NULL)
        return -1;
    /* An untimed round checks every event and checksums them. */
    t = decode_all(c, events, json, ev, &sum);
    for (i = 0; i < rounds; i++) {
        if (t >= 0)
            t = decode_all(c, events, json, ev, NULL);
        if (t < 0) {
            billing_event_destroy(ev);
            return -1;
        }
        if (i == 0 || t < best)
            best = t;
    }
    billing_event_destroy(ev);
    printf("%-8s %ld events, %zu bytes: best of %d rounds %.3f CPU s, %.0f events per CPU-second, "
           "checksum %016llx\n",
           name, events, c->used, rounds, best, best > 0 ? (double)events / best : 0.0,
           (unsigned long long)sum);
    return 0;
}

int main(int argc, char **argv)
{
    long events = argc > 1 ? atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    const char *only = argc > 3 ? argv[3] : "";
    int do_json = strcmp(only, "protobuf") != 0;
    int do_pb = strcmp(only, "json") != 0;
    corpus json = {NULL, NULL, 0, 0};
    corpus pb = {NULL, NULL, 0, 0};
    int rc = 1;

    if (argc > 4 || events <= 0 || rounds <= 0 || (do_json && do_pb && only[0] != '\0')) {
        fprintf(stderr, "usage: bench_decode [EVENTS [ROUNDS [json|protobuf]]]\n");
        return 2;
    }
    json.offset = malloc(((size_t)events + 1) * sizeof(size_t));
    pb.offset = malloc(((size_t)events + 1) * sizeof(size_t));
    if (json.offset != NULL && pb.offset != NULL && build(&json, &pb, events) == 0 &&
        (!do_json || run("json", &json, events, rounds, 1) == 0) &&
        (!do_pb || run("protobuf", &pb, events, rounds, 0) == 0))
        rc = 0;
    else
        fprintf(stderr, "bench_decode: failed\n");
    free(json.bytes);
    free(json.offset);
    free(pb.bytes);
    free(pb.offset);
    return rc;
}
