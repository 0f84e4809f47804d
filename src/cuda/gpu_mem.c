/*
 * GPU memory of a communicator in GPU mode; see gpu.h and gpu.c. What the
 * driver says a region the application registers is (legacy, VMM, pool,
 * pinned host or managed memory, with what a peer needs to import it),
 * the VMM memory gpuport_mem_alloc_device allocates, the pinned staging
 * memory of network transports' GPU regions, and dma-buf export for NICs.
 * Application threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CUDA
#include "cuda/gpu.h"

#include <sys/mman.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cudrv.h"
#include "cuda/fcuda.h"

/* Application VMM memory (cuMemCreate + cuMemMap): one piece per
 * allocation that [p, p + size) spans, found allocation by allocation
 * (cuMemGetAddressRange of VMM memory gives the allocation that holds the
 * address, not the whole reserved range: libfabric and UCX rely on the
 * same), each exported as a POSIX descriptor. Returns 0 if p is not VMM
 * memory. */
static int describe_vmm(CUdeviceptr p, size_t size, gpuport_region_t *r)
{
    CUdeviceptr cur = p, end = p + size, base = 0;
    gpuport_fdpiece_t *pieces = NULL;
    uint32_t n = 0, cap = 0;
    int kind = GPUPORT_REGION_DEVICE_VMM;

    while (cur < end) {
        CUmemGenericAllocationHandle h;
        CUmemAllocationProp prop;
        CUdeviceptr b = 0;
        size_t len = 0;
        int fd = -1;

        if (gpuport_cu.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)cur) != CUDA_SUCCESS) {
            if (cur == p) {
                kind = 0; /* not VMM memory */
            } else {
                log_error("GPU range %p + %zu bytes: address 0x%llx, inside the range, is not "
                          "mapped VMM memory (the allocations must be mapped side by side)",
                          (void *)(uintptr_t)p, size, (unsigned long long)cur);
                kind = GPUPORT_ERR_INVALID_ARG;
            }
            break;
        }
        memset(&prop, 0, sizeof(prop));
        if (CU_CALL(cuMemGetAddressRange, (&b, &len, cur)) ||
            CU_CALL(cuMemGetAllocationPropertiesFromHandle, (&prop, h))) {
            gpuport_cu.cuMemRelease(h);
            kind = GPUPORT_ERR_INVALID_ARG;
            break;
        }
        if (cur == p)
            base = b;
        if (!(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
            /* usable where nothing is exported (tcp, ib); cuda_ipc refuses it */
            r->export_why = "it was allocated without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in "
                            "CUmemAllocationProp.requestedHandleTypes, so it cannot be shared "
                            "with another process; allocate it with that handle type or with "
                            "gpuport_mem_alloc_device";
        } else if (CU_CALL(cuMemExportToShareableHandle,
                           (&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0))) {
            gpuport_cu.cuMemRelease(h);
            kind = GPUPORT_ERR_NO_RESOURCE;
            break;
        }
        gpuport_cu.cuMemRelease(h);
        if (fd >= 0) {
            if (n == cap) {
                gpuport_fdpiece_t *np;
                cap = cap ? 2 * cap : 4;
                np = realloc(pieces, cap * sizeof(*pieces));
                if (!np) {
                    close(fd);
                    kind = GPUPORT_ERR_NO_MEMORY;
                    break;
                }
                pieces = np;
            }
            memset(&pieces[n], 0, sizeof(pieces[n]));
            pieces[n].fd = fd;
            pieces[n].size = len;
            n++;
        }
        cur = b + len;
    }
    if (kind != GPUPORT_REGION_DEVICE_VMM || r->export_why) {
        for (uint32_t i = 0; i < n; i++)
            close(pieces[i].fd);
        free(pieces);
        return kind;
    }
    r->pieces = pieces;
    r->npieces = n;
    r->pieces_owned = 1;
    r->map_off = p - base;
    return kind;
}

