/* The ib transport's choices over recorded facts: device and port, the size
 * of a work request, the signal method and the memory-registration path;
 * see ib.h. Pure functions: the device side is in ib_dev.c and ib_mr.c. */
#include "transport/ib/ib.h"

#include <stdio.h>
#include <string.h>

/* ---- GPUPORT_IB_HCA ---- */

/* Position (1-based) of the first entry naming row, 0 if none does. */
static int hca_rank(const ib_hca_list_t *hca, const ib_port_row_t *row)
{
    for (int i = 0; i < hca->n; i++) {
        const ib_hca_entry_t *e = &hca->entry[i];
        if (strcmp(e->dev, row->dev) == 0 && (e->port == 0 || e->port == row->port))
            return i + 1;
    }
    return 0;
}

/* ---- PCI distance ---- */

/* A component of a sysfs device path that names a PCI root ("pci0000:17")
 * or function ("0000:17:00.0"); "sys", "devices" and the like do not count. */
static int pci_component(const char *c, size_t n)
{
    return (n > 3 && strncmp(c, "pci", 3) == 0) || memchr(c, ':', n) != NULL;
}

int ib_pci_affinity(const char *a, const char *b)
{
    int common = 0;

    if (!a[0] || !b[0])
        return 0;
    for (;;) {
        size_t la, lb;
        while (*a == '/')
            a++;
        while (*b == '/')
            b++;
        la = strcspn(a, "/");
        lb = strcspn(b, "/");
        if (la == 0 || la != lb || strncmp(a, b, la) != 0)
            return common;
        common += pci_component(a, la);
        a += la;
        b += lb;
    }
}

/* ---- port choice ---- */

static const char *state_name(int state)
{
    switch (state) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT (no subnet manager yet?)";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "not active";
    }
}

static const char *ll_name(int ll)
{
    return ll == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand";
}

/* NULL if row can carry the transport, else why not. */
static const char *row_unusable(const ib_port_row_t *r)
{
    if (r->iwarp)
        return "iWARP (connects through rdma_cm only, which gpuport does not use)";
    if (r->state != IBV_PORT_ACTIVE)
        return state_name(r->state);
    if (r->link_layer != IBV_LINK_LAYER_UNSPECIFIED && r->link_layer != IBV_LINK_LAYER_INFINIBAND &&
        r->link_layer != IBV_LINK_LAYER_ETHERNET)
        return "unknown link layer";
    if (r->active_mtu < IBV_MTU_256 || r->active_mtu > IBV_MTU_4096)
        return "no valid active MTU";
    if (r->link_layer != IBV_LINK_LAYER_ETHERNET && r->lid == 0)
        return "InfiniBand without a LID (is a subnet manager running?)";
    return NULL;
}

static int mtu_bytes(int mtu)
{
    return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128 << mtu : 0;
}

int ib_port_select(const ib_port_row_t *rows, int n, const ib_hca_list_t *hca,
                   const char *gpu_pci, char *why, size_t len)
{
    const ib_hca_entry_t *list = hca->entry;
    char notes[512] = "";
    size_t used = 0;
    int nlist = hca->n, best = -1, best_aff = -1, best_rank = 0, min_aff = -1;
    const char *how;

    for (int i = 0; i < n; i++) {
        const ib_port_row_t *r = &rows[i];
        const char *bad;
        int rank = nlist ? hca_rank(hca, r) : 1, aff;

        if (nlist && !rank)
            continue;
        bad = row_unusable(r);
        if (bad) {
            if (used < sizeof(notes))
                used += (size_t)snprintf(notes + used, sizeof(notes) - used, "%s%s:%u %s",
                                         used ? "; " : "", r->dev, r->port, bad);
            continue;
        }
        aff = gpu_pci ? ib_pci_affinity(r->pci, gpu_pci) : 0;
        if (min_aff < 0 || aff < min_aff)
            min_aff = aff;
        if (best < 0 || aff > best_aff || (aff == best_aff && rank < best_rank)) {
            best = i;
            best_aff = aff;
            best_rank = rank;
        }
    }
    for (int k = 0; k < nlist; k++) {
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            found = strcmp(list[k].dev, rows[i].dev) == 0 &&
                    (list[k].port == 0 || list[k].port == rows[i].port);
        if (!found && used < sizeof(notes))
            used += (size_t)snprintf(notes + used, sizeof(notes) - used,
                                     "%sGPUPORT_IB_HCA names %s%s%.0u, which does not exist",
                                     used ? "; " : "", list[k].dev, list[k].port ? ":" : "",
                                     list[k].port);
    }
    if (best < 0) {
        char devs[256] = "", text[IB_HCA_TEXT_MAX + 1];
        size_t dl = 0;
        for (int i = 0; i < n && dl < sizeof(devs); i++)
            dl += (size_t)snprintf(devs + dl, sizeof(devs) - dl, "%s%s:%u", i ? ", " : "",
                                   rows[i].dev, rows[i].port);
        ib_hca_list_format(hca, text, sizeof(text));
        snprintf(why, len, "no usable RDMA port%s%s (ports here: %s)%s%s",
                 nlist ? " among GPUPORT_IB_HCA=" : "", text, n ? devs : "none",
                 notes[0] ? ": " : "", notes);
        return -1;
    }
    if (!gpu_pci)
        how = "the first usable port%s (no GPU: this communicator is host-only)";
    else if (best_aff > min_aff)
        how = "the usable port nearest the GPU%s";
    else if (!gpu_pci[0] || !rows[best].pci[0])
        how = "the first usable port%s (the PCI position of the GPU or of the device is unknown)";
    else
        how = "the first usable port%s (none is nearer the GPU than another)";
    snprintf(why, len, "%s:%u (%s, MTU %d): ", rows[best].dev, rows[best].port,
             ll_name(rows[best].link_layer), mtu_bytes(rows[best].active_mtu));
    {
        size_t w = strlen(why);
        snprintf(why + w, len > w ? len - w : 0, how, nlist ? " in GPUPORT_IB_HCA" : "");
    }
    if (notes[0]) {
        size_t w = strlen(why);
        snprintf(why + w, len > w ? len - w : 0, "; not used: %s", notes);
    }
    return best;
}

