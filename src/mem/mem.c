/*
 * Memory: gpuport_mem_alloc hands out memfd-backed shared memory that
 * same-host peers map; gpuport_mem_register describes any host range (inside
 * such an allocation, or private memory that peers reach by cross-memory
 * attach) so that it can be a channel's source or destination.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_MEM
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "memfd.h"

gpuport_status_t gpuport_mem_alloc(gpuport_comm_t comm, size_t size, void **ptr_p)
{
    gpuport_alloc_t *a;
    gpuport_status_t st;
    void *ptr;
    long page = sysconf(_SC_PAGESIZE);

    if (!gpuport_comm_live(comm) || !ptr_p || size == 0) {
        log_error("gpuport_mem_alloc: comm %p, ptr_p %p and size %zu must be set (a live "
                  "communicator, at least one byte)",
                  (void *)comm, (void *)ptr_p, size);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (size > SIZE_MAX - (size_t)page) {
        log_error("gpuport_mem_alloc: %zu bytes cannot be rounded up to whole pages", size);
        return GPUPORT_ERR_INVALID_ARG;
    }
    a = calloc(1, sizeof(*a));
    if (!a)
        return GPUPORT_ERR_NO_MEMORY;
    a->size = size;
    a->map_len = (size + (size_t)page - 1) & ~((size_t)page - 1);
    st = gpuport_memfd_map("gpuport-mem", a->map_len, &a->fd, &ptr);
    if (st != GPUPORT_OK) {
        free(a);
        return st;
    }
    a->ptr = ptr;
    pthread_mutex_lock(&comm->lock);
    a->next = comm->allocs;
    comm->allocs = a;
    pthread_mutex_unlock(&comm->lock);
    *ptr_p = a->ptr;
    return GPUPORT_OK;
}

gpuport_status_t gpuport_mem_alloc_device(gpuport_comm_t comm, size_t size, void **ptr_p)
{
    gpuport_alloc_t *a;
    gpuport_status_t st;

    if (!gpuport_comm_live(comm) || !ptr_p || size == 0) {
        log_error("gpuport_mem_alloc_device: comm %p, ptr_p %p and size %zu must be set (a live "
                  "communicator, at least one byte)",
                  (void *)comm, (void *)ptr_p, size);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if (!comm->gpu) {
        log_error("gpuport_mem_alloc_device: this communicator is host-only (%s); device memory "
                  "needs a communicator in GPU mode",
                  comm->no_gpu_why[0] ? comm->no_gpu_why : "GPU mode is off");
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    a = calloc(1, sizeof(*a));
    if (!a)
        return GPUPORT_ERR_NO_MEMORY;
    st = gpuport_gpu_vmm_alloc(comm, size, &a->ptr, &a->map_len, &a->fd);
    if (st) {
        free(a);
        return st;
    }
    a->size = size;
    a->device = 1;
    pthread_mutex_lock(&comm->lock);
    a->next = comm->allocs;
    comm->allocs = a;
    pthread_mutex_unlock(&comm->lock);
    *ptr_p = a->ptr;
    return GPUPORT_OK;
}

static void alloc_release(gpuport_comm_t comm, gpuport_alloc_t *a)
{
    if (a->device)
        gpuport_gpu_vmm_free(comm, a->ptr, a->map_len);
    else
        munmap(a->ptr, a->map_len);
    close(a->fd);
    free(a);
}

/* Refused while a live channel uses a registration inside the block. */
gpuport_status_t gpuport_mem_free(gpuport_comm_t comm, void *ptr)
{
    gpuport_alloc_t **pp, *a = NULL;
    int users = 0;

    if (!gpuport_comm_live(comm) || !ptr) {
        log_error("gpuport_mem_free: comm %p (a live communicator) and ptr %p must be set",
                  (void *)comm, ptr);
        return GPUPORT_ERR_INVALID_ARG;
    }
    pthread_mutex_lock(&comm->lock);
    for (pp = &comm->allocs; *pp; pp = &(*pp)->next) {
        if ((*pp)->ptr == ptr) {
            a = *pp;
            break;
        }
    }
    for (gpuport_mem_t m = comm->mems; a && m; m = m->next) {
        uintptr_t p = (uintptr_t)m->region.ptr, base = (uintptr_t)a->ptr;
        if (p >= base && p - base < a->size)
            users += m->users;
    }
    if (a && users == 0)
        *pp = a->next;
    pthread_mutex_unlock(&comm->lock);
    if (a && users) {
        log_error("gpuport_mem_free(%p): %d live channel(s) use registrations inside this "
                  "block; destroy them first (the peer may still write into it)",
                  ptr, users);
        return GPUPORT_ERR_BUSY;
    }
    if (!a) {
        log_error("gpuport_mem_free(%p): not a pointer from gpuport_mem_alloc or "
                  "gpuport_mem_alloc_device on this communicator",
                  ptr);
        return GPUPORT_ERR_INVALID_ARG;
    }
    alloc_release(comm, a);
    return GPUPORT_OK;
}

