/*
 * ingest.c - the ingest pipeline: decode, rate, dedupe forever, store
 * events, aggregates, rejects and positions in one transaction. See
 * ingest.h and doc/architecture.md ("Exactly once").
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventjson.h"
#include "copy.h"
#include "events.h"
#include "ingest.h"
#include "parallel.h"

#define REASON_MAX 256
#define REJECT_PAYLOAD_MAX (1024u * 1024u)
/* Fewest records a slice of a batch gets: a thread costs more than rating fewer. */
#define SLICE_MIN 256

/*
 * A batch's aggregates are COPYed into a session staging table and added
 * to usage_aggregates by one set-based upsert: one round trip and one plan
 * per batch instead of one statement per aggregate. Rows are taken in key
 * order so that concurrent consumers lock shared rows in the same order
 * (no deadlock between two billingd processes).
 */
#define SQL_AGG_STAGE_CREATE                                                             \
    "CREATE TEMP TABLE IF NOT EXISTS billing_agg_stage (account_id text NOT NULL,"       \
    " month text NOT NULL, meter text NOT NULL, rate_kind text NOT NULL,"                \
    " price_version_id bigint, rate_model text, rate_region text, subscription_id text," \
    " epoch integer NOT NULL, quantity numeric NOT NULL, quantity_den numeric NOT NULL," \
    " event_count bigint NOT NULL) ON COMMIT DELETE ROWS"
#define SQL_AGG_STAGE_CLEAR "DELETE FROM pg_temp.billing_agg_stage"
#define AGG_COLUMNS 12
#define SQL_AGG_STAGE_COPY                                                                   \
    "COPY pg_temp.billing_agg_stage (account_id, month, meter, rate_kind, price_version_id," \
    " rate_model, rate_region, subscription_id, epoch, quantity, quantity_den, event_count)" \
    " FROM STDIN (FORMAT binary)"
/*
 * Exact sum of two fractions in lowest terms: a/b + c/d = (ad + cb) / bd,
 * both divided by their gcd. Time meters give whole unit-nanoseconds
 * almost always (den 1 on both sides): then a plain sum, no gcd.
 */
#define SUM_NUM "(a.quantity * EXCLUDED.quantity_den + EXCLUDED.quantity * a.quantity_den)"
#define SUM_DEN "(a.quantity_den * EXCLUDED.quantity_den)"
#define BOTH_WHOLE "a.quantity_den = 1 AND EXCLUDED.quantity_den = 1"
#define SQL_AGG_MERGE                                                                 \
    "INSERT INTO billing.usage_aggregates AS a (account_id, month, meter, rate_kind," \
    " price_version_id, rate_model, rate_region, subscription_id, epoch, quantity,"   \
    " quantity_den, event_count) SELECT account_id, month::date, meter, rate_kind,"   \
    " price_version_id, rate_model, rate_region, subscription_id, epoch, quantity,"   \
    " quantity_den, event_count"                                                      \
    " FROM pg_temp.billing_agg_stage ORDER BY account_id, month, meter, rate_kind,"   \
    " price_version_id, rate_model, rate_region, subscription_id, epoch"              \
    " ON CONFLICT ON CONSTRAINT usage_aggregates_key DO UPDATE SET"                   \
    " quantity = CASE WHEN " BOTH_WHOLE " THEN a.quantity + EXCLUDED.quantity"        \
    "   ELSE div(" SUM_NUM ", gcd(" SUM_NUM ", " SUM_DEN ")) END,"                    \
    " quantity_den = CASE WHEN " BOTH_WHOLE " THEN 1"                                 \
    "   ELSE div(" SUM_DEN ", gcd(" SUM_NUM ", " SUM_DEN ")) END,"                    \
    " event_count = a.event_count + EXCLUDED.event_count, updated_at = now()"

#define SQL_AGG_READ                                                                        \
    "SELECT a.account_id, extract(year FROM a.month)::integer,"                             \
    " extract(month FROM a.month)::integer, a.meter, v.label, a.rate_model, a.rate_region," \
    " a.subscription_id, a.epoch, a.quantity::text || '/' || a.quantity_den::text,"         \
    " a.event_count FROM billing.usage_aggregates a"                                        \
    " JOIN billing.accounts ac ON ac.id = a.account_id"                                     \
    " JOIN billing.price_books b ON b.currency = ac.currency AND b.id = $1::text"           \
    " LEFT JOIN billing.price_versions v ON v.id = a.price_version_id"                      \
    " WHERE a.event_count > 0"
