/* The ib transport's devices and communicator state; see ib_priv.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB)
#include "transport/ib/ib_priv.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ib_dev_t *g_devs;   /* opened devices (g_lock) */

/* The sysfs path of a PCI function, resolved through its links, or "". */
static void pci_path(const char *link, char *out, size_t len)
{
    char buf[PATH_MAX];

    if (realpath(link, buf) && strlen(buf) < len)
        snprintf(out, len, "%s", buf);
    else
        out[0] = '\0';
}

/* The GPU's PCI bus id as CUDA writes it ("0000:3B:00.0"), into sysfs. */
static void gpu_pci_path(const char *bus, char *out, size_t len)
{
    char link[96];
    size_t n = strlen(bus);

    out[0] = '\0';
    if (!bus[0] || n > 40)
        return;
    n = (size_t)snprintf(link, sizeof(link), "/sys/bus/pci/devices/");
    for (const char *p = bus; *p && n + 1 < sizeof(link); p++)
        link[n++] = (char)tolower((unsigned char)*p);
    link[n] = '\0';
    pci_path(link, out, len);
}

/* Room for twice as many rows (8 at first); -1 without memory, the arrays
 * left as they were. */
static int rows_grow(ib_port_row_t **rows, int **row_dev, int *cap)
{
    int n = *cap ? 2 * *cap : 8;
    ib_port_row_t *nr = realloc(*rows, (size_t)n * sizeof(**rows));
    int *nd;

    if (!nr)
        return -1;
    *rows = nr;
    nd = realloc(*row_dev, (size_t)n * sizeof(**row_dev));
    if (!nd)
        return -1;
    *row_dev = nd;
    *cap = n;
    return 0;
}

/* Collects every port of every device. Contexts are left open in ctxs
 * (row_dev[i]: the device of row i); the caller closes those it does not
 * keep. */
static int scan(struct ibv_device **list, int ndev, struct ibv_context **ctxs,
                struct ibv_device_attr *attrs, ib_port_row_t **rows_p, int **row_dev_p,
                char *skipped, size_t skipped_len)
{
    ib_port_row_t *rows = NULL;
    int *row_dev = NULL, nrows = 0, cap = 0;
    size_t used = 0;

    for (int d = 0; d < ndev; d++) {
        const char *name = IBV(ibv_get_device_name)(list[d]);
        char link[PATH_MAX], pci[256];
        int rc;

        ctxs[d] = IBV(ibv_open_device)(list[d]);
        if (!ctxs[d]) {
            int err = errno;
            if (used < skipped_len)
                used += (size_t)snprintf(skipped + used, skipped_len - used,
                                         "%sibv_open_device(%s) failed: %s", used ? "; " : "",
                                         name, strerror(err));
            continue;
        }
        rc = IBV(ibv_query_device)(ctxs[d], &attrs[d]);
        if (rc) {
            if (used < skipped_len)
                used += (size_t)snprintf(skipped + used, skipped_len - used,
                                         "%sibv_query_device(%s) failed: %s", used ? "; " : "",
                                         name, strerror(ib_err(rc)));
            IBV(ibv_close_device)(ctxs[d]);
            ctxs[d] = NULL;
            continue;
        }
        snprintf(link, sizeof(link), "%s/device", list[d]->ibdev_path);
        pci_path(link, pci, sizeof(pci));
        for (int p = 1; p <= attrs[d].phys_port_cnt; p++) {
            struct ibv_port_attr pa;
            ib_port_row_t *r;

            rc = ib_query_port(ctxs[d], (uint8_t)p, &pa);
            if (rc) {
                if (used < skipped_len)
                    used += (size_t)snprintf(skipped + used, skipped_len - used,
                                             "%sibv_query_port(%s, %d) failed: %s",
                                             used ? "; " : "", name, p, strerror(ib_err(rc)));
                continue;
            }
            if (nrows == cap && rows_grow(&rows, &row_dev, &cap) != 0) {
                free(rows);
                free(row_dev);
                return -1;
            }
            r = &rows[nrows];
            memset(r, 0, sizeof(*r));
            snprintf(r->dev, sizeof(r->dev), "%s", name);
            r->port = (uint8_t)p;
            r->state = pa.state;
            r->link_layer = pa.link_layer;
            r->active_mtu = pa.active_mtu;
            r->max_msg_sz = pa.max_msg_sz;
            r->lid = pa.lid;
            r->iwarp = list[d]->transport_type != IBV_TRANSPORT_IB;
            snprintf(r->pci, sizeof(r->pci), "%s", pci);
            row_dev[nrows++] = d;
        }
    }
    *rows_p = rows;
    *row_dev_p = row_dev;
    return nrows;
}

