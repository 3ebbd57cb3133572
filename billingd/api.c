/*
 * api.c - billingd's HTTP API (api.h): routing, keys and scopes, limits,
 * problem details, metrics, and the handlers. Every figure comes from the
 * store and libbilling through the functions the command line uses
 * (bs_balance_rater as `billing account balance`, here from rows read
 * with the key in one round trip by bs_balance_fetch; bs_ingest_batch as
 * `billing ingest`); nothing is computed twice.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "api_accounts.h"
#include "api_ops.h"
#include "api_documents.h"
#include "api_parse.h"
#include "apikeys.h"
#include "apiread.h"
#include "balance.h"
#include "balanceview.h"
#include "billing.h"
#include "console.h"
#include "dlq.h"
#include "dbcatalog.h"
#include "ingest.h"
#include "invoices.h"
#include "jsonbuf.h"
#include "log.h"
#include "migrate.h"
#include "producer.h"
#include "store.h"

/* Store slots: requests served at once, each slot with its own connection, catalog and pipeline. */
#define API_THREADS 4
/* Connections open at once. */
#define API_CONNECTIONS 256
/* Token buckets (keys) tracked; beyond, a key is not limited. */
#define BUCKETS 4096
#define MSG_MAX 512

/* The metrics' route label of each route (api_parse.h). */
static const char *const route_names[N_ROUTES] = {"/v1/accounts/{id}/balance",
                                                  "/v1/accounts/{id}/grants",
                                                  "/v1/accounts/{id}/subscriptions",
                                                  "/v1/events",
                                                  "/v1/price-books",
                                                  "/v1/plans",
                                                  "/v1/accounts",
                                                  "/v1/rejected",
                                                  "/v1/invoices",
                                                  "/v1/invoices/{number}",
                                                  "/v1/accounts/{id}/usage",
                                                  "/v1/quote",
                                                  "/v1/ops/status",
                                                  "other"};

static const unsigned statuses[] = {200, 202, 304, 400, 401, 403, 404,
                                    405, 408, 413, 415, 429, 500, 503};
#define N_STATUSES (sizeof(statuses) / sizeof(statuses[0]))
/* Duration buckets, microseconds. */
static const int64_t us_bounds[] = {1000,  2500,   5000,   10000,   25000,
                                    50000, 100000, 250000, 1000000, 5000000};
#define N_US (sizeof(us_bounds) / sizeof(us_bounds[0]))

/* What one serving thread owns while it answers a request. */
typedef struct api_slot {
    bs_conn *conn;
    unsigned long sessions; /* bs_sessions when the catalog was read and LISTEN sent */
    bs_catalog *cat;
    bs_ingest *in;
    int busy;
} api_slot;

/* A key's token bucket, in nano-tokens: one request costs 1e9. */
typedef struct bucket {
    int64_t key;
    int64_t tokens;
    int64_t at_ns;
} bucket;

struct bd_api {
    struct MHD_Daemon *http;
    char *conninfo;
    char *book;
    char *cert;
    char *key;
    size_t body_max;
    int64_t request_ms;
    int64_t rate;        /* requests per second per key (also the burst) */
    bd_console *console; /* the web console's files, under /console/ */
    pthread_mutex_t lock;
    pthread_cond_t freed;
    api_slot slots[API_THREADS];
    bucket buckets[BUCKETS];
    uint64_t count[N_ROUTES][N_STATUSES + 1];
    uint64_t dur[N_ROUTES][N_US + 1];
    int64_t dur_sum_us[N_ROUTES];
    struct watch *watched; /* open connections (on_connection), under lock */
    pthread_t reaper;      /* closes connections whose headers take over request_ms */
    int reaping;
    int stopping;
    pthread_cond_t wake;
    /* api.events=kafka: POST /v1/events produces to @topic (NULL: stores at once). */
    char *topic;
    const bd_config *cfg; /* to renew the producer after a fatal error */
    rd_kafka_t *rk;
    pthread_rwlock_t rk_lock; /* read: producing; write: the poller renewing @rk */
    pthread_mutex_t dr_lock;  /* the deliveries in flight */
    pthread_cond_t dr_done;
    pthread_t poller; /* serves @rk's delivery reports */
    int polling;
    int poll_stop;            /* under dr_lock */
    bd_dlq *dlq;              /* dead_letter_topic's producer, or NULL */
    pthread_mutex_t dlq_lock; /* bd_dlq_hook: one caller at a time */
};

/* The delivery reports of one request's messages, under bd_api.dr_lock. */
typedef struct delivery {
    size_t pending;
} delivery;

/* One message produced: its report (the message's opaque). */
typedef struct dmsg {
    delivery *d;
    rd_kafka_resp_err_t err;
} dmsg;

/*
 * An open connection, watched from its start (or its last request's end)
 * until its next request's headers are in: libmicrohttpd's own timeout is
 * reset by every byte, so a client sending a header line now and then
 * would hold the connection forever; the reaper closes it once
 * api.request_ms has passed.
 */
typedef struct watch {
    struct watch *next;
    struct watch *prev;
    int fd;
    int64_t since_ns; /* 0 while a request is answered */
} watch;

/* One request being read: its start, route, body. */
typedef struct req {
    int64_t start_ns;
    enum route route;
    char *body;
    size_t len;
    size_t cap;
    int answered;       /* a limit answered it while its body arrived */
    int too_large;      /* the body went over api.body_max: the rest is read and dropped */
    const char *method; /* libmicrohttpd's, valid for the request */
    int64_t key;        /* the key's id once checked, else 0 */
} req;

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---------------------------------------------------------------------- */
/* Answers                                                                 */
/* ---------------------------------------------------------------------- */

static void count(bd_api *api, enum route r, unsigned status, int64_t start_ns)
{
    int64_t us = (mono_ns() - start_ns) / 1000;
    size_t i;
    size_t b;

    for (i = 0; i < N_STATUSES && statuses[i] != status; i++)
        ;
    for (b = 0; b < N_US && us > us_bounds[b]; b++)
        ;
    pthread_mutex_lock(&api->lock);
    api->count[r][i]++;
    api->dur[r][b]++;
    api->dur_sum_us[r] += us;
    pthread_mutex_unlock(&api->lock);
}

/* The access log: one line per answer, the route's template (no account id), never the key's secret. */
static void access_log(struct MHD_Connection *conn, const req *q, unsigned status)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char client[INET6_ADDRSTRLEN] = "-";
    const struct sockaddr *sa = info != NULL ? info->client_addr : NULL;

    if (sa != NULL && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, client,
                  sizeof(client));
    bd_log("info", "api_request",
           "method=%s route=%s status=%u ms=%" PRId64 " key=%" PRId64 " client=%s",
           bd_q(q->method != NULL ? q->method : "-"), bd_q(route_names[q->route]), status,
           (mono_ns() - q->start_ns) / 1000000, q->key, client);
}

/* Queue @text (taken: freed by MHD) with @status and @type; NULL @text is out of memory. */
static enum MHD_Result send_text(bd_api *api, struct MHD_Connection *conn, req *q, unsigned status,
                                 const char *type, char *text, const char *retry_after)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (text == NULL)
        return MHD_NO;
    r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (retry_after != NULL)
        MHD_add_response_header(r, "Retry-After", retry_after);
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"billing\"");
    ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    count(api, q->route, status, q->start_ns);
    access_log(conn, q, status);
    q->answered = 1;
    return ret;
}

static enum MHD_Result send_json(bd_api *api, struct MHD_Connection *conn, req *q, unsigned status,
                                 json_t *body)
{
    char *text;

    if (body == NULL)
        return MHD_NO;
    text = json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(body);
    return send_text(api, conn, q, status, "application/json", text, NULL);
}

/* Problem slugs and titles (RFC 9457 "type" is urn:billing:problem:<slug>). */
static const char *title_of(unsigned status)
{
    switch (status) {
    case 400:
        return "Bad request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not found";
    case 405:
        return "Method not allowed";
    case 408:
        return "Request timeout";
    case 413:
        return "Content too large";
    case 415:
        return "Unsupported media type";
    case 429:
        return "Too many requests";
    case 503:
        return "Service unavailable";
    default:
        return "Internal error";
    }
}

/*
 * An RFC 9457 problem: @slug names its type, @field (may be NULL) the
 * input it is about, @retry_after (may be NULL) the Retry-After header.
 */
