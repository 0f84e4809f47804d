/* Transport choice per peer; see transport.h. */
#include <stdio.h>

#include "build_config.h"
#include "internal.h"

static const char *const names[] = {"auto", "shm", "cuda_ipc", "ib", "tcp"};

const char *gpuport_transport_name(int kind)
{
    return kind >= 0 && kind < (int)(sizeof(names) / sizeof(names[0])) ? names[kind] : "?";
}

/* Built transports in the order `auto` prefers them: same-host ones first,
 * then tcp between hosts. ib is only ever forced (GPUPORT_TRANSPORT=ib):
 * auto_fits never picks it, as its data path has not yet run on RDMA
 * hardware. */
static const gpuport_transport_ops_t *const built[] = {
#if GPUPORT_HAVE_CUDA
    &gpuport_transport_cuda_ipc,
#endif
    &gpuport_transport_shm,
    &gpuport_transport_tcp,
#if GPUPORT_HAVE_IBVERBS
    &gpuport_transport_ib,
#endif
};
#define NBUILT (sizeof(built) / sizeof(built[0]))
#if GPUPORT_HAVE_CUDA
#define BUILT_CUDA "cuda_ipc, "
#else
#define BUILT_CUDA ""
#endif
#if GPUPORT_HAVE_IBVERBS
#define BUILT_IB ", ib"
#else
#define BUILT_IB ""
#endif
#define BUILT_NAMES BUILT_CUDA "shm, tcp" BUILT_IB

/* auto: on one host, GPU regions move by copy engine and host regions by
 * the CPU; between hosts over tcp (host memory only, which tcp's
 * chan_connect says plainly); never ib */
static int auto_fits(const gpuport_transport_ops_t *t, int device_regions)
{
    if (t->kind == GPUPORT_TRANSPORT_TCP)
        return 1;
    return device_regions ? t->kind == GPUPORT_TRANSPORT_CUDA_IPC
                          : t->kind == GPUPORT_TRANSPORT_SHM;
}

gpuport_status_t gpuport_transport_select(gpuport_comm_t comm, int peer, int device_regions,
                                          const gpuport_transport_ops_t **ops_p, char *why,
                                          size_t len)
{
    int want = comm->config.transport;
    char reason[160];
    size_t used = 0;

    for (size_t i = 0; i < NBUILT; i++) {
        if (want != GPUPORT_TRANSPORT_AUTO ? want != built[i]->kind
                                           : !auto_fits(built[i], device_regions))
            continue;
        if (built[i]->reachable(comm, peer, reason, sizeof(reason))) {
            *ops_p = built[i];
            return GPUPORT_OK;
        }
        used += (size_t)snprintf(why + used, used < len ? len - used : 0, "%s%s: %s",
                                 used ? "; " : "", built[i]->name, reason);
    }
    if (want != GPUPORT_TRANSPORT_AUTO && used == 0) {
        snprintf(why, len, "GPUPORT_TRANSPORT=%s is not available in this build of gpuport "
                 "(built: " BUILT_NAMES ")", gpuport_transport_name(want));
        log_error("cannot connect rank %d to rank %d: %s", comm->rank, peer, why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (used == 0)
        snprintf(why, len, "no transport for %s memory is built (built: " BUILT_NAMES ")",
                 device_regions ? "GPU" : "host");
    log_error("cannot connect rank %d to rank %d with GPUPORT_TRANSPORT=%s: %s", comm->rank, peer,
              gpuport_transport_name(want), why);
    return GPUPORT_ERR_NOT_SUPPORTED;
}
