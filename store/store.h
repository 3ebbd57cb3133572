/*
 * store.h - the PostgreSQL store shared by the `billing` tool and billingd:
 * one connection handle over libpq, errors classified from SQLSTATE,
 * parameterized queries, transactions retried on transient failures, and
 * pipelined batches. Bulk rows go through copy.h (COPY), events
 * through events.h, schema changes through migrate.h.
 *
 * Rules every caller relies on:
 *  - SQL text is always a constant of the program; values travel as
 *    parameters (PQexecParams / prepared statements), never pasted in.
 *  - Every failure fills a caller-provided bs_error (NULL allowed) that
 *    says whether retrying can help (BS_ERR_RETRY) or not, with the
 *    SQLSTATE and, for refused changes, the constraint or guard name.
 *  - A bs_conn is not thread-safe: use one per thread. Different handles
 *    may be used from different threads at once (libpq is thread-safe).
 *
 * Names are prefixed bs_ ("billing store").
 */
#ifndef BILLING_STORE_STORE_H
#define BILLING_STORE_STORE_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* What went wrong, and whether trying again can help. */
typedef enum bs_status {
    BS_OK = 0,              /* success */
    BS_ERR_RETRY = -1,      /* transient: connection lost or refused (SQLSTATE class 08, or
                             * no SQLSTATE with a broken connection), serialization failure
                             * (40001), deadlock (40P01), lock timeout (55P03), server short
                             * of resources (class 53) or shutting down / starting (57P01,
                             * 57P02, 57P03). The transaction was rolled back: run it again
                             * (bs_transaction does, with backoff and reconnection). */
    BS_ERR_CONSTRAINT = -2, /* a database invariant refused the change (class 23: check,
                             * unique, foreign key, or one of our guard triggers). Permanent
                             * for this input; bs_error.constraint names the rule. */
    BS_ERR_FATAL = -3,      /* any other server or protocol error: permanent, retrying the
                             * same statement will fail the same way */
    BS_ERR_INVALID = -4,    /* bad argument, or input past a documented bound; nothing was
                             * sent to the server */
    BS_ERR_NOMEM = -5,      /* out of memory; nothing was committed */
    BS_ERR_SCHEMA = -6      /* the database schema is missing, older or newer than this
                             * program, or an applied migration differs from ours */
} bs_status;

/*
 * bs_error: detail of a failure, filled by every fallible call given one.
 * Plain data, owned by the caller, no allocation.
 */
typedef struct bs_error {
    bs_status status;
    char sqlstate[6];    /* five-character SQLSTATE, "" when not from the server */
    char constraint[64]; /* constraint or guard name (PG_DIAG_CONSTRAINT_NAME), "" if none */
    char message[512];   /* "what we were doing: server message" */
} bs_error;

/* bs_strerror - static English text of @st. */
const char *bs_strerror(bs_status st);

/*
 * bs_classify_sqlstate - the class of a server error from its SQLSTATE:
 * BS_ERR_RETRY, BS_ERR_CONSTRAINT or BS_ERR_FATAL (NULL or "" give
 * BS_ERR_FATAL: the caller decides from the connection state). Pure.
 */
bs_status bs_classify_sqlstate(const char *sqlstate);

/*
 * bs_sqlstate_schema_suspect - 1 if a server error with @sqlstate may
 * come from a schema other than the one this program was built for (an
 * undefined table, column, function or object, a missing schema, a
 * cached plan whose table changed: SQLSTATE class 42, class 3F, 0A000),
 * else 0 (NULL or "" give 0). Such errors are BS_ERR_FATAL for the
 * statement; a caller that retries should check the schema version
 * (bs_schema_require) before it does. Pure.
 */
int bs_sqlstate_schema_suspect(const char *sqlstate);

