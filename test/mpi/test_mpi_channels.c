/*
 * gpuport over MPI: every rank is a process with its own communicator, proxy
 * and flusher, and ranks reach each other over the shm transport. Scenarios:
 *
 *   all-pairs          a channel between every pair of ranks (and one to self),
 *                      both ways, random sizes 1 B..2 MiB (inline and flusher
 *                      copies) at random offsets
 *   signal-after-data  up to 16 puts then one signal (or a put_with_signal last):
 *                      when wait returns, the data of every earlier put is there
 *   flush              after flush the source is overwritten with garbage, then
 *                      signalled: the peer holds the content from before
 *   many-channels      GPUPORT_FIFO_SIZE=16, 8 channels each way per pair over
 *                      sub-regions of one buffer, operations interleaved
 *   out-of-range       puts outside either region (overflowing offsets too) are
 *                      refused on the caller's side; the channel still works
 *   malloc-vs-alloc    destinations from malloc (peers use CMA) and from
 *                      gpuport_mem_alloc (peers map them)
 *   poll               poll reports exactly as many signals as were sent
 *   transport-forced   GPUPORT_TRANSPORT=shm works (on one host; across hosts it
 *                      fails creation on both sides); tcp forced works, to
 *                      self too; ib forced works where an RDMA device exists
 *                      and elsewhere fails on both sides (rank 0 checks the
 *                      reason it logs); distinct GPUPORT_HOST_IDs make auto
 *                      pick tcp
 *
 * GPUPORT_TEST_REMOTE_TRANSPORT=tcp says the other ranks are on other hosts
 * (test/net/): channels to them must use tcp, and forced shm must fail.
 *   bad-config         an invalid GPUPORT_* value fails comm init on every rank
 *
 * Every destination is a sub-range of a larger buffer with guard bands around
 * it; after every wait the whole destination is compared byte for byte with a
 * shadow copy of what it must hold, and every guard byte is checked. The
 * sender and the receiver draw the same operations from a PRNG seeded by the
 * pair, so the receiver knows what to expect without being told.
 *
 * Usage: test_mpi_channels [-l] [-s NAME[,NAME...]]; no argument runs all.
 * Rank 0 prints one PASS line per scenario. A failed check is printed by the
 * rank that saw it; the ranks agree on the outcome after every scenario and
 * all exit 1 if any failed.
 */
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "build_config.h"

#include "gpuport/gpuport.h"
#include "gpuport/gpuport_mpi.h"
/* for struct gpuport_channel's id only: this program links the installed
 * libraries, whose internal functions are hidden */
#include "internal.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define ASYNC_MIN (256 * KIB)  /* GPUPORT_SHM_ASYNC_MIN's default: flusher from here */
#define GUARD 4160             /* guard bytes each side; not a page multiple on purpose */
#define GUARD_BYTE 0xa5
#define GARBAGE 0x5a           /* what a sender writes over its flushed sources */
#define MAX_PUTS 16            /* per channel and round */
#define MAX_ENV 8              /* variables set for one communicator */
#define TIMEOUT_MS "30000"     /* GPUPORT_TIMEOUT_MS: a hang becomes a failure */
#define POLL_LIMIT_NS (20ull * 1000000000ull)
#define AGREE_LIMIT_S 60.0     /* longer than any gpuport timeout, then abort */

static int g_rank, g_size;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- failing without exiting: the ranks must still agree on the outcome --- */

static int fail_at(const char *file, int line, const char *what, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rank %d: %s:%d: CHECK failed: %s: %s\n", g_rank, file, line, what, msg);
    fflush(stderr);
    return -1;
}

#define REQUIRE(cond, ...)                                                                      \
    do {                                                                                        \
        if (!(cond))                                                                            \
            return fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__);                             \
    } while (0)

#define REQUIRE_STATUS(expr, want)                                                              \
    do {                                                                                        \
        gpuport_status_t got_ = (expr);                                                         \
        if (got_ != (want))                                                                     \
            return fail_at(__FILE__, __LINE__, #expr, "returned %d (%s), expected %d (%s)",     \
                           (int)got_, gpuport_status_string(got_), (int)(want),                 \
                           gpuport_status_string(want));                                        \
    } while (0)

#define REQUIRE_OK(expr) REQUIRE_STATUS(expr, GPUPORT_OK)

/* propagates a helper's failure; the helper printed where */
#define TRY(expr)                                                                               \
    do {                                                                                        \
        if ((expr) != 0)                                                                        \
            return -1;                                                                          \
    } while (0)

/* what the ranks moved and checked in the current scenario */
static struct stats {
    unsigned long long channels, puts, bytes, signals, verified;
} g_stats;

/* --- reproducible content --- */

typedef struct rng {
    uint64_t s;
} rng_t;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

static uint64_t rng_next(rng_t *r)
{
    return mix64(r->s += 0x9e3779b97f4a7c15ull);
}

static uint64_t rng_below(rng_t *r, uint64_t n)
{
    return rng_next(r) % n;
}

/* The byte at position pos of a source filled under tag: differs between
 * tags and between neighbouring positions, so stale or shifted data shows. */
static unsigned char pattern(uint64_t tag, uint64_t pos)
{
    return (unsigned char)(((pos ^ tag) * 0x9e3779b97f4a7c15ull) >> 56);
}

static void fill(unsigned char *buf, uint64_t off, uint64_t size, uint64_t tag)
{
    for (uint64_t i = off; i < off + size; i++)
        buf[i] = pattern(tag, i);
}

/* --- communicators under a temporary environment --- */

/* The configuration is read once, at creation: the NULL-terminated
 * name/value pairs are set for gpuport_comm_init_mpi only, then restored
 * (or unset where they were unset). */
