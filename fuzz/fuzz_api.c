/*
 * fuzz_api.c - fuzz target for what billingd's HTTP API reads from a
 * request before it needs a database (billingd/api_parse.c): the route of
 * the URL and its method, and the body of POST /v1/events as every
 * Content-Type it takes (JSON array, JSON Lines, CloudEvents single and
 * batch, length-delimited protobuf), then every record through the
 * pipeline's own decoders, as the ingest pipeline and api.events=kafka
 * read them. No network, no libmicrohttpd, no database.
 *
 * The input is three lines and a body: the method, the URL (its query
 * string after '?' decoded into arguments as libmicrohttpd does, and cut
 * off), the Content-Type ("-": none), then the body's bytes. The query's
 * handlers (GET /v1/accounts: api_accounts.c, GET /v1/rejected:
 * api_ops.c) run against a connection of this file (the arguments) and a
 * store of this file that records what it was asked.
 *
 * Whatever the bytes:
 *  - bd_route_of leaves a NUL-terminated {id} shorter than its buffer,
 *    with no '/', for the account and invoice routes, or says it is bad;
 *    a route other than the known paths is R_OTHER; the method check
 *    allows exactly POST for events and quotes and GET for the others;
 *  - GET /v1/accounts and /v1/rejected answer 200 or 400 (with a
 *    message); on 200 the store was asked once, with the limit, text and
 *    flags in their documented ranges; on 400 it was not asked;
 *  - bd_events_parse answers 0, 400, 413, 415 or 500 (with a message),
 *    and on 0 holds 1..BD_EVENTS_MAX records, each with its bytes, a
 *    source "api:key<ID>:<index>", and a reason when already refused;
 *    JSON records are NUL-terminated JSON objects of that length;
 *  - bd_events_bind leaves no record of another account unrefused (one
 *    whose account can be read);
 *  - every record the pipeline's decoder accepts and the rater takes (or
 *    refuses only for the catalog) encodes to a billing.v1.UsageEvent that
 *    the consumer's decoder accepts, and that encodes again to the same
 *    bytes (fz_check_roundtrip): what api.events=kafka queues, the
 *    consumer reads back as the same event.
 */
#include "config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_accounts.h"
#include "api_ops.h"
#include "metrics.h"
#include "api_parse.h"
#include "apiread.h"
#include "event.h"
#include "eventjson.h"
#include "fuzzcommon.h"
#include "rejected.h"

/* Records checked through the decoders per input (rating is the slow part). */
#define DECODE_MAX 16

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_events_init();
    return 0;
}

/* ---- a connection and a store of this file, for the query's handlers ---- */

/* The request's query arguments, decoded ("%XX", '+'), in order. */
struct MHD_Connection {
    char *keys[16];
    char *values[16];
    int n;
};

const char *MHD_lookup_connection_value(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                                        const char *key)
{
    int i;

    if (kind != MHD_GET_ARGUMENT_KIND)
        return NULL;
    for (i = 0; i < connection->n; i++)
        if (strcmp(connection->keys[i], key) == 0)
            return connection->values[i];
    return NULL;
}

/* What the store was asked. */
static struct {
    int calls;
    const char *text;
    long limit;
    int all;
} asked;

bs_status bs_error_set(bs_error *err, bs_status st, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL) {
        err->status = st;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return st;
}

bs_status bs_api_accounts(bs_conn *c, const char *query, const char *bound, int limit,
                          bs_api_row_fn fn, void *arg, bs_error *err)
{
    (void)c;
    (void)bound;
    (void)fn;
    (void)arg;
    (void)err;
    asked.calls++;
    asked.text = query;
    asked.limit = limit;
    return BS_OK;
}

/*
 * billingd's counters (metrics.c, which needs librdkafka): api_ops.c's
 * GET /v1/ops/status reads them; the target never calls it, a
 * placeholder links it.
 */
json_t *bd_metrics_status(void)
{
    return json_null();
}

bs_status bs_rejects_list(bs_conn *c, const char *reason, long limit, int all, bs_reject_fn fn,
                          void *arg, bs_error *err)
{
    (void)c;
    (void)fn;
    (void)arg;
    (void)err;
    asked.calls++;
    asked.text = reason;
    asked.limit = limit;
    asked.all = all;
    return BS_OK;
}

static int hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* "%XX" and '+' decoded in place, as libmicrohttpd decodes an argument. */
static void unescape(char *s)
{
    char *w = s;

    for (; *s != '\0'; s++) {
        if (*s == '+') {
            *w++ = ' ';
        } else if (*s == '%' && hex(s[1]) >= 0 && hex(s[2]) >= 0) {
            *w++ = (char)(hex(s[1]) * 16 + hex(s[2]));
            s += 2;
        } else {
            *w++ = *s;
        }
    }
    *w = '\0';
}

