/* Clock, deadlines, back-off, pid liveness; see util.h. */
#include "util.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t gpuport_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t gpuport_deadline(uint64_t timeout_ns)
{
    uint64_t now = gpuport_now_ns();

    if (timeout_ns == 0 || timeout_ns > UINT64_MAX - now)
        return UINT64_MAX;
    return now + timeout_ns;
}

int gpuport_deadline_passed(uint64_t deadline)
{
    return deadline != UINT64_MAX && gpuport_now_ns() > deadline;
}

int gpuport_deadline_ms(uint64_t deadline, int cap_ms)
{
    uint64_t now, ms;

    if (deadline == UINT64_MAX)
        return cap_ms;
    now = gpuport_now_ns();
    if (now >= deadline)
        return 0;
    ms = (deadline - now) / 1000000 + 1;
    return ms > (uint64_t)cap_ms ? cap_ms : (int)ms;
}

int gpuport_wait_backoff(uint32_t *iter)
{
    /* Spinning keeps latency low while the wait is short; yielding keeps an
     * oversubscribed node (more ranks and proxies than cores) moving. */
    if (++*iter <= GPUPORT_SPIN_POLLS)
        return 0;
    sched_yield();
    return 1;
}

int gpuport_pid_alive(int pid)
{
    char path[64], buf[256], *state;
    FILE *f;
    size_t n;

    /* kill(pid, 0) succeeds on a zombie, which has exited all the same */
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (!f)
        return !(kill(pid, 0) == -1 && errno == ESRCH);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    state = strrchr(buf, ')'); /* the command name may hold spaces */
    return !(state && (state[2] == 'Z' || state[2] == 'X'));
}
