/*
 * One GPU buffer for every peer: VMM memory shared by file descriptor.
 * Two processes (fork + socketpair bootstrap; GPUPORT_TEST_ONE_GPU=1 puts
 * both on GPU 0); every scenario checks each byte of the destination on the
 * GPU (the range put there, zeros around it):
 *  - one region, two channels: the same buffers registered in a cuda_ipc
 *    communicator and a tcp one (gpuport_mem_alloc_device memory of one,
 *    which the other sees as application VMM memory, each way round; then
 *    the application's own VMM memory), different ranges put over each
 *    channel and both signalled, in each direction;
 *  - legacy IPC beside gpuport: while cuda_ipc channels over VMM regions are
 *    open, the application opens its peer's cudaIpcMemHandle (which fails
 *    when gpuport's flusher context holds the peer's legacy handles), writes
 *    through it, and the channels keep working;
 *  - VMM memory without a POSIX-FD handle type registers, is refused by
 *    cuda_ipc on both sides with GPUPORT_ERR_NOT_SUPPORTED and a message
 *    naming what to allocate, and carries data over tcp;
 *  - freeing what a live channel uses: deregister and gpuport_mem_free
 *    return GPUPORT_ERR_BUSY (a region two channels use, until the last one
 *    is destroyed), the channels work in between, and both calls succeed
 *    after;
 *  - a region that starts inside one allocation and ends inside the next:
 *    puts across the boundary at random offsets, over cuda_ipc and tcp.
 * Each scenario picks its own memory; GPUPORT_TEST_MEM is not read here.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"
extern "C" {
#include "capture.h"
}

#define KIB (1ull << 10)
#define MIB (1ull << 20)

typedef struct range {
    uint64_t dst_off, src_off, size;
} range_t;

static const range_t NO_RANGE = {0, 0, 0};

static range_t mkrange(uint64_t dst_off, uint64_t src_off, uint64_t size)
{
    range_t r = {dst_off, src_off, size};
    return r;
}

static int *g_rc;                /* device: what the kernels return */
static unsigned long long *g_bad; /* device: bytes that verify counted wrong */

__device__ static unsigned char pat(int who, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(who + 1) * 0xbf58476d1ce4e5b9ull;
    return (unsigned char)(x >> 56);
}

__global__ void fill(unsigned char *p, uint64_t n, int who)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pat(who, i);
}

/* Counts the bytes of dst[0, region) that differ from what the puts of
 * ranges a and b from `from`'s source make them: pat(from, src_off + k) in a
 * range, 0 elsewhere. */
__global__ void verify(const unsigned char *dst, uint64_t region, range_t a, range_t b, int from,
                       unsigned long long *bad)
{
    unsigned long long n = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < region;
         i += (uint64_t)gridDim.x * blockDim.x) {
        unsigned char want = 0;
        if (i >= a.dst_off && i - a.dst_off < a.size)
            want = pat(from, a.src_off + (i - a.dst_off));
        else if (i >= b.dst_off && i - b.dst_off < b.size)
            want = pat(from, b.src_off + (i - b.dst_off));
        n += dst[i] != want;
    }
    if (n)
        atomicAdd(bad, n);
}

__global__ void k_put_wait(gpuport_port_channel_dev_t ch, range_t r, int *rc)
{
    rc[0] = gpuport_put_with_signal(&ch, r.dst_off, r.src_off, r.size);
    rc[1] = rc[0] ? rc[0] : gpuport_wait(&ch);
}

/* one put_with_signal on each of two channels (of two communicators) */
__global__ void k_put2(gpuport_port_channel_dev_t a, range_t ra, gpuport_port_channel_dev_t b,
                       range_t rb, int *rc)
{
    rc[0] = gpuport_put_with_signal(&a, ra.dst_off, ra.src_off, ra.size);
    rc[1] = gpuport_put_with_signal(&b, rb.dst_off, rb.src_off, rb.size);
}

__global__ void k_wait2(gpuport_port_channel_dev_t a, gpuport_port_channel_dev_t b, int *rc)
{
    rc[0] = gpuport_wait(&a);
    rc[1] = gpuport_wait(&b);
}

static int rc_get(int i)
{
    int h[8];
    CUDA_CHECK(cudaMemcpy(h, g_rc, sizeof(h), cudaMemcpyDeviceToHost));
    return h[i];
}

