/*
 * The ib transport's logic, without an RDMA device: a QP record that is
 * misread, a wrong GID on a RoCE port, a wrong QP attribute, the wrong port
 * or a miscounted send queue shows up on a cluster as a hang or an opaque
 * verbs error, so each is checked here against recorded port tables,
 * spelled-out attributes and simulated completions: records (QP,
 * reachability, per-channel keys), GID and port choice (GPUPORT_IB_HCA,
 * nearness to the GPU), QP attributes, work-request sizes, the signal
 * method, the registration path, the send queue's accounting, errno and
 * completion status mapping, device discovery on this machine, that
 * forced ib without a device is refused with the reason, and that a
 * libibverbs that cannot be loaded (or lacks an entry) makes ib alone
 * unavailable, saying why. Last, the verbs data path itself runs against a
 * mock provider (mock_verbs.c, installed into the verbs table): two ranks
 * as threads, puts split to the port's message size, signals by atomics
 * and by written counts, the loopback QP, a failed work request,
 * report_fail, and every verbs object released. Then one stalled link
 * holds no other channel (parking, proxy_park.c), over three ranks: the
 * mock holds rank 0's QP to rank 1 (mock_verbs_hold), so rank 0's channel
 * A fills its connection's queue and its later puts park, while its
 * channel B to rank 2 ping-pongs as many rounds as before the hold, every
 * byte compared at both ends (the rates are printed, not compared).
 * Released, A's flush returns and rank 1 finds every byte of A's
 * overlapping puts in issue order, then the value and the one signal.
 * Never released, with a short time limit, A alone fails with
 * GPUPORT_ERR_TIMEOUT, named in the log, while B's puts go on being
 * flushed and its ping-pong goes on; A's destroys and rank 0's
 * communicator destroy return at the limit. Without parking, B's triggers
 * would wait behind A's in the host FIFO and its first round would time
 * out. Last, get, atomic_add and accumulate: the send queue's reads,
 * fences and per-element adds, what rma_ok refuses and why, the mock's own
 * access checks for reads and atomics, and three ranks over the mock: gets
 * of 1 byte to 64 MiB at odd offsets compared byte by byte, a get then a
 * signal (the request after the read fenced), gets out of range refused
 * before anything is read, float accumulates refused with nothing written,
 * and atomic_adds from two threads of every rank plus int64 accumulates
 * longer than the send queue, all into rank 0's memory, to the exact sums;
 * on a device without atomics, adds and gets refused, naming it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "bootstrap.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "mock_verbs.h"
#include "short_timeout.h"
#include "transport/ib/ib.h"
#include "transport/ib/ib_priv.h"
#include "transport/ib/ib_verbs.h"
#include "transport/transport.h"

static const char *const no_device = "no RDMA device was found (ibv_get_device_list returned none)";
/* What ib says here without a device: no_device, or, where libibverbs.so.1
 * cannot be loaded, why (main). */
static char none_why[320];

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
    CHECK(r.hdr.type == GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, ib_records[IB_REC_QP].id) &&
          r.hdr.size == sizeof(r));
    CHECK(sizeof(r) == 52);
    CHECK(r.atomic_cap == 0 && r.rd_atom == 0 && r.status == 0);
    r.atomic_cap = IBV_ATOMIC_HCA;
    r.rd_atom = 16;
    r.status = (int8_t)GPUPORT_ERR_INTERNAL; /* -99 fits */
    CHECK_OK(ib_qp_rec_unpack(&r, sizeof(r), 1, &out));
    CHECK(memcmp(&r, &out, sizeof(r)) == 0);
    CHECK(out.atomic_cap == IBV_ATOMIC_HCA && out.rd_atom == 16 &&
          out.status == GPUPORT_ERR_INTERNAL);
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
    /* a real table is mostly empty slots, zeroed: type 0 is IB, but they
     * are not valid and must not make the port look like InfiniBand */
    ib_gid_entry_t sparse_roce[16];
    memset(sparse_roce, 0, sizeof(sparse_roce));
    memcpy(sparse_roce, roce, sizeof(roce));
    for (int i = 6; i < 16; i++)
        sparse_roce[i].index = i;
    expect_gid(sparse_roce, 16, -1, 3, "RoCE v2 with an IPv4-mapped address");
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
    ib_qp_attr_init(&a, &mask, 2, 1);
    CHECK(a.qp_state == IBV_QPS_INIT && a.pkey_index == 0 && a.port_num == 2);
    CHECK(a.qp_access_flags == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
    CHECK(mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
    /* a device without atomics: no remote atomic access asked for */
    ib_qp_attr_init(&a, &mask, 1, 0);
    CHECK(a.port_num == 1 && a.qp_access_flags == (IBV_ACCESS_LOCAL_WRITE |
                                                   IBV_ACCESS_REMOTE_WRITE |
                                                   IBV_ACCESS_REMOTE_READ));

    const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

    /* InfiniBand: LID addressing, no GRH; remote MTU smaller than ours */
    ib_qp_rec_pack(&remote, 0x2a, gid_a, 0x1a2, 0x123456, IBV_MTU_2048, 1, 0, IB_LINK_LAYER_IB);
    memset(&a, 0x77, sizeof(a));
    ib_qp_attr_rtr(&a, &mask, &remote, 0, 0, 1, IBV_MTU_4096, 16);
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
    ib_qp_attr_rtr(&a, &mask, &remote, 1, 3, 2, IBV_MTU_1024, 4);
    CHECK(mask == rtr_mask);
    CHECK(a.qp_state == IBV_QPS_RTR && a.path_mtu == IBV_MTU_1024);
    CHECK(a.dest_qp_num == 0x77 && a.rq_psn == 42);
    CHECK(a.max_dest_rd_atomic == 4 && a.min_rnr_timer == 12);
    CHECK(a.ah_attr.is_global == 1 && a.ah_attr.port_num == 2);
    CHECK(a.ah_attr.grh.sgid_index == 3 && a.ah_attr.grh.hop_limit == 64);
    CHECK(memcmp(a.ah_attr.grh.dgid.raw, gid_a, IB_GID_LEN) == 0);
    CHECK(a.ah_attr.grh.flow_label == 0 && a.ah_attr.grh.traffic_class == 0);
    CHECK(a.ah_attr.dlid == 0 && a.ah_attr.sl == 0);

    memset(&a, 0x77, sizeof(a));
    ib_qp_attr_rts(&a, &mask, 0x1abcdef, 16);
    CHECK(a.qp_state == IBV_QPS_RTS && a.timeout == 14 && a.retry_cnt == 7 && a.rnr_retry == 7);
    CHECK(a.sq_psn == 0xabcdef && a.max_rd_atomic == 16);
    CHECK(mask == (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
    CHECK(a.dest_qp_num == 0 && a.ah_attr.is_global == 0);
    ib_qp_attr_rts(&a, &mask, 5, 0);
    CHECK(a.max_rd_atomic == 0 && a.sq_psn == 5);

    /* outstanding atomics: the device's limits, 16 at most, none without atomics */
    CHECK(ib_rd_atom_resp(IBV_ATOMIC_HCA, 16) == 16);
    CHECK(ib_rd_atom_resp(IBV_ATOMIC_GLOB, 128) == 16);
    CHECK(ib_rd_atom_resp(IBV_ATOMIC_HCA, 4) == 4);
    CHECK(ib_rd_atom_resp(IBV_ATOMIC_NONE, 16) == 0);
    CHECK(ib_rd_atom_resp(IBV_ATOMIC_HCA, 0) == 0);
    /* the requester: its own limit, the responder's resources, 16 */
    CHECK(ib_rd_atomic_init(IBV_ATOMIC_HCA, 16, 16) == 16);
    CHECK(ib_rd_atomic_init(IBV_ATOMIC_HCA, 255, 8) == 8);
    CHECK(ib_rd_atomic_init(IBV_ATOMIC_HCA, 2, 16) == 2);
    CHECK(ib_rd_atomic_init(IBV_ATOMIC_HCA, 64, 200) == 16);
    CHECK(ib_rd_atomic_init(IBV_ATOMIC_HCA, 16, 0) == 0);
    CHECK(ib_rd_atomic_init(IBV_ATOMIC_NONE, 16, 16) == 0);
}


/* ---- GPUPORT_IB_HCA and the choice of port ---- */

/* GPUPORT_IB_HCA=text through the configuration's parser, the only one;
 * the log of a rejected value in *log_p. */
static gpuport_status_t hca_parse(const char *text, ib_hca_list_t *out, const char **log_p)
{
    const gpuport_config_var_t *var = NULL;
    gpuport_config_t c;
    gpuport_status_t st;

    for (size_t i = 0; i < gpuport_config_nvars(); i++)
        if (strcmp(gpuport_config_var(i)->name, "GPUPORT_IB_HCA") == 0)
            var = gpuport_config_var(i);
    CHECK(var);
    memset(&c, 0, sizeof(c));
    capture_begin();
    st = gpuport_config_parse_var(var, text, &c);
    *log_p = capture_end();
    if (st == GPUPORT_OK)
        *out = ((const ib_settings_t *)gpuport_config_tl_settings(&c, GPUPORT_TL_KIND_IB))->hca;
    return st;
}

static void test_hca_parse(void)
{
    ib_hca_list_t e;
    const char *log;
    char list[512];
    static const char *const bad[] = {"mlx5_0:",  "mlx5_0:0", "mlx5_0:256", ",mlx5_0",
                                      "mlx5_0,",  "mlx5 0",   "mlx5_0:1x", ":1",
                                      "mlx5_0,,mlx5_1",
                                      /* ib's own parser (strtoul) took these */
                                      "mlx5_0:01", "mlx5_0: 1", "mlx5_0:+1"};

    CHECK_OK(hca_parse("", &e, &log));
    CHECK(e.n == 0);
    CHECK_OK(hca_parse("mlx5_0:1,mlx5_1,bnxt_re0:255", &e, &log));
    CHECK(e.n == 3);
    CHECK(strcmp(e.entry[0].dev, "mlx5_0") == 0 && e.entry[0].port == 1);
    CHECK(strcmp(e.entry[1].dev, "mlx5_1") == 0 && e.entry[1].port == 0);
    CHECK(strcmp(e.entry[2].dev, "bnxt_re0") == 0 && e.entry[2].port == 255);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_MSG(hca_parse(bad[i], &e, &log) == GPUPORT_ERR_INVALID_CONFIG, "%s", bad[i]);
        CHECK_MSG(strstr(log, "GPUPORT_IB_HCA="), "%s: %s", bad[i], log);
    }
    /* a name longer than any RDMA device's (63) */
    memset(list, 'm', 64);
    list[64] = '\0';
    CHECK(hca_parse(list, &e, &log) == GPUPORT_ERR_INVALID_CONFIG && strstr(log, "at most 63"));
    list[63] = '\0';
    CHECK_OK(hca_parse(list, &e, &log));
    CHECK(e.n == 1 && strlen(e.entry[0].dev) == 63);
    /* more entries than ib's parser had room for (32): the list's length,
     * not its count, is the limit */
    list[0] = '\0';
    for (int i = 0; i <= 32; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%sd%d", i ? "," : "", i);
    CHECK_OK(hca_parse(list, &e, &log));
    CHECK(e.n == 33 && strcmp(e.entry[32].dev, "d32") == 0);
    /* the most a list of IB_HCA_TEXT_MAX characters holds, and one
     * character more */
    list[0] = '\0';
    for (int i = 0; i < IB_HCA_MAX; i++)
        strcat(list, i ? ",a" : "a");
    CHECK(strlen(list) == IB_HCA_TEXT_MAX);
    CHECK_OK(hca_parse(list, &e, &log));
    CHECK(e.n == IB_HCA_MAX);
    strcat(list, "a");
    CHECK(hca_parse(list, &e, &log) == GPUPORT_ERR_INVALID_CONFIG);
}

static void test_pci_affinity(void)
{
    const char *nic0 = "/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0";
    const char *gpu0 = "/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1b:00.0";
    const char *gpu1 = "/sys/devices/pci0000:17/0000:17:00.0/0000:28:00.0/0000:29:00.0";
    const char *far = "/sys/devices/pci0000:b0/0000:b0:00.0/0000:b1:00.0";

    CHECK(ib_pci_affinity(nic0, nic0) == 5);
    CHECK(ib_pci_affinity(nic0, gpu0) == 3); /* one PCIe switch */
    CHECK(ib_pci_affinity(nic0, gpu1) == 2); /* one root port */
    CHECK(ib_pci_affinity(nic0, far) == 0);  /* other root: "sys", "devices" do not count */
    CHECK(ib_pci_affinity(nic0, "") == 0 && ib_pci_affinity("", gpu0) == 0);
    /* components, not characters */
    CHECK(ib_pci_affinity("/sys/devices/pci0000:1a", "/sys/devices/pci0000:1a0") == 0);
    CHECK(ib_pci_affinity("//sys//devices/pci0000:00/x/0000:00:01.0",
                          "/sys/devices/pci0000:00/x/0000:00:01.0/") == 2);
}

#define SW(a, b) "/sys/devices/pci0000:" a "/0000:" a ":00.0/0000:" b ":00.0"

static ib_port_row_t row(const char *dev, int port, int state, int ll, int mtu, const char *pci)
{
    ib_port_row_t r;

    memset(&r, 0, sizeof(r));
    snprintf(r.dev, sizeof(r.dev), "%s", dev);
    r.port = (uint8_t)port;
    r.state = state;
    r.link_layer = ll;
    r.active_mtu = mtu;
    r.max_msg_sz = 1u << 30;
    r.lid = ll == IBV_LINK_LAYER_ETHERNET ? 0 : (uint16_t)(0x10 + port);
    snprintf(r.pci, sizeof(r.pci), "%s", pci);
    return r;
}

static void expect_port(const ib_port_row_t *rows, int n, const char *hca, const char *gpu,
                        int want, const char *why_has, const char *why_has2)
{
    char why[768] = "";
    ib_hca_list_t list;
    const char *log;
    int got;

    CHECK_MSG(hca_parse(hca, &list, &log) == GPUPORT_OK, "hca \"%s\": %s", hca, log);
    got = ib_port_select(rows, n, &list, gpu, why, sizeof(why));

    CHECK_MSG(got == want, "hca \"%s\": chose %d, expected %d (%s)", hca, got, want, why);
    CHECK_MSG(strstr(why, why_has), "hca \"%s\": why \"%s\" lacks \"%s\"", hca, why, why_has);
    CHECK_MSG(!why_has2 || strstr(why, why_has2), "hca \"%s\": why \"%s\" lacks \"%s\"", hca, why,
              why_has2);
}

static void test_port_select(void)
{
    const int A = IBV_PORT_ACTIVE, D = IBV_PORT_DOWN, IB = IBV_LINK_LAYER_INFINIBAND,
              ETH = IBV_LINK_LAYER_ETHERNET;
    /* four rails, each NIC behind its own switch with one GPU (a DGX-like node) */
    ib_port_row_t rails[] = {
        row("mlx5_0", 1, A, IB, IBV_MTU_4096, SW("17", "18") "/0000:19:00.0"),
        row("mlx5_1", 1, A, IB, IBV_MTU_4096, SW("38", "39") "/0000:3a:00.0"),
        row("mlx5_2", 1, A, IB, IBV_MTU_4096, SW("b0", "b1") "/0000:b2:00.0"),
        row("mlx5_3", 1, A, IB, IBV_MTU_4096, SW("d0", "d1") "/0000:d2:00.0"),
    };
    const char *gpu2 = SW("b0", "b1") "/0000:b3:00.0"; /* beside mlx5_2 */
    const char *gpu_far = "/sys/devices/pci0000:f0/0000:f0:00.0";

    expect_port(rails, 4, "", gpu2, 2, "mlx5_2:1 (InfiniBand, MTU 4096)", "nearest the GPU");
    expect_port(rails, 4, "", NULL, 0, "mlx5_0:1", "host-only");
    /* a GPU near none of them: the first, and it says so */
    expect_port(rails, 4, "", gpu_far, 0, "the first usable port", "none is nearer");
    expect_port(rails, 4, "", "", 0, "the first usable port", "PCI position");
    /* the list limits the choice; nearness still decides inside it */
    expect_port(rails, 4, "mlx5_3:1,mlx5_2:1,mlx5_0", gpu2, 2, "nearest the GPU",
                "in GPUPORT_IB_HCA");
    expect_port(rails, 4, "mlx5_3:1,mlx5_1:1", gpu2, 0 + 3, "mlx5_3:1", "in GPUPORT_IB_HCA");
    expect_port(rails, 4, "mlx5_1,mlx5_3", NULL, 1, "mlx5_1:1", "first usable");
    /* a port that does not exist is reported, the rest still used */
    expect_port(rails, 4, "mlx5_9,mlx5_1", gpu2, 1, "mlx5_1:1", "mlx5_9, which does not exist");
    expect_port(rails, 4, "mlx5_0:2,mlx5_3", gpu2, 3, "mlx5_3:1", "mlx5_0:2, which does not exist");
    expect_port(rails, 4, "mlx5_9:1", gpu2, -1, "no usable RDMA port among GPUPORT_IB_HCA=mlx5_9:1",
                "does not exist");
    expect_port(rails, 0, "", gpu2, -1, "no usable RDMA port", "ports here: none");
    /* a malformed list stops at the configuration: no port is chosen over it */
    {
        ib_hca_list_t list;
        const char *log;
        CHECK(hca_parse("mlx5_0:1,:", &list, &log) == GPUPORT_ERR_INVALID_CONFIG &&
              strstr(log, "GPUPORT_IB_HCA="));
    }

    /* ports that cannot be used, each with its reason */
    ib_port_row_t mixed[] = {
        row("mlx5_0", 1, D, IB, IBV_MTU_4096, SW("b0", "b1")),
        row("mlx5_0", 2, IBV_PORT_INIT, IB, IBV_MTU_4096, SW("b0", "b1")),
        row("irdma0", 1, A, ETH, IBV_MTU_1024, SW("b0", "b1")),
        row("mlx5_1", 1, A, IB, IBV_MTU_4096, SW("b0", "b1")),
        row("mlx5_2", 1, A, IB, 0, SW("b0", "b1")),
        row("mlx5_3", 1, A, 7, IBV_MTU_4096, SW("b0", "b1")),
        row("rxe0", 1, A, ETH, IBV_MTU_1024, SW("00", "01")),
    };
    mixed[2].iwarp = 1;
    mixed[3].lid = 0;
    expect_port(mixed, 7, "", gpu2, 6, "rxe0:1 (RoCE, MTU 1024)", "mlx5_0:1 DOWN");
    expect_port(mixed, 7, "", gpu2, 6, "mlx5_0:2 INIT", "irdma0:1 iWARP");
    expect_port(mixed, 7, "", gpu2, 6, "mlx5_1:1 InfiniBand without a LID",
                "mlx5_2:1 no valid active MTU");
    expect_port(mixed, 7, "", gpu2, 6, "mlx5_3:1 unknown link layer", NULL);
    expect_port(mixed, 6, "", gpu2, -1, "no usable RDMA port (ports here: mlx5_0:1, mlx5_0:2",
                "mlx5_0:1 DOWN");
    /* a device named without a port: any of its ports */
    ib_port_row_t dual[] = {
        row("mlx5_0", 1, D, ETH, IBV_MTU_4096, ""),
        row("mlx5_0", 2, A, ETH, IBV_MTU_4096, ""),
        row("mlx5_1", 1, A, ETH, IBV_MTU_4096, ""),
    };
    expect_port(dual, 3, "mlx5_0", gpu2, 1, "mlx5_0:2 (RoCE", "PCI position");
    expect_port(dual, 3, "mlx5_0:1", gpu2, -1, "mlx5_0:1 DOWN", NULL);
    expect_port(dual, 3, "mlx5_1,mlx5_0", NULL, 2, "mlx5_1:1", NULL);
    /* LINK_LAYER_UNSPECIFIED (old drivers) is InfiniBand */
    ib_port_row_t old[] = {row("mthca0", 1, A, IBV_LINK_LAYER_UNSPECIFIED, IBV_MTU_2048, "")};
    expect_port(old, 1, "", NULL, 0, "mthca0:1 (InfiniBand, MTU 2048)", NULL);
}

static void test_pieces(void)
{
    const uint64_t G = 1ull << 30;

    CHECK(ib_piece_max(0) == IB_PIECE_LIMIT);
    CHECK(ib_piece_max(1ull << 32) == IB_PIECE_LIMIT);
    CHECK(ib_piece_max(IB_PIECE_LIMIT) == IB_PIECE_LIMIT);
    CHECK(ib_piece_max(G) == G);
    CHECK(ib_piece_max(4096) == 4096);
    CHECK(IB_PIECE_LIMIT == 2 * G);
    CHECK(ib_put_pieces(0, 2 * G) == 0);
    CHECK(ib_put_pieces(1, 2 * G) == 1);
    CHECK(ib_put_pieces(2 * G, 2 * G) == 1);
    CHECK(ib_put_pieces(2 * G + 1, 2 * G) == 2);
    CHECK(ib_put_pieces(5 * G, 2 * G) == 3);
    CHECK(ib_put_pieces((1ull << 52) - 1, 2 * G) == (1ull << 21));
}

/* ---- records between the two sides ---- */

static void test_reach(void)
{
    ib_reach_rec_t a, b;
    char why[256];
    const char *log;

    ib_reach_pack(&a, 1, IB_LINK_LAYER_IB, "mlx5_0:1 (InfiniBand, MTU 4096)");
    CHECK(a.hdr.type == GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, ib_records[IB_REC_REACH].id) &&
          a.hdr.size == sizeof(a) && sizeof(a) == 136);
    ib_reach_pack(&b, 1, IB_LINK_LAYER_IB, "mlx5_1:1");
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 3, why, sizeof(why)) == 1);
    CHECK(strstr(why, "mlx5_0:1"));
    /* this side has none: its own reason */
    ib_reach_pack(&a, 0, 0, IB_NO_DEVICE);
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 3, why, sizeof(why)) == 0);
    CHECK(strcmp(why, IB_NO_DEVICE) == 0);
    /* the peer has none: its reason, named */
    ib_reach_pack(&a, 1, IB_LINK_LAYER_ETH, "rxe0:1");
    ib_reach_pack(&b, 0, 0, "no usable RDMA port (ports here: mlx5_0:1): mlx5_0:1 DOWN");
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 3, why, sizeof(why)) == 0);
    CHECK_MSG(strstr(why, "rank 3 cannot use ib: no usable RDMA port") && strstr(why, "DOWN"),
              "%s", why);
    /* RoCE cannot reach InfiniBand */
    ib_reach_pack(&b, 1, IB_LINK_LAYER_IB, "mlx5_0:1");
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 5, why, sizeof(why)) == 0);
    CHECK_MSG(strstr(why, "Ethernet (RoCE)") && strstr(why, "rank 5's is InfiniBand"), "%s", why);
    /* the peer's reason is cut to its field, never read past it */
    memset(b.why, 'x', sizeof(b.why));
    b.usable = 0;
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 5, why, sizeof(why)) == 0);
    CHECK(strlen(why) == strlen("rank 5 cannot use ib: ") + sizeof(b.why) - 1);
    /* not a record of this version or size: refused and logged */
    ib_reach_pack(&b, 1, IB_LINK_LAYER_ETH, "rxe0:1");
    b.hdr.version_minor++;
    capture_begin();
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 5, why, sizeof(why)) == 0);
    log = capture_end();
    CHECK(count_of(log, "ERROR") == 1 && strstr(log, "rank 5") && strstr(why, "this version"));
    b.hdr.version_minor--;
    b.hdr.type = GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, ib_records[IB_REC_QP].id);
    capture_begin();
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 5, why, sizeof(why)) == 0);
    log = capture_end();
    CHECK(count_of(log, "ERROR") == 1 && strstr(log, "out of step"));
    b.hdr.type = GPUPORT_REC_TL_TYPE(GPUPORT_TL_KIND_IB, ib_records[IB_REC_REACH].id);
    capture_begin();
    CHECK(ib_reach_agree(&a, &b, sizeof(b) - 1, 5, why, sizeof(why)) == 0);
    log = capture_end();
    CHECK(count_of(log, "ERROR") == 1 && strstr(why, "135 bytes"));
    CHECK(ib_reach_agree(&a, &b, sizeof(b), 5, why, sizeof(why)) == 1);
}

