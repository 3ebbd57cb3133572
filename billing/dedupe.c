/*
 * dedupe.c - bounded-memory dedupe by external sort; see dedupe.h.
 *
 * A record is a fixed header, the id and (when stored) the encoded event,
 * contiguous in the memory arena and in runs alike (in a run, after its
 * id hash, so that reading it back hashes nothing). Order: id hash, then
 * id length and bytes (exact), then arrival, so that all records of one
 * id are adjacent and the first to arrive comes first. Arrival is not
 * stored: the in-memory sort is stable, runs are merged oldest first on
 * ties, and a merge of runs replaces them in place.
 *
 * Runs are written and read back in BLOCK-sized pieces with write and
 * pread (no stdio: a record is some 50 bytes, and a call per record cost
 * more than the copy). Each run remembers where the records of each
 * slice of the hash space begin (SLICES, by the top bits of the hash).
 * So the final pass can take one slice from every run at once, keep
 * only the records whose hash occurs more than once (find_range), and
 * run in two halves on two threads (finish_halves). Merges of runs, and
 * slices too large for memory, go through a loser tree (tourney).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "dedupe.h"
#include "util.h"

/* Runs are written and read in blocks of this size (a record is far smaller: REC_MAX). */
#define BLOCK (64u * 1024u)
/*
 * Slices of the hash space by its top SLICE_BITS bits: each run knows
 * where each slice's records begin, so that the final merge can take the
 * records of one slice from every run at once (find_range) and run in
 * two halves (SLICES / 2) on two threads. 2048 slices leave some 5 000
 * records a slice at 10^7 events, which fit in the caches.
 */
#define SLICE_BITS 11
#define SLICES ((size_t)1 << SLICE_BITS)
/* Records ahead of the one being copied whose bytes are fetched into the cache. */
#define PREFETCH_AHEAD 16
/*
 * Share of the budget for the sort index (two arrays of 16 bytes per
 * record), in fifths; the rest holds the records. A record of an event
 * read again later is about 40 bytes, so the two fill up together.
 */
#define INDEX_FIFTHS 2

typedef struct rec_hdr {
    uint64_t pos;
    uint64_t offset;
    uint64_t check;
    uint32_t src;
    uint16_t id_len;
    uint16_t ev_len; /* 0: the event is not stored */
} rec_hdr;

/* A record in a run: its id hash, then the header, the id and the stored event. */
#define RUN_HDR (sizeof(uint64_t) + sizeof(rec_hdr))
/* Largest record in a run: hash and header, longest id, largest stored event. */
#define REC_MAX (RUN_HDR + RATE_DEDUPE_ID_MAX + BILLING_EVENT_WIRE_MAX)

/* A run: an unlinked temporary file of records in order. */
typedef struct run {
    int fd;
    uint64_t size;   /* bytes */
    uint64_t *slice; /* slice[s]: offset of slice s's first record (SLICES + 1, the last: size) */
} run;

/* A run being written, through a BLOCK buffer. */
typedef struct writer {
    run r;
    unsigned char *buf;
    size_t len;
    size_t next_slice; /* the first slice whose start is not yet known */
} writer;

/* One record in memory: its sort key and where it is in the arena. */
typedef struct mem_idx {
    uint64_t hash;
    size_t off;
} mem_idx;

/*
 * Radix sort of the index: RADIX_PASSES digits of RADIX_BITS, from the
 * top of the hash. A run has some 10^5 to 10^6 records, so that 22 bits
 * leave groups of equal top bits of one or two records (a third pass
 * cost more than sorting those); groups of up to INSERTION_MAX records
 * are sorted by insertion, larger ones (ids chosen to collide) by qsort.
 */
#define RADIX_BITS 11
#define RADIX_PASSES 2
#define RADIX_SHIFT (64 - RADIX_BITS * RADIX_PASSES)
#define INSERTION_MAX 16

struct rate_dedupe {
    char *tmpdir;
    unsigned char *arena;
    size_t arena_cap;
    size_t arena_len;
    mem_idx *idx;
    mem_idx *idx_tmp; /* the radix sort's other buffer */
    size_t idx_cap;
    size_t n_idx;
    run runs[RATE_DEDUPE_FANIN];
    size_t n_runs;
    int finished;
    int failed; /* an I/O error left the runs half read: refuse everything */
    rate_dedupe_stats stats;
};

/* A sorted stream of records: the memory arena or a part of a run. */
typedef struct cursor {
    const rate_dedupe *d;
    int fd;             /* -1: the arena, through d->idx */
    size_t next;        /* arena: next index entry ... */
    size_t stop;        /* ... up to this one */
    uint64_t at;        /* run: next byte to read ... */
    uint64_t end;       /* ... up to this one */
    unsigned char *buf; /* run: BLOCK bytes read ahead */
    size_t b_pos;       /* the next record in buf */
    size_t b_len;
    size_t age; /* ties go to the older stream: runs by creation, the arena last */
    int done;   /* no record left (the merge then puts it last) */
    uint64_t hash;
    rec_hdr h;
    const unsigned char *body; /* id then encoded event; valid until the next move */
} cursor;

/* ---------------------------------------------------------------------- */
/* Records and their order                                                 */
/* ---------------------------------------------------------------------- */

/* Order of two ids with their hashes: hash, then the id itself. */
static int id_cmp(uint64_t ah, const unsigned char *a, size_t alen, uint64_t bh,
                  const unsigned char *b, size_t blen)
{
    if (ah != bh)
        return ah < bh ? -1 : 1;
    if (alen != blen)
        return alen < blen ? -1 : 1;
    return memcmp(a, b, alen);
}

static int idx_cmp(const mem_idx *a, const mem_idx *b, const unsigned char *base);

/* qsort_r order of index entries: hash, id, then arrival (arena offset). */
static int idx_order(const void *x, const void *y, void *base)
{
    const mem_idx *a = x;
    const mem_idx *b = y;
    int c = idx_cmp(a, b, base);

    if (c != 0)
        return c;
    return (a->off > b->off) - (a->off < b->off);
}

static int idx_cmp(const mem_idx *a, const mem_idx *b, const unsigned char *base)
{
    rec_hdr ha;
    rec_hdr hb;

    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    memcpy(&ha, base + a->off, sizeof(ha));
    memcpy(&hb, base + b->off, sizeof(hb));
    return id_cmp(a->hash, base + a->off + sizeof(ha), ha.id_len, b->hash,
                  base + b->off + sizeof(hb), hb.id_len);
}

static size_t rec_size(const rec_hdr *h)
{
    return sizeof(*h) + h->id_len + h->ev_len;
}

/* ---------------------------------------------------------------------- */
/* The check hash                                                          */
/* ---------------------------------------------------------------------- */

#define CHECK_M1 UINT64_C(0xbf58476d1ce4e5b9)
#define CHECK_M2 UINT64_C(0x94d049bb133111eb)

