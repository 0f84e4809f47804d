/*
 * The transport interface. A transport fills a gpuport_transport_ops_t with
 * designated initializers; the core calls transports only through it, and
 * transports call the core only through tl_core.h. Which transports exist
 * is said once, in registry.c.
 *
 * Set-up calls (comm_*, reachable, conn_*, chan_*) run on the application
 * thread; put, put_value and signal run on the proxy thread and must not
 * block: they either finish the operation, describe it as flusher work for
 * the core to queue, or take it and report its completion later (network
 * transports, whose progress() the proxy calls on every pass).
 *
 * A channel's operations complete in the order they were issued, whichever
 * way they complete; a transport uses either flusher work or its own
 * completions for a channel, never both (the core counts them together).
 *
 * A transport owns its GPUPORT_* settings and its record types: it declares
 * them here, in its table, and the core gathers them through the registry
 * (the configuration's rows, gpuport_info, the man page and docs/GUIDE.md
 * list every transport's rows after the core's).
 */
#ifndef GPUPORT_TRANSPORT_H
#define GPUPORT_TRANSPORT_H

#include <poll.h>

#include "transport/tl_core.h"

/* What a transport did with an operation. */
#define GPUPORT_TRANSPORT_DONE 0  /* completed inline */
#define GPUPORT_TRANSPORT_QUEUE 1 /* *work filled: the core must post it */
#define GPUPORT_TRANSPORT_ASYNC 2 /* taken: completes through gpuport_tl_chan_complete */

