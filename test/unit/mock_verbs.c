/* The mock verbs provider; see mock_verbs.h. */
#include "mock_verbs.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mock_verbs_config_t mock_config;
mock_verbs_live_t mock_live;
mock_inline_post_t mock_inline;
mock_rma_stats_t mock_rma;
char mock_error[256];

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static long mock_executed;

#define MOCK_MAX_WR 64
#define MOCK_MAX_INLINE 64
#define MOCK_LID 0x11

static void mock_fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mock_fault(const char *fmt, ...)
{
    va_list ap;

    if (mock_error[0])
        return;
    va_start(ap, fmt);
    vsnprintf(mock_error, sizeof(mock_error), fmt, ap);
    va_end(ap);
}

typedef struct mock_mr {
    struct ibv_mr mr;
    int access;
    struct mock_mr *next;
} mock_mr_t;

typedef struct mock_qp mock_qp_t;

typedef struct mock_cq {
    struct ibv_cq cq;
    mock_qp_t *qp;
} mock_cq_t;

struct mock_qp {
    struct ibv_qp qp;
    mock_qp_t *next;
    uint32_t max_send_wr;
    int access;
    uint32_t dest_qpn, rq_psn, sq_psn;
    int max_rd_atomic, max_dest_rd_atomic;
    uint32_t max_inline;
    int after_read; /* the last request posted was an RDMA read */
    struct ibv_send_wr wr[MOCK_MAX_WR];
    struct ibv_sge sge[MOCK_MAX_WR];
    unsigned char inl[MOCK_MAX_WR][MOCK_MAX_INLINE]; /* inline data, copied at the post */
    uint64_t head, tail;
};

static struct ibv_device mock_device;
/* mock_verbs_hold's domains (NULL: nothing held) */
static struct ibv_pd *mock_hold_from, *mock_hold_to;
static mock_mr_t *mock_mrs;
static mock_qp_t *mock_qps;
static uint32_t mock_next_key = 0x1000, mock_next_qpn = 0x100;

static const uint8_t mock_gid_ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0x11, 0x22, 0xff,
                                        0xfe, 0x33, 0x44, 0x55};
static const uint8_t mock_gid_v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};

/* The port's GID table: IB: one entry; RoCE: link-local v1 and v2, then
 * the IPv4 address as v1 and v2; the rest empty. */
static int mock_gid(int index, uint8_t *gid, int *type)
{
    if (mock_config.link_layer != IBV_LINK_LAYER_ETHERNET) {
        if (index != 0)
            return -1;
        memcpy(gid, mock_gid_ll, 16);
        *type = IBV_GID_TYPE_IB;
        return 0;
    }
    if (index < 0 || index > 3)
        return -1;
    memcpy(gid, index < 2 ? mock_gid_ll : mock_gid_v4, 16);
    *type = index % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
    return 0;
}

static struct ibv_device **mock_get_device_list(int *n)
{
    struct ibv_device **list = calloc(2, sizeof(*list));

    snprintf(mock_device.name, sizeof(mock_device.name), "mock0");
    snprintf(mock_device.ibdev_path, sizeof(mock_device.ibdev_path), "/nonexistent/mock0");
    mock_device.transport_type = IBV_TRANSPORT_IB;
    mock_device.node_type = IBV_NODE_CA;
    list[0] = &mock_device;
    *n = 1;
    __atomic_add_fetch(&mock_live.lists, 1, __ATOMIC_RELAXED);
    return list;
}

static void mock_free_device_list(struct ibv_device **list)
{
    if (!list || list[0] != &mock_device) {
        mock_fault("ibv_free_device_list of a list it did not return");
        return;
    }
    __atomic_sub_fetch(&mock_live.lists, 1, __ATOMIC_RELAXED);
    free(list);
}

static const char *mock_get_device_name(struct ibv_device *dev)
{
    return dev->name;
}

static int mock_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int mock_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

static struct ibv_context *mock_open_device(struct ibv_device *dev)
{
    struct ibv_context *ctx;

