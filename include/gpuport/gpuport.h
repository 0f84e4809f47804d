/*
 * gpuport public host API.
 *
 * A communicator (gpuport_comm_t) is created from a bootstrap (MPI: see
 * gpuport_mpi.h) and owns one proxy service: a proxy thread that consumes the
 * communicator's trigger FIFO and a flusher thread that performs long copies.
 * Port channels bind a peer, a local source region and the peer's destination
 * region; their operations are pushed into the FIFO and carried out by the
 * proxy. Every call returns a gpuport_status_t; output arguments end in _p and
 * are written only on success, with one exception: gpuport_comm_create (and
 * gpuport_comm_init_mpi) set *comm_p to NULL when they fail. A NULL handle
 * or NULL output pointer is refused with GPUPORT_ERR_INVALID_ARG and a
 * message naming the call (gpuport_comm_rank and _size return -1,
 * gpuport_channel_transport "none").
 */
#ifndef GPUPORT_GPUPORT_H
#define GPUPORT_GPUPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUPORT_VERSION_MAJOR 0
#define GPUPORT_VERSION_MINOR 1
#define GPUPORT_VERSION_PATCH 0

/* Marks what the libraries export. They are built with -fvisibility=hidden,
 * so the functions declared with GPUPORT_API in these headers are all that a
 * program can link to; everything else stays inside the library. */
#if defined(__GNUC__)
#define GPUPORT_API __attribute__((visibility("default")))
#else
#define GPUPORT_API
#endif

/* Errors are negative and grouped by kind, one decade per kind. */
typedef enum {
    GPUPORT_OK = 0,
    GPUPORT_ERR_INVALID_ARG = -1,    /* a bad argument to a call */
    GPUPORT_ERR_INVALID_CONFIG = -2, /* a bad GPUPORT_* value */
    GPUPORT_ERR_OUT_OF_RANGE = -3,   /* offset/size outside a registered region */
    GPUPORT_ERR_NOT_SUPPORTED = -10, /* feature or transport not available */
    GPUPORT_ERR_NO_MEMORY = -20,
    GPUPORT_ERR_NO_RESOURCE = -21,   /* channel ids, segments, threads */
    GPUPORT_ERR_AGAIN = -22,         /* non-blocking call: try again */
    GPUPORT_ERR_BUSY = -23,          /* in use (a region that live channels use) */
    GPUPORT_ERR_TRANSPORT = -30,     /* a transport operation failed */
    GPUPORT_ERR_PEER = -40,          /* the peer failed or disappeared */
    GPUPORT_ERR_TIMEOUT = -50,       /* a blocking call ran past its limit */
    GPUPORT_ERR_VERSION = -60,       /* peers run different library versions, or a
                                      * program and libgpuport_mpi different MPIs */
    GPUPORT_ERR_SHUTDOWN = -71,      /* the communicator is stopping */
    GPUPORT_ERR_INTERNAL = -99
} gpuport_status_t;

GPUPORT_API const char *gpuport_status_string(gpuport_status_t status);

/* "0.1.0"; the version this library was built as. */
GPUPORT_API const char *gpuport_version_string(void);

/*
 * Bootstrap: how a communicator talks to its peers while it sets up. The MPI
 * bootstrap (gpuport_mpi.h) fills one in; tests and other launchers may supply
 * their own. Calls happen only on the thread that calls gpuport_comm_*,
 * gpuport_mem_* and gpuport_channel_create, never on the proxy thread.
 * Ranks that share a host are identified by gpuport itself (host identity),
 * so local_rank/local_size are informational.
 */
typedef struct gpuport_bootstrap {
    void *ctx;
    int rank;
    int size;
    int local_rank;
    int local_size;
    /* every rank contributes `bytes` bytes; recv holds size*bytes, rank order */
    gpuport_status_t (*allgather)(void *ctx, const void *send, void *recv, size_t bytes);
    gpuport_status_t (*barrier)(void *ctx);
    gpuport_status_t (*send)(void *ctx, int peer, int tag, const void *buf, size_t bytes);
    gpuport_status_t (*recv)(void *ctx, int peer, int tag, void *buf, size_t bytes);
    /* called once by gpuport_comm_destroy (or on a failed create); may be
     * NULL when the caller keeps the bootstrap for later communicators */
    void (*destroy)(void *ctx);
} gpuport_bootstrap_t;

typedef struct gpuport_comm *gpuport_comm_t;
typedef struct gpuport_mem *gpuport_mem_t;
typedef struct gpuport_channel *gpuport_channel_t;

/*
 * Takes ownership of the bootstrap (its destroy runs with the communicator's,
 * also when creation fails). Collective over the bootstrap's ranks: reads the
 * GPUPORT_* configuration, exchanges a versioned record with every rank and
 * starts the proxy service. On failure *comm_p is NULL (when comm_p is not),
 * so a program that goes on regardless gets GPUPORT_ERR_INVALID_ARG from the
 * next call instead of using an uninitialized handle.
 */
GPUPORT_API gpuport_status_t gpuport_comm_create(const gpuport_bootstrap_t *bootstrap,
                                                 gpuport_comm_t *comm_p);

/*
 * Collective. Stops the proxy service: triggers already in the FIFO are
 * carried out (or, if they cannot complete within the configured timeout,
 * failed and counted in the log); then every channel and registration still
 * open is released.
 */
GPUPORT_API gpuport_status_t gpuport_comm_destroy(gpuport_comm_t comm);

GPUPORT_API int gpuport_comm_rank(gpuport_comm_t comm);
GPUPORT_API int gpuport_comm_size(gpuport_comm_t comm);

