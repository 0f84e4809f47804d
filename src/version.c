/* The library's version, for tools and for users checking what they loaded. */
#include "gpuport/gpuport.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *gpuport_version_string(void)
{
    return STR(GPUPORT_VERSION_MAJOR) "." STR(GPUPORT_VERSION_MINOR) "." STR(GPUPORT_VERSION_PATCH);
}
