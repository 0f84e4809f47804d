/* Waking an idle proxy; see waker.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include "waker.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

gpuport_status_t gpuport_waker_init(gpuport_waker_t *w)
{
    atomic_store(&w->sleeping, 0);
    atomic_store(&w->kicks, 0);
    atomic_store(&w->woken, 0);
    w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->fd < 0) {
        log_error("eventfd (the proxy's wake-up) failed: %s", strerror(errno));
        return GPUPORT_ERR_NO_RESOURCE;
    }
    return GPUPORT_OK;
}

void gpuport_waker_fini(gpuport_waker_t *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}

void gpuport_waker_kick(gpuport_waker_t *w)
{
    int one = 1;
    uint64_t v = 1;

    /* the first to see the flag writes; the others find it cleared */
    if (!atomic_compare_exchange_strong(&w->sleeping, &one, 0))
        return;
    atomic_fetch_add_explicit(&w->kicks, 1, memory_order_relaxed);
    /* nonblocking: a full counter (2^64 - 2 writes unread) still wakes */
    if (write(w->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
        log_warn("waking the proxy: write to its eventfd failed: %s", strerror(errno));
}

void gpuport_waker_awake(gpuport_waker_t *w)
{
    uint64_t v;

    atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
    /* a kick may land after this read: the next sleep then returns at
     * once and finds nothing, which costs one pass */
    while (read(w->fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
        ;
}

gpuport_idle_action_t gpuport_idle_step(const gpuport_idle_policy_t *p, uint64_t idle_ns,
                                        uint32_t *sleep_us)
{
    uint64_t us;

    *sleep_us = 0;
    if (idle_ns < GPUPORT_IDLE_SPIN_NS)
        return GPUPORT_IDLE_SPIN;
    if (idle_ns < p->poll_us * 1000ull || p->sleep_max_us == 0)
        return GPUPORT_IDLE_YIELD;
    us = p->scale ? idle_ns / 1000ull / p->scale : p->sleep_max_us;
    if (us < 1)
        us = 1;
    if (us > p->sleep_max_us)
        us = p->sleep_max_us;
    *sleep_us = (uint32_t)us;
    return GPUPORT_IDLE_SLEEP;
}

uint64_t gpuport_idle_budget_us(uint64_t wake_cost_ns, uint64_t budget_pm, uint64_t max_us)
{
    uint64_t us;

    if (budget_pm == 0 || max_us == 0)
        return max_us;
    /* cost / (budget_pm / 1000), in us: cost_ns / budget_pm, rounded up */
    us = (wake_cost_ns + budget_pm - 1) / budget_pm;
    if (us < 1)
        us = 1;
    return us < max_us ? us : max_us;
}
