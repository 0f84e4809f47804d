/*
 * Writes the seed corpora of test/fuzz/corpus/ (test/fuzz/run.sh --seeds):
 * a handful of small valid and edge-case inputs per harness, made with the
 * library's own encoders so that they stay valid when a layout changes.
 * The regression inputs (corpus/<harness>/regress-*) are the reproducers of
 * bugs the harnesses found; they are kept as found, not written here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_config.h"
#include "fdpass/fdpass_wire.h"
#include "fuzz.h"
#include "internal.h"
#include "transport/tcp/tcp_priv.h"
#if GPUPORT_HAVE_IBVERBS
#include "transport/ib/ib.h"
#endif

static const char *g_dir;

typedef struct {
    unsigned char b[65536 + 1024];
    size_t n;
} buf_t;

static void add(buf_t *b, const void *p, size_t n)
{
    FUZZ_CHECK(b->n + n <= sizeof(b->b), "seed too large");
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void add_u8(buf_t *b, uint8_t v)
{
    add(b, &v, 1);
}

static void add_u64(buf_t *b, uint64_t v)
{
    add(b, &v, sizeof(v));
}

static void save(const char *harness, const char *name, const buf_t *b)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", g_dir, harness);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        FUZZ_CHECK(0, "mkdir %s: %s", path, strerror(errno));
    snprintf(path, sizeof(path), "%s/%s/%s", g_dir, harness, name);
    f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(b->b, 1, b->n, f) == b->n && fclose(f) == 0, "write %s", path);
}

/* ---- triggers: one op as a producer encodes it (EXT first when needed) ---- */

static void add_op(buf_t *b, uint32_t op, uint32_t ch, uint64_t src, uint64_t dst, uint64_t size)
{
    gpuport_trigger_t t;

    if (gpuport_trigger_needs_ext(src, dst, size)) {
        gpuport_trigger_encode_ext(&t, ch, src, dst, size);
        add(b, &t, sizeof(t));
    }
    gpuport_trigger_encode(&t, op, ch, src, dst, size);
    add(b, &t, sizeof(t));
}

static void add_value(buf_t *b, uint32_t op, uint32_t ch, uint64_t dst, uint64_t value)
{
    gpuport_trigger_t t;

    gpuport_trigger_encode_value(&t, op, ch, dst, value);
    add(b, &t, sizeof(t));
}

static void value_seed(const char *name, uint32_t op, uint64_t dst, uint64_t dst_size)
{
    buf_t b = {.n = 0};
    gpuport_trigger_t none = {{0, 0}};

    add_value(&b, op, 1, dst, 0x0123456789abcdefull);
    add(&b, &none, sizeof(none));
    add_u64(&b, 0);
    add_u64(&b, dst_size);
    save("fuzz_trigger", name, &b);
}

static void trigger_seed(const char *name, uint32_t op, uint64_t src, uint64_t dst, uint64_t size,
                         uint64_t src_size, uint64_t dst_size)
{
    buf_t b = {.n = 0};
    gpuport_trigger_t none = {{0, 0}};

    add_op(&b, op, 1, src, dst, size);
    if (b.n == sizeof(gpuport_trigger_t))
        add(&b, &none, sizeof(none));
    add_u64(&b, src_size);
    add_u64(&b, dst_size);
    save("fuzz_trigger", name, &b);
}

static void triggers(void)
{
    trigger_seed("put-inside", GPUPORT_OP_PUT, 0, 0, 16, 4096, 4096);
    trigger_seed("put-to-the-end", GPUPORT_OP_PUT, 4080, 4000, 16, 4096, 4016);
    trigger_seed("put-one-past", GPUPORT_OP_PUT, 4081, 0, 16, 4096, 4096);
    trigger_seed("put-ext-4g", GPUPORT_OP_PUT_SIGNAL, 1ull << 40, 5, 1ull << 32, 1ull << 41,
                 1ull << 33);
    trigger_seed("put-ext-wraps", GPUPORT_OP_PUT, UINT64_MAX - 7, 0, 16, UINT64_MAX,
                 UINT64_MAX);
    trigger_seed("put-size-max", GPUPORT_OP_PUT, 0, 0, GPUPORT_TRIGGER_SIZE_MAX, UINT64_MAX,
                 GPUPORT_TRIGGER_SIZE_MAX);
    trigger_seed("signal", GPUPORT_OP_SIGNAL, 0, 0, 0, 0, 0);
    trigger_seed("flush", GPUPORT_OP_FLUSH, 0, 0, 0, 0, 0);
    trigger_seed("op-unknown", 13, 1, 2, 3, 64, 64);
    value_seed("value-inside", GPUPORT_OP_PUT_VALUE, 4088, 4096);
    value_seed("value-one-past", GPUPORT_OP_PUT_VALUE_SIGNAL, 4096, 4100);
    value_seed("value-offset-max", GPUPORT_OP_PUT_VALUE, GPUPORT_TRIGGER_VALUE_OFF_MAX,
               UINT64_MAX);
}

/* ---- the proxy: runs of triggers on the harness's channels 0..3 ---- */

