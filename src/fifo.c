/* The trigger FIFO's host side; see fifo.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include "fifo.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "util.h"

/* head and tail each get their own cache line, apart from the slots */
#define COUNTERS_BYTES 128

gpuport_status_t gpuport_fifo_init(gpuport_fifo_t *fifo, uint32_t size)
{
    void *mem;

    if (size < GPUPORT_FIFO_MIN_SIZE || size > GPUPORT_FIFO_MAX_SIZE || (size & (size - 1))) {
        log_error("FIFO size %u is not a power of two in %u..%u", size, GPUPORT_FIFO_MIN_SIZE,
                  GPUPORT_FIFO_MAX_SIZE);
        return GPUPORT_ERR_INVALID_ARG;
    }
    mem = aligned_alloc(64, COUNTERS_BYTES + (size_t)size * sizeof(gpuport_trigger_t));
    if (!mem) {
        log_error("cannot allocate a FIFO of %u triggers", size);
        return GPUPORT_ERR_NO_MEMORY;
    }
    memset(mem, 0, COUNTERS_BYTES + (size_t)size * sizeof(gpuport_trigger_t));
    memset(fifo, 0, sizeof(*fifo));
    fifo->head = (_Atomic uint64_t *)mem;
    fifo->tail = (_Atomic uint64_t *)((char *)mem + 64);
    fifo->slots = (gpuport_trigger_t *)((char *)mem + COUNTERS_BYTES);
    fifo->size = size;
    fifo->log2_size = (uint32_t)__builtin_ctz(size);
    fifo->own_mem = mem;
    return GPUPORT_OK;
}

void gpuport_fifo_fini(gpuport_fifo_t *fifo)
{
    free(fifo->own_mem);
    memset(fifo, 0, sizeof(*fifo));
}

gpuport_status_t gpuport_fifo_push(gpuport_fifo_t *fifo, const gpuport_trigger_t *triggers,
                                   uint32_t n, uint64_t timeout_ns, uint64_t *pos_p)
{
    uint64_t head, deadline = 0;
    uint32_t spins = 0;

    if (n < 1 || n > 2 || n > fifo->size)
        return GPUPORT_ERR_INVALID_ARG;
    head = atomic_load_explicit(fifo->head, memory_order_relaxed);
    for (;;) {
        uint64_t tail = atomic_load_explicit(fifo->tail, memory_order_acquire);
        if (head + n - tail <= fifo->size) {
            if (atomic_compare_exchange_weak_explicit(fifo->head, &head, head + n,
                                                      memory_order_acq_rel,
                                                      memory_order_relaxed))
                break;
            continue; /* head reloaded by the failed exchange */
        }
        if (timeout_ns == 0)
            return GPUPORT_ERR_AGAIN;
        if (deadline == 0)
            deadline = gpuport_deadline(timeout_ns);
        /* once yielding, every pass may have cost a time slice: check the clock */
        else if ((++spins > 64 || (spins & 255) == 0) && gpuport_deadline_passed(deadline))
            return GPUPORT_ERR_TIMEOUT;
        if (spins > 64)
            sched_yield();
        head = atomic_load_explicit(fifo->head, memory_order_relaxed);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t pos = head + i;
        gpuport_trigger_t *slot = &fifo->slots[pos & (fifo->size - 1)];
        uint64_t parity = gpuport_trigger_parity(pos, fifo->log2_size);
        slot->w[1] = triggers[i].w[1];
        /* the release store orders w[1] before the tag that validates it */
        atomic_store_explicit((_Atomic uint64_t *)&slot->w[0],
                              triggers[i].w[0] | (parity << GPUPORT_TRG_PARITY_SHIFT),
                              memory_order_release);
    }
    *pos_p = head + n - 1;
    return GPUPORT_OK;
}

const char *gpuport_op_name(uint32_t op)
{
    static const char *const names[GPUPORT_OP_MAX_] = {
        [GPUPORT_OP_NONE] = "none",           [GPUPORT_OP_PUT] = "put",
        [GPUPORT_OP_SIGNAL] = "signal",       [GPUPORT_OP_PUT_SIGNAL] = "put_signal",
        [GPUPORT_OP_FLUSH] = "flush",         [GPUPORT_OP_EXT] = "ext",
        [GPUPORT_OP_CLOSE] = "close",         [GPUPORT_OP_PUT_VALUE] = "put_value",
        [GPUPORT_OP_PUT_VALUE_SIGNAL] = "put_value_signal", [GPUPORT_OP_GET] = "get",
        [GPUPORT_OP_ATOMIC_ADD] = "atomic_add",
        [GPUPORT_OP_ACC_INT64] = "accumulate (int64)",
        [GPUPORT_OP_ACC_FLOAT32] = "accumulate (float32)",
        [GPUPORT_OP_ACC_BFLOAT16] = "accumulate (bfloat16)"};

    return op < GPUPORT_OP_MAX_ && names[op] ? names[op] : "unknown";
}
