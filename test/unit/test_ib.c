/*
 * The ib transport's set-up logic, without an RDMA device: a QP record that
 * is misread, a wrong GID on a RoCE port or a wrong QP attribute shows up on
 * a cluster as a hang or an opaque verbs error, so each is checked here
 * against recorded port tables and spelled-out attributes. Also: errno and
 * completion status mapping, device discovery on this machine, and that the
 * transport table never lets ib be chosen while it has no data path.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "transport/ib/ib.h"
#include "transport/transport.h"

static const char *const no_device = "no RDMA device was found (ibv_get_device_list returned none)";

/* ---- QP record ---- */

static const uint8_t gid_a[IB_GID_LEN] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3};

static void pack_sample(ib_qp_rec_t *r)
{
    ib_qp_rec_pack(r, 0x1234, gid_a, 0xabcdef, 0x1fedcba /* > 24 bits */, IBV_MTU_4096, 2, 3,
                   IB_LINK_LAYER_ETH);
}

static void expect_unpack_version(const void *buf, size_t len, const char *what)
{
    ib_qp_rec_t out;
    const char *log;

    memset(&out, 0x5a, sizeof(out));
    capture_begin();
    gpuport_status_t st = ib_qp_rec_unpack(buf, len, 7, &out);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_VERSION, "%s: %s", what, gpuport_status_string(st));
    CHECK_MSG(count_of(log, "ERROR") == 1 && strstr(log, "rank 7"), "%s: log: %s", what, log);
    for (size_t i = 0; i < sizeof(out); i++)
        CHECK_MSG(((unsigned char *)&out)[i] == 0x5a, "%s: output written on failure", what);
}

static void test_record(void)
{
    ib_qp_rec_t r, out, bad;
    unsigned char big[sizeof(r) + 8];

    pack_sample(&r);
    CHECK(r.hdr.type == GPUPORT_REC_IB_QP && r.hdr.size == sizeof(r));
    CHECK(sizeof(r) == 52);
    CHECK_OK(ib_qp_rec_unpack(&r, sizeof(r), 1, &out));
    CHECK(memcmp(&r, &out, sizeof(r)) == 0);
    CHECK(out.lid == 0x1234 && out.qpn == 0xabcdef && out.psn == 0xfedcba);
    CHECK(out.mtu == IBV_MTU_4096 && out.port == 2 && out.gid_index == 3);
    CHECK(out.link_layer == IB_LINK_LAYER_ETH);
    CHECK(memcmp(out.gid, gid_a, IB_GID_LEN) == 0);

    bad = r;
    bad.hdr.version_minor++;
    expect_unpack_version(&bad, sizeof(bad), "minor version");
    bad = r;
    bad.hdr.layout++;
    expect_unpack_version(&bad, sizeof(bad), "layout");
    bad = r;
    bad.hdr.magic ^= 1;
    expect_unpack_version(&bad, sizeof(bad), "magic");
    bad = r;
    bad.hdr.type = GPUPORT_REC_CHANNEL;
    expect_unpack_version(&bad, sizeof(bad), "type");
    bad = r;
    bad.hdr.size = sizeof(r) - 4;
    expect_unpack_version(&bad, sizeof(bad), "header size");
    /* the header is right but the bytes received are not */
    expect_unpack_version(&r, sizeof(r) - 4, "short buffer");
    memcpy(big, &r, sizeof(r));
    expect_unpack_version(big, sizeof(big), "long buffer");
    expect_unpack_version(&r, 4, "truncated header");
}

/* ---- GID selection ---- */

static ib_gid_entry_t gid(int index, ib_gid_type_t type, const char *text)
{
    ib_gid_entry_t e = {.index = index, .type = type, .valid = 1};
    unsigned v[16];

    /* 32 hex digits */
    CHECK(strlen(text) == 32);
    for (int i = 0; i < 16; i++) {
        CHECK(sscanf(text + 2 * i, "%2x", &v[i]) == 1);
        e.gid[i] = (uint8_t)v[i];
    }
    return e;
}

#define LL "fe800000000000000211223344556677"
#define V4 "00000000000000000000ffff0a000005" /* ::ffff:10.0.0.5 */
#define V6 "20010db8000000000000000000000005"
#define ZERO "00000000000000000000000000000000"

static void expect_gid(const ib_gid_entry_t *t, int n, int forced, int want, const char *why_has)
{
    char why[256] = "";
    int got = ib_gid_select(t, n, forced, why, sizeof(why));

    CHECK_MSG(got == want, "forced %d: chose %d, expected %d (%s)", forced, got, want, why);
    CHECK_MSG(strstr(why, why_has), "forced %d: why \"%s\" lacks \"%s\"", forced, why, why_has);
}

