/*
 * A channel's work in flight, and its flushes (proxy thread; transports
 * reach the completions here through tl_core.c's services). Work handed
 * to the flusher or left with a transport to complete is counted
 * (work_posted), its completions are counted back (work_done) from the
 * flusher's ring or the transport's call, and a flush is answered, by
 * publishing its FIFO position, once the work posted before it is done.
 * The host FIFO's position is also published without a flush whenever all
 * of a channel's host operations taken so far are complete (proxy_settle),
 * which is what lets a host call carry out the next one itself.
 */
#include <string.h>

#include "proxy_int.h"

/* Everything before FIFO position pos + 1 is complete; the channel's error,
 * if it has one by now, travels with it. */
static void publish_flushed(gpuport_pchan_t *ch, int fifo, uint64_t pos)
{
    uint64_t v = pos + 1;

    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK)
        v |= GPUPORT_FLUSHED_FAILED;
    atomic_store_explicit(&ch->state->flushed[fifo], v, memory_order_release);
}

void proxy_settle(gpuport_pchan_t *ch)
{
    if (ch->host_seen == ch->host_settled || ch->sig_pending || ch->nflush ||
        ch->work_done != ch->work_posted)
        return;
    ch->host_settled = ch->host_seen;
    publish_flushed(ch, GPUPORT_FIFO_HOST, ch->host_seen - 1);
}

static void publish_flushes(gpuport_pchan_t *ch)
{
    uint32_t n = 0;
    /* entries are in FIFO order, and positions grow within each FIFO */
    while (n < ch->nflush && ch->work_done >= ch->flush_target[n]) {
        publish_flushed(ch, ch->flush_fifo[n], ch->flush_pos[n]);
        n++;
    }
    if (n == 0)
        return;
    memmove(ch->flush_pos, ch->flush_pos + n, (ch->nflush - n) * sizeof(uint64_t));
    memmove(ch->flush_target, ch->flush_target + n, (ch->nflush - n) * sizeof(uint64_t));
    memmove(ch->flush_fifo, ch->flush_fifo + n, (ch->nflush - n) * sizeof(uint8_t));
    ch->nflush -= n;
}

int proxy_exec_flush(gpuport_pchan_t *ch, int fifo, uint64_t pos)
{
    uint32_t last = ch->nflush - 1;

    if (ch->nflush == 0 && ch->work_done == ch->work_posted) {
        publish_flushed(ch, fifo, pos);
        return EXEC_DONE;
    }
    if (ch->nflush == GPUPORT_PENDING_FLUSHES) {
        /* Fold into the newest of the same FIFO: its waiters wait for a
         * little more work. Another FIFO's entry cannot take it. */
        if (ch->flush_fifo[last] != fifo)
            return EXEC_RETRY;
        ch->flush_pos[last] = pos;
        ch->flush_target[last] = ch->work_posted;
        return EXEC_DONE;
    }
    ch->flush_pos[ch->nflush] = pos;
    ch->flush_target[ch->nflush] = ch->work_posted;
    ch->flush_fifo[ch->nflush] = (uint8_t)fifo;
    ch->nflush++;
    return EXEC_DONE;
}

static void queue_work(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_work_t *w)
{
    gpuport_work_t item = *w;
    gpuport_status_t st;

    item.channel = ch->tl.id;
    st = gpuport_flusher_post(&comm->proxy.flusher, &item);
    if (st != GPUPORT_OK) {
        /* not queued (logged): the channel fails rather than report delivery later */
        gpuport_pchan_fail(ch, st);
        return;
    }
    ch->work_posted++;
}

void proxy_transport_result(gpuport_comm_t comm, gpuport_pchan_t *ch, int rc,
                            const gpuport_work_t *w)
{
    if (rc == GPUPORT_TRANSPORT_QUEUE) {
        queue_work(comm, ch, w);
    } else if (rc == GPUPORT_TRANSPORT_ASYNC) {
        ch->work_posted++;
        comm->proxy.async_outstanding++;
    } else if (rc < 0) {
        gpuport_pchan_fail(ch, (gpuport_status_t)rc);
    }
}

int proxy_read_completions(gpuport_comm_t comm)
{
    gpuport_work_done_t *c;
    int n = 0;

    while ((c = gpuport_flusher_poll(&comm->proxy.flusher)) != NULL) {
        gpuport_pchan_t *ch;
        if (c->channel & GPUPORT_WORK_CONN) {
            gpuport_conn_t *conn = comm->pconns[c->channel & ~GPUPORT_WORK_CONN];
            gpuport_status_t st = (gpuport_status_t)c->status;
            gpuport_flusher_release(&comm->proxy.flusher);
            conn->tl->ops->work_done(conn, st);
            n++;
            continue;
        }
        ch = &comm->pchans[c->channel];
        if (c->status != GPUPORT_OK)
            gpuport_pchan_fail(ch, (gpuport_status_t)c->status);
        ch->work_done++;
        publish_flushes(ch);
        proxy_settle(ch);
        proxy_promise_if_done(ch);
        gpuport_flusher_release(&comm->proxy.flusher);
        n++;
    }
    return n;
}

void gpuport_proxy_inline_complete(gpuport_pchan_t *ch, gpuport_status_t status)
{
    if (status != GPUPORT_OK)
        gpuport_pchan_fail(ch, status);
    atomic_fetch_add_explicit(&ch->inline_done, 1, memory_order_release);
}

void gpuport_proxy_chan_complete(gpuport_pchan_t *ch, gpuport_status_t status)
{
    if (status != GPUPORT_OK)
        gpuport_pchan_fail(ch, status);
    ch->work_done++;
    ch->tl.comm->proxy.async_outstanding--;
    publish_flushes(ch);
    proxy_settle(ch);
    proxy_promise_if_done(ch);
}

int gpuport_proxy_post_conn_work(gpuport_comm_t comm, int conn_index, const gpuport_work_t *w)
{
    gpuport_flusher_t *fl = &comm->proxy.flusher;
    gpuport_work_t item = *w;

    if (!gpuport_flusher_has_room(fl, 1))
        return 0;
    item.channel = GPUPORT_WORK_CONN | (uint32_t)conn_index;
    return gpuport_flusher_post(fl, &item) == GPUPORT_OK;
}
