/*
 * tcp: the listener's side of connection set-up (application thread, under
 * comm->lock). Anyone who can reach the port can connect, so a connection
 * is a stranger until its greeting (tcp_hello_t: the magic, the listener's
 * cookie, the ranks) has arrived whole and checks out. Greetings are read
 * from every pending connection at once, each within GREET_MS of its
 * accept, so a stranger that sends nothing, or half a greeting, or one byte
 * at a time, holds a slot of the table and nothing else: a legitimate
 * greeting that arrives beside it is taken at once. The table holds
 * GREET_MAX connections; a new one evicts the oldest. Strangers are logged
 * once per burst (a line at most every STRANGER_LOG_MS, with the counts).
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/tcp_priv.h"

#define GREET_MS 2000        /* a greeting's own limit, from its accept */
#define GREET_MAX 32         /* connections whose greeting is awaited at once */
#define STRANGER_LOG_MS 1000 /* at most one line about strangers per second */

struct tcp_greeting {
    int fd;
    uint32_t got;     /* bytes of the greeting so far */
    uint64_t expires; /* gpuport_now_ns() limit */
    tcp_hello_t h;
};

/* why a connection was dropped, for the summary line */
enum { DROP_WRONG, DROP_SILENT, DROP_CLOSED, DROP_EVICTED, DROP_KINDS };
_Static_assert(sizeof(((struct gpuport_tcp_comm *)0)->strangers) ==
                   DROP_KINDS * sizeof(uint64_t),
               "a stranger counter per reason (tcp_priv.h)");

static void stranger(struct gpuport_tcp_comm *t, int why)
{
    t->strangers[why]++;
}

/* One line for what was dropped since the last, unless one was logged
 * less than STRANGER_LOG_MS ago (force: at the end of a set-up). */
static void strangers_log(struct gpuport_tcp_comm *t, int force)
{
    uint64_t now = gpuport_now_ns(), n = 0;

    for (int i = 0; i < DROP_KINDS; i++)
        n += t->strangers[i];
    if (n == 0 || (!force && now - t->strangers_logged_ns < STRANGER_LOG_MS * 1000000ull))
        return;
    log_warn("dropped %llu connection(s) to the tcp listener that are not from this "
             "communicator: %llu with a wrong greeting, %llu without a whole greeting within "
             "%d ms, %llu closed before greeting, %llu evicted (more than %d awaited at once)",
             (unsigned long long)n, (unsigned long long)t->strangers[DROP_WRONG],
             (unsigned long long)t->strangers[DROP_SILENT], GREET_MS,
             (unsigned long long)t->strangers[DROP_CLOSED],
             (unsigned long long)t->strangers[DROP_EVICTED], GREET_MAX);
    memset(t->strangers, 0, sizeof(t->strangers));
    t->strangers_logged_ns = now;
}

static void greet_drop(struct gpuport_tcp_comm *t, int i, int why)
{
    if (why >= 0)
        stranger(t, why);
    close(t->greet[i].fd);
    t->greet[i] = t->greet[--t->ngreet];
}

/* Takes every connection waiting at the listener into the table. */
static void accept_all(struct gpuport_tcp_comm *t)
{
    for (;;) {
        int fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN: none left (or an error a later poll shows again) */
        if (t->ngreet == GREET_MAX) {
            int oldest = 0;
            for (int i = 1; i < t->ngreet; i++)
                if (t->greet[i].expires < t->greet[oldest].expires)
                    oldest = i;
            greet_drop(t, oldest, DROP_EVICTED);
        }
        memset(&t->greet[t->ngreet], 0, sizeof(t->greet[0]));
        t->greet[t->ngreet].fd = fd;
        t->greet[t->ngreet].expires = gpuport_now_ns() + GREET_MS * 1000000ull;
        t->ngreet++;
    }
}

