/*
 * Probe (not part of the library): what one wake-up of a sleeping thread
 * costs this machine, without gpuport. For each sleep primitive and period,
 * a thread with a 1 us timer slack sleeps in a loop for 0.5 s and reports
 * its CPU per wake-up (CLOCK_THREAD_CPUTIME_ID) and the share of a core;
 * then how long a thread asleep for 5 ms takes to run after another pokes
 * it through an eventfd or a futex (30 samples each). docs/PERFORMANCE.md,
 * "a CPU budget instead of a fixed cap", quotes a run. Build and run with
 * scripts/probes.sh.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static int efd; static _Atomic uint32_t fword;
static void do_sleep(int kind, long us)
{
    struct timespec ts = {0, us * 1000};
    if (kind == 0) nanosleep(&ts, NULL);
    else if (kind == 1) { struct pollfd p = {efd, POLLIN, 0}; ppoll(&p, 1, &ts, NULL); if (p.revents) { uint64_t v; read(efd, &v, 8);} }
    else if (kind == 2) syscall(SYS_futex, &fword, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    else { uint64_t t = now(CLOCK_MONOTONIC) + us * 1000ull; struct timespec a = {t / 1000000000ull, t % 1000000000ull}; clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &a, NULL); }
}
static const char *names[] = {"nanosleep", "ppoll(eventfd)", "futex_wait", "clock_nanosleep abs"};
static volatile uint64_t poke_t; static volatile int woke_kind = -1; static volatile uint64_t woke_t;
static void *sleeper(void *a)
{
    int kind = (int)(intptr_t)a;
    prctl(PR_SET_TIMERSLACK, 1000UL);
    struct timespec ts = {0, 100 * 1000000L};
    if (kind == 1) { struct pollfd p = {efd, POLLIN, 0}; ppoll(&p, 1, &ts, NULL); uint64_t v; read(efd, &v, 8); }
    else syscall(SYS_futex, &fword, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    woke_t = now(CLOCK_MONOTONIC);
    return NULL;
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(void)
{
    efd = eventfd(0, EFD_NONBLOCK);
    prctl(PR_SET_TIMERSLACK, 1000UL);
    long periods[] = {10, 20, 50, 100, 200, 500};
    printf("%-22s %8s %10s %12s %10s\n", "primitive", "req_us", "wakes/s", "cpu_us/wake", "cpu_%");
    for (int k = 0; k < 4; k++)
        for (int p = 0; p < 6; p++) {
            uint64_t c0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC); long n = 0;
            while (now(CLOCK_MONOTONIC) - w0 < 500000000ull) { do_sleep(k, periods[p]); n++; }
            double wall = (now(CLOCK_MONOTONIC) - w0) / 1e9, cpu = (now(CLOCK_THREAD_CPUTIME_ID) - c0) / 1e3;
            printf("%-22s %8ld %10.0f %12.2f %9.1f%%  (actual period %.1f us)\n", names[k],
                   periods[p], n / wall, cpu / n, 100.0 * cpu / (wall * 1e6), wall * 1e6 / n);
        }
    for (int kind = 1; kind <= 2; kind++) {
        double lat[30];
        for (int i = 0; i < 30; i++) {
            pthread_t t; woke_t = 0;
            pthread_create(&t, NULL, sleeper, (void *)(intptr_t)kind);
            usleep(5000);
            uint64_t t0 = now(CLOCK_MONOTONIC);
            if (kind == 1) { uint64_t v = 1; write(efd, &v, 8); } else { atomic_store(&fword, 1); syscall(SYS_futex, &fword, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }
            pthread_join(t, NULL);
            lat[i] = (woke_t - t0) / 1e3; atomic_store(&fword, 0);
        }
        qsort(lat, 30, sizeof(double), cmp);
        printf("poke latency %s: min %.1f median %.1f max %.1f us\n", names[kind], lat[0], lat[15], lat[29]);
    }
    return 0;
}
