/*
 * fuzz_records: what a rank reads from its peers' records, the bootstrap's
 * untrusted bytes. Byte 0 picks the parser, the rest is the record:
 *   0  gpuport_record_check (src/record.c): the bytes as the header of each
 *      record type (rank, channel, ib QP, ib reachability) at its size;
 *   1  ib_qp_rec_unpack (src/transport/ib/ib_setup.c), any length;
 *   2  ib_tdata_unpack: the bytes as a channel record carrying ib's tdata;
 *   3  ib_reach_agree: this rank's record from the first bytes, the peer's
 *      from the rest, a why buffer of a size the input picks;
 *   4  tcp's rank record (tcp_rec_t) through tcp_sockaddr_of and
 *      tcp_addr_text (src/transport/tcp/tcp_addr.c), as connect_to uses it;
 *   5  gpuport_tl_blob (src/comm/tl_core.c): a transport's part of a rank record
 *      checked against this rank's;
 *   6  the same-host transports' mappings of a peer's memory
 *      (src/transport/sm/sm.c), over a memfd of this process of 0-3 pages:
 *      sm_ctrl_map on a rank record's max_channels and ctrl_size (byte 1
 *      even), or sm_map_piece on a passed piece's offset and size (odd);
 *      what is accepted is stored into, slot by slot or its first and last
 *      byte, so that a mapping past the file's end raises SIGBUS;
 *   7  sm_region_fits (sm.c), cuda_ipc's check of a VMM destination record
 *      against the bytes it imported (first import and reuse), against
 *      128-bit arithmetic;
 *   8  cipc_relay_request_ok (src/transport/cuda_ipc/cipc_check.c), what
 *      cuda_ipc's relay server takes from the words its peer wrote into its
 *      control slot: sequence number, kind, offsets and size against the
 *      sizes the peer declared, against 128-bit arithmetic.
 * 1-3 exist where the ib transport is built (GPUPORT_HAVE_IBVERBS).
 * Invariants: each accepts exactly what an independent check of the
 * record's rules accepts, writes its output only on success, and writes
 * nothing outside its buffers (exact-size heap copies: the address
 * sanitizer borders them).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <unistd.h>

#include "build_config.h"
#include "fuzz.h"
#include "internal.h"
#include "transport/cuda_ipc/cipc_check.h"
#include "transport/sm/sm.h"
#include "transport/tcp/tcp_priv.h"
#if GPUPORT_HAVE_IBVERBS
#include "transport/ib/ib.h"
#endif

#define PEER 3

/* An exact-size heap copy of the input, padded with zeros to at least n. */
static void *copy_of(fuzz_in_t *in, size_t n)
{
    size_t k = in->left > n ? in->left : n;
    void *p = malloc(k ? k : 1);

    fuzz_bytes(in, p, k);
    return p;
}

static int header_valid(const gpuport_rec_header_t *h, uint16_t type, uint16_t size)
{
    return h->magic == GPUPORT_RECORD_MAGIC && h->version_major == GPUPORT_VERSION_MAJOR &&
           h->version_minor == GPUPORT_VERSION_MINOR && h->layout == GPUPORT_RECORD_LAYOUT &&
           h->type == type && h->size == size;
}

static void record_check(fuzz_in_t *in)
{
    static const struct {
        uint16_t type;
        uint16_t size;
    } kinds[] = {
        {GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t)},
        {GPUPORT_REC_CHANNEL, sizeof(gpuport_channel_rec_t)},
#if GPUPORT_HAVE_IBVERBS
        {GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, 1), sizeof(ib_qp_rec_t)},
        {GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, 2), sizeof(ib_reach_rec_t)},
#endif
    };
    gpuport_rec_header_t *h = copy_of(in, sizeof(*h));

    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        gpuport_status_t st = gpuport_record_check(h, kinds[k].type, kinds[k].size, PEER);
        FUZZ_CHECK((st == GPUPORT_OK) == header_valid(h, kinds[k].type, kinds[k].size) &&
                       (st == GPUPORT_OK || st == GPUPORT_ERR_VERSION),
                   "record type %u: status %d", kinds[k].type, st);
    }
    free(h);
}

