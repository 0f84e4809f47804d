/**
 * @file gpuport_mpi.h
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
 * that calls gpuport_comm_init_mpi by address, as (gpuport_comm_init_mpi)(...).
 * gpuport_bootstrap_mpi also passes the program's gpuport_bootstrap_t
 * layout (GPUPORT_BOOTSTRAP_LAYOUT, gpuport.h), which the library checks
 * before it writes the struct.
 */
#ifndef GPUPORT_GPUPORT_MPI_H
#define GPUPORT_GPUPORT_MPI_H

#include <stdint.h>

#include <mpi.h>

#include "gpuport/gpuport.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @name MPI tags
 * An MPI as a 32-bit tag: family in bits 24-31, then major, minor and
 * release, 8 bits each.
 * @{ */
#define GPUPORT_MPI_FAMILY_OTHER 0   /**< neither of the two below: never compared */
#define GPUPORT_MPI_FAMILY_OPENMPI 1 /**< Open MPI */
#define GPUPORT_MPI_FAMILY_MPICH 2   /**< MPICH and its ABI family */
/** The tag of an MPI of `family` (GPUPORT_MPI_FAMILY_*) and version major.minor.release. */
#define GPUPORT_MPI_TAG_MAKE(family, major, minor, release)                                     \
    ((uint32_t)(family) << 24 | ((uint32_t)(major) & 0xffu) << 16 |                             \
     ((uint32_t)(minor) & 0xffu) << 8 | ((uint32_t)(release) & 0xffu))

/** The tag of the mpi.h included above. MPICH_NUMVERSION is
 *  MAJOR * 10^7 + MINOR * 10^5 + REVISION * 10^3 + release type and patch. */
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

/** @} */

/**
 * Compares a program's MPI tag with the MPI this libgpuport_mpi was built
 * with. Touches no MPI; allowed before MPI_Init. Local; any thread.
 * @param program_tag GPUPORT_MPI_TAG of the program's mpi.h
 * @retval GPUPORT_OK the families agree, or either is "other"
 * @retval GPUPORT_ERR_VERSION different families, or a family this library does not
 *         know (the message names both)
 */
GPUPORT_API gpuport_status_t gpuport_mpi_check(uint32_t program_tag);

/** The entry point of gpuport_bootstrap_mpi; `layout` is GPUPORT_BOOTSTRAP_LAYOUT. */
GPUPORT_API gpuport_status_t gpuport_bootstrap_mpi_v(uint32_t layout, MPI_Comm comm,
                                                     gpuport_bootstrap_t *bootstrap_p);

/**
 * Fills a bootstrap over a duplicate of `comm` (a macro: the MPI check first,
 * then gpuport_bootstrap_mpi_v with this header's layout);
 * gpuport_comm_create takes it over, and frees the duplicate with it.
 *
 * Collective over `comm`: the duplicate (MPI_Comm_idup), then the node
 * split (local_rank and local_size: the ranks with this rank's
 * MPI_Get_processor_name, found by an allgather on the duplicate, as
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) would find them, which has no
 * nonblocking form). Each ends at GPUPORT_TIMEOUT_MS
 * (gpuport_config_timeout_ms; 0: no limit) with GPUPORT_ERR_TIMEOUT and a
 * message naming the step, and in the node split the ranks that had not
 * come (all of them to rank 0; whether rank 0 had, to the others: the
 * bootstrap's allgather_timed tells the same in gpuport_comm_create). The
 * duplicate cannot say who is missing: gpuport sends nothing of its own on
 * the application's communicator. MPI cannot cancel a collective, so after
 * a timeout in the duplicate it stays pending on `comm` and matches the
 * next collective that each missing rank starts there: those ranks must
 * call gpuport_bootstrap_mpi (or gpuport_comm_init_mpi) before any other
 * collective on `comm`; that call completes it and then times out in its
 * next step. A set-up call.
 *
 * @param comm an MPI communicator of this process; MPI initialized
 * @param[out] bootstrap_p the bootstrap
 * @retval GPUPORT_OK filled
 * @retval GPUPORT_ERR_TIMEOUT a rank did not reach the duplicate or the node split within
 *         GPUPORT_TIMEOUT_MS
 * @retval GPUPORT_ERR_INVALID_CONFIG GPUPORT_TIMEOUT_MS is not valid
 * @retval GPUPORT_ERR_VERSION the program's MPI is of another family than this
 *         library's (compiled or loaded), or the program was built with another
 *         gpuport_bootstrap_t layout than this one or version 2 (which is written
 *         up to its end): nothing is written
 * @retval GPUPORT_ERR_INVALID_ARG bootstrap_p NULL, MPI not initialized, or comm is
 *         MPI_COMM_NULL
 * @retval GPUPORT_ERR_NO_MEMORY the bootstrap's state could not be allocated
 * @retval GPUPORT_ERR_PEER an MPI call failed (its error string is logged)
 */
#define gpuport_bootstrap_mpi(comm, bootstrap_p)                                                \
    (gpuport_mpi_check(GPUPORT_MPI_TAG) != GPUPORT_OK                                           \
         ? GPUPORT_ERR_VERSION                                                                  \
         : gpuport_bootstrap_mpi_v(GPUPORT_BOOTSTRAP_LAYOUT, (comm), (bootstrap_p)))

/**
 * gpuport_bootstrap_mpi, then gpuport_comm_create. Called through the macro
 * of the same name (the MPI check first); the function itself is exported
 * for callers by address. On failure *comm_p is NULL, as after
 * gpuport_comm_create.
 *
 * Collective over `comm`, and so is its failure. A set-up call. Every
 * step ends at GPUPORT_TIMEOUT_MS (0: no limit): a rank that does not
 * call, or calls too late, fails every rank that did with
 * GPUPORT_ERR_TIMEOUT (see both calls for what is left pending).
 *
 * @param comm an MPI communicator of this process; MPI initialized
 * @param[out] comm_p the communicator
 * @retval GPUPORT_OK the communicator is ready on every rank
 * @retval GPUPORT_ERR_TIMEOUT a rank did not reach one of the steps within
 *         GPUPORT_TIMEOUT_MS
 * @retval GPUPORT_ERR_INVALID_ARG comm_p NULL, or as gpuport_bootstrap_mpi
 * @retval other as gpuport_bootstrap_mpi and gpuport_comm_create
 */
GPUPORT_API gpuport_status_t gpuport_comm_init_mpi(MPI_Comm comm, gpuport_comm_t *comm_p);

/** The MPI check, then gpuport_comm_init_mpi; *comm_p is NULL after a refusal too. */
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
/** gpuport_comm_init_mpi, the MPI check first (see the function). */
#define gpuport_comm_init_mpi(comm, comm_p)                                                     \
    gpuport_comm_init_mpi_tagged(GPUPORT_MPI_TAG, (comm), (comm_p))

#ifdef __cplusplus
}
#endif

#endif
