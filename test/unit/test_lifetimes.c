/*
 * What an application may do wrong or out of turn with handles and memory,
 * and what gpuport must do then: refuse with a clear error and lose nothing,
 * never write outside what was registered, never hang. Each case failed on
 * the code before it was written (the findings behind pairwise-safe destroy):
 *   - registrations of memory that is not there (a range that wraps, runs
 *     past a gpuport_mem_alloc block, or is not mapped), and of nothing;
 *   - a peer that destroyed its side and deregistered: this side's later
 *     operations fail (GPUPORT_ERR_CLOSED), those with a bad argument
 *     report the argument first, and nothing lands in the released
 *     memory; memory in
 *     use by a live channel cannot be deregistered or freed;
 *   - handles used after destroy (twice destroyed, deregistered, ...), and
 *     how many dead handles are kept;
 *   - argument errors that named the wrong culprit;
 *   - gpuport_comm_destroy with a peer that died, and after a channel
 *     refused for mismatched transports: no wait on the bootstrap, no wait
 *     for a goodbye that cannot come.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "pair_bootstrap.h"

#define KIB 1024u

/* ---- registrations of memory that is not there ---- */

/* What kind a registration is, by name ("host", "host-shared", ...). */
static const char *kind_of(gpuport_mem_t mem)
{
    gpuport_mem_info_t info;

    CHECK_OK(gpuport_mem_info(mem, &info));
    return gpuport_mem_kind_string(info.kind);
}

/* One refusal of a range that overlaps a block but is not inside its
 * requested bytes: GPUPORT_ERR_INVALID_ARG, nothing written, and a message
 * that names the range, the block, its requested and mapped sizes and
 * `how`. */
static void refused_at_block(gpuport_comm_t comm, unsigned char *blk, size_t asked,
                             size_t mapped, unsigned char *ptr, size_t size, const char *how)
{
    gpuport_mem_t mem = (gpuport_mem_t)&comm;
    gpuport_status_t st;
    const char *log;
    char range[64], block[96];

    snprintf(range, sizeof(range), "gpuport_mem_register(%p, %zu bytes)", (void *)ptr, size);
    snprintf(block, sizeof(block), "(%zu bytes requested at %p, %zu mapped", asked, (void *)blk,
             mapped);
    capture_begin();
    st = gpuport_mem_register(comm, ptr, size, &mem);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_INVALID_ARG && mem == (gpuport_mem_t)&comm,
              "block + %td, %zu bytes (the block asked %zu, mapped %zu): %s%s%s", ptr - blk,
              size, asked, mapped, gpuport_status_string(st),
              st == GPUPORT_OK ? ", registered as kind " : "",
              st == GPUPORT_OK ? kind_of(mem) : "");
    CHECK_MSG(strstr(log, range) && strstr(log, block) && strstr(log, how),
              "block + %td, %zu bytes: the log lacks \"%s\", \"%s\" or \"%s\": %s", ptr - blk,
              size, range, block, how, log);
}

/* A block of 3 pages and 100 bytes (12,388 with 4 KiB pages) is mapped as
 * 4 pages: the last 3996 bytes are mapped but not the block's. A range
 * that reaches into them, or starts there, or starts before the block and
 * runs into it, is refused as the block's, not taken for private memory
 * (which the mapping would let it pass as). */
