/* Small operations' limits from a private CUDA context; see bench_limits.h. */
#include "bench_limits.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Exact entry points for the cuda.h they are declared in (cuCtxCreate is
 * cuCtxCreate_v4 there, and so on), as test/gpu/gpu_pair.cu loads them. */
#define LIM_CU_FUNCS(X)                                                                         \
    X(cuGetErrorString)                                                                         \
    X(cuDeviceGet)                                                                              \
    X(cuCtxCreate)                                                                              \
    X(cuCtxDestroy)                                                                             \
    X(cuCtxPopCurrent)                                                                          \
    X(cuStreamCreate)                                                                           \
    X(cuStreamDestroy)                                                                          \
    X(cuStreamSynchronize)                                                                      \
    X(cuStreamWriteValue64)                                                                     \
    X(cuStreamBatchMemOp)                                                                       \
    X(cuMemcpyDtoDAsync)                                                                        \
    X(cuMemcpyHtoDAsync)                                                                        \
    X(cuMemcpyDtoH)                                                                             \
    X(cuMemsetD8Async)                                                                          \
    X(cuMemGetAllocationGranularity)                                                            \
    X(cuMemCreate)                                                                              \
    X(cuMemRelease)                                                                             \
    X(cuMemAddressReserve)                                                                      \
    X(cuMemAddressFree)                                                                         \
    X(cuMemMap)                                                                                 \
    X(cuMemUnmap)                                                                               \
    X(cuMemSetAccess)                                                                           \
    X(cuMemHostAlloc)                                                                           \
    X(cuMemFreeHost)                                                                            \
    X(cuMemHostGetDevicePointer)

static struct {
    int loaded;
#define LIM_FIELD(name) decltype(&::name) name;
    LIM_CU_FUNCS(LIM_FIELD)
#undef LIM_FIELD
} drv;

#define DK(call)                                                                                \
    do {                                                                                        \
        CUresult r_ = (drv.call);                                                               \
        if (r_ != CUDA_SUCCESS) {                                                               \
            const char *s_ = NULL;                                                              \
            drv.cuGetErrorString(r_, &s_);                                                      \
            fprintf(stderr, "gpuport_bench: %s failed: %s (%d) (%s:%d)\n", #call,              \
                    s_ ? s_ : "?", (int)r_, __FILE__, __LINE__);                                \
            return -1;                                                                          \
        }                                                                                       \
    } while (0)

