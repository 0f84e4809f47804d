/*
 * The proxy thread: its loop, and gpuport_proxy_start, _quiet and _stop
 * (internal.h; called by the communicator, comm.c, and by channel destroy).
 * A pass reads the FIFOs (proxy_exec.c), the flusher's completions
 * (proxy_flush.c) and the network connections' traffic, now and then looks
 * for dead peers (proxy_watch.c) and closed channels (proxy_close.c), and
 * with nothing to do waits (proxy_idle.c) or, once stopping, drains
 * (proxy_drain.c). The thread makes no CUDA call and never blocks: when the
 * flusher has no room it leaves the trigger in the FIFO and comes back to
 * it after reading completions; when a channel's transport has no room it
 * parks the channel's triggers (proxy_park.c) and goes on with the others.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "proxy_int.h"

/* How often the proxy looks for same-host peers that have exited. */
#define PEER_WATCH_NS (50 * 1000 * 1000ull)
/* How often it looks for peers that closed or failed their side of a
 * channel this side is not using now (a channel in use finds out at its
 * next operation): a peer's gpuport_channel_destroy waits for the answer. */
#define CLOSE_SCAN_NS (2 * 1000 * 1000ull)
/* how often the proxy asks whether it shares its core (proxy_watch_crowding) */
#define CROWD_WATCH_NS (10 * 1000 * 1000ull)

/* Network transports' traffic: sends, receives, acknowledgements. */
static int progress_conns(gpuport_comm_t comm)
{
    int n = atomic_load_explicit(&comm->npconns, memory_order_acquire), done = 0;

    if (n == 0)
        return 0;
    for (int i = 0; i < comm->proxy.nactive_tls; i++) {
        gpuport_tl_comm_t *tc = comm->proxy.active_tls[i];
        if (tc->ops->comm_progress)
            done += tc->ops->comm_progress(tc);
    }
    for (int i = 0; i < n; i++)
        done += comm->pconns[i]->tl->ops->progress(comm->pconns[i]);
    return done;
}

/* The proxy's timer slack, in ns: the kernel may end a sleep this much
 * late (the default, 50 us, would be most of a 50 us sleep). */
#define PROXY_TIMER_SLACK_NS 1000

static void *proxy_main(void *arg)
{
    gpuport_comm_t comm = arg;
    uint64_t idle_since = gpuport_now_ns(), next_watch = idle_since + PEER_WATCH_NS;
    uint64_t next_scan = idle_since + CLOSE_SCAN_NS, pass = 0, next_crowd = idle_since;
    int device_first = 0;

    gpuport_log_set_rank(comm->rank);
    gpuport_topology_bind_self(comm->topo, comm->placement.proxy_cpu);
    if (prctl(PR_SET_TIMERSLACK, PROXY_TIMER_SLACK_NS, 0, 0, 0) != 0)
        log_debug("PR_SET_TIMERSLACK failed (%s); sleeps end up to 50 us late",
                  strerror(errno));
    atomic_store_explicit(&comm->proxy.running, 1, memory_order_release);
    for (;;) {
        int progressed, from_device = 0, from_host;
        uint64_t now;
        /* the only writer: a release store, no locked add, on every pass */
        atomic_store_explicit(&comm->proxy.passes, ++pass, memory_order_release);
        if (atomic_load_explicit(&comm->proxy.conn_work, memory_order_relaxed))
            atomic_store_explicit(&comm->proxy.conn_work, 0, memory_order_relaxed);
        /* the FIFO that last had triggers first: a kernel waiting on its
         * flush is answered before the other FIFO and the connections are
         * looked at */
        if (device_first)
            from_device = proxy_consume_fifo(comm, &comm->dfifo, GPUPORT_FIFO_DEVICE);
        progressed = from_device + proxy_read_completions(comm);
        /* parked triggers before the FIFOs' next ones */
        if (comm->proxy.npark_list)
            progressed += proxy_unpark(comm);
        from_host = proxy_consume_fifo(comm, &comm->fifo, GPUPORT_FIFO_HOST);
        if (!device_first && comm->dfifo.slots)
            from_device = proxy_consume_fifo(comm, &comm->dfifo, GPUPORT_FIFO_DEVICE);
        /* the connections after the FIFOs: what this pass took from them
         * goes out in this pass (with an ACK owed, in one sendmsg) */
        progressed += from_host + (device_first ? 0 : from_device) + progress_conns(comm);
        if (from_device || from_host)
            device_first = from_device > 0;
        now = gpuport_now_ns();
        if (now >= next_watch) {
            proxy_watch_peers(comm);
            proxy_watch_flusher(comm);
            next_watch = now + PEER_WATCH_NS;
        }
        if (now >= next_scan) {
            proxy_scan_closes(comm);
            next_scan = now + CLOSE_SCAN_NS;
        }
        if (now >= next_crowd) {
            proxy_watch_crowding(comm);
            next_crowd = now + CROWD_WATCH_NS;
        }
        if (progressed) {
            idle_since = now;
            comm->proxy.window_cpu_ns = 0; /* work is not the cost of sleeping */
            continue;
        }
        if (atomic_load_explicit(&comm->proxy.stop, memory_order_acquire) && proxy_may_exit(comm))
            break;
        proxy_idle_wait(comm, idle_since);
    }
    atomic_store_explicit(&comm->proxy.exited, 1, memory_order_release);
    return NULL;
}

