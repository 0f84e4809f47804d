/*
 * What a program built against other gpuport headers meets. The calls that
 * take or fill a struct shared with the library (gpuport_comm_create's
 * gpuport_bootstrap_t, gpuport_comm_stats's gpuport_comm_stats_t,
 * gpuport_channel_device's gpuport_port_channel_dev_t, gpuport_mem_info's
 * gpuport_mem_info_t) pass the library the layout that the program was
 * compiled with. Such a program is simulated
 * here by the layout it would pass: an older one (the struct with fewer
 * members), a newer one, and one of this version but another size. Each is
 * refused with GPUPORT_ERR_VERSION and a message naming both layouts, and
 * not a byte of the caller's struct is read or written (its bytes, and the
 * bytes after it, are compared with what was there; a bootstrap's
 * operations are never called); this header's layout is accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "gpuport/gpuport_device.h"
#include "internal.h"
#include "local_bootstrap.h"

#define CANARY 0xa5

/* gpuport_bootstrap_t before it had destroy: what an older program's is */
typedef struct old_bootstrap {
    void *ctx;
    int rank, size, local_rank, local_size;
    gpuport_status_t (*allgather)(void *, const void *, void *, size_t);
    gpuport_status_t (*barrier)(void *);
    gpuport_status_t (*send)(void *, int, int, const void *, size_t);
    gpuport_status_t (*recv)(void *, int, int, void *, size_t);
} old_bootstrap_t;

/* gpuport_bootstrap_t of layout version 1 (0.1), before recv_timed: still
 * accepted, its creations waiting without limit */
typedef struct v1_bootstrap {
    old_bootstrap_t old;
    void (*destroy)(void *);
} v1_bootstrap_t;

/* gpuport_bootstrap_t of layout version 2 (0.2 before allgather_timed):
 * still accepted, its communicator's creations waiting without limit */
typedef struct v2_bootstrap {
    v1_bootstrap_t v1;
    gpuport_status_t (*recv_timed)(void *, int, int, void *, size_t, int);
} v2_bootstrap_t;

/* gpuport_comm_stats_t with its first three counters only */
typedef struct old_stats {
    uint64_t triggers, rejected, flusher_items;
} old_stats_t;

/* gpuport_comm_stats_t of layout version 1, before host_inline: still
 * accepted, and nothing written past it */
typedef struct v1_stats {
    uint64_t triggers, rejected, flusher_items, proxy_cpu_ns, flusher_cpu_ns;
} v1_stats_t;

/* a later gpuport_comm_stats_t, one counter more */
typedef struct new_stats {
    gpuport_comm_stats_t v1;
    uint64_t more;
} new_stats_t;

/* gpuport_mem_info_t of a program that knew fewer transports */
typedef struct old_mem_info {
    int32_t kind, device;
    uint64_t addr, size;
    uint32_t ntransports, reserved;
    gpuport_mem_info_tl_t tl[4];
} old_mem_info_t;

static int bootstrap_calls;

static gpuport_status_t one_allgather(void *ctx, const void *send, void *recv, size_t bytes)
{
    (void)ctx;
    bootstrap_calls++;
    memcpy(recv, send, bytes);
    return GPUPORT_OK;
}

static gpuport_status_t one_barrier(void *ctx)
{
    (void)ctx;
    bootstrap_calls++;
    return GPUPORT_OK;
}

static gpuport_status_t one_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    bootstrap_calls++;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

static gpuport_status_t one_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes;
    bootstrap_calls++;
    return GPUPORT_ERR_NOT_SUPPORTED;
}

static int all_canary(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != CANARY)
            return 0;
    return 1;
}

/* expr must return GPUPORT_ERR_VERSION and log the call, the type and both
 * layouts as "layout version V (S bytes)" */
static void expect_refused(gpuport_status_t st, const char *log, const char *call,
                           const char *type, uint32_t program, uint32_t library)
{
    char theirs[64], ours[64];

    snprintf(theirs, sizeof(theirs), "layout version %u (%u bytes)",
             GPUPORT_LAYOUT_VERSION(program), GPUPORT_LAYOUT_SIZE(program));
    snprintf(ours, sizeof(ours), "layout version %u (%u bytes)", GPUPORT_LAYOUT_VERSION(library),
             GPUPORT_LAYOUT_SIZE(library));
    CHECK_MSG(st == GPUPORT_ERR_VERSION, "%s with layout 0x%x returned %d (%s)", call,
              (unsigned)program, (int)st, gpuport_status_string(st));
    CHECK_MSG(strstr(log, call) && strstr(log, type) && strstr(log, theirs) && strstr(log, ours),
              "%s: the message does not name %s, \"%s\" and \"%s\": %s", call, type, theirs, ours,
              log);
}

