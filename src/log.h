/*
 * Leveled logging. Any thread may log. The function that first detects an
 * error logs it; callers propagate the status without logging again.
 *
 * A line reads
 *   [2026-12-01T13:45:07.123456Z] host:pid:tid gpuport r3 INFO init comm.c:344 message
 * time in UTC with microseconds (fixed width, so lines of every rank and
 * host sort and merge as text), the short host name, the process and the
 * thread (gettid), the thread's gpuport rank ("-" before one is set), the
 * level, the subsystem's GPUPORT_LOG_SUBSYS word, and where it was logged.
 * The word is the line's: messages do not start with it again. Each line is one write(2): lines of
 * threads, and of processes sharing a file, do not interleave.
 *
 * Level from GPUPORT_LOG_LEVEL; lines go to stderr, or to GPUPORT_LOG_FILE.
 * Every source file that logs names its subsystem before its first include:
 *   #define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
 * GPUPORT_LOG_SUBSYS keeps or hides subsystems' messages below warn;
 * errors and warnings are always shown. A message whose level is off costs
 * one load and one branch: its arguments are not evaluated.
 */
#ifndef GPUPORT_LOG_H
#define GPUPORT_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuport/gpuport.h"

typedef enum {
    GPUPORT_LOG_NONE = 0,
    GPUPORT_LOG_ERROR = 1,
    GPUPORT_LOG_WARN = 2,
    GPUPORT_LOG_INFO = 3,
    GPUPORT_LOG_DEBUG = 4,
    GPUPORT_LOG_TRACE = 5
} gpuport_log_level_t;

/* Subsystems, in the order of gpuport_log_subsys_words (GPUPORT_LOG_SUBSYS's
 * words): the core's, then one per transport, by kind, named by its
 * GPUPORT_TRANSPORT word. The core names no transport: the transport list
 * (transport.h's GPUPORT_TL_NAMES) gives the words, and a transport's
 * source files log as GPUPORT_SUBSYS_TL(their kind). */
typedef enum {
    GPUPORT_SUBSYS_INIT = 0,  /* communicator creation and destruction, configuration */
    GPUPORT_SUBSYS_BOOTSTRAP, /* exchanges between ranks through the bootstrap */
    GPUPORT_SUBSYS_TOPO,      /* topology and where the threads run */
    GPUPORT_SUBSYS_CUDA,      /* the CUDA driver, GPU mode */
    GPUPORT_SUBSYS_MEM,       /* registration and allocation */
    GPUPORT_SUBSYS_CHANNEL,   /* channel creation, destruction, the application's calls */
    GPUPORT_SUBSYS_PROXY,     /* the proxy thread: triggers */
    GPUPORT_SUBSYS_FLUSHER,   /* the flusher thread: copies and stores */
    GPUPORT_SUBSYS_FDPASS,    /* descriptors passed between same-host ranks */
    GPUPORT_SUBSYS_TRANSPORTS, /* the first transport's (kind 1) */
    /* room for GPUPORT_LOG_TL_SLOTS transports (the registry checks) */
    GPUPORT_LOG_NSUBSYS = GPUPORT_SUBSYS_TRANSPORTS + 8
} gpuport_log_subsys_t;
#define GPUPORT_LOG_TL_SLOTS 8
#define GPUPORT_SUBSYS_TL(kind) (GPUPORT_SUBSYS_TRANSPORTS + (kind) - 1)
/* the core's words, in the order above */
#define GPUPORT_LOG_CORE_SUBSYS_WORDS                                                           \
    "init", "bootstrap", "topo", "cuda", "mem", "channel", "proxy", "flusher", "fdpass"

/* NULL-terminated, by gpuport_log_subsys_t (log_format.c): the core's
 * words, then a word for every transport kind, built or not, and for each
 * one registered at run time (gpuport_transport_register writes its word);
 * fewer words than GPUPORT_LOG_NSUBSYS */
extern const char *gpuport_log_subsys_words[];
#define GPUPORT_LOG_SUBSYS_ALL ((1u << GPUPORT_LOG_NSUBSYS) - 1)

