/*
 * What the two files of libgpuport_mpi share: its error log (the core's
 * log module is not exported) and the run-time checks of the MPI and of
 * the program's bootstrap layout. Hidden, like
 * everything in the library that gpuport_mpi.h does not declare.
 */
#ifndef GPUPORT_MPI_PRIV_H
#define GPUPORT_MPI_PRIV_H

#include "gpuport/gpuport_mpi.h"

/* One line on stderr in the core log's format (subsystem word: bootstrap);
 * rank -1 until known. */
void mpi_log_error(const char *file, int line, int rank, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define mpi_error(rank, ...) mpi_log_error(__FILE__, __LINE__, (rank), __VA_ARGS__)

/* GPUPORT_ERR_VERSION (logged) when the MPI loaded in this process is of
 * another family than the one this library was built with; GPUPORT_OK when
 * they agree or either cannot be told. Allowed before MPI_Init. */
gpuport_status_t mpi_check_loaded(void);

/* GPUPORT_ERR_VERSION (logged, naming both) when a program's
 * gpuport_bootstrap_t layout is neither the one this library was built
 * with nor version 2, the one before allgather_timed. */
gpuport_status_t mpi_check_layout(uint32_t program_layout);

#endif
