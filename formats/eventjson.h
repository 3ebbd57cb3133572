/*
 * eventjson.h - one usage event in its JSON form (one line of a JSON
 * Lines file; schema in doc/formats.md):
 *
 *   {"id":"e-1","account":"lab-a","resource":"i-123","meter":"gpu",
 *    "start":"2026-01-05T10:00:00Z","end":"2026-01-05T13:00:00Z",
 *    "quantity":"8","model":"RTX4090","region":"cn-east-1"}
 *
 * A small strict parser written for this flat object (jansson would
 * allocate a tree per line): every value a string, except that
 * "quantity" may also be a JSON number read exactly from its text (no
 * exponent) and "model"/"region" may be null; unknown or repeated keys
 * are errors; strings must be printable ASCII (escapes allowed).
 */
#ifndef BILLING_FORMATS_EVENTJSON_H
#define BILLING_FORMATS_EVENTJSON_H

#include <stddef.h>

#include "billing.h"

/*
 * bc_event_parse_json - parse the JSON object in @text (@len bytes, no
 * NUL needed, surrounding whitespace allowed) into @ev, which is reset
 * first. Checks syntax, types, bounds, and that id, account, resource,
 * meter, start, end and quantity are present; the rater checks the rest.
 * Returns BILLING_OK, or BILLING_ERR_PARSE (syntax: message gives the
 * column), BILLING_ERR_INVALID, BILLING_ERR_RANGE or
 * BILLING_ERR_TOO_LARGE, with a message naming the event id when known and
 * the field: "event 'e-1': field 'start': timestamp '...': ...".
 * Thread-safe for distinct @ev; allocates nothing.
 */
billing_status bc_event_parse_json(billing_event *ev, const char *text, size_t len, char *errbuf,
                                   size_t errsize);

/*
 * bc_event_parse_json_usual - the usual line only: the members in schema
 * order (model and region optional), no whitespace, every value a plain
 * string, every field valid. Fills @ev (every field, as the general parser
 * would) and returns BILLING_OK; for any other line returns
 * BILLING_ERR_PARSE, writes no message and leaves @ev partly written.
 * bc_event_parse_json tries it first. For tests and the fuzz target.
 */
billing_status bc_event_parse_json_usual(billing_event *ev, const char *text, size_t len);

/*
 * bc_event_parse_json_general - bc_event_parse_json without the usual-line
 * path: every line read member by member. Same contract; for tests and the
 * fuzz target, which check that both paths agree.
 */
billing_status bc_event_parse_json_general(billing_event *ev, const char *text, size_t len,
                                           char *errbuf, size_t errsize);

#endif /* BILLING_FORMATS_EVENTJSON_H */
