/*
 * takeback.h - taking an event back out of a rater without the rater's own
 * dedupe: not part of the public API, not exported, not installed.
 *
 * The `billing rate` tool finds repeated ids after the fact with bounded
 * memory (billing/dedupe.c), so its rater keeps no ids and cannot tell
 * whether an event was added; subtracting one that was not would corrupt
 * the totals. That is why the public billing_rater_remove needs the dedupe
 * on and checks the id and the content, and why this unchecked variant is
 * reached only by programs linked with libbilling's objects statically
 * (the tool, the fuzz targets), whose callers know every event they take
 * back was added.
 */
#ifndef BILLING_TAKEBACK_H
#define BILLING_TAKEBACK_H

#include <stddef.h>

#include "billing.h"

/*
 * bl_rater_take_back - subtract @ev, which billing_rater_add rated
 * (BILLING_OK) on @r with dedupe off, exactly: the state afterwards is as
 * if it had never been added. Removing an event that was not added is
 * refused only when one of its aggregates is empty (BILLING_ERR_INVALID),
 * and otherwise corrupts the totals. Returns BILLING_OK, BILLING_ERR_STATE
 * (dedupe on), or the error billing_rater_add would give for @ev; nothing
 * changes on error.
 */
billing_status bl_rater_take_back(billing_rater *r, const billing_event *ev, char *errbuf,
                                  size_t errsize);

#endif /* BILLING_TAKEBACK_H */
