/*
 * NVSHMEM's start for the peer programs (the _nvshmem.cu of
 * workloads/peers/): every MPI rank the PE of its number, on the GPU
 * peer_gpu() made current.
 * Two bootstraps, both driven by MPI:
 * - mpi: nvshmemx_init_attr(NVSHMEMX_INIT_WITH_MPI_COMM) on MPI_COMM_WORLD,
 *   through the wheel's MPI plugin (nvshmem_bootstrap_mpi.so.3). The plugin
 *   is built against one MPI's libmpi, so scripts/build-peers.sh makes it
 *   the default (-DPEER_NVSHMEM_MPI=1) only where this MPI provides the
 *   library the plugin needs;
 * - uid: rank 0's nvshmemx_get_uniqueid, MPI_Bcast, then
 *   NVSHMEMX_INIT_WITH_UNIQUEID (the uid plugin's sockets; no MPI ABI).
 * --bootstrap mpi|uid overrides the build's choice. NVSHMEM exits the
 * process when its start fails (nvshmemx_init_attr's NONZERO_EXIT), so a
 * failed start shows as a rank that exited 255, which mpirun reports.
 * Plugins are found through the programs' DT_RPATH (build-peers.sh).
 */
#ifndef GPUPORT_PEER_NVSHMEM_H
#define GPUPORT_PEER_NVSHMEM_H

#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <string.h>

#include "peer.h"

#ifndef PEER_NVSHMEM_MPI
#define PEER_NVSHMEM_MPI 0
#endif
#if PEER_NVSHMEM_MPI
#define PEER_NVSHMEM_DEFAULT "mpi"
#else
#define PEER_NVSHMEM_DEFAULT "uid"
#endif
#define PEER_NVSHMEM_USAGE                                                                         \
    "  --bootstrap B NVSHMEM's bootstrap: mpi or uid (default " PEER_NVSHMEM_DEFAULT ")\n"

/* --bootstrap B taken out of argv (after wl_init): "mpi" or "uid"; NULL
 * after a message (rank 0) on a bad value. */
static inline const char *peer_nvshmem_option(int *argc, char **argv)
{
    const char *b = PEER_NVSHMEM_DEFAULT;
    int n = 1;

    for (int i = 1; i < *argc; i++)
        if (!strcmp(argv[i], "--bootstrap") && i + 1 < *argc)
            b = argv[++i];
        else
            argv[n++] = argv[i];
    *argc = n;
    argv[n] = NULL;
    if (!strcmp(b, "mpi"))
        return "mpi";
    if (!strcmp(b, "uid"))
        return "uid";
    if (wl_rank == 0)
        fprintf(stderr, "%s: --bootstrap is mpi or uid, not '%s'\n", argv[0], b);
    return NULL;
}

/* NVSHMEM started on every rank with bootstrap b ("mpi" or "uid"); 1 when
 * every rank's PE is its MPI rank, else 0 after a message. Collective. */
static inline int peer_nvshmem_init(const char *b)
{
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    MPI_Comm world = MPI_COMM_WORLD;
    int ok;

    if (!strcmp(b, "mpi")) {
        attr.mpi_comm = &world;
        nvshmemx_init_attr(NVSHMEMX_INIT_WITH_MPI_COMM, &attr);
    } else {
        if (wl_rank == 0 && nvshmemx_get_uniqueid(&id) != 0) {
            fprintf(stderr, "rank 0: nvshmemx_get_uniqueid failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1); /* the others wait in the broadcast */
        }
        MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        if (nvshmemx_set_attr_uniqueid_args(wl_rank, wl_size, &id, &attr) != 0) {
            fprintf(stderr, "rank %d: nvshmemx_set_attr_uniqueid_args failed\n", wl_rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    }
    ok = nvshmem_my_pe() == wl_rank && nvshmem_n_pes() == wl_size;
    if (!ok)
        fprintf(stderr, "rank %d: NVSHMEM made it PE %d of %d, not %d of %d\n", wl_rank,
                nvshmem_my_pe(), nvshmem_n_pes(), wl_rank, wl_size);
    return wl_agree(ok);
}

/* The library as the header line names it: the loaded NVSHMEM's version. */
static inline void peer_nvshmem_name(const char *b, char *buf, size_t len)
{
    int major = 0, minor = 0, patch = 0;

    nvshmemx_vendor_get_version_info(&major, &minor, &patch);
    snprintf(buf, len, "NVSHMEM %d.%d.%d (%s bootstrap)", major, minor, patch, b);
}

#endif
