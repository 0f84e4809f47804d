/*
 * The MPI bootstrap: with mpi_check.c, the only code that includes mpi.h;
 * see gpuport_mpi.h. It is its own library, libgpuport_mpi, built once per
 * MPI over one libgpuport, and it uses only libgpuport's public API.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
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
    int size;
} mpi_ctx_t;

/* The hellos of a timed allgather, on gpuport's duplicate only: the
 * highest tag every MPI allows (MPI_TAG_UB is at least 32767); the core's
 * and the transports' tags stay below it (src/bootstrap.h). */
#define TAG_HELLO 32767

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

/* A wait that MPI cannot bound, paced: looks at first, then naps from
 * 50 us doubling to 1 ms between looks. A limit below 0 is none; 0 looks
 * once. */
typedef struct pace {
    struct timespec start, nap;
    int timeout_ms;
} pace_t;

static void pace_begin(pace_t *p, int timeout_ms)
{
    clock_gettime(CLOCK_MONOTONIC, &p->start);
    p->nap.tv_sec = 0;
    p->nap.tv_nsec = 50000;
    p->timeout_ms = timeout_ms;
}

/* 1 once the limit has passed; else naps and returns 0. */
static int pace_expired(pace_t *p)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    if (p->timeout_ms >= 0 && (now.tv_sec - p->start.tv_sec) * 1000 +
                                      (now.tv_nsec - p->start.tv_nsec) / 1000000 >=
                                  p->timeout_ms)
        return 1;
    nanosleep(&p->nap, NULL);
    if (p->nap.tv_nsec < 1000000)
        p->nap.tv_nsec *= 2;
    return 0;
}

/* MPI's receives cannot be given a limit: the message is probed for until
 * it is there, so a channel's creation waits for a late peer at the pace's
 * rate. */
static gpuport_status_t mpi_recv_timed(void *ctx, int peer, int tag, void *buf, size_t bytes,
                                       int timeout_ms)
{
    mpi_ctx_t *c = ctx;
    int there = 0;
    gpuport_status_t status;
    pace_t pace;

    pace_begin(&pace, timeout_ms);
    for (;;) {
        status = mpi_status(c->rank, MPI_Iprobe(peer, tag, c->comm, &there, MPI_STATUS_IGNORE),
                            "MPI_Iprobe");
        if (status)
            return status;
        if (there)
            return mpi_recv(ctx, peer, tag, buf, bytes);
        if (pace_expired(&pace))
            return GPUPORT_ERR_TIMEOUT;
    }
}

/* A nonblocking collective's request, tested until it completes or
 * timeout_ms (0: no limit) has passed: GPUPORT_ERR_TIMEOUT with the
 * request still pending, which MPI cannot cancel. */
static gpuport_status_t request_wait(int rank, MPI_Request *req, int timeout_ms,
                                     const char *call)
{
    int done = 0;
    gpuport_status_t status;
    pace_t pace;

    pace_begin(&pace, timeout_ms > 0 ? timeout_ms : -1);
    for (;;) {
        status = mpi_status(rank, MPI_Test(req, &done, MPI_STATUS_IGNORE), call);
        if (status || done)
            return status;
        if (pace_expired(&pace))
            return GPUPORT_ERR_TIMEOUT;
    }
}

/* A timed allgather's hellos: every rank sends rank 0 one, and rank 0
 * sends every rank one, each before the rank enters the collective. At a
 * timeout they say who had come: to rank 0 every rank, to the others rank
 * 0. Sent on gpuport's duplicate only, never on the application's
 * communicator, where they could match its receives. */
typedef struct hellos {
    int n;              /* peers: size - 1 on rank 0, else 1 (0 alone) */
    MPI_Request *reqs;  /* n receives, then n sends */
} hellos_t;

static gpuport_status_t hellos_post(const mpi_ctx_t *c, hellos_t *h)
{
    static char none;
    gpuport_status_t status = GPUPORT_OK;

    h->n = c->size == 1 ? 0 : c->rank == 0 ? c->size - 1 : 1;
    h->reqs = malloc(2 * (size_t)(h->n ? h->n : 1) * sizeof(*h->reqs));
    if (!h->reqs)
        return GPUPORT_ERR_NO_MEMORY;
    for (int i = 0; i < h->n && !status; i++) {
        int peer = c->rank == 0 ? i + 1 : 0;
        status = mpi_status(c->rank, MPI_Irecv(&none, 0, MPI_BYTE, peer, TAG_HELLO, c->comm,
                                               &h->reqs[i]),
                            "MPI_Irecv");
        if (!status)
            status = mpi_status(c->rank, MPI_Isend(&none, 0, MPI_BYTE, peer, TAG_HELLO, c->comm,
                                                   &h->reqs[h->n + i]),
                                "MPI_Isend");
    }
    return status;
}

/* After the collective completed: every hello was sent before it. */
static void hellos_end(hellos_t *h)
{
    MPI_Waitall(2 * h->n, h->reqs, MPI_STATUSES_IGNORE);
    free(h->reqs);
}

