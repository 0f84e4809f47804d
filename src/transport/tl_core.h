/*
 * What the core offers transports: the whole of it. A transport includes
 * this (with the ops table of transport.h, which includes it) and its own
 * folder's headers, nothing else of the core's but the service headers
 * named below. It sees its communicator, connections and channels through
 * the types below and reaches the rest of the core only through these
 * services: facts about the communicator and its ranks, its settings, its
 * records, the bootstrap, the control segment's semaphores, failing and
 * completing channels, flusher work and whether the communicator is
 * stopping. It keeps its own state behind the `priv` pointers of its
 * gpuport_tl_comm_t, gpuport_conn_t and gpuport_tl_chan_t.
 *
 * The core headers included here are marked: "service" headers are part of
 * this interface, functions and all (the public API, logging, the clock);
 * "types" headers lend their types only, and their functions are the
 * core's. One service is not included here, since only a transport of GPU
 * memory needs it, and only in builds with CUDA (cuda_ipc includes it):
 *   service header: cuda/cudrv.h (the CUDA driver's entry points, gpuport_cu)
 * test/tools/link_graph.sh holds every transport object to this: each
 * symbol it takes from the core must be named in this file, transport.h or
 * a service header.
 *
 * Threads: set-up services (facts, exchange, lookups) run on application
 * threads; the "proxy thread" ones only from put/signal/progress and the
 * other ops the proxy calls.
 */
#ifndef GPUPORT_TL_CORE_H
#define GPUPORT_TL_CORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config_var.h"       /* types: the rows of ops->settings */
#include "fdpass/fdpass.h"           /* types: gpuport_fdpiece_t */
#include "flusher.h"          /* types: gpuport_work_t */
#include "gpuport/gpuport.h"  /* service: the public API (gpuport_status_string) */
#include "gpuport/gpuport_trigger.h" /* types: the operation codes (ops->host_send) */
#include "log.h"              /* service: the log_* macros (its set-up calls are the core's) */
#include "record.h"           /* types: the records and their header */
#include "util.h"             /* service: the clock, deadlines, back-off */

struct gpuport_transport_ops;

/* kinds (registry.c) a communicator has room for, "auto" included */
#define GPUPORT_TL_MAX_KINDS GPUPORT_REC_TL_KINDS

/* A registration as every transport sees it, classified once at
 * registration (mem.c, mem_classify): transports ask `kind`, never
 * the memory itself. */
typedef struct gpuport_region {
    void *ptr;
    uint64_t size;
    int kind;       /* gpuport_region_kind_t: how transports carry it */
    int mem_kind;   /* gpuport_mem_kind_t: what the application allocated (pinned host
                     * memory is kind HOST, mem_kind HOST_PINNED) */
    int device;     /* CUDA ordinal of GPU memory, else -1 */
    int alloc_fd;   /* HOST_SHARED: the memfd behind it, else -1 */
    uint64_t alloc_off; /* HOST_SHARED: offset of ptr in that memfd */
    /* What a same-host peer that maps the region receives (fdpass.h), in
     * address order: the memfd range of HOST_SHARED memory, each VMM
     * allocation that DEVICE_VMM memory spans (the region starts map_off
     * bytes into the first), the pool of exportable DEVICE_POOL memory.
     * None for private or legacy memory, or for VMM or pool memory that
     * cannot be exported (export_why says why). */
    gpuport_fdpiece_t *pieces;
    uint32_t npieces;
    int pieces_owned; /* the registration exported them and closes them */
    uint64_t map_off;
    const char *export_why;
} gpuport_region_t;

/* 1 for every kind of GPU memory (legacy IPC-exportable, VMM, pool) */
static inline int gpuport_region_is_device(int kind)
{
    return kind == GPUPORT_REGION_DEVICE || kind == GPUPORT_REGION_DEVICE_VMM ||
           kind == GPUPORT_REGION_DEVICE_POOL;
}

/* 1 for GPU memory mapped for the device rather than owned by the
 * application's context (VMM and pool memory): every context of the
 * process, the flusher's among them, copies it by the application's
 * pointer. */
