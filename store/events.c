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
#include "load.h"
#include "md5.h"

/*
 * The staging table lives in the session; ON COMMIT DELETE ROWS empties
 * it at every commit, so it never carries rows from one batch to the
 * next. IF NOT EXISTS: it may have been created by an earlier batch of
 * this session, or lost with a rolled-back transaction or a reconnect.
 * fp is the content fingerprint, computed here (event_fingerprint).
 */
#define SQL_STAGE_CREATE                                                       \
    "CREATE TEMP TABLE IF NOT EXISTS billing_event_stage ("                    \
    " seq integer NOT NULL, event_id text NOT NULL, account_id text NOT NULL," \
    " resource_id text NOT NULL, meter text NOT NULL,"                         \
    " start_time timestamptz NOT NULL, start_nanos smallint NOT NULL,"         \
    " end_time timestamptz NOT NULL, end_nanos smallint NOT NULL,"             \
    " quantity numeric NOT NULL, model text NOT NULL, region text NOT NULL,"   \
    " source text NOT NULL, fp bytea NOT NULL"                                 \
    ") ON COMMIT DELETE ROWS"
/* Empty unless an earlier batch of this transaction used it: DELETE is then cheapest. */
#define SQL_STAGE_CLEAR "DELETE FROM pg_temp.billing_event_stage"
#define STAGE_COLUMNS 14
#define STAGE_COLUMN_LIST                                                                 \
    " (seq, event_id, account_id, resource_id, meter, start_time, start_nanos, end_time," \
    " end_nanos, quantity, model, region, source, fp)"
#define SQL_STAGE_COPY_BINARY \
    "COPY pg_temp.billing_event_stage" STAGE_COLUMN_LIST " FROM STDIN (FORMAT binary)"
#define SQL_STAGE_COPY_TEXT \
    "COPY pg_temp.billing_event_stage" STAGE_COLUMN_LIST " FROM STDIN (FORMAT text)"

/*
 * What the raw event tables no longer check per row (0007_lean_events.sql),
 * checked once per batch: the account exists (a hashed anti-join instead
 * of a foreign-key query per row; an account of billing.accounts is a
 * valid identifier) and the lengths of the text columns. Returns the first
 * offending row, if any, with the name of the rule it breaks.
 */
#define SQL_CHECK                                                                               \
    "SELECT s.event_id, CASE"                                                                   \
    "  WHEN octet_length(s.event_id) NOT BETWEEN 1 AND 128 THEN 'usage_events_event_id_length'" \
    "  WHEN octet_length(s.resource_id) NOT BETWEEN 1 AND 128"                                  \
    "   THEN 'usage_events_resource_id_length'"                                                 \
    "  WHEN octet_length(s.model) > 64 OR octet_length(s.region) > 64"                          \
    "   THEN 'usage_events_attr_length'"                                                        \
    "  ELSE 'usage_events_account_known' END"                                                   \
    " FROM pg_temp.billing_event_stage s LEFT JOIN billing.accounts a ON a.id = s.account_id"   \
    " WHERE a.id IS NULL OR octet_length(s.event_id) NOT BETWEEN 1 AND 128"                     \
    "  OR octet_length(s.resource_id) NOT BETWEEN 1 AND 128"                                    \
    "  OR octet_length(s.model) > 64 OR octet_length(s.region) > 64"                            \
    " ORDER BY s.seq LIMIT 1"

/*
 * received_at is the moment the row is written (clock_timestamp(), not the
 * transaction's start), so that it measures how long an event waited.
 *
 * One statement moves the batch: the first occurrence of each id claims
 * its hash in event_ids (ON CONFLICT DO NOTHING waits for a concurrent
 * claimer and then yields to it), and only claimed events go to
 * usage_events. It returns the staged rows that were not stored: usually
 * none, which is cheaper to find with an anti-join than by marking the
 * stored ones. The anti-join is written as a LEFT JOIN so that it is
 * hashed: the correlated NOT EXISTS over the two CTEs it replaces was
 * planned as a nested loop, quadratic in the batch (750 ms for 5 000 rows).
 * An id whose hash another id holds is not stored here: see SQL_NOT_STORED.
 */
#define EVENT_COLUMNS                                                                         \
    "event_id, account_id, resource_id, meter, start_time, start_nanos, end_time, end_nanos," \
    " quantity, model, region, source"
