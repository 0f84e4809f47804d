/*
 * cuda_ipc transport: ranks on one host, GPU memory at both ends. The peer's
 * destination is VMM memory whose descriptors were passed at channel
 * creation (fdpass.h), imported and mapped here once per region
 * (cipc_vmm.c), or legacy memory (cudaMalloc) whose CUDA IPC handle is
 * opened in the flusher's private context; puts are copy-engine copies on the flusher's stream and signals are
 * cuStreamWriteValue64 of the channel's new signal count into the peer's
 * semaphore, queued behind the copies on the same stream. Semaphores live in
 * the peer's host control segment (shared memory), registered in our
 * private context, so the peer's kernels and host threads read them alike.
 * put_value is a cuStreamWriteValue64 into the peer's memory on the same
 * stream. get is a put read the other way: a copy-engine copy from the
 * peer's imported memory into this side's source region, on the same
 * stream. Adds into GPU memory (atomic_add, accumulate) are refused: memory
 * channels' kernels do them. The proxy only describes the work; the flusher
 * does every CUDA call. A channel whose source is cudaMalloc memory goes by
 * the relay instead (cipc_relay.c): two copies, neither of which CUDA holds
 * while an application thread sits in a synchronous cudaMemcpy.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_CUDA_IPC)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/cudrv.h"
#include "transport/sm/sm.h"

#include "transport/cuda_ipc/cipc.h"

static int cipc_reachable(gpuport_tl_comm_t *tc, int peer, char *why, size_t len)
{
    gpuport_comm_t comm = tc->comm;
    const gpuport_proc_rec_t *me = gpuport_tl_proc(comm, gpuport_tl_rank(comm));
    const gpuport_proc_rec_t *p = gpuport_tl_proc(comm, peer);

    if (!sm_reachable(comm, peer, why, len))
        return 0;
    if (me->gpu < 0 || p->gpu < 0) {
        snprintf(why, len, "%s has no GPU in use (GPUPORT_GPU)", me->gpu < 0 ? "this rank" : "the peer");
        return 0;
    }
    return 1;
}

/* GPU memory on one host: the copy engine, before anything else */
static int cipc_auto_rank(int device_regions)
{
    return device_regions ? 30 : 0;
}

static void cipc_describe(const void *settings, char *buf, size_t len)
{
    char why[256];

    (void)settings;
    if (gpuport_cudrv_load(why, sizeof(why)) == GPUPORT_OK)
        snprintf(buf, len, "available: ranks on one host, GPU memory at both ends, copy engine "
                 "from the flusher's own CUDA context");
    else
        snprintf(buf, len, "built, not usable here: %s", why);
}

static void ctrl_release(gpuport_conn_t *conn, cipc_conn_t *cc)
{
    if (cc->registered && gpuport_tl_gpu_ctx_push(conn->comm) == GPUPORT_OK) {
        gpuport_cu.cuMemHostUnregister(cc->ctrl.map);
        gpuport_tl_gpu_ctx_pop();
    }
    sm_ctrl_unmap(&cc->ctrl);
}

static gpuport_status_t cipc_conn_open(gpuport_conn_t *conn)
{
    cipc_conn_t *cc = calloc(1, sizeof(*cc));
    gpuport_status_t st;

    if (!cc)
        return GPUPORT_ERR_NO_MEMORY;
    st = sm_ctrl_map(conn->comm, conn->peer, &cc->ctrl);
    if (st)
        goto err;
    st = gpuport_tl_gpu_ctx_push(conn->comm);
    if (st)
        goto err_unmap;
    st = CU_CALL(cuMemHostRegister, (cc->ctrl.map, cc->ctrl.map_len,
                                     CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP));
    if (!st) {
        cc->registered = 1;
        st = CU_CALL(cuMemHostGetDevicePointer, (&cc->ctrl_d, cc->ctrl.slots, 0));
    }
    gpuport_tl_gpu_ctx_pop();
    if (st)
        goto err_unmap;
    conn->priv = cc;
    st = cipc_relay_conn_open(conn);
    if (st) {
        conn->priv = NULL;
        goto err_unmap;
    }
    return GPUPORT_OK;

err_unmap:
    ctrl_release(conn, cc);
err:
    free(cc);
    return st;
}

