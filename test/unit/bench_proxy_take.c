/*
 * The proxy thread's cost per trigger, without a GPU or a peer: a lap of
 * triggers written into a FIFO as producers write them (word 1, then word 0
 * with its lap parity by a release store), then taken by the proxy's own
 * consumer (proxy_consume_fifo) until the tail reaches the head, timed. A
 * fake communicator of 64 channels stands in for a real one, and a mock
 * transport whose signal, put and put_value only count stands in for the
 * transports, so what is timed is the proxy's take, dispatch, signal
 * folding and hand-over, not memory traffic.
 *
 * Beside each row, in the same run, a baseline: the same lap's slots read
 * and released by the FIFO's own gpuport_fifo_peek and
 * gpuport_fifo_advance, in batches as the proxy takes them, with no
 * dispatch. The difference is the proxy's own part; the ratio of the two
 * moves less with the machine's speed, which on a VM changes from run to
 * run by as much as the regression below did. A change that moved the
 * dispatch to its own file cost a device-FIFO signal 205 instructions
 * against 127 before (14.5 against 8.6 ns on the 2-core development
 * machine; d4342f2 took it back): this program shows such a change, as a
 * ratio of about 8 against 5 for that row.
 *
 * Rows: signals on the device FIFO to one channel (folded into one
 * transport call a batch) and spread over the 64 (a call each), signals on
 * the host FIFO (where each trigger also settles the channel's host
 * position), put_value and 8-byte puts on the device FIFO. Puts and values
 * need no memory here: the mock transport is handed offsets only, and the
 * regions' sizes are set for the range checks. Gets, atomic adds and
 * accumulates are left out: they go through the transport's rma entry and
 * its rma_ok checks, which belong to the transports, not to the take.
 *
 * Every lap is checked: the mock transport's counts (the signals' sum, the
 * puts and values and their bytes) equal what the lap wrote, no channel
 * failed or parked, and the FIFO's tail reached its head; the baseline's
 * laps likewise. A mismatch is printed and the program exits 1.
 * bench_proxy_take --check runs three short laps of each row, checks only
 * and asserts no time (proxy_take_counts.sh runs it in make check).
 *
 * Usage: bench_proxy_take [--laps N] [--log2 L] [--check]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "proxy/proxy_int.h"

#define NCHAN 64u
/* the proxy takes at most this many triggers a pass (proxy_take.c): the
 * baseline releases its slots in the same batches */
#define BATCH 64u
/* about 1.5 s on the 2-core development machine */
#define DEFAULT_LAPS 400
/* 16,384 slots, the lap the harness that found the regression timed */
#define DEFAULT_LOG2 14u
#define CHECK_LAPS 3
#define CHECK_LOG2 8u
/* consumer passes in a row that take nothing before a lap is called stuck */
#define STUCK_PASSES 100000

/* What the mock transport was handed since the last reset. */
static struct {
    uint64_t signal_calls, signals;
    uint64_t puts, put_bytes;
    uint64_t values, value_sum;
    uint64_t bad_offsets;
} seen;

static int mock_signal(gpuport_tl_chan_t *ch, uint64_t n, int behind_work, gpuport_work_t *w)
{
    (void)ch, (void)behind_work, (void)w;
    seen.signal_calls++;
    seen.signals += n;
    return GPUPORT_TRANSPORT_DONE;
}

static int mock_put(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t src_off, uint64_t size,
                    int behind_work, gpuport_work_t *w)
{
    (void)ch, (void)behind_work, (void)w;
    seen.puts++;
    seen.put_bytes += size;
    seen.bad_offsets += dst_off != 0 || src_off != 0;
    return GPUPORT_TRANSPORT_DONE;
}

static int mock_put_value(gpuport_tl_chan_t *ch, uint64_t dst_off, uint64_t value,
                          int behind_work, gpuport_work_t *w)
{
    (void)ch, (void)behind_work, (void)w;
    seen.values++;
    seen.value_sum += value;
    seen.bad_offsets += dst_off != 0;
    return GPUPORT_TRANSPORT_DONE;
}