static void test_gid(void)
{
    /* A typical mlx5 RoCE port: v1 and v2 for link-local, then v1 and v2 for
     * the IPv4 address, then an IPv6 global address, one empty slot. */
    ib_gid_entry_t roce[] = {gid(0, IB_GID_TYPE_ROCE_V1, LL), gid(1, IB_GID_TYPE_ROCE_V2, LL),
                             gid(2, IB_GID_TYPE_ROCE_V1, V4), gid(3, IB_GID_TYPE_ROCE_V2, V4),
                             gid(4, IB_GID_TYPE_ROCE_V2, V6), gid(5, IB_GID_TYPE_ROCE_V2, ZERO)};
    /* IPv6 only: RoCE v2 with a global address, link-local before it */
    ib_gid_entry_t v6[] = {gid(0, IB_GID_TYPE_ROCE_V1, LL), gid(1, IB_GID_TYPE_ROCE_V2, LL),
                           gid(2, IB_GID_TYPE_ROCE_V1, V6), gid(3, IB_GID_TYPE_ROCE_V2, V6)};
    /* no address configured: link-local is all there is */
    ib_gid_entry_t ll[] = {gid(0, IB_GID_TYPE_ROCE_V1, LL), gid(1, IB_GID_TYPE_ROCE_V2, LL)};
    /* RoCE v1 only (old kernel or v1-only mode) */
    ib_gid_entry_t v1[] = {gid(0, IB_GID_TYPE_ROCE_V1, LL), gid(1, IB_GID_TYPE_ROCE_V1, V4)};
    /* an InfiniBand port: subnet prefix + port GUID */
    ib_gid_entry_t ib[] = {gid(0, IB_GID_TYPE_IB, LL), gid(1, IB_GID_TYPE_IB, ZERO)};
    /* nothing usable */
    ib_gid_entry_t empty[] = {gid(0, IB_GID_TYPE_ROCE_V2, ZERO), gid(1, IB_GID_TYPE_ROCE_V2, V4)};

    expect_gid(roce, 6, -1, 3, "RoCE v2 with an IPv4-mapped address");
    expect_gid(v6, 4, -1, 3, "no IPv4-mapped");
    expect_gid(ll, 2, -1, 1, "link-local");
    expect_gid(v1, 2, -1, 1, "RoCE v1");
    expect_gid(ib, 2, -1, 0, "InfiniBand");
    empty[1].valid = 0;
    expect_gid(empty, 2, -1, -1, "no valid");
    expect_gid(empty, 0, -1, -1, "no valid");

    /* entries sparse in the table: the GID index, not the position */
    ib_gid_entry_t sparse[] = {gid(4, IB_GID_TYPE_ROCE_V1, V4), gid(9, IB_GID_TYPE_ROCE_V2, V4)};
    expect_gid(sparse, 2, -1, 9, "GID index 9");

    /* forced */
    expect_gid(roce, 6, 2, 2, "GID index 2 (RoCE v1)");
    expect_gid(roce, 6, 0, 0, "GPUPORT_IB_GID_INDEX");
    expect_gid(roce, 6, 5, -1, "GPUPORT_IB_GID_INDEX=5 names no valid GID");
    expect_gid(roce, 6, 17, -1, "GPUPORT_IB_GID_INDEX=17 names no valid GID");
    roce[3].valid = 0;
    expect_gid(roce, 6, 3, -1, "GPUPORT_IB_GID_INDEX=3");
    /* with the IPv4 v2 entry gone, the IPv6 v2 one wins over IPv4 v1 */
    expect_gid(roce, 6, -1, 4, "RoCE v2 (no IPv4-mapped");
}

/* ---- QP attributes ---- */

