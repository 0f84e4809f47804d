/*
 * The MPI bootstrap: with mpi_check.c, the only code that includes mpi.h;
 * see gpuport_mpi.h. It is its own library, libgpuport_mpi, built once per
 * MPI over one libgpuport, and it uses only libgpuport's public API.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mpi_priv.h"

typedef struct mpi_ctx {
    MPI_Comm comm;
    int rank;
} mpi_ctx_t;

/* The core's log module is not exported, so errors are written here, in its
 * line format with the bootstrap subsystem's word ([UTC time] host:pid:tid
 * gpuport rR ERROR bootstrap file:line message; src/log.h has the core's),
 * the word GPUPORT_LOG_SUBSYS uses for the bootstrap; the rank is -1 until
 * the communicator's is known. Always to stderr: GPUPORT_LOG_FILE is the
 * core's. */
void mpi_log_error(const char *file, int line, int rank, const char *fmt, ...)
{
    char msg[1024], host[64] = "?", when[64] = "?", who[16] = "-", *dot;
    const char *base = strrchr(file, '/');
    struct timespec ts;
    struct tm tm;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (rank >= 0)
        snprintf(who, sizeof(who), "%d", rank);
    if (gethostname(host, sizeof(host) - 1) == 0 && (dot = strchr(host, '.')) != NULL)
        *dot = '\0';
    host[sizeof(host) - 1] = '\0';
    clock_gettime(CLOCK_REALTIME, &ts);
    if (gmtime_r(&ts.tv_sec, &tm))
        snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
    /* one fprintf per line: unbuffered stderr writes it at once, as the
     * core writes a line with one write(2) */
    fprintf(stderr, "[%s] %s:%d:%ld gpuport r%s ERROR bootstrap %s:%d %s\n", when, host, (int)getpid(),
            (long)syscall(SYS_gettid), who, base ? base + 1 : file, line, msg);
}

static gpuport_status_t mpi_status(int rank, int rc, const char *call)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (rc == MPI_SUCCESS)
        return GPUPORT_OK;
    MPI_Error_string(rc, text, &len);
    mpi_error(rank, "%s failed: %.*s", call, len, text);
    return GPUPORT_ERR_PEER;
}

static gpuport_status_t check_bytes(const mpi_ctx_t *c, size_t bytes)
{
    if (bytes > INT_MAX) {
        mpi_error(c->rank, "bootstrap message of %zu bytes is larger than MPI's int count",
                  bytes);
        return GPUPORT_ERR_INVALID_ARG;
    }
    return GPUPORT_OK;
}

static gpuport_status_t mpi_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    mpi_ctx_t *c = ctx;
    if (check_bytes(c, bytes))
        return GPUPORT_ERR_INVALID_ARG;
    return mpi_status(c->rank,
                      MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                    c->comm),
                      "MPI_Allgather");
}

static gpuport_status_t mpi_barrier(void *ctx)
{
    mpi_ctx_t *c = ctx;
    return mpi_status(c->rank, MPI_Barrier(c->comm), "MPI_Barrier");
}

static gpuport_status_t mpi_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    mpi_ctx_t *c = ctx;
    if (check_bytes(c, bytes))
        return GPUPORT_ERR_INVALID_ARG;
    return mpi_status(c->rank, MPI_Send(buf, (int)bytes, MPI_BYTE, peer, tag, c->comm),
                      "MPI_Send");
}

static gpuport_status_t mpi_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    mpi_ctx_t *c = ctx;
    MPI_Status st;
    int count = 0;
    gpuport_status_t status;

    if (check_bytes(c, bytes))
        return GPUPORT_ERR_INVALID_ARG;
    status = mpi_status(c->rank, MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, tag, c->comm, &st),
                        "MPI_Recv");
    if (status)
        return status;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if ((size_t)count != bytes) {
        mpi_error(c->rank,
                  "rank %d sent %d bytes where %zu were expected (tag %d): mismatched gpuport "
                  "versions or set-up order",
                  peer, count, bytes, tag);
        return GPUPORT_ERR_VERSION;
    }
    return GPUPORT_OK;
}

