/*
 * The core's shared definitions: communicator, registrations, connections
 * and channels. Included by the core and the transports, never installed.
 *
 * Each channel exists twice: the application-side handle (gpuport_channel)
 * that pushes triggers, and the proxy-side entry (gpuport_pchan) in the
 * communicator's table that the proxy thread owns once it is activated.
 * They share one gpuport_chan_state_t that the proxy publishes into.
 */
#ifndef GPUPORT_INTERNAL_H
#define GPUPORT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "fifo.h"
#include "flusher.h"
#include "gpuport/gpuport.h"
#include "log.h"
#include "record.h"
#include "topology.h"
#include "transport/transport.h"

/* Published by the proxy, read by pushers. One cache line per channel. */
/* FIFOs of a communicator: host threads push into the host FIFO, kernels
 * into the device FIFO (GPU mode). Flush progress is per FIFO because
 * positions are. */
#define GPUPORT_FIFO_HOST 0
#define GPUPORT_FIFO_DEVICE 1
#define GPUPORT_NFIFOS 2

typedef struct gpuport_chan_state {
    /* per FIFO: all ops at positions < flushed[f] are complete */
    _Alignas(64) _Atomic uint64_t flushed[GPUPORT_NFIFOS];
    _Atomic int32_t status; /* GPUPORT_OK or the channel's error */
} gpuport_chan_state_t;

/* A channel's inbound semaphore, in the control segment that peers map. */
typedef struct gpuport_sem_slot {
    _Alignas(64) _Atomic uint64_t value;
    _Atomic int32_t peer_status; /* the peer's side of the channel failed */
} gpuport_sem_slot_t;

typedef struct gpuport_conn {
    struct gpuport_comm *comm;
    int peer;
    const gpuport_transport_ops_t *ops;
    void *priv; /* the transport's */
    int refs;   /* channels using it */
    int pindex; /* in comm->pconns, for transports with progress() */
} gpuport_conn_t;

#define GPUPORT_PENDING_FLUSHES 8

/* Proxy-side channel: written by the application thread before activation,
 * then only by the proxy thread until deactivation. */
typedef struct gpuport_pchan {
    _Atomic int active;
    uint32_t id;
    uint32_t peer_id;            /* the peer's id for this channel (its inbound slot) */
    struct gpuport_comm *comm;
    gpuport_conn_t *conn;
    const gpuport_transport_ops_t *ops;
    void *src_base;
    uint64_t src_size;
    int src_kind;                /* gpuport_region_kind_t */
    void *local_dst;             /* where the peer's puts land here (transports that */
    uint64_t local_dst_size;     /* write on the receiver's side: tcp) */
    int local_dst_kind;
    gpuport_remote_region_t dst; /* the peer's destination region */
    _Atomic uint64_t *remote_sem;    /* the peer's inbound semaphore for us, mapped */
    _Atomic int32_t *remote_status;  /* where our failures are reported to the peer */
    uint64_t remote_sem_dev;         /* cuda_ipc: remote_sem in the flusher's context */
    int peer_pid;
    gpuport_chan_state_t *state;
    /* proxy thread only */
    uint64_t work_posted;     /* items queued at the flusher */
    uint64_t work_done;       /* of those, completed */
    uint64_t signals_sent;    /* transports that write absolute semaphore values */
    uint32_t nflush;          /* pending flushes in flush_* */
    uint64_t flush_pos[GPUPORT_PENDING_FLUSHES];
    uint64_t flush_target[GPUPORT_PENDING_FLUSHES];
    uint8_t flush_fifo[GPUPORT_PENDING_FLUSHES];
} gpuport_pchan_t;

struct gpuport_mem {
    struct gpuport_mem *next, *prev; /* the communicator's registrations */
    struct gpuport_comm *comm;
    void *ptr;
    uint64_t size;
    gpuport_region_rec_t rec; /* how peers reach it */
};

/* An allocation from gpuport_mem_alloc. */
typedef struct gpuport_alloc {
    struct gpuport_alloc *next;
    void *ptr;
    size_t size;
    size_t map_len;
    int fd;     /* host: the memfd; -1 for device memory */
    int device; /* from gpuport_mem_alloc_device (VMM) */
} gpuport_alloc_t;

struct gpuport_channel {
    struct gpuport_comm *comm;
    uint32_t id;
    int peer;
    gpuport_pchan_t *pchan;
    gpuport_chan_state_t *state;
    gpuport_sem_slot_t *inbound; /* our semaphore, incremented by the peer */
    _Atomic uint64_t consumed; /* signals taken by wait/poll */
    uint64_t src_size;
    uint64_t dst_size;         /* the peer's destination region */
    int peer_pid;
    int peer_same_host;
};

typedef struct gpuport_proxy {
    pthread_t thread;
    int started;
    _Atomic int running; /* bound where placed, polling */
    _Atomic int stop;
    _Atomic int exited;
    uint64_t drain_deadline_ns;
    gpuport_flusher_t flusher;
    /* counters: written by the proxy thread only (GPUPORT_STAT_INC), read
     * by gpuport_comm_stats at any time */
    _Atomic uint64_t triggers;
    _Atomic uint64_t rejected;
    uint64_t abandoned;
    unsigned char *peer_dead; /* by rank: exited / watched flags (proxy thread only) */
    uint64_t async_outstanding; /* transport-completed operations in flight (proxy only) */
} gpuport_proxy_t;

