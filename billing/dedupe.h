/*
 * dedupe.h - finding repeated event ids among any number of events with
 * bounded memory: the permanent dedupe of `billing rate`, part of the
 * offline rater (rate.h), hence its prefix rate_dedupe_ (formats/' bc_
 * is the event streams').
 *
 * Remembering every id in memory costs memory in proportion to the
 * events; this module sorts instead. The caller rates each event as it
 * comes (with the rater's own dedupe off) and hands every rated one to
 * rate_dedupe_add. Records are kept in memory up to a budget, then sorted
 * by id and written to an unlinked temporary file (a run); when
 * RATE_DEDUPE_FANIN runs exist they are merged into one. rate_dedupe_finish
 * merges what is left and reports every later occurrence of an id, with
 * its encoded event, so that the caller can take it back
 * (billing_rater_take_back, billing.h: unchecked, the rater keeps no ids):
 *   - a duplicate when its content (the encoded event) equals the first
 *     occurrence's byte for byte;
 *   - a conflict otherwise.
 * "First" is the order of rate_dedupe_add calls. Ids are compared exactly
 * (a hash only orders them), so nothing is dropped on a hash collision.
 *
 * A record holds the id and where the event was read. The event itself
 * is stored only when the caller cannot read it again (stdin, a pipe);
 * otherwise it is read again through a callback, and only for ids that
 * occur more than once. So a record is 32 bytes plus the id in memory,
 * 40 plus the id in a temporary file (plus about 90 for a stored event).
 *
 * Memory: the budget, plus 16 KiB per run (where its slices of the hash
 * space begin), plus a 64 KiB block per merge input (at most
 * RATE_DEDUPE_FANIN + 1 of them per set; twice that in the two halves of
 * rate_dedupe_finish_many). Disk: the records, in the temporary
 * directory, freed by rate_dedupe_destroy or process exit.
 */
#ifndef BILLING_DEDUPE_H
#define BILLING_DEDUPE_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"

/* Smallest and largest memory budgets accepted. */
#define RATE_DEDUPE_MEMORY_MIN (64u * 1024u)
#define RATE_DEDUPE_MEMORY_MAX ((size_t)64 << 30)
/* Runs merged at once; more are first merged into one. */
#define RATE_DEDUPE_FANIN 64
/* Longest id accepted (libbilling's limit is shorter). */
#define RATE_DEDUPE_ID_MAX 1024

typedef struct rate_dedupe rate_dedupe;

typedef enum rate_dedupe_kind {
    RATE_DEDUPE_DUPLICATE = 1, /* same id, same content */
    RATE_DEDUPE_CONFLICT = 2   /* same id, different content */
} rate_dedupe_kind;

/* Where an event was read: handed back in hits and fetches. */
typedef struct rate_dedupe_where {
    uint32_t src;    /* the caller's source number */
    uint64_t pos;    /* its position for messages (a line number, an offset) */
    uint64_t offset; /* where to read it again (ignored when the event is stored) */
    uint64_t check;  /* the caller's check that what it reads again is what it read */
} rate_dedupe_where;

/* A later occurrence of an id, as reported by rate_dedupe_finish. */
typedef struct rate_dedupe_hit {
    rate_dedupe_kind kind;
    const char *id;             /* NUL-terminated */
    const unsigned char *event; /* this occurrence, as billing_event_encode wrote it */
    size_t event_len;
    rate_dedupe_where where; /* where this occurrence was read */
    rate_dedupe_where first; /* where the id's first occurrence was read */
} rate_dedupe_hit;

/*
 * rate_dedupe_fn - called once per later occurrence, in id-hash order
 * (deterministic for the same input); every hit of one id comes
 * together, in arrival order. Return 0 to go on; a positive value stops
 * rate_dedupe_finish, which returns it.
 */
typedef int (*rate_dedupe_fn)(void *arg, const rate_dedupe_hit *hit);

/*
 * rate_dedupe_fetch_fn - read again the event with id @id that was added
 * from @where without being stored, and encode it (billing_event_encode)
 * into @buf (BILLING_EVENT_WIRE_MAX bytes), its length in *@len. Returns
 * 0, or -1 with a message (the source changed or cannot be read).
 */
typedef int (*rate_dedupe_fetch_fn)(void *arg, const rate_dedupe_where *where, const char *id,
                                    unsigned char *buf, size_t *len, char *errbuf, size_t errsize);

