/*
 * event.h - the event buffer's layout. Internal to libbilling.
 */
#ifndef BILLING_EVENT_H
#define BILLING_EVENT_H

#include <string.h>

#include "decimal.h"
#include "internal.h"

/* Bits of billing_event.set, to tell "missing" from "empty". */
#define BL_EV_ID 0x01u
#define BL_EV_ACCOUNT 0x02u
#define BL_EV_RESOURCE 0x04u
#define BL_EV_METER 0x08u
#define BL_EV_INTERVAL 0x10u
#define BL_EV_QUANTITY 0x20u
#define BL_EV_MODEL 0x40u
#define BL_EV_REGION 0x80u
/* Every field: the state after billing_event_reset and every setter succeeding. */
#define BL_EV_ALL 0xffu

struct billing_event {
    unsigned set;
    unsigned refused; /* fields whose last setter call failed (BL_EV_*) */
    uint8_t id_len;
    uint8_t account_len;
    uint8_t resource_len;
    uint8_t model_len;
    uint8_t region_len;
    billing_meter meter;
    billing_time_t start;
    billing_time_t end;
    bl_i128 qty; /* nano-units */
    char id[BL_ID_MAX + 1];
    char account[BL_ID_MAX + 1];
    char resource[BL_ID_MAX + 1];
    char model[BL_ATTR_MAX + 1];
    char region[BL_ATTR_MAX + 1];
};

/*
 * bl_event_put_text - a text field's array @dst (and *@len) set to the @n
 * bytes at @src, as billing_event_set_text would but without its checks:
 * for decoders built in this tree (formats/eventjson.c's usual-line path)
 * that fill the buffer in place and have already checked what the setter
 * checks (no NUL, @n within the field's bound, and not empty for the ids).
 * Such a decoder sets every field, then set to BL_EV_ALL and refused to 0.
 * The arrays stay whole words long (rater.c's static assertion).
 */
static inline void bl_event_put_text(char *dst, uint8_t *len, const char *src, size_t n)
{
    memcpy(dst, src, n);
    dst[n] = '\0';
    *len = (uint8_t)n;
}

/*
 * bl_event_refused_field - the name of the first field whose last setter
 * call failed, or NULL: such an event is refused by billing_rater_add
 * rather than rated with the value the buffer held before.
 */
const char *bl_event_refused_field(const billing_event *ev);

/* bl_event_fingerprint - 64-bit hash of everything but the id. */
uint64_t bl_event_fingerprint(const billing_event *ev);

#endif /* BILLING_EVENT_H */
