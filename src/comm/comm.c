/* Communicator creation and destruction; see gpuport.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "build_config.h"
#include "cuda/fcuda.h"
#include "gather.h"
#include "hostid.h"
#include "internal.h"
#include "layout.h"
#include "mem/memfd.h"

/* Cross-memory attach into this process is allowed for same-user peers
 * unless Yama restricts ptrace; under scope 1 we name any process as an
 * allowed tracer, as Open MPI's shared-memory transport does. */
static uint32_t cma_features(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = 0;

    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = 0;
        fclose(f);
    }
    if (scope == 1 && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0) {
        log_warn("prctl(PR_SET_PTRACER) failed: %s; peers cannot write into this rank's "
                 "private memory, use gpuport_mem_alloc for destinations",
                 strerror(errno));
        return 0;
    }
    return scope <= 1 ? GPUPORT_FEATURE_CMA : 0;
}

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) & ~(page - 1);
}

/* A rank confined to one core runs the application, the proxy and the
 * flusher on it by turns: every operation then waits for a time slice
 * (10 ms per ping-pong round trip measured on an H200 pair under Open MPI's
 * default binding). Say so once, at creation. */
static void check_affinity(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1)
        log_warn("this rank may run on one core only: the application, proxy and flusher "
                 "threads then take turns and every operation waits for a time slice; launch "
                 "with 'mpirun --bind-to none' or give each rank at least 3 cores");
}

/* The network device a transport will use, if one says so now. */
static int near_device(gpuport_comm_t comm, char *name, size_t len)
{
    for (int k = 1; k < GPUPORT_TL_MAX_KINDS; k++) {
        gpuport_tl_comm_t *tc = &comm->tls[k];
        if (tc->ops && tc->ops->near_device && tc->ops->near_device(tc, name, len))
            return 1;
    }
    return 0;
}

/* Decides where the proxy and flusher threads run; they bind themselves as
 * they start. A bad GPUPORT_*_CPUS fails creation; a topology that cannot
 * be read leaves them unbound. */
static gpuport_status_t place_threads(gpuport_comm_t comm)
{
    gpuport_place_request_t req;
    char why[256], bus[32], nic[64], allowed[4096];
    gpuport_placement_t *pl = &comm->placement;
    gpuport_status_t status;
    int far, valid = comm->bs.local_size >= 1 && comm->bs.local_rank >= 0 &&
                comm->bs.local_rank < comm->bs.local_size;

    pl->proxy_cpu = pl->flusher_cpu = -1;
    pl->level = GPUPORT_PLACE_NONE;
    comm->topo = gpuport_topology_load(why, sizeof(why));
    if (!comm->topo) {
        log_warn("cannot read this machine's topology (%s); the proxy and flusher threads run "
                 "unbound", why);
        return GPUPORT_OK;
    }
    memset(&req, 0, sizeof(req));
    req.gpu_bus_id = gpuport_gpu_bus_id(comm, bus, sizeof(bus)) == 0 ? bus : NULL;
    req.nic_name = near_device(comm, nic, sizeof(nic)) ? nic : NULL;
    /* local ranks are the bootstrap's word; without them, place as the only one */
    req.local_rank = valid ? comm->bs.local_rank : 0;
    req.local_size = valid ? comm->bs.local_size : 1;
    req.allowed =
        gpuport_topology_process_cpus(comm->topo, allowed, sizeof(allowed)) == 0 ? allowed : NULL;
    req.app_cpu = gpuport_topology_current_cpu(comm->topo);
    req.proxy_cpus = comm->config.proxy_cpus;
    req.flusher_cpus = comm->config.flusher_cpus;
    req.bind = comm->config.bind;
    status = gpuport_place(comm->topo, &req, pl);
    if (status)
        return status;
    /* far from the GPU, or unbound, other than by request: worth a warning */
    far = req.bind && (pl->level == GPUPORT_PLACE_NUMA || pl->level == GPUPORT_PLACE_NONE ||
                       (pl->level == GPUPORT_PLACE_PROCESS && req.gpu_bus_id));
    GPUPORT_LOG_AT(GPUPORT_SUBSYS_TOPO, far ? GPUPORT_LOG_WARN : GPUPORT_LOG_INFO,
                   "placement %s: proxy PU %d, flusher PU %d, GPU %s, NIC %s, local rank %d of "
                   "%d: %s",
                   gpuport_place_level_name(pl->level), pl->proxy_cpu, pl->flusher_cpu,
                   req.gpu_bus_id ? bus : "none", req.nic_name ? nic : "none", req.local_rank,
                   req.local_size, pl->why);
    return GPUPORT_OK;
}

