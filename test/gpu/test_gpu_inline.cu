/*
 * Host operations their callers carry out (GPUPORT_HOST_INLINE) beside a
 * kernel's pushes and the proxy's work, on one shm channel (or tcp, with
 * GPUPORT_TRANSPORT=tcp: there the callers send operations with a signal
 * themselves, the rest is the proxy's) of a GPU-mode
 * communicator (two processes, fork + socketpair; host memory from
 * gpuport_mem_alloc at both ends). Each round, rank 0 at once:
 *  - launches a kernel that puts 256 pieces of 64 B into the device window
 *    of rank 1's destination, a put_with_signal every 32, then flushes;
 *  - from the host, 64 random operations into the host window: puts of
 *    1 B .. 12 KiB (4 KiB and more at the flusher: GPUPORT_SHM_ASYNC_MIN=4k),
 *    put_values, signals, the later of two writes to the same bytes
 *    winning; those behind a flusher's put or a kernel's work in flight go
 *    through the proxy, the others are the caller's;
 *  - then a put_with_signal of the round's number and a host flush.
 * Rank 1 replays the same plan (the same seed), so it knows the window's
 * final bytes and how many signals come; it waits for all of them, then
 * compares both windows and the number byte for byte. With the inline path
 * on, host operations must have gone both ways (the callers' and the
 * proxy's) and the kernel's too; with it off, none is the callers'.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"

#define DEV_OFF 0
#define DEV_PIECES 256
#define DEV_PIECE 64
#define DEV_EVERY 32 /* a put_with_signal every 32 pieces */
#define HOST_OFF (64u << 10)
#define WINDOW (64u << 10)
#define MAXPUT 12288
#define OPS 64
#define SRC_HOST (128u << 10) /* op i's source range: SRC_HOST + i * MAXPUT */
#define MARK (1u << 20)
#define REGION (MARK + 64)
#define ROUNDS 40

