/*
 * Host identity: ranks with equal ids share a host (and so may use shm or
 * CUDA IPC). Derived from the kernel's boot id and the host name, unless
 * GPUPORT_HOST_ID overrides it (tests make one machine look like several).
 */
#ifndef GPUPORT_HOSTID_H
#define GPUPORT_HOSTID_H

#include <stddef.h>
#include <stdint.h>

uint64_t gpuport_host_id(void);
/* FNV-1a, 64 bit */
uint64_t gpuport_hash64(const void *data, size_t len, uint64_t seed);

#endif
