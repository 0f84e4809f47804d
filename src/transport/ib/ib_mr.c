/*
 * The ib transport's memory registrations; see ib_priv.h. Host memory goes
 * through ibv_reg_mr. GPU memory through dmabuf where both sides have it
 * (the core's dma-buf export, gpuport_tl_gpu_dmabuf, and
 * ibv_reg_dmabuf_mr), else, for cudaMalloc memory only, ibv_reg_mr on the
 * device pointer when a peer-memory module (nvidia_peermem) is loaded; else
 * it is refused: staging through pinned host memory is not implemented.
 * VMM memory (gpuport_mem_alloc_device) registers only through dmabuf: a
 * peer-memory module pins memory by its cudaMalloc allocation, which VMM
 * memory does not have. The region's kind says which is which
 * (gpuport_region_t, classified once at registration).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB)
#include "transport/ib/ib_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_config.h"

struct ib_mr {
    struct ib_mr *next;
    uint64_t addr, len;
    int refs;
    ib_mr_path_t path;
    struct ibv_mr *mr;
};

/* A peer-memory module lets ibv_reg_mr pin GPU memory. */
static int peermem_loaded(void)
{
    return access("/sys/module/nvidia_peermem", F_OK) == 0 ||
           access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0;
}

/* No IBV_ACCESS_RELAXED_ORDERING: a signal must not become visible at the
 * peer before the data written ahead of it, and relaxed PCIe ordering
 * would allow exactly that.
 *
 * One registration serves every channel over a range, as source and as
 * destination, so every one may be written by the peer (puts), read by it
 * (its gets: REMOTE_READ) and written here by a get's responses
 * (LOCAL_WRITE). Host memory also takes the peer's adds (REMOTE_ATOMIC)
 * where the device has atomics (some providers refuse the flag otherwise);
 * GPU memory does not: ib refuses adds into it (ib_rma.c). */
static int data_access(const ib_comm_t *ic, int device)
{
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

    if (!device && ic->dev->atomic_cap != IBV_ATOMIC_NONE)
        access |= IBV_ACCESS_REMOTE_ATOMIC;
    return access;
}

/* The dma-buf of mem's pages, or -1 with cu_why (NOT_SUPPORTED: the driver
 * cannot export; else the export failed) */
static int dmabuf_fd(ib_comm_t *ic, const gpuport_region_t *mem, uint64_t *off_p,
                     gpuport_status_t *st_p, char *cu_why, size_t len)
{
    uint64_t start, range;
    int fd = -1;

    ib_dmabuf_range((uint64_t)(uintptr_t)mem->ptr, mem->size, (uint64_t)sysconf(_SC_PAGESIZE),
                    &start, &range, off_p);
    *st_p = gpuport_tl_gpu_dmabuf(ic->comm, start, range, &fd, cu_why, len);
    return *st_p ? -1 : fd;
}

static struct ibv_mr *reg_dmabuf(ib_comm_t *ic, const gpuport_region_t *mem, int fd, uint64_t off)
{
#if GPUPORT_HAVE_IBV_DMABUF
    uint64_t addr = (uint64_t)(uintptr_t)mem->ptr;
    struct ibv_mr *mr;
    int err;

    errno = 0;
    mr = IBV(ibv_reg_dmabuf_mr)(ic->pd, off, mem->size, addr, fd, data_access(ic, 1));
    err = ib_err(0);
    if (!mr)
        log_warn("ibv_reg_dmabuf_mr failed: %s (GPU memory %p + %llu bytes, dmabuf offset "
                 "%llu, device %s)",
                 strerror(err), mem->ptr, (unsigned long long)mem->size,
                 (unsigned long long)off, ic->dev->name);
    return mr;
#else
    (void)ic, (void)mem, (void)fd, (void)off;
    return NULL;
#endif
}

