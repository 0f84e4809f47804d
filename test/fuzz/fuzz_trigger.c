/*
 * fuzz_trigger: the trigger decoder (gpuport_trigger.h, EXT pairs
 * included) and the proxy's range check of a decoded put against a
 * channel's regions (gpuport_op_fits, proxy_exec.c), as pure functions: fast.
 * fuzz_proxy drives the same triggers through a running proxy.
 *
 * Input: two 16-byte slots as the proxy reads them from its FIFO (the first
 * is the EXT of the second when its op is EXT), then the source and
 * destination region sizes (8 bytes each). Invariants:
 *   - the decoded fields are the bits the layout comment names, and
 *     encoding them again gives the slots back (nothing is truncated);
 *   - gpuport_op_fits agrees with 128-bit arithmetic, for any offsets;
 *   - a put it accepts, copied between buffers of exactly the region sizes
 *     (address sanitizer: nothing outside them), touches only them.
 * Value triggers (PUT_VALUE, PUT_VALUE_SIGNAL) the same way: their layout
 * (dst_off / 8 and the value, an EXT slot in front ignored), offsets always
 * 8-aligned, encoded back bit for bit, the range check of 8 bytes with no
 * source (src_size UINT64_MAX, as the proxy asks), and an accepted one
 * stored into a buffer of exactly the destination's size.
 */
#include "fuzz.h"
#include "internal.h"

#define PARITY (1ull << 63)
#define COPY_MAX 65536 /* regions up to this size are allocated and copied */

static uint64_t bits(uint64_t w, int hi, int lo)
{
    return (w >> lo) & ((hi - lo == 63) ? ~0ull : ((1ull << (hi - lo + 1)) - 1));
}

/* The layout as gpuport_trigger.h's first comment states it, bit by bit. */
static int is_value(uint32_t op)
{
    return op == 7 || op == 8 || op == 10; /* PUT_VALUE, PUT_VALUE_SIGNAL, ATOMIC_ADD */
}

static void reference_decode(const gpuport_trigger_t *t, const gpuport_trigger_t *ext,
                             gpuport_op_desc_t *d)
{
    d->op = (uint32_t)bits(t->w[0], 62, 59);
    d->channel = (uint32_t)bits(t->w[0], 58, 44);
    if (is_value(d->op)) {
        d->dst_off = bits(t->w[0], 43, 0) * 8;
        d->src_off = 0;
        d->size = 8;
        d->value = t->w[1];
        return;
    }
    d->value = 0;
    d->size = bits(t->w[0], 43, 12);
    d->src_off = bits(t->w[0], 11, 6) << 32 | bits(t->w[1], 63, 32);
    d->dst_off = bits(t->w[0], 5, 0) << 32 | bits(t->w[1], 31, 0);
    if (ext) {
        d->size |= bits(ext->w[0], 43, 24) << 32;
        d->src_off |= bits(ext->w[1], 57, 32) << 38;
        d->dst_off |= bits(ext->w[1], 25, 0) << 38;
    }
}

static int same(const gpuport_op_desc_t *a, const gpuport_op_desc_t *b)
{
    return a->op == b->op && a->channel == b->channel && a->size == b->size &&
           a->src_off == b->src_off && a->dst_off == b->dst_off && a->value == b->value;
}