static void cipc_conn_close(gpuport_conn_t *conn)
{
    cipc_conn_t *cc = conn->priv;

    if (!cc)
        return;
    cipc_relay_conn_close(conn);
    cipc_vmm_release_all(conn);
    cipc_pools_release(conn);
    ctrl_release(conn, cc);
    free(cc);
    conn->priv = NULL;
}

static int kind_ok(int kind)
{
    return gpuport_region_is_device(kind) || kind == GPUPORT_REGION_NONE;
}

/* GPU memory only; a destination must be importable by the peer (cudaMalloc
 * memory by IPC handle, VMM memory by its exported descriptors, pool
 * memory by its pool's descriptor and export data), so that
 * both sides fail with this side's reason. Pinned host memory is host
 * memory here: the flusher's copies would reach it through the host
 * mapping, which this transport does not set up. */
static int cipc_region_ok(const gpuport_region_t *r, int as_dst, char *why, size_t len)
{
    if (!gpuport_region_is_device(r->kind)) {
        snprintf(why, len, "cuda_ipc moves GPU memory to GPU memory, and this is %s memory; use "
                 "host memory at both ends (shm) or GPU memory at both ends",
                 r->mem_kind == GPUPORT_MEM_KIND_HOST_PINNED ? "pinned host" : "host");
        return 0;
    }
    if (as_dst && r->kind == GPUPORT_REGION_DEVICE_VMM && r->npieces == 0) {
        snprintf(why, len, "the destination is VMM memory that cuda_ipc cannot share: %s",
                 r->export_why ? r->export_why : "it has no exported descriptor");
        return 0;
    }
    if (as_dst && r->kind == GPUPORT_REGION_DEVICE_POOL && r->npieces == 0) {
        snprintf(why, len, "the destination is pool memory that cuda_ipc cannot share: %s",
                 r->export_why ? r->export_why : "its pool has no exported descriptor");
        return 0;
    }
    return 1;
}

static gpuport_status_t dst_connect(gpuport_tl_chan_t *ch, cipc_chan_t *cs,
                                    const gpuport_region_rec_t *r);
/* each connect's serial: the relay's items name their channel by it too */
static _Atomic uint64_t serials;

