/*
 * The core's shared definitions: communicator, registrations, connections
 * and channels. Included by the core's files only (transports see the core
 * through src/transport/tl_core.h), never installed.
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
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fifo.h"
#include "flusher.h"
#include "handles.h"
#include "gpuport/gpuport.h"
#include "log.h"
#include "record.h"
#include "topology.h"
#include "transport/transport.h"
#include "util.h"
#include "waker.h"

/* FIFOs of a communicator: host threads push into the host FIFO, kernels
 * into the device FIFO (GPU mode). Flush progress is per FIFO because
 * positions are. */
#define GPUPORT_FIFO_HOST 0
#define GPUPORT_FIFO_DEVICE 1
#define GPUPORT_NFIFOS 2

/* Published by the proxy, read by pushers. One cache line per channel. */
typedef struct gpuport_chan_state {
    /* per FIFO: all ops at positions < flushed[f] are complete */
    _Alignas(64) _Atomic uint64_t flushed[GPUPORT_NFIFOS];
    _Atomic int32_t status; /* GPUPORT_OK or the channel's error */
    /* set by a kernel whose push gave up (the device FIFO stayed full);
     * the proxy fails the channel and clears it (proxy_take.c) */
    _Atomic int32_t gave_up;
} gpuport_chan_state_t;

#define GPUPORT_PENDING_FLUSHES 8

/* Triggers a channel may have parked (proxy_park.c: taken from a FIFO while
 * its transport had no room) at most; past it the FIFO waits. Host pushes
 * wait for the channel's own room once half of it is used (chan_push.c), so
 * a host thread that keeps pushing into a stuck channel waits, and times
 * out, on its own; closes and flushes never wait (the half left is their
 * room), so a destroy always drains. */
#define GPUPORT_PARK_MAX 4096u
#define GPUPORT_PARK_HOST_MAX (GPUPORT_PARK_MAX / 2)

/* Proxy-side channel: written by the application thread before activation,
 * then only by the proxy thread until deactivation. `tl` comes first: the
 * transports get &pchan->tl, and gpuport_pchan_of turns it back. */
typedef struct gpuport_pchan {
    gpuport_tl_chan_t tl;
    _Atomic int active;
    const gpuport_transport_ops_t *ops;
    gpuport_chan_state_t *state;
    /* proxy thread only */
    uint64_t work_posted;     /* items queued at the flusher or taken by the transport */
    uint64_t work_done;       /* of those, completed */
    uint32_t nflush;          /* pending flushes in flush_* */
    uint64_t flush_pos[GPUPORT_PENDING_FLUSHES];
    uint64_t flush_target[GPUPORT_PENDING_FLUSHES];
    uint8_t flush_fifo[GPUPORT_PENDING_FLUSHES];
    uint64_t sig_pending; /* signals taken from the FIFO, not yet handed to the transport */
    int sig_listed;       /* on the proxy's list of channels with such signals */
    int told_peer; /* this side's failure or close was sent to the peer (once) */
    int promised;  /* remote_slot->peer_closed written: nothing more is written there */
    /* A memory channel's: this rank's kernels store into the peer's memory
     * themselves, so the promise waits for this side's own close (its
     * destroy), not only for the end of what the proxy carried out. */
    int kernel_stores;
    int closed_here; /* this side's close was carried out */
    /* host FIFO position + 1 of the channel's last host trigger taken, and
     * the last such value published in flushed[host] because everything
     * of the channel up to it was complete (proxy_settle): what lets a
     * host call carry out the next operation itself (GPUPORT_HOST_INLINE) */
    uint64_t host_seen, host_settled;
    /* host calls writing into the peer's memory themselves now, and 1 once
     * the proxy is about to promise the peer that nothing more is written
     * there (proxy_promise_if_done): a Dekker pair (seq_cst), so that no
     * host call writes after the promise */
    _Atomic int inline_users;
    _Atomic int no_inline;
    /* host calls whose operation the transport sent itself and completes
     * later (ops->host_send's ASYNC: counted by the caller), and their
     * completions (gpuport_tl_inline_complete, proxy thread) or declines
     * (the caller, try_send): a flush or a destroy waits for the two to
     * meet (chan_inline_drained) */
    _Atomic uint64_t inline_sent, inline_done;
    /* the channel's parked triggers (proxy_park.c), published by the proxy
     * for host pushes (GPUPORT_PARK_HOST_MAX) */
    _Atomic uint32_t parked;
} gpuport_pchan_t;

