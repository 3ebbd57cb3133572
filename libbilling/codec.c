/*
 * codec.c - billing.v1.UsageEvent bytes <-> billing_event.
 *
 * Decoding reads the wire bytes once, by hand: keys, varints and
 * length-delimited values bounds-checked, fields unknown to this schema
 * skipped as the protobuf spec says, strings left in place. It accepts
 * exactly what protobuf-c's unpack accepts (fuzz/fuzz_event_pb.c compares
 * the two on every input), which is also why a key or length prefix over
 * 5 bytes is refused and a repeated Timestamp replaces the earlier one
 * whole. Unlike unpack it says why a message is refused, and it never
 * silently truncates a string at an embedded NUL: strings are printable
 * ASCII. Then the fields go through the setters in a fixed order, id
 * first. Messages use billing_event's field names, not the proto names,
 * so that a bad event reads the same whether it came as JSON or protobuf.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
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

/* ---------------------------------------------------------------------- */
/* The wire format                                                         */
/* ---------------------------------------------------------------------- */

/* UsageEvent field numbers (proto/billing/v1/usage_event.proto). */
enum {
    PB_ID = 1,
    PB_ACCOUNT = 2,
    PB_RESOURCE = 3,
    PB_METER = 4,
    PB_START = 5,
    PB_END = 6,
    PB_QUANTITY = 7,
    PB_MODEL = 8,
    PB_REGION = 9
};

/* Timestamp field numbers. */
enum { PB_SECONDS = 1, PB_NANOS = 2 };

/*
 * protobuf-c's unpack reads a key or a length prefix of at most 5 bytes
 * and refuses a longer one, even a valid varint with padding.
 */
#define PBC_PREFIX_MAX 5

typedef struct wire {
    const unsigned char *base;
    const unsigned char *p;
    const unsigned char *end;
    int *refused; /* set when the bytes are valid but protobuf-c's unpack refuses them */
} wire;

/* Where a string field's bytes lie in the message (proto3: absent is empty). */
typedef struct wire_text {
    const unsigned char *p;
    size_t len;
} wire_text;

typedef struct wire_time {
    int present;
    int64_t seconds;
    int32_t nanos;
} wire_time;

/* The fields of a UsageEvent as read, before any check of their values. */
typedef struct wire_event {
    wire_text text[EVENT_FIELD_COUNT]; /* by field number; used for the string fields */
    int32_t meter;
    wire_time start;
    wire_time end;
} wire_event;

/* Read a varint of at most 10 bytes; 0 on success, -1 if malformed. */
static int wire_varint_long(wire *w, uint64_t *out)
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

/* Most keys, lengths and values fit in one byte. */
static inline int wire_varint(wire *w, uint64_t *out)
{
    if (w->p < w->end && *w->p < 0x80) {
        *out = *w->p++;
        return 0;
    }
    return wire_varint_long(w, out);
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

/* The descriptor of field @number, or NULL if unknown to this schema. */
static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *desc,
                                                uint64_t number)
{
    /* Both messages number their fields 1..n, and the generated array is sorted by number. */
    if (number >= 1 && number <= desc->n_fields && desc->fields[number - 1].id == number)
        return &desc->fields[number - 1];
    if (number > 536870911u)
        return NULL;
    return protobuf_c_message_descriptor_get_field(desc, (unsigned)number);
}

/* The field being read; its printable name is built only for a message. */
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

    if (bl_printable_n((const char *)s, len))
        return BILLING_OK;
    for (i = 0; i < len; i++) {
        if (s[i] < 0x20 || s[i] > 0x7e)
            break;
    }
    return scan_fail(f, errbuf, errsize, "byte 0x%02x at position %zu is not printable ASCII", s[i],
                     i);
}

/*
 * Read the key at w->p into @f (number and descriptor from @desc) and its
 * wire type into *@type, checked against the field's if it is known.
 */
static billing_status read_key(wire *w, const ProtobufCMessageDescriptor *desc, scan_field *f,
                               unsigned *type, char *errbuf, size_t errsize)
{
    const unsigned char *at = w->p;
    size_t pos = (size_t)(at - w->base);
    uint64_t key;

    if (wire_varint(w, &key) != 0 || (key >> 3) == 0 || (key >> 3) > 536870911u) {
        if (f->outer != NULL)
            return scan_fail(f->outer, errbuf, errsize, "malformed field key at byte %zu", pos);
        return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE,
                         "event: malformed field key at byte %zu", pos);
    }
    if (w->p - at > PBC_PREFIX_MAX)
        *w->refused = 1;
    f->number = key >> 3;
    *type = (unsigned)(key & 7);
    f->fd = field_of(desc, f->number);
    if (f->fd != NULL && *type != expected_wire_type(f->fd))
        return scan_fail(f, errbuf, errsize, "wire type %u at byte %zu, expected %u", *type, pos,
                         expected_wire_type(f->fd));
    return BILLING_OK;
}