/* @query ("a=1&b=2", written into) into @conn's arguments. */
static void arguments(struct MHD_Connection *conn, char *query)
{
    char *save = NULL;
    char *kv;
    char *eq;

    conn->n = 0;
    for (kv = strtok_r(query, "&", &save); kv != NULL && conn->n < 16;
         kv = strtok_r(NULL, "&", &save)) {
        eq = strchr(kv, '=');
        if (eq != NULL)
            *eq++ = '\0';
        unescape(kv);
        if (eq != NULL)
            unescape(eq);
        conn->keys[conn->n] = kv;
        conn->values[conn->n++] = eq != NULL ? eq : kv + strlen(kv);
    }
}

/* GET /v1/accounts and /v1/rejected: their arguments checked before the store is asked. */
static void check_query(enum route r, struct MHD_Connection *conn)
{
    char msg[512] = "";
    json_t *body = NULL;
    bs_error err;
    unsigned st;

    memset(&asked, 0, sizeof(asked));
    memset(&err, 0, sizeof(err));
    if (r == R_ACCOUNTS)
        st = bd_api_accounts(NULL, conn, NULL, &body, msg, sizeof(msg), &err);
    else
        st = bd_api_rejected(NULL, conn, &body, msg, sizeof(msg), &err);
    FZ_CHECK(st == 200 || st == 400, "route %d: status %u", (int)r, st);
    if (st == 400) {
        fz_check_message("the query's handler", msg, sizeof(msg));
        FZ_CHECK(asked.calls == 0 && body == NULL, "route %d: 400 after asking the store", (int)r);
        return;
    }
    FZ_CHECK(asked.calls == 1 && json_is_array(json_object_get(body, "data")),
             "route %d: 200 with %d calls", (int)r, asked.calls);
    if (r == R_ACCOUNTS) {
        FZ_CHECK(asked.limit >= 1 && asked.limit <= BS_API_ACCOUNTS_MAX, "limit %ld", asked.limit);
        FZ_CHECK(asked.text == NULL || strlen(asked.text) <= BS_API_QUERY_MAX, "q of %zu bytes",
                 strlen(asked.text));
    } else {
        FZ_CHECK(asked.limit >= 1 && asked.limit <= BD_REJECTED_MAX, "limit %ld", asked.limit);
        FZ_CHECK(asked.text == NULL || (asked.text[0] != '\0' && strlen(asked.text) <= 64),
                 "reason of %zu bytes", strlen(asked.text));
        FZ_CHECK(asked.all == 0 || asked.all == 1, "all %d", asked.all);
    }
    json_decref(body);
}

/* The next line of @data (up to '\n', which is skipped) as a new string. */
static char *line(const uint8_t **data, size_t *size)
{
    const uint8_t *nl = memchr(*data, '\n', *size);
    size_t n = nl != NULL ? (size_t)(nl - *data) : *size;
    char *s = malloc(n + 1);

    FZ_CHECK(s != NULL, "out of memory");
    memcpy(s, *data, n);
    s[n] = '\0';
    *data += n + (nl != NULL);
    *size -= n + (nl != NULL);
    return s;
}

static void check_route(const char *url, const char *method)
{
    static const char *const exact[] = {"/v1/events",   "/v1/price-books", "/v1/plans",
                                        "/v1/accounts", "/v1/rejected",    "/v1/invoices",
                                        "/v1/quote"};
    char account[129];
    int bad = 0;
    enum route r;
    size_t i;

    memset(account, 'x', sizeof(account));
    account[0] = '\0';
    r = bd_route_of(url, account, sizeof(account), &bad);
    FZ_CHECK(r >= R_BALANCE && r < N_ROUTES, "route %d out of range", (int)r);
    if ((r == R_BALANCE || r == R_GRANTS || r == R_SUBSCRIPTIONS || r == R_USAGE ||
         r == R_INVOICE) &&
        !bad) {
        FZ_CHECK(memchr(account, '\0', sizeof(account)) != NULL, "the {id} is not terminated");
        FZ_CHECK(account[0] != '\0', "an empty {id} taken for '%s'", url);
        FZ_CHECK(strchr(account, '/') == NULL, "an {id} with a '/' taken for '%s'", url);
        FZ_CHECK(strstr(url, account) != NULL, "the {id} '%s' is not in the URL", account);
    }
    if (strncmp(url, "/v1/accounts/", 13) != 0 && strncmp(url, "/v1/invoices/", 13) != 0) {
        for (i = 0; i < sizeof(exact) / sizeof(exact[0]) && strcmp(url, exact[i]) != 0; i++)
            ;
        FZ_CHECK((i < sizeof(exact) / sizeof(exact[0])) == (r != R_OTHER), "'%s' routed to %d", url,
                 (int)r);
    }
    FZ_CHECK(bd_route_method_ok(r, method) ==
                 (strcmp(method, r == R_EVENTS || r == R_QUOTE ? "POST" : "GET") == 0),
             "method '%s' on route %d", method, (int)r);
}

