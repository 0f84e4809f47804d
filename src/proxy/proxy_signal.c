/*
 * Signals, folded (proxy_exec.c defers and emits them). A signal raises the
 * peer's count, and what the peer sees of consecutive signals of a channel
 * (no put between them) is only the last count: so the proxy takes a
 * channel's signals from the FIFO, counts them, and hands them to the
 * transport as one, at the end of the batch of triggers, or before the
 * channel's next put, flush or close. Deferring only delays a signal, so it
 * is still never seen before the data of the puts ahead of it; a flush
 * waits for it like for any earlier operation.
 */
#include <string.h>

#include "proxy_int.h"

static void exec_signal(gpuport_comm_t comm, gpuport_pchan_t *ch, uint64_t n)
{
    gpuport_work_t w;
    int rc;

    memset(&w, 0, sizeof(w));
    rc = ch->ops->signal(&ch->tl, n, ch->work_done < ch->work_posted, &w);
    proxy_transport_result(comm, ch, rc, &w);
}

void proxy_sig_defer(gpuport_comm_t comm, gpuport_pchan_t *ch, uint64_t n)
{
    GPUPORT_STAT_ADD(comm->proxy.sig_taken, n);
    ch->sig_pending += n;
    if (!ch->sig_listed) {
        ch->sig_listed = 1;
        comm->proxy.sig_list[comm->proxy.nsig++] = ch->tl.id;
    }
}

/* Hands the channel's deferred signals to its transport as one; a channel
 * in error drops them (it carries out nothing more). 0: no room now. */
int proxy_sig_emit(gpuport_comm_t comm, gpuport_pchan_t *ch)
{
    if (!ch->sig_pending)
        return 1;
    if (atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK) {
        ch->sig_pending = 0;
        return 1;
    }
    if (!gpuport_flusher_has_room(&comm->proxy.flusher, 1) ||
        (ch->ops->has_room && !ch->ops->has_room(&ch->tl, 1)))
        return 0;
    exec_signal(comm, ch, ch->sig_pending);
    GPUPORT_STAT_INC(comm->proxy.sig_sent);
    ch->sig_pending = 0;
    proxy_settle(ch);
    return 1;
}

/* Every channel's deferred signals; those without room stay listed. */
void proxy_sig_emit_all(gpuport_comm_t comm)
{
    uint32_t keep = 0;

    for (uint32_t i = 0; i < comm->proxy.nsig; i++) {
        gpuport_pchan_t *ch = &comm->pchans[comm->proxy.sig_list[i]];
        if (proxy_sig_emit(comm, ch))
            ch->sig_listed = 0;
        else
            comm->proxy.sig_list[keep++] = ch->tl.id;
    }
    comm->proxy.nsig = keep;
}
