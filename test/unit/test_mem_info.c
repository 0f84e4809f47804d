/*
 * The memory query (gpuport_mem_info) against what the library does: the
 * kinds a machine without a GPU has (private host memory, a
 * gpuport_mem_alloc block) are classified and reported with their address
 * and size; every transport's verdict on them is the one channel creation
 * reaches (a channel over shm and over tcp for each pair of host kinds,
 * accepted exactly when the query says so); a region a transport refuses is
 * refused at channel creation with the query's text (a registration made
 * to look like GPU memory, so that the refusal is reachable without a GPU);
 * each transport's refusal texts for the GPU kinds; and docs/GUIDE.md's
 * "Which memory works where" table says the same as the query for the host
 * kinds.
 * GPU kinds are checked on a GPU by test/gpu/test_gpu_kinds.cu.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "testenv.h"

#define REGION 4096

static const gpuport_mem_info_tl_t *tl_of(const gpuport_mem_info_t *info, const char *name)
{
    for (uint32_t i = 0; i < info->ntransports; i++)
        if (strcmp(info->tl[i].name, name) == 0)
            return &info->tl[i];
    return NULL;
}

static void kind_strings(void)
{
    static const char *const want[] = {"none",   "host",       "host-shared",
                                       "host-pinned", "device", "device-vmm",
                                       "managed", "pool",      "pool-exportable"};

    for (int k = 0; k < (int)(sizeof(want) / sizeof(want[0])); k++)
        CHECK_MSG(strcmp(gpuport_mem_kind_string(k), want[k]) == 0, "kind %d is \"%s\"", k,
                  gpuport_mem_kind_string(k));
    CHECK(strcmp(gpuport_mem_kind_string(99), "?") == 0);
    CHECK(strcmp(gpuport_mem_kind_string(-1), "?") == 0);
}

/* One registration's description: kind, device, range, and one entry per
 * transport in the list's order, a transport that is not built saying why. */
static void check_info(gpuport_mem_t mem, int kind, void *ptr, size_t size)
{
    gpuport_mem_info_t info;
    int n = gpuport_transport_nkinds() - 1;

    memset(&info, 0x5a, sizeof(info));
    CHECK_OK(gpuport_mem_info(mem, &info));
    CHECK_MSG(info.kind == kind && info.device == -1 && info.reserved == 0,
              "kind %d (%s), device %d; expected %s on the host", info.kind,
              gpuport_mem_kind_string(info.kind), info.device, gpuport_mem_kind_string(kind));
    CHECK(info.addr == (uint64_t)(uintptr_t)ptr && info.size == size);
    CHECK_MSG(info.ntransports == (uint32_t)(n < GPUPORT_MEM_INFO_TRANSPORTS
                                                 ? n
                                                 : GPUPORT_MEM_INFO_TRANSPORTS),
              "%u transports listed, the library knows %d", info.ntransports, n);
    for (uint32_t i = 0; i < info.ntransports; i++) {
        const gpuport_mem_info_tl_t *t = &info.tl[i];
        const char *missing = gpuport_transport_missing((int)i + 1);
        CHECK_MSG(strcmp(t->name, gpuport_transport_name((int)i + 1)) == 0, "entry %u is %s", i,
                  t->name);
        CHECK(t->src_ok == 0 || t->src_ok == 1);
        CHECK(t->dst_ok == 0 || t->dst_ok == 1);
        CHECK_MSG(t->src_ok == (t->src_why[0] == '\0') && t->dst_ok == (t->dst_why[0] == '\0'),
                  "%s: a verdict and its reason disagree (%d \"%s\", %d \"%s\")", t->name,
                  t->src_ok, t->src_why, t->dst_ok, t->dst_why);
        if (missing)
            CHECK_MSG(!t->src_ok && strcmp(t->src_why, missing) == 0, "%s: %s", t->name,
                      t->src_why);
    }
    /* host memory of either kind: shm and tcp carry it both ways */
    CHECK(tl_of(&info, "shm")->src_ok && tl_of(&info, "shm")->dst_ok);
    CHECK(tl_of(&info, "tcp")->src_ok && tl_of(&info, "tcp")->dst_ok);
    if (!gpuport_transport_missing(GPUPORT_TL_KIND_CUDA_IPC)) {
        const gpuport_mem_info_tl_t *c = tl_of(&info, "cuda_ipc");
        CHECK_MSG(!c->src_ok && !c->dst_ok && strstr(c->src_why, "cuda_ipc moves GPU memory"),
                  "cuda_ipc over host memory: %d %d \"%s\"", c->src_ok, c->dst_ok, c->src_why);
    }
}

