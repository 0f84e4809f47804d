/* gpuport_comm_stats: the proxy service's counters and CPU cost. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "layout.h"

static uint64_t thread_cpu_ns(pthread_t thread)
{
    clockid_t clock;
    struct timespec ts;

    if (pthread_getcpuclockid(thread, &clock) != 0 || clock_gettime(clock, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Layout 1, from before host_inline: the same members, one fewer. */
#define STATS_V1_SIZE offsetof(gpuport_comm_stats_t, host_inline)
#define STATS_V1_LAYOUT ((1u << 16) | (uint32_t)STATS_V1_SIZE)

/* A program's struct of another layout is not written: its members would
 * be at other offsets, and a smaller one would be overrun. Layout 1 is a
 * prefix of this one and gets its first STATS_V1_SIZE bytes. */
gpuport_status_t gpuport_comm_stats_v(uint32_t layout, gpuport_comm_t comm,
                                      gpuport_comm_stats_t *stats_p)
{
    gpuport_comm_stats_t s;

    if (!gpuport_comm_live(comm) || !stats_p) {
        log_error("gpuport_comm_stats: comm %p (a live communicator) and stats_p %p must be set",
                  (void *)comm, (void *)stats_p);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (layout != STATS_V1_LAYOUT &&
        gpuport_layout_check("gpuport_comm_stats", "gpuport_comm_stats_t", layout,
                             GPUPORT_STATS_LAYOUT))
        return GPUPORT_ERR_VERSION;
    memset(&s, 0, sizeof(s));
    s.triggers = atomic_load_explicit(&comm->proxy.triggers, memory_order_relaxed);
    s.rejected = atomic_load_explicit(&comm->proxy.rejected, memory_order_relaxed);
    s.flusher_items = atomic_load_explicit(&comm->proxy.flusher.completed, memory_order_relaxed);
    s.host_inline = atomic_load_explicit(&comm->host_inline_ops, memory_order_relaxed);
    if (comm->proxy.started) {
        s.proxy_cpu_ns = thread_cpu_ns(comm->proxy.thread);
        /* none in a host-only comm before its first work */
        if (atomic_load_explicit(&comm->proxy.flusher.running, memory_order_acquire))
            s.flusher_cpu_ns = thread_cpu_ns(comm->proxy.flusher.thread);
    }
    memcpy(stats_p, &s, layout == STATS_V1_LAYOUT ? STATS_V1_SIZE : sizeof(s));
    return GPUPORT_OK;
}
