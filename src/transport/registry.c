/*
 * The transports gpuport knows: the one list. Adding a transport to the
 * library means a folder under src/transport/, its ops table, a row here
 * and its sources in Makefile.am; no core file changes. The order is
 * GPUPORT_TRANSPORT's (and the kind numbers channel records carry), so rows
 * are only ever appended. A transport built outside the library (a test's)
 * joins after these at run time, through gpuport_transport_register.
 *
 * Everything that names transports is derived from here: GPUPORT_TRANSPORT's
 * and GPUPORT_LOG_SUBSYS's words, and, through each ops table, the
 * transports' GPUPORT_* rows and record types.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "build_config.h"
#include "config.h"
#include "log.h"
#include "transport/transport.h"

/* Each transport's settings are compiled into every build (config_var.h):
 * a variable of a transport that is not built is still known. */
extern const gpuport_settings_table_t gpuport_shm_settings, gpuport_ib_settings,
    gpuport_tcp_settings, gpuport_cuda_ipc_settings;
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

#define NLISTED 5 /* "auto" and the names above */

/* GPUPORT_TRANSPORT's words; a transport's kind is its index. Room for the
 * registered ones, NULL-terminated. */
const char *gpuport_transport_words[GPUPORT_TL_MAX_KINDS + 1] = {"auto", GPUPORT_TL_NAMES, NULL};
_Static_assert(GPUPORT_TL_MAX_KINDS - 1 <= GPUPORT_LOG_TL_SLOTS, "a log subsystem per transport");
_Static_assert(GPUPORT_TL_KIND_SHM == 1 && GPUPORT_TL_KIND_CUDA_IPC == 2 &&
                   GPUPORT_TL_KIND_IB == 3 && GPUPORT_TL_KIND_TCP == 4,
               "transport.h's kinds follow the list");

/* by kind: the ops where built, else why not */
static const gpuport_transport_ops_t *ops_of[GPUPORT_TL_MAX_KINDS] = {
    NULL, &gpuport_transport_shm, CUDA_IPC_OPS, IB_OPS, &gpuport_transport_tcp,
};
static const gpuport_settings_table_t *const settings_of[NLISTED] = {
    NULL, &gpuport_shm_settings, &gpuport_cuda_ipc_settings, &gpuport_ib_settings,
    &gpuport_tcp_settings,
};
static const char *const missing[NLISTED] = {
    NULL, NULL, "this gpuport was built without CUDA (configure --with-cuda)",
    "the libibverbs headers were not found (configure --with-ibverbs)", NULL,
};
_Static_assert(NLISTED <= GPUPORT_TL_MAX_KINDS, "rank records have room for every transport");
_Static_assert(GPUPORT_TL_MAX_KINDS <= GPUPORT_CONFIG_TL_KINDS,
               "the configuration places every transport's settings");
/* written only by gpuport_transport_register, before any communicator */
static int nkinds = NLISTED;

int gpuport_transport_register(const gpuport_transport_ops_t *ops)
{
    for (int k = 1; k < nkinds; k++) {
        if (strcmp(gpuport_transport_words[k], ops->name) == 0) {
            log_error("a transport named %s is already in the transport list", ops->name);
            return -1;
        }
    }
    if (nkinds == GPUPORT_TL_MAX_KINDS) {
        log_error("no room for transport %s: the list holds %d transports", ops->name,
                  GPUPORT_TL_MAX_KINDS - 1);
        return -1;
    }
    ops_of[nkinds] = ops;
    gpuport_transport_words[nkinds] = ops->name;
    gpuport_log_subsys_words[GPUPORT_SUBSYS_TL(nkinds)] = ops->name;
    return nkinds++;
}

const gpuport_transport_ops_t *gpuport_transport_ops(int kind)
{
    return kind > 0 && kind < nkinds ? ops_of[kind] : NULL;
}

int gpuport_transport_nkinds(void)
{
    return nkinds;
}

const char *gpuport_transport_name(int kind)
{
    return kind >= 0 && kind < nkinds ? gpuport_transport_words[kind] : "?";
}

const gpuport_settings_table_t *gpuport_transport_settings(int kind)
{
    if (kind <= 0 || kind >= nkinds)
        return NULL;
    if (ops_of[kind])
        return ops_of[kind]->settings;
    return kind < NLISTED ? settings_of[kind] : NULL;
}

const char *gpuport_transport_missing(int kind)
{
    return kind > 0 && kind < NLISTED && !ops_of[kind] ? missing[kind] : NULL;
}

void gpuport_transport_built(char *buf, size_t len)
{
    size_t used = 0;

    if (len)
        buf[0] = '\0';
    for (int k = 1; k < nkinds; k++) {
        int n;
        if (!ops_of[k] || used >= len)
            continue;
        n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", gpuport_transport_words[k]);
        if (n > 0)
            used += (size_t)n;
    }
}