static unsigned long long count_bad(const unsigned char *dst, uint64_t region, range_t a,
                                    range_t b, int from)
{
    unsigned long long h = 0;
    CUDA_CHECK(cudaMemset(g_bad, 0, sizeof(*g_bad)));
    verify<<<1024, 256>>>(dst, region, a, b, from, g_bad);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(&h, g_bad, sizeof(h), cudaMemcpyDeviceToHost));
    return h;
}

/* Sets an environment variable and returns its old value (malloc'ed, or
 * NULL when it was unset) for env_restore. */
static char *env_swap(const char *name, const char *value)
{
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    CHECK(!old || saved);
    CHECK(setenv(name, value, 1) == 0);
    return saved;
}

static void env_restore(const char *name, char *saved)
{
    if (saved)
        CHECK(setenv(name, saved, 1) == 0);
    else
        CHECK(unsetenv(name) == 0);
    free(saved);
}

/* A communicator whose channels use `transport`: gpuport_comm_create reads
 * GPUPORT_TRANSPORT, so it is set for the creation only. */
static gpuport_comm_t comm_open(gpuport_bootstrap_t *bs, const char *transport)
{
    char *saved = env_swap("GPUPORT_TRANSPORT", transport);
    gpuport_comm_t comm;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    env_restore("GPUPORT_TRANSPORT", saved);
    return comm;
}

/* A channel over src and dst, registered in comm for it. */
typedef struct chan {
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
} chan_t;

static void chan_open(chan_t *c, gpuport_comm_t comm, int peer, void *src, void *dst,
                      uint64_t region, const char *transport)
{
    memset(c, 0, sizeof(*c));
    CHECK_OK(gpuport_mem_register(comm, src, region, &c->msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, region, &c->mdst));
    CHECK_OK(gpuport_channel_create(comm, peer, c->msrc, c->mdst, &c->ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(c->ch), transport) == 0, "transport %s, expected %s",
              gpuport_channel_transport(c->ch), transport);
    CHECK_OK(gpuport_channel_device(c->ch, &c->dev));
}

static void chan_close(chan_t *c)
{
    CHECK_OK(gpuport_channel_flush(c->ch));
    CHECK_OK(gpuport_channel_destroy(c->ch));
    CHECK_OK(gpuport_mem_deregister(c->msrc));
    CHECK_OK(gpuport_mem_deregister(c->mdst));
}

/* Both ranks at once: put r to the peer with a signal, wait for the peer's,
 * and check every byte of this rank's destination. Sources hold
 * pat(rank, offset) throughout. */
static void exchange(gpuport_bootstrap_t *bs, const gpuport_port_channel_dev_t *dev,
                     unsigned char *dst, uint64_t region, range_t r, const char *what)
{
    unsigned long long bad;

    CUDA_CHECK(cudaMemset(dst, 0, region));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(bs->barrier(bs->ctx));
    k_put_wait<<<1, 1>>>(*dev, r, g_rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_MSG(rc_get(0) == 0 && rc_get(1) == 0, "%s: put %d, wait %d", what, rc_get(0),
              rc_get(1));
    bad = count_bad(dst, region, r, NO_RANGE, 1 - bs->rank);
    CHECK_MSG(bad == 0, "%s: %llu bad bytes (dst_off %llu, src_off %llu, size %llu)", what, bad,
              (unsigned long long)r.dst_off, (unsigned long long)r.src_off,
              (unsigned long long)r.size);
    CHECK_OK(bs->barrier(bs->ctx));
}

static void fill_src_zero_dst(unsigned char *src, unsigned char *dst, uint64_t region, int rank)
{
    fill<<<1024, 256>>>(src, region, rank);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemset(dst, 0, region));
    CUDA_CHECK(cudaDeviceSynchronize());
}

/* Whose memory scenario a's buffers are. A gpuport_mem_alloc_device
 * block belongs to one communicator; the other sees application VMM. */
enum { OWNER_IPC, OWNER_TCP, OWNER_APP };
static const char *const owner_names[] = {
    "gpuport_mem_alloc_device of the cuda_ipc communicator",
    "gpuport_mem_alloc_device of the tcp communicator", "application VMM"};

/* a. The same buffers registered in a cuda_ipc communicator and a tcp one;
 * one range over each channel. */
