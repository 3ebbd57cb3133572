/*
 * workload.c - see workload.h.
 */
#include "config.h"

#include <stdio.h>

#include "workload.h"

/* 2026-01-01T00:00:00+08:00 */
#define JAN_2026 INT64_C(1767196800)
#define MINUTES_IN_30_DAYS (30 * 1440)

uint64_t bench_rnd(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

void bench_make_spec(spec *s, uint64_t *rng, int accounts)
{
    static const billing_meter meters[8] = {
        BILLING_METER_GPU, BILLING_METER_GPU,     BILLING_METER_GPU,     BILLING_METER_GPU,
        BILLING_METER_GPU, BILLING_METER_GPULESS, BILLING_METER_STORAGE, BILLING_METER_TRAFFIC};
    int a = (int)(bench_rnd(rng) % (uint64_t)accounts);

    s->id[0] = '\0';
    snprintf(s->account, sizeof(s->account), "acct-%06d", a);
    snprintf(s->resource, sizeof(s->resource), "i-%06d-%d", a, (int)(bench_rnd(rng) % 4));
    s->meter = meters[bench_rnd(rng) % 8];
    /* Minute-aligned one-minute usage records inside January. */
    s->start = (JAN_2026 + (billing_time_t)(bench_rnd(rng) % MINUTES_IN_30_DAYS) * 60) *
               BILLING_NS_PER_SEC;
    s->end = s->start + 60 * BILLING_NS_PER_SEC;
    s->qty = s->meter == BILLING_METER_GPU       ? "8"
             : s->meter == BILLING_METER_STORAGE ? "500"
             : s->meter == BILLING_METER_TRAFFIC ? "123456789"
                                                 : "1";
    s->model = (bench_rnd(rng) % 3) ? "RTX4090" : "A100-80G";
}

void bench_order_spec(spec *s, long n, long count)
{
    s->start = (JAN_2026 + (billing_time_t)((int64_t)n * MINUTES_IN_30_DAYS / count) * 60) *
               BILLING_NS_PER_SEC;
    s->end = s->start + 60 * BILLING_NS_PER_SEC;
}

void bench_fill_event(billing_event *ev, const spec *s, const char *id)
{
    billing_event_reset(ev);
    billing_event_set_id(ev, id);
    billing_event_set_account(ev, s->account);
    billing_event_set_resource(ev, s->resource);
    billing_event_set_meter(ev, s->meter);
    billing_event_set_interval(ev, s->start, s->end);
    billing_event_set_quantity(ev, s->qty, NULL, 0);
    billing_event_set_model(ev, s->model);
    billing_event_set_region(ev, "cn-east-1");
}

int bench_format_json(const spec *s, char *buf, size_t size)
{
    char start[40];
    char end[40];

    billing_time_format(s->start, start, sizeof(start));
    billing_time_format(s->end, end, sizeof(end));
    return snprintf(buf, size,
                    "{\"id\":\"%s\",\"account\":\"%s\",\"resource\":\"%s\",\"meter\":\"%s\","
                    "\"start\":\"%s\",\"end\":\"%s\",\"quantity\":\"%s\",\"model\":\"%s\","
                    "\"region\":\"cn-east-1\"}\n",
                    s->id, s->account, s->resource, billing_meter_name(s->meter), start, end,
                    s->qty, s->model);
}