typedef struct gpuport_transport_ops {
    const char *name; /* as GPUPORT_TRANSPORT spells it, and as registry.c lists it */

    /* ---- what it owns ---- */
    /* Its GPUPORT_* variables (config_var.h), parsed with the core's rows
     * (once per communicator, on the creating thread; a bad value fails the
     * communicator's creation) into its settings structure, which it reads
     * with gpuport_tl_settings. NULL: none. */
    const gpuport_settings_table_t *settings;
    /* The records it exchanges through the bootstrap, each with the
     * gpuport_rec_header_t that gpuport_tl_record_init writes and
     * gpuport_tl_record_check checks. */
    const gpuport_tl_record_type_t *records;
    int nrecords;

    /* ---- the communicator ---- */
    /* Optional, at creation before the rank records are exchanged: sets up
     * the transport's per-communicator state (tc->priv) and writes this
     * rank's part of the record into blob (GPUPORT_TL_BLOB_MAX bytes, via
     * gpuport_tl_blob_set). An error fails the communicator's creation. */
    gpuport_status_t (*comm_open)(gpuport_tl_comm_t *tc, void *blob);
    /* Optional, at destruction after every connection is closed. */
    void (*comm_close)(gpuport_tl_comm_t *tc);
    /* Optional, proxy thread, once per pass before the connections'
     * progress(): work of the whole communicator (which sockets have
     * input). Returns how much happened. */
    int (*comm_progress)(gpuport_tl_comm_t *tc);
    /* Optional, proxy thread: descriptors an idle proxy may poll() for
     * input; returns how many it wrote (at most max). */
    int (*poll_fds)(gpuport_tl_comm_t *tc, struct pollfd *fds, int max);

    /* Optional, any thread, no communicator needed (gpuport_info): one line
     * on whether and how this transport would work here under its settings
     * (its settings structure, parsed), starting "available: ..." or
     * "built, not usable here: ...". */
    void (*describe)(const void *settings, char *buf, size_t len);

    /* Optional, at creation after comm_open: the OS name of the network
     * device ("mlx5_0") this transport will use for the communicator, when
     * it will be used and knows the device now, so that the proxy and
     * flusher threads are placed near it as well as near the GPU. 1 if
     * name was written. */
    int (*near_device)(gpuport_tl_comm_t *tc, char *name, size_t len);

    /* ---- choosing a transport for a peer ---- */
    /* 1 if this transport can connect this rank to `peer`; else 0 with why.
     * Both ranks of a pair ask the same transports in the same order. */
    int (*reachable)(gpuport_tl_comm_t *tc, int peer, char *why, size_t len);
    /* How much GPUPORT_TRANSPORT=auto wants this transport for a channel
     * whose regions are (device_regions) or are not GPU memory: 0 never,
     * else the highest reachable one wins. NULL: only ever forced. */
    int (*auto_rank)(int device_regions);

    /* ---- connections ---- */
    gpuport_status_t (*conn_open)(gpuport_conn_t *conn);
    void (*conn_close)(gpuport_conn_t *conn);

    /* ---- channels ---- */
    /* 1: the transport maps the peer's destination here, so its descriptors
     * (region_t's pieces) are passed at channel creation, over the
     * communicator's descriptor socket (fdpass.h), into ch->dst_pieces. */
    int pass_fds;
    /* 1: put, put_value, signal and rma may also be called on an application
     * thread (the host calls, GPUPORT_HOST_INLINE), with behind_work 0, at
     * a time when none of the channel's host operations is in flight; they
     * must then be safe beside the proxy's calls for the channel's device
     * operations. DONE: carried out. QUEUE, or an error: declined, nothing
     * owed (an rma that declines has read and added nothing); the core
     * pushes the trigger instead, and the proxy calls again (so an error is
     * reported, and the channel failed, as usual). */
    int host_inline;
    /* Optional, for transports whose operations complete later (host_inline
     * 0): a host call's put_with_signal (src host memory), put_value_with_signal
     * or signal (op, a GPUPORT_OP_*; size and value as in the trigger), sent
     * by the calling thread itself, at a time when none of the channel's
     * host operations is in flight, beside the proxy's calls for every
     * channel on the connection (the transport serializes them). ASYNC: sent
     * whole or in part (the rest left to the proxy); one
     * gpuport_tl_inline_complete follows, in order. QUEUE: declined, nothing
     * sent: the core pushes the trigger instead. Never blocks. */
    int (*host_send)(gpuport_tl_chan_t *ch, uint32_t op, uint64_t dst_off, uint64_t src_off,
                     uint64_t size, uint64_t value);
    /* Optional, application thread (GPUPORT_HOST_INLINE): a host wait or
     * poll on ch found no signal; the transport may receive and apply what
     * ch's connection holds itself, beside the proxy (it serializes the
     * two), leaving to the proxy whatever needs it. 1: something was
     * applied (the core then wakes a sleeping proxy, which may owe the peer
     * an acknowledgement); 0: nothing. Never blocks. */
    int (*host_recv)(gpuport_tl_chan_t *ch);
    /* Optional, application thread: 1 if the transport can carry r as a
     * channel's source (as_dst 0) or destination (as_dst 1); else 0 with
     * why, the refusal's text. The core asks it at channel creation for this
     * side's regions, and gpuport_mem_info shows the same answer. Absent:
     * every region is carried. */
    int (*region_ok)(const gpuport_region_t *r, int as_dst, char *why, size_t len);
    /* Optional, before the channel records are exchanged: fills
     * mine->tdata with what the peer's chan_connect needs (memory keys,
     * addresses). src and dst may be NULL; mine->chan_kind is set. */
    gpuport_status_t (*chan_prepare)(gpuport_conn_t *conn, uint32_t id,
                                     const gpuport_region_t *src, const gpuport_region_t *dst,
                                     gpuport_channel_rec_t *mine);
    /* Makes the peer's side of a channel usable from here: its destination
     * region (ch->dst) and, where the transport maps the peer's control
     * segment, ch->remote_slot. */
    gpuport_status_t (*chan_connect)(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer);
    void (*chan_disconnect)(gpuport_tl_chan_t *ch);
    /* Optional, for memory channels (kernels storing into the peer's
     * memory themselves): 1 if this rank's kernels could reach the peer's
     * destination r (its record) directly once connected; else 0 with why.
     * Both sides ask it of both destinations, so that both refuse alike.
     * Absent: the transport serves no memory channel. */
    int (*kernel_dst_ok)(const gpuport_region_rec_t *r, char *why, size_t len);
    /* After chan_connect, for a memory channel: the device addresses, valid
     * in the application's context, of the peer's destination (0 where it
     * has none) and of its semaphore (the 64-bit count this side's signals
     * raise). */
    gpuport_status_t (*chan_kernel_map)(gpuport_tl_chan_t *ch, uint64_t *dst_d_p,
                                        uint64_t *sem_d_p);

    /* ---- operations (proxy thread) ---- */
    /* Offsets are already validated against both regions. `behind_work`:
     * earlier operations of the channel are not complete yet (at the
     * flusher, or taken by the transport), so one that would complete
     * inline must be queued too to keep the order. */
    int (*put)(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
               int behind_work, gpuport_work_t *work);
    /* n >= 1 signals at once: the proxy folds a channel's consecutive
     * signals (no put between them) into one, so the peer's count grows by
     * n in one write. */
    int (*signal)(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *work);
    /* Optional: writes value (8 bytes) at dst_off of the peer's destination,
     * ordered like a put; dst_off is 8-aligned and fits (validated). Returns
     * as put does. NULL: channels of this transport fail such triggers with
     * GPUPORT_ERR_NOT_SUPPORTED. */
    int (*put_value)(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value, int behind_work,
                     gpuport_work_t *work);
    /* Optional: get, atomic_add and accumulate (d->op GPUPORT_OP_GET,
     * _ATOMIC_ADD, _ACC_*: gpuport_trigger.h says what each field holds),
     * validated against both regions and their alignment and accepted by
     * rma_ok. A GET writes this side's src region at d->src_off; the others
     * add into the peer's destination, each element atomically with respect
     * to every other add (gpuport.h's rule). Returns as put does, and keeps
     * the channel's order as put does. NULL: refused as rma_ok's absence
     * says. */
    int (*rma)(gpuport_tl_chan_t *ch, const gpuport_op_desc_t *d, int behind_work,
               gpuport_work_t *work);
    /* Optional, any thread, after chan_connect: 1 if rma can carry op on ch
     * (its regions, as connected), else 0 with why (what cannot, and what
     * can instead). Asked by the host calls before they queue anything and
     * by the proxy for kernels' triggers. Absent with rma set: every op. */
    int (*rma_ok)(const gpuport_tl_chan_t *ch, uint32_t op, char *why, size_t len);
    /* Optional: room for nops more operations on ch now? 0 leaves the
     * trigger in the FIFO until a later pass. */
    int (*has_room)(gpuport_tl_chan_t *ch, uint32_t nops);
    /* Optional: moves the connection's traffic along without blocking;
     * returns how much happened (0: nothing). Set for transports that
     * complete operations themselves. */
    int (*progress)(gpuport_conn_t *conn);
    /* Optional, once the communicator is stopping and this rank has nothing
     * left to send: 1 when nothing of this rank's awaits the peer (its
     * operations acknowledged, a goodbye of the transport's own sent). The
     * core also waits for the peer's answer to the close of every channel
     * on connections of transports that have quiesce, after which the peer
     * sends nothing more; never for the peer's own destroy. */
    int (*quiesce)(gpuport_conn_t *conn);
    /* Optional: the oldest item this connection posted with gpuport_tl_post
     * has completed (items complete in posting order). */
    void (*work_done)(gpuport_conn_t *conn, gpuport_status_t status);
    /* Optional: ch failed (or closed) here with status and has no
     * remote_slot; tell
     * the peer. */
    void (*report_fail)(gpuport_tl_chan_t *ch, gpuport_status_t status);
} gpuport_transport_ops_t;