#if GPUPORT_HAVE_IBVERBS
static void qp_rec(fuzz_in_t *in)
{
    size_t len = in->left;
    void *buf = copy_of(in, 0);
    ib_qp_rec_t out, before;
    gpuport_status_t st;
    int valid;

    memset(&out, 0xee, sizeof(out));
    before = out;
    st = ib_qp_rec_unpack(buf, len, PEER, &out);
    valid = len == sizeof(out) && header_valid(buf, GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, 1), sizeof(out));
    FUZZ_CHECK((st == GPUPORT_OK) == valid, "ib QP record of %zu bytes: status %d", len, st);
    if (st == GPUPORT_OK)
        FUZZ_CHECK(memcmp(&out, buf, sizeof(out)) == 0, "ib QP record not copied");
    else
        FUZZ_CHECK(memcmp(&out, &before, sizeof(out)) == 0 && st == GPUPORT_ERR_VERSION,
                   "a rejected ib QP record was written (status %d)", st);
    free(buf);
}

/* ib.h's rules for a peer's tdata, written out again. */
static gpuport_status_t tdata_reference(const gpuport_channel_rec_t *rec)
{
    ib_tdata_t t;

    memcpy(&t, rec->tdata, sizeof(t));
    if (t.magic != IB_TDATA_MAGIC || t.version != IB_TDATA_VERSION)
        return GPUPORT_ERR_VERSION;
    if (t.channel_id != rec->channel_id || !(t.flags & IB_TDATA_CTRL) || t.sem_addr == 0 ||
        t.sem_addr % 8 != 0 || t.status_addr != t.sem_addr + 8 ||
        (rec->dst.size > 0 && !(t.flags & IB_TDATA_DST)) ||
        (!(t.flags & IB_TDATA_DST) && t.dst_rkey != 0) || t.dst_size != rec->dst.size ||
        ((t.flags & IB_TDATA_DST) && t.dst_addr != rec->dst.addr))
        return GPUPORT_ERR_PEER;
    return GPUPORT_OK;
}

static void tdata(fuzz_in_t *in)
{
    gpuport_channel_rec_t *rec = copy_of(in, sizeof(*rec));
    ib_tdata_t out, before;
    gpuport_status_t st, want;

    /* make the magic and version likely, so the checks behind them run (a
     * field the parser under test ignores chooses) */
    if (rec->fdsock_ok & 1) {
        ib_tdata_t t;
        memcpy(&t, rec->tdata, sizeof(t));
        t.magic = IB_TDATA_MAGIC;
        t.version = IB_TDATA_VERSION;
        if (rec->fdsock_ok & 2) {
            t.channel_id = rec->channel_id;
            t.flags |= IB_TDATA_CTRL;
            t.sem_addr &= ~7ull;
            t.status_addr = t.sem_addr + 8;
            t.dst_size = rec->dst.size;
        }
        memcpy(rec->tdata, &t, sizeof(t));
    }
    memset(&out, 0xee, sizeof(out));
    before = out;
    st = ib_tdata_unpack(rec, PEER, &out);
    want = tdata_reference(rec);
    FUZZ_CHECK(st == want, "ib tdata: status %d, the rules say %d", st, want);
    if (st == GPUPORT_OK)
        FUZZ_CHECK(memcmp(&out, rec->tdata, sizeof(out)) == 0, "ib tdata not copied");
    else
        FUZZ_CHECK(memcmp(&out, &before, sizeof(out)) == 0, "rejected ib tdata was written");
    free(rec);
}

static void reach(fuzz_in_t *in)
{
    uint8_t usable = fuzz_u8(in), link = fuzz_u8(in), why_len = fuzz_u8(in);
    char my_why[200], *why;
    size_t n = fuzz_u8(in) % sizeof(my_why), len;
    ib_reach_rec_t mine, *theirs;
    int ok, want;

    fuzz_bytes(in, my_why, n);
    my_why[n] = '\0';
    ib_reach_pack(&mine, usable & 1, link, my_why);
    len = in->left;
    theirs = copy_of(in, 0);
    if (len == sizeof(*theirs) && (usable & 2))
        gpuport_tl_record_init(GPUPORT_TL_KIND_IB, &ib_records[IB_REC_REACH], &theirs->hdr);
    why = malloc((size_t)why_len + 1);
    memset(why, 'x', (size_t)why_len + 1);
    ok = ib_reach_agree(&mine, theirs, len, PEER, why, (size_t)why_len + 1);
    want = len == sizeof(*theirs) && header_valid(&theirs->hdr, GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, 2), sizeof(*theirs)) &&
           mine.usable && theirs->usable && mine.link_layer == theirs->link_layer;
    FUZZ_CHECK(ok == want, "ib reachability: %d, the rules say %d", ok, want);
    FUZZ_CHECK(memchr(why, '\0', (size_t)why_len + 1) != NULL, "why not terminated");
    free(why);
    free(theirs);
}
#endif