/* The GID to address this port by (RoCE), chosen over its table. */
static gpuport_status_t pick_gid(ib_dev_t *dev, int forced, int tbl_len, char *why, size_t len)
{
    ib_gid_entry_t *table;
    int idx, rc;

    if (dev->link_layer == IB_LINK_LAYER_IB) {
        dev->gid_index = 0;
        if (IBV(ibv_query_gid)(dev->ctx, dev->port, 0, &dev->gid) != 0)
            memset(&dev->gid, 0, sizeof(dev->gid));
        snprintf(why, len, "InfiniBand, LID 0x%x%s", dev->lid,
                 forced >= 0 ? " (GPUPORT_IB_GID_INDEX applies to RoCE only and is ignored)" : "");
        return GPUPORT_OK;
    }
    /* an older libibverbs: without the GIDs' types, the choice could take a
     * RoCE v1 GID where the peer takes v2, and the two would never connect */
    if (!IBV(_ibv_query_gid_ex)) {
        snprintf(why, len, "libibverbs lacks _ibv_query_gid_ex (IBVERBS_1.11), which RoCE's "
                 "GID choice needs");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    table = calloc(tbl_len > 0 ? (size_t)tbl_len : 1, sizeof(*table));
    if (!table)
        return GPUPORT_ERR_NO_MEMORY;
    for (int i = 0; i < tbl_len; i++) {
        struct ibv_gid_entry e;
        table[i].index = i;
        /* ENODATA: an empty slot */
        if (IBV(_ibv_query_gid_ex)(dev->ctx, dev->port, (uint32_t)i, &e, 0, sizeof(e)) != 0)
            continue;
        memcpy(table[i].gid, e.gid.raw, IB_GID_LEN);
        table[i].type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? IB_GID_TYPE_ROCE_V2
                        : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? IB_GID_TYPE_ROCE_V1
                                                             : IB_GID_TYPE_IB;
        table[i].valid = 1;
    }
    idx = ib_gid_select(table, tbl_len, forced, why, len);
    free(table);
    if (idx < 0)
        return GPUPORT_ERR_NOT_SUPPORTED;
    rc = IBV(ibv_query_gid)(dev->ctx, dev->port, idx, &dev->gid);
    if (rc) {
        snprintf(why, len, "ibv_query_gid(%s, port %u, index %d) failed: %s", dev->name, dev->port,
                 idx, strerror(ib_err(rc)));
        return GPUPORT_ERR_TRANSPORT;
    }
    dev->gid_index = idx;
    return GPUPORT_OK;
}

/* The verbs devices of this host, or why there are none. */
static gpuport_status_t dev_list(struct ibv_device ***list_p, int *ndev_p, char *why, size_t len)
{
    struct ibv_device **list;
    int ndev = 0;

    errno = 0;
    list = IBV(ibv_get_device_list)(&ndev);
    /* ENOSYS: no verbs device was ever registered with this kernel */
    if (!list && errno != ENOSYS) {
        snprintf(why, len, "no RDMA device was found (ibv_get_device_list failed: %s)",
                 strerror(errno));
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (!list || ndev <= 0) {
        if (list)
            IBV(ibv_free_device_list)(list);
        snprintf(why, len, IB_NO_DEVICE);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    *list_p = list;
    *ndev_p = ndev;
    return GPUPORT_OK;
}

/* What the chosen port and its device's attributes say, into dev. */
static void dev_fill(ib_dev_t *dev, struct ibv_context *ctx, const ib_port_row_t *row,
                     const struct ibv_device_attr *attr)
{
    dev->ctx = ctx;
    snprintf(dev->name, sizeof(dev->name), "%s", row->dev);
    dev->port = row->port;
    dev->lid = row->lid;
    dev->link_layer =
        row->link_layer == IBV_LINK_LAYER_ETHERNET ? IB_LINK_LAYER_ETH : IB_LINK_LAYER_IB;
    dev->active_mtu = (enum ibv_mtu)row->active_mtu;
    dev->piece_max = ib_piece_max(row->max_msg_sz);
    dev->atomic_cap = attr->atomic_cap;
    dev->max_qp_wr = attr->max_qp_wr;
    dev->max_cqe = attr->max_cqe;
    dev->max_qp_rd_atom = attr->max_qp_rd_atom;
    dev->max_qp_init_rd_atom = attr->max_qp_init_rd_atom;
}

/* The port's GID, chosen over its table (pick_gid); gid_why says which. */
static gpuport_status_t dev_gid(ib_dev_t *dev, int gid_index, char *gid_why, size_t gid_len,
                                char *why, size_t len)
{
    struct ibv_port_attr pa;
    gpuport_status_t status;
    int rc = ib_query_port(dev->ctx, dev->port, &pa);

    if (rc) {
        snprintf(why, len, "ibv_query_port(%s, %u) failed: %s", dev->name, dev->port,
                 strerror(ib_err(rc)));
        return GPUPORT_ERR_TRANSPORT;
    }
    status = pick_gid(dev, gid_index, pa.gid_tbl_len, gid_why, gid_len);
    if (status)
        snprintf(why, len, "%s:%u: %s", dev->name, dev->port, gid_why);
    return status;
}

/* Opens the device and port for (hca, gid index, GPU). g_lock held. */
static gpuport_status_t dev_open(const ib_hca_list_t *hca, int gid_index, const char *gpu_bus,
                                 ib_dev_t **dev_p, char *why, size_t len)
{
    struct ibv_device **list;
    struct ibv_context **ctxs = NULL;
    struct ibv_device_attr *attrs = NULL;
    ib_port_row_t *rows = NULL;
    int *row_dev = NULL, ndev = 0, nrows, best = -1, keep = -1;
    char gpu_pci[256], skipped[256] = "", sel[256], gid_why[160];
    gpuport_status_t status;
    ib_dev_t *dev = NULL;

    status = dev_list(&list, &ndev, why, len);
    if (status)
        return status;
    ctxs = calloc((size_t)ndev, sizeof(*ctxs));
    attrs = calloc((size_t)ndev, sizeof(*attrs));
    if (!ctxs || !attrs)
        goto err_memory;
    nrows = scan(list, ndev, ctxs, attrs, &rows, &row_dev, skipped, sizeof(skipped));
    if (nrows < 0)
        goto err_memory;
    gpu_pci_path(gpu_bus, gpu_pci, sizeof(gpu_pci));
    best = ib_port_select(rows, nrows, hca, gpu_bus[0] ? gpu_pci : NULL, sel, sizeof(sel));
    if (best < 0) {
        status = GPUPORT_ERR_NOT_SUPPORTED;
        snprintf(why, len, "%s%s%s", sel, skipped[0] ? "; " : "", skipped);
        goto out;
    }
    keep = row_dev[best];
    dev = calloc(1, sizeof(*dev));
    if (!dev)
        goto err_memory;
    dev_fill(dev, ctxs[keep], &rows[best], &attrs[keep]);
    status = dev_gid(dev, gid_index, gid_why, sizeof(gid_why), why, len);
    if (status)
        goto out;
    ib_hca_list_format(hca, dev->key_hca, sizeof(dev->key_hca));
    dev->key_gid_index = gid_index;
    snprintf(dev->key_gpu, sizeof(dev->key_gpu), "%s", gpu_bus);
    snprintf(dev->why, sizeof(dev->why), "%s; %s; atomics %s, max message %llu bytes", sel,
             gid_why, dev->atomic_cap == IBV_ATOMIC_NONE ? "none" : "yes",
             (unsigned long long)dev->piece_max);
    log_info("using %s", dev->why);
    *dev_p = dev;
    dev = NULL;
    ctxs[keep] = NULL;
    goto out;

err_memory:
    status = GPUPORT_ERR_NO_MEMORY;
    snprintf(why, len, "out of memory");
out:
    free(dev);
    for (int d = 0; ctxs && d < ndev; d++)
        if (ctxs[d])
            IBV(ibv_close_device)(ctxs[d]);
    free(ctxs);
    free(attrs);
    free(rows);
    free(row_dev);
    IBV(ibv_free_device_list)(list);
    return status;
}

/* The cached device for comm's configuration, opened if needed. g_lock
 * held. Failures are not cached: a port may come up later. */
static gpuport_status_t dev_get(gpuport_comm_t comm, ib_dev_t **dev_p, char *why, size_t len)
{
    const ib_settings_t *cfg = gpuport_tl_settings(comm, GPUPORT_TL_KIND_IB);
    char gpu[32], hca[IB_HCA_TEXT_MAX + 1];
    ib_dev_t *d;
    gpuport_status_t status;

    /* without libibverbs, its reason is the answer */
    status = ib_verbs_load(why, len);
    if (status)
        return status;
    if (gpuport_tl_gpu_bus_id(comm, gpu, sizeof(gpu)) != 0)
        gpu[0] = '\0';
    ib_hca_list_format(&cfg->hca, hca, sizeof(hca));
    for (d = g_devs; d; d = d->next) {
        if (strcmp(d->key_hca, hca) == 0 && d->key_gid_index == cfg->gid_index &&
            strcmp(d->key_gpu, gpu) == 0) {
            *dev_p = d;
            return GPUPORT_OK;
        }
    }
    status = GPUPORT_ERR_NOT_SUPPORTED;
    /* No GPUPORT_IB_HCA: the device the topology module finds nearest the
     * GPU first; if none of its ports will do, the choice by PCI path below. */
    if (cfg->hca.n == 0 && gpu[0]) {
        char near[64] = "", near_why[256];
        int ndev = 0;
        struct ibv_device **list = IBV(ibv_get_device_list)(&ndev);
        if (list && ndev > 0) {
            const char **names = calloc((size_t)ndev, sizeof(*names));
            int i = -1;
            for (int k = 0; names && k < ndev; k++)
                names[k] = IBV(ibv_get_device_name)(list[k]);
            if (names)
                i = gpuport_tl_nearest_device(comm, names, ndev, near_why, sizeof(near_why));
            if (i >= 0) {
                snprintf(near, sizeof(near), "%s", names[i]);
                log_info("%s", near_why);
            } else {
                log_debug("the topology names no device near GPU %s: %s", gpu, near_why);
            }
            free(names);
        }
        if (list)
            IBV(ibv_free_device_list)(list);
        if (near[0]) {
            ib_hca_list_t one; /* GPUPORT_IB_HCA=<near> */
            memset(&one, 0, sizeof(one));
            snprintf(one.entry[0].dev, sizeof(one.entry[0].dev), "%s", near);
            one.n = 1;
            status = dev_open(&one, cfg->gid_index, gpu, &d, why, len);
            if (status)
                log_info("%s, nearest GPU %s, cannot be used (%s); choosing by PCI path", near,
                         gpu, why);
            else /* cached under the configuration it answers */
                d->key_hca[0] = '\0';
        }
    }
    if (status)
        status = dev_open(&cfg->hca, cfg->gid_index, gpu, &d, why, len);
    if (status)
        return status;
    d->next = g_devs;
    g_devs = d;
    *dev_p = d;
    return GPUPORT_OK;
}

gpuport_status_t ib_dev_probe(gpuport_comm_t comm, int *link_layer_p, char *why, size_t len)
{
    ib_dev_t *d;
    gpuport_status_t status;

    pthread_mutex_lock(&g_lock);
    status = dev_get(comm, &d, why, len);
    if (!status) {
        *link_layer_p = d->link_layer;
        snprintf(why, len, "%s", d->why);
    }
    pthread_mutex_unlock(&g_lock);
    return status;
}

int ib_dev_name(gpuport_comm_t comm, char *name, size_t len)
{
    char why[512];
    ib_dev_t *d;
    int found;

    pthread_mutex_lock(&g_lock);
    found = dev_get(comm, &d, why, sizeof(why)) == GPUPORT_OK;
    if (found)
        snprintf(name, len, "%s", d->name);
    pthread_mutex_unlock(&g_lock);
    return found;
}

static void dev_put(ib_dev_t *dev)
{
    ib_dev_t **pp;

    if (--dev->refs > 0)
        return;
    for (pp = &g_devs; *pp; pp = &(*pp)->next) {
        if (*pp == dev) {
            *pp = dev->next;
            break;
        }
    }
    IBV(ibv_close_device)(dev->ctx);
    free(dev);
}

static void comm_free(ib_comm_t *ic)
{
    int rc;

    ib_mr_release_all(ic);
    if (ic->ctrl_mr && (rc = IBV(ibv_dereg_mr)(ic->ctrl_mr)) != 0)
        log_warn("ibv_dereg_mr(control segment) failed: %s", strerror(ib_err(rc)));
    if (ic->pd && (rc = IBV(ibv_dealloc_pd)(ic->pd)) != 0)
        log_warn("ibv_dealloc_pd failed: %s (a registration or QP is still open)",
                 strerror(ib_err(rc)));
    if (ic->dev)
        dev_put(ic->dev);
    free(ic->chans);
    pthread_mutex_destroy(&ic->lock);
    free(ic);
}

gpuport_status_t ib_comm_acquire(gpuport_tl_comm_t *tl, ib_comm_t **ic_p)
{
    gpuport_comm_t comm = tl->comm;
    uint32_t nchan = gpuport_tl_max_channels(comm);
    ib_comm_t *ic;
    char why[512], what[160];
    gpuport_status_t status = GPUPORT_OK;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    void *ctrl;
    size_t ctrl_size;

    pthread_mutex_lock(&g_lock);
    if (tl->priv) {
        ic = tl->priv;
        ic->nconns++;
        *ic_p = ic;
        pthread_mutex_unlock(&g_lock);
        return GPUPORT_OK;
    }
    ic = calloc(1, sizeof(*ic));
    if (!ic || !(ic->chans = calloc(nchan, sizeof(*ic->chans)))) {
        free(ic);
        pthread_mutex_unlock(&g_lock);
        log_error("out of memory for the communicator's state (%u channels)", nchan);
        return GPUPORT_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&ic->lock, NULL);
    ic->tl = tl;
    ic->comm = comm;
    status = dev_get(comm, &ic->dev, why, sizeof(why));
    if (status) {
        log_error("%s", why);
        goto err;
    }
    ic->dev->refs++;
    errno = 0;
    ic->pd = IBV(ibv_alloc_pd)(ic->dev->ctx);
    if (!ic->pd) {
        int err = ib_err(0);
        snprintf(what, sizeof(what), "device %s", ic->dev->name);
        status = ib_status(err, "ibv_alloc_pd", what);
        goto err;
    }
    /* peers add to their channels' semaphores here and write their
     * peer_status */
    if (ic->dev->atomic_cap != IBV_ATOMIC_NONE)
        access |= IBV_ACCESS_REMOTE_ATOMIC;
    gpuport_tl_ctrl(comm, &ctrl, &ctrl_size);
    errno = 0;
    ic->ctrl_mr = IBV(ibv_reg_mr)(ic->pd, ctrl, ctrl_size, access);
    if (!ic->ctrl_mr) {
        int err = ib_err(0);
        snprintf(what, sizeof(what), "control segment %p, %zu bytes, on %s", ctrl, ctrl_size,
                 ic->dev->name);
        status = ib_status(err, "ibv_reg_mr", what);
        goto err;
    }
    ic->nconns = 1;
    tl->priv = ic;
    pthread_mutex_unlock(&g_lock);
    *ic_p = ic;
    return GPUPORT_OK;

err:
    comm_free(ic);
    pthread_mutex_unlock(&g_lock);
    return status;
}

void ib_comm_release(ib_comm_t *ic)
{
    pthread_mutex_lock(&g_lock);
    if (--ic->nconns > 0) {
        pthread_mutex_unlock(&g_lock);
        return;
    }
    ic->tl->priv = NULL;
    comm_free(ic);
    pthread_mutex_unlock(&g_lock);
}
