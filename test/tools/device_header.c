/*
 * The host part of the public device header: a C file of a program built
 * without CUDA includes nothing but <gpuport/gpuport_device.h> and fills
 * the kernels' handles. test/tools/device_header.sh compiles it (cc -c,
 * warnings as errors; also as C++ where a C++ compiler is found); the
 * function pointers below fail the compile where a declaration is missing
 * or its type changed.
 */
#include <gpuport/gpuport_device.h>

gpuport_status_t (*const fill_port)(gpuport_channel_t, gpuport_port_channel_dev_t *) =
    gpuport_channel_device;
gpuport_status_t (*const fill_memory)(gpuport_memory_channel_t,
                                      gpuport_memory_channel_dev_t *) =
    gpuport_memory_channel_device;

gpuport_status_t fill_handles(gpuport_channel_t ch, gpuport_memory_channel_t mch,
                              gpuport_port_channel_dev_t *dev, gpuport_memory_channel_dev_t *mdev);

gpuport_status_t fill_handles(gpuport_channel_t ch, gpuport_memory_channel_t mch,
                              gpuport_port_channel_dev_t *dev, gpuport_memory_channel_dev_t *mdev)
{
    gpuport_status_t st = gpuport_channel_device(ch, dev);

    if (st != GPUPORT_OK)
        return st;
    /* the layouts the entry points are given come from the header */
    if (dev->layout != GPUPORT_CHANNEL_DEV_LAYOUT)
        return GPUPORT_ERR_VERSION;
    st = gpuport_memory_channel_device(mch, mdev);
    if (st == GPUPORT_OK && mdev->layout != GPUPORT_MEMORY_CHANNEL_DEV_LAYOUT)
        return GPUPORT_ERR_VERSION;
    return st;
}
