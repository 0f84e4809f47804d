/*
 * Peer channels on the host (gpuport_peer_channel_create), between two
 * processes (fork + socketpair bootstrap), on one host (shm) and with two
 * host identities (tcp); without GPU mode a peer channel is a port channel:
 *   - both sides agree: no store path (gpuport_peer_channel_stores 0), the
 *     reason said at info level (host-only), and the device handle refused
 *     with GPUPORT_ERR_NOT_SUPPORTED (no GPU mode), nothing written;
 *   - a peer channel to itself beside one to the peer; each creation takes
 *     one channel id and its destroy gives it back;
 *   - destroy twice, and stores() on a destroyed handle, are refused;
 *   - bad arguments (NULL out, a rank out of range) are refused on this
 *     side, without meeting the peer;
 *   - one left open is released with its communicator.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_device.h"
#include "internal.h"
#include "pair_bootstrap.h"
#include "testenv.h"

#define REGION 65536

static int g_distinct_hosts;

static uint32_t ids_in_use(gpuport_comm_t comm)
{
    uint32_t n = 0;

    pthread_mutex_lock(&comm->lock);
    for (uint32_t i = 0; i < comm->config.max_channels; i++)
        n += comm->id_used[i] != 0;
    pthread_mutex_unlock(&comm->lock);
    return n;
}

static int side(gpuport_bootstrap_t *bs)
{
    int rank = bs->rank, peer = 1 - rank;
    gpuport_comm_t comm;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_peer_channel_t pc = NULL, self = NULL, left = NULL;
    gpuport_peer_channel_dev_t dev;
    const char *log;
    uint32_t ids;

    setenv("GPUPORT_LOG_LEVEL", "info", 1); /* the creation's line says the path */
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&src));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&dst));
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    ids = ids_in_use(comm);

    /* bad arguments: this side only */
    capture_begin();
    CHECK_STATUS(gpuport_peer_channel_create(comm, peer, msrc, mdst, NULL),
                 GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_peer_channel_create(comm, 7, msrc, mdst, &pc), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_peer_channel_create(NULL, peer, msrc, mdst, &pc),
                 GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(pc == NULL && strstr(log, "peer 7 is not a rank"), "log: %s", log);

    /* to the peer, then to itself */
    capture_begin();
    CHECK_OK(gpuport_peer_channel_create(comm, peer, msrc, mdst, &pc));
    log = capture_end();
    CHECK_MSG(strstr(log, "every operation by the proxy"), "log: %s", log);
    CHECK_OK(gpuport_peer_channel_create(comm, rank, msrc, mdst, &self));
    CHECK(ids_in_use(comm) == ids + 2);
    CHECK(gpuport_peer_channel_stores(pc) == 0 && gpuport_peer_channel_stores(self) == 0);
    memset(&dev, 0xab, sizeof(dev));
    capture_begin();
    CHECK_STATUS(gpuport_peer_channel_device(pc, &dev), GPUPORT_ERR_NOT_SUPPORTED);
    capture_end();
    CHECK(dev.layout == 0xabababab);
    CHECK_STATUS(gpuport_peer_channel_device(pc, NULL), GPUPORT_ERR_INVALID_ARG);

    /* destroy, twice */
    CHECK_OK(gpuport_peer_channel_destroy(self));
    CHECK_OK(gpuport_peer_channel_destroy(pc));
    CHECK(ids_in_use(comm) == ids);
    capture_begin();
    CHECK_STATUS(gpuport_peer_channel_destroy(pc), GPUPORT_ERR_INVALID_ARG);
    CHECK_STATUS(gpuport_peer_channel_destroy(NULL), GPUPORT_ERR_INVALID_ARG);
    log = capture_end();
    CHECK_MSG(strstr(log, "is not a live peer channel"), "log: %s", log);
    CHECK(gpuport_peer_channel_stores(pc) == -1);

    /* one left open goes with the communicator */
    CHECK_OK(gpuport_peer_channel_create(comm, peer, msrc, mdst, &left));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

static void run_pair(const char *name)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank = pair_fork(&bs, &child);

    CHECK(rank >= 0);
    if (g_distinct_hosts)
        setenv("GPUPORT_HOST_ID", rank ? "b" : "a", 1);
    if (rank == 1)
        _exit(side(&bs));
    CHECK_MSG(side(&bs) == 0, "%s: parent failed", name);
    CHECK_MSG(pair_join(child) == 0, "%s: child failed", name);
    unsetenv("GPUPORT_HOST_ID");
    unsetenv("GPUPORT_LOG_LEVEL");
    printf("PASS %s (%s)\n", name, g_distinct_hosts ? "tcp between two host identities" : "shm");
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    testenv_clear_gpuport();
    setenv("GPUPORT_TIMEOUT_MS", "30000", 1);
    setenv("GPUPORT_GPU", "off", 1);
    for (g_distinct_hosts = 0; g_distinct_hosts <= 1; g_distinct_hosts++)
        run_pair("peer channels without GPU mode");
    return 0;
}