static void tdata_sample(gpuport_channel_rec_t *rec, ib_tdata_t *t)
{
    memset(rec, 0, sizeof(*rec));
    rec->channel_id = 17;
    rec->dst.kind = GPUPORT_REGION_DEVICE;
    rec->dst.addr = 0x7f0000001000ull;
    rec->dst.size = 3u << 20;
    memset(t, 0, sizeof(*t));
    t->channel_id = 17;
    t->flags = IB_TDATA_CTRL | IB_TDATA_DST;
    t->dst_rkey = 0x1234;
    t->dst_addr = rec->dst.addr;
    t->dst_size = rec->dst.size;
    t->sem_addr = 0x7e0000000000ull + 17 * sizeof(gpuport_sem_slot_t);
    t->status_addr = t->sem_addr + 8;
    t->ctrl_rkey = 0x5678;
    ib_tdata_pack(t, rec->tdata);
}

static void expect_tdata(const gpuport_channel_rec_t *rec, gpuport_status_t want, const char *has)
{
    ib_tdata_t out;
    const char *log;

    memset(&out, 0x5a, sizeof(out));
    capture_begin();
    gpuport_status_t st = ib_tdata_unpack(rec, 9, &out);
    log = capture_end();
    CHECK_MSG(st == want, "%s: %s", has, gpuport_status_string(st));
    CHECK_MSG(count_of(log, "ERROR") == 1 && strstr(log, "rank 9") && strstr(log, has),
              "expected \"%s\" in: %s", has, log);
    for (size_t i = 0; i < sizeof(out); i++)
        CHECK_MSG(((unsigned char *)&out)[i] == 0x5a, "%s: output written on failure", has);
}

static void test_tdata(void)
{
    gpuport_channel_rec_t rec, bad;
    ib_tdata_t t, out, tb;

    CHECK(sizeof(ib_tdata_t) <= sizeof(rec.tdata)); /* the record holds other transports' too */
    tdata_sample(&rec, &t);
    CHECK_OK(ib_tdata_unpack(&rec, 9, &out));
    CHECK(out.magic == IB_TDATA_MAGIC && out.version == IB_TDATA_VERSION);
    CHECK(out.channel_id == 17 && out.dst_rkey == 0x1234 && out.ctrl_rkey == 0x5678);
    CHECK(out.dst_addr == rec.dst.addr && out.dst_size == rec.dst.size);
    CHECK(out.sem_addr == t.sem_addr && out.status_addr == t.sem_addr + 8);
    /* magic and version set by pack whatever the caller left there */
    tb = t;
    tb.magic = 0;
    tb.version = 99;
    tb.reserved = 7;
    ib_tdata_pack(&tb, bad.tdata);
    memcpy(&out, bad.tdata, sizeof(out));
    CHECK(out.magic == IB_TDATA_MAGIC && out.version == IB_TDATA_VERSION && out.reserved == 0);

#define BAD_TDATA(field, value, want, has)                                                      \
    do {                                                                                        \
        bad = rec;                                                                              \
        tb = t;                                                                                 \
        tb.field = value;                                                                       \
        ib_tdata_pack(&tb, bad.tdata);                                                          \
        expect_tdata(&bad, want, has);                                                          \
    } while (0)

    BAD_TDATA(channel_id, 18, GPUPORT_ERR_PEER, "channel id differs");
    BAD_TDATA(flags, IB_TDATA_DST, GPUPORT_ERR_PEER, "control segment has no remote key");
    BAD_TDATA(sem_addr, t.sem_addr + 4, GPUPORT_ERR_PEER, "not 8-byte aligned");
    BAD_TDATA(sem_addr, 0, GPUPORT_ERR_PEER, "not 8-byte aligned");
    BAD_TDATA(status_addr, t.sem_addr + 16, GPUPORT_ERR_PEER, "status address");
    BAD_TDATA(flags, IB_TDATA_CTRL, GPUPORT_ERR_PEER, "destination region has no remote key");
    BAD_TDATA(dst_size, t.dst_size - 1, GPUPORT_ERR_PEER, "destination size differs");
    BAD_TDATA(dst_addr, t.dst_addr + 64, GPUPORT_ERR_PEER, "destination address differs");
    /* other formats: raw bytes, since pack would set magic and version */
    bad = rec;
    bad.tdata[0] ^= 1;
    expect_tdata(&bad, GPUPORT_ERR_VERSION, "no ib channel data of this version");
    bad = rec;
    bad.tdata[4] ^= 2;
    expect_tdata(&bad, GPUPORT_ERR_VERSION, "version 3");
    memset(&bad, 0, sizeof(bad));
    bad.channel_id = 17;
    expect_tdata(&bad, GPUPORT_ERR_VERSION, "is it using the ib transport?");

    /* no destination: no key, size 0 */
    rec.dst.size = 0;
    rec.dst.addr = 0;
    t.flags = IB_TDATA_CTRL;
    t.dst_rkey = 0;
    t.dst_addr = 0;
    t.dst_size = 0;
    ib_tdata_pack(&t, rec.tdata);
    CHECK_OK(ib_tdata_unpack(&rec, 9, &out));
    CHECK(!(out.flags & IB_TDATA_DST));
    BAD_TDATA(dst_rkey, 0x99, GPUPORT_ERR_PEER, "destination key but no destination region");
    BAD_TDATA(dst_size, 4096, GPUPORT_ERR_PEER, "destination size differs");
#undef BAD_TDATA
}

/* ---- signal method, registration path ---- */

static void test_signal_choice(void)
{
    char why[160];

    CHECK(ib_signal_choose(IBV_ATOMIC_HCA, IBV_ATOMIC_HCA, 16, why, sizeof(why)) ==
          IB_SIGNAL_ATOMIC);
    CHECK(strstr(why, "fetch-and-add"));
    CHECK(ib_signal_choose(IBV_ATOMIC_GLOB, IBV_ATOMIC_HCA, 1, why, sizeof(why)) ==
          IB_SIGNAL_ATOMIC);
    CHECK(ib_signal_choose(IBV_ATOMIC_NONE, IBV_ATOMIC_HCA, 16, why, sizeof(why)) ==
          IB_SIGNAL_WRITE);
    CHECK(strstr(why, "this device has no atomics"));
    CHECK(ib_signal_choose(IBV_ATOMIC_HCA, IBV_ATOMIC_NONE, 16, why, sizeof(why)) ==
          IB_SIGNAL_WRITE);
    CHECK(strstr(why, "peer's device has no atomics"));
    CHECK(ib_signal_choose(IBV_ATOMIC_HCA, IBV_ATOMIC_HCA, 0, why, sizeof(why)) ==
          IB_SIGNAL_WRITE);
    CHECK(strstr(why, "no atomic outstanding"));
    /* what a QP pair negotiates from two recorded devices */
    CHECK(ib_signal_choose(IBV_ATOMIC_HCA, IBV_ATOMIC_HCA,
                           ib_rd_atomic_init(IBV_ATOMIC_HCA, 16,
                                             ib_rd_atom_resp(IBV_ATOMIC_NONE, 16)),
                           why, sizeof(why)) == IB_SIGNAL_WRITE);
}