/* Caller holds comm->lock; [ptr, ptr + size) does not wrap. A block whose
 * mapping shares a byte with the range, its rounding to whole pages
 * included (mapped too, but not the block's: first_unmapped would let it
 * pass as private memory): the one that holds ptr, else the first the
 * range runs into. */
static gpuport_alloc_t *alloc_overlapping(gpuport_comm_t comm, const void *ptr, size_t size)
{
    uintptr_t p = (uintptr_t)ptr, end = p + size;
    gpuport_alloc_t *first = NULL;

    for (gpuport_alloc_t *a = comm->allocs; a; a = a->next) {
        uintptr_t base = (uintptr_t)a->ptr;
        if (p >= base && p - base < a->map_len)
            return a;
        if (p < base && base < end && (!first || base < (uintptr_t)first->ptr))
            first = a;
    }
    return first;
}

/* The refusal of a range that overlaps block a (as copied by the caller,
 * which no longer holds the lock) without lying within its requested size,
 * said from where the range starts. */
static gpuport_status_t refuse_overlap(const gpuport_alloc_t *a, const void *ptr, size_t size)
{
    uintptr_t p = (uintptr_t)ptr, base = (uintptr_t)a->ptr;
    const char *what = a->device ? "gpuport_mem_alloc_device" : "gpuport_mem_alloc";

    if (p < base)
        log_error("gpuport_mem_register(%p, %zu bytes): the range overlaps a %s block that "
                  "starts %zu bytes into it (%zu bytes requested at %p, %zu mapped); a range "
                  "lies within one block's requested bytes or outside every block",
                  ptr, size, what, (size_t)(base - p), a->size, a->ptr, a->map_len);
    else if (p - base < a->size)
        log_error("gpuport_mem_register(%p, %zu bytes): the range runs past the end of its %s "
                  "block (%zu bytes requested at %p, %zu mapped; %zu bytes from ptr to its end)",
                  ptr, size, what, a->size, a->ptr, a->map_len, a->size - (size_t)(p - base));
    else
        log_error("gpuport_mem_register(%p, %zu bytes): the range starts %zu bytes past the end "
                  "of a %s block (%zu bytes requested at %p, %zu mapped), in the rounding of its "
                  "mapping up to whole pages, which is not the block's",
                  ptr, size, (size_t)(p - base) - a->size, what, a->size, a->ptr, a->map_len);
    return GPUPORT_ERR_INVALID_ARG;
}

/* 0 if [ptr, ptr + size) is mapped in this process, else the first address
 * of it that is not (/proc/self/maps; ranges there are sorted). */
static uintptr_t first_unmapped(const void *ptr, size_t size)
{
    uintptr_t cur = (uintptr_t)ptr, end = cur + size;
    unsigned long lo, hi;
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");

    if (!f)
        return 0; /* cannot tell: the kernel lets no one read it; trust the caller */
    while (cur < end && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        if (hi <= cur)
            continue;
        if (lo > cur)
            break;
        cur = hi;
        /* the rest of a line longer than the buffer is read as a line */
        while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
            ;
    }
    fclose(f);
    return cur < end ? (cur ? cur : 1) : 0;
}

static gpuport_status_t refuse_unmapped(const void *ptr, size_t size, uintptr_t hole)
{
    log_error("gpuport_mem_register(%p, %zu bytes): address %p of the range is not mapped in "
              "this process; register only memory that is allocated",
              ptr, size, (void *)hole);
    return GPUPORT_ERR_INVALID_ARG;
}

/* Caller holds comm->lock. The block whose requested bytes hold all of
 * [ptr, ptr + size): its mapped length past them is not the block's. */
gpuport_alloc_t *gpuport_alloc_find(gpuport_comm_t comm, const void *ptr, size_t size)
{
    uintptr_t p = (uintptr_t)ptr;
    for (gpuport_alloc_t *a = comm->allocs; a; a = a->next) {
        uintptr_t base = (uintptr_t)a->ptr;
        if (p >= base && p - base <= a->size && size <= a->size - (p - base))
            return a;
    }
    return NULL;
}

