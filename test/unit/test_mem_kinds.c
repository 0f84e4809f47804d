/*
 * The one answer to "what memory is this" (mem.c, mem_classify), for the
 * kinds a machine without a GPU has: private host memory (peers write it by
 * cross-memory attach: nothing to pass), a gpuport_mem_alloc block and a
 * sub-range of one (its memfd is what same-host peers receive, one piece
 * that covers exactly the region), and registrations' serials (the key by
 * which a peer maps a region once). GPU kinds are classified by the GPU
 * suite (test/gpu/test_gpu_vmm.cu). A block that cannot be made says what
 * ran out: descriptors are GPUPORT_ERR_NO_RESOURCE, memory (address space)
 * GPUPORT_ERR_NO_MEMORY, as for the control segment (memfd.c).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "internal.h"
#include "local_bootstrap.h"

#define KIB 1024u


static void same_file(int a, int b)
{
    struct stat sa, sb;

    CHECK(fstat(a, &sa) == 0 && fstat(b, &sb) == 0);
    CHECK_MSG(sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev, "fd %d and fd %d differ", a, b);
}

/* No descriptor left: memfd_create fails with EMFILE. No address space for
 * 128 TiB: mmap fails with ENOMEM. Each is logged once, naming the call,
 * and ptr_p is left alone. */
static void alloc_failures(gpuport_comm_t comm)
{
    void *p = &p;
    struct rlimit old, low;
    const char *log;
    gpuport_status_t st;
    int lowest;

    capture_begin();
    CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
    lowest = dup(0);
    CHECK(lowest >= 0 && close(lowest) == 0);
    low = old;
    low.rlim_cur = (rlim_t)lowest;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    st = gpuport_mem_alloc(comm, 4096, &p);
    CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
    log = capture_end();
    CHECK_STATUS(st, GPUPORT_ERR_NO_RESOURCE);
    CHECK_MSG(p == &p && count_of(log, "\n") == 1 &&
                  strstr(log, "memfd_create(gpuport-mem) failed: Too many open files"),
              "log: %s", log);

    capture_begin();
    st = gpuport_mem_alloc(comm, (size_t)1 << 47, &p);
    log = capture_end();
    CHECK_STATUS(st, GPUPORT_ERR_NO_MEMORY);
    CHECK_MSG(p == &p && count_of(log, "\n") == 1 &&
                  strstr(log, "mmap(gpuport-mem, 140737488355328 bytes) failed: Cannot allocate "
                              "memory"),
              "log: %s", log);
}

static int kinds(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    gpuport_mem_t priv, whole, sub;
    unsigned char *blk, *heap = malloc(64 * KIB);
    gpuport_alloc_t *a;

    (void)rank, (void)size, (void)arg;
    CHECK(heap);
    setenv("GPUPORT_GPU", "off", 1);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    CHECK_OK(gpuport_mem_alloc(comm, 64 * KIB, (void **)&blk));
    a = comm->allocs;
    CHECK(a && a->ptr == blk);

    CHECK_OK(gpuport_mem_register(comm, heap, 64 * KIB, &priv));
    CHECK_MSG(priv->region.kind == GPUPORT_REGION_HOST, "malloc memory is kind %d",
              priv->region.kind);
    CHECK(priv->region.npieces == 0 && priv->rec.npieces == 0 && !priv->region.pieces);
    CHECK(priv->rec.kind == GPUPORT_REGION_HOST && priv->rec.size == 64 * KIB &&
          priv->rec.addr == (uint64_t)(uintptr_t)heap);

    CHECK_OK(gpuport_mem_register(comm, blk, 64 * KIB, &whole));
    CHECK(whole->region.kind == GPUPORT_REGION_HOST_SHARED);
    CHECK(whole->region.npieces == 1 && whole->rec.npieces == 1 && !whole->region.pieces_owned);
    same_file(whole->region.pieces[0].fd, a->fd);
    CHECK(whole->region.pieces[0].offset == 0 && whole->region.pieces[0].size == 64 * KIB);

    /* a sub-range: the piece is exactly the region, at its offset in the memfd */
    CHECK_OK(gpuport_mem_register(comm, blk + 4100, 3000, &sub));
    CHECK(sub->region.kind == GPUPORT_REGION_HOST_SHARED && sub->region.npieces == 1);
    CHECK_MSG(sub->region.pieces[0].offset == 4100 && sub->region.pieces[0].size == 3000,
              "piece at %llu, %llu bytes", (unsigned long long)sub->region.pieces[0].offset,
              (unsigned long long)sub->region.pieces[0].size);
    CHECK(sub->rec.fd_offset == 0 && sub->rec.size == 3000);

    /* every registration its own serial, also of the same memory */
    CHECK(priv->rec.serial && whole->rec.serial && sub->rec.serial);
    CHECK(priv->rec.serial != whole->rec.serial && whole->rec.serial != sub->rec.serial &&
          priv->rec.serial != sub->rec.serial);

    /* the block's memfd is the block's: deregistering leaves it open */
    CHECK_OK(gpuport_mem_deregister(sub));
    CHECK_OK(gpuport_mem_deregister(whole));
    CHECK(fcntl(a->fd, F_GETFD) >= 0);
    CHECK_OK(gpuport_mem_deregister(priv));
    CHECK_OK(gpuport_mem_free(comm, blk));
    alloc_failures(comm);
    CHECK(comm->allocs == NULL);
    CHECK_OK(gpuport_comm_destroy(comm));
    free(heap);
    return 0;
}

int main(void)
{
    CHECK(local_run(1, kinds, NULL) == 0);
    printf("memory kinds: private, shared block, shared sub-range classified; serials distinct\n");
    return 0;
}