/* MPI's receives cannot be given a limit: the message is probed for until
 * it is there, sleeping from 50 us doubling to 1 ms between looks, so a
 * channel's creation waits for a late peer at that rate. */
static gpuport_status_t mpi_recv_timed(void *ctx, int peer, int tag, void *buf, size_t bytes,
                                       int timeout_ms)
{
    mpi_ctx_t *c = ctx;
    struct timespec start, now, nap = {0, 50000};
    int there = 0;
    gpuport_status_t status;

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        status = mpi_status(c->rank, MPI_Iprobe(peer, tag, c->comm, &there, MPI_STATUS_IGNORE),
                            "MPI_Iprobe");
        if (status)
            return status;
        if (there)
            return mpi_recv(ctx, peer, tag, buf, bytes);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >=
            timeout_ms)
            return GPUPORT_ERR_TIMEOUT;
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 1000000)
            nap.tv_nsec *= 2;
    }
}

static void mpi_destroy(void *ctx)
{
    mpi_ctx_t *c = ctx;
    int finalized = 0;

    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free(&c->comm);
    free(c);
}

/* The program's struct of another layout is not written: its members
 * would be at other offsets, and a smaller one would be overrun. */
gpuport_status_t gpuport_bootstrap_mpi_v(uint32_t layout, MPI_Comm comm, gpuport_bootstrap_t *bs_p)
{
    gpuport_bootstrap_t bs = {0};
    mpi_ctx_t *c;
    MPI_Comm local;
    int initialized = 0;
    const char *why = NULL;
    gpuport_status_t status;

    status = mpi_check_layout(layout);
    if (status)
        return status;
    /* before `comm` is used: it may be another MPI's handle */
    status = mpi_check_loaded();
    if (status)
        return status;
    MPI_Initialized(&initialized);
    if (!bs_p)
        why = "bootstrap_p is NULL";
    else if (!initialized)
        why = "MPI is not initialized (call MPI_Init first)";
    else if (comm == MPI_COMM_NULL)
        why = "the MPI communicator is MPI_COMM_NULL";
    if (why) {
        mpi_error(-1, "gpuport_bootstrap_mpi: %s", why);
        return GPUPORT_ERR_INVALID_ARG;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return GPUPORT_ERR_NO_MEMORY;
    status = mpi_status(-1, MPI_Comm_dup(comm, &c->comm), "MPI_Comm_dup");
    if (status) {
        free(c);
        return status;
    }
    /* Errors come back as codes that gpuport reports, instead of aborting. */
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &bs.rank);
    MPI_Comm_size(c->comm, &bs.size);
    c->rank = bs.rank;
    status = mpi_status(bs.rank,
                        MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, bs.rank,
                                            MPI_INFO_NULL, &local),
                        "MPI_Comm_split_type");
    if (status) {
        MPI_Comm_free(&c->comm);
        free(c);
        return status;
    }
    MPI_Comm_rank(local, &bs.local_rank);
    MPI_Comm_size(local, &bs.local_size);
    MPI_Comm_free(&local);
    bs.ctx = c;
    bs.allgather = mpi_allgather;
    bs.barrier = mpi_barrier;
    bs.send = mpi_send;
    bs.recv = mpi_recv;
    bs.recv_timed = mpi_recv_timed;
    bs.destroy = mpi_destroy;
    *bs_p = bs;
    return GPUPORT_OK;
}

/* *comm_p is NULL after a failure, as after gpuport_comm_create's. In
 * parentheses: the name is also gpuport_mpi.h's checking macro. */
gpuport_status_t (gpuport_comm_init_mpi)(MPI_Comm comm, gpuport_comm_t *comm_p)
{
    gpuport_bootstrap_t bs;
    gpuport_status_t status;

    if (!comm_p) {
        mpi_error(-1, "gpuport_comm_init_mpi: comm_p is NULL");
        return GPUPORT_ERR_INVALID_ARG;
    }
    *comm_p = NULL;
    status = gpuport_bootstrap_mpi_v(GPUPORT_BOOTSTRAP_LAYOUT, comm, &bs);
    if (status)
        return status;
    return gpuport_comm_create(&bs, comm_p);
}
