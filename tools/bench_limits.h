/*
 * The hardware's limits for small operations, for gpuport_bench's
 * small-operations table (tools/bench_small.cu): measured from a private
 * CUDA context, as gpuport's flusher issues its work, on the calling
 * thread's GPU. The context is created, made current on the calling thread
 * for the measurement only, and destroyed; its memory is VMM memory
 * (cuMemCreate), which no context owns: sources on this GPU, destinations
 * on the peer's GPU (granted to this one; peer access needed), or on this
 * GPU where the pair shares it. Driver entry points come from the runtime
 * (cudaGetDriverEntryPointByVersion): the bench does not link libcuda.
 * Every figure is host time from the first issue to cuStreamSynchronize
 * returning, after a warm-up; what the operations wrote is read back and
 * checked (verified).
 */
#ifndef GPUPORT_BENCH_LIMITS_H
#define GPUPORT_BENCH_LIMITS_H

#include <stdint.h>

#define BENCH_LIMITS_BATCH 128 /* write-value ops per cuStreamBatchMemOp */
#define BENCH_LIMITS_NBW 5     /* copy sizes: bench_limits_bw_size(0 .. 4) */

/* 1, 4, 16, 64, 256 KiB */
static inline uint64_t bench_limits_bw_size(int i)
{
    return 1024ull << (2 * i);
}

typedef struct bench_limits {
    int n_values;  /* write-values per rate (a multiple of BENCH_LIMITS_BATCH) */
    int n_copies;  /* 64-byte copies */
    int reps_bw;   /* copies per bandwidth size */
    int n_hops;    /* copy + write-value + sync, one after the other */
    /* M values/s, cuStreamWriteValue64 one by one, and BENCH_LIMITS_BATCH
     * per cuStreamBatchMemOp; [0] into the destination GPU's memory, [1]
     * into pinned host memory (where gpuport's signals land) */
    double wv_one[2], wv_batch[2];
    double copy64;                 /* M 64-byte cuMemcpyDtoDAsync/s, back to back */
    double bw[BENCH_LIMITS_NBW];   /* GB/s (1e9), cuMemcpyDtoDAsync repeated */
    double hop_us;                 /* 8-byte copy + write-value of a flag, issue to sync */
    int verified;                  /* every value and byte read back as written */
} bench_limits_t;

/* Measures everything into *out on GPU `gpu` (runtime ordinal), the
 * destinations on `dst_gpu`; counts scaled by `scale`. The runtime's context
 * is current again on return. 0, or -1 after a message (a driver call
 * failed, or the GPUs lack peer access). */
int bench_limits_measure(int gpu, int dst_gpu, double scale, bench_limits_t *out);

#endif
