/* shm transport; see shm.h. */
#include "transport/shm/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

typedef struct shm_conn {
    gpuport_sem_slot_t *peer_ctrl; /* the peer's control segment */
    void *map;
    size_t map_len;
    uint32_t peer_slots;
} shm_conn_t;

gpuport_status_t shm_map_remote_fd(int pid, int fd, uint64_t offset, uint64_t len, void **addr_p,
                                   void **map_p, size_t *map_len_p)
{
    char path[64];
    long page = sysconf(_SC_PAGESIZE);
    uint64_t start = offset & ~(uint64_t)(page - 1);
    size_t map_len = (size_t)(offset - start + len);
    void *map;
    int local;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    local = open(path, O_RDWR | O_CLOEXEC);
    if (local < 0) {
        log_error("open(%s) failed: %s (a same-host peer's shared memory must be reachable "
                  "through /proc; ranks need the same user and pid namespace)",
                  path, strerror(errno));
        return errno == ENOENT ? GPUPORT_ERR_PEER : GPUPORT_ERR_TRANSPORT;
    }
    map = mmap(NULL, map_len ? map_len : 1, PROT_READ | PROT_WRITE, MAP_SHARED, local,
               (off_t)start);
    close(local);
    if (map == MAP_FAILED) {
        log_error("mmap(%s, %zu bytes at offset %llu) failed: %s", path, map_len,
                  (unsigned long long)start, strerror(errno));
        return GPUPORT_ERR_TRANSPORT;
    }
    *addr_p = (char *)map + (offset - start);
    *map_p = map;
    *map_len_p = map_len ? map_len : 1;
    return GPUPORT_OK;
}

static int shm_reachable(gpuport_comm_t comm, int peer, char *why, size_t len)
{
    const gpuport_proc_rec_t *me = &comm->procs[comm->rank], *p = &comm->procs[peer];

    if (me->host_id != p->host_id) {
        snprintf(why, len, "rank %d is on another host (%s, host id %016llx; this is %s, %016llx)",
                 peer, p->hostname, (unsigned long long)p->host_id, me->hostname,
                 (unsigned long long)me->host_id);
        return 0;
    }
    if (me->uid != p->uid) {
        snprintf(why, len, "rank %d runs as uid %u and this rank as uid %u", peer, p->uid, me->uid);
        return 0;
    }
    return 1;
}

static gpuport_status_t shm_conn_open(gpuport_conn_t *conn)
{
    const gpuport_proc_rec_t *p = &conn->comm->procs[conn->peer];
    shm_conn_t *sc = calloc(1, sizeof(*sc));
    gpuport_status_t status;
    void *addr;

    if (!sc)
        return GPUPORT_ERR_NO_MEMORY;
    status = shm_map_remote_fd(p->pid, p->ctrl_fd, 0, p->ctrl_size, &addr, &sc->map, &sc->map_len);
    if (status) {
        free(sc);
        return status;
    }
    sc->peer_ctrl = addr;
    sc->peer_slots = p->max_channels;
    conn->priv = sc;
    return GPUPORT_OK;
}

static void shm_conn_close(gpuport_conn_t *conn)
{
    shm_conn_t *sc = conn->priv;

    if (!sc)
        return;
    munmap(sc->map, sc->map_len);
    free(sc);
    conn->priv = NULL;
}

