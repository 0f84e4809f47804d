/* Host-side element adds; see accumulate.h. */
#include "accumulate.h"

#include <string.h>

#include "gpuport/gpuport_trigger.h"

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

void gpuport_acc_apply(void *dst, const void *src, uint64_t size, uint32_t op)
{
    const unsigned char *s = src;

    switch (op) {
    case GPUPORT_OP_ACC_INT64:
        for (uint64_t i = 0; i + 8 <= size; i += 8) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            __atomic_fetch_add((uint64_t *)((char *)dst + i), v, __ATOMIC_RELEASE);
        }
        return;
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
