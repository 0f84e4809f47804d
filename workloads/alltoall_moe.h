/*
 * The case both all-to-all programs run (workloads/alltoall.c on the host,
 * alltoall_gpu.cu with kernels): an expert-parallel mixture-of-experts
 * layer's tokens, routing, messages and buffer layout, the reference their
 * results are checked against, and the options that size them. Host code;
 * C and CUDA's C++ both include it.
 *
 * Every rank holds T tokens of H float32 values; each token picks K
 * distinct experts of E (E / ranks on each rank, expert e on rank
 * e / (E / ranks)) and K weights, from a seeded generator that gives every
 * rank the same table. Dispatch sends a token once per destination rank (a
 * message: moe_hdr_t, then the row); the expert step multiplies the row by
 * (e + 1) for each of the destination's experts e the header names; combine
 * returns one row per expert to the token's rank, which sums them with the
 * weights: out[t] = sum_k w_k * (e_k + 1) * x[t].
 *
 * The sums are exact, so results are checked bit for bit: values are
 * m / 64 with |m| <= 128, weights a_k / 64 with a_k >= 1 summing to 64, and
 * E <= MOE_MAX_EXPERTS, so every product and partial sum is a multiple of
 * 2^-12 of magnitude at most 2^12, which float32 holds exactly, in any
 * order of summation.
 */
#ifndef GPUPORT_WL_ALLTOALL_MOE_H
#define GPUPORT_WL_ALLTOALL_MOE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#define MOE_MAX_EXPERTS 2048 /* keeps the sums exact (above) */

/* A dispatched message: this header, then the H values of the row. */
typedef struct moe_hdr {
    uint32_t token;  /* index among the source rank's tokens */
    uint32_t source; /* the token's rank */
    uint64_t mask;   /* bit j: the destination's expert j (of its epr) */
} moe_hdr_t;

typedef struct moe {
    int ranks, me;
    int T, H, K, epr, E;
    int L; /* rows one rank returns for a token at most: min(K, epr) */
    uint64_t seed;
    size_t msg, row; /* bytes of a message and of a row */
    int *expert;     /* [ranks][T][K]: every rank's routing */
    int *weight;     /* [ranks][T][K]: a_k; the weight is a_k / 64 */
} moe_t;

/* Offsets in a rank's one registered region: count words (one per rank),
 * then dispatch send and receive, combine send and receive, each a slot per
 * rank sized for the worst case (T messages; T * L rows), so that no sender
 * needs an offset from its receiver. */
typedef struct moe_areas {
    size_t count, dsend, drecv, csend, crecv, bytes;
    size_t dslot, cslot; /* bytes of a dispatch slot, of a combine slot */
} moe_areas_t;

#define MOE_USAGE                                                                                  \
    "  --tokens T    tokens per rank (default 128; --small 32)\n"                                  \
    "  --hidden H    float32 values per token (default 7168; --small 256)\n"                       \
    "  --topk K      experts per token (default 8; --small 2)\n"                                   \
    "  --experts-per-rank N   (default 8)\n"                                                       \
    "  --seed S      the routing's and the values' seed (default 1)\n"

/* The sizes: defaults, --small's, then the options; 0 after a message (on
 * rank 0) for a bad one. */
