/*
 * rate_parallel.c - `billing rate -j N`: reading, validating and rating
 * event files on N threads, with the same output as one thread.
 *
 * The input is cut into chunks in a fixed order: files in the order
 * given, each file into byte ranges of about --chunk-bytes (CHUNK_BYTES_DEFAULT) (JSON Lines: any
 * cut, a line belongs to the range where it starts; protobuf: cuts at
 * record boundaries found by hopping over the length prefixes, see
 * bc_proto_split). Each worker thread takes the next chunk, reads it with
 * its own reader and rates it into its own rater (one per thread, all
 * against the one frozen catalog, which libbilling documents as
 * shareable), and keeps what the run must say about it: rejected records
 * (place, reason, bytes) and the ids of the events rated, in record order.
 *
 * Each worker also adds the ids of the events it rated to its own share
 * of the bounded dedupe (--dedupe-memory / N), in input order, since it
 * takes chunks in that order. The main thread takes the chunks back in
 * their order and does, chunk by chunk, what one thread would have done
 * record by record: rejected records on stderr and in --rejects, counts,
 * line numbers (a chunk's lines count from its start; the lines of the
 * chunks before are added here). At most WINDOW_PER_JOB chunks a thread
 * are out at once, so memory stays bounded whatever the input size. At
 * the end the workers' raters are merged into the book's rater (exact
 * sums: billing_rater_merge), and their dedupe shares are merged together
 * (rate_dedupe_finish_many: the first occurrence of an id is the one with
 * the lowest file and offset, the input's first), repeats being taken
 * back as with one thread. So the output, the messages and their order do not
 * depend on N or on where the chunks are cut (tests/check-jobs.sh).
 *
 * Only the common case runs in parallel: one price book, files (not
 * stdin or pipes), no --strict (which stops at the first rejected record),
 * --at or --by resource (which keep per-event state in the tool); the
 * others run on one thread, with the same results.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rate_ctx.h"
#include "util.h"

/*
 * Chunks out (being rated or waiting to be taken back) per thread: room
 * for the main thread to fall behind for a while on a busy machine without
 * stopping the workers, at about 1 MiB of ids a chunk.
 */
#define WINDOW_PER_JOB 6
/* How often a worker looks whether the run was stopped, in records. */
#define STOP_CHECK_EVERY 1024
/* Longest growth of a chunk's results: far above what CHUNK_BYTES of input gives. */
#define ITEMS_MAX ((size_t)1 << 30)

/* What a chunk keeps for the main thread, in record order: its rejected records. */
/* A rejected record; its reason, a NUL, and its bytes follow. */
typedef struct item_reject {
    uint32_t reason_len;
    uint64_t pos;
    uint64_t rec_len;
    int kept; /* the record's bytes are there (not an over-long line skipped unread) */
} item_reject;

typedef struct chunk {
    uint64_t index; /* its place in the input's order */
    uint32_t src;
    uint64_t start;
    uint64_t end;
    int done;
    int rc;       /* CLI_EXIT_OK, or the exit code to stop with after this chunk */
    int fatal_at; /* the message names the record at fatal_pos */
    uint64_t fatal_pos;
    char fatal[ERR_MAX];
    uint64_t read;
    uint64_t rated;
    uint64_t lines; /* JSON Lines: lines starting in the range */
    unsigned char *items;
    size_t len;
    size_t cap;
} chunk;

struct pool;

typedef struct worker {
    struct pool *p;
    pthread_t tid;
    int started;
    billing_rater *rater;
    billing_event *ev;
    bc_reader *rd; /* kept from chunk to chunk of one file: no open and buffer each time */
    uint32_t rd_src;
    rate_dedupe *dd; /* its share of the dedupe: the ids of its chunks, in input order */
} worker;

typedef struct pool {
    rate_ctx *c;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast on every change: chunks are few, waiters fewer */
    chunk *ring;
    size_t window;
    uint64_t planned; /* chunks handed out */
    uint64_t drained; /* chunks taken back */
    int planned_all;
    int stop;
    /* The planner: the next chunk starts at @offset of file @file. */
    int file;
    int file_ready;
    uint64_t offset;
    uint64_t size;
    int fd; /* protobuf: the file, to find record boundaries */
    worker *workers;
    int n_workers;
    /* JSON Lines: the lines before each chunk, by chunk index (for the dedupe's places). */
    uint64_t *bases;
    size_t n_bases;
    size_t cap_bases;
} pool;

