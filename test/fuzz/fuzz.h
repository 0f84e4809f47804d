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

#include "gpuport/gpuport_trigger.h"

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

/* ---- the models' accumulate: gpuport.h's rules for adds, written apart
 * from src/accumulate.c so that the harnesses check it ---- */

/* One float32 add, rounded to nearest even. A NaN operand gives x86's
 * answer for dst + src (accumulate.c's order): dst's NaN made quiet, else
 * src's; only those bits are not the hardware's own add. */
static inline uint32_t fuzz_f32_add(uint32_t dst, uint32_t src)
{
    float a, b, r;
    uint32_t out;

    if ((dst & 0x7fffffffu) > 0x7f800000u)
        return dst | 0x00400000u;
    if ((src & 0x7fffffffu) > 0x7f800000u)
        return src | 0x00400000u;
    memcpy(&a, &dst, 4);
    memcpy(&b, &src, 4);
    r = a + b;
    memcpy(&out, &r, 4);
    return out;
}

/* bfloat16: both widened to float32 (exact), added there, and rounded back
 * to nearest even; a NaN stays a quiet NaN. */
static inline uint16_t fuzz_bf16_add(uint16_t dst, uint16_t src)
{
    uint32_t sum = fuzz_f32_add((uint32_t)dst << 16, (uint32_t)src << 16);
    uint32_t high = sum >> 16, low = sum & 0xffffu;

    if ((sum & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(high | 0x40u);
    if (low > 0x8000u || (low == 0x8000u && (high & 1u)))
        high++; /* the largest finite value rounds up to infinity, as it should */
    return (uint16_t)high;
}

/* dst[i] += src[i] over size bytes of op's elements (GPUPORT_OP_ACC_INT64:
 * wrapping int64, _FLOAT32, _BFLOAT16); a trailing part element is left. */
static inline void fuzz_acc_model(unsigned char *dst, const unsigned char *src, uint64_t size,
                                  uint32_t op)
{
    uint32_t elem = op == GPUPORT_OP_ACC_INT64     ? 8
                    : op == GPUPORT_OP_ACC_FLOAT32 ? 4
                    : op == GPUPORT_OP_ACC_BFLOAT16 ? 2
                                                    : 0;

    for (uint64_t i = 0; elem && i + elem <= size; i += elem) {
        if (elem == 8) {
            uint64_t a, b;
            memcpy(&a, dst + i, 8);
            memcpy(&b, src + i, 8);
            a += b;
            memcpy(dst + i, &a, 8);
        } else if (elem == 4) {
            uint32_t a, b;
            memcpy(&a, dst + i, 4);
            memcpy(&b, src + i, 4);
            a = fuzz_f32_add(a, b);
            memcpy(dst + i, &a, 4);
        } else {
            uint16_t a, b;
            memcpy(&a, dst + i, 2);
            memcpy(&b, src + i, 2);
            a = fuzz_bf16_add(a, b);
            memcpy(dst + i, &a, 2);
        }
    }
}

#endif
