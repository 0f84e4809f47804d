/* The flusher thread; see flusher.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_FLUSHER
#include "flusher.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "accumulate.h"
#include "cuda/fcuda.h"
#include "log.h"
#include "topology.h"

/* process_vm_writev moves at most this much per iovec pass; loop for more */
#define CMA_CHUNK (1ull << 30)

static gpuport_status_t cma_write(int pid, void *dst, const void *src, uint64_t size)
{
    while (size > 0) {
        size_t n = size > CMA_CHUNK ? CMA_CHUNK : (size_t)size;
        struct iovec local = {(void *)src, n}, remote = {dst, n};
        ssize_t done = process_vm_writev(pid, &local, 1, &remote, 1, 0);
        /* no errno without a failure: a write of nothing leaves an old one */
        int err = done < 0 ? errno : 0;
        if (done <= 0) {
            log_error("process_vm_writev(pid %d, %p, %zu bytes) failed: %s", pid, dst, n,
                      err ? strerror(err) : "no progress");
            return err == ESRCH ? GPUPORT_ERR_PEER : GPUPORT_ERR_TRANSPORT;
        }
        dst = (char *)dst + done;
        src = (const char *)src + done;
        size -= (uint64_t)done;
    }
    return GPUPORT_OK;
}

static gpuport_status_t cma_read(int pid, void *dst, const void *src, uint64_t size)
{
    while (size > 0) {
        size_t n = size > CMA_CHUNK ? CMA_CHUNK : (size_t)size;
        struct iovec local = {dst, n}, remote = {(void *)src, n};
        ssize_t done = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        int err = done < 0 ? errno : 0;
        if (done <= 0) {
            log_error("process_vm_readv(pid %d, %p, %zu bytes) failed: %s", pid, src, n,
                      err ? strerror(err) : "no progress");
            return err == ESRCH ? GPUPORT_ERR_PEER : GPUPORT_ERR_TRANSPORT;
        }
        dst = (char *)dst + done;
        src = (const char *)src + done;
        size -= (uint64_t)done;
    }
    return GPUPORT_OK;
}

/* One release store where dst is 8-aligned, so a reader of the word sees the
 * old value or the new; a region registered at an odd address gets the
 * bytes after a release fence instead. */
static void store64(void *dst, uint64_t value)
{
    if (((uintptr_t)dst & 7) == 0) {
        atomic_store_explicit((_Atomic uint64_t *)dst, value, memory_order_release);
    } else {
        atomic_thread_fence(memory_order_release);
        memcpy(dst, &value, sizeof(value));
    }
}

gpuport_status_t gpuport_work_execute(const gpuport_work_t *w)
{
    switch (w->kind) {
    case GPUPORT_WORK_MEMCPY:
        memcpy(w->dst, w->src, w->size);
        return GPUPORT_OK;
    case GPUPORT_WORK_CMA_WRITE:
        return cma_write(w->pid, w->dst, (w->flags & GPUPORT_WORK_SRC_VALUE) ? &w->value : w->src,
                         w->size);
    case GPUPORT_WORK_STORE64:
        store64(w->dst, w->value);
        return GPUPORT_OK;
    case GPUPORT_WORK_SEM_ADD:
        atomic_fetch_add_explicit(w->sem, w->value, memory_order_release);
        return GPUPORT_OK;
    case GPUPORT_WORK_CMA_READ:
        return cma_read(w->pid, w->dst, w->src, w->size);
    case GPUPORT_WORK_ADD64:
        gpuport_add64(w->dst, w->value);
        return GPUPORT_OK;
    case GPUPORT_WORK_ACCUMULATE:
        gpuport_acc_apply(w->dst, w->src, w->size, (uint32_t)w->value);
        return GPUPORT_OK;
    }
    log_error("flusher work item of unknown kind %u for channel %u", w->kind, w->channel);
    return GPUPORT_ERR_INTERNAL;
}

/* GPUPORT_LOG_LEVEL=trace: a line per item, as it runs (host items, with
 * their result) or is issued to the GPU. Called only with trace on. */
