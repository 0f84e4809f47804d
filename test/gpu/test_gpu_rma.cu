/*
 * get, atomic_add and accumulate from kernels, two processes (fork +
 * socketpair bootstrap, gpu_pair.h). `test_gpu_rma [port|memory|all]`
 * (default all) picks the cases:
 *  port: over the run's transport (cuda_ipc, or GPUPORT_TRANSPORT=tcp), on
 *    regions of GPUPORT_TEST_MEM's kind:
 *  - get: 1 B .. 64 MiB at odd offsets, both directions at once, each by a
 *    kernel's gpuport_get and gpuport_flush; every byte of this side's
 *    source compared on the host (the copy in place, zeros around it). A
 *    transport whose handle says it does not carry gets into GPU memory
 *    (tcp's, for now; never cuda_ipc) must refuse them on the device and
 *    the host alike;
 *  - get-then-put (tcp): a second channel whose source is host memory (tcp
 *    gets land in host memory) into the same GPU destination; 48 rounds,
 *    both ranks at once, of one kernel's put of pattern A, get of it, put of
 *    pattern B over the get's last 4 KiB and then over all of it, flush:
 *    the get returns A every time (its answer is read from the peer's GPU
 *    memory before the later puts' copies land there, also when it is larger
 *    than tx staging: 12 MiB), and the peer's memory ends with B;
 *  - refusals: the handle says GET alone is carried; gpuport_atomic_add and
 *    gpuport_accumulate of every type return GPUPORT_ERR_NOT_SUPPORTED on
 *    the device, as the host calls do (cuda_ipc's reason names memory
 *    channels); bad offsets, counts, types and a misaligned peer region
 *    return their own statuses first; nothing is pushed (the proxy rejects
 *    nothing, the channel stays healthy) and the peer's memory is
 *    untouched.
 *  memory (cuda_ipc only; VMM regions from gpuport_mem_alloc_device): both
 *    ranks' kernels add into the same memory, each into the peer's
 *    destination through the channel and into its own through a copy of
 *    the handle aimed at it (the same device code on local memory):
 *  - get: 1 B .. 1 MiB at odd offsets by a thread and by a grid, both ways,
 *    every byte compared;
 *  - atomic_add: 16384 threads of each rank add values of both signs into
 *    one counter per rank: the exact total;
 *  - accumulate: 8 rounds of 4096 elements from each rank into each rank's
 *    vectors, int64 (rank 1 as uint64) exact, float32 and bfloat16 within
 *    (k - 1) u sum|x| of the exact sum (k = 17 terms, u = 2^-24, 2^-8);
 *  - ordering: 200 rounds each way of accumulate, barrier, signal; the
 *    waiter's kernel finds the round's sum after its wait, then signals
 *    back;
 *  - bad arguments: every refusal returns its status, the peer's memory and
 *    this side's source untouched.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"
extern "C" {
#include "capture.h"
}

#define MIB (1ull << 20)
#define PREGION (64 * MIB + 8192) /* port get: 64 MiB at offsets below 8 KiB */
#define MREGION (4 * MIB)

/* the memory channel's destinations: a counter, then the vectors */
#define N 4096          /* elements per vector */
#define R 8             /* rounds of adds from each rank */
#define COUNTER_OFF 0
#define INT_OFF 4096
#define F32_OFF (INT_OFF + N * 8)
#define BF_OFF (F32_OFF + N * 4)
#define ORD_OFF (256 * 1024)
#define NORD 1024
/* ... and their sources: R vectors of each type */
#define SINT_OFF 0
#define SF32_OFF (SINT_OFF + R * N * 8)
#define SBF_OFF (SF32_OFF + R * N * 4)
#define SORD_OFF (SBF_OFF + R * N * 2)

static const char *transport(void)
{
    const char *t = getenv("GPUPORT_TRANSPORT");
    return t && strcmp(t, "auto") != 0 ? t : "cuda_ipc";
}

__host__ __device__ static unsigned char pat(int rank, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(rank + 1) * 0xbf58476d1ce4e5b9ull;
    return (unsigned char)(x >> 56);
}

__global__ void k_fill(unsigned char *p, uint64_t n, int rank)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pat(rank, i);
}

static void barrier(gpuport_bootstrap_t *bs)
{
    CHECK_OK(bs->barrier(bs->ctx));
}

/* bytes of this side's copy of a region: [off, off + n) as `from`'s
 * pattern from `from_off` on, `rest` (-1: the owner's pattern, else that
 * byte) elsewhere */