/* What this gpuport is, once per job: rank 0 at info, the others at debug
 * (every rank runs the same release, exchange_headers made sure; a build of
 * other features on some rank shows in its debug line and its channels). */
static void log_build(gpuport_comm_t comm)
{
    char built[128];

    gpuport_transport_built(built, sizeof(built));
    GPUPORT_LOG(comm->rank == 0 ? GPUPORT_LOG_INFO : GPUPORT_LOG_DEBUG,
                "gpuport %s (build: CUDA %s, MPI %s, hwloc %s, ibverbs %s; transports %s), %d "
                "ranks",
                gpuport_version_string(), GPUPORT_BUILD_CUDA, GPUPORT_BUILD_MPI,
                GPUPORT_BUILD_HWLOC, GPUPORT_HAVE_IBVERBS ? "yes" : "no", built, comm->size);
}

static gpuport_status_t ctrl_create(gpuport_comm_t comm)
{
    void *ctrl;
    gpuport_status_t st;

    /* whole pages: the segment is registered with CUDA in GPU mode */
    comm->ctrl_size = page_round((size_t)comm->config.max_channels * sizeof(gpuport_sem_slot_t));
    st = gpuport_memfd_map("gpuport-ctrl", comm->ctrl_size, &comm->ctrl_fd, &ctrl);
    if (st == GPUPORT_OK)
        comm->ctrl = ctrl;
    return st;
}

static void ctrl_destroy(gpuport_comm_t comm)
{
    if (comm->ctrl)
        munmap(comm->ctrl, comm->ctrl_size);
    if (comm->ctrl_fd >= 0)
        close(comm->ctrl_fd);
}

/* Every built transport gets its part of the communicator, and writes its
 * part of this rank's record. */
static gpuport_status_t transports_open(gpuport_comm_t comm, gpuport_proc_rec_t *me)
{
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        gpuport_tl_comm_t *tc = &comm->tls[k];
        const gpuport_transport_ops_t *ops = gpuport_transport_ops(k);
        gpuport_status_t status;

        if (!ops)
            continue;
        tc->comm = comm;
        tc->kind = k;
        if (ops->comm_open) {
            status = ops->comm_open(tc, &me->tl[k]);
            if (status)
                return status;
        }
        tc->ops = ops; /* open: closed with the communicator */
        if (ops->comm_progress || ops->poll_fds)
            comm->proxy.active_tls[comm->proxy.nactive_tls++] = tc;
    }
    return GPUPORT_OK;
}

static void transports_close(gpuport_comm_t comm)
{
    for (int k = 1; k < GPUPORT_TL_MAX_KINDS; k++) {
        gpuport_tl_comm_t *tc = &comm->tls[k];
        if (tc->ops && tc->ops->comm_close)
            tc->ops->comm_close(tc);
        tc->ops = NULL;
    }
}

/* The first round of creation: every rank's record header, whose layout
 * never changes, so that ranks of different versions fail with a clear
 * message instead of a size mismatch inside the bootstrap. A rank whose
 * own set-up failed takes part all the same, with a header that says so
 * (GPUPORT_REC_PROC_FAILED), so that every rank returns instead of waiting
 * in the next round for a rank that has given up. Returns the first
 * problem: this rank's own, a version mismatch, or GPUPORT_ERR_PEER. */
