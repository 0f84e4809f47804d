/*
 * A peer's VMM memory, imported from the descriptors it passed
 * (cuMemImportFromShareableHandle), mapped into one reserved range here,
 * piece by piece at the offsets they have in the peer, and made accessible
 * to this rank's GPU. The mapping belongs to the process, so the flusher's
 * context and the application's kernels reach it alike, and it takes no
 * IPC handle: the one-context-per-device limit of legacy IPC handles does
 * not apply. Application threads (channel creation and destruction).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_CUDA_IPC)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/cuda_ipc/cipc.h"

static void unmap(cipc_import_t *imp)
{
    CUdeviceptr at = imp->va;

    if (imp->pool) {
        cipc_pool_unimport(imp);
        free(imp);
        return;
    }
    for (uint32_t i = 0; i < imp->mapped; i++) {
        gpuport_cu.cuMemUnmap(at, imp->sizes[i]);
        at += imp->sizes[i];
    }
    if (imp->va)
        gpuport_cu.cuMemAddressFree(imp->va, imp->len);
    free(imp->sizes);
    free(imp);
}

static gpuport_status_t map_pieces(gpuport_tl_chan_t *ch, cipc_import_t *imp)
{
    const gpuport_proc_rec_t *me = gpuport_tl_proc(ch->comm, gpuport_tl_rank(ch->comm));
    const gpuport_proc_rec_t *peer = gpuport_tl_proc(ch->comm, ch->peer);
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr at;
    size_t gran = 0;
    gpuport_status_t st;

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = me->gpu;
    st = CU_CALL(cuMemGetAllocationGranularity, (&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (!st)
        st = CU_CALL(cuMemAddressReserve, (&imp->va, imp->len, gran, 0, 0));
    if (st) {
        log_error("channel to rank %d: cannot reserve %zu bytes of GPU address space for its "
                  "destination",
                  ch->peer, imp->len);
        return st;
    }
    at = imp->va;
    for (uint32_t i = 0; i < imp->npieces; i++) {
        const gpuport_fdpiece_t *p = &ch->dst_pieces[i];
        CUmemGenericAllocationHandle h;

        st = CU_CALL(cuMemImportFromShareableHandle,
                     (&h, (void *)(uintptr_t)p->fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        if (st) {
            log_error("channel to rank %d: cannot import piece %u of %u of its destination (a "
                      "%llu-byte VMM allocation) from the descriptor it passed",
                      ch->peer, i + 1, imp->npieces, (unsigned long long)p->size);
            return st;
        }
        st = CU_CALL(cuMemMap, (at, (size_t)p->size, 0, h, 0));
        gpuport_cu.cuMemRelease(h); /* the mapping holds it */
        if (st) {
            log_error("channel to rank %d: cannot map piece %u of %u of its destination (%llu "
                      "bytes)",
                      ch->peer, i + 1, imp->npieces, (unsigned long long)p->size);
            return st;
        }
        imp->mapped++;
        at += p->size;
    }
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    st = CU_CALL(cuMemSetAccess, (imp->va, imp->len, &access, 1));
    if (st)
        log_error("channel to rank %d: this rank's GPU %d cannot access the memory of rank %d's "
                  "GPU %d (cuMemSetAccess failed): are the GPUs peers (nvidia-smi topo -p2p r)?",
                  ch->peer, me->gpu, ch->peer, peer->gpu);
    return st;
}

gpuport_status_t cipc_vmm_import(gpuport_tl_chan_t *ch, cipc_import_t **imp_p)
{
    cipc_conn_t *cc = ch->conn->priv;
    const gpuport_region_rec_t *r = &ch->dst.rec;
    cipc_import_t *imp;
    uint64_t total = 0;
    gpuport_status_t st;

    for (imp = cc->imports; imp; imp = imp->next) {
        if (imp->serial == r->serial) {
            /* the same memory again: the region must lie in what was imported */
            if (!sm_region_fits(r, imp->len, ch->peer))
                return GPUPORT_ERR_PEER;
            imp->refs++;
            ch->dst.base = (void *)(uintptr_t)(imp->va + r->fd_offset);
            *imp_p = imp;
            return GPUPORT_OK;
        }
    }
    for (uint32_t i = 0; i < ch->dst_npieces; i++) {
        if (ch->dst_pieces[i].size == 0 || ch->dst_pieces[i].offset != 0 ||
            ch->dst_pieces[i].size > UINT64_MAX - total) {
            log_error("rank %d passed a malformed VMM piece %u (%llu bytes at offset %llu)",
                      ch->peer, i, (unsigned long long)ch->dst_pieces[i].size,
                      (unsigned long long)ch->dst_pieces[i].offset);
            return GPUPORT_ERR_PEER;
        }
        total += ch->dst_pieces[i].size;
    }
    if (ch->dst_npieces == 0 || !sm_region_fits(r, total, ch->peer))
        return GPUPORT_ERR_PEER;
    imp = calloc(1, sizeof(*imp));
    if (!imp || !(imp->sizes = calloc(ch->dst_npieces, sizeof(*imp->sizes)))) {
        free(imp);
        return GPUPORT_ERR_NO_MEMORY;
    }
    imp->serial = r->serial;
    imp->len = (size_t)total;
    imp->npieces = ch->dst_npieces;
    for (uint32_t i = 0; i < imp->npieces; i++)
        imp->sizes[i] = ch->dst_pieces[i].size;
    st = gpuport_tl_gpu_ctx_push(ch->comm);
    if (!st) {
        st = map_pieces(ch, imp);
        gpuport_tl_gpu_ctx_pop();
    }
    if (st) {
        if (gpuport_tl_gpu_ctx_push(ch->comm) == GPUPORT_OK) {
            unmap(imp);
            gpuport_tl_gpu_ctx_pop();
        } else {
            free(imp->sizes);
            free(imp);
        }
        return st;
    }
    imp->refs = 1;
    imp->next = cc->imports;
    cc->imports = imp;
    log_debug("channel to rank %d: imported its VMM region (serial %llu, %u allocation(s), %zu "
              "bytes) at 0x%llx",
              ch->peer, (unsigned long long)imp->serial, imp->npieces, imp->len,
              (unsigned long long)imp->va);
    ch->dst.base = (void *)(uintptr_t)(imp->va + r->fd_offset);
    *imp_p = imp;
    return GPUPORT_OK;
}

static void drop(gpuport_conn_t *conn, cipc_import_t *imp)
{
    cipc_conn_t *cc = conn->priv;

    for (cipc_import_t **pp = &cc->imports; *pp; pp = &(*pp)->next) {
        if (*pp == imp) {
            *pp = imp->next;
            break;
        }
    }
    if (gpuport_tl_gpu_ctx_push(conn->comm) == GPUPORT_OK) {
        unmap(imp);
        gpuport_tl_gpu_ctx_pop();
    } else {
        free(imp->sizes);
        free(imp);
    }
}

void cipc_vmm_release(gpuport_conn_t *conn, cipc_import_t *imp)
{
    if (--imp->refs == 0)
        drop(conn, imp);
}

void cipc_vmm_release_all(gpuport_conn_t *conn)
{
    cipc_conn_t *cc = conn->priv;

    while (cc->imports)
        drop(conn, cc->imports);
}
