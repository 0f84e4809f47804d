/* The GPUPORT_* configuration: the core's rows, the gathering of the
 * transports' rows (through the registry) and the one parser; see config.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fifo.h"
#include "log.h"
#include "topology.h"
#include "transport/transport.h"

extern char **environ;

static const char *const log_words[] = {"none", "error", "warn", "info", "debug", "trace", NULL};
static const char *const gpu_words[] = {"auto", "off", "on", NULL};
static const char *const bind_words[] = {"0", "1", NULL};
static const char *const memory_signal_words[] = {"auto", "store", NULL};
static const char *const peer_path_words[] = {"auto", "stores", "proxy", NULL};

#define FIELD(f) GPUPORT_CFG_FIELD(gpuport_config_t, f)

/* The core's rows; each transport's follow them (ops->settings). */
static const gpuport_config_var_t core_vars[] = {
    {"GPUPORT_LOG_LEVEL", "warn", GPUPORT_CFG_ENUM, FIELD(log_level), 0, 0, log_words,
     "messages printed, each line with the time, host, pid, thread and rank; info adds the "
     "version and each channel's transport, trace every trigger", NULL},
    {"GPUPORT_LOG_SUBSYS", "", GPUPORT_CFG_WORDSET, FIELD(log_subsys), 0, 255,
     gpuport_log_subsys_words,
     "subsystems whose messages below warn are shown (e.g. init,channel, or ^proxy,tcp for all "
     "others); empty shows all; errors and warnings always show", NULL},
    {"GPUPORT_LOG_FILE", "", GPUPORT_CFG_PATH, FIELD(log_file), 0, 0, NULL,
     "file the log is appended to instead of stderr, %h the host and %p the pid in its name "
     "(e.g. /tmp/gpuport.%h.%p.log); also stderr or stdout", NULL},
    {"GPUPORT_TRANSPORT", "auto", GPUPORT_CFG_ENUM, FIELD(transport), 0, 0, gpuport_transport_words,
     "transport for every channel; auto picks per peer, a forced one that cannot reach a peer "
     "fails at channel creation", NULL},
    {"GPUPORT_FIFO_SIZE", "1024", GPUPORT_CFG_POW2, FIELD(fifo_size), GPUPORT_FIFO_MIN_SIZE,
     GPUPORT_FIFO_MAX_SIZE, NULL, "triggers the communicator's FIFO holds", NULL},
    {"GPUPORT_MAX_CHANNELS", "1024", GPUPORT_CFG_UINT, FIELD(max_channels), 1, 32768, NULL,
     "port channels one communicator can hold at once", NULL},
    {"GPUPORT_TIMEOUT_MS", "60000", GPUPORT_CFG_UINT, FIELD(timeout_ms), 0, 86400000ull, NULL,
     "limit for every blocking call (each step of communicator and channel creation, wait, "
     "flush, a full FIFO, draining at destroy); 0 waits forever", NULL},
    {"GPUPORT_HOST_INLINE", "1", GPUPORT_CFG_ENUM, FIELD(host_inline), 0, 0, bind_words,
     "a host put, put_value or signal on a channel whose earlier host operations are all "
     "complete is carried out by the calling thread where the transport allows it (shm puts "
     "below GPUPORT_SHM_ASYNC_MIN; on tcp operations with a signal, sent by the caller: "
     "GPUPORT_SOCKET_INLINE_MAX), and a flush with nothing to wait for returns at once: no "
     "proxy pass; 0 sends every host operation through the proxy", NULL},
    {"GPUPORT_PROXY_IDLE_US", "10000", GPUPORT_CFG_UINT, FIELD(proxy_idle_us), 0, 10000000ull,
     NULL, "microseconds without work after which the proxy stops polling and sleeps", NULL},
    {"GPUPORT_PROXY_IDLE_CPU", "4", GPUPORT_CFG_UINT, FIELD(proxy_idle_cpu), 0, 100, NULL,
     "percent of a core a sleeping proxy may use: it measures what a wake-up costs and "
     "sleeps no longer than that budget needs (at most the caps below), so it sees a "
     "kernel's first trigger after a pause as soon as the budget allows; 0: sleep the caps", NULL},
    {"GPUPORT_PROXY_SLEEP_MAX_US", "500", GPUPORT_CFG_UINT, FIELD(proxy_sleep_max_us), 0,
     100000ull, NULL,
     "longest sleep of an idle proxy in GPU mode: bounds how late it sees a kernel's first "
     "trigger after a pause (host pushes wake it at once); 0 never sleeps", NULL},
    {"GPUPORT_PROXY_SLEEP_HOST_MAX_US", "500", GPUPORT_CFG_UINT, FIELD(proxy_sleep_host_max_us),
     0, 100000ull, NULL,
     "the same for a host-only communicator (no kernels' triggers to look for: host pushes, "
     "flusher completions and tcp sockets wake it at once); 0 never sleeps", NULL},
    {"GPUPORT_PROXY_SLEEP_SCALE", "1000", GPUPORT_CFG_UINT, FIELD(proxy_sleep_scale), 0,
     1000000000ull, NULL,
     "an idle proxy sleeps its idle time divided by this (at least 1 us, at most what "
     "GPUPORT_PROXY_IDLE_CPU allows): prompt after short pauses, cheap in long ones; 0 sleeps "
     "the maximum at once", NULL},
    {"GPUPORT_DEV_SPIN", "64", GPUPORT_CFG_UINT, FIELD(dev_spin), 0, 1000000ull, NULL,
     "polls a kernel's wait, flush or push into a full FIFO makes before it starts pausing "
     "between them (GPUPORT_DEV_BACKOFF_NS)", NULL},
    {"GPUPORT_DEV_BACKOFF_NS", "1000", GPUPORT_CFG_UINT, FIELD(dev_backoff_ns), 0, 1000000ull,
     NULL,
     "longest pause (__nanosleep, which sleeps up to twice the figure) between a waiting "
     "kernel's polls once GPUPORT_DEV_SPIN polls found nothing; pauses grow from 32 ns, so a "
     "waiter leaves the issue slots of a GPU it shares (MPS) to the kernel it waits for; 0 "
     "spins without pause", NULL},
    {"GPUPORT_DEV_END_COPY", "1", GPUPORT_CFG_ENUM, FIELD(dev_end_copy), 0, 0, bind_words,
     "1: kernels' pushes on port channels read the channel's end (its error, the peer's close "
     "or failure) from a copy in GPU memory, written once a host call of the channel reported "
     "the end or a device wait, poll or flush of it saw it; 0: every push reads the two host "
     "words across PCIe and reports an end as soon as it arrives (slower: a warp's signals "
     "wait a bus round trip each)", NULL},
    {"GPUPORT_MEMORY_SIGNAL", "auto", GPUPORT_CFG_ENUM, FIELD(memory_signal), 0, 0,
     memory_signal_words,
     "how memory channels' kernels signal: auto adds atomically in the peer's GPU memory where "
     "both GPUs can (the same GPU, peers with native atomics), else stores counts into its "
     "host control segment; store always stores (either side's store decides for both)", NULL},
    {"GPUPORT_PEER_PATH", "auto", GPUPORT_CFG_ENUM, FIELD(peer_path), 0, 0, peer_path_words,
     "how peer channels carry a kernel's operations to a peer whose memory this GPU maps: "
     "auto by the calling threads' stores up to GPUPORT_PEER_STORE_MAX, by the proxy above; "
     "stores always by stores; proxy always by the proxy (either side's proxy decides for "
     "both); peers off the host always go by the proxy", NULL},
    {"GPUPORT_PEER_STORE_MAX", "1024", GPUPORT_CFG_UINT, FIELD(peer_store_max), 0,
     1ull << 40, NULL,
     "largest put, per calling thread, that a peer channel carries by stores under "
     "GPUPORT_PEER_PATH=auto (a block of 256 threads: 256 times this); larger ones go by the "
     "copy engine through the proxy, using no SMs", NULL},
    {"GPUPORT_HOST_ID", "0", GPUPORT_CFG_HEX64, FIELD(host_id), 0, 0, NULL,
     "host identity in hex; ranks with equal ids share a host; 0 derives it from the host", NULL},
    {"GPUPORT_GPU", "auto", GPUPORT_CFG_ENUM, FIELD(gpu), 0, 0, gpu_words,
     "GPU mode: auto uses the current CUDA device if there is one; on fails without one", NULL},
    {"GPUPORT_BIND", "1", GPUPORT_CFG_ENUM, FIELD(bind), 0, 0, bind_words,
     "bind the proxy and flusher threads to cores near the GPU (and NIC); 0 leaves them where "
     "the OS puts them", NULL},
    {"GPUPORT_PROXY_CPUS", "", GPUPORT_CFG_CPULIST, FIELD(proxy_cpus), 0, 0, NULL,
     "cores for the proxy threads, one per local rank in local-rank order (cpu list, e.g. "
     "0,8,16,24); empty decides", NULL},
    {"GPUPORT_FLUSHER_CPUS", "", GPUPORT_CFG_CPULIST, FIELD(flusher_cpus), 0, 0, NULL,
     "cores for the flusher threads, one per local rank in local-rank order (cpu list, e.g. "
     "0,8,16,24); empty decides", NULL},
};

