/*
 * check_codec.c - billing_event_decode / billing_event_encode: valid
 * messages, every invalid field, malformed and truncated bytes, size
 * bounds, unknown fields, round trips and random input.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "billing/v1/usage_event.pb-c.h"
#include "testrng.h"

#define ERR 512

/* A valid message's fields, which each case then spoils in one way. */
typedef struct msg {
    Billing__V1__UsageEvent m;
    Billing__V1__Timestamp start;
    Billing__V1__Timestamp end;
} msg;

static void msg_init(msg *x)
{
    billing__v1__usage_event__init(&x->m);
    billing__v1__timestamp__init(&x->start);
    billing__v1__timestamp__init(&x->end);
    x->m.event_id = (char *)"e1";
    x->m.account_id = (char *)"lab-a";
    x->m.resource_id = (char *)"i-1";
    x->m.meter = BILLING__V1__METER__METER_GPU;
    x->start.seconds = 1767578400; /* 2026-01-05T10:00:00+08:00 */
    x->end.seconds = 1767589200;   /* 13:00 */
    x->m.start = &x->start;
    x->m.end = &x->end;
    x->m.quantity = (char *)"8";
    x->m.gpu_model = (char *)"RTX4090";
    x->m.region = (char *)"cn-east-1";
}

/* Pack @x into @buf; returns the length. */
static size_t pack(const msg *x, unsigned char *buf, size_t size)
{
    size_t n = billing__v1__usage_event__get_packed_size(&x->m);

    ck_assert_uint_le(n, size);
    return billing__v1__usage_event__pack(&x->m, buf);
}

static billing_status decode(const unsigned char *buf, size_t len, char *err)
{
    billing_event *ev = billing_event_new();
    billing_status st;

    ck_assert_ptr_nonnull(ev);
    err[0] = '\0';
    st = billing_event_decode(ev, buf, len, err, ERR);
    billing_event_destroy(ev);
    return st;
}

static void expect(const unsigned char *buf, size_t len, billing_status want, const char *text)
{
    char err[ERR];
    billing_status st = decode(buf, len, err);

    ck_assert_msg(st == want, "status %d, want %d (%s)", st, want, err);
    ck_assert_msg(strstr(err, text) != NULL, "message '%s' lacks '%s'", err, text);
}

START_TEST(test_decode_valid_and_rate)
{
    msg x;
    unsigned char buf[512];
    size_t len;
    billing_event *ev = billing_event_new();
    char err[ERR];

    msg_init(&x);
    len = pack(&x, buf, sizeof(buf));
    ck_assert_int_eq(billing_event_decode(ev, buf, len, err, sizeof(err)), BILLING_OK);
    ck_assert_str_eq(billing_event_id(ev), "e1");
    billing_event_destroy(ev);
}
END_TEST