static int drv_load(void)
{
    if (drv.loaded)
        return 0;
#define LIM_LOAD(name)                                                                          \
    do {                                                                                        \
        cudaDriverEntryPointQueryResult q_ = cudaDriverEntryPointSymbolNotFound;                \
        cudaError_t e_ = cudaGetDriverEntryPointByVersion(#name, (void **)&drv.name,            \
                                                          CUDA_VERSION, cudaEnableDefault, &q_); \
        if (e_ != cudaSuccess || q_ != cudaDriverEntryPointSuccess || !drv.name) {              \
            fprintf(stderr, "gpuport_bench: the CUDA driver has no %s for CUDA %d (%s, query "  \
                    "result %d)\n", #name, CUDA_VERSION, cudaGetErrorString(e_), (int)q_);      \
            return -1;                                                                          \
        }                                                                                       \
    } while (0);
    LIM_CU_FUNCS(LIM_LOAD)
#undef LIM_LOAD
    drv.loaded = 1;
    return 0;
}

/* Destination layout: copies within [0, SPAN), then the write-value slots,
 * then the hop's 8 bytes and its flag. */
#define SPAN (256u << 10)
#define WV_OFF SPAN
#define WV_SLOTS 16384u
#define HOP_OFF (WV_OFF + WV_SLOTS * 8)
#define DST_BYTES (HOP_OFF + 128)

typedef struct vmm {
    CUmemGenericAllocationHandle h;
    int created, mapped;
    CUdeviceptr va;
    size_t len;
} vmm_t;

typedef struct lim {
    CUcontext ctx;
    CUstream s;
    vmm_t src, dst;
    uint64_t *host;   /* WV_SLOTS slots, pinned, device-mapped */
    CUdeviceptr host_d;
    unsigned char *buf; /* SPAN bytes of host staging for fills and checks */
} lim_t;

static unsigned char lpat(uint64_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double secs_since(uint64_t t0)
{
    return (double)(now_ns() - t0) / 1e9;
}

static int count(double scale, int n)
{
    int v = (int)(n * scale);
    return v < 1 ? 1 : v;
}

/* `want` bytes (rounded up to the granularity) on device `loc`, read and
 * written by the devices of `acc` */
static int vmm_alloc(vmm_t *m, int loc, const int *acc, int nacc, size_t want)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc ad[2];
    size_t gran = 0;

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = loc;
    DK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    m->len = (want + gran - 1) / gran * gran;
    DK(cuMemCreate(&m->h, m->len, &prop, 0));
    m->created = 1;
    DK(cuMemAddressReserve(&m->va, m->len, 0, 0, 0));
    DK(cuMemMap(m->va, m->len, 0, m->h, 0));
    m->mapped = 1;
    memset(ad, 0, sizeof(ad));
    for (int i = 0; i < nacc; i++) {
        ad[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        ad[i].location.id = acc[i];
        ad[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    DK(cuMemSetAccess(m->va, m->len, ad, nacc));
    return 0;
}

static void vmm_free(vmm_t *m)
{
    if (m->mapped)
        drv.cuMemUnmap(m->va, m->len);
    if (m->va)
        drv.cuMemAddressFree(m->va, m->len);
    if (m->created)
        drv.cuMemRelease(m->h);
}

/* The context (current from here to lim_close) and its memory. */
static int lim_open(lim_t *l, int gpu, int dst_gpu)
{
    CUctxCreateParams params;
    CUdevice dev;
    int acc[2] = {gpu, dst_gpu};

    memset(&params, 0, sizeof(params));
    DK(cuDeviceGet(&dev, gpu));
    DK(cuCtxCreate(&l->ctx, &params, 0, dev));
    DK(cuStreamCreate(&l->s, CU_STREAM_NON_BLOCKING));
    if (vmm_alloc(&l->src, gpu, acc, 1, SPAN) ||
        vmm_alloc(&l->dst, dst_gpu, acc, dst_gpu == gpu ? 1 : 2, DST_BYTES))
        return -1;
    DK(cuMemHostAlloc((void **)&l->host, WV_SLOTS * 8,
                      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    DK(cuMemHostGetDevicePointer(&l->host_d, l->host, 0));
    l->buf = (unsigned char *)malloc(SPAN);
    if (!l->buf) {
        fprintf(stderr, "gpuport_bench: malloc(%u) failed\n", SPAN);
        return -1;
    }
    for (uint64_t i = 0; i < SPAN; i++)
        l->buf[i] = lpat(i);
    /* on the stream that reads it (pageable: the copy is staged, then ordered) */
    DK(cuMemcpyHtoDAsync(l->src.va, l->buf, SPAN, l->s));
    DK(cuStreamSynchronize(l->s));
    return 0;
}

static void lim_close(lim_t *l)
{
    CUcontext c;

    if (!l->ctx)
        return;
    if (l->s)
        drv.cuStreamSynchronize(l->s);
    free(l->buf);
    if (l->host)
        drv.cuMemFreeHost(l->host);
    vmm_free(&l->dst);
    vmm_free(&l->src);
    if (l->s)
        drv.cuStreamDestroy(l->s);
    drv.cuCtxPopCurrent(&c);
    drv.cuCtxDestroy(l->ctx);
}

/* what slot s holds after n write-values, value i + 1 into slot i % WV_SLOTS */
static uint64_t wv_expected(uint64_t s, uint64_t n)
{
    return s < n ? s + (n - 1 - s) / WV_SLOTS * WV_SLOTS + 1 : 0;
}

static int wv_issue(lim_t *l, CUdeviceptr base, int n, int batched)
{
    CUstreamBatchMemOpParams ops[BENCH_LIMITS_BATCH];

    memset(ops, 0, sizeof(ops));
    for (int i = 0; i < n; i += batched ? BENCH_LIMITS_BATCH : 1) {
        if (!batched) {
            DK(cuStreamWriteValue64(l->s, base + 8 * (i % WV_SLOTS), (cuuint64_t)i + 1,
                                    CU_STREAM_WRITE_VALUE_DEFAULT));
            continue;
        }
        for (int j = 0; j < BENCH_LIMITS_BATCH; j++) {
            ops[j].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
            ops[j].writeValue.address = base + 8 * ((i + j) % WV_SLOTS);
            ops[j].writeValue.value64 = (cuuint64_t)(i + j) + 1;
            ops[j].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        }
        DK(cuStreamBatchMemOp(l->s, BENCH_LIMITS_BATCH, ops, 0));
    }
    return 0;
}

/* n write-values into the slots (host: the pinned buffer), M values/s;
 * *bad_p set where a slot does not hold its last value */
static int wv_rate(lim_t *l, int host, int n, int batched, double *mps, int *bad_p)
{
    CUdeviceptr base = host ? l->host_d : l->dst.va + WV_OFF;
    const uint64_t *got;
    uint64_t t0;

    if (wv_issue(l, base, BENCH_LIMITS_BATCH, batched)) /* warm */
        return -1;
    if (host) {
        DK(cuStreamSynchronize(l->s));
        memset(l->host, 0, WV_SLOTS * 8);
    } else {
        DK(cuMemsetD8Async(base, 0, WV_SLOTS * 8, l->s));
        DK(cuStreamSynchronize(l->s));
    }
    t0 = now_ns();
    if (wv_issue(l, base, n, batched))
        return -1;
    DK(cuStreamSynchronize(l->s));
    *mps = n / secs_since(t0) / 1e6;
    if (host) {
        got = l->host;
    } else {
        DK(cuMemcpyDtoH(l->buf, base, WV_SLOTS * 8));
        got = (const uint64_t *)l->buf;
    }
    for (uint64_t s = 0; s < WV_SLOTS; s++) {
        if (got[s] != wv_expected(s, (uint64_t)n)) {
            fprintf(stderr, "gpuport_bench: limits: write-value %s%s: slot %llu holds %llu, "
                    "expected %llu\n", batched ? "batched" : "one by one",
                    host ? " (host)" : "", (unsigned long long)s, (unsigned long long)got[s],
                    (unsigned long long)wv_expected(s, (uint64_t)n));
            *bad_p = 1;
            break;
        }
    }
    return 0;
}

/* dst's copy span: the source's pattern in [0, covered), zeros after */
static int span_check(lim_t *l, size_t covered, const char *what, int *bad_p)
{
    DK(cuMemcpyDtoH(l->buf, l->dst.va, SPAN));
    for (size_t i = 0; i < SPAN; i++) {
        unsigned char want = i < covered ? lpat(i) : 0;
        if (l->buf[i] != want) {
            fprintf(stderr, "gpuport_bench: limits: %s: byte %zu is 0x%02x, expected 0x%02x\n",
                    what, i, l->buf[i], want);
            *bad_p = 1;
            break;
        }
    }
    return 0;
}

static int span_clear(lim_t *l)
{
    DK(cuMemsetD8Async(l->dst.va, 0, SPAN, l->s));
    DK(cuStreamSynchronize(l->s));
    return 0;
}

/* n 64-byte copies, each to its own place in the span (cycling) */
static int copy64_rate(lim_t *l, int n, double *mps, int *bad_p)
{
    const uint32_t places = SPAN / 64;
    uint64_t t0;

    for (uint32_t i = 0; i < 16; i++) /* warm */
        DK(cuMemcpyDtoDAsync(l->dst.va + 64 * i, l->src.va + 64 * i, 64, l->s));
    if (span_clear(l))
        return -1;
    t0 = now_ns();
    for (int i = 0; i < n; i++) {
        CUdeviceptr off = 64 * ((uint32_t)i % places);
        DK(cuMemcpyDtoDAsync(l->dst.va + off, l->src.va + off, 64, l->s));
    }
    DK(cuStreamSynchronize(l->s));
    *mps = n / secs_since(t0) / 1e6;
    return span_check(l, (size_t)64 * ((uint32_t)n < places ? (uint32_t)n : places), "64 B copies",
                      bad_p);
}

static int copy_bw(lim_t *l, uint64_t size, int reps, double *gbs)
{
    uint64_t t0;

    DK(cuMemcpyDtoDAsync(l->dst.va, l->src.va, size, l->s)); /* warm */
    DK(cuStreamSynchronize(l->s));
    t0 = now_ns();
    for (int r = 0; r < reps; r++)
        DK(cuMemcpyDtoDAsync(l->dst.va, l->src.va, size, l->s));
    DK(cuStreamSynchronize(l->s));
    *gbs = (double)size * reps / secs_since(t0) / 1e9;
    return 0;
}

/* One hop of a ping-pong done by hand: 8 bytes, then the flag behind them
 * on the same stream, then wait for both. */
static int hop(lim_t *l, int n, double *us, int *bad_p)
{
    CUdeviceptr data = l->dst.va + HOP_OFF, flag = data + 64;
    uint64_t t0, got_flag;

    for (int i = 0; i < 10; i++) { /* warm */
        DK(cuMemcpyDtoDAsync(data, l->src.va, 8, l->s));
        DK(cuStreamWriteValue64(l->s, flag, 0, CU_STREAM_WRITE_VALUE_DEFAULT));
        DK(cuStreamSynchronize(l->s));
    }
    DK(cuMemsetD8Async(data, 0, 72, l->s));
    DK(cuStreamSynchronize(l->s));
    t0 = now_ns();
    for (int i = 1; i <= n; i++) {
        DK(cuMemcpyDtoDAsync(data, l->src.va, 8, l->s));
        DK(cuStreamWriteValue64(l->s, flag, (cuuint64_t)i, CU_STREAM_WRITE_VALUE_DEFAULT));
        DK(cuStreamSynchronize(l->s));
    }
    *us = secs_since(t0) * 1e6 / n;
    DK(cuMemcpyDtoH(l->buf, data, 72));
    memcpy(&got_flag, l->buf + 64, 8);
    for (int i = 0; i < 8; i++)
        if (l->buf[i] != lpat((uint64_t)i))
            *bad_p = 1;
    if (got_flag != (uint64_t)n)
        *bad_p = 1;
    if (*bad_p)
        fprintf(stderr, "gpuport_bench: limits: copy + write-value: wrong bytes or flag %llu "
                "(expected %d)\n", (unsigned long long)got_flag, n);
    return 0;
}

static int measure_all(lim_t *l, bench_limits_t *out)
{
    int bad = 0;

    for (int host = 0; host < 2; host++) {
        if (wv_rate(l, host, out->n_values, 0, &out->wv_one[host], &bad) ||
            wv_rate(l, host, out->n_values, 1, &out->wv_batch[host], &bad))
            return -1;
    }
    if (copy64_rate(l, out->n_copies, &out->copy64, &bad) || span_clear(l))
        return -1;
    for (int i = 0; i < BENCH_LIMITS_NBW; i++)
        if (copy_bw(l, bench_limits_bw_size(i), out->reps_bw, &out->bw[i]))
            return -1;
    /* the largest size covered the span */
    if (span_check(l, SPAN, "copies of 1-256 KiB", &bad) || hop(l, out->n_hops, &out->hop_us, &bad))
        return -1;
    out->verified = !bad;
    return 0;
}

int bench_limits_measure(int gpu, int dst_gpu, double scale, bench_limits_t *out)
{
    lim_t l;
    int rc;

    memset(out, 0, sizeof(*out));
    memset(&l, 0, sizeof(l));
    out->n_values = BENCH_LIMITS_BATCH * count(scale, 64);
    out->n_copies = count(scale, 4000);
    out->reps_bw = count(scale, 200);
    out->n_hops = count(scale, 1000);
    if (drv_load())
        return -1;
    rc = lim_open(&l, gpu, dst_gpu);
    if (!rc)
        rc = measure_all(&l, out);
    lim_close(&l);
    if (rc)
        memset(out, 0, sizeof(*out));
    return rc;
}