/* Per subsystem, the highest level shown: GPUPORT_LOG_LEVEL, or at most
 * warn for a subsystem GPUPORT_LOG_SUBSYS hides. Atomic: every
 * gpuport_comm_create sets them (in-process tests create communicators from
 * several threads at once) while any thread logs. */
extern _Atomic int gpuport_log_levels[GPUPORT_LOG_NSUBSYS];

void gpuport_log_set_level(int level);
/* mask: bit s shows subsystem s below warn (GPUPORT_LOG_SUBSYS_ALL: all) */
void gpuport_log_set_subsys(uint32_t mask);
/* per thread: in-process tests run several ranks */
void gpuport_log_set_rank(int rank);
void gpuport_log_write(int subsys, int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* GPUPORT_LOG_FILE: "" leaves the log where it is; "stderr", "stdout", or
 * a path whose %h (short host name), %p (pid) and %% are expanded, opened
 * for appending. The file is the process's: the first communicator that
 * names one opens it and it stays open; a later communicator naming
 * another one gets a warning and the same file. A process forked after
 * opening opens its own when it creates a communicator. An unopenable path
 * is GPUPORT_ERR_INVALID_CONFIG, logged naming the variable, the expanded
 * path and the reason. */
gpuport_status_t gpuport_log_open(const char *spec);
/* Back to stderr, closing the file; for tests, while no other thread logs. */
void gpuport_log_close(void);
/* The short host name (up to the first '.'), read once: the lines' and %h. */
const char *gpuport_log_host(void);

/* ---- pure parts (log_format.c), unit-tested ---- */

/* Expands spec's %h, %p and %% into out. 0, or -1 with the problem (an
 * unknown %-sequence, a result of len characters or more) in problem. */
int gpuport_log_path_expand(const char *spec, const char *host, long pid, char *out, size_t len,
                            char *problem, size_t plen);

/* A subsystem's word (gpuport_log_subsys_words), "?" for a number that
 * has none. */
const char *gpuport_log_subsys_word(int subsys);

/* The line's prefix up to and including the space before the message, for
 * a time in seconds and microseconds since the epoch; rank < 0 is "-", a
 * level out of range reads ERROR, subsys is the subsystem's word, file is
 * cut to its last component. Returns the length written: at most len - 1,
 * the prefix cut to fit. */
size_t gpuport_log_prefix(char *buf, size_t len, int64_t sec, long usec, const char *host,
                          long pid, long tid, int rank, int level, const char *subsys,
                          const char *file, int line);

#define GPUPORT_LOG_ON_AT(subsys, level)                                                        \
    __builtin_expect((level) <= atomic_load_explicit(&gpuport_log_levels[(subsys)],            \
                                                     memory_order_relaxed),                     \
                     0)

/* For a message of another subsystem than its file's. */
#define GPUPORT_LOG_AT(subsys, level, ...)                                                      \
    do {                                                                                        \
        if (GPUPORT_LOG_ON_AT((subsys), (level)))                                               \
            gpuport_log_write((subsys), (level), __FILE__, __LINE__, __VA_ARGS__);              \
    } while (0)

/* The file's subsystem: GPUPORT_LOG_SUBSYS_ID, which a file that logs
 * defines (it is an error at the first log call otherwise). */
#define GPUPORT_LOG_ON(level) GPUPORT_LOG_ON_AT(GPUPORT_LOG_SUBSYS_ID, (level))
#define GPUPORT_LOG(level, ...) GPUPORT_LOG_AT(GPUPORT_LOG_SUBSYS_ID, (level), __VA_ARGS__)

#define log_error(...) GPUPORT_LOG(GPUPORT_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) GPUPORT_LOG(GPUPORT_LOG_WARN, __VA_ARGS__)
#define log_info(...) GPUPORT_LOG(GPUPORT_LOG_INFO, __VA_ARGS__)
#define log_debug(...) GPUPORT_LOG(GPUPORT_LOG_DEBUG, __VA_ARGS__)
#define log_trace(...) GPUPORT_LOG(GPUPORT_LOG_TRACE, __VA_ARGS__)

#endif
