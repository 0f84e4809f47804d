/*
 * Which trigger runs a producer outside the library may push
 * (gpuport_trigger_pushable, the rule the device API's one FIFO writer
 * applies before it reserves a slot): every op value and run shape, on the
 * host, where the rule is plain C. Exactly the public API's six operations
 * pass, alone or (a put) behind its EXT slot, on the channel of the handle;
 * CLOSE, a lone or misplaced EXT, an unknown op, another channel's trigger
 * and runs of other lengths are refused.
 */
#include <stdio.h>

#include "check.h"
#include "gpuport/gpuport_trigger.h"

#define CHAN 1234u

static int user_op(uint32_t op)
{
    return op == GPUPORT_OP_PUT || op == GPUPORT_OP_SIGNAL || op == GPUPORT_OP_PUT_SIGNAL ||
           op == GPUPORT_OP_FLUSH || op == GPUPORT_OP_PUT_VALUE ||
           op == GPUPORT_OP_PUT_VALUE_SIGNAL || op == GPUPORT_OP_GET ||
           op == GPUPORT_OP_ATOMIC_ADD || op == GPUPORT_OP_ACC_INT64 ||
           op == GPUPORT_OP_ACC_FLOAT32 || op == GPUPORT_OP_ACC_BFLOAT16;
}

/* the ops that may sit behind an EXT slot: those with a size and offsets */
static int sized_op(uint32_t op)
{
    return op == GPUPORT_OP_PUT || op == GPUPORT_OP_PUT_SIGNAL || op == GPUPORT_OP_GET ||
           op == GPUPORT_OP_ACC_INT64 || op == GPUPORT_OP_ACC_FLOAT32 ||
           op == GPUPORT_OP_ACC_BFLOAT16;
}

/* t as the device API encodes op for channel `chan`: a value op with a
 * value, any other with offsets and a size */
static void encode(gpuport_trigger_t *t, uint32_t op, uint32_t chan)
{
    if (gpuport_trigger_is_value(op))
        gpuport_trigger_encode_value(t, op, chan, 64, 0x1122334455667788ull);
    else
        gpuport_trigger_encode(t, op, chan, 128, 256, 4096);
}

int main(void)
{
    gpuport_trigger_t t[3];
    int allowed = 0;

    /* one slot: every value the 4-bit op field can hold */
    for (uint32_t op = 0; op < 16; op++) {
        encode(&t[0], op, CHAN);
        CHECK_MSG(gpuport_trigger_pushable(t, 1, CHAN) == user_op(op), "op %u alone: %d", op,
                  gpuport_trigger_pushable(t, 1, CHAN));
        allowed += gpuport_trigger_pushable(t, 1, CHAN);
        /* the same trigger is not this handle's to push on another channel */
        CHECK_MSG(!gpuport_trigger_pushable(t, 1, CHAN + 1), "op %u of channel %u pushed as %u",
                  op, CHAN, CHAN + 1);
    }
    CHECK_MSG(allowed == 11, "%d ops allowed alone", allowed);
    encode(&t[0], GPUPORT_OP_CLOSE, CHAN);
    CHECK(!gpuport_trigger_pushable(t, 1, CHAN));

    /* two slots: an EXT only in front of a sized op (put, get, accumulate) of
     * the same channel */
    for (uint32_t op = 0; op < 16; op++) {
        int want = sized_op(op);
        gpuport_trigger_encode_ext(&t[0], CHAN, 1ull << 40, 1ull << 41, 5ull << 30);
        encode(&t[1], op, CHAN);
        CHECK_MSG(gpuport_trigger_pushable(t, 2, CHAN) == want, "EXT + op %u: %d", op,
                  gpuport_trigger_pushable(t, 2, CHAN));
        gpuport_trigger_encode_ext(&t[0], CHAN + 1, 1ull << 40, 1ull << 41, 5ull << 30);
        CHECK_MSG(!gpuport_trigger_pushable(t, 2, CHAN), "another channel's EXT + op %u", op);
        /* a first slot that is not an EXT: two operations are two pushes */
        encode(&t[0], GPUPORT_OP_PUT, CHAN);
        CHECK_MSG(!gpuport_trigger_pushable(t, 2, CHAN), "PUT + op %u in one run", op);
    }
    /* what the device API pushes for a put beyond 4 GiB passes */
    CHECK(gpuport_trigger_needs_ext(1ull << 40, 1ull << 41, 5ull << 30));
    gpuport_trigger_encode_ext(&t[0], CHAN, 1ull << 40, 1ull << 41, 5ull << 30);
    gpuport_trigger_encode(&t[1], GPUPORT_OP_PUT_SIGNAL, CHAN, 1ull << 40, 1ull << 41, 5ull << 30);
    CHECK(gpuport_trigger_pushable(t, 2, CHAN));

    /* runs of other lengths */
    encode(&t[0], GPUPORT_OP_SIGNAL, CHAN);
    encode(&t[1], GPUPORT_OP_SIGNAL, CHAN);
    encode(&t[2], GPUPORT_OP_SIGNAL, CHAN);
    CHECK(!gpuport_trigger_pushable(t, 0, CHAN));
    CHECK(!gpuport_trigger_pushable(t, 3, CHAN));
    printf("pushable: the 11 public operations alone, a put, get or accumulate behind its EXT, on the handle's "
           "channel only; CLOSE, stray EXTs, unknown ops and other channels refused\n");
    return 0;
}
