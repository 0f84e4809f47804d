/*
 * The cuda_ipc transport's own state, shared by its files: cuda_ipc.c
 * (connections, channels, operations) and cipc_vmm.c (peers' VMM memory
 * imported from descriptors). Only src/transport/cuda_ipc/ includes this.
 */
#ifndef GPUPORT_CIPC_H
#define GPUPORT_CIPC_H

#include "cuda/cudrv.h"
#include "transport/sm/sm.h"

/* A peer's VMM region mapped here, or its pool allocation imported here:
 * once per region (the peer's registration serial), shared by every
 * channel whose destination it is; undone when the last of them goes. */
typedef struct cipc_import {
    struct cipc_import *next;
    uint64_t serial;
    CUdeviceptr va;     /* VMM: the pieces, one after the other; pool: the allocation */
    size_t len;
    uint64_t *sizes;    /* each piece's mapping, to unmap one by one */
    uint32_t npieces, mapped;
    int pool;           /* a pool allocation (cipc_pool.c), freed rather than unmapped */
    uint64_t pool_id;   /* pool: the peer's name for its pool, and the allocation's export */
    unsigned char export_data[64]; /* data: another region in it shares the import */
    int refs;
} cipc_import_t;

/* A peer's stream-ordered pool, imported once per connection. */
typedef struct cipc_pool {
    struct cipc_pool *next;
    uint64_t id;        /* the peer's name for it (its region records' pool) */
    CUmemoryPool pool;
} cipc_pool_t;

typedef struct cipc_conn {
    sm_ctrl_t ctrl;          /* the peer's control segment, mapped here */
    CUdeviceptr ctrl_d;      /* the same, in the private context */
    int registered;
    cipc_import_t *imports;  /* the peer's regions mapped here */
    cipc_pool_t *pools;      /* the peer's pools imported here */
} cipc_conn_t;

/* Per channel: the peer's semaphore in the private context, the channel's
 * signal count (written as absolute values), and the import its
 * destination lives in (NULL: legacy memory, opened by IPC handle). */
typedef struct cipc_chan {
    CUdeviceptr sem_d;
    uint64_t signals_sent;
    cipc_import_t *imp;
} cipc_chan_t;

/* Maps the peer's VMM destination (ch->dst.rec, descriptors in
 * ch->dst_pieces) for this rank's GPU, or takes the mapping another
 * channel made of the same region; sets ch->dst.base. */
gpuport_status_t cipc_vmm_import(gpuport_tl_chan_t *ch, cipc_import_t **imp_p);
void cipc_vmm_release(gpuport_conn_t *conn, cipc_import_t *imp);
/* Every import of the connection, at its close. */
void cipc_vmm_release_all(gpuport_conn_t *conn);

/* Imports the peer's pool destination (ch->dst.rec: its pool, export data
 * and offset; the pool's descriptor in ch->dst_pieces the first time), or
 * takes the import another channel made of the same region; sets
 * ch->dst.base. Released through cipc_vmm_release like a VMM import. */
gpuport_status_t cipc_pool_import(gpuport_tl_chan_t *ch, cipc_import_t **imp_p);
/* Frees an imported pool allocation (its import's last user is gone);
 * called by cipc_vmm.c with the flusher's context current. */
void cipc_pool_unimport(cipc_import_t *imp);
/* Every pool imported over the connection, at its close, after its
 * allocations. */
void cipc_pools_release(gpuport_conn_t *conn);

#endif
