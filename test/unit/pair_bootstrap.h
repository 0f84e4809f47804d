/*
 * A two-process bootstrap for tests: pair_fork() forks, and each process gets
 * a bootstrap over one end of a socketpair. Real processes exercise what
 * threads cannot: cross-memory attach and shared mappings between address
 * spaces, and a peer that dies.
 */
#ifndef GPUPORT_TEST_PAIR_BOOTSTRAP_H
#define GPUPORT_TEST_PAIR_BOOTSTRAP_H

#include <sys/types.h>

#include "gpuport/gpuport.h"

/* Returns the rank (0 parent, 1 child) and fills *bs; *child_p is the
 * child's pid in the parent, 0 in the child. */
int pair_fork(gpuport_bootstrap_t *bs, pid_t *child_p);

/* Parent: waits for the child and returns 0 if it exited with status 0. */
int pair_join(pid_t child);

#endif
