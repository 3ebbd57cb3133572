/*
 * check_jsonbuf.c - the bytes of POST /v1/events answers written without
 * jansson objects (formats/jsonbuf.c) against json_dumps(JSON_COMPACT |
 * JSON_ENSURE_ASCII) of the same values: strings to escape, strings
 * jansson refuses (left out), integers, random bytes; the size cap;
 * the strings of the drafts' content hash (bc_jbuf_strn_utf8) against
 * json_dumps(JSON_COMPACT), bytes that are not UTF-8 copied; and
 * the records of a JSON Lines body (billingd/api_parse.c): texts in one
 * block, sources named as "api:key%" PRId64 ":%zu" prints them.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_parse.h"
#include "jsonbuf.h"
#include "testrng.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const char *const strings[] = {
    "",
    "evt-1",
    "a \"quoted\" id",
    "back\\slash",
    "slash/ok",
    "tab\tnew\nline\rret\bbs\fff",
    "\x01\x1f ctl",
    "del \x7f",
    "caf\xc3\xa9",                /* U+00E9 */
    "\xe2\x82\xac 12",            /* U+20AC */
    "\xf0\x9f\x98\x80 smile",     /* U+1F600: a surrogate pair */
    "\xef\xbf\xbf",               /* U+FFFF */
    "\xff not utf-8",             /* refused */
    "cut \xc3",                   /* refused: truncated */
    "\xc0\xaf overlong",          /* refused */
    "\xed\xa0\x80 surrogate",     /* refused */
    "\xf4\x90\x80\x80 too large", /* refused */
};

/* What jansson wrote for {"index":i,"status":st} with "id" set to json_string(@id). */
static char *jansson_entry(size_t i, const char *st, const char *id)
{
    json_t *o = json_pack("{s:i, s:s}", "index", (int)i, "status", st);
    char *text;

    json_object_set_new(o, "id", json_string(id));
    text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    return text;
}

static char *jbuf_entry(size_t i, const char *st, const char *id)
{
    bc_jbuf j;

    bc_jbuf_init(&j, BD_ANSWER_MAX);
    bc_jbuf_lit(&j, "{\"index\":");
    bc_jbuf_int(&j, (int64_t)i);
    bc_jbuf_lit(&j, ",\"status\":");
    ck_assert_int_eq(bc_jbuf_str(&j, st), 0);
    bc_jbuf_member(&j, ",\"id\":", id);
    bc_jbuf_lit(&j, "}");
    return bc_jbuf_take(&j);
}

/* Both texts are there and equal; frees them. */
static void same_text(char *got, char *want)
{
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    free(want);
    free(got);
}

START_TEST(test_string_table)
{
    same_text(jbuf_entry((size_t)_i, "queued", strings[_i]),
              jansson_entry((size_t)_i, "queued", strings[_i]));
}
END_TEST

/* Random bytes, mostly ASCII, some high and control bytes: the same text or the same refusal. */
START_TEST(test_random_strings)
{
    uint64_t rng = 0x5eed;
    char s[40];
    int round;

    for (round = 0; round < 20000; round++) {
        size_t n = (size_t)(test_rnd(&rng) % (sizeof(s) - 1));
        size_t k;
        json_t *js;
        char *want;
        bc_jbuf j;
        char *got;
        int rc;

        for (k = 0; k < n; k++) {
            uint64_t r = test_rnd(&rng);

            s[k] = (char)(r % 4 == 0 ? 1 + (r >> 8) % 255 : 0x20 + (r >> 8) % 0x5f);
        }
        s[n] = '\0';
        js = json_string(s);
        want =
            js != NULL ? json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(js);
        bc_jbuf_init(&j, BD_ANSWER_MAX);
        rc = bc_jbuf_str(&j, s);
        got = bc_jbuf_take(&j);
        if (want == NULL) {
            ck_assert_int_eq(rc, -1);
            ck_assert_str_eq(got, ""); /* nothing appended */
        } else {
            ck_assert_int_eq(rc, 0);
            ck_assert_str_eq(got, want);
        }
        free(want);
        free(got);
    }
}
END_TEST

