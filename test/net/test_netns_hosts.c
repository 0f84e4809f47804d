/*
 * The check of test/net/netns_mpirun.sh itself: its ranks must look like
 * processes of two hosts, to the system and to gpuport, and MPI must carry
 * data between those hosts.
 *
 * Rank 0 gathers what every rank sees of itself and checks that ranks on
 * different simulated hosts (rank % 2, as --map-by node places them) differ
 * in host name, network namespace and gpuport_host_id(), ranks on one host
 * agree, and rank r holds address r % 2 of GPUPORT_TEST_NETNS_ADDRS on
 * GPUPORT_TEST_NETNS_IFNAME. Then ranks 2k and 2k+1 swap 4 MiB, each with a
 * pattern of its own, and compare what arrived byte for byte.
 *
 *   --expect-cut  wait (30 s at most) for GPUPORT_TEST_CUT_FILE, i.e. for the
 *                 link to go down, and swap again while it is down: TCP must
 *                 deliver once netns_mpirun.sh brings it back
 *   --sleep S     then sleep S seconds, meet in a barrier and swap again
 *
 * Rank 0 prints "PASS netns-hosts"; on a failed check every rank exits 1.
 * Rank set-up, failed checks, the agreement and the pattern are
 * test/mpi/harness.h's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <linux/if_link.h>
#include <netpacket/packet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "../mpi/harness.h"
#include "hostid.h"

#define SWAP_BYTES (4u << 20)
#define CUT_WAIT_S 30.0

struct report {
    char host[64];
    char addr[INET_ADDRSTRLEN];
    uint64_t netns_dev, netns_ino;
    uint64_t host_id;
};

/* Prints a failed check; returns -1, to be or-ed into the outcome. */
#define FAIL(...) fail_at(__FILE__, __LINE__, "netns-hosts", __VA_ARGS__)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The IPv4 address of IFNAME, or "" when it has none. */
static void if_addr(const char *ifname, char *out, size_t len)
{
    struct ifaddrs *ifs, *ifa;

    out[0] = '\0';
    if (getifaddrs(&ifs) != 0)
        return;
    for (ifa = ifs; ifa; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET &&
            strcmp(ifa->ifa_name, ifname) == 0) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)ifa->ifa_addr)->sin_addr, out, len);
            break;
        }
    }
    freeifaddrs(ifs);
}

/* Bytes IFNAME sent and received so far (32-bit counters: compare differences). */
static int if_bytes(const char *ifname, uint32_t *tx, uint32_t *rx)
{
    struct ifaddrs *ifs, *ifa;
    int found = 0;

    if (getifaddrs(&ifs) != 0)
        return FAIL("getifaddrs: %s", strerror(errno));
    for (ifa = ifs; ifa; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_PACKET && ifa->ifa_data &&
            strcmp(ifa->ifa_name, ifname) == 0) {
            const struct rtnl_link_stats *st = ifa->ifa_data;

            *tx = st->tx_bytes;
            *rx = st->rx_bytes;
            found = 1;
            break;
        }
    }
    freeifaddrs(ifs);
    return found ? 0 : FAIL("no link statistics for %s", ifname);
}

static int report_self(struct report *r)
{
    const char *ifname = getenv("GPUPORT_TEST_NETNS_IFNAME");
    struct stat st;

    memset(r, 0, sizeof(*r));
    if (gethostname(r->host, sizeof(r->host) - 1) != 0)
        return FAIL("gethostname: %s", strerror(errno));
    if (stat("/proc/self/ns/net", &st) != 0)
        return FAIL("stat(/proc/self/ns/net): %s", strerror(errno));
    r->netns_dev = st.st_dev;
    r->netns_ino = st.st_ino;
    r->host_id = gpuport_host_id();
    if (!ifname)
        return FAIL("GPUPORT_TEST_NETNS_IFNAME is not set: run under test/net/netns_mpirun.sh");
    if_addr(ifname, r->addr, sizeof(r->addr));
    return 0;
}

static int check_reports(const struct report *all)
{
    const char *addrs = getenv("GPUPORT_TEST_NETNS_ADDRS");
    char want[2][INET_ADDRSTRLEN] = {{0}};
    int bad = 0;

    if (!addrs || sscanf(addrs, "%15s %15s", want[0], want[1]) != 2)
        return FAIL("GPUPORT_TEST_NETNS_ADDRS is '%s', not two addresses",
                    addrs ? addrs : "(unset)");
    for (int i = 0; i < g_size; i++) {
        const struct report *r = &all[i];

        printf("rank %d: host %s, netns %" PRIu64 ":%" PRIu64 ", host id 0x%016" PRIx64 ", %s %s\n",
               i, r->host, r->netns_dev, r->netns_ino, r->host_id,
               getenv("GPUPORT_TEST_NETNS_IFNAME"), r->addr[0] ? r->addr : "(no address)");
        if (strcmp(r->addr, want[i % 2]) != 0)
            bad |= FAIL("rank %d holds '%s', not host %c's address %s", i, r->addr,
                        'a' + i % 2, want[i % 2]);
        for (int j = 0; j < i; j++) {
            const struct report *o = &all[j];
            int same_host = i % 2 == j % 2;
            int same_name = strcmp(r->host, o->host) == 0;
            int same_ns = r->netns_dev == o->netns_dev && r->netns_ino == o->netns_ino;
            int same_id = r->host_id == o->host_id;

            if (same_name != same_host || same_ns != same_host || same_id != same_host)
                bad |= FAIL("ranks %d and %d are on %s simulated hosts, yet host names %s, "
                            "net namespaces %s, gpuport host ids %s",
                            j, i, same_host ? "one" : "two",
                            same_name ? "equal" : "differ", same_ns ? "equal" : "differ",
                            same_id ? "equal" : "differ");
        }
    }
    fflush(stdout);
    return bad;
}

