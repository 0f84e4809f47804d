/*
 * gpuport_info -m: a test allocation of each kind of memory an application
 * can register, made here, registered on a one-rank communicator and
 * described by gpuport_mem_info (the kind gpuport classified, the device,
 * which transports carry it and why not). The GPU kinds are made with the
 * driver calls behind the runtime's (cuMemAllocHost for cudaHostAlloc, and
 * so on); kinds this machine or build cannot make are listed with why.
 * Called by gpuport_info.c's main only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_config.h"
#include "gpuport/gpuport.h"
#include "info.h"
#if GPUPORT_HAVE_CUDA
#include "cuda/cudrv.h"
#endif

#define TEST_SIZE (2u << 20) /* one VMM granule on H200 */

/* The allocations, in the order printed. */
enum {
    M_MALLOC,
    M_SHARED,
    M_HOST_ALLOC,
    M_HOST_REGISTER,
    M_MANAGED,
    M_MALLOC_DEVICE,
    M_VMM,
    M_POOL_DEFAULT,
    M_POOL_EXPORTABLE,
    M_COUNT
};

static const char *const how[M_COUNT] = {
    "malloc",
    "gpuport_mem_alloc",
    "cudaHostAlloc (cuMemHostAlloc)",
    "cudaHostRegister (cuMemHostRegister)",
    "cudaMallocManaged (cuMemAllocManaged)",
    "cudaMalloc (cuMemAlloc)",
    "gpuport_mem_alloc_device (VMM)",
    "cudaMallocAsync, default pool",
    "exportable pool (cuMemPoolCreate)",
};

typedef struct mem_case {
    int tried;             /* the allocation was made */
    gpuport_status_t reg;  /* what gpuport_mem_register returned */
    char why[512];         /* not tried: why; refused: the library's message */
    gpuport_mem_info_t info;
    void *ptr;
#if GPUPORT_HAVE_CUDA
    CUmemoryPool pool;
#endif
} mem_case_t;

/* ---- a one-rank bootstrap ---- */

static gpuport_status_t one_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    (void)ctx;
    memcpy(recv, send, bytes);
    return GPUPORT_OK;
}

static gpuport_status_t one_barrier(void *ctx)
{
    (void)ctx;
    return GPUPORT_OK;
}

static gpuport_status_t one_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    return GPUPORT_ERR_NOT_SUPPORTED; /* a channel to itself is not made here */
}

static gpuport_status_t one_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

/* ---- the allocations ---- */

#if GPUPORT_HAVE_CUDA
/* The CUDA kinds, through the driver table; 0, or -1 with why. */
static int make_gpu(int m, mem_case_t *c)
{
    CUdeviceptr d = 0;
    CUresult rc = CUDA_SUCCESS;
    const char *call = how[m];

    switch (m) {
    case M_HOST_ALLOC: rc = gpuport_cu.cuMemHostAlloc(&c->ptr, TEST_SIZE, 0); break;
    case M_HOST_REGISTER:
        c->ptr = aligned_alloc(4096, TEST_SIZE);
        rc = c->ptr ? gpuport_cu.cuMemHostRegister(c->ptr, TEST_SIZE, 0) : CUDA_ERROR_OUT_OF_MEMORY;
        if (rc != CUDA_SUCCESS) {
            free(c->ptr);
            c->ptr = NULL;
        }
        break;
    case M_MALLOC_DEVICE: rc = gpuport_cu.cuMemAlloc(&d, TEST_SIZE); break;
    case M_MANAGED:
    case M_POOL_DEFAULT:
    case M_POOL_EXPORTABLE:
        if (!gpuport_cu.cuMemAllocManaged || !gpuport_cu.cuMemAllocAsync ||
            !gpuport_cu.cuMemPoolCreate || !gpuport_cu.cuStreamSynchronize) {
            snprintf(c->why, sizeof(c->why), "the CUDA driver lacks the call");
            return -1;
        }
        if (m == M_MANAGED) {
            rc = gpuport_cu.cuMemAllocManaged(&d, TEST_SIZE, CU_MEM_ATTACH_GLOBAL);
        } else if (m == M_POOL_DEFAULT) {
            rc = gpuport_cu.cuMemAllocAsync(&d, TEST_SIZE, NULL);
        } else {
            CUmemPoolProps props;
            memset(&props, 0, sizeof(props));
            props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
            props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
            props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            props.location.id = 0;
            rc = gpuport_cu.cuMemPoolCreate(&c->pool, &props);
            if (rc == CUDA_SUCCESS)
                rc = gpuport_cu.cuMemAllocFromPoolAsync(&d, TEST_SIZE, c->pool, NULL);
        }
        if (rc == CUDA_SUCCESS && m != M_MANAGED)
            rc = gpuport_cu.cuStreamSynchronize(NULL);
        break;
    default: return -1;
    }
    if (rc != CUDA_SUCCESS) {
        const char *text = NULL;
        gpuport_cu.cuGetErrorString(rc, &text);
        snprintf(c->why, sizeof(c->why), "%s failed: %s", call, text ? text : "?");
        return -1;
    }
    if (d)
        c->ptr = (void *)(uintptr_t)d;
    return 0;
}

