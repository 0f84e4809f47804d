/*
 * port_ops.c: gpuport.PortChannel's host operations (put, signal, get,
 * atomic_add, accumulate, flush, wait, poll, ...) and the calls over many
 * channels (wait_all, flush_all, create_all). Every call that may wait (a
 * full FIFO, a flush, a wait) runs with the GIL released; the channel and
 * its communicator count it in flight, so that close() is refused meanwhile.
 */
#include "gpuport_py.h"

extern PyTypeObject chan_base_type;
int gp_chan_new_port(PyTypeObject *t);
PyObject *gp_chan_wrap(PyTypeObject *type, comm_obj *c, int kind, void *h, int peer,
                       PyObject *src, PyObject *dst);
int gp_chan_regions(comm_obj *c, PyObject *src, PyObject *dst, gpuport_mem_t *s,
                    gpuport_mem_t *d);

static int u64_arg(PyObject *o, uint64_t *v)
{
    unsigned long long x;
    if (PyLong_CheckExact(o)) {
        x = PyLong_AsUnsignedLongLong(o);
    } else {
        PyObject *i = PyNumber_Index(o);
        if (!i)
            return -1;
        x = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
    }
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *v = x;
    return 0;
}

/* A 64-bit value given as a signed or an unsigned int. */
static int bits64_arg(PyObject *o, uint64_t *v)
{
    long long s;
    if (u64_arg(o, v) == 0)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_OverflowError))
        return -1;
    PyErr_Clear();
    s = PyLong_AsLongLong(o);
    if (s == -1 && PyErr_Occurred())
        return -1;
    *v = (uint64_t)s;
    return 0;
}

static int nargs_ok(const char *name, Py_ssize_t n, Py_ssize_t want)
{
    if (n == want)
        return 1;
    PyErr_Format(PyExc_TypeError, "PortChannel.%s takes %zd arguments (%zd given)", name, want, n);
    return 0;
}

/* Runs CALL on an open channel with the GIL released, counted in flight. */
#define OP(k, name, CALL)                                                                       \
    do {                                                                                        \
        gpuport_status_t st_;                                                                   \
        comm_obj *c_;                                                                           \
        if (!(k)->ch)                                                                           \
            return gp_closed("the PortChannel");                                                \
        c_ = (k)->h.comm;                                                                       \
        (k)->h.busy++;                                                                          \
        c_->inflight++;                                                                         \
        Py_BEGIN_ALLOW_THREADS                                                                  \
        st_ = (CALL);                                                                           \
        Py_END_ALLOW_THREADS                                                                    \
        (k)->h.busy--;                                                                          \
        c_->inflight--;                                                                         \
        if (st_ != GPUPORT_OK)                                                                  \
            return gp_raise(st_, "PortChannel.%s (peer %d, rank %d)", name, (k)->peer,          \
                            c_->rank);                                                          \
    } while (0)

static PyObject *op3(chan_obj *k, PyObject *const *a, Py_ssize_t n, const char *name,
                     gpuport_status_t (*fn)(gpuport_channel_t, uint64_t, uint64_t, uint64_t))
{
    uint64_t x, y, z;
    if (!nargs_ok(name, n, 3) || u64_arg(a[0], &x) < 0 || u64_arg(a[1], &y) < 0 ||
        u64_arg(a[2], &z) < 0)
        return NULL;
    OP(k, name, fn(k->ch, x, y, z));
    Py_RETURN_NONE;
}

static PyObject *op_put(chan_obj *k, PyObject *const *a, Py_ssize_t n)
{
    return op3(k, a, n, "put", gpuport_channel_put);
}

static PyObject *op_put_with_signal(chan_obj *k, PyObject *const *a, Py_ssize_t n)
{
    return op3(k, a, n, "put_with_signal", gpuport_channel_put_with_signal);
}

static PyObject *op_get(chan_obj *k, PyObject *const *a, Py_ssize_t n)
{
    return op3(k, a, n, "get", gpuport_channel_get);
}

static PyObject *value_op(chan_obj *k, PyObject *const *a, Py_ssize_t n, const char *name,
                          gpuport_status_t (*fn)(gpuport_channel_t, uint64_t, uint64_t))
{
    uint64_t off, v;
    if (!nargs_ok(name, n, 2) || u64_arg(a[0], &off) < 0 || bits64_arg(a[1], &v) < 0)
        return NULL;
    OP(k, name, fn(k->ch, off, v));
    Py_RETURN_NONE;
}

static PyObject *op_put_value(chan_obj *k, PyObject *const *a, Py_ssize_t n)
{
    return value_op(k, a, n, "put_value", gpuport_channel_put_value);
}

