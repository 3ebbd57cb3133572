/*
 * httpload.h - what the HTTP load clients of bench/ (api_load, api_get)
 * share: a monotonic clock, sending a whole buffer, reading one answer.
 */
#ifndef BILLING_BENCH_HTTPLOAD_H
#define BILLING_BENCH_HTTPLOAD_H

#include <stddef.h>
#include <stdint.h>

/* hl_now_us - CLOCK_MONOTONIC in microseconds. */
int64_t hl_now_us(void);

/*
 * hl_connect - a TCP connection to @host (dotted IPv4) port @port, with
 * TCP_NODELAY; the socket, or -1 (errno set).
 */
int hl_connect(const char *host, int port);

/* hl_send_all - all @n bytes at @p on socket @fd; 0, or -1 on error. */
int hl_send_all(int fd, const char *p, size_t n);

/*
 * hl_read_answer - one HTTP/1.1 answer (Content-Length framed) from @fd
 * into @buf of @size bytes, the body read and dropped; its status, or -1.
 */
int hl_read_answer(int fd, char *buf, size_t size);

/* hl_cmp64 - qsort's comparison of two int64_t. */
int hl_cmp64(const void *a, const void *b);

#endif /* BILLING_BENCH_HTTPLOAD_H */