static void one_region_two_channels(gpuport_bootstrap_t *bs, int owner)
{
    const uint64_t region = 6 * MIB;
    /* under gpu_appvmm_region the boundary is at 3 MiB: ra crosses it in
     * both regions, rb lies in the second allocation of dst */
    const range_t ra = {100, 2 * MIB + 7, 3 * MIB + 333};
    const range_t rb = {3 * MIB + 4096, 5, 3 * MIB - 8192};
    int rank = bs->rank, peer = 1 - rank;
    gpuport_comm_t ci = comm_open(bs, "cuda_ipc"), ct = comm_open(bs, "tcp");
    gpuport_comm_t own = owner == OWNER_IPC ? ci : owner == OWNER_TCP ? ct : NULL;
    gpuport_comm_t other = own == ct ? ci : ct;
    unsigned char *src, *dst;
    chan_t a, b;

    if (own) {
        CHECK_OK(gpuport_mem_alloc_device(own, region, (void **)&src));
        CHECK_OK(gpuport_mem_alloc_device(own, region, (void **)&dst));
    } else {
        src = (unsigned char *)gpu_appvmm_region(region, 1);
        dst = (unsigned char *)gpu_appvmm_region(region, 1);
    }
    fill_src_zero_dst(src, dst, region, rank);
    chan_open(&a, ci, peer, src, dst, region, "cuda_ipc");
    chan_open(&b, ct, peer, src, dst, region, "tcp");
    for (int from = 0; from < 2; from++) {
        CUDA_CHECK(cudaMemset(dst, 0, region));
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK_OK(bs->barrier(bs->ctx));
        if (rank == from) {
            k_put2<<<1, 1>>>(a.dev, ra, b.dev, rb, g_rc);
            CUDA_CHECK(cudaDeviceSynchronize());
            CHECK_MSG(rc_get(0) == 0 && rc_get(1) == 0, "put: cuda_ipc %d, tcp %d", rc_get(0),
                      rc_get(1));
            CHECK_OK(gpuport_channel_flush(a.ch));
            CHECK_OK(gpuport_channel_flush(b.ch));
        } else {
            k_wait2<<<1, 1>>>(a.dev, b.dev, g_rc);
            CUDA_CHECK(cudaDeviceSynchronize());
            CHECK_MSG(rc_get(0) == 0 && rc_get(1) == 0, "wait: cuda_ipc %d, tcp %d", rc_get(0),
                      rc_get(1));
            unsigned long long bad = count_bad(dst, region, ra, rb, from);
            CHECK_MSG(bad == 0, "%s, rank %d to %d: %llu bad bytes in the two ranges or around "
                      "them", owner_names[owner], from, rank, bad);
        }
        CHECK_OK(bs->barrier(bs->ctx));
    }
    chan_close(&a);
    chan_close(&b);
    /* the owner of the blocks last: the other registered them */
    CHECK_OK(gpuport_comm_destroy(other));
    if (own) {
        CHECK_OK(gpuport_mem_free(own, src));
        CHECK_OK(gpuport_mem_free(own, dst));
        CHECK_OK(gpuport_comm_destroy(own));
    } else {
        CHECK_OK(gpuport_comm_destroy(ci));
        gpu_appvmm_free(src);
        gpu_appvmm_free(dst);
    }
    if (rank == 0)
        printf("PASS one region, two channels (%s): a cuda_ipc and a tcp channel into the same "
               "buffer, both directions\n", owner_names[owner]);
}

/* b. The application's own legacy CUDA IPC to its peer beside gpuport
 * cuda_ipc channels whose regions are VMM memory (source
 * gpuport_mem_alloc_device, destination application VMM). */