/*
 * One account's: a statement of its own, not "$2 IS NULL OR account_id =
 * $2", whose generic plan (the one a prepared statement settles on after
 * five runs) cannot use the account's index and read every account's
 * aggregates: 28 ms a balance at 10 000 accounts (bench/api-balance.sh).
 */
#define SQL_AGG_READ_ONE SQL_AGG_READ " AND a.account_id = $2::text ORDER BY a.id"
#define SQL_AGG_READ_ALL SQL_AGG_READ " ORDER BY a.id"

/*
 * SQL_AGG_READ for some accounts ($2, distinct), by account, credit epoch, month
 * (bs_aggregates_rate_by_epoch). The accounts are a relation joined on the
 * index, not an = ANY() filter, which PostgreSQL may test against every
 * element for every row (a batch's 2 000 accounts: 4 M comparisons).
 */
#define SQL_AGG_READ_EPOCHS                                                                 \
    "SELECT a.account_id, extract(year FROM a.month)::integer,"                             \
    " extract(month FROM a.month)::integer, a.meter, v.label, a.rate_model, a.rate_region," \
    " a.subscription_id, a.epoch, a.quantity::text || '/' || a.quantity_den::text,"         \
    " a.event_count FROM unnest($2::text[]) AS q (id)"                                      \
    " JOIN billing.usage_aggregates a ON a.account_id = q.id"                               \
    " JOIN billing.accounts ac ON ac.id = a.account_id"                                     \
    " JOIN billing.price_books b ON b.currency = ac.currency AND b.id = $1::text"           \
    " LEFT JOIN billing.price_versions v ON v.id = a.price_version_id"                      \
    " WHERE a.event_count > 0"                                                              \
    " ORDER BY a.account_id COLLATE \"C\", a.epoch, a.month, a.id"

/* Per record of the batch. */
typedef struct slot {
    billing_event *ev; /* decoded event; reused across batches */
    int decoded;       /* 1 when ev holds a valid decoding */
    int rated;         /* 1 when added to the transaction's rater */
    char qty[BILLING_QUANTITY_TEXT_MAX];
    char reason[REASON_MAX];
} slot;

/* What one slice of a batch rated, on its thread (rate_slices). */
typedef struct share {
    billing_rater *rt;
    bs_status st;
    bs_error err;
    int refused; /* a record refused for the rater's state: its cap on model and region pairs */
} share;

struct bs_ingest {
    bs_catalog *cat;
    const char *group;
    size_t threads;
    share *shares; /* one per thread */
    int decoding;  /* the slices decode their records before rating them (not on a retry) */
    slot *slots;
    size_t cap;
    bs_event *rows;  /* events offered to the store, in record order */
    size_t *row_rec; /* the record of each row */
    bs_event_outcome *row_out;
    /* The batch being run, for the transaction function. */
    const bs_record *recs;
    size_t n;
    const bs_position *pos;
    size_t npos;
    int64_t *moved; /* rows each position's move changed (store_tail), room for npos */
    int flags;
    bs_record_result *res;
    bs_ingest_counts counts;
    bs_ingest_hook hook;
    void *hook_arg;
    /* Rated by bs_ingest_prepare for the first attempt of the transaction; NULL after. */
    billing_rater *rated;
};

void bs_ingest_counts_add(bs_ingest_counts *total, const bs_ingest_counts *k)
{
    total->records += k->records;
    total->stored += k->stored;
    total->duplicates += k->duplicates;
    total->rejected += k->rejected;
    total->aggregates += k->aggregates;
}

bs_ingest *bs_ingest_new(bs_catalog *cat, const char *group)
{
    bs_ingest *in = calloc(1, sizeof(*in));

    if (in == NULL)
        return NULL;
    in->shares = calloc(1, sizeof(*in->shares));
    if (in->shares == NULL) {
        free(in);
        return NULL;
    }
    in->cat = cat;
    in->group = group;
    in->threads = 1;
    return in;
}

int bs_ingest_set_threads(bs_ingest *in, int n)
{
    share *sh;

    if (n < 1 || n > BS_INGEST_THREADS_MAX)
        return -1;
    sh = calloc((size_t)n, sizeof(*sh));
    if (sh == NULL)
        return -1;
    free(in->shares);
    in->shares = sh;
    in->threads = (size_t)n;
    return 0;
}

