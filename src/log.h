/*
 * Leveled logging to stderr. Every line carries the process's gpuport rank
 * (set by gpuport_comm_create; "-" before). Level from GPUPORT_LOG_LEVEL.
 * Any thread may log. The function that first detects an error logs it;
 * callers propagate the status without logging again.
 */
#ifndef GPUPORT_LOG_H
#define GPUPORT_LOG_H

#include <stdatomic.h>

#include "gpuport/gpuport.h"

typedef enum {
    GPUPORT_LOG_NONE = 0,
    GPUPORT_LOG_ERROR = 1,
    GPUPORT_LOG_WARN = 2,
    GPUPORT_LOG_INFO = 3,
    GPUPORT_LOG_DEBUG = 4,
    GPUPORT_LOG_TRACE = 5
} gpuport_log_level_t;

/* Atomic: every gpuport_comm_create sets it (in-process tests create
 * communicators from several threads at once) while any thread logs. */
extern _Atomic int gpuport_log_level_current;

void gpuport_log_set_level(int level);
void gpuport_log_set_rank(int rank);
void gpuport_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define GPUPORT_LOG(level, ...)                                                                 \
    do {                                                                                        \
        if ((level) <= atomic_load_explicit(&gpuport_log_level_current, memory_order_relaxed))  \
            gpuport_log_write((level), __FILE__, __LINE__, __VA_ARGS__);                        \
    } while (0)

#define log_error(...) GPUPORT_LOG(GPUPORT_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) GPUPORT_LOG(GPUPORT_LOG_WARN, __VA_ARGS__)
#define log_info(...) GPUPORT_LOG(GPUPORT_LOG_INFO, __VA_ARGS__)
#define log_debug(...) GPUPORT_LOG(GPUPORT_LOG_DEBUG, __VA_ARGS__)
#define log_trace(...) GPUPORT_LOG(GPUPORT_LOG_TRACE, __VA_ARGS__)

#endif
