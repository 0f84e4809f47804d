/*
 * fuzz_fdpass: the receive side of the descriptor exchange's wire
 * (src/fdpass/fdpass_wire.c: fdwire_recv_hello and fdwire_recv_pieces) on whatever
 * a same-host peer may send at channel creation, over a real Unix seqpacket
 * socket carrying real SCM_RIGHTS descriptors.
 *
 * Every record of the input is queued on one end of a socketpair before the
 * receiver is called on the other, and the sending end is then closed
 * (unless the input keeps it open, and then the deadline is now): the
 * receiver reads records or end of file, or times out at once, and never
 * waits. The descriptors sent are those of a pool of POOL memfds, the i-th
 * of the input being pool[i % POOL], so that the file behind each returned
 * piece is known; the harness owns no other descriptor to close after
 * sending.
 * Input: byte 0 the mode (bits 0-1: 0 fdwire_recv_pieces, 1
 * fdwire_recv_hello, 2 and 3 the hello and then, if it was good, the pieces,
 * as fdpass.c's accepting side does; bit 2: keep the sending end open at the
 * end; bit 3: a deadline 5 ms ahead instead of now, when closed; bit 4: the
 * next byte is how many more descriptors the receiver may open, its
 * RLIMIT_NOFILE lowered for the call), then at most MAXREC records, each:
 *   byte 0     bit 0: close the sending end after this record (nothing more
 *              is sent); bit 1: the length follows from the body (24 bytes
 *              if it starts with the hello magic, else a pieces header and
 *              its `count` pieces, `count` cut at PER_MSG + 1)
 *   byte 1     descriptors: bit 7 set: the body's `count` +0, +1, -1 or +2
 *              (bits 0-1), at most FDS_MAX; clear: bits 0-3
 *   bytes 2-3  the length, unless byte 0 bit 1 (modulo RECMAX + 1)
 *   the body
 * No more than MAX_FDS descriptors per input (later records get fewer).
 * Invariants, against a model of the wire's rules (fdpass_wire.h):
 *   - the status, or hello's errno, is one of those documented and the one
 *     the model gives: OK exactly for a well-formed exchange, PEER for a
 *     malformed message or the peer's close, TIMEOUT where it would wait,
 *     NO_RESOURCE where the limit kept a message's descriptors out;
 *   - on success the pieces are the messages' (size, offset, in order),
 *     their number is the header's total (at most
 *     GPUPORT_FDPASS_MAX_PIECES; NULL for none), and each descriptor is
 *     open, close-on-exec, new, and the file that was sent in its place;
 *     on failure *theirs_p and *m_p keep their sentinels;
 *   - no descriptor leaks: the process's open descriptors after the call
 *     are those before it and the returned ones, and after the harness
 *     closes those and the socket, exactly those at the start.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdpass/fdpass_wire.h"
#include "fuzz.h"
#include "util.h"

#define PER_MSG FDWIRE_PIECES_PER_MSG
#define HEAD ((size_t)sizeof(fdwire_head_t))
#define PIECE ((size_t)sizeof(fdwire_piece_t))
#define MSG_MAX (HEAD + PER_MSG * PIECE)
#define RECMAX (MSG_MAX + 60) /* room for records longer than any message */
#define MAXREC 64
#define FDS_MAX (PER_MSG + 2) /* past PER_MSG the receiver's control buffer cuts them off */
#define MAX_FDS 256           /* in flight at once: well under RLIMIT_NOFILE */
#define POOL 7                /* prime: a piece shifted by a message's worth still differs */

typedef struct {
    unsigned char b[RECMAX];
    size_t len;
    uint32_t nfds;
    uint32_t fd0; /* the input's index of its first descriptor */
} rec_t;

typedef struct {
    uint64_t size, offset;
    uint32_t file; /* pool index */
} want_t;

static rec_t g_rec[MAXREC];
static int g_nrec, g_eof;
static int g_avail; /* descriptors the receiver may still open; < 0: no limit */
static int g_pool[POOL];
static struct stat g_pool_st[POOL];
static want_t g_want[MAX_FDS];