static void expect_mr(ib_mr_caps_t caps, ib_mr_path_t want, const char *has, const char *has2)
{
    char why[320] = "";
    ib_mr_path_t got = ib_mr_path_choose(&caps, why, sizeof(why));

    CHECK_MSG(got == want, "chose %s, expected %s (%s)", ib_mr_path_name(got),
              ib_mr_path_name(want), why);
    CHECK_MSG(strstr(why, has), "why \"%s\" lacks \"%s\"", why, has);
    CHECK_MSG(!has2 || strstr(why, has2), "why \"%s\" lacks \"%s\"", why, has2);
}

static void test_mr_path(void)
{
    ib_mr_caps_t all = {.device = 1, .ibv_dmabuf = 1, .cu_dmabuf = 1, .peermem = 1, .cu_why = ""};
    ib_mr_caps_t c;

    c = all;
    c.device = 0;
    expect_mr(c, IB_MR_HOST, "host memory: ibv_reg_mr", NULL);
    c.peermem = c.ibv_dmabuf = c.cu_dmabuf = 0;
    expect_mr(c, IB_MR_HOST, "host memory", NULL);
    expect_mr(all, IB_MR_DMABUF, "dmabuf", "needs no peer-memory module");
    c = all;
    c.peermem = 0;
    expect_mr(c, IB_MR_DMABUF, "ibv_reg_dmabuf_mr", NULL);
    c = all;
    c.ibv_dmabuf = 0;
    expect_mr(c, IB_MR_PEERMEM, "peer-memory module", "this libibverbs has no ibv_reg_dmabuf_mr");
    c = all;
    c.cu_dmabuf = 0;
    c.cu_why = "the CUDA driver has no cuMemGetHandleForAddressRange";
    expect_mr(c, IB_MR_PEERMEM, "peer-memory module", "no cuMemGetHandleForAddressRange");
    c = all;
    c.dmabuf_failed = 1;
    expect_mr(c, IB_MR_PEERMEM, "peer-memory module", "dmabuf registration failed");
    c.peermem = 0;
    expect_mr(c, IB_MR_NONE, "dmabuf registration failed",
              "staging through pinned host memory is not implemented");
    c = all;
    c.cu_dmabuf = 0;
    c.peermem = 0;
    c.cu_why = "the CUDA driver is not loaded in this process";
    expect_mr(c, IB_MR_NONE, "not loaded in this process", "nvidia_peermem");
    CHECK(strcmp(ib_mr_path_name(IB_MR_DMABUF), "dmabuf") == 0);
    CHECK(strcmp(ib_mr_path_name(IB_MR_NONE), "none") == 0);
}

/* GPU memory from gpuport_mem_alloc_device (VMM) registers only through
 * dma-buf: where none can be had (here: a communicator without a GPU) it
 * is refused with the reason, never registered as host memory, which the
 * first ib code did (it asked whether memory was GPU memory by the legacy
 * kind alone). Host memory on the same path still registers. */
static void test_mr_vmm(void)
{
    static char buf[8192];
    gpuport_region_t vmm = {.ptr = buf, .size = 4096, .kind = GPUPORT_REGION_DEVICE_VMM, .alloc_fd = -1};
    gpuport_region_t host = {.ptr = buf, .size = 4096, .kind = GPUPORT_REGION_HOST, .alloc_fd = -1};
    struct gpuport_comm comm;
    struct ibv_device **list;
    ib_comm_t ic;
    ib_dev_t dev;
    ib_mr_t *mr = NULL;
    char why[512] = "";
    const char *log;
    int n = 0, before;

    mock_verbs_install();
    list = IBV(ibv_get_device_list)(&n);
    CHECK(list && n == 1);
    memset(&comm, 0, sizeof(comm));
    memset(&ic, 0, sizeof(ic));
    memset(&dev, 0, sizeof(dev));
    snprintf(dev.name, sizeof(dev.name), "mock0");
    dev.ctx = IBV(ibv_open_device)(list[0]);
    CHECK(dev.ctx);
    ic.comm = &comm;
    ic.dev = &dev;
    ic.pd = IBV(ibv_alloc_pd)(dev.ctx);
    CHECK(ic.pd);
    pthread_mutex_init(&ic.lock, NULL);
    before = mock_live.mr;
    capture_begin();
    gpuport_status_t st = ib_mr_get(&ic, &vmm, &mr, why, sizeof(why));
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED, "VMM memory without dma-buf: %s",
              gpuport_status_string(st));
    CHECK_MSG(mock_live.mr == before, "VMM memory was registered (%d registrations)",
              mock_live.mr - before);
    CHECK_MSG(strstr(why, "GPU memory cannot be registered") && strstr(why, "dmabuf"),
              "why: %s", why);
    CHECK_MSG(count_of(log, "ERROR") == 1, "log: %s", log);
    CHECK_OK(ib_mr_get(&ic, &host, &mr, why, sizeof(why)));
    CHECK(mock_live.mr == before + 1);
    ib_mr_put(&ic, mr);
    CHECK(mock_live.mr == before);
    CHECK(IBV(ibv_dealloc_pd)(ic.pd) == 0);
    CHECK(IBV(ibv_close_device)(dev.ctx) == 0);
    IBV(ibv_free_device_list)(list);
    pthread_mutex_destroy(&ic.lock);
    CHECK_MSG(mock_error[0] == '\0', "the mock refused: %s", mock_error);
    mock_verbs_uninstall();
}

static void test_dmabuf_range(void)
{
    uint64_t start, len, off;

    ib_dmabuf_range(0x10000 + 100, 50, 4096, &start, &len, &off);
    CHECK(start == 0x10000 && len == 4096 && off == 100);
    ib_dmabuf_range(0x10000 + 4000, 200, 4096, &start, &len, &off);
    CHECK(start == 0x10000 && len == 8192 && off == 4000);
    ib_dmabuf_range(0x20000, 8192, 4096, &start, &len, &off);
    CHECK(start == 0x20000 && len == 8192 && off == 0);
    ib_dmabuf_range(0x20000 + 1, 65536, 65536, &start, &len, &off);
    CHECK(start == 0x20000 && len == 2 * 65536 && off == 1);
}

/* ---- the send queue ---- */

typedef struct done_log {
    int n;
    ib_op_t ops[64];
    gpuport_status_t status[64];
    ib_sendq_t *push_q; /* a callback that queues more, as report_fail does */
} done_log_t;

static void on_done(void *arg, const ib_op_t *op, gpuport_status_t status)
{
    done_log_t *l = arg;

    CHECK(l->n < 64);
    l->ops[l->n] = *op;
    l->status[l->n++] = status;
    if (l->push_q) {
        ib_op_t *p = ib_sendq_push(l->push_q);
        p->kind = IB_OP_NOTIFY;
        p->chan = 100 + op->chan;
        p->len = 4;
    }
}

static ib_op_t *push_op(ib_sendq_t *q, uint32_t kind, uint32_t chan, uint64_t len, uint64_t value)
{
    ib_op_t *op;

    CHECK(ib_sendq_room(q, 1));
    op = ib_sendq_push(q);
    op->kind = kind;
    op->chan = chan;
    op->len = len;
    op->value = value;
    op->laddr = 0x100000 * (chan + 1);
    op->raddr = 0x900000 * (chan + 1);
    op->lkey = 0x11;
    op->rkey = 0x22 + chan;
    return op;
}

static void test_sendq_basic(void)
{
    ib_sendq_t q;
    ib_wr_desc_t d[32];
    done_log_t log = {0};

    CHECK_OK(ib_sendq_init(&q, 8, 4, 100));
    CHECK(ib_sendq_idle(&q) && ib_sendq_plan(&q, d, 32) == 0);
    push_op(&q, IB_OP_PUT, 1, 250, 0);
    push_op(&q, IB_OP_SIGNAL_ADD, 1, 8, 3); /* three signals folded into one add */
    push_op(&q, IB_OP_SIGNAL_WRITE, 2, 8, 7);
    push_op(&q, IB_OP_NOTIFY, 3, 4, (uint64_t)(uint32_t)GPUPORT_ERR_PEER);
    CHECK(!ib_sendq_idle(&q));
    /* four send-queue entries: the put's three pieces and the atomic */
    CHECK(ib_sendq_plan(&q, d, 32) == 4);
    for (int i = 0; i < 3; i++) {
        CHECK(d[i].wr_id == 0 && d[i].kind == IB_WR_WRITE && d[i].lkey == 0x11);
        CHECK(d[i].rkey == 0x23 && d[i].scratch == (uint32_t)i);
        CHECK(d[i].laddr == 0x200000 + 100u * (unsigned)i);
        CHECK(d[i].raddr == 0x1200000 + 100u * (unsigned)i);
    }
    CHECK(d[0].len == 100 && d[1].len == 100 && d[2].len == 50);
    CHECK(d[3].wr_id == 1 && d[3].kind == IB_WR_FETCH_ADD && d[3].len == 8 && d[3].value == 3);
    CHECK(d[3].raddr == 0x1200000 && d[3].scratch == 3);
    /* planning changes nothing until posted */
    CHECK(ib_sendq_plan(&q, d, 2) == 2 && d[0].len == 100 && q.sq_used == 0);
    CHECK(ib_sendq_plan(&q, d, 32) == 4);
    ib_sendq_posted(&q, d, 4);
    CHECK(q.sq_used == 4 && q.next == 2 && q.head == 0);
    CHECK(ib_sendq_plan(&q, d, 32) == 0); /* send queue full */
    /* the put completes with its third piece, not before */
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 0);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 0 && log.n == 0);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 1 && log.n == 1);
    CHECK(log.ops[0].kind == IB_OP_PUT && log.ops[0].chan == 1 && log.status[0] == GPUPORT_OK);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == -1); /* no fourth piece */
    /* three entries free: the write of the count and the notification */
    CHECK(ib_sendq_plan(&q, d, 32) == 2);
    CHECK(d[0].wr_id == 2 && d[0].kind == IB_WR_WRITE_VALUE && d[0].len == 8 && d[0].value == 7);
    CHECK(d[0].raddr == 0x1b00000 && d[0].rkey == 0x24 && d[0].scratch == 0);
    CHECK(d[1].wr_id == 3 && d[1].kind == IB_WR_WRITE_VALUE && d[1].len == 4 &&
          (int32_t)(uint32_t)d[1].value == GPUPORT_ERR_PEER && d[1].scratch == 1);
    ib_sendq_posted(&q, d, 2);
    CHECK(ib_sendq_complete(&q, 1, on_done, &log) == 1 && log.ops[1].kind == IB_OP_SIGNAL_ADD);
    CHECK(ib_sendq_complete(&q, 2, on_done, &log) == 1 && log.ops[2].value == 7);
    CHECK(ib_sendq_complete(&q, 3, on_done, &log) == 1 && log.ops[3].kind == IB_OP_NOTIFY);
    CHECK(ib_sendq_idle(&q) && q.sq_used == 0 && log.n == 4);
    CHECK(ib_sendq_complete(&q, 3, on_done, &log) == -1); /* stale */
    CHECK(ib_sendq_complete(&q, 4, on_done, &log) == -1); /* never queued */
    ib_sendq_fini(&q);
}

static void test_sendq_partial_post(void)
{
    ib_sendq_t q;
    ib_wr_desc_t d[8];
    done_log_t log = {0};

    CHECK_OK(ib_sendq_init(&q, 4, 8, 10));
    push_op(&q, IB_OP_PUT, 0, 35, 0);
    push_op(&q, IB_OP_SIGNAL_ADD, 0, 8, 0);
    CHECK(ib_sendq_plan(&q, d, 8) == 5);
    /* ibv_post_send took the first two only */
    ib_sendq_posted(&q, d, 2);
    CHECK(q.sq_used == 2 && q.next == 0 && q.ops[0].posted == 20);
    CHECK(ib_sendq_plan(&q, d, 8) == 3);
    CHECK(d[0].wr_id == 0 && d[0].len == 10 && d[0].laddr == 0x100000 + 20 && d[0].scratch == 2);
    CHECK(d[1].wr_id == 0 && d[1].len == 5 && d[1].raddr == 0x900000 + 30);
    CHECK(d[2].wr_id == 1 && d[2].kind == IB_WR_FETCH_ADD);
    /* an operation whose request has not been posted cannot complete */
    CHECK(ib_sendq_complete(&q, 1, on_done, &log) == -1);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 0);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 0);
    /* every posted piece done, but the put is not wholly posted */
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == -1 && log.n == 0);
    ib_sendq_posted(&q, d, 3);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 0);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 1 && log.n == 1);
    CHECK(ib_sendq_complete(&q, 1, on_done, &log) == 1 && log.n == 2 && ib_sendq_idle(&q));
    ib_sendq_fini(&q);
}

static void test_sendq_fail(void)
{
    ib_sendq_t q;
    ib_wr_desc_t d[8];
    done_log_t log = {0};

    CHECK_OK(ib_sendq_init(&q, 8, 2, 1u << 20));
    for (uint32_t i = 0; i < 5; i++)
        push_op(&q, i % 2 ? IB_OP_SIGNAL_ADD : IB_OP_PUT, i, 64, 0);
    CHECK(ib_sendq_plan(&q, d, 8) == 2);
    ib_sendq_posted(&q, d, 2);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 1);
    /* posted or not, every incomplete operation ends, in order, once */
    log.push_q = &q;
    CHECK(ib_sendq_fail_all(&q, GPUPORT_ERR_PEER, on_done, &log) == 4);
    log.push_q = NULL;
    CHECK(log.n == 5);
    for (int i = 1; i < 5; i++)
        CHECK(log.ops[i].chan == (uint32_t)i && log.status[i] == GPUPORT_ERR_PEER);
    CHECK(q.sq_used == 0 && q.head == 5 && q.next == 5);
    /* what the callbacks queued stays, behind them */
    CHECK(q.tail == 9 && !ib_sendq_idle(&q));
    CHECK(ib_sendq_fail_all(&q, GPUPORT_ERR_PEER, on_done, &log) == 4 && ib_sendq_idle(&q));
    CHECK(log.ops[5].chan == 101 && log.ops[8].chan == 104);
    /* the flushed completion of the failed request is not in flight any more */
    CHECK(ib_sendq_complete(&q, 1, on_done, &log) == -1);
    ib_sendq_fini(&q);
}