/*
 * One lane's step: add the 8 bytes at @p and multiply by an odd constant,
 * a bijection of the lane for each word, so that changing one word always
 * changes the lane (the final mixing spreads it to every bit).
 */
static uint64_t check_step(uint64_t h, const unsigned char *p)
{
    uint64_t w;

    memcpy(&w, p, 8);
    return (h + w) * CHECK_M1;
}

uint64_t rate_dedupe_hash_check(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t a = UINT64_C(0x9e3779b97f4a7c15) ^ ((uint64_t)n * CHECK_M2);
    uint64_t b = UINT64_C(0x6a09e667f3bcc909);
    uint64_t c = UINT64_C(0xbb67ae8584caa73b);
    uint64_t e = UINT64_C(0x3c6ef372fe94f82b);
    uint64_t w = 0;

    for (; n >= 32; p += 32, n -= 32) {
        a = check_step(a, p);
        b = check_step(b, p + 8);
        c = check_step(c, p + 16);
        e = check_step(e, p + 24);
    }
    for (; n >= 8; p += 8, n -= 8)
        a = check_step(a, p);
    memcpy(&w, p, n);
    a ^= (b << 1 | b >> 63) ^ (c << 7 | c >> 57) ^ (e << 13 | e >> 51);
    a = (a ^ w) * CHECK_M2;
    a ^= a >> 29;
    a *= CHECK_M1;
    return a ^ (a >> 32);
}

/* ---------------------------------------------------------------------- */
/* Set                                                                     */
/* ---------------------------------------------------------------------- */

static int run_open(const rate_dedupe *d, int *fd, char *errbuf, size_t errsize);

/* The slice of the hash @hash. */
static inline size_t slice_of(uint64_t hash)
{
    return (size_t)(hash >> (64 - SLICE_BITS));
}

static void run_close(run *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    free(r->slice);
    r->slice = NULL;
}

