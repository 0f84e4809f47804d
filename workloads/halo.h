/*
 * The grid of the halo workloads (workloads/halo.c on the host,
 * workloads/halo_gpu.cu on the GPU) and everything about it that is not
 * the exchange: the split by rows, where each neighbour's row goes, the
 * start values, the CPU's Jacobi sweep, rank 0's reference, the bit-for-bit
 * checks, the options. Included by those two programs and the peer
 * libraries' versions (workloads/peers/), after wl.h.
 *
 * The grid is NY x NX interior points (doubles) inside a frame of fixed
 * boundary values. Rank r keeps a slab of its rows with one halo row above
 * and one below, (rows + 2) x (NX + 2) doubles, twice (two buffers, one
 * slab apart: iteration k reads buffer k % 2, its parity, and writes the
 * other). Rank r's halo row above is rank r - 1's last row; at the grid's
 * edges the halo rows are the frame.
 */
#ifndef GPUPORT_WL_HALO_H
#define GPUPORT_WL_HALO_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HALO_USAGE                                                                                 \
    "  --nx N        interior columns (default 4096; --small 256)\n"                               \
    "  --ny N        interior rows, at least one per rank (default 4096; --small 256)\n"           \
    "  --iters-per-run N  Jacobi iterations of each run (default 200, --small 50, x --iters)\n"

/* This rank's part of the grid. */
typedef struct halo_geom {
    int nx, ny;     /* the grid's interior points */
    int row0, rows; /* this rank's first interior row (0-based) and its count */
    size_t pitch;   /* doubles a row: nx + 2 */
    size_t slab;    /* doubles a buffer: (rows + 2) * pitch */
} halo_geom_t;

/* Rank r's rows: NY split as evenly as it goes, the first ranks one more. */
static inline int halo_rows_of(int r, int ny)
{
    return ny / wl_size + (r < ny % wl_size);
}

static inline int halo_row0_of(int r, int ny)
{
    return r * (ny / wl_size) + (r < ny % wl_size ? r : ny % wl_size);
}

static inline halo_geom_t halo_geom(int nx, int ny)
{
    halo_geom_t g;

    g.nx = nx;
    g.ny = ny;
    g.row0 = halo_row0_of(wl_rank, ny);
    g.rows = halo_rows_of(wl_rank, ny);
    g.pitch = (size_t)nx + 2;
    g.slab = (size_t)(g.rows + 2) * g.pitch;
    return g;
}

enum { UP, DOWN }; /* the neighbours: rank - 1 (the rows above), rank + 1 */

/* Neighbour d's rank, -1 at the grid's edge. */
static inline int halo_peer_rank(int d)
{
    int r = d == UP ? wl_rank - 1 : wl_rank + 1;
    return r >= 0 && r < wl_size ? r : -1;
}

/* Doubles from the start of the buffers, for parity p: this rank's row
 * that goes to neighbour d, this rank's halo row that d's row fills, and
 * the place of that row in neighbour d's buffers (its halo on this side). */
static inline size_t halo_src(const halo_geom_t *g, int d, int p)
{
    return p * g->slab + (size_t)(d == UP ? 1 : g->rows) * g->pitch + 1;
}

static inline size_t halo_own(const halo_geom_t *g, int d, int p)
{
    return p * g->slab + (size_t)(d == UP ? 0 : g->rows + 1) * g->pitch + 1;
}

static inline size_t halo_dst(const halo_geom_t *g, int d, int p)
{
    int rows = halo_rows_of(halo_peer_rank(d), g->ny);
    return p * (size_t)(rows + 2) * g->pitch + (size_t)(d == UP ? rows + 1 : 0) * g->pitch + 1;
}

/* The start at point (i, j) of the framed grid, 0 <= i <= NY + 1: a hash
 * in [0, 1), not a smooth field, so that a misplaced row shows. */
static inline double halo_initial(int i, int j)
{
    uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)j * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    return (double)(h >> 11) / 9007199254740992.0;
}

/* One Jacobi sweep of rows 1..rows on the CPU: the one expression of the
 * host ranks and of the reference, so that their results agree bit for bit
 * (a product of a sum: nothing to contract into a multiply-add; the GPU
 * computes the same operations in the same order). */
static inline void halo_sweep(double *out, const double *in, int rows, int nx, size_t pitch)
{
    for (int i = 1; i <= rows; i++) {
        const double *c = in + (size_t)i * pitch;
        double *o = out + (size_t)i * pitch;
        for (int j = 1; j <= nx; j++)
            o[j] = 0.25 * ((c[j - pitch] + c[j + pitch]) + (c[j - 1] + c[j + 1]));
    }
}

/* Both buffers (b, two slabs) at the start: the frame and this rank's rows
 * from halo_initial(); the neighbours' halo rows NaN until they arrive, so
 * that a halo that never arrives fails the check. */
static inline void halo_fill(const halo_geom_t *g, double *b)
{
    for (int p = 0; p < 2; p++)
        for (int i = 0; i <= g->rows + 1; i++) {
            int r = g->row0 + i, halo = (i == 0 && r > 0) || (i == g->rows + 1 && r <= g->ny);
            for (int j = 0; j <= g->nx + 1; j++)
                b[p * g->slab + i * g->pitch + j] = halo ? NAN : halo_initial(r, j);
        }
}

