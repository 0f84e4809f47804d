/* The services transports may call; see transport/tl_core.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_BOOTSTRAP
#include <stdio.h>
#include <string.h>

#include "bootstrap.h"
#include "internal.h"

int gpuport_tl_rank(gpuport_comm_t comm)
{
    return comm->rank;
}

int gpuport_tl_size(gpuport_comm_t comm)
{
    return comm->size;
}

uint32_t gpuport_tl_max_channels(gpuport_comm_t comm)
{
    return comm->config.max_channels;
}

const void *gpuport_tl_settings(gpuport_comm_t comm, int kind)
{
    if (kind <= 0 || kind >= GPUPORT_CONFIG_TL_KINDS)
        return NULL;
    return comm->config.tl + comm->config.tl_base[kind];
}

void gpuport_tl_record_init(int kind, const gpuport_tl_record_type_t *t, gpuport_rec_header_t *rec)
{
    gpuport_record_header_init(rec, GPUPORT_REC_TL_TYPE(kind, t->id), t->size);
}

gpuport_status_t gpuport_tl_record_check(int kind, const gpuport_tl_record_type_t *t,
                                         const gpuport_rec_header_t *hdr, int peer)
{
    return gpuport_record_check_named(hdr, GPUPORT_REC_TL_TYPE(kind, t->id), t->size, t->name,
                                      peer);
}

uint64_t gpuport_tl_timeout_ns(gpuport_comm_t comm)
{
    return comm->timeout_ns;
}

const gpuport_proc_rec_t *gpuport_tl_proc(gpuport_comm_t comm, int rank)
{
    return &comm->procs[rank];
}

int gpuport_tl_forced(const gpuport_tl_comm_t *tc)
{
    return tc->comm->config.transport == tc->kind;
}

int gpuport_tl_same_host(gpuport_comm_t comm, int rank)
{
    return comm->procs[rank].host_id == comm->procs[comm->rank].host_id;
}

int gpuport_tl_nearest_device(gpuport_comm_t comm, const char *const *names, int n, char *why,
                              size_t len)
{
    char bus[32];

    if (gpuport_gpu_bus_id(comm, bus, sizeof(bus)) != 0) {
        snprintf(why, len, "this communicator has no GPU");
        return -1;
    }
    if (!comm->topo) {
        snprintf(why, len, "the machine's topology could not be read");
        return -1;
    }
    return gpuport_topology_nearest_device(comm->topo, bus, names, n, why, len);
}

int gpuport_tl_has_gpu(gpuport_comm_t comm)
{
    return comm->gpu != NULL;
}

int gpuport_tl_gpu_bus_id(gpuport_comm_t comm, char *buf, size_t len)
{
    return gpuport_gpu_bus_id(comm, buf, len);
}

void *gpuport_tl_blob_set(void *blob, uint16_t version, uint16_t size)
{
    gpuport_tl_blob_t *b = blob;

    if (size > GPUPORT_TL_BLOB_MAX)
        return NULL;
    b->version = version;
    b->size = size;
    return b->data;
}

const void *gpuport_tl_blob(const gpuport_tl_comm_t *tc, int rank)
{
    gpuport_comm_t comm = tc->comm;
    const gpuport_tl_blob_t *mine = &comm->procs[comm->rank].tl[tc->kind];
    const gpuport_tl_blob_t *theirs = &comm->procs[rank].tl[tc->kind];

    if (theirs->version != mine->version || theirs->size != mine->size) {
        log_error("rank %d's %s record is version %u (%u bytes) and this rank's is version %u "
                  "(%u bytes): build every rank with the same gpuport",
                  rank, tc->ops->name, theirs->version, theirs->size, mine->version, mine->size);
        return NULL;
    }
    return theirs->data;
}

gpuport_status_t gpuport_tl_exchange(gpuport_comm_t comm, int peer, int tag, const void *mine,
                                     void *theirs, size_t bytes)
{
    char what[64];

    /* transports exchange only inside a channel's creation, with its peer */
    if (!comm->session || comm->session->peer != peer) {
        log_error("a transport exchanged with rank %d outside a channel's creation with it "
                  "(tag 0x%x)",
                  peer, tag);
        return GPUPORT_ERR_INVALID_ARG;
    }
    snprintf(what, sizeof(what), "its transport's set-up message (tag 0x%x)", tag);
    return gpuport_bs_exchange(comm->session, tag, mine, theirs, bytes, what);
}

gpuport_conn_t *gpuport_tl_conn_find(const gpuport_tl_comm_t *tc, int peer, int *other_p)
{
    gpuport_comm_t comm = tc->comm;
    gpuport_conn_t *conn;

    pthread_mutex_lock(&comm->lock);
    conn = comm->conns ? comm->conns[peer] : NULL;
    pthread_mutex_unlock(&comm->lock);
    if (other_p)
        *other_p = conn && conn->tl != tc;
    return conn && conn->tl == tc ? conn : NULL;
}

