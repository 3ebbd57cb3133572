/*
 * internal.h - declarations shared by libbilling's modules; not installed.
 *
 * Every module keeps its own private header (decimal.h, zone.h, ...);
 * this one holds what all of them need: error formatting and bounds.
 */
#ifndef BILLING_INTERNAL_H
#define BILLING_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "billing.h"

/* Bounds on identifiers and other strings from outside. */
#define BL_ID_MAX 128     /* account, resource, event, plan, grant ids */
#define BL_ATTR_MAX 64    /* model, region */
#define BL_DECIMAL_MAX 64 /* characters in a decimal argument */

#if defined(__GNUC__)
#define BL_PRINTF(a, b) __attribute__((format(printf, a, b)))
/* Inlined even where the compiler would not: for a hot path's few small steps. */
#define BL_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define BL_PRINTF(a, b)
#define BL_ALWAYS_INLINE inline
#endif

/*
 * bl_seterr - format a message into errbuf (if non-NULL and errsize > 0),
 * truncating safely, and return @status so callers can write
 * `return bl_seterr(errbuf, errsize, BILLING_ERR_INVALID, "...")`.
 */
billing_status bl_seterr(char *errbuf, size_t errsize, billing_status status, const char *fmt, ...)
    BL_PRINTF(4, 5);

/*
 * bl_valid_id - non-zero if @s is 1..BL_ID_MAX bytes of printable ASCII
 * without spaces.
 */
int bl_valid_id(const char *s);

/*
 * bl_valid_id_n - the same for the @n bytes at @s, whose length is known
 * (an event's fields): eight bytes at a time, for the per-event path.
 * bl_printable_n - non-zero if the @n bytes at @s are printable ASCII
 * (spaces allowed).
 */
int bl_valid_id_n(const char *s, size_t n);
int bl_printable_n(const char *s, size_t n);

/*
 * bl_upper_bound - the number of elements of the ascending array @v (@n
 * long) that are <= @t: the index of the first one after @t.
 */
size_t bl_upper_bound(const billing_time_t *v, size_t n, billing_time_t t);

#endif /* BILLING_INTERNAL_H */
