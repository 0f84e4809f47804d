/* Two-process bootstrap for tests; see pair_bootstrap.h. */
#include "pair_bootstrap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct pair_ctx {
    int fd;
    int rank;
} pair_ctx_t;

typedef struct frame {
    int32_t tag;
    uint32_t bytes;
} frame_t;

static gpuport_status_t full_io(int fd, void *buf, size_t len, int writing)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = writing ? send(fd, p, len, MSG_NOSIGNAL) : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return GPUPORT_ERR_PEER;
        p += n;
        len -= (size_t)n;
    }
    return GPUPORT_OK;
}

static gpuport_status_t p_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    pair_ctx_t *c = ctx;
    frame_t f = {tag, (uint32_t)bytes};
    (void)peer;
    if (full_io(c->fd, &f, sizeof(f), 1))
        return GPUPORT_ERR_PEER;
    return full_io(c->fd, (void *)buf, bytes, 1);
}

static gpuport_status_t p_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    pair_ctx_t *c = ctx;
    frame_t f;
    (void)peer;
    if (full_io(c->fd, &f, sizeof(f), 0))
        return GPUPORT_ERR_PEER;
    /* the protocol is strictly ordered between two ranks */
    if (f.tag != tag || f.bytes != bytes)
        return GPUPORT_ERR_VERSION;
    return full_io(c->fd, buf, bytes, 0);
}

static gpuport_status_t p_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    pair_ctx_t *c = ctx;
    char *out = recv;
    gpuport_status_t st;

    memcpy(out + (size_t)c->rank * bytes, send, bytes);
    st = p_send(ctx, 1 - c->rank, -1, send, bytes);
    if (!st)
        st = p_recv(ctx, 1 - c->rank, -1, out + (size_t)(1 - c->rank) * bytes, bytes);
    return st;
}

static gpuport_status_t p_barrier(void *ctx)
{
    char a = 'b', b;
    pair_ctx_t *c = ctx;
    gpuport_status_t st = p_send(ctx, 1 - c->rank, -2, &a, 1);
    return st ? st : p_recv(ctx, 1 - c->rank, -2, &b, 1);
}

static void p_destroy(void *ctx)
{
    pair_ctx_t *c = ctx;
    close(c->fd);
    free(c);
}

int pair_fork(gpuport_bootstrap_t *bs, pid_t *child_p)
{
    int sv[2];
    pid_t pid;
    pair_ctx_t *c = malloc(sizeof(*c));

    if (!c || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    c->rank = pid == 0 ? 1 : 0;
    c->fd = sv[c->rank];
    close(sv[1 - c->rank]);
    memset(bs, 0, sizeof(*bs));
    bs->ctx = c;
    bs->rank = c->rank;
    bs->size = 2;
    bs->local_rank = c->rank;
    bs->local_size = 2;
    bs->allgather = p_allgather;
    bs->barrier = p_barrier;
    bs->send = p_send;
    bs->recv = p_recv;
    bs->destroy = p_destroy;
    *child_p = pid;
    return c->rank;
}

int pair_join(pid_t child)
{
    int status;
    if (waitpid(child, &status, 0) != child)
        return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
