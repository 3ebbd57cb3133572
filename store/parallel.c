/*
 * parallel.c - one job over contiguous slices of a batch, on threads
 * (parallel.h). Threads are made per batch: a batch of thousands of
 * records takes milliseconds to rate, a thread some tens of microseconds
 * to start, and nothing stays running between batches.
 */
#include "config.h"

#include <pthread.h>

#include "parallel.h"

typedef struct slice_job {
    bs_slice_fn fn;
    void *arg;
    size_t k;
    size_t begin;
    size_t end;
} slice_job;

size_t bs_slice_count(size_t n, size_t threads, size_t min)
{
    size_t k;

    if (threads > BS_SLICES_MAX)
        threads = BS_SLICES_MAX;
    if (min == 0)
        min = 1;
    k = n / min;
    if (k > threads)
        k = threads;
    return k < 1 ? 1 : k;
}

void bs_slice_bounds(size_t n, size_t nslices, size_t k, size_t *begin, size_t *end)
{
    size_t base = n / nslices;
    size_t extra = n % nslices;

    /* The first @extra slices take one item more. */
    *begin = k * base + (k < extra ? k : extra);
    *end = *begin + base + (k < extra ? 1 : 0);
}

static void *slice_main(void *arg)
{
    slice_job *j = arg;

    j->fn(j->arg, j->k, j->begin, j->end);
    return NULL;
}

size_t bs_parallel_slices(size_t n, size_t nslices, bs_slice_fn fn, void *arg)
{
    slice_job jobs[BS_SLICES_MAX];
    pthread_t tid[BS_SLICES_MAX];
    int started[BS_SLICES_MAX];
    size_t made = 0;
    size_t k;

    if (nslices < 1)
        nslices = 1;
    if (nslices > BS_SLICES_MAX)
        nslices = BS_SLICES_MAX;
    for (k = 0; k < nslices; k++) {
        jobs[k].fn = fn;
        jobs[k].arg = arg;
        jobs[k].k = k;
        bs_slice_bounds(n, nslices, k, &jobs[k].begin, &jobs[k].end);
        started[k] = k > 0 && pthread_create(&tid[k], NULL, slice_main, &jobs[k]) == 0;
        made += (size_t)started[k];
    }
    for (k = 0; k < nslices; k++) {
        if (!started[k])
            slice_main(&jobs[k]);
    }
    for (k = 1; k < nslices; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
    }
    return made;
}
