/*
 * progress.h - progress of a long `billing rate` run on a terminal:
 * events read, events per second, elapsed time, and a bar when the input
 * size is known (every input a regular file). Silent when stderr is not a
 * terminal, so that logs and pipes get no control characters.
 */
#ifndef BILLING_PROGRESS_H
#define BILLING_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct progress {
    FILE *out;           /* stderr, or NULL when silent */
    uint64_t total;      /* input bytes, 0 when unknown */
    uint64_t done;       /* bytes of the inputs finished */
    int64_t start_ns;    /* monotonic clock at the start */
    int64_t last_ns;     /* ... at the last line printed */
    int shown;           /* a line is on the terminal */
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

#endif /* BILLING_PROGRESS_H */
