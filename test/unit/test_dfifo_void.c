/*
 * The proxy's side of a device-FIFO slot that its kernel gave up
 * (gpuport_dev_fifo_push timed out after reserving it: GPUPORT_FIFO_VOIDS),
 * without a GPU: the slots and void marks are written here as kernels
 * write them, and proxy_consume_fifo (the proxy's own code) takes them. A
 * slot given up is skipped, reported with its channel, and that channel
 * fails with GPUPORT_ERR_TIMEOUT; every trigger behind it is taken; a mark
 * of another position (an old lap's, a later one's) is not taken for one,
 * a slot neither written nor given up stops the consumer there, and after
 * a whole lap given up the old lap's triggers are not taken again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "proxy/proxy_int.h"

#define SIZE 8u
#define LOG2 3u
#define NCHAN 8u

static gpuport_trigger_t ring[2 * SIZE] __attribute__((aligned(64)));

/* as a kernel writes a put of `channel` at position p */
static void write_put(uint64_t p, uint32_t channel)
{
    gpuport_trigger_t t;

    gpuport_trigger_encode(&t, GPUPORT_OP_PUT, channel, 0, 0, 8);
    ring[p & (SIZE - 1)].w[1] = t.w[1];
    atomic_store_explicit((_Atomic uint64_t *)&ring[p & (SIZE - 1)].w[0],
                          t.w[0] | gpuport_trigger_parity(p, LOG2) << GPUPORT_TRG_PARITY_SHIFT,
                          memory_order_release);
}

/* as a kernel that gave up position p writes its mark (mark_pos: the
 * position the mark names, p itself unless a stale one is planted) */
static void write_void(uint64_t p, uint64_t mark_pos, uint32_t channel)
{
    gpuport_trigger_t *v = &GPUPORT_FIFO_VOIDS(ring, SIZE)[p & (SIZE - 1)];

    v->w[1] = channel;
    atomic_store_explicit((_Atomic uint64_t *)&v->w[0], mark_pos + 1, memory_order_release);
}

int main(void)
{
    struct gpuport_comm *comm = calloc(1, sizeof(*comm));
    gpuport_chan_state_t *states = aligned_alloc(64, NCHAN * sizeof(*states));
    _Atomic uint64_t tail = 0;
    gpuport_fifo_t f;
    const char *log;
    int n;

    CHECK(comm && states);
    memset(states, 0, NCHAN * sizeof(*states));
    comm->config.max_channels = NCHAN;
    comm->pchans = calloc(NCHAN, sizeof(*comm->pchans));
    CHECK(comm->pchans);
    CHECK_OK(proxy_park_init(comm));
    for (uint32_t i = 0; i < NCHAN; i++) {
        comm->pchans[i].tl.id = i;
        comm->pchans[i].state = &states[i];
    }
    atomic_store(&comm->pchans[2].active, 1); /* the channel that gives up */
    memset(&f, 0, sizeof(f));
    f.slots = ring;
    f.voids = GPUPORT_FIFO_VOIDS(ring, SIZE);
    f.tail = &tail;
    f.size = SIZE;
    f.log2_size = LOG2;

    /* 0: a put (channel 5, not open: dropped); 1: given up by channel 2;
     * 2: a put; 3: reserved and still being written */
    write_put(0, 5);
    write_void(1, 1, 2);
    write_put(2, 5);
    capture_begin();
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    log = capture_end();
    CHECK_MSG(f.pos == 3 && atomic_load(&tail) == 3, "consumer at %llu, tail %llu (n %d)",
              (unsigned long long)f.pos, (unsigned long long)atomic_load(&tail), n);
    CHECK(atomic_load(&comm->proxy.triggers) == 2 && atomic_load(&comm->proxy.rejected) == 3);
    CHECK_STATUS((gpuport_status_t)atomic_load(&states[2].status), GPUPORT_ERR_TIMEOUT);
    CHECK_MSG(strstr(log, "device FIFO position 1: a kernel's push on channel 2 gave up its slot"),
              "log: %s", log);

    /* 3: a mark of another lap's position 3 + SIZE, then of 3 - SIZE... */
    write_void(3, 3 + SIZE, 4);
    capture_begin();
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    log = capture_end();
    CHECK_MSG(n == 0 && f.pos == 3, "a stale mark was taken: consumer at %llu",
              (unsigned long long)f.pos);
    CHECK_MSG(log[0] == '\0', "log: %s", log);
    /* ...then its own: skipped (channel 4 is not open: said so), and the
     * put written behind it meanwhile is taken */
    write_put(4, 6);
    write_void(3, 3, 4);
    capture_begin();
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    log = capture_end();
    CHECK_MSG(f.pos == 5 && atomic_load(&comm->proxy.triggers) == 3, "consumer at %llu",
              (unsigned long long)f.pos);
    CHECK_MSG(strstr(log, "channel 4 (no such channel now) gave up"), "log: %s", log);

    /* a lap of puts (5 .. 5 + SIZE - 1), taken; then the whole next lap
     * given up: its slots still hold those puts, whose parity is the lap
     * after's. That lap, nothing written yet, must take nothing (the
     * consumer once took the old puts again: seen on one H100, 64 device
     * pushes timed out on a 64-slot FIFO, then old triggers were carried
     * out a second time and later ones lost) */
    for (uint64_t p = 5; p < 5 + SIZE; p++)
        write_put(p, 6);
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    CHECK_MSG(f.pos == 5 + SIZE, "consumer at %llu after a lap of puts", (unsigned long long)f.pos);
    for (uint64_t p = 5 + SIZE; p < 5 + 2 * SIZE; p++)
        write_void(p, p, 2);
    capture_begin();
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    log = capture_end();
    CHECK_MSG(f.pos == 5 + 2 * SIZE, "consumer at %llu after a lap of marks",
              (unsigned long long)f.pos);
    uint64_t taken = atomic_load(&comm->proxy.triggers);
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    CHECK_MSG(n == 0 && f.pos == 5 + 2 * SIZE && atomic_load(&comm->proxy.triggers) == taken,
              "the lap after a lap given up: %llu old trigger(s) taken again, consumer at %llu",
              (unsigned long long)(atomic_load(&comm->proxy.triggers) - taken),
              (unsigned long long)f.pos);
    /* what that lap's pushers write then is taken */
    write_put(5 + 2 * SIZE, 6);
    write_put(6 + 2 * SIZE, 6);
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    CHECK_MSG(f.pos == 7 + 2 * SIZE && atomic_load(&comm->proxy.triggers) == taken + 2,
              "consumer at %llu, %llu taken", (unsigned long long)f.pos,
              (unsigned long long)(atomic_load(&comm->proxy.triggers) - taken));

    /* the host FIFO has no marks: a slot not written stops it, whatever */
    f.voids = NULL;
    write_void(7 + 2 * SIZE, 7 + 2 * SIZE, 2);
    n = proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    CHECK(n == 0 && f.pos == 7 + 2 * SIZE);

    gpuport_proxy_parks_free(comm);
    free(comm->pchans);
    free(comm);
    free(states);
    printf("device FIFO slots given up: skipped, reported, their channel failed: ok\n");
    return 0;
}
