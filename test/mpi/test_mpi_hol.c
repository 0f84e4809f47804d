/*
 * One stopped peer holds no other channel (the proxy's parking,
 * src/proxy/proxy_park.c, and tcp's per-connection sending), over tcp
 * between three ranks with host identities of their own. Rank 0 has
 * channel A to rank 1 and channel B to rank 2. Rank 0 stops rank 1
 * (SIGSTOP), queues work on A that rank 1 cannot take, and meanwhile
 * ping-pongs 8 bytes with rank 2 on B: every round must arrive, and its
 * rate is printed beside the same run's rate before the stop. Run with the
 * host calls' own sends off and on (GPUPORT_HOST_INLINE, argv[1]); before
 * parking, B's ping-pong stopped at once with them off. Two loads of A
 * (argv[2]):
 *
 *   small  (the default) A's send queue filled (GPUPORT_SOCKET_QUEUE=128:
 *          64 operations awaiting acknowledgement) and 500 puts more,
 *          which wait parked at the proxy; rank 1 runs again once B's
 *          rounds are done;
 *   big    16 puts of 4 MiB, so that rank 1's socket window and rank 0's
 *          send buffer are full and most of the 64 MiB waits in the send
 *          queue. A thread of rank 0 lets rank 1 run again after
 *          GPUPORT_TEST_HOL_STOP_MS (1000) while the rounds go on, and each
 *          round is timed against that moment: a round that was outstanding
 *          HELD_MS before rank 1 resumed and answered only after it waited
 *          on something A held, and fails the test. The longest round is
 *          printed (hol_load.sh collects these lines);
 *   control the same timing with nothing stopped and nothing queued on A
 *          (its puts go after the rounds): a round held "until the resume"
 *          here waited on the machine, not on A.
 *
 * A round outstanding for WATCH_MS (GPUPORT_TEST_HOL_WATCH_MS, 300) makes
 * ranks 0 and 2 print, every WATCH_MS while it lasts, each of their threads' state, system call and
 * run and run-queue wait times (/proc): a thread blocked on a socket or a
 * lock shows its call, one that the kernel does not run shows R and a
 * growing wait.
 *
 * Then A's flush returns GPUPORT_OK and rank 1 finds what the overlapping
 * puts left (the last one's bytes, so in order) and the value after them.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "gpuport/gpuport_mpi.h"

#define REGION 65536
#define NPUT 500
#define ROUNDS 300
#define VALUE_OFF 4096
#define BIG (4u << 20)
#define NBIG 16
#define BIG_REGION (BIG + 4096) /* BIG_VALUE_OFF and the puts' offsets 8i */
#define BIG_VALUE_OFF BIG
#define HELD_MS 100.0
#define AFTER_MS 200.0 /* rounds go on this long after the resume */
#define END UINT64_MAX /* the last round's word: rank 2 answers it and stops */
#define WATCH_MS 300.0 /* GPUPORT_TEST_HOL_WATCH_MS */

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s: ", g_rank, __FILE__, __LINE__,   \
                    #cond);                                                                     \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                       \
        }                                                                                       \
    } while (0)
#define CHECK_OK(expr)                                                                          \
    do {                                                                                        \
        gpuport_status_t st_ = (expr);                                                          \
        CHECK(st_ == GPUPORT_OK, "%s returned %s", #expr, gpuport_status_string(st_));          \
    } while (0)

static int g_rank;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the watchdog of long rounds (ranks 0 and 2) ---- */

static _Atomic double g_round_since; /* now_s() when this rank began waiting; 0: not */

/* One line: each thread of this process, "tid state syscall run/wait ms". */
static void threads_line(double since)
{
    char line[2048];
    int len = snprintf(line, sizeof(line), "rank %d, a round outstanding %.0f ms, threads:",
                       g_rank, (now_s() - since) * 1e3);
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;

    while (d && (e = readdir(d)) && len < (int)sizeof(line) - 96) {
        char path[96], stat[512] = "", call[32] = "?", *p;
        unsigned long long run = 0, wait = 0;
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%.16s/stat", e->d_name);
        if ((f = fopen(path, "r"))) {
            stat[fread(stat, 1, sizeof(stat) - 1, f)] = '\0';
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/self/task/%.16s/syscall", e->d_name);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%31s", call) != 1)
                strcpy(call, "?");
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/self/task/%.16s/schedstat", e->d_name);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%llu %llu", &run, &wait) != 2)
                run = wait = 0;
            fclose(f);
        }
        p = strrchr(stat, ')');
        len += snprintf(line + len, sizeof(line) - (size_t)len, " [%.16s %c %s run %.1f wait %.1f]",
                        e->d_name, p ? p[2] : '?', call, (double)run / 1e6, (double)wait / 1e6);
    }
    if (d)
        closedir(d);
    fprintf(stderr, "%s\n", line);
}

