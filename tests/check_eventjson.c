/*
 * check_eventjson.c - the JSON Lines event parser: lines it accepts (and
 * what they mean, compared through the protobuf encoding) and lines it
 * rejects, each with the field named in the message.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "testrng.h"
#include "eventjson.h"

#define ERR 512
#define BASE_KEYS                                                   \
    "\"account\":\"lab-a\",\"resource\":\"i-1\",\"meter\":\"gpu\"," \
    "\"start\":\"2026-01-05T10:00:00+08:00\",\"end\":\"2026-01-05T13:00:00+08:00\""
#define GOOD                    \
    "{\"id\":\"e1\"," BASE_KEYS \
    ",\"quantity\":\"8\",\"model\":\"RTX4090\",\"region\":\"cn-east-1\"}"

/* The event GOOD describes, built with the setters. */
static billing_event *reference(const char *quantity, const char *model, const char *region)
{
    billing_event *ev = billing_event_new();
    billing_time_t start;
    billing_time_t end;

    billing_time_parse("2026-01-05T10:00:00+08:00", &start, NULL, 0);
    billing_time_parse("2026-01-05T13:00:00+08:00", &end, NULL, 0);
    billing_event_set_id(ev, "e1");
    billing_event_set_account(ev, "lab-a");
    billing_event_set_resource(ev, "i-1");
    billing_event_set_meter(ev, BILLING_METER_GPU);
    billing_event_set_interval(ev, start, end);
    billing_event_set_quantity(ev, quantity, NULL, 0);
    billing_event_set_model(ev, model);
    billing_event_set_region(ev, region);
    return ev;
}

/* Two events are equal when their encodings are. */
static void assert_same(const billing_event *a, const billing_event *b)
{
    unsigned char x[BILLING_EVENT_WIRE_MAX];
    unsigned char y[BILLING_EVENT_WIRE_MAX];
    size_t nx;
    size_t ny;

    ck_assert_int_eq(billing_event_encode(a, x, sizeof(x), &nx), BILLING_OK);
    ck_assert_int_eq(billing_event_encode(b, y, sizeof(y), &ny), BILLING_OK);
    ck_assert_uint_eq(nx, ny);
    ck_assert_mem_eq(x, y, nx);
}

typedef struct good_case {
    const char *line;
    const char *quantity;
    const char *model;
    const char *region;
} good_case;

static const good_case good_cases[] = {
    {GOOD, "8", "RTX4090", "cn-east-1"},
    /* Any key order, whitespace around tokens, CR of a CRLF file. */
    {" { \"quantity\" : \"8\" , " BASE_KEYS ",\"region\":\"cn-east-1\",\"model\":\"RTX4090\","
     "\"id\":\"e1\" }\r",
     "8", "RTX4090", "cn-east-1"},
    /* Quantity as a JSON number, read exactly from its text. */
    {"{\"id\":\"e1\"," BASE_KEYS ",\"quantity\":8}", "8", "", ""},
    {"{\"id\":\"e1\"," BASE_KEYS ",\"quantity\":0.1,\"model\":null,\"region\":null}", "0.1", "",
     ""},
    {"{\"id\":\"e1\"," BASE_KEYS ",\"quantity\":\"1024.000000001\"}", "1024.000000001", "", ""},
    /* Escapes that decode to printable ASCII. */
    {"{\"id\":\"\\u0065\\u0031\"," BASE_KEYS ",\"quantity\":\"8\",\"model\":\"RTX\\u0034090\","
     "\"region\":\"cn\\/east\"}",
     "8", "RTX4090", "cn/east"},
    /* Escapes in field names: not matched in place, read and decoded first. */
    {"{\"\\u0069d\":\"e1\"," BASE_KEYS ",\"quantity\":\"8\",\"mod\\u0065l\":\"RTX4090\"}", "8",
     "RTX4090", ""},
};

START_TEST(test_accept)
{
    const good_case *c = &good_cases[_i];
    billing_event *ev = billing_event_new();
    billing_event *ref = reference(c->quantity, c->model, c->region);
    char err[ERR] = "";

    ck_assert_msg(bc_event_parse_json(ev, c->line, strlen(c->line), err, sizeof(err)) == BILLING_OK,
                  "case %d: %s", _i, err);
    assert_same(ev, ref);
    billing_event_destroy(ev);
    billing_event_destroy(ref);
}
END_TEST

