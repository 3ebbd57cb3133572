/*
 * api_get.c - the load client of bench/api-balance.sh: GET requests at a
 * fixed rate (open loop) on C keep-alive HTTP/1.1 connections to billingd's
 * HTTP API, each request for a random one of N accounts
 * ("acct-000000"...), the path PREFIX + account + SUFFIX.
 *
 *   api_get HOST PORT KEY PREFIX SUFFIX ACCOUNTS RATE SECONDS CONNECTIONS
 *
 * Each connection sends its share of RATE requests a second, one at a time,
 * each at its scheduled instant or as soon as the previous answer came; a
 * request's latency runs from its scheduled instant to its answer, so a
 * slow answer counts against every request it delayed (no coordinated
 * omission). Prints one line: requests, seconds, requests/s, the latency
 * (p50, p90, p99, p99.9, max in ms) and the statuses; exits 1 if any answer
 * was not 200. With API_GET_PER_SECOND=1 in the environment, also one line
 * per second of the run on stderr (the requests due in it: p50, p99, max),
 * to see when a tail happened.
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

#define ANSWER_MAX (1024 * 1024)

typedef struct opts {
    const char *host;
    int port;
    const char *key;
    const char *prefix;
    const char *suffix;
    long accounts;
    long rate;
    long seconds;
    long conns;
    int64_t t0; /* the run's start, microseconds (hl_now_us) */
} opts;

typedef struct worker {
    const opts *o;
    long id;
    long n;          /* requests to send */
    int64_t *lat_us; /* one per request */
    int32_t *sec;    /* one per request: the second of the run it was due in */
    long ok;
    long bad;
    int failed;
    pthread_t th;
} worker;

/* One stderr line per second of the run: the requests due in it (sec), their latency. */
static void per_second(const int64_t *lat_us, const int32_t *sec, long n, long seconds)
{
    int64_t *one = malloc((size_t)n * sizeof(*one));
    long s;
    long i;

    if (one == NULL)
        return;
    for (s = 0; s <= seconds; s++) {
        long k = 0;

        for (i = 0; i < n; i++)
            if (sec[i] == s)
                one[k++] = lat_us[i];
        if (k == 0)
            continue;
        qsort(one, (size_t)k, sizeof(*one), hl_cmp64);
        fprintf(stderr, "second=%ld requests=%ld p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", s, k,
                (double)one[k / 2] / 1000, (double)one[k * 99 / 100] / 1000,
                (double)one[k - 1] / 1000);
    }
    free(one);
}

static void *run(void *arg)
{
    worker *w = arg;
    const opts *o = w->o;
    char *ans = malloc(ANSWER_MAX);
    char req[1024];
    uint64_t rng = (uint64_t)(w->id + 1) * UINT64_C(0x9E3779B97F4A7C15);
    int64_t start;
    int64_t step = 1000000 * o->conns / o->rate; /* microseconds between this one's sends */
    int fd = -1;
    long r;

    if (ans == NULL)
        goto fail;
    fd = hl_connect(o->host, o->port);
    if (fd < 0)
        goto fail;
    /* The connections' schedules interleave: connection i starts i steps / C later. */
    start = hl_now_us() + step * w->id / o->conns;
    for (r = 0; r < w->n; r++) {
        int64_t due = start + r * step;
        int64_t t = hl_now_us();
        int len;
        int st;

        if (due > t) {
            struct timespec ts = {(time_t)((due - t) / 1000000),
                                  (long)((due - t) % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        len =
            snprintf(req, sizeof(req),
                     "GET %sacct-%06ld%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n",
                     o->prefix, (long)(rng % (uint64_t)o->accounts), o->suffix, o->host, o->key);
        if (hl_send_all(fd, req, (size_t)len) != 0)
            goto fail;
        st = hl_read_answer(fd, ans, ANSWER_MAX);
        w->lat_us[r] = hl_now_us() - due;
        w->sec[r] = (int32_t)((due - o->t0) / 1000000);
        if (st < 0)
            goto fail;
        if (st == 200)
            w->ok++;
        else
            w->bad++;
    }
    close(fd);
    free(ans);
    return NULL;
fail:
    fprintf(stderr, "api_get: connection %ld: %s\n", w->id, strerror(errno));
    w->failed = 1;
    if (fd >= 0)
        close(fd);
    free(ans);
    return NULL;
}

int main(int argc, char **argv)
{
    opts o;
    worker *ws;
    int64_t *all;
    int32_t *secs_of;
    const char *ps = getenv("API_GET_PER_SECOND");
    double secs;
    long ok = 0;
    long bad = 0;
    long n = 0;
    long per;
    long c;
    int failed = 0;

    if (argc != 10) {
        fputs("usage: api_get HOST PORT KEY PREFIX SUFFIX ACCOUNTS RATE SECONDS CONNECTIONS\n",
              stderr);
        return 2;
    }
    o.host = argv[1];
    o.port = atoi(argv[2]);
    o.key = argv[3];
    o.prefix = argv[4];
    o.suffix = argv[5];
    o.accounts = atol(argv[6]);
    o.rate = atol(argv[7]);
    o.seconds = atol(argv[8]);
    o.conns = atol(argv[9]);
    if (o.port < 1 || o.accounts < 1 || o.accounts > 1000000 || o.rate < 1 || o.rate > 1000000 ||
        o.seconds < 1 || o.conns < 1 || o.conns > 256 || o.rate < o.conns) {
        fputs("api_get: bad PORT, ACCOUNTS, RATE (CONNECTIONS..1000000), SECONDS or "
              "CONNECTIONS (1..256)\n",
              stderr);
        return 2;
    }
    per = o.rate * o.seconds / o.conns;
    ws = calloc((size_t)o.conns, sizeof(*ws));
    all = calloc((size_t)(per * o.conns), sizeof(*all));
    secs_of = calloc((size_t)(per * o.conns), sizeof(*secs_of));
    if (ws == NULL || all == NULL || secs_of == NULL)
        return 1;
    o.t0 = hl_now_us();
    for (c = 0; c < o.conns; c++) {
        ws[c].o = &o;
        ws[c].id = c;
        ws[c].n = per;
        ws[c].lat_us = all + c * per;
        ws[c].sec = secs_of + c * per;
        if (pthread_create(&ws[c].th, NULL, run, &ws[c]) != 0)
            return 1;
    }
    for (c = 0; c < o.conns; c++) {
        pthread_join(ws[c].th, NULL);
        failed |= ws[c].failed;
        ok += ws[c].ok;
        bad += ws[c].bad;
    }
    secs = (double)(hl_now_us() - o.t0) / 1e6; /* figures for the report only, not money */
    n = per * o.conns;
    if (ps != NULL && strcmp(ps, "1") == 0)
        per_second(all, secs_of, n, o.seconds);
    qsort(all, (size_t)n, sizeof(*all), hl_cmp64);
    printf("requests=%ld seconds=%.3f requests_per_s=%.0f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f "
           "p999_ms=%.2f max_ms=%.2f s200=%ld other=%ld\n",
           n, secs, (double)n / secs, (double)all[n / 2] / 1000, (double)all[n * 9 / 10] / 1000,
           (double)all[n * 99 / 100] / 1000, (double)all[n * 999 / 1000] / 1000,
           (double)all[n - 1] / 1000, ok, bad);
    free(ws);
    free(all);
    free(secs_of);
    return failed || bad > 0;
}
