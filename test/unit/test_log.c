/*
 * The log as a 64-rank job's reader needs it: every line carries a time
 * that sorts, the host, pid and thread, the rank, the level, the
 * subsystem's word and the place, and is written whole (threads and processes appending to one file do not
 * cut each other's lines); GPUPORT_LOG_FILE's %h/%p expansion and its
 * errors; GPUPORT_LOG_SUBSYS keeps and hides subsystems but never errors or
 * warnings; info says the version once per job and each channel's
 * transport; trace shows every trigger, debug none.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "testenv.h"
#include "local_bootstrap.h"
#include "log.h"
#include "transport/transport.h"

/* ---- a line, parsed ---- */

typedef struct {
    struct tm tm;
    long usec;
    char host[64];
    long pid, tid;
    int rank; /* -1: "-" */
    char level[8];
    char subsys[16];
    char file[64];
    int line;
    char msg[1400];
} parsed_t;

static regex_t line_re;

static void re_init(void)
{
    /* time, host:pid:tid, rank, level, subsystem, file:line, message */
    static const char *const re =
        "^\\[([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\\.([0-9]{6})Z\\] "
        "([^ :]+):([0-9]+):([0-9]+) gpuport r([0-9]+|-) (ERROR|WARN|INFO|DEBUG|TRACE) "
        "([a-z_]+) ([^ :]+):([0-9]+) (.*)$";
    CHECK(regcomp(&line_re, re, REG_EXTENDED) == 0);
}

static int parse_line(const char *line, parsed_t *p)
{
    regmatch_t m[17];
    char f[17][1400];

    if (regexec(&line_re, line, 17, m, 0) != 0)
        return -1;
    for (int i = 1; i < 17; i++) {
        int n = m[i].rm_eo - m[i].rm_so;
        CHECK(n >= 0 && n < (int)sizeof(f[i]));
        memcpy(f[i], line + m[i].rm_so, (size_t)n);
        f[i][n] = '\0';
    }
    memset(p, 0, sizeof(*p));
    p->tm.tm_year = atoi(f[1]) - 1900;
    p->tm.tm_mon = atoi(f[2]) - 1;
    p->tm.tm_mday = atoi(f[3]);
    p->tm.tm_hour = atoi(f[4]);
    p->tm.tm_min = atoi(f[5]);
    p->tm.tm_sec = atoi(f[6]);
    p->usec = atol(f[7]);
    snprintf(p->host, sizeof(p->host), "%.*s", (int)sizeof(p->host) - 1, f[8]);
    p->pid = atol(f[9]);
    p->tid = atol(f[10]);
    p->rank = strcmp(f[11], "-") == 0 ? -1 : atoi(f[11]);
    snprintf(p->level, sizeof(p->level), "%.*s", (int)sizeof(p->level) - 1, f[12]);
    snprintf(p->subsys, sizeof(p->subsys), "%.*s", (int)sizeof(p->subsys) - 1, f[13]);
    snprintf(p->file, sizeof(p->file), "%.*s", (int)sizeof(p->file) - 1, f[14]);
    p->line = atoi(f[15]);
    snprintf(p->msg, sizeof(p->msg), "%s", f[16]);
    return 0;
}

/* Every line names its subsystem once: a word of gpuport_log_subsys_words,
 * the word of the file's name where a file is named for one (tcp_cm.c,
 * proxy.c, cuda_ipc.c), and not again at the message's start. */
static void check_subsys(const parsed_t *p, const char *line)
{
    const char *named = NULL;
    size_t base = strcspn(p->file, ".");
    int known = 0;

    for (int s = 0; gpuport_log_subsys_words[s]; s++) {
        const char *w = gpuport_log_subsys_words[s];
        size_t wl = strlen(w);
        if (strcmp(p->subsys, w) == 0)
            known = 1;
        if (strncmp(p->file, w, wl) == 0 && (wl == base || p->file[wl] == '_') &&
            (!named || wl > strlen(named)))
            named = w;
    }
    CHECK_MSG(known, "subsystem \"%s\" is not a word of the list: %s", p->subsys, line);
    CHECK_MSG(!named || strcmp(named, p->subsys) == 0, "%s logs as %s, not %s: %s", p->file,
              p->subsys, named, line);
    CHECK_MSG(strncmp(p->msg, p->subsys, strlen(p->subsys)) != 0 ||
                  p->msg[strlen(p->subsys)] != ':',
              "the subsystem twice: %s", line);
}