static void proxy(void)
{
    buf_t b;

    b.n = 0;
    add_op(&b, GPUPORT_OP_PUT, 0, 0, 0, 4096);
    add_op(&b, GPUPORT_OP_PUT_SIGNAL, 1, 100, 200, 2000); /* at the flusher (1 KiB and more) */
    add_op(&b, GPUPORT_OP_PUT, 1, 0, 0, 10);              /* behind it: queued too */
    add_op(&b, GPUPORT_OP_SIGNAL, 2, 0, 0, 0);
    add_op(&b, GPUPORT_OP_PUT_SIGNAL, 2, 0, 0, 0);        /* no source: only 0 bytes fit */
    add_op(&b, GPUPORT_OP_FLUSH, 3, 0, 0, 0);
    save("fuzz_proxy", "valid-every-channel", &b);

    b.n = 0;
    add_op(&b, GPUPORT_OP_SIGNAL, 0, 0, 0, 32);           /* a warp's 32 signals as one */
    add_op(&b, GPUPORT_OP_SIGNAL, 0, 0, 0, 1);
    add_op(&b, GPUPORT_OP_PUT, 0, 0, 0, 8);               /* between them */
    add_op(&b, GPUPORT_OP_SIGNAL, 0, 0, 0, 0);            /* 0 counts one */
    add_op(&b, GPUPORT_OP_SIGNAL, 2, 0, 0, 0xffffffffull); /* the most one carries */
    add_op(&b, GPUPORT_OP_SIGNAL, 2, 0, 0, 0xffffffffull);
    save("fuzz_proxy", "signals-counted", &b);

    b.n = 0;
    add_op(&b, GPUPORT_OP_PUT, 0, 4000, 0, 97);           /* one byte past the source */
    add_op(&b, GPUPORT_OP_PUT, 0, 0, 0, 8);               /* dropped: the channel is in error */
    add_op(&b, GPUPORT_OP_PUT_SIGNAL, 1, 0, 2999, 2);     /* past the destination: no signal */
    add_op(&b, GPUPORT_OP_PUT, 3, 0, 0, 1);               /* no destination */
    save("fuzz_proxy", "out-of-range", &b);

    b.n = 0;
    add_op(&b, GPUPORT_OP_SIGNAL, 5, 0, 0, 0);            /* closed */
    add_op(&b, GPUPORT_OP_PUT, 9, 0, 0, 1);               /* beyond the table */
    add_op(&b, GPUPORT_OP_SIGNAL, 32767, 0, 0, 0);
    add_op(&b, GPUPORT_OP_NONE, 0, 0, 0, 0);              /* unknown ops fail the channel */
    add_op(&b, 15, 1, 0, 0, 0);
    add_op(&b, GPUPORT_OP_MAX_, 2, 0, 0, 0);
    save("fuzz_proxy", "unknown-channels-and-ops", &b);

    b.n = 0;
    add_op(&b, GPUPORT_OP_PUT, 0, 1ull << 38, 0, 1);      /* EXT pair, outside */
    add_op(&b, GPUPORT_OP_PUT, 1, 0, 0, 1ull << 32);      /* EXT pair, outside */
    {
        gpuport_trigger_t t[2];
        gpuport_trigger_encode_ext(&t[0], 0, 0, 0, 0); /* an EXT with no high bits, then a put */
        gpuport_trigger_encode(&t[1], GPUPORT_OP_PUT, 2, 0, 0, 16);
        add(&b, t, sizeof(t));
        gpuport_trigger_encode_ext(&t[0], 3, 0, 0, 0); /* EXT, EXT: the second is no op */
        gpuport_trigger_encode_ext(&t[1], 3, 0, 0, 0);
        add(&b, t, sizeof(t));
        gpuport_trigger_encode_ext(&t[0], 0, 0, 0, 0); /* a last EXT pairs with a flush */
        add(&b, t, sizeof(t[0]));
    }
    save("fuzz_proxy", "ext-pairs", &b);

    b.n = 0;
    add_value(&b, GPUPORT_OP_PUT_VALUE, 0, 4088, 1);      /* the last 8 bytes, inline */
    add_op(&b, GPUPORT_OP_PUT, 1, 0, 0, 3000);            /* at the flusher ... */
    add_value(&b, GPUPORT_OP_PUT_VALUE_SIGNAL, 1, 8, 2);  /* ... so this one queues behind */
    add_op(&b, GPUPORT_OP_PUT, 1, 0, 12, 2);              /* overlaps its last bytes: wins */
    add_value(&b, GPUPORT_OP_PUT_VALUE, 2, 8, 3);         /* no source needed */
    add_value(&b, GPUPORT_OP_PUT_VALUE, 2, 16, 4);        /* past the end: rejected */
    add_value(&b, GPUPORT_OP_PUT_VALUE_SIGNAL, 3, 0, 5);  /* no destination: rejected */
    {
        gpuport_trigger_t t[2];
        gpuport_trigger_encode_ext(&t[0], 0, 1, 2, 3); /* an EXT in front adds nothing */
        gpuport_trigger_encode_value(&t[1], GPUPORT_OP_PUT_VALUE, 0, 0, 6);
        add(&b, t, sizeof(t));
    }
    save("fuzz_proxy", "values", &b);

    b.n = 0;
    add_value(&b, GPUPORT_OP_PUT_VALUE, 0, 0, 0x1111);
    add_op(&b, GPUPORT_OP_GET, 0, 8, 0, 16);              /* reads it back into the source */
    add_op(&b, GPUPORT_OP_PUT, 0, 8, 100, 16);            /* ... and puts what it got */
    add_value(&b, GPUPORT_OP_ATOMIC_ADD, 0, 200, 5);
    add_op(&b, GPUPORT_OP_ACC_INT64, 0, 0, 256, 64);
    add_op(&b, GPUPORT_OP_ACC_FLOAT32, 1, 0, 0, 2000);    /* at the flusher ... */
    add_op(&b, GPUPORT_OP_ACC_BFLOAT16, 1, 2, 2002, 100); /* ... and this behind it */
    add_op(&b, GPUPORT_OP_GET, 1, 1000, 0, 1500);         /* at the flusher too */
    add_op(&b, GPUPORT_OP_PUT, 1, 1000, 2500, 400);       /* what the get brought */
    add_value(&b, GPUPORT_OP_ATOMIC_ADD, 2, 8, UINT64_MAX); /* wraps */
    add_op(&b, GPUPORT_OP_GET, 3, 1, 0, 0);               /* a get of nothing */
    save("fuzz_proxy", "rma", &b);

    b.n = 0;
    add_value(&b, GPUPORT_OP_ATOMIC_ADD, 1, 0, 1);        /* region not 8-aligned */
    add_op(&b, GPUPORT_OP_ACC_INT64, 0, 0, 0, 12);        /* not whole elements */
    add_op(&b, GPUPORT_OP_GET, 2, 0, 0, 1);               /* no source to land in */
    add_op(&b, GPUPORT_OP_ACC_FLOAT32, 3, 0, 0, 4);       /* no destination */
    save("fuzz_proxy", "rma-refused", &b);

    b.n = 0;
    add_op(&b, GPUPORT_OP_ACC_BFLOAT16, 0, 0, 0, 0);      /* no elements */
    add_op(&b, GPUPORT_OP_ACC_FLOAT32, 1, 0, 0, 1ull << 32); /* EXT pair, outside */
    add_value(&b, GPUPORT_OP_ATOMIC_ADD, 2, 16, 1);       /* one past the end */
    add_op(&b, GPUPORT_OP_GET, 3, 0, 1, 0);               /* past the peer's end: nothing */
    save("fuzz_proxy", "rma-edges", &b);
}