static int reference_fits(uint64_t off, uint64_t size, uint64_t region)
{
    return (unsigned __int128)off + size <= region;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    fuzz_in_t in = {data, len};
    gpuport_trigger_t slot[2], again[2];
    const gpuport_trigger_t *ext = NULL, *t;
    gpuport_op_desc_t d, ref, d2;
    uint64_t src_size, dst_size;
    int fits, want;

    fuzz_bytes(&in, slot, sizeof(slot));
    src_size = fuzz_u64(&in);
    dst_size = fuzz_u64(&in);
    /* the consumer strips the parity bit before decoding (fifo.h) */
    slot[0].w[0] &= ~PARITY;
    slot[1].w[0] &= ~PARITY;
    if (gpuport_trigger_op(slot[0].w[0]) == GPUPORT_OP_EXT) {
        ext = &slot[0];
        t = &slot[1];
    } else {
        t = &slot[0];
    }
    gpuport_trigger_decode(t, ext, &d);
    reference_decode(t, ext, &ref);
    FUZZ_CHECK(same(&d, &ref), "decode op %u ch %u size %llu src %llu dst %llu", d.op, d.channel,
               (unsigned long long)d.size, (unsigned long long)d.src_off,
               (unsigned long long)d.dst_off);
    FUZZ_CHECK(d.channel < GPUPORT_TRIGGER_MAX_CHANNELS && d.size <= GPUPORT_TRIGGER_SIZE_MAX,
               "channel %u size %llu", d.channel, (unsigned long long)d.size);
    if (is_value(d.op)) {
        const gpuport_trigger_t *main_again = &again[0];
        FUZZ_CHECK(d.dst_off % 8 == 0 && d.dst_off <= GPUPORT_TRIGGER_VALUE_OFF_MAX,
                   "value trigger decoded to destination offset %llu",
                   (unsigned long long)d.dst_off);
        gpuport_trigger_encode_value(&again[0], d.op, d.channel, d.dst_off, d.value);
        gpuport_trigger_decode(&again[0], NULL, &d2);
        FUZZ_CHECK(same(&d, &d2), "encode then decode changed the value operation");
        FUZZ_CHECK(main_again->w[0] == t->w[0] && main_again->w[1] == t->w[1],
                   "value slot %016llx %016llx encoded back as %016llx %016llx",
                   (unsigned long long)t->w[0], (unsigned long long)t->w[1],
                   (unsigned long long)main_again->w[0], (unsigned long long)main_again->w[1]);
        fits = gpuport_op_fits(&d, UINT64_MAX, dst_size);
        want = reference_fits(d.dst_off, 8, dst_size);
        FUZZ_CHECK(fits == want, "op_fits %d for a value at %llu of %llu", fits,
                   (unsigned long long)d.dst_off, (unsigned long long)dst_size);
        if (fits && dst_size <= COPY_MAX) {
            char *dst = malloc(dst_size);
            memcpy(dst + d.dst_off, &d.value, 8);
            free(dst);
        }
        return 0;
    }
    FUZZ_CHECK(ext || !gpuport_trigger_needs_ext(d.src_off, d.dst_off, d.size),
               "a single slot decoded to fields that need an EXT slot");

    /* Encoding the fields again: what a producer would have written. */
    memset(again, 0, sizeof(again));
    if (gpuport_trigger_needs_ext(d.src_off, d.dst_off, d.size)) {
        gpuport_trigger_encode_ext(&again[0], d.channel, d.src_off, d.dst_off, d.size);
        gpuport_trigger_encode(&again[1], d.op, d.channel, d.src_off, d.dst_off, d.size);
        gpuport_trigger_decode(&again[1], &again[0], &d2);
    } else {
        gpuport_trigger_encode(&again[0], d.op, d.channel, d.src_off, d.dst_off, d.size);
        gpuport_trigger_decode(&again[0], NULL, &d2);
    }
    FUZZ_CHECK(same(&d, &d2), "encode then decode changed the operation");
    /* The main slot comes back bit for bit: every bit of it is a field. */
    {
        const gpuport_trigger_t *main_again =
            gpuport_trigger_needs_ext(d.src_off, d.dst_off, d.size) ? &again[1] : &again[0];
        FUZZ_CHECK(main_again->w[0] == t->w[0] && main_again->w[1] == t->w[1],
                   "main slot %016llx %016llx encoded back as %016llx %016llx",
                   (unsigned long long)t->w[0], (unsigned long long)t->w[1],
                   (unsigned long long)main_again->w[0], (unsigned long long)main_again->w[1]);
    }

    /* ... and so do the EXT slot's high bits (zero when none were needed). */
    if (ext) {
        const uint64_t w0_mask = 0xfffffull << 24, w1_mask = 0x3ffffffull << 32 | 0x3ffffffull;
        const gpuport_trigger_t none = {{0, 0}};
        const gpuport_trigger_t *e =
            gpuport_trigger_needs_ext(d.src_off, d.dst_off, d.size) ? &again[0] : &none;
        FUZZ_CHECK((e->w[0] & w0_mask) == (ext->w[0] & w0_mask) &&
                       (e->w[1] & w1_mask) == (ext->w[1] & w1_mask),
                   "EXT slot %016llx %016llx encoded back as %016llx %016llx",
                   (unsigned long long)ext->w[0], (unsigned long long)ext->w[1],
                   (unsigned long long)e->w[0], (unsigned long long)e->w[1]);
    }

    fits = gpuport_op_fits(&d, src_size, dst_size);
    want = reference_fits(d.src_off, d.size, src_size) &&
           reference_fits(d.dst_off, d.size, dst_size);
    FUZZ_CHECK(fits == want, "op_fits %d for size %llu src %llu/%llu dst %llu/%llu", fits,
               (unsigned long long)d.size, (unsigned long long)d.src_off,
               (unsigned long long)src_size, (unsigned long long)d.dst_off,
               (unsigned long long)dst_size);
    if (fits && src_size <= COPY_MAX && dst_size <= COPY_MAX) {
        /* exact-size heap blocks: the sanitizer's redzones border them */
        char *src = malloc(src_size ? src_size : 1), *dst = malloc(dst_size ? dst_size : 1);
        memset(src, 0x3c, src_size);
        memcpy(dst + d.dst_off, src + d.src_off, d.size);
        free(src);
        free(dst);
    }
    return 0;
}