#define NCORE (sizeof(core_vars) / sizeof(core_vars[0]))

/* ---- the rows: the core's, then the transports' ---- */

/* Where transport kind's settings start in the tl area: after every lower
 * kind's, 8-aligned. The same in every build of one source, so ranks agree. */
static size_t tl_base(int kind)
{
    size_t base = 0;

    for (int k = 1; k < kind; k++) {
        const gpuport_settings_table_t *t = gpuport_transport_settings(k);
        if (t)
            base += (t->size + 7) & ~(size_t)7;
    }
    return base;
}

size_t gpuport_config_nvars(void)
{
    size_t n = NCORE;

    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        const gpuport_settings_table_t *t = gpuport_transport_settings(k);
        n += t ? (size_t)t->nrows : 0;
    }
    return n;
}

const gpuport_config_var_t *gpuport_config_var(size_t i)
{
    if (i < NCORE)
        return &core_vars[i];
    i -= NCORE;
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        const gpuport_settings_table_t *t = gpuport_transport_settings(k);
        if (t && i < (size_t)t->nrows)
            return &t->rows[i];
        i -= t ? (size_t)t->nrows : 0;
    }
    return NULL;
}

void *gpuport_config_field(gpuport_config_t *config, const gpuport_config_var_t *var)
{
    for (size_t i = 0; i < NCORE; i++)
        if (var == &core_vars[i])
            return (char *)config + var->offset;
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        const gpuport_settings_table_t *t = gpuport_transport_settings(k);
        for (int j = 0; t && j < t->nrows; j++)
            if (var == &t->rows[j])
                return config->tl + tl_base(k) + var->offset;
    }
    return NULL;
}