static void test_sendq_room_and_wrap(void)
{
    ib_sendq_t q;
    ib_wr_desc_t d[8];
    done_log_t log;
    uint64_t huge = 5ull << 30;

    CHECK_OK(ib_sendq_init(&q, 4, 3, IB_PIECE_LIMIT));
    for (int i = 0; i < 4; i++)
        push_op(&q, IB_OP_SIGNAL_ADD, (uint32_t)i, 8, 0);
    CHECK(!ib_sendq_room(&q, 1) && ib_sendq_room(&q, 0));
    CHECK(ib_sendq_plan(&q, d, 8) == 3);
    ib_sendq_posted(&q, d, 3);
    memset(&log, 0, sizeof(log));
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 1);
    CHECK(ib_sendq_room(&q, 1) && !ib_sendq_room(&q, 2));
    /* a 5 GiB put: 2 GiB, 2 GiB, 1 GiB, at advancing addresses */
    ib_op_t *big = push_op(&q, IB_OP_PUT, 9, huge, 0);
    big->laddr = 1ull << 40;
    big->raddr = 3ull << 40;
    CHECK(ib_sendq_plan(&q, d, 8) == 1 && d[0].wr_id == 3);
    ib_sendq_posted(&q, d, 1);
    for (uint64_t k = 1; k <= 3; k++)
        CHECK(ib_sendq_complete(&q, k, on_done, &log) == 1);
    CHECK(ib_sendq_plan(&q, d, 8) == 3);
    CHECK(d[0].wr_id == 4 && d[0].len == 1u << 31 && d[0].laddr == 1ull << 40);
    CHECK(d[1].len == 1u << 31 && d[1].raddr == (3ull << 40) + (2ull << 30));
    CHECK(d[2].len == 1u << 30 && d[2].laddr == (1ull << 40) + (4ull << 30));
    ib_sendq_posted(&q, d, 3);
    CHECK(ib_sendq_complete(&q, 4, on_done, &log) == 0);
    CHECK(ib_sendq_complete(&q, 4, on_done, &log) == 0);
    CHECK(ib_sendq_complete(&q, 4, on_done, &log) == 1 && ib_sendq_idle(&q));
    CHECK(log.n == 5 && log.ops[4].chan == 9 && log.ops[4].len == huge);
    ib_sendq_fini(&q);

    /* many laps of a small ring, completions in posting order: every
     * operation reported once, in order, and the scratch slots rotate */
    CHECK_OK(ib_sendq_init(&q, 8, 4, 64));
    uint64_t pushed = 0, reported = 0, wrs = 0;
    memset(&log, 0, sizeof(log));
    while (reported < 1000) {
        uint32_t n;
        for (; pushed < 1000 && ib_sendq_room(&q, 1); pushed++)
            push_op(&q, pushed % 3 ? IB_OP_SIGNAL_WRITE : IB_OP_PUT, (uint32_t)(pushed % 50),
                    pushed % 3 ? 8 : 1 + pushed % 200, pushed);
        n = ib_sendq_plan(&q, d, 8);
        for (uint32_t i = 0; i < n; i++)
            CHECK(d[i].scratch == (wrs + i) % 4);
        ib_sendq_posted(&q, d, n);
        wrs += n;
        CHECK(q.sq_used <= 4);
        if (n == 0) {
            /* complete the oldest posted request */
            uint64_t id = q.head;
            CHECK(q.sq_used > 0);
            while (q.ops[id & 7].wrs_done == q.ops[id & 7].wrs_posted)
                id++;
            log.n = 0;
            int k = ib_sendq_complete(&q, id, on_done, &log);
            CHECK(k >= 0 && k == log.n);
            for (int i = 0; i < k; i++)
                CHECK(log.ops[i].value == reported++);
        }
    }
    CHECK(ib_sendq_idle(&q) && q.sq_used == 0);
    ib_sendq_fini(&q);
}


/* get and the adds in the send queue: a get's reads in pieces, the first
 * request after a read fenced (in the same plan or a later one, a read
 * after a read not), atomic_add one fetch-and-add, accumulate one an
 * element with its addend read from the source as it is planned, spread
 * over as many plans as the send queue needs; all complete in order. */
static void test_sendq_rma(void)
{
    ib_sendq_t q;
    ib_wr_desc_t d[32];
    done_log_t log = {0};
    int64_t addends[5] = {1, -2, 3, INT64_MAX, INT64_MIN};
    ib_op_t *acc;

    CHECK_OK(ib_sendq_init(&q, 8, 6, 100));
    push_op(&q, IB_OP_GET, 1, 250, 0);
    push_op(&q, IB_OP_SIGNAL_ADD, 1, 8, 1);
    push_op(&q, IB_OP_ADD, 2, 8, (uint64_t)-5);
    acc = push_op(&q, IB_OP_ACC, 3, sizeof(addends), 0);
    acc->laddr = (uint64_t)(uintptr_t)addends;
    CHECK(ib_sendq_plan(&q, d, 32) == 6);
    for (int i = 0; i < 3; i++) {
        CHECK(d[i].wr_id == 0 && d[i].kind == IB_WR_READ && d[i].lkey == 0x11);
        CHECK(d[i].rkey == 0x23 && !d[i].fence);
        CHECK(d[i].laddr == 0x200000 + 100u * (unsigned)i);
        CHECK(d[i].raddr == 0x1200000 + 100u * (unsigned)i);
    }
    CHECK(d[0].len == 100 && d[2].len == 50);
    CHECK(d[3].wr_id == 1 && d[3].kind == IB_WR_FETCH_ADD && d[3].value == 1 && d[3].fence);
    CHECK(d[4].wr_id == 2 && d[4].kind == IB_WR_FETCH_ADD && d[4].value == (uint64_t)-5);
    CHECK(d[4].raddr == 0x1b00000 && d[4].rkey == 0x24 && d[4].len == 8 && !d[4].fence);
    CHECK(d[5].wr_id == 3 && d[5].kind == IB_WR_FETCH_ADD && d[5].value == 1 && !d[5].fence);
    CHECK(d[5].raddr == 0x2400000 && d[5].rkey == 0x25 && d[5].len == 8);
    ib_sendq_posted(&q, d, 6);
    CHECK(q.next == 3 && q.ops[3].posted == 8 && !q.after_read);
    /* the get completes with its last read */
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 0);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 0);
    CHECK(ib_sendq_complete(&q, 0, on_done, &log) == 1 && log.ops[0].kind == IB_OP_GET);
    CHECK(ib_sendq_complete(&q, 1, on_done, &log) == 1);
    CHECK(ib_sendq_complete(&q, 2, on_done, &log) == 1 && log.ops[2].kind == IB_OP_ADD);
    /* the accumulate's other four elements, three now (the room) */
    CHECK(ib_sendq_plan(&q, d, 3) == 3);
    for (int i = 0; i < 3; i++)
        CHECK(d[i].wr_id == 3 && d[i].kind == IB_WR_FETCH_ADD &&
              d[i].value == (uint64_t)addends[i + 1] && d[i].raddr == 0x2400000 + 8u * (i + 1u));
    ib_sendq_posted(&q, d, 3);
    for (int i = 0; i < 4; i++)
        CHECK(ib_sendq_complete(&q, 3, on_done, &log) == 0);
    CHECK(ib_sendq_plan(&q, d, 32) == 1 && d[0].value == (uint64_t)INT64_MIN);
    ib_sendq_posted(&q, d, 1);
    CHECK(ib_sendq_complete(&q, 3, on_done, &log) == 1 && log.ops[3].kind == IB_OP_ACC);
    CHECK(ib_sendq_idle(&q) && log.n == 4);
    /* a read posted alone: the next plan's first write is fenced; a read
     * after a read is not */
    push_op(&q, IB_OP_GET, 0, 10, 0);
    push_op(&q, IB_OP_GET, 0, 10, 0);
    CHECK(ib_sendq_plan(&q, d, 1) == 1 && d[0].kind == IB_WR_READ);
    ib_sendq_posted(&q, d, 1);
    CHECK(q.after_read);
    push_op(&q, IB_OP_PUT_VALUE, 0, 8, 9);
    CHECK(ib_sendq_plan(&q, d, 32) == 2);
    CHECK(d[0].kind == IB_WR_READ && !d[0].fence);
    CHECK(d[1].kind == IB_WR_WRITE_INLINE && d[1].fence);
    ib_sendq_fini(&q);
}

/* What ib's rma_ok accepts, over a connection made up of its parts: the
 * refusals name what cannot and what can instead, each whole in the 320
 * bytes the core gives it. */
static void expect_rma_ok(const gpuport_tl_chan_t *ch, uint32_t op, int want, const char *has)
{
    const gpuport_transport_ops_t *ib = gpuport_transport_ops(GPUPORT_TL_KIND_IB);
    char why[320] = "";
    int ok = ib->rma_ok(ch, op, why, sizeof(why));

    CHECK_MSG(ok == want, "%s: %d (%s), expected %d", gpuport_op_name(op), ok, why, want);
    CHECK_MSG(!has || strstr(why, has), "%s: \"%s\" lacks \"%s\"", gpuport_op_name(op), why, has);
    CHECK(strlen(why) < sizeof(why) - 1);
}

static void test_rma_ok(void)
{
    ib_dev_t dev;
    ib_comm_t ic;
    ib_conn_t c;
    gpuport_conn_t conn;
    gpuport_tl_chan_t ch;
    const char *floats = "ib atomics add integers only; accumulate floats over tcp, or with a "
                         "memory channel between ranks on one host";
    const gpuport_transport_ops_t *ib = gpuport_transport_ops(GPUPORT_TL_KIND_IB);

    CHECK(ib && ib->rma && ib->rma_ok);
    memset(&dev, 0, sizeof(dev));
    memset(&ic, 0, sizeof(ic));
    memset(&c, 0, sizeof(c));
    memset(&conn, 0, sizeof(conn));
    memset(&ch, 0, sizeof(ch));
    snprintf(dev.name, sizeof(dev.name), "mlx5_7");
    dev.atomic_cap = IBV_ATOMIC_HCA;
    ic.dev = &dev;
    c.ic = &ic;
    c.peer = 1;
    c.remote.atomic_cap = IBV_ATOMIC_GLOB;
    c.rd_init = 16;
    conn.priv = &c;
    ch.conn = &conn;
    ch.peer = 1;
    ch.src.kind = GPUPORT_REGION_HOST;
    ch.dst.rec.kind = GPUPORT_REGION_HOST_SHARED;
    expect_rma_ok(&ch, GPUPORT_OP_GET, 1, NULL);
    expect_rma_ok(&ch, GPUPORT_OP_ATOMIC_ADD, 1, NULL);
    expect_rma_ok(&ch, GPUPORT_OP_ACC_INT64, 1, NULL);
    expect_rma_ok(&ch, GPUPORT_OP_ACC_FLOAT32, 0, floats);
    expect_rma_ok(&ch, GPUPORT_OP_ACC_BFLOAT16, 0, floats);
    /* GPU memory: read from and into, never added into, nor read for addends */
    ch.dst.rec.kind = GPUPORT_REGION_DEVICE_VMM;
    ch.src.kind = GPUPORT_REGION_DEVICE;
    expect_rma_ok(&ch, GPUPORT_OP_GET, 1, NULL);
    expect_rma_ok(&ch, GPUPORT_OP_ATOMIC_ADD, 0, "rank 1's destination is GPU memory");
    expect_rma_ok(&ch, GPUPORT_OP_ACC_INT64, 0, "memory channel");
    ch.dst.rec.kind = GPUPORT_REGION_HOST;
    expect_rma_ok(&ch, GPUPORT_OP_ATOMIC_ADD, 1, NULL);
    expect_rma_ok(&ch, GPUPORT_OP_ACC_INT64, 0, "source is GPU memory, which the proxy cannot");
    ch.src.kind = GPUPORT_REGION_HOST;
    /* no atomics on either side, or none outstanding */
    c.rd_init = 0;
    expect_rma_ok(&ch, GPUPORT_OP_ACC_INT64, 0, "max_rd_atomic 0");
    expect_rma_ok(&ch, GPUPORT_OP_GET, 0, "a device allows none (max_rd_atomic 0); get over tcp");
    c.remote.atomic_cap = IBV_ATOMIC_NONE;
    expect_rma_ok(&ch, GPUPORT_OP_ATOMIC_ADD, 0,
                  "rank 1's device has no atomics (atomic_cap IBV_ATOMIC_NONE); add over tcp");
    expect_rma_ok(&ch, GPUPORT_OP_GET, 0, "rank 1's device has none (IBV_ATOMIC_NONE)");
    dev.atomic_cap = IBV_ATOMIC_NONE;
    expect_rma_ok(&ch, GPUPORT_OP_ATOMIC_ADD, 0,
                  "this rank's device mlx5_7 has no atomics (atomic_cap IBV_ATOMIC_NONE)");
    expect_rma_ok(&ch, GPUPORT_OP_GET, 0, "this rank's device mlx5_7 has none");
    expect_rma_ok(&ch, GPUPORT_OP_ACC_FLOAT32, 0, floats);
}


/* ---- the data path over the mock ---- */

#define MREGION (256u * 1024)
#define MROUNDS 60

typedef struct {
    int rounds;
    int faulty; /* rank 0's NIC fails a request; rank 1 only waits for the end */
    int bad_trigger; /* rank 0 pushes a put outside the regions: rank 1 must hear of it */
    int no_inline;   /* the device takes no inline data: put_value writes from scratch */
    int alone;       /* rank 1 puts and destroys at once; rank 0 destroys ALONE_LATER_MS later */
    int hol;         /* three ranks, rank 0's link to rank 1 held (hol_rank): 1 released, 2 not */
    int rma;         /* get and the adds (rma_rank): 1 three ranks, 2 a device without atomics */
} mock_opts_t;

/* The alone run: a destroy's own steps take milliseconds (the bound leaves
 * room for a loaded machine and sanitizers; GPUPORT_TIMEOUT_MS is ten
 * times that); rank 0 destroys this long after rank 1's returned. */
#define ALONE_BOUND_MS 3000
#define ALONE_LATER_MS 2000
static uint64_t alone_ms[2]; /* each rank's destroy, in ms + 1 (0: not yet) */
static int alone_done;       /* rank 0 has destroyed: rank 1 stops waiting */

/* the faulty run: puts rank 0 had accepted when the failure came back */
static int faulty_accepted;

static unsigned char *g_mock_dst[2]; /* each rank's destination, for the other to check */

static unsigned char mpat(int rank, int round, uint64_t i)
{
    return (unsigned char)(rank * 61 + round * 11 + (int)(i * 7 % 253));
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 17;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* gpuport_comm_destroy is bounded by this rank's own work: rank 1 puts the
 * whole region with a signal and destroys at once (its channels open, the
 * put not flushed), then waits as a rank waits in a barrier after its
 * destroy; its destroy returns within ALONE_BOUND_MS. Rank 0, alive and
 * not destroying, receives every byte, finds its channel closed, and
 * destroys ALONE_LATER_MS later, as fast; mock_run checks that nothing
 * was logged as an error (a close answered after rank 1 deregistered would
 * fail at its NIC and break its connection). */
static void mock_alone(int rank, gpuport_comm_t comm, gpuport_channel_t ch, unsigned char *src,
                       const unsigned char *dst)
{
    uint64_t t0;

    if (rank == 1) {
        for (uint64_t i = 0; i < MREGION; i++)
            src[i] = mpat(1, 0, i);
        CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 0, MREGION));
    } else {
        CHECK_OK(gpuport_channel_wait(ch));
        for (uint64_t i = 0; i < MREGION; i++)
            CHECK_MSG(dst[i] == mpat(1, 0, i), "alone: byte %llu is 0x%02x, rank 1 put 0x%02x",
                      (unsigned long long)i, dst[i], mpat(1, 0, i));
        while (!__atomic_load_n(&alone_ms[1], __ATOMIC_ACQUIRE))
            usleep(1000);
        usleep(ALONE_LATER_MS * 1000);
        CHECK_STATUS(gpuport_channel_status(ch), GPUPORT_ERR_CLOSED);
    }
    t0 = mono_ms();
    CHECK_OK(gpuport_comm_destroy(comm));
    __atomic_store_n(&alone_ms[rank], mono_ms() - t0 + 1, __ATOMIC_RELEASE);
    CHECK_MSG(alone_ms[rank] - 1 < ALONE_BOUND_MS, "alone: rank %d's destroy took %llu ms", rank,
              (unsigned long long)(alone_ms[rank] - 1));
    if (rank == 0)
        __atomic_store_n(&alone_done, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&alone_done, __ATOMIC_ACQUIRE))
        usleep(1000);
}

