/*
 * md5.h - MD5 (RFC 1321) of a byte string, for the places that must
 * agree bit for bit with PostgreSQL's md5(): the content fingerprint of a
 * raw event (billing.event_fingerprint, doc/database.md), the drafts'
 * content hash (drafthash.c), the catalog files' digests (load.c). Not for
 * security: the store does not rely on MD5 resisting collisions (ids that
 * collide are handled, sql/migrations/0006_lean_events.sql).
 *
 * Pure functions, no state: safe from any thread.
 */
#ifndef BILLING_STORE_MD5_H
#define BILLING_STORE_MD5_H

#include <stddef.h>

#define BS_MD5_LEN 16

/* bs_md5 - the 16-byte digest of the @len bytes at @data into @out. */
void bs_md5(const void *data, size_t len, unsigned char out[BS_MD5_LEN]);

/*
 * bs_md5_hex - the md5 of the @len bytes at @data as PostgreSQL's md5()
 * writes it, 32 lower-case hex digits and a NUL, into @out (the drafts'
 * content hash, the catalog files' digests).
 */
void bs_md5_hex(const void *data, size_t len, char out[2 * BS_MD5_LEN + 1]);

#endif /* BILLING_STORE_MD5_H */
