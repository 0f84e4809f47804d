/*
 * Parked triggers (proxy thread): a channel whose transport has no room
 * (a full socket window, a full send queue, a flush or close waiting for
 * the channel's own work) must not hold the FIFO that every channel
 * shares. Its trigger leaves the FIFO for the channel's park, and so does
 * every later trigger of that channel while the park holds any, so the
 * channel's order is the FIFO's: puts before their signal, a flush after
 * everything before it, a close last. Each pass carries out what it can of
 * every park, oldest first (proxy_unpark); a channel whose oldest parked
 * trigger has found no room for the communicator's time limit fails with
 * GPUPORT_ERR_TIMEOUT, named, and what it had parked is dropped as for any
 * failed channel (its flushes answer with the error). A trigger keeps its
 * FIFO position: flushes are answered by it, and the host FIFO's settled
 * position (proxy_settle) never passes a parked trigger.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_PROXY
#include <stdlib.h>
#include <string.h>

#include "proxy_int.h"

typedef struct park_entry {
    gpuport_op_desc_t d;
    uint64_t pos;  /* FIFO position of the trigger's last slot */
    uint32_t used; /* slots it took */
    int fifo;
} park_entry_t;

/* A ring of cap entries (grown by doubling up to GPUPORT_PARK_MAX), n of
 * them from first. */
struct gpuport_park {
    park_entry_t *e;
    uint32_t first, n, cap;
    uint64_t since_ns; /* when the oldest entry last found no room */
    int listed;        /* on the proxy's park_list */
    int full_told;     /* the park was full: said once */
};

gpuport_status_t proxy_park_init(gpuport_comm_t comm)
{
    comm->proxy.parks = calloc(comm->config.max_channels, sizeof(struct gpuport_park));
    comm->proxy.park_list = calloc(comm->config.max_channels, sizeof(uint32_t));
    if (!comm->proxy.parks || !comm->proxy.park_list)
        return GPUPORT_ERR_NO_MEMORY;
    return GPUPORT_OK;
}

void gpuport_proxy_parks_free(gpuport_comm_t comm)
{
    if (comm->proxy.parks)
        for (uint32_t i = 0; i < comm->config.max_channels; i++)
            free(comm->proxy.parks[i].e);
    free(comm->proxy.parks);
    free(comm->proxy.park_list);
    comm->proxy.parks = NULL;
    comm->proxy.park_list = NULL;
}

uint32_t proxy_parked(gpuport_comm_t comm, const gpuport_pchan_t *ch)
{
    return comm->proxy.parks[ch->tl.id].n;
}

static void publish(gpuport_pchan_t *ch, const struct gpuport_park *p)
{
    atomic_store_explicit(&ch->parked, p->n, memory_order_relaxed);
}

static int grow(struct gpuport_park *p)
{
    uint32_t cap = p->cap ? 2 * p->cap : 16;
    park_entry_t *e = malloc(cap * sizeof(*e));

    if (!e)
        return 0;
    for (uint32_t i = 0; i < p->n; i++)
        e[i] = p->e[(p->first + i) % p->cap];
    free(p->e);
    p->e = e;
    p->first = 0;
    p->cap = cap;
    return 1;
}

int proxy_park(gpuport_comm_t comm, gpuport_pchan_t *ch, const gpuport_op_desc_t *d, int fifo,
               uint64_t pos, uint32_t used)
{
    struct gpuport_park *p = &comm->proxy.parks[ch->tl.id];
    park_entry_t *e;

    if (p->n == p->cap && (p->cap >= GPUPORT_PARK_MAX || !grow(p))) {
        /* flow control, not a fault (a kernel pushing faster than the
         * connection drains): said once, at info */
        if (!p->full_told)
            log_info("channel %u (to rank %d): %u triggers parked, waiting for room at its %s "
                     "transport; the %s FIFO waits behind its next one",
                     ch->tl.id, ch->tl.peer, p->n, ch->ops->name, fifo ? "device" : "host");
        p->full_told = 1;
        return 0;
    }
    if (p->n == 0)
        p->since_ns = gpuport_now_ns();
    e = &p->e[(p->first + p->n) % p->cap];
    e->d = *d;
    e->pos = pos;
    e->used = used;
    e->fifo = fifo;
    p->n++;
    comm->proxy.parked_total++;
    if (!p->listed) {
        p->listed = 1;
        comm->proxy.park_list[comm->proxy.npark_list++] = ch->tl.id;
    }
    publish(ch, p);
    return 1;
}

static void pop(gpuport_comm_t comm, struct gpuport_park *p)
{
    p->first = (p->first + 1) % p->cap;
    p->n--;
    comm->proxy.parked_total--;
}

