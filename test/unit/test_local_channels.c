/*
 * The whole pipeline in one process: ranks are threads (local bootstrap),
 * each with its own communicator, proxy and flusher, connected over shm.
 * Covers both destination kinds (gpuport_mem_alloc: mapped; malloc: CMA),
 * copies done inline and by the flusher, signal ordering, flush, error
 * states on both sides, drain at destroy, and put_value's refusals.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"

#define REGION (4u << 20)
#define ROUNDS 200

static unsigned char pattern(int rank, int round, uint64_t i)
{
    return (unsigned char)(rank * 31 + round * 7 + (int)(i * 13 % 251));
}

typedef struct {
    int use_malloc;
} opts_t;

/* Reads what the peer put, after gpuport_channel_wait. Not instrumented by
 * TSan: the wait is ordered after the peer's copy by an atomic on memory
 * mapped twice (the control segment), which TSan cannot follow; it would
 * report every 8 bytes of the destination, so slowly that a suppression
 * does not help (test/sanitizers/tsan.supp). */
__attribute__((no_sanitize_thread))
static void check_received(const unsigned char *got, int rank, int round, uint64_t size)
{
    for (uint64_t i = 0; i < size; i++)
        CHECK_MSG(got[i] == pattern(1 - rank, round, i), "rank %d round %d byte %llu of %llu",
                  rank, round, (unsigned long long)i, (unsigned long long)size);
}

