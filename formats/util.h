/*
 * util.h - small helpers shared by the billing tool, billingd and the
 * store code: bounded file reading and error formatting. Names are
 * prefixed bc_ ("billing common").
 */
#ifndef BILLING_FORMATS_UTIL_H
#define BILLING_FORMATS_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define BC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define BC_PRINTF(a, b)
#endif

/*
 * bc_read_file - read the regular file @path, at most @max bytes, into a
 * malloc'd buffer with a NUL appended (not counted in *@len). Returns 0
 * and stores the buffer in *@out (caller frees), or -1 with
 * "PATH: reason" in @errbuf (cannot open, not a regular file, larger
 * than @max, read error, out of memory).
 */
int bc_read_file(const char *path, size_t max, char **out, size_t *len, char *errbuf,
                 size_t errsize);

/*
 * bc_hash_bytes - a fixed (unkeyed, the same in every run) 64-bit hash of
 * @n bytes: orders ids reproducibly and checks that a record read again is
 * the one read first. Not for hash tables that outside input can flood.
 */
uint64_t bc_hash_bytes(const void *data, size_t n);

/*
 * bc_read_full - read @n bytes from @fd into @buf, retrying short reads
 * and EINTR, at @offset (pread) or, when @offset < 0, at the file
 * position. Returns the count (less than @n only at the end of the file),
 * or -1 with errno set.
 */
ssize_t bc_read_full(int fd, void *buf, size_t n, int64_t offset);

/* Largest issuer logo (a PNG file named by a price book): 1 MiB, as migration 0014. */
#define BC_LOGO_MAX (1024u * 1024u)

/*
 * bc_read_logo - read the PNG logo @logo that the price book file @book
 * names: @logo is taken relative to @book's directory unless absolute.
 * Returns 0 with the bytes in a malloc'd *@out (caller frees; *@len bytes)
 * and the path read in @resolved (@rsize bytes), or -1 with a reason in
 * @errbuf that starts with that path (cannot read, not a regular file,
 * larger than BC_LOGO_MAX, not a PNG: no PNG signature).
 */
int bc_read_logo(const char *book, const char *logo, char *resolved, size_t rsize, char **out,
                 size_t *len, char *errbuf, size_t errsize);

/*
 * bc_seterr - format a message into @errbuf (NULL or 0 allowed),
 * truncating safely; returns -1 so that callers can `return bc_seterr(...)`.
 */
int bc_seterr(char *errbuf, size_t errsize, const char *fmt, ...) BC_PRINTF(3, 4);

/* bc_vseterr - bc_seterr with a va_list, for wrappers that return something else. */
int bc_vseterr(char *errbuf, size_t errsize, const char *fmt, va_list ap) BC_PRINTF(3, 0);

#endif /* BILLING_FORMATS_UTIL_H */
