/*
 * halo: the halo exchange of a 2D Jacobi stencil over gpuport port
 * channels, beside the same computation with MPI_Sendrecv in the same run,
 * both verified bit for bit against rank 0's Jacobi on the whole grid.
 *
 * The grid (halo.h): NY x NX interior points inside a fixed frame, split
 * by rows; each rank keeps its slab with a halo row above and below, in
 * two buffers: iteration k reads buffer k % 2 and writes the other.
 *
 * One iteration with gpuport: each rank puts its first interior row into
 * the halo row below the slab of rank - 1 and its last one into the halo
 * row above the slab of rank + 1, in buffer k % 2 (put_with_signal on a
 * port channel to each neighbour; the destination region is the
 * neighbour's whole grid, one gpuport_mem_alloc block, and the offset is
 * its halo row's), waits for one signal from each neighbour (their rows
 * are then in its halos), and computes buffer (k + 1) % 2.
 *
 * Who may overwrite what:
 * - A halo row has one writer, the neighbour. Its put of iteration k lands
 *   in the halo of parity k % 2, which this rank last read in iteration
 *   k - 2; the neighbour puts only after taking this rank's signal of
 *   iteration k - 1, sent after this rank had finished iteration k - 2. With
 *   one halo per side, the put of iteration k + 1 could land while this rank
 *   still computes iteration k from it.
 * - This rank reads its halos of iteration k only after the neighbour's
 *   signal of iteration k: the put before that signal has landed.
 * - A put's source, this rank's boundary row in buffer k % 2, is overwritten
 *   by the sweep of iteration k + 1, which first flushes the channels (only
 *   a flush says a source may be reused). The put landed long before, so
 *   the flush returns at once.
 *
 * The MPI baseline runs the same iterations with two MPI_Sendrecv of the
 * boundary rows (MPI_PROC_NULL at the grid's edges) on its own copy of the
 * grid. Both are timed per iteration (the slowest rank's time, median over
 * the iterations after the warm-up), then again without the sweep: the
 * exchange alone. Verification: the slabs after the run, gathered to rank
 * 0, equal rank 0's Jacobi on the whole grid bit for bit, every point being
 * the same three additions and one multiplication in the same order
 * (halo_sweep); after the exchange alone, every halo row equals the
 * neighbour's row of the start, bit for bit.
 *
 *   mpirun -np N workloads/halo [--nx N] [--ny N] [--iters-per-run N] [common options]
 */
#include "wl.h"

#include "bench_out.h"
#include "halo.h"

/* The port channel to one neighbour and the offsets of its two puts. */
typedef struct side {
    gpuport_channel_t ch;            /* NULL at the grid's edge */
    uint64_t src_off[2], dst_off[2]; /* per parity: this rank's row, the peer's halo */
} side_t;

/* Both neighbours: [UP], [DOWN], and the channels that exist (none at the
 * grid's edge), for gpuport_channel_wait_all and _flush_all. */
typedef struct links {
    side_t sd[2];
    gpuport_channel_t ch[2];
    int n;
} links_t;

/* Channels to both neighbours over one registered grid, pairwise in rank
 * order (each rank meets rank - 1 first), and the offsets of their puts:
 * this rank's first row into the halo below rank - 1's slab, its last row
 * into the halo above rank + 1's. Both are tried whatever the first gave,
 * so that no neighbour waits for a creation this rank skips. */
static int connect(gpuport_comm_t comm, gpuport_mem_t grid, const halo_geom_t *g, links_t *ln)
{
    side_t *sd = ln->sd;
    int good = 1;

    /* setup: begin */
    for (int d = UP; d <= DOWN; d++) {
        int peer = halo_peer_rank(d);
        if (peer < 0)
            continue;
        for (int p = 0; p < 2; p++) {
            sd[d].src_off[p] = halo_src(g, d, p) * sizeof(double);
            sd[d].dst_off[p] = halo_dst(g, d, p) * sizeof(double);
        }
        good &= wl_ok(gpuport_channel_create(comm, peer, grid, grid, &sd[d].ch),
                      "gpuport_channel_create");
        if (sd[d].ch)
            ln->ch[ln->n++] = sd[d].ch;
    }
    /* setup: end */
    return good;
}

/* Iteration k's exchange over gpuport: flush the puts of k - 1 (the sweep
 * after this overwrites their source rows), put this rank's boundary rows
 * of parity k % 2 into the neighbours' halos with a signal, take one signal
 * from each neighbour. */
