/*
 * fuzz_event_pb.c - fuzz target for billing_event_decode, the decoder of
 * one protobuf billing.v1.UsageEvent (the input is the message, without
 * its length prefix).
 *
 * Whatever the bytes, decoding must not crash, leak or read out of bounds,
 * and a refusal must come with a message (BILLING_ERR_TOO_LARGE past
 * BILLING_EVENT_WIRE_MAX bytes). An accepted event must:
 *  - encode, and the encoding decode and encode again to the same bytes;
 *  - pass every check billing_rater_add makes without the catalog (the
 *    decoder claims to make them all), so the rater may only refuse it
 *    for an unknown account or a missing price;
 *  - once rated, be taken back exactly by billing_rater_take_back
 *    (fz_check_rating in fuzzcommon.c).
 *
 * Differential: billing_event_decode reads the wire bytes by hand, so
 * every input is also unpacked by protobuf-c, the reference. Where
 * unpack refuses, the decoder must refuse as malformed; where unpack
 * accepts, the decoder must accept exactly when the unpacked fields are
 * printable and valid (checked here from billing.h's rules alone), with
 * the same field values.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "billing/v1/usage_event.pb-c.h"
#include "fuzzcommon.h"
#include "zone.h"

/* Nonzero if @s is printable ASCII (the decoder's rule for every string). */
static int printable(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s < 0x20 || *s > 0x7e)
            return 0;
    }
    return 1;
}

static int valid_id(const char *s)
{
    size_t n = strlen(s);

    return n >= 1 && n <= 128 && strchr(s, ' ') == NULL;
}

/* Nonzero if @ts is present and in range; its instant into *@out. */
static int instant(const Billing__V1__Timestamp *ts, int64_t *out)
{
    if (ts == NULL || ts->nanos < 0 || ts->nanos >= BILLING_NS_PER_SEC ||
        ts->seconds < BL_TIME_MIN / BILLING_NS_PER_SEC ||
        ts->seconds > BL_TIME_MAX / BILLING_NS_PER_SEC)
        return 0;
    *out = ts->seconds * BILLING_NS_PER_SEC + ts->nanos;
    return *out <= BL_TIME_MAX;
}

/* The proto Meter values 1..4, in billing_meter's names. */
static const char *const meter_names[] = {NULL, "gpu", "gpuless", "storage", "traffic"};

/* Whether the unpacked message @m makes a valid event; its quantity goes into @qty. */
static int reference_valid(const Billing__V1__UsageEvent *m, billing_event *qty)
{
    const char *const text[] = {m->event_id, m->account_id, m->resource_id,
                                m->quantity, m->gpu_model,  m->region};
    int64_t start = 0;
    int64_t end = 0;
    size_t i;

    for (i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
        if (!printable(text[i]))
            return 0;
    }
    return valid_id(m->event_id) && valid_id(m->account_id) && valid_id(m->resource_id) &&
           m->meter >= 1 && m->meter <= 4 && instant(m->start, &start) && instant(m->end, &end) &&
           end > start && m->quantity[0] != '\0' &&
           billing_event_set_quantity(qty, m->quantity, NULL, 0) == BILLING_OK &&
           strlen(m->gpu_model) <= 64 && strlen(m->region) <= 64;
}

/*
 * Nonzero if the decoder's refusal @err of a message that unpack accepts
 * is one it makes on purpose: a byte that is not printable ASCII in any
 * occurrence of a string field (unpack keeps the last occurrence only, and
 * cuts a string at a NUL), or a key whose field number is outside 1..2^29-1 (the spec's
 * range; unpack takes any 32-bit number as an unknown field).
 */
static int stricter_on_purpose(const char *err, const uint8_t *data, size_t size)
{
    const char *at = strstr(err, "malformed field key at byte ");
    uint64_t key = 0;
    unsigned shift = 0;
    size_t i;

    if (strstr(err, "is not printable ASCII") != NULL)
        return 1;
    if (at == NULL)
        return 0;
    for (i = strtoul(at + strlen("malformed field key at byte "), NULL, 10); i < size; i++) {
        key |= (uint64_t)(data[i] & 0x7f) << shift;
        shift += 7;
        if ((data[i] & 0x80) == 0 || shift >= 64)
            break;
    }
    return (key >> 3) == 0 || (key >> 3) > 536870911u;
}