static void free_gpu(int m, mem_case_t *c)
{
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)c->ptr;

    switch (m) {
    case M_HOST_ALLOC: gpuport_cu.cuMemFreeHost(c->ptr); break;
    case M_HOST_REGISTER:
        gpuport_cu.cuMemHostUnregister(c->ptr);
        free(c->ptr);
        break;
    case M_MANAGED:
    case M_MALLOC_DEVICE: gpuport_cu.cuMemFree(d); break;
    case M_POOL_DEFAULT:
    case M_POOL_EXPORTABLE:
        gpuport_cu.cuMemFreeAsync(d, NULL);
        gpuport_cu.cuStreamSynchronize(NULL);
        if (c->pool)
            gpuport_cu.cuMemPoolDestroy(c->pool);
        break;
    default: break;
    }
}
#endif

/* 0, or -1 with why. gpu: why the CUDA kinds cannot be made, or NULL. */
static int make(int m, gpuport_comm_t comm, const char *gpu, mem_case_t *c)
{
    gpuport_status_t st;

    if (m == M_MALLOC) {
        c->ptr = malloc(TEST_SIZE);
        return c->ptr ? 0 : -1;
    }
    if (m == M_SHARED || m == M_VMM) {
        if (m == M_VMM && gpu) {
            snprintf(c->why, sizeof(c->why), "%s", gpu);
            return -1;
        }
        st = m == M_SHARED ? gpuport_mem_alloc(comm, TEST_SIZE, &c->ptr)
                           : gpuport_mem_alloc_device(comm, TEST_SIZE, &c->ptr);
        if (st)
            snprintf(c->why, sizeof(c->why), "%s: %s", how[m], gpuport_status_string(st));
        return st ? -1 : 0;
    }
    if (gpu) {
        snprintf(c->why, sizeof(c->why), "%s", gpu);
        return -1;
    }
#if GPUPORT_HAVE_CUDA
    return make_gpu(m, c);
#else
    return -1;
#endif
}

static void release(int m, gpuport_comm_t comm, mem_case_t *c)
{
    if (m == M_MALLOC)
        free(c->ptr);
    else if (m == M_SHARED || m == M_VMM)
        gpuport_mem_free(comm, c->ptr);
#if GPUPORT_HAVE_CUDA
    else
        free_gpu(m, c);
#endif
}

/* The library's error message of a refused registration: stderr is caught
 * in a file for the call, and the last message's text (after the
 * "LEVEL subsystem file:line" words of its prefix) kept. */
static gpuport_status_t register_caught(gpuport_comm_t comm, mem_case_t *c, gpuport_mem_t *mem_p)
{
    FILE *tmp = tmpfile();
    char line[1024];
    int saved = -1;
    gpuport_status_t st;

    fflush(stderr);
    if (tmp && (saved = dup(2)) >= 0)
        dup2(fileno(tmp), 2);
    st = gpuport_mem_register(comm, c->ptr, TEST_SIZE, mem_p);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    if (!tmp)
        return st;
    rewind(tmp);
    while (fgets(line, sizeof(line), tmp)) {
        char *p = strstr(line, " ERROR ");
        line[strcspn(line, "\n")] = '\0';
        for (int words = 0; p && words < 3; words++)
            p = strchr(p + 1, ' ');
        if (p)
            snprintf(c->why, sizeof(c->why), "%s", p + 1);
    }
    fclose(tmp);
    return st;
}

/* ---- the output ---- */

static const char *cell(const gpuport_mem_info_tl_t *t)
{
    return t->src_ok && t->dst_ok ? "yes" : t->src_ok ? "src only" : t->dst_ok ? "dst only" : "no";
}

