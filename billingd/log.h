/*
 * log.h - billingd's log: one line per thing worth knowing, key=value,
 * to stderr (journald and container runtimes collect it from there):
 *
 *   ts=2026-01-05T09:00:00.123Z level=info event=assigned topic=usage partition=3 offset=42
 *
 * Values with spaces, quotes or '=' are double-quoted with \" and \\
 * escaped (bd_log_quote). Not thread-safe (billingd logs from one thread).
 */
#ifndef BILLINGD_LOG_H
#define BILLINGD_LOG_H

#include <stddef.h>

/*
 * bd_log - write "ts=... level=@level event=@event" and the key=value
 * pairs formatted from @fmt (may be NULL) as one line.
 */
void bd_log(const char *level, const char *event, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/*
 * bd_log_quote - @s as a log value into @buf (@size bytes): as is when it
 * has no space, quote, '=' or control character, else double-quoted and
 * escaped, truncated to fit. Returns @buf.
 */
const char *bd_log_quote(const char *s, char *buf, size_t size);

/*
 * bd_q - bd_log_quote into one of four rotating buffers of this thread,
 * for up to four values in one bd_log call: bd_log(..., "error=%s", bd_q(msg)).
 */
const char *bd_q(const char *s);

#endif