static PyObject *op_put_value_with_signal(chan_obj *k, PyObject *const *a, Py_ssize_t n)
{
    return value_op(k, a, n, "put_value_with_signal", gpuport_channel_put_value_with_signal);
}

static PyObject *op_atomic_add(chan_obj *k, PyObject *const *a, Py_ssize_t n)
{
    uint64_t off;
    long long v;
    if (!nargs_ok("atomic_add", n, 2) || u64_arg(a[0], &off) < 0)
        return NULL;
    v = PyLong_AsLongLong(a[1]);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    OP(k, "atomic_add", gpuport_channel_atomic_add(k->ch, off, (int64_t)v));
    Py_RETURN_NONE;
}

/* A gpuport_dtype_t from an int, a name or anything with .name (a NumPy
 * dtype or type). */
static int dtype_arg(PyObject *o, gpuport_dtype_t *t)
{
    static const char *names[] = {NULL, "int64", "uint64", "float32", "bfloat16"};
    PyObject *name = NULL;
    const char *s;

    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v < GPUPORT_INT64 || v > GPUPORT_BFLOAT16) {
            if (!PyErr_Occurred())
                gp_raise(GPUPORT_ERR_INVALID_ARG, "accumulate: %ld is not a gpuport dtype", v);
            return -1;
        }
        *t = (gpuport_dtype_t)v;
        return 0;
    }
    if (PyUnicode_Check(o)) {
        Py_INCREF(o);
        name = o;
    } else if (PyObject_HasAttrString(o, "dtype") && !PyType_Check(o)) {
        PyObject *d = PyObject_GetAttrString(o, "dtype");
        name = d ? PyObject_GetAttrString(d, "name") : NULL;
        Py_XDECREF(d);
    } else if (PyType_Check(o)) {
        name = PyObject_GetAttrString(o, "__name__");
    } else {
        name = PyObject_GetAttrString(o, "name");
    }
    if (!name || !(s = PyUnicode_AsUTF8(name))) {
        Py_XDECREF(name);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "accumulate: dtype must be gpuport.INT64/UINT64/FLOAT32/BFLOAT16, a name or a "
                     "NumPy dtype, not %s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    for (int i = 1; i <= 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *t = (gpuport_dtype_t)i;
            Py_DECREF(name);
            return 0;
        }
    gp_raise(GPUPORT_ERR_INVALID_ARG,
             "accumulate: dtype %s is not one gpuport adds (int64, uint64, float32, bfloat16)", s);
    Py_DECREF(name);
    return -1;
}

static PyObject *op_accumulate(chan_obj *k, PyObject *const *a, Py_ssize_t n)
{
    uint64_t dst, src, count;
    gpuport_dtype_t t;
    if (!nargs_ok("accumulate", n, 4) || u64_arg(a[0], &dst) < 0 || u64_arg(a[1], &src) < 0 ||
        u64_arg(a[2], &count) < 0 || dtype_arg(a[3], &t) < 0)
        return NULL;
    OP(k, "accumulate", gpuport_channel_accumulate(k->ch, dst, src, count, t));
    Py_RETURN_NONE;
}

static PyObject *op_signal(chan_obj *k, PyObject *unused)
{
    (void)unused;
    OP(k, "signal", gpuport_channel_signal(k->ch));
    Py_RETURN_NONE;
}

static PyObject *op_flush(chan_obj *k, PyObject *unused)
{
    (void)unused;
    OP(k, "flush", gpuport_channel_flush(k->ch));
    Py_RETURN_NONE;
}

static PyObject *op_wait(chan_obj *k, PyObject *unused)
{
    (void)unused;
    OP(k, "wait", gpuport_channel_wait(k->ch));
    Py_RETURN_NONE;
}

static PyObject *op_wait_until(chan_obj *k, PyObject *arg)
{
    uint64_t v;
    if (u64_arg(arg, &v) < 0)
        return NULL;
    OP(k, "wait_until", gpuport_channel_wait_until(k->ch, v));
    Py_RETURN_NONE;
}

static PyObject *op_poll(chan_obj *k, PyObject *unused)
{
    int ready = 0;
    gpuport_status_t st;
    (void)unused;
    if (!k->ch)
        return gp_closed("the PortChannel");
    st = gpuport_channel_poll(k->ch, &ready);
    if (st != GPUPORT_OK)
        return gp_raise(st, "PortChannel.poll (peer %d)", k->peer);
    return PyBool_FromLong(ready);
}

static PyObject *op_signal_count(chan_obj *k, PyObject *unused)
{
    uint64_t v = 0;
    gpuport_status_t st;
    (void)unused;
    if (!k->ch)
        return gp_closed("the PortChannel");
    st = gpuport_channel_signal_count(k->ch, &v);
    if (st != GPUPORT_OK)
        return gp_raise(st, "PortChannel.signal_count (peer %d)", k->peer);
    return PyLong_FromUnsignedLongLong(v);
}

