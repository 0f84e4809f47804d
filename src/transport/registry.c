/*
 * The transports gpuport knows: the one list. Adding a transport means a
 * folder under src/transport/, its ops table, a row here and its sources in
 * Makefile.am; no core file changes. The order is GPUPORT_TRANSPORT's (and
 * the kind numbers channel records carry), so rows are only ever appended.
 */
#include <stddef.h>
#include <stdio.h>

#include "build_config.h"
#include "log.h"
#include "transport/transport.h"

#if GPUPORT_HAVE_CUDA
extern const gpuport_transport_ops_t gpuport_transport_cuda_ipc;
#define CUDA_IPC_OPS &gpuport_transport_cuda_ipc
#else
#define CUDA_IPC_OPS NULL
#endif
#if GPUPORT_HAVE_IBVERBS
extern const gpuport_transport_ops_t gpuport_transport_ib;
#define IB_OPS &gpuport_transport_ib
#else
#define IB_OPS NULL
#endif
extern const gpuport_transport_ops_t gpuport_transport_shm;
extern const gpuport_transport_ops_t gpuport_transport_tcp;

/* GPUPORT_TRANSPORT's words: "auto", then the transports' names
 * (transport.h's GPUPORT_TL_NAMES); a transport's kind is its index. */
const char *const gpuport_transport_words[] = {"auto", GPUPORT_TL_NAMES, NULL};
#define NKINDS ((int)(sizeof(gpuport_transport_words) / sizeof(gpuport_transport_words[0])) - 1)
_Static_assert(NKINDS - 1 <= GPUPORT_LOG_TL_SLOTS, "a log subsystem for every transport");
_Static_assert(GPUPORT_TL_KIND_SHM == 1 && GPUPORT_TL_KIND_CUDA_IPC == 2 && GPUPORT_TL_KIND_IB == 3 &&
                   GPUPORT_TL_KIND_TCP == 4 && NKINDS == 5,
               "transport.h's kinds follow the list");

/* by kind: the ops where built, else why not */
static const gpuport_transport_ops_t *const ops_of[] = {
    NULL, &gpuport_transport_shm, CUDA_IPC_OPS, IB_OPS, &gpuport_transport_tcp,
};
static const char *const missing[] = {
    NULL, NULL, "this gpuport was built without CUDA (configure --with-cuda)",
    "the libibverbs headers were not found (configure --with-ibverbs)", NULL,
};
_Static_assert(sizeof(ops_of) / sizeof(ops_of[0]) == NKINDS &&
                   sizeof(missing) / sizeof(missing[0]) == NKINDS,
               "one entry per word of the transport list");
_Static_assert(NKINDS <= GPUPORT_TL_MAX_KINDS, "rank records have room for every transport");

const gpuport_transport_ops_t *gpuport_transport_ops(int kind)
{
    return kind > 0 && kind < NKINDS ? ops_of[kind] : NULL;
}

int gpuport_transport_nkinds(void)
{
    return NKINDS;
}

const char *gpuport_transport_name(int kind)
{
    return kind >= 0 && kind < NKINDS ? gpuport_transport_words[kind] : "?";
}

const char *gpuport_transport_missing(int kind)
{
    return kind > 0 && kind < NKINDS && !ops_of[kind] ? missing[kind] : NULL;
}

void gpuport_transport_built(char *buf, size_t len)
{
    size_t used = 0;

    if (len)
        buf[0] = '\0';
    for (int k = 1; k < NKINDS; k++) {
        int n;
        if (!ops_of[k] || used >= len)
            continue;
        n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", gpuport_transport_words[k]);
        if (n > 0)
            used += (size_t)n;
    }
}
