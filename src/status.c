/* Status codes to text, and which codes exist. */
#include <stdint.h>

#include "gpuport/gpuport.h"
#include "util.h"

/* The one list of gpuport_status_t's codes: NULL for a value not among them. */
static const char *status_text(gpuport_status_t status)
{
    switch (status) {
    case GPUPORT_OK: return "success";
    case GPUPORT_ERR_INVALID_ARG: return "invalid argument";
    case GPUPORT_ERR_INVALID_CONFIG: return "invalid GPUPORT_* configuration value";
    case GPUPORT_ERR_OUT_OF_RANGE: return "offset or size outside the registered region";
    case GPUPORT_ERR_NOT_SUPPORTED: return "not supported";
    case GPUPORT_ERR_NO_MEMORY: return "out of memory";
    case GPUPORT_ERR_NO_RESOURCE: return "out of resources";
    case GPUPORT_ERR_BUSY: return "in use";
    case GPUPORT_ERR_AGAIN: return "resource temporarily unavailable, try again";
    case GPUPORT_ERR_TRANSPORT: return "transport failure";
    case GPUPORT_ERR_PEER: return "peer failure";
    case GPUPORT_ERR_CLOSED: return "the peer closed its side of the channel";
    case GPUPORT_ERR_TIMEOUT: return "timed out";
    case GPUPORT_ERR_VERSION:
        return "version mismatch (gpuport between ranks, MPI between program and libgpuport_mpi, "
               "or a struct layout between program and library)";
    case GPUPORT_ERR_SHUTDOWN: return "communicator is shutting down";
    case GPUPORT_ERR_INTERNAL: return "internal error";
    }
    return NULL;
}

const char *gpuport_status_string(gpuport_status_t status)
{
    const char *text = status_text(status);

    return text ? text : "unknown status";
}

int gpuport_status_is_error(int64_t word)
{
    return word < 0 && word >= INT32_MIN && status_text((gpuport_status_t)word) != NULL;
}
