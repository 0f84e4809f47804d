/*
 * alltoall_nvshmem: workloads/alltoall_gpu.cu's MoE dispatch and combine
 * with NVSHMEM puts and signals from kernels, as the peer baseline of
 * gpuport's memory and port channels: the same case, routing, region
 * layout and checks (alltoall_moe.h), the same rounds (peer_moe.h), its
 * own table.
 *
 * The region is one nvshmem_malloc block in alltoall_moe.h's layout (the
 * same size on every PE), beside a combine signal word per rank; the count
 * words at its start are dispatch's signal words. Each phase is a kernel
 * of (B, ranks) blocks, as alltoall_gpu.cu's: block (b, p) takes the b-th
 * share of this rank's messages (rows) for rank p and sends it into this
 * rank's slot there with nvshmemx_putmem_signal_nbi_block, the signal
 * added to this rank's word at p after the data (a block with no share
 * adds its signal alone, nvshmemx_signal_op). Dispatch adds 2^32 plus the
 * share's message count to the count word, so the word is B << 32 | n once
 * all B blocks have landed: the count rides with the signal, and the
 * receiver waits (block (0, p), nvshmem_signal_wait_until) for B << 32.
 * Combine adds 1 to the combine word and waits for B. Both kinds of word
 * are zeroed before the barrier that opens their phase; every signal of
 * the phase before had been taken by then. A rank's rows to itself go the
 * same way, to its own PE.
 *
 *   mpirun -np N alltoall_nvshmem [--blocks B] [--bootstrap mpi|uid] [alltoall's options]
 */
#include "peer_nvshmem.h"
#include "peer_moe.h"

#define THREADS 256

/* What a phase's kernel gets, by value. */
typedef struct kargs {
    unsigned char *base; /* symmetric: the region */
    uint64_t *csig;      /* symmetric: [ranks] combine words, [p] set by rank p */
    const int *n;        /* device: [ranks] messages (dispatch) or rows (combine) for each rank */
    size_t src, dst, slot, unit; /* the phase's areas, slot and unit */
    int me, B;
    int comb;
} kargs_t;

typedef struct nv_state {
    kargs_t k;
    int *dn; /* device: [2][ranks]: nsend, cback */
} nv_state_t;

__global__ void exchange(kargs_t k)
{
    const int p = blockIdx.y, b = blockIdx.x;
    const uint64_t n = (uint64_t)k.n[p], first = n * b / k.B, last = n * (b + 1) / k.B;
    uint64_t *word = k.comb ? k.csig : (uint64_t *)k.base; /* the count words: area offset 0 */
    uint64_t add = k.comb ? 1 : 1ull << 32 | (last - first);

    /* exchange: begin */
    if (last > first)
        nvshmemx_putmem_signal_nbi_block(k.base + k.dst + k.me * k.slot + first * k.unit,
                                         k.base + k.src + p * k.slot + first * k.unit,
                                         (last - first) * k.unit, word + k.me, add,
                                         NVSHMEM_SIGNAL_ADD, p);
    else if (threadIdx.x == 0)
        nvshmemx_signal_op(word + k.me, add, NVSHMEM_SIGNAL_ADD, p);
    if (b == 0 && threadIdx.x == 0) /* every block of rank p has landed here */
        nvshmem_signal_wait_until(word + p, NVSHMEM_CMP_GE,
                                  k.comb ? (uint64_t)k.B : (uint64_t)k.B << 32);
    /* exchange: end */
}

static int nv_prepare(moe_peer_t *x, int comb)
{
    nv_state_t *st = (nv_state_t *)x->lib_state;
    int n = x->m.ranks;

    if (!comb)
        return 1; /* the count words: zeroed by peer_moe.h */
    return cuda_ok(cudaMemset(st->k.csig, 0, n * sizeof(uint64_t)), "cudaMemset(csig)") &&
           cuda_ok(cudaMemcpy(st->dn + n, x->cback, n * sizeof(int), cudaMemcpyHostToDevice),
                   "cudaMemcpy(cback)");
}