/* A stream-ordered pool's allocation. The region must lie inside one
 * allocation: a peer imports allocations one by one, at addresses of its
 * own, so two allocations side by side here need not be side by side
 * there. An exportable pool (one whose descriptor
 * cuMemPoolExportToShareableHandle hands out) is passed to same-host peers
 * by that descriptor, with the allocation's export data in the record;
 * another pool (the device's default one among them) is carried only where
 * nothing is exported (tcp, ib), export_why saying how to make it
 * exportable. Pool memory is mapped for the device, as VMM memory is: the
 * flusher's own context reaches it by the application's pointer. */
static int describe_pool(void *ptr, size_t size, CUmemoryPool pool, gpuport_region_rec_t *rec,
                         gpuport_region_t *r)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr, base = 0;
    CUmemPoolPtrExportData data;
    size_t len = 0;
    int fd = -1, ordinal = -1;

    r->mem_kind = GPUPORT_MEM_KIND_POOL;
    if (gpuport_cu.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) ==
        CUDA_SUCCESS)
        r->device = ordinal;
    if (CU_CALL(cuMemGetAddressRange, (&base, &len, p)))
        return GPUPORT_ERR_INVALID_ARG;
    if (p - base > len || size > len - (p - base)) {
        log_error("GPU range %p + %zu bytes runs past the end of its stream-ordered pool "
                  "allocation (%zu bytes at 0x%llx): a region of pool memory must lie inside one "
                  "allocation (peers import each allocation at an address of their own); "
                  "register each allocation on its own",
                  ptr, size, len, (unsigned long long)base);
        return GPUPORT_ERR_OUT_OF_RANGE;
    }
    rec->fd_offset = p - base;
    rec->pool = (uint64_t)(uintptr_t)pool;
    if (gpuport_cu.cuMemPoolExportToShareableHandle &&
        gpuport_cu.cuMemPoolExportToShareableHandle(&fd, pool,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                    0) == CUDA_SUCCESS) {
        r->mem_kind = GPUPORT_MEM_KIND_POOL_EXPORTABLE;
        memset(&data, 0, sizeof(data));
        if (!gpuport_cu.cuMemPoolExportPointer ||
            CU_CALL(cuMemPoolExportPointer, (&data, base))) {
            close(fd);
            log_error("GPU memory at %p: its allocation of an exportable stream-ordered pool "
                      "cannot be exported (cuMemPoolExportPointer)",
                      ptr);
            return GPUPORT_ERR_NO_RESOURCE;
        }
        _Static_assert(sizeof(data) <= sizeof(rec->ipc), "pool export data fits the record");
        memcpy(rec->ipc, &data, sizeof(data));
        r->pieces = calloc(1, sizeof(*r->pieces));
        if (!r->pieces) {
            close(fd);
            return GPUPORT_ERR_NO_MEMORY;
        }
        r->pieces[0].fd = fd;
        r->pieces[0].size = len;
        r->npieces = 1;
        r->pieces_owned = 1;
    } else {
        r->export_why = "its pool cannot be exported (the default pool, which cudaMallocAsync "
                        "uses, never can): make one with cudaMemPoolCreate, handleTypes = "
                        "cudaMemHandleTypePosixFileDescriptor, and allocate with "
                        "cudaMallocFromPoolAsync";
    }
    r->map_off = rec->fd_offset;
    return GPUPORT_REGION_DEVICE_POOL;
}

/* What the driver says the memory is, before any GPU-kind test: host
 * memory it pinned (cudaHostAlloc, or malloc'd and cudaHostRegister'ed:
 * both of memory type HOST) is host memory to every transport; managed
 * memory is refused here, naming its kind; pool memory is described
 * (describe_pool: its region kind). 0: go on. */
