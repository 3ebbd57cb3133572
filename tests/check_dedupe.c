/*
 * check_dedupe.c - the bounded-memory dedupe of billing/dedupe.c against an
 * oracle computed here from the generating parameters: random streams
 * of repeated events (byte-identical duplicates and one-field conflicts,
 * shuffled, short and long ids) give exactly the expected hits, with
 * the right kinds, ids, places (source, position, offset) and event
 * bytes, the same hits in the same order whether everything stays in
 * memory or is spilled to many runs merged RATE_DEDUPE_FANIN at a time, and
 * whether the events are stored in the records, read again through the
 * fetch callback, or a mix of both; the callback is asked only for
 * events that are not stored and whose id repeats, each at most once,
 * and the statistics count it; ids that differ in one byte, by length or
 * as prefixes are never confused; a callback stops the finish; a failed
 * fetch or a missing fetch callback fails the finish with a message; bad
 * budgets, a missing temporary directory and misuse are reported;
 * spilled runs leave no files behind.
 *
 * Ids longer than RATE_DEDUPE_ID_MAX cannot be tested here: libbilling
 * refuses ids over 128 bytes, so no billing_event carries one.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "billing.h"
#include "dedupe.h"
#include "util.h"
#include "testrng.h"

#define ERR 512
#define ID_CAP 129 /* ids are 1..128 bytes */
#define BIG_MEMORY ((size_t)64 * 1024 * 1024)
/*
 * Enough stream elements for more than RATE_DEDUPE_FANIN runs at the
 * smallest budget even when no event is stored (a record is then only
 * its place and its id, about 55 bytes here on average).
 */
#define STREAM_MIN 64000
#define SEEDS 3
/* 2026-01-01T00:00:00Z */
#define T0 (INT64_C(1767225600) * BILLING_NS_PER_SEC)
#define HOUR (INT64_C(3600) * BILLING_NS_PER_SEC)

/*
 * An assertion for hot loops: unlike ck_assert, it does nothing when it
 * holds (ck_assert records a check point per call, which is slow in fork
 * mode over tens of thousands of calls).
 */
