/*
 * Waits that compare (gpuport_channel_wait_until) and the signal count
 * (gpuport_channel_signal_count), between two processes (fork + socketpair
 * bootstrap), on one host (shm) and as two host identities (tcp):
 *  - counts: the count starts at 0 and is exactly the signals sent;
 *    wait_until(v) returns once it reaches v and leaves the consumed count
 *    at v (a poll then finds nothing, a wait takes signal v + 1), returns at
 *    once for a value already passed, and mixes with wait and poll;
 *  - timeout: a value never reached ends in GPUPORT_ERR_TIMEOUT after the
 *    limit, nothing consumed, the count unchanged;
 *  - a sequence-numbered ping-pong: round k waits until k (no loop of
 *    waits), the value put before signal k is there;
 *  - many threads waiting for the same value all return when one signal
 *    reaches it, and none takes a later signal;
 *  - the peer's orderly close: a value beyond the signals it sent ends in
 *    GPUPORT_ERR_CLOSED at once (not at the timeout), the count is final
 *    and readable, values it reached still return GPUPORT_OK;
 *  - the peer's death: GPUPORT_ERR_PEER, likewise;
 *  - NULL handles and a NULL count_p are refused.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "pair_bootstrap.h"
#include "short_timeout.h"

#define REGION 4096
#define ROUNDS 200
#define WAITERS 4

static int g_distinct_hosts; /* 1: each process its own host identity (tcp) */

typedef struct side {
    gpuport_bootstrap_t *bs;
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
} side_t;

static void side_open(side_t *s, gpuport_bootstrap_t *bs)
{
    memset(s, 0, sizeof(*s));
    s->bs = bs;
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->src));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->dst));
    CHECK_OK(gpuport_mem_register(s->comm, s->src, REGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, REGION, &s->mdst));
    CHECK_OK(gpuport_channel_create(s->comm, 1 - bs->rank, s->msrc, s->mdst, &s->ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(s->ch), g_distinct_hosts ? "tcp" : "shm") == 0,
              "transport %s", gpuport_channel_transport(s->ch));
}

static void barrier(side_t *s)
{
    CHECK_OK(s->bs->barrier(s->bs->ctx));
}

static uint64_t count_of(gpuport_channel_t ch)
{
    uint64_t c = UINT64_MAX;
    CHECK_OK(gpuport_channel_signal_count(ch, &c));
    return c;
}

/* the value the peer's put_value wrote at off, loaded as one word */
static uint64_t value_at(const unsigned char *dst, uint64_t off)
{
    return atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)(dst + off), memory_order_acquire);
}

static void signals(gpuport_channel_t ch, int n)
{
    for (int i = 0; i < n; i++)
        CHECK_OK(gpuport_channel_signal(ch));
    CHECK_OK(gpuport_channel_flush(ch));
}

static void *wait_for_value(void *arg)
{
    gpuport_channel_t ch = *(gpuport_channel_t *)arg;
    return (void *)(intptr_t)gpuport_channel_wait_until(ch, ROUNDS + 9);
}

