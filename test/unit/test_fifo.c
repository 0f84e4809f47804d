/*
 * The FIFO is the one structure every producer and the proxy share, and its
 * validity rule (lap parity, slots never cleared) fails silently when wrong:
 * a stale slot read as new replays an operation, a lost slot stalls the
 * proxy. So: many laps on one thread with every slot's validity checked, the
 * full-ring rules (nothing reserved on AGAIN/TIMEOUT, EXT pairs need two free
 * slots), and many producers against one consumer with every trigger
 * accounted for, in order, EXT pairs contiguous.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fifo.h"

#define EXT_EVERY 7 /* every 7th push of a producer is an EXT pair */
#define BIG_OFF (1ull << 40)
#define PUSH_TIMEOUT_NS 20000000000ull
#define STALL_NS 60000000000ull /* a lost slot stalls for ever; a loaded machine, seconds */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int same(const gpuport_trigger_t *a, const gpuport_trigger_t *b)
{
    return a->w[0] == b->w[0] && a->w[1] == b->w[1];
}

/* The payload of the seq-th trigger of the single-thread tests; every field
 * differs from its neighbours' so a slot from another lap cannot pass. */
static void make(uint64_t seq, gpuport_trigger_t *t)
{
    gpuport_trigger_encode(t, 1 + (uint32_t)(seq % 4), (uint32_t)(seq % 32768), seq * 3,
                           (seq * 5) & ((1ull << 38) - 1), seq & 0xffffffffull);
}

/* (a) */
static void test_wrap(void)
{
    enum { SIZE = 8, LAPS = 2000 };
    gpuport_fifo_t f;
    gpuport_trigger_t t[2], got;
    uint64_t seq = 0, pos, batch = 0;

    CHECK_OK(gpuport_fifo_init(&f, SIZE));
    for (uint32_t k = 0; k < SIZE; k++)
        CHECK(!gpuport_fifo_peek(&f, k, &got)); /* a zeroed ring holds nothing */
    while (f.pos < (uint64_t)SIZE * LAPS) {
        /* batches of 1..SIZE pushes, so every slot is a batch edge sometimes */
        uint32_t n = 1 + (uint32_t)(batch++ % SIZE);
        uint64_t first = seq;

        for (uint32_t i = 0; i < n; i++) {
            make(seq, &t[0]);
            CHECK_OK(gpuport_fifo_push(&f, t, 1, 0, &pos));
            CHECK(pos == seq);
            seq++;
            CHECK(gpuport_fifo_head(&f) == seq);
        }
        /* not yet written: the slot after the batch still holds its last lap */
        if (n < SIZE)
            CHECK(!gpuport_fifo_peek(&f, n, &got));
        for (uint32_t i = 0; i < n; i++) {
            CHECK(gpuport_fifo_peek(&f, 0, &got));
            make(first + i, &t[0]);
            CHECK_MSG(same(&got, &t[0]), "trigger %llu", (unsigned long long)(first + i));
            gpuport_fifo_advance(&f, 1);
        }
        /* everything consumed: every slot is stale, none may read as valid */
        for (uint32_t k = 0; k < SIZE; k++)
            CHECK_MSG(!gpuport_fifo_peek(&f, k, &got), "stale slot %u valid at position %llu", k,
                      (unsigned long long)f.pos);
    }
    CHECK(f.pos == seq && *f.tail == seq);
    gpuport_fifo_fini(&f);
}

