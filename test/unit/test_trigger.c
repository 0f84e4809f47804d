/*
 * Trigger encoding is shared by host and device producers and the proxy, and
 * a bit lost there silently corrupts a transfer: every edge of the size and
 * offset fields (the 32/38-bit split and the EXT slot) must round-trip, the
 * parity bit must stay the FIFO's to set, and an EXT pair must survive a trip
 * through a real FIFO unchanged. Value triggers carry their own layout
 * (dst_off / 8 and the value), which must round-trip the same way.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fifo.h"
#include "gpuport/gpuport_trigger.h"

#define PARITY_BIT (1ull << GPUPORT_TRG_PARITY_SHIFT)
#define RANDOM_ROUNDS 200000

static const uint64_t sizes[] = {
    0, 1, (1ull << 32) - 1, 1ull << 32, (1ull << 32) + 1, 5ull << 30, GPUPORT_TRIGGER_SIZE_MAX,
};
static const uint64_t offsets[] = {
    0, 1ull << 32, (1ull << 38) - 1, 1ull << 38, (1ull << 40) + 3, (1ull << 63) + 5, UINT64_MAX,
};
static const uint32_t channels[] = {0, GPUPORT_TRIGGER_MAX_CHANNELS - 1};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
    /* splitmix64: a fixed seed keeps a failure reproducible */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value of random bit width, so that small and huge values are both common. */
static uint64_t random_bits(unsigned max_bits)
{
    unsigned bits = (unsigned)(next_random() % (max_bits + 1));
    uint64_t v = next_random();
    return bits == 64 ? v : v & ((1ull << bits) - 1);
}

/* Encodes as channel.c does (EXT slot when needed), decodes, compares. */
static void round_trip(uint32_t op, uint32_t channel, uint64_t src, uint64_t dst, uint64_t size)
{
    gpuport_trigger_t t, ext;
    gpuport_op_desc_t d;
    int want_ext = size >= (1ull << 32) || src >= (1ull << 38) || dst >= (1ull << 38);
    int needs = gpuport_trigger_needs_ext(src, dst, size);

    CHECK_MSG(needs == want_ext, "needs_ext(src 0x%llx, dst 0x%llx, size 0x%llx) = %d",
              (unsigned long long)src, (unsigned long long)dst, (unsigned long long)size, needs);
    gpuport_trigger_encode(&t, op, channel, src, dst, size);
    CHECK((t.w[0] & PARITY_BIT) == 0);
    CHECK(gpuport_trigger_op(t.w[0]) == op);
    CHECK(gpuport_trigger_channel(t.w[0]) == channel);
    if (needs) {
        gpuport_trigger_encode_ext(&ext, channel, src, dst, size);
        CHECK((ext.w[0] & PARITY_BIT) == 0);
        CHECK(gpuport_trigger_op(ext.w[0]) == GPUPORT_OP_EXT);
        CHECK(gpuport_trigger_channel(ext.w[0]) == channel);
        /* without its EXT slot the main trigger holds exactly the low bits */
        gpuport_trigger_decode(&t, NULL, &d);
        CHECK(d.size == (size & 0xffffffffull));
        CHECK(d.src_off == (src & ((1ull << 38) - 1)));
        CHECK(d.dst_off == (dst & ((1ull << 38) - 1)));
    }
    gpuport_trigger_decode(&t, needs ? &ext : NULL, &d);
    CHECK_MSG(d.op == op && d.channel == channel && d.src_off == src && d.dst_off == dst &&
                  d.size == size,
              "op %u chan %u src 0x%llx dst 0x%llx size 0x%llx decoded as op %u chan %u src "
              "0x%llx dst 0x%llx size 0x%llx",
              op, channel, (unsigned long long)src, (unsigned long long)dst,
              (unsigned long long)size, d.op, d.channel, (unsigned long long)d.src_off,
              (unsigned long long)d.dst_off, (unsigned long long)d.size);
}

/* the ops with sizes and offsets (value ops have their own layout, below) */
#define SIZED_OPS (GPUPORT_OP_MAX_ - 3)

static void test_edges(void)
{
    unsigned n = 0;

    for (uint32_t op = 0; op < GPUPORT_OP_MAX_; op++) {
        if (gpuport_trigger_is_value(op))
            continue;
        for (size_t c = 0; c < COUNT(channels); c++)
            for (size_t s = 0; s < COUNT(sizes); s++)
                for (size_t i = 0; i < COUNT(offsets); i++)
                    for (size_t j = 0; j < COUNT(offsets); j++, n++)
                        round_trip(op, channels[c], offsets[i], offsets[j], sizes[s]);
    }
    CHECK(n == SIZED_OPS * COUNT(channels) * COUNT(sizes) * COUNT(offsets) * COUNT(offsets));
}

/* A value trigger: encoded, decoded (an EXT in front adds nothing), every
 * field back, size 8, no source. */
