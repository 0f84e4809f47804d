/*
 * The cuda_ipc relay's server takes a request (cipc_relay.c) from words
 * its peer wrote into this rank's control segment: it must carry only one
 * that is the next in sequence, of a known kind, and inside the source and
 * staging the peer declared at creation; anything else fails the channel
 * as the peer's protocol error, and nothing is copied. Each rejection is a
 * case here, beside the requests a client makes (a batch of small puts in
 * half 1, a large put's piece, a get's unstage) and their edges. The check
 * is compiled into every build (cipc_check.c) and fuzzed (fuzz_records);
 * the relay itself runs on a GPU (test_gpu_held, test_gpu_channels over
 * cudaMalloc memory).
 */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "transport/cuda_ipc/cipc_check.h"

#define SRC (1ull << 20)
#define STG (4ull << 20)
#define HALF (STG / 2)

typedef struct req {
    const char *what;
    uint64_t seq, served, kind, off, size, stg_off;
} req_t;

int main(void)
{
    static const req_t good[] = {
        {"first request: a batch into half 0", 1, 0, 1, 0, 4096, 0},
        {"a batch into half 1", 8, 7, 1, 512, 64, HALF},
        {"the whole source into half 1", 2, 1, 1, 0, SRC, HALF},
        {"a piece ending at the source's end", 3, 2, 1, SRC - 1, 1, 0},
        {"a get's unstage", 4, 3, 2, 100, 200, 0},
        {"a piece ending at the staging's end", 5, 4, 1, 0, 64, STG - 64},
    };
    static const req_t bad[] = {
        {"a replay of the last request", 7, 7, 1, 0, 64, 0},
        {"a sequence number that skips one", 9, 7, 1, 0, 64, 0},
        {"an older sequence number", 3, 7, 1, 0, 64, 0},
        {"kind 0", 1, 0, 0, 0, 64, 0},
        {"kind 3", 1, 0, 3, 0, 64, 0},
        {"no bytes", 1, 0, 1, 0, 0, 0},
        {"a source offset past the source", 1, 0, 1, SRC + 1, 1, 0},
        {"a source range past its end", 1, 0, 1, SRC - 8, 16, 0},
        {"a source range whose end wraps", 1, 0, 1, 8, UINT64_MAX - 4, 0},
        {"a staging offset past the staging", 1, 0, 1, 0, 1, STG + 1},
        {"a staging range past its end", 1, 0, 1, 0, 128, STG - 64},
        {"a staging range whose end wraps", 1, 0, 2, 0, 64, UINT64_MAX - 8},
        {"more than the staging holds", 1, 0, 1, 0, STG + 1, 0},
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        const req_t *r = &good[i];
        CHECK_MSG(cipc_relay_request_ok(r->seq, r->served, r->kind, r->off, r->size, r->stg_off,
                                        SRC, STG),
                  "refused: %s", r->what);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const req_t *r = &bad[i];
        CHECK_MSG(!cipc_relay_request_ok(r->seq, r->served, r->kind, r->off, r->size, r->stg_off,
                                         SRC, STG),
                  "carried: %s", r->what);
    }
    printf("PASS relay requests: %zu a client makes carried, %zu refused\n",
           sizeof(good) / sizeof(good[0]), sizeof(bad) / sizeof(bad[0]));
    return 0;
}