static gpuport_status_t comm_init_env(const char *const *kv, gpuport_comm_t *comm_p)
{
    char *old[MAX_ENV] = {0};
    gpuport_status_t status;
    int n;

    for (n = 0; kv && kv[2 * n] && n < MAX_ENV; n++) {
        const char *prev = getenv(kv[2 * n]);
        old[n] = prev ? strdup(prev) : NULL;
        setenv(kv[2 * n], kv[2 * n + 1], 1);
    }
    status = gpuport_comm_init_mpi(MPI_COMM_WORLD, comm_p);
    for (int i = 0; i < n; i++) {
        if (old[i])
            setenv(kv[2 * i], old[i], 1);
        else
            unsetenv(kv[2 * i]);
        free(old[i]);
    }
    return status;
}

static int comm_open(const char *const *kv, gpuport_comm_t *comm_p)
{
    *comm_p = NULL;
    REQUIRE_OK(comm_init_env(kv, comm_p));
    REQUIRE(gpuport_comm_rank(*comm_p) == g_rank && gpuport_comm_size(*comm_p) == g_size,
            "communicator says rank %d of %d", gpuport_comm_rank(*comm_p),
            gpuport_comm_size(*comm_p));
    return 0;
}

/* --- channel order --- */

/*
 * Channel creation is a blocking exchange between the two ranks, so every
 * rank must meet its peers in an order that pairs everyone up: the rounds of
 * a round-robin tournament (circle method). Returns this rank's partner in
 * round r of tournament_rounds(), or -1 for a bye.
 */
static int tournament_rounds(void)
{
    int n = g_size + (g_size & 1);
    return n - 1;
}

static int tournament_partner(int r)
{
    int n = g_size + (g_size & 1), m = n - 1, p;

    if (g_rank == m)
        p = (int)(((long)r * (n / 2)) % m); /* the k with 2k = r (mod m) */
    else {
        p = ((r - g_rank) % m + m) % m;
        if (p == g_rank)
            p = m;
    }
    return p < g_size ? p : -1;
}

/* --- regions and links --- */

typedef struct region {
    unsigned char *ptr; /* the registered range; GUARD bytes either side */
    uint64_t size;      /* 0: none */
    gpuport_mem_t mem;
} region_t;

/* One channel as this rank sees it. */
typedef struct link {
    int peer;
    int index; /* among the channels of this pair, in creation order */
    gpuport_channel_t ch;
    region_t src, dst;
    unsigned char *shadow; /* what dst must hold */
    rng_t tx, rx;          /* the operations this side sends / the peer sends */
    uint64_t seed;         /* the layout's */
} link_t;

typedef struct layout {
    uint64_t size; /* every region */
    int shared;    /* buffer from gpuport_mem_alloc, else malloc */
    int per_pair;  /* channels to every other rank */
    int oneway;    /* first half carry puts from the lower rank, second half from the higher */
    int self;      /* one more channel, to this rank */
    uint64_t seed;
} layout_t;

typedef struct linkset {
    gpuport_comm_t comm;
    layout_t lay;
    unsigned char *buf; /* every region is carved from it */
    size_t buf_size, used;
    int n;
    link_t *links;
    int rounds; /* run so far, over every plan: round numbers never repeat */
} linkset_t;

static int region_carve(linkset_t *ls, uint64_t size, region_t *r)
{
    unsigned char *slot = ls->buf + ls->used;

    memset(r, 0, sizeof(*r));
    if (size == 0)
        return 0;
    REQUIRE(ls->used + 2 * GUARD + size <= ls->buf_size, "buffer of %zu bytes exhausted",
            ls->buf_size);
    ls->used += 2 * GUARD + size;
    memset(slot, GUARD_BYTE, GUARD);
    memset(slot + GUARD + size, GUARD_BYTE, GUARD);
    r->ptr = slot + GUARD;
    r->size = size;
    REQUIRE_OK(gpuport_mem_register(ls->comm, r->ptr, size, &r->mem));
    return 0;
}

static int guards_intact(const link_t *l, const region_t *r)
{
    for (int side = 0; side < 2; side++) {
        const unsigned char *g = side ? r->ptr + r->size : r->ptr - GUARD;
        for (int i = 0; i < GUARD; i++)
            REQUIRE(g[i] == GUARD_BYTE,
                    "channel to rank %d (#%d): guard byte %d %s the destination is 0x%02x",
                    l->peer, l->index, side ? i : GUARD - i, side ? "after" : "before", g[i]);
    }
    return 0;
}

/* The transport a channel must use: a forced one, else shm to this rank's
 * own host and g_remote (GPUPORT_TEST_REMOTE_TRANSPORT, default shm: every
 * rank on this host) to the others. */
static const char *g_forced; /* "": auto, whatever GPUPORT_TRANSPORT says */
static const char *g_remote = "shm";
static int g_remote_hosts; /* 1: ranks on other hosts exist */
static char (*g_hosts)[64]; /* every rank's host name, by rank */

static int g_hostid_per_rank; /* GPUPORT_HOST_ID differs on every rank */

static int same_host(int peer)
{
    if (g_hostid_per_rank)
        return peer == g_rank;
    return strcmp(g_hosts[peer], g_hosts[g_rank]) == 0;
}

static const char *expected_transport(int peer)
{
    const char *env = getenv("GPUPORT_TRANSPORT");

    if (g_forced && g_forced[0])
        return g_forced;
    if (!g_forced && env && strcmp(env, "auto") != 0)
        return env;
    return same_host(peer) ? "shm" : g_remote;
}

static int link_open(linkset_t *ls, link_t *l, int peer, int index)
{
    const layout_t *lay = &ls->lay;
    int sends = 1, receives = 1;

    if (lay->oneway) {
        int lower_sends = index < lay->per_pair / 2;
        sends = (g_rank < peer) == lower_sends;
        receives = !sends;
    }
    l->peer = peer;
    l->index = index;
    l->tx.s = hash4(lay->seed, (uint64_t)g_rank, (uint64_t)peer, (uint64_t)index);
    l->rx.s = hash4(lay->seed, (uint64_t)peer, (uint64_t)g_rank, (uint64_t)index);
    l->seed = lay->seed;
    TRY(region_carve(ls, sends ? lay->size : 0, &l->src));
    TRY(region_carve(ls, receives ? lay->size : 0, &l->dst));
    if (receives) {
        l->shadow = malloc(lay->size);
        REQUIRE(l->shadow != NULL, "malloc(%" PRIu64 ")", lay->size);
        fill(l->dst.ptr, 0, lay->size, ~l->rx.s);
        memcpy(l->shadow, l->dst.ptr, lay->size);
    }
    REQUIRE_OK(gpuport_channel_create(ls->comm, peer, l->src.mem, l->dst.mem, &l->ch));
    REQUIRE(strcmp(gpuport_channel_transport(l->ch), expected_transport(peer)) == 0,
            "channel to rank %d uses transport %s, expected %s", peer,
            gpuport_channel_transport(l->ch), expected_transport(peer));
    REQUIRE_OK(gpuport_channel_status(l->ch));
    g_stats.channels++;
    return 0;
}