/* The open descriptors below g_nfd: poll reports POLLNVAL for closed ones,
 * one system call for the whole range. New descriptors take the lowest free
 * numbers, so an input that sends n can open no descriptor past the
 * (n + 2)-th free one (2: the sockets); g_nfd is set per input to cover
 * that many, within g_nfd_max. */
static struct pollfd *g_pfd;
static int g_nfd, g_nfd_max, g_hi;

static void snap(uint8_t *open)
{
    FUZZ_CHECK(poll(g_pfd, (nfds_t)g_nfd, 0) >= 0, "poll: %s", strerror(errno));
    for (int i = 0; i < g_nfd; i++)
        open[i] = !(g_pfd[i].revents & POLLNVAL);
}

static void snap_start(uint8_t *open, uint32_t nfds)
{
    int holes = 0;

    g_nfd = g_hi + 1 + (int)nfds + 4;
    for (;;) {
        FUZZ_CHECK(g_nfd <= g_nfd_max, "%d of the first %d descriptors are open",
                   g_nfd - holes, g_nfd_max);
        snap(open);
        holes = 0;
        for (int i = 0; i < g_nfd; i++)
            holes += !open[i];
        if (holes >= (int)nfds + 4)
            return;
        g_nfd += (int)nfds + 4 - holes;
    }
}

static int first_diff(const uint8_t *a, const uint8_t *b)
{
    for (int i = 0; i < g_nfd; i++)
        if (a[i] != b[i])
            return i;
    return -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct rlimit rl;

    (void)argc;
    (void)argv;
    for (int i = 0; i < POOL; i++) {
        char name[32];

        snprintf(name, sizeof(name), "fuzz_fdpass.%d", i);
        g_pool[i] = memfd_create(name, MFD_CLOEXEC);
        FUZZ_CHECK(g_pool[i] >= 0 && fstat(g_pool[i], &g_pool_st[i]) == 0, "memfd_create: %s",
                   strerror(errno));
        if (g_pool[i] > g_hi)
            g_hi = g_pool[i];
    }
    g_nfd_max = g_hi + 1 + MAX_FDS + 64;
    FUZZ_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
    if (rl.rlim_cur < (rlim_t)g_nfd_max) {
        rl.rlim_cur = (rlim_t)g_nfd_max;
        FUZZ_CHECK(rl.rlim_max >= rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &rl) == 0,
                   "RLIMIT_NOFILE below %d", g_nfd_max);
    }
    g_pfd = calloc((size_t)g_nfd_max, sizeof(*g_pfd));
    for (int i = 0; i < g_nfd_max; i++)
        g_pfd[i].fd = i;
    return 0;
}

static uint32_t body_u32(const rec_t *r, size_t off)
{
    uint32_t v = 0;

    if (r->len >= off + sizeof(v))
        memcpy(&v, r->b + off, sizeof(v));
    return v;
}

/* Returns how many descriptors the records carry. */
static uint32_t decode(fuzz_in_t *in, int keep_open)
{
    static const int delta[4] = {0, 1, -1, 2};
    uint32_t nfds_all = 0;

    g_nrec = 0;
    g_eof = !keep_open;
    while (in->left > 0 && g_nrec < MAXREC) {
        rec_t *r = &g_rec[g_nrec++];
        uint8_t fl = fuzz_u8(in), fs = fuzz_u8(in);
        uint16_t len;
        int64_t n;

        fuzz_bytes(in, &len, sizeof(len));
        if (fl & 2) {
            uint32_t magic, count;

            fuzz_bytes(in, r->b, HEAD);
            memcpy(&magic, r->b, sizeof(magic));
            memcpy(&count, r->b + offsetof(fdwire_head_t, count), sizeof(count));
            if (count > PER_MSG + 1)
                count = PER_MSG + 1;
            r->len = magic == FDWIRE_HELLO_MAGIC ? sizeof(fdwire_hello_t) : HEAD + count * PIECE;
            fuzz_bytes(in, r->b + HEAD, r->len - HEAD);
        } else {
            r->len = len % (RECMAX + 1);
            fuzz_bytes(in, r->b, r->len);
        }
        if (fs & 0x80) {
            n = (int64_t)body_u32(r, offsetof(fdwire_head_t, count)) + delta[fs & 3];
            n = n < 0 ? 0 : n > FDS_MAX ? FDS_MAX : n;
        } else {
            n = fs & 15;
        }
        if (n > MAX_FDS - nfds_all)
            n = MAX_FDS - nfds_all;
        r->nfds = (uint32_t)n;
        r->fd0 = nfds_all;
        nfds_all += r->nfds;
        if (fl & 1) {
            g_eof = 1;
            break;
        }
    }
    return nfds_all;
}

