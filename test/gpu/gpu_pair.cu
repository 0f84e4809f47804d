/* The two-process GPU tests' pair, GPUs and region memory; see gpu_pair.h. */
#include "gpu_pair.h"

#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_check.h"
extern "C" {
#include "pair_bootstrap.h"
}

int gpu_pair_fork(gpuport_bootstrap_t *bs, pid_t *child_p)
{
    const char *one = getenv("GPUPORT_TEST_ONE_GPU");
    int one_gpu = one && strcmp(one, "1") == 0;
    int rank, n = 0;

    rank = pair_fork(bs, child_p);
    CHECK(rank >= 0);
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < (one_gpu ? 1 : 2)) {
        if (rank == 1)
            _exit(77);
        pair_join(*child_p);
        SKIP("needs 2 GPUs (found %d)", n);
    }
    CUDA_CHECK(cudaSetDevice(one_gpu ? 0 : rank));
    return rank;
}

void gpu_pair_join(int rank, pid_t child, int status)
{
    if (rank == 1)
        _exit(status);
    CHECK_MSG(pair_join(child) == 0, "rank 1 failed");
}

int gpu_mem_mapped(void)
{
    const char *t = getenv("GPUPORT_TRANSPORT");
    return t && strcmp(t, "tcp") == 0;
}

gpu_mem_kind_t gpu_mem_kind(void)
{
    const char *m = getenv("GPUPORT_TEST_MEM");
    gpu_mem_kind_t k;

    if (!m || !*m)
        return gpu_mem_mapped() ? GPU_MEM_VMM : GPU_MEM_CUDAMALLOC;
    if (strcmp(m, "cudamalloc") == 0)
        k = GPU_MEM_CUDAMALLOC;
    else if (strcmp(m, "vmm") == 0)
        k = GPU_MEM_VMM;
    else if (strcmp(m, "appvmm") == 0)
        k = GPU_MEM_APPVMM;
    else if (strcmp(m, "pool") == 0)
        k = GPU_MEM_POOL;
    else if (strcmp(m, "defpool") == 0)
        k = GPU_MEM_DEFPOOL;
    else
        CHECK_MSG(0, "GPUPORT_TEST_MEM=%s: expected cudamalloc, vmm, appvmm, pool or defpool", m);
    CHECK_MSG(k != GPU_MEM_CUDAMALLOC || !gpu_mem_mapped(),
              "GPUPORT_TEST_MEM=cudamalloc under GPUPORT_TRANSPORT=tcp: tcp refuses cudaMalloc "
              "memory (use vmm or appvmm)");
    CHECK_MSG(k != GPU_MEM_DEFPOOL || gpu_mem_mapped(),
              "GPUPORT_TEST_MEM=defpool needs GPUPORT_TRANSPORT=tcp: cuda_ipc refuses memory of "
              "the default pool as a destination (use pool)");
    return k;
}

const char *gpu_mem_kind_desc(gpu_mem_kind_t kind)
{
    switch (kind) {
    case GPU_MEM_CUDAMALLOC: return "cudamalloc (cudaMalloc)";
    case GPU_MEM_VMM: return "vmm (gpuport_mem_alloc_device)";
    case GPU_MEM_APPVMM: return "appvmm (application VMM: 2 cuMemCreate allocations, POSIX-FD, "
                                "one reserved range)";
    case GPU_MEM_POOL: return "pool (cudaMallocFromPoolAsync, a pool with the POSIX-FD handle "
                              "type)";
    case GPU_MEM_DEFPOOL: return "defpool (cudaMallocAsync, the device's default pool)";
    }
    return "?";
}

/* the process's exportable pool, made at the first pool allocation */
static cudaMemPool_t g_pool;

cudaMemPool_t gpu_exportable_pool(void)
{
    cudaMemPoolProps props;

    if (g_pool)
        return g_pool;
    memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    props.location.type = cudaMemLocationTypeDevice;
    CUDA_CHECK(cudaGetDevice(&props.location.id));
    CUDA_CHECK(cudaMemPoolCreate(&g_pool, &props));
    return g_pool;
}

