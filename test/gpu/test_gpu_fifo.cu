/*
 * The device FIFO on its own: many CUDA threads (more than the FIFO has
 * slots) push triggers with gpuport_dev_fifo_push into pinned host memory
 * while the host consumes them with the proxy's own consumer
 * (proxy_consume_fifo, through fifo_consumer.c). Every trigger must arrive
 * exactly once, each thread's in order, and EXT pairs (sizes > 4 GiB,
 * offsets > 256 GiB) contiguous and exact.
 * Pushers that give up hold nothing (run_quitters): with the FIFO full and
 * no consumer, 1, size, 2 x size and 4 x size pushers with a tiny time
 * limit all time out; then the consumer starts and other kernels push:
 * every later trigger arrives, none of the quitters', and their channel is
 * failed. run_mixed: give-ups spread over time among successful pushes,
 * the consumer stopping and going again.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "fifo_consumer.h"
#include "gpu_check.h"
#include "gpuport/gpuport_device.h"

#define PER_THREAD 64

/* whether op i of pushing thread tid is an EXT pair (two slots) */
__host__ __device__ static inline bool is_ext(uint32_t tid, uint32_t i)
{
    return (i + tid) % 5 == 4;
}

/* the EXT pairs that nthreads pushing threads push */
static uint64_t ext_pairs_of(uint32_t nthreads)
{
    uint64_t n = 0;
    for (uint32_t t = 0; t < nthreads; t++)
        for (uint32_t i = 0; i < PER_THREAD; i++)
            n += is_ext(t, i);
    return n;
}

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
        /* every 5th op of a thread is an EXT pair, at a different i in
         * neighbouring lanes: a warp's one push holds runs of 1 and of 2 */
        uint64_t big = is_ext(tid, i) ? (1ull << 40) : 0;
        uint64_t size = big ? (5ull << 30) : i + 1;
        if (gpuport_trigger_needs_ext(big + tid, big + i, size))
            gpuport_trigger_encode_ext(&t[n++], tid & 0x7fff, big + tid, big + i, size);
        gpuport_trigger_encode(&t[n++], GPUPORT_OP_PUT, tid & 0x7fff, big + tid, big + i, size);
        if (gpuport_dev_fifo_push(&ch, t, n, &pos) != GPUPORT_OK)
            atomicAdd(errors, 1);
    }
}

