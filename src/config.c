/* The GPUPORT_* configuration table and its parser; see config.h. */
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

extern char **environ;

static const char *const log_words[] = {"none", "error", "warn", "info", "debug", "trace", NULL};
static const char *const gpu_words[] = {"auto", "off", "on", NULL};
static const char *const bind_words[] = {"0", "1", NULL};

#define FIELD(f) offsetof(gpuport_config_t, f), sizeof(((gpuport_config_t *)0)->f)

const gpuport_config_var_t gpuport_config_vars[] = {
    {"GPUPORT_LOG_LEVEL", "warn", GPUPORT_CFG_ENUM, FIELD(log_level), 0, 0, log_words,
     "messages printed, each line with the time, host, pid, thread and rank; info adds the "
     "version and each channel's transport, trace every trigger"},
    {"GPUPORT_LOG_SUBSYS", "", GPUPORT_CFG_WORDSET, FIELD(log_subsys), 0, GPUPORT_LIST_TEXT_MAX,
     gpuport_log_subsys_words,
     "subsystems whose messages below warn are shown (e.g. init,channel, or ^proxy,tcp for all "
     "others); empty shows all; errors and warnings always show"},
    {"GPUPORT_LOG_FILE", "", GPUPORT_CFG_PATH, FIELD(log_file), 0, 0, NULL,
     "file the log is appended to instead of stderr, %h the host and %p the pid in its name "
     "(e.g. /tmp/gpuport.%h.%p.log); also stderr or stdout"},
    {"GPUPORT_TRANSPORT", "auto", GPUPORT_CFG_ENUM, FIELD(transport), 0, 0, gpuport_transport_words,
     "transport for every channel; auto picks per peer, a forced one that cannot reach a peer "
     "fails at channel creation"},
    {"GPUPORT_FIFO_SIZE", "1024", GPUPORT_CFG_POW2, FIELD(fifo_size), GPUPORT_FIFO_MIN_SIZE,
     GPUPORT_FIFO_MAX_SIZE, NULL, "triggers the communicator's FIFO holds"},
    {"GPUPORT_MAX_CHANNELS", "1024", GPUPORT_CFG_UINT, FIELD(max_channels), 1, 32768, NULL,
     "port channels one communicator can hold at once"},
    {"GPUPORT_TIMEOUT_MS", "60000", GPUPORT_CFG_UINT, FIELD(timeout_ms), 0, 86400000ull, NULL,
     "limit for every blocking call (wait, flush, a full FIFO, draining at destroy); 0 waits "
     "forever"},
    {"GPUPORT_SHM_ASYNC_MIN", "256k", GPUPORT_CFG_UINT, FIELD(shm_async_min), 0,
     (1ull << 52), NULL,
     "shm puts of at least this many bytes are copied by the flusher thread, not the proxy"},
    {"GPUPORT_PROXY_IDLE_US", "10000", GPUPORT_CFG_UINT, FIELD(proxy_idle_us), 0, 10000000ull,
     NULL, "microseconds without work after which the proxy stops polling and sleeps"},
    {"GPUPORT_PROXY_IDLE_CPU", "4", GPUPORT_CFG_UINT, FIELD(proxy_idle_cpu), 0, 100, NULL,
     "percent of a core a sleeping proxy may use: it measures what a wake-up costs and "
     "sleeps no longer than that budget needs (at most the caps below), so it sees a "
     "kernel's first trigger after a pause as soon as the budget allows; 0: sleep the caps"},
    {"GPUPORT_PROXY_SLEEP_MAX_US", "500", GPUPORT_CFG_UINT, FIELD(proxy_sleep_max_us), 0,
     100000ull, NULL,
     "longest sleep of an idle proxy in GPU mode: bounds how late it sees a kernel's first "
     "trigger after a pause (host pushes wake it at once); 0 never sleeps"},
    {"GPUPORT_PROXY_SLEEP_HOST_MAX_US", "500", GPUPORT_CFG_UINT, FIELD(proxy_sleep_host_max_us),
     0, 100000ull, NULL,
     "the same for a host-only communicator (no kernels' triggers to look for: host pushes, "
     "flusher completions and tcp sockets wake it at once); 0 never sleeps"},
    {"GPUPORT_PROXY_SLEEP_SCALE", "1000", GPUPORT_CFG_UINT, FIELD(proxy_sleep_scale), 0,
     1000000000ull, NULL,
     "an idle proxy sleeps its idle time divided by this (at least 1 us, at most what "
     "GPUPORT_PROXY_IDLE_CPU allows): prompt after short pauses, cheap in long ones; 0 sleeps "
     "the maximum at once"},
    {"GPUPORT_HOST_ID", "0", GPUPORT_CFG_HEX64, FIELD(host_id), 0, 0, NULL,
     "host identity in hex; ranks with equal ids share a host; 0 derives it from the host"},
    {"GPUPORT_GPU", "auto", GPUPORT_CFG_ENUM, FIELD(gpu), 0, 0, gpu_words,
     "GPU mode: auto uses the current CUDA device if there is one; on fails without one"},
    {"GPUPORT_BIND", "1", GPUPORT_CFG_ENUM, FIELD(bind), 0, 0, bind_words,
     "bind the proxy and flusher threads to cores near the GPU (and NIC); 0 leaves them where "
     "the OS puts them"},
    {"GPUPORT_PROXY_CPUS", "", GPUPORT_CFG_CPULIST, FIELD(proxy_cpus), 0, 0, NULL,
     "cores for the proxy threads, one per local rank in local-rank order (cpu list, e.g. "
     "0,8,16,24); empty decides"},
    {"GPUPORT_FLUSHER_CPUS", "", GPUPORT_CFG_CPULIST, FIELD(flusher_cpus), 0, 0, NULL,
     "cores for the flusher threads, one per local rank in local-rank order (cpu list, e.g. "
     "0,8,16,24); empty decides"},
    {"GPUPORT_IB_GID_INDEX", "auto", GPUPORT_CFG_AUTO_UINT, FIELD(ib_gid_index), 0, 255, NULL,
     "RoCE GID index for the ib transport; auto prefers RoCE v2 with an IPv4 address"},
    {"GPUPORT_IB_HCA", "", GPUPORT_CFG_HCALIST, FIELD(ib_hca), 0, GPUPORT_LIST_TEXT_MAX, NULL,
     "RDMA devices and ports for the ib transport (e.g. mlx5_0:1,mlx5_1:1); empty picks the "
     "one nearest the GPU"},
    {"GPUPORT_SOCKET_IFNAME", "", GPUPORT_CFG_IFLIST, FIELD(socket_ifname), 0,
     GPUPORT_LIST_TEXT_MAX, NULL,
     "network interfaces for the tcp transport, by name prefix (eth0,ib or ^docker to exclude); "
     "empty takes the first one up that is not loopback"},
    {"GPUPORT_SOCKET_TIMEOUT_MS", "10000", GPUPORT_CFG_UINT, FIELD(socket_timeout_ms), 1000,
     3600000ull, NULL,
     "a tcp connection whose data or keepalive probes go unanswered this long is broken: its "
     "channels fail on both sides"},
    {"GPUPORT_SOCKET_QUEUE", "4096", GPUPORT_CFG_POW2, FIELD(socket_queue), 128, 1048576ull, NULL,
     "tcp send queue per connection; all but 64 entries may hold operations sent and not yet "
     "acknowledged by the peer"},
};

