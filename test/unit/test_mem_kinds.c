/*
 * The one answer to "what memory is this" (mem.c, mem_classify), for the
 * kinds a machine without a GPU has: private host memory (peers write it by
 * cross-memory attach: nothing to pass), a gpuport_mem_alloc block and a
 * sub-range of one (its memfd is what same-host peers receive, one piece
 * that covers exactly the region), and registrations' serials (the key by
 * which a peer maps a region once). GPU kinds are classified by the GPU
 * suite (test/gpu/test_gpu_vmm.cu).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
