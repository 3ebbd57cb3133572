/*
 * rate_read.c - reading and rating the event files of `billing rate` on
 * one thread: every record ends up in exactly one count (rated, duplicate
 * or rejected); repeats are taken back after the last file
 * (rate_repeats.c); rejected records are kept with --rejects.
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

/* ---------------------------------------------------------------------- */
/* Reading and rating                                                      */
/* ---------------------------------------------------------------------- */

/* Hand the event just rated to the dedupe. Returns 0 or -1 with a message. */
static int remember(rate_ctx *c, bc_reader *rd, char *err, size_t errsize)
{
    rate_dedupe_where w;
    size_t len;
    const unsigned char *rec = bc_reader_record(rd, &len);

    w.src = c->src;
    w.pos = bc_reader_position(rd);
    w.offset = bc_reader_offset(rd);
    w.check = rate_dedupe_hash_check(rec, len);
    return rate_dedupe_add(c->dedupe, c->ev, &w, !c->srcs[c->src].reread, err, errsize);
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
    rejects_write(c->rejects, c->srcs[c->src].name, c->srcs[c->src].format, bc_reader_position(rd),
                  reason, rec, len, c->srcs[c->src].format);
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
    c->srcs[c->src].reread = bc_reader_rereadable(rd) && stat(path, &c->srcs[c->src].st) == 0;
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
    progress_file_done(&c->prog, c->srcs[c->src].reread ? (uint64_t)c->srcs[c->src].st.st_size : 0);
    bc_reader_close(rd);
    return rc == -1 ? CLI_EXIT_OK : rc;
}

int rate_sequential(rate_ctx *c)
{
    int i;
    int rc = CLI_EXIT_OK;

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
    cli_error("%" PRIu64 " rejected record%s written to %s", n, n == 1 ? "" : "s", c->opts.rejects);
    return CLI_EXIT_OK;
}