/* bs_error_set - fill @err (may be NULL); returns @st. printf-style. */
bs_status bs_error_set(bs_error *err, bs_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Reconnection policy: @attempts tries, sleeping initial_ms, doubling up to max_ms. */
typedef struct bs_retry {
    int attempts;   /* 1..100; 0 means the default (5) */
    int initial_ms; /* first pause; 0 means the default (200) */
    int max_ms;     /* longest pause; 0 means the default (5000) */
} bs_retry;

/* One connection to the store. Opaque. */
typedef struct bs_conn bs_conn;

/*
 * bs_conninfo - the connection string to use: @option when non-NULL and
 * non-empty (the --db option), else $BILLING_PG_CONNINFO when set, else ""
 * (libpq then reads PGHOST, PGPORT, PGDATABASE, PGUSER...). Static or
 * borrowed string; do not free.
 */
const char *bs_conninfo(const char *option);

/*
 * bs_connect - connect with @conninfo (a libpq keyword=value string or
 * URI), retrying refused or failed connections per @retry (NULL: the
 * defaults). The session uses client_encoding UTF8 and UTC. Returns a new
 * handle (free with bs_close) or NULL with @err filled. Blocks.
 */
bs_conn *bs_connect(const char *conninfo, const bs_retry *retry, bs_error *err);

/* bs_close - close and free; NULL is a no-op. */
void bs_close(bs_conn *c);

/*
 * bs_pg - the underlying libpq connection, for store modules and tests
 * (tests/check-links.sh refuses it in billing/ and billingd/). Owned by @c; valid until bs_close or a reconnect.
 */
PGconn *bs_pg(bs_conn *c);

/* bs_up - whether @c's connection is up, as far as libpq knows (no round trip). */
int bs_up(bs_conn *c);

/*
 * bs_where - "database D on H port P (PostgreSQL M.m)" for @c, into @buf
 * (@size bytes, truncated to fit).
 */
void bs_where(bs_conn *c, char *buf, size_t size);

/* bs_conn_message - libpq's last message on @c (never NULL; valid until the next call on @c). */
const char *bs_conn_message(bs_conn *c);

/*
 * bs_listen - LISTEN on the notification channel @channel (an identifier
 * of letters, digits and underscores, else BS_ERR_FATAL), so that
 * bs_notified sees what is sent on it. Returns BS_OK or the error.
 */
bs_status bs_listen(bs_conn *c, const char *channel, bs_error *err);

/*
 * bs_notified - take what the server sent on @c without blocking and drop
 * the notifications received: their count (0 when none), or -1 when the
 * connection is gone. Reads until nothing more is waiting (at most a few
 * reads), because a terminated backend sends an error and then its end
 * and one read may see the first only.
 */
int bs_notified(bs_conn *c);

/*
 * bs_reconnect - re-establish a broken connection (PQreset) with the
 * handle's retry policy. Prepared statements and temporary tables are
 * lost and re-created on demand. Returns BS_OK or BS_ERR_RETRY.
 */
bs_status bs_reconnect(bs_conn *c, bs_error *err);

/*
 * bs_sessions - how many server sessions @c has had: 1 once connected,
 * one more after each reconnect (bs_reconnect, or the reconnect inside
 * bs_transaction). A change tells a caller that whatever it checked on
 * the old session (the schema version, LISTEN) must be checked again.
 * Not thread-safe with a thread using @c.
 */
unsigned long bs_sessions(const bs_conn *c);

/* Most parameters in one statement (the protocol's own limit is 65535). */
#define BS_MAX_PARAMS 32767

/*
 * bs_query - run one parameterized statement (@nparams text parameters,
 * NULL entries are SQL NULL; at most BS_MAX_PARAMS) and return its result (caller
 * frees with PQclear): tuples or a command status. NULL on failure with
 * @err filled and classified.
 */
PGresult *bs_query(bs_conn *c, const char *sql, int nparams, const char *const *params,
                   bs_error *err);

/* Longest statement name, and most names prepared on one connection. */
#define BS_NAME_MAX 63
#define BS_MAX_PREPARED 64

/*
 * bs_prepare - prepare @sql as @name on this connection unless it already
 * is (again after a reconnect). The same @name must always come with the
 * same @sql. Returns BS_OK or an error.
 */
bs_status bs_prepare(bs_conn *c, const char *name, const char *sql, int nparams, bs_error *err);

/* bs_query_prepared - bs_prepare, then bs_query through the prepared statement. */
PGresult *bs_query_prepared(bs_conn *c, const char *name, const char *sql, int nparams,
                            const char *const *params, bs_error *err);

/* bs_command - bs_query discarding the result; *@affected (may be NULL) gets the row count. */
bs_status bs_command(bs_conn *c, const char *sql, int nparams, const char *const *params,
                     int64_t *affected, bs_error *err);

/*
 * bs_text_array - the @n strings of @items as a PostgreSQL text[] literal
 * ("{\"a\",\"b\"}", each element quoted, '"' and '\\' escaped), to pass as
 * one parameter. Returns a malloc'd string (caller frees) or NULL when out
 * of memory or when the literal would exceed BS_TEXT_ARRAY_MAX bytes.
 * Thread-safe.
 */
#define BS_TEXT_ARRAY_MAX (64u * 1024 * 1024)
char *bs_text_array(const char *const *items, size_t n);

/*
 * bs_text_array_distinct - bs_text_array of the distinct strings of the
 * @n sorted @items (equal strings adjacent): repeats are first dropped by
 * compacting @items in place. Returns a malloc'd string or NULL, as
 * bs_text_array.
 */
char *bs_text_array_distinct(const char **items, size_t n);

/*
 * bs_strings_index - number the distinct strings of the @n @items in the
 * order they first appear: @index[i] gets item i's number, @distinct[j]
 * the first item numbered j (both arrays of @n, caller's). Returns the
 * count of distinct strings, or (size_t)-1 when out of memory. One hash
 * lookup per item: cheaper than a sort of all @n by strcmp when there
 * are few distinct strings, which then can be sorted alone.
 */
size_t bs_strings_index(const char *const *items, size_t n, size_t *index, const char **distinct);

/*
 * bs_int64_text - @v in decimal (a '-' first when negative) at @p, which
 * has room for BS_INT64_TEXT_MAX bytes; returns the end (no NUL written).
 * The digits of snprintf's "%" PRId64, without its cost per call.
 */
#define BS_INT64_TEXT_MAX 20
char *bs_int64_text(char *p, int64_t v);

/*
 * bs_exec_script - run a multi-statement script without parameters
 * (simple query protocol). Only for constant SQL shipped with the program
 * (the embedded migrations); never for text built from input.
 */
bs_status bs_exec_script(bs_conn *c, const char *sql, bs_error *err);

/* Transactions. bs_rollback never fails visibly (a broken connection has none to roll back). */
bs_status bs_begin(bs_conn *c, bs_error *err);
bs_status bs_commit(bs_conn *c, bs_error *err);
void bs_rollback(bs_conn *c);

/* bs_in_transaction - non-zero while a transaction block is open on @c. */
int bs_in_transaction(bs_conn *c);

/* Work done inside bs_transaction; returns BS_OK or an error (with @err filled). */
typedef bs_status (*bs_txfn)(bs_conn *c, void *arg, bs_error *err);

/*
 * bs_transaction - BEGIN, @fn, COMMIT; on BS_ERR_RETRY (from @fn or the
 * COMMIT) roll back, pause with backoff, reconnect if needed and run it
 * again, up to the handle's retry attempts. @fn must therefore read what
 * it depends on inside the transaction and have no effect outside the
 * database. A connection lost during COMMIT leaves the outcome unknown:
 * the retried @fn must find out (our callers do: dedupe and stored
 * offsets make the rerun a no-op). Returns BS_OK or the last error.
 */
bs_status bs_transaction(bs_conn *c, bs_txfn fn, void *arg, bs_error *err);

/*
 * Pipelines (libpq pipeline mode): queue many statements, one network
 * round trip per window of BS_PIPELINE_WINDOW statements instead of one
 * each. Use inside a transaction (bs_begin) so that an error aborts all.
 * A named statement must have been bs_prepare'd before bs_pipeline_begin
 * (NULL @name sends @sql unnamed, parsed each time).
 *
 *   bs_prepare(c, "ins_rate", SQL, n, &err);
 *   bs_pipeline_begin(c, &err);
 *   for (...) bs_pipeline_send(c, "ins_rate", SQL, n, params, &counts[i], &err);
 *   bs_pipeline_end(c, &err);  -- first error of any statement, or BS_OK
 *
 * After the first failure (of a send, or of a statement whose result has
 * been read) further sends are skipped and return it, and bs_pipeline_end
 * always reports it, so checking only bs_pipeline_end is enough; the
 * transaction is then aborted (roll it back).
 * *@affected (may be NULL) receives the statement's row count once its
 * result has been read, at the latest by bs_pipeline_end, so it must stay
 * valid until then.
 */
#define BS_PIPELINE_WINDOW 256
bs_status bs_pipeline_begin(bs_conn *c, bs_error *err);
bs_status bs_pipeline_send(bs_conn *c, const char *name, const char *sql, int nparams,
                           const char *const *params, int64_t *affected, bs_error *err);
bs_status bs_pipeline_end(bs_conn *c, bs_error *err);

/* bs_sleep_ms - pause (used by the retry loops; exposed for tests and tools). */
void bs_sleep_ms(int ms);

#endif /* BILLING_STORE_STORE_H */
