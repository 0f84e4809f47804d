/*
 * Device-FIFO pushers that give up, without a GPU: host threads push as
 * kernels do, reserving through the device calls' own reservation code
 * (gpuport_fifo_grant.h, compiled here with the host's atomics), and the
 * proxy's own consumer (proxy_consume_fifo) takes the triggers. Give-ups of
 * 1, size, 2 x size and 4 x size pushers on a full ring (the consumer
 * stopped), then give-ups spread over time among successful pushes of
 * several threads (the consumer stopping and going again): every pusher
 * that gave up reserved nothing, every successful push is taken exactly
 * once (positions dense, nothing waited for), the channels that gave up are
 * failed with GPUPORT_ERR_TIMEOUT and said, and a trigger pushed on such a
 * channel after its give-up is never carried out.
 * (With marks written for reserved slots instead, a mark of the lap after
 * overwrote the one the consumer waited for: 100 give-ups on a 64-slot FIFO
 * wedged it for good, seen on one H100.)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "check.h"
#include "proxy/proxy_int.h"

#define GPUPORT_GRANT_FN static inline
#define gpuport_grant_add(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define gpuport_grant_load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#include "gpuport/gpuport_fifo_grant.h"

#define SIZE 8u
#define LOG2 3u
#define NCHAN 8u
#define QUIT_CHAN 2u  /* the channel whose pushes give up */
#define PUT_CHAN 3u   /* an open channel whose puts are carried out */
#define THREADS 4
#define PER_THREAD 20000

static gpuport_trigger_t ring[SIZE] __attribute__((aligned(64)));
/* the device FIFO's device words, here in host memory */
static unsigned long long head, granted, tail_cache;
static _Atomic uint32_t gave_up_any;
static gpuport_chan_state_t *states;
static _Atomic uint64_t tail;
static _Atomic uint64_t puts_carried;

static int mock_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                    int behind_work, gpuport_work_t *work)
{
    (void)ch, (void)dst_off, (void)src_off, (void)size, (void)behind_work, (void)work;
    atomic_fetch_add(&puts_carried, 1);
    return GPUPORT_OK;
}

static const gpuport_transport_ops_t mock_ops = {.name = "mock", .put = mock_put};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* As gpuport_dev_fifo_push does (one trigger): reserve with room, else wait
 * for the tail, holding nothing; at the limit say the give-up in the
 * channel's word and the FIFO's and return GPUPORT_ERR_TIMEOUT. */
