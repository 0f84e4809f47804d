/* Test helper: a communicator's GPUPORT_TIMEOUT_MS lowered after it and its
 * channels were made.
 *
 * Creating a channel is pairwise collective, and its connection waits for
 * the peer at most GPUPORT_TIMEOUT_MS: a test that sets a short limit in
 * the environment to time one later step (destroy's wait for an answer, a
 * stuck drain) also gives its two processes only that long to reach
 * gpuport_channel_create together, which a sanitizer build on a loaded
 * machine does not always manage. Such a test creates with the
 * environment's long limit and then lowers it here, on the application
 * thread that makes every call (no other thread reads the limit). */
#ifndef GPUPORT_TEST_SHORT_TIMEOUT_H
#define GPUPORT_TEST_SHORT_TIMEOUT_H

#include "internal.h"

static inline void test_short_timeout(gpuport_comm_t comm, uint64_t ms)
{
    comm->config.timeout_ms = ms;
    comm->timeout_ns = ms * 1000000ull;
}

#endif
