/*
 * tcp operations that their host callers send themselves
 * (GPUPORT_HOST_INLINE, tcp_host_send), between two processes with host
 * identities of their own (fork + socketpair bootstrap, so tcp):
 *  - ping-pong: rounds of put_with_signal (1 B to 64 KiB, and one size
 *    above GPUPORT_SOCKET_INLINE_MAX), put_value_with_signal, and a plain
 *    put (the proxy's) followed by a put_with_signal, each round's bytes
 *    fresh and compared by the receiver, answered by a put_value_with_signal
 *    that the sender compares; with the path on some of the sender's
 *    operations are its own (gpuport_comm_stats' host_inline) and some the
 *    proxy's, with it off none is, and no message was received by a
 *    waiting thread itself (tcp_host_recv: the connection's count), nor
 *    with GPUPORT_SOCKET_HOST_RECV=0;
 *  - a wait that holds the connection: the receiver holds its connection's
 *    lock, so its proxy cannot receive; a put_with_signal of 100 B still
 *    ends its polls (the polling thread received it: the count one more,
 *    the bytes compared), and one of 64 KiB does not (a payload that large
 *    is the proxy's: 300 ms of polls find no signal) until the lock is
 *    released, when the proxy delivers it whole; the sender's flush then
 *    returns GPUPORT_OK;
 *  - a stopped peer: with the receiver stopped (SIGSTOP), an 8-byte
 *    put_with_signal is the caller's own (host_inline one more, no
 *    trigger), and a flush on another thread does not return while the
 *    peer is stopped, only once it runs again, with GPUPORT_OK (the flush
 *    waits for the caller's send to be acknowledged); then the sender's
 *    put_with_signal of 8 MiB (GPUPORT_SOCKET_INLINE_MAX raised), is
 *    more than the socket takes, so it leaves its rest to the proxy (the
 *    connection's count), and the 64 KiB ones after it are pushed (the
 *    send queue is not empty); a flush on another thread does not return
 *    while the peer is stopped (nothing is acknowledged), and returns
 *    GPUPORT_OK once it runs again; the receiver takes all 384 signals and
 *    compares the 32 MiB less the last piece (the 8-byte case's, apart);
 *  - a killed peer: the caller's 8 MiB send, not yet acknowledged (its rest
 *    with the proxy) when the stopped peer is killed (SIGKILL), makes the
 *    flush return the connection's failure, not hang, and the destroy
 *    return.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "pair_bootstrap.h"
#include "transport/tcp/tcp_priv.h"
#include "util.h"
#include "waker.h"

#define REGION (32u << 20)
#define PIECE 65536u
#define NPIECES (REGION / PIECE)
#define FIRST (8u << 20)
#define NSIGNALS (NPIECES - FIRST / PIECE) /* the first, then up to the last piece */
/* the 8-byte case's, apart from the large case's bytes: ThreadSanitizer
 * sees no order from the receiver's reads of the one, through the parent
 * process, to its proxy's writes of the other */
#define LAST_PIECE ((uint64_t)(NPIECES - 1) * PIECE)
#define ROUNDS 400
#define ANSWER (REGION - 8) /* where the receiver's answer lands */

static pid_t g_child;
static int kill_registered;

typedef struct side {
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
} side_t;

static void side_open(side_t *s, gpuport_bootstrap_t *bs)
{
    memset(s, 0, sizeof(*s));
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->src));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->dst));
    memset(s->src, 0, REGION);
    memset(s->dst, 0, REGION);
    CHECK_OK(gpuport_mem_register(s->comm, s->src, REGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, REGION, &s->mdst));
    CHECK_OK(gpuport_channel_create(s->comm, 1 - gpuport_comm_rank(s->comm), s->msrc, s->mdst,
                                    &s->ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(s->ch), "tcp") == 0, "transport %s",
              gpuport_channel_transport(s->ch));
}

/* rank 0's one tcp connection */
static tcp_conn_t *the_conn(gpuport_comm_t comm)
{
    struct gpuport_tcp_comm *t = comm->tls[GPUPORT_TL_KIND_TCP].priv;

    CHECK(t && atomic_load(&t->nconns) == 1);
    return t->conns[0];
}

static unsigned char fresh(int round, uint64_t i)
{
    return (unsigned char)(round * 29 + (int)(i * 13 % 251) + 1);
}

static uint64_t load64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return v;
}

