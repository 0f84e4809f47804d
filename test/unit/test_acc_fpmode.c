/*
 * Host float adds keep subnormals whatever floating-point mode the
 * application's threads are in (accumulate.c). Two ranks as threads of one
 * process, each of which first sets flush-to-zero and denormals-are-zero
 * (x86 MXCSR; arm64 FPCR.FZ) before it creates its communicator, so that
 * its proxy and flusher threads start in that mode too. Rank 0 accumulates
 * float32 and bfloat16 vectors into rank 1's destination, then signals:
 *  - subnormal + subnormal, whose exact sum (the bit patterns' sum) a
 *    denormals-are-zero add reads as 0 + 0;
 *  - 1.5 * 2^-126 + -(2^-126), whose exact sum 2^-127 is subnormal and a
 *    flush-to-zero add writes as 0;
 * short vectors, which the calling thread adds itself (GPUPORT_HOST_INLINE=1)
 * or the proxy does (=0), and long ones, which shm's flusher adds; again
 * over tcp, where rank 1's receiver adds. Rank 1 compares every element's
 * bits with the exact sum. Rank 0's mode is unchanged after its calls.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "check.h"
#include "local_bootstrap.h"
#include "testenv.h"

#define REGION 65536
#define SHORT_N 64   /* elements: carried out by the caller or the proxy */
#define LONG_N 4096  /* float32 16 KiB, bfloat16 8 KiB: shm's flusher (4 KiB and up) */
#define OFF_F32_SHORT 0
#define OFF_BF16_SHORT 1024
#define OFF_F32_LONG 4096
#define OFF_BF16_LONG 32768

#if defined(__SSE__)
#define HAVE_FLUSH_MODE 1
typedef unsigned int fp_mode_t;
#define FLUSH_BITS 0x8040u /* MXCSR: FTZ (bit 15), DAZ (bit 6) */
static fp_mode_t mode_get(void)
{
    return _mm_getcsr();
}
static void mode_set(fp_mode_t m)
{
    _mm_setcsr(m);
}
#elif defined(__aarch64__)
#define HAVE_FLUSH_MODE 1
typedef unsigned long long fp_mode_t;
#define FLUSH_BITS (1ull << 24) /* FPCR.FZ */
static fp_mode_t mode_get(void)
{
    fp_mode_t m;
    __asm__ volatile("mrs %0, fpcr" : "=r"(m));
    return m;
}
static void mode_set(fp_mode_t m)
{
    __asm__ volatile("msr fpcr, %0" ::"r"(m));
}
#else
#define HAVE_FLUSH_MODE 0
#endif

#if HAVE_FLUSH_MODE
/* Sets the flushing mode in the calling thread and shows that it flushes:
 * the smallest subnormal added to itself gives 0. */
static fp_mode_t flush_on(void)
{
    volatile float tiny;
    float sum;
    uint32_t bits = 1;

    mode_set(mode_get() | FLUSH_BITS);
    memcpy((void *)&tiny, &bits, 4);
    sum = tiny + tiny;
    memcpy(&bits, &sum, 4);
    CHECK_MSG(bits == 0, "the flushing mode is set but 2^-149 + 2^-149 gave 0x%08x", bits);
    return mode_get();
}

/* Element i of a vector: the destination's value, the source's, and the
 * exact sum, as bit patterns. Even elements: two subnormals (their sum is
 * the patterns' sum, exact, subnormal or the smallest normals). Odd ones:
 * normals whose difference is subnormal. */
static void f32_case(uint32_t i, uint32_t *dst, uint32_t *src, uint32_t *sum)
{
    if (i % 2 == 0) {
        *dst = 1 + i * 977;
        *src = 0x003fffffu - i * 131;
        *sum = *dst + *src;
    } else {
        *dst = 0x00c00000u + i; /* (1.5 + i * 2^-23) * 2^-126 */
        *src = 0x80800000u;     /* -(2^-126) */
        *sum = 0x00400000u + i; /* (0.5 + i * 2^-23) * 2^-126 */
    }
}

static void bf16_case(uint32_t i, uint16_t *dst, uint16_t *src, uint16_t *sum)
{
    if (i % 2 == 0) {
        *dst = (uint16_t)(1 + i % 63);
        *src = (uint16_t)(0x40 - i % 61);
        *sum = (uint16_t)(*dst + *src);
    } else {
        *dst = 0x00c0; /* 1.5 * 2^-126 */
        *src = 0x8080; /* -(2^-126) */
        *sum = 0x0040; /* 2^-127 */
    }
}

static void fill(unsigned char *buf, int which, uint64_t off, uint32_t n, int bf16)
{
    for (uint32_t i = 0; i < n; i++) {
        if (bf16) {
            uint16_t v[3];
            bf16_case(i, &v[0], &v[1], &v[2]);
            memcpy(buf + off + 2 * i, &v[which], 2);
        } else {
            uint32_t v[3];
            f32_case(i, &v[0], &v[1], &v[2]);
            memcpy(buf + off + 4 * i, &v[which], 4);
        }
    }
}