/* ---- records ---- */

static void records(void)
{
    buf_t b;
    gpuport_rec_header_t h;

    b.n = 0;
    add_u8(&b, 0);
    gpuport_record_header_init(&h, GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t));
    add(&b, &h, sizeof(h));
    save("fuzz_records", "header-proc", &b);
    b.n = 0;
    add_u8(&b, 0);
    gpuport_record_header_init(&h, GPUPORT_REC_CHANNEL, sizeof(gpuport_channel_rec_t));
    h.layout++;
    add(&b, &h, sizeof(h));
    save("fuzz_records", "header-channel-other-layout", &b);
#if GPUPORT_HAVE_IBVERBS
    {
        ib_qp_rec_t q;
        ib_tdata_t t;
        ib_reach_rec_t r;
        gpuport_channel_rec_t c;
        static const uint8_t gid[IB_GID_LEN] = {0xfe, 0x80, 1, 2, 3};

        ib_qp_rec_pack(&q, 7, gid, 0x1a2, 0x123456, IBV_MTU_4096, 1, 3, IB_LINK_LAYER_ETH);
        b.n = 0;
        add_u8(&b, 1);
        add(&b, &q, sizeof(q));
        save("fuzz_records", "ib-qp", &b);
        b.n = 0;
        add_u8(&b, 1);
        add(&b, &q, sizeof(q) - 1);
        save("fuzz_records", "ib-qp-short", &b);

        memset(&c, 0, sizeof(c));
        gpuport_record_header_init(&c.hdr, GPUPORT_REC_CHANNEL, sizeof(c));
        c.channel_id = 5;
        c.dst.kind = GPUPORT_REGION_HOST;
        c.dst.addr = 0x7f0000001000ull;
        c.dst.size = 4096;
        memset(&t, 0, sizeof(t));
        t.flags = IB_TDATA_DST | IB_TDATA_CTRL;
        t.channel_id = 5;
        t.dst_rkey = 0x1234;
        t.dst_addr = c.dst.addr;
        t.dst_size = c.dst.size;
        t.sem_addr = 0x7f0000100140ull;
        t.status_addr = t.sem_addr + 8;
        t.ctrl_rkey = 0x99;
        ib_tdata_pack(&t, c.tdata);
        b.n = 0;
        add_u8(&b, 2);
        add(&b, &c, sizeof(c));
        save("fuzz_records", "ib-tdata", &b);
        t.status_addr += 8;
        ib_tdata_pack(&t, c.tdata);
        b.n = 0;
        add_u8(&b, 2);
        add(&b, &c, sizeof(c));
        save("fuzz_records", "ib-tdata-status-apart", &b);

        ib_reach_pack(&r, 1, IB_LINK_LAYER_IB, "mlx5_0 port 1");
        b.n = 0;
        add_u8(&b, 3);
        add_u8(&b, 1);               /* usable */
        add_u8(&b, IB_LINK_LAYER_IB);
        add_u8(&b, 80);              /* why's size - 1 */
        add_u8(&b, 6);
        add(&b, "mlx5_1", 6);
        add(&b, &r, sizeof(r));
        save("fuzz_records", "ib-reach", &b);
    }
