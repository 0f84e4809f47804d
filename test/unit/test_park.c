/*
 * One channel without room holds no other (proxy_park.c). Three ranks
 * (threads of one process, the loop transport of test/tl_loop, a host FIFO
 * of 16 slots): rank 0's channel A to rank 1 finds no room at its
 * transport (loop_block) while rank 0 pushes more triggers into it than
 * the FIFO holds; meanwhile rank 0's channel B to rank 2 ping-pongs and
 * its second channel A2 to rank 1 delivers, every byte compared, and A
 * has delivered nothing. Once A has room again everything it was given
 * arrives in order (overlapping puts: the last one's bytes; the value and
 * the signal after them). With a short time limit, a channel that never
 * gets room fails on its own with GPUPORT_ERR_TIMEOUT, named in the log,
 * its peer sees the failure, and B goes on.
 * Without parking the pushes into A time out on the full FIFO and B's
 * ping-pong stops.
 *
 * Destroy with GPUPORT_PARK_HOST_MAX (2,048) triggers parked, two ranks:
 *  - drains: rank 0's destroy of A, blocked, must not wait for room (host
 *    operations do past that count): its close and flush join the park at
 *    once (2,050 parked) and destroy waits for them; once A has room, all
 *    2,048 puts are carried out, destroy returns GPUPORT_OK, and rank 1
 *    finds the last put's bytes, then the close;
 *  - the peer closes meanwhile: rank 1 destroys its side of A while rank
 *    0's destroy waits behind the parked puts; A fails (closed), its puts
 *    are not carried out, and rank 0's destroy still drains (the failed
 *    channel's flush, the peer's answer) and returns GPUPORT_OK.
 * When the close waited for room instead, it was never seen parked; and
 * where the channel failed while it waited, destroy returned the channel's
 * error, releasing the channel without its drain.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "testenv.h"
#include "tl_loop/loop.h"

#define REGION 65536
#define NPUT 300    /* puts into the blocked channel: many times the FIFO */
#define ROUNDS 200  /* B's ping-pong rounds */
#define MSG 64
#define VALUE_OFF 4096
#define A2_SIZE 1000

static unsigned char pattern(int rank, uint64_t i)
{
    return (unsigned char)(rank * 29 + (int)(i * 7 % 251));
}

typedef struct side {
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
} side_t;