static int classify(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t mpriv, mshared, msub;
    void *priv = malloc(REGION), *shared;

    (void)rank, (void)size, (void)arg;
    CHECK(priv);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, &shared));
    CHECK_OK(gpuport_mem_register(comm, priv, REGION, &mpriv));
    CHECK_OK(gpuport_mem_register(comm, shared, REGION, &mshared));
    CHECK_OK(gpuport_mem_register(comm, (char *)shared + 512, 1024, &msub));
    check_info(mpriv, GPUPORT_MEM_KIND_HOST, priv, REGION);
    check_info(mshared, GPUPORT_MEM_KIND_HOST_SHARED, shared, REGION);
    check_info(msub, GPUPORT_MEM_KIND_HOST_SHARED, (char *)shared + 512, 1024);
    CHECK_OK(gpuport_mem_deregister(msub));
    CHECK_OK(gpuport_mem_deregister(mshared));
    CHECK_OK(gpuport_mem_deregister(mpriv));
    /* a dead registration is refused */
    {
        gpuport_mem_info_t info;
        capture_begin();
        gpuport_status_t st = gpuport_mem_info(mpriv, &info);
        const char *log = capture_end();
        CHECK_STATUS(st, GPUPORT_ERR_INVALID_ARG);
        CHECK(strstr(log, "gpuport_mem_info") != NULL);
    }
    CHECK_OK(gpuport_mem_free(comm, shared));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(priv);
    return 0;
}

/* ---- the query against channel creation ---- */

typedef struct {
    const char *transport;
} agree_case_t;

static int carried(gpuport_mem_t mem, const char *transport, int as_dst, char *why, size_t len)
{
    gpuport_mem_info_t info;
    const gpuport_mem_info_tl_t *t;

    CHECK_OK(gpuport_mem_info(mem, &info));
    t = tl_of(&info, transport);
    CHECK(t != NULL);
    snprintf(why, len, "%s", as_dst ? t->dst_why : t->src_why);
    return as_dst ? t->dst_ok : t->src_ok;
}

/* The peer's bytes, read once a wait said they are there. Its signal's
 * release and the wait's acquire touch one slot through two mappings (the
 * peer maps this rank's control segment again), which TSan cannot pair, so
 * these reads are not instrumented, as test_local_channels' are
 * (test/sanitizers/tsan.supp says why). */
__attribute__((no_sanitize_thread))
static void check_received(const char *got, int peer, int s, const char *transport,
                           gpuport_mem_t src, gpuport_mem_t dst)
{
    for (int i = 0; i < REGION; i++)
        CHECK_MSG(got[i] == (char)(i * 7 + peer * 3 + s + 1), "%s, %s to %s: byte %d is %d",
                  transport, gpuport_mem_kind_string(src->region.mem_kind),
                  gpuport_mem_kind_string(dst->region.mem_kind), i, got[i]);
}

/* Channels from each kind to each kind, both ranks in the same order: each
 * is created exactly when the query says both its regions are carried,
 * and carries the sender's bytes (filled, and the destination cleared,
 * before the creation, which the peer's put cannot precede). */
