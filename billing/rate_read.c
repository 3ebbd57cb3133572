/*
 * rate_read.c - reading and rating the event files of `billing rate`:
 * every record ends up in exactly one count (rated, duplicate or
 * rejected); repeats are taken back after the last file (see cmd_rate.c);
 * rejected records are kept with --rejects.
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
#include "rate.h"
#include "util.h"

/* ---------------------------------------------------------------------- */
/* Reading and rating                                                      */
/* ---------------------------------------------------------------------- */

/* Hand the event just rated to the dedupe. Returns 0 or -1 with a message. */
static int remember(rate_ctx *c, bc_reader *rd, char *err, size_t errsize)
{
    bc_dedupe_where w;
    size_t len;
    const unsigned char *rec = bc_reader_record(rd, &len);

    w.src = c->src;
    w.pos = bc_reader_position(rd);
    w.offset = bc_reader_offset(rd);
    w.check = bc_hash_check(rec, len);
    return bc_dedupe_add(c->dedupe, c->ev, &w, !c->srcs[c->src].reread, err, errsize);
}

/* A record just read is rejected for @reason: counted, said on stderr, and kept with --rejects. */
static void reject_record(rate_ctx *c, bc_reader *rd, const char *reason)
{
    const unsigned char *rec;
    size_t len;

    c->counts.rejected++;
    cli_error("%s: %s", bc_reader_where(rd), reason);
    if (c->rejects == NULL)
        return;
    rec = bc_reader_record(rd, &len);
    rejects_write(c->rejects, c->srcs[c->src].name, c->srcs[c->src].format,
                  bc_reader_position(rd), reason, rec, len, c->srcs[c->src].format);
}

/*
 * With --at: usage up to the instant only. An event that starts at or
 * after it is left out (CUT_AFTER); one that runs across it is kept as
 * running (for when the credit reaches zero) and rated up to the instant
 * only: its quantity is a level (GPUs, instances, GB provisioned), so
 * the cut interval is priced exactly; a traffic event's bytes all count
 * before the instant. Returns CUT_KEEP, CUT_AFTER or CUT_ERROR.
 */
int rate_cut_at(rate_ctx *c, billing_event *ev, char *err, size_t errsize)
{
    billing_time_t start;
    billing_time_t end;

    start = billing_event_start(ev);
    end = billing_event_end(ev);
    if (start >= c->opts.at)
        return CUT_AFTER;
    if (end <= c->opts.at)
        return CUT_KEEP;
    if (running_note(c->running, ev, err, errsize) != 0)
        return CUT_ERROR;
    billing_event_set_interval(ev, start, c->opts.at);
    return CUT_KEEP;
}

/* Rate the event just read; returns CLI_EXIT_OK, CLI_EXIT_REJECTED or CLI_EXIT_INTERNAL. */
static int rate_one(rate_ctx *c, bc_reader *rd)
{
    char err[ERR_MAX];
    billing_status st;

    rate_use_account(c, billing_event_account(c->ev));
    if (c->running != NULL) {
        switch (rate_cut_at(c, c->ev, err, sizeof(err))) {
        case CUT_AFTER:
            c->counts.after_at++;
            return CLI_EXIT_OK;
        case CUT_ERROR:
            cli_error("%s: %s", bc_reader_where(rd), err);
            return CLI_EXIT_INTERNAL;
        }
    }
    st = billing_rater_add(c->rater, c->ev, err, sizeof(err));
    if (st == BILLING_OK) {
        c->counts.rated++;
        if (c->kept != NULL && running_note(c->kept, c->ev, err, sizeof(err)) != 0) {
            cli_error("%s: %s", bc_reader_where(rd), err);
            return CLI_EXIT_INTERNAL;
        }
        if (c->dedupe != NULL && remember(c, rd, err, sizeof(err)) != 0) {
            cli_error("%s: %s", bc_reader_where(rd), err);
            return CLI_EXIT_INTERNAL;
        }
        return CLI_EXIT_OK;
    }
    if (c->running != NULL)
        running_forget(c->running, c->ev);
    reject_record(c, rd, err);
    return st == BILLING_ERR_NOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_REJECTED;
}