static void verify(const unsigned char *dev, uint64_t len, uint64_t off, uint64_t n, int from,
                   uint64_t from_off, int rest, int owner, const char *what)
{
    unsigned char *h = (unsigned char *)malloc(len);

    CHECK(h);
    CUDA_CHECK(cudaMemcpy(h, dev, len, cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < len; i++) {
        unsigned char want = i >= off && i - off < n ? pat(from, from_off + (i - off))
                             : rest < 0               ? pat(owner, i)
                                                      : (unsigned char)rest;
        CHECK_MSG(h[i] == want, "%s: byte %llu is 0x%02x, expected 0x%02x", what,
                  (unsigned long long)i, h[i], want);
    }
    free(h);
}

/* ---- port channels ---- */

typedef struct port_side {
    gpuport_bootstrap_t *bs;
    int rank;
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
    int *rc;
} port_side_t;

__global__ void k_port_get(gpuport_port_channel_dev_t ch, uint64_t dst_off, uint64_t src_off,
                           uint64_t size, int *rc)
{
    rc[0] = gpuport_get(&ch, dst_off, src_off, size);
    rc[1] = rc[0] ? rc[0] : gpuport_flush(&ch);
}

/* A transport that does not carry gets into GPU memory (its rma_ok says
 * so: tcp's, for now) must refuse them alike on the device and the host. */
static void port_get_refused(port_side_t *s)
{
    gpuport_status_t st;
    int h[2];

    CHECK_MSG(strcmp(transport(), "cuda_ipc") != 0, "cuda_ipc does not carry gets (rma_ops 0x%x)",
              s->dev.rma_ops);
    k_port_get<<<1, 1>>>(s->dev, 0, 0, 4096, s->rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, s->rc, sizeof(h), cudaMemcpyDeviceToHost));
    CHECK_MSG(h[0] == GPUPORT_ERR_NOT_SUPPORTED, "device get: %d", h[0]);
    capture_begin();
    st = gpuport_channel_get(s->ch, 0, 0, 4096);
    capture_end();
    CHECK_STATUS(st, GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_OK(gpuport_channel_status(s->ch));
    barrier(s->bs);
    printf("NOTE port get (rank %d, %s): the transport does not carry gets into GPU memory; "
           "refused on the device and the host alike, nothing pushed\n",
           s->rank, transport());
}

static void port_get_case(port_side_t *s)
{
    static const uint64_t sizes[] = {1, 3, 4097, MIB + 13, 64 * MIB};
    char what[160];
    int h[2];

    if (!(s->dev.rma_ops & 1u << GPUPORT_OP_GET)) {
        port_get_refused(s);
        return;
    }
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint64_t size = sizes[k], dst_off = 1 + 2 * (k * 1237 % 4000),
                 src_off = 3 + 2 * (k * 611 % 4000);
        CUDA_CHECK(cudaMemset(s->src, 0, PREGION));
        CUDA_CHECK(cudaDeviceSynchronize());
        barrier(s->bs);
        k_port_get<<<1, 1>>>(s->dev, dst_off, src_off, size, s->rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h, s->rc, sizeof(h), cudaMemcpyDeviceToHost));
        snprintf(what, sizeof(what), "get of %llu B from rank %d's offset %llu to %llu over %s",
                 (unsigned long long)size, 1 - s->rank, (unsigned long long)dst_off,
                 (unsigned long long)src_off, transport());
        CHECK_MSG(h[0] == 0 && h[1] == 0, "%s: get %d, flush %d", what, h[0], h[1]);
        verify(s->src, PREGION, src_off, size, 1 - s->rank, dst_off, 0, s->rank, what);
        barrier(s->bs);
    }
    CHECK_OK(gpuport_channel_status(s->ch));
    printf("PASS port get (rank %d, %s): 1 B .. 64 MiB at odd offsets, both ways, every byte\n",
           s->rank, transport());
}

/* ---- get-then-put over tcp: a get reads what was there in the channel's order ---- */

#define GTP_ROUNDS 48
#define GTP_MAX (12 * MIB + 4097) /* larger than tx staging's 8 MiB */
#define GTP_TAIL 4096

__host__ __device__ static unsigned char gtp_pat(int rank, int round, int b, uint64_t i)
{
    return pat(rank * 2 + b, i * 7 + (uint64_t)round * 131);
}

/* put A (this side's source at 0) at dst_off, get it back into the source
 * at 2 * size, put B (the source at size) over the get's last bytes and then
 * over all of it, flush */
__global__ void k_get_then_put(gpuport_port_channel_dev_t ch, uint64_t dst_off, uint64_t size,
                               int *rc)
{
    uint64_t tail = size < GTP_TAIL ? size : GTP_TAIL;

    rc[0] = gpuport_put(&ch, dst_off, 0, size);
    rc[1] = rc[0] ? rc[0] : gpuport_get(&ch, dst_off, 2 * size, size);
    rc[2] = rc[1] ? rc[1] : gpuport_put(&ch, dst_off + size - tail, 2 * size - tail, tail);
    rc[3] = rc[2] ? rc[2] : gpuport_put(&ch, dst_off, size, size);
    rc[4] = rc[3] ? rc[3] : gpuport_flush(&ch);
}

