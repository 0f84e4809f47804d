/*
 * Folded signals (the proxy hands a channel's consecutive signals to its
 * transport as one count): nothing lost, nothing made up, nothing early.
 *  - many pushers: T host threads push S signals each on one channel at
 *    once; the receiver's wait succeeds exactly T*S times and then finds
 *    nothing, and its count is exactly T*S;
 *  - ordering: rounds of put A, three signals, put B, one signal; after
 *    the receiver's first wait of a round A's bytes are there, after its
 *    fourth B's are: a folded signal is never seen before the puts ahead
 *    of it, and a put between signals splits them;
 *  - flush after signals: the sender's flush returns only once its
 *    signals were handed over (the receiver's count is already complete);
 *  - a signal or flush trigger with garbage in word 1 (which the device
 *    API leaves unwritten) is a plain signal or flush.
 * Over shm and tcp (loopback), ranks as threads of one process; over shm
 * with GPUPORT_HOST_INLINE on (the default: a signal whose channel has
 * nothing in flight is its caller's, so the counts mix the callers' own
 * signals with the proxy's folded ones) and off (every signal folded).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"

#define THREADS 6
#define PER_THREAD 4000
#define ROUNDS 300
#define REGION 8192

typedef struct {
    gpuport_channel_t ch;
    int fails;
} pusher_t;

static void *push_signals(void *arg)
{
    pusher_t *p = arg;

    for (int i = 0; i < PER_THREAD; i++)
        if (gpuport_channel_signal(p->ch) != GPUPORT_OK)
            p->fails++;
    return NULL;
}

static void barrier(gpuport_bootstrap_t *bs)
{
    CHECK_STATUS(bs->barrier(bs->ctx), GPUPORT_OK);
}

/* Not instrumented by TSan: ordered by an atomic on memory mapped twice
 * (test_local_channels.c says why). */