/* round r: what the sender does, where, how much */
static void round_shape(int r, int *kind, uint64_t *off, uint64_t *size)
{
    static const uint64_t sizes[] = {1, 8, 100, 4096, 65536, 65537};

    *kind = r % 3;
    *size = sizes[(r / 3) % 6];
    *off = ((uint64_t)r * 200003) % (REGION - 2 * 65544 - 8) / 8 * 8;
}

static int ping_pong(gpuport_bootstrap_t *bs)
{
    side_t s;
    int rank = bs->rank;
    gpuport_comm_stats_t st0, st;
    uint64_t recvs;

    side_open(&s, bs);
    CHECK_OK(gpuport_comm_stats(s.comm, &st0));
    for (int r = 0; r < ROUNDS; r++) {
        int kind;
        uint64_t off, size, value = 0x5555000000000000ull + (uint64_t)r;
        round_shape(r, &kind, &off, &size);
        if (rank == 0) {
            for (uint64_t i = 0; i < size + 8; i++)
                s.src[off + i] = fresh(r, i);
            if (kind == 0) {
                CHECK_OK(gpuport_channel_put_with_signal(s.ch, off, off, size));
            } else if (kind == 1) {
                memcpy(&value, s.src + off, 8);
                CHECK_OK(gpuport_channel_put_value_with_signal(s.ch, off, value));
            } else {
                /* the proxy's put, then (behind it) the signal's */
                CHECK_OK(gpuport_channel_put(s.ch, off, off, size));
                CHECK_OK(gpuport_channel_put_with_signal(s.ch, off + size, off + size, 8));
            }
            CHECK_OK(gpuport_channel_wait(s.ch));
            CHECK_MSG(load64(s.dst + ANSWER) == (uint64_t)r + 1, "round %d: answer %llu", r,
                      (unsigned long long)load64(s.dst + ANSWER));
        } else {
            CHECK_OK(gpuport_channel_wait(s.ch));
            for (uint64_t i = 0; i < (kind == 1 ? 8 : kind == 0 ? size : size + 8); i++)
                CHECK_MSG(s.dst[off + i] == fresh(r, i),
                          "round %d (kind %d, %llu B at %llu): byte %llu is %u, not %u", r, kind,
                          (unsigned long long)size, (unsigned long long)off,
                          (unsigned long long)i, s.dst[off + i], fresh(r, i));
            CHECK_OK(gpuport_channel_put_value_with_signal(s.ch, ANSWER, (uint64_t)r + 1));
        }
    }
    CHECK_OK(gpuport_channel_flush(s.ch));
    CHECK_OK(gpuport_comm_stats(s.comm, &st));
    recvs = __atomic_load_n(&the_conn(s.comm)->host_recvs, __ATOMIC_RELAXED);
    printf("ping-pong (GPUPORT_HOST_INLINE=%d): rank %d's waits received messages themselves "
           "%llu times\n", s.comm->config.host_inline, rank, (unsigned long long)recvs);
    /* with the path on, a race with the proxy each round (held_wait shows
     * the waits' part without one) */
    if (!s.comm->config.host_inline || !the_conn(s.comm)->host_recv)
        CHECK_MSG(recvs == 0, "GPUPORT_HOST_INLINE=%d, GPUPORT_SOCKET_HOST_RECV=%d, yet rank "
                  "%d's waits received %llu times", s.comm->config.host_inline,
                  the_conn(s.comm)->host_recv, rank, (unsigned long long)recvs);
    if (rank == 0) {
        uint64_t inl = st.host_inline - st0.host_inline, trig = st.triggers - st0.triggers;
        printf("ping-pong (GPUPORT_HOST_INLINE=%d): %d rounds, %llu operations sent by their "
               "callers, %llu triggers through the proxy\n",
               s.comm->config.host_inline, ROUNDS, (unsigned long long)inl,
               (unsigned long long)trig);
        if (s.comm->config.host_inline)
            /* kinds 0 and 1 go inline except above the size limit; kind 2's
             * put is always the proxy's */
            CHECK_MSG(inl > 0 && trig >= ROUNDS / 3, "inline %llu, triggers %llu",
                      (unsigned long long)inl, (unsigned long long)trig);
        else
            CHECK_MSG(inl == 0, "GPUPORT_HOST_INLINE=0, yet %llu operations went inline",
                      (unsigned long long)inl);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(s.ch));
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

typedef struct flusher_arg {
    gpuport_channel_t ch;
    _Atomic int done;
    gpuport_status_t status;
} flusher_arg_t;

static void *flush_thread(void *p)
{
    flusher_arg_t *a = p;

    a->status = gpuport_channel_flush(a->ch);
    atomic_store(&a->done, 1);
    return NULL;
}

/* A failed check exits the parent: the child, perhaps stopped, must not
 * outlive it. */
static void kill_child(void)
{
    if (g_child > 0)
        kill(g_child, SIGKILL);
}

/* Stops the receiver, then waits for this side's proxy to sleep (main
 * sets 100 ms sleeps at once): a caller finds the connection's lock taken
 * while the proxy is in a pass and then pushes its operation, which these
 * cases must not see; with the receiver stopped nothing wakes the proxy. */
static void stop_child(gpuport_comm_t comm)
{
    int wst;

    CHECK(kill(g_child, SIGSTOP) == 0);
    CHECK(waitpid(g_child, &wst, WUNTRACED) == g_child && WIFSTOPPED(wst));
    for (int i = 0; i < 20000 && !atomic_load(&comm->proxy.waker.sleeping); i++)
        usleep(100);
    CHECK_MSG(atomic_load(&comm->proxy.waker.sleeping), "the proxy never went to sleep");
}

/* While the receiver is stopped: a first put_with_signal of FIRST bytes,
 * more than the socket holds (GPUPORT_SOCKET_INLINE_MAX is raised for it),
 * then the rest of the region in PIECE-byte ones; how many the caller
 * sent, and how many host sends left a rest to the proxy. */
static void send_stopped(side_t *s, int pieces, uint64_t *inl_p, uint64_t *rests_p)
{
    gpuport_comm_stats_t st0, st;

    CHECK_OK(gpuport_comm_stats(s->comm, &st0));
    CHECK_OK(gpuport_channel_put_with_signal(s->ch, 0, 0, FIRST));
    for (uint32_t k = FIRST / PIECE; pieces && k < NPIECES - 1; k++)
        CHECK_OK(gpuport_channel_put_with_signal(s->ch, (uint64_t)k * PIECE,
                                                 (uint64_t)k * PIECE, PIECE));
    CHECK_OK(gpuport_comm_stats(s->comm, &st));
    *inl_p = st.host_inline - st0.host_inline;
    *rests_p = __atomic_load_n(&the_conn(s->comm)->host_rests, __ATOMIC_RELAXED);
}

/* A flush on another thread, which must not return within 300 ms while
 * the peer is stopped, and must return GPUPORT_OK once it runs again. */
static void flush_across_stop(side_t *s, const char *what)
{
    flusher_arg_t a = {.ch = s->ch};
    pthread_t t;

    CHECK(pthread_create(&t, NULL, flush_thread, &a) == 0);
    usleep(300000);
    CHECK_MSG(!atomic_load(&a.done),
              "%s: the flush returned (%s) while the peer was stopped, before the peer had the "
              "data",
              what, gpuport_status_string(a.status));
    CHECK(kill(g_child, SIGCONT) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_MSG(a.status == GPUPORT_OK, "%s: flush after the peer ran again: %s", what,
              gpuport_status_string(a.status));
}

static int stopped_peer(gpuport_bootstrap_t *bs)
{
    side_t s;
    uint64_t inl, rests;
    gpuport_comm_stats_t st0, st;

    side_open(&s, bs);
    for (uint64_t i = 0; i < REGION; i++)
        s.src[i] = fresh(bs->rank + 3, i);
    CHECK_OK(bs->barrier(bs->ctx));
    if (bs->rank == 0) {
        /* the caller's own send alone is in flight: the flush waits for it */
        stop_child(s.comm);
        CHECK_OK(gpuport_comm_stats(s.comm, &st0));
        CHECK_OK(gpuport_channel_put_with_signal(s.ch, LAST_PIECE, LAST_PIECE, 8));
        CHECK_OK(gpuport_comm_stats(s.comm, &st));
        CHECK_MSG(st.host_inline == st0.host_inline + 1 && st.triggers == st0.triggers,
                  "the 8-byte put_with_signal was not the caller's own (host_inline %llu, "
                  "triggers %llu, before %llu, %llu)",
                  (unsigned long long)st.host_inline, (unsigned long long)st.triggers,
                  (unsigned long long)st0.host_inline, (unsigned long long)st0.triggers);
        flush_across_stop(&s, "8 B");
    } else {
        CHECK_OK(gpuport_channel_wait(s.ch));
        for (uint64_t i = LAST_PIECE; i < LAST_PIECE + 8; i++)
            CHECK_MSG(s.dst[i] == fresh(3, i), "8 B: byte %llu is %u, not %u",
                      (unsigned long long)i, s.dst[i], fresh(3, i));
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (bs->rank == 0) {
        stop_child(s.comm);
        send_stopped(&s, 1, &inl, &rests);
        printf("stopped peer: one put_with_signal of %u MiB and %u of %u KiB, %llu sent by "
               "the caller, %llu left a rest to the proxy\n",
               FIRST >> 20, NSIGNALS - 1, PIECE >> 10, (unsigned long long)inl,
               (unsigned long long)rests);
        /* the first, whose rest the proxy sends; the ring then holds it, so
         * the others are pushed */
        CHECK_MSG(inl == 1 && rests == 1, "%llu went inline, %llu left a rest; expected 1 and 1",
                  (unsigned long long)inl, (unsigned long long)rests);
        flush_across_stop(&s, "32 MiB");
    } else {
        for (uint32_t k = 0; k < NSIGNALS; k++)
            CHECK_OK(gpuport_channel_wait(s.ch));
        for (uint64_t i = 0; i < LAST_PIECE; i++)
            CHECK_MSG(s.dst[i] == fresh(3, i), "byte %llu is %u, not %u", (unsigned long long)i,
                      s.dst[i], fresh(3, i));
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(s.ch));
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

static int killed_peer(gpuport_bootstrap_t *bs)
{
    side_t s;
    uint64_t inl, rests, t0;
    gpuport_status_t st;

    side_open(&s, bs);
    CHECK_OK(bs->barrier(bs->ctx));
    if (bs->rank == 1) {
        pause(); /* stopped and killed by the parent */
        _exit(1);
    }
    /* the caller's own send alone is in flight, its rest with the proxy */
    stop_child(s.comm);
    send_stopped(&s, 0, &inl, &rests);
    CHECK_MSG(inl == 1 && rests == 1, "%llu went inline, %llu left a rest; expected 1 and 1",
              (unsigned long long)inl, (unsigned long long)rests);
    CHECK(kill(g_child, SIGKILL) == 0);
    t0 = gpuport_now_ns();
    st = gpuport_channel_flush(s.ch);
    printf("killed peer: %llu operations sent by the caller in flight; flush returned %s "
           "after %.1f ms\n",
           (unsigned long long)inl, gpuport_status_string(st), (gpuport_now_ns() - t0) / 1e6);
    CHECK_MSG(st == GPUPORT_ERR_PEER || st == GPUPORT_ERR_TRANSPORT,
              "flush with the peer killed: %s", gpuport_status_string(st));
    CHECK_MSG(gpuport_channel_destroy(s.ch) == GPUPORT_OK, "destroy after the peer's death");
    gpuport_comm_destroy(s.comm);
    return 0;
}

#define HELD_SMALL 100u
#define HELD_LARGE 65536u

static int held_wait(gpuport_bootstrap_t *bs)
{
    side_t s;
    tcp_conn_t *tc;
    uint64_t recvs0, t0;
    int ready = 0;

    side_open(&s, bs);
    tc = the_conn(s.comm);
    for (uint64_t i = 0; i < HELD_SMALL + HELD_LARGE; i++)
        s.src[i] = fresh(7, i);
    if (bs->rank == 1) {
        /* once a proxy pass let the lock go saying a waiter may receive
         * (the hint a wait reads first), this thread holds it: the proxy
         * waits for it, and this thread's own takes nest */
        for (int i = 0; i < 50000 && !atomic_load(&tc->host_rx_hint); i++)
            usleep(100);
        tcp_lock(tc);
        CHECK_MSG(atomic_load(&tc->host_rx_hint), "the connection never said a waiter may receive");
    }
    CHECK_OK(bs->barrier(bs->ctx));
    if (bs->rank == 0) {
        CHECK_OK(gpuport_channel_put_with_signal(s.ch, 0, 0, HELD_SMALL));
        CHECK_OK(gpuport_channel_put_with_signal(s.ch, HELD_SMALL, HELD_SMALL, HELD_LARGE));
        CHECK_OK(gpuport_channel_flush(s.ch));
    } else {
        recvs0 = __atomic_load_n(&tc->host_recvs, __ATOMIC_RELAXED);
        /* polls, not a wait: a wait receives for itself in its first polls
         * only, and the sender may come later than that */
        t0 = gpuport_now_ns();
        while (!ready && gpuport_now_ns() - t0 < 30 * 1000 * 1000 * 1000ull) {
            CHECK_OK(gpuport_channel_poll(s.ch, &ready));
            if (!ready)
                usleep(100);
        }
        CHECK_MSG(ready, "no poll received the 100 B message in 30 s");
        CHECK_MSG(__atomic_load_n(&tc->host_recvs, __ATOMIC_RELAXED) > recvs0,
                  "the poll found the signal, but not by its own receive");
        ready = 0;
        for (uint64_t i = 0; i < HELD_SMALL; i++)
            CHECK_MSG(s.dst[i] == fresh(7, i), "100 B: byte %llu is %u, not %u",
                      (unsigned long long)i, s.dst[i], fresh(7, i));
        t0 = gpuport_now_ns();
        while (!ready && gpuport_now_ns() - t0 < 300 * 1000 * 1000ull) {
            CHECK_OK(gpuport_channel_poll(s.ch, &ready));
            usleep(1000);
        }
        CHECK_MSG(!ready, "a 64 KiB payload was received by a wait, not left to the proxy");
        tcp_unlock(tc);
        CHECK_OK(gpuport_channel_wait(s.ch));
        for (uint64_t i = HELD_SMALL; i < HELD_SMALL + HELD_LARGE; i++)
            CHECK_MSG(s.dst[i] == fresh(7, i), "64 KiB: byte %llu is %u, not %u",
                      (unsigned long long)i, s.dst[i], fresh(7, i));
        printf("held wait: 100 B received by the waiting thread, 64 KiB left to the proxy\n");
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(s.ch));
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

static void run_pair(int (*fn)(gpuport_bootstrap_t *), const char *name, int child_status)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank = pair_fork(&bs, &child), wst;

    CHECK(rank >= 0);
    g_child = child;
    if (rank == 0 && !kill_registered++)
        atexit(kill_child);
    setenv("GPUPORT_HOST_ID", rank ? "b" : "a", 1);
    if (rank == 1)
        _exit(fn(&bs));
    CHECK_MSG(fn(&bs) == 0, "%s: parent failed", name);
    if (child_status == 0) {
        CHECK_MSG(pair_join(child) == 0, "%s: child failed", name);
    } else {
        CHECK(waitpid(child, &wst, 0) == child);
        CHECK_MSG(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "%s: child not killed", name);
    }
    g_child = 0;
    unsetenv("GPUPORT_HOST_ID");
    printf("PASS %s\n", name);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_TIMEOUT_MS", "60000", 1);
    setenv("GPUPORT_HOST_INLINE", "1", 1);
    run_pair(ping_pong, "ping-pong, inline on", 0);
    setenv("GPUPORT_SOCKET_HOST_RECV", "0", 1);
    run_pair(ping_pong, "ping-pong, inline on, host receives off", 0);
    unsetenv("GPUPORT_SOCKET_HOST_RECV");
    setenv("GPUPORT_HOST_INLINE", "0", 1);
    run_pair(ping_pong, "ping-pong, inline off", 0);
    setenv("GPUPORT_HOST_INLINE", "1", 1);
    run_pair(held_wait, "held wait", 0);
    setenv("GPUPORT_SOCKET_INLINE_MAX", "16m", 1);
    setenv("GPUPORT_PROXY_IDLE_CPU", "0", 1);
    setenv("GPUPORT_PROXY_IDLE_US", "0", 1);
    setenv("GPUPORT_PROXY_SLEEP_HOST_MAX_US", "100000", 1);
    setenv("GPUPORT_PROXY_SLEEP_SCALE", "0", 1);
    run_pair(stopped_peer, "stopped peer", 0);
    /* the death's errors are expected */
    setenv("GPUPORT_LOG_LEVEL", "none", 1);
    setenv("GPUPORT_SOCKET_TIMEOUT_MS", "2000", 1);
    run_pair(killed_peer, "killed peer", SIGKILL);
    printf("tcp inline: ok\n");
    return 0;
}
