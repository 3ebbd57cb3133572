/*
 * md5.c - MD5 as RFC 1321 defines it (see md5.h for why the store has
 * its own): 64-byte blocks, four rounds of sixteen steps, little-endian
 * words. Checked against PostgreSQL's md5() by itest_store.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "md5.h"

#define ROTL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))

/*
 * RFC 1321's four round functions, in the forms with one operation fewer
 * (F: (x & y) | (~x & z); G: (x & z) | (y & ~z)), and one step. The 64
 * steps are written out (constants floor(abs(sin(i + 1)) * 2^32) and the
 * rotations inline): the loop over tables with a branch per step took
 * about 1.3 times as long, and billingd takes two md5s an event (the id's
 * hash and the content fingerprint; doc/performance.md, h49).
 */
#define F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define H(x, y, z) ((x) ^ (y) ^ (z))
#define I(x, y, z) ((y) ^ ((x) | ~(z)))
#define STEP(f, a, b, c, d, x, t, s)                   \
    do {                                               \
        (a) += f((b), (c), (d)) + (x) + (uint32_t)(t); \
        (a) = ROTL((a), (s));                          \
        (a) += (b);                                    \
    } while (0)

/* Fold one 64-byte block into the state @h. */
static void block(uint32_t h[4], const unsigned char *p)
{
    uint32_t w[16];
    uint32_t a = h[0];
    uint32_t b = h[1];
    uint32_t c = h[2];
    uint32_t d = h[3];
    unsigned i;

    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    STEP(F, a, b, c, d, w[0], 0xd76aa478, 7);
    STEP(F, d, a, b, c, w[1], 0xe8c7b756, 12);
    STEP(F, c, d, a, b, w[2], 0x242070db, 17);
    STEP(F, b, c, d, a, w[3], 0xc1bdceee, 22);
    STEP(F, a, b, c, d, w[4], 0xf57c0faf, 7);
    STEP(F, d, a, b, c, w[5], 0x4787c62a, 12);
    STEP(F, c, d, a, b, w[6], 0xa8304613, 17);
    STEP(F, b, c, d, a, w[7], 0xfd469501, 22);
    STEP(F, a, b, c, d, w[8], 0x698098d8, 7);
    STEP(F, d, a, b, c, w[9], 0x8b44f7af, 12);
    STEP(F, c, d, a, b, w[10], 0xffff5bb1, 17);
    STEP(F, b, c, d, a, w[11], 0x895cd7be, 22);
    STEP(F, a, b, c, d, w[12], 0x6b901122, 7);
    STEP(F, d, a, b, c, w[13], 0xfd987193, 12);
    STEP(F, c, d, a, b, w[14], 0xa679438e, 17);
    STEP(F, b, c, d, a, w[15], 0x49b40821, 22);
    STEP(G, a, b, c, d, w[1], 0xf61e2562, 5);
    STEP(G, d, a, b, c, w[6], 0xc040b340, 9);
    STEP(G, c, d, a, b, w[11], 0x265e5a51, 14);
    STEP(G, b, c, d, a, w[0], 0xe9b6c7aa, 20);
    STEP(G, a, b, c, d, w[5], 0xd62f105d, 5);
    STEP(G, d, a, b, c, w[10], 0x02441453, 9);
    STEP(G, c, d, a, b, w[15], 0xd8a1e681, 14);
    STEP(G, b, c, d, a, w[4], 0xe7d3fbc8, 20);
    STEP(G, a, b, c, d, w[9], 0x21e1cde6, 5);
    STEP(G, d, a, b, c, w[14], 0xc33707d6, 9);
    STEP(G, c, d, a, b, w[3], 0xf4d50d87, 14);
    STEP(G, b, c, d, a, w[8], 0x455a14ed, 20);
    STEP(G, a, b, c, d, w[13], 0xa9e3e905, 5);
    STEP(G, d, a, b, c, w[2], 0xfcefa3f8, 9);
    STEP(G, c, d, a, b, w[7], 0x676f02d9, 14);
    STEP(G, b, c, d, a, w[12], 0x8d2a4c8a, 20);
    STEP(H, a, b, c, d, w[5], 0xfffa3942, 4);
    STEP(H, d, a, b, c, w[8], 0x8771f681, 11);
    STEP(H, c, d, a, b, w[11], 0x6d9d6122, 16);
    STEP(H, b, c, d, a, w[14], 0xfde5380c, 23);
    STEP(H, a, b, c, d, w[1], 0xa4beea44, 4);
    STEP(H, d, a, b, c, w[4], 0x4bdecfa9, 11);
    STEP(H, c, d, a, b, w[7], 0xf6bb4b60, 16);
    STEP(H, b, c, d, a, w[10], 0xbebfbc70, 23);
    STEP(H, a, b, c, d, w[13], 0x289b7ec6, 4);
    STEP(H, d, a, b, c, w[0], 0xeaa127fa, 11);
    STEP(H, c, d, a, b, w[3], 0xd4ef3085, 16);
    STEP(H, b, c, d, a, w[6], 0x04881d05, 23);
    STEP(H, a, b, c, d, w[9], 0xd9d4d039, 4);
    STEP(H, d, a, b, c, w[12], 0xe6db99e5, 11);
    STEP(H, c, d, a, b, w[15], 0x1fa27cf8, 16);
    STEP(H, b, c, d, a, w[2], 0xc4ac5665, 23);
    STEP(I, a, b, c, d, w[0], 0xf4292244, 6);
    STEP(I, d, a, b, c, w[7], 0x432aff97, 10);
    STEP(I, c, d, a, b, w[14], 0xab9423a7, 15);
    STEP(I, b, c, d, a, w[5], 0xfc93a039, 21);
    STEP(I, a, b, c, d, w[12], 0x655b59c3, 6);
    STEP(I, d, a, b, c, w[3], 0x8f0ccc92, 10);
    STEP(I, c, d, a, b, w[10], 0xffeff47d, 15);
    STEP(I, b, c, d, a, w[1], 0x85845dd1, 21);
    STEP(I, a, b, c, d, w[8], 0x6fa87e4f, 6);
    STEP(I, d, a, b, c, w[15], 0xfe2ce6e0, 10);
    STEP(I, c, d, a, b, w[6], 0xa3014314, 15);
    STEP(I, b, c, d, a, w[13], 0x4e0811a1, 21);
    STEP(I, a, b, c, d, w[4], 0xf7537e82, 6);
    STEP(I, d, a, b, c, w[11], 0xbd3af235, 10);
    STEP(I, c, d, a, b, w[2], 0x2ad7d2bb, 15);
    STEP(I, b, c, d, a, w[9], 0xeb86d391, 21);
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
}

