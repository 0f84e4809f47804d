/*
 * What the proxy thread's files share; only they include it (and one test of
 * proxy_settle's rule, test_host_inline). The proxy (one thread per
 * communicator) is split by job:
 *   proxy.c         the loop, and starting, quieting and stopping the thread
 *   proxy_take.c    triggers taken from the FIFOs, a batch a pass
 *   proxy_exec.c    a trigger checked and carried out
 *   proxy_rma.c     ... a get, atomic_add or accumulate, checked by the rules
 *                   the host calls share
 *   proxy_park.c    triggers of a channel whose transport has no room, kept
 *                   in order apart from the FIFOs while the others go on
 *   proxy_signal.c  signals folded, handed to the transport as one
 *   proxy_flush.c   work in flight counted, completions read, flushes answered
 *   proxy_close.c   a channel's failure and close, and what the peer is told
 *   proxy_idle.c    spinning, yielding and sleeping within the CPU budget
 *   proxy_watch.c   same-host peers that exited, a flusher held inside CUDA
 *   proxy_drain.c   stopping: draining, network peers' answers, abandoning the rest
 * Everything declared here runs on the proxy thread.
 */
#ifndef GPUPORT_PROXY_INT_H
#define GPUPORT_PROXY_INT_H

#include <stdint.h>

#include "internal.h"

/* What carrying out a trigger gives: done (the FIFO moves past it), or
 * retry (no room now: it is parked with its channel, or, when what is
 * missing is the flusher's room, which every channel shares, it stays at
 * the FIFO's tail). */
enum { EXEC_DONE, EXEC_RETRY };

/* proxy_take.c: takes the triggers at the tail of FIFO f (fifo:
 * GPUPORT_FIFO_HOST or GPUPORT_FIFO_DEVICE), a batch at most, carries them
 * out or parks them, and hands over the signals they deferred; returns the
 * number taken. proxy_exec.c: proxy_execute carries out one decoded trigger whose last
 * slot was at position pos (EXEC_DONE or EXEC_RETRY); proxy_trace_trigger
 * is its line at GPUPORT_LOG_LEVEL=trace. */
int proxy_consume_fifo(gpuport_comm_t comm, gpuport_fifo_t *f, int fifo);
int proxy_execute(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo, uint64_t pos);
void proxy_trace_trigger(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo,
                         uint64_t pos, uint32_t used);

/* proxy_park.c: a channel's triggers that found no room at its transport
 * wait in its park, in FIFO order, and every later trigger of the channel
 * joins them there, so the FIFOs move on for the other channels.
 * park_init: the parks of the communicator (proxy start; comm.c frees
 * them, gpuport_proxy_parks_free);
 * proxy_parked: how many the channel has; proxy_park: parks a trigger (0:
 * the park is full, GPUPORT_PARK_MAX, and the trigger stays in its FIFO);
 * proxy_unpark: carries out what it can of every park, in order, and fails
 * a channel whose oldest parked trigger has found no room for the
 * communicator's time limit (returns how many were carried out);
 * proxy_park_abandon: at the drain deadline, names each channel with
 * parked triggers and fails it (returns how many triggers). */
gpuport_status_t proxy_park_init(gpuport_comm_t comm);
uint32_t proxy_parked(gpuport_comm_t comm, const gpuport_pchan_t *ch);
int proxy_park(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d, int fifo,
               uint64_t pos, uint32_t used);
int proxy_unpark(gpuport_comm_t comm);
uint64_t proxy_park_abandon(gpuport_comm_t comm);

/* proxy_signal.c: a signal taken from the FIFO and held back, to be handed
 * over with the channel's next ones (sig_defer); the channel's held signals
 * handed to its transport as one, 0 if there is no room now (sig_emit);
 * every channel's (sig_emit_all, after each batch). */
void proxy_sig_defer(gpuport_comm_t comm, gpuport_pchan_t *ch, uint64_t n);
int proxy_sig_emit(gpuport_comm_t comm, gpuport_pchan_t *ch);
void proxy_sig_emit_all(gpuport_comm_t comm);

/* proxy_flush.c: what the core does with a transport's answer to put,
 * put_value or signal (rc, and the flusher work w it asks for); a flush
 * trigger at position pos of FIFO fifo (EXEC_DONE or EXEC_RETRY); the
 * flusher's completions, read and counted (how many). */
void proxy_transport_result(gpuport_comm_t comm, gpuport_pchan_t *ch, int rc,
                            const gpuport_work_t *w);
int proxy_exec_flush(gpuport_pchan_t *ch, int fifo, uint64_t pos);
/* proxy_rma.c: a get, atomic_add or accumulate trigger, checked
 * (gpuport_rma_check: a bad one fails its channel) and handed to the
 * transport (EXEC_DONE). */
int proxy_exec_rma(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d);
/* Publishes host_seen in flushed[host] once every host operation of the
 * channel taken so far is complete: no work at the flusher or with the
 * transport, no deferred signal, no pending flush. Called after each host
 * trigger, each signal handed over and each completion. */
void proxy_settle(gpuport_pchan_t *ch);
int proxy_read_completions(gpuport_comm_t comm);

/* What follows a trigger carried out: the host FIFO's settled position,
 * the count, the trace line. Inline: it follows every trigger. */
static inline void proxy_carried(gpuport_comm_t comm, const gpuport_op_desc_t *d, int fifo,
                                 uint64_t pos, uint32_t used)
{
    if (fifo == GPUPORT_FIFO_HOST && d->channel < comm->config.max_channels &&
        atomic_load_explicit(&comm->pchans[d->channel].active, memory_order_relaxed)) {
        gpuport_pchan_t *ch = &comm->pchans[d->channel];
        ch->host_seen = pos + 1;
        proxy_settle(ch);
    }
    if (GPUPORT_LOG_ON_AT(GPUPORT_SUBSYS_PROXY, GPUPORT_LOG_TRACE))
        proxy_trace_trigger(comm, d, fifo, pos, used);
    GPUPORT_STAT_INC(comm->proxy.triggers);
}

/* proxy_close.c: the peer's word in this rank's slot for the channel
 * (GPUPORT_OK, or it failed or closed its side); a close trigger
 * (EXEC_DONE or EXEC_RETRY); this side's promise to write nothing more,
 * made once it holds (promise_if_done); the periodic look at channels not
 * in use whose peer closed (scan_closes). */
int32_t proxy_peer_word(gpuport_comm_t comm, const gpuport_pchan_t *ch);
int proxy_exec_close(gpuport_pchan_t *ch);
void proxy_promise_if_done(gpuport_pchan_t *ch);
void proxy_scan_closes(gpuport_comm_t comm);

/* proxy_idle.c: a pass without work; spins, yields or sleeps by how long
 * the proxy has been idle (since idle_since, gpuport_now_ns). */
void proxy_idle_wait(gpuport_comm_t comm, uint64_t idle_since);
/* proxy_idle.c, every 10 ms: whether the kernel preempted the proxy since
 * the last call and it lost time to it (then it yields even while it
 * spins). */
void proxy_watch_crowding(gpuport_comm_t comm);

/* proxy_watch.c: fails the channels of same-host peers that exited;
 * warns (once per call) of a flusher call held inside CUDA. */
void proxy_watch_peers(gpuport_comm_t comm);
void proxy_watch_flusher(gpuport_comm_t comm);

/* proxy_drain.c: once stop is asked, 1 when the proxy may exit: drained
 * with every network peer's answer in and goodbye said, or past the drain deadline (what is left
 * then failed). */
int proxy_may_exit(gpuport_comm_t comm);

#endif