static void tail_of_block(gpuport_comm_t comm, long page)
{
    size_t asked = 3 * (size_t)page + 100, mapped = 4 * (size_t)page;
    unsigned char *blk;
    void *before;
    gpuport_mem_t mem;

    CHECK_OK(gpuport_mem_alloc(comm, asked, (void **)&blk));
    /* private memory right before the block (or whatever is mapped there
     * already), so that a range from it into the block is all mapped */
    before = mmap(blk - page, (size_t)page, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK_MSG(before == blk - page || (before == MAP_FAILED && errno == EEXIST),
              "mmap of the page before the block: %p (%s)", before, strerror(errno));
    /* straddling the mapping's end: its last 8 bytes and 8 past it */
    refused_at_block(comm, blk, asked, mapped, blk + mapped - 8, 16, "in the rounding");
    /* wholly in the tail, all of it mapped */
    refused_at_block(comm, blk, asked, mapped, blk + asked + 8, 16, "in the rounding");
    refused_at_block(comm, blk, asked, mapped, blk + asked, mapped - asked, "in the rounding");
    /* from inside the requested bytes into the tail */
    refused_at_block(comm, blk, asked, mapped, blk + asked - 8, 16, "runs past the end");
    refused_at_block(comm, blk, asked, mapped, blk, mapped, "runs past the end");
    /* from before the block into it */
    refused_at_block(comm, blk, asked, mapped, blk - 8, 16, "starts 8 bytes into it");
    /* the requested bytes themselves, and their last byte, are the block's */
    CHECK_OK(gpuport_mem_register(comm, blk, asked, &mem));
    CHECK_MSG(strcmp(kind_of(mem), gpuport_mem_kind_string(GPUPORT_MEM_KIND_HOST_SHARED)) == 0,
              "the block's requested bytes are %s memory", kind_of(mem));
    CHECK_OK(gpuport_mem_deregister(mem));
    CHECK_OK(gpuport_mem_register(comm, blk + asked - 1, 1, &mem));
    CHECK_OK(gpuport_mem_deregister(mem));
    CHECK_OK(gpuport_mem_free(comm, blk));
    if (before != MAP_FAILED)
        munmap(before, (size_t)page);
}

static int registrations(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t mem = (gpuport_mem_t)&comm, keep = mem;
    unsigned char *blk, *heap = malloc(64 * KIB);
    long page = sysconf(_SC_PAGESIZE);
    char *hole;
    const char *log;
    char want[64];
    void *p = &comm;

    (void)rank, (void)size, (void)arg;
    CHECK(heap);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, 64 * KIB, (void **)&blk));
    /* a range that wraps the address space */
    capture_begin();
    CHECK_STATUS(gpuport_mem_register(comm, heap, SIZE_MAX, &mem), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, "wraps"), "log: %s", log);
    /* past the end of a gpuport_mem_alloc block: refused, not taken for
     * private memory that the peer would write past the block into */
    capture_begin();
    CHECK_STATUS(gpuport_mem_register(comm, blk, 1024 * KIB + 64 * KIB, &mem),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_mem_register(comm, blk + 60 * KIB, 8 * KIB, &mem),
                 GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(count_of(log, "runs past the end of its gpuport_mem_alloc block") == 2, "log: %s",
              log);
    tail_of_block(comm, page);
    /* far beyond a malloc block: the first unmapped address is named */
    capture_begin();
    CHECK_STATUS(gpuport_mem_register(comm, heap, 1ull << 47, &mem), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, "is not mapped in this process"), "log: %s", log);
    /* a hole punched in the middle of a mapping: its first page is named */
    hole = mmap(NULL, 3 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                0);
    CHECK(hole != MAP_FAILED);
    CHECK(munmap(hole + page, (size_t)page) == 0);
    snprintf(want, sizeof(want), "address %p of the range", (void *)(hole + page));
    capture_begin();
    CHECK_STATUS(gpuport_mem_register(comm, hole, 3 * (size_t)page, &mem),
                 GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, want), "log lacks \"%s\": %s", want, log);
    /* the mapped parts alone are fine */
    CHECK_OK(gpuport_mem_register(comm, hole, (size_t)page, &mem));
    CHECK_OK(gpuport_mem_deregister(mem));
    munmap(hole, (size_t)page);
    munmap(hole + 2 * page, (size_t)page);
    /* nothing: refused like gpuport_mem_alloc(0) */
    mem = keep;
    CHECK_STATUS(gpuport_mem_register(comm, heap, 0, &mem), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_mem_register(comm, NULL, 0, &mem), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_mem_register(comm, NULL, 100, &mem), GPUPORT_ERR_INVALID_ARG);
    CHECK(mem == keep); /* written only on success */
    CHECK_STATUS(gpuport_mem_alloc(comm, 0, &p), GPUPORT_ERR_INVALID_ARG);
    /* too large to round up to pages: says so, not "mmap(..., 0 bytes)" */
    capture_begin();
    CHECK_STATUS(gpuport_mem_alloc(comm, SIZE_MAX, &p), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, "whole pages") && !strstr(log, "0 bytes"), "log: %s", log);
    CHECK(p == (void *)&comm);
    /* the whole block and the whole heap range are fine */
    CHECK_OK(gpuport_mem_register(comm, blk, 64 * KIB, &mem));
    CHECK_OK(gpuport_mem_deregister(mem));
    CHECK_OK(gpuport_mem_register(comm, heap, 64 * KIB, &mem));
    CHECK_OK(gpuport_mem_deregister(mem));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(heap);
    return 0;
}