static void send_one(int fd, const rec_t *r)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(FDS_MAX * sizeof(int))];
    } ctl;
    struct iovec iov = {(void *)r->b, r->len};
    struct msghdr mh;

    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (r->nfds > 0) {
        struct cmsghdr *cm;

        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(r->nfds * sizeof(int));
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(r->nfds * sizeof(int));
        for (uint32_t k = 0; k < r->nfds; k++)
            memcpy(CMSG_DATA(cm) + k * sizeof(int), &g_pool[(r->fd0 + k) % POOL], sizeof(int));
    }
    /* queued whole before the receiver runs: a full buffer would be the
     * harness's mistake, not the library's */
    FUZZ_CHECK(sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)r->len,
               "sendmsg of %zu bytes and %u descriptors: %s", r->len, r->nfds, strerror(errno));
}

/* ---- the model: the rules of fdpass_wire.h over the queued records ---- */

enum { M_REC, M_EOF, M_WAIT };

/* The next record and how many of its descriptors the receiver gets: at
 * most PER_MSG (its room) and g_avail (its open-file limit; < 0: none);
 * *cut_p where some did not arrive. A record of no bytes that brings no
 * descriptor reads as the peer's close: seqpacket gives both as a 0-byte
 * read. */
static int model_next(int *pos, const rec_t **r_p, uint32_t *got_p, int *cut_p)
{
    const rec_t *r;
    uint32_t got;

    if (*pos == g_nrec)
        return g_eof ? M_EOF : M_WAIT;
    r = *r_p = &g_rec[(*pos)++];
    got = r->nfds < PER_MSG ? r->nfds : PER_MSG;
    if (g_avail >= 0 && got > (uint32_t)g_avail)
        got = (uint32_t)g_avail;
    *got_p = got;
    *cut_p = got < r->nfds;
    return r->len == 0 && got == 0 ? M_EOF : M_REC;
}

static int model_hello(int *pos)
{
    const rec_t *r = NULL;
    fdwire_hello_t h;
    uint32_t got;
    int cut;

    switch (model_next(pos, &r, &got, &cut)) {
    case M_EOF:
        return ECONNRESET;
    case M_WAIT:
        return ETIMEDOUT;
    }
    if (r->len != sizeof(h) || r->nfds != 0)
        return EPROTO;
    memcpy(&h, r->b, sizeof(h));
    return h.magic == FDWIRE_HELLO_MAGIC && h.version == FDWIRE_VERSION ? 0 : EPROTO;
}

/* The bytes of a pieces message against the exchange so far (first: none
 * came before; total, have: its total and the pieces received). */
static int model_bytes_ok(const rec_t *r, const fdwire_head_t *h, int first, uint32_t total,
                          uint32_t have)
{
    if (r->len < HEAD || r->len > MSG_MAX || h->magic != FDWIRE_PIECES_MAGIC)
        return 0;
    if (first ? h->total > GPUPORT_FDPASS_MAX_PIECES : h->total != total)
        return 0;
    /* a message carries 1..PER_MSG of what is left; only an empty exchange
     * has a message of none */
    if (h->count > PER_MSG || (uint64_t)have + h->count > h->total ||
        (h->count == 0) != (h->total == 0))
        return 0;
    if (r->len != HEAD + (size_t)h->count * PIECE)
        return 0;
    for (uint32_t k = 0; k < h->count; k++) {
        fdwire_piece_t p;
        uint64_t end;

        memcpy(&p, r->b + HEAD + k * PIECE, PIECE);
        if (__builtin_add_overflow(p.offset, p.size, &end))
            return 0;
    }
    return 1;
}

