/* The log's pure parts: names, the line's prefix, GPUPORT_LOG_FILE's
 * expansion (log.h). Apart from log.c so that the fuzz harnesses, which
 * replace log.c, and the configuration's parser share them. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "transport/transport.h"

_Static_assert(GPUPORT_LOG_NSUBSYS <= 32, "subsystems are bits of a uint32_t");

/* The core's subsystems, then each transport's by kind (GPUPORT_SUBSYS_TL),
 * with room for those registered at run time (gpuport_transport_register
 * writes their words): here, not in the registry, because every file logs
 * and the registry reaches every transport (the link graph stays free of
 * cycles). */
const char *gpuport_log_subsys_words[GPUPORT_LOG_NSUBSYS + 1] = {GPUPORT_LOG_CORE_SUBSYS_WORDS,
                                                                 GPUPORT_TL_NAMES, NULL};
_Static_assert(GPUPORT_SUBSYS_TL(GPUPORT_TL_MAX_KINDS - 1) < GPUPORT_LOG_NSUBSYS,
               "a log subsystem for every transport kind");

static const char *const level_names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

int gpuport_log_path_expand(const char *spec, const char *host, long pid, char *out, size_t len,
                            char *problem, size_t plen)
{
    size_t used = 0;

    for (const char *s = spec; *s; s++) {
        char num[24];
        const char *piece = num;
        if (*s != '%') {
            num[0] = *s;
            num[1] = '\0';
        } else if (s[1] == 'h') {
            piece = host;
        } else if (s[1] == 'p') {
            snprintf(num, sizeof(num), "%ld", pid);
        } else if (s[1] == '%') {
            piece = "%";
        } else {
            if (s[1])
                snprintf(problem, plen, "unknown \"%%%c\" (%%h, %%p and %%%% are expanded)",
                         s[1]);
            else
                snprintf(problem, plen, "a lone %% at the end (%%h, %%p and %%%% are expanded)");
            return -1;
        }
        if (*s == '%')
            s++;
        if (strlen(piece) >= len - used) {
            snprintf(problem, plen, "the expanded path is longer than %zu characters", len - 1);
            return -1;
        }
        memcpy(out + used, piece, strlen(piece) + 1);
        used += strlen(piece);
    }
    out[used] = '\0';
    return 0;
}

const char *gpuport_log_subsys_word(int subsys)
{
    int s = 0;

    /* the list ends after the built kinds' words, before GPUPORT_LOG_NSUBSYS */
    if (subsys < 0 || subsys >= GPUPORT_LOG_NSUBSYS)
        return "?";
    while (s < subsys && gpuport_log_subsys_words[s])
        s++;
    return gpuport_log_subsys_words[s] ? gpuport_log_subsys_words[s] : "?";
}

size_t gpuport_log_prefix(char *buf, size_t len, int64_t sec, long usec, const char *host,
                          long pid, long tid, int rank, int level, const char *subsys,
                          const char *file, int line)
{
    time_t t = (time_t)sec;
    struct tm tm;
    char when[32], who[16] = "-";
    const char *base = strrchr(file, '/');
    int n;

    if (!gmtime_r(&t, &tm) || strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        snprintf(when, sizeof(when), "%lld", (long long)sec);
    if (rank >= 0)
        snprintf(who, sizeof(who), "%d", rank);
    if (level < 0 || level > GPUPORT_LOG_TRACE)
        level = GPUPORT_LOG_ERROR;
    n = snprintf(buf, len, "[%s.%06ldZ] %s:%ld:%ld gpuport r%s %s %s %s:%d ", when, usec, host,
                 pid, tid, who, level_names[level], subsys, base ? base + 1 : file, line);
    if (n < 0)
        n = 0;
    return (size_t)n < len ? (size_t)n : len - 1;
}
