/*
 * Every kind of memory an application can register, on a GPU: each is
 * allocated the way applications do (cudaHostAlloc, malloc +
 * cudaHostRegister, cudaMallocManaged, cudaMalloc, gpuport_mem_alloc_device,
 * the application's cuMemCreate, cudaMallocAsync's default pool, a pool made
 * with the POSIX descriptor handle type), registered, and checked against
 * what gpuport_mem_info says (kind, device, each transport's verdict) or
 * against the refusal (managed memory: GPUPORT_ERR_NOT_SUPPORTED, a message
 * naming the kind and what to allocate instead). Then each kind
 * docs/GUIDE.md's table says a transport carries moves bytes both ways at
 * once over a channel of that transport (a kernel's put_with_signal and wait), every
 * byte of each destination checked: pinned host memory over shm and tcp,
 * cudaMalloc over cuda_ipc, both VMM kinds and the exportable pool over
 * cuda_ipc and tcp, the default pool over tcp. The default pool as a
 * cuda_ipc destination is refused on both sides, the message saying how to
 * make an exportable pool; one exportable-pool allocation serves a cuda_ipc
 * and a tcp channel at once (registered in a communicator of each).
 * docs/GUIDE.md's table rows for these kinds are compared with the same
 * verdicts.
 * Two processes (fork + socketpair bootstrap; GPUPORT_TEST_ONE_GPU=1 puts
 * both on GPU 0).
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "gpu_pair.h"
#include "gpuport/gpuport_device.h"
extern "C" {
#include "capture.h"
}

#define REGION (2ull << 20)

/* The kinds, as this test allocates them. */
enum {
    K_HOST_ALLOC,
    K_HOST_REGISTER,
    K_MANAGED,
    K_CUDAMALLOC,
    K_VMM,
    K_APPVMM,
    K_POOL_DEFAULT,
    K_POOL_EXPORTABLE,
    K_COUNT
};

static const char *const names[K_COUNT] = {
    "cudaHostAlloc",     "cudaHostRegister",        "cudaMallocManaged",
    "cudaMalloc",        "gpuport_mem_alloc_device", "application VMM (cuMemCreate)",
    "cudaMallocAsync (default pool)", "cudaMallocFromPoolAsync (exportable pool)"};

/* What gpuport must say of each: the kind (0: refused at registration, with
 * `refusal` in the message) and whether shm, cuda_ipc and tcp carry it (1:
 * as source and destination; SRC_ONLY: as a source, the destination
 * refused with `dst_refusal` in the transport's text). */
#define SRC_ONLY 2
typedef struct expect {
    int kind;
    const char *refusal;
    int shm, cuda_ipc, tcp;
    const char *dst_refusal;
} expect_t;

static const expect_t expected[K_COUNT] = {
    {GPUPORT_MEM_KIND_HOST_PINNED, NULL, 1, 0, 1},
    {GPUPORT_MEM_KIND_HOST_PINNED, NULL, 1, 0, 1},
    {0, "managed memory (cudaMallocManaged)", 0, 0, 0},
    {GPUPORT_MEM_KIND_DEVICE, NULL, 0, 1, 0},
    {GPUPORT_MEM_KIND_DEVICE_VMM, NULL, 0, 1, 1},
    {GPUPORT_MEM_KIND_DEVICE_VMM, NULL, 0, 1, 1},
    {GPUPORT_MEM_KIND_POOL, NULL, 0, SRC_ONLY, 1, "cudaMemHandleTypePosixFileDescriptor"},
    {GPUPORT_MEM_KIND_POOL_EXPORTABLE, NULL, 0, 1, 1},
};

typedef struct buf {
    void *p;
    cudaMemPool_t pool;
} buf_t;

static int is_host(int k)
{
    return k == K_HOST_ALLOC || k == K_HOST_REGISTER;
}