static const gpuport_transport_ops_t mock_ops = {
    .name = "mock", .put = mock_put, .signal = mock_signal, .put_value = mock_put_value};

typedef struct {
    const char *name;
    int fifo;      /* GPUPORT_FIFO_HOST or GPUPORT_FIFO_DEVICE */
    uint32_t op;   /* GPUPORT_OP_SIGNAL, _PUT or _PUT_VALUE */
    uint32_t nchan; /* triggers go to channels 0 .. nchan - 1 in turn */
    uint32_t most;  /* SIGNAL: 0, each trigger size 0 (one signal); else trigger k's size is
                     * k % (most + 1), the count a warp's folded signals carry (0 counts one) */
} row_t;

static const row_t rows[] = {
    {"signal, device, 1 channel", GPUPORT_FIFO_DEVICE, GPUPORT_OP_SIGNAL, 1, 0},
    {"signal, device, 64 channels", GPUPORT_FIFO_DEVICE, GPUPORT_OP_SIGNAL, NCHAN, 0},
    {"signal x0-32, device, 64 chan", GPUPORT_FIFO_DEVICE, GPUPORT_OP_SIGNAL, NCHAN, 32},
    {"signal, host, 1 channel", GPUPORT_FIFO_HOST, GPUPORT_OP_SIGNAL, 1, 0},
    {"put_value, device, 1 channel", GPUPORT_FIFO_DEVICE, GPUPORT_OP_PUT_VALUE, 1, 0},
    {"put 8 B, device, 1 channel", GPUPORT_FIFO_DEVICE, GPUPORT_OP_PUT, 1, 0},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static struct gpuport_comm *comm;
static gpuport_chan_state_t *states;
/* each FIFO's ring and words: the device FIFO has its give-up word, as
 * the real one has, so its consumer looks at it as it does there */
static gpuport_fifo_t fifos[GPUPORT_NFIFOS];
static _Atomic uint64_t heads[GPUPORT_NFIFOS], tails[GPUPORT_NFIFOS];
static _Atomic uint32_t gave_up_any;
/* the signals the last lap's triggers carry */
static uint64_t lap_signals;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void setup(uint32_t log2)
{
    comm = calloc(1, sizeof(*comm));
    states = aligned_alloc(64, NCHAN * sizeof(*states));
    CHECK(comm && states);
    memset(states, 0, NCHAN * sizeof(*states));
    comm->states = states;
    comm->config.max_channels = NCHAN;
    comm->pchans = calloc(NCHAN, sizeof(*comm->pchans));
    comm->ctrl = calloc(NCHAN, sizeof(*comm->ctrl));
    comm->proxy.sig_list = calloc(NCHAN, sizeof(uint32_t));
    CHECK(comm->pchans && comm->ctrl && comm->proxy.sig_list);
    comm->proxy.flusher.capacity = 64;
    CHECK_OK(proxy_park_init(comm));
    for (uint32_t i = 0; i < NCHAN; i++) {
        gpuport_pchan_t *ch = &comm->pchans[i];
        ch->tl.id = i;
        ch->tl.comm = comm;
        ch->state = &states[i];
        ch->ops = &mock_ops;
        /* room for an 8-byte put or value at offset 0 */
        ch->tl.src.size = ch->tl.dst.rec.size = 64;
        atomic_store(&ch->active, 1);
    }
    for (int k = 0; k < GPUPORT_NFIFOS; k++) {
        gpuport_fifo_t *f = &fifos[k];
        memset(f, 0, sizeof(*f));
        f->size = 1u << log2;
        f->log2_size = log2;
        f->slots = aligned_alloc(64, (size_t)f->size * sizeof(gpuport_trigger_t));
        CHECK(f->slots);
        /* parity 0 in every slot is the lap before position 0's */
        memset(f->slots, 0, (size_t)f->size * sizeof(gpuport_trigger_t));
        f->head = &heads[k];
        f->tail = &tails[k];
        f->gave_up_any = k == GPUPORT_FIFO_DEVICE ? &gave_up_any : NULL;
    }
}

static void teardown(void)
{
    for (int k = 0; k < GPUPORT_NFIFOS; k++)
        free(fifos[k].slots);
    gpuport_proxy_parks_free(comm);
    free(comm->proxy.sig_list);
    free(comm->ctrl);
    free(comm->pchans);
    free(comm);
    free(states);
}

/* A lap of the row's triggers at the FIFO's next positions, as producers
 * write them: the head moved first (the reservation), then each slot's
 * word 1 and its word 0 with the parity of the slot's lap, released. */
static void write_lap(const row_t *r, gpuport_fifo_t *f)
{
    uint64_t base = atomic_load(f->head);

    atomic_store(f->head, base + f->size);
    lap_signals = 0;
    for (uint32_t k = 0; k < f->size; k++) {
        uint64_t pos = base + k;
        gpuport_trigger_t t, *slot = &f->slots[pos & (f->size - 1)];
        uint32_t ch = k % r->nchan;

        if (r->op == GPUPORT_OP_PUT_VALUE)
            gpuport_trigger_encode_value(&t, r->op, ch, 0, pos);
        else
            gpuport_trigger_encode(&t, r->op, ch, 0, 0,
                                   r->op == GPUPORT_OP_PUT ? 8 : r->most ? k % (r->most + 1) : 0);
        if (r->op == GPUPORT_OP_SIGNAL)
            lap_signals += r->most && k % (r->most + 1) ? k % (r->most + 1) : 1;
        slot->w[1] = t.w[1];
        atomic_store_explicit((_Atomic uint64_t *)&slot->w[0],
                              t.w[0] | (uint64_t)gpuport_trigger_parity(pos, f->log2_size)
                                           << GPUPORT_TRG_PARITY_SHIFT,
                              memory_order_release);
    }
}

/* Says a lap's mismatch and ends the program: a count that differs is the
 * point of the check, not a time. */
#define LAP_CHECK(cond, r, lap, what, ...)                                                      \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "bench_proxy_take: %s, lap %d (%s): ", (r)->name, (lap), (what));   \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static void check_fifo_done(const row_t *r, int lap, const char *what, const gpuport_fifo_t *f)
{
    uint64_t head = atomic_load(f->head), tail = atomic_load(f->tail);

    LAP_CHECK(tail == head && f->pos == head, r, lap, what,
              "the FIFO's tail is %llu and the consumer at %llu, its head %llu",
              (unsigned long long)tail, (unsigned long long)f->pos, (unsigned long long)head);
}

/* The baseline: the lap's slots read by gpuport_fifo_peek and released by
 * gpuport_fifo_advance, a batch at a time, with nothing done for them. The
 * slots' ops are counted, so that the loads are not optimized away and the
 * lap is checked like the proxy's. noinline: a call per batch, as the
 * proxy's is. */
static __attribute__((noinline)) uint32_t peek_batch(gpuport_fifo_t *f, uint64_t *ops)
{
    uint32_t n = 0;
    gpuport_trigger_t t;

    while (n < BATCH && gpuport_fifo_peek(f, n, &t)) {
        *ops += gpuport_trigger_op(t.w[0]) == GPUPORT_OP_EXT ? 0 : 1;
        n++;
    }
    if (n)
        gpuport_fifo_advance(f, n);
    return n;
}

static double baseline_lap(const row_t *r, int lap)
{
    gpuport_fifo_t *f = &fifos[r->fifo];
    uint64_t head, ops = 0, t0, t1;
    uint32_t idle = 0;

    write_lap(r, f);
    head = atomic_load(f->head);
    t0 = now_ns();
    while (f->pos < head) {
        idle = peek_batch(f, &ops) ? 0 : idle + 1;
        LAP_CHECK(idle < STUCK_PASSES, r, lap, "peek/advance",
                  "nothing to read for %d passes at position %llu of %llu", STUCK_PASSES,
                  (unsigned long long)f->pos, (unsigned long long)head);
    }
    t1 = now_ns();
    LAP_CHECK(ops == f->size, r, lap, "peek/advance", "%llu triggers read, %u written",
              (unsigned long long)ops, f->size);
    check_fifo_done(r, lap, "peek/advance", f);
    return (double)(t1 - t0) / f->size;
}

/* The proxy's lap: proxy_consume_fifo until the tail reaches the head; the
 * mock transport's counts then say what was carried out. */
static double proxy_lap(const row_t *r, int lap, uint64_t *calls)
{
    gpuport_fifo_t *f = &fifos[r->fifo];
    uint64_t head, base, want_sum = 0, t0, t1;
    uint32_t idle = 0;

    write_lap(r, f);
    head = atomic_load(f->head);
    base = head - f->size;
    memset(&seen, 0, sizeof(seen));
    t0 = now_ns();
    while (f->pos < head) {
        uint64_t before = f->pos;
        proxy_consume_fifo(comm, f, r->fifo);
        idle = f->pos == before ? idle + 1 : 0;
        LAP_CHECK(idle < STUCK_PASSES, r, lap, "proxy",
                  "the consumer took nothing for %d passes at position %llu of %llu",
                  STUCK_PASSES, (unsigned long long)f->pos, (unsigned long long)head);
    }
    t1 = now_ns();

    check_fifo_done(r, lap, "proxy", f);
    LAP_CHECK(comm->proxy.nsig == 0 && comm->proxy.parked_total == 0, r, lap, "proxy",
              "%u channels with signals held back and %llu triggers parked after the lap",
              comm->proxy.nsig, (unsigned long long)comm->proxy.parked_total);
    for (uint32_t i = 0; i < NCHAN; i++) {
        gpuport_status_t st = (gpuport_status_t)atomic_load(&states[i].status);
        LAP_CHECK(st == GPUPORT_OK, r, lap, "proxy", "channel %u failed: %s", i,
                  gpuport_status_string(st));
    }
    LAP_CHECK(seen.signals == (r->op == GPUPORT_OP_SIGNAL ? lap_signals : 0), r, lap, "proxy",
              "the transport was handed %llu signals (in %llu calls), the lap wrote %u %s "
              "triggers carrying %llu",
              (unsigned long long)seen.signals, (unsigned long long)seen.signal_calls, f->size,
              gpuport_op_name(r->op), (unsigned long long)lap_signals);
    LAP_CHECK(seen.puts == (r->op == GPUPORT_OP_PUT ? f->size : 0) &&
                  seen.put_bytes == 8 * seen.puts,
              r, lap, "proxy", "%llu puts of %llu bytes in all carried out, the lap wrote %u %s",
              (unsigned long long)seen.puts, (unsigned long long)seen.put_bytes, f->size,
              gpuport_op_name(r->op));
    if (r->op == GPUPORT_OP_PUT_VALUE)
        for (uint64_t pos = base; pos < head; pos++)
            want_sum += pos; /* each value is its trigger's position */
    LAP_CHECK(seen.values == (r->op == GPUPORT_OP_PUT_VALUE ? f->size : 0) &&
                  seen.value_sum == want_sum,
              r, lap, "proxy",
              "%llu values carried out, summing to %llu; the lap wrote %u %s, summing to %llu",
              (unsigned long long)seen.values, (unsigned long long)seen.value_sum, f->size,
              gpuport_op_name(r->op), (unsigned long long)want_sum);
    LAP_CHECK(seen.bad_offsets == 0, r, lap, "proxy", "%llu operations at the wrong offset",
              (unsigned long long)seen.bad_offsets);
    /* host triggers are settled as they complete: the channel's published
     * host position is the lap's end */
    if (r->fifo == GPUPORT_FIFO_HOST) {
        uint64_t flushed = atomic_load(&states[0].flushed[GPUPORT_FIFO_HOST]);
        LAP_CHECK(flushed == head, r, lap, "proxy",
                  "channel 0's settled host position is %llu, the lap ended at %llu",
                  (unsigned long long)flushed, (unsigned long long)head);
    }
    *calls = seen.signal_calls + seen.puts + seen.values;
    return (double)(t1 - t0) / f->size;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: bench_proxy_take [--laps N] [--log2 L] [--check]\n"
            "  --laps N  laps timed per row (default %d)\n"
            "  --log2 L  FIFO of 2^L slots, a lap's triggers (default %u, 2..24)\n"
            "  --check   %d laps of 2^%u slots per row: counts checked, times not meaningful\n",
            DEFAULT_LAPS, DEFAULT_LOG2, CHECK_LAPS, CHECK_LOG2);
}