/* Setters -> encode -> decode -> encode gives the same bytes, sub-second and pre-1970 included. */
START_TEST(test_round_trip)
{
    billing_event *a = billing_event_new();
    billing_event *b = billing_event_new();
    unsigned char one[BILLING_EVENT_WIRE_MAX];
    unsigned char two[BILLING_EVENT_WIRE_MAX];
    size_t n1;
    size_t n2;
    char err[ERR];

    billing_event_set_id(a, "round-1");
    billing_event_set_account(a, "lab-a");
    billing_event_set_resource(a, "disk-1");
    billing_event_set_meter(a, BILLING_METER_STORAGE);
    billing_event_set_interval(a, -BILLING_NS_PER_SEC / 2, 1234567891);
    ck_assert_int_eq(billing_event_set_quantity(a, "1024.000000001", err, sizeof(err)), BILLING_OK);
    billing_event_set_region(a, "cn-east-1");
    ck_assert_int_eq(billing_event_encode(a, one, sizeof(one), &n1), BILLING_OK);
    ck_assert_int_eq(billing_event_decode(b, one, n1, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_event_encode(b, two, sizeof(two), &n2), BILLING_OK);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(one, two, n1);
    billing_event_destroy(a);
    billing_event_destroy(b);
}
END_TEST

START_TEST(test_encode_small_buffer)
{
    billing_event *ev = billing_event_new();
    unsigned char buf[8];
    size_t len = 0;

    billing_event_set_id(ev, "e-small");
    billing_event_set_account(ev, "lab-a");
    ck_assert_int_eq(billing_event_encode(ev, buf, sizeof(buf), &len), BILLING_ERR_TOO_LARGE);
    ck_assert_uint_eq(len, 2 + 7 + 2 + 5);
    ck_assert_int_eq(billing_event_encode(ev, NULL, 0, &len), BILLING_ERR_TOO_LARGE);
    ck_assert_int_eq(billing_event_encode(NULL, buf, sizeof(buf), &len), BILLING_ERR_INVALID);
    billing_event_destroy(ev);
}
END_TEST

/* ---- one spoiled field per case --------------------------------------- */

static char long_id[200];
static char long_attr[100];

typedef struct bad_case {
    const char *name;
    void (*spoil)(msg *x);
    billing_status status;
    const char *text;
} bad_case;

static void no_id(msg *x)
{
    x->m.event_id = (char *)"";
}
static void spaced_id(msg *x)
{
    x->m.event_id = (char *)"e 1";
}
static void long_event_id(msg *x)
{
    x->m.event_id = long_id;
}
static void no_account(msg *x)
{
    x->m.account_id = (char *)"";
}
static void long_account(msg *x)
{
    x->m.account_id = long_id;
}
static void no_resource(msg *x)
{
    x->m.resource_id = (char *)"";
}
static void no_meter(msg *x)
{
    x->m.meter = BILLING__V1__METER__METER_UNSPECIFIED;
}
static void bad_meter(msg *x)
{
    x->m.meter = (Billing__V1__Meter)9;
}
static void no_start(msg *x)
{
    x->m.start = NULL;
}
static void no_end(msg *x)
{
    x->m.end = NULL;
}
static void negative_nanos(msg *x)
{
    x->start.nanos = -1;
}
static void big_nanos(msg *x)
{
    x->end.nanos = 1000000000;
}
static void far_future(msg *x)
{
    x->end.seconds = INT64_C(100000000000);
}
static void before_1900(msg *x)
{
    x->start.seconds = INT64_C(-3000000000);
}
static void end_before_start(msg *x)
{
    x->end.seconds = x->start.seconds - 1;
}
static void end_equals_start(msg *x)
{
    x->end = x->start;
}
static void no_quantity(msg *x)
{
    x->m.quantity = (char *)"";
}
static void text_quantity(msg *x)
{
    x->m.quantity = (char *)"abc";
}
static void negative_quantity(msg *x)
{
    x->m.quantity = (char *)"-1";
}
static void fine_quantity(msg *x)
{
    x->m.quantity = (char *)"1.0000000001";
}
static void long_model(msg *x)
{
    x->m.gpu_model = long_attr;
}
static void long_region(msg *x)
{
    x->m.region = long_attr;
}
static void control_model(msg *x)
{
    x->m.gpu_model = (char *)"RTX\t4090";
}
static void utf8_region(msg *x)
{
    x->m.region = (char *)"cn-\xc3\xa9";
}

static const bad_case bad_cases[] = {
    {"no id", no_id, BILLING_ERR_INVALID, "event: field 'id' is missing"},
    {"spaced id", spaced_id, BILLING_ERR_INVALID, "field 'id' must be 1..128 bytes"},
    {"long id", long_event_id, BILLING_ERR_TOO_LARGE, "field 'id' must be 1..128 bytes"},
    {"no account", no_account, BILLING_ERR_INVALID, "event 'e1': field 'account' is missing"},
    {"long account", long_account, BILLING_ERR_TOO_LARGE, "event 'e1': field 'account' must"},
    {"no resource", no_resource, BILLING_ERR_INVALID, "event 'e1': field 'resource' is missing"},
    {"no meter", no_meter, BILLING_ERR_INVALID, "event 'e1': field 'meter' is missing"},
    {"bad meter", bad_meter, BILLING_ERR_INVALID, "event 'e1': field 'meter': unknown value 9"},
    {"no start", no_start, BILLING_ERR_INVALID, "event 'e1': field 'start' is missing"},
    {"no end", no_end, BILLING_ERR_INVALID, "event 'e1': field 'end' is missing"},
    {"negative nanos", negative_nanos, BILLING_ERR_RANGE, "field 'start': nanos -1 is outside"},
    {"big nanos", big_nanos, BILLING_ERR_RANGE, "field 'end': nanos 1000000000 is outside"},
    {"far future", far_future, BILLING_ERR_RANGE, "field 'end': seconds 100000000000 is outside"},
    {"before 1900", before_1900, BILLING_ERR_RANGE, "field 'start': seconds -3000000000"},
    {"end before start", end_before_start, BILLING_ERR_INVALID,
     "event 'e1': field 'end' must be after 'start'"},
    {"end equals start", end_equals_start, BILLING_ERR_INVALID, "field 'end' must be after"},
    {"no quantity", no_quantity, BILLING_ERR_INVALID, "event 'e1': field 'quantity' is missing"},
    {"text quantity", text_quantity, BILLING_ERR_PARSE,
     "event 'e1': field 'quantity': 'abc' is not a decimal number"},
    {"negative quantity", negative_quantity, BILLING_ERR_RANGE,
     "field 'quantity': '-1' is negative"},
    {"fine quantity", fine_quantity, BILLING_ERR_RANGE, "more than 9 decimals"},
    {"long model", long_model, BILLING_ERR_TOO_LARGE, "field 'model' is longer than 64 bytes"},
    {"long region", long_region, BILLING_ERR_TOO_LARGE, "field 'region' is longer than 64 bytes"},
    {"control in model", control_model, BILLING_ERR_PARSE,
     "field 'model': byte 0x09 at position 3 is not printable ASCII"},
    {"UTF-8 in region", utf8_region, BILLING_ERR_PARSE, "field 'region': byte 0xc3 at position 3"},
};

START_TEST(test_bad_field)
{
    const bad_case *c = &bad_cases[_i];
    msg x;
    unsigned char buf[1024];
    size_t len;
    char err[ERR];
    billing_status st;

    memset(long_id, 'x', sizeof(long_id) - 1);
    memset(long_attr, 'm', sizeof(long_attr) - 1);
    msg_init(&x);
    c->spoil(&x);
    len = pack(&x, buf, sizeof(buf));
    st = decode(buf, len, err);
    ck_assert_msg(st == c->status, "%s: status %d, want %d (%s)", c->name, st, c->status, err);
    ck_assert_msg(strstr(err, c->text) != NULL, "%s: message '%s' lacks '%s'", c->name, err,
                  c->text);
}
END_TEST

/* ---- the wire format -------------------------------------------------- */

START_TEST(test_wire_errors)
{
    static const unsigned char truncated_len[] = {0x0a, 0x05, 'a'};
    static const unsigned char wrong_type[] = {0x08, 0x01};
    static const unsigned char field_zero[] = {0x00, 0x01};
    static const unsigned char cut_key[] = {0x80};
    static const unsigned char group[] = {0x7b};
    static const unsigned char cut_seconds[] = {0x2a, 0x02, 0x08, 0x80};
    static const unsigned char cut_fixed[] = {0x59, 0x01, 0x02};
    static const unsigned char long_varint[] = {0x50, 0x80, 0x80, 0x80, 0x80, 0x80,
                                                0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    static const unsigned char nul_in_id[] = {0x0a, 0x03, 'e', 0x00, '1'};
    static const unsigned char bad_nested_type[] = {0x2a, 0x02, 0x15, 0x00};

    expect(truncated_len, sizeof(truncated_len), BILLING_ERR_PARSE,
           "event: field 'id': length at byte 1 runs past the end of the message");
    expect(wrong_type, sizeof(wrong_type), BILLING_ERR_PARSE,
           "field 'id': wire type 0 at byte 0, expected 2");
    expect(field_zero, sizeof(field_zero), BILLING_ERR_PARSE, "malformed field key at byte 0");
    expect(cut_key, sizeof(cut_key), BILLING_ERR_PARSE, "malformed field key at byte 0");
    expect(group, sizeof(group), BILLING_ERR_PARSE, "field '#15': unsupported wire type 3");
    expect(cut_seconds, sizeof(cut_seconds), BILLING_ERR_PARSE,
           "field 'start.seconds': truncated varint at byte 3");
    expect(cut_fixed, sizeof(cut_fixed), BILLING_ERR_PARSE,
           "field '#11': truncated fixed-size value");
    expect(long_varint, sizeof(long_varint), BILLING_ERR_PARSE, "field '#10': truncated varint");
    expect(nul_in_id, sizeof(nul_in_id), BILLING_ERR_PARSE,
           "field 'id': byte 0x00 at position 1 is not printable ASCII");
    expect(bad_nested_type, sizeof(bad_nested_type), BILLING_ERR_PARSE,
           "field 'start.nanos': wire type 5");
    expect(NULL, 0, BILLING_ERR_INVALID, "event: field 'id' is missing");
}
END_TEST

START_TEST(test_oversize)
{
    unsigned char *buf = calloc(1, BILLING_EVENT_WIRE_MAX + 1);

    ck_assert_ptr_nonnull(buf);
    expect(buf, BILLING_EVENT_WIRE_MAX + 1, BILLING_ERR_TOO_LARGE,
           "message of 4097 bytes exceeds the 4096-byte limit");
    free(buf);
}
END_TEST

/* Fields unknown to this schema version are skipped, however many. */
START_TEST(test_unknown_fields_skipped)
{
    msg x;
    unsigned char buf[BILLING_EVENT_WIRE_MAX];
    size_t len;
    char err[ERR];

    msg_init(&x);
    len = pack(&x, buf, sizeof(buf));
    /* Field 20, length-delimited, 3 bytes; then field 21 varints up to the size limit. */
    memcpy(buf + len, "\xa2\x01\x03xyz", 6);
    len += 6;
    while (len + 3 <= sizeof(buf)) {
        memcpy(buf + len, "\xa8\x01\x07", 3);
        len += 3;
    }
    ck_assert_int_eq(decode(buf, len, err), BILLING_OK);
}
END_TEST

/* A repeated scalar field: the last value wins, as protobuf specifies. */
START_TEST(test_last_value_wins)
{
    static const unsigned char two_ids[] = {0x0a, 0x01, 'a', 0x0a, 0x01, 'b'};
    billing_event *ev = billing_event_new();
    char err[ERR];

    ck_assert_int_eq(billing_event_decode(ev, two_ids, sizeof(two_ids), err, sizeof(err)),
                     BILLING_ERR_INVALID);
    ck_assert_str_eq(billing_event_id(ev), "b");
    ck_assert_str_eq(err, "event 'b': field 'account' is missing");
    billing_event_destroy(ev);
}
END_TEST

/*
 * Every prefix of a valid message is rejected with a message, except the
 * prefixes that end before the optional model or region: those decode to
 * an event that encodes back to exactly the prefix.
 */
START_TEST(test_truncations)
{
    msg x;
    unsigned char buf[512];
    unsigned char again[512];
    size_t len;
    size_t n;
    size_t again_len;
    billing_event *ev = billing_event_new();
    char err[ERR];

    msg_init(&x);
    len = pack(&x, buf, sizeof(buf));
    for (n = 0; n < len; n++) {
        err[0] = '\0';
        if (billing_event_decode(ev, buf, n, err, sizeof(err)) != BILLING_OK) {
            ck_assert_msg(err[0] != '\0', "prefix %zu: no message", n);
            continue;
        }
        ck_assert_int_eq(billing_event_encode(ev, again, sizeof(again), &again_len), BILLING_OK);
        ck_assert_uint_eq(again_len, n);
        ck_assert_mem_eq(again, buf, n);
    }
    billing_event_destroy(ev);
}
END_TEST

/*
 * Keys and length prefixes padded past 5 bytes are valid varints, but
 * protobuf-c's unpack refuses them, and so does the decoder (it accepted
 * what unpack accepted before reading the wire itself). A wire error
 * later in the message is still the one reported.
 */
START_TEST(test_prefix_over_five_bytes)
{
    /* The meter's key (field 4, varint) in 1 to 6 bytes, then METER_GPU. */
    static const unsigned char keys[6][7] = {
        {0x20, 0x01},
        {0xa0, 0x00, 0x01},
        {0xa0, 0x80, 0x00, 0x01},
        {0xa0, 0x80, 0x80, 0x00, 0x01},
        {0xa0, 0x80, 0x80, 0x80, 0x00, 0x01},
        {0xa0, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01},
    };
    msg x;
    unsigned char buf[512];
    size_t len;
    size_t k;
    char err[ERR];

    msg_init(&x);
    x.m.meter = BILLING__V1__METER__METER_UNSPECIFIED;
    len = pack(&x, buf, sizeof(buf));
    for (k = 0; k < 6; k++) {
        memcpy(buf + len, keys[k], k + 2);
        err[0] = '\0';
        if (k < 5) {
            ck_assert_msg(decode(buf, len + k + 2, err) == BILLING_OK, "%zu-byte key: %s", k + 1,
                          err);
            continue;
        }
        expect(buf, len + k + 2, BILLING_ERR_PARSE, "event: malformed message");
        /* A truncated field after it: the wire error wins. */
        memcpy(buf + len + k + 2, "\x0a\x05", 2);
        expect(buf, len + k + 4, BILLING_ERR_PARSE, "field 'id': length at byte");
    }
}
END_TEST

START_TEST(test_length_prefix_over_five_bytes)
{
    /* id "e" with its length 1 written in 5, then 6 bytes. */
    static const unsigned char five[] = {0x0a, 0x81, 0x80, 0x80, 0x80, 0x00, 'e'};
    static const unsigned char six[] = {0x0a, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 'e'};

    expect(five, sizeof(five), BILLING_ERR_INVALID, "event 'e': field 'account' is missing");
    expect(six, sizeof(six), BILLING_ERR_PARSE, "event: malformed message");
}
END_TEST

/* A repeated Timestamp replaces the earlier one whole, as protobuf-c's unpack does. */
START_TEST(test_repeated_timestamp_replaces)
{
    msg x;
    unsigned char buf[512];
    size_t len;
    billing_event *ev = billing_event_new();
    char err[ERR];
    /* start { seconds: 1767578460 } again, without nanos: 2026-01-05T10:01:00+08:00. */
    static const unsigned char again[] = {0x2a, 0x06, 0x08, 0xdc, 0xb6, 0xec, 0xca, 0x06};

    msg_init(&x);
    x.start.nanos = 5;
    len = pack(&x, buf, sizeof(buf));
    memcpy(buf + len, again, sizeof(again));
    len += sizeof(again);
    ck_assert_int_eq(billing_event_decode(ev, buf, len, err, sizeof(err)), BILLING_OK);
    ck_assert_int_eq(billing_event_start(ev), INT64_C(1767578460) * BILLING_NS_PER_SEC);
    billing_event_destroy(ev);
}
END_TEST

/* billing_event_set_text: the bytes given, no NUL needed, the setters' bounds and outcome. */
START_TEST(test_set_text)
{
    static const char line[] = "lab-a,i-1;RTX4090";
    char id[130];
    billing_event *ev = billing_event_new();

    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_ACCOUNT, line, 5), BILLING_OK);
    ck_assert_str_eq(billing_event_account(ev), "lab-a");
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_RESOURCE, line + 6, 3), BILLING_OK);
    ck_assert_str_eq(billing_event_resource(ev), "i-1");
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_MODEL, line + 10, 7), BILLING_OK);
    ck_assert_str_eq(billing_event_model(ev), "RTX4090");
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_REGION, line, 0), BILLING_OK);
    ck_assert_str_eq(billing_event_region(ev), "");
    memset(id, 'i', sizeof(id));
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_ID, id, 128), BILLING_OK);
    ck_assert_uint_eq(strlen(billing_event_id(ev)), 128);
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_ID, id, 129), BILLING_ERR_TOO_LARGE);
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_MODEL, id, 65), BILLING_ERR_TOO_LARGE);
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_ACCOUNT, line, 0),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_RESOURCE, "i\0x", 3),
                     BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_event_set_text(ev, BILLING_TEXT_REGION, NULL, 0), BILLING_ERR_INVALID);
    ck_assert_int_eq(billing_event_set_text(ev, (billing_event_text)99, line, 1),
                     BILLING_ERR_INVALID);
    billing_event_destroy(ev);
}
END_TEST