/* After a timeout: who had come (absent[r] as gpuport.h's allgather_timed
 * says), the receives still open cancelled, the sends left to MPI. */
static void hellos_abandon(const mpi_ctx_t *c, hellos_t *h, signed char *absent)
{
    for (int i = 0; i < h->n; i++) {
        int came = 0, cancelled = 0;
        MPI_Status st;

        MPI_Test(&h->reqs[i], &came, MPI_STATUS_IGNORE);
        if (!came) {
            MPI_Cancel(&h->reqs[i]);
            MPI_Wait(&h->reqs[i], &st);
            MPI_Test_cancelled(&st, &cancelled);
            came = !cancelled;
        }
        if (absent)
            absent[c->rank == 0 ? i + 1 : 0] = (signed char)!came;
        MPI_Request_free(&h->reqs[h->n + i]);
    }
    free(h->reqs);
}

/* MPI reads the send part and writes the receive part until the
 * collective completes, which a late rank may still bring about: an
 * abandoned one's stays allocated. */
typedef struct gather {
    MPI_Request req;
    _Alignas(8) char data[]; /* this rank's bytes, then every rank's */
} gather_t;

/* Iallgather with hellos (above), tested until the limit. */
static gpuport_status_t mpi_allgather_timed(void *ctx, const void *send, void *recv,
                                            size_t bytes, int timeout_ms, signed char *absent)
{
    mpi_ctx_t *c = ctx;
    gather_t *g;
    hellos_t h = {0};
    gpuport_status_t status;

    if (check_bytes(c, bytes))
        return GPUPORT_ERR_INVALID_ARG;
    if (absent) {
        for (int r = 0; r < c->size; r++)
            absent[r] = -1;
        absent[c->rank] = 0;
    }
    g = malloc(sizeof(*g) + bytes * ((size_t)c->size + 1));
    if (!g) {
        mpi_error(c->rank, "cannot allocate %zu bytes for an allgather",
                  bytes * ((size_t)c->size + 1));
        return GPUPORT_ERR_NO_MEMORY;
    }
    memcpy(g->data, send, bytes);
    status = hellos_post(c, &h);
    if (!status)
        status = mpi_status(c->rank,
                            MPI_Iallgather(g->data, (int)bytes, MPI_BYTE, g->data + bytes,
                                           (int)bytes, MPI_BYTE, c->comm, &g->req),
                            "MPI_Iallgather");
    if (status) {
        /* nothing is pending but hellos; the bootstrap is not used again */
        free(h.reqs);
        free(g);
        return status;
    }
    status = request_wait(c->rank, &g->req, timeout_ms, "MPI_Iallgather");
    if (status) {
        hellos_abandon(c, &h, absent);
        return status; /* g stays: the collective is still MPI's */
    }
    hellos_end(&h);
    memcpy(recv, g->data + bytes, bytes * (size_t)c->size);
    free(g);
    return GPUPORT_OK;
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

/* gpuport's duplicate of comm, or GPUPORT_ERR_TIMEOUT when not every rank
 * has called within the limit: the duplicate then stays pending on comm
 * (MPI cannot cancel it), its handle's place allocated for MPI to write. */
static gpuport_status_t dup_timed(MPI_Comm comm, int rank, uint64_t timeout_ms, MPI_Comm *dup_p)
{
    struct pending_dup {
        MPI_Request req;
        MPI_Comm dup;
    } *d = malloc(sizeof(*d));
    gpuport_status_t status;

    if (!d)
        return GPUPORT_ERR_NO_MEMORY;
    status = mpi_status(rank, MPI_Comm_idup(comm, &d->dup, &d->req), "MPI_Comm_idup");
    if (status) {
        free(d);
        return status;
    }
    status = request_wait(rank, &d->req, timeout_ms > INT_MAX ? INT_MAX : (int)timeout_ms,
                          "MPI_Comm_idup");
    if (status == GPUPORT_ERR_TIMEOUT)
        mpi_error(rank,
                  "gpuport_bootstrap_mpi: not every rank of the MPI communicator called "
                  "gpuport_bootstrap_mpi or gpuport_comm_init_mpi within "
                  "GPUPORT_TIMEOUT_MS=%" PRIu64 " ms: this rank waited in the communicator's duplicate (MPI_Comm_idup), which "
                  "cannot tell which ranks have not (gpuport sends nothing of its own on the "
                  "application's communicator). The communicator was not created. MPI cannot "
                  "cancel the duplicate: it stays pending on the application's communicator "
                  "and matches the next collective that each missing rank starts there, so "
                  "those ranks must call gpuport_bootstrap_mpi or gpuport_comm_init_mpi before "
                  "any other collective on it (that call then times out in its next step)",
                  timeout_ms);
    if (status)
        return status; /* d stays: the duplicate is still MPI's */
    *dup_p = d->dup;
    free(d);
    return GPUPORT_OK;
}

/* The ranks marked 1 in absent, as "rank 2" or "ranks 2, 5" (the first
 * eight, then how many in all), and how many; src/comm/gather.c's wording,
 * which this library, over the public API only, cannot call. */
static int absent_text(const signed char *absent, int size, char *buf, size_t len)
{
    int n = 0, shown = 0;
    size_t used;

    for (int r = 0; r < size; r++)
        n += absent[r] == 1;
    if (n == 0)
        return 0;
    used = (size_t)snprintf(buf, len, "%s", n == 1 ? "rank" : "ranks");
    for (int r = 0; r < size && shown < 8 && used < len; r++)
        if (absent[r] == 1)
            used += (size_t)snprintf(buf + used, len - used, "%s %d", shown++ ? "," : "", r);
    if (n > shown && used < len)
        snprintf(buf + used, len - used, ", ... (%d in all)", n);
    return n;
}

/* 64-bit FNV-1a of the processor name: the node's identity. */
static uint64_t node_id(void)
{
    char name[MPI_MAX_PROCESSOR_NAME];
    uint64_t h = 14695981039346656037ull;
    int len = 0;

    MPI_Get_processor_name(name, &len);
    for (int i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 1099511628211ull;
    return h;
}

/* The ranks of this node, as MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)
 * would give them, from an allgather of node identities: a split has no
 * nonblocking form, and this one ends at the limit. */
static gpuport_status_t node_split(mpi_ctx_t *c, uint64_t timeout_ms, int *local_rank_p,
                                   int *local_size_p)
{
    uint64_t me = node_id(), *all = malloc((size_t)c->size * sizeof(*all));
    signed char *absent = malloc((size_t)c->size);
    int local_rank = 0, local_size = 0;
    char who[160] = "not every rank";
    gpuport_status_t status = GPUPORT_ERR_NO_MEMORY;

    if (all && absent)
        status = timeout_ms ? mpi_allgather_timed(c, &me, all, sizeof(me),
                                                  timeout_ms > INT_MAX ? INT_MAX
                                                                       : (int)timeout_ms,
                                                  absent)
                            : mpi_allgather(c, &me, all, sizeof(me));
    if (status == GPUPORT_ERR_TIMEOUT) {
        int named = absent_text(absent, c->size, who, sizeof(who));
        mpi_error(c->rank,
                  "gpuport_bootstrap_mpi: %s did not reach the node split (every rank's "
                  "processor name, on gpuport's duplicate of the communicator) within "
                  "GPUPORT_TIMEOUT_MS=%" PRIu64 " ms%s. The communicator was not created; the "
                  "duplicate is abandoned with the allgather pending (MPI cannot cancel it)",
                  who, timeout_ms,
                  named ? "" : " (this rank cannot tell which; rank 0's message names them)");
    } else if (status == GPUPORT_ERR_NO_MEMORY) {
        mpi_error(c->rank, "cannot allocate the node split's %d identities", c->size);
    }
    for (int r = 0; r < c->size && !status; r++) {
        if (all[r] != me)
            continue;
        if (r < c->rank)
            local_rank++;
        local_size++;
    }
    free(all);
    free(absent);
    if (status)
        return status;
    *local_rank_p = local_rank;
    *local_size_p = local_size;
    return GPUPORT_OK;
}

/* The program's struct of another layout is not written: its members
 * would be at other offsets, and a smaller one would be overrun. Layout
 * version 2 (before allgather_timed) is written up to its end. Each
 * collective here ends at GPUPORT_TIMEOUT_MS, as gpuport_comm_create's. */
gpuport_status_t gpuport_bootstrap_mpi_v(uint32_t layout, MPI_Comm comm, gpuport_bootstrap_t *bs_p)
{
    gpuport_bootstrap_t bs = {0};
    mpi_ctx_t *c;
    int initialized = 0, rank = -1;
    const char *why = NULL;
    uint64_t timeout_ms = 0;
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
    /* the bad value is named by libgpuport's log */
    status = gpuport_config_timeout_ms(&timeout_ms);
    if (status)
        return status;
    MPI_Comm_rank(comm, &rank);
    c = calloc(1, sizeof(*c));
    if (!c)
        return GPUPORT_ERR_NO_MEMORY;
    status = dup_timed(comm, rank, timeout_ms, &c->comm);
    if (status) {
        free(c);
        return status;
    }
    /* Errors come back as codes that gpuport reports, instead of aborting. */
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &bs.rank);
    MPI_Comm_size(c->comm, &bs.size);
    c->rank = bs.rank;
    c->size = bs.size;
    status = node_split(c, timeout_ms, &bs.local_rank, &bs.local_size);
    if (status) {
        MPI_Comm_free(&c->comm);
        free(c);
        return status;
    }
    bs.ctx = c;
    bs.allgather = mpi_allgather;
    bs.barrier = mpi_barrier;
    bs.send = mpi_send;
    bs.recv = mpi_recv;
    bs.recv_timed = mpi_recv_timed;
    bs.destroy = mpi_destroy;
    bs.allgather_timed = mpi_allgather_timed;
    memcpy(bs_p, &bs, GPUPORT_LAYOUT_SIZE(layout));
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