/* A channel destroyed with triggers parked (its destroy gave up waiting):
 * nothing carries them out now; said, and dropped before its id is given
 * to another channel (gpuport_proxy_quiet waits for this pass). */
static void drop_gone(gpuport_comm_t comm, uint32_t id, struct gpuport_park *p)
{
    log_warn("channel %u was destroyed with %u trigger(s) parked (no room at its transport); "
             "they are not carried out",
             id, p->n);
    comm->proxy.abandoned += p->n;
    comm->proxy.parked_total -= p->n;
    p->n = 0;
    atomic_store_explicit(&comm->pchans[id].parked, 0, memory_order_relaxed);
}

/* The oldest parked trigger of ch found no room again. 1: try again now
 * (the channel was just failed for it, and a failed channel drops its
 * triggers); 0: leave the park for a later pass. */
static int refused(gpuport_comm_t comm, gpuport_pchan_t *ch, struct gpuport_park *p)
{
    const park_entry_t *e = &p->e[p->first];
    uint64_t now;

    /* the flusher's room is every channel's: not this channel's stall */
    if (!gpuport_flusher_has_room(&comm->proxy.flusher, 1) || comm->timeout_ns == 0 ||
        atomic_load_explicit(&ch->state->status, memory_order_relaxed) != GPUPORT_OK)
        return 0;
    now = gpuport_now_ns();
    if (now - p->since_ns < comm->timeout_ns)
        return 0;
    log_error("channel %u (to rank %d): its %s transport had no room for a %s for %llu ms "
              "(%s FIFO position %llu); the channel fails with its %u parked trigger(s), and the "
              "communicator's other channels go on",
              ch->tl.id, ch->tl.peer, ch->ops->name, gpuport_op_name(e->d.op),
              (unsigned long long)((now - p->since_ns) / 1000000), e->fifo ? "device" : "host",
              (unsigned long long)e->pos, p->n);
    gpuport_pchan_fail(ch, GPUPORT_ERR_TIMEOUT);
    return 1;
}

/* Carries out the channel's parked triggers in order until one finds no
 * room; returns how many. */
static int unpark_one(gpuport_comm_t comm, gpuport_pchan_t *ch, struct gpuport_park *p)
{
    int done = 0;

    while (p->n) {
        park_entry_t e = p->e[p->first];
        if (proxy_execute(comm, &e.d, e.fifo, e.pos) == EXEC_RETRY) {
            if (refused(comm, ch, p))
                continue;
            break;
        }
        pop(comm, p);
        p->since_ns = gpuport_now_ns();
        proxy_carried(comm, &e.d, e.fifo, e.pos, e.used);
        done++;
    }
    return done;
}

int proxy_unpark(gpuport_comm_t comm)
{
    uint32_t keep = 0;
    int done = 0;

    for (uint32_t i = 0; i < comm->proxy.npark_list; i++) {
        uint32_t id = comm->proxy.park_list[i];
        struct gpuport_park *p = &comm->proxy.parks[id];
        gpuport_pchan_t *ch = &comm->pchans[id];

        if (!atomic_load_explicit(&ch->active, memory_order_acquire))
            drop_gone(comm, id, p);
        else
            done += unpark_one(comm, ch, p);
        if (p->n) {
            comm->proxy.park_list[keep++] = id;
            publish(ch, p);
        } else {
            p->listed = 0;
            p->full_told = 0;
            if (atomic_load_explicit(&ch->active, memory_order_relaxed))
                publish(ch, p);
        }
    }
    comm->proxy.npark_list = keep;
    if (done && comm->proxy.nsig)
        proxy_sig_emit_all(comm);
    return done;
}

uint64_t proxy_park_abandon(gpuport_comm_t comm)
{
    uint64_t total = comm->proxy.parked_total;

    for (uint32_t i = 0; i < comm->proxy.npark_list; i++) {
        uint32_t id = comm->proxy.park_list[i];
        struct gpuport_park *p = &comm->proxy.parks[id];
        gpuport_pchan_t *ch = &comm->pchans[id];

        if (!p->n || !atomic_load_explicit(&ch->active, memory_order_acquire))
            continue;
        log_error("channel %u (to rank %d): %u trigger(s) parked for room at its %s transport "
                  "are not carried out (oldest: a %s); the channel is failed with 'shutting down'",
                  id, ch->tl.peer, p->n, ch->ops->name, gpuport_op_name(p->e[p->first].d.op));
        gpuport_pchan_fail(ch, GPUPORT_ERR_SHUTDOWN);
    }
    return total;
}