static void agree_pairs(gpuport_comm_t comm, int rank, const char *transport,
                        gpuport_mem_t srcs[2], char *sbufs[2], gpuport_mem_t dsts[2],
                        char *dbufs[2])
{
    char why[GPUPORT_MEM_INFO_WHY];

    for (int s = 0; s < 2; s++) {
        for (int d = 0; d < 2; d++) {
            gpuport_channel_t ch = NULL;
            int ok = carried(srcs[s], transport, 0, why, sizeof(why)) &&
                     carried(dsts[d], transport, 1, why, sizeof(why));
            for (int i = 0; i < REGION; i++)
                sbufs[s][i] = (char)(i * 7 + rank * 3 + s + 1);
            memset(dbufs[d], 0, REGION);
            gpuport_status_t st = gpuport_channel_create(comm, 1 - rank, srcs[s], dsts[d], &ch);
            CHECK_MSG(ok ? st == GPUPORT_OK : st != GPUPORT_OK,
                      "%s channel from %s to %s: the query says %s, creation returned %s",
                      transport, gpuport_mem_kind_string(srcs[s]->region.mem_kind),
                      gpuport_mem_kind_string(dsts[d]->region.mem_kind), ok ? "yes" : why,
                      gpuport_status_string(st));
            if (!ch)
                continue;
            CHECK(strcmp(gpuport_channel_transport(ch), transport) == 0);
            CHECK_OK(gpuport_channel_put_with_signal(ch, 0, 0, REGION));
            CHECK_OK(gpuport_channel_wait(ch));
            check_received(dbufs[d], 1 - rank, s, transport, srcs[s], dsts[d]);
            CHECK_OK(gpuport_channel_flush(ch));
            CHECK_OK(gpuport_channel_destroy(ch));
        }
    }
}

/* Rank 0's destination made to look like cudaMalloc memory: the query and
 * the refusal at channel creation say the same; the peer is told. */
static void agree_refused(gpuport_comm_t comm, int rank, const char *transport, gpuport_mem_t src,
                          gpuport_mem_t dst)
{
    char why[GPUPORT_MEM_INFO_WHY] = "";
    gpuport_channel_t ch = NULL;
    gpuport_region_t saved = dst->region;
    gpuport_status_t st;
    const char *log = "";
    int ok = 1;

    if (rank == 0) {
        dst->region.kind = GPUPORT_REGION_DEVICE;
        dst->region.mem_kind = GPUPORT_MEM_KIND_DEVICE;
        ok = carried(dst, transport, 1, why, sizeof(why));
        CHECK_MSG(!ok && why[0], "%s carries cudaMalloc memory as a destination?", transport);
        capture_begin();
    }
    st = gpuport_channel_create(comm, 1 - rank, src, dst, &ch);
    if (rank == 0) {
        log = capture_end();
        dst->region = saved;
        CHECK_STATUS(st, GPUPORT_ERR_NOT_SUPPORTED);
        CHECK_MSG(strstr(log, why) != NULL, "the refusal does not print the query's text\n  %s\n"
                  "log:\n%s", why, log);
    } else {
        CHECK_MSG(st != GPUPORT_OK, "rank 1's side of a refused channel returned %s",
                  gpuport_status_string(st));
    }
    CHECK(ch == NULL);
}

/* Sources and destinations of each host kind: [0] private, [1] shared. */
static int agree(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    agree_case_t *c = arg;
    gpuport_comm_t comm;
    gpuport_mem_t mems[4];
    char *bufs[4];

    (void)size;
    CHECK_OK(gpuport_comm_create(bs, &comm));
    for (int i = 0; i < 4; i++) {
        if (i % 2 == 0)
            CHECK((bufs[i] = malloc(REGION)) != NULL);
        else
            CHECK_OK(gpuport_mem_alloc(comm, REGION, (void **)&bufs[i]));
        CHECK_OK(gpuport_mem_register(comm, bufs[i], REGION, &mems[i]));
    }
    agree_pairs(comm, rank, c->transport, mems, bufs, mems + 2, bufs + 2);
    agree_refused(comm, rank, c->transport, mems[0], mems[2]);
    /* the communicator still makes channels after the refusal */
    agree_pairs(comm, rank, c->transport, mems, bufs, mems + 2, bufs + 2);
    for (int i = 0; i < 4; i++) {
        CHECK_OK(gpuport_mem_deregister(mems[i]));
        if (i % 2 == 0)
            free(bufs[i]);
        else
            CHECK_OK(gpuport_mem_free(comm, bufs[i]));
    }
    CHECK_OK(gpuport_comm_destroy(comm));
    return 0;
}

