/*
 * cuda_ipc transport: ranks on one host, GPU memory at both ends. The peer's
 * destination is a CUDA IPC handle opened in the flusher's private context;
 * puts are copy-engine copies on the flusher's stream and signals are
 * cuStreamWriteValue64 of the channel's new signal count into the peer's
 * semaphore, queued behind the copies on the same stream. Semaphores live in
 * the peer's host control segment (shared memory), registered in our
 * private context, so the peer's kernels and host threads read them alike.
 * The proxy only describes the work; the flusher does every CUDA call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/cudrv.h"
#include "cuda/fcuda.h"
#include "transport/shm/shm.h"

typedef struct cipc_conn {
    gpuport_sem_slot_t *peer_ctrl; /* mapped here */
    CUdeviceptr peer_ctrl_d;       /* the same, in the private context */
    void *map;
    size_t map_len;
    int registered;
    uint32_t peer_slots;
} cipc_conn_t;

static gpuport_flusher_t *flusher_of(gpuport_comm_t comm)
{
    return &comm->proxy.flusher;
}

static int cipc_reachable(gpuport_comm_t comm, int peer, char *why, size_t len)
{
    const gpuport_proc_rec_t *me = &comm->procs[comm->rank], *p = &comm->procs[peer];

    if (me->host_id != p->host_id) {
        snprintf(why, len, "rank %d is on another host (%s)", peer, p->hostname);
        return 0;
    }
    if (me->gpu < 0 || p->gpu < 0) {
        snprintf(why, len, "%s has no GPU in use (GPUPORT_GPU)", me->gpu < 0 ? "this rank" : "the peer");
        return 0;
    }
    if (me->uid != p->uid) {
        snprintf(why, len, "rank %d runs as another user", peer);
        return 0;
    }
    return 1;
}

static gpuport_status_t cipc_conn_open(gpuport_conn_t *conn)
{
    const gpuport_proc_rec_t *p = &conn->comm->procs[conn->peer];
    cipc_conn_t *cc = calloc(1, sizeof(*cc));
    gpuport_status_t st;
    void *addr;

    if (!cc)
        return GPUPORT_ERR_NO_MEMORY;
    st = shm_map_remote_fd(p->pid, p->ctrl_fd, 0, p->ctrl_size, &addr, &cc->map, &cc->map_len);
    if (st)
        goto err;
    cc->peer_ctrl = addr;
    cc->peer_slots = p->max_channels;
    st = gpuport_fcuda_ctx_push(flusher_of(conn->comm));
    if (st)
        goto err_unmap;
    st = CU_CALL(cuMemHostRegister, (cc->map, cc->map_len, CU_MEMHOSTREGISTER_PORTABLE |
                                                               CU_MEMHOSTREGISTER_DEVICEMAP));
    if (!st) {
        cc->registered = 1;
        st = CU_CALL(cuMemHostGetDevicePointer, (&cc->peer_ctrl_d, cc->peer_ctrl, 0));
    }
    gpuport_fcuda_ctx_pop();
    if (st)
        goto err_unmap;
    conn->priv = cc;
    return GPUPORT_OK;

err_unmap:
    if (cc->registered && gpuport_fcuda_ctx_push(flusher_of(conn->comm)) == GPUPORT_OK) {
        gpuport_cu.cuMemHostUnregister(cc->map);
        gpuport_fcuda_ctx_pop();
    }
    munmap(cc->map, cc->map_len);
err:
    free(cc);
    return st;
}

static void cipc_conn_close(gpuport_conn_t *conn)
{
    cipc_conn_t *cc = conn->priv;

    if (!cc)
        return;
    if (cc->registered && gpuport_fcuda_ctx_push(flusher_of(conn->comm)) == GPUPORT_OK) {
        gpuport_cu.cuMemHostUnregister(cc->map);
        gpuport_fcuda_ctx_pop();
    }
    munmap(cc->map, cc->map_len);
    free(cc);
    conn->priv = NULL;
}

