/*
 * The range rule of gpuport_trigger.h (gpuport_range_fits, gpuport_put_fits,
 * gpuport_value_fits), which the host API, the proxy and kernels share: its
 * edges by name (size 0, exactly at the end, one past, off + size wrapping
 * around), then every combination of boundary values against 128-bit
 * arithmetic.
 */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "gpuport/gpuport_trigger.h"

#define MAX UINT64_MAX

typedef unsigned __int128 u128;

static int reference_fits(uint64_t off, uint64_t size, uint64_t region)
{
    return (u128)off + size <= region;
}

static void named_edges(void)
{
    /* size 0: anywhere up to the end, not past it */
    CHECK(gpuport_range_fits(0, 0, 0));
    CHECK(gpuport_range_fits(10, 0, 10));
    CHECK(!gpuport_range_fits(11, 0, 10));
    CHECK(gpuport_range_fits(MAX, 0, MAX));
    /* exactly at the end, and one past */
    CHECK(gpuport_range_fits(0, 10, 10));
    CHECK(gpuport_range_fits(6, 4, 10));
    CHECK(!gpuport_range_fits(7, 4, 10));
    CHECK(!gpuport_range_fits(0, 11, 10));
    CHECK(!gpuport_range_fits(0, 1, 0));
    CHECK(gpuport_range_fits(0, MAX, MAX));
    CHECK(!gpuport_range_fits(1, MAX, MAX));
    /* off + size wraps to a small number: a naive off + size <= region
     * would take these */
    CHECK(!gpuport_range_fits(8, MAX - 7, 16)); /* 8 + (2^64 - 8) wraps to 0 */
    CHECK(!gpuport_range_fits(MAX, 2, 10));     /* wraps to 1 */
    CHECK(!gpuport_range_fits(MAX - 3, 8, MAX));

    /* a put: both regions, and the size a trigger can carry */
    CHECK(gpuport_put_fits(0, 0, 100, 100, 100));
    CHECK(!gpuport_put_fits(1, 0, 100, 100, 100));   /* destination one past */
    CHECK(!gpuport_put_fits(0, 1, 100, 100, 100));   /* source one past */
    CHECK(gpuport_put_fits(50, 0, 50, 50, 100));     /* each region exactly to its end */
    CHECK(gpuport_put_fits(7, 7, 0, 7, 7));          /* size 0 at both ends */
    CHECK(!gpuport_put_fits(0, 8, MAX - 7, MAX, 16)); /* wrap on the source side */
    CHECK(gpuport_put_fits(0, 0, GPUPORT_TRIGGER_SIZE_MAX, MAX, MAX));
    CHECK(!gpuport_put_fits(0, 0, GPUPORT_TRIGGER_SIZE_MAX + 1, MAX, MAX));

    /* a value: 8 aligned bytes, within what a value trigger carries */
    CHECK(gpuport_value_fits(0, 8));
    CHECK(!gpuport_value_fits(0, 7));
    CHECK(gpuport_value_fits(8, 16));  /* exactly at the end */
    CHECK(!gpuport_value_fits(16, 16)); /* one past: 8 bytes past the end */
    CHECK(!gpuport_value_fits(12, 64) && !gpuport_value_aligned(12));
    CHECK(!gpuport_value_fits(MAX - 7, MAX) && gpuport_value_aligned(MAX - 7)); /* wraps */
    CHECK(gpuport_value_fits(GPUPORT_TRIGGER_VALUE_OFF_MAX, MAX));
    CHECK(!gpuport_value_fits(GPUPORT_TRIGGER_VALUE_OFF_MAX + 8, MAX));
    printf("PASS named edges\n");
}

static void boundaries(void)
{
    static const uint64_t v[] = {0,
                                 1,
                                 7,
                                 8,
                                 9,
                                 4095,
                                 4096,
                                 4097,
                                 0xffffffffull,
                                 0x100000000ull,
                                 GPUPORT_TRIGGER_SIZE_MAX,
                                 GPUPORT_TRIGGER_SIZE_MAX + 1,
                                 GPUPORT_TRIGGER_VALUE_OFF_MAX,
                                 GPUPORT_TRIGGER_VALUE_OFF_MAX + 8,
                                 1ull << 63,
                                 MAX - 8,
                                 MAX - 7,
                                 MAX - 1,
                                 MAX};
    const size_t n = sizeof(v) / sizeof(v[0]);
    unsigned long checked = 0;

    for (size_t a = 0; a < n; a++) {
        for (size_t b = 0; b < n; b++) {
            for (size_t c = 0; c < n; c++) {
                uint64_t off = v[a], size = v[b], region = v[c];
                int want = reference_fits(off, size, region);
                CHECK_MSG(gpuport_range_fits(off, size, region) == want,
                          "range_fits(%llu, %llu, %llu) != %d", (unsigned long long)off,
                          (unsigned long long)size, (unsigned long long)region, want);
                /* a put over the same range as source, against a large destination, and as
                 * destination, against a large source */
                want = want && size <= GPUPORT_TRIGGER_SIZE_MAX;
                CHECK(gpuport_put_fits(0, off, size, region, MAX) == want);
                CHECK(gpuport_put_fits(off, 0, size, MAX, region) == want);
                checked += 3;
            }
        }
    }
    for (size_t a = 0; a < n; a++) {
        for (size_t b = 0; b < n; b++) {
            uint64_t off = v[a], region = v[b];
            int want = off % 8 == 0 && off <= GPUPORT_TRIGGER_VALUE_OFF_MAX &&
                       reference_fits(off, 8, region);
            CHECK_MSG(gpuport_value_fits(off, region) == want, "value_fits(%llu, %llu) != %d",
                      (unsigned long long)off, (unsigned long long)region, want);
            checked++;
        }
    }
    printf("PASS %lu checks on boundary values against 128-bit arithmetic\n", checked);
}

int main(void)
{
    named_edges();
    boundaries();
    return 0;
}