/* Rank 0: the whole framed grid after `iters` sweeps, alone (NULL: no memory). */
static inline double *halo_reference(int nx, int ny, int iters)
{
    size_t pitch = (size_t)nx + 2, n = (size_t)(ny + 2) * pitch;
    double *b[2] = {(double *)malloc(n * sizeof(double)), (double *)malloc(n * sizeof(double))};

    if (!b[0] || !b[1]) {
        free(b[0]);
        free(b[1]);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        b[0][i] = b[1][i] = halo_initial((int)(i / pitch), (int)(i % pitch));
    for (int k = 0; k < iters; k++)
        halo_sweep(b[(k + 1) % 2], b[k % 2], ny, nx, pitch);
    free(b[(iters + 1) % 2]);
    return b[iters % 2];
}

/* Gathers every rank's rows of buffer p (b: this rank's two slabs, in host
 * memory) to rank 0 and compares them with ref, rank 0's reference, bit for
 * bit. 1 on every rank when they are equal. */
static inline int halo_check_grid(const halo_geom_t *g, const double *b, int p, const double *ref,
                                  const char *who)
{
    size_t n = (size_t)g->ny * g->pitch, bad = 0, first = 0;
    double *all = NULL;
    int *counts = NULL, *displs = NULL;

    if (wl_rank == 0) {
        all = (double *)malloc(n * sizeof(double));
        counts = (int *)malloc(wl_size * sizeof(int));
        displs = (int *)malloc(wl_size * sizeof(int));
        if (!all || !counts || !displs) {
            fprintf(stderr, "rank 0: out of memory for the gathered grid\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int r = 0; r < wl_size; r++) {
            counts[r] = halo_rows_of(r, g->ny) * (int)g->pitch;
            displs[r] = halo_row0_of(r, g->ny) * (int)g->pitch;
        }
    }
    MPI_Gatherv(b + p * g->slab + g->pitch, g->rows * (int)g->pitch, MPI_DOUBLE, all, counts,
                displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (size_t i = 0; wl_rank == 0 && i < n; i++)
        if (memcmp(&all[i], &ref[g->pitch + i], sizeof(double)) != 0 && bad++ == 0)
            first = i;
    if (bad)
        fprintf(stderr,
                "rank 0: %s: %zu of %zu points differ from the reference, the first at "
                "interior row %zu, column %zu: %a, not %a\n",
                who, bad, n, first / g->pitch, first % g->pitch, all[first], ref[g->pitch + first]);
    free(all);
    free(counts);
    free(displs);
    return wl_agree(bad == 0);
}

/* After exchanges alone from the start: every halo row of both buffers is
 * the neighbour's row of the start, bit for bit. 1 on every rank. */
static inline int halo_check_halos(const halo_geom_t *g, const double *b, const char *who)
{
    size_t bad = 0;

    for (int p = 0; p < 2; p++)
        for (int i = 0; i <= g->rows + 1; i += g->rows + 1) {
            int r = g->row0 + i;
            for (int j = 1; r > 0 && r <= g->ny && j <= g->nx; j++) {
                double want = halo_initial(r, j);
                bad += memcmp(&b[p * g->slab + i * g->pitch + j], &want, sizeof(double)) != 0;
            }
        }
    if (bad)
        fprintf(stderr, "rank %d: %s: %zu halo points are not the neighbours' rows\n", wl_rank, who,
                bad);
    return wl_agree(bad == 0);
}

/* Rank 0 gets, per timed iteration, the slowest rank's time in us. */
static inline void halo_slowest(const double *t, int n, double *us)
{
    MPI_Reduce(t, us, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    for (int i = 0; wl_rank == 0 && i < n; i++)
        us[i] *= 1e6;
}

/* The programs' own options, after wl_init's: 0 after a message on a bad one. */
static inline int halo_options(int argc, char **argv, const wl_opts_t *o, int *nx, int *ny,
                               int *iters)
{
    *nx = *ny = o->small ? 256 : 4096;
    *iters = wl_rounds(o, o->small ? 50 : 200);
    for (int i = 1; i < argc; i++) {
        int *v = NULL;
        char *end = NULL;
        long x;
        if (!strcmp(argv[i], "--nx"))
            v = nx;
        else if (!strcmp(argv[i], "--ny"))
            v = ny;
        else if (!strcmp(argv[i], "--iters-per-run"))
            v = iters;
        x = v && i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
        if (!v || !end || *end || x < 1 || x > INT_MAX / 2) {
            if (wl_rank == 0)
                fprintf(stderr, "%s: bad option '%s%s%s' (--help lists them)\n", argv[0], argv[i],
                        v ? " " : "", v && i + 1 < argc ? argv[i + 1] : "");
            return 0;
        }
        *v = (int)x;
        i++;
    }
    if (*ny < wl_size || (size_t)*ny * (*nx + 2) > INT_MAX) {
        if (wl_rank == 0)
            fprintf(stderr,
                    "%s: a %d x %d grid: at least one row per rank (%d), at most %d "
                    "points\n",
                    argv[0], *ny, *nx, wl_size, INT_MAX);
        return 0;
    }
    return 1;
}

#endif