static gpuport_status_t model_pieces(int *pos, uint32_t *total_p)
{
    uint32_t total = 0, have = 0;
    int first = 1;

    do {
        const rec_t *r = NULL;
        fdwire_head_t h;
        uint32_t got;
        int cut;

        switch (model_next(pos, &r, &got, &cut)) {
        case M_EOF:
            return GPUPORT_ERR_PEER;
        case M_WAIT:
            return GPUPORT_ERR_TIMEOUT;
        }
        memset(&h, 0, sizeof(h));
        memcpy(&h, r->b, r->len < HEAD ? r->len : HEAD);
        if (!model_bytes_ok(r, &h, first, total, have))
            return GPUPORT_ERR_PEER;
        /* fewer than the message's own: this side's limit, not the peer */
        if (cut && got < h.count)
            return GPUPORT_ERR_NO_RESOURCE;
        if (cut || got != h.count)
            return GPUPORT_ERR_PEER;
        for (uint32_t k = 0; k < h.count; k++) {
            fdwire_piece_t p;

            memcpy(&p, r->b + HEAD + k * PIECE, PIECE);
            FUZZ_CHECK(have + k < MAX_FDS, "more pieces than descriptors sent");
            g_want[have + k].size = p.size;
            g_want[have + k].offset = p.offset;
            g_want[have + k].file = (r->fd0 + k) % POOL;
        }
        if (g_avail >= 0)
            g_avail -= (int)got; /* held until the exchange ends */
        if (first)
            total = h.total;
        first = 0;
        have += h.count;
    } while (have < total);
    *total_p = total;
    return GPUPORT_OK;
}

/* The open-file limit that leaves the receiver `avail` more descriptors
 * (the lowest free numbers in `open`); 0 when that many are free below
 * g_nfd anyway, the most any input can use. */
static rlim_t limit_for(const uint8_t *open, int avail)
{
    for (int i = 0; i < g_nfd; i++)
        if (!open[i] && avail-- == 0)
            return (rlim_t)i;
    return 0;
}

/* ---- the checks ---- */