void bs_ingest_free(bs_ingest *in)
{
    size_t i;

    if (in == NULL)
        return;
    for (i = 0; i < in->cap; i++)
        billing_event_destroy(in->slots[i].ev);
    billing_rater_destroy(in->rated);
    free(in->slots);
    free(in->rows);
    free(in->row_rec);
    free(in->row_out);
    free(in->moved);
    free(in->shares);
    free(in);
}

void bs_ingest_set_hook(bs_ingest *in, bs_ingest_hook fn, void *arg)
{
    in->hook = fn;
    in->hook_arg = arg;
}

void bs_ingest_set_catalog(bs_ingest *in, bs_catalog *cat)
{
    /* A batch prepared but not committed was rated against the old catalog, about to go. */
    billing_rater_destroy(in->rated);
    in->rated = NULL;
    in->recs = NULL;
    in->cat = cat;
}

/* Room for @n records; the slots keep their event buffers between batches. */
static int reserve(bs_ingest *in, size_t n)
{
    slot *s;
    size_t i;

    if (n <= in->cap)
        return 0;
    s = realloc(in->slots, n * sizeof(*s));
    if (s == NULL)
        return -1;
    in->slots = s;
    memset(&s[in->cap], 0, (n - in->cap) * sizeof(*s));
    for (i = in->cap; i < n; i++) {
        s[i].ev = billing_event_new();
        if (s[i].ev == NULL) {
            in->cap = i;
            return -1;
        }
    }
    in->cap = n;
    free(in->rows);
    free(in->row_rec);
    free(in->row_out);
    in->rows = calloc(n, sizeof(*in->rows));
    in->row_rec = calloc(n, sizeof(*in->row_rec));
    in->row_out = calloc(n, sizeof(*in->row_out));
    if (in->rows == NULL || in->row_rec == NULL || in->row_out == NULL) {
        in->cap = 0;
        return -1;
    }
    return 0;
}

/* The reason code of a library status; NULL for a status that is not the record's fault. */
static const char *reason_code(billing_status st)
{
    switch (st) {
    case BILLING_ERR_TOO_LARGE:
        return "too_large";
    case BILLING_ERR_PARSE:
        return "parse";
    case BILLING_ERR_INVALID:
        return "invalid";
    case BILLING_ERR_RANGE:
    case BILLING_ERR_ZONE:
        return "range";
    case BILLING_ERR_UNKNOWN_ACCOUNT:
        return "unknown_account";
    case BILLING_ERR_NO_PRICE:
        return "no_price";
    case BILLING_ERR_CONFLICT:
        return "conflict";
    default:
        return NULL;
    }
}

static void reject(bs_ingest *in, size_t i, const char *code)
{
    in->res[i].outcome = BS_RECORD_REJECTED;
    in->res[i].reason_code = code;
    in->res[i].reason = in->slots[i].reason;
}

/* Decode record @i into its slot; a failure rejects it. */
static void decode(bs_ingest *in, size_t i)
{
    const bs_record *r = &in->recs[i];
    slot *s = &in->slots[i];
    billing_status st;

    s->decoded = 0;
    s->reason[0] = '\0';
    if (r->reject_code != NULL) {
        snprintf(s->reason, sizeof(s->reason), "%s", r->reject_reason ? r->reject_reason : "");
        reject(in, i, r->reject_code);
        return;
    }
    if (r->format == BS_RECORD_JSON && r->len > BS_JSON_RECORD_MAX) {
        snprintf(s->reason, sizeof(s->reason), "%s: %zu bytes, over the %u-byte bound", r->source,
                 r->len, BS_JSON_RECORD_MAX);
        st = BILLING_ERR_TOO_LARGE;
    } else if (r->format == BS_RECORD_JSON) {
        st = bc_event_parse_json(s->ev, r->data, r->len, s->reason, sizeof(s->reason));
    } else {
        st = billing_event_decode(s->ev, r->data, r->len, s->reason, sizeof(s->reason));
    }
    if (st != BILLING_OK) {
        if (s->reason[0] == '\0')
            snprintf(s->reason, sizeof(s->reason), "%s", billing_strerror(st));
        reject(in, i, reason_code(st) ? reason_code(st) : "invalid");
        return;
    }
    s->decoded = 1;
    in->res[i].event_id = billing_event_id(s->ev);
    in->res[i].event = s->ev;
}

/*
 * Rate the decoded records [@begin, @end) into @sh's rater; rejections are
 * the record's, other errors the batch's.
 */
