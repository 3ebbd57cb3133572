/*
 * event.c - the reusable event buffer and its setters.
 */
#include "config.h"

#include <stddef.h>
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
    ev->refused = 0;
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

/*
 * Record the outcome of a setter for field @bit. A refused value is not
 * silently replaced by the one the reused buffer held before: the field is
 * marked refused (and unset) until it is set successfully or the event is
 * reset, and billing_rater_add refuses the event naming the field.
 */
static billing_status outcome(billing_event *ev, unsigned bit, billing_status st)
{
    if (st == BILLING_OK) {
        ev->set |= bit;
        ev->refused &= ~bit;
    } else {
        ev->set &= ~bit;
        ev->refused |= bit;
    }
    return st;
}

/* Copy the @n bytes at @src into @dst (room for @max bytes plus NUL); @n into *@len. */
static billing_status copy_field_n(char *dst, uint8_t *len, size_t max, const char *src, size_t n,
                                   int allow_empty)
{
    if (n > max)
        return BILLING_ERR_TOO_LARGE;
    if (n == 0 && !allow_empty)
        return BILLING_ERR_INVALID;
    memcpy(dst, src, n);
    dst[n] = '\0';
    *len = (uint8_t)n;
    return BILLING_OK;
}

/* Copy the string @src into @dst (room for @max bytes plus NUL); its length into *@len. */
static billing_status copy_field(char *dst, uint8_t *len, size_t max, const char *src,
                                 int allow_empty)
{
    if (src == NULL)
        return BILLING_ERR_INVALID;
    return copy_field_n(dst, len, max, src, strnlen(src, max + 1), allow_empty);
}

billing_status billing_event_set_id(billing_event *ev, const char *id)
{
    return outcome(ev, BL_EV_ID, copy_field(ev->id, &ev->id_len, BL_ID_MAX, id, 0));
}

billing_status billing_event_set_account(billing_event *ev, const char *account)
{
    return outcome(ev, BL_EV_ACCOUNT,
                   copy_field(ev->account, &ev->account_len, BL_ID_MAX, account, 0));
}

billing_status billing_event_set_resource(billing_event *ev, const char *resource)
{
    return outcome(ev, BL_EV_RESOURCE,
                   copy_field(ev->resource, &ev->resource_len, BL_ID_MAX, resource, 0));
}

billing_status billing_event_set_meter(billing_event *ev, billing_meter meter)
{
    if (billing_meter_name(meter) == NULL)
        return outcome(ev, BL_EV_METER, BILLING_ERR_INVALID);
    ev->meter = meter;
    return outcome(ev, BL_EV_METER, BILLING_OK);
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
        return outcome(
            ev, BL_EV_QUANTITY,
            bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "field 'quantity' is missing"));
    rc = bl_qty_parse(&ev->qty, quantity);
    if (rc == -3)
        return outcome(ev, BL_EV_QUANTITY,
                       bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                                 "field 'quantity': '%.48s' is negative", quantity));
    if (rc == -2)
        return outcome(ev, BL_EV_QUANTITY,
                       bl_seterr(errbuf, errsize, BILLING_ERR_RANGE,
                                 "field 'quantity': '%.48s' exceeds 10^18 or has more than 9 "
                                 "decimals",
                                 quantity));
    if (rc != 0)
        return outcome(ev, BL_EV_QUANTITY,
                       bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                                 "field 'quantity': '%.48s' is not a decimal number", quantity));
    return outcome(ev, BL_EV_QUANTITY, BILLING_OK);
}

/* Where each billing_event_text field lives, indexed by billing_event_text. */
static const struct text_field {
    size_t text;
    size_t len;
    unsigned bit;
    size_t max;
} text_fields[] = {
    {offsetof(billing_event, id), offsetof(billing_event, id_len), BL_EV_ID, BL_ID_MAX},
    {offsetof(billing_event, account), offsetof(billing_event, account_len), BL_EV_ACCOUNT,
     BL_ID_MAX},
    {offsetof(billing_event, resource), offsetof(billing_event, resource_len), BL_EV_RESOURCE,
     BL_ID_MAX},
    {offsetof(billing_event, model), offsetof(billing_event, model_len), BL_EV_MODEL, BL_ATTR_MAX},
    {offsetof(billing_event, region), offsetof(billing_event, region_len), BL_EV_REGION,
     BL_ATTR_MAX},
};

billing_status billing_event_set_text(billing_event *ev, billing_event_text field, const char *text,
                                      size_t len)
{
    const struct text_field *f;
    size_t max;

    if ((unsigned)field >= sizeof(text_fields) / sizeof(text_fields[0]))
        return BILLING_ERR_INVALID;
    f = &text_fields[field];
    max = f->max;
    /* A NUL would end the string early for every reader of the field. */
    if (text == NULL || memchr(text, '\0', len < max + 1 ? len : max + 1) != NULL)
        return outcome(ev, f->bit, BILLING_ERR_INVALID);
    return outcome(ev, f->bit,
                   copy_field_n((char *)ev + f->text, (uint8_t *)((char *)ev + f->len), max, text,
                                len, max == BL_ATTR_MAX));
}

billing_status billing_event_set_model(billing_event *ev, const char *model)
{
    return outcome(ev, BL_EV_MODEL, copy_field(ev->model, &ev->model_len, BL_ATTR_MAX, model, 1));
}

billing_status billing_event_set_region(billing_event *ev, const char *region)
{
    return outcome(ev, BL_EV_REGION,
                   copy_field(ev->region, &ev->region_len, BL_ATTR_MAX, region, 1));
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

billing_meter billing_event_meter(const billing_event *ev)
{
    return ev->meter;
}

billing_time_t billing_event_start(const billing_event *ev)
{
    return ev->start;
}

billing_time_t billing_event_end(const billing_event *ev)
{
    return ev->end;
}

const char *billing_event_model(const billing_event *ev)
{
    return ev->model;
}

const char *billing_event_region(const billing_event *ev)
{
    return ev->region;
}

int billing_event_quantity(const billing_event *ev, char *buf, size_t size)
{
    if (buf == NULL)
        return -1;
    return bl_qty_to_string(ev->qty, buf, size);
}

const char *bl_event_refused_field(const billing_event *ev)
{
    static const struct {
        unsigned bit;
        const char *name;
    } fields[] = {
        {BL_EV_ID, "id"},        {BL_EV_ACCOUNT, "account"},   {BL_EV_RESOURCE, "resource"},
        {BL_EV_METER, "meter"},  {BL_EV_QUANTITY, "quantity"}, {BL_EV_MODEL, "model"},
        {BL_EV_REGION, "region"}};
    size_t i;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (ev->refused & fields[i].bit)
            return fields[i].name;
    }
    return NULL;
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
