/**
 * @file gpuport.h
 * gpuport public host API.
 *
 * A communicator (gpuport_comm_t) is created from a bootstrap (MPI: see
 * gpuport_mpi.h) and owns one proxy service: a proxy thread that consumes the
 * communicator's trigger FIFO and a flusher thread that performs long copies.
 * Port channels bind a peer, a local source region and the peer's destination
 * region; their operations are pushed into the FIFO and carried out by the
 * proxy.
 *
 * Conventions of every call below:
 * - It returns a gpuport_status_t (GPUPORT_OK or a negative error, logged
 *   once by the function that found it). Output arguments end in _p and are
 *   written only on success, with one exception: gpuport_comm_create (and
 *   gpuport_comm_init_mpi) set *comm_p to NULL when they fail.
 * - A NULL, destroyed or foreign handle and a NULL output pointer are refused
 *   with GPUPORT_ERR_INVALID_ARG and a message naming the call
 *   (gpuport_comm_rank and _size return -1, gpuport_channel_transport "none").
 * - Who takes part: "Collective" calls are made by every rank of the
 *   communicator (or bootstrap); "Pairwise" calls by this rank and the peer
 *   named, each naming the other; "Local" calls involve no other rank.
 * - Threads: the set-up calls (gpuport_comm_create and _destroy,
 *   gpuport_mem_*, gpuport_channel_create, _destroy and _device) of one
 *   communicator are made one at a time (from any thread, one after the
 *   other): they share its bootstrap and its tables. The operations (put,
 *   signal, flush, wait, poll, status, transport) may be called from any
 *   number of threads at once, on one channel too, but not while that
 *   channel is being destroyed. gpuport's own threads never call the
 *   application or the bootstrap.
 */
