/*
 * The ib transport's run-time state, for its own files only: ib.c (the
 * operations: connection set-up and channels), ib_proxy.c (the proxy
 * thread's side: posting, completions, failure), ib_rma.c (get and the
 * adds), ib_dev.c (devices and the communicator's protection domain and
 * control segment) and ib_mr.c (memory registrations).
 *
 * Lifetimes. A device context is opened once per process for each
 * (GPUPORT_IB_HCA, GPUPORT_IB_GID_INDEX, GPU) and kept in a table
 * (ib_dev_t): the choice of port depends on nothing else, and opening a
 * device costs milliseconds. A communicator's ib state (ib_comm_t: its
 * protection domain, the registration of its control segment, its memory
 * registrations and per-channel keys) hangs from the transport's part of
 * the communicator (gpuport_tl_comm_t.priv) from its first ib connection
 * to the close of its last: one protection domain per communicator lets
 * every QP of it use one registration of a region.
 */
#ifndef GPUPORT_IB_PRIV_H
#define GPUPORT_IB_PRIV_H

#include <errno.h>
#include <pthread.h>

#include "transport/ib/ib.h"
#include "transport/ib/ib_verbs.h"
#include "transport/transport.h"

typedef struct ib_dev {
    struct ib_dev *next;
    char key_hca[256];
    int key_gid_index;
    char key_gpu[32];
    int refs; /* communicators using it; 0: cached after a probe */
    struct ibv_context *ctx;
    char name[64];
    uint8_t port;
    uint16_t lid;
    int link_layer; /* IB_LINK_LAYER_IB or _ETH (UNSPECIFIED read as IB) */
    enum ibv_mtu active_mtu;
    uint64_t piece_max;
    int gid_index;
    union ibv_gid gid;
    int atomic_cap;
    int max_qp_wr, max_cqe, max_qp_rd_atom, max_qp_init_rd_atom;
    char why[512]; /* what was chosen and why */
} ib_dev_t;

typedef struct ib_mr ib_mr_t;

/* A channel's keys: this rank's registrations (held while the channel
 * exists) and the peer's addresses and keys. Written on the application
 * thread before the channel is activated, read by the proxy. */
typedef struct ib_chan {
    ib_mr_t *src_mr, *dst_mr;
    uint32_t src_lkey;
    int connected;
    uint64_t dst_raddr;
    uint32_t dst_rkey;
    uint32_t ctrl_rkey;
    uint64_t sem_raddr, status_raddr;
    uint64_t signals_sent; /* proxy thread: counts written (IB_SIGNAL_WRITE) */
} ib_chan_t;

typedef struct ib_comm {
    gpuport_tl_comm_t *tl;
    gpuport_comm_t comm;
    int nconns;
    ib_dev_t *dev;
    struct ibv_pd *pd;
    struct ibv_mr *ctrl_mr;
    pthread_mutex_t lock; /* mrs and the registrations in chans */
    ib_mr_t *mrs;
    ib_chan_t *chans; /* by local channel id */
} ib_comm_t;

/* A connection to one peer: its RC QP and CQ, set up by ib.c on the
 * application thread, then driven by ib_proxy.c on the proxy thread. */
typedef struct ib_conn {
    gpuport_comm_t comm;
    gpuport_conn_t *conn;
    int peer;
    ib_comm_t *ic;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    uint64_t *scratch; /* atomics' results and written values, one per send-queue slot */
    struct ibv_mr *scratch_mr;
    ib_sendq_t q;
    ib_signal_t signal;
    uint8_t rd_init; /* RDMA READs and atomics the QP may have outstanding (RTS) */
    ib_qp_rec_t mine, remote;
    int inline_ok; /* the QP takes 8 bytes of inline data (put_value) */
    /* the connection failed with this status: written by the proxy,
     * read by application threads too (atomic builtins) */
    gpuport_status_t broken;
} ib_conn_t;

/* ib_dev.c, application threads. */
/* Finds (opening and caching it) the device and port this communicator
 * would use: GPUPORT_OK with its link layer and a description, or
 * GPUPORT_ERR_NOT_SUPPORTED with why (libibverbs missing, no device or
 * no usable port). */
gpuport_status_t ib_dev_probe(gpuport_comm_t comm, int *link_layer_p, char *why, size_t len);
/* The communicator's ib state, made at its first connection (device,
 * protection domain, control segment registered for remote writes and
 * atomics); one reference per connection. Errors are logged. */
gpuport_status_t ib_comm_acquire(gpuport_tl_comm_t *tl, ib_comm_t **ic_p);
void ib_comm_release(ib_comm_t *ic);
/* The OS name of the device ib_dev_probe finds, into name; 0 if none. */
int ib_dev_name(gpuport_comm_t comm, char *name, size_t len);

/* ib_mr.c, application threads. */
/* A registration of mem (shared by every channel over the same range),
 * made the first time by the path ib_mr_path_choose picks; a failure is
 * logged and described in why for the peer. */
gpuport_status_t ib_mr_get(ib_comm_t *ic, const gpuport_region_t *mem, ib_mr_t **mr_p,
                           char *why, size_t len);
void ib_mr_put(ib_comm_t *ic, ib_mr_t *mr);
uint32_t ib_mr_lkey(const ib_mr_t *mr);
uint32_t ib_mr_rkey(const ib_mr_t *mr);
/* Drops a channel's registrations and forgets its keys. */
void ib_chan_release(ib_comm_t *ic, ib_chan_t *cs);
/* Every registration of the communicator, at its end. */
void ib_mr_release_all(ib_comm_t *ic);

/* ib_proxy.c, proxy thread: the operations gpuport_transport_ib (ib.c) names. */
/* room for nops more operations on the channel's connection (or it is broken) */
int ib_has_room(gpuport_tl_chan_t *ch, uint32_t nops);
/* queues an RDMA WRITE of the source's bytes into the peer's destination */
int ib_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
           int behind_work, gpuport_work_t *work);
/* queues an RDMA WRITE of the 8 bytes of value */
int ib_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value,
                 int behind_work, gpuport_work_t *work);
/* queues n signals: an atomic add, or a write of the channel's count */
int ib_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *work);
/* queues a write of status into the peer's peer_status, where there is room */
void ib_report_fail(gpuport_tl_chan_t *ch, gpuport_status_t status);
/* reads the CQ, then posts what the send queue has room for */
int ib_progress(gpuport_conn_t *conn);
/* 1 once nothing of this rank's is in flight (or the connection broke) */
int ib_quiesce(gpuport_conn_t *conn);

/* ib_rma.c: get, atomic_add and accumulate. */
/* any thread, after chan_connect: whether ib can carry op on ch, else why */
int ib_rma_ok(const gpuport_tl_chan_t *ch, uint32_t op, char *why, size_t len);
/* proxy thread: queues an RDMA READ, or fetch-and-adds */
int ib_rma(gpuport_tl_chan_t *ch, const gpuport_op_desc_t *d, int behind_work,
           gpuport_work_t *work);

/* A verbs call's failure code: most return an errno value, some -1 with
 * errno set, some a negated errno; calls that return NULL set errno (pass 0). */
static inline int ib_err(int rc)
{
    return rc > 0 ? rc : rc < -1 ? -rc : errno ? errno : EIO;
}

#endif
