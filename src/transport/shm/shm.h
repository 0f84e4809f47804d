/*
 * shm transport: ranks on one host, host memory. The proxy (or, for long
 * copies, the flusher) writes straight into the peer's memory: through a
 * shared mapping when the peer's region came from gpuport_mem_alloc, through
 * process_vm_writev (cross-memory attach) when it is private memory such as
 * malloc's. Signals are atomic increments in the peer's control segment.
 */
#ifndef GPUPORT_SHM_H
#define GPUPORT_SHM_H

#include "internal.h"

/* Maps `len` bytes at `offset` of file descriptor `fd` of process `pid`
 * (this process too). Returns the address of `offset` in *addr_p and the
 * mapping to unmap in *map_p / *map_len_p. */
gpuport_status_t shm_map_remote_fd(int pid, int fd, uint64_t offset, uint64_t len, void **addr_p,
                                   void **map_p, size_t *map_len_p);

#endif