static inline int moe_options(int argc, char **argv, int small, int rank, int ranks, moe_t *m)
{
    static const char *const names[] = {"--tokens", "--hidden", "--topk", "--experts-per-rank",
                                        "--seed"};
    int *dst[] = {&m->T, &m->H, &m->K, &m->epr, NULL};

    memset(m, 0, sizeof(*m));
    m->ranks = ranks;
    m->me = rank;
    m->T = small ? 32 : 128;
    m->H = small ? 256 : 7168;
    m->K = small ? 2 : 8;
    m->epr = 8;
    m->seed = 1;
    for (int i = 1; i < argc; i++) {
        int which = -1;
        char *end;
        long long v;
        for (int n = 0; n < 5; n++)
            if (!strcmp(argv[i], names[n]))
                which = n;
        if (which < 0 || i + 1 >= argc) {
            if (rank == 0)
                fprintf(stderr, "%s: unknown option or missing value: %s\n", argv[0], argv[i]);
            return 0;
        }
        v = strtoll(argv[++i], &end, 0);
        if (*end || v < 1 || (which < 4 && v > 1 << 20)) {
            if (rank == 0)
                fprintf(stderr, "%s: %s needs a number from 1 to 2^20, not '%s'\n", argv[0],
                        names[which], argv[i]);
            return 0;
        }
        if (dst[which])
            *dst[which] = (int)v;
        else
            m->seed = (uint64_t)v;
    }
    m->E = m->epr * m->ranks;
    if (m->K > m->E || m->K > 64 || m->epr > 64 || m->E > MOE_MAX_EXPERTS) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: needs K <= E, K <= 64, experts per rank <= 64, E <= %d (K %d, E %d)\n",
                    argv[0], MOE_MAX_EXPERTS, m->K, m->E);
        return 0;
    }
    m->L = m->K < m->epr ? m->K : m->epr;
    m->row = (size_t)m->H * sizeof(float);
    m->msg = sizeof(moe_hdr_t) + m->row;
    return 1;
}

static inline moe_areas_t moe_areas(const moe_t *m)
{
    moe_areas_t a;

    a.dslot = (size_t)m->T * m->msg;
    a.cslot = (size_t)m->T * m->L * m->row;
    a.count = 0;
    a.dsend = (8 * (size_t)m->ranks + 255) / 256 * 256;
    a.drecv = a.dsend + m->ranks * a.dslot;
    a.csend = a.drecv + m->ranks * a.dslot;
    a.crecv = a.csend + m->ranks * a.cslot;
    a.bytes = a.crecv + m->ranks * a.cslot;
    return a;
}

static inline uint64_t moe_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Rank r's token t, value h: m / 64, -128 <= m <= 128. */
static inline float moe_value(const moe_t *m, int r, int t, int h)
{
    uint64_t z = moe_mix(m->seed ^ moe_mix((uint64_t)r << 40 ^ (uint64_t)t << 20 ^ (uint64_t)h));

    return (float)((int)(z % 257) - 128) / 64.0f;
}

static inline const int *moe_experts(const moe_t *m, int r, int t)
{
    return m->expert + ((size_t)r * m->T + t) * m->K;
}

static inline const int *moe_weights(const moe_t *m, int r, int t)
{
    return m->weight + ((size_t)r * m->T + t) * m->K;
}

/* Every rank's routing, from the seed: K distinct experts per token, and
 * weights a_k / 64, a_k >= 1, summing to 64. 0 when out of memory. */
static inline int moe_route(moe_t *m)
{
    size_t n = (size_t)m->ranks * m->T * m->K;

    m->expert = (int *)malloc(n * sizeof(int));
    m->weight = (int *)malloc(n * sizeof(int));
    if (!m->expert || !m->weight)
        return 0;
    for (int r = 0; r < m->ranks; r++)
        for (int t = 0; t < m->T; t++) {
            int *e = m->expert + ((size_t)r * m->T + t) * m->K;
            int *w = m->weight + ((size_t)r * m->T + t) * m->K;
            uint64_t z = moe_mix(m->seed ^ ((uint64_t)r << 32 | (uint64_t)t));
            for (int k = 0; k < m->K; k++) {
                int dup;
                do {
                    z = moe_mix(z);
                    e[k] = (int)(z % (uint64_t)m->E);
                    dup = 0;
                    for (int j = 0; j < k; j++)
                        dup |= e[j] == e[k];
                } while (dup);
                w[k] = 1;
            }
            for (int u = m->K; u < 64; u++) {
                z = moe_mix(z);
                w[z % (uint64_t)m->K]++;
            }
        }
    return 1;
}

