/*
 * rate_repeats.c - the later occurrences of an event id in `billing rate`,
 * after the last file: each read again from its file (or from the dedupe,
 * for standard input and pipes), checked to be what was rated, and taken
 * back out of its book's rater, counted as a duplicate when identical to
 * the first and rejected as a conflict otherwise. Used by the sequential
 * (rate_read.c) and the parallel (rate_parallel.c) reading alike.
 */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rate_ctx.h"
#include "util.h"

enum { HIT_STOP_REJECTED = 1, HIT_STOP_INTERNAL = 2 };

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Most files kept open at once to read events again; past it, one at a time. */
#define FETCH_FDS_MAX 256

/* The file of source @src, open and unchanged since it was rated; -1 with a message. */
static int fetch_fd(rate_ctx *c, uint32_t src, char *err, size_t errsize)
{
    struct source *s = &c->srcs[src];
    struct stat st;
    int i;

    if (s->fd >= 0)
        return s->fd;
    if (c->open_fds >= FETCH_FDS_MAX) {
        for (i = 0; i < c->opts.n_files; i++) {
            if (c->srcs[i].fd >= 0) {
                close(c->srcs[i].fd);
                c->srcs[i].fd = -1;
            }
        }
        c->open_fds = 0;
    }
    s->fd = open(c->opts.files[src], O_RDONLY | O_CLOEXEC);
    if (s->fd < 0 || fstat(s->fd, &st) != 0 || !same_file(&st, &s->st)) {
        snprintf(err, errsize, "%s: changed or gone while being rated; rate it again", s->name);
        if (s->fd >= 0)
            close(s->fd);
        s->fd = -1;
        return -1;
    }
    c->open_fds++;
    return s->fd;
}

/*
 * Read the event at @w again from @fd into c->ev, as it was rated: its
 * bytes have the check taken when it was rated (rate_dedupe_hash_check), and the
 * event parsed is read from those same bytes (bc_event_read_at's own hash
 * of what it parsed equals theirs). Returns 0 or -1.
 */
static int read_again(rate_ctx *c, int fd, const struct source *s, const rate_dedupe_where *w,
                      const char *id)
{
    unsigned char *bytes = malloc(BC_JSONL_LINE_MAX + 1);
    uint64_t parsed = 0;
    size_t n = 0;
    char e[ERR_MAX];
    int ok;

    ok =
        bytes != NULL &&
        bc_record_bytes_at(fd, s->format, w->offset, bytes, BC_JSONL_LINE_MAX + 1, &n) == 0 &&
        rate_dedupe_hash_check(bytes, n) == w->check &&
        bc_event_read_at(fd, s->format, w->offset, c->ev, &parsed, e, sizeof(e)) == BC_READ_EVENT &&
        parsed == bc_hash_bytes(bytes, n) && strcmp(billing_event_id(c->ev), id) == 0;
    free(bytes);
    return ok ? 0 : -1;
}

/*
 * Read an event again from its file (a rate_dedupe_fetch_fn), check that
 * its bytes are those rated, and encode it.
 */
int rate_fetch(void *arg, const rate_dedupe_where *w, const char *id, unsigned char *buf,
               size_t *len, char *err, size_t errsize)
{
    rate_ctx *c = arg;
    const struct source *s = &c->srcs[w->src];
    billing_time_t start;
    billing_time_t end;
    int fd = fetch_fd(c, w->src, err, errsize);

    if (fd < 0)
        return -1;
    if (read_again(c, fd, s, w, id) != 0) {
        snprintf(err, errsize, "%s: changed while being rated (event '%s' is not as it was)",
                 s->name, id);
        return -1;
    }
    /* Taken back as it was rated: cut at --at (it was not left out, or it would not be here). */
    if (c->running != NULL) {
        start = billing_event_start(c->ev);
        end = billing_event_end(c->ev);
        if (end > c->opts.at)
            billing_event_set_interval(c->ev, start, c->opts.at);
    }
    if (billing_event_encode(c->ev, buf, BILLING_EVENT_WIRE_MAX, len) != BILLING_OK) {
        snprintf(err, errsize, "event '%s': cannot be encoded", id);
        return -1;
    }
    return 0;
}