static inline gpuport_pchan_t *gpuport_pchan_of(gpuport_tl_chan_t *tl)
{
    return (gpuport_pchan_t *)tl;
}

/* Handles carry a magic number that destroy clears; the handle then joins
 * its communicator's dead ones (handles.h). */
#define GPUPORT_MEM_MAGIC 0x4d454d47u  /* "GMEM" */
#define GPUPORT_CHAN_MAGIC 0x4e414843u /* "CHAN" */
#define GPUPORT_MCHAN_MAGIC 0x4e41484du /* "MHAN" */
#define GPUPORT_PCHAN_PEER_MAGIC 0x52454550u /* "PEER" */

struct gpuport_mem {
    gpuport_dead_link_t dead; /* first: on the dead list once deregistered */
    uint32_t magic;
    int users;                       /* live channels using it (comm->lock) */
    struct gpuport_mem *next, *prev; /* the communicator's registrations */
    struct gpuport_comm *comm;
    gpuport_region_t region;  /* what it is (mem_classify) */
    gpuport_region_rec_t rec; /* how peers reach it */
};

/* An allocation from gpuport_mem_alloc. */
typedef struct gpuport_alloc {
    struct gpuport_alloc *next;
    void *ptr;
    size_t size;
    size_t map_len;
    int fd;     /* host: the memfd; device: the VMM allocation's exported descriptor */
    int device; /* from gpuport_mem_alloc_device (VMM) */
} gpuport_alloc_t;

struct gpuport_channel {
    gpuport_dead_link_t dead; /* first: on the dead list once destroyed */
    uint32_t magic;
    struct gpuport_mem *src_mem, *dst_mem; /* held: not deregistered while in use */
    struct gpuport_comm *comm;
    uint32_t id;
    int peer;
    gpuport_pchan_t *pchan;
    gpuport_chan_state_t *state;
    gpuport_sem_slot_t *inbound; /* our semaphore, incremented by the peer */
    _Atomic uint64_t consumed; /* signals taken by wait/poll */
    /* host FIFO position + 1 of the channel's last trigger pushed from a
     * host thread (0: none): once the proxy's flushed[host] reaches it,
     * none of its host operations is in flight (chan_push.c) */
    _Atomic uint64_t host_last;
    uint64_t src_size;
    uint64_t dst_size;         /* the peer's destination region */
    int peer_same_host;
    /* for kernels' handles (gpuport_channel_device), fixed at creation:
     * bit (1u << op) for each of GET, ATOMIC_ADD and ACC_* that the
     * transport carries on this channel (rma and rma_ok), and the peer's
     * destination address mod 8, for the alignment an add needs there */
    uint32_t rma_ops;
    uint32_t dst_addr_mod8;
    /* a kernel's handle was made (gpuport_channel_device, which writes an
     * end already there): an end a host call reports goes to its device
     * copy first (chan_said), once each */
    _Atomic int dev_handed;
    _Atomic int ends_noted; /* bit 1: this side's error, bit 2: the peer's word */
};

/* A memory channel (memchan.c): the port channel under it carries its id,
 * its semaphore slot, the peer's failure and close words and the destroy
 * handshake; the kernels' view of the peer is what chan_kernel_map gave. */
struct gpuport_memory_channel {
    gpuport_dead_link_t dead; /* first: on the dead list once destroyed */
    uint32_t magic;
    struct gpuport_channel *ch;   /* over the application's regions */
    struct gpuport_channel *sems; /* over the semaphore arenas (no source) */
    uint64_t dst_d;      /* the peer's destination, device address (0: none) */
    uint64_t peer_sem_d; /* where this side's signals go, device address: the peer's
                          * arena slot (atomics) or its control-segment slot */
    uint64_t sem_d;      /* where the peer's arrive: this rank's arena slot, or 0 for
                          * the control segment's */
    int atomics;         /* signals are atomic adds in the peer's GPU memory */
    uint32_t id;         /* ch's id: the memory channel's (comm->mchans) */
};

/* A peer channel (peerchan.c): a memory channel where both sides can
 * store, else a port channel. */
