/*
 * events.c - event ingestion with permanent dedupe, dead letters,
 * Kafka positions. See events.h and doc/database.md.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"

/*
 * The staging table lives in the session; ON COMMIT DELETE ROWS empties
 * it at every commit, so it never carries rows from one batch to the
 * next. IF NOT EXISTS: it may have been created by an earlier batch of
 * this session, or lost with a rolled-back transaction or a reconnect.
 */
#define SQL_STAGE_CREATE                                                                       \
    "CREATE TEMP TABLE IF NOT EXISTS billing_event_stage ("                                    \
    " seq integer NOT NULL, event_id text NOT NULL, account_id text NOT NULL,"                 \
    " resource_id text NOT NULL, meter text NOT NULL,"                                         \
    " start_time timestamptz NOT NULL, start_nanos smallint NOT NULL,"                         \
    " end_time timestamptz NOT NULL, end_nanos smallint NOT NULL,"                             \
    " quantity numeric NOT NULL, model text NOT NULL, region text NOT NULL,"                   \
    " source text NOT NULL"                                                                    \
    ") ON COMMIT DELETE ROWS"
/* Empty unless an earlier batch of this transaction used it: DELETE is then cheapest. */
#define SQL_STAGE_CLEAR "DELETE FROM pg_temp.billing_event_stage"
#define STAGE_COLUMNS 13
#define SQL_STAGE_COPY_BINARY                                                                  \
    "COPY pg_temp.billing_event_stage (seq, event_id, account_id, resource_id, meter,"        \
    " start_time, start_nanos, end_time, end_nanos, quantity, model, region, source)"         \
    " FROM STDIN (FORMAT binary)"
#define SQL_STAGE_COPY_TEXT                                                                    \
    "COPY pg_temp.billing_event_stage (seq, event_id, account_id, resource_id, meter,"        \
    " start_time, start_nanos, end_time, end_nanos, quantity, model, region, source)"         \
    " FROM STDIN (FORMAT text)"

/*
 * received_at is the moment the row is written (clock_timestamp(), not the
 * transaction's start), so that it measures how long an event waited.
 *
 * One statement moves the batch: the first occurrence of each id claims
 * it in event_ids (ON CONFLICT DO NOTHING waits for a concurrent claimer
 * and then yields to it), and only claimed events go to usage_events. It
 * returns the staged rows that were not stored: usually none, which is
 * cheaper to find with an anti-join than by marking the stored ones. The
 * anti-join is written as a LEFT JOIN so that it is hashed: the
 * correlated NOT EXISTS over the two CTEs it replaces was planned as a
 * nested loop, quadratic in the batch (750 ms for 5 000 rows).
 */
#define SQL_MOVE                                                                               \
    "WITH firsts AS ("                                                                         \
    "  SELECT DISTINCT ON (event_id) seq, event_id, account_id, resource_id, meter,"          \
    "    start_time, start_nanos, end_time, end_nanos, quantity, model, region, source,"       \
    "    billing.event_fingerprint(account_id, resource_id, meter, start_time, start_nanos,"   \
    "      end_time, end_nanos, quantity, model, region) AS fp"                                \
    "  FROM pg_temp.billing_event_stage ORDER BY event_id, seq),"                              \
    " ids AS ("                                                                                \
    "  INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"                      \
    "  SELECT event_id, start_time, fp FROM firsts"                                            \
    "  ON CONFLICT (event_id) DO NOTHING RETURNING event_id),"                                 \
    " ins AS ("                                                                                \
    "  INSERT INTO billing.usage_events (event_id, account_id, resource_id, meter,"           \
    "    start_time, start_nanos, end_time, end_nanos, quantity, model, region, source,"       \
    "    received_at)"                                                                         \
    "  SELECT f.event_id, f.account_id, f.resource_id, f.meter, f.start_time, f.start_nanos," \
    "    f.end_time, f.end_nanos, f.quantity, f.model, f.region, f.source, clock_timestamp()"  \
    "  FROM firsts f JOIN ids USING (event_id) RETURNING event_id)"                            \
    " SELECT s.seq FROM pg_temp.billing_event_stage s LEFT JOIN"                               \
    " (SELECT f.seq FROM ins JOIN firsts f USING (event_id)) k USING (seq) WHERE k.seq IS NULL"