static void *watch_rounds(void *arg)
{
    const char *ms = getenv("GPUPORT_TEST_HOL_WATCH_MS");
    double told = 0, every = (ms ? atof(ms) : WATCH_MS) / 1e3;

    (void)arg;
    for (;;) {
        double since = atomic_load(&g_round_since), t;
        usleep(10000);
        t = now_s();
        if (since == 0.0 || t - since < every || t - told < every)
            continue;
        told = t;
        threads_line(since);
    }
    return NULL;
}

/* One of B's rounds from rank 0: the word w at round r's offset, and
 * rank 2's answer w + 1 (END: END) back. */
static void round_trip(gpuport_channel_t b, unsigned char *src, const volatile unsigned char *dst,
                       uint64_t r, uint64_t w)
{
    uint64_t off = (r % 512) * 8, got, want = w == END ? END : w + 1;

    memcpy(src + off, &w, 8);
    atomic_store(&g_round_since, now_s());
    CHECK_OK(gpuport_channel_put_with_signal(b, off, off, 8));
    CHECK_OK(gpuport_channel_wait(b));
    atomic_store(&g_round_since, 0.0);
    memcpy(&got, (const unsigned char *)dst + off, 8);
    CHECK(got == want, "round %llu: answer %llu, not %llu", (unsigned long long)r,
          (unsigned long long)got, (unsigned long long)want);
}

/* Rank 2: answers every round until END. */
static void answer_rounds(gpuport_channel_t b, unsigned char *src,
                          const volatile unsigned char *dst)
{
    for (uint64_t r = 0;; r++) {
        uint64_t off = (r % 512) * 8, got, w;
        atomic_store(&g_round_since, now_s());
        CHECK_OK(gpuport_channel_wait(b));
        atomic_store(&g_round_since, 0.0);
        memcpy(&got, (const unsigned char *)dst + off, 8);
        CHECK(got == r || got == END, "round %llu: %llu", (unsigned long long)r,
              (unsigned long long)got);
        w = got == END ? END : got + 1;
        memcpy(src + off, &w, 8);
        CHECK_OK(gpuport_channel_put_with_signal(b, off, off, 8));
        if (got == END)
            return;
    }
}

/* ROUNDS rounds from round *r on; rounds per second. */
static double rounds(gpuport_channel_t b, unsigned char *src, const volatile unsigned char *dst,
                     uint64_t *r)
{
    double t0 = now_s();

    for (int i = 0; i < ROUNDS; i++, ++*r)
        round_trip(b, src, dst, *r, *r);
    return ROUNDS / (now_s() - t0);
}

/* 1 once /proc says pid is stopped */
static int stopped(pid_t pid)
{
    char path[64], buf[512], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p && (p[2] == 'T' || p[2] == 't');
}

static void stop_rank(pid_t pid)
{
    CHECK(kill(pid, SIGSTOP) == 0, "SIGSTOP");
    for (int i = 0; i < 5000 && !stopped(pid); i++)
        usleep(1000);
    CHECK(stopped(pid), "rank 1 did not stop");
}

/* The thread that lets rank 1 run again, and when it did (0: not yet). */
typedef struct resumer {
    pid_t pid; /* 0: nothing to let go (control), only the time */
    double at;             /* now_s() of the SIGCONT */
    _Atomic double resumed;
    pthread_t thread;
} resumer_t;

