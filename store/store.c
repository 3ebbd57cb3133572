/*
 * store.c - connection, error classification, queries, transactions and
 * pipelines over libpq. See store.h.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store.h"

#define DEFAULT_ATTEMPTS 5
#define DEFAULT_INITIAL_MS 200
#define DEFAULT_MAX_MS 5000
#define MAX_ATTEMPTS 100

/* One queued pipeline statement: where its row count goes. */
typedef struct pipe_slot {
    int64_t *affected;
} pipe_slot;

struct bs_conn {
    PGconn *pg;
    bs_retry retry;
    char prepared[BS_MAX_PREPARED][BS_NAME_MAX + 1];
    size_t n_prepared;
    /* Pipeline state. */
    int in_pipeline;
    size_t queued; /* statements sent since the last sync */
    pipe_slot slots[BS_PIPELINE_WINDOW];
    bs_error pipe_err;      /* first failure, status BS_OK if none */
    unsigned long sessions; /* sessions set up: 1 after connecting, +1 per reconnect */
};

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

const char *bs_strerror(bs_status st)
{
    switch (st) {
    case BS_OK:
        return "success";
    case BS_ERR_RETRY:
        return "transient database failure; retry";
    case BS_ERR_CONSTRAINT:
        return "refused by a database constraint";
    case BS_ERR_FATAL:
        return "database error";
    case BS_ERR_INVALID:
        return "invalid argument";
    case BS_ERR_NOMEM:
        return "out of memory";
    case BS_ERR_SCHEMA:
        return "database schema mismatch";
    }
    return "unknown store status";
}

/* SQLSTATEs after which running the same transaction again may succeed. */
static const char *const retriable_states[] = {
    "40001", /* serialization_failure */
    "40P01", /* deadlock_detected */
    "55P03", /* lock_not_available (lock_timeout) */
    "57P01", /* admin_shutdown */
    "57P02", /* crash_shutdown */
    "57P03", /* cannot_connect_now (starting up) */
};

bs_status bs_classify_sqlstate(const char *sqlstate)
{
    size_t i;

    if (sqlstate == NULL || strlen(sqlstate) != 5)
        return BS_ERR_FATAL;
    /* Class 08: connection exception; class 53: insufficient resources. */
    if (strncmp(sqlstate, "08", 2) == 0 || strncmp(sqlstate, "53", 2) == 0)
        return BS_ERR_RETRY;
    for (i = 0; i < sizeof(retriable_states) / sizeof(retriable_states[0]); i++) {
        if (strcmp(sqlstate, retriable_states[i]) == 0)
            return BS_ERR_RETRY;
    }
    /* Class 23: integrity constraint violation (our guards raise it too). */
    if (strncmp(sqlstate, "23", 2) == 0)
        return BS_ERR_CONSTRAINT;
    return BS_ERR_FATAL;
}

int bs_sqlstate_schema_suspect(const char *sqlstate)
{
    if (sqlstate == NULL || strlen(sqlstate) != 5)
        return 0;
    /* Class 42: an undefined table, column, function or object (42P01, 42703, 42883, 42704),
       or a privilege gone; 3F: no such schema; 0A000: a cached plan whose table changed. */
    return strncmp(sqlstate, "42", 2) == 0 || strncmp(sqlstate, "3F", 2) == 0 ||
           strcmp(sqlstate, "0A000") == 0;
}

static void copy_field(char *dst, size_t size, const char *src)
{
    if (src == NULL)
        src = "";
    snprintf(dst, size, "%s", src);
}

static void error_clear(bs_error *err)
{
    if (err == NULL)
        return;
    err->status = BS_OK;
    err->sqlstate[0] = '\0';
    err->constraint[0] = '\0';
    err->message[0] = '\0';
}

bs_status bs_error_set(bs_error *err, bs_status st, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return st;
    error_clear(err);
    err->status = st;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return st;
}

/* libpq messages end with a newline; ours do not. */
static void chomp(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = '\0';
}

/*
 * from_result - classify the failure of @what from @res (NULL when libpq
 * could not even produce a result) and fill @err. A broken connection is
 * always retriable: whatever the statement, it has to be re-run elsewhere.
 */