typedef struct bad_case {
    const char *line;
    billing_status status;
    const char *message;
} bad_case;

#define LONG64 "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm"
#define WITH_ID(rest) "{\"id\":\"e1\"," BASE_KEYS rest "}"

static const bad_case bad_cases[] = {
    {"", BILLING_ERR_PARSE,
     "event: column 1: expected '{' at the start of the event, found the end of the line"},
    {"[1]", BILLING_ERR_PARSE, "event: column 1: expected '{' at the start of the event"},
    {"{", BILLING_ERR_PARSE, "event: column 2: expected a field name in double quotes, found"},
    {"{}", BILLING_ERR_INVALID, "event: field 'id' is missing"},
    {"{\"id\":\"e1\"}", BILLING_ERR_INVALID, "event 'e1': field 'account' is missing"},
    {"{\"id\":\"e1\",\"account\":\"a\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":"
     "\"2026-01-05T10:00:00Z\",\"quantity\":\"1\"}",
     BILLING_ERR_INVALID, "event 'e1': field 'end' is missing"},
    {WITH_ID(""), BILLING_ERR_INVALID, "event 'e1': field 'quantity' is missing"},
    {WITH_ID(",\"quantity\":\"8\",\"acount\":\"x\""), BILLING_ERR_INVALID,
     "event 'e1': unknown field 'acount'"},
    {WITH_ID(",\"quantity\":\"8\",\"meter\":\"gpu\""), BILLING_ERR_INVALID,
     "event 'e1': field 'meter' appears twice"},
    {WITH_ID(",\"quantity\":8e0"), BILLING_ERR_PARSE,
     "event 'e1': field 'quantity': exponent notation is not accepted"},
    {WITH_ID(",\"quantity\":08"), BILLING_ERR_PARSE, "a JSON number cannot have a leading zero"},
    {WITH_ID(",\"quantity\":true"), BILLING_ERR_INVALID,
     "event 'e1': field 'quantity' must be a string or a number"},
    {WITH_ID(",\"quantity\":\"-1\""), BILLING_ERR_RANGE,
     "event 'e1': field 'quantity': '-1' is negative"},
    {WITH_ID(",\"quantity\":\"8.5.1\""), BILLING_ERR_PARSE,
     "event 'e1': field 'quantity': '8.5.1' is not a decimal number"},
    {WITH_ID(",\"quantity\":\"1\",\"model\":8"), BILLING_ERR_INVALID,
     "event 'e1': field 'model' must be a string"},
    {WITH_ID(",\"quantity\":\"1\",\"model\":\"" LONG64 "m\""), BILLING_ERR_TOO_LARGE,
     "event 'e1': field 'model' is longer than 64 characters"},
    {WITH_ID(",\"quantity\":\"1\",\"region\":\"cn\te\""), BILLING_ERR_INVALID,
     "event 'e1': field 'region': character at column"},
    {WITH_ID(",\"quantity\":\"1\",\"region\":\"\\u00e9\""), BILLING_ERR_INVALID,
     "field 'region': character at column"},
    {WITH_ID(",\"quantity\":\"1\",\"region\":\"\\x\""), BILLING_ERR_PARSE,
     "invalid escape sequence in a string"},
    {WITH_ID(",\"quantity\":\"1\",\"region\":\"\\u12\""), BILLING_ERR_PARSE,
     "invalid escape sequence in a string"},
    {"{\"id\":\"e1", BILLING_ERR_PARSE, "event: column 10: unterminated string"},
    {"{\"id\":null}", BILLING_ERR_INVALID, "event: field 'id' must be a string"},
    {"{\"id\":\"e1\" \"account\":\"a\"}", BILLING_ERR_PARSE,
     "event 'e1': column 12: expected ',' or '}'"},
    {"{\"id\" \"e1\"}", BILLING_ERR_PARSE, "column 7: expected ':' after the field name"},
    {"{\"id\":\"e1\",}", BILLING_ERR_PARSE, "column 12: expected a field name in double quotes"},
    {"{\"id\":}", BILLING_ERR_PARSE, "column 7: expected a value"},
    {GOOD " x", BILLING_ERR_PARSE, "unexpected characters after the event object"},
    {"{\"id\":\"e1\"," BASE_KEYS ",\"quantity\":\"1\",\"meter\":\"GPU\"}", BILLING_ERR_INVALID,
     "field 'meter' appears twice"},
    {"{\"id\":\"e1\",\"account\":\"lab-a\",\"resource\":\"i-1\",\"meter\":\"GPU\"}",
     BILLING_ERR_INVALID,
     "event 'e1': field 'meter': 'GPU' is not \"gpu\", \"gpuless\", \"storage\" or \"traffic\""},
    {"{\"id\":\"e1\",\"account\":\"lab-a\",\"resource\":\"i-1\",\"meter\":\"gpu\","
     "\"start\":\"2026-13-01T00:00:00Z\",\"end\":\"2026-01-05T13:00:00Z\",\"quantity\":\"1\"}",
     BILLING_ERR_PARSE, "event 'e1': field 'start': timestamp '2026-13-01T00:00:00Z': month 13"},
    {"{\"id\":\"e1\",\"account\":\"lab-a\",\"resource\":\"i-1\",\"meter\":\"gpu\","
     "\"start\":\"2026-01-05T10:00:00Z\",\"end\":\"2026-01-05 13:00\",\"quantity\":\"1\"}",
     BILLING_ERR_PARSE, "event 'e1': field 'end': timestamp '2026-01-05 13:00'"},
    {"{\"" LONG64 "\":1}", BILLING_ERR_INVALID, "event: unknown field '(long or non-ASCII name)'"},
    /* An id with escapes names the event unescaped. */
    {"{\"id\":\"\\u0065\\u0031\"}", BILLING_ERR_INVALID, "event 'e1': field 'account' is missing"},
    /* A long plain key that is not a field: named in full. */
    {"{\"id\":\"e1\",\"resource_id_x\":1}", BILLING_ERR_INVALID,
     "event 'e1': unknown field 'resource_id_x'"},
};