#define SQL_MOVE_FROM(ids_table, conflict, firsts_where)                           \
    "WITH firsts AS ("                                                             \
    "  SELECT DISTINCT ON (event_id) seq, " EVENT_COLUMNS ", fp"                   \
    "  FROM pg_temp.billing_event_stage " firsts_where " ORDER BY event_id, seq)," \
    " ids AS ("                                                                    \
    "  INSERT INTO billing." ids_table " (event_id, start_time, fingerprint)"      \
    "  SELECT event_id, start_time, fp FROM firsts"                                \
    "  ON CONFLICT (" conflict ") DO NOTHING RETURNING event_id),"                 \
    " ins AS ("                                                                    \
    "  INSERT INTO billing.usage_events (" EVENT_COLUMNS ", received_at)"          \
    "  SELECT " EVENT_COLUMNS ", clock_timestamp()"                                \
    "  FROM firsts f JOIN ids USING (event_id) RETURNING event_id)"
#define SQL_MOVE                                                 \
    SQL_MOVE_FROM("event_ids", "id_hash", "")                    \
    " SELECT s.seq FROM pg_temp.billing_event_stage s LEFT JOIN" \
    " (SELECT f.seq FROM ins JOIN firsts f USING (event_id)) k USING (seq) WHERE k.seq IS NULL"

/*
 * The rows not stored ($1: their seqs, an integer array): is their id the
 * one that holds its hash (then the row is a duplicate if its content is
 * the same, else a conflict), or in the collision table (same), or neither
 * (its hash is another id's: the row must be stored as a collision)?
 * Columns: seq, 'd'uplicate / 'c'onflict / 'n'ew collision.
 */
#define SQL_NOT_STORED                                                                         \
    "SELECT s.seq, CASE"                                                                       \
    "  WHEN e.event_id = s.event_id THEN CASE WHEN e.fingerprint = s.fp THEN 'd' ELSE 'c' END" \
    "  WHEN x.event_id IS NOT NULL THEN CASE WHEN x.fingerprint = s.fp THEN 'd' ELSE 'c' END"  \
    "  ELSE 'n' END"                                                                           \
    " FROM pg_temp.billing_event_stage s"                                                      \
    " JOIN billing.event_ids e ON e.id_hash = decode(md5(s.event_id), 'hex')"                  \
    " LEFT JOIN billing.event_id_collisions x ON x.event_id = s.event_id"                      \
    " WHERE s.seq = ANY ($1::integer[])"

/* Store the colliding ids among the rows $1 as SQL_MOVE does; returns the seqs stored. */
#define SQL_MOVE_COLLISIONS                                                             \
    SQL_MOVE_FROM("event_id_collisions", "event_id", "WHERE seq = ANY ($1::integer[])") \
    " SELECT f.seq FROM ins JOIN firsts f USING (event_id)"

/* Rounds of collision storing: each stores at least one row, so a batch needs few. */
#define COLLISION_ROUNDS_MAX 8

#define SQL_REJECT                                                                             \
    "INSERT INTO billing.rejected_events (source, kafka_topic, kafka_partition, kafka_offset," \
    " event_id, reason_code, reason, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea)"

#define SQL_OFFSET_GET                              \
    "SELECT next_offset FROM billing.kafka_offsets" \
    " WHERE consumer_group = $1 AND topic = $2 AND partition = $3"
#define SQL_OFFSET_INSERT                                                               \
    "INSERT INTO billing.kafka_offsets (consumer_group, topic, partition, next_offset)" \
    " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
#define SQL_OFFSET_UPDATE                                                   \
    "UPDATE billing.kafka_offsets SET next_offset = $4, updated_at = now()" \
    " WHERE consumer_group = $1 AND topic = $2 AND partition = $3 AND next_offset = $5"

#define SQL_PARTITIONS                                                           \
    "SELECT billing.ensure_event_partitions("                                    \
    " (date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => " \
    "$1::integer))::date,"                                                       \
    " (date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => " \
    "$2::integer))::date)"
#define PARTITION_MONTHS_MAX 60

#define REJECT_PAYLOAD_MAX (1024u * 1024u)

static const char *or_empty(const char *s)
{
    return s != NULL ? s : "";
}

/* Longest canonical content: the bounded fields (2 x 128, 2 x 64), a decimal, numbers. */
#define CANONICAL_MAX (2 * 128 + 2 * 64 + BS_DECIMAL_MAX + 256)

/* Append @n bytes of @s at *@p if they fit before @end; -1 if not. */
static int put_bytes(char **p, const char *end, const char *s, size_t n)
{
    if ((size_t)(end - *p) < n)
        return -1;
    memcpy(*p, s, n);
    *p += n;
    return 0;
}

/* Append @v in decimal and a '|' at *@p if they fit before @end; -1 if not. */
static int put_number(char **p, const char *end, int64_t v)
{
    char num[BS_INT64_TEXT_MAX + 1];
    char *q = bs_int64_text(num, v);

    *q++ = '|';
    return put_bytes(p, end, num, (size_t)(q - num));
}