/* microseconds since the epoch of a parsed line */
static int64_t line_us(parsed_t *p)
{
    return (int64_t)timegm(&p->tm) * 1000000 + p->usec;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static long my_tid(void)
{
    return (long)syscall(SYS_gettid);
}

/* the lines of text holding needle */
static int lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        const char *hit = strstr(p, needle);
        if (hit && hit < p + len)
            n++;
        p += len + (p[len] == '\n');
    }
    return n;
}

static char *read_file(const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    size_t n;

    CHECK_MSG(f, "fopen(%s): %s", path, strerror(errno));
    n = fread(buf, 1, sizeof(buf) - 1, f);
    CHECK(n < sizeof(buf) - 1);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char tmpdir[64];

/* ---- the pure parts ---- */

static void test_prefix(void)
{
    char buf[256];
    size_t n;

    /* 2026-12-01T13:45:07Z */
    n = gpuport_log_prefix(buf, sizeof(buf), 1796132707, 123, "node17", 4242, 4243, 3,
                           GPUPORT_LOG_INFO, "init", "../../src/comm.c", 344);
    CHECK_MSG(strcmp(buf, "[2026-12-01T13:45:07.000123Z] node17:4242:4243 gpuport r3 INFO init "
                          "comm.c:344 ") == 0,
              "prefix: \"%s\"", buf);
    CHECK(n == strlen(buf));
    n = gpuport_log_prefix(buf, sizeof(buf), 0, 999999, "h", 1, 1, -1, GPUPORT_LOG_TRACE, "tcp",
                           "x.c", 1);
    CHECK_MSG(strcmp(buf, "[1970-01-01T00:00:00.999999Z] h:1:1 gpuport r- TRACE tcp x.c:1 ") == 0,
              "prefix: \"%s\"", buf);
    /* a level out of range reads as an error rather than out of the table */
    gpuport_log_prefix(buf, sizeof(buf), 0, 0, "h", 1, 1, 0, 99, "ib", "x.c", 1);
    CHECK_MSG(strstr(buf, " r0 ERROR ib x.c:1 "), "prefix: \"%s\"", buf);
    /* fixed width: later times sort later as text */
    {
        char a[256], b[256];
        gpuport_log_prefix(a, sizeof(a), 1796132707, 999999, "zz", 9, 9, 9, 1, "tcp", "a.c", 1);
        gpuport_log_prefix(b, sizeof(b), 1796132708, 0, "aa", 1, 1, 0, 1, "ib", "a.c", 1);
        CHECK(strcmp(a, b) < 0);
    }
    /* a short buffer is cut, never overrun */
    memset(buf, 'x', sizeof(buf));
    n = gpuport_log_prefix(buf, 20, 0, 0, "h", 1, 1, 0, 1, "init", "x.c", 1);
    CHECK(n == 19 && buf[19] == '\0' && buf[20] == 'x');
}

static void expect_expand(const char *spec, const char *want)
{
    char out[256], problem[128] = "";

    CHECK_MSG(gpuport_log_path_expand(spec, "node17", 4242, out, sizeof(out), problem,
                                      sizeof(problem)) == 0,
              "\"%s\": %s", spec, problem);
    CHECK_MSG(strcmp(out, want) == 0, "\"%s\" expanded to \"%s\", expected \"%s\"", spec, out,
              want);
}

static void expect_unexpanded(const char *spec, size_t len, const char *why)
{
    char out[256], problem[128] = "";

    CHECK(len <= sizeof(out));
    CHECK_MSG(gpuport_log_path_expand(spec, "node17", 4242, out, len, problem, sizeof(problem)) ==
                  -1,
              "\"%s\" expanded", spec);
    CHECK_MSG(strstr(problem, why), "\"%s\": problem \"%s\" lacks \"%s\"", spec, problem, why);
}

static void test_expand(void)
{
    expect_expand("", "");
    expect_expand("/tmp/gp.log", "/tmp/gp.log");
    expect_expand("/tmp/gp.%h.%p.log", "/tmp/gp.node17.4242.log");
    expect_expand("%h%h-%p%p", "node17node17-42424242");
    expect_expand("100%%", "100%");
    expect_expand("%%h%%p", "%h%p");
    expect_expand("a%%%p", "a%4242");
    expect_unexpanded("/tmp/%x.log", 256, "unknown \"%x\"");
    expect_unexpanded("%H", 256, "unknown \"%H\"");
    expect_unexpanded("/tmp/a%", 256, "a lone %");
    expect_unexpanded("%%%", 256, "a lone %");
    /* 12 characters fit in 13, not in 12 */
    expect_expand("%h.%p.", "node17.4242.");
    {
        char out[13], problem[128];
        CHECK(gpuport_log_path_expand("%h.%p.", "node17", 4242, out, sizeof(out), problem,
                                      sizeof(problem)) == 0 &&
              strcmp(out, "node17.4242.") == 0);
    }
    expect_unexpanded("%h.%p.", 12, "longer than 11 characters");
    expect_unexpanded("abcdefghijklm", 12, "longer than 11");
}

/* ---- lines as written ---- */

static int line_no;

static void *log_one(void *arg)
{
    gpuport_log_set_rank(7);
    line_no = __LINE__ + 1;
    log_warn("from thread %s", (const char *)arg);
    return (void *)my_tid();
}

static void test_line(void)
{
    char long_msg[3000];
    const char *log;
    pthread_t t;
    void *tid;
    parsed_t p;
    int64_t before, after;
    int here;

    gpuport_log_set_level(GPUPORT_LOG_INFO);
    gpuport_log_set_subsys(GPUPORT_LOG_SUBSYS_ALL);
    gpuport_log_set_rank(5);
    before = now_us();
    capture_begin();
    here = __LINE__ + 1;
    log_info("the message, %d and %s", 42, "text");
    log = capture_end();
    after = now_us();
    CHECK_MSG(count_of(log, "\n") == 1 && log[strlen(log) - 1] == '\n', "log: %s", log);
    ((char *)log)[strlen(log) - 1] = '\0';
    CHECK_MSG(parse_line(log, &p) == 0, "does not parse: \"%s\"", log);
    CHECK_MSG(line_us(&p) >= before / 1000000 * 1000000 && line_us(&p) <= after,
              "time %lld outside %lld..%lld", (long long)line_us(&p), (long long)before,
              (long long)after);
    {
        char host[256] = "";
        CHECK(gethostname(host, sizeof(host) - 1) == 0);
        host[strcspn(host, ".")] = '\0';
        CHECK_MSG(strcmp(p.host, host) == 0 && strcmp(p.host, gpuport_log_host()) == 0,
                  "host \"%s\", expected \"%s\"", p.host, host);
    }
    CHECK(p.pid == (long)getpid() && p.tid == my_tid() && p.tid == (long)getpid());
    CHECK(p.rank == 5 && strcmp(p.level, "INFO") == 0 && strcmp(p.subsys, "channel") == 0);
    CHECK_MSG(strcmp(p.file, "test_log.c") == 0 && p.line == here, "%s:%d", p.file, p.line);
    CHECK_MSG(strcmp(p.msg, "the message, 42 and text") == 0, "msg \"%s\"", p.msg);

    /* another thread: its own tid and rank */
    capture_begin();
    CHECK(pthread_create(&t, NULL, log_one, "two") == 0);
    CHECK(pthread_join(t, &tid) == 0);
    log = capture_end();
    ((char *)log)[strcspn(log, "\n")] = '\0';
    CHECK_MSG(parse_line(log, &p) == 0, "does not parse: \"%s\"", log);
    CHECK_MSG(p.tid == (long)tid && p.tid != my_tid() && p.pid == (long)getpid() && p.rank == 7 &&
                  strcmp(p.level, "WARN") == 0 && p.line == line_no &&
                  strcmp(p.msg, "from thread two") == 0,
              "line: %s", log);

    /* before any rank is set, "-" */
    capture_begin();
    gpuport_log_set_rank(-1);
    log_error("no rank yet");
    log = capture_end();
    CHECK_MSG(strstr(log, " gpuport r- ERROR channel test_log.c:"), "log: %s", log);

    /* a message too long for a line is cut, said so, and still one line */
    memset(long_msg, 'm', sizeof(long_msg) - 1);
    long_msg[sizeof(long_msg) - 1] = '\0';
    capture_begin();
    log_info("%s", long_msg);
    log = capture_end();
    CHECK_MSG(count_of(log, "\n") == 1 && strlen(log) < 1300 && strstr(log, "mmm...\n"),
              "long line of %zu characters", strlen(log));
    /* errno survives a log call: callers log, then look at it */
    errno = EAGAIN;
    capture_begin();
    log_warn("keeps errno");
    capture_end();
    CHECK(errno == EAGAIN);
}

/* ---- the subsystem filter ---- */

static void test_subsys(void)
{
    const char *log;

    gpuport_log_set_level(GPUPORT_LOG_DEBUG);
    gpuport_log_set_subsys(1u << GPUPORT_SUBSYS_CHANNEL);
    capture_begin();
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_PROXY, GPUPORT_LOG_DEBUG, "proxy-debug");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_PROXY, GPUPORT_LOG_INFO, "proxy-info");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_PROXY, GPUPORT_LOG_WARN, "proxy-warn");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_PROXY, GPUPORT_LOG_ERROR, "proxy-error");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_CHANNEL, GPUPORT_LOG_DEBUG, "channel-debug");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_CHANNEL, GPUPORT_LOG_TRACE, "channel-trace");
    log_info("file-info"); /* this file's subsystem: channel */
    log = capture_end();
    CHECK_MSG(!strstr(log, "proxy-debug") && !strstr(log, "proxy-info") &&
                  strstr(log, "proxy-warn") && strstr(log, "proxy-error") &&
                  strstr(log, "channel-debug") && !strstr(log, "channel-trace") &&
                  strstr(log, "file-info") && count_of(log, "\n") == 4,
              "kept channel, debug: %s", log);

    /* everything but proxy and tcp */
    gpuport_log_set_subsys(GPUPORT_LOG_SUBSYS_ALL &
                           ~((1u << GPUPORT_SUBSYS_PROXY) | (1u << GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP))));
    capture_begin();
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_PROXY, GPUPORT_LOG_DEBUG, "proxy-debug");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP), GPUPORT_LOG_INFO, "tcp-info");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP), GPUPORT_LOG_WARN, "tcp-warn");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB), GPUPORT_LOG_DEBUG, "ib-debug");
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_INIT, GPUPORT_LOG_INFO, "init-info");
    log = capture_end();
    CHECK_MSG(!strstr(log, "proxy-debug") && !strstr(log, "tcp-info") &&
                  strstr(log, "tcp-warn") && strstr(log, "ib-debug") && strstr(log, "init-info") &&
                  count_of(log, "\n") == 3,
              "hid proxy and tcp: %s", log);

    /* the level still rules a kept subsystem; none silences warnings too */
    gpuport_log_set_level(GPUPORT_LOG_WARN);
    gpuport_log_set_subsys(GPUPORT_LOG_SUBSYS_ALL);
    capture_begin();
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB), GPUPORT_LOG_INFO, "ib-info");
    gpuport_log_set_level(GPUPORT_LOG_NONE);
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB), GPUPORT_LOG_ERROR, "ib-error");
    log = capture_end();
    CHECK_MSG(log[0] == '\0', "log: %s", log);
    /* arguments of a message that is off are not evaluated */
    {
        int evaluated = 0;
        gpuport_log_set_level(GPUPORT_LOG_DEBUG);
        capture_begin();
        log_trace("%d", ++evaluated);
        CHECK(evaluated == 0);
        log_debug("%d", ++evaluated);
        CHECK(evaluated == 1);
        capture_end();
    }
    gpuport_log_set_level(GPUPORT_LOG_WARN);
}

