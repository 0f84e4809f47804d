/* In-process bootstrap for tests; see local_bootstrap.h. */
#include "local_bootstrap.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RANKS 80

typedef struct msg {
    struct msg *next;
    int src, dst, tag;
    size_t bytes;
    unsigned char data[];
} msg_t;

struct local_world {
    int size;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_barrier_t barrier;
    unsigned char *gather;
    size_t gather_bytes;
    msg_t *msgs;
    int (*fn)(int, int, gpuport_bootstrap_t *, void *);
    void *arg;
};

typedef struct local_ctx {
    local_world_t *w;
    int rank;
} local_ctx_t;

static gpuport_status_t l_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    local_ctx_t *c = ctx;
    local_world_t *w = c->w;

    pthread_barrier_wait(&w->barrier);
    if (c->rank == 0) {
        free(w->gather);
        w->gather = calloc((size_t)w->size, bytes);
        w->gather_bytes = bytes;
    }
    pthread_barrier_wait(&w->barrier);
    if (w->gather_bytes != bytes)
        return GPUPORT_ERR_INVALID_ARG;
    memcpy(w->gather + (size_t)c->rank * bytes, send, bytes);
    pthread_barrier_wait(&w->barrier);
    memcpy(recv, w->gather, (size_t)w->size * bytes);
    pthread_barrier_wait(&w->barrier);
    return GPUPORT_OK;
}

static gpuport_status_t l_barrier(void *ctx)
{
    local_ctx_t *c = ctx;
    pthread_barrier_wait(&c->w->barrier);
    return GPUPORT_OK;
}

static gpuport_status_t l_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    local_ctx_t *c = ctx;
    local_world_t *w = c->w;
    msg_t *m = malloc(sizeof(*m) + bytes), **pp;

    if (!m)
        return GPUPORT_ERR_NO_MEMORY;
    m->next = NULL;
    m->src = c->rank;
    m->dst = peer;
    m->tag = tag;
    m->bytes = bytes;
    memcpy(m->data, buf, bytes);
    pthread_mutex_lock(&w->lock);
    for (pp = &w->msgs; *pp; pp = &(*pp)->next)
        ;
    *pp = m;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return GPUPORT_OK;
}

/* timeout_ms < 0: no limit */
static gpuport_status_t l_recv_within(void *ctx, int peer, int tag, void *buf, size_t bytes,
                                      int timeout_ms)
{
    local_ctx_t *c = ctx;
    local_world_t *w = c->w;
    gpuport_status_t status = GPUPORT_OK;
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms > 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&w->lock);
    for (;;) {
        for (msg_t **pp = &w->msgs; *pp; pp = &(*pp)->next) {
            msg_t *m = *pp;
            if (m->src == peer && m->dst == c->rank && m->tag == tag) {
                *pp = m->next;
                if (m->bytes != bytes)
                    status = GPUPORT_ERR_VERSION;
                else
                    memcpy(buf, m->data, bytes);
                free(m);
                pthread_mutex_unlock(&w->lock);
                return status;
            }
        }
        if (timeout_ms < 0)
            pthread_cond_wait(&w->cond, &w->lock);
        else if (pthread_cond_timedwait(&w->cond, &w->lock, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&w->lock);
            return GPUPORT_ERR_TIMEOUT;
        }
    }
}

static gpuport_status_t l_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    return l_recv_within(ctx, peer, tag, buf, bytes, -1);
}

static void l_destroy(void *ctx)
{
    free(ctx);
}

typedef struct thread_arg {
    local_world_t *w;
    int rank;
    int rc;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *t = p;
    local_ctx_t *c = malloc(sizeof(*c));
    gpuport_bootstrap_t bs = {0};

    c->w = t->w;
    c->rank = t->rank;
    bs.ctx = c;
    bs.rank = t->rank;
    bs.size = t->w->size;
    bs.local_rank = t->rank;
    bs.local_size = t->w->size;
    bs.allgather = l_allgather;
    bs.barrier = l_barrier;
    bs.send = l_send;
    bs.recv = l_recv;
    bs.recv_timed = l_recv_within;
    bs.destroy = l_destroy;
    t->rc = t->w->fn(t->rank, t->w->size, &bs, t->w->arg);
    return NULL;
}

int local_run(int size, int (*fn)(int, int, gpuport_bootstrap_t *, void *), void *arg)
{
    local_world_t w;
    pthread_t threads[MAX_RANKS];
    thread_arg_t targs[MAX_RANKS];
    int failed = 0;

    if (size < 1 || size > MAX_RANKS)
        return size;
    memset(&w, 0, sizeof(w));
    w.size = size;
    w.fn = fn;
    w.arg = arg;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    pthread_barrier_init(&w.barrier, NULL, (unsigned)size);
    for (int r = 0; r < size; r++) {
        targs[r].w = &w;
        targs[r].rank = r;
        targs[r].rc = 0;
        pthread_create(&threads[r], NULL, thread_main, &targs[r]);
    }
    for (int r = 0; r < size; r++) {
        pthread_join(threads[r], NULL);
        failed += targs[r].rc != 0;
    }
    free(w.gather);
    pthread_barrier_destroy(&w.barrier);
    return failed;
}