/* (b) */
static void test_full(void)
{
    enum { SIZE = 8 };
    const uint64_t sentinel = 0xdeadbeefull;
    gpuport_fifo_t f;
    gpuport_trigger_t t[2], got;
    uint64_t pos, t0, elapsed;

    CHECK_OK(gpuport_fifo_init(&f, SIZE));
    for (uint64_t i = 0; i < SIZE; i++) {
        make(i, &t[0]);
        CHECK_OK(gpuport_fifo_push(&f, t, 1, 0, &pos));
        CHECK(pos == i);
    }
    make(100, &t[0]);
    make(101, &t[1]);
    pos = sentinel;
    CHECK_STATUS(gpuport_fifo_push(&f, t, 1, 0, &pos), GPUPORT_ERR_AGAIN);
    CHECK(gpuport_fifo_head(&f) == SIZE && pos == sentinel);
    t0 = now_ns();
    CHECK_STATUS(gpuport_fifo_push(&f, t, 1, 1000000, &pos), GPUPORT_ERR_TIMEOUT);
    elapsed = now_ns() - t0;
    CHECK_MSG(elapsed >= 1000000 && elapsed < 5000000000ull, "timed out after %llu ns",
              (unsigned long long)elapsed);
    CHECK(gpuport_fifo_head(&f) == SIZE && pos == sentinel);
    /* the refused pushes wrote nothing: the ring still holds 0..7 */
    for (uint32_t k = 0; k < SIZE; k++) {
        CHECK(gpuport_fifo_peek(&f, k, &got));
        make(k, &t[0]);
        CHECK(same(&got, &t[0]));
    }

    gpuport_fifo_advance(&f, 1); /* one free slot */
    make(SIZE, &t[0]);
    CHECK_OK(gpuport_fifo_push(&f, t, 1, 0, &pos));
    CHECK(pos == SIZE);
    CHECK_STATUS(gpuport_fifo_push(&f, t, 1, 0, &pos), GPUPORT_ERR_AGAIN);

    gpuport_fifo_advance(&f, 1); /* one free slot: not enough for a pair */
    make(SIZE + 1, &t[0]);
    make(SIZE + 2, &t[1]);
    pos = sentinel;
    CHECK_STATUS(gpuport_fifo_push(&f, t, 2, 0, &pos), GPUPORT_ERR_AGAIN);
    CHECK_STATUS(gpuport_fifo_push(&f, t, 2, 1000000, &pos), GPUPORT_ERR_TIMEOUT);
    CHECK(gpuport_fifo_head(&f) == SIZE + 1 && pos == sentinel);
    gpuport_fifo_advance(&f, 1); /* two free slots */
    CHECK_OK(gpuport_fifo_push(&f, t, 2, 0, &pos));
    CHECK(pos == SIZE + 2);
    CHECK_STATUS(gpuport_fifo_push(&f, t, 1, 0, &pos), GPUPORT_ERR_AGAIN);

    /* drain: 3..10 in order, then nothing */
    for (uint64_t i = 3; i <= SIZE + 2; i++) {
        CHECK(gpuport_fifo_peek(&f, 0, &got));
        make(i, &t[0]);
        CHECK_MSG(same(&got, &t[0]), "trigger %llu", (unsigned long long)i);
        gpuport_fifo_advance(&f, 1);
    }
    CHECK(!gpuport_fifo_peek(&f, 0, &got));
    gpuport_fifo_fini(&f);
}

typedef struct {
    gpuport_fifo_t *fifo;
    uint64_t delay_ns;
} drainer_arg_t;

/* Frees one slot after a delay, from another thread. */
static void *advance_later(void *p)
{
    drainer_arg_t *a = p;
    struct timespec ts = {0, (long)a->delay_ns};
    gpuport_trigger_t got;

    nanosleep(&ts, NULL);
    CHECK(gpuport_fifo_peek(a->fifo, 0, &got));
    gpuport_fifo_advance(a->fifo, 1);
    return NULL;
}

/* A push into a full ring waits for the consumer, for any timeout up to
 * "forever" (channel.c passes UINT64_MAX when GPUPORT_TIMEOUT_MS=0). */
static void test_wait(uint64_t timeout_ns)
{
    gpuport_fifo_t f;
    gpuport_trigger_t t[1];
    drainer_arg_t a = {&f, 50000000};
    pthread_t thr;
    uint64_t pos = 0;
    gpuport_status_t status;

    CHECK_OK(gpuport_fifo_init(&f, 4));
    make(0, &t[0]);
    for (int i = 0; i < 4; i++)
        CHECK_OK(gpuport_fifo_push(&f, t, 1, 0, &pos));
    CHECK(pthread_create(&thr, NULL, advance_later, &a) == 0);
    status = gpuport_fifo_push(&f, t, 1, timeout_ns, &pos);
    pthread_join(thr, NULL);
    CHECK_MSG(status == GPUPORT_OK,
              "push into a full FIFO with timeout %llu ns returned %s instead of waiting "
              "50 ms for the consumer",
              (unsigned long long)timeout_ns, gpuport_status_string(status));
    CHECK(pos == 4);
    gpuport_fifo_fini(&f);
}

/* (c) */
typedef struct {
    gpuport_fifo_t *fifo;
    uint32_t id;
    uint64_t count;
    gpuport_status_t status;
} producer_t;

/* Producer p's i-th trigger: the id in the channel, i in both offsets. */
static uint32_t encode_seq(uint32_t id, uint64_t i, gpuport_trigger_t t[2])
{
    if (i % EXT_EVERY == EXT_EVERY - 1) {
        uint64_t size = (5ull << 30) + i;
        gpuport_trigger_encode_ext(&t[0], id, BIG_OFF + i, BIG_OFF + 2 * i, size);
        gpuport_trigger_encode(&t[1], GPUPORT_OP_PUT, id, BIG_OFF + i, BIG_OFF + 2 * i, size);
        return 2;
    }
    gpuport_trigger_encode(&t[0], GPUPORT_OP_PUT_SIGNAL, id, i, 2 * i, i & 0xffff);
    return 1;
}

static void *producer_main(void *p)
{
    producer_t *pr = p;
    gpuport_trigger_t t[2];
    uint64_t pos;

    for (uint64_t i = 0; i < pr->count; i++) {
        uint32_t n = encode_seq(pr->id, i, t);
        pr->status = gpuport_fifo_push(pr->fifo, t, n, PUSH_TIMEOUT_NS, &pos);
        if (pr->status != GPUPORT_OK)
            break;
    }
    return NULL;
}

