/*
 * Channels between real processes (fork + socketpair bootstrap, no MPI) and
 * the lifecycle cases that need them: cross-memory attach and shared
 * mappings across address spaces, a peer that dies while we wait or put,
 * a peer that closes its side in order (GPUPORT_ERR_CLOSED, not the
 * death's GPUPORT_ERR_PEER, and a log that says "closed"), destroy
 * draining queued work, destroy failing (not dropping) work that
 * cannot drain, and put_value among puts over the same bytes. Also a channel
 * to oneself. The pair cases run twice: on one
 * host (shm), then with distinct GPUPORT_HOST_IDs (tcp over this machine's
 * interface: a dead peer is seen by its socket, not by its pid, and drain at
 * destroy needs the receiver's proxy until the sender's closes are answered).
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "pair_bootstrap.h"
#include "short_timeout.h"

#define REGION (8u << 20)

static unsigned char pat(int rank, uint64_t i)
{
    return (unsigned char)(rank * 101 + (int)(i * 7 % 253));
}

static int g_distinct_hosts; /* 1: each process its own host identity (tcp) */
static pid_t g_child;        /* the pair's child, in the parent */

typedef struct side {
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    int use_malloc;
} side_t;

static void side_open(side_t *s, gpuport_bootstrap_t *bs, int use_malloc)
{
    memset(s, 0, sizeof(*s));
    s->use_malloc = use_malloc;
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    if (use_malloc) {
        s->src = malloc(REGION);
        s->dst = malloc(REGION);
        CHECK(s->src && s->dst);
    } else {
        CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->src));
        CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->dst));
    }
    for (uint64_t i = 0; i < REGION; i++)
        s->src[i] = pat(gpuport_comm_rank(s->comm), i);
    memset(s->dst, 0, REGION);
    CHECK_OK(gpuport_mem_register(s->comm, s->src, REGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, REGION, &s->mdst));
    CHECK_OK(gpuport_channel_create(s->comm, 1 - gpuport_comm_rank(s->comm), s->msrc, s->mdst,
                                    &s->ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(s->ch), g_distinct_hosts ? "tcp" : "shm") == 0,
              "transport %s", gpuport_channel_transport(s->ch));
}

/* Destroys the communicator, then frees malloc'd buffers (peers may copy into
 * them until destroy returns). */
static gpuport_status_t side_close(side_t *s)
{
    gpuport_status_t status = gpuport_comm_destroy(s->comm);

    if (s->use_malloc) {
        free(s->src);
        free(s->dst);
    }
    return status;
}

static void verify(const unsigned char *dst, int from, uint64_t off, uint64_t size)
{
    for (uint64_t i = off; i < off + size; i++)
        CHECK_MSG(dst[i] == pat(from, i), "byte %llu: 0x%02x, expected 0x%02x",
                  (unsigned long long)i, dst[i], pat(from, i));
}

/* Both directions; sizes on both sides of GPUPORT_SHM_ASYNC_MIN. */
static int cross_process(gpuport_bootstrap_t *bs, int use_malloc)
{
    static const uint64_t sizes[] = {1, 4096, 300000, 3u << 20};
    side_t s;
    int rank = bs->rank;
    uint64_t off = 0;

    side_open(&s, bs, use_malloc);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        CHECK_OK(gpuport_channel_put_with_signal(s.ch, off, off, sizes[k]));
        CHECK_OK(gpuport_channel_wait(s.ch));
        verify(s.dst, 1 - rank, off, sizes[k]);
        off += sizes[k];
    }
    for (uint64_t i = off; i < REGION; i++)
        CHECK_MSG(s.dst[i] == 0, "byte %llu past the written range changed", (unsigned long long)i);
    CHECK_OK(gpuport_channel_flush(s.ch));
    /* both flushed before either closes: once the peer has closed, this
     * side's operations fail with GPUPORT_ERR_CLOSED, as they must (seen
     * under TSan, where the check above is slow enough for the peer to
     * close first) */
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(side_close(&s));
    return 0;
}

