/* httpload.c - see httpload.h. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "httpload.h"

int64_t hl_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int hl_send_all(int fd, const char *p, size_t n)
{
    ssize_t w;

    while (n > 0) {
        w = send(fd, p, n, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int hl_read_answer(int fd, char *buf, size_t size)
{
    size_t got = 0;
    size_t hdr;
    size_t left;
    char *end = NULL;
    const char *cl;
    ssize_t r;
    int status;

    while (end == NULL) {
        if (got + 1 >= size)
            return -1;
        r = recv(fd, buf + got, size - 1 - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        return -1;
    hdr = (size_t)(end + 4 - buf);
    cl = strcasestr(buf, "\r\nContent-Length:");
    left = cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
    left = left > got - hdr ? left - (got - hdr) : 0;
    while (left > 0) {
        r = recv(fd, buf + hdr, left < size - 1 - hdr ? left : size - 1 - hdr, 0);
        if (r <= 0)
            return -1;
        left -= (size_t)r;
    }
    return status;
}

int hl_cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

int hl_connect(const char *host, int port)
{
    struct sockaddr_in sa;
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}