static gpuport_status_t cipc_chan_connect(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer)
{
    cipc_conn_t *cc = ch->conn->priv;
    const gpuport_region_rec_t *r = &peer->dst;
    gpuport_sem_slot_t *slot = sm_ctrl_slot(&cc->ctrl, ch->peer, peer->channel_id);
    cipc_chan_t *cs;
    gpuport_status_t st;

    if (!slot)
        return GPUPORT_ERR_PEER;
    /* this side's regions passed cipc_region_ok; the peer's destination is
     * checked by the peer, and here again as it describes it */
    if (!kind_ok((int)r->kind)) {
        char why[200];
        const gpuport_region_t peer_dst = {.kind = (int)r->kind};
        cipc_region_ok(&peer_dst, 0, why, sizeof(why));
        log_error("channel to rank %d: the peer's destination: %s", ch->peer, why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    cs = calloc(1, sizeof(*cs));
    if (!cs)
        return GPUPORT_ERR_NO_MEMORY;
    cs->sem_d = cc->ctrl_d + peer->channel_id * sizeof(gpuport_sem_slot_t) +
                offsetof(gpuport_sem_slot_t, value);
    cs->serial = atomic_fetch_add(&serials, 1) + 1;
    ch->priv = cs;
    ch->remote_slot = slot;
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = *r;
    st = dst_connect(ch, cs, r);
    if (!st)
        st = cipc_relay_connect(ch, peer);
    return st;
}

/* The peer's destination, mapped in the flusher's context. */
static gpuport_status_t dst_connect(gpuport_tl_chan_t *ch, cipc_chan_t *cs,
                                    const gpuport_region_rec_t *r)
{
    CUipcMemHandle handle;
    CUdeviceptr base;
    gpuport_status_t st;

    if (r->kind == GPUPORT_REGION_NONE)
        return GPUPORT_OK;
    if (r->kind == GPUPORT_REGION_DEVICE_VMM)
        return cipc_vmm_import(ch, &cs->imp);
    if (r->kind == GPUPORT_REGION_DEVICE_POOL)
        return cipc_pool_import(ch, &cs->imp);
    memcpy(&handle, r->ipc, sizeof(handle));
    st = gpuport_tl_gpu_ctx_push(ch->comm);
    if (st)
        return st;
    st = CU_CALL(cuIpcOpenMemHandle, (&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    gpuport_tl_gpu_ctx_pop();
    if (st) {
        log_error("cannot open rank %d's GPU memory (CUDA IPC) in this rank's flusher context: "
                  "are both GPUs peers (nvidia-smi topo -p2p r)?",
                  ch->peer);
        return st;
    }
    ch->dst.map_base = (void *)(uintptr_t)base;
    ch->dst.base = (void *)(uintptr_t)(base + r->fd_offset);
    return GPUPORT_OK;
}

static void cipc_chan_disconnect(gpuport_tl_chan_t *ch)
{
    cipc_chan_t *cs = ch->priv;

    cipc_relay_disconnect(ch);
    if (cs && cs->imp)
        cipc_vmm_release(ch->conn, cs->imp);
    if (ch->dst.map_base && gpuport_tl_gpu_ctx_push(ch->comm) == GPUPORT_OK) {
        gpuport_cu.cuIpcCloseMemHandle((CUdeviceptr)(uintptr_t)ch->dst.map_base);
        gpuport_tl_gpu_ctx_pop();
    }
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->remote_slot = NULL;
    free(ch->priv);
    ch->priv = NULL;
}

/* Memory channels: VMM and pool destinations are imported for the
 * process (cipc_vmm.c, cipc_pool.c), so the application's kernels reach
 * them as the flusher does; a cudaMalloc destination is opened by its
 * legacy IPC handle in the flusher's context, and CUDA lets one context per
 * device and process open it, so the application's cannot. */
static int cipc_kernel_dst_ok(const gpuport_region_rec_t *r, char *why, size_t len)
{
    switch (r->kind) {
    case GPUPORT_REGION_NONE:
    case GPUPORT_REGION_DEVICE_VMM:
    case GPUPORT_REGION_DEVICE_POOL:
        return 1;
    case GPUPORT_REGION_DEVICE:
        snprintf(why, len, "a cudaMalloc destination opens by its legacy CUDA IPC handle in one "
                 "context per GPU and process, here the flusher's, which the application's "
                 "kernels cannot use; register VMM memory (gpuport_mem_alloc_device, or "
                 "cuMemCreate memory with a POSIX descriptor handle) or exportable pool memory");
        return 0;
    default:
        snprintf(why, len, "kernels store into GPU memory, and the destination is host memory");
        return 0;
    }
}

static gpuport_status_t cipc_chan_kernel_map(gpuport_tl_chan_t *ch, uint64_t *dst_d_p,
                                             uint64_t *sem_d_p)
{
    cipc_chan_t *cs = ch->priv;

    if (!cs || (ch->dst.rec.kind != GPUPORT_REGION_NONE && !cs->imp)) {
        log_error("channel %u (to rank %d): its destination is not mapped for the process, so "
                  "kernels cannot reach it",
                  ch->id, ch->peer);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    *dst_d_p = cs->imp ? (uint64_t)(uintptr_t)ch->dst.base : 0;
    *sem_d_p = (uint64_t)cs->sem_d;
    return GPUPORT_OK;
}

static int cipc_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                    int behind_work, gpuport_work_t *w)
{
    (void)behind_work; /* always queued, so always in order */
    if (cipc_relay_on(ch))
        return cipc_relay_put(ch, dst_off, src_off, size);
    w->kind = GPUPORT_WORK_CU_COPY;
    w->dst = (char *)ch->dst.base + dst_off;
    w->src = (const char *)ch->src.ptr + src_off;
    w->size = size;
    /* legacy device memory belongs to the application's context; VMM and
     * pool memory to no context, so the flusher's own reaches it */
    w->flags = ch->src.kind == GPUPORT_REGION_DEVICE ? GPUPORT_WORK_SRC_APP : 0;
    return GPUPORT_TRANSPORT_QUEUE;
}

/* cuStreamWriteValue64 of the value into the peer's GPU memory, on the
 * flusher's stream behind the channel's copies (as a signal is); it needs an
 * 8-aligned address, which a region that starts unaligned cannot give. */
static int cipc_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value,
                          int behind_work, gpuport_work_t *w)
{
    char *dst = (char *)ch->dst.base + dst_off;

    (void)behind_work; /* always queued, so always in order */
    if ((uintptr_t)dst & 7) {
        log_error("channel %u (to rank %d): put_value at destination offset %llu: rank %d's "
                  "region starts at an address that is not 8-byte aligned, and a GPU write of "
                  "a value needs one",
                  ch->id, ch->peer, (unsigned long long)dst_off, ch->peer);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (cipc_relay_on(ch))
        return cipc_relay_value(ch, dst_off, value);
    w->kind = GPUPORT_WORK_CU_WRITE;
    w->dst = dst;
    w->value = value;
    if (ch->dst.rec.kind == GPUPORT_REGION_DEVICE_POOL)
        w->flags |= GPUPORT_WORK_VALUE_COPY;
    return GPUPORT_TRANSPORT_QUEUE;
}

static int cipc_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *w)
{
    cipc_chan_t *cs = ch->priv;

    (void)behind_work;
    cs->signals_sent += n; /* absolute: n signals are one write */
    if (cs->relay)
        return cipc_relay_signal(ch, cs->signals_sent);
    w->kind = GPUPORT_WORK_CU_WRITE;
    w->dst = (void *)(uintptr_t)cs->sem_d;
    w->value = cs->signals_sent;
    return GPUPORT_TRANSPORT_QUEUE;
}

/* Both of a channel's regions are GPU memory (cipc_region_ok), so a get is
 * always a copy between GPU memory; adds are not carried. */
static int cipc_rma_ok(const gpuport_tl_chan_t *ch, uint32_t op, char *why, size_t len)
{
    (void)ch;
    if (op == GPUPORT_OP_GET)
        return 1;
    snprintf(why, len, "adding into GPU memory needs the GPU's own atomics; the proxy makes no "
             "CUDA call and a reduction kernel in the flusher's context would time-slice with "
             "the application's kernels: use a memory channel (gpuport_memory_atomic_add / "
             "gpuport_memory_accumulate) between these ranks");
    return 0;
}

/* get: cipc_put reversed, from the peer's memory (mapped in the flusher's
 * context) into this side's source region; legacy device memory there
 * belongs to the application's context, which the copy then names. */
static int cipc_rma(gpuport_tl_chan_t *ch, const gpuport_op_desc_t *d, int behind_work,
                    gpuport_work_t *w)
{
    (void)behind_work; /* always queued, so always in order */
    if (d->op != GPUPORT_OP_GET)
        return GPUPORT_ERR_NOT_SUPPORTED; /* cipc_rma_ok refused it first */
    if (cipc_relay_on(ch))
        return cipc_relay_get(ch, d->dst_off, d->src_off, d->size);
    w->kind = GPUPORT_WORK_CU_COPY;
    w->dst = (char *)ch->src.ptr + d->src_off;
    w->src = (const char *)ch->dst.base + d->dst_off;
    w->size = d->size;
    w->flags = ch->src.kind == GPUPORT_REGION_DEVICE ? GPUPORT_WORK_DST_APP : 0;
    return GPUPORT_TRANSPORT_QUEUE;
}

static gpuport_status_t cipc_chan_prepare(gpuport_conn_t *conn, uint32_t id,
                                         const gpuport_region_t *src,
                                         const gpuport_region_t *dst, gpuport_channel_rec_t *mine)
{
    (void)dst;
    return cipc_relay_prepare(conn, id, src, mine);
}

static int cipc_has_room(gpuport_tl_chan_t *ch, uint32_t nops)
{
    (void)nops;
    return cipc_relay_has_room(ch);
}

const gpuport_transport_ops_t gpuport_transport_cuda_ipc = {
    .name = "cuda_ipc",
    .settings = &gpuport_cuda_ipc_settings,
    .pass_fds = 1,
    .describe = cipc_describe,
    .reachable = cipc_reachable,
    .auto_rank = cipc_auto_rank,
    .conn_open = cipc_conn_open,
    .conn_close = cipc_conn_close,
    .region_ok = cipc_region_ok,
    .chan_prepare = cipc_chan_prepare,
    .chan_connect = cipc_chan_connect,
    .chan_disconnect = cipc_chan_disconnect,
    .kernel_dst_ok = cipc_kernel_dst_ok,
    .chan_kernel_map = cipc_chan_kernel_map,
    .put = cipc_put,
    .put_value = cipc_put_value,
    .signal = cipc_signal,
    .rma = cipc_rma,
    .rma_ok = cipc_rma_ok,
    .has_room = cipc_has_room,
    .progress = cipc_relay_progress,
    .work_done = cipc_relay_work_done,
};