const void *gpuport_config_tl_settings(const gpuport_config_t *config, int kind)
{
    return config->tl + tl_base(kind);
}

/* The row's words as "a|b|c" at buf + used; returns the new used. */
static size_t words_text(const gpuport_config_var_t *var, char *buf, size_t used, size_t len)
{
    for (size_t i = 0; var->words[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "|" : "", var->words[i]);
    return used;
}

void gpuport_config_describe(const gpuport_config_var_t *var, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    switch (var->type) {
    case GPUPORT_CFG_ENUM:
        words_text(var, buf, 0, len);
        break;
    case GPUPORT_CFG_POW2:
        snprintf(buf, len, "a power of two, %llu..%llu", (unsigned long long)var->min,
                 (unsigned long long)var->max);
        break;
    case GPUPORT_CFG_UINT:
        snprintf(buf, len, "an integer %llu..%llu (k, m, g suffixes allowed)",
                 (unsigned long long)var->min, (unsigned long long)var->max);
        break;
    case GPUPORT_CFG_HEX64:
        snprintf(buf, len, "a hexadecimal number of up to 16 digits");
        break;
    case GPUPORT_CFG_CPULIST:
        snprintf(buf, len, "a cpu list such as 0-3,8,10-11 (no spaces, at most %zu characters), "
                 "or empty", var->field_size - 1);
        break;
    case GPUPORT_CFG_AUTO_UINT:
        snprintf(buf, len, "auto or an integer %llu..%llu", (unsigned long long)var->min,
                 (unsigned long long)var->max);
        break;
    case GPUPORT_CFG_WORDSET:
        used = words_text(var, buf, (size_t)snprintf(buf, len, "words separated by commas from "),
                          len);
        if (used < len)
            snprintf(buf + used, len - used, " (^ first: all but those; at most %llu "
                     "characters), or empty for all",
                     (unsigned long long)var->max);
        break;
    case GPUPORT_CFG_PATH:
        snprintf(buf, len, "a file name of at most %zu characters (%%h: host, %%p: pid, %%%%: %%), "
                 "stderr, stdout, or empty",
                 var->field_size - 1);
        break;
    case GPUPORT_CFG_CUSTOM:
        var->custom->describe(var, buf, len);
        break;
    }
}

static int parse_uint(const char *s, uint64_t *v_p)
{
    char *end;
    unsigned long long v;
    uint64_t mult = 1;

    /* no blanks around it: " 16" is more likely a quoting slip than a number */
    if (!isdigit((unsigned char)*s))
        return -1;
    /* decimal, or hex with 0x: a leading zero is not octal */
    errno = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        /* one prefix: strtoull would take a second ("0x0x10") */
        if (!isxdigit((unsigned char)s[2]) || s[3] == 'x' || s[3] == 'X')
            return -1;
        v = strtoull(s + 2, &end, 16);
    } else {
        v = strtoull(s, &end, 10);
    }
    if (errno)
        return -1;
    switch (tolower((unsigned char)*end)) {
    case 'k': mult = 1ull << 10; end++; break;
    case 'm': mult = 1ull << 20; end++; break;
    case 'g': mult = 1ull << 30; end++; break;
    default: break;
    }
    if (*end != '\0' || (v && mult > UINT64_MAX / v))
        return -1;
    *v_p = v * mult;
    return 0;
}