static gpuport_status_t exchange_headers(const gpuport_bootstrap_t *bs, uint64_t timeout_ms,
                                         gpuport_status_t local)
{
    gpuport_rec_header_t me, *hdrs = calloc((size_t)bs->size, sizeof(*hdrs));
    gpuport_status_t status, first = local;
    int failed = 0;

    gpuport_record_header_init(&me, local ? GPUPORT_REC_PROC_FAILED : GPUPORT_REC_PROC,
                               local ? (uint16_t)-local : sizeof(gpuport_proc_rec_t));
    if (!hdrs) {
        log_error("cannot allocate %d record headers for the communicator's creation", bs->size);
        return GPUPORT_ERR_NO_MEMORY;
    }
    status = gpuport_comm_gather(bs, timeout_ms, &me, hdrs, sizeof(me),
                                 "the first exchange of gpuport_comm_create (every rank's version "
                                 "header)");
    if (status) {
        free(hdrs);
        return local ? local : status;
    }
    for (int r = 0; r < bs->size; r++) {
        if (r == bs->rank && local)
            continue; /* this rank's own failure, logged where it happened */
        if (hdrs[r].magic == GPUPORT_RECORD_MAGIC && hdrs[r].type == GPUPORT_REC_PROC_FAILED &&
            hdrs[r].version_major == GPUPORT_VERSION_MAJOR &&
            hdrs[r].version_minor == GPUPORT_VERSION_MINOR) {
            if (failed++ == 0)
                log_error("rank %d could not set up its side of the communicator (%s); its log "
                          "says why", r,
                          gpuport_status_string((gpuport_status_t) - (int)hdrs[r].size));
            if (!first)
                first = GPUPORT_ERR_PEER;
            continue;
        }
        status = gpuport_record_check(&hdrs[r], GPUPORT_REC_PROC, sizeof(gpuport_proc_rec_t), r);
        if (status && !first)
            first = status;
    }
    if (failed > 1)
        log_error("%d ranks could not set up their side of the communicator", failed);
    free(hdrs);
    return first;
}

/* Every rank's full record, once every header was right. */
static gpuport_status_t exchange_procs(gpuport_comm_t comm, gpuport_proc_rec_t *me)
{
    gpuport_status_t status;

    status = gpuport_comm_gather(&comm->bs, comm->config.timeout_ms, me, comm->procs,
                                 sizeof(*me),
                                 "the second exchange of gpuport_comm_create (every rank's "
                                 "record)");
    if (status)
        return status;
    for (int r = 0; r < comm->size; r++) {
        if (comm->procs[r].rank != r) {
            log_error("bootstrap returned rank %d's record in place %d", comm->procs[r].rank, r);
            return GPUPORT_ERR_INTERNAL;
        }
    }
    return GPUPORT_OK;
}

/* This rank's record, and every built transport's part of it. */
static gpuport_status_t proc_rec_make(gpuport_comm_t comm, gpuport_proc_rec_t *me)
{
    memset(me, 0, sizeof(*me));
    gpuport_record_header_init(&me->hdr, GPUPORT_REC_PROC, sizeof(*me));
    me->rank = comm->rank;
    me->pid = getpid();
    me->host_id = comm->config.host_id ? comm->config.host_id : gpuport_host_id();
    me->ctrl_fd = comm->ctrl_fd;
    me->max_channels = comm->config.max_channels;
    me->ctrl_size = comm->ctrl_size;
    me->uid = (uint32_t)getuid();
    me->features = cma_features();
    me->gpu = comm->gpu_device;
    me->sock_serial = comm->fdsock.serial;
    gethostname(me->hostname, sizeof(me->hostname) - 1);
    comm->procs = calloc((size_t)comm->size, sizeof(*comm->procs));
    if (!comm->procs)
        return GPUPORT_ERR_NO_MEMORY;
    return transports_open(comm, me);
}

/* The last round: every rank started its proxy service (a bad placement
 * request or a thread that cannot start fails here, after the records). */
