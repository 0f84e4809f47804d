/*
 * gpuport_mem_alloc_device in a process that has made no CUDA context: the
 * communicator picks device local_rank % count, retains its primary context
 * and makes it current; the allocation is VMM memory with a POSIX
 * descriptor, its size rounded up to the allocation granularity, mapped
 * read-write; a cuda_ipc channel from this rank to itself moves data
 * between two such blocks (the destination imported from its own passed
 * descriptor), and the bytes are read back. No CUDA runtime here: the
 * driver is reached through gpuport's own table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cuda/cudrv.h"
#include "cuda/gpu.h"
#include "internal.h"
#include "local_bootstrap.h"

#define SIZE (3u << 20) /* not a multiple of 2 MiB */
#define PUT_OFF 12345u
#define PUT_LEN (1u << 20)


static void sync_stream(void)
{
    CUresult rc;

    while ((rc = gpuport_cu.cuStreamQuery(NULL)) == CUDA_ERROR_NOT_READY)
        ;
    CHECK_MSG(rc == CUDA_SUCCESS, "cuStreamQuery: %d", (int)rc);
}

static int run(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    unsigned char *src, *dst, *host = malloc(SIZE), *back = malloc(SIZE);
    CUcontext cur = NULL;
    gpuport_alloc_t *a;
    size_t gran = 0;
    CUmemAllocationProp prop;

    (void)rank, (void)size, (void)arg;
    CHECK(host && back);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_MSG(comm->gpu, "no GPU mode (GPUPORT_GPU=on was set)");
    CHECK(gpuport_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == comm->gpu->app_ctx);
    CHECK_MSG(comm->gpu->retained, "the primary context was not retained by gpuport");
    CHECK_OK(gpuport_mem_alloc_device(comm, SIZE, (void **)&src));
    CHECK_OK(gpuport_mem_alloc_device(comm, SIZE, (void **)&dst));
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = comm->gpu_device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CHECK(gpuport_cu.cuMemGetAllocationGranularity(&gran, &prop,
                                                   CU_MEM_ALLOC_GRANULARITY_MINIMUM) == 0);
    for (a = comm->allocs; a; a = a->next) {
        CHECK_MSG(a->device && a->map_len >= SIZE && a->map_len % gran == 0 &&
                      a->map_len - SIZE < gran && a->fd >= 0,
                  "block of %zu bytes mapped as %zu (granularity %zu), fd %d", a->size,
                  a->map_len, gran, a->fd);
    }
    for (size_t i = 0; i < SIZE; i++)
        host[i] = (unsigned char)(i * 131 + 7);
    CHECK(gpuport_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)src, host, SIZE, NULL) == 0);
    memset(back, 0, SIZE);
    CHECK(gpuport_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, back, SIZE, NULL) == 0);
    sync_stream();

    CHECK_OK(gpuport_mem_register(comm, src, SIZE, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, SIZE, &mdst));
    CHECK(msrc->region.kind == GPUPORT_REGION_DEVICE_VMM && msrc->region.npieces == 1);
    CHECK_OK(gpuport_channel_create(comm, 0, msrc, mdst, &ch));
    CHECK_OK(gpuport_channel_put_with_signal(ch, PUT_OFF, 7, PUT_LEN));
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(gpuport_channel_wait(ch));
    CHECK(gpuport_cu.cuMemcpyDtoHAsync(back, (CUdeviceptr)(uintptr_t)dst, SIZE, NULL) == 0);
    sync_stream();
    for (size_t i = 0; i < SIZE; i++) {
        unsigned char want = i >= PUT_OFF && i < PUT_OFF + PUT_LEN ? host[i - PUT_OFF + 7] : 0;
        CHECK_MSG(back[i] == want, "byte %zu is 0x%02x, expected 0x%02x", i, back[i], want);
    }
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(host);
    free(back);
    printf("no application context: VMM blocks of %u bytes mapped as %zu (granularity %zu), a "
           "%u-byte put over cuda_ipc checked byte for byte\n",
           SIZE, (size_t)((SIZE + gran - 1) / gran * gran), gran, PUT_LEN);
    return 0;
}

int main(void)
{
    char why[256];

    if (gpuport_cudrv_load(why, sizeof(why)) != GPUPORT_OK) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    setenv("GPUPORT_GPU", "on", 1);
    setenv("GPUPORT_TRANSPORT", "cuda_ipc", 1);
    setenv("GPUPORT_TIMEOUT_MS", "20000", 1);
    CHECK(local_run(1, run, NULL) == 0);
    return 0;
}