/* "" (all), or [^]word[,word...] of words, in any case: bits by word */
static int parse_wordset(const char *s, const char *const *words, uint64_t *mask_p, char *problem,
                         size_t len)
{
    uint64_t all = 0, mask = 0;
    int exclude = 0;

    for (size_t i = 0; words[i]; i++)
        all |= 1ull << i;
    if (*s == '\0') {
        *mask_p = all;
        return 0;
    }
    if (*s == '^') {
        exclude = 1;
        s++;
    }
    for (;;) {
        size_t n = strcspn(s, ","), i;
        for (i = 0; words[i]; i++)
            if (strlen(words[i]) == n && strncasecmp(s, words[i], n) == 0)
                break;
        if (n == 0) {
            snprintf(problem, len, "an empty word");
            return -1;
        }
        if (!words[i]) {
            snprintf(problem, len, "unknown \"%.*s\"", (int)(n < 32 ? n : 32), s);
            return -1;
        }
        mask |= 1ull << i;
        s += n;
        if (*s == '\0')
            break;
        s++;
    }
    *mask_p = exclude ? all & ~mask : mask;
    return 0;
}

/* A GPUPORT_LOG_FILE-like name (its length checked before): its
 * %-sequences known, no blanks around it; the length of what it expands to
 * is checked when it is opened. */
static int parse_path(const char *s, char *problem, size_t len)
{
    char out[PATH_MAX];

    if (s[0] && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[strlen(s) - 1]))) {
        snprintf(problem, len, "blanks around the value");
        return -1;
    }
    return gpuport_log_path_expand(s, "host", 1, out, sizeof(out), problem, len);
}

static int parse_hex64(const char *value, uint64_t *v_p)
{
    const char *s = value;
    char *end;

    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    errno = 0;
    *v_p = strtoull(s, &end, 16);
    return *s && strspn(s, "0123456789abcdefABCDEF") == strlen(s) && *end == '\0' &&
                   errno == 0 && strlen(s) <= 16
               ? 0
               : -1;
}

/* "auto" (-1) or a decimal min..max: an index, not a size */
static int parse_auto_uint(const gpuport_config_var_t *var, const char *value, uint64_t *v_p)
{
    char *end;

    if (strcasecmp(value, "auto") == 0) {
        *v_p = (uint32_t)-1;
        return 0;
    }
    if (!isdigit((unsigned char)value[0]))
        return -1;
    errno = 0;
    *v_p = strtoull(value, &end, 10);
    return *end == '\0' && errno == 0 && *v_p >= var->min && *v_p <= var->max ? 0 : -1;
}

static int parse_enum(const gpuport_config_var_t *var, const char *value, uint64_t *v_p)
{
    for (uint64_t i = 0; var->words[i]; i++) {
        if (strcasecmp(value, var->words[i]) == 0) {
            *v_p = i;
            return 0;
        }
    }
    return -1;
}

/* The longest text a row takes, or 0 where its parser decides: text kept
 * as written fills its field (with the NUL), a list is at most max. */
static size_t text_max(const gpuport_config_var_t *var)
{
    switch (var->type) {
    case GPUPORT_CFG_CPULIST:
    case GPUPORT_CFG_PATH: return var->field_size - 1;
    case GPUPORT_CFG_WORDSET:
    case GPUPORT_CFG_CUSTOM: return (size_t)var->max;
    default: return 0;
    }
}

/* A parsed value, before it is stored: a number, or a CUSTOM row's field. */
typedef struct parsed {
    uint64_t v;
    _Alignas(8) unsigned char field[GPUPORT_CFG_CUSTOM_MAX];
} parsed_t;

