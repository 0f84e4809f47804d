/*
 * A flush beside a host call whose own send the transport declines
 * (chan_push.c's try_send, chan_wait.c's chan_inline_drained): the call
 * counts its send before the transport answers, and a flush on another
 * thread in that window must not wait for a completion that never comes.
 * Two ranks (threads), the loop transport of test/tl_loop, whose
 * host_send declines after a sleep (loop_slow_decline): rank 0's thread
 * calls put_with_signal, and while its send is being declined the main
 * thread flushes; the flush returns GPUPORT_OK (before the fix it waited
 * for GPUPORT_TIMEOUT_MS and returned GPUPORT_ERR_TIMEOUT), and rank 1
 * takes each round's signal and compares its bytes.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "testenv.h"
#include "tl_loop/loop.h"

#define REGION 4096
#define ROUNDS 10
#define MSG 256

typedef struct sender {
    gpuport_channel_t ch;
    int round;
    gpuport_status_t status;
} sender_t;

static void *send_one(void *arg)
{
    sender_t *s = arg;
    uint64_t off = (uint64_t)(s->round % 8) * MSG;

    s->status = gpuport_channel_put_with_signal(s->ch, off, off, MSG);
    return NULL;
}

/* read once a wait said the bytes are there (threads' mappings: see
 * test_tl_loop) */
__attribute__((no_sanitize_thread)) static int same(const unsigned char *a, const unsigned char *b,
                                                    size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static int rank_fn(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    unsigned char *src = malloc(REGION), *dst = malloc(REGION), expect[MSG];
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;

    (void)size;
    (void)arg;
    CHECK(src && dst);
    memset(dst, 0, REGION);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t off = (uint64_t)(r % 8) * MSG;
        for (int i = 0; i < MSG; i++)
            expect[i] = (unsigned char)(r * 13 + i);
        if (rank == 0) {
            sender_t s = {ch, r, GPUPORT_ERR_INVALID_ARG};
            pthread_t thr;
            memcpy(src + off, expect, MSG);
            atomic_store(&loop_slow_decline, 20000);
            CHECK(pthread_create(&thr, NULL, send_one, &s) == 0);
            while (!atomic_load(&loop_declining))
                usleep(100);
            /* the send is counted and not yet declined */
            CHECK_OK(gpuport_channel_flush(ch));
            CHECK(pthread_join(thr, NULL) == 0);
            atomic_store(&loop_slow_decline, 0);
            CHECK_OK(s.status);
            CHECK_OK(gpuport_channel_flush(ch));
        } else {
            CHECK_OK(gpuport_channel_wait(ch));
            CHECK_MSG(same(dst + off, expect, MSG), "round %d", r);
        }
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(src);
    free(dst);
    return 0;
}

int main(void)
{
    testenv_clear_gpuport();
    setenv("GPUPORT_TRANSPORT", "loop", 1);
    setenv("GPUPORT_HOST_INLINE", "1", 1);
    setenv("GPUPORT_TIMEOUT_MS", "5000", 1);
    CHECK(local_run(2, rank_fn, NULL) == 0);
    CHECK_MSG(atomic_load(&loop_declined) >= ROUNDS, "%llu sends declined",
              (unsigned long long)atomic_load(&loop_declined));
    printf("flush beside a declined host send: ok (%d rounds)\n", ROUNDS);
    return 0;
}
