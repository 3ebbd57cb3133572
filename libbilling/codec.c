/*
 * codec.c - billing.v1.UsageEvent bytes <-> billing_event.
 *
 * Decoding is two passes over at most BILLING_EVENT_WIRE_MAX bytes:
 *  1. a scan of the wire format driven by the generated descriptor, which
 *     protobuf-c cannot replace: its unpack returns NULL without saying
 *     why, and it silently truncates a string at an embedded NUL byte;
 *  2. protobuf-c's unpack into a stack arena (no heap allocation for
 *     ordinary messages), then the setters and the catalog-free checks.
 * Messages use billing_event's field names, not the proto names, so that
 * a bad event reads the same whether it came as JSON or protobuf.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing/v1/usage_event.pb-c.h"
#include "event.h"
#include "zone.h"

/* billing_event field names, indexed by UsageEvent field number. */
static const char *const event_field_names[] = {
    NULL, "id", "account", "resource", "meter", "start", "end", "quantity", "model", "region",
};
#define EVENT_FIELD_COUNT (sizeof(event_field_names) / sizeof(event_field_names[0]))

/* Meter enum: proto value (index) -> billing_meter; 0 is METER_UNSPECIFIED. */
static const billing_meter proto_meters[] = {
    BILLING_METER_GPU,     BILLING_METER_GPU,     BILLING_METER_GPULESS,
    BILLING_METER_STORAGE, BILLING_METER_TRAFFIC,
};
#define PROTO_METER_COUNT (sizeof(proto_meters) / sizeof(proto_meters[0]))

/* The schema nests Timestamp in UsageEvent, no deeper. */
#define SCAN_DEPTH_MAX 2

/* ---------------------------------------------------------------------- */
/* Pass 1: the wire format                                                 */
/* ---------------------------------------------------------------------- */

typedef struct wire {
    const unsigned char *base;
    const unsigned char *p;
    const unsigned char *end;
} wire;

/* Read a varint of at most 10 bytes; 0 on success, -1 if malformed. */
static int wire_varint(wire *w, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    unsigned char b;

    while (w->p < w->end && shift < 64) {
        b = *w->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *out = v;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* The wire type a field of this descriptor is written with. */
static unsigned expected_wire_type(const ProtobufCFieldDescriptor *fd)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return PROTOBUF_C_WIRE_TYPE_32BIT;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return PROTOBUF_C_WIRE_TYPE_64BIT;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
    default:
        return PROTOBUF_C_WIRE_TYPE_VARINT;
    }
}

/* The field being scanned; its printable name is built only for a message. */
typedef struct scan_field {
    const struct scan_field *outer;     /* enclosing field, NULL at top level */
    const ProtobufCFieldDescriptor *fd; /* NULL for a field unknown to this schema */
    uint64_t number;
} scan_field;

/* A field's name for messages: "quantity", "start.nanos", "#12" (unknown). */
static void field_label(char *out, size_t size, const scan_field *f)
{
    char outer[64];

    outer[0] = '\0';
    if (f->outer != NULL)
        field_label(outer, sizeof(outer), f->outer);
    if (f->fd == NULL)
        snprintf(out, size, "%s%s#%llu", outer, f->outer ? "." : "", (unsigned long long)f->number);
    else if (f->outer != NULL)
        snprintf(out, size, "%s.%s", outer, f->fd->name);
    else if (f->number < EVENT_FIELD_COUNT)
        snprintf(out, size, "%s", event_field_names[f->number]);
    else
        snprintf(out, size, "%s", f->fd->name);
}

static billing_status scan_fail(const scan_field *f, char *errbuf, size_t errsize, const char *fmt,
                                ...) BL_PRINTF(4, 5);

/* "event: field 'LABEL': " then the message. */
static billing_status scan_fail(const scan_field *f, char *errbuf, size_t errsize, const char *fmt,
                                ...)
{
    char label[96];
    char why[160];
    va_list ap;

    field_label(label, sizeof(label), f);
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "event: field '%s': %s", label, why);
}

/* Strings of the event are printable ASCII; a NUL would also be truncated by unpack. */
static billing_status check_string(const scan_field *f, const unsigned char *s, size_t len,
                                   char *errbuf, size_t errsize)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (s[i] < 0x20 || s[i] > 0x7e)
            return scan_fail(f, errbuf, errsize,
                             "byte 0x%02x at position %zu is not printable ASCII", s[i], i);
    }
    return BILLING_OK;
}

static billing_status scan_message(const ProtobufCMessageDescriptor *desc, const scan_field *outer,
                                   wire *w, int depth, char *errbuf, size_t errsize);

