/*
 * Host-side adds of get/atomic_add/accumulate (gpuport.h's atomicity rule):
 * each element one atomic read-modify-write, so that adds from the proxy,
 * the flusher, a tcp receiver and the peer's kernels (red.add through a
 * mapping of the same memory) never lose one another's. Floats round to
 * nearest even in their own type, as the GPU's red.add does, and keep
 * subnormals whatever floating-point mode (flush to zero, denormals are
 * zero) the calling thread is in.
 */
#ifndef GPUPORT_ACCUMULATE_H
#define GPUPORT_ACCUMULATE_H

#include <stdint.h>

#include "gpuport/gpuport.h"

/* Adds size bytes of op's elements (GPUPORT_OP_ACC_*) at src into dst, each
 * element atomically; dst must be aligned to the element size (the callers
 * check). src may be unaligned. */
void gpuport_acc_apply(void *dst, const void *src, uint64_t size, uint32_t op);
/* Atomically adds value to the 8-aligned uint64 at dst (release). */
void gpuport_add64(void *dst, uint64_t value);
/* The GPUPORT_OP_ACC_* op of an element type, or 0 for an unknown type. */
uint32_t gpuport_acc_op_of(int type);
/* bfloat16 <-> float32, rounding to nearest even (NaN kept a NaN). */
float gpuport_bf16_to_float(uint16_t b);
uint16_t gpuport_float_to_bf16(float f);

#endif