static void print_text(const mem_case_t *cases, const gpuport_mem_info_t *names)
{
    printf("Memory kinds: a %u MiB test allocation of each, registered on a one-rank "
           "communicator (gpuport_mem_info)\n",
           TEST_SIZE >> 20);
    printf("  %-38s %-16s %-6s", "allocation", "kind", "device");
    for (uint32_t t = 0; t < names->ntransports; t++)
        printf(" %-9s", names->tl[t].name);
    printf("\n");
    for (int m = 0; m < M_COUNT; m++) {
        const mem_case_t *c = &cases[m];
        printf("  %-38s ", how[m]);
        if (!c->tried) {
            printf("not tried: %s\n", c->why);
            continue;
        }
        if (c->reg) {
            printf("refused by gpuport_mem_register (%s): %s\n", gpuport_status_string(c->reg),
                   c->why);
            continue;
        }
        printf("%-16s ", gpuport_mem_kind_string(c->info.kind));
        if (c->info.device >= 0)
            printf("%-6d", c->info.device);
        else
            printf("%-6s", "host");
        for (uint32_t t = 0; t < c->info.ntransports; t++)
            printf(" %-9s", cell(&c->info.tl[t]));
        printf("\n");
    }
    printf("Why not:\n");
    for (int m = 0; m < M_COUNT; m++) {
        const mem_case_t *c = &cases[m];
        for (uint32_t t = 0; c->tried && !c->reg && t < c->info.ntransports; t++) {
            const gpuport_mem_info_tl_t *tl = &c->info.tl[t];
            if (!tl->src_ok)
                printf("  %s, %s: %s\n", how[m], tl->name, tl->src_why);
            if (!tl->dst_ok && (tl->src_ok || strcmp(tl->src_why, tl->dst_why)))
                printf("  %s, %s as a destination: %s\n", how[m], tl->name, tl->dst_why);
        }
    }
}

static void print_json(const mem_case_t *cases)
{
    info_json_t j;

    info_json_init(&j, stdout);
    info_json_open(&j, NULL, '{');
    info_json_int(&j, "test_size", TEST_SIZE);
    info_json_open(&j, "memory", '[');
    for (int m = 0; m < M_COUNT; m++) {
        const mem_case_t *c = &cases[m];
        info_json_open(&j, NULL, '{');
        info_json_str(&j, "allocation", how[m]);
        info_json_bool(&j, "tried", c->tried);
        info_json_bool(&j, "registered", c->tried && !c->reg);
        info_json_str(&j, "why", c->tried && !c->reg ? NULL : c->why);
        if (c->tried && !c->reg) {
            info_json_str(&j, "kind", gpuport_mem_kind_string(c->info.kind));
            info_json_int(&j, "device", c->info.device);
            info_json_open(&j, "transports", '[');
            for (uint32_t t = 0; t < c->info.ntransports; t++) {
                const gpuport_mem_info_tl_t *tl = &c->info.tl[t];
                info_json_open(&j, NULL, '{');
                info_json_str(&j, "name", tl->name);
                info_json_bool(&j, "source", tl->src_ok);
                info_json_bool(&j, "destination", tl->dst_ok);
                info_json_str(&j, "source_why", tl->src_ok ? NULL : tl->src_why);
                info_json_str(&j, "destination_why", tl->dst_ok ? NULL : tl->dst_why);
                info_json_close(&j);
            }
            info_json_close(&j);
        }
        info_json_close(&j);
    }
    info_json_close(&j);
    info_json_close(&j);
}

/* Why the CUDA kinds cannot be made here, or NULL; the device made current. */
static const char *gpu_ready(char *why, size_t len)
{
#if GPUPORT_HAVE_CUDA
    CUcontext ctx;
    CUdevice dev;

    if (gpuport_cudrv_load(why, len))
        return why;
    if (gpuport_cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        gpuport_cu.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        gpuport_cu.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        snprintf(why, len, "GPU 0's primary context cannot be made current");
        return why;
    }
    return NULL;
#else
    snprintf(why, len, "this gpuport was built without CUDA");
    return why;
#endif
}

int info_memory_print(int json)
{
    gpuport_bootstrap_t bs = {NULL, 0, 1, 0, 1, one_allgather, one_barrier,
                              one_send, one_recv, NULL, NULL, NULL};
    mem_case_t *cases = calloc(M_COUNT, sizeof(*cases));
    gpuport_mem_info_t names;
    gpuport_comm_t comm;
    gpuport_status_t st;
    char gpu_why[256];
    const char *gpu = gpu_ready(gpu_why, sizeof(gpu_why));
    int named = 0;

    if (!cases)
        return 1;
    st = gpuport_comm_create(&bs, &comm);
    if (st) {
        fprintf(stderr, "gpuport_info -m: gpuport_comm_create: %s\n", gpuport_status_string(st));
        free(cases);
        return 1;
    }
    memset(&names, 0, sizeof(names));
    for (int m = 0; m < M_COUNT; m++) {
        mem_case_t *c = &cases[m];
        gpuport_mem_t mem;
        if (make(m, comm, gpu, c))
            continue;
        c->tried = 1;
        c->reg = register_caught(comm, c, &mem);
        if (!c->reg) {
            gpuport_mem_info(mem, &c->info);
            gpuport_mem_deregister(mem);
            if (!named++)
                names = c->info;
        }
        release(m, comm, c);
    }
    if (json)
        print_json(cases);
    else
        print_text(cases, &names);
    gpuport_comm_destroy(comm);
    free(cases);
    return 0;
}
