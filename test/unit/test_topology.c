/*
 * Thread placement. Decisions are checked against synthetic machines in
 * test/topo (hwloc v2 XML: CPU part from hwloc's synthetic backend, PCI
 * GPUs and NICs added): cores local to each rank's GPU (and NIC), distinct
 * across all threads of all local ranks, off the application thread's PU,
 * inside the process's cpuset or falling back with a reason, overrides
 * obeyed exactly and bad ones refused naming the variable. On this machine,
 * the running proxy and flusher threads' affinity must be the decision.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "topology.h"

#define MAXPU 256

/* What a file claims; the test checks the file against it. */
typedef struct machine {
    const char *file;
    const char *summary; /* describe's first line */
    int ngpus, nnics;
    const char *gpu[8];     /* bus ids */
    const char *gpu_pus[8]; /* PUs near each */
    const char *nic[2];
    const char *nic_bus[2];
    const char *nic_pus[2];
    int (*core_of)(int pu); /* machine-wide core number */
} machine_t;

#define SOCKET0 "0-15,32-47"
#define SOCKET1 "16-31,48-63"

static int dual_core(int pu)
{
    return pu % 32; /* core c of socket s: PUs 16s+c and 32+16s+c */
}

static int single_core(int pu)
{
    return pu;
}

static const machine_t dual = {
    "dual-socket-8gpu.xml",
    "2 packages, 2 NUMA nodes, 32 cores, 64 PUs, 8 GPUs, 2 NICs",
    8,
    2,
    {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0", "0000:9d:00.0",
     "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"},
    {SOCKET0, SOCKET0, SOCKET0, SOCKET0, SOCKET1, SOCKET1, SOCKET1, SOCKET1},
    {"mlx5_0", "mlx5_1"},
    {"0000:0c:00.0", "0000:8c:00.0"},
    {SOCKET0, SOCKET1},
    dual_core,
};

static const machine_t single = {
    "single-socket-4gpu.xml",
    "1 packages, 1 NUMA nodes, 32 cores, 32 PUs, 4 GPUs, 0 NICs",
    4,
    0,
    {"0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"},
    {"0-31", "0-31", "0-31", "0-31"},
    {NULL},
    {NULL},
    {NULL},
    single_core,
};

/* ---- helpers ---- */

static int in_list(const char *list, int pu)
{
    int cpus[MAXPU], n;
    char why[128];

    n = gpuport_cpulist_parse(list, cpus, MAXPU, why, sizeof(why));
    CHECK_MSG(n >= 0, "\"%s\": %s", list, why);
    for (int i = 0; i < n; i++)
        if (cpus[i] == pu)
            return 1;
    return 0;
}

static gpuport_topology_t *load(const char *file)
{
    const char *top = getenv("top_srcdir");
    char path[4096], why[256];
    gpuport_topology_t *topo;

    snprintf(path, sizeof(path), "%s/test/topo/%s", top ? top : ".", file);
    topo = gpuport_topology_load_xml(path, why, sizeof(why));
    CHECK_MSG(topo, "%s: %s", path, why);
    return topo;
}

static gpuport_place_request_t request(const char *gpu, int rank, int size)
{
    gpuport_place_request_t req;

    memset(&req, 0, sizeof(req));
    req.gpu_bus_id = gpu;
    req.local_rank = rank;
    req.local_size = size;
    req.app_cpu = -1;
    req.proxy_cpus = "";
    req.flusher_cpus = "";
    req.bind = 1;
    return req;
}

/* A successful decision logs nothing. */
static gpuport_placement_t place(gpuport_topology_t *topo, const gpuport_place_request_t *req)
{
    gpuport_placement_t pl;
    const char *log;
    gpuport_status_t status;

    capture_begin();
    status = gpuport_place(topo, req, &pl);
    log = capture_end();
    CHECK_MSG(status == GPUPORT_OK, "place (GPU %s, local rank %d of %d) gave %s: %s",
              req->gpu_bus_id ? req->gpu_bus_id : "none", req->local_rank, req->local_size,
              gpuport_status_string(status), log);
    CHECK_MSG(log[0] == '\0', "a decision logged: %s", log);
    CHECK_MSG(pl.why[0] && !strchr(pl.why, '\n'), "why: \"%s\"", pl.why);
    return pl;
}

