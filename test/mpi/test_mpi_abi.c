/*
 * gpuport_mpi_check and the checking macros of gpuport_mpi.h, without
 * starting MPI: a program's tag of the other family (or of no known family)
 * must fail with GPUPORT_ERR_VERSION and a message naming both MPIs, before
 * any output argument is written; a tag of the same family (any version) or
 * of "other" must pass. A program really compiled with the other MPI is
 * test/mpi/mismatch.sh. Runs as a plain program: no launcher, no MPI_Init.
 */
#include <stdio.h>
#include <string.h>

#include "gpuport/gpuport_mpi.h"

#include "../unit/capture.h"
#include "../unit/check.h"

static const char *family_name(unsigned family)
{
    return family == GPUPORT_MPI_FAMILY_OPENMPI ? "Open MPI"
           : family == GPUPORT_MPI_FAMILY_MPICH ? "MPICH"
                                                : "other";
}

/* gpuport_mpi_check(tag): the status, and what it logged in *log_p */
static gpuport_status_t check_tag(uint32_t tag, const char **log_p)
{
    gpuport_status_t status;

    capture_begin();
    status = gpuport_mpi_check(tag);
    *log_p = capture_end();
    return status;
}

static void must_pass(uint32_t tag, const char *what)
{
    const char *log;

    CHECK_MSG(check_tag(tag, &log) == GPUPORT_OK, "%s (tag 0x%08x) was refused: %s", what,
              (unsigned)tag, log);
    CHECK_MSG(log[0] == '\0', "%s passed but logged: %s", what, log);
    printf("ok: %s (tag 0x%08x) passes\n", what, (unsigned)tag);
}

int main(void)
{
    const uint32_t own = GPUPORT_MPI_TAG;
    const unsigned family = own >> 24;
    char want[160];
    const char *log;
    int initialized = -1;

    printf("test_mpi_abi: compiled with %s, tag 0x%08x\n", family_name(family), (unsigned)own);
    must_pass(own, "this program's own tag");
    must_pass(GPUPORT_MPI_TAG_MAKE(family, 99, 7, 3), "the same family at another version");
    must_pass(GPUPORT_MPI_TAG_MAKE(GPUPORT_MPI_FAMILY_OTHER, 3, 1, 0),
              "an MPI of neither family");

    /* a family this library does not know */
    CHECK_STATUS(check_tag(GPUPORT_MPI_TAG_MAKE(9, 1, 2, 3), &log), GPUPORT_ERR_VERSION);
    CHECK_MSG(strstr(log, "not a GPUPORT_MPI_TAG") && strstr(log, "MPI family 9"),
              "unknown family: %s", log);
    printf("ok: a tag of unknown family 9 is refused: %s", log);

    if (family == GPUPORT_MPI_FAMILY_OTHER) {
        printf("built with an MPI of neither family: no foreign family to refuse\n");
        return 0;
    }
    const unsigned foreign =
        family == GPUPORT_MPI_FAMILY_OPENMPI ? GPUPORT_MPI_FAMILY_MPICH : GPUPORT_MPI_FAMILY_OPENMPI;
    const uint32_t foreign_tag = GPUPORT_MPI_TAG_MAKE(foreign, 4, 0, 2);

    /* the comparison itself */
    CHECK_STATUS(check_tag(foreign_tag, &log), GPUPORT_ERR_VERSION);
    snprintf(want, sizeof(want), "libgpuport_mpi was built with %s %u.%u.%u but this program "
             "with %s 4.0.2", family_name(family), own >> 16 & 0xffu, own >> 8 & 0xffu,
             own & 0xffu, family_name(foreign));
    CHECK_MSG(strstr(log, want) != NULL, "expected \"%s\" in: %s", want, log);
    CHECK_MSG(count_of(log, "\n") == 1, "expected one line, got: %s", log);
    printf("ok: a tag of %s is refused: %s", family_name(foreign), log);

    /* The macros, as a program compiled with the other mpi.h would expand
     * them: refused before the handle is used or an output written. */
#undef GPUPORT_MPI_TAG
#define GPUPORT_MPI_TAG foreign_tag
    {
        gpuport_comm_t comm = (gpuport_comm_t)(uintptr_t)0x5a5a;
        gpuport_bootstrap_t bs, untouched;

        capture_begin();
        CHECK_STATUS(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), GPUPORT_ERR_VERSION);
        log = capture_end();
        CHECK(comm == NULL); /* a refused call leaves no handle behind */
        CHECK_MSG(strstr(log, want) != NULL, "gpuport_comm_init_mpi: expected \"%s\" in: %s",
                  want, log);

        memset(&bs, 0xa5, sizeof(bs));
        memcpy(&untouched, &bs, sizeof(bs));
        capture_begin();
        CHECK_STATUS(gpuport_bootstrap_mpi(MPI_COMM_WORLD, &bs), GPUPORT_ERR_VERSION);
        log = capture_end();
        CHECK(memcmp(&bs, &untouched, sizeof(bs)) == 0);
        CHECK_MSG(strstr(log, want) != NULL, "gpuport_bootstrap_mpi: expected \"%s\" in: %s",
                  want, log);
        printf("ok: gpuport_comm_init_mpi and gpuport_bootstrap_mpi with the tag of %s return "
               "GPUPORT_ERR_VERSION, a NULL communicator and an untouched bootstrap\n", family_name(foreign));
    }
#undef GPUPORT_MPI_TAG
#define GPUPORT_MPI_TAG own
    /* With this program's own tag the call reaches the library, whose check
     * of the loaded MPI passes; MPI was never started, which it reports. */
    {
        gpuport_comm_t comm = (gpuport_comm_t)(uintptr_t)0x5a5a;

        capture_begin();
        CHECK_STATUS(gpuport_comm_init_mpi(MPI_COMM_WORLD, &comm), GPUPORT_ERR_INVALID_ARG);
        log = capture_end();
        CHECK(comm == NULL); /* a refused call leaves no handle behind */
        CHECK_MSG(strstr(log, "MPI is not initialized") && !strstr(log, "was built with"),
                  "own tag: %s", log);
        printf("ok: with its own tag the call reaches the library: %s", log);
    }
    MPI_Initialized(&initialized);
    CHECK_MSG(initialized == 0, "MPI was started (MPI_Initialized says %d)", initialized);
    printf("PASS test_mpi_abi\n");
    return 0;
}