static gpuport_status_t agree_started(gpuport_comm_t comm, gpuport_status_t local)
{
    int32_t mine = local, *all = calloc((size_t)comm->size, sizeof(*all));
    gpuport_status_t status, first = local;

    if (!all)
        return local ? local : GPUPORT_ERR_NO_MEMORY;
    status = gpuport_comm_gather(&comm->bs, comm->config.timeout_ms, &mine, all, sizeof(mine),
                                 "the last exchange of gpuport_comm_create (every rank's word "
                                 "that its proxy started)");
    if (status) {
        free(all);
        return local ? local : status;
    }
    for (int r = 0; r < comm->size && !first; r++) {
        if (all[r] != GPUPORT_OK) {
            log_error("rank %d could not start its side of the communicator (%s); its log says "
                      "why",
                      r, gpuport_status_string((gpuport_status_t)all[r]));
            first = GPUPORT_ERR_PEER;
        }
    }
    free(all);
    return first;
}

static void comm_free(gpuport_comm_t comm)
{
    if (comm->conns) {
        for (int p = 0; p < comm->size; p++) {
            if (comm->conns[p]) {
                comm->conns[p]->tl->ops->conn_close(comm->conns[p]);
                free(comm->conns[p]);
            }
        }
    }
    if (comm->chans) {
        for (uint32_t i = 0; i < comm->config.max_channels; i++)
            free(comm->chans[i]);
    }
    gpuport_dead_free_all(&comm->dead_chans);
    if (comm->mchans) {
        for (uint32_t i = 0; i < comm->config.max_channels; i++)
            free(comm->mchans[i]);
    }
    free(comm->mchans);
    gpuport_dead_free_all(&comm->dead_mchans);
    if (comm->peerchans) {
        for (uint32_t i = 0; i < comm->config.max_channels; i++)
            free(comm->peerchans[i]);
    }
    free(comm->peerchans);
    gpuport_dead_free_all(&comm->dead_peerchans);
    gpuport_mem_free_all(comm);
    gpuport_fdsock_close(&comm->fdsock);
    /* the flusher's context outlives its thread until peer handles are closed */
    gpuport_fcuda_release(&comm->proxy.flusher);
    gpuport_gpu_close(comm);
    free(comm->chans);
    transports_close(comm);
    free(comm->conns);
    free(comm->bs_attempts);
    free(comm->pconns);
    free(comm->id_used);
    free(comm->states);
    free(comm->pchans);
    if (comm->fifo.own_mem)
        gpuport_fifo_fini(&comm->fifo);
    ctrl_destroy(comm);
    gpuport_topology_free(comm->topo);
    free(comm->procs);
    free(comm->proxy.peer_dead);
    free(comm->proxy.sig_list);
    gpuport_proxy_parks_free(comm);
    pthread_mutex_destroy(&comm->lock);
    if (comm->bs.destroy)
        comm->bs.destroy(comm->bs.ctx);
    free(comm);
}

/* Everything this rank sets up before it meets the others. */
/* The descriptor socket, named by this process's pid and a serial that no
 * other communicator of the process has had. */
static gpuport_status_t fdsock_open(gpuport_comm_t comm)
{
    static _Atomic uint32_t serial;
    uint64_t host = comm->config.host_id ? comm->config.host_id : gpuport_host_id();

    return gpuport_fdsock_open(&comm->fdsock, host, (int)getpid(),
                               atomic_fetch_add(&serial, 1) + 1, comm->rank);
}