/* Has the pair's child exited? Asked without reaping it (run_pair does). */
static int child_exited(void)
{
    siginfo_t info;

    memset(&info, 0, sizeof(info));
    return waitid(P_PID, (id_t)g_child, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == g_child;
}

/* How late the pair's child may be to what the parent waits for (its
 * exit, its close): on a loaded machine it can take seconds just to get
 * there, which is no time of the library's. */
#define CHILD_LATE_NS 60000000000ull

/* Waits for the pair's child to exit, without reaping it (run_pair does),
 * at most CHILD_LATE_NS. Returns when the exit was seen (the clock of a
 * check of what follows it), 0 if it was not. */
static uint64_t child_exit_seen_ns(void)
{
    uint64_t t0 = gpuport_now_ns();

    while (!child_exited()) {
        if (gpuport_now_ns() - t0 > CHILD_LATE_NS)
            return 0;
        usleep(1000);
    }
    return gpuport_now_ns();
}

/* The child dies without a word (no destroy: _exit), after one signal that
 * it saw delivered. The proxy notices on its own (a kernel waiting for the
 * child could not): the channel fails within a fraction of a second of the
 * death with nobody calling into it. The clock starts at the exit, seen
 * with waitid: the time the child takes to get there (more than 5 s, seen
 * in CI at a load of 11-21 on 2 cores) is not the proxy's. Then the parent's
 * wait takes the signal sent before the death, its next wait ends with a
 * peer error well before the timeout, and further work is refused, all
 * with GPUPORT_ERR_PEER (a death, not a close: the log says it failed,
 * never that it closed). */
static int peer_dies(gpuport_bootstrap_t *bs, int use_malloc)
{
    side_t s;
    uint64_t t0, exit_ns, notice_ns, wait_ns;
    gpuport_status_t st, got[9];
    int ready = -1, naps = 0;
    const char *log;

    side_open(&s, bs, use_malloc);
    if (bs->rank == 1) {
        CHECK_OK(gpuport_channel_signal(s.ch));
        CHECK_OK(gpuport_channel_flush(s.ch)); /* delivered: in the parent's slot */
        _exit(0);
    }
    capture_begin();
    exit_ns = child_exit_seen_ns();
    if (!exit_ns) {
        log = capture_end();
        CHECK_MSG(0, "peer-dies: the child had not exited %llu s after the parent began to wait "
                  "for it (channel status %s); log: %s",
                  CHILD_LATE_NS / 1000000000ull,
                  gpuport_status_string(gpuport_channel_status(s.ch)), log);
    }
    while (gpuport_channel_status(s.ch) == GPUPORT_OK &&
           gpuport_now_ns() - exit_ns < 5000000000ull) {
        usleep(1000);
        naps++;
    }
    notice_ns = gpuport_now_ns() - exit_ns;
    got[0] = gpuport_channel_status(s.ch);
    if (got[0] == GPUPORT_OK) {
        /* say which it was: a proxy that missed the death, or a clock that
         * jumped (few naps in the 5 s) */
        log = capture_end();
        fprintf(stderr, "peer-dies: %llu ms after the child's exit (%d naps of 1 ms) the channel "
                "is still OK; log: %s\n",
                (unsigned long long)(notice_ns / 1000000), naps, log);
        capture_begin();
    }
    got[1] = gpuport_channel_poll(s.ch, &ready); /* the signal from before the death */
    t0 = gpuport_now_ns();
    got[2] = gpuport_channel_wait(s.ch);
    wait_ns = gpuport_now_ns() - t0;
    got[3] = gpuport_channel_poll(s.ch, &(int){0});
    /* a failed channel refuses further work at once, with the reason */
    got[4] = gpuport_channel_put(s.ch, 0, 0, 64);
    got[5] = gpuport_channel_put_value(s.ch, 0, 1);
    got[6] = gpuport_channel_signal(s.ch);
    got[7] = gpuport_channel_flush(s.ch);
    got[8] = gpuport_channel_status(s.ch);
    log = capture_end();
    CHECK_MSG(got[0] == GPUPORT_ERR_PEER || (g_distinct_hosts && got[0] == GPUPORT_ERR_TRANSPORT),
              "status after the death: %s", gpuport_status_string(got[0]));
    CHECK_MSG(notice_ns < 1000000000ull, "the proxy took %llu ms after the child's exit to notice",
              (unsigned long long)(notice_ns / 1000000));
    CHECK_MSG(got[1] == GPUPORT_OK && ready == 1, "poll of the signal sent before the death: %s, "
              "ready %d", gpuport_status_string(got[1]), ready);
    CHECK_MSG(got[2] == GPUPORT_ERR_PEER && wait_ns < 5000000000ull,
              "wait after the death: %s in %llu ms", gpuport_status_string(got[2]),
              (unsigned long long)(wait_ns / 1000000));
    /* poll (3) reads the peer's word: a failure; the others the channel's
     * state, which over tcp is the reset's GPUPORT_ERR_TRANSPORT when the
     * dead process left bytes unread (test_comm_destroy.c), else the end of
     * stream's GPUPORT_ERR_PEER */
    for (int i = 3; i < 9; i++)
        CHECK_MSG(got[i] == GPUPORT_ERR_PEER ||
                      (i > 3 && g_distinct_hosts && got[i] == GPUPORT_ERR_TRANSPORT),
                  "call %d after the death returned %s", i, gpuport_status_string(got[i]));
    CHECK_MSG(strstr(log, "failed") && !strstr(log, "closed its side"), "log: %s", log);
    /* destroy waits for nothing the dead peer would have had to do, and
     * this rank's own work is done: it returns at once, OK */
    t0 = gpuport_now_ns();
    st = side_close(&s);
    CHECK_MSG(gpuport_now_ns() - t0 < 2000000000ull, "destroy took %llu ms",
              (unsigned long long)((gpuport_now_ns() - t0) / 1000000));
    CHECK_OK(st);
    return 0;
}

/* The same death seen first by a wait (which looks for the peer itself
 * every 20 ms, before the proxy's 50 ms watch): the wait's peer error
 * fails the channel too, at once, so its puts and flushes do not report
 * delivery to a dead process, and a poll or a second wait right after it
 * say the same. A wait that ran out its GPUPORT_TIMEOUT_MS
 * with the child still alive ended before the death it was to see (the
 * child's lateness, not the library's): then the parent waits for the
 * exit, and waits on the channel again from there. */
static int peer_dies_wait_first(gpuport_bootstrap_t *bs, int use_malloc)
{
    side_t s;
    gpuport_status_t st;

    side_open(&s, bs, use_malloc);
    if (bs->rank == 1)
        _exit(0);
    st = gpuport_channel_wait(s.ch);
    if (st == GPUPORT_ERR_TIMEOUT && !child_exited()) {
        CHECK_MSG(child_exit_seen_ns(), "peer-dies-wait-first: the child had not exited %llu s "
                  "after a wait of GPUPORT_TIMEOUT_MS ran out",
                  CHILD_LATE_NS / 1000000000ull);
        st = gpuport_channel_wait(s.ch);
    }
    CHECK_STATUS(st, GPUPORT_ERR_PEER);
    {
        /* every call agrees at once: a poll does not answer "no signal
         * yet", nor a second wait look for the peer again, while the
         * proxy's watch has not yet seen the death itself */
        int ready = -1;
        uint64_t t0;
        CHECK_STATUS(gpuport_channel_poll(s.ch, &ready), GPUPORT_ERR_PEER);
        t0 = gpuport_now_ns();
        CHECK_STATUS(gpuport_channel_wait(s.ch), GPUPORT_ERR_PEER);
        printf("peer-dies-wait-first: a second wait returned in %.3f ms\n",
               (double)(gpuport_now_ns() - t0) / 1e6);
    }
    CHECK_STATUS(gpuport_channel_status(s.ch), GPUPORT_ERR_PEER);
    CHECK_STATUS(gpuport_channel_put(s.ch, 0, 0, 64), GPUPORT_ERR_PEER);
    CHECK_STATUS(gpuport_channel_flush(s.ch), GPUPORT_ERR_PEER);
    CHECK_OK(side_close(&s));
    return 0;
}

/* The parent's side once the child has closed its side in order, after a
 * put and two signals: the close word says no more signals will come, and
 * every call says the channel was closed (GPUPORT_ERR_CLOSED), not that it
 * failed. Status says so as soon as the word is there; the signals sent
 * before it are still taken first, the data before them in place; then
 * poll and wait return GPUPORT_ERR_CLOSED at once (not at
 * GPUPORT_TIMEOUT_MS). A flush with nothing refused is OK (what this side
 * did before the close was carried out); the operations are refused, and
 * the flush after them says so. The log (at info, channel messages only)
 * says "closed", never "failed". */
static void after_peer_close(side_t *s, const char *how)
{
    gpuport_status_t got[15];
    uint64_t t0 = gpuport_now_ns(), wait_ns = 0, look_ns;
    int ready[2] = {-1, -1};
    const char *log;

    /* the close comes when the child gets there, after its put and
     * signals: no clock here starts at it, so this look only ends a hang
     * (CHILD_LATE_NS), and the message says how long it lasted */
    capture_begin();
    while ((got[0] = gpuport_channel_status(s->ch)) == GPUPORT_OK &&
           gpuport_now_ns() - t0 < CHILD_LATE_NS)
        usleep(100);
    look_ns = gpuport_now_ns() - t0;
    got[1] = gpuport_channel_poll(s->ch, &ready[0]); /* the put's signal */
    got[2] = gpuport_channel_wait(s->ch);            /* the plain signal */
    got[3] = gpuport_channel_poll(s->ch, &ready[1]);
    t0 = gpuport_now_ns();
    got[4] = gpuport_channel_wait(s->ch);
    wait_ns = gpuport_now_ns() - t0;
    got[5] = gpuport_channel_flush(s->ch);
    got[6] = gpuport_channel_put(s->ch, 0, 0, 64);
    got[7] = gpuport_channel_flush(s->ch);
    got[8] = gpuport_channel_put_value(s->ch, 0, 1);
    got[9] = gpuport_channel_signal(s->ch);
    got[10] = gpuport_channel_put_with_signal(s->ch, 0, 0, 64);
    got[11] = gpuport_channel_status(s->ch);
    got[12] = gpuport_channel_wait(s->ch);
    got[13] = got[14] = GPUPORT_ERR_CLOSED;
    if (!g_distinct_hosts) {
        /* one host: the child exits once its destroy returns; a channel it
         * closed first stays closed, not failed by the proxy's watch for
         * dead peers (every 50 ms) nor by a wait's own look, for 300 ms
         * from the exit */
        int exited = child_exit_seen_ns() != 0;
        usleep(300 * 1000);
        got[13] = exited ? gpuport_channel_status(s->ch) : GPUPORT_ERR_TIMEOUT;
        got[14] = gpuport_channel_wait(s->ch);
    }
    log = capture_end();
    CHECK_MSG(got[0] == GPUPORT_ERR_CLOSED, "%s: status %llu ms after the parent began to look "
              "for the peer's close: %s", how, (unsigned long long)(look_ns / 1000000),
              gpuport_status_string(got[0]));
    CHECK_MSG(got[1] == GPUPORT_OK && ready[0] == 1 && got[2] == GPUPORT_OK,
              "%s: the signals sent before the close: poll %s (ready %d), wait %s", how,
              gpuport_status_string(got[1]), ready[0], gpuport_status_string(got[2]));
    verify(s->dst, 1, 0, 4096);
    CHECK_MSG(got[3] == GPUPORT_ERR_CLOSED && ready[1] == -1, "%s: poll after them: %s", how,
              gpuport_status_string(got[3]));
    CHECK_MSG(got[4] == GPUPORT_ERR_CLOSED && wait_ns < 5000000000ull,
              "%s: wait after them: %s in %llu ms", how, gpuport_status_string(got[4]),
              (unsigned long long)(wait_ns / 1000000));
    CHECK_MSG(got[5] == GPUPORT_OK, "%s: a flush with nothing refused: %s", how,
              gpuport_status_string(got[5]));
    for (int i = 6; i < 15; i++)
        CHECK_MSG(got[i] == GPUPORT_ERR_CLOSED, "%s: call %d after the close returned %s", how, i,
                  gpuport_status_string(got[i]));
    CHECK_MSG(strstr(log, "rank 1 closed its side of the channel; no more signals will come"),
              "%s: the wait's message is missing: %s", how, log);
    CHECK_MSG(strstr(log, "nothing was queued, and the channel is closed here too"),
              "%s: the put's message is missing: %s", how, log);
    CHECK_MSG(!strstr(log, "failed") && !strstr(log, "exited") && !strstr(log, "ERROR"),
              "%s: log: %s", how, log);
}

/* The child closes its communicator (gpuport_comm_destroy, its process
 * ends after) or only its channel (gpuport_channel_destroy, then the
 * communicator): over tcp its goodbye follows the channel's close word; on
 * one host its exit afterwards is no failure of a channel it closed. */
static int peer_closes_how(gpuport_bootstrap_t *bs, int use_malloc, int channel_first)
{
    const char *how = channel_first ? "channel destroyed" : "communicator destroyed";
    side_t s;

    side_open(&s, bs, use_malloc);
    if (bs->rank == 1) {
        CHECK_OK(gpuport_channel_put_with_signal(s.ch, 0, 0, 4096));
        CHECK_OK(gpuport_channel_signal(s.ch));
        if (channel_first)
            CHECK_OK(gpuport_channel_destroy(s.ch));
        CHECK_OK(side_close(&s));
        return 0;
    }
    after_peer_close(&s, how);
    CHECK_OK(side_close(&s));
    return 0;
}

static int peer_closes(gpuport_bootstrap_t *bs, int use_malloc)
{
    return peer_closes_how(bs, use_malloc, 0);
}

static int peer_destroys_channel(gpuport_bootstrap_t *bs, int use_malloc)
{
    return peer_closes_how(bs, use_malloc, 1);
}

/* A channel's id comes back for the next channel: rank 1 destroys its
 * side first (rank 0's proxy promises on its own, with nothing written back)
 * and reuses the id for a second channel while rank 0 still holds the first;
 * then rank 0 destroys the first. Its close must not reach the second
 * channel, which reuses the slot the close word would go to (seen in CI:
 * a fresh channel's put returned GPUPORT_ERR_CLOSED). */
static int id_reuse(gpuport_bootstrap_t *bs, int use_malloc)
{
    side_t s;
    gpuport_channel_t ch2;
    uint32_t first_id;

    side_open(&s, bs, use_malloc);
    first_id = s.ch->id;
    if (bs->rank == 1)
        CHECK_OK(gpuport_channel_destroy(s.ch));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_create(s.comm, 1 - bs->rank, s.msrc, s.mdst, &ch2));
    if (bs->rank == 1)
        CHECK_MSG(ch2->id == first_id, "the second channel has id %u, the first had %u",
                  ch2->id, first_id);
    if (bs->rank == 0)
        CHECK_OK(gpuport_channel_destroy(s.ch)); /* rank 1 saw the close already */
    CHECK_OK(bs->barrier(bs->ctx));
    usleep(100 * 1000); /* a late word has time to land */
    CHECK_OK(gpuport_channel_status(ch2));
    CHECK_OK(gpuport_channel_put_with_signal(ch2, 4096, 4096, 8192));
    CHECK_OK(gpuport_channel_wait(ch2));
    verify(s.dst, 1 - bs->rank, 4096, 8192);
    CHECK_OK(gpuport_channel_flush(ch2));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(side_close(&s));
    return 0;
}