static int kernel_push(uint32_t channel, uint64_t timeout_ns)
{
    unsigned long long pos;
    uint64_t start = 0;
    gpuport_trigger_t t;

    gpuport_trigger_encode(&t, GPUPORT_OP_PUT, channel, 0, 0, 8);
    if (!gpuport_fifo_grant(&granted, &head, &tail_cache, SIZE, 1, 1, &pos)) {
        do {
            uint64_t seen = atomic_load_explicit(&tail, memory_order_acquire);
            unsigned long long c = __atomic_load_n(&tail_cache, __ATOMIC_RELAXED);
            while (c < seen && !__atomic_compare_exchange_n(&tail_cache, &c, seen, 0,
                                                            __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
                ;
            if (start == 0) {
                start = now_ns();
            } else if (now_ns() - start > timeout_ns) {
                atomic_store_explicit(&states[channel].gave_up, 1, memory_order_relaxed);
                atomic_store_explicit(&gave_up_any, 1, memory_order_seq_cst);
                return GPUPORT_ERR_TIMEOUT;
            }
            sched_yield();
        } while (!gpuport_fifo_grant(&granted, &head, &tail_cache, SIZE, 1, 0, &pos));
    }
    /* room is promised: the slot's last lap was consumed */
    CHECK_MSG(pos + 1 - atomic_load(&tail) <= SIZE, "position %llu handed out, tail %llu",
              pos, (unsigned long long)atomic_load(&tail));
    ring[pos & (SIZE - 1)].w[1] = t.w[1];
    atomic_store_explicit((_Atomic uint64_t *)&ring[pos & (SIZE - 1)].w[0],
                          t.w[0] | gpuport_trigger_parity(pos, LOG2) << GPUPORT_TRG_PARITY_SHIFT,
                          memory_order_release);
    return GPUPORT_OK;
}

static struct gpuport_comm *comm;
static gpuport_fifo_t f;

static void reset_channel(uint32_t id)
{
    atomic_store(&states[id].status, GPUPORT_OK);
    atomic_store(&states[id].gave_up, 0);
}

/* quitters give-ups on a full ring, nobody consuming; then the consumer
 * takes what was pushed before them and later pushes */
static void full_ring_case(uint32_t quitters)
{
    uint64_t pos0 = f.pos, carried0 = atomic_load(&puts_carried);
    const char *log;
    int fails = 0;

    reset_channel(QUIT_CHAN);
    for (uint32_t i = 0; i < SIZE; i++)
        CHECK_OK(kernel_push(PUT_CHAN, 1000000000ull));
    for (uint32_t i = 0; i < quitters; i++)
        fails += kernel_push(QUIT_CHAN, 1000) == GPUPORT_ERR_TIMEOUT;
    CHECK_MSG(fails == (int)quitters, "%d of %u pushes on a full ring timed out", fails, quitters);
    CHECK_MSG(head == pos0 + SIZE && granted == head,
              "after %u give-ups: head %llu, promised %llu (expected %llu: nothing held)",
              quitters, head, granted, (unsigned long long)(pos0 + SIZE));
    /* the consumer: the lap of puts, and the give-ups said */
    capture_begin();
    while (f.pos < pos0 + SIZE)
        proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    log = capture_end();
    CHECK_MSG(atomic_load(&puts_carried) == carried0 + SIZE, "%llu of %u puts carried out",
              (unsigned long long)(atomic_load(&puts_carried) - carried0), SIZE);
    CHECK_STATUS((gpuport_status_t)atomic_load(&states[QUIT_CHAN].status), GPUPORT_ERR_TIMEOUT);
    CHECK_MSG(strstr(log, "channel 2: a kernel's push gave up"), "log: %s", log);
    /* a push of the channel that gave up, after it: taken, not carried out */
    CHECK_OK(kernel_push(QUIT_CHAN, 1000000000ull));
    for (uint32_t i = 0; i < SIZE - 1; i++)
        CHECK_OK(kernel_push(PUT_CHAN, 1000000000ull));
    while (f.pos < pos0 + 2 * SIZE)
        proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    CHECK_MSG(atomic_load(&puts_carried) == carried0 + 2 * SIZE - 1,
              "%llu puts carried out, expected %u (the failed channel's put is not)",
              (unsigned long long)(atomic_load(&puts_carried) - carried0), 2 * SIZE - 1);
    printf("%u give-ups on a full %u-slot ring: nothing held, the FIFO goes on\n", quitters, SIZE);
}

/* a pusher thread of the mixed case: its pushes on PUT_CHAN with a long
 * limit, every 7th on QUIT_CHAN with a short one (times out while the
 * consumer is stopped, else goes through) */
static _Atomic int ok_pushes, timeouts;
static _Atomic int stop_consumer;

static void *pusher(void *arg)
{
    (void)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        int quit = i % 7 == 3;
        int rc = kernel_push(quit ? QUIT_CHAN : PUT_CHAN, quit ? 20000 : 10000000000ull);
        if (rc == GPUPORT_OK)
            atomic_fetch_add(&ok_pushes, 1);
        else if (rc == GPUPORT_ERR_TIMEOUT && quit)
            atomic_fetch_add(&timeouts, 1);
        else
            CHECK_MSG(0, "push failed: %d", rc);
    }
    return NULL;
}

/* the consumer stops for 2 ms in every 3 (pushers pile up and some give
 * up), until told to end */
static void *consumer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_consumer)) {
        uint64_t t0 = now_ns();
        while (now_ns() - t0 < 1000000)
            proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
        t0 = now_ns();
        while (now_ns() - t0 < 2000000)
            sched_yield();
    }
    return NULL;
}

