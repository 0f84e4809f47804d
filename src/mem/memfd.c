/* Shared-memory segments of the core; see memfd.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_MEM
#include "memfd.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

static gpuport_status_t memfd_status(int err)
{
    return err == ENOMEM || err == ENOSPC || err == EFBIG ? GPUPORT_ERR_NO_MEMORY
                                                          : GPUPORT_ERR_NO_RESOURCE;
}

gpuport_status_t gpuport_memfd_map(const char *name, size_t size, int *fd_p, void **ptr_p)
{
    void *ptr;
    int fd, err;

    fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        err = errno;
        log_error("memfd_create(%s) failed: %s", name, strerror(err));
        return memfd_status(err);
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        err = errno;
        log_error("ftruncate(%s, %zu bytes) failed: %s", name, size, strerror(err));
        goto err_close;
    }
    ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ptr == MAP_FAILED) {
        err = errno;
        log_error("mmap(%s, %zu bytes) failed: %s", name, size, strerror(err));
        goto err_close;
    }
    *fd_p = fd;
    *ptr_p = ptr;
    return GPUPORT_OK;

err_close:
    close(fd);
    return memfd_status(err);
}
