/*
 * The proxy counts the flusher's room as items posted minus completions
 * read, and posts again as soon as a completion shows. That count is only
 * true if the flusher frees an item's work slot before it reports the item
 * done: otherwise a post in between finds the work ring full and the item is
 * lost (a flush that never completes, or a signal ahead of its data; seen in
 * the 4-rank stress test on two cores). Here a proxy-like thread keeps the
 * smallest rings full for 200,000 items, with other threads competing for
 * the cores so that the flusher is preempted where it would hurt, and every
 * item must be carried out, completed once, in order.
 *
 * And a cross-memory write's failure says who failed: a peer that is gone
 * is GPUPORT_ERR_PEER, an address it does not have GPUPORT_ERR_TRANSPORT,
 * whatever errno an earlier call left.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "flusher.h"

#define ITEMS 200000u
#define SPINNERS 3

static _Atomic int g_stop;

static void *spin(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
        ;
    return NULL;
}

static void run(uint32_t capacity)
{
    gpuport_flusher_t fl;
    _Atomic uint64_t sem = 0;
    uint64_t posted = 0, done = 0, refused = 0;

    CHECK_STATUS(gpuport_flusher_start(&fl, capacity, 0, -1, NULL, 1000000000ull, NULL, -1),
                 GPUPORT_OK);
    while (done < ITEMS) {
        gpuport_work_done_t *c;
        while (posted < ITEMS && gpuport_flusher_has_room(&fl, 1)) {
            gpuport_work_t w;
            memset(&w, 0, sizeof(w));
            w.kind = GPUPORT_WORK_SEM_ADD;
            w.channel = (uint32_t)(posted % 4096);
            w.sem = &sem;
            w.value = 1;
            if (gpuport_flusher_post(&fl, &w) != GPUPORT_OK) {
                refused++;
                break;
            }
            posted++;
        }
        if (refused)
            break;
        while ((c = gpuport_flusher_poll(&fl)) != NULL) {
            CHECK_MSG(c->channel == done % 4096 && c->status == GPUPORT_OK,
                      "completion %llu names item %u with status %d",
                      (unsigned long long)done, c->channel, c->status);
            gpuport_flusher_release(&fl);
            done++;
        }
    }
    gpuport_flusher_stop(&fl);
    CHECK_MSG(refused == 0,
              "capacity %u: the flusher refused item %llu although the count said it had room",
              capacity, (unsigned long long)posted);
    CHECK_MSG(atomic_load(&sem) == ITEMS, "capacity %u: %llu of %u items carried out", capacity,
              (unsigned long long)atomic_load(&sem), ITEMS);
    printf("capacity %u: %u items posted, carried out and completed in order\n", capacity, ITEMS);
}

static gpuport_status_t cma(int pid, void *dst, const void *src, uint64_t size, uint32_t flags,
                             uint64_t value)
{
    gpuport_work_t w;

    memset(&w, 0, sizeof(w));
    w.kind = GPUPORT_WORK_CMA_WRITE;
    w.pid = pid;
    w.dst = dst;
    w.src = src;
    w.size = size;
    w.flags = flags;
    w.value = value;
    return gpuport_work_execute(&w);
}

static void cma_statuses(void)
{
    unsigned char src[4096], dst[4096];
    uint64_t word = 0;
    const char *log;
    void *hole;
    pid_t gone;
    int st;

    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (unsigned char)(i * 7 + 1);
    memset(dst, 0, sizeof(dst));
    CHECK_OK(cma((int)getpid(), dst, src, sizeof(src), 0, 0));
    CHECK(memcmp(dst, src, sizeof(src)) == 0);
    CHECK_OK(cma((int)getpid(), &word, NULL, 8, GPUPORT_WORK_SRC_VALUE, 0x1122334455667788ull));
    CHECK(word == 0x1122334455667788ull);

    /* a pid that no longer exists */
    gone = fork();
    CHECK(gone >= 0);
    if (gone == 0)
        _exit(0);
    CHECK(waitpid(gone, &st, 0) == gone);
    capture_begin();
    errno = EFAULT;
    CHECK_STATUS(cma((int)gone, dst, src, 64, 0, 0), GPUPORT_ERR_PEER);
    log = capture_end();
    CHECK_MSG(count_of(log, "\n") == 1 && strstr(log, "No such process"), "log: %s", log);

    /* an unmapped destination in a live process, with ESRCH left over */
    hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(hole != MAP_FAILED && munmap(hole, 4096) == 0);
    capture_begin();
    errno = ESRCH;
    CHECK_STATUS(cma((int)getpid(), hole, src, 64, 0, 0), GPUPORT_ERR_TRANSPORT);
    log = capture_end();
    CHECK_MSG(count_of(log, "\n") == 1 && strstr(log, "Bad address"), "log: %s", log);
}

int main(void)
{
    pthread_t spinners[SPINNERS];

    setvbuf(stdout, NULL, _IONBF, 0);
    cma_statuses();
    for (int i = 0; i < SPINNERS; i++)
        CHECK(pthread_create(&spinners[i], NULL, spin, NULL) == 0);
    run(2);
    run(4);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < SPINNERS; i++)
        pthread_join(spinners[i], NULL);
    return 0;
}