static gpuport_status_t setup_local(gpuport_comm_t comm, gpuport_proc_rec_t *me)
{
    const gpuport_config_t *config = &comm->config;
    gpuport_status_t status;

    status = ctrl_create(comm);
    if (status)
        return status;
    status = gpuport_fifo_init(&comm->fifo, config->fifo_size);
    if (status)
        return status;
    comm->pchans = calloc(config->max_channels, sizeof(*comm->pchans));
    comm->states_size = page_round(config->max_channels * sizeof(*comm->states));
    comm->states = aligned_alloc((size_t)sysconf(_SC_PAGESIZE), comm->states_size);
    comm->id_used = calloc(config->max_channels, 1);
    comm->conns = calloc((size_t)comm->size, sizeof(*comm->conns));
    comm->bs_attempts = calloc((size_t)comm->size, sizeof(*comm->bs_attempts));
    comm->pconns = calloc((size_t)comm->size, sizeof(*comm->pconns));
    comm->chans = calloc(config->max_channels, sizeof(*comm->chans));
    comm->mchans = calloc(config->max_channels, sizeof(*comm->mchans));
    comm->peerchans = calloc(config->max_channels, sizeof(*comm->peerchans));
    if (!comm->pchans || !comm->states || !comm->id_used || !comm->conns || !comm->pconns ||
        !comm->bs_attempts || !comm->chans || !comm->mchans || !comm->peerchans) {
        log_error("cannot allocate tables for %u channels and %d ranks", config->max_channels,
                  comm->size);
        return GPUPORT_ERR_NO_MEMORY;
    }
    memset(comm->states, 0, comm->states_size);
    status = gpuport_gpu_open(comm);
    if (!status)
        status = fdsock_open(comm);
    if (status)
        return status;
    return proc_rec_make(comm, me);
}

/* Creation is collective and every rank reaches each of its exchanges,
 * carrying its own result so far: a rank that fails (a bad GPUPORT_* value
 * in its environment, no memory, no GPU where GPUPORT_GPU=on) makes every
 * rank fail, with the reason on that rank and "rank R could not ..." on
 * the others, instead of leaving them waiting for it.
 * *comm_p is NULL after a failure (the one output written then): a program
 * that ignores the status passes NULL on, which every call refuses, rather
 * than an uninitialized handle. A bootstrap of another layout is not read
 * at all, its destroy included: its members would be the wrong ones. */
gpuport_status_t gpuport_comm_create_v(uint32_t layout, const gpuport_bootstrap_t *bs,
                                       gpuport_comm_t *comm_p)
{
    gpuport_comm_t comm = NULL;
    gpuport_proc_rec_t me;
    gpuport_status_t status;
    gpuport_bootstrap_t older;

    if (comm_p)
        *comm_p = NULL;
    /* Programs built against older headers pass layout 1 (0.1's, ending
     * before recv_timed) or 2 (ending before allgather_timed): taken as
     * they are, the members they lack NULL, so their waits have no limit
     * (gpuport.h says so of each NULL member). */
    if (bs && (layout == (((uint32_t)1 << 16) | (uint32_t)offsetof(gpuport_bootstrap_t,
                                                                    recv_timed)) ||
               layout == (((uint32_t)2 << 16) | (uint32_t)offsetof(gpuport_bootstrap_t,
                                                                    allgather_timed)))) {
        memset(&older, 0, sizeof(older));
        memcpy(&older, bs, GPUPORT_LAYOUT_SIZE(layout));
        bs = &older;
        layout = GPUPORT_BOOTSTRAP_LAYOUT;
    }
    status = gpuport_layout_check("gpuport_comm_create", "gpuport_bootstrap_t", layout,
                                  GPUPORT_BOOTSTRAP_LAYOUT);
    if (status)
        return status;
    if (!bs || !comm_p || !bs->allgather || !bs->barrier || !bs->send || !bs->recv ||
        bs->size < 1 || bs->rank < 0 || bs->rank >= bs->size) {
        log_error("gpuport_comm_create: bootstrap %p or comm_p %p is invalid (every operation "
                  "must be set, 0 <= rank < size)",
                  (const void *)bs, (void *)comm_p);
        if (bs && bs->destroy)
            bs->destroy(bs->ctx);
        return GPUPORT_ERR_INVALID_ARG;
    }
    gpuport_log_set_rank(bs->rank);
    comm = calloc(1, sizeof(*comm));
    if (!comm) {
        status = GPUPORT_ERR_NO_MEMORY;
        exchange_headers(bs, gpuport_config_timeout_or_default(), status);
        if (bs->destroy)
            bs->destroy(bs->ctx);
        return status;
    }
    comm->bs = *bs;
    comm->rank = bs->rank;
    comm->size = bs->size;
    comm->ctrl_fd = -1;
    comm->gpu_device = -1;
    comm->fdsock.lfd = -1;
    pthread_mutex_init(&comm->lock, NULL);
    status = gpuport_config_load(&comm->config);
    if (!status) {
        gpuport_log_set_level(comm->config.log_level);
        gpuport_log_set_subsys(comm->config.log_subsys);
        status = gpuport_log_open(comm->config.log_file);
    }
    if (!status) {
        log_build(comm);
        comm->timeout_ns = comm->config.timeout_ms * 1000000ull;
        status = setup_local(comm, &me);
    }
    /* a rank whose configuration failed meets the others all the same */
    status = exchange_headers(bs,
                              status ? gpuport_config_timeout_or_default()
                                     : comm->config.timeout_ms,
                              status);
    if (!status)
        status = exchange_procs(comm, &me);
    if (status)
        goto err;
    status = place_threads(comm);
    if (!status)
        status = gpuport_proxy_start(comm);
    status = agree_started(comm, status);
    if (status)
        goto err_proxy;
    check_affinity();
    gpuport_comm_live_add(comm);
    log_info("communicator ready: rank %d of %d, pid %d, FIFO %u triggers, %u channels max",
             comm->rank, comm->size, (int)getpid(), comm->config.fifo_size,
             comm->config.max_channels);
    *comm_p = comm;
    return GPUPORT_OK;

err_proxy:
    gpuport_proxy_stop(comm);
err:
    comm_free(comm);
    return status;
}