/* Reads what greeting i has sent: 1 whole, 0 not yet, -1 dropped. */
static int greet_read(struct gpuport_tcp_comm *t, int i)
{
    struct tcp_greeting *g = &t->greet[i];

    while (g->got < sizeof(g->h)) {
        ssize_t n = recv(g->fd, (char *)&g->h + g->got, sizeof(g->h) - g->got, 0);
        if (n > 0) {
            g->got += (uint32_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        greet_drop(t, i, DROP_CLOSED);
        return -1;
    }
    return 1;
}

/* A whole greeting: the rank it comes from (the fd leaves the table), -1
 * if it is a stranger's (dropped), -2 if a rank of this communicator runs
 * another version (logged). */
static int greet_check(gpuport_tl_comm_t *tl, int i)
{
    struct gpuport_tcp_comm *t = tl->priv;
    const tcp_hello_t *h = &t->greet[i].h;
    int rank = gpuport_tl_rank(tl->comm), size = gpuport_tl_size(tl->comm), from;

    if (h->magic != TCP_HELLO_MAGIC || h->cookie != t->cookie || h->to_rank != rank ||
        h->from_rank < 0 || h->from_rank >= size) {
        greet_drop(t, i, DROP_WRONG);
        return -1;
    }
    if (h->version_major != GPUPORT_VERSION_MAJOR || h->version_minor != GPUPORT_VERSION_MINOR ||
        h->layout != GPUPORT_RECORD_LAYOUT) {
        log_error("rank %d runs gpuport %u.%u.%u (layout %u), this rank %d.%d.%d (layout %d)",
                  h->from_rank, h->version_major, h->version_minor, h->version_patch, h->layout,
                  GPUPORT_VERSION_MAJOR, GPUPORT_VERSION_MINOR, GPUPORT_VERSION_PATCH,
                  GPUPORT_RECORD_LAYOUT);
        greet_drop(t, i, -1);
        return -2;
    }
    from = h->from_rank;
    if (t->pending[from] >= 0)
        close(t->pending[from]); /* a rank greets once per connection it opens */
    t->pending[from] = t->greet[i].fd;
    t->greet[i] = t->greet[--t->ngreet];
    return from;
}

/* One look at every greeting: whole ones checked (into pending), expired
 * ones dropped. -2: a rank of another version. */
static int greet_pass(gpuport_tl_comm_t *tl, const struct pollfd *pf, int npf)
{
    struct gpuport_tcp_comm *t = tl->priv;
    uint64_t now = gpuport_now_ns();

    /* backwards: a drop moves the last entry into the freed place */
    for (int i = t->ngreet - 1; i >= 0; i--) {
        int readable = 1, r;
        for (int k = 1; k < npf; k++)
            if (pf[k].fd == t->greet[i].fd)
                readable = pf[k].revents != 0;
        r = readable ? greet_read(t, i) : 0;
        if (r == 1 && greet_check(tl, i) == -2)
            return -2;
        if (r == 0 && now >= t->greet[i].expires)
            greet_drop(t, i, DROP_SILENT);
    }
    return 0;
}

/* poll()'s limit: the set-up's deadline or the nearest greeting's, in ms. */
static int wait_ms(const struct gpuport_tcp_comm *t, uint64_t deadline)
{
    uint64_t now = gpuport_now_ns(), until = deadline;
    int ms;

    for (int i = 0; i < t->ngreet; i++)
        if (t->greet[i].expires < until)
            until = t->greet[i].expires;
    if (until <= now)
        return 0;
    ms = (int)((until - now + 999999) / 1000000);
    return ms > 1000 ? 1000 : ms;
}

int tcp_accept_from(gpuport_tl_comm_t *tl, int peer, uint64_t deadline)
{
    struct gpuport_tcp_comm *t = tl->priv;
    struct pollfd pf[1 + GREET_MAX];

    if (!t->greet && !(t->greet = calloc(GREET_MAX, sizeof(*t->greet)))) {
        log_error("no memory for the tcp listener's greetings");
        return -1;
    }
    for (;;) {
        int npf = 0, fd;

        if (t->pending[peer] >= 0) {
            fd = t->pending[peer];
            t->pending[peer] = -1;
            strangers_log(t, 1);
            return fd;
        }
        if (gpuport_deadline_passed(deadline)) {
            strangers_log(t, 1);
            log_error("rank %d did not connect within GPUPORT_TIMEOUT_MS=%llu", peer,
                      (unsigned long long)(gpuport_tl_timeout_ns(tl->comm) / 1000000));
            return -1;
        }
        pf[npf++] = (struct pollfd){t->listen_fd, POLLIN, 0};
        for (int i = 0; i < t->ngreet; i++)
            pf[npf++] = (struct pollfd){t->greet[i].fd, POLLIN, 0};
        if (poll(pf, (nfds_t)npf, wait_ms(t, deadline)) < 0 && errno != EINTR)
            continue;
        if (greet_pass(tl, pf, npf) == -2) {
            strangers_log(t, 1);
            return -1;
        }
        if (pf[0].revents)
            accept_all(t);
        strangers_log(t, 0);
    }
}

void tcp_accept_close(struct gpuport_tcp_comm *t)
{
    while (t->ngreet > 0)
        greet_drop(t, t->ngreet - 1, -1);
    free(t->greet);
    t->greet = NULL;
}
