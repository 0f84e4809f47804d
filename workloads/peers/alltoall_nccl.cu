/*
 * alltoall_nccl: workloads/alltoall_gpu.cu's MoE dispatch and combine with
 * grouped ncclSend/ncclRecv, as the peer baseline of gpuport's memory and
 * port channels: the same case, routing, region layout and checks
 * (alltoall_moe.h), the same rounds (peer_moe.h), its own table.
 *
 * The region is one cudaMalloc block in alltoall_moe.h's layout. Dispatch
 * is what an NCCL program must do when the receiver learns the counts from
 * the senders: a group of one-word ncclSend/ncclRecv per rank (the counts,
 * into the count words), a wait for them on the host, then a group of
 * ncclSend/ncclRecv of the messages, each rank's slot to its slot at the
 * other (MPI's Alltoall + Alltoallv, on the GPU). Combine is one group:
 * the rows the expert step made for each rank, and the rows this rank's
 * routing says each rank returns. A rank's rows to itself go through NCCL
 * too. One GPU per rank (two ranks on one GPU: every rank says SKIP and
 * exits 77).
 *
 *   mpirun -np N alltoall_nccl [alltoall's options]
 */
#include "peer_nccl.h"
#include "peer_moe.h"

typedef struct nccl_state {
    ncclComm_t comm;
    uint64_t *dn; /* device: [ranks] nsend, the counts sent */
} nccl_state_t;

static int nc_prepare(moe_peer_t *, int)
{
    return 1; /* nothing in NCCL's memory to reset */
}

/* One group: n_send[p] units from slot p of `from` to rank p, n_recv[p]
 * from rank p into slot p of `to`. */
static int nc_group(moe_peer_t *x, size_t from, size_t to, size_t slot, size_t unit,
                    const int *n_send, const int *n_recv)
{
    ncclComm_t comm = ((nccl_state_t *)x->lib_state)->comm;
    int good = nccl_ok(ncclGroupStart(), "ncclGroupStart");

    for (int p = 0; good && p < x->m.ranks; p++) {
        if (n_send[p])
            good = nccl_ok(ncclSend(x->base + from + p * slot, n_send[p] * unit, ncclUint8, p,
                                    comm, x->s), "ncclSend");
        if (good && n_recv[p])
            good = nccl_ok(ncclRecv(x->base + to + p * slot, n_recv[p] * unit, ncclUint8, p,
                                    comm, x->s), "ncclRecv");
    }
    return nccl_ok(ncclGroupEnd(), "ncclGroupEnd") && good;
}

static int nc_phase(moe_peer_t *x, int comb)
{
    nccl_state_t *st = (nccl_state_t *)x->lib_state;
    const moe_areas_t *a = &x->a;
    int good = 1, n = x->m.ranks;

    if (comb)
        return nc_group(x, a->csend, a->crecv, a->cslot, x->m.row, x->cback, x->crows) &&
               cuda_ok(cudaStreamSynchronize(x->s), "combine");
    good = nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; good && p < n; p++)
        good = nccl_ok(ncclSend(st->dn + p, 1, ncclUint64, p, st->comm, x->s), "ncclSend") &&
               nccl_ok(ncclRecv(x->base + a->count + 8 * p, 1, ncclUint64, p, st->comm, x->s),
                       "ncclRecv");
    good = nccl_ok(ncclGroupEnd(), "ncclGroupEnd") && good &&
           cuda_ok(cudaMemcpyAsync(x->words, x->base + a->count, 8 * n, cudaMemcpyDeviceToHost,
                                   x->s), "cudaMemcpyAsync(counts)") &&
           cuda_ok(cudaStreamSynchronize(x->s), "dispatch (counts)");
    for (int p = 0; p < n; p++) /* a bad count receives nothing; counts() tells */
        x->nrecv[p] = x->words[p] <= (uint64_t)x->m.T ? (int)x->words[p] : 0;
    return good && nc_group(x, a->dsend, a->drecv, a->dslot, x->m.msg, x->nsend, x->nrecv) &&
           cuda_ok(cudaStreamSynchronize(x->s), "dispatch");
}

static int nc_counts(moe_peer_t *x)
{
    for (int p = 0; p < x->m.ranks; p++)
        if (x->words[p] > (uint64_t)x->m.T) {
            fprintf(stderr, "rank %d: NCCL: count from rank %d is %llu, above T %d\n", wl_rank, p,
                    (unsigned long long)x->words[p], x->m.T);
            return 0;
        }
    return 1;
}

int main(int argc, char **argv)
{
    static moe_peer_t x; /* zeroed */
    nccl_state_t st = {};
    wl_opts_t o;
    char gpu[256] = "", lib[64];
    uint64_t *counts = NULL;
    int rc = wl_init(&argc, &argv, MOE_USAGE, &o), dev, good;

    if (rc >= 0)
        return rc;
    if (!moe_options(argc, argv, o.small, wl_rank, wl_size, &x.m)) {
        MPI_Finalize();
        return 2;
    }
    rc = peer_gpu(1, &dev, gpu, sizeof(gpu));
    if (rc >= 0)
        return rc;
    if (!peer_nccl_init(&st.comm))
        return wl_finish(0);
    x.lib = "NCCL";
    x.how[0] = "the counts (a word per rank, grouped ncclSend/ncclRecv), a host wait, then "
               "each rank's\n#   messages (16 B header + row per token), grouped "
               "ncclSend/ncclRecv";
    x.how[1] = "a row per token and expert back to the token's rank, grouped ncclSend/ncclRecv";
    x.a = moe_areas(&x.m);
    x.prepare = nc_prepare;
    x.phase = nc_phase;
    x.counts = nc_counts;
    x.lib_state = &st;
    counts = (uint64_t *)calloc(x.m.ranks, sizeof(uint64_t));
    good = counts && cuda_ok(cudaMalloc((void **)&x.base, x.a.bytes), "cudaMalloc") &&
           moe_route(&x.m) && moe_peer_prepare(&x) &&
           cuda_ok(cudaMalloc((void **)&st.dn, x.m.ranks * sizeof(uint64_t)), "cudaMalloc");
    for (int p = 0; good && p < x.m.ranks; p++)
        counts[p] = (uint64_t)x.nsend[p];
    good = good &&
           cuda_ok(cudaMemcpy(st.dn, counts, x.m.ranks * sizeof(uint64_t), cudaMemcpyHostToDevice),
                   "cudaMemcpy(counts)") &&
           cuda_ok(cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (wl_agree(good)) {
        peer_nccl_name(lib, sizeof(lib));
        peer_header("alltoall_nccl", "MoE dispatch and combine, grouped ncclSend/ncclRecv", lib,
                    gpu);
        good = moe_peer_main(&x, wl_rounds(&o, o.small ? 20 : 50));
    }
    good = wl_agree(good); /* a failed rank's calls may be left pending: abort them */
    if (!nccl_ok(good ? ncclCommDestroy(st.comm) : ncclCommAbort(st.comm), "ncclCommDestroy"))
        good = 0;
    if (x.s)
        cudaStreamDestroy(x.s);
    cudaFree(st.dn);
    cudaFree(x.base);
    free(counts);
    moe_peer_release(&x);
    moe_free(&x.m);
    return wl_finish(good);
}
