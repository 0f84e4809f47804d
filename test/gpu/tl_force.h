/* Test helper: the transport a communicator's next channels use, as if
 * GPUPORT_TRANSPORT had named it at its creation. Every built transport is
 * open in every communicator, so one communicator can then hold channels
 * of two transports over the same registrations, as it does with peers
 * on its host and on others. Both sides must force the same one. */
#ifndef GPUPORT_TEST_TL_FORCE_H
#define GPUPORT_TEST_TL_FORCE_H

#include "gpuport/gpuport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 0, or -1 where no transport of that name is in the list. */
int test_force_transport(gpuport_comm_t comm, const char *name);

#ifdef __cplusplus
}
#endif

#endif
