/*
 * The transport interface. A transport fills a gpuport_transport_ops_t with
 * designated initializers; the core calls transports only through it.
 * Set-up calls (reachable, conn_*, chan_*) run on the application thread;
 * put and signal run on the proxy thread and must not block: they either
 * finish the operation, or describe it as flusher work for the core to queue.
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
} gpuport_transport_ops_t;

extern const gpuport_transport_ops_t gpuport_transport_shm;
extern const gpuport_transport_ops_t gpuport_transport_cuda_ipc;
extern const gpuport_transport_ops_t gpuport_transport_ib;

/* The transport for (comm, peer) under the configured choice, or an error
 * with the reason written to why. device_regions: the channel's local
 * regions are GPU memory. */
gpuport_status_t gpuport_transport_select(struct gpuport_comm *comm, int peer, int device_regions,
                                          const gpuport_transport_ops_t **ops_p, char *why,
                                          size_t len);

const char *gpuport_transport_name(int kind);

#endif
