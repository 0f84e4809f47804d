/*
 * What a channel takes from its communicator at creation and gives back
 * when it goes (channel.c, chan_destroy.c; a second channel kind would take
 * its ids here too): one of GPUPORT_MAX_CHANNELS ids, which names the
 * channel's semaphore slot, its proxy entry and its triggers; and a
 * reference on the connection to its peer, which the transport opens at
 * the first channel to that peer and which stays cached, by peer, until the
 * communicator goes. Application threads; the _locked calls are made with
 * the communicator's lock held, so that destroy gives these back together
 * with the rest of the handle.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdlib.h>

#include "chan_int.h"

gpuport_status_t chan_id_alloc(gpuport_comm_t comm, uint32_t *id_p)
{
    gpuport_status_t status = GPUPORT_ERR_NO_RESOURCE;

    pthread_mutex_lock(&comm->lock);
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        if (!comm->id_used[i]) {
            comm->id_used[i] = 1;
            *id_p = i;
            status = GPUPORT_OK;
            break;
        }
    }
    pthread_mutex_unlock(&comm->lock);
    if (status)
        log_error("all %u channels of this communicator are in use (raise GPUPORT_MAX_CHANNELS)",
                  comm->config.max_channels);
    return status;
}

void chan_id_free_locked(gpuport_comm_t comm, uint32_t id)
{
    comm->id_used[id] = 0;
}

gpuport_status_t chan_conn_get(gpuport_comm_t comm, int peer, gpuport_tl_comm_t *tc,
                               gpuport_conn_t **conn_p)
{
    const gpuport_transport_ops_t *ops = tc->ops;
    gpuport_conn_t *conn;
    gpuport_status_t status = GPUPORT_OK;

    pthread_mutex_lock(&comm->lock);
    conn = comm->conns[peer];
    if (conn && conn->tl != tc) {
        log_error("rank %d is already connected over %s; GPUPORT_TRANSPORT changed to %s", peer,
                  conn->tl->ops->name, ops->name);
        status = GPUPORT_ERR_INVALID_CONFIG;
    } else if (!conn) {
        conn = calloc(1, sizeof(*conn));
        if (!conn) {
            status = GPUPORT_ERR_NO_MEMORY;
        } else {
            conn->comm = comm;
            conn->peer = peer;
            conn->tl = tc;
            status = ops->conn_open(conn);
            if (status) {
                free(conn);
                conn = NULL;
            } else {
                comm->conns[peer] = conn;
                if (ops->progress) {
                    int n = atomic_load_explicit(&comm->npconns, memory_order_relaxed);
                    conn->pindex = n;
                    comm->pconns[n] = conn;
                    atomic_store_explicit(&comm->npconns, n + 1, memory_order_release);
                }
            }
        }
    }
    if (!status)
        conn->refs++;
    pthread_mutex_unlock(&comm->lock);
    if (!status)
        *conn_p = conn;
    return status;
}

void chan_conn_put_locked(gpuport_conn_t *conn)
{
    conn->refs--;
}