static int ids_distinct(const linkset_t *ls)
{
    for (int i = 0; i < ls->n; i++)
        for (int j = i + 1; j < ls->n; j++)
            REQUIRE(ls->links[i].ch->id != ls->links[j].ch->id,
                    "channels to ranks %d (#%d) and %d (#%d) both have id %u",
                    ls->links[i].peer, ls->links[i].index, ls->links[j].peer,
                    ls->links[j].index, ls->links[i].ch->id);
    return 0;
}

static int linkset_open(gpuport_comm_t comm, const layout_t *lay, linkset_t *ls)
{
    int n = lay->per_pair * (g_size - 1) + (lay->self ? 1 : 0);

    memset(ls, 0, sizeof(*ls));
    ls->comm = comm;
    ls->lay = *lay;
    ls->buf_size = (size_t)n * 2 * (lay->size + 2 * GUARD);
    ls->links = calloc((size_t)n, sizeof(*ls->links));
    REQUIRE(ls->links != NULL, "calloc of %d links", n);
    if (lay->shared)
        REQUIRE_OK(gpuport_mem_alloc(comm, ls->buf_size, (void **)&ls->buf));
    else
        REQUIRE((ls->buf = malloc(ls->buf_size)) != NULL, "malloc(%zu)", ls->buf_size);
    for (int r = 0; r < tournament_rounds(); r++) {
        int peer = tournament_partner(r);
        for (int i = 0; peer >= 0 && i < lay->per_pair; i++)
            TRY(link_open(ls, &ls->links[ls->n++], peer, i));
    }
    if (lay->self)
        TRY(link_open(ls, &ls->links[ls->n++], g_rank, 0));
    return ids_distinct(ls);
}

static int linkset_close(linkset_t *ls)
{
    for (int i = 0; i < ls->n; i++) {
        link_t *l = &ls->links[i];
        REQUIRE_OK(gpuport_channel_status(l->ch));
        REQUIRE_OK(gpuport_channel_destroy(l->ch));
        if (l->src.mem)
            REQUIRE_OK(gpuport_mem_deregister(l->src.mem));
        if (l->dst.mem)
            REQUIRE_OK(gpuport_mem_deregister(l->dst.mem));
        free(l->shadow);
    }
    if (ls->lay.shared)
        REQUIRE_OK(gpuport_mem_free(ls->comm, ls->buf));
    else
        free(ls->buf);
    free(ls->links);
    return 0;
}

/* --- traffic: rounds of batches, each checked by the receiver --- */

enum {
    MODE_SIGNAL = 1,        /* puts, then signal */
    MODE_PUT_SIGNAL = 2,    /* puts, the last one a put_with_signal */
    MODE_FLUSH_GARBAGE = 4  /* puts, flush, garbage into the sources, signal */
};

typedef struct op {
    uint64_t dst_off, src_off, size;
} op_t;

typedef struct batch {
    int n, mode;
    op_t ops[MAX_PUTS];
} batch_t;

typedef struct plan {
    int rounds;
    int max_puts; /* per channel and round, drawn from 1..max_puts */
    unsigned modes;
    int big_pct;  /* share of puts of ASYNC_MIN bytes or more */
    int poll;     /* take signals with poll instead of wait */
    const batch_t *fixed; /* every batch, instead of drawing */
} plan_t;

static uint64_t draw_size(rng_t *r, uint64_t region, int big_pct)
{
    uint64_t pct = rng_below(r, 100), small = region < 4096 ? region : 4096;

    if (pct < 2)
        return pct ? region : 1; /* the extremes */
    if (pct < (uint64_t)big_pct && region >= ASYNC_MIN)
        return ASYNC_MIN + rng_below(r, region - ASYNC_MIN + 1);
    if (pct < (uint64_t)big_pct + 20 && region > 4096)
        return 4097 + rng_below(r, (region < ASYNC_MIN ? region : ASYNC_MIN) - 4097 + 1);
    return 1 + rng_below(r, small);
}

/* random, with the region's first and last bytes often included */
static uint64_t draw_offset(rng_t *r, uint64_t region, uint64_t size)
{
    uint64_t pct = rng_below(r, 100);
    return pct < 8 ? 0 : pct < 16 ? region - size : rng_below(r, region - size + 1);
}

static void draw_batch(rng_t *r, const plan_t *p, uint64_t region, batch_t *b)
{
    int choices[3], nchoices = 0;

    if (p->fixed) {
        *b = *p->fixed;
        return;
    }
    for (int m = 0; m < 3; m++)
        if (p->modes & (1u << m))
            choices[nchoices++] = 1 << m;
    b->mode = choices[rng_below(r, (uint64_t)nchoices)];
    b->n = 1 + (int)rng_below(r, (uint64_t)p->max_puts);
    for (int j = 0; j < b->n; j++) {
        op_t *o = &b->ops[j];
        o->size = draw_size(r, region, p->big_pct);
        o->dst_off = draw_offset(r, region, o->size);
        o->src_off = draw_offset(r, region, o->size);
    }
}

/* the content of one round's sources on the channel from `sender` */
static uint64_t round_tag(const link_t *l, int sending, int round)
{
    int sender = sending ? g_rank : l->peer, receiver = sending ? l->peer : g_rank;
    return hash4(l->seed, (uint64_t)round, (uint64_t)sender * 65537 + (uint64_t)receiver,
                 (uint64_t)l->index);
}