/*
 * The rows not stored ($1: their seqs, an integer array): same content as
 * what is now stored under their id, or not.
 */
#define SQL_NOT_STORED                                                                         \
    "SELECT s.seq, e.fingerprint = billing.event_fingerprint(s.account_id, s.resource_id,"     \
    " s.meter, s.start_time, s.start_nanos, s.end_time, s.end_nanos, s.quantity, s.model,"     \
    " s.region)"                                                                               \
    " FROM pg_temp.billing_event_stage s JOIN billing.event_ids e USING (event_id)"            \
    " WHERE s.seq = ANY ($1::integer[])"

#define SQL_REJECT                                                                             \
    "INSERT INTO billing.rejected_events (source, kafka_topic, kafka_partition, kafka_offset," \
    " event_id, reason_code, reason, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea)"

#define SQL_OFFSET_GET                                                                         \
    "SELECT next_offset FROM billing.kafka_offsets"                                            \
    " WHERE consumer_group = $1 AND topic = $2 AND partition = $3"
#define SQL_OFFSET_INSERT                                                                      \
    "INSERT INTO billing.kafka_offsets (consumer_group, topic, partition, next_offset)"        \
    " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
#define SQL_OFFSET_UPDATE                                                                      \
    "UPDATE billing.kafka_offsets SET next_offset = $4, updated_at = now()"                   \
    " WHERE consumer_group = $1 AND topic = $2 AND partition = $3 AND next_offset = $5"

#define SQL_PARTITIONS                                                                         \
    "SELECT billing.ensure_event_partitions("                                                  \
    " (date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => $1::integer))::date," \
    " (date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => $2::integer))::date)"
#define PARTITION_MONTHS_MAX 60

#define REJECT_PAYLOAD_MAX (1024u * 1024u)

static const char *or_empty(const char *s)
{
    return s != NULL ? s : "";
}

/* Write one event as a staging row. */
static void stage_row(bs_copy *cp, const bs_event *e, size_t seq)
{
    bs_copy_row(cp);
    bs_copy_int4(cp, (int32_t)seq);
    bs_copy_text(cp, e->id);
    bs_copy_text(cp, e->account);
    bs_copy_text(cp, e->resource);
    bs_copy_text(cp, e->meter);
    bs_copy_timestamptz(cp, e->start);
    bs_copy_int2(cp, (int16_t)bs_time_nanos(e->start));
    bs_copy_timestamptz(cp, e->end);
    bs_copy_int2(cp, (int16_t)bs_time_nanos(e->end));
    bs_copy_numeric(cp, e->quantity);
    bs_copy_text(cp, or_empty(e->model));
    bs_copy_text(cp, or_empty(e->region));
    bs_copy_text(cp, or_empty(e->source));
}

static bs_status stage(bs_conn *c, const bs_event *ev, size_t n, bs_copy_format format,
                       bs_error *err)
{
    bs_copy *cp;
    size_t i;
    bs_status st = bs_pipeline_begin(c, err);

    /* Two small statements, one round trip; bs_pipeline_end reports either's failure. */
    if (st != BS_OK)
        return st;
    bs_pipeline_send(c, NULL, SQL_STAGE_CREATE, 0, NULL, NULL, NULL);
    bs_pipeline_send(c, NULL, SQL_STAGE_CLEAR, 0, NULL, NULL, NULL);
    st = bs_pipeline_end(c, err);
    if (st != BS_OK)
        return st;
    cp = bs_copy_begin(c, format == BS_COPY_TEXT ? SQL_STAGE_COPY_TEXT : SQL_STAGE_COPY_BINARY,
                       STAGE_COLUMNS, format, err);
    if (cp == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < n; i++)
        stage_row(cp, &ev[i], i);
    return bs_copy_end(cp, NULL, err);
}