/* ---- a peer that released its memory ---- */

/* Calls with a bad argument on a channel whose peer has closed its side:
 * each reports its argument, not the close (nothing is queued either way). */
static void bad_args_first(gpuport_channel_t ch, uint64_t region)
{
    CHECK_STATUS(gpuport_channel_put(ch, region, 0, 8), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_put_with_signal(ch, 0, region - 4, 8), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_put_value(ch, 4, 1), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_put_value_with_signal(ch, region, 1), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_get(ch, region - 4, 0, 8), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_atomic_add(ch, 4, 1), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_accumulate(ch, 0, 0, 0, GPUPORT_INT64), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_accumulate(ch, 0, 0, 1, (gpuport_dtype_t)99),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_accumulate(ch, 0, 0, UINT64_MAX / 2, GPUPORT_FLOAT32),
                 GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_accumulate(ch, region - 8, 0, 2, GPUPORT_INT64),
                 GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_poll(ch, NULL), GPUPORT_ERR_INVALID_ARG);
}

/* Rank 1 destroys its side and deregisters its destination; rank 0's
 * later put_with_signal and flush fail, its wait ends, and not one byte
 * lands in rank 1's released destination (kept allocated here to look).
 * Rank 0's calls with a bad argument report the argument, before and after
 * the channel has taken the close. */
static int peer_released(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    unsigned char *src, *dst;
    gpuport_status_t st;

    (void)size, (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, 64 * KIB, (void **)&src));
    CHECK_OK(gpuport_mem_alloc(comm, 64 * KIB, (void **)&dst));
    memset(src, 0x11, 64 * KIB);
    memset(dst, 0xee, 64 * KIB);
    CHECK_OK(gpuport_mem_register(comm, src, 64 * KIB, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, 64 * KIB, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    /* in use by a live channel: neither deregistered nor freed */
    CHECK_STATUS(gpuport_mem_deregister(mdst), GPUPORT_ERR_BUSY);
    CHECK_STATUS(gpuport_mem_free(comm, dst), GPUPORT_ERR_BUSY);
    /* one good exchange first */
    CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 0, 4096));
    CHECK_OK(gpuport_channel_wait(ch));
    CHECK_OK(bs->barrier(bs->ctx));
    if (rank == 1) {
        memset(dst, 0xee, 64 * KIB);
        CHECK_OK(gpuport_channel_destroy(ch));
        CHECK_OK(gpuport_mem_deregister(mdst));
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (rank == 0) {
        /* the peer's word is here (its destroy waited for this side's
         * answer to it) */
        CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_ERR_CLOSED);
        bad_args_first(ch, 64 * KIB);
        /* refused now, or by the proxy: the flush says so either way, and
         * every call says the peer closed its side (it did not fail) */
        st = gpuport_channel_put_with_signal(ch, 0, 0, 4096);
        CHECK_MSG(st == GPUPORT_OK || st == GPUPORT_ERR_CLOSED, "put: %s",
                  gpuport_status_string(st));
        CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_ERR_CLOSED);
        CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_ERR_CLOSED);
        CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_ERR_CLOSED);
        CHECK_STATUS(gpuport_channel_put(ch, 0, 0, 8), GPUPORT_ERR_CLOSED);
        CHECK_STATUS(gpuport_channel_get(ch, 0, 0, 8), GPUPORT_ERR_CLOSED);
        CHECK_STATUS(gpuport_channel_accumulate(ch, 0, 0, 1, GPUPORT_INT64), GPUPORT_ERR_CLOSED);
        bad_args_first(ch, 64 * KIB);
        CHECK_OK(gpuport_channel_destroy(ch));
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (rank == 1)
        for (uint32_t i = 0; i < 64 * KIB; i++)
            CHECK_MSG(dst[i] == 0xee, "byte %u of the released destination changed to 0x%02x",
                      i, dst[i]);
    CHECK_OK(gpuport_mem_deregister(msrc));
    if (rank == 0)
        CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* ---- handles used after destroy ---- */