static int describe_kind(void *ptr, size_t size, CUdeviceptr p, CUmemorytype type,
                         gpuport_region_rec_t *rec, gpuport_region_t *r)
{
    CUmemoryPool pool = NULL;
    unsigned int managed = 0;

    if (gpuport_cu.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) ==
            CUDA_SUCCESS &&
        managed) {
        r->mem_kind = GPUPORT_MEM_KIND_MANAGED;
        log_error("memory at %p is managed memory (cudaMallocManaged), which gpuport does not "
                  "carry yet: its pages move between host and GPU; register host memory "
                  "(gpuport_mem_alloc, malloc) or GPU memory (gpuport_mem_alloc_device, "
                  "cuMemCreate) instead",
                  ptr);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (type == CU_MEMORYTYPE_HOST) {
        r->mem_kind = GPUPORT_MEM_KIND_HOST_PINNED;
        return 0;
    }
    if (gpuport_cu.cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) ==
            CUDA_SUCCESS &&
        pool)
        return describe_pool(ptr, size, pool, rec, r);
    return 0;
}

int gpuport_gpu_mem_describe(gpuport_comm_t comm, void *ptr, size_t size,
                             gpuport_region_rec_t *rec, gpuport_region_t *r)
{
    CUmemorytype type = 0;
    CUdeviceptr base = 0, p = (CUdeviceptr)(uintptr_t)ptr;
    size_t len = 0;
    CUipcMemHandle handle;
    CUresult rc;
    int vmm, ordinal = -1;

    if (!comm->gpu || !ptr)
        return 0;
    rc = gpuport_cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (rc != CUDA_SUCCESS)
        return 0; /* plain host memory is unknown to CUDA */
    vmm = describe_kind(ptr, size, p, type, rec, r);
    if (vmm || type != CU_MEMORYTYPE_DEVICE)
        return vmm;
    if (gpuport_cu.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) ==
        CUDA_SUCCESS)
        r->device = ordinal;
    /* legacy memory (cudaMalloc) first: its IPC handle says what it is */
    if (gpuport_cu.cuMemGetAddressRange(&base, &len, p) != CUDA_SUCCESS ||
        gpuport_cu.cuIpcGetMemHandle(&handle, base) != CUDA_SUCCESS) {
        vmm = describe_vmm(p, size, r);
        if (vmm > 0)
            r->mem_kind = GPUPORT_MEM_KIND_DEVICE_VMM;
        if (vmm)
            return vmm;
        log_error("GPU memory at %p can be shared neither by CUDA IPC nor as VMM memory (memory "
                  "from cudaMalloc, cuMemCreate + cuMemMap or gpuport_mem_alloc_device is "
                  "needed)",
                  ptr);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (p - base + size > len) {
        log_error("GPU range %p + %zu bytes runs past its allocation (%zu bytes at 0x%llx)", ptr,
                  size, len, (unsigned long long)base);
        return GPUPORT_ERR_OUT_OF_RANGE;
    }
    rec->fd_offset = p - base;
    memcpy(rec->ipc, &handle, sizeof(rec->ipc));
    r->mem_kind = GPUPORT_MEM_KIND_DEVICE;
    return GPUPORT_REGION_DEVICE;
}

gpuport_status_t gpuport_gpu_stage_alloc(gpuport_comm_t comm, size_t size, void **p)
{
    gpuport_flusher_t *fl = &comm->proxy.flusher;
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    gpuport_status_t st;

    if (mem == MAP_FAILED) {
        log_error("cannot map %zu bytes of staging memory", size);
        return GPUPORT_ERR_NO_MEMORY;
    }
    st = gpuport_fcuda_ctx_push(fl);
    if (!st) {
        st = CU_CALL(cuMemHostRegister, (mem, size, CU_MEMHOSTREGISTER_PORTABLE));
        gpuport_fcuda_ctx_pop();
    }
    if (st) {
        munmap(mem, size);
        return st;
    }
    *p = mem;
    return GPUPORT_OK;
}

void gpuport_gpu_stage_free(gpuport_comm_t comm, void *p, size_t size)
{
    if (!p)
        return;
    if (gpuport_fcuda_ctx_push(&comm->proxy.flusher) == GPUPORT_OK) {
        gpuport_cu.cuMemHostUnregister(p);
        gpuport_fcuda_ctx_pop();
    }
    munmap(p, size);
}