/* The request is refused as bad configuration, out_p untouched, with one
 * error naming the variable, its value and `problem`. */
static void expect_refused(gpuport_topology_t *topo, const gpuport_place_request_t *req,
                           const char *var, const char *value, const char *problem)
{
    gpuport_placement_t pl, untouched;
    char quoted[512];
    const char *log;
    gpuport_status_t status;

    memset(&pl, 0x5a, sizeof(pl));
    untouched = pl;
    capture_begin();
    status = gpuport_place(topo, req, &pl);
    log = capture_end();
    snprintf(quoted, sizeof(quoted), "%s=\"%s\"", var, value);
    CHECK_MSG(status == GPUPORT_ERR_INVALID_CONFIG, "%s gave %s", quoted,
              gpuport_status_string(status));
    CHECK_MSG(memcmp(&pl, &untouched, sizeof(pl)) == 0, "%s: placement written on failure", quoted);
    CHECK_MSG(count_of(log, "ERROR") == 1 && strstr(log, quoted) && strstr(log, problem),
              "%s: expected one error naming it and \"%s\": %s", quoted, problem, log);
}

/* Every rank of local_size places on `m`, rank r with GPU r % ngpus and app
 * thread on app[r] (-1: unknown); all threads of all ranks land on distinct
 * cores near their GPU, none on its rank's application PU. */
static void check_ranks(gpuport_topology_t *topo, const machine_t *m, int local_size,
                        const int *app, int with_nic)
{
    int owner[MAXPU];

    for (int i = 0; i < MAXPU; i++)
        owner[i] = -1;
    for (int r = 0; r < local_size; r++) {
        int g = r % m->ngpus, nic = -1;
        gpuport_place_request_t req = request(m->gpu[g], r, local_size);
        gpuport_placement_t pl;
        int pus[2];

        for (int n = 0; n < m->nnics && with_nic; n++)
            if (strcmp(m->nic_pus[n], m->gpu_pus[g]) == 0)
                nic = n;

        req.app_cpu = app ? app[r] : -1;
        if (nic >= 0)
            req.nic_name = m->nic[nic];
        pl = place(topo, &req);
        pus[0] = pl.proxy_cpu;
        pus[1] = pl.flusher_cpu;
        CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE, "%s, %d ranks, rank %d: level %s (%s)",
                  m->file, local_size, r, gpuport_place_level_name(pl.level), pl.why);
        CHECK_MSG(strstr(pl.why, m->gpu[g]), "why does not name the GPU: %s", pl.why);
        CHECK_MSG(nic < 0 || strstr(pl.why, m->nic[nic]), "why lacks the NIC: %s", pl.why);
        for (int t = 0; t < 2; t++) {
            int core;
            CHECK_MSG(pus[t] >= 0 && pus[t] < MAXPU, "%s rank %d: PU %d", m->file, r, pus[t]);
            CHECK_MSG(in_list(m->gpu_pus[g], pus[t]), "%s, %d ranks: rank %d's PU %d is not near "
                      "GPU %s (%s)", m->file, local_size, r, pus[t], m->gpu[g], m->gpu_pus[g]);
            CHECK_MSG(nic < 0 || in_list(m->nic_pus[nic], pus[t]), "PU %d not near NIC %s",
                      pus[t], m->nic[nic]);
            CHECK_MSG(pus[t] != req.app_cpu, "%s, %d ranks: rank %d put a thread on its "
                      "application PU %d (%s)", m->file, local_size, r, req.app_cpu, pl.why);
            core = m->core_of(pus[t]);
            CHECK_MSG(owner[core] < 0, "%s, %d ranks: rank %d's PU %d is on core %d, taken by "
                      "rank %d", m->file, local_size, r, pus[t], core, owner[core] / 2);
            owner[core] = 2 * r + t;
        }
    }
}

/* ---- the files are what they claim ---- */