static int stale_handles(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm, gone;
    gpuport_mem_t mem;
    gpuport_channel_t ch, out = (gpuport_channel_t)&comm;
    unsigned char buf[4096];
    int ready;

    (void)rank, (void)size, (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    /* a communicator of one rank: itself on its host, no other rank */
    CHECK(gpuport_comm_same_host(comm, 0) == 1);
    CHECK(gpuport_comm_same_host(comm, 1) == -1 && gpuport_comm_same_host(comm, -1) == -1);
    CHECK(gpuport_comm_local_rank(comm) == 0 && gpuport_comm_local_size(comm) == 1);
    CHECK_OK(gpuport_mem_register(comm, buf, sizeof(buf), &mem));
    CHECK_OK(gpuport_channel_create(comm, 0, mem, mem, &ch));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_STATUS(gpuport_channel_destroy(ch), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_put(ch, 0, 0, 8), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_signal(ch), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_poll(ch, &ready), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_ERR_INVALID_ARG);
    CHECK_OK(gpuport_mem_deregister(mem));
    CHECK_STATUS(gpuport_mem_deregister(mem), GPUPORT_ERR_INVALID_ARG);
    /* a dead registration makes no channel */
    CHECK_STATUS(gpuport_channel_create(comm, 0, mem, NULL, &out), GPUPORT_ERR_INVALID_ARG);
    CHECK(out == (gpuport_channel_t)&comm);
    gone = comm;
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK_STATUS(gpuport_comm_destroy(gone), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_create(gone, 0, NULL, NULL, &out), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_mem_register(gone, buf, sizeof(buf), &mem), GPUPORT_ERR_INVALID_ARG);
    CHECK(gpuport_comm_rank(gone) == -1 && gpuport_comm_size(gone) == -1);
    CHECK(gpuport_comm_same_host(gone, 0) == -1);
    CHECK(gpuport_comm_local_rank(gone) == -1 && gpuport_comm_local_size(gone) == -1);
    return 0;
}

/* Dead handles are kept so that using one is an error, not a crash, but
 * only so many: a communicator that reopens channels for ever (the proxy
 * fuzzer did, 6 million times, and ran out of memory) stays bounded, and
 * the latest dead handles are still recognised. */
static int dead_bounded(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t mem, last_mem = NULL;
    gpuport_channel_t ch = NULL;
    unsigned char buf[4096];
    uint32_t n = 0;

    (void)rank, (void)size, (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    for (int i = 0; i < GPUPORT_DEAD_KEEP + 300; i++) {
        CHECK_OK(gpuport_mem_register(comm, buf, sizeof(buf), &mem));
        CHECK_OK(gpuport_channel_create(comm, 0, mem, mem, &ch));
        CHECK_OK(gpuport_channel_destroy(ch));
        CHECK_OK(gpuport_mem_deregister(mem));
        last_mem = mem;
    }
    for (gpuport_dead_link_t *d = comm->dead_chans.first; d; d = d->next)
        n++;
    CHECK_MSG(n == GPUPORT_DEAD_KEEP && comm->dead_chans.n == n,
              "%u destroyed channel handles kept (count %u), not %d", n, comm->dead_chans.n,
              GPUPORT_DEAD_KEEP);
    n = 0;
    for (gpuport_dead_link_t *d = comm->dead_mems.first; d; d = d->next)
        n++;
    CHECK_MSG(n == GPUPORT_DEAD_KEEP && comm->dead_mems.n == n,
              "%u deregistered handles kept (count %u), not %d", n, comm->dead_mems.n,
              GPUPORT_DEAD_KEEP);
    CHECK_STATUS(gpuport_channel_destroy(ch), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_mem_deregister(last_mem), GPUPORT_ERR_INVALID_ARG);
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* ---- argument errors name the culprit ---- */

static int argument_messages(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_channel_t ch;
    const char *log;

    (void)rank, (void)size, (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    capture_begin();
    CHECK_STATUS(gpuport_channel_create(NULL, 1, NULL, NULL, &ch), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, "comm (nil) is not a live communicator") && !strstr(log, "peer"),
              "log: %s", log);
    capture_begin();
    CHECK_STATUS(gpuport_channel_create(comm, 0, NULL, NULL, NULL), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, "channel_p is NULL") && !strstr(log, "peer"), "log: %s", log);
    capture_begin();
    CHECK_STATUS(gpuport_channel_create(comm, 5, NULL, NULL, &ch), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, "peer 5 is not a rank of this communicator (0..0)"), "log: %s", log);
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* ---- destroy that must not wait for what cannot come ---- */

/* A bootstrap whose barrier never returns (an MPI barrier with a dead rank
 * in it): gpuport_comm_destroy must not need it. */
static gpuport_status_t stuck_barrier(void *ctx)
{
    (void)ctx;
    for (;;)
        pause();
    return GPUPORT_OK;
}

static double seconds_since(uint64_t t0)
{
    return (double)(gpuport_now_ns() - t0) / 1e9;
}

/* The child makes a channel, then dies without a word; the parent's destroy
 * returns within 2 s (and without the barrier). */
static void destroy_after_death(void)
{
    gpuport_bootstrap_t bs;
    gpuport_comm_t comm;
    gpuport_channel_t ch;
    gpuport_mem_t mem;
    static unsigned char buf[4096];
    pid_t child;
    int rank = pair_fork(&bs, &child), status;
    uint64_t t0;

    CHECK(rank >= 0);
    bs.barrier = stuck_barrier;
    CHECK_OK(gpuport_comm_create(&bs, &comm));
    CHECK_OK(gpuport_mem_register(comm, buf, sizeof(buf), &mem));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, mem, mem, &ch));
    if (rank == 1)
        _exit(0);
    waitpid(child, &status, 0);
    t0 = gpuport_now_ns();
    gpuport_status_t st = gpuport_comm_destroy(comm);
    CHECK_MSG(st == GPUPORT_OK || st == GPUPORT_ERR_SHUTDOWN, "destroy: %s",
              gpuport_status_string(st));
    CHECK_MSG(seconds_since(t0) < 2.0, "destroy took %.2f s after the peer died",
              seconds_since(t0));
}

