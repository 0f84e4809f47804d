/*
 * tcp: the address a rank listens on (GPUPORT_SOCKET_IFNAME or the first
 * interface up), the communicator's listener, and whether a peer can be
 * reached at all.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "build_config.h"
#include "transport/tcp/tcp_priv.h"

socklen_t tcp_sockaddr_of(const tcp_rec_t *p, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (p->tcp_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = p->tcp_port;
        a->sin6_scope_id = p->tcp_scope;
        memcpy(&a->sin6_addr, p->tcp_addr, 16);
        return sizeof(*a);
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = p->tcp_port;
    memcpy(&a->sin_addr, p->tcp_addr, 4);
    return sizeof(*a);
}

void tcp_addr_text(const tcp_rec_t *p, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    inet_ntop(p->tcp_family == AF_INET6 ? AF_INET6 : AF_INET, p->tcp_addr, host, sizeof(host));
    snprintf(buf, len, p->tcp_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
             (unsigned)ntohs(p->tcp_port));
}

/* Does interface name match the GPUPORT_SOCKET_IFNAME list? */
static int if_selected(const tcp_if_list_t *list, const char *name)
{
    for (int i = 0; i < list->n; i++)
        if (strncmp(name, list->prefix[i], strlen(list->prefix[i])) == 0)
            return !list->exclude;
    return list->exclude;
}

static int usable_v6(const struct sockaddr_in6 *a)
{
    return !IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr) && !IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
}

/* Picks the interface and address to listen on: the first listed (or, with
 * no list, the first up and not loopback) with an IPv4 address, else with a
 * global IPv6 one; loopback when there is nothing else. */
static gpuport_status_t pick_address(const tcp_settings_t *cfg, tcp_rec_t *me,
                                     char *why, size_t len)
{
    struct ifaddrs *ifs, *i, *best = NULL;
    const tcp_if_list_t *list = &cfg->ifname;
    char seen[256] = "", text[TCP_IF_TEXT_MAX + 1];
    size_t used = 0;

    if (getifaddrs(&ifs) != 0) {
        snprintf(why, len, "getifaddrs failed: %s", strerror(errno));
        return GPUPORT_ERR_TRANSPORT;
    }
    for (int pass = 0; pass < 3 && !best; pass++) {
        for (i = ifs; i && !best; i = i->ifa_next) {
            int loop;
            if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
                continue;
            loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
            if (pass == 0 && used < sizeof(seen) && !strstr(seen, i->ifa_name))
                used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%s%s",
                                         used ? ", " : "", i->ifa_name);
            if (list->n ? !if_selected(list, i->ifa_name) : (pass < 2) == loop)
                continue;
            if (pass == 0 && i->ifa_addr->sa_family == AF_INET)
                best = i;
            else if (pass == 1 && i->ifa_addr->sa_family == AF_INET6 &&
                     (loop || usable_v6((struct sockaddr_in6 *)i->ifa_addr)))
                best = i;
            else if (pass == 2 && !list->n &&
                     (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
                best = i;
        }
    }
    if (!best) {
        freeifaddrs(ifs);
        if (list->n) {
            tcp_if_list_format(list, text, sizeof(text));
            snprintf(why, len, "GPUPORT_SOCKET_IFNAME=%.64s matches no interface that is up with "
                     "an address (interfaces up here: %.96s)", text, seen[0] ? seen : "none");
            return GPUPORT_ERR_INVALID_CONFIG;
        }
        snprintf(why, len, "no network interface is up with an address");
        return GPUPORT_ERR_TRANSPORT;
    }
    snprintf(me->tcp_ifname, sizeof(me->tcp_ifname), "%s", best->ifa_name);
    if (best->ifa_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)best->ifa_addr;
        me->tcp_family = AF_INET6;
        me->tcp_scope = a->sin6_scope_id;
        memcpy(me->tcp_addr, &a->sin6_addr, 16);
    } else {
        me->tcp_family = AF_INET;
        memcpy(me->tcp_addr, &((const struct sockaddr_in *)best->ifa_addr)->sin_addr, 4);
    }
    if (best->ifa_flags & IFF_LOOPBACK)
        log_info("no interface but loopback is up; tcp reaches only ranks on this host");
    freeifaddrs(ifs);
    return GPUPORT_OK;
}

_Static_assert(sizeof(tcp_rec_t) <= GPUPORT_TL_BLOB_MAX, "tcp_rec_t fits a rank record's blob");