static bs_status from_result(bs_conn *c, const PGresult *res, const char *what, bs_error *err)
{
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *detail = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
    bs_status st = bs_classify_sqlstate(state);

    if (PQstatus(c->pg) != CONNECTION_OK)
        st = BS_ERR_RETRY;
    else if (res == NULL)
        st = BS_ERR_NOMEM;
    if (primary == NULL)
        primary = res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(c->pg);
    if (err == NULL)
        return st;
    error_clear(err);
    err->status = st;
    copy_field(err->sqlstate, sizeof(err->sqlstate), state);
    if (res != NULL)
        copy_field(err->constraint, sizeof(err->constraint),
                   PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME));
    snprintf(err->message, sizeof(err->message), "%s: %s%s%s%s", what, primary,
             detail != NULL ? " (" : "", detail != NULL ? detail : "", detail != NULL ? ")" : "");
    chomp(err->message);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Connection                                                              */
/* ---------------------------------------------------------------------- */

void bs_sleep_ms(int ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        continue;
}

/*
 * backoff - after failed attempt @attempt, pause *@pause ms and double it
 * (up to max_ms) if attempts remain. Returns 0 when they are exhausted.
 */
static int backoff(const bs_conn *c, int attempt, int *pause)
{
    if (attempt >= c->retry.attempts)
        return 0;
    bs_sleep_ms(*pause);
    *pause = *pause >= c->retry.max_ms / 2 ? c->retry.max_ms : *pause * 2;
    return 1;
}

const char *bs_conninfo(const char *option)
{
    const char *env;

    if (option != NULL && option[0] != '\0')
        return option;
    env = getenv("BILLING_PG_CONNINFO");
    if (env != NULL && env[0] != '\0')
        return env;
    return "";
}

/* Notices (e.g. "relation already exists, skipping") are not errors; drop them. */
static void ignore_notice(void *arg, const PGresult *res)
{
    (void)arg;
    (void)res;
}

/* Session settings every statement of ours assumes. */
static bs_status setup_session(bs_conn *c, bs_error *err)
{
    PGresult *res;

    PQsetNoticeReceiver(c->pg, ignore_notice, NULL);
    res = PQexec(c->pg, "SET TimeZone = 'UTC'");
    if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK) {
        bs_status st = from_result(c, res, "setting the session time zone", err);

        PQclear(res);
        return st;
    }
    PQclear(res);
    c->sessions++;
    return BS_OK;
}

/* One connection attempt; the caller loops. */
static bs_status connect_once(bs_conn *c, const char *conninfo, bs_error *err)
{
    /*
     * The user's conninfo is expanded in place of "dbname"; keywords
     * after it override it: UTF8 is what our text parameters are.
     */
    const char *const keys[] = {"fallback_application_name", "dbname", "client_encoding", NULL};
    const char *const values[] = {"billing", conninfo, "UTF8", NULL};
    bs_status st;

    PQfinish(c->pg);
    c->pg = PQconnectdbParams(keys, values, 1);
    if (c->pg == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "connecting: out of memory");
    if (PQstatus(c->pg) != CONNECTION_OK) {
        /*
         * A server that answers pings but refused us (unknown database or
         * role, bad password, no pg_hba entry) will refuse again: only an
         * unreachable, starting or stopping server is worth waiting for.
         */
        st = PQpingParams(keys, values, 1) == PQPING_OK ? BS_ERR_FATAL : BS_ERR_RETRY;
        bs_error_set(err, st, "connecting to PostgreSQL: %s", PQerrorMessage(c->pg));
        if (err != NULL)
            chomp(err->message);
        return st;
    }
    c->n_prepared = 0;
    return setup_session(c, err);
}

/*
 * Connect with @conninfo (NULL: reset the existing connection) until it
 * succeeds, fails for good, or the attempts run out.
 */
static bs_status connect_with_retry(bs_conn *c, const char *conninfo, bs_error *err)
{
    int attempt;
    int pause = c->retry.initial_ms;
    bs_status st = BS_ERR_RETRY;

    for (attempt = 1;; attempt++) {
        if (conninfo != NULL) {
            st = connect_once(c, conninfo, err);
        } else {
            PQreset(c->pg);
            c->n_prepared = 0;
            st = PQstatus(c->pg) == CONNECTION_OK
                     ? setup_session(c, err)
                     : bs_error_set(err, BS_ERR_RETRY, "reconnecting: %s", PQerrorMessage(c->pg));
        }
        if (st != BS_ERR_RETRY || !backoff(c, attempt, &pause))
            return st;
    }
}

