/*
 * allreduce: a float32 sum over every rank with gpuport port channels,
 * beside MPI_Allreduce(MPI_FLOAT, MPI_SUM) in the same run, every result
 * verified.
 *
 * Every rank has one window of host memory from gpuport_mem_alloc, laid out
 * the same everywhere, registered once and used as both the source and the
 * destination of one port channel to every other rank; a rank addresses a
 * peer's window with its own offsets:
 *
 *   IN  | OUT | GATHER: 2 x n slots (direct) | RING: n - 1 chunk slots
 *
 * Two algorithms, chosen by size (--algo forces one):
 * - direct, up to DIRECT_MAX (16 KiB): every rank puts its whole input into
 *   slot `rank` of every peer's GATHER with one put_with_signal, waits for
 *   one signal from each peer, then sums the n vectors in rank order. One
 *   step, so its latency is one put; the GATHER has two sets of slots used
 *   by turns, so that a rank one call ahead never overwrites a vector a
 *   peer is still adding.
 * - ring, above: a reduce-scatter (n - 1 steps: a rank adds its input to the
 *   partial sum of one chunk that its predecessor sent, and passes it on),
 *   then an allgather (n - 1 steps: each finished chunk travels once around
 *   the ring, put straight into the next rank's OUT). Chunks move in pieces
 *   of PIECE_BYTES, each a put_with_signal, so a rank adds one piece while
 *   the next is on its way: 64 KiB, the largest put that shm (256 KiB) and
 *   tcp (64 KiB) carry out on the calling thread; larger pieces, through
 *   the proxy, took 17-20 ms at 64 MiB over shm against 13 ms.
 *   Each rank sends 2 (n - 1) / n of the vector instead of the direct
 *   scheme's n - 1 vectors, and adds only its share.
 * The threshold: a small call costs its steps (direct 1, ring 2 (n - 1)). At
 * 2 ranks on 2 cores, over tcp, where a step costs tens of us, the direct
 * scheme took 54-57 us at 4 KiB and 56-61 at 16 KiB against the ring's
 * 62-87 and 66-188; over shm, where a step costs under a microsecond, the
 * two were within noise (1.0-1.4 us against 0.6-2.0 at 4 KiB). From 64 KiB
 * the ring, whose ranks each add only their share, was ahead in most runs
 * (shm: 8-24 us against 17-20; 32-102 against 72-111 at 256 KiB).
 *
 * A call ends with a flush of the channels it put on: then, as after
 * MPI_Allreduce, the input may be changed and the output read and written.
 *
 * Results: every rank gets the same bits, with both algorithms. The direct
 * scheme adds in rank order on every rank; the ring adds each element once,
 * on the rank that finishes its chunk (chunk c in the order c, c + 1, ...),
 * and copies the sum to the others. (Adding with
 * gpuport_channel_accumulate into one buffer would not: the ranks' adds
 * land in any order.) Verification, on every rank, after the last timed
 * call of a size (OUT is filled with NaN before each call, so every element
 * must have been written by that call): inputs are a hash of rank and index,
 * so every rank computes the reference itself, in rank order in double;
 * each element must be within (gamma(n-1, 2^-24) + gamma(n-1, 2^-53)) *
 * sum |x|, gamma(k, u) = k u / (1 - k u): a float sum of n terms in any
 * order is within gamma(n-1, 2^-24) * sum |x| of the exact sum, and the
 * double reference within gamma(n-1, 2^-53). The direct scheme must also
 * equal the float sum in rank order exactly, and gpuport's results must be
 * identical on every rank (rank 0's result is broadcast and compared).
 * MPI's results are held to the same bound; whether they are identical on
 * every rank is reported, not required (MPI only advises it).
 *
 *   mpirun -np 4 workloads/allreduce [--small] [--algo auto|direct|ring]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_out.h"
#include "wl.h"

#define DIRECT_MAX (16 * WL_KIB) /* the largest size the direct scheme takes (auto) */
#define PIECE_BYTES (64 * WL_KIB) /* the ring's pipelining unit */
#define PIECE_ELEMS (PIECE_BYTES / sizeof(float))

enum algo { ALGO_AUTO, ALGO_DIRECT, ALGO_RING, ALGO_MPI };
static const char *const algo_name[] = {"auto", "direct", "ring", "MPI"};