static void side_open(gpuport_comm_t comm, int rank, int peer, side_t *s)
{
    s->src = malloc(REGION);
    s->dst = malloc(REGION);
    CHECK(s->src && s->dst);
    for (uint64_t i = 0; i < REGION; i++)
        s->src[i] = pattern(rank, i);
    memset(s->dst, 0xee, REGION);
    CHECK_OK(gpuport_mem_register(comm, s->src, REGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(comm, s->dst, REGION, &s->mdst));
    CHECK_OK(gpuport_channel_create(comm, peer, s->msrc, s->mdst, &s->ch));
    CHECK(strcmp(gpuport_channel_transport(s->ch), "loop") == 0);
}

static void side_close(side_t *s, gpuport_status_t want)
{
    CHECK_STATUS(gpuport_channel_destroy(s->ch), want);
    CHECK_OK(gpuport_mem_deregister(s->msrc));
    CHECK_OK(gpuport_mem_deregister(s->mdst));
    free(s->src);
    free(s->dst);
}

/* What the peer's proxy wrote, read once a wait said it is there (the
 * threads' mappings differ: not instrumented, as test_tl_loop's reads). */
__attribute__((no_sanitize_thread)) static int bytes_from(const unsigned char *dst, int peer,
                                                          uint64_t off, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (dst[off + i] != pattern(peer, off + i))
            return 0;
    return 1;
}

__attribute__((no_sanitize_thread)) static uint64_t word_at(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* B's ping-pong seen from rank 0 (initiator) or rank 2; rounds per second. */
static double ping_pong(side_t *b, int initiator, int rounds)
{
    double t0 = now_s();

    for (int r = 0; r < rounds; r++) {
        uint64_t off = (uint64_t)(r % 64) * MSG;
        if (initiator) {
            CHECK_OK(gpuport_channel_put_with_signal(b->ch, off, off, MSG));
            CHECK_OK(gpuport_channel_wait(b->ch));
        } else {
            CHECK_OK(gpuport_channel_wait(b->ch));
            CHECK_MSG(bytes_from(b->dst, 0, off, MSG), "round %d", r);
            CHECK_OK(gpuport_channel_put_with_signal(b->ch, off, off, MSG));
        }
    }
    return rounds / (now_s() - t0);
}

/* src of rank 0's channel A: 8 bytes at 8 * i hold i, so each put of
 * 8 * i to destination 0 leaves its own number there */
static void number_source(unsigned char *src, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            src[8 * i + (uint64_t)k] = (unsigned char)(i >> (8 * k));
}

static int parked_then_delivered(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    side_t a, a2, b;
    int ready;

    (void)size;
    (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (rank == 0) {
        double open_rate, blocked_rate;
        side_open(comm, 0, 1, &a);
        side_open(comm, 0, 1, &a2);
        side_open(comm, 0, 2, &b);
        number_source(a.src, NPUT);
        open_rate = ping_pong(&b, 1, ROUNDS);
        loop_block(0, a.ch->id);
        for (uint64_t i = 0; i < NPUT; i++)
            CHECK_OK(gpuport_channel_put(a.ch, 0, 8 * i, 8));
        CHECK_OK(gpuport_channel_put_value_with_signal(a.ch, VALUE_OFF, 0x5eedull));
        CHECK_MSG(atomic_load(&a.ch->pchan->parked) > 0 || atomic_load(&loop_refused) > 0,
                  "nothing of A was refused");
        blocked_rate = ping_pong(&b, 1, ROUNDS);
        CHECK_OK(gpuport_channel_put_with_signal(a2.ch, 0, 0, A2_SIZE));
        CHECK_OK(gpuport_channel_flush(a2.ch));
        CHECK_OK(gpuport_channel_flush(b.ch));
        CHECK_OK(gpuport_channel_status(a.ch));
        CHECK(atomic_load(&loop_refused) > 0);
        printf("B ping-pong beside a channel without room: %.0f rounds/s (%.0f before it); "
               "%u of A's triggers parked\n",
               blocked_rate, open_rate, atomic_load(&a.ch->pchan->parked));
        CHECK_OK(bs->barrier(bs->ctx)); /* 1: rank 1 looked at A */
        loop_block(-1, 0);
        CHECK_OK(gpuport_channel_flush(a.ch));
        CHECK(atomic_load(&a.ch->pchan->parked) == 0);
        CHECK_OK(bs->barrier(bs->ctx)); /* 2: rank 1 checked A's bytes */
        side_close(&a, GPUPORT_OK);
        side_close(&a2, GPUPORT_OK);
        side_close(&b, GPUPORT_OK);
    } else if (rank == 1) {
        side_open(comm, 1, 0, &a);
        side_open(comm, 1, 0, &a2);
        CHECK_OK(gpuport_channel_wait(a2.ch));
        CHECK(bytes_from(a2.dst, 0, 0, A2_SIZE));
        /* A, blocked, delivered nothing */
        CHECK_OK(gpuport_channel_poll(a.ch, &ready));
        CHECK(ready == 0);
        CHECK(word_at(a.dst) == 0xeeeeeeeeeeeeeeeeull);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        CHECK_OK(gpuport_channel_wait(a.ch));
        /* the last of the overlapping puts, then the value */
        CHECK_MSG(word_at(a.dst) == NPUT - 1, "A's destination holds %llu",
                  (unsigned long long)word_at(a.dst));
        CHECK(word_at(a.dst + VALUE_OFF) == 0x5eedull);
        CHECK_OK(gpuport_channel_poll(a.ch, &ready));
        CHECK(ready == 0); /* one signal */
        CHECK_OK(bs->barrier(bs->ctx)); /* 2 */
        side_close(&a, GPUPORT_OK);
        side_close(&a2, GPUPORT_OK);
    } else {
        side_open(comm, 2, 0, &b);
        ping_pong(&b, 0, ROUNDS);
        ping_pong(&b, 0, ROUNDS);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        CHECK_OK(bs->barrier(bs->ctx)); /* 2 */
        side_close(&b, GPUPORT_OK);
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* With GPUPORT_TIMEOUT_MS short: A never gets room and fails on its own. */
static int stuck_times_out(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    side_t a, b;

    (void)size;
    (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (rank == 0) {
        double t0;
        side_open(comm, 0, 1, &a);
        side_open(comm, 0, 2, &b);
        loop_block(0, a.ch->id);
        CHECK_OK(gpuport_channel_put_with_signal(a.ch, 0, 0, MSG));
        t0 = now_s();
        /* the proxy's own limit fails it; bounded here only against a hang */
        while (gpuport_channel_status(a.ch) == GPUPORT_OK && now_s() - t0 < 60) {
            CHECK_OK(gpuport_channel_put(b.ch, 0, 0, MSG));
            CHECK_OK(gpuport_channel_flush(b.ch));
            usleep(1000);
        }
        CHECK_STATUS(gpuport_channel_status(a.ch), GPUPORT_ERR_TIMEOUT);
        CHECK_STATUS(gpuport_channel_flush(a.ch), GPUPORT_ERR_TIMEOUT);
        loop_block(-1, 0);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1: A failed */
        ping_pong(&b, 1, 20); /* every round checked; rank 2 may close after it */
        side_close(&a, GPUPORT_OK); /* a failed channel is released all the same */
        side_close(&b, GPUPORT_OK);
    } else if (rank == 1) {
        side_open(comm, 1, 0, &a);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        CHECK_STATUS(gpuport_channel_wait(a.ch), GPUPORT_ERR_PEER);
        side_close(&a, GPUPORT_OK); /* a closed channel's destroy succeeds */
    } else {
        side_open(comm, 2, 0, &b);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        ping_pong(&b, 0, 20);
        side_close(&b, GPUPORT_OK);
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* Rank 0's channel A blocked, GPUPORT_PARK_HOST_MAX puts (put i leaves
 * number i at destination 0) pushed and parked. */
static void fill_park(side_t *a)
{
    double t0;

    CHECK(GPUPORT_PARK_HOST_MAX * 8 <= REGION);
    number_source(a->src, GPUPORT_PARK_HOST_MAX);
    loop_block(0, a->ch->id);
    for (uint64_t i = 0; i < GPUPORT_PARK_HOST_MAX; i++)
        CHECK_OK(gpuport_channel_put(a->ch, 0, 8 * i, 8));
    t0 = now_s();
    while (atomic_load(&a->ch->pchan->parked) < GPUPORT_PARK_HOST_MAX && now_s() - t0 < 30)
        usleep(1000);
    CHECK_MSG(atomic_load(&a->ch->pchan->parked) == GPUPORT_PARK_HOST_MAX, "%u parked",
              atomic_load(&a->ch->pchan->parked));
}

typedef struct destroyer {
    side_t *side;
    gpuport_status_t status;
    _Atomic int done;
} destroyer_t;

static void *destroy_main(void *arg)
{
    destroyer_t *d = arg;

    d->status = gpuport_channel_destroy(d->side->ch);
    atomic_store(&d->done, 1);
    return NULL;
}

static void side_free(side_t *s)
{
    CHECK_OK(gpuport_mem_deregister(s->msrc));
    CHECK_OK(gpuport_mem_deregister(s->mdst));
    free(s->src);
    free(s->dst);
}

static _Atomic uint64_t drained_puts; /* rank 0's count, for rank 1 */

static int destroy_drains(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    side_t a;

    (void)size;
    (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (rank == 0) {
        uint64_t puts0 = atomic_load(&loop_stats.puts);
        destroyer_t d = {&a, GPUPORT_ERR_INTERNAL, 0};
        pthread_t t;
        double t0;
        side_open(comm, 0, 1, &a);
        fill_park(&a);
        atomic_store(&drained_puts, GPUPORT_PARK_HOST_MAX);
        CHECK(pthread_create(&t, NULL, destroy_main, &d) == 0);
        /* its close and flush join the park, room or not */
        t0 = now_s();
        while (atomic_load(&a.ch->pchan->parked) < GPUPORT_PARK_HOST_MAX + 2 && now_s() - t0 < 20)
            usleep(1000);
        CHECK_MSG(atomic_load(&a.ch->pchan->parked) == GPUPORT_PARK_HOST_MAX + 2,
                  "destroy's close and flush were not parked behind A's %u puts within 20 s "
                  "(%u parked)",
                  GPUPORT_PARK_HOST_MAX, atomic_load(&a.ch->pchan->parked));
        /* nothing of A is carried out, and destroy waits for it */
        CHECK(atomic_load(&loop_stats.puts) == puts0);
        CHECK(atomic_load(&d.done) == 0);
        loop_block(-1, 0);
        CHECK(pthread_join(t, NULL) == 0);
        CHECK_OK(d.status);
        CHECK_MSG(atomic_load(&loop_stats.puts) - puts0 == GPUPORT_PARK_HOST_MAX,
                  "%llu puts carried out",
                  (unsigned long long)(atomic_load(&loop_stats.puts) - puts0));
        CHECK_OK(bs->barrier(bs->ctx)); /* 1: rank 0's destroy returned */
        side_free(&a);
    } else {
        side_open(comm, 1, 0, &a);
        /* no signal: the close comes after every put */
        CHECK_STATUS(gpuport_channel_wait(a.ch), GPUPORT_ERR_CLOSED);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        CHECK_MSG(word_at(a.dst) == atomic_load(&drained_puts) - 1, "A's destination holds %llu",
                  (unsigned long long)word_at(a.dst));
        side_close(&a, GPUPORT_OK);
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* Rank 1 closes its side of A while rank 0's destroy of A waits behind
 * the 2,048 parked puts: the channel fails (closed by the peer), the puts
 * are not carried out, and the destroy still drains (the failed channel's
 * flush, the peer's answer) and returns GPUPORT_OK. */
static int destroy_peer_closes(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    side_t a;

    (void)size;
    (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (rank == 0) {
        uint64_t puts0 = atomic_load(&loop_stats.puts);
        destroyer_t d = {&a, GPUPORT_ERR_INTERNAL, 0};
        pthread_t t;
        double t0;
        side_open(comm, 0, 1, &a);
        fill_park(&a);
        CHECK(pthread_create(&t, NULL, destroy_main, &d) == 0);
        t0 = now_s();
        while (atomic_load(&a.ch->pchan->parked) < GPUPORT_PARK_HOST_MAX + 2 && now_s() - t0 < 20)
            usleep(1000);
        CHECK_MSG(atomic_load(&a.ch->pchan->parked) == GPUPORT_PARK_HOST_MAX + 2, "%u parked",
                  atomic_load(&a.ch->pchan->parked));
        CHECK(atomic_load(&d.done) == 0);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1: rank 1 may close its side */
        CHECK(pthread_join(t, NULL) == 0);
        CHECK_OK(d.status);
        CHECK(atomic_load(&loop_stats.puts) == puts0); /* refused after the close */
        loop_block(-1, 0);
        side_free(&a);
    } else {
        side_open(comm, 1, 0, &a);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        CHECK_OK(gpuport_channel_destroy(a.ch));
        CHECK(word_at(a.dst) == 0xeeeeeeeeeeeeeeeeull);
        side_free(&a);
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

static int capturing;

static void show_capture(void)
{
    if (capturing)
        fputs(capture_end(), stderr);
}

int main(void)
{
    const char *log;

    testenv_clear_gpuport();
    setenv("GPUPORT_TRANSPORT", "loop", 1);
    setenv("GPUPORT_FIFO_SIZE", "16", 1);
    CHECK(local_run(3, parked_then_delivered, NULL) == 0);
    printf("parked, then delivered in order: ok\n");

    setenv("GPUPORT_TIMEOUT_MS", "1500", 1);
    atomic_store(&loop_refused, 0);
    capture_begin();
    capturing = 1;
    /* a failed check inside exits with its message in the capture: shown */
    atexit(show_capture);
    CHECK(local_run(3, stuck_times_out, NULL) == 0);
    capturing = 0;
    log = capture_end();
    CHECK_MSG(strstr(log, "its loop transport had no room for a put_signal") &&
                  strstr(log, "(to rank 1)"),
              "log: %s", log);
    printf("a channel without room fails on its own: ok\n");

    unsetenv("GPUPORT_TIMEOUT_MS");
    CHECK(local_run(2, destroy_drains, NULL) == 0);
    printf("destroy with %u triggers parked drains them: ok\n", GPUPORT_PARK_HOST_MAX);

    CHECK(local_run(2, destroy_peer_closes, NULL) == 0);
    printf("a channel whose peer closes while its destroy drains is released: ok\n");
    return 0;
}
