/* The proxy's FIFO consumer for CUDA C++ tests; see fifo_consumer.h. */
#include "fifo_consumer.h"

#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_int.h"

#define QUEUE 4096u

struct fifo_consumer {
    struct gpuport_comm *comm;
    gpuport_fifo_t fifo;
    gpuport_op_desc_t q[QUEUE]; /* puts carried out, not yet popped */
    uint32_t q_head, q_tail;
};

/* the consumer whose proxy pass is running (one pass at a time) */
static fifo_consumer_t *current;

static int record_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                      int behind_work, gpuport_work_t *work)
{
    fifo_consumer_t *c = current;
    gpuport_op_desc_t *d = &c->q[c->q_tail++ % QUEUE];

    (void)behind_work, (void)work;
    memset(d, 0, sizeof(*d));
    d->op = GPUPORT_OP_PUT;
    d->channel = ch->id;
    d->dst_off = dst_off;
    d->src_off = src_off;
    d->size = size;
    return GPUPORT_OK;
}

/* a put the queue has no room for waits in its park, as one a transport
 * without room does */
static int has_room(gpuport_tl_chan_t *ch, uint32_t n)
{
    (void)ch;
    return current->q_tail - current->q_head + n <= QUEUE;
}

static const gpuport_transport_ops_t record_ops = {
    .name = "record", .put = record_put, .has_room = has_room};

size_t fifo_consumer_states_bytes(uint32_t nchan)
{
    return nchan * sizeof(gpuport_chan_state_t);
}

size_t fifo_consumer_gave_up_offset(uint32_t id)
{
    return id * sizeof(gpuport_chan_state_t) + offsetof(gpuport_chan_state_t, gave_up);
}

fifo_consumer_t *fifo_consumer_create(void *slots, void *tail, void *gave_up_any, void *states,
                                      uint32_t size, uint32_t nchan)
{
    fifo_consumer_t *c = calloc(1, sizeof(*c));
    struct gpuport_comm *comm = calloc(1, sizeof(*comm));

    if (!c || !comm)
        goto err;
    c->comm = comm;
    comm->states = states;
    comm->config.max_channels = nchan;
    comm->pchans = calloc(nchan, sizeof(*comm->pchans));
    comm->ctrl = calloc(nchan, sizeof(*comm->ctrl));
    comm->proxy.flusher.capacity = 1024;
    if (!comm->pchans || !comm->ctrl || proxy_park_init(comm) != GPUPORT_OK)
        goto err;
    memset(states, 0, fifo_consumer_states_bytes(nchan));
    for (uint32_t i = 0; i < nchan; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        ch->tl.id = i;
        ch->state = &comm->states[i];
        ch->ops = &record_ops;
        ch->tl.src.size = ch->tl.dst.rec.size = 1ull << 50;
        atomic_store(&ch->active, 1);
    }
    c->fifo.slots = slots;
    c->fifo.tail = tail;
    c->fifo.gave_up_any = gave_up_any;
    c->fifo.size = size;
    c->fifo.log2_size = (uint32_t)__builtin_ctz(size);
    return c;
err:
    fifo_consumer_destroy(c);
    if (!c && comm)
        free(comm);
    return NULL;
}

uint32_t fifo_consumer_pop(fifo_consumer_t *c, gpuport_op_desc_t *d)
{
    if (c->q_head == c->q_tail) {
        current = c;
        /* parked puts first (the queue was full), then the FIFO: the
         * proxy keeps each channel's order across the two */
        proxy_unpark(c->comm);
        proxy_consume_fifo(c->comm, &c->fifo, GPUPORT_FIFO_DEVICE);
        current = NULL;
    }
    if (c->q_head == c->q_tail)
        return 0;
    *d = c->q[c->q_head++ % QUEUE];
    return gpuport_trigger_needs_ext(d->dst_off, d->src_off, d->size) ? 2 : 1;
}

int fifo_consumer_status(const fifo_consumer_t *c, uint32_t id)
{
    return atomic_load(&c->comm->states[id].status);
}

void fifo_consumer_destroy(fifo_consumer_t *c)
{
    if (!c)
        return;
    if (c->comm) {
        gpuport_proxy_parks_free(c->comm);
        free(c->comm->ctrl);
        free(c->comm->pchans);
        free(c->comm);
    }
    free(c);
}
