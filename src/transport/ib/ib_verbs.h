/*
 * libibverbs, loaded at run time: libibverbs.so.1 is dlopen()ed on the ib
 * transport's first use and every entry point it calls is resolved by its
 * exported name and symbol version, so libgpuport loads on machines without
 * rdma-core and only ib reports itself unavailable, with the reason. For the
 * ib transport's files (src/transport/ib/) and its unit test only.
 *
 * Calls are written IBV(ibv_create_cq)(...): verbs.h defines ibv_reg_mr and
 * ibv_query_port as function-like macros, and a name in parentheses escapes
 * them, so the table's pointer, typed from the exported prototype, is what is
 * called. ibv_post_send and ibv_poll_cq are inlines that dispatch through the
 * context's ops and need no entry; ibv_query_port's inline is ib_query_port.
 */
#ifndef GPUPORT_IB_VERBS_H
#define GPUPORT_IB_VERBS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "build_config.h"
#include "gpuport/gpuport.h"

#define IB_VERBS_SONAME "libibverbs.so.1"

/* X(name, symbol version): without one of these, ib is unavailable. Every
 * name here is versioned IBVERBS_1.1 since rdma-core's first release; the
 * IBVERBS_1.0 variants beside some of them are the pre-1.1 ABI. */
#define IB_VERBS_REQUIRED(X)                                                                    \
    X(ibv_get_device_list, "IBVERBS_1.1")                                                       \
    X(ibv_free_device_list, "IBVERBS_1.1")                                                      \
    X(ibv_get_device_name, "IBVERBS_1.1")                                                       \
    X(ibv_open_device, "IBVERBS_1.1")                                                           \
    X(ibv_close_device, "IBVERBS_1.1")                                                          \
    X(ibv_query_device, "IBVERBS_1.1")                                                          \
    X(ibv_query_port, "IBVERBS_1.1")                                                            \
    X(ibv_query_gid, "IBVERBS_1.1")                                                             \
    X(ibv_alloc_pd, "IBVERBS_1.1")                                                              \
    X(ibv_dealloc_pd, "IBVERBS_1.1")                                                            \
    X(ibv_reg_mr, "IBVERBS_1.1")                                                                \
    X(ibv_dereg_mr, "IBVERBS_1.1")                                                              \
    X(ibv_create_cq, "IBVERBS_1.1")                                                             \
    X(ibv_destroy_cq, "IBVERBS_1.1")                                                            \
    X(ibv_create_qp, "IBVERBS_1.1")                                                             \
    X(ibv_destroy_qp, "IBVERBS_1.1")                                                            \
    X(ibv_modify_qp, "IBVERBS_1.1")                                                             \
    X(ibv_wc_status_str, "IBVERBS_1.1")

/* X(name, symbol version): newer than some libibverbs still in use; NULL
 * when missing, and the feature that needs it says so. _ibv_query_gid_ex,
 * what the inline ibv_query_gid_ex calls: RoCE's GID choice needs it,
 * InfiniBand does not. ibv_reg_dmabuf_mr: GPU memory without a peer-memory
 * module, where the headers built against declare it too. */
#if GPUPORT_HAVE_IBV_DMABUF
#define IB_VERBS_DMABUF(X) X(ibv_reg_dmabuf_mr, "IBVERBS_1.12")
#else
#define IB_VERBS_DMABUF(X)
#endif
#define IB_VERBS_OPTIONAL(X)                                                                    \
    X(_ibv_query_gid_ex, "IBVERBS_1.11")                                                        \
    IB_VERBS_DMABUF(X)

typedef struct ib_verbs {
#define IB_VERBS_FIELD(name, version) __typeof__(name) *name;
    IB_VERBS_REQUIRED(IB_VERBS_FIELD)
    IB_VERBS_OPTIONAL(IB_VERBS_FIELD)
#undef IB_VERBS_FIELD
} ib_verbs_t;

extern ib_verbs_t ib_verbs;

#define IBV(name) (ib_verbs.name)

/* Loads libibverbs once; GPUPORT_ERR_NOT_SUPPORTED with the reason in why
 * ("libibverbs not found: dlopen(libibverbs.so.1): ..." or "libibverbs
 * lacks <symbol> ..."). Thread-safe. Nothing in the table may be called
 * before it succeeds. */
gpuport_status_t ib_verbs_load(char *why, size_t len);

/* Test hooks, not for the library. ib_verbs_install makes table the
 * loaded one (a mock provider); ib_verbs_load_from loads soname in place
 * of whatever was loaded or installed, and what ib_verbs_load reports from
 * then on is its outcome. Neither may race with verbs calls. */
void ib_verbs_install(const ib_verbs_t *table);
gpuport_status_t ib_verbs_load_from(const char *soname, char *why, size_t len);

/* ibv_reg_dmabuf_mr is in the headers and in the library loaded. */
static inline int ib_verbs_have_dmabuf(void)
{
#if GPUPORT_HAVE_IBV_DMABUF
    return ib_verbs.ibv_reg_dmabuf_mr != NULL;
#else
    return 0;
#endif
}

/* verbs.h's ibv_query_port (the inline ___ibv_query_port) over the table:
 * an extended context answers through its own op with the whole struct,
 * any other through the exported ibv_query_port, which fills the part of it
 * that the old ABI had. */
static inline int ib_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

    if (!vctx) {
        memset(attr, 0, sizeof(*attr));
        return IBV(ibv_query_port)(ctx, port, (struct _compat_ibv_port_attr *)attr);
    }
    return vctx->query_port(ctx, port, attr, sizeof(*attr));
}

#endif