static enum MHD_Result problem(bd_api *api, struct MHD_Connection *conn, req *q, unsigned status,
                               const char *slug, const char *field, const char *retry_after,
                               const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static enum MHD_Result problem(bd_api *api, struct MHD_Connection *conn, req *q, unsigned status,
                               const char *slug, const char *field, const char *retry_after,
                               const char *fmt, ...)
{
    char detail[MSG_MAX];
    char type[96];
    va_list ap;
    json_t *o;
    char *text;
    char *c;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    /* What the client sent (an account id, a header) may be any bytes: JSON needs UTF-8. */
    for (c = detail; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = '?';
    snprintf(type, sizeof(type), "urn:billing:problem:%s", slug);
    o = json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title", title_of(status), "status",
                  (int)status, "detail", detail);
    if (o != NULL && field != NULL)
        json_object_set_new(o, "field", json_string(field));
    if (o == NULL)
        return MHD_NO;
    text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    return send_text(api, conn, q, status, "application/problem+json", text, retry_after);
}

/* ---------------------------------------------------------------------- */
/* Threads' store connections                                              */
/* ---------------------------------------------------------------------- */

static api_slot *slot_take(bd_api *api)
{
    api_slot *s = NULL;
    size_t i;

    pthread_mutex_lock(&api->lock);
    for (;;) {
        for (i = 0; i < API_THREADS && api->slots[i].busy; i++)
            ;
        if (i < API_THREADS)
            break;
        pthread_cond_wait(&api->freed, &api->lock);
    }
    s = &api->slots[i];
    s->busy = 1;
    pthread_mutex_unlock(&api->lock);
    return s;
}

static void slot_give(bd_api *api, api_slot *s)
{
    pthread_mutex_lock(&api->lock);
    s->busy = 0;
    pthread_cond_signal(&api->freed);
    pthread_mutex_unlock(&api->lock);
}

/*
 * A bs_ingest_hook: the rejects of api.events=kafka to the dead-letter
 * topic, as billingd's consumer publishes its own.
 */
static bs_status dlq_hook(void *arg, bs_conn *c, const bs_record *recs,
                          const bs_record_result *results, size_t n, bs_error *err)
{
    bd_api *api = arg;
    bs_status st;

    pthread_mutex_lock(&api->dlq_lock);
    st = bd_dlq_hook(api->dlq, c, recs, results, n, err);
    pthread_mutex_unlock(&api->dlq_lock);
    return st;
}

static bs_status slot_reload(bd_api *api, api_slot *s, bs_error *err)
{
    bs_catalog *cat = bs_catalog_read(s->conn, api->book, err);

    if (cat == NULL)
        return err->status;
    if (s->in == NULL) {
        s->in = bs_ingest_new(cat, NULL);
        if (s->in == NULL) {
            bs_catalog_free(cat);
            return bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        }
        if (api->dlq != NULL)
            bs_ingest_set_hook(s->in, dlq_hook, api);
    } else {
        bs_ingest_set_catalog(s->in, cat);
    }
    bs_catalog_free(s->cat);
    s->cat = cat;
    return BS_OK;
}

/*
 * Make @s usable: connected (again, after a lost connection), the schema
 * ours, LISTENing for catalog changes, and the catalog current as far as
 * `billing load` announced.
 */
static bs_status slot_ready(bd_api *api, api_slot *s, bs_error *err)
{
    bs_retry retry = {2, 100, 500};
    int changed;

    if (s->conn == NULL) {
        s->conn = bs_connect(api->conninfo, &retry, err);
        if (s->conn == NULL)
            return err->status;
        s->sessions = 0;
    } else if (!bs_up(s->conn) && bs_reconnect(s->conn, err) != BS_OK) {
        return err->status;
    }
    if (bs_sessions(s->conn) != s->sessions || s->cat == NULL) {
        if (bs_schema_require(s->conn, err) != BS_OK ||
            bs_listen(s->conn, BS_CATALOG_CHANNEL, err) != BS_OK ||
            slot_reload(api, s, err) != BS_OK)
            return err->status;
        s->sessions = bs_sessions(s->conn);
        return BS_OK;
    }
    changed = bs_notified(s->conn);
    if (changed < 0) {
        /* Lost: reconnected, the session changed, so the branch above LISTENs and reloads. */
        if (bs_reconnect(s->conn, err) != BS_OK)
            return err->status;
        return slot_ready(api, s, err);
    }
    return changed > 0 ? slot_reload(api, s, err) : BS_OK;
}

/*
 * Open every store slot before the first request: connected, the catalog
 * read and the balance's statements prepared. Opened on first use
 * instead, the slots that a burst first needs each made its requests
 * wait for a connection, a catalog read and a round trip per statement
 * (about 100 ms at 10 000 accounts, doc/performance.md). When one
 * cannot be opened now (the database down) it is logged, the others are
 * not tried (a start does not wait for every slot's retries), and they
 * are opened on first use, as before.
 */
static void slots_open(bd_api *api)
{
    size_t i;
    size_t opened = 0;
    bs_error err;

    for (i = 0; i < API_THREADS; i++) {
        if (slot_ready(api, &api->slots[i], &err) != BS_OK ||
            bs_balance_prepare(api->slots[i].conn, &err) != BS_OK) {
            bd_log("warn", "api_slot_open_failed", "slot=%zu error=%s", i, bd_q(err.message));
            break;
        }
        opened++;
    }
    bd_log("info", "api_slots_open", "opened=%zu of=%d", opened, API_THREADS);
}

/* ---------------------------------------------------------------------- */
/* Keys                                                                    */
/* ---------------------------------------------------------------------- */

/* Take a token from key @id's bucket: 0, or the seconds to wait (>= 1). */
static int64_t bucket_take(bd_api *api, int64_t id)
{
    const int64_t cost = 1000000000;
    const int64_t cap = api->rate * cost;
    int64_t now = mono_ns();
    int64_t wait = 0;
    bucket *b = NULL;
    size_t i;
    size_t h = (size_t)id % BUCKETS;

    pthread_mutex_lock(&api->lock);
    for (i = 0; i < BUCKETS; i++) {
        bucket *c = &api->buckets[(h + i) % BUCKETS];

        if (c->key == id || c->key == 0) {
            b = c;
            break;
        }
    }
    if (b != NULL) {
        if (b->key == 0) {
            b->key = id;
            b->tokens = cap;
        } else {
            /* elapsed * rate nano-tokens, bounded so that the product cannot overflow */
            int64_t elapsed = now - b->at_ns;

            if (elapsed > 1000000000LL * 3600)
                elapsed = 1000000000LL * 3600;
            b->tokens += elapsed * api->rate;
            if (b->tokens > cap)
                b->tokens = cap;
        }
        b->at_ns = now;
        if (b->tokens >= cost)
            b->tokens -= cost;
        else
            wait = ((cost - b->tokens) / api->rate + 999999999) / 1000000000;
    }
    pthread_mutex_unlock(&api->lock);
    return wait > 0 ? wait : 0;
}

/* ---------------------------------------------------------------------- */
/* Routes                                                                  */
/* ---------------------------------------------------------------------- */

static unsigned scope_needed(enum route r)
{
    switch (r) {
    case R_EVENTS:
        return BS_SCOPE_EVENTS_WRITE;
    case R_INVOICES:
    case R_INVOICE:
        return BS_SCOPE_INVOICES_READ;
    default:
        return BS_SCOPE_ACCOUNTS_READ;
    }
}

static enum MHD_Result db_problem(bd_api *api, struct MHD_Connection *conn, req *q,
                                  const bs_error *err)
{
    bd_log("error", "api_database", "route=%s error=%s", bd_q(route_names[q->route]),
           bd_q(err->message));
    if (err->status == BS_ERR_RETRY || err->status == BS_ERR_SCHEMA)
        return problem(api, conn, q, 503, "unavailable", NULL, "5",
                       "the database is not available now; retry");
    return problem(api, conn, q, 500, "internal", NULL, NULL, "internal error");
}

/* A bs_api_row_fn: the row as a JSON object appended to the array @arg. */
static int row_json(void *arg, const bs_api_row *row)
{
    json_t *o = json_object();
    json_t *v;
    int i;

    if (o == NULL)
        return 1;
    for (i = 0; i < row->n; i++) {
        const char *name = row->names[i];
        const char *val = row->values[i];

        if (val == NULL)
            v = json_null();
        else if (strcmp(name, "versions") == 0 || strcmp(name, "fees") == 0)
            v = json_loads(val, 0, NULL);
        else if (strcmp(name, "refundable") == 0)
            v = json_boolean(strcmp(val, "true") == 0 || strcmp(val, "t") == 0);
        else if (strcmp(name, "terms") == 0 || strcmp(name, "priority") == 0 ||
                 strcmp(name, "kinds") == 0 || strcmp(name, "accounts") == 0 ||
                 strcmp(name, "drafts") == 0 || strcmp(name, "finalized") == 0 ||
                 strcmp(name, "void") == 0)
            v = json_integer(strtoll(val, NULL, 10));
        else
            v = json_string(val);
        if (v == NULL || json_object_set_new(o, name, v) != 0) {
            json_decref(o);
            return 1;
        }
    }
    return json_array_append_new(arg, o) != 0;
}

static enum MHD_Result list_rows(bd_api *api, struct MHD_Connection *conn, req *q, api_slot *s,
                                 bs_api_list what, const char *account)
{
    json_t *arr = json_array();
    bs_error err;

    if (arr == NULL)
        return MHD_NO;
    if (bs_api_read(s->conn, what, account, row_json, arr, &err) != BS_OK) {
        json_decref(arr);
        return db_problem(api, conn, q, &err);
    }
    return send_json(api, conn, q, 200, json_pack("{s:o}", "data", arr));
}

/* ---------------------------------------------------------------------- */
/* Balance                                                                 */
/* ---------------------------------------------------------------------- */

/* The balance at ?at= (RFC 3339; the usage before it, as `billing account
 * balance --at` counts it), or now (every aggregate stored). */
static enum MHD_Result balance(bd_api *api, struct MHD_Connection *conn, req *q, api_slot *s,
                               const char *account, const bs_balance_input *in, billing_time_t now)
{
    const char *at_text = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "at");
    billing_time_t at = now;
    billing_rater *r = NULL;
    json_t *o = NULL;
    bs_error err;
    enum MHD_Result ret;

    if (at_text != NULL && billing_time_parse(at_text, &at, NULL, 0) != BILLING_OK)
        return problem(api, conn, q, 400, "invalid", "at", NULL,
                       "at '%.64s': expected an RFC 3339 instant with an offset "
                       "(2026-01-05T12:00:00+08:00)",
                       at_text);
    if (bs_catalog_zone(s->cat, account) == NULL || in == NULL)
        return problem(api, conn, q, 404, "not-found", "account", NULL, "no account '%s'", account);
    /*
     * Now: from what the request's one round trip read with the key
     * (bs_balance_fetch). At another instant: the usage before it, read
     * as `billing account balance --at` reads it.
     */
    if (at_text == NULL) {
        if (bs_balance_input_rater(in, s->cat, account, &r, &err) != BS_OK)
            return db_problem(api, conn, q, &err);
    } else {
        if (bs_balance_rater(s->conn, s->cat, account, &at, at, &r, &err) != BS_OK)
            return db_problem(api, conn, q, &err);
        in = NULL; /* read at now: the running events come from the store at @at */
    }
    if (bs_balance_json(s->conn, s->cat, r, account, at, in, &o, &err) == BS_OK)
        ret = send_json(api, conn, q, 200, o);
    else if (err.status == BS_ERR_INVALID)
        ret = problem(api, conn, q, 404, "not-found", "account", NULL, "%s", err.message);
    else if (err.status == BS_ERR_FATAL && err.sqlstate[0] == '\0')
        ret = problem(api, conn, q, 500, "internal", NULL, NULL, "%s", err.message);
    else
        ret = db_problem(api, conn, q, &err);
    billing_rater_destroy(r);
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * The answer's entry for record @i of outcome @st ("accepted", "queued",
 * ...), appended to @j after a ',' unless it is the first: the bytes
 * json_dumps gave for the object {index, status, id, reason_code,
 * reason} these answers were built of (a string jansson refuses, not
 * UTF-8, leaves its member out as json_object_set_new did). @nq_reason:
 * the "reason" of a not_queued entry (no reason_code).
 */