static int exchange_rounds(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    opts_t *o = arg;
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    int peer = 1 - rank;
    uint64_t seed = 12345;

    (void)size;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (o->use_malloc) {
        src = malloc(REGION);
        dst = malloc(REGION);
    } else {
        CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&src));
        CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&dst));
    }
    memset(dst, 0xee, REGION);
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, peer, msrc, mdst, &ch));
    CHECK(strcmp(gpuport_channel_transport(ch), "shm") == 0);

    for (int round = 0; round < ROUNDS; round++) {
        /* both ranks draw the same sequence: each knows what the other sends */
        uint64_t size_draw, off_draw;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_draw = (seed >> 33) % 5 == 0 ? (seed >> 20) % REGION : (seed >> 20) % 4096 + 1;
        off_draw = (seed >> 11) % (REGION - size_draw + 1);
        for (uint64_t i = 0; i < size_draw; i++)
            src[off_draw + i] = pattern(rank, round, i);
        CHECK_OK(gpuport_channel_put_with_signal(ch, off_draw, off_draw, size_draw));
        CHECK_OK(gpuport_channel_wait(ch));
        check_received(dst + off_draw, rank, round, size_draw);
        /* the peer may reuse its source only after our flush... and we ours */
        CHECK_OK(gpuport_channel_flush(ch));
        CHECK_OK(bs->barrier(bs->ctx));
    }
    /* out of range on the caller's side: nothing queued, channel fine */
    CHECK_STATUS(gpuport_channel_put(ch, REGION - 8, 0, 16), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_put(ch, 0, REGION, 1), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_put(ch, UINT64_MAX, 0, 2), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_OK(gpuport_channel_status(ch));
    CHECK_OK(bs->barrier(bs->ctx));

    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    if (o->use_malloc) {
        free(src);
        free(dst);
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* A trigger that bypasses the caller-side check (as a device trigger would)
 * with a destination beyond the region: the proxy rejects it, the channel
 * fails on this side, the peer's waiter learns of it, and the peer's memory
 * just past the region is untouched. */
static int proxy_rejects(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    unsigned char *buf;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    uint64_t pos;

    (void)size;
    (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, 8192, (void **)&buf));
    memset(buf, rank ? 0x55 : 0xaa, 8192);
    /* the destination is the first 4096 bytes; the rest is a guard band */
    CHECK_OK(gpuport_mem_register(comm, buf, 4096, &mdst));
    CHECK_OK(gpuport_mem_register(comm, buf + 4096, 4096, &msrc));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    if (rank == 0) {
        CHECK_OK(gpuport_channel_push(ch, GPUPORT_OP_PUT_SIGNAL, 4000, 0, 200, &pos));
        CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_put(ch, 0, 0, 8), GPUPORT_ERR_OUT_OF_RANGE);
    } else {
        CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_ERR_PEER);
        for (int i = 0; i < 8192; i++)
            CHECK_MSG(buf[i] == 0x55, "byte %d changed to 0x%02x", i, buf[i]);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* Reads the peer's buffer after its proxy's work is known done (a wait or
 * a failure word): ordered as check_received's reads are, not by TSan. */
__attribute__((no_sanitize_thread))
static void check_bytes(const unsigned char *buf, size_t n, size_t skip_at, uint64_t value,
                        unsigned char guard)
{
    for (size_t i = 0; i < n; i++) {
        if (i >= skip_at && i < skip_at + 8)
            CHECK_MSG(buf[i] == ((const unsigned char *)&value)[i - skip_at],
                      "value byte %zu is 0x%02x", i - skip_at, buf[i]);
        else
            CHECK_MSG(buf[i] == guard, "byte %zu changed to 0x%02x", i, buf[i]);
    }
}

/* put_value's checks: a misaligned or out-of-range value is refused by the
 * call (nothing queued, the channel fine); one in the region's last 8 bytes
 * lands there alone; a raw trigger one slot past the end (bypassing the
 * call's checks, as a device trigger could) is rejected by the proxy,
 * failing the channel on both sides. The destination is 4096 bytes inside
 * an 8192-byte buffer: every byte around it stays as it was. */
#define VGUARD 2048
static int value_rejects(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    const opts_t *o = arg;
    gpuport_comm_t comm;
    unsigned char *buf, *src;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    const uint64_t value = 0xa1b2c3d4e5f60718ull;
    uint64_t pos;

    (void)size;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (o->use_malloc) {
        buf = aligned_alloc(64, 8192);
        src = malloc(64);
        CHECK(buf && src);
    } else {
        CHECK_OK(gpuport_mem_alloc(comm, 8192, (void **)&buf));
        CHECK_OK(gpuport_mem_alloc(comm, 64, (void **)&src));
    }
    memset(buf, 0x55, 8192);
    CHECK_OK(gpuport_mem_register(comm, buf + VGUARD, 4096, &mdst));
    CHECK_OK(gpuport_mem_register(comm, src, 64, &msrc));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    if (rank == 0) {
        CHECK_STATUS(gpuport_channel_put_value(ch, 1, value), GPUPORT_ERR_INVALID_ARG);
        CHECK_STATUS(gpuport_channel_put_value(ch, 4092, value), GPUPORT_ERR_INVALID_ARG);
        CHECK_STATUS(gpuport_channel_put_value_with_signal(ch, 12, value),
                     GPUPORT_ERR_INVALID_ARG);
        CHECK_STATUS(gpuport_channel_put_value(ch, 4096, value), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_put_value_with_signal(ch, 4096, value),
                     GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_put_value(ch, UINT64_MAX - 7, value),
                     GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_OK(gpuport_channel_status(ch));
        CHECK_OK(gpuport_channel_put_value_with_signal(ch, 4088, value));
        CHECK_OK(gpuport_channel_flush(ch));
    } else {
        CHECK_OK(gpuport_channel_wait(ch));
        check_bytes(buf, 8192, VGUARD + 4088, value, 0x55);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (rank == 0) {
        CHECK_OK(gpuport_channel_push_value(ch, GPUPORT_OP_PUT_VALUE_SIGNAL, 4096, ~value, &pos));
        CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_put_value(ch, 0, value), GPUPORT_ERR_OUT_OF_RANGE);
    } else {
        /* the rejected value's signal never comes: the failure does */
        CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_ERR_PEER);
        check_bytes(buf, 8192, VGUARD + 4088, value, 0x55);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    {
        gpuport_comm_stats_t st;
        CHECK_OK(gpuport_comm_stats(comm, &st));
        CHECK_MSG(st.rejected == (rank == 0 ? 1u : 0u), "rank %d: %llu triggers rejected", rank,
                  (unsigned long long)st.rejected);
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    if (o->use_malloc) {
        free(buf);
        free(src);
    }
    return 0;
}

/* gpuport_mem_alloc_device needs GPU mode: a host-only communicator says no,
 * leaves the pointer alone, and gpuport_mem_free refuses what it never gave. */
static int device_alloc_refused(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    void *p = (void *)&comm;

    (void)rank, (void)size, (void)arg;
    setenv("GPUPORT_GPU", "off", 1);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    capture_begin();
    gpuport_status_t st = gpuport_mem_alloc_device(comm, 4096, &p);
    const char *log = capture_end();
    CHECK_STATUS(st, GPUPORT_ERR_NOT_SUPPORTED);
    /* the message says why the communicator is host-only */
    CHECK_MSG(strstr(log, "host-only (GPUPORT_GPU=off)"), "message: %s", log);
    CHECK(p == (void *)&comm);
    CHECK_STATUS(gpuport_mem_alloc_device(comm, 0, &p), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_mem_alloc_device(NULL, 4096, &p), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_mem_free(comm, p), GPUPORT_ERR_INVALID_ARG);
    CHECK_OK(gpuport_comm_destroy(comm));
    unsetenv("GPUPORT_GPU");
    return 0;
}

int main(void)
{
    opts_t o = {0};
    setenv("GPUPORT_TIMEOUT_MS", "20000", 1);
    CHECK(local_run(2, exchange_rounds, &o) == 0);
    o.use_malloc = 1;
    CHECK(local_run(2, exchange_rounds, &o) == 0);
    /* a tiny FIFO and ring: back-pressure everywhere */
    setenv("GPUPORT_FIFO_SIZE", "4", 1);
    setenv("GPUPORT_SHM_ASYNC_MIN", "0", 1);
    o.use_malloc = 0;
    CHECK(local_run(2, exchange_rounds, &o) == 0);
    unsetenv("GPUPORT_FIFO_SIZE");
    unsetenv("GPUPORT_SHM_ASYNC_MIN");
    setenv("GPUPORT_LOG_LEVEL", "none", 1);
    CHECK(local_run(2, proxy_rejects, NULL) == 0);
    o.use_malloc = 0;
    CHECK(local_run(2, value_rejects, &o) == 0);
    o.use_malloc = 1;
    CHECK(local_run(2, value_rejects, &o) == 0);
    setenv("GPUPORT_LOG_LEVEL", "error", 1); /* its message is checked */
    CHECK(local_run(1, device_alloc_refused, NULL) == 0);
    printf("local channels: all checks passed\n");
    return 0;
}
