/*
 * The flusher thread: executes long or ordered work that the proxy hands it
 * through a lock-free single-producer ring, in order, and reports each item's
 * completion through a second ring. On a CPU build its work is host copies
 * (memcpy into a peer's shared mapping, process_vm_writev into a peer's
 * private memory) and semaphore increments that must follow them; the CUDA
 * build adds copy-engine work in a private context. Only the proxy thread
 * posts work and reads completions.
 */
#ifndef GPUPORT_FLUSHER_H
#define GPUPORT_FLUSHER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ring.h"
#include "waker.h"

typedef enum {
    GPUPORT_WORK_MEMCPY = 1,    /* dst <- src, size bytes, both mapped here */
    GPUPORT_WORK_CMA_WRITE = 2, /* pid's dst <- local src, process_vm_writev */
    GPUPORT_WORK_SEM_ADD = 3,   /* *sem += value, release */
    GPUPORT_WORK_CU_COPY = 4,   /* copy engine: dst (flusher context) <- src (GPUPORT_WORK_SRC_APP:
                                 * the application's context; else the flusher's) */
    GPUPORT_WORK_CU_WRITE = 5,  /* cuStreamWriteValue64(dst, value), after earlier copies */
    /* network transports' staging: one side pinned host memory registered in
     * the flusher's context, the other GPU memory mapped for the device (VMM),
     * which the flusher's context copies directly */
    GPUPORT_WORK_CU_TO_DEVICE = 6,  /* device dst <- pinned host src */
    GPUPORT_WORK_CU_FROM_DEVICE = 7, /* pinned host dst <- device src */
    GPUPORT_WORK_STORE64 = 8,       /* *(uint64_t *)dst = value, release (mapped here) */
    /* get, atomic_add and accumulate on host memory (accumulate.h) */
    GPUPORT_WORK_CMA_READ = 9,      /* local dst <- pid's src, process_vm_readv */
    GPUPORT_WORK_ADD64 = 10,        /* *(uint64_t *)dst += value, atomically (mapped here) */
    GPUPORT_WORK_ACCUMULATE = 11    /* dst += src, elements of op `value` (GPUPORT_OP_ACC_*),
                                     * each atomically (mapped here) */
} gpuport_work_kind_t;

static inline int gpuport_work_is_cuda(uint32_t kind)
{
    return kind >= GPUPORT_WORK_CU_COPY && kind <= GPUPORT_WORK_CU_FROM_DEVICE;
}

typedef struct gpuport_work {
    uint32_t kind;
    uint32_t channel;
    void *dst;
    const void *src;
    uint64_t size;
    _Atomic uint64_t *sem;
    uint64_t value;
    int32_t pid;
    uint32_t flags; /* GPUPORT_WORK_* flags */
} gpuport_work_t;

/* CU_COPY: the source is legacy device memory of the application's context
 * (cudaMalloc), so the copy names that context */
#define GPUPORT_WORK_SRC_APP 0x1u
/* CMA_WRITE: the source is the item's own value (size 8), not src: a
 * put_value into a peer's private memory, queued or not */
#define GPUPORT_WORK_SRC_VALUE 0x2u
/* CU_WRITE: the value goes by an 8-byte copy from the flusher's pinned
 * host memory, not by a stream memory operation, which stream-ordered pool
 * memory refuses (CUDA_ERROR_INVALID_VALUE, measured on H200, CUDA 13) */
#define GPUPORT_WORK_VALUE_COPY 0x4u
/* CU_COPY: the destination is legacy device memory of the application's
 * context (a get into cudaMalloc memory), the source the flusher's */
#define GPUPORT_WORK_DST_APP 0x8u

/* Work a transport posts for itself (gpuport_tl_post) carries this bit
 * and the connection's index in place of a channel id. */
#define GPUPORT_WORK_CONN 0x80000000u

typedef struct gpuport_work_done {
    uint32_t channel;
    int32_t status;
} gpuport_work_done_t;

