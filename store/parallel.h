/*
 * parallel.h - running one job over contiguous slices of a batch on
 * several threads, for bs_ingest_prepare (ingest.c): the records of a
 * batch are decoded and rated in N slices, each into its own rater, and
 * the caller merges the slices' results in slice order, so that what it
 * stores does not depend on N.
 */
#ifndef BILLING_STORE_PARALLEL_H
#define BILLING_STORE_PARALLEL_H

#include <stddef.h>

/* Most slices a batch is cut into (the threads' ids live on the stack). */
#define BS_SLICES_MAX 64

/*
 * bs_slice_fn - the job of slice @k: items [@begin, @end) of the batch.
 * Runs on a thread of its own; it may touch the items of its slice and
 * what the caller set apart for slice @k, nothing shared that is written.
 */
typedef void (*bs_slice_fn)(void *arg, size_t k, size_t begin, size_t end);

/*
 * bs_slice_count - how many slices to cut @n items into for @threads
 * threads (1..BS_SLICES_MAX) so that every slice has at least @min items
 * (a thread costs more than rating a few records): 1..@threads, and 1
 * when @n < 2 * @min. Allocates nothing; thread-safe.
 */
size_t bs_slice_count(size_t n, size_t threads, size_t min);

/*
 * bs_slice_bounds - slice @k of @nslices over @n items: [*@begin, *@end),
 * contiguous, in order, sizes differing by at most one. Thread-safe.
 */
void bs_slice_bounds(size_t n, size_t nslices, size_t k, size_t *begin, size_t *end);

/*
 * bs_parallel_slices - run @fn once for each of the @nslices
 * (1..BS_SLICES_MAX) slices of @n items: slice 0 on the calling thread,
 * every other one on a new thread, and return when all are done (the
 * threads joined). A slice whose thread cannot be created runs on the
 * calling thread instead, so every slice runs exactly once whatever the
 * system allows; only the speed changes. Returns how many threads were
 * created. Allocates nothing that outlives the call.
 */
size_t bs_parallel_slices(size_t n, size_t nslices, bs_slice_fn fn, void *arg);

#endif /* BILLING_STORE_PARALLEL_H */
