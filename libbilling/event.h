/*
 * event.h - the event buffer's layout. Internal to libbilling.
 */
#ifndef BILLING_EVENT_H
#define BILLING_EVENT_H

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
    bl_i128 qty;              /* nano-units */
    char id[BL_ID_MAX + 1];
    char account[BL_ID_MAX + 1];
    char resource[BL_ID_MAX + 1];
    char model[BL_ATTR_MAX + 1];
    char region[BL_ATTR_MAX + 1];
};

/*
 * bl_event_refused_field - the name of the first field whose last setter
 * call failed, or NULL: such an event is refused by billing_rater_add
 * rather than rated with the value the buffer held before.
 */
const char *bl_event_refused_field(const billing_event *ev);

/* bl_event_fingerprint - 64-bit hash of everything but the id. */
uint64_t bl_event_fingerprint(const billing_event *ev);

#endif /* BILLING_EVENT_H */
