/*
 * workload.h - the typical GPU-cloud usage record that the benchmarks
 * rate (bench_rate) or write to files (gen_events), so that both measure
 * the same workload: one-minute records in January 2026 of N accounts
 * with 4 instances each; 5/8 gpu (8 GPUs), 1/8 each gpuless, storage
 * (500 GB) and traffic; RTX4090 or A100-80G; region cn-east-1.
 */
#ifndef BENCH_WORKLOAD_H
#define BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"

typedef struct spec {
    char id[32];
    char account[32];
    char resource[32];
    billing_meter meter;
    billing_time_t start;
    billing_time_t end;
    const char *qty;
    const char *model;
} spec;

/* bench_rnd - the next number of the xorshift64 generator at *@state. */
uint64_t bench_rnd(uint64_t *state);

/*
 * bench_make_spec - a random record of @accounts accounts ("acct-%06d"),
 * drawn from *@rng; its id is left empty for the caller.
 */
void bench_make_spec(spec *s, uint64_t *rng, int accounts);

/*
 * bench_order_spec - move @s to minute @n * 30 days / @count of January
 * (record @n of @count, 0 <= @n < @count), so that records made in the
 * order of @n are in time order: every record of one minute before the
 * next minute's (the in-order stream of bench/billingd.sh).
 */
void bench_order_spec(spec *s, long n, long count);

/* bench_fill_event - reset @ev and set it from @s, with id @id. */
void bench_fill_event(billing_event *ev, const spec *s, const char *id);

/*
 * bench_format_json - @s as one JSON Lines line (newline included) into
 * @buf of @size bytes; snprintf's result.
 */
int bench_format_json(const spec *s, char *buf, size_t size);

#endif /* BENCH_WORKLOAD_H */
