/*
 * alltoall_gpu: workloads/alltoall.c's all-to-all of an expert-parallel
 * MoE layer (the case, layout and checks in alltoall_moe.h), driven by CUDA
 * kernels through gpuport, beside MPI_Alltoallv staged through the host.
 *
 * Each rank's region is GPU memory from gpuport_mem_alloc_device (VMM:
 * memory channels map it, every transport carries it), every channel's
 * source and destination. Four ways to move the rows:
 * - peer channels to every other rank (gpuport_peer_channel_create_all;
 *   the way to write it, as NVSHMEM's alltoall_nvshmem.cu does): block
 *   (b, p) takes the b-th share of this rank's messages (rows) for rank p
 *   and sends it into this rank's slot there with
 *   gpuport_peer_put_with_signal_block (the block's stores up to
 *   GPUPORT_PEER_STORE_MAX bytes a thread where the peer's memory is
 *   mapped, the copy engine above and elsewhere; an empty share is its
 *   signal alone), block (0, p) the count word first
 *   (gpuport_peer_put_value_block); then block (0, p) waits with
 *   gpuport_peer_wait_until_block until rank p's B blocks have signalled
 *   (the channels count signals since their creation: B a phase);
 * - memory channels to the ranks of this host: the warps store messages
 *   (rows) straight into the peer's slot with gpuport_memory_put, one per
 *   warp; each block then signals once (__syncthreads, then
 *   gpuport_memory_signal) and takes one of the peer's blocks' signals;
 *   ranks of other hosts as below;
 * - port channels to every other rank: a thread per rank queues the put and
 *   put_value_with_signal (combine: put_with_signal), waits for the rank's
 *   signal and flushes; the proxy moves the bytes (cuda_ipc, tcp or ib);
 * - MPI: the sent slots copied to pinned host memory, MPI_Alltoall of the
 *   counts, MPI_Alltoallv, the received slots and count words copied back.
 * A rank's rows to itself are copied by the kernel in every gpuport way.
 *
 * A round of a way: dispatch (timed), the expert kernels (count words and
 * headers read on the device), combine (timed), the weighted sum. The host
 * launches and synchronizes; outside the timed windows it copies results
 * back and checks them as alltoall.c does. A phase's time runs from an
 * MPI_Barrier to its end seen by cudaDeviceSynchronize (launch included);
 * a round's figure is its slowest rank's; the table shows medians.
 *
 * Ranks use GPU local rank % GPUs: on one GPU their kernels run at once
 * only under MPS (scripts/with-mps.sh). An exchange kernel's blocks (ranks
 * x --blocks, 256 threads each) must be resident at once. Without a usable
 * GPU every rank exits 77.
 *
 *   mpirun -np 2 workloads/alltoall_gpu [--blocks B] [alltoall's options]
 */
#define OMPI_SKIP_MPICXX 1 /* MPI's C API only, in C++ too */
#define MPICH_SKIP_MPICXX 1
#include <cuda_runtime.h>
#include <mpi.h>

#include "gpuport/gpuport_device.h"
#include "gpuport/gpuport_mpi.h"

extern "C" {
#include "wl.h" /* a C library, and wl.h says so only to C */
}
#include "wl_gpu.h"
#include "alltoall_moe.h"
#include "bench_out.h"

#define WARMUP 2
#define THREADS 256
#define WARPS (THREADS / 32)

enum { VIA_SELF, VIA_MEMORY, VIA_PORT };
enum { WAY_MEMORY, WAY_PORT, WAY_PEER, WAY_MPI, WAYS }; /* the gpuport ways first */
static const char *const way_name[WAYS] = {"memory channels", "port channels", "peer channels",
                                           "MPI staged"};

/* How a kernel reaches one rank in one way. */
typedef struct peer_dev {
    int via;
    gpuport_memory_channel_dev_t mc;
    gpuport_port_channel_dev_t pc;
} peer_dev_t;

/* What the kernels of a round get, by value: the sizes (m, without the
 * routing's host pointers) and device addresses. */
typedef struct kargs {
    moe_t m;
    moe_areas_t a;
    int B;                   /* blocks per rank of the exchange kernels */
    uint64_t seq;            /* the exchange's number, in the count words */
    uint64_t psig;           /* signals each peer channel received before this phase */
    const peer_dev_t *peers; /* [ranks] for this way */
    const gpuport_peer_channel_dev_t *pe; /* [ranks]: the peer channels' way, else NULL */
    unsigned char *base;     /* this rank's region */
    int *nsend;              /* [ranks] messages to each rank */
    int *nrecv;              /* [ranks] read from the count words */
    int *cback;              /* [ranks] rows the expert step returns to each rank */
    int *rc;                 /* [ranks] the first error with each rank */
    int *first;              /* [ranks][T] each message's first row in its combine slot */
    int *weight;             /* [T][K] this rank's a_k */
    size_t *pos;             /* [T][K] moe_returns' */
    float *out;              /* [T][H] */
} kargs_t;