static inline int gpuport_region_is_mapped_device(int kind)
{
    return kind == GPUPORT_REGION_DEVICE_VMM || kind == GPUPORT_REGION_DEVICE_POOL;
}

/* A peer's region made usable here. */
typedef struct gpuport_remote_region {
    gpuport_region_rec_t rec; /* as the peer described it */
    void *base;               /* mapped here, or NULL when not mapped */
    void *map_base;           /* what to release, or NULL */
    size_t map_len;
} gpuport_remote_region_t;

/* A transport's part of one communicator: opened for every built transport
 * at communicator creation (ops->comm_open), closed at its destruction. */
typedef struct gpuport_tl_comm {
    gpuport_comm_t comm;
    const struct gpuport_transport_ops *ops;
    int kind;   /* its index in the transport list (transport.h) */
    void *priv; /* the transport's */
} gpuport_tl_comm_t;

/* A connection to one peer, opened at the first channel to it. */
typedef struct gpuport_conn {
    gpuport_comm_t comm;
    gpuport_tl_comm_t *tl;
    int peer;
    void *priv; /* the transport's */
    /* the core's */
    _Atomic int broken; /* gpuport_tl_conn_fail was called: the peer reaches nothing here */
    int refs;   /* channels using it */
    _Atomic int used; /* a channel was ever active on it (else there is no goodbye to wait for) */
    int pindex; /* in the communicator's progress list, for transports with progress() */
} gpuport_conn_t;

/* One channel as its transport sees it: written by the core before
 * chan_connect, read-only to the transport except dst, remote_slot and
 * priv, which chan_connect fills. */
typedef struct gpuport_tl_chan {
    uint32_t id;      /* this side's id: its inbound semaphore slot */
    uint32_t peer_id; /* the peer's id for the channel (the slot this side signals) */
    int peer;
    gpuport_comm_t comm;
    gpuport_conn_t *conn;
    gpuport_region_t src;       /* local source (size 0: none) */
    gpuport_region_t local_dst; /* where the peer's puts land here (size 0: none) */
    gpuport_remote_region_t dst; /* the peer's destination region */
    /* The descriptors of the peer's destination (rec.npieces of them), for
     * transports with pass_fds: open during chan_connect only, which maps
     * what it needs; the core closes them after. */
    const gpuport_fdpiece_t *dst_pieces;
    uint32_t dst_npieces;
    /* The peer's semaphore slot for this channel, where the transport maps
     * the peer's control segment: this side's failures and its close are
     * written there. NULL: report_fail tells the peer, and the peer's
     * memory is written only by the peer (its receiver or its NIC). */
    struct gpuport_sem_slot *remote_slot;
    void *priv; /* the transport's */
} gpuport_tl_chan_t;

/* A channel's inbound semaphore, in the control segment that peers map. */
typedef struct gpuport_sem_slot {
    _Alignas(64) _Atomic uint64_t value;
    _Atomic int32_t peer_status; /* the peer's side of the channel failed (its status) or
                                  * closed in order (GPUPORT_ERR_CLOSED) */
    /* The peer promises to write nothing more into this rank's memory for
     * the channel: its side is closed (or failed) and drained. Written only
     * where the peer maps this slot (remote_slot). */
    _Atomic int32_t peer_closed;
    /* The transport's own words for the channel (zero at its creation):
     * what its protocol has the peer and this rank write here, such as a
     * request to this rank and the answer to one of this rank's (cuda_ipc's
     * relay, cipc_relay.c). A peer's words are checked before use. */
    _Atomic uint64_t tl_word[5];
} gpuport_sem_slot_t;