    if (dev != &mock_device) {
        mock_fault("ibv_open_device of a device it did not list");
        errno = ENODEV;
        return NULL;
    }
    ctx = calloc(1, sizeof(*ctx));
    ctx->device = dev;
    ctx->ops.post_send = mock_post_send;
    ctx->ops.poll_cq = mock_poll_cq;
    ctx->abi_compat = NULL; /* not extended: ib_query_port calls mock_query_port */
    __atomic_add_fetch(&mock_live.ctx, 1, __ATOMIC_RELAXED);
    return ctx;
}

static int mock_close_device(struct ibv_context *ctx)
{
    __atomic_sub_fetch(&mock_live.ctx, 1, __ATOMIC_RELAXED);
    free(ctx);
    return 0;
}

static int mock_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
    (void)ctx;
    memset(a, 0, sizeof(*a));
    a->phys_port_cnt = 1;
    a->atomic_cap = (enum ibv_atomic_cap)mock_config.atomic_cap;
    a->max_qp_wr = MOCK_MAX_WR;
    a->max_cqe = MOCK_MAX_WR;
    a->max_qp_rd_atom = 16;
    a->max_qp_init_rd_atom = 16;
    return 0;
}

static int mock_query_port(struct ibv_context *ctx, uint8_t port,
                           struct _compat_ibv_port_attr *compat)
{
    struct ibv_port_attr *a = (struct ibv_port_attr *)compat; /* ib_query_port passes the whole */

    (void)ctx;
    if (port != 1)
        return EINVAL;
    memset(a, 0, sizeof(*a));
    a->state = IBV_PORT_ACTIVE;
    a->max_mtu = a->active_mtu = IBV_MTU_4096;
    a->link_layer = (uint8_t)mock_config.link_layer;
    a->lid = mock_config.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : MOCK_LID;
    a->gid_tbl_len = 8;
    a->max_msg_sz = mock_config.max_msg;
    return 0;
}

static int mock_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
                             struct ibv_gid_entry *e, uint32_t flags, size_t size)
{
    int type;

    (void)ctx;
    /* the entry's size tells the library which layout the caller has */
    if (size != sizeof(*e) || flags != 0) {
        mock_fault("_ibv_query_gid_ex with entry size %zu (not %zu), flags 0x%x", size,
                   sizeof(*e), flags);
        return EINVAL;
    }
    if (port != 1 || mock_gid((int)index, e->gid.raw, &type) != 0)
        return ENODATA;
    e->gid_index = index;
    e->port_num = port;
    e->gid_type = (uint32_t)type;
    return 0;
}

static int mock_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    int type;

    (void)ctx;
    return port == 1 && mock_gid(index, gid->raw, &type) == 0 ? 0 : -1;
}

static struct ibv_pd *mock_alloc_pd(struct ibv_context *ctx)
{
    struct ibv_pd *pd = calloc(1, sizeof(*pd));

    pd->context = ctx;
    __atomic_add_fetch(&mock_live.pd, 1, __ATOMIC_RELAXED);
    return pd;
}

static int mock_dealloc_pd(struct ibv_pd *pd)
{
    pthread_mutex_lock(&mock_lock);
    for (mock_mr_t *m = mock_mrs; m; m = m->next)
        if (m->mr.pd == pd)
            mock_fault("ibv_dealloc_pd with a registration open");
    for (mock_qp_t *q = mock_qps; q; q = q->next)
        if (q->qp.pd == pd)
            mock_fault("ibv_dealloc_pd with a QP open");
    pthread_mutex_unlock(&mock_lock);
    __atomic_sub_fetch(&mock_live.pd, 1, __ATOMIC_RELAXED);
    free(pd);
    return 0;
}

