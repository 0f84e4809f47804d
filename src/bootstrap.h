/*
 * Pairwise exchanges over the communicator's bootstrap (gpuport.h's
 * gpuport_bootstrap_t), for the core and the transports: both ranks call
 * with the same tag and size. Application threads only.
 *
 * Tags: below 0x4800 the core's; from 0x4800 the transports' (each keeps
 * its own in its folder).
 */
#ifndef GPUPORT_BOOTSTRAP_H
#define GPUPORT_BOOTSTRAP_H

#include <stddef.h>

#include "gpuport/gpuport.h"

#define GPUPORT_TAG_TRANSPORT 0x4800

/* Sends `mine` to peer and receives its `theirs` (lower rank sends first,
 * so blocking sends cannot deadlock); with itself, a copy. */
gpuport_status_t gpuport_bootstrap_exchange(const gpuport_bootstrap_t *bs, int peer, int tag,
                                            const void *mine, void *theirs, size_t bytes);

#endif
