/*
 * status.c - status codes, version, meter and error-message helpers.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "internal.h"

const char *billing_strerror(billing_status status)
{
    switch (status) {
    case BILLING_OK:
        return "success";
    case BILLING_DUPLICATE:
        return "duplicate event (already counted)";
    case BILLING_ERR_NOMEM:
        return "out of memory";
    case BILLING_ERR_INVALID:
        return "invalid argument";
    case BILLING_ERR_PARSE:
        return "malformed input";
    case BILLING_ERR_CONFLICT:
        return "event id already used with different content";
    case BILLING_ERR_UNKNOWN_ACCOUNT:
        return "unknown account";
    case BILLING_ERR_NO_PRICE:
        return "no price for this usage";
    case BILLING_ERR_ZONE:
        return "unknown or unusable time zone";
    case BILLING_ERR_RANGE:
        return "value out of range";
    case BILLING_ERR_EXISTS:
        return "already exists";
    case BILLING_ERR_NOT_FOUND:
        return "not found";
    case BILLING_ERR_STATE:
        return "not allowed in the current state";
    case BILLING_ERR_TOO_LARGE:
        return "input too large";
    case BILLING_ERR_IO:
        return "file could not be read";
    }
    return "unknown status";
}

const char *billing_version(void)
{
    return PACKAGE_VERSION;
}

static const char *const meter_names[BILLING_METER_COUNT] = {"gpu", "gpuless", "storage",
                                                             "traffic"};

const char *billing_meter_name(billing_meter meter)
{
    if ((unsigned)meter >= BILLING_METER_COUNT)
        return NULL;
    return meter_names[meter];
}

billing_status billing_meter_parse(const char *name, billing_meter *out)
{
    unsigned i;

    if (name == NULL || out == NULL)
        return BILLING_ERR_INVALID;
    for (i = 0; i < BILLING_METER_COUNT; i++) {
        if (strcmp(name, meter_names[i]) == 0) {
            *out = (billing_meter)i;
            return BILLING_OK;
        }
    }
    return BILLING_ERR_INVALID;
}

const char *billing_line_kind_name(billing_line_kind kind)
{
    switch (kind) {
    case BILLING_LINE_USAGE:
        return "usage";
    case BILLING_LINE_INCLUDED:
        return "included";
    case BILLING_LINE_FEE:
        return "fee";
    case BILLING_LINE_REFUND:
        return "refund";
    }
    return NULL;
}

billing_status bl_seterr(char *errbuf, size_t errsize, billing_status status, const char *fmt, ...)
{
    va_list ap;

    if (errbuf != NULL && errsize > 0) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errsize, fmt, ap);
        va_end(ap);
    }
    return status;
}

int bl_valid_id(const char *s)
{
    size_t n;

    if (s == NULL)
        return 0;
    for (n = 0; s[n] != '\0'; n++) {
        if (n >= BL_ID_MAX)
            return 0;
        if (s[n] <= ' ' || s[n] > '~')
            return 0;
    }
    return n > 0;
}

/* The 64-bit word whose every byte is @b. */
#define BL_BYTES(b) (UINT64_C(0x0101010101010101) * (b))

/*
 * Non-zero if some byte of @w is below @lo (at most 0x80) or above @hi
 * (at most 0x7f), unsigned; exact for the word as a whole (the classic
 * "hasless" and "hasmore" tests), so eight bytes are checked at once.
 */
static int word_out_of_range(uint64_t w, unsigned lo, unsigned hi)
{
    uint64_t below = (w - BL_BYTES(lo)) & ~w & BL_BYTES(0x80);
    uint64_t above = ((w + BL_BYTES(127 - hi)) | w) & BL_BYTES(0x80);

    return (below | above) != 0;
}

/* Non-zero if all @n bytes at @s are within @lo..@hi. */
static int bytes_in_range(const char *s, size_t n, unsigned lo, unsigned hi)
{
    uint64_t w;

    if (n < 8) {
        if (n == 0)
            return 1;
        /* The bytes, the missing high ones set to @lo, which is in range. */
        w = bl_load_tail(s, n) | (BL_BYTES(lo) & ~((UINT64_C(1) << (8 * n)) - 1));
        return !word_out_of_range(w, lo, hi);
    }
    while (n > 8) {
        memcpy(&w, s, 8);
        if (word_out_of_range(w, lo, hi))
            return 0;
        s += 8;
        n -= 8;
    }
    /* The last 1..8 bytes as the word that ends there: bytes already checked do no harm. */
    memcpy(&w, s + n - 8, 8);
    return !word_out_of_range(w, lo, hi);
}

int bl_valid_id_n(const char *s, size_t n)
{
    return n > 0 && n <= BL_ID_MAX && bytes_in_range(s, n, 0x21, 0x7e);
}

int bl_printable_n(const char *s, size_t n)
{
    return bytes_in_range(s, n, 0x20, 0x7e);
}