/* ---- facts (any thread; constant for the communicator's life) ---- */
int gpuport_tl_rank(gpuport_comm_t comm);
int gpuport_tl_size(gpuport_comm_t comm);
/* GPUPORT_MAX_CHANNELS: channel ids are below it */
uint32_t gpuport_tl_max_channels(gpuport_comm_t comm);
/* GPUPORT_TIMEOUT_MS in nanoseconds, 0: none */
uint64_t gpuport_tl_timeout_ns(gpuport_comm_t comm);
const gpuport_proc_rec_t *gpuport_tl_proc(gpuport_comm_t comm, int rank);
/* 1 if GPUPORT_TRANSPORT names this transport (not auto) */
int gpuport_tl_forced(const gpuport_tl_comm_t *tc);
/* 1 if rank runs on this rank's host (same host id) */
int gpuport_tl_same_host(gpuport_comm_t comm, int rank);
/* 1 in GPU mode (the communicator has a GPU) */
int gpuport_tl_has_gpu(gpuport_comm_t comm);
/* the GPU's PCI bus id; -1 for a host-only communicator */
int gpuport_tl_gpu_bus_id(gpuport_comm_t comm, char *buf, size_t len);
/* Of the n devices named (OS names, "mlx5_0"), the index of the one the
 * machine's topology puts nearest the communicator's GPU, with why; -1
 * (why says) without a GPU, a readable topology or a device found there. */
int gpuport_tl_nearest_device(gpuport_comm_t comm, const char *const *names, int n, char *why,
                              size_t len);

/* ---- what the transport owns (its ops table declares them) ---- */
/* The settings structure of transport kind (the caller's own), its rows
 * parsed for this communicator: constant for the communicator's life. */
const void *gpuport_tl_settings(gpuport_comm_t comm, int kind);

/* A record type of the transport's own (ops->records): `id` (1..255) is
 * the transport's number for it; on the wire its type is
 * GPUPORT_REC_TL_TYPE(kind, id) (record.h), so no two transports' records,
 * nor the core's, share a type. size: the whole record, header first. */
typedef struct gpuport_tl_record_type {
    uint8_t id;
    uint16_t size;
    const char *name; /* for messages: "ib QP record" */
} gpuport_tl_record_type_t;
/* Writes the header of a record of type t of transport kind at rec. */
void gpuport_tl_record_init(int kind, const gpuport_tl_record_type_t *t, gpuport_rec_header_t *rec);
/* GPUPORT_OK if hdr, from peer, heads a record of type t of this release,
 * else GPUPORT_ERR_VERSION, logged naming both sides and the record. */
gpuport_status_t gpuport_tl_record_check(int kind, const gpuport_tl_record_type_t *t,
                                         const gpuport_rec_header_t *hdr, int peer);

/* ---- the rank record's per-transport part ---- */
/* comm_open writes its part (at most GPUPORT_TL_BLOB_MAX bytes, record.h)
 * through gpuport_tl_blob_set, which stamps it with the transport's own
 * version; peers' parts come back from gpuport_tl_blob, checked against the
 * version and size this rank wrote: NULL, logged naming both, when they
 * differ or the peer wrote none. */
void *gpuport_tl_blob_set(void *blob, uint16_t version, uint16_t size);
const void *gpuport_tl_blob(const gpuport_tl_comm_t *tc, int rank);

/* ---- bootstrap (application threads) ---- */
/* gpuport_bootstrap_exchange on the communicator's bootstrap */
gpuport_status_t gpuport_tl_exchange(gpuport_comm_t comm, int peer, int tag, const void *mine,
                                     void *theirs, size_t bytes);

/* ---- connections and channels ---- */
/* Application thread: this transport's open connection to peer, or NULL.
 * *other_p (may be NULL) is set to 1 when the peer is connected through
 * another transport. */
gpuport_conn_t *gpuport_tl_conn_find(const gpuport_tl_comm_t *tc, int peer, int *other_p);
/* Proxy thread: the channel with this id if it was connected on conn, else
 * NULL. Its fields are those chan_connect saw: a transport that receives
 * for channels gates this with a flag of its own that chan_connect sets
 * (with release) and chan_disconnect clears. */
gpuport_tl_chan_t *gpuport_tl_chan_find(gpuport_conn_t *conn, uint32_t id);
/* Proxy thread: calls fn for every active channel on conn. */
void gpuport_tl_conn_each(gpuport_conn_t *conn, void (*fn)(gpuport_tl_chan_t *ch, void *arg),
                          void *arg);
