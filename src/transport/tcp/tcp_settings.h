/*
 * The tcp transport's GPUPORT_* settings: GPUPORT_SOCKET_IFNAME (an
 * interface name list only tcp reads), GPUPORT_SOCKET_TIMEOUT_MS,
 * GPUPORT_SOCKET_QUEUE, GPUPORT_SOCKET_ACK_DELAY_US, GPUPORT_SOCKET_RCVLOWAT,
 * GPUPORT_SOCKET_INLINE_MAX and GPUPORT_SOCKET_HOST_RECV. For the tcp
 * transport's files and its tests.
 */
#ifndef GPUPORT_TCP_SETTINGS_H
#define GPUPORT_TCP_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "transport/tl_core.h"

/* GPUPORT_SOCKET_IFNAME's text is at most TCP_IF_TEXT_MAX characters, so
 * it has at most TCP_IF_MAX entries ("a,a,...,a"). */
#define TCP_IF_TEXT_MAX 255
#define TCP_IF_MAX 128

/* GPUPORT_SOCKET_IFNAME: interface name prefixes. */
typedef struct tcp_if_list {
    int exclude; /* "^": the interfaces that match none of the prefixes */
    int n;       /* 0: no list */
    char prefix[TCP_IF_MAX][16]; /* an interface name has at most 15 characters */
} tcp_if_list_t;

typedef struct tcp_settings {
    tcp_if_list_t ifname; /* GPUPORT_SOCKET_IFNAME, none = first up non-loopback */
    uint64_t timeout_ms;  /* GPUPORT_SOCKET_TIMEOUT_MS */
    uint64_t queue;       /* GPUPORT_SOCKET_QUEUE: operations in flight per connection */
    uint64_t ack_delay_us; /* GPUPORT_SOCKET_ACK_DELAY_US: how long an ACK after a signal
                            * waits for something to ride with */
    uint64_t rcvlowat;     /* GPUPORT_SOCKET_RCVLOWAT: the most a receiving proxy waits to
                            * have queued before it reads on in a payload */
    uint64_t inline_max;   /* GPUPORT_SOCKET_INLINE_MAX: the largest payload of a
                            * put_with_signal that its host caller sends itself */
    int host_recv;         /* GPUPORT_SOCKET_HOST_RECV: 0 or 1, host waits receive themselves */
} tcp_settings_t;

extern const gpuport_settings_table_t gpuport_tcp_settings;

/* "" or [^]prefix[,prefix...]: 0, or -1 with what is wrong in problem. */
int tcp_if_list_parse(const char *s, tcp_if_list_t *out, char *problem, size_t len);
/* A parsed list as text, in the one spelling the parser accepts for it. */
void tcp_if_list_format(const tcp_if_list_t *list, char *buf, size_t len);

#endif