void bs_md5(const void *data, size_t len, unsigned char out[BS_MD5_LEN])
{
    uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    const unsigned char *p = data;
    unsigned char tail[128];
    uint64_t bits = (uint64_t)len * 8;
    size_t rest = len % 64;
    size_t tail_len = rest < 56 ? 64 : 128;
    size_t i;

    for (i = 0; i + 64 <= len; i += 64)
        block(h, p + i);
    /* The last bytes, a 1 bit, zeros, and the length in bits (little-endian). */
    memset(tail, 0, sizeof(tail));
    if (rest > 0)
        memcpy(tail, p + len - rest, rest);
    tail[rest] = 0x80;
    for (i = 0; i < 8; i++)
        tail[tail_len - 8 + i] = (unsigned char)(bits >> (8 * i));
    block(h, tail);
    if (tail_len == 128)
        block(h, tail + 64);
    for (i = 0; i < 16; i++)
        out[i] = (unsigned char)(h[i / 4] >> (8 * (i % 4)));
}

void bs_md5_hex(const void *data, size_t len, char out[2 * BS_MD5_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[BS_MD5_LEN];
    size_t i;

    bs_md5(data, len, md);
    for (i = 0; i < BS_MD5_LEN; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[2 * BS_MD5_LEN] = '\0';
}