static void check_pieces(const gpuport_fdpiece_t *p, uint32_t m, const uint8_t *before,
                         const uint8_t *after)
{
    uint8_t want[g_nfd_max];
    int d;

    FUZZ_CHECK(m <= GPUPORT_FDPASS_MAX_PIECES, "%u pieces", m);
    FUZZ_CHECK((m == 0) == (p == NULL), "%u pieces at %p", m, (const void *)p);
    memcpy(want, before, (size_t)g_nfd);
    for (uint32_t i = 0; i < m; i++) {
        const want_t *w = &g_want[i];
        struct stat st;
        int fd = p[i].fd, fl;

        FUZZ_CHECK(p[i].size == w->size && p[i].offset == w->offset && p[i].reserved == 0,
                   "piece %u: size %llu offset %llu reserved %u, sent size %llu offset %llu", i,
                   (unsigned long long)p[i].size, (unsigned long long)p[i].offset,
                   p[i].reserved, (unsigned long long)w->size, (unsigned long long)w->offset);
        FUZZ_CHECK(fd >= 0 && fd < g_nfd && !want[fd],
                   "piece %u: descriptor %d was open before, is another piece's too or lies "
                   "past the %d watched",
                   i, fd, g_nfd);
        want[fd] = 1;
        fl = fcntl(fd, F_GETFD);
        FUZZ_CHECK(fl >= 0 && (fl & FD_CLOEXEC), "piece %u: descriptor %d: F_GETFD %d (%s)", i,
                   fd, fl, fl < 0 ? strerror(errno) : "no FD_CLOEXEC");
        FUZZ_CHECK(fstat(fd, &st) == 0 && st.st_ino == g_pool_st[w->file].st_ino &&
                       st.st_dev == g_pool_st[w->file].st_dev,
                   "piece %u: descriptor %d is not the file sent for it (pool %u)", i, fd,
                   w->file);
    }
    d = first_diff(want, after);
    FUZZ_CHECK(d < 0, "descriptor %d is %s after the call, not counting the %u returned", d,
               after[d] ? "open" : "closed", m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    fuzz_in_t in = {data, len};
    uint8_t mode = fuzz_u8(&in);
    int call = mode & 3, keep_open = (mode >> 2) & 1, ahead = (mode >> 3) & 1 && !keep_open;
    int avail = mode & 16 ? fuzz_u8(&in) : -1;
    uint8_t start[g_nfd_max], before[g_nfd_max], after[g_nfd_max];
    gpuport_fdpiece_t *const unset = (gpuport_fdpiece_t *)(uintptr_t)0x5e771e;
    gpuport_fdpiece_t *theirs = unset;
    const gpuport_fdpeer_t peer = {.rank = 1, .pid = 1, .uid = 0, .serial = 0, .host_id = 0};
    const uint64_t tag = 0x0102030405060708ull;
    uint32_t m = 0xdeadbeef, total = 0;
    int sv[2], pos = 0, d, want_h = -1, got_h = -1;
    gpuport_status_t want_st = GPUPORT_OK, st = GPUPORT_OK;
    struct rlimit rl, low;
    rlim_t lim = 0;

    snap_start(start, decode(&in, keep_open));
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0,
               "socketpair: %s", strerror(errno));
    {
        int sz = 4 << 20;
        setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    }
    for (int i = 0; i < g_nrec; i++)
        send_one(sv[1], &g_rec[i]);
    if (g_eof) {
        close(sv[1]);
        sv[1] = -1;
    }

    snap(before);
    if (avail >= 0)
        lim = limit_for(before, avail);
    g_avail = lim ? avail : -1;
    if (call != 0)
        want_h = model_hello(&pos);
    if (call != 1 && want_h <= 0)
        want_st = model_pieces(&pos, &total);

    if (lim) {
        FUZZ_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
        low = rl;
        low.rlim_cur = lim;
        FUZZ_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit(%llu): %s",
                   (unsigned long long)lim, strerror(errno));
    }
    if (call != 0) {
        fdwire_hello_t h;
        uint64_t now = gpuport_now_ns();

        got_h = fdwire_recv_hello(sv[0], &h, ahead ? now + 5000000 : now);
        FUZZ_CHECK(got_h == 0 || got_h == EPROTO || got_h == ECONNRESET || got_h == ETIMEDOUT,
                   "fdwire_recv_hello: %d (%s)", got_h, strerror(got_h));
        FUZZ_CHECK(got_h == want_h, "fdwire_recv_hello: %d (%s), the model's %d (%s)", got_h,
                   strerror(got_h), want_h, strerror(want_h));
        FUZZ_CHECK(got_h != 0 || memcmp(&h, g_rec[0].b, sizeof(h)) == 0,
                   "the hello differs from what was sent");
    }
    if (call != 1 && got_h <= 0) {
        uint64_t now = gpuport_now_ns();

        st = fdwire_recv_pieces(sv[0], &peer, tag, ahead ? now + 5000000 : now, &theirs, &m);
        FUZZ_CHECK(st == GPUPORT_OK || st == GPUPORT_ERR_PEER || st == GPUPORT_ERR_TIMEOUT ||
                       st == GPUPORT_ERR_NO_MEMORY || st == GPUPORT_ERR_NO_RESOURCE ||
                       st == GPUPORT_ERR_TRANSPORT,
                   "fdwire_recv_pieces: status %d (%s)", st, gpuport_status_string(st));
        FUZZ_CHECK(st == want_st, "fdwire_recv_pieces: %s, the model's %s",
                   gpuport_status_string(st), gpuport_status_string(want_st));
    }
    /* before the snapshot: poll refuses more descriptors than the limit */
    if (lim)
        FUZZ_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    snap(after);

    if (call != 1 && got_h <= 0 && st == GPUPORT_OK) {
        FUZZ_CHECK(m == total, "%u pieces, the header's total %u", m, total);
        check_pieces(theirs, m, before, after);
        gpuport_fdpieces_free(theirs, m);
    } else {
        FUZZ_CHECK(theirs == unset && m == 0xdeadbeef, "an output was written on failure");
        d = first_diff(before, after);
        FUZZ_CHECK(d < 0, "descriptor %d is %s after a failed call", d,
                   after[d] ? "open" : "closed");
    }
    close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    snap(after);
    d = first_diff(start, after);
    FUZZ_CHECK(d < 0, "descriptor %d is %s at the end", d, after[d] ? "open" : "closed");
    return 0;
}