/* tcp: a rank destroys its communicator long before its peer does. It does
 * not wait for the peer's destroy, only for its proxy's answer to the close
 * (bounded by GPUPORT_TIMEOUT_MS, here 300 ms, set once the channel exists:
 * see short_timeout.h), then returns GPUPORT_OK: nothing of its own was
 * left undone. */
static int goodbye_late(gpuport_bootstrap_t *bs, int use_malloc)
{
    side_t s;
    uint64_t t0;

    side_open(&s, bs, use_malloc);
    test_short_timeout(s.comm, 300);
    if (bs->rank == 1) {
        CHECK_OK(gpuport_channel_put_with_signal(s.ch, 0, 0, 4096));
        t0 = gpuport_now_ns();
        CHECK_OK(side_close(&s)); /* its last step, a barrier, waits for rank 0 */
        CHECK_MSG(gpuport_now_ns() - t0 < 10000000000ull, "destroy took %llu ms",
                  (unsigned long long)((gpuport_now_ns() - t0) / 1000000));
        return 0;
    }
    /* poll, not wait: the 300 ms limit is for destroy, and under a
     * sanitizer on a loaded machine the signal itself can take longer */
    t0 = gpuport_now_ns();
    for (int ready = 0; !ready;) {
        CHECK_OK(gpuport_channel_poll(s.ch, &ready));
        CHECK_MSG(ready || gpuport_now_ns() - t0 < 20000000000ull, "no signal in 20 s");
        if (!ready)
            usleep(100);
    }
    verify(s.dst, 1, 0, 4096);
    usleep(1500 * 1000);
    CHECK_OK(side_close(&s));
    return 0;
}