static void event_entry(bc_jbuf *j, size_t i, const char *st, const char *id, const char *code,
                        const char *reason, const char *nq_reason)
{
    if (i > 0)
        bc_jbuf_lit(j, ",");
    bc_jbuf_lit(j, "{\"index\":");
    bc_jbuf_int(j, (int64_t)i);
    bc_jbuf_lit(j, ",\"status\":");
    bc_jbuf_str(j, st);
    if (id != NULL)
        bc_jbuf_member(j, ",\"id\":", id);
    if (code != NULL) {
        bc_jbuf_member(j, ",\"reason_code\":", code);
        bc_jbuf_member(j, ",\"reason\":", reason != NULL ? reason : "");
    }
    if (nq_reason != NULL)
        bc_jbuf_member(j, ",\"reason\":", nq_reason);
    bc_jbuf_lit(j, "}");
}

/* Stored at once, through the pipeline of `billing ingest` (api.events=store). */
static enum MHD_Result store_events(bd_api *api, struct MHD_Connection *conn, req *q, api_slot *s,
                                    bd_events *b, bs_record_result *res)
{
    bs_ingest_counts k;
    bc_jbuf j;
    bs_error err;
    size_t i;

    memset(&k, 0, sizeof(k));
    if (bs_ingest_batch(s->in, s->conn, b->recs, b->n, NULL, 0, 0, res, &k, &err) != BS_OK)
        return db_problem(api, conn, q, &err);
    bc_jbuf_init(&j, BD_ANSWER_MAX);
    bc_jbuf_lit(&j, "{\"events\":");
    bc_jbuf_int(&j, (int64_t)k.records);
    bc_jbuf_lit(&j, ",\"accepted\":");
    bc_jbuf_int(&j, (int64_t)k.stored);
    bc_jbuf_lit(&j, ",\"duplicates\":");
    bc_jbuf_int(&j, (int64_t)k.duplicates);
    bc_jbuf_lit(&j, ",\"rejected\":");
    bc_jbuf_int(&j, (int64_t)k.rejected);
    bc_jbuf_lit(&j, ",\"results\":[");
    for (i = 0; i < b->n; i++) {
        const char *st = res[i].outcome == BS_RECORD_NEW               ? "accepted"
                         : res[i].outcome == BS_RECORD_DUPLICATE       ? "duplicate"
                         : strcmp(res[i].reason_code, "conflict") == 0 ? "conflict"
                                                                       : "rejected";
        int rejected = res[i].outcome == BS_RECORD_REJECTED;

        event_entry(&j, i, st, res[i].event_id, rejected ? res[i].reason_code : NULL,
                    rejected ? res[i].reason : NULL, NULL);
    }
    bc_jbuf_lit(&j, "]}");
    return send_text(api, conn, q, 200, "application/json", bc_jbuf_take(&j), NULL);
}

/* librdkafka's delivery report of a message of the API's producer (on the poller). */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    bd_api *api = opaque;
    dmsg *x = m->_private;

    (void)rk;
    if (x == NULL)
        return;
    pthread_mutex_lock(&api->dr_lock);
    x->err = m->err;
    /* The request waits for its last report only: no wake-up per message (1 000 a batch). */
    if (--x->d->pending == 0)
        pthread_cond_broadcast(&api->dr_done);
    pthread_mutex_unlock(&api->dr_lock);
}

