/*
 * The cuda_ipc transport's GPUPORT_* settings: GPUPORT_CUDA_IPC_RELAY and
 * GPUPORT_CUDA_IPC_RELAY_BYTES (the relay of cudaMalloc sources,
 * cipc_relay.c). Compiled into every build, as every transport's settings,
 * so that the variables are known where CUDA is not.
 */
#ifndef GPUPORT_CIPC_SETTINGS_H
#define GPUPORT_CIPC_SETTINGS_H

#include <stdint.h>

#include "transport/tl_core.h"

typedef struct cipc_settings {
    int relay;            /* GPUPORT_CUDA_IPC_RELAY: 0 or 1 */
    uint64_t relay_bytes; /* GPUPORT_CUDA_IPC_RELAY_BYTES: a relay channel's staging */
} cipc_settings_t;

extern const gpuport_settings_table_t gpuport_cuda_ipc_settings;

#endif