/* An older program's bootstrap, followed by bytes it does not own: refused
 * before any of it is read (the destroy that a newer library would look
 * for after it is not called), *comm_p NULL. A newer layout the same. */
static void bootstrap_layouts(void)
{
    struct {
        old_bootstrap_t bs;
        unsigned char after[64];
    } old;
    const uint32_t layouts[] = {GPUPORT_LAYOUT(0, old_bootstrap_t),
                                GPUPORT_LAYOUT(GPUPORT_BOOTSTRAP_VERSION + 1, old),
                                GPUPORT_LAYOUT(GPUPORT_BOOTSTRAP_VERSION, old_bootstrap_t)};

    memset(&old, CANARY, sizeof(old));
    old.bs.ctx = NULL;
    old.bs.rank = 0;
    old.bs.size = 1;
    old.bs.local_rank = 0;
    old.bs.local_size = 1;
    old.bs.allgather = one_allgather;
    old.bs.barrier = one_barrier;
    old.bs.send = one_send;
    old.bs.recv = one_recv;
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
        gpuport_comm_t comm = (gpuport_comm_t)&old; /* anything but NULL */
        gpuport_status_t st;
        const char *log;

        bootstrap_calls = 0;
        capture_begin();
        st = gpuport_comm_create_v(layouts[i], (const gpuport_bootstrap_t *)&old.bs, &comm);
        log = capture_end();
        expect_refused(st, log, "gpuport_comm_create", "gpuport_bootstrap_t", layouts[i],
                       GPUPORT_BOOTSTRAP_LAYOUT);
        CHECK_MSG(comm == NULL, "comm is %p after a refused layout", (void *)comm);
        CHECK_MSG(bootstrap_calls == 0, "the refused bootstrap was called %d times",
                  bootstrap_calls);
        CHECK_MSG(all_canary(old.after, sizeof(old.after)), "bytes after the bootstrap changed");
    }
}

/* 0.1's bootstrap (layout version 1, no recv_timed), followed by bytes it
 * does not own: accepted, none of those bytes read as recv_timed (they
 * would be called: the canary is no function). */
static void bootstrap_v1(void)
{
    struct {
        v1_bootstrap_t bs;
        unsigned char after[64];
    } v1;
    gpuport_comm_t comm = NULL;

    memset(&v1, CANARY, sizeof(v1));
    v1.bs.old.ctx = NULL;
    v1.bs.old.rank = 0;
    v1.bs.old.size = 1;
    v1.bs.old.local_rank = 0;
    v1.bs.old.local_size = 1;
    v1.bs.old.allgather = one_allgather;
    v1.bs.old.barrier = one_barrier;
    v1.bs.old.send = one_send;
    v1.bs.old.recv = one_recv;
    v1.bs.destroy = NULL;
    CHECK_OK(gpuport_comm_create_v(GPUPORT_LAYOUT(1, v1_bootstrap_t),
                                   (const gpuport_bootstrap_t *)&v1.bs, &comm));
    CHECK(comm != NULL);
    CHECK(comm->bs.recv_timed == NULL);
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK_MSG(all_canary(v1.after, sizeof(v1.after)), "bytes after the bootstrap changed");
}

static gpuport_status_t one_recv_timed(void *ctx, int peer, int tag, void *buf, size_t bytes,
                                       int timeout_ms)
{
    (void)ctx, (void)peer, (void)tag, (void)buf, (void)bytes, (void)timeout_ms;
    bootstrap_calls++;
    return GPUPORT_ERR_TIMEOUT;
}

/* Layout version 2 (recv_timed, no allgather_timed), followed by bytes it
 * does not own: accepted, recv_timed kept, none of those bytes read as
 * allgather_timed (the canary is no function). */
