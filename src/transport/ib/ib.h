/*
 * The ib transport's device-free logic: the records exchanged through the
 * bootstrap (QP, reachability, per-channel keys), the choice of device and
 * port over a recorded port table, RoCE GID choice, the INIT/RTR/RTS
 * attributes, the signal method and memory-registration path, the send
 * queue's accounting, verbs error mapping and device discovery. Pure
 * functions (but ib_devices_present and ib_wc_status's text, which call
 * libibverbs through ib_verbs.h), so that they are tested without an RDMA
 * device. Only files under src/transport/ib/ include
 * infiniband/verbs.h; the core reaches the transport through
 * gpuport_transport_ib (transport.h). The parts that call verbs are in
 * ib_priv.h.
 */
#ifndef GPUPORT_IB_H
#define GPUPORT_IB_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "transport/ib/ib_settings.h"
#include "transport/tl_core.h"

#define IB_GID_LEN 16

/* Link layers as recorded (values of IBV_LINK_LAYER_*). */
#define IB_LINK_LAYER_IB IBV_LINK_LAYER_INFINIBAND
#define IB_LINK_LAYER_ETH IBV_LINK_LAYER_ETHERNET

/* Bootstrap tags of the transport (the core's are below 0x4800). */
#define IB_TAG_REACH 0x4900
#define IB_TAG_QP 0x4901
#define IB_TAG_QP_ACK 0x4902

/* The transport's records (ops->records), by index: the QP record and the
 * reachability record. Their types on the wire are
 * GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, id). */
enum { IB_REC_QP, IB_REC_REACH, IB_NRECORDS };
extern const gpuport_tl_record_type_t ib_records[IB_NRECORDS];

/* One side's QP, exchanged at connection set-up. Fixed width. */
typedef struct ib_qp_rec {
    gpuport_rec_header_t hdr;
    uint32_t qpn;
    uint32_t psn; /* 24 bits */
    uint16_t lid;
    uint8_t port;
    uint8_t gid_index;
    uint8_t mtu;        /* enum ibv_mtu */
    uint8_t link_layer; /* IB_LINK_LAYER_* */
    uint8_t atomic_cap; /* enum ibv_atomic_cap of the device */
    uint8_t rd_atom;    /* responder resources this side gives the QP (RTR) */
    int8_t status;      /* gpuport_status_t: the sender could not make its QP */
    uint8_t reserved[3];
    uint8_t gid[IB_GID_LEN];
} ib_qp_rec_t;

void ib_qp_rec_pack(ib_qp_rec_t *rec, uint16_t lid, const uint8_t gid[IB_GID_LEN], uint32_t qpn,
                    uint32_t psn, enum ibv_mtu mtu, uint8_t port, uint8_t gid_index,
                    uint8_t link_layer);

/* GPUPORT_ERR_VERSION (logged, naming the peer) when buf is not a QP record
 * of this version and size; GPUPORT_ERR_INVALID_ARG for a short buffer. */
gpuport_status_t ib_qp_rec_unpack(const void *buf, size_t len, int peer, ib_qp_rec_t *out);

typedef enum {
    IB_GID_TYPE_IB = 0,
    IB_GID_TYPE_ROCE_V1 = 1,
    IB_GID_TYPE_ROCE_V2 = 2
} ib_gid_type_t;

/* One row of a port's GID table, as ibv_query_gid_ex reports it. */
typedef struct ib_gid_entry {
    int index;
    uint8_t gid[IB_GID_LEN];
    ib_gid_type_t type;
    int valid;
} ib_gid_entry_t;

/* The GID index to use on a port, or -1; why says what was chosen and why.
 * forced_index >= 0 (GPUPORT_IB_GID_INDEX) must name a valid entry. */
int ib_gid_select(const ib_gid_entry_t *table, int n, int forced_index, char *why, size_t len);

/* remote_atomic: the device can take atomics (atomic_cap != NONE). */
void ib_qp_attr_init(struct ibv_qp_attr *a, int *mask, uint8_t port, int remote_atomic);
/* port and sgid_index are local: the address vector's source. rd_atom:
 * the responder resources this side advertised in its record. */
void ib_qp_attr_rtr(struct ibv_qp_attr *a, int *mask, const ib_qp_rec_t *remote,
                    int link_layer_eth, uint8_t sgid_index, uint8_t port,
                    enum ibv_mtu local_mtu, uint8_t rd_atom);