static void alloc_kind(gpuport_comm_t comm, int k, buf_t *b)
{
    memset(b, 0, sizeof(*b));
    switch (k) {
    case K_HOST_ALLOC: CUDA_CHECK(cudaHostAlloc(&b->p, REGION, cudaHostAllocDefault)); break;
    case K_HOST_REGISTER:
        b->p = aligned_alloc(4096, REGION);
        CHECK(b->p != NULL);
        CUDA_CHECK(cudaHostRegister(b->p, REGION, cudaHostRegisterDefault));
        break;
    case K_MANAGED: CUDA_CHECK(cudaMallocManaged(&b->p, REGION)); break;
    case K_CUDAMALLOC: CUDA_CHECK(cudaMalloc(&b->p, REGION)); break;
    case K_VMM: CHECK_OK(gpuport_mem_alloc_device(comm, REGION, &b->p)); break;
    case K_APPVMM: {
        size_t size = REGION;
        b->p = gpu_appvmm_alloc(&size, 1, 1);
        break;
    }
    case K_POOL_DEFAULT:
        CUDA_CHECK(cudaMallocAsync(&b->p, REGION, 0));
        CUDA_CHECK(cudaStreamSynchronize(0));
        break;
    case K_POOL_EXPORTABLE: {
        cudaMemPoolProps props;
        int dev = 0;
        memset(&props, 0, sizeof(props));
        CUDA_CHECK(cudaGetDevice(&dev));
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = dev;
        CUDA_CHECK(cudaMemPoolCreate(&b->pool, &props));
        CUDA_CHECK(cudaMallocFromPoolAsync(&b->p, REGION, b->pool, 0));
        CUDA_CHECK(cudaStreamSynchronize(0));
        break;
    }
    }
}

static void free_kind(gpuport_comm_t comm, int k, buf_t *b)
{
    switch (k) {
    case K_HOST_ALLOC: CUDA_CHECK(cudaFreeHost(b->p)); break;
    case K_HOST_REGISTER:
        CUDA_CHECK(cudaHostUnregister(b->p));
        free(b->p);
        break;
    case K_MANAGED:
    case K_CUDAMALLOC: CUDA_CHECK(cudaFree(b->p)); break;
    case K_VMM: CHECK_OK(gpuport_mem_free(comm, b->p)); break;
    case K_APPVMM: gpu_appvmm_free(b->p); break;
    case K_POOL_DEFAULT:
    case K_POOL_EXPORTABLE:
        CUDA_CHECK(cudaFreeAsync(b->p, 0));
        CUDA_CHECK(cudaStreamSynchronize(0));
        if (b->pool)
            CUDA_CHECK(cudaMemPoolDestroy(b->pool));
        break;
    }
}

static const gpuport_mem_info_tl_t *tl_of(const gpuport_mem_info_t *info, const char *name)
{
    for (uint32_t i = 0; i < info->ntransports; i++)
        if (strcmp(info->tl[i].name, name) == 0)
            return &info->tl[i];
    return NULL;
}

static void check_verdict(const gpuport_mem_info_t *info, const char *tl, int want, int k)
{
    const gpuport_mem_info_tl_t *t = tl_of(info, tl);
    int src = want != 0, dst = want == 1;
    CHECK_MSG(t != NULL, "%s: %s not listed", names[k], tl);
    CHECK_MSG(t->src_ok == src && t->dst_ok == dst,
              "%s over %s: source %d (%s), destination %d (%s); expected %d and %d", names[k],
              tl, t->src_ok, t->src_why, t->dst_ok, t->dst_why, src, dst);
    if (want == SRC_ONLY)
        CHECK_MSG(strstr(t->dst_why, expected[k].dst_refusal),
                  "%s over %s: the destination's refusal does not name \"%s\": %s", names[k],
                  tl, expected[k].dst_refusal, t->dst_why);
}

