/* Checked traffic over channels between every pair of ranks; see traffic.h. */
#include "traffic.h"

#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "internal.h"

#define GUARD 4160             /* guard bytes each side; not a page multiple on purpose */
#define GUARD_BYTE 0xa5
#define GARBAGE 0x5a           /* what a sender writes over its flushed sources */

/* --- the transport every channel must use --- */

const char *g_forced;
const char *g_remote = "shm";
int g_remote_hosts;
int g_ranks_per_host;
static char (*g_hosts)[64]; /* every rank's host name, by rank */

void (*traffic_after_signal)(link_t *l, const batch_t *b, int round);

static int same_host(int peer)
{
    if (g_ranks_per_host > 0)
        return peer / g_ranks_per_host == g_rank / g_ranks_per_host;
    return strcmp(g_hosts[peer], g_hosts[g_rank]) == 0;
}

void traffic_init(void)
{
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
}

const char *expected_transport(int peer)
{
    const char *env = getenv("GPUPORT_TRANSPORT");

    if (g_forced && g_forced[0])
        return g_forced;
    if (!g_forced && env && strcmp(env, "auto") != 0)
        return env;
    return same_host(peer) ? "shm" : g_remote;
}

/* --- regions and links --- */

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
    const char *what = r == &l->src ? "source" : "destination";

    if (!r->size)
        return 0;
    for (int side = 0; side < 2; side++) {
        const unsigned char *g = side ? r->ptr + r->size : r->ptr - GUARD;
        for (int i = 0; i < GUARD; i++)
            REQUIRE(g[i] == GUARD_BYTE,
                    "channel to rank %d (#%d): guard byte %d %s the %s is 0x%02x",
                    l->peer, l->index, side ? i : GUARD - i, side ? "after" : "before", what,
                    g[i]);
    }
    return 0;
}

