/*
 * The exchanges of a communicator's creation (comm.c): the bootstrap's
 * allgather, ended at GPUPORT_TIMEOUT_MS where the bootstrap can
 * (allgather_timed), with one message that names the exchange and the
 * ranks that had not come. Application threads, inside
 * gpuport_comm_create only.
 */
#ifndef GPUPORT_COMM_GATHER_H
#define GPUPORT_COMM_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "gpuport/gpuport.h"

/* Every rank's `bytes` of send into recv, in rank order. timeout_ms 0, or
 * a bootstrap without allgather_timed: without limit. `what` names the
 * exchange for the messages ("the first exchange of gpuport_comm_create
 * (every rank's version header)"). A failure is logged here; after
 * GPUPORT_ERR_TIMEOUT the bootstrap serves for nothing but its destroy. */
gpuport_status_t gpuport_comm_gather(const gpuport_bootstrap_t *bs, uint64_t timeout_ms,
                                     const void *send, void *recv, size_t bytes,
                                     const char *what);

#endif