/* Every kind registered (or refused) and described. */
static void classify(gpuport_bootstrap_t *bs)
{
    gpuport_comm_t comm;
    int dev = 0;

    CUDA_CHECK(cudaGetDevice(&dev));
    CHECK_OK(gpuport_comm_create(bs, &comm));
    for (int k = 0; k < K_COUNT; k++) {
        const expect_t *e = &expected[k];
        gpuport_mem_info_t info;
        gpuport_mem_t mem = NULL;
        gpuport_status_t st;
        const char *log;
        buf_t b;

        alloc_kind(comm, k, &b);
        capture_begin();
        st = gpuport_mem_register(comm, b.p, REGION, &mem);
        log = capture_end();
        if (!e->kind) {
            CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED && mem == NULL,
                      "%s registered: %s (expected a refusal)", names[k],
                      gpuport_status_string(st));
            CHECK_MSG(strstr(log, e->refusal) && strstr(log, "gpuport_mem_alloc"),
                      "%s: the refusal names neither \"%s\" nor the alternative:\n%s", names[k],
                      e->refusal, log);
            free_kind(comm, k, &b);
            continue;
        }
        CHECK_MSG(st == GPUPORT_OK, "%s: %s\n%s", names[k], gpuport_status_string(st), log);
        CHECK_OK(gpuport_mem_info(mem, &info));
        CHECK_MSG(info.kind == e->kind, "%s classified %s, expected %s", names[k],
                  gpuport_mem_kind_string(info.kind), gpuport_mem_kind_string(e->kind));
        CHECK_MSG(info.device == (is_host(k) ? -1 : dev), "%s: device %d (GPU %d)", names[k],
                  info.device, dev);
        CHECK(info.addr == (uint64_t)(uintptr_t)b.p && info.size == REGION);
        check_verdict(&info, "shm", e->shm, k);
        check_verdict(&info, "cuda_ipc", e->cuda_ipc, k);
        check_verdict(&info, "tcp", e->tcp, k);
        if (bs->rank == 0)
            printf("%-42s %-12s device %2d: shm %d, cuda_ipc %d, tcp %d\n", names[k],
                   gpuport_mem_kind_string(info.kind), info.device, e->shm, e->cuda_ipc, e->tcp);
        CHECK_OK(gpuport_mem_deregister(mem));
        free_kind(comm, k, &b);
    }
    CHECK_OK(gpuport_comm_destroy(comm));
}

/* ---- docs/GUIDE.md's table ---- */

/* The table row of each allocation, by the start of its first cell. */
static const char *const readme_row[K_COUNT] = {
    "`cudaHostAlloc`", "`cudaHostAlloc`", "`cudaMallocManaged`", "`cudaMalloc` |",
    "`gpuport_mem_alloc_device`", "your VMM memory made with `", "`cudaMallocAsync`",
    "`cudaMallocFromPoolAsync`"};

/* A transport cell's verdict: "yes..." carried, anything else not. */
static int cell_yes(const char *row, int column)
{
    const char *p = row;

    for (int c = 0; p && c < column; c++)
        p = strchr(p + 1, '|');
    if (!p)
        return -1;
    while (*++p == ' ')
        ;
    return strncmp(p, "yes", 3) == 0;
}

/* Each kind's row of "Which memory works where" says of shm, cuda_ipc and
 * tcp (columns 2, 3 and 4 after the memory and the kind) what classify()
 * found the query says. Rank 0 only; no docs/GUIDE.md (a run outside the
 * source tree): said, not failed. */
static void readme_agrees(void)
{
    const char *top = getenv("top_srcdir");
    char path[4096], line[4096];
    int found[K_COUNT] = {0};
    FILE *f;

    snprintf(path, sizeof(path), "%s/docs/GUIDE.md", top ? top : ".");
    f = fopen(path, "r");
    if (!f) {
        printf("docs/GUIDE.md not found at %s: its table not compared\n", path);
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        for (int k = 0; k < K_COUNT; k++) {
            const expect_t *e = &expected[k];
            /* a source-only cell reads "as a source yes; ..." and so not "yes" */
            const int want[3] = {e->shm == 1, e->cuda_ipc == 1, e->tcp == 1};
            if (strncmp(line, "| ", 2) || strncmp(line + 2, readme_row[k], strlen(readme_row[k])))
                continue;
            found[k]++;
            for (int t = 0; t < 3; t++)
                CHECK_MSG(cell_yes(line, 2 + t) == want[t],
                          "docs/GUIDE.md's row for %s says %s in column %d; the query says %s",
                          names[k],
                          cell_yes(line, 2 + t) ? "yes" : "no", 2 + t, want[t] ? "yes" : "no");
        }
    }
    fclose(f);
    for (int k = 0; k < K_COUNT; k++)
        CHECK_MSG(found[k] == 1, "docs/GUIDE.md's memory table has %d rows for %s (expected 1)",
                  found[k], names[k]);
    printf("docs/GUIDE.md's memory table agrees with the query for every GPU kind\n");
}

