/*
 * The check of a struct layout that a program passes with its call
 * (GPUPORT_LAYOUT in gpuport.h): the one place that compares a program's
 * layout with the library's and says, once, what is wrong. For the public
 * calls that take or fill gpuport_bootstrap_t, gpuport_comm_stats_t or
 * gpuport_port_channel_dev_t.
 */
#ifndef GPUPORT_LAYOUT_H
#define GPUPORT_LAYOUT_H

#include <stdint.h>

#include "gpuport/gpuport.h"

/* GPUPORT_OK when `program` is `library`; else GPUPORT_ERR_VERSION, logged
 * with the call, the struct and both layouts' versions and sizes. The
 * caller then touches nothing of the program's struct. */
gpuport_status_t gpuport_layout_check(const char *call, const char *type, uint32_t program,
                                      uint32_t library);

#endif