/* max_rd_atomic: outstanding atomics as initiator (ib_rd_atomic_init). */
void ib_qp_attr_rts(struct ibv_qp_attr *a, int *mask, uint32_t local_psn, uint8_t max_rd_atomic);

/* The most atomics a QP asks its responder to hold (and holds for its
 * requester): 16, or less where the device allows less; 0 without atomics. */
#define IB_RD_ATOM_MAX 16
uint8_t ib_rd_atom_resp(int atomic_cap, int dev_max_qp_rd_atom);
uint8_t ib_rd_atomic_init(int atomic_cap, int dev_max_qp_init_rd_atom, uint8_t remote_rd_atom);

/* Maps a verbs errno, logging "<call> failed: <strerror> (<what>)" once. */
gpuport_status_t ib_status(int err, const char *call, const char *what);
/* Maps a work completion's status; *text_p gets ibv_wc_status_str's text
 * (libibverbs loaded or a table installed: ib_verbs.h). */
gpuport_status_t ib_wc_status(enum ibv_wc_status st, const char **text_p);

/* Number of RDMA devices; 0 with why when there are none or libibverbs
 * cannot be loaded. */
int ib_devices_present(char *why, size_t len);
#define IB_NO_DEVICE "no RDMA device was found (ibv_get_device_list returned none)"

/* ---- device and port choice (ib_select.c) ---- */

/* One port of one device, as ibv_query_device/ibv_query_port report it. */
typedef struct ib_port_row {
    char dev[64];
    uint8_t port;
    int state;          /* enum ibv_port_state */
    int link_layer;     /* IBV_LINK_LAYER_*; UNSPECIFIED is InfiniBand */
    int active_mtu;     /* enum ibv_mtu */
    uint64_t max_msg_sz;
    uint16_t lid;
    int iwarp;          /* iWARP or other non-IB transport: needs rdma_cm */
    char pci[256];      /* sysfs path of its PCI function, "" unknown */
} ib_port_row_t;

/* How close two sysfs PCI paths are: the number of leading PCI components
 * (roots "pci0000:17", functions "0000:17:00.0") they share; 0 if either
 * is "" or they hang from different roots. More is closer. */
int ib_pci_affinity(const char *a, const char *b);

/* The row to use, or -1; why says what was chosen and why, or why none
 * fits (every row's reason). hca: GPUPORT_IB_HCA as ib_settings.c parsed it
 * (no entries: every port);
 * gpu_pci: the GPU's sysfs PCI path, "" when it is unknown, NULL when the
 * communicator has no GPU. Among usable ports (ACTIVE, a known link layer
 * and MTU, a LID on InfiniBand, not iWARP) the one nearest the GPU wins;
 * ties go to the GPUPORT_IB_HCA order, then the device order. */
int ib_port_select(const ib_port_row_t *rows, int n, const ib_hca_list_t *hca,
                   const char *gpu_pci, char *why, size_t len);

/* Largest RDMA WRITE one work request carries: the port's max_msg_sz, at
 * most 2^31 (0 reported: 2^31). */
#define IB_PIECE_LIMIT (1ull << 31)
uint64_t ib_piece_max(uint64_t max_msg_sz);
/* Work requests a put of size bytes takes. */
uint64_t ib_put_pieces(uint64_t size, uint64_t piece_max);

/* ---- reachability, agreed by both ranks (reachable()) ---- */

typedef struct ib_reach_rec {
    gpuport_rec_header_t hdr;
    int32_t usable;     /* this rank has a device and port */
    uint8_t link_layer; /* IB_LINK_LAYER_* of that port */
    uint8_t reserved[3];
    char why[112];      /* what it uses, or why none */
} ib_reach_rec_t;

void ib_reach_pack(ib_reach_rec_t *rec, int usable, int link_layer, const char *why);
/* 1 if this rank and peer can connect; else 0 with why (this rank's
 * reason, the peer's, or the link layers that differ). A record that is
 * not a reachability record of this version is 0 too, logged. */
int ib_reach_agree(const ib_reach_rec_t *mine, const void *theirs, size_t len, int peer,
                   char *why, size_t why_len);

/* ---- per-channel data in the channel record's tdata ---- */

#define IB_TDATA_MAGIC 0x42495047u /* "GPIB" */
#define IB_TDATA_VERSION 1
#define IB_TDATA_DST 0x1  /* a destination region is registered: dst_rkey is valid */
#define IB_TDATA_CTRL 0x2 /* the control segment is registered: ctrl_rkey is valid */

