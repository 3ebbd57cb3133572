/*
 * api_load.c - the load client of bench/api-events.sh: C connections to
 * billingd's HTTP API, each on one keep-alive HTTP/1.1 connection,
 * each sending R requests of POST /v1/events with B new events (JSON
 * Lines, ids "<prefix>-<connection>-<request>-<i>", the example's
 * accounts, January 2026), one request at a time per connection.
 *
 *   api_load HOST PORT KEY PREFIX BATCH CONNECTIONS REQUESTS [FILE]
 *
 * Prints one line of figures: events, seconds, events/s, requests/s, the
 * latency of a request (p50, p90, p99, max in ms) and the statuses seen;
 * exits 1 if any answer was not 200 or 202. With FILE, writes every event
 * sent there instead (JSON Lines: the baseline's `billing ingest` input)
 * and sends nothing.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "httpload.h"

#define EVENT_MAX 320
#define ANSWER_MAX (4 * 1024 * 1024)

static const char *const accounts[] = {"lab-a", "student-b", "team-c"};

typedef struct opts {
    const char *host;
    int port;
    const char *key;
    const char *prefix;
    long batch;
    long conns;
    long requests;
} opts;

typedef struct worker {
    const opts *o;
    long id;
    int64_t *lat_us; /* one per request */
    long status[6];  /* 200, 202, 4xx, 503, 5xx, other */
    int failed;
    pthread_t th;
} worker;

/* Event @i of request @r of connection @c as one JSON line into @buf; its length. */
static int event_line(const opts *o, long c, long r, long i, char *buf, size_t size)
{
    long n = (c * o->requests + r) * o->batch + i;
    int hour = (int)(n % 600);

    return snprintf(buf, size,
                    "{\"id\":\"%s-%ld-%ld-%ld\",\"account\":\"%s\",\"resource\":\"i-%ld\","
                    "\"meter\":\"gpu\",\"start\":\"2026-01-%02dT%02d:00:00Z\","
                    "\"end\":\"2026-01-%02dT%02d:30:00Z\",\"quantity\":\"8\","
                    "\"model\":\"RTX4090\",\"region\":\"cn-east-1\"}\n",
                    o->prefix, c, r, i, accounts[n % 3], n % 97, 2 + hour / 24, hour % 24,
                    2 + hour / 24, hour % 24);
}

static void *run(void *arg)
{
    worker *w = arg;
    const opts *o = w->o;
    size_t cap = (size_t)o->batch * EVENT_MAX + 1024;
    char *req = malloc(cap);
    char *ans = malloc(ANSWER_MAX);
    int fd = -1;
    long r;
    long i;

    if (req == NULL || ans == NULL)
        goto fail;
    fd = hl_connect(o->host, o->port);
    if (fd < 0)
        goto fail;
    for (r = 0; r < o->requests; r++) {
        size_t head = 512;
        size_t len = 0;
        int hl;
        int st;
        int64_t t0;

        for (i = 0; i < o->batch; i++)
            len += (size_t)event_line(o, w->id, r, i, req + head + len, cap - head - len);
        hl = snprintf(ans, 512,
                      "POST /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                      "Content-Type: application/x-ndjson\r\nContent-Length: %zu\r\n\r\n",
                      o->host, o->key, len);
        memcpy(req + head - (size_t)hl, ans, (size_t)hl);
        t0 = hl_now_us();
        if (hl_send_all(fd, req + head - (size_t)hl, (size_t)hl + len) != 0)
            goto fail;
        st = hl_read_answer(fd, ans, ANSWER_MAX);
        w->lat_us[r] = hl_now_us() - t0;
        if (st < 0)
            goto fail;
        w->status[st == 200   ? 0
                  : st == 202 ? 1
                  : st < 500  ? 2
                  : st == 503 ? 3
                  : st < 600  ? 4
                              : 5]++;
    }
    close(fd);
    free(req);
    free(ans);
    return NULL;
fail:
    fprintf(stderr, "api_load: connection %ld: %s\n", w->id, strerror(errno));
    w->failed = 1;
    if (fd >= 0)
        close(fd);
    free(req);
    free(ans);
    return NULL;
}

int main(int argc, char **argv)
{
    opts o;
    worker *ws;
    int64_t *all;
    int64_t t0;
    double secs;
    long status[6] = {0};
    long n;
    long c;
    long k;
    int failed = 0;

    if (argc != 8 && argc != 9) {
        fputs("usage: api_load HOST PORT KEY PREFIX BATCH CONNECTIONS REQUESTS [FILE]\n", stderr);
        return 2;
    }
    o.host = argv[1];
    o.port = atoi(argv[2]);
    o.key = argv[3];
    o.prefix = argv[4];
    o.batch = atol(argv[5]);
    o.conns = atol(argv[6]);
    o.requests = atol(argv[7]);
    if (o.port < 1 || o.batch < 1 || o.batch > 10000 || o.conns < 1 || o.conns > 64 ||
        o.requests < 1) {
        fputs("api_load: bad PORT, BATCH (1..10000), CONNECTIONS (1..64) or REQUESTS\n", stderr);
        return 2;
    }
    if (argc == 9) {
        FILE *f = fopen(argv[8], "w");
        char line[EVENT_MAX];
        long r;
        long i;

        if (f == NULL)
            return 1;
        for (c = 0; c < o.conns; c++)
            for (r = 0; r < o.requests; r++)
                for (i = 0; i < o.batch; i++) {
                    event_line(&o, c, r, i, line, sizeof(line));
                    fputs(line, f);
                }
        return fclose(f) == 0 ? 0 : 1;
    }
    ws = calloc((size_t)o.conns, sizeof(*ws));
    all = calloc((size_t)(o.conns * o.requests), sizeof(*all));
    if (ws == NULL || all == NULL)
        return 1;
    t0 = hl_now_us();
    for (c = 0; c < o.conns; c++) {
        ws[c].o = &o;
        ws[c].id = c;
        ws[c].lat_us = all + c * o.requests;
        if (pthread_create(&ws[c].th, NULL, run, &ws[c]) != 0)
            return 1;
    }
    for (c = 0; c < o.conns; c++) {
        pthread_join(ws[c].th, NULL);
        failed |= ws[c].failed;
        for (k = 0; k < 6; k++)
            status[k] += ws[c].status[k];
    }
    secs = (double)(hl_now_us() - t0) / 1e6; /* figures for the report only, not money */
    n = o.conns * o.requests;
    qsort(all, (size_t)n, sizeof(*all), hl_cmp64);
    printf("events=%ld seconds=%.3f events_per_s=%.0f requests_per_s=%.0f p50_ms=%.2f "
           "p90_ms=%.2f p99_ms=%.2f max_ms=%.2f s200=%ld s202=%ld s4xx=%ld s503=%ld s5xx=%ld\n",
           n * o.batch, secs, (double)(n * o.batch) / secs, (double)n / secs,
           (double)all[n / 2] / 1000, (double)all[n * 9 / 10] / 1000,
           (double)all[n * 99 / 100] / 1000, (double)all[n - 1] / 1000, status[0], status[1],
           status[2], status[3], status[4]);
    free(ws);
    free(all);
    return failed || status[2] + status[3] + status[4] + status[5] > 0;
}
