/* The frame of gpuport's MPI tests; see harness.h. */
#include "harness.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ENV 8 /* variables set for one communicator */

int g_rank, g_size;
stats_t g_stats;

void harness_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

/* --- failing without exiting --- */

int fail_at(const char *file, int line, const char *what, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s: %s\n", g_rank, file, line, what, msg);
    fflush(stderr);
    return -1;
}

int harness_agree(int ok)
{
    MPI_Request req;
    int all = 0, done = 0;
    double start = MPI_Wtime();
    struct timespec ms = {0, 1000000};

    MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done && MPI_Wtime() - start > HARNESS_AGREE_LIMIT_S) {
            fprintf(stderr, "rank %d: other ranks did not finish the scenario within %.0f s; "
                    "aborting\n", g_rank, HARNESS_AGREE_LIMIT_S);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (!done)
            nanosleep(&ms, NULL);
    }
    return all;
}

/* --- reproducible content --- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t harness_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

uint64_t rng_next(rng_t *r)
{
    return mix64(r->s += 0x9e3779b97f4a7c15ull);
}

uint64_t rng_below(rng_t *r, uint64_t n)
{
    return rng_next(r) % n;
}

unsigned char pattern(uint64_t tag, uint64_t pos)
{
    return (unsigned char)(((pos ^ tag) * 0x9e3779b97f4a7c15ull) >> 56);
}

void fill(unsigned char *buf, uint64_t off, uint64_t size, uint64_t tag)
{
    for (uint64_t i = off; i < off + size; i++)
        buf[i] = pattern(tag, i);
}

/* --- communicators under a temporary environment --- */

gpuport_status_t comm_init_env(const char *const *kv, gpuport_comm_t *comm_p)
{
    char *old[MAX_ENV] = {0};
    gpuport_status_t status;
    int n;

    for (n = 0; kv && kv[2 * n] && n < MAX_ENV; n++) {
        const char *prev = getenv(kv[2 * n]);
        old[n] = prev ? strdup(prev) : NULL;
        setenv(kv[2 * n], kv[2 * n + 1], 1);
    }
    status = gpuport_comm_init_mpi(MPI_COMM_WORLD, comm_p);
    for (int i = 0; i < n; i++) {
        if (old[i])
            setenv(kv[2 * i], old[i], 1);
        else
            unsetenv(kv[2 * i]);
        free(old[i]);
    }
    return status;
}

int comm_open(const char *const *kv, gpuport_comm_t *comm_p)
{
    *comm_p = NULL;
    REQUIRE_OK(comm_init_env(kv, comm_p));
    REQUIRE(gpuport_comm_rank(*comm_p) == g_rank && gpuport_comm_size(*comm_p) == g_size,
            "communicator says rank %d of %d", gpuport_comm_rank(*comm_p),
            gpuport_comm_size(*comm_p));
    return 0;
}

/* --- channel order --- */

int tournament_rounds(void)
{
    int n = g_size + (g_size & 1);
    return n - 1;
}

int tournament_partner(int r)
{
    int n = g_size + (g_size & 1), m = n - 1, p;

    if (g_rank == m)
        p = (int)(((long)r * (n / 2)) % m); /* the k with 2k = r (mod m) */
    else {
        p = ((r - g_rank) % m + m) % m;
        if (p == g_rank)
            p = m;
    }
    return p < g_size ? p : -1;
}

/* --- the driver --- */

static int selected(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != '\0'))
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

void (*harness_before_finalize)(void);

/* MPI_Finalize, after what the program asked to be done first */
static void finalize(void)
{
    if (harness_before_finalize)
        harness_before_finalize();
    MPI_Finalize();
}

static int usage(const char *argv0, const scenario_t *scenarios, int n, int rc)
{
    if (g_rank == 0) {
        fprintf(rc ? stderr : stdout, "usage: %s [-l] [-s NAME[,NAME...]]\nscenarios:\n",
                argv0);
        for (int i = 0; i < n; i++)
            fprintf(rc ? stderr : stdout, "  %-18s %s\n", scenarios[i].name, scenarios[i].what);
    }
    finalize();
    return rc;
}

int harness_main(int argc, char **argv, const scenario_t *scenarios, int n, void (*setup)(void))
{
    const char *only = NULL;
    int opt, nrun = 0;

    harness_init(&argc, &argv);
    while ((opt = getopt(argc, argv, "ls:h")) != -1) {
        if (opt == 's')
            only = optarg;
        else
            return usage(argv[0], scenarios, n, opt == 'l' || opt == 'h' ? 0 : 2);
    }
    for (int i = 0; only && i < n; i++)
        nrun += selected(only, scenarios[i].name);
    if (only && nrun == 0)
        return usage(argv[0], scenarios, n, 2);
    if (setup)
        setup();

    for (int i = 0; i < n; i++) {
        const scenario_t *sc = &scenarios[i];
        stats_t sum;
        double t0 = MPI_Wtime();
        int ok;

        if (only && !selected(only, sc->name))
            continue;
        memset(&g_stats, 0, sizeof(g_stats));
        ok = sc->run() == 0;
        if (!ok)
            fprintf(stderr, "rank %d: FAIL %s\n", g_rank, sc->name);
        if (!harness_agree(ok)) {
            if (g_rank == 0)
                printf("FAIL %s: a check failed on at least one rank (see above)\n", sc->name);
            fflush(stdout);
            finalize();
            return 1;
        }
        MPI_Reduce(&g_stats, &sum, 5, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (g_rank == 0)
            printf("PASS %s: %s; %d ranks, %llu channel ends, %llu puts (%.1f MiB), %llu signals "
                   "taken, %.1f MiB verified (%.2f s)\n",
                   sc->name, sc->what, g_size, sum.channels, sum.puts,
                   (double)sum.bytes / MIB, sum.signals, (double)sum.verified / MIB,
                   MPI_Wtime() - t0);
        fflush(stdout);
    }
    finalize();
    return 0;
}
