/*
 * progress.c - the progress of long work: see progress.h. Integer
 * arithmetic only (rates in units per second, ETA in whole seconds).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

/* Events between two looks at the clock in `billing rate`: a clock read costs ~20 ns, an event ~1
 * us. */
#define TICK_EVENTS 4096
/* Least time between two terminal redraws: 250 ms. */
#define REDRAW_NS 250000000LL
/* Default seconds between two plain lines, and the most BILLING_PROGRESS_INTERVAL may say (a day).
 */
#define DEFAULT_INTERVAL_S 5
#define MAX_INTERVAL_S 86400
#define BAR_WIDTH 30
#define NS 1000000000LL

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

int progress_mode(FILE *out, int quiet)
{
    if (quiet || out == NULL)
        return PROGRESS_OFF;
    return isatty(fileno(out)) ? PROGRESS_TERMINAL : PROGRESS_LINES;
}

/* BILLING_PROGRESS_INTERVAL in seconds: digits only, else the default. */
static int64_t interval_s(void)
{
    const char *v = getenv("BILLING_PROGRESS_INTERVAL");
    int64_t n = 0;
    const char *p;

    if (v == NULL || v[0] == '\0')
        return DEFAULT_INTERVAL_S;
    for (p = v; *p >= '0' && *p <= '9' && n <= MAX_INTERVAL_S; p++)
        n = n * 10 + (*p - '0');
    if (*p != '\0' || n > MAX_INTERVAL_S)
        return DEFAULT_INTERVAL_S;
    return n;
}

void progress_meter_start(progress_meter *m, FILE *out, int mode, const char *cmd, const char *unit,
                          uint64_t total)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
    m->mode = out == NULL ? PROGRESS_OFF : mode;
    m->out = m->mode == PROGRESS_OFF ? NULL : out;
    m->cmd = cmd;
    m->unit = unit;
    m->total = total;
    m->start_ns = now_ns();
    m->last_ns = m->start_ns;
    m->interval_ns = m->mode == PROGRESS_TERMINAL ? REDRAW_NS : interval_s() * NS;
}

/* Bytes below this are shown in kB, from it in MB with a decimal. */
#define MB_FROM 10000000ULL

/* @n units as text: "1234 accounts", or bytes as "512 kB" or "12.3 MB" (by the total's size). */
static void amount(const progress_meter *m, uint64_t n, int with_unit, char *buf, size_t size)
{
    int mb = m->total == PROGRESS_UNKNOWN ? n >= MB_FROM : m->total >= MB_FROM;

    if (m->unit == NULL && mb)
        snprintf(buf, size, "%llu.%llu%s", (unsigned long long)(n / 1000000),
                 (unsigned long long)(n % 1000000 / 100000), with_unit ? " MB" : "");
    else if (m->unit == NULL)
        snprintf(buf, size, "%llu%s", (unsigned long long)(n / 1000), with_unit ? " kB" : "");
    else
        snprintf(buf, size, "%llu%s%s", (unsigned long long)n, with_unit ? " " : "",
                 with_unit ? m->unit : "");
}

/* The terminal line: a bar and ETA when the total is known. */
static void draw_terminal(progress_meter *m, uint64_t done, const char *extra, int64_t ms,
                          uint64_t rate, int final)
{
    uint64_t at = done > m->total ? m->total : done;
    uint64_t pct = m->total > 0 ? at * 100 / m->total : 100;
    uint64_t eta = rate > 0 ? (m->total - at) / rate : 0;
    char d[48];
    char tot[48];
    char r[48];
    char bar[BAR_WIDTH + 1];
    int fill;

    amount(m, rate, 1, r, sizeof(r));
    if (m->total == PROGRESS_UNKNOWN) {
        amount(m, done, 1, d, sizeof(d));
        fprintf(m->out, "\r%s%s, %s/s, %lld.%01llds", d, extra ? extra : "", r,
                (long long)(ms / 1000), (long long)(ms % 1000 / 100));
    } else {
        amount(m, done, 0, d, sizeof(d));
        amount(m, m->total, 1, tot, sizeof(tot));
        fill = (int)(pct * BAR_WIDTH / 100);
        memset(bar, '#', (size_t)fill);
        memset(bar + fill, '.', (size_t)(BAR_WIDTH - fill));
        bar[BAR_WIDTH] = '\0';
        fprintf(m->out, "\r[%s] %3llu%% %s/%s  %s/s  ETA %02llu:%02llu%s", bar,
                (unsigned long long)pct, d, tot, r, (unsigned long long)(eta / 60),
                (unsigned long long)(eta % 60), extra ? extra : "");
    }
    fputs(final ? "\033[K\n" : "\033[K", m->out);
    m->shown = !final;
}