static void run_agree(const char *transport)
{
    agree_case_t c = {transport};

    setenv("GPUPORT_TRANSPORT", transport, 1);
    CHECK_MSG(local_run(2, agree, &c) == 0, "GPUPORT_TRANSPORT=%s", transport);
    unsetenv("GPUPORT_TRANSPORT");
}

/* ---- each transport's refusal texts, where no GPU can make the memory ---- */

static int tl_ok(int kind, const gpuport_region_t *r, int as_dst, char *why, size_t len)
{
    const gpuport_transport_ops_t *ops = gpuport_transport_ops(kind);

    why[0] = '\0';
    CHECK(ops && ops->region_ok);
    return ops->region_ok(r, as_dst, why, len);
}

static void refusal_texts(void)
{
    gpuport_region_t host = {.kind = GPUPORT_REGION_HOST, .mem_kind = GPUPORT_MEM_KIND_HOST};
    gpuport_region_t pinned = {.kind = GPUPORT_REGION_HOST,
                               .mem_kind = GPUPORT_MEM_KIND_HOST_PINNED};
    gpuport_region_t legacy = {.kind = GPUPORT_REGION_DEVICE, .mem_kind = GPUPORT_MEM_KIND_DEVICE};
    gpuport_region_t vmm = {.kind = GPUPORT_REGION_DEVICE_VMM, .npieces = 1,
                            .mem_kind = GPUPORT_MEM_KIND_DEVICE_VMM};
    gpuport_region_t vmm_private = {.kind = GPUPORT_REGION_DEVICE_VMM,
                                    .mem_kind = GPUPORT_MEM_KIND_DEVICE_VMM,
                                    .export_why = "allocated without the descriptor handle"};
    /* an exportable pool's allocation (its pool's descriptor the one piece),
     * and one of the default pool (nothing exported) */
    gpuport_region_t pool = {.kind = GPUPORT_REGION_DEVICE_POOL, .npieces = 1,
                             .mem_kind = GPUPORT_MEM_KIND_POOL_EXPORTABLE};
    gpuport_region_t pool_default = {.kind = GPUPORT_REGION_DEVICE_POOL,
                                     .mem_kind = GPUPORT_MEM_KIND_POOL,
                                     .export_why = "a pool that cannot be exported"};
    char why[GPUPORT_MEM_INFO_WHY];

    for (int d = 0; d < 2; d++) {
        CHECK(tl_ok(GPUPORT_TL_KIND_SHM, &host, d, why, sizeof(why)));
        CHECK(tl_ok(GPUPORT_TL_KIND_SHM, &pinned, d, why, sizeof(why)));
        CHECK(!tl_ok(GPUPORT_TL_KIND_SHM, &legacy, d, why, sizeof(why)) &&
              strstr(why, "shm moves host memory"));
        CHECK(!tl_ok(GPUPORT_TL_KIND_SHM, &vmm, d, why, sizeof(why)) &&
              strstr(why, "shm moves host memory"));
        CHECK(tl_ok(GPUPORT_TL_KIND_TCP, &host, d, why, sizeof(why)));
        CHECK(tl_ok(GPUPORT_TL_KIND_TCP, &pinned, d, why, sizeof(why)));
        CHECK(tl_ok(GPUPORT_TL_KIND_TCP, &vmm, d, why, sizeof(why)));
        CHECK(tl_ok(GPUPORT_TL_KIND_TCP, &vmm_private, d, why, sizeof(why)));
        CHECK(!tl_ok(GPUPORT_TL_KIND_SHM, &pool, d, why, sizeof(why)) &&
              strstr(why, "shm moves host memory"));
        CHECK(tl_ok(GPUPORT_TL_KIND_TCP, &pool, d, why, sizeof(why)));
        CHECK(tl_ok(GPUPORT_TL_KIND_TCP, &pool_default, d, why, sizeof(why)));
        CHECK_MSG(!tl_ok(GPUPORT_TL_KIND_TCP, &legacy, d, why, sizeof(why)) &&
                      strstr(why, "cudaMalloc memory") && strstr(why, "gpuport_mem_alloc_device"),
                  "tcp over cudaMalloc memory: %s", why);
    }
    if (gpuport_transport_missing(GPUPORT_TL_KIND_CUDA_IPC)) {
        printf("cuda_ipc not built: its texts not checked\n");
        return;
    }
    for (int d = 0; d < 2; d++) {
        CHECK(!tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &host, d, why, sizeof(why)) &&
              strstr(why, "this is host memory"));
        CHECK_MSG(!tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &pinned, d, why, sizeof(why)) &&
                      strstr(why, "this is pinned host memory") && strstr(why, "(shm)"),
                  "cuda_ipc over pinned memory: %s", why);
        CHECK(tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &legacy, d, why, sizeof(why)));
        CHECK(tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &vmm, d, why, sizeof(why)));
        CHECK(tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &pool, d, why, sizeof(why)));
    }
    /* pool memory peers cannot import: the same */
    CHECK(tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &pool_default, 0, why, sizeof(why)));
    CHECK_MSG(!tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &pool_default, 1, why, sizeof(why)) &&
                  strstr(why, "pool memory that cuda_ipc cannot share") &&
                  strstr(why, "a pool that cannot be exported"),
              "cuda_ipc, default-pool destination: %s", why);
    /* VMM memory peers cannot import: a source (copied here) but no destination */
    CHECK(tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &vmm_private, 0, why, sizeof(why)));
    CHECK_MSG(!tl_ok(GPUPORT_TL_KIND_CUDA_IPC, &vmm_private, 1, why, sizeof(why)) &&
                  strstr(why, "allocated without the descriptor handle"),
              "cuda_ipc, private VMM destination: %s", why);
}