/* ---- one file, many writers ---- */

#define WRITERS 4
#define LINES 500

static void *writer(void *arg)
{
    gpuport_log_set_rank((int)(intptr_t)arg);
    for (int i = 0; i < LINES; i++)
        log_warn("writer %d line %d %s", (int)(intptr_t)arg, i,
                 "padding padding padding padding padding padding padding padding padding");
    return NULL;
}

/* every line whole, and each writer's lines all there, in order */
static void check_lines(const char *text, int writers, int processes)
{
    int next[64][WRITERS] = {{0}}, nlines = 0;
    long pids[64];
    int npids = 0;

    CHECK(processes <= 64);
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        char line[1500];
        parsed_t l;
        int w, i, pi;

        CHECK_MSG(p[len] == '\n', "the file ends inside a line");
        CHECK(len < sizeof(line));
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + 1;
        CHECK_MSG(parse_line(line, &l) == 0, "line %d does not parse: \"%s\"", nlines, line);
        CHECK_MSG(sscanf(l.msg, "writer %d line %d", &w, &i) == 2 && w >= 0 && w < writers &&
                      l.rank == w,
                  "line %d: \"%s\"", nlines, line);
        for (pi = 0; pi < npids && pids[pi] != l.pid; pi++)
            ;
        if (pi == npids) {
            CHECK(npids < processes);
            pids[npids++] = l.pid;
        }
        CHECK_MSG(next[pi][w] == i, "pid %ld writer %d: line %d where %d was next", l.pid, w, i,
                  next[pi][w]);
        next[pi][w]++;
        nlines++;
    }
    CHECK_MSG(nlines == writers * LINES * processes && npids == processes, "%d lines of %d pids",
              nlines, npids);
}

