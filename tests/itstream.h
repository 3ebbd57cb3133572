/*
 * itstream.h - what the pipeline suites (itest_ingest, itest_billingd)
 * share: a stream of JSON records made from the shipped example (with
 * replays, conflicts, garbage, unknown accounts, split traffic, an
 * oversized record, and optionally many synthetic events), the same
 * stream rated directly as `billing rate` does, and the comparison of
 * every invoice with those computed from the stored aggregates.
 */
#ifndef BILLING_ITSTREAM_H
#define BILLING_ITSTREAM_H

#include <stddef.h>

#include "billing.h"
#include "billing_config.h"
#include "dbcatalog.h"
#include "store.h"

#define ITS_MAX_RECORDS 40000

typedef struct its_stream {
    char *rec[ITS_MAX_RECORDS];
    size_t len[ITS_MAX_RECORDS];
    const char *key[ITS_MAX_RECORDS]; /* partitioning key: the account, or "garbage" */
    size_t n;
} its_stream;

/* its_example_path - examples/gpu-cloud/@file under $top_srcdir. */
void its_example_path(char *out, size_t size, const char *file);

/*
 * its_build - the example's events with replays, conflicts (same id,
 * other quantity, right after), garbage bytes, events of unknown
 * accounts, thirds of a byte of split traffic, @synthetic more GPU events,
 * and, with @oversized, one 70 KiB record.
 */
void its_build(its_stream *s, size_t synthetic, int oversized);
void its_free(its_stream *s);

/*
 * its_ghost_accounts - write to @path the example's accounts file plus the
 * accounts "ghost-ACCOUNT" whose events its_build makes (rejected until
 * then as unknown_account).
 */
void its_ghost_accounts(const char *path);

/* its_ghost_events - the events of the ghost accounts again, ids prefixed with @prefix. */
void its_ghost_events(its_stream *s, const char *prefix);

/* its_file_catalog - the example catalog as `billing rate` reads it (zones in @zones). */
billing_catalog *its_file_catalog(billing_config_zones *zones);

/*
 * its_rate_directly - rate @s in order with the rater's own dedupe, as
 * `billing rate` does; *@rejects gets how many records it refuses.
 */
billing_rater *its_rate_directly(billing_catalog *cat, const its_stream *s, size_t *rejects);

/* its_load_example - `billing load` of the example into price book "gpu". */
void its_load_example(bs_conn *c);

/* its_rate_from_store - a rater holding every stored aggregate. */
billing_rater *its_rate_from_store(bs_conn *c, bs_catalog *cat);

/* its_same_invoices - every invoice of every account and month of @a equals @b's. */
void its_same_invoices(billing_rater *a, billing_rater *b);

/* The tables the pipeline writes, in its_dump's order. */
#define ITS_TABLES 5

/*
 * its_dump - every row of usage_aggregates, usage_events, event_ids,
 * rejected_events and kafka_offsets, as text, without the times of
 * writing; without the identity ids and the consumer group too unless
 * @ids (runs whose batches were cut alike give the same ids). Into @out
 * (the caller frees each, or its_same_dump does).
 */
void its_dump(bs_conn *c, int ids, char *out[ITS_TABLES]);

/*
 * its_same_dump - @a and @b (its_dump) equal table by table, with
 * aggregates and events in them; frees both. @what names @b's run.
 */
void its_same_dump(char *a[ITS_TABLES], char *b[ITS_TABLES], const char *what);

#endif