START_TEST(test_reject)
{
    const bad_case *c = &bad_cases[_i];
    billing_event *ev = billing_event_new();
    char err[ERR] = "";
    billing_status st = bc_event_parse_json(ev, c->line, strlen(c->line), err, sizeof(err));

    ck_assert_msg(st == c->status, "case %d: status %d, want %d (%s)", _i, st, c->status, err);
    ck_assert_msg(strstr(err, c->message) != NULL, "case %d: '%s' lacks '%s'", _i, err, c->message);
    billing_event_destroy(ev);
}
END_TEST

/* An id of 128 characters is the longest accepted; 129 is named as too long. */
START_TEST(test_id_bound)
{
    char line[512];
    char id[130];
    billing_event *ev = billing_event_new();
    char err[ERR] = "";

    memset(id, 'i', 128);
    id[128] = '\0';
    snprintf(line, sizeof(line), "{\"id\":\"%s\"," BASE_KEYS ",\"quantity\":\"1\"}", id);
    ck_assert_int_eq(bc_event_parse_json(ev, line, strlen(line), err, sizeof(err)), BILLING_OK);
    ck_assert_str_eq(billing_event_id(ev), id);
    id[128] = 'i';
    id[129] = '\0';
    snprintf(line, sizeof(line), "{\"id\":\"%s\"," BASE_KEYS ",\"quantity\":\"1\"}", id);
    ck_assert_int_eq(bc_event_parse_json(ev, line, strlen(line), err, sizeof(err)),
                     BILLING_ERR_TOO_LARGE);
    ck_assert_str_eq(err, "event: field 'id' is longer than 128 characters");
    billing_event_destroy(ev);
}
END_TEST

