/*
 * get, atomic_add and accumulate through port channels, host API, over
 * whatever transport GPUPORT_TRANSPORT picks (the scripts run it over shm,
 * tcp and two simulated hosts, at 2 and 4 ranks). Every rank has one source
 * and one destination region (gpuport_mem_alloc) for all its channels: rank
 * 0 a channel to every rank (itself included), every other rank one to rank
 * 0.
 *
 * Scenarios (harness_main):
 *   get        each rank reads its peers' destination, filled with the peer's
 *              pattern, 1 B .. --max-get bytes at odd offsets, every byte
 *              compared after the flush
 *   atomic     every rank adds to two counters in rank 0's region at once
 *              (+ (rank + 1) and - (rank + 1), ROUNDS times): exact totals
 *   accumulate every rank adds its int64, uint64 (wrapping), float32 and
 *              bfloat16 vectors into rank 0's, then signals; rank 0 waits for
 *              every signal and checks at once (so the signal orders the
 *              sums): integers exact, floats within the documented bound
 *              (k - 1) * u * sum |x| of the sum in rank order
 *   refused    bad offsets, sizes, counts, types and alignments: each refused
 *              with its status, nothing queued, the channel healthy, the
 *              peer's whole region untouched (read back by get)
 *   private    a destination of malloc'd memory: get works on every
 *              transport; adds work where the transport can add into it
 *              (tcp's receiver) and are refused, named, over shm (cross-
 *              memory attach cannot add)
 *
 * --death (2 ranks, run by rma_death.sh with GPUPORT_TEST_OUTLIVE=1): rank 1
 * kills itself while rank 0 gets 16 MiB at a time from it; rank 0's flush
 * (or get) must return GPUPORT_ERR_PEER or _TRANSPORT, its destroy must
 * return, and it prints one verdict line.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define REGION (64 * MIB + 64 * KIB)
#define ROUNDS 2000
#define NELEM 4099u       /* elements per accumulated vector (odd) */
#define DST_ELEM_OFF 3u   /* accumulate at odd element offsets */
#define SRC_ELEM_OFF 5u
/* where the accumulate vectors live in rank 0's destination and in every
 * rank's source: one 64 KiB area per type */
#define AREA (64 * KIB)
#define A_INT64 (1 * MIB)
#define A_UINT64 (A_INT64 + AREA)
#define A_F32 (A_UINT64 + AREA)
#define A_BF16 (A_F32 + AREA)
/* where some refused calls aim (refused_on) */
#define REFUSED_DEEP (48 * MIB)

static gpuport_comm_t g_comm;
static unsigned char *g_src, *g_dst;
static gpuport_mem_t g_src_mem, g_dst_mem;
static gpuport_channel_t *g_ch; /* rank 0: by peer rank; others: [0] to rank 0 */
static int *g_peer;
static int g_nch;
static uint64_t g_max_get = 64 * MIB;

static uint64_t dst_tag(int rank)
{
    return 1000 + (uint64_t)rank;
}

