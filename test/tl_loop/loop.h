/*
 * loop: a transport for tests, built outside the library, that proves a
 * transport needs no core change: it registers itself at program start
 * (GPUPORT_TRANSPORT_REGISTER), declares a GPUPORT_* setting and a record
 * type of its own through its ops table, and uses the core only through
 * src/transport/tl_core.h. It joins communicators of one process (the
 * threads of local_run): a put is a memcpy into the peer's destination, a
 * signal an increment of the peer's semaphore in its control segment,
 * mapped here. What it did is counted for the tests that link it.
 */
#ifndef GPUPORT_TEST_LOOP_H
#define GPUPORT_TEST_LOOP_H

#include <stdatomic.h>
#include <stdint.h>

#include "transport/transport.h"

/* GPUPORT_LOOP_CHUNK: a put is copied in pieces of at most this many
 * bytes. GPUPORT_LOOP_AUTO_RANK: what auto_rank answers for host memory (0:
 * only when forced). */
typedef struct loop_settings {
    uint64_t chunk;
    uint64_t auto_rank;
} loop_settings_t;

/* Exchanged by the two sides of a connection (conn_open); both must copy
 * in pieces of the same size, or the connection is refused. */
typedef struct loop_hello_rec {
    gpuport_rec_header_t hdr;
    int32_t rank;
    int32_t pid;
    uint64_t chunk;
} loop_hello_rec_t;

enum { LOOP_REC_HELLO, LOOP_NRECORDS };
extern const gpuport_tl_record_type_t loop_records[LOOP_NRECORDS];

/* The kind the registry gave it (-1: registration failed). */
extern int loop_kind;

/* What the transport did in this process. */
typedef struct loop_stats {
    _Atomic uint64_t puts, chunks, signals, values;
    _Atomic uint64_t chunk;    /* the GPUPORT_LOOP_CHUNK the last put used */
    loop_hello_rec_t last_hello; /* the last record a peer sent (conn_open) */
    _Atomic int hellos;
} loop_stats_t;
extern loop_stats_t loop_stats;

/* A channel that has no room (has_room refuses its operations) while
 * set: loop_block(rank, id) names it by its rank and channel id,
 * loop_block(-1, 0) lifts it. How often has_room refused is counted. */
void loop_block(int rank, uint32_t channel);
extern _Atomic uint64_t loop_refused;

/* Host calls' own sends (ops->host_send): loop declines every one, so the
 * proxy carries them out; while loop_slow_decline is set, each decline
 * first sleeps that many microseconds (the window between a host call's
 * count and the transport's answer, made wide). Declines are counted. */
extern _Atomic uint32_t loop_slow_decline;
extern _Atomic uint64_t loop_declined;
extern _Atomic int loop_declining; /* 1 while a decline sleeps */

/* The record check conn_open applies to a peer's hello: GPUPORT_OK or an
 * error, logged. */
gpuport_status_t loop_hello_check(const loop_hello_rec_t *mine, const loop_hello_rec_t *theirs,
                                  int peer);

#endif
