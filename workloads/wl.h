/*
 * The frame the workload programs share (workloads/halo.c, allreduce.c,
 * alltoall.c and their GPU versions' host sides): options every program
 * takes, the communicator, timing, the agreement on a verdict, and the
 * table's header. Figures go to tools/bench_out.h's rows too (--csv,
 * --json), beside their MPI baseline, as gpuport_bench's do.
 *
 * Every program: rank 0 prints '#' lines saying what runs where, one table
 * row per size (or per configuration) with gpuport's figure, the MPI
 * baseline's from the same run and the ratio, and whether every result was
 * verified against a reference computed on one rank; the exit status is 0
 * only if every check passed on every rank (77: cannot run here, said why).
 */
#ifndef GPUPORT_WL_H
#define GPUPORT_WL_H

#include <stdint.h>

#include <mpi.h>

#include "gpuport/gpuport.h"
#include "gpuport/gpuport_mpi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WL_KIB 1024ull
#define WL_MIB (1024ull * 1024ull)

typedef struct wl_opts {
    double iters;        /* --iters X: scales every round count (default 1) */
    int small;           /* --small: the sizes make check runs (seconds, not minutes) */
    int no_mpi;          /* --no-mpi: skip the MPI baseline */
    const char *csv;     /* --csv FILE */
    const char *json;    /* --json FILE */
} wl_opts_t;

extern int wl_rank, wl_size;

/* MPI_Init, wl_rank / wl_size, the common options (removed from argv, the
 * program's own left in order); --help prints `usage` (the program's own
 * options) after the common ones. Returns -1 to go on, or the exit status
 * to return (2 on a bad option, 0 after --help) with MPI finalized. */
int wl_init(int *argc, char ***argv, const char *usage, wl_opts_t *o);

/* gpuport_comm_init_mpi on MPI_COMM_WORLD; on failure every rank prints why
 * and the program exits 1 (collective, as the call is). */
gpuport_comm_t wl_comm(void);

/* CLOCK_MONOTONIC in seconds. */
double wl_now(void);

/* 1 when ok is nonzero on every rank (an allreduce). */
int wl_agree(int ok);

/* 1 where st is GPUPORT_OK; else 0 after saying on stderr which call
 * failed and why (wl_ok_peer: with the peer rank it concerned). */
int wl_ok(gpuport_status_t st, const char *call);
int wl_ok_peer(gpuport_status_t st, const char *call, int peer);
/* wl_ok of a call, named by its own text ("gpuport_mem_register(comm,
 * buf, bytes, &mem)"): the call and its check in one expression. */
#define WL_OK(call) wl_ok((call), #call)

/* Median of v[0..n) (sorts v). */
double wl_median(double *v, int n);

/* Rank 0: the table's opening lines: "# NAME: WHAT", then ranks, hosts,
 * the transport of a channel, the library's version and the date. */
void wl_header(const char *name, const char *what, const char *transport);

/* The rounds a measurement of `base` rounds runs under --iters (at least 1). */
int wl_rounds(const wl_opts_t *o, int base);

/* Finishes: closes the record files, MPI_Finalize, and the exit status for
 * `ok` (1: every check passed everywhere). */
int wl_finish(int ok);

#ifdef __cplusplus
}
#endif

#endif