gpuport_tl_chan_t *gpuport_tl_chan_find(gpuport_conn_t *conn, uint32_t id)
{
    gpuport_comm_t comm = conn->comm;
    gpuport_pchan_t *ch;

    if (id >= comm->config.max_channels)
        return NULL;
    ch = &comm->pchans[id];
    return ch->tl.conn == conn ? &ch->tl : NULL;
}

void gpuport_tl_conn_each(gpuport_conn_t *conn, void (*fn)(gpuport_tl_chan_t *ch, void *arg),
                          void *arg)
{
    gpuport_comm_t comm = conn->comm;

    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (atomic_load_explicit(&ch->active, memory_order_acquire) && ch->tl.conn == conn)
            fn(&ch->tl, arg);
    }
}

static void fail_one(gpuport_tl_chan_t *ch, void *arg)
{
    int *count = arg;

    gpuport_tl_chan_fail(ch, (gpuport_status_t)count[1]);
    count[0]++;
}

int gpuport_tl_conn_fail(gpuport_conn_t *conn, gpuport_status_t status)
{
    int count[2] = {0, (int)status};

    atomic_store_explicit(&conn->broken, 1, memory_order_release);
    gpuport_tl_conn_each(conn, fail_one, count);
    return count[0];
}

int gpuport_tl_chan_fail(gpuport_tl_chan_t *ch, gpuport_status_t status)
{
    gpuport_pchan_t *pc = gpuport_pchan_of(ch);
    int32_t ok = GPUPORT_OK;
    int first = atomic_compare_exchange_strong(&pc->state->status, &ok, (int32_t)status);

    gpuport_tl_sem_fail(ch->comm, ch->id, status);
    return first;
}

void gpuport_tl_ctrl(gpuport_comm_t comm, void **base_p, size_t *size_p)
{
    *base_p = comm->ctrl;
    *size_p = comm->ctrl_size;
}

gpuport_sem_slot_t *gpuport_tl_sem(gpuport_comm_t comm, uint32_t id)
{
    return id < comm->config.max_channels ? &comm->ctrl[id] : NULL;
}

void gpuport_tl_sem_add(gpuport_comm_t comm, uint32_t id, uint64_t n)
{
    if (id < comm->config.max_channels)
        atomic_fetch_add_explicit(&comm->ctrl[id].value, n, memory_order_release);
}

void gpuport_tl_sem_fail(gpuport_comm_t comm, uint32_t id, gpuport_status_t status)
{
    int32_t ok = GPUPORT_OK;

    if (id < comm->config.max_channels)
        atomic_compare_exchange_strong(&comm->ctrl[id].peer_status, &ok, (int32_t)status);
}

int gpuport_tl_flusher_room(gpuport_comm_t comm, uint32_t n)
{
    return gpuport_flusher_has_room(&comm->proxy.flusher, n);
}

gpuport_status_t gpuport_tl_work_execute(const gpuport_work_t *w)
{
    return gpuport_work_execute(w);
}

void gpuport_tl_keep_awake(gpuport_comm_t comm, uint64_t until_ns)
{
    if (until_ns > comm->proxy.awake_until_ns)
        comm->proxy.awake_until_ns = until_ns;
}

int gpuport_tl_stopping(gpuport_comm_t comm)
{
    return atomic_load_explicit(&comm->proxy.stop, memory_order_acquire);
}

gpuport_status_t gpuport_tl_gpu_ctx_push(gpuport_comm_t comm)
{
    return gpuport_gpu_ctx_push(comm);
}

void gpuport_tl_gpu_ctx_pop(void)
{
    gpuport_gpu_ctx_pop();
}

gpuport_status_t gpuport_tl_stage_alloc(gpuport_comm_t comm, size_t size, void **p)
{
    return gpuport_gpu_stage_alloc(comm, size, p);
}

void gpuport_tl_stage_free(gpuport_comm_t comm, void *p, size_t size)
{
    gpuport_gpu_stage_free(comm, p, size);
}

gpuport_status_t gpuport_tl_gpu_dmabuf(gpuport_comm_t comm, uint64_t start, uint64_t len,
                                       int *fd_p, char *why, size_t why_len)
{
    return gpuport_gpu_dmabuf(comm, start, len, fd_p, why, why_len);
}

/* ---- completions: the proxy's bookkeeping (proxy_flush.c) ---- */

void gpuport_tl_chan_complete(gpuport_tl_chan_t *ch, gpuport_status_t status)
{
    gpuport_proxy_chan_complete(gpuport_pchan_of(ch), status);
}

void gpuport_tl_inline_complete(gpuport_tl_chan_t *ch, gpuport_status_t status)
{
    gpuport_proxy_inline_complete(gpuport_pchan_of(ch), status);
}

int gpuport_tl_post(gpuport_conn_t *conn, const gpuport_work_t *w)
{
    return gpuport_proxy_post_conn_work(conn->comm, conn->pindex, w);
}
