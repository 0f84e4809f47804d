/* The flusher's CUDA side; see fcuda.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_FLUSHER
#include "cuda/fcuda.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cudrv.h"
#include "cuda/gpu.h"
#include "log.h"
#include "util.h"

#define INFLIGHT 256 /* events, so batches queued on the GPU at once */

struct gpuport_fcuda {
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr scratch;
    void *host_probe;
    CUevent events[INFLIGHT];
    /* per event: the items it completes (their channels, in order) */
    uint32_t nitems[INFLIGHT];
    uint32_t (*channels)[GPUPORT_FCUDA_BATCH];
    /* per event: the values its VALUE_COPY writes copy from (pinned; an
     * event's row is reused only once the event has completed) */
    uint64_t (*values)[GPUPORT_FCUDA_BATCH];
    uint32_t head, tail; /* recorded, completed */
};

/* Start-up only: waits for the stream with a limit, never on the hot path. */
static gpuport_status_t sync_bounded(struct gpuport_fcuda *c, uint64_t timeout_ns)
{
    /* timeout_ns 0: GPUPORT_TIMEOUT_MS=0, no limit */
    uint64_t deadline = gpuport_deadline(timeout_ns);
    for (;;) {
        CUresult rc = gpuport_cu.cuStreamQuery(c->stream);
        if (rc == CUDA_SUCCESS)
            return GPUPORT_OK;
        if (rc != CUDA_ERROR_NOT_READY)
            return gpuport_cu_status(rc, "cuStreamQuery(warm-up)", __FILE__, __LINE__);
        if (gpuport_deadline_passed(deadline)) {
            log_error("the flusher's warm-up copies did not finish within %llu ms",
                      (unsigned long long)(timeout_ns / 1000000));
            return GPUPORT_ERR_TIMEOUT;
        }
    }
}

/* Every kind of operation the flusher will issue, once, before any user
 * kernel can wait on it: first uses load code and take locks that must not
 * happen while a kernel waits (docs/DESIGN.md, hazard H1). */
