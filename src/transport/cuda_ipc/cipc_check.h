/*
 * What cuda_ipc's relay (cipc_relay.c) accepts from its peer, as pure
 * functions compiled into every build (cipc_check.c), so that the unit
 * tests and the fuzz harnesses run them where CUDA is not: the request
 * words a client writes into the server's control slot.
 */
#ifndef GPUPORT_CIPC_CHECK_H
#define GPUPORT_CIPC_CHECK_H

#include <stdint.h>

/* A request's kind, in the top two bits of its staging word (W_STG) */
#define CIPC_REQ_SHIFT 62
#define CIPC_REQ_STAGE 1ull   /* the client's source -> its staging */
#define CIPC_REQ_UNSTAGE 2ull /* its staging -> its source (a get's second copy) */

/* 1 if a peer's request (seq after served; kind, size bytes at source
 * offset off and staging offset stg_off) is the next one, of a known kind,
 * of at least a byte, and inside the source and staging sizes the peer
 * declared; the server refuses anything else. */
int cipc_relay_request_ok(uint64_t seq, uint64_t served, uint64_t kind, uint64_t off,
                          uint64_t size, uint64_t stg_off, uint64_t src_size, uint64_t stg_size);

#endif