/* A plain line: "billing: close: 3/4 accounts (75%), 425 events, 110 accounts/s". */
static void draw_line(progress_meter *m, uint64_t done, const char *extra, uint64_t rate)
{
    uint64_t at = done > m->total ? m->total : done;
    char d[48];
    char tot[48];
    char r[48];

    amount(m, rate, 1, r, sizeof(r));
    if (m->total == PROGRESS_UNKNOWN) {
        amount(m, done, 1, d, sizeof(d));
        fprintf(m->out, "billing: %s: %s%s, %s/s\n", m->cmd, d, extra ? extra : "", r);
        return;
    }
    amount(m, done, 0, d, sizeof(d));
    amount(m, m->total, 1, tot, sizeof(tot));
    fprintf(m->out, "billing: %s: %s/%s (%llu%%)%s, %s/s\n", m->cmd, d, tot,
            (unsigned long long)(m->total > 0 ? at * 100 / m->total : 100), extra ? extra : "", r);
}

static void draw(progress_meter *m, uint64_t done, const char *extra, int64_t t, int final)
{
    int64_t ms = (t - m->start_ns) / 1000000;
    uint64_t rate = ms > 0 ? (done * 1000 + (uint64_t)ms / 2) / (uint64_t)ms : 0;

    if (m->mode == PROGRESS_LINES)
        draw_line(m, done, extra, rate);
    else
        draw_terminal(m, done, extra, ms, rate, final);
    fflush(m->out);
}

void progress_meter_update(progress_meter *m, uint64_t done, const char *extra)
{
    int64_t t;

    if (m->out == NULL)
        return;
    t = now_ns();
    if (t - m->last_ns < m->interval_ns)
        return;
    m->last_ns = t;
    draw(m, done, extra, t, 0);
}

void progress_meter_add(progress_meter *m, uint64_t n)
{
    /* out is set once by progress_meter_start, before any worker runs. */
    if (m->out == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    m->done += n;
    progress_meter_update(m, m->done, NULL);
    pthread_mutex_unlock(&m->lock);
}

void progress_meter_end(progress_meter *m, uint64_t done, const char *extra, int final_line)
{
    if (m->out != NULL && final_line) {
        draw(m, done, extra, now_ns(), 1);
    } else if (m->out != NULL && m->shown) {
        fputs("\r\033[K", m->out);
        fflush(m->out);
    }
    m->shown = 0;
    m->out = NULL;
    pthread_mutex_destroy(&m->lock);
}

/* ---------------------------------------------------------------------- */
/* billing rate                                                            */
/* ---------------------------------------------------------------------- */

uint64_t progress_file_sizes(char *const *files, int n)
{
    struct stat st;
    uint64_t total = 0;
    int i;

    for (i = 0; i < n; i++) {
        if (strcmp(files[i], "-") == 0 || stat(files[i], &st) != 0 || !S_ISREG(st.st_mode))
            return PROGRESS_UNKNOWN;
        total += (uint64_t)st.st_size;
    }
    return total;
}

void progress_start(progress *p, FILE *out, int enabled, char *const *files, int n_files)
{
    int mode = progress_mode(out, !enabled);

    memset(p, 0, sizeof(*p));
    /* rate writes no plain lines: its output is often piped with stderr into a log. */
    if (mode != PROGRESS_TERMINAL)
        mode = PROGRESS_OFF;
    progress_meter_start(&p->m, out, mode, "rate", NULL,
                         mode == PROGRESS_OFF ? 0 : progress_file_sizes(files, n_files));
}

void progress_tick(progress *p, uint64_t events, uint64_t offset)
{
    char extra[64];

    if (p->m.out == NULL || events % TICK_EVENTS != 0)
        return;
    snprintf(extra, sizeof(extra), ", %llu events", (unsigned long long)events);
    progress_meter_update(&p->m, p->done + offset, extra);
}

void progress_file_done(progress *p, uint64_t size)
{
    p->done += size;
}

void progress_end(progress *p)
{
    progress_meter_end(&p->m, p->done, NULL, 0);
}