static void tcp_rec(fuzz_in_t *in)
{
    tcp_rec_t *p = copy_of(in, sizeof(*p));
    struct sockaddr_storage ss;
    socklen_t sl;
    size_t len = (size_t)(p->tcp_scope % 96) + 1;
    char *text = malloc(len);

    sl = tcp_sockaddr_of(p, &ss);
    if (p->tcp_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        FUZZ_CHECK(sl == sizeof(*a) && a->sin6_family == AF_INET6 &&
                       a->sin6_port == p->tcp_port && a->sin6_scope_id == p->tcp_scope &&
                       memcmp(&a->sin6_addr, p->tcp_addr, 16) == 0,
                   "IPv6 address not carried over");
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        FUZZ_CHECK(sl == sizeof(*a) && a->sin_family == AF_INET && a->sin_port == p->tcp_port &&
                       memcmp(&a->sin_addr, p->tcp_addr, 4) == 0,
                   "IPv4 address not carried over (family %u)", p->tcp_family);
    }
    memset(text, 'x', len);
    tcp_addr_text(p, text, len);
    FUZZ_CHECK(memchr(text, '\0', len) != NULL, "address text not terminated in %zu bytes", len);
    free(text);
    free(p);
}

static void blob(fuzz_in_t *in)
{
    static const gpuport_transport_ops_t ops = {.name = "fuzz"};
    struct gpuport_comm comm;
    gpuport_proc_rec_t *procs = copy_of(in, 2 * sizeof(*procs));
    gpuport_tl_comm_t tc = {&comm, &ops, (int)(procs[0].rank & 7), NULL};
    const gpuport_tl_blob_t *mine = &procs[0].tl[tc.kind], *theirs = &procs[1].tl[tc.kind];
    const void *got;

    memset(&comm, 0, sizeof(comm));
    comm.procs = procs;
    comm.rank = 0;
    comm.size = 2;
    got = gpuport_tl_blob(&tc, 1);
    FUZZ_CHECK((got != NULL) == (theirs->version == mine->version && theirs->size == mine->size),
               "transport blob version %u/%u size %u/%u: %p", theirs->version, mine->version,
               theirs->size, mine->size, got);
    FUZZ_CHECK(!got || got == theirs->data, "blob is not the peer's data");
    free(procs);
}

