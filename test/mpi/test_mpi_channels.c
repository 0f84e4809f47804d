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
 *   put-value          put_value and put_value_with_signal at random aligned
 *                      offsets among puts over the same bytes (the later one
 *                      wins), shared and malloc destinations, auto (shm, or tcp
 *                      between hosts) and tcp forced; misaligned and
 *                      out-of-range values refused by the call
 *   transport-forced   GPUPORT_TRANSPORT=shm works (on one host; across hosts it
 *                      fails creation on both sides); tcp forced works, to
 *                      self too; ib forced works where an RDMA device exists
 *                      and elsewhere fails on both sides (rank 0 checks the
 *                      reason it logs); distinct GPUPORT_HOST_IDs make auto
 *                      pick tcp
 *   bad-config         an invalid GPUPORT_* value fails comm init on every rank, also
 *                      when only one rank has it
 *
 * GPUPORT_TEST_REMOTE_TRANSPORT=tcp says the other ranks are on other hosts
 * (test/net/): channels to them must use tcp, and forced shm must fail.
 *
 * The traffic and its checks (guard bands, shadow copies, operations drawn
 * alike on both sides) are test/mpi/traffic.h's; the driver is harness.h's.
 *
 * Usage: test_mpi_channels [-l] [-s NAME[,NAME...]]; no argument runs all.
 * Rank 0 prints one PASS line per scenario. A failed check is printed by the
 * rank that saw it; the ranks agree on the outcome after every scenario and
 * all exit 1 if any failed.
 */
#include <dirent.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_config.h"

#include "harness.h"
#include "internal.h"
#include "traffic.h"