static bs_status rate_range(bs_ingest *in, share *sh, size_t begin, size_t end)
{
    slot *s;
    billing_status st;
    size_t i;

    for (i = begin; i < end; i++) {
        s = &in->slots[i];
        s->rated = 0;
        if (!s->decoded)
            continue;
        st = billing_rater_add(sh->rt, s->ev, s->reason, sizeof(s->reason));
        if (st == BILLING_ERR_NOMEM)
            return bs_error_set(&sh->err, BS_ERR_NOMEM, "%s", s->reason);
        if (st == BILLING_ERR_TOO_LARGE)
            sh->refused = 1;
        if (st != BILLING_OK) {
            reject(in, i, reason_code(st) ? reason_code(st) : "invalid");
            continue;
        }
        s->rated = 1;
    }
    return BS_OK;
}

static void fill_row(bs_ingest *in, size_t i, bs_event *row)
{
    slot *s = &in->slots[i];

    billing_event_quantity(s->ev, s->qty, sizeof(s->qty));
    row->id = billing_event_id(s->ev);
    row->account = billing_event_account(s->ev);
    row->resource = billing_event_resource(s->ev);
    row->meter = billing_meter_name(billing_event_meter(s->ev));
    row->start = billing_event_start(s->ev);
    row->end = billing_event_end(s->ev);
    row->quantity = s->qty;
    row->model = billing_event_model(s->ev);
    row->region = billing_event_region(s->ev);
    row->source = in->recs[i].source;
}

/* Offer the rated events to the store; take back from @rt what it already had. */
static bs_status store_events(bs_ingest *in, bs_conn *c, billing_rater *rt, bs_error *err)
{
    size_t n = 0;
    size_t j;
    size_t i;
    bs_status st;

    for (i = 0; i < in->n; i++) {
        if (!in->slots[i].rated)
            continue;
        fill_row(in, i, &in->rows[n]);
        in->row_rec[n++] = i;
    }
    if (n == 0)
        return BS_OK;
    st = bs_events_ingest(c, in->rows, n, BS_COPY_BINARY, in->row_out, NULL, err);
    for (j = 0; j < n && st == BS_OK; j++) {
        i = in->row_rec[j];
        if (in->row_out[j] == BS_EVENT_NEW) {
            in->counts.stored++;
            continue;
        }
        /*
         * Rated a moment ago by this rater (dedupe off), so the unchecked
         * take-back is exact and cannot fail.
         */
        billing_rater_take_back(rt, in->slots[i].ev, NULL, 0);
        in->slots[i].rated = 0;
        if (in->row_out[j] == BS_EVENT_DUPLICATE) {
            in->res[i].outcome = BS_RECORD_DUPLICATE;
            in->counts.duplicates++;
            continue;
        }
        snprintf(in->slots[i].reason, sizeof(in->slots[i].reason),
                 "event '%s': id already stored with different content", in->rows[j].id);
        reject(in, i, "conflict");
    }
    return st;
}

/* Write aggregate @i of @rt as a staging row; 0, or -1 for an empty one (skipped). */
static int stage_aggregate(const bs_ingest *in, const billing_rater *rt, size_t i, bs_copy *cp)
{
    char sum[BILLING_AGG_SUM_MAX];
    char month[32];
    const char *account;
    const char *label;
    const char *model;
    const char *region;
    const char *sub;
    char *slash;
    billing_meter meter;
    unsigned epoch;
    uint64_t pieces;
    int ym;

    if (billing_rater_aggregate(rt, i, &account, &ym, &meter, &label, &model, &region, &sub, &epoch,
                                &pieces, sum, sizeof(sum)) != BILLING_OK ||
        pieces == 0)
        return -1;
    snprintf(month, sizeof(month), "%04d-%02d-01", ym / 100, ym % 100);
    slash = strchr(sum, '/');
    if (slash != NULL)
        *slash++ = '\0';
    bs_copy_row(cp);
    bs_copy_text(cp, account);
    bs_copy_text(cp, month);
    bs_copy_text(cp, billing_meter_name(meter));
    bs_copy_text(cp, label ? "priced" : sub ? "included" : "zero");
    if (label != NULL)
        bs_copy_int8(cp, bs_catalog_version_id(in->cat, label));
    else
        bs_copy_null(cp);
    bs_copy_text(cp, model);
    bs_copy_text(cp, region);
    bs_copy_text(cp, sub);
    bs_copy_int4(cp, (int32_t)epoch);
    bs_copy_numeric(cp, sum);
    bs_copy_numeric(cp, slash != NULL ? slash : "1");
    bs_copy_int8(cp, (int64_t)pieces);
    return 0;
}