/* Queued puts are carried out by destroy, not dropped: the sender destroys
 * right after queueing; the receiver still gets every byte. */
static int drain_at_destroy(gpuport_bootstrap_t *bs, int use_malloc)
{
    side_t s;
    const uint64_t chunk = 1u << 20;

    side_open(&s, bs, use_malloc);
    if (bs->rank == 0) {
        for (uint64_t off = 0; off < REGION; off += chunk)
            CHECK_OK(gpuport_channel_put(s.ch, off, off, chunk));
        CHECK_OK(gpuport_channel_signal(s.ch));
        CHECK_OK(side_close(&s));
    } else {
        CHECK_OK(gpuport_channel_wait(s.ch));
        verify(s.dst, 0, 0, REGION);
        CHECK_OK(side_close(&s));
    }
    return 0;
}

/* ---- put_value between processes ---- */

#define VWINDOW 4096          /* where values and small puts overlap */
#define VBIG (256u << 10)     /* GPUPORT_SHM_ASYNC_MIN's default: puts from here go to the
                               * flusher, and the values behind them queue there too */
#define VROUNDS 30

typedef struct vop {
    int kind; /* 0 put, 1 put_value, 2 put_value_with_signal (each round's last) */
    uint64_t dst_off, src_off, size, value;
} vop_t;