/* Parses value by var's type into *out; 0, or -1 with what is wrong in
 * problem where the parser knows more than "not valid". */
static int parse_value(const gpuport_config_var_t *var, const char *value, parsed_t *out,
                       char *problem, size_t len)
{
    switch (var->type) {
    case GPUPORT_CFG_ENUM: return parse_enum(var, value, &out->v);
    case GPUPORT_CFG_UINT:
    case GPUPORT_CFG_POW2:
        return parse_uint(value, &out->v) == 0 && out->v >= var->min && out->v <= var->max &&
                       (var->type != GPUPORT_CFG_POW2 || (out->v & (out->v - 1)) == 0)
                   ? 0
                   : -1;
    case GPUPORT_CFG_HEX64: return parse_hex64(value, &out->v);
    case GPUPORT_CFG_CPULIST:
        return gpuport_cpulist_parse(value, NULL, GPUPORT_CPULIST_MAX, problem, len) >= 0 ? 0 : -1;
    case GPUPORT_CFG_AUTO_UINT: return parse_auto_uint(var, value, &out->v);
    case GPUPORT_CFG_WORDSET: return parse_wordset(value, var->words, &out->v, problem, len);
    case GPUPORT_CFG_PATH: return parse_path(value, problem, len);
    case GPUPORT_CFG_CUSTOM:
        if (var->field_size > sizeof(out->field))
            return -1;
        memset(out->field, 0, var->field_size);
        return var->custom->parse(value, out->field, problem, len);
    }
    return -1;
}

static void store(const gpuport_config_var_t *var, void *field, const parsed_t *p,
                  const char *text)
{
    if (var->type == GPUPORT_CFG_CUSTOM)
        memcpy(field, p->field, var->field_size);
    else if (var->type == GPUPORT_CFG_CPULIST || var->type == GPUPORT_CFG_PATH)
        snprintf(field, var->field_size, "%s", text);
    else if (var->field_size == sizeof(uint64_t))
        memcpy(field, &p->v, sizeof(uint64_t));
    else {
        uint32_t v32 = (uint32_t)p->v;
        memcpy(field, &v32, sizeof(uint32_t));
    }
}

/* The one message of a rejected value: the variable, the value, what is
 * wrong where known, and what the row accepts. */
static void reject(const gpuport_config_var_t *var, const char *value, const char *problem)
{
    char accepted[256];

    if (!problem[0] && value[0] &&
        (isspace((unsigned char)value[0]) || isspace((unsigned char)value[strlen(value) - 1])))
        problem = "blanks around the value";
    gpuport_config_describe(var, accepted, sizeof(accepted));
    log_error("%s=\"%s\" is not valid%s%s: expected %s", var->name, value, problem[0] ? ", " : "",
              problem, accepted);
}

gpuport_status_t gpuport_config_parse_var(const gpuport_config_var_t *var, const char *value,
                                          gpuport_config_t *config)
{
    parsed_t parsed;
    char problem[128] = "";
    size_t max = text_max(var);
    void *field = gpuport_config_field(config, var);

    if (!field) {
        log_error("%s: not a row of the configuration table", var->name);
        return GPUPORT_ERR_INTERNAL;
    }
    if (max && strlen(value) > max)
        snprintf(problem, sizeof(problem), "%zu characters", strlen(value));
    if (problem[0] || parse_value(var, value, &parsed, problem, sizeof(problem)) != 0) {
        reject(var, value, problem);
        return GPUPORT_ERR_INVALID_CONFIG;
    }
    store(var, field, &parsed, value);
    return GPUPORT_OK;
}

/* Each transport's settings in its place, and every row at its default. */
static gpuport_status_t load_defaults(gpuport_config_t *config)
{
    size_t n = gpuport_config_nvars();

    memset(config, 0, sizeof(*config));
    for (int k = 1; k < gpuport_transport_nkinds() && k < GPUPORT_CONFIG_TL_KINDS; k++) {
        const gpuport_settings_table_t *t = gpuport_transport_settings(k);
        config->tl_base[k] = (uint32_t)tl_base(k);
        if (t && tl_base(k) + t->size > sizeof(config->tl)) {
            log_error("transport %s's settings (%zu bytes) do not fit the configuration's %zu "
                      "bytes for transports", gpuport_transport_name(k), t->size,
                      sizeof(config->tl) - tl_base(k));
            return GPUPORT_ERR_INTERNAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const gpuport_config_var_t *var = gpuport_config_var(i);
        if (gpuport_config_parse_var(var, var->default_value, config) != GPUPORT_OK)
            return GPUPORT_ERR_INTERNAL;
    }
    return GPUPORT_OK;
}

/* Edits (insert, delete, replace, swap of neighbours) between a[0..n) and
 * b, stopping at 3: how far a misspelled name is from a known one. */
static int name_distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b);
    int d[64][64];

    if (n >= 64 || m >= 64)
        return 3;
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] < 3 ? d[n][m] : 3;
}

