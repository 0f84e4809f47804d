/*
 * Checked traffic over gpuport channels between every pair of ranks, for the
 * scenarios of test/mpi/test_mpi_channels.c and test/mpi/test_mpi_stress.c
 * (built on harness.h).
 *
 * A linkset is the channels of one layout: per_pair channels to every other
 * rank, met in tournament order, and optionally one to this rank. Every
 * region is a sub-range of one larger buffer with guard bands around it; a
 * channel must use the transport expected_transport() names, or linkset_open
 * fails. A plan is rounds of batches: on every channel the sender fills its
 * sources, puts (interleaved across channels), then signals (or makes the
 * last put a put_with_signal, or flushes and writes garbage over its sources
 * first); the receiver waits, compares the whole destination byte for byte
 * with a shadow copy of what it must hold, checks every guard byte, and acks;
 * after every round, every guard byte of every region is checked. Puts may be
 * mixed with put_values over the same bytes (the later operation wins). The
 * sender and the receiver draw the same operations from a PRNG seeded by
 * the pair, so the receiver knows what to expect without being told.
 */
#ifndef GPUPORT_TEST_MPI_TRAFFIC_H
#define GPUPORT_TEST_MPI_TRAFFIC_H

#include "harness.h"

#define ASYNC_MIN (256 * KIB)  /* GPUPORT_SHM_ASYNC_MIN's default: flusher from here */
#define MAX_PUTS 16            /* per channel and round */
#define POLL_LIMIT_NS (20ull * 1000000000ull)

/* --- the transport every channel must use --- */

/* A forced one (g_forced), else shm to this rank's own host and g_remote
 * (GPUPORT_TEST_REMOTE_TRANSPORT, default shm: every rank on this host) to
 * the others. */
extern const char *g_forced;   /* NULL: whatever GPUPORT_TRANSPORT says; "": auto */
extern const char *g_remote;
extern int g_remote_hosts;     /* 1: ranks on other hosts exist */
/* >0: GPUPORT_HOST_ID is set per group of that many ranks (rank / n + 1), so
 * ranks of one group share a host and the others are on other hosts; 1 gives
 * every rank a host of its own */
extern int g_ranks_per_host;

/* Every rank's host name, gathered, and GPUPORT_TEST_REMOTE_TRANSPORT read:
 * once, on every rank, before the first linkset. */
void traffic_init(void);

const char *expected_transport(int peer);

/* --- regions and links --- */

typedef struct region {
    unsigned char *ptr; /* the registered range; guard bytes either side */
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

/* Every channel of lay created and checked (transport, status, distinct ids). */
int linkset_open(gpuport_comm_t comm, const layout_t *lay, linkset_t *ls);
/* Every channel still healthy, then destroyed, and its memory released. */
int linkset_close(linkset_t *ls);
/* Every guard byte around every region (sources and destinations) intact;
 * run_round checks it after each round. */
int linkset_guards_intact(const linkset_t *ls);
/* Every destination still equal to its shadow and every guard intact: at
 * rest, after the last round, nothing arrived late. */
int linkset_at_rest(const linkset_t *ls);

/* --- traffic: rounds of batches, each checked by the receiver --- */

enum {
    MODE_SIGNAL = 1,        /* puts, then signal */
    MODE_PUT_SIGNAL = 2,    /* puts, the last one a put_with_signal */
    MODE_FLUSH_GARBAGE = 4  /* puts, flush, garbage into the sources, signal */
};

typedef struct op {
    uint64_t dst_off, src_off, size;
} op_t;

/* ops[j] is a put, or where is_value[j] a put_value of value[j] at its
 * dst_off (size 8, no source). */
typedef struct batch {
    int n, mode;
    op_t ops[MAX_PUTS];
    unsigned char is_value[MAX_PUTS];
    uint64_t value[MAX_PUTS];
} batch_t;

typedef struct plan {
    int rounds;
    int max_puts; /* per channel and round, drawn from 1..max_puts */
    unsigned modes;
    int big_pct;  /* share of puts of ASYNC_MIN bytes or more */
    int poll;     /* take signals with poll instead of wait */
    int scribble; /* every flush (the flush mode's, the ack phase's) is followed at
                   * once by garbage over the whole source region: a put that
                   * reads its source after its flush shows, in this round or
                   * in the next one's full comparison */
    const batch_t *fixed; /* every batch, instead of drawing */
    int value_pct; /* share of operations that are put_value (at 8-aligned offsets; the
                    * batch's last one, in MODE_PUT_SIGNAL, put_value_with_signal) */
} plan_t;

/* Called by the receiver once a batch's signal has been taken, before it
 * looks at the data (NULL: none). Tests that must prove a check fails use
 * it to plant damage. */
extern void (*traffic_after_signal)(link_t *l, const batch_t *b, int round);

/* The plan's rounds on every channel of ls. */
int run_plan(linkset_t *ls, const plan_t *p);

/* A communicator under `env`, channels as `lay`, then every plan in turn. */
int run_traffic(const char *const *env, const layout_t *lay, const plan_t *plans, int nplans);

#endif