#define TIMEOUT_MS "30000"     /* GPUPORT_TIMEOUT_MS: a hang becomes a failure */

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
        uint64_t n = 1 + rng_below(&l->rx, 40), got = 0, start = harness_now_ns();
        while (got < n) {
            int ready = -1;
            REQUIRE_OK(gpuport_channel_poll(l->ch, &ready));
            REQUIRE(ready == 0 || ready == 1, "poll set ready to %d", ready);
            got += (uint64_t)ready;
            REQUIRE(harness_now_ns() - start < POLL_LIMIT_NS,
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

/* put_value's own refusals: misaligned, past the end, offsets no trigger
 * carries; nothing queued, the channel fine. */
static int refused_values(link_t *l, uint64_t s)
{
    const struct {
        uint64_t off;
        gpuport_status_t want;
    } bad[] = {
        {4, GPUPORT_ERR_INVALID_ARG},        {s - 4, GPUPORT_ERR_INVALID_ARG},
        {s, GPUPORT_ERR_OUT_OF_RANGE},       {s + 8, GPUPORT_ERR_OUT_OF_RANGE},
        {1ull << 47, GPUPORT_ERR_OUT_OF_RANGE}, {UINT64_MAX - 7, GPUPORT_ERR_OUT_OF_RANGE},
    };

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        gpuport_status_t a = gpuport_channel_put_value(l->ch, bad[k].off, 1);
        gpuport_status_t b = gpuport_channel_put_value_with_signal(l->ch, bad[k].off, 1);
        REQUIRE(a == bad[k].want && b == bad[k].want,
                "put_value(dst_off %" PRIu64 ") to rank %d over a %" PRIu64 "-byte region: "
                "put_value %s, put_value_with_signal %s, expected %s",
                bad[k].off, l->peer, s, gpuport_status_string(a), gpuport_status_string(b),
                gpuport_status_string(bad[k].want));
        REQUIRE_OK(gpuport_channel_status(l->ch));
    }
    return 0;
}

static int sc_put_value(void)
{
    /* values among puts over the same bytes (large puts included, which
     * shm carries at its flusher, where the values behind them queue too),
     * then batches of values only, the last one with the signal */
    const plan_t p[] = {
        {.rounds = 25, .max_puts = MAX_PUTS, .modes = 7, .big_pct = 15, .value_pct = 50},
        {.rounds = 15, .max_puts = 8, .modes = MODE_PUT_SIGNAL, .value_pct = 100},
    };
    /* small regions: the values land on each other and on the puts */
    const plan_t dense = {.rounds = 25, .max_puts = MAX_PUTS, .modes = 7, .value_pct = 60};
    static const char *const tcp[] = {"GPUPORT_TRANSPORT", "tcp", NULL};
    static const char *const quiet[] = {"GPUPORT_LOG_LEVEL", "none", NULL};
    layout_t lay = {.size = 1 * MIB, .shared = 1, .per_pair = 1, .self = 1, .seed = 9};
    layout_t small = {.size = 4 * KIB, .shared = 0, .per_pair = 2, .self = 1, .seed = 10};
    gpuport_comm_t comm;
    linkset_t ls;
    int rc;

    TRY(run_traffic(NULL, &lay, p, 2)); /* shared destinations: mapped */
    TRY(run_traffic(NULL, &small, &dense, 1)); /* malloc: written by CMA on one host */
    g_forced = "tcp";
    rc = run_traffic(tcp, &lay, p, 2);
    if (!rc)
        rc = run_traffic(tcp, &small, &dense, 1);
    g_forced = NULL;
    TRY(rc);
    TRY(comm_open(quiet, &comm)); /* every refusal is logged */
    TRY(linkset_open(comm, &small, &ls));
    for (int i = 0; i < ls.n; i++)
        TRY(refused_values(&ls.links[i], small.size));
    TRY(run_plan(&ls, &dense)); /* still works; nothing else landed */
    TRY(no_signal_left(&ls));
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
    g_ranks_per_host = 1;
    rc = run_traffic(other_hosts, &lay, &p, 1);
    g_ranks_per_host = 0;
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
    /* One rank's bad value (its environment alone) fails every rank, and
     * promptly: that rank with the value's error, the others with
     * GPUPORT_ERR_PEER, instead of waiting for it in the bootstrap. Once in
     * the set-up before the records are exchanged (the configuration), once
     * after them (the threads' placement). */
    static const char *const one_bad[][5] = {
        {"GPUPORT_FIFO_SIZE", "banana", "GPUPORT_LOG_LEVEL", "none", NULL},
        {"GPUPORT_PROXY_CPUS", "100000", "GPUPORT_LOG_LEVEL", "none", NULL},
    };
    for (size_t k = 0; k < sizeof(one_bad) / sizeof(one_bad[0]); k++) {
        int bad_rank = g_size - 1, me_bad = g_rank == bad_rank;
        uint64_t t0 = harness_now_ns();
        gpuport_status_t st;
        comm = NULL;
        st = comm_init_env(me_bad ? one_bad[k] : NULL, &comm);
        REQUIRE(comm == NULL, "a failed creation returned a communicator");
        REQUIRE(me_bad ? st == GPUPORT_ERR_INVALID_CONFIG || st == GPUPORT_ERR_NOT_SUPPORTED
                       : st == GPUPORT_ERR_PEER,
                "%s=%s on rank %d only: this rank's creation returned %s", one_bad[k][0],
                one_bad[k][1], bad_rank, gpuport_status_string(st));
        REQUIRE(harness_now_ns() - t0 < 10ull * 1000000000ull,
                "%s=%s on rank %d only: creation took %.1f s", one_bad[k][0], one_bad[k][1],
                bad_rank, (double)(harness_now_ns() - t0) / 1e9);
    }
    /* nothing of the failed attempts is left in the way */
    TRY(comm_open(NULL, &comm));
    REQUIRE_OK(gpuport_comm_destroy(comm));
    return 0;
}

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
    {"put-value", sc_put_value,
     "put_value among puts over the same bytes, auto and tcp forced; refusals"},
    {"transport-forced", sc_transport_forced,
     "shm and tcp forced work, ib fails on both sides, distinct host ids pick tcp"},
    {"bad-config", sc_bad_config, "5 invalid GPUPORT_* values fail init on every rank"},
};

static void setup(void)
{
    setenv("GPUPORT_TIMEOUT_MS", TIMEOUT_MS, 0);
    traffic_init();
}

int main(int argc, char **argv)
{
    return harness_main(argc, argv, scenarios, (int)(sizeof(scenarios) / sizeof(scenarios[0])),
                        setup);
}
