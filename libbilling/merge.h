/*
 * merge.h - adding one rater's aggregates into another: not part of the
 * public API, not exported, not installed (as takeback.h).
 *
 * `billing rate -j N` rates the chunks of its input on N threads, one
 * rater each against one shared frozen catalog, and merges the raters at
 * the end. Aggregates are exact sums, so the merged rater holds exactly
 * what one rater given every event would hold, and gives the same
 * invoices (which are computed from the aggregates only).
 */
#ifndef BILLING_MERGE_H
#define BILLING_MERGE_H

#include <stddef.h>

#include "billing.h"

/*
 * bl_rater_merge - add every aggregate of @src (its sums, and its pieces so
 * that events can still be taken back from @dst), and its event count, to
 * @dst. Both raters must have been made from the same catalog and have
 * their dedupe off (BILLING_ERR_STATE otherwise: an id set cannot be
 * merged exactly this way). @src is left unchanged. Returns BILLING_OK,
 * BILLING_ERR_INVALID (another catalog), BILLING_ERR_TOO_LARGE (more than
 * BL_ATTRS_MAX model and region pairs together) or BILLING_ERR_NOMEM;
 * on error @dst holds part of @src and must be discarded. Not
 * thread-safe: nothing else may use @dst meanwhile; @src may be read by
 * other mergers at the same time.
 */
billing_status bl_rater_merge(billing_rater *dst, const billing_rater *src, char *errbuf,
                              size_t errsize);

#endif /* BILLING_MERGE_H */
