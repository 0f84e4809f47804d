/*
 * shm transport: ranks on one host, host memory. The proxy (or, for long
 * copies, the flusher) writes straight into the peer's memory: through a
 * shared mapping when the peer's region came from gpuport_mem_alloc, through
 * process_vm_writev (cross-memory attach) when it is private memory such as
 * malloc's. Signals are atomic increments in the peer's control segment;
 * put_value is one 8-byte store (or an 8-byte process_vm_writev). get copies
 * the other way (process_vm_readv from private memory); atomic_add and
 * accumulate add atomically through the shared mapping, so the peer's
 * destination must be gpuport_mem_alloc memory for them.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_SHM)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/sm/sm.h"

/* GPUPORT_SHM_ASYNC_MIN: puts this large go to the flusher */
typedef struct shm_settings {
    uint64_t async_min;
} shm_settings_t;

static const gpuport_config_var_t shm_rows[] = {
    {"GPUPORT_SHM_ASYNC_MIN", "256k", GPUPORT_CFG_UINT,
     GPUPORT_CFG_FIELD(shm_settings_t, async_min), 0, (1ull << 52), NULL,
     "shm puts of at least this many bytes are copied by the flusher thread, not the proxy", NULL},
};

/* compiled in every build, as every transport's settings (config_var.h) */
const gpuport_settings_table_t gpuport_shm_settings = {
    shm_rows, sizeof(shm_rows) / sizeof(shm_rows[0]), sizeof(shm_settings_t)};

typedef struct shm_conn {
    sm_ctrl_t ctrl; /* the peer's control segment */
} shm_conn_t;

static int peer_pid(const gpuport_tl_chan_t *ch)
{
    return gpuport_tl_proc(ch->comm, ch->peer)->pid;
}

static int shm_reachable(gpuport_tl_comm_t *tc, int peer, char *why, size_t len)
{
    return sm_reachable(tc->comm, peer, why, len);
}

/* GPU memory goes to cuda_ipc; shm is for host memory, on one host */
static int shm_auto_rank(int device_regions)
{
    return device_regions ? 0 : 20;
}

static void shm_describe(const void *settings, char *buf, size_t len)
{
    (void)settings;
    snprintf(buf, len, "available: ranks on one host, host memory (shared mapping or cross-memory "
             "attach)");
}

static gpuport_status_t shm_conn_open(gpuport_conn_t *conn)
{
    shm_conn_t *sc = calloc(1, sizeof(*sc));
    gpuport_status_t status;

    if (!sc)
        return GPUPORT_ERR_NO_MEMORY;
    status = sm_ctrl_map(conn->comm, conn->peer, &sc->ctrl);
    if (status) {
        free(sc);
        return status;
    }
    conn->priv = sc;
    return GPUPORT_OK;
}

static void shm_conn_close(gpuport_conn_t *conn)
{
    shm_conn_t *sc = conn->priv;

    if (!sc)
        return;
    sm_ctrl_unmap(&sc->ctrl);
    free(sc);
    conn->priv = NULL;
}

/* Host memory of every kind: private (by CMA), shared (mapped), pinned by
 * CUDA (host memory to shm, reached like private memory). */
static int shm_region_ok(const gpuport_region_t *r, int as_dst, char *why, size_t len)
{
    (void)as_dst;
    if (!gpuport_region_is_device(r->kind))
        return 1;
    snprintf(why, len, "shm moves host memory, and this is GPU memory; use GPU memory at both "
             "ends (cuda_ipc) or host memory at both ends");
    return 0;
}