/* ---- bytes over channels ---- */

static int *g_rc;

__global__ void k_put_wait(gpuport_port_channel_dev_t ch, uint64_t size, int *rc)
{
    rc[0] = gpuport_put_with_signal(&ch, 0, 0, size);
    rc[1] = rc[0] ? rc[0] : gpuport_wait(&ch);
}

static unsigned char pat(int who, uint64_t i)
{
    return (unsigned char)(((i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(who + 1) * 31) >> 56);
}

/* Host staging: the pattern written to src, zeros to dst, whatever the kind
 * (cudaMemcpy reaches every one of them). */
static void fill(void *src, void *dst, unsigned char *stage, int rank)
{
    for (uint64_t i = 0; i < REGION; i++)
        stage[i] = pat(rank, i);
    CUDA_CHECK(cudaMemcpy(src, stage, REGION, cudaMemcpyDefault));
    memset(stage, 0, REGION);
    CUDA_CHECK(cudaMemcpy(dst, stage, REGION, cudaMemcpyDefault));
}

static void move_over(gpuport_bootstrap_t *bs, int k, const char *transport, unsigned char *stage)
{
    char *saved = getenv("GPUPORT_TRANSPORT") ? strdup(getenv("GPUPORT_TRANSPORT")) : NULL;
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_port_channel_dev_t dev;
    uint64_t bad = 0;
    int rc[2];
    buf_t src, dst;

    CHECK(setenv("GPUPORT_TRANSPORT", transport, 1) == 0);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    if (saved)
        setenv("GPUPORT_TRANSPORT", saved, 1);
    else
        unsetenv("GPUPORT_TRANSPORT");
    free(saved);
    alloc_kind(comm, k, &src);
    alloc_kind(comm, k, &dst);
    fill(src.p, dst.p, stage, bs->rank);
    CHECK_OK(gpuport_mem_register(comm, src.p, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst.p, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - bs->rank, msrc, mdst, &ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(ch), transport) == 0, "%s: transport %s",
              names[k], gpuport_channel_transport(ch));
    CHECK_OK(gpuport_channel_device(ch, &dev));
    k_put_wait<<<1, 1>>>(dev, REGION, g_rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(rc, g_rc, sizeof(rc), cudaMemcpyDeviceToHost));
    CHECK_MSG(rc[0] == 0 && rc[1] == 0, "%s over %s: put %d, wait %d", names[k], transport,
              rc[0], rc[1]);
    CUDA_CHECK(cudaMemcpy(stage, dst.p, REGION, cudaMemcpyDefault));
    for (uint64_t i = 0; i < REGION; i++)
        bad += stage[i] != pat(1 - bs->rank, i);
    CHECK_MSG(bad == 0, "%s over %s: %llu of %llu bytes wrong", names[k], transport,
              (unsigned long long)bad, (unsigned long long)REGION);
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(bs->barrier(bs->ctx)); /* the peer's imports of this rank's pool memory are gone */
    free_kind(comm, k, &src);
    free_kind(comm, k, &dst);
    CHECK_OK(gpuport_comm_destroy(comm));
    if (bs->rank == 0)
        printf("%s over %s: %llu bytes each way, every byte checked\n", names[k], transport,
               (unsigned long long)REGION);
}

/* The default pool as a cuda_ipc destination: refused on both sides, the
 * log saying how to make a pool that can be shared. */
static void refused_over_cuda_ipc(gpuport_bootstrap_t *bs)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch = NULL;
    gpuport_status_t st;
    const char *log;
    buf_t src, dst;

    CHECK(setenv("GPUPORT_TRANSPORT", "cuda_ipc", 1) == 0);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    unsetenv("GPUPORT_TRANSPORT");
    alloc_kind(comm, K_POOL_DEFAULT, &src);
    alloc_kind(comm, K_POOL_DEFAULT, &dst);
    CHECK_OK(gpuport_mem_register(comm, src.p, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst.p, REGION, &mdst));
    capture_begin();
    st = gpuport_channel_create(comm, 1 - bs->rank, msrc, mdst, &ch);
    log = capture_end();
    CHECK_MSG(st == GPUPORT_ERR_NOT_SUPPORTED && ch == NULL,
              "default pool over cuda_ipc: %s (expected a refusal)", gpuport_status_string(st));
    CHECK_MSG(strstr(log, "cudaMemPoolCreate") && strstr(log, "cudaMallocFromPoolAsync"),
              "default pool over cuda_ipc: the refusal does not say how to make an exportable "
              "pool:\n%s", log);
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    free_kind(comm, K_POOL_DEFAULT, &src);
    free_kind(comm, K_POOL_DEFAULT, &dst);
    CHECK_OK(gpuport_comm_destroy(comm));
    if (bs->rank == 0)
        printf("default pool as a cuda_ipc destination: refused on both sides, saying how to "
               "make an exportable pool\n");
}