static void test_describe(gpuport_topology_t *topo, const machine_t *m)
{
    char text[8192], line[256];

    gpuport_topology_describe(topo, text, sizeof(text));
    CHECK_MSG(strncmp(text, m->summary, strlen(m->summary)) == 0 && text[strlen(m->summary)] == '\n',
              "%s: summary is \"%.*s\", expected \"%s\"", m->file, (int)strcspn(text, "\n"), text,
              m->summary);
    for (int g = 0; g < m->ngpus; g++) {
        /* with NICs, each GPU names the RDMA device on its own socket */
        if (m->nnics)
            snprintf(line, sizeof(line), "\nGPU %s (cuda%d): PUs %s, nearest RDMA device %s\n",
                     m->gpu[g], g, m->gpu_pus[g], m->nic[g * m->nnics / m->ngpus]);
        else
            snprintf(line, sizeof(line), "\nGPU %s (cuda%d): PUs %s\n", m->gpu[g], g,
                     m->gpu_pus[g]);
        CHECK_MSG(strstr(text, line), "%s lacks \"%s\":\n%s", m->file, line + 1, text);
    }
    for (int n = 0; n < m->nnics; n++) {
        snprintf(line, sizeof(line), "\nNIC %s (%s): PUs %s\n", m->nic_bus[n], m->nic[n],
                 m->nic_pus[n]);
        CHECK_MSG(strstr(text, line), "%s lacks \"%s\":\n%s", m->file, line + 1, text);
    }
    /* bounded: a short buffer holds a prefix, terminated */
    memset(line, 'x', sizeof(line));
    gpuport_topology_describe(topo, line, 20);
    CHECK(strlen(line) == 19 && strncmp(line, text, 19) == 0);
}

/* ---- decisions ---- */

static void test_local_ranks(gpuport_topology_t *topo, const machine_t *m, int max_size)
{
    int app[8];

    for (int size = 1; size <= max_size; size++) {
        check_ranks(topo, m, size, NULL, 0);
        /* each application thread on the PU its rank would otherwise take */
        for (int r = 0; r < size; r++) {
            gpuport_place_request_t req = request(m->gpu[r % m->ngpus], r, size);
            app[r] = place(topo, &req).proxy_cpu;
        }
        check_ranks(topo, m, size, app, 0);
        for (int r = 0; r < size; r++) {
            gpuport_place_request_t req = request(m->gpu[r % m->ngpus], r, size);
            app[r] = place(topo, &req).flusher_cpu;
        }
        check_ranks(topo, m, size, app, 0);
        if (m->nnics)
            check_ranks(topo, m, size, app, 1);
    }
}

static void test_nic(gpuport_topology_t *topo)
{
    gpuport_place_request_t req = request(dual.gpu[0], 0, 1);
    gpuport_placement_t pl;

    /* a NIC on the other socket: the GPU's cores, and why says so */
    req.nic_name = "mlx5_1";
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && in_list(SOCKET0, pl.proxy_cpu) &&
                  in_list(SOCKET0, pl.flusher_cpu) && strstr(pl.why, "mlx5_1 is not near"),
              "%s %d %d: %s", gpuport_place_level_name(pl.level), pl.proxy_cpu, pl.flusher_cpu,
              pl.why);
    req.nic_name = "mlx5_9";
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && in_list(SOCKET0, pl.proxy_cpu) &&
                  strstr(pl.why, "NIC mlx5_9 not found"),
              "%s", pl.why);
    /* no GPU, a NIC: its cores */
    req = request(NULL, 0, 1);
    req.nic_name = "mlx5_1";
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && in_list(SOCKET1, pl.proxy_cpu) &&
                  in_list(SOCKET1, pl.flusher_cpu) && strstr(pl.why, "NIC mlx5_1"),
              "%s", pl.why);
}