/* Record @i through the pipeline's decoder, and what api.events=kafka would queue. */
static void check_record(const bs_record *rec)
{
    billing_event *ev = billing_event_new();
    char err[256] = "";
    billing_status st;
    billing_status decoded;
    billing_status rated;

    FZ_CHECK(ev != NULL, "out of memory");
    if (rec->format == BS_RECORD_JSON)
        st = rec->len > BS_JSON_RECORD_MAX
                 ? BILLING_ERR_TOO_LARGE
                 : bc_event_parse_json(ev, rec->data, rec->len, err, sizeof(err));
    else
        st = billing_event_decode(ev, rec->data, rec->len, err, sizeof(err));
    if (st != BILLING_OK) {
        if (st != BILLING_ERR_TOO_LARGE)
            fz_check_message("the pipeline's decoder", err, sizeof(err));
        billing_event_destroy(ev);
        return;
    }
    decoded = fz_check_roundtrip(ev);
    rated = fz_check_rating(ev);
    if (fz_rated_by_catalog_checks(rated))
        FZ_CHECK(decoded == BILLING_OK,
                 "event '%s': the rater takes it (%s), but the consumer cannot decode what "
                 "api.events=kafka would produce (%s)",
                 billing_event_id(ev), billing_strerror(rated), billing_strerror(decoded));
    billing_event_destroy(ev);
}

static void check_events(const char *type, const char *body, size_t len)
{
    char msg[512];
    char src[64];
    bd_events b;
    unsigned status;
    size_t i;
    int lines;

    memset(&b, 0, sizeof(b));
    msg[0] = '\0';
    status = bd_events_parse(type, body, len, 7, &b, msg, sizeof(msg));
    FZ_CHECK(status == 0 || status == 400 || status == 413 || status == 415 || status == 500,
             "status %u", status);
    if (status != 0) {
        fz_check_message("bd_events_parse", msg, sizeof(msg));
        bd_events_free(&b);
        return;
    }
    FZ_CHECK(b.n >= 1 && b.n <= BD_EVENTS_MAX, "%zu records", b.n);
    lines = type != NULL && (strncmp(type, "application/x-ndjson", 20) == 0 ||
                             strncmp(type, "application/jsonl", 17) == 0);
    for (i = 0; i < b.n; i++) {
        const bs_record *r = &b.recs[i];

        snprintf(src, sizeof(src), "api:key7:%zu", i);
        FZ_CHECK(r->source != NULL && strcmp(r->source, src) == 0, "record %zu: source '%s'", i,
                 r->source != NULL ? r->source : "(null)");
        FZ_CHECK(r->data != NULL, "record %zu: no bytes", i);
        FZ_CHECK(r->reject_code == NULL || (r->reject_reason != NULL && r->reject_reason[0]),
                 "record %zu: refused without a reason", i);
        if (r->format == BS_RECORD_JSON) {
            FZ_CHECK(strlen(r->data) == r->len, "record %zu: length %zu, text %zu", i, r->len,
                     strlen(r->data));
            /* A JSON Lines record is the line as sent; the others are objects made here. */
            if (r->reject_code == NULL && !lines) {
                json_t *o = json_loadb(r->data, r->len, 0, NULL);

                FZ_CHECK(json_is_object(o), "record %zu: not a JSON object: %s", i,
                         (const char *)r->data);
                json_decref(o);
            }
        } else {
            FZ_CHECK(r->format == BS_RECORD_PROTOBUF, "record %zu: format %d", i, (int)r->format);
        }
        if (i < DECODE_MAX)
            check_record(r);
    }
    FZ_CHECK(bd_events_bind(&b, "lab-a") == 0, "out of memory");
    for (i = 0; i < b.n && i < DECODE_MAX; i++) {
        billing_event *ev;
        char err[256];
        billing_status st;

        if (b.recs[i].reject_code != NULL)
            continue;
        ev = billing_event_new();
        FZ_CHECK(ev != NULL, "out of memory");
        st = b.recs[i].format == BS_RECORD_JSON
                 ? (b.recs[i].len > BS_JSON_RECORD_MAX
                        ? BILLING_ERR_TOO_LARGE
                        : bc_event_parse_json(ev, b.recs[i].data, b.recs[i].len, err, sizeof(err)))
                 : billing_event_decode(ev, b.recs[i].data, b.recs[i].len, err, sizeof(err));
        if (st == BILLING_OK)
            FZ_CHECK(strcmp(billing_event_account(ev), "lab-a") == 0,
                     "record %zu: account '%s' let through a key bound to lab-a", i,
                     billing_event_account(ev));
        billing_event_destroy(ev);
    }
    bd_events_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *method = line(&data, &size);
    char *url = line(&data, &size);
    char *type = line(&data, &size);
    char *q = strchr(url, '?');
    struct MHD_Connection conn;
    char account[129];
    int bad = 0;
    enum route r;

    memset(&conn, 0, sizeof(conn));
    if (q != NULL) {
        *q = '\0'; /* libmicrohttpd gives the handler the path alone */
        arguments(&conn, q + 1);
    }
    check_route(url, method);
    r = bd_route_of(url, account, sizeof(account), &bad);
    if (r == R_ACCOUNTS || r == R_REJECTED)
        check_query(r, &conn);
    check_events(strcmp(type, "-") == 0 ? NULL : type, (const char *)data, size);
    free(method);
    free(url);
    free(type);
    return 0;
}