static void test_qp_attr(void)
{
    struct ibv_qp_attr a;
    ib_qp_rec_t remote;
    int mask;

    memset(&a, 0x77, sizeof(a));
    ib_qp_attr_init(&a, &mask, 2);
    CHECK(a.qp_state == IBV_QPS_INIT && a.pkey_index == 0 && a.port_num == 2);
    CHECK(a.qp_access_flags == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
    CHECK(mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));

    const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

    /* InfiniBand: LID addressing, no GRH; remote MTU smaller than ours */
    ib_qp_rec_pack(&remote, 0x2a, gid_a, 0x1a2, 0x123456, IBV_MTU_2048, 1, 0, IB_LINK_LAYER_IB);
    memset(&a, 0x77, sizeof(a));
    ib_qp_attr_rtr(&a, &mask, &remote, 0, 0, 1, IBV_MTU_4096);
    CHECK(mask == rtr_mask);
    CHECK(a.qp_state == IBV_QPS_RTR && a.path_mtu == IBV_MTU_2048);
    CHECK(a.dest_qp_num == 0x1a2 && a.rq_psn == 0x123456);
    CHECK(a.max_dest_rd_atomic == 16 && a.min_rnr_timer == 12);
    CHECK(a.ah_attr.is_global == 0 && a.ah_attr.dlid == 0x2a && a.ah_attr.port_num == 1);
    CHECK(a.ah_attr.sl == 0 && a.ah_attr.src_path_bits == 0);
    CHECK(a.ah_attr.grh.hop_limit == 0 && a.ah_attr.grh.sgid_index == 0);
    /* fields outside the mask are zero, not left over */
    CHECK(a.sq_psn == 0 && a.timeout == 0 && a.qp_access_flags == 0);

    /* RoCE: GRH addressing to the remote GID from our sgid index; local MTU smaller */
    ib_qp_rec_pack(&remote, 0, gid_a, 0x77, 42, IBV_MTU_4096, 1, 5, IB_LINK_LAYER_ETH);
    memset(&a, 0x77, sizeof(a));
    ib_qp_attr_rtr(&a, &mask, &remote, 1, 3, 2, IBV_MTU_1024);
    CHECK(mask == rtr_mask);
    CHECK(a.qp_state == IBV_QPS_RTR && a.path_mtu == IBV_MTU_1024);
    CHECK(a.dest_qp_num == 0x77 && a.rq_psn == 42);
    CHECK(a.max_dest_rd_atomic == 16 && a.min_rnr_timer == 12);
    CHECK(a.ah_attr.is_global == 1 && a.ah_attr.port_num == 2);
    CHECK(a.ah_attr.grh.sgid_index == 3 && a.ah_attr.grh.hop_limit == 64);
    CHECK(memcmp(a.ah_attr.grh.dgid.raw, gid_a, IB_GID_LEN) == 0);
    CHECK(a.ah_attr.grh.flow_label == 0 && a.ah_attr.grh.traffic_class == 0);
    CHECK(a.ah_attr.dlid == 0 && a.ah_attr.sl == 0);

    memset(&a, 0x77, sizeof(a));
    ib_qp_attr_rts(&a, &mask, 0x1abcdef);
    CHECK(a.qp_state == IBV_QPS_RTS && a.timeout == 14 && a.retry_cnt == 7 && a.rnr_retry == 7);
    CHECK(a.sq_psn == 0xabcdef && a.max_rd_atomic == 16);
    CHECK(mask == (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
    CHECK(a.dest_qp_num == 0 && a.ah_attr.is_global == 0);
}

/* ---- errors ---- */

static void expect_errno(int err, gpuport_status_t want, const char *hint)
{
    const char *log;

    capture_begin();
    gpuport_status_t st = ib_status(err, "ibv_modify_qp(RTR)", "qpn 0x1a2, port 1, gid index 3");
    log = capture_end();
    CHECK_MSG(st == want, "errno %d: %s, expected %s", err, gpuport_status_string(st),
              gpuport_status_string(want));
    char line[256];
    snprintf(line, sizeof(line), "ibv_modify_qp(RTR) failed: %s (qpn 0x1a2, port 1, gid index 3)",
             strerror(err));
    CHECK_MSG(count_of(log, "ERROR") == 1 && strstr(log, line), "errno %d: log: %s", err, log);
    CHECK_MSG(!hint || strstr(log, hint), "errno %d: log lacks \"%s\": %s", err, hint, log);
}

static void test_errors(void)
{
    const char *text, *log;

    expect_errno(EINVAL, GPUPORT_ERR_INVALID_ARG, NULL);
    expect_errno(ENOMEM, GPUPORT_ERR_NO_MEMORY, NULL);
    expect_errno(ENODEV, GPUPORT_ERR_NOT_SUPPORTED, NULL);
    expect_errno(ENOSYS, GPUPORT_ERR_NOT_SUPPORTED, NULL);
    expect_errno(EOPNOTSUPP, GPUPORT_ERR_NOT_SUPPORTED, NULL);
    expect_errno(EPERM, GPUPORT_ERR_NOT_SUPPORTED, "ulimit -l");
    expect_errno(EACCES, GPUPORT_ERR_NOT_SUPPORTED, "/dev/infiniband");
    expect_errno(ETIMEDOUT, GPUPORT_ERR_TIMEOUT, NULL);
    expect_errno(EIO, GPUPORT_ERR_TRANSPORT, NULL);
    expect_errno(EAGAIN, GPUPORT_ERR_TRANSPORT, NULL);
    capture_begin();
    CHECK_OK(ib_status(0, "ibv_modify_qp", "nothing"));
    log = capture_end();
    CHECK(log[0] == '\0');

    static const struct {
        enum ibv_wc_status st;
        gpuport_status_t want;
    } wc[] = {
        {IBV_WC_SUCCESS, GPUPORT_OK},
        {IBV_WC_RETRY_EXC_ERR, GPUPORT_ERR_PEER},
        {IBV_WC_RNR_RETRY_EXC_ERR, GPUPORT_ERR_PEER},
        {IBV_WC_REM_ACCESS_ERR, GPUPORT_ERR_PEER},
        {IBV_WC_REM_INV_REQ_ERR, GPUPORT_ERR_PEER},
        {IBV_WC_REM_OP_ERR, GPUPORT_ERR_PEER},
        {IBV_WC_REM_INV_RD_REQ_ERR, GPUPORT_ERR_PEER},
        {IBV_WC_REM_ABORT_ERR, GPUPORT_ERR_PEER},
        {IBV_WC_LOC_LEN_ERR, GPUPORT_ERR_TRANSPORT},
        {IBV_WC_LOC_PROT_ERR, GPUPORT_ERR_TRANSPORT},
        {IBV_WC_WR_FLUSH_ERR, GPUPORT_ERR_TRANSPORT},
        {IBV_WC_GENERAL_ERR, GPUPORT_ERR_TRANSPORT},
    };
    for (size_t i = 0; i < sizeof(wc) / sizeof(wc[0]); i++) {
        text = NULL;
        gpuport_status_t st = ib_wc_status(wc[i].st, &text);
        CHECK_MSG(st == wc[i].want, "wc status %d: %s", (int)wc[i].st, gpuport_status_string(st));
        CHECK(text && strcmp(text, ibv_wc_status_str(wc[i].st)) == 0);
    }
    ib_wc_status(IBV_WC_RETRY_EXC_ERR, &text);
    CHECK_MSG(strstr(text, "retry"), "text: %s", text);
}

/* ---- devices and transport choice ---- */

static void test_devices(void)
{
    char why[256] = "";
    int n = ib_devices_present(why, sizeof(why));

    if (n > 0) {
        printf("NOTE: %d RDMA device(s) present (%s): the no-device checks are skipped\n", n, why);
        return;
    }
    CHECK_MSG(n == 0 && strcmp(why, no_device) == 0, "%d, \"%s\"", n, why);
}

static gpuport_status_t select_for(int transport, int device_regions, const char **name_p,
                                   char *why, size_t len, const char **log_p)
{
    struct gpuport_comm comm;
    gpuport_proc_rec_t procs[2];
    const gpuport_transport_ops_t *ops = NULL;
    gpuport_status_t st;

    memset(&comm, 0, sizeof(comm));
    memset(procs, 0, sizeof(procs));
    procs[0].rank = 0;
    procs[1].rank = 1;
    procs[0].host_id = procs[1].host_id = 0x42;
    comm.config.transport = transport;
    comm.rank = 0;
    comm.procs = procs;
    capture_begin();
    st = gpuport_transport_select(&comm, 1, device_regions, &ops, why, len);
    *log_p = capture_end();
    *name_p = st == GPUPORT_OK ? ops->name : NULL;
    return st;
}

static void test_select(void)
{
    char why[512];
    const char *name, *log;
    int devices = ib_devices_present(why, sizeof(why));

    /* auto between host regions on one host: shm, never ib */
    CHECK_OK(select_for(GPUPORT_TRANSPORT_AUTO, 0, &name, why, sizeof(why), &log));
    CHECK_MSG(strcmp(name, "shm") == 0, "auto chose %s", name);
    CHECK(log[0] == '\0');
    /* ib forced: refused with the reason, on every machine so far */
    CHECK_STATUS(select_for(GPUPORT_TRANSPORT_IB, 0, &name, why, sizeof(why), &log),
                 GPUPORT_ERR_NOT_SUPPORTED);
    CHECK(count_of(log, "ERROR") == 1 && strstr(log, "GPUPORT_TRANSPORT=ib"));
    if (devices) {
        CHECK_MSG(strstr(why, "not implemented yet"), "why: %s", why);
    } else {
        CHECK_MSG(strstr(why, no_device) && strstr(log, no_device), "why: %s; log: %s", why, log);
        CHECK(!strstr(why, "not available in this build"));
    }
    CHECK_STATUS(select_for(GPUPORT_TRANSPORT_IB, 1, &name, why, sizeof(why), &log),
                 GPUPORT_ERR_NOT_SUPPORTED);
    CHECK(strstr(why, "ib: "));
}

int main(void)
{
    test_record();
    test_gid();
    test_qp_attr();
    test_errors();
    test_devices();
    test_select();
    printf("ib set-up logic: records, GID choice, QP attributes, error mapping, devices\n");
    return 0;
}
