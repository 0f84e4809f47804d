/* The cuda_ipc transport's settings; see cipc_settings.h. */
#include "transport/cuda_ipc/cipc_settings.h"

#define FIELD(f) GPUPORT_CFG_FIELD(cipc_settings_t, f)

static const char *const onoff_words[] = {"0", "1", NULL};

static const gpuport_config_var_t rows[] = {
    {"GPUPORT_CUDA_IPC_RELAY", "1", GPUPORT_CFG_ENUM, FIELD(relay), 0, 0, onoff_words,
     "cuda_ipc puts from cudaMalloc memory go by the relay: the receiver's flusher copies the "
     "source into a staging buffer, this rank's flusher copies it on into the destination, and "
     "neither names the application's context, which CUDA holds while an application thread "
     "sits in a synchronous cudaMemcpy (gets alike, the other way); 0 copies directly, one "
     "copy instead of two, and such a channel's work then waits until the cudaMemcpy returns",
     NULL},
    {"GPUPORT_CUDA_IPC_RELAY_BYTES", "4m", GPUPORT_CFG_POW2, FIELD(relay_bytes), 64ull << 10,
     1ull << 30, NULL,
     "GPU memory of the flusher's context that each relay channel stages through, in two "
     "halves: a put larger than a half goes in pieces of that size, one staged while the "
     "other is copied on",
     NULL},
};

const gpuport_settings_table_t gpuport_cuda_ipc_settings = {rows, sizeof(rows) / sizeof(rows[0]),
                                                            sizeof(cipc_settings_t)};