static PyObject *op_status(chan_obj *k, PyObject *unused)
{
    (void)unused;
    if (!k->ch)
        return gp_closed("the PortChannel");
    return PyLong_FromLong(gpuport_channel_status(k->ch));
}

static PyObject *op_transport(chan_obj *k, void *unused)
{
    (void)unused;
    if (!k->ch)
        return gp_closed("the PortChannel");
    return PyUnicode_FromString(gpuport_channel_transport(k->ch));
}

static PyMethodDef port_methods[] = {
    {"put", (PyCFunction)(void (*)(void))op_put, METH_FASTCALL,
     "put(dst_off, src_off, size): queues a copy of size bytes from this side's src region to "
     "the peer's dst region. Local."},
    {"put_with_signal", (PyCFunction)(void (*)(void))op_put_with_signal, METH_FASTCALL,
     "put_with_signal(dst_off, src_off, size): put, then signal, in one trigger. Local."},
    {"put_value", (PyCFunction)(void (*)(void))op_put_value, METH_FASTCALL,
     "put_value(dst_off, value): writes the 64-bit value at dst_off of the peer's region "
     "(dst_off a multiple of 8). Local."},
    {"put_value_with_signal", (PyCFunction)(void (*)(void))op_put_value_with_signal,
     METH_FASTCALL, "put_value_with_signal(dst_off, value): put_value, then signal. Local."},
    {"signal", (PyCFunction)op_signal, METH_NOARGS,
     "signal(): raises the peer's signal count once this side's earlier puts are visible. "
     "Local."},
    {"get", (PyCFunction)(void (*)(void))op_get, METH_FASTCALL,
     "get(peer_off, local_off, size): queues a copy from the peer's dst region into this "
     "side's src region; complete after a later flush(). Local."},
    {"atomic_add", (PyCFunction)(void (*)(void))op_atomic_add, METH_FASTCALL,
     "atomic_add(dst_off, value): adds the signed 64-bit value to the 8 bytes at dst_off of "
     "the peer's region, atomically. Local."},
    {"accumulate", (PyCFunction)(void (*)(void))op_accumulate, METH_FASTCALL,
     "accumulate(dst_off, src_off, count, dtype): adds count elements (int64, uint64, float32, "
     "bfloat16) of this side's src region into the peer's dst region, each atomically. Local."},
    {"flush", (PyCFunction)op_flush, METH_NOARGS,
     "flush(): returns when this side's earlier host operations are complete; waits up to "
     "GPUPORT_TIMEOUT_MS (GIL released). Local."},
    {"wait", (PyCFunction)op_wait, METH_NOARGS,
     "wait(): consumes one signal from the peer, waiting up to GPUPORT_TIMEOUT_MS (GIL "
     "released); raises Error(ERR_CLOSED / ERR_PEER) when the peer closed or died. Local."},
    {"wait_until", (PyCFunction)op_wait_until, METH_O,
     "wait_until(value): waits until the signal count reaches value (GIL released). Local."},
    {"poll", (PyCFunction)op_poll, METH_NOARGS,
     "poll() -> bool: consumes one signal if one arrived, without waiting. Local."},
    {"signal_count", (PyCFunction)op_signal_count, METH_NOARGS,
     "signal_count() -> int: signals received since creation (nothing consumed). Local."},
    {"status", (PyCFunction)op_status, METH_NOARGS,
     "status() -> int: the channel's error state (gpuport.OK or a negative status). Local."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef port_getset[] = {
    {"transport", (getter)op_transport, NULL, "shm, cuda_ipc, tcp or ib", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject port_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuport.PortChannel",
    .tp_basicsize = sizeof(chan_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PortChannel(comm, peer, src=None, dst=None)\n\nA port channel "
              "(gpuport_channel_create) to peer: puts read src (a Region of this rank), the "
              "peer's puts land in dst. Pairwise: the peer creates it too, naming this rank, in "
              "the same order; ends at GPUPORT_TIMEOUT_MS if it does not.",
    .tp_methods = port_methods,
    .tp_getset = port_getset,
};

/* n open PortChannels of a sequence, counted in flight; NULL on error. */
static gpuport_channel_t *channels_arg(PyObject *seq, Py_ssize_t *n_p, PyObject **fast_p)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of PortChannel");
    gpuport_channel_t *h;
    Py_ssize_t n;

    if (!fast)
        return NULL;
    n = PySequence_Fast_GET_SIZE(fast);
    h = PyMem_Malloc(sizeof(*h) * (size_t)(n ? n : 1));
    if (!h) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyObject_TypeCheck(o, &port_type) || !((chan_obj *)o)->ch) {
            PyMem_Free(h);
            Py_DECREF(fast);
            gp_raise(GPUPORT_ERR_INVALID_ARG, "item %zd is not an open PortChannel", i);
            return NULL;
        }
        h[i] = ((chan_obj *)o)->ch;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        chan_obj *k = (chan_obj *)PySequence_Fast_GET_ITEM(fast, i);
        k->h.busy++;
        k->h.comm->inflight++;
    }
    *n_p = n;
    *fast_p = fast;
    return h;
}

static void channels_done(gpuport_channel_t *h, Py_ssize_t n, PyObject *fast)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        chan_obj *k = (chan_obj *)PySequence_Fast_GET_ITEM(fast, i);
        k->h.busy--;
        k->h.comm->inflight--;
    }
    PyMem_Free(h);
    Py_DECREF(fast);
}