/*
 * Read the value of field @f, whose key has just been read: a varint into
 * *@v, a length-delimited value's bytes into @sub (its length into *@v);
 * fixed-size values are skipped.
 */
static billing_status read_value(wire *w, const scan_field *f, unsigned type, uint64_t *v,
                                 wire *sub, char *errbuf, size_t errsize)
{
    const unsigned char *at = w->p;
    size_t pos = (size_t)(at - w->base);
    size_t size;

    switch (type) {
    case PROTOBUF_C_WIRE_TYPE_VARINT:
        if (wire_varint(w, v) != 0)
            return scan_fail(f, errbuf, errsize, "truncated varint at byte %zu", pos);
        return BILLING_OK;
    case PROTOBUF_C_WIRE_TYPE_64BIT:
    case PROTOBUF_C_WIRE_TYPE_32BIT:
        size = type == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
        if ((size_t)(w->end - w->p) < size)
            return scan_fail(f, errbuf, errsize, "truncated fixed-size value at byte %zu", pos);
        w->p += size;
        return BILLING_OK;
    case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED:
        if (wire_varint(w, v) != 0 || *v > (uint64_t)(w->end - w->p))
            return scan_fail(f, errbuf, errsize,
                             "length at byte %zu runs past the end of the message", pos);
        if (w->p - at > PBC_PREFIX_MAX)
            *w->refused = 1;
        sub->base = w->base;
        sub->p = w->p;
        sub->end = w->p + *v;
        sub->refused = w->refused;
        w->p = sub->end;
        return BILLING_OK;
    default:
        return scan_fail(f, errbuf, errsize, "unsupported wire type %u at byte %zu", type, pos);
    }
}

/*
 * A Timestamp: an occurrence replaces an earlier one whole (protobuf-c
 * merges repeated messages, but a proto3 scalar of the later one always
 * wins, zero included).
 */
