/*
 * An in-process bootstrap for tests: N "ranks" are threads of one process,
 * so the whole pipeline (communicators, proxies, flushers, shm channels) runs
 * without MPI. local_run starts the threads and joins them.
 */
#ifndef GPUPORT_TEST_LOCAL_BOOTSTRAP_H
#define GPUPORT_TEST_LOCAL_BOOTSTRAP_H

#include "gpuport/gpuport.h"

typedef struct local_world local_world_t;

/* Runs fn(rank, size, bootstrap, arg) on `size` threads; returns the number
 * of threads whose fn returned non-zero. */
int local_run(int size, int (*fn)(int rank, int size, gpuport_bootstrap_t *bs, void *arg),
              void *arg);

#endif