static int mock_rank(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    const mock_opts_t *o = arg;
    gpuport_comm_t comm;
    unsigned char *src, *dst, *ssrc, *sdst;
    gpuport_mem_t msrc, mdst, mssrc, msdst;
    gpuport_channel_t ch, self;
    int peer = 1 - rank;
    uint64_t seed = 99;

    (void)size;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    src = malloc(MREGION);
    CHECK_OK(gpuport_mem_alloc(comm, MREGION, (void **)&dst)); /* both kinds of host memory */
    ssrc = malloc(MREGION);
    sdst = malloc(MREGION);
    CHECK(src && ssrc && sdst);
    memset(dst, 0xee, MREGION);
    g_mock_dst[rank] = dst;
    CHECK_OK(gpuport_mem_register(comm, src, MREGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, MREGION, &mdst));
    CHECK_OK(gpuport_mem_register(comm, ssrc, MREGION, &mssrc));
    CHECK_OK(gpuport_mem_register(comm, sdst, MREGION, &msdst));
    CHECK_OK(gpuport_channel_create(comm, peer, msrc, mdst, &ch));
    CHECK(strcmp(gpuport_channel_transport(ch), "ib") == 0);
    /* a second channel over the same regions: registered once */
    gpuport_channel_t twin;
    CHECK_OK(gpuport_channel_create(comm, peer, msrc, mdst, &twin));
    /* per rank: the control segment, the QP's scratch buffer, two regions */
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_MSG(__atomic_load_n(&mock_live.mr, __ATOMIC_RELAXED) == 2 * 4, "%d registrations",
              __atomic_load_n(&mock_live.mr, __ATOMIC_RELAXED));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(twin));
    CHECK_OK(gpuport_channel_create(comm, rank, mssrc, msdst, &self)); /* the loopback QP */
    CHECK(strcmp(gpuport_channel_transport(self), "ib") == 0);
    /* per rank: the control segment, a scratch buffer per QP (2), and the
     * four regions once each, whatever the number of channels over them */
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_MSG(__atomic_load_n(&mock_live.mr, __ATOMIC_RELAXED) == 2 * 7, "%d registrations",
              __atomic_load_n(&mock_live.mr, __ATOMIC_RELAXED));
    CHECK_OK(bs->barrier(bs->ctx));

    if (o->alone) {
        mock_alone(rank, comm, ch, src, dst);
        free(src);
        free(ssrc);
        free(sdst);
        return 0;
    } else if (o->faulty) {
        if (rank == 0) {
            gpuport_status_t st;
            /* the third request from here: a piece of the first put */
            mock_verbs_fail_in(3);
            memset(src, 1, MREGION);
            /* The first put is queued before anything fails; the failure of
             * its third piece can come back before the later puts are pushed
             * (a TSan run showed it), and then they are refused. */
            faulty_accepted = 0;
            for (int i = 0; i < 4; i++) {
                st = gpuport_channel_put(ch, 0, 0, 9000);
                CHECK_MSG(st == GPUPORT_OK || (i > 0 && st == GPUPORT_ERR_PEER),
                          "put %d of 4 after the injected failure: %s", i + 1,
                          gpuport_status_string(st));
                faulty_accepted += st == GPUPORT_OK;
            }
            st = gpuport_channel_flush(ch);
            CHECK_MSG(st == GPUPORT_ERR_PEER, "flush after a failed request: %s",
                      gpuport_status_string(st));
            CHECK(gpuport_channel_status(ch) == GPUPORT_ERR_PEER);
            CHECK(gpuport_channel_put(ch, 0, 0, 1) == GPUPORT_ERR_PEER);
            /* the loopback QP is another connection: it still works */
            memset(ssrc, 3, 64);
            CHECK_OK(gpuport_channel_put_with_signal(self, 0, 0, 64));
            CHECK_OK(gpuport_channel_wait(self));
            CHECK(sdst[0] == 3 && sdst[63] == 3);
        }
    } else if (o->bad_trigger) {
        if (rank == 0) {
            uint64_t pos;
            CHECK_OK(gpuport_channel_push(ch, GPUPORT_OP_PUT, MREGION, 0, 16, &pos));
            CHECK_STATUS(gpuport_channel_flush(ch), GPUPORT_ERR_OUT_OF_RANGE);
        } else {
            /* report_fail's write reached this rank's slot */
            CHECK_STATUS(gpuport_channel_wait(ch), GPUPORT_ERR_PEER);
        }
    } else {
        unsigned char *shadow = malloc(MREGION);
        CHECK(shadow);
        memset(shadow, 0xee, MREGION);
        for (int round = 0; round < o->rounds; round++) {
            /* both ranks draw the same sizes and offsets: each knows what
             * the other sends; the patterns differ by rank */
            uint64_t start = seed, size_, off, busy_lo = 0, busy_hi = 0, voff, vval;
            int nputs = 1 + (int)(lcg(&seed) % 4);
            for (int p = 0; p < nputs; p++) {
                if (p == nputs - 1) {
                    /* a value before the last put (which may cover it) */
                    voff = lcg(&seed) % (MREGION / 8) * 8;
                    vval = lcg(&seed) * 0x9e3779b97f4a7c15ull + (uint64_t)rank;
                    CHECK_OK(gpuport_channel_put_value(ch, voff, vval));
                }
                size_ = lcg(&seed) % 3 == 0 ? 1 + lcg(&seed) % MREGION : 1 + lcg(&seed) % 5000;
                off = lcg(&seed) % (MREGION - size_ + 1);
                /* the source of a put in flight may change only once flushed */
                if (off < busy_hi && off + size_ > busy_lo) {
                    CHECK_OK(gpuport_channel_flush(ch));
                    busy_lo = busy_hi = 0;
                }
                busy_lo = busy_hi == 0 || off < busy_lo ? off : busy_lo;
                busy_hi = off + size_ > busy_hi ? off + size_ : busy_hi;
                for (uint64_t i = 0; i < size_; i++)
                    src[off + i] = mpat(rank, round * 8 + p, i);
                CHECK_OK(p == nputs - 1 ? gpuport_channel_put_with_signal(ch, off, off, size_)
                                        : gpuport_channel_put(ch, off, off, size_));
            }
            CHECK_OK(gpuport_channel_flush(ch));
            /* flushed: the source may change; the peer holds what was sent */
            memset(src, 0x5a, MREGION);
            CHECK_OK(gpuport_channel_wait(ch));
            seed = start;
            nputs = 1 + (int)(lcg(&seed) % 4);
            for (int p = 0; p < nputs; p++) {
                if (p == nputs - 1) {
                    voff = lcg(&seed) % (MREGION / 8) * 8;
                    vval = lcg(&seed) * 0x9e3779b97f4a7c15ull + (uint64_t)peer;
                    memcpy(shadow + voff, &vval, 8);
                }
                size_ = lcg(&seed) % 3 == 0 ? 1 + lcg(&seed) % MREGION : 1 + lcg(&seed) % 5000;
                off = lcg(&seed) % (MREGION - size_ + 1);
                for (uint64_t i = 0; i < size_; i++)
                    shadow[off + i] = mpat(peer, round * 8 + p, i);
            }
            for (uint64_t i = 0; i < MREGION; i++)
                CHECK_MSG(shadow[i] == dst[i], "rank %d round %d: destination byte %llu is "
                          "0x%02x, rank %d put 0x%02x", rank, round, (unsigned long long)i,
                          dst[i], peer, shadow[i]);
            /* the loopback channel: a signal alone, then a put and a signal */
            memset(ssrc, round, 100);
            CHECK_OK(gpuport_channel_signal(self));
            CHECK_OK(gpuport_channel_put(self, 8, 0, 100));
            CHECK_OK(gpuport_channel_signal(self));
            CHECK_OK(gpuport_channel_wait(self));
            CHECK_OK(gpuport_channel_wait(self));
            CHECK(sdst[8] == (unsigned char)round && sdst[107] == (unsigned char)round);
            /* checked: the peer may send the next round */
            CHECK_OK(gpuport_channel_signal(ch));
            CHECK_OK(gpuport_channel_wait(ch));
        }
        free(shadow);
        /* put_value: one RDMA write of the value to the peer's address with
         * the peer's key, its 8 bytes inline in the request (taken at the
         * post) where the device allows, and there when the signal is */
        CHECK_OK(bs->barrier(bs->ctx));
        if (rank == 0) {
            const uint64_t v = 0x0123456789abcdefull, at = 8 * 1001;
            unsigned char *want = g_mock_dst[1] + at;
            mock_inline_reset();
            CHECK_OK(gpuport_channel_put_value_with_signal(ch, at, v));
            CHECK_OK(gpuport_channel_flush(ch));
            if (o->no_inline) {
                CHECK_MSG(mock_inline.count == 0, "%ld inline requests", mock_inline.count);
            } else {
                CHECK_MSG(mock_inline.count == 1, "%ld inline requests", mock_inline.count);
                CHECK(mock_inline.opcode == IBV_WR_RDMA_WRITE);
                CHECK(mock_inline.send_flags & IBV_SEND_INLINE);
                CHECK(mock_inline.length == 8 && memcmp(mock_inline.data, &v, 8) == 0);
                CHECK(mock_inline.remote_addr == (uint64_t)(uintptr_t)want);
                CHECK(mock_inline.rkey != 0 && mock_inline.rkey == mock_rkey_of(want));
            }
        } else {
            uint64_t got;
            CHECK_OK(gpuport_channel_wait(ch));
            memcpy(&got, dst + 8 * 1001, 8);
            CHECK_MSG(got == 0x0123456789abcdefull, "the value landed as 0x%llx",
                      (unsigned long long)got);
        }
        CHECK_OK(bs->barrier(bs->ctx));
        /* exactly as many signals as were sent */
        int ready = 1;
        CHECK_OK(gpuport_channel_poll(ch, &ready));
        CHECK(ready == 0);
        CHECK_OK(gpuport_channel_poll(self, &ready));
        CHECK(ready == 0);
    }
    /* A rank's destination is deregistered when it destroys its side: the
     * peer must be done writing (else its request fails and breaks its
     * connection) */
    CHECK_OK(bs->barrier(bs->ctx));
    /* with bad_trigger the channels are left to gpuport_comm_destroy */
    if (!o->bad_trigger) {
        CHECK_OK(gpuport_channel_destroy(self));
        CHECK_STATUS(gpuport_channel_destroy(ch), GPUPORT_OK);
        /* the regions' registrations went with their last channel */
        CHECK_OK(bs->barrier(bs->ctx));
        const int live_mr = __atomic_load_n(&mock_live.mr, __ATOMIC_RELAXED);
        CHECK_MSG(live_mr == 2 * 3, "%d registrations", live_mr);
        /* both ranks have counted before either destroys its communicator
         * (which deregisters the communicator's own memory) */
        CHECK_OK(bs->barrier(bs->ctx));
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    free(src);
    free(ssrc);
    free(sdst);
    return 0;
}

/* ---- one stalled link holds no other channel (parking) ---- */

/* Three ranks over the mock: rank 0's channel A to rank 1 runs over a
 * link the mock holds (mock_verbs_hold), channel B to rank 2 over one that
 * works. */
#define HREGION 65536u
#define HPUT 1500          /* puts into A: more than its connection queues (ib_proxy.c: 1,016) */
#define HROUNDS 200        /* B's ping-pong rounds, before the hold and during it */
#define HMSG 128           /* each round's put, at its own offset */
#define HVALUE_OFF 32768u  /* A's put_value, after the puts */
#define HVALUE 0x5eed0123456789ull
#define HPREVIEW (1ull << 40) /* the second word of A's i-th put: i | HPREVIEW */
#define HTIMEOUT_MS 1000   /* the variant that never releases A */
#define HLONG_MS 30000     /* mock_run's GPUPORT_TIMEOUT_MS */

static unsigned char *g_hol_adst; /* rank 1's destination of A, for rank 0's hold */
static uint32_t g_hol_aid;        /* A's channel id at rank 0, for the log check */
static double g_hol_rate[2];      /* B's rounds per second: before the hold, during it */
static uint32_t g_hol_parked;     /* A's triggers parked during the hold */
static long g_hol_posted;         /* A's work requests posted and not completed then */
static int g_hol_beside;          /* the timeout variant: B's flushed puts while A waited */
static int g_hol_r0_gone;         /* the timeout variant: rank 0's communicator is destroyed */

typedef struct {
    unsigned char *src, *dst;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
} hol_side_t;

static void hol_open(gpuport_comm_t comm, int peer, hol_side_t *s)
{
    s->src = malloc(HREGION);
    s->dst = malloc(HREGION);
    CHECK(s->src && s->dst);
    memset(s->src, 0, HREGION);
    memset(s->dst, 0xee, HREGION);
    CHECK_OK(gpuport_mem_register(comm, s->src, HREGION, &s->msrc));
    CHECK_OK(gpuport_mem_register(comm, s->dst, HREGION, &s->mdst));
    CHECK_OK(gpuport_channel_create(comm, peer, s->msrc, s->mdst, &s->ch));
    CHECK(strcmp(gpuport_channel_transport(s->ch), "ib") == 0);
}

/* A channel whose destroy timed out is kept, its regions registered, until
 * the communicator goes: the buffers are freed after that (hol_free). */
static void hol_close(hol_side_t *s, gpuport_status_t want)
{
    CHECK_STATUS(gpuport_channel_destroy(s->ch), want);
    if (want == GPUPORT_OK) {
        CHECK_OK(gpuport_mem_deregister(s->msrc));
        CHECK_OK(gpuport_mem_deregister(s->mdst));
    }
}

static void hol_free(hol_side_t *s)
{
    free(s->src);
    free(s->dst);
}

static unsigned char hpat(int rank, int round, uint64_t i)
{
    return (unsigned char)(rank * 89 + round * 7 + (int)(i * 13 % 251));
}