/*
 * Stage the batch's aggregates (COPY); *@merge is set when there are some,
 * for the upsert that store_tail sends.
 */
static bs_status stage_aggregates(bs_ingest *in, bs_conn *c, const billing_rater *rt, int *merge,
                                  bs_error *err)
{
    size_t n = billing_rater_aggregate_count(rt);
    bs_copy *cp;
    size_t i;
    bs_status st;

    *merge = 0;
    if (n == 0)
        return BS_OK;
    st = bs_pipeline_begin(c, err);
    if (st != BS_OK)
        return st;
    bs_pipeline_send(c, NULL, SQL_AGG_STAGE_CREATE, 0, NULL, NULL, NULL);
    bs_pipeline_send(c, NULL, SQL_AGG_STAGE_CLEAR, 0, NULL, NULL, NULL);
    st = bs_pipeline_end(c, err);
    if (st != BS_OK)
        return st;
    cp = bs_copy_begin(c, SQL_AGG_STAGE_COPY, AGG_COLUMNS, BS_COPY_BINARY, err);
    if (cp == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < n; i++) {
        if (stage_aggregate(in, rt, i, cp) == 0)
            in->counts.aggregates++;
    }
    st = bs_copy_end(cp, NULL, err);
    *merge = st == BS_OK;
    return st;
}

/* Queue the batch's rejected records in the pipeline (none with BS_INGEST_KEEP_REJECTS). */
static bs_status send_rejects(bs_ingest *in, bs_conn *c, bs_error *err)
{
    bs_rejection rj;
    const bs_record *r;
    size_t i;
    bs_status st = BS_OK;

    for (i = 0; i < in->n && st == BS_OK; i++) {
        if (in->res[i].outcome != BS_RECORD_REJECTED)
            continue;
        in->counts.rejected++;
        if (in->flags & BS_INGEST_KEEP_REJECTS)
            continue;
        r = &in->recs[i];
        memset(&rj, 0, sizeof(rj));
        rj.source = r->source;
        rj.kafka_topic = r->kafka_topic;
        rj.kafka_partition = r->kafka_partition;
        rj.kafka_offset = r->kafka_offset;
        rj.event_id = in->res[i].event_id;
        rj.reason_code = in->res[i].reason_code;
        rj.reason = in->res[i].reason;
        rj.payload = r->data;
        /* The table keeps 1 MiB; a larger record is too_large and its head is kept. */
        rj.payload_len = r->len > REJECT_PAYLOAD_MAX ? REJECT_PAYLOAD_MAX : r->len;
        st = bs_reject_send(c, &rj, err);
    }
    return st;
}

/* The positions only move forward: records before a stored one were counted already. */
static bs_status check_positions(const bs_ingest *in, bs_error *err)
{
    size_t i;

    if (in->npos > 0 && in->group == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "positions given without a consumer group");
    for (i = 0; i < in->npos; i++) {
        if (in->pos[i].next <= in->pos[i].expected)
            return bs_error_set(
                err, BS_ERR_INVALID,
                "position of %s/%" PRId32 " would move back from %" PRId64 " to %" PRId64,
                in->pos[i].topic, in->pos[i].partition, in->pos[i].expected, in->pos[i].next);
    }
    return BS_OK;
}

/* Queue the moves of the positions; in->moved[i] gets each one's row count. */
static bs_status send_positions(bs_ingest *in, bs_conn *c, bs_error *err)
{
    const bs_position *p;
    size_t i;
    bs_status st = BS_OK;

    for (i = 0; i < in->npos && st == BS_OK; i++) {
        p = &in->pos[i];
        st = bs_offset_send(c, in->group, p->topic, p->partition, p->expected, p->next,
                            &in->moved[i], err);
    }
    return st;
}

/* BS_ERR_RETRY if another consumer moved one of the positions (bs_offset_put). */
static bs_status positions_moved(const bs_ingest *in, bs_error *err)
{
    const bs_position *p;
    size_t i;
    bs_status st = BS_OK;

    for (i = 0; i < in->npos && st == BS_OK; i++) {
        p = &in->pos[i];
        st = bs_offset_moved(in->group, p->topic, p->partition, p->expected, in->moved[i], err);
    }
    return st;
}

