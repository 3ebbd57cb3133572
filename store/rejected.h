/*
 * rejected.h - the records the ingest pipeline refused
 * (billing.rejected_events, kept with their original bytes), read back:
 * listed for people, and paged as records to put through the pipeline
 * again once the catalog is fixed (`billing rejected list|replay`).
 *
 * A rejected row is never changed (the table is append-only): it counts
 * as resolved once its event id is stored, unless it was a conflict (the
 * id stored is then the other content).
 */
#ifndef BILLING_STORE_REJECTED_H
#define BILLING_STORE_REJECTED_H

#include <stddef.h>
#include <stdint.h>

#include "ingest.h"
#include "store.h"

/* One rejected record as listed. Texts are valid during the callback only. */
typedef struct bs_reject_row {
    int64_t id;              /* the row's id, increasing in the order of arrival */
    const char *received_at; /* RFC 3339 UTC, whole seconds: "2026-01-05T09:00:00Z" */
    const char *source;      /* "kafka:t/0@42", "file:events.jsonl:7" */
    const char *event_id;    /* "-" when the record had none that could be read */
    const char *reason_code; /* "unknown_account", ... (doc/formats.md) */
    const char *reason;      /* the message, naming the field */
    int64_t size;            /* bytes of the original record */
    int resolved;            /* 1 when its event id is stored since (conflicts never) */
    const char *account;     /* the account a JSON record names, "" when none can be read */
} bs_reject_row;

/* bs_reject_fn - receives each row of bs_rejects_list; non-zero stops the listing. */
typedef int (*bs_reject_fn)(void *arg, const bs_reject_row *row);

/*
 * bs_rejects_list - the rejected records in the order of arrival, at most
 * @limit (1..), only those of reason code @reason (NULL: every code),
 * resolved ones too when @all; each handed to @fn. Returns BS_OK (also
 * when @fn stopped) or an error.
 */
bs_status bs_rejects_list(bs_conn *c, const char *reason, long limit, int all, bs_reject_fn fn,
                          void *arg, bs_error *err);

/* Rejected records per page of bs_rejects_pending: bounds its memory. */
#define BS_REJECTS_PAGE 2000

/* A page of unresolved rejected records (bs_rejects_pending). */
typedef struct bs_reject_page {
    size_t n;           /* records in the page; 0: none left */
    bs_record *records; /* @n records as bs_ingest_batch takes them (bytes, source, position) */
    int64_t *ids;       /* @n row ids, ids[i] being that of records[i] */
    void *priv;         /* owns the records' bytes and texts */
} bs_reject_page;

/*
 * bs_rejects_pending - the next page of unresolved rejected records with
 * a row id above @after, of reason code @reason (NULL: every code), in
 * the order of arrival, into @page (freed with bs_reject_page_free; on
 * error it holds no records). JSON records are told from protobuf ones by
 * their first byte. Returns BS_OK or an error.
 */
bs_status bs_rejects_pending(bs_conn *c, int64_t after, const char *reason, bs_reject_page *page,
                             bs_error *err);

/* bs_reject_page_free - free what @page holds (a zeroed page is fine). */
void bs_reject_page_free(bs_reject_page *page);

#endif