static int counts(gpuport_bootstrap_t *bs)
{
    side_t s;
    int ready = -1;
    uint64_t t0, ms;

    side_open(&s, bs);
    CHECK(count_of(s.ch) == 0);
    CHECK_OK(gpuport_channel_wait_until(s.ch, 0));
    barrier(&s);

    /* five signals: one wait_until takes them all */
    if (bs->rank == 0)
        signals(s.ch, 5);
    else {
        CHECK_OK(gpuport_channel_wait_until(s.ch, 5));
        CHECK_MSG(count_of(s.ch) == 5, "count %llu after 5 signals",
                  (unsigned long long)count_of(s.ch));
        CHECK_OK(gpuport_channel_poll(s.ch, &ready));
        CHECK_MSG(ready == 0, "a poll after wait_until(5) took a signal");
        t0 = gpuport_now_ns();
        CHECK_OK(gpuport_channel_wait_until(s.ch, 3)); /* passed already */
        CHECK_OK(gpuport_channel_wait_until(s.ch, 5));
        CHECK(gpuport_now_ns() - t0 < 1000000000ull);
    }
    barrier(&s);

    /* three more: a wait takes the sixth, wait_until(8) the rest */
    if (bs->rank == 0)
        signals(s.ch, 3);
    else {
        CHECK_OK(gpuport_channel_wait(s.ch));
        CHECK_OK(gpuport_channel_wait_until(s.ch, 8));
        CHECK_OK(gpuport_channel_poll(s.ch, &ready));
        CHECK_MSG(ready == 0, "a signal left after wait and wait_until(8)");
        CHECK(count_of(s.ch) == 8);

        /* a count never reached: the limit, nothing consumed */
        test_short_timeout(s.comm, 300);
        t0 = gpuport_now_ns();
        CHECK_STATUS(gpuport_channel_wait_until(s.ch, 9), GPUPORT_ERR_TIMEOUT);
        ms = (gpuport_now_ns() - t0) / 1000000;
        CHECK_MSG(ms >= 250 && ms < 10000, "the timeout came after %llu ms, limit 300",
                  (unsigned long long)ms);
        test_short_timeout(s.comm, 30000);
        CHECK(count_of(s.ch) == 8);
    }
    barrier(&s);

    /* ping-pong by sequence number: rank 1's count is 8 ahead */
    for (uint64_t k = 1; k <= ROUNDS; k++) {
        if (bs->rank == 0) {
            CHECK_OK(gpuport_channel_put_value_with_signal(s.ch, 0, k));
            CHECK_OK(gpuport_channel_wait_until(s.ch, k));
            CHECK_MSG(value_at(s.dst, 8) == 1000 + k, "round %llu: value %llu at the signal",
                      (unsigned long long)k, (unsigned long long)value_at(s.dst, 8));
        } else {
            CHECK_OK(gpuport_channel_wait_until(s.ch, 8 + k));
            CHECK_MSG(value_at(s.dst, 0) == k, "round %llu: value %llu at the signal",
                      (unsigned long long)k, (unsigned long long)value_at(s.dst, 0));
            CHECK_OK(gpuport_channel_put_value_with_signal(s.ch, 8, 1000 + k));
        }
    }
    CHECK(count_of(s.ch) == (bs->rank == 0 ? ROUNDS : ROUNDS + 8));
    barrier(&s);

    /* WAITERS threads wait for the same value: one signal ends all of
     * their waits, and the signal after it is left for a poll */
    if (bs->rank == 1) {
        pthread_t t[WAITERS];
        for (int i = 0; i < WAITERS; i++)
            CHECK(pthread_create(&t[i], NULL, wait_for_value, &s.ch) == 0);
        barrier(&s);
        for (int i = 0; i < WAITERS; i++) {
            void *rc;
            pthread_join(t[i], &rc);
            CHECK_MSG((intptr_t)rc == GPUPORT_OK, "waiter %d: %s", i,
                      gpuport_status_string((gpuport_status_t)(intptr_t)rc));
        }
        barrier(&s);
        CHECK_OK(gpuport_channel_wait(s.ch)); /* signal ROUNDS + 10 */
        CHECK_OK(gpuport_channel_poll(s.ch, &ready));
        CHECK(ready == 0 && count_of(s.ch) == ROUNDS + 10);
    } else {
        barrier(&s);
        signals(s.ch, 1);
        barrier(&s);
        signals(s.ch, 1);
    }
    barrier(&s);

    /* refusals */
    CHECK_STATUS(gpuport_channel_wait_until(NULL, 1), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_signal_count(NULL, &(uint64_t){0}), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_signal_count(s.ch, NULL), GPUPORT_ERR_INVALID_ARG);
    barrier(&s);
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

/* The peer sends two signals and closes (how 0) or dies (how 1); this side
 * then waits until 3, which can no longer come. */
static int peer_ends(gpuport_bootstrap_t *bs, int how)
{
    side_t s;
    gpuport_status_t want = how ? GPUPORT_ERR_PEER : GPUPORT_ERR_CLOSED, st;
    uint64_t t0, ms;
    int ready = -1;

    side_open(&s, bs);
    if (bs->rank == 1) {
        signals(s.ch, 2);
        if (how)
            _exit(0);
        CHECK_OK(gpuport_channel_destroy(s.ch));
        barrier(&s);
        barrier(&s);
        CHECK_OK(gpuport_comm_destroy(s.comm));
        return 0;
    }
    if (!how)
        barrier(&s); /* the close is done */
    t0 = gpuport_now_ns();
    st = gpuport_channel_wait_until(s.ch, 3);
    ms = (gpuport_now_ns() - t0) / 1000000;
    CHECK_MSG(st == want && ms < 10000, "wait_until(3) after the peer's %s: %s in %llu ms",
              how ? "death" : "close", gpuport_status_string(st), (unsigned long long)ms);
    CHECK(count_of(s.ch) == 2); /* final, readable */
    CHECK_OK(gpuport_channel_wait_until(s.ch, 2)); /* they came before the end */
    CHECK_STATUS(gpuport_channel_poll(s.ch, &ready), want);
    CHECK_STATUS(gpuport_channel_wait_until(s.ch, 3), want);
    if (!how)
        barrier(&s);
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

static int peer_closes(gpuport_bootstrap_t *bs)
{
    return peer_ends(bs, 0);
}

static int peer_dies(gpuport_bootstrap_t *bs)
{
    return peer_ends(bs, 1);
}

static void run_pair(int (*fn)(gpuport_bootstrap_t *), const char *name)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank = pair_fork(&bs, &child);

    CHECK(rank >= 0);
    if (g_distinct_hosts)
        setenv("GPUPORT_HOST_ID", rank ? "b" : "a", 1);
    if (rank == 1)
        _exit(fn(&bs));
    CHECK_MSG(fn(&bs) == 0, "%s: parent failed", name);
    CHECK_MSG(pair_join(child) == 0, "%s: child failed", name);
    unsetenv("GPUPORT_HOST_ID");
    printf("PASS %s (%s)\n", name, g_distinct_hosts ? "tcp" : "shm");
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_TIMEOUT_MS", "30000", 1);
    for (g_distinct_hosts = 0; g_distinct_hosts <= 1; g_distinct_hosts++) {
        setenv("GPUPORT_LOG_LEVEL", "none", 1); /* the timeout and ends are logged */
        run_pair(counts, "counts");
        run_pair(peer_closes, "peer-closes");
        run_pair(peer_dies, "peer-dies");
        unsetenv("GPUPORT_LOG_LEVEL");
    }
    return 0;
}
