/*
 * The ib transport's entry in the transport table. Only device discovery is
 * implemented (issue 5): reachable() answers 0 on every machine, with the
 * reason, so the core never calls the other operations; they refuse with a
 * log line rather than pretend.
 */
#include <stdio.h>

#include "internal.h"
#include "transport/ib/ib.h"
#include "transport/transport.h"

static int ib_reachable(gpuport_comm_t comm, int peer, char *why, size_t len)
{
    (void)comm;
    (void)peer;
    if (!ib_devices_present(why, len))
        return 0;
    snprintf(why, len, "RDMA devices are present but gpuport's ib data path is not implemented "
             "yet (issue 5)");
    return 0;
}

static gpuport_status_t ib_conn_open(gpuport_conn_t *conn)
{
    log_error("ib: connection to rank %d: not implemented (reachable() should have refused)",
              conn->peer);
    return GPUPORT_ERR_NOT_SUPPORTED;
}

static void ib_conn_close(gpuport_conn_t *conn)
{
    (void)conn;
}

static gpuport_status_t ib_chan_connect(gpuport_pchan_t *ch, const gpuport_channel_rec_t *peer)
{
    (void)peer;
    log_error("ib: channel to rank %d: not implemented (reachable() should have refused)",
              ch->conn->peer);
    return GPUPORT_ERR_NOT_SUPPORTED;
}

static void ib_chan_disconnect(gpuport_pchan_t *ch)
{
    (void)ch;
}

static int ib_put(gpuport_pchan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                  int behind_work, gpuport_work_t *work)
{
    (void)dst_off, (void)src_off, (void)size, (void)behind_work, (void)work;
    log_error("ib: put to rank %d: not implemented", ch->conn->peer);
    return GPUPORT_ERR_NOT_SUPPORTED;
}

static int ib_signal(gpuport_pchan_t *ch, int behind_work, gpuport_work_t *work)
{
    (void)behind_work, (void)work;
    log_error("ib: signal to rank %d: not implemented", ch->conn->peer);
    return GPUPORT_ERR_NOT_SUPPORTED;
}

const gpuport_transport_ops_t gpuport_transport_ib = {
    .name = "ib",
    .kind = GPUPORT_TRANSPORT_IB,
    .reachable = ib_reachable,
    .conn_open = ib_conn_open,
    .conn_close = ib_conn_close,
    .chan_connect = ib_chan_connect,
    .chan_disconnect = ib_chan_disconnect,
    .put = ib_put,
    .signal = ib_signal,
};