#endif
    {
        tcp_rec_t t;
        memset(&t, 0, sizeof(t));
        t.tcp_family = AF_INET;
        t.tcp_port = htons(40000);
        t.tcp_scope = 60; /* the harness takes the text buffer's size from it */
        memcpy(t.tcp_addr, "\x0a\x00\x00\x01", 4);
        t.tcp_cookie = 0x0123456789abcdefull;
        snprintf(t.tcp_ifname, sizeof(t.tcp_ifname), "eth0");
        b.n = 0;
        add_u8(&b, 4);
        add(&b, &t, sizeof(t));
        save("fuzz_records", "tcp-ipv4", &b);
        t.tcp_family = AF_INET6;
        t.tcp_scope = 2;
        memcpy(t.tcp_addr, "\xfe\x80\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
        b.n = 0;
        add_u8(&b, 4);
        add(&b, &t, sizeof(t));
        save("fuzz_records", "tcp-ipv6-short-text", &b);
    }
    {
        gpuport_proc_rec_t p[2];
        memset(p, 0, sizeof(p));
        p[0].rank = 4; /* the harness's transport kind */
        gpuport_tl_blob_set(&p[0].tl[4], 1, sizeof(tcp_rec_t));
        gpuport_tl_blob_set(&p[1].tl[4], 1, sizeof(tcp_rec_t));
        b.n = 0;
        add_u8(&b, 5);
        add(&b, p, sizeof(p));
        save("fuzz_records", "blob-same", &b);
        gpuport_tl_blob_set(&p[1].tl[4], 2, sizeof(tcp_rec_t));
        b.n = 0;
        add_u8(&b, 5);
        add(&b, p, sizeof(p));
        save("fuzz_records", "blob-other-version", &b);
    }
    {
        /* same-host mappings over a memfd of 1 page (byte 1: 2, even) or 2
         * (5, odd): a control segment of 64 slots in 4096 bytes; one whose
         * 65 slots do not fit; one of 4 slots whose ctrl_size runs past the
         * file; a piece inside, and one past the file's end */
        static const struct {
            const char *name;
            uint8_t mode;
            uint64_t a, b;
        } maps[] = {
            {"sm-ctrl", 2, 64, 4096},
            {"sm-ctrl-slots-past-size", 2, 65, 4096},
            {"sm-ctrl-size-past-file", 2, 4, 8192},
            {"sm-piece", 5, 4096, 4096},
            {"sm-piece-past-file", 5, 4097, 4096},
        };
        for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
            b.n = 0;
            add_u8(&b, 6);
            add_u8(&b, maps[i].mode);
            add_u64(&b, maps[i].a); /* max_channels, or the piece's offset */
            add_u64(&b, maps[i].b); /* ctrl_size, or the piece's size */
            save("fuzz_records", maps[i].name, &b);
        }
    }
    {
        /* a VMM destination record against the bytes imported: to the end;
         * one byte past; an offset whose sum with the size wraps */
        static const struct {
            const char *name;
            uint64_t off, size, total;
        } regions[] = {
            {"region-to-the-end", 4096, 4096, 8192},
            {"region-past-import", 4096, 4097, 8192},
            {"region-offset-wraps", UINT64_MAX - 7, 16, 8192},
        };
        for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
            b.n = 0;
            add_u8(&b, 7);
            add_u64(&b, regions[i].off);
            add_u64(&b, regions[i].size);
            add_u64(&b, regions[i].total);
            save("fuzz_records", regions[i].name, &b);
        }
    }
    {
        /* cuda_ipc relay requests (1 MiB source, 4 MiB staging): one a
         * client makes, then one for each refusal */
        static const struct {
            const char *name;
            uint64_t seq, served;
            uint8_t kind;
            uint64_t off, size, stg_off;
        } reqs[] = {
            {"relay-batch", 8, 7, 1, 512, 64, 2u << 20},
            {"relay-replay", 7, 7, 1, 0, 64, 0},
            {"relay-skip", 9, 7, 1, 0, 64, 0},
            {"relay-kind-0", 1, 0, 0, 0, 64, 0},
            {"relay-kind-3", 1, 0, 3, 0, 64, 0},
            {"relay-no-bytes", 1, 0, 1, 0, 0, 0},
            {"relay-source-past", 1, 0, 1, (1u << 20) - 8, 16, 0},
            {"relay-source-wraps", 1, 0, 1, 8, UINT64_MAX - 4, 0},
            {"relay-staging-past", 1, 0, 1, 0, 128, (4u << 20) - 64},
            {"relay-staging-wraps", 1, 0, 2, 0, 64, UINT64_MAX - 8},
        };
        for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
            b.n = 0;
            add_u8(&b, 8);
            add_u64(&b, reqs[i].seq);
            add_u64(&b, reqs[i].served);
            add_u8(&b, reqs[i].kind);
            add_u64(&b, reqs[i].off);
            add_u64(&b, reqs[i].size);
            add_u64(&b, reqs[i].stg_off);
            add_u64(&b, 1u << 20);
            add_u64(&b, 4u << 20);
            save("fuzz_records", reqs[i].name, &b);
        }
    }
}

/* ---- tcp frames ---- */

static void add_msg(buf_t *b, uint32_t type, uint32_t ch, uint64_t a, uint64_t size)
{
    tcp_msg_t m;

    memset(&m, 0, sizeof(m));
    m.type = type;
    m.channel = ch;
    m.a = a;
    m.size = size;
    add(b, &m, sizeof(m));
}

static void add_value_msg(buf_t *b, uint32_t ch, uint64_t off, uint64_t value)
{
    tcp_msg_t m;

    memset(&m, 0, sizeof(m));
    m.type = MSG_VALUE;
    m.channel = ch;
    m.a = off;
    m.value = value;
    add(b, &m, sizeof(m));
}

/* GET, ADD and ACC: the field value is the getter's offset, the addend or
 * the op */
static void add_rma_msg(buf_t *b, uint32_t type, uint32_t ch, uint64_t a, uint64_t size,
                        uint64_t value)
{
    tcp_msg_t m;

    memset(&m, 0, sizeof(m));
    m.type = type;
    m.channel = ch;
    m.a = a;
    m.size = size;
    m.value = value;
    add(b, &m, sizeof(m));
}

static void add_payload(buf_t *b, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        add_u8(b, (uint8_t)(i * 13 + seed));
}

/* flags (bit 0: close at the end; bits 1-3: write size; bits 5-7, which
 * operations in flight are GETs: set by the seeds that want some),
 * operations in flight (count, acknowledged so far, high bits, channel seed) */
static void frame_start(buf_t *b, int eof, int piece, uint8_t sent)
{
    b->n = 0;
    add_u8(b, (uint8_t)(eof | piece << 1));
    add_u8(b, sent);
    add_u8(b, 0);
    add_u8(b, 0);
    add_u8(b, 0);
}