static int take_signal(const plan_t *p, link_t *l, const char *what, int round)
{
    gpuport_status_t status;
    uint64_t start;
    int ready = 0;

    if (!p->poll) {
        status = gpuport_channel_wait(l->ch);
        REQUIRE(status == GPUPORT_OK, "waiting for the %s of rank %d (channel #%d), round %d: %s",
                what, l->peer, l->index, round, gpuport_status_string(status));
        g_stats.signals++;
        return 0;
    }
    start = now_ns();
    while (!ready) {
        status = gpuport_channel_poll(l->ch, &ready);
        REQUIRE(status == GPUPORT_OK, "polling for the %s of rank %d (channel #%d), round %d: %s",
                what, l->peer, l->index, round, gpuport_status_string(status));
        REQUIRE(ready || now_ns() - start < POLL_LIMIT_NS,
                "no %s from rank %d (channel #%d) in round %d after %llu s", what, l->peer,
                l->index, round, POLL_LIMIT_NS / 1000000000ull);
        if (!ready)
            sched_yield();
    }
    g_stats.signals++;
    return 0;
}

static int issue_put(link_t *l, const batch_t *b, int j)
{
    const op_t *o = &b->ops[j];

    if (j == b->n - 1 && b->mode == MODE_PUT_SIGNAL)
        REQUIRE_OK(gpuport_channel_put_with_signal(l->ch, o->dst_off, o->src_off, o->size));
    else
        REQUIRE_OK(gpuport_channel_put(l->ch, o->dst_off, o->src_off, o->size));
    g_stats.puts++;
    g_stats.bytes += o->size;
    return 0;
}

static int finish_batch(link_t *l, const batch_t *b)
{
    if (b->mode == MODE_FLUSH_GARBAGE) {
        /* Flush done: the sources are ours again, and what we write now must
         * not reach the peer. Fast, and tails first: a copy still running
         * forwards would read garbage. */
        REQUIRE_OK(gpuport_channel_flush(l->ch));
        for (int j = 0; j < b->n; j++) {
            const op_t *o = &b->ops[j];
            uint64_t tail = o->size < 4096 ? o->size : 4096;
            memset(l->src.ptr + o->src_off + o->size - tail, GARBAGE, tail);
        }
        for (int j = 0; j < b->n; j++)
            memset(l->src.ptr + b->ops[j].src_off, GARBAGE, b->ops[j].size);
    }
    if (b->mode != MODE_PUT_SIGNAL)
        REQUIRE_OK(gpuport_channel_signal(l->ch));
    return 0;
}

/* First difference between the destination and its shadow, with the put of
 * this round that should have written it (the last one covering it). */
static int report_mismatch(const link_t *l, const batch_t *b, int round, uint64_t size)
{
    uint64_t i = 0, ndiff = 0;
    int by = -1;

    while (l->dst.ptr[i] == l->shadow[i])
        i++;
    for (uint64_t k = i; k < size; k++)
        ndiff += l->dst.ptr[k] != l->shadow[k];
    for (int j = 0; j < b->n; j++)
        if (i >= b->ops[j].dst_off && i - b->ops[j].dst_off < b->ops[j].size)
            by = j;
    if (by < 0)
        return fail_at(__FILE__, __LINE__, "destination == shadow",
                       "channel from rank %d (#%d), round %d: byte %" PRIu64 " is 0x%02x, "
                       "expected 0x%02x, outside the %d put(s) of this round (%" PRIu64
                       " bytes differ)",
                       l->peer, l->index, round, i, l->dst.ptr[i], l->shadow[i], b->n, ndiff);
    return fail_at(__FILE__, __LINE__, "destination == shadow",
                   "channel from rank %d (#%d), round %d, mode %d: byte %" PRIu64
                   " is 0x%02x, expected 0x%02x, from put %d of %d (dst_off %" PRIu64
                   ", src_off %" PRIu64 ", %" PRIu64 " bytes); %" PRIu64 " bytes differ",
                   l->peer, l->index, round, b->mode, i, l->dst.ptr[i], l->shadow[i], by + 1,
                   b->n, b->ops[by].dst_off, b->ops[by].src_off, b->ops[by].size, ndiff);
}

/* What destination byte pos must hold after batch b: the last put covering
 * it, else what it held before. */
static unsigned char expected_at(const link_t *l, const batch_t *b, uint64_t tag, uint64_t pos)
{
    unsigned char v = l->shadow[pos];
    for (int j = 0; j < b->n; j++)
        if (pos >= b->ops[j].dst_off && pos - b->ops[j].dst_off < b->ops[j].size)
            v = pattern(tag, b->ops[j].src_off + pos - b->ops[j].dst_off);
    return v;
}

/* Right after the signal, before the slow full comparison gives a copy
 * still in flight time to finish: the first and last byte of every put. */
static int probe_ends(const link_t *l, const batch_t *b, uint64_t tag, int round)
{
    for (int j = 0; j < b->n; j++) {
        const op_t *o = &b->ops[j];
        for (uint64_t pos = o->dst_off; pos < o->dst_off + o->size; pos += o->size - 1) {
            unsigned char want = expected_at(l, b, tag, pos);
            REQUIRE(l->dst.ptr[pos] == want,
                    "channel from rank %d (#%d), round %d, mode %d: when the signal came, "
                    "byte %" PRIu64 " (%s of put %d of %d, %" PRIu64 " bytes) was 0x%02x, "
                    "expected 0x%02x",
                    l->peer, l->index, round, b->mode, pos, pos == o->dst_off ? "first" : "last",
                    j + 1, b->n, o->size, l->dst.ptr[pos], want);
            if (o->size == 1)
                break;
        }
    }
    return 0;
}