static void test_allowed(gpuport_topology_t *topo)
{
    gpuport_place_request_t req = request(dual.gpu[4], 0, 1);
    gpuport_placement_t pl;
    int seen[MAXPU] = {0};

    /* confined to socket 1: a socket-1 GPU is fine */
    req.allowed = SOCKET1;
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && in_list(SOCKET1, pl.proxy_cpu) &&
                  in_list(SOCKET1, pl.flusher_cpu), "%s", pl.why);
    /* a socket-0 GPU: its cores and NUMA node are all outside; the process's cpuset */
    req.gpu_bus_id = dual.gpu[0];
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_PROCESS && in_list(SOCKET1, pl.proxy_cpu) &&
                  in_list(SOCKET1, pl.flusher_cpu) && pl.proxy_cpu != pl.flusher_cpu &&
                  strstr(pl.why, dual.gpu[0]) && strstr(pl.why, "outside the process's cpuset"),
              "%s: %s", gpuport_place_level_name(pl.level), pl.why);
    /* part of the GPU's socket */
    req.allowed = "2-5";
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && in_list("2-5", pl.proxy_cpu) &&
                  in_list("2-5", pl.flusher_cpu) && pl.proxy_cpu != pl.flusher_cpu, "%s", pl.why);
    /* 4 ranks, 4 cores of 2 PUs: 8 threads on distinct PUs, sharing cores */
    req.allowed = "0-3,32-35";
    for (int r = 0; r < 4; r++) {
        req.gpu_bus_id = dual.gpu[r];
        req.local_rank = r;
        req.local_size = 4;
        pl = place(topo, &req);
        CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && strstr(pl.why, "only 4 cores for 8 threads") &&
                      strstr(pl.why, "share cores"), "%s", pl.why);
        CHECK(in_list(req.allowed, pl.proxy_cpu) && in_list(req.allowed, pl.flusher_cpu));
        CHECK_MSG(!seen[pl.proxy_cpu]++ && !seen[pl.flusher_cpu]++, "PU shared: %s", pl.why);
    }
    /* 2 PUs for 8 threads: PUs shared, still inside */
    req.allowed = "1,17";
    req.gpu_bus_id = dual.gpu[3];
    req.local_rank = 3;
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && pl.proxy_cpu == 1 && pl.flusher_cpu == 1 &&
                  strstr(pl.why, "share PUs"), "%d %d %s", pl.proxy_cpu, pl.flusher_cpu, pl.why);
    /* no PU of the cpuset exists here */
    req.allowed = "100-101";
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_NONE && pl.proxy_cpu == -1 && pl.flusher_cpu == -1 &&
                  strstr(pl.why, "100-101"), "%s", pl.why);
}

static void test_fallbacks(gpuport_topology_t *topo, gpuport_topology_t *vm)
{
    gpuport_place_request_t req = request("0000:ff:00.0", 0, 1);
    gpuport_placement_t pl;

    /* an unknown GPU: the application thread's NUMA node, else the process's cpuset */
    req.app_cpu = 20;
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_NUMA && in_list(SOCKET1, pl.proxy_cpu) &&
                  in_list(SOCKET1, pl.flusher_cpu) &&
                  strstr(pl.why, "GPU 0000:ff:00.0 not found in the topology"),
              "%s: %s", gpuport_place_level_name(pl.level), pl.why);
    CHECK(pl.proxy_cpu != 20 && pl.flusher_cpu != 20);
    req.app_cpu = -1;
    pl = place(topo, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_PROCESS && pl.proxy_cpu >= 0 &&
                  dual.core_of(pl.proxy_cpu) != dual.core_of(pl.flusher_cpu) &&
                  strstr(pl.why, "GPU 0000:ff:00.0 not found"), "%s", pl.why);
    /* bus ids as CUDA and lspci spell them */
    req.gpu_bus_id = "0000:9D:00.0";
    CHECK(place(topo, &req).level == GPUPORT_PLACE_DEVICE);
    req.gpu_bus_id = "9d:00.0";
    pl = place(topo, &req);
    CHECK(pl.level == GPUPORT_PLACE_DEVICE && in_list(SOCKET1, pl.proxy_cpu));
    /* no GPU: inside the process's cpuset, distinct cores across ranks */
    for (int r = 0; r < 2; r++) {
        req = request(NULL, r, 2);
        req.allowed = "8-11";
        pl = place(topo, &req);
        CHECK_MSG(pl.level == GPUPORT_PLACE_PROCESS && strstr(pl.why, "no GPU") &&
                      pl.proxy_cpu == 8 + 2 * r && pl.flusher_cpu == 9 + 2 * r,
                  "rank %d: %d %d %s", r, pl.proxy_cpu, pl.flusher_cpu, pl.why);
    }
    /* GPUPORT_BIND=0 wins over everything */
    req = request(dual.gpu[0], 0, 1);
    req.bind = 0;
    req.proxy_cpus = "3";
    pl = place(topo, &req);
    CHECK(pl.level == GPUPORT_PLACE_NONE && pl.proxy_cpu == -1 && pl.flusher_cpu == -1 &&
          strcmp(pl.why, "GPUPORT_BIND=0") == 0);

    /* a VM's GPU hung on the whole machine: locality unknown, not "device" */
    req = request("0000:00:05.0", 0, 1);
    req.app_cpu = 6;
    pl = place(vm, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_NUMA && in_list("4-5,7", pl.proxy_cpu) &&
                  in_list("4-5,7", pl.flusher_cpu) && strstr(pl.why, "no known locality"),
              "%s: %d %d %s", gpuport_place_level_name(pl.level), pl.proxy_cpu, pl.flusher_cpu,
              pl.why);
    req.nic_name = "mlx5_0"; /* on package 1 */
    req.app_cpu = -1;
    pl = place(vm, &req);
    CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && in_list("4-7", pl.proxy_cpu) &&
                  in_list("4-7", pl.flusher_cpu), "%s", pl.why);

    /* a request that makes no sense */
    req = request(NULL, 2, 2);
    capture_begin();
    CHECK_STATUS(gpuport_place(topo, &req, &pl), GPUPORT_ERR_INVALID_ARG);
    CHECK(strstr(capture_end(), "local rank 2 of 2"));
}

