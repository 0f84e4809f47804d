/*
 * A mock verbs provider, for test_ib only: the ib transport's data path
 * (ib.c, ib_proxy.c, ib_dev.c, ib_mr.c) needs a device, and the test machine has none.
 * mock_verbs_install fills the transport's verbs table (ib_verbs_install)
 * with the mock's entry points in place of libibverbs'; they present one
 * device with one port and act as its NIC: QPs check their state changes
 * and attributes the way a provider does, and work requests are executed
 * when the requester polls its CQ (a few per call, so the send queue
 * fills), checking keys, ranges, access flags, message size, alignment and
 * PSNs, writing the peer's memory (RDMA WRITE, fetch-and-add) or reading it
 * (RDMA READ; the ranks are threads of the test) and completing in order;
 * a failure moves the QP to the error state and flushes the rest. Inline
 * data is copied at the post, as a provider does, and only within the QP's
 * max_inline_data. A link between two ranks can be held (mock_verbs_hold):
 * its QPs stop executing until released. Not a model of timing, PCIe
 * ordering or a second machine: only of what verbs promise (a write or
 * atomic that could pass an earlier read, lacking IBV_SEND_FENCE, is named
 * in mock_error).
 */
#ifndef GPUPORT_TEST_MOCK_VERBS_H
#define GPUPORT_TEST_MOCK_VERBS_H

#include <stdint.h>

#include "transport/ib/ib_verbs.h"

/* The device presented; set before mock_verbs_install. */
typedef struct mock_verbs_config {
    int link_layer;   /* IBV_LINK_LAYER_* */
    int atomic_cap;   /* enum ibv_atomic_cap */
    uint32_t max_msg; /* the port's largest message */
    long fail_at;     /* the n-th executed work request fails (0: none) */
    uint32_t max_inline; /* inline data an RC QP takes (0: none, QPs asking for some fail) */
} mock_verbs_config_t;

extern mock_verbs_config_t mock_config;

/* Verbs objects open now; read with atomic builtins while ranks run. */
typedef struct mock_verbs_live {
    int ctx, pd, mr, cq, qp, lists;
} mock_verbs_live_t;

extern mock_verbs_live_t mock_live;

/* The first thing a provider would have refused (or that a real HCA could
 * have executed otherwise than the mock did); "" while nothing was. */
extern char mock_error[256];

/* The last work request posted with IBV_SEND_INLINE (the data as it was at
 * the post), and how many were; mock_inline_reset forgets them. Read once
 * the poster's completion has been seen. */
typedef struct mock_inline_post {
    long count;
    int opcode;
    unsigned send_flags;
    uint64_t remote_addr;
    uint32_t rkey, length;
    unsigned char data[64];
} mock_inline_post_t;

extern mock_inline_post_t mock_inline;
void mock_inline_reset(void);

/* Reads and atomics executed, and the writes and atomics posted right
 * after an RDMA read: how many, how many of those carried IBV_SEND_FENCE,
 * the last one's opcode and flags. One after a read without the fence is taken, executed
 * in order, and named in mock_error: a real HCA may let it pass the read.
 * Counted since the install; read with atomic builtins. */
typedef struct mock_rma_stats {
    long reads, atomics;
    long after_read, fenced;
    int last_opcode;
    unsigned last_flags;
} mock_rma_stats_t;

extern mock_rma_stats_t mock_rma;
/* The rkey of the registration that holds addr (0: none). */
uint32_t mock_rkey_of(const void *addr);

/* Forgets the open objects, the refusal and the requests executed, and
 * installs the mock's entry points, every one of the table (a test may
 * then install a copy of ib_verbs with an optional one cleared). */
void mock_verbs_install(void);
/* The n-th work request executed from now fails (as fail_at counts from
 * the install); call while no other rank posts. */
void mock_verbs_fail_in(long n);
/* A stalled link: while on, the QPs of the domain that registered `from`
 * that are connected to a QP of the domain that registered `to` (each
 * rank's communicator has a domain of its own) execute nothing: their work
 * requests stay posted and none completes, so the requester's send queue
 * fills; off, they go on in order. A QP whose responder is destroyed is no
 * longer held: its requests then fail as any would. 0 if either address
 * lies in no registration (nothing held then). */
int mock_verbs_hold(const void *from, const void *to, int on);
/* Work requests posted and not completed on the held QPs; read while
 * held. */
long mock_verbs_held_posted(void);
/* libibverbs.so.1 again (or the reason it cannot be loaded). */
void mock_verbs_uninstall(void);

#endif