__global__ void k_two(gpuport_port_channel_dev_t a, gpuport_port_channel_dev_t b, uint64_t half,
                      int *rc)
{
    rc[0] = gpuport_put_with_signal(&a, 0, 0, half);
    if (!rc[0])
        rc[0] = gpuport_put_with_signal(&b, half, half, half);
    rc[1] = rc[0] ? rc[0] : gpuport_wait(&a);
    if (!rc[1])
        rc[1] = gpuport_wait(&b);
}

/* One exportable-pool source and one destination serve a cuda_ipc channel
 * and a tcp channel at once: registered in a cuda_ipc communicator and in a
 * tcp one (a communicator reaches each peer over one transport), the first
 * half of each destination arrives over one, the second over the other,
 * both in one kernel. */
static gpuport_comm_t comm_over(gpuport_bootstrap_t *bs, const char *transport)
{
    gpuport_comm_t comm;

    CHECK(setenv("GPUPORT_TRANSPORT", transport, 1) == 0);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    unsetenv("GPUPORT_TRANSPORT");
    return comm;
}

static void two_transports(gpuport_bootstrap_t *bs, unsigned char *stage)
{
    gpuport_comm_t ci = comm_over(bs, "cuda_ipc"), ct = comm_over(bs, "tcp");
    gpuport_mem_t msrc[2], mdst[2];
    gpuport_channel_t a, b;
    gpuport_port_channel_dev_t da, db;
    uint64_t bad = 0, half = REGION / 2;
    int rc[2];
    buf_t src, dst;

    alloc_kind(ci, K_POOL_EXPORTABLE, &src);
    alloc_kind(ci, K_POOL_EXPORTABLE, &dst);
    fill(src.p, dst.p, stage, bs->rank);
    CHECK_OK(gpuport_mem_register(ci, src.p, REGION, &msrc[0]));
    CHECK_OK(gpuport_mem_register(ci, dst.p, REGION, &mdst[0]));
    CHECK_OK(gpuport_mem_register(ct, src.p, REGION, &msrc[1]));
    CHECK_OK(gpuport_mem_register(ct, dst.p, REGION, &mdst[1]));
    CHECK_OK(gpuport_channel_create(ci, 1 - bs->rank, msrc[0], mdst[0], &a));
    CHECK_OK(gpuport_channel_create(ct, 1 - bs->rank, msrc[1], mdst[1], &b));
    CHECK_MSG(strcmp(gpuport_channel_transport(a), "cuda_ipc") == 0 &&
                  strcmp(gpuport_channel_transport(b), "tcp") == 0,
              "two transports: %s and %s", gpuport_channel_transport(a),
              gpuport_channel_transport(b));
    CHECK_OK(gpuport_channel_device(a, &da));
    CHECK_OK(gpuport_channel_device(b, &db));
    k_two<<<1, 1>>>(da, db, half, g_rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(rc, g_rc, sizeof(rc), cudaMemcpyDeviceToHost));
    CHECK_MSG(rc[0] == 0 && rc[1] == 0, "two transports: puts %d, waits %d", rc[0], rc[1]);
    CUDA_CHECK(cudaMemcpy(stage, dst.p, REGION, cudaMemcpyDefault));
    for (uint64_t i = 0; i < REGION; i++)
        bad += stage[i] != pat(1 - bs->rank, i);
    CHECK_MSG(bad == 0, "two transports: %llu of %llu bytes wrong", (unsigned long long)bad,
              (unsigned long long)REGION);
    CHECK_OK(gpuport_channel_flush(a));
    CHECK_OK(gpuport_channel_flush(b));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(a));
    CHECK_OK(gpuport_channel_destroy(b));
    for (int i = 0; i < 2; i++) {
        CHECK_OK(gpuport_mem_deregister(msrc[i]));
        CHECK_OK(gpuport_mem_deregister(mdst[i]));
    }
    CHECK_OK(gpuport_comm_destroy(ct));
    CHECK_OK(gpuport_comm_destroy(ci));
    CHECK_OK(bs->barrier(bs->ctx));
    free_kind(NULL, K_POOL_EXPORTABLE, &src);
    free_kind(NULL, K_POOL_EXPORTABLE, &dst);
    if (bs->rank == 0)
        printf("one exportable-pool allocation over cuda_ipc and tcp at once: %llu bytes each "
               "way (half over each), every byte checked\n",
               (unsigned long long)REGION);
}