/* The poller: serve the producer's delivery reports; renew it after a fatal error. */
static void *poll_producer(void *arg)
{
    bd_api *api = arg;
    char errstr[MSG_MAX];
    int stop;

    for (;;) {
        pthread_rwlock_rdlock(&api->rk_lock);
        rd_kafka_poll(api->rk, 50);
        errstr[0] = '\0';
        stop = rd_kafka_fatal_error(api->rk, errstr, sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR;
        pthread_rwlock_unlock(&api->rk_lock);
        if (stop) {
            /* Every message still queued fails (its request answers 503); a new producer
             * takes the next ones. */
            pthread_rwlock_wrlock(&api->rk_lock);
            rd_kafka_purge(api->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
            rd_kafka_flush(api->rk, 1000);
            bd_producer_renew_if_fatal(&api->rk, api->cfg, on_delivery, api, "api_producer_fatal");
            pthread_rwlock_unlock(&api->rk_lock);
        }
        pthread_mutex_lock(&api->dr_lock);
        stop = api->poll_stop;
        pthread_mutex_unlock(&api->dr_lock);
        if (stop)
            return NULL;
    }
}

/*
 * What queue_events keeps of the prepared batch for its answer: the ids
 * and reasons stay in the pipeline's buffers unless rejects are stored,
 * which reuses them; then they are copied into one block.
 */
static char *keep_texts(const bs_record_result *res, size_t n, const char **ids,
                        const char **reasons)
{
    char *block;
    char *p;
    size_t total = 1;
    size_t i;

    for (i = 0; i < n; i++) {
        total += res[i].event_id != NULL ? strlen(res[i].event_id) + 1 : 0;
        total += reasons[i] != NULL ? strlen(reasons[i]) + 1 : 0;
    }
    block = malloc(total);
    if (block == NULL)
        return NULL;
    p = block;
    for (i = 0; i < n; i++) {
        size_t l;

        if (ids[i] != NULL) {
            l = strlen(ids[i]) + 1;
            memcpy(p, ids[i], l);
            ids[i] = p;
            p += l;
        }
        if (reasons[i] != NULL) {
            l = strlen(reasons[i]) + 1;
            memcpy(p, reasons[i], l);
            reasons[i] = p;
            p += l;
        }
    }
    return block;
}

/* The entries of queue_events' answer, in @j after its opening '['. */
static void queue_entries(bc_jbuf *j, size_t n, const char **codes, const char **ids,
                          const char **reasons, const dmsg *msgs)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (codes[i] != NULL)
            event_entry(j, i, "rejected", ids[i], codes[i], reasons[i], NULL);
        else if (msgs[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
            event_entry(j, i, "queued", ids[i], NULL, NULL, NULL);
        else
            event_entry(j, i, "not_queued", ids[i], NULL, NULL, rd_kafka_err2str(msgs[i].err));
    }
}

/*
 * The 503 of queue_events: @failed of @n events not acknowledged, named
 * in "not_queued", every entry in "results".
 */
static char *not_acknowledged(bd_api *api, size_t failed, size_t n, const char **codes,
                              const char **ids, const char **reasons, const dmsg *msgs)
{
    char detail[MSG_MAX];
    bc_jbuf j;
    size_t i;
    size_t k = 0;

    snprintf(detail, sizeof(detail),
             "%zu of %zu events not acknowledged by the broker in %" PRId64
             " ms (api.produce_ms): send them again (the queued ones again too is safe: "
             "their ids make them duplicates)",
             failed, n, api->cfg->api_produce_ms);
    bc_jbuf_init(&j, BD_ANSWER_MAX);
    bc_jbuf_lit(&j, "{\"type\":\"urn:billing:problem:unavailable\",\"title\":"
                    "\"Service unavailable\",\"status\":503,\"detail\":");
    bc_jbuf_str(&j, detail);
    bc_jbuf_lit(&j, ",\"field\":\"body\",\"not_queued\":[");
    for (i = 0; i < n; i++) {
        if (codes[i] != NULL || msgs[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        if (k++ > 0)
            bc_jbuf_lit(&j, ",");
        bc_jbuf_int(&j, (int64_t)i);
    }
    bc_jbuf_lit(&j, "],\"results\":[");
    queue_entries(&j, n, codes, ids, reasons, msgs);
    bc_jbuf_lit(&j, "]}");
    return bc_jbuf_take(&j);
}

/* Produce one message as producev does, waiting out a full queue (10 s at most). */
static rd_kafka_resp_err_t produce_one(bd_api *api, const char *account, const void *wire,
                                       size_t len, dmsg *m)
{
    rd_kafka_resp_err_t e;
    int tries = 0;

    do {
        e = rd_kafka_producev(
            api->rk, RD_KAFKA_V_TOPIC(api->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(account, strlen(account)), RD_KAFKA_V_VALUE((void *)wire, len),
            RD_KAFKA_V_OPAQUE(m), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            struct timespec tick = {0, 1000000L};

            nanosleep(&tick, NULL); /* the poller frees room */
        }
    } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL && ++tries < 10000);
    return e;
}

/* A message's report will not come: count it done with error @e. */
static void produce_failed(bd_api *api, dmsg *m, rd_kafka_resp_err_t e)
{
    pthread_mutex_lock(&api->dr_lock);
    m->d->pending--;
    m->err = e;
    pthread_mutex_unlock(&api->dr_lock);
}

/*
 * Produce the @n prepared events of @res not rejected (@codes NULL),
 * keyed by account, their reports to @msgs: encoded into one block and
 * handed to librdkafka in one rd_kafka_produce_batch (one clock read, one
 * topic look-up, the partitioner per message as producev runs it); a
 * message the batch could not queue (a full queue) goes again one by one.
 * Returns 0, or -1 out of memory before anything was produced.
 */
static int produce_all(bd_api *api, size_t n, const bs_record_result *res, const char **codes,
                       dmsg *msgs)
{
    rd_kafka_message_t *batch = calloc(n ? n : 1, sizeof(*batch));
    unsigned char *wires = NULL;
    rd_kafka_topic_t *rkt;
    size_t cap = 0;
    size_t used = 0;
    size_t k = 0;
    size_t i;

    if (batch == NULL)
        return -1;
    for (i = 0; i < n; i++) {
        size_t len;

        if (codes[i] != NULL)
            continue;
        if (cap - used < BILLING_EVENT_WIRE_MAX) {
            size_t more = cap > 0 ? 2 * cap : 256 * n + BILLING_EVENT_WIRE_MAX;
            unsigned char *w = realloc(wires, more);

            if (w == NULL) {
                free(wires);
                free(batch);
                return -1;
            }
            wires = w;
            cap = more;
        }
        if (billing_event_encode(res[i].event, wires + used, BILLING_EVENT_WIRE_MAX, &len) !=
            BILLING_OK) {
            produce_failed(api, &msgs[i], RD_KAFKA_RESP_ERR__BAD_MSG);
            continue;
        }
        batch[k].payload = (void *)(uintptr_t)used; /* an offset until the block stops moving */
        batch[k].len = len;
        batch[k].key = (void *)billing_event_account(res[i].event);
        batch[k].key_len = strlen(batch[k].key);
        batch[k]._private = &msgs[i];
        used += len;
        k++;
    }
    for (i = 0; i < k; i++)
        batch[i].payload = wires + (uintptr_t)batch[i].payload;
    pthread_rwlock_rdlock(&api->rk_lock);
    rkt = rd_kafka_topic_new(api->rk, api->topic, NULL);
    if (rkt != NULL && k > 0)
        rd_kafka_produce_batch(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, batch, (int)k);
    for (i = 0; i < k; i++) {
        rd_kafka_resp_err_t e = rkt != NULL ? batch[i].err : RD_KAFKA_RESP_ERR__QUEUE_FULL;

        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            e = produce_one(api, batch[i].key, batch[i].payload, batch[i].len, batch[i]._private);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            produce_failed(api, batch[i]._private, e);
    }
    if (rkt != NULL)
        rd_kafka_topic_destroy(rkt);
    pthread_rwlock_unlock(&api->rk_lock);
    free(wires);
    free(batch);
    return 0;
}

/*
 * api.events=kafka: validate as the pipeline does (no database), produce
 * the valid events to the usage topic keyed by account, wait for the
 * broker's acknowledgement of every one (acks=all, idempotent), store the
 * rejected ones in the dead-letter table (and topic) as the consumer
 * would, and answer 202 with every event "queued" or "rejected"; 503 with
 * Retry-After, naming the events not queued, when the broker did not
 * acknowledge them all within api.produce_ms.
 */
static enum MHD_Result queue_events(bd_api *api, struct MHD_Connection *conn, req *q, api_slot *s,
                                    bd_events *b, bs_record_result *res)
{
    const char **reasons = NULL;
    const char **codes = NULL;
    const char **ids = NULL;
    char *kept = NULL;
    bs_record *rej = NULL;
    bs_record_result *rejres = NULL;
    dmsg *msgs = NULL;
    delivery d = {0};
    bs_error err;
    enum MHD_Result ret = MHD_NO;
    size_t nrej = 0;
    size_t failed = 0;
    size_t i;
    int dberr = 0;

    if (bs_ingest_prepare(s->in, b->recs, b->n, res, &err) != BS_OK)
        return db_problem(api, conn, q, &err);
    msgs = calloc(b->n, sizeof(*msgs));
    reasons = calloc(b->n, sizeof(*reasons));
    codes = calloc(b->n, sizeof(*codes));
    ids = calloc(b->n, sizeof(*ids));
    if (msgs == NULL || reasons == NULL || codes == NULL || ids == NULL)
        goto out;
    for (i = 0; i < b->n; i++) {
        msgs[i].d = &d;
        msgs[i].err = RD_KAFKA_RESP_ERR_NO_ERROR;
        ids[i] = res[i].event_id;
        if (res[i].outcome != BS_RECORD_REJECTED)
            continue;
        codes[i] = res[i].reason_code;
        reasons[i] = res[i].reason != NULL ? res[i].reason : "";
        nrej++;
    }
    if (nrej > 0) {
        /* The rejects are stored again below: what the answer needs of the prepared batch
         * first, as that pipeline call reuses it. Stored as the pipeline rejects them again:
         * the same catalog (this slot's for the whole request), the same reason, and its
         * event id read. */
        kept = keep_texts(res, b->n, ids, reasons);
        rej = calloc(nrej, sizeof(*rej));
        rejres = calloc(nrej, sizeof(*rejres));
        if (kept == NULL || rej == NULL || rejres == NULL)
            goto out;
        nrej = 0;
        for (i = 0; i < b->n; i++)
            if (codes[i] != NULL)
                rej[nrej++] = b->recs[i];
    }
    /* One count for the batch: no report can bring it to zero before the last produce. */
    pthread_mutex_lock(&api->dr_lock);
    d.pending = b->n - nrej;
    pthread_mutex_unlock(&api->dr_lock);
    if (produce_all(api, b->n, res, codes, msgs) != 0)
        goto out; /* out of memory before anything was produced: nothing waits */
    /* Every message gets its report within message.timeout.ms (api.produce_ms). */
    pthread_mutex_lock(&api->dr_lock);
    while (d.pending > 0)
        pthread_cond_wait(&api->dr_done, &api->dr_lock);
    pthread_mutex_unlock(&api->dr_lock);
    /* The rejects: in the dead-letter table (and topic), never dropped. */
    if (nrej > 0 &&
        bs_ingest_batch(s->in, s->conn, rej, nrej, NULL, 0, 0, rejres, NULL, &err) != BS_OK)
        dberr = 1;
    for (i = 0; !dberr && i < nrej; i++)
        if (rejres[i].outcome != BS_RECORD_REJECTED)
            bd_log("error", "api_reject_stored", "source=%s outcome=%d", bd_q(rej[i].source),
                   (int)rejres[i].outcome);
    for (i = 0; i < b->n; i++) {
        if (codes[i] != NULL || msgs[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        if (failed++ == 0)
            bd_log("warn", "api_produce_failed", "topic=%s error=%s", bd_q(api->topic),
                   bd_q(rd_kafka_err2str(msgs[i].err)));
    }
    if (dberr) {
        ret = db_problem(api, conn, q, &err);
    } else if (failed > 0) {
        ret = send_text(api, conn, q, 503, "application/problem+json",
                        not_acknowledged(api, failed, b->n, codes, ids, reasons, msgs), "5");
    } else {
        bc_jbuf j;

        bc_jbuf_init(&j, BD_ANSWER_MAX);
        bc_jbuf_lit(&j, "{\"events\":");
        bc_jbuf_int(&j, (int64_t)b->n);
        bc_jbuf_lit(&j, ",\"queued\":");
        bc_jbuf_int(&j, (int64_t)(b->n - nrej));
        bc_jbuf_lit(&j, ",\"rejected\":");
        bc_jbuf_int(&j, (int64_t)nrej);
        bc_jbuf_lit(&j, ",\"results\":[");
        queue_entries(&j, b->n, codes, ids, reasons, msgs);
        bc_jbuf_lit(&j, "]}");
        ret = send_text(api, conn, q, 202, "application/json", bc_jbuf_take(&j), NULL);
    }
out:
    free(kept);
    free(reasons);
    free(codes);
    free(ids);
    free(rej);
    free(rejres);
    free(msgs);
    return ret;
}

static enum MHD_Result post_events(bd_api *api, struct MHD_Connection *conn, req *q, api_slot *s,
                                   int64_t key, const char *bound)
{
    char msg[MSG_MAX];
    const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    bs_record_result *res = NULL;
    bd_events b;
    unsigned status;
    enum MHD_Result ret;

    memset(&b, 0, sizeof(b));
    status =
        bd_events_parse(type, q->body != NULL ? q->body : "", q->len, key, &b, msg, sizeof(msg));
    if (status != 0) {
        bd_events_free(&b);
        return problem(api, conn, q, status,
                       status == 415   ? "media-type"
                       : status == 413 ? "too-many"
                                       : "body",
                       "body", NULL, "%s", msg);
    }
    /* A bound key sends events of its account only: the others are rejected as invalid. */
    if (bound != NULL && bd_events_bind(&b, bound) != 0) {
        bd_events_free(&b);
        return MHD_NO;
    }
    res = calloc(b.n, sizeof(*res));
    if (res == NULL) {
        bd_events_free(&b);
        return MHD_NO;
    }
    ret = api->topic != NULL ? queue_events(api, conn, q, s, &b, res)
                             : store_events(api, conn, q, s, &b, res);
    free(res);
    bd_events_free(&b);
    return ret;
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                */
/* ---------------------------------------------------------------------- */

/* Send what an api_documents.c handler answered (its body taken). */
static enum MHD_Result send_answer(bd_api *api, struct MHD_Connection *conn, req *q, bd_answer *a)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    if (a->db)
        return db_problem(api, conn, q, &a->err);
    if (a->slug != NULL)
        return problem(api, conn, q, a->status, a->slug, a->field, NULL, "%s", a->detail);
    r = MHD_create_response_from_buffer(a->len, a->body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(a->body);
        return MHD_NO;
    }
    a->body = NULL;
    if (a->status != 304)
        MHD_add_response_header(r, "Content-Type", a->type);
    MHD_add_response_header(r, "Cache-Control", a->cache);
    if (a->etag[0] != '\0')
        MHD_add_response_header(r, "ETag", a->etag);
    ret = MHD_queue_response(conn, a->status, r);
    MHD_destroy_response(r);
    count(api, q->route, a->status, q->start_ns);
    q->answered = 1;
    return ret;
}

/*
 * The API's own counters for GET /v1/ops/status: per route answered at
 * least once, {"route", "requests", "statuses": {"200": n...}, "mean_us",
 * "p50_us", "p99_us"}: the quantiles as the upper bound of their
 * duration bucket (null past the last, 5 s), all integers.
 */
static json_t *api_routes_json(bd_api *api)
{
    json_t *arr = json_array();
    json_t *st;
    char code[8];
    uint64_t n;
    uint64_t cum;
    size_t r;
    size_t i;
    int bad = arr == NULL;

    pthread_mutex_lock(&api->lock);
    for (r = 0; !bad && r < N_ROUTES; r++) {
        json_t *p50 = json_null();
        json_t *p99 = json_null();

        for (n = 0, i = 0; i <= N_US; i++)
            n += api->dur[r][i];
        if (n == 0)
            continue;
        st = json_object();
        for (i = 0; st != NULL && i <= N_STATUSES; i++) {
            if (api->count[r][i] == 0)
                continue;
            snprintf(code, sizeof(code), "%u", i < N_STATUSES ? statuses[i] : 0u);
            bad |= json_object_set_new(st, code, json_integer((json_int_t)api->count[r][i]));
        }
        for (cum = 0, i = 0; i < N_US; i++) {
            cum += api->dur[r][i];
            if (json_is_null(p50) && cum * 2 >= n)
                p50 = json_integer(us_bounds[i]);
            if (json_is_null(p99) && cum * 100 >= n * 99)
                p99 = json_integer(us_bounds[i]);
        }
        if (st == NULL || p50 == NULL || p99 == NULL) {
            json_decref(st);
            json_decref(p50);
            json_decref(p99);
            bad = 1;
            break;
        }
        /* json_pack steals st, p50 and p99, also when it fails */
        bad |= json_array_append_new(arr, json_pack("{s:s, s:I, s:o, s:I, s:o, s:o}", "route",
                                                    route_names[r], "requests", (json_int_t)n,
                                                    "statuses", st, "mean_us",
                                                    (json_int_t)(api->dur_sum_us[r] / (int64_t)n),
                                                    "p50_us", p50, "p99_us", p99)) != 0;
    }
    pthread_mutex_unlock(&api->lock);
    if (bad) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

static enum MHD_Result dispatch(bd_api *api, struct MHD_Connection *conn, req *q,
                                const char *method, const char *account, const char *ref)
{
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    bd_answer doc;
    bs_apikey_auth key;
    billing_time_t now = (billing_time_t)time(NULL) * BILLING_NS_PER_SEC;
    bs_balance_input *bal = NULL;
    bs_status checked;
    char retry[24];
    api_slot *s;
    bs_error err;
    enum MHD_Result ret;
    int64_t wait;
    int valid = 0;

    if (q->route == R_OTHER)
        return problem(api, conn, q, 404, "not-found", NULL, NULL, "no such route");
    if (!bd_route_method_ok(q->route, method))
        return problem(api, conn, q, 405, "method", NULL, NULL, "%s is not allowed here", method);
    /* The scheme is case-insensitive (RFC 9110). */
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return problem(api, conn, q, 401, "unauthorized", NULL, NULL,
                       "an API key is needed: Authorization: Bearer <key>");
    s = slot_take(api);
    if (slot_ready(api, s, &err) != BS_OK) {
        ret = db_problem(api, conn, q, &err);
        goto out;
    }
    /* A balance: the key and the figures in one round trip. */
    if (q->route == R_BALANCE)
        checked =
            bs_balance_fetch(s->conn, s->cat, auth + 7, account, now, &key, &valid, &bal, &err);
    else
        checked = bs_apikey_check(s->conn, auth + 7, &key, &valid, &err);
    if (checked != BS_OK) {
        ret = db_problem(api, conn, q, &err);
        goto out;
    }
    if (!valid) {
        ret = problem(api, conn, q, 401, "unauthorized", NULL, NULL,
                      "the API key is unknown, malformed or revoked");
        goto out;
    }
    q->key = key.id;
    wait = bucket_take(api, key.id);
    if (wait > 0) {
        snprintf(retry, sizeof(retry), "%" PRId64, wait);
        ret = problem(api, conn, q, 429, "rate-limited", NULL, retry,
                      "key %" PRId64 ": more than %" PRId64 " requests per second", key.id,
                      api->rate);
        goto out;
    }
    if ((key.scopes & (scope_needed(q->route) | BS_SCOPE_ADMIN)) == 0) {
        ret = problem(api, conn, q, 403, "scope", NULL, NULL, "this key lacks the scope %s",
                      bs_apikey_scope_name(scope_needed(q->route)));
        goto out;
    }
    if (account != NULL && key.bound && strcmp(account, key.account) != 0) {
        /* Every other account is not found, as if it did not exist. */
        ret = problem(api, conn, q, 404, "not-found", "account", NULL, "no account '%s'", account);
        goto out;
    }
    switch (q->route) {
    case R_BALANCE:
        ret = balance(api, conn, q, s, account, bal, now);
        break;
    case R_GRANTS:
    case R_SUBSCRIPTIONS:
        if (bs_catalog_zone(s->cat, account) == NULL) {
            ret = problem(api, conn, q, 404, "not-found", "account", NULL, "no account '%s'",
                          account);
            break;
        }
        ret = list_rows(api, conn, q, s,
                        q->route == R_GRANTS ? BS_API_GRANTS : BS_API_SUBSCRIPTIONS, account);
        break;
    case R_PRICE_BOOKS:
    case R_PLANS:
        if (key.bound && (key.scopes & BS_SCOPE_ADMIN) == 0) {
            ret = problem(api, conn, q, 403, "scope", NULL, NULL,
                          "the catalog is for admin keys and keys of every account");
            break;
        }
        ret = list_rows(api, conn, q, s, q->route == R_PLANS ? BS_API_PLANS : BS_API_PRICE_BOOKS,
                        NULL);
        break;
    case R_ACCOUNTS: {
        char msg[MSG_MAX];
        json_t *body = NULL;
        unsigned st = bd_api_accounts(s->conn, conn, key.bound ? key.account : NULL, &body, msg,
                                      sizeof(msg), &err);

        ret = st == 0     ? db_problem(api, conn, q, &err)
              : st == 200 ? send_json(api, conn, q, 200, body)
                          : problem(api, conn, q, st, "query", "q", NULL, "%s", msg);
        break;
    }
    case R_REJECTED: {
        char msg[MSG_MAX];
        json_t *body = NULL;
        unsigned st;

        if (key.bound || (key.scopes & BS_SCOPE_ADMIN) == 0) {
            ret = problem(api, conn, q, 403, "scope", NULL, NULL,
                          "rejected events are for admin keys of every account");
            break;
        }
        st = bd_api_rejected(s->conn, conn, &body, msg, sizeof(msg), &err);
        ret = st == 0     ? db_problem(api, conn, q, &err)
              : st == 200 ? send_json(api, conn, q, 200, body)
                          : problem(api, conn, q, st, "query", NULL, NULL, "%s", msg);
        break;
    }
    case R_OPS_STATUS:
        if (key.bound || (key.scopes & BS_SCOPE_ADMIN) == 0) {
            ret = problem(api, conn, q, 403, "scope", NULL, NULL,
                          "the operations status is for admin keys of every account");
            break;
        }
        {
            json_t *closes = json_array();

            if (closes == NULL) {
                ret = MHD_NO;
                break;
            }
            if (bs_api_read(s->conn, BS_API_CLOSES, NULL, row_json, closes, &err) != BS_OK) {
                json_decref(closes);
                ret = db_problem(api, conn, q, &err);
                break;
            }
            ret = send_json(api, conn, q, 200, bd_api_ops_status(api_routes_json(api), closes));
            break;
        }
    case R_EVENTS:
        ret = post_events(api, conn, q, s, key.id, key.bound ? key.account : NULL);
        break;
    case R_INVOICES:
    case R_INVOICE:
    case R_USAGE:
    case R_QUOTE:
        memset(&doc, 0, sizeof(doc));
        if (q->route == R_INVOICES)
            bd_doc_invoices(s->conn, conn, key.bound ? key.account : NULL, &doc);
        else if (q->route == R_INVOICE)
            bd_doc_invoice(s->conn, conn, ref, key.bound ? key.account : NULL, &doc);
        else if (q->route == R_USAGE)
            bd_doc_usage(s->conn, s->cat, conn, account, &doc);
        else
            bd_doc_quote(s->conn, s->cat, q->body != NULL ? q->body : "", q->len,
                         key.bound ? key.account : NULL, &doc);
        ret = send_answer(api, conn, q, &doc);
        free(doc.body);
        break;
    default:
        ret = problem(api, conn, q, 404, "not-found", NULL, NULL, "no such route");
        break;
    }
out:
    bs_balance_input_free(bal);
    slot_give(api, s);
    return ret;
}

/* Watch @conn from @since_ns on (0: not, while its request is answered). */
static void watch_set(bd_api *api, struct MHD_Connection *conn, int64_t since_ns)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    watch *w = info != NULL ? info->socket_context : NULL;

    if (w == NULL)
        return;
    pthread_mutex_lock(&api->lock);
    w->since_ns = since_ns;
    pthread_mutex_unlock(&api->lock);
}

/* MHD_OPTION_NOTIFY_CONNECTION: watch each connection from its start to its close. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    bd_api *api = cls;
    const union MHD_ConnectionInfo *info;
    watch *w = *socket_context;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        w = calloc(1, sizeof(*w));
        if (w == NULL || info == NULL) {
            free(w);
            return;
        }
        w->fd = info->connect_fd;
        w->since_ns = mono_ns();
        pthread_mutex_lock(&api->lock);
        w->next = api->watched;
        if (w->next != NULL)
            w->next->prev = w;
        api->watched = w;
        pthread_mutex_unlock(&api->lock);
        *socket_context = w;
        return;
    }
    if (w == NULL)
        return;
    /* Called before libmicrohttpd closes the socket: the reaper never sees a reused fd. */
    pthread_mutex_lock(&api->lock);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        api->watched = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&api->lock);
    free(w);
    *socket_context = NULL;
}

/* The reaper: shut down the connections waiting for headers over api.request_ms. */
static void *reap(void *arg)
{
    bd_api *api = arg;
    struct timespec until;
    watch *w;
    int64_t now;
    int64_t tick_ms = api->request_ms / 4 > 0 ? api->request_ms / 4 : 1;

    pthread_mutex_lock(&api->lock);
    while (!api->stopping) {
        now = mono_ns();
        for (w = api->watched; w != NULL; w = w->next) {
            if (w->since_ns == 0 || (now - w->since_ns) / 1000000 <= api->request_ms)
                continue;
            /* The socket stays libmicrohttpd's: it sees the end and closes it. */
            shutdown(w->fd, SHUT_RDWR);
            w->since_ns = 0;
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)(tick_ms % 1000) * 1000000L;
        until.tv_sec += (time_t)(tick_ms / 1000) + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&api->wake, &api->lock, &until);
    }
    pthread_mutex_unlock(&api->lock);
    return NULL;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    bd_api *api = cls;
    req *q = *con_cls;
    char account[129];
    const char *cl;
    int bad_account = 0;
    enum route r;
    char *grown;

    (void)version;
    account[0] = '\0';
    if (q == NULL) {
        q = calloc(1, sizeof(*q));
        if (q == NULL)
            return MHD_NO;
        q->start_ns = mono_ns();
        q->method = method;
        q->route = bd_route_of(url, account, sizeof(account), &bad_account);
        *con_cls = q;
        watch_set(api, conn, 0);
        cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl != NULL && strtoull(cl, NULL, 10) > api->body_max)
            return problem(api, conn, q, 413, "too-large", "body", NULL,
                           "the body is over %zu bytes (api.body_max)", api->body_max);
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;

        *upload_size = 0;
        if (q->answered)
            return MHD_YES;
        if ((mono_ns() - q->start_ns) / 1000000 > api->request_ms) {
            /* No answer can be queued while a body arrives: the connection is closed. */
            bd_log("warn", "api_request_timeout", "route=%s request_ms=%" PRId64,
                   bd_q(route_names[q->route]), api->request_ms);
            count(api, q->route, 408, q->start_ns);
            q->answered = 1;
            return MHD_NO;
        }
        if (q->too_large || q->len + n > api->body_max) {
            /* Answered 413 once the body is in (no answer can be queued before). */
            q->too_large = 1;
            return MHD_YES;
        }
        if (q->len + n + 1 > q->cap) {
            size_t cap = q->cap ? q->cap : 65536;

            while (cap < q->len + n + 1)
                cap *= 2;
            grown = realloc(q->body, cap);
            if (grown == NULL)
                return MHD_NO;
            q->body = grown;
            q->cap = cap;
        }
        memcpy(q->body + q->len, upload, n);
        q->len += n;
        q->body[q->len] = '\0';
        return MHD_YES;
    }
    if (q->answered)
        return MHD_YES;
    if (q->too_large)
        return problem(api, conn, q, 413, "too-large", "body", NULL,
                       "the body is over %zu bytes (api.body_max)", api->body_max);
    if (bd_console_path(url))
        return bd_console_answer(api->console, conn, url, method);
    if ((mono_ns() - q->start_ns) / 1000000 > api->request_ms)
        return problem(api, conn, q, 408, "timeout", NULL, NULL,
                       "the request took over %" PRId64 " ms (api.request_ms)", api->request_ms);
    r = bd_route_of(url, account, sizeof(account), &bad_account);
    if (bad_account)
        return problem(api, conn, q, 404, "not-found", r == R_INVOICE ? "number" : "account", NULL,
                       r == R_INVOICE ? "an invoice number has 1 to 128 bytes"
                                      : "an account id has 1 to 128 bytes");
    return dispatch(
        api, conn, q, method,
        r == R_BALANCE || r == R_GRANTS || r == R_SUBSCRIPTIONS || r == R_USAGE ? account : NULL,
        r == R_INVOICE ? account : NULL);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    req *q = *con_cls;

    (void)toe;
    watch_set(cls, conn, mono_ns());
    if (q != NULL) {
        free(q->body);
        free(q);
        *con_cls = NULL;
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[MSG_MAX];
    size_t len;

    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    len = strlen(msg);
    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '\r'))
        msg[--len] = '\0';
    bd_log("warn", "api_http", "message=%s", bd_q(msg));
}

/* "HOST:PORT" (IPv4) into @sa; 0 or -1. */
static int parse_listen(const char *listen, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(listen, ':');
    char *end;
    long port;

    if (colon == NULL || (size_t)(colon - listen) >= sizeof(host))
        return -1;
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535)
        return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host[0] ? host : "127.0.0.1", &sa->sin_addr) == 1 ? 0 : -1;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    size_t n;

    if (f == NULL)
        return NULL;
    buf = malloc(1024 * 1024 + 1);
    if (buf == NULL) {
        fclose(f);
        return NULL;
    }
    n = fread(buf, 1, 1024 * 1024, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* api.events=kafka: the producer of the usage topic, its poller, and the dead letters'. */
static int start_producer(bd_api *api, const bd_config *cfg)
{
    char errstr[MSG_MAX];
    char timeout[24];
    const char *props[] = {"acks", "all", "message.timeout.ms", timeout};

    if (cfg->api_events == NULL || strcmp(cfg->api_events, "kafka") != 0)
        return 0;
    snprintf(timeout, sizeof(timeout), "%ld", cfg->api_produce_ms);
    api->topic = strdup(cfg->api_events_topic != NULL ? cfg->api_events_topic : "");
    if (api->topic == NULL)
        return -1;
    api->rk = bd_producer_new_props(cfg, props, 2, on_delivery, api, errstr, sizeof(errstr));
    if (api->rk == NULL) {
        bd_log("error", "api_producer_failed", "error=%s", bd_q(errstr));
        return -1;
    }
    if (pthread_create(&api->poller, NULL, poll_producer, api) != 0) {
        bd_log("error", "api_start_failed", "error=%s", bd_q("no producer poller thread"));
        return -1;
    }
    api->polling = 1;
    if (cfg->dead_letter_topic != NULL && cfg->dead_letter_topic[0] != '\0') {
        api->dlq = bd_dlq_new(cfg, NULL);
        if (api->dlq == NULL)
            return -1;
    }
    bd_log("info", "api_events_kafka", "topic=%s dead_letter_topic=%s produce_ms=%ld",
           bd_q(api->topic), bd_q(api->dlq != NULL ? cfg->dead_letter_topic : ""),
           cfg->api_produce_ms);
    return 0;
}

/* Deliver what is queued (at most api.produce_ms), stop the poller, free the producers. */
static void stop_producer(bd_api *api)
{
    if (api->rk != NULL)
        rd_kafka_flush(api->rk, (int)api->cfg->api_produce_ms);
    if (api->polling) {
        pthread_mutex_lock(&api->dr_lock);
        api->poll_stop = 1;
        pthread_mutex_unlock(&api->dr_lock);
        pthread_join(api->poller, NULL);
    }
    if (api->rk != NULL)
        rd_kafka_destroy(api->rk);
    bd_dlq_free(api->dlq);
    free(api->topic);
}

bd_api *bd_api_new(const bd_config *cfg)
{
    struct sockaddr_in sa;
    /*
     * A thread per connection (libmicrohttpd's, its listening thread
     * accepting): a handler that blocks (a row lock, a store slot, the
     * broker's acknowledgement) holds its own connection only. With a
     * pool of threads each polling the connections it accepted, it held
     * every other connection of its thread too (check-api-blocked.sh).
     * At most API_CONNECTIONS threads; the request timeout as before.
     */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC;
    const union MHD_DaemonInfo *info;
    bd_api *api;

    if (parse_listen(cfg->api_listen, &sa) != 0) {
        bd_log("error", "api_listen_invalid", "listen=%s", bd_q(cfg->api_listen));
        return NULL;
    }
    if (bs_apikey_init() != 0) {
        bd_log("error", "api_start_failed", "error=%s", bd_q("libsodium cannot start"));
        return NULL;
    }
    api = calloc(1, sizeof(*api));
    if (api == NULL)
        return NULL;
    pthread_mutex_init(&api->lock, NULL);
    pthread_cond_init(&api->freed, NULL);
    pthread_cond_init(&api->wake, NULL);
    pthread_rwlock_init(&api->rk_lock, NULL);
    pthread_mutex_init(&api->dr_lock, NULL);
    pthread_cond_init(&api->dr_done, NULL);
    pthread_mutex_init(&api->dlq_lock, NULL);
    api->cfg = cfg;
    api->conninfo = strdup(bs_conninfo(cfg->db));
    api->book = cfg->book != NULL ? strdup(cfg->book) : NULL;
    api->body_max = (size_t)cfg->api_body_max;
    api->request_ms = cfg->api_request_ms;
    api->rate = cfg->api_rate;
    api->console =
        bd_console_new(cfg->api_console_dir != NULL ? cfg->api_console_dir : BD_CONSOLE_DIR);
    if (cfg->api_tls_cert != NULL && cfg->api_tls_cert[0] != '\0') {
        api->cert = read_file(cfg->api_tls_cert);
        api->key = read_file(cfg->api_tls_key != NULL ? cfg->api_tls_key : "");
        if (api->cert == NULL || api->key == NULL) {
            bd_log("error", "api_tls_unreadable", "cert=%s key=%s", bd_q(cfg->api_tls_cert),
                   bd_q(cfg->api_tls_key != NULL ? cfg->api_tls_key : ""));
            bd_api_free(api);
            return NULL;
        }
        flags |= MHD_USE_TLS;
    }
    if (api->conninfo == NULL || start_producer(api, cfg) != 0) {
        bd_api_free(api);
        return NULL;
    }
    slots_open(api);
    if (api->cert != NULL)
        api->http = MHD_start_daemon(
            flags, ntohs(sa.sin_port), NULL, NULL, answer, api, MHD_OPTION_EXTERNAL_LOGGER,
            on_mhd_log, api, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
            MHD_OPTION_HTTPS_MEM_CERT, api->cert, MHD_OPTION_HTTPS_MEM_KEY, api->key,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONNECTIONS,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->api_connections_per_ip,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)((cfg->api_request_ms + 999) / 1000),
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, api, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, api, MHD_OPTION_END);
    else
        api->http = MHD_start_daemon(
            flags, ntohs(sa.sin_port), NULL, NULL, answer, api, MHD_OPTION_EXTERNAL_LOGGER,
            on_mhd_log, api, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONNECTIONS,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->api_connections_per_ip,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)((cfg->api_request_ms + 999) / 1000),
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, api, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, api, MHD_OPTION_END);
    if (api->http == NULL) {
        bd_log("error", "api_listen_failed", "listen=%s error=%s", bd_q(cfg->api_listen),
               bd_q(strerror(errno)));
        bd_api_free(api);
        return NULL;
    }
    if (pthread_create(&api->reaper, NULL, reap, api) != 0) {
        bd_log("error", "api_start_failed", "error=%s", bd_q("no reaper thread"));
        bd_api_free(api);
        return NULL;
    }
    api->reaping = 1;
    /* With port 0 the system picks one: log the port bound, for the clients to find. */
    info = MHD_get_daemon_info(api->http, MHD_DAEMON_INFO_BIND_PORT);
    bd_log("info", "api_listening", "listen=%s port=%u tls=%d", bd_q(cfg->api_listen),
           info != NULL ? (unsigned)info->port : (unsigned)ntohs(sa.sin_port), api->cert != NULL);
    return api;
}