static void write_threads(void)
{
    pthread_t t[WRITERS];

    for (int i = 0; i < WRITERS; i++)
        CHECK(pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < WRITERS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
}

static void test_file(void)
{
    char spec[128], path[256], other[256];
    const char *text, *log;
    pid_t kids[2];

    snprintf(spec, sizeof(spec), "%s/direct.%%h.%%p.log", tmpdir);
    snprintf(path, sizeof(path), "%s/direct.%s.%d.log", tmpdir, gpuport_log_host(),
             (int)getpid());
    gpuport_log_set_level(GPUPORT_LOG_WARN);
    capture_begin();
    CHECK_OK(gpuport_log_open(spec));
    write_threads();
    /* a second name: warned about, lines stay in the first file */
    snprintf(other, sizeof(other), "%s/other.log", tmpdir);
    CHECK_OK(gpuport_log_open(other));
    log = capture_end();
    CHECK_MSG(log[0] == '\0', "stderr got: %s", log);
    CHECK(access(other, F_OK) != 0);
    text = read_file(path);
    CHECK_MSG(lines_with(text, "is not opened: this process logs to") == 1 &&
                  strstr(text, other) && strstr(text, path),
              "no warning naming both files");
    CHECK(lines_with(text, "writer ") == WRITERS * LINES);
    /* the same name again: quietly the same file */
    CHECK_OK(gpuport_log_open(spec));
    /* a forked process opens its own (its %p), leaving the parent's alone */
    kids[0] = fork();
    CHECK(kids[0] >= 0);
    if (kids[0] == 0) {
        if (gpuport_log_open(spec) != GPUPORT_OK)
            _exit(2);
        log_warn("the child's line");
        _exit(0);
    }
    {
        int st;
        CHECK(waitpid(kids[0], &st, 0) == kids[0] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    snprintf(other, sizeof(other), "%s/direct.%s.%d.log", tmpdir, gpuport_log_host(),
             (int)kids[0]);
    text = read_file(other);
    CHECK_MSG(lines_with(text, "the child's line") == 1 && count_of(text, "\n") == 1, "%s", text);
    unlink(other);
    log_warn("the parent's line");
    text = read_file(path);
    CHECK(lines_with(text, "the child's line") == 0 && lines_with(text, "the parent's line") == 1);
    gpuport_log_close();
    unlink(path);

    /* threads of three processes appending to one file */
    snprintf(spec, sizeof(spec), "%s/shared.log", tmpdir);
    CHECK_OK(gpuport_log_open(spec));
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        CHECK(kids[k] >= 0);
        if (kids[k] == 0) {
            write_threads();
            _exit(0);
        }
    }
    write_threads();
    for (int k = 0; k < 2; k++) {
        int st;
        CHECK(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    gpuport_log_close();
    check_lines(read_file(spec), WRITERS, 3);
    unlink(spec);

    /* "stderr" is a name too */
    capture_begin();
    CHECK_OK(gpuport_log_open("stderr"));
    log_warn("to stderr by name");
    log = capture_end();
    gpuport_log_close();
    CHECK_MSG(lines_with(log, "to stderr by name") == 1, "log: %s", log);

    /* what cannot be opened: the variable, the expanded path, the reason */
    capture_begin();
    CHECK_STATUS(gpuport_log_open("/nonexistent-gpuport-dir/gp.%p.log"),
                 GPUPORT_ERR_INVALID_CONFIG);
    CHECK_STATUS(gpuport_log_open(tmpdir), GPUPORT_ERR_INVALID_CONFIG);
    log = capture_end();
    snprintf(path, sizeof(path), "cannot open /nonexistent-gpuport-dir/gp.%d.log for appending: "
             "No such file or directory", (int)getpid());
    CHECK_MSG(lines_with(log, "GPUPORT_LOG_FILE=\"/nonexistent-gpuport-dir/gp.%p.log\"") == 1 &&
                  lines_with(log, path) == 1,
              "log: %s", log);
    snprintf(path, sizeof(path), "GPUPORT_LOG_FILE=\"%s\": cannot open %s for appending: Is a "
             "directory", tmpdir, tmpdir);
    CHECK_MSG(lines_with(log, path) == 1, "log: %s", log);
}

/* ---- through communicators ---- */

typedef struct {
    int trace_puts; /* puts rank 0 makes */
    gpuport_status_t result[2];
    const char *transport[2];
} comm_opts_t;

static int comm_rank(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    comm_opts_t *o = arg;
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    void *src, *dst;

    (void)size;
    o->result[rank] = gpuport_comm_create(bs, &comm);
    if (o->result[rank])
        return 0;
    CHECK_OK(gpuport_mem_alloc(comm, 1 << 16, &src));
    CHECK_OK(gpuport_mem_alloc(comm, 1 << 16, &dst));
    memset(src, rank + 1, 1 << 16);
    CHECK_OK(gpuport_mem_register(comm, src, 1 << 16, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, 1 << 16, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - rank, msrc, mdst, &ch));
    o->transport[rank] = gpuport_channel_transport(ch);
    if (rank == 0) {
        for (int i = 0; i < o->trace_puts; i++)
            CHECK_OK(gpuport_channel_put(ch, (uint64_t)i * 64, 128, 24));
        CHECK_OK(gpuport_channel_put_value(ch, 4096, 0x1122334455667788ull));
        CHECK_OK(gpuport_channel_signal(ch));
        CHECK_OK(gpuport_channel_flush(ch));
    } else {
        CHECK_OK(gpuport_channel_wait(ch));
        CHECK(((unsigned char *)dst)[0] == 1 && ((unsigned char *)dst)[23] == 1);
    }
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

static const char *run_comms(comm_opts_t *o)
{
    const char *log;

    capture_begin();
    CHECK(local_run(2, comm_rank, o) == 0);
    log = capture_end();
    gpuport_log_set_level(GPUPORT_LOG_WARN);
    gpuport_log_set_subsys(GPUPORT_LOG_SUBSYS_ALL);
    return log;
}

static void test_comm_file(void)
{
    comm_opts_t o = {.trace_puts = 3};
    char spec[128], path[256], version[64];
    const char *log, *text;

    snprintf(spec, sizeof(spec), "%s/gp.%%h.%%p.log", tmpdir);
    snprintf(path, sizeof(path), "%s/gp.%s.%d.log", tmpdir, gpuport_log_host(), (int)getpid());
    setenv("GPUPORT_LOG_FILE", spec, 1);
    setenv("GPUPORT_LOG_LEVEL", "info", 1);
    log = run_comms(&o);
    unsetenv("GPUPORT_LOG_FILE");
    gpuport_log_close();
    CHECK_MSG(o.result[0] == GPUPORT_OK && o.result[1] == GPUPORT_OK, "%s", log);
    CHECK_MSG(log[0] == '\0', "stderr got: %s", log);
    text = read_file(path);
    /* the version and build once per job; every rank ready; each channel
     * names its transport and memory at info */
    snprintf(version, sizeof(version), "gpuport %s (build: CUDA ", gpuport_version_string());
    CHECK_MSG(lines_with(text, "(build: CUDA ") == 1 && lines_with(text, version) == 1,
              "not one \"%s\":\n%s", version, text);
    {
        const char *v = strstr(text, version), *start = v;
        while (start > text && start[-1] != '\n')
            start--;
        CHECK_MSG(strstr(start, " gpuport r0 INFO init comm.c:") < v &&
                      strstr(start, " gpuport r0 INFO init comm.c:") != NULL,
                  "the version line is not rank 0's:\n%s", text);
    }
    CHECK_MSG(lines_with(text, "communicator ready") == 2 &&
                  lines_with(text, " r0 INFO channel channel.c:") == 1 &&
                  lines_with(text, " r1 INFO channel channel.c:") == 1 &&
                  lines_with(text, "(its channel 0) over shm: source host-shared, 65536 bytes; "
                                   "destination host-shared, 65536 bytes") == 2,
              "file:\n%s", text);
    CHECK(strcmp(o.transport[0], "shm") == 0);
    /* info shows no trigger */
    CHECK_MSG(lines_with(text, " TRACE ") == 0 && lines_with(text, " DEBUG ") == 0, "%s", text);
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        char line[1500];
        parsed_t l;
        CHECK(len < sizeof(line));
        memcpy(line, p, len);
        line[len] = '\0';
        CHECK_MSG(parse_line(line, &l) == 0 && l.pid == (long)getpid() && l.rank >= 0 &&
                      l.rank <= 1,
                  "line \"%s\"", line);
        check_subsys(&l, line);
        p += len + (p[len] == '\n');
    }
    unlink(path);

    /* unopenable: creation fails on every rank, naming the variable, the
     * expanded path and the reason */
    setenv("GPUPORT_LOG_FILE", "/nonexistent-gpuport-dir/%h.log", 1);
    log = run_comms(&o);
    unsetenv("GPUPORT_LOG_FILE");
    CHECK_MSG(o.result[0] == GPUPORT_ERR_INVALID_CONFIG &&
                  o.result[1] == GPUPORT_ERR_INVALID_CONFIG,
              "%s / %s", gpuport_status_string(o.result[0]), gpuport_status_string(o.result[1]));
    snprintf(path, sizeof(path), "GPUPORT_LOG_FILE=\"/nonexistent-gpuport-dir/%%h.log\": cannot "
             "open /nonexistent-gpuport-dir/%s.log for appending: No such file or directory",
             gpuport_log_host());
    CHECK_MSG(lines_with(log, path) == 2 && lines_with(log, " r0 ERROR ") >= 1 &&
                  lines_with(log, " r1 ERROR ") >= 1,
              "log:\n%s", log);
    /* and a bad spelling is refused by the parser, naming the variable */
    setenv("GPUPORT_LOG_FILE", "/tmp/gp.%q", 1);
    log = run_comms(&o);
    unsetenv("GPUPORT_LOG_FILE");
    CHECK(o.result[0] == GPUPORT_ERR_INVALID_CONFIG && o.result[1] == GPUPORT_ERR_INVALID_CONFIG);
    CHECK_MSG(lines_with(log, "GPUPORT_LOG_FILE=\"/tmp/gp.%q\" is not valid, unknown \"%q\"") == 2,
              "log:\n%s", log);
    unsetenv("GPUPORT_LOG_LEVEL");
}

static void test_comm_levels(void)
{
    comm_opts_t o = {.trace_puts = 5};
    const char *log;

    /* trace: every trigger, with its channel, offsets and size (the host
     * calls go through the proxy: GPUPORT_HOST_INLINE=0) */
    setenv("GPUPORT_LOG_LEVEL", "trace", 1);
    setenv("GPUPORT_LOG_SUBSYS", "proxy", 1);
    setenv("GPUPORT_HOST_INLINE", "0", 1);
    log = run_comms(&o);
    unsetenv("GPUPORT_HOST_INLINE");
    CHECK_MSG(o.result[0] == GPUPORT_OK && o.result[1] == GPUPORT_OK, "%s", log);
    for (int i = 0; i < o.trace_puts; i++) {
        char want[160];
        snprintf(want, sizeof(want), ": put on channel 0, dst_off %d, src_off 128, size 24; "
                 "channel ok", i * 64);
        CHECK_MSG(lines_with(log, want) == 1, "no \"%s\" in:\n%s", want, log);
    }
    CHECK_MSG(lines_with(log, " r0 TRACE proxy proxy_exec.c:") >= o.trace_puts + 3 &&
                  lines_with(log, "put_value on channel 0, dst_off 4096, src_off 0, size 8, "
                                  "value 0x1122334455667788; channel ok") == 1 &&
                  lines_with(log, " r0 TRACE proxy proxy_exec.c:") == lines_with(log, " r0 TRACE ") &&
                  lines_with(log, "host FIFO position 6 (1 slot): signal on channel 0, dst_off "
                                  "0, src_off 0, size 0; channel ok") == 1 &&
                  lines_with(log, "host FIFO position 7 (1 slot): flush on channel 0") == 1 &&
                  lines_with(log, ": close on channel 0, dst_off 0, src_off 0, size 0; channel "
                                  "closed") == 2,
              "log:\n%s", log);
    /* only proxy below warn: no info line of init or channel (the proxy's own
     * info line, its measured wake-up cost, appears when it slept long enough) */
    CHECK_MSG(lines_with(log, "communicator ready") == 0 && lines_with(log, "over shm") == 0 &&
                  lines_with(log, " INFO ") == lines_with(log, " INFO proxy proxy_idle.c:"),
              "log:\n%s", log);

    /* debug: no trigger */
    setenv("GPUPORT_LOG_LEVEL", "debug", 1);
    setenv("GPUPORT_LOG_SUBSYS", "^proxy", 1);
    log = run_comms(&o);
    CHECK_MSG(lines_with(log, " TRACE ") == 0 && lines_with(log, " proxy.c:") == 0 &&
                  lines_with(log, " proxy_") == 0 && lines_with(log, "communicator ready") == 2 &&
                  lines_with(log, "over shm") == 2 && lines_with(log, " DEBUG ") > 0,
              "log:\n%s", log);

    /* a bad subsystem word fails creation, naming the variable */
    setenv("GPUPORT_LOG_SUBSYS", "init,proxie", 1);
    log = run_comms(&o);
    CHECK(o.result[0] == GPUPORT_ERR_INVALID_CONFIG && o.result[1] == GPUPORT_ERR_INVALID_CONFIG);
    CHECK_MSG(lines_with(log, "GPUPORT_LOG_SUBSYS=\"init,proxie\" is not valid, unknown "
                              "\"proxie\"") == 2,
              "log:\n%s", log);
    unsetenv("GPUPORT_LOG_SUBSYS");
    unsetenv("GPUPORT_LOG_LEVEL");
}

/* ---- every line names its subsystem ---- */

static void test_words(void)
{
    int nwords = 0;

    gpuport_log_set_level(GPUPORT_LOG_WARN);
    gpuport_log_set_subsys(GPUPORT_LOG_SUBSYS_ALL);
    for (int s = 0; gpuport_log_subsys_words[s]; s++, nwords++) {
        const char *log;
        char line[1500];
        parsed_t p;

        CHECK(gpuport_log_subsys_word(s) == gpuport_log_subsys_words[s]);
        capture_begin();
        GPUPORT_LOG_AT(s, GPUPORT_LOG_WARN, "subsystem %d", s);
        log = capture_end();
        snprintf(line, sizeof(line), "%.*s", (int)strcspn(log, "\n"), log);
        CHECK_MSG(count_of(log, "\n") == 1 && parse_line(line, &p) == 0, "log: %s", log);
        CHECK_MSG(strcmp(p.subsys, gpuport_log_subsys_words[s]) == 0, "subsystem %d: %s", s,
                  line);
    }
    /* the core's, and one per transport kind */
    CHECK(nwords == GPUPORT_SUBSYS_TRANSPORTS + gpuport_transport_nkinds() - 1);
    CHECK(strcmp(gpuport_log_subsys_word(GPUPORT_SUBSYS_FDPASS), "fdpass") == 0 &&
          strcmp(gpuport_log_subsys_word(GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)), "tcp") == 0 &&
          strcmp(gpuport_log_subsys_word(GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_IB)), "ib") == 0);
    /* a number without a word reads "?", never past the list */
    CHECK(strcmp(gpuport_log_subsys_word(-1), "?") == 0 &&
          strcmp(gpuport_log_subsys_word(nwords), "?") == 0 &&
          strcmp(gpuport_log_subsys_word(GPUPORT_LOG_NSUBSYS - 1), "?") == 0 &&
          strcmp(gpuport_log_subsys_word(GPUPORT_LOG_NSUBSYS), "?") == 0);
}

/* tcp at debug: its connection lines name tcp once, and every other line
 * of the run its own subsystem */
static void test_comm_words(void)
{
    comm_opts_t o = {.trace_puts = 2};
    const char *log;
    int ntcp = 0, nlines = 0;

    setenv("GPUPORT_TRANSPORT", "tcp", 1);
    setenv("GPUPORT_LOG_LEVEL", "debug", 1);
    log = run_comms(&o);
    unsetenv("GPUPORT_TRANSPORT");
    unsetenv("GPUPORT_LOG_LEVEL");
    CHECK_MSG(o.result[0] == GPUPORT_OK && o.result[1] == GPUPORT_OK, "%s", log);
    CHECK(strcmp(o.transport[0], "tcp") == 0 && strcmp(o.transport[1], "tcp") == 0);
    for (const char *p = log; *p;) {
        size_t len = strcspn(p, "\n");
        char line[1500];
        parsed_t l;
        CHECK(len < sizeof(line));
        memcpy(line, p, len);
        line[len] = '\0';
        CHECK_MSG(parse_line(line, &l) == 0, "line \"%s\"", line);
        check_subsys(&l, line);
        ntcp += strcmp(l.subsys, "tcp") == 0;
        nlines++;
        p += len + (p[len] == '\n');
    }
    CHECK_MSG(ntcp >= 4 && lines_with(log, " DEBUG tcp tcp_cm.c:") >= 2 &&
                  lines_with(log, " DEBUG tcp tcp_addr.c:") >= 2,
              "%d tcp lines of %d:\n%s", ntcp, nlines, log);
}

int main(void)
{
    testenv_clear_gpuport();
    re_init();
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpuport-test-log.XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    test_prefix();
    test_expand();
    test_line();
    test_subsys();
    test_words();
    test_file();
    test_comm_file();
    test_comm_levels();
    test_comm_words();
    CHECK(rmdir(tmpdir) == 0);
    regfree(&line_re);
    printf("log: all checks passed\n");
    return 0;
}
