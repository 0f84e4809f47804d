/*
 * Placement of the proxy and flusher threads: the only module that includes
 * hwloc. gpuport_place() (topology_place.c) is a pure decision over a
 * topology (the machine's, or a synthetic one from XML in tests);
 * gpuport_topology_* (topology.c) load the machine's and bind threads.
 * Application threads only, at communicator creation; the proxy and
 * flusher bind themselves with the cores decided.
 */
#ifndef GPUPORT_TOPOLOGY_H
#define GPUPORT_TOPOLOGY_H

#include <stddef.h>

#include "gpuport/gpuport.h"

typedef struct gpuport_topology gpuport_topology_t;

/* How local the chosen cores are, best first. */
typedef enum {
    GPUPORT_PLACE_OVERRIDE = 0, /* GPUPORT_PROXY_CPUS / GPUPORT_FLUSHER_CPUS */
    GPUPORT_PLACE_DEVICE = 1,   /* cores local to the GPU (and NIC) */
    GPUPORT_PLACE_NUMA = 2,     /* the device's NUMA node, not its own cores */
    GPUPORT_PLACE_PROCESS = 3,  /* no device: inside the process's own binding */
    GPUPORT_PLACE_NONE = 4      /* left unbound (GPUPORT_BIND=0, or no usable core) */
} gpuport_place_level_t;

typedef struct gpuport_place_request {
    const char *gpu_bus_id;  /* "0000:3b:00.0" style, or NULL: no GPU */
    const char *nic_name;    /* OS device name ("mlx5_0"), or NULL */
    int local_rank;          /* among the ranks of this host */
    int local_size;
    const char *allowed;     /* the process's cpuset as a list ("0-15,32"), or NULL: all */
    int app_cpu;             /* PU the application thread runs on, -1 unknown */
    const char *proxy_cpus;  /* GPUPORT_PROXY_CPUS: one PU per local rank, "" none */
    const char *flusher_cpus; /* GPUPORT_FLUSHER_CPUS, likewise */
    int bind;                /* GPUPORT_BIND */
} gpuport_place_request_t;

typedef struct gpuport_placement {
    int proxy_cpu;   /* OS index of the PU, -1: unbound */
    int flusher_cpu; /* OS index of the PU, -1: unbound */
    int level;       /* gpuport_place_level_t */
    char why[256];   /* one line: what was chosen and why (logged at info or warn) */
} gpuport_placement_t;

/* Of the OS devices names[0..n) (RDMA devices such as "mlx5_0"), the index of
 * the one nearest the GPU with PCI bus id gpu_bus_id: the shortest path
 * through their common ancestor in the topology, the earlier name on a tie;
 * names not in the topology are skipped. -1 when the GPU or none of the
 * names is found. why says what was chosen and why. */
int gpuport_topology_nearest_device(gpuport_topology_t *topo, const char *gpu_bus_id,
                                    const char *const *names, int n, char *why, size_t len);

/* The machine's topology (with PCI and OS devices), or NULL with why. */
gpuport_topology_t *gpuport_topology_load(char *why, size_t len);
/* A topology from an hwloc XML file (tests, gpuport_info -t). */
gpuport_topology_t *gpuport_topology_load_xml(const char *path, char *why, size_t len);
void gpuport_topology_free(gpuport_topology_t *topo);

/*
 * Decides the cores. Rules, in order: overrides, validated (fewer entries
 * than local ranks, a PU that does not exist, or this rank's own PU outside
 * `allowed` is GPUPORT_ERR_INVALID_CONFIG naming the variable; other ranks'
 * entries may lie in their own cpusets); else whole cores local to the GPU
 * (and NIC, where the two share cores) inside `allowed`, one PU each: local
 * rank r takes the r-th pair of the cores that suit it, so ranks of one
 * region never share a core, and cores of overridden threads are left out;
 * a thread that would land on app_cpu's core moves to a spare core past
 * every rank's pair, else to another PU of that core; else the GPU's NUMA
 * node. Without a GPU, or with one missing from the topology or hung on the
 * whole machine: the NIC's cores; else (a GPU was named) the application
 * thread's NUMA node. Else `allowed`; else unbound. Fewer suitable cores
 * than threads shares cores, then PUs, with a warning in why. bind == 0:
 * unbound.
 */
gpuport_status_t gpuport_place(gpuport_topology_t *topo, const gpuport_place_request_t *req,
                               gpuport_placement_t *out_p);

/* Binds the calling thread to one PU; GPUPORT_ERR_NOT_SUPPORTED with a log
 * line when the system refuses. cpu < 0 does nothing. */
gpuport_status_t gpuport_topology_bind_self(gpuport_topology_t *topo, int cpu);

/* The PU the calling thread runs on, -1 if unknown. */
int gpuport_topology_current_cpu(gpuport_topology_t *topo);

/* The calling process's binding as a cpu list, for the request's `allowed`;
 * -1 if unknown or longer than len. */
int gpuport_topology_process_cpus(gpuport_topology_t *topo, char *buf, size_t len);

/* Writes a description for gpuport_info: packages, NUMA nodes with their
 * cores, GPUs (CUDA devices by PCI bus id) and NICs with their local cores,
 * one per line after a count ("2 packages, 2 NUMA nodes, 32 cores, 64 PUs,
 * 8 GPUs, 2 NICs"); truncated to len. */
void gpuport_topology_describe(gpuport_topology_t *topo, char *buf, size_t len);

/* Most entries a cpu list may expand to (GPUPORT_*_CPUS). */
#define GPUPORT_CPULIST_MAX 4096

/* Parses a cpu list ("0-3,8,10-11", in any order, no spaces; "" is empty)
 * into at most max OS indexes, in list order; cpus may be NULL to only
 * check and count. Returns the count, or -1 with why on a malformed list. */
int gpuport_cpulist_parse(const char *list, int *cpus, int max, char *why, size_t len);

const char *gpuport_place_level_name(int level);

/* The PCI bus id of the topology's n-th GPU (in PCI order) into bus; -1 if
 * there are not that many. For tools: the library asks the CUDA driver. */
int gpuport_topology_gpu(gpuport_topology_t *topo, int n, char *bus, size_t len);

#endif