static void mixed_case(void)
{
    pthread_t p[THREADS], c;
    uint64_t pos0 = f.pos, carried0 = atomic_load(&puts_carried);

    reset_channel(QUIT_CHAN);
    capture_begin();
    CHECK(pthread_create(&c, NULL, consumer, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&p[i], NULL, pusher, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(p[i], NULL);
    atomic_store(&stop_consumer, 1);
    pthread_join(c, NULL);
    /* what is left in the ring */
    for (int i = 0; i < 100 && f.pos < head; i++)
        proxy_consume_fifo(comm, &f, GPUPORT_FIFO_DEVICE);
    capture_end();
    CHECK_MSG(atomic_load(&ok_pushes) + atomic_load(&timeouts) == THREADS * PER_THREAD,
              "%d pushed + %d timed out of %d", atomic_load(&ok_pushes), atomic_load(&timeouts),
              THREADS * PER_THREAD);
    CHECK_MSG(head == granted && f.pos == head && head - pos0 == (uint64_t)atomic_load(&ok_pushes),
              "head %llu, promised %llu, consumer at %llu, %d pushed since %llu: a hole or a "
              "slot held",
              head, granted, (unsigned long long)f.pos, atomic_load(&ok_pushes),
              (unsigned long long)pos0);
    /* every put of the open channel carried out; the quitting channel's
     * once it failed are not, those before it were */
    CHECK(atomic_load(&puts_carried) - carried0 <= (uint64_t)atomic_load(&ok_pushes));
    CHECK(atomic_load(&puts_carried) - carried0 >=
          (uint64_t)(THREADS * (PER_THREAD - PER_THREAD / 7 - 1)));
    CHECK_MSG(atomic_load(&timeouts) > 0, "no push gave up: the case was not exercised");
    if (atomic_load(&timeouts))
        CHECK_STATUS((gpuport_status_t)atomic_load(&states[QUIT_CHAN].status),
                     GPUPORT_ERR_TIMEOUT);
    printf("mixed: %d pushes, %d give-ups over time, %llu carried out; no hole, none twice\n",
           atomic_load(&ok_pushes), atomic_load(&timeouts),
           (unsigned long long)(atomic_load(&puts_carried) - carried0));
}

int main(void)
{
    comm = calloc(1, sizeof(*comm));
    states = aligned_alloc(64, NCHAN * sizeof(*states));
    CHECK(comm && states);
    memset(states, 0, NCHAN * sizeof(*states));
    comm->states = states;
    comm->config.max_channels = NCHAN;
    comm->pchans = calloc(NCHAN, sizeof(*comm->pchans));
    comm->ctrl = calloc(NCHAN, sizeof(*comm->ctrl));
    CHECK(comm->pchans && comm->ctrl);
    comm->proxy.flusher.capacity = 64;
    CHECK_OK(proxy_park_init(comm));
    for (uint32_t i = 0; i < NCHAN; i++) {
        comm->pchans[i].tl.id = i;
        comm->pchans[i].state = &states[i];
        comm->pchans[i].ops = &mock_ops;
    }
    atomic_store(&comm->pchans[QUIT_CHAN].active, 1);
    atomic_store(&comm->pchans[PUT_CHAN].active, 1);
    comm->pchans[PUT_CHAN].tl.src.size = comm->pchans[PUT_CHAN].tl.dst.rec.size = 64;
    comm->pchans[QUIT_CHAN].tl.src.size = comm->pchans[QUIT_CHAN].tl.dst.rec.size = 64;
    memset(&f, 0, sizeof(f));
    f.slots = ring;
    f.tail = &tail;
    f.size = SIZE;
    f.log2_size = LOG2;
    f.gave_up_any = &gave_up_any;

    full_ring_case(1);
    full_ring_case(SIZE);
    full_ring_case(2 * SIZE);
    full_ring_case(4 * SIZE);
    mixed_case();

    gpuport_proxy_parks_free(comm);
    free(comm->ctrl);
    free(comm->pchans);
    free(comm);
    free(states);
    printf("device FIFO give-ups: nothing held, nothing lost, their channels failed: ok\n");
    return 0;
}