typedef struct gpuport_flusher {
    gpuport_ring_t work; /* proxy -> flusher */
    gpuport_ring_t done; /* flusher -> proxy, never fuller than `work` allows */
    uint32_t capacity;
    uint32_t outstanding; /* proxy's count: posted minus completions read */
    _Atomic int stop;
    _Atomic int sleeping;
    pthread_t thread;
    int started; /* the rings are there (gpuport_flusher_start) */
    /* the thread is: at start in GPU mode, else at the first work posted
     * (proxy thread), so a host-only communicator whose work is all done
     * by the proxy and its callers has no flusher thread at all; set with
     * release after `thread` (gpuport_comm_stats reads both) */
    _Atomic int running;
    int rank;
    _Atomic uint64_t completed; /* flusher's count (GPUPORT_STAT_INC), for stats */
    /* GPU mode: the flusher owns a private CUDA context on this device */
    int cuda_device;    /* -1: no CUDA work */
    struct gpuport_gpu *gpu; /* the communicator's GPU: the application's context */
    struct gpuport_fcuda *cuda;
    _Atomic int ready;  /* 0 starting, 1 ready, <0 failed (a gpuport_status_t) */
    uint64_t start_timeout_ns;
    struct gpuport_topology *topo; /* the thread first binds itself */
    int cpu;                       /* to this PU; -1: unbound */
    /* the proxy's, poked once after each pass of the flusher that reported
     * completions, so that a sleeping proxy reads them at once; NULL:
     * nobody to wake (set by the proxy before it posts work) */
    gpuport_waker_t *proxy_waker;
    /* when the flusher's current CUDA call that names the application's
     * context began (gpuport_now_ns); 0: in no such call. CUDA holds such a
     * call while an application thread sits in a synchronous cudaMemcpy
     * (docs/ARCHITECTURE.md); the proxy watches this to say so. */
    _Atomic uint64_t app_call_since_ns;
} gpuport_flusher_t;

/* Executes one work item on the calling thread. Shared with the proxy, which
 * runs short copies inline. */
gpuport_status_t gpuport_work_execute(const gpuport_work_t *w);

/* cuda_device >= 0 (GPU mode): the flusher creates its private context
 * there and exercises every CUDA operation it uses before this returns.
 * Without a GPU (-1) only the rings are made here and the thread starts at
 * the first gpuport_flusher_post. The thread is bound to PU cpu (>= 0)
 * before anything else. */
gpuport_status_t gpuport_flusher_start(gpuport_flusher_t *fl, uint32_t capacity, int rank,
                                       int cuda_device, struct gpuport_gpu *gpu,
                                       uint64_t timeout_ns, struct gpuport_topology *topo,
                                       int cpu);
/* Flusher thread: reports one item's completion (and counts it). The
 * proxy never has more items outstanding than `done` holds, so the push
 * cannot fail. */
static inline void gpuport_flusher_complete(gpuport_flusher_t *fl, uint32_t channel,
                                            gpuport_status_t status)
{
    gpuport_work_done_t done = {channel, status};

    while (gpuport_ring_push(&fl->done, &done) != 0)
        ;
    GPUPORT_STAT_INC(fl->completed);
}
/* Drains queued work, then joins the thread. */
void gpuport_flusher_stop(gpuport_flusher_t *fl);

/* Proxy side: room for n more items? */
static inline int gpuport_flusher_has_room(const gpuport_flusher_t *fl, uint32_t n)
{
    return fl->outstanding + n <= fl->capacity;
}

/* Proxy side: queues one item; the caller checked has_room. Starts the
 * thread if it is not running yet, wakes it if it sleeps. Not queued (and
 * logged): GPUPORT_ERR_NO_RESOURCE if the thread could not start,
 * GPUPORT_ERR_INTERNAL if the ring had no room after all. */
gpuport_status_t gpuport_flusher_post(gpuport_flusher_t *fl, const gpuport_work_t *w);

/* Proxy side: next completion or NULL; gpuport_flusher_release frees it. */
static inline gpuport_work_done_t *gpuport_flusher_poll(gpuport_flusher_t *fl)
{
    return (gpuport_work_done_t *)gpuport_ring_peek(&fl->done);
}

static inline void gpuport_flusher_release(gpuport_flusher_t *fl)
{
    gpuport_ring_pop(&fl->done);
    fl->outstanding--;
}

#endif