static inline void moe_free(moe_t *m)
{
    free(m->expert);
    free(m->weight);
}

/* The experts of rank d that rank r's token t picked, as a mask. */
static inline uint64_t moe_mask(const moe_t *m, int r, int t, int d)
{
    const int *e = moe_experts(m, r, t);
    uint64_t mask = 0;

    for (int k = 0; k < m->K; k++)
        if (e[k] / m->epr == d)
            mask |= 1ull << (e[k] % m->epr);
    return mask;
}

/* Rank s's messages for rank d, packed in token order at out; their number. */
static inline int moe_pack(const moe_t *m, int s, int d, unsigned char *out)
{
    int n = 0;

    for (int t = 0; t < m->T; t++) {
        moe_hdr_t h = {(uint32_t)t, (uint32_t)s, moe_mask(m, s, t, d)};
        unsigned char *p = out + (size_t)n * m->msg;
        if (!h.mask)
            continue;
        memcpy(p, &h, sizeof(h));
        for (int i = 0; i < m->H; i++) {
            float v = moe_value(m, s, t, i);
            memcpy(p + sizeof(h) + (size_t)i * sizeof(float), &v, sizeof(v));
        }
        n++;
    }
    return n;
}

/* Where this rank's tokens get their rows back: rank p returns them in
 * token order, a token's in the order of p's experts, into slot p.
 * pos[t * K + k]: the row (counted from the combine receive area) of token
 * t's k-th expert; rows[p]: how many rank p returns. */
static inline void moe_returns(const moe_t *m, size_t *pos, int *rows)
{
    for (int p = 0; p < m->ranks; p++)
        rows[p] = 0;
    for (int t = 0; t < m->T; t++) {
        const int *e = moe_experts(m, m->me, t);
        for (int p = 0; p < m->ranks; p++) {
            uint64_t mask = moe_mask(m, m->me, t, p);
            for (int k = 0; k < m->K; k++)
                if (e[k] / m->epr == p)
                    pos[(size_t)t * m->K + k] =
                        (size_t)p * m->T * m->L + (size_t)rows[p] +
                        (size_t)__builtin_popcountll(mask & ((1ull << (e[k] % m->epr)) - 1));
            rows[p] += __builtin_popcountll(mask);
        }
    }
}

/* The reference output of rank r's tokens, from the routing alone. */
static inline void moe_reference(const moe_t *m, int r, float *out)
{
    for (int t = 0; t < m->T; t++) {
        const int *e = moe_experts(m, r, t), *w = moe_weights(m, r, t);
        for (int h = 0; h < m->H; h++) {
            float x = moe_value(m, r, t, h), sum = 0;
            for (int k = 0; k < m->K; k++)
                sum += (float)w[k] / 64.0f * (x * (float)(e[k] + 1));
            out[(size_t)t * m->H + h] = sum;
        }
    }
}

/* What stays the same every round on this rank: its messages for each
 * rank p packed at send + p * dslot (nsend[p] of them), those it must
 * receive at expect + p * dslot (expect_n[p]), the MPI displacements of
 * slot p (ddsp: p * T messages, cdsp: p * T * L rows), where its rows come
 * back (moe_returns' pos and rows), its reference output (ref, [T][H]),
 * the MPI types of a message and a row. */
static inline void moe_tables(const moe_t *m, size_t dslot, unsigned char *send, int *nsend,
                              unsigned char *expect, int *expect_n, int *ddsp, int *cdsp,
                              size_t *pos, int *rows, float *ref, MPI_Datatype *msg_type,
                              MPI_Datatype *row_type)
{
    for (int p = 0; p < m->ranks; p++) {
        nsend[p] = moe_pack(m, m->me, p, send + p * dslot);
        expect_n[p] = moe_pack(m, p, m->me, expect + p * dslot);
        ddsp[p] = p * m->T;
        cdsp[p] = p * m->T * m->L;
    }
    moe_returns(m, pos, rows);
    moe_reference(m, m->me, ref);
    MPI_Type_contiguous((int)m->msg, MPI_BYTE, msg_type);
    MPI_Type_commit(msg_type);
    MPI_Type_contiguous(m->H, MPI_FLOAT, row_type);
    MPI_Type_commit(row_type);
}