/* billing_time_parse_n: what billing_time_parse says of the same bytes as a string. */
START_TEST(test_time_parse_n)
{
    static const char *const texts[] = {
        "2026-01-05T10:00:00Z",
        "2026-01-05T10:00:00.5+08:00",
        "2026-01-05T10:00:00",
        "2300-01-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "",
        "2026-01-05T10:00:00Zjunk",
        "1900-01-01T00:00:00Z",
        "2026-01-05t10:00:00z",
        "2026-01-05T10:00:00.123456789012345678901234567890123456789012345678901234567890Z",
    };
    char buf[128];
    char err_n[256];
    char err_s[256];
    billing_time_t t_n;
    billing_time_t t_s;
    billing_status st_n;
    billing_status st_s;
    size_t i;

    for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        /* The text followed by more digits, which @len excludes. */
        snprintf(buf, sizeof(buf), "%s99", texts[i]);
        err_n[0] = err_s[0] = '\0';
        t_n = t_s = -1;
        st_n = billing_time_parse_n(buf, strlen(texts[i]), &t_n, err_n, sizeof(err_n));
        st_s = billing_time_parse(texts[i], &t_s, err_s, sizeof(err_s));
        ck_assert_msg(st_n == st_s, "'%s': %d, want %d", texts[i], st_n, st_s);
        ck_assert_str_eq(err_n, err_s);
        ck_assert_int_eq(t_n, t_s);
    }
    ck_assert_int_eq(billing_time_parse_n("2026-01-05\0T10:00:00Z", 21, &t_n, err_n, sizeof(err_n)),
                     BILLING_ERR_PARSE);
    ck_assert_str_eq(err_n, "timestamp: contains a NUL byte");
}
END_TEST

