/*
 * fuzz_event_json.c - fuzz target for bc_event_parse_json, the parser of
 * one JSON Lines event (formats/eventjson.c); the input is the line.
 *
 * Whatever the bytes, parsing must not crash or read out of bounds, and a
 * refusal must come with a message. The JSON parser checks syntax, types
 * and bounds and leaves the rest to the rater, so an accepted event:
 *  - encodes to protobuf; when that encoding decodes, encoding again gives
 *    the same bytes;
 *  - is judged alike by the protobuf decoder and the rater: if the decoder
 *    refuses the encoding, billing_rater_add refuses the event as invalid
 *    or out of range too; if the decoder takes it, the rater may only
 *    refuse it for an unknown account or a missing price;
 *  - once rated, is taken back exactly (fz_check_rating in fuzzcommon.c).
 */
#include "config.h"

#include "eventjson.h"
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
    billing_status decoded;

    FZ_CHECK(ev != NULL, "out of memory");
    st = bc_event_parse_json(ev, (const char *)data, size, err, sizeof(err));
    if (st != BILLING_OK) {
        fz_check_message("bc_event_parse_json", err, sizeof(err));
        billing_event_destroy(ev);
        return 0;
    }
    decoded = fz_check_roundtrip(ev);
    FZ_CHECK(decoded == BILLING_OK || decoded == BILLING_ERR_INVALID ||
                 decoded == BILLING_ERR_RANGE,
             "event '%s': its encoding decodes with %s", billing_event_id(ev),
             billing_strerror(decoded));
    st = fz_check_rating(ev);
    if (decoded == BILLING_OK)
        FZ_CHECK(fz_rated_by_catalog_checks(st),
                 "event '%s': the protobuf decoder accepts it but billing_rater_add says %s",
                 billing_event_id(ev), billing_strerror(st));
    else
        FZ_CHECK(st == BILLING_ERR_INVALID || st == BILLING_ERR_RANGE,
                 "event '%s': the protobuf decoder refuses it (%s) but billing_rater_add says %s",
                 billing_event_id(ev), billing_strerror(decoded), billing_strerror(st));
    billing_event_destroy(ev);
    return 0;
}