static int file_format(const rate_ctx *c, const char *path, bc_format *out)
{
    if (c->opts.input_format_set) {
        *out = c->opts.input_format;
        return CLI_EXIT_OK;
    }
    if (bc_format_guess(path, out) != 0)
        return cli_usage_error("rate",
                               "%s: cannot tell the format from the name; use "
                               "--input-format jsonl or protobuf",
                               path);
    return CLI_EXIT_OK;
}

/* Read one record and rate it; returns an exit code, or -1 at the end of the input. */
static int step(rate_ctx *c, bc_reader *rd)
{
    char err[ERR_MAX];
    bc_read_result rr = bc_reader_next(rd, c->ev, err, sizeof(err));

    if (rr == BC_READ_EOF)
        return -1;
    if (rr == BC_READ_ERROR) {
        cli_error("%s: %s", bc_reader_where(rd), err);
        return CLI_EXIT_INPUT;
    }
    c->counts.read++;
    if (rr == BC_READ_EVENT)
        return rate_one(c, rd);
    reject_record(c, rd, err);
    return CLI_EXIT_REJECTED;
}

/* Rate every record of @path; returns CLI_EXIT_OK or the code to stop with. */
static int rate_file(rate_ctx *c, const char *path)
{
    char err[ERR_MAX];
    bc_format format;
    bc_reader *rd;
    int rc;

    rc = file_format(c, path, &format);
    if (rc != CLI_EXIT_OK)
        return rc;
    rd = bc_reader_open(path, format, err, sizeof(err));
    if (rd == NULL) {
        cli_error("%s", err);
        return CLI_EXIT_INPUT;
    }
    c->srcs[c->src].format = format;
    c->srcs[c->src].reread =
        bc_reader_rereadable(rd) && stat(path, &c->srcs[c->src].st) == 0;
    c->srcs[c->src].name = strdup(bc_reader_name(rd));
    if (c->srcs[c->src].name == NULL) {
        bc_reader_close(rd);
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (;;) {
        rc = step(c, rd);
        progress_tick(&c->prog, c->counts.read, bc_reader_offset(rd));
        if (rc == CLI_EXIT_REJECTED && !c->opts.strict)
            continue;
        if (rc != CLI_EXIT_OK)
            break;
    }
    progress_file_done(&c->prog,
                       c->srcs[c->src].reread ? (uint64_t)c->srcs[c->src].st.st_size : 0);
    bc_reader_close(rd);
    return rc == -1 ? CLI_EXIT_OK : rc;
}

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
 * bytes have the check taken when it was rated (bc_hash_check), and the
 * event parsed is read from those same bytes (bc_event_read_at's own hash
 * of what it parsed equals theirs). Returns 0 or -1.
 */
static int read_again(rate_ctx *c, int fd, const struct source *s, const bc_dedupe_where *w,
                      const char *id)
{
    unsigned char *bytes = malloc(BC_JSONL_LINE_MAX + 1);
    uint64_t parsed = 0;
    size_t n = 0;
    char e[ERR_MAX];
    int ok;

    ok = bytes != NULL &&
         bc_record_bytes_at(fd, s->format, w->offset, bytes, BC_JSONL_LINE_MAX + 1, &n) == 0 &&
         bc_hash_check(bytes, n) == w->check &&
         bc_event_read_at(fd, s->format, w->offset, c->ev, &parsed, e, sizeof(e)) ==
             BC_READ_EVENT &&
         parsed == bc_hash_bytes(bytes, n) && strcmp(billing_event_id(c->ev), id) == 0;
    free(bytes);
    return ok ? 0 : -1;
}

/*
 * Read an event again from its file (a bc_dedupe_fetch_fn), check that
 * its bytes are those rated, and encode it.
 */
int rate_fetch(void *arg, const bc_dedupe_where *w, const char *id, unsigned char *buf,
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
static void keep_conflict(rate_ctx *c, const bc_dedupe_hit *hit, const char *reason)
{
    const struct source *s = &c->srcs[hit->where.src];
    unsigned char *buf = s->reread ? malloc(BC_JSONL_LINE_MAX + 1) : NULL;
    char err[ERR_MAX];
    size_t len = 0;
    int fd = buf != NULL ? fetch_fd(c, hit->where.src, err, sizeof(err)) : -1;

    if (fd >= 0 && bc_record_bytes_at(fd, s->format, hit->where.offset, buf, BC_JSONL_LINE_MAX + 1,
                                      &len) == 0)
        rejects_write(c->rejects, s->name, s->format, hit->where.pos, reason, buf, len,
                      s->format);
    else
        rejects_write(c->rejects, s->name, s->format, hit->where.pos, reason, hit->event,
                      hit->event_len, BC_FORMAT_PROTOBUF);
    free(buf);
}

/* A later occurrence of an id (a bc_dedupe_fn): take it back out of the rater. */
int rate_take_back(void *arg, const bc_dedupe_hit *hit)
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
    if (hit->kind == BC_DEDUPE_DUPLICATE) {
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
static void say_dedupe_stats(const rate_ctx *c, bc_dedupe *const *sets, size_t n_sets)
{
    bc_dedupe_stats st;

    bc_dedupe_get_stats_many(sets, n_sets, &st);
    cli_error("dedupe: %" PRIu64 " events remembered (%" PRIu64 " kept whole, %" PRIu64
              " read again) in %zu KiB of memory; %" PRIu64 " runs, %" PRIu64
              " merges, %" PRIu64 " bytes written to temporary files in %s",
              st.records, st.stored, st.fetched, c->opts.dedupe_memory >> 10, st.runs, st.merges,
              st.spilled, rate_temp_dir(&c->opts));
}

int rate_take_back_repeats(rate_ctx *c, bc_dedupe *const *sets, size_t n_sets,
                           bc_dedupe_fetch_fn fetch, bc_dedupe_fn fn, void *arg)
{
    char err[ERR_MAX];
    int rc = bc_dedupe_finish_many(sets, n_sets, fetch, fn, arg, err, sizeof(err));

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

int rate_all(rate_ctx *c)
{
    int i;
    int rc = CLI_EXIT_OK;

    if (rate_parallel_ok(c))
        return rate_parallel(c);
    progress_start(&c->prog, stderr, c->opts.progress, c->opts.files, c->opts.n_files);
    for (i = 0; i < c->opts.n_files; i++) {
        c->src = (uint32_t)i;
        rc = rate_file(c, c->opts.files[i]);
        if (rc != CLI_EXIT_OK)
            break;
    }
    progress_end(&c->prog);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (c->dedupe == NULL)
        return CLI_EXIT_OK;
    return rate_take_back_repeats(c, &c->dedupe, 1, rate_fetch, rate_take_back, c);
}

/* Close the --rejects file and say where the rejected records went. Returns an exit code. */
int rate_close_rejects(rate_ctx *c)
{
    char err[ERR_MAX];
    uint64_t n = rejects_count(c->rejects);

    if (c->rejects == NULL)
        return CLI_EXIT_OK;
    if (rejects_close(c->rejects, err, sizeof(err)) != 0) {
        c->rejects = NULL;
        cli_error("%s", err);
        return CLI_EXIT_INTERNAL;
    }
    c->rejects = NULL;
    cli_error("%" PRIu64 " rejected record%s written to %s", n, n == 1 ? "" : "s",
              c->opts.rejects);
    return CLI_EXIT_OK;
}