/* Proxy thread: the connection cannot go on. Fails every active channel on
 * it on this side, this side's waiters for the peer's signals included;
 * nothing is sent to the peer. Returns how many channels it failed. */
int gpuport_tl_conn_fail(gpuport_conn_t *conn, gpuport_status_t status);
/* Proxy thread: the same for one channel; 1 if this was its first error. */
int gpuport_tl_chan_fail(gpuport_tl_chan_t *ch, gpuport_status_t status);
/* Proxy thread, for transports whose put/signal return
 * GPUPORT_TRANSPORT_ASYNC: the oldest incomplete operation of ch has
 * completed with status. */
void gpuport_tl_chan_complete(gpuport_tl_chan_t *ch, gpuport_status_t status);
/* Proxy thread, for transports with host_send: the oldest host call of ch
 * whose operation host_send sent (GPUPORT_TRANSPORT_ASYNC) has completed
 * with status (an error fails the channel). */
void gpuport_tl_inline_complete(gpuport_tl_chan_t *ch, gpuport_status_t status);

/* ---- this rank's control segment: the inbound semaphores ---- */
/* The segment (for transports that register it with a NIC or map it for
 * peers): base and size. */
void gpuport_tl_ctrl(gpuport_comm_t comm, void **base_p, size_t *size_p);
/* Slot of channel id; NULL for an id beyond the segment. */
gpuport_sem_slot_t *gpuport_tl_sem(gpuport_comm_t comm, uint32_t id);
/* A peer's signal arrived for channel id (transports that receive). */
void gpuport_tl_sem_add(gpuport_comm_t comm, uint32_t id, uint64_t n);
/* The peer's side of channel id failed (status: the failure, or
 * GPUPORT_ERR_PEER for a peer that died or a connection that broke) or
 * closed in order (GPUPORT_ERR_CLOSED: a goodbye): this side's waiters
 * stop, and its calls report which. The first word sticks. */
void gpuport_tl_sem_fail(gpuport_comm_t comm, uint32_t id, gpuport_status_t status);

/* ---- flusher (proxy thread) ---- */
/* Executes w now, on this thread, as the flusher would: for work a
 * transport finishes inline (a short copy, a receive's store). */
gpuport_status_t gpuport_tl_work_execute(const gpuport_work_t *w);
/* room for n more items now */
int gpuport_tl_flusher_room(gpuport_comm_t comm, uint32_t n);
/* Queues flusher work of the connection's own (staging copies, ordered
 * semaphore updates); its completion comes to ops->work_done. 0 when the
 * flusher has no room now. */
int gpuport_tl_post(gpuport_conn_t *conn, const gpuport_work_t *w);
/* 1 once the communicator is being destroyed */
int gpuport_tl_stopping(gpuport_comm_t comm);
/* Proxy thread: keeps the proxy from sleeping before until_ns (gpuport_now_ns
 * clock) although no pass finds work: for something the transport will do
 * by then on its own, such as an acknowledgement it holds back for a
 * while. The proxy still yields its core meanwhile. */
void gpuport_tl_keep_awake(gpuport_comm_t comm, uint64_t until_ns);

/* ---- GPU (application threads; GPU mode only) ---- */
/* Makes the flusher's private context current on this thread, for set-up
 * calls that open peers' memory in it; pop undoes it. */
gpuport_status_t gpuport_tl_gpu_ctx_push(gpuport_comm_t comm);
void gpuport_tl_gpu_ctx_pop(void);
/* Pinned host memory the flusher's staging copies read and write. */
gpuport_status_t gpuport_tl_stage_alloc(gpuport_comm_t comm, size_t size, void **p);
void gpuport_tl_stage_free(gpuport_comm_t comm, void *p, size_t size);
/* A dma-buf file descriptor (the caller closes it) for the page-aligned
 * range [start, start + len) of GPU memory, for NIC registration.
 * NOT_SUPPORTED, with why, where the driver has no dma-buf export; another
 * error, with why, where the export failed. */
gpuport_status_t gpuport_tl_gpu_dmabuf(gpuport_comm_t comm, uint64_t start, uint64_t len,
                                       int *fd_p, char *why, size_t why_len);

#endif