struct gpuport_peer_channel {
    gpuport_dead_link_t dead; /* first: on the dead list once destroyed */
    uint32_t magic;
    uint32_t id;                   /* ch's id (comm->peerchans) */
    struct gpuport_channel *ch;    /* the proxy's path (mc->ch where mc) */
    struct gpuport_memory_channel *mc; /* the store path, or NULL */
};

/* the dead lists free a handle through its link (handles.h) */
_Static_assert(offsetof(struct gpuport_mem, dead) == 0, "a registration's dead link comes first");
_Static_assert(offsetof(struct gpuport_channel, dead) == 0, "a channel's dead link comes first");

typedef struct gpuport_proxy {
    pthread_t thread;
    int started;
    _Atomic int running; /* bound where placed, polling */
    _Atomic int stop;
    _Atomic int exited;
    /* passes of the proxy loop (release at each pass's start): a slot that
     * was active when a pass began is not looked at by a later pass once
     * inactive, so a destroyed channel's slot is reused only after the
     * count has moved on (gpuport_proxy_quiet) */
    _Atomic uint64_t passes;
    uint64_t drain_deadline_ns;
    gpuport_flusher_t flusher;
    /* counters: written by the proxy thread only (GPUPORT_STAT_INC), read
     * by gpuport_comm_stats at any time */
    _Atomic uint64_t triggers;
    _Atomic uint64_t rejected;
    _Atomic uint64_t sig_taken; /* signals taken (a signal trigger's count, put_with_signal) */
    _Atomic uint64_t sig_sent;  /* transport signals they became (folded) */
    uint64_t abandoned;
    unsigned char *peer_dead; /* by rank: exited / watched flags (proxy thread only) */
    uint64_t held_warned;     /* the flusher's held call last reported (its start time) */
    /* transports with comm_progress or poll_fds, published before the
     * proxy starts */
    gpuport_tl_comm_t *active_tls[GPUPORT_TL_MAX_KINDS];
    int nactive_tls;
    uint64_t async_outstanding; /* transport-completed operations in flight (proxy only) */
    uint32_t *sig_list;         /* channels with sig_pending or sig_listed (proxy only) */
    uint32_t nsig;
    /* triggers parked by channel (proxy_park.c; proxy only): the parks by
     * channel id, the ids of channels with parked triggers, and how many
     * triggers are parked in all */
    struct gpuport_park *parks;
    uint32_t *park_list;
    uint32_t npark_list;
    uint64_t parked_total;
    /* host pushes, flusher completions, stop and quiet wake a sleeping
     * proxy through it; kernels' triggers cannot, so in GPU mode the
     * proxy's sleeps are as short as its CPU budget allows
     * (GPUPORT_PROXY_IDLE_CPU, within GPUPORT_PROXY_SLEEP_MAX_US) */
    gpuport_waker_t waker;
    /* the CPU budget of sleeping (GPUPORT_PROXY_IDLE_CPU), proxy only: what
     * one sleep and the pass after it cost this thread (measured over
     * GPUPORT_IDLE_WINDOW sleeps in a row), and the window being measured */
    uint64_t wake_cost_ns;
    uint64_t window_cpu_ns; /* thread CPU time at the window's start; 0: none open */
    uint32_t window_sleeps;
    int wake_cost_told;
    /* crowded: the kernel preempted the proxy in the last watch window (its
     * involuntary context switches grew), so cores are shared with other
     * busy threads and it yields even while it spins (proxy_idle.c) */
    uint64_t nivcsw, watch_cpu_ns, watch_ns; /* at the last watch */
    int crowded, crowded_told;
    uint64_t awake_until_ns; /* no sleep before this (gpuport_tl_keep_awake) */
    /* set by a host thread that left the connections work the proxy's FIFOs
     * do not show (ops->host_recv: bytes buffered, an acknowledgement
     * owed), cleared at a pass's start: the proxy's last look before it
     * sleeps (waker.h) sees it */
    _Atomic int conn_work;
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
    struct gpuport_gpu *gpu;     /* NULL: host-only communicator; holds the application's
                                  * CUDA context */
    int gpu_device;              /* CUDA ordinal of the communicator's GPU, -1: none */
    char no_gpu_why[256];        /* host-only: why (GPUPORT_GPU=off, no CUDA driver, ...) */
    uint64_t timeout_ns;
    gpuport_pchan_t *pchans;       /* max_channels */
    gpuport_chan_state_t *states;  /* max_channels; page-aligned for GPU mapping */
    size_t states_size;
    pthread_mutex_t lock;          /* ids, conns, allocs, mems, chans, dead lists:
                                    * application threads */
    unsigned char *id_used;
    gpuport_conn_t **conns;        /* by peer, opened on first channel */
    uint32_t *bs_attempts;         /* by peer: this rank's pairwise conversations begun
                                    * (bootstrap.h) */
    struct gpuport_bs_session *session; /* the set-up call's conversation in progress, for
                                         * the transports' exchanges; NULL: none */
    gpuport_conn_t **pconns;       /* connections with progress(), in opening order */
    _Atomic int npconns;           /* published to the proxy with release */
    gpuport_tl_comm_t tls[GPUPORT_TL_MAX_KINDS]; /* by kind; ops NULL: not built */
    gpuport_alloc_t *allocs;
    struct gpuport_mem *mems;
    gpuport_dead_list_t dead_mems;  /* deregistered registrations (handles.h) */
    gpuport_dead_list_t dead_chans; /* destroyed channels */
    gpuport_dead_list_t dead_mchans; /* destroyed memory channels */
    struct gpuport_memory_channel **mchans; /* by id, freed at destroy if left open */
    gpuport_dead_list_t dead_peerchans; /* destroyed peer channels */
    struct gpuport_peer_channel **peerchans; /* by id, freed at destroy if left open */
    /* memory channels' semaphores in this rank's GPU memory, one 64-bit count
     * per channel id, which peers' kernels add to (memchan.c); NULL until the
     * first memory channel */
    void *mc_arena;
    struct gpuport_mem *mc_arena_mem;
    struct gpuport_comm *live_next;      /* the process's live communicators */
    struct gpuport_channel **chans; /* handles by id, freed at destroy if left open */
    gpuport_fdsock_t fdsock;        /* descriptors for same-host peers (fdpass.h) */
    gpuport_topology_t *topo;       /* NULL: unreadable, threads unbound */
    gpuport_placement_t placement;  /* the proxy's and flusher's PUs */
    gpuport_proxy_t proxy;
    _Atomic uint64_t host_inline_ops; /* host operations their callers carried out */
};


