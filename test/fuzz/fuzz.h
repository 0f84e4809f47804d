/*
 * What the libFuzzer harnesses of test/fuzz/ share. A broken invariant is
 * reported as a crash (abort), which is how libFuzzer records an input as a
 * reproducer; the message says which invariant. Harness code only: the
 * library never aborts.
 */
#ifndef GPUPORT_FUZZ_H
#define GPUPORT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* Reads input bytes in order; past the end every read gives zeros. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t left;
} fuzz_in_t;

static inline void fuzz_bytes(fuzz_in_t *in, void *out, size_t n)
{
    size_t k = n < in->left ? n : in->left;

    memcpy(out, in->p, k);
    memset((char *)out + k, 0, n - k);
    in->p += k;
    in->left -= k;
}

static inline uint8_t fuzz_u8(fuzz_in_t *in)
{
    uint8_t v;
    fuzz_bytes(in, &v, 1);
    return v;
}

static inline uint64_t fuzz_u64(fuzz_in_t *in)
{
    uint64_t v;
    fuzz_bytes(in, &v, sizeof(v));
    return v;
}

/* Canary bytes around a region: the harness checks that nothing outside the
 * region was written. */
#define FUZZ_CANARY 0xc5
#define FUZZ_CANARY_BYTES 64

/* memcmp in blocks, not a loop of byte compares: the harness's own code is
 * instrumented for coverage too, and canaries are kilobytes per input. */
static inline int fuzz_canary_ok(const unsigned char *p, size_t n)
{
    static unsigned char ref[4096];

    if (ref[0] != FUZZ_CANARY)
        memset(ref, FUZZ_CANARY, sizeof(ref));
    for (size_t k; n > 0; p += k, n -= k) {
        k = n < sizeof(ref) ? n : sizeof(ref);
        if (memcmp(p, ref, k) != 0)
            return 0;
    }
    return 1;
}

#endif