#define CHECK(cond, ...)               \
    do {                               \
        if (!(cond))                   \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

static const char *const accounts[] = {"acct-a", "acct-b", "acct-c"};
static const char *const models[] = {"", "RTX4090", "A100-80G"};
static const char *const regions[] = {"", "cn-east-1", "us-west-2"};
#define N_ACCOUNTS (sizeof(accounts) / sizeof(accounts[0]))
#define N_MODELS (sizeof(models) / sizeof(models[0]))
#define N_REGIONS (sizeof(regions) / sizeof(regions[0]))

/* The parameters an event is built from; equal parameters mean equal content. */
typedef struct gen {
    char id[ID_CAP];
    size_t base; /* which base event (id) this is an occurrence of */
    unsigned account;
    unsigned resource;
    unsigned meter;
    unsigned model;
    unsigned region;
    unsigned qty;
    unsigned frac; /* tenths; 0 prints no fraction, so the text is canonical */
    billing_time_t start;
    billing_time_t end;
} gen;

static uint64_t rng_state;

static uint64_t rnd(void)
{
    return test_rnd(&rng_state);
}

static const char *tmpdir(void)
{
    const char *t = getenv("TMPDIR");

    return t != NULL && t[0] != '\0' ? t : "/tmp";
}

static int gen_equal(const gen *a, const gen *b)
{
    return strcmp(a->id, b->id) == 0 && a->account == b->account && a->resource == b->resource &&
           a->meter == b->meter && a->model == b->model && a->region == b->region &&
           a->qty == b->qty && a->frac == b->frac && a->start == b->start && a->end == b->end;
}

/* Fill @ev from @g. */
static void fill(billing_event *ev, const gen *g)
{
    char qty[32];
    char resource[32];
    char err[ERR];

    if (g->frac != 0)
        snprintf(qty, sizeof(qty), "%u.%u", g->qty, g->frac);
    else
        snprintf(qty, sizeof(qty), "%u", g->qty);
    snprintf(resource, sizeof(resource), "r-%u", g->resource);
    billing_event_reset(ev);
    CHECK(billing_event_set_id(ev, g->id) == BILLING_OK, "id '%s' refused", g->id);
    CHECK(billing_event_set_account(ev, accounts[g->account]) == BILLING_OK, "account refused");
    CHECK(billing_event_set_resource(ev, resource) == BILLING_OK, "resource refused");
    CHECK(billing_event_set_meter(ev, (billing_meter)g->meter) == BILLING_OK, "meter refused");
    billing_event_set_interval(ev, g->start, g->end);
    CHECK(billing_event_set_quantity(ev, qty, err, sizeof(err)) == BILLING_OK, "%s", err);
    CHECK(billing_event_set_model(ev, models[g->model]) == BILLING_OK, "model refused");
    CHECK(billing_event_set_region(ev, regions[g->region]) == BILLING_OK, "region refused");
}

/* The encoding of @g into @buf (BILLING_EVENT_WIRE_MAX bytes); returns its length. */
static size_t encode(billing_event *ev, const gen *g, unsigned char *buf)
{
    size_t len = 0;

    fill(ev, g);
    CHECK(billing_event_encode(ev, buf, BILLING_EVENT_WIRE_MAX, &len) == BILLING_OK,
          "event '%s' not encoded", g->id);
    return len;
}

/* Random content for @g (its id and base are left alone). */
static void gen_content(gen *g)
{
    g->account = (unsigned)(rnd() % N_ACCOUNTS);
    g->resource = (unsigned)(rnd() % 100);
    g->meter = (unsigned)(rnd() % BILLING_METER_COUNT);
    g->model = (unsigned)(rnd() % N_MODELS);
    g->region = (unsigned)(rnd() % N_REGIONS);
    g->qty = 1 + (unsigned)(rnd() % 64);
    g->frac = (unsigned)(rnd() % 10);
    g->start = T0 + (billing_time_t)(rnd() % (30u * 86400u)) * BILLING_NS_PER_SEC;
    g->end = g->start + (1 + (billing_time_t)(rnd() % 48)) * HOUR;
}

/* Change field @field (0..4) of @g, deterministically, so that the content differs. */
static void alter(gen *g, unsigned field)
{
    switch (field) {
    case 0:
        g->qty++;
        break;
    case 1:
        g->end += 60 * BILLING_NS_PER_SEC;
        break;
    case 2:
        g->model = (g->model + 1) % N_MODELS;
        break;
    case 3:
        g->region = (g->region + 1) % N_REGIONS;
        break;
    default:
        g->account = (g->account + 1) % N_ACCOUNTS;
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Places and store modes                                                  */
/* ---------------------------------------------------------------------- */

/*
 * The place of element @i of a stream: source i / SRC_SPAN, position i,
 * offset i * 1000 + 7, so that places grow with i as (source, offset),
 * the order rate_dedupe_finish_many takes for "first" across sets.
 */
#define SRC_SPAN 20000
static rate_dedupe_where place(size_t i)
{
    rate_dedupe_where w;

    w.src = (uint32_t)(i / SRC_SPAN);
    w.pos = i;
    w.offset = (uint64_t)i * 1000 + 7;
    return w;
}

/* Whether @w is the place of element @i. */
static int place_is(const rate_dedupe_where *w, size_t i)
{
    return w->src == i / SRC_SPAN && w->pos == i && w->offset == (uint64_t)i * 1000 + 7;
}

/* The element of a stream of @n read at @offset, or SIZE_MAX. */
static size_t element_at(uint64_t offset, size_t n)
{
    if (offset < 7 || (offset - 7) % 1000 != 0 || (offset - 7) / 1000 >= n)
        return SIZE_MAX;
    return (size_t)((offset - 7) / 1000);
}

/* Which events are added with store != 0. */
typedef enum store_mode {
    STORE_MIXED, /* about half, by a hash of the element's index */
    STORE_ALL,
    STORE_NONE
} store_mode;
#define STORE_MODES 3
static const char *const store_names[STORE_MODES] = {"mixed", "all stored", "none stored"};

/*
 * Whether element @i is stored under @mode. The mix is a hash of @i
 * rather than its parity, so that occurrences of one id a fixed distance
 * apart (filled() below) still mix stored and fetched events.
 */
static int stored(store_mode mode, size_t i)
{
    return mode == STORE_ALL ||
           (mode == STORE_MIXED && ((uint32_t)i * UINT32_C(0x9e3779b1)) >> 31 != 0);
}

/* FNV-1a, to compare hit sequences without keeping every event. */
static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = UINT64_C(0xcbf29ce484222325);

    while (n-- > 0)
        h = (h ^ *s++) * UINT64_C(0x100000001b3);
    return h;
}

/* ---------------------------------------------------------------------- */
/* The oracle                                                              */
/* ---------------------------------------------------------------------- */

/* What a hit said, to compare the hits of two runs. */
typedef struct hit_rec {
    rate_dedupe_kind kind;
    rate_dedupe_where where;
    rate_dedupe_where first;
    size_t id_len;
    uint64_t id_hash;
    size_t ev_len;
    uint64_t ev_hash;
} hit_rec;

typedef struct oracle {
    const gen *stream;
    size_t n;
    store_mode mode;
    const size_t *first;    /* per base: stream index of its first occurrence */
    const size_t *occurs;   /* per base: its occurrences */
    unsigned char *seen;    /* per element: reported */
    unsigned char *fetched; /* per element: read again through the fetch callback */
    unsigned char *closed;  /* per base: its hits are over */
    hit_rec *hits;          /* in order */
    size_t n_hits;
    size_t last; /* stream index of the previous hit */
    size_t n_dup;
    size_t n_conflict;
    size_t fetches;
    billing_event *ev;
    billing_event *fetch_ev;
    unsigned char want[BILLING_EVENT_WIRE_MAX];
    unsigned char again[BILLING_EVENT_WIRE_MAX];
} oracle;

/* The fetch callback: element j is found by its offset and encoded again. */
static int oracle_fetch(void *arg, const rate_dedupe_where *where, const char *id,
                        unsigned char *buf, size_t *len, char *errbuf, size_t errsize)
{
    oracle *o = arg;
    size_t j = element_at(where->offset, o->n);
    const gen *g;

    (void)errbuf;
    (void)errsize;
    CHECK(j != SIZE_MAX, "fetch at offset %" PRIu64 " (pos %" PRIu64 ")", where->offset,
          where->pos);
    g = &o->stream[j];
    CHECK(place_is(where, j), "fetch of element %zu: src %" PRIu32 ", pos %" PRIu64, j, where->src,
          where->pos);
    CHECK(strcmp(id, g->id) == 0, "fetch of element %zu: id '%s', want '%s'", j, id, g->id);
    CHECK(!stored(o->mode, j), "fetch of element %zu ('%s'), which is stored", j, g->id);
    CHECK(o->occurs[g->base] > 1, "fetch of element %zu ('%s'), whose id occurs once", j, g->id);
    CHECK(!o->fetched[j], "element %zu ('%s') fetched twice", j, g->id);
    o->fetched[j] = 1;
    o->fetches++;
    /* The whole buffer is the callback's (ASan and valgrind check its size). */
    memset(buf, 0xa5, BILLING_EVENT_WIRE_MAX);
    *len = encode(o->fetch_ev, g, buf);
    return 0;
}

static int oracle_hit(void *arg, const rate_dedupe_hit *hit)
{
    oracle *o = arg;
    size_t j = (size_t)hit->where.pos;
    size_t first;
    size_t len;
    size_t len2 = 0;
    const gen *g;
    hit_rec *r;
    rate_dedupe_kind kind;
    char err[ERR];

    CHECK(hit->where.pos < o->n, "hit at position %" PRIu64 " of %zu", hit->where.pos, o->n);
    g = &o->stream[j];
    CHECK(place_is(&hit->where, j), "element %zu: src %" PRIu32 ", offset %" PRIu64, j,
          hit->where.src, hit->where.offset);
    CHECK(!o->seen[j], "element %zu ('%s') reported twice", j, g->id);
    o->seen[j] = 1;
    first = o->first[g->base];
    CHECK(first != j, "element %zu ('%s'), the first occurrence, reported", j, g->id);
    CHECK(place_is(&hit->first, first),
          "element %zu ('%s'): first %" PRIu32 "/%" PRIu64 "/%" PRIu64 ", want element %zu", j,
          g->id, hit->first.src, hit->first.pos, hit->first.offset, first);
    CHECK(strcmp(hit->id, g->id) == 0, "element %zu: id '%s', want '%s'", j, hit->id, g->id);
    kind = gen_equal(g, &o->stream[first]) ? RATE_DEDUPE_DUPLICATE : RATE_DEDUPE_CONFLICT;
    CHECK(hit->kind == kind, "element %zu ('%s'): kind %d, want %d", j, g->id, (int)hit->kind,
          (int)kind);

    /* The event is this occurrence, byte for byte, and decodes to it. */
    len = encode(o->ev, g, o->want);
    CHECK(hit->event_len == len && memcmp(hit->event, o->want, len) == 0,
          "element %zu ('%s'): event of %zu bytes, want %zu", j, g->id, hit->event_len, len);
    CHECK(billing_event_decode(o->ev, hit->event, hit->event_len, err, sizeof(err)) == BILLING_OK,
          "element %zu: %s", j, err);
    CHECK(strcmp(billing_event_id(o->ev), g->id) == 0, "element %zu: decoded id '%s'", j,
          billing_event_id(o->ev));
    CHECK(billing_event_encode(o->ev, o->again, sizeof(o->again), &len2) == BILLING_OK &&
              len2 == len && memcmp(o->again, o->want, len) == 0,
          "element %zu ('%s'): decoded event differs", j, g->id);

    /* One id's hits come together, later occurrences in the order they were added. */
    if (o->n_hits > 0) {
        if (o->stream[o->last].base == g->base)
            CHECK(o->last < j, "'%s': element %zu after %zu", g->id, j, o->last);
        else
            o->closed[o->stream[o->last].base] = 1;
    }
    CHECK(!o->closed[g->base], "hits of '%s' are not together", g->id);
    o->last = j;

    r = &o->hits[o->n_hits++];
    r->kind = hit->kind;
    r->where = hit->where;
    r->first = hit->first;
    r->id_len = strlen(hit->id);
    r->id_hash = fnv(hit->id, r->id_len);
    r->ev_len = hit->event_len;
    r->ev_hash = fnv(hit->event, hit->event_len);
    if (kind == RATE_DEDUPE_DUPLICATE)
        o->n_dup++;
    else
        o->n_conflict++;
    return 0;
}

/*
 * Add @stream (element i at place(i), stored as @mode says) with @memory
 * bytes, finish, and check every hit against the oracle: each later
 * occurrence reported once with the expected kind; each event that is
 * not stored and whose id repeats fetched exactly once, no other. Writes
 * the hits to @hits (n slots) and returns the statistics.
 */
/* Sets of run_oracle_sets: element i goes to set (i / SET_CHUNK) % n_sets, like -j chunks. */
#define SET_CHUNK 700
#define SETS_MAX 3

static rate_dedupe_stats run_oracle_sets(const gen *stream, size_t n, size_t n_bases, size_t memory,
                                         store_mode mode, size_t n_sets, hit_rec *hits,
                                         size_t *n_hits);

static rate_dedupe_stats run_oracle(const gen *stream, size_t n, size_t n_bases, size_t memory,
                                    store_mode mode, hit_rec *hits, size_t *n_hits)
{
    return run_oracle_sets(stream, n, n_bases, memory, mode, 1, hits, n_hits);
}

/*
 * run_oracle over @n_sets sets (1 to SETS_MAX), each given its elements
 * in order and @memory bytes, finished together (rate_dedupe_finish_many);
 * the statistics are their sums.
 */
static rate_dedupe_stats run_oracle_sets(const gen *stream, size_t n, size_t n_bases, size_t memory,
                                         store_mode mode, size_t n_sets, hit_rec *hits,
                                         size_t *n_hits)
{
    size_t *first = malloc(n_bases * sizeof(*first));
    size_t *occurs = calloc(n_bases, sizeof(*occurs));
    oracle *o = calloc(1, sizeof(*o));
    billing_event *ev = billing_event_new();
    size_t want_dup = 0;
    size_t want_conflict = 0;
    size_t want_stored = 0;
    size_t i;
    char err[ERR];
    rate_dedupe *sets[SETS_MAX];
    rate_dedupe *d;
    rate_dedupe_where w;
    rate_dedupe_stats st;
    rate_dedupe_stats one;
    size_t k;
    int rc;

    ck_assert(first != NULL && occurs != NULL && o != NULL && ev != NULL);
    ck_assert(n_sets >= 1 && n_sets <= SETS_MAX);
    for (i = 0; i < n_bases; i++)
        first[i] = SIZE_MAX;
    for (i = 0; i < n; i++) {
        occurs[stream[i].base]++;
        if (first[stream[i].base] == SIZE_MAX)
            first[stream[i].base] = i;
        else if (gen_equal(&stream[i], &stream[first[stream[i].base]]))
            want_dup++;
        else
            want_conflict++;
    }
    for (i = 0; i < n_bases; i++)
        ck_assert_msg(first[i] != SIZE_MAX, "base %zu never occurs", i);

    o->stream = stream;
    o->n = n;
    o->mode = mode;
    o->first = first;
    o->occurs = occurs;
    o->seen = calloc(n, 1);
    o->fetched = calloc(n, 1);
    o->closed = calloc(n_bases, 1);
    o->hits = hits;
    o->ev = billing_event_new();
    o->fetch_ev = billing_event_new();
    ck_assert(o->seen != NULL && o->fetched != NULL && o->closed != NULL && o->ev != NULL &&
              o->fetch_ev != NULL);

    for (k = 0; k < n_sets; k++) {
        sets[k] = rate_dedupe_new(memory, tmpdir(), err, sizeof(err));
        ck_assert_msg(sets[k] != NULL, "%s", err);
    }
    for (i = 0; i < n; i++) {
        d = sets[i / SET_CHUNK % n_sets];
        fill(ev, &stream[i]);
        w = place(i);
        want_stored += stored(mode, i) != 0;
        rc = rate_dedupe_add(d, ev, &w, stored(mode, i), err, sizeof(err));
        CHECK(rc == 0, "add %zu: %s", i, err);
    }
    if (n_sets == 1)
        rc = rate_dedupe_finish(sets[0], oracle_fetch, oracle_hit, o, err, sizeof(err));
    else
        rc = rate_dedupe_finish_many(sets, n_sets, oracle_fetch, oracle_hit, o, err, sizeof(err));
    ck_assert_msg(rc == 0, "finish (%s, %zu sets): %d %s", store_names[mode], n_sets, rc, err);
    rate_dedupe_get_stats_many(sets, n_sets, &st);
    if (n_sets == 1) {
        rate_dedupe_get_stats(sets[0], &one);
        ck_assert(memcmp(&one, &st, sizeof(st)) == 0);
    }
    for (k = 0; k < n_sets; k++)
        rate_dedupe_destroy(sets[k]);

    ck_assert_uint_eq(st.records, n);
    ck_assert_uint_eq(st.stored, want_stored);
    ck_assert_uint_eq(st.fetched, o->fetches);
    ck_assert_uint_eq(o->n_dup, want_dup);
    ck_assert_uint_eq(o->n_conflict, want_conflict);
    ck_assert_uint_eq(o->n_hits, n - n_bases);
    for (i = 0; i < n; i++) {
        CHECK(o->seen[i] == (first[stream[i].base] != i), "element %zu ('%s'): seen %d", i,
              stream[i].id, o->seen[i]);
        /* Each hit needs both events: a repeated id's events are all read, once. */
        CHECK(o->fetched[i] == (!stored(mode, i) && occurs[stream[i].base] > 1),
              "element %zu ('%s', %zu occurrences, %s): fetched %d", i, stream[i].id,
              occurs[stream[i].base], stored(mode, i) ? "stored" : "not stored", o->fetched[i]);
    }
    if (mode == STORE_ALL)
        ck_assert_uint_eq(st.fetched, 0);
    else
        ck_assert_uint_gt(st.fetched, 0);
    *n_hits = o->n_hits;

    billing_event_destroy(o->ev);
    billing_event_destroy(o->fetch_ev);
    billing_event_destroy(ev);
    free(o->seen);
    free(o->fetched);
    free(o->closed);
    free(o);
    free(occurs);
    free(first);
    return st;
}

static int same_place(const rate_dedupe_where *a, const rate_dedupe_where *b)
{
    return a->src == b->src && a->pos == b->pos && a->offset == b->offset;
}

/* The hits @cur[0..n_cur) are @ref[0..n_ref), in the same order; the rest names the run. */
static void same_hits(const hit_rec *ref, size_t n_ref, const hit_rec *cur, size_t n_cur,
                      size_t memory, const char *mode, size_t n_sets)
{
    const hit_rec *a;
    const hit_rec *b;
    size_t i;

    ck_assert_msg(n_cur == n_ref, "memory %zu, %s, %zu sets: %zu hits, want %zu", memory, mode,
                  n_sets, n_cur, n_ref);
    for (i = 0; i < n_ref; i++) {
        a = &ref[i];
        b = &cur[i];
        CHECK(a->kind == b->kind && same_place(&a->where, &b->where) &&
                  same_place(&a->first, &b->first) && a->id_len == b->id_len &&
                  a->id_hash == b->id_hash && a->ev_len == b->ev_len && a->ev_hash == b->ev_hash,
              "memory %zu, %s, %zu sets: hit %zu is element %" PRIu64 " (kind %d), want %" PRIu64
              " (kind %d)",
              memory, mode, n_sets, i, b->where.pos, (int)b->kind, a->where.pos, (int)a->kind);
    }
}

/*
 * Check @stream with the smallest budget and with everything in memory,
 * in every store mode: all must give the same hits (kind, id, places,
 * event bytes) in the same order. The smallest budget must spill more
 * than RATE_DEDUPE_FANIN runs and merge when @many, at least two runs
 * otherwise.
 */
static void check_all(const gen *stream, size_t n, size_t n_bases, int many)
{
    static const size_t memories[] = {RATE_DEDUPE_MEMORY_MIN, BIG_MEMORY};
    hit_rec *ref = malloc(n * sizeof(*ref));
    hit_rec *cur = malloc(n * sizeof(*cur));
    size_t n_ref = 0;
    size_t n_cur;
    size_t m;
    int s;
    rate_dedupe_stats st;

    ck_assert(ref != NULL && cur != NULL);
    for (m = 0; m < 2; m++) {
        for (s = 0; s < STORE_MODES; s++) {
            st = run_oracle(stream, n, n_bases, memories[m], (store_mode)s,
                            m == 0 && s == 0 ? ref : cur, m == 0 && s == 0 ? &n_ref : &n_cur);
            if (memories[m] == RATE_DEDUPE_MEMORY_MIN) {
                ck_assert_msg(st.runs > (many ? RATE_DEDUPE_FANIN : 1), "%s: %" PRIu64 " runs",
                              store_names[s], st.runs);
                if (many)
                    ck_assert_uint_ge(st.merges, 1);
                ck_assert_uint_gt(st.spilled, 0);
            } else {
                ck_assert_uint_eq(st.runs, 0);
                ck_assert_uint_eq(st.merges, 0);
                ck_assert_uint_eq(st.spilled, 0);
            }
            if (m == 0 && s == 0)
                continue;
            same_hits(ref, n_ref, cur, n_cur, memories[m], store_names[s], 1);
        }
    }
    free(ref);
    free(cur);
}

/* The id of base event @i: mostly "ev-<i>", some over 100 bytes, some of one length and prefix. */
static void base_id(char *id, size_t i)
{
    int len;

    switch (i % 10) {
    case 0: /* 100..128 bytes */
        len = snprintf(id, ID_CAP, "ev-%zu-", i);
        memset(id + len, 'L', (size_t)(100 + i % 29 - (size_t)len));
        id[100 + i % 29] = '\0';
        break;
    case 1: /* 128 bytes, all but the last few shared */
        snprintf(id, ID_CAP, "ev-%0125zu", i);
        memset(id + 3, 'p', 115);
        break;
    default:
        snprintf(id, ID_CAP, "ev-%zu", i);
        break;
    }
}

/*
 * A random stream of repeats from seed @seed (at least STREAM_MIN
 * elements, malloc'd): base events with 1 to 4 occurrences, byte-identical
 * or with one field changed, shuffled. Its length in *@n, its ids in *@n_bases.
 */
static gen *random_stream(uint64_t seed, size_t *n_out, size_t *n_bases_out)
{
    gen *stream = malloc((STREAM_MIN + 4) * sizeof(*stream));
    size_t n = 0;
    size_t n_bases = 0;
    size_t n_long = 0;
    size_t copies;
    size_t k;
    size_t i;
    size_t j;
    unsigned dup_kind;
    gen t;

    ck_assert_ptr_nonnull(stream);
    rng_state = seed;
    while (n < STREAM_MIN) {
        gen *b = &stream[n];

        base_id(b->id, n_bases);
        if (strlen(b->id) >= 100)
            n_long++;
        b->base = n_bases++;
        gen_content(b);
        n++;
        copies = (size_t)(rnd() % 4); /* 1..4 occurrences in all */
        for (k = 0; k < copies; k++) {
            stream[n] = *b;
            dup_kind = (unsigned)(rnd() % 8);
            if (dup_kind >= 3) /* else byte-identical */
                alter(&stream[n], dup_kind - 3);
            n++;
        }
    }
    ck_assert_uint_gt(n_long, 2000);
    for (i = n; i-- > 1;) {
        j = (size_t)(rnd() % (i + 1));
        t = stream[i];
        stream[i] = stream[j];
        stream[j] = t;
    }
    *n_out = n;
    *n_bases_out = n_bases;
    return stream;
}

/* Property: random streams of repeats against the oracle. */
START_TEST(test_oracle)
{
    size_t n;
    size_t n_bases;
    gen *stream = random_stream(UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(_i + 1), &n, &n_bases);

    check_all(stream, n, n_bases, 1);
    free(stream);
}
END_TEST

/*
 * rate_dedupe_finish_many over 2 and 3 sets (each given its chunks of the
 * stream in order, as -j workers are) merges the two halves of the hash
 * space on two threads: the hits must be those of one set holding
 * everything, in the same order, spilled to runs or all in memory, events
 * stored or read again.
 */
START_TEST(test_halves)
{
    static const size_t memories[] = {RATE_DEDUPE_MEMORY_MIN, BIG_MEMORY};
    static const store_mode modes[] = {STORE_MIXED, STORE_NONE};
    size_t n;
    size_t n_bases;
    gen *stream = random_stream(UINT64_C(0x2545f4914f6cdd1d), &n, &n_bases);
    hit_rec *ref = malloc(n * sizeof(*ref));
    hit_rec *cur = malloc(n * sizeof(*cur));
    size_t n_ref = 0;
    size_t n_cur = 0;
    size_t sets;
    size_t m;
    size_t k;
    rate_dedupe_stats st;

    ck_assert(ref != NULL && cur != NULL);
    run_oracle(stream, n, n_bases, BIG_MEMORY, STORE_MIXED, ref, &n_ref);
    ck_assert_uint_gt(n_ref, 1000);
    for (sets = 2; sets <= SETS_MAX; sets++) {
        for (m = 0; m < 2; m++) {
            for (k = 0; k < 2; k++) {
                st = run_oracle_sets(stream, n, n_bases, memories[m], modes[k], sets, cur, &n_cur);
                if (m == 0)
                    ck_assert_uint_gt(st.runs, sets);
                same_hits(ref, n_ref, cur, n_cur, memories[m], store_names[modes[k]], sets);
            }
        }
    }
    free(ref);
    free(cur);
    free(stream);
}
END_TEST

/*
 * The merge's tournament (loser tree) over every number of inputs from 1
 * (the records in memory alone) to more than 8 (runs plus memory, one set
 * or two): the hits must be those of one set holding everything in
 * memory, in the same order. Budgets between those of test_oracle give
 * odd and even numbers of runs.
 */
START_TEST(test_merge_inputs)
{
    static const size_t budgets[] = {2, 3, 4, 5, 7, 9, 13};
    size_t n;
    size_t n_bases;
    gen *stream = random_stream(UINT64_C(0x6a09e667f3bcc909), &n, &n_bases);
    hit_rec *ref = malloc(n * sizeof(*ref));
    hit_rec *cur = malloc(n * sizeof(*cur));
    size_t n_ref = 0;
    size_t n_cur = 0;
    size_t memory;
    size_t sets;
    size_t b;
    uint64_t seen = 0;
    rate_dedupe_stats st;

    ck_assert(ref != NULL && cur != NULL);
    st = run_oracle(stream, n, n_bases, BIG_MEMORY, STORE_NONE, ref, &n_ref);
    ck_assert_uint_eq(st.runs, 0);
    ck_assert_uint_gt(n_ref, 1000);
    for (b = 0; b < sizeof(budgets) / sizeof(budgets[0]); b++) {
        memory = RATE_DEDUPE_MEMORY_MIN * budgets[b] * 4;
        for (sets = 1; sets <= 2; sets++) {
            st = run_oracle_sets(stream, n, n_bases, memory, STORE_NONE, sets, cur, &n_cur);
            ck_assert_uint_lt(st.runs, RATE_DEDUPE_FANIN);
            seen |= UINT64_C(1) << st.runs;
            same_hits(ref, n_ref, cur, n_cur, memory, store_names[STORE_NONE], sets);
        }
    }
    /* Both parities of the number of inputs, and more than 8 of them. */
    ck_assert_uint_ne(seen & UINT64_C(0x5555555555555555), 0);
    ck_assert_uint_ne(seen & UINT64_C(0xaaaaaaaaaaaaaaaa), 0);
    ck_assert_uint_gt(seen, UINT64_C(1) << 8);
    free(ref);
    free(cur);
    free(stream);
}
END_TEST

/*
 * The id hash orders the repeats the tool reports (and so its messages):
 * it must not change. The check hash is pinned too, and every one-byte
 * change of a record changes it.
 */
START_TEST(test_id_hash_pinned)
{
    static const struct {
        const char *s;
        uint64_t id;
        uint64_t check;
    } pins[] = {
        {"", UINT64_C(0x0a3f46e79293b578), UINT64_C(0x06a02cc91276624f)},
        {"a", UINT64_C(0x939b6fa9740d20c2), UINT64_C(0x75964b18977963be)},
        {"ev-1", UINT64_C(0xa6cc933e38a7daf4), UINT64_C(0x5fe85a8317ee8178)},
        {"evt-00000000000000000001", UINT64_C(0x5175bd9e6dd01e70), UINT64_C(0x0e31dd23e593fab2)},
        {"0123456789abcdef0123456789abcdef0123456789abcdefX", UINT64_C(0xef7ab2ba1a82fb0a),
         UINT64_C(0x416fd16f0cfc7820)},
    };
    unsigned char rec[256];
    uint64_t h;
    size_t len;
    size_t i;
    size_t n;

    for (i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
        n = strlen(pins[i].s);
        ck_assert_msg(bc_hash_bytes(pins[i].s, n) == pins[i].id, "id hash of '%s'", pins[i].s);
        ck_assert_msg(rate_dedupe_hash_check(pins[i].s, n) == pins[i].check, "check of '%s'",
                      pins[i].s);
    }
    for (i = 0; i < sizeof(rec); i++)
        rec[i] = (unsigned char)('a' + i % 26);
    for (len = 1; len <= sizeof(rec); len++) {
        h = rate_dedupe_hash_check(rec, len);
        CHECK(h != rate_dedupe_hash_check(rec, len - 1), "length %zu and %zu", len, len - 1);
        for (i = 0; i < len; i++) {
            rec[i] ^= 0x20;
            CHECK(rate_dedupe_hash_check(rec, len) != h, "byte %zu of %zu", i, len);
            rec[i] ^= 0x20;
        }
    }
}
END_TEST

/* Store @id as ids[n], with byte @at (unless SIZE_MAX) changed to 'j'; returns n + 1. */
static size_t id_variant(char (*ids)[ID_CAP], size_t n, const char *id, size_t at)
{
    ck_assert_uint_lt(n, 64);
    memcpy(ids[n], id, strlen(id) + 1);
    if (at != SIZE_MAX)
        ids[n][at] = 'j';
    return n + 1;
}

/*
 * One 8-byte step of the id hash of billing/dedupe.c, copied here (the
 * hash is private) to build ids that collide: hits must not depend on
 * the hash being unique. A step mixes the state with the block (h ^ w),
 * so ids of one length whose first blocks differ reach the same state
 * after the second block when their second blocks differ as their states
 * do; with the rest equal, so are their hashes. Should dedupe.c's hash
 * change, these ids merely stop colliding: the test still passes.
 */
static uint64_t hash_step(uint64_t h, const char *block)
{
    uint64_t w;

    memcpy(&w, block, 8);
    h = (h ^ w) * UINT64_C(0xbf58476d1ce4e5b9);
    return h ^ (h >> 31);
}

/* Whether the 8 bytes at @p are printable ASCII other than space. */
static int printable8(const char *p)
{
    size_t b;

    for (b = 0; b < 8; b++)
        if (p[b] < '!' || p[b] > '~')
            return 0;
    return 1;
}

/*
 * Store @count printable ids of 24 bytes with one hash as ids[n],
 * ids[n + 1], ...; returns the new n. Each has a random first block, a
 * second block chosen so that (state ^ block) is the first id's, and the
 * same third block.
 */
static size_t colliding_ids(char (*ids)[ID_CAP], size_t n, size_t count)
{
    const uint64_t h0 = UINT64_C(0x9e3779b97f4a7c15) ^ (24 * UINT64_C(0xff51afd7ed558ccd));
    uint64_t meet = 0; /* state ^ second block, the same for every id */
    uint64_t w;
    char id[ID_CAP];
    size_t k;
    size_t b;

    for (k = 0; k < count; k++) {
        do {
            for (b = 0; b < 8; b++)
                id[b] = (char)('!' + rnd() % 94);
            if (k == 0) {
                memcpy(id + 8, "collide0", 8);
                memcpy(&w, id + 8, 8);
                meet = hash_step(h0, id) ^ w;
            }
            w = hash_step(h0, id) ^ meet;
            memcpy(id + 8, &w, 8);
        } while (!printable8(id + 8));
        memcpy(id + 16, "|collide", 9);
        n = id_variant(ids, n, id, SIZE_MAX);
    }
    return n;
}

/*
 * Ids that differ in their last or first byte, by length, or as
 * prefixes, and ids of one hash are distinct.
 */
START_TEST(test_similar_ids)
{
    static const size_t lens[] = {1, 7, 8, 9, 15, 16, 17, 24, 127, 128};
    enum { FILLERS = 2000 };
    char ids[64][ID_CAP];
    char plain[ID_CAP];
    size_t n_ids = 0;
    gen *stream;
    size_t n = 0;
    size_t n_bases;
    size_t i;
    size_t j;
    size_t phase;
    gen base;

    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memset(plain, 'k', lens[i]);
        plain[lens[i]] = '\0';
        n_ids = id_variant(ids, n_ids, plain, SIZE_MAX);
        n_ids = id_variant(ids, n_ids, plain, lens[i] - 1); /* last byte differs */
        if (lens[i] > 1)
            n_ids = id_variant(ids, n_ids, plain, 0); /* first byte differs */
        if (lens[i] > 9)
            n_ids = id_variant(ids, n_ids, plain, 8); /* the first byte past one 8-byte word */
    }
    /* '~' sorts last: "~"*L is a prefix of "~"*(L+1) and may be next to it after a sort. */
    for (i = 40; i <= 41; i++) {
        memset(plain, '~', i);
        plain[i] = '\0';
        n_ids = id_variant(ids, n_ids, plain, SIZE_MAX);
    }
    strcpy(ids[n_ids++], "a");
    strcpy(ids[n_ids++], "ab");
    strcpy(ids[n_ids++], "abc");
    strcpy(ids[n_ids++], "b");
    strcpy(ids[n_ids++], "ba");
    rng_state = UINT64_C(0x5851f42d4c957f2d);
    n_ids = colliding_ids(ids, n_ids, 16);
    ck_assert_uint_le(n_ids, 64);
    for (i = 0; i < n_ids; i++)
        for (j = i + 1; j < n_ids; j++)
            ck_assert_str_ne(ids[i], ids[j]);

    /* Every id, fillers, every id again (same), fillers, every id again (changed). */
    stream = malloc((3 * n_ids + 2 * FILLERS) * sizeof(*stream));
    ck_assert_ptr_nonnull(stream);
    rng_state = UINT64_C(0x2545f4914f6cdd1d);
    gen_content(&base);
    n_bases = n_ids;
    for (phase = 0; phase < 3; phase++) {
        for (i = 0; i < n_ids; i++) {
            stream[n] = base;
            strcpy(stream[n].id, ids[i]);
            stream[n].base = i;
            if (phase == 2)
                alter(&stream[n], (unsigned)(i % 5));
            n++;
        }
        for (i = 0; phase < 2 && i < FILLERS; i++) {
            stream[n] = base;
            snprintf(stream[n].id, ID_CAP, "filler-%zu", n_bases);
            stream[n].base = n_bases++;
            n++;
        }
    }
    check_all(stream, n, n_bases, 0);
    free(stream);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Callbacks, edge cases, errors                                           */
/* ---------------------------------------------------------------------- */

/*
 * The events of filled(): element i has the id "id-<i % distinct>", one
 * content for all (so every hit is a duplicate), and is stored as the
 * mode says.
 */
static gen filled_gen;
static size_t filled_n;
static size_t filled_distinct;
static store_mode filled_mode;

/* Callbacks' state: the fn counts and checks hits, the fetch may fail on purpose. */
typedef struct counter {
    size_t calls;
    size_t stop_at; /* return stop_value on this call (1-based); 0: never */
    int stop_value;
    size_t last;    /* the previous hit's element */
    size_t fetches; /* fetch calls, the failed one included */
    size_t fail_at; /* fail this fetch call (1-based); 0: never */
    char fail_msg[ERR];
    billing_event *ev;
    unsigned char want[BILLING_EVENT_WIRE_MAX];
} counter;

static void counter_init(counter *c)
{
    memset(c, 0, sizeof(*c));
    c->ev = billing_event_new();
    ck_assert_ptr_nonnull(c->ev);
}

static void counter_reset(counter *c, size_t stop_at, int stop_value)
{
    billing_event *ev = c->ev;

    memset(c, 0, sizeof(*c));
    c->stop_at = stop_at;
    c->stop_value = stop_value;
    c->ev = ev;
}

static void counter_done(counter *c)
{
    billing_event_destroy(c->ev);
    c->ev = NULL;
}

/* Set up filled_add() for @n events with @distinct ids, content from @seed. */
static void filled_setup(size_t n, size_t distinct, store_mode mode, uint64_t seed)
{
    filled_n = n;
    filled_distinct = distinct;
    filled_mode = mode;
    rng_state = seed;
    gen_content(&filled_gen);
}

/* The event of element @i. */
static void filled_event(gen *g, size_t i)
{
    *g = filled_gen;
    snprintf(g->id, sizeof(g->id), "id-%zu", i % filled_distinct);
}

/* Add element @i, using @ev. */
static int filled_add(rate_dedupe *d, billing_event *ev, size_t i, char *err)
{
    gen g;
    rate_dedupe_where w = place(i);

    filled_event(&g, i);
    fill(ev, &g);
    return rate_dedupe_add(d, ev, &w, stored(filled_mode, i), err, ERR);
}

/* A set holding @n events "id-<i % distinct>", with @memory bytes. */
static rate_dedupe *filled(size_t memory, size_t n, size_t distinct, store_mode mode)
{
    billing_event *ev = billing_event_new();
    char err[ERR];
    rate_dedupe *d = rate_dedupe_new(memory, tmpdir(), err, sizeof(err));
    size_t i;

    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_ptr_nonnull(ev);
    filled_setup(n, distinct, mode, UINT64_C(0x853c49e6748fea9b));
    for (i = 0; i < n; i++)
        CHECK(filled_add(d, ev, i, err) == 0, "add %zu: %s", i, err);
    billing_event_destroy(ev);
    return d;
}

/* Count and check the hits of filled events. */
static int count_hit(void *arg, const rate_dedupe_hit *hit)
{
    counter *c = arg;
    size_t i = (size_t)hit->where.pos;
    size_t len;
    gen g;

    CHECK(hit->where.pos < filled_n && place_is(&hit->where, i), "hit at %" PRIu64 "/%" PRIu64,
          hit->where.pos, hit->where.offset);
    CHECK(i >= filled_distinct, "element %zu, a first occurrence, reported", i);
    filled_event(&g, i);
    CHECK(strcmp(hit->id, g.id) == 0, "element %zu: id '%s', want '%s'", i, hit->id, g.id);
    CHECK(place_is(&hit->first, i % filled_distinct), "element %zu: first at %" PRIu64, i,
          hit->first.pos);
    CHECK(hit->kind == RATE_DEDUPE_DUPLICATE, "element %zu: kind %d", i, (int)hit->kind);
    len = encode(c->ev, &g, c->want);
    CHECK(hit->event_len == len && memcmp(hit->event, c->want, len) == 0,
          "element %zu: event differs", i);
    if (c->calls > 0 && c->last % filled_distinct == i % filled_distinct)
        CHECK(c->last < i, "'%s': element %zu after %zu", g.id, i, c->last);
    c->last = i;
    c->calls++;
    return c->calls == c->stop_at ? c->stop_value : 0;
}

/* Read a filled event again; fail on call c->fail_at, with a message kept in c->fail_msg. */
static int fetch_filled(void *arg, const rate_dedupe_where *where, const char *id,
                        unsigned char *buf, size_t *len, char *errbuf, size_t errsize)
{
    counter *c = arg;
    size_t i = element_at(where->offset, filled_n);
    gen g;

    c->fetches++;
    CHECK(i != SIZE_MAX && place_is(where, i), "fetch at %" PRIu64 "/%" PRIu64, where->pos,
          where->offset);
    CHECK(!stored(filled_mode, i), "fetch of element %zu, which is stored", i);
    filled_event(&g, i);
    CHECK(strcmp(id, g.id) == 0, "fetch of element %zu: id '%s', want '%s'", i, id, g.id);
    if (c->fetches == c->fail_at) {
        snprintf(c->fail_msg, sizeof(c->fail_msg), "offset %" PRIu64 ": event '%s' changed",
                 where->offset, id);
        snprintf(errbuf, errsize, "%s", c->fail_msg);
        return -1;
    }
    memset(buf, 0xa5, BILLING_EVENT_WIRE_MAX);
    *len = encode(c->ev, &g, buf);
    return 0;
}

/* The number of elements among the first @n that filled_add stores. */
static size_t n_stored(size_t n, store_mode mode)
{
    size_t i;
    size_t k = 0;

    for (i = 0; i < n; i++)
        k += stored(mode, i) != 0;
    return k;
}

/* Stopping in either half of a two-set finish: the value comes back, no hit after it. */
START_TEST(test_halves_stop)
{
    enum { N = 20000, DISTINCT = 5000 };
    char err[ERR];
    counter c;
    billing_event *ev = billing_event_new();
    rate_dedupe *sets[2];
    size_t stops[3] = {1, N - DISTINCT - 1, N - DISTINCT};
    size_t i;
    size_t t;

    counter_init(&c);
    for (t = 0; t < 3; t++) {
        for (i = 0; i < 2; i++) {
            sets[i] = rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN, tmpdir(), err, sizeof(err));
            ck_assert_msg(sets[i] != NULL, "%s", err);
        }
        filled_setup(N, DISTINCT, STORE_MIXED, 29);
        for (i = 0; i < N; i++)
            CHECK(filled_add(sets[i / SET_CHUNK % 2], ev, i, err) == 0, "add %zu: %s", i, err);
        counter_reset(&c, stops[t], 7);
        ck_assert_int_eq(
            rate_dedupe_finish_many(sets, 2, fetch_filled, count_hit, &c, err, sizeof(err)), 7);
        ck_assert_uint_eq(c.calls, stops[t]);
        rate_dedupe_destroy(sets[0]);
        rate_dedupe_destroy(sets[1]);
    }
    billing_event_destroy(ev);
    counter_done(&c);
}
END_TEST

/* A positive callback result stops the finish, which returns it; in memory and spilled. */
START_TEST(test_callback_stop)
{
    static const size_t memories[] = {RATE_DEDUPE_MEMORY_MIN, BIG_MEMORY};
    char err[ERR];
    counter c;
    rate_dedupe *d;
    rate_dedupe_stats st;
    size_t i;
    int s;

    counter_init(&c);
    for (i = 0; i < 2; i++) {
        for (s = 0; s < STORE_MODES; s++) {
            d = filled(memories[i], 20000, 5000, (store_mode)s);
            rate_dedupe_get_stats(d, &st);
            ck_assert_uint_eq(st.records, 20000);
            ck_assert_uint_eq(st.stored, n_stored(20000, (store_mode)s));
            if (i == 0)
                ck_assert_uint_gt(st.runs, 1);
            counter_reset(&c, 3, 42);
            ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)),
                             42);
            ck_assert_uint_eq(c.calls, 3);
            rate_dedupe_destroy(d);

            d = filled(memories[i], 20000, 5000, (store_mode)s);
            counter_reset(&c, 1, 1);
            ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)),
                             1);
            ck_assert_uint_eq(c.calls, 1);
            rate_dedupe_destroy(d);

            /* Every id repeats: every event not stored is read again, once. */
            d = filled(memories[i], 20000, 5000, (store_mode)s);
            counter_reset(&c, 0, 0);
            ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)),
                             0);
            ck_assert_uint_eq(c.calls, 15000);
            rate_dedupe_get_stats(d, &st);
            ck_assert_uint_eq(st.fetched, 20000 - n_stored(20000, (store_mode)s));
            ck_assert_uint_eq(c.fetches, st.fetched);
            rate_dedupe_destroy(d);
        }
    }
    counter_done(&c);
}
END_TEST

