/*
 * Which MPI libgpuport_mpi was built with, compared with the one a program
 * was compiled with (the tag gpuport_mpi.h passes) and with the one loaded
 * in the process; gpuport_mpi.h says why only the family counts. Also the
 * gpuport_bootstrap_t layout a program passes, compared with this
 * library's (libgpuport's own check is not exported).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "mpi_priv.h"

/* MPICH's MPI_MAX_LIBRARY_VERSION_STRING is 8192, Open MPI's 256; the MPI
 * that answers MPI_Get_library_version may be the other one than the mpi.h
 * this file is compiled with, so the buffer fits both. */
#define VERSION_TEXT_MAX 8192
#if MPI_MAX_LIBRARY_VERSION_STRING > VERSION_TEXT_MAX
#undef VERSION_TEXT_MAX
#define VERSION_TEXT_MAX MPI_MAX_LIBRARY_VERSION_STRING
#endif

static unsigned tag_family(uint32_t tag)
{
    return tag >> 24;
}

static const char *family_name(unsigned family)
{
    switch (family) {
    case GPUPORT_MPI_FAMILY_OPENMPI:
        return "Open MPI";
    case GPUPORT_MPI_FAMILY_MPICH:
        return "MPICH";
    default:
        return "another MPI";
    }
}

/* "Open MPI 4.1.4", "MPICH 4.0.2" */
static void tag_text(uint32_t tag, char *buf, size_t size)
{
    unsigned major = tag >> 16 & 0xffu, minor = tag >> 8 & 0xffu, release = tag & 0xffu;

    switch (tag_family(tag)) {
    case GPUPORT_MPI_FAMILY_OPENMPI:
    case GPUPORT_MPI_FAMILY_MPICH:
        snprintf(buf, size, "%s %u.%u.%u", family_name(tag_family(tag)), major, minor, release);
        break;
    case GPUPORT_MPI_FAMILY_OTHER:
        snprintf(buf, size, "an MPI of neither family (MPI-%u.%u)", major, minor);
        break;
    default:
        snprintf(buf, size, "MPI family %u, which this library does not know (tag 0x%08x)",
                 tag_family(tag), (unsigned)tag);
        break;
    }
}

gpuport_status_t gpuport_mpi_check(uint32_t program_tag)
{
    const uint32_t built = GPUPORT_MPI_TAG;
    unsigned theirs = tag_family(program_tag), ours = tag_family(built);
    char b[96], p[96];

    if (theirs <= GPUPORT_MPI_FAMILY_MPICH &&
        (theirs == ours || theirs == GPUPORT_MPI_FAMILY_OTHER || ours == GPUPORT_MPI_FAMILY_OTHER))
        return GPUPORT_OK;
    tag_text(built, b, sizeof(b));
    tag_text(program_tag, p, sizeof(p));
    if (theirs > GPUPORT_MPI_FAMILY_MPICH) {
        mpi_error(-1, "libgpuport_mpi was built with %s but this program passed %s: "
                  "not a GPUPORT_MPI_TAG of gpuport_mpi.h", b, p);
        return GPUPORT_ERR_VERSION;
    }
    mpi_error(-1, "libgpuport_mpi was built with %s but this program with %s: an MPI_Comm of "
              "one is not an MPI_Comm of the other; rebuild the program with %s's mpicc, or "
              "link it with a libgpuport_mpi built for %s", b, p, family_name(ours),
              family_name(theirs));
    return GPUPORT_ERR_VERSION;
}

gpuport_status_t mpi_check_loaded(void)
{
#if MPI_VERSION >= 3
    char text[VERSION_TEXT_MAX + 1];
    char b[96];
    unsigned loaded, ours = tag_family(GPUPORT_MPI_TAG);
    int len = 0;
    size_t end;

    if (ours == GPUPORT_MPI_FAMILY_OTHER)
        return GPUPORT_OK;
    if (MPI_Get_library_version(text, &len) != MPI_SUCCESS)
        return GPUPORT_OK; /* no answer is no verdict */
    text[len >= 0 && len <= VERSION_TEXT_MAX ? (size_t)len : VERSION_TEXT_MAX] = '\0';
    /* Intel MPI and MVAPICH are of MPICH's ABI family */
    if (strstr(text, "Open MPI"))
        loaded = GPUPORT_MPI_FAMILY_OPENMPI;
    else if (strstr(text, "MPICH") || strstr(text, "MVAPICH") || strstr(text, "Intel(R) MPI"))
        loaded = GPUPORT_MPI_FAMILY_MPICH;
    else
        return GPUPORT_OK;
    if (loaded == ours)
        return GPUPORT_OK;
    end = strcspn(text, "\n");
    text[end] = '\0';
    for (char *c = text; *c; c++)
        if (*c == '\t')
            *c = ' ';
    tag_text(GPUPORT_MPI_TAG, b, sizeof(b));
    mpi_error(-1, "libgpuport_mpi was built with %s but the MPI loaded in this process is %s "
              "(\"%s\"): the program was compiled or linked with %s; rebuild it with %s's "
              "mpicc, or link it with a libgpuport_mpi built for %s", b, family_name(loaded),
              text, family_name(loaded), family_name(ours), family_name(loaded));
    return GPUPORT_ERR_VERSION;
#else
    return GPUPORT_OK;
#endif
}

gpuport_status_t mpi_check_layout(uint32_t program_layout)
{
    const uint32_t ours = GPUPORT_BOOTSTRAP_LAYOUT;

    /* layout version 2 is ours without allgather_timed, at its end */
    if (program_layout == ours ||
        program_layout == (((uint32_t)2 << 16) | (uint32_t)offsetof(gpuport_bootstrap_t,
                                                                     allgather_timed)))
        return GPUPORT_OK;
    mpi_error(-1, "gpuport_bootstrap_mpi: this program was compiled with a gpuport_bootstrap_t "
              "of layout version %u (%u bytes), but this libgpuport_mpi (gpuport %d.%d.%d) has "
              "layout version %u (%u bytes); rebuild the program against this library's headers "
              "(the gpuport_bootstrap_t was neither read nor written)",
              GPUPORT_LAYOUT_VERSION(program_layout), GPUPORT_LAYOUT_SIZE(program_layout),
              GPUPORT_VERSION_MAJOR, GPUPORT_VERSION_MINOR, GPUPORT_VERSION_PATCH,
              GPUPORT_LAYOUT_VERSION(ours), GPUPORT_LAYOUT_SIZE(ours));
    return GPUPORT_ERR_VERSION;
}