/* Append @s's length, '|', @s and a '|' at *@p (the `%zu|%s|` of a field); -1 if over. */
static int put_sized(char **p, const char *end, const char *s)
{
    size_t n = strlen(s);

    return put_number(p, end, (int64_t)n) != 0 || put_bytes(p, end, s, n) != 0 ||
                   put_bytes(p, end, "|", 1) != 0
               ? -1
               : 0;
}

int bs_event_fingerprint(const bs_event *e, unsigned char fp[BS_MD5_LEN])
{
    char text[CANONICAL_MAX];
    char qty[BS_DECIMAL_MAX + 2];
    const char *end = text + sizeof(text) - 1;
    char *p = text;
    size_t n;

    if (bs_decimal_canonical(e->quantity, qty, sizeof(qty)) != 0)
        return -1;
    /*
     * billing.event_fingerprint's concat_ws('|', ...), field for field:
     * "%zu|%s|%zu|%s|%s|%lld|%d|%lld|%d|%s|%zu|%s|%zu|%s", written by hand
     * (snprintf was a few percent of billingd's CPU).
     */
    n = strlen(e->meter);
    if (put_sized(&p, end, e->account) != 0 || put_sized(&p, end, e->resource) != 0 ||
        put_bytes(&p, end, e->meter, n) != 0 || put_bytes(&p, end, "|", 1) != 0 ||
        put_number(&p, end, bs_time_micros(e->start)) != 0 ||
        put_number(&p, end, bs_time_nanos(e->start)) != 0 ||
        put_number(&p, end, bs_time_micros(e->end)) != 0 ||
        put_number(&p, end, bs_time_nanos(e->end)) != 0 ||
        put_bytes(&p, end, qty, strlen(qty)) != 0 || put_bytes(&p, end, "|", 1) != 0 ||
        put_sized(&p, end, or_empty(e->model)) != 0)
        return -1;
    n = strlen(or_empty(e->region));
    if (put_number(&p, end, (int64_t)n) != 0 || put_bytes(&p, end, or_empty(e->region), n) != 0)
        return -1;
    bs_md5(text, (size_t)(p - text), fp);
    return 0;
}

