/*
 * What the same-host transports (shm, cuda_ipc) share: mapping a peer's
 * shared memory through its file descriptor, the peer's control segment
 * (the semaphores this rank signals), the reachability rule and the check
 * of a peer-named semaphore slot. Only src/transport/<same-host>/ include
 * this.
 */
#ifndef GPUPORT_SM_H
#define GPUPORT_SM_H

#include "transport/transport.h"

/* Maps `len` bytes at `offset` of file descriptor `fd` of process `pid`
 * (rank `peer`, this process too), through /proc/PID/fd: the control segments, which
 * every rank of the host may map from the rank records alone. (Opening
 * another process's descriptor there asks for ptrace read access, which
 * Yama's ptrace_scope 1 does not restrict; pidfd_getfd asks for attach.) Returns the address of `offset` in *addr_p and the
 * mapping to unmap in *map_p / *map_len_p. */
gpuport_status_t sm_map_remote_fd(int peer, int pid, int fd, uint64_t offset, uint64_t len,
                                  void **addr_p, void **map_p, size_t *map_len_p);

/* Maps a piece of a peer's shared memory whose descriptor was passed to
 * this rank (fdpass.h): *addr_p is the piece's offset, *map_p / *map_len_p
 * what to unmap. Both refuse (GPUPORT_ERR_PEER, logged) a range beyond the
 * end of a regular file (a memfd), where a store would raise SIGBUS. */
gpuport_status_t sm_map_piece(const gpuport_fdpiece_t *piece, int peer, void **addr_p,
                              void **map_p, size_t *map_len_p);

/* 1 if the peer's region (record r: size bytes at fd_offset) lies in the
 * total bytes of its memory that this rank imported; else 0, logged naming
 * the peer and the fields (a cuda_ipc destination past them would send
 * copies into whatever this process has mapped beyond). Pure. */
int sm_region_fits(const gpuport_region_rec_t *r, uint64_t total, int peer);

/* 1 if peer is on this host and runs as this rank's user; else 0 with why. */
int sm_reachable(gpuport_comm_t comm, int peer, char *why, size_t len);

/* A peer's control segment, mapped here. */
typedef struct sm_ctrl {
    gpuport_sem_slot_t *slots;
    uint32_t nslots;
    void *map;
    size_t map_len;
} sm_ctrl_t;

/* Maps peer's control segment as its rank record describes it: refused
 * (GPUPORT_ERR_PEER, logged) where its max_channels slots do not fit its
 * ctrl_size, or ctrl_size runs past the segment's file, so that every slot
 * sm_ctrl_slot gives lies inside the mapping. */
gpuport_status_t sm_ctrl_map(gpuport_comm_t comm, int peer, sm_ctrl_t *c);
void sm_ctrl_unmap(sm_ctrl_t *c);
/* The slot of the peer's channel id, or NULL (logged) when the peer named an
 * id beyond its segment. */
gpuport_sem_slot_t *sm_ctrl_slot(const sm_ctrl_t *c, int peer, uint32_t id);

#endif