static int moe_complaints; /* the first few failed checks are told */

/* The counts and every byte dispatched to this rank (recv, a slot of
 * dslot bytes per rank) against the messages packed from the table. */
static inline int moe_check_messages(const moe_t *m, const char *method, const unsigned char *recv,
                                     const int *nrecv, const unsigned char *expect,
                                     const int *expect_n, size_t dslot)
{
    for (int s = 0; s < m->ranks; s++) {
        if (nrecv[s] != expect_n[s]) {
            if (moe_complaints++ < 5)
                fprintf(stderr, "rank %d: %s: %d messages from rank %d, expected %d\n", m->me,
                        method, nrecv[s], s, expect_n[s]);
            return 0;
        }
        if (memcmp(recv + s * dslot, expect + s * dslot, (size_t)nrecv[s] * m->msg)) {
            if (moe_complaints++ < 5)
                fprintf(stderr, "rank %d: %s: the messages from rank %d differ from the table's\n",
                        m->me, method, s);
            return 0;
        }
    }
    return 1;
}

/* Rank r's output, bit for bit. */
static inline int moe_check_output(const moe_t *m, const char *method, int r, const float *out,
                                   const float *ref)
{
    for (size_t i = 0; i < (size_t)m->T * m->H; i++)
        if (memcmp(&out[i], &ref[i], sizeof(float))) {
            if (moe_complaints++ < 5)
                fprintf(stderr, "rank %d: %s: rank %d token %zu value %zu is %.9g, expected %.9g\n",
                        m->me, method, r, i / m->H, i % m->H, out[i], ref[i]);
            return 0;
        }
    return 1;
}

/* After a method's last round (collective): rank 0 checks every rank's
 * output (out, [T][H]) against the reference it computes itself; ref is
 * scratch, left holding this rank's reference. 1 when all match. */
static inline int moe_check_all(const moe_t *m, const char *method, const float *out, float *ref)
{
    float *all = m->me == 0 ? (float *)malloc((size_t)m->ranks * m->T * m->row) : NULL;
    int good = 1;

    MPI_Gather(out, m->T * m->H, MPI_FLOAT, all, m->T * m->H, MPI_FLOAT, 0, MPI_COMM_WORLD);
    for (int r = 0; m->me == 0 && r < m->ranks && good; r++) {
        moe_reference(m, r, ref);
        good = all && moe_check_output(m, method, r, all + (size_t)r * m->T * m->H, ref);
    }
    moe_reference(m, m->me, ref);
    free(all);
    return good;
}

/* Rank 0: the case's '#' lines, after wl_header; the rows and bytes that
 * dispatch and combine move in a round, over all ranks. */
static inline void moe_describe(const moe_t *m, size_t *drows, size_t *crows)
{
    *drows = *crows = 0;
    for (int r = 0; r < m->ranks; r++)
        for (int t = 0; t < m->T; t++)
            for (int d = 0; d < m->ranks; d++) {
                uint64_t mask = moe_mask(m, r, t, d);
                *drows += mask != 0;
                *crows += (size_t)__builtin_popcountll(mask);
            }
    printf("# T %d tokens per rank, H %d float32, top-%d of E %d experts (%d per rank), "
           "seed %llu\n",
           m->T, m->H, m->K, m->E, m->epr, (unsigned long long)m->seed);
    printf("# dispatch: a message (16 B header + row) per token and destination rank, its "
           "count with the signal; MPI: MPI_Alltoall of the counts, then MPI_Alltoallv\n");
    printf("# combine: a row per token and expert back to the token's rank, which knows the "
           "counts from its routing; MPI: MPI_Alltoallv\n");
}

#endif