/*
 * seq_array - "{3,17,42}" of the seqs in column 0 of @rows: an integer
 * array literal (digits and commas only). Returns a malloc'd string or NULL.
 */
static char *seq_array(const PGresult *rows)
{
    int n = PQntuples(rows);
    size_t size = (size_t)n * 12 + 3;
    char *s = malloc(size);
    size_t len = 1;
    int i;

    if (s == NULL)
        return NULL;
    s[0] = '{';
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, size - len, "%s%ld", i > 0 ? "," : "",
                                strtol(PQgetvalue(rows, i, 0), NULL, 10));
    snprintf(s + len, size - len, "}");
    return s;
}

/* Mark the events listed in @rows (not stored) as duplicates or conflicts. */
static bs_status classify_rest(bs_conn *c, const PGresult *rows, size_t n, bs_event_outcome *out,
                               bs_error *err)
{
    char *seqs = seq_array(rows);
    const char *params[1];
    PGresult *res;
    long seq;
    int i;

    if (seqs == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "bs_events_ingest: out of memory");
    params[0] = seqs;
    res = bs_query(c, SQL_NOT_STORED, 1, params, err);
    free(seqs);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < PQntuples(res); i++) {
        seq = strtol(PQgetvalue(res, i, 0), NULL, 10);
        if (seq < 0 || (size_t)seq >= n)
            continue;
        out[seq] = strcmp(PQgetvalue(res, i, 1), "t") == 0 ? BS_EVENT_DUPLICATE
                                                           : BS_EVENT_CONFLICT;
    }
    PQclear(res);
    return BS_OK;
}

