/* The workloads' shared frame; see wl.h. */
#define _POSIX_C_SOURCE 200809L
#include "wl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_out.h"

int wl_rank = -1, wl_size = 0;

static const char common_usage[] =
    "  --iters X     scale every round count by X (default 1)\n"
    "  --small       the small sizes make check runs\n"
    "  --no-mpi      skip the MPI baseline\n"
    "  --csv FILE    also write every figure as CSV rows (gpuport_bench's columns)\n"
    "  --json FILE   the same rows as JSON\n"
    "  -h, --help    this text\n";

int wl_init(int *argc, char ***argv, const char *usage, wl_opts_t *o)
{
    char **av = *argv;
    int n = 1, help = 0, bad = 0;

    memset(o, 0, sizeof(*o));
    o->iters = 1.0;
    MPI_Init(argc, argv);
    av = *argv;
    MPI_Comm_rank(MPI_COMM_WORLD, &wl_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &wl_size);
    for (int i = 1; i < *argc; i++) {
        const char *a = av[i];
        if (!strcmp(a, "--small")) {
            o->small = 1;
        } else if (!strcmp(a, "--no-mpi")) {
            o->no_mpi = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help = 1;
        } else if ((!strcmp(a, "--iters") || !strcmp(a, "--csv") || !strcmp(a, "--json")) &&
                   i + 1 < *argc) {
            const char *v = av[++i];
            if (!strcmp(a, "--iters")) {
                char *end;
                o->iters = strtod(v, &end);
                if (*end || !(o->iters > 0)) {
                    if (wl_rank == 0)
                        fprintf(stderr, "%s: --iters needs a positive number, not '%s'\n",
                                av[0], v);
                    bad = 1;
                }
            } else if (!strcmp(a, "--csv")) {
                o->csv = v;
            } else {
                o->json = v;
            }
        } else {
            av[n++] = av[i]; /* the program's own */
        }
    }
    *argc = n;
    av[n] = NULL;
    if (help || bad) {
        if (wl_rank == 0)
            fprintf(help ? stdout : stderr, "usage: mpirun -np N %s [options]\n%s%s", av[0],
                    usage ? usage : "", common_usage);
        MPI_Finalize();
        return help ? 0 : 2;
    }
    if (o->csv || o->json) {
        int ok = 1;
        if (wl_rank == 0)
            ok = bench_out_open(o->csv, o->json, *argc, av) == 0;
        MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!ok) {
            MPI_Finalize();
            return 2;
        }
    }
    return -1; /* go on */
}

gpuport_comm_t wl_comm(void)
{
    gpuport_comm_t comm = NULL;
    gpuport_status_t st = gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm);

    if (st != GPUPORT_OK) {
        fprintf(stderr, "rank %d: gpuport_comm_init_mpi failed: %s\n", wl_rank,
                gpuport_status_string(st));
        MPI_Finalize();
        exit(1);
    }
    return comm;
}

double wl_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int wl_agree(int ok)
{
    int all = ok ? 1 : 0;

    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

int wl_ok(gpuport_status_t st, const char *call)
{
    if (st == GPUPORT_OK)
        return 1;
    fprintf(stderr, "rank %d: %s failed: %s (%d)\n", wl_rank, call, gpuport_status_string(st),
            (int)st);
    return 0;
}

int wl_ok_peer(gpuport_status_t st, const char *call, int peer)
{
    if (st == GPUPORT_OK)
        return 1;
    fprintf(stderr, "rank %d: %s (rank %d) failed: %s (%d)\n", wl_rank, call, peer,
            gpuport_status_string(st), (int)st);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double wl_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void wl_header(const char *name, const char *what, const char *transport)
{
    char host[256] = "?";
    int hosts = 0, len;
    char *all;
    time_t now = time(NULL);
    char date[64];

    gethostname(host, sizeof(host) - 1);
    len = (int)sizeof(host);
    all = wl_rank == 0 ? malloc((size_t)wl_size * sizeof(host)) : NULL;
    MPI_Gather(host, len, MPI_CHAR, all, len, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (wl_rank != 0)
        return;
    for (int r = 0; r < wl_size; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= !strcmp(all + (size_t)q * sizeof(host), all + (size_t)r * sizeof(host));
        hosts += !seen;
    }
    free(all);
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("# %s: %s\n", name, what);
    printf("# %d ranks on %d host name%s (rank 0 on %s), channels over %s, gpuport %s (%s), %s\n",
           wl_size, hosts, hosts == 1 ? "" : "s", host, transport ? transport : "?",
           gpuport_version_string(), bench_out_commit(), date);
    bench_out_context("host", "", wl_size);
    bench_out_channel(transport ? transport : "?", "gpuport_mem_alloc");
}

int wl_rounds(const wl_opts_t *o, int base)
{
    double r = base * o->iters;

    return r < 1 ? 1 : (int)r;
}

int wl_finish(int ok)
{
    int bad = 0;

    if (wl_rank == 0 && bench_out_active())
        bad = bench_out_close() != 0;
    ok = wl_agree(ok && !bad);
    if (wl_rank == 0)
        printf("# %s\n", ok ? "all results verified" : "FAILED (see stderr)");
    MPI_Finalize();
    return ok ? 0 : 1;
}