static void legacy_ipc_beside(gpuport_bootstrap_t *bs)
{
    const uint64_t region = 2 * MIB, small = 64 * KIB;
    const range_t r1 = {4096, 777, 1 * MIB + 5}, r2 = {13, 1 * MIB, 1 * MIB - 4096};
    int rank = bs->rank, peer = 1 - rank;
    gpuport_comm_t comm = comm_open(bs, "cuda_ipc");
    unsigned char *src, *dst, *mine, *theirs = NULL;
    cudaIpcMemHandle_t h, hs[2];
    cudaError_t e;
    chan_t c;

    CHECK_OK(gpuport_mem_alloc_device(comm, region, (void **)&src));
    dst = (unsigned char *)gpu_appvmm_region(region, 1);
    fill_src_zero_dst(src, dst, region, rank);
    chan_open(&c, comm, peer, src, dst, region, "cuda_ipc");
    /* the peer's memory is in use by this side's channel from here */
    exchange(bs, &c.dev, dst, region, r1, "before the application's IPC");

    CUDA_CHECK(cudaMalloc(&mine, small));
    CUDA_CHECK(cudaMemset(mine, 0, small));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaIpcGetMemHandle(&h, mine));
    CHECK_OK(bs->allgather(bs->ctx, &h, hs, sizeof(h)));
    e = cudaIpcOpenMemHandle((void **)&theirs, hs[peer], cudaIpcMemLazyEnablePeerAccess);
    CHECK_MSG(e == cudaSuccess, "cudaIpcOpenMemHandle of rank %d's cudaMalloc buffer, with "
              "gpuport cuda_ipc channels over VMM regions open to it: %s", peer,
              cudaGetErrorString(e));
    /* a pattern no channel carries: writer's rank + 2 */
    fill<<<64, 256>>>(theirs, small, rank + 2);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(bs->barrier(bs->ctx));
    {
        range_t all = {0, 0, small};
        unsigned long long bad = count_bad(mine, small, all, NO_RANGE, peer + 2);
        CHECK_MSG(bad == 0, "%llu bad bytes written by rank %d through its IPC mapping", bad,
                  peer);
    }
    CUDA_CHECK(cudaIpcCloseMemHandle(theirs));
    CHECK_OK(bs->barrier(bs->ctx)); /* the peer closed its mapping of `mine` */
    CUDA_CHECK(cudaFree(mine));

    exchange(bs, &c.dev, dst, region, r2, "after the application's IPC");
    chan_close(&c);
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_comm_destroy(comm));
    gpu_appvmm_free(dst);
    if (rank == 0)
        printf("PASS legacy IPC beside VMM channels: cudaIpcOpenMemHandle of the peer works, "
               "bytes written through it arrive, the channel works before and after\n");
}

/* c. VMM memory made without a shareable handle type: cuda_ipc cannot
 * export it (refused on both sides), tcp needs no export. */
static void no_fd_handle(gpuport_bootstrap_t *bs)
{
    const uint64_t region = 4 * MIB;
    const range_t r = {1000, 3, 2 * MIB + 4097}; /* crosses the boundary at 2 MiB */
    const char *lv = getenv("GPUPORT_LOG_LEVEL");
    int quiet = lv && strcmp(lv, "none") == 0;
    int rank = bs->rank, peer = 1 - rank;
    unsigned char *src = (unsigned char *)gpu_appvmm_region(region, 0);
    unsigned char *dst = (unsigned char *)gpu_appvmm_region(region, 0);
    gpuport_comm_t ci = comm_open(bs, "cuda_ipc"), ct;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch = NULL;
    gpuport_status_t st;
    const char *log;
    chan_t c;

    fill_src_zero_dst(src, dst, region, rank);
    CHECK_OK(gpuport_mem_register(ci, src, region, &msrc));
    CHECK_OK(gpuport_mem_register(ci, dst, region, &mdst));
    capture_begin();
    st = gpuport_channel_create(ci, peer, msrc, mdst, &ch);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED, "cuda_ipc channel over VMM memory without a "
              "POSIX-FD handle type: %s (expected %s); log:\n%s", gpuport_status_string(st),
              gpuport_status_string(GPUPORT_ERR_NOT_SUPPORTED), log);
    CHECK(ch == NULL);
    /* the message says what to allocate instead */
    CHECK_MSG(quiet || count_of(log, "POSIX_FILE_DESCRIPTOR") > 0 ||
                  count_of(log, "gpuport_mem_alloc_device") > 0,
              "the refusal names neither CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR nor "
              "gpuport_mem_alloc_device; log:\n%s", log);
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_comm_destroy(ci));

    ct = comm_open(bs, "tcp");
    chan_open(&c, ct, peer, src, dst, region, "tcp");
    exchange(bs, &c.dev, dst, region, r, "tcp over VMM memory without a POSIX-FD handle");
    chan_close(&c);
    CHECK_OK(gpuport_comm_destroy(ct));
    gpu_appvmm_free(src);
    gpu_appvmm_free(dst);
    if (rank == 0)
        printf("PASS VMM memory without a POSIX-FD handle: registers, cuda_ipc refuses it on both "
               "sides%s, tcp carries it\n", quiet ? "" : " naming what to allocate");
}

/* One put_with_signal each way over ch by the host API, checked on the GPU. */
static void host_exchange(gpuport_bootstrap_t *bs, gpuport_channel_t ch, unsigned char *dst,
                          uint64_t region, range_t r, const char *what)
{
    unsigned long long bad;

    CUDA_CHECK(cudaMemset(dst, 0, region));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_put_with_signal(ch, r.dst_off, r.src_off, r.size));
    CHECK_OK(gpuport_channel_wait(ch));
    bad = count_bad(dst, region, r, NO_RANGE, 1 - bs->rank);
    CHECK_MSG(bad == 0, "%s: %llu bad bytes", what, bad);
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(bs->barrier(bs->ctx));
}