/* The one answer to "what memory is this": host (private; or pinned by
 * CUDA, which is host memory to the transports), host shared (a
 * gpuport_mem_alloc block, mappable by peers), GPU memory from
 * gpuport_mem_alloc_device or cuMemCreate (VMM, mapped for the device, no
 * context owns it) or cudaMalloc memory (legacy: a CUDA IPC handle, owned
 * by the application's context) or stream-ordered pool memory (mapped for
 * the device like VMM memory); managed memory is refused (gpu_mem.c names
 * it). r->kind says how transports carry it, r->mem_kind what it is
 * (gpuport_mem_info). Every transport asks the region's kind. */
static _Atomic uint64_t g_serial; /* registrations of this process */

static gpuport_status_t mem_classify(gpuport_comm_t comm, void *ptr, size_t size,
                                     gpuport_region_t *r, gpuport_region_rec_t *rec)
{
    gpuport_alloc_t *a;
    int device;

    r->ptr = ptr;
    r->size = size;
    r->alloc_fd = -1;
    r->alloc_off = 0;
    r->mem_kind = GPUPORT_MEM_KIND_NONE;
    r->device = -1;
    memset(rec, 0, sizeof(*rec));
    rec->addr = (uint64_t)(uintptr_t)ptr;
    rec->size = size;
    pthread_mutex_lock(&comm->lock);
    a = gpuport_alloc_find(comm, ptr, size);
    if (!a && (a = alloc_overlapping(comm, ptr, size)) != NULL) {
        gpuport_alloc_t block = *a;
        uintptr_t hole;
        pthread_mutex_unlock(&comm->lock);
        /* from outside every block: a hole in the range is wrong first */
        if ((uintptr_t)ptr < (uintptr_t)block.ptr && (hole = first_unmapped(ptr, size)) != 0)
            return refuse_unmapped(ptr, size, hole);
        return refuse_overlap(&block, ptr, size);
    }
    if (a) {
        /* one piece: the block's memfd range, or its whole VMM allocation */
        r->pieces = calloc(1, sizeof(*r->pieces));
        if (!r->pieces) {
            pthread_mutex_unlock(&comm->lock);
            return GPUPORT_ERR_NO_MEMORY;
        }
        r->npieces = 1;
        r->pieces[0].fd = a->fd;
        if (a->device) {
            r->kind = GPUPORT_REGION_DEVICE_VMM;
            r->mem_kind = GPUPORT_MEM_KIND_DEVICE_VMM;
            r->device = comm->gpu_device;
            r->pieces[0].size = a->map_len;
            r->map_off = (uint64_t)((uintptr_t)ptr - (uintptr_t)a->ptr);
        } else {
            r->kind = GPUPORT_REGION_HOST_SHARED;
            r->mem_kind = GPUPORT_MEM_KIND_HOST_SHARED;
            r->alloc_fd = a->fd;
            r->alloc_off = (uint64_t)((uintptr_t)ptr - (uintptr_t)a->ptr);
            r->pieces[0].offset = r->alloc_off;
            r->pieces[0].size = size;
        }
    }
    pthread_mutex_unlock(&comm->lock);
    if (!a) {
        device = gpuport_gpu_mem_describe(comm, ptr, size, rec, r);
        if (device < 0)
            return (gpuport_status_t)device;
        r->kind = device ? device : GPUPORT_REGION_HOST;
        if (r->mem_kind == GPUPORT_MEM_KIND_NONE)
            r->mem_kind = GPUPORT_MEM_KIND_HOST;
    }
    if (r->kind == GPUPORT_REGION_HOST) {
        uintptr_t hole = first_unmapped(ptr, size);
        if (hole)
            return refuse_unmapped(ptr, size, hole);
    }
    rec->kind = (uint32_t)r->kind;
    rec->npieces = r->npieces;
    rec->serial = atomic_fetch_add(&g_serial, 1) + 1;
    if (r->kind == GPUPORT_REGION_DEVICE_VMM)
        rec->fd_offset = r->map_off;
    return GPUPORT_OK;
}

/* The descriptors a registration exported, closed once it is gone: they
 * would keep the application's VMM memory alive after it freed it. */