/* The EVENT_COLUMNS of @e, in their order (a row already begun). */
static void copy_event_columns(bs_copy *cp, const bs_event *e)
{
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

/* Write one event as a staging row; -1 if its content cannot be fingerprinted. */
static int stage_row(bs_copy *cp, const bs_event *e, size_t seq)
{
    unsigned char fp[BS_MD5_LEN];

    if (bs_event_fingerprint(e, fp) != 0)
        return -1;
    bs_copy_row(cp);
    bs_copy_int4(cp, (int32_t)seq);
    copy_event_columns(cp, e);
    bs_copy_bytea(cp, fp, sizeof(fp));
    return 0;
}

/* Every event has the fields the fingerprint and the staging table need. */
static int complete(const bs_event *e)
{
    return e->id != NULL && e->account != NULL && e->resource != NULL && e->meter != NULL &&
           e->quantity != NULL;
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
    for (i = 0; i < n; i++) {
        if (!complete(&ev[i]) || stage_row(cp, &ev[i], i) != 0) {
            bs_copy_abort(cp);
            return bs_error_set(err, BS_ERR_INVALID,
                                "bs_events_ingest: event %zu ('%.128s'): a field missing or"
                                " too long, or the quantity not a decimal",
                                i, ev[i].id != NULL ? ev[i].id : "?");
        }
    }
    return bs_copy_end(cp, NULL, err);
}

/* The batch-wide rules of SQL_CHECK: BS_ERR_CONSTRAINT naming the rule and the event. */
static bs_status check_batch(bs_conn *c, bs_error *err)
{
    PGresult *res = bs_query(c, SQL_CHECK, 0, NULL, err);
    bs_status st = BS_OK;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (PQntuples(res) > 0) {
        st = bs_error_set(err, BS_ERR_CONSTRAINT,
                          "event '%.128s' refused by %s (no such account, or a field too long)",
                          PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
        if (err != NULL)
            snprintf(err->constraint, sizeof(err->constraint), "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return st;
}

/*
 * seq_array - "{3,17,42}" of the @n seqs at @seqs: an integer array
 * literal (digits and commas only). Returns a malloc'd string or NULL.
 */
static char *seq_array(const long *seqs, size_t n)
{
    size_t size = n * 21 + 3;
    char *s = malloc(size);
    size_t len = 1;
    size_t i;

    if (s == NULL)
        return NULL;
    s[0] = '{';
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, size - len, "%s%ld", i > 0 ? "," : "", seqs[i]);
    snprintf(s + len, size - len, "}");
    return s;
}

/* Run @sql with the seqs array as $1; NULL on failure (err filled). */
static PGresult *query_seqs(bs_conn *c, const char *sql, const long *seqs, size_t n, bs_error *err)
{
    char *array = seq_array(seqs, n);
    const char *params[1];
    PGresult *res;

    if (array == NULL) {
        bs_error_set(err, BS_ERR_NOMEM, "bs_events_ingest: out of memory");
        return NULL;
    }
    params[0] = array;
    res = bs_query(c, sql, 1, params, err);
    free(array);
    return res;
}

/* Seq of row @i (column 0) if it is one of the batch's @n, else -1. */
static long row_seq(const PGresult *res, int i, size_t n)
{
    long seq = strtol(PQgetvalue(res, i, 0), NULL, 10);

    return seq >= 0 && (size_t)seq < n ? seq : -1;
}

/*
 * Classify the @k rows @seqs not stored by SQL_MOVE as duplicates or
 * conflicts; those whose hash belongs to another id are left in @seqs
 * (new *@k) to be stored as collisions.
 */
static bs_status classify(bs_conn *c, long *seqs, size_t *k, size_t n, bs_event_outcome *out,
                          bs_error *err)
{
    PGresult *res = query_seqs(c, SQL_NOT_STORED, seqs, *k, err);
    const char *kind;
    long seq;
    int i;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    /* One row per seq: id_hash and the collision table's event_id are keys. */
    if ((size_t)PQntuples(res) != *k) {
        PQclear(res);
        return bs_error_set(err, BS_ERR_FATAL,
                            "bs_events_ingest: %zu rows neither stored nor"
                            " found stored",
                            *k);
    }
    *k = 0;
    for (i = 0; i < PQntuples(res); i++) {
        seq = row_seq(res, i, n);
        kind = PQgetvalue(res, i, 1);
        if (seq < 0)
            continue;
        if (kind[0] == 'n')
            seqs[(*k)++] = seq;
        else
            out[seq] = kind[0] == 'd' ? BS_EVENT_DUPLICATE : BS_EVENT_CONFLICT;
    }
    PQclear(res);
    return BS_OK;
}

/* Store the colliding ids among @seqs; drop the stored ones from @seqs (new *@k). */
static bs_status store_collisions(bs_conn *c, long *seqs, size_t *k, size_t n, bs_error *err)
{
    PGresult *res = query_seqs(c, SQL_MOVE_COLLISIONS, seqs, *k, err);
    size_t kept = 0;
    size_t j;
    int i;
    int stored;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (j = 0; j < *k; j++) {
        stored = 0;
        for (i = 0; i < PQntuples(res) && !stored; i++)
            stored = row_seq(res, i, n) == seqs[j];
        if (!stored)
            seqs[kept++] = seqs[j];
    }
    PQclear(res);
    *k = kept;
    return BS_OK;
}

/*
 * The rows SQL_MOVE did not store (@rest): duplicates, conflicts, and
 * (only if someone made two ids with one md5) collisions, stored in rounds
 * until every row is one or the other. *@n_new gets the rows stored.
 */
static bs_status settle_rest(bs_conn *c, const PGresult *rest, size_t n, bs_event_outcome *out,
                             size_t *n_new, bs_error *err)
{
    size_t k = (size_t)PQntuples(rest);
    long *seqs = malloc((k + 1) * sizeof(*seqs));
    size_t before;
    size_t j = 0;
    int round;
    int i;
    bs_status st = BS_OK;

    if (seqs == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "bs_events_ingest: out of memory");
    for (i = 0; i < PQntuples(rest); i++) {
        if (row_seq(rest, i, n) >= 0)
            seqs[j++] = row_seq(rest, i, n);
    }
    k = j;
    *n_new = n - k;
    for (round = 0; st == BS_OK && k > 0; round++) {
        if (round == COLLISION_ROUNDS_MAX) {
            st = bs_error_set(err, BS_ERR_FATAL, "bs_events_ingest: colliding ids unsettled");
            break;
        }
        st = classify(c, seqs, &k, n, out, err);
        before = k;
        if (st == BS_OK && k > 0)
            st = store_collisions(c, seqs, &k, n, err);
        *n_new += before - k;
    }
    free(seqs);
    return st;
}

/* ---------------------------------------------------------------------- */
/* The optimistic claim                                                    */
/* ---------------------------------------------------------------------- */

/*
 * Nearly every batch billingd stores is new ids only. Such a batch needs
 * none of the staging path's work (staging table, first-occurrence sort,
 * ON CONFLICT, anti-join): its first occurrences are COPYed straight into
 * event_ids and usage_events, and repeats within the batch are told apart
 * here, by the md5 of their id (sorting by it also claims the keys in one
 * order on every connection, so two claimers wait for each other but never
 * deadlock). Any id already claimed - a replay, a concurrent claimer that
 * committed first, an md5 collision - makes the COPY fail on event_ids'
 * key: the claim is rolled back to the savepoint taken before it and the
 * batch takes the staging path, which sorts all of that out. So does a
 * batch that the once-per-batch rules (SQL_CHECK) would refuse, so that
 * one path names the rule.
 */
#define SQL_CLAIM_SAVEPOINT "SAVEPOINT bs_events_claim"
#define SQL_CLAIM_RELEASE "RELEASE SAVEPOINT bs_events_claim"
#define SQL_CLAIM_UNDO "ROLLBACK TO SAVEPOINT bs_events_claim"
/* The rows are the batch's distinct accounts ($1, a text array) not in billing.accounts. */
#define SQL_UNKNOWN_ACCOUNTS                  \
    "SELECT 1 FROM unnest($1::text[]) a (id)" \
    " WHERE NOT EXISTS (SELECT 1 FROM billing.accounts x WHERE x.id = a.id)"
#define IDS_COLUMNS 3
#define SQL_IDS_COPY(fmt) \
    "COPY billing.event_ids (event_id, start_time, fingerprint) FROM STDIN (FORMAT " fmt ")"
#define EVENTS_COLUMNS 12
/* received_at: its default, clock_timestamp() since 0008, as SQL_MOVE writes it. */
#define SQL_EVENTS_COPY(fmt) \
    "COPY billing.usage_events (" EVENT_COLUMNS ") FROM STDIN (FORMAT " fmt ")"
/* The server errors that send a claim to the staging path: an id taken, a deadlock. */
#define SQLSTATE_UNIQUE "23505"
#define SQLSTATE_DEADLOCK "40P01"

/* An event of the batch: the md5 of its id, its fingerprint, its place. */
typedef struct claim {
    unsigned char id_hash[BS_MD5_LEN];
    unsigned char fp[BS_MD5_LEN];
    size_t seq;
} claim;

/* The first rows a claim writes are those sorted first: by id hash, then arrival. */
static int claim_order(const void *a, const void *b)
{
    const claim *x = a;
    const claim *y = b;
    int d = memcmp(x->id_hash, y->id_hash, BS_MD5_LEN);

    if (d != 0)
        return d;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The first @bits (1..16) bits of @c's id hash. */
static size_t claim_bucket(const claim *c, unsigned bits)
{
    return (((size_t)c->id_hash[0] << 8) | c->id_hash[1]) >> (16 - bits);
}

static int string_order(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A text of @lo..@hi bytes (NULL counting as ""). */
static int length_within(const char *s, size_t lo, size_t hi)
{
    size_t len = strlen(or_empty(s));

    return len >= lo && len <= hi;
}

/*
 * Every rule SQL_CHECK and stage() apply that C can see (the account's
 * existence is asked of the database): a failure sends the batch to the
 * staging path, which reports it. An account that could be in
 * billing.accounts is 1..128 printable ASCII bytes (billing.ident).
 */
static int claimable(const bs_event *e, claim *cl, size_t seq)
{
    const char *a;

    if (!complete(e) || !length_within(e->id, 1, 128) || !length_within(e->resource, 1, 128) ||
        !length_within(e->model, 0, 64) || !length_within(e->region, 0, 64) ||
        !length_within(e->account, 1, 128) || bs_event_fingerprint(e, cl->fp) != 0)
        return 0;
    for (a = e->account; *a != '\0'; a++) {
        if (*a < '!' || *a > '~')
            return 0;
    }
    bs_md5(e->id, strlen(e->id), cl->id_hash);
    cl->seq = seq;
    return 1;
}

/* Buckets at most a few claims long are put in order by insertion; longer ones by qsort. */
#define CLAIM_BUCKET_INSERTION_MAX 16

/* Sort @cl[@begin, @end) by claim_order: by insertion when short, else qsort. */
static void sort_bucket(claim *cl, size_t begin, size_t end)
{
    claim t;
    size_t i;
    size_t j;

    if (end - begin > CLAIM_BUCKET_INSERTION_MAX) {
        qsort(cl + begin, end - begin, sizeof(*cl), claim_order);
        return;
    }
    for (i = begin + 1; i < end; i++) {
        t = cl[i];
        for (j = i; j > begin && claim_order(&cl[j - 1], &t) > 0; j--)
            cl[j] = cl[j - 1];
        cl[j] = t;
    }
}

/*
 * Sort the @n claims @cl by claim_order, the same order as qsort gives (it
 * is total: seqs differ): spread by the first bits of the id hash (md5 is
 * uniform, about two claims a bucket), then each bucket sorted: 0.5 ms for
 * 20 000 claims where qsort by memcmp took 3.4 to 4.2 ms (doc/performance.md,
 * h49). Falls back to qsort when out of memory.
 */
static void sort_claims(claim *cl, size_t n)
{
    unsigned bits = 1;
    size_t *start;
    claim *tmp;
    size_t i;
    size_t b;
    size_t k;

    while (bits < 16 && ((size_t)1 << (bits + 1)) <= n)
        bits++;
    k = (size_t)1 << bits;
    start = calloc(k + 1, sizeof(*start));
    tmp = malloc((n > 0 ? n : 1) * sizeof(*tmp));
    if (start == NULL || tmp == NULL) {
        qsort(cl, n, sizeof(*cl), claim_order);
        goto out;
    }
    for (i = 0; i < n; i++)
        start[claim_bucket(&cl[i], bits) + 1]++;
    for (b = 0; b < k; b++)
        start[b + 1] += start[b];
    for (i = 0; i < n; i++)
        tmp[start[claim_bucket(&cl[i], bits)]++] = cl[i];
    memcpy(cl, tmp, n * sizeof(*cl));
    /* start[b] is now bucket b's end, the next one's start. */
    for (b = 0; b < k; b++)
        sort_bucket(cl, b > 0 ? start[b - 1] : 0, start[b]);
out:
    free(start);
    free(tmp);
}

/*
 * Sort the batch into @cl by id hash; mark each repeat of an id in @out
 * (duplicate or conflict of its first occurrence). Returns 1, or 0 if the
 * batch must take the staging path (a rule broken, two ids of one md5).
 */
static int plan_claim(const bs_event *ev, size_t n, claim *cl, bs_event_outcome *out)
{
    size_t first = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        if (!claimable(&ev[i], &cl[i], i))
            return 0;
    }
    sort_claims(cl, n);
    for (i = 1; i < n; i++) {
        if (memcmp(cl[i].id_hash, cl[first].id_hash, BS_MD5_LEN) != 0) {
            first = i;
            continue;
        }
        if (strcmp(ev[cl[i].seq].id, ev[cl[first].seq].id) != 0)
            return 0;
        out[cl[i].seq] = memcmp(cl[i].fp, cl[first].fp, BS_MD5_LEN) == 0 ? BS_EVENT_DUPLICATE
                                                                         : BS_EVENT_CONFLICT;
    }
    return 1;
}

/* The batch's distinct accounts as a text[] literal (malloc'd), or NULL. */
static char *batch_accounts(const bs_event *ev, size_t n)
{
    const char **acc = malloc((n > 0 ? n : 1) * sizeof(*acc));
    const char **distinct = malloc((n > 0 ? n : 1) * sizeof(*distinct));
    size_t *index = malloc((n > 0 ? n : 1) * sizeof(*index));
    char *array = NULL;
    size_t count;
    size_t i;

    if (acc == NULL || distinct == NULL || index == NULL)
        goto out;
    for (i = 0; i < n; i++)
        acc[i] = ev[i].account;
    /* The distinct accounts (a few per thousand events) sorted alone. */
    count = bs_strings_index(acc, n, index, distinct);
    if (count == (size_t)-1)
        goto out;
    qsort(distinct, count, sizeof(*distinct), string_order);
    array = bs_text_array(distinct, count);
out:
    free(acc);
    free(distinct);
    free(index);
    return array;
}

/* Take the savepoint and count the batch's unknown accounts, in one round trip. */
static bs_status claim_begin(bs_conn *c, const bs_event *ev, size_t n, int64_t *unknown,
                             bs_error *err)
{
    char *array = batch_accounts(ev, n);
    const char *params[1];
    bs_status st;

    if (array == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "bs_events_ingest: out of memory");
    params[0] = array;
    st = bs_pipeline_begin(c, err);
    if (st == BS_OK) {
        bs_pipeline_send(c, NULL, SQL_CLAIM_SAVEPOINT, 0, NULL, NULL, NULL);
        bs_pipeline_send(c, NULL, SQL_UNKNOWN_ACCOUNTS, 1, params, unknown, NULL);
        st = bs_pipeline_end(c, err);
    }
    free(array);
    return st;
}

/* COPY the first occurrences (out[] still BS_EVENT_NEW) into event_ids, in @cl's order. */
static bs_status copy_ids(bs_conn *c, const bs_event *ev, size_t n, const claim *cl,
                          const bs_event_outcome *out, bs_copy_format format, bs_error *err)
{
    bs_copy *cp =
        bs_copy_begin(c, format == BS_COPY_TEXT ? SQL_IDS_COPY("text") : SQL_IDS_COPY("binary"),
                      IDS_COLUMNS, format, err);
    size_t i;

    if (cp == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < n; i++) {
        if (out[cl[i].seq] != BS_EVENT_NEW)
            continue;
        bs_copy_row(cp);
        bs_copy_text(cp, ev[cl[i].seq].id);
        bs_copy_timestamptz(cp, ev[cl[i].seq].start);
        bs_copy_bytea(cp, cl[i].fp, BS_MD5_LEN);
    }
    return bs_copy_end(cp, NULL, err);
}

/* COPY the first occurrences into usage_events, in arrival order. */
static bs_status copy_events(bs_conn *c, const bs_event *ev, size_t n, const bs_event_outcome *out,
                             bs_copy_format format, bs_error *err)
{
    bs_copy *cp = bs_copy_begin(
        c, format == BS_COPY_TEXT ? SQL_EVENTS_COPY("text") : SQL_EVENTS_COPY("binary"),
        EVENTS_COLUMNS, format, err);
    size_t i;

    if (cp == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < n; i++) {
        if (out[i] != BS_EVENT_NEW)
            continue;
        bs_copy_row(cp);
        copy_event_columns(cp, &ev[i]);
    }
    return bs_copy_end(cp, NULL, err);
}

/* An error after which the staging path can still store the batch. */
static int claim_lost(const bs_error *e)
{
    return strcmp(e->sqlstate, SQLSTATE_UNIQUE) == 0 || strcmp(e->sqlstate, SQLSTATE_DEADLOCK) == 0;
}

/* Roll the claim back to its savepoint and leave it; BS_OK if the transaction is usable. */
static bs_status claim_undo(bs_conn *c, bs_error *err)
{
    bs_status st = bs_pipeline_begin(c, err);

    if (st != BS_OK)
        return st;
    bs_pipeline_send(c, NULL, SQL_CLAIM_UNDO, 0, NULL, NULL, NULL);
    bs_pipeline_send(c, NULL, SQL_CLAIM_RELEASE, 0, NULL, NULL, NULL);
    return bs_pipeline_end(c, err);
}

/* The two COPYs, between the savepoint and its release. */
static bs_status claim_copy(bs_conn *c, const bs_event *ev, size_t n, const claim *cl,
                            bs_copy_format format, const bs_event_outcome *out, int *lost,
                            bs_error *err)
{
    bs_error e;
    bs_status st;

    memset(&e, 0, sizeof(e));
    st = copy_ids(c, ev, n, cl, out, format, &e);
    if (st == BS_OK)
        st = copy_events(c, ev, n, out, format, &e);
    if (st == BS_OK)
        return bs_command(c, SQL_CLAIM_RELEASE, 0, NULL, NULL, err);
    if (claim_lost(&e) && PQstatus(bs_pg(c)) == CONNECTION_OK) {
        *lost = 1;
        return claim_undo(c, err);
    }
    if (err != NULL)
        *err = e;
    return st;
}

/*
 * claim - store the batch by the optimistic claim. Returns BS_OK with
 * *@done set if it did (@out and *@n_new filled), BS_OK with *@done 0 if
 * the batch must take the staging path (nothing stored, the transaction
 * as it was), or an error (the transaction must be rolled back).
 */
static bs_status claim_batch(bs_conn *c, const bs_event *ev, size_t n, bs_copy_format format,
                             bs_event_outcome *out, size_t *n_new, int *done, bs_error *err)
{
    claim *cl = malloc(n * sizeof(*cl));
    int64_t unknown = -1;
    int lost = 0;
    size_t i;
    bs_status st = BS_OK;

    *done = 0;
    if (cl == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "bs_events_ingest: out of memory");
    if (!plan_claim(ev, n, cl, out))
        goto out;
    st = claim_begin(c, ev, n, &unknown, err);
    if (st == BS_OK && unknown != 0)
        st = bs_command(c, SQL_CLAIM_RELEASE, 0, NULL, NULL, err);
    else if (st == BS_OK)
        st = claim_copy(c, ev, n, cl, format, out, &lost, err);
    if (st == BS_OK && unknown == 0 && !lost) {
        *done = 1;
        *n_new = 0;
        for (i = 0; i < n; i++)
            *n_new += out[i] == BS_EVENT_NEW;
    }
out:
    free(cl);
    for (i = 0; i < n && !*done; i++)
        out[i] = BS_EVENT_NEW;
    return st;
}

bs_status bs_events_ingest(bs_conn *c, const bs_event *ev, size_t n, bs_copy_format format,
                           bs_event_outcome *out, size_t *n_new, bs_error *err)
{
    PGresult *rest = NULL;
    size_t stored = 0;
    int claimed = 0;
    size_t i;
    bs_status st;

    if (n_new != NULL)
        *n_new = 0;
    if (c == NULL || ev == NULL || out == NULL || n == 0 || n > BS_EVENTS_BATCH_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "bs_events_ingest: 1..%d events needed",
                            BS_EVENTS_BATCH_MAX);
    if (!bs_in_transaction(c))
        return bs_error_set(err, BS_ERR_INVALID, "bs_events_ingest must run inside a transaction");
    for (i = 0; i < n; i++)
        out[i] = BS_EVENT_NEW;
    st = claim_batch(c, ev, n, format, out, &stored, &claimed, err);
    if (st != BS_OK || claimed) {
        if (st == BS_OK && n_new != NULL)
            *n_new = stored;
        return st;
    }
    st = stage(c, ev, n, format, err);
    if (st == BS_OK)
        st = check_batch(c, err);
    if (st == BS_OK) {
        rest = bs_query(c, SQL_MOVE, 0, NULL, err);
        if (rest == NULL)
            st = err != NULL ? err->status : BS_ERR_FATAL;
    }
    if (st == BS_OK)
        st = settle_rest(c, rest, n, out, &stored, err);
    if (st == BS_OK && n_new != NULL)
        *n_new = stored;
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

/* Run @r's INSERT now (@pipelined 0) or queue it in @c's pipeline (1). */
static bs_status reject_run(bs_conn *c, const bs_rejection *r, int pipelined, bs_error *err)
{
    char partition[16];
    char offset[24];
    const char *params[8];
    char *payload;
    bs_status st;

    if (r == NULL || r->source == NULL || r->reason_code == NULL || r->reason == NULL ||
        (r->payload == NULL && r->payload_len > 0) || r->payload_len > REJECT_PAYLOAD_MAX)
        return bs_error_set(err, BS_ERR_INVALID,
                            "bs_reject: incomplete rejection or payload "
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
    /* libpq copies the parameters into its output buffer: @payload may go at once. */
    if (pipelined)
        st = bs_pipeline_send(c, NULL, SQL_REJECT, 8, params, NULL, err);
    else
        st = bs_command(c, SQL_REJECT, 8, params, NULL, err);
    free(payload);
    return st;
}

bs_status bs_reject(bs_conn *c, const bs_rejection *r, bs_error *err)
{
    return reject_run(c, r, 0, err);
}

bs_status bs_reject_send(bs_conn *c, const bs_rejection *r, bs_error *err)
{
    return reject_run(c, r, 1, err);
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

/* Run the move of a position now (@pipelined 0) or queue it in @c's pipeline (1). */
static bs_status offset_run(bs_conn *c, const char *group, const char *topic, int32_t partition,
                            int64_t expected, int64_t next, int64_t *affected, int pipelined,
                            bs_error *err)
{
    char part[16];
    char next_s[24];
    char expected_s[24];
    const char *params[5];
    const char *sql = expected < 0 ? SQL_OFFSET_INSERT : SQL_OFFSET_UPDATE;
    int nparams = expected < 0 ? 4 : 5;

    snprintf(part, sizeof(part), "%" PRId32, partition);
    snprintf(next_s, sizeof(next_s), "%" PRId64, next);
    snprintf(expected_s, sizeof(expected_s), "%" PRId64, expected);
    params[0] = group;
    params[1] = topic;
    params[2] = part;
    params[3] = next_s;
    params[4] = expected_s;
    if (pipelined)
        return bs_pipeline_send(c, NULL, sql, nparams, params, affected, err);
    return bs_command(c, sql, nparams, params, affected, err);
}

bs_status bs_offset_moved(const char *group, const char *topic, int32_t partition, int64_t expected,
                          int64_t moved, bs_error *err)
{
    if (moved != 1)
        return bs_error_set(err, BS_ERR_RETRY,
                            "position of %s/%s/%" PRId32 " is no longer %" PRId64
                            ": another consumer moved it",
                            group, topic, partition, expected);
    return BS_OK;
}

bs_status bs_offset_put(bs_conn *c, const char *group, const char *topic, int32_t partition,
                        int64_t expected, int64_t next, bs_error *err)
{
    int64_t affected = 0;
    bs_status st = offset_run(c, group, topic, partition, expected, next, &affected, 0, err);

    if (st != BS_OK)
        return st;
    return bs_offset_moved(group, topic, partition, expected, affected, err);
}

bs_status bs_offset_send(bs_conn *c, const char *group, const char *topic, int32_t partition,
                         int64_t expected, int64_t next, int64_t *moved, bs_error *err)
{
    *moved = 0;
    return offset_run(c, group, topic, partition, expected, next, moved, 1, err);
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