/*
 * Stop accepting, close the connections waiting for a request, and wait
 * (at most api.request_ms) for the requests in flight to be answered;
 * each connection is closed once its answer is sent.
 */
static void drain(bd_api *api)
{
    struct timespec tick = {0, 10 * 1000000L};
    int64_t until = mono_ns() + api->request_ms * 1000000;
    MHD_socket listen_fd = MHD_quiesce_daemon(api->http);
    size_t busy;
    watch *w;

    if (listen_fd != MHD_INVALID_SOCKET)
        close(listen_fd);
    bd_log("info", "api_stopping", "request_ms=%" PRId64, api->request_ms);
    for (;;) {
        busy = 0;
        pthread_mutex_lock(&api->lock);
        for (w = api->watched; w != NULL; w = w->next) {
            if (w->since_ns != 0) {
                shutdown(w->fd, SHUT_RDWR);
                w->since_ns = 0;
            }
            busy++;
        }
        pthread_mutex_unlock(&api->lock);
        if (busy == 0 || mono_ns() > until)
            break;
        nanosleep(&tick, NULL);
    }
    bd_log("info", "api_stopped", "connections_left=%zu", busy);
}

void bd_api_free(bd_api *api)
{
    size_t i;

    if (api == NULL)
        return;
    if (api->http != NULL)
        drain(api);
    if (api->reaping) {
        pthread_mutex_lock(&api->lock);
        api->stopping = 1;
        pthread_cond_signal(&api->wake);
        pthread_mutex_unlock(&api->lock);
        pthread_join(api->reaper, NULL);
    }
    if (api->http != NULL)
        MHD_stop_daemon(api->http); /* joins its threads: requests in flight are answered */
    stop_producer(api);
    for (i = 0; i < API_THREADS; i++) {
        bs_ingest_free(api->slots[i].in);
        bs_catalog_free(api->slots[i].cat);
        bs_close(api->slots[i].conn);
    }
    pthread_cond_destroy(&api->freed);
    pthread_cond_destroy(&api->wake);
    pthread_mutex_destroy(&api->lock);
    pthread_rwlock_destroy(&api->rk_lock);
    pthread_cond_destroy(&api->dr_done);
    pthread_mutex_destroy(&api->dr_lock);
    pthread_mutex_destroy(&api->dlq_lock);
    bd_console_free(api->console);
    free(api->conninfo);
    free(api->book);
    free(api->cert);
    free(api->key);
    free(api);
}

