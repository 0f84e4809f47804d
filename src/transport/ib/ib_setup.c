/* The ib transport's device-free set-up logic: records, QP attributes,
 * errors; see ib.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB)
#include "transport/ib/ib.h"
#include "transport/ib/ib_verbs.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "transport/transport.h"

_Static_assert(sizeof(ib_qp_rec_t) == sizeof(gpuport_rec_header_t) + 36,
               "ib_qp_rec_t must have no padding: it crosses the wire");

const gpuport_tl_record_type_t ib_records[IB_NRECORDS] = {
    [IB_REC_QP] = {1, sizeof(ib_qp_rec_t), "ib QP record"},
    [IB_REC_REACH] = {2, sizeof(ib_reach_rec_t), "ib reachability record"},
};

void ib_qp_rec_pack(ib_qp_rec_t *rec, uint16_t lid, const uint8_t gid[IB_GID_LEN], uint32_t qpn,
                    uint32_t psn, enum ibv_mtu mtu, uint8_t port, uint8_t gid_index,
                    uint8_t link_layer)
{
    memset(rec, 0, sizeof(*rec));
    gpuport_tl_record_init(GPUPORT_TL_KIND_IB, &ib_records[IB_REC_QP], &rec->hdr);
    rec->qpn = qpn;
    rec->psn = psn & 0xffffff;
    rec->lid = lid;
    rec->port = port;
    rec->gid_index = gid_index;
    rec->mtu = (uint8_t)mtu;
    rec->link_layer = link_layer;
    memcpy(rec->gid, gid, IB_GID_LEN);
}

gpuport_status_t ib_qp_rec_unpack(const void *buf, size_t len, int peer, ib_qp_rec_t *out)
{
    gpuport_rec_header_t hdr;
    gpuport_status_t status;

    if (len < sizeof(hdr)) {
        log_error("rank %d sent %zu bytes where an ib QP record (%zu bytes) was expected", peer,
                  len, sizeof(*out));
        return GPUPORT_ERR_VERSION;
    }
    memcpy(&hdr, buf, sizeof(hdr));
    status = gpuport_tl_record_check(GPUPORT_TL_KIND_IB, &ib_records[IB_REC_QP], &hdr, peer);
    if (status)
        return status;
    if (len != sizeof(*out)) {
        log_error("rank %d sent an ib QP record of %zu bytes, expected %zu", peer, len,
                  sizeof(*out));
        return GPUPORT_ERR_VERSION;
    }
    memcpy(out, buf, sizeof(*out));
    return GPUPORT_OK;
}

/* ---- GID choice ---- */

static int gid_is_zero(const uint8_t *g)
{
    for (int i = 0; i < IB_GID_LEN; i++)
        if (g[i])
            return 0;
    return 1;
}

static int gid_is_link_local(const uint8_t *g)
{
    return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

/* ::ffff:a.b.c.d */
static int gid_is_ipv4_mapped(const uint8_t *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g, prefix, sizeof(prefix)) == 0;
}

static const char *gid_type_name(ib_gid_type_t t)
{
    return t == IB_GID_TYPE_ROCE_V2 ? "RoCE v2" : t == IB_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB";
}

static int gid_rank(const ib_gid_entry_t *e)
{
    if (e->type == IB_GID_TYPE_ROCE_V2)
        return gid_is_ipv4_mapped(e->gid) ? 3 : 2;
    return e->type == IB_GID_TYPE_ROCE_V1 ? 1 : 0;
}

static const char *const rank_reason[] = {
    "", "RoCE v1 (no RoCE v2 GID on the port)", "RoCE v2 (no IPv4-mapped RoCE v2 GID)",
    "RoCE v2 with an IPv4-mapped address"};