typedef struct ib_tdata {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;       /* IB_TDATA_* */
    uint32_t channel_id;  /* the sender's id (its inbound semaphore) */
    uint32_t dst_rkey;
    uint64_t dst_addr;
    uint64_t dst_size;
    uint64_t sem_addr;    /* &ctrl[channel_id].value, 8-byte aligned */
    uint64_t status_addr; /* &ctrl[channel_id].peer_status */
    uint32_t ctrl_rkey;
    uint32_t reserved;
    uint64_t reserved2;
} ib_tdata_t;

/* Sets magic and version and writes t into out (64 bytes). */
void ib_tdata_pack(const ib_tdata_t *t, uint8_t *out);
/* Reads the peer's tdata from its channel record and checks it against
 * the record: GPUPORT_ERR_VERSION for another format, GPUPORT_ERR_PEER for
 * keys, sizes or addresses that do not fit; logged, naming the peer. */
gpuport_status_t ib_tdata_unpack(const gpuport_channel_rec_t *rec, int peer, ib_tdata_t *out);

/* ---- how a signal reaches the peer ---- */

typedef enum {
    IB_SIGNAL_ATOMIC = 1, /* IBV_WR_ATOMIC_FETCH_AND_ADD of the signals folded */
    IB_SIGNAL_WRITE = 2   /* IBV_WR_RDMA_WRITE of the new absolute count */
} ib_signal_t;

/* Atomics when both devices have them (atomic_cap != IBV_ATOMIC_NONE) and
 * this QP may have one outstanding (init_rd_atomic > 0); else writes. */
ib_signal_t ib_signal_choose(int local_atomic_cap, int remote_atomic_cap, uint8_t init_rd_atomic,
                             char *why, size_t len);

/* ---- memory registration path ---- */

typedef enum {
    IB_MR_HOST = 1,    /* ibv_reg_mr on host memory */
    IB_MR_DMABUF = 2,  /* cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr */
    IB_MR_PEERMEM = 3, /* ibv_reg_mr on the device pointer (nvidia_peermem) */
    IB_MR_NONE = 0     /* GPU memory that cannot be registered */
} ib_mr_path_t;

typedef struct ib_mr_caps {
    int device;        /* the region is GPU memory */
    int ibv_dmabuf;    /* libibverbs has ibv_reg_dmabuf_mr */
    int cu_dmabuf;     /* the CUDA driver has cuMemGetHandleForAddressRange */
    int peermem;       /* a peer-memory module is loaded */
    int dmabuf_failed; /* dmabuf was tried on this region and failed */
    const char *cu_why; /* why cu_dmabuf is 0 */
} ib_mr_caps_t;

ib_mr_path_t ib_mr_path_choose(const ib_mr_caps_t *caps, char *why, size_t len);
const char *ib_mr_path_name(ib_mr_path_t path);

/* The page-aligned range a dmabuf handle is taken for, and where addr lies
 * in it: cuMemGetHandleForAddressRange wants page-aligned bounds. */
void ib_dmabuf_range(uint64_t addr, uint64_t size, uint64_t page, uint64_t *start_p,
                     uint64_t *len_p, uint64_t *offset_p);

/* ---- the send queue's accounting (ib_sendq.c) ----
 *
 * Operations wait in a ring in issue order; ib_sendq_plan turns the oldest
 * into work requests while the QP's send queue has room (a put or get
 * larger than piece_max takes several, an accumulate one an element, so
 * each takes one slot of the ring however large), ib_sendq_posted records
 * what ibv_post_send took, ib_sendq_complete accounts one completion
 * (every work request is signaled, and an RC QP completes them in order)
 * and reports each operation once all its work requests are done, oldest
 * first.
 *
 * Fence: a later RDMA WRITE or atomic may be executed before an earlier
 * RDMA READ's data has come back (InfiniBand Architecture Specification
 * vol. 1, 9.5 "Transaction ordering"; only a request with the fence
 * indicator, IBV_SEND_FENCE, waits for the reads before it), so the first
 * request planned after a read has `fence` set: a signal after a get
 * reaches the peer only once the get's bytes are here. */

typedef enum {
    IB_OP_PUT = 1,
    IB_OP_SIGNAL_ADD = 2,   /* fetch-and-add value (signals folded) on the peer's semaphore */
    IB_OP_SIGNAL_WRITE = 3, /* write value (8 bytes) to the peer's semaphore */
    IB_OP_NOTIFY = 4,       /* write value (4 bytes) to the peer's peer_status; no channel op */
    IB_OP_PUT_VALUE = 5,    /* write value (8 bytes) into the peer's destination */
    IB_OP_GET = 6,          /* RDMA READ of len bytes from raddr into laddr, in pieces */
    IB_OP_ADD = 7,          /* fetch-and-add value on the peer's destination (atomic_add) */
    IB_OP_ACC = 8           /* fetch-and-add of each 64-bit element at laddr..+len, one
                             * request an element, at raddr..+len (accumulate of int64) */
} ib_op_kind_t;

