/*
 * zones.h - IANA time zones from the system's compiled zoneinfo files.
 *
 * libbilling parses TZif bytes but does no I/O; this module finds and
 * reads the file for a name such as "Asia/Shanghai" in $TZDIR, or
 * /usr/share/zoneinfo when TZDIR is unset or empty.
 */
#ifndef BC_ZONES_H
#define BC_ZONES_H

#include <stddef.h>

#include "billing.h"

/* Longest zone name accepted (the longest IANA name is about 30 bytes). */
#define BC_ZONE_NAME_MAX 64
/* Largest TZif file read (the library's own bound). */
#define BC_ZONE_FILE_MAX (1024 * 1024)

/*
 * bc_zone_name_valid - non-zero if @name can be looked up: 1..64 bytes of
 * letters, digits and "/_-+.", not starting with '/' or '.', with no
 * empty, "." or ".." component (keeps lookups inside the zoneinfo tree),
 * and not host-dependent (bc_zone_host_dependent).
 */
int bc_zone_name_valid(const char *name);

/*
 * bc_zone_host_dependent - non-zero if @name means something that depends
 * on the host rather than an IANA zone: "localtime", "posixrules",
 * "Factory", or a name under "posix/" or "right/". Such names are refused
 * so that an account bills the same on every machine. Thread-safe.
 */
int bc_zone_host_dependent(const char *name);

/*
 * bc_zone_load - load zone @name. "UTC" needs no file. Returns a new zone
 * (caller frees with billing_zone_destroy) or NULL with a message naming
 * the zone and the file.
 */
billing_zone *bc_zone_load(const char *name, char *errbuf, size_t errsize);

/*
 * bc_zones: a set of loaded zones, each loaded once and owned by the set,
 * so that catalogs can borrow them. Not thread-safe while loading.
 */
typedef struct bc_zones bc_zones;

/* bc_zones_new - an empty set, or NULL when out of memory. */
bc_zones *bc_zones_new(void);

/* bc_zones_destroy - free the set and its zones; NULL is a no-op. */
void bc_zones_destroy(bc_zones *set);

/*
 * bc_zones_get - zone @name, loaded on first use. Returns a zone owned by
 * the set (valid until bc_zones_destroy) or NULL with a message.
 */
const billing_zone *bc_zones_get(bc_zones *set, const char *name, char *errbuf, size_t errsize);

#endif /* BC_ZONES_H */
