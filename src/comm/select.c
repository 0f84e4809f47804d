/*
 * Which transport carries a channel to a peer: the one GPUPORT_TRANSPORT
 * names, or under `auto` the reachable transport that ranks itself highest
 * for the channel's kind of memory (ops->auto_rank). Both ranks of a pair
 * ask the same transports in the same order, so a transport may agree on
 * reachability with its peer through the bootstrap (ib does).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdio.h>

#include "internal.h"

/* kinds to ask, best first: the forced one, or auto's candidates by rank */
static int candidates(gpuport_comm_t comm, int device_regions, int *kinds)
{
    int want = comm->config.transport, n = 0;

    if (want != GPUPORT_TRANSPORT_AUTO) {
        if (comm->tls[want].ops)
            kinds[n++] = want;
        return n;
    }
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        const gpuport_transport_ops_t *t = comm->tls[k].ops;
        int rank = t && t->auto_rank ? t->auto_rank(device_regions) : 0, i;
        if (rank <= 0)
            continue;
        /* insertion by rank, ties in list order */
        for (i = n; i > 0 && comm->tls[kinds[i - 1]].ops->auto_rank(device_regions) < rank; i--)
            kinds[i] = kinds[i - 1];
        kinds[i] = k;
        n++;
    }
    return n;
}

gpuport_status_t gpuport_transport_select(gpuport_comm_t comm, int peer, int device_regions,
                                          gpuport_tl_comm_t **tc_p, char *why, size_t len)
{
    int want = comm->config.transport, kinds[GPUPORT_TL_MAX_KINDS];
    int n = candidates(comm, device_regions, kinds);
    char reason[160], built[128];
    size_t used = 0;

    for (int i = 0; i < n; i++) {
        gpuport_tl_comm_t *tc = &comm->tls[kinds[i]];
        if (tc->ops->reachable(tc, peer, reason, sizeof(reason))) {
            *tc_p = tc;
            if (len)
                why[0] = '\0'; /* the refusals before this one are not a failure */
            return GPUPORT_OK;
        }
        used += (size_t)snprintf(why + used, used < len ? len - used : 0, "%s%s: %s",
                                 used ? "; " : "", tc->ops->name, reason);
    }
    gpuport_transport_built(built, sizeof(built));
    if (want != GPUPORT_TRANSPORT_AUTO && n == 0) {
        snprintf(why, len, "GPUPORT_TRANSPORT=%s is not available in this build of gpuport: %s "
                 "(built: %s)",
                 gpuport_transport_name(want), gpuport_transport_missing(want), built);
        log_error("cannot connect rank %d to rank %d: %s", comm->rank, peer, why);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    if (n == 0)
        snprintf(why, len, "no transport for %s memory is built (built: %s)",
                 device_regions ? "GPU" : "host", built);
    log_error("cannot connect rank %d to rank %d with GPUPORT_TRANSPORT=%s: %s", comm->rank, peer,
              gpuport_transport_name(want), why);
    return GPUPORT_ERR_NOT_SUPPORTED;
}
