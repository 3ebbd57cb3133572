/*
 * event.c - the reusable event buffer and its setters.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "hash.h"

billing_event *billing_event_new(void)
{
    billing_event *ev = malloc(sizeof(*ev));

    if (ev != NULL)
        billing_event_reset(ev);
    return ev;
}

void billing_event_destroy(billing_event *ev)
{
    free(ev);
}

void billing_event_reset(billing_event *ev)
{
    if (ev == NULL)
        return;
    ev->set = 0;
    ev->id_len = 0;
    ev->account_len = 0;
    ev->resource_len = 0;
    ev->model_len = 0;
    ev->region_len = 0;
    ev->meter = BILLING_METER_GPU;
    ev->start = 0;
    ev->end = 0;
    ev->qty = 0;
    ev->id[0] = '\0';
    ev->account[0] = '\0';
    ev->resource[0] = '\0';
    ev->model[0] = '\0';
    ev->region[0] = '\0';
}

/* Copy @src into @dst (room for @max bytes plus NUL); its length into *@len. */
static billing_status copy_field(char *dst, uint8_t *len, size_t max, const char *src,
                                 int allow_empty)
{
    size_t n;

    if (src == NULL)
        return BILLING_ERR_INVALID;
    n = strnlen(src, max + 1);
    if (n > max)
        return BILLING_ERR_TOO_LARGE;
    if (n == 0 && !allow_empty)
        return BILLING_ERR_INVALID;
    memcpy(dst, src, n);
    dst[n] = '\0';
    *len = (uint8_t)n;
    return BILLING_OK;
}

billing_status billing_event_set_id(billing_event *ev, const char *id)
{
    billing_status st = copy_field(ev->id, &ev->id_len, BL_ID_MAX, id, 0);

    if (st == BILLING_OK)
        ev->set |= BL_EV_ID;
    return st;
}

billing_status billing_event_set_account(billing_event *ev, const char *account)
{
    billing_status st = copy_field(ev->account, &ev->account_len, BL_ID_MAX, account, 0);

    if (st == BILLING_OK)
        ev->set |= BL_EV_ACCOUNT;
    return st;
}

billing_status billing_event_set_resource(billing_event *ev, const char *resource)
{
    billing_status st = copy_field(ev->resource, &ev->resource_len, BL_ID_MAX, resource, 0);

    if (st == BILLING_OK)
        ev->set |= BL_EV_RESOURCE;
    return st;
}

billing_status billing_event_set_meter(billing_event *ev, billing_meter meter)
{
    if (billing_meter_name(meter) == NULL)
        return BILLING_ERR_INVALID;
    ev->meter = meter;
    ev->set |= BL_EV_METER;
    return BILLING_OK;
}

void billing_event_set_interval(billing_event *ev, billing_time_t start, billing_time_t end)
{
    ev->start = start;
    ev->end = end;
    ev->set |= BL_EV_INTERVAL;
}

billing_status billing_event_set_quantity(billing_event *ev, const char *quantity, char *errbuf,
                                          size_t errsize)
{
    int rc;

    if (quantity == NULL)
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "field 'quantity' is missing");
    rc = bl_qty_parse(&ev->qty, quantity);
    if (rc == -3)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         "field 'quantity': '%.48s' is negative", quantity);
    if (rc == -2)
        return bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                         "field 'quantity': '%.48s' exceeds 10^18 or has more than 9 decimals",
                         quantity);
    if (rc != 0)
        return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                         "field 'quantity': '%.48s' is not a decimal number", quantity);
    ev->set |= BL_EV_QUANTITY;
    return BILLING_OK;
}

billing_status billing_event_set_model(billing_event *ev, const char *model)
{
    return copy_field(ev->model, &ev->model_len, BL_ATTR_MAX, model, 1);
}

billing_status billing_event_set_region(billing_event *ev, const char *region)
{
    return copy_field(ev->region, &ev->region_len, BL_ATTR_MAX, region, 1);
}

const char *billing_event_id(const billing_event *ev)
{
    return ev->id;
}

const char *billing_event_account(const billing_event *ev)
{
    return ev->account;
}

const char *billing_event_resource(const billing_event *ev)
{
    return ev->resource;
}

void billing_event_interval(const billing_event *ev, billing_time_t *start, billing_time_t *end)
{
    *start = ev->start;
    *end = ev->end;
}

uint64_t bl_event_fingerprint(const billing_event *ev)
{
    uint64_t h = bl_hash_bytes(ev->account, ev->account_len, 1);

    h = bl_hash_bytes(ev->resource, ev->resource_len, h);
    h = bl_hash_bytes(ev->model, ev->model_len, h ^ 0x51);
    h = bl_hash_bytes(ev->region, ev->region_len, h ^ 0x52);
    h ^= bl_hash_mix((uint64_t)ev->start + 0x1000u * (uint64_t)ev->meter);
    h = bl_hash_mix(h ^ (uint64_t)ev->end);
    h = bl_hash_mix(h ^ (uint64_t)ev->qty);
    h = bl_hash_mix(h ^ (uint64_t)(ev->qty >> 64));
    return h;
}