/* NULL if entry[0..len) names a variable, else the known name it most
 * likely meant (two edits at most), or "" for none. */
static const char *unknown_name(const char *entry, size_t len)
{
    size_t n = gpuport_config_nvars();
    const char *meant = "";
    int best = 3;

    for (size_t i = 0; i < n; i++) {
        const char *name = gpuport_config_var(i)->name;
        if (strlen(name) == len && strncmp(name, entry, len) == 0)
            return NULL;
    }
    /* unknown: only now the distances, which a known name never pays */
    for (size_t i = 0; i < n; i++) {
        int d = name_distance(entry, len, gpuport_config_var(i)->name);
        if (d < best) {
            best = d;
            meant = gpuport_config_var(i)->name;
        }
    }
    return meant;
}

gpuport_status_t gpuport_config_load(gpuport_config_t *config_p)
{
    gpuport_config_t config;
    gpuport_status_t status = load_defaults(&config);
    size_t n = gpuport_config_nvars();

    if (status != GPUPORT_OK)
        return status;
    /* Every bad variable is reported, not only the first. */
    for (size_t i = 0; i < n; i++) {
        const gpuport_config_var_t *var = gpuport_config_var(i);
        const char *value = getenv(var->name);
        if (value && gpuport_config_parse_var(var, value, &config))
            status = GPUPORT_ERR_INVALID_CONFIG;
    }
    for (char **e = environ; e && *e; e++) {
        size_t len = strcspn(*e, "=");
        /* GPUPORT_TEST_* belongs to the test suite, not the library */
        const char *meant;
        if (strncmp(*e, "GPUPORT_", 8) != 0 || strncmp(*e, "GPUPORT_TEST_", 13) == 0 ||
            !(meant = unknown_name(*e, len)))
            continue;
        if (*meant)
            log_warn("%.*s is not a gpuport variable and is ignored; did you mean %s? "
                     "(gpuport_info -c lists them)",
                     (int)len, *e, meant);
        else
            log_warn("%.*s is not a gpuport variable and is ignored (gpuport_info -c lists them)",
                     (int)len, *e);
    }
    if (status != GPUPORT_OK)
        return status;
    *config_p = config;
    return GPUPORT_OK;
}

/* ---- GPUPORT_TIMEOUT_MS before a configuration is loaded ---- */

static const gpuport_config_var_t *timeout_row(void)
{
    for (size_t i = 0; i < NCORE; i++)
        if (core_vars[i].offset == offsetof(gpuport_config_t, timeout_ms))
            return &core_vars[i];
    return NULL;
}

/* GPUPORT_TIMEOUT_MS from `value` into *ms; -1 for a bad value, which only
 * `loud` reports (gpuport_config_load reports it otherwise). */
static int timeout_parse(const char *value, int loud, uint64_t *ms)
{
    const gpuport_config_var_t *var = timeout_row();
    char problem[128] = "";
    parsed_t parsed;

    if (parse_value(var, value, &parsed, problem, sizeof(problem)) != 0) {
        if (loud)
            reject(var, value, problem);
        return -1;
    }
    *ms = parsed.v;
    return 0;
}

gpuport_status_t gpuport_config_timeout_ms(uint64_t *timeout_ms_p)
{
    const char *value = getenv(timeout_row()->name);

    if (!timeout_ms_p) {
        log_error("gpuport_config_timeout_ms: timeout_ms_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (timeout_parse(value ? value : timeout_row()->default_value, 1, timeout_ms_p))
        return GPUPORT_ERR_INVALID_CONFIG;
    return GPUPORT_OK;
}

uint64_t gpuport_config_timeout_or_default(void)
{
    const char *value = getenv(timeout_row()->name);
    uint64_t ms = 0;

    if (!value || timeout_parse(value, 0, &ms))
        timeout_parse(timeout_row()->default_value, 0, &ms);
    return ms;
}