static void set_retry(bs_conn *c, const bs_retry *retry)
{
    c->retry.attempts = DEFAULT_ATTEMPTS;
    c->retry.initial_ms = DEFAULT_INITIAL_MS;
    c->retry.max_ms = DEFAULT_MAX_MS;
    if (retry == NULL)
        return;
    if (retry->attempts > 0)
        c->retry.attempts = retry->attempts < MAX_ATTEMPTS ? retry->attempts : MAX_ATTEMPTS;
    if (retry->initial_ms > 0)
        c->retry.initial_ms = retry->initial_ms;
    if (retry->max_ms > 0)
        c->retry.max_ms = retry->max_ms;
    if (c->retry.max_ms < c->retry.initial_ms)
        c->retry.max_ms = c->retry.initial_ms;
}

bs_conn *bs_connect(const char *conninfo, const bs_retry *retry, bs_error *err)
{
    bs_conn *c;

    if (conninfo == NULL) {
        bs_error_set(err, BS_ERR_INVALID, "bs_connect: conninfo is NULL");
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        bs_error_set(err, BS_ERR_NOMEM, "bs_connect: out of memory");
        return NULL;
    }
    set_retry(c, retry);
    if (connect_with_retry(c, conninfo, err) != BS_OK) {
        bs_close(c);
        return NULL;
    }
    return c;
}

void bs_close(bs_conn *c)
{
    if (c == NULL)
        return;
    PQfinish(c->pg);
    free(c);
}

PGconn *bs_pg(bs_conn *c)
{
    return c->pg;
}

int bs_up(bs_conn *c)
{
    return PQstatus(c->pg) == CONNECTION_OK;
}

void bs_where(bs_conn *c, char *buf, size_t size)
{
    int v = PQserverVersion(c->pg);

    snprintf(buf, size, "database %s on %s port %s (PostgreSQL %d.%d)", PQdb(c->pg), PQhost(c->pg),
             PQport(c->pg), v / 10000, v % 10000);
}

const char *bs_conn_message(bs_conn *c)
{
    const char *m = PQerrorMessage(c->pg);

    return m != NULL ? m : "";
}

bs_status bs_listen(bs_conn *c, const char *channel, bs_error *err)
{
    char sql[128];

    if (channel[0] == '\0' || strlen(channel) > 63 ||
        strspn(channel, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(channel))
        return bs_error_set(err, BS_ERR_FATAL, "LISTEN: bad channel name '%s'", channel);
    snprintf(sql, sizeof(sql), "LISTEN %s", channel);
    return bs_command(c, sql, 0, NULL, NULL, err);
}

/* Reads of bs_notified at most (each takes what has arrived). */
#define NOTIFY_READS 8

int bs_notified(bs_conn *c)
{
    PGnotify *note;
    struct pollfd p;
    int rounds;
    int n = 0;

    for (rounds = 0; rounds < NOTIFY_READS; rounds++) {
        if (PQconsumeInput(c->pg) == 0 || PQstatus(c->pg) != CONNECTION_OK)
            return -1;
        p.fd = PQsocket(c->pg);
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 0) <= 0)
            break;
    }
    while ((note = PQnotifies(c->pg)) != NULL) {
        n++;
        PQfreemem(note);
    }
    return n;
}

unsigned long bs_sessions(const bs_conn *c)
{
    return c->sessions;
}

bs_status bs_reconnect(bs_conn *c, bs_error *err)
{
    if (c->in_pipeline) {
        PQexitPipelineMode(c->pg);
        c->in_pipeline = 0;
        c->queued = 0;
    }
    return connect_with_retry(c, NULL, err);
}

/* ---------------------------------------------------------------------- */
/* Statements                                                              */
/* ---------------------------------------------------------------------- */

static int result_ok(const PGresult *res)
{
    ExecStatusType s = PQresultStatus(res);

    return res != NULL && (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK);
}

static bs_status check_args(const bs_conn *c, int nparams, bs_error *err)
{
    if (c == NULL || c->pg == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "no connection");
    if (nparams < 0 || nparams > BS_MAX_PARAMS)
        return bs_error_set(err, BS_ERR_INVALID, "%d parameters: at most %d", nparams,
                            BS_MAX_PARAMS);
    if (c->in_pipeline)
        return bs_error_set(err, BS_ERR_INVALID, "synchronous query while in a pipeline");
    return BS_OK;
}