static uint64_t word_of(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return v;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* B's ping-pong, rounds first..first+n-1, seen from rank 0 (initiator) or
 * rank 2: each round's HMSG bytes at their own offset, with a signal, and
 * the answer the same way; every byte compared on both sides. Each wait is
 * bounded by GPUPORT_TIMEOUT_MS. Rounds per second. */
static double hol_ping_pong(hol_side_t *b, int initiator, int first, int n)
{
    int me = initiator ? 0 : 2, peer = initiator ? 2 : 0;
    double t0 = now_s();

    for (int r = first; r < first + n; r++) {
        uint64_t off = (uint64_t)r * HMSG;
        for (uint64_t i = 0; i < HMSG; i++)
            b->src[off + i] = hpat(me, r, i);
        if (initiator)
            CHECK_OK(gpuport_channel_put_with_signal(b->ch, off, off, HMSG));
        gpuport_status_t st = gpuport_channel_wait(b->ch);
        CHECK_MSG(st == GPUPORT_OK, "rank %d: B's round %d (of %d..%d) did not complete: %s", me,
                  r, first, first + n - 1, gpuport_status_string(st));
        for (uint64_t i = 0; i < HMSG; i++)
            CHECK_MSG(b->dst[off + i] == hpat(peer, r, i),
                      "rank %d: B's round %d: byte %llu is 0x%02x, rank %d put 0x%02x", me, r,
                      (unsigned long long)i, b->dst[off + i], peer, hpat(peer, r, i));
        if (!initiator)
            CHECK_OK(gpuport_channel_put_with_signal(b->ch, off, off, HMSG));
    }
    return n / (now_s() - t0);
}

/* A's source: put i takes 16 bytes at 16 * i, the words i and
 * i | HPREVIEW, to 8 * i; put i + 1 overwrites the second word with i + 1.
 * So in order A's destination holds k at 8 * k for every k, and
 * (HPUT - 1) | HPREVIEW after them; a put carried out after its successor
 * would leave a HPREVIEW word inside. */
static void hol_fill_a(unsigned char *src)
{
    for (uint64_t i = 0; i < HPUT; i++) {
        uint64_t w[2] = {i, i | HPREVIEW};
        memcpy(src + 16 * i, w, 16);
    }
}

static void hol_put_a(gpuport_channel_t a)
{
    for (uint64_t i = 0; i < HPUT; i++)
        CHECK_OK(gpuport_channel_put(a, 8 * i, 16 * i, 16));
    CHECK_OK(gpuport_channel_put_value_with_signal(a, HVALUE_OFF, HVALUE));
}

static void hol_check_a(const unsigned char *dst)
{
    for (uint64_t k = 0; k < HPUT; k++)
        CHECK_MSG(word_of(dst + 8 * k) == k, "A's word %llu is 0x%llx (put %llu wrote it)",
                  (unsigned long long)k, (unsigned long long)word_of(dst + 8 * k),
                  (unsigned long long)k);
    CHECK(word_of(dst + 8 * HPUT) == ((HPUT - 1) | HPREVIEW));
    CHECK(dst[8 * HPUT + 8] == 0xee);
    CHECK(word_of(dst + HVALUE_OFF) == HVALUE);
}

/* A parked trigger is one its transport had no room for: here only the
 * puts past its connection's queue (ib_has_room). */
static uint32_t parked_of(gpuport_channel_t ch)
{
    return atomic_load(&ch->pchan->parked);
}

/* Rank 0 holds its link to rank 1 (A), puts HPUT times and a value with a
 * signal into A, and ping-pongs with rank 2 over B HROUNDS times, as many
 * as before the hold: B's triggers are behind A's in the host FIFO, so
 * without parking they would wait for A. Then, released (o->hol == 1):
 * A's flush returns, and rank 1 finds every word in order; or, never
 * released (o->hol == 2, a short time limit): A fails alone with
 * GPUPORT_ERR_TIMEOUT while B's puts go on being flushed, B still
 * ping-pongs afterwards, and the destroys return at the limit. */
static int hol_rank(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    const mock_opts_t *o = arg;
    int release = o->hol == 1, ready;
    gpuport_comm_t comm;
    hol_side_t a, b;

    (void)size;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (rank == 0) {
        hol_open(comm, 1, &a);
        hol_open(comm, 2, &b);
        g_hol_aid = a.ch->id;
        hol_fill_a(a.src);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1: g_hol_adst is set */
        g_hol_rate[0] = hol_ping_pong(&b, 1, 0, HROUNDS);
        if (!release)
            test_short_timeout(comm, HTIMEOUT_MS);
        CHECK(mock_verbs_hold(a.src, __atomic_load_n(&g_hol_adst, __ATOMIC_ACQUIRE), 1));
        hol_put_a(a.ch);
        if (release) {
            g_hol_rate[1] = hol_ping_pong(&b, 1, HROUNDS, HROUNDS);
            /* B's triggers came after all of A's: A's connection queue is
             * full (the QP's work requests posted, none completed) and the
             * rest of A's triggers parked */
            g_hol_parked = parked_of(a.ch);
            g_hol_posted = mock_verbs_held_posted();
            CHECK_MSG(g_hol_parked > 0, "none of A's triggers was parked");
            CHECK_MSG(g_hol_posted > 0, "no work request of A's is waiting at the held QP");
            CHECK_OK(gpuport_channel_status(a.ch));
            CHECK_OK(gpuport_channel_flush(b.ch));
        } else {
            double t0 = now_s();
            gpuport_status_t st;
            /* the proxy's own limit fails A; bounded here against a hang */
            while (gpuport_channel_status(a.ch) == GPUPORT_OK && now_s() - t0 < 60) {
                for (uint64_t i = 0; i < HMSG; i++)
                    b.src[i] = hpat(0, g_hol_beside, i);
                CHECK_OK(gpuport_channel_put(b.ch, 0, 0, HMSG));
                st = gpuport_channel_flush(b.ch);
                CHECK_MSG(st == GPUPORT_OK, "B's flush %d while A waits: %s", g_hol_beside,
                          gpuport_status_string(st));
                g_hol_beside++;
                usleep(1000);
            }
            CHECK_STATUS(gpuport_channel_status(a.ch), GPUPORT_ERR_TIMEOUT);
            CHECK_STATUS(gpuport_channel_flush(a.ch), GPUPORT_ERR_TIMEOUT);
            CHECK_OK(gpuport_channel_status(b.ch));
        }
        CHECK_OK(bs->barrier(bs->ctx)); /* 2: A is held, its triggers pushed */
        CHECK_OK(bs->barrier(bs->ctx)); /* 3: rank 1 found nothing of A's */
        if (release) {
            CHECK(mock_verbs_hold(NULL, NULL, 0));
            CHECK_OK(gpuport_channel_flush(a.ch));
            CHECK(parked_of(a.ch) == 0 && mock_verbs_held_posted() == 0);
        } else {
            /* B goes on, every round checked at both ends (under the long
             * limit: only A's wait needed the short one) */
            test_short_timeout(comm, HLONG_MS);
            hol_ping_pong(&b, 1, HROUNDS, 20);
            CHECK_OK(gpuport_channel_flush(b.ch));
        }
        CHECK_OK(bs->barrier(bs->ctx)); /* 4: rank 1 checked A's words */
        if (release) {
            hol_close(&a, GPUPORT_OK);
        } else {
            /* A's work at the held QP never completes, nor does rank 1's
             * answer to its close come over the held link: the destroy
             * returns at the limit and keeps A until the communicator goes */
            test_short_timeout(comm, HTIMEOUT_MS);
            hol_close(&a, GPUPORT_ERR_TIMEOUT);
        }
        hol_close(&b, GPUPORT_OK);
    } else if (rank == 1) {
        hol_open(comm, 0, &a);
        __atomic_store_n(&g_hol_adst, a.dst, __ATOMIC_RELEASE);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        CHECK_OK(bs->barrier(bs->ctx)); /* 2 */
        /* held: nothing of A's arrived */
        CHECK_OK(gpuport_channel_poll(a.ch, &ready));
        CHECK(ready == 0);
        CHECK(word_of(a.dst) == 0xeeeeeeeeeeeeeeeeull);
        CHECK_OK(bs->barrier(bs->ctx)); /* 3 */
        if (release) {
            CHECK_OK(gpuport_channel_wait(a.ch));
            hol_check_a(a.dst);
            CHECK_OK(gpuport_channel_poll(a.ch, &ready));
            CHECK(ready == 0); /* one signal */
        }
        CHECK_OK(bs->barrier(bs->ctx)); /* 4 */
        if (release) {
            hol_close(&a, GPUPORT_OK);
        } else {
            /* rank 0's answer to this close would come over the held link */
            test_short_timeout(comm, HTIMEOUT_MS);
            hol_close(&a, GPUPORT_ERR_TIMEOUT);
        }
    } else {
        hol_open(comm, 0, &b);
        CHECK_OK(bs->barrier(bs->ctx)); /* 1 */
        hol_ping_pong(&b, 0, 0, HROUNDS);
        if (release)
            hol_ping_pong(&b, 0, HROUNDS, HROUNDS);
        CHECK_OK(bs->barrier(bs->ctx)); /* 2 */
        CHECK_OK(bs->barrier(bs->ctx)); /* 3 */
        if (!release)
            hol_ping_pong(&b, 0, HROUNDS, 20);
        CHECK_OK(bs->barrier(bs->ctx)); /* 4 */
        hol_close(&b, GPUPORT_OK);
    }
    if (rank == 1 && !release) {
        /* rank 1's QP stays while rank 0 destroys: its link held to the end */
        double t0 = now_s();
        while (!__atomic_load_n(&g_hol_r0_gone, __ATOMIC_ACQUIRE) && now_s() - t0 < 60)
            usleep(1000);
    }
    if (rank == 0 && !release) {
        /* A's work at the held QP never completes: the drain stops at the
         * limit and says so */
        CHECK_STATUS(gpuport_comm_destroy(comm), GPUPORT_ERR_SHUTDOWN);
        __atomic_store_n(&g_hol_r0_gone, 1, __ATOMIC_RELEASE);
    } else {
        CHECK_OK(gpuport_comm_destroy(comm));
    }
    if (rank != 2)
        hol_free(&a);
    if (rank != 1)
        hol_free(&b);
    return 0;
}

/* The variant that never releases A: the proxy's time limit failed A,
 * named; A's destroys on both sides returned at the limit (rank 0's flush
 * of what A had at the held QP, and each side's wait for the other's
 * answer to its close); what the communicators' destroys say of the held
 * link depends on which stops first. Nothing said concerns B. */
static void hol_log_check(const char *log)
{
    char want[160];

    snprintf(want, sizeof(want), "channel %u (to rank 1): its ib transport had no room for a put",
             g_hol_aid);
    CHECK_MSG(count_of(log, want) == 1, "log lacks \"%s\":\n%s", want, log);
    snprintf(want, sizeof(want), "channel %u (to rank 1): flush did not complete", g_hol_aid);
    CHECK_MSG(count_of(log, want) == 1, "log lacks \"%s\":\n%s", want, log);
    CHECK_MSG(count_of(log, "rank 0 did not confirm within") == 1 &&
                  count_of(log, "rank 1 did not confirm within") == 1,
              "A's destroys:\n%s", log);
    for (const char *line = log; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
        if (strstr(buf, " ERROR ") || strstr(buf, " WARN "))
            CHECK_MSG(!strstr(buf, " r2 ") && !strstr(buf, "rank 2") && !strstr(buf, "channel 1"),
                      "a line about B:\n%s", buf);
        line += len + (end != NULL);
    }
}

/* ---- get, atomic_add and accumulate over the mock ---- */

/* Three ranks. Rank 0 gets from rank 1's large destination into its large
 * source; every rank adds into a counter in rank 0's destination (rank 0
 * through its loopback QP), from two threads on one channel, and
 * accumulates int64 elements into it, more than the send queue holds. */
#define RBIG ((64ull << 20) + 4096) /* rank 1's destination, rank 0's source for gets */
#define RSMALL 65536u
#define RADDS 400          /* atomic_adds per thread, two threads per rank */
#define RACC_OFF 8192u     /* the accumulated elements in rank 0's destination */
#define RACC 6000u         /* elements each rank accumulates (the send queue holds 64) */
#define RFLOAT_OFF 1024u   /* where the refused float accumulates aimed */
#define RCOUNT0 1000000    /* the counter's first value */

static unsigned char gpat(uint64_t i)
{
    return (unsigned char)(i * 131 + (i >> 12) * 7 + 5);
}

static int64_t radd(int rank, int thread, int k)
{
    return (int64_t)((uint32_t)(k + 1) * 2654435761u % 100003u) - 50000 + rank * 7 + thread;
}

/* the elements: some wrap (int64 adds are two's complement) */
static uint64_t racc(int rank, uint64_t i)
{
    if (i % 97 == 0)
        return (uint64_t)INT64_MAX - (uint64_t)rank;
    return i * 0x9e3779b97f4a7c15ull + (uint64_t)rank;
}

static uint64_t racc_init(uint64_t i)
{
    return i * 3 - 5000;
}

typedef struct {
    gpuport_channel_t ch;
    int rank, thread;
} radd_arg_t;

static void *radd_thread(void *p)
{
    const radd_arg_t *a = p;

    for (int k = 0; k < RADDS; k++)
        CHECK_OK(gpuport_channel_atomic_add(a->ch, 0, radd(a->rank, a->thread, k)));
    return NULL;
}

/* Gets of 1 byte to 64 MiB at odd offsets on both sides, each flushed and
 * compared byte by byte, with the bytes around it untouched and as many
 * RDMA reads as pieces of the port's message size. */
static void rma_gets(gpuport_channel_t ch, unsigned char *src)
{
    static const uint64_t sizes[] = {1, 2, 3, 7, 8, 9, 4095, 4096, 4097, 12289, 65537,
                                     (1u << 20) + 3, 64ull << 20};

    for (size_t n = 0; n < sizeof(sizes) / sizeof(sizes[0]); n++) {
        uint64_t size = sizes[n], soff = 1 + 2 * (n * 977 % 2000), doff = 4095 - 2 * n;
        long reads = __atomic_load_n(&mock_rma.reads, __ATOMIC_RELAXED);
        memset(src + soff - 1, 0xcc, size + 2);
        CHECK_OK(gpuport_channel_get(ch, doff, soff, size));
        CHECK_OK(gpuport_channel_flush(ch));
        for (uint64_t i = 0; i < size; i++)
            CHECK_MSG(src[soff + i] == gpat(doff + i), "get of %llu bytes from %llu to %llu: "
                      "byte %llu is 0x%02x, rank 1 holds 0x%02x", (unsigned long long)size,
                      (unsigned long long)doff, (unsigned long long)soff, (unsigned long long)i,
                      src[soff + i], gpat(doff + i));
        CHECK(src[soff - 1] == 0xcc && src[soff + size] == 0xcc);
        CHECK_MSG(__atomic_load_n(&mock_rma.reads, __ATOMIC_RELAXED) - reads ==
                      (long)ib_put_pieces(size, 4096),
                  "get of %llu bytes: %ld reads", (unsigned long long)size,
                  __atomic_load_n(&mock_rma.reads, __ATOMIC_RELAXED) - reads);
    }
}

/* A get then a signal: rank 1 overwrites what was read once it has the
 * signal; the request after the read carried the fence (the mock names any
 * that did not), so the bytes read are the old ones. Then two gets out of
 * range, refused before anything is read. */
static void rma_get_signal(int rank, gpuport_channel_t ch, unsigned char *buf)
{
    if (rank == 1) {
        CHECK_OK(gpuport_channel_wait(ch));
        memset(buf + 100, 0x77, 3 * 4096);
        return;
    }
    memset(buf + 100, 0xcc, 3 * 4096);
    CHECK_OK(gpuport_channel_get(ch, 100, 100, 3 * 4096));
    CHECK_OK(gpuport_channel_signal(ch));
    CHECK_OK(gpuport_channel_flush(ch));
    for (uint64_t i = 0; i < 3 * 4096; i++)
        CHECK(buf[100 + i] == gpat(100 + i));
    CHECK_MSG(__atomic_load_n(&mock_rma.after_read, __ATOMIC_RELAXED) == 1 &&
                  __atomic_load_n(&mock_rma.fenced, __ATOMIC_RELAXED) == 1,
              "%ld requests after a read, %ld fenced",
              __atomic_load_n(&mock_rma.after_read, __ATOMIC_RELAXED),
              __atomic_load_n(&mock_rma.fenced, __ATOMIC_RELAXED));
    CHECK(__atomic_load_n(&mock_rma.last_opcode, __ATOMIC_RELAXED) ==
              IBV_WR_ATOMIC_FETCH_AND_ADD &&
          (__atomic_load_n(&mock_rma.last_flags, __ATOMIC_RELAXED) & IBV_SEND_FENCE));
    long reads = __atomic_load_n(&mock_rma.reads, __ATOMIC_RELAXED);
    memset(buf, 0xcc, 64);
    CHECK_STATUS(gpuport_channel_get(ch, RBIG - 10, 0, 11), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_STATUS(gpuport_channel_get(ch, 0, RBIG - 10, 11), GPUPORT_ERR_OUT_OF_RANGE);
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK(__atomic_load_n(&mock_rma.reads, __ATOMIC_RELAXED) == reads);
    for (int i = 0; i < 64; i++)
        CHECK(buf[i] == 0xcc);
    CHECK_OK(gpuport_channel_status(ch));
}

/* Every rank adds into rank 0's counter from two threads and accumulates
 * RACC elements; rank 0 finds the exact sums once all have flushed. */
static void rma_adds(gpuport_bootstrap_t *bs, int rank, gpuport_channel_t ch, unsigned char *src,
                     uint64_t *dst0)
{
    pthread_t t[2];
    radd_arg_t a[2];

    for (uint64_t i = 0; i < RACC; i++) {
        uint64_t v = racc(rank, i);
        memcpy(src + 8 + 8 * i, &v, 8);
    }
    for (int k = 0; k < 2; k++) {
        a[k] = (radd_arg_t){ch, rank, k};
        CHECK(pthread_create(&t[k], NULL, radd_thread, &a[k]) == 0);
    }
    CHECK_OK(gpuport_channel_accumulate(ch, RACC_OFF, 8, RACC, GPUPORT_INT64));
    for (int k = 0; k < 2; k++)
        CHECK(pthread_join(t[k], NULL) == 0);
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(bs->barrier(bs->ctx));
    if (rank != 0)
        return;
    uint64_t want = RCOUNT0;
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 2 * RADDS; k++)
            want += (uint64_t)radd(r, k % 2, k / 2);
    CHECK_MSG(dst0[0] == want, "the counter is %lld, the adds sum to %lld", (long long)dst0[0],
              (long long)want);
    for (uint64_t i = 0; i < RACC; i++) {
        uint64_t e = racc_init(i) + racc(0, i) + racc(1, i) + racc(2, i);
        CHECK_MSG(dst0[RACC_OFF / 8 + i] == e, "element %llu is 0x%llx, not 0x%llx",
                  (unsigned long long)i, (unsigned long long)dst0[RACC_OFF / 8 + i],
                  (unsigned long long)e);
    }
    CHECK(dst0[RACC_OFF / 8 + RACC] == 0);
    /* the refused float accumulates wrote nothing */
    for (int i = 0; i < 4; i++)
        CHECK(dst0[RFLOAT_OFF / 8 + i] == 0x3f8000003f800000ull);
    printf("ib rma: %ld RDMA reads, %ld fetch-and-adds executed\n",
           __atomic_load_n(&mock_rma.reads, __ATOMIC_RELAXED),
           __atomic_load_n(&mock_rma.atomics, __ATOMIC_RELAXED));
}

/* A device without atomics: adds and gets refused (the QP has no read
 * resources either), naming IBV_ATOMIC_NONE, nothing queued; puts go on. */
static void rma_none(int rank, gpuport_channel_t ch, unsigned char *src, unsigned char *dst)
{
    if (rank == 1) {
        CHECK_OK(gpuport_channel_wait(ch));
        CHECK(dst[0] == 0x42 && dst[15] == 0x42);
        return;
    }
    CHECK_STATUS(gpuport_channel_atomic_add(ch, 0, 1), GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_STATUS(gpuport_channel_accumulate(ch, 0, 0, 2, GPUPORT_UINT64),
                 GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_STATUS(gpuport_channel_get(ch, 0, 0, 16), GPUPORT_ERR_NOT_SUPPORTED);
    memset(src, 0x42, 16);
    CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 0, 16));
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK(__atomic_load_n(&mock_rma.reads, __ATOMIC_RELAXED) == 0 &&
          __atomic_load_n(&mock_rma.atomics, __ATOMIC_RELAXED) == 0);
}

static int rma_rank(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    const mock_opts_t *o = arg;
    gpuport_comm_t comm;
    unsigned char *src, *big = NULL, *dst;
    gpuport_mem_t msrc, mbig = NULL, mdst;
    gpuport_channel_t ch[3] = {NULL, NULL, NULL}; /* rank 0: to each rank; others: ch[0] */

    CHECK_OK(gpuport_comm_create(bs, &comm));
    src = malloc(RSMALL);
    CHECK(src);
    memset(src, 0, RSMALL);
    CHECK_OK(gpuport_mem_register(comm, src, RSMALL, &msrc));
    if (rank == 1 && o->rma == 1) {
        dst = malloc(RBIG);
        CHECK(dst);
        for (uint64_t i = 0; i < RBIG; i++)
            dst[i] = gpat(i);
        CHECK_OK(gpuport_mem_register(comm, dst, RBIG, &mdst));
    } else {
        uint64_t *w;
        CHECK_OK(gpuport_mem_alloc(comm, RSMALL, (void **)&dst));
        memset(dst, 0, RSMALL);
        w = (uint64_t *)(void *)dst;
        w[0] = RCOUNT0;
        for (uint64_t i = 0; i < RACC; i++)
            w[RACC_OFF / 8 + i] = racc_init(i);
        for (int i = 0; i < 4; i++)
            w[RFLOAT_OFF / 8 + i] = 0x3f8000003f800000ull; /* 1.0f pairs */
        CHECK_OK(gpuport_mem_register(comm, dst, RSMALL, &mdst));
    }
    if (rank == 0 && o->rma == 1) {
        big = malloc(RBIG);
        CHECK(big);
        CHECK_OK(gpuport_mem_register(comm, big, RBIG, &mbig));
    }
    if (rank == 0) {
        CHECK_OK(gpuport_channel_create(comm, 1, big ? mbig : msrc, mdst, &ch[1]));
        if (size == 3) {
            CHECK_OK(gpuport_channel_create(comm, 2, msrc, mdst, &ch[2]));
            CHECK_OK(gpuport_channel_create(comm, 0, msrc, mdst, &ch[0])); /* loopback */
        }
    } else {
        CHECK_OK(gpuport_channel_create(comm, 0, msrc, mdst, &ch[0]));
    }
    CHECK_OK(bs->barrier(bs->ctx));

    if (o->rma == 2) {
        rma_none(rank, rank == 0 ? ch[1] : ch[0], src, dst);
    } else {
        if (rank == 0)
            rma_gets(ch[1], big);
        CHECK_OK(bs->barrier(bs->ctx));
        if (rank < 2)
            rma_get_signal(rank, rank == 0 ? ch[1] : ch[0], rank == 0 ? big : dst);
        if (rank == 1) {
            /* floats: refused before anything is queued */
            CHECK_STATUS(gpuport_channel_accumulate(ch[0], RFLOAT_OFF, 0, 4, GPUPORT_FLOAT32),
                         GPUPORT_ERR_NOT_SUPPORTED);
            CHECK_STATUS(gpuport_channel_accumulate(ch[0], RFLOAT_OFF, 0, 8, GPUPORT_BFLOAT16),
                         GPUPORT_ERR_NOT_SUPPORTED);
            CHECK_OK(gpuport_channel_status(ch[0]));
        }
        CHECK_OK(bs->barrier(bs->ctx));
        rma_adds(bs, rank, ch[0], src, (uint64_t *)(void *)dst);
    }
    /* every rank is done with the others' memory before any deregisters */
    CHECK_OK(bs->barrier(bs->ctx));
    for (int i = 0; i < 3; i++)
        if (ch[i])
            CHECK_OK(gpuport_channel_destroy(ch[i]));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(src);
    free(big);
    if (rank == 1 && o->rma == 1)
        free(dst);
    return 0;
}

/* The refusals, each logged once as the error its host call returned. */
static void rma_log_check(const char *log, int rma)
{
    if (rma == 1)
        CHECK_MSG(count_of(log, "ERROR") == 4 &&
                      count_of(log, "over ib: ib atomics add integers only; accumulate floats "
                                    "over tcp, or with a memory channel between ranks on one "
                                    "host; nothing was queued") == 2 &&
                      count_of(log, "does not fit") == 2,
                  "errors logged:\n%s", log);
    else
        CHECK_MSG(count_of(log, "ERROR") == 3 &&
                      count_of(log, "has no atomics (atomic_cap IBV_ATOMIC_NONE)") == 2 &&
                      strstr(log, "no RDMA READ outstanding"),
                  "errors logged:\n%s", log);
}

/* stderr of a run, to a file: a rank that fails a CHECK exits the process,
 * and then the log is what says why, so it is shown on the way out. */
static int mock_saved_stderr = -1;
static char mock_log_path[64];
static char mock_log[1 << 20];

static void mock_log_dump(void)
{
    FILE *f;
    size_t n;

    if (mock_saved_stderr < 0)
        return;
    fflush(stderr);
    dup2(mock_saved_stderr, STDERR_FILENO);
    f = fopen(mock_log_path, "r");
    while (f && (n = fread(mock_log, 1, sizeof(mock_log), f)) > 0)
        fwrite(mock_log, 1, n, stderr);
    if (f)
        fclose(f);
    unlink(mock_log_path);
}

static void mock_capture_begin(void)
{
    static int registered;
    int fd;

    snprintf(mock_log_path, sizeof(mock_log_path), "/tmp/test_ib_mock.XXXXXX");
    fd = mkstemp(mock_log_path);
    CHECK(fd >= 0);
    if (!registered++)
        atexit(mock_log_dump);
    fflush(stderr);
    mock_saved_stderr = dup(STDERR_FILENO);
    CHECK(mock_saved_stderr >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO);
    close(fd);
}

static const char *mock_capture_end(void)
{
    FILE *f;
    size_t n = 0;

    fflush(stderr);
    CHECK(dup2(mock_saved_stderr, STDERR_FILENO) == STDERR_FILENO);
    close(mock_saved_stderr);
    mock_saved_stderr = -1;
    f = fopen(mock_log_path, "r");
    if (f) {
        n = fread(mock_log, 1, sizeof(mock_log) - 1, f);
        fclose(f);
    }
    mock_log[n] = '\0';
    unlink(mock_log_path);
    return mock_log;
}

/* N of the first "1 channel(s) failed, N operation(s) lost in flight"; -1 if none */
static int lost_in_flight(const char *log)
{
    const char *p = strstr(log, "1 channel(s) failed, ");
    int n = -1;
    char tail[32];

    if (!p || sscanf(p, "1 channel(s) failed, %d %31s", &n, tail) != 2 ||
        strcmp(tail, "operation(s)") != 0)
        return -1;
    return n;
}

static void mock_run(int link_layer, int atomic_cap, const mock_opts_t *o, const char *log_has)
{
    const char *log;

    mock_config.link_layer = link_layer;
    mock_config.atomic_cap = atomic_cap;
    mock_config.max_msg = 4096;
    mock_config.fail_at = 0; /* the faulty run plants its failure below */
    mock_config.max_inline = o->no_inline ? 0 : 64;
    mock_verbs_install();
    setenv("GPUPORT_TRANSPORT", "ib", 1);
    /* a flush or destroy under TSan on a loaded 2-core machine took more than 8 s */
    setenv("GPUPORT_TIMEOUT_MS", "30000", 1);
    setenv("GPUPORT_LOG_LEVEL", "info", 1);
    mock_capture_begin();
    int failed = o->hol   ? local_run(3, hol_rank, (void *)o)
                 : o->rma ? local_run(o->rma == 1 ? 3 : 2, rma_rank, (void *)o)
                          : local_run(2, mock_rank, (void *)o);
    log = mock_capture_end();
    mock_verbs_uninstall();
    unsetenv("GPUPORT_TRANSPORT");
    unsetenv("GPUPORT_LOG_LEVEL");
    CHECK_MSG(failed == 0, "%d rank(s) failed; log:\n%s", failed, log);
    CHECK_MSG(!mock_error[0], "the mock provider refused: %s; log:\n%s", mock_error, log);
    /* every QP, CQ, registration, domain, context and list was released */
    CHECK_MSG(mock_live.ctx == 0 && mock_live.pd == 0 && mock_live.mr == 0 && mock_live.cq == 0 &&
                  mock_live.qp == 0 && mock_live.lists == 0,
              "left open: %d contexts, %d domains, %d registrations, %d CQs, %d QPs, %d lists",
              mock_live.ctx, mock_live.pd, mock_live.mr, mock_live.cq, mock_live.qp,
              mock_live.lists);
    CHECK_MSG(strstr(log, log_has), "log lacks \"%s\":\n%s", log_has, log);
    if (o->bad_trigger)
        /* and, should rank 1's close notice at destroy meet rank 0's QP
         * already gone before rank 1 began stopping, its unanswered notice */
        CHECK_MSG((count_of(log, "ERROR") == 2 ||
                   (count_of(log, "ERROR") == 3 &&
                    strstr(log, "transport retry counter exceeded"))) &&
                      strstr(log, "is outside the regions") &&
                      strstr(log, "rank 0's side of the channel failed (offset or size outside"),
                  "errors logged:\n%s", log);
    else if (o->hol == 2)
        hol_log_check(log);
    else if (o->rma)
        rma_log_check(log, o->rma);
    else if (o->faulty)
        /* rank 0's connection breaks with the planted failure; rank 1's when
         * its destroy tells rank 0 (whose QP is in the error state) that it
         * closes: its notice is not answered. The puts lost are those the
         * proxy had posted when the failure came back: the first, and up to
         * every accepted one (under load, 1 of 4 was seen) */
        CHECK_MSG(count_of(log, "ERROR") == 2 && lost_in_flight(log) >= 1 &&
                      lost_in_flight(log) <= faulty_accepted &&
                      strstr(log, "transport retry counter exceeded"),
                  "errors logged (%d put(s) accepted):\n%s", faulty_accepted, log);
    else
        CHECK_MSG(count_of(log, "ERROR") == 0, "errors logged:\n%s", log);
}

static void test_mock_data_path(void)
{
    mock_opts_t o = {.rounds = MROUNDS};

    /* RoCE with atomics: the IPv4 GID, fetch-and-add signals */
    mock_run(IBV_LINK_LAYER_ETHERNET, IBV_ATOMIC_HCA, &o, "signals by atomic fetch-and-add");
    /* InfiniBand without atomics: LID routing, signals written as counts */
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_NONE, &o,
             "signals by RDMA write of the count: this device has no atomics");
    /* a request that fails breaks its connection on this side, with the
     * completion's status */
    mock_opts_t f = {.faulty = 1};
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_HCA, &f, "remote access error");
    /* a channel failed here is reported into the peer's slot */
    mock_opts_t b = {.bad_trigger = 1};
    mock_run(IBV_LINK_LAYER_ETHERNET, IBV_ATOMIC_HCA, &b, "GID index 3: RoCE v2 with an IPv4");
    /* a device without inline data: QPs without, put_value from a registered slot */
    mock_opts_t n = {.rounds = 10, .no_inline = 1};
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_HCA, &n, "takes no inline data");
    /* a rank that destroys first, its peer alive */
    mock_opts_t a = {.alone = 1};
    alone_ms[0] = alone_ms[1] = 0;
    alone_done = 0;
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_HCA, &a, "signals by atomic fetch-and-add");
    mock_opts_t h = {.hol = 1};
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_HCA, &h, "signals by atomic fetch-and-add");
    printf("ib: B ping-pong beside a held link: %.0f rounds/s (%.0f before the hold); A had %ld "
           "work requests waiting at its QP and %u triggers parked\n",
           g_hol_rate[1], g_hol_rate[0], g_hol_posted, g_hol_parked);
    mock_opts_t h2 = {.hol = 2};
    g_hol_beside = g_hol_r0_gone = 0;
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_HCA, &h2, "signals by atomic fetch-and-add");
    printf("ib: B's puts flushed while A waited: %d\n", g_hol_beside);
    printf("ib alone: rank 1's destroy returned in %llu ms with rank 0 alive and not "
           "destroying; rank 0's, %d ms later, in %llu ms\n",
           (unsigned long long)(alone_ms[1] - 1), ALONE_LATER_MS,
           (unsigned long long)(alone_ms[0] - 1));
}

