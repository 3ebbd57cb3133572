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
 *  - once rated, be taken back exactly by bl_rater_take_back
 *    (fz_check_rating in fuzzcommon.c).
 */
#include "config.h"

#include <stdlib.h>

#include "fuzzcommon.h"

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
