/*
 * log.c - key=value lines on stderr. See log.h.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define LINE_MAX_LEN 4096

const char *bd_log_quote(const char *s, char *buf, size_t size)
{
    size_t n = 0;
    const char *p;

    if (size < 3)
        return "";
    if (s[0] != '\0' && strpbrk(s, " \"=\\\t\n\r") == NULL) {
        snprintf(buf, size, "%s", s);
        return buf;
    }
    buf[n++] = '"';
    for (p = s; *p != '\0' && n + 3 < size; p++) {
        if (*p == '"' || *p == '\\')
            buf[n++] = '\\';
        /* Control characters would split the line: shown as spaces. */
        buf[n++] = (unsigned char)*p < 0x20 ? ' ' : *p;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

void bd_log(const char *level, const char *event, const char *fmt, ...)
{
    char line[LINE_MAX_LEN];
    struct timespec ts;
    struct tm tm;
    size_t n;
    va_list ap;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ level=%s event=%s",
                          ts.tv_nsec / 1000000L, level, event);
    if (fmt != NULL && n + 1 < sizeof(line)) {
        line[n++] = ' ';
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - n, fmt, ap);
        va_end(ap);
    }
    /* One write per line: lines of concurrent processes do not interleave. */
    fprintf(stderr, "%s\n", line);
}

const char *bd_q(const char *s)
{
    static __thread char bufs[4][1024];
    static __thread unsigned next;

    return bd_log_quote(s != NULL ? s : "", bufs[next++ % 4], sizeof(bufs[0]));
}