/* ---- docs/GUIDE.md's table ---- */

/* The guide's cell's verdict: "yes..." carried, "no"/"**refused**" not. */
static int cell_yes(const char *cell)
{
    while (*cell == ' ')
        cell++;
    return strncmp(cell, "yes", 3) == 0;
}

/* Splits a table row into its cells (the text between '|'); returns how many. */
static int cells_of(char *line, char **cells, int max)
{
    int n = 0;
    char *p = strchr(line, '|');

    while (p && n < max) {
        char *next = strchr(p + 1, '|');
        if (!next)
            break;
        *next = '\0';
        cells[n++] = p + 1;
        p = next;
    }
    return n;
}

static int kind_named(const char *name)
{
    for (int k = 1; k < gpuport_transport_nkinds(); k++)
        if (strcmp(gpuport_transport_name(k), name) == 0)
            return k;
    return 0;
}

typedef struct {
    int kind;
    gpuport_mem_t mem;
} readme_kind_t;

/* For each built transport named in the header row, each row whose kind
 * cell is one of kinds: the cell's yes/no equals the query's verdict as
 * source and destination alike. Returns the rows compared. */
static int readme_compare(FILE *f, const readme_kind_t *kinds, int nkinds)
{
    char line[2048], *cells[16], *head[16];
    char header[2048] = "";
    int nhead = 0, rows = 0;

    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "| memory | kind |", 17) == 0) {
            snprintf(header, sizeof(header), "%s", line);
            nhead = cells_of(header, head, 16);
            continue;
        }
        if (!nhead)
            continue;
        if (line[0] != '|') {
            nhead = 0; /* the table ended */
            continue;
        }
        int n = cells_of(line, cells, 16);
        for (int k = 0; k < nkinds && n == nhead; k++) {
            char want[64];
            gpuport_mem_info_t info;
            snprintf(want, sizeof(want), " `%s` ", gpuport_mem_kind_string(kinds[k].kind));
            if (strcmp(cells[1], want) != 0)
                continue;
            CHECK_OK(gpuport_mem_info(kinds[k].mem, &info));
            for (int c = 2; c < n; c++) {
                char name[32];
                const gpuport_mem_info_tl_t *t;
                if (sscanf(head[c], " `%31[a-z_]`", name) != 1)
                    continue;
                t = tl_of(&info, name);
                if (!t || gpuport_transport_missing(kind_named(name)))
                    continue;
                CHECK_MSG(cell_yes(cells[c]) == (t->src_ok && t->dst_ok),
                          "docs/GUIDE.md says%s for %s memory over %s; the query: source %s, "
                          "destination %s",
                          cells[c], gpuport_mem_kind_string(kinds[k].kind), name,
                          t->src_ok ? "yes" : t->src_why, t->dst_ok ? "yes" : t->dst_why);
            }
            rows++;
        }
    }
    return rows;
}

