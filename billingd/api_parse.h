/*
 * api_parse.h - what the HTTP API reads from a request before it needs a
 * database: the route of a URL, and the body of POST /v1/events (JSON
 * array, JSON Lines, CloudEvents single and batch, length-delimited
 * protobuf) into raw records for the ingest pipeline (store/ingest.h).
 * No connection, no libmicrohttpd: fuzz/fuzz_api.c drives these with any
 * bytes.
 */
#ifndef BILLINGD_API_PARSE_H
#define BILLINGD_API_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "ingest.h"

/* Most events in one POST /v1/events (documented; BS_INGEST_BATCH_MAX bounds it too). */
#define BD_EVENTS_MAX 10000

/* The largest answer text written with bc_jbuf (an events answer is at most a few MiB). */
#define BD_ANSWER_MAX ((size_t)64 << 20)

/* The API's routes (the metrics' route label is the path template). */
enum route {
    R_BALANCE,
    R_GRANTS,
    R_SUBSCRIPTIONS,
    R_EVENTS,
    R_PRICE_BOOKS,
    R_PLANS,
    R_ACCOUNTS,
    R_REJECTED,
    R_INVOICES,
    R_INVOICE,
    R_USAGE,
    R_QUOTE,
    R_OPS_STATUS,
    R_OTHER,
    N_ROUTES
};

/*
 * bd_route_of - the route of the path @url (no query string: libmicrohttpd
 * strips it). @account (@size bytes) gets the {id} of an account route or
 * the {number} of R_INVOICE; *@bad_account is set when that part is empty,
 * too long for @size or holds a '/'.
 */
enum route bd_route_of(const char *url, char *account, size_t size, int *bad_account);

/*
 * bd_route_method_ok - non-zero if @method is the one route @r has: POST
 * for R_EVENTS and R_QUOTE, GET for the others (else 405).
 */
int bd_route_method_ok(enum route r, const char *method);

/* The records of one POST /v1/events, in the body's order. */
typedef struct bd_events {
    bs_record *recs;
    char **texts;   /* each record's bytes (owned, or in @lines when that is set) */
    char **sources; /* "api:key<ID>:<index>", each in @block */
    size_t n;
    char *block; /* the sources (owned) */
    char *lines; /* a JSON Lines body's records, one after the other (owned) */
} bd_events;

/*
 * bd_events_parse - read @len bytes of @body sent as Content-Type @type
 * (NULL: application/json) by key @key into @b (zeroed by the caller;
 * free with bd_events_free whatever the outcome). An element that is not
 * an event object, or a CloudEvent that cannot be mapped, is a record
 * already rejected ("invalid", the reason said). Returns 0, or the HTTP
 * status of the whole body with a message in @msg of @msgsize bytes: 415
 * an unknown type, 400 not JSON / not an array / no event / a protobuf
 * length prefix malformed or past the end (the offset named), 413 over
 * BD_EVENTS_MAX events, 500 out of memory.
 */
unsigned bd_events_parse(const char *type, const char *body, size_t len, int64_t key, bd_events *b,
                         char *msg, size_t msgsize);

/*
 * bd_events_bind - reject ("invalid") every record of @b whose account is
 * not @bound (a key bound to that account sends its own events only). A
 * record whose account cannot be read is left to the pipeline, which
 * rejects it with its own reason. Returns 0, or -1 out of memory.
 */
int bd_events_bind(bd_events *b, const char *bound);

/* bd_events_free - free what @b holds (not @b). */
void bd_events_free(bd_events *b);

#endif