static void value_trip(uint32_t op, uint32_t channel, uint64_t dst, uint64_t value)
{
    gpuport_trigger_t t, ext;
    gpuport_op_desc_t d;

    gpuport_trigger_encode_value(&t, op, channel, dst, value);
    CHECK((t.w[0] & PARITY_BIT) == 0);
    CHECK(gpuport_trigger_op(t.w[0]) == op && gpuport_trigger_channel(t.w[0]) == channel);
    for (int with_ext = 0; with_ext < 2; with_ext++) {
        gpuport_trigger_encode_ext(&ext, channel, UINT64_MAX, UINT64_MAX, GPUPORT_TRIGGER_SIZE_MAX);
        memset(&d, 0xa5, sizeof(d));
        gpuport_trigger_decode(&t, with_ext ? &ext : NULL, &d);
        CHECK_MSG(d.op == op && d.channel == channel && d.dst_off == dst && d.value == value &&
                      d.size == 8 && d.src_off == 0,
                  "value op %u chan %u dst 0x%llx value 0x%llx decoded as op %u chan %u dst "
                  "0x%llx value 0x%llx size %llu src %llu",
                  op, channel, (unsigned long long)dst, (unsigned long long)value, d.op,
                  d.channel, (unsigned long long)d.dst_off, (unsigned long long)d.value,
                  (unsigned long long)d.size, (unsigned long long)d.src_off);
    }
}

static void test_value(void)
{
    static const uint64_t dsts[] = {0, 8, 4088, 1ull << 32, (1ull << 38) - 8, 1ull << 38,
                                    (1ull << 40) + 8, GPUPORT_TRIGGER_VALUE_OFF_MAX};
    static const uint64_t values[] = {0, 1, 0x8000000000000000ull, UINT64_MAX,
                                      0x0123456789abcdefull};
    gpuport_trigger_t t;
    gpuport_op_desc_t d;

    CHECK(GPUPORT_OP_PUT_VALUE == 7 && GPUPORT_OP_PUT_VALUE_SIGNAL == 8 && GPUPORT_OP_GET == 9 &&
          GPUPORT_OP_ATOMIC_ADD == 10 && GPUPORT_OP_ACC_BFLOAT16 == 13 && GPUPORT_OP_MAX_ == 14);
    CHECK(GPUPORT_TRIGGER_VALUE_OFF_MAX == (1ull << 47) - 8);
    /* the layout: op, channel, dst_off / 8 in bits 43..0; the value in word 1 */
    gpuport_trigger_encode_value(&t, GPUPORT_OP_PUT_VALUE_SIGNAL, 0x1234, 0xabcdef12345ull * 8,
                                 0xfeedfacecafebeefull);
    CHECK(t.w[0] == ((8ull << 59) | (0x1234ull << 44) | 0xabcdef12345ull));
    CHECK(t.w[1] == 0xfeedfacecafebeefull);
    gpuport_trigger_encode_value(&t, GPUPORT_OP_PUT_VALUE, GPUPORT_TRIGGER_MAX_CHANNELS - 1,
                                 GPUPORT_TRIGGER_VALUE_OFF_MAX, 0);
    CHECK(t.w[0] == ((7ull << 59) | (0x7fffull << 44) | ((1ull << 44) - 1)));
    for (uint32_t op = GPUPORT_OP_PUT_VALUE; op <= GPUPORT_OP_ATOMIC_ADD; op++)
        for (size_t c = 0; c < COUNT(channels) && gpuport_trigger_is_value(op); c++)
            for (size_t i = 0; i < COUNT(dsts); i++)
                for (size_t j = 0; j < COUNT(values); j++)
                    value_trip(op, channels[c], dsts[i], values[j]);
    for (int i = 0; i < RANDOM_ROUNDS; i++)
        value_trip(GPUPORT_OP_PUT_VALUE + (uint32_t)(next_random() & 1),
                   (uint32_t)(next_random() % GPUPORT_TRIGGER_MAX_CHANNELS),
                   (random_bits(47) & ~7ull) % (GPUPORT_TRIGGER_VALUE_OFF_MAX + 8), next_random());
    /* the other ops decode their value as 0 */
    gpuport_trigger_encode(&t, GPUPORT_OP_PUT, 3, 1, 2, 3);
    memset(&d, 0xa5, sizeof(d));
    gpuport_trigger_decode(&t, NULL, &d);
    CHECK(d.value == 0 && d.op == GPUPORT_OP_PUT && d.size == 3);
}

/* The documented bit layout, fixed: device code and the proxy depend on it. */
static void test_layout(void)
{
    gpuport_trigger_t t, ext;
    uint64_t src = (0x2aull << 38) | (0x15ull << 32) | 0x89abcdefull;
    uint64_t dst = (0x3ffffffull << 38) | (0x3full << 32) | 0x01234567ull;
    uint64_t size = (0xabcdeull << 32) | 0xfedcba98ull;

    gpuport_trigger_encode(&t, GPUPORT_OP_PUT_SIGNAL, 0x1234, src, dst, size);
    CHECK(t.w[0] ==
          ((3ull << 59) | (0x1234ull << 44) | (0xfedcba98ull << 12) | (0x15ull << 6) | 0x3full));
    CHECK(t.w[1] == ((0x89abcdefull << 32) | 0x01234567ull));
    gpuport_trigger_encode_ext(&ext, 0x1234, src, dst, size);
    CHECK(ext.w[0] == ((5ull << 59) | (0x1234ull << 44) | (0xabcdeull << 24)));
    CHECK(ext.w[1] == ((0x2aull << 32) | 0x3ffffffull));
}

