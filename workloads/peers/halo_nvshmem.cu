/*
 * halo_nvshmem: workloads/halo_gpu.cu's 2D Jacobi with NVSHMEM driving the
 * halo exchange from the kernels, as the peer baseline of gpuport's port
 * and memory channels: the same grid, split, start values and bit-for-bit
 * checks (halo.h), the same kernels (peer_halo.h), its own table.
 *
 * Both buffers are one nvshmem_malloc block, sized for the largest slab
 * (a symmetric allocation is the same size on every PE; each rank uses its
 * own slab's layout in it), beside two signal words: [UP], [DOWN], each
 * set by that neighbour. One kernel per iteration, launched back to back:
 * kernel k sweeps buffer k % 2 into (k + 1) % 2 with every block; the last
 * block to finish sends this rank's new first and last rows into the
 * neighbours' halos of buffer (k + 1) % 2 with
 * nvshmemx_putmem_signal_nbi_block (the row, then the signal word set to
 * the step's number, ordered after the row), and its thread 0 waits with
 * nvshmem_signal_wait_until for both neighbours' words to reach that
 * number. Numbers grow across runs, so no word is ever reset; a neighbour
 * one step ahead has set the next number, which the wait (>=) accepts.
 * Why no source row is overwritten before it is read, and no halo before
 * it is swept: halo_gpu.cu's argument, with a signal word for a channel.
 *
 *   mpirun -np N halo_nvshmem [--nx N] [--ny N] [--iters-per-run N] [--bootstrap mpi|uid]
 */
#include "peer_nvshmem.h"
#include "peer_halo.h"

#include <stdint.h>

/* What every kernel gets, by value. */
typedef struct nv_grid {
    double *buf;       /* symmetric: both buffers */
    halo_geom_t geo;   /* this rank's part of the grid */
    unsigned *arrived; /* blocks done sweeping in the running kernel */
    uint64_t *sig;     /* symmetric: [UP], [DOWN], set by that neighbour */
    int peer[2];       /* the neighbours' PEs, -1 at the grid's edge */
    size_t src[2][2];  /* [side][parity]: halo_src */
    size_t dst[2][2];  /* [side][parity]: halo_dst, at the neighbour */
} nv_grid_t;

typedef struct nv_state {
    nv_grid_t g;
    uint64_t seq; /* the last step's number, the same on every rank */
} nv_state_t;

/* true in the block that finishes the sweep last (halo_gpu.cu's). */
__device__ static bool last_block(unsigned *arrived)
{
    __shared__ bool last;

    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(arrived, 1u) == gridDim.x - 1;
        if (last)
            *arrived = 0; /* for the next kernel, which starts after this one ends */
        __threadfence();
    }
    __syncthreads();
    return last;
}

/* Kernel k (see the file's comment); seq: this step's number. */
__global__ void iterate(nv_grid_t g, int k, int sweeps, uint64_t seq)
{
    int p = (k + 1) % 2;
    size_t bytes = (size_t)g.geo.nx * sizeof(double);

    if (sweeps)
        halo_sweep_rows(g.buf, g.geo, k);
    if (!last_block(g.arrived))
        return;
    /* exchange: begin */
    for (int d = UP; d <= DOWN; d++)
        if (g.peer[d] >= 0) /* into the neighbour's word for this side: its other one */
            nvshmemx_putmem_signal_nbi_block(g.buf + g.dst[d][p], g.buf + g.src[d][p], bytes,
                                             g.sig + (1 - d), seq, NVSHMEM_SIGNAL_SET, g.peer[d]);
    for (int d = UP; d <= DOWN && threadIdx.x == 0; d++)
        if (g.peer[d] >= 0)
            nvshmem_signal_wait_until(g.sig + d, NVSHMEM_CMP_GE, seq);
    /* exchange: end */
}

static int nv_step(halo_peer_t *hp, int k, int sweeps)
{
    nv_state_t *st = (nv_state_t *)hp->lib_state;

    iterate<<<sweeps ? hp->blocks : 1, HALO_THREADS, 0, hp->s>>>(st->g, k, sweeps, ++st->seq);
    return cuda_ok(cudaGetLastError(), "iterate<<<>>>");
}

int main(int argc, char **argv)
{
    wl_opts_t o;
    halo_peer_t hp = {};
    nv_state_t st = {};
    char gpu[256] = "", lib[96];
    const char *boot;
    size_t bytes;
    int rc = wl_init(&argc, &argv, HALO_USAGE PEER_NVSHMEM_USAGE, &o), nx, ny, iters, dev, good;

    if (rc >= 0)
        return rc;
    boot = peer_nvshmem_option(&argc, argv);
    if (!boot || !halo_options(argc, argv, &o, &nx, &ny, &iters)) {
        MPI_Finalize();
        return 2;
    }
    rc = peer_gpu(0, &dev, gpu, sizeof(gpu));
    if (rc >= 0)
        return rc;
    if (!peer_nvshmem_init(boot)) {
        nvshmem_finalize();
        return wl_finish(0);
    }
    hp.lib = "NVSHMEM";
    hp.geo = halo_geom(nx, ny);
    hp.blocks = (int)((hp.geo.rows * (size_t)nx + HALO_THREADS - 1) / HALO_THREADS);
    hp.blocks = hp.blocks < 1024 ? hp.blocks : 1024;
    hp.step = nv_step;
    hp.lib_state = &st;
    st.g.geo = hp.geo;
    /* setup: begin */
    /* the largest slab: rank 0's (the first ranks get the extra rows) */
    bytes = 2 * (size_t)(halo_rows_of(0, ny) + 2) * hp.geo.pitch * sizeof(double);
    st.g.buf = (double *)nvshmem_malloc(bytes);
    st.g.sig = (uint64_t *)nvshmem_calloc(2, sizeof(uint64_t));
    for (int d = UP; d <= DOWN; d++) {
        st.g.peer[d] = halo_peer_rank(d);
        for (int p = 0; p < 2 && st.g.peer[d] >= 0; p++) {
            st.g.src[d][p] = halo_src(&hp.geo, d, p);
            st.g.dst[d][p] = halo_dst(&hp.geo, d, p);
        }
    }
    good = st.g.buf && st.g.sig;
    if (!good)
        fprintf(stderr, "rank %d: nvshmem_malloc of %zu bytes failed (NVSHMEM_SYMMETRIC_SIZE?)\n",
                wl_rank, bytes);
    /* setup: end */
    hp.buf = st.g.buf;
    good = good && cuda_ok(cudaMalloc((void **)&st.g.arrived, sizeof(unsigned)), "cudaMalloc") &&
           cuda_ok(cudaMemset(st.g.arrived, 0, sizeof(unsigned)), "cudaMemset") &&
           cuda_ok(cudaStreamCreateWithFlags(&hp.s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (wl_agree(good)) {
        peer_nvshmem_name(boot, lib, sizeof(lib));
        peer_header("halo_nvshmem",
                    "2D Jacobi (5-point, double) on the GPU, kernels drive the halo exchange "
                    "with NVSHMEM put-with-signal",
                    lib, gpu);
        good = halo_peer_main(&hp, iters, gpu);
    }
    nvshmem_barrier_all(); /* no kernel of any PE still reads or writes the buffers */
    if (hp.s)
        cudaStreamDestroy(hp.s);
    cudaFree(st.g.arrived);
    nvshmem_free(st.g.sig);
    nvshmem_free(st.g.buf);
    nvshmem_finalize();
    return wl_finish(good);
}