/* proxy.c (the proxy thread's files are listed in proxy_int.h) */
gpuport_status_t gpuport_proxy_start(struct gpuport_comm *comm);
/* Application thread: returns once the proxy has finished the pass it was
 * in (a channel deactivated before this call is no longer looked at).
 * Bounded: a sleeping proxy is woken (its eventfd) and passes at once. */
void gpuport_proxy_quiet(struct gpuport_comm *comm);
/* Drains the FIFOs and the flusher, waits for network peers' answers to
 * the closes and sends the goodbyes (proxy_drain.c) until the configured timeout, fails what is left, joins
 * both threads. */
void gpuport_proxy_stop(struct gpuport_comm *comm);
/* proxy_park.c: frees the parks (comm destroy, after the proxy stopped) */
void gpuport_proxy_parks_free(struct gpuport_comm *comm);
/* proxy_flush.c: completions a transport reports (tl_core.c offers them to
 * transports as gpuport_tl_chan_complete, gpuport_tl_inline_complete and
 * gpuport_tl_post). Proxy thread. */
void gpuport_proxy_chan_complete(gpuport_pchan_t *ch, gpuport_status_t status);
void gpuport_proxy_inline_complete(gpuport_pchan_t *ch, gpuport_status_t status);
/* 1 if the flusher took w for connection conn_index, 0 if it has no room */
int gpuport_proxy_post_conn_work(struct gpuport_comm *comm, int conn_index,
                                 const gpuport_work_t *w);

/* proxy_close.c: fails a channel on this side; its peer learns of it
 * (remote_slot or report_fail). The first error sticks. Proxy thread. */
void gpuport_pchan_fail(gpuport_pchan_t *ch, gpuport_status_t status);
/* What this side reports once the peer's word is in its semaphore slot
 * (peer_status): GPUPORT_ERR_CLOSED for the peer's orderly close, which is
 * no failure; GPUPORT_ERR_PEER for any other word (the peer's failure, its
 * death, a broken connection: the word itself says which, for the log);
 * GPUPORT_OK while there is none. gpuport_device.h's gpuport_dev_failed
 * reads the word the same way. */
