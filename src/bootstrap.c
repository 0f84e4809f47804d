/* Pairwise bootstrap exchange; see bootstrap.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_BOOTSTRAP
#include "bootstrap.h"

#include <string.h>

#include "log.h"

gpuport_status_t gpuport_bootstrap_exchange(const gpuport_bootstrap_t *bs, int peer, int tag,
                                            const void *mine, void *theirs, size_t bytes)
{
    gpuport_status_t status;

    if (peer == bs->rank) {
        memcpy(theirs, mine, bytes);
        return GPUPORT_OK;
    }
    if (bs->rank < peer) {
        status = bs->send(bs->ctx, peer, tag, mine, bytes);
        if (!status)
            status = bs->recv(bs->ctx, peer, tag, theirs, bytes);
    } else {
        status = bs->recv(bs->ctx, peer, tag, theirs, bytes);
        if (!status)
            status = bs->send(bs->ctx, peer, tag, mine, bytes);
    }
    if (status)
        log_error("bootstrap exchange with rank %d failed: %s", peer, gpuport_status_string(status));
    return status;
}
