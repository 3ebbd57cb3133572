/*
 * util.c - bounded file reading and error formatting.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

int bc_vseterr(char *errbuf, size_t errsize, const char *fmt, va_list ap)
{
    if (errbuf != NULL && errsize > 0)
        vsnprintf(errbuf, errsize, fmt, ap);
    return -1;
}

int bc_seterr(char *errbuf, size_t errsize, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    bc_vseterr(errbuf, errsize, fmt, ap);
    va_end(ap);
    return -1;
}

uint64_t bc_hash_bytes(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ (n * UINT64_C(0xff51afd7ed558ccd));
    uint64_t w;

    while (n >= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * UINT64_C(0xbf58476d1ce4e5b9);
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * UINT64_C(0x94d049bb133111eb);
    h ^= h >> 29;
    h *= UINT64_C(0xbf58476d1ce4e5b9);
    return h ^ (h >> 32);
}

ssize_t bc_read_full(int fd, void *buf, size_t n, int64_t offset)
{
    unsigned char *p = buf;
    size_t got = 0;
    ssize_t k;

    while (got < n) {
        if (offset < 0)
            k = read(fd, p + got, n - got);
        else
            k = pread(fd, p + got, n - got, (off_t)(offset + (int64_t)got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* Read up to @cap bytes; the file may grow after fstat, so never trust its size. */
static ssize_t read_all(int fd, char *buf, size_t cap)
{
    return bc_read_full(fd, buf, cap, -1);
}

int bc_read_file(const char *path, size_t max, char **out, size_t *len, char *errbuf,
                 size_t errsize)
{
    struct stat st;
    char *buf = NULL;
    size_t size;
    ssize_t n;
    int fd;
    int rc = -1;

    /* O_NONBLOCK: a FIFO in place of the file must not hang us before the check. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return bc_seterr(errbuf, errsize, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        bc_seterr(errbuf, errsize, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        bc_seterr(errbuf, errsize, "%s: not a regular file", path);
        goto done;
    }
    if ((uintmax_t)st.st_size > max) {
        bc_seterr(errbuf, errsize, "%s: larger than %zu bytes", path, max);
        goto done;
    }
    /* One byte more than fstat said, to notice a file that grows meanwhile. */
    size = (size_t)st.st_size;
    buf = malloc(size + 2);
    if (buf == NULL) {
        bc_seterr(errbuf, errsize, "%s: out of memory", path);
        goto done;
    }
    n = read_all(fd, buf, size + 1);
    if (n < 0) {
        bc_seterr(errbuf, errsize, "%s: %s", path, strerror(errno));
        goto done;
    }
    if ((size_t)n > size) {
        bc_seterr(errbuf, errsize, "%s: changed while being read", path);
        goto done;
    }
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
    buf = NULL;
    rc = 0;
done:
    free(buf);
    close(fd);
    return rc;
}

int bc_read_logo(const char *book, const char *logo, char *resolved, size_t rsize, char **out,
                 size_t *len, char *errbuf, size_t errsize)
{
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const char *slash = strrchr(book, '/');
    int dir_len = logo[0] != '/' && slash != NULL ? (int)(slash - book) + 1 : 0;
    int n;

    *out = NULL;
    *len = 0;
    n = snprintf(resolved, rsize, "%.*s%s", dir_len, book, logo);
    if (n < 0 || (size_t)n >= rsize)
        return bc_seterr(errbuf, errsize, "%s: path too long", logo);
    if (bc_read_file(resolved, BC_LOGO_MAX, out, len, errbuf, errsize) != 0)
        return -1;
    if (*len < sizeof(png) || memcmp(*out, png, sizeof(png)) != 0) {
        free(*out);
        *out = NULL;
        *len = 0;
        return bc_seterr(errbuf, errsize, "%s: not a PNG file (no PNG signature)", resolved);
    }
    return 0;
}