typedef struct ar {
    gpuport_comm_t comm;
    gpuport_mem_t mem;     /* the window, registered once */
    gpuport_channel_t *ch; /* ch[p]: the channel to rank p (NULL for this rank) */
    gpuport_channel_t *peers; /* the n - 1 others: peers[k - 1] = ch[(rank + k) % n] */
    unsigned char *win;    /* the window: the same layout on every rank */
    uint64_t win_bytes;
    uint64_t off_in, off_out, off_gather, off_ring; /* where each part starts */
    uint64_t gather_slot, ring_slot;                /* bytes of one slot */
    uint64_t direct_max; /* the largest size that takes the direct scheme */
    uint64_t calls;      /* direct calls so far: which set of GATHER slots is next */
    int rank, n;
} ar_t;

/* rank r's element i: the same on every rank, in [-1, 1) */
static float value(int r, uint64_t i)
{
    uint64_t h = ((uint64_t)r * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull);
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    return (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *at(const ar_t *a, uint64_t off)
{
    return (float *)(a->win + off);
}

static enum algo algo_for(const ar_t *a, uint64_t bytes)
{
    return bytes <= a->direct_max || a->n == 1 ? ALGO_DIRECT : ALGO_RING;
}

/* Elements [*first, *first + *len) of chunk c: count split into n chunks. */
static void chunk_of(uint64_t count, int n, int c, uint64_t *first, uint64_t *len)
{
    *first = count * (uint64_t)c / (uint64_t)n;
    *len = count * (uint64_t)(c + 1) / (uint64_t)n - *first;
}

/* ---- the two algorithms ------------------------------------------------- */

/* Rank p's input in a direct call whose GATHER slots start at set. */
static const float *vector(const ar_t *a, uint64_t set, int p)
{
    return at(a, p == a->rank ? a->off_in : set + (uint64_t)p * a->gather_slot);
}

/* exchange: begin */
static int direct(ar_t *a, uint64_t count)
{
    const int r = a->rank, n = a->n;
    uint64_t bytes = count * sizeof(float);
    uint64_t set = a->off_gather + (a->calls++ & 1) * (uint64_t)n * a->gather_slot;
    float *out = at(a, a->off_out);

    /* this rank's input into slot r of every peer, the next rank first, so
     * that the ranks do not all start with the same one */
    for (int k = 1; k < n; k++)
        if (!wl_ok(gpuport_channel_put_with_signal(a->peers[k - 1], set + r * a->gather_slot,
                                                   a->off_in, bytes),
                   "gpuport_channel_put_with_signal"))
            return 0;
    if (!wl_ok(gpuport_channel_wait_all(a->peers, n - 1), "gpuport_channel_wait_all"))
        return 0;
    /* the same additions, in rank order, on every rank: x0 + x1, then + x2 ... */
    if (n == 1)
        memcpy(out, at(a, a->off_in), bytes);
    for (int p = 1; p < n; p++) {
        const float *x = p == 1 ? vector(a, set, 0) : out, *y = vector(a, set, p);
        for (uint64_t i = 0; i < count; i++)
            out[i] = x[i] + y[i];
    }
    return wl_ok(gpuport_channel_flush_all(a->peers, n - 1), "gpuport_channel_flush_all");
}

/* Puts elements [first, first + len) from src_off on to the next rank's
 * dst_off, piece by piece, each with a signal. src_off and dst_off are the
 * chunk's first element's places. */
static int send_pieces(gpuport_channel_t tx, uint64_t dst_off, uint64_t src_off, uint64_t len)
{
    for (uint64_t done = 0; done < len; done += PIECE_ELEMS) {
        uint64_t m = len - done < PIECE_ELEMS ? len - done : PIECE_ELEMS;
        uint64_t at_b = done * sizeof(float);
        if (!wl_ok(gpuport_channel_put_with_signal(tx, dst_off + at_b, src_off + at_b,
                                                   m * sizeof(float)),
                   "gpuport_channel_put_with_signal"))
            return 0;
    }
    return 1;
}

/* Reduce-scatter step s >= 1: the predecessor's partial sum of chunk c
 * arrives in RING slot s - 1, piece by piece; add this rank's input into
 * OUT and pass each piece on: into the next rank's slot s, or, at the last
 * step, where the sum is complete, into its OUT (the allgather's first step). */
static int reduce_step(ar_t *a, gpuport_channel_t tx, gpuport_channel_t rx, uint64_t count,
                       int s)
{
    const int n = a->n, c = (a->rank - s + n) % n;
    uint64_t first, len;

    chunk_of(count, n, c, &first, &len);
    for (uint64_t done = 0; done < len; done += PIECE_ELEMS) {
        uint64_t m = len - done < PIECE_ELEMS ? len - done : PIECE_ELEMS;
        uint64_t out_b = a->off_out + (first + done) * sizeof(float);
        const float *recv = at(a, a->off_ring + (uint64_t)(s - 1) * a->ring_slot) + done;
        const float *in = at(a, a->off_in) + first + done;
        float *out = at(a, out_b);
        uint64_t to = s < n - 1 ? a->off_ring + (uint64_t)s * a->ring_slot + done * sizeof(float)
                                : out_b;

        if (!wl_ok(gpuport_channel_wait(rx), "gpuport_channel_wait"))
            return 0;
        for (uint64_t i = 0; i < m; i++)
            out[i] = recv[i] + in[i];
        if (!wl_ok(gpuport_channel_put_with_signal(tx, to, out_b, m * sizeof(float)),
                   "gpuport_channel_put_with_signal"))
            return 0;
    }
    return 1;
}

/* Allgather step t >= 1: the finished chunk the predecessor put into OUT at
 * step t - 1 arrives piece by piece; pass each on unless t is the last. */
static int gather_step(ar_t *a, gpuport_channel_t tx, gpuport_channel_t rx, uint64_t count,
                       int t)
{
    const int n = a->n, c = (a->rank - t + 1 + n) % n;
    uint64_t first, len;

    chunk_of(count, n, c, &first, &len);
    for (uint64_t done = 0; done < len; done += PIECE_ELEMS) {
        uint64_t m = len - done < PIECE_ELEMS ? len - done : PIECE_ELEMS;
        uint64_t out_b = a->off_out + (first + done) * sizeof(float);

        if (!wl_ok(gpuport_channel_wait(rx), "gpuport_channel_wait"))
            return 0;
        if (t < n - 1 &&
            !wl_ok(gpuport_channel_put_with_signal(tx, out_b, out_b, m * sizeof(float)),
                   "gpuport_channel_put_with_signal"))
            return 0;
    }
    return 1;
}

/* Every rank sends to the next and receives from the previous; with two
 * ranks both are one channel, whose two directions count signals apart. */
static int ring(ar_t *a, uint64_t count)
{
    const int r = a->rank, n = a->n;
    gpuport_channel_t tx = a->ch[(r + 1) % n], rx = a->ch[(r + n - 1) % n];
    uint64_t first, len;

    /* reduce-scatter step 0: this rank's own chunk r, from its input */
    chunk_of(count, n, r, &first, &len);
    if (!send_pieces(tx, a->off_ring, a->off_in + first * sizeof(float), len))
        return 0;
    for (int s = 1; s < n; s++)
        if (!reduce_step(a, tx, rx, count, s))
            return 0;
    for (int t = 1; t < n; t++)
        if (!gather_step(a, tx, rx, count, t))
            return 0;
    return wl_ok(gpuport_channel_flush(tx), "gpuport_channel_flush");
}
/* exchange: end */

/* ---- set-up ------------------------------------------------------------- */

/* The window for sizes up to max_bytes, and a channel to every other rank
 * (pairwise: every pair in increasing rank order, the same on both sides). */
static int ar_open(ar_t *a, uint64_t max_bytes, enum algo algo)
{
    uint64_t max_count = max_bytes / sizeof(float);

    memset(a, 0, sizeof(*a));
    a->comm = wl_comm();
    a->rank = gpuport_comm_rank(a->comm);
    a->n = gpuport_comm_size(a->comm);
    /* setup: begin */
    a->direct_max = algo == ALGO_DIRECT ? max_bytes : algo == ALGO_RING ? 0 : DIRECT_MAX;
    a->gather_slot = a->direct_max < max_bytes ? a->direct_max : max_bytes;
    a->ring_slot = (max_count + (uint64_t)a->n - 1) / (uint64_t)a->n * sizeof(float);
    a->ring_slot = (a->ring_slot + 63) / 64 * 64;
    if (a->direct_max >= max_bytes)
        a->ring_slot = 0; /* never used */
    a->off_in = 0;
    a->off_out = max_bytes;
    a->off_gather = 2 * max_bytes;
    a->off_ring = a->off_gather + 2 * (uint64_t)a->n * a->gather_slot;
    a->win_bytes = a->off_ring + (uint64_t)(a->n - 1) * a->ring_slot;
    a->ch = calloc((size_t)a->n, sizeof(*a->ch));
    a->peers = calloc((size_t)a->n, sizeof(*a->peers));
    if (!a->ch || !a->peers) {
        fprintf(stderr, "rank %d: no memory for %d channels\n", a->rank, a->n);
        return 0;
    }
    if (!wl_ok(gpuport_mem_alloc(a->comm, a->win_bytes, (void **)&a->win), "gpuport_mem_alloc"))
        return 0;
    for (uint64_t i = 0; i < max_count; i++)
        at(a, a->off_in)[i] = value(a->rank, i);
    if (!wl_ok(gpuport_mem_register(a->comm, a->win, a->win_bytes, &a->mem),
               "gpuport_mem_register"))
        return 0;
    /* a channel to every other rank (collective; none is left waiting) */
    if (!wl_ok(gpuport_channel_create_all(a->comm, a->mem, a->mem, 0, a->ch),
               "gpuport_channel_create_all"))
        return 0;
    for (int k = 1; k < a->n; k++)
        a->peers[k - 1] = a->ch[(a->rank + k) % a->n];
    /* setup: end */
    return 1;
}

/* Everything in reverse order; once every rank is done with every channel. */
static int ar_close(ar_t *a)
{
    int good = 1;

    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = a->n - 1; p >= 0; p--)
        if (a->ch && a->ch[p])
            good &= wl_ok(gpuport_channel_destroy(a->ch[p]), "gpuport_channel_destroy");
    if (a->mem)
        good &= wl_ok(gpuport_mem_deregister(a->mem), "gpuport_mem_deregister");
    if (a->win)
        good &= wl_ok(gpuport_mem_free(a->comm, a->win), "gpuport_mem_free");
    free(a->ch);
    free(a->peers);
    good &= wl_ok(gpuport_comm_destroy(a->comm), "gpuport_comm_destroy");
    return good;
}

/* The transports of rank 0's channels ("shm", "shm+tcp"), for the header. */
static void transports(const ar_t *a, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int p = 0; p < a->n; p++) {
        const char *t;
        if (!a->ch[p])
            continue;
        t = gpuport_channel_transport(a->ch[p]);
        if (!strstr(buf, t))
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "+" : "", t);
    }
}

