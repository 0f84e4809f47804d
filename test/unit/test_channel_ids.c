/*
 * Running out of channel ids, between two processes (fork + socketpair
 * bootstrap), on one host (shm) and with two host identities (tcp):
 *   - both ranks at GPUPORT_MAX_CHANNELS=4: the fifth channel fails on both
 *     with GPUPORT_ERR_NO_RESOURCE and a message naming the limit, again and
 *     again without leaking an id or a connection reference; after one
 *     channel is destroyed, a new one gets its id and carries bytes, and
 *     the next one fails again;
 *   - the limit on one rank only (4 against 8): that rank fails with
 *     GPUPORT_ERR_NO_RESOURCE, its peer with GPUPORT_ERR_PEER naming the
 *     rank, and the peer's id is given back.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "pair_bootstrap.h"
#include "testenv.h"

#define LIMIT 4
#define SLICE 4096 /* channel i writes the peer's bytes [i * SLICE, (i + 1) * SLICE) */
#define REGION (2 * LIMIT * SLICE)

static int g_distinct_hosts; /* 1: each process its own host identity (tcp) */

typedef struct side {
    gpuport_bootstrap_t *bs;
    gpuport_comm_t comm;
    int rank, peer;
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch[LIMIT];
} side_t;

static unsigned char pat(int rank, int gen, uint64_t i)
{
    return (unsigned char)(rank * 89 + gen * 31 + (int)(i * 13 % 251));
}

static void side_open(side_t *s, gpuport_bootstrap_t *bs)
{
    memset(s, 0, sizeof(*s));
    s->bs = bs;
    s->rank = bs->rank;
    s->peer = 1 - bs->rank;
    CHECK_OK(gpuport_comm_create(bs, &s->comm));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->src));
    CHECK_OK(gpuport_mem_alloc(s->comm, REGION, (void **)&s->dst));
    CHECK_OK(gpuport_mem_register(s->comm, s->src, REGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(s->comm, s->dst, REGION, &s->mdst));
}

static gpuport_channel_t create(side_t *s)
{
    gpuport_channel_t ch = NULL;

    CHECK_OK(gpuport_channel_create(s->comm, s->peer, s->msrc, s->mdst, &ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(ch), g_distinct_hosts ? "tcp" : "shm") == 0,
              "transport %s", gpuport_channel_transport(ch));
    return ch;
}

static uint32_t ids_in_use(gpuport_comm_t comm)
{
    uint32_t n = 0;

    pthread_mutex_lock(&comm->lock);
    for (uint32_t i = 0; i < comm->config.max_channels; i++)
        n += comm->id_used[i] != 0;
    pthread_mutex_unlock(&comm->lock);
    return n;
}

static int conn_refs(side_t *s)
{
    int refs;

    pthread_mutex_lock(&s->comm->lock);
    refs = s->comm->conns[s->peer] ? s->comm->conns[s->peer]->refs : -1;
    pthread_mutex_unlock(&s->comm->lock);
    return refs;
}

/* Both ranks: channel ch, which writes the peer's slice `slot`, carries a
 * slice of generation gen each way, compared byte for byte. */
static void traffic(side_t *s, gpuport_channel_t ch, int slot, int gen)
{
    uint64_t off = (uint64_t)slot * SLICE;

    for (uint64_t i = 0; i < SLICE; i++)
        s->src[off + i] = pat(s->rank, gen, i);
    memset(s->dst + off, 0, SLICE);
    CHECK_OK(s->bs->barrier(s->bs->ctx)); /* both slices cleared before either put */
    CHECK_OK(gpuport_channel_put_with_signal(ch, off, off, SLICE));
    CHECK_OK(gpuport_channel_wait(ch));
    for (uint64_t i = 0; i < SLICE; i++)
        CHECK_MSG(s->dst[off + i] == pat(s->peer, gen, i),
                  "slot %d, generation %d, byte %llu: 0x%02x, expected 0x%02x", slot, gen,
                  (unsigned long long)i, s->dst[off + i], pat(s->peer, gen, i));
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(s->bs->barrier(s->bs->ctx)); /* both done before either destroys */
}

/* One creation too many; this rank is the one out of ids (want
 * GPUPORT_ERR_NO_RESOURCE, the limit named) or its peer (GPUPORT_ERR_PEER,
 * the rank named). Nothing of the attempt stays taken. */