rate_dedupe *rate_dedupe_new(size_t memory, const char *tmpdir, char *errbuf, size_t errsize)
{
    rate_dedupe *d;
    int probe;

    if (memory < RATE_DEDUPE_MEMORY_MIN || memory > RATE_DEDUPE_MEMORY_MAX) {
        bc_seterr(errbuf, errsize, "dedupe memory: %u bytes to %llu GiB", RATE_DEDUPE_MEMORY_MIN,
                  (unsigned long long)(RATE_DEDUPE_MEMORY_MAX >> 30));
        return NULL;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        goto nomem;
    d->idx_cap = memory / 5 * INDEX_FIFTHS / (2 * sizeof(mem_idx));
    d->arena_cap = memory - d->idx_cap * 2 * sizeof(mem_idx);
    d->tmpdir = strdup(tmpdir);
    /* Untouched pages cost nothing: a small input uses little of the budget. */
    d->arena = malloc(d->arena_cap);
    d->idx = malloc(d->idx_cap * sizeof(mem_idx));
    d->idx_tmp = malloc(d->idx_cap * sizeof(mem_idx));
    if (d->tmpdir == NULL || d->arena == NULL || d->idx == NULL || d->idx_tmp == NULL)
        goto nomem;
    /* Find out now, not after reading everything, if runs cannot be written. */
    if (run_open(d, &probe, errbuf, errsize) != 0) {
        rate_dedupe_destroy(d);
        return NULL;
    }
    close(probe);
    return d;
nomem:
    rate_dedupe_destroy(d);
    bc_seterr(errbuf, errsize, "dedupe: out of memory");
    return NULL;
}

void rate_dedupe_destroy(rate_dedupe *d)
{
    size_t i;

    if (d == NULL)
        return;
    for (i = 0; i < d->n_runs; i++)
        run_close(&d->runs[i]);
    free(d->tmpdir);
    free(d->arena);
    free(d->idx);
    free(d->idx_tmp);
    free(d);
}

void rate_dedupe_get_stats(const rate_dedupe *d, rate_dedupe_stats *out)
{
    *out = d->stats;
}

void rate_dedupe_get_stats_many(rate_dedupe *const *sets, size_t n_sets, rate_dedupe_stats *out)
{
    size_t i;

    memset(out, 0, sizeof(*out));
    for (i = 0; i < n_sets; i++) {
        out->records += sets[i]->stats.records;
        out->stored += sets[i]->stats.stored;
        out->fetched += sets[i]->stats.fetched;
        out->runs += sets[i]->stats.runs;
        out->merges += sets[i]->stats.merges;
        out->spilled += sets[i]->stats.spilled;
    }
}

/* ---------------------------------------------------------------------- */
/* Runs                                                                    */
/* ---------------------------------------------------------------------- */

/* A new unlinked temporary file in *@fd. Returns 0 or -1 with a message. */
static int run_open(const rate_dedupe *d, int *fd, char *errbuf, size_t errsize)
{
    char path[4096];

    if (snprintf(path, sizeof(path), "%s/billing-dedupe-XXXXXX", d->tmpdir) >= (int)sizeof(path))
        return bc_seterr(errbuf, errsize, "temporary directory %s: path too long", d->tmpdir);
    *fd = mkstemp(path);
    if (*fd < 0)
        return bc_seterr(errbuf, errsize, "temporary file in %s: %s", d->tmpdir, strerror(errno));
    unlink(path);
    return 0;
}

static int write_error(const rate_dedupe *d, char *errbuf, size_t errsize)
{
    bc_seterr(errbuf, errsize, "writing a temporary file in %s: %s", d->tmpdir,
              errno ? strerror(errno) : "write failed");
    return -1;
}

/* A new run to write into @w. Returns 0 or -1 with a message. */
static int writer_open(const rate_dedupe *d, writer *w, char *errbuf, size_t errsize)
{
    memset(w, 0, sizeof(*w));
    w->r.fd = -1;
    w->buf = malloc(BLOCK);
    w->r.slice = malloc((SLICES + 1) * sizeof(*w->r.slice));
    if (w->buf == NULL || w->r.slice == NULL) {
        free(w->buf);
        free(w->r.slice);
        w->buf = NULL;
        w->r.slice = NULL;
        return bc_seterr(errbuf, errsize, "dedupe: out of memory");
    }
    if (run_open(d, &w->r.fd, errbuf, errsize) != 0) {
        free(w->buf);
        free(w->r.slice);
        w->buf = NULL;
        w->r.slice = NULL;
        return -1;
    }
    return 0;
}

/* Write out the buffer of @w. Returns 0, or -1 with errno set. */
static int writer_flush(writer *w)
{
    size_t done = 0;
    ssize_t k;

    while (done < w->len) {
        k = write(w->r.fd, w->buf + done, w->len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        done += (size_t)k;
    }
    w->r.size += w->len;
    w->len = 0;
    return 0;
}

/*
 * Append a record (id hash @hash, header @h, @body) to @w, its hash
 * first: reading the run back then costs no hashing of the id (8 bytes
 * more a record to write and read are cheaper than hashing it again).
 * Returns 0, or -1 with errno set.
 */
static int writer_put(writer *w, uint64_t hash, const rec_hdr *h, const unsigned char *body)
{
    size_t body_len = (size_t)h->id_len + h->ev_len;
    size_t s = slice_of(hash);
    unsigned char *at;

    if (w->len + RUN_HDR + body_len > BLOCK && writer_flush(w) != 0)
        return -1;
    /* Records come in hash order: this one starts every slice up to its own. */
    while (w->next_slice <= s)
        w->r.slice[w->next_slice++] = w->r.size + w->len;
    at = w->buf + w->len;
    memcpy(at, &hash, sizeof(hash));
    memcpy(at + sizeof(hash), h, sizeof(*h));
    memcpy(at + RUN_HDR, body, body_len);
    w->len += RUN_HDR + body_len;
    return 0;
}

/* Give up the run being written. */
static void writer_abort(writer *w)
{
    run_close(&w->r);
    free(w->buf);
    w->buf = NULL;
}

/* Finish the run of @w into *@out. Returns 0, or -1 with a message (the run closed). */
static int writer_end(rate_dedupe *d, writer *w, run *out, char *errbuf, size_t errsize)
{
    errno = 0;
    if (writer_flush(w) != 0) {
        write_error(d, errbuf, errsize);
        writer_abort(w);
        return -1;
    }
    while (w->next_slice <= SLICES)
        w->r.slice[w->next_slice++] = w->r.size;
    free(w->buf);
    w->buf = NULL;
    *out = w->r;
    return 0;
}

/* Sort @n index entries (a few) into idx_order, in place. */
static void insertion_sort(mem_idx *a, size_t n, const unsigned char *base)
{
    size_t i;
    size_t j;
    mem_idx x;

    for (i = 1; i < n; i++) {
        x = a[i];
        for (j = i; j > 0 && idx_order(&a[j - 1], &x, (void *)base) > 0; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Digit @pass of @hash for the radix sort (pass 0: the lowest one sorted on). */
static inline size_t radix_digit(uint64_t hash, int pass)
{
    return (size_t)(hash >> (RADIX_SHIFT + (unsigned)pass * RADIX_BITS)) & ((1u << RADIX_BITS) - 1);
}

/*
 * Sort the records in memory. The hashes are uniform, so a stable LSD
 * radix sort on their top bits leaves only rare runs of equal top bits,
 * which an insertion sort puts in full order (hash, id, arrival). Records
 * were added in arrival order, and stability keeps it.
 */
static void sort_memory(rate_dedupe *d)
{
    uint32_t counts[RADIX_PASSES][1u << RADIX_BITS];
    uint32_t *count;
    mem_idx *src = d->idx;
    mem_idx *dst = d->idx_tmp;
    mem_idx *t;
    size_t n = d->n_idx;
    size_t i;
    size_t j;
    size_t k;
    uint32_t sum;
    uint32_t c;
    int pass;

    /* Every pass's digit counted in one read of the index. */
    memset(counts, 0, sizeof(counts));
    for (i = 0; i < n; i++) {
        for (pass = 0; pass < RADIX_PASSES; pass++)
            counts[pass][radix_digit(src[i].hash, pass)]++;
    }
    for (pass = 0; pass < RADIX_PASSES; pass++) {
        count = counts[pass];
        for (sum = 0, k = 0; k < (1u << RADIX_BITS); k++) {
            c = count[k];
            count[k] = sum;
            sum += c;
        }
        for (i = 0; i < n; i++)
            dst[count[radix_digit(src[i].hash, pass)]++] = src[i];
        t = src;
        src = dst;
        dst = t;
    }
    /*
     * Groups of equal top bits: rare by chance, but ids can be chosen to
     * collide (the hash has no key), so they are sorted in O(k log k).
     * The arena offset breaks ties: records were appended in arrival order.
     */
    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && (src[j].hash >> RADIX_SHIFT) == (src[i].hash >> RADIX_SHIFT); j++)
            ;
        if (j - i > INSERTION_MAX)
            qsort_r(src + i, j - i, sizeof(mem_idx), idx_order, d->arena);
        else if (j - i > 1)
            insertion_sort(src + i, j - i, d->arena);
    }
    /* The passes alternate the two buffers: the result is in src. */
    d->idx_tmp = dst;
    d->idx = src;
}

static int merge_runs(rate_dedupe *d, char *errbuf, size_t errsize);

/*
 * Fetch into the cache the record of index entry @i: its header and the
 * start of its id, which straddle two cache lines one time in two.
 */
static inline void prefetch_record(const rate_dedupe *d, size_t i)
{
    const unsigned char *rec = d->arena + d->idx[i].off;

    __builtin_prefetch(rec);
    __builtin_prefetch(rec + sizeof(rec_hdr) + 8);
}

/* Sort the records in memory into a new run and empty the arena. */
static int spill(rate_dedupe *d, char *errbuf, size_t errsize)
{
    writer w;
    size_t i;
    const unsigned char *rec;
    rec_hdr h;

    if (d->n_runs == RATE_DEDUPE_FANIN && merge_runs(d, errbuf, errsize) != 0) {
        d->failed = 1;
        return -1;
    }
    if (writer_open(d, &w, errbuf, errsize) != 0)
        return -1;
    sort_memory(d);
    errno = 0;
    for (i = 0; i < d->n_idx; i++) {
        /* In hash order the records are scattered over the arena: fetch ahead. */
        if (i + PREFETCH_AHEAD < d->n_idx)
            prefetch_record(d, i + PREFETCH_AHEAD);
        rec = d->arena + d->idx[i].off;
        memcpy(&h, rec, sizeof(h));
        if (writer_put(&w, d->idx[i].hash, &h, rec + sizeof(h)) != 0) {
            writer_abort(&w);
            return write_error(d, errbuf, errsize);
        }
    }
    if (writer_end(d, &w, &d->runs[d->n_runs], errbuf, errsize) != 0)
        return -1;
    d->stats.spilled += d->runs[d->n_runs].size;
    d->stats.runs++;
    d->n_runs++;
    d->n_idx = 0;
    d->arena_len = 0;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Adding                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * Append a record of @id (hashed by the caller with bc_hash_bytes) and,
 * with @ev, its encoded event. Returns 0 or -1 with a message.
 */
static inline int add_record(rate_dedupe *d, const char *id, size_t id_len, uint64_t hash,
                             const billing_event *ev, const rate_dedupe_where *where, char *errbuf,
                             size_t errsize)
{
    size_t len = 0;
    size_t room = sizeof(rec_hdr) + id_len + (ev != NULL ? BILLING_EVENT_WIRE_MAX : 0);
    unsigned char *rec;
    rec_hdr h;

    if (d->finished || d->failed)
        return bc_seterr(errbuf, errsize, "dedupe: add after %s",
                         d->failed ? "an error" : "finish");
    if (id_len == 0 || id_len > RATE_DEDUPE_ID_MAX)
        return bc_seterr(errbuf, errsize, "event '%.64s': field 'id': %s", id,
                         id_len == 0 ? "missing" : "too long");
    if ((d->arena_cap - d->arena_len < room || d->n_idx == d->idx_cap) &&
        spill(d, errbuf, errsize) != 0)
        return -1;
    rec = d->arena + d->arena_len;
    memcpy(rec + sizeof(h), id, id_len);
    if (ev != NULL && billing_event_encode(ev, rec + sizeof(h) + id_len, BILLING_EVENT_WIRE_MAX,
                                           &len) != BILLING_OK)
        return bc_seterr(errbuf, errsize, "event '%s': cannot be encoded", id);
    h.pos = where->pos;
    h.offset = where->offset;
    h.check = where->check;
    h.src = where->src;
    h.id_len = (uint16_t)id_len;
    h.ev_len = (uint16_t)len;
    memcpy(rec, &h, sizeof(h));
    d->idx[d->n_idx].hash = hash;
    d->idx[d->n_idx].off = d->arena_len;
    d->n_idx++;
    d->arena_len += rec_size(&h);
    d->stats.records++;
    d->stats.stored += ev != NULL;
    return 0;
}

int rate_dedupe_add(rate_dedupe *d, const billing_event *ev, const rate_dedupe_where *where,
                    int store, char *errbuf, size_t errsize)
{
    const char *id = billing_event_id(ev);
    size_t id_len = strlen(id);

    /* A fixed hash: the output order is the same on every run. */
    return add_record(d, id, id_len, bc_hash_bytes(id, id_len), store ? ev : NULL, where, errbuf,
                      errsize);
}

int rate_dedupe_add_id(rate_dedupe *d, const char *id, size_t id_len, uint64_t hash,
                       const rate_dedupe_where *where, char *errbuf, size_t errsize)
{
    return add_record(d, id, id_len, hash, NULL, where, errbuf, errsize);
}

/* ---------------------------------------------------------------------- */
/* Merging                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * Make @need bytes of @c's run available at c->buf + c->b_pos, reading on
 * from the file. Returns 1, 0 at the end of its range with no byte left,
 * or -1 (read error, or a record cut short: errno EIO).
 */
static int cursor_fill(cursor *c, size_t need)
{
    size_t want;
    ssize_t k;

    if (c->b_len - c->b_pos >= need)
        return 1;
    memmove(c->buf, c->buf + c->b_pos, c->b_len - c->b_pos);
    c->b_len -= c->b_pos;
    c->b_pos = 0;
    if (c->b_len < need && c->at < c->end) {
        want = BLOCK - c->b_len;
        if (want > c->end - c->at)
            want = (size_t)(c->end - c->at);
        /* The run has those bytes: a short read means it was damaged. */
        k = bc_read_full(c->fd, c->buf + c->b_len, want, (int64_t)c->at);
        if (k != (ssize_t)want) {
            if (k >= 0)
                errno = EIO;
            return -1;
        }
        c->b_len += want;
        c->at += want;
    }
    if (c->b_len >= need)
        return 1;
    if (c->b_len == 0)
        return 0;
    errno = EIO;
    return -1;
}

/* The next record of a run. Returns 1, 0 (the end) or -1 (read error). */
static int run_next(cursor *c)
{
    size_t body;
    int rc = cursor_fill(c, RUN_HDR);

    if (rc <= 0)
        return rc;
    memcpy(&c->hash, c->buf + c->b_pos, sizeof(c->hash));
    memcpy(&c->h, c->buf + c->b_pos + sizeof(c->hash), sizeof(c->h));
    body = (size_t)c->h.id_len + c->h.ev_len;
    if (c->h.id_len == 0 || c->h.id_len > RATE_DEDUPE_ID_MAX ||
        c->h.ev_len > BILLING_EVENT_WIRE_MAX || cursor_fill(c, RUN_HDR + body) != 1) {
        errno = EIO; /* a run we wrote ourselves came back short or damaged */
        return -1;
    }
    c->body = c->buf + c->b_pos + RUN_HDR;
    c->b_pos += RUN_HDR + body;
    return 1;
}

/* Move @c to its next record. Returns 1 (a record), 0 (the end) or -1 (read error). */
static int cursor_next(cursor *c)
{
    const rate_dedupe *d = c->d;
    const unsigned char *rec;

    if (c->fd >= 0)
        return run_next(c);
    if (c->next == c->stop)
        return 0;
    /* The merge takes the arena in hash order, all over it: fetch ahead. */
    if (c->next + PREFETCH_AHEAD < c->stop)
        prefetch_record(d, c->next + PREFETCH_AHEAD);
    c->hash = d->idx[c->next].hash;
    rec = d->arena + d->idx[c->next++].off;
    memcpy(&c->h, rec, sizeof(c->h));
    c->body = rec + sizeof(c->h);
    return 1;
}

/* The first entry of the sorted index of @d in slice @s or after (SLICES: the end). */
static size_t idx_slice(const rate_dedupe *d, size_t s)
{
    size_t lo = 0;
    size_t hi = d->n_idx;
    size_t mid;

    if (s >= SLICES)
        return d->n_idx;
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        if (slice_of(d->idx[mid].hash) < s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * Set @c on the records of slices @lo to @hi (excluded) of run @i of @d
 * (i == d->n_runs: its sorted arena). Returns 0, or -1 when out of memory.
 */
static int cursor_init(cursor *c, const rate_dedupe *d, size_t i, size_t lo, size_t hi)
{
    c->d = d;
    c->fd = -1;
    if (i == d->n_runs) {
        c->next = idx_slice(d, lo);
        c->stop = idx_slice(d, hi);
        return 0;
    }
    c->fd = d->runs[i].fd;
    c->at = d->runs[i].slice[lo];
    c->end = d->runs[i].slice[hi];
    c->buf = malloc(BLOCK);
    return c->buf != NULL ? 0 : -1;
}

/*
 * Ties (one id): which of records @a and @b, from merge inputs @a_age and
 * @b_age, came first (negative: @a). In one set (@same_set), by arrival
 * (runs by creation, the arena last: what the age says); across the sets
 * of rate_dedupe_finish_many, by source, then offset, which is the input's
 * order whichever set took the record (each set got its records in that
 * order, so the two agree). 0 for records of one input: their order there
 * decides. The merge (cursor_less) and the slices (ent_order) share it.
 */
static int first_came(int same_set, const rec_hdr *a, size_t a_age, const rec_hdr *b, size_t b_age)
{
    if (!same_set && a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (!same_set && a->offset != b->offset)
        return a->offset < b->offset ? -1 : 1;
    return (a_age > b_age) - (a_age < b_age);
}

static int cursor_less(const cursor *a, const cursor *b)
{
    int c = id_cmp(a->hash, a->body, a->h.id_len, b->hash, b->body, b->h.id_len);

    if (c != 0)
        return c < 0;
    return first_came(a->d == b->d, &a->h, a->age, &b->h, b->age) < 0;
}

/*
 * The merge's order as a tournament ("loser tree"): each inner node of a
 * complete binary tree over the k inputs keeps the input that lost there,
 * the winner (the least record) apart. Taking the winner's next record
 * costs one comparison per level, where a binary heap costs two, and
 * nearly always a comparison of two hashes. cursor_less is a total order,
 * so the records come out in the same order as with a heap.
 */
typedef struct tourney {
    cursor *cur;   /* the inputs; an exhausted one is done */
    uint64_t *key; /* key[i]: cur[i].hash, UINT64_MAX once done (compact: one load a match) */
    size_t k;
    size_t *loser; /* loser[1..k-1]: the inner nodes */
    size_t winner;
} tourney;

/* comes_first on equal hashes: an exhausted input comes last. */
static int comes_first_tie(const cursor *x, const cursor *y)
{
    if (y->done)
        return !x->done || x->age < y->age;
    if (x->done)
        return 0;
    return cursor_less(x, y);
}

/* Whether input @a's record comes before input @b's. */
static inline int comes_first(const tourney *t, size_t a, size_t b)
{
    if (t->key[a] != t->key[b])
        return t->key[a] < t->key[b];
    return comes_first_tie(&t->cur[a], &t->cur[b]);
}

/* Play the matches below @node; returns the winner there. */
static size_t tourney_build(tourney *t, size_t node)
{
    size_t l;
    size_t r;

    if (node >= t->k)
        return node - t->k;
    l = tourney_build(t, 2 * node);
    r = tourney_build(t, 2 * node + 1);
    if (comes_first(t, l, r)) {
        t->loser[node] = r;
        return l;
    }
    t->loser[node] = l;
    return r;
}

/*
 * The winner moved on: replay its matches up to the root. With random
 * hashes each match goes either way by chance, so a branch on it would
 * be mispredicted half the time: the usual case (different hashes) picks
 * winner and loser with a mask instead.
 */
static void tourney_replay(tourney *t)
{
    size_t w = t->winner;
    size_t node = (w + t->k) / 2;
    size_t x;
    size_t lo;
    size_t mask;
    int first;

    for (; node >= 1; node /= 2) {
        x = t->loser[node];
        if (__builtin_expect(t->key[x] == t->key[w], 0))
            first = comes_first_tie(&t->cur[x], &t->cur[w]);
        else
            first = t->key[x] < t->key[w];
        mask = (size_t)0 - (size_t)first; /* all ones when x comes first */
        lo = (w & mask) | (x & ~mask);
        w = (x & mask) | (w & ~mask);
        t->loser[node] = lo;
    }
    t->winner = w;
}

/* Move input @i of @t on: 1, 0 (exhausted: it comes last from now on) or -1 (read error). */
static int tourney_next(tourney *t, size_t i)
{
    int more = cursor_next(&t->cur[i]);

    t->cur[i].done = more == 0;
    t->key[i] = more == 1 ? t->cur[i].hash : UINT64_MAX;
    return more;
}

typedef int (*visit_fn)(void *arg, const cursor *c);

/*
 * Merge the runs of the @n_sets sets (and their arenas' records when
 * @with_memory), the records of slices @lo to @hi (excluded), in order,
 * calling @visit on each record. Returns 0, -1 for a read error or no
 * memory (message written), or what @visit returned. Only reads the sets:
 * two merges of different slices may run at once.
 */
static int merge_sets(rate_dedupe *const *sets, size_t n_sets, int with_memory, size_t lo,
                      size_t hi, visit_fn visit, void *arg, char *errbuf, size_t errsize)
{
    size_t total = 0;
    cursor *cur;
    tourney t;
    size_t k = 0;
    size_t i;
    size_t s;
    int rc = 0;

    for (s = 0; s < n_sets; s++)
        total += sets[s]->n_runs + (with_memory ? 1 : 0);
    cur = calloc(total + 1, sizeof(*cur));
    t.loser = calloc(total + 1, sizeof(*t.loser));
    t.key = calloc(total + 1, sizeof(*t.key));
    if (cur == NULL || t.loser == NULL || t.key == NULL)
        goto nomem;
    for (s = 0; s < n_sets; s++) {
        for (i = 0; i < sets[s]->n_runs + (with_memory ? 1 : 0); i++) {
            cur[k].age = k;
            if (cursor_init(&cur[k++], sets[s], i, lo, hi) != 0)
                goto nomem;
        }
    }
    t.cur = cur;
    t.k = k;
    for (i = 0; i < k; i++) {
        if (tourney_next(&t, i) < 0)
            goto read_error;
    }
    if (k == 0)
        goto done;
    t.winner = tourney_build(&t, 1);
    while (!cur[t.winner].done) {
        rc = visit(arg, &cur[t.winner]);
        if (rc != 0)
            goto done;
        if (tourney_next(&t, t.winner) < 0)
            goto read_error;
        tourney_replay(&t);
    }
    goto done;
nomem:
    bc_seterr(errbuf, errsize, "dedupe: out of memory");
    rc = -1;
    goto done;
read_error:
    bc_seterr(errbuf, errsize, "reading a temporary file in %s: %s", sets[0]->tmpdir,
              strerror(errno));
    rc = -1;
done:
    for (i = 0; cur != NULL && i < k; i++)
        free(cur[i].buf);
    free(cur);
    free(t.loser);
    free(t.key);
    return rc;
}

/*
 * Finding repeats slice by slice (find_range). The records of one slice,
 * from every run (one read each: a run's slice is contiguous) and every
 * arena, usually fit in the memory the sort index no longer needs: there
 * a table of hashes finds the records whose hash occurs more than once,
 * and only those are sorted (hash, id, then first arrival, as
 * cursor_less orders) and visited. A record whose hash occurs once has no
 * repeat, and visit_group and keep_repeats need to see only the others:
 * the same hits, in the same order, as a merge of every record, for the
 * cost of a table insert a record instead of a tournament. Slices that do
 * not fit (a small budget, ids chosen to share a slice) are merged as
 * before (merge_sets).
 */

/* A record of the slice: its hash, its header (and body after it), its input, its place there. */
typedef struct batch_ent {
    uint64_t hash;
    const unsigned char *rec;
    uint32_t age; /* the merge input, numbered as merge_sets does */
    uint32_t seq; /* the record's place in the slice; REPEAT: its hash occurs again */
} batch_ent;

#define REPEAT (UINT32_C(1) << 31)

/* How slice @s lays out in the memory of find_range: entries, then the hash table, then the bytes. */
typedef struct slice_plan {
    size_t bytes; /* of its records in the runs */
    size_t n_max; /* records at most */
    size_t table; /* slots of the hash table, a power of two */
} slice_plan;

/* Plan slice @s of @sets in @cap bytes; 1 if it fits. */
static int slice_fits(rate_dedupe *const *sets, size_t n_sets, size_t s, size_t cap, slice_plan *p)
{
    size_t t;
    size_t i;
    size_t in_memory = 0;

    p->bytes = 0;
    for (t = 0; t < n_sets; t++) {
        for (i = 0; i < sets[t]->n_runs; i++)
            p->bytes += (size_t)(sets[t]->runs[i].slice[s + 1] - sets[t]->runs[i].slice[s]);
        in_memory += idx_slice(sets[t], s + 1) - idx_slice(sets[t], s);
    }
    if (p->bytes > cap)
        return 0;
    p->n_max = p->bytes / (RUN_HDR + 1) + in_memory;
    for (p->table = 16; p->table < 2 * p->n_max; p->table *= 2)
        ;
    return p->n_max <= cap / sizeof(batch_ent) &&
           p->n_max * sizeof(batch_ent) + p->table * sizeof(uint32_t) + p->bytes <= cap;
}

/* qsort_r order of the repeated records of a slice: as cursor_less (@arg: each input's set). */
static int ent_order(const void *x, const void *y, void *arg)
{
    const batch_ent *a = x;
    const batch_ent *b = y;
    const uint32_t *set_of = arg;
    rec_hdr ha;
    rec_hdr hb;
    int c;

    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    memcpy(&ha, a->rec, sizeof(ha));
    memcpy(&hb, b->rec, sizeof(hb));
    c = id_cmp(a->hash, a->rec + sizeof(ha), ha.id_len, b->hash, b->rec + sizeof(hb), hb.id_len);
    if (c == 0)
        c = first_came(set_of[a->age] == set_of[b->age], &ha, a->age, &hb, b->age);
    if (c != 0)
        return c;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/*
 * Read the run bytes at @at, @len of them, into @buf and add their
 * records (all of slice @s) to @ent. Returns 0, or -1 (read error, or a
 * damaged run: errno EIO).
 */
static int slice_read(const run *r, size_t s, unsigned char *buf, uint32_t age, batch_ent *ent,
                      size_t *n)
{
    uint64_t at = r->slice[s];
    size_t len = (size_t)(r->slice[s + 1] - at);
    ssize_t k = bc_read_full(r->fd, buf, len, (int64_t)at);
    const unsigned char *q = buf;
    const unsigned char *end = buf + len;
    uint64_t hash;
    rec_hdr h;

    if (k != (ssize_t)len) {
        if (k >= 0)
            errno = EIO;
        return -1;
    }
    while (q < end) {
        if ((size_t)(end - q) < RUN_HDR)
            break;
        memcpy(&hash, q, sizeof(hash));
        memcpy(&h, q + sizeof(hash), sizeof(h));
        if (h.id_len == 0 || h.id_len > RATE_DEDUPE_ID_MAX || h.ev_len > BILLING_EVENT_WIRE_MAX ||
            (size_t)(end - q) - RUN_HDR < (size_t)h.id_len + h.ev_len || slice_of(hash) != s)
            break;
        ent[*n].hash = hash;
        ent[*n].rec = q + sizeof(hash);
        ent[*n].age = age;
        ent[*n].seq = (uint32_t)*n;
        (*n)++;
        q += RUN_HDR + h.id_len + h.ev_len;
    }
    if (q == end)
        return 0;
    errno = EIO; /* a run we wrote ourselves came back damaged */
    return -1;
}

/*
 * Mark the records of @ent whose hash occurs more than once, and move
 * them, in their order, to the front; returns how many there are. The
 * table's slots are chosen by the hash mixed with @seed, random for the
 * process: the id hash has no key, so ids could be chosen to fall on one
 * slot, and probing them would then cost the square of their number.
 * Where a record lands in the table changes nothing else.
 */
static size_t keep_shared_hashes(batch_ent *ent, size_t n, uint32_t *table, size_t slots,
                                 uint64_t seed)
{
    size_t i;
    size_t m = 0;
    size_t x;
    uint32_t j;

    memset(table, 0, slots * sizeof(*table));
    for (i = 0; i < n; i++) {
        /* Every hash of the slice shares its top bits: the table takes the mixed whole. */
        for (x = (size_t)(((ent[i].hash ^ seed) * UINT64_C(0x9e3779b97f4a7c15)) >> 32) &
                 (slots - 1);
             (j = table[x]) != 0; x = (x + 1) & (slots - 1)) {
            if (ent[j - 1].hash == ent[i].hash) {
                ent[j - 1].seq |= REPEAT;
                ent[i].seq |= REPEAT;
                break;
            }
        }
        if (j == 0)
            table[x] = (uint32_t)i + 1;
    }
    for (i = 0; i < n; i++) {
        if (ent[i].seq & REPEAT) {
            ent[m] = ent[i];
            ent[m++].seq &= ~REPEAT;
        }
    }
    return m;
}

/* A random seed for keep_shared_hashes, the same for the whole process. */
static uint64_t table_seed(void)
{
    static uint64_t seed;
    uint64_t s = __atomic_load_n(&seed, __ATOMIC_RELAXED);
    int stack;

    if (s != 0)
        return s;
    if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s))
        s = (uint64_t)time(NULL) * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)(uintptr_t)&stack;
    s |= 1u; /* never 0, the mark of no seed yet */
    __atomic_store_n(&seed, s, __ATOMIC_RELAXED);
    return s;
}

/*
 * Visit, in order, the records of slice @s whose hash occurs more than
 * once, the slice laid out in @mem as @p says. Returns 0, -1 for a read
 * error (message written), or what @visit returned.
 */
static int find_slice(rate_dedupe *const *sets, size_t n_sets, size_t s, const slice_plan *p,
                      void *mem, uint32_t *set_of, visit_fn visit, void *arg, char *errbuf,
                      size_t errsize)
{
    batch_ent *ent = mem;
    uint32_t *table = (uint32_t *)(ent + p->n_max);
    unsigned char *bytes = (unsigned char *)(table + p->table);
    const rate_dedupe *d;
    size_t n = 0;
    size_t m;
    size_t t;
    size_t i;
    size_t j;
    size_t stop;
    uint32_t age = 0;
    cursor c;
    int rc;

    for (t = 0; t < n_sets; t++) {
        d = sets[t];
        for (i = 0; i < d->n_runs; i++, age++) {
            if (slice_read(&d->runs[i], s, bytes, age, ent, &n) != 0)
                return bc_seterr(errbuf, errsize, "reading a temporary file in %s: %s", d->tmpdir,
                                 strerror(errno));
            bytes += d->runs[i].slice[s + 1] - d->runs[i].slice[s];
        }
        for (j = idx_slice(d, s), stop = idx_slice(d, s + 1); j < stop; j++, n++) {
            ent[n].hash = d->idx[j].hash;
            ent[n].rec = d->arena + d->idx[j].off;
            ent[n].age = age;
            ent[n].seq = (uint32_t)n;
        }
        age++;
    }
    m = keep_shared_hashes(ent, n, table, p->table, table_seed());
    if (m > 1)
        qsort_r(ent, m, sizeof(*ent), ent_order, set_of);
    memset(&c, 0, sizeof(c));
    c.fd = -1;
    for (i = 0; i < m; i++) {
        c.d = sets[set_of[ent[i].age]];
        c.hash = ent[i].hash;
        memcpy(&c.h, ent[i].rec, sizeof(c.h));
        c.body = ent[i].rec + sizeof(c.h);
        rc = visit(arg, &c);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/*
 * Visit, in order, the records of slices @lo to @hi (excluded) of the
 * @n_sets sets (runs and arenas) that visit_group and keep_repeats need
 * to see, using the @cap bytes at @mem (free, and left undefined), slice
 * by slice where a slice fits there, by merge_sets otherwise. Returns as
 * merge_sets. Only reads the sets: two calls on different slices may
 * run at once, with different @mem.
 */
static int find_range(rate_dedupe *const *sets, size_t n_sets, size_t lo, size_t hi, void *mem,
                      size_t cap, visit_fn visit, void *arg, char *errbuf, size_t errsize)
{
    size_t n_inputs = 0;
    uint32_t *set_of;
    slice_plan p = {0, 0, 0};
    size_t s;
    size_t e;
    size_t t;
    size_t i;
    size_t k = 0;
    int rc = 0;

    for (t = 0; t < n_sets; t++)
        n_inputs += sets[t]->n_runs + 1;
    set_of = malloc(n_inputs * sizeof(*set_of));
    if (set_of == NULL)
        return bc_seterr(errbuf, errsize, "dedupe: out of memory");
    for (t = 0; t < n_sets; t++) {
        for (i = 0; i <= sets[t]->n_runs; i++)
            set_of[k++] = (uint32_t)t;
    }
    for (s = lo; s < hi && rc == 0; s = e) {
        /* Slices that do not fit, one merge for them all. */
        for (e = s; e < hi && !slice_fits(sets, n_sets, e, cap, &p); e++)
            ;
        if (e > s) {
            rc = merge_sets(sets, n_sets, 1, s, e, visit, arg, errbuf, errsize);
            continue;
        }
        rc = find_slice(sets, n_sets, s, &p, mem, set_of, visit, arg, errbuf, errsize);
        e = s + 1;
    }
    free(set_of);
    return rc;
}

/* A merge that writes every record into a run (a rate_dedupe visit_fn); -2 on a write error. */
static int write_record(void *arg, const cursor *c)
{
    return writer_put(arg, c->hash, &c->h, c->body) != 0 ? -2 : 0;
}

/*
 * Merge every run into one, which takes their place, to keep the number
 * of open runs bounded. (Each merge rewrites everything spilled so far:
 * an input of more than RATE_DEDUPE_FANIN budgets' worth of records costs
 * more disk traffic, and a larger budget avoids it.)
 */
static int merge_runs(rate_dedupe *d, char *errbuf, size_t errsize)
{
    writer w;
    run out;
    size_t i;
    int rc;

    if (writer_open(d, &w, errbuf, errsize) != 0)
        return -1;
    errno = 0;
    rc = merge_sets(&d, 1, 0, 0, SLICES, write_record, &w, errbuf, errsize);
    if (rc == -2)
        rc = write_error(d, errbuf, errsize);
    if (rc != 0) {
        writer_abort(&w);
        return -1;
    }
    if (writer_end(d, &w, &out, errbuf, errsize) != 0)
        return -1;
    for (i = 0; i < d->n_runs; i++)
        run_close(&d->runs[i]);
    d->runs[0] = out;
    d->n_runs = 1;
    d->stats.spilled += out.size;
    d->stats.runs++;
    d->stats.merges++;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Finding repeated ids                                                    */
/* ---------------------------------------------------------------------- */

typedef struct group_ctx {
    rate_dedupe *d;
    rate_dedupe_fetch_fn fetch;
    rate_dedupe_fn fn;
    void *arg;
    char *errbuf;
    size_t errsize;
    int have_first;
    uint64_t hash;
    rec_hdr first;
    char id[RATE_DEDUPE_ID_MAX + 1];
    int first_loaded;
    size_t first_len;
    unsigned char first_ev[BILLING_EVENT_WIRE_MAX];
    unsigned char later_ev[BILLING_EVENT_WIRE_MAX];
} group_ctx;

static void where_of(const rec_hdr *h, rate_dedupe_where *w)
{
    w->src = h->src;
    w->pos = h->pos;
    w->offset = h->offset;
    w->check = h->check;
}

/* The event of the record @h with body @body: stored, or fetched into @buf. */
static int event_of(group_ctx *g, const rec_hdr *h, const unsigned char *body, unsigned char *buf,
                    const unsigned char **ev, size_t *len)
{
    rate_dedupe_where w;

    if (h->ev_len > 0) {
        *ev = body + h->id_len;
        *len = h->ev_len;
        return 0;
    }
    where_of(h, &w);
    if (g->fetch == NULL)
        return bc_seterr(g->errbuf, g->errsize, "dedupe: event '%s' not stored, no fetch", g->id);
    if (g->fetch(g->arg, &w, g->id, buf, len, g->errbuf, g->errsize) != 0)
        return -1;
    g->d->stats.fetched++;
    *ev = buf;
    return 0;
}

static int visit_group(void *arg, const cursor *c)
{
    group_ctx *g = arg;
    const unsigned char *ev;
    const unsigned char *first;
    size_t len;
    rate_dedupe_hit hit;

    if (!g->have_first || id_cmp(g->hash, (const unsigned char *)g->id, g->first.id_len, c->hash,
                                 c->body, c->h.id_len) != 0) {
        g->have_first = 1;
        g->hash = c->hash;
        g->first = c->h;
        memcpy(g->id, c->body, c->h.id_len);
        g->id[c->h.id_len] = '\0';
        /* A stored event is kept now (the cursor moves on); a file's is read when needed. */
        g->first_loaded = c->h.ev_len > 0;
        g->first_len = c->h.ev_len;
        memcpy(g->first_ev, c->body + c->h.id_len, c->h.ev_len);
        return 0;
    }
    /* A later occurrence: both events are needed now, the first one once. */
    if (!g->first_loaded) {
        if (event_of(g, &g->first, NULL, g->first_ev, &first, &g->first_len) != 0)
            return -1;
        g->first_loaded = 1;
    }
    if (event_of(g, &c->h, c->body, g->later_ev, &ev, &len) != 0)
        return -1;
    hit.kind = len == g->first_len && memcmp(ev, g->first_ev, len) == 0 ? RATE_DEDUPE_DUPLICATE
                                                                        : RATE_DEDUPE_CONFLICT;
    hit.id = g->id;
    hit.event = ev;
    hit.event_len = len;
    where_of(&c->h, &hit.where);
    where_of(&g->first, &hit.first);
    return g->fn(g->arg, &hit);
}

/*
 * The upper half of a two-half finish: merges its records on a thread of
 * its own and keeps only those of ids seen more than once, in merge
 * order, in a run (`groups`), for visit_group on the calling thread after
 * the lower half. Finding repeats is the merge's whole cost; the rest
 * (reading events again, taking them back) stays on one thread, in order.
 */
typedef struct upper_half {
    rate_dedupe *const *sets;
    size_t n_sets;
    writer groups;
    int stop; /* set by the lower half when it stops early */
    int rc;
    char err[256];
    int have_prev; /* the previous record, kept for comparison ... */
    int prev_kept; /* ... and whether it went into groups already */
    uint64_t prev_hash;
    rec_hdr prev;
    unsigned char prev_body[RATE_DEDUPE_ID_MAX + BILLING_EVENT_WIRE_MAX];
} upper_half;

/* A visit_fn: keep the records of repeated ids in u->groups; -2 on a write error. */
static int keep_repeats(void *arg, const cursor *c)
{
    upper_half *u = arg;

    if (__atomic_load_n(&u->stop, __ATOMIC_RELAXED))
        return 1;
    if (u->have_prev &&
        id_cmp(u->prev_hash, u->prev_body, u->prev.id_len, c->hash, c->body, c->h.id_len) == 0) {
        if (!u->prev_kept && writer_put(&u->groups, u->prev_hash, &u->prev, u->prev_body) != 0)
            return -2;
        u->prev_kept = 1;
        return writer_put(&u->groups, c->hash, &c->h, c->body) != 0 ? -2 : 0;
    }
    u->have_prev = 1;
    u->prev_kept = 0;
    u->prev_hash = c->hash;
    u->prev = c->h;
    memcpy(u->prev_body, c->body, (size_t)c->h.id_len + c->h.ev_len);
    return 0;
}

static void *upper_half_main(void *arg)
{
    upper_half *u = arg;
    run out;

    errno = 0;
    u->rc =
        find_range(u->sets, u->n_sets, SLICES / 2, SLICES, u->sets[1]->idx_tmp,
                   u->sets[1]->idx_cap * sizeof(mem_idx), keep_repeats, u, u->err, sizeof(u->err));
    if (u->rc == -2)
        u->rc = write_error(u->sets[0], u->err, sizeof(u->err));
    if (u->rc != 0) {
        writer_abort(&u->groups);
        return NULL;
    }
    if (writer_end(u->sets[0], &u->groups, &out, u->err, sizeof(u->err)) != 0)
        u->rc = -1;
    else
        u->groups.r = out;
    return NULL;
}

/* Visit the records of the run @r in order with visit_group. Returns as merge_sets. */
static int visit_run(group_ctx *g, const run *r, char *errbuf, size_t errsize)
{
    rate_dedupe one;
    rate_dedupe *set = &one;

    /* A set of that one run, its arena empty. */
    memset(&one, 0, sizeof(one));
    one.tmpdir = g->d->tmpdir;
    one.runs[0] = *r;
    one.n_runs = 1;
    return merge_sets(&set, 1, 0, 0, SLICES, visit_group, g, errbuf, errsize);
}

/*
 * Find the repeats of several sets on two threads: the lower half of the
 * hash space here, the upper half (upper_half) at the same time on
 * another thread, then the upper half's repeats here. The hits are those
 * of one merge, in the same order (every hash of the lower half comes
 * before those of the upper one), and the callbacks run on this thread
 * only.
 */
static int finish_halves(rate_dedupe *const *sets, size_t n_sets, group_ctx *g, char *errbuf,
                         size_t errsize)
{
    upper_half *u = calloc(1, sizeof(*u));
    pthread_t tid;
    int started;
    int rc;

    if (u == NULL)
        return bc_seterr(errbuf, errsize, "dedupe: out of memory");
    u->sets = sets;
    u->n_sets = n_sets;
    if (writer_open(sets[0], &u->groups, errbuf, errsize) != 0) {
        free(u);
        return -1;
    }
    started = pthread_create(&tid, NULL, upper_half_main, u) == 0;
    if (!started)
        upper_half_main(u); /* no thread: one after the other, the same result */
    rc = find_range(sets, n_sets, 0, SLICES / 2, sets[0]->idx_tmp,
                    sets[0]->idx_cap * sizeof(mem_idx), visit_group, g, errbuf, errsize);
    if (rc != 0)
        __atomic_store_n(&u->stop, 1, __ATOMIC_RELAXED);
    if (started)
        pthread_join(tid, NULL);
    if (rc == 0 && u->rc != 0)
        rc = bc_seterr(errbuf, errsize, "%s", u->err);
    if (rc == 0)
        rc = visit_run(g, &u->groups.r, errbuf, errsize);
    if (u->rc == 0)
        run_close(&u->groups.r);
    free(u);
    return rc;
}

int rate_dedupe_finish_many(rate_dedupe *const *sets, size_t n_sets, rate_dedupe_fetch_fn fetch,
                            rate_dedupe_fn fn, void *arg, char *errbuf, size_t errsize)
{
    group_ctx *g;
    size_t i;
    int rc;

    for (i = 0; i < n_sets; i++) {
        if (sets[i]->finished)
            return bc_seterr(errbuf, errsize, "dedupe: finished twice");
        sets[i]->finished = 1;
        if (sets[i]->failed)
            return bc_seterr(errbuf, errsize, "dedupe: finish after an error");
        /* The records still in memory join the merge directly, not through a run. */
        sort_memory(sets[i]);
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return bc_seterr(errbuf, errsize, "dedupe: out of memory");
    /* Fetches are counted in the first set's statistics. */
    g->d = sets[0];
    g->fetch = fetch;
    g->fn = fn;
    g->arg = arg;
    g->errbuf = errbuf;
    g->errsize = errsize;
    if (n_sets > 1)
        rc = finish_halves(sets, n_sets, g, errbuf, errsize);
    else
        rc = find_range(sets, n_sets, 0, SLICES, sets[0]->idx_tmp,
                        sets[0]->idx_cap * sizeof(mem_idx), visit_group, g, errbuf, errsize);
    free(g);
    return rc;
}

int rate_dedupe_finish(rate_dedupe *d, rate_dedupe_fetch_fn fetch, rate_dedupe_fn fn, void *arg,
                       char *errbuf, size_t errsize)
{
    return rate_dedupe_finish_many(&d, 1, fetch, fn, arg, errbuf, errsize);
}
