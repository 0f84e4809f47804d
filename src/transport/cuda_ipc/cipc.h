/*
 * The cuda_ipc transport's own state, shared by its files: cuda_ipc.c
 * (connections, channels, operations) and cipc_vmm.c (peers' VMM memory
 * imported from descriptors). Only src/transport/cuda_ipc/ includes this.
 */
#ifndef GPUPORT_CIPC_H
#define GPUPORT_CIPC_H

#include "cuda/cudrv.h"
#include "transport/cuda_ipc/cipc_check.h"
#include "transport/cuda_ipc/cipc_settings.h"
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
    struct cipc_relay_conn *relay; /* cipc_relay.c's, made at the first relay channel */
} cipc_conn_t;

/* Per channel: the peer's semaphore in the private context, the channel's
 * signal count (written as absolute values), and the import its
 * destination lives in (NULL: legacy memory, opened by IPC handle). */
typedef struct cipc_chan {
    CUdeviceptr sem_d;
    uint64_t signals_sent;
    cipc_import_t *imp;
    uint64_t serial;           /* this connect's, unique in the process */
    struct cipc_relay *relay;  /* this side's source relays (cipc_relay.c) */
    struct cipc_serve *serve;  /* this side serves the peer's relay */
} cipc_chan_t;

/* ---- the relay of cudaMalloc sources (cipc_relay.c) ---- */
typedef struct cipc_relay cipc_relay_t;
typedef struct cipc_serve cipc_serve_t;
typedef struct cipc_relay_conn cipc_relay_conn_t;

/* What a channel's side whose source relays puts in its record's tdata:
 * its source's allocation and its staging buffer, by CUDA IPC handle. */
typedef struct cipc_relay_rec {
    uint8_t src_ipc[64];
    uint8_t stg_ipc[64];
    uint64_t src_fd_offset; /* where the source starts in its allocation */
    uint64_t src_size;
    uint64_t stg_size;      /* a power of two, 64 KiB or more */
    uint32_t relay;         /* 1: the record declares a relay */
    uint32_t pad;
} cipc_relay_rec_t;

/* chan_prepare: where this side's source is cudaMalloc memory and
 * GPUPORT_CUDA_IPC_RELAY=1, makes its staging buffer and describes both in
 * mine->tdata; else nothing. */
gpuport_status_t cipc_relay_prepare(gpuport_conn_t *conn, uint32_t id, const gpuport_region_t *src,
                                    gpuport_channel_rec_t *mine);
/* conn_open, once conn->priv is set: the connection's relay state */
gpuport_status_t cipc_relay_conn_open(gpuport_conn_t *conn);
/* chan_connect, after the channel's own set-up: takes the staging buffer
 * prepared for ch->id (this side relays), and opens the peer's source and
 * staging where its record declares a relay (this side serves). */
gpuport_status_t cipc_relay_connect(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer);
void cipc_relay_disconnect(gpuport_tl_chan_t *ch);
void cipc_relay_conn_close(gpuport_conn_t *conn);
/* 1 if ch's operations go by the relay */
int cipc_relay_on(const gpuport_tl_chan_t *ch);
/* room for another operation in ch's relay queue (always, without a relay) */
int cipc_relay_has_room(gpuport_tl_chan_t *ch);
/* A relay channel's operations, taken (GPUPORT_TRANSPORT_ASYNC) or an
 * error; the signal's value is the channel's new absolute count. */
int cipc_relay_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size);
int cipc_relay_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value);
int cipc_relay_signal(gpuport_tl_chan_t *ch, uint64_t absolute);
int cipc_relay_get(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size);
/* Proxy thread: the connection's relays and served requests moved along
 * (how much happened), and the completion of an item they posted. */
int cipc_relay_progress(gpuport_conn_t *conn);
void cipc_relay_work_done(gpuport_conn_t *conn, gpuport_status_t status);
/* cipc_relay_request_ok, what the server accepts: cipc_check.h */

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