/* A failed fetch fails the finish with the fetch's message; in memory and spilled. */
START_TEST(test_fetch_fails)
{
    static const size_t memories[] = {RATE_DEDUPE_MEMORY_MIN, BIG_MEMORY};
    static const size_t fail_at[] = {1, 2, 3, 777};
    static const store_mode modes[] = {STORE_NONE, STORE_MIXED};
    char err[ERR];
    counter c;
    rate_dedupe *d;
    rate_dedupe_stats st;
    size_t i;
    size_t k;
    size_t m;

    counter_init(&c);
    for (i = 0; i < 2; i++) {
        for (m = 0; m < 2; m++) {
            for (k = 0; k < sizeof(fail_at) / sizeof(fail_at[0]); k++) {
                d = filled(memories[i], 20000, 5000, modes[m]);
                counter_reset(&c, 0, 0);
                c.fail_at = fail_at[k];
                err[0] = '\0';
                ck_assert_int_eq(
                    rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), -1);
                ck_assert_uint_eq(c.fetches, fail_at[k]);
                ck_assert_msg(c.fail_msg[0] != '\0' && strstr(err, c.fail_msg) != NULL,
                              "memory %zu, %s, fetch %zu: '%s', want '%s'", memories[i],
                              store_names[modes[m]], fail_at[k], err, c.fail_msg);
                /* Nothing stored: every hit needs a fetch of its own. */
                if (modes[m] == STORE_NONE)
                    ck_assert_uint_lt(c.calls, fail_at[k]);
                rate_dedupe_get_stats(d, &st);
                ck_assert_uint_eq(st.fetched, fail_at[k] - 1);
                /* Finished, if badly: once is all. */
                ck_assert_int_eq(
                    rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), -1);
                ck_assert_uint_eq(c.fetches, fail_at[k]);
                rate_dedupe_destroy(d);
            }
        }
    }
    counter_done(&c);
}
END_TEST

