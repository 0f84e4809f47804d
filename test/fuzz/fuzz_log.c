/*
 * The library's log (src/log.h) for the fuzz harnesses, in place of
 * src/log.c: every message at every level is formatted, so that a bad
 * argument (a peer's string without its NUL) is read and caught by the
 * sanitizers, and then dropped, so that millions of rejected inputs do not
 * flood the output. GPUPORT_FUZZ_LOG=1 prints them. No file is opened.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

_Atomic int gpuport_log_levels[GPUPORT_LOG_NSUBSYS] = {
    [0 ... GPUPORT_LOG_NSUBSYS - 1] = GPUPORT_LOG_TRACE};

/* communicators set GPUPORT_LOG_LEVEL's and GPUPORT_LOG_SUBSYS's: keep
 * formatting everything */
void gpuport_log_set_level(int level)
{
    (void)level;
}

void gpuport_log_set_subsys(uint32_t mask)
{
    (void)mask;
}

void gpuport_log_set_rank(int rank)
{
    (void)rank;
}

const char *gpuport_log_host(void)
{
    return "fuzz";
}

gpuport_status_t gpuport_log_open(const char *spec)
{
    (void)spec;
    return GPUPORT_OK;
}

void gpuport_log_close(void)
{
}

void gpuport_log_write(int subsys, int level, const char *file, int line, const char *fmt, ...)
{
    static int print = -1;
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (print < 0)
        print = getenv("GPUPORT_FUZZ_LOG") != NULL;
    if (print)
        fprintf(stderr, "[gpuport fuzz %s %d %s:%d] %s\n", gpuport_log_subsys_words[subsys],
                level, file, line, msg);
}