static void trace_item(const gpuport_work_t *w, const char *what)
{
    static const char *const names[] = {
        [GPUPORT_WORK_MEMCPY] = "memcpy",         [GPUPORT_WORK_CMA_WRITE] = "cma_write",
        [GPUPORT_WORK_SEM_ADD] = "sem_add",       [GPUPORT_WORK_CU_COPY] = "cu_copy",
        [GPUPORT_WORK_CU_WRITE] = "cu_write",     [GPUPORT_WORK_CU_TO_DEVICE] = "cu_to_device",
        [GPUPORT_WORK_CU_FROM_DEVICE] = "cu_from_device", [GPUPORT_WORK_STORE64] = "store64",
        [GPUPORT_WORK_CMA_READ] = "cma_read",     [GPUPORT_WORK_ADD64] = "add64",
        [GPUPORT_WORK_ACCUMULATE] = "accumulate"};
    const char *name = w->kind < sizeof(names) / sizeof(names[0]) && names[w->kind]
                           ? names[w->kind]
                           : "unknown";

    log_trace("item %s for %s %u: dst %p, src %p, size %llu, value 0x%llx: %s", name,
              (w->channel & GPUPORT_WORK_CONN) ? "connection" : "channel",
              w->channel & ~GPUPORT_WORK_CONN,
              w->kind == GPUPORT_WORK_SEM_ADD ? (void *)w->sem : w->dst, w->src,
              (unsigned long long)w->size,
              (unsigned long long)w->value, what);
}

