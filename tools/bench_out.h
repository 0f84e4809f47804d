/*
 * gpuport_bench's records (tools/bench_out.c): the latency statistics every
 * table prints, and the rows of --csv FILE and --json FILE. Host mode
 * (tools/gpuport_bench.c) and GPU mode (tools/bench_gpu.cu, bench_small.cu)
 * write through here; only the rank that prints the tables opens the files,
 * and on every other rank the row calls do nothing.
 *
 * One row is one size of one measurement: gpuport's figure beside its
 * baseline's, measured in the same run, and the run's context (machine,
 * version, commit, date, ranks, transport, memory) repeated on every row so
 * that rows of several files can be mixed. The columns, in order, are
 * BENCH_OUT_COLUMNS below; docs/PERFORMANCE.md ("Records and plots") says
 * what each holds.
 * The CSV has one header line and one line per row, nothing else; the JSON
 * is {"header": {...the run...}, "rows": [{...one object per row, the CSV's
 * columns as keys...}]}. A figure that was not measured is an empty CSV
 * field and a JSON null.
 */
#ifndef GPUPORT_BENCH_OUT_H
#define GPUPORT_BENCH_OUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_OUT_COLUMNS                                                                      \
    "kind,measurement,size_bytes,metric,unit,stat,value,min,median,mean,p99,samples,"           \
    "baseline,baseline_value,baseline_min,baseline_median,baseline_mean,baseline_p99,"          \
    "baseline_samples,ratio,verified,ranks,transport,memory,host,cpu,gpu,version,commit,date"

/* Statistics of n samples; n == 0: none were kept (only a total or a mean). */
typedef struct bench_stats {
    uint64_t n;
    double min, median, mean, p99; /* p99: nearest rank (the largest below 100 samples) */
} bench_stats_t;

/* Sorts v[0..n) and fills *s_p; n == 0 gives n == 0 and every field 0. */
void bench_stats_of(double *v, uint64_t n, bench_stats_t *s_p);

/* One row. Fields left 0 / NULL are empty in the files. */
typedef struct bench_row {
    const char *measurement; /* e.g. "pingpong", "put_bw", "fifo_push_sync" */
    uint64_t size;           /* message bytes; 0: the measurement has no size */
    const char *metric;      /* "latency", "bandwidth", "rate", "cpu" */
    const char *unit;        /* "us", "GB/s" (1e9 B/s), "M/s", "% of a core" */
    const char *stat;        /* what value is: "median", "mean", "total" (bytes or
                              * operations over the time of all timed rounds), "once" */
    double value;            /* gpuport's figure; <= 0: not measured */
    bench_stats_t st;        /* gpuport's samples, for latencies */
    uint64_t samples;        /* timed rounds behind value (st.n where there are stats) */
    const char *baseline;    /* what the baseline did; NULL: no baseline */
    double baseline_value;   /* same stat and unit as value; <= 0: not measured */
    bench_stats_t bst;
    uint64_t baseline_samples;
    int verified;            /* 1 every byte checked and right, 0 wrong, -1 nothing checked */
    const char *memory;      /* NULL: the run's, from bench_out_channel */
} bench_row_t;

/* Rank 0, before any measurement: opens the files (either path may be NULL)
 * and writes the CSV header line. -1 after a message naming the option, the
 * path and errno. */
int bench_out_open(const char *csv, const char *json, int argc, char **argv);
/* Whether a file is open (only where bench_out_open succeeded). */
int bench_out_active(void);
/* How processes that share one GPU run on it, for the tables' headers:
 * "under MPS" where CUDA_MPS_PIPE_DIRECTORY is set (as scripts/with-mps.sh
 * sets it), else "time-sliced". */
const char *bench_gpu_sharing(void);
/* The run's context, before the first row: kind "host" or "gpu", the GPU
 * the reporting rank used ("" in host mode), ranks. Host name, CPU model,
 * version, commit and date are found here. */
void bench_out_context(const char *kind, const char *gpu, int ranks);
/* The transport and memory that later rows carry. */
void bench_out_channel(const char *transport, const char *memory);
void bench_out_row(const bench_row_t *r);
/* A latency row: value is the median of st, the baseline's of bst (either
 * may have n == 0: then its mean, st.mean, is used as "mean"). */
void bench_out_latency(const char *measurement, uint64_t size, const bench_stats_t *st,
                       const char *baseline, const bench_stats_t *bst, int verified);
/* A row of one figure beside an optional baseline's (same stat and unit). */
void bench_out_value(const char *measurement, uint64_t size, const char *metric,
                     const char *unit, const char *stat, double value, uint64_t samples,
                     const char *baseline, double baseline_value, int verified);
/* Closes the files: 0, or -1 after a message if a write failed. */
int bench_out_close(void);

/* The build's git commit (git describe --always --dirty at make time), or
 * "unknown" outside a git checkout. */
const char *bench_out_commit(void);

#ifdef __cplusplus
}
#endif

#endif