/* Not collective (gpuport.h; test_comm_destroy and test_destroy_alone show
 * it): no exchange through the bootstrap, each step bounded by
 * GPUPORT_TIMEOUT_MS and skipping peers known to have exited, so a rank
 * returns whether its peers are destroying too, still working, or dead,
 * and as soon as its own work is done. Peers may write into this rank's
 * memory until they are done: the open channels are closed first (as
 * gpuport_channel_destroy does, all at once); network peers answer each
 * close before the proxy stops (proxy_drain.c), which then says goodbye;
 * same-host peers, which write directly, promise through the control
 * segment. */
gpuport_status_t gpuport_comm_destroy(gpuport_comm_t comm)
{
    gpuport_status_t status = GPUPORT_OK;

    if (!gpuport_comm_live_remove(comm)) {
        log_error("gpuport_comm_destroy: %p is not a live communicator (NULL, or destroyed "
                  "already)",
                  (void *)comm);
        return GPUPORT_ERR_INVALID_ARG;
    }
    gpuport_channels_close_all(comm);
    gpuport_proxy_stop(comm);
    if (comm->proxy.abandoned)
        status = GPUPORT_ERR_SHUTDOWN;
    gpuport_channels_await_peers(comm);
    for (uint32_t i = 0; i < comm->config.max_channels; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        if (ch->ops)
            ch->ops->chan_disconnect(&ch->tl);
    }
    comm_free(comm);
    return status;
}

int gpuport_comm_rank(gpuport_comm_t comm)
{
    return gpuport_comm_live(comm) ? comm->rank : -1;
}

int gpuport_comm_size(gpuport_comm_t comm)
{
    return gpuport_comm_live(comm) ? comm->size : -1;
}

int gpuport_comm_same_host(gpuport_comm_t comm, int peer)
{
    if (!gpuport_comm_live(comm) || peer < 0 || peer >= comm->size)
        return -1;
    return comm->procs[peer].host_id == comm->procs[comm->rank].host_id;
}

/* The ranks below `end` on this rank's host. */
static int ranks_on_host(gpuport_comm_t comm, int end)
{
    int n = 0;

    for (int r = 0; r < end; r++)
        n += comm->procs[r].host_id == comm->procs[comm->rank].host_id;
    return n;
}

int gpuport_comm_local_rank(gpuport_comm_t comm)
{
    return gpuport_comm_live(comm) ? ranks_on_host(comm, comm->rank) : -1;
}

int gpuport_comm_local_size(gpuport_comm_t comm)
{
    return gpuport_comm_live(comm) ? ranks_on_host(comm, comm->size) : -1;
}