static uint64_t vrand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* Both sides draw the same operations: the receiver knows what must land. */
static void vdraw(uint64_t *s, int last, vop_t *o)
{
    uint64_t pick = vrand(s) % 100;

    memset(o, 0, sizeof(*o));
    if (last || pick < 50) {
        o->kind = last ? 2 : 1;
        o->dst_off = vrand(s) % (VWINDOW / 8) * 8;
        o->value = vrand(s) * 0x9e3779b97f4a7c15ull;
        o->size = 8;
        return;
    }
    o->size = pick < 95 ? 1 + vrand(s) % 24 : VBIG + vrand(s) % 65536;
    o->dst_off = pick < 95 ? vrand(s) % (VWINDOW - o->size + 1) : vrand(s) % VWINDOW;
    o->src_off = vrand(s) % (REGION - o->size + 1);
}

static void vapply(unsigned char *shadow, int from, const vop_t *o)
{
    if (o->kind) {
        memcpy(shadow + o->dst_off, &o->value, 8);
        return;
    }
    for (uint64_t i = 0; i < o->size; i++)
        shadow[o->dst_off + i] = pat(from, o->src_off + i);
}

/* dst against the shadow once the round's last signal is taken: not
 * instrumented by TSan (ordered by an atomic on memory mapped twice, as in
 * test_local_channels.c) */