static inline gpuport_status_t gpuport_peer_word_status(int32_t word)
{
    if (word == GPUPORT_OK)
        return GPUPORT_OK;
    return word == GPUPORT_ERR_CLOSED ? GPUPORT_ERR_CLOSED : GPUPORT_ERR_PEER;
}
/* proxy_exec.c: 1 if the decoded put d reads only inside a source region
 * of src_size bytes and writes only inside a destination region of
 * dst_size bytes: gpuport_put_fits (gpuport_trigger.h) on d's fields, the
 * proxy's check of every put. Pure, fuzzed by test/fuzz/fuzz_trigger.c
 * (also as a put_value's check: size 8, no source, src_size UINT64_MAX). */
int gpuport_op_fits(const gpuport_op_desc_t *d, uint64_t src_size, uint64_t dst_size);
/* proxy_rma.c: the rules of get, atomic_add and accumulate (d->op, a
 * GPUPORT_OP_GET/_ATOMIC_ADD/_ACC_*) on a channel with these ops, as the
 * host calls and the proxy both apply them: GPUPORT_OK, or the refusal
 * (GPUPORT_ERR_INVALID_ARG, _OUT_OF_RANGE, _NOT_SUPPORTED) with what was
 * wrong in msg, for a message that names the channel. Any thread. */
struct gpuport_transport_ops;
gpuport_status_t gpuport_rma_check(const gpuport_tl_chan_t *tl,
                                   const struct gpuport_transport_ops *ops,
                                   const gpuport_op_desc_t *d, char *msg, size_t len);

/* select.c */
/* The transport for (comm, peer) under the configured choice, or an error
 * with the reason written to why. device_regions: the channel's local
 * regions are GPU memory. */
gpuport_status_t gpuport_transport_select(struct gpuport_comm *comm, int peer, int device_regions,
                                          gpuport_tl_comm_t **tc_p, char *why, size_t len);

/* chan_push.c (the channel files are listed in chan_int.h): one trigger
 * (an EXT slot in front where needed) into the host FIFO, and a sleeping
 * proxy woken; *pos_p is its position. No checks: callers check first. */
gpuport_status_t gpuport_channel_push(struct gpuport_channel *ch, uint32_t op, uint64_t dst_off,
                                      uint64_t src_off, uint64_t size, uint64_t *pos_p);
/* The same for a value trigger (gpuport_trigger_encode_value: dst_off must be
 * 8-aligned and encodable, else its bits are dropped). No checks: the
 * put_value calls check first; tests push raw triggers with it. */
gpuport_status_t gpuport_channel_push_value(struct gpuport_channel *ch, uint32_t op,
                                            uint64_t dst_off, uint64_t value, uint64_t *pos_p);

/* GPU mode (src/cuda/gpu.c, its memory src/cuda/gpu_mem.c; src/gpu_none.c
 * in builds without CUDA). All run on application threads. */
/* Sets comm->gpu when the process has a GPU (GPUPORT_GPU); GPU-less is not
 * an error unless GPUPORT_GPU=on. */
gpuport_status_t gpuport_gpu_open(struct gpuport_comm *comm);
void gpuport_gpu_close(struct gpuport_comm *comm);
/* What GPU memory [ptr, ptr + size) is (r->mem_kind and r->device set too;
 * managed memory refused, naming the kind): GPUPORT_REGION_DEVICE (legacy,
 * cudaMalloc: rec's IPC handle and offset filled), GPUPORT_REGION_DEVICE_VMM
 * (the application's VMM memory: r's pieces exported, one descriptor per
 * allocation the range spans, and map_off; or none, with export_why, where
 * an allocation was made without the POSIX descriptor handle type),
 * GPUPORT_REGION_DEVICE_POOL (stream-ordered pool memory inside one
 * allocation: rec's pool, export data and offset; the pool's descriptor as
 * the one piece where the pool is exportable, else export_why), 0 if it is
 * not GPU memory, <0 (logged) on error. */
int gpuport_gpu_mem_describe(struct gpuport_comm *comm, void *ptr, size_t size,
                             gpuport_region_rec_t *rec, gpuport_region_t *r);