static gpuport_status_t shm_chan_connect(gpuport_pchan_t *ch, const gpuport_channel_rec_t *peer)
{
    shm_conn_t *sc = ch->conn->priv;
    const gpuport_region_rec_t *r = &peer->dst;
    int peer_pid = ch->comm->procs[ch->conn->peer].pid;

    if (peer->channel_id >= sc->peer_slots) {
        log_error("rank %d named channel id %u, beyond its %u semaphore slots", ch->conn->peer,
                  peer->channel_id, sc->peer_slots);
        return GPUPORT_ERR_PEER;
    }
    if (r->kind >= GPUPORT_REGION_DEVICE || ch->src_kind >= GPUPORT_REGION_DEVICE) {
        log_error("channel to rank %d: shm moves host memory, but the %s is GPU memory; use GPU "
                  "memory at both ends (cuda_ipc) or host memory at both ends",
                  ch->conn->peer,
                  r->kind >= GPUPORT_REGION_DEVICE ? "peer's destination" : "local source");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    ch->remote_sem = &sc->peer_ctrl[peer->channel_id].value;
    ch->remote_status = &sc->peer_ctrl[peer->channel_id].peer_status;
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = *r;
    switch (r->kind) {
    case GPUPORT_REGION_NONE:
        return GPUPORT_OK;
    case GPUPORT_REGION_HOST_SHARED:
        return shm_map_remote_fd(peer_pid, r->fd, r->fd_offset, r->size, &ch->dst.base,
                                 &ch->dst.map_base, &ch->dst.map_len);
    case GPUPORT_REGION_HOST:
        if (peer_pid == getpid()) {
            ch->dst.base = (void *)(uintptr_t)r->addr;
            return GPUPORT_OK;
        }
        if (r->size > 0) {
            /* Probe now so that a missing permission fails channel creation,
             * not the first put. */
            char byte;
            struct iovec l = {&byte, 1}, rm = {(void *)(uintptr_t)r->addr, 1};
            if (process_vm_readv(peer_pid, &l, 1, &rm, 1, 0) != 1) {
                log_error("cannot reach rank %d's private memory by cross-memory attach: "
                          "process_vm_readv(pid %d) failed: %s; allow ptrace between the ranks "
                          "(kernel.yama.ptrace_scope <= 1) or allocate the destination with "
                          "gpuport_mem_alloc",
                          ch->conn->peer, peer_pid, strerror(errno));
                return GPUPORT_ERR_TRANSPORT;
            }
        }
        return GPUPORT_OK;
    }
    log_error("rank %d described its destination region with unknown kind %u", ch->conn->peer,
              r->kind);
    return GPUPORT_ERR_PEER;
}

static void shm_chan_disconnect(gpuport_pchan_t *ch)
{
    if (ch->dst.map_base)
        munmap(ch->dst.map_base, ch->dst.map_len);
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->remote_sem = NULL;
    ch->remote_status = NULL;
}

static int shm_put(gpuport_pchan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                   int behind_work, gpuport_work_t *w)
{
    const char *src = (const char *)ch->src_base + src_off;

    w->src = src;
    w->size = size;
    if (ch->dst.base) {
        w->kind = GPUPORT_WORK_MEMCPY;
        w->dst = (char *)ch->dst.base + dst_off;
    } else {
        w->kind = GPUPORT_WORK_CMA_WRITE;
        w->dst = (void *)(uintptr_t)(ch->dst.rec.addr + dst_off);
        w->pid = ch->peer_pid;
    }
    if (behind_work || size >= ch->comm->config.shm_async_min)
        return GPUPORT_TRANSPORT_QUEUE;
    return (int)gpuport_work_execute(w);
}

static int shm_signal(gpuport_pchan_t *ch, int behind_work, gpuport_work_t *w)
{
    if (behind_work) {
        w->kind = GPUPORT_WORK_SEM_ADD;
        w->sem = ch->remote_sem;
        w->value = 1;
        return GPUPORT_TRANSPORT_QUEUE;
    }
    atomic_fetch_add_explicit(ch->remote_sem, 1, memory_order_release);
    return GPUPORT_TRANSPORT_DONE;
}

const gpuport_transport_ops_t gpuport_transport_shm = {
    .name = "shm",
    .kind = GPUPORT_TRANSPORT_SHM,
    .reachable = shm_reachable,
    .conn_open = shm_conn_open,
    .conn_close = shm_conn_close,
    .chan_connect = shm_chan_connect,
    .chan_disconnect = shm_chan_disconnect,
    .put = shm_put,
    .signal = shm_signal,
};
