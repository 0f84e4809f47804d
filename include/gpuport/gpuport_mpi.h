/*
 * MPI bootstrap: creates a gpuport communicator over an MPI communicator.
 * The communicator is duplicated, so gpuport's messages never mix with the
 * application's. Call from the thread that initialized MPI (or with
 * MPI_THREAD_MULTIPLE); gpuport's own threads never call MPI.
 * These functions are in libgpuport_mpi, built for one MPI: link
 * -lgpuport_mpi -lgpuport (libgpuport itself links no MPI).
 */
#ifndef GPUPORT_GPUPORT_MPI_H
#define GPUPORT_GPUPORT_MPI_H

#include <mpi.h>

#include "gpuport/gpuport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills a bootstrap over a duplicate of `comm`; gpuport_comm_create takes it over. */
GPUPORT_API gpuport_status_t gpuport_bootstrap_mpi(MPI_Comm comm, gpuport_bootstrap_t *bootstrap_p);

/* gpuport_bootstrap_mpi + gpuport_comm_create. Collective over `comm`. On
 * failure *comm_p is NULL, as after gpuport_comm_create. */
GPUPORT_API gpuport_status_t gpuport_comm_init_mpi(MPI_Comm comm, gpuport_comm_t *comm_p);

#ifdef __cplusplus
}
#endif

#endif