static gpuport_status_t cipc_chan_connect(gpuport_pchan_t *ch, const gpuport_channel_rec_t *peer)
{
    cipc_conn_t *cc = ch->conn->priv;
    const gpuport_region_rec_t *r = &peer->dst;
    CUipcMemHandle handle;
    CUdeviceptr base;
    gpuport_status_t st;

    if (peer->channel_id >= cc->peer_slots) {
        log_error("rank %d named channel id %u, beyond its %u semaphore slots", ch->conn->peer,
                  peer->channel_id, cc->peer_slots);
        return GPUPORT_ERR_PEER;
    }
    if (r->kind == GPUPORT_REGION_DEVICE_VMM || ch->src_kind == GPUPORT_REGION_DEVICE_VMM) {
        log_error("channel to rank %d: the %s is GPU memory from gpuport_mem_alloc_device, which "
                  "CUDA IPC cannot export; cuda_ipc channels need cudaMalloc memory",
                  ch->conn->peer,
                  r->kind == GPUPORT_REGION_DEVICE_VMM ? "peer's destination" : "local source");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if ((r->kind != GPUPORT_REGION_DEVICE && r->kind != GPUPORT_REGION_NONE) ||
        (ch->src_kind != GPUPORT_REGION_DEVICE && ch->src_kind != GPUPORT_REGION_NONE)) {
        log_error("channel to rank %d: cuda_ipc moves GPU memory to GPU memory, but the %s is "
                  "host memory; use host memory at both ends (shm) or GPU memory at both ends",
                  ch->conn->peer,
                  r->kind != GPUPORT_REGION_DEVICE && r->kind != GPUPORT_REGION_NONE
                      ? "peer's destination"
                      : "local source");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    ch->remote_sem = &cc->peer_ctrl[peer->channel_id].value;
    ch->remote_status = &cc->peer_ctrl[peer->channel_id].peer_status;
    ch->remote_sem_dev = cc->peer_ctrl_d + peer->channel_id * sizeof(gpuport_sem_slot_t) +
                         offsetof(gpuport_sem_slot_t, value);
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = *r;
    if (r->kind == GPUPORT_REGION_NONE)
        return GPUPORT_OK;
    memcpy(&handle, r->ipc, sizeof(handle));
    st = gpuport_fcuda_ctx_push(flusher_of(ch->comm));
    if (st)
        return st;
    st = CU_CALL(cuIpcOpenMemHandle, (&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    gpuport_fcuda_ctx_pop();
    if (st) {
        log_error("cannot open rank %d's GPU memory (CUDA IPC) in this rank's flusher context: "
                  "are both GPUs peers (nvidia-smi topo -p2p r)?",
                  ch->conn->peer);
        return st;
    }
    ch->dst.map_base = (void *)(uintptr_t)base;
    ch->dst.base = (void *)(uintptr_t)(base + r->fd_offset);
    return GPUPORT_OK;
}

static void cipc_chan_disconnect(gpuport_pchan_t *ch)
{
    if (ch->dst.map_base && gpuport_fcuda_ctx_push(flusher_of(ch->comm)) == GPUPORT_OK) {
        gpuport_cu.cuIpcCloseMemHandle((CUdeviceptr)(uintptr_t)ch->dst.map_base);
        gpuport_fcuda_ctx_pop();
    }
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->remote_sem = NULL;
    ch->remote_status = NULL;
    ch->remote_sem_dev = 0;
}

static int cipc_put(gpuport_pchan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                    int behind_work, gpuport_work_t *w)
{
    (void)behind_work; /* always queued, so always in order */
    w->kind = GPUPORT_WORK_CU_COPY;
    w->dst = (char *)ch->dst.base + dst_off;
    w->src = (const char *)ch->src_base + src_off;
    w->size = size;
    w->aux = ch->comm->gpu_app_ctx;
    return GPUPORT_TRANSPORT_QUEUE;
}

static int cipc_signal(gpuport_pchan_t *ch, int behind_work, gpuport_work_t *w)
{
    (void)behind_work;
    w->kind = GPUPORT_WORK_CU_WRITE;
    w->dst = (void *)(uintptr_t)ch->remote_sem_dev;
    w->value = ++ch->signals_sent;
    return GPUPORT_TRANSPORT_QUEUE;
}

const gpuport_transport_ops_t gpuport_transport_cuda_ipc = {
    .name = "cuda_ipc",
    .kind = GPUPORT_TRANSPORT_CUDA_IPC,
    .reachable = cipc_reachable,
    .conn_open = cipc_conn_open,
    .conn_close = cipc_conn_close,
    .chan_connect = cipc_chan_connect,
    .chan_disconnect = cipc_chan_disconnect,
    .put = cipc_put,
    .signal = cipc_signal,
};