static gpuport_status_t shm_chan_connect(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer)
{
    shm_conn_t *sc = ch->conn->priv;
    const gpuport_region_rec_t *r = &peer->dst;
    gpuport_sem_slot_t *slot = sm_ctrl_slot(&sc->ctrl, ch->peer, peer->channel_id);

    if (!slot)
        return GPUPORT_ERR_PEER;
    /* this side's regions passed shm_region_ok; the peer's destination is
     * checked by the peer, and here again as it describes it */
    if (gpuport_region_is_device((int)r->kind)) {
        char why[200];
        const gpuport_region_t peer_dst = {.kind = (int)r->kind};
        shm_region_ok(&peer_dst, 1, why, sizeof(why));
        log_error("channel to rank %d: the peer's destination: %s", ch->peer, why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    ch->remote_slot = slot;
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = *r;
    switch (r->kind) {
    case GPUPORT_REGION_NONE:
        return GPUPORT_OK;
    case GPUPORT_REGION_HOST_SHARED:
        if (ch->dst_npieces != 1 || ch->dst_pieces[0].size != r->size) {
            log_error("rank %d described its shared destination with %u descriptors; one for "
                      "the region's %llu bytes was expected",
                      ch->peer, ch->dst_npieces, (unsigned long long)r->size);
            return GPUPORT_ERR_PEER;
        }
        return sm_map_piece(&ch->dst_pieces[0], ch->peer, &ch->dst.base, &ch->dst.map_base,
                            &ch->dst.map_len);
    case GPUPORT_REGION_HOST:
        if (peer_pid(ch) == getpid()) {
            ch->dst.base = (void *)(uintptr_t)r->addr;
            return GPUPORT_OK;
        }
        if (r->size > 0) {
            /* Probe now so that a missing permission fails channel creation,
             * not the first put. */
            char byte;
            struct iovec l = {&byte, 1}, rm = {(void *)(uintptr_t)r->addr, 1};
            if (process_vm_readv(peer_pid(ch), &l, 1, &rm, 1, 0) != 1) {
                log_error("cannot reach rank %d's private memory by cross-memory attach: "
                          "process_vm_readv(pid %d) failed: %s; allow ptrace between the ranks "
                          "(kernel.yama.ptrace_scope <= 1) or allocate the destination with "
                          "gpuport_mem_alloc",
                          ch->peer, peer_pid(ch), strerror(errno));
                return GPUPORT_ERR_TRANSPORT;
            }
        }
        return GPUPORT_OK;
    }
    log_error("rank %d described its destination region with unknown kind %u", ch->peer, r->kind);
    return GPUPORT_ERR_PEER;
}

static void shm_chan_disconnect(gpuport_tl_chan_t *ch)
{
    if (ch->dst.map_base)
        munmap(ch->dst.map_base, ch->dst.map_len);
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->remote_slot = NULL;
}

static _Atomic uint64_t *remote_sem(const gpuport_tl_chan_t *ch)
{
    const shm_conn_t *sc = ch->conn->priv;
    return &sc->ctrl.slots[ch->peer_id].value;
}

static int shm_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                   int behind_work, gpuport_work_t *w)
{
    const char *src = (const char *)ch->src.ptr + src_off;
    const shm_settings_t *set = gpuport_tl_settings(ch->comm, GPUPORT_TL_KIND_SHM);

    w->src = src;
    w->size = size;
    if (ch->dst.base) {
        w->kind = GPUPORT_WORK_MEMCPY;
        w->dst = (char *)ch->dst.base + dst_off;
    } else {
        w->kind = GPUPORT_WORK_CMA_WRITE;
        w->dst = (void *)(uintptr_t)(ch->dst.rec.addr + dst_off);
        w->pid = peer_pid(ch);
    }
    if (behind_work || size >= set->async_min)
        return GPUPORT_TRANSPORT_QUEUE;
    return (int)gpuport_tl_work_execute(w);
}

/* One 8-byte store into a mapped destination (release: a reader that sees
 * the value sees what the channel put before it), or 8 bytes by
 * process_vm_writev into private memory; at the flusher when behind work. */
static int shm_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value,
                         int behind_work, gpuport_work_t *w)
{
    w->value = value;
    w->size = 8;
    if (ch->dst.base) {
        w->kind = GPUPORT_WORK_STORE64;
        w->dst = (char *)ch->dst.base + dst_off;
    } else {
        w->kind = GPUPORT_WORK_CMA_WRITE;
        w->flags = GPUPORT_WORK_SRC_VALUE;
        w->dst = (void *)(uintptr_t)(ch->dst.rec.addr + dst_off);
        w->pid = peer_pid(ch);
    }
    if (behind_work)
        return GPUPORT_TRANSPORT_QUEUE;
    return (int)gpuport_tl_work_execute(w);
}

