/*
 * The frame of gpuport's MPI tests. test/mpi/test_mpi_channels runs its
 * scenarios through harness_main (their traffic is test/mpi/traffic.h's);
 * the two-host tests use pieces: test/net/test_netns_hosts the set-up, the
 * failed checks, the agreement and the pattern, test/net/test_link_cut the
 * set-up. It offers:
 *
 *  - g_rank, g_size: this rank and the size of MPI_COMM_WORLD (harness_init);
 *  - checks that fail without exiting: REQUIRE* print where and why, with the
 *    rank that saw it, and return -1 from the calling function (TRY passes a
 *    helper's -1 on), so that every rank still meets the others to agree;
 *  - harness_agree: every rank's outcome, with a deadline after which a rank
 *    stuck elsewhere gets the job aborted rather than hung;
 *  - harness_main: a table of scenarios, "-s NAME[,NAME...]" selects, "-l"
 *    lists; rank 0 prints one PASS line per scenario with the traffic summed
 *    from every rank's g_stats, and on a failed check every rank exits 1;
 *  - reproducible content: a PRNG, a hash, and the pattern sources are
 *    filled with, so that a receiver knows what must arrive without being told;
 *  - communicators created under a temporary environment;
 *  - the order in which ranks meet to create channels (a round-robin
 *    tournament: channel creation blocks both ranks).
 */
#ifndef GPUPORT_TEST_MPI_HARNESS_H
#define GPUPORT_TEST_MPI_HARNESS_H

#include <stdint.h>

#include <mpi.h>

#include "gpuport/gpuport.h"
#include "gpuport/gpuport_mpi.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

extern int g_rank, g_size;

/* MPI_Init, then g_rank and g_size of MPI_COMM_WORLD. */
void harness_init(int *argc, char ***argv);

/* --- failing without exiting: the ranks must still agree on the outcome --- */

/* Prints "rank R: FILE:LINE: CHECK failed: WHAT: MESSAGE"; returns -1. */
__attribute__((format(printf, 4, 5)))
int fail_at(const char *file, int line, const char *what, const char *fmt, ...);

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

/* 1 when ok is nonzero on every rank. A rank that has not arrived after
 * HARNESS_AGREE_LIMIT_S (longer than any gpuport timeout) aborts the job. */
#define HARNESS_AGREE_LIMIT_S 60.0
int harness_agree(int ok);

/* --- scenarios --- */

/* what the ranks moved and checked in the current scenario */
typedef struct stats {
    unsigned long long channels, puts, bytes, signals, verified;
} stats_t;

extern stats_t g_stats;

typedef struct scenario {
    const char *name;
    int (*run)(void); /* 0: passed; -1: a check failed and printed why */
    const char *what;
} scenario_t;

/* The whole program: harness_init, the options, then setup (NULL: none) on
 * every rank, then the scenarios chosen, each followed by the agreement.
 * Returns main's exit status: 0, 1 (a check failed), 2 (usage). */
int harness_main(int argc, char **argv, const scenario_t *scenarios, int n, void (*setup)(void));
/* Called by harness_main just before it finalizes MPI, where set (the
 * program's own communicators are freed there). */
extern void (*harness_before_finalize)(void);

/* --- reproducible content --- */

typedef struct rng {
    uint64_t s;
} rng_t;

/* CLOCK_MONOTONIC in ns (the programs link the installed libraries, whose
 * own clock is internal) */
uint64_t harness_now_ns(void);

uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d);
uint64_t rng_next(rng_t *r);
uint64_t rng_below(rng_t *r, uint64_t n);

/* The byte at position pos of a source filled under tag: differs between
 * tags and between neighbouring positions, so stale or shifted data shows. */
unsigned char pattern(uint64_t tag, uint64_t pos);

/* buf[off, off + size) filled with the pattern of tag */
void fill(unsigned char *buf, uint64_t off, uint64_t size, uint64_t tag);

/* --- communicators under a temporary environment --- */

/* The configuration is read once, at creation: the NULL-terminated
 * name/value pairs (8 at most) are set for gpuport_comm_init_mpi only, then
 * restored (or unset where they were unset). */
gpuport_status_t comm_init_env(const char *const *kv, gpuport_comm_t *comm_p);

/* comm_init_env that must succeed, with this rank's rank and size */
int comm_open(const char *const *kv, gpuport_comm_t *comm_p);

/* --- channel order --- */

/* Channel creation is a blocking exchange between the two ranks, so every
 * rank must meet its peers in an order that pairs everyone up: the rounds of
 * a round-robin tournament (circle method). tournament_partner(r) is this
 * rank's partner in round r < tournament_rounds(), or -1 for a bye. */
int tournament_rounds(void);
int tournament_partner(int r);

#endif
