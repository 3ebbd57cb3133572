/*
 * load.h - put the catalog files that `billing rate` reads (price
 * book; accounts, subscriptions and credit grants) into the store.
 *
 * Idempotent: loading the same files again changes nothing. History is
 * never rewritten: a price version whose content changed becomes a new
 * revision (the old one stays, with what was rated against it); a plan or
 * credit grant that changed is refused; a subscription may only gain a
 * cancellation; accounts take their new currency, zone, tax rate and
 * parties (name, e-mail, billing address, tax id, language), the price
 * book's issuer its new fields and logo, display names their new text.
 * Everything is one transaction: on any error nothing is loaded.
 */
#ifndef BILLING_STORE_LOAD_H
#define BILLING_STORE_LOAD_H

#include <stddef.h>

#include "store.h"

/* What bs_load_catalog counts. */
typedef enum bs_load_kind {
    BS_LOAD_BOOKS = 0,
    BS_LOAD_PLANS,
    BS_LOAD_VERSIONS, /* "changed" = a new revision of an existing effective_from */
    BS_LOAD_ACCOUNTS,
    BS_LOAD_SUBSCRIPTIONS, /* "changed" = cancelled since the last load */
    BS_LOAD_GRANTS,
    BS_LOAD_ISSUERS, /* the seller of the book's invoices; "changed" = a field changed */
    BS_LOAD_NAMES,   /* display names of models, regions, plans; "changed" = renamed */
    BS_LOAD_KINDS
} bs_load_kind;

typedef struct bs_load_counts {
    size_t added[BS_LOAD_KINDS];
    size_t changed[BS_LOAD_KINDS];
    size_t unchanged[BS_LOAD_KINDS];
} bs_load_counts;

/* bs_load_kind_name - "price books", "plans", ...; static. */
const char *bs_load_kind_name(bs_load_kind kind);

/* Longest price book id (a catalog identifier: printable ASCII, no spaces). */
#define BS_BOOK_ID_MAX 128

/*
 * bs_load_catalog - validate @pricebook_path and, if non-NULL,
 * @accounts_path exactly as `billing rate` does (same parsers, same
 * library checks), then load them into price book @book_id in one
 * transaction (retried on transient failures). The accounts file is not
 * checked again when these same two files were the last loaded into
 * @book_id and nothing else wrote their rows since (migration 0020's
 * digest, looked up first in the transaction). Fills @counts. Returns
 * BS_OK; BS_ERR_INVALID for an invalid file (message names file and
 * field) or an instant with sub-microsecond digits (timestamptz cannot
 * hold it); BS_ERR_CONSTRAINT when the files would rewrite history
 * (message names the object); or a database error.
 */
bs_status bs_load_catalog(bs_conn *c, const char *book_id, const char *pricebook_path,
                          const char *accounts_path, bs_load_counts *counts, bs_error *err);

/*
 * bs_load_progress_fn - called by bs_load_catalog_progress after each
 * chunk of rows with the rows written so far and the rows of both files
 * (from the start again when the transaction is retried); in the calling
 * thread.
 */
typedef void (*bs_load_progress_fn)(void *arg, size_t done, size_t total);

/*
 * bs_load_catalog_progress - bs_load_catalog, calling @progress (if not
 * NULL) with @progress_arg as rows are written.
 */
bs_status bs_load_catalog_progress(bs_conn *c, const char *book_id, const char *pricebook_path,
                                   const char *accounts_path, bs_load_counts *counts,
                                   bs_load_progress_fn progress, void *progress_arg, bs_error *err);

/*
 * bs_decimal_canonical - @in ("+012.500") in canonical form ("12.5") into
 * @out (@size bytes): no '+', no leading zeros, no trailing fraction
 * zeros, "-0" as "0". Returns 0, or -1 if @in is not "[+-]digits[.digits]"
 * or @out is too small. Used for content hashes.
 */
int bs_decimal_canonical(const char *in, char *out, size_t size);

#endif /* BILLING_STORE_LOAD_H */
