/*
 * tcp: a waiting host thread's own receive (GPUPORT_HOST_INLINE,
 * tcp_host_recv, application threads): under the connection's lock, the
 * messages it may act on itself, peeked from the socket and handled as the
 * proxy's receive (tcp_rx.c) handles them; the rest stays for the proxy.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tcp/tcp_priv.h"

#define HOST_RX_MSGS 16 /* headers one call acts on at most */

/* An ACK whose every operation is a host call's own (tcp_host_send): its
 * completions are counters any thread may add to. The proxy's operations
 * complete into the proxy's own accounting (gpuport_tl_chan_complete). */
static int acks_host_sends(const tcp_conn_t *tc, uint64_t count)
{
    if (count > tc->ops_sent || count < tc->acks_seen)
        return 0;
    for (uint64_t i = tc->ops_acked; i < count; i++)
        if (!(tc->inflight[i % tc->q] & INFLIGHT_INLINE)) /* NO_CHANNEL has the bit */
            return 0;
    return 1;
}

/* The messages a waiting host thread acts on itself: what stores into host
 * memory and adds to semaphores, and ACKs of host calls' own sends. Anything
 * else stays for the proxy: GPU destinations (the flusher), whatever breaks
 * the connection or fails a channel (the proxy's to report), goodbyes,
 * payloads of DIRECT_MIN or more (received in place with SO_RCVLOWAT), and
 * get, atomic_add and accumulate's messages (a GET's answer goes into the
 * send ring, a GET_DATA completes the proxy's operations). */
static int host_may_take(const tcp_conn_t *tc, const tcp_msg_t *m)
{
    gpuport_tl_chan_t *ch;

    if (m->type == MSG_ACK)
        return acks_host_sends(tc, m->a);
    if (m->type != MSG_PUT && m->type != MSG_SIGNAL && m->type != MSG_VALUE)
        return 0;
    if (!(ch = tcp_rx_channel(tc, m->channel)))
        return 0;
    if (m->type == MSG_SIGNAL)
        return m->a > 0;
    if (gpuport_region_is_device(ch->local_dst.kind))
        return 0;
    if (m->type == MSG_VALUE)
        return m->a % 8 == 0 && m->a <= ch->local_dst.size && ch->local_dst.size - m->a >= 8;
    return m->size < DIRECT_MIN && m->a <= ch->local_dst.size &&
           m->size <= ch->local_dst.size - m->a;
}

/* How many bytes at the start of p[0..n) are whole messages a waiting host
 * thread may act on (the rest of a payload under way first); *declined
 * once it met one it may not. */
static size_t host_prefix(const tcp_conn_t *tc, const char *p, size_t n, int *declined)
{
    size_t at = 0;

    if (tc->in_payload) {
        if (tc->payload_left > n)
            return 0;
        at = (size_t)tc->payload_left;
    }
    for (;;) {
        tcp_msg_t m;
        size_t len;
        if (n - at < sizeof(m))
            return at;
        memcpy(&m, p + at, sizeof(m));
        if (!host_may_take(tc, &m)) {
            *declined = 1;
            return at;
        }
        len = sizeof(m) + (m.type == MSG_PUT ? (size_t)m.size : 0); /* size < DIRECT_MIN */
        if (n - at < len)
            return at;
        at += len;
    }
}

#define HOST_RX_PEEK (DIRECT_MIN + 4 * sizeof(tcp_msg_t)) /* a whole message and more */

/* The next whole messages a waiter may act on, from the socket into rxbuf
 * (behind the part of a header or the rest of a payload the buffer may
 * hold): peeked first, and only those taken, so that nothing the proxy must
 * receive (a large payload in place, a GPU destination) is read here and
 * split between the two. 1: some came; *drained: the socket held no more.
 * An error is kept for the proxy, which breaks the connection with it; an
 * end of stream stays in the socket for the proxy to find. */
static int host_fill(tcp_conn_t *tc, int *drained, int *declined)
{
    size_t avail = tc->rx_len - tc->rx_pos, room, take;
    ssize_t n;

    if (tc->rx_pos > 0) {
        memmove(tc->rxbuf, tc->rxbuf + tc->rx_pos, avail);
        tc->rx_len = avail;
        tc->rx_pos = 0;
    }
    room = RXBUF - tc->rx_len < HOST_RX_PEEK ? RXBUF - tc->rx_len : HOST_RX_PEEK;
    n = recv(tc->fd_rx, tc->rxbuf + tc->rx_len, room, MSG_DONTWAIT | MSG_PEEK);
    if (n <= 0) {
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            tc->rx_err = errno;
        return 0;
    }
    take = host_prefix(tc, tc->rxbuf, avail + (size_t)n, declined);
    if (take <= avail)
        return 0;
    take -= avail;
    *drained = take == (size_t)n && (size_t)n < room;
    n = recv(tc->fd_rx, tc->rxbuf + tc->rx_len, take, MSG_DONTWAIT); /* the same bytes */
    if (n <= 0) {
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            tc->rx_err = errno;
        return 0;
    }
    tc->rx_len += (size_t)n;
    return 1;
}

int tcp_host_recv(gpuport_tl_chan_t *ch)
{
    tcp_conn_t *tc = ch->conn->priv;
    int took = 0, read = 0, headers = 0, drained = 0, declined = 0;

    if (!atomic_load_explicit(&tc->host_rx_hint, memory_order_relaxed) || !tcp_trylock(tc))
        return 0;
    while (tcp_host_recv_ok(tc) && headers < HOST_RX_MSGS) {
        size_t avail = tc->rx_len - tc->rx_pos;
        tcp_msg_t m;

        if (tc->in_payload && avail > 0) {
            uint64_t room = tcp_payload_room(tc);
            size_t take = avail < room ? avail : (size_t)room;
            if (tc->payload_dst)
                memcpy(tc->payload_dst, tc->rxbuf + tc->rx_pos, take);
            tc->rx_pos += take;
            tcp_payload_done(tc, take);
            took = 1;
            continue;
        }
        if (!tc->in_payload && avail >= sizeof(m)) {
            memcpy(&m, tc->rxbuf + tc->rx_pos, sizeof(m));
            if (!host_may_take(tc, &m)) {
                declined = 1;
                break;
            }
            tc->cur = m;
            tc->rx_pos += sizeof(m);
            tcp_on_header(tc);
            headers++;
            took = 1;
            continue;
        }
        /* after a short read the socket is empty: no recv spent on EAGAIN */
        if (drained || !host_fill(tc, &drained, &declined))
            break;
        read = 1;
    }
    if (declined)
        tc->rx_declined = 1; /* no waiter peeks again before the proxy took it */
    if (took)
        __atomic_fetch_add(&tc->host_recvs, 1, __ATOMIC_RELAXED);
    tcp_unlock(tc);
    /* what was applied is owed an ACK; bytes read (the rest of a payload
     * under way) are the proxy's to go on with */
    return took || read;
}