__attribute__((no_sanitize_thread))
static int bytes_are(const unsigned char *p, unsigned char v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

__attribute__((no_sanitize_thread))
static void fill(unsigned char *p, unsigned char v, size_t n)
{
    memset(p, v, n);
}

static int run(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    const char *transport = arg;
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    unsigned char *src, *dst;
    int ready = -1;

    (void)size;
    CHECK_STATUS(gpuport_comm_create(bs, &comm), GPUPORT_OK);
    CHECK_STATUS(gpuport_mem_alloc(comm, REGION, (void **)&src), GPUPORT_OK);
    CHECK_STATUS(gpuport_mem_alloc(comm, REGION, (void **)&dst), GPUPORT_OK);
    memset(dst, 0, REGION);
    CHECK_STATUS(gpuport_mem_register(comm, src, REGION, &msrc), GPUPORT_OK);
    CHECK_STATUS(gpuport_mem_register(comm, dst, REGION, &mdst), GPUPORT_OK);
    CHECK_STATUS(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch), GPUPORT_OK);

    /* many pushers, exact count */
    if (rank == 0) {
        pthread_t t[THREADS];
        pusher_t p[THREADS];
        uint64_t inl = atomic_load(&comm->host_inline_ops), by_caller;
        for (int i = 0; i < THREADS; i++) {
            p[i].ch = ch;
            p[i].fails = 0;
            CHECK(pthread_create(&t[i], NULL, push_signals, &p[i]) == 0);
        }
        for (int i = 0; i < THREADS; i++) {
            pthread_join(t[i], NULL);
            CHECK_MSG(p[i].fails == 0, "pusher %d: %d signals refused", i, p[i].fails);
        }
        CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_OK);
        /* the signals their callers carried out themselves (GPUPORT_HOST_INLINE
         * on shm, where no other signal of the channel was in flight) and
         * those the proxy took add up to every signal pushed */
        by_caller = atomic_load(&comm->host_inline_ops) - inl;
        printf("%s: %d signals: %llu carried out by their callers, the rest became %llu "
               "transport signals\n",
               transport, THREADS * PER_THREAD, (unsigned long long)by_caller,
               (unsigned long long)atomic_load(&comm->proxy.sig_sent));
        CHECK_MSG(atomic_load(&comm->proxy.sig_taken) + by_caller == THREADS * PER_THREAD,
                  "%llu taken by the proxy + %llu by their callers",
                  (unsigned long long)atomic_load(&comm->proxy.sig_taken),
                  (unsigned long long)by_caller);
        CHECK(by_caller == THREADS * PER_THREAD ||
              (atomic_load(&comm->proxy.sig_sent) >= 1 &&
               atomic_load(&comm->proxy.sig_sent) <= THREADS * PER_THREAD - by_caller));
        if (!comm->config.host_inline)
            CHECK_MSG(by_caller == 0, "GPUPORT_HOST_INLINE=0, yet %llu signals went inline",
                      (unsigned long long)by_caller);
    }
    barrier(bs); /* every signal handed over and flushed */
    if (rank == 1) {
        for (int i = 0; i < THREADS * PER_THREAD; i++)
            CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_OK);
        CHECK_STATUS(gpuport_channel_poll(ch, &ready), GPUPORT_OK);
        CHECK_MSG(ready == 0, "a signal more than the %d pushed", THREADS * PER_THREAD);
        CHECK_MSG(atomic_load(&comm->ctrl[ch->id].value) == THREADS * PER_THREAD,
                  "count %llu, pushed %d",
                  (unsigned long long)atomic_load(&comm->ctrl[ch->id].value),
                  THREADS * PER_THREAD);
    }
    barrier(bs);

    /* ordering: put A, 3 signals, put B, 1 signal */
    for (int r = 0; r < ROUNDS; r++) {
        unsigned char a = (unsigned char)(2 * r + 1), b = (unsigned char)(2 * r + 2);
        if (rank == 0) {
            fill(src, a, REGION / 2);
            fill(src + REGION / 2, b, REGION / 2);
            CHECK_STATUS(gpuport_channel_put(ch, 0, 0, REGION / 2), GPUPORT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_STATUS(gpuport_channel_signal(ch), GPUPORT_OK);
            CHECK_STATUS(gpuport_channel_put_with_signal(ch, REGION / 2, REGION / 2, REGION / 2),
                         GPUPORT_OK);
            CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_OK);
            CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_OK); /* the ack: sources reusable */
        } else {
            CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_OK);
            CHECK_MSG(bytes_are(dst, a, REGION / 2), "%s round %d: put A not there at its signal",
                      transport, r);
            CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_OK);
            CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_OK);
            CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_OK);
            CHECK_MSG(bytes_are(dst + REGION / 2, b, REGION / 2),
                      "%s round %d: put B not there at its signal", transport, r);
            CHECK_STATUS(gpuport_channel_signal(ch), GPUPORT_OK);
        }
    }
    CHECK_STATUS(gpuport_channel_poll(ch, &ready), GPUPORT_OK);
    CHECK_MSG(ready == 0, "rank %d: a signal more than sent", rank);
    barrier(bs);

    /* word 1 of a signal or flush trigger is not looked at (the device API
     * leaves it unwritten): garbage there changes nothing */
    if (rank == 0) {
        uint64_t pos;
        CHECK_STATUS(gpuport_channel_push(ch, GPUPORT_OP_SIGNAL, 0x12345678u, 0x9abcdef0u, 0, &pos),
                     GPUPORT_OK);
        CHECK_STATUS(gpuport_channel_push(ch, GPUPORT_OP_FLUSH, 0xfffffff0u, 0x7u, 0, &pos),
                     GPUPORT_OK);
        CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_OK);
        CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_OK);
    } else {
        CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_OK);
    }
    barrier(bs);
    CHECK_STATUS(gpuport_channel_poll(ch, &ready), GPUPORT_OK);
    CHECK_MSG(ready == 0, "rank %d: a signal more than sent (garbage word 1)", rank);
    CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_OK);
    barrier(bs); /* a destroy fails the peer's later operations */
    CHECK_STATUS(gpuport_channel_destroy(ch), GPUPORT_OK);
    CHECK_STATUS(gpuport_mem_deregister(msrc), GPUPORT_OK);
    CHECK_STATUS(gpuport_mem_deregister(mdst), GPUPORT_OK);
    CHECK_STATUS(gpuport_comm_destroy(comm), GPUPORT_OK);
    return 0;
}

int main(void)
{
    static const char *const transports[] = {"shm", "tcp"};

    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_TIMEOUT_MS", "20000", 1);
    setenv("GPUPORT_FIFO_SIZE", "64", 1);
    for (int t = 0; t < 2; t++) {
        setenv("GPUPORT_TRANSPORT", transports[t], 1);
        CHECK_MSG(local_run(2, run, (void *)transports[t]) == 0, "%s failed", transports[t]);
    }
    /* shm again with every signal through the proxy, folded */
    setenv("GPUPORT_TRANSPORT", "shm", 1);
    setenv("GPUPORT_HOST_INLINE", "0", 1);
    CHECK_MSG(local_run(2, run, (void *)"shm, GPUPORT_HOST_INLINE=0") == 0, "shm, inline off");
    unsetenv("GPUPORT_HOST_INLINE");
    printf("folded signals: counts exact, never ahead of their puts, over shm (the callers' "
           "own signals among them, and none) and tcp\n");
    return 0;
}