__device__ static void fail(int *rc, int st)
{
    if (st)
        atomicCAS(rc, 0, st);
}

/* One exchange, block (b, p): the n units of `unit` bytes at src_off go to
 * rank p's dst_off, then its signal (dispatch, `counted`: with this rank's
 * count word there, ahead of the signal), then one of its signals is
 * taken (peer channels: the block's share of the units, and block (0, p)
 * takes all B of the phase). Units are whole 16-byte words (H % 4 == 0).
 * Whether the word goes is a flag of its own: rank 0's word sits at offset
 * 0 of the region, so its offset cannot double as "no word". */
__device__ static void exchange(const kargs_t &k, size_t dst_off, size_t src_off, uint64_t n,
                                size_t unit, bool counted)
{
    const int p = blockIdx.y, b = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const peer_dev_t *pd = &k.peers[p];
    const size_t count_off = k.a.count + 8 * (size_t)k.m.me;
    const uint64_t count = k.seq << 32 | n;
    int st = GPUPORT_OK;

    if (pd->via == VIA_SELF) {
        uint4 *dst = (uint4 *)(k.base + dst_off);
        const uint4 *src = (const uint4 *)(k.base + src_off);
        for (size_t i = (size_t)b * THREADS + threadIdx.x; i < n * unit / 16;
             i += (size_t)k.B * THREADS)
            dst[i] = src[i];
        if (counted && b == 0 && threadIdx.x == 0)
            *(volatile uint64_t *)(k.base + count_off) = count;
    } else if (k.pe) {
        const uint64_t first = n * b / k.B, last = n * (b + 1) / k.B;
        /* exchange: begin */
        if (counted && b == 0) /* the word ahead of this block's signal */
            st = gpuport_peer_put_value_block(&k.pe[p], count_off, count);
        st = st ? st : gpuport_peer_put_with_signal_block(&k.pe[p], dst_off + first * unit,
                                                          src_off + first * unit,
                                                          (last - first) * unit);
        if (b == 0) /* every block of rank p has landed here */
            st = st ? st : gpuport_peer_wait_until_block(&k.pe[p], k.psig + k.B);
        /* exchange: end */
        fail(&k.rc[p], st);
    } else if (pd->via == VIA_MEMORY) {
        for (uint64_t i = (uint64_t)b * WARPS + warp; i < n; i += (uint64_t)k.B * WARPS)
            fail(&k.rc[p], gpuport_memory_put(&pd->mc, dst_off + i * unit, src_off + i * unit, unit,
                                              lane, 32));
        __syncthreads(); /* the block's stores, then one release: its signal */
        if (threadIdx.x == 0) { /* the word by the thread that signals: its release covers it */
            if (counted && b == 0)
                st = gpuport_memory_put_value(&pd->mc, count_off, count);
            st = st ? st : gpuport_memory_signal(&pd->mc);
            fail(&k.rc[p], st ? st : gpuport_memory_wait(&pd->mc));
        }
    } else if (b == 0 && threadIdx.x == 0) {
        if (counted && n) /* the channel's FIFO order: the rows, then the word and the signal */
            st = gpuport_put(&pd->pc, dst_off, src_off, n * unit);
        if (counted)
            st = st ? st : gpuport_put_value_with_signal(&pd->pc, count_off, count);
        else
            st = n ? gpuport_put_with_signal(&pd->pc, dst_off, src_off, n * unit)
                   : gpuport_signal(&pd->pc);
        st = st ? st : gpuport_wait(&pd->pc);
        fail(&k.rc[p], st ? st : gpuport_flush(&pd->pc));
    }
}

/* Dispatch, grid (B, ranks): this rank's messages for rank p into its
 * slot there, the count with the signal. */
__global__ void dispatch(kargs_t k)
{
    int p = blockIdx.y;

    exchange(k, k.a.drecv + k.m.me * k.a.dslot, k.a.dsend + p * k.a.dslot, (uint64_t)k.nsend[p],
             k.m.msg, true);
}

/* Combine, grid (B, ranks): the rows rank p's tokens get back from this
 * rank's experts, into its slot there, with the signal. */
__global__ void combine(kargs_t k)
{
    int p = blockIdx.y;

    exchange(k, k.a.crecv + k.m.me * k.a.cslot, k.a.csend + p * k.a.cslot, (uint64_t)k.cback[p],
             k.m.row, false);
}

/* The expert step, first part, a thread per source rank s: the count from
 * its word (the host checks the word), each message's first row in s's
 * combine slot, and the rows in all. */
