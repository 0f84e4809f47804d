/*
 * A program compiled with the other MPI family's mpi.h than the one
 * libgpuport_mpi was built with, and linked with that other MPI (Makefile.am:
 * MPI_OTHER_CFLAGS, MPI_OTHER_LIBS): both MPIs are loaded, and this
 * program's comes first in symbol lookup. gpuport_comm_init_mpi must fail
 * with GPUPORT_ERR_VERSION and a message naming both MPIs, through the
 * header's macro (the compiled-in tag) and when called by name around the
 * macro (the library's check of the MPI loaded in the process). MPI is
 * never started: the check comes first. Run by test/mpi/mismatch.sh.
 */
#include <stdio.h>
#include <string.h>

#include "gpuport/gpuport_mpi.h"

#include "../unit/capture.h"
#include "../unit/check.h"

int main(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    const char *mine = (GPUPORT_MPI_TAG >> 24) == GPUPORT_MPI_FAMILY_OPENMPI ? "Open MPI"
                       : (GPUPORT_MPI_TAG >> 24) == GPUPORT_MPI_FAMILY_MPICH ? "MPICH"
                                                                               : NULL;
    char want[128];
    const char *log;
    gpuport_comm_t comm = (gpuport_comm_t)(uintptr_t)0x5a5a;
    int len = 0;

    if (!mine)
        SKIP("compiled with an MPI of neither family (tag 0x%08x)", (unsigned)GPUPORT_MPI_TAG);
    CHECK(MPI_Get_library_version(version, &len) == MPI_SUCCESS);
    version[strcspn(version, "\n")] = '\0';
    printf("test_mpi_foreign: compiled with %s (tag 0x%08x); MPI_Get_library_version: %s\n",
           mine, (unsigned)GPUPORT_MPI_TAG, version);
    /* The library's run-time check sees the MPI that symbol lookup finds
     * first; if that were not this program's, the second half below would
     * test nothing. */
    CHECK_MSG(strstr(version, mine) != NULL,
              "the MPI found first is not this program's %s: the link order of this test is "
              "wrong", mine);

    capture_begin();
    CHECK_STATUS(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), GPUPORT_ERR_VERSION);
    log = capture_end();
    snprintf(want, sizeof(want), "but this program with %s ", mine);
    CHECK_MSG(strstr(log, "libgpuport_mpi was built with ") && strstr(log, want),
              "through the macro: expected \"%s\" in: %s", want, log);
    CHECK(comm == NULL); /* a refused call leaves no handle behind */
    comm = (gpuport_comm_t)(uintptr_t)0x5a5a;
    printf("ok: gpuport_comm_init_mpi refused (tag): %s", log);

    capture_begin();
    CHECK_STATUS((gpuport_comm_init_mpi)(MPI_COMM_WORLD, &comm), GPUPORT_ERR_VERSION);
    log = capture_end();
    snprintf(want, sizeof(want), "the MPI loaded in this process is %s ", mine);
    CHECK_MSG(strstr(log, "libgpuport_mpi was built with ") && strstr(log, want),
              "around the macro: expected \"%s\" in: %s", want, log);
    CHECK(comm == NULL); /* a refused call leaves no handle behind */
    comm = (gpuport_comm_t)(uintptr_t)0x5a5a;
    printf("ok: (gpuport_comm_init_mpi) refused (loaded MPI): %s", log);
    printf("PASS test_mpi_foreign\n");
    return 0;
}