__global__ void k_three(gpuport_port_channel_dev_t a, gpuport_port_channel_dev_t b,
                        gpuport_port_channel_dev_t c, uint64_t half, int *rc)
{
    rc[0] = gpuport_put_with_signal(&a, 0, 0, half);
    if (!rc[0])
        rc[0] = gpuport_put_with_signal(&b, 0, half, half);
    if (!rc[0])
        rc[0] = gpuport_put_with_signal(&c, 0, 0, 2 * half);
    rc[1] = rc[0] ? rc[0] : gpuport_wait(&a);
    if (!rc[1])
        rc[1] = gpuport_wait(&b);
    if (!rc[1])
        rc[1] = gpuport_wait(&c);
}

/* Three cuda_ipc channels over one connection into one exportable pool:
 * two destinations are the halves of one allocation (registered apart:
 * the peer imports the allocation once), the third a second allocation
 * of the same pool (the peer imports the pool once). */
static void pool_shared_imports(gpuport_bootstrap_t *bs, unsigned char *stage)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mh[2], mb;
    gpuport_channel_t c[3];
    gpuport_port_channel_dev_t d[3];
    uint64_t bad = 0, half = REGION / 2;
    int rc[2];
    buf_t src, a, b;
    cudaMemPool_t pool;

    CHECK(setenv("GPUPORT_TRANSPORT", "cuda_ipc", 1) == 0);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    unsetenv("GPUPORT_TRANSPORT");
    alloc_kind(comm, K_POOL_EXPORTABLE, &src);
    alloc_kind(comm, K_POOL_EXPORTABLE, &a);
    pool = a.pool;
    memset(&b, 0, sizeof(b));
    CUDA_CHECK(cudaMallocFromPoolAsync(&b.p, REGION, pool, 0));
    CUDA_CHECK(cudaStreamSynchronize(0));
    fill(src.p, a.p, stage, bs->rank);
    CUDA_CHECK(cudaMemset(b.p, 0, REGION));
    CHECK_OK(gpuport_mem_register(comm, src.p, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, a.p, half, &mh[0]));
    CHECK_OK(gpuport_mem_register(comm, (char *)a.p + half, half, &mh[1]));
    CHECK_OK(gpuport_mem_register(comm, b.p, REGION, &mb));
    CHECK_OK(gpuport_channel_create(comm, 1 - bs->rank, msrc, mh[0], &c[0]));
    CHECK_OK(gpuport_channel_create(comm, 1 - bs->rank, msrc, mh[1], &c[1]));
    CHECK_OK(gpuport_channel_create(comm, 1 - bs->rank, msrc, mb, &c[2]));
    for (int i = 0; i < 3; i++)
        CHECK_OK(gpuport_channel_device(c[i], &d[i]));
    k_three<<<1, 1>>>(d[0], d[1], d[2], half, g_rc);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(rc, g_rc, sizeof(rc), cudaMemcpyDeviceToHost));
    CHECK_MSG(rc[0] == 0 && rc[1] == 0, "shared pool imports: puts %d, waits %d", rc[0], rc[1]);
    for (int which = 0; which < 2; which++) {
        CUDA_CHECK(cudaMemcpy(stage, which ? b.p : a.p, REGION, cudaMemcpyDefault));
        for (uint64_t i = 0; i < REGION; i++)
            bad += stage[i] != pat(1 - bs->rank, i);
    }
    CHECK_MSG(bad == 0, "shared pool imports: %llu of %llu bytes wrong", (unsigned long long)bad,
              (unsigned long long)(2 * REGION));
    CHECK_OK(bs->barrier(bs->ctx));
    for (int i = 0; i < 3; i++)
        CHECK_OK(gpuport_channel_destroy(c[i]));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mh[0]));
    CHECK_OK(gpuport_mem_deregister(mh[1]));
    CHECK_OK(gpuport_mem_deregister(mb));
    CHECK_OK(gpuport_comm_destroy(comm));
    CHECK_OK(bs->barrier(bs->ctx));
    CUDA_CHECK(cudaFreeAsync(b.p, 0));
    free_kind(NULL, K_POOL_EXPORTABLE, &a); /* frees a and destroys the pool */
    free_kind(NULL, K_POOL_EXPORTABLE, &src);
    if (bs->rank == 0)
        printf("three channels into one exportable pool over one connection (two regions of one "
               "allocation, a second allocation): %llu bytes each way, every byte checked\n",
               (unsigned long long)(2 * REGION));
}