/* ---------------------------------------------------------------------- */
/* When to run in parallel                                                 */
/* ---------------------------------------------------------------------- */

/* @path's format as rate_file would find it, without a message; 0 or -1. */
static int quiet_format(const rate_ctx *c, const char *path, bc_format *out)
{
    if (c->opts.input_format_set) {
        *out = c->opts.input_format;
        return 0;
    }
    return bc_format_guess(path, out);
}

int rate_parallel_ok(const rate_ctx *c)
{
    struct stat st;
    bc_format f;
    int i;

    if (c->opts.jobs < 2 || c->n_books != 1 || c->opts.strict || c->opts.at_set ||
        c->opts.by_resource)
        return 0;
    for (i = 0; i < c->opts.n_files; i++) {
        if (strcmp(c->opts.files[i], "-") == 0 || quiet_format(c, c->opts.files[i], &f) != 0 ||
            stat(c->opts.files[i], &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
    }
    return 1;
}

/* Every file as rate_file records it: name, format, and what it was (to read events again). */
static int describe_sources(rate_ctx *c)
{
    struct source *s;
    int i;

    for (i = 0; i < c->opts.n_files; i++) {
        s = &c->srcs[i];
        if (quiet_format(c, c->opts.files[i], &s->format) != 0 ||
            stat(c->opts.files[i], &s->st) != 0)
            return -1;
        s->reread = 1;
        s->name = strdup(c->opts.files[i]);
        if (s->name == NULL)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Planning chunks                                                         */
/* ---------------------------------------------------------------------- */

static void next_file(pool *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->file++;
    p->file_ready = 0;
}

/*
 * Where the chunk starting at p->offset ends. The last chunk of a file has
 * no end, so that a file that grew since it was looked at is read to its
 * end, as one thread reads it.
 */
static uint64_t chunk_end(pool *p, bc_format format)
{
    uint64_t bytes = p->c->opts.chunk_bytes;
    uint64_t end = p->size;

    if (format == BC_FORMAT_JSONL && p->size - p->offset > bytes)
        end = p->offset + bytes;
    if (format == BC_FORMAT_PROTOBUF && p->fd >= 0 &&
        bc_proto_split(p->fd, p->offset, bytes, p->size, &end) != 0)
        end = p->size;
    return end;
}

/* The next chunk into @ch (with p->mu held). Returns 1, or 0 when the input is all planned. */
static int plan_next(pool *p, chunk *ch)
{
    const struct source *s;

    if (p->file >= p->c->opts.n_files)
        return 0;
    s = &p->c->srcs[p->file];
    if (!p->file_ready) {
        p->offset = 0;
        p->size = (uint64_t)s->st.st_size;
        p->fd = s->format == BC_FORMAT_PROTOBUF
                    ? open(p->c->opts.files[p->file], O_RDONLY | O_CLOEXEC)
                    : -1;
        p->file_ready = 1;
    }
    ch->index = p->planned;
    ch->src = (uint32_t)p->file;
    ch->start = p->offset;
    ch->end = chunk_end(p, s->format);
    p->offset = ch->end;
    if (ch->end >= p->size) {
        ch->end = UINT64_MAX;
        next_file(p);
    }
    return 1;
}

/* ---------------------------------------------------------------------- */
/* Rating a chunk (worker threads)                                         */
/* ---------------------------------------------------------------------- */

/* Room for @n more bytes of results; 0, or -1 when out of memory. */
static int reserve(chunk *ch, size_t n)
{
    size_t cap = ch->cap ? ch->cap : 65536;
    unsigned char *q;

    if (ch->len + n <= ch->cap)
        return 0;
    if (n > ITEMS_MAX - ch->len)
        return -1;
    while (cap < ch->len + n)
        cap *= 2;
    q = realloc(ch->items, cap);
    if (q == NULL)
        return -1;
    ch->items = q;
    ch->cap = cap;
    return 0;
}

/*
 * A JSON line's place for the dedupe: the line is known only within its
 * chunk until the chunks before are counted, so the chunk's index goes in
 * the high half and the line in the chunk in the low half (a chunk of at
 * most CHUNK_BYTES_MAX bytes has fewer than 2^32 lines); fix_place turns
 * it into the line in the file. Protobuf places are file offsets already.
 */
static uint64_t dedupe_place(const chunk *ch, bc_format format, uint64_t pos)
{
    return format == BC_FORMAT_JSONL ? ch->index << 32 | pos : pos;
}

/* Hand the event just rated to the worker's share of the dedupe; 0, or -1 with a message. */
static int remember(worker *w, chunk *ch, bc_reader *rd, char *err, size_t errsize)
{
    const char *id = billing_event_id(w->ev);
    size_t n = strlen(id);
    size_t len;
    const unsigned char *rec = bc_reader_record(rd, &len);
    rate_dedupe_where where;

    where.src = ch->src;
    where.pos = dedupe_place(ch, w->p->c->srcs[ch->src].format, bc_reader_position(rd));
    where.offset = bc_reader_offset(rd);
    where.check = rate_dedupe_hash_check(rec, len);
    return rate_dedupe_add_id(w->dd, id, n, bc_hash_bytes(id, n), &where, err, errsize);
}

static int keep_reject(chunk *ch, bc_reader *rd, const char *reason)
{
    size_t rlen = strlen(reason);
    size_t len = 0;
    const unsigned char *rec = bc_reader_record(rd, &len);
    item_reject it;

    if (reserve(ch, sizeof(it) + rlen + 1 + len) != 0)
        return -1;
    memset(&it, 0, sizeof(it));
    it.reason_len = (uint32_t)rlen;
    it.pos = bc_reader_position(rd);
    it.rec_len = len;
    it.kept = rec != NULL;
    memcpy(ch->items + ch->len, &it, sizeof(it));
    memcpy(ch->items + ch->len + sizeof(it), reason, rlen + 1);
    if (len > 0)
        memcpy(ch->items + ch->len + sizeof(it) + rlen + 1, rec, len);
    ch->len += sizeof(it) + rlen + 1 + len;
    return 0;
}

static void chunk_fail(chunk *ch, int rc, bc_reader *rd, const char *msg)
{
    ch->rc = rc;
    ch->fatal_at = rd != NULL;
    ch->fatal_pos = rd != NULL ? bc_reader_position(rd) : 0;
    snprintf(ch->fatal, sizeof(ch->fatal), "%s", msg);
}

/* Rate the event just read, or keep why not; 0, or -1 to stop (ch->rc set). */
static int rate_record(worker *w, chunk *ch, bc_reader *rd)
{
    char err[ERR_MAX];
    billing_status st = billing_rater_add(w->rater, w->ev, err, sizeof(err));

    if (st == BILLING_OK) {
        ch->rated++;
        if (w->dd != NULL && remember(w, ch, rd, err, sizeof(err)) != 0) {
            chunk_fail(ch, CLI_EXIT_INTERNAL, rd, err);
            return -1;
        }
        return 0;
    }
    if (keep_reject(ch, rd, err) != 0) {
        chunk_fail(ch, CLI_EXIT_INTERNAL, rd, "out of memory");
        return -1;
    }
    /* As with one thread: the record is rejected, then the run stops without another word. */
    if (st == BILLING_ERR_NOMEM) {
        ch->rc = CLI_EXIT_INTERNAL;
        return -1;
    }
    return 0;
}

/* The worker's reader, on the range of @ch; NULL with a message. */
static bc_reader *open_chunk(worker *w, const chunk *ch, char *err, size_t errsize)
{
    const rate_ctx *c = w->p->c;

    if (w->rd != NULL && w->rd_src == ch->src &&
        bc_reader_set_range(w->rd, ch->start, ch->end, err, errsize) == 0)
        return w->rd;
    bc_reader_close(w->rd);
    w->rd_src = ch->src;
    w->rd = bc_reader_open_range(c->opts.files[ch->src], c->srcs[ch->src].format, ch->start,
                                 ch->end, err, errsize);
    return w->rd;
}

static void rate_chunk(worker *w, chunk *ch)
{
    const rate_ctx *c = w->p->c;
    const struct source *s = &c->srcs[ch->src];
    char err[ERR_MAX];
    bc_read_result rr;
    bc_reader *rd;

    rd = open_chunk(w, ch, err, sizeof(err));
    if (rd == NULL) {
        chunk_fail(ch, CLI_EXIT_INPUT, NULL, err);
        return;
    }
    for (;;) {
        if (ch->read % STOP_CHECK_EVERY == 0 && __atomic_load_n(&w->p->stop, __ATOMIC_RELAXED))
            break;
        rr = bc_reader_next(rd, w->ev, err, sizeof(err));
        if (rr == BC_READ_EOF)
            break;
        if (rr == BC_READ_ERROR) {
            chunk_fail(ch, CLI_EXIT_INPUT, rd, err);
            break;
        }
        ch->read++;
        if (rr == BC_READ_REJECT && keep_reject(ch, rd, err) != 0) {
            chunk_fail(ch, CLI_EXIT_INTERNAL, rd, "out of memory");
            break;
        }
        if (rr == BC_READ_EVENT && rate_record(w, ch, rd) != 0)
            break;
    }
    ch->lines = s->format == BC_FORMAT_JSONL ? bc_reader_position(rd) : 0;
}

/* Take the next chunk to rate, or NULL when there is none or the run stopped. */
static chunk *take_chunk(pool *p)
{
    chunk *ch = NULL;

    pthread_mutex_lock(&p->mu);
    while (!p->stop && !p->planned_all && p->planned >= p->drained + p->window)
        pthread_cond_wait(&p->cv, &p->mu);
    if (!p->stop && !p->planned_all) {
        ch = &p->ring[p->planned % p->window];
        if (plan_next(p, ch)) {
            p->planned++;
        } else {
            ch = NULL;
            p->planned_all = 1;
            pthread_cond_broadcast(&p->cv);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return ch;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    chunk *ch;

    while ((ch = take_chunk(w->p)) != NULL) {
        rate_chunk(w, ch);
        pthread_mutex_lock(&w->p->mu);
        ch->done = 1;
        pthread_cond_broadcast(&w->p->cv);
        pthread_mutex_unlock(&w->p->mu);
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Taking chunks back in order (main thread)                               */
/* ---------------------------------------------------------------------- */

/* A rejected record: counted, said on stderr, and kept with --rejects, as rate_read.c does. */
static void emit_reject(rate_ctx *c, const struct source *s, const item_reject *it,
                        const char *reason, uint64_t base)
{
    char where[PATH_LEN + 32];
    const unsigned char *rec = (const unsigned char *)reason + it->reason_len + 1;

    c->counts.rejected++;
    bc_location_format(where, sizeof(where), s->name, s->format, base + it->pos);
    cli_error("%s: %s", where, reason);
    if (c->rejects != NULL)
        rejects_write(c->rejects, s->name, s->format, base + it->pos, reason, it->kept ? rec : NULL,
                      (size_t)it->rec_len, s->format);
}

/* Say and count what chunk @ch kept, in record order. Returns an exit code. */
static int drain_chunk(rate_ctx *c, chunk *ch, uint64_t base)
{
    const struct source *s = &c->srcs[ch->src];
    char where[PATH_LEN + 32];
    item_reject rej;
    size_t at = 0;

    while (at < ch->len) {
        memcpy(&rej, ch->items + at, sizeof(rej));
        emit_reject(c, s, &rej, (const char *)ch->items + at + sizeof(rej), base);
        at += sizeof(rej) + rej.reason_len + 1 + (size_t)rej.rec_len;
    }
    c->counts.read += ch->read;
    c->counts.rated += ch->rated;
    if (ch->rc == CLI_EXIT_OK || ch->fatal[0] == '\0')
        return ch->rc;
    if (!ch->fatal_at) {
        cli_error("%s", ch->fatal);
        return ch->rc;
    }
    bc_location_format(where, sizeof(where), s->name, s->format, base + ch->fatal_pos);
    cli_error("%s: %s", where, ch->fatal);
    return ch->rc;
}

/* Empty @ch for its next use, keeping its buffer. */
static void chunk_reset(chunk *ch)
{
    ch->done = 0;
    ch->len = 0;
    ch->rc = CLI_EXIT_OK;
    ch->fatal[0] = '\0';
    ch->read = 0;
    ch->rated = 0;
    ch->lines = 0;
}

/* Keep the lines before the next chunk in its file (JSON Lines), for fix_place. Returns an exit code. */
static int note_base(pool *p, uint64_t base)
{
    size_t cap = p->cap_bases ? p->cap_bases * 2 : 1024;
    uint64_t *q;

    if (p->n_bases == p->cap_bases) {
        q = realloc(p->bases, cap * sizeof(*q));
        if (q == NULL) {
            cli_error("out of memory");
            return CLI_EXIT_INTERNAL;
        }
        p->bases = q;
        p->cap_bases = cap;
    }
    p->bases[p->n_bases++] = base;
    return CLI_EXIT_OK;
}

/* Wait for each chunk in turn and take it back. Returns an exit code. */
static int drain_all(pool *p)
{
    rate_ctx *c = p->c;
    chunk *ch;
    uint32_t src = 0;
    uint64_t base = 0;
    int rc = CLI_EXIT_OK;
    int finished;

    for (;;) {
        pthread_mutex_lock(&p->mu);
        ch = &p->ring[p->drained % p->window];
        while (!(p->drained < p->planned && ch->done) &&
               !(p->planned_all && p->drained == p->planned))
            pthread_cond_wait(&p->cv, &p->mu);
        finished = p->planned_all && p->drained == p->planned;
        pthread_mutex_unlock(&p->mu);
        if (finished)
            break;
        for (; src < ch->src; src++) {
            progress_file_done(&c->prog, (uint64_t)c->srcs[src].st.st_size);
            base = 0;
        }
        rc = note_base(p, base);
        if (rc == CLI_EXIT_OK)
            rc = drain_chunk(c, ch, base);
        base += ch->lines;
        progress_tick(&c->prog, c->counts.read, ch->end == UINT64_MAX ? 0 : ch->end);
        pthread_mutex_lock(&p->mu);
        chunk_reset(ch);
        p->drained++;
        if (rc != CLI_EXIT_OK)
            __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    for (; src < (uint32_t)c->opts.n_files; src++)
        progress_file_done(&c->prog, (uint64_t)c->srcs[src].st.st_size);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* The run                                                                 */
/* ---------------------------------------------------------------------- */

/* Each thread's share of --dedupe-memory, so that together they keep to it. */
static size_t dedupe_share(const rate_ctx *c)
{
    size_t share = c->opts.dedupe_memory / (size_t)c->opts.jobs;

    return share < RATE_DEDUPE_MEMORY_MIN ? RATE_DEDUPE_MEMORY_MIN : share;
}

static int start_workers(pool *p)
{
    char err[ERR_MAX];
    worker *w;
    int i;

    for (i = 0; i < p->n_workers; i++) {
        w = &p->workers[i];
        w->p = p;
        w->ev = billing_event_new();
        if (billing_rater_new(p->c->books[0].cat, &w->rater, err, sizeof(err)) != BILLING_OK)
            w->rater = NULL;
        if (w->ev == NULL || w->rater == NULL ||
            billing_rater_set_dedupe(w->rater, 0) != BILLING_OK) {
            cli_error("-j: a rater per thread: %s", w->rater == NULL ? err : "out of memory");
            return CLI_EXIT_INTERNAL;
        }
        if (p->c->dedupe != NULL &&
            (w->dd = rate_dedupe_new(dedupe_share(p->c), rate_temp_dir(&p->c->opts), err,
                                     sizeof(err))) == NULL) {
            cli_error("%s", err);
            return CLI_EXIT_INTERNAL;
        }
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            cli_error("-j: cannot start thread %d: %s", i + 1, strerror(errno));
            return CLI_EXIT_INTERNAL;
        }
        w->started = 1;
    }
    return CLI_EXIT_OK;
}

/* Stop and join the workers; merge their raters into the book's when @merge. */
static int stop_workers(pool *p, int merge)
{
    char err[ERR_MAX];
    int rc = CLI_EXIT_OK;
    int i;

    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (i = 0; i < p->n_workers; i++) {
        if (p->workers[i].started)
            pthread_join(p->workers[i].tid, NULL);
    }
    /* In thread order: the merged rater is the same for the same chunks and threads. */
    for (i = 0; i < p->n_workers; i++) {
        if (merge && rc == CLI_EXIT_OK &&
            billing_rater_merge(p->c->books[0].rater, p->workers[i].rater, err, sizeof(err)) !=
                BILLING_OK) {
            cli_error("-j: merging the threads' totals: %s", err);
            rc = CLI_EXIT_INTERNAL;
        }
        billing_rater_destroy(p->workers[i].rater);
        billing_event_destroy(p->workers[i].ev);
        bc_reader_close(p->workers[i].rd);
    }
    return rc;
}

/* A place kept by the workers' dedupe (dedupe_place) as the line or offset in the file. */
static void fix_place(const pool *p, rate_dedupe_where *w)
{
    uint64_t index = w->pos >> 32;

    if (p->c->srcs[w->src].format == BC_FORMAT_JSONL && index < p->n_bases)
        w->pos = p->bases[index] + (w->pos & UINT32_MAX);
}

static int fetch_in_file(void *arg, const rate_dedupe_where *w, const char *id, unsigned char *buf,
                         size_t *len, char *err, size_t errsize)
{
    const pool *p = arg;

    return rate_fetch(p->c, w, id, buf, len, err, errsize);
}

/* A later occurrence, its places as one thread gives them, taken back as one thread does. */
static int take_back_in_file(void *arg, const rate_dedupe_hit *hit)
{
    const pool *p = arg;
    rate_dedupe_hit h = *hit;

    fix_place(p, &h.where);
    fix_place(p, &h.first);
    return rate_take_back(p->c, &h);
}

/* After the last chunk: the workers' shares of the dedupe merged, repeats taken back. */
static int take_back_repeats(pool *p)
{
    rate_dedupe **sets = calloc((size_t)p->n_workers, sizeof(*sets));
    int rc;
    int i;

    if (sets == NULL) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (i = 0; i < p->n_workers; i++)
        sets[i] = p->workers[i].dd;
    rc = rate_take_back_repeats(p->c, sets, (size_t)p->n_workers, fetch_in_file, take_back_in_file,
                                p);
    free(sets);
    return rc;
}

/* The workers' dedupe sets, for the reaper. */
typedef struct reap {
    rate_dedupe **sets;
    size_t n;
} reap;

static void *reap_main(void *arg)
{
    reap *r = arg;
    size_t i;

    for (i = 0; i < r->n; i++)
        rate_dedupe_destroy(r->sets[i]);
    free(r->sets);
    free(r);
    return NULL;
}

/*
 * Destroy the workers' dedupe sets. Closing their temporary files frees
 * every page written to them (some 50 bytes an event), a few hundredths
 * of a second at 10^7 events: on a thread of its own (rate_ctx.reaper)
 * when one can start, so that the invoices are written meanwhile.
 */
static void free_dedupe_sets(pool *p)
{
    reap *r = calloc(1, sizeof(*r));
    size_t i;

    if (r != NULL && p->workers != NULL)
        r->sets = calloc((size_t)p->n_workers, sizeof(*r->sets));
    if (r == NULL || r->sets == NULL) {
        for (i = 0; p->workers != NULL && i < (size_t)p->n_workers; i++)
            rate_dedupe_destroy(p->workers[i].dd);
        free(r);
        return;
    }
    for (i = 0; i < (size_t)p->n_workers; i++)
        r->sets[r->n++] = p->workers[i].dd;
    if (!p->c->reaper_started && pthread_create(&p->c->reaper, NULL, reap_main, r) == 0)
        p->c->reaper_started = 1;
    else
        reap_main(r);
}

static void pool_free(pool *p)
{
    size_t i;

    free_dedupe_sets(p);
    free(p->bases);
    for (i = 0; p->ring != NULL && i < p->window; i++)
        free(p->ring[i].items);
    free(p->ring);
    free(p->workers);
    if (p->fd >= 0)
        close(p->fd);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

int rate_parallel(rate_ctx *c)
{
    pool p;
    int rc;
    int rc2;

    memset(&p, 0, sizeof(p));
    p.c = c;
    p.fd = -1;
    p.n_workers = c->opts.jobs;
    p.window = (size_t)c->opts.jobs * WINDOW_PER_JOB;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    p.ring = calloc(p.window, sizeof(*p.ring));
    p.workers = calloc((size_t)p.n_workers, sizeof(*p.workers));
    if (p.ring == NULL || p.workers == NULL || describe_sources(c) != 0) {
        pool_free(&p);
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    progress_start(&c->prog, stderr, c->opts.progress, c->opts.files, c->opts.n_files);
    rc = start_workers(&p);
    if (rc == CLI_EXIT_OK)
        rc = drain_all(&p);
    rc2 = stop_workers(&p, rc == CLI_EXIT_OK);
    progress_end(&c->prog);
    rc = rc != CLI_EXIT_OK ? rc : rc2;
    if (rc == CLI_EXIT_OK && c->dedupe != NULL)
        rc = take_back_repeats(&p);
    pool_free(&p);
    return rc;
}
