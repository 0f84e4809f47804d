/*
 * Passing file descriptors between the ranks of one host: each communicator
 * listens on a Unix-domain socket in the abstract namespace, named from the
 * host id, the owning process's pid, a per-process communicator serial and
 * the rank, and two ranks that create a channel exchange the descriptors of
 * their destination regions over one connection (SCM_RIGHTS), with the
 * pieces' sizes and offsets. SCM_RIGHTS needs nothing but a socket: unlike
 * pidfd_getfd or /proc/PID/fd, which container seccomp profiles and
 * ptrace_scope refuse, it works wherever the two processes share a network
 * namespace. Each side checks the other's credentials (SO_PEERCRED): the
 * same uid as this process, and the pid the peer's rank record names.
 *
 * Called on the application thread at channel creation only (never by the
 * proxy). Each call is bounded by the deadline it is given.
 */
#ifndef GPUPORT_FDPASS_H
#define GPUPORT_FDPASS_H

#include <stdint.h>
#include <sys/types.h>

#include "gpuport/gpuport.h"

/* One descriptor and the part of it that a region uses: the importer maps
 * `size` bytes at `offset` of `fd`. For VMM memory, one piece per
 * allocation (cuMemCreate handle) that the region spans, in address order,
 * offset 0 and size the whole allocation. */
typedef struct gpuport_fdpiece {
    int fd;
    uint32_t reserved;
    uint64_t size;
    uint64_t offset;
} gpuport_fdpiece_t;

/* Who the peer is, from its rank record. */
typedef struct gpuport_fdpeer {
    int rank;
    int pid;
    uint32_t uid;
    uint32_t serial;
    uint64_t host_id;
} gpuport_fdpeer_t;

/* Connections accepted while this rank waited for another: kept for the
 * exchange they belong to. */
typedef struct gpuport_fdstash {
    int fd;
    int rank;
    uint64_t tag;
} gpuport_fdstash_t;

typedef struct gpuport_fdsock {
    int lfd;       /* listening socket; -1 when none */
    int rank;
    uint64_t host_id;
    int pid;
    uint32_t serial;
    char why[192]; /* lfd < 0: why (what socket(), bind() or listen() said) */
    gpuport_fdstash_t *stash;
    uint32_t nstash, cap;
} gpuport_fdsock_t;

/* The socket's name (without the abstract namespace's leading NUL). */
void gpuport_fdsock_name(char *buf, size_t len, uint64_t host_id, int pid, uint32_t serial,
                         int rank);

/* Binds and listens. On failure s->lfd is -1 and s->why says why (also
 * logged at debug): the communicator still works, and an exchange that
 * needs the socket fails naming that reason. Always returns GPUPORT_OK.
 * The kernel records the credentials of the process that listens, and
 * connectors check them against `pid`: the process `pid` opens its socket
 * itself (not a parent before fork). */
gpuport_status_t gpuport_fdsock_open(gpuport_fdsock_t *s, uint64_t host_id, int pid,
                                     uint32_t serial, int rank);
void gpuport_fdsock_close(gpuport_fdsock_t *s);

/* The most pieces one exchange carries (either way): a bound on what a
 * peer's message can make this side allocate. */
#define GPUPORT_FDPASS_MAX_PIECES (1u << 20)

/* Sends `mine` (n pieces, n may be 0) to the peer and receives the peer's;
 * both sides call it with the same tag (e.g. both channel ids). The lower
 * rank connects to the higher one's socket; an exchange with this rank
 * itself dups the descriptors. On success *theirs_p is a malloc'ed array of
 * *m_p pieces whose descriptors the caller owns (NULL when *m_p is 0); the
 * caller's own descriptors are never closed; on error neither is written.
 * Errors, each logged once naming the peer and what failed:
 * GPUPORT_ERR_PEER (the peer's socket is absent, it closed the connection,
 * the listener's credentials are not the expected ones, or it sent a
 * malformed message), GPUPORT_ERR_TIMEOUT (deadline_ns, on the
 * gpuport_now_ns clock, passed; also what the accepting side reports when
 * the only connections that came had the wrong credentials: it refuses
 * them and waits on for the right one), GPUPORT_ERR_NOT_SUPPORTED (this
 * rank is the higher one, so must accept, and has no socket: s->why),
 * GPUPORT_ERR_INVALID_ARG (a NULL argument, more than
 * GPUPORT_FDPASS_MAX_PIECES, a descriptor of `mine` not open),
 * GPUPORT_ERR_NO_RESOURCE (out of descriptors), GPUPORT_ERR_NO_MEMORY,
 * GPUPORT_ERR_TRANSPORT (another socket error). */
gpuport_status_t gpuport_fdsock_exchange(gpuport_fdsock_t *s, const gpuport_fdpeer_t *peer,
                                         uint64_t tag, const gpuport_fdpiece_t *mine, uint32_t n,
                                         gpuport_fdpiece_t **theirs_p, uint32_t *m_p,
                                         uint64_t deadline_ns);

/* Closes every descriptor of an array from gpuport_fdsock_exchange and
 * frees it. */
void gpuport_fdpieces_free(gpuport_fdpiece_t *p, uint32_t n);

#endif