/*
 * Without a fetch callback, finishing fails with a message when an
 * event that is not stored is needed, and works when none is.
 */
START_TEST(test_no_fetch)
{
    static const size_t memories[] = {RATE_DEDUPE_MEMORY_MIN, BIG_MEMORY};
    static const int pairs[][2] = {{1, 0}, {0, 1}, {0, 0}};
    char err[ERR];
    counter c;
    billing_event *ev = billing_event_new();
    rate_dedupe *d;
    rate_dedupe_where w;
    gen g;
    size_t i;
    size_t k;

    counter_init(&c);
    for (i = 0; i < 2; i++) {
        /* Some events not stored, every id repeated. */
        d = filled(memories[i], 20000, 5000, STORE_MIXED);
        counter_reset(&c, 0, 0);
        err[0] = '\0';
        ck_assert_int_eq(rate_dedupe_finish(d, NULL, count_hit, &c, err, sizeof(err)), -1);
        ck_assert_msg(err[0] != '\0', "no message");
        ck_assert_uint_lt(c.calls, 15000);
        rate_dedupe_destroy(d);

        /* Everything stored: no fetch is needed. */
        d = filled(memories[i], 20000, 5000, STORE_ALL);
        counter_reset(&c, 0, 0);
        ck_assert_int_eq(rate_dedupe_finish(d, NULL, count_hit, &c, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.calls, 15000);
        rate_dedupe_destroy(d);

        /* Nothing stored, but no id repeats: no fetch is needed either. */
        d = filled(memories[i], 15000, 15000, STORE_NONE);
        counter_reset(&c, 0, 0);
        ck_assert_int_eq(rate_dedupe_finish(d, NULL, count_hit, &c, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.calls, 0);
        rate_dedupe_destroy(d);
    }

    /* One repeated id: the first, the later or both occurrences not stored. */
    filled_setup(2, 1, STORE_NONE, 5);
    filled_event(&g, 0);
    fill(ev, &g);
    for (k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
        d = rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN, tmpdir(), err, sizeof(err));
        ck_assert_msg(d != NULL, "%s", err);
        for (i = 0; i < 2; i++) {
            w = place(i);
            ck_assert_int_eq(rate_dedupe_add(d, ev, &w, pairs[k][i], err, sizeof(err)), 0);
        }
        counter_reset(&c, 0, 0);
        err[0] = '\0';
        ck_assert_int_eq(rate_dedupe_finish(d, NULL, count_hit, &c, err, sizeof(err)), -1);
        ck_assert_msg(err[0] != '\0', "store %d,%d: no message", pairs[k][0], pairs[k][1]);
        ck_assert_uint_eq(c.calls, 0);
        rate_dedupe_destroy(d);
    }
    billing_event_destroy(ev);
    counter_done(&c);
}
END_TEST

/*
 * Finishing just after the run that makes RATE_DEDUPE_FANIN, and just
 * after the first merge (one record in memory each time): the hits are
 * complete.
 */
START_TEST(test_fanin_edge)
{
    enum { DISTINCT = 20000 };
    char err[ERR];
    counter c;
    billing_event *ev = billing_event_new();
    rate_dedupe *d;
    rate_dedupe_stats st;
    size_t i;
    size_t n;
    int extra;

    counter_init(&c);
    for (extra = 0; extra < 2; extra++) {
        d = rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN, tmpdir(), err, sizeof(err));
        ck_assert_msg(d != NULL, "%s", err);
        filled_setup(SIZE_MAX, DISTINCT, STORE_MIXED, 13);
        st.runs = 0;
        st.merges = 0;
        for (i = 0; extra ? st.merges == 0 : st.runs < RATE_DEDUPE_FANIN; i++) {
            CHECK(i < 1000000, "%" PRIu64 " runs, no merge after %zu records", st.runs, i);
            CHECK(filled_add(d, ev, i, err) == 0, "add %zu: %s", i, err);
            rate_dedupe_get_stats(d, &st);
        }
        n = i;
        filled_n = n;
        ck_assert_uint_gt(n, DISTINCT);
        counter_reset(&c, 0, 0);
        ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), 0);
        ck_assert_uint_eq(c.calls, n - DISTINCT);
        rate_dedupe_get_stats(d, &st);
        ck_assert_uint_eq(st.records, n);
        ck_assert_uint_eq(st.stored, n_stored(n, STORE_MIXED));
        ck_assert_uint_eq(st.fetched, c.fetches);
        rate_dedupe_destroy(d);
    }
    billing_event_destroy(ev);
    counter_done(&c);
}
END_TEST