static uint64_t rng = UINT64_C(0x9e3779b97f4a7c15);

/* Random bytes and random corruptions of a valid message: decode stays safe. */
START_TEST(test_random_input)
{
    msg x;
    unsigned char valid[512];
    unsigned char buf[512];
    unsigned char out[BILLING_EVENT_WIRE_MAX];
    size_t len;
    size_t n;
    size_t out_len;
    billing_event *ev = billing_event_new();
    char err[ERR];
    int i;
    int j;

    msg_init(&x);
    len = pack(&x, valid, sizeof(valid));
    for (i = 0; i < 20000; i++) {
        memcpy(buf, valid, len);
        n = (i % 2) ? len : (size_t)(test_rnd(&rng) % sizeof(buf));
        for (j = 0; j < 1 + (int)(test_rnd(&rng) % 4); j++)
            buf[test_rnd(&rng) % (n ? n : 1)] = (unsigned char)test_rnd(&rng);
        if (i % 2 == 0) {
            for (j = 0; j < (int)n; j++)
                buf[j] = (unsigned char)test_rnd(&rng);
        }
        if (billing_event_decode(ev, buf, n, err, sizeof(err)) == BILLING_OK)
            ck_assert_int_eq(billing_event_encode(ev, out, sizeof(out), &out_len), BILLING_OK);
        else
            ck_assert(err[0] != '\0');
    }
    billing_event_destroy(ev);
}
END_TEST

static Suite *codec_suite(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_decode_valid_and_rate);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_encode_small_buffer);
    tcase_add_loop_test(tc, test_bad_field, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(tc, test_wire_errors);
    tcase_add_test(tc, test_oversize);
    tcase_add_test(tc, test_unknown_fields_skipped);
    tcase_add_test(tc, test_last_value_wins);
    tcase_add_test(tc, test_prefix_over_five_bytes);
    tcase_add_test(tc, test_length_prefix_over_five_bytes);
    tcase_add_test(tc, test_repeated_timestamp_replaces);
    tcase_add_test(tc, test_set_text);
    tcase_add_test(tc, test_time_parse_n);
    tcase_add_test(tc, test_truncations);
    tcase_add_test(tc, test_random_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(codec_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