/*
 * The statements after the COPYs, which need none of each other's
 * results, in one pipeline (one round trip for a usual batch instead of
 * 2 + positions + rejects): the aggregate upsert (@merge), the rejected
 * records, the positions. The first error wins; the pipeline is always
 * ended, so the transaction can be rolled back.
 */
static bs_status store_tail(bs_ingest *in, bs_conn *c, int merge, bs_error *err)
{
    int64_t *moved;
    bs_status st = check_positions(in, err);
    bs_status end;

    if (st != BS_OK)
        return st;
    moved = realloc(in->moved, (in->npos > 0 ? in->npos : 1) * sizeof(*moved));
    if (moved == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "bs_ingest: out of memory");
    in->moved = moved;
    st = bs_pipeline_begin(c, err);
    if (st != BS_OK)
        return st;
    if (merge)
        st = bs_pipeline_send(c, NULL, SQL_AGG_MERGE, 0, NULL, NULL, err);
    if (st == BS_OK)
        st = send_rejects(in, c, err);
    if (st == BS_OK)
        st = send_positions(in, c, err);
    end = bs_pipeline_end(c, st == BS_OK ? err : NULL);
    if (st == BS_OK)
        st = end;
    if (st == BS_OK)
        st = positions_moved(in, err);
    return st;
}

/* Reset what a transaction attempt decides for records [@begin, @end) (decoding is kept). */
static void reset_attempt(bs_ingest *in, size_t begin, size_t end)
{
    size_t i;

    for (i = begin; i < end; i++) {
        if (!in->slots[i].decoded)
            continue;
        in->res[i].outcome = BS_RECORD_NEW;
        in->res[i].reason_code = NULL;
        in->res[i].reason = NULL;
    }
}

/* Slice @k of the batch, on its thread (a bs_slice_fn): decode if asked, then rate. */
static void prepare_slice(void *arg, size_t k, size_t begin, size_t end)
{
    bs_ingest *in = arg;
    share *sh = &in->shares[k];
    size_t i;

    for (i = begin; i < end && in->decoding; i++)
        decode(in, i);
    reset_attempt(in, begin, end);
    sh->st = rate_range(in, sh, begin, end);
}

/* New raters for the first @nslices shares. */
static bs_status new_raters(bs_ingest *in, size_t nslices, bs_error *err)
{
    char msg[256];
    size_t k;

    for (k = 0; k < nslices; k++) {
        memset(&in->shares[k], 0, sizeof(in->shares[k]));
        billing_rater_new(bs_catalog_lib(in->cat), &in->shares[k].rt, msg, sizeof(msg));
        if (in->shares[k].rt == NULL)
            return bs_error_set(err, BS_ERR_INVALID, "catalog: %s", msg);
        billing_rater_set_dedupe(in->shares[k].rt, 0);
    }
    return BS_OK;
}

/*
 * The slices' raters added into the first, in slice order; sets *@serial
 * when they cannot be (their model and region pairs together over the cap).
 */
static bs_status merge_raters(bs_ingest *in, size_t nslices, int *serial, bs_error *err)
{
    char msg[256];
    billing_status st;
    size_t k;

    for (k = 0; k < nslices; k++) {
        if (in->shares[k].st != BS_OK) {
            if (err != NULL)
                *err = in->shares[k].err;
            return in->shares[k].st;
        }
        *serial |= nslices > 1 && in->shares[k].refused;
    }
    for (k = 1; k < nslices && !*serial; k++) {
        st = billing_rater_merge(in->shares[0].rt, in->shares[k].rt, msg, sizeof(msg));
        if (st == BILLING_ERR_NOMEM)
            return bs_error_set(err, BS_ERR_NOMEM, "merging the batch's raters: %s", msg);
        *serial = st != BILLING_OK;
    }
    return BS_OK;
}

/*
 * Rate the batch in @nslices slices on as many threads, each into a rater
 * of its own, merged into *@rt. Sets *@serial, leaving *@rt NULL, when a
 * record was refused for a rater's state: which records a full rater
 * refuses depends on what it saw before, so only one rater over the whole
 * batch refuses the ones one thread would.
 */
