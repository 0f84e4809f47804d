/* C-callable wrapper around the proxy's FIFO consumer (fifo.h is C11), for
 * GPU tests written in CUDA C++. */
#ifndef GPUPORT_TEST_FIFO_CONSUMER_H
#define GPUPORT_TEST_FIFO_CONSUMER_H

#include <stdint.h>

#include "gpuport/gpuport_trigger.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fifo_consumer fifo_consumer_t;

/* slots and tail: host addresses of a device FIFO's ring (followed by its
 * void marks, GPUPORT_FIFO_VOIDS) and consumer counter */
fifo_consumer_t *fifo_consumer_create(void *slots, void *tail, uint32_t size);
/* Pops the next trigger (or EXT pair) if valid, past slots given up: returns
 * the slots used (1 or 2) and fills d, or 0 if the next slot is not written
 * yet. */
uint32_t fifo_consumer_pop(fifo_consumer_t *c, gpuport_op_desc_t *d);
/* Slots skipped so far because their pushers gave them up. */
uint64_t fifo_consumer_voids(const fifo_consumer_t *c);
void fifo_consumer_destroy(fifo_consumer_t *c);

#ifdef __cplusplus
}
#endif

#endif