typedef struct ib_op {
    uint32_t chan;   /* local channel id */
    uint32_t kind;   /* ib_op_kind_t */
    uint64_t laddr;  /* PUT, ACC: source; GET: where the bytes land */
    uint32_t lkey;
    uint32_t rkey;
    uint64_t raddr;
    uint64_t len;    /* PUT, GET, ACC: bytes */
    uint64_t value;  /* SIGNAL_ADD: signals; SIGNAL_WRITE: count; NOTIFY: status; PUT_VALUE: the
                      * value; ADD: the addend */
    uint64_t posted; /* PUT, GET, ACC: bytes handed to the QP */
    uint64_t wrs_posted, wrs_done; /* an accumulate takes one an element */
} ib_op_t;

/* WRITE_INLINE: an RDMA write of value (8 bytes) whose data travels inline in
 * the request, where the QP allows inline data (else as WRITE_VALUE). */
typedef enum {
    IB_WR_WRITE = 1,
    IB_WR_WRITE_VALUE = 2,
    IB_WR_FETCH_ADD = 3,
    IB_WR_WRITE_INLINE = 4,
    IB_WR_READ = 5
} ib_wr_kind_t;

/* One work request to post. */
typedef struct ib_wr_desc {
    uint64_t wr_id;   /* the operation's sequence number */
    uint32_t kind;    /* ib_wr_kind_t */
    uint32_t len;     /* bytes (WRITE_VALUE: 8 or 4; FETCH_ADD, WRITE_INLINE: 8) */
    uint64_t laddr;   /* WRITE: source; READ: destination */
    uint32_t lkey;
    uint32_t rkey;
    uint64_t raddr;
    uint64_t value;   /* WRITE_VALUE, WRITE_INLINE: what to write; FETCH_ADD: what to add */
    uint32_t scratch; /* WRITE_VALUE, WRITE_INLINE, FETCH_ADD: the scratch slot (sq_depth of them) */
    uint32_t fence;   /* the first request after an RDMA READ: IBV_SEND_FENCE */
} ib_wr_desc_t;

typedef struct ib_sendq {
    ib_op_t *ops;
    uint32_t cap;        /* power of two */
    uint64_t head;       /* oldest operation not complete */
    uint64_t next;       /* oldest operation not wholly posted */
    uint64_t tail;       /* next free */
    uint32_t sq_depth;   /* work requests the QP holds */
    uint32_t sq_used;    /* posted, not completed */
    uint64_t piece_max;
    uint64_t wrs_total;  /* posted ever: picks scratch slots */
    int after_read;      /* the last request posted was an RDMA READ */
} ib_sendq_t;

/* cap: operations (power of two). GPUPORT_ERR_NO_MEMORY, unlogged. */
gpuport_status_t ib_sendq_init(ib_sendq_t *q, uint32_t cap, uint32_t sq_depth, uint64_t piece_max);
void ib_sendq_fini(ib_sendq_t *q);
int ib_sendq_room(const ib_sendq_t *q, uint32_t nops);
/* The slot for a new operation (caller checked room), zeroed. */
ib_op_t *ib_sendq_push(ib_sendq_t *q);
int ib_sendq_idle(const ib_sendq_t *q);
/* Up to max work requests that fit the send queue now; changes nothing. */
uint32_t ib_sendq_plan(const ib_sendq_t *q, ib_wr_desc_t *out, uint32_t max);
/* The first n of a plan were posted. */
void ib_sendq_posted(ib_sendq_t *q, const ib_wr_desc_t *d, uint32_t n);
typedef void (*ib_op_done_fn)(void *arg, const ib_op_t *op, gpuport_status_t status);
/* One successful completion for wr_id: operations completed (done called
 * for each, oldest first), or -1 if wr_id names no work request in flight. */
int ib_sendq_complete(ib_sendq_t *q, uint64_t wr_id, ib_op_done_fn done, void *arg);
/* Every operation not complete, posted or not, ends with status (oldest
 * first); the queue is then empty. Returns how many. */
uint64_t ib_sendq_fail_all(ib_sendq_t *q, gpuport_status_t status, ib_op_done_fn done, void *arg);

#endif