/* The mock's own checks of reads and atomics, as an HCA makes them: each
 * refused case on a fresh QP connected to itself (a failure leaves a QP in
 * the error state). */
typedef struct {
    struct ibv_cq *cq;
    struct ibv_qp *qp;
} mock_loop_t;

static void mock_loop_open(struct ibv_pd *pd, mock_loop_t *l)
{
    static const uint8_t no_gid[IB_GID_LEN];
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr a;
    ib_qp_rec_t self;
    int mask;

    l->cq = IBV(ibv_create_cq)(pd->context, 8, NULL, NULL, 0);
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ia.recv_cq = l->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 8;
    ia.cap.max_recv_wr = ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    l->qp = IBV(ibv_create_qp)(pd, &ia);
    CHECK(l->cq && l->qp);
    ib_qp_attr_init(&a, &mask, 1, 1);
    CHECK(IBV(ibv_modify_qp)(l->qp, &a, mask) == 0);
    ib_qp_rec_pack(&self, 0x11, no_gid, l->qp->qp_num, 7, IBV_MTU_4096, 1, 0, IB_LINK_LAYER_IB);
    ib_qp_attr_rtr(&a, &mask, &self, 0, 0, 1, IBV_MTU_4096, 16);
    CHECK(IBV(ibv_modify_qp)(l->qp, &a, mask) == 0);
    ib_qp_attr_rts(&a, &mask, 7, 16);
    CHECK(IBV(ibv_modify_qp)(l->qp, &a, mask) == 0);
}