/* Whether transport tc carries r as a source (as_dst 0) or destination: its
 * region_ok, asked by channel creation and gpuport_mem_info alike (mem_info.c).
 * 0: refused, with the transport's text in why. */
int gpuport_region_carried(const gpuport_tl_comm_t *tc, const gpuport_region_t *r, int as_dst,
                           char *why, size_t len);
/* gpuport_tl_gpu_dmabuf's CUDA side */
gpuport_status_t gpuport_gpu_dmabuf(struct gpuport_comm *comm, uint64_t start, uint64_t len,
                                    int *fd_p, char *why, size_t why_len);
/* the flusher's private context made current on this thread, and undone */
gpuport_status_t gpuport_gpu_ctx_push(struct gpuport_comm *comm);
void gpuport_gpu_ctx_pop(void);
/* zeroes a (re)used channel id's device words: the device waiters' signal
 * count, a memory channel's signal tickets and its semaphore in the arena */
gpuport_status_t gpuport_gpu_channel_reset(struct gpuport_comm *comm, uint32_t id);
/* Writes the channel's end words (its error, the peer's word) that are not
 * 0 and not written before into their device copy, which kernels' pushes
 * read (gpuport_dev_end_words), and waits for the writes (the flusher's
 * context): before a host call reports the end (chan_said), so that a
 * kernel launched after it sees it too. Application threads; nothing to do
 * without GPU mode or the copy. */
void gpuport_gpu_note_ends(struct gpuport_channel *ch);
/* 1 if this rank's GPU can add atomically in the memory of the GPU with
 * CUDA ordinal `ordinal` (this process's numbering, as the rank records
 * carry it): the same GPU, or a peer with native atomics; else 0. */
int gpuport_gpu_peer_atomics(struct gpuport_comm *comm, int ordinal);
/* GPU memory that every context on the communicator's device reaches (CUDA
 * VMM, mapped read-write for the device), made exportable as a POSIX file
 * descriptor (*fd_p, the caller's to close) and, where the device supports
 * GPUDirect RDMA with VMM, registrable with NICs; *len_p is what was
 * mapped: size rounded up to the device's allocation granularity. */
gpuport_status_t gpuport_gpu_vmm_alloc(struct gpuport_comm *comm, size_t size, void **ptr_p,
                                       size_t *len_p, int *fd_p);
void gpuport_gpu_vmm_free(struct gpuport_comm *comm, void *ptr, size_t len);
/* Copies size bytes of host memory to device memory at dst that every
 * context on the device reaches (gpuport_gpu_vmm_alloc's), in the
 * flusher's context, and waits for it. Application threads. */
gpuport_status_t gpuport_gpu_copy_in(struct gpuport_comm *comm, void *dst, const void *src,
                                     size_t size);
/* Pinned host memory that the flusher's staging copies (GPUPORT_WORK_CU_TO/
 * FROM_DEVICE) read and write: network transports' GPU regions. */
gpuport_status_t gpuport_gpu_stage_alloc(struct gpuport_comm *comm, size_t size, void **p);
void gpuport_gpu_stage_free(struct gpuport_comm *comm, void *p, size_t size);
/* the GPU's PCI bus id ("0000:3B:00.0"); -1 for a host-only communicator */
int gpuport_gpu_bus_id(struct gpuport_comm *comm, char *buf, size_t len);

/* live.c: 1 if comm is a communicator of this process not yet destroyed;
 * creation adds it, destruction takes it away (0 if it was not there) */
int gpuport_comm_live(struct gpuport_comm *comm);
void gpuport_comm_live_add(struct gpuport_comm *comm);
int gpuport_comm_live_remove(struct gpuport_comm *comm);

/* chan_destroy.c, at communicator destruction: tells every open channel's peer
 * that this side is closing (queued behind earlier operations) */
void gpuport_channels_close_all(struct gpuport_comm *comm);
/* ... and, once the proxy has stopped, promises the same-host peers that
 * nothing more is written and waits (bounded) for their promise */
void gpuport_channels_await_peers(struct gpuport_comm *comm);

/* mem.c */
gpuport_alloc_t *gpuport_alloc_find(struct gpuport_comm *comm, const void *ptr, size_t size);
void gpuport_mem_free_all(struct gpuport_comm *comm);

#endif