#ifndef GPUPORT_GPUPORT_H
#define GPUPORT_GPUPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Release
 * The release these headers belong to (gpuport_version_string() gives the
 * library's).
 * @{ */
#define GPUPORT_VERSION_MAJOR 0 /**< major version */
#define GPUPORT_VERSION_MINOR 2 /**< minor version */
#define GPUPORT_VERSION_PATCH 0 /**< patch level */
/** @} */

/**
 * Marks what the libraries export. They are built with -fvisibility=hidden,
 * so the functions declared with GPUPORT_API in these headers are all that a
 * program can link to; everything else stays inside the library. The
 * linker's version script then gives each of them its symbol version
 * (src/libgpuport.map).
 */
#if defined(__GNUC__)
#define GPUPORT_API __attribute__((visibility("default")))
#else
#define GPUPORT_API
#endif

/** Errors are negative and grouped by kind, one decade per kind. */
typedef enum {
    GPUPORT_OK = 0,                  /**< success */
    GPUPORT_ERR_INVALID_ARG = -1,    /**< a bad argument to a call */
    GPUPORT_ERR_INVALID_CONFIG = -2, /**< a bad GPUPORT_* value */
    GPUPORT_ERR_OUT_OF_RANGE = -3,   /**< offset/size outside a registered region */
    GPUPORT_ERR_NOT_SUPPORTED = -10, /**< feature or transport not available */
    GPUPORT_ERR_NO_MEMORY = -20,     /**< an allocation failed */
    GPUPORT_ERR_NO_RESOURCE = -21,   /**< channel ids, segments, threads */
    GPUPORT_ERR_AGAIN = -22,         /**< non-blocking call: try again */
    GPUPORT_ERR_BUSY = -23,          /**< in use (a region that live channels use) */
    GPUPORT_ERR_TRANSPORT = -30,     /**< a transport operation failed */
    GPUPORT_ERR_PEER = -40,          /**< the peer failed, exited or cannot be reached (a
                                      *   broken connection); not an orderly close */
    GPUPORT_ERR_CLOSED = -41,        /**< the peer closed its side of the channel in order
                                      *   (gpuport_channel_destroy or gpuport_comm_destroy,
                                      *   its process alive): no more signals will come and
                                      *   nothing more can be sent; not a failure */
    GPUPORT_ERR_TIMEOUT = -50,       /**< a blocking call ran past its limit */
    GPUPORT_ERR_VERSION = -60,       /**< peers run different library versions, a program
                                      *   and libgpuport_mpi different MPIs, or a program
                                      *   was built against headers of another struct
                                      *   layout (GPUPORT_LAYOUT) */
    GPUPORT_ERR_SHUTDOWN = -71,      /**< the communicator is stopping */
    GPUPORT_ERR_INTERNAL = -99       /**< a bug in gpuport */
} gpuport_status_t;

/**
 * The text of a status, for messages. Local; any thread.
 * @return a static string; "unknown status" for a value not in the enum
 */
GPUPORT_API const char *gpuport_status_string(gpuport_status_t status);

/**
 * The version this library was built as ("0.2.0"). Local; any thread.
 * @return a static string
 */
GPUPORT_API const char *gpuport_version_string(void);

/**
 * GPUPORT_TIMEOUT_MS as the next gpuport_comm_create will read it: the
 * environment's value, else the default. For bootstraps, whose own
 * collectives (the MPI bootstrap's duplicate of the application's
 * communicator) come before gpuport_comm_create and end at the same limit.
 * Local; any thread.
 * @param[out] timeout_ms_p the limit in milliseconds; 0: wait forever
 * @retval GPUPORT_OK written
 * @retval GPUPORT_ERR_INVALID_CONFIG the value is not valid (named in the log);
 *         nothing written
 * @retval GPUPORT_ERR_INVALID_ARG timeout_ms_p is NULL
 */
GPUPORT_API gpuport_status_t gpuport_config_timeout_ms(uint64_t *timeout_ms_p);

/**
 * @name Struct layouts
 * The structs that a program and the library both read or write
 * (gpuport_bootstrap_t, gpuport_comm_stats_t, gpuport_port_channel_dev_t)
 * each have a layout version, raised whenever their members change. The
 * calls that take or fill one are inline functions of these headers: they
 * pass the library's versioned entry point (the same name with _v) the
 * layout that the program was compiled with, GPUPORT_LAYOUT(version, type),
 * as libfabric's fi_getinfo(FI_VERSION(...)) passes the API version. A
 * library that does not know that layout (a program built against older or
 * newer headers) refuses the call with GPUPORT_ERR_VERSION and a message
 * naming both layouts, and reads and writes nothing of the struct, instead
 * of using it shifted. Call the inline functions, not the _v entry points.
 * @{
 */
/** A layout: its version in the upper 16 bits, sizeof(type) in the lower 16. */
#define GPUPORT_LAYOUT(version, type) (((uint32_t)(version) << 16) | (uint32_t)sizeof(type))
/** The version of a layout. */
#define GPUPORT_LAYOUT_VERSION(layout) ((uint32_t)(layout) >> 16)
/** The struct size of a layout, in bytes. */
#define GPUPORT_LAYOUT_SIZE(layout) ((uint32_t)(layout) & 0xffffu)
/** @} */

/**
 * Bootstrap: how a communicator talks to its peers while it sets up. The MPI
 * bootstrap (gpuport_mpi.h) fills one in; tests and other launchers may supply
 * their own. Its operations are called only from inside gpuport_comm_create,
 * gpuport_comm_destroy and gpuport_channel_create, on the calling thread,
 * never on the proxy thread. Ranks that share a host are identified by
 * gpuport itself (host identity), so local_rank/local_size are informational
 * (they pick the GPU and the cores when the application has not).
 * Operations return GPUPORT_OK or an error, which the calling gpuport call
 * returns.
 */
typedef struct gpuport_bootstrap {
    void *ctx;      /**< passed to every operation */
    int rank;       /**< this rank, 0 <= rank < size */
    int size;       /**< ranks in the communicator, at least 1 */
    int local_rank; /**< this rank among the ranks of its host */
    int local_size; /**< ranks on this host */
    /** every rank contributes `bytes` bytes; recv holds size*bytes, rank order */
    gpuport_status_t (*allgather)(void *ctx, const void *send, void *recv, size_t bytes);
    /** returns once every rank has called it */
    gpuport_status_t (*barrier)(void *ctx);
    /** blocking send of `bytes` bytes to `peer`, matched by recv's peer and tag */
    gpuport_status_t (*send)(void *ctx, int peer, int tag, const void *buf, size_t bytes);
    /** blocking receive of exactly `bytes` bytes from `peer` with `tag` */
    gpuport_status_t (*recv)(void *ctx, int peer, int tag, void *buf, size_t bytes);
    /** called once by gpuport_comm_destroy (or on a failed create); may be
     *  NULL when the caller keeps the bootstrap for later communicators */
    void (*destroy)(void *ctx);
    /** recv that gives up: GPUPORT_ERR_TIMEOUT, without logging and with
     *  nothing received, when no message from `peer` with `tag` has come
     *  within timeout_ms (0: only one already there). The pairwise waits
     *  of channel creation use it to end at GPUPORT_TIMEOUT_MS; NULL: they
     *  use recv and wait without limit */
    gpuport_status_t (*recv_timed)(void *ctx, int peer, int tag, void *buf, size_t bytes,
                                   int timeout_ms);
    /** allgather that gives up: GPUPORT_ERR_TIMEOUT, without logging, when
     *  not every rank has called within timeout_ms (gpuport passes at least
     *  1; with GPUPORT_TIMEOUT_MS=0 it calls allgather). Then, unless absent
     *  is NULL, for each rank r absent[r] is 1 if this rank knows that r had not called, 0 if it
     *  knows that r had, -1 if it cannot tell. A collective cannot be taken
     *  back: after a timeout the bootstrap is used for nothing but destroy,
     *  and the abandoned collective's buffers are the bootstrap's, not recv
     *  (a rank that calls late may still complete it). The exchanges of
     *  gpuport_comm_create use it to end at GPUPORT_TIMEOUT_MS; NULL (layout
     *  version 2 and older): they use allgather and wait without limit */
    gpuport_status_t (*allgather_timed)(void *ctx, const void *send, void *recv, size_t bytes,
                                        int timeout_ms, signed char *absent);
} gpuport_bootstrap_t;

/** This header's gpuport_bootstrap_t layout version. Version 2 ends before
 *  allgather_timed, version 1 before recv_timed; gpuport_comm_create
 *  accepts both, without the limits that the missing members give. */
#define GPUPORT_BOOTSTRAP_VERSION 3
/** This header's gpuport_bootstrap_t layout, as gpuport_comm_create passes it. */
#define GPUPORT_BOOTSTRAP_LAYOUT GPUPORT_LAYOUT(GPUPORT_BOOTSTRAP_VERSION, gpuport_bootstrap_t)

typedef struct gpuport_comm *gpuport_comm_t;       /**< a communicator */
typedef struct gpuport_mem *gpuport_mem_t;         /**< a registered region */
typedef struct gpuport_channel *gpuport_channel_t; /**< a port channel */
/** a memory channel: kernels store into a same-host peer's memory themselves */
typedef struct gpuport_memory_channel *gpuport_memory_channel_t;
/** A peer channel (gpuport_peer_channel_create): one channel to a peer for
 *  kernels, which carries each operation by the fastest path the peer
 *  allows. */
typedef struct gpuport_peer_channel *gpuport_peer_channel_t;

/** The entry point of gpuport_comm_create; `layout` is GPUPORT_BOOTSTRAP_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_comm_create_v(uint32_t layout,
                                                   const gpuport_bootstrap_t *bootstrap,
                                                   gpuport_comm_t *comm_p);

/**
 * Creates a communicator over a bootstrap.
 *
 * Reads the GPUPORT_* configuration, exchanges a versioned record with
 * every rank and starts the proxy service. Takes ownership of the
 * bootstrap: its destroy runs with the communicator's, and also when
 * creation fails, except after a refused layout (the library cannot read
 * it). A rank that fails still takes part in every exchange, so every rank
 * returns: the failing one with its reason, the others with
 * GPUPORT_ERR_PEER naming it. On failure *comm_p is NULL (when comm_p is
 * not), so a program that goes on regardless gets GPUPORT_ERR_INVALID_ARG
 * from the next call instead of using an uninitialized handle.
 *
 * Each of its three exchanges ends at GPUPORT_TIMEOUT_MS (with a bootstrap
 * that has allgather_timed, as the MPI bootstrap does): a rank that does
 * not call, or calls too late, fails every rank that did with
 * GPUPORT_ERR_TIMEOUT and a message naming the exchange and, where the
 * bootstrap can tell, the ranks that had not come. The bootstrap's
 * collective cannot be taken back: that bootstrap is finished (destroyed
 * with the failed creation), and a rank that comes late completes the
 * abandoned exchange and times out in its next one.
 *
 * Collective over the bootstrap's ranks. One set-up call at a time.
 *
 * @param bootstrap the ranks and how to reach them; copied
 * @param[out] comm_p the communicator
 * @retval GPUPORT_OK the communicator is ready on every rank
 * @retval GPUPORT_ERR_TIMEOUT a rank did not reach one of the exchanges within
 *         GPUPORT_TIMEOUT_MS
 * @retval GPUPORT_ERR_INVALID_ARG NULL bootstrap or comm_p, an operation unset, or not
 *         0 <= rank < size (this rank only: the others time out in the first exchange)
 * @retval GPUPORT_ERR_VERSION a program built with another gpuport_bootstrap_t layout
 *         (this rank only, nothing read), or ranks of different gpuport releases
 * @retval GPUPORT_ERR_INVALID_CONFIG a bad GPUPORT_* value (named in the message)
 * @retval GPUPORT_ERR_NOT_SUPPORTED GPUPORT_GPU=on without a usable GPU, or a
 *         placement request that the machine cannot meet
 * @retval GPUPORT_ERR_NO_MEMORY, GPUPORT_ERR_NO_RESOURCE memory, shared segments,
 *         sockets or threads could not be had
 * @retval GPUPORT_ERR_TRANSPORT a transport (or the CUDA driver) failed to set up
 * @retval GPUPORT_ERR_PEER another rank failed its set-up (its log says why)
 * @retval other the bootstrap operation's own error
 */
static inline gpuport_status_t gpuport_comm_create(const gpuport_bootstrap_t *bootstrap,
                                                   gpuport_comm_t *comm_p)
{
    return gpuport_comm_create_v(GPUPORT_BOOTSTRAP_LAYOUT, bootstrap, comm_p);
}

/**
 * Destroys a communicator and everything still open in it.
 *
 * Not collective: no rank waits for the others to call it. It is bounded
 * by this rank's own work: the channels still open are closed (as
 * gpuport_channel_destroy does, all at once), the triggers already in the
 * FIFO are carried out and acknowledged, and each peer is asked to confirm
 * that it writes nothing more into this rank's memory, which its proxy
 * answers at once, whether or not the peer is destroying too (network
 * peers are then told goodbye and the connection closed). A peer's own
 * destroy is never waited for. Each step is bounded by GPUPORT_TIMEOUT_MS
 * and skips peers known to have exited; a peer that does not answer in
 * time is logged and released anyway. Then every channel and registration
 * is released and the bootstrap's destroy runs. The peers' channels to
 * this rank are closed from then on: their calls return
 * GPUPORT_ERR_CLOSED, as after gpuport_channel_destroy
 * (GPUPORT_ERR_PEER only if this rank dies or its connection breaks
 * instead).
 *
 * Local. One set-up call at a time; no other call on the communicator or
 * its channels may run meanwhile.
 *
 * @retval GPUPORT_OK everything this rank queued was carried out
 * @retval GPUPORT_ERR_SHUTDOWN queued work could not complete within
 *         GPUPORT_TIMEOUT_MS: it was failed and counted in the log (the
 *         communicator is destroyed all the same)
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator (NULL, or destroyed already)
 */
GPUPORT_API gpuport_status_t gpuport_comm_destroy(gpuport_comm_t comm);

/**
 * This rank's number in the communicator. Local; any thread.
 * @return the rank, or -1 for a handle that is not a live communicator
 */
GPUPORT_API int gpuport_comm_rank(gpuport_comm_t comm);

/**
 * The number of ranks in the communicator. Local; any thread.
 * @return the size, or -1 for a handle that is not a live communicator
 */
GPUPORT_API int gpuport_comm_size(gpuport_comm_t comm);

/**
 * Whether a rank runs on this rank's host: the hosts where memory channels
 * (gpuport_memory_channel_create) can be made and the same-host transports
 * (cuda_ipc, shm) carry port channels. Two ranks share a host when their
 * host identities are equal (derived from the host name and boot id, or
 * GPUPORT_HOST_ID). Local; any thread.
 * @param comm a live communicator
 * @param peer a rank of the communicator (this rank's own: 1)
 * @return 1 on this host, 0 on another, -1 for a handle that is not a live
 *         communicator or a peer outside 0 .. size - 1
 */
GPUPORT_API int gpuport_comm_same_host(gpuport_comm_t comm, int peer);

/**
 * This rank's number among the ranks of its host, counted in rank order
 * (0 .. gpuport_comm_local_size() - 1): e.g. to choose among a host's GPUs
 * or to split work among the ranks that share memory. Local; any thread.
 * @return the number, or -1 for a handle that is not a live communicator
 */
GPUPORT_API int gpuport_comm_local_rank(gpuport_comm_t comm);

/**
 * The number of ranks on this rank's host, this one included. Local; any
 * thread.
 * @return the number, or -1 for a handle that is not a live communicator
 */
GPUPORT_API int gpuport_comm_local_size(gpuport_comm_t comm);

/** What the proxy service has done and cost so far, for tools and tuning. */
typedef struct gpuport_comm_stats {
    uint64_t triggers;       /**< triggers the proxy carried out */
    uint64_t rejected;       /**< triggers it refused (bad channel, offsets, op) */
    uint64_t flusher_items;  /**< work items the flusher completed */
    uint64_t proxy_cpu_ns;   /**< CPU time used by the proxy thread */
    uint64_t flusher_cpu_ns; /**< CPU time used by the flusher thread */
    /** host puts, put_values and signals that their calling threads carried
     *  out themselves (GPUPORT_HOST_INLINE), without the proxy: not among
     *  `triggers` (layout version 2) */
    uint64_t host_inline;
} gpuport_comm_stats_t;

/** This header's gpuport_comm_stats_t layout version. Version 1 (without
 *  host_inline) is still accepted: the library fills its five counters. */
#define GPUPORT_STATS_VERSION 2
/** This header's gpuport_comm_stats_t layout, as gpuport_comm_stats passes it. */
#define GPUPORT_STATS_LAYOUT GPUPORT_LAYOUT(GPUPORT_STATS_VERSION, gpuport_comm_stats_t)

/** The entry point of gpuport_comm_stats; `layout` is GPUPORT_STATS_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_comm_stats_v(uint32_t layout, gpuport_comm_t comm,
                                                  gpuport_comm_stats_t *stats_p);

/**
 * Reads the proxy service's counters. The counters are read one by one,
 * without stopping the proxy: each is exact, the set is not a snapshot.
 *
 * Local; any thread while the communicator lives.
 *
 * @param comm a live communicator
 * @param[out] stats_p the counters
 * @retval GPUPORT_OK *stats_p is filled
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, or stats_p NULL
 * @retval GPUPORT_ERR_VERSION a program built with a gpuport_comm_stats_t layout
 *         other than this one or version 1: nothing is written
 */
static inline gpuport_status_t gpuport_comm_stats(gpuport_comm_t comm,
                                                  gpuport_comm_stats_t *stats_p)
{
    return gpuport_comm_stats_v(GPUPORT_STATS_LAYOUT, comm, stats_p);
}

/**
 * Allocates host memory that same-host peers can map.
 *
 * Host memory from malloc (or anywhere) can be registered too; memory from
 * here is shared-mappable (a memfd), so same-host peers copy into it
 * directly instead of through the kernel. Released with gpuport_mem_free,
 * or with the communicator.
 *
 * Local. One set-up call at a time.
 *
 * @param comm a live communicator
 * @param size bytes, at least 1 (rounded up to whole pages)
 * @param[out] ptr_p the memory, page-aligned, zeroed
 * @retval GPUPORT_OK allocated
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, ptr_p NULL, size 0 or too
 *         large to round up
 * @retval GPUPORT_ERR_NO_MEMORY memfd_create, ftruncate or mmap failed
 */
GPUPORT_API gpuport_status_t gpuport_mem_alloc(gpuport_comm_t comm, size_t size, void **ptr_p);

/**
 * Allocates GPU memory on the communicator's GPU for channels over every
 * transport.
 *
 * CUDA VMM memory made with a POSIX file-descriptor handle (shared with
 * same-host peers by descriptor, registered with NICs by dma-buf), mapped
 * read-write for the device, so gpuport's own CUDA context reaches it
 * without the application's (a copy into cudaMalloc memory from another
 * context waits for the application's queued work). Kernels use it like
 * cudaMalloc memory. Works whether or not the application made a CUDA
 * context. Released with gpuport_mem_free, or with the communicator.
 *
 * Local. One set-up call at a time.
 *
 * @param comm a live communicator in GPU mode
 * @param size bytes, at least 1; rounded up to the device's allocation
 *        granularity (2 MiB on H200)
 * @param[out] ptr_p the device address
 * @retval GPUPORT_OK allocated
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, ptr_p NULL, size 0 or too
 *         large to round up
 * @retval GPUPORT_ERR_NOT_SUPPORTED the communicator is host-only (no GPU mode, or a
 *         build without CUDA)
 * @retval GPUPORT_ERR_NO_MEMORY the device (or the host) is out of memory
 * @retval GPUPORT_ERR_TRANSPORT another CUDA driver failure (logged with the call)
 */
GPUPORT_API gpuport_status_t gpuport_mem_alloc_device(gpuport_comm_t comm, size_t size,
                                                      void **ptr_p);

/**
 * Frees memory from gpuport_mem_alloc or gpuport_mem_alloc_device. Refused
 * while a live channel uses a registration inside the block (a peer may
 * still write into it): destroy the channels first.
 *
 * Local. One set-up call at a time.
 *
 * @param comm the communicator that allocated it
 * @param ptr exactly the pointer that the allocation returned
 * @retval GPUPORT_OK freed
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, ptr NULL, or not an
 *         allocation of this communicator
 * @retval GPUPORT_ERR_BUSY a live channel uses memory of the block; nothing changed
 */
GPUPORT_API gpuport_status_t gpuport_mem_free(gpuport_comm_t comm, void *ptr);

/**
 * Registers [ptr, ptr + size) so that it can be a channel's source or
 * destination.
 *
 * Host memory (malloc, gpuport_mem_alloc, any mapping of this process) and
 * GPU memory (cudaMalloc, VMM memory, gpuport_mem_alloc_device) are told
 * apart here, once; the transports that a channel may use follow from the
 * kinds of its two regions. One region may serve any number of channels.
 * The memory must stay allocated until the registration is gone.
 *
 * Local. One set-up call at a time.
 *
 * @param comm a live communicator
 * @param ptr the first byte
 * @param size bytes, at least 1
 * @param[out] mem_p the registration
 * @retval GPUPORT_OK registered
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, ptr or mem_p NULL, size 0,
 *         a range that wraps the address space or overlaps a
 *         gpuport_mem_alloc/_alloc_device block without lying within the size
 *         asked for (the rest of its last page is not the block's), host memory
 *         not mapped in this process (the first such address is named), or GPU
 *         memory that is not one mapped range
 * @retval GPUPORT_ERR_OUT_OF_RANGE a cudaMalloc range that runs past its allocation, or a
 *         range of stream-ordered pool memory that runs past its pool allocation
 * @retval GPUPORT_ERR_NOT_SUPPORTED memory of a kind not supported yet (managed memory:
 *         the message names the kind and the alternative), or GPU memory that can be
 *         shared neither by CUDA IPC nor as VMM or pool memory
 * @retval GPUPORT_ERR_NO_MEMORY, GPUPORT_ERR_NO_RESOURCE bookkeeping, or the
 *         export of VMM memory as a descriptor, failed
 * @retval GPUPORT_ERR_TRANSPORT another CUDA driver failure (logged with the call)
 */
GPUPORT_API gpuport_status_t gpuport_mem_register(gpuport_comm_t comm, void *ptr, size_t size,
                                                  gpuport_mem_t *mem_p);

/**
 * Ends a registration. Refused while a live channel uses the region (the
 * peer may still write into it): destroy the channels first.
 *
 * Local. One set-up call at a time.
 *
 * @retval GPUPORT_OK deregistered; the handle is dead (later calls refuse it)
 * @retval GPUPORT_ERR_INVALID_ARG not a live registration (NULL, or deregistered already)
 * @retval GPUPORT_ERR_BUSY live channels use the region; nothing changed
 */
GPUPORT_API gpuport_status_t gpuport_mem_deregister(gpuport_mem_t mem);

/** What memory a registration is, as gpuport_mem_register classified it. */
typedef enum gpuport_mem_kind {
    GPUPORT_MEM_KIND_NONE = 0,        /**< not classified */
    GPUPORT_MEM_KIND_HOST = 1,        /**< private host memory (malloc, mmap): peers use CMA */
    GPUPORT_MEM_KIND_HOST_SHARED = 2, /**< from gpuport_mem_alloc: same-host peers map it */
    GPUPORT_MEM_KIND_HOST_PINNED = 3, /**< host memory CUDA pinned (cudaHostAlloc,
                                       *   cudaHostRegister): host memory to the transports */
    GPUPORT_MEM_KIND_DEVICE = 4,      /**< cudaMalloc memory: shared by CUDA IPC */
    GPUPORT_MEM_KIND_DEVICE_VMM = 5,  /**< VMM memory (gpuport_mem_alloc_device, or
                                       *   cuMemCreate + cuMemMap) */
    GPUPORT_MEM_KIND_MANAGED = 6,     /**< cudaMallocManaged: refused at registration */
    GPUPORT_MEM_KIND_POOL = 7,        /**< a stream-ordered pool that cannot be exported (the
                                       *   default pool of cudaMallocAsync): tcp and ib carry
                                       *   it, cuda_ipc only as a source */
    GPUPORT_MEM_KIND_POOL_EXPORTABLE = 8 /**< a stream-ordered pool made with the POSIX
                                          *   descriptor handle type: every GPU transport */
} gpuport_mem_kind_t;

/**
 * A memory kind's name ("host", "host-pinned", "device-vmm", ...). Any
 * thread.
 * @return a static string; "?" for a value that is not a kind
 */
GPUPORT_API const char *gpuport_mem_kind_string(int kind);

/** The most transports a gpuport_mem_info_t lists. */
#define GPUPORT_MEM_INFO_TRANSPORTS 8
/** Room for one refusal text in a gpuport_mem_info_t, terminator included. */
#define GPUPORT_MEM_INFO_WHY 384

/** Whether one transport can carry a registration, as a channel's source and destination. */
typedef struct gpuport_mem_info_tl {
    char name[16];                      /**< the transport, as GPUPORT_TRANSPORT spells it */
    int32_t src_ok;                     /**< 1: it carries the region as a source */
    int32_t dst_ok;                     /**< 1: it carries the region as a destination */
    char src_why[GPUPORT_MEM_INFO_WHY]; /**< when src_ok is 0: the refusal's text */
    char dst_why[GPUPORT_MEM_INFO_WHY]; /**< when dst_ok is 0: the refusal's text */
} gpuport_mem_info_tl_t;

/** A registration as gpuport sees it: what gpuport_mem_info fills. */
typedef struct gpuport_mem_info {
    int32_t kind;         /**< gpuport_mem_kind_t */
    int32_t device;       /**< CUDA ordinal of the GPU the memory is on; -1 for host memory */
    uint64_t addr;        /**< the region's first byte */
    uint64_t size;        /**< its bytes */
    uint32_t ntransports; /**< entries of tl filled: the library's transports, in
                           *   GPUPORT_TRANSPORT's order, then registered ones */
    uint32_t reserved;    /**< 0 */
    gpuport_mem_info_tl_t tl[GPUPORT_MEM_INFO_TRANSPORTS]; /**< per transport */
} gpuport_mem_info_t;

/** This header's gpuport_mem_info_t layout version. */
#define GPUPORT_MEM_INFO_VERSION 1
/** This header's gpuport_mem_info_t layout, as gpuport_mem_info passes it. */
#define GPUPORT_MEM_INFO_LAYOUT GPUPORT_LAYOUT(GPUPORT_MEM_INFO_VERSION, gpuport_mem_info_t)

/** The entry point of gpuport_mem_info; `layout` is GPUPORT_MEM_INFO_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_mem_info_v(uint32_t layout, gpuport_mem_t mem,
                                                gpuport_mem_info_t *info_p);

/**
 * Describes a registration: its kind, its device, and for each transport
 * whether a channel over it may use the region as its source and as its
 * destination, and if not why: the same text gpuport_channel_create logs
 * when it refuses the region. No channel is needed. A transport that is not
 * built, or not open in this communicator, carries nothing and says why.
 *
 * Local. One set-up call at a time.
 *
 * @param mem a live registration
 * @param[out] info_p the description
 * @retval GPUPORT_OK *info_p is filled
 * @retval GPUPORT_ERR_INVALID_ARG not a live registration, or info_p NULL
 * @retval GPUPORT_ERR_VERSION a program built with another gpuport_mem_info_t
 *         layout: nothing is written
 */
static inline gpuport_status_t gpuport_mem_info(gpuport_mem_t mem, gpuport_mem_info_t *info_p)
{
    return gpuport_mem_info_v(GPUPORT_MEM_INFO_LAYOUT, mem, info_p);
}

/**
 * Creates a port channel to `peer`.
 *
 * `src` is the local region puts read from (NULL if this side never puts);
 * `dst` is the local region the peer's puts on its side of this channel
 * write into (NULL if the peer never puts). The transport is chosen here
 * (GPUPORT_TRANSPORT, or the best that reaches the peer with these
 * regions); a forced transport that cannot reach the peer fails on both
 * sides with a message saying why. Both sides always reach the exchange
 * with the peer, so a failure on one fails the other too.
 *
 * Pairwise: `peer` calls it with this rank as its peer, and two ranks
 * create their channels to each other in the same order. A channel to
 * oneself (peer == this rank) is one call. One set-up call at a time.
 * Every wait for the peer ends at GPUPORT_TIMEOUT_MS (with a bootstrap
 * that has recv_timed, as the MPI bootstrap does): a peer that names
 * another rank, or does not call, fails the call with GPUPORT_ERR_TIMEOUT
 * and an error naming it and what was awaited; nothing is kept, and the
 * two may create their channel afterwards.
 *
 * @param comm a live communicator
 * @param peer a rank of the communicator
 * @param src local source region, or NULL
 * @param dst local destination region, or NULL
 * @param[out] channel_p the channel
 * @retval GPUPORT_OK the channel is connected on both sides
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, channel_p NULL, peer not a
 *         rank, src or dst not a live registration of this communicator
 * @retval GPUPORT_ERR_NO_RESOURCE every channel id (GPUPORT_MAX_CHANNELS) is in use
 * @retval GPUPORT_ERR_NOT_SUPPORTED no transport (or not the forced one) can carry
 *         these regions to the peer
 * @retval GPUPORT_ERR_INVALID_CONFIG the two sides chose different transports
 *         (GPUPORT_TRANSPORT differs between them)
 * @retval GPUPORT_ERR_VERSION the peer's record is of another version
 * @retval GPUPORT_ERR_PEER the peer could not create its side (its log says why)
 * @retval GPUPORT_ERR_TIMEOUT the peer did not answer within GPUPORT_TIMEOUT_MS
 *         (it has not called, or named another rank), or the transport could not
 *         connect in time
 * @retval GPUPORT_ERR_NO_MEMORY, GPUPORT_ERR_TRANSPORT the transport could not
 *         connect (memory, a socket, the CUDA driver, verbs, passing descriptors)
 * @retval other the bootstrap operation's own error
 */
GPUPORT_API gpuport_status_t gpuport_channel_create(gpuport_comm_t comm, int peer,
                                                    gpuport_mem_t src, gpuport_mem_t dst,
                                                    gpuport_channel_t *channel_p);

/**
 * Creates a channel from this rank to every rank of the communicator (to
 * itself too where with_self is 1), all over the same local regions:
 * gpuport_channel_create with each rank in increasing order, which pairs
 * every two ranks without a cycle of waits. Collective: every rank calls it,
 * with the same with_self, as its one set-up call at the time.
 *
 * One outcome on every rank: all ranks return GPUPORT_OK with every
 * channel, or all return the same failure and keep no channel. After a
 * failure with one peer (this rank's arguments included), each later peer
 * is still met and told, so no rank is left waiting; then every rank tells
 * every rank its result, and all return the failure of the lowest rank
 * that had one of its own (GPUPORT_ERR_PEER only where none had). A rank
 * that never answers is not waited for twice: the ranks that waited for it
 * return GPUPORT_ERR_TIMEOUT. Each wait ends at GPUPORT_TIMEOUT_MS, as in
 * gpuport_channel_create.
 *
 * @param comm a live communicator
 * @param src local source region, or NULL
 * @param dst local destination region, or NULL
 * @param with_self 1: channels[rank] is a channel to this rank itself; 0: NULL
 * @param[out] channels an array of gpuport_comm_size() channels, by peer rank
 * @retval GPUPORT_OK every channel made, on every rank
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator (this rank only, no peer
 *         met); channels NULL, with_self not 0 or 1, src or dst not a live
 *         registration, on this rank or another (every rank returns it)
 * @retval GPUPORT_ERR_TIMEOUT a rank did not answer within GPUPORT_TIMEOUT_MS
 * @retval other a rank's failure of gpuport_channel_create, the same on every rank:
 *         every entry is NULL, except a channel whose destroy timed out
 *         (gpuport_channel_destroy), which stays in its entry for the caller to
 *         destroy again
 */
GPUPORT_API gpuport_status_t gpuport_channel_create_all(gpuport_comm_t comm, gpuport_mem_t src,
                                                        gpuport_mem_t dst, int with_self,
                                                        gpuport_channel_t *channels);

/**
 * Destroys a channel, from either side, at any time.
 *
 * Tells the peer (after this side's earlier operations, however many wait
 * at the proxy for room at the transport: the close never waits for room
 * to be queued behind them), waits for them to complete, and returns once the peer can write nothing more into this
 * side's regions: on one host the peer's proxy has stopped the channel and
 * drained it; over a network the peer has answered that its side is
 * stopped, and this side's receiver drops what still arrives. From then on the peer's operations on
 * the channel, its status and its flushes return GPUPORT_ERR_CLOSED, its
 * waits and polls take the signals sent before the close and then return
 * GPUPORT_ERR_CLOSED, and this side may deregister and free the regions.
 * The peer's own destroy (or its communicator's) is not awaited.
 *
 * Local. One set-up call at a time; no other call on the channel may run
 * meanwhile.
 *
 * @retval GPUPORT_OK destroyed; the handle is dead (later calls refuse it)
 * @retval GPUPORT_ERR_TIMEOUT the peer did not confirm within GPUPORT_TIMEOUT_MS (it
 *         exists but its proxy is stuck): the channel, and its regions, are kept
 *         until the communicator is destroyed
 * @retval GPUPORT_ERR_INVALID_ARG not a live channel (NULL, or destroyed already)
 */
GPUPORT_API gpuport_status_t gpuport_channel_destroy(gpuport_channel_t channel);

/**
 * Creates a memory channel to `peer`: the application's kernels copy into
 * the peer's `dst` with their own stores and signal it with their own
 * writes (gpuport_memory_* in gpuport_device.h), with no proxy, no copy
 * engine and no CUDA call after this one. For peers on this host whose GPU
 * memory this rank's GPU can map: the same GPU, or GPUs with peer access
 * (NVLink or PCIe); cuda_ipc is the transport underneath. Port channels
 * over the same regions and peer work beside it; the peer's destination is
 * mapped once however many channels use it.
 *
 * `src` is this rank's GPU memory the kernels copy from (NULL: signals and
 * values only); `dst` is where the peer's kernels store (NULL if they never
 * do): VMM memory (gpuport_mem_alloc_device, or the application's
 * cuMemCreate memory with a POSIX descriptor handle) or memory of an
 * exportable stream-ordered pool. cudaMalloc memory is refused: its legacy
 * IPC handle opens in one context per GPU and process, and gpuport opens it
 * in the flusher's, where the application's kernels cannot use it. Anything
 * else (another host, no peer access, host memory, a host-only
 * communicator) fails on both sides with a message saying why.
 *
 * Pairwise, like gpuport_channel_create (both sides call this one: a side
 * that calls gpuport_channel_create instead fails both). Memory channels
 * and port channels share GPUPORT_MAX_CHANNELS. One set-up call at a time.
 *
 * @param comm a live communicator in GPU mode
 * @param peer a rank of the communicator on this host
 * @param src local source region in GPU memory, or NULL
 * @param dst local destination region (VMM or exportable pool memory), or NULL
 * @param[out] channel_p the channel
 * @retval GPUPORT_OK the channel is connected on both sides
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator, channel_p NULL, peer not a
 *         rank, src or dst not a live registration of this communicator; or the
 *         peer called gpuport_channel_create
 * @retval GPUPORT_ERR_NOT_SUPPORTED a host-only communicator, a source in host memory,
 *         a peer that kernels cannot reach, or a destination they cannot store into
 * @retval GPUPORT_ERR_NO_RESOURCE every channel id is in use
 * @retval GPUPORT_ERR_PEER the peer could not create its side (its log says why)
 * @retval other as gpuport_channel_create
 */
GPUPORT_API gpuport_status_t gpuport_memory_channel_create(gpuport_comm_t comm, int peer,
                                                           gpuport_mem_t src, gpuport_mem_t dst,
                                                           gpuport_memory_channel_t *channel_p);

/**
 * Destroys a memory channel. Every kernel that uses the channel's device
 * handle must have finished first: kernels store into the peer's memory
 * without the library seeing it.
 *
 * Pairwise, unlike gpuport_channel_destroy: the peer's kernels store into
 * this side's memory until the peer destroys its side too, so this returns
 * once the peer has (or has exited); only then may this side deregister and
 * free its destination. The peer's device waits and polls on the channel
 * take the signals sent before this side's destroy, then return
 * GPUPORT_ERR_CLOSED.
 *
 * @retval GPUPORT_OK destroyed on both sides; the handle is dead
 * @retval GPUPORT_ERR_TIMEOUT the peer did not destroy its side within
 *         GPUPORT_TIMEOUT_MS: the channel, and its regions, are kept until the
 *         communicator is destroyed
 * @retval GPUPORT_ERR_INVALID_ARG not a live memory channel (NULL, or destroyed already)
 */
GPUPORT_API gpuport_status_t gpuport_memory_channel_destroy(gpuport_memory_channel_t channel);

/**
 * Creates a peer channel to `peer`: one channel for kernels
 * (gpuport_peer_* in gpuport_device.h) that carries each operation by the
 * fastest path the peer allows. Where this GPU maps the peer's destination
 * (a rank of this host on the same GPU or a GPU with peer access and
 * native atomics, a destination of VMM or exportable pool memory on both
 * sides, a source in GPU memory or none, GPUPORT_PEER_PATH not proxy on
 * either side), it is a memory channel and a port channel over the same
 * regions: puts up to GPUPORT_PEER_STORE_MAX bytes per calling thread go by
 * the calling threads' own stores, larger ones by the copy engine through
 * the proxy (no SMs used), signals and values by stores. Elsewhere (peers
 * on other hosts, cudaMalloc or host memory) it is a port channel, and
 * every operation goes through the proxy's transport. Both sides decide
 * alike. Order holds across the paths: a signal makes every earlier put of
 * the channel visible, by either path, and a flush covers both.
 *
 * Pairwise, as gpuport_channel_create (the same arguments' rules, the same
 * time limit); the peer calls gpuport_peer_channel_create too.
 *
 * @param comm a live communicator
 * @param peer a rank of the communicator
 * @param src local source region, or NULL
 * @param dst local destination region, or NULL
 * @param[out] channel_p the channel
 * @retval GPUPORT_OK created
 * @retval GPUPORT_ERR_INVALID_ARG a bad argument (logged)
 * @retval GPUPORT_ERR_TIMEOUT the peer did not answer within GPUPORT_TIMEOUT_MS
 * @retval other gpuport_channel_create's or gpuport_memory_channel_create's failure
 */
GPUPORT_API gpuport_status_t gpuport_peer_channel_create(gpuport_comm_t comm, int peer,
                                                         gpuport_mem_t src, gpuport_mem_t dst,
                                                         gpuport_peer_channel_t *channel_p);

/**
 * Creates a peer channel from this rank to every other rank of the
 * communicator, all over the same local regions: gpuport_peer_channel_create
 * with each rank in increasing order, collectively, with
 * gpuport_channel_create_all's contract. Every rank calls it as its one
 * set-up call at the time. Each channel takes its own path, as
 * gpuport_peer_channel_create decides it for that pair (stores to ranks
 * whose memory this GPU maps, the proxy to the others).
 *
 * One outcome on every rank: all ranks return GPUPORT_OK with every
 * channel, or all return the same failure and keep no channel. After a
 * failure with one peer (this rank's arguments included), each later peer
 * is still met and told, so no rank is left waiting; then every rank tells
 * every rank its result, and all return the failure of the lowest rank
 * that had one of its own (GPUPORT_ERR_PEER only where none had). A rank
 * that never answers is not waited for twice: the ranks that waited for it
 * return GPUPORT_ERR_TIMEOUT. Each wait ends at GPUPORT_TIMEOUT_MS.
 *
 * Each channel is destroyed by gpuport_peer_channel_destroy; one with the
 * store path waits there for its peer's destroy, so every rank destroys
 * them in the same order (increasing rank, say).
 *
 * @param comm a live communicator
 * @param src local source region, or NULL
 * @param dst local destination region, or NULL
 * @param[out] channels an array of gpuport_comm_size() peer channels, by
 *        peer rank; channels[rank] (this rank's own entry) is NULL
 * @retval GPUPORT_OK every channel made, on every rank
 * @retval GPUPORT_ERR_INVALID_ARG not a live communicator (this rank only, no peer
 *         met); channels NULL, src or dst not a live registration, on this rank
 *         or another (every rank returns it)
 * @retval GPUPORT_ERR_TIMEOUT a rank did not answer within GPUPORT_TIMEOUT_MS
 * @retval other a rank's failure of gpuport_peer_channel_create, the same on every
 *         rank: every entry is NULL, except a channel whose destroy timed out
 *         (gpuport_peer_channel_destroy), which stays in its entry for the caller
 *         to destroy again
 */
GPUPORT_API gpuport_status_t gpuport_peer_channel_create_all(gpuport_comm_t comm,
                                                             gpuport_mem_t src,
                                                             gpuport_mem_t dst,
                                                             gpuport_peer_channel_t *channels);

/**
 * Destroys a peer channel, as gpuport_memory_channel_destroy (where it
 * has the store path) or gpuport_channel_destroy (where not): bounded by
 * GPUPORT_TIMEOUT_MS; a destroy that timed out may be called again.
 *
 * @retval GPUPORT_OK destroyed
 * @retval GPUPORT_ERR_INVALID_ARG not a live peer channel
 * @retval other the underlying destroy's failure (the channel is kept)
 */
GPUPORT_API gpuport_status_t gpuport_peer_channel_destroy(gpuport_peer_channel_t channel);

/**
 * Whether a peer channel has the store path (1: kernels store into the
 * peer's memory for small operations; 0: every operation goes through the
 * proxy). Local; any thread.
 * @return 1, 0, or -1 for a handle that is not a live peer channel
 */
GPUPORT_API int gpuport_peer_channel_stores(gpuport_peer_channel_t channel);

/**
 * @name Operations
 * put, signal and their combinations return once the trigger is queued; the
 * proxy carries out a channel's operations in the order each producer
 * queued them. Offsets are relative to the start of the registered regions.
 * They check their arguments first (a bad one is reported whatever the
 * channel's state), then the channel: a channel in error returns its error (see
 * gpuport_channel_status), and one whose peer has closed its side returns
 * GPUPORT_ERR_CLOSED, one whose peer failed its side GPUPORT_ERR_PEER,
 * nothing queued, and the channel keeps that status. All of them, flush,
 * wait and poll included, are local and may be called from any thread.
 *
 * The statuses that put, signal, their combinations and flush share:
 * - GPUPORT_ERR_INVALID_ARG: not a live channel;
 * - the channel's error (GPUPORT_ERR_CLOSED once the peer closed its side
 *   in order; GPUPORT_ERR_PEER once it failed or exited, or its connection
 *   broke; GPUPORT_ERR_OUT_OF_RANGE or _INVALID_ARG after a bad trigger;
 *   GPUPORT_ERR_TRANSPORT after a failed copy or send);
 * - GPUPORT_ERR_SHUTDOWN: the communicator is being destroyed;
 * - GPUPORT_ERR_TIMEOUT: the FIFO stayed full for GPUPORT_TIMEOUT_MS (the
 *   proxy is stuck), or this channel's transport had no room for that long:
 *   its operations wait at the proxy apart from the other channels', and
 *   once 2,048 wait, its calls wait for room (a flush does not: it waits
 *   behind them); the channel then fails alone with this status, and the
 *   communicator's other channels go on.
 * @{
 */

/**
 * Copies `size` bytes from the source region at src_off to the peer's
 * destination region at dst_off. A put that does not fit in both regions is
 * refused here and nothing is queued.
 * @retval GPUPORT_OK queued
 * @retval GPUPORT_ERR_OUT_OF_RANGE [src_off, src_off + size) or [dst_off, dst_off + size)
 *         outside its region (or size above 2^52 - 1)
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_put(gpuport_channel_t ch, uint64_t dst_off,
                                                 uint64_t src_off, uint64_t size);

/**
 * Increments the peer's semaphore once the channel's puts pushed before it
 * from the host (any host thread) are visible there; puts kernels pushed are
 * covered only if the proxy had already taken them (host and device push
 * into two FIFOs). The peer consumes it with wait or poll.
 * @retval GPUPORT_OK queued
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_signal(gpuport_channel_t ch);

/**
 * gpuport_channel_put, then gpuport_channel_signal, in one trigger.
 * @retval GPUPORT_OK queued
 * @retval GPUPORT_ERR_OUT_OF_RANGE as for gpuport_channel_put
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_put_with_signal(gpuport_channel_t ch,
                                                             uint64_t dst_off, uint64_t src_off,
                                                             uint64_t size);

/**
 * Writes the 64-bit value into the peer's destination region at dst_off, as
 * one 8-byte store (host byte order), with no source and no copy: the value
 * travels in the trigger. Ordered like a put: after the channel's earlier
 * puts, before its later signals. Where the region itself starts 8-aligned
 * (gpuport_mem_alloc, malloc, GPU memory) the store is atomic: a reader sees
 * the old value or the new, never a mix.
 * @retval GPUPORT_OK queued
 * @retval GPUPORT_ERR_INVALID_ARG dst_off is not a multiple of 8 (nothing queued)
 * @retval GPUPORT_ERR_OUT_OF_RANGE dst_off + 8 beyond the destination region, or
 *         dst_off of 2^47 or more (nothing queued)
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_put_value(gpuport_channel_t ch, uint64_t dst_off,
                                                       uint64_t value);

/**
 * gpuport_channel_put_value, then gpuport_channel_signal, in one trigger.
 * @retval GPUPORT_OK queued
 * @retval GPUPORT_ERR_INVALID_ARG, GPUPORT_ERR_OUT_OF_RANGE as for
 *         gpuport_channel_put_value
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_put_value_with_signal(gpuport_channel_t ch,
                                                                   uint64_t dst_off,
                                                                   uint64_t value);

/**
 * Returns when the channel's operations pushed earlier from the host (with
 * the calls above, by any thread) are complete: their sources may be reused
 * and their data is in the peer's memory. Operations that kernels pushed on
 * the same channel travel through another FIFO, which is not ordered with
 * the host's: a host flush covers those only if the proxy took them before
 * it; a kernel's own gpuport_flush covers them.
 * Blocks up to GPUPORT_TIMEOUT_MS.
 * @retval GPUPORT_OK complete
 * @retval GPUPORT_ERR_TIMEOUT not complete within GPUPORT_TIMEOUT_MS
 * @retval other see the common statuses above (the channel's error also when it
 *         failed while the flush waited)
 */
GPUPORT_API gpuport_status_t gpuport_channel_flush(gpuport_channel_t ch);

/**
 * Consumes one signal from the peer, waiting up to GPUPORT_TIMEOUT_MS for
 * it; the peer's puts before that signal are then in this rank's
 * destination. Host and device waiters count a channel's signals
 * separately: consume them on one side only.
 * @retval GPUPORT_OK one signal consumed (signals that arrived before the peer's
 *         close or failure are still consumed, one per call)
 * @retval GPUPORT_ERR_CLOSED the peer closed its side of the channel in order
 *         and no signal is left to consume (reported when seen, not after the
 *         timeout)
 * @retval GPUPORT_ERR_PEER the peer failed or exited, or its connection broke,
 *         with no signal left to consume (reported when seen)
 * @retval GPUPORT_ERR_TIMEOUT no signal within GPUPORT_TIMEOUT_MS
 * @retval GPUPORT_ERR_INVALID_ARG not a live channel
 */
GPUPORT_API gpuport_status_t gpuport_channel_wait(gpuport_channel_t ch);

/**
 * Consumes one signal if one has arrived, without waiting.
 * @param ch a live channel
 * @param[out] ready_p 1 if a signal was consumed, 0 if none had arrived
 * @retval GPUPORT_OK *ready_p says which (a signal that arrived before the peer's
 *         close or failure is still consumed)
 * @retval GPUPORT_ERR_CLOSED the peer closed its side in order, no signal left
 * @retval GPUPORT_ERR_PEER the peer failed or exited, or its connection broke,
 *         no signal left
 * @retval GPUPORT_ERR_INVALID_ARG not a live channel, or ready_p NULL
 */
GPUPORT_API gpuport_status_t gpuport_channel_poll(gpuport_channel_t ch, int *ready_p);

/**
 * Waits until the channel's signal count reaches `value`: what a
 * sequence-numbered exchange waits on (round k waits until k), in one call
 * however many signals that is.
 *
 * The signal count is the number of signals this side has received on the
 * channel since it was created (gpuport_channel_signal_count): it only
 * grows. The consumed count is the number that host waits have taken:
 * gpuport_channel_wait and _poll take one signal at a time, raising it by
 * one; this call raises it to `value` where it was lower (to at least
 * `value`, never down), so signals 1 .. value count as taken and a later
 * wait or poll takes signal value + 1 first, whichever of the calls a
 * program mixes on one channel. It returns at once where the count is
 * already there (value 0, or a value a poll or wait already passed). Any
 * number of threads may wait at once, for the same value or different ones.
 * Host and device waits keep separate consumed counts, as for
 * gpuport_channel_wait: consume a channel's signals on one side only.
 * The peer's puts before its value-th signal are in this rank's
 * destination once this returns GPUPORT_OK.
 *
 * @param ch a live channel
 * @param value the signal count to wait for (signals since creation)
 * @retval GPUPORT_OK the count is value or more; the consumed count is at least value
 * @retval GPUPORT_ERR_CLOSED the peer closed its side in order with the count below
 *         value (no more signals will come; reported when seen, not after the
 *         timeout; the consumed count is unchanged)
 * @retval GPUPORT_ERR_PEER the peer failed or exited, or its connection broke, with
 *         the count below value (reported when seen)
 * @retval GPUPORT_ERR_TIMEOUT the count stayed below value for GPUPORT_TIMEOUT_MS (the
 *         message names the channel, the value and the count; nothing consumed)
 * @retval GPUPORT_ERR_INVALID_ARG not a live channel
 */
GPUPORT_API gpuport_status_t gpuport_channel_wait_until(gpuport_channel_t ch, uint64_t value);

/**
 * Reads the channel's signal count without waiting and without consuming:
 * the signals this side has received on the channel since it was created
 * (see gpuport_channel_wait_until), those that host or device waits took
 * included. Where the transport lets the calling thread receive
 * (GPUPORT_HOST_INLINE), it first takes in what has arrived, as
 * gpuport_channel_poll does.
 *
 * The count stays readable after the peer's close or failure, and is then
 * final: it says how many of the peer's signals came before its end, which
 * the waits' GPUPORT_ERR_CLOSED does not; gpuport_channel_status tells
 * the channel's state.
 * @param ch a live channel
 * @param[out] count_p the signal count
 * @retval GPUPORT_OK *count_p is the count
 * @retval GPUPORT_ERR_INVALID_ARG not a live channel, or count_p NULL
 */
GPUPORT_API gpuport_status_t gpuport_channel_signal_count(gpuport_channel_t ch,
                                                          uint64_t *count_p);

/**
 * Consumes one signal from each of the n channels, taking them as they
 * arrive, in any order, within one GPUPORT_TIMEOUT_MS: what a rank does
 * after its neighbours' or peers' puts (a halo exchange, an all-to-all).
 * @param chs n live channels (of one communicator, or of several)
 * @param n   how many; 0 returns at once
 * @retval GPUPORT_OK one signal consumed on every channel
 * @retval GPUPORT_ERR_TIMEOUT not every channel had a signal within GPUPORT_TIMEOUT_MS
 *         (the message names the first that had none)
 * @retval GPUPORT_ERR_CLOSED, GPUPORT_ERR_PEER as gpuport_channel_wait, for the first
 *         channel found so; signals already taken from other channels stay taken
 *         (their gpuport_channel_poll tells which are still due)
 * @retval GPUPORT_ERR_INVALID_ARG chs NULL with n > 0, n negative, or a handle that is
 *         not a live channel (nothing consumed)
 */
GPUPORT_API gpuport_status_t gpuport_channel_wait_all(const gpuport_channel_t *chs, int n);

/**
 * gpuport_channel_flush on each of the n channels in turn; every channel is
 * flushed even after one fails.
 * @retval GPUPORT_OK every channel's earlier host operations are complete
 * @retval GPUPORT_ERR_INVALID_ARG chs NULL with n > 0, or n negative
 * @retval other the first error a flush returned
 */
GPUPORT_API gpuport_status_t gpuport_channel_flush_all(const gpuport_channel_t *chs, int n);

/**
 * The channel's error state: GPUPORT_OK, or the error the proxy or the peer
 * hit (for example a trigger with offsets outside the registered regions:
 * GPUPORT_ERR_OUT_OF_RANGE; the peer's orderly close: GPUPORT_ERR_CLOSED,
 * as soon as its word has arrived, even while signals it sent before are
 * still to be consumed; the peer's failure or death: GPUPORT_ERR_PEER).
 * Once in error a channel stays so.
 * @retval GPUPORT_ERR_INVALID_ARG not a live channel
 */
GPUPORT_API gpuport_status_t gpuport_channel_status(gpuport_channel_t ch);

/**
 * The transport the channel uses ("shm", "cuda_ipc", "tcp", "ib").
 * @return a static string; "none" for a handle that is not a live channel
 */
GPUPORT_API const char *gpuport_channel_transport(gpuport_channel_t ch);

/** @} */

/**
 * @name Reading from the peer and adding into it
 * get, atomic_add and accumulate are queued and carried out like put, in the
 * channel's order, and return the same common statuses; flush waits for them
 * as for puts. Which transports carry which (and for what memory) is in
 * docs/GUIDE.md ("get, atomic add and accumulate"); a channel whose transport
 * cannot carry one refuses it here with GPUPORT_ERR_NOT_SUPPORTED and a
 * message naming why and what can (nothing queued, the channel stays usable).
 *
 * Atomicity: every element an atomic_add or accumulate adds is one atomic
 * read-modify-write of that element with respect to every other atomic_add
 * and accumulate on it, from any rank and either API (host or device, port or
 * memory channel), on host memory and on GPU memory alike. It is not atomic
 * with plain puts or stores to the same bytes: separate them by a flush (the
 * writer's) and a signal. Ordering is a put's: after the channel's earlier
 * operations, before its later signals, so a peer that consumed a signal
 * pushed after an accumulate sees the sum.
 *
 * Floating-point sums: each add rounds once, to nearest even, in the element's
 * type (float32 or bfloat16; no denormal flushing on the host, whatever
 * flush-to-zero mode the application's threads set); adds from
 * several ranks land in any order, so a sum of k terms differs from the sum
 * in a fixed order by at most (k - 1) * u * (sum of |terms|), u = 2^-24 for
 * float32 and 2^-8 for bfloat16.
 * @{
 */

/** Element types of gpuport_channel_accumulate (and the device API's). */
typedef enum {
    GPUPORT_INT64 = 1,   /**< int64_t, two's complement: wraps */
    GPUPORT_UINT64 = 2,  /**< uint64_t: wraps (the same bits as GPUPORT_INT64) */
    GPUPORT_FLOAT32 = 3, /**< IEEE 754 binary32 */
    GPUPORT_BFLOAT16 = 4 /**< bfloat16: the upper 16 bits of a binary32 */
} gpuport_dtype_t;

/**
 * Copies `size` bytes from the peer's destination region at peer_off into
 * this side's source region at local_off: the put's two regions, read the
 * other way. Complete (the bytes here) once a later gpuport_channel_flush returns
 * GPUPORT_OK; reads what the channel's earlier puts wrote there. Not ordered
 * with the peer's own stores to those bytes (synchronize with signals, as for
 * puts), nor with this side's use of its source bytes before that flush (a
 * put that sends them may read them before the get lands).
 * @param ch a live channel
 * @param peer_off where to read: an offset of the peer's destination region (a
 *        put's dst_off)
 * @param local_off where to write: an offset of this side's source region (a
 *        put's src_off)
 * @param size bytes
 * @retval GPUPORT_OK queued
 * @retval GPUPORT_ERR_OUT_OF_RANGE as for gpuport_channel_put (either range outside
 *         its region)
 * @retval GPUPORT_ERR_NOT_SUPPORTED the channel's transport cannot get between
 *         these regions (the message says why)
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_get(gpuport_channel_t ch, uint64_t peer_off,
                                                 uint64_t local_off, uint64_t size);

/**
 * Adds the 64-bit value (two's complement: a negative value subtracts) to the
 * 8 bytes at dst_off of the peer's destination region, atomically; nothing is
 * fetched. The value travels in the trigger, as put_value's does.
 * @retval GPUPORT_OK queued
 * @retval GPUPORT_ERR_INVALID_ARG dst_off is not a multiple of 8, or the peer's region
 *         does not start 8-aligned
 * @retval GPUPORT_ERR_OUT_OF_RANGE as for gpuport_channel_put_value
 * @retval GPUPORT_ERR_NOT_SUPPORTED the transport cannot add into the peer's region
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_atomic_add(gpuport_channel_t ch, uint64_t dst_off,
                                                        int64_t value);

/**
 * Adds `count` elements of `type` from this side's source region at src_off,
 * element by element, into the peer's destination region at dst_off (each
 * element one atomic add; see the rules above). The source may be reused once
 * a later flush returns GPUPORT_OK.
 * @retval GPUPORT_OK queued
 * @retval GPUPORT_ERR_INVALID_ARG count 0, type not a gpuport_dtype_t, an offset not a
 *         multiple of the element size, or the peer's region not aligned to it
 * @retval GPUPORT_ERR_OUT_OF_RANGE count elements at either offset outside its region
 * @retval GPUPORT_ERR_NOT_SUPPORTED the transport cannot add into the peer's region
 * @retval other see the common statuses above
 */
GPUPORT_API gpuport_status_t gpuport_channel_accumulate(gpuport_channel_t ch, uint64_t dst_off,
                                                        uint64_t src_off, uint64_t count,
                                                        gpuport_dtype_t type);

/** The name of an element type ("int64", "uint64", "float32", "bfloat16").
 *  @return a static string; "unknown" for any other value */
GPUPORT_API const char *gpuport_dtype_string(int type);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