static void test_overrides(gpuport_topology_t *topo)
{
    static const char *const garbage[] = {"0-", "a", "1,,2", "0 1", "3-1"};
    gpuport_place_request_t req;
    gpuport_placement_t pl;
    int owner[MAXPU];

    for (int r = 0; r < 4; r++) {
        req = request(dual.gpu[r], r, 4);
        req.app_cpu = 32 + r; /* the user's word stands */
        req.proxy_cpus = "32,33,34,35";
        req.flusher_cpus = "47,46,45,44";
        pl = place(topo, &req);
        CHECK_MSG(pl.level == GPUPORT_PLACE_OVERRIDE && pl.proxy_cpu == 32 + r &&
                      pl.flusher_cpu == 47 - r, "rank %d: %d %d %s", r, pl.proxy_cpu,
                  pl.flusher_cpu, pl.why);
    }
    /* one override: the other thread by the rules, around every rank's override */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < MAXPU; i++)
            owner[i] = -1;
        for (int r = 0; r < 4; r++) {
            int fixed, ruled;
            req = request(dual.gpu[r], r, 4);
            *(pass ? &req.flusher_cpus : &req.proxy_cpus) = "0-3";
            pl = place(topo, &req);
            fixed = pass ? pl.flusher_cpu : pl.proxy_cpu;
            ruled = pass ? pl.proxy_cpu : pl.flusher_cpu;
            CHECK_MSG(pl.level == GPUPORT_PLACE_DEVICE && fixed == r &&
                          strstr(pl.why, pass ? "GPUPORT_FLUSHER_CPUS" : "GPUPORT_PROXY_CPUS"),
                      "%s", pl.why);
            CHECK_MSG(in_list(SOCKET0, ruled) && dual.core_of(ruled) > 3 &&
                          owner[dual.core_of(ruled)] < 0, "rank %d: %d (%s)", r, ruled, pl.why);
            owner[dual.core_of(ruled)] = r;
        }
    }

    req = request(dual.gpu[2], 2, 4);
    req.proxy_cpus = "0,1,2,999";
    expect_refused(topo, &req, "GPUPORT_PROXY_CPUS", "0,1,2,999", "PU 999 does not exist");
    req.proxy_cpus = "0,1";
    expect_refused(topo, &req, "GPUPORT_PROXY_CPUS", "0,1", "2 PUs for 4 local ranks");
    req.proxy_cpus = "";
    req.flusher_cpus = "16,17,0,19";
    req.allowed = SOCKET1;
    expect_refused(topo, &req, "GPUPORT_FLUSHER_CPUS", "16,17,0,19", "PU 0, local rank 2's, is "
                   "outside this process's cpuset");
    /* other ranks' entries may lie outside this process's cpuset */
    req.local_rank = 3;
    pl = place(topo, &req);
    CHECK(pl.flusher_cpu == 19 && in_list(SOCKET1, pl.proxy_cpu));
    req.allowed = NULL;
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        req.flusher_cpus = garbage[i];
        expect_refused(topo, &req, "GPUPORT_FLUSHER_CPUS", garbage[i], "");
    }
}