static void frames(void)
{
    buf_t b;

    frame_start(&b, 1, 0, 2);
    add_msg(&b, MSG_PUT, 0, 0, 64);
    add_payload(&b, 64, 1);
    add_msg(&b, MSG_SIGNAL, 0, 1, 0);
    add_msg(&b, MSG_ACK, 0, 2, 0);
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "put-signal-ack-bye", &b);

    frame_start(&b, 0, 7, 0);
    add_msg(&b, MSG_PUT, 1, 100, 19000); /* received in place (DIRECT_MIN) */
    add_payload(&b, 19000, 2);
    add_msg(&b, MSG_SIGNAL, 1, 1, 0);
    save("fuzz_tcp_frame", "put-large-direct", &b);

    frame_start(&b, 1, 6, 0);
    add_msg(&b, MSG_PUT, 2, 10, 4000); /* GPU destination: staged */
    add_payload(&b, 4000, 3);
    add_msg(&b, MSG_SIGNAL, 2, 1, 0); /* behind the staging copy */
    add_msg(&b, MSG_PUT, 2, 0, 0);
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "put-gpu-staged", &b);

    frame_start(&b, 0, 3, 0);
    add_msg(&b, MSG_PUT, 0, 60, 8); /* past the destination: discarded, channel failed */
    add_payload(&b, 8, 4);
    add_msg(&b, MSG_PUT, 9, 0, 5); /* no such channel: discarded */
    add_payload(&b, 5, 5);
    add_msg(&b, MSG_PUT, 4, 0, 1); /* not receiving */
    add_payload(&b, 1, 6);
    add_msg(&b, MSG_SIGNAL, 6, 1, 0);
    add_msg(&b, MSG_FAIL, 1, (uint64_t)(int64_t)GPUPORT_ERR_PEER, 0);
    save("fuzz_tcp_frame", "rejected", &b);

    frame_start(&b, 1, 5, 0);
    add_value_msg(&b, 0, 56, 0x1122334455667788ull); /* host: stored at once */
    add_msg(&b, MSG_PUT, 2, 0, 100);                 /* GPU: staged ... */
    add_payload(&b, 100, 8);
    add_value_msg(&b, 2, 96, 42);                    /* ... and the value behind it */
    add_msg(&b, MSG_SIGNAL, 2, 0, 0);
    add_value_msg(&b, 1, 4, 1);                      /* misaligned: channel failed */
    add_value_msg(&b, 0, 64, 1);                     /* past the end: channel failed */
    add_value_msg(&b, 3, 0, 1);                      /* no destination */
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "values", &b);

    /* FAILs whose status is no gpuport error: protocol errors, the
     * failure never read as GPUPORT_OK (1 << 32 as an int) */
    frame_start(&b, 1, 0, 0);
    add_msg(&b, MSG_FAIL, 1, 1ull << 32, 0);
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "fail-status-not-an-error", &b);
    frame_start(&b, 1, 0, 0);
    add_msg(&b, MSG_FAIL, 0, GPUPORT_OK, 0);
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "fail-status-ok", &b);

    frame_start(&b, 0, 1, 3);
    add_msg(&b, MSG_ACK, 0, 1, 0);
    add_msg(&b, MSG_ACK, 0, 4, 0); /* more than was sent: protocol error */
    add_msg(&b, MSG_SIGNAL, 0, 1, 0);
    save("fuzz_tcp_frame", "ack-too-many", &b);

    frame_start(&b, 0, 0, 0);
    add_msg(&b, MSG_ACC + 1, 0, 0, 0); /* unknown type */
    save("fuzz_tcp_frame", "type-unknown", &b);

    frame_start(&b, 1, 2, 1);
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    add_msg(&b, MSG_PUT, 1, 0, 100);
    add_payload(&b, 50, 7); /* closed inside a payload, after goodbye */
    save("fuzz_tcp_frame", "close-in-payload", &b);

    frame_start(&b, 1, 4, 0);
    add_msg(&b, MSG_SIGNAL, 3, 3, 0); /* three signals folded */
    add(&b, "\x01\x00\x00", 3); /* closed inside a header, without goodbye */
    save("fuzz_tcp_frame", "close-in-header", &b);

    frame_start(&b, 1, 2, 0);
    add_msg(&b, MSG_SIGNAL, 1, 0, 0); /* a signal message without a signal: broken */
    save("fuzz_tcp_frame", "signal-count-zero", &b);

    frame_start(&b, 1, 3, 0);
    add_msg(&b, MSG_PUT, 0, 0, 16);
    add_payload(&b, 16, 9);
    add_rma_msg(&b, MSG_GET, 0, 0, 16, 8);        /* answered with those bytes ... */
    add_msg(&b, MSG_PUT, 0, 8, 8);                /* ... copied out before this lands */
    add_payload(&b, 8, 10);
    add_rma_msg(&b, MSG_GET, 1, 100, 19000, 0);   /* a large answer */
    add_rma_msg(&b, MSG_GET, 2, 0, 100, 4);       /* GPU destination: read later */
    add_rma_msg(&b, MSG_GET, 9, 0, 8, 0);         /* no such channel: refused */
    add_rma_msg(&b, MSG_GET, 3, 0, 0, 0);         /* nothing, from no destination */
    add_rma_msg(&b, MSG_GET, 0, 60, 8, 0);        /* outside: refused, channel failed */
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "get-answered", &b);

    /* GETs from the GPU destination, then writes over what they read: the
     * first eight fill tx staging, the ninth is copied out before the PUT
     * lands (tcp_snap.c); every answer is the bytes from before */
    frame_start(&b, 1, 0, 0);
    add_msg(&b, MSG_PUT, 2, 0, 1000);
    add_payload(&b, 1000, 11);
    for (int i = 0; i < 9; i++)
        add_rma_msg(&b, MSG_GET, 2, (uint64_t)i * 100, 100, 0);
    add_msg(&b, MSG_PUT, 2, 50, 900);
    add_payload(&b, 900, 12);
    add_value_msg(&b, 2, 896, 0x1122334455667788ull);
    add_rma_msg(&b, MSG_GET, 2, 0, 1000, 0);    /* reads the writes */
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "get-gpu-then-put", &b);

    /* three operations in flight (channels 0, 5, 0), the first and the
     * third GETs (byte 0, bits 5-7) */
    frame_start(&b, 1, 0, 3);
    b.b[0] |= 5 << 5;
    add_msg(&b, MSG_ACK, 0, 3, 0);                /* waits at the first GET's data */
    add_msg(&b, MSG_GET_DATA, 0, 4, 16);          /* lands at offset 4 of channel 0's source */
    add_payload(&b, 16, 11);
    add_rma_msg(&b, MSG_GET_DATA, NO_CHANNEL, 0, 0, /* refused: fails channel 0 */
                (uint64_t)(int64_t)GPUPORT_ERR_OUT_OF_RANGE);
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "get-data", &b);

    /* a get acknowledged, then refused with a status that is no gpuport
     * error: a protocol error that fails the get, never GPUPORT_OK (1 << 32
     * read as an int: the get complete with no bytes) nor a positive
     * channel state */
    frame_start(&b, 0, 0, 1);
    b.b[0] |= 1 << 5;
    add_msg(&b, MSG_ACK, 0, 1, 0);
    add_rma_msg(&b, MSG_GET_DATA, NO_CHANNEL, 0, 0, 1ull << 32);
    save("fuzz_tcp_frame", "get-data-status-not-an-error", &b);
    frame_start(&b, 0, 0, 1);
    b.b[0] |= 1 << 5;
    add_msg(&b, MSG_ACK, 0, 1, 0);
    add_rma_msg(&b, MSG_GET_DATA, 0, 0, 0, 7);
    save("fuzz_tcp_frame", "get-data-status-positive", &b);

    frame_start(&b, 0, 0, 1);
    b.b[0] |= 1 << 5;
    add_msg(&b, MSG_GET_DATA, 0, 40, 16);         /* past the source's 48 bytes: failed */
    add_payload(&b, 16, 12);
    add_msg(&b, MSG_GET_DATA, 0, 0, 0);           /* no get left in flight: broken */
    save("fuzz_tcp_frame", "get-data-unasked", &b);

    /* answers that are not their get's, each a protocol error that writes
     * nothing: one naming channel 1 for channel 0's get; one with bytes
     * and no channel; one where the get asked 8 bytes more (byte 4's top
     * bit) */
    frame_start(&b, 0, 0, 1);
    b.b[0] |= 1 << 5;
    add_msg(&b, MSG_GET_DATA, 1, 0, 16);
    add_payload(&b, 16, 15);
    save("fuzz_tcp_frame", "get-data-other-channel", &b);
    frame_start(&b, 0, 0, 1);
    b.b[0] |= 1 << 5;
    add_msg(&b, MSG_GET_DATA, NO_CHANNEL, 0, 8);
    add_payload(&b, 8, 16);
    save("fuzz_tcp_frame", "get-data-no-channel-bytes", &b);
    frame_start(&b, 0, 0, 1);
    b.b[0] |= 1 << 5;
    b.b[4] = 0x80;
    add_msg(&b, MSG_GET_DATA, 0, 0, 16);
    add_payload(&b, 16, 17);
    save("fuzz_tcp_frame", "get-data-short", &b);

    frame_start(&b, 1, 4, 0);
    add_rma_msg(&b, MSG_ADD, 0, 8, 0, UINT64_MAX);
    add_rma_msg(&b, MSG_ADD, 0, 8, 0, 2);         /* wraps */
    add_rma_msg(&b, MSG_ACC, 0, 16, 16, GPUPORT_OP_ACC_INT64);
    add_payload(&b, 16, 13);
    add_rma_msg(&b, MSG_ACC, 0, 40, 8, GPUPORT_OP_ACC_BFLOAT16);
    add_payload(&b, 8, 14);
    /* an op of 64 bits whose low 32 are int64's: unknown, refused */
    add_rma_msg(&b, MSG_ACC, 1, 0, 8, (1ull << 32) | GPUPORT_OP_ACC_INT64);
    add_payload(&b, 8, 18);
    add_rma_msg(&b, MSG_ACC, 1, 1000, 17000, GPUPORT_OP_ACC_FLOAT32); /* in place, in pieces */
    add_payload(&b, 17000, 15);
    add_rma_msg(&b, MSG_ACC, 1, 1000, 8, GPUPORT_OP_ACC_FLOAT32); /* once more on the sums */
    add_payload(&b, 8, 16);
    add_msg(&b, MSG_BYE, NO_CHANNEL, 0, 0);
    save("fuzz_tcp_frame", "add-acc", &b);

    frame_start(&b, 0, 2, 0);
    add_rma_msg(&b, MSG_ACC, 0, 0, 8, GPUPORT_OP_ACC_BFLOAT16 + 1); /* unknown op */
    add_payload(&b, 8, 17);
    add_rma_msg(&b, MSG_ADD, 1, 4, 0, 1);         /* not aligned */
    add_rma_msg(&b, MSG_ACC, 2, 0, 8, GPUPORT_OP_ACC_INT64); /* GPU memory */
    add_payload(&b, 8, 18);
    add_rma_msg(&b, MSG_ADD, 3, 0, 0, 1);         /* no destination */
    add_rma_msg(&b, MSG_ACC, 9, 0, 4, GPUPORT_OP_ACC_FLOAT32); /* no such channel */
    add_payload(&b, 4, 19);
    save("fuzz_tcp_frame", "add-acc-refused", &b);

    frame_start(&b, 1, 1, 0);
    add_rma_msg(&b, MSG_ACC, 1, 0, 64, GPUPORT_OP_ACC_FLOAT32);
    add_payload(&b, 30, 20); /* closed inside the payload: 7 elements added */
    save("fuzz_tcp_frame", "acc-cut", &b);
}

