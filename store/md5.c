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

/* Per-step left rotations, four per round. */
static const unsigned char shifts[64] = {
    7,  12, 17, 22, 7,  12, 17, 22, 7,  12, 17, 22, 7,  12, 17, 22, 5,  9,  14, 20, 5,  9,
    14, 20, 5,  9,  14, 20, 5,  9,  14, 20, 4,  11, 16, 23, 4,  11, 16, 23, 4,  11, 16, 23,
    4,  11, 16, 23, 6,  10, 15, 21, 6,  10, 15, 21, 6,  10, 15, 21, 6,  10, 15, 21};

/* floor(abs(sin(i + 1)) * 2^32), as tabulated in RFC 1321. */
static const uint32_t sines[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};

/* Fold one 64-byte block into the state @h. */
static void block(uint32_t h[4], const unsigned char *p)
{
    uint32_t w[16];
    uint32_t a = h[0];
    uint32_t b = h[1];
    uint32_t c = h[2];
    uint32_t d = h[3];
    uint32_t f;
    uint32_t t;
    unsigned g;
    unsigned i;

    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    for (i = 0; i < 64; i++) {
        if (i < 16) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
        } else if (i < 48) {
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
        }
        t = d;
        d = c;
        c = b;
        b = b + ROTL(a + f + sines[i] + w[g], shifts[i]);
        a = t;
    }
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
