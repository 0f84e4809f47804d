/*
 * A transport from outside the library: test/tl_loop/loop.c registers
 * itself at program start, with a GPUPORT_* setting and a record type of
 * its own, and no core file names it. Channels over it (GPUPORT_TRANSPORT=
 * loop) between two communicators of this process move bytes, signals and
 * values; its setting is parsed by the core's parser with the core's rules
 * (a bad value fails the communicator with the variable named), listed with
 * every row, and read by the transport; its record is exchanged and checked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "config.h"
#include "internal.h"
#include "local_bootstrap.h"
#include "testenv.h"
#include "tl_loop/loop.h"

#define REGION 100000
#define CHUNK 1000
#define PUT_OFF 17
#define PUT_SIZE 12345 /* 13 pieces of CHUNK */
#define VALUE_OFF 65536

static unsigned char pattern(int rank, uint64_t i)
{
    return (unsigned char)(rank * 37 + (int)(i * 11 % 253));
}

/* Reads what the peer's proxy wrote, once a wait said it is there. The
 * signal's release and the wait's acquire touch one slot through two
 * mappings (loop maps the peer's control segment again), which TSan cannot
 * pair, so these reads are not instrumented, as test_local_channels' are
 * (test/sanitizers/tsan.supp says why). */
__attribute__((no_sanitize_thread))
static void check_received(const unsigned char *dst, int rank, int peer)
{
    uint64_t got;

    for (uint64_t i = 0; i < PUT_SIZE; i++)
        CHECK_MSG(dst[PUT_OFF + i] == pattern(peer, PUT_OFF + i), "rank %d byte %llu", rank,
                  (unsigned long long)i);
    CHECK(dst[PUT_OFF - 1] == 0xee && dst[PUT_OFF + PUT_SIZE] == 0xee);
    got = 0; /* byte by byte: a memcpy call would go through TSan's interceptor */
    for (int i = 7; i >= 0; i--)
        got = got << 8 | dst[VALUE_OFF + i];
    CHECK(got == 0x1122334455667700ull + (uint64_t)peer);
}

static int channel_over_loop(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;
    unsigned char *src = malloc(REGION), *dst = malloc(REGION);
    gpuport_mem_t msrc, mdst;
    gpuport_channel_t ch;
    const loop_settings_t *set;
    int peer = 1 - rank;

    (void)size;
    (void)arg;
    CHECK(src && dst);
    for (uint64_t i = 0; i < REGION; i++)
        src[i] = pattern(rank, i);
    memset(dst, 0xee, REGION);
    CHECK_OK(gpuport_comm_create(bs, &comm));
    /* the transport's own setting, where it reads it */
    set = gpuport_tl_settings(comm, loop_kind);
    CHECK(set && set->chunk == CHUNK && set->auto_rank == 0);
    CHECK_OK(gpuport_mem_register(comm, src, REGION, &msrc));
    CHECK_OK(gpuport_mem_register(comm, dst, REGION, &mdst));
    CHECK_OK(gpuport_channel_create(comm, peer, msrc, mdst, &ch));
    CHECK_MSG(strcmp(gpuport_channel_transport(ch), "loop") == 0, "transport %s",
              gpuport_channel_transport(ch));
    CHECK_OK(gpuport_channel_put_with_signal(ch, PUT_OFF, PUT_OFF, PUT_SIZE));
    CHECK_OK(gpuport_channel_put_value(ch, VALUE_OFF, 0x1122334455667700ull + (uint64_t)rank));
    CHECK_OK(gpuport_channel_signal(ch));
    CHECK_OK(gpuport_channel_wait(ch));
    CHECK_OK(gpuport_channel_wait(ch));
    check_received(dst, rank, peer);
    CHECK_OK(gpuport_channel_flush(ch));
    CHECK_OK(bs->barrier(bs->ctx));
    CHECK_OK(gpuport_channel_destroy(ch));
    CHECK_OK(gpuport_mem_deregister(msrc));
    CHECK_OK(gpuport_mem_deregister(mdst));
    CHECK_OK(gpuport_comm_destroy(comm));
    free(src);
    free(dst);
    return 0;
}