static void mock_loop_close(mock_loop_t *l)
{
    CHECK(IBV(ibv_destroy_qp)(l->qp) == 0 && IBV(ibv_destroy_cq)(l->cq) == 0);
}

/* One request (an atomic adds 5), its completion's status. */
static enum ibv_wc_status mock_loop_run(mock_loop_t *l, enum ibv_wr_opcode opcode, unsigned flags,
                                        void *laddr, const struct ibv_mr *lmr, void *raddr,
                                        const struct ibv_mr *rmr)
{
    struct ibv_sge sge = {(uint64_t)(uintptr_t)laddr, 8, lmr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    struct ibv_wc wc;

    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED | flags;
    if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = (uint64_t)(uintptr_t)raddr;
        wr.wr.atomic.rkey = rmr->rkey;
        wr.wr.atomic.compare_add = 5;
    } else {
        wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)raddr;
        wr.wr.rdma.rkey = rmr->rkey;
    }
    CHECK(ibv_post_send(l->qp, &wr, &bad) == 0);
    CHECK(ibv_poll_cq(l->cq, 1, &wc) == 1);
    return wc.status;
}

static void test_mock_access(void)
{
    uint64_t far[8] = {0, 0, 0, 0, 41, 42, 43, 44}, near[8] = {0};
    struct ibv_device **list;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *noread, *all, *local, *ro;
    mock_loop_t l;
    int n;

    memset(&mock_config, 0, sizeof(mock_config));
    mock_config.link_layer = IBV_LINK_LAYER_INFINIBAND;
    mock_config.atomic_cap = IBV_ATOMIC_HCA;
    mock_config.max_msg = 4096;
    mock_verbs_install();
    list = IBV(ibv_get_device_list)(&n);
    ctx = IBV(ibv_open_device)(list[0]);
    pd = IBV(ibv_alloc_pd)(ctx);
    noread = IBV(ibv_reg_mr)(pd, far, 32, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    all = IBV(ibv_reg_mr)(pd, far + 4, 32, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                               IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    local = IBV(ibv_reg_mr)(pd, near, 32, IBV_ACCESS_LOCAL_WRITE);
    ro = IBV(ibv_reg_mr)(pd, near + 4, 32, 0);
    CHECK(noread && all && local && ro);
    mock_loop_open(pd, &l);
    CHECK(mock_loop_run(&l, IBV_WR_RDMA_READ, 0, near, local, far, noread) ==
          IBV_WC_REM_ACCESS_ERR);
    mock_loop_close(&l);
    mock_loop_open(pd, &l);
    CHECK(mock_loop_run(&l, IBV_WR_RDMA_READ, 0, near + 4, ro, far + 4, all) ==
          IBV_WC_LOC_PROT_ERR);
    mock_loop_close(&l);
    mock_loop_open(pd, &l);
    CHECK(mock_loop_run(&l, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, near, local, far, noread) ==
          IBV_WC_REM_ACCESS_ERR);
    mock_loop_close(&l);
    CHECK(far[0] == 0 && near[0] == 0 && near[4] == 0);
    /* allowed: the read copies, the add returns the old value; a request
     * after a read without the fence is named */
    mock_loop_open(pd, &l);
    CHECK(mock_loop_run(&l, IBV_WR_RDMA_READ, 0, near, local, far + 5, all) == IBV_WC_SUCCESS);
    CHECK(near[0] == 42);
    CHECK(mock_loop_run(&l, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_SEND_FENCE, near + 1, local, far + 4,
                        all) == IBV_WC_SUCCESS);
    CHECK(near[1] == 41 && far[4] == 46 && !mock_error[0]);
    CHECK(mock_loop_run(&l, IBV_WR_RDMA_READ, 0, near, local, far + 6, all) == IBV_WC_SUCCESS);
    CHECK(mock_loop_run(&l, IBV_WR_RDMA_WRITE, 0, near, local, far + 7, all) == IBV_WC_SUCCESS);
    CHECK_MSG(strstr(mock_error, "without IBV_SEND_FENCE"), "mock_error: \"%s\"", mock_error);
    CHECK(mock_rma.reads == 2 && mock_rma.atomics == 1 && mock_rma.after_read == 2 &&
          mock_rma.fenced == 1);
    mock_loop_close(&l);
    CHECK(IBV(ibv_dereg_mr)(noread) == 0 && IBV(ibv_dereg_mr)(all) == 0);
    CHECK(IBV(ibv_dereg_mr)(local) == 0 && IBV(ibv_dereg_mr)(ro) == 0);
    CHECK(IBV(ibv_dealloc_pd)(pd) == 0 && IBV(ibv_close_device)(ctx) == 0);
    IBV(ibv_free_device_list)(list);
    CHECK(mock_live.ctx == 0 && mock_live.pd == 0 && mock_live.mr == 0 && mock_live.cq == 0 &&
          mock_live.qp == 0 && mock_live.lists == 0);
    mock_verbs_uninstall();
}

/* get, atomic_add and accumulate over the mock: with atomics, and on a
 * device without, where they are refused */
static void test_mock_rma(void)
{
    mock_opts_t r = {.rma = 1};
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_HCA, &r, "signals by atomic fetch-and-add");
    mock_opts_t n = {.rma = 2};
    mock_run(IBV_LINK_LAYER_INFINIBAND, IBV_ATOMIC_NONE, &n, "this device has no atomics");
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
    /* the texts come from the library; without one, from the mock */
    int mocked = ib_verbs_load(NULL, 0) != GPUPORT_OK;
    if (mocked)
        mock_verbs_install();
    for (size_t i = 0; i < sizeof(wc) / sizeof(wc[0]); i++) {
        text = NULL;
        gpuport_status_t st = ib_wc_status(wc[i].st, &text);
        CHECK_MSG(st == wc[i].want, "wc status %d: %s", (int)wc[i].st, gpuport_status_string(st));
        CHECK(text && strcmp(text, IBV(ibv_wc_status_str)(wc[i].st)) == 0);
    }
    ib_wc_status(IBV_WC_RETRY_EXC_ERR, &text);
    CHECK_MSG(strstr(text, "retry"), "text: %s", text);
    if (mocked)
        mock_verbs_uninstall();
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
    CHECK_MSG(n == 0 && strcmp(why, none_why) == 0, "%d, \"%s\"", n, why);
}

/* The peer of select_for's rank 0: the same machine, so it answers with
 * what it was sent. */
/* the bootstrap's header before each message of a creation (bootstrap.c:
 * the sender's attempt number, padded) */
#define BS_ENVELOPE 8
static unsigned char echo_buf[512];
static size_t echo_len;

static gpuport_status_t echo_send(void *ctx, int peer, int tag, const void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag;
    CHECK(bytes <= sizeof(echo_buf));
    memcpy(echo_buf, buf, bytes);
    echo_len = bytes;
    return GPUPORT_OK;
}

static gpuport_status_t echo_recv(void *ctx, int peer, int tag, void *buf, size_t bytes)
{
    (void)ctx, (void)peer, (void)tag;
    CHECK(bytes == echo_len);
    memcpy(buf, echo_buf, bytes);
    return GPUPORT_OK;
}

static gpuport_status_t select_for(int transport, int device_regions, const char **name_p,
                                   char *why, size_t len, const char **log_p)
{
    struct gpuport_comm comm;
    gpuport_proc_rec_t procs[2];
    gpuport_conn_t *conns[2] = {NULL, NULL};
    gpuport_tl_comm_t *tc = NULL;
    gpuport_bs_session_t session;
    gpuport_status_t st;

    memset(&comm, 0, sizeof(comm));
    CHECK_OK(gpuport_config_load(&comm.config)); /* the transports' settings in place */
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        comm.tls[k].comm = &comm;
        comm.tls[k].kind = k;
        comm.tls[k].ops = gpuport_transport_ops(k);
    }
    memset(procs, 0, sizeof(procs));
    procs[0].rank = 0;
    procs[1].rank = 1;
    procs[0].host_id = procs[1].host_id = 0x42;
    comm.config.transport = transport;
    comm.rank = 0;
    comm.size = 2;
    comm.procs = procs;
    comm.conns = conns;
    comm.bs.rank = 0;
    comm.bs.size = 2;
    comm.bs.send = echo_send;
    comm.bs.recv = echo_recv;
    pthread_mutex_init(&comm.lock, NULL);
    /* selection runs inside a channel's creation with the peer (transports
     * exchange only there): a session whose attempts the echo agrees with */
    memset(&session, 0, sizeof(session));
    session.bs = &comm.bs;
    session.peer = 1;
    session.call = "gpuport_channel_create";
    session.mine = session.theirs = 1;
    comm.session = &session;
    echo_len = 0;
    capture_begin();
    st = gpuport_transport_select(&comm, 1, device_regions, &tc, why, len);
    *log_p = capture_end();
    *name_p = st == GPUPORT_OK ? tc->ops->name : NULL;
    pthread_mutex_destroy(&comm.lock);
    return st;
}

static int kind_of(const char *name)
{
    for (int k = 1; k < gpuport_transport_nkinds(); k++)
        if (strcmp(gpuport_transport_name(k), name) == 0)
            return k;
    CHECK_MSG(0, "no transport %s in the list", name);
    return -1;
}

static void test_select(void)
{
    char why[512];
    const char *name, *log;
    int devices = ib_devices_present(why, sizeof(why));

    /* auto between host regions on one host: shm, never ib */
    CHECK_OK(select_for(GPUPORT_TRANSPORT_AUTO, 0, &name, why, sizeof(why), &log));
    CHECK_MSG(strcmp(name, "shm") == 0, "auto chose %s", name);
    CHECK(log[0] == '\0' && echo_len == 0);
    if (devices) {
        printf("NOTE: RDMA devices present: forced ib is not checked to be refused\n");
        return;
    }
    /* ib forced without a device: refused with the reason, after telling
     * the peer (which would otherwise wait for this rank's QP) */
    CHECK_STATUS(select_for(kind_of("ib"), 0, &name, why, sizeof(why), &log),
                 GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(count_of(log, "ERROR") == 1 && strstr(log, "GPUPORT_TRANSPORT=ib"), "log: %s", log);
    CHECK_MSG(strstr(why, none_why) && strstr(log, none_why), "why: %s; log: %s", why, log);
    CHECK(!strstr(why, "not available in this build"));
    CHECK(echo_len == BS_ENVELOPE + sizeof(ib_reach_rec_t));
    CHECK_STATUS(select_for(kind_of("ib"), 1, &name, why, sizeof(why), &log),
                 GPUPORT_ERR_NOT_SUPPORTED);
    CHECK(strstr(why, "ib: "));
}

/* ---- libibverbs missing ---- */

/* A machine without rdma-core: libgpuport loads, and ib says why it cannot
 * be used wherever it reports (reachable, so a forced ib's refusal, and
 * gpuport_info's ib line); the other transports do not notice. */
static void test_verbs_missing(void)
{
    static const char *const soname = "libgpuport-test-no-such-verbs.so.1";
    char why[320], again[320], dev_why[256], sel_why[512], prefix[128];
    const char *name, *log;
    ib_verbs_t t;

    snprintf(prefix, sizeof(prefix), "libibverbs not found: dlopen(%s): ", soname);
    CHECK_STATUS(ib_verbs_load_from(soname, why, sizeof(why)), GPUPORT_ERR_NOT_SUPPORTED);
    /* dlerror's text follows, naming the file it could not open */
    CHECK_MSG(strncmp(why, prefix, strlen(prefix)) == 0 && strstr(why + strlen(prefix), soname),
              "why: %s", why);
    /* loaded once: what later loads report, not a second attempt */
    CHECK_STATUS(ib_verbs_load(again, sizeof(again)), GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(strcmp(again, why) == 0, "%s; then %s", why, again);
    CHECK(ib_devices_present(dev_why, sizeof(dev_why)) == 0);
    CHECK_MSG(strcmp(dev_why, why) == 0, "ib_devices_present: %s", dev_why);
    /* forced ib: unreachable with that text, after telling the peer */
    CHECK_STATUS(select_for(kind_of("ib"), 0, &name, sel_why, sizeof(sel_why), &log),
                 GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(strstr(sel_why, why) && strstr(log, prefix), "why: %s; log: %s", sel_why, log);
    CHECK_MSG(count_of(log, "ERROR") == 1 && strstr(log, "GPUPORT_TRANSPORT=ib"), "log: %s", log);
    CHECK(echo_len == BS_ENVELOPE + sizeof(ib_reach_rec_t));
    CHECK_OK(select_for(GPUPORT_TRANSPORT_AUTO, 0, &name, sel_why, sizeof(sel_why), &log));
    CHECK_MSG(strcmp(name, "shm") == 0 && log[0] == '\0', "auto chose %s; log: %s", name, log);

    /* a library that is not libibverbs: the first entry point it lacks */
    CHECK_STATUS(ib_verbs_load_from("libc.so.6", why, sizeof(why)), GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(strcmp(why, "libibverbs lacks ibv_get_device_list (version IBVERBS_1.1) in "
                          "libc.so.6") == 0, "why: %s", why);
    CHECK(ib_devices_present(dev_why, sizeof(dev_why)) == 0 && strcmp(dev_why, why) == 0);

    /* an optional entry missing is no failed load: only what needs it
     * says so (RoCE's GID choice; InfiniBand does without) */
    mock_config.link_layer = IBV_LINK_LAYER_ETHERNET;
    mock_config.atomic_cap = IBV_ATOMIC_HCA;
    mock_config.max_msg = 4096;
    mock_config.max_inline = 64;
    mock_config.fail_at = 0;
    mock_verbs_install();
    t = ib_verbs;
    t._ibv_query_gid_ex = NULL;
    ib_verbs_install(&t);
    CHECK_OK(ib_verbs_load(why, sizeof(why)));
    CHECK_STATUS(select_for(kind_of("ib"), 0, &name, sel_why, sizeof(sel_why), &log),
                 GPUPORT_ERR_NOT_SUPPORTED);
    CHECK_MSG(strstr(sel_why, "mock0:1: libibverbs lacks _ibv_query_gid_ex"), "why: %s", sel_why);
    CHECK_MSG(!mock_error[0], "the mock provider refused: %s", mock_error);
    CHECK(mock_live.ctx == 0 && mock_live.lists == 0);
    mock_verbs_uninstall();
}

int main(void)
{
    /* The checks of this machine see it through libibverbs.so.1; where it
     * cannot be loaded, ib's answer everywhere is why. */
    if (ib_verbs_load(none_why, sizeof(none_why)) == GPUPORT_OK)
        snprintf(none_why, sizeof(none_why), "%s", no_device);
    else
        printf("NOTE: %s: ib reports that in place of \"%s\"\n", none_why, no_device);
    test_record();
    test_gid();
    test_qp_attr();
    test_hca_parse();
    test_pci_affinity();
    test_port_select();
    test_pieces();
    test_reach();
    test_tdata();
    test_signal_choice();
    test_mr_path();
    test_mr_vmm();
    test_dmabuf_range();
    test_sendq_basic();
    test_sendq_partial_post();
    test_sendq_fail();
    test_sendq_room_and_wrap();
    test_sendq_rma();
    test_rma_ok();
    test_errors();
    test_devices();
    test_select();
    test_verbs_missing();
    /* last: the mock presents a device */
    test_mock_access();
    test_mock_data_path();
    test_mock_rma();
    printf("ib logic: records, GID and port choice, QP attributes, pieces, signal method, "
           "registration path, send queue, error mapping, devices, libibverbs missing\n");
    return 0;
}