static void one_too_many(side_t *s, gpuport_status_t want, uint32_t limit)
{
    gpuport_channel_t ch = (gpuport_channel_t)&ch; /* must stay untouched */
    uint32_t used = ids_in_use(s->comm);
    int refs = conn_refs(s);
    char needle[160];
    const char *log;
    gpuport_status_t st;

    capture_begin();
    st = gpuport_channel_create(s->comm, s->peer, s->msrc, s->mdst, &ch);
    log = capture_end();
    CHECK_MSG(st == want, "rank %d: channel %u of %u: %s, expected %s; log: %s", s->rank,
              used + 1, limit, gpuport_status_string(st), gpuport_status_string(want), log);
    CHECK(ch == (gpuport_channel_t)&ch);
    if (want == GPUPORT_ERR_NO_RESOURCE)
        snprintf(needle, sizeof(needle),
                 "all %u channels of this communicator are in use (raise GPUPORT_MAX_CHANNELS)",
                 limit);
    else
        snprintf(needle, sizeof(needle), "rank %d could not create its side of the channel",
                 s->peer);
    CHECK_MSG(count_of(log, needle) == 1, "rank %d: \"%s\" not logged once in: %s", s->rank,
              needle, log);
    CHECK_MSG(ids_in_use(s->comm) == used && conn_refs(s) == refs,
              "rank %d: %u ids and %d connection references after the refusal, %u and %d before",
              s->rank, ids_in_use(s->comm), conn_refs(s), used, refs);
}

static int both_limited(gpuport_bootstrap_t *bs)
{
    side_t s;
    uint32_t id;

    side_open(&s, bs);
    CHECK(s.comm->config.max_channels == LIMIT);
    for (int i = 0; i < LIMIT; i++) {
        s.ch[i] = create(&s);
        CHECK_MSG(s.ch[i]->id == (uint32_t)i, "channel %d has id %u", i, s.ch[i]->id);
    }
    for (int k = 0; k < 3; k++)
        one_too_many(&s, GPUPORT_ERR_NO_RESOURCE, LIMIT);
    CHECK(ids_in_use(s.comm) == LIMIT && conn_refs(&s) == LIMIT);
    traffic(&s, s.ch[1], 1, 0);
    traffic(&s, s.ch[2], 2, 0);

    /* one given back: the next channel takes its id and works */
    id = s.ch[2]->id;
    CHECK_OK(gpuport_channel_destroy(s.ch[2]));
    CHECK(ids_in_use(s.comm) == LIMIT - 1 && conn_refs(&s) == LIMIT - 1);
    s.ch[2] = create(&s);
    CHECK_MSG(s.ch[2]->id == id, "the new channel has id %u, not the freed %u", s.ch[2]->id, id);
    traffic(&s, s.ch[2], 2, 1);
    traffic(&s, s.ch[0], 0, 1); /* the others still work */
    one_too_many(&s, GPUPORT_ERR_NO_RESOURCE, LIMIT);

    for (int i = 0; i < LIMIT; i++)
        CHECK_OK(gpuport_channel_destroy(s.ch[i]));
    CHECK(ids_in_use(s.comm) == 0 && conn_refs(&s) == 0);
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

/* Rank 0 at LIMIT, rank 1 at 2 * LIMIT (run_pair sets them). */
static int one_limited(gpuport_bootstrap_t *bs)
{
    side_t s;
    uint32_t limit = bs->rank == 0 ? LIMIT : 2 * LIMIT;

    side_open(&s, bs);
    CHECK(s.comm->config.max_channels == limit);
    for (int i = 0; i < LIMIT; i++)
        s.ch[i] = create(&s);
    one_too_many(&s, s.rank == 0 ? GPUPORT_ERR_NO_RESOURCE : GPUPORT_ERR_PEER, limit);
    CHECK(ids_in_use(s.comm) == LIMIT && conn_refs(&s) == LIMIT);
    traffic(&s, s.ch[LIMIT - 1], LIMIT - 1, 2);
    for (int i = 0; i < LIMIT; i++)
        CHECK_OK(gpuport_channel_destroy(s.ch[i]));
    CHECK(ids_in_use(s.comm) == 0);
    CHECK_OK(gpuport_comm_destroy(s.comm));
    return 0;
}

static void run_pair(int (*fn)(gpuport_bootstrap_t *), int asymmetric, const char *name)
{
    gpuport_bootstrap_t bs;
    pid_t child;
    int rank = pair_fork(&bs, &child);

    CHECK(rank >= 0);
    if (g_distinct_hosts)
        setenv("GPUPORT_HOST_ID", rank ? "b" : "a", 1);
    setenv("GPUPORT_MAX_CHANNELS", asymmetric && rank == 1 ? "8" : "4", 1);
    if (rank == 1)
        _exit(fn(&bs));
    CHECK_MSG(fn(&bs) == 0, "%s: parent failed", name);
    CHECK_MSG(pair_join(child) == 0, "%s: child failed", name);
    unsetenv("GPUPORT_HOST_ID");
    unsetenv("GPUPORT_MAX_CHANNELS");
    printf("PASS %s (%s)\n", name, g_distinct_hosts ? "tcp between two host identities" : "shm");
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    testenv_clear_gpuport();
    setenv("GPUPORT_TIMEOUT_MS", "30000", 1);
    for (g_distinct_hosts = 0; g_distinct_hosts <= 1; g_distinct_hosts++) {
        run_pair(both_limited, 0, "out of channel ids on both ranks");
        run_pair(one_limited, 1, "out of channel ids on one rank");
    }
    return 0;
}
