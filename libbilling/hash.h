/*
 * hash.h - hashing and a string-to-index map. Internal to libbilling.
 *
 * The map is open addressing with linear probing on a power-of-two table
 * kept at most half full; it stores indices into an array owned by the
 * caller, so the caller's objects never move because of the map.
 */
#ifndef BILLING_HASH_H
#define BILLING_HASH_H

#include <stddef.h>
#include <stdint.h>

#include <string.h>

/*
 * bl_load_tail - the @len (< 8) bytes at @p as a little-endian word, high
 * bytes zero: what memcpy into a zeroed word gives on x86, but with
 * fixed-size loads that compile to moves instead of a call to memcpy,
 * which dominated the hashing of short ids.
 */
static inline uint64_t bl_load_tail(const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t w = 0;
    uint32_t w4;
    uint16_t w2;
    unsigned shift = 0;

    if (len & 4) {
        memcpy(&w4, b, 4);
        w = w4;
        b += 4;
        shift = 32;
    }
    if (len & 2) {
        memcpy(&w2, b, 2);
        w |= (uint64_t)w2 << shift;
        b += 2;
        shift += 16;
    }
    if (len & 1)
        w |= (uint64_t)*b << shift;
    return w;
}

/* bl_hash_bytes - 64-bit hash of @len bytes at @p, mixed with @seed. */
uint64_t bl_hash_bytes(const void *p, size_t len, uint64_t seed);

/*
 * bl_hash_mix - finalise a 64-bit value into a well-spread hash (splitmix64's
 * finaliser: every input bit affects every output bit). Inline: the rater
 * calls it twice an event.
 */
static inline uint64_t bl_hash_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

/* One slot: the key's hash beside its index, so that a probe touches one cache line. */
typedef struct bl_strslot {
    uint64_t hash;
    size_t index; /* index + 1, 0 = empty */
} bl_strslot;

typedef struct bl_strmap {
    bl_strslot *slots;
    size_t cap; /* power of two or 0 */
    size_t count;
} bl_strmap;

/*
 * Lookup callback: returns the key string of the object at @index.
 */
typedef const char *(*bl_strmap_key_fn)(const void *ctx, size_t index);

void bl_strmap_init(bl_strmap *m);
void bl_strmap_free(bl_strmap *m);

/*
 * bl_strmap_find - the index stored for @key, or (size_t)-1 when absent.
 */
size_t bl_strmap_find(const bl_strmap *m, const char *key, bl_strmap_key_fn key_of,
                      const void *ctx);

/*
 * bl_strmap_find_n - the same for the @len bytes at @key (no NUL needed),
 * for callers that know the length.
 */
size_t bl_strmap_find_n(const bl_strmap *m, const char *key, size_t len, bl_strmap_key_fn key_of,
                        const void *ctx);

/*
 * bl_strmap_insert - remember that @key lives at @index (the key must not
 * be present). Returns 0, or -1 when out of memory (map unchanged).
 */
int bl_strmap_insert(bl_strmap *m, const char *key, size_t index, bl_strmap_key_fn key_of,
                     const void *ctx);

/*
 * The same with the key's hash computed once by the caller (bl_strmap_hash),
 * for a find followed by an insert of the same key.
 */
uint64_t bl_strmap_hash(const char *key);
size_t bl_strmap_find_hashed(const bl_strmap *m, const char *key, uint64_t hash,
                             bl_strmap_key_fn key_of, const void *ctx);
int bl_strmap_insert_hashed(bl_strmap *m, uint64_t hash, size_t index);

#endif /* BILLING_HASH_H */
