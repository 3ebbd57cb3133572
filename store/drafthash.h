/*
 * drafthash.h - the content hash of a draft invoice (private to store/):
 * what billing.invoices.content_hash holds and a re-close compares to
 * leave an unchanged draft alone. doc/database.md, "Month-end close".
 */
#ifndef BILLING_STORE_DRAFTHASH_H
#define BILLING_STORE_DRAFTHASH_H

#include "invoices.h"
#include "md5.h"

/*
 * bs_draft_hash - the content hash of draft @d into @hex (32 lower-case
 * hex digits and a NUL): the md5 of the draft as compact JSON with sorted
 * keys, byte for byte the text jansson's json_dumps(JSON_COMPACT |
 * JSON_SORT_KEYS) gave for the object drafts carried before, so that the
 * same invoice always gives the hash every earlier version stored.
 * Returns 0, or -1 if out of memory. Thread-safe (no shared state).
 */
int bs_draft_hash(const bs_draft *d, char hex[2 * BS_MD5_LEN + 1]);

#endif