/* ---- the transport list (registry.c) ---- */
/* gpuport_transport_words (config.h): "auto", then every transport gpuport
 * knows, built or not, then the registered ones; a transport's kind is its
 * index there (channel records carry it). */
/* The library's transports' names, by kind from 1: the one list.
 * GPUPORT_TRANSPORT's words (registry.c) and GPUPORT_LOG_SUBSYS's transport
 * words (log_format.c) are made of it; rows are only ever appended. */
#define GPUPORT_TL_NAMES "shm", "cuda_ipc", "ib", "tcp"
/* The kinds, by their place in the list (registry.c checks); a
 * transport's files log as GPUPORT_SUBSYS_TL(their kind). */
enum {
    GPUPORT_TL_KIND_SHM = 1,
    GPUPORT_TL_KIND_CUDA_IPC = 2,
    GPUPORT_TL_KIND_IB = 3,
    GPUPORT_TL_KIND_TCP = 4,
};
/* The ops of kind (1..), or NULL where it is not built. */
const gpuport_transport_ops_t *gpuport_transport_ops(int kind);
/* How many kinds there are, "auto" included. */
int gpuport_transport_nkinds(void);
/* Name of a kind ("?" if none) */
const char *gpuport_transport_name(int kind);
/* The built transports, comma-separated ("shm, cuda_ipc, tcp"), into buf. */
void gpuport_transport_built(char *buf, size_t len);
/* Why kind is not built ("this gpuport was built without CUDA"), or NULL. */
const char *gpuport_transport_missing(int kind);

/* The GPUPORT_* rows of kind, built or not (the registry names the
 * tables of the library's transports that are not built), or NULL. */
const gpuport_settings_table_t *gpuport_transport_settings(int kind);

/* Adds a transport built outside the library (a test's): it takes the next
 * kind after the library's, with its name as its GPUPORT_TRANSPORT and log
 * word. Only before any communicator exists, on one thread: from a
 * constructor, as GPUPORT_TRANSPORT_REGISTER does. Returns the kind, or -1
 * (logged) when the name is taken or the list is full. */
int gpuport_transport_register(const gpuport_transport_ops_t *ops);
/* Registers ops at program start; its kind lands in the int kind_var. */
#define GPUPORT_TRANSPORT_REGISTER(ops, kind_var)                                               \
    __attribute__((constructor)) static void gpuport_register_##kind_var(void)                 \
    {                                                                                           \
        kind_var = gpuport_transport_register(&(ops));                                          \
    }

#endif