/* @res is consumed: returned when it succeeded, freed otherwise. */
static PGresult *finish_query(bs_conn *c, PGresult *res, const char *what, bs_error *err)
{
    if (result_ok(res))
        return res;
    from_result(c, res, what, err);
    PQclear(res);
    return NULL;
}

PGresult *bs_query(bs_conn *c, const char *sql, int nparams, const char *const *params,
                   bs_error *err)
{
    PGresult *res;

    if (check_args(c, nparams, err) != BS_OK)
        return NULL;
    res = PQexecParams(c->pg, sql, nparams, NULL, params, NULL, NULL, 0);
    return finish_query(c, res, "query", err);
}

static int is_prepared(const bs_conn *c, const char *name)
{
    size_t i;

    for (i = 0; i < c->n_prepared; i++) {
        if (strcmp(c->prepared[i], name) == 0)
            return 1;
    }
    return 0;
}

bs_status bs_prepare(bs_conn *c, const char *name, const char *sql, int nparams, bs_error *err)
{
    PGresult *res;
    bs_status st = check_args(c, nparams, err);

    if (st != BS_OK)
        return st;
    if (name == NULL || name[0] == '\0' || strlen(name) > BS_NAME_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "statement name must be 1..%d bytes", BS_NAME_MAX);
    if (is_prepared(c, name))
        return BS_OK;
    if (c->n_prepared >= BS_MAX_PREPARED)
        return bs_error_set(err, BS_ERR_INVALID, "more than %d prepared statements",
                            BS_MAX_PREPARED);
    res = PQprepare(c->pg, name, sql, nparams, NULL);
    if (!result_ok(res)) {
        st = from_result(c, res, name, err);
        PQclear(res);
        return st;
    }
    PQclear(res);
    snprintf(c->prepared[c->n_prepared], sizeof(c->prepared[0]), "%s", name);
    c->n_prepared++;
    return BS_OK;
}

PGresult *bs_query_prepared(bs_conn *c, const char *name, const char *sql, int nparams,
                            const char *const *params, bs_error *err)
{
    PGresult *res;

    if (bs_prepare(c, name, sql, nparams, err) != BS_OK)
        return NULL;
    res = PQexecPrepared(c->pg, name, nparams, params, NULL, NULL, 0);
    return finish_query(c, res, name, err);
}