static gpuport_status_t reg(ib_comm_t *ic, const gpuport_region_t *mem, ib_mr_t *m, char *why,
                            size_t len)
{
    ib_mr_caps_t caps;
    char how[320], what[200], cu_why[200] = "";
    int device = gpuport_region_is_device(mem->kind), fd = -1;
    uint64_t off = 0;

    memset(&caps, 0, sizeof(caps));
    caps.device = device;
    if (device) {
        gpuport_status_t st = GPUPORT_OK;
        caps.ibv_dmabuf = ib_verbs_have_dmabuf();
        if (caps.ibv_dmabuf)
            fd = dmabuf_fd(ic, mem, &off, &st, cu_why, sizeof(cu_why));
        caps.cu_dmabuf = caps.ibv_dmabuf && st != GPUPORT_ERR_NOT_SUPPORTED;
        caps.dmabuf_failed = caps.cu_dmabuf && fd < 0;
        if (caps.dmabuf_failed)
            log_warn("%s for GPU memory %p + %llu bytes", cu_why, mem->ptr,
                     (unsigned long long)mem->size);
        caps.cu_why = cu_why;
        caps.peermem = mem->kind == GPUPORT_REGION_DEVICE && peermem_loaded();
    }
    m->path = ib_mr_path_choose(&caps, how, sizeof(how));
    if (m->path == IB_MR_DMABUF) {
        m->mr = reg_dmabuf(ic, mem, fd, off);
        if (!m->mr) {
            caps.dmabuf_failed = 1;
            m->path = ib_mr_path_choose(&caps, how, sizeof(how));
        }
    }
    /* the registration holds its own reference to the buffer */
    if (fd >= 0)
        close(fd);
    if (m->path == IB_MR_NONE) {
        log_error("%s (GPU memory %p, %llu bytes)", how, mem->ptr,
                  (unsigned long long)mem->size);
        snprintf(why, len, "ib: %s", how);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (!m->mr) {
        errno = 0;
        m->mr = IBV(ibv_reg_mr)(ic->pd, mem->ptr, mem->size, data_access(ic, device));
        if (!m->mr) {
            int err = ib_err(0);
            gpuport_status_t st;
            snprintf(what, sizeof(what), "%s %p, %llu bytes, on %s, %s",
                     device ? "GPU memory" : "host memory", mem->ptr,
                     (unsigned long long)mem->size, ic->dev->name, ib_mr_path_name(m->path));
            st = ib_status(err, "ibv_reg_mr", what);
            snprintf(why, len, "ib: ibv_reg_mr of %s failed: %s", what, strerror(err));
            return st;
        }
    }
    GPUPORT_LOG(device ? GPUPORT_LOG_INFO : GPUPORT_LOG_DEBUG,
                "registered %p, %llu bytes: %s (lkey 0x%x, rkey 0x%x)", mem->ptr,
                (unsigned long long)mem->size, how, m->mr->lkey, m->mr->rkey);
    return GPUPORT_OK;
}

gpuport_status_t ib_mr_get(ib_comm_t *ic, const gpuport_region_t *mem, ib_mr_t **mr_p,
                           char *why, size_t len)
{
    uint64_t addr = (uint64_t)(uintptr_t)mem->ptr;
    gpuport_status_t status;
    ib_mr_t *m;

    pthread_mutex_lock(&ic->lock);
    for (m = ic->mrs; m; m = m->next) {
        if (m->addr == addr && m->len == mem->size) {
            m->refs++;
            pthread_mutex_unlock(&ic->lock);
            *mr_p = m;
            return GPUPORT_OK;
        }
    }
    m = calloc(1, sizeof(*m));
    if (!m) {
        pthread_mutex_unlock(&ic->lock);
        snprintf(why, len, "ib: out of memory");
        return GPUPORT_ERR_NO_MEMORY;
    }
    m->addr = addr;
    m->len = mem->size;
    status = reg(ic, mem, m, why, len);
    if (status) {
        pthread_mutex_unlock(&ic->lock);
        free(m);
        return status;
    }
    m->refs = 1;
    m->next = ic->mrs;
    ic->mrs = m;
    pthread_mutex_unlock(&ic->lock);
    *mr_p = m;
    return GPUPORT_OK;
}

static void mr_free(ib_mr_t *m)
{
    int rc = IBV(ibv_dereg_mr)(m->mr);

    if (rc)
        log_warn("ibv_dereg_mr(%p, %llu bytes) failed: %s", (void *)(uintptr_t)m->addr,
                 (unsigned long long)m->len, strerror(ib_err(rc)));
    free(m);
}

/* ic->lock held */
static void mr_put_locked(ib_comm_t *ic, ib_mr_t *mr)
{
    ib_mr_t **pp;

    if (--mr->refs > 0)
        return;
    for (pp = &ic->mrs; *pp; pp = &(*pp)->next) {
        if (*pp == mr) {
            *pp = mr->next;
            break;
        }
    }
    mr_free(mr);
}

void ib_mr_put(ib_comm_t *ic, ib_mr_t *mr)
{
    pthread_mutex_lock(&ic->lock);
    mr_put_locked(ic, mr);
    pthread_mutex_unlock(&ic->lock);
}

uint32_t ib_mr_lkey(const ib_mr_t *mr)
{
    return mr->mr->lkey;
}

uint32_t ib_mr_rkey(const ib_mr_t *mr)
{
    return mr->mr->rkey;
}

void ib_chan_release(ib_comm_t *ic, ib_chan_t *cs)
{
    pthread_mutex_lock(&ic->lock);
    if (cs->src_mr)
        mr_put_locked(ic, cs->src_mr);
    if (cs->dst_mr)
        mr_put_locked(ic, cs->dst_mr);
    memset(cs, 0, sizeof(*cs));
    pthread_mutex_unlock(&ic->lock);
}

void ib_mr_release_all(ib_comm_t *ic)
{
    pthread_mutex_lock(&ic->lock);
    if (ic->chans)
        memset(ic->chans, 0, gpuport_tl_max_channels(ic->comm) * sizeof(*ic->chans));
    while (ic->mrs) {
        ib_mr_t *m = ic->mrs;
        ic->mrs = m->next;
        mr_free(m);
    }
    pthread_mutex_unlock(&ic->lock);
}
