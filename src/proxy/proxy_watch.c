/*
 * The proxy's watchers (proxy.c calls them every PEER_WATCH_NS): same-host
 * peers that exited, whose channels it fails because a kernel waiting on
 * them cannot look; and a flusher call held inside CUDA, which it explains,
 * because nothing else can.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include "proxy_int.h"

/* A kernel waiting for a dead peer's signal cannot look for the peer
 * itself: the proxy does, for ranks on this host, and fails their channels
 * on this side (state and inbound slot), so that host and device waiters
 * return GPUPORT_ERR_PEER within PEER_WATCH_NS instead of waiting out
 * GPUPORT_TIMEOUT_MS. Peers on other hosts are the transports' to watch. */
#define PEER_DEAD 1
#define PEER_WATCHED 2

void proxy_watch_peers(gpuport_comm_t comm)
{
    const gpuport_proc_rec_t *me = &comm->procs[comm->rank];
    unsigned char *flags = comm->proxy.peer_dead;

    /* Only peers with a live channel: creating one over a same-host transport
     * proved their /proc entries are ours to see (no false "exited" for a
     * rank in another pid namespace). */
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (atomic_load_explicit(&ch->active, memory_order_acquire))
            flags[ch->tl.peer] |= PEER_WATCHED;
    }
    for (int p = 0; p < comm->size; p++) {
        const gpuport_proc_rec_t *peer = &comm->procs[p];
        int failed = 0, watched = flags[p] & PEER_WATCHED;

        flags[p] &= (unsigned char)~PEER_WATCHED;
        if (!watched || p == comm->rank || (flags[p] & PEER_DEAD) ||
            peer->host_id != me->host_id || gpuport_pid_alive(peer->pid))
            continue;
        flags[p] |= PEER_DEAD;
        for (uint32_t i = 0; i < comm->config.max_channels; i++) {
            gpuport_pchan_t *ch = &comm->pchans[i];
            if (!atomic_load_explicit(&ch->active, memory_order_acquire) || ch->tl.peer != p)
                continue;
            /* a peer that closed the channel in order and then exited has
             * not failed it: the channel stays closed, not failed */
            if (proxy_peer_word(comm, ch) == GPUPORT_ERR_CLOSED)
                continue;
            gpuport_pchan_fail(ch, GPUPORT_ERR_PEER);
            gpuport_tl_sem_fail(comm, i, GPUPORT_ERR_PEER);
            failed++;
        }
        if (failed)
            log_error("rank %d (pid %d) has exited: its %d channel(s) with this rank are failed",
                      p, peer->pid, failed);
    }
}

/* A flusher call that names the application's context and has not
 * returned after this long is held by CUDA (docs/ARCHITECTURE.md). */
#define FLUSHER_HELD_NS (500 * 1000 * 1000ull)

/* Says once per held call why the flusher stopped: no error can, as the
 * flusher cannot return before CUDA lets it, and a kernel waiting on the
 * copy's signal (GPUPORT_TIMEOUT_MS=0: for ever) sees only silence. */
void proxy_watch_flusher(gpuport_comm_t comm)
{
    uint64_t since = atomic_load_explicit(&comm->proxy.flusher.app_call_since_ns,
                                          memory_order_relaxed);
    /* read after the stamp: a call stamped after an earlier reading of the
     * clock would look older than time itself */
    uint64_t now = gpuport_now_ns();

    if (since == 0 || since == comm->proxy.held_warned || now < since ||
        now - since < FLUSHER_HELD_NS)
        return;
    comm->proxy.held_warned = since;
    log_warn("the flusher has waited %llu ms inside CUDA for a copy from the application's "
             "cudaMalloc memory to be accepted: CUDA holds such copies while a thread of the "
             "application is in a synchronous cudaMemcpy waiting for a kernel, and if that "
             "kernel waits on this rank's or a peer's channel, neither ends (until "
             "GPUPORT_TIMEOUT_MS). Synchronize the kernel's stream before cudaMemcpy, or "
             "use VMM memory (gpuport_mem_alloc_device), which is copied without the "
             "application's context",
             (unsigned long long)((now - since) / 1000000));
}
