/* Assertions for gpuport's tests: a failed check prints where and why and
 * exits 1 (automake's FAIL); SKIP exits 77 with the reason. */
#ifndef GPUPORT_TEST_CHECK_H
#define GPUPORT_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "gpuport/gpuport.h"

#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);            \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                    \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);            \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

/* expects a gpuport_status_t */
#define CHECK_STATUS(expr, want)                                                                \
    do {                                                                                        \
        gpuport_status_t got_ = (expr);                                                         \
        if (got_ != (want)) {                                                                   \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__,         \
                    __LINE__, #expr, (int)got_, gpuport_status_string(got_), (int)(want),       \
                    gpuport_status_string(want));                                               \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, GPUPORT_OK)

#define SKIP(...)                                                                               \
    do {                                                                                        \
        fprintf(stderr, "SKIP: ");                                                              \
        fprintf(stderr, __VA_ARGS__);                                                           \
        fputc('\n', stderr);                                                                    \
        exit(77);                                                                               \
    } while (0)

#endif
