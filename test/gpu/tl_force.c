#include "tl_force.h"

#include <string.h>

#include "internal.h"

int test_force_transport(gpuport_comm_t comm, const char *name)
{
    for (int k = 0; gpuport_transport_words[k]; k++) {
        if (strcmp(gpuport_transport_words[k], name) == 0) {
            comm->config.transport = k;
            return 0;
        }
    }
    return -1;
}