static void check_sums(const unsigned char *dst, uint64_t off, uint32_t n, int bf16,
                       const char *what)
{
    for (uint32_t i = 0; i < n; i++) {
        if (bf16) {
            uint16_t v[3], got;
            bf16_case(i, &v[0], &v[1], &v[2]);
            memcpy(&got, dst + off + 2 * i, 2);
            CHECK_MSG(got == v[2], "%s bfloat16 element %u: 0x%04x + 0x%04x gave 0x%04x, exact "
                      "0x%04x", what, i, v[0], v[1], got, v[2]);
        } else {
            uint32_t v[3], got;
            f32_case(i, &v[0], &v[1], &v[2]);
            memcpy(&got, dst + off + 4 * i, 4);
            CHECK_MSG(got == v[2], "%s float32 element %u: 0x%08x + 0x%08x gave 0x%08x, exact "
                      "0x%08x", what, i, v[0], v[1], got, v[2]);
        }
    }
}

static int inline_on;

static int run(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    const char *tl = arg;
    fp_mode_t mode = flush_on();
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_comm_stats_t st;
    unsigned char *src, *dst;

    (void)size;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&src));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&dst));
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    CHECK(strcmp(gpuport_channel_transport(ch), tl) == 0);
    fill(rank == 0 ? src : dst, rank == 0 ? 1 : 0, OFF_F32_SHORT, SHORT_N, 0);
    fill(rank == 0 ? src : dst, rank == 0 ? 1 : 0, OFF_BF16_SHORT, SHORT_N, 1);
    fill(rank == 0 ? src : dst, rank == 0 ? 1 : 0, OFF_F32_LONG, LONG_N, 0);
    fill(rank == 0 ? src : dst, rank == 0 ? 1 : 0, OFF_BF16_LONG, LONG_N, 1);
    CHECK_OK(bs->barrier(bs->ctx)); /* 1: both filled */
    if (rank == 0) {
        CHECK_OK(gpuport_channel_accumulate(ch, OFF_F32_SHORT, OFF_F32_SHORT, SHORT_N,
                                            GPUPORT_FLOAT32));
        CHECK_OK(gpuport_channel_accumulate(ch, OFF_BF16_SHORT, OFF_BF16_SHORT, SHORT_N,
                                            GPUPORT_BFLOAT16));
        CHECK_OK(gpuport_channel_accumulate(ch, OFF_F32_LONG, OFF_F32_LONG, LONG_N,
                                            GPUPORT_FLOAT32));
        CHECK_OK(gpuport_channel_accumulate(ch, OFF_BF16_LONG, OFF_BF16_LONG, LONG_N,
                                            GPUPORT_BFLOAT16));
        CHECK_OK(gpuport_channel_flush(ch));
        CHECK_OK(gpuport_comm_stats(comm, &st));
        if (strcmp(tl, "shm") == 0) {
            /* the short ones by this thread or by the proxy; the long ones
             * by the flusher */
            CHECK_MSG(st.host_inline == (inline_on ? 2u : 0u), "%llu carried out inline",
                      (unsigned long long)st.host_inline);
            CHECK_MSG(st.flusher_items >= 2, "%llu flusher items",
                      (unsigned long long)st.flusher_items);
        }
        CHECK_OK(gpuport_channel_signal(ch));
        CHECK_OK(gpuport_channel_flush(ch));
        CHECK_MSG((mode_get() & FLUSH_BITS) == FLUSH_BITS,
                  "the thread's mode changed from 0x%llx to 0x%llx", (unsigned long long)mode,
                  (unsigned long long)mode_get());
    } else {
        char what[64];
        snprintf(what, sizeof(what), "%s, GPUPORT_HOST_INLINE=%d:", tl, inline_on);
        CHECK_OK(gpuport_channel_wait(ch));
        check_sums(dst, OFF_F32_SHORT, SHORT_N, 0, what);
        check_sums(dst, OFF_BF16_SHORT, SHORT_N, 1, what);
        check_sums(dst, OFF_F32_LONG, LONG_N, 0, what);
        check_sums(dst, OFF_BF16_LONG, LONG_N, 1, what);
    }
    CHECK_OK(bs->barrier(bs->ctx)); /* 2: checked */
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}
#endif

int main(void)
{
#if HAVE_FLUSH_MODE
    static const char *const tls[] = {"shm", "tcp"};

    testenv_clear_gpuport();
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_SHM_ASYNC_MIN", "4k", 1);
    for (int t = 0; t < 2; t++) {
        setenv("GPUPORT_TRANSPORT", tls[t], 1);
        for (inline_on = 1; inline_on >= 0; inline_on--) {
            setenv("GPUPORT_HOST_INLINE", inline_on ? "1" : "0", 1);
            CHECK(local_run(2, run, (void *)tls[t]) == 0);
            printf("%s, GPUPORT_HOST_INLINE=%d: subnormal sums exact under flush-to-zero and "
                   "denormals-are-zero\n",
                   tls[t], inline_on);
        }
    }
    return 0;
#else
    SKIP("no flush-to-zero mode this test knows how to set on this CPU (x86 SSE, arm64)");
#endif
}