static void port_get_then_put_case(port_side_t *s)
{
    static const uint64_t sizes[] = {GTP_MAX, 4096, MIB + 13, 64 * 1024 + 1, 9 * MIB, 333};
    const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
    size_t hlen = 3 * GTP_MAX;
    unsigned char *h = (unsigned char *)malloc(hlen), *back = (unsigned char *)malloc(GTP_MAX);
    gpuport_port_channel_dev_t dev;
    gpuport_channel_t ch;
    gpuport_mem_t mh;
    char what[160];
    int rc[5];

    if (strcmp(transport(), "tcp") != 0) {
        printf("NOTE port get-then-put (rank %d): tcp's case (a get into host memory), not "
               "run over %s\n",
               s->rank, transport());
        free(h);
        free(back);
        return;
    }
    CHECK(h && back);
    CHECK_OK(gpuport_mem_register(s->comm, h, hlen, &mh));
    CHECK_OK(gpuport_channel_create(s->comm, 1 - s->rank, mh, s->mdst, &ch));
    CHECK(strcmp(gpuport_channel_transport(ch), "tcp") == 0);
    CHECK_OK(gpuport_channel_device(ch, &dev));
    CHECK_MSG(dev.rma_ops & 1u << GPUPORT_OP_GET, "tcp refuses gets into host memory (rma_ops "
              "0x%x)", dev.rma_ops);
    for (int r = 0; r < GTP_ROUNDS; r++) {
        uint64_t size = sizes[r % nsizes], dst_off = 1 + 2 * ((uint64_t)r * 2053 % 4000);
        int peer = 1 - s->rank;
        for (uint64_t i = 0; i < size; i++) {
            h[i] = gtp_pat(s->rank, r, 0, i);
            h[size + i] = gtp_pat(s->rank, r, 1, i);
            h[2 * size + i] = 0;
        }
        barrier(s->bs);
        k_get_then_put<<<1, 1>>>(dev, dst_off, size, s->rc);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(rc, s->rc, sizeof(rc), cudaMemcpyDeviceToHost));
        snprintf(what, sizeof(what), "round %d: put A, get, put B of %llu B at rank %d's offset "
                 "%llu over tcp",
                 r, (unsigned long long)size, peer, (unsigned long long)dst_off);
        CHECK_MSG(rc[0] == 0 && rc[1] == 0 && rc[2] == 0 && rc[3] == 0 && rc[4] == 0,
                  "%s: put %d, get %d, put %d, put %d, flush %d", what, rc[0], rc[1], rc[2],
                  rc[3], rc[4]);
        for (uint64_t i = 0; i < size; i++)
            CHECK_MSG(h[2 * size + i] == gtp_pat(s->rank, r, 0, i),
                      "%s: byte %llu of the get is 0x%02x, A's 0x%02x (B's 0x%02x): the get "
                      "saw a later put",
                      what, (unsigned long long)i, h[2 * size + i], gtp_pat(s->rank, r, 0, i),
                      gtp_pat(s->rank, r, 1, i));
        barrier(s->bs); /* the peer's flush is done: its B is in this side's memory */
        CUDA_CHECK(cudaMemcpy(back, s->dst + dst_off, size, cudaMemcpyDeviceToHost));
        for (uint64_t i = 0; i < size; i++)
            CHECK_MSG(back[i] == gtp_pat(peer, r, 1, i),
                      "round %d: byte %llu at offset %llu of this rank's destination is 0x%02x, "
                      "rank %d's B 0x%02x",
                      r, (unsigned long long)i, (unsigned long long)dst_off, back[i], peer,
                      gtp_pat(peer, r, 1, i));
    }
    CHECK_OK(gpuport_channel_status(ch));
    barrier(s->bs);
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(mh));
    free(h);
    free(back);
    printf("PASS port get-then-put (rank %d, tcp): %d rounds of put A, get, put B (4 KiB .. "
           "12 MiB, both ways at once), every get A, the peer's memory B\n",
           s->rank, GTP_ROUNDS);
}

#define NREFUSED 18

__global__ void k_port_refused(gpuport_port_channel_dev_t ch, uint64_t region, int *rc)
{
    gpuport_port_channel_dev_t skewed = ch;
    int i = 0;

    /* what the transport does not carry */
    rc[i++] = gpuport_atomic_add(&ch, 64, 5);
    rc[i++] = gpuport_accumulate(&ch, 64, 0, 16, GPUPORT_INT64);
    rc[i++] = gpuport_accumulate(&ch, 64, 0, 16, GPUPORT_UINT64);
    rc[i++] = gpuport_accumulate(&ch, 64, 0, 16, GPUPORT_FLOAT32);
    rc[i++] = gpuport_accumulate(&ch, 64, 0, 16, GPUPORT_BFLOAT16);
    /* bad arguments: their own statuses, before the transport's */
    rc[i++] = gpuport_get(&ch, region - 8, 0, 16);
    rc[i++] = gpuport_get(&ch, 0, region, 1);
    rc[i++] = gpuport_atomic_add(&ch, 4, 1);
    rc[i++] = gpuport_atomic_add(&ch, region, 1);
    rc[i++] = gpuport_accumulate(&ch, 0, 0, 0, GPUPORT_FLOAT32);
    rc[i++] = gpuport_accumulate(&ch, 0, 0, 4, (gpuport_dtype_t)99);
    rc[i++] = gpuport_accumulate(&ch, 2, 0, 4, GPUPORT_FLOAT32);
    rc[i++] = gpuport_accumulate(&ch, 0, 6, 4, GPUPORT_FLOAT32);
    rc[i++] = gpuport_accumulate(&ch, region - 8, 0, 4, GPUPORT_FLOAT32);
    rc[i++] = gpuport_accumulate(&ch, 0, 0, UINT64_MAX / 2, GPUPORT_INT64);
    /* a peer region that starts 4 bytes past an 8-byte boundary */
    skewed.dst_addr_mod8 = 4;
    rc[i++] = gpuport_atomic_add(&skewed, 0, 1);
    rc[i++] = gpuport_accumulate(&skewed, 0, 0, 2, GPUPORT_INT64);
    /* nothing was pushed: the channel is healthy */
    rc[i++] = gpuport_flush(&ch);
}

