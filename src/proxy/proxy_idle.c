/*
 * What the proxy does on a pass without work (proxy.c calls
 * proxy_idle_wait): spin, yield, or sleep on its eventfd and the network
 * sockets, by the idle policy (gpuport_idle_step) and within the CPU budget
 * (GPUPORT_PROXY_IDLE_CPU), whose divisor, the cost of a wake-up, it
 * measures on itself.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include "proxy_int.h"

/* Work that can wake the proxy is visible (host pushes, flusher
 * completions, what a host wait left the connections, a stop): its last
 * look before it sleeps. */
static int wakeable_work(gpuport_comm_t comm)
{
    gpuport_trigger_t t;

    return gpuport_fifo_peek(&comm->fifo, 0, &t) ||
           !gpuport_ring_empty(&comm->proxy.flusher.done) ||
           atomic_load_explicit(&comm->proxy.conn_work, memory_order_relaxed) ||
           atomic_load_explicit(&comm->proxy.stop, memory_order_relaxed);
}

/* The longest sleep the configuration allows: without a device FIFO
 * everything that brings work wakes the proxy (ib's completions aside), so
 * a host-only communicator has its own bound. */
static uint64_t sleep_bound(gpuport_comm_t comm)
{
    return comm->dfifo.slots ? comm->config.proxy_sleep_max_us
                             : comm->config.proxy_sleep_host_max_us;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* After each sleep: what GPUPORT_IDLE_WINDOW sleeps in a row cost this
 * thread, sleep and pass, becomes the wake-up cost the budget divides
 * (a running mean, so one noisy window moves it a quarter). A pass with
 * work ends the window (proxy_main): work is not the cost of sleeping. */
static void measure_wake_cost(gpuport_comm_t comm)
{
    gpuport_proxy_t *px = &comm->proxy;
    uint64_t now, cost;

    if (px->window_cpu_ns == 0) {
        px->window_cpu_ns = thread_cpu_ns();
        px->window_sleeps = 0;
        return;
    }
    if (++px->window_sleeps < GPUPORT_IDLE_WINDOW)
        return;
    now = thread_cpu_ns();
    cost = now > px->window_cpu_ns ? (now - px->window_cpu_ns) / GPUPORT_IDLE_WINDOW : 0;
    px->window_cpu_ns = now;
    px->window_sleeps = 0;
    if (cost == 0)
        return;
    px->wake_cost_ns = px->wake_cost_told ? (3 * px->wake_cost_ns + cost) / 4 : cost;
    if (!px->wake_cost_told) {
        const gpuport_config_t *cfg = &comm->config;
        uint64_t max = sleep_bound(comm);
        px->wake_cost_told = 1;
        log_info("idle proxy: a sleep and the pass after it cost %.1f us of CPU here, so sleeps "
                 "of up to %llu us keep it within %llu%% of a core (GPUPORT_PROXY_IDLE_CPU; at "
                 "most %llu us)",
                 (double)cost / 1000.0,
                 (unsigned long long)gpuport_idle_budget_us(cost, cfg->proxy_idle_cpu * 10, max),
                 (unsigned long long)cfg->proxy_idle_cpu, (unsigned long long)max);
    }
}

/* An idle proxy sleeps in ppoll on its eventfd (host pushes, flusher
 * completions, stop and quiet write it when it sleeps: waker.h) and on the
 * descriptors the transports give (tcp: one epoll descriptor for all its
 * sockets), so that any of those wakes it at once;
 * kernels' triggers are seen when the sleep ends. */
static void idle_sleep(gpuport_comm_t comm, uint32_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    struct pollfd fds[65];
    int nfds = 0;

    fds[nfds].fd = comm->proxy.waker.fd;
    fds[nfds].events = POLLIN;
    nfds++;
    for (int i = 0; i < comm->proxy.nactive_tls && nfds < 65; i++) {
        gpuport_tl_comm_t *tc = comm->proxy.active_tls[i];
        if (tc->ops->poll_fds)
            nfds += tc->ops->poll_fds(tc, fds + nfds, 65 - nfds);
    }
    gpuport_waker_sleepy(&comm->proxy.waker);
    if (!wakeable_work(comm) && ppoll(fds, (nfds_t)nfds, &ts, NULL) > 0 &&
        (fds[0].revents & POLLIN))
        atomic_fetch_add_explicit(&comm->proxy.waker.woken, 1, memory_order_relaxed);
    gpuport_waker_awake(&comm->proxy.waker);
    if (comm->config.proxy_idle_cpu)
        measure_wake_cost(comm);
}

void proxy_watch_crowding(gpuport_comm_t comm)
{
    gpuport_proxy_t *px = &comm->proxy;
    struct rusage ru;
    uint64_t n, cpu = thread_cpu_ns(), now = gpuport_now_ns();

    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return;
    n = (uint64_t)ru.ru_nivcsw;
    /* Crowded: preempted more than once in the window (a spinning proxy
     * that shares its core with a busy thread is, every few ms), and short
     * of a quarter of the window's time or more. A few preemptions by the kernel's own
     * short work (softirq threads under heavy traffic) keep it on its core
     * nearly all the time: not crowded. */
    px->crowded = px->watch_ns && n - px->nivcsw >= 2 &&
                  (cpu - px->watch_cpu_ns) * 4 < (now - px->watch_ns) * 3;
    px->nivcsw = n;
    px->watch_cpu_ns = cpu;
    px->watch_ns = now;
    if (px->crowded && !px->crowded_told) {
        px->crowded_told = 1;
        log_info("the proxy is preempted (its cores are shared with other busy threads): it "
                 "yields its core while it polls from now on, whenever that recurs");
    }
}

/* Spin briefly, then poll with sched_yield (as fast as spinning on a free
 * core, polite on a crowded one) until GPUPORT_PROXY_IDLE_US without work,
 * then sleep, longer the longer the pause (gpuport_idle_step), up to what
 * the CPU budget allows (gpuport_idle_budget_us, with the measured cost of
 * a wake-up): a sleeping proxy sees a kernel's first trigger when its
 * sleep ends. */
void proxy_idle_wait(gpuport_comm_t comm, uint64_t idle_since)
{
    const gpuport_config_t *cfg = &comm->config;
    gpuport_idle_policy_t policy = {
        cfg->proxy_idle_us,
        gpuport_idle_budget_us(comm->proxy.wake_cost_ns, cfg->proxy_idle_cpu * 10,
                               sleep_bound(comm)),
        cfg->proxy_sleep_scale};
    uint32_t us;

    uint64_t now = gpuport_now_ns();

    switch (gpuport_idle_step(&policy, now - idle_since, &us)) {
    case GPUPORT_IDLE_SPIN:
        /* where the kernel has to preempt it, spinning only delays the
         * threads it waits for (the application's answer, the peer's
         * proxy): a measured 60 us per 8 B tcp half round trip on 2
         * cores, 11 us yielding */
        if (comm->proxy.crowded)
            sched_yield();
        return;
    case GPUPORT_IDLE_YIELD:
        sched_yield();
        return;
    case GPUPORT_IDLE_SLEEP:
        if (now < comm->proxy.awake_until_ns) {
            sched_yield(); /* a transport's own work is due soon */
            return;
        }
        idle_sleep(comm, us);
        return;
    }
}