bs_status bs_command(bs_conn *c, const char *sql, int nparams, const char *const *params,
                     int64_t *affected, bs_error *err)
{
    PGresult *res = bs_query(c, sql, nparams, params, err);

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (affected != NULL)
        *affected = strtoll(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return BS_OK;
}

/* FNV-1a of @s: its bucket in bs_strings_index's table. */
static uint64_t string_hash(const char *s)
{
    uint64_t h = 14695981039346656037u;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

size_t bs_strings_index(const char *const *items, size_t n, size_t *index, const char **distinct)
{
    size_t *slot; /* 1 + the string's number, 0 free */
    size_t cap = 16;
    size_t count = 0;
    size_t i;

    while (cap < 2 * n)
        cap *= 2;
    slot = calloc(cap, sizeof(*slot));
    if (slot == NULL)
        return (size_t)-1;
    for (i = 0; i < n; i++) {
        size_t b = (size_t)string_hash(items[i]) & (cap - 1);

        while (slot[b] != 0 && strcmp(distinct[slot[b] - 1], items[i]) != 0)
            b = (b + 1) & (cap - 1);
        if (slot[b] == 0) {
            distinct[count] = items[i];
            slot[b] = ++count;
        }
        index[i] = slot[b] - 1;
    }
    free(slot);
    return count;
}

char *bs_int64_text(char *p, int64_t v)
{
    char digits[BS_INT64_TEXT_MAX];
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0;

    if (v < 0)
        *p++ = '-';
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    while (n > 0)
        *p++ = digits[--n];
    return p;
}

char *bs_text_array(const char *const *items, size_t n)
{
    size_t size = 3;
    size_t len;
    size_t i;
    char *out;
    char *p;
    const char *s;

    /* Worst case: every byte escaped, plus quotes and a comma per element. */
    for (i = 0; i < n; i++) {
        len = strlen(items[i]);
        if (len > BS_TEXT_ARRAY_MAX / 2 - 2 || size > BS_TEXT_ARRAY_MAX - 2 * len - 3)
            return NULL;
        size += 2 * len + 3;
    }
    out = malloc(size);
    if (out == NULL)
        return NULL;
    p = out;
    *p++ = '{';
    for (i = 0; i < n; i++) {
        if (i > 0)
            *p++ = ',';
        *p++ = '"';
        for (s = items[i]; *s != '\0'; s++) {
            if (*s == '"' || *s == '\\')
                *p++ = '\\';
            *p++ = *s;
        }
        *p++ = '"';
    }
    *p++ = '}';
    *p = '\0';
    return out;
}

char *bs_text_array_distinct(const char **items, size_t n)
{
    size_t k = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        if (k == 0 || strcmp(items[i], items[k - 1]) != 0)
            items[k++] = items[i];
    }
    return bs_text_array(items, k);
}

bs_status bs_exec_script(bs_conn *c, const char *sql, bs_error *err)
{
    PGresult *res;
    bs_status st = check_args(c, 0, err);

    if (st != BS_OK)
        return st;
    /* PQexec returns the last statement's result; an error stops the script there. */
    res = PQexec(c->pg, sql);
    if (!result_ok(res)) {
        st = from_result(c, res, "script", err);
        PQclear(res);
        return st;
    }
    PQclear(res);
    return BS_OK;
}

/* ---------------------------------------------------------------------- */
/* Transactions                                                            */
/* ---------------------------------------------------------------------- */

static bs_status simple(bs_conn *c, const char *sql, bs_error *err)
{
    return bs_command(c, sql, 0, NULL, NULL, err);
}

bs_status bs_begin(bs_conn *c, bs_error *err)
{
    return simple(c, "BEGIN", err);
}

bs_status bs_commit(bs_conn *c, bs_error *err)
{
    PGresult *res = bs_query(c, "COMMIT", 0, NULL, err);
    int committed;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    /* COMMIT of a transaction that had failed answers "ROLLBACK", not an error. */
    committed = strcmp(PQcmdStatus(res), "COMMIT") == 0;
    PQclear(res);
    if (!committed)
        return bs_error_set(err, BS_ERR_FATAL,
                            "COMMIT: the transaction had failed and was "
                            "rolled back");
    return BS_OK;
}

void bs_rollback(bs_conn *c)
{
    PGresult *res;

    if (c == NULL || c->pg == NULL)
        return;
    if (c->in_pipeline) {
        bs_pipeline_end(c, NULL);
    }
    if (PQtransactionStatus(c->pg) != PQTRANS_INTRANS &&
        PQtransactionStatus(c->pg) != PQTRANS_INERROR)
        return;
    res = PQexec(c->pg, "ROLLBACK");
    PQclear(res);
}

int bs_in_transaction(bs_conn *c)
{
    PGTransactionStatusType s = PQtransactionStatus(c->pg);

    return s == PQTRANS_INTRANS || s == PQTRANS_INERROR;
}

static bs_status transaction_once(bs_conn *c, bs_txfn fn, void *arg, bs_error *err)
{
    bs_status st = bs_begin(c, err);

    if (st != BS_OK)
        return st;
    st = fn(c, arg, err);
    if (st != BS_OK) {
        bs_rollback(c);
        return st;
    }
    return bs_commit(c, err);
}

bs_status bs_transaction(bs_conn *c, bs_txfn fn, void *arg, bs_error *err)
{
    int attempt;
    int pause = c->retry.initial_ms;
    bs_status st = BS_ERR_RETRY;

    for (attempt = 1;; attempt++) {
        if (PQstatus(c->pg) != CONNECTION_OK) {
            st = bs_reconnect(c, err);
            if (st != BS_OK)
                return st;
        }
        st = transaction_once(c, fn, arg, err);
        if (st != BS_ERR_RETRY || !backoff(c, attempt, &pause))
            return st;
    }
}

/* ---------------------------------------------------------------------- */
/* Pipelines                                                               */
/* ---------------------------------------------------------------------- */

bs_status bs_pipeline_begin(bs_conn *c, bs_error *err)
{
    bs_status st = check_args(c, 0, err);

    if (st != BS_OK)
        return st;
    if (PQenterPipelineMode(c->pg) != 1)
        return bs_error_set(err, BS_ERR_FATAL, "cannot enter pipeline mode: %s",
                            PQerrorMessage(c->pg));
    c->in_pipeline = 1;
    c->queued = 0;
    error_clear(&c->pipe_err);
    return BS_OK;
}

/* Record the first failure of the pipeline. */
static void pipe_fail(bs_conn *c, const PGresult *res, const char *what)
{
    if (c->pipe_err.status != BS_OK)
        return;
    from_result(c, res, what, &c->pipe_err);
    if (c->pipe_err.status == BS_OK)
        c->pipe_err.status = BS_ERR_FATAL;
}

/* Read one queued statement's result, then the NULL that ends it. */
static void read_one(bs_conn *c, pipe_slot *slot)
{
    PGresult *res = PQgetResult(c->pg);
    ExecStatusType s;

    if (res == NULL) {
        pipe_fail(c, NULL, "pipeline: missing result");
        return;
    }
    s = PQresultStatus(res);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
        if (slot->affected != NULL)
            *slot->affected = strtoll(PQcmdTuples(res), NULL, 10);
    } else if (s != PGRES_PIPELINE_ABORTED) {
        pipe_fail(c, res, "pipelined statement");
    }
    PQclear(res);
    res = PQgetResult(c->pg);
    PQclear(res);
}