__attribute__((no_sanitize_thread))
static void vcompare(const unsigned char *dst, const unsigned char *shadow, int round,
                     const vop_t *ops, int n)
{
    uint64_t i = 0;
    int by = -1;

    /* a loop, not memcmp: TSan checks intercepted calls even here */
    while (i < REGION && dst[i] == shadow[i])
        i++;
    if (i == REGION)
        return;
    for (int k = 0; k < n; k++)
        if (i >= ops[k].dst_off && i < ops[k].dst_off + ops[k].size)
            by = k;
    CHECK_MSG(0, "round %d: destination byte %llu is 0x%02x, expected 0x%02x (last written by op "
              "%d of %d, kind %d)",
              round, (unsigned long long)i, dst[i], shadow[i], by, n, by >= 0 ? ops[by].kind : -1);
}

/* 8 bytes of the destination, read as vcompare reads (not instrumented) */
__attribute__((no_sanitize_thread))
static uint64_t vload(const unsigned char *p)
{
    unsigned char b[8];
    uint64_t v;

    for (int i = 0; i < 8; i++)
        b[i] = p[i];
    memcpy(&v, b, sizeof(v)); /* a local copy: nothing shared is read here */
    return v;
}

/* Values and puts over the same bytes, both directions at once: every
 * value lands whole, after the puts before it and before those after it
 * (the later one wins), small puts inline and large ones (and the values
 * behind them) at the flusher; the value a put_value_with_signal carries is
 * there when wait returns. Then the calls' checks, the last 8 bytes of the
 * region, and a raw trigger past the end: rejected by the proxy, the
 * channel failed on both sides, nothing written. */
