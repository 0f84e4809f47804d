/* Leveled logging; see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Atomic int gpuport_log_level_current = GPUPORT_LOG_WARN;
static _Thread_local int log_rank = -1; /* per thread: in-process tests run several ranks */

static const char *const level_names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

void gpuport_log_set_level(int level)
{
    atomic_store_explicit(&gpuport_log_level_current, level, memory_order_relaxed);
}

void gpuport_log_set_rank(int rank)
{
    log_rank = rank;
}

void gpuport_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    const char *base = strrchr(file, '/');
    int rank = log_rank;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (level < 0 || level > GPUPORT_LOG_TRACE)
        level = GPUPORT_LOG_ERROR;
    /* One fprintf per line so lines from threads and ranks do not interleave. */
    if (rank >= 0)
        fprintf(stderr, "[gpuport r%d %s %s:%d] %s\n", rank, level_names[level],
                base ? base + 1 : file, line, msg);
    else
        fprintf(stderr, "[gpuport r- %s %s:%d] %s\n", level_names[level], base ? base + 1 : file,
                line, msg);
}
