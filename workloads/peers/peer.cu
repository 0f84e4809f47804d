/* The peer baselines' frame, wl.h's calls without gpuport; see peer.h. */
#include "peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int wl_rank = -1, wl_size = 0; /* C linkage, from wl.h's declaration */

static const char common_usage[] =
    "  --iters X     scale every round count by X (default 1)\n"
    "  --small       the small sizes make check runs\n"
    "  --no-mpi      accepted, for the gpuport versions' command lines (no MPI column here)\n"
    "  -h, --help    this text\n";

int wl_init(int *argc, char ***argv, const char *usage, wl_opts_t *o)
{
    char **av;
    int n = 1, help = 0, bad = 0;

    memset(o, 0, sizeof(*o));
    o->iters = 1.0;
    MPI_Init(argc, argv);
    av = *argv;
    MPI_Comm_rank(MPI_COMM_WORLD, &wl_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &wl_size);
    for (int i = 1; i < *argc; i++) {
        const char *a = av[i];
        char *end;
        if (!strcmp(a, "--small")) {
            o->small = 1;
        } else if (!strcmp(a, "--no-mpi")) {
            o->no_mpi = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help = 1;
        } else if (!strcmp(a, "--csv") || !strcmp(a, "--json")) {
            if (wl_rank == 0)
                fprintf(stderr, "%s: %s: the records are gpuport_bench's, not written by the "
                                "peer baselines\n", av[0], a);
            bad = 1;
            i += i + 1 < *argc;
        } else if (!strcmp(a, "--iters") && i + 1 < *argc) {
            o->iters = strtod(av[++i], &end);
            if (*end || !(o->iters > 0)) {
                if (wl_rank == 0)
                    fprintf(stderr, "%s: --iters needs a positive number, not '%s'\n", av[0],
                            av[i]);
                bad = 1;
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
    return -1;
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

int wl_rounds(const wl_opts_t *o, int base)
{
    double r = base * o->iters;

    return r < 1 ? 1 : (int)r;
}

int wl_finish(int ok)
{
    ok = wl_agree(ok);
    if (wl_rank == 0)
        printf("# %s\n", ok ? "all results verified" : "FAILED (see stderr)");
    MPI_Finalize();
    return ok ? 0 : 1;
}

int cuda_ok(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return 1;
    fprintf(stderr, "rank %d: %s failed: %s\n", wl_rank, call, cudaGetErrorString(e));
    return 0;
}

/* 1: this rank's GPU is another rank's of the same host too (by UUID). */
static int gpu_shared(MPI_Comm host, const cudaDeviceProp *prop)
{
    int n, shared = 0;
    char *all;

    MPI_Comm_size(host, &n);
    all = (char *)malloc((size_t)n * sizeof(prop->uuid));
    if (!all) {
        fprintf(stderr, "rank %d: out of memory\n", wl_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Allgather(&prop->uuid, (int)sizeof(prop->uuid), MPI_BYTE, all, (int)sizeof(prop->uuid),
                  MPI_BYTE, host);
    for (int r = 0; r < n; r++)
        shared += !memcmp(all + (size_t)r * sizeof(prop->uuid), &prop->uuid, sizeof(prop->uuid));
    free(all);
    return shared > 1;
}

int peer_gpu(int own, int *dev_p, char *name, size_t len)
{
    const char *one = getenv("GPUPORT_TEST_ONE_GPU");
    cudaDeviceProp prop;
    MPI_Comm host;
    int local_rank, n = 0, dev = 0, st = 1; /* 1 ready, -1 no GPU, -2 failed */
    cudaError_t e;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wl_rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &local_rank);
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("rank %d: SKIP: no usable GPU (cudaGetDeviceCount: %s, %d devices)\n", wl_rank,
               cudaGetErrorString(e), n);
        st = -1;
    } else {
        dev = one && strcmp(one, "1") == 0 ? 0 : local_rank % n;
        if (!cuda_ok(cudaSetDevice(dev), "cudaSetDevice") || !cuda_ok(cudaFree(0), "cudaFree(0)") ||
            !cuda_ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties"))
            st = -2;
    }
    if (!wl_agree(st == 1)) {
        MPI_Comm_free(&host);
        st = wl_agree(st != -2) ? 77 : 1; /* 77: no GPU somewhere, nothing failed */
        MPI_Finalize();
        return st;
    }
    if (own && !wl_agree(!gpu_shared(host, &prop))) {
        if (wl_rank == 0)
            printf("SKIP: NCCL needs one GPU per rank (two ranks of a host share GPU %d here)\n",
                   dev);
        MPI_Comm_free(&host);
        MPI_Finalize();
        return 77;
    }
    MPI_Comm_free(&host);
    snprintf(name, len, "%s", prop.name);
    *dev_p = dev;
    return -1;
}

void peer_header(const char *name, const char *what, const char *lib, const char *gpu)
{
    char host[256] = "?", date[64], *all;
    int hosts = 0, len = (int)sizeof(host);
    time_t now = time(NULL);

    gethostname(host, sizeof(host) - 1);
    all = wl_rank == 0 ? (char *)malloc((size_t)wl_size * sizeof(host)) : NULL;
    MPI_Gather(host, len, MPI_CHAR, all, len, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (wl_rank != 0 || !all) {
        free(all);
        return;
    }
    for (int r = 0; r < wl_size; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= !strcmp(all + (size_t)q * sizeof(host), all + (size_t)r * sizeof(host));
        hosts += !seen;
    }
    free(all);
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("# %s: %s\n", name, what);
    printf("# %d ranks on %d host name%s (rank 0 on %s, GPU %s), %s, %s\n", wl_size, hosts,
           hosts == 1 ? "" : "s", host, gpu, lib, date);
}