static int values(gpuport_bootstrap_t *bs, int use_malloc)
{
    side_t s;
    int rank = bs->rank, peer = 1 - rank;
    unsigned char *shadow = calloc(1, REGION);
    vop_t ops[40];
    uint64_t last = 0x1122334455667788ull, pos;

    CHECK(shadow);
    side_open(&s, bs, use_malloc);
    for (int round = 0; round < VROUNDS; round++) {
        uint64_t tx = 1000 + (uint64_t)round * 2 + (uint64_t)rank;
        uint64_t rx = 1000 + (uint64_t)round * 2 + (uint64_t)peer;
        int n = 1 + (int)((uint64_t)round * 7 % 40);
        for (int k = 0; k < n; k++) {
            vop_t o;
            vdraw(&tx, k == n - 1, &o);
            if (o.kind == 0)
                CHECK_OK(gpuport_channel_put(s.ch, o.dst_off, o.src_off, o.size));
            else if (o.kind == 1)
                CHECK_OK(gpuport_channel_put_value(s.ch, o.dst_off, o.value));
            else
                CHECK_OK(gpuport_channel_put_value_with_signal(s.ch, o.dst_off, o.value));
        }
        for (int k = 0; k < n; k++) {
            vdraw(&rx, k == n - 1, &ops[k]);
            vapply(shadow, peer, &ops[k]);
        }
        CHECK_OK(gpuport_channel_wait(s.ch));
        vcompare(s.dst, shadow, round, ops, n);
        /* checked: the peer may write again */
        CHECK_OK(bs->barrier(bs->ctx));
    }
    /* the calls' own checks: nothing queued, the channel still fine */
    CHECK_STATUS(gpuport_channel_put_value(s.ch, 4, 1), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_put_value_with_signal(s.ch, REGION - 12, 1),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_channel_put_value(s.ch, REGION, 1), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_put_value_with_signal(s.ch, REGION, 1),
                 GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_put_value(s.ch, UINT64_MAX - 7, 1), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_put_value(s.ch, 1ull << 47, 1), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_OK(gpuport_channel_status(s.ch));
    /* the last 8 bytes of the region */
    CHECK_OK(gpuport_channel_put_value_with_signal(s.ch, REGION - 8, last + (uint64_t)rank));
    CHECK_OK(gpuport_channel_wait(s.ch));
    {
        uint64_t got = vload(s.dst + REGION - 8);
        CHECK_MSG(got == last + (uint64_t)peer, "the last 8 bytes hold 0x%llx",
                  (unsigned long long)got);
        memcpy(shadow + REGION - 8, &got, 8);
    }
    CHECK_OK(gpuport_channel_flush(s.ch));
    CHECK_OK(bs->barrier(bs->ctx));
    if (rank == 0) {
        /* past the end, as only a raw trigger can say */
        CHECK_OK(gpuport_channel_push_value(s.ch, GPUPORT_OP_PUT_VALUE_SIGNAL, REGION, 7, &pos));
        CHECK_STATUS(gpuport_channel_flush(s.ch), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_status(s.ch), GPUPORT_ERR_OUT_OF_RANGE);
        CHECK_STATUS(gpuport_channel_put_value(s.ch, 0, 1), GPUPORT_ERR_OUT_OF_RANGE);
    } else {
        CHECK_STATUS(gpuport_channel_wait(s.ch), GPUPORT_ERR_PEER);
        vcompare(s.dst, shadow, VROUNDS, ops, 0);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(side_close(&s));
    free(shadow);
    return 0;
}

static int run_pair(int (*fn)(gpuport_bootstrap_t *, int), int use_malloc, const char *name)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank = pair_fork(&bs, &child);

    CHECK(rank >= 0);
    g_child = child;
    if (g_distinct_hosts)
        setenv("GPUPORT_HOST_ID", rank ? "b" : "a", 1);
    if (rank == 1)
        _exit(fn(&bs, use_malloc));
    CHECK_MSG(fn(&bs, use_malloc) == 0, "%s: parent failed", name);
    CHECK_MSG(pair_join(child) == 0, "%s (malloc %d): child failed", name, use_malloc);
    unsetenv("GPUPORT_HOST_ID");
    printf("PASS %s (%s, %s)\n", name,
           use_malloc ? "malloc" : "gpuport_mem_alloc",
           g_distinct_hosts ? "tcp between two host identities"
                            : use_malloc ? "shm, cross-memory attach" : "shm, shared mapping");
    return 0;
}

/* One rank, a channel to itself; then a FIFO slot reserved but never
 * written (a producer that died mid-push): destroy must give up after
 * GPUPORT_TIMEOUT_MS and say so, failing the work instead of hanging. */
static int self_and_abandon(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    side_t s;
    uint64_t t0, ms;

    (void)rank;
    (void)size;
    (void)arg;
    memset(&s, 0, sizeof(s));
    CHECK_OK(gpuport_comm_create(bs, &s.comm));
    CHECK_OK(gpuport_mem_alloc(s.comm, 4096, (void **)&s.src));
    CHECK_OK(gpuport_mem_alloc(s.comm, 4096, (void **)&s.dst));
    memset(s.src, 0x5a, 4096);
    memset(s.dst, 0, 4096);
    CHECK_OK(gpuport_mem_register(s.comm, s.src, 4096, &s.msrc));
    CHECK_OK(gpuport_mem_register(s.comm, s.dst, 4096, &s.mdst));
    CHECK_OK(gpuport_channel_create(s.comm, 0, s.msrc, s.mdst, &s.ch));
    CHECK_OK(gpuport_channel_put_with_signal(s.ch, 100, 0, 1000));
    CHECK_OK(gpuport_channel_wait(s.ch));
    for (int i = 0; i < 4096; i++)
        CHECK(s.dst[i] == (i >= 100 && i < 1100 ? 0x5a : 0));

    atomic_fetch_add(s.comm->fifo.head, 1);
    CHECK_OK(gpuport_channel_signal(s.ch));
    t0 = gpuport_now_ns();
    CHECK_STATUS(side_close(&s), GPUPORT_ERR_SHUTDOWN);
    ms = (gpuport_now_ns() - t0) / 1000000;
    CHECK_MSG(ms >= 250 && ms < 5000, "destroy took %llu ms with GPUPORT_TIMEOUT_MS=300",
              (unsigned long long)ms);
    return 0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_TIMEOUT_MS", "30000", 1);
    for (g_distinct_hosts = 0; g_distinct_hosts <= 1; g_distinct_hosts++) {
        for (int m = 0; m <= 1; m++) {
            run_pair(cross_process, m, "cross-process");
            run_pair(drain_at_destroy, m, "drain-at-destroy");
        }
        setenv("GPUPORT_LOG_LEVEL", "none", 1); /* the refusals are logged */
        for (int m = 0; m <= 1; m++)
            run_pair(values, m, "put-value");
        unsetenv("GPUPORT_LOG_LEVEL");
        /* warn: the death's messages are checked (captured) */
        for (int m = 0; m <= 1; m++)
            run_pair(peer_dies, m, "peer-dies");
        setenv("GPUPORT_LOG_LEVEL", "none", 1);
        if (!g_distinct_hosts) /* same host: the wait itself looks for the peer */
            for (int m = 0; m <= 1; m++)
                run_pair(peer_dies_wait_first, m, "peer-dies-wait-first");
        for (int m = 0; m <= 1; m++)
            run_pair(id_reuse, m, "id-reuse");
        if (g_distinct_hosts)
            run_pair(goodbye_late, 0, "goodbye-late");
        /* info, of channels only: the wait's message after a close is info */
        setenv("GPUPORT_LOG_LEVEL", "info", 1);
        setenv("GPUPORT_LOG_SUBSYS", "channel", 1);
        for (int m = 0; m <= 1; m++) {
            run_pair(peer_closes, m, "peer-closes");
            run_pair(peer_destroys_channel, m, "peer-destroys-channel");
        }
        unsetenv("GPUPORT_LOG_SUBSYS");
        unsetenv("GPUPORT_LOG_LEVEL");
    }
    g_distinct_hosts = 0;
    setenv("GPUPORT_LOG_LEVEL", "none", 1);
    setenv("GPUPORT_TIMEOUT_MS", "300", 1);
    CHECK(local_run(1, self_and_abandon, NULL) == 0);
    printf("PASS self-channel and abandon-at-destroy\n");
    return 0;
}
