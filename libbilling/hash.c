/*
 * hash.c - a fast byte hash and the string-to-index map.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"

uint64_t bl_hash_bytes(const void *p, size_t len, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h = seed ^ (UINT64_C(0x9e3779b97f4a7c15) * (len + 1));
    uint64_t w;

    /* Eight bytes at a time, then the tail; memcpy keeps it alignment-safe. */
    while (len >= 8) {
        memcpy(&w, b, 8);
        h = bl_hash_mix(h ^ w) + UINT64_C(0x9e3779b97f4a7c15);
        b += 8;
        len -= 8;
    }
    w = bl_load_tail(b, len);
    return bl_hash_mix(h ^ w ^ ((uint64_t)len << 56));
}

void bl_strmap_init(bl_strmap *m)
{
    memset(m, 0, sizeof(*m));
}

void bl_strmap_free(bl_strmap *m)
{
    free(m->slots);
    bl_strmap_init(m);
}

uint64_t bl_strmap_hash(const char *key)
{
    return bl_hash_bytes(key, strlen(key), 0);
}

size_t bl_strmap_find_hashed(const bl_strmap *m, const char *key, uint64_t hash,
                             bl_strmap_key_fn key_of, const void *ctx)
{
    const bl_strslot *s;
    size_t i;

    if (m->cap == 0)
        return (size_t)-1;
    i = (size_t)hash & (m->cap - 1);
    for (s = &m->slots[i]; s->index != 0; s = &m->slots[i]) {
        if (s->hash == hash && strcmp(key_of(ctx, s->index - 1), key) == 0)
            return s->index - 1;
        i = (i + 1) & (m->cap - 1);
    }
    return (size_t)-1;
}

size_t bl_strmap_find(const bl_strmap *m, const char *key, bl_strmap_key_fn key_of, const void *ctx)
{
    if (m->cap == 0)
        return (size_t)-1;
    return bl_strmap_find_hashed(m, key, bl_strmap_hash(key), key_of, ctx);
}

size_t bl_strmap_find_n(const bl_strmap *m, const char *key, size_t len, bl_strmap_key_fn key_of,
                        const void *ctx)
{
    uint64_t hash;
    const bl_strslot *s;
    const char *k;
    size_t i;

    if (m->cap == 0)
        return (size_t)-1;
    /* The hash bl_strmap_hash gives the same string, without its strlen;
       strncmp stops at the end of a shorter stored key. */
    hash = bl_hash_bytes(key, len, 0);
    i = (size_t)hash & (m->cap - 1);
    for (s = &m->slots[i]; s->index != 0; s = &m->slots[i]) {
        if (s->hash == hash) {
            k = key_of(ctx, s->index - 1);
            if (strncmp(k, key, len) == 0 && k[len] == '\0')
                return s->index - 1;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return (size_t)-1;
}

static void place(bl_strslot *slots, size_t cap, uint64_t h, size_t index)
{
    size_t i = (size_t)h & (cap - 1);

    while (slots[i].index != 0)
        i = (i + 1) & (cap - 1);
    slots[i].hash = h;
    slots[i].index = index;
}

static int grow(bl_strmap *m)
{
    size_t ncap = m->cap == 0 ? 16 : m->cap * 2;
    bl_strslot *slots;
    size_t i;

    if (ncap > SIZE_MAX / sizeof(*slots))
        return -1;
    /* Zeroed: an index of 0 marks an empty slot. */
    slots = calloc(ncap, sizeof(*slots));
    if (slots == NULL)
        return -1;
    for (i = 0; i < m->cap; i++) {
        if (m->slots[i].index != 0)
            place(slots, ncap, m->slots[i].hash, m->slots[i].index);
    }
    free(m->slots);
    m->slots = slots;
    m->cap = ncap;
    return 0;
}

int bl_strmap_insert_hashed(bl_strmap *m, uint64_t hash, size_t index)
{
    if ((m->count + 1) * 2 > m->cap && grow(m) != 0)
        return -1;
    place(m->slots, m->cap, hash, index + 1);
    m->count++;
    return 0;
}

int bl_strmap_insert(bl_strmap *m, const char *key, size_t index, bl_strmap_key_fn key_of,
                     const void *ctx)
{
    (void)key_of;
    (void)ctx;
    return bl_strmap_insert_hashed(m, bl_strmap_hash(key), index);
}
