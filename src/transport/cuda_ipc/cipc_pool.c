/*
 * A peer's stream-ordered pool memory, imported here. Each pool of the
 * peer is imported once per connection (cuMemPoolImportFromShareableHandle
 * of the descriptor the peer passed with its first channel over it; later
 * channels pass it again, and it is closed unused unless the pool's name
 * was reused: pointer_import) and made read-write for
 * this rank's GPU; each allocation is imported once
 * (cuMemPoolImportPointer of the export data in the region record) and
 * shared by every channel whose destination lies in it, freed when the
 * last of them goes. The mapping belongs to the process, like a VMM
 * import, so the flusher's context reaches it. Pools stay imported until
 * the connection closes. Application threads (channel creation and
 * destruction).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_CUDA_IPC)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/cuda_ipc/cipc.h"

/* The peer's pool `id` as imported here before, or NULL. */
static cipc_pool_t *pool_find(cipc_conn_t *cc, uint64_t id)
{
    for (cipc_pool_t *p = cc->pools; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

/* Imports the peer's pool `id` from the descriptor the channel carried. */
static gpuport_status_t pool_import(gpuport_tl_chan_t *ch, uint64_t id, CUmemoryPool *pool_p)
{
    cipc_conn_t *cc = ch->conn->priv;
    const gpuport_proc_rec_t *me = gpuport_tl_proc(ch->comm, gpuport_tl_rank(ch->comm));
    CUmemLocation loc;
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUmemAccessDesc access;
    cipc_pool_t *p;
    gpuport_status_t st;

    if (ch->dst_npieces != 1) {
        log_error("rank %d passed %u descriptors for its pool memory (expected the pool's one)",
                  ch->peer, ch->dst_npieces);
        return GPUPORT_ERR_PEER;
    }
    if (!gpuport_cu.cuMemPoolImportFromShareableHandle || !gpuport_cu.cuMemPoolImportPointer ||
        !gpuport_cu.cuMemPoolGetAccess || !gpuport_cu.cuMemPoolSetAccess) {
        log_error("channel to rank %d: this CUDA driver has no stream-ordered pool import "
                  "(cuMemPoolImportFromShareableHandle, CUDA 11.2 or later)",
                  ch->peer);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    p = calloc(1, sizeof(*p));
    if (!p)
        return GPUPORT_ERR_NO_MEMORY;
    st = CU_CALL(cuMemPoolImportFromShareableHandle,
                 (&p->pool, (void *)(uintptr_t)ch->dst_pieces[0].fd,
                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (st) {
        log_error("channel to rank %d: cannot import its stream-ordered pool from the "
                  "descriptor it passed",
                  ch->peer);
        free(p);
        return st;
    }
    /* the pool's own device has access; another needs it granted here */
    memset(&loc, 0, sizeof(loc));
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = me->gpu;
    if (gpuport_cu.cuMemPoolGetAccess(&flags, p->pool, &loc) != CUDA_SUCCESS ||
        flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
        memset(&access, 0, sizeof(access));
        access.location = loc;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        st = CU_CALL(cuMemPoolSetAccess, (p->pool, &access, 1));
        if (st) {
            log_error("channel to rank %d: this rank's GPU %d cannot access rank %d's pool "
                      "memory (cuMemPoolSetAccess failed): are the GPUs peers (nvidia-smi topo "
                      "-p2p r)?",
                      ch->peer, me->gpu, ch->peer);
            gpuport_cu.cuMemPoolDestroy(p->pool);
            free(p);
            return st;
        }
    }
    p->id = id;
    p->next = cc->pools;
    cc->pools = p;
    *pool_p = p->pool;
    return GPUPORT_OK;
}

/* The allocation the record names, imported from the pool imported before
 * under its name, else from the descriptor this channel carried. The peer
 * may have destroyed that pool and made another whose handle has the same
 * value: when the earlier import does not take the allocation, the pool is
 * imported again from the descriptor (it comes with every channel for this
 * reason) and the earlier one is no longer found by the name. */
static gpuport_status_t pointer_import(gpuport_tl_chan_t *ch, CUdeviceptr *va_p)
{
    cipc_conn_t *cc = ch->conn->priv;
    const gpuport_region_rec_t *r = &ch->dst.rec;
    CUmemPoolPtrExportData data;
    cipc_pool_t *known = pool_find(cc, r->pool);
    CUmemoryPool pool;
    gpuport_status_t st;

    memcpy(&data, r->ipc, sizeof(data));
    if (known && gpuport_cu.cuMemPoolImportPointer(va_p, known->pool, &data) == CUDA_SUCCESS)
        return GPUPORT_OK;
    if (known)
        known->id = 0; /* stale: released with the connection */
    st = pool_import(ch, r->pool, &pool);
    if (st)
        return st;
    st = CU_CALL(cuMemPoolImportPointer, (va_p, pool, &data));
    if (st)
        log_error("channel to rank %d: cannot import its pool allocation (the destination, %llu "
                  "bytes at offset %llu)",
                  ch->peer, (unsigned long long)r->size, (unsigned long long)r->fd_offset);
    return st;
}

gpuport_status_t cipc_pool_import(gpuport_tl_chan_t *ch, cipc_import_t **imp_p)
{
    cipc_conn_t *cc = ch->conn->priv;
    const gpuport_region_rec_t *r = &ch->dst.rec;
    cipc_import_t *imp;
    CUdeviceptr va = 0;
    gpuport_status_t st;

    /* the same region, or another region in the same allocation */
    for (imp = cc->imports; imp; imp = imp->next) {
        if (imp->serial == r->serial ||
            (imp->pool && imp->pool_id == r->pool &&
             memcmp(imp->export_data, r->ipc, sizeof(imp->export_data)) == 0)) {
            imp->refs++;
            ch->dst.base = (void *)(uintptr_t)(imp->va + r->fd_offset);
            *imp_p = imp;
            return GPUPORT_OK;
        }
    }
    imp = calloc(1, sizeof(*imp));
    if (!imp)
        return GPUPORT_ERR_NO_MEMORY;
    st = gpuport_tl_gpu_ctx_push(ch->comm);
    if (st) {
        free(imp);
        return st;
    }
    st = pointer_import(ch, &va);
    gpuport_tl_gpu_ctx_pop();
    if (st) {
        free(imp);
        return st;
    }
    imp->serial = r->serial;
    imp->va = va;
    imp->pool = 1;
    imp->pool_id = r->pool;
    memcpy(imp->export_data, r->ipc, sizeof(imp->export_data));
    imp->refs = 1;
    imp->next = cc->imports;
    cc->imports = imp;
    log_debug("channel to rank %d: imported its pool allocation (serial %llu) at 0x%llx", ch->peer,
              (unsigned long long)imp->serial, (unsigned long long)va);
    ch->dst.base = (void *)(uintptr_t)(imp->va + r->fd_offset);
    *imp_p = imp;
    return GPUPORT_OK;
}

void cipc_pool_unimport(cipc_import_t *imp)
{
    /* the imported pointer is freed before the peer may free its own */
    if (imp->va)
        gpuport_cu.cuMemFree(imp->va);
}

void cipc_pools_release(gpuport_conn_t *conn)
{
    cipc_conn_t *cc = conn->priv;

    int pushed;

    if (!cc->pools)
        return;
    pushed = gpuport_tl_gpu_ctx_push(conn->comm) == GPUPORT_OK;
    while (cc->pools) {
        cipc_pool_t *p = cc->pools;
        cc->pools = p->next;
        if (pushed)
            gpuport_cu.cuMemPoolDestroy(p->pool);
        free(p);
    }
    if (pushed)
        gpuport_tl_gpu_ctx_pop();
}
