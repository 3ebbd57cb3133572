/*
 * dbcatalog.h - the rating catalog read back from the store: what `billing
 * load` wrote (one price book's versions in force, plans, the accounts in
 * the book's currency with their subscriptions and credit grants) as a
 * billing_catalog, for the ingest pipeline (billingd, `billing ingest`)
 * and for invoices and balances computed from stored aggregates.
 *
 * Price versions are named in the catalog by their label (as in the price
 * book file, so invoices read as `billing rate`'s do); the revision in
 * force of each (book, effective_from) is the one read, and its database
 * id is what usage_aggregates.price_version_id records.
 */
#ifndef BILLING_STORE_DBCATALOG_H
#define BILLING_STORE_DBCATALOG_H

#include <stdint.h>

#include "billing.h"
#include "store.h"

/* A catalog read from the store. Opaque; not thread-safe. */
typedef struct bs_catalog bs_catalog;

/*
 * bs_catalog_read - read price book @book_id (NULL: the only book in the
 * store; an error if there are several or none) with everything rating
 * needs, inside one REPEATABLE READ read-only snapshot so that the parts
 * agree. Zones are loaded from the system's zoneinfo. Returns a new
 * catalog (free with bs_catalog_free) or NULL with @err filled: a
 * database error, or BS_ERR_INVALID when the stored rows do not make a
 * valid catalog (message names the object). Blocks.
 */
bs_catalog *bs_catalog_read(bs_conn *c, const char *book_id, bs_error *err);

/* bs_catalog_free - free @cat and its zones; NULL is a no-op. Raters made from it must be gone. */
void bs_catalog_free(bs_catalog *cat);

/*
 * bs_catalog_lib - the billing_catalog (frozen once a rater was made from
 * it), owned by @cat. Several raters may share it.
 */
billing_catalog *bs_catalog_lib(bs_catalog *cat);

/* bs_catalog_book - the price book id read; owned by @cat. */
const char *bs_catalog_book(const bs_catalog *cat);

/* bs_catalog_currency - the book's currency code (3 letters, owned by @cat). */
const char *bs_catalog_currency(const bs_catalog *cat);

/* bs_catalog_rounding - the book's rounding mode. */
billing_rounding bs_catalog_rounding(const bs_catalog *cat);

/*
 * bs_catalog_version_id - the price_versions.id of the revision in force
 * of version @label, or -1 if @label is not one of the catalog's.
 */
int64_t bs_catalog_version_id(const bs_catalog *cat, const char *label);

/* bs_catalog_version_label - the label of price_versions.id @id, or NULL. */
const char *bs_catalog_version_label(const bs_catalog *cat, int64_t id);

/* bs_catalog_zone - the time zone of @account (owned by @cat), or NULL if unknown. */
const billing_zone *bs_catalog_zone(const bs_catalog *cat, const char *account);

/* Channel on which `billing load` announces a catalog change (LISTEN billing_catalog). */
#define BS_CATALOG_CHANNEL "billing_catalog"

#endif /* BILLING_STORE_DBCATALOG_H */