static void bootstrap_v2(void)
{
    struct {
        v2_bootstrap_t bs;
        unsigned char after[64];
    } v2;
    gpuport_comm_t comm = NULL;

    CHECK(sizeof(v2_bootstrap_t) == offsetof(gpuport_bootstrap_t, allgather_timed));
    memset(&v2, CANARY, sizeof(v2));
    v2.bs.v1.old.ctx = NULL;
    v2.bs.v1.old.rank = 0;
    v2.bs.v1.old.size = 1;
    v2.bs.v1.old.local_rank = 0;
    v2.bs.v1.old.local_size = 1;
    v2.bs.v1.old.allgather = one_allgather;
    v2.bs.v1.old.barrier = one_barrier;
    v2.bs.v1.old.send = one_send;
    v2.bs.v1.old.recv = one_recv;
    v2.bs.v1.destroy = NULL;
    v2.bs.recv_timed = one_recv_timed;
    CHECK_OK(gpuport_comm_create_v(GPUPORT_LAYOUT(2, v2_bootstrap_t),
                                   (const gpuport_bootstrap_t *)&v2.bs, &comm));
    CHECK(comm != NULL);
    CHECK(comm->bs.recv_timed == one_recv_timed);
    CHECK(comm->bs.allgather_timed == NULL);
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK_MSG(all_canary(v2.after, sizeof(v2.after)), "bytes after the bootstrap changed");
}

/* An older program's stats (version 0, or version 1 cut short), a newer
 * one's, and one of this version cut short: nothing written, inside the
 * caller's struct or after it. Then this layout: the counters, and nothing
 * after them; then version 1's, which is still served. */
static void stats_layouts(gpuport_comm_t comm)
{
    struct {
        gpuport_comm_stats_t s;
        unsigned char after[64];
    } buf;
    struct {
        v1_stats_t s;
        unsigned char after[64];
    } v1;
    const uint32_t layouts[] = {GPUPORT_LAYOUT(0, old_stats_t),
                                GPUPORT_LAYOUT(GPUPORT_STATS_VERSION + 1, new_stats_t),
                                GPUPORT_LAYOUT(GPUPORT_STATS_VERSION, old_stats_t),
                                GPUPORT_LAYOUT(1, old_stats_t)};

    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
        gpuport_status_t st;
        const char *log;

        memset(&buf, CANARY, sizeof(buf));
        capture_begin();
        st = gpuport_comm_stats_v(layouts[i], comm, &buf.s);
        log = capture_end();
        expect_refused(st, log, "gpuport_comm_stats", "gpuport_comm_stats_t", layouts[i],
                       GPUPORT_STATS_LAYOUT);
        CHECK_MSG(all_canary((const unsigned char *)&buf, sizeof(buf)),
                  "a refused gpuport_comm_stats wrote into the caller's memory");
    }
    memset(&buf, CANARY, sizeof(buf));
    CHECK_OK(gpuport_comm_stats(comm, &buf.s));
    /* the flush may return before the proxy counts its trigger */
    CHECK_MSG(buf.s.triggers >= 2 && buf.s.rejected == 0, "triggers %llu, rejected %llu",
              (unsigned long long)buf.s.triggers, (unsigned long long)buf.s.rejected);
    CHECK(all_canary(buf.after, sizeof(buf.after)));
    CHECK_MSG(buf.s.host_inline != 0xa5a5a5a5a5a5a5a5ull, "host_inline was not written");
    /* a version-1 program: its five counters, and not host_inline after them */
    memset(&v1, CANARY, sizeof(v1));
    CHECK_OK(gpuport_comm_stats_v(GPUPORT_LAYOUT(1, v1_stats_t), comm,
                                  (gpuport_comm_stats_t *)(void *)&v1.s));
    CHECK_MSG(v1.s.triggers >= buf.s.triggers && v1.s.rejected == 0 &&
                  v1.s.flusher_items >= buf.s.flusher_items,
              "layout 1: triggers %llu, rejected %llu, flusher items %llu",
              (unsigned long long)v1.s.triggers, (unsigned long long)v1.s.rejected,
              (unsigned long long)v1.s.flusher_items);
    CHECK_MSG(all_canary(v1.after, sizeof(v1.after)),
              "gpuport_comm_stats wrote past a layout-1 struct");
}

/* The same for the memory query; this layout: the region's kind, address
 * and size, a verdict per transport, and nothing after the struct. */