/* ---- cpu lists ---- */

static void test_cpulist(void)
{
    static const struct {
        const char *text;
        int n;
        int cpus[6];
    } good[] = {
        {"", 0, {0}},
        {"0", 1, {0}},
        {"0-3,8", 5, {0, 1, 2, 3, 8}},
        {"10-11,3,3", 4, {10, 11, 3, 3}},
        {"5-5", 1, {5}},
        {"24,16,8,0", 4, {24, 16, 8, 0}},
    };
    static const char *const bad[] = {"a", "-1", "1-", "3-1", ",1", "1,", "1,,2", "1 2", " 1",
                                      "1;2", "0x2", "1-2-3", "99999999999", "+1"};
    int cpus[8];
    char why[128];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        int n = gpuport_cpulist_parse(good[i].text, cpus, 8, why, sizeof(why));
        CHECK_MSG(n == good[i].n, "\"%s\": %d", good[i].text, n);
        CHECK(memcmp(cpus, good[i].cpus, (size_t)n * sizeof(int)) == 0);
        CHECK(gpuport_cpulist_parse(good[i].text, NULL, 8, why, sizeof(why)) == n);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        CHECK_MSG(gpuport_cpulist_parse(bad[i], cpus, 8, why, sizeof(why)) == -1 && why[0],
                  "\"%s\" accepted", bad[i]);
    }
    /* the limit counts expanded entries, and nothing is written past it */
    cpus[3] = -7;
    CHECK(gpuport_cpulist_parse("0-2", cpus, 3, why, sizeof(why)) == 3);
    CHECK(gpuport_cpulist_parse("0-3", cpus, 3, why, sizeof(why)) == -1 && strstr(why, "3"));
    CHECK(gpuport_cpulist_parse("0,1,2,3", cpus, 3, why, sizeof(why)) == -1);
    CHECK(cpus[3] == -7);
    CHECK(gpuport_cpulist_parse("0-2147483647", NULL, GPUPORT_CPULIST_MAX, why, sizeof(why)) == -1);
    CHECK(gpuport_cpulist_parse(NULL, cpus, 3, why, sizeof(why)) == -1);
}

/* ---- this machine: the running threads are where the decision says ---- */

typedef struct {
    const char *expect_level; /* NULL: any */
    int capture;              /* one rank: keep what creation logs in log */
    char log[4096];
} real_opts_t;

static int cpu_only(const cpu_set_t *set, int cpu)
{
    return CPU_COUNT(set) == 1 && CPU_ISSET(cpu, set);
}

/* Without a GPU the flusher thread starts at its first work: a put of
 * GPUPORT_SHM_ASYNC_MIN (default 256 KiB) to this rank itself gives it
 * some. Then it has placed itself (it binds before anything else). */
static void start_flusher(gpuport_comm_t comm)
{
    const uint64_t size = 256u << 10;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    void *src, *dst;

    if (atomic_load(&comm->proxy.flusher.running))
        return;
    CHECK(comm->gpu_device < 0);
    CHECK_OK(gpuport_mem_alloc(comm, size, &src));
    CHECK_OK(gpuport_mem_alloc(comm, size, &dst));
    CHECK_OK(gpuport_mem_register(comm, src, size, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, size, &mdst));
    CHECK_OK(gpuport_channel_create(comm, gpuport_comm_rank(comm), msrc, mdst, &ch));
    CHECK_OK(gpuport_channel_put(ch, 0, 0, size));
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_MSG(atomic_load(&comm->proxy.flusher.running),
              "a %llu-byte put over %s did not start the flusher",
              (unsigned long long)size, gpuport_channel_transport(ch));
    while (!atomic_load(&comm->proxy.flusher.ready))
        sched_yield();
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_mem_free(comm, src));
    CHECK_OK(gpuport_mem_free(comm, dst));
}

