/*
 * bench.c: _gpuport._bench_pingpong, the ping-pong loop of
 * python/bench/pingpong.py written in C and run on the same channel, so that
 * the cost of a call from Python is measured beside the same calls from C
 * in one process, one run.
 */
#include <stdlib.h>
#include <time.h>

#include "gpuport_py.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* (ch, iters, first, size) -> list of round-trip times in ns: put_with_signal
 * of size bytes then wait (first), or wait then put_with_signal. */
static PyObject *py_bench_pingpong(PyObject *self, PyObject *args)
{
    PyObject *o, *list;
    int iters, first;
    unsigned long long size;
    uint64_t *t;
    gpuport_status_t st = GPUPORT_OK;
    gpuport_channel_t ch;

    (void)self;
    if (!PyArg_ParseTuple(args, "O!ipK", &port_type, &o, &iters, &first, &size))
        return NULL;
    if (!((chan_obj *)o)->ch)
        return gp_closed("the PortChannel");
    ch = ((chan_obj *)o)->ch;
    t = calloc((size_t)(iters > 0 ? iters : 1), sizeof(*t));
    if (!t)
        return PyErr_NoMemory();
    ((chan_obj *)o)->h.busy++;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < iters && st == GPUPORT_OK; i++) {
        uint64_t t0 = now_ns();
        if (first) {
            st = gpuport_channel_put_with_signal(ch, 0, 0, size);
            if (st == GPUPORT_OK)
                st = gpuport_channel_wait(ch);
        } else {
            st = gpuport_channel_wait(ch);
            if (st == GPUPORT_OK)
                st = gpuport_channel_put_with_signal(ch, 0, 0, size);
        }
        t[i] = now_ns() - t0;
    }
    Py_END_ALLOW_THREADS
    ((chan_obj *)o)->h.busy--;
    if (st != GPUPORT_OK) {
        free(t);
        return gp_raise(st, "bench_pingpong");
    }
    qsort(t, (size_t)iters, sizeof(*t), cmp_u64);
    list = PyList_New(iters);
    for (int i = 0; list && i < iters; i++)
        PyList_SET_ITEM(list, i, PyLong_FromUnsignedLongLong(t[i]));
    free(t);
    return list;
}

PyMethodDef gp_bench_functions[] = {
    {"_bench_pingpong", py_bench_pingpong, METH_VARARGS,
     "_bench_pingpong(ch, iters, first, size) -> sorted round-trip times (ns) of the "
     "put_with_signal + wait loop run in C (python/bench/pingpong.py)."},
    {NULL, NULL, 0, NULL}};
