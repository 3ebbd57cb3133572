/*
 * dedupe.c - bounded-memory dedupe by external sort; see dedupe.h.
 *
 * A record is a fixed header, the id and (when stored) the encoded event,
 * contiguous in the memory arena and in runs alike. Order: id hash, then
 * id length and bytes (exact), then arrival, so that all records of one
 * id are adjacent and the first to arrive comes first. Arrival is not
 * stored: the in-memory sort is stable, runs are merged oldest first on
 * ties, and a merge of runs replaces them in place.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dedupe.h"
#include "util.h"

#define RUN_BUFFER (64u * 1024u)
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

/* A run: a temporary file and its stdio buffer (freed after fclose). */
typedef struct run {
    FILE *f;
    char *buf;
} run;

/* One record in memory: its sort key and where it is in the arena. */
typedef struct mem_idx {
    uint64_t hash;
    size_t off;
} mem_idx;

/* Radix sort of the index: RADIX_PASSES digits of RADIX_BITS, from the top of the hash. */
#define RADIX_BITS 11
#define RADIX_PASSES 3
#define RADIX_SHIFT (64 - RADIX_BITS * RADIX_PASSES)

struct bc_dedupe {
    char *tmpdir;
    unsigned char *arena;
    size_t arena_cap;
    size_t arena_len;
    mem_idx *idx;
    mem_idx *idx_tmp; /* the radix sort's other buffer */
    size_t idx_cap;
    size_t n_idx;
    run runs[BC_DEDUPE_FANIN];
    size_t n_runs;
    int finished;
    int failed;   /* an I/O error left the runs half read: refuse everything */
    bc_dedupe_stats stats;
};