static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned long *v)
{
    char *end;

    if (!s || *s < '0' || *s > '9')
        return 0;
    *v = strtoul(s, &end, 10);
    return *end == '\0' && *v >= lo && *v <= hi;
}

int main(int argc, char **argv)
{
    unsigned long laps = DEFAULT_LAPS, log2 = DEFAULT_LOG2;
    int check = 0;
    double *pns, *bns;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--laps") && parse_uint(argv[i + 1], 1, 1000000, &laps)) {
            i++;
        } else if (!strcmp(argv[i], "--log2") && parse_uint(argv[i + 1], 2, 24, &log2)) {
            i++;
        } else if (!strcmp(argv[i], "--check")) {
            check = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_proxy_take: bad argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (check) {
        laps = CHECK_LAPS;
        log2 = CHECK_LOG2;
    }
    setup((uint32_t)log2);
    pns = malloc(laps * sizeof(double));
    bns = malloc(laps * sizeof(double));
    CHECK(pns && bns);

    printf("bench_proxy_take: %lu laps of %u triggers per row, %u channels, a mock transport "
           "that counts\n%s",
           laps, 1u << log2, NCHAN, check ? "--check: counts only, times not meaningful\n" : "");
    printf("ns per trigger over the laps; M/s at the median; calls: the transport's, a lap;\n"
           "own: the medians' difference; proxy / peek: their ratio, which the machine's speed\n"
           "moves less than the times (a VM's cores run at different speeds from call to call)\n");
    printf("%-28s %-28s | %-21s | %7s %7s\n", "", "proxy_consume_fifo", "peek/advance only",
           "proxy's", "proxy /");
    printf("%-28s %7s %6s %6s %6s | %7s %6s %6s | %7s %7s\n", "row: op, FIFO, channels", "median",
           "min", "M/s", "calls", "median", "min", "M/s", "own", "peek");
    for (size_t ri = 0; ri < NROWS; ri++) {
        const row_t *r = &rows[ri];
        uint64_t calls = 0;

        /* baseline and proxy laps in turn, so that the machine's drift
         * falls on both alike */
        for (unsigned long lap = 0; lap < laps; lap++) {
            bns[lap] = baseline_lap(r, (int)lap);
            pns[lap] = proxy_lap(r, (int)lap, &calls);
        }
        qsort(pns, laps, sizeof(double), cmp_double);
        qsort(bns, laps, sizeof(double), cmp_double);
        printf("%-28s %7.2f %6.2f %6.1f %6llu | %7.2f %6.2f %6.1f | %7.2f %7.2f\n", r->name,
               pns[laps / 2], pns[0], 1e3 / pns[laps / 2], (unsigned long long)calls,
               bns[laps / 2], bns[0], 1e3 / bns[laps / 2], pns[laps / 2] - bns[laps / 2],
               pns[laps / 2] / bns[laps / 2]);
    }
    printf("every lap's counts matched: %lu laps x %zu rows, proxy and baseline\n", laps, NROWS);
    free(pns);
    free(bns);
    teardown();
    return 0;
}