/* What rank r sends in round k: a pattern of its own for every rank and round. */
static void fill_swap(unsigned char *buf, int r, int k)
{
    fill(buf, 0, SWAP_BYTES, hash4((uint64_t)r + 1, (uint64_t)k, 0, 0));
}

/* Ranks 2k and 2k+1 (on hosts a and b) swap SWAP_BYTES; an odd last rank idles. */
static int swap(int round, const char *what)
{
    const char *ifname = getenv("GPUPORT_TEST_NETNS_IFNAME");
    int peer = g_rank ^ 1;
    uint32_t tx0, rx0, tx1, rx1;
    unsigned char *out, *in, *want;
    double t0;
    int counted, bad = 0;

    if (peer >= g_size || !ifname)
        return 0;
    out = malloc(SWAP_BYTES);
    in = malloc(SWAP_BYTES);
    want = malloc(SWAP_BYTES);
    if (!out || !in || !want) {
        (void)FAIL("malloc of %u bytes", SWAP_BYTES);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    fill_swap(out, g_rank, round);
    fill_swap(want, peer, round);
    memset(in, 0, SWAP_BYTES);
    /* A failed check still swaps: the peer must not wait for nothing. */
    counted = if_bytes(ifname, &tx0, &rx0) == 0;
    t0 = now_s();
    MPI_Sendrecv(out, SWAP_BYTES, MPI_BYTE, peer, round, in, SWAP_BYTES, MPI_BYTE, peer, round,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* A send completes once the kernel holds the data; the peer's word that
     * it has received everything says the data has left through the link. */
    MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, round, NULL, 0, MPI_BYTE, peer, round, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (!counted || if_bytes(ifname, &tx1, &rx1) != 0) {
        bad = 1;
    } else if (tx1 - tx0 < SWAP_BYTES || rx1 - rx0 < SWAP_BYTES) {
        /* Other ranks of this host may add to the counters, never take away. */
        bad = FAIL("%s: %s sent %" PRIu32 " and received %" PRIu32 " bytes during a swap of %u "
                   "each way: MPI took another path", what, ifname, tx1 - tx0, rx1 - rx0,
                   SWAP_BYTES);
    }
    if (memcmp(in, want, SWAP_BYTES) != 0) {
        size_t i = 0;

        while (in[i] == want[i])
            i++;
        bad = FAIL("%s: byte %zu of %u from rank %d is 0x%02x, not 0x%02x", what, i,
                   SWAP_BYTES, peer, in[i], want[i]);
    } else if (g_rank == 0) {
        printf("swap %s: %u bytes each way with rank %d intact, %.3f s\n", what, SWAP_BYTES,
               peer, now_s() - t0);
        fflush(stdout);
    }
    free(want);
    free(in);
    free(out);
    return bad;
}

/* Waits for the cut file; its content, the time of the cut, must be recent. */
static int wait_cut(void)
{
    const char *path = getenv("GPUPORT_TEST_CUT_FILE");
    double t0 = now_s();
    long long cut_ns = 0;
    FILE *f;

    if (!path)
        return FAIL("--expect-cut, but GPUPORT_TEST_CUT_FILE is not set "
                    "(netns_mpirun.sh --cut-after)");
    while (!(f = fopen(path, "r"))) {
        if (now_s() - t0 > CUT_WAIT_S)
            return FAIL("%s did not appear within %.0f s", path, CUT_WAIT_S);
        usleep(20000);
    }
    if (fscanf(f, "%lld", &cut_ns) != 1)
        cut_ns = 0;
    fclose(f);
    if (cut_ns <= 0 || cut_ns / 1e9 > now_s() + 1 || cut_ns / 1e9 < t0 - 600)
        return FAIL("%s holds %lld, not a recent time in ns", path, cut_ns);
    if (g_rank == 0) {
        printf("link cut %.3f s ago\n", now_s() - cut_ns / 1e9);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"expect-cut", no_argument, NULL, 'c'},
        {"sleep", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    struct report me, *all = NULL;
    int expect_cut = 0, sleep_s = 0, bad = 0, passed, c;

    harness_init(&argc, &argv);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': expect_cut = 1; break;
        case 's': sleep_s = atoi(optarg); break;
        default:
            if (g_rank == 0)
                fprintf(stderr, "usage: %s [--expect-cut] [--sleep S]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (g_size < 2) {
        if (g_rank == 0)
            (void)FAIL("needs 2 ranks or more, has %d", g_size);
        MPI_Finalize();
        return 1;
    }

    bad |= report_self(&me);
    if (g_rank == 0)
        all = calloc(g_size, sizeof(*all));
    MPI_Gather(&me, sizeof(me), MPI_BYTE, all, sizeof(me), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (g_rank == 0)
        bad |= !all ? FAIL("calloc") : check_reports(all);
    free(all);

    bad |= swap(1, "at start");
    if (expect_cut) {
        bad |= wait_cut();
        bad |= swap(2, "with the link cut");
    }
    if (sleep_s > 0) {
        sleep(sleep_s);
        MPI_Barrier(MPI_COMM_WORLD);
        bad |= swap(3, "after the sleep");
    }

    passed = harness_agree(bad == 0);
    if (g_rank == 0)
        printf(passed ? "PASS netns-hosts\n" : "FAIL netns-hosts\n");
    MPI_Finalize();
    return passed ? 0 : 1;
}