/* ---- configuration: byte 0 the row, byte 1 describe's buffer size ---- */

static void config_seed(const char *name, const char *var, uint8_t describe, const char *value)
{
    buf_t b = {.n = 0};
    size_t row = 0;

    while (row < gpuport_config_nvars() && strcmp(gpuport_config_var(row)->name, var) != 0)
        row++;
    add_u8(&b, (uint8_t)row); /* not found: every row */
    add_u8(&b, describe);
    add(&b, value, strlen(value));
    save("fuzz_config", name, &b);
}

static void config(void)
{
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);
        char name[64];
        snprintf(name, sizeof(name), "default-%s", v->name + 8);
        config_seed(name, v->name, 255, v->default_value);
    }
    config_seed("fifo-hex-k", "GPUPORT_FIFO_SIZE", 10, " 0x1k ");
    config_seed("timeout-max", "GPUPORT_TIMEOUT_MS", 3, "86400000");
    config_seed("async-2-52", "GPUPORT_SHM_ASYNC_MIN", 40, "4096g");
    config_seed("host-id-16", "GPUPORT_HOST_ID", 0, "0xFFFFFFFFFFFFFFFF");
    config_seed("cpus", "GPUPORT_PROXY_CPUS", 100, "0-3,8,10-11");
    config_seed("gid-auto", "GPUPORT_IB_GID_INDEX", 1, "AUTO");
    config_seed("hca-list", "GPUPORT_IB_HCA", 200, "mlx5_0:1,mlx5_1,mlx5_2:255");
    config_seed("if-exclude", "GPUPORT_SOCKET_IFNAME", 50, "^docker,lo,veth.1@if2");
    config_seed("log-subsys", "GPUPORT_LOG_SUBSYS", 80, "^Proxy,tcp,cuda_ipc");
    config_seed("log-file", "GPUPORT_LOG_FILE", 60, "/tmp/gp.%h.%p.%%.log");
    config_seed("transport-every-row", "", 30, "tcp");
}