static void futex_wait(_Atomic int *addr, int expected, long timeout_ns)
{
    struct timespec ts = {0, timeout_ns};
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

static void futex_wake(_Atomic int *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Takes the next work if it can be started now; 1 if some was taken. CUDA
 * items are issued on the private stream in batches (a run of them, at
 * most GPUPORT_FCUDA_BATCH, behind one event) and complete later; host
 * items run here, but only once queued CUDA work is done, so that items
 * complete in the order they were posted. Items leave the work ring before
 * their completion is reported: the proxy counts room as posted minus
 * completions read and may post again the moment it reads one. */
static int take_work(gpuport_flusher_t *fl)
{
    gpuport_work_t *slot = gpuport_ring_peek(&fl->work), w, batch[GPUPORT_FCUDA_BATCH];
    gpuport_status_t status;
    uint32_t n = 0;

    if (!slot)
        return 0;
    if (gpuport_work_is_cuda(slot->kind)) {
        if (!fl->cuda) {
            w = *slot;
            gpuport_ring_pop(&fl->work);
            log_error("CUDA work for channel %u, but this flusher has no CUDA context",
                      w.channel);
            gpuport_flusher_complete(fl, w.channel, GPUPORT_ERR_NOT_SUPPORTED);
            return 1;
        }
        if (!gpuport_fcuda_room(fl))
            return 0;
        while (n < GPUPORT_FCUDA_BATCH && (slot = gpuport_ring_peek_at(&fl->work, n)) != NULL &&
               gpuport_work_is_cuda(slot->kind))
            n++;
        /* While the GPU still has two batches to run, a batch that may yet
         * grow (the ring ended, not at a host item) waits for more items:
         * the stream stays busy, and the driver calls (one per batch, a few
         * microseconds each) are spread over more items. Measured on one
         * H200 before this: put_value reached 0.77 M/s, 53 % of the
         * 128-per-call write-value rate. */
        if (n < GPUPORT_FCUDA_BATCH && slot == NULL && gpuport_fcuda_inflight(fl) >= 2)
            return 0;
        for (uint32_t i = 0; i < n; i++)
            batch[i] = *(gpuport_work_t *)gpuport_ring_peek_at(&fl->work, i);
        gpuport_ring_pop_n(&fl->work, n);
        if (GPUPORT_LOG_ON(GPUPORT_LOG_TRACE))
            for (uint32_t i = 0; i < n; i++)
                trace_item(&batch[i], "issued to the GPU");
        gpuport_fcuda_issue(fl, batch, n);
        return 1;
    }
    if (!gpuport_fcuda_idle(fl))
        return 0;
    w = *slot;
    gpuport_ring_pop(&fl->work);
    status = gpuport_work_execute(&w);
    if (GPUPORT_LOG_ON(GPUPORT_LOG_TRACE))
        trace_item(&w, status ? gpuport_status_string(status) : "done");
    gpuport_flusher_complete(fl, w.channel, status);
    return 1;
}

static void *flusher_main(void *arg)
{
    gpuport_flusher_t *fl = arg;
    uint32_t idle = 0;

    gpuport_log_set_rank(fl->rank);
    gpuport_topology_bind_self(fl->topo, fl->cpu);
    if (fl->cuda_device >= 0) {
        gpuport_status_t st = gpuport_fcuda_start(fl);
        if (st) {
            atomic_store(&fl->ready, (int)st);
            return NULL;
        }
    }
    atomic_store(&fl->ready, 1);
    for (;;) {
        int progressed = fl->cuda ? gpuport_fcuda_progress(fl) : 0;
        progressed += take_work(fl);
        if (progressed) {
            /* every completion is reported inside one of the two calls
             * above: one poke covers a batch of them */
            if (fl->proxy_waker)
                gpuport_waker_poke(fl->proxy_waker);
            idle = 0;
            continue;
        }
        if (atomic_load_explicit(&fl->stop, memory_order_acquire) &&
            gpuport_ring_empty(&fl->work) && gpuport_fcuda_idle(fl))
            break;
        /* While the GPU has our work, keep polling its events. */
        if (!gpuport_fcuda_idle(fl) || ++idle < 2000) {
            if (idle > 1000)
                sched_yield();
            continue;
        }
        /* Sleep until posted to; the timeout is only a safety net. */
        atomic_store(&fl->sleeping, 1);
        if (gpuport_ring_empty(&fl->work) && !atomic_load(&fl->stop))
            futex_wait(&fl->sleeping, 1, 10 * 1000 * 1000);
        atomic_store(&fl->sleeping, 0);
        /* idle stays high: after a timeout with nothing to do, sleep again at
         * once instead of spinning first (work resets it) */
    }
    gpuport_fcuda_stop(fl);
    return NULL;
}

/* The thread; in GPU mode only once its private context is made and every
 * CUDA operation it uses exercised, before any kernel can wait on it. */
static gpuport_status_t start_thread(gpuport_flusher_t *fl)
{
    int rc, ready;

    rc = pthread_create(&fl->thread, NULL, flusher_main, fl);
    if (rc) {
        log_error("cannot start the flusher thread: pthread_create: %s", strerror(rc));
        return GPUPORT_ERR_NO_RESOURCE;
    }
    while (fl->cuda_device >= 0 && (ready = atomic_load(&fl->ready)) == 0)
        sched_yield();
    if (fl->cuda_device >= 0 && ready < 0) {
        pthread_join(fl->thread, NULL);
        return (gpuport_status_t)ready;
    }
    atomic_store_explicit(&fl->running, 1, memory_order_release);
    return GPUPORT_OK;
}

gpuport_status_t gpuport_flusher_start(gpuport_flusher_t *fl, uint32_t capacity, int rank,
                                       int cuda_device, struct gpuport_gpu *gpu,
                                       uint64_t timeout_ns, struct gpuport_topology *topo,
                                       int cpu)
{
    gpuport_status_t status;

    memset(fl, 0, sizeof(*fl));
    fl->capacity = capacity;
    fl->rank = rank;
    fl->cuda_device = cuda_device;
    fl->gpu = gpu;
    fl->start_timeout_ns = timeout_ns;
    fl->topo = topo;
    fl->cpu = cpu;
    status = gpuport_ring_init(&fl->work, capacity, sizeof(gpuport_work_t));
    if (status)
        goto err;
    status = gpuport_ring_init(&fl->done, capacity, sizeof(gpuport_work_done_t));
    if (status)
        goto err_work;
    /* without a GPU the thread waits for the first work (gpuport_flusher_post) */
    if (cuda_device >= 0) {
        status = start_thread(fl);
        if (status)
            goto err_done;
    }
    fl->started = 1;
    return GPUPORT_OK;

err_done:
    gpuport_ring_fini(&fl->done);
err_work:
    gpuport_ring_fini(&fl->work);
err:
    if (status == GPUPORT_ERR_NO_MEMORY)
        log_error("cannot allocate flusher rings of %u items", capacity);
    return status;
}

gpuport_status_t gpuport_flusher_post(gpuport_flusher_t *fl, const gpuport_work_t *w)
{
    if (!atomic_load_explicit(&fl->running, memory_order_relaxed)) {
        gpuport_status_t st = start_thread(fl);
        if (st)
            return st;
    }
    if (gpuport_ring_push(&fl->work, w) != 0) {
        /* has_room was not checked: a proxy bug, not a runtime condition */
        log_error("flusher ring full although the proxy counted room (channel %u)", w->channel);
        return GPUPORT_ERR_INTERNAL;
    }
    fl->outstanding++;
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&fl->sleeping, memory_order_relaxed)) {
        atomic_store(&fl->sleeping, 0);
        futex_wake(&fl->sleeping);
    }
    return GPUPORT_OK;
}

void gpuport_flusher_stop(gpuport_flusher_t *fl)
{
    if (!fl->started)
        return;
    if (atomic_load(&fl->running)) {
        atomic_store_explicit(&fl->stop, 1, memory_order_release);
        atomic_store(&fl->sleeping, 0);
        futex_wake(&fl->sleeping);
        pthread_join(fl->thread, NULL);
        atomic_store(&fl->running, 0);
    }
    fl->started = 0;
    gpuport_ring_fini(&fl->done);
    gpuport_ring_fini(&fl->work);
}
