/* The loop transport, for tests; see loop.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TL(loop_kind)
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LOOP_TAG_HELLO 0x5200 /* the core's tags are below 0x4800, ib's 0x49xx */

int loop_kind = -1;
loop_stats_t loop_stats;
/* the two ranks of a test are threads of one process: their conn_open
 * calls write last_hello one after the other */
static pthread_mutex_t hello_lock = PTHREAD_MUTEX_INITIALIZER;
/* auto_rank has no communicator: GPUPORT_LOOP_AUTO_RANK of the latest one */
static _Atomic int auto_rank_now;

static const gpuport_config_var_t rows[] = {
    {"GPUPORT_LOOP_CHUNK", "64k", GPUPORT_CFG_UINT, GPUPORT_CFG_FIELD(loop_settings_t, chunk), 1,
     1ull << 30, NULL, "loop (a test transport) copies a put in pieces of at most this many bytes",
     NULL},
    {"GPUPORT_LOOP_AUTO_RANK", "0", GPUPORT_CFG_UINT, GPUPORT_CFG_FIELD(loop_settings_t, auto_rank),
     0, 100, NULL, "how much auto wants loop for host memory; 0: only when forced", NULL},
};
static const gpuport_settings_table_t loop_settings = {rows, sizeof(rows) / sizeof(rows[0]),
                                                       sizeof(loop_settings_t)};

const gpuport_tl_record_type_t loop_records[LOOP_NRECORDS] = {
    [LOOP_REC_HELLO] = {1, sizeof(loop_hello_rec_t), "loop hello record"},
};

typedef struct loop_conn {
    gpuport_sem_slot_t *peer_ctrl; /* the peer's control segment, mapped here */
    size_t map_len;
    uint32_t nslots;
} loop_conn_t;

static const loop_settings_t *settings(gpuport_comm_t comm)
{
    return gpuport_tl_settings(comm, loop_kind);
}

static gpuport_status_t loop_comm_open(gpuport_tl_comm_t *tc, void *blob)
{
    (void)blob;
    atomic_store(&auto_rank_now, (int)settings(tc->comm)->auto_rank);
    return GPUPORT_OK;
}

static int loop_reachable(gpuport_tl_comm_t *tc, int peer, char *why, size_t len)
{
    int pid = gpuport_tl_proc(tc->comm, peer)->pid;

    if (pid == getpid())
        return 1;
    snprintf(why, len, "rank %d is another process (pid %d); loop joins communicators of one "
             "process", peer, pid);
    return 0;
}

static int loop_auto_rank(int device_regions)
{
    return device_regions ? 0 : atomic_load(&auto_rank_now);
}

gpuport_status_t loop_hello_check(const loop_hello_rec_t *mine, const loop_hello_rec_t *theirs,
                                  int peer)
{
    gpuport_status_t status = gpuport_tl_record_check(loop_kind, &loop_records[LOOP_REC_HELLO],
                                                      &theirs->hdr, peer);
    if (status)
        return status;
    if (theirs->rank != peer || theirs->chunk != mine->chunk) {
        log_error("rank %d's loop hello names rank %d and pieces of %llu bytes; this rank copies "
                  "in pieces of %llu (GPUPORT_LOOP_CHUNK must agree)",
                  peer, theirs->rank, (unsigned long long)theirs->chunk,
                  (unsigned long long)mine->chunk);
        return GPUPORT_ERR_INVALID_CONFIG;
    }
    return GPUPORT_OK;
}

/* The peer's control segment, through its memfd (the rank record names it) */
static gpuport_status_t map_ctrl(gpuport_comm_t comm, int peer, loop_conn_t *lc)
{
    const gpuport_proc_rec_t *p = gpuport_tl_proc(comm, peer);
    char path[64];
    void *map;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, p->ctrl_fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        log_error("open(%s) failed: %s", path, strerror(errno));
        return GPUPORT_ERR_TRANSPORT;
    }
    map = mmap(NULL, p->ctrl_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        log_error("mmap(rank %d's control segment, %llu bytes) failed: %s", peer,
                  (unsigned long long)p->ctrl_size, strerror(errno));
        return GPUPORT_ERR_TRANSPORT;
    }
    lc->peer_ctrl = map;
    lc->map_len = p->ctrl_size;
    lc->nslots = p->max_channels;
    return GPUPORT_OK;
}

static gpuport_status_t loop_conn_open(gpuport_conn_t *conn)
{
    loop_hello_rec_t mine, theirs;
    loop_conn_t *lc = calloc(1, sizeof(*lc));
    gpuport_status_t status;

    if (!lc)
        return GPUPORT_ERR_NO_MEMORY;
    memset(&mine, 0, sizeof(mine));
    gpuport_tl_record_init(loop_kind, &loop_records[LOOP_REC_HELLO], &mine.hdr);
    mine.rank = gpuport_tl_rank(conn->comm);
    mine.pid = getpid();
    mine.chunk = settings(conn->comm)->chunk;
    status = gpuport_tl_exchange(conn->comm, conn->peer, LOOP_TAG_HELLO, &mine, &theirs,
                                 sizeof(theirs));
    if (!status)
        status = loop_hello_check(&mine, &theirs, conn->peer);
    if (!status)
        status = map_ctrl(conn->comm, conn->peer, lc);
    if (status) {
        free(lc);
        return status;
    }
    pthread_mutex_lock(&hello_lock);
    loop_stats.last_hello = theirs;
    pthread_mutex_unlock(&hello_lock);
    atomic_fetch_add(&loop_stats.hellos, 1);
    conn->priv = lc;
    return GPUPORT_OK;
}