static int check_threads(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    real_opts_t *o = arg;
    gpuport_comm_t comm;
    cpu_set_t mine, proxy, flusher;
    gpuport_placement_t *pl;
    gpuport_status_t status;

    (void)size;
    CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0);
    if (o->capture)
        capture_begin();
    status = gpuport_comm_create(bs, &comm);
    if (o->capture)
        snprintf(o->log, sizeof(o->log), "%s", capture_end());
    CHECK_OK(status);
    pl = &comm->placement;
    start_flusher(comm);
    CHECK(pthread_getaffinity_np(comm->proxy.thread, sizeof(proxy), &proxy) == 0);
    CHECK(pthread_getaffinity_np(comm->proxy.flusher.thread, sizeof(flusher), &flusher) == 0);
    if (o->expect_level)
        CHECK_MSG(strcmp(gpuport_place_level_name(pl->level), o->expect_level) == 0,
                  "rank %d: level %s, expected %s (%s)", rank,
                  gpuport_place_level_name(pl->level), o->expect_level, pl->why);
    if (pl->level == GPUPORT_PLACE_NONE) {
        CHECK(pl->proxy_cpu == -1 && pl->flusher_cpu == -1);
        CHECK_MSG(CPU_EQUAL(&proxy, &mine) && CPU_EQUAL(&flusher, &mine),
                  "rank %d: unbound threads' affinity differs from the process's", rank);
    } else {
        CHECK_MSG(cpu_only(&proxy, pl->proxy_cpu), "rank %d: proxy placed on PU %d, runs on "
                  "%d PUs (%s)", rank, pl->proxy_cpu, CPU_COUNT(&proxy), pl->why);
        CHECK_MSG(cpu_only(&flusher, pl->flusher_cpu), "rank %d: flusher placed on PU %d, runs "
                  "on %d PUs (%s)", rank, pl->flusher_cpu, CPU_COUNT(&flusher), pl->why);
        CHECK(CPU_ISSET(pl->proxy_cpu, &mine) && CPU_ISSET(pl->flusher_cpu, &mine));
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

static void run_real(const char *level)
{
    real_opts_t o = {level, 0, ""};
    CHECK(local_run(1, check_threads, &o) == 0);
}

static void test_real_machine(void)
{
    gpuport_topology_t *topo;
    char why[256], text[4096], list[64];
    cpu_set_t mine;
    int first = -1, second = -1, cpus[MAXPU];
    real_opts_t opts = {NULL, 1, ""};
    const char *line;

    topo = gpuport_topology_load(why, sizeof(why));
    if (!topo) {
        printf("SKIP this machine: its topology cannot be read: %s\n", why);
        return;
    }
    gpuport_topology_describe(topo, text, sizeof(text));
    printf("this machine:\n%s", text);
    CHECK(gpuport_topology_process_cpus(topo, list, sizeof(list)) == 0 && list[0]);
    CHECK(gpuport_cpulist_parse(list, cpus, MAXPU, why, sizeof(why)) > 0);
    CHECK(gpuport_topology_current_cpu(topo) >= 0);
    CHECK(gpuport_topology_process_cpus(topo, list, 1) == -1);
    gpuport_topology_free(topo);

    /* the decision, one line at info level, and the threads on it */
    setenv("GPUPORT_LOG_LEVEL", "info", 1);
    CHECK(local_run(1, check_threads, &opts) == 0);
    setenv("GPUPORT_LOG_LEVEL", "warn", 1);
    line = strstr(opts.log, "placement ");
    CHECK_MSG(count_of(opts.log, "placement ") == 1 && strstr(line, "proxy PU ") &&
                  strstr(line, "flusher PU ") && strstr(line, "local rank 0 of 1"),
              "placement log: %s", opts.log);
    printf("%.*s\n", (int)strcspn(line, "\n"), line);
    opts.capture = 0;
    CHECK(local_run(2, check_threads, &opts) == 0);

    CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0);
    for (int c = 0; c < CPU_SETSIZE && second < 0; c++) {
        if (CPU_ISSET(c, &mine)) {
            if (first < 0)
                first = c;
            else
                second = c;
        }
    }
    if (second < 0) {
        printf("SKIP overrides on this machine: the process may run on 1 PU only\n");
    } else {
        char p[16], f[16];
        snprintf(p, sizeof(p), "%d", first);
        snprintf(f, sizeof(f), "%d", second);
        setenv("GPUPORT_PROXY_CPUS", p, 1);
        setenv("GPUPORT_FLUSHER_CPUS", f, 1);
        run_real("override");
        unsetenv("GPUPORT_PROXY_CPUS");
        unsetenv("GPUPORT_FLUSHER_CPUS");
    }
    setenv("GPUPORT_BIND", "0", 1);
    run_real("none");
    unsetenv("GPUPORT_BIND");
}

