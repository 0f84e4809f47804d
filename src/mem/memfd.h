/*
 * A shared-memory segment that same-host peers can map: a memfd, sized and
 * mapped here in one call. For the core's segments (the control segment,
 * gpuport_mem_alloc's blocks); any thread may call it.
 */
#ifndef GPUPORT_MEMFD_H
#define GPUPORT_MEMFD_H

#include <stddef.h>

#include "gpuport/gpuport.h"

/* Creates the memfd `name` (it shows in /proc/PID/fd), sizes it to size
 * bytes and maps it shared, read and write; *fd_p and *ptr_p on success
 * only. A failure is logged with the call, the name and the size, and its
 * status says what ran out: GPUPORT_ERR_NO_MEMORY where the kernel reports
 * memory (ENOMEM, ENOSPC, EFBIG), GPUPORT_ERR_NO_RESOURCE otherwise
 * (descriptors: EMFILE, ENFILE; or a segment refused for another reason). */
gpuport_status_t gpuport_memfd_map(const char *name, size_t size, int *fd_p, void **ptr_p);

#endif
