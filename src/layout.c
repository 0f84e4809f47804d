/* Struct layouts a program was compiled with, checked; see layout.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include "layout.h"

#include "log.h"

gpuport_status_t gpuport_layout_check(const char *call, const char *type, uint32_t program,
                                      uint32_t library)
{
    if (program == library)
        return GPUPORT_OK;
    log_error("%s: this program was compiled with a %s of layout version %u (%u bytes), but "
              "this library (gpuport %s) has layout version %u (%u bytes); rebuild the program "
              "against this library's headers (the %s was neither read nor written)",
              call, type, GPUPORT_LAYOUT_VERSION(program), GPUPORT_LAYOUT_SIZE(program),
              gpuport_version_string(), GPUPORT_LAYOUT_VERSION(library),
              GPUPORT_LAYOUT_SIZE(library), type);
    return GPUPORT_ERR_VERSION;
}