static void loop_conn_close(gpuport_conn_t *conn)
{
    loop_conn_t *lc = conn->priv;

    if (!lc)
        return;
    munmap(lc->peer_ctrl, lc->map_len);
    free(lc);
    conn->priv = NULL;
}

static gpuport_status_t loop_chan_connect(gpuport_tl_chan_t *ch, const gpuport_channel_rec_t *peer)
{
    loop_conn_t *lc = ch->conn->priv;

    if (peer->channel_id >= lc->nslots) {
        log_error("rank %d named channel id %u, beyond its %u slots", ch->peer, peer->channel_id,
                  lc->nslots);
        return GPUPORT_ERR_PEER;
    }
    if (gpuport_region_is_device((int)peer->dst.kind) || gpuport_region_is_device(ch->src.kind)) {
        log_error("channel to rank %d: loop moves host memory only", ch->peer);
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->dst.rec = peer->dst;
    ch->dst.base = (void *)(uintptr_t)peer->dst.addr; /* one process: the peer's address */
    ch->remote_slot = &lc->peer_ctrl[peer->channel_id];
    return GPUPORT_OK;
}

static void loop_chan_disconnect(gpuport_tl_chan_t *ch)
{
    memset(&ch->dst, 0, sizeof(ch->dst));
    ch->remote_slot = NULL;
}

static int loop_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                    int behind_work, gpuport_work_t *w)
{
    uint64_t chunk = settings(ch->comm)->chunk;

    (void)behind_work; /* nothing is ever queued: nothing is behind */
    (void)w;
    for (uint64_t done = 0; done < size; done += chunk) {
        uint64_t n = size - done < chunk ? size - done : chunk;
        memcpy((char *)ch->dst.base + dst_off + done, (const char *)ch->src.ptr + src_off + done,
               n);
        atomic_fetch_add(&loop_stats.chunks, 1);
    }
    atomic_store(&loop_stats.chunk, chunk);
    atomic_fetch_add(&loop_stats.puts, 1);
    return GPUPORT_TRANSPORT_DONE;
}

static int loop_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value,
                          int behind_work, gpuport_work_t *w)
{
    (void)behind_work;
    (void)w;
    atomic_store_explicit((_Atomic uint64_t *)((char *)ch->dst.base + dst_off), value,
                          memory_order_release);
    atomic_fetch_add(&loop_stats.values, 1);
    return GPUPORT_TRANSPORT_DONE;
}

static int loop_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *w)
{
    (void)behind_work;
    (void)w;
    atomic_fetch_add_explicit(&ch->remote_slot->value, n, memory_order_release);
    atomic_fetch_add(&loop_stats.signals, 1);
    return GPUPORT_TRANSPORT_DONE;
}

/* rank << 32 | channel id, + 1; 0: every channel has room */
static _Atomic uint64_t blocked;
_Atomic uint64_t loop_refused;

void loop_block(int rank, uint32_t channel)
{
    atomic_store(&blocked, rank < 0 ? 0 : ((uint64_t)rank << 32 | channel) + 1);
}

static int loop_has_room(gpuport_tl_chan_t *ch, uint32_t nops)
{
    uint64_t b = atomic_load(&blocked);

    (void)nops;
    if (b && b - 1 == ((uint64_t)gpuport_tl_rank(ch->comm) << 32 | ch->id)) {
        atomic_fetch_add(&loop_refused, 1);
        return 0;
    }
    return 1;
}

_Atomic uint32_t loop_slow_decline;
_Atomic uint64_t loop_declined;
_Atomic int loop_declining;

static int loop_host_send(gpuport_tl_chan_t *ch, uint32_t op, uint64_t dst_off, uint64_t src_off,
                          uint64_t size, uint64_t value)
{
    uint32_t us = atomic_load(&loop_slow_decline);

    (void)ch;
    (void)op;
    (void)dst_off;
    (void)src_off;
    (void)size;
    (void)value;
    if (us) {
        atomic_store(&loop_declining, 1);
        usleep(us);
        atomic_store(&loop_declining, 0);
    }
    atomic_fetch_add(&loop_declined, 1);
    return GPUPORT_TRANSPORT_QUEUE;
}

static void loop_describe(const void *set, char *buf, size_t len)
{
    const loop_settings_t *s = set;

    snprintf(buf, len, "available: communicators of one process, host memory, pieces of %llu "
             "bytes", (unsigned long long)s->chunk);
}

static const gpuport_transport_ops_t loop_ops = {
    .name = "loop",
    .settings = &loop_settings,
    .records = loop_records,
    .nrecords = LOOP_NRECORDS,
    .comm_open = loop_comm_open,
    .describe = loop_describe,
    .reachable = loop_reachable,
    .auto_rank = loop_auto_rank,
    .conn_open = loop_conn_open,
    .conn_close = loop_conn_close,
    .chan_connect = loop_chan_connect,
    .chan_disconnect = loop_chan_disconnect,
    .put = loop_put,
    .put_value = loop_put_value,
    .signal = loop_signal,
    .has_room = loop_has_room,
    .host_send = loop_host_send,
};

GPUPORT_TRANSPORT_REGISTER(loop_ops, loop_kind)