/* Pool memory freed by its owner, over cuda_ipc (the peer imported it),
 * the pool then trimmed to nothing (cudaMemPoolTrimTo):
 *  - in order (early 0): rank 0 destroys its channel, deregisters, frees
 *    and trims while rank 1 still holds its side; rank 1's put then fails
 *    with GPUPORT_ERR_CLOSED (the channel was closed by its peer), and its
 *    destroy returns GPUPORT_OK;
 *  - out of order (early 1): rank 0 frees its destination and trims while
 *    the channel is live, as an application with a bug would; rank 1's put
 *    into it returns (whatever it returns, it is said), its flush and
 *    destroy return, and neither process crashes; rank 0's deregister of
 *    the freed region returns GPUPORT_OK. */
static void pool_lifetimes(gpuport_bootstrap_t *bs, unsigned char *stage, int early)
{
    gpuport_comm_t comm;
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    gpuport_status_t st, fl;
    buf_t src, dst;
    const char *what = early ? "freed while its channel is live" : "freed after destroy";

    CHECK(setenv("GPUPORT_TRANSPORT", "cuda_ipc", 1) == 0);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    unsetenv("GPUPORT_TRANSPORT");
    alloc_kind(comm, K_POOL_EXPORTABLE, &src);
    alloc_kind(comm, K_POOL_EXPORTABLE, &dst);
    fill(src.p, dst.p, stage, bs->rank);
    CHECK_OK(gpuport_mem_register(comm, src.p, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst.p, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, 1 - bs->rank, msrc, mdst, &ch));
    if (bs->rank == 0) {
        if (!early) {
            CHECK_OK(gpuport_channel_destroy(ch));
            CHECK_OK(gpuport_mem_deregister(mdst));
        }
        CUDA_CHECK(cudaFreeAsync(dst.p, 0));
        CUDA_CHECK(cudaStreamSynchronize(0));
        CUDA_CHECK(cudaMemPoolTrimTo(dst.pool, 0));
        CHECK_OK(bs->barrier(bs->ctx)); /* freed and trimmed */
        CHECK_OK(bs->barrier(bs->ctx)); /* rank 1 has put */
        if (early) {
            setenv("GPUPORT_LOG_LEVEL", "none", 1);
            st = gpuport_channel_destroy(ch);
            unsetenv("GPUPORT_LOG_LEVEL");
            printf("pool memory %s: rank 0's destroy returned %s\n", what,
                   gpuport_status_string(st));
            CHECK_OK(gpuport_mem_deregister(mdst));
        }
    } else {
        CHECK_OK(bs->barrier(bs->ctx));
        setenv("GPUPORT_LOG_LEVEL", "none", 1);
        st = gpuport_channel_put_with_signal(ch, 0, 0, REGION);
        fl = gpuport_channel_flush(ch);
        unsetenv("GPUPORT_LOG_LEVEL");
        if (!early)
            CHECK_MSG(st == GPUPORT_ERR_CLOSED, "pool memory %s: the peer's put returned %s, "
                      "expected %s", what, gpuport_status_string(st),
                      gpuport_status_string(GPUPORT_ERR_CLOSED));
        printf("pool memory %s: rank 1's put returned %s, its flush %s\n", what,
               gpuport_status_string(st), gpuport_status_string(fl));
        CHECK_OK(bs->barrier(bs->ctx));
        setenv("GPUPORT_LOG_LEVEL", "none", 1);
        st = gpuport_channel_destroy(ch);
        unsetenv("GPUPORT_LOG_LEVEL");
        if (!early)
            CHECK_OK(st);
        printf("pool memory %s: rank 1's destroy returned %s\n", what, gpuport_status_string(st));
        CHECK_OK(gpuport_mem_deregister(mdst));
    }
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(bs->barrier(bs->ctx));
    setenv("GPUPORT_LOG_LEVEL", "none", 1);
    st = gpuport_comm_destroy(comm);
    unsetenv("GPUPORT_LOG_LEVEL");
    if (!early)
        CHECK_OK(st);
    CHECK_OK(bs->barrier(bs->ctx));
    free_kind(comm, K_POOL_EXPORTABLE, &src);
    if (bs->rank == 0) {
        CUDA_CHECK(cudaMemPoolDestroy(dst.pool));
    } else {
        free_kind(comm, K_POOL_EXPORTABLE, &dst);
    }
    if (bs->rank == 0)
        printf("PASS pool memory %s: no crash, every call returned\n", what);
}