static void test_concurrent(uint32_t nproducers, uint64_t per_producer, uint32_t size)
{
    gpuport_fifo_t f;
    producer_t pr[8];
    pthread_t thr[8];
    uint64_t next[8] = {0}, done = 0, total = nproducers * per_producer, idle = 0;
    uint64_t slots = 0, last_progress = now_ns();

    CHECK(nproducers <= 8);
    CHECK_OK(gpuport_fifo_init(&f, size));
    for (uint32_t p = 0; p < nproducers; p++) {
        pr[p] = (producer_t){&f, p, per_producer, GPUPORT_OK};
        CHECK(pthread_create(&thr[p], NULL, producer_main, &pr[p]) == 0);
    }
    /* this thread is the proxy */
    while (done < total) {
        gpuport_trigger_t t[2], want[2];
        gpuport_op_desc_t d;
        uint32_t n, id;

        if (!gpuport_fifo_peek(&f, 0, &t[0])) {
            /* a slot reserved but never validly written stalls the proxy forever */
            CHECK_MSG((++idle & 4095) || now_ns() - last_progress < STALL_NS,
                      "consumer stalled at position %llu, %llu of %llu triggers",
                      (unsigned long long)f.pos, (unsigned long long)done,
                      (unsigned long long)total);
            sched_yield();
            continue;
        }
        last_progress = now_ns();
        id = gpuport_trigger_channel(t[0].w[0]);
        CHECK_MSG(id < nproducers, "channel %u at position %llu", id, (unsigned long long)f.pos);
        n = encode_seq(id, next[id], want);
        if (gpuport_trigger_op(t[0].w[0]) == GPUPORT_OP_EXT) {
            /* the second half is reserved with the first: it comes, from the same producer */
            while (!gpuport_fifo_peek(&f, 1, &t[1]))
                sched_yield();
            CHECK_MSG(n == 2, "producer %u's trigger %llu came with an EXT slot", id,
                      (unsigned long long)next[id]);
            CHECK_MSG(same(&t[0], &want[0]) && same(&t[1], &want[1]),
                      "producer %u: EXT pair at position %llu is not its trigger %llu", id,
                      (unsigned long long)f.pos, (unsigned long long)next[id]);
            gpuport_trigger_decode(&t[1], &t[0], &d);
            CHECK(d.channel == id && d.src_off == BIG_OFF + next[id] &&
                  d.dst_off == BIG_OFF + 2 * next[id] && d.size == (5ull << 30) + next[id]);
        } else {
            CHECK_MSG(n == 1 && same(&t[0], &want[0]),
                      "producer %u: position %llu holds src %llu, expected trigger %llu", id,
                      (unsigned long long)f.pos, (unsigned long long)(t[0].w[1] >> 32),
                      (unsigned long long)next[id]);
        }
        gpuport_fifo_advance(&f, n);
        slots += n;
        next[id]++;
        done++;
    }
    for (uint32_t p = 0; p < nproducers; p++) {
        pthread_join(thr[p], NULL);
        CHECK_OK(pr[p].status);
        CHECK(next[p] == per_producer);
    }
    CHECK(gpuport_fifo_head(&f) == slots && f.pos == slots);
    for (uint32_t k = 0; k < size; k++) {
        gpuport_trigger_t got;
        CHECK(!gpuport_fifo_peek(&f, k, &got));
    }
    gpuport_fifo_fini(&f);
}

/* (d) */
static void test_invalid(void)
{
    static const uint32_t bad[] = {
        0, 1, 2, 3, 6, 12, GPUPORT_FIFO_MAX_SIZE + 1, GPUPORT_FIFO_MAX_SIZE * 2};
    gpuport_fifo_t f;
    gpuport_trigger_t t[3];
    uint64_t pos = 42;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_STATUS(gpuport_fifo_init(&f, bad[i]), GPUPORT_ERR_INVALID_ARG);
    CHECK_OK(gpuport_fifo_init(&f, GPUPORT_FIFO_MIN_SIZE));
    memset(t, 0, sizeof(t));
    CHECK_STATUS(gpuport_fifo_push(&f, t, 0, 0, &pos), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_fifo_push(&f, t, 3, 0, &pos), GPUPORT_ERR_INVALID_ARG);
    CHECK(pos == 42 && gpuport_fifo_head(&f) == 0);
    gpuport_fifo_fini(&f);
}

int main(void)
{
    /* GPUPORT_TEST_QUICK: fewer triggers, for valgrind */
    uint64_t per = getenv("GPUPORT_TEST_QUICK") ? 5000 : 250000;

    alarm(120); /* a lost trigger shows as a hang: make it a failure */
    test_invalid();
    test_wrap();
    test_full();
    test_wait(10000000000ull);
    test_concurrent(4, per, 64);
    test_concurrent(4, per, 1024);
    test_concurrent(8, per, 64);
    test_concurrent(8, per, 1024);
    /* last: exposes a library bug (deadline overflow in gpuport_fifo_push) */
    test_wait(UINT64_MAX);
    printf("fifo: all checks passed\n");
    return 0;
}