/* The peer's batch has been signalled: everything it put must be there. */
static int receive_batch(const plan_t *p, link_t *l, uint64_t region, int round)
{
    batch_t b;
    uint64_t tag = round_tag(l, 0, round);

    TRY(take_signal(p, l, "data signal", round));
    draw_batch(&l->rx, p, region, &b);
    TRY(probe_ends(l, &b, tag, round));
    for (int j = 0; j < b.n; j++)
        for (uint64_t t = 0; t < b.ops[j].size; t++)
            l->shadow[b.ops[j].dst_off + t] = pattern(tag, b.ops[j].src_off + t);
    if (memcmp(l->dst.ptr, l->shadow, region) != 0)
        return report_mismatch(l, &b, round, region);
    TRY(guards_intact(l, &l->dst));
    g_stats.verified += region;
    /* the ack: the peer may write this destination again */
    REQUIRE_OK(gpuport_channel_signal(l->ch));
    return 0;
}

/* One round on every channel: send phase (sources filled, puts interleaved
 * across channels, then each batch's signal), receive phase (wait, verify,
 * ack), ack phase (wait for the peer's ack, flush so sources are reusable). */
static int run_round(linkset_t *ls, const plan_t *p, int round, batch_t *sent)
{
    uint64_t region = ls->lay.size;

    for (int i = 0; i < ls->n; i++) {
        link_t *l = &ls->links[i];
        if (!l->src.size)
            continue;
        draw_batch(&l->tx, p, region, &sent[i]);
        for (int j = 0; j < sent[i].n; j++)
            fill(l->src.ptr, sent[i].ops[j].src_off, sent[i].ops[j].size,
                 round_tag(l, 1, round));
    }
    for (int j = 0; j < MAX_PUTS; j++)
        for (int i = 0; i < ls->n; i++)
            if (ls->links[i].src.size && j < sent[i].n)
                TRY(issue_put(&ls->links[i], &sent[i], j));
    for (int i = 0; i < ls->n; i++)
        if (ls->links[i].src.size)
            TRY(finish_batch(&ls->links[i], &sent[i]));
    for (int i = 0; i < ls->n; i++)
        if (ls->links[i].dst.size)
            TRY(receive_batch(p, &ls->links[i], region, round));
    for (int i = 0; i < ls->n; i++) {
        if (!ls->links[i].src.size)
            continue;
        TRY(take_signal(p, &ls->links[i], "ack", round));
        REQUIRE_OK(gpuport_channel_flush(ls->links[i].ch));
    }
    return 0;
}

static int run_plan(linkset_t *ls, const plan_t *p)
{
    batch_t *sent = calloc((size_t)ls->n + 1, sizeof(*sent));
    int rc = 0;

    REQUIRE(sent != NULL, "calloc of %d batches", ls->n);
    for (int r = 0; r < p->rounds && rc == 0; r++)
        rc = run_round(ls, p, ls->rounds++, sent);
    free(sent);
    return rc;
}