/* ---- the descriptor exchange: records as fdwire_send_hello and
 * fdwire_send_pieces put them on the socket, then altered ---- */

typedef struct {
    unsigned char b[2048];
    size_t len;
    uint32_t nfds;
    int close_after; /* the peer closes its end after this record */
} fdrec_t;

typedef struct {
    fdrec_t r[8];
    int n;
} fdrecs_t;

/* Appends what the sender writes: a hello (hello), then n pieces (n >= 0;
 * n < 0: none), their sizes and offsets distinct. */
static void fdp_capture(fdrecs_t *rs, int hello, int n)
{
    const gpuport_fdpeer_t peer = {.rank = 1};
    gpuport_fdpiece_t *p = calloc(n > 0 ? (size_t)n : 1, sizeof(*p));
    int sv[2], null = open("/dev/null", O_RDONLY | O_CLOEXEC);

    FUZZ_CHECK(p && null >= 0, "/dev/null");
    for (int i = 0; i < n; i++) {
        p[i].fd = null;
        p[i].size = 2097152ull << (i % 3);
        p[i].offset = (uint64_t)i * 4096;
    }
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    if (hello)
        FUZZ_CHECK(fdwire_send_hello(sv[1], 0, 0x0102030405060708ull, UINT64_MAX) == 0,
                   "fdwire_send_hello");
    if (n >= 0)
        FUZZ_CHECK(fdwire_send_pieces(sv[1], &peer, 0x0102030405060708ull, p, (uint32_t)n,
                                      UINT64_MAX) == GPUPORT_OK,
                   "fdwire_send_pieces");
    close(sv[1]);
    for (;;) {
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(253 * sizeof(int))];
        } ctl;
        fdrec_t *r = &rs->r[rs->n];
        struct iovec iov = {r->b, sizeof(r->b)};
        struct msghdr mh;
        struct cmsghdr *cm;
        ssize_t k;

        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        k = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC);
        FUZZ_CHECK(k >= 0 && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)), "recvmsg");
        r->nfds = 0;
        for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            size_t c = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < c; i++) {
                int f;
                memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
                close(f);
            }
            r->nfds += (uint32_t)c;
        }
        if (k == 0 && r->nfds == 0)
            break;
        FUZZ_CHECK(rs->n < 7, "too many records");
        r->len = (size_t)k;
        r->close_after = 0;
        rs->n++;
    }
    close(sv[0]);
    close(null);
    free(p);
}

static uint32_t *fdp_field(fdrec_t *r, size_t off)
{
    return (uint32_t *)(void *)(r->b + off);
}

static fdwire_piece_t *fdp_piece(fdrec_t *r, uint32_t k)
{
    return (fdwire_piece_t *)(void *)(r->b + sizeof(fdwire_head_t) + k * sizeof(fdwire_piece_t));
}

/* The harness's input: the mode (and with bit 4, how many descriptors the
 * receiver may open: avail), then each record's flags, descriptors, length
 * and body; the length follows from the body where it can. */