/* What the proxy service has done and cost so far, for tools and tuning. */
typedef struct gpuport_comm_stats {
    uint64_t triggers;        /* triggers the proxy carried out */
    uint64_t rejected;        /* triggers it refused (bad channel, offsets, op) */
    uint64_t flusher_items;   /* work items the flusher completed */
    uint64_t proxy_cpu_ns;    /* CPU time used by the proxy thread */
    uint64_t flusher_cpu_ns;  /* CPU time used by the flusher thread */
} gpuport_comm_stats_t;

GPUPORT_API gpuport_status_t gpuport_comm_stats(gpuport_comm_t comm, gpuport_comm_stats_t *stats_p);

/* Memory. Host memory from malloc (or anywhere) can be registered; memory
 * from gpuport_mem_alloc is shared-mappable, so same-host peers copy into it
 * directly instead of through the kernel. */
GPUPORT_API gpuport_status_t gpuport_mem_alloc(gpuport_comm_t comm, size_t size, void **ptr_p);
/* GPU memory on the communicator's GPU for channels over every transport:
 * CUDA VMM memory made with a POSIX file-descriptor handle (shared with
 * same-host peers by descriptor, registered with NICs by dma-buf), mapped
 * read-write for the device, so gpuport's own CUDA context reaches it
 * without the application's (a copy into cudaMalloc memory from another
 * context waits for the application's queued work). size is rounded up to
 * the device's allocation granularity. Kernels use it like cudaMalloc
 * memory. Needs GPU mode; works whether or not the application made a CUDA
 * context. */
GPUPORT_API gpuport_status_t gpuport_mem_alloc_device(gpuport_comm_t comm, size_t size,
                                                      void **ptr_p);
/* Frees memory from gpuport_mem_alloc or gpuport_mem_alloc_device. */
GPUPORT_API gpuport_status_t gpuport_mem_free(gpuport_comm_t comm, void *ptr);
GPUPORT_API gpuport_status_t gpuport_mem_register(gpuport_comm_t comm, void *ptr, size_t size,
                                                  gpuport_mem_t *mem_p);
GPUPORT_API gpuport_status_t gpuport_mem_deregister(gpuport_mem_t mem);

/*
 * Creates a port channel to `peer`. Pairwise collective: `peer` must call it
 * with this rank as its peer, and two ranks create their channels to each
 * other in the same order. `src` is the local region puts read from (NULL if
 * this side never puts); `dst` is the local region the peer's puts on its
 * side of this channel write into (NULL if the peer never puts). The
 * transport is chosen here (GPUPORT_TRANSPORT); a forced transport that
 * cannot reach the peer fails on both sides with a message saying why.
 */
GPUPORT_API gpuport_status_t gpuport_channel_create(gpuport_comm_t comm, int peer,
                                                    gpuport_mem_t src, gpuport_mem_t dst,
                                                    gpuport_channel_t *channel_p);
GPUPORT_API gpuport_status_t gpuport_channel_destroy(gpuport_channel_t channel);

/* Operations. put and signal return once the trigger is queued. Offsets are
 * relative to the start of the registered regions; a put that does not fit in
 * both regions is rejected here with GPUPORT_ERR_OUT_OF_RANGE and nothing is
 * queued. */
GPUPORT_API gpuport_status_t gpuport_channel_put(gpuport_channel_t ch, uint64_t dst_off,
                                                 uint64_t src_off, uint64_t size);
/* increments the peer's semaphore once every earlier put is visible there */
GPUPORT_API gpuport_status_t gpuport_channel_signal(gpuport_channel_t ch);
GPUPORT_API gpuport_status_t gpuport_channel_put_with_signal(gpuport_channel_t ch,
                                                             uint64_t dst_off, uint64_t src_off,
                                                             uint64_t size);
/* Writes the 64-bit value into the peer's destination region at dst_off, as
 * one 8-byte store (host byte order), with no source and no copy: the value
 * travels in the trigger. Ordered like a put: after the channel's earlier
 * puts, before its later signals. dst_off must be a multiple of 8
 * (GPUPORT_ERR_INVALID_ARG) and dst_off + 8 within the destination region
 * (GPUPORT_ERR_OUT_OF_RANGE); refused here, nothing is queued. Where the
 * region itself starts 8-aligned (gpuport_mem_alloc, malloc, GPU memory) the
 * store is atomic: a reader sees the old value or the new, never a mix. */
GPUPORT_API gpuport_status_t gpuport_channel_put_value(gpuport_channel_t ch, uint64_t dst_off,
                                                       uint64_t value);
/* put_value, then signal, in one trigger */
GPUPORT_API gpuport_status_t gpuport_channel_put_value_with_signal(gpuport_channel_t ch,
                                                                   uint64_t dst_off,
                                                                   uint64_t value);
/* returns when every earlier operation of this channel is complete: sources
 * reusable and data delivered */
GPUPORT_API gpuport_status_t gpuport_channel_flush(gpuport_channel_t ch);
/* consumes one signal from the peer; blocks up to GPUPORT_TIMEOUT_MS */
GPUPORT_API gpuport_status_t gpuport_channel_wait(gpuport_channel_t ch);
/* consumes one signal if one has arrived: *ready_p is 1, else 0 */
GPUPORT_API gpuport_status_t gpuport_channel_poll(gpuport_channel_t ch, int *ready_p);

/* The channel's error state: GPUPORT_OK, or the error the proxy or the peer
 * hit (for example a trigger with offsets outside the registered regions). */
GPUPORT_API gpuport_status_t gpuport_channel_status(gpuport_channel_t ch);

/* "shm", "cuda_ipc", ... : the transport the channel uses */
GPUPORT_API const char *gpuport_channel_transport(gpuport_channel_t ch);

#ifdef __cplusplus
}
#endif

#endif
