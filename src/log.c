/* Leveled logging; see log.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic int gpuport_log_levels[GPUPORT_LOG_NSUBSYS] = {
    [0 ... GPUPORT_LOG_NSUBSYS - 1] = GPUPORT_LOG_WARN};

static _Thread_local int log_rank = -1;

/* what the levels are made of; under settings_lock */
static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;
static int set_level = GPUPORT_LOG_WARN;
static uint32_t set_mask = GPUPORT_LOG_SUBSYS_ALL;

/* Where lines go. The descriptor is read by every line, unlocked; what
 * opened it, under sink_lock. */
static _Atomic int sink_fd = STDERR_FILENO;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static char sink_path[PATH_MAX]; /* the expanded GPUPORT_LOG_FILE; "" while none */
static pid_t sink_pid;           /* the process that opened it */

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host_name[64];

static void levels_apply(void)
{
    for (int s = 0; s < GPUPORT_LOG_NSUBSYS; s++) {
        int level = set_level;
        if (!(set_mask & (1u << s)) && level > GPUPORT_LOG_WARN)
            level = GPUPORT_LOG_WARN;
        atomic_store_explicit(&gpuport_log_levels[s], level, memory_order_relaxed);
    }
}

void gpuport_log_set_level(int level)
{
    pthread_mutex_lock(&settings_lock);
    set_level = level;
    levels_apply();
    pthread_mutex_unlock(&settings_lock);
}

void gpuport_log_set_subsys(uint32_t mask)
{
    pthread_mutex_lock(&settings_lock);
    set_mask = mask;
    levels_apply();
    pthread_mutex_unlock(&settings_lock);
}

void gpuport_log_set_rank(int rank)
{
    log_rank = rank;
}

static void host_read(void)
{
    char name[256] = "";

    if (gethostname(name, sizeof(name) - 1) != 0 || !name[0])
        snprintf(name, sizeof(name), "unknown");
    name[strcspn(name, ".")] = '\0';
    snprintf(host_name, sizeof(host_name), "%s", name);
}

const char *gpuport_log_host(void)
{
    pthread_once(&host_once, host_read);
    return host_name;
}

/* All of it, or what the descriptor takes before an error: a log line is
 * never worth failing for. */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t done = write(fd, buf, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return;
        buf += done;
        n -= (size_t)done;
    }
}

void gpuport_log_write(int subsys, int level, const char *file, int line, const char *fmt, ...)
{
    char buf[1280];
    struct timespec now;
    va_list ap;
    size_t n;
    int msg, saved_errno = errno;

    clock_gettime(CLOCK_REALTIME, &now);
    n = gpuport_log_prefix(buf, sizeof(buf) - 1, (int64_t)now.tv_sec, now.tv_nsec / 1000,
                           gpuport_log_host(), (long)getpid(), (long)syscall(SYS_gettid),
                           log_rank, level, gpuport_log_subsys_word(subsys), file, line);
    va_start(ap, fmt);
    msg = vsnprintf(buf + n, sizeof(buf) - 1 - n, fmt, ap);
    va_end(ap);
    if (msg < 0)
        msg = 0;
    if ((size_t)msg >= sizeof(buf) - 1 - n) {
        /* cut: say so, keep the newline */
        n = sizeof(buf) - 2;
        memcpy(buf + n - 3, "...", 3);
    } else {
        n += (size_t)msg;
    }
    buf[n++] = '\n';
    write_all(atomic_load_explicit(&sink_fd, memory_order_relaxed), buf, n);
    errno = saved_errno; /* callers log, then report strerror(errno) */
}

gpuport_status_t gpuport_log_open(const char *spec)
{
    char path[PATH_MAX], problem[128];
    pid_t me = getpid();
    int fd, old;

    if (!spec[0])
        return GPUPORT_OK;
    if (strcmp(spec, "stderr") == 0 || strcmp(spec, "stdout") == 0) {
        snprintf(path, sizeof(path), "%s", spec);
    } else if (gpuport_log_path_expand(spec, gpuport_log_host(), (long)me, path, sizeof(path),
                                       problem, sizeof(problem)) != 0) {
        /* the parser took it; only the host name can make it too long here */
        log_error("GPUPORT_LOG_FILE=\"%s\" cannot be used: %s", spec, problem);
        return GPUPORT_ERR_INVALID_CONFIG;
    }
    pthread_mutex_lock(&sink_lock);
    if (sink_path[0] && sink_pid == me) {
        if (strcmp(path, sink_path) != 0)
            log_warn("GPUPORT_LOG_FILE=\"%s\" (%s) is not opened: this process logs to %s "
                     "already, opened by an earlier communicator",
                     spec, path, sink_path);
        pthread_mutex_unlock(&sink_lock);
        return GPUPORT_OK;
    }
    if (strcmp(path, "stderr") == 0)
        fd = STDERR_FILENO;
    else if (strcmp(path, "stdout") == 0)
        fd = STDOUT_FILENO;
    else
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        pthread_mutex_unlock(&sink_lock);
        log_error("GPUPORT_LOG_FILE=\"%s\": cannot open %s for appending: %s", spec, path,
                  strerror(err));
        return GPUPORT_ERR_INVALID_CONFIG;
    }
    /* a file this process inherited from the one that opened it is closed */
    old = atomic_exchange(&sink_fd, fd);
    if (old > STDERR_FILENO && old != fd)
        close(old);
    snprintf(sink_path, sizeof(sink_path), "%s", path);
    sink_pid = me;
    pthread_mutex_unlock(&sink_lock);
    return GPUPORT_OK;
}

void gpuport_log_close(void)
{
    int old;

    pthread_mutex_lock(&sink_lock);
    old = atomic_exchange(&sink_fd, STDERR_FILENO);
    if (old > STDERR_FILENO)
        close(old);
    sink_path[0] = '\0';
    sink_pid = 0;
    pthread_mutex_unlock(&sink_lock);
}
