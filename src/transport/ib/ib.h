/*
 * The ib transport's device-free set-up logic: the QP record exchanged
 * through the bootstrap, RoCE GID choice over a recorded port table, the
 * INIT/RTR/RTS attributes, verbs error mapping and device discovery. Pure
 * functions, so that they are tested without an RDMA device. Only files
 * under src/transport/ib/ include infiniband/verbs.h; the core reaches the
 * transport through gpuport_transport_ib (transport.h).
 */
#ifndef GPUPORT_IB_H
#define GPUPORT_IB_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "record.h"

#define IB_GID_LEN 16

/* Link layers as recorded (values of IBV_LINK_LAYER_*). */
#define IB_LINK_LAYER_IB IBV_LINK_LAYER_INFINIBAND
#define IB_LINK_LAYER_ETH IBV_LINK_LAYER_ETHERNET

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
    uint8_t reserved[6];
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

void ib_qp_attr_init(struct ibv_qp_attr *a, int *mask, uint8_t port);
/* port and sgid_index are local: the address vector's source. */
void ib_qp_attr_rtr(struct ibv_qp_attr *a, int *mask, const ib_qp_rec_t *remote,
                    int link_layer_eth, uint8_t sgid_index, uint8_t port,
                    enum ibv_mtu local_mtu);
void ib_qp_attr_rts(struct ibv_qp_attr *a, int *mask, uint32_t local_psn);

/* Maps a verbs errno, logging "<call> failed: <strerror> (<what>)" once. */
gpuport_status_t ib_status(int err, const char *call, const char *what);
/* Maps a work completion's status; *text_p gets ibv_wc_status_str's text. */
gpuport_status_t ib_wc_status(enum ibv_wc_status st, const char **text_p);

/* Number of RDMA devices; 0 with why when there are none. */
int ib_devices_present(char *why, size_t len);

#endif
