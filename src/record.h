/*
 * Fixed-width, versioned records exchanged through the bootstrap. Every
 * record starts with a header naming the library version and the record's
 * type and size; a record from another version is rejected with an error
 * that names both versions and the peer.
 */
#ifndef GPUPORT_RECORD_H
#define GPUPORT_RECORD_H

#include <stdint.h>

#include "gpuport/gpuport.h"

#define GPUPORT_RECORD_MAGIC 0x54505047u /* "GPPT" */
/* Bumped whenever any record's layout changes. */
#define GPUPORT_RECORD_LAYOUT 8

/* The core's record types. 3 was ib's QP record, before transports
 * declared their own. */
typedef enum {
    GPUPORT_REC_PROC = 1,    /* one per rank at communicator creation */
    GPUPORT_REC_CHANNEL = 2, /* one per side at channel creation */
    /* in place of a rank record's header: this rank could not set up its
     * side of the communicator; `size` holds the negated gpuport_status_t */
    GPUPORT_REC_PROC_FAILED = 4
} gpuport_rec_type_t;
/* The type of record `id` (1..255) of transport kind (1..): each
 * transport numbers its own records (tl_core.h, ops->records) in a range
 * of its kind's, above the core's. */
#define GPUPORT_REC_TL_TYPE(kind, id) ((uint16_t)(0x100u * (unsigned)(kind) + (id)))

typedef struct gpuport_rec_header {
    uint32_t magic;
    uint16_t version_major;
    uint16_t version_minor;
    uint16_t version_patch;
    uint16_t layout;
    uint16_t type;
    uint16_t size; /* whole record, header included */
} gpuport_rec_header_t;

/* A transport's part of a rank record (transports read it through
 * tl_core.h's gpuport_tl_blob). size 0: the transport wrote none. data is
 * 8-byte aligned because transports cast it to their own structs, which hold
 * uint64_t fields (tcp_rec_t). */
#define GPUPORT_TL_BLOB_MAX 56
#define GPUPORT_REC_TL_KINDS 8
typedef struct gpuport_tl_blob {
    uint16_t version;
    uint16_t size;
    uint32_t reserved;
    _Alignas(8) uint8_t data[GPUPORT_TL_BLOB_MAX];
} gpuport_tl_blob_t;

/* Per rank, allgathered at communicator creation. */
typedef struct gpuport_proc_rec {
    gpuport_rec_header_t hdr;
    int32_t rank;
    int32_t pid;
    uint64_t host_id;
    int32_t ctrl_fd;      /* memfd of the control segment (inbound semaphores) */
    uint32_t max_channels;
    uint64_t ctrl_size;
    uint32_t uid;
    uint32_t features;    /* GPUPORT_FEATURE_* */
    int32_t gpu;          /* CUDA ordinal of the communicator's GPU, -1 if none */
    uint32_t sock_serial; /* names this rank's descriptor socket (fdpass.h) */
    char hostname[64];
    /* each transport's own part, by kind, versioned by the transport */
    gpuport_tl_blob_t tl[GPUPORT_REC_TL_KINDS];
} gpuport_proc_rec_t;

#define GPUPORT_FEATURE_CMA 0x1u /* peers may process_vm_writev into this rank */

typedef enum {
    GPUPORT_REGION_NONE = 0,
    GPUPORT_REGION_HOST = 1,        /* private host memory: reachable by CMA */
    GPUPORT_REGION_HOST_SHARED = 2, /* memfd-backed host memory: mappable */
    GPUPORT_REGION_DEVICE = 3,      /* GPU memory: a CUDA IPC handle */
    GPUPORT_REGION_DEVICE_VMM = 4,  /* GPU memory made with the VMM API (gpuport_mem_alloc_device
                                     * or the application's cuMemCreate + cuMemMap): mapped for
                                     * the device, so every context on it (the flusher's too)
                                     * reaches it; shared by descriptor, not by CUDA IPC */
    GPUPORT_REGION_DEVICE_POOL = 5  /* GPU memory from a stream-ordered pool (cudaMallocAsync,
                                     * cudaMallocFromPoolAsync): mapped for the device like VMM
                                     * memory; an exportable pool is shared by its descriptor
                                     * and the allocation's export data */
} gpuport_region_kind_t;

typedef struct gpuport_region_rec {
    uint32_t kind;
    uint32_t npieces;   /* descriptors passed at channel creation (fdpass.h): the memfd of
                         * HOST_SHARED memory, one per allocation of DEVICE_VMM memory, the
                         * pool's of exportable DEVICE_POOL memory */
    uint64_t addr;      /* owner's virtual address */
    uint64_t size;
    uint64_t fd_offset; /* where the region starts: in the pieces mapped one after the other
                         * (HOST_SHARED, DEVICE_VMM), in the IPC allocation (DEVICE), in the
                         * pool allocation (DEVICE_POOL) */
    uint64_t serial;    /* the owner's registration: one serial, one memory */
    uint64_t pool;      /* DEVICE_POOL: names the owner's pool (its handle's value), so that a
                         * peer imports each pool once */
    unsigned char ipc[64]; /* DEVICE: CUipcMemHandle of the allocation; DEVICE_POOL:
                            * CUmemPoolPtrExportData of the allocation */
} gpuport_region_rec_t;

/* Exchanged by the two sides of a channel at creation. */
/* A channel record's chan_kind: both sides must create the same kind. */
enum { GPUPORT_CHAN_KIND_PORT = 0, GPUPORT_CHAN_KIND_MEMORY = 1 };
/* A memory channel's kind_flags: the sender's GPU adds atomically in the
 * receiver's GPU memory (the same GPU, or peers with native atomics) */
#define GPUPORT_MC_ATOMICS 1u

typedef struct gpuport_channel_rec {
    gpuport_rec_header_t hdr;
    int32_t status;       /* the sender's local result so far */
    uint32_t transport;   /* its transport's kind (transport.h) */
    uint32_t channel_id;  /* sender's id: its inbound semaphore index */
    uint32_t fdsock_ok;   /* 1: the sender listens for descriptors (fdpass.h) */
    uint32_t chan_kind;   /* GPUPORT_CHAN_KIND_*: what the sender creates */
    uint32_t kind_flags;  /* the kind's: GPUPORT_MC_ATOMICS for a memory channel */
    gpuport_region_rec_t dst; /* where the receiver's puts land */
    char why[128];        /* the sender's error text when status != OK */
    uint8_t tdata[192];   /* the transport's own (chan_prepare), e.g. memory keys */
} gpuport_channel_rec_t;

void gpuport_record_header_init(gpuport_rec_header_t *hdr, uint16_t type, uint16_t size);

/* GPUPORT_OK, or GPUPORT_ERR_VERSION (logged, naming versions and peer). */
gpuport_status_t gpuport_record_check(const gpuport_rec_header_t *hdr, uint16_t type,
                                      uint16_t size, int peer);
/* The same, naming the record expected ("ib QP record") when the type or
 * size differs; name NULL: none. */
gpuport_status_t gpuport_record_check_named(const gpuport_rec_header_t *hdr, uint16_t type,
                                            uint16_t size, const char *name, int peer);

#endif
