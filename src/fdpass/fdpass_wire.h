/*
 * The wire of the descriptor exchange (fdpass.c), and its record I/O on a
 * non-blocking Unix seqpacket socket. Each item below is one record:
 *   connector -> acceptor   hello
 *   connector -> acceptor   its pieces
 *   acceptor  -> connector  its pieces
 * Pieces travel in messages of at most FDWIRE_PIECES_PER_MSG: a header,
 * `count` fdwire_piece_t and the `count` descriptors as one SCM_RIGHTS
 * message; an exchange of no pieces is one header of count 0. Records keep
 * their boundaries, so a message is read whole or found malformed, never
 * half. Host byte order: both ends are on one host.
 *
 * For fdpass.c and the tests that play a misbehaving peer. Every wait is
 * bounded by the deadline passed (gpuport_now_ns clock; UINT64_MAX: none).
 */
#ifndef GPUPORT_FDPASS_WIRE_H
#define GPUPORT_FDPASS_WIRE_H

#include <stdint.h>
#include <sys/socket.h>

#include "fdpass.h"

#define FDWIRE_HELLO_MAGIC 0x48465047u  /* "GPFH" */
#define FDWIRE_PIECES_MAGIC 0x50465047u /* "GPFP" */
#define FDWIRE_VERSION 1u
#define FDWIRE_PIECES_PER_MSG 64

typedef struct fdwire_hello {
    uint32_t magic;
    uint32_t version;
    int32_t rank; /* the connector's */
    uint32_t reserved;
    uint64_t tag;
} fdwire_hello_t;

typedef struct fdwire_head {
    uint32_t magic;
    uint32_t total; /* pieces in the whole exchange, the same in each message */
    uint32_t count; /* pieces (and descriptors) in this message */
    uint32_t reserved;
} fdwire_head_t;

typedef struct fdwire_piece {
    uint64_t size;
    uint64_t offset;
} fdwire_piece_t;

/* 0 once fd is ready for `events` (or has an error or hang-up for the next
 * call to report), else ETIMEDOUT or poll's errno. */
int fdwire_wait(int fd, short events, uint64_t deadline);

/* The status of an errno from the calls below: ETIMEDOUT -> TIMEOUT, the
 * peer's close -> PEER, EMFILE -> NO_RESOURCE, ... */
gpuport_status_t fdwire_status(int err);

/* 0 or errno; ECONNRESET and EPIPE: the peer closed. */
int fdwire_send_hello(int fd, int rank, uint64_t tag, uint64_t deadline);
/* 0 and a well-formed hello of this version in *h; EPROTO: the record was
 * something else (any descriptors with it closed); ECONNRESET: the peer
 * closed first; ETIMEDOUT; another errno. */
int fdwire_recv_hello(int fd, fdwire_hello_t *h, uint64_t deadline);

/* The pieces of one side, each failure logged naming the peer and the
 * tag. recv: *theirs_p and *m_p as gpuport_fdsock_exchange returns them,
 * written only on success; every descriptor of a malformed message is
 * closed. */
gpuport_status_t fdwire_send_pieces(int fd, const gpuport_fdpeer_t *peer, uint64_t tag,
                                    const gpuport_fdpiece_t *mine, uint32_t n, uint64_t deadline);
gpuport_status_t fdwire_recv_pieces(int fd, const gpuport_fdpeer_t *peer, uint64_t tag,
                                    uint64_t deadline, gpuport_fdpiece_t **theirs_p,
                                    uint32_t *m_p);

/* The last sender's goodbye: reads until the peer closes (or deadline),
 * closing any descriptor that still arrives, so that this side closes with
 * nothing unread. Linux resets a unix socket's peer (ECONNRESET) when the
 * closing side had data left in its receive queue, and recvmsg reports
 * that error before data already queued for the peer: closing early could
 * cost the peer the pieces just sent. Returns what came after the pieces
 * (records), for the caller to report; the wait's end is not an error. */
int fdwire_await_close(int fd, uint64_t deadline);

#endif
