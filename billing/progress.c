/*
 * progress.c - a progress line on a terminal: see progress.h. Integer
 * arithmetic only (rates in events per second, percentages in tenths).
 */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

/* Events between two looks at the clock: a clock read costs ~20 ns, an event ~1 us. */
#define TICK_EVENTS 4096
/* Least time between two lines: 250 ms. */
#define REDRAW_NS 250000000LL
#define BAR_WIDTH 30

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void progress_start(progress *p, FILE *out, int enabled, char *const *files, int n_files)
{
    struct stat st;
    int i;

    memset(p, 0, sizeof(*p));
    if (!enabled || out == NULL || !isatty(fileno(out)))
        return;
    p->out = out;
    p->start_ns = now_ns();
    p->last_ns = p->start_ns;
    for (i = 0; i < n_files; i++) {
        if (strcmp(files[i], "-") == 0 || stat(files[i], &st) != 0 || !S_ISREG(st.st_mode)) {
            p->total = 0;
            return;
        }
        p->total += (uint64_t)st.st_size;
    }
}

static void draw(progress *p, uint64_t events, uint64_t offset, int64_t t)
{
    int64_t ms = (t - p->start_ns) / 1000000;
    uint64_t rate = ms > 0 ? events * 1000 / (uint64_t)ms : 0;
    uint64_t at = p->done + offset;
    char bar[BAR_WIDTH + 1];
    int fill;

    fprintf(p->out, "\r%llu events, %llu/s, %lld.%01llds", (unsigned long long)events,
            (unsigned long long)rate, (long long)(ms / 1000), (long long)(ms % 1000 / 100));
    if (p->total > 0) {
        if (at > p->total)
            at = p->total;
        fill = (int)(at * BAR_WIDTH / p->total);
        memset(bar, '#', (size_t)fill);
        memset(bar + fill, '.', (size_t)(BAR_WIDTH - fill));
        bar[BAR_WIDTH] = '\0';
        fprintf(p->out, " [%s] %3llu%%", bar, (unsigned long long)(at * 100 / p->total));
    }
    fputs("\033[K", p->out);
    fflush(p->out);
    p->shown = 1;
}

void progress_tick(progress *p, uint64_t events, uint64_t offset)
{
    int64_t t;

    if (p->out == NULL || events % TICK_EVENTS != 0)
        return;
    t = now_ns();
    if (t - p->last_ns < REDRAW_NS)
        return;
    p->last_ns = t;
    draw(p, events, offset, t);
}

void progress_file_done(progress *p, uint64_t size)
{
    p->done += size;
}

void progress_end(progress *p)
{
    if (p->out != NULL && p->shown) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
    }
    p->shown = 0;
}
