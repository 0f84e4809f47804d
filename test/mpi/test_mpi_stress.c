/*
 * Randomized stress over gpuport channels: between every pair of ranks and
 * from each rank to itself, with a FIFO of 4 or 16 slots, in the checked
 * rounds of test/mpi/traffic.h. Each scenario draws its layout and its plan
 * from the run's seed:
 *
 *  - regions of 256 KiB .. 1 MiB (any size), 1..3 channels per pair plus one
 *    to self, each region a sub-range of one buffer (malloc or
 *    gpuport_mem_alloc) with guard bands around it, every guard byte of
 *    every region checked after every round;
 *  - 1..16 puts per channel and batch, of random sizes (1 B to the whole
 *    region, inline and through the flusher) at random offsets, in every
 *    mode (signal, put_with_signal, flush then garbage), taken by wait or
 *    by poll;
 *  - sources scribbled over right after every flush, so that a put that
 *    reads its source late shows;
 *  - every byte of every destination compared with its shadow after every
 *    round, and once more at rest after the last round.
 *
 *   auto-fifo4, auto-fifo16  GPUPORT_FIFO_SIZE=4 / 16, the transport auto picks
 *                            (shm on one host; tcp to other hosts under test/net)
 *   tcp-fifo4, tcp-fifo16    GPUPORT_TRANSPORT=tcp: every channel, to self too
 *   hosts-fifo4              a GPUPORT_HOST_ID per group of ranks (every rank its
 *                            own at 2 ranks, pairs at 4): auto picks shm within a
 *                            group, tcp between groups
 *
 * Options, before the harness's own (-l, -s NAME[,NAME...]):
 *   --seed N      the run's seed (else GPUPORT_TEST_SEED, else the clock);
 *                 rank 0 prints it, and the same seed replays the same traffic
 *   --rounds N    at most N rounds per scenario (default 400)
 *   --seconds S   and about S seconds per scenario at most (default 3): the
 *                 ranks agree after every round whether to go on
 *   --plant KIND  damage that the checks must catch, so that the run fails:
 *                 the last rank, in the first batch it receives from round 2
 *                 on, flips one destination byte after the signal (data),
 *                 the guard byte after that destination (dst-guard) or the
 *                 guard byte before that channel's source (src-guard)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "traffic.h"

#define TIMEOUT_MS "30000" /* GPUPORT_TIMEOUT_MS unless set: a hang becomes a failure */
#define PLANT_ROUND 2

enum { PLANT_NONE, PLANT_DATA, PLANT_DST_GUARD, PLANT_SRC_GUARD };

static uint64_t g_seed;
static int g_seed_given;
static int g_max_rounds = 400;
static double g_seconds = 3.0;
static int g_plant;
static int g_planted;
static MPI_Comm g_agree; /* the per-round agreement's own communicator */

/* --- planted damage --- */

static void plant(link_t *l, const batch_t *b, int round)
{
    static const char *const what[] = {"", "a flipped destination byte",
                                       "a guard byte after the destination",
                                       "a guard byte before the source"};
    const op_t *o = &b->ops[b->n - 1];

    if (g_planted || g_rank != g_size - 1 || round < PLANT_ROUND ||
        (g_plant == PLANT_SRC_GUARD && !l->src.size))
        return;
    if (g_plant == PLANT_DATA)
        l->dst.ptr[o->dst_off + o->size / 2] ^= 0x40;
    else if (g_plant == PLANT_DST_GUARD)
        l->dst.ptr[l->dst.size] ^= 0x01;
    else
        l->src.ptr[-1] ^= 0x01;
    g_planted = 1;
    fprintf(stderr, "rank %d: planted %s on the channel from rank %d (#%d) in round %d\n",
            g_rank, what[g_plant], l->peer, l->index, round);
}

/* --- one scenario --- */

/* Rounds until the limit of rounds or seconds, or the first failure on any
 * rank: every rank takes part in every round's agreement, so all stop after
 * the same round. */
