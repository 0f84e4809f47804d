/*
 * The ib transport's memory registrations; see ib_priv.h. Host memory goes
 * through ibv_reg_mr. GPU memory through dmabuf where both sides have it
 * (cuMemGetHandleForAddressRange, ibv_reg_dmabuf_mr), else ibv_reg_mr on
 * the device pointer when a peer-memory module (nvidia_peermem) is loaded,
 * else it is refused: staging through pinned host memory is not
 * implemented.
 *
 * The CUDA driver's table (src/cuda/cudrv.c) does not have
 * cuMemGetHandleForAddressRange, and the transport must not include
 * cuda.h, so the entry is resolved here with dlsym on the libcuda.so.1
 * that the core has already loaded (RTLD_NOLOAD: a process without it has
 * no GPU memory to register), by the exact name cuda.h declares (no _v2
 * variant exists), with the signature of cuda.h 11.7..13:
 *   CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr,
 *            size_t size, CUmemRangeHandleType handleType,
 *            unsigned long long flags);
 * CUresult and the enum are ints, CUdeviceptr an unsigned long long.
 */
#include "transport/ib/ib_priv.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_config.h"

#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1 /* cuda.h's value */

typedef int (*cu_get_handle_fn)(void *handle, unsigned long long dptr, size_t size,
                                int handle_type, unsigned long long flags);
typedef int (*cu_error_string_fn)(int rc, const char **text);

struct ib_mr {
    struct ib_mr *next;
    uint64_t addr, len;
    int refs;
    ib_mr_path_t path;
    struct ibv_mr *mr;
};

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static cu_get_handle_fn cu_get_handle;
static cu_error_string_fn cu_error_string;
static char cu_why[128];

static void cu_resolve(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    if (!lib) {
        snprintf(cu_why, sizeof(cu_why), "the CUDA driver is not loaded in this process");
        return;
    }
    /* the handle is kept: the core never unloads the driver either */
    cu_get_handle = (cu_get_handle_fn)dlsym(lib, "cuMemGetHandleForAddressRange");
    cu_error_string = (cu_error_string_fn)dlsym(lib, "cuGetErrorString");
    if (!cu_get_handle)
        snprintf(cu_why, sizeof(cu_why), "the CUDA driver has no cuMemGetHandleForAddressRange "
                 "(it needs CUDA 11.7 or later)");
}

/* A peer-memory module lets ibv_reg_mr pin GPU memory. */
static int peermem_loaded(void)
{
    return access("/sys/module/nvidia_peermem", F_OK) == 0 ||
           access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0;
}

/* No IBV_ACCESS_RELAXED_ORDERING: a signal must not become visible at the
 * peer before the data written ahead of it, and relaxed PCIe ordering
 * would allow exactly that. */
#define DATA_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static struct ibv_mr *reg_dmabuf(ib_comm_t *ic, const struct gpuport_mem *mem)
{
#if GPUPORT_HAVE_IBV_DMABUF
    uint64_t addr = (uint64_t)(uintptr_t)mem->ptr, start, len, off;
    struct ibv_mr *mr;
    const char *text = NULL;
    int fd = -1, rc, err;

    ib_dmabuf_range(addr, mem->size, (uint64_t)sysconf(_SC_PAGESIZE), &start, &len, &off);
    rc = cu_get_handle(&fd, start, (size_t)len, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (rc != 0 || fd < 0) {
        if (cu_error_string)
            cu_error_string(rc, &text);
        log_warn("ib: cuMemGetHandleForAddressRange(0x%llx, %llu bytes, DMA_BUF_FD) failed: %s "
                 "(CUresult %d) for GPU memory %p + %llu bytes",
                 (unsigned long long)start, (unsigned long long)len, text ? text : "?", rc,
                 mem->ptr, (unsigned long long)mem->size);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    errno = 0;
    mr = IBV(ibv_reg_dmabuf_mr)(ic->pd, off, mem->size, addr, fd, DATA_ACCESS);
    err = ib_err(0);
    /* the registration holds its own reference to the buffer */
    close(fd);
    if (!mr)
        log_warn("ib: ibv_reg_dmabuf_mr failed: %s (GPU memory %p + %llu bytes, dmabuf offset "
                 "%llu, device %s)",
                 strerror(err), mem->ptr, (unsigned long long)mem->size,
                 (unsigned long long)off, ic->dev->name);
    return mr;
#else
    (void)ic;
    (void)mem;
    return NULL;
#endif
}

static gpuport_status_t reg(ib_comm_t *ic, const struct gpuport_mem *mem, ib_mr_t *m, char *why,
                            size_t len)
{
    ib_mr_caps_t caps;
    char how[320], what[200];
    int device = mem->rec.kind == GPUPORT_REGION_DEVICE;

    memset(&caps, 0, sizeof(caps));
    caps.device = device;
    if (device) {
        pthread_once(&cu_once, cu_resolve);
        caps.ibv_dmabuf = ib_verbs_have_dmabuf();
        caps.cu_dmabuf = cu_get_handle != NULL;
        caps.cu_why = cu_why;
        caps.peermem = peermem_loaded();
    }
    m->path = ib_mr_path_choose(&caps, how, sizeof(how));
    if (m->path == IB_MR_DMABUF) {
        m->mr = reg_dmabuf(ic, mem);
        if (!m->mr) {
            caps.dmabuf_failed = 1;
            m->path = ib_mr_path_choose(&caps, how, sizeof(how));
        }
    }
    if (m->path == IB_MR_NONE) {
        log_error("ib: %s (GPU memory %p, %llu bytes)", how, mem->ptr,
                  (unsigned long long)mem->size);
        snprintf(why, len, "ib: %s", how);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (!m->mr) {
        errno = 0;
        m->mr = IBV(ibv_reg_mr)(ic->pd, mem->ptr, mem->size, DATA_ACCESS);
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
                "ib: registered %p, %llu bytes: %s (lkey 0x%x, rkey 0x%x)", mem->ptr,
                (unsigned long long)mem->size, how, m->mr->lkey, m->mr->rkey);
    return GPUPORT_OK;
}

gpuport_status_t ib_mr_get(ib_comm_t *ic, const struct gpuport_mem *mem, ib_mr_t **mr_p,
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
        log_warn("ib: ibv_dereg_mr(%p, %llu bytes) failed: %s", (void *)(uintptr_t)m->addr,
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
        memset(ic->chans, 0, ic->comm->config.max_channels * sizeof(*ic->chans));
    while (ic->mrs) {
        ib_mr_t *m = ic->mrs;
        ic->mrs = m->next;
        mr_free(m);
    }
    pthread_mutex_unlock(&ic->lock);
}