static int nv_phase(moe_peer_t *x, int comb)
{
    nv_state_t *st = (nv_state_t *)x->lib_state;
    kargs_t k = st->k;

    k.comb = comb;
    k.n = st->dn + comb * x->m.ranks;
    k.src = comb ? x->a.csend : x->a.dsend;
    k.dst = comb ? x->a.crecv : x->a.drecv;
    k.slot = comb ? x->a.cslot : x->a.dslot;
    k.unit = comb ? x->m.row : x->m.msg;
    exchange<<<dim3(k.B, x->m.ranks), THREADS, 0, x->s>>>(k);
    return cuda_ok(cudaGetLastError(), "exchange<<<>>>") &&
           cuda_ok(cudaStreamSynchronize(x->s), comb ? "combine" : "dispatch");
}

static int nv_counts(moe_peer_t *x)
{
    nv_state_t *st = (nv_state_t *)x->lib_state;

    for (int p = 0; p < x->m.ranks; p++) {
        if (x->words[p] >> 32 != (uint64_t)st->k.B) {
            fprintf(stderr, "rank %d: NVSHMEM: count word from rank %d is %#llx, not %d blocks'\n",
                    wl_rank, p, (unsigned long long)x->words[p], st->k.B);
            return 0;
        }
        x->nrecv[p] = (int)(x->words[p] & 0xffffffffu);
    }
    return 1;
}

int main(int argc, char **argv)
{
    static moe_peer_t x; /* zeroed */
    nv_state_t st = {};
    wl_opts_t o;
    char gpu[256] = "", lib[96];
    const char *boot;
    int rc = wl_init(&argc, &argv,
                     "  --blocks B    blocks per rank of the exchange kernels (default 8)\n"
                     MOE_USAGE PEER_NVSHMEM_USAGE, &o),
        n = 1, dev, good;

    if (rc >= 0)
        return rc;
    st.k.B = 8;
    boot = peer_nvshmem_option(&argc, argv);
    for (int i = 1; boot && i < argc; i++) /* --blocks B out, the case's options left */
        if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            st.k.B = atoi(argv[++i]);
        else
            argv[n++] = argv[i];
    if (!boot || st.k.B < 1 || !moe_options(n, argv, o.small, wl_rank, wl_size, &x.m)) {
        if (boot && st.k.B < 1 && wl_rank == 0)
            fprintf(stderr, "%s: --blocks needs at least 1\n", argv[0]);
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
    x.lib = "NVSHMEM";
    x.how[0] = "a message (16 B header + row) per token and destination rank, a share per "
               "block,\n#   nvshmemx_putmem_signal_nbi_block, the count added to the signal word";
    x.how[1] = "a row per token and expert back to the token's rank, the same way, a signal per "
               "block";
    x.a = moe_areas(&x.m);
    x.prepare = nv_prepare;
    x.phase = nv_phase;
    x.counts = nv_counts;
    x.lib_state = &st;
    /* setup: begin */
    x.base = (unsigned char *)nvshmem_malloc(x.a.bytes);
    st.k.csig = (uint64_t *)nvshmem_calloc(x.m.ranks, sizeof(uint64_t));
    st.k.base = x.base;
    st.k.me = wl_rank;
    good = x.base && st.k.csig;
    if (!good)
        fprintf(stderr, "rank %d: nvshmem_malloc of %zu bytes failed (NVSHMEM_SYMMETRIC_SIZE?)\n",
                wl_rank, x.a.bytes);
    /* setup: end */
    good = good && moe_route(&x.m) && moe_peer_prepare(&x) &&
           cuda_ok(cudaMalloc((void **)&st.dn, 2 * x.m.ranks * sizeof(int)), "cudaMalloc") &&
           cuda_ok(cudaMemcpy(st.dn, x.nsend, x.m.ranks * sizeof(int), cudaMemcpyHostToDevice),
                   "cudaMemcpy(nsend)") &&
           cuda_ok(cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (wl_agree(good)) {
        peer_nvshmem_name(boot, lib, sizeof(lib));
        peer_header("alltoall_nvshmem",
                    "MoE dispatch and combine by kernels, NVSHMEM puts with signals", lib, gpu);
        if (wl_rank == 0)
            printf("# %d blocks of %d threads per rank and phase\n", st.k.B, THREADS);
        good = moe_peer_main(&x, wl_rounds(&o, o.small ? 20 : 50));
    }
    nvshmem_barrier_all();
    if (x.s)
        cudaStreamDestroy(x.s);
    cudaFree(st.dn);
    nvshmem_free(st.k.csig);
    nvshmem_free(x.base);
    nvshmem_finalize();
    moe_peer_release(&x);
    moe_free(&x.m);
    return wl_finish(good);
}