static int gp_exchange(const links_t *ln, int parity, uint64_t bytes)
{
    const side_t *sd = ln->sd;

    /* exchange: begin */
    if (!wl_ok(gpuport_channel_flush_all(ln->ch, ln->n), "gpuport_channel_flush_all"))
        return 0;
    for (int d = UP; d <= DOWN; d++)
        if (sd[d].ch && !wl_ok(gpuport_channel_put_with_signal(sd[d].ch, sd[d].dst_off[parity],
                                                               sd[d].src_off[parity], bytes),
                               "gpuport_channel_put_with_signal"))
            return 0;
    return wl_ok(gpuport_channel_wait_all(ln->ch, ln->n), "gpuport_channel_wait_all");
    /* exchange: end */
}

/* The same exchange with MPI: the interior part of each boundary row. */
static void mpi_exchange(const halo_geom_t *g, double *buf, int parity)
{
    double *b = buf + parity * g->slab;
    /* mpi exchange: begin */
    int up = wl_rank > 0 ? wl_rank - 1 : MPI_PROC_NULL;
    int down = wl_rank < wl_size - 1 ? wl_rank + 1 : MPI_PROC_NULL;

    MPI_Sendrecv(b + g->pitch + 1, g->nx, MPI_DOUBLE, up, 1, b + (g->rows + 1) * g->pitch + 1,
                 g->nx, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(b + g->rows * g->pitch + 1, g->nx, MPI_DOUBLE, down, 2, b + 1, g->nx, MPI_DOUBLE,
                 up, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* mpi exchange: end */
}

/* `iters` iterations from the start (!sweeps: the exchange alone) on buf by
 * gpuport (ln) or MPI (ln NULL); t[k]: iteration k's seconds. 0 after a
 * failed call (the neighbours' waits then end with the timeout). */
static int run(const halo_geom_t *g, double *buf, const links_t *ln, int iters, int sweeps,
               double *t)
{
    uint64_t bytes = (uint64_t)g->nx * sizeof(double);

    halo_fill(g, buf);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < iters; k++) {
        double t0 = wl_now();
        if (!ln)
            mpi_exchange(g, buf, k % 2);
        else if (!gp_exchange(ln, k % 2, bytes))
            return 0;
        if (sweeps)
            halo_sweep(buf + ((k + 1) % 2) * g->slab, buf + (k % 2) * g->slab, g->rows, g->nx,
                       g->pitch);
        t[k] = wl_now() - t0;
    }
    return !ln || wl_ok(gpuport_channel_flush_all(ln->ch, ln->n), "gpuport_channel_flush_all");
}

/* Rank 0: one table row and its record; us[0] gpuport's, us[1] MPI's. */
static void report(const char *step, const char *measurement, int nx, double *us[2], int n, int mpi,
                   int verified)
{
    uint64_t bytes = (uint64_t)nx * sizeof(double);
    char m[32] = "-", ratio[32] = "-";
    bench_stats_t g, b;

    bench_stats_of(us[0], (uint64_t)n, &g);
    bench_stats_of(us[1], mpi ? (uint64_t)n : 0, &b);
    if (mpi) {
        snprintf(m, sizeof(m), "%.2f", b.median);
        snprintf(ratio, sizeof(ratio), "%.2f", g.median / b.median);
    }
    printf("%-14s | %8llu B | %10.2f | %10s | %6s | %8s | %5d\n", step, (unsigned long long)bytes,
           g.median, m, ratio, verified ? "yes" : "NO", n);
    bench_out_latency(measurement, bytes, &g, mpi ? "MPI_Sendrecv of the boundary rows" : NULL, &b,
                      verified);
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    gpuport_comm_t comm;
    gpuport_mem_t mem = NULL;
    links_t ln = {0};
    halo_geom_t g;
    double *buf[2] = {NULL, NULL}; /* gpuport's grid, MPI's: two slabs each */
    double *ref = NULL, *t = NULL, *us[2][2] = {{NULL}};
    int rc = wl_init(&argc, &argv, HALO_USAGE, &o), nx, ny, iters, warm, timed, good = 0;
    int verified[2] = {1, 1}; /* the iterations', the exchange's */
    size_t bytes;

    if (rc >= 0)
        return rc;
    if (!halo_options(argc, argv, &o, &nx, &ny, &iters)) {
        MPI_Finalize();
        return 2;
    }
    warm = iters >= 10 ? iters / 10 : iters > 1;
    timed = iters - warm;
    comm = wl_comm();
    g = halo_geom(nx, ny);
    bytes = 2 * g.slab * sizeof(double);
    buf[1] = malloc(bytes); /* MPI's: ordinary memory */
    t = malloc(iters * sizeof(double));
    for (int i = 0; i < 4; i++)
        us[i / 2][i % 2] = malloc(iters * sizeof(double));
    if (!buf[1] || !t || !us[0][0] || !us[0][1] || !us[1][0] || !us[1][1])
        fprintf(stderr, "rank %d: out of memory for a %d x %d slab\n", wl_rank, g.rows, nx);
    /* gpuport's: memory that same-host neighbours map and put into */
    else if (wl_ok(gpuport_mem_alloc(comm, bytes, (void **)&buf[0]), "gpuport_mem_alloc"))
        wl_ok(gpuport_mem_register(comm, buf[0], bytes, &mem), "gpuport_mem_register");
    /* every rank or none goes on to the pairwise calls */
    if (!wl_agree(mem != NULL) || !wl_agree(connect(comm, mem, &g, &ln)))
        goto out;
    wl_header("halo", "2D Jacobi (5-point, double), halo rows by port-channel put_with_signal",
              wl_size > 1 ? gpuport_channel_transport(ln.sd[wl_rank ? UP : DOWN].ch) : "none");
    if (wl_rank == 0 && !(ref = halo_reference(nx, ny, iters))) {
        fprintf(stderr, "rank 0: out of memory for the %d x %d reference\n", ny, nx);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* gpuport, then MPI: the iterations, then the exchange alone */
    for (int m = 0; m < 2 - o.no_mpi; m++) {
        const char *who = m ? "MPI" : "gpuport";
        for (int sweeps = 1; sweeps >= 0; sweeps--) {
            if (!wl_agree(run(&g, buf[m], m ? NULL : &ln, iters, sweeps, t)))
                goto out;
            halo_slowest(t + warm, timed, us[!sweeps][m]);
            verified[!sweeps] &= sweeps ? halo_check_grid(&g, buf[m], iters % 2, ref, who)
                                        : halo_check_halos(&g, buf[m], who);
        }
    }
    if (wl_rank == 0) {
        printf("# %d x %d interior points, slabs of %d to %d rows, %d iterations (%d warm-up) "
               "per run\n",
               ny, nx, halo_rows_of(wl_size - 1, ny), halo_rows_of(0, ny), iters, warm);
        printf("# us per iteration: the slowest rank's, median of the timed iterations; MPI: "
               "MPI_Sendrecv of the\n# boundary rows, same grid, same run; ratio gpuport / MPI "
               "(below 1: gpuport faster)\n");
        printf("# verified: iteration: gpuport's and MPI's grids equal rank 0's Jacobi bit for "
               "bit; exchange:\n# every halo equals the neighbour's row\n\n");
        printf("%-14s | %10s | %10s | %10s | %6s | %8s | %5s\n", "step", "halo row", "gpuport us",
               "MPI us", "ratio", "verified", "timed");
        report("iteration", "halo_iteration", nx, us[0], timed, !o.no_mpi, verified[0]);
        report("exchange alone", "halo_exchange", nx, us[1], timed, !o.no_mpi, verified[1]);
    }
    good = verified[0] && verified[1];

out:
    /* nobody destroys a channel a neighbour still waits on */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int d = UP; d <= DOWN; d++)
        if (ln.sd[d].ch && !wl_ok(gpuport_channel_destroy(ln.sd[d].ch), "gpuport_channel_destroy"))
            good = 0;
    if (mem && !wl_ok(gpuport_mem_deregister(mem), "gpuport_mem_deregister"))
        good = 0;
    if (buf[0] && !wl_ok(gpuport_mem_free(comm, buf[0]), "gpuport_mem_free"))
        good = 0;
    if (!wl_ok(gpuport_comm_destroy(comm), "gpuport_comm_destroy"))
        good = 0;
    free(buf[1]);
    free(ref);
    free(t);
    for (int i = 0; i < 4; i++)
        free(us[i / 2][i % 2]);
    return wl_finish(good);
}