/* The decoder against protobuf-c's unpack of the same bytes. */
static void check_against_unpack(const billing_event *ev, billing_status st, const char *err,
                                 const uint8_t *data, size_t size)
{
    Billing__V1__UsageEvent *m = billing__v1__usage_event__unpack(NULL, size, data);
    billing_event *ref = billing_event_new();
    char a[BILLING_QUANTITY_TEXT_MAX];
    char b[BILLING_QUANTITY_TEXT_MAX];
    int64_t t;
    int valid;

    FZ_CHECK(ref != NULL, "out of memory");
    if (m == NULL) {
        FZ_CHECK(st == BILLING_ERR_PARSE, "unpack refuses the message, the decoder says %s",
                 billing_strerror(st));
        billing_event_destroy(ref);
        return;
    }
    valid = reference_valid(m, ref);
    if (valid && st == BILLING_ERR_PARSE && stricter_on_purpose(err, data, size))
        valid = 0;
    FZ_CHECK((st == BILLING_OK) == valid, "unpack and the rules say %s, the decoder %s (%s)",
             valid ? "valid" : "invalid", billing_strerror(st), st == BILLING_OK ? "" : err);
    if (valid) {
        FZ_CHECK(strcmp(billing_event_id(ev), m->event_id) == 0, "id differs");
        FZ_CHECK(strcmp(billing_event_account(ev), m->account_id) == 0, "account differs");
        FZ_CHECK(strcmp(billing_event_resource(ev), m->resource_id) == 0, "resource differs");
        FZ_CHECK(strcmp(billing_meter_name(billing_event_meter(ev)), meter_names[m->meter]) == 0,
                 "meter differs");
        FZ_CHECK(instant(m->start, &t) && billing_event_start(ev) == t, "start differs");
        FZ_CHECK(instant(m->end, &t) && billing_event_end(ev) == t, "end differs");
        billing_event_quantity(ev, a, sizeof(a));
        billing_event_quantity(ref, b, sizeof(b));
        FZ_CHECK(strcmp(a, b) == 0, "quantity %s, unpack's %s", a, b);
        FZ_CHECK(strcmp(billing_event_model(ev), m->gpu_model) == 0, "model differs");
        FZ_CHECK(strcmp(billing_event_region(ev), m->region) == 0, "region differs");
    }
    billing__v1__usage_event__free_unpacked(m, NULL);
    billing_event_destroy(ref);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_events_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    billing_event *ev = billing_event_new();
    char err[256] = "";
    billing_status st;

    FZ_CHECK(ev != NULL, "out of memory");
    st = billing_event_decode(ev, data, size, err, sizeof(err));
    if (size <= BILLING_EVENT_WIRE_MAX)
        check_against_unpack(ev, st, err, data, size);
    if (st != BILLING_OK) {
        fz_check_message("billing_event_decode", err, sizeof(err));
        FZ_CHECK(size <= BILLING_EVENT_WIRE_MAX || st == BILLING_ERR_TOO_LARGE,
                 "a %zu-byte message refused with %s, not as too large", size,
                 billing_strerror(st));
        billing_event_destroy(ev);
        return 0;
    }
    FZ_CHECK(size <= BILLING_EVENT_WIRE_MAX, "accepted a %zu-byte message", size);
    st = fz_check_roundtrip(ev);
    FZ_CHECK(st == BILLING_OK, "event '%s': its own encoding does not decode: %s",
             billing_event_id(ev), billing_strerror(st));
    st = fz_check_rating(ev);
    FZ_CHECK(fz_rated_by_catalog_checks(st),
             "event '%s': the decoder accepted it but billing_rater_add says %s",
             billing_event_id(ev), billing_strerror(st));
    billing_event_destroy(ev);
    return 0;
}