static void region_release(gpuport_region_t *r)
{
    if (r->pieces_owned) {
        for (uint32_t i = 0; i < r->npieces; i++)
            close(r->pieces[i].fd);
    }
    free(r->pieces);
    r->pieces = NULL;
    r->npieces = 0;
}

static const char *kind_text(int kind)
{
    switch (kind) {
    case GPUPORT_REGION_HOST_SHARED: return "shared memory (peers map it)";
    case GPUPORT_REGION_DEVICE: return "GPU memory (CUDA IPC)";
    case GPUPORT_REGION_DEVICE_VMM: return "GPU memory (VMM)";
    case GPUPORT_REGION_DEVICE_POOL: return "GPU memory (stream-ordered pool)";
    default: return "private memory (peers use CMA)";
    }
}

gpuport_status_t gpuport_mem_register(gpuport_comm_t comm, void *ptr, size_t size,
                                      gpuport_mem_t *mem_p)
{
    gpuport_mem_t mem;
    gpuport_status_t status;

    if (!gpuport_comm_live(comm) || !mem_p || !ptr || size == 0) {
        log_error("gpuport_mem_register: comm %p, ptr %p, size %zu and mem_p %p must be set "
                  "(a live communicator; a region has at least one byte)",
                  (void *)comm, ptr, size, (void *)mem_p);
        return GPUPORT_ERR_INVALID_ARG;
    }
    if ((uintptr_t)ptr + size < (uintptr_t)ptr) {
        log_error("gpuport_mem_register(%p, %zu bytes): the range wraps around the end of the "
                  "address space",
                  ptr, size);
        return GPUPORT_ERR_INVALID_ARG;
    }
    mem = calloc(1, sizeof(*mem));
    if (!mem)
        return GPUPORT_ERR_NO_MEMORY;
    mem->magic = GPUPORT_MEM_MAGIC;
    mem->comm = comm;
    status = mem_classify(comm, ptr, size, &mem->region, &mem->rec);
    if (status) {
        region_release(&mem->region);
        free(mem);
        return status;
    }
    pthread_mutex_lock(&comm->lock);
    mem->next = comm->mems;
    if (comm->mems)
        comm->mems->prev = mem;
    comm->mems = mem;
    pthread_mutex_unlock(&comm->lock);
    log_debug("registered %p, %zu bytes, as %s%s%s", ptr, size, kind_text(mem->region.kind),
              mem->region.export_why ? "; not shareable with same-host peers: " : "",
              mem->region.export_why ? mem->region.export_why : "");
    *mem_p = mem;
    return GPUPORT_OK;
}

/* Refused while a live channel uses the region: the peer may still write
 * into it. A deregistered handle stays allocated until its communicator
 * goes (so a second deregister finds it dead, not freed). */
gpuport_status_t gpuport_mem_deregister(gpuport_mem_t mem)
{
    gpuport_comm_t comm;
    void *old = NULL;
    int users;

    if (!mem || mem->magic != GPUPORT_MEM_MAGIC) {
        log_error("gpuport_mem_deregister: %p is not a live registration (NULL, deregistered "
                  "already, or not a registration)",
                  (void *)mem);
        return GPUPORT_ERR_INVALID_ARG;
    }
    comm = mem->comm;
    pthread_mutex_lock(&comm->lock);
    users = mem->users;
    if (users == 0) {
        if (mem->prev)
            mem->prev->next = mem->next;
        else
            comm->mems = mem->next;
        if (mem->next)
            mem->next->prev = mem->prev;
        mem->magic = 0;
        region_release(&mem->region);
        old = gpuport_dead_add(&comm->dead_mems, &mem->dead);
    }
    pthread_mutex_unlock(&comm->lock);
    free(old);
    if (users) {
        log_error("gpuport_mem_deregister(%p: %p, %llu bytes): %d live channel(s) use the region; "
                  "destroy them first (the peer may still write into it)",
                  (void *)mem, mem->region.ptr, (unsigned long long)mem->region.size, users);
        return GPUPORT_ERR_BUSY;
    }
    return GPUPORT_OK;
}

void gpuport_mem_free_all(gpuport_comm_t comm)
{
    while (comm->mems) {
        gpuport_mem_t m = comm->mems;
        comm->mems = m->next;
        region_release(&m->region);
        free(m);
    }
    gpuport_dead_free_all(&comm->dead_mems);
    while (comm->allocs) {
        gpuport_alloc_t *a = comm->allocs;
        comm->allocs = a->next;
        alloc_release(comm, a);
    }
}