__global__ void dev_puts(gpuport_port_channel_dev_t ch, int *rc)
{
    int st = 0;
    for (int i = 0; i < DEV_PIECES && !st; i++) {
        uint64_t off = DEV_OFF + (uint64_t)i * DEV_PIECE;
        st = (i + 1) % DEV_EVERY == 0 ? gpuport_put_with_signal(&ch, off, off, DEV_PIECE)
                                      : gpuport_put(&ch, off, off, DEV_PIECE);
    }
    if (!st)
        st = gpuport_flush(&ch);
    *rc = st;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static unsigned char dev_byte(int round, uint64_t i)
{
    return (unsigned char)(round * 31 + i * 7 + 1);
}

/* One round's host plan: carried out on ch when ch is not NULL, replayed
 * into shadow (the window's bytes) either way; returns its signals. */
static int host_round(gpuport_channel_t ch, unsigned char *src, unsigned char *shadow,
                      uint64_t *seed, int round)
{
    unsigned char piece[MAXPUT];
    int sigs = 0;

    for (int i = 0; i < OPS; i++) {
        uint64_t what = rng(seed) % 16;
        if (what < 9) {
            uint64_t size = 1 + rng(seed) % (what < 3 ? MAXPUT : 256);
            uint64_t dst = rng(seed) % (WINDOW - size + 1);
            uint64_t so = SRC_HOST + (uint64_t)i * MAXPUT;
            for (uint64_t b = 0; b < size; b++)
                piece[b] = (unsigned char)(round * 7 + i + b * 3);
            if (ch) {
                memcpy(src + so, piece, size);
                CHECK_OK(what == 8 ? gpuport_channel_put_with_signal(ch, HOST_OFF + dst, so, size)
                                   : gpuport_channel_put(ch, HOST_OFF + dst, so, size));
            }
            memcpy(shadow + dst, piece, size);
            sigs += what == 8;
        } else if (what < 13) {
            uint64_t dst = (rng(seed) % (WINDOW / 8)) * 8, value = rng(seed);
            if (ch)
                CHECK_OK(what == 12 ? gpuport_channel_put_value_with_signal(ch, HOST_OFF + dst,
                                                                            value)
                                    : gpuport_channel_put_value(ch, HOST_OFF + dst, value));
            memcpy(shadow + dst, &value, 8);
            sigs += what == 12;
        } else {
            if (ch)
                CHECK_OK(gpuport_channel_signal(ch));
            sigs++;
        }
    }
    return sigs;
}

static void run(gpuport_bootstrap_t *bs, int on)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
    gpuport_comm_stats_t st0, st1;
    unsigned char *src, *dst, *shadow = (unsigned char *)calloc(1, WINDOW);
    uint64_t seed = 0x2545f4914f6cdd1dull;
    int *rc, rank = bs->rank;

    CHECK(shadow != NULL);
    setenv("GPUPORT_HOST_INLINE", on ? "1" : "0", 1);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&src));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&dst));
    memset(src, 0, REGION);
    memset(dst, 0, REGION);
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(ch), getenv("GPUPORT_TRANSPORT")) == 0,
              "transport %s, not %s", gpuport_channel_transport(ch), getenv("GPUPORT_TRANSPORT"));
    CHECK_OK(gpuport_channel_device(ch, &dev));
    CUDA_CHECK(cudaMalloc(&rc, sizeof(int)));
    CHECK_OK(gpuport_comm_stats(comm, &st0));
    CHECK_OK(bs->barrier(bs->ctx));

    for (int round = 1; round <= ROUNDS; round++) {
        int sigs;
        if (rank == 0) {
            int h = -1;
            for (uint64_t i = 0; i < DEV_PIECES * DEV_PIECE; i++)
                src[DEV_OFF + i] = dev_byte(round, i);
            CUDA_CHECK(cudaMemset(rc, 0xff, sizeof(int)));
            dev_puts<<<1, 1>>>(dev, rc); /* while the host works below */
            CUDA_CHECK(cudaGetLastError());
            host_round(ch, src, shadow, &seed, round);
            memcpy(src + MARK, &round, sizeof(round));
            CHECK_OK(gpuport_channel_put_with_signal(ch, MARK, MARK, sizeof(round)));
            CHECK_OK(gpuport_channel_flush(ch));
            CUDA_CHECK(cudaDeviceSynchronize());
            CUDA_CHECK(cudaMemcpy(&h, rc, sizeof(h), cudaMemcpyDeviceToHost));
            CHECK_MSG(h == 0, "round %d: the kernel's pushes returned %d", round, h);
        } else {
            int got = 0;
            sigs = host_round(NULL, NULL, shadow, &seed, round) + 1 + DEV_PIECES / DEV_EVERY;
            for (int i = 0; i < sigs; i++)
                CHECK_OK(gpuport_channel_wait(ch));
            for (uint64_t i = 0; i < DEV_PIECES * DEV_PIECE; i++)
                CHECK_MSG(dst[DEV_OFF + i] == dev_byte(round, i),
                          "round %d: device window byte %llu is %u, expected %u", round,
                          (unsigned long long)i, dst[DEV_OFF + i], dev_byte(round, i));
            for (uint64_t i = 0; i < WINDOW; i++)
                CHECK_MSG(dst[HOST_OFF + i] == shadow[i],
                          "round %d: host window byte %llu is %u, in order it is %u", round,
                          (unsigned long long)i, dst[HOST_OFF + i], shadow[i]);
            memcpy(&got, dst + MARK, sizeof(got));
            CHECK_MSG(got == round, "round %d: the number is %d", round, got);
            {
                int ready = 1;
                CHECK_OK(gpuport_channel_poll(ch, &ready));
                CHECK_MSG(!ready, "round %d: a signal more than sent", round);
            }
        }
        CHECK_OK(bs->barrier(bs->ctx));
    }
    if (rank == 0) {
        uint64_t by_caller;
        CHECK_OK(gpuport_comm_stats(comm, &st1));
        by_caller = st1.host_inline - st0.host_inline;
        printf("GPUPORT_HOST_INLINE=%d: %d rounds in order: %llu host operations carried out by "
               "their callers, %llu triggers through the proxy (the kernel's %d per round among "
               "them)\n",
               on, ROUNDS, (unsigned long long)by_caller,
               (unsigned long long)(st1.triggers - st0.triggers), DEV_PIECES + 1);
        CHECK(st1.triggers - st0.triggers >= (uint64_t)ROUNDS * (DEV_PIECES + 1));
        if (on)
            CHECK_MSG(by_caller > 0 &&
                          st1.triggers - st0.triggers > (uint64_t)ROUNDS * (DEV_PIECES + 1),
                      "the host operations did not go both ways");
        else
            CHECK_MSG(by_caller == 0, "GPUPORT_HOST_INLINE=0, yet %llu went inline",
                      (unsigned long long)by_caller);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    cudaFree(rc);
    free(shadow);
}

int main(void)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank;

    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_TIMEOUT_MS", "60000", 1);
    setenv("GPUPORT_SHM_ASYNC_MIN", "4k", 1);
    setenv("GPUPORT_TRANSPORT", "shm", 0); /* or tcp, whose callers send their own */
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL; /* one socketpair serves both runs */
    run(&bs, 1);
    run(&bs, 0);
    gpu_pair_join(rank, child, 0);
    printf("PASS host operations inline beside a kernel's pushes and the proxy's work, in order\n");
    return 0;
}