const size_t gpuport_config_nvars = sizeof(gpuport_config_vars) / sizeof(gpuport_config_vars[0]);

void gpuport_config_describe(const gpuport_config_var_t *var, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    switch (var->type) {
    case GPUPORT_CFG_ENUM:
        for (size_t i = 0; var->words[i] && used < len; i++)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "|" : "",
                                     var->words[i]);
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
    case GPUPORT_CFG_IFLIST:
        snprintf(buf, len, "interface name prefixes separated by commas such as eth0,ib or "
                 "^docker,lo (^ first excludes them; letters, digits, . _ - @ :, each at most 15, "
                 "at most %llu characters), or empty",
                 (unsigned long long)var->max);
        break;
    case GPUPORT_CFG_WORDSET:
        used = (size_t)snprintf(buf, len, "words separated by commas from ");
        for (size_t i = 0; var->words[i] && used < len; i++)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "|" : "",
                                     var->words[i]);
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
    case GPUPORT_CFG_HCALIST:
        snprintf(buf, len, "device[:port] names separated by commas such as mlx5_0:1,mlx5_1 "
                 "(names of at most 63 characters, port 1..255, no spaces, at most %llu "
                 "characters), or empty",
                 (unsigned long long)var->max);
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

/* "name[:port],...": names of letters, digits, '_', '-', '.' (at most 63);
 * ports 1..255, decimal without leading zeros */
