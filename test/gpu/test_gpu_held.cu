/*
 * A copy held by CUDA. While a thread of the application is inside a
 * synchronous cudaMemcpy that waits for a running kernel, CUDA does not let
 * another context's call that names the application's context return
 * (measured on H200 with CUDA 13: cuMemcpyPeerAsync, cuMemcpyAsync and
 * cuMemcpyDtoDAsync from cudaMalloc memory, 1.9 s, until the kernel ended;
 * cudaDeviceSynchronize, cudaStreamSynchronize and cudaEventSynchronize do
 * not hold it; docs/ARCHITECTURE.md). gpuport's flusher copies cudaMalloc
 * sources with such a call, so a kernel that waits for its peer's signal
 * while both hosts sit in cudaMemcpy cannot finish. Two processes (fork +
 * socketpair bootstrap; GPUPORT_TEST_ONE_GPU=1 puts both on GPU 0), one
 * cuda_ipc channel over cudaMalloc memory each way, 4 KiB put with a signal
 * then a wait, in one kernel per process:
 *  - held: each host goes straight into cudaMemcpy of the kernel's result.
 *    The wait must end with GPUPORT_ERR_TIMEOUT (GPUPORT_TIMEOUT_MS=2000)
 *    rather than hang, and this process's log must carry the proxy's
 *    warning that names the cause and both ways out. Where the driver does
 *    not hold the copy (the exchange succeeds), the warning has nothing to
 *    report: the test says so and checks the bytes instead.
 *  - synchronized: new channels; each host waits with
 *    cudaDeviceSynchronize before its cudaMemcpy. The exchange must succeed
 *    and every byte arrive, with no warning.
 * GPUPORT_TEST_MEM picks the regions' memory (gpu_pair.h; cudaMalloc when
 * unset) and GPUPORT_TRANSPORT the transport (cuda_ipc when unset). Memory
 * mapped for the device (VMM, pool) is copied without the application's
 * context, so for it the held pattern must succeed as well: every byte
 * checked, no warning. cudaMalloc memory over cuda_ipc goes by the relay
 * (GPUPORT_CUDA_IPC_RELAY=1, the default: the peer's flusher stages the
 * source, neither copy names an application's context), so there too the
 * held pattern must succeed, every byte checked, no warning; with
 * GPUPORT_CUDA_IPC_RELAY=0 (one direct copy) it must end in the timeout and
 * the warning as above. A second channel then carries 5 MiB each way
 * (pieces through both halves of the 4 MiB staging) and a get of 3 MiB back,
 * in the held pattern too, every byte checked.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"
extern "C" {
#include "capture.h"
}

#define BYTES 4096
#define BIG (5u << 20) /* more than the relay's staging (GPUPORT_CUDA_IPC_RELAY_BYTES, 4 MiB) */
#define GOT (3u << 20) /* the get: more than one staging half */
#define WARNING "synchronous cudaMemcpy"

/* the bytes `who` puts in phase `phase` */
__host__ __device__ static unsigned char pat(int who, int phase, int i)
{
    return (unsigned char)(who * 71 + phase * 29 + i * 13 + (i >> 8));
}

__global__ void fill(unsigned char *p, int who, int phase, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] = pat(who, phase, (int)i);
}

/* Spins 200 ms: by then the host that launched the kernel is inside its
 * cudaMemcpy, so the copies that follow are issued while it waits there. */
__device__ static void after_200ms(void)
{
    unsigned long long t0, t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < 200ull * 1000 * 1000);
}

/* The big exchange: a put of BIG bytes with a signal, the wait, then a get
 * of the first GOT bytes of the peer's destination (what this rank's put
 * wrote there) into this rank's source at offset BIG - GOT, and a flush. */
__global__ void put_get(gpuport_port_channel_dev_t ch, int *rc)
{
    int st;

    after_200ms();
    st = gpuport_put_with_signal(&ch, 0, 0, BIG);
    if (st == GPUPORT_OK)
        st = gpuport_wait(&ch);
    if (st == GPUPORT_OK)
        st = gpuport_get(&ch, 0, BIG - GOT, GOT);
    if (st == GPUPORT_OK)
        st = gpuport_flush(&ch);
    rc[0] = st;
}

/* The put starts 200 ms after the kernel, by which time the host that
 * launched it is inside its cudaMemcpy: both ranks' copies are then issued
 * while their hosts wait there. */
__global__ void put_wait(gpuport_port_channel_dev_t ch, int *rc)
{
    int st;

    after_200ms();
    st = gpuport_put_with_signal(&ch, 0, 0, BYTES);
    rc[0] = st ? st : gpuport_wait(&ch);
}

