/* The proxy's own FIFO consumer (proxy_consume_fifo, C11) for GPU tests
 * written in CUDA C++: a communicator with only what the consumer touches,
 * whose channels' transport records each put it is handed, so a test sees
 * exactly what the proxy would carry out, in its order. */
#ifndef GPUPORT_TEST_FIFO_CONSUMER_H
#define GPUPORT_TEST_FIFO_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#include "gpuport/gpuport_trigger.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fifo_consumer fifo_consumer_t;

/* Bytes of the channels' state words for nchan channels, and the offset in
 * them of channel id's give-up word: the caller allocates them in pinned,
 * device-mapped memory and points the device handles' gave_up there. */
size_t fifo_consumer_states_bytes(uint32_t nchan);
size_t fifo_consumer_gave_up_offset(uint32_t id);
/* slots, tail, gave_up_any, states: host addresses of a device FIFO's ring,
 * its consumer counter, its give-up word and the channels' states (nchan
 * channels, all open, regions of 2^50 bytes). */
fifo_consumer_t *fifo_consumer_create(void *slots, void *tail, void *gave_up_any, void *states,
                                      uint32_t size, uint32_t nchan);
/* The next put the proxy carried out (a pass of proxy_consume_fifo when
 * none is waiting): the slots its trigger took (1, or 2 for an EXT pair)
 * and d filled; 0 if none. */
uint32_t fifo_consumer_pop(fifo_consumer_t *c, gpuport_op_desc_t *d);
/* A channel's status (GPUPORT_OK or its error). */
int fifo_consumer_status(const fifo_consumer_t *c, uint32_t id);
void fifo_consumer_destroy(fifo_consumer_t *c);

#ifdef __cplusplus
}
#endif

#endif