static void same_host_map(fuzz_in_t *in)
{
    uint8_t mode = fuzz_u8(in);
    uint64_t file = (uint64_t)(mode >> 1) % 4 * (uint64_t)sysconf(_SC_PAGESIZE);
    int fd = memfd_create("fuzz-records", MFD_CLOEXEC);
    gpuport_status_t st;
    int want;

    FUZZ_CHECK(fd >= 0 && ftruncate(fd, (off_t)file) == 0, "memfd: %s", strerror(errno));
    if (mode & 1) {
        gpuport_fdpiece_t piece = {.fd = fd};
        void *addr = NULL, *map = NULL;
        size_t map_len = 0;
        piece.offset = fuzz_u64(in);
        piece.size = fuzz_u64(in);
        st = sm_map_piece(&piece, PEER, &addr, &map, &map_len);
        want = piece.size <= file && piece.offset <= file - piece.size;
        FUZZ_CHECK((st == GPUPORT_OK) == want && (st == GPUPORT_OK || st == GPUPORT_ERR_PEER),
                   "piece of %llu bytes at %llu of a %llu-byte file: status %d",
                   (unsigned long long)piece.size, (unsigned long long)piece.offset,
                   (unsigned long long)file, st);
        if (st == GPUPORT_OK && piece.size > 0) {
            ((volatile char *)addr)[0] = 1;
            ((volatile char *)addr)[piece.size - 1] = 1;
        }
        if (st == GPUPORT_OK)
            munmap(map, map_len);
    } else {
        struct gpuport_comm comm;
        gpuport_proc_rec_t procs[2];
        sm_ctrl_t c;
        memset(&comm, 0, sizeof(comm));
        memset(procs, 0, sizeof(procs));
        procs[PEER % 2].pid = getpid();
        procs[PEER % 2].ctrl_fd = fd;
        procs[PEER % 2].max_channels = (uint32_t)fuzz_u64(in);
        procs[PEER % 2].ctrl_size = fuzz_u64(in);
        comm.procs = procs;
        comm.size = 2;
        st = sm_ctrl_map(&comm, PEER % 2, &c);
        want = (uint64_t)procs[PEER % 2].max_channels * sizeof(gpuport_sem_slot_t) <=
                   procs[PEER % 2].ctrl_size &&
               procs[PEER % 2].ctrl_size <= file;
        FUZZ_CHECK((st == GPUPORT_OK) == want && (st == GPUPORT_OK || st == GPUPORT_ERR_PEER),
                   "control segment of %u channels in %llu bytes of a %llu-byte file: status %d",
                   procs[PEER % 2].max_channels,
                   (unsigned long long)procs[PEER % 2].ctrl_size, (unsigned long long)file, st);
        if (st == GPUPORT_OK) {
            FUZZ_CHECK(c.nslots == procs[PEER % 2].max_channels &&
                           sm_ctrl_slot(&c, PEER, c.nslots) == NULL,
                       "%u slots of %u", c.nslots, procs[PEER % 2].max_channels);
            for (uint32_t i = 0; i < c.nslots; i++)
                atomic_fetch_add(&sm_ctrl_slot(&c, PEER, i)->value, 1);
            sm_ctrl_unmap(&c);
        }
    }
    close(fd);
}

static void region_fits(fuzz_in_t *in)
{
    gpuport_region_rec_t r;
    uint64_t total;
    int ok;

    memset(&r, 0, sizeof(r));
    r.fd_offset = fuzz_u64(in);
    r.size = fuzz_u64(in);
    total = fuzz_u64(in);
    ok = sm_region_fits(&r, total, PEER);
    FUZZ_CHECK(ok == ((unsigned __int128)r.fd_offset + r.size <= total),
               "%llu bytes at %llu of %llu imported: %d", (unsigned long long)r.size,
               (unsigned long long)r.fd_offset, (unsigned long long)total, ok);
}

static void relay_request(fuzz_in_t *in)
{
    uint64_t seq = fuzz_u64(in), served = fuzz_u64(in), kind = fuzz_u8(in) & 3;
    uint64_t off = fuzz_u64(in), size = fuzz_u64(in), stg_off = fuzz_u64(in);
    uint64_t src_size = fuzz_u64(in), stg_size = fuzz_u64(in);
    typedef unsigned __int128 u128;
    int ok = cipc_relay_request_ok(seq, served, kind, off, size, stg_off, src_size, stg_size);
    int want = seq == (uint64_t)(served + 1) && (kind == 1 || kind == 2) && size > 0 &&
               (u128)off + size <= src_size && (u128)stg_off + size <= stg_size;

    FUZZ_CHECK(ok == want,
               "request %llu after %llu, kind %llu, %llu bytes at %llu (source %llu), staging "
               "offset %llu (staging %llu): %d",
               (unsigned long long)seq, (unsigned long long)served, (unsigned long long)kind,
               (unsigned long long)size, (unsigned long long)off, (unsigned long long)src_size,
               (unsigned long long)stg_off, (unsigned long long)stg_size, ok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    fuzz_in_t in = {data, len};

    switch (fuzz_u8(&in) % 9) {
    case 0: record_check(&in); break;
#if GPUPORT_HAVE_IBVERBS
    case 1: qp_rec(&in); break;
    case 2: tdata(&in); break;
    case 3: reach(&in); break;
#endif
    case 4: tcp_rec(&in); break;
    case 5: blob(&in); break;
    case 6: same_host_map(&in); break;
    case 7: region_fits(&in); break;
    case 8: relay_request(&in); break;
    default: break;
    }
    return 0;
}