size_t bd_api_metrics(void *arg, char *buf, size_t size)
{
    bd_api *api = arg;
    size_t len = 0;
    size_t r;
    size_t i;
    uint64_t cum;
    int w;

#define EMIT(...)                                                                     \
    do {                                                                              \
        if (len < size) {                                                             \
            w = snprintf(buf + len, size - len, __VA_ARGS__);                         \
            len += w > 0 ? ((size_t)w < size - len ? (size_t)w : size - len - 1) : 0; \
        }                                                                             \
    } while (0)

    if (size == 0)
        return 0;
    buf[0] = '\0';
    pthread_mutex_lock(&api->lock);
    EMIT("# HELP billingd_api_requests_total HTTP API requests answered, by route and status.\n"
         "# TYPE billingd_api_requests_total counter\n");
    for (r = 0; r < N_ROUTES; r++)
        for (i = 0; i <= N_STATUSES; i++)
            if (api->count[r][i] > 0)
                EMIT("billingd_api_requests_total{route=\"%s\",status=\"%u\"} %" PRIu64 "\n",
                     route_names[r], i < N_STATUSES ? statuses[i] : 0u, api->count[r][i]);
    EMIT("# HELP billingd_api_request_duration_seconds Time to answer an HTTP API request.\n"
         "# TYPE billingd_api_request_duration_seconds histogram\n");
    for (r = 0; r < N_ROUTES; r++) {
        cum = 0;
        for (i = 0; i < N_US; i++) {
            cum += api->dur[r][i];
            EMIT("billingd_api_request_duration_seconds_bucket{route=\"%s\",le=\"%" PRId64
                 ".%06" PRId64 "\"} %" PRIu64 "\n",
                 route_names[r], us_bounds[i] / 1000000, us_bounds[i] % 1000000, cum);
        }
        cum += api->dur[r][N_US];
        EMIT("billingd_api_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
             route_names[r], cum);
        EMIT("billingd_api_request_duration_seconds_sum{route=\"%s\"} %" PRId64 ".%06" PRId64 "\n",
             route_names[r], api->dur_sum_us[r] / 1000000, api->dur_sum_us[r] % 1000000);
        EMIT("billingd_api_request_duration_seconds_count{route=\"%s\"} %" PRIu64 "\n",
             route_names[r], cum);
    }
    pthread_mutex_unlock(&api->lock);
#undef EMIT
    return len;
}