/* Which MPI, and the path its baseline took as far as the environment says
 * (Open MPI's --mca btl arrives as OMPI_MCA_btl). */
static void print_mpi_path(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "?";
    const char *btl = getenv("OMPI_MCA_btl");
    int len = 0;

    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n,")] = '\0';
    printf("# MPI: %s, %s%s\n", lib, btl ? "btl " : "its default transports (shared memory "
                                                    "within a host; --mca btl to choose)",
           btl ? btl : "");
}

/* ---- timing and verification -------------------------------------------- */

/* One call, by gpuport (direct or ring) or MPI, into out; a failed gpuport
 * call ends the job: its peers may be waiting for what this rank will not
 * send. */
static void call_once(ar_t *a, enum algo algo, uint64_t count, float *out)
{
    int good;

    if (algo == ALGO_MPI) {
        /* mpi exchange: begin */
        MPI_Allreduce(at(a, a->off_in), out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        /* mpi exchange: end */
        return;
    }
    good = algo == ALGO_DIRECT ? direct(a, count) : ring(a, count);
    if (!good)
        MPI_Abort(MPI_COMM_WORLD, 1);
}

/* warm untimed calls, then `rounds` timed ones, each after a barrier and
 * with out filled with NaN first; us[i]: the slowest rank's time of call i. */
static void timed(ar_t *a, enum algo algo, uint64_t count, float *out, int warm, int rounds,
                  double *us)
{
    for (int i = -warm; i < rounds; i++) {
        double t0;
        memset(out, 0xff, count * sizeof(float));
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = wl_now();
        call_once(a, algo, count, out);
        if (i >= 0)
            us[i] = (wl_now() - t0) * 1e6;
    }
    MPI_Allreduce(MPI_IN_PLACE, us, rounds, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

static double gamma_n(int k, double u)
{
    return k * u / (1 - k * u);
}

typedef struct check {
    uint64_t bad;     /* elements beyond the bound (or not written: NaN) */
    uint64_t inexact; /* elements that differ from the float sum in rank order */
    double worst;     /* the largest error, as a fraction of its element's bound */
} check_t;

/* Every element of res against the reference of the n ranks' inputs. */
static void verify(const float *res, uint64_t count, int n, const char *who, check_t *c)
{
    double g = gamma_n(n - 1, ldexp(1.0, -24)) + gamma_n(n - 1, ldexp(1.0, -53));

    memset(c, 0, sizeof(*c));
    for (uint64_t i = 0; i < count; i++) {
        double exact = 0, mag = 0, err;
        float ordered = 0;
        for (int r = 0; r < n; r++) {
            float v = value(r, i);
            exact += v;
            mag += fabs(v);
            ordered = r == 0 ? v : ordered + v;
        }
        err = fabs((double)res[i] - exact);
        c->inexact += res[i] != ordered;
        if (!(err <= g * mag)) { /* NaN too */
            if (c->bad++ < 3)
                fprintf(stderr, "rank %d: %s: element %llu is %.9g, the sum is %.12g\n",
                        wl_rank, who, (unsigned long long)i, (double)res[i], exact);
        } else if (mag > 0 && err / (g * mag) > c->worst) {
            c->worst = err / (g * mag);
        }
    }
}

/* 1 when every rank's res equals rank 0's, bit for bit. */
static int identical(const float *res, uint64_t count, float *tmp)
{
    int same = 1;

    if (wl_rank == 0) {
        MPI_Bcast((void *)res, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    } else {
        MPI_Bcast(tmp, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        same = memcmp(res, tmp, count * sizeof(float)) == 0;
    }
    return wl_agree(same);
}

/* ---- the table ------------------------------------------------------------ */

typedef struct result {
    bench_stats_t st;
    double busbw; /* GB/s, from the median */
    int same;     /* identical on every rank */
    int good;     /* within the bound everywhere (and what the algorithm promises) */
    double worst; /* the largest error / bound over the ranks */
} result_t;

static double busbw(uint64_t bytes, double us, int n)
{
    return us > 0 ? bytes / (us * 1e3) * 2.0 * (n - 1) / n : 0;
}

/* Measures and verifies one size, gpuport's way then MPI's; 1 if verified. */
static int run_size(ar_t *a, const wl_opts_t *o, uint64_t bytes, float *mpi_out, float *tmp)
{
    uint64_t count = bytes / sizeof(float);
    enum algo algo = algo_for(a, bytes);
    int base = (int)((o->small ? 4 * WL_MIB : 256 * WL_MIB) / bytes);
    int rounds = wl_rounds(o, base < 5 ? 5 : base > (o->small ? 50 : 1000) ? (o->small ? 50 : 1000)
                                                                           : base);
    int warm = rounds / 10 + 1, all_good;
    double *us = malloc((size_t)rounds * sizeof(double));
    float *out = at(a, a->off_out);
    result_t gp = {0}, mpi = {0};
    check_t c;

    if (!us) {
        fprintf(stderr, "rank %d: no memory for %d samples\n", wl_rank, rounds);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    timed(a, algo, count, out, warm, rounds, us);
    bench_stats_of(us, (uint64_t)rounds, &gp.st);
    verify(out, count, a->n, "gpuport", &c);
    /* the direct scheme adds in rank order: exactly the float reference */
    gp.good = wl_agree(c.bad == 0 && (algo != ALGO_DIRECT || c.inexact == 0));
    if (algo == ALGO_DIRECT && c.inexact)
        fprintf(stderr, "rank %d: %llu sums differ from the sum in rank order\n", wl_rank,
                (unsigned long long)c.inexact);
    MPI_Reduce(wl_rank == 0 ? MPI_IN_PLACE : &c.worst, &c.worst, 1, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    gp.worst = c.worst;
    gp.same = identical(out, count, tmp);
    gp.busbw = busbw(bytes, gp.st.median, a->n);
    if (!o->no_mpi) {
        timed(a, ALGO_MPI, count, mpi_out, warm, rounds, us);
        bench_stats_of(us, (uint64_t)rounds, &mpi.st);
        verify(mpi_out, count, a->n, "MPI", &c);
        mpi.good = wl_agree(c.bad == 0);
        MPI_Reduce(wl_rank == 0 ? MPI_IN_PLACE : &c.worst, &c.worst, 1, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        mpi.worst = c.worst;
        mpi.same = identical(mpi_out, count, tmp);
        mpi.busbw = busbw(bytes, mpi.st.median, a->n);
    }
    free(us);
    all_good = gp.good && gp.same && (o->no_mpi || mpi.good);
    if (wl_rank == 0) {
        const char *base_name = o->no_mpi ? NULL : "MPI_Allreduce(MPI_FLOAT, MPI_SUM)";
        char size_s[16];
        snprintf(size_s, sizeof(size_s), bytes >= WL_MIB ? "%llu MiB" : "%llu KiB",
                 (unsigned long long)(bytes >= WL_MIB ? bytes / WL_MIB : bytes / WL_KIB));
        printf("%8s | %-6s | %9.1f | %9.1f | %5.2f | %7.2f | %7.2f | %3s/%-3s | %4.2f/%4.2f | "
               "%8s | %d\n",
               size_s, algo_name[algo], gp.st.median, o->no_mpi ? 0.0 : mpi.st.median,
               o->no_mpi ? 0.0 : gp.st.median / mpi.st.median, gp.busbw, mpi.busbw,
               gp.same ? "yes" : "NO", o->no_mpi ? "-" : mpi.same ? "yes" : "no", gp.worst,
               mpi.worst, all_good ? "yes" : "NO", rounds);
        fflush(stdout);
        bench_out_latency(algo == ALGO_DIRECT ? "allreduce_direct" : "allreduce_ring", bytes,
                          &gp.st, base_name, &mpi.st, all_good);
        bench_out_value("allreduce_busbw", bytes, "bandwidth", "GB/s", "median", gp.busbw,
                        (uint64_t)rounds, base_name, mpi.busbw, all_good);
    }
    return all_good;
}

int main(int argc, char **argv)
{
    static const uint64_t small_sizes[] = {4 * WL_KIB, 64 * WL_KIB, WL_MIB};
    static const uint64_t sizes[] = {4 * WL_KIB,  16 * WL_KIB, 64 * WL_KIB,  256 * WL_KIB,
                                     WL_MIB,      4 * WL_MIB,  16 * WL_MIB, 64 * WL_MIB};
    const uint64_t *list;
    wl_opts_t o;
    enum algo algo = ALGO_AUTO;
    int nsizes, rc, good = 1;
    uint64_t max_bytes;
    float *mpi_out, *tmp;
    char tr[64];
    ar_t a;

    rc = wl_init(&argc, &argv,
                 "  --algo A      auto (direct up to 16 KiB, ring above), direct or ring\n", &o);
    if (rc >= 0)
        return rc;
    if (argc == 3 && !strcmp(argv[1], "--algo"))
        for (int k = 0; k < 3; k++)
            if (!strcmp(argv[2], algo_name[k]))
                algo = (enum algo)k, argc = 1;
    if (argc != 1) {
        if (wl_rank == 0)
            fprintf(stderr, "%s: unknown arguments (--algo auto|direct|ring; --help)\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    list = o.small ? small_sizes : sizes;
    nsizes = o.small ? 3 : 8;
    max_bytes = list[nsizes - 1];
    mpi_out = malloc(max_bytes);
    tmp = malloc(max_bytes);
    if (!mpi_out || !tmp) {
        fprintf(stderr, "rank %d: no memory for 2 x %llu bytes\n", wl_rank,
                (unsigned long long)max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!ar_open(&a, max_bytes, algo))
        MPI_Abort(MPI_COMM_WORLD, 1); /* peers may wait in a pairwise creation */
    transports(&a, tr, sizeof(tr));
    wl_header("allreduce", "float32 sum over every rank, gpuport port channels beside "
                           "MPI_Allreduce(MPI_FLOAT, MPI_SUM)", tr);
    if (wl_rank == 0) {
        printf("# gpuport: direct (every input to every rank, summed in rank order) up to %s, "
               "ring (reduce-scatter + allgather, %llu KiB pieces) above\n",
               algo == ALGO_AUTO ? "16 KiB" : algo == ALGO_DIRECT ? "every size" : "no size",
               (unsigned long long)(PIECE_BYTES / WL_KIB));
        print_mpi_path();
        printf("# us: median over the rounds of the slowest rank's time for one call (each "
               "after a barrier); ratio: gpuport / MPI\n"
               "# busbw: size / time * 2 (n-1) / n, GB/s (nccl-tests); same: every rank's "
               "result identical (gpuport/MPI)\n"
               "# err: the largest error as a fraction of (gamma(n-1, 2^-24) + "
               "gamma(n-1, 2^-53)) * sum|x| (gpuport/MPI)\n\n");
        printf("%8s | %-6s | %9s | %9s | %5s | %7s | %7s | %7s | %9s | %8s | %s\n", "size",
               "algo", "gpuport", "MPI", "ratio", "gp bus", "MPI bus", "same", "err", "verified",
               "rounds");
    }
    for (int k = 0; k < nsizes; k++)
        good &= run_size(&a, &o, list[k], mpi_out, tmp);
    good &= wl_agree(ar_close(&a));
    free(mpi_out);
    free(tmp);
    return wl_finish(good);
}