static int run_rounds(linkset_t *ls, const plan_t *p, int *rounds_p, double *slowest_p,
                      int *slowest_round_p)
{
    double t0 = MPI_Wtime();
    int rc = 0, all[2] = {0, 0};

    *slowest_p = 0;
    for (*rounds_p = 0; *rounds_p < g_max_rounds && !all[0] && !all[1]; ++*rounds_p) {
        int mine[2];
        double t = MPI_Wtime();
        rc = run_plan(ls, p);
        if (MPI_Wtime() - t > *slowest_p) {
            *slowest_p = MPI_Wtime() - t;
            *slowest_round_p = *rounds_p;
        }
        mine[0] = rc != 0;
        mine[1] = MPI_Wtime() - t0 > g_seconds;
        MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, g_agree);
    }
    if (rc == 0 && all[0])
        fprintf(stderr, "rank %d: stopping after round %d, where another rank failed\n",
                g_rank, *rounds_p - 1);
    return rc || all[0] ? -1 : 0;
}

static int stress(int index, const char *fifo, const char *transport, int ranks_per_host)
{
    char host[32];
    const char *env[] = {"GPUPORT_FIFO_SIZE", fifo, "GPUPORT_TRANSPORT", transport,
                         ranks_per_host ? "GPUPORT_HOST_ID" : NULL, host, NULL};
    rng_t r = {hash4(g_seed, (uint64_t)index, 0x57e55, 0)};
    layout_t lay = {.self = 1};
    plan_t p = {.rounds = 1, .modes = MODE_SIGNAL | MODE_PUT_SIGNAL | MODE_FLUSH_GARBAGE,
                .scribble = 1};
    const char *saved_remote = g_remote;
    double t0 = MPI_Wtime();
    gpuport_comm_t comm;
    linkset_t ls;
    int rounds = 0, slowest_round = 0, rc;
    double slowest = 0, t_setup;

    lay.size = ASYNC_MIN + 1 + rng_below(&r, 3 * ASYNC_MIN);
    lay.shared = (int)rng_below(&r, 2);
    lay.per_pair = 1 + (int)rng_below(&r, 3);
    lay.seed = rng_next(&r);
    p.max_puts = 1 + (int)rng_below(&r, MAX_PUTS);
    p.big_pct = 5 + (int)rng_below(&r, 26);
    /* poll's own limit is 20 s: a planted failure must end within the
     * short GPUPORT_TIMEOUT_MS of a wait */
    p.poll = !g_plant && rng_below(&r, 4) == 0;
    if (g_rank == 0)
        printf("  region %" PRIu64 " B, %d channel(s) per pair + self, %s, up to %d puts per "
               "batch, %d%% large, %s, FIFO %s, transport %s%s\n",
               lay.size, lay.per_pair, lay.shared ? "gpuport_mem_alloc" : "malloc",
               p.max_puts, p.big_pct, p.poll ? "poll" : "wait", fifo, transport,
               ranks_per_host ? " (GPUPORT_HOST_ID per group)" : "");
    fflush(stdout);

    snprintf(host, sizeof(host), "%x", ranks_per_host ? g_rank / ranks_per_host + 1 : 0);
    g_forced = strcmp(transport, "auto") == 0 ? "" : transport;
    if (ranks_per_host) {
        g_ranks_per_host = ranks_per_host;
        g_remote = "tcp";
    }
    rc = comm_open(env, &comm);
    if (rc == 0)
        rc = linkset_open(comm, &lay, &ls);
    t_setup = MPI_Wtime() - t0;
    if (rc == 0)
        rc = run_rounds(&ls, &p, &rounds, &slowest, &slowest_round);
    g_forced = NULL;
    g_ranks_per_host = 0;
    g_remote = saved_remote;
    TRY(rc);
    MPI_Barrier(g_agree); /* every sender flushed: nothing may arrive any more */
    TRY(linkset_at_rest(&ls));
    TRY(linkset_close(&ls));
    REQUIRE_OK(gpuport_comm_destroy(comm));
    if (g_rank == 0)
        printf("  set up in %.2f s, %d rounds in %.2f s, the slowest (round %d) %.3f s on rank 0 "
               "(seed %" PRIu64 ")\n", t_setup, rounds, MPI_Wtime() - t0 - t_setup, slowest_round,
               slowest, g_seed);
    return 0;
}

