/*
 * Small helpers every part of gpuport may use, core and transports alike:
 * the clock, deadlines, the back-off of waiting loops, whether a process
 * on this host still exists, and whether a word a peer sent is a status.
 * They depend on nothing else in gpuport, so the
 * link graph stays free of cycles (test/tools/link_graph.sh).
 */
#ifndef GPUPORT_UTIL_H
#define GPUPORT_UTIL_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds */
uint64_t gpuport_now_ns(void);

/* The absolute deadline `timeout_ns` from now; 0 (no timeout) gives
 * UINT64_MAX, which never passes. */
uint64_t gpuport_deadline(uint64_t timeout_ns);
/* 1 once the deadline is past */
int gpuport_deadline_passed(uint64_t deadline);
/* Milliseconds until the deadline for poll(), at most cap_ms (also when
 * there is no deadline): 0 once past, else at least 1 (a wait rounded down
 * to 0 would spin). */
int gpuport_deadline_ms(uint64_t deadline, int cap_ms);

/* Backoff for waiting loops on application threads: spin, then yield.
 * Returns 1 once yielding: a yield can take a whole time slice, so callers
 * then check their deadline on every pass instead of every 1024th. */
#define GPUPORT_SPIN_POLLS 128
int gpuport_wait_backoff(uint32_t *iter);

/* 0 if the process is gone (same host only; a zombie counts as gone) */
int gpuport_pid_alive(int pid);

/* 1 if word is one of gpuport_status_t's errors (status.c holds the list):
 * the only statuses a peer may report. GPUPORT_OK, a positive word or one
 * the enum lacks is not, and must not be cast to gpuport_status_t (1 << 32
 * would become GPUPORT_OK). */
int gpuport_status_is_error(int64_t word);

#endif
