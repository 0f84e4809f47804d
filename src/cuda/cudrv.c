/* Run-time loading of the CUDA driver; see cudrv.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CUDA
#include "cuda/cudrv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

gpuport_cudrv_t gpuport_cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static gpuport_status_t load_status = GPUPORT_ERR_NOT_SUPPORTED;
static char load_why[256] = "not loaded";
static int device_count;
static pid_t load_pid;

/* The exact symbol that cuda.h's prototype names: cuda.h maps cuMemAlloc to
 * cuMemAlloc_v2 and so on, and our pointer types come from those
 * prototypes. cuGetProcAddress would hand out the newest variant for our
 * API version instead, whose signature can differ (cuCtxGetDevice_v2 takes
 * a context the header's cuCtxGetDevice does not). */
#define GPUPORT_CU_STR_(x) #x
#define GPUPORT_CU_STR(x) GPUPORT_CU_STR_(x)

static void load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    CUresult rc;

    load_pid = getpid();
    if (!lib) {
        snprintf(load_why, sizeof(load_why), "no CUDA driver: dlopen(libcuda.so.1): %s", dlerror());
        return;
    }
#define GPUPORT_CU_RESOLVE(name)                                                                \
    do {                                                                                        \
        void *fn = dlsym(lib, GPUPORT_CU_STR(name));                                            \
        if (!fn) {                                                                              \
            snprintf(load_why, sizeof(load_why), "the CUDA driver lacks %s (too old for %d?)",  \
                     GPUPORT_CU_STR(name), CUDA_VERSION);                                       \
            return;                                                                             \
        }                                                                                       \
        gpuport_cu.name = (__typeof__(gpuport_cu.name))fn;                                      \
    } while (0);
    GPUPORT_CU_FUNCS(GPUPORT_CU_RESOLVE)
#undef GPUPORT_CU_RESOLVE
#define GPUPORT_CU_RESOLVE_OPTIONAL(name)                                                       \
    gpuport_cu.name = (__typeof__(gpuport_cu.name))dlsym(lib, GPUPORT_CU_STR(name));
    GPUPORT_CU_OPTIONAL_FUNCS(GPUPORT_CU_RESOLVE_OPTIONAL)
#undef GPUPORT_CU_RESOLVE_OPTIONAL
    rc = gpuport_cu.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        const char *text = NULL;
        gpuport_cu.cuGetErrorString(rc, &text);
        snprintf(load_why, sizeof(load_why), "cuInit failed: %s (%d)", text ? text : "?", (int)rc);
        return;
    }
    rc = gpuport_cu.cuDeviceGetCount(&device_count);
    if (rc != CUDA_SUCCESS || device_count == 0) {
        device_count = 0;
        snprintf(load_why, sizeof(load_why), "the CUDA driver sees no device");
        return;
    }
    load_status = GPUPORT_OK;
    load_why[0] = '\0';
}

gpuport_status_t gpuport_cudrv_load(char *why, size_t len)
{
    pthread_once(&load_once, load);
    /* CUDA does not survive fork(): a child of a process that initialized it
     * must stay off the GPU */
    if (load_status == GPUPORT_OK && getpid() != load_pid) {
        if (why && len)
            snprintf(why, len, "CUDA was initialized before this process was forked from pid %d; "
                     "a forked child cannot use it", (int)load_pid);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (load_status && why && len)
        snprintf(why, len, "%s", load_why);
    return load_status;
}

int gpuport_cudrv_device_count(void)
{
    return load_status == GPUPORT_OK && getpid() == load_pid ? device_count : 0;
}


gpuport_status_t gpuport_cu_status(CUresult rc, const char *call, const char *file, int line)
{
    const char *name = NULL, *text = NULL;

    if (rc == CUDA_SUCCESS)
        return GPUPORT_OK;
    if (rc == CUDA_ERROR_NOT_READY)
        return GPUPORT_ERR_AGAIN;
    gpuport_cu.cuGetErrorName(rc, &name);
    gpuport_cu.cuGetErrorString(rc, &text);
    if (GPUPORT_LOG_ON(GPUPORT_LOG_ERROR))
        gpuport_log_write(GPUPORT_LOG_SUBSYS_ID, GPUPORT_LOG_ERROR, file, line,
                          "%s failed: %s (%s)", call, text ? text : "?", name ? name : "?");
    switch (rc) {
    case CUDA_ERROR_OUT_OF_MEMORY: return GPUPORT_ERR_NO_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE: return GPUPORT_ERR_INVALID_ARG;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: return GPUPORT_ERR_NOT_SUPPORTED;
    default: return GPUPORT_ERR_TRANSPORT;
    }
}
