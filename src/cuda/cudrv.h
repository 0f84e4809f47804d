/*
 * The CUDA driver, loaded at run time: libcuda.so.1 is dlopen()ed on first
 * use and every entry point is resolved by its versioned name, so a CUDA
 * build of gpuport loads and runs its host path on machines without a GPU
 * or driver. Calls go through CU_CALL, which turns a CUresult into a
 * gpuport_status_t and logs the failing call's text once.
 *
 * Only the flusher and GPU set-up code (application thread) may call these;
 * the proxy thread never does.
 */
#ifndef GPUPORT_CUDRV_H
#define GPUPORT_CUDRV_H

#include <cuda.h>

#include "gpuport/gpuport.h"

#define GPUPORT_CU_FUNCS(X)                                                                     \
    X(cuInit)                                                                                   \
    X(cuDriverGetVersion)                                                                       \
    X(cuGetErrorString)                                                                         \
    X(cuGetErrorName)                                                                           \
    X(cuDeviceGetCount)                                                                         \
    X(cuDeviceGet)                                                                              \
    X(cuDeviceGetPCIBusId)                                                                      \
    X(cuDeviceGetName)                                                                          \
    X(cuDeviceGetAttribute)                                                                     \
    X(cuDeviceGetP2PAttribute)                                                                  \
    X(cuDevicePrimaryCtxRetain)                                                                 \
    X(cuDevicePrimaryCtxRelease)                                                                \
    X(cuCtxCreate)                                                                              \
    X(cuCtxDestroy)                                                                             \
    X(cuCtxSetCurrent)                                                                          \
    X(cuCtxGetCurrent)                                                                          \
    X(cuCtxGetDevice)                                                                           \
    X(cuCtxPushCurrent)                                                                         \
    X(cuCtxPopCurrent)                                                                          \
    X(cuMemHostRegister)                                                                        \
    X(cuMemHostUnregister)                                                                      \
    X(cuMemcpyPeerAsync)                                                                        \
    X(cuMemAlloc)                                                                               \
    X(cuMemFree)                                                                                \
    X(cuMemHostAlloc)                                                                           \
    X(cuMemFreeHost)                                                                            \
    X(cuMemHostGetDevicePointer)                                                                \
    X(cuMemGetAddressRange)                                                                     \
    X(cuMemsetD8)                                                                               \
    X(cuPointerGetAttribute)                                                                    \
    X(cuIpcGetMemHandle)                                                                        \
    X(cuIpcOpenMemHandle)                                                                       \
    X(cuIpcCloseMemHandle)                                                                      \
    X(cuStreamCreate)                                                                           \
    X(cuStreamDestroy)                                                                          \
    X(cuStreamQuery)                                                                            \
    X(cuMemcpyDtoDAsync)                                                                        \
    X(cuMemcpyHtoDAsync)                                                                        \
    X(cuMemcpyHtoD)                                                                             \
    X(cuMemcpyDtoHAsync)                                                                        \
    X(cuMemGetAllocationGranularity)                                                            \
    X(cuMemCreate)                                                                              \
    X(cuMemRelease)                                                                             \
    X(cuMemAddressReserve)                                                                      \
    X(cuMemAddressFree)                                                                         \
    X(cuMemMap)                                                                                 \
    X(cuMemUnmap)                                                                               \
    X(cuMemSetAccess)                                                                           \
    X(cuMemExportToShareableHandle)                                                             \
    X(cuMemImportFromShareableHandle)                                                           \
    X(cuMemRetainAllocationHandle)                                                              \
    X(cuMemGetAllocationPropertiesFromHandle)                                                   \
    X(cuStreamWriteValue64)                                                                     \
    X(cuStreamBatchMemOp)                                                                       \
    X(cuEventCreate)                                                                            \
    X(cuEventRecord)                                                                            \
    X(cuEventQuery)                                                                             \
    X(cuEventDestroy)                                                                           \
    X(cuThreadExchangeStreamCaptureMode)

/* Entry points a driver may lack without the load failing: the feature that
 * needs one is then unavailable (its pointer is NULL), and says so.
 * cuMemGetHandleForAddressRange (dma-buf export for NIC registration) came
 * with CUDA 11.7; the stream-ordered pool calls (classification, sharing
 * pools with peers, gpuport_info's test allocations) with 11.2. */
#define GPUPORT_CU_OPTIONAL_FUNCS(X)                                                            \
    X(cuMemGetHandleForAddressRange)                                                            \
    X(cuMemPoolExportToShareableHandle)                                                         \
    X(cuMemPoolImportFromShareableHandle)                                                       \
    X(cuMemPoolExportPointer)                                                                   \
    X(cuMemPoolImportPointer)                                                                   \
    X(cuMemPoolGetAccess)                                                                       \
    X(cuMemPoolSetAccess)                                                                       \
    X(cuMemAllocManaged)                                                                        \
    X(cuMemAllocAsync)                                                                          \
    X(cuMemAllocFromPoolAsync)                                                                  \
    X(cuMemFreeAsync)                                                                           \
    X(cuMemPoolCreate)                                                                          \
    X(cuMemPoolDestroy)                                                                         \
    X(cuStreamSynchronize)

/* One pointer per entry point, typed from cuda.h's own prototype (the
 * macros there select the current versioned symbol, e.g. cuCtxCreate_v4). */
typedef struct gpuport_cudrv {
#define GPUPORT_CU_FIELD(name) __typeof__(name) *name;
    GPUPORT_CU_FUNCS(GPUPORT_CU_FIELD)
    GPUPORT_CU_OPTIONAL_FUNCS(GPUPORT_CU_FIELD)
#undef GPUPORT_CU_FIELD
} gpuport_cudrv_t;

extern gpuport_cudrv_t gpuport_cu;

/* Loads the driver once; GPUPORT_ERR_NOT_SUPPORTED (with the reason in why)
 * when there is no driver or no device. Thread-safe. */
gpuport_status_t gpuport_cudrv_load(char *why, size_t len);

/* Number of devices after a successful load, else 0. */
int gpuport_cudrv_device_count(void);

gpuport_status_t gpuport_cu_status(CUresult rc, const char *call, const char *file, int line);

#define CU_CALL(fn, args) gpuport_cu_status(gpuport_cu.fn args, #fn #args, __FILE__, __LINE__)

#endif