static void setup(void)
{
    static const char *const kv[] = {NULL};

    if (comm_open(kv, &g_comm) ||
        gpuport_mem_alloc(g_comm, REGION, (void **)&g_src) != GPUPORT_OK ||
        gpuport_mem_alloc(g_comm, REGION, (void **)&g_dst) != GPUPORT_OK ||
        gpuport_mem_register(g_comm, g_src, REGION, &g_src_mem) != GPUPORT_OK ||
        gpuport_mem_register(g_comm, g_dst, REGION, &g_dst_mem) != GPUPORT_OK) {
        fprintf(stderr, "rank %d: set-up failed\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    g_nch = g_rank == 0 ? g_size : 1;
    g_ch = calloc((size_t)g_nch, sizeof(*g_ch));
    g_peer = calloc((size_t)g_nch, sizeof(*g_peer));
    for (int i = 0; i < g_nch; i++) {
        g_peer[i] = g_rank == 0 ? i : 0;
        if (gpuport_channel_create(g_comm, g_peer[i], g_src_mem, g_dst_mem, &g_ch[i]) !=
            GPUPORT_OK) {
            fprintf(stderr, "rank %d: channel to rank %d failed\n", g_rank, g_peer[i]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (g_rank == 0)
        printf("channels over %s (rank 0 to itself: %s)\n",
               gpuport_channel_transport(g_ch[g_size > 1 ? 1 : 0]),
               gpuport_channel_transport(g_ch[0]));
}

static void teardown(void)
{
    for (int i = 0; i < g_nch; i++)
        gpuport_channel_destroy(g_ch[i]);
    gpuport_mem_deregister(g_src_mem);
    gpuport_mem_deregister(g_dst_mem);
    gpuport_mem_free(g_comm, g_src);
    gpuport_mem_free(g_comm, g_dst);
    gpuport_comm_destroy(g_comm);
}

/* ---- get ---- */

/* a get into buf (the channel's source region) at src_off, checked */
static int get_into(gpuport_channel_t ch, int peer, unsigned char *buf, uint64_t dst_off,
                    uint64_t src_off, uint64_t size)
{
    memset(buf + src_off, 0, size);
    REQUIRE_OK(gpuport_channel_get(ch, dst_off, src_off, size));
    REQUIRE_OK(gpuport_channel_flush(ch));
    for (uint64_t i = 0; i < size; i++)
        REQUIRE(buf[src_off + i] == pattern(dst_tag(peer), dst_off + i),
                "get of %llu bytes from rank %d's offset %llu to offset %llu: byte %llu is 0x%02x, "
                "expected 0x%02x",
                (unsigned long long)size, peer, (unsigned long long)dst_off,
                (unsigned long long)src_off, (unsigned long long)i, buf[src_off + i],
                pattern(dst_tag(peer), dst_off + i));
    g_stats.puts++;
    g_stats.bytes += size;
    g_stats.verified += size;
    return 0;
}

static int get_one(gpuport_channel_t ch, int peer, uint64_t dst_off, uint64_t src_off,
                   uint64_t size)
{
    return get_into(ch, peer, g_src, dst_off, src_off, size);
}

static int run_get(void)
{
    static const uint64_t sizes[] = {1, 3, 8, 4096 + 5, 64 * KIB + 1, MIB + 7, 16 * MIB + 3,
                                     64 * MIB};

    fill(g_dst, 0, REGION, dst_tag(g_rank));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int c = 0; c < g_nch; c++)
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && sizes[s] <= g_max_get; s++) {
            uint64_t dst_off = 1 + 2 * (uint64_t)s, src_off = 7 + 6 * (uint64_t)s;
            TRY(get_one(g_ch[c], g_peer[c], dst_off, src_off, sizes[s]));
        }
    /* a get of nothing is no error, as a put of nothing */
    REQUIRE_OK(gpuport_channel_get(g_ch[0], REGION, 0, 0));
    REQUIRE_OK(gpuport_channel_flush(g_ch[0]));
    g_stats.channels += (unsigned long long)g_nch;
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

/* ---- atomic_add ---- */

static int run_atomic(void)
{
    uint64_t *ctr = (uint64_t *)g_dst; /* rank 0's: [0] up, [1] down */
    unsigned long long want = 0;

    ctr[0] = 0;
    ctr[1] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < ROUNDS; i++) {
        gpuport_channel_t ch = g_ch[0]; /* rank 0: to itself; others: to rank 0 */
        REQUIRE_OK(gpuport_channel_atomic_add(ch, 0, g_rank + 1));
        REQUIRE_OK(gpuport_channel_atomic_add(ch, 8, -(int64_t)(g_rank + 1)));
    }
    REQUIRE_OK(gpuport_channel_flush(g_ch[0]));
    g_stats.puts += 2 * ROUNDS;
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank != 0)
        return 0;
    for (int r = 0; r < g_size; r++)
        want += (unsigned long long)ROUNDS * (unsigned long long)(r + 1);
    REQUIRE(ctr[0] == want, "counter is %llu after %d ranks' adds, expected %llu",
            (unsigned long long)ctr[0], g_size, want);
    REQUIRE(ctr[1] == (uint64_t)0 - want, "down-counter is %lld, expected -%llu",
            (long long)ctr[1], want);
    g_stats.verified += 2;
    return 0;
}

/* ---- accumulate ---- */

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static double from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* rank r's element i of each type, the same on every rank */
static int64_t v_int64(int r, uint32_t i)
{
    return (int64_t)(hash4(1, (uint64_t)r, i, 0) % 2000001) - 1000000;
}

static uint64_t v_uint64(int r, uint32_t i)
{
    return hash4(2, (uint64_t)r, i, 0) | (1ull << 63); /* sums wrap */
}

static float v_f32(int r, uint32_t i)
{
    return (float)((double)(hash4(3, (uint64_t)r, i, 0) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static uint16_t v_bf16(int r, uint32_t i)
{
    return to_bf16((float)((double)(hash4(4, (uint64_t)r, i, 0) >> 11) / 9007199254740992.0 *
                           200.0 - 100.0));
}

static int check_floats(void)
{
    const float *f = (const float *)(g_dst + A_F32) + DST_ELEM_OFF;
    const uint16_t *b = (const uint16_t *)(g_dst + A_BF16) + DST_ELEM_OFF;
    const double u32 = ldexp(1.0, -24), u16 = ldexp(1.0, -8);
    double worst32 = 0, worst16 = 0;

    for (uint32_t i = 0; i < NELEM; i++) {
        double exact = 0, mag = 0, exact16 = 0, mag16 = 0, e32, e16;
        for (int r = 0; r < g_size; r++) {
            exact += v_f32(r, i);
            mag += fabs(v_f32(r, i));
            exact16 += from_bf16(v_bf16(r, i));
            mag16 += fabs(from_bf16(v_bf16(r, i)));
        }
        e32 = fabs((double)f[i] - exact);
        e16 = fabs(from_bf16(b[i]) - exact16);
        REQUIRE(e32 <= (g_size - 1) * u32 * mag * 1.000001 + 1e-300,
                "float32 element %u: %.9g, exact %.12g: error %.3g beyond (k - 1) * u * sum|x| = "
                "%.3g",
                i, (double)f[i], exact, e32, (g_size - 1) * u32 * mag);
        REQUIRE(e16 <= (g_size - 1) * u16 * mag16 * 1.000001 + 1e-300,
                "bfloat16 element %u: %.6g, exact %.9g: error %.3g beyond (k - 1) * u * sum|x| = "
                "%.3g",
                i, from_bf16(b[i]), exact16, e16, (g_size - 1) * u16 * mag16);
        worst32 = mag > 0 && e32 / mag > worst32 ? e32 / mag : worst32;
        worst16 = mag16 > 0 && e16 / mag16 > worst16 ? e16 / mag16 : worst16;
    }
    if (g_rank == 0)
        printf("accumulate: worst relative error float32 %.3g (bound %.3g), bfloat16 %.3g "
               "(bound %.3g)\n",
               worst32, (g_size - 1) * u32, worst16, (g_size - 1) * u16);
    return 0;
}

static int check_sums(void)
{
    const int64_t *a = (const int64_t *)(g_dst + A_INT64) + DST_ELEM_OFF;
    const uint64_t *u = (const uint64_t *)(g_dst + A_UINT64) + DST_ELEM_OFF;

    for (uint32_t i = 0; i < NELEM; i++) {
        int64_t want = 0;
        uint64_t uwant = 0;
        for (int r = 0; r < g_size; r++) {
            want += v_int64(r, i);
            uwant += v_uint64(r, i);
        }
        REQUIRE(a[i] == want, "int64 element %u: %lld, expected %lld", i, (long long)a[i],
                (long long)want);
        REQUIRE(u[i] == uwant, "uint64 element %u: %llu, expected %llu", i,
                (unsigned long long)u[i], (unsigned long long)uwant);
    }
    /* the elements around the vectors are untouched */
    REQUIRE(((int64_t *)(g_dst + A_INT64))[DST_ELEM_OFF - 1] == 0 &&
                ((int64_t *)(g_dst + A_INT64))[DST_ELEM_OFF + NELEM] == 0,
            "an int64 accumulate wrote outside its %u elements", NELEM);
    REQUIRE(((uint16_t *)(g_dst + A_BF16))[DST_ELEM_OFF - 1] == 0 &&
                ((uint16_t *)(g_dst + A_BF16))[DST_ELEM_OFF + NELEM] == 0,
            "a bfloat16 accumulate wrote outside its %u elements", NELEM);
    g_stats.verified += 4ull * NELEM;
    return check_floats();
}

static int run_accumulate(void)
{
    gpuport_channel_t ch = g_ch[0];

    memset(g_dst + A_INT64, 0, 4 * AREA);
    for (uint32_t i = 0; i < NELEM; i++) {
        ((int64_t *)(g_src + A_INT64))[SRC_ELEM_OFF + i] = v_int64(g_rank, i);
        ((uint64_t *)(g_src + A_UINT64))[SRC_ELEM_OFF + i] = v_uint64(g_rank, i);
        ((float *)(g_src + A_F32))[SRC_ELEM_OFF + i] = v_f32(g_rank, i);
        ((uint16_t *)(g_src + A_BF16))[SRC_ELEM_OFF + i] = v_bf16(g_rank, i);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE_OK(gpuport_channel_accumulate(ch, A_INT64 + 8 * DST_ELEM_OFF, A_INT64 + 8 * SRC_ELEM_OFF,
                                          NELEM, GPUPORT_INT64));
    REQUIRE_OK(gpuport_channel_accumulate(ch, A_UINT64 + 8 * DST_ELEM_OFF,
                                          A_UINT64 + 8 * SRC_ELEM_OFF, NELEM, GPUPORT_UINT64));
    REQUIRE_OK(gpuport_channel_accumulate(ch, A_F32 + 4 * DST_ELEM_OFF, A_F32 + 4 * SRC_ELEM_OFF,
                                          NELEM, GPUPORT_FLOAT32));
    REQUIRE_OK(gpuport_channel_accumulate(ch, A_BF16 + 2 * DST_ELEM_OFF, A_BF16 + 2 * SRC_ELEM_OFF,
                                          NELEM, GPUPORT_BFLOAT16));
    REQUIRE_OK(gpuport_channel_signal(ch));
    g_stats.puts += 4;
    g_stats.signals++;
    if (g_rank == 0) {
        /* one signal on each channel (from itself and each rank), then the
         * sums at once: a signal after an accumulate means the sum is there */
        REQUIRE_OK(gpuport_channel_wait_all(g_ch, g_nch));
        TRY(check_sums());
        /* one signal each, no more: a second wait_all finds none */
        for (int c = 0; c < g_nch; c++) {
            int ready = -1;
            REQUIRE_OK(gpuport_channel_poll(g_ch[c], &ready));
            REQUIRE(ready == 0, "channel %d had a second signal after wait_all", c);
        }
    }
    REQUIRE_OK(gpuport_channel_flush_all(g_ch, g_nch));
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

/* ---- refused ---- */

static int refused_on(gpuport_channel_t ch, int peer)
{
    REQUIRE_STATUS(gpuport_channel_get(ch, 0, 0, REGION + 1), GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_STATUS(gpuport_channel_get(ch, REGION - 4, 0, 5), GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_STATUS(gpuport_channel_get(ch, 0, REGION, 1), GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_STATUS(gpuport_channel_get(ch, UINT64_MAX, 0, 2), GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_STATUS(gpuport_channel_atomic_add(ch, 4, 1), GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_atomic_add(ch, REGION, 1), GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 0, 0, 0, GPUPORT_INT64),
                   GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 0, 0, 1, (gpuport_dtype_t)99),
                   GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 0, 0, 1, (gpuport_dtype_t)0),
                   GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 2, 0, 1, GPUPORT_FLOAT32),
                   GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 0, 1, 1, GPUPORT_BFLOAT16),
                   GPUPORT_ERR_INVALID_ARG);
    /* deep in the region, where a refusal that still wrote would show only
     * in the whole region's read-back below */
    REQUIRE_STATUS(gpuport_channel_atomic_add(ch, REFUSED_DEEP + 4, 1), GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, REFUSED_DEEP + 2, 64, 1, GPUPORT_FLOAT32),
                   GPUPORT_ERR_INVALID_ARG);
    memset(g_src, 0, 64); /* zeros: the peer's bytes stay as they are */
    memset(g_src + 64, 0x5a, 64); /* what the refused adds below would add */
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 8, 0, 3, GPUPORT_INT64), GPUPORT_OK);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, REGION - 8, 64, 2, GPUPORT_INT64),
                   GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 0, 0, UINT64_MAX / 2, GPUPORT_FLOAT32),
                   GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_STATUS(gpuport_channel_accumulate(ch, 0, REGION - 4, 2, GPUPORT_FLOAT32),
                   GPUPORT_ERR_OUT_OF_RANGE);
    REQUIRE_OK(gpuport_channel_flush(ch));
    REQUIRE_OK(gpuport_channel_status(ch));
    REQUIRE_STATUS(gpuport_channel_wait_all(NULL, 1), GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_wait_all(&ch, -1), GPUPORT_ERR_INVALID_ARG);
    REQUIRE_STATUS(gpuport_channel_flush_all(NULL, 2), GPUPORT_ERR_INVALID_ARG);
    REQUIRE_OK(gpuport_channel_wait_all(&ch, 0));
    /* the peer's whole region: its pattern everywhere, the three int64s at
     * 8 included, which the one good accumulate above added zeros to (the
     * source's first 24 bytes are zero) */
    TRY(get_one(ch, peer, 0, 0, REGION));
    return 0;
}

static int run_refused(void)
{
    fill(g_dst, 0, REGION, dst_tag(g_rank));
    memset(g_src, 0, 64);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int c = 0; c < g_nch; c++)
        TRY(refused_on(g_ch[c], g_peer[c]));
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

/* ---- private memory ---- */

static int run_private(void)
{
    unsigned char *mine = aligned_alloc(4096, 1 * MIB), *src = aligned_alloc(4096, 1 * MIB);
    gpuport_mem_t mine_mem = NULL, src_mem = NULL;
    gpuport_channel_t ch = NULL;
    int peer = g_size == 1 ? 0 : g_rank < 2 ? 1 - g_rank : -1, rc = 0, adds = 0;
    const char *tl;

    REQUIRE(mine && src, "out of memory");
    fill(mine, 0, 1 * MIB, dst_tag(g_rank));
    REQUIRE_OK(gpuport_mem_register(g_comm, mine, 1 * MIB, &mine_mem));
    REQUIRE_OK(gpuport_mem_register(g_comm, src, 1 * MIB, &src_mem));
    if (peer >= 0) {
        REQUIRE_OK(gpuport_channel_create(g_comm, peer, src_mem, mine_mem, &ch));
        tl = gpuport_channel_transport(ch);
        rc = get_into(ch, peer, src, 17, 3, 300 * KIB + 1);
        if (!rc) {
            gpuport_status_t st = gpuport_channel_atomic_add(ch, 64, 5);
            adds = st == GPUPORT_OK;
            if (strcmp(tl, "shm") == 0 && !(g_size == 1))
                rc = st == GPUPORT_ERR_NOT_SUPPORTED
                         ? 0
                         : fail_at(__FILE__, __LINE__, "atomic_add into private memory over shm",
                                   "returned %d (%s), expected NOT_SUPPORTED", (int)st,
                                   gpuport_status_string(st));
            else if (st != GPUPORT_OK)
                rc = fail_at(__FILE__, __LINE__, "atomic_add into private memory", "over %s "
                             "returned %d (%s)", tl, (int)st, gpuport_status_string(st));
        }
        if (!rc)
            rc = gpuport_channel_flush(ch) == GPUPORT_OK ? 0 : -1;
        MPI_Barrier(MPI_COMM_WORLD);
        if (!rc && adds) {
            uint64_t want, got;
            unsigned char w[8];
            for (int i = 0; i < 8; i++)
                w[i] = pattern(dst_tag(g_rank), 64 + (uint64_t)i);
            memcpy(&want, w, 8);
            memcpy(&got, mine + 64, 8);
            want += 5;
            if (got != want)
                rc = fail_at(__FILE__, __LINE__, "got == want", "private counter %llx, "
                             "expected %llx", (unsigned long long)got, (unsigned long long)want);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        gpuport_channel_destroy(ch);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    gpuport_mem_deregister(mine_mem);
    gpuport_mem_deregister(src_mem);
    free(mine);
    free(src);
    return rc;
}

/* ---- death ---- */

static int death(void)
{
    gpuport_status_t st = GPUPORT_OK;
    int rounds = 0;

    setup();
    fill(g_dst, 0, REGION, dst_tag(g_rank));
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 1) {
        usleep(200000);
        printf("rank 1: dying now, during rank 0's gets\n");
        fflush(stdout);
        raise(SIGKILL);
    }
    if (g_rank != 0)
        return 0;
    /* rank 0's channel to rank 1 is g_ch[1] */
    while (st == GPUPORT_OK && rounds < 2000) {
        st = gpuport_channel_get(g_ch[1], 0, 0, 16 * MIB);
        if (st == GPUPORT_OK)
            st = gpuport_channel_flush(g_ch[1]);
        rounds++;
    }
    if (st != GPUPORT_ERR_PEER && st != GPUPORT_ERR_TRANSPORT) {
        printf("FAIL rank 0: after %d gets of 16 MiB the get/flush returned %d (%s), expected "
               "GPUPORT_ERR_PEER\n",
               rounds, (int)st, gpuport_status_string(st));
        return 1;
    }
    teardown();
    printf("PASS rank 0: %d gets of 16 MiB, then the peer's death returned %s; destroy "
           "returned\n",
           rounds, gpuport_status_string(st));
    return 0;
}

static const scenario_t scenarios[] = {
    {"get", run_get, "get 1 B .. --max-get at odd offsets, every byte compared"},
    {"atomic", run_atomic, "every rank adds to two counters at once: exact totals"},
    {"accumulate", run_accumulate, "int64, uint64, float32, bfloat16 vectors summed, signal"},
    {"refused", run_refused, "bad input refused with its status, the peer's whole region untouched"},
    {"private", run_private, "get from malloc'd memory; adds where the transport can"},
};

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--death") == 0) {
            harness_init(&argc, &argv);
            return death();
        }
        if (strcmp(argv[i], "--max-get") == 0 && i + 1 < argc) {
            g_max_get = strtoull(argv[i + 1], NULL, 0);
            memmove(&argv[i], &argv[i + 2], (size_t)(argc - i - 1) * sizeof(*argv));
            argc -= 2;
            i--;
        }
    }
    harness_before_finalize = teardown;
    return harness_main(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]), setup);
}