static bs_status rate_slices(bs_ingest *in, size_t nslices, billing_rater **rt, int *serial,
                             bs_error *err)
{
    bs_status st;
    size_t k;

    *serial = 0;
    /*
     * Made here, not on the threads: the first rater freezes the catalog,
     * which is not safe to share before.
     */
    st = new_raters(in, nslices, err);
    if (st == BS_OK) {
        bs_parallel_slices(in->n, nslices, prepare_slice, in);
        st = merge_raters(in, nslices, serial, err);
    }
    if (st == BS_OK && !*serial) {
        *rt = in->shares[0].rt;
        in->shares[0].rt = NULL;
    }
    for (k = 0; k < nslices; k++) {
        billing_rater_destroy(in->shares[k].rt);
        in->shares[k].rt = NULL;
    }
    return st;
}

/*
 * A fresh rater with every decoded record of the batch rated (or rejected)
 * in it, on up to in->threads threads: the same rater and the same results
 * whatever their number (aggregates are exact sums; each record's result
 * is its own).
 */
static bs_status rate_batch(bs_ingest *in, billing_rater **rt, bs_error *err)
{
    bs_status st;
    int serial;

    memset(&in->counts, 0, sizeof(in->counts));
    in->counts.records = in->n;
    *rt = NULL;
    st = rate_slices(in, bs_slice_count(in->n, in->threads, SLICE_MIN), rt, &serial, err);
    in->decoding = 0;
    if (st == BS_OK && serial)
        st = rate_slices(in, 1, rt, &serial, err);
    return st;
}

static bs_status batch_tx(bs_conn *c, void *arg, bs_error *err)
{
    bs_ingest *in = arg;
    billing_rater *rt = in->rated;
    int merge = 0;
    bs_status st = BS_OK;

    /* The first attempt uses the rating done ahead; a retry starts again from the records. */
    in->rated = NULL;
    if (rt == NULL)
        st = rate_batch(in, &rt, err);
    if (st == BS_OK)
        st = store_events(in, c, rt, err);
    if (st == BS_OK)
        st = stage_aggregates(in, c, rt, &merge, err);
    if (st == BS_OK)
        st = store_tail(in, c, merge, err);
    if (st == BS_OK && in->hook != NULL)
        st = in->hook(in->hook_arg, c, in->recs, in->res, in->n, err);
    billing_rater_destroy(rt);
    return st;
}

bs_status bs_ingest_prepare(bs_ingest *in, const bs_record *recs, size_t n,
                            bs_record_result *results, bs_error *err)
{
    if (in == NULL || recs == NULL || results == NULL || n == 0 || n > BS_INGEST_BATCH_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "bs_ingest_prepare: 1..%d records needed",
                            BS_INGEST_BATCH_MAX);
    if (reserve(in, n) != 0)
        return bs_error_set(err, BS_ERR_NOMEM, "bs_ingest_prepare: out of memory");
    billing_rater_destroy(in->rated);
    in->rated = NULL;
    in->recs = recs;
    in->n = n;
    in->res = results;
    memset(results, 0, n * sizeof(*results));
    in->decoding = 1;
    return rate_batch(in, &in->rated, err);
}

bs_status bs_ingest_commit(bs_ingest *in, bs_conn *c, const bs_position *pos, size_t npos,
                           int flags, bs_ingest_counts *counts, bs_error *err)
{
    bs_status st;

    if (in == NULL || c == NULL || in->recs == NULL || (npos > 0 && pos == NULL))
        return bs_error_set(err, BS_ERR_INVALID, "bs_ingest_commit: no prepared batch");
    in->pos = pos;
    in->npos = npos;
    in->flags = flags;
    st = bs_transaction(c, batch_tx, in, err);
    if (counts != NULL)
        *counts = in->counts;
    /* Prepared once, committed once. */
    billing_rater_destroy(in->rated);
    in->rated = NULL;
    in->recs = NULL;
    return st;
}

bs_status bs_ingest_batch(bs_ingest *in, bs_conn *c, const bs_record *recs, size_t n,
                          const bs_position *pos, size_t npos, int flags, bs_record_result *results,
                          bs_ingest_counts *counts, bs_error *err)
{
    bs_status st;

    if (in == NULL || c == NULL || (npos > 0 && pos == NULL))
        return bs_error_set(err, BS_ERR_INVALID, "bs_ingest_batch: 1..%d records needed",
                            BS_INGEST_BATCH_MAX);
    st = bs_ingest_prepare(in, recs, n, results, err);
    if (st != BS_OK) {
        in->recs = NULL;
        return st;
    }
    return bs_ingest_commit(in, c, pos, npos, flags, counts, err);
}

/* ---------------------------------------------------------------------- */
/* Stored aggregates back into a rater                                     */
/* ---------------------------------------------------------------------- */

