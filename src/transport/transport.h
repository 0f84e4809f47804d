/*
 * The transport interface. A transport fills a gpuport_transport_ops_t with
 * designated initializers; the core calls transports only through it.
 * Set-up calls (reachable, conn_*, chan_*) run on the application thread;
 * put and signal run on the proxy thread and must not block: they either
 * finish the operation, describe it as flusher work for the core to queue,
 * or take it and report its completion later (network transports, whose
 * progress() the proxy calls on every pass).
 *
 * A channel's operations complete in the order they were issued, whichever
 * way they complete; a transport uses either flusher work or its own
 * completions for a channel, never both (the core counts them together).
 */
#ifndef GPUPORT_TRANSPORT_H
#define GPUPORT_TRANSPORT_H

#include <stddef.h>

#include "config.h"
#include "flusher.h"
#include "record.h"

struct gpuport_comm;
struct gpuport_conn;
struct gpuport_pchan;

/* What a transport did with an operation. */
#define GPUPORT_TRANSPORT_DONE 0  /* completed inline */
#define GPUPORT_TRANSPORT_QUEUE 1 /* *work filled: the core must post it */
#define GPUPORT_TRANSPORT_ASYNC 2 /* taken: completes through gpuport_pchan_complete */

/* A peer's region made usable here. */
typedef struct gpuport_remote_region {
    gpuport_region_rec_t rec; /* as the peer described it */
    void *base;               /* mapped here, or NULL when written by CMA */
    void *map_base;           /* mmap()ed range to release, or NULL */
    size_t map_len;
} gpuport_remote_region_t;

typedef struct gpuport_transport_ops {
    const char *name;
    int kind; /* gpuport_transport_kind_t */
    /* 1 if this transport can connect this rank to `peer`; else 0 with why */
    int (*reachable)(struct gpuport_comm *comm, int peer, char *why, size_t len);
    gpuport_status_t (*conn_open)(struct gpuport_conn *conn);
    /* Optional, application thread, before the channel records are
     * exchanged: fills mine->tdata with what the peer's chan_connect needs
     * (memory keys, addresses). src and dst may be NULL. */
    gpuport_status_t (*chan_prepare)(struct gpuport_conn *conn, uint32_t id,
                                     const struct gpuport_mem *src, const struct gpuport_mem *dst,
                                     gpuport_channel_rec_t *mine);
    void (*conn_close)(struct gpuport_conn *conn);
    /* Makes the peer's side of a channel usable from here: its destination
     * region (ch->dst) and its semaphore slot (ch->remote_sem and
     * ch->remote_status). */
    gpuport_status_t (*chan_connect)(struct gpuport_pchan *ch, const gpuport_channel_rec_t *peer);
    void (*chan_disconnect)(struct gpuport_pchan *ch);
    /* Proxy thread. Offsets are already validated against both regions.
     * `behind_work`: earlier operations of the channel are still queued at
     * the flusher, so this one must be queued too to keep the order. */
    int (*put)(struct gpuport_pchan *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
               int behind_work, gpuport_work_t *work);
    int (*signal)(struct gpuport_pchan *ch, int behind_work, gpuport_work_t *work);
    /* Optional, proxy thread: room for nops more operations on ch now? 0
     * leaves the trigger in the FIFO until a later pass. */
    int (*has_room)(struct gpuport_pchan *ch, uint32_t nops);
    /* Optional, proxy thread: moves the connection's traffic along without
     * blocking; returns how much happened (0: nothing). Set for transports
     * that complete operations themselves. */
    int (*progress)(struct gpuport_conn *conn);
    /* Optional: a descriptor the idle proxy may poll() for input, or -1. */
    int (*poll_fd)(struct gpuport_conn *conn);
    /* Optional, proxy thread, once the communicator is stopping and this
     * rank has nothing left to send: 1 when the peer has nothing left to
     * send either (so no more data for this rank can arrive). */
    int (*quiesce)(struct gpuport_conn *conn);
    /* Optional, proxy thread: the oldest item this connection posted with
     * gpuport_proxy_post has completed (items complete in posting order). */
    void (*work_done)(struct gpuport_conn *conn, gpuport_status_t status);
    /* Optional, proxy thread: ch failed here with status; tell the peer. */
    void (*report_fail)(struct gpuport_pchan *ch, gpuport_status_t status);
} gpuport_transport_ops_t;

extern const gpuport_transport_ops_t gpuport_transport_shm;
extern const gpuport_transport_ops_t gpuport_transport_cuda_ipc;
extern const gpuport_transport_ops_t gpuport_transport_ib;
extern const gpuport_transport_ops_t gpuport_transport_tcp;

/* Proxy thread, for transports that return GPUPORT_TRANSPORT_ASYNC: the
 * oldest incomplete operation of ch has completed with status. */
void gpuport_pchan_complete(struct gpuport_pchan *ch, gpuport_status_t status);
/* Proxy thread: queues flusher work of the connection's own (staging
 * copies, ordered semaphore updates); its completion comes to
 * ops->work_done. 0 when the flusher has no room now. */
int gpuport_proxy_post(struct gpuport_conn *conn, const gpuport_work_t *w);
/* Proxy thread: ch cannot go on (the connection broke, the peer reported a
 * failure). Fails it on this side, including this side's waiters for the
 * peer's signals; nothing is sent to the peer. */
void gpuport_pchan_fail_local(struct gpuport_pchan *ch, gpuport_status_t status);

/* tcp: the communicator's listener, made before rank records are exchanged
 * (it fills the record's tcp_* fields) and closed with the communicator. A
 * listener that cannot be made is an error only if GPUPORT_TRANSPORT=tcp. */
gpuport_status_t gpuport_tcp_comm_init(struct gpuport_comm *comm, gpuport_proc_rec_t *me);
void gpuport_tcp_comm_fini(struct gpuport_comm *comm);
/* Proxy thread, once per pass before the connections' progress(): which of
 * tcp's sockets have input. Returns 0 (the progress calls that follow count
 * what happened). */
int gpuport_tcp_poll(struct gpuport_comm *comm);
/* Where tcp would listen under cfg (1), or why it cannot (0), into buf. */
int gpuport_tcp_describe(const gpuport_config_t *cfg, char *buf, size_t len);

/* The transport for (comm, peer) under the configured choice, or an error
 * with the reason written to why. device_regions: the channel's local
 * regions are GPU memory. */
gpuport_status_t gpuport_transport_select(struct gpuport_comm *comm, int peer, int device_regions,
                                          const gpuport_transport_ops_t **ops_p, char *why,
                                          size_t len);

const char *gpuport_transport_name(int kind);

#endif