static int shm_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *w)
{
    if (behind_work) {
        w->kind = GPUPORT_WORK_SEM_ADD;
        w->sem = remote_sem(ch);
        w->value = n;
        return GPUPORT_TRANSPORT_QUEUE;
    }
    atomic_fetch_add_explicit(remote_sem(ch), n, memory_order_release);
    return GPUPORT_TRANSPORT_DONE;
}

/* Adds need the peer's memory mapped here (gpuport_mem_alloc memory, or a
 * rank's own): cross-memory attach reads and writes, it cannot add. */
static int shm_rma_ok(const gpuport_tl_chan_t *ch, uint32_t op, char *why, size_t len)
{
    if (op == GPUPORT_OP_GET || ch->dst.base)
        return 1;
    snprintf(why, len, "rank %d's destination is private memory (not from gpuport_mem_alloc), "
             "which shm reaches by cross-memory attach: that reads and writes but cannot add "
             "atomically; register memory from gpuport_mem_alloc as the destination",
             ch->peer);
    return 0;
}

/* get: a copy from the peer's mapping (or by process_vm_readv from its
 * private memory) into this side's source region; atomic_add and
 * accumulate: atomic adds through the mapping (accumulate.h). Inline when
 * short and not behind the channel's work, as puts are. */
static int shm_rma(gpuport_tl_chan_t *ch, const gpuport_op_desc_t *d, int behind_work,
                   gpuport_work_t *w)
{
    const shm_settings_t *set = gpuport_tl_settings(ch->comm, GPUPORT_TL_KIND_SHM);

    w->size = d->size;
    if (d->op == GPUPORT_OP_GET) {
        w->dst = (char *)ch->src.ptr + d->src_off;
        if (ch->dst.base) {
            w->kind = GPUPORT_WORK_MEMCPY;
            w->src = (const char *)ch->dst.base + d->dst_off;
        } else {
            w->kind = GPUPORT_WORK_CMA_READ;
            w->src = (const void *)(uintptr_t)(ch->dst.rec.addr + d->dst_off);
            w->pid = peer_pid(ch);
        }
    } else if (d->op == GPUPORT_OP_ATOMIC_ADD) {
        w->kind = GPUPORT_WORK_ADD64;
        w->dst = (char *)ch->dst.base + d->dst_off;
        w->value = d->value;
    } else {
        w->kind = GPUPORT_WORK_ACCUMULATE;
        w->dst = (char *)ch->dst.base + d->dst_off;
        w->src = (const char *)ch->src.ptr + d->src_off;
        w->value = d->op;
    }
    if (behind_work || d->size >= set->async_min)
        return GPUPORT_TRANSPORT_QUEUE;
    return (int)gpuport_tl_work_execute(w);
}

const gpuport_transport_ops_t gpuport_transport_shm = {
    .name = "shm",
    .settings = &gpuport_shm_settings,
    .pass_fds = 1,
    .host_inline = 1, /* puts below GPUPORT_SHM_ASYNC_MIN, values, signals */
    .describe = shm_describe,
    .reachable = shm_reachable,
    .auto_rank = shm_auto_rank,
    .conn_open = shm_conn_open,
    .conn_close = shm_conn_close,
    .region_ok = shm_region_ok,
    .chan_connect = shm_chan_connect,
    .chan_disconnect = shm_chan_disconnect,
    .put = shm_put,
    .put_value = shm_put_value,
    .signal = shm_signal,
    .rma = shm_rma,
    .rma_ok = shm_rma_ok,
};
