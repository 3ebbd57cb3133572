/*
 * check_eventio.c - reading event files: JSON Lines line numbers, blank
 * and over-long lines, length-delimited protobuf framing with oversized,
 * truncated and malformed records, format guessing, reading a record
 * again at its offset.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "billing.h"
#include "eventio.h"

#define ERR 512
#define LINE(id)                                                                           \
    "{\"id\":\"" id "\",\"account\":\"a\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":" \
    "\"2026-01-05T10:00:00Z\",\"end\":\"2026-01-05T11:00:00Z\",\"quantity\":\"8\"}"

static char path[64];

/* A temporary file holding @len bytes of @data; its name is in `path`. */
static void write_file(const void *data, size_t len)
{
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "/tmp/check_eventio.XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* One expected record: the result, the location, and text the message must hold. */
typedef struct want {
    bc_read_result result;
    const char *where;
    const char *text;
} want;

static void expect_records(bc_format format, const want *w, size_t n)
{
    char err[ERR];
    char where[128];
    billing_event *ev = billing_event_new();
    bc_reader *rd = bc_reader_open(path, format, err, sizeof(err));
    bc_read_result rr;
    size_t i;

    ck_assert_msg(rd != NULL, "%s", err);
    for (i = 0; i < n; i++) {
        err[0] = '\0';
        rr = bc_reader_next(rd, ev, err, sizeof(err));
        ck_assert_msg(rr == w[i].result, "record %zu: result %d, want %d (%s)", i, rr, w[i].result,
                      err);
        if (w[i].where != NULL) {
            snprintf(where, sizeof(where), "%s%s", path, w[i].where);
            ck_assert_str_eq(bc_reader_where(rd), where);
        }
        if (w[i].text != NULL)
            ck_assert_msg(strstr(err, w[i].text) != NULL, "record %zu: '%s' lacks '%s'", i, err,
                          w[i].text);
        else if (rr == BC_READ_EVENT)
            ck_assert_str_eq(billing_event_id(ev), "ok");
    }
    bc_reader_close(rd);
    billing_event_destroy(ev);
    unlink(path);
}

START_TEST(test_jsonl_lines)
{
    static const char text[] =
        LINE("ok") "\n"
                   "\n"
                   "   \r\n" LINE("bad\t") "\n" LINE("ok") "\r\n"
                                                           "{\"id\":\"x\"\n" LINE("ok");
    static const want w[] = {
        {BC_READ_EVENT, ":1", NULL},
        {BC_READ_REJECT, ":4", "field 'id': character at column"},
        {BC_READ_EVENT, ":5", NULL},
        {BC_READ_REJECT, ":6",
         "event 'x': column 10: expected ',' or '}', found the end of the line"},
        {BC_READ_EVENT, ":7", NULL},
        {BC_READ_EOF, NULL, NULL},
        {BC_READ_EOF, NULL, NULL},
    };

    write_file(text, sizeof(text) - 1);
    expect_records(BC_FORMAT_JSONL, w, sizeof(w) / sizeof(w[0]));
}
END_TEST

/* Lines beyond the cap are rejected and skipped, even across many buffer refills. */
static void long_line_case(size_t long_len, int newline_at_end)
{
    static const char good[] = LINE("ok") "\n";
    size_t len = sizeof(good) - 1 + long_len + 1 + sizeof(good) - 1;
    char *text = malloc(len);
    const want w[] = {
        {BC_READ_EVENT, ":1", NULL},
        {BC_READ_REJECT, ":2", "line longer than 65536 bytes"},
        {BC_READ_EVENT, ":3", NULL},
        {BC_READ_EOF, NULL, NULL},
    };

    ck_assert_ptr_nonnull(text);
    memcpy(text, good, sizeof(good) - 1);
    memset(text + sizeof(good) - 1, 'x', long_len);
    text[sizeof(good) - 1 + long_len] = '\n';
    memcpy(text + sizeof(good) + long_len, good, sizeof(good) - 1);
    write_file(text, newline_at_end ? len : len - 1);
    expect_records(BC_FORMAT_JSONL, w, sizeof(w) / sizeof(w[0]));
    free(text);
}

START_TEST(test_jsonl_long_lines)
{
    long_line_case(BC_JSONL_LINE_MAX + 1, 1);
    long_line_case(70000, 0);
    long_line_case(3 * 1024 * 1024 + 17, 1);
}
END_TEST

START_TEST(test_jsonl_longest_line)
{
    char *text = malloc(BC_JSONL_LINE_MAX + 1);
    const want w[] = {
        {BC_READ_REJECT, ":1", "event: column 1: expected '{'"},
        {BC_READ_EOF, NULL, NULL},
    };

    ck_assert_ptr_nonnull(text);
    memset(text, 'x', BC_JSONL_LINE_MAX);
    text[BC_JSONL_LINE_MAX] = '\n';
    write_file(text, BC_JSONL_LINE_MAX + 1);
    expect_records(BC_FORMAT_JSONL, w, sizeof(w) / sizeof(w[0]));
    free(text);
}
END_TEST

/* ---- protobuf --------------------------------------------------------- */

typedef struct blob {
    unsigned char *data;
    size_t len;
    size_t cap;
} blob;

static void put(blob *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
        ck_assert_ptr_nonnull(b->data);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void put_varint(blob *b, uint64_t v)
{
    unsigned char byte;

    while (v >= 0x80) {
        byte = (unsigned char)(v | 0x80);
        put(b, &byte, 1);
        v >>= 7;
    }
    byte = (unsigned char)v;
    put(b, &byte, 1);
}

/* A length-delimited event with id @id. */
static void put_event(blob *b, const char *id)
{
    billing_event *ev = billing_event_new();
    unsigned char msg[BILLING_EVENT_WIRE_MAX];
    size_t len;

    billing_event_set_id(ev, id);
    billing_event_set_account(ev, "a");
    billing_event_set_resource(ev, "r");
    billing_event_set_meter(ev, BILLING_METER_GPU);
    billing_event_set_interval(ev, 0, BILLING_NS_PER_SEC);
    billing_event_set_quantity(ev, "8", NULL, 0);
    ck_assert_int_eq(billing_event_encode(ev, msg, sizeof(msg), &len), BILLING_OK);
    put_varint(b, len);
    put(b, msg, len);
    billing_event_destroy(ev);
}

/* A length prefix of @len, then @len bytes of zeros. */
static void put_junk_message(blob *b, size_t len)
{
    unsigned char *zeros = calloc(1, len);

    ck_assert_ptr_nonnull(zeros);
    put_varint(b, len);
    put(b, zeros, len);
    free(zeros);
}

START_TEST(test_protobuf_records)
{
    blob b = {NULL, 0, 0};
    size_t first;
    size_t second;
    char where[3][48];
    want w[] = {
        {BC_READ_EVENT, ": offset 0", NULL},
        {BC_READ_REJECT, where[0], "message of 5000 bytes exceeds the 4096-byte limit"},
        {BC_READ_REJECT, where[1], "event: field 'id' is missing"},
        {BC_READ_REJECT, where[2], "message of 2097152 bytes exceeds"},
        {BC_READ_EVENT, NULL, NULL},
        {BC_READ_EOF, NULL, NULL},
    };

    put_event(&b, "ok");
    first = b.len;
    put_junk_message(&b, 5000);
    second = b.len;
    put_varint(&b, 0);
    snprintf(where[0], sizeof(where[0]), ": offset %zu", first);
    snprintf(where[1], sizeof(where[1]), ": offset %zu", second);
    snprintf(where[2], sizeof(where[2]), ": offset %zu", b.len);
    put_junk_message(&b, 2 * 1024 * 1024);
    put_event(&b, "ok");
    write_file(b.data, b.len);
    expect_records(BC_FORMAT_PROTOBUF, w, sizeof(w) / sizeof(w[0]));
    free(b.data);
}
END_TEST

START_TEST(test_protobuf_framing_errors)
{
    static const unsigned char bad_prefix[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                               0x80, 0x80, 0x80, 0x80, 0x01};
    blob b = {NULL, 0, 0};
    const want cut[] = {
        {BC_READ_EVENT, NULL, NULL},
        {BC_READ_ERROR, NULL, "input ends inside a message"},
        {BC_READ_EOF, NULL, NULL},
    };
    const want malformed[] = {
        {BC_READ_ERROR, ": offset 0", "malformed or truncated length prefix"},
        {BC_READ_EOF, NULL, NULL},
    };
    const want cut_oversized[] = {
        {BC_READ_REJECT, NULL, "exceeds the 4096-byte limit"},
        {BC_READ_ERROR, NULL, "input ends inside an oversized message"},
        {BC_READ_EOF, NULL, NULL},
    };

    put_event(&b, "ok");
    put_event(&b, "ok");
    write_file(b.data, b.len - 3);
    expect_records(BC_FORMAT_PROTOBUF, cut, sizeof(cut) / sizeof(cut[0]));
    write_file(bad_prefix, sizeof(bad_prefix));
    expect_records(BC_FORMAT_PROTOBUF, malformed, sizeof(malformed) / sizeof(malformed[0]));
    b.len = 0;
    put_junk_message(&b, 9000);
    write_file(b.data, b.len - 1);
    expect_records(BC_FORMAT_PROTOBUF, cut_oversized,
                   sizeof(cut_oversized) / sizeof(cut_oversized[0]));
    free(b.data);
}
END_TEST

START_TEST(test_formats)
{
    bc_format f;

    ck_assert_int_eq(bc_format_guess("-", &f), 0);
    ck_assert_int_eq(f, BC_FORMAT_JSONL);
    ck_assert_int_eq(bc_format_guess("a/events.ndjson", &f), 0);
    ck_assert_int_eq(f, BC_FORMAT_JSONL);
    ck_assert_int_eq(bc_format_guess("events.pb", &f), 0);
    ck_assert_int_eq(f, BC_FORMAT_PROTOBUF);
    ck_assert_int_eq(bc_format_guess("events.bin", &f), 0);
    ck_assert_int_eq(f, BC_FORMAT_PROTOBUF);
    ck_assert_int_eq(bc_format_guess("events.txt", &f), -1);
    ck_assert_int_eq(bc_format_guess(".pb", &f), -1);
    ck_assert_int_eq(bc_format_parse("protobuf", &f), 0);
    ck_assert_int_eq(f, BC_FORMAT_PROTOBUF);
    ck_assert_int_eq(bc_format_parse("json", &f), -1);
    ck_assert_str_eq(bc_format_name(BC_FORMAT_JSONL), "jsonl");
}
END_TEST

/*
 * Every event read can be read again at its bc_reader_offset, to the same
 * content: JSON Lines with blank, CRLF, rejected and long (> 4 KiB) lines,
 * and protobuf around oversized messages. A wrong offset is an error.
 */
static void read_again_case(bc_format format)
{
    char err[ERR];
    billing_event *ev = billing_event_new();
    billing_event *again = billing_event_new();
    bc_reader *rd = bc_reader_open(path, format, err, sizeof(err));
    unsigned char a[BILLING_EVENT_WIRE_MAX];
    unsigned char b[BILLING_EVENT_WIRE_MAX];
    size_t alen;
    size_t blen;
    uint64_t offsets[8];
    uint64_t hash = 0;
    uint64_t first_hash = 0;
    int events = 0;
    int fd;
    bc_read_result rr;

    ck_assert_msg(rd != NULL, "%s", err);
    ck_assert_int_eq(bc_reader_rereadable(rd), 1);
    fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    while ((rr = bc_reader_next(rd, ev, err, sizeof(err))) != BC_READ_EOF) {
        ck_assert_int_ne(rr, BC_READ_ERROR);
        if (rr != BC_READ_EVENT)
            continue;
        ck_assert_int_lt(events, 8);
        if (events == 0)
            first_hash = bc_reader_record_hash(rd);
        offsets[events++] = bc_reader_offset(rd);
        ck_assert_int_eq(
            bc_event_read_at(fd, format, bc_reader_offset(rd), again, &hash, err, sizeof(err)),
            BC_READ_EVENT);
        ck_assert_uint_eq(hash, bc_reader_record_hash(rd));
        ck_assert_int_eq(billing_event_encode(ev, a, sizeof(a), &alen), BILLING_OK);
        ck_assert_int_eq(billing_event_encode(again, b, sizeof(b), &blen), BILLING_OK);
        ck_assert_uint_eq(alen, blen);
        ck_assert_int_eq(memcmp(a, b, alen), 0);
    }
    ck_assert_int_eq(events, 3);
    /* Out of order, later: the same events. */
    ck_assert_int_eq(bc_event_read_at(fd, format, offsets[2], again, NULL, err, sizeof(err)),
                     BC_READ_EVENT);
    ck_assert_str_eq(billing_event_id(again), "third");
    ck_assert_int_eq(bc_event_read_at(fd, format, offsets[0], again, &hash, err, sizeof(err)),
                     BC_READ_EVENT);
    ck_assert_str_eq(billing_event_id(again), "first");
    ck_assert_uint_eq(hash, first_hash);
    /* Not the start of a record. */
    ck_assert_int_eq(bc_event_read_at(fd, format, offsets[1] + 3, again, NULL, err, sizeof(err)),
                     BC_READ_ERROR);
    close(fd);
    bc_reader_close(rd);
    billing_event_destroy(ev);
    billing_event_destroy(again);
    unlink(path);
}

START_TEST(test_read_again)
{
    char err[ERR];
    static const char head[] = "\n" LINE("first") "\r\n\n{\"id\":\"x\"\n{\"id\":\"second\",";
    static const char tail[] = "\"account\":\"a\",\"resource\":\"r\",\"meter\":\"gpu\",\"start\":"
                               "\"2026-01-05T10:00:00Z\",\"end\":\"2026-01-05T11:00:00Z\","
                               "\"quantity\":\"8\"}\n" LINE("third");
    size_t pad = 6000;
    char *text = malloc(sizeof(head) + pad + sizeof(tail));
    blob b = {NULL, 0, 0};
    bc_reader *rd;

    ck_assert_ptr_nonnull(text);
    memcpy(text, head, sizeof(head) - 1);
    memset(text + sizeof(head) - 1, ' ', pad);
    memcpy(text + sizeof(head) - 1 + pad, tail, sizeof(tail));
    write_file(text, strlen(text));
    free(text);
    read_again_case(BC_FORMAT_JSONL);

    put_event(&b, "first");
    put_junk_message(&b, 5000);
    put_event(&b, "second");
    put_junk_message(&b, 10);
    put_event(&b, "third");
    write_file(b.data, b.len);
    free(b.data);
    read_again_case(BC_FORMAT_PROTOBUF);

    /* stdin cannot be read again. */
    rd = bc_reader_open("-", BC_FORMAT_JSONL, err, sizeof(err));
    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(bc_reader_rereadable(rd), 0);
    bc_reader_close(rd);
}
END_TEST

START_TEST(test_open_errors)
{
    char err[ERR];

    ck_assert_ptr_null(
        bc_reader_open("/nonexistent/events.jsonl", BC_FORMAT_JSONL, err, sizeof(err)));
    ck_assert_str_eq(err, "/nonexistent/events.jsonl: No such file or directory");
    ck_assert_ptr_null(bc_reader_open("/tmp", BC_FORMAT_JSONL, err, sizeof(err)));
    ck_assert_str_eq(err, "/tmp: is a directory");
}
END_TEST

static Suite *eventio_suite(void)
{
    Suite *s = suite_create("eventio");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_jsonl_lines);
    tcase_add_test(tc, test_jsonl_long_lines);
    tcase_add_test(tc, test_jsonl_longest_line);
    tcase_add_test(tc, test_protobuf_records);
    tcase_add_test(tc, test_protobuf_framing_errors);
    tcase_add_test(tc, test_formats);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_read_again);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(eventio_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