gpuport_status_t tcp_comm_open(gpuport_tl_comm_t *tl, void *blob)
{
    struct gpuport_tcp_comm *t = calloc(1, sizeof(*t));
    tcp_rec_t *me = gpuport_tl_blob_set(blob, TCP_REC_VERSION, sizeof(tcp_rec_t));
    struct sockaddr_storage ss;
    socklen_t sl;
    gpuport_status_t status;
    int size = gpuport_tl_size(tl->comm), forced = gpuport_tl_forced(tl);
    char where[80];

    if (!t)
        return GPUPORT_ERR_NO_MEMORY;
    t->tl = tl;
    t->listen_fd = -1;
    t->epfd = -1;
    tl->priv = t;
    t->pending = malloc((size_t)size * sizeof(int));
    t->conns = calloc((size_t)size, sizeof(*t->conns));
    if (!t->pending || !t->conns) {
        tcp_comm_close(tl);
        return GPUPORT_ERR_NO_MEMORY;
    }
    for (int r = 0; r < size; r++)
        t->pending[r] = -1;
    memset(me, 0, sizeof(*me));
    if (getrandom(&t->cookie, sizeof(t->cookie), 0) != sizeof(t->cookie))
        t->cookie = gpuport_now_ns() ^ ((uint64_t)getpid() << 32);
    status = pick_address(gpuport_tl_settings(tl->comm, GPUPORT_TL_KIND_TCP), me, t->why,
                          sizeof(t->why));
    if (status == GPUPORT_OK) {
        sl = tcp_sockaddr_of(me, &ss); /* port 0: any */
        /* nonblocking: the acceptor takes every waiting connection, then polls */
        t->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (t->listen_fd < 0 || bind(t->listen_fd, (struct sockaddr *)&ss, sl) != 0 ||
            listen(t->listen_fd, 1024) != 0 ||
            getsockname(t->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
            snprintf(t->why, sizeof(t->why), "cannot listen on %s: %s", me->tcp_ifname,
                     strerror(errno));
            status = GPUPORT_ERR_TRANSPORT;
        }
    }
    if (status != GPUPORT_OK) {
        if (t->listen_fd >= 0)
            close(t->listen_fd);
        t->listen_fd = -1;
        me->tcp_port = 0;
        if (forced || status == GPUPORT_ERR_INVALID_CONFIG) {
            log_error("%s", t->why);
            tcp_comm_close(tl);
            return status;
        }
        log_info("not available: %s", t->why);
        return GPUPORT_OK;
    }
    me->tcp_port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port;
    me->tcp_cookie = t->cookie;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (t->epfd < 0)
        log_warn("epoll_create1 failed (%s); the proxy will try every connection on every "
                 "pass", strerror(errno));
    tcp_addr_text(me, where, sizeof(where));
    log_debug("listening on %s (%s)", where, me->tcp_ifname);
    return GPUPORT_OK;
}

void tcp_comm_close(gpuport_tl_comm_t *tl)
{
    struct gpuport_tcp_comm *t = tl->priv;

    if (!t)
        return;
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    if (t->epfd >= 0)
        close(t->epfd);
    tcp_accept_close(t);
    for (int r = 0; t->pending && r < gpuport_tl_size(tl->comm); r++)
        if (t->pending[r] >= 0)
            close(t->pending[r]);
    free(t->pending);
    free(t->conns);
    free(t);
    tl->priv = NULL;
}

int tcp_reachable(gpuport_tl_comm_t *tl, int peer, char *why, size_t len)
{
    struct gpuport_tcp_comm *t = tl->priv;
    const tcp_rec_t *p;

    if (!t || t->listen_fd < 0) {
        snprintf(why, len, "this rank has no tcp listener (%s)", t ? t->why : "not set up");
        return 0;
    }
    p = gpuport_tl_blob(tl, peer);
    if (!p) {
        snprintf(why, len, "rank %d's tcp record is not this gpuport's", peer);
        return 0;
    }
    if (p->tcp_port == 0) {
        snprintf(why, len, "rank %d (%s) has no tcp listener; its log says why", peer,
                 gpuport_tl_proc(tl->comm, peer)->hostname);
        return 0;
    }
    return 1;
}

/* For gpuport_info: where a communicator created now would listen. */
void tcp_describe(const void *settings, char *buf, size_t len)
{
    const tcp_settings_t *cfg = settings;
    tcp_rec_t me;
    char why[256], host[INET6_ADDRSTRLEN] = "?";

    memset(&me, 0, sizeof(me));
    if (pick_address(cfg, &me, why, sizeof(why)) != GPUPORT_OK) {
        snprintf(buf, len, "built, not usable here: %s", why);
        return;
    }
    inet_ntop(me.tcp_family, me.tcp_addr, host, sizeof(host));
    snprintf(buf, len, "available: ranks on other hosts, host memory%s, sockets on interface %s, "
             "address %s%s",
             GPUPORT_HAVE_CUDA ? " and GPU memory from gpuport_mem_alloc_device" : "",
             me.tcp_ifname, host, cfg->ifname.n ? " (GPUPORT_SOCKET_IFNAME)" : "");
}