/* One process forces tcp, the other shm: the channel is refused on both
 * sides, and then destroy does not wait GPUPORT_TIMEOUT_MS for the goodbye
 * of a connection that carried nothing. */
static void destroy_after_mismatch(void)
{
    gpuport_bootstrap_t bs;
    gpuport_comm_t comm;
    gpuport_channel_t ch = NULL;
    pid_t child;
    int rank = pair_fork(&bs, &child);
    uint64_t t0;

    CHECK(rank >= 0);
    setenv("GPUPORT_TRANSPORT", rank ? "shm" : "tcp", 1);
    setenv("GPUPORT_SOCKET_IFNAME", "lo", 1);
    setenv("GPUPORT_TIMEOUT_MS", "20000", 1);
    CHECK_OK(gpuport_comm_create(&bs, &comm));
    capture_begin();
    gpuport_status_t st = gpuport_channel_create(comm, 1 - rank, NULL, NULL, &ch);
    capture_end();
    CHECK_MSG(st != GPUPORT_OK && ch == NULL, "mismatched transports: %s",
              gpuport_status_string(st));
    t0 = gpuport_now_ns();
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK_MSG(seconds_since(t0) < 5.0, "destroy took %.2f s", seconds_since(t0));
    if (rank == 1)
        _exit(0);
    CHECK(pair_join(child) == 0);
    unsetenv("GPUPORT_TRANSPORT");
    unsetenv("GPUPORT_SOCKET_IFNAME");
    unsetenv("GPUPORT_TIMEOUT_MS");
}

int main(void)
{
    alarm(120); /* a hang is a failure */
    setenv("GPUPORT_TIMEOUT_MS", "10000", 1);
    setenv("GPUPORT_GPU", "off", 1); /* host memory is what is under test */
    CHECK(local_run(1, registrations, NULL) == 0);
    CHECK(local_run(2, peer_released, NULL) == 0);
    CHECK(local_run(1, stale_handles, NULL) == 0);
    CHECK(local_run(1, dead_bounded, NULL) == 0);
    CHECK(local_run(1, argument_messages, NULL) == 0);
    destroy_after_death();
    destroy_after_mismatch();
    printf("lifetimes: all checks passed\n");
    return 0;
}
