/*
 * The device FIFO on its own: many CUDA threads (more than the FIFO has
 * slots) push triggers with gpuport_dev_fifo_push into pinned host memory
 * while the host consumes them with the proxy's own peek/advance code. Every
 * trigger must arrive exactly once, each thread's in order, and EXT pairs
 * (sizes > 4 GiB, offsets > 256 GiB) contiguous and exact.
 * A pusher that gives up leaves no hole (run_quitters): with the FIFO full
 * and no consumer, pushers with a tiny time limit all time out, marking
 * their reserved slots void; then the consumer (the proxy's code) starts
 * and other kernels push: it skips exactly the quitters' slots, every one
 * of the later triggers arrives, none of the quitters' does, and it never
 * waits at a slot that nobody writes.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "fifo_consumer.h"
#include "gpu_check.h"
#include "gpuport/gpuport_device.h"

#define PER_THREAD 64

__global__ void pusher(gpuport_port_channel_dev_t ch, int *errors)
{
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    /* each thread a channel of its own: the FIFO takes a handle's own
     * channel's triggers only */
    ch.id = tid & 0x7fff;
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        gpuport_trigger_t t[2];
        uint64_t pos;
        uint32_t n = 0;
        /* every 5th op of a thread is an EXT pair */
        uint64_t big = (i % 5 == 4) ? (1ull << 40) : 0;
        uint64_t size = big ? (5ull << 30) : i + 1;
        if (gpuport_trigger_needs_ext(big + tid, big + i, size))
            gpuport_trigger_encode_ext(&t[n++], tid & 0x7fff, big + tid, big + i, size);
        gpuport_trigger_encode(&t[n++], GPUPORT_OP_PUT, tid & 0x7fff, big + tid, big + i, size);
        if (gpuport_dev_fifo_push(&ch, t, n, &pos) != GPUPORT_OK)
            atomicAdd(errors, 1);
    }
}

/* each thread pushes one put on `channel` (the quitters: 99) */
__global__ void one_each(gpuport_port_channel_dev_t ch, uint32_t channel, int *errors)
{
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpuport_trigger_t t;
    uint64_t pos;

    ch.id = channel;
    gpuport_trigger_encode(&t, GPUPORT_OP_PUT, channel, tid, tid, 8);
    if (gpuport_dev_fifo_push(&ch, &t, 1, &pos) != GPUPORT_OK)
        atomicAdd(errors, 1);
}

typedef struct consumer {
    fifo_consumer_t *fifo;
    uint64_t expect_triggers;
    uint32_t nthreads;
    std::vector<uint32_t> *next; /* per pushing thread: next i expected */
    int failures;
    uint64_t ext_pairs;
} consumer_t;

static void *consume(void *arg)
{
    consumer_t *c = (consumer_t *)arg;
    uint64_t got = 0;
    while (got < c->expect_triggers) {
        gpuport_op_desc_t d;
        uint32_t used = fifo_consumer_pop(c->fifo, &d);
        if (used == 0)
            continue;
        if (used == 2)
            c->ext_pairs++;
        uint64_t big = used == 2 ? (1ull << 40) : 0;
        uint32_t tid = (uint32_t)(d.src_off - big), i = (uint32_t)(d.dst_off - big);
        if (d.op != GPUPORT_OP_PUT || tid >= c->nthreads || (tid & 0x7fff) != d.channel ||
            (*c->next)[tid] != i || d.size != (big ? (5ull << 30) : i + 1) ||
            (i % 5 == 4) != (used == 2)) {
            if (c->failures++ < 5)
                fprintf(stderr, "bad trigger: op %u chan %u src %llx dst %llx size %llu (tid %u "
                        "expected i %u)\n", d.op, d.channel, (unsigned long long)d.src_off,
                        (unsigned long long)d.dst_off, (unsigned long long)d.size, tid,
                        tid < c->nthreads ? (*c->next)[tid] : 0);
        } else {
            (*c->next)[tid]++;
        }
        got += used;
    }
    return NULL;
}