static PyObject *many(PyObject *seq, const char *name,
                      gpuport_status_t (*fn)(const gpuport_channel_t *, int))
{
    Py_ssize_t n;
    PyObject *fast;
    gpuport_channel_t *h = channels_arg(seq, &n, &fast);
    gpuport_status_t st;

    if (!h)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = fn(h, (int)n);
    Py_END_ALLOW_THREADS
    channels_done(h, n, fast);
    if (st != GPUPORT_OK)
        return gp_raise(st, "%s (%zd channels)", name, n);
    Py_RETURN_NONE;
}

static PyObject *py_wait_all(PyObject *self, PyObject *seq)
{
    (void)self;
    return many(seq, "gpuport_channel_wait_all", gpuport_channel_wait_all);
}

static PyObject *py_flush_all(PyObject *self, PyObject *seq)
{
    (void)self;
    return many(seq, "gpuport_channel_flush_all", gpuport_channel_flush_all);
}

static PyObject *py_create_all(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"comm", "src", "dst", "with_self", NULL};
    PyObject *co, *src = Py_None, *dst = Py_None, *list;
    int with_self = 0;
    comm_obj *c;
    gpuport_mem_t s, d;
    gpuport_channel_t *h;
    gpuport_status_t st;

    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOp:create_all", kw, &co, &src, &dst,
                                     &with_self))
        return NULL;
    if (!(c = gp_comm_arg(co)) || gp_chan_regions(c, src, dst, &s, &d) < 0)
        return NULL;
    h = PyMem_Calloc((size_t)c->size, sizeof(*h));
    if (!h)
        return PyErr_NoMemory();
    gp_setup_lock(c);
    Py_BEGIN_ALLOW_THREADS
    st = gpuport_channel_create_all(c->comm, s, d, with_self, h);
    Py_END_ALLOW_THREADS
    gp_setup_unlock(c);
    if (st != GPUPORT_OK) {
        /* entries whose destroy timed out stay for the communicator */
        PyMem_Free(h);
        return gp_raise(st, "gpuport_channel_create_all (rank %d)", c->rank);
    }
    list = PyList_New(c->size);
    for (int i = 0; list && i < c->size; i++) {
        PyObject *o = Py_None;
        if (h[i]) {
            o = gp_chan_wrap(&port_type, c, CHILD_PORT, h[i], i, src, dst);
            if (!o) {
                Py_CLEAR(list);
                break;
            }
        } else
            Py_INCREF(o);
        PyList_SET_ITEM(list, i, o);
    }
    PyMem_Free(h);
    return list;
}

PyMethodDef gp_channel_functions[] = {
    {"wait_all", py_wait_all, METH_O,
     "wait_all(channels): consumes one signal from each PortChannel, in any order, within one "
     "GPUPORT_TIMEOUT_MS (GIL released). Local."},
    {"flush_all", py_flush_all, METH_O,
     "flush_all(channels): flush() on each PortChannel; every one is flushed even after one "
     "fails (GIL released). Local."},
    {"create_all", (PyCFunction)(void (*)(void))py_create_all, METH_VARARGS | METH_KEYWORDS,
     "create_all(comm, src=None, dst=None, with_self=False) -> list: a PortChannel to every "
     "rank (None for this rank unless with_self). COLLECTIVE: every rank of comm calls it, "
     "as its one set-up call at the time; all succeed or all raise the same status."},
    {NULL, NULL, 0, NULL}};

int gp_channel_init(PyObject *m)
{
    if (PyType_Ready(&chan_base_type) < 0)
        return -1;
    gp_chan_new_port(&port_type);
    if (PyType_Ready(&port_type) < 0)
        return -1;
    Py_INCREF(&port_type);
    return PyModule_AddObject(m, "PortChannel", (PyObject *)&port_type);
}