/* The RDMA device nearest each GPU, for the ib transport: on the two-socket
 * machine mlx5_0 sits on socket 0 with GPUs 0-3, mlx5_1 on socket 1 with
 * GPUs 4-7, whatever order the names come in; names not in the topology are
 * skipped; an unknown GPU or no known name gives -1 with the reason. */
static void test_nearest_device(gpuport_topology_t *d, gpuport_topology_t *s)
{
    static const char *const fwd[] = {"mlx5_0", "mlx5_1"};
    static const char *const rev[] = {"nosuch0", "mlx5_1", "mlx5_0"};
    static const char *const none[] = {"nosuch0", "nosuch1"};
    char why[256];

    for (int g = 0; g < dual.ngpus; g++) {
        const char *want = g < 4 ? "mlx5_0" : "mlx5_1";
        int i = gpuport_topology_nearest_device(d, dual.gpu[g], fwd, 2, why, sizeof(why));
        CHECK_MSG(i >= 0 && strcmp(fwd[i], want) == 0, "GPU %s: got %d (%s)", dual.gpu[g], i,
                  why);
        CHECK_MSG(strstr(why, want) && strstr(why, dual.gpu[g]), "why: %s", why);
        i = gpuport_topology_nearest_device(d, dual.gpu[g], rev, 3, why, sizeof(why));
        CHECK_MSG(i >= 0 && strcmp(rev[i], want) == 0, "GPU %s (reversed): got %d (%s)",
                  dual.gpu[g], i, why);
        CHECK_MSG(strstr(why, "2 of 3 devices"), "why: %s", why);
    }
    CHECK(gpuport_topology_nearest_device(d, dual.gpu[0], none, 2, why, sizeof(why)) == -1);
    CHECK_MSG(strstr(why, "none of the 2"), "why: %s", why);
    CHECK(gpuport_topology_nearest_device(d, "0000:ee:00.0", fwd, 2, why, sizeof(why)) == -1);
    CHECK_MSG(strstr(why, "0000:ee:00.0") && strstr(why, "not in the topology"), "why: %s", why);
    /* the one-socket machine has no NIC at all */
    CHECK(gpuport_topology_nearest_device(s, single.gpu[0], fwd, 2, why, sizeof(why)) == -1);
    CHECK(gpuport_topology_nearest_device(NULL, dual.gpu[0], fwd, 2, why, sizeof(why)) == -1);
}

int main(void)
{
    gpuport_topology_t *d, *s, *vm;
    char why[256];

    gpuport_log_set_level(GPUPORT_LOG_WARN);
    test_cpulist();
    CHECK(gpuport_topology_load_xml("/nonexistent/topo.xml", why, sizeof(why)) == NULL &&
          strstr(why, "/nonexistent/topo.xml"));
    d = load(dual.file);
    s = load(single.file);
    vm = load("dual-socket-vm.xml");
    test_describe(d, &dual);
    test_describe(s, &single);
    test_local_ranks(d, &dual, 8);
    test_local_ranks(s, &single, 4);
    test_nic(d);
    test_nearest_device(d, s);
    test_allowed(d);
    test_fallbacks(d, vm);
    test_overrides(d);
    gpuport_topology_free(d);
    gpuport_topology_free(s);
    gpuport_topology_free(vm);
    test_real_machine();
    printf("topology: all checks passed\n");
    return 0;
}