/*
 * The content hash's strings (bc_jbuf_strn_utf8): valid UTF-8 as
 * json_dumps(JSON_COMPACT) without JSON_ENSURE_ASCII writes it; bytes that
 * are not UTF-8 (which jansson refuses) copied as they are, between quotes.
 */
START_TEST(test_utf8_table)
{
    const char *s = strings[_i];
    json_t *js = json_string(s);
    char *want;
    bc_jbuf j;

    if (js != NULL) {
        want = json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT);
        json_decref(js);
    } else {
        want = malloc(strlen(s) + 3);
        ck_assert_ptr_nonnull(want);
        sprintf(want, "\"%s\"", s);
    }
    bc_jbuf_init(&j, 1024);
    bc_jbuf_strn_utf8(&j, s, strlen(s));
    same_text(bc_jbuf_take(&j), want);
}
END_TEST

/* Appends the UTF-8 of code point @cp at @s; returns its bytes. */
static size_t put_utf8(char *s, uint32_t cp)
{
    if (cp < 0x80) {
        s[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        s[0] = (char)(0xc0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        s[0] = (char)(0xe0 | (cp >> 12));
        s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        s[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    s[0] = (char)(0xf0 | (cp >> 18));
    s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    s[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    s[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/*
 * Random valid UTF-8 (control characters, quotes, backslashes, code points
 * of one to four bytes): both writers against jansson, with and without
 * JSON_ENSURE_ASCII.
 */
START_TEST(test_random_utf8)
{
    uint64_t rng = 0x7a11;
    char s[160];
    int round;

    for (round = 0; round < 20000; round++) {
        size_t chars = (size_t)(test_rnd(&rng) % 32);
        size_t n = 0;
        size_t k;
        json_t *js;
        char *want;
        bc_jbuf j;

        for (k = 0; k < chars; k++) {
            uint64_t r = test_rnd(&rng);
            uint32_t cp = (uint32_t)(r >> 8);

            if (r % 4 == 0)
                cp = 1 + cp % 0x7f;
            else if (r % 4 == 1)
                cp = 0x80 + cp % (0x110000 - 0x80);
            else
                cp = 0x20 + cp % 0x5f;
            if (cp >= 0xd800 && cp < 0xe000)
                cp -= 0x800; /* no surrogates: not UTF-8 */
            n += put_utf8(s + n, cp);
        }
        s[n] = '\0';
        js = json_string(s);
        ck_assert_ptr_nonnull(js);
        want = json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT);
        bc_jbuf_init(&j, 4096);
        bc_jbuf_strn_utf8(&j, s, n);
        same_text(bc_jbuf_take(&j), want);
        want = json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(js);
        bc_jbuf_init(&j, 4096);
        ck_assert_int_eq(bc_jbuf_str(&j, s), 0);
        same_text(bc_jbuf_take(&j), want);
    }
}
END_TEST

START_TEST(test_integers)
{
    static const int64_t values[] = {0, 1, 9, 10, 99, 1000, -1, -10, 9999, INT64_MAX, INT64_MIN};
    size_t i;

    for (i = 0; i < N_ELEMS(values); i++) {
        json_t *ji = json_integer(values[i]);
        char *want = json_dumps(ji, JSON_ENCODE_ANY | JSON_COMPACT);
        bc_jbuf j;
        char *got;

        bc_jbuf_init(&j, BD_ANSWER_MAX);
        bc_jbuf_int(&j, values[i]);
        got = bc_jbuf_take(&j);
        ck_assert_str_eq(got, want);
        json_decref(ji);
        free(want);
        free(got);
    }
}
END_TEST

/* Over BD_ANSWER_MAX: the text is refused (NULL), not truncated, and the buffer is empty again. */
START_TEST(test_cap)
{
    size_t chunk = (size_t)1 << 20;
    char *block = malloc(chunk);
    bc_jbuf j;
    size_t i;

    ck_assert_ptr_nonnull(block);
    memset(block, 'x', chunk);
    bc_jbuf_init(&j, BD_ANSWER_MAX);
    for (i = 0; i < BD_ANSWER_MAX / chunk - 1; i++)
        bc_jbuf_raw(&j, block, chunk);
    ck_assert_int_eq(j.failed, 0);
    bc_jbuf_raw(&j, block, chunk); /* one byte over with the NUL */
    ck_assert_int_eq(j.failed, 1);
    ck_assert_ptr_null(bc_jbuf_take(&j));
    ck_assert_ptr_null(j.p);
    ck_assert_int_eq(j.failed, 0);
    free(block);
}
END_TEST

/* JSON Lines: CRLF, blank and whitespace-only lines, a last line without '\n', a NUL byte. */
START_TEST(test_lines_records)
{
    static const char body[] =
        "{\"id\":\"a\"}\r\n\n  \t\r\n{\"id\":\"b\"}\n{\"id\"\0:1}\n{\"id\":\"c\"}";
    static const char *const texts[] = {"{\"id\":\"a\"}", "{\"id\":\"b\"}", "{\"id\"",
                                        "{\"id\":\"c\"}"};
    static const int64_t keys[] = {7, 0, -3, INT64_MAX, INT64_MIN};
    char msg[256];
    size_t k;
    size_t i;

    for (k = 0; k < N_ELEMS(keys); k++) {
        bd_events b;
        unsigned st;

        memset(&b, 0, sizeof(b));
        st = bd_events_parse("application/x-ndjson", body, sizeof(body) - 1, keys[k], &b, msg,
                             sizeof(msg));
        ck_assert_uint_eq(st, 0);
        ck_assert_uint_eq(b.n, N_ELEMS(texts));
        for (i = 0; i < b.n; i++) {
            char want[64];

            snprintf(want, sizeof(want), "api:key%" PRId64 ":%zu", keys[k], i);
            ck_assert_str_eq(b.recs[i].source, want);
            ck_assert_str_eq(b.texts[i], texts[i]);
            ck_assert_ptr_eq(b.recs[i].data, b.texts[i]);
            ck_assert_uint_eq(b.recs[i].len, strlen(texts[i]));
        }
        bd_events_free(&b);
    }
}
END_TEST

/* A JSON array body: every text its own, sources as above. */
START_TEST(test_array_records)
{
    static const char body[] = "[{\"id\":\"a\"}, 5, {\"id\":\"b\"}]";
    char msg[256];
    bd_events b;

    memset(&b, 0, sizeof(b));
    ck_assert_uint_eq(
        bd_events_parse("application/json", body, sizeof(body) - 1, 12, &b, msg, sizeof(msg)), 0);
    ck_assert_uint_eq(b.n, 3);
    ck_assert_str_eq(b.recs[1].source, "api:key12:1");
    ck_assert_str_eq(b.texts[1], "5");
    ck_assert_str_eq(b.recs[1].reject_code, "invalid");
    ck_assert_str_eq(b.texts[2], "{\"id\":\"b\"}");
    ck_assert_str_eq(b.recs[2].source, "api:key12:2");
    bd_events_free(&b);
}
END_TEST

static Suite *jsonbuf_suite(void)
{
    Suite *s = suite_create("jsonbuf");
    TCase *tc = tcase_create("jsonbuf");

    tcase_add_loop_test(tc, test_string_table, 0, (int)N_ELEMS(strings));
    tcase_add_test(tc, test_random_strings);
    tcase_add_loop_test(tc, test_utf8_table, 0, (int)N_ELEMS(strings));
    tcase_add_test(tc, test_random_utf8);
    tcase_add_test(tc, test_integers);
    tcase_add_test(tc, test_cap);
    tcase_add_test(tc, test_lines_records);
    tcase_add_test(tc, test_array_records);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jsonbuf_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