static void fdp_save_limit(const char *name, uint8_t mode, int avail, const fdrecs_t *rs)
{
    buf_t b = {.n = 0};

    add_u8(&b, (uint8_t)(mode | (avail >= 0 ? 16 : 0)));
    if (avail >= 0)
        add_u8(&b, (uint8_t)avail);
    for (int i = 0; i < rs->n; i++) {
        const fdrec_t *r = &rs->r[i];
        uint32_t magic = 0, count = 0;
        size_t auto_len;
        uint16_t len = (uint16_t)r->len;

        if (r->len >= sizeof(fdwire_head_t)) {
            memcpy(&magic, r->b, sizeof(magic));
            memcpy(&count, r->b + offsetof(fdwire_head_t, count), sizeof(count));
        }
        auto_len = magic == FDWIRE_HELLO_MAGIC
                       ? sizeof(fdwire_hello_t)
                       : sizeof(fdwire_head_t) +
                             (count < FDWIRE_PIECES_PER_MSG + 1 ? count
                                                                : FDWIRE_PIECES_PER_MSG + 1) *
                                 sizeof(fdwire_piece_t);
        add_u8(&b, (uint8_t)(r->close_after |
                             (r->len >= sizeof(fdwire_head_t) && r->len == auto_len ? 2 : 0)));
        if (r->nfds > 0 && r->nfds == count)
            add_u8(&b, 0x80);
        else if (r->nfds > 0 && r->nfds == count + 1)
            add_u8(&b, 0x81);
        else if (r->nfds < 16)
            add_u8(&b, (uint8_t)r->nfds);
        else
            FUZZ_CHECK(0, "%s: %u descriptors with a count of %u", name, r->nfds, count);
        add(&b, &len, sizeof(len));
        add(&b, r->b, r->len);
    }
    save("fuzz_fdpass", name, &b);
}

static void fdp_save(const char *name, uint8_t mode, const fdrecs_t *rs)
{
    fdp_save_limit(name, mode, -1, rs);
}

/* mode: bits 0-1 0 pieces, 1 hello, 2 hello then pieces; bit 2 the peer
 * stays; bit 3 a deadline ahead; bit 4 an open-file limit */
static void fdpass(void)
{
    fdrecs_t rs;

#define FDP(hello, n) (memset(&rs, 0, sizeof(rs)), fdp_capture(&rs, hello, n))
    FDP(1, -1);
    fdp_save("hello", 1, &rs);
    FDP(1, 0);
    fdp_save("hello-pieces-0", 2, &rs);
    FDP(0, 0);
    fdp_save("pieces-0", 0, &rs);
    FDP(0, 3);
    fdp_save("pieces-3", 0, &rs);
    FDP(1, 130); /* 64, 64 and 2 */
    fdp_save("hello-pieces-130", 2 | 8, &rs);
    fdp_save_limit("hello-pieces-130-limit-130", 2, 130, &rs);
    fdp_save_limit("hello-pieces-130-limit-100", 2, 100, &rs); /* the second message cut */
    FDP(0, 3);
    fdp_save_limit("pieces-3-limit-0", 0, 0, &rs);

    FDP(1, -1);
    (*fdp_field(&rs.r[0], offsetof(fdwire_hello_t, version)))++;
    fdp_save("hello-version-2", 1, &rs);
    FDP(1, 0);
    rs.r[0].nfds = 1;
    fdp_save("hello-with-descriptor", 2, &rs);
    FDP(1, -1);
    rs.r[0].len++;
    fdp_save("hello-long", 1, &rs);
    FDP(0, 3);
    rs.r[0].nfds = 2;
    fdp_save("pieces-3-descriptor-short", 0, &rs);
    FDP(0, 65);
    rs.r[1].nfds = 2;
    fdp_save("pieces-65-descriptor-extra", 0, &rs);
    FDP(0, 64);
    rs.r[0].nfds = 65; /* more than the receiver has room for */
    fdp_save("pieces-64-descriptors-65", 0, &rs);
    FDP(0, 130);
    (*fdp_field(&rs.r[1], offsetof(fdwire_head_t, total)))++;
    fdp_save("pieces-130-total-differs", 0, &rs);
    FDP(0, 130);
    rs.r[0].close_after = 1;
    fdp_save("pieces-130-closed-after-64", 0, &rs);
    FDP(1, 130);
    rs.n = 3;
    fdp_save("hello-pieces-130-peer-stays", 2 | 4, &rs);
    FDP(0, 3);
    fdp_piece(&rs.r[0], 1)->offset = UINT64_MAX - fdp_piece(&rs.r[0], 1)->size + 1;
    fdp_save("pieces-3-offset-wraps", 0, &rs);
    FDP(0, 1);
    *fdp_field(&rs.r[0], offsetof(fdwire_head_t, total)) = GPUPORT_FDPASS_MAX_PIECES + 1;
    fdp_save("pieces-too-many", 0, &rs);
    FDP(0, 1);
    *fdp_field(&rs.r[0], offsetof(fdwire_head_t, total)) = GPUPORT_FDPASS_MAX_PIECES;
    fdp_save("pieces-max-then-close", 0, &rs);
    FDP(0, 3);
    *fdp_field(&rs.r[0], offsetof(fdwire_head_t, count)) = 0;
    rs.r[0].len = sizeof(fdwire_head_t);
    rs.r[0].nfds = 0;
    fdp_save("pieces-3-count-0", 0, &rs);
    FDP(0, 64);
    *fdp_field(&rs.r[0], offsetof(fdwire_head_t, count)) = 65;
    *fdp_field(&rs.r[0], offsetof(fdwire_head_t, total)) = 65;
    rs.r[0].len += sizeof(fdwire_piece_t); /* longer than a message */
    rs.r[0].nfds = 65;
    fdp_save("pieces-count-65", 0, &rs);
    FDP(0, 0);
    rs.r[1] = rs.r[0];
    rs.r[0].len = 0; /* reads as the peer's close */
    rs.n = 2;
    fdp_save("empty-record", 0, &rs);
    rs.r[0].nfds = 1;
    fdp_save("empty-record-with-descriptor", 0, &rs);
#undef FDP
}

int main(int argc, char **argv)
{
    FUZZ_CHECK(argc == 2, "usage: make_seeds CORPUS_DIR");
    g_dir = argv[1];
    triggers();
    proxy();
    records();
    frames();
    config();
    fdpass();
    return 0;
}
