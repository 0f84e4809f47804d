/* The same-host transports' shared base; see sm.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_SHM)
#include "transport/sm/sm.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The range a peer named must lie inside its file: a mapping past the end
 * of a memfd maps, and the first store there is a SIGBUS. */
static gpuport_status_t map_fd(int fd, const char *what, uint64_t offset, uint64_t len,
                               void **addr_p, void **map_p, size_t *map_len_p)
{
    long page = sysconf(_SC_PAGESIZE);
    uint64_t start = offset & ~(uint64_t)(page - 1);
    size_t map_len;
    struct stat st;
    void *map;

    if (fstat(fd, &st) != 0) {
        log_error("fstat(%s) failed: %s", what, strerror(errno));
        return GPUPORT_ERR_TRANSPORT;
    }
    if (S_ISREG(st.st_mode) &&
        (len > (uint64_t)st.st_size || offset > (uint64_t)st.st_size - len)) {
        log_error("%s: %llu bytes at offset %llu named, beyond its %llu bytes; not mapped",
                  what, (unsigned long long)len, (unsigned long long)offset,
                  (unsigned long long)st.st_size);
        return GPUPORT_ERR_PEER;
    }
    if (len > SIZE_MAX - page) {
        log_error("%s: %llu bytes named, more than this process can map", what,
                  (unsigned long long)len);
        return GPUPORT_ERR_PEER;
    }
    map_len = (size_t)(offset - start + len);
    map = mmap(NULL, map_len ? map_len : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    if (map == MAP_FAILED) {
        log_error("mmap(%s, %zu bytes at offset %llu) failed: %s", what, map_len,
                  (unsigned long long)start, strerror(errno));
        return GPUPORT_ERR_TRANSPORT;
    }
    *addr_p = (char *)map + (offset - start);
    *map_p = map;
    *map_len_p = map_len ? map_len : 1;
    return GPUPORT_OK;
}

gpuport_status_t sm_map_remote_fd(int peer, int pid, int fd, uint64_t offset, uint64_t len,
                                  void **addr_p, void **map_p, size_t *map_len_p)
{
    char path[64], what[112];
    gpuport_status_t st;
    int local;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    local = open(path, O_RDWR | O_CLOEXEC);
    if (local < 0) {
        log_error("open(%s) failed: %s (a same-host peer's shared memory must be reachable "
                  "through /proc; ranks need the same user and pid namespace)",
                  path, strerror(errno));
        return errno == ENOENT ? GPUPORT_ERR_PEER : GPUPORT_ERR_TRANSPORT;
    }
    snprintf(what, sizeof(what), "rank %d's %s", peer, path);
    st = map_fd(local, what, offset, len, addr_p, map_p, map_len_p);
    close(local);
    return st;
}

gpuport_status_t sm_map_piece(const gpuport_fdpiece_t *piece, int peer, void **addr_p,
                              void **map_p, size_t *map_len_p)
{
    char what[64];

    snprintf(what, sizeof(what), "rank %d's shared memory", peer);
    return map_fd(piece->fd, what, piece->offset, piece->size, addr_p, map_p, map_len_p);
}

int sm_region_fits(const gpuport_region_rec_t *r, uint64_t total, int peer)
{
    if (r->fd_offset <= total && r->size <= total - r->fd_offset)
        return 1;
    log_error("rank %d's region record names %llu bytes (size) at offset %llu (fd_offset) of "
              "the %llu bytes of its memory imported here; refused",
              peer, (unsigned long long)r->size, (unsigned long long)r->fd_offset,
              (unsigned long long)total);
    return 0;
}

int sm_reachable(gpuport_comm_t comm, int peer, char *why, size_t len)
{
    const gpuport_proc_rec_t *me = gpuport_tl_proc(comm, gpuport_tl_rank(comm));
    const gpuport_proc_rec_t *p = gpuport_tl_proc(comm, peer);

    if (!gpuport_tl_same_host(comm, peer)) {
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

gpuport_status_t sm_ctrl_map(gpuport_comm_t comm, int peer, sm_ctrl_t *c)
{
    const gpuport_proc_rec_t *p = gpuport_tl_proc(comm, peer);
    void *addr;
    gpuport_status_t st;

    memset(c, 0, sizeof(*c));
    /* its slots must lie in the segment (sm_ctrl_slot trusts max_channels) */
    if ((uint64_t)p->max_channels * sizeof(gpuport_sem_slot_t) > p->ctrl_size) {
        log_error("rank %d's rank record names %u channels (max_channels), whose semaphore "
                  "slots need %llu bytes, and a control segment of %llu bytes (ctrl_size); "
                  "not mapped",
                  peer, p->max_channels,
                  (unsigned long long)p->max_channels * sizeof(gpuport_sem_slot_t),
                  (unsigned long long)p->ctrl_size);
        return GPUPORT_ERR_PEER;
    }
    st = sm_map_remote_fd(peer, p->pid, p->ctrl_fd, 0, p->ctrl_size, &addr, &c->map, &c->map_len);
    if (st)
        return st;
    c->slots = addr;
    c->nslots = p->max_channels;
    return GPUPORT_OK;
}

void sm_ctrl_unmap(sm_ctrl_t *c)
{
    if (c->map)
        munmap(c->map, c->map_len);
    memset(c, 0, sizeof(*c));
}

gpuport_sem_slot_t *sm_ctrl_slot(const sm_ctrl_t *c, int peer, uint32_t id)
{
    if (id >= c->nslots) {
        log_error("rank %d named channel id %u, beyond its %u semaphore slots", peer, id,
                  c->nslots);
        return NULL;
    }
    return &c->slots[id];
}