/* ---- work request sizes ---- */

uint64_t ib_piece_max(uint64_t max_msg_sz)
{
    return max_msg_sz == 0 || max_msg_sz > IB_PIECE_LIMIT ? IB_PIECE_LIMIT : max_msg_sz;
}

uint64_t ib_put_pieces(uint64_t size, uint64_t piece_max)
{
    return size / piece_max + (size % piece_max != 0);
}

/* ---- signals ---- */

ib_signal_t ib_signal_choose(int local_atomic_cap, int remote_atomic_cap, uint8_t init_rd_atomic,
                             char *why, size_t len)
{
    if (local_atomic_cap == IBV_ATOMIC_NONE) {
        snprintf(why, len, "signals by RDMA write of the count: this device has no atomics");
        return IB_SIGNAL_WRITE;
    }
    if (remote_atomic_cap == IBV_ATOMIC_NONE) {
        snprintf(why, len, "signals by RDMA write of the count: the peer's device has no atomics");
        return IB_SIGNAL_WRITE;
    }
    if (init_rd_atomic == 0) {
        snprintf(why, len, "signals by RDMA write of the count: the QP may have no atomic "
                 "outstanding");
        return IB_SIGNAL_WRITE;
    }
    snprintf(why, len, "signals by atomic fetch-and-add");
    return IB_SIGNAL_ATOMIC;
}

/* ---- memory registration ---- */

const char *ib_mr_path_name(ib_mr_path_t path)
{
    switch (path) {
    case IB_MR_HOST: return "host memory";
    case IB_MR_DMABUF: return "dmabuf";
    case IB_MR_PEERMEM: return "peer memory";
    default: return "none";
    }
}

ib_mr_path_t ib_mr_path_choose(const ib_mr_caps_t *c, char *why, size_t len)
{
    char no_dmabuf[160];

    if (!c->device) {
        snprintf(why, len, "host memory: ibv_reg_mr");
        return IB_MR_HOST;
    }
    if (c->ibv_dmabuf && c->cu_dmabuf && !c->dmabuf_failed) {
        snprintf(why, len, "GPU memory through dmabuf (cuMemGetHandleForAddressRange and "
                 "ibv_reg_dmabuf_mr): needs no peer-memory module");
        return IB_MR_DMABUF;
    }
    if (c->dmabuf_failed)
        snprintf(no_dmabuf, sizeof(no_dmabuf), "dmabuf registration failed (logged above)");
    else if (!c->ibv_dmabuf)
        snprintf(no_dmabuf, sizeof(no_dmabuf), "this libibverbs has no ibv_reg_dmabuf_mr");
    else
        snprintf(no_dmabuf, sizeof(no_dmabuf), "no dmabuf from CUDA: %s",
                 c->cu_why && c->cu_why[0] ? c->cu_why : "unavailable");
    if (c->peermem) {
        snprintf(why, len, "GPU memory through the peer-memory module (ibv_reg_mr on the device "
                 "pointer), since %s", no_dmabuf);
        return IB_MR_PEERMEM;
    }
    snprintf(why, len, "GPU memory cannot be registered for RDMA: %s, and no peer-memory module "
             "(nvidia_peermem) is loaded; staging through pinned host memory is not implemented",
             no_dmabuf);
    return IB_MR_NONE;
}

void ib_dmabuf_range(uint64_t addr, uint64_t size, uint64_t page, uint64_t *start_p,
                     uint64_t *len_p, uint64_t *offset_p)
{
    uint64_t start = addr & ~(page - 1);
    uint64_t end = (addr + size + page - 1) & ~(page - 1);

    *start_p = start;
    *len_p = end - start;
    *offset_p = addr - start;
}