static void *resume_later(void *arg)
{
    resumer_t *rs = arg;
    double t;

    while ((t = now_s()) < rs->at)
        usleep((useconds_t)((rs->at - t) * 1e6) + 1);
    /* published before the signal: a round that ends after the resume
     * always sees it */
    atomic_store(&rs->resumed, now_s());
    if (rs->pid)
        CHECK(kill(rs->pid, SIGCONT) == 0, "SIGCONT");
    return NULL;
}

/* What B's rounds met while A was stuck and after it was let go. */
typedef struct round_stats {
    uint64_t n, n_before;   /* rounds; those answered before the resume */
    double worst, worst_before; /* the longest round (s); of those before */
    double worst_start;     /* when the longest began */
    uint64_t held;          /* outstanding HELD_MS before the resume, answered after */
    double held_for, held_after; /* the longest of those: its time, after the resume */
} round_stats_t;

/* Rounds from *r on until AFTER_MS after rank 1 resumed, each timed. */
static double rounds_until_resumed(gpuport_channel_t b, unsigned char *src,
                                   const volatile unsigned char *dst, uint64_t *r,
                                   resumer_t *rs, round_stats_t *s)
{
    double t0 = now_s(), resumed;

    for (;; ++*r) {
        double ts = now_s(), te;
        round_trip(b, src, dst, *r, *r);
        te = now_s();
        resumed = atomic_load(&rs->resumed);
        s->n++;
        if (te - ts > s->worst) {
            s->worst = te - ts;
            s->worst_start = ts;
        }
        if (resumed == 0.0 || te < resumed) {
            s->n_before++;
            if (te - ts > s->worst_before)
                s->worst_before = te - ts;
        } else if (ts < resumed - HELD_MS / 1e3) {
            s->held++;
            if (te - ts > s->held_for) {
                s->held_for = te - ts;
                s->held_after = te - resumed;
            }
            fprintf(stderr, "rank 0: round %llu was outstanding %.0f ms before rank 1 resumed "
                    "and answered %.0f ms after\n", (unsigned long long)*r,
                    (resumed - ts) * 1e3, (te - resumed) * 1e3);
        }
        if (resumed != 0.0 && te > resumed + AFTER_MS / 1e3) {
            ++*r;
            break;
        }
    }
    resumed = atomic_load(&rs->resumed);
    return s->n_before / (resumed - t0);
}

/* A's load: NPUT overlapping 8-byte puts into destination 0 from offsets
 * 8i of a source holding i there, or NBIG puts of BIG bytes into
 * destination 0 from offsets 8i of a source whose word k is k; then a
 * value and the signal. */
static void load_a(gpuport_channel_t a, unsigned char *src, int big)
{
    if (big) {
        for (uint64_t k = 0; k < BIG_REGION / 8; k++)
            memcpy(src + 8 * k, &k, 8);
        for (uint64_t i = 0; i < NBIG; i++)
            CHECK_OK(gpuport_channel_put(a, 0, 8 * i, BIG));
        CHECK_OK(gpuport_channel_put_value_with_signal(a, BIG_VALUE_OFF, 0xfeedull));
        return;
    }
    for (uint64_t i = 0; i < NPUT; i++)
        memcpy(src + REGION / 2 + 8 * i, &i, 8);
    for (uint64_t i = 0; i < NPUT; i++)
        CHECK_OK(gpuport_channel_put(a, 0, REGION / 2 + 8 * i, 8));
    CHECK_OK(gpuport_channel_put_value_with_signal(a, VALUE_OFF, 0xfeedull));
}

/* Rank 1, once A's signal came: what A's load left. */
static void check_a(const unsigned char *dst, int big)
{
    uint64_t word, value;

    if (big) {
        for (uint64_t k = 0; k < BIG / 8; k++) {
            memcpy(&word, dst + 8 * k, 8);
            CHECK(word == k + NBIG - 1, "A's destination word %llu holds %llu (the last put's: "
                  "%llu)", (unsigned long long)k, (unsigned long long)word,
                  (unsigned long long)(k + NBIG - 1));
        }
        memcpy(&value, dst + BIG_VALUE_OFF, 8);
    } else {
        memcpy(&word, dst, 8);
        CHECK(word == NPUT - 1, "A's destination holds %llu (the last put: %d)",
              (unsigned long long)word, NPUT - 1);
        memcpy(&value, dst + VALUE_OFF, 8);
    }
    CHECK(value == 0xfeedull, "A's value is 0x%llx", (unsigned long long)value);
}