struct gpuport_comm {
    gpuport_bootstrap_t bs;
    gpuport_config_t config;
    int rank;
    int size;
    gpuport_proc_rec_t *procs; /* every rank's record, by rank */
    /* control segment: inbound semaphores, mapped by same-host peers */
    int ctrl_fd;
    gpuport_sem_slot_t *ctrl;
    size_t ctrl_size;
    gpuport_fifo_t fifo;         /* host pushers */
    gpuport_fifo_t dfifo;        /* device pushers (GPU mode), head in device memory */
    struct gpuport_gpu *gpu;     /* NULL: host-only communicator */
    int gpu_device;              /* CUDA ordinal of the communicator's GPU, -1: none */
    void *gpu_app_ctx;           /* the application's (primary) CUcontext */
    uint64_t gpu_app_probe;      /* 8 bytes of device memory in that context */
    uint64_t timeout_ns;
    gpuport_pchan_t *pchans;       /* max_channels */
    gpuport_chan_state_t *states;  /* max_channels; page-aligned for GPU mapping */
    size_t states_size;
    pthread_mutex_t lock;          /* ids, conns, allocs: application threads */
    unsigned char *id_used;
    gpuport_conn_t **conns;        /* by peer, opened on first channel */
    gpuport_conn_t **pconns;       /* connections with progress(), in opening order */
    _Atomic int npconns;           /* published to the proxy with release */
    struct gpuport_tcp_comm *tcp;  /* the tcp transport's listener, NULL if none */
    gpuport_alloc_t *allocs;
    struct gpuport_mem *mems;
    struct gpuport_channel **chans; /* handles by id, freed at destroy if left open */
    gpuport_topology_t *topo;       /* NULL: unreadable, threads unbound */
    gpuport_placement_t placement;  /* the proxy's and flusher's PUs */
    gpuport_proxy_t proxy;
};

/* proxy.c */
gpuport_status_t gpuport_proxy_start(struct gpuport_comm *comm);
/* Drains the FIFO and the flusher until the configured timeout, fails what
 * is left, joins both threads. */
void gpuport_proxy_stop(struct gpuport_comm *comm);

/* channel.c */
/* Pairwise exchange of bytes with peer through the bootstrap (lower rank
 * sends first); tags below 0x4800 are the core's. Application thread. */
gpuport_status_t gpuport_bootstrap_exchange(struct gpuport_comm *comm, int peer, int tag,
                                            const void *mine, void *theirs, size_t bytes);
gpuport_status_t gpuport_channel_push(struct gpuport_channel *ch, uint32_t op, uint64_t dst_off,
                                      uint64_t src_off, uint64_t size, uint64_t *pos_p);

/* comm.c */
uint64_t gpuport_now_ns(void);
/* Backoff for waiting loops on application threads: spin, then yield.
 * Returns 1 once yielding: a yield can take a whole time slice, so callers
 * then check their deadline on every pass instead of every 1024th. */
#define GPUPORT_SPIN_POLLS 128
int gpuport_wait_backoff(uint32_t *iter);
/* 0 if the process is gone (same host only) */
int gpuport_pid_alive(int pid);

/* GPU mode (src/cuda/gpu.c; src/gpu_none.c in builds without CUDA). All run
 * on application threads. */
/* Sets comm->gpu when the process has a GPU (GPUPORT_GPU); GPU-less is not
 * an error unless GPUPORT_GPU=on. */
gpuport_status_t gpuport_gpu_open(struct gpuport_comm *comm);
void gpuport_gpu_close(struct gpuport_comm *comm);
/* 1 and rec filled if ptr is GPU memory, 0 if not, <0 on error */
int gpuport_gpu_mem_describe(struct gpuport_comm *comm, void *ptr, size_t size,
                             gpuport_region_rec_t *rec);
/* zeroes the device waiters' signal count of a (re)used channel id */
gpuport_status_t gpuport_gpu_channel_reset(struct gpuport_comm *comm, uint32_t id);
/* GPU memory that every context on the communicator's device reaches (CUDA
 * VMM, mapped for the device); *len_p is what was mapped. */
gpuport_status_t gpuport_gpu_vmm_alloc(struct gpuport_comm *comm, size_t size, void **ptr_p,
                                       size_t *len_p);
void gpuport_gpu_vmm_free(struct gpuport_comm *comm, void *ptr, size_t len);
/* Pinned host memory that the flusher's staging copies (GPUPORT_WORK_CU_TO/
 * FROM_DEVICE) read and write: network transports' GPU regions. */
gpuport_status_t gpuport_gpu_stage_alloc(struct gpuport_comm *comm, size_t size, void **p);
void gpuport_gpu_stage_free(struct gpuport_comm *comm, void *p, size_t size);
/* the GPU's PCI bus id ("0000:3B:00.0"); -1 for a host-only communicator */
int gpuport_gpu_bus_id(struct gpuport_comm *comm, char *buf, size_t len);

/* mem.c */
gpuport_alloc_t *gpuport_alloc_find(struct gpuport_comm *comm, const void *ptr, size_t size);
void gpuport_mem_free_all(struct gpuport_comm *comm);

#endif