int main(void)
{
    static const char *const tls[] = {"shm", "cuda_ipc", "tcp"};
    gpuport_bootstrap_t bs;
    pid_t child;
    unsigned char *stage;
    int rank;

    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("GPUPORT_TIMEOUT_MS", "60000", 1);
    printf("test_gpu_kinds: every memory kind classified and queried; the kinds that "
           "docs/GUIDE.md's table says work, moved over shm, cuda_ipc and tcp\n");
    rank = gpu_pair_fork(&bs, &child);
    bs.destroy = NULL; /* one socketpair serves every communicator */
    CUDA_CHECK(cudaMalloc(&g_rc, 2 * sizeof(int)));
    stage = (unsigned char *)malloc(REGION);
    CHECK(stage != NULL);
    classify(&bs);
    if (rank == 0)
        readme_agrees();
    for (int k = 0; k < K_COUNT; k++) {
        const expect_t *e = &expected[k];
        const int carries[3] = {e->shm, e->cuda_ipc, e->tcp};
        for (int t = 0; t < 3; t++)
            if (e->kind && carries[t] == 1)
                move_over(&bs, k, tls[t], stage);
    }
    refused_over_cuda_ipc(&bs);
    two_transports(&bs, stage);
    pool_shared_imports(&bs, stage);
    pool_lifetimes(&bs, stage, 0);
    pool_lifetimes(&bs, stage, 1); /* last: it may leave this process's flusher failed */
    free(stage);
    cudaFree(g_rc);
    gpu_pair_join(rank, child, 0);
    printf("all memory kinds passed\n");
    return 0;
}