static void mem_info_layouts(gpuport_mem_t mem, void *region)
{
    struct {
        gpuport_mem_info_t info;
        unsigned char after[64];
    } buf;
    const uint32_t layouts[] = {GPUPORT_LAYOUT(0, old_mem_info_t),
                                GPUPORT_LAYOUT(GPUPORT_MEM_INFO_VERSION + 1, buf),
                                GPUPORT_LAYOUT(GPUPORT_MEM_INFO_VERSION, old_mem_info_t)};

    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
        gpuport_status_t st;
        const char *log;

        memset(&buf, CANARY, sizeof(buf));
        capture_begin();
        st = gpuport_mem_info_v(layouts[i], mem, &buf.info);
        log = capture_end();
        expect_refused(st, log, "gpuport_mem_info", "gpuport_mem_info_t", layouts[i],
                       GPUPORT_MEM_INFO_LAYOUT);
        CHECK_MSG(all_canary((const unsigned char *)&buf, sizeof(buf)),
                  "a refused gpuport_mem_info wrote into the caller's memory");
    }
    memset(&buf, CANARY, sizeof(buf));
    CHECK_OK(gpuport_mem_info(mem, &buf.info));
    CHECK_MSG(buf.info.kind == GPUPORT_MEM_KIND_HOST_SHARED && buf.info.device == -1 &&
                  buf.info.addr == (uint64_t)(uintptr_t)region && buf.info.size == 4096 &&
                  buf.info.ntransports >= 4,
              "kind %d, device %d, %u transports", buf.info.kind, buf.info.device,
              buf.info.ntransports);
    CHECK(all_canary(buf.after, sizeof(buf.after)));
}

/* A host-only communicator has no device handles: this layout gets
 * GPUPORT_ERR_NOT_SUPPORTED, which comes after the layout check, so the
 * refusals below are the layout's. Nothing written either way. */
static void device_layouts(gpuport_channel_t ch)
{
    struct {
        gpuport_port_channel_dev_t d;
        unsigned char after[64];
    } buf;
    const uint32_t layouts[] = {
        GPUPORT_LAYOUT(0, gpuport_fifo_dev_t),
        GPUPORT_LAYOUT(GPUPORT_CHANNEL_DEV_VERSION + 1, buf),
        GPUPORT_LAYOUT(GPUPORT_CHANNEL_DEV_VERSION, gpuport_port_channel_dev_t) - 8};
    gpuport_status_t st;
    const char *log;

    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
        memset(&buf, CANARY, sizeof(buf));
        capture_begin();
        st = gpuport_channel_device_v(layouts[i], ch, &buf.d);
        log = capture_end();
        expect_refused(st, log, "gpuport_channel_device", "gpuport_port_channel_dev_t",
                       layouts[i], GPUPORT_CHANNEL_DEV_LAYOUT);
        CHECK(all_canary((const unsigned char *)&buf, sizeof(buf)));
    }
    memset(&buf, CANARY, sizeof(buf));
    capture_begin();
    st = gpuport_channel_device(ch, &buf.d);
    log = capture_end();
    CHECK_STATUS(st, GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(strstr(log, "layout") == NULL, "this layout was refused: %s", log);
    CHECK(all_canary((const unsigned char *)&buf, sizeof(buf)));
}

/* One rank: a channel to itself, some traffic for the counters. */
static int one_rank(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t mem;
    gpuport_channel_t ch;
    void *region;

    (void)rank, (void)size, (void)arg;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, 4096, &region));
    CHECK_OK(gpuport_mem_register(comm, region, 4096, &mem));
    CHECK_OK(gpuport_channel_create(comm, 0, mem, mem, &ch));
    CHECK_OK(gpuport_channel_put_with_signal(ch, 2048, 0, 64));
    CHECK_OK(gpuport_channel_wait(ch));
    CHECK_OK(gpuport_channel_put_value(ch, 0, 42));
    CHECK_OK(gpuport_channel_flush(ch));
    stats_layouts(comm);
    device_layouts(ch);
    mem_info_layouts(mem, region);
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(mem));
    CHECK_OK(gpuport_mem_free(comm, region));
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

int main(void)
{
    CHECK(setenv("GPUPORT_LOG_LEVEL", "warn", 1) == 0);
    CHECK(setenv("GPUPORT_GPU", "off", 1) == 0);
    /* the stats count the proxy's triggers: the host calls go through it */
    CHECK(setenv("GPUPORT_HOST_INLINE", "0", 1) == 0);
    bootstrap_layouts();
    bootstrap_v1();
    bootstrap_v2();
    CHECK(local_run(1, one_rank, NULL) == 0);
    printf("older, newer and cut-short layouts of gpuport_bootstrap_t, gpuport_comm_stats_t, "
           "gpuport_port_channel_dev_t and gpuport_mem_info_t refused, nothing read or written; this header's "
           "accepted\n");
    return 0;
}