static billing_status read_time(wire *w, const scan_field *outer, wire_time *t, char *errbuf,
                                size_t errsize)
{
    scan_field f;
    unsigned type;
    uint64_t v = 0;
    wire sub;
    billing_status st;

    t->present = 1;
    t->seconds = 0;
    t->nanos = 0;
    f.outer = outer;
    while (w->p < w->end) {
        st = read_key(w, &billing__v1__timestamp__descriptor, &f, &type, errbuf, errsize);
        if (st == BILLING_OK)
            st = read_value(w, &f, type, &v, &sub, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
        if (f.fd == NULL)
            continue;
        /* int64 and int32 keep the low bits of the varint, as unpack does. */
        if (f.number == PB_SECONDS)
            t->seconds = (int64_t)v;
        else if (f.number == PB_NANOS)
            t->nanos = (int32_t)(uint32_t)v;
    }
    return BILLING_OK;
}

/* Store the value of known field @f of a UsageEvent, checking strings. */
static billing_status store_field(wire_event *m, const scan_field *f, uint64_t v, wire *sub,
                                  char *errbuf, size_t errsize)
{
    switch (f->number) {
    case PB_METER:
        m->meter = (int32_t)(uint32_t)v;
        return BILLING_OK;
    case PB_START:
        return read_time(sub, f, &m->start, errbuf, errsize);
    case PB_END:
        return read_time(sub, f, &m->end, errbuf, errsize);
    default:
        /* A field added to the schema but not read here is skipped like an unknown one. */
        if (f->number >= EVENT_FIELD_COUNT || f->fd->type != PROTOBUF_C_TYPE_STRING)
            return BILLING_OK;
        m->text[f->number].p = sub->p;
        m->text[f->number].len = (size_t)v;
        return check_string(f, sub->p, (size_t)v, errbuf, errsize);
    }
}

static billing_status read_event(wire *w, wire_event *m, char *errbuf, size_t errsize)
{
    scan_field f;
    unsigned type;
    uint64_t v = 0;
    wire sub;
    billing_status st;

    f.outer = NULL;
    while (w->p < w->end) {
        st = read_key(w, &billing__v1__usage_event__descriptor, &f, &type, errbuf, errsize);
        if (st == BILLING_OK)
            st = read_value(w, &f, type, &v, &sub, errbuf, errsize);
        if (st == BILLING_OK && f.fd != NULL)
            st = store_field(m, &f, v, &sub, errbuf, errsize);
        if (st != BILLING_OK)
            return st;
    }
    return BILLING_OK;
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

/* A required identifier: present, bounded, printable without spaces. */
static billing_status set_id_field(billing_event *ev, billing_event_text field, const char *name,
                                   const wire_text *t, char *errbuf, size_t errsize)
{
    billing_status st;
    const char *value = (const char *)t->p;
    size_t n = t->len < BL_ID_MAX + 1 ? t->len : BL_ID_MAX + 1;

    if (n == 0)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field '%s' is missing", name);
    if (!bl_valid_id_n(value, n))
        return fail(
            ev, errbuf, errsize, n > BL_ID_MAX ? BILLING_ERR_TOO_LARGE : BILLING_ERR_INVALID,
            "field '%s' must be 1..%d bytes of printable ASCII without spaces", name, BL_ID_MAX);
    st = billing_event_set_text(ev, field, value, n);
    if (st != BILLING_OK)
        return fail(ev, errbuf, errsize, st, "field '%s' is invalid", name);
    return BILLING_OK;
}

/* An optional attribute (model, region): at most BL_ATTR_MAX bytes. */
static billing_status set_attr_field(billing_event *ev, billing_event_text field, const char *name,
                                     const wire_text *t, char *errbuf, size_t errsize)
{
    const char *value = t->p != NULL ? (const char *)t->p : "";

    if (billing_event_set_text(ev, field, value, t->len) != BILLING_OK)
        return fail(ev, errbuf, errsize, BILLING_ERR_TOO_LARGE,
                    "field '%s' is longer than %d bytes", name, BL_ATTR_MAX);
    return BILLING_OK;
}

static billing_status get_time(const billing_event *ev, const wire_time *ts, const char *name,
                               billing_time_t *out, char *errbuf, size_t errsize)
{
    if (!ts->present)
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

static billing_status set_interval_fields(billing_event *ev, const wire_event *m, char *errbuf,
                                          size_t errsize)
{
    billing_time_t start;
    billing_time_t end;
    billing_status st;

    st = get_time(ev, &m->start, "start", &start, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    st = get_time(ev, &m->end, "end", &end, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    if (end <= start)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field 'end' must be after 'start'");
    billing_event_set_interval(ev, start, end);
    return BILLING_OK;
}

static billing_status set_quantity_field(billing_event *ev, const wire_text *t, char *errbuf,
                                         size_t errsize)
{
    /* The quantity parser wants a string; the message bounds the copy. */
    char value[BILLING_EVENT_WIRE_MAX + 1];
    char why[128];
    billing_status st;

    if (t->len == 0)
        return fail(ev, errbuf, errsize, BILLING_ERR_INVALID, "field 'quantity' is missing");
    memcpy(value, t->p, t->len);
    value[t->len] = '\0';
    st = billing_event_set_quantity(ev, value, why, sizeof(why));
    if (st != BILLING_OK)
        return fail(ev, errbuf, errsize, st, "%s", why);
    return BILLING_OK;
}

/* Fill @ev from the fields read, in field order once the id is known. */
static billing_status fill_event(billing_event *ev, const wire_event *m, char *errbuf,
                                 size_t errsize)
{
    billing_status st;

    st = set_id_field(ev, BILLING_TEXT_ID, "id", &m->text[PB_ID], errbuf, errsize);
    if (st == BILLING_OK)
        st = set_id_field(ev, BILLING_TEXT_ACCOUNT, "account", &m->text[PB_ACCOUNT], errbuf,
                          errsize);
    if (st == BILLING_OK)
        st = set_id_field(ev, BILLING_TEXT_RESOURCE, "resource", &m->text[PB_RESOURCE], errbuf,
                          errsize);
    if (st == BILLING_OK)
        st = set_meter_field(ev, (int)m->meter, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_interval_fields(ev, m, errbuf, errsize);
    if (st == BILLING_OK)
        st = set_quantity_field(ev, &m->text[PB_QUANTITY], errbuf, errsize);
    if (st == BILLING_OK)
        st = set_attr_field(ev, BILLING_TEXT_MODEL, "model", &m->text[PB_MODEL], errbuf, errsize);
    if (st == BILLING_OK)
        st =
            set_attr_field(ev, BILLING_TEXT_REGION, "region", &m->text[PB_REGION], errbuf, errsize);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Public                                                                  */
/* ---------------------------------------------------------------------- */

billing_status billing_event_decode(billing_event *ev, const unsigned char *buf, size_t len,
                                    char *errbuf, size_t errsize)
{
    wire_event m;
    wire w;
    int refused = 0;
    billing_status st;

    if (ev == NULL || (buf == NULL && len > 0))
        return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "event or buffer is NULL");
    billing_event_reset(ev);
    if (len > BILLING_EVENT_WIRE_MAX)
        return bl_seterr(errbuf, errsize, BILLING_ERR_TOO_LARGE,
                         "event: message of %zu bytes exceeds the %d-byte limit", len,
                         BILLING_EVENT_WIRE_MAX);
    memset(&m, 0, sizeof(m));
    w.base = buf;
    w.p = buf;
    w.end = buf + len;
    w.refused = &refused;
    st = read_event(&w, &m, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    /* Valid protobuf, but not as protobuf-c reads it: refused as unpack refused it. */
    if (refused)
        return bl_seterr(errbuf, errsize, BILLING_ERR_PARSE, "event: malformed message");
    return fill_event(ev, &m, errbuf, errsize);
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
