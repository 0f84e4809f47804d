/*
 * gpuport_bench --rma (tools/bench_rma.c): get, atomic_add and accumulate on
 * one host-memory port channel between 2 ranks, each beside put, MPI's
 * one-sided call and (for the adds) the host's own atomics. Called by
 * tools/gpuport_bench.c only.
 */
#ifndef GPUPORT_BENCH_RMA_H
#define GPUPORT_BENCH_RMA_H

#include <mpi.h>

/* Runs the tables for `pair` (exactly 2 ranks; rank 0 prints and writes the
 * --csv/--json rows); every round count scaled by iter_scale; baselines 0:
 * no MPI figures (--no-mpi). Collective over pair. Returns the exit status:
 * 0, 1 after a data mismatch or a failed operation (a transport's refusal
 * is reported in its row and is not a failure), 2 for a pair of other
 * than 2 ranks. */
int bench_rma_run(MPI_Comm pair, double iter_scale, int baselines, const char *prog);

#endif
