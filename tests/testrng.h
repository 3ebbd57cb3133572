/*
 * testrng.h - a deterministic xorshift64 generator for the randomised
 * tests (same numbers on every platform and run).
 */
#ifndef BILLING_TESTRNG_H
#define BILLING_TESTRNG_H

#include <stdint.h>

static inline uint64_t test_rnd(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

#endif /* BILLING_TESTRNG_H */