/* Check the value of one field, whose key has just been read. */
static billing_status scan_value(const scan_field *f, unsigned type, wire *w, int depth,
                                 char *errbuf, size_t errsize)
{
    uint64_t v;
    size_t left = (size_t)(w->end - w->p);
    size_t at = (size_t)(w->p - w->base);
    wire sub;

    if (type == PROTOBUF_C_WIRE_TYPE_VARINT) {
        if (wire_varint(w, &v) != 0)
            return scan_fail(f, errbuf, errsize, "truncated varint at byte %zu", at);
        return BILLING_OK;
    }
    if (type == PROTOBUF_C_WIRE_TYPE_64BIT || type == PROTOBUF_C_WIRE_TYPE_32BIT) {
        v = type == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
        if (left < v)
            return scan_fail(f, errbuf, errsize, "truncated fixed-size value at byte %zu", at);
        w->p += v;
        return BILLING_OK;
    }
    if (type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)
        return scan_fail(f, errbuf, errsize, "unsupported wire type %u at byte %zu", type, at);
    if (wire_varint(w, &v) != 0 || v > (uint64_t)(w->end - w->p))
        return scan_fail(f, errbuf, errsize, "length at byte %zu runs past the end of the message",
                         at);
    sub.base = w->base;
    sub.p = w->p;
    sub.end = w->p + v;
    w->p = sub.end;
    if (f->fd != NULL && f->fd->type == PROTOBUF_C_TYPE_STRING)
        return check_string(f, sub.p, (size_t)v, errbuf, errsize);
    if (f->fd == NULL || f->fd->type != PROTOBUF_C_TYPE_MESSAGE)
        return BILLING_OK;
    return scan_message(f->fd->descriptor, f, &sub, depth + 1, errbuf, errsize);
}

static billing_status scan_message(const ProtobufCMessageDescriptor *desc, const scan_field *outer,
                                   wire *w, int depth, char *errbuf, size_t errsize)
{
    uint64_t key;
    unsigned type;
    size_t at;
    scan_field f;
    billing_status st;

    if (depth > SCAN_DEPTH_MAX)
        return scan_fail(outer, errbuf, errsize, "nests too deep");
    f.outer = outer;
    while (w->p < w->end) {
        at = (size_t)(w->p - w->base);
        if (wire_varint(w, &key) != 0 || (key >> 3) == 0 || (key >> 3) > 536870911u) {
            if (outer != NULL)
                return scan_fail(outer, errbuf, errsize, "malformed field key at byte %zu", at);
            return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                             "event: malformed field key at byte %zu", at);
        }
        f.number = key >> 3;
        type = (unsigned)(key & 7);
        f.fd = protobuf_c_message_descriptor_get_field(desc, (unsigned)f.number);
        if (f.fd != NULL && type != expected_wire_type(f.fd))
            return scan_fail(&f, errbuf, errsize, "wire type %u at byte %zu, expected %u", type, at,
                             expected_wire_type(f.fd));
        st = scan_value(&f, type, w, depth, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
    }
    return BILLING_OK;
}

/* ---------------------------------------------------------------------- */
/* Pass 2: unpack into an arena                                            */
/* ---------------------------------------------------------------------- */

/*
 * Room for the message, its two timestamps and its strings: an ordinary
 * event never touches the heap. Unusual messages (many unknown fields)
 * overflow to malloc and are freed with free_unpacked.
 */
#define ARENA_SIZE (2 * BILLING_EVENT_WIRE_MAX)

typedef struct arena {
    unsigned char *base;
    size_t used;
    size_t heap; /* live heap blocks */
    int failed;  /* a heap allocation failed */
} arena;

static void *arena_alloc(void *data, size_t size)
{
    arena *a = data;
    size_t rounded = (size + 15u) & ~(size_t)15u;
    void *p;

    if (size <= ARENA_SIZE && rounded <= ARENA_SIZE - a->used) {
        p = a->base + a->used;
        a->used += rounded;
        return p;
    }
    p = malloc(size);
    if (p == NULL)
        a->failed = 1;
    else
        a->heap++;
    return p;
}

static void arena_free(void *data, void *p)
{
    arena *a = data;
    uintptr_t u = (uintptr_t)p;

    if (p == NULL || (u >= (uintptr_t)a->base && u < (uintptr_t)a->base + ARENA_SIZE))
        return;
    a->heap--;
    free(p);
}

/* ---------------------------------------------------------------------- */
/* Fields                                                                  */
/* ---------------------------------------------------------------------- */

/* "event 'ID': " then the message; "event: " while the id is unknown. */
static billing_status fail(const billing_event *ev, char *errbuf, size_t errsize,
                           billing_status status, const char *fmt, ...) BL_PRINTF(5, 6);