/* The parser reads exactly @len bytes: no NUL needed, nothing after it read. */
START_TEST(test_length_bound)
{
    char line[] = GOOD "garbage";
    billing_event *ev = billing_event_new();
    char err[ERR] = "";

    ck_assert_int_eq(bc_event_parse_json(ev, line, strlen(GOOD), err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(bc_event_parse_json(ev, line, strlen(GOOD) - 1, err, sizeof(err)),
                     BILLING_ERR_PARSE);
    billing_event_destroy(ev);
}
END_TEST

/*
 * Strings are scanned 16 bytes at a time (SSE2): a special byte at every
 * position of ids of 1 to 40 bytes (inside a block, in the tail, on either
 * side of a block edge) is still seen. An escape decodes, a quote ends the
 * id early (then the line is malformed), other bytes are refused.
 */
START_TEST(test_special_byte_every_position)
{
    static const char specials[] = "\x01\x1f\x7f\x80\xff\"\\";
    char line[512];
    char id[64];
    char want[48];
    billing_event *ev = billing_event_new();
    char err[ERR];
    size_t n;
    size_t pos;
    size_t k;
    billing_status st;

    for (n = 1; n <= 40; n++) {
        for (pos = 0; pos < n; pos++) {
            /* "\u0041" at @pos: the same id with an 'A' there. */
            memset(want, 'i', n);
            want[n] = '\0';
            want[pos] = 'A';
            snprintf(id, sizeof(id), "%.*s\\u0041%s", (int)pos, want, want + pos + 1);
            snprintf(line, sizeof(line), "{\"id\":\"%s\"," BASE_KEYS ",\"quantity\":\"1\"}", id);
            ck_assert_int_eq(bc_event_parse_json(ev, line, strlen(line), err, sizeof(err)),
                             BILLING_OK);
            ck_assert_str_eq(billing_event_id(ev), want);
            for (k = 0; k < sizeof(specials) - 1; k++) {
                memset(id, 'i', n);
                id[n] = '\0';
                id[pos] = specials[k];
                snprintf(line, sizeof(line), "{\"id\":\"%s\"," BASE_KEYS ",\"quantity\":\"1\"}",
                         id);
                st = bc_event_parse_json(ev, line, strlen(line), err, sizeof(err));
                ck_assert_msg(st != BILLING_OK, "byte 0x%02x at %zu of %zu accepted",
                              (unsigned char)specials[k], pos, n);
            }
        }
    }
    billing_event_destroy(ev);
}
END_TEST

/*
 * A string running to the end of the input, in a buffer of exactly its
 * length (so that a sanitizer sees any read past it): every length up to
 * three blocks is reported unterminated, nothing after the end is read.
 */
START_TEST(test_unterminated_at_end)
{
    static const char head[] = "{\"id\":\"";
    billing_event *ev = billing_event_new();
    char want[96];
    char err[ERR];
    char *line;
    size_t n;
    size_t len;

    for (n = 0; n <= 48; n++) {
        len = strlen(head) + n;
        line = malloc(len);
        ck_assert_ptr_nonnull(line);
        memcpy(line, head, strlen(head));
        memset(line + strlen(head), 'i', n);
        ck_assert_int_eq(bc_event_parse_json(ev, line, len, err, sizeof(err)), BILLING_ERR_PARSE);
        snprintf(want, sizeof(want),
                 "event: column %zu: unterminated string, found the end of the line", len + 1);
        ck_assert_str_eq(err, want);
        free(line);
    }
    billing_event_destroy(ev);
}
END_TEST

static uint64_t rng = UINT64_C(0x2545f4914f6cdd1d);

/* Random corruptions of a good line: the parser accepts or names a reason, never crashes. */
START_TEST(test_random_input)
{
    static const char good[] = GOOD;
    static const char alphabet[] = "{}[]:,\"\\ut0123456789.-eE \t\x01\xff";
    char line[sizeof(good)];
    billing_event *ev = billing_event_new();
    char err[ERR];
    size_t len;
    int i;
    int j;

    for (i = 0; i < 50000; i++) {
        memcpy(line, good, sizeof(good));
        len = (size_t)(test_rnd(&rng) % sizeof(good));
        for (j = 0; len > 0 && j < 1 + (int)(test_rnd(&rng) % 3); j++)
            line[test_rnd(&rng) % len] = alphabet[test_rnd(&rng) % (sizeof(alphabet) - 1)];
        err[0] = '\0';
        if (bc_event_parse_json(ev, line, len, err, sizeof(err)) != BILLING_OK)
            ck_assert_msg(strncmp(err, "event", 5) == 0, "'%.*s': '%s'", (int)len, line, err);
    }
    billing_event_destroy(ev);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* The usual-line path against the general parser                          */
/* ---------------------------------------------------------------------- */

#define USUAL_HEAD                                                                                \
    "{\"id\":\"ev-0\",\"account\":\"acct-000512\",\"resource\":\"i-000512-3\",\"meter\":\"gpu\"," \
    "\"start\":\"2026-01-05T23:33:00Z\",\"end\":\"2026-01-05T23:34:00Z\",\"quantity\":\"8\""
#define USUAL USUAL_HEAD ",\"model\":\"RTX4090\",\"region\":\"cn-east-1\"}"
#define USUAL_WITH(meter, start, end, quantity)                             \
    "{\"id\":\"e\",\"account\":\"a\",\"resource\":\"r\",\"meter\":\"" meter \
    "\",\"start\":\"" start "\",\"end\":\"" end "\",\"quantity\":\"" quantity "\"}"
#define T0 "2026-01-05T23:33:00Z"
#define T1 "2026-01-05T23:34:00Z"
#define ID128 LONG64 LONG64

/* bc_event_parse_json (usual path first) and the general parser: same status, message and event. */
static void assert_paths_agree(const char *line, size_t len)
{
    billing_event *a = billing_event_new();
    billing_event *b = billing_event_new();
    char ea[ERR] = "";
    char eb[ERR] = "";
    unsigned char x[BILLING_EVENT_WIRE_MAX];
    unsigned char y[BILLING_EVENT_WIRE_MAX];
    size_t nx = 0;
    size_t ny = 0;
    billing_status sa = bc_event_parse_json(a, line, len, ea, sizeof(ea));
    billing_status sb = bc_event_parse_json_general(b, line, len, eb, sizeof(eb));

    ck_assert_msg(sa == sb, "'%.*s': %d, general %d", (int)len, line, sa, sb);
    ck_assert_str_eq(ea, eb);
    if (sa == BILLING_OK) {
        ck_assert_int_eq(billing_event_encode(a, x, sizeof(x), &nx),
                         billing_event_encode(b, y, sizeof(y), &ny));
        ck_assert_uint_eq(nx, ny);
        ck_assert_mem_eq(x, y, nx);
        ck_assert_str_eq(billing_event_id(a), billing_event_id(b));
        ck_assert_str_eq(billing_event_model(a), billing_event_model(b));
        ck_assert_str_eq(billing_event_region(a), billing_event_region(b));
    }
    billing_event_destroy(a);
    billing_event_destroy(b);
}

typedef struct usual_case {
    const char *line;
    int taken; /* non-zero if the usual path reads it */
} usual_case;

static const usual_case usual_cases[] = {
    {USUAL, 1},
    {USUAL_HEAD "}", 1},
    {USUAL_HEAD ",\"model\":\"RTX4090\"}", 1},
    {USUAL_HEAD ",\"region\":\"cn-east-1\"}", 1},
    {USUAL_HEAD ",\"model\":\"\",\"region\":\"\"}", 1},
    {USUAL_WITH("gpuless", T0, T1, "1"), 1},
    {USUAL_WITH("storage", T0, T1, "0.5"), 1},
    {USUAL_WITH("traffic", T0, T1, "123456789.123456789"), 1},
    {USUAL_WITH("gpu", T0, T1, "000000000.1"), 1},
    {USUAL_WITH("gpu", "2024-02-29T00:00:00Z", "2199-12-31T23:59:59Z", "1"), 1},
    {USUAL_WITH("gpu", "1900-01-01T00:00:00Z", "2000-02-29T12:00:00Z", "1"), 1},
    /* Dates that differ in the day only, or in the month: each read. */
    {USUAL_WITH("gpu", "2026-01-05T23:00:00Z", "2026-01-06T01:00:00Z", "1"), 1},
    {USUAL_WITH("gpu", "2026-01-31T23:59:00Z", "2026-02-01T00:01:00Z", "1"), 1},
    {USUAL_WITH("gpu", "2026-01-05T23:00:00Z", "2026-01-05T01:00:00Z", "1"), 1},
    {USUAL_WITH("gpu", "2026-01-05T23:00:00Z", "2026-01-32T01:00:00Z", "1"), 0},
    {USUAL_WITH("gpu", "2026-01-05T23:00:00Z", "2026-01-05T01:00:00+01:00", "1"), 1},
    /* Other timestamp forms: read by the general timestamp parser, the line still usual. */
    {USUAL_WITH("gpu", "2026-01-05T10:00:00+08:00", "2026-01-05 13:00:00.5z", "1"), 1},
    {USUAL_WITH("gpu", "2200-01-01T00:00:00Z", T1, "1"), 1},
    {"{\"id\":\"" ID128 "\",\"account\":\"a\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":\"" T0
     "\",\"end\":\"" T1 "\",\"quantity\":\"1\",\"model\":\"" LONG64 "\"}",
     1},
    /* Everything else goes to the general parser. */
    {"{\"id\":\"" ID128 "m\",\"account\":\"a\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":\"" T0
     "\",\"end\":\"" T1 "\",\"quantity\":\"1\"}",
     0},
    {"{\"id\":\"\",\"account\":\"a\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":\"" T0
     "\",\"end\":\"" T1 "\",\"quantity\":\"1\"}",
     0},
    {USUAL_WITH("gpus", T0, T1, "1"), 0},
    {USUAL_WITH("Gpu", T0, T1, "1"), 0},
    {USUAL_WITH("storagE", T0, T1, "1"), 0},
    {USUAL_WITH("gpu", "1899-12-31T23:59:59Z", T1, "1"), 0},
    {USUAL_WITH("gpu", "2023-02-29T00:00:00Z", T1, "1"), 0},
    {USUAL_WITH("gpu", "2026-13-01T00:00:00Z", T1, "1"), 0},
    {USUAL_WITH("gpu", "2026-01-00T00:00:00Z", T1, "1"), 0},
    {USUAL_WITH("gpu", "2026-01-05T24:00:00Z", T1, "1"), 0},
    {USUAL_WITH("gpu", "2026-01-05T23:60:00Z", T1, "1"), 0},
    {USUAL_WITH("gpu", "2026-01-05T23:59:60Z", T1, "1"), 0},
    {USUAL_WITH("gpu", "2026-01-05T23:5a:00Z", T1, "1"), 0},
    {USUAL_WITH("gpu", T0, T1, "1234567890"), 0},
    {USUAL_WITH("gpu", T0, T1, "1.1234567890"), 0},
    {USUAL_WITH("gpu", T0, T1, "+1"), 0},
    {USUAL_WITH("gpu", T0, T1, "1."), 0},
    {USUAL_WITH("gpu", T0, T1, ".5"), 0},
    {USUAL_WITH("gpu", T0, T1, "-1"), 0},
    {USUAL_WITH("gpu", T0, T1, "1e3"), 0},
    {USUAL_WITH("gpu", T0, T1, ""), 0},
    {USUAL_HEAD "} ", 0},
    {USUAL_HEAD "}\r", 0},
    {USUAL_HEAD "}}", 0},
    {USUAL_HEAD, 0},
    {USUAL_HEAD ",\"model\":null}", 0},
    {USUAL_HEAD ",\"region\":\"a\",\"model\":\"b\"}", 0},
    {USUAL_HEAD ",\"model\":\"a\",\"model\":\"b\"}", 0},
    {USUAL_HEAD ",\"id\":\"x\"}", 0},
    {USUAL_HEAD ",\"model\":\"R\\u0054X\"}", 0},
    {USUAL_HEAD ",\"model\":\"R\tX\"}", 0},
    {USUAL_HEAD ",\"model\":\"" LONG64 "m\"}", 0},
    {USUAL_HEAD ", \"model\":\"RTX\"}", 0},
    {" " USUAL, 0},
    {"{\"account\":\"a\",\"id\":\"e\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":\"" T0
     "\",\"end\":\"" T1 "\",\"quantity\":\"1\"}",
     0},
    {"{\"id\":\"e\",\"account\":\"a\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":\"" T0
     "\",\"end\":\"" T1 "\",\"quantity\":1}",
     0},
};

START_TEST(test_usual_path)
{
    const usual_case *c = &usual_cases[_i];
    billing_event *ev = billing_event_new();
    billing_status st = bc_event_parse_json_usual(ev, c->line, strlen(c->line));

    ck_assert_msg((st == BILLING_OK) == (c->taken != 0), "case %d: usual path %s", _i,
                  st == BILLING_OK ? "took it" : "left it");
    assert_paths_agree(c->line, strlen(c->line));
    billing_event_destroy(ev);
}
END_TEST

/* Random corruptions of a usual line: the two paths agree on every one. */
START_TEST(test_usual_random)
{
    static const char good[] = USUAL;
    static const char alphabet[] = "{}:,\"\\u0123456789.-+eTZ: \t\x01\xff\x7fgstr";
    char line[sizeof(good)];
    size_t len;
    int i;
    int j;

    for (i = 0; i < 20000; i++) {
        memcpy(line, good, sizeof(good));
        len = sizeof(good) - 1 - (size_t)(test_rnd(&rng) % 4 == 0 ? test_rnd(&rng) % 8 : 0);
        for (j = 0; j < 1 + (int)(test_rnd(&rng) % 2); j++)
            line[test_rnd(&rng) % len] = alphabet[test_rnd(&rng) % (sizeof(alphabet) - 1)];
        assert_paths_agree(line, len);
    }
}
END_TEST

/* Every day of 1899..2201 (and days that do not exist): the fixed-place UTC form reads as the general one. */
START_TEST(test_utc_timestamps)
{
    static const char *const clocks[] = {"00:00:00", "23:59:59", "12:34:56"};
    char z[32];
    char off[40];
    billing_time_t tz;
    billing_time_t to;
    billing_status sz;
    billing_status so;
    int y;
    int m;
    int d;
    size_t c;

    for (y = 1899; y <= 2201; y++) {
        for (m = 0; m <= 13; m++) {
            for (d = 0; d <= 32; d++) {
                for (c = 0; c < sizeof(clocks) / sizeof(clocks[0]); c++) {
                    snprintf(z, sizeof(z), "%04d-%02d-%02dT%sZ", y, m, d, clocks[c]);
                    snprintf(off, sizeof(off), "%04d-%02d-%02dT%s+00:00", y, m, d, clocks[c]);
                    tz = -1;
                    to = -2;
                    sz = billing_time_parse_n(z, strlen(z), &tz, NULL, 0);
                    so = billing_time_parse(off, &to, NULL, 0);
                    ck_assert_msg(sz == so, "%s: %d, %s: %d", z, sz, off, so);
                    if (sz == BILLING_OK)
                        ck_assert_msg(tz == to, "%s", z);
                }
            }
        }
    }
}
END_TEST

/*
 * Every byte value at every place of a fixed-place UTC timestamp: read as
 * the general parser reads the same text with ' ' for 'T' (or 'z' for
 * 'Z'), which the fixed-place reader leaves to it.
 */
START_TEST(test_utc_every_byte)
{
    static const char *const stamps[] = {"2024-02-29T23:59:59Z", "1900-01-01T00:00:00Z",
                                         "2199-12-31T12:30:45Z"};
    char z[21];
    char ref[21];
    billing_time_t tz;
    billing_time_t tr;
    billing_status sz;
    billing_status sr;
    size_t s;
    int pos;
    int b;

    for (s = 0; s < sizeof(stamps) / sizeof(stamps[0]); s++) {
        for (pos = 0; pos < 20; pos++) {
            for (b = 0; b < 256; b++) {
                memcpy(z, stamps[s], 21);
                z[pos] = (char)b;
                memcpy(ref, z, 21);
                if (pos == 10)
                    ref[19] = 'z';
                else
                    ref[10] = ' ';
                tz = -1;
                tr = -2;
                sz = billing_time_parse_n(z, 20, &tz, NULL, 0);
                sr = billing_time_parse_n(ref, 20, &tr, NULL, 0);
                ck_assert_msg(sz == sr, "'%s' byte %d at %d: %d, general %d", stamps[s], b, pos, sz,
                              sr);
                if (sz == BILLING_OK)
                    ck_assert_msg(tz == tr, "'%s' byte %d at %d", stamps[s], b, pos);
            }
        }
    }
}
END_TEST

static Suite *eventjson_suite(void)
{
    Suite *s = suite_create("eventjson");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, test_accept, 0, (int)(sizeof(good_cases) / sizeof(good_cases[0])));
    tcase_add_loop_test(tc, test_reject, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(tc, test_id_bound);
    tcase_add_test(tc, test_length_bound);
    tcase_add_test(tc, test_special_byte_every_position);
    tcase_add_test(tc, test_unterminated_at_end);
    tcase_add_test(tc, test_random_input);
    tcase_add_loop_test(tc, test_usual_path, 0,
                        (int)(sizeof(usual_cases) / sizeof(usual_cases[0])));
    tcase_add_test(tc, test_usual_random);
    tcase_add_test(tc, test_utc_timestamps);
    tcase_add_test(tc, test_utc_every_byte);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(eventjson_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