int ib_gid_select(const ib_gid_entry_t *table, int n, int forced_index, char *why, size_t len)
{
    int best = -1;

    if (forced_index >= 0) {
        for (int i = 0; i < n; i++) {
            if (table[i].index != forced_index)
                continue;
            if (!table[i].valid || gid_is_zero(table[i].gid))
                break;
            snprintf(why, len, "GID index %d (%s) as GPUPORT_IB_GID_INDEX requires",
                     forced_index, gid_type_name(table[i].type));
            return forced_index;
        }
        snprintf(why, len, "GPUPORT_IB_GID_INDEX=%d names no valid GID on this port (%d entries)",
                 forced_index, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        /* an empty slot reads as type 0, which is IB: only valid entries count */
        if (table[i].valid && table[i].type == IB_GID_TYPE_IB) {
            snprintf(why, len, "GID index 0: InfiniBand link layer, addressed by LID");
            return 0;
        }
    }
    /* link-local entries only where nothing else is usable */
    for (int pass = 0; pass < 2 && best < 0; pass++) {
        for (int i = 0; i < n; i++) {
            const ib_gid_entry_t *e = &table[i];
            if (!e->valid || gid_is_zero(e->gid) || (pass == 0 && gid_is_link_local(e->gid)))
                continue;
            if (best < 0 || gid_rank(e) > gid_rank(&table[best]))
                best = i;
        }
    }
    if (best < 0) {
        snprintf(why, len, "no valid non-zero RoCE GID among the port's %d entries "
                 "(is an IP address configured on the interface?)", n);
        return -1;
    }
    snprintf(why, len, "GID index %d: %s%s", table[best].index, rank_reason[gid_rank(&table[best])],
             gid_is_link_local(table[best].gid) ? ", link-local (the only kind on the port)" : "");
    return table[best].index;
}

/* ---- QP state transitions (rc_pingpong / perftest conventions) ---- */

void ib_qp_attr_init(struct ibv_qp_attr *a, int *mask, uint8_t port, int remote_atomic)
{
    memset(a, 0, sizeof(*a));
    a->qp_state = IBV_QPS_INIT;
    a->pkey_index = 0;
    a->port_num = port;
    /* some providers refuse REMOTE_ATOMIC on a device without atomics */
    a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                         IBV_ACCESS_REMOTE_READ | (remote_atomic ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

uint8_t ib_rd_atom_resp(int atomic_cap, int dev_max_qp_rd_atom)
{
    if (atomic_cap == IBV_ATOMIC_NONE || dev_max_qp_rd_atom <= 0)
        return 0;
    return (uint8_t)(dev_max_qp_rd_atom < IB_RD_ATOM_MAX ? dev_max_qp_rd_atom : IB_RD_ATOM_MAX);
}

/* The requester may not have more outstanding than the responder holds. */
uint8_t ib_rd_atomic_init(int atomic_cap, int dev_max_qp_init_rd_atom, uint8_t remote_rd_atom)
{
    int n = dev_max_qp_init_rd_atom < IB_RD_ATOM_MAX ? dev_max_qp_init_rd_atom : IB_RD_ATOM_MAX;

    if (atomic_cap == IBV_ATOMIC_NONE || n <= 0)
        return 0;
    return (uint8_t)(n < remote_rd_atom ? n : remote_rd_atom);
}

void ib_qp_attr_rtr(struct ibv_qp_attr *a, int *mask, const ib_qp_rec_t *remote,
                    int link_layer_eth, uint8_t sgid_index, uint8_t port, enum ibv_mtu local_mtu,
                    uint8_t rd_atom)
{
    memset(a, 0, sizeof(*a));
    a->qp_state = IBV_QPS_RTR;
    /* ibv_mtu values grow with the size, so the smaller is the common one */
    a->path_mtu = (enum ibv_mtu)remote->mtu < local_mtu ? (enum ibv_mtu)remote->mtu : local_mtu;
    a->dest_qp_num = remote->qpn;
    a->rq_psn = remote->psn;
    a->max_dest_rd_atomic = rd_atom;
    a->min_rnr_timer = 12;
    a->ah_attr.port_num = port;
    a->ah_attr.sl = 0;
    a->ah_attr.src_path_bits = 0;
    if (link_layer_eth) {
        /* RoCE has no LIDs: the GRH carries the address. RoCE v2 is routed
         * over IP, so the hop limit must cross routers; v1 ignores it. */
        a->ah_attr.is_global = 1;
        memcpy(a->ah_attr.grh.dgid.raw, remote->gid, IB_GID_LEN);
        a->ah_attr.grh.sgid_index = sgid_index;
        a->ah_attr.grh.hop_limit = 64;
        a->ah_attr.grh.flow_label = 0;
        a->ah_attr.grh.traffic_class = 0;
    } else {
        a->ah_attr.is_global = 0;
        a->ah_attr.dlid = remote->lid;
    }
    *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

void ib_qp_attr_rts(struct ibv_qp_attr *a, int *mask, uint32_t local_psn, uint8_t max_rd_atomic)
{
    memset(a, 0, sizeof(*a));
    a->qp_state = IBV_QPS_RTS;
    a->timeout = 14; /* 4.096 us * 2^14, about 67 ms per try */
    a->retry_cnt = 7;
    a->rnr_retry = 7; /* 7 = retry forever on receiver-not-ready */
    a->sq_psn = local_psn & 0xffffff;
    a->max_rd_atomic = max_rd_atomic;
    *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
            IBV_QP_MAX_QP_RD_ATOMIC;
}

/* ---- errors ---- */

gpuport_status_t ib_status(int err, const char *call, const char *what)
{
    const char *hint = "";
    gpuport_status_t status;

    switch (err) {
    case 0: return GPUPORT_OK;
    case EINVAL: status = GPUPORT_ERR_INVALID_ARG; break;
    case ENOMEM: status = GPUPORT_ERR_NO_MEMORY; break;
    case ENODEV:
    case ENOSYS:
    case EOPNOTSUPP: status = GPUPORT_ERR_NOT_SUPPORTED; break;
    case EPERM:
    case EACCES:
        status = GPUPORT_ERR_NOT_SUPPORTED;
        hint = "; registering memory needs a large enough locked-memory limit (ulimit -l, "
               "memlock in limits.conf or the container's settings) and read-write access to "
               "/dev/infiniband/uverbs*";
        break;
    case ETIMEDOUT: status = GPUPORT_ERR_TIMEOUT; break;
    default: status = GPUPORT_ERR_TRANSPORT; break;
    }
    log_error("%s failed: %s (%s)%s", call, strerror(err), what, hint);
    return status;
}

gpuport_status_t ib_wc_status(enum ibv_wc_status st, const char **text_p)
{
    *text_p = IBV(ibv_wc_status_str)(st);
    switch (st) {
    case IBV_WC_SUCCESS: return GPUPORT_OK;
    /* the peer did not answer, or refused the operation */
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
    case IBV_WC_REM_ABORT_ERR: return GPUPORT_ERR_PEER;
    default: return GPUPORT_ERR_TRANSPORT;
    }
}

/* ---- devices ---- */

int ib_devices_present(char *why, size_t len)
{
    struct ibv_device **list;
    int n = 0;

    if (ib_verbs_load(why, len))
        return 0;
    list = IBV(ibv_get_device_list)(&n);

    /* NULL with ENOSYS: no /sys/class/infiniband_verbs, i.e. no verbs
     * device has ever been registered with the kernel: none, as above */
    if (!list && errno != ENOSYS) {
        snprintf(why, len, "no RDMA device was found (ibv_get_device_list failed: %s)",
                 strerror(errno));
        return 0;
    }
    if (list)
        IBV(ibv_free_device_list)(list);
    if (!list || n <= 0) {
        snprintf(why, len, IB_NO_DEVICE);
        return 0;
    }
    snprintf(why, len, "%d RDMA device%s found", n, n == 1 ? "" : "s");
    return n;
}

/* ---- reachability ---- */

void ib_reach_pack(ib_reach_rec_t *rec, int usable, int link_layer, const char *why)
{
    memset(rec, 0, sizeof(*rec));
    gpuport_tl_record_init(GPUPORT_TL_KIND_IB, &ib_records[IB_REC_REACH], &rec->hdr);
    rec->usable = usable ? 1 : 0;
    rec->link_layer = (uint8_t)link_layer;
    snprintf(rec->why, sizeof(rec->why), "%s", why);
}

static const char *link_layer_name(int ll)
{
    return ll == IB_LINK_LAYER_ETH ? "Ethernet (RoCE)" : "InfiniBand";
}

int ib_reach_agree(const ib_reach_rec_t *mine, const void *theirs_buf, size_t len, int peer,
                   char *why, size_t why_len)
{
    ib_reach_rec_t theirs;

    if (len != sizeof(theirs)) {
        snprintf(why, why_len, "rank %d sent %zu bytes where an ib reachability record (%zu) "
                 "was expected", peer, len, sizeof(theirs));
        log_error("%s", why);
        return 0;
    }
    memcpy(&theirs, theirs_buf, sizeof(theirs));
    if (gpuport_tl_record_check(GPUPORT_TL_KIND_IB, &ib_records[IB_REC_REACH], &theirs.hdr, peer)) {
        snprintf(why, why_len, "rank %d sent no ib reachability record of this version", peer);
        return 0;
    }
    theirs.why[sizeof(theirs.why) - 1] = '\0';
    if (!mine->usable) {
        snprintf(why, why_len, "%s", mine->why);
        return 0;
    }
    if (!theirs.usable) {
        snprintf(why, why_len, "rank %d cannot use ib: %s", peer, theirs.why);
        return 0;
    }
    /* both link layers are normalised by the sender: UNSPECIFIED is sent as IB */
    if (mine->link_layer != theirs.link_layer) {
        snprintf(why, why_len, "this rank's port is %s and rank %d's is %s: they cannot reach "
                 "each other", link_layer_name(mine->link_layer), peer,
                 link_layer_name(theirs.link_layer));
        return 0;
    }
    snprintf(why, why_len, "%s", mine->why);
    return 1;
}

/* ---- per-channel data ---- */

_Static_assert(sizeof(ib_tdata_t) == 64, "ib_tdata_t is 64 bytes, its layout version 1");
_Static_assert(sizeof(ib_tdata_t) <= sizeof(((gpuport_channel_rec_t *)0)->tdata),
               "ib_tdata_t must fit the channel record's tdata");
_Static_assert(offsetof(gpuport_sem_slot_t, peer_status) == 8,
               "status_addr is checked as sem_addr + 8");

void ib_tdata_pack(const ib_tdata_t *t, uint8_t *out)
{
    ib_tdata_t v = *t;

    v.magic = IB_TDATA_MAGIC;
    v.version = IB_TDATA_VERSION;
    v.reserved = 0;
    v.reserved2 = 0;
    memcpy(out, &v, sizeof(v));
}

gpuport_status_t ib_tdata_unpack(const gpuport_channel_rec_t *rec, int peer, ib_tdata_t *out)
{
    ib_tdata_t t;
    const char *bad = NULL;

    memcpy(&t, rec->tdata, sizeof(t));
    if (t.magic != IB_TDATA_MAGIC || t.version != IB_TDATA_VERSION) {
        log_error("rank %d's channel record carries no ib channel data of this version (magic "
                  "0x%08x version %u, expected 0x%08x version %u): is it using the ib transport?",
                  peer, t.magic, t.version, IB_TDATA_MAGIC, IB_TDATA_VERSION);
        return GPUPORT_ERR_VERSION;
    }
    if (t.channel_id != rec->channel_id)
        bad = "its channel id differs from the record's";
    else if (!(t.flags & IB_TDATA_CTRL))
        bad = "its control segment has no remote key";
    else if (t.sem_addr == 0 || (t.sem_addr & 7) != 0)
        bad = "its semaphore address is not 8-byte aligned (remote atomics need that)";
    else if (t.status_addr != t.sem_addr + offsetof(gpuport_sem_slot_t, peer_status))
        bad = "its status address is not beside its semaphore";
    else if (rec->dst.size > 0 && !(t.flags & IB_TDATA_DST))
        bad = "its destination region has no remote key";
    else if (!(t.flags & IB_TDATA_DST) && t.dst_rkey != 0)
        bad = "it has a destination key but no destination region";
    else if (t.dst_size != rec->dst.size)
        bad = "its registered destination size differs from the region's";
    else if ((t.flags & IB_TDATA_DST) && t.dst_addr != rec->dst.addr)
        bad = "its registered destination address differs from the region's";
    if (bad) {
        log_error("rank %d described its side of channel %u inconsistently: %s (destination "
                  "0x%llx + %llu bytes, key 0x%x, flags 0x%x; region 0x%llx + %llu bytes; "
                  "semaphore 0x%llx, status 0x%llx, control key 0x%x)",
                  peer, rec->channel_id, bad, (unsigned long long)t.dst_addr,
                  (unsigned long long)t.dst_size, t.dst_rkey, t.flags,
                  (unsigned long long)rec->dst.addr, (unsigned long long)rec->dst.size,
                  (unsigned long long)t.sem_addr, (unsigned long long)t.status_addr, t.ctrl_rkey);
        return GPUPORT_ERR_PEER;
    }
    *out = t;
    return GPUPORT_OK;
}