/* No events, one event, only distinct ids: no hits, no fetches, finish returns 0. */
START_TEST(test_nothing_repeated)
{
    char err[ERR];
    counter c;
    rate_dedupe *d;
    rate_dedupe_stats st;

    counter_init(&c);
    d = filled(RATE_DEDUPE_MEMORY_MIN, 0, 1, STORE_NONE);
    ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.calls, 0);
    rate_dedupe_get_stats(d, &st);
    ck_assert_uint_eq(st.records, 0);
    ck_assert_uint_eq(st.runs, 0);
    rate_dedupe_destroy(d);

    d = filled(RATE_DEDUPE_MEMORY_MIN, 1, 1, STORE_NONE);
    ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.calls, 0);
    rate_dedupe_get_stats(d, &st);
    ck_assert_uint_eq(st.records, 1);
    ck_assert_uint_eq(st.stored, 0);
    rate_dedupe_destroy(d);

    d = filled(RATE_DEDUPE_MEMORY_MIN, 60000, 60000, STORE_NONE);
    ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.calls, 0);
    rate_dedupe_get_stats(d, &st);
    ck_assert_uint_eq(st.records, 60000);
    ck_assert_uint_eq(st.stored, 0);
    ck_assert_uint_gt(st.runs, RATE_DEDUPE_FANIN);
    ck_assert_uint_ge(st.merges, 1);
    ck_assert_uint_eq(st.fetched, 0);
    ck_assert_uint_eq(c.fetches, 0);
    rate_dedupe_destroy(d);

    d = filled(RATE_DEDUPE_MEMORY_MIN, 15000, 15000, STORE_MIXED);
    ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.calls, 0);
    ck_assert_uint_eq(c.fetches, 0);
    rate_dedupe_destroy(d);

    rate_dedupe_destroy(NULL);
    counter_done(&c);
}
END_TEST