__global__ void expert_rows(kargs_t k)
{
    int s = blockIdx.x * blockDim.x + threadIdx.x, rows = 0, n;
    const unsigned char *in = k.base + k.a.drecv + s * k.a.dslot;

    if (s >= k.m.ranks)
        return;
    n = (int)min((uint64_t)k.m.T, *(volatile uint64_t *)(k.base + k.a.count + 8 * s) & 0xffffffffu);
    for (int i = 0; i < n; i++) {
        k.first[(size_t)s * k.m.T + i] = rows;
        rows = min(rows + __popcll(((const moe_hdr_t *)(in + i * k.m.msg))->mask), k.m.T * k.m.L);
    }
    k.nrecv[s] = n;
    k.cback[s] = rows;
}

/* The expert step, grid (B, ranks): a warp per message from rank s, its
 * row times (e + 1) for each local expert e its header names. */
__global__ void expert_apply(kargs_t k)
{
    const int s = blockIdx.y, lane = threadIdx.x % 32, H4 = k.m.H / 4;
    const unsigned char *in = k.base + k.a.drecv + s * k.a.dslot;
    float4 *out = (float4 *)(k.base + k.a.csend + s * k.a.cslot);

    for (int i = blockIdx.x * WARPS + threadIdx.x / 32; i < k.nrecv[s]; i += k.B * WARPS) {
        const moe_hdr_t *h = (const moe_hdr_t *)(in + i * k.m.msg);
        const float4 *x = (const float4 *)(h + 1);
        int r = k.first[(size_t)s * k.m.T + i];
        for (int j = 0; j < k.m.epr && r < k.m.T * k.m.L; j++) {
            float e1 = (float)(k.m.me * k.m.epr + j + 1);
            if (!(h->mask >> j & 1))
                continue;
            for (int q = lane; q < H4; q += 32)
                out[(size_t)r * H4 + q] =
                    make_float4(x[q].x * e1, x[q].y * e1, x[q].z * e1, x[q].w * e1);
            r++;
        }
    }
}

/* Block t: token t's returned rows summed with its routing weights. */
__global__ void weighted_sum(kargs_t k)
{
    const float *in = (const float *)(k.base + k.a.crecv);
    const int t = blockIdx.x, K = k.m.K;

    for (int h = threadIdx.x; h < k.m.H; h += blockDim.x) {
        float sum = 0;
        for (int j = 0; j < K; j++)
            sum += (float)k.weight[t * K + j] / 64.0f * in[k.pos[t * K + j] * k.m.H + h];
        k.out[(size_t)t * k.m.H + h] = sum;
    }
}

/* Everything a rank keeps. Host arrays of `ranks` ints: nsend .. local. */
typedef struct run {
    moe_t m;
    kargs_t k;
    gpuport_comm_t comm;
    gpuport_mem_t mem;
    gpuport_channel_t *pc;        /* port channels (none to itself) */
    gpuport_memory_channel_t *mc; /* memory channels to this host's ranks */
    gpuport_peer_channel_t *pe;   /* peer channels (none to itself) */
    peer_dev_t *peers;            /* device: [3][ranks], per gpuport way */
    gpuport_peer_channel_dev_t *pe_dev; /* device: [ranks], gpuport_peer_channel_device_all */
    int *nsend, *nrecv, *cback, *rc, *crows, *expect_n, *ddsp, *cdsp, *local;
    uint64_t *words;                  /* count words, read back */
    unsigned char *expect, *got;      /* messages expected, received */
    unsigned char *stage_s, *stage_r; /* pinned host memory for MPI */
    float *ref, *out;                 /* out: pinned */
    MPI_Datatype msg_type, row_type;
} run_t;

/* A timed phase of a gpuport way: its kernel, from after a barrier to its
 * end. */