/* bytes of dst that are not what `from` put in `phase` */
static int wrong_bytes_n(const unsigned char *dst, int from, int phase, unsigned n)
{
    unsigned char *h = (unsigned char *)malloc(n);
    int bad = 0;

    CUDA_CHECK(cudaMemcpy(h, dst, n, cudaMemcpyDeviceToHost));
    for (unsigned i = 0; i < n; i++)
        bad += h[i] != pat(from, phase, (int)i);
    free(h);
    return bad;
}

static int wrong_bytes(const unsigned char *dst, int from, int phase)
{
    return wrong_bytes_n(dst, from, phase, BYTES);
}

/* The big exchange in the held pattern on a new channel between big
 * regions; must_time_out: cudaMalloc memory without the relay. */
static void big_exchange(gpuport_comm_t comm, gpuport_bootstrap_t *bs, int rank, int *rc_d,
                         int must_time_out)
{
    void *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
    int rc = -1, bad;

    gpu_region_alloc(comm, BIG, &src);
    gpu_region_alloc(comm, BIG, &dst);
    CHECK_OK(gpuport_mem_register(comm, src, BIG, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, BIG, &mdst));
    CUDA_CHECK(cudaMemset(dst, 0, BIG));
    fill<<<64, 256>>>((unsigned char *)src, rank, 2, BIG);
    CUDA_CHECK(cudaMemset(rc_d, 0xff, sizeof(int)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    CHECK_OK(gpuport_channel_device(ch, &dev));
    put_get<<<1, 1>>>(dev, rc_d);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(&rc, rc_d, sizeof(rc), cudaMemcpyDeviceToHost)); /* held */
    CUDA_CHECK(cudaDeviceSynchronize());
    if (must_time_out) {
        /* the side whose wait ends first closes its channel: the other's
         * wait may then end on that */
        CHECK_MSG(rc == GPUPORT_ERR_TIMEOUT || rc == GPUPORT_ERR_CLOSED || rc == GPUPORT_ERR_PEER,
                  "big, held, no relay: the kernel returned %d (%s), expected "
                  "GPUPORT_ERR_TIMEOUT (or the peer's close or failure after its own)", rc,
                  gpuport_status_string((gpuport_status_t)rc));
        printf("rank %d: big: held without the relay: ended with %s, as it must\n", rank,
               gpuport_status_string((gpuport_status_t)rc));
        (void)gpuport_channel_flush(ch);
    } else {
        CHECK_MSG(rc == GPUPORT_OK, "big, held: the kernel returned %d (%s)", rc,
                  gpuport_status_string((gpuport_status_t)rc));
        CHECK_OK(gpuport_channel_flush(ch));
        bad = wrong_bytes_n((unsigned char *)dst, 1 - rank, 2, BIG);
        CHECK_MSG(bad == 0, "big, held: %d of %u bytes put are wrong", bad, BIG);
        bad = wrong_bytes_n((unsigned char *)src + (BIG - GOT), rank, 2, GOT);
        CHECK_MSG(bad == 0, "big, held: %d of %u bytes got back are wrong", bad, GOT);
        printf("rank %d: big: %u bytes put and %u got back while the host sat in cudaMemcpy, "
               "every byte right\n", rank, BIG, GOT);
    }
    gpuport_status_t dst_st = gpuport_channel_destroy(ch);
    CHECK_MSG(dst_st == GPUPORT_OK || must_time_out, "big: destroy returned %d", (int)dst_st);
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(bs->barrier(bs->ctx)); /* the peer's mappings of both are closed */
    gpu_region_free(dst);
    gpu_region_free(src);
}

/* One exchange on a new channel (*ch_p, kept: a new one for each phase,
 * so that a late signal of the first cannot count for the second); returns
 * the kernel's status. phase 1 synchronizes before cudaMemcpy. */
static int exchange(gpuport_comm_t comm, int rank, void *src, void *dst, gpuport_mem_t msrc,
                    gpuport_mem_t mdst, int *rc_d, int phase, gpuport_channel_t *ch_p)
{
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
    int rc = -1;

    CUDA_CHECK(cudaMemset(dst, 0, BYTES));
    fill<<<1, 256>>>((unsigned char *)src, rank, phase, BYTES);
    CUDA_CHECK(cudaMemset(rc_d, 0xff, sizeof(int)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch)); /* pairwise: both ready */
    CHECK_OK(gpuport_channel_device(ch, &dev));
    put_wait<<<1, 1>>>(dev, rc_d);
    CUDA_CHECK(cudaGetLastError());
    if (phase == 1)
        CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&rc, rc_d, sizeof(rc), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK_OK(gpuport_channel_flush(ch)); /* this rank's copy, late or not, is done */
    *ch_p = ch;
    return rc;
}

int main(void)
{
    gpuport_bootstrap_t bs;
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch[2];
    void *src, *dst;
    int *rc_d, rank, rc, bad, legacy, relay;
    pid_t child;
    const char *log, *relay_env;

    setenv("GPUPORT_TIMEOUT_MS", "2000", 1);
    setenv("GPUPORT_TRANSPORT", "cuda_ipc", 0);
    if (!getenv("GPUPORT_TEST_MEM"))
        setenv("GPUPORT_TEST_MEM", "cudamalloc", 1);
    legacy = gpu_mem_kind() == GPU_MEM_CUDAMALLOC;
    /* cudaMalloc over cuda_ipc relays unless GPUPORT_CUDA_IPC_RELAY=0 */
    relay_env = getenv("GPUPORT_CUDA_IPC_RELAY");
    relay = legacy && strcmp(getenv("GPUPORT_TRANSPORT"), "cuda_ipc") == 0 &&
            !(relay_env && strcmp(relay_env, "0") == 0);
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL; /* the pair's socket outlives the communicator: a barrier after it */
    if (rank == 0)
        printf("test_gpu_held: %s over %s%s\n", gpu_mem_kind_desc(gpu_mem_kind()),
               getenv("GPUPORT_TRANSPORT"), relay ? ", by the relay" : "");
    CHECK_OK(gpuport_comm_create(&bs, &comm));
    gpu_region_alloc(comm, BYTES, &src);
    gpu_region_alloc(comm, BYTES, &dst);
    CUDA_CHECK(cudaMalloc((void **)&rc_d, sizeof(int)));
    CHECK_OK(gpuport_mem_register(comm, src, BYTES, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, BYTES, &mdst));

    capture_begin();
    rc = exchange(comm, rank, src, dst, msrc, mdst, rc_d, 0, &ch[0]);
    log = capture_end();
    if (!legacy || relay) {
        CHECK_MSG(rc == GPUPORT_OK, "held, %s: the kernel's wait returned %d (%s); memory mapped "
                  "for the device, and cudaMalloc memory by the relay, must not be held",
                  gpu_mem_kind_desc(gpu_mem_kind()), rc,
                  gpuport_status_string((gpuport_status_t)rc));
        bad = wrong_bytes((unsigned char *)dst, 1 - rank, 0);
        CHECK_MSG(bad == 0, "held: %d of %d bytes are wrong", bad, BYTES);
        CHECK_MSG(count_of(log, WARNING) == 0, "held: unexpected warning:\n%s", log);
        printf("rank %d: held: not held: %d bytes arrived while the host sat in cudaMemcpy, no "
               "warning\n", rank, BYTES);
    } else if (rc == GPUPORT_OK) {
        bad = wrong_bytes((unsigned char *)dst, 1 - rank, 0);
        CHECK_MSG(bad == 0, "held: the exchange succeeded but %d of %d bytes are wrong", bad,
                  BYTES);
        printf("rank %d: NOTE: held: the exchange succeeded (the copies were not held: this "
               "driver does not hold them?); bytes checked, the warning not exercised\n",
               rank);
    } else {
        CHECK_MSG(rc == GPUPORT_ERR_TIMEOUT, "held: the kernel's wait returned %d (%s), "
                  "expected GPUPORT_ERR_TIMEOUT", rc, gpuport_status_string((gpuport_status_t)rc));
        CHECK_MSG(count_of(log, WARNING) == 1 && count_of(log, "gpuport_mem_alloc_device") >= 1 &&
                      count_of(log, "Synchronize the kernel's stream") == 1,
                  "held: the wait timed out but the log does not carry the flusher warning "
                  "once:\n%s", log);
        printf("rank %d: held: the wait timed out after 2 s and the flusher's warning was "
               "logged once\n", rank);
    }

    capture_begin();
    rc = exchange(comm, rank, src, dst, msrc, mdst, rc_d, 1, &ch[1]);
    log = capture_end();
    CHECK_MSG(rc == GPUPORT_OK, "synchronized: the kernel returned %d (%s)", rc,
              gpuport_status_string((gpuport_status_t)rc));
    bad = wrong_bytes((unsigned char *)dst, 1 - rank, 1);
    CHECK_MSG(bad == 0, "synchronized: %d of %d bytes are wrong", bad, BYTES);
    CHECK_MSG(count_of(log, WARNING) == 0, "synchronized: unexpected warning:\n%s", log);
    printf("rank %d: synchronized: %d bytes arrived, no warning\n", rank, BYTES);

    CHECK_OK(gpuport_channel_destroy(ch[1]));
    CHECK_OK(gpuport_channel_destroy(ch[0]));
    if (strcmp(getenv("GPUPORT_TRANSPORT"), "cuda_ipc") == 0)
        big_exchange(comm, &bs, rank, rc_d, legacy && !relay);
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK_OK(bs.barrier(bs.ctx)); /* the peer's imports are gone too */
    CUDA_CHECK(cudaFree(rc_d));
    gpu_region_free(dst);
    gpu_region_free(src);
    if (rank == 0)
        printf("PASS held\n");
    gpu_pair_join(rank, child, 0);
    return 0;
}