/* Pinned host memory cannot be made without a GPU: a private registration
 * given its classification stands in for it (the verdicts follow from the
 * classification alone; test_gpu_kinds checks the classification). */
static int readme(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    const char *top = getenv("top_srcdir");
    char path[4096];
    gpuport_comm_t comm;
    readme_kind_t kinds[3];
    void *priv = malloc(REGION), *pinned = malloc(REGION), *shared;
    FILE *f;
    int rows;

    (void)rank, (void)size, (void)arg;
    snprintf(path, sizeof(path), "%s/docs/GUIDE.md", top ? top : ".");
    f = fopen(path, "r");
    if (!f)
        SKIP("cannot read %s (run from the source tree or set top_srcdir)", path);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, REGION, &shared));
    kinds[0].kind = GPUPORT_MEM_KIND_HOST;
    kinds[1].kind = GPUPORT_MEM_KIND_HOST_SHARED;
    kinds[2].kind = GPUPORT_MEM_KIND_HOST_PINNED;
    CHECK_OK(gpuport_mem_register(comm, priv, REGION, &kinds[0].mem));
    CHECK_OK(gpuport_mem_register(comm, shared, REGION, &kinds[1].mem));
    CHECK_OK(gpuport_mem_register(comm, pinned, REGION, &kinds[2].mem));
    kinds[2].mem->region.mem_kind = GPUPORT_MEM_KIND_HOST_PINNED;
    rows = readme_compare(f, kinds, 3);
    fclose(f);
    CHECK_MSG(rows == 3,
              "docs/GUIDE.md's memory table has %d rows of the host kinds (expected one each "
              "for host, host-shared and host-pinned)",
              rows);
    for (int k = 0; k < 3; k++)
        CHECK_OK(gpuport_mem_deregister(kinds[k].mem));
    CHECK_OK(gpuport_mem_free(comm, shared));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(priv);
    free(pinned);
    printf("docs/GUIDE.md's memory table agrees with the query for the %d host kinds\n", rows);
    return 0;
}

int main(void)
{
    testenv_clear_gpuport();
    setenv("GPUPORT_GPU", "off", 1);
    setenv("GPUPORT_TIMEOUT_MS", "20000", 1);
    kind_strings();
    refusal_texts();
    CHECK(local_run(1, classify, NULL) == 0);
    run_agree("shm");
    run_agree("tcp");
    CHECK(local_run(1, readme, NULL) == 0);
    printf("mem_info: the query agrees with channel creation over shm and tcp and with "
           "docs/GUIDE.md\n");
    return 0;
}