static void run(uint32_t fifo_size, uint32_t blocks, uint32_t threads)
{
    uint32_t nthreads = blocks * threads;
    size_t host_len = 128 + 2 * fifo_size * sizeof(gpuport_trigger_t); /* + void marks */
    void *host;
    unsigned long long *dmem;
    int *errors, herrors = 0;
    fifo_consumer_t *fifo;
    gpuport_port_channel_dev_t ch;
    std::vector<uint32_t> next(nthreads, 0);
    consumer_t c;
    pthread_t thr;

    CUDA_CHECK(cudaHostAlloc(&host, host_len, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(host, 0, host_len);
    CUDA_CHECK(cudaMalloc(&dmem, 128));
    CUDA_CHECK(cudaMemset(dmem, 0, 128));
    CUDA_CHECK(cudaMalloc(&errors, sizeof(int)));
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
    fifo = fifo_consumer_create((char *)host + 128, host, fifo_size);
    CHECK(fifo != NULL);

    memset(&ch, 0, sizeof(ch));
    ch.layout = GPUPORT_CHANNEL_DEV_LAYOUT;
    void *host_d;
    CUDA_CHECK(cudaHostGetDevicePointer(&host_d, host, 0));
    ch.fifo.slots = (gpuport_trigger_t *)((char *)host_d + 128);
    ch.fifo.tail = (const volatile uint64_t *)host_d;
    ch.fifo.head = dmem;
    ch.fifo.tail_cache = dmem + 8;
    ch.fifo.size = fifo_size;
    ch.fifo.log2_size = (uint32_t)__builtin_ctz(fifo_size);
    ch.timeout_ns = 30ull * 1000000000ull;

    c.fifo = fifo;
    c.nthreads = nthreads;
    c.next = &next;
    c.failures = 0;
    c.ext_pairs = 0;
    /* an EXT pair takes two slots */
    c.expect_triggers = (uint64_t)nthreads * (PER_THREAD + PER_THREAD / 5);
    CHECK(pthread_create(&thr, NULL, consume, &c) == 0);
    pusher<<<blocks, threads>>>(ch, errors);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    pthread_join(thr, NULL);
    CUDA_CHECK(cudaMemcpy(&herrors, errors, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(herrors == 0, "%d device pushes failed", herrors);
    CHECK_MSG(c.failures == 0, "%d triggers wrong or out of order", c.failures);
    for (uint32_t t = 0; t < nthreads; t++)
        CHECK_MSG(next[t] == PER_THREAD, "thread %u delivered %u of %d", t, next[t], PER_THREAD);
    CHECK(c.ext_pairs == (uint64_t)nthreads * (PER_THREAD / 5));
    printf("PASS fifo %u slots, %u pushers x %d triggers (%llu EXT pairs)\n", fifo_size, nthreads,
           PER_THREAD, (unsigned long long)c.ext_pairs);
    fifo_consumer_destroy(fifo);
    cudaFree(errors);
    cudaFree(dmem);
    cudaFreeHost(host);
}

/* Pops until `want` triggers came or nothing came for 10 s (a hole). */
static uint64_t drain(fifo_consumer_t *fifo, uint64_t want, uint32_t channel, int *wrong)
{
    uint64_t got = 0;
    struct timespec last, now;

    clock_gettime(CLOCK_MONOTONIC, &last);
    while (got < want) {
        gpuport_op_desc_t d;
        if (fifo_consumer_pop(fifo, &d) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - last.tv_sec > 10)
                break;
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &last);
        if (d.channel != channel)
            (*wrong)++;
        got++;
    }
    return got;
}

static void run_quitters(void)
{
    /* quitters: one block of them (a launch of quitters / 128 blocks once
     * launched none, and the check below failed on "0 of 64 timed out") */
    const uint32_t size = 64, quitters = 64, later = 4096;
    size_t host_len = 128 + 2 * size * sizeof(gpuport_trigger_t); /* + void marks */
    void *host, *host_d;
    unsigned long long *dmem;
    int *errors, herrors = 0, wrong = 0;
    fifo_consumer_t *fifo;
    gpuport_port_channel_dev_t ch;
    uint64_t got;

    CUDA_CHECK(cudaHostAlloc(&host, host_len, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(host, 0, host_len);
    CUDA_CHECK(cudaMalloc(&dmem, 128));
    CUDA_CHECK(cudaMemset(dmem, 0, 128));
    CUDA_CHECK(cudaMalloc(&errors, sizeof(int)));
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
    fifo = fifo_consumer_create((char *)host + 128, host, size);
    CHECK(fifo != NULL);
    memset(&ch, 0, sizeof(ch));
    ch.layout = GPUPORT_CHANNEL_DEV_LAYOUT;
    CUDA_CHECK(cudaHostGetDevicePointer(&host_d, host, 0));
    ch.fifo.slots = (gpuport_trigger_t *)((char *)host_d + 128);
    ch.fifo.tail = (const volatile uint64_t *)host_d;
    ch.fifo.head = dmem;
    ch.fifo.tail_cache = dmem + 8;
    ch.fifo.size = size;
    ch.fifo.log2_size = (uint32_t)__builtin_ctz(size);
    ch.timeout_ns = 30ull * 1000000000ull;

    /* fill the ring; nobody consumes */
    one_each<<<1, size>>>(ch, 1, errors);
    CUDA_CHECK(cudaDeviceSynchronize());
    /* quitters: a 1 ms limit on a full ring */
    ch.timeout_ns = 1000000ull;
    one_each<<<1, quitters>>>(ch, 99, errors); /* one block: quitters <= 1024 */
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&herrors, errors, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(herrors == (int)quitters, "%d of %u quitters timed out", herrors, quitters);
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
    /* the first kernel's triggers, then later pushers' beside a consumer */
    got = drain(fifo, size, 1, &wrong);
    CHECK_MSG(got == size && wrong == 0, "%llu of the %u first triggers (%d wrong)",
              (unsigned long long)got, size, wrong);
    ch.timeout_ns = 30ull * 1000000000ull;
    one_each<<<later / 128, 128>>>(ch, 2, errors);
    CUDA_CHECK(cudaGetLastError());
    got = drain(fifo, later, 2, &wrong);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&herrors, errors, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(herrors == 0, "%d later pushes failed", herrors);
    CHECK_MSG(got == later && wrong == 0,
              "%llu of %u later triggers arrived (%d of another channel): the consumer waited "
              "at a slot nobody wrote",
              (unsigned long long)got, later, wrong);
    CHECK_MSG(fifo_consumer_voids(fifo) == quitters, "%llu slots skipped as given up, %u quitters",
              (unsigned long long)fifo_consumer_voids(fifo), quitters);
    printf("PASS %u quitters on a full %u-slot FIFO left no hole; %u later triggers arrived\n",
           quitters, size, later);
    fifo_consumer_destroy(fifo);
    cudaFree(errors);
    cudaFree(dmem);
    cudaFreeHost(host);
}

int main(void)
{
    gpu_require(1);
    run(1024, 4, 128);   /* fewer pushers than slots */
    run(64, 32, 256);    /* 8192 pushers, 64 slots */
    run(4, 8, 32);       /* extreme back-pressure */
    run_quitters();
    return 0;
}