/* registered after the library's transports, with its rows after theirs */
static void test_registered(void)
{
    size_t n = gpuport_config_nvars();

    CHECK_MSG(loop_kind == 5 && gpuport_transport_nkinds() == 6, "loop is kind %d of %d",
              loop_kind, gpuport_transport_nkinds());
    CHECK(strcmp(gpuport_transport_name(loop_kind), "loop") == 0);
    CHECK(gpuport_transport_ops(loop_kind)->records == loop_records);
    CHECK(strcmp(gpuport_log_subsys_words[GPUPORT_SUBSYS_TL(loop_kind)], "loop") == 0);
    CHECK(n >= 2 && strcmp(gpuport_config_var(n - 2)->name, "GPUPORT_LOOP_CHUNK") == 0 &&
          strcmp(gpuport_config_var(n - 1)->name, "GPUPORT_LOOP_AUTO_RANK") == 0);
    /* a second transport of the same name is refused */
    capture_begin();
    CHECK(gpuport_transport_register(gpuport_transport_ops(loop_kind)) == -1);
    CHECK(strstr(capture_end(), "already in the transport list"));
}

static int create_fails(int rank, int size, gpuport_bootstrap_t *bs, void *arg)
{
    gpuport_comm_t comm;

    (void)rank;
    (void)size;
    (void)arg;
    CHECK_STATUS(gpuport_comm_create(bs, &comm), GPUPORT_ERR_INVALID_CONFIG);
    return 0;
}

/* the core's rules for its row: a bad value names the variable and what is accepted */
static void test_bad_setting(void)
{
    const char *log;

    setenv("GPUPORT_LOOP_CHUNK", "0", 1);
    capture_begin();
    CHECK(local_run(1, create_fails, NULL) == 0);
    log = capture_end();
    unsetenv("GPUPORT_LOOP_CHUNK");
    CHECK_MSG(strstr(log, "GPUPORT_LOOP_CHUNK=\"0\" is not valid") &&
                  strstr(log, "an integer 1..1073741824"),
              "log: %s", log);
    /* unknown variables next to it are still warned about */
    setenv("GPUPORT_LOOP_CHUNKS", "1", 1);
    capture_begin();
    {
        gpuport_config_t *c = malloc(sizeof(*c));
        CHECK(c);
        CHECK_OK(gpuport_config_load(c));
        free(c);
    }
    log = capture_end();
    unsetenv("GPUPORT_LOOP_CHUNKS");
    CHECK_MSG(strstr(log, "GPUPORT_LOOP_CHUNKS is not a gpuport variable"), "log: %s", log);
}

/* its record: the type on the wire is the transport's, checked by the core */
static void test_record(void)
{
    loop_hello_rec_t mine, theirs;
    const char *log;

    CHECK(loop_stats.hellos == 2);
    theirs = loop_stats.last_hello;
    CHECK(theirs.hdr.type == GPUPORT_REC_TL_TYPE(loop_kind, 1) &&
          theirs.hdr.size == sizeof(theirs));
    CHECK(theirs.pid == getpid() && (theirs.rank == 0 || theirs.rank == 1) &&
          theirs.chunk == CHUNK);
    mine = theirs;
    CHECK_OK(loop_hello_check(&mine, &theirs, theirs.rank));
    theirs.hdr.type = GPUPORT_REC_TL_TYPE(loop_kind, 2);
    capture_begin();
    CHECK_STATUS(loop_hello_check(&mine, &theirs, 1), GPUPORT_ERR_VERSION);
    log = capture_end();
    CHECK_MSG(strstr(log, "(loop hello record)") && strstr(log, "out of step"), "log: %s", log);
    theirs = loop_stats.last_hello;
    mine.chunk = CHUNK * 2;
    capture_begin();
    CHECK_STATUS(loop_hello_check(&mine, &theirs, theirs.rank), GPUPORT_ERR_INVALID_CONFIG);
    CHECK(strstr(capture_end(), "GPUPORT_LOOP_CHUNK must agree"));
}

int main(void)
{
    testenv_clear_gpuport();
    test_registered();
    test_bad_setting();
    setenv("GPUPORT_TRANSPORT", "loop", 1);
    setenv("GPUPORT_LOOP_CHUNK", "1000", 1);
    CHECK(local_run(2, channel_over_loop, NULL) == 0);
    unsetenv("GPUPORT_TRANSPORT");
    unsetenv("GPUPORT_LOOP_CHUNK");
    /* both ranks' puts: 13 pieces each, one value and two signals each */
    CHECK_MSG(loop_stats.puts == 2 && loop_stats.chunks == 26 && loop_stats.chunk == CHUNK,
              "puts %llu, pieces %llu of %llu", (unsigned long long)loop_stats.puts,
              (unsigned long long)loop_stats.chunks, (unsigned long long)loop_stats.chunk);
    CHECK(loop_stats.values == 2 && loop_stats.signals >= 2 && loop_stats.signals <= 4);
    test_record();
    printf("tl_loop: all checks passed\n");
    return 0;
}
