/*
 * The GPUPORT_* configuration: one declarative table, the core's rows
 * (config.c) and each transport's (its ops table, gathered through the
 * registry), is the single source for parsing, docs/GUIDE.md's table, the man
 * page and gpuport_info. A bad value is an
 * error naming the variable and the accepted values, never a silent default.
 * Read once per communicator, on the thread that creates it.
 */
#ifndef GPUPORT_CONFIG_H
#define GPUPORT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "config_var.h"
#include "gpuport/gpuport.h"

/* GPUPORT_TRANSPORT: 0 is auto, else the kind (index) of a transport in
 * the transport list, whose words src/transport/registry.c defines */
#define GPUPORT_TRANSPORT_AUTO 0
extern const char *gpuport_transport_words[];

typedef enum { GPUPORT_GPU_AUTO = 0, GPUPORT_GPU_OFF, GPUPORT_GPU_ON } gpuport_gpu_mode_t;

/* The transports' settings: each built transport's structure
 * (ops->settings->size bytes), laid out one after the other by kind,
 * 8-aligned, in the configuration's tl area; tl_base says where each
 * starts. */
#define GPUPORT_CONFIG_TL_KINDS 8
#define GPUPORT_CONFIG_TL_BYTES 16384

typedef struct gpuport_config {
    int log_level;              /* GPUPORT_LOG_LEVEL */
    uint32_t log_subsys;        /* GPUPORT_LOG_SUBSYS: bit s shows subsystem s below warn */
    char log_file[1024];        /* GPUPORT_LOG_FILE, "" leaves the log on stderr */
    uint32_t fifo_size;         /* GPUPORT_FIFO_SIZE, power of two */
    int transport;              /* GPUPORT_TRANSPORT: a transport kind, or AUTO */
    uint32_t max_channels;      /* GPUPORT_MAX_CHANNELS */
    uint64_t timeout_ms;        /* GPUPORT_TIMEOUT_MS, 0 = never */
    int host_inline;            /* GPUPORT_HOST_INLINE: 0 or 1 */
    uint64_t proxy_idle_us;     /* GPUPORT_PROXY_IDLE_US */
    uint64_t proxy_sleep_max_us; /* GPUPORT_PROXY_SLEEP_MAX_US */
    uint64_t proxy_sleep_host_max_us; /* GPUPORT_PROXY_SLEEP_HOST_MAX_US */
    uint64_t proxy_sleep_scale;  /* GPUPORT_PROXY_SLEEP_SCALE */
    uint64_t proxy_idle_cpu;     /* GPUPORT_PROXY_IDLE_CPU, % of a core */
    uint32_t dev_spin;          /* GPUPORT_DEV_SPIN: device polls before pausing */
    int dev_end_copy;           /* GPUPORT_DEV_END_COPY: 0 or 1 */
    uint32_t dev_backoff_ns;    /* GPUPORT_DEV_BACKOFF_NS: longest device pause, 0 = none */
    int memory_signal;          /* GPUPORT_MEMORY_SIGNAL: 0 auto, 1 store */
    int peer_path;              /* GPUPORT_PEER_PATH: 0 auto, 1 stores, 2 proxy */
    uint64_t peer_store_max;    /* GPUPORT_PEER_STORE_MAX: bytes per calling thread */
    uint64_t host_id;           /* GPUPORT_HOST_ID, 0 = derived from the host */
    int gpu;                    /* GPUPORT_GPU, gpuport_gpu_mode_t */
    int bind;                   /* GPUPORT_BIND */
    char proxy_cpus[256];       /* GPUPORT_PROXY_CPUS, "" decides */
    char flusher_cpus[256];     /* GPUPORT_FLUSHER_CPUS, "" decides */
    uint32_t tl_base[GPUPORT_CONFIG_TL_KINDS]; /* by kind: its settings' place in tl */
    _Alignas(8) unsigned char tl[GPUPORT_CONFIG_TL_BYTES];
} gpuport_config_t;

/* Every row: the core's (config.c), then each built transport's, by kind
 * (ops->settings). i < gpuport_config_nvars(). */
size_t gpuport_config_nvars(void);
const gpuport_config_var_t *gpuport_config_var(size_t i);

/* Where var's value lives in config: a core row's field, or a transport
 * row's field inside that transport's settings. NULL for a row that is not
 * one of gpuport_config_var's. */
void *gpuport_config_field(gpuport_config_t *config, const gpuport_config_var_t *var);
/* The settings structure of transport kind in config (tl_base set by
 * gpuport_config_load). */
const void *gpuport_config_tl_settings(const gpuport_config_t *config, int kind);

/* Parses one value for a table row into the config; on error logs a message
 * naming the variable, the value and what is accepted. */
gpuport_status_t gpuport_config_parse_var(const gpuport_config_var_t *var, const char *value,
                                          gpuport_config_t *config);

/* Defaults, then each GPUPORT_* variable from the environment. An unknown
 * GPUPORT_* variable (a likely typo) is a warning naming it. */
gpuport_status_t gpuport_config_load(gpuport_config_t *config_p);

/* GPUPORT_TIMEOUT_MS for a wait without a loaded configuration (a rank
 * whose configuration failed still meets the others): the environment's
 * value, or the default where it is unset or bad (reported by
 * gpuport_config_load, not here). gpuport.h's gpuport_config_timeout_ms is
 * the checked form. */
uint64_t gpuport_config_timeout_or_default(void);

/* Writes the accepted values of a row ("power of two, 64..1048576",
 * "auto|shm|...") into buf. */
void gpuport_config_describe(const gpuport_config_var_t *var, char *buf, size_t len);

#endif
