/*
 * MPI bootstrap: creates a gpuport communicator over an MPI communicator.
 * The communicator is duplicated, so gpuport's messages never mix with the
 * application's. Call from the thread that initialized MPI (or with
 * MPI_THREAD_MULTIPLE); gpuport's own threads never call MPI.
 * These functions are in libgpuport_mpi, built for one MPI: link
 * -lgpuport_mpi -lgpuport (libgpuport itself links no MPI).
 *
 * Which MPI. An MPI_Comm is a pointer in Open MPI and an int in MPICH (and
 * the MPIs of its ABI family), so a program compiled with one MPI's mpi.h
 * hands a libgpuport_mpi built with the other a handle that it misreads.
 * The calls below are therefore macros: each first passes gpuport_mpi_check
 * the tag of the mpi.h that the program is compiled with (GPUPORT_MPI_TAG),
 * and a program and library of different families fail there, before the
 * handle is used, with GPUPORT_ERR_VERSION and a message naming both. Only
 * the family is compared: within one, the handle's type is the same in
 * every version. The library also compares the MPI loaded in the process
 * (MPI_Get_library_version) with its own, which catches the callers that
 * the macros miss: a program built against an older gpuport_mpi.h, or one
 * that calls the functions by address, as (gpuport_comm_init_mpi)(...).
 */
#ifndef GPUPORT_GPUPORT_MPI_H
#define GPUPORT_GPUPORT_MPI_H

#include <stdint.h>

#include <mpi.h>

#include "gpuport/gpuport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An MPI as a 32-bit tag: family in bits 24-31, then major, minor and
 * release, 8 bits each. */
#define GPUPORT_MPI_FAMILY_OTHER 0 /* neither of the two below: never compared */
#define GPUPORT_MPI_FAMILY_OPENMPI 1
#define GPUPORT_MPI_FAMILY_MPICH 2 /* MPICH and its ABI family */
#define GPUPORT_MPI_TAG_MAKE(family, major, minor, release)                                     \
    ((uint32_t)(family) << 24 | ((uint32_t)(major) & 0xffu) << 16 |                             \
     ((uint32_t)(minor) & 0xffu) << 8 | ((uint32_t)(release) & 0xffu))

/* The tag of the mpi.h included above. MPICH_NUMVERSION is
 * MAJOR * 10^7 + MINOR * 10^5 + REVISION * 10^3 + release type and patch. */
#if defined(OMPI_MAJOR_VERSION)
#define GPUPORT_MPI_TAG                                                                         \
    GPUPORT_MPI_TAG_MAKE(GPUPORT_MPI_FAMILY_OPENMPI, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,    \
                         OMPI_RELEASE_VERSION)
#elif defined(MPICH_NUMVERSION)
#define GPUPORT_MPI_TAG                                                                         \
    GPUPORT_MPI_TAG_MAKE(GPUPORT_MPI_FAMILY_MPICH, MPICH_NUMVERSION / 10000000,                 \
                         MPICH_NUMVERSION / 100000 % 100, MPICH_NUMVERSION / 1000 % 100)
#else
#define GPUPORT_MPI_TAG                                                                         \
    GPUPORT_MPI_TAG_MAKE(GPUPORT_MPI_FAMILY_OTHER, MPI_VERSION, MPI_SUBVERSION, 0)
#endif

/* Compares a program's tag with the MPI this libgpuport_mpi was built with.
 * GPUPORT_OK when the families agree or either is "other"; otherwise
 * GPUPORT_ERR_VERSION, with a message naming both (also for a tag of a
 * family that this library does not know). Touches no MPI. */
GPUPORT_API gpuport_status_t gpuport_mpi_check(uint32_t program_tag);

/* Fills a bootstrap over a duplicate of `comm`; gpuport_comm_create takes it over. */
GPUPORT_API gpuport_status_t gpuport_bootstrap_mpi(MPI_Comm comm, gpuport_bootstrap_t *bootstrap_p);

/* gpuport_bootstrap_mpi + gpuport_comm_create. Collective over `comm`. On
 * failure *comm_p is NULL, as after gpuport_comm_create. */
GPUPORT_API gpuport_status_t gpuport_comm_init_mpi(MPI_Comm comm, gpuport_comm_t *comm_p);

/* The calls, checked first (see the top of this file). */
#define gpuport_bootstrap_mpi(comm, bootstrap_p)                                                \
    (gpuport_mpi_check(GPUPORT_MPI_TAG) != GPUPORT_OK                                           \
         ? GPUPORT_ERR_VERSION                                                                  \
         : (gpuport_bootstrap_mpi)((comm), (bootstrap_p)))
/* the check first; *comm_p is NULL after a refusal too */
static inline gpuport_status_t gpuport_comm_init_mpi_tagged(uint32_t program_tag, MPI_Comm comm,
                                                            gpuport_comm_t *comm_p)
{
    if (gpuport_mpi_check(program_tag) != GPUPORT_OK) {
        if (comm_p)
            *comm_p = NULL;
        return GPUPORT_ERR_VERSION;
    }
    return (gpuport_comm_init_mpi)(comm, comm_p);
}
#define gpuport_comm_init_mpi(comm, comm_p)                                                     \
    gpuport_comm_init_mpi_tagged(GPUPORT_MPI_TAG, (comm), (comm_p))

#ifdef __cplusplus
}
#endif

#endif