gpuport_status_t gpuport_gpu_copy_in(gpuport_comm_t comm, void *dst, const void *src, size_t size)
{
    gpuport_status_t st = gpuport_fcuda_ctx_push(&comm->proxy.flusher);

    if (st)
        return st;
    st = CU_CALL(cuMemcpyHtoD, ((CUdeviceptr)(uintptr_t)dst, src, size));
    gpuport_fcuda_ctx_pop();
    return st;
}

gpuport_status_t gpuport_gpu_vmm_alloc(gpuport_comm_t comm, size_t size, void **ptr_p,
                                       size_t *len_p, int *fd_p)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va = 0;
    size_t gran = 0, len;
    int rdma = 0, fd = -1;
    gpuport_status_t st;

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = comm->gpu_device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (gpuport_cu.cuDeviceGetAttribute(&rdma,
                                        CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                                        comm->gpu->dev) != CUDA_SUCCESS)
        rdma = 0;
    prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
    st = CU_CALL(cuMemGetAllocationGranularity, (&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (st)
        return st;
    if (size > SIZE_MAX - gran) {
        log_error("gpuport_mem_alloc_device: %zu bytes cannot be rounded up to the allocation "
                  "granularity (%zu bytes)",
                  size, gran);
        return GPUPORT_ERR_INVALID_ARG;
    }
    len = (size + gran - 1) / gran * gran;
    st = CU_CALL(cuMemCreate, (&handle, len, &prop, 0));
    if (st)
        return st;
    st = CU_CALL(cuMemExportToShareableHandle,
                 (&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (!st)
        st = CU_CALL(cuMemAddressReserve, (&va, len, gran, 0, 0));
    if (!st) {
        st = CU_CALL(cuMemMap, (va, len, 0, handle, 0));
        if (st)
            gpuport_cu.cuMemAddressFree(va, len);
    }
    /* the mapping (and the descriptor) hold the memory from here on */
    gpuport_cu.cuMemRelease(handle);
    if (st)
        goto err_fd;
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    st = CU_CALL(cuMemSetAccess, (va, len, &access, 1));
    if (st) {
        gpuport_gpu_vmm_free(comm, (void *)(uintptr_t)va, len);
        goto err_fd;
    }
    log_debug("allocated %zu bytes of VMM memory (%zu asked, granularity %zu) at 0x%llx on "
              "device %d%s",
              len, size, gran, (unsigned long long)va, comm->gpu_device,
              rdma ? ", GPUDirect RDMA capable" : "");
    *ptr_p = (void *)(uintptr_t)va;
    *len_p = len;
    *fd_p = fd;
    return GPUPORT_OK;

err_fd:
    if (fd >= 0)
        close(fd);
    return st;
}

void gpuport_gpu_vmm_free(gpuport_comm_t comm, void *ptr, size_t len)
{
    (void)comm;
    gpuport_cu.cuMemUnmap((CUdeviceptr)(uintptr_t)ptr, len);
    gpuport_cu.cuMemAddressFree((CUdeviceptr)(uintptr_t)ptr, len);
}

gpuport_status_t gpuport_gpu_dmabuf(gpuport_comm_t comm, uint64_t start, uint64_t len,
                                    int *fd_p, char *why, size_t why_len)
{
    int fd = -1;
    gpuport_status_t st;

    if (!comm->gpu) {
        snprintf(why, why_len, "this communicator has no GPU");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (!gpuport_cu.cuMemGetHandleForAddressRange) {
        snprintf(why, why_len, "the CUDA driver has no cuMemGetHandleForAddressRange (dma-buf "
                 "export needs CUDA 11.7 or later)");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    st = CU_CALL(cuMemGetHandleForAddressRange,
                 (&fd, (CUdeviceptr)start, (size_t)len, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
    if (st || fd < 0) {
        snprintf(why, why_len, "cuMemGetHandleForAddressRange(0x%llx, %llu bytes, DMA_BUF_FD) "
                 "failed", (unsigned long long)start, (unsigned long long)len);
        return st ? st : GPUPORT_ERR_TRANSPORT;
    }
    *fd_p = fd;
    return GPUPORT_OK;
}