/*
 * A conflicting repeat for --rejects: its bytes as read again from its
 * file, or, for standard input and pipes (kept only encoded), its
 * protobuf encoding.
 */
static void keep_conflict(rate_ctx *c, const rate_dedupe_hit *hit, const char *reason)
{
    const struct source *s = &c->srcs[hit->where.src];
    unsigned char *buf = s->reread ? malloc(BC_JSONL_LINE_MAX + 1) : NULL;
    char err[ERR_MAX];
    size_t len = 0;
    int fd = buf != NULL ? fetch_fd(c, hit->where.src, err, sizeof(err)) : -1;

    if (fd >= 0 &&
        bc_record_bytes_at(fd, s->format, hit->where.offset, buf, BC_JSONL_LINE_MAX + 1, &len) == 0)
        rejects_write(c->rejects, s->name, s->format, hit->where.pos, reason, buf, len, s->format);
    else
        rejects_write(c->rejects, s->name, s->format, hit->where.pos, reason, hit->event,
                      hit->event_len, BC_FORMAT_PROTOBUF);
    free(buf);
}

/* A later occurrence of an id (a rate_dedupe_fn): take it back out of the rater. */
int rate_take_back(void *arg, const rate_dedupe_hit *hit)
{
    rate_ctx *c = arg;
    char err[ERR_MAX + 2 * PATH_LEN];
    char where[PATH_LEN + 32];
    char first[PATH_LEN + 32];
    billing_status st;

    bc_location_format(where, sizeof(where), c->srcs[hit->where.src].name,
                       c->srcs[hit->where.src].format, hit->where.pos);
    st = billing_event_decode(c->ev, hit->event, hit->event_len, err, sizeof(err));
    if (st == BILLING_OK) {
        rate_use_account(c, billing_event_account(c->ev));
        st = billing_rater_take_back(c->rater, c->ev, err, sizeof(err));
    }
    if (st != BILLING_OK) {
        cli_error("%s: internal error taking back a repeated event: %s", where, err);
        return HIT_STOP_INTERNAL;
    }
    c->counts.rated--;
    if (c->running != NULL)
        running_forget(c->running, c->ev);
    if (c->kept != NULL)
        running_forget(c->kept, c->ev);
    if (hit->kind == RATE_DEDUPE_DUPLICATE) {
        c->counts.duplicates++;
        return 0;
    }
    c->counts.rejected++;
    bc_location_format(first, sizeof(first), c->srcs[hit->first.src].name,
                       c->srcs[hit->first.src].format, hit->first.pos);
    snprintf(err, sizeof(err), "event '%s': field 'id': already rated with different content at %s",
             hit->id, first);
    cli_error("%s: %s", where, err);
    if (c->rejects != NULL)
        keep_conflict(c, hit, err);
    return c->opts.strict ? HIT_STOP_REJECTED : 0;
}

/* With --verbose: how the dedupe went, summed over its sets. */
static void say_dedupe_stats(const rate_ctx *c, rate_dedupe *const *sets, size_t n_sets)
{
    rate_dedupe_stats st;

    rate_dedupe_get_stats_many(sets, n_sets, &st);
    cli_error("dedupe: %" PRIu64 " events remembered (%" PRIu64 " kept whole, %" PRIu64
              " read again) in %zu KiB of memory; %" PRIu64 " runs, %" PRIu64 " merges, %" PRIu64
              " bytes written to temporary files in %s",
              st.records, st.stored, st.fetched, c->opts.dedupe_memory >> 10, st.runs, st.merges,
              st.spilled, rate_temp_dir(&c->opts));
}

int rate_take_back_repeats(rate_ctx *c, rate_dedupe *const *sets, size_t n_sets,
                           rate_dedupe_fetch_fn fetch, rate_dedupe_fn fn, void *arg)
{
    char err[ERR_MAX];
    int rc = rate_dedupe_finish_many(sets, n_sets, fetch, fn, arg, err, sizeof(err));

    if (c->opts.verbose)
        say_dedupe_stats(c, sets, n_sets);
    if (rc == 0)
        return CLI_EXIT_OK;
    if (rc == HIT_STOP_REJECTED)
        return CLI_EXIT_REJECTED;
    if (rc < 0)
        cli_error("%s", err);
    return CLI_EXIT_INTERNAL;
}