void gpu_region_alloc(gpuport_comm_t comm, size_t bytes, void **p)
{
    switch (gpu_mem_kind()) {
    case GPU_MEM_CUDAMALLOC: CUDA_CHECK(cudaMalloc(p, bytes)); break;
    case GPU_MEM_VMM: CHECK_OK(gpuport_mem_alloc_device(comm, bytes, p)); break;
    case GPU_MEM_APPVMM: *p = gpu_appvmm_region(bytes, 1); break;
    case GPU_MEM_POOL:
        CUDA_CHECK(cudaMallocFromPoolAsync(p, bytes, gpu_exportable_pool(), 0));
        CUDA_CHECK(cudaStreamSynchronize(0));
        break;
    case GPU_MEM_DEFPOOL:
        CUDA_CHECK(cudaMallocAsync(p, bytes, 0));
        CUDA_CHECK(cudaStreamSynchronize(0));
        break;
    }
}

void gpu_region_free(void *p)
{
    switch (gpu_mem_kind()) {
    case GPU_MEM_CUDAMALLOC: cudaFree(p); break;
    case GPU_MEM_VMM: break;
    case GPU_MEM_APPVMM: gpu_appvmm_free(p); break;
    case GPU_MEM_POOL:
    case GPU_MEM_DEFPOOL:
        CUDA_CHECK(cudaFreeAsync(p, 0));
        CUDA_CHECK(cudaStreamSynchronize(0));
        break;
    }
}

/* ---- application VMM memory, through the driver API ----
 * The entry points come from the runtime (cudaGetDriverEntryPointByVersion)
 * rather than a link to libcuda: the tests must start, and skip, where no
 * driver is installed. Versioned by the cuda.h they are declared in. */

static struct {
    int loaded;
    decltype(&::cuGetErrorString) cuGetErrorString;
    decltype(&::cuMemGetAllocationGranularity) cuMemGetAllocationGranularity;
    decltype(&::cuMemCreate) cuMemCreate;
    decltype(&::cuMemRelease) cuMemRelease;
    decltype(&::cuMemAddressReserve) cuMemAddressReserve;
    decltype(&::cuMemAddressFree) cuMemAddressFree;
    decltype(&::cuMemMap) cuMemMap;
    decltype(&::cuMemUnmap) cuMemUnmap;
    decltype(&::cuMemSetAccess) cuMemSetAccess;
} drv;

#define DRV_LOAD(name)                                                                          \
    do {                                                                                        \
        cudaDriverEntryPointQueryResult q_ = cudaDriverEntryPointSymbolNotFound;                \
        CUDA_CHECK(cudaGetDriverEntryPointByVersion(#name, (void **)&drv.name, CUDA_VERSION,    \
                                                    cudaEnableDefault, &q_));                   \
        CHECK_MSG(q_ == cudaDriverEntryPointSuccess && drv.name,                                \
                  "the CUDA driver has no %s for CUDA %d (query result %d)", #name,             \
                  CUDA_VERSION, (int)q_);                                                       \
    } while (0)