bs_status bs_events_ingest(bs_conn *c, const bs_event *ev, size_t n, bs_copy_format format,
                           bs_event_outcome *out, size_t *n_new, bs_error *err)
{
    PGresult *rest = NULL;
    size_t i;
    bs_status st;

    if (n_new != NULL)
        *n_new = 0;
    if (c == NULL || ev == NULL || out == NULL || n == 0 || n > BS_EVENTS_BATCH_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "bs_events_ingest: 1..%d events needed",
                            BS_EVENTS_BATCH_MAX);
    if (!bs_in_transaction(c))
        return bs_error_set(err, BS_ERR_INVALID,
                            "bs_events_ingest must run inside a transaction");
    for (i = 0; i < n; i++)
        out[i] = BS_EVENT_NEW;
    st = stage(c, ev, n, format, err);
    if (st == BS_OK) {
        rest = bs_query(c, SQL_MOVE, 0, NULL, err);
        if (rest == NULL)
            st = err != NULL ? err->status : BS_ERR_FATAL;
    }
    if (st == BS_OK && PQntuples(rest) > 0)
        st = classify_rest(c, rest, n, out, err);
    if (st == BS_OK && n_new != NULL)
        *n_new = n - (size_t)PQntuples(rest);
    PQclear(rest);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Dead letters                                                            */
/* ---------------------------------------------------------------------- */

/* "\x" followed by the hex of @data: bytea's text input. Caller frees. */
static char *bytea_hex(const void *data, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = data;
    char *s = malloc(2 * len + 3);
    size_t i;

    if (s == NULL)
        return NULL;
    s[0] = '\\';
    s[1] = 'x';
    for (i = 0; i < len; i++) {
        s[2 + 2 * i] = hex[p[i] >> 4];
        s[3 + 2 * i] = hex[p[i] & 15];
    }
    s[2 + 2 * len] = '\0';
    return s;
}

bs_status bs_reject(bs_conn *c, const bs_rejection *r, bs_error *err)
{
    char partition[16];
    char offset[24];
    const char *params[8];
    char *payload;
    bs_status st;

    if (r == NULL || r->source == NULL || r->reason_code == NULL || r->reason == NULL ||
        (r->payload == NULL && r->payload_len > 0) || r->payload_len > REJECT_PAYLOAD_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "bs_reject: incomplete rejection or payload "
                                                 "over 1 MiB");
    payload = bytea_hex(r->payload, r->payload_len);
    if (payload == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "bs_reject: out of memory");
    snprintf(partition, sizeof(partition), "%" PRId32, r->kafka_partition);
    snprintf(offset, sizeof(offset), "%" PRId64, r->kafka_offset);
    params[0] = r->source;
    params[1] = r->kafka_topic;
    params[2] = r->kafka_topic != NULL ? partition : NULL;
    params[3] = r->kafka_topic != NULL ? offset : NULL;
    params[4] = r->event_id;
    params[5] = r->reason_code;
    params[6] = r->reason;
    params[7] = payload;
    st = bs_command(c, SQL_REJECT, 8, params, NULL, err);
    free(payload);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Kafka positions                                                         */
/* ---------------------------------------------------------------------- */

bs_status bs_offset_get(bs_conn *c, const char *group, const char *topic, int32_t partition,
                        int64_t *next, int *found, bs_error *err)
{
    char part[16];
    const char *params[3];
    PGresult *res;

    *next = -1;
    *found = 0;
    snprintf(part, sizeof(part), "%" PRId32, partition);
    params[0] = group;
    params[1] = topic;
    params[2] = part;
    res = bs_query(c, SQL_OFFSET_GET, 3, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (PQntuples(res) == 1) {
        *next = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        *found = 1;
    }
    PQclear(res);
    return BS_OK;
}

bs_status bs_offset_put(bs_conn *c, const char *group, const char *topic, int32_t partition,
                        int64_t expected, int64_t next, bs_error *err)
{
    char part[16];
    char next_s[24];
    char expected_s[24];
    const char *params[5];
    int64_t affected = 0;
    bs_status st;

    snprintf(part, sizeof(part), "%" PRId32, partition);
    snprintf(next_s, sizeof(next_s), "%" PRId64, next);
    snprintf(expected_s, sizeof(expected_s), "%" PRId64, expected);
    params[0] = group;
    params[1] = topic;
    params[2] = part;
    params[3] = next_s;
    params[4] = expected_s;
    if (expected < 0)
        st = bs_command(c, SQL_OFFSET_INSERT, 4, params, &affected, err);
    else
        st = bs_command(c, SQL_OFFSET_UPDATE, 5, params, &affected, err);
    if (st != BS_OK)
        return st;
    if (affected != 1)
        return bs_error_set(err, BS_ERR_RETRY,
                            "position of %s/%s/%" PRId32 " is no longer %" PRId64
                            ": another consumer moved it",
                            group, topic, partition, expected);
    return BS_OK;
}

/* ---------------------------------------------------------------------- */
/* Partitions                                                              */
/* ---------------------------------------------------------------------- */

bs_status bs_event_partitions(bs_conn *c, int months_back, int months_ahead, int *created,
                              bs_error *err)
{
    char back[16];
    char ahead[16];
    const char *params[2];
    PGresult *res;

    if (months_back < 0 || months_back > PARTITION_MONTHS_MAX || months_ahead < 0 ||
        months_ahead > PARTITION_MONTHS_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "partition months must be 0..%d",
                            PARTITION_MONTHS_MAX);
    snprintf(back, sizeof(back), "%d", months_back);
    snprintf(ahead, sizeof(ahead), "%d", months_ahead);
    params[0] = back;
    params[1] = ahead;
    res = bs_query(c, SQL_PARTITIONS, 2, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (created != NULL)
        *created = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return BS_OK;
}
