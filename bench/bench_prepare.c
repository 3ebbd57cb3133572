/*
 * bench_prepare.c - the decode-and-rate step of the ingest pipeline
 * (bs_ingest_prepare, store/ingest.h) alone, without the transaction: a
 * JSON Lines file read into memory, prepared batch by batch on each
 * thread count given, the counts alternated round by round in one process
 * so that their ratio holds on a shared machine.
 *
 * Usage: bench_prepare FILE BATCH ROUNDS THREADS...
 *        (BILLING_PG_CONNINFO names a database where `billing load` put
 *        the catalog of FILE's accounts; only the catalog is read)
 * Prints one line per round and thread count: records/s, wall time and
 * this process's CPU time (all threads).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbcatalog.h"
#include "ingest.h"

/* Bounds: the file is read whole. */
#define FILE_MAX (1024L * 1024L * 1024L)
#define RECORDS_MAX 5000000

static double clock_s(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* @path whole into *@buf, cut into records at newlines; returns their count or 0. */
static size_t read_records(const char *path, char **buf, bs_record **recs)
{
    FILE *f = fopen(path, "rb");
    long size;
    size_t n = 0;
    char *p;
    char *nl;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) <= 0 || size > FILE_MAX ||
        fseek(f, 0, SEEK_SET) != 0) {
        if (f != NULL)
            fclose(f);
        return 0;
    }
    *buf = malloc((size_t)size + 1);
    *recs = calloc(RECORDS_MAX, sizeof(**recs));
    if (*buf == NULL || *recs == NULL || fread(*buf, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        return 0;
    }
    fclose(f);
    (*buf)[size] = '\0';
    for (p = *buf; *p != '\0' && n < RECORDS_MAX; p = nl + 1) {
        nl = strchr(p, '\n');
        if (nl == NULL)
            nl = p + strlen(p);
        (*recs)[n].data = p;
        (*recs)[n].len = (size_t)(nl - p);
        (*recs)[n].format = BS_RECORD_JSON;
        (*recs)[n].source = "file:bench";
        n++;
        if (*nl == '\0')
            break;
    }
    return n;
}

/*
 * Prepare every batch of @recs on @threads threads; wall seconds (CPU in
 * *@cpu, records rejected in *@rejected), or -1.
 */
static double run(bs_catalog *cat, const bs_record *recs, size_t n, size_t batch, int threads,
                  bs_record_result *res, double *cpu, size_t *rejected)
{
    bs_ingest *in = bs_ingest_new(cat, NULL);
    bs_error err;
    double t0;
    size_t i;
    size_t j;
    size_t m;

    *rejected = 0;
    if (in == NULL || bs_ingest_set_threads(in, threads) != 0)
        return -1;
    *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    t0 = clock_s(CLOCK_MONOTONIC);
    for (i = 0; i < n; i += m) {
        m = n - i < batch ? n - i : batch;
        if (bs_ingest_prepare(in, &recs[i], m, res, &err) != BS_OK) {
            fprintf(stderr, "bench_prepare: %s\n", err.message);
            bs_ingest_free(in);
            return -1;
        }
        for (j = 0; j < m; j++)
            *rejected += res[j].outcome == BS_RECORD_REJECTED;
    }
    t0 = clock_s(CLOCK_MONOTONIC) - t0;
    *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - *cpu;
    bs_ingest_free(in);
    return t0;
}

int main(int argc, char **argv)
{
    bs_record_result *res;
    bs_record *recs = NULL;
    bs_catalog *cat;
    bs_conn *c;
    bs_error err;
    char *buf = NULL;
    double cpu;
    double s;
    size_t rejected;
    size_t n;
    long batch;
    int rounds;
    int r;
    int a;

    if (argc < 5 || (batch = atol(argv[2])) < 1 || batch > BS_INGEST_BATCH_MAX ||
        (rounds = atoi(argv[3])) < 1) {
        fputs("usage: bench_prepare FILE BATCH ROUNDS THREADS...\n", stderr);
        return 2;
    }
    n = read_records(argv[1], &buf, &recs);
    res = calloc((size_t)batch, sizeof(*res));
    c = bs_connect(bs_conninfo(NULL), NULL, &err);
    cat = c != NULL ? bs_catalog_read(c, NULL, &err) : NULL;
    if (n == 0 || res == NULL || cat == NULL) {
        fprintf(stderr, "bench_prepare: %s\n", n == 0 ? argv[1] : res ? err.message : "memory");
        return 1;
    }
    for (r = 1; r <= rounds; r++) {
        for (a = 4; a < argc; a++) {
            s = run(cat, recs, n, (size_t)batch, atoi(argv[a]), res, &cpu, &rejected);
            if (s < 0)
                return 1;
            printf("round=%d threads=%s records=%zu batch=%ld records_per_s=%.0f wall_s=%.3f"
                   " cpu_s=%.3f rejected=%zu\n",
                   r, argv[a], n, batch, (double)n / s, s, cpu, rejected);
            fflush(stdout);
        }
    }
    bs_catalog_free(cat);
    bs_close(c);
    free(res);
    free(recs);
    free(buf);
    return 0;
}