#define CU_CHECK(call)                                                                          \
    do {                                                                                        \
        CUresult r_ = (drv.call);                                                               \
        if (r_ != CUDA_SUCCESS) {                                                               \
            const char *s_ = NULL;                                                              \
            drv.cuGetErrorString(r_, &s_);                                                      \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,           \
                    s_ ? s_ : "?", (int)r_);                                                    \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static void drv_load(void)
{
    if (drv.loaded)
        return;
    CUDA_CHECK(cudaFree(0)); /* the runtime's context, current */
    DRV_LOAD(cuGetErrorString);
    DRV_LOAD(cuMemGetAllocationGranularity);
    DRV_LOAD(cuMemCreate);
    DRV_LOAD(cuMemRelease);
    DRV_LOAD(cuMemAddressReserve);
    DRV_LOAD(cuMemAddressFree);
    DRV_LOAD(cuMemMap);
    DRV_LOAD(cuMemUnmap);
    DRV_LOAD(cuMemSetAccess);
    drv.loaded = 1;
}

static CUmemAllocationProp vmm_prop(int fd_handle)
{
    CUmemAllocationProp prop;
    int dev = 0;

    CUDA_CHECK(cudaGetDevice(&dev));
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.requestedHandleTypes = fd_handle ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                                          : CU_MEM_HANDLE_TYPE_NONE;
    return prop;
}

size_t gpu_vmm_granularity(int fd_handle)
{
    CUmemAllocationProp prop;
    size_t gran = 0;

    drv_load();
    prop = vmm_prop(fd_handle);
    CU_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(gran > 0);
    return gran;
}

/* What gpu_appvmm_alloc made, for gpu_appvmm_free: each mapping is undone
 * whole, as cuMemUnmap requires. */
#define APPVMM_MAX 64
#define APPVMM_PIECES 8
static struct {
    CUdeviceptr base;
    size_t len;
    int n;
    size_t piece[APPVMM_PIECES];
} appvmm[APPVMM_MAX];

void *gpu_appvmm_alloc(const size_t *sizes, int n, int fd_handle)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr va = 0;
    size_t gran = gpu_vmm_granularity(fd_handle), len = 0, off = 0;
    int slot;

    for (slot = 0; slot < APPVMM_MAX && appvmm[slot].base; slot++)
        ;
    CHECK_MSG(slot < APPVMM_MAX, "more than %d application VMM ranges at once", APPVMM_MAX);
    CHECK(n >= 1 && n <= APPVMM_PIECES);
    for (int i = 0; i < n; i++)
        len += (sizes[i] + gran - 1) / gran * gran;
    prop = vmm_prop(fd_handle);
    CU_CHECK(cuMemAddressReserve(&va, len, gran, 0, 0));
    for (int i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h;
        size_t piece = (sizes[i] + gran - 1) / gran * gran;
        CU_CHECK(cuMemCreate(&h, piece, &prop, 0));
        CU_CHECK(cuMemMap(va + off, piece, 0, h, 0));
        CU_CHECK(cuMemRelease(h));
        appvmm[slot].piece[i] = piece;
        off += piece;
    }
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_CHECK(cuMemSetAccess(va, len, &access, 1));
    appvmm[slot].base = va;
    appvmm[slot].len = len;
    appvmm[slot].n = n;
    return (void *)(uintptr_t)va;
}

void *gpu_appvmm_region(size_t bytes, int fd_handle)
{
    size_t gran = gpu_vmm_granularity(fd_handle);
    size_t half = (bytes / 2) & ~(size_t)255;
    size_t sizes[2];
    char *base;

    CHECK(bytes > 0);
    sizes[0] = half ? (half + gran - 1) / gran * gran : gran;
    sizes[1] = bytes - half;
    base = (char *)gpu_appvmm_alloc(sizes, 2, fd_handle);
    return base + sizes[0] - half;
}

void gpu_appvmm_free(void *p)
{
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;

    for (int i = 0; i < APPVMM_MAX; i++) {
        if (appvmm[i].base && d >= appvmm[i].base && d - appvmm[i].base < appvmm[i].len) {
            CUdeviceptr at = appvmm[i].base;
            for (int k = 0; k < appvmm[i].n; k++) {
                CU_CHECK(cuMemUnmap(at, appvmm[i].piece[k]));
                at += appvmm[i].piece[k];
            }
            CU_CHECK(cuMemAddressFree(appvmm[i].base, appvmm[i].len));
            memset(&appvmm[i], 0, sizeof(appvmm[i]));
            return;
        }
    }
    CHECK_MSG(0, "%p is not in an application VMM range of this test", p);
}
