/* What cuda_ipc's relay accepts from its peer; see cipc_check.h. */
#include "transport/cuda_ipc/cipc_check.h"

int cipc_relay_request_ok(uint64_t seq, uint64_t served, uint64_t kind, uint64_t off,
                          uint64_t size, uint64_t stg_off, uint64_t src_size, uint64_t stg_size)
{
    return seq == served + 1 && (kind == CIPC_REQ_STAGE || kind == CIPC_REQ_UNSTAGE) && size > 0 &&
           off <= src_size && size <= src_size - off && stg_off <= stg_size &&
           size <= stg_size - stg_off;
}
