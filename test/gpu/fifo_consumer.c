/* The proxy's FIFO consumer for CUDA C++ tests; see fifo_consumer.h. */
#include "fifo_consumer.h"

#include <stdlib.h>
#include <string.h>

#include "fifo.h"

struct fifo_consumer {
    gpuport_fifo_t fifo;
    uint64_t voids;
};

fifo_consumer_t *fifo_consumer_create(void *slots, void *tail, uint32_t size)
{
    fifo_consumer_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->fifo.slots = slots;
    c->fifo.tail = tail;
    c->fifo.size = size;
    c->fifo.log2_size = (uint32_t)__builtin_ctz(size);
    c->fifo.voids = GPUPORT_FIFO_VOIDS((gpuport_trigger_t *)slots, size);
    return c;
}

uint32_t fifo_consumer_pop(fifo_consumer_t *c, gpuport_op_desc_t *d)
{
    gpuport_trigger_t t[2];
    uint32_t channel;

    /* slots given up by their pushers are skipped, as the proxy does */
    while (!gpuport_fifo_peek(&c->fifo, 0, &t[0])) {
        if (!gpuport_fifo_void_at(&c->fifo, 0, &channel))
            return 0;
        gpuport_fifo_void_clear(&c->fifo, 0);
        gpuport_fifo_advance(&c->fifo, 1);
        c->voids++;
    }
    if (gpuport_trigger_op(t[0].w[0]) == GPUPORT_OP_EXT) {
        if (!gpuport_fifo_peek(&c->fifo, 1, &t[1]))
            return 0;
        gpuport_trigger_decode(&t[1], &t[0], d);
        gpuport_fifo_advance(&c->fifo, 2);
        return 2;
    }
    gpuport_trigger_decode(&t[0], NULL, d);
    gpuport_fifo_advance(&c->fifo, 1);
    return 1;
}

uint64_t fifo_consumer_voids(const fifo_consumer_t *c)
{
    return c->voids;
}

void fifo_consumer_destroy(fifo_consumer_t *c)
{
    free(c);
}
