/* Host identity for transport choice; see hostid.h. */
#include "hostid.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

uint64_t gpuport_hash64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t gpuport_host_id(void)
{
    char buf[256] = {0};
    uint64_t h;
    FILE *f;

    /* The boot id tells apart containers that share a host name; the host
     * name tells apart hosts that cloned one image. */
    if (gethostname(buf, sizeof(buf) - 1) != 0)
        buf[0] = '\0';
    h = gpuport_hash64(buf, strlen(buf), 0);
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        memset(buf, 0, sizeof(buf));
        if (fgets(buf, sizeof(buf), f))
            h = gpuport_hash64(buf, strlen(buf), h);
        fclose(f);
    }
    return h ? h : 1;
}