/* Each call of a refused batch returned GPUPORT_ERR_BUSY; `log` is what
 * the library said meanwhile (captured: the refusals are logged, and
 * expected here). */
static void expect_busy(const gpuport_status_t *got, const char *const *calls, int n,
                        const char *log)
{
    for (int i = 0; i < n; i++)
        CHECK_MSG(got[i] == GPUPORT_ERR_BUSY, "%s with a live channel on it returned %s, "
                  "expected %s; log:\n%s", calls[i], gpuport_status_string(got[i]),
                  gpuport_status_string(GPUPORT_ERR_BUSY), log);
}

/* d. Deregistering and freeing what live channels use. ch1 runs from a
 * gpuport_mem_alloc_device block into another; ch2 from the same source
 * registration into application VMM memory. */
static void free_while_open(gpuport_bootstrap_t *bs)
{
    const uint64_t region = 1 * MIB;
    const range_t r = {64, 128, 300000};
    int rank = bs->rank, peer = 1 - rank;
    gpuport_comm_t comm = comm_open(bs, "cuda_ipc");
    unsigned char *src, *dst, *app;
    gpuport_mem_t msrc, mdst, mapp;
    gpuport_channel_t ch1, ch2;
    gpuport_status_t got[5];
    static const char *const calls[5] = {
        "gpuport_mem_deregister(destination of ch1)", "gpuport_mem_deregister(source of both)",
        "gpuport_mem_deregister(destination of ch2)", "gpuport_mem_free(destination block)",
        "gpuport_mem_free(source block)"};
    static const char *const calls_after[2] = {
        "gpuport_mem_deregister(source, ch1 destroyed, ch2 open)",
        "gpuport_mem_free(source block, ch1 destroyed, ch2 open)"};

    CHECK_OK(gpuport_mem_alloc_device(comm, region, (void **)&src));
    CHECK_OK(gpuport_mem_alloc_device(comm, region, (void **)&dst));
    app = (unsigned char *)gpu_appvmm_region(region, 1);
    fill_src_zero_dst(src, dst, region, rank);
    CUDA_CHECK(cudaMemset(app, 0, region));
    CHECK_OK(gpuport_mem_register(comm, src, region, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, region, &mdst));
    CHECK_OK(gpuport_mem_register(comm, app, region, &mapp));
    CHECK_OK(gpuport_channel_create(comm, peer, msrc, mdst, &ch1));
    CHECK_OK(gpuport_channel_create(comm, peer, msrc, mapp, &ch2));
    host_exchange(bs, ch1, dst, region, r, "ch1 before");
    host_exchange(bs, ch2, app, region, r, "ch2 before");

    capture_begin();
    got[0] = gpuport_mem_deregister(mdst);
    got[1] = gpuport_mem_deregister(msrc);
    got[2] = gpuport_mem_deregister(mapp);
    got[3] = gpuport_mem_free(comm, dst);
    got[4] = gpuport_mem_free(comm, src);
    expect_busy(got, calls, 5, capture_end());
    host_exchange(bs, ch1, dst, region, r, "ch1 after the refused frees");
    host_exchange(bs, ch2, app, region, r, "ch2 after the refused frees");

    CHECK_OK(gpuport_channel_destroy(ch1));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, dst));
    capture_begin(); /* ch2 still reads the source */
    got[0] = gpuport_mem_deregister(msrc);
    got[1] = gpuport_mem_free(comm, src);
    expect_busy(got, calls_after, 2, capture_end());
    host_exchange(bs, ch2, app, region, r, "ch2 after ch1 went");
    CHECK_OK(gpuport_channel_destroy(ch2));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mapp));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_comm_destroy(comm));
    gpu_appvmm_free(app);
    if (rank == 0)
        printf("PASS freeing with channels open: deregister and gpuport_mem_free are BUSY until "
               "the last channel on the region is destroyed, then succeed\n");
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 17;
}

/* An offset at which `size` bytes of a region of `region` bytes cross
 * offset `bnd`: off < bnd < off + size. */