static void port_refusal_case(port_side_t *s)
{
    static const int want[NREFUSED] = {
        GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_NOT_SUPPORTED,
        GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_OUT_OF_RANGE,
        GPUPORT_ERR_OUT_OF_RANGE,  GPUPORT_ERR_INVALID_ARG,   GPUPORT_ERR_OUT_OF_RANGE,
        GPUPORT_ERR_INVALID_ARG,   GPUPORT_ERR_INVALID_ARG,   GPUPORT_ERR_INVALID_ARG,
        GPUPORT_ERR_INVALID_ARG,   GPUPORT_ERR_OUT_OF_RANGE,  GPUPORT_ERR_OUT_OF_RANGE,
        GPUPORT_ERR_INVALID_ARG,   GPUPORT_ERR_INVALID_ARG,   GPUPORT_OK};
    gpuport_comm_stats_t stats;
    gpuport_status_t st;
    const char *log;
    int h[NREFUSED];

    /* GPU memory at both ends: no adds (memory channels do them); cuda_ipc
     * gets */
    CHECK_MSG((s->dev.rma_ops & ~(1u << GPUPORT_OP_GET)) == 0 &&
                  (strcmp(transport(), "cuda_ipc") != 0 || s->dev.rma_ops == 1u << GPUPORT_OP_GET),
              "%s handle: rma_ops 0x%x", transport(), s->dev.rma_ops);
    CHECK(s->dev.dst_addr_mod8 == 0);
    barrier(s->bs);
    k_port_refused<<<1, 1>>>(s->dev, PREGION, s->rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, s->rc, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < NREFUSED; i++)
        CHECK_MSG(h[i] == want[i], "device call %d returned %d (%s), expected %d (%s)", i, h[i],
                  gpuport_status_string((gpuport_status_t)h[i]), want[i],
                  gpuport_status_string((gpuport_status_t)want[i]));
    /* the host calls agree, and say why */
    capture_begin();
    st = gpuport_channel_atomic_add(s->ch, 64, 5);
    log = capture_end();
    CHECK_STATUS(st, GPUPORT_ERR_NOT_SUPPORTED);
    if (strcmp(transport(), "cuda_ipc") == 0)
        CHECK_MSG(strstr(log, "gpuport_memory_atomic_add"), "cuda_ipc's refusal: %s", log);
    capture_begin();
    st = gpuport_channel_accumulate(s->ch, 64, 0, 16, GPUPORT_BFLOAT16);
    capture_end();
    CHECK_STATUS(st, GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_OK(gpuport_channel_flush(s->ch));
    CHECK_OK(gpuport_channel_status(s->ch));
    CHECK_OK(gpuport_comm_stats(s->comm, &stats));
    CHECK_MSG(stats.rejected == 0, "the proxy rejected %llu triggers",
              (unsigned long long)stats.rejected);
    barrier(s->bs); /* the peer's calls are done too */
    verify(s->dst, PREGION, 0, 0, 0, 0, -1, s->rank, "this rank's destination after refused adds");
    barrier(s->bs);
    printf("PASS port refusals (rank %d, %s): adds NOT_SUPPORTED on the device and the host, bad "
           "arguments their own status, nothing pushed, the peer's memory untouched\n",
           s->rank, transport());
}

/* The regions stay until the communicator is gone (gpu_region_free). */
static void port_cases(port_side_t *s, gpuport_bootstrap_t *bs, gpuport_comm_t comm, int rank)
{
    memset(s, 0, sizeof(*s));
    s->bs = bs;
    s->rank = rank;
    s->comm = comm;
    gpu_region_alloc(comm, PREGION, (void **)&s->src);
    gpu_region_alloc(comm, PREGION, (void **)&s->dst);
    CUDA_CHECK(cudaMalloc(&s->rc, 64 * sizeof(int)));
    k_fill<<<1024, 256>>>(s->dst, PREGION, rank); /* what the peer gets */
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(gpuport_mem_register(comm, s->src, PREGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(comm, s->dst, PREGION, &s->mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, s->msrc, s->mdst, &s->ch));
    CHECK(strcmp(gpuport_channel_transport(s->ch), transport()) == 0);
    CHECK_OK(gpuport_channel_device(s->ch, &s->dev));
    port_get_case(s);
    port_refusal_case(s);
    port_get_then_put_case(s);
    CHECK_OK(gpuport_channel_destroy(s->ch));
}

/* ---- memory channels ---- */

typedef struct mem_side {
    gpuport_bootstrap_t *bs;
    int rank;
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_memory_channel_t mc;
    gpuport_memory_channel_dev_t dev;  /* into the peer's destination */
    gpuport_memory_channel_dev_t self; /* the same, aimed at this rank's own */
    int *rc;
} mem_side_t;

static int rc_of(mem_side_t *s)
{
    int rc = 0;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&rc, s->rc, sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemset(s->rc, 0, sizeof(int)));
    return rc;
}

__global__ void k_mem_get(gpuport_memory_channel_dev_t ch, uint64_t dst_off, uint64_t src_off,
                          uint64_t size, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    int st = gpuport_memory_get(&ch, dst_off, src_off, size, t, nt);
    if (st)
        atomicCAS(rc, 0, st);
}

static void mem_get_case(mem_side_t *s)
{
    static const uint64_t sizes[] = {1, 7, 4097, 65539, MIB + 5};
    char what[160];

    k_fill<<<256, 256>>>(s->dst, MREGION, s->rank); /* what the peer gets */
    for (int grid = 0; grid < 2; grid++) {
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            uint64_t size = sizes[k], dst_off = 5 + 16 * k, src_off = 3 + 8 * k;
            if (!grid && size > 4097)
                continue; /* one thread: a page is enough */
            CUDA_CHECK(cudaMemset(s->src, 0, MREGION));
            CUDA_CHECK(cudaDeviceSynchronize());
            barrier(s->bs);
            if (grid)
                k_mem_get<<<64, 256>>>(s->dev, dst_off, src_off, size, s->rc);
            else
                k_mem_get<<<1, 1>>>(s->dev, dst_off, src_off, size, s->rc);
            snprintf(what, sizeof(what), "memory get of %llu B by %s", (unsigned long long)size,
                     grid ? "a grid" : "one thread");
            CHECK_MSG(rc_of(s) == 0, "%s failed", what);
            verify(s->src, MREGION, src_off, size, 1 - s->rank, dst_off, 0, s->rank, what);
            barrier(s->bs);
        }
    }
    printf("PASS memory get (rank %d): 1 B .. 1 MiB at odd offsets, a thread and a grid, both "
           "ways, every byte\n",
           s->rank);
}

