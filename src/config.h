/*
 * The GPUPORT_* configuration: one declarative table (config.c) is the single
 * source for parsing, the README's table and gpuport_info. A bad value is an
 * error naming the variable and the accepted values, never a silent default.
 * Read once per communicator, on the thread that creates it.
 */
#ifndef GPUPORT_CONFIG_H
#define GPUPORT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "gpuport/gpuport.h"

/* GPUPORT_TRANSPORT: 0 is auto, else the kind (index) of a transport in
 * the transport list, whose words src/transport/registry.c defines */
#define GPUPORT_TRANSPORT_AUTO 0
extern const char *const gpuport_transport_words[];

typedef enum { GPUPORT_GPU_AUTO = 0, GPUPORT_GPU_OFF, GPUPORT_GPU_ON } gpuport_gpu_mode_t;

/* GPUPORT_IB_HCA and GPUPORT_SOCKET_IFNAME are parsed once, by config.c,
 * into these structures, which ib and tcp consume; nothing else parses
 * them. Their text is at most GPUPORT_LIST_TEXT_MAX characters, so they have
 * at most GPUPORT_LIST_MAX entries ("a,a,...,a"). */
#define GPUPORT_LIST_TEXT_MAX 255
#define GPUPORT_LIST_MAX 128

/* GPUPORT_IB_HCA: devices and ports, in order of preference. */
typedef struct gpuport_hca_entry {
    char dev[64]; /* an RDMA device name has at most 63 characters (IBV_SYSFS_NAME_MAX) */
    uint8_t port; /* 1..255; 0: any port of dev */
} gpuport_hca_entry_t;

typedef struct gpuport_hca_list {
    int n; /* 0: no list */
    gpuport_hca_entry_t entry[GPUPORT_LIST_MAX];
} gpuport_hca_list_t;

/* GPUPORT_SOCKET_IFNAME: interface name prefixes. */
typedef struct gpuport_if_list {
    int exclude; /* "^": the interfaces that match none of the prefixes */
    int n;       /* 0: no list */
    char prefix[GPUPORT_LIST_MAX][16]; /* an interface name has at most 15 characters */
} gpuport_if_list_t;

typedef struct gpuport_config {
    int log_level;              /* GPUPORT_LOG_LEVEL */
    uint32_t log_subsys;        /* GPUPORT_LOG_SUBSYS: bit s shows subsystem s below warn */
    char log_file[1024];        /* GPUPORT_LOG_FILE, "" leaves the log on stderr */
    uint32_t fifo_size;         /* GPUPORT_FIFO_SIZE, power of two */
    int transport;              /* GPUPORT_TRANSPORT: a transport kind, or AUTO */
    uint32_t max_channels;      /* GPUPORT_MAX_CHANNELS */
    uint64_t timeout_ms;        /* GPUPORT_TIMEOUT_MS, 0 = never */
    uint64_t shm_async_min;     /* GPUPORT_SHM_ASYNC_MIN: puts this large go to the flusher */
    uint64_t proxy_idle_us;     /* GPUPORT_PROXY_IDLE_US */
    uint64_t proxy_sleep_max_us; /* GPUPORT_PROXY_SLEEP_MAX_US */
    uint64_t proxy_sleep_host_max_us; /* GPUPORT_PROXY_SLEEP_HOST_MAX_US */
    uint64_t proxy_sleep_scale;  /* GPUPORT_PROXY_SLEEP_SCALE */
    uint64_t proxy_idle_cpu;     /* GPUPORT_PROXY_IDLE_CPU, % of a core */
    uint64_t host_id;           /* GPUPORT_HOST_ID, 0 = derived from the host */
    int gpu;                    /* GPUPORT_GPU, gpuport_gpu_mode_t */
    int bind;                   /* GPUPORT_BIND */
    char proxy_cpus[256];       /* GPUPORT_PROXY_CPUS, "" decides */
    char flusher_cpus[256];     /* GPUPORT_FLUSHER_CPUS, "" decides */
    int ib_gid_index;           /* GPUPORT_IB_GID_INDEX, -1 = chosen per port */
    gpuport_hca_list_t ib_hca;  /* GPUPORT_IB_HCA, none = nearest the GPU */
    gpuport_if_list_t socket_ifname; /* GPUPORT_SOCKET_IFNAME, none = first up non-loopback */
    uint64_t socket_timeout_ms; /* GPUPORT_SOCKET_TIMEOUT_MS */
    uint64_t socket_queue;      /* GPUPORT_SOCKET_QUEUE: operations in flight per connection */
} gpuport_config_t;

typedef enum {
    GPUPORT_CFG_UINT,   /* decimal or 0x hex, with optional k/m/g (binary) suffix */
    GPUPORT_CFG_POW2,   /* UINT that must be a power of two */
    GPUPORT_CFG_ENUM,   /* one of a list of words */
    GPUPORT_CFG_HEX64,  /* 64-bit hex identifier */
    GPUPORT_CFG_CPULIST, /* cpu list ("0-3,8") kept as text; "" is empty */
    GPUPORT_CFG_AUTO_UINT, /* "auto" (stored as -1 in an int) or a decimal min..max */
    GPUPORT_CFG_HCALIST, /* device[:port] list ("mlx5_0:1,mlx5_1"): gpuport_hca_list_t */
    GPUPORT_CFG_IFLIST, /* interface name prefixes ("eth,ib0" or "^docker,lo"): gpuport_if_list_t */
    GPUPORT_CFG_WORDSET, /* words of a list ("init,proxy" or "^tcp"), a uint32_t of bits by
                          * word; "" is every word */
    GPUPORT_CFG_PATH     /* a file name kept as text, its %h, %p and %% checked (log.h) */
} gpuport_cfg_type_t;

typedef struct gpuport_config_var {
    const char *name;
    const char *default_value;
    gpuport_cfg_type_t type;
    size_t offset;         /* field in gpuport_config_t */
    size_t field_size;     /* 4 or 8 bytes (enums are int); lists: the array's or struct's */
    uint64_t min, max;     /* UINT, POW2 and AUTO_UINT; HCALIST, IFLIST: max characters */
    const char *const *words; /* ENUM, WORDSET: NULL-terminated, value = index (WORDSET: bit) */
    const char *doc;       /* one line */
} gpuport_config_var_t;

extern const gpuport_config_var_t gpuport_config_vars[];
extern const size_t gpuport_config_nvars;

/* Parses one value for a table row into the config; on error logs a message
 * naming the variable, the value and what is accepted. */
gpuport_status_t gpuport_config_parse_var(const gpuport_config_var_t *var, const char *value,
                                          gpuport_config_t *config);

/* Defaults, then each GPUPORT_* variable from the environment. An unknown
 * GPUPORT_* variable (a likely typo) is a warning naming it. */
gpuport_status_t gpuport_config_load(gpuport_config_t *config_p);

/* A parsed list as text, in the one spelling the parser accepts for it
 * (what the variable said), for messages and keys. */
void gpuport_hca_list_format(const gpuport_hca_list_t *list, char *buf, size_t len);
void gpuport_if_list_format(const gpuport_if_list_t *list, char *buf, size_t len);

/* Writes the accepted values of a row ("power of two, 64..1048576",
 * "auto|shm|...") into buf. */
void gpuport_config_describe(const gpuport_config_var_t *var, char *buf, size_t len);

#endif
