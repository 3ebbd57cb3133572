/*
 * progress.h - the progress of long work in every `billing` command, one
 * implementation:
 *
 *   - on a terminal, one line redrawn in place at most four times a
 *     second: a bar, done/total, the rate and the time left (ETA);
 *   - otherwise (a log, a pipe), a plain line "billing: CMD: ..." every
 *     BILLING_PROGRESS_INTERVAL seconds (default 5; 0: at every update),
 *     so that logs get no control characters and long runs are not silent.
 *
 * A meter (progress_meter) counts work in one unit ("accounts", "invoices",
 * or bytes, shown in kB or MB); `billing rate` keeps its own calls
 * (progress_start ... progress_end, events over input bytes), built on it.
 * Integer arithmetic only. A meter is used by one thread at a time except
 * progress_meter_add, which is thread-safe.
 */
#ifndef BILLING_PROGRESS_H
#define BILLING_PROGRESS_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* A total not known in advance (input from a pipe): no bar, no ETA. */
#define PROGRESS_UNKNOWN UINT64_MAX

/* What a meter prints: nothing, plain lines, or a line redrawn on a terminal. */
enum { PROGRESS_OFF = 0, PROGRESS_LINES = 1, PROGRESS_TERMINAL = 2 };

typedef struct progress_meter {
    FILE *out;            /* where lines go; NULL when off */
    int mode;             /* PROGRESS_* */
    const char *cmd;      /* "close", "ingest", "invoice export" */
    const char *unit;     /* "accounts"; NULL: bytes, shown in kB or MB */
    uint64_t total;       /* units to do, or PROGRESS_UNKNOWN */
    uint64_t done;        /* for progress_meter_add */
    int64_t start_ns;     /* monotonic clock at the start */
    int64_t last_ns;      /* ... at the last line */
    int64_t interval_ns;  /* least time between two lines */
    int shown;            /* a terminal line is on the screen */
    pthread_mutex_t lock; /* progress_meter_add */
} progress_meter;

/*
 * progress_mode - the mode for a command writing progress on @out (stderr):
 * PROGRESS_OFF when @quiet, PROGRESS_TERMINAL on a terminal, else
 * PROGRESS_LINES.
 */
int progress_mode(FILE *out, int quiet);

/*
 * progress_meter_start - start @m on @out in @mode for @total units of
 * @unit (NULL: bytes; @total may be PROGRESS_UNKNOWN) of command @cmd (all strings must outlive
 * @m). The plain-line interval is read from BILLING_PROGRESS_INTERVAL (whole seconds, default 5).
 */
void progress_meter_start(progress_meter *m, FILE *out, int mode, const char *cmd, const char *unit,
                          uint64_t total);

/*
 * progress_meter_update - @done units of the total are done; @extra is
 * appended to the line (", 425 events") or NULL. Prints when the last line
 * is old enough; cheap otherwise (one clock read).
 */
void progress_meter_update(progress_meter *m, uint64_t done, const char *extra);

/*
 * progress_meter_add - @n more units done (thread-safe); then as
 * progress_meter_update. A no-op on a zeroed meter never started.
 */
void progress_meter_add(progress_meter *m, uint64_t n);

/*
 * progress_meter_end - the work is over at @done units. @final_line: print
 * a last line (kept on a terminal, a plain line otherwise); else the
 * terminal line is cleared, so that a summary follows on a clean line.
 */
void progress_meter_end(progress_meter *m, uint64_t done, const char *extra, int final_line);

/* `billing rate`'s progress: events read over the bytes of its inputs, on a terminal only. */
typedef struct progress {
    progress_meter m;
    uint64_t done; /* bytes of the inputs finished */
} progress;

/*
 * progress_start - start @p for @n_files inputs named @files ("-" is
 * stdin): on when @out is a terminal and @enabled (--no-progress clears
 * it); the total size known when every input is a regular file.
 */
void progress_start(progress *p, FILE *out, int enabled, char *const *files, int n_files);

/*
 * progress_tick - @events read so far, @offset bytes into the current
 * input. Cheap: prints at most four times a second, and reads the clock
 * only every few thousand events.
 */
void progress_tick(progress *p, uint64_t events, uint64_t offset);

/* progress_file_done - the current input, of @size bytes, is finished. */
void progress_file_done(progress *p, uint64_t size);

/* progress_end - clear the line, so that what follows starts clean. */
void progress_end(progress *p);

/* progress_file_sizes - the bytes of @n regular files; PROGRESS_UNKNOWN when one is not (stdin, a
 * pipe). */
uint64_t progress_file_sizes(char *const *files, int n);

#endif /* BILLING_PROGRESS_H */