/* the values: deterministic, so each rank knows the other's */
__host__ __device__ static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* round m (R: the destination's initial value) of element i from `rank` */
static uint64_t draw(int rank, int m, uint32_t i, int kind)
{
    return mix(((uint64_t)(rank + 1) << 56) ^ ((uint64_t)(m + 1) << 40) ^
               ((uint64_t)kind << 32) ^ i);
}

/* normal numbers of magnitude 2^-8 .. 2^9 of either sign: no partial sum
 * is subnormal (the GPU's float32 add would flush it), and double holds
 * every sum exactly */
static uint32_t f32_bits(uint64_t h)
{
    uint32_t e = (uint32_t)((h >> 40) % 17) + 127 - 8;
    return (uint32_t)(h >> 63) << 31 | e << 23 | (uint32_t)(h & 0x7fffff);
}

static uint16_t bf16_bits(uint64_t h)
{
    uint32_t e = (uint32_t)((h >> 40) % 17) + 127 - 8;
    return (uint16_t)((uint32_t)(h >> 63) << 15 | e << 7 | (uint32_t)(h & 0x7f));
}

static double f32_val(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static double bf16_val(uint16_t b)
{
    return f32_val((uint32_t)b << 16);
}

__host__ __device__ static int64_t counter_value(int rank, uint32_t t)
{
    return (int64_t)mix(((uint64_t)(rank + 7) << 32) | t) >> 16; /* either sign */
}

#define CT_BLOCKS 64
#define CT_THREADS 256

/* every thread: its value into the peer's counter and into this rank's */
__global__ void k_count(gpuport_memory_channel_dev_t peer, gpuport_memory_channel_dev_t self,
                        int rank, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    int st = gpuport_memory_atomic_add(&peer, COUNTER_OFF, counter_value(rank, t));
    if (!st)
        st = gpuport_memory_atomic_add(&self, COUNTER_OFF, counter_value(rank, t));
    if (st)
        atomicCAS(rc, 0, st);
}

/* R rounds of each vector into both destinations, the order of the two
 * alternating by round and rank so that the ranks' adds interleave */
__global__ void k_acc(gpuport_memory_channel_dev_t peer, gpuport_memory_channel_dev_t self,
                      int rank, int *rc)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    gpuport_dtype_t ints = rank ? GPUPORT_UINT64 : GPUPORT_INT64; /* the same bits */
    int st = 0;

    for (int m = 0; m < R && !st; m++) {
        for (int j = 0; j < 2 && !st; j++) {
            const gpuport_memory_channel_dev_t *c = ((m + rank + j) & 1) ? &peer : &self;
            st = gpuport_memory_accumulate(c, INT_OFF, SINT_OFF + (uint64_t)m * N * 8, N, ints,
                                           t, nt);
            if (!st)
                st = gpuport_memory_accumulate(c, F32_OFF, SF32_OFF + (uint64_t)m * N * 4, N,
                                               GPUPORT_FLOAT32, t, nt);
            if (!st)
                st = gpuport_memory_accumulate(c, BF_OFF, SBF_OFF + (uint64_t)m * N * 2, N,
                                               GPUPORT_BFLOAT16, t, nt);
        }
    }
    if (st)
        atomicCAS(rc, 0, st);
}

__global__ void k_signal(gpuport_memory_channel_dev_t ch, int *rc)
{
    int st = gpuport_memory_flush(&ch);
    if (!st)
        st = gpuport_memory_signal(&ch);
    if (st)
        atomicCAS(rc, 0, st);
}

__global__ void k_wait(gpuport_memory_channel_dev_t ch, int *rc)
{
    int st = gpuport_memory_wait(&ch);
    if (st)
        atomicCAS(rc, 0, st);
}

/* this rank's sources and initial destination */
static void acc_setup(mem_side_t *s)
{
    static uint64_t ints[R * N], dints[N];
    static uint32_t f32[R * N], df32[N];
    static uint16_t bf[R * N], dbf[N];
    static int64_t ord[NORD];

    for (int m = 0; m < R; m++)
        for (uint32_t i = 0; i < N; i++) {
            ints[m * N + i] = draw(s->rank, m, i, 0);
            f32[m * N + i] = f32_bits(draw(s->rank, m, i, 1));
            bf[m * N + i] = bf16_bits(draw(s->rank, m, i, 2));
        }
    for (uint32_t i = 0; i < N; i++) {
        dints[i] = draw(s->rank, R, i, 0);
        df32[i] = f32_bits(draw(s->rank, R, i, 1));
        dbf[i] = bf16_bits(draw(s->rank, R, i, 2));
    }
    for (int i = 0; i < NORD; i++)
        ord[i] = 3 * i + 1 - 2 * (i % 7) * (i % 5);
    CUDA_CHECK(cudaMemset(s->dst, 0, MREGION));
    CUDA_CHECK(cudaMemcpy(s->src + SINT_OFF, ints, sizeof(ints), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s->src + SF32_OFF, f32, sizeof(f32), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s->src + SBF_OFF, bf, sizeof(bf), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s->src + SORD_OFF, ord, sizeof(ord), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s->dst + INT_OFF, dints, sizeof(dints), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s->dst + F32_OFF, df32, sizeof(df32), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(s->dst + BF_OFF, dbf, sizeof(dbf), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
}

/* a float sum of k terms in any order against the exact sum (double holds
 * it): within (k - 1) u sum|x| */
static void check_float(const char *type, uint32_t i, double got, double exact, double abs_sum,
                        double u)
{
    double bound = (2 * R) * u * abs_sum;
    CHECK_MSG(fabs(got - exact) <= bound,
              "%s element %u: %.9g, exact %.9g, off by %.3g, bound %.3g", type, i, got, exact,
              fabs(got - exact), bound);
}

static void acc_verify(mem_side_t *s)
{
    static uint64_t ints[N];
    static uint32_t f32[N];
    static uint16_t bf[N];
    uint64_t counter = 0, want = 0;
    double worst_f = 0, worst_b = 0;

    CUDA_CHECK(cudaMemcpy(&counter, s->dst + COUNTER_OFF, 8, cudaMemcpyDeviceToHost));
    for (int r = 0; r < 2; r++)
        for (uint32_t t = 0; t < CT_BLOCKS * CT_THREADS; t++)
            want += (uint64_t)counter_value(r, t);
    CHECK_MSG(counter == want, "counter 0x%llx, expected 0x%llx", (unsigned long long)counter,
              (unsigned long long)want);
    CUDA_CHECK(cudaMemcpy(ints, s->dst + INT_OFF, sizeof(ints), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(f32, s->dst + F32_OFF, sizeof(f32), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(bf, s->dst + BF_OFF, sizeof(bf), cudaMemcpyDeviceToHost));
    for (uint32_t i = 0; i < N; i++) {
        uint64_t wi = draw(s->rank, R, i, 0);
        double fe = f32_val(f32_bits(draw(s->rank, R, i, 1))), fa = fabs(fe);
        double be = bf16_val(bf16_bits(draw(s->rank, R, i, 2))), ba = fabs(be);
        for (int r = 0; r < 2; r++)
            for (int m = 0; m < R; m++) {
                double f = f32_val(f32_bits(draw(r, m, i, 1)));
                double b = bf16_val(bf16_bits(draw(r, m, i, 2)));
                wi += draw(r, m, i, 0);
                fe += f;
                fa += fabs(f);
                be += b;
                ba += fabs(b);
            }
        CHECK_MSG(ints[i] == wi, "int64 element %u: 0x%llx, expected 0x%llx", i,
                  (unsigned long long)ints[i], (unsigned long long)wi);
        check_float("float32", i, f32_val(f32[i]), fe, fa, ldexp(1.0, -24));
        check_float("bfloat16", i, bf16_val(bf[i]), be, ba, ldexp(1.0, -8));
        if (fabs(f32_val(f32[i]) - fe) / fa > worst_f)
            worst_f = fabs(f32_val(f32[i]) - fe) / fa;
        if (fabs(bf16_val(bf[i]) - be) / ba > worst_b)
            worst_b = fabs(bf16_val(bf[i]) - be) / ba;
    }
    printf("PASS atomic_add and accumulate (rank %d): %u threads of each rank into one counter, "
           "exact; %d rounds of %d elements from both ranks: int64 exact, float32 and bfloat16 "
           "within (k-1)u sum|x| (worst |error| / sum|x|: %.3g u and %.3g u)\n",
           s->rank, CT_BLOCKS * CT_THREADS, R, N, worst_f / ldexp(1.0, -24),
           worst_b / ldexp(1.0, -8));
}

static void acc_case(mem_side_t *s)
{
    acc_setup(s);
    barrier(s->bs);
    k_count<<<CT_BLOCKS, CT_THREADS>>>(s->dev, s->self, s->rank, s->rc);
    k_acc<<<16, 256>>>(s->dev, s->self, s->rank, s->rc);
    k_signal<<<1, 1>>>(s->dev, s->rc); /* this rank's adds are in */
    k_wait<<<1, 1>>>(s->dev, s->rc);   /* ... and the peer's */
    CHECK_MSG(rc_of(s) == 0, "the adds, signal or wait failed");
    acc_verify(s);
    barrier(s->bs);
}

/* Rounds of accumulate, the block's barrier and one signal by the adder;
 * the checker's block waits, finds round r's sum (r times the source, the
 * same on both ranks), and signals back for the next round. */
__global__ void k_order(gpuport_memory_channel_dev_t ch, const int64_t *mine, int adder,
                        int rounds, int *rc)
{
    __shared__ int st, bad;
    const int64_t *src = (const int64_t *)(ch.src + SORD_OFF);

    if (threadIdx.x == 0)
        st = bad = 0;
    __syncthreads();
    for (int r = 1; r <= rounds; r++) {
        if (adder) {
            int e = gpuport_memory_accumulate(&ch, ORD_OFF, SORD_OFF, NORD, GPUPORT_INT64,
                                              threadIdx.x, blockDim.x);
            if (e)
                atomicCAS(&st, 0, e);
            __syncthreads(); /* the block's adds, then one release */
            if (threadIdx.x == 0 && !st)
                st = gpuport_memory_signal(&ch);
            if (threadIdx.x == 0 && !st)
                st = gpuport_memory_wait(&ch); /* the checker has looked */
        } else {
            if (threadIdx.x == 0)
                st = gpuport_memory_wait(&ch);
            __syncthreads();
            for (int i = threadIdx.x; !st && i < NORD; i += blockDim.x)
                if (mine[i] != (int64_t)r * src[i])
                    atomicAdd(&bad, 1);
            __syncthreads();
            if (threadIdx.x == 0 && !st && bad)
                st = -1000 - r; /* the sum was not there after the wait */
            if (threadIdx.x == 0 && !st)
                st = gpuport_memory_signal(&ch);
        }
        __syncthreads();
        if (st)
            break;
    }
    if (threadIdx.x == 0)
        *rc = st;
}

static void order_case(mem_side_t *s)
{
    const int rounds = 200;

    for (int adder = 0; adder < 2; adder++) {
        CUDA_CHECK(cudaMemset(s->dst + ORD_OFF, 0, NORD * 8));
        CUDA_CHECK(cudaDeviceSynchronize());
        barrier(s->bs);
        k_order<<<1, 256>>>(s->dev, (const int64_t *)(s->dst + ORD_OFF), s->rank == adder,
                            rounds, s->rc);
        int rc = rc_of(s);
        CHECK_MSG(rc == 0, "ordering, rank %d adding: %d%s", adder, rc,
                  rc <= -1000 ? " (a round's sum missing after the wait)" : "");
        barrier(s->bs);
    }
    printf("PASS accumulate then signal (rank %d): %d rounds each way, the waiter's kernel finds "
           "the sum after its wait\n",
           s->rank, rounds);
}

#define NMBAD 18

__global__ void k_mem_bad(gpuport_memory_channel_dev_t ch, int *out)
{
    uint64_t s = ch.dst_size;
    gpuport_memory_channel_dev_t other = ch, skewed = ch;
    int i = 0;

    out[i++] = gpuport_memory_get(&ch, s - 8, 0, 16, 0, 1);
    out[i++] = gpuport_memory_get(&ch, 0, ch.src_size - 8, 16, 0, 1);
    out[i++] = gpuport_memory_get(&ch, 0, 0, 16, 1, 1); /* thread not below nthreads */
    out[i++] = gpuport_memory_atomic_add(&ch, 4, 1);
    out[i++] = gpuport_memory_atomic_add(&ch, s, 1);
    out[i++] = gpuport_memory_accumulate(&ch, 0, 0, 0, GPUPORT_INT64, 0, 1);
    out[i++] = gpuport_memory_accumulate(&ch, 0, 0, 4, (gpuport_dtype_t)0, 0, 1);
    out[i++] = gpuport_memory_accumulate(&ch, 2, 0, 4, GPUPORT_FLOAT32, 0, 1);
    out[i++] = gpuport_memory_accumulate(&ch, 0, 6, 4, GPUPORT_FLOAT32, 0, 1);
    out[i++] = gpuport_memory_accumulate(&ch, s - 8, 0, 4, GPUPORT_FLOAT32, 0, 1);
    out[i++] = gpuport_memory_accumulate(&ch, 0, 0, UINT64_MAX / 4, GPUPORT_BFLOAT16, 0, 1);
    out[i++] = gpuport_memory_accumulate(&ch, 0, 0, 4, GPUPORT_INT64, 1, 1);
    /* the peer's region seen one byte on: its addresses misaligned */
    skewed.dst = ch.dst + 1;
    skewed.dst_size = s - 1;
    out[i++] = gpuport_memory_atomic_add(&skewed, 8, 1);
    out[i++] = gpuport_memory_accumulate(&skewed, 8, 0, 2, GPUPORT_INT64, 0, 1);
    out[i++] = gpuport_memory_accumulate(&skewed, 2, 0, 2, GPUPORT_BFLOAT16, 0, 1);
    other.layout = GPUPORT_LAYOUT(GPUPORT_MEMORY_CHANNEL_DEV_VERSION + 1,
                                  gpuport_memory_channel_dev_t);
    out[i++] = gpuport_memory_get(&other, 0, 0, 16, 0, 1);
    out[i++] = gpuport_memory_atomic_add(&other, 0, 1);
    out[i++] = gpuport_memory_accumulate(&other, 0, 0, 4, GPUPORT_INT64, 0, 1);
    __threadfence_system();
}

static void mem_bad_case(mem_side_t *s)
{
    static const int want[NMBAD] = {
        GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_INVALID_ARG,
        GPUPORT_ERR_INVALID_ARG,  GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_INVALID_ARG,
        GPUPORT_ERR_INVALID_ARG,  GPUPORT_ERR_INVALID_ARG,  GPUPORT_ERR_INVALID_ARG,
        GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_OUT_OF_RANGE, GPUPORT_ERR_INVALID_ARG,
        GPUPORT_ERR_INVALID_ARG,  GPUPORT_ERR_INVALID_ARG,  GPUPORT_ERR_INVALID_ARG,
        GPUPORT_ERR_VERSION,      GPUPORT_ERR_VERSION,      GPUPORT_ERR_VERSION};
    int out[NMBAD], *d_out;

    k_fill<<<256, 256>>>(s->dst, MREGION, s->rank);
    k_fill<<<256, 256>>>(s->src, MREGION, s->rank + 2);
    CUDA_CHECK(cudaMalloc(&d_out, sizeof(out)));
    CUDA_CHECK(cudaDeviceSynchronize());
    barrier(s->bs);
    k_mem_bad<<<1, 1>>>(s->dev, d_out);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost));
    for (int i = 0; i < NMBAD; i++)
        CHECK_MSG(out[i] == want[i], "bad arguments: call %d returned %d, expected %d", i, out[i],
                  want[i]);
    barrier(s->bs);
    verify(s->dst, MREGION, 0, 0, 0, 0, -1, s->rank, "the destination after refused adds");
    verify(s->src, MREGION, 0, 0, 0, 0, -1, s->rank + 2, "the source after refused gets");
    barrier(s->bs);
    cudaFree(d_out);
    printf("PASS memory bad arguments (rank %d): each refused with its status, nothing stored\n",
           s->rank);
}

static void memory_cases(gpuport_bootstrap_t *bs, gpuport_comm_t comm, int rank)
{
    mem_side_t s;

    memset(&s, 0, sizeof(s));
    s.bs = bs;
    s.rank = rank;
    s.comm = comm;
    CHECK_OK(gpuport_mem_alloc_device(comm, MREGION, (void **)&s.src));
    CHECK_OK(gpuport_mem_alloc_device(comm, MREGION, (void **)&s.dst));
    CUDA_CHECK(cudaMalloc(&s.rc, sizeof(int)));
    CUDA_CHECK(cudaMemset(s.rc, 0, sizeof(int)));
    CHECK_OK(gpuport_mem_register(comm, s.src, MREGION, &s.msrc));
    CHECK_OK(gpuport_mem_register(comm, s.dst, MREGION, &s.mdst));
    CHECK_OK(gpuport_memory_channel_create(comm, 1 - rank, s.msrc, s.mdst, &s.mc));
    CHECK_OK(gpuport_memory_channel_device(s.mc, &s.dev));
    CHECK(s.dev.dst && s.dev.dst_size == MREGION && s.dev.local_dst_size == MREGION);
    /* a copy of the handle aimed at this rank's own destination: the
     * library's device code adds there as the peer's adds through the
     * channel do, so both ranks' kernels add into the same memory */
    s.self = s.dev;
    s.self.dst = (unsigned char *)s.dev.local_dst;
    s.self.dst_size = s.dev.local_dst_size;
    mem_get_case(&s);
    acc_case(&s);
    order_case(&s);
    mem_bad_case(&s);
    CHECK_OK(gpuport_memory_channel_destroy(s.mc));
    CHECK_OK(gpuport_mem_deregister(s.msrc));
    CHECK_OK(gpuport_mem_deregister(s.mdst));
    CHECK_OK(gpuport_mem_free(comm, s.src));
    CHECK_OK(gpuport_mem_free(comm, s.dst));
    cudaFree(s.rc);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    int port = strcmp(what, "memory") != 0, memory = strcmp(what, "port") != 0;
    gpuport_bootstrap_t bs;
    gpuport_comm_t comm;
    port_side_t ps;
    pid_t child;
    int rank;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(what, "all") != 0 && strcmp(what, "port") != 0 && strcmp(what, "memory") != 0) {
        fprintf(stderr, "usage: %s [port|memory|all]\n", argv[0]);
        return 2;
    }
    if (memory && strcmp(transport(), "cuda_ipc") != 0) {
        CHECK_MSG(port, "memory channels reach ranks over cuda_ipc only, and "
                        "GPUPORT_TRANSPORT=%s", transport());
        printf("memory cases not run: memory channels reach ranks over cuda_ipc only\n");
        memory = 0;
    }
    setenv("GPUPORT_TIMEOUT_MS", "60000", 1);
    printf("test_gpu_rma %s: transport %s, port regions of memory %s\n", what, transport(),
           gpu_mem_kind_desc(gpu_mem_kind()));
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL; /* the pair's socket outlives the communicator: barriers after it */
    CHECK_OK(gpuport_comm_create(&bs, &comm));
    if (port)
        port_cases(&ps, &bs, comm, rank);
    if (memory)
        memory_cases(&bs, comm, rank);
    CHECK_OK(gpuport_comm_destroy(comm));
    if (port) {
        barrier(&bs); /* the peer's imports are freed first (pool memory) */
        gpu_region_free(ps.src);
        gpu_region_free(ps.dst);
        cudaFree(ps.rc);
    }
    gpu_pair_join(rank, child, 0);
    printf("all GPU get / atomic_add / accumulate tests passed\n");
    return 0;
}