/* A communicator under `env`, channels as `lay`, then every plan in turn. */
static int run_traffic(const char *const *env, const layout_t *lay, const plan_t *plans,
                       int nplans)
{
    gpuport_comm_t comm;
    linkset_t ls;

    TRY(comm_open(env, &comm));
    TRY(linkset_open(comm, lay, &ls));
    for (int i = 0; i < nplans; i++)
        TRY(run_plan(&ls, &plans[i]));
    TRY(linkset_close(&ls));
    REQUIRE_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* --- scenarios --- */

static const layout_t pairs_2m = {.size = 2 * MIB, .shared = 1, .per_pair = 1, .self = 1,
                                  .seed = 1};

static int sc_all_pairs(void)
{
    const plan_t p = {.rounds = 100, .max_puts = 1, .modes = MODE_SIGNAL | MODE_PUT_SIGNAL,
                      .big_pct = 10};
    return run_traffic(NULL, &pairs_2m, &p, 1);
}

static int sc_signal_after_data(void)
{
    const plan_t p[] = {
        {.rounds = 25, .max_puts = MAX_PUTS, .modes = MODE_SIGNAL, .big_pct = 8},
        {.rounds = 25, .max_puts = MAX_PUTS, .modes = MODE_PUT_SIGNAL, .big_pct = 8},
        {.rounds = 30, .max_puts = 1, .modes = MODE_PUT_SIGNAL, .big_pct = 25},
    };
    layout_t lay = pairs_2m;
    lay.seed = 2;
    return run_traffic(NULL, &lay, p, 3);
}

static int sc_flush(void)
{
    const plan_t p = {.rounds = 30, .max_puts = 4, .modes = MODE_FLUSH_GARBAGE, .big_pct = 30};
    layout_t lay = pairs_2m;
    lay.seed = 3;
    return run_traffic(NULL, &lay, &p, 1);
}

static int sc_many_channels(void)
{
    static const char *const env[] = {"GPUPORT_FIFO_SIZE", "16", NULL};
    const layout_t lay = {.size = ASYNC_MIN, .shared = 1, .per_pair = 16, .oneway = 1,
                          .seed = 4};
    const plan_t p = {.rounds = 20, .max_puts = 4, .modes = 7, .big_pct = 10};
    return run_traffic(env, &lay, &p, 1);
}

static int sc_malloc_vs_alloc(void)
{
    const plan_t p = {.rounds = 30, .max_puts = 2, .modes = 7, .big_pct = 15};
    layout_t lay = {.size = 1 * MIB, .per_pair = 1, .self = 1, .seed = 6};

    TRY(run_traffic(NULL, &lay, &p, 1)); /* malloc: peers write by CMA */
    lay.shared = 1;
    return run_traffic(NULL, &lay, &p, 1);
}

/* After every sender flushed: no signal is left to take on any channel. */
static int no_signal_left(linkset_t *ls)
{
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < ls->n; i++) {
        int ready = -1;
        REQUIRE_OK(gpuport_channel_poll(ls->links[i].ch, &ready));
        REQUIRE(ready == 0, "channel to rank %d (#%d) has a signal nobody sent (ready=%d)",
                ls->links[i].peer, ls->links[i].index, ready);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

static int refused_puts(link_t *l, uint64_t s)
{
    const op_t none[] = {{0, 0, 1}}; /* no source on this side: nothing fits */
    const op_t bad[] = {
        {s - 8, 0, 16},                  /* past the destination */
        {0, s - 8, 16},                  /* past the source */
        {0, 0, s + 1},                   /* larger than both */
        {s, 0, 1},                       /* starts at the end */
        {1ull << 40, 0, 1},              /* would need an EXT trigger */
        {UINT64_MAX, 0, 2},              /* offset + size wraps */
        {0, UINT64_MAX, 2},
        {UINT64_MAX - 7, 0, 16},
        {0, UINT64_MAX - 7, 16},
        {16, 0, UINT64_MAX - 15},        /* size wraps the offset to 0 */
        {0, 16, UINT64_MAX - 15},
        {0, 0, UINT64_MAX},
    };
    size_t n = l->src.size ? sizeof(bad) / sizeof(bad[0]) : 1;

    for (size_t k = 0; k < n; k++) {
        const op_t *o = l->src.size ? &bad[k] : &none[k];
        gpuport_status_t a = gpuport_channel_put(l->ch, o->dst_off, o->src_off, o->size);
        gpuport_status_t b = gpuport_channel_put_with_signal(l->ch, o->dst_off, o->src_off,
                                                             o->size);
        REQUIRE(a == GPUPORT_ERR_OUT_OF_RANGE && b == GPUPORT_ERR_OUT_OF_RANGE,
                "put(dst_off %" PRIu64 ", src_off %" PRIu64 ", size %" PRIu64 ") to rank %d "
                "over %" PRIu64 "-byte regions: put %s, put_with_signal %s, expected %s",
                o->dst_off, o->src_off, o->size, l->peer, s, gpuport_status_string(a),
                gpuport_status_string(b), gpuport_status_string(GPUPORT_ERR_OUT_OF_RANGE));
        REQUIRE_OK(gpuport_channel_status(l->ch));
    }
    return 0;
}

static int sc_out_of_range(void)
{
    const uint64_t s = 512 * KIB;
    /* after the refusals: the last byte, then everything else shifted by
     * one, in a put_with_signal through the flusher */
    const batch_t edges = {.n = 2, .mode = MODE_PUT_SIGNAL,
                           .ops = {{s - 1, 0, 1}, {0, 1, s - 1}}};
    const plan_t p = {.rounds = 2, .fixed = &edges};
    /* malloc and shared destinations, and one-way channels */
    const layout_t lays[] = {
        {.size = s, .shared = 0, .per_pair = 1, .self = 1, .seed = 5},
        {.size = s, .shared = 1, .per_pair = 1, .self = 1, .seed = 5},
        {.size = s, .shared = 1, .per_pair = 2, .oneway = 1, .seed = 5},
    };
    static const char *const quiet[] = {"GPUPORT_LOG_LEVEL", "none", NULL};
    gpuport_comm_t comm;
    linkset_t ls;

    TRY(comm_open(quiet, &comm)); /* every refusal is logged */
    for (int k = 0; k < 3; k++) {
        TRY(linkset_open(comm, &lays[k], &ls));
        for (int i = 0; i < ls.n; i++)
            TRY(refused_puts(&ls.links[i], s));
        TRY(run_plan(&ls, &p)); /* checks the guards and that nothing else landed */
        TRY(no_signal_left(&ls));
        TRY(linkset_close(&ls));
    }
    REQUIRE_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* Every channel sends a drawn number of signals; each
 * receiver polls until it has taken exactly that many. */
static int poll_counts(linkset_t *ls)
{
    for (int i = 0; i < ls->n; i++) {
        link_t *l = &ls->links[i];
        uint64_t n = 1 + rng_below(&l->tx, 40);
        for (uint64_t k = 0; k < n; k++) {
            /* a put_with_signal of no bytes is a signal (and keeps dst as
             * the shadow says) */
            if (k & 1)
                REQUIRE_OK(gpuport_channel_put_with_signal(l->ch, k, k, 0));
            else
                REQUIRE_OK(gpuport_channel_signal(l->ch));
        }
        REQUIRE_OK(gpuport_channel_flush(l->ch));
    }
    for (int i = 0; i < ls->n; i++) {
        link_t *l = &ls->links[i];
        uint64_t n = 1 + rng_below(&l->rx, 40), got = 0, start = now_ns();
        while (got < n) {
            int ready = -1;
            REQUIRE_OK(gpuport_channel_poll(l->ch, &ready));
            REQUIRE(ready == 0 || ready == 1, "poll set ready to %d", ready);
            got += (uint64_t)ready;
            REQUIRE(now_ns() - start < POLL_LIMIT_NS,
                    "rank %d sent %" PRIu64 " signals, %" PRIu64 " polled after %llu s",
                    l->peer, n, got, POLL_LIMIT_NS / 1000000000ull);
            if (!ready)
                sched_yield();
        }
        g_stats.signals += got;
    }
    return no_signal_left(ls);
}

static int sc_poll(void)
{
    const layout_t lay = {.size = ASYNC_MIN, .shared = 1, .per_pair = 1, .self = 1,
                          .seed = 7};
    const plan_t p = {.rounds = 30, .max_puts = 3, .modes = 7, .big_pct = 20, .poll = 1};
    gpuport_comm_t comm;
    linkset_t ls;

    TRY(comm_open(NULL, &comm));
    TRY(linkset_open(comm, &lay, &ls));
    TRY(no_signal_left(&ls));
    TRY(poll_counts(&ls));
    TRY(run_plan(&ls, &p));
    TRY(no_signal_left(&ls));
    TRY(poll_counts(&ls));
    TRY(linkset_close(&ls));
    REQUIRE_OK(gpuport_comm_destroy(comm));
    return 0;
}

static int status_in(gpuport_status_t s, gpuport_status_t a, gpuport_status_t b)
{
    return s == a || s == b;
}

/* Channel creation to every other rank must fail with `want` or `also` on
 * both sides, without writing the handle; to this rank it must `self_ok`. */
static int creation_fails(const char *const *env, gpuport_status_t want, gpuport_status_t also,
                          int self_ok)
{
    gpuport_comm_t comm;
    gpuport_mem_t mem;
    void *buf;
    gpuport_channel_t ch;

    TRY(comm_open(env, &comm));
    REQUIRE_OK(gpuport_mem_alloc(comm, 4096, &buf));
    REQUIRE_OK(gpuport_mem_register(comm, buf, 4096, &mem));
    for (int r = 0; r <= tournament_rounds(); r++) {
        int peer = r < tournament_rounds() ? tournament_partner(r) : g_rank;
        gpuport_status_t s;
        if (peer < 0)
            continue;
        ch = NULL;
        s = gpuport_channel_create(comm, peer, mem, mem, &ch);
        if (peer == g_rank && self_ok) {
            REQUIRE(s == GPUPORT_OK && ch, "channel to self: %s", gpuport_status_string(s));
            memset(buf, 0, 4096);
            fill(buf, 0, 1024, 99);
            REQUIRE_OK(gpuport_channel_put_with_signal(ch, 2048, 0, 1024));
            REQUIRE_OK(gpuport_channel_wait(ch));
            for (int i = 0; i < 1024; i++)
                REQUIRE(((unsigned char *)buf)[2048 + i] == pattern(99, (uint64_t)i),
                        "channel to self: byte %d", i);
            REQUIRE_OK(gpuport_channel_destroy(ch));
            continue;
        }
        REQUIRE(status_in(s, want, also),
                "channel to rank %d: gpuport_channel_create returned %d (%s), expected %s or %s",
                peer, (int)s, gpuport_status_string(s), gpuport_status_string(want),
                gpuport_status_string(also));
        REQUIRE(ch == NULL, "failed gpuport_channel_create wrote its output argument");
    }
    REQUIRE_OK(gpuport_mem_deregister(mem));
    REQUIRE_OK(gpuport_mem_free(comm, buf));
    REQUIRE_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* creation_fails with what this rank logs kept in text */
static int creation_fails_logged(const char *const *env, gpuport_status_t want,
                                 gpuport_status_t also, char *text, size_t len)
{
    FILE *f = tmpfile();
    int saved, rc;
    size_t n;

    REQUIRE(f != NULL, "tmpfile failed");
    fflush(stderr);
    saved = dup(STDERR_FILENO);
    REQUIRE(saved >= 0 && dup2(fileno(f), STDERR_FILENO) == STDERR_FILENO, "dup2 failed");
    rc = creation_fails(env, want, also, 0);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(f);
    n = fread(text, 1, len - 1, f);
    text[n] = '\0';
    fclose(f);
    if (rc)
        fputs(text, stderr); /* the failed check's own message */
    return rc;
}

/* an RDMA device on this host (what the ib transport needs) */
static int rdma_present(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0;
}

static int sc_transport_forced(void)
{
    static const char *const shm[] = {"GPUPORT_TRANSPORT", "shm", NULL};
    static const char *const shm_quiet[] = {"GPUPORT_TRANSPORT", "shm", "GPUPORT_LOG_LEVEL",
                                            "none", NULL};
    static const char *const tcp[] = {"GPUPORT_TRANSPORT", "tcp", NULL};
    static const char *const ib_quiet[] = {"GPUPORT_TRANSPORT", "ib", "GPUPORT_LOG_LEVEL",
                                           "none", NULL};
    static const char *const ib_logged[] = {"GPUPORT_TRANSPORT", "ib", "GPUPORT_LOG_LEVEL",
                                            "error", NULL};
    static char text[16384];
    char host[32];
    const char *const other_hosts[] = {"GPUPORT_TRANSPORT", "auto", "GPUPORT_HOST_ID", host,
                                       NULL};
    const plan_t p = {.rounds = 20, .max_puts = 3, .modes = 7, .big_pct = 15};
    layout_t lay = pairs_2m;
    const char *saved_remote = g_remote;
    int rc;

    lay.size = 1 * MIB;
    lay.seed = 8;
    if (g_remote_hosts) {
        /* shm cannot reach another host: refused on both sides (with more
         * ranks, some partners share a host and the check needs 2) */
        if (g_size == 2)
            TRY(creation_fails(shm_quiet, GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_PEER, 1));
    } else {
        g_forced = "shm";
        rc = run_traffic(shm, &lay, &p, 1);
        g_forced = NULL;
        TRY(rc);
    }
    /* tcp forced: every channel, to this rank itself too */
    g_forced = "tcp";
    rc = run_traffic(tcp, &lay, &p, 1);
    g_forced = NULL;
    TRY(rc);
    /* ib: where an RDMA device exists (every rank of a node has the same
     * devices) forced ib must work; elsewhere it is refused by every rank,
     * never a hang or a half-made channel */
    if (rdma_present()) {
        static const char *const ib[] = {"GPUPORT_TRANSPORT", "ib", NULL};
        g_forced = "ib";
        rc = run_traffic(ib, &lay, &p, 1);
        g_forced = NULL;
        TRY(rc);
    } else if (g_rank != 0) {
        TRY(creation_fails(ib_quiet, GPUPORT_ERR_NOT_SUPPORTED, GPUPORT_ERR_NOT_SUPPORTED, 0));
    } else {
        TRY(creation_fails_logged(ib_logged, GPUPORT_ERR_NOT_SUPPORTED,
                                  GPUPORT_ERR_NOT_SUPPORTED, text, sizeof(text)));
#if GPUPORT_HAVE_IBVERBS
        REQUIRE(strstr(text, "GPUPORT_TRANSPORT=ib") && strstr(text, "no RDMA device was found"),
                "forced ib: the log does not say why: %s", text);
#else
        REQUIRE(strstr(text, "GPUPORT_TRANSPORT=ib is not available in this build"),
                "forced ib: the log does not say why: %s", text);
#endif
    }
    /* distinct host ids: auto picks tcp between ranks, shm to this rank */
    snprintf(host, sizeof(host), "%x", g_rank + 1);
    g_remote = "tcp";
    g_forced = "";
    g_hostid_per_rank = 1;
    rc = run_traffic(other_hosts, &lay, &p, 1);
    g_hostid_per_rank = 0;
    g_forced = NULL;
    g_remote = saved_remote;
    return rc;
}

static int sc_bad_config(void)
{
    static const char *const bad[][5] = {
        {"GPUPORT_FIFO_SIZE", "1000", "GPUPORT_LOG_LEVEL", "none", NULL},
        {"GPUPORT_FIFO_SIZE", "2", "GPUPORT_LOG_LEVEL", "none", NULL},
        {"GPUPORT_TRANSPORT", "carrier-pigeon", "GPUPORT_LOG_LEVEL", "none", NULL},
        {"GPUPORT_TIMEOUT_MS", "soon", "GPUPORT_LOG_LEVEL", "none", NULL},
        {"GPUPORT_HOST_ID", "xyz", "GPUPORT_LOG_LEVEL", "none", NULL},
    };
    gpuport_comm_t comm;

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        comm = NULL;
        REQUIRE(comm_init_env(bad[k], &comm) == GPUPORT_ERR_INVALID_CONFIG && comm == NULL,
                "%s=%s did not fail gpuport_comm_init_mpi with %s", bad[k][0], bad[k][1],
                gpuport_status_string(GPUPORT_ERR_INVALID_CONFIG));
    }
    /* nothing of the failed attempts is left in the way */
    TRY(comm_open(NULL, &comm));
    REQUIRE_OK(gpuport_comm_destroy(comm));
    return 0;
}

/* --- driver --- */

typedef struct scenario {
    const char *name;
    int (*run)(void);
    const char *what;
} scenario_t;

static const scenario_t scenarios[] = {
    {"all-pairs", sc_all_pairs, "every pair both ways + self, 1 B..2 MiB at random offsets"},
    {"signal-after-data", sc_signal_after_data,
     "1..16 puts then signal / put_with_signal; all data there at wait"},
    {"flush", sc_flush, "sources garbled after flush never reach the peer"},
    {"many-channels", sc_many_channels, "FIFO of 16, 8 channels each way per pair, interleaved"},
    {"out-of-range", sc_out_of_range,
     "bad ranges refused by put and put_with_signal, guards intact, channel usable"},
    {"malloc-vs-alloc", sc_malloc_vs_alloc, "destinations from malloc (CMA) and gpuport_mem_alloc"},
    {"poll", sc_poll, "poll takes exactly the signals sent, then ready=0"},
    {"transport-forced", sc_transport_forced,
     "shm and tcp forced work, ib fails on both sides, distinct host ids pick tcp"},
    {"bad-config", sc_bad_config, "5 invalid GPUPORT_* values fail init on every rank"},
};
#define NSCENARIOS ((int)(sizeof(scenarios) / sizeof(scenarios[0])))

/* MIN of every rank's flag; a rank stuck in a scenario must not hang the
 * others forever, so after AGREE_LIMIT_S the job is aborted. */
static int all_passed(int ok)
{
    MPI_Request req;
    int all = 0, done = 0;
    double start = MPI_Wtime();
    struct timespec ms = {0, 1000000};

    MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done && MPI_Wtime() - start > AGREE_LIMIT_S) {
            fprintf(stderr, "rank %d: other ranks did not finish the scenario within %.0f s; "
                    "aborting\n", g_rank, AGREE_LIMIT_S);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (!done)
            nanosleep(&ms, NULL);
    }
    return all;
}

static int selected(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != '\0'))
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

static int usage(const char *argv0, int rc)
{
    if (g_rank == 0) {
        fprintf(rc ? stderr : stdout, "usage: %s [-l] [-s NAME[,NAME...]]\nscenarios:\n",
                argv0);
        for (int i = 0; i < NSCENARIOS; i++)
            fprintf(rc ? stderr : stdout, "  %-18s %s\n", scenarios[i].name, scenarios[i].what);
    }
    MPI_Finalize();
    return rc;
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    int opt, nrun = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    while ((opt = getopt(argc, argv, "ls:h")) != -1) {
        if (opt == 's')
            only = optarg;
        else
            return usage(argv[0], opt == 'l' || opt == 'h' ? 0 : 2);
    }
    for (int i = 0; only && i < NSCENARIOS; i++)
        nrun += selected(only, scenarios[i].name);
    if (only && nrun == 0)
        return usage(argv[0], 2);
    setenv("GPUPORT_TIMEOUT_MS", TIMEOUT_MS, 0);
    g_hosts = calloc((size_t)g_size, sizeof(*g_hosts));
    if (!g_hosts)
        MPI_Abort(MPI_COMM_WORLD, 1);
    gethostname(g_hosts[g_rank], sizeof(g_hosts[0]) - 1);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g_hosts, sizeof(g_hosts[0]), MPI_CHAR,
                  MPI_COMM_WORLD);
    if (getenv("GPUPORT_TEST_REMOTE_TRANSPORT") && strcmp(getenv("GPUPORT_TEST_REMOTE_TRANSPORT"),
                                                          "shm") != 0) {
        g_remote = getenv("GPUPORT_TEST_REMOTE_TRANSPORT");
        for (int r = 0; r < g_size; r++)
            g_remote_hosts |= !same_host(r);
    }

    for (int i = 0; i < NSCENARIOS; i++) {
        const scenario_t *sc = &scenarios[i];
        struct stats sum;
        double t0 = MPI_Wtime();
        int ok;

        if (only && !selected(only, sc->name))
            continue;
        memset(&g_stats, 0, sizeof(g_stats));
        ok = sc->run() == 0;
        if (!ok)
            fprintf(stderr, "rank %d: FAIL %s\n", g_rank, sc->name);
        if (!all_passed(ok)) {
            if (g_rank == 0)
                printf("FAIL %s: a check failed on at least one rank (see above)\n", sc->name);
            fflush(stdout);
            MPI_Finalize();
            return 1;
        }
        MPI_Reduce(&g_stats, &sum, 5, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (g_rank == 0)
            printf("PASS %s: %s; %d ranks, %llu channel ends, %llu puts (%.1f MiB), %llu signals "
                   "taken, %.1f MiB verified (%.2f s)\n",
                   sc->name, sc->what, g_size, sum.channels, sum.puts,
                   (double)sum.bytes / MIB, sum.signals, (double)sum.verified / MIB,
                   MPI_Wtime() - t0);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
