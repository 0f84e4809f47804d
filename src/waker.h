/*
 * A thread that sleeps when idle, and what wakes it at once.
 *
 * The sleeper sets `sleeping`, then looks for work one last time, then
 * sleeps in ppoll on `fd` (an eventfd, beside whatever sockets it also
 * waits on). A producer publishes its work, then pokes: a sequentially
 * consistent fence on each side between the write and the read of the
 * other's word means that either the sleeper's last look sees the work or
 * the producer sees the flag (and writes the eventfd). The first producer
 * to see the flag clears it, so a burst of pushes makes one system call.
 * Producers that find the flag clear pay one fence and one load of a line
 * that is rarely written.
 */
#ifndef GPUPORT_WAKER_H
#define GPUPORT_WAKER_H

#include <stdatomic.h>
#include <stdint.h>

#include "gpuport/gpuport.h"

typedef struct gpuport_waker {
    _Alignas(64) _Atomic int sleeping;
    int fd;                  /* eventfd, nonblocking; -1 before init */
    _Atomic uint64_t kicks;  /* eventfd writes: how often a sleeper was woken early */
    _Atomic uint64_t woken;  /* sleeps that ended with the eventfd readable (the
                              * sleeper's count; test_idle reads it) */
} gpuport_waker_t;

gpuport_status_t gpuport_waker_init(gpuport_waker_t *w);
void gpuport_waker_fini(gpuport_waker_t *w);
/* Writes the eventfd if the sleeper had not been woken since it set the
 * flag. Any thread. */
void gpuport_waker_kick(gpuport_waker_t *w);
/* Sleeper: after ppoll returned, clears the flag and empties the eventfd. */
void gpuport_waker_awake(gpuport_waker_t *w);

/* Producer, after publishing work the sleeper looks for. */
static inline void gpuport_waker_poke(gpuport_waker_t *w)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&w->sleeping, memory_order_relaxed))
        gpuport_waker_kick(w);
}

/* Sleeper, before its last look for work. */
static inline void gpuport_waker_sleepy(gpuport_waker_t *w)
{
    atomic_store_explicit(&w->sleeping, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
}

/* What an idle proxy does after idle_ns without work (a pure function of
 * the policy and the time; test_idle checks the schedule):
 *  - spin, for the first GPUPORT_IDLE_SPIN_NS;
 *  - poll with sched_yield until poll_us (GPUPORT_PROXY_IDLE_US);
 *  - then sleep *sleep_us: idle time / scale, at least 1 us and at most
 *    sleep_max_us (GPUPORT_PROXY_SLEEP_MAX_US, or _SLEEP_HOST_MAX_US
 *    without a device FIFO, capped by the CPU budget: proxy_idle.c), so
 *    that the wake-up of a short pause is prompt and a long one costs
 *    little CPU; scale 0 sleeps sleep_max_us at once. sleep_max_us 0 never
 *    sleeps (yields). */
#define GPUPORT_IDLE_SPIN_NS 20000ull
typedef enum { GPUPORT_IDLE_SPIN, GPUPORT_IDLE_YIELD, GPUPORT_IDLE_SLEEP } gpuport_idle_action_t;
typedef struct gpuport_idle_policy {
    uint64_t poll_us;
    uint64_t sleep_max_us;
    uint64_t scale;
} gpuport_idle_policy_t;

gpuport_idle_action_t gpuport_idle_step(const gpuport_idle_policy_t *p, uint64_t idle_ns,
                                        uint32_t *sleep_us);

/* The longest sleep that keeps a sleeping proxy within its CPU budget: a
 * sleep and the pass after it cost wake_cost_ns of the thread's CPU, so
 * sleeps of wake_cost_ns / budget use `budget` of a core (budget_pm per
 * mille). The shortest such sleep answers soonest: that is the cap, rounded
 * up to whole microseconds, at least 1 and at most max_us (the
 * configured bound). budget_pm 0: no budget, max_us. */
uint64_t gpuport_idle_budget_us(uint64_t wake_cost_ns, uint64_t budget_pm, uint64_t max_us);
/* Sleeps per measurement of the wake-up cost, and its first guess (a
 * wake-up on an unvirtualized x86 server). */
#define GPUPORT_IDLE_WINDOW 64u
#define GPUPORT_IDLE_COST_GUESS_NS 2000ull

#endif