static gpuport_status_t warm_up(gpuport_flusher_t *fl, struct gpuport_fcuda *c)
{
    volatile uint64_t *probe;
    CUdeviceptr probe_d;
    gpuport_status_t st;

    st = CU_CALL(cuMemAlloc, (&c->scratch, 256));

    if (!st)
        st = CU_CALL(cuMemsetD8, (c->scratch, 0, 256));
    if (!st)
        st = CU_CALL(cuMemHostAlloc, (&c->host_probe, 64, CU_MEMHOSTALLOC_PORTABLE |
                                                            CU_MEMHOSTALLOC_DEVICEMAP));
    if (st)
        return st;
    probe = c->host_probe;
    probe[0] = 0;
    st = CU_CALL(cuMemHostGetDevicePointer, (&probe_d, c->host_probe, 0));
    if (!st)
        st = CU_CALL(cuMemcpyDtoDAsync, (c->scratch + 128, c->scratch, 64, c->stream));
    /* copies from the application's memory name its context */
    if (!st && fl->gpu)
        st = CU_CALL(cuMemcpyPeerAsync, (c->scratch + 64, c->ctx, fl->gpu->words,
                                         fl->gpu->app_ctx, 8, c->stream));
    /* the staging copies of network transports, both ways */
    if (!st)
        st = CU_CALL(cuMemcpyHtoDAsync, (c->scratch + 192, c->host_probe, 8, c->stream));
    if (!st)
        st = CU_CALL(cuMemcpyDtoHAsync, ((char *)c->host_probe + 8, c->scratch + 192, 8, c->stream));
    if (!st)
        st = CU_CALL(cuStreamWriteValue64, (c->stream, c->scratch, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    if (!st) {
        CUstreamBatchMemOpParams ops[2];
        memset(ops, 0, sizeof(ops));
        for (int i = 0; i < 2; i++) {
            ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
            ops[i].writeValue.address = c->scratch + 8 * (uint64_t)i;
            ops[i].writeValue.value64 = 2;
        }
        st = CU_CALL(cuStreamBatchMemOp, (c->stream, 2, ops, 0));
    }
    if (!st)
        st = CU_CALL(cuStreamWriteValue64, (c->stream, probe_d, 42, CU_STREAM_WRITE_VALUE_DEFAULT));
    if (!st)
        st = CU_CALL(cuEventRecord, (c->events[0], c->stream));
    if (!st)
        st = sync_bounded(c, fl->start_timeout_ns);
    if (!st) {
        CUresult rc = gpuport_cu.cuEventQuery(c->events[0]);
        st = gpuport_cu_status(rc, "cuEventQuery(warm-up)", __FILE__, __LINE__);
    }
    if (!st && probe[0] != 42) {
        log_error("cuStreamWriteValue64 into pinned host memory did not arrive (read %llu, "
                  "expected 42): signals cannot reach peers on this system",
                  (unsigned long long)probe[0]);
        st = GPUPORT_ERR_NOT_SUPPORTED;
    }
    return st;
}

gpuport_status_t gpuport_fcuda_start(gpuport_flusher_t *fl)
{
    struct gpuport_fcuda *c = calloc(1, sizeof(*c));
    CUctxCreateParams params;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUdevice dev;
    gpuport_status_t st;
    uint32_t i;

    if (!c || !(c->channels = calloc(INFLIGHT, sizeof(*c->channels)))) {
        free(c);
        return GPUPORT_ERR_NO_MEMORY;
    }
    memset(&params, 0, sizeof(params));
    st = CU_CALL(cuDeviceGet, (&dev, fl->cuda_device));
    if (!st)
        st = CU_CALL(cuCtxCreate, (&c->ctx, &params, 0, dev));
    if (st)
        goto err;
    /* An application capturing a graph in global mode must not make our
     * calls fail. */
    st = CU_CALL(cuThreadExchangeStreamCaptureMode, (&mode));
    if (!st)
        st = CU_CALL(cuStreamCreate, (&c->stream, CU_STREAM_NON_BLOCKING));
    for (i = 0; !st && i < INFLIGHT; i++)
        st = CU_CALL(cuEventCreate, (&c->events[i], CU_EVENT_DISABLE_TIMING));
    if (!st)
        st = CU_CALL(cuMemHostAlloc, ((void **)&c->values,
                                      (size_t)INFLIGHT * sizeof(*c->values), 0));
    if (!st)
        st = warm_up(fl, c);
    if (st)
        goto err_ctx;
    fl->cuda = c;
    log_debug("private CUDA context on device %d ready", fl->cuda_device);
    return GPUPORT_OK;

err_ctx:
    gpuport_cu.cuCtxDestroy(c->ctx);
err:
    log_error("the flusher could not set up its private CUDA context on device %d",
              fl->cuda_device);
    free(c->channels);
    free(c);
    return st;
}

void gpuport_fcuda_stop(gpuport_flusher_t *fl)
{
    struct gpuport_fcuda *c = fl->cuda;

    if (!c)
        return;
    /* the proxy has drained or abandoned everything; let the copies end */
    sync_bounded(c, fl->start_timeout_ns);
    for (uint32_t i = 0; i < INFLIGHT; i++)
        gpuport_cu.cuEventDestroy(c->events[i]);
    gpuport_cu.cuStreamDestroy(c->stream);
    gpuport_cu.cuMemFree(c->scratch);
    gpuport_cu.cuMemFreeHost(c->host_probe);
    gpuport_cu.cuMemFreeHost(c->values);
    c->values = NULL;
    c->head = c->tail = 0;
}

void gpuport_fcuda_release(gpuport_flusher_t *fl)
{
    struct gpuport_fcuda *c = fl->cuda;

    if (!c)
        return;
    gpuport_cu.cuCtxDestroy(c->ctx);
    free(c->channels);
    free(c);
    fl->cuda = NULL;
}

int gpuport_fcuda_room(gpuport_flusher_t *fl)
{
    return fl->cuda->head - fl->cuda->tail < INFLIGHT;
}

uint32_t gpuport_fcuda_inflight(gpuport_flusher_t *fl)
{
    return fl->cuda ? fl->cuda->head - fl->cuda->tail : 0;
}

int gpuport_fcuda_idle(gpuport_flusher_t *fl)
{
    return fl->cuda == NULL || fl->cuda->head == fl->cuda->tail;
}

/* Items w[i], w[i+1], ... that one call can issue: a run of write-values,
 * or a copy and the copies that continue it (same kind and context, source
 * and destination both contiguous). */
static uint32_t group(const gpuport_work_t *w, uint32_t i, uint32_t n)
{
    uint32_t j = i + 1;

    if (w[i].kind == GPUPORT_WORK_CU_WRITE) {
        while (j < n && w[j].kind == GPUPORT_WORK_CU_WRITE && w[j].flags == w[i].flags)
            j++;
        return j - i;
    }
    while (j < n && w[j].kind == w[i].kind && w[j].flags == w[i].flags &&
           (const char *)w[j].src == (const char *)w[j - 1].src + w[j - 1].size &&
           (char *)w[j].dst == (char *)w[j - 1].dst + w[j - 1].size)
        j++;
    return j - i;
}

/* Values written by copies, from vals (the event's row, from this group's
 * first item on). */
static gpuport_status_t copy_values(struct gpuport_fcuda *c, const gpuport_work_t *w, uint32_t k,
                                    uint64_t *vals)
{
    gpuport_status_t st = GPUPORT_OK;

    for (uint32_t i = 0; i < k && !st; i++) {
        vals[i] = w[i].value;
        st = CU_CALL(cuMemcpyHtoDAsync,
                     ((CUdeviceptr)(uintptr_t)w[i].dst, &vals[i], sizeof(vals[i]), c->stream));
    }
    return st;
}

static gpuport_status_t issue_group(struct gpuport_fcuda *c, gpuport_flusher_t *fl,
                                    const gpuport_work_t *w, uint32_t k, uint64_t *vals)
{
    CUdeviceptr dst = (CUdeviceptr)(uintptr_t)w->dst, src = (CUdeviceptr)(uintptr_t)w->src;
    uint64_t size = 0;

    if (w->kind == GPUPORT_WORK_CU_WRITE && (w->flags & GPUPORT_WORK_VALUE_COPY))
        return copy_values(c, w, k, vals);
    if (w->kind == GPUPORT_WORK_CU_WRITE) {
        CUstreamBatchMemOpParams ops[GPUPORT_FCUDA_BATCH];
        if (k == 1)
            return CU_CALL(cuStreamWriteValue64,
                           (c->stream, dst, w->value, CU_STREAM_WRITE_VALUE_DEFAULT));
        memset(ops, 0, k * sizeof(ops[0]));
        for (uint32_t i = 0; i < k; i++) {
            ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
            ops[i].writeValue.address = (CUdeviceptr)(uintptr_t)w[i].dst;
            ops[i].writeValue.value64 = w[i].value;
        }
        return CU_CALL(cuStreamBatchMemOp, (c->stream, k, ops, 0));
    }
    for (uint32_t i = 0; i < k; i++)
        size += w[i].size;
    if (w->kind == GPUPORT_WORK_CU_COPY) {
        /* sources belong to the application's context, destinations (peer
         * handles) to ours: a peer copy names both */
        if (w->flags & GPUPORT_WORK_SRC_APP) {
            gpuport_status_t st;
            atomic_store_explicit(&fl->app_call_since_ns, gpuport_now_ns(),
                                  memory_order_relaxed);
            st = CU_CALL(cuMemcpyPeerAsync, (dst, c->ctx, src, fl->gpu->app_ctx, size,
                                             c->stream));
            atomic_store_explicit(&fl->app_call_since_ns, 0, memory_order_relaxed);
            return st;
        }
        if (w->flags & GPUPORT_WORK_DST_APP) {
            gpuport_status_t st;
            atomic_store_explicit(&fl->app_call_since_ns, gpuport_now_ns(),
                                  memory_order_relaxed);
            st = CU_CALL(cuMemcpyPeerAsync, (dst, fl->gpu->app_ctx, src, c->ctx, size,
                                             c->stream));
            atomic_store_explicit(&fl->app_call_since_ns, 0, memory_order_relaxed);
            return st;
        }
        return CU_CALL(cuMemcpyDtoDAsync, (dst, src, size, c->stream));
    }
    if (w->kind == GPUPORT_WORK_CU_TO_DEVICE)
        /* memory mapped for the device (VMM): ours to write directly */
        return CU_CALL(cuMemcpyHtoDAsync, (dst, w->src, size, c->stream));
    return CU_CALL(cuMemcpyDtoHAsync, (w->dst, src, size, c->stream));
}

void gpuport_fcuda_issue(gpuport_flusher_t *fl, const gpuport_work_t *w, uint32_t n)
{
    struct gpuport_fcuda *c = fl->cuda;
    uint32_t slot = c->head % INFLIGHT, queued = 0;
    gpuport_status_t st;

    for (uint32_t i = 0; i < n;) {
        uint32_t k = group(w, i, n);
        st = issue_group(c, fl, &w[i], k, &c->values[slot][queued]);
        for (uint32_t j = i; j < i + k; j++) {
            if (st)
                gpuport_flusher_complete(fl, w[j].channel, st);
            else
                c->channels[slot][queued++] = w[j].channel;
        }
        i += k;
    }
    if (queued == 0)
        return;
    st = CU_CALL(cuEventRecord, (c->events[slot], c->stream));
    if (st) {
        for (uint32_t j = 0; j < queued; j++)
            gpuport_flusher_complete(fl, c->channels[slot][j], st);
        return;
    }
    c->nitems[slot] = queued;
    c->head++;
}

int gpuport_fcuda_progress(gpuport_flusher_t *fl)
{
    struct gpuport_fcuda *c = fl->cuda;
    int n = 0;

    while (c->tail != c->head) {
        uint32_t slot = c->tail % INFLIGHT;
        CUresult rc = gpuport_cu.cuEventQuery(c->events[slot]);
        gpuport_status_t st;
        if (rc == CUDA_ERROR_NOT_READY)
            break;
        st = gpuport_cu_status(rc, "cuEventQuery(copy or signal)", __FILE__, __LINE__);
        for (uint32_t j = 0; j < c->nitems[slot]; j++)
            gpuport_flusher_complete(fl, c->channels[slot][j], st);
        c->tail++;
        n += (int)c->nitems[slot];
    }
    return n;
}

gpuport_status_t gpuport_fcuda_ctx_push(gpuport_flusher_t *fl)
{
    if (!fl->cuda)
        return GPUPORT_ERR_NOT_SUPPORTED;
    return CU_CALL(cuCtxPushCurrent, (fl->cuda->ctx));
}

void gpuport_fcuda_ctx_pop(void)
{
    CUcontext ctx;
    gpuport_cu.cuCtxPopCurrent(&ctx);
}