static int hosts_group(void)
{
    return g_size >= 4 ? g_size / 2 : 1;
}

static int sc_auto_fifo4(void) { return stress(0, "4", "auto", 0); }
static int sc_auto_fifo16(void) { return stress(1, "16", "auto", 0); }
static int sc_tcp_fifo4(void) { return stress(2, "4", "tcp", 0); }
static int sc_tcp_fifo16(void) { return stress(3, "16", "tcp", 0); }
static int sc_hosts_fifo4(void) { return stress(4, "4", "auto", hosts_group()); }

static const scenario_t scenarios[] = {
    {"auto-fifo4", sc_auto_fifo4, "random all-pairs + self traffic, FIFO of 4, auto transport"},
    {"auto-fifo16", sc_auto_fifo16, "random all-pairs + self traffic, FIFO of 16, auto transport"},
    {"tcp-fifo4", sc_tcp_fifo4, "random all-pairs + self traffic, FIFO of 4, tcp forced"},
    {"tcp-fifo16", sc_tcp_fifo16, "random all-pairs + self traffic, FIFO of 16, tcp forced"},
    {"hosts-fifo4", sc_hosts_fifo4,
     "random traffic, FIFO of 4, host ids per group: shm within, tcp between"},
};

static void free_agree(void)
{
    MPI_Comm_free(&g_agree);
}

static void setup(void)
{
    unsigned long long seed = g_seed;

    setenv("GPUPORT_TIMEOUT_MS", TIMEOUT_MS, 0);
    traffic_init();
    MPI_Comm_dup(MPI_COMM_WORLD, &g_agree);
    harness_before_finalize = free_agree;
    /* rank 0's seed for everyone */
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    g_seed = seed;
    if (g_plant)
        traffic_after_signal = plant;
    if (g_rank == 0)
        printf("test_mpi_stress: %d ranks, seed %" PRIu64 " (replay: --seed %" PRIu64
               "), up to %d rounds or %.1f s per scenario%s\n",
               g_size, g_seed, g_seed, g_max_rounds, g_seconds,
               g_plant ? ", damage planted: this run must fail" : "");
    fflush(stdout);
}

/* Takes this program's options out of argv; the rest is the harness's. */
static int options(int *argc, char **argv)
{
    static const char *const plants[] = {"none", "data", "dst-guard", "src-guard"};
    const char *env = getenv("GPUPORT_TEST_SEED");
    int out = 1;

    if (env && *env) {
        g_seed = strtoull(env, NULL, 0);
        g_seed_given = 1;
    }
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        int known = 1;
        if (strcmp(a, "--seed") == 0 && v) {
            g_seed = strtoull(v, NULL, 0);
            g_seed_given = 1;
        } else if (strcmp(a, "--rounds") == 0 && v && atoi(v) > 0) {
            g_max_rounds = atoi(v);
        } else if (strcmp(a, "--seconds") == 0 && v && atof(v) > 0) {
            g_seconds = atof(v);
        } else if (strcmp(a, "--plant") == 0 && v) {
            g_plant = -1;
            for (int k = 1; k < 4; k++)
                if (strcmp(v, plants[k]) == 0)
                    g_plant = k;
            if (g_plant < 0) {
                fprintf(stderr, "--plant: expected data, dst-guard or src-guard, not %s\n", v);
                return -1;
            }
        } else {
            known = 0;
        }
        if (known)
            i++;
        else
            argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
    if (!g_seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g_seed = hash4((uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(), 0) >> 16;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (options(&argc, argv) != 0)
        return 2;
    return harness_main(argc, argv, scenarios, (int)(sizeof(scenarios) / sizeof(scenarios[0])),
                        setup);
}