int linkset_guards_intact(const linkset_t *ls)
{
    for (int i = 0; i < ls->n; i++) {
        TRY(guards_intact(&ls->links[i], &ls->links[i].src));
        TRY(guards_intact(&ls->links[i], &ls->links[i].dst));
    }
    return 0;
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

int linkset_open(gpuport_comm_t comm, const layout_t *lay, linkset_t *ls)
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

int linkset_close(linkset_t *ls)
{
    /* every side healthy before any side closes: a peer's destroy fails
     * this side's channel (its later operations must not succeed) */
    for (int i = 0; i < ls->n; i++)
        REQUIRE_OK(gpuport_channel_status(ls->links[i].ch));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < ls->n; i++) {
        link_t *l = &ls->links[i];
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
        b->is_value[j] = p->value_pct > 0 && rng_below(r, 100) < (uint64_t)p->value_pct;
        b->value[j] = b->is_value[j] ? rng_next(r) : 0;
        if (b->is_value[j]) {
            o->size = 8;
            o->dst_off = draw_offset(r, region / 8, 1) * 8;
            o->src_off = 0;
            continue;
        }
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
    start = harness_now_ns();
    while (!ready) {
        status = gpuport_channel_poll(l->ch, &ready);
        REQUIRE(status == GPUPORT_OK, "polling for the %s of rank %d (channel #%d), round %d: %s",
                what, l->peer, l->index, round, gpuport_status_string(status));
        REQUIRE(ready || harness_now_ns() - start < POLL_LIMIT_NS,
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

    if (b->is_value[j] && j == b->n - 1 && b->mode == MODE_PUT_SIGNAL)
        REQUIRE_OK(gpuport_channel_put_value_with_signal(l->ch, o->dst_off, b->value[j]));
    else if (b->is_value[j])
        REQUIRE_OK(gpuport_channel_put_value(l->ch, o->dst_off, b->value[j]));
    else if (j == b->n - 1 && b->mode == MODE_PUT_SIGNAL)
        REQUIRE_OK(gpuport_channel_put_with_signal(l->ch, o->dst_off, o->src_off, o->size));
    else
        REQUIRE_OK(gpuport_channel_put(l->ch, o->dst_off, o->src_off, o->size));
    g_stats.puts++;
    g_stats.bytes += o->size;
    return 0;
}

/* Flush done: the sources are ours again, and what we write now must not
 * reach the peer. Fast, and tails first: a copy still running forwards
 * would read garbage. With `whole`, the rest of the region too. */
static void scribble(link_t *l, const batch_t *b, int whole)
{
    for (int j = 0; j < b->n; j++) {
        const op_t *o = &b->ops[j];
        uint64_t tail = o->size < 4096 ? o->size : 4096;
        if (!b->is_value[j])
            memset(l->src.ptr + o->src_off + o->size - tail, GARBAGE, tail);
    }
    for (int j = 0; j < b->n; j++)
        if (!b->is_value[j])
            memset(l->src.ptr + b->ops[j].src_off, GARBAGE, b->ops[j].size);
    if (whole)
        memset(l->src.ptr, GARBAGE, l->src.size);
}

static int finish_batch(const plan_t *p, link_t *l, const batch_t *b)
{
    if (b->mode == MODE_FLUSH_GARBAGE) {
        REQUIRE_OK(gpuport_channel_flush(l->ch));
        scribble(l, b, p->scribble);
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
                   " is 0x%02x, expected 0x%02x, from %s %d of %d (dst_off %" PRIu64
                   ", src_off %" PRIu64 ", %" PRIu64 " bytes); %" PRIu64 " bytes differ",
                   l->peer, l->index, round, b->mode, i, l->dst.ptr[i], l->shadow[i],
                   b->is_value[by] ? "put_value" : "put", by + 1, b->n, b->ops[by].dst_off,
                   b->ops[by].src_off, b->ops[by].size, ndiff);
}

/* Byte k of what operation j of b writes. */
static unsigned char op_byte(const batch_t *b, int j, uint64_t tag, uint64_t k)
{
    if (b->is_value[j])
        return ((const unsigned char *)&b->value[j])[k];
    return pattern(tag, b->ops[j].src_off + k);
}

/* What destination byte pos must hold after batch b: the last put covering
 * it, else what it held before. */
static unsigned char expected_at(const link_t *l, const batch_t *b, uint64_t tag, uint64_t pos)
{
    unsigned char v = l->shadow[pos];
    for (int j = 0; j < b->n; j++)
        if (pos >= b->ops[j].dst_off && pos - b->ops[j].dst_off < b->ops[j].size)
            v = op_byte(b, j, tag, pos - b->ops[j].dst_off);
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
    if (traffic_after_signal)
        traffic_after_signal(l, &b, round);
    TRY(probe_ends(l, &b, tag, round));
    for (int j = 0; j < b.n; j++)
        for (uint64_t t = 0; t < b.ops[j].size; t++)
            l->shadow[b.ops[j].dst_off + t] = op_byte(&b, j, tag, t);
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
 * ack), ack phase (wait for the peer's ack, flush so sources are reusable),
 * then every guard of this rank's regions. */
static int run_round(linkset_t *ls, const plan_t *p, int round, batch_t *sent)
{
    uint64_t region = ls->lay.size;

    for (int i = 0; i < ls->n; i++) {
        link_t *l = &ls->links[i];
        if (!l->src.size)
            continue;
        draw_batch(&l->tx, p, region, &sent[i]);
        for (int j = 0; j < sent[i].n; j++)
            if (!sent[i].is_value[j])
                fill(l->src.ptr, sent[i].ops[j].src_off, sent[i].ops[j].size,
                     round_tag(l, 1, round));
    }
    for (int j = 0; j < MAX_PUTS; j++)
        for (int i = 0; i < ls->n; i++)
            if (ls->links[i].src.size && j < sent[i].n)
                TRY(issue_put(&ls->links[i], &sent[i], j));
    for (int i = 0; i < ls->n; i++)
        if (ls->links[i].src.size)
            TRY(finish_batch(p, &ls->links[i], &sent[i]));
    for (int i = 0; i < ls->n; i++)
        if (ls->links[i].dst.size)
            TRY(receive_batch(p, &ls->links[i], region, round));
    for (int i = 0; i < ls->n; i++) {
        if (!ls->links[i].src.size)
            continue;
        TRY(take_signal(p, &ls->links[i], "ack", round));
        REQUIRE_OK(gpuport_channel_flush(ls->links[i].ch));
        if (p->scribble)
            scribble(&ls->links[i], &sent[i], 1);
    }
    return linkset_guards_intact(ls);
}

int linkset_at_rest(const linkset_t *ls)
{
    for (int i = 0; i < ls->n; i++) {
        const link_t *l = &ls->links[i];
        if (l->dst.size == 0 || memcmp(l->dst.ptr, l->shadow, l->dst.size) == 0)
            continue;
        for (uint64_t k = 0; k < l->dst.size; k++)
            REQUIRE(l->dst.ptr[k] == l->shadow[k],
                    "channel from rank %d (#%d), at rest after %d rounds: byte %" PRIu64
                    " is 0x%02x, expected 0x%02x (a late or stray write)",
                    l->peer, l->index, ls->rounds, k, l->dst.ptr[k], l->shadow[k]);
    }
    return linkset_guards_intact(ls);
}

int run_plan(linkset_t *ls, const plan_t *p)
{
    batch_t *sent = calloc((size_t)ls->n + 1, sizeof(*sent));
    int rc = 0;

    REQUIRE(sent != NULL, "calloc of %d batches", ls->n);
    for (int r = 0; r < p->rounds && rc == 0; r++)
        rc = run_round(ls, p, ls->rounds++, sent);
    free(sent);
    return rc;
}

int run_traffic(const char *const *env, const layout_t *lay, const plan_t *plans, int nplans)
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
