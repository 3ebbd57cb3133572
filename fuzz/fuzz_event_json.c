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
 * And the usual-line path (bc_event_parse_json_usual, tried first) agrees
 * with the general parser on every input: same status, same message, same
 * event, field by field.
 */
#include "config.h"

#include <string.h>

#include "event.h"
#include "eventjson.h"
#include "fuzzcommon.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_events_init();
    return 0;
}

/* Non-zero if the text fields of @a and @b hold the same bytes up to their lengths. */
static int same_texts(const billing_event *a, const billing_event *b)
{
    return a->id_len == b->id_len && memcmp(a->id, b->id, a->id_len + 1u) == 0 &&
           a->account_len == b->account_len &&
           memcmp(a->account, b->account, a->account_len + 1u) == 0 &&
           a->resource_len == b->resource_len &&
           memcmp(a->resource, b->resource, a->resource_len + 1u) == 0 &&
           a->model_len == b->model_len && memcmp(a->model, b->model, a->model_len + 1u) == 0 &&
           a->region_len == b->region_len && memcmp(a->region, b->region, a->region_len + 1u) == 0;
}

/* bc_event_parse_json (usual path first) against the general parser alone. */
static void check_paths_agree(const billing_event *ev, billing_status st, const char *err,
                              const uint8_t *data, size_t size)
{
    billing_event *gen = billing_event_new();
    char gerr[256] = "";
    billing_status gst;

    FZ_CHECK(gen != NULL, "out of memory");
    gst = bc_event_parse_json_general(gen, (const char *)data, size, gerr, sizeof(gerr));
    FZ_CHECK(st == gst, "bc_event_parse_json says %s, the general parser %s", billing_strerror(st),
             billing_strerror(gst));
    FZ_CHECK(strcmp(err, gerr) == 0, "messages differ: '%s', general '%s'", err, gerr);
    if (st == BILLING_OK)
        FZ_CHECK(ev->set == gen->set && ev->refused == gen->refused && ev->meter == gen->meter &&
                     ev->start == gen->start && ev->end == gen->end && ev->qty == gen->qty &&
                     same_texts(ev, gen),
                 "event '%s': the usual path and the general parser decode it differently",
                 billing_event_id(ev));
    billing_event_destroy(gen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    billing_event *ev = billing_event_new();
    char err[256] = "";
    billing_status st;
    billing_status decoded;

    FZ_CHECK(ev != NULL, "out of memory");
    st = bc_event_parse_json(ev, (const char *)data, size, err, sizeof(err));
    check_paths_agree(ev, st, err, data, size);
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