typedef struct rate_dedupe_stats {
    uint64_t records; /* events added */
    uint64_t stored;  /* ... of which with the event stored */
    uint64_t fetched; /* events read again through the fetch callback */
    uint64_t runs;    /* runs written (including merged ones) */
    uint64_t merges;  /* merges of RATE_DEDUPE_FANIN runs into one */
    uint64_t spilled; /* bytes written to temporary files */
} rate_dedupe_stats;

/*
 * rate_dedupe_new - an empty set using at most @memory bytes (from
 * RATE_DEDUPE_MEMORY_MIN to RATE_DEDUPE_MEMORY_MAX) for records in memory,
 * with temporary files in @tmpdir, where it checks at once that a file
 * can be created. Returns NULL with a message.
 */
rate_dedupe *rate_dedupe_new(size_t memory, const char *tmpdir, char *errbuf, size_t errsize);

/*
 * rate_dedupe_add - remember the rated event @ev, read at @where. With
 * @store nonzero the event is stored in the record; otherwise the fetch
 * callback must be able to read it again from @where. May write a run.
 * Returns 0, or -1 with a message (id missing or longer than
 * RATE_DEDUPE_ID_MAX, I/O error such as a full disk, out of memory). After
 * an I/O error while merging runs, the set refuses every further call.
 */
int rate_dedupe_add(rate_dedupe *d, const billing_event *ev, const rate_dedupe_where *where,
                    int store, char *errbuf, size_t errsize);

/*
 * rate_dedupe_add_id - rate_dedupe_add for an event not stored (its source
 * can be read again), given by its id alone: @id_len bytes at @id, not
 * NUL-terminated, and @hash, which must be bc_hash_bytes(@id, @id_len)
 * (computed by the caller, possibly on another thread). Same returns.
 * Not thread-safe: a set takes its records from one thread, in the order
 * that defines "first".
 */
int rate_dedupe_add_id(rate_dedupe *d, const char *id, size_t id_len, uint64_t hash,
                       const rate_dedupe_where *where, char *errbuf, size_t errsize);

/*
 * rate_dedupe_finish - merge everything and call @fn for each later
 * occurrence of an id, fetching events that were not stored through
 * @fetch (only for ids that occur more than once). Call once, after the
 * last rate_dedupe_add. Returns 0, the positive value @fn returned, or -1
 * with a message (I/O error, or @fetch failed).
 */
int rate_dedupe_finish(rate_dedupe *d, rate_dedupe_fetch_fn fetch, rate_dedupe_fn fn, void *arg,
                       char *errbuf, size_t errsize);

/*
 * rate_dedupe_finish_many - rate_dedupe_finish over the records of @n_sets
 * sets (n_sets >= 1) together, as if one set had been given them all:
 * "first" is then the record with the lowest (where.src, where.offset),
 * which must be the order in which each set was given its records
 * (several threads, each adding the records of its chunks of the input,
 * in order). Finishes every set. With two sets or more, the merge runs
 * on two threads (the halves of the hash space); @fetch and @fn are
 * still called on the calling thread only, in the same order as one
 * merge. Same returns; fetches are counted in the first set's statistics.
 */
int rate_dedupe_finish_many(rate_dedupe *const *sets, size_t n_sets, rate_dedupe_fetch_fn fetch,
                            rate_dedupe_fn fn, void *arg, char *errbuf, size_t errsize);

/*
 * rate_dedupe_hash_check - a fixed 64-bit hash of @n bytes at @data, for the
 * `check` of a rate_dedupe_where: that a record read again is the one
 * rated. Four independent lanes, so that a line of some 200 bytes costs
 * a quarter of the serial chain of bc_hash_bytes (which orders the ids
 * and must not change: the output's order of repeats depends on it).
 * Not for ids; thread-safe.
 */
uint64_t rate_dedupe_hash_check(const void *data, size_t n);

/* rate_dedupe_get_stats - what the set did so far. */
void rate_dedupe_get_stats(const rate_dedupe *d, rate_dedupe_stats *out);

/* rate_dedupe_get_stats_many - what the @n_sets sets did so far, summed. */
void rate_dedupe_get_stats_many(rate_dedupe *const *sets, size_t n_sets, rate_dedupe_stats *out);

/* rate_dedupe_destroy - close the temporary files and free the set; NULL is a no-op. */
void rate_dedupe_destroy(rate_dedupe *d);

#endif /* BILLING_DEDUPE_H */