gpuport_status_t gpuport_proxy_start(gpuport_comm_t comm)
{
    gpuport_status_t status;
    int rc;

    comm->proxy.peer_dead = calloc((size_t)comm->size, 1);
    comm->proxy.sig_list = calloc(comm->config.max_channels, sizeof(uint32_t));
    if (!comm->proxy.peer_dead || !comm->proxy.sig_list || proxy_park_init(comm) != GPUPORT_OK)
        return GPUPORT_ERR_NO_MEMORY;
    status = gpuport_waker_init(&comm->proxy.waker);
    if (status)
        return status;
    comm->proxy.wake_cost_ns = GPUPORT_IDLE_COST_GUESS_NS; /* until measured */
    /* Room for every FIFO entry to need two work items. */
    status = gpuport_flusher_start(&comm->proxy.flusher, 2 * comm->config.fifo_size, comm->rank,
                                   comm->gpu_device, comm->gpu, comm->timeout_ns, comm->topo,
                                   comm->placement.flusher_cpu);
    if (status) {
        gpuport_waker_fini(&comm->proxy.waker);
        return status;
    }
    /* before any work is posted: the flusher reads it after taking work */
    comm->proxy.flusher.proxy_waker = &comm->proxy.waker;
    rc = pthread_create(&comm->proxy.thread, NULL, proxy_main, comm);
    if (rc) {
        log_error("pthread_create(proxy) failed: %s", strerror(rc));
        gpuport_flusher_stop(&comm->proxy.flusher);
        gpuport_waker_fini(&comm->proxy.waker);
        return GPUPORT_ERR_NO_RESOURCE;
    }
    comm->proxy.started = 1;
    /* placed (like the flusher) by the time the communicator is returned */
    while (!atomic_load_explicit(&comm->proxy.running, memory_order_acquire))
        sched_yield();
    return GPUPORT_OK;
}

void gpuport_proxy_quiet(gpuport_comm_t comm)
{
    uint64_t start = atomic_load_explicit(&comm->proxy.passes, memory_order_acquire);
    uint32_t iter = 0;

    if (comm->proxy.started)
        gpuport_waker_poke(&comm->proxy.waker); /* a sleeping proxy passes at once */
    /* two starts: the pass that may have seen the slot active has ended */
    while (atomic_load_explicit(&comm->proxy.passes, memory_order_acquire) < start + 2 &&
           comm->proxy.started &&
           !atomic_load_explicit(&comm->proxy.exited, memory_order_acquire)) {
        if (gpuport_wait_backoff(&iter))
            usleep(20);
    }
}

void gpuport_proxy_stop(gpuport_comm_t comm)
{
    if (!comm->proxy.started)
        return;
    comm->proxy.drain_deadline_ns = gpuport_deadline(comm->timeout_ns);
    atomic_store_explicit(&comm->proxy.stop, 1, memory_order_release);
    gpuport_waker_poke(&comm->proxy.waker);
    pthread_join(comm->proxy.thread, NULL);
    comm->proxy.started = 0;
    /* What the proxy abandoned, the flusher may still be copying: it drains
     * its ring (bounded work) before it exits. */
    gpuport_flusher_stop(&comm->proxy.flusher);
    gpuport_waker_fini(&comm->proxy.waker);
    log_debug("proxy stopped: %llu triggers, %llu rejected, %llu abandoned",
              (unsigned long long)atomic_load(&comm->proxy.triggers),
              (unsigned long long)atomic_load(&comm->proxy.rejected),
              (unsigned long long)comm->proxy.abandoned);
}
