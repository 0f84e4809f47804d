/* The tcp transport's settings: its rows and GPUPORT_SOCKET_IFNAME's list;
 * see tcp_settings.h. */
#include "transport/tcp/tcp_settings.h"

#include <stdio.h>
#include <string.h>

/* "" or [^]prefix[,prefix...]: no empty entries, interface-name characters */
int tcp_if_list_parse(const char *s, tcp_if_list_t *out, char *problem, size_t len)
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
        if (out->n == TCP_IF_MAX) {
            snprintf(problem, len, "more than %d names", TCP_IF_MAX);
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

void tcp_if_list_format(const tcp_if_list_t *list, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", list->exclude ? "^" : "");

    for (int i = 0; i < list->n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "", list->prefix[i]);
}

static int if_parse(const char *value, void *field, char *problem, size_t len)
{
    return tcp_if_list_parse(value, field, problem, len);
}

static void if_describe(const gpuport_config_var_t *var, char *buf, size_t len)
{
    snprintf(buf, len, "interface name prefixes separated by commas such as eth0,ib or "
             "^docker,lo (^ first excludes them; letters, digits, . _ - @ :, each at most 15, "
             "at most %llu characters), or empty",
             (unsigned long long)var->max);
}

static void if_format(const void *field, char *buf, size_t len)
{
    tcp_if_list_format(field, buf, len);
}

static const gpuport_cfg_custom_t if_syntax = {if_parse, if_describe, if_format};

#define FIELD(f) GPUPORT_CFG_FIELD(tcp_settings_t, f)

static const char *const onoff_words[] = {"0", "1", NULL};

static const gpuport_config_var_t rows[] = {
    {"GPUPORT_SOCKET_IFNAME", "", GPUPORT_CFG_CUSTOM, FIELD(ifname), 0, TCP_IF_TEXT_MAX, NULL,
     "network interfaces for the tcp transport, by name prefix (eth0,ib or ^docker to exclude); "
     "empty takes the first one up that is not loopback",
     &if_syntax},
    {"GPUPORT_SOCKET_TIMEOUT_MS", "10000", GPUPORT_CFG_UINT, FIELD(timeout_ms), 1000, 3600000ull,
     NULL,
     "a tcp connection whose data or keepalive probes go unanswered this long is broken: its "
     "channels fail on both sides",
     NULL},
    {"GPUPORT_SOCKET_QUEUE", "4096", GPUPORT_CFG_POW2, FIELD(queue), 128, 1048576ull, NULL,
     "tcp send queue per connection; all but 64 entries may hold operations sent and not yet "
     "acknowledged by the peer",
     NULL},
    {"GPUPORT_SOCKET_ACK_DELAY_US", "20", GPUPORT_CFG_UINT, FIELD(ack_delay_us), 0, 10000ull,
     NULL,
     "after a signal arrives, how long the acknowledgement waits for an answer to ride with "
     "(the woken application often sends one at once); a flush on the other side waits up to "
     "this much longer when nothing answers; 0 acknowledges at once",
     NULL},
    {"GPUPORT_SOCKET_RCVLOWAT", "512k", GPUPORT_CFG_UINT, FIELD(rcvlowat), 0, 4ull << 20, NULL,
     "while a large payload arrives, the receiving proxy is woken only once half of its rest, "
     "at most this many bytes, has come (SO_RCVLOWAT), so that each read takes a large piece; "
     "below 16k (0 too) it reads bytes as they come",
     NULL},
    {"GPUPORT_SOCKET_INLINE_MAX", "64k", GPUPORT_CFG_UINT, FIELD(inline_max), 0, 16ull << 20,
     NULL,
     "with GPUPORT_HOST_INLINE=1, a host put_with_signal of host memory up to this many bytes "
     "is sent by the calling thread when nothing is queued on the connection (signals and "
     "values with a signal too); larger ones, and plain puts, go through the proxy",
     NULL},
    {"GPUPORT_SOCKET_HOST_RECV", "1", GPUPORT_CFG_ENUM, FIELD(host_recv), 0, 0, onoff_words,
     "with GPUPORT_HOST_INLINE=1, a host wait or poll on a tcp channel that finds no signal "
     "receives what the connection holds itself (messages for host memory, payloads below "
     "16k) instead of waiting for the proxy to; 0 leaves every receive to the proxy",
     NULL},
};

const gpuport_settings_table_t gpuport_tcp_settings = {rows, sizeof(rows) / sizeof(rows[0]),
                                                       sizeof(tcp_settings_t)};