static uint64_t crossing(uint64_t *seed, uint64_t bnd, uint64_t size, uint64_t region)
{
    uint64_t lo = bnd >= size ? bnd - size + 1 : 0, hi = region - size;
    if (hi > bnd - 1)
        hi = bnd - 1;
    CHECK(size >= 2 && size <= region && lo <= hi);
    return lo + lcg(seed) % (hi - lo + 1);
}

/* e. Regions that start inside the first of two allocations and end inside
 * the second, source and destination at different offsets, so a put
 * crosses a boundary that lies elsewhere in each. */
static void across_boundary(gpuport_bootstrap_t *bs, const char *transport)
{
    const uint64_t gran = gpu_vmm_granularity(1);
    const size_t sizes[2] = {2 * gran, 2 * gran};
    const uint64_t dst_start = gran + gran / 2 + 4096 + 96, src_start = gran + 64;
    const uint64_t dbnd = 2 * gran - dst_start, sbnd = 2 * gran - src_start;
    const uint64_t region = dbnd + gran + 1000; /* ends inside the second allocation */
    int rank = bs->rank, peer = 1 - rank, n = 0;
    gpuport_comm_t comm = comm_open(bs, transport);
    unsigned char *sbase = (unsigned char *)gpu_appvmm_alloc(sizes, 2, 1);
    unsigned char *dbase = (unsigned char *)gpu_appvmm_alloc(sizes, 2, 1);
    unsigned char *src = sbase + src_start, *dst = dbase + dst_start;
    range_t rs[24];
    uint64_t seed = 12345;
    chan_t c;

    CHECK(sbnd < region && dbnd < region);
    CHECK(src_start + region < 4 * gran && dst_start + region < 4 * gran);
    /* the edges: the boundary's two bytes alone, then together */
    rs[n++] = mkrange(dbnd - 1, sbnd - 1, 1);
    rs[n++] = mkrange(dbnd, sbnd, 1);
    rs[n++] = mkrange(dbnd - 1, sbnd - 1, 2);
    rs[n++] = mkrange(0, 0, region);
    while (n < (int)(sizeof(rs) / sizeof(rs[0]))) {
        range_t r;
        r.size = 2 + lcg(&seed) % (n & 1 ? region - 2 : 64 * KIB);
        r.dst_off = crossing(&seed, dbnd, r.size, region);
        r.src_off = crossing(&seed, sbnd, r.size, region);
        CHECK(r.dst_off < dbnd && r.dst_off + r.size > dbnd && r.dst_off + r.size <= region);
        CHECK(r.src_off + r.size <= region);
        rs[n++] = r;
    }
    fill_src_zero_dst(src, dst, region, rank);
    chan_open(&c, comm, peer, src, dst, region, transport);
    for (int k = 0; k < n; k++) {
        char what[64];
        snprintf(what, sizeof(what), "%s put %d across the boundary", transport, k);
        exchange(bs, &c.dev, dst, region, rs[k], what);
    }
    chan_close(&c);
    CHECK_OK(gpuport_comm_destroy(comm));
    gpu_appvmm_free(sbase);
    gpu_appvmm_free(dbase);
    if (rank == 0)
        printf("PASS across an allocation boundary over %s: %d puts (edges, whole region, random "
               "offsets), regions starting %llu and %llu bytes into their first allocation\n",
               transport, n, (unsigned long long)src_start, (unsigned long long)dst_start);
}

int main(void)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank, dev = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_TIMEOUT_MS", "60000", 1);
    printf("test_gpu_vmm: regions of gpuport_mem_alloc_device and application VMM memory "
           "(cuMemCreate, POSIX-FD or no handle type, two allocations in one reserved range); "
           "cuda_ipc and tcp\n");
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL; /* one socketpair serves every scenario's communicators */
    CUDA_CHECK(cudaGetDevice(&dev));
    if (rank == 0)
        printf("GPU %d, VMM granularity %zu KiB\n", dev, gpu_vmm_granularity(1) >> 10);
    CUDA_CHECK(cudaMalloc(&g_rc, 8 * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&g_bad, sizeof(*g_bad)));
    one_region_two_channels(&bs, OWNER_IPC);
    one_region_two_channels(&bs, OWNER_TCP);
    one_region_two_channels(&bs, OWNER_APP);
    legacy_ipc_beside(&bs);
    no_fd_handle(&bs);
    free_while_open(&bs);
    across_boundary(&bs, "cuda_ipc");
    across_boundary(&bs, "tcp");
    cudaFree(g_rc);
    cudaFree(g_bad);
    gpu_pair_join(rank, child, 0);
    printf("all VMM tests passed\n");
    return 0;
}
