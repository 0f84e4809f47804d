/* Host-side element adds; see accumulate.h. */
#include "accumulate.h"

#include <string.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "gpuport/gpuport_trigger.h"

/* The float adds keep subnormals whatever mode the calling thread is in:
 * an application's thread that runs an operation inline, or the proxy and
 * flusher threads, which inherit the mode of the thread that created the
 * communicator. A flush-to-zero mode is turned off for the adds and put
 * back after them (x86: MXCSR's FTZ, bit 15, and DAZ, bit 6; arm64: FPCR's
 * FZ, bit 24). */
#if defined(__SSE__)
#define FP_FLUSH_BITS 0x8040u
typedef unsigned int fp_mode_t;
static fp_mode_t fp_mode_get(void)
{
    return _mm_getcsr();
}
static void fp_mode_set(fp_mode_t m)
{
    _mm_setcsr(m);
}
#elif defined(__aarch64__)
#define FP_FLUSH_BITS (1ull << 24)
typedef unsigned long long fp_mode_t;
static fp_mode_t fp_mode_get(void)
{
    fp_mode_t m;
    __asm__ volatile("mrs %0, fpcr" : "=r"(m));
    return m;
}
static void fp_mode_set(fp_mode_t m)
{
    __asm__ volatile("msr fpcr, %0" ::"r"(m));
}
#else
#define FP_FLUSH_BITS 0u
typedef unsigned int fp_mode_t;
static fp_mode_t fp_mode_get(void)
{
    return 0;
}
static void fp_mode_set(fp_mode_t m)
{
    (void)m;
}
#endif

uint32_t gpuport_acc_op_of(int type)
{
    switch (type) {
    case GPUPORT_INT64:
    case GPUPORT_UINT64:
        return GPUPORT_OP_ACC_INT64;
    case GPUPORT_FLOAT32:
        return GPUPORT_OP_ACC_FLOAT32;
    case GPUPORT_BFLOAT16:
        return GPUPORT_OP_ACC_BFLOAT16;
    }
    return 0;
}

const char *gpuport_dtype_string(int type)
{
    switch (type) {
    case GPUPORT_INT64:
        return "int64";
    case GPUPORT_UINT64:
        return "uint64";
    case GPUPORT_FLOAT32:
        return "float32";
    case GPUPORT_BFLOAT16:
        return "bfloat16";
    }
    return "unknown";
}

float gpuport_bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

uint16_t gpuport_float_to_bf16(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        return (uint16_t)((u >> 16) | 0x40); /* a NaN stays one (quiet) */
    u += 0x7fffu + ((u >> 16) & 1u);       /* to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

void gpuport_add64(void *dst, uint64_t value)
{
    __atomic_fetch_add((uint64_t *)dst, value, __ATOMIC_RELEASE);
}

static void add_f32(uint32_t *p, float x)
{
    uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED), next;

    do {
        float f;
        memcpy(&f, &old, sizeof(f));
        f += x;
        memcpy(&next, &f, sizeof(next));
    } while (!__atomic_compare_exchange_n(p, &old, next, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

static void add_bf16(uint16_t *p, float x)
{
    uint16_t old = __atomic_load_n(p, __ATOMIC_RELAXED), next;

    do
        next = gpuport_float_to_bf16(gpuport_bf16_to_float(old) + x);
    while (!__atomic_compare_exchange_n(p, &old, next, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* The float loops, in a call of their own so that their arithmetic stays
 * between the mode switches around it. */
__attribute__((noinline)) static void acc_floats(void *dst, const void *src, uint64_t size,
                                                 uint32_t op)
{
    const unsigned char *s = src;

    switch (op) {
    case GPUPORT_OP_ACC_FLOAT32:
        for (uint64_t i = 0; i + 4 <= size; i += 4) {
            float v;
            memcpy(&v, s + i, 4);
            add_f32((uint32_t *)((char *)dst + i), v);
        }
        return;
    case GPUPORT_OP_ACC_BFLOAT16:
        for (uint64_t i = 0; i + 2 <= size; i += 2) {
            uint16_t v;
            memcpy(&v, s + i, 2);
            add_bf16((uint16_t *)((char *)dst + i), gpuport_bf16_to_float(v));
        }
        return;
    }
}

void gpuport_acc_apply(void *dst, const void *src, uint64_t size, uint32_t op)
{
    const unsigned char *s = src;
    fp_mode_t mode;

    if (op == GPUPORT_OP_ACC_INT64) {
        for (uint64_t i = 0; i + 8 <= size; i += 8) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            __atomic_fetch_add((uint64_t *)((char *)dst + i), v, __ATOMIC_RELEASE);
        }
        return;
    }
    mode = fp_mode_get();
    if (mode & FP_FLUSH_BITS)
        fp_mode_set(mode & ~(fp_mode_t)FP_FLUSH_BITS);
    acc_floats(dst, src, size, op);
    if (mode & FP_FLUSH_BITS) /* the flags the adds raised stay, as without the mode */
        fp_mode_set(fp_mode_get() | (mode & FP_FLUSH_BITS));
}