/* each thread pushes one put on its handle's channel */
__global__ void one_each(gpuport_port_channel_dev_t ch, int *errors)
{
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpuport_trigger_t t;
    uint64_t pos;

    gpuport_trigger_encode(&t, GPUPORT_OP_PUT, ch.id, tid, tid, 8);
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
            is_ext(tid, i) != (used == 2)) {
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

/* A device FIFO as gpu.c lays it out, in memory of this test's own, and
 * the proxy's consumer over it. */
typedef struct dfifo {
    void *host, *host_d, *states, *states_d;
    unsigned long long *dmem;
    fifo_consumer_t *consumer;
    gpuport_port_channel_dev_t ch;
} dfifo_t;

static void dfifo_open(dfifo_t *q, uint32_t size, uint32_t nchan)
{
    size_t host_len = 128 + (size_t)size * sizeof(gpuport_trigger_t);
    size_t states_len = fifo_consumer_states_bytes(nchan);

    CUDA_CHECK(cudaHostAlloc(&q->host, host_len, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(q->host, 0, host_len);
    CUDA_CHECK(cudaHostAlloc(&q->states, states_len, cudaHostAllocMapped | cudaHostAllocPortable));
    CUDA_CHECK(cudaHostGetDevicePointer(&q->host_d, q->host, 0));
    CUDA_CHECK(cudaHostGetDevicePointer(&q->states_d, q->states, 0));
    CUDA_CHECK(cudaMalloc(&q->dmem, 192));
    CUDA_CHECK(cudaMemset(q->dmem, 0, 192));
    q->consumer = fifo_consumer_create((char *)q->host + 128, q->host, (char *)q->host + 64,
                                       q->states, size, nchan);
    CHECK(q->consumer != NULL);
    memset(&q->ch, 0, sizeof(q->ch));
    q->ch.layout = GPUPORT_CHANNEL_DEV_LAYOUT;
    q->ch.fifo.slots = (gpuport_trigger_t *)((char *)q->host_d + 128);
    q->ch.fifo.tail = (const volatile uint64_t *)q->host_d;
    q->ch.fifo.head = q->dmem;
    q->ch.fifo.tail_cache = q->dmem + 8;
    q->ch.fifo.poller = (unsigned int *)(q->dmem + 9);
    q->ch.fifo.granted = q->dmem + 16;
    q->ch.fifo.gave_up_any = (uint32_t *)((char *)q->host_d + 64);
    q->ch.fifo.size = size;
    q->ch.fifo.log2_size = (uint32_t)__builtin_ctz(size);
    q->ch.timeout_ns = 30ull * 1000000000ull;
    /* the library's defaults (GPUPORT_DEV_SPIN, GPUPORT_DEV_BACKOFF_NS):
     * waiters pause between polls as in a real handle */
    q->ch.spin = 64;
    q->ch.backoff_ns = 1000;
}

/* a handle of channel id (its give-up word) with time limit timeout_ns */
static gpuport_port_channel_dev_t dfifo_channel(const dfifo_t *q, uint32_t id, uint64_t timeout_ns)
{
    gpuport_port_channel_dev_t ch = q->ch;
    ch.id = id;
    ch.gave_up = (int32_t *)((char *)q->states_d + fifo_consumer_gave_up_offset(id));
    ch.timeout_ns = timeout_ns;
    return ch;
}

static void dfifo_close(dfifo_t *q)
{
    fifo_consumer_destroy(q->consumer);
    cudaFree(q->dmem);
    cudaFreeHost(q->states);
    cudaFreeHost(q->host);
}

static void run(uint32_t fifo_size, uint32_t blocks, uint32_t threads)
{
    uint32_t nthreads = blocks * threads;
    int *errors, herrors = 0;
    dfifo_t q;
    std::vector<uint32_t> next(nthreads, 0);
    consumer_t c;
    pthread_t thr;

    dfifo_open(&q, fifo_size, nthreads < 128 ? 128 : nthreads);
    CUDA_CHECK(cudaMalloc(&errors, sizeof(int)));
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
    c.fifo = q.consumer;
    c.nthreads = nthreads;
    c.next = &next;
    c.failures = 0;
    c.ext_pairs = 0;
    /* an EXT pair takes two slots */
    c.expect_triggers = (uint64_t)nthreads * PER_THREAD + ext_pairs_of(nthreads);
    CHECK(pthread_create(&thr, NULL, consume, &c) == 0);
    pusher<<<blocks, threads>>>(dfifo_channel(&q, 0, 30ull * 1000000000ull), errors);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    pthread_join(thr, NULL);
    CUDA_CHECK(cudaMemcpy(&herrors, errors, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(herrors == 0, "%d device pushes failed", herrors);
    CHECK_MSG(c.failures == 0, "%d triggers wrong or out of order", c.failures);
    for (uint32_t t = 0; t < nthreads; t++)
        CHECK_MSG(next[t] == PER_THREAD, "thread %u delivered %u of %d", t, next[t], PER_THREAD);
    CHECK(c.ext_pairs == ext_pairs_of(nthreads));
    printf("PASS fifo %u slots, %u pushers x %d triggers (%llu EXT pairs)\n", fifo_size, nthreads,
           PER_THREAD, (unsigned long long)c.ext_pairs);
    cudaFree(errors);
    dfifo_close(&q);
}

/* Pops until `want` puts came or nothing came for 10 s (a hole). */
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

#define QUIT_CHAN 99u

static void run_quitters(uint32_t quitters)
{
    const uint32_t size = 64, later = 4096;
    int *errors, herrors = 0, wrong = 0;
    dfifo_t q;
    uint64_t got;
    gpuport_op_desc_t d;

    dfifo_open(&q, size, 128);
    CUDA_CHECK(cudaMalloc(&errors, sizeof(int)));
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
    /* fill the ring; nobody consumes */
    one_each<<<1, size>>>(dfifo_channel(&q, 1, 30ull * 1000000000ull), errors);
    CUDA_CHECK(cudaDeviceSynchronize());
    /* quitters: a 1 ms limit on a full ring, blocks of at most 64 */
    one_each<<<(quitters + 63) / 64, quitters < 64 ? quitters : 64>>>(
        dfifo_channel(&q, QUIT_CHAN, 1000000ull), errors);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&herrors, errors, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(herrors == (int)quitters, "%d of %u quitters timed out", herrors, quitters);
    CUDA_CHECK(cudaMemset(errors, 0, sizeof(int)));
    /* the first kernel's triggers, then later pushers' beside a consumer */
    got = drain(q.consumer, size, 1, &wrong);
    CHECK_MSG(got == size && wrong == 0, "%llu of the %u first triggers (%d wrong)",
              (unsigned long long)got, size, wrong);
    CHECK_MSG(fifo_consumer_status(q.consumer, QUIT_CHAN) == GPUPORT_ERR_TIMEOUT,
              "the quitters' channel is %d, not failed with GPUPORT_ERR_TIMEOUT",
              fifo_consumer_status(q.consumer, QUIT_CHAN));
    one_each<<<later / 128, 128>>>(dfifo_channel(&q, 2, 30ull * 1000000000ull), errors);
    CUDA_CHECK(cudaGetLastError());
    got = drain(q.consumer, later, 2, &wrong);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&herrors, errors, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(herrors == 0, "%d later pushes failed", herrors);
    CHECK_MSG(got == later && wrong == 0,
              "%llu of %u later triggers arrived (%d of another channel): the consumer waited "
              "at a slot nobody wrote",
              (unsigned long long)got, later, wrong);
    /* a push of the failed channel goes into the FIFO, but is not carried out */
    one_each<<<1, 1>>>(dfifo_channel(&q, QUIT_CHAN, 30ull * 1000000000ull), errors);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 1000; i++)
        CHECK_MSG(fifo_consumer_pop(q.consumer, &d) == 0,
                  "a put of channel %u was carried out after its channel gave up", d.channel);
    printf("PASS %u quitters on a full %u-slot FIFO held nothing; %u later triggers arrived\n",
           quitters, size, later);
    cudaFree(errors);
    dfifo_close(&q);
}

/* Each thread pushes `per` puts on its own channel (tid + 1, long limit),
 * and every 7th time one on MIXED_QUIT with a 50 us limit: a channel above
 * every thread's (QUIT_CHAN, 99, was thread 98's own, whose puts were then
 * counted as the quitting channel's). */
#define MIXED_QUIT 1000u
__global__ void mixed_pusher(gpuport_port_channel_dev_t ch, gpuport_port_channel_dev_t quit,
                             uint32_t per, int *ok, int *timeouts, int *errors)
{
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    ch.id = tid + 1;
    for (uint32_t i = 0; i < per; i++) {
        gpuport_trigger_t t;
        uint64_t pos;
        int rc;
        if (i % 7 == 3) {
            gpuport_trigger_encode(&t, GPUPORT_OP_PUT, MIXED_QUIT, tid, i, 8);
            rc = gpuport_dev_fifo_push(&quit, &t, 1, &pos);
            atomicAdd(rc == GPUPORT_OK ? ok : rc == GPUPORT_ERR_TIMEOUT ? timeouts : errors, 1);
        } else {
            gpuport_trigger_encode(&t, GPUPORT_OP_PUT, ch.id, tid, i, 8);
            if (gpuport_dev_fifo_push(&ch, &t, 1, &pos) != GPUPORT_OK)
                atomicAdd(errors, 1);
        }
    }
}

static void run_mixed(void)
{
    const uint32_t size = 64, blocks = 8, threads = 64, per = 70, nthreads = blocks * threads;
    int *counts, h[3];
    dfifo_t q;
    std::vector<uint32_t> next(nthreads, 0);
    uint64_t quit_puts = 0, got = 0, bad = 0;
    struct timespec t0, now, start;
    cudaStream_t s;

    dfifo_open(&q, size, 1024);
    CUDA_CHECK(cudaMalloc(&counts, 3 * sizeof(int)));
    CUDA_CHECK(cudaMemset(counts, 0, 3 * sizeof(int)));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    mixed_pusher<<<blocks, threads, 0, s>>>(dfifo_channel(&q, 1, 30ull * 1000000000ull),
                                            dfifo_channel(&q, MIXED_QUIT, 50000ull), per,
                                            counts, counts + 1, counts + 2);
    CUDA_CHECK(cudaGetLastError());
    /* the consumer: 1 ms on, 2 ms off, until the kernel ends and the FIFO
     * is empty; after 40 s it says how far the pushers got, and fails */
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int done = cudaStreamQuery(s) == cudaSuccess;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!done && now.tv_sec - start.tv_sec > 40) {
            uint32_t least = per, at = 0;
            for (uint32_t t = 0; t < nthreads; t++)
                if (next[t] < least)
                    least = next[t], at = t;
            CHECK_MSG(0, "mixed: the pushers' kernel still runs after 40 s: %llu triggers taken "
                      "(%llu of the quitting channel), thread %u has had %u of its %u puts taken",
                      (unsigned long long)got, (unsigned long long)quit_puts, at, least,
                      per - per / 7);
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            gpuport_op_desc_t d;
            clock_gettime(CLOCK_MONOTONIC, &now); /* also when the FIFO is empty */
            if (fifo_consumer_pop(q.consumer, &d) == 0)
                continue;
            got++;
            if (d.channel == MIXED_QUIT) {
                quit_puts++;
            } else if (d.channel < 1 || d.channel > nthreads || d.src_off != d.channel - 1 ||
                       d.dst_off != next[d.channel - 1] + (next[d.channel - 1] + 3) / 6) {
                bad++;
            } else {
                next[d.channel - 1]++;
            }
        } while ((now.tv_sec - t0.tv_sec) * 1000000000ll + (now.tv_nsec - t0.tv_nsec) < 1000000);
        if (done)
            break;
        usleep(2000);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaMemcpy(h, counts, 3 * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK_MSG(h[2] == 0, "%d pushes with a 30 s limit failed", h[2]);
    CHECK_MSG(h[0] + h[1] == (int)(nthreads * (per / 7)), "%d pushed + %d timed out of %u",
              h[0], h[1], nthreads * (per / 7));
    CHECK_MSG(bad == 0, "%llu puts wrong or out of order", (unsigned long long)bad);
    for (uint32_t t = 0; t < nthreads; t++)
        CHECK_MSG(next[t] == per - per / 7, "thread %u: %u of %u puts arrived", t, next[t],
                  per - per / 7);
    CHECK_MSG(quit_puts <= (uint64_t)h[0], "%llu puts of the quitting channel, %d pushed",
              (unsigned long long)quit_puts, h[0]);
    if (h[1])
        CHECK(fifo_consumer_status(q.consumer, MIXED_QUIT) == GPUPORT_ERR_TIMEOUT);
    printf("PASS mixed: %u pushers, %d give-ups spread over time, %llu puts carried out in "
           "order, %llu of the quitting channel's before it failed\n",
           nthreads, h[1], (unsigned long long)got, (unsigned long long)quit_puts);
    CHECK_MSG(h[1] > 0, "no push gave up: the case was not exercised");
    cudaStreamDestroy(s);
    cudaFree(counts);
    dfifo_close(&q);
}

int main(void)
{
    gpu_require(1);
    run(1024, 4, 128);   /* fewer pushers than slots */
    run(64, 32, 256);    /* 8192 pushers, 64 slots */
    run(4, 8, 32);       /* extreme back-pressure */
    run_quitters(1);
    run_quitters(64);    /* size */
    run_quitters(128);   /* 2 x size */
    run_quitters(256);   /* 4 x size */
    run_mixed();
    return 0;
}