static struct ibv_mr *mock_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    mock_mr_t *m;

    if (((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
         !(access & IBV_ACCESS_LOCAL_WRITE)) ||
        ((access & IBV_ACCESS_REMOTE_ATOMIC) && mock_config.atomic_cap == IBV_ATOMIC_NONE) ||
        len == 0) {
        errno = EINVAL;
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = len;
    m->access = access;
    pthread_mutex_lock(&mock_lock);
    m->mr.lkey = mock_next_key;
    m->mr.rkey = mock_next_key + 0x80000;
    mock_next_key += 0x101;
    m->next = mock_mrs;
    mock_mrs = m;
    pthread_mutex_unlock(&mock_lock);
    __atomic_add_fetch(&mock_live.mr, 1, __ATOMIC_RELAXED);
    return &m->mr;
}

static int mock_dereg_mr(struct ibv_mr *mr)
{
    mock_mr_t **pp;

    pthread_mutex_lock(&mock_lock);
    for (pp = &mock_mrs; *pp && &(*pp)->mr != mr; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = (*pp)->next;
    else
        mock_fault("ibv_dereg_mr of an unknown registration");
    pthread_mutex_unlock(&mock_lock);
    __atomic_sub_fetch(&mock_live.mr, 1, __ATOMIC_RELAXED);
    free((mock_mr_t *)mr);
    return 0;
}

static struct ibv_cq *mock_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
                                     struct ibv_comp_channel *ch, int vector)
{
    mock_cq_t *c;

    (void)cq_ctx, (void)ch, (void)vector;
    if (cqe < 1 || cqe > MOCK_MAX_WR) {
        errno = EINVAL;
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    c->cq.context = ctx;
    c->cq.cqe = cqe;
    __atomic_add_fetch(&mock_live.cq, 1, __ATOMIC_RELAXED);
    return &c->cq;
}

static int mock_destroy_cq(struct ibv_cq *cq)
{
    if (((mock_cq_t *)cq)->qp)
        return EBUSY;
    __atomic_sub_fetch(&mock_live.cq, 1, __ATOMIC_RELAXED);
    free(cq);
    return 0;
}

static struct ibv_qp *mock_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
    mock_qp_t *q;

    if (ia->qp_type != IBV_QPT_RC || !ia->send_cq || ia->cap.max_send_wr > MOCK_MAX_WR ||
        ia->cap.max_send_sge > 1 || (int)ia->cap.max_send_wr > ia->send_cq->cqe ||
        ia->cap.max_inline_data > mock_config.max_inline ||
        ia->cap.max_inline_data > MOCK_MAX_INLINE || ((mock_cq_t *)ia->send_cq)->qp) {
        errno = EINVAL;
        return NULL;
    }
    q = calloc(1, sizeof(*q));
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = ia->send_cq;
    q->qp.recv_cq = ia->recv_cq;
    q->qp.qp_type = IBV_QPT_RC;
    q->qp.state = IBV_QPS_RESET;
    q->max_send_wr = ia->cap.max_send_wr;
    q->max_inline = ia->cap.max_inline_data;
    ((mock_cq_t *)ia->send_cq)->qp = q;
    pthread_mutex_lock(&mock_lock);
    q->qp.qp_num = mock_next_qpn++;
    q->next = mock_qps;
    mock_qps = q;
    pthread_mutex_unlock(&mock_lock);
    __atomic_add_fetch(&mock_live.qp, 1, __ATOMIC_RELAXED);
    return &q->qp;
}

static int mock_destroy_qp(struct ibv_qp *qp)
{
    mock_qp_t **pp, *q = (mock_qp_t *)qp;

    pthread_mutex_lock(&mock_lock);
    for (pp = &mock_qps; *pp && *pp != q; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = q->next;
    pthread_mutex_unlock(&mock_lock);
    ((mock_cq_t *)qp->send_cq)->qp = NULL;
    __atomic_sub_fetch(&mock_live.qp, 1, __ATOMIC_RELAXED);
    free(q);
    return 0;
}

static int mock_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    mock_qp_t *q = (mock_qp_t *)qp;
    int eth = mock_config.link_layer == IBV_LINK_LAYER_ETHERNET, rc = 0;
    uint8_t gid[16];
    int type;

    pthread_mutex_lock(&mock_lock);
    switch (a->qp_state) {
    case IBV_QPS_INIT:
        if (qp->state != IBV_QPS_RESET ||
            mask != (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
            a->port_num != 1 ||
            ((a->qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) &&
             mock_config.atomic_cap == IBV_ATOMIC_NONE))
            rc = EINVAL;
        q->access = (int)a->qp_access_flags;
        break;
    case IBV_QPS_RTR:
        if (qp->state != IBV_QPS_INIT || !(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN) ||
            !(mask & IBV_QP_RQ_PSN) || !(mask & IBV_QP_PATH_MTU) ||
            !(mask & IBV_QP_MAX_DEST_RD_ATOMIC) || a->path_mtu > IBV_MTU_4096 ||
            a->max_dest_rd_atomic > 16 || a->ah_attr.port_num != 1)
            rc = EINVAL;
        else if (eth && (!a->ah_attr.is_global || mock_gid(a->ah_attr.grh.sgid_index, gid, &type) ||
                         memcmp(a->ah_attr.grh.dgid.raw, mock_gid_v4, 16) != 0))
            rc = EINVAL; /* RoCE: by GRH, to the IPv4 GID auto picks */
        else if (!eth && (a->ah_attr.is_global || a->ah_attr.dlid != MOCK_LID))
            rc = EINVAL;
        q->dest_qpn = a->dest_qp_num;
        q->rq_psn = a->rq_psn;
        q->max_dest_rd_atomic = a->max_dest_rd_atomic;
        break;
    case IBV_QPS_RTS:
        if (qp->state != IBV_QPS_RTR || !(mask & IBV_QP_SQ_PSN) ||
            !(mask & IBV_QP_MAX_QP_RD_ATOMIC) || a->max_rd_atomic > 16)
            rc = EINVAL;
        q->sq_psn = a->sq_psn;
        q->max_rd_atomic = a->max_rd_atomic;
        break;
    case IBV_QPS_ERR:
        if (mask != IBV_QP_STATE)
            rc = EINVAL;
        break;
    default:
        rc = EINVAL;
    }
    if (rc)
        mock_fault("ibv_modify_qp(%d) refused (from state %d, mask 0x%x)", (int)a->qp_state,
                   (int)qp->state, mask);
    else
        qp->state = a->qp_state;
    pthread_mutex_unlock(&mock_lock);
    return rc;
}

static int mock_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    mock_qp_t *q = (mock_qp_t *)qp;
    int rc = 0;

    pthread_mutex_lock(&mock_lock);
    for (; wr; wr = wr->next) {
        uint64_t slot = q->tail % MOCK_MAX_WR;
        if (qp->state != IBV_QPS_RTS) {
            rc = EINVAL;
            mock_fault("post_send on a QP in state %d", (int)qp->state);
        } else if (q->tail - q->head >= q->max_send_wr) {
            rc = ENOMEM;
            mock_fault("post_send beyond the send queue's %u entries", q->max_send_wr);
        } else if (wr->num_sge != 1 || !(wr->send_flags & IBV_SEND_SIGNALED)) {
            rc = EINVAL;
            mock_fault("post_send: %d sges, flags 0x%x", wr->num_sge, wr->send_flags);
        } else if ((wr->send_flags & IBV_SEND_INLINE) &&
                   (wr->opcode != IBV_WR_RDMA_WRITE || wr->sg_list[0].length > q->max_inline)) {
            rc = EINVAL;
            mock_fault("post_send: inline data of %u bytes (opcode %d) on a QP that takes %u",
                       wr->sg_list[0].length, (int)wr->opcode, q->max_inline);
        }
        if (rc) {
            *bad = wr;
            break;
        }
        if (q->after_read && wr->opcode != IBV_WR_RDMA_READ) {
            /* IB lets a later write or atomic pass an RDMA read unless it is
             * fenced; the mock executes in order, so it says so instead */
            if (!(wr->send_flags & IBV_SEND_FENCE))
                mock_fault("post_send: opcode %d after an RDMA read without IBV_SEND_FENCE, "
                           "free to pass it", (int)wr->opcode);
            __atomic_add_fetch(&mock_rma.after_read, 1, __ATOMIC_RELAXED);
            if (wr->send_flags & IBV_SEND_FENCE)
                __atomic_add_fetch(&mock_rma.fenced, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&mock_rma.last_opcode, (int)wr->opcode, __ATOMIC_RELAXED);
            __atomic_store_n(&mock_rma.last_flags, wr->send_flags, __ATOMIC_RELAXED);
        }
        q->after_read = wr->opcode == IBV_WR_RDMA_READ;
        /* the caller's arrays may be gone after the call: copy */
        q->wr[slot] = *wr;
        q->sge[slot] = wr->sg_list[0];
        q->wr[slot].sg_list = &q->sge[slot];
        q->wr[slot].next = NULL;
        if (wr->send_flags & IBV_SEND_INLINE) {
            /* the provider takes the data now; the buffer is the caller's again */
            memcpy(q->inl[slot], (const void *)(uintptr_t)wr->sg_list[0].addr,
                   wr->sg_list[0].length);
            q->sge[slot].addr = (uint64_t)(uintptr_t)q->inl[slot];
            mock_inline.count++;
            mock_inline.opcode = (int)wr->opcode;
            mock_inline.send_flags = wr->send_flags;
            mock_inline.remote_addr = wr->wr.rdma.remote_addr;
            mock_inline.rkey = wr->wr.rdma.rkey;
            mock_inline.length = wr->sg_list[0].length;
            memcpy(mock_inline.data, q->inl[slot], wr->sg_list[0].length);
        }
        q->tail++;
    }
    pthread_mutex_unlock(&mock_lock);
    return rc;
}

static mock_mr_t *mock_find(struct ibv_pd *pd, uint32_t key, int remote, uint64_t addr,
                            uint64_t len)
{
    for (mock_mr_t *m = mock_mrs; m; m = m->next) {
        uint64_t base = (uint64_t)(uintptr_t)m->mr.addr;
        if (m->mr.pd == pd && (remote ? m->mr.rkey : m->mr.lkey) == key && addr >= base &&
            addr + len <= base + m->mr.length)
            return m;
    }
    return NULL;
}

void mock_inline_reset(void)
{
    pthread_mutex_lock(&mock_lock);
    memset(&mock_inline, 0, sizeof(mock_inline));
    pthread_mutex_unlock(&mock_lock);
}

uint32_t mock_rkey_of(const void *addr)
{
    uint32_t key = 0;

    pthread_mutex_lock(&mock_lock);
    for (mock_mr_t *m = mock_mrs; m && !key; m = m->next)
        if ((const char *)addr >= (const char *)m->mr.addr &&
            (const char *)addr < (const char *)m->mr.addr + m->mr.length)
            key = m->mr.rkey;
    pthread_mutex_unlock(&mock_lock);
    return key;
}

/* The domain of the registration that holds addr (NULL: none); under
 * mock_lock. */
static struct ibv_pd *mock_pd_of(const void *addr)
{
    for (mock_mr_t *m = mock_mrs; m; m = m->next)
        if ((const char *)addr >= (const char *)m->mr.addr &&
            (const char *)addr < (const char *)m->mr.addr + m->mr.length)
            return m->mr.pd;
    return NULL;
}

int mock_verbs_hold(const void *from, const void *to, int on)
{
    int ok = 1;

    pthread_mutex_lock(&mock_lock);
    mock_hold_from = mock_hold_to = NULL;
    if (on) {
        struct ibv_pd *f = mock_pd_of(from), *t = mock_pd_of(to);
        ok = f && t;
        if (ok) {
            mock_hold_from = f;
            mock_hold_to = t;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return ok;
}

/* q is held: its domain is the held one, and so is its responder's; under
 * mock_lock. */
static int mock_held(const mock_qp_t *q)
{
    const mock_qp_t *r;

    if (!mock_hold_from || q->qp.pd != mock_hold_from)
        return 0;
    for (r = mock_qps; r && r->qp.qp_num != q->dest_qpn; r = r->next)
        ;
    return r && r->qp.pd == mock_hold_to;
}

long mock_verbs_held_posted(void)
{
    long n = 0;

    pthread_mutex_lock(&mock_lock);
    for (const mock_qp_t *q = mock_qps; q; q = q->next)
        if (mock_held(q))
            n += (long)(q->tail - q->head);
    pthread_mutex_unlock(&mock_lock);
    return n;
}

void mock_verbs_fail_in(long n)
{
    mock_config.fail_at = __atomic_load_n(&mock_executed, __ATOMIC_RELAXED) + n;
}

/* Executes q's oldest request as its NIC and the responder's would. */
static enum ibv_wc_status mock_execute(mock_qp_t *q, const struct ibv_send_wr *wr)
{
    const struct ibv_sge *sge = wr->sg_list;
    mock_qp_t *r;
    mock_mr_t *lm, *rm;
    int atomic = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD, read = wr->opcode == IBV_WR_RDMA_READ;
    uint64_t raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
    uint32_t rkey = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
    /* what the responder's registration and QP must both allow */
    int need = atomic ? IBV_ACCESS_REMOTE_ATOMIC
               : read ? IBV_ACCESS_REMOTE_READ
                      : IBV_ACCESS_REMOTE_WRITE;

    if (++mock_executed == mock_config.fail_at)
        return IBV_WC_REM_ACCESS_ERR;
    for (r = mock_qps; r && r->qp.qp_num != q->dest_qpn; r = r->next)
        ;
    /* nobody answers with that QPN and PSN; nor does a QP in the error
     * state, which discards what arrives (the requester retries and gives
     * up) */
    if (!r || r->dest_qpn != q->qp.qp_num || r->qp.state < IBV_QPS_RTR ||
        r->qp.state == IBV_QPS_ERR || r->rq_psn != q->sq_psn)
        return IBV_WC_RETRY_EXC_ERR;
    if (wr->opcode != IBV_WR_RDMA_WRITE && !atomic && !read)
        return IBV_WC_REM_INV_REQ_ERR;
    if (sge->length > mock_config.max_msg)
        return IBV_WC_LOC_LEN_ERR;
    /* inline data was copied at the post: no local key is looked at */
    lm = (wr->send_flags & IBV_SEND_INLINE) ? NULL
                                           : mock_find(q->qp.pd, sge->lkey, 0, sge->addr,
                                                       sge->length);
    /* the responses of reads and atomics are written into the local sge */
    if (!(wr->send_flags & IBV_SEND_INLINE) &&
        (!lm || ((atomic || read) && !(lm->access & IBV_ACCESS_LOCAL_WRITE))))
        return IBV_WC_LOC_PROT_ERR;
    rm = mock_find(r->qp.pd, rkey, 1, raddr, atomic ? 8 : sge->length);
    if (!rm || !(rm->access & need) || !(r->access & need))
        return IBV_WC_REM_ACCESS_ERR;
    /* reads and atomics need the QPs' outstanding read/atomic resources */
    if ((atomic || read) && (q->max_rd_atomic == 0 || r->max_dest_rd_atomic == 0))
        return IBV_WC_REM_INV_REQ_ERR;
    if (atomic) {
        uint64_t old;
        if (sge->length != 8 || (raddr & 7))
            return IBV_WC_REM_INV_REQ_ERR;
        old = __atomic_fetch_add((uint64_t *)(uintptr_t)raddr, wr->wr.atomic.compare_add,
                                 __ATOMIC_SEQ_CST);
        memcpy((void *)(uintptr_t)sge->addr, &old, 8);
        __atomic_add_fetch(&mock_rma.atomics, 1, __ATOMIC_RELAXED);
    } else if (read) {
        memcpy((void *)(uintptr_t)sge->addr, (const void *)(uintptr_t)raddr, sge->length);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_add_fetch(&mock_rma.reads, 1, __ATOMIC_RELAXED);
    } else if (sge->length == 8 && !(raddr & 7)) {
        /* an aligned 8-byte write lands whole, after the data before it */
        uint64_t v;
        memcpy(&v, (void *)(uintptr_t)sge->addr, 8);
        __atomic_store_n((uint64_t *)(uintptr_t)raddr, v, __ATOMIC_RELEASE);
    } else if (sge->length == 4 && !(raddr & 3)) {
        uint32_t v;
        memcpy(&v, (void *)(uintptr_t)sge->addr, 4);
        __atomic_store_n((uint32_t *)(uintptr_t)raddr, v, __ATOMIC_RELEASE);
    } else {
        memcpy((void *)(uintptr_t)raddr, (void *)(uintptr_t)sge->addr, sge->length);
        __atomic_thread_fence(__ATOMIC_RELEASE);
    }
    return IBV_WC_SUCCESS;
}

static int mock_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    mock_qp_t *q = ((mock_cq_t *)cq)->qp;
    int k = 0;

    pthread_mutex_lock(&mock_lock);
    /* a few per call: completions trickle in and the send queue fills; a
     * held QP executes nothing */
    while (q && !mock_held(q) && k < n && k < 3 && q->head < q->tail) {
        const struct ibv_send_wr *wr = &q->wr[q->head % MOCK_MAX_WR];
        enum ibv_wc_status st = q->qp.state == IBV_QPS_ERR ? IBV_WC_WR_FLUSH_ERR
                                                            : mock_execute(q, wr);
        if (st != IBV_WC_SUCCESS)
            q->qp.state = IBV_QPS_ERR;
        memset(&wc[k], 0, sizeof(wc[k]));
        wc[k].wr_id = wr->wr_id;
        wc[k].status = st;
        wc[k].opcode = wr->opcode == IBV_WR_RDMA_WRITE  ? IBV_WC_RDMA_WRITE
                       : wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
                                                        : IBV_WC_FETCH_ADD;
        wc[k].qp_num = q->qp.qp_num;
        wc[k].byte_len = wr->sg_list->length;
        q->head++;
        k++;
    }
    pthread_mutex_unlock(&mock_lock);
    return k;
}

#if GPUPORT_HAVE_IBV_DMABUF
static struct ibv_mr *mock_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                         uint64_t iova, int fd, int access)
{
    (void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
    errno = EOPNOTSUPP;
    return NULL;
}
#endif

/* rdma-core's texts for the statuses the mock completes with */
static const char *mock_wc_status_str(enum ibv_wc_status st)
{
    switch (st) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "unknown";
    }
}

static void mock_verbs_table(ib_verbs_t *t)
{
    memset(t, 0, sizeof(*t));
    t->ibv_get_device_list = mock_get_device_list;
    t->ibv_free_device_list = mock_free_device_list;
    t->ibv_get_device_name = mock_get_device_name;
    t->ibv_open_device = mock_open_device;
    t->ibv_close_device = mock_close_device;
    t->ibv_query_device = mock_query_device;
    t->ibv_query_port = mock_query_port;
    t->ibv_query_gid = mock_query_gid;
    t->ibv_alloc_pd = mock_alloc_pd;
    t->ibv_dealloc_pd = mock_dealloc_pd;
    t->ibv_reg_mr = mock_reg_mr;
    t->ibv_dereg_mr = mock_dereg_mr;
    t->ibv_create_cq = mock_create_cq;
    t->ibv_destroy_cq = mock_destroy_cq;
    t->ibv_create_qp = mock_create_qp;
    t->ibv_destroy_qp = mock_destroy_qp;
    t->ibv_modify_qp = mock_modify_qp;
    t->ibv_wc_status_str = mock_wc_status_str;
    t->_ibv_query_gid_ex = mock_query_gid_ex;
#if GPUPORT_HAVE_IBV_DMABUF
    t->ibv_reg_dmabuf_mr = mock_reg_dmabuf_mr;
#endif
}

void mock_verbs_install(void)
{
    ib_verbs_t t;

    memset(&mock_live, 0, sizeof(mock_live));
    mock_error[0] = '\0';
    mock_executed = 0;
    memset(&mock_inline, 0, sizeof(mock_inline));
    memset(&mock_rma, 0, sizeof(mock_rma));
    mock_hold_from = mock_hold_to = NULL;
    mock_verbs_table(&t);
    ib_verbs_install(&t);
}

void mock_verbs_uninstall(void)
{
    char why[320];

    /* without the library, what ib reports from then on is why */
    (void)ib_verbs_load_from(IB_VERBS_SONAME, why, sizeof(why));
}