static int parse_hcalist(const char *s, gpuport_hca_list_t *out, char *problem, size_t len)
{
    memset(out, 0, sizeof(*out));
    while (*s) {
        size_t name = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.");
        gpuport_hca_entry_t *e = &out->entry[out->n];
        if (name == 0) {
            snprintf(problem, len, "a device name is missing or has a bad character at \"%s\"", s);
            return -1;
        }
        if (name >= sizeof(e->dev)) {
            snprintf(problem, len, "a device name of %zu characters (at most %zu)", name,
                     sizeof(e->dev) - 1);
            return -1;
        }
        if (out->n == GPUPORT_LIST_MAX) {
            snprintf(problem, len, "more than %d devices", GPUPORT_LIST_MAX);
            return -1;
        }
        memcpy(e->dev, s, name);
        s += name;
        if (*s == ':') {
            unsigned long port = 0;
            size_t digits = strspn(++s, "0123456789");
            if (digits == 0 || digits > 3 || s[0] == '0' ||
                (port = strtoul(s, NULL, 10)) < 1 || port > 255) {
                snprintf(problem, len, "bad port at \"%s\"", s);
                return -1;
            }
            e->port = (uint8_t)port;
            s += digits;
        }
        out->n++;
        if (*s == ',' && s[1] != '\0')
            s++;
        else if (*s) {
            snprintf(problem, len, "unexpected \"%s\"", s);
            return -1;
        }
    }
    return 0;
}

/* "" or [^]prefix[,prefix...]: no empty entries, interface-name characters */
static int parse_iflist(const char *s, gpuport_if_list_t *out, char *problem, size_t len)
{
    memset(out, 0, sizeof(*out));
    if (*s == '^') {
        out->exclude = 1;
        s++;
    } else if (*s == '\0') {
        return 0;
    }
    for (;;) {
        size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@:");
        if (n == 0) {
            snprintf(problem, len, *s ? "unexpected \"%s\"" : "an empty name", s);
            return -1;
        }
        if (n >= sizeof(out->prefix[0])) {
            snprintf(problem, len, "\"%.*s\" is longer than an interface name (15)", (int)n, s);
            return -1;
        }
        if (out->n == GPUPORT_LIST_MAX) {
            snprintf(problem, len, "more than %d names", GPUPORT_LIST_MAX);
            return -1;
        }
        memcpy(out->prefix[out->n++], s, n);
        s += n;
        if (*s == '\0')
            return 0;
        if (*s != ',') {
            snprintf(problem, len, "unexpected \"%s\"", s);
            return -1;
        }
        s++;
    }
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

/* A GPUPORT_LOG_FILE-like name: its %-sequences known, no blanks around
 * it; the length of what it expands to is checked when it is opened. */
static int parse_path(const char *s, size_t field_size, char *problem, size_t len)
{
    char out[PATH_MAX];

    if (strlen(s) >= field_size) {
        snprintf(problem, len, "%zu characters", strlen(s));
        return -1;
    }
    if (s[0] && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[strlen(s) - 1]))) {
        snprintf(problem, len, "blanks around the value");
        return -1;
    }
    return gpuport_log_path_expand(s, "host", 1, out, sizeof(out), problem, len);
}

/* list: a parsed HCALIST or IFLIST value, else NULL */
static void store(const gpuport_config_var_t *var, gpuport_config_t *config, uint64_t v,
                  const char *text, const void *list)
{
    char *field = (char *)config + var->offset;
    if (list)
        memcpy(field, list, var->field_size);
    else if (var->type == GPUPORT_CFG_CPULIST || var->type == GPUPORT_CFG_PATH)
        snprintf(field, var->field_size, "%s", text);
    else if (var->field_size == sizeof(uint64_t))
        memcpy(field, &v, sizeof(uint64_t));
    else {
        uint32_t v32 = (uint32_t)v;
        memcpy(field, &v32, sizeof(uint32_t));
    }
}