static billing_status fail(const billing_event *ev, char *errbuf, size_t errsize,
                           billing_status status, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (errbuf == NULL || errsize == 0)
        return status;
    if (ev->set & BL_EV_ID)
        n = snprintf(errbuf, errsize, "event '%s': ", ev->id);
    else
        n = snprintf(errbuf, errsize, "event: ");
    if (n < 0 || (size_t)n >= errsize)
        return status;
    va_start(ap, fmt);
    vsnprintf(errbuf + n, errsize - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

typedef billing_status (*id_setter)(billing_event *ev, const char *value);

/* A required identifier: present, bounded, printable without spaces. */
static billing_status set_id_field(billing_event *ev, id_setter set, const char *name,
                                   const char *value, char *errbuf, size_t errsize)
{
    billing_status st;
    /* Bounded length first, then the word-at-a-time check (bl_valid_id goes byte by byte). */
    size_t n = strnlen(value, BL_ID_MAX + 1);

    if (n == 0)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field '%s' is missing", name);
    if (!bl_valid_id_n(value, n))
        return fail(ev, errbuf, errsize, n > BL_ID_MAX ? BILLING_ERR_TOO_LARGE : BILLING_ERR_INVALID,
                    "field '%s' must be 1..%d bytes of printable ASCII without spaces", name,
                    BL_ID_MAX);
    st = set(ev, value);
    if (st != BILLING_OK)
        return fail(ev, errbuf, errsize, st, "field '%s' is invalid", name);
    return BILLING_OK;
}

/* An optional attribute (model, region): at most BL_ATTR_MAX bytes. */
static billing_status set_attr_field(billing_event *ev, id_setter set, const char *name,
                                     const char *value, char *errbuf, size_t errsize)
{
    if (set(ev, value) != BILLING_OK)
        return fail(ev, errbuf, errsize, BILLING_ERR_TOO_LARGE,
                    "field '%s' is longer than %d bytes", name, BL_ATTR_MAX);
    return BILLING_OK;
}

static billing_status get_time(const billing_event *ev, const Billing__V1__Timestamp *ts,
                               const char *name, billing_time_t *out, char *errbuf, size_t errsize)
{
    if (ts == NULL)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field '%s' is missing", name);
    if (ts->nanos < 0 || ts->nanos >= BILLING_NS_PER_SEC)
        return fail(ev, errbuf, errsize, BILLING_ERR_RANGE,
                    "field '%s': nanos %ld is outside 0..999999999", name, (long)ts->nanos);
    if (ts->seconds < BL_TIME_MIN / BILLING_NS_PER_SEC ||
        ts->seconds > BL_TIME_MAX / BILLING_NS_PER_SEC)
        return fail(ev, errbuf, errsize, BILLING_ERR_RANGE,
                    "field '%s': seconds %lld is outside 1900..2200", name, (long long)ts->seconds);
    *out = ts->seconds * BILLING_NS_PER_SEC + ts->nanos;
    if (*out > BL_TIME_MAX)
        return fail(ev, errbuf, errsize, BILLING_ERR_RANGE, "field '%s' is outside 1900..2200",
                    name);
    return BILLING_OK;
}

static billing_status set_meter_field(billing_event *ev, int value, char *errbuf, size_t errsize)
{
    if (value == 0)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID,
                    "field 'meter' is missing (METER_UNSPECIFIED)");
    if (value < 0 || (size_t)value >= PROTO_METER_COUNT)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field 'meter': unknown value %d",
                    value);
    billing_event_set_meter(ev, proto_meters[value]);
    return BILLING_OK;
}