/* A sorted stream of records: the memory arena or a run. */
typedef struct cursor {
    const bc_dedupe *d;
    FILE *f;       /* NULL: the arena, through d->idx */
    size_t next;   /* arena: next index entry */
    size_t age;    /* ties go to the older stream: runs by creation, the arena last */
    uint64_t hash;
    rec_hdr h;
    const unsigned char *body; /* id then encoded event */
    unsigned char *buf;        /* runs: the current record's body */
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
/* Set                                                                     */
/* ---------------------------------------------------------------------- */

static int run_open(bc_dedupe *d, run *r, char *errbuf, size_t errsize);

static void run_close(run *r)
{
    fclose(r->f);
    free(r->buf);
    r->f = NULL;
    r->buf = NULL;
}

bc_dedupe *bc_dedupe_new(size_t memory, const char *tmpdir, char *errbuf, size_t errsize)
{
    bc_dedupe *d;
    run probe;

    if (memory < BC_DEDUPE_MEMORY_MIN || memory > BC_DEDUPE_MEMORY_MAX) {
        bc_seterr(errbuf, errsize, "dedupe memory: %u bytes to %llu GiB", BC_DEDUPE_MEMORY_MIN,
                  (unsigned long long)(BC_DEDUPE_MEMORY_MAX >> 30));
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
        bc_dedupe_destroy(d);
        return NULL;
    }
    run_close(&probe);
    return d;
nomem:
    bc_dedupe_destroy(d);
    bc_seterr(errbuf, errsize, "dedupe: out of memory");
    return NULL;
}

void bc_dedupe_destroy(bc_dedupe *d)
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

void bc_dedupe_get_stats(const bc_dedupe *d, bc_dedupe_stats *out)
{
    *out = d->stats;
}

/* ---------------------------------------------------------------------- */
/* Runs                                                                    */
/* ---------------------------------------------------------------------- */

/* A new unlinked temporary file in @r, buffered for sequential access. Returns 0 or -1. */
static int run_open(bc_dedupe *d, run *r, char *errbuf, size_t errsize)
{
    char path[4096];
    int fd;
    FILE *f;
    char *buf;

    if (snprintf(path, sizeof(path), "%s/billing-dedupe-XXXXXX", d->tmpdir) >= (int)sizeof(path))
        return bc_seterr(errbuf, errsize, "temporary directory %s: path too long", d->tmpdir);
    fd = mkstemp(path);
    if (fd < 0)
        return bc_seterr(errbuf, errsize, "temporary file in %s: %s", d->tmpdir, strerror(errno));
    unlink(path);
    f = fdopen(fd, "w+");
    if (f == NULL) {
        close(fd);
        return bc_seterr(errbuf, errsize, "temporary file in %s: %s", d->tmpdir, strerror(errno));
    }
    /* glibc ignores the size unless given the buffer; it lives until the file is closed. */
    buf = malloc(RUN_BUFFER);
    if (buf == NULL || setvbuf(f, buf, _IOFBF, RUN_BUFFER) != 0) {
        fclose(f);
        free(buf);
        return bc_seterr(errbuf, errsize, "temporary file in %s: out of memory", d->tmpdir);
    }
    r->f = f;
    r->buf = buf;
    return 0;
}

static int write_error(const bc_dedupe *d, char *errbuf, size_t errsize)
{
    bc_seterr(errbuf, errsize, "writing a temporary file in %s: %s", d->tmpdir,
              errno ? strerror(errno) : "write failed");
    return -1;
}

/* Flush the run @r and rewind it for reading; closes it on error. */
static int run_end_write(bc_dedupe *d, run *r, char *errbuf, size_t errsize)
{
    errno = 0;
    if (fflush(r->f) != 0 || ferror(r->f) || fseek(r->f, 0, SEEK_SET) != 0) {
        write_error(d, errbuf, errsize);
        run_close(r);
        return -1;
    }
    d->stats.runs++;
    return 0;
}

/*
 * Sort the records in memory. The hashes are uniform, so a stable LSD
 * radix sort on their top bits leaves only rare runs of equal top bits,
 * which an insertion sort puts in full order (hash, id, arrival). Records
 * were added in arrival order, and stability keeps it.
 */
static void sort_memory(bc_dedupe *d)
{
    uint32_t count[1u << RADIX_BITS];
    mem_idx *src = d->idx;
    mem_idx *dst = d->idx_tmp;
    mem_idx *t;
    size_t n = d->n_idx;
    size_t i;
    size_t j;
    size_t k;
    uint32_t sum;
    uint32_t c;
    unsigned shift;
    int pass;

    for (pass = 0; pass < RADIX_PASSES; pass++) {
        shift = RADIX_SHIFT + (unsigned)pass * RADIX_BITS;
        memset(count, 0, sizeof(count));
        for (i = 0; i < n; i++)
            count[(src[i].hash >> shift) & ((1u << RADIX_BITS) - 1)]++;
        for (sum = 0, k = 0; k < (1u << RADIX_BITS); k++) {
            c = count[k];
            count[k] = sum;
            sum += c;
        }
        for (i = 0; i < n; i++)
            dst[count[(src[i].hash >> shift) & ((1u << RADIX_BITS) - 1)]++] = src[i];
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
        if (j - i > 1)
            qsort_r(src + i, j - i, sizeof(mem_idx), idx_order, d->arena);
    }
    /* An odd number of passes leaves the result in the other buffer. */
    d->idx_tmp = dst;
    d->idx = src;
}

static int merge_runs(bc_dedupe *d, char *errbuf, size_t errsize);

/* Sort the records in memory into a new run and empty the arena. */
static int spill(bc_dedupe *d, char *errbuf, size_t errsize)
{
    run r;
    size_t i;
    size_t n;
    const unsigned char *rec;
    rec_hdr h;

    if (d->n_runs == BC_DEDUPE_FANIN && merge_runs(d, errbuf, errsize) != 0) {
        d->failed = 1;
        return -1;
    }
    if (run_open(d, &r, errbuf, errsize) != 0)
        return -1;
    sort_memory(d);
    errno = 0;
    for (i = 0; i < d->n_idx; i++) {
        rec = d->arena + d->idx[i].off;
        memcpy(&h, rec, sizeof(h));
        n = rec_size(&h);
        if (fwrite(rec, 1, n, r.f) != n) {
            run_close(&r);
            return write_error(d, errbuf, errsize);
        }
        d->stats.spilled += n;
    }
    if (run_end_write(d, &r, errbuf, errsize) != 0)
        return -1;
    d->runs[d->n_runs++] = r;
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
static int add_record(bc_dedupe *d, const char *id, size_t id_len, uint64_t hash,
                      const billing_event *ev, const bc_dedupe_where *where, char *errbuf,
                      size_t errsize)
{
    size_t len = 0;
    size_t room = sizeof(rec_hdr) + id_len + (ev != NULL ? BILLING_EVENT_WIRE_MAX : 0);
    unsigned char *rec;
    rec_hdr h;

    if (d->finished || d->failed)
        return bc_seterr(errbuf, errsize, "dedupe: add after %s",
                         d->failed ? "an error" : "finish");
    if (id_len == 0 || id_len > BC_DEDUPE_ID_MAX)
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

int bc_dedupe_add(bc_dedupe *d, const billing_event *ev, const bc_dedupe_where *where, int store,
                  char *errbuf, size_t errsize)
{
    const char *id = billing_event_id(ev);
    size_t id_len = strlen(id);

    /* A fixed hash: the output order is the same on every run. */
    return add_record(d, id, id_len, bc_hash_bytes(id, id_len), store ? ev : NULL, where, errbuf,
                      errsize);
}

int bc_dedupe_add_id(bc_dedupe *d, const char *id, size_t id_len, uint64_t hash,
                     const bc_dedupe_where *where, char *errbuf, size_t errsize)
{
    return add_record(d, id, id_len, hash, NULL, where, errbuf, errsize);
}

/* ---------------------------------------------------------------------- */
/* Merging                                                                 */
/* ---------------------------------------------------------------------- */

/* Move @c to its next record. Returns 1 (a record), 0 (the end) or -1 (read error). */
static int cursor_next(cursor *c)
{
    size_t body;
    const unsigned char *rec;

    if (c->f == NULL) {
        if (c->next == c->d->n_idx)
            return 0;
        c->hash = c->d->idx[c->next].hash;
        rec = c->d->arena + c->d->idx[c->next++].off;
        memcpy(&c->h, rec, sizeof(c->h));
        c->body = rec + sizeof(c->h);
        return 1;
    }
    if (fread(&c->h, sizeof(c->h), 1, c->f) != 1)
        return ferror(c->f) ? -1 : 0;
    body = (size_t)c->h.id_len + c->h.ev_len;
    if (c->h.id_len == 0 || c->h.id_len > BC_DEDUPE_ID_MAX ||
        c->h.ev_len > BILLING_EVENT_WIRE_MAX || fread(c->buf, 1, body, c->f) != body) {
        errno = EIO; /* a run we wrote ourselves came back short or damaged */
        return -1;
    }
    c->body = c->buf;
    c->hash = bc_hash_bytes(c->buf, c->h.id_len);
    return 1;
}

/*
 * Ties (one id) go to the record that came first: in one set, by arrival
 * (runs by creation, the arena last: what `age` says); across the sets of
 * bc_dedupe_finish_many, by source, then offset, which is the input's
 * order whichever set took the record (each set got its records in that
 * order, so the two agree).
 */
static int cursor_less(const cursor *a, const cursor *b)
{
    int c = id_cmp(a->hash, a->body, a->h.id_len, b->hash, b->body, b->h.id_len);

    if (c != 0)
        return c < 0;
    if (a->d == b->d)
        return a->age < b->age;
    if (a->h.src != b->h.src)
        return a->h.src < b->h.src;
    if (a->h.offset != b->h.offset)
        return a->h.offset < b->h.offset;
    return a->age < b->age;
}

static void heap_down(cursor **heap, size_t n, size_t i)
{
    size_t l;
    size_t m;
    cursor *t;

    for (;;) {
        l = 2 * i + 1;
        m = i;
        if (l < n && cursor_less(heap[l], heap[m]))
            m = l;
        if (l + 1 < n && cursor_less(heap[l + 1], heap[m]))
            m = l + 1;
        if (m == i)
            return;
        t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

typedef int (*visit_fn)(void *arg, const cursor *c);

/*
 * Merge the runs of the @n_sets sets (and their arenas' records when
 * @with_memory) in order, calling @visit on each record. Returns 0, -1 for
 * a read error or no memory (message written), or what @visit returned.
 */
static int merge_sets(bc_dedupe *const *sets, size_t n_sets, int with_memory, visit_fn visit,
                      void *arg, char *errbuf, size_t errsize)
{
    size_t total = 0;
    cursor *cur;
    cursor **heap;
    size_t n = 0;
    size_t k = 0;
    size_t i;
    size_t s;
    int rc = 0;
    int more;

    for (s = 0; s < n_sets; s++)
        total += sets[s]->n_runs + (with_memory ? 1 : 0);
    cur = calloc(total + 1, sizeof(*cur));
    heap = calloc(total + 1, sizeof(*heap));
    if (cur == NULL || heap == NULL) {
        bc_seterr(errbuf, errsize, "dedupe: out of memory");
        rc = -1;
        goto done;
    }
    for (s = 0; s < n_sets; s++) {
        for (i = 0; i < sets[s]->n_runs + (with_memory ? 1 : 0); i++) {
            cur[k].d = sets[s];
            cur[k].age = k;
            cur[k].f = i < sets[s]->n_runs ? sets[s]->runs[i].f : NULL;
            if (cur[k].f != NULL) {
                cur[k].buf = malloc(BC_DEDUPE_ID_MAX + BILLING_EVENT_WIRE_MAX);
                if (cur[k].buf == NULL) {
                    bc_seterr(errbuf, errsize, "dedupe: out of memory");
                    rc = -1;
                    goto done;
                }
            }
            k++;
        }
    }
    for (i = 0; i < k; i++) {
        more = cursor_next(&cur[i]);
        if (more < 0)
            goto read_error;
        if (more)
            heap[n++] = &cur[i];
    }
    for (i = n; i-- > 0;)
        heap_down(heap, n, i);
    while (n > 0) {
        rc = visit(arg, heap[0]);
        if (rc != 0)
            goto done;
        more = cursor_next(heap[0]);
        if (more < 0)
            goto read_error;
        if (!more)
            heap[0] = heap[--n];
        heap_down(heap, n, 0);
    }
    goto done;
read_error:
    bc_seterr(errbuf, errsize, "reading a temporary file in %s: %s", sets[0]->tmpdir,
              strerror(errno));
    rc = -1;
done:
    for (i = 0; cur != NULL && i < k; i++)
        free(cur[i].buf);
    free(cur);
    free(heap);
    return rc;
}

static int merge(bc_dedupe *d, int with_memory, visit_fn visit, void *arg, char *errbuf,
                 size_t errsize)
{
    return merge_sets(&d, 1, with_memory, visit, arg, errbuf, errsize);
}

typedef struct write_ctx {
    run out;
    bc_dedupe *d;
} write_ctx;

static int write_record(void *arg, const cursor *c)
{
    write_ctx *w = arg;
    size_t body_len = (size_t)c->h.id_len + c->h.ev_len;

    if (fwrite(&c->h, sizeof(c->h), 1, w->out.f) != 1 ||
        fwrite(c->body, 1, body_len, w->out.f) != body_len)
        return -2;
    w->d->stats.spilled += sizeof(c->h) + body_len;
    return 0;
}

/*
 * Merge every run into one, which takes their place, to keep the number
 * of open runs bounded. (Each merge rewrites everything spilled so far:
 * an input of more than BC_DEDUPE_FANIN budgets' worth of records costs
 * more disk traffic, and a larger budget avoids it.)
 */
static int merge_runs(bc_dedupe *d, char *errbuf, size_t errsize)
{
    write_ctx w;
    size_t i;
    int rc;

    w.d = d;
    if (run_open(d, &w.out, errbuf, errsize) != 0)
        return -1;
    errno = 0;
    rc = merge(d, 0, write_record, &w, errbuf, errsize);
    if (rc == -2)
        rc = write_error(d, errbuf, errsize);
    if (rc != 0) {
        run_close(&w.out);
        return -1;
    }
    if (run_end_write(d, &w.out, errbuf, errsize) != 0)
        return -1;
    for (i = 0; i < d->n_runs; i++)
        run_close(&d->runs[i]);
    d->runs[0] = w.out;
    d->n_runs = 1;
    d->stats.merges++;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Finding repeated ids                                                    */
/* ---------------------------------------------------------------------- */

typedef struct group_ctx {
    bc_dedupe *d;
    bc_dedupe_fetch_fn fetch;
    bc_dedupe_fn fn;
    void *arg;
    char *errbuf;
    size_t errsize;
    int have_first;
    uint64_t hash;
    rec_hdr first;
    char id[BC_DEDUPE_ID_MAX + 1];
    int first_loaded;
    size_t first_len;
    unsigned char first_ev[BILLING_EVENT_WIRE_MAX];
    unsigned char later_ev[BILLING_EVENT_WIRE_MAX];
} group_ctx;

static void where_of(const rec_hdr *h, bc_dedupe_where *w)
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
    bc_dedupe_where w;

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
    bc_dedupe_hit hit;

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
    hit.kind = len == g->first_len && memcmp(ev, g->first_ev, len) == 0 ? BC_DEDUPE_DUPLICATE
                                                                         : BC_DEDUPE_CONFLICT;
    hit.id = g->id;
    hit.event = ev;
    hit.event_len = len;
    where_of(&c->h, &hit.where);
    where_of(&g->first, &hit.first);
    return g->fn(g->arg, &hit);
}

int bc_dedupe_finish_many(bc_dedupe *const *sets, size_t n_sets, bc_dedupe_fetch_fn fetch,
                          bc_dedupe_fn fn, void *arg, char *errbuf, size_t errsize)
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
    rc = merge_sets(sets, n_sets, 1, visit_group, g, errbuf, errsize);
    free(g);
    return rc;
}

int bc_dedupe_finish(bc_dedupe *d, bc_dedupe_fetch_fn fetch, bc_dedupe_fn fn, void *arg,
                     char *errbuf, size_t errsize)
{
    return bc_dedupe_finish_many(&d, 1, fetch, fn, arg, errbuf, errsize);
}
