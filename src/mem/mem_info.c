/*
 * gpuport_mem_info: what a registration is and which transports can carry
 * it, from the classification that gpuport_mem_register made and each
 * transport's region_ok, the check gpuport_channel_create makes too (so
 * the query and the refusal say the same). Application threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_MEM
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "layout.h"

const char *gpuport_mem_kind_string(int kind)
{
    switch (kind) {
    case GPUPORT_MEM_KIND_NONE: return "none";
    case GPUPORT_MEM_KIND_HOST: return "host";
    case GPUPORT_MEM_KIND_HOST_SHARED: return "host-shared";
    case GPUPORT_MEM_KIND_HOST_PINNED: return "host-pinned";
    case GPUPORT_MEM_KIND_DEVICE: return "device";
    case GPUPORT_MEM_KIND_DEVICE_VMM: return "device-vmm";
    case GPUPORT_MEM_KIND_MANAGED: return "managed";
    case GPUPORT_MEM_KIND_POOL: return "pool";
    case GPUPORT_MEM_KIND_POOL_EXPORTABLE: return "pool-exportable";
    default: return "?";
    }
}

int gpuport_region_carried(const gpuport_tl_comm_t *tc, const gpuport_region_t *r, int as_dst,
                         char *why, size_t len)
{
    if (len)
        why[0] = '\0';
    if (!tc->ops || !tc->ops->region_ok)
        return 1;
    return tc->ops->region_ok(r, as_dst, why, len);
}

/* One transport's verdicts, or why it carries nothing in this communicator. */
static void info_tl(gpuport_comm_t comm, int k, const gpuport_region_t *r,
                    gpuport_mem_info_tl_t *t)
{
    const gpuport_tl_comm_t *tc = &comm->tls[k];
    const char *missing = gpuport_transport_missing(k);

    snprintf(t->name, sizeof(t->name), "%s", gpuport_transport_name(k));
    if (!tc->ops) {
        snprintf(t->src_why, sizeof(t->src_why), "%s",
                 missing ? missing : "not open in this communicator");
        snprintf(t->dst_why, sizeof(t->dst_why), "%s", t->src_why);
        return;
    }
    t->src_ok = gpuport_region_carried(tc, r, 0, t->src_why, sizeof(t->src_why));
    t->dst_ok = gpuport_region_carried(tc, r, 1, t->dst_why, sizeof(t->dst_why));
}

/* A program's struct of another layout is not written (see stats.c). */
gpuport_status_t gpuport_mem_info_v(uint32_t layout, gpuport_mem_t mem,
                                    gpuport_mem_info_t *info_p)
{
    gpuport_mem_info_t info;
    int n;

    if (!mem || mem->magic != GPUPORT_MEM_MAGIC || !info_p) {
        log_error("gpuport_mem_info: mem %p (a live registration) and info_p %p must be set",
                  (void *)mem, (void *)info_p);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (gpuport_layout_check("gpuport_mem_info", "gpuport_mem_info_t", layout,
                             GPUPORT_MEM_INFO_LAYOUT))
        return GPUPORT_ERR_VERSION;
    memset(&info, 0, sizeof(info));
    info.kind = mem->region.mem_kind;
    info.device = mem->region.device;
    info.addr = (uint64_t)(uintptr_t)mem->region.ptr;
    info.size = mem->region.size;
    n = gpuport_transport_nkinds() - 1;
    if (n > GPUPORT_MEM_INFO_TRANSPORTS)
        n = GPUPORT_MEM_INFO_TRANSPORTS;
    for (int i = 0; i < n; i++)
        info_tl(mem->comm, i + 1, &mem->region, &info.tl[i]);
    info.ntransports = (uint32_t)n;
    *info_p = info;
    return GPUPORT_OK;
}