static int gp_phase(run_t *r, int way, int comb, double *t)
{
    dim3 grid(r->k.B, r->m.ranks);
    double t0;
    int good;

    r->k.peers = r->peers + way * r->m.ranks;
    r->k.pe = way == WAY_PEER ? r->pe_dev : NULL;
    if (!wl_cuda_ok(cudaMemset(r->k.rc, 0, r->m.ranks * sizeof(int)), "cudaMemset(rc)") ||
        !wl_cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"))
        return 0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = wl_now();
    if (comb)
        combine<<<grid, THREADS>>>(r->k);
    else
        dispatch<<<grid, THREADS>>>(r->k);
    if (way == WAY_PEER)
        r->k.psig += (uint64_t)r->k.B; /* a signal from each of the peer's blocks */
    good = wl_cuda_ok(cudaGetLastError(), comb ? "combine<<<>>>" : "dispatch<<<>>>") &&
           wl_cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    *t = wl_now() - t0;
    good = good &&
           wl_cuda_ok(cudaMemcpy(r->rc, r->k.rc, r->m.ranks * sizeof(int), cudaMemcpyDeviceToHost),
                   "cudaMemcpy(rc)");
    for (int p = 0; good && p < r->m.ranks; p++)
        if (r->rc[p]) { /* the first error with rank p */
            fprintf(stderr, "rank %d: %s over %s with rank %d failed: %s (%d)\n", wl_rank,
                    comb ? "combine" : "dispatch", way_name[way], p,
                    gpuport_status_string((gpuport_status_t)r->rc[p]), r->rc[p]);
            good = 0;
        }
    return good;
}

/* Slot p of `area` (n[p] units): to the send staging buffer (d2h) or from
 * the receive one. */
static int stage(run_t *r, size_t area, size_t slot, const int *n, size_t unit, int d2h)
{
    int good = 1;

    for (int p = 0; good && p < r->m.ranks; p++) {
        unsigned char *dev = r->k.base + area + p * slot;
        if (n[p])
            good = wl_cuda_ok(
                d2h ? cudaMemcpy(r->stage_s + p * slot, dev, n[p] * unit, cudaMemcpyDeviceToHost)
                    : cudaMemcpy(dev, r->stage_r + p * slot, n[p] * unit, cudaMemcpyHostToDevice),
                "cudaMemcpy(staging)");
    }
    return good;
}

/* A timed phase with MPI, staged through pinned host memory; dispatch also
 * writes the count words, as the gpuport ways' senders do, and combine
 * first reads the expert step's row counts. */
static int mpi_phase(run_t *r, int comb, double *t)
{
    const moe_areas_t *a = &r->k.a;
    double t0;
    int good;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = wl_now();
    if (!comb) {
        good = stage(r, a->dsend, a->dslot, r->nsend, r->m.msg, 1) &&
               MPI_Alltoall(r->nsend, 1, MPI_INT, r->nrecv, 1, MPI_INT, MPI_COMM_WORLD) ==
                   MPI_SUCCESS &&
               MPI_Alltoallv(r->stage_s, r->nsend, r->ddsp, r->msg_type, r->stage_r, r->nrecv,
                             r->ddsp, r->msg_type, MPI_COMM_WORLD) == MPI_SUCCESS &&
               stage(r, a->drecv, a->dslot, r->nrecv, r->m.msg, 0);
        for (int p = 0; p < r->m.ranks; p++)
            r->words[p] = r->k.seq << 32 | (uint64_t)r->nrecv[p];
        good = good && wl_cuda_ok(cudaMemcpy(r->k.base + a->count, r->words, 8 * r->m.ranks,
                                          cudaMemcpyHostToDevice),
                               "cudaMemcpy(counts)");
    } else {
        good = wl_cuda_ok(cudaMemcpy(r->cback, r->k.cback, r->m.ranks * sizeof(int),
                                  cudaMemcpyDeviceToHost),
                       "cudaMemcpy(cback)") &&
               stage(r, a->csend, a->cslot, r->cback, r->m.row, 1) &&
               MPI_Alltoallv(r->stage_s, r->cback, r->cdsp, r->row_type, r->stage_r, r->crows,
                             r->cdsp, r->row_type, MPI_COMM_WORLD) == MPI_SUCCESS &&
               stage(r, a->crecv, a->cslot, r->crows, r->m.row, 0);
    }
    *t = wl_now() - t0;
    return good;
}

/* NaN in the places a phase must fill: a place it misses fails the check. */
static int poison(run_t *r, size_t area, size_t slot, const int *n, size_t unit)
{
    int good = 1;

    for (int p = 0; good && p < r->m.ranks; p++)
        good = wl_cuda_ok(cudaMemset(r->k.base + area + p * slot, 0xff, n[p] * unit), "cudaMemset");
    return good && wl_cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

/* The count words (with this exchange's number) and every message byte. */
static int check_dispatch(run_t *r, const char *way)
{
    const moe_t *m = &r->m;

    if (!wl_cuda_ok(
            cudaMemcpy(r->words, r->k.base + r->k.a.count, 8 * m->ranks, cudaMemcpyDeviceToHost),
            "cudaMemcpy(counts)") ||
        !wl_cuda_ok(cudaMemcpy(r->got, r->k.base + r->k.a.drecv, m->ranks * r->k.a.dslot,
                            cudaMemcpyDeviceToHost),
                 "cudaMemcpy(received)"))
        return 0;
    for (int p = 0; p < m->ranks; p++) {
        if (r->words[p] >> 32 != r->k.seq) {
            fprintf(stderr, "rank %d: %s: count word from rank %d is %#llx in exchange %llu\n",
                    m->me, way, p, (unsigned long long)r->words[p], (unsigned long long)r->k.seq);
            return 0;
        }
        r->nrecv[p] = (int)(r->words[p] & 0xffffffffu);
    }
    return moe_check_messages(m, way, r->got, r->nrecv, r->expect, r->expect_n, r->k.a.dslot);
}

/* One round of one way, the same collective calls on every rank whatever
 * fails: dispatch, its check, the expert step, combine, the weighted sum,
 * its check. Returns 0 once an exchange failed anywhere. */
static int round_of(run_t *r, int way, uint64_t seq, double *t, int *v)
{
    const moe_areas_t *a = &r->k.a;
    int good;

    r->k.seq = seq;
    good = wl_cuda_ok(cudaMemset(r->k.base + a->count, 0, 8 * r->m.ranks), "cudaMemset") &&
           poison(r, a->drecv, a->dslot, r->expect_n, r->m.msg);
    good = good && (way == WAY_MPI ? mpi_phase(r, 0, &t[0]) : gp_phase(r, way, 0, &t[0]));
    if (!wl_agree(good))
        return 0;
    v[0] &= check_dispatch(r, way_name[way]);
    expert_rows<<<(r->m.ranks + 127) / 128, 128>>>(r->k);
    expert_apply<<<dim3(r->k.B, r->m.ranks), THREADS>>>(r->k);
    good = wl_cuda_ok(cudaGetLastError(), "expert<<<>>>") &&
           poison(r, a->crecv, a->cslot, r->crows, r->m.row);
    good = good && (way == WAY_MPI ? mpi_phase(r, 1, &t[1]) : gp_phase(r, way, 1, &t[1]));
    if (!wl_agree(good))
        return 0;
    weighted_sum<<<r->m.T, THREADS>>>(r->k);
    good = wl_cuda_ok(cudaGetLastError(), "weighted_sum<<<>>>") &&
           wl_cuda_ok(cudaMemcpy(r->out, r->k.out, r->m.T * r->m.row, cudaMemcpyDeviceToHost),
                   "cudaMemcpy(out)");
    v[1] &= good && moe_check_output(&r->m, way_name[way], r->m.me, r->out, r->ref);
    return wl_agree(good);
}

/* The rounds: each way in turn, each verified; warm-up rounds untimed.
 * t[(2 * way + phase) * rounds + round]. */
static int run_rounds(run_t *r, int rounds, int ways, double *t, int *v)
{
    for (int i = 0; i < WARMUP + rounds; i++)
        for (int w = 0; w < ways; w++) {
            double tt[2];
            if (!round_of(r, w, (uint64_t)i * WAYS + w + 1, tt, v))
                return 0;
            for (int ph = 0; ph < 2 && i >= WARMUP; ph++)
                t[(2 * w + ph) * rounds + i - WARMUP] = tt[ph];
            if (i == WARMUP + rounds - 1)
                v[1] &= moe_check_all(&r->m, way_name[w], r->out, r->ref);
        }
    return 1;
}

/* Rank 0: a phase's row from each round's slowest rank; t[w] the way's
 * samples (t[WAY_MPI] NULL: no MPI). */
static void report(const char *phase, double **t, int n, size_t rows, size_t bytes, int verified,
                   const char *const *chan)
{
    static const char *const tag[WAY_MPI] = {"memory", "port", "peer"};
    bench_stats_t st[WAYS] = {};
    char name[64], col[WAYS][32] = {"-", "-", "-", "-"};

    for (int w = 0; w < WAYS && t[w]; w++) {
        for (int i = 0; i < n; i++)
            t[w][i] *= 1e6;
        bench_stats_of(t[w], (uint64_t)n, &st[w]);
    }
    for (int w = 0; w < WAY_MPI && t[WAY_MPI]; w++)
        snprintf(col[w], sizeof(col[w]), "%.2f", st[w].median / st[WAY_MPI].median);
    if (t[WAY_MPI])
        snprintf(col[WAY_MPI], sizeof(col[WAY_MPI]), "%.2f", st[WAY_MPI].median);
    printf("%10s | %7zu | %9.3f | %10.2f | %10.2f | %10.2f | %10s | %8s | %7s | %8s | %s\n",
           phase, rows, (double)bytes / WL_MIB, st[WAY_PEER].median, st[WAY_MEMORY].median,
           st[WAY_PORT].median, col[WAY_MPI], col[WAY_PEER], col[WAY_MEMORY], col[WAY_PORT],
           verified ? "yes" : "NO");
    for (int w = 0; w < WAY_MPI; w++) {
        snprintf(name, sizeof(name), "alltoall_%s_%s", phase, tag[w]);
        bench_out_channel(chan[w], "gpuport_mem_alloc_device");
        bench_out_latency(name, bytes, &st[w],
                          t[WAY_MPI] ? "MPI_Alltoallv staged through pinned host memory" : NULL,
                          &st[WAY_MPI], verified);
    }
}

static void table(run_t *r, double *t, int rounds, int ways, const int *v, const char *tl)
{
    double *d[WAYS], *c[WAYS];
    size_t drows, crows;
    int here = 0, other = r->m.me == 0 ? 1 : 0;
    const char *chan[WAY_MPI] = {tl, tl, "none"};

    for (int p = 0; p < r->m.ranks; p++)
        here += r->local[p] && p != r->m.me;
    for (int w = 0; w < WAYS; w++) {
        d[w] = w < ways ? t + (2 * w) * rounds : NULL;
        c[w] = w < ways ? t + (2 * w + 1) * rounds : NULL;
    }
    if (r->m.ranks > 1)
        chan[WAY_PEER] = gpuport_peer_channel_stores(r->pe[other]) == 1
                             ? "peer channel (stores, copy engine)"
                             : "peer channel (proxy)";
    moe_describe(&r->m, &drows, &crows);
    printf("# peer channels to every other rank (rank %d's to rank %d: %s); memory channels to "
           "the %d other ranks of this host, port channels to the rest; %d blocks of %d threads "
           "per rank\n",
           r->m.me, other, chan[WAY_PEER], here, r->k.B, THREADS);
    printf("# rows, MiB: all ranks' in a round; us: from a barrier to the kernel's end (launch "
           "included), each round's slowest rank, median of %d rounds (%d warm-up)\n#\n",
           rounds, WARMUP);
    printf("%10s | %7s | %9s | %10s | %10s | %10s | %10s | %8s | %7s | %8s | %s\n", "phase",
           "rows", "MiB", "peer us", "memory us", "port us", "MPI us", "peer/MPI", "mem/MPI",
           "port/MPI", "verified");
    report("dispatch", d, rounds, drows, drows * r->m.msg, v[0], chan);
    report("combine", c, rounds, crows, crows * r->m.row, v[1], chan);
    bench_out_channel(tl, "gpuport_mem_alloc_device");
}

static int dmalloc(void *p, size_t bytes)
{
    return wl_cuda_ok(cudaMalloc((void **)p, bytes), "cudaMalloc");
}

/* Host and device memory, the region, and what stays the same every round
 * (moe_tables; this rank's messages packed once and copied to the region,
 * its weights and where its rows come back copied to the device). */
static int prepare(run_t *r)
{
    const moe_t *m = &r->m;
    kargs_t *k = &r->k;
    size_t n = m->ranks, tk = (size_t)m->T * m->K;
    size_t stage = n * (k->a.dslot > k->a.cslot ? k->a.dslot : k->a.cslot);
    unsigned char *send = (unsigned char *)malloc(n * k->a.dslot);
    size_t *pos = (size_t *)malloc(tk * sizeof(size_t));
    int good;

    r->pc = (gpuport_channel_t *)calloc(n, sizeof(*r->pc));
    r->mc = (gpuport_memory_channel_t *)calloc(n, sizeof(*r->mc));
    r->pe = (gpuport_peer_channel_t *)calloc(n, sizeof(*r->pe));
    r->words = (uint64_t *)calloc(n, sizeof(uint64_t));
    r->expect = (unsigned char *)malloc(n * k->a.dslot);
    r->got = (unsigned char *)malloc(n * k->a.dslot);
    r->ref = (float *)malloc(m->T * m->row);
    good = moe_route(&r->m) && send && pos && r->pc && r->mc && r->pe && r->words && r->expect &&
           r->got && r->ref;
    if (!good)
        fprintf(stderr, "rank %d: out of memory\n", wl_rank);
    good = good && dmalloc(&k->nsend, 4 * n * sizeof(int)) &&
           dmalloc(&k->first, n * m->T * sizeof(int)) && dmalloc(&k->weight, tk * sizeof(int)) &&
           dmalloc(&k->pos, tk * sizeof(size_t)) && dmalloc(&k->out, m->T * m->row) &&
           dmalloc(&r->peers, 3 * n * sizeof(peer_dev_t)) &&
           wl_cuda_ok(cudaMallocHost((void **)&r->stage_s, 2 * stage + m->T * m->row),
                      "cudaMallocHost");
    /* setup: begin */
    good = good &&
           wl_ok(gpuport_mem_alloc_device(r->comm, k->a.bytes, (void **)&k->base),
                 "gpuport_mem_alloc_device") &&
           wl_ok(gpuport_mem_register(r->comm, k->base, k->a.bytes, &r->mem),
                 "gpuport_mem_register");
    /* setup: end */
    if (good) {
        k->nrecv = k->nsend + n;
        k->cback = k->nrecv + n;
        k->rc = k->cback + n;
        r->stage_r = r->stage_s + stage;
        r->out = (float *)(r->stage_r + stage);
        moe_tables(m, k->a.dslot, send, r->nsend, r->expect, r->expect_n, r->ddsp, r->cdsp, pos,
                   r->crows, r->ref, &r->msg_type, &r->row_type);
        good =
            wl_cuda_ok(cudaMemcpy(k->base + k->a.dsend, send, n * k->a.dslot, cudaMemcpyHostToDevice),
                    "cudaMemcpy(send)") &&
            wl_cuda_ok(cudaMemcpy(k->nsend, r->nsend, n * sizeof(int), cudaMemcpyHostToDevice),
                    "cudaMemcpy(nsend)") &&
            wl_cuda_ok(cudaMemcpy(k->pos, pos, tk * sizeof(size_t), cudaMemcpyHostToDevice),
                    "cudaMemcpy(pos)") &&
            wl_cuda_ok(cudaMemcpy(k->weight, moe_weights(m, m->me, 0), tk * sizeof(int),
                               cudaMemcpyHostToDevice),
                    "cudaMemcpy(weight)");
    }
    k->m = r->m;
    k->m.expert = k->m.weight = NULL; /* host memory: not the kernels' */
    free(pos);
    free(send);
    return good;
}

/* The channels: a peer channel to every rank at once
 * (gpuport_peer_channel_create_all: all or none, on every rank); then
 * pairwise, every rank meeting the others in increasing order (no cycle of
 * waits), a port channel to each and a memory channel to each of its host,
 * meeting every one even after a failure, so that none is left waiting.
 * Then, per gpuport way, how a kernel reaches each rank; tl gets the port
 * channels' transports. */
static int connect(run_t *r, char *tl, size_t len)
{
    int good = 1, n = r->m.ranks;
    peer_dev_t *pd;

    /* setup: begin */
    if (!wl_ok(gpuport_peer_channel_create_all(r->comm, r->mem, r->mem, r->pe),
               "gpuport_peer_channel_create_all") ||
        !wl_ok(gpuport_peer_channel_device_all(r->comm, r->pe, &r->pe_dev),
               "gpuport_peer_channel_device_all"))
        return 0;
    /* setup: end */
    for (int p = 0; p < n; p++) {
        if (p == r->m.me)
            continue;
        good &= wl_ok_peer(gpuport_channel_create(r->comm, p, r->mem, r->mem, &r->pc[p]),
                           "gpuport_channel_create", p);
        if (r->local[p])
            good &= wl_ok_peer(gpuport_memory_channel_create(r->comm, p, r->mem, r->mem, &r->mc[p]),
                               "gpuport_memory_channel_create", p);
    }
    pd = (peer_dev_t *)calloc(3 * n, sizeof(peer_dev_t));
    if (!wl_agree(good && pd)) {
        free(pd);
        return 0;
    }
    tl[0] = 0;
    for (int p = 0; good && p < n; p++) {
        const char *t = r->pc[p] ? gpuport_channel_transport(r->pc[p]) : "";
        if (r->pc[p])
            good = wl_ok_peer(gpuport_channel_device(r->pc[p], &pd[p].pc), "gpuport_channel_device",
                              p);
        if (good && r->mc[p])
            good = wl_ok_peer(gpuport_memory_channel_device(r->mc[p], &pd[p].mc),
                              "gpuport_memory_channel_device", p);
        pd[p].via = p == r->m.me ? VIA_SELF : r->local[p] ? VIA_MEMORY : VIA_PORT;
        pd[n + p] = pd[p];
        pd[n + p].via = p == r->m.me ? VIA_SELF : VIA_PORT;
        pd[2 * n + p].via = pd[n + p].via; /* the peer way's own copy: k.pe */
        if (*t && !strstr(tl, t))
            snprintf(tl + strlen(tl), len - strlen(tl), "%s%s", *tl ? "+" : "", t);
    }
    good = good &&
           wl_cuda_ok(cudaMemcpy(r->peers, pd, 3 * n * sizeof(peer_dev_t), cudaMemcpyHostToDevice),
                   "cudaMemcpy(peers)");
    free(pd);
    return wl_agree(good);
}

/* Everything released, channels first; memory and peer channels pairwise,
 * in one order on every rank, once no kernel of any rank runs. */
static int release(run_t *r)
{
    int good = wl_cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; r->pe && p < r->m.ranks; p++)
        if (r->pe[p] && !wl_ok_peer(gpuport_peer_channel_destroy(r->pe[p]),
                                    "gpuport_peer_channel_destroy", p))
            good = 0;
    if (r->pe_dev && !wl_ok(gpuport_mem_free(r->comm, r->pe_dev), "gpuport_mem_free(pe_dev)"))
        good = 0;
    for (int p = 0; r->mc && p < r->m.ranks; p++)
        if (r->mc[p] && !wl_ok_peer(gpuport_memory_channel_destroy(r->mc[p]),
                                    "gpuport_memory_channel_destroy", p))
            good = 0;
    for (int p = 0; r->pc && p < r->m.ranks; p++)
        if (r->pc[p] &&
            !wl_ok_peer(gpuport_channel_destroy(r->pc[p]), "gpuport_channel_destroy", p))
            good = 0;
    if (r->mem && !wl_ok(gpuport_mem_deregister(r->mem), "gpuport_mem_deregister"))
        good = 0;
    if (r->k.base && !wl_ok(gpuport_mem_free(r->comm, r->k.base), "gpuport_mem_free"))
        good = 0;
    if (r->msg_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&r->msg_type);
    if (r->row_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&r->row_type);
    cudaFree(r->k.nsend);
    cudaFree(r->k.first);
    cudaFree(r->k.weight);
    cudaFree(r->k.pos);
    cudaFree(r->k.out);
    cudaFree(r->peers);
    cudaFreeHost(r->stage_s);
    moe_free(&r->m);
    free(r->pc);
    free(r->mc);
    free(r->pe);
    free(r->words);
    free(r->expect);
    free(r->got);
    free(r->ref);
    return good;
}

int main(int argc, char **argv)
{
    static run_t r; /* zeroed */
    wl_opts_t o;
    int gpu = 0, good, v[2] = {1, 1}, rounds, ways, n = 1,
        rc = wl_init(
            &argc, &argv,
            "  --blocks B    blocks per rank of the exchange kernels (default 8)\n" MOE_USAGE, &o);
    char tl[64], name[256] = "";
    double *t;

    if (rc >= 0)
        return rc;
    r.k.B = 8;
    for (int i = 1; i < argc; i++) /* --blocks B out, the case's options left */
        if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            r.k.B = atoi(argv[++i]);
        else
            argv[n++] = argv[i];
    if (r.k.B < 1 || !moe_options(n, argv, o.small, wl_rank, wl_size, &r.m) || r.m.H % 4) {
        if (wl_rank == 0 && (r.k.B < 1 || r.m.H % 4))
            fprintf(stderr, "%s: needs --blocks of at least 1, and H a multiple of 4\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    r.nsend = (int *)calloc(9 * (size_t)wl_size, sizeof(int)); /* nsend, then run_t's order */
    if (!r.nsend) { /* every rank must reach pick_gpu's collectives */
        fprintf(stderr, "rank %d: out of memory\n", wl_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    gpu = wl_gpu_pick(NULL, name, sizeof(name));
    if (!wl_agree(gpu >= 0)) {
        rc = wl_agree(gpu != -1) ? 1 : 77; /* 77 where a rank has no GPU */
        free(r.nsend);
        MPI_Finalize();
        return rc;
    }
    int **arrays[] = {&r.nrecv, &r.cback, &r.rc, &r.crows, &r.expect_n, &r.ddsp, &r.cdsp, &r.local};
    for (int i = 0; i < 8; i++)
        *arrays[i] = r.nsend + (i + 1) * wl_size;
    r.msg_type = r.row_type = MPI_DATATYPE_NULL;
    rounds = wl_rounds(&o, o.small ? 20 : 50);
    ways = o.no_mpi ? WAY_MPI : WAYS;
    r.comm = wl_comm();
    for (int p = 0; p < wl_size; p++) /* memory channels where gpuport can map the peer */
        r.local[p] = gpuport_comm_same_host(r.comm, p) == 1;
    r.k.a = moe_areas(&r.m);
    t = (double *)calloc(2 * WAYS * (size_t)rounds, sizeof(double));
    good = wl_agree(t && prepare(&r)) && connect(&r, tl, sizeof(tl));
    if (good) {
        wl_header("alltoall_gpu",
                  "MoE dispatch and combine by kernels, gpuport peer, memory and port channels "
                  "beside MPI_Alltoallv staged through the host",
                  tl);
        bench_out_context("gpu", name, wl_size);
        bench_out_channel(tl, "gpuport_mem_alloc_device");
        if (wl_rank == 0)
            printf("# rank 0 on GPU %d (%s)\n", gpu, name);
        good = run_rounds(&r, rounds, ways, t, v);
        MPI_Reduce(wl_rank == 0 ? MPI_IN_PLACE : t, t, 2 * WAYS * rounds, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        v[0] = wl_agree(v[0]);
        v[1] = wl_agree(v[1]);
        if (good && wl_rank == 0)
            table(&r, t, rounds, ways, v, tl);
    }
    good &= release(&r);
    if (!wl_ok(gpuport_comm_destroy(r.comm), "gpuport_comm_destroy"))
        good = 0;
    free(r.nsend);
    free(t);
    return wl_finish(good && v[0] && v[1]);
}