/* Runs are unlinked at once: the temporary directory stays empty. */
START_TEST(test_runs_unlinked)
{
    char dir[4096];
    char err[ERR];
    counter c;
    billing_event *ev = billing_event_new();
    rate_dedupe *d;
    rate_dedupe_stats st;
    DIR *dp;
    struct dirent *de;
    size_t entries = 0;
    size_t i;

    counter_init(&c);
    snprintf(dir, sizeof(dir), "%s/check_dedupe.XXXXXX", tmpdir());
    ck_assert_ptr_nonnull(mkdtemp(dir));
    d = rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN, dir, err, sizeof(err));
    ck_assert_msg(d != NULL, "%s", err);
    filled_setup(5000, 2500, STORE_MIXED, 7);
    for (i = 0; i < 5000; i++)
        CHECK(filled_add(d, ev, i, err) == 0, "add %zu: %s", i, err);
    rate_dedupe_get_stats(d, &st);
    ck_assert_uint_gt(st.runs, 1);
    dp = opendir(dir);
    ck_assert_ptr_nonnull(dp);
    while ((de = readdir(dp)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            entries++;
    closedir(dp);
    ck_assert_uint_eq(entries, 0);
    ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.calls, 2500);
    rate_dedupe_destroy(d);
    billing_event_destroy(ev);
    counter_done(&c);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_errors)
{
    static const char missing[] = "/nonexistent/check_dedupe-tmp";
    char gone[512];
    char err[ERR];
    counter c;
    billing_event *ev = billing_event_new();
    rate_dedupe *d;
    rate_dedupe_stats st;
    rate_dedupe_where w = place(0);
    size_t i;
    int rc = 0;
    int store;

    counter_init(&c);
    /* A budget below the minimum. */
    err[0] = '\0';
    ck_assert_ptr_null(rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN - 1, tmpdir(), err, sizeof(err)));
    ck_assert_msg(strstr(err, "65536") != NULL, "'%s'", err);
    ck_assert_ptr_null(rate_dedupe_new(0, tmpdir(), err, sizeof(err)));

    ck_assert_ptr_null(rate_dedupe_new(RATE_DEDUPE_MEMORY_MAX + 1, tmpdir(), err, sizeof(err)));

    /* A missing temporary directory is found at once. */
    err[0] = '\0';
    ck_assert_ptr_null(rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN, missing, err, sizeof(err)));
    ck_assert_msg(strstr(err, missing) != NULL, "'%s' does not name the directory", err);

    /* A directory that goes away: fine until a run must be written. */
    for (store = 0; store < 2; store++) {
        snprintf(gone, sizeof(gone), "%s/check_dedupe-gone.XXXXXX", tmpdir());
        ck_assert_ptr_nonnull(mkdtemp(gone));
        d = rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN, gone, err, sizeof(err));
        ck_assert_msg(d != NULL, "%s", err);
        ck_assert_int_eq(rmdir(gone), 0);
        filled_setup(5000, 5000, store ? STORE_ALL : STORE_NONE, 11);
        rc = 0;
        for (i = 0; i < 5000 && rc == 0; i++) {
            err[0] = '\0';
            rc = filled_add(d, ev, i, err);
        }
        ck_assert_int_eq(rc, -1);
        ck_assert_uint_gt(i, 100); /* the first records fit in memory */
        ck_assert_msg(strstr(err, gone) != NULL, "'%s' does not name the directory", err);
        rate_dedupe_get_stats(d, &st);
        ck_assert_uint_eq(st.records, i - 1);
        ck_assert_uint_eq(st.stored, store ? i - 1 : 0);
        ck_assert_uint_eq(st.runs, 0);
        rate_dedupe_destroy(d);
    }

    /* An event without an id, stored or not. */
    d = rate_dedupe_new(RATE_DEDUPE_MEMORY_MIN, tmpdir(), err, sizeof(err));
    ck_assert_msg(d != NULL, "%s", err);
    billing_event_reset(ev);
    for (store = 0; store < 2; store++) {
        err[0] = '\0';
        ck_assert_int_eq(rate_dedupe_add(d, ev, &w, store, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "'id'") != NULL, "'%s'", err);
    }
    rate_dedupe_get_stats(d, &st);
    ck_assert_uint_eq(st.records, 0);
    ck_assert_uint_eq(st.stored, 0);

    /* Adding after finish, finishing twice. */
    filled_setup(2, 1, STORE_NONE, 11);
    ck_assert_int_eq(filled_add(d, ev, 0, err), 0);
    ck_assert_int_eq(filled_add(d, ev, 1, err), 0);
    ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.calls, 1);
    ck_assert_uint_eq(c.fetches, 2);
    err[0] = '\0';
    ck_assert_int_eq(rate_dedupe_add(d, ev, &w, 0, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "after finish") != NULL, "'%s'", err);
    err[0] = '\0';
    ck_assert_int_eq(rate_dedupe_finish(d, fetch_filled, count_hit, &c, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "twice") != NULL, "'%s'", err);
    ck_assert_uint_eq(c.calls, 1);
    ck_assert_uint_eq(c.fetches, 2);
    rate_dedupe_get_stats(d, &st);
    ck_assert_uint_eq(st.records, 2);
    ck_assert_uint_eq(st.stored, 0);
    ck_assert_uint_eq(st.fetched, 2);
    rate_dedupe_destroy(d);
    billing_event_destroy(ev);
    counter_done(&c);
}
END_TEST

static Suite *dedupe_suite(void)
{
    Suite *s = suite_create("dedupe");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_oracle, 0, SEEDS);
    tcase_add_test(tc, test_halves);
    tcase_add_test(tc, test_merge_inputs);
    tcase_add_test(tc, test_halves_stop);
    tcase_add_test(tc, test_id_hash_pinned);
    tcase_add_test(tc, test_similar_ids);
    tcase_add_test(tc, test_callback_stop);
    tcase_add_test(tc, test_fetch_fails);
    tcase_add_test(tc, test_no_fetch);
    tcase_add_test(tc, test_fanin_edge);
    tcase_add_test(tc, test_nothing_repeated);
    tcase_add_test(tc, test_runs_unlinked);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dedupe_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