static bs_status add_stored(const PGresult *res, int row, billing_rater *r, bs_error *err)
{
    char msg[256];
    billing_meter meter;
    const char *label = PQgetisnull(res, row, 4) ? NULL : PQgetvalue(res, row, 4);
    const char *model = PQgetisnull(res, row, 5) ? NULL : PQgetvalue(res, row, 5);
    const char *region = PQgetisnull(res, row, 6) ? NULL : PQgetvalue(res, row, 6);
    const char *sub = PQgetisnull(res, row, 7) ? NULL : PQgetvalue(res, row, 7);
    billing_status st;

    if (billing_meter_parse(PQgetvalue(res, row, 3), &meter) != BILLING_OK)
        return bs_error_set(err, BS_ERR_INVALID, "stored aggregate: meter %s",
                            PQgetvalue(res, row, 3));
    st = billing_rater_add_aggregate(
        r, PQgetvalue(res, row, 0), atoi(PQgetvalue(res, row, 1)), atoi(PQgetvalue(res, row, 2)),
        meter, label, model, region, sub, (unsigned)strtoul(PQgetvalue(res, row, 8), NULL, 10),
        strtoull(PQgetvalue(res, row, 10), NULL, 10), PQgetvalue(res, row, 9), msg, sizeof(msg));
    if (st != BILLING_OK)
        return bs_error_set(err, st == BILLING_ERR_NOMEM ? BS_ERR_NOMEM : BS_ERR_INVALID,
                            "stored aggregate: %s", msg);
    return BS_OK;
}

bs_status bs_aggregates_rate(bs_conn *c, const bs_catalog *cat, billing_rater *r,
                             const char *account, bs_error *err)
{
    const char *params[2];
    PGresult *res;
    bs_status st;

    params[0] = bs_catalog_book(cat);
    params[1] = account;
    /* Prepared once per connection: the alert check runs it for every
     * affected account with credit, after every batch. */
    res = account != NULL
              ? bs_query_prepared(c, BS_AGG_READ_ONE_STMT, SQL_AGG_READ_ONE, 2, params, err)
              : bs_query_prepared(c, "bs_agg_read_all", SQL_AGG_READ_ALL, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    st = bs_aggregates_add_rows(res, r, err);
    PQclear(res);
    return st;
}

const char bs_agg_read_one_sql[] = SQL_AGG_READ_ONE;

bs_status bs_aggregates_add_rows(const PGresult *res, billing_rater *r, bs_error *err)
{
    bs_status st = BS_OK;
    int i;

    for (i = 0; i < PQntuples(res) && st == BS_OK; i++)
        st = add_stored(res, i, r, err);
    return st;
}

/* Is row @i of @res the last of its account's epoch (rows by account, epoch, month)? */
static int epoch_ends(const PGresult *res, int i)
{
    return i + 1 == PQntuples(res) ||
           strcmp(PQgetvalue(res, i, 0), PQgetvalue(res, i + 1, 0)) != 0 ||
           strcmp(PQgetvalue(res, i, 8), PQgetvalue(res, i + 1, 8)) != 0;
}

bs_status bs_aggregates_rate_by_epoch(bs_conn *c, const bs_catalog *cat, billing_rater *r,
                                      const char *accounts, bs_epoch_fn fn, void *arg,
                                      bs_error *err)
{
    const char *params[2];
    PGresult *res;
    bs_status st = BS_OK;
    int n;
    int i;

    params[0] = bs_catalog_book(cat);
    params[1] = accounts;
    /* Prepared once per connection: the alert check runs it after every batch. */
    res = bs_query_prepared(c, "bs_agg_read_epochs", SQL_AGG_READ_EPOCHS, 2, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    n = PQntuples(res);
    for (i = 0; i < n && st == BS_OK; i++) {
        st = add_stored(res, i, r, err);
        if (st != BS_OK || !epoch_ends(res, i))
            continue;
        if (fn(arg, PQgetvalue(res, i, 0), (unsigned)strtoul(PQgetvalue(res, i, 8), NULL, 10),
               atoi(PQgetvalue(res, i, 1)), atoi(PQgetvalue(res, i, 2))) != 0)
            st = bs_error_set(err, BS_ERR_INVALID, "account '%.128s': epoch %s: stopped",
                              PQgetvalue(res, i, 0), PQgetvalue(res, i, 8));
    }
    PQclear(res);
    return st;
}