static billing_status set_interval_fields(billing_event *ev, const Billing__V1__UsageEvent *m,
                                          char *errbuf, size_t errsize)
{
    billing_time_t start;
    billing_time_t end;
    billing_status st;

    st = get_time(ev, m->start, "start", &start, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    st = get_time(ev, m->end, "end", &end, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    if (end <= start)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field 'end' must be after 'start'");
    billing_event_set_interval(ev, start, end);
    return BILLING_OK;
}

static billing_status set_quantity_field(billing_event *ev, const char *value, char *errbuf,
                                         size_t errsize)
{
    char why[128];
    billing_status st;

    if (value[0] == '\0')
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field 'quantity' is missing");
    st = billing_event_set_quantity(ev, value, why, sizeof(why));
    if (st != BILLING_OK)
        return fail(ev, errbuf, errsize, st, "%s", why);
    return BILLING_OK;
}

/* Fill @ev from an unpacked message, in field order once the id is known. */
static billing_status fill_event(billing_event *ev, const Billing__V1__UsageEvent *m, char *errbuf,
                                 size_t errsize)
{
    billing_status st;

    st = set_id_field(ev, billing_event_set_id, "id", m->event_id, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_id_field(ev, billing_event_set_account, "account", m->account_id, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_id_field(ev, billing_event_set_resource, "resource", m->resource_id, errbuf,
                          errsize);
    if (st == BILLING_OK)
        st = set_meter_field(ev, (int)m->meter, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_interval_fields(ev, m, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_quantity_field(ev, m->quantity, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_attr_field(ev, billing_event_set_model, "model", m->gpu_model, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_attr_field(ev, billing_event_set_region, "region", m->region, errbuf, errsize);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Public                                                                  */
/* ---------------------------------------------------------------------- */

billing_status billing_event_decode(billing_event *ev, const unsigned char *buf, size_t len,
                                    char *errbuf, size_t errsize)
{
    union {
        max_align_t align;
        unsigned char bytes[ARENA_SIZE];
    } mem;
    arena a = {mem.bytes, 0, 0, 0};
    ProtobufCAllocator alloc = {arena_alloc, arena_free, &a};
    Billing__V1__UsageEvent *m;
    wire w;
    billing_status st;

    if (ev == NULL || (buf == NULL && len > 0))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "event or buffer is NULL");
    billing_event_reset(ev);
    if (len > BILLING_EVENT_WIRE_MAX)
        return bl_seterr(errbuf, errsize, BILLING_ERR_TOO_LARGE,
                         "event: message of %zu bytes exceeds the %d-byte limit", len,
                         BILLING_EVENT_WIRE_MAX);
    w.base = buf;
    w.p = buf;
    w.end = buf + len;
    st = scan_message(&billing__v1__usage_event__descriptor, NULL, &w, 1, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    m = billing__v1__usage_event__unpack(&alloc, len, buf);
    if (m == NULL)
        return bl_seterr(errbuf, errsize, a.failed ? BILLING_ERR_NOMEM : BILLING_ERR_PARSE,
                         a.failed ? "event: out of memory" : "event: malformed message");
    st = fill_event(ev, m, errbuf, errsize);
    if (a.heap > 0)
        billing__v1__usage_event__free_unpacked(m, &alloc);
    return st;
}

/* Split an instant into Timestamp seconds and non-negative nanos. */
static void to_timestamp(billing_time_t t, Billing__V1__Timestamp *ts)
{
    int64_t s = t / BILLING_NS_PER_SEC;
    int64_t ns = t % BILLING_NS_PER_SEC;

    if (ns < 0) {
        ns += BILLING_NS_PER_SEC;
        s--;
    }
    ts->seconds = s;
    ts->nanos = (int32_t)ns;
}

/* The proto enum value of @meter (index into proto_meters, skipping 0). */
static Billing__V1__Meter meter_to_proto(billing_meter meter)
{
    size_t i;

    for (i = 1; i < PROTO_METER_COUNT; i++) {
        if (proto_meters[i] == meter)
            return (Billing__V1__Meter)i;
    }
    return BILLING__V1__METER__METER_UNSPECIFIED;
}

billing_status billing_event_encode(const billing_event *ev, unsigned char *buf, size_t size,
                                    size_t *len)
{
    Billing__V1__UsageEvent m = BILLING__V1__USAGE_EVENT__INIT;
    Billing__V1__Timestamp start = BILLING__V1__TIMESTAMP__INIT;
    Billing__V1__Timestamp end = BILLING__V1__TIMESTAMP__INIT;
    char qty[64];
    size_t need;

    if (ev == NULL || len == NULL || (buf == NULL && size > 0))
        return BILLING_ERR_INVALID;
    /* protobuf-c's message struct is not const-correct; it only reads these. */
    m.event_id = (char *)ev->id;
    m.account_id = (char *)ev->account;
    m.resource_id = (char *)ev->resource;
    m.gpu_model = (char *)ev->model;
    m.region = (char *)ev->region;
    if (ev->set & BL_EV_METER)
        m.meter = meter_to_proto(ev->meter);
    if (ev->set & BL_EV_INTERVAL) {
        to_timestamp(ev->start, &start);
        to_timestamp(ev->end, &end);
        m.start = &start;
        m.end = &end;
    }
    if ((ev->set & BL_EV_QUANTITY) && bl_qty_to_string(ev->qty, qty, sizeof(qty)) > 0)
        m.quantity = qty;
    need = billing__v1__usage_event__get_packed_size(&m);
    *len = need;
    if (need > size)
        return BILLING_ERR_TOO_LARGE;
    billing__v1__usage_event__pack(&m, buf);
    return BILLING_OK;
}
