/*
 * The proxy and the flusher hand work and completions to each other through
 * SPSC rings and never block: a ring that drops, repeats or reorders an item,
 * or reports room it does not have, loses a copy or a completion with no
 * error anywhere. Capacity edges are checked on one thread, then ordering
 * and integrity between two threads.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ring.h"

/* the size of a flusher work item */
typedef struct {
    uint64_t seq;
    uint64_t a; /* derived from seq: a torn or stale item fails the check */
    uint64_t b;
} item_t;

_Static_assert(sizeof(item_t) == 24, "item_t must be 24 bytes");

static void make(uint64_t seq, item_t *it)
{
    it->seq = seq;
    it->a = seq * 0x9e3779b97f4a7c15ull;
    it->b = ~seq ^ 0x5555555555555555ull;
}

static int valid(const item_t *it, uint64_t seq)
{
    item_t want;
    make(seq, &want);
    return memcmp(it, &want, sizeof(want)) == 0;
}

static void test_init(void)
{
    static const uint32_t bad[] = {0, 1, 3, 6, 12, 100, 0x80000001u};
    gpuport_ring_t r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_STATUS(gpuport_ring_init(&r, bad[i], sizeof(item_t)), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_ring_init(&r, 8, 0), GPUPORT_ERR_INVALID_ARG);
    CHECK_OK(gpuport_ring_init(&r, 2, sizeof(item_t)));
    CHECK(gpuport_ring_space(&r) == 2 && gpuport_ring_empty(&r));
    gpuport_ring_fini(&r);
    CHECK(r.items == NULL);
}

/* Fill and drain in uneven steps for many laps, checking space/empty/peek
 * at every step against a model. */
static void test_capacity(uint32_t cap)
{
    gpuport_ring_t r;
    item_t it;
    uint64_t pushed = 0, popped = 0, fulls = 0, empties = 0;

    CHECK_OK(gpuport_ring_init(&r, cap, sizeof(item_t)));
    CHECK(gpuport_ring_peek(&r) == NULL);
    for (uint32_t step = 0; popped < 1000ull * cap; step++) {
        uint32_t npush = 1 + step % (cap + 2), npop = 1 + (step * 7) % (cap + 1);

        for (uint32_t i = 0; i < npush; i++) {
            make(pushed, &it);
            if (pushed - popped == cap) {
                CHECK(gpuport_ring_push(&r, &it) == -1); /* full exactly at capacity */
                CHECK(gpuport_ring_space(&r) == 0);
                fulls++;
                break;
            }
            CHECK(gpuport_ring_push(&r, &it) == 0);
            pushed++;
            CHECK(gpuport_ring_space(&r) == cap - (pushed - popped));
            CHECK(!gpuport_ring_empty(&r));
        }
        for (uint32_t i = 0; i < npop; i++) {
            item_t *p = gpuport_ring_peek(&r);
            if (popped == pushed) {
                CHECK(p == NULL && gpuport_ring_empty(&r));
                empties++;
                break;
            }
            CHECK(p != NULL);
            CHECK(gpuport_ring_peek(&r) == p); /* peek does not consume */
            CHECK_MSG(valid(p, popped), "item %llu came out as seq %llu",
                      (unsigned long long)popped, (unsigned long long)p->seq);
            gpuport_ring_pop(&r);
            popped++;
            CHECK(gpuport_ring_space(&r) == cap - (pushed - popped));
            CHECK(gpuport_ring_empty(&r) == (pushed == popped));
        }
    }
    CHECK(fulls > 0 && empties > 0); /* both edges were reached */
    gpuport_ring_fini(&r);
}

typedef struct {
    gpuport_ring_t *ring;
    uint64_t count;
} producer_arg_t;

static void *producer_main(void *p)
{
    producer_arg_t *a = p;
    item_t it;

    for (uint64_t seq = 0; seq < a->count; seq++) {
        make(seq, &it);
        while (gpuport_ring_push(a->ring, &it) != 0)
            sched_yield();
    }
    return NULL;
}

#define STALL_S 60

static void test_threads(uint32_t cap, uint64_t count)
{
    gpuport_ring_t r;
    pthread_t thr;
    producer_arg_t a = {&r, count};
    uint64_t seq = 0;

    CHECK_OK(gpuport_ring_init(&r, cap, sizeof(item_t)));
    CHECK(pthread_create(&thr, NULL, producer_main, &a) == 0);
    while (seq < count) {
        item_t *p = gpuport_ring_peek(&r);
        if (!p) {
            sched_yield();
            continue;
        }
        CHECK_MSG(valid(p, seq), "item %llu came out as seq %llu (capacity %u)",
                  (unsigned long long)seq, (unsigned long long)p->seq, cap);
        gpuport_ring_pop(&r);
        seq++;
        if (seq % 1024 == 0)
            alarm(STALL_S); /* it moves: a hang is counted from here */
    }
    pthread_join(thr, NULL);
    CHECK(gpuport_ring_peek(&r) == NULL && gpuport_ring_empty(&r));
    CHECK(gpuport_ring_space(&r) == cap);
    CHECK(r.head == count && r.tail == count);
    gpuport_ring_fini(&r);
}

int main(void)
{
    /* GPUPORT_TEST_QUICK: fewer items, for valgrind */
    uint64_t count = getenv("GPUPORT_TEST_QUICK") ? 20000 : 2000000;

    /* A lost item shows as a hang: no item for STALL_S is a failure. The
     * limit counts from the last progress, not from the start: beside CPU
     * hogs, two threads handing items over by sched_yield through a ring
     * of 2 can take minutes in all. */
    alarm(STALL_S);
    test_init();
    test_capacity(2);
    test_capacity(8);
    test_capacity(64);
    test_threads(64, count);
    test_threads(2, count / 20);
    printf("ring: all checks passed\n");
    return 0;
}