/* Send a sync point and read every result up to it. */
static void sync_and_drain(bs_conn *c)
{
    PGresult *res;
    size_t i;

    if (PQpipelineSync(c->pg) != 1) {
        pipe_fail(c, NULL, "pipeline sync");
        return;
    }
    for (i = 0; i < c->queued && PQstatus(c->pg) == CONNECTION_OK; i++)
        read_one(c, &c->slots[i]);
    c->queued = 0;
    res = PQgetResult(c->pg);
    if (res == NULL || PQresultStatus(res) != PGRES_PIPELINE_SYNC)
        pipe_fail(c, res, "pipeline: expected the sync point");
    PQclear(res);
}

/* The pipeline's first failure, copied to @err; what every later send returns. */
static bs_status pipe_report(const bs_conn *c, bs_error *err)
{
    if (err != NULL && c->pipe_err.status != BS_OK)
        *err = c->pipe_err;
    return c->pipe_err.status;
}

bs_status bs_pipeline_send(bs_conn *c, const char *name, const char *sql, int nparams,
                           const char *const *params, int64_t *affected, bs_error *err)
{
    int sent;

    if (!c->in_pipeline)
        return bs_error_set(err, BS_ERR_INVALID, "bs_pipeline_send outside a pipeline");
    if (c->pipe_err.status != BS_OK)
        return pipe_report(c, err);
    if (nparams < 0 || nparams > BS_MAX_PARAMS || (name != NULL && !is_prepared(c, name))) {
        bs_error_set(&c->pipe_err, BS_ERR_INVALID,
                     "pipelined statement: %d parameters (at most %d), or %s not prepared", nparams,
                     BS_MAX_PARAMS, name != NULL ? name : "(unnamed)");
        return pipe_report(c, err);
    }
    if (name != NULL)
        sent = PQsendQueryPrepared(c->pg, name, nparams, params, NULL, NULL, 0);
    else
        sent = PQsendQueryParams(c->pg, sql, nparams, NULL, params, NULL, NULL, 0);
    if (sent != 1) {
        pipe_fail(c, NULL, "sending a pipelined statement");
        return pipe_report(c, err);
    }
    c->slots[c->queued].affected = affected;
    c->queued++;
    /*
     * Results are read at every window so that neither side's socket
     * buffer fills up while the other waits for it (libpq's warning about
     * pipelines in blocking mode).
     */
    if (c->queued == BS_PIPELINE_WINDOW)
        sync_and_drain(c);
    return pipe_report(c, err);
}

bs_status bs_pipeline_end(bs_conn *c, bs_error *err)
{
    if (!c->in_pipeline)
        return bs_error_set(err, BS_ERR_INVALID, "bs_pipeline_end outside a pipeline");
    if (PQstatus(c->pg) == CONNECTION_OK)
        sync_and_drain(c);
    c->queued = 0;
    if (PQexitPipelineMode(c->pg) != 1 && c->pipe_err.status == BS_OK)
        pipe_fail(c, NULL, "leaving pipeline mode");
    c->in_pipeline = 0;
    /*
     * Results left unread (the server cut the session in the middle, its
     * end of file not seen yet): libpq stays in pipeline mode and refuses
     * every later query on this connection while its status still reads
     * OK, so nobody would ever reconnect it (billingd's catalog reloads
     * failed that way for good). A new session is the only way out; if it
     * cannot be had now, the connection is left broken for the next
     * caller's reconnect.
     */
    if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF)
        connect_with_retry(c, NULL, NULL);
    return pipe_report(c, err);
}
