/*
 * rejected.c - rejected records read back (rejected.h): the SQL of `billing
 * rejected list|replay`.
 */
#include "config.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rejected.h"

#define TEXT_(x) #x
#define TEXT(x) TEXT_(x)

/* Stored: under its hash in event_ids, or (another id holds the hash) in event_id_collisions. */
#define RESOLVED                                                                     \
    "(r.reason_code <> 'conflict' AND (EXISTS (SELECT 1 FROM billing.event_ids e"    \
    " WHERE e.id_hash = decode(md5(r.event_id), 'hex') AND e.event_id = r.event_id)" \
    " OR EXISTS (SELECT 1 FROM billing.event_id_collisions x WHERE x.event_id = r.event_id)))"
/*
 * The account a JSON record names, read from its first 4 KiB as text
 * (escape encoding never fails; an account id is printable ASCII without
 * quotes or backslashes, BILLING_ID_MAX bytes at most); "" for protobuf
 * records and for records that name none. For the console's link only:
 * the record stays refused whatever it names.
 */
#define ACCOUNT                                                             \
    "coalesce(CASE WHEN substring(r.payload FROM 1 FOR 1) = '\\x7b'::bytea" \
    " THEN substring(encode(substring(r.payload"                            \
    " FROM 1 FOR 4096), 'escape') FROM "                                    \
    "'\"account\"[[:space:]]*:[[:space:]]*\"([^\"\\\\]{1,128})\"')"         \
    " END, '')"
#define SQL_LIST                                                                                \
    "SELECT r.id, to_char(r.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')," \
    " r.source, coalesce(r.event_id, '-'), r.reason_code, r.reason, octet_length(r.payload),"   \
    " " RESOLVED ", " ACCOUNT " FROM billing.rejected_events r"                                 \
    " WHERE ($1::text IS NULL OR r.reason_code = $1::text) AND ($3::boolean OR NOT " RESOLVED   \
    ") ORDER BY r.id LIMIT $2::bigint"
#define SQL_PENDING                                                                    \
    "SELECT r.id, r.source, r.kafka_topic, r.kafka_partition, r.kafka_offset,"         \
    " encode(r.payload, 'hex') FROM billing.rejected_events r WHERE r.id > $1::bigint" \
    " AND ($2::text IS NULL OR r.reason_code = $2::text) AND NOT " RESOLVED            \
    " ORDER BY r.id LIMIT " TEXT(BS_REJECTS_PAGE)

bs_status bs_rejects_list(bs_conn *c, const char *reason, long limit, int all, bs_reject_fn fn,
                          void *arg, bs_error *err)
{
    char lim[24];
    const char *params[3];
    PGresult *res;
    int i;

    if (limit < 1)
        return bs_error_set(err, BS_ERR_INVALID, "rejected list: limit %ld below 1", limit);
    snprintf(lim, sizeof(lim), "%ld", limit);
    params[0] = reason;
    params[1] = lim;
    params[2] = all ? "true" : "false";
    res = bs_query(c, SQL_LIST, 3, params, err);
    if (res == NULL)
        return err->status;
    for (i = 0; i < PQntuples(res); i++) {
        bs_reject_row row;

        row.id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        row.received_at = PQgetvalue(res, i, 1);
        row.source = PQgetvalue(res, i, 2);
        row.event_id = PQgetvalue(res, i, 3);
        row.reason_code = PQgetvalue(res, i, 4);
        row.reason = PQgetvalue(res, i, 5);
        row.size = strtoll(PQgetvalue(res, i, 6), NULL, 10);
        row.resolved = strcmp(PQgetvalue(res, i, 7), "t") == 0;
        row.account = PQgetvalue(res, i, 8);
        if (fn(arg, &row) != 0)
            break;
    }
    PQclear(res);
    return BS_OK;
}

static int hexval(char h)
{
    return h <= '9' ? h - '0' : h - 'a' + 10;
}

/* Decode the hex of @hex in place; returns the byte count. */
static size_t unhex(char *hex)
{
    size_t n = strlen(hex) / 2;
    size_t i;

    for (i = 0; i < n; i++)
        hex[i] = (char)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    return n;
}

/* Row @i of a SQL_PENDING page as a record (its texts stay in @res). */
static void to_record(PGresult *res, int i, bs_record *rec)
{
    char *payload = PQgetvalue(res, i, 5);

    memset(rec, 0, sizeof(*rec));
    rec->len = unhex(payload);
    rec->data = payload;
    /* Our protobuf messages start with a field tag, never '{' (field 15, wire type 3). */
    rec->format = rec->len > 0 && payload[0] == '{' ? BS_RECORD_JSON : BS_RECORD_PROTOBUF;
    rec->source = PQgetvalue(res, i, 1);
    if (!PQgetisnull(res, i, 2)) {
        rec->kafka_topic = PQgetvalue(res, i, 2);
        rec->kafka_partition = (int32_t)atol(PQgetvalue(res, i, 3));
        rec->kafka_offset = strtoll(PQgetvalue(res, i, 4), NULL, 10);
    }
}

bs_status bs_rejects_pending(bs_conn *c, int64_t after, const char *reason, bs_reject_page *page,
                             bs_error *err)
{
    char last[24];
    const char *params[2] = {last, reason};
    PGresult *res;
    size_t n;
    size_t i;

    memset(page, 0, sizeof(*page));
    snprintf(last, sizeof(last), "%" PRId64, after);
    res = bs_query(c, SQL_PENDING, 2, params, err);
    if (res == NULL)
        return err->status;
    n = (size_t)PQntuples(res);
    if (n > 0) {
        page->records = calloc(n, sizeof(*page->records));
        page->ids = calloc(n, sizeof(*page->ids));
        if (page->records == NULL || page->ids == NULL) {
            free(page->records);
            free(page->ids);
            page->records = NULL;
            page->ids = NULL;
            PQclear(res);
            return bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        }
    }
    for (i = 0; i < n; i++) {
        to_record(res, (int)i, &page->records[i]);
        page->ids[i] = strtoll(PQgetvalue(res, (int)i, 0), NULL, 10);
    }
    page->n = n;
    page->priv = res;
    return BS_OK;
}

void bs_reject_page_free(bs_reject_page *page)
{
    PQclear(page->priv);
    free(page->records);
    free(page->ids);
    memset(page, 0, sizeof(*page));
}