static void test_random(void)
{
    for (int i = 0; i < RANDOM_ROUNDS; i++) {
        /* a sized op: 0..6, or 9 and 11..13 (GET, ACC_*), not the value ops */
        uint32_t op = (uint32_t)(next_random() % SIZED_OPS);
        op = op < GPUPORT_OP_PUT_VALUE ? op : op == GPUPORT_OP_PUT_VALUE ? GPUPORT_OP_GET : op + 3;
        uint32_t channel = (uint32_t)(next_random() % GPUPORT_TRIGGER_MAX_CHANNELS);
        uint64_t src = random_bits(64), dst = random_bits(64), size = random_bits(52);
        round_trip(op, channel, src, dst, size);
    }
}

static void test_parity(void)
{
    static const uint32_t log2s[] = {2, 3, 4, 7, 10, 16, 24};

    for (size_t i = 0; i < COUNT(log2s); i++) {
        uint64_t size = 1ull << log2s[i];
        for (uint64_t lap = 0; lap < 9; lap++) {
            uint64_t want = (lap & 1) ^ 1, base = lap * size;
            CHECK(gpuport_trigger_parity(base, log2s[i]) == want);
            CHECK(gpuport_trigger_parity(base + size / 2, log2s[i]) == want);
            CHECK(gpuport_trigger_parity(base + size - 1, log2s[i]) == want);
        }
    }
    CHECK(gpuport_trigger_parity(0, 10) == 1);
    CHECK(gpuport_trigger_parity(1024, 10) == 0);
    CHECK(gpuport_trigger_parity(2048, 10) == 1);
}

/* An EXT pair as the proxy sees it: pushed together, peeked, decoded. The
 * pair is pushed at every start position, so it also straddles the wrap. */
static void test_fifo_pair(void)
{
    const uint64_t size = 5ull << 30, src = 1ull << 40, dst = (1ull << 40) + 4096;
    gpuport_fifo_t fifo;
    gpuport_trigger_t pair[2], one, got[2], scratch;
    gpuport_op_desc_t d;
    uint64_t pos, expect = 0;

    CHECK(gpuport_trigger_needs_ext(src, dst, size));
    gpuport_trigger_encode_ext(&pair[0], 77, src, dst, size);
    gpuport_trigger_encode(&pair[1], GPUPORT_OP_PUT, 77, src, dst, size);
    gpuport_trigger_encode(&one, GPUPORT_OP_SIGNAL, 78, 0, 0, 0);
    CHECK_OK(gpuport_fifo_init(&fifo, 8));
    for (int round = 0; round < 24; round++) {
        /* one filler each round moves the pair's start across every slot */
        CHECK_OK(gpuport_fifo_push(&fifo, &one, 1, 0, &pos));
        CHECK(pos == expect++);
        CHECK(gpuport_fifo_peek(&fifo, 0, &got[0]));
        CHECK(got[0].w[0] == one.w[0] && got[0].w[1] == one.w[1]);
        gpuport_fifo_advance(&fifo, 1);

        CHECK_OK(gpuport_fifo_push(&fifo, pair, 2, 0, &pos));
        expect += 2;
        CHECK(pos == expect - 1);
        CHECK(gpuport_fifo_peek(&fifo, 0, &got[0]));
        CHECK(gpuport_fifo_peek(&fifo, 1, &got[1]));
        CHECK(!gpuport_fifo_peek(&fifo, 2, &scratch)); /* nothing beyond the pair */
        CHECK(gpuport_trigger_op(got[0].w[0]) == GPUPORT_OP_EXT);
        CHECK(got[0].w[0] == pair[0].w[0] && got[0].w[1] == pair[0].w[1]);
        CHECK(got[1].w[0] == pair[1].w[0] && got[1].w[1] == pair[1].w[1]);
        gpuport_trigger_decode(&got[1], &got[0], &d);
        CHECK(d.op == GPUPORT_OP_PUT && d.channel == 77);
        CHECK_MSG(d.size == size && d.src_off == src && d.dst_off == dst,
                  "round %d: size 0x%llx src 0x%llx dst 0x%llx", round, (unsigned long long)d.size,
                  (unsigned long long)d.src_off, (unsigned long long)d.dst_off);
        gpuport_fifo_advance(&fifo, 2);
    }
    CHECK(gpuport_fifo_head(&fifo) == expect);
    gpuport_fifo_fini(&fifo);
}

int main(void)
{
    test_layout();
    test_edges();
    test_value();
    test_random();
    test_parity();
    test_fifo_pair();
    printf("trigger: all checks passed\n");
    return 0;
}
