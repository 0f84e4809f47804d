/*
 * For test_gpu_inline (C++, which cannot read the communicator's C11
 * atomics through internal.h): how many host operations their callers
 * carried out themselves (GPUPORT_HOST_INLINE).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "internal.h"

uint64_t test_inline_ops(gpuport_comm_t comm);

uint64_t test_inline_ops(gpuport_comm_t comm)
{
    return atomic_load_explicit(&comm->host_inline_ops, memory_order_relaxed);
}