enum { MODE_SMALL, MODE_BIG, MODE_CONTROL };

/* This rank's regions: B's (src, dst) and A's (asrc, adst), registered. */
typedef struct regions {
    unsigned char *src, *dst, *asrc, *adst;
    gpuport_mem_t msrc, mdst, masrc, madst;
} regions_t;

/* The big load and its control: rounds timed against rank 1's resume. */
static void rank0_timed(gpuport_channel_t a, gpuport_channel_t b, const regions_t *g, int mode,
                        pid_t victim, double before, uint64_t r)
{
    const char *ms = getenv("GPUPORT_TEST_HOL_STOP_MS");
    double beside, flushed;
    resumer_t rs;
    round_stats_t s;

    memset(&rs, 0, sizeof(rs));
    memset(&s, 0, sizeof(s));
    rs.pid = mode == MODE_BIG ? victim : 0;
    rs.at = now_s() + (ms ? atof(ms) : 1000.0) / 1e3;
    CHECK(pthread_create(&rs.thread, NULL, resume_later, &rs) == 0, "pthread_create");
    beside = rounds_until_resumed(b, g->src, g->dst, &r, &rs, &s);
    round_trip(b, g->src, g->dst, r, END);
    pthread_join(rs.thread, NULL);
    if (mode == MODE_CONTROL)
        load_a(a, g->asrc, 0);
    CHECK_OK(gpuport_channel_flush(a));
    flushed = now_s() - atomic_load(&rs.resumed);
    printf("hol %s (GPUPORT_HOST_INLINE=%s): %llu rounds, %.0f rounds/s beside %s, %.0f before "
           "(%.0f%%); worst round %.2f ms (from %+.0f ms of the resume; %.2f ms before it); "
           "%llu held until the resume (longest %.0f ms, answered %.0f ms after it); A flushed "
           "%.0f ms after the resume\n",
           mode == MODE_BIG ? "big" : "control", getenv("GPUPORT_HOST_INLINE"),
           (unsigned long long)s.n, beside,
           mode == MODE_BIG ? "16 puts of 4 MiB to a stopped peer" : "nothing stopped", before,
           100.0 * beside / before, s.worst * 1e3, (s.worst_start - atomic_load(&rs.resumed)) * 1e3,
           s.worst_before * 1e3, (unsigned long long)s.held, s.held_for * 1e3,
           s.held_after * 1e3, flushed * 1e3);
    CHECK(s.held == 0, "%llu of B's rounds waited until rank 1 resumed (longest %.0f ms)",
          (unsigned long long)s.held, s.held_for * 1e3);
}