gpuport_status_t gpuport_config_parse_var(const gpuport_config_var_t *var, const char *value,
                                          gpuport_config_t *config)
{
    char accepted[256], problem[128] = "";
    gpuport_hca_list_t hca;
    gpuport_if_list_t ifl;
    const void *list = NULL;
    uint64_t v = 0;
    int ok = 0;

    switch (var->type) {
    case GPUPORT_CFG_ENUM:
        for (uint64_t i = 0; var->words[i]; i++) {
            if (strcasecmp(value, var->words[i]) == 0) {
                v = i;
                ok = 1;
                break;
            }
        }
        break;
    case GPUPORT_CFG_UINT:
    case GPUPORT_CFG_POW2:
        ok = parse_uint(value, &v) == 0 && v >= var->min && v <= var->max &&
             (var->type != GPUPORT_CFG_POW2 || (v & (v - 1)) == 0);
        break;
    case GPUPORT_CFG_HEX64: {
        char *end;
        const char *s = value;
        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
            s += 2;
        errno = 0;
        v = strtoull(s, &end, 16);
        ok = *s && strspn(s, "0123456789abcdefABCDEF") == strlen(s) && *end == '\0' &&
             errno == 0 && strlen(s) <= 16;
        break;
    }
    case GPUPORT_CFG_CPULIST:
        if (strlen(value) >= var->field_size)
            snprintf(problem, sizeof(problem), "%zu characters", strlen(value));
        else
            ok = gpuport_cpulist_parse(value, NULL, GPUPORT_CPULIST_MAX, problem,
                                       sizeof(problem)) >= 0;
        break;
    case GPUPORT_CFG_AUTO_UINT:
        /* decimal only: an index, not a size */
        if (strcasecmp(value, "auto") == 0) {
            v = (uint32_t)-1;
            ok = 1;
        } else {
            char *end;
            errno = 0;
            v = isdigit((unsigned char)value[0]) ? strtoull(value, &end, 10) : 0;
            ok = isdigit((unsigned char)value[0]) && *end == '\0' && errno == 0 &&
                 v >= var->min && v <= var->max;
        }
        break;
    case GPUPORT_CFG_IFLIST:
        if (strlen(value) > var->max)
            snprintf(problem, sizeof(problem), "%zu characters", strlen(value));
        else
            ok = parse_iflist(value, &ifl, problem, sizeof(problem)) == 0;
        list = &ifl;
        break;
    case GPUPORT_CFG_HCALIST:
        if (strlen(value) > var->max)
            snprintf(problem, sizeof(problem), "%zu characters", strlen(value));
        else
            ok = parse_hcalist(value, &hca, problem, sizeof(problem)) == 0;
        list = &hca;
        break;
    case GPUPORT_CFG_WORDSET:
        if (strlen(value) > var->max)
            snprintf(problem, sizeof(problem), "%zu characters", strlen(value));
        else
            ok = parse_wordset(value, var->words, &v, problem, sizeof(problem)) == 0;
        break;
    case GPUPORT_CFG_PATH:
        ok = parse_path(value, var->field_size, problem, sizeof(problem)) == 0;
        break;
    }
    if (!ok && !problem[0] && value[0] && (isspace((unsigned char)value[0]) ||
                                             isspace((unsigned char)value[strlen(value) - 1])))
        snprintf(problem, sizeof(problem), "blanks around the value");
    if (!ok) {
        gpuport_config_describe(var, accepted, sizeof(accepted));
        log_error("%s=\"%s\" is not valid%s%s: expected %s", var->name, value,
                  problem[0] ? ", " : "", problem, accepted);
        return GPUPORT_ERR_INVALID_CONFIG;
    }
    store(var, config, v, value, list);
    return GPUPORT_OK;
}

gpuport_status_t gpuport_config_load(gpuport_config_t *config_p)
{
    gpuport_config_t config;
    gpuport_status_t status = GPUPORT_OK;

    memset(&config, 0, sizeof(config));
    for (size_t i = 0; i < gpuport_config_nvars; i++) {
        if (gpuport_config_parse_var(&gpuport_config_vars[i],
                                     gpuport_config_vars[i].default_value, &config) != GPUPORT_OK)
            return GPUPORT_ERR_INTERNAL;
    }
    /* Every bad variable is reported, not only the first. */
    for (size_t i = 0; i < gpuport_config_nvars; i++) {
        const char *value = getenv(gpuport_config_vars[i].name);
        if (value && gpuport_config_parse_var(&gpuport_config_vars[i], value, &config))
            status = GPUPORT_ERR_INVALID_CONFIG;
    }
    for (char **e = environ; e && *e; e++) {
        size_t known = 0, len;
        if (strncmp(*e, "GPUPORT_", 8) != 0)
            continue;
        len = strcspn(*e, "=");
        for (size_t i = 0; i < gpuport_config_nvars && !known; i++)
            known = strlen(gpuport_config_vars[i].name) == len &&
                    strncmp(gpuport_config_vars[i].name, *e, len) == 0;
        /* GPUPORT_TEST_* belongs to the test suite, not the library */
        if (!known && strncmp(*e, "GPUPORT_TEST_", 13) != 0)
            log_warn("%.*s is not a gpuport variable and is ignored (gpuport_info -c lists them)",
                     (int)len, *e);
    }
    if (status != GPUPORT_OK)
        return status;
    *config_p = config;
    return GPUPORT_OK;
}