static void rank0(gpuport_comm_t comm, const regions_t *g, int mode, const int *pids)
{
    gpuport_channel_t a, b;
    double before, beside;
    uint64_t r = 0;

    CHECK_OK(gpuport_channel_create(comm, 1, g->masrc, g->madst, &a));
    CHECK_OK(gpuport_channel_create(comm, 2, g->msrc, g->mdst, &b));
    MPI_Barrier(MPI_COMM_WORLD); /* 1 */
    before = rounds(b, g->src, g->dst, &r);
    if (mode != MODE_CONTROL) {
        stop_rank(pids[1]);
        load_a(a, g->asrc, mode == MODE_BIG);
    }
    if (mode == MODE_SMALL) {
        beside = rounds(b, g->src, g->dst, &r);
        CHECK_OK(gpuport_channel_status(a));
        printf("B's 8-byte ping-pong (GPUPORT_HOST_INLINE=%s): %.0f rounds/s beside a stopped "
               "peer's full channel, %.0f before (%.0f%%)\n",
               getenv("GPUPORT_HOST_INLINE"), beside, before, 100.0 * beside / before);
        CHECK(kill(pids[1], SIGCONT) == 0, "SIGCONT");
        round_trip(b, g->src, g->dst, r, END);
        CHECK_OK(gpuport_channel_flush(a));
    } else {
        rank0_timed(a, b, g, mode, pids[1], before, r);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* 2 */
    CHECK_OK(gpuport_channel_destroy(a));
    CHECK_OK(gpuport_channel_destroy(b));
}

int main(int argc, char **argv)
{
    static const char *const modes[] = {"small", "big", "control"};
    int size, pids[3], pid, mode = MODE_SMALL;
    size_t alen;
    char host[32];
    gpuport_comm_t comm;
    gpuport_channel_t ch;
    pthread_t watch;
    regions_t g;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 3, "run on 3 ranks, not %d", size);
    while (argc > 2 && mode < 3 && strcmp(argv[2], modes[mode]) != 0)
        mode++;
    CHECK(mode < 3, "argv[2]: small, big or control, not %s", argv[2]);
    alen = mode == MODE_SMALL ? REGION : BIG_REGION;
    snprintf(host, sizeof(host), "%x", 0x40 + g_rank);
    setenv("GPUPORT_HOST_ID", host, 1);
    setenv("GPUPORT_TRANSPORT", "tcp", 1);
    setenv("GPUPORT_SOCKET_QUEUE", "128", 1);
    setenv("GPUPORT_HOST_INLINE", argc > 1 ? argv[1] : "0", 1);
    pid = (int)getpid();
    MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, MPI_COMM_WORLD);
    /* B's regions; A's, apart, since its puts are sent from where they are
     * while B's rounds write their own source */
    memset(&g, 0, sizeof(g));
    g.src = calloc(1, REGION);
    g.dst = calloc(1, REGION);
    g.asrc = calloc(1, alen);
    g.adst = calloc(1, alen);
    CHECK(g.src && g.dst && g.asrc && g.adst, "no memory");
    CHECK_OK(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm));
    CHECK_OK(gpuport_mem_register(comm, g.src, REGION, &g.msrc));
    CHECK_OK(gpuport_mem_register(comm, g.dst, REGION, &g.mdst));
    CHECK_OK(gpuport_mem_register(comm, g.asrc, alen, &g.masrc));
    CHECK_OK(gpuport_mem_register(comm, g.adst, alen, &g.madst));
    if (g_rank != 1)
        CHECK(pthread_create(&watch, NULL, watch_rounds, NULL) == 0, "pthread_create");
    if (g_rank == 0) {
        rank0(comm, &g, mode, pids);
    } else if (g_rank == 1) {
        CHECK_OK(gpuport_channel_create(comm, 0, g.masrc, g.madst, &ch));
        MPI_Barrier(MPI_COMM_WORLD); /* 1 */
        CHECK_OK(gpuport_channel_wait(ch)); /* stopped and continued in it */
        check_a(g.adst, mode == MODE_BIG);
        MPI_Barrier(MPI_COMM_WORLD); /* 2 */
        CHECK_OK(gpuport_channel_destroy(ch));
    } else {
        CHECK_OK(gpuport_channel_create(comm, 0, g.msrc, g.mdst, &ch));
        MPI_Barrier(MPI_COMM_WORLD); /* 1 */
        answer_rounds(ch, g.src, g.dst);
        MPI_Barrier(MPI_COMM_WORLD); /* 2 */
        CHECK_OK(gpuport_channel_destroy(ch));
    }
    CHECK_OK(gpuport_mem_deregister(g.masrc));
    CHECK_OK(gpuport_mem_deregister(g.madst));
    CHECK_OK(gpuport_mem_deregister(g.msrc));
    CHECK_OK(gpuport_mem_deregister(g.mdst));
    CHECK_OK(gpuport_comm_destroy(comm));
    if (g_rank == 0)
        printf("PASS head of line (GPUPORT_HOST_INLINE=%s, %s)\n", getenv("GPUPORT_HOST_INLINE"),
               modes[mode]);
    free(g.src);
    free(g.dst);
    free(g.asrc);
    free(g.adst);
    MPI_Finalize();
    return 0;
}
