/*
 * comm.c: gpuport.Comm, a communicator over an mpi4py communicator; its
 * list of children, its set-up lock, close() and the at-exit close.
 *
 * An open communicator is referenced by the module's list of open
 * communicators, so the garbage collector never finalizes one open: it ends
 * in close() (explicit, or the with-block's) or in the atexit hook, both
 * ordinary calls that may wait, bounded by GPUPORT_TIMEOUT_MS.
 */
#include <time.h>

#include <mpi4py/mpi4py.h>

#include "gpuport_py.h"

void gp_region_release(region_obj *r);
void gp_chan_drop(chan_obj *c);
void gp_alloc_drop(alloc_obj *a);

static comm_obj open_comms = {.reg_prev = &open_comms, .reg_next = &open_comms};

void gp_setup_lock(comm_obj *c)
{
    if (PyThread_acquire_lock(c->setup, NOWAIT_LOCK))
        return;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->setup, WAIT_LOCK);
    Py_END_ALLOW_THREADS
}

int gp_setup_try(comm_obj *c)
{
    return PyThread_acquire_lock(c->setup, NOWAIT_LOCK);
}

void gp_setup_unlock(comm_obj *c)
{
    PyThread_release_lock(c->setup);
}

void gp_child_link(comm_obj *c, child_obj *ch, int kind)
{
    Py_INCREF(c);
    ch->comm = c;
    ch->kind = kind;
    ch->next = c->children.next;
    ch->prev = &c->children;
    c->children.next->prev = ch;
    c->children.next = ch;
}

void gp_child_unlink(child_obj *ch)
{
    comm_obj *c = ch->comm;

    if (!c)
        return;
    ch->prev->next = ch->next;
    ch->next->prev = ch->prev;
    ch->prev = ch->next = NULL;
    ch->comm = NULL;
    Py_DECREF(c);
}

comm_obj *gp_comm_arg(PyObject *o)
{
    comm_obj *c;

    if (!PyObject_TypeCheck(o, &comm_type)) {
        gp_raise(GPUPORT_ERR_INVALID_ARG, "expected a gpuport.Comm, got %s", Py_TYPE(o)->tp_name);
        return NULL;
    }
    c = (comm_obj *)o;
    if (!c->comm) {
        gp_closed("the communicator");
        return NULL;
    }
    return c;
}

int gp_comm_gpu_mode(comm_obj *c)
{
    void *p = NULL;
    gpuport_status_t st;

    if (c->gpu_mode >= 0)
        return c->gpu_mode;
    /* No call of the C API says whether a communicator runs in GPU mode;
     * gpuport_mem_alloc_device answers it (host-only: NOT_SUPPORTED). */
    gp_setup_lock(c);
    st = gpuport_mem_alloc_device(c->comm, 1, &p);
    if (st == GPUPORT_OK)
        gpuport_mem_free(c->comm, p);
    gp_setup_unlock(c);
    if (st == GPUPORT_OK)
        c->gpu_mode = 1;
    else if (st == GPUPORT_ERR_NOT_SUPPORTED)
        c->gpu_mode = 0;
    else {
        gp_raise(st, "gpuport_mem_alloc_device (asking whether the communicator has a GPU)");
        return -1;
    }
    return c->gpu_mode;
}

void gp_comm_keep(comm_obj *c, PyObject *obj, PyObject *name)
{
    if (obj && PyList_Append(c->leaked, obj) < 0)
        PyErr_Clear();
    if (name && PyList_Append(c->leak_names, name) < 0)
        PyErr_Clear();
}

static PyObject *child_describe(child_obj *ch)
{
    chan_obj *k = (chan_obj *)ch;

    switch (ch->kind) {
    case CHILD_PORT:
        return PyUnicode_FromFormat("PortChannel(peer %d, %s)", k->peer,
                                    gpuport_channel_transport(k->ch));
    case CHILD_MEMORY:
        return PyUnicode_FromFormat("MemoryChannel(peer %d)", k->peer);
    case CHILD_PEER:
        return PyUnicode_FromFormat("PeerChannel(peer %d)", k->peer);
    case CHILD_REGION:
        return PyUnicode_FromFormat("Region(%zu bytes, %s)", ((region_obj *)ch)->size,
                                    ((region_obj *)ch)->device ? "device" : "host");
    case CHILD_ALLOC:
        return PyUnicode_FromFormat("alloc(%zu bytes, %zd views)", ((alloc_obj *)ch)->size,
                                    ((alloc_obj *)ch)->exports);
    }
    return PyUnicode_FromString("?");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Destroys the communicator and marks every child dead. Returns the list of
 * what was left open (channels, detached handles), or NULL with an
 * exception. force: also with gpuport.alloc arrays alive (at exit). */
static PyObject *comm_close_impl(comm_obj *c, int force, gpuport_status_t *status_p)
{
    PyObject *left;
    gpuport_status_t st;
    gpuport_comm_t handle = c->comm;
    Py_ssize_t allocs = 0;

    *status_p = GPUPORT_OK;
    if (c->inflight) {
        gp_raise(GPUPORT_ERR_BUSY,
                 "Comm.close: %d channel calls are in flight in other threads; close after "
                 "they return",
                 c->inflight);
        return NULL;
    }
    for (child_obj *ch = c->children.next; ch != &c->children; ch = ch->next)
        if (ch->kind == CHILD_ALLOC)
            allocs++;
    if (allocs && !force) {
        gp_raise(GPUPORT_ERR_BUSY,
                 "Comm.close: %zd allocations of gpuport.alloc are still referenced (arrays "
                 "alive); their memory is freed with the communicator: delete them first",
                 allocs);
        return NULL;
    }
    left = PyList_New(0);
    if (!left)
        return NULL;
    for (child_obj *ch = c->children.next; ch != &c->children; ch = ch->next) {
        if (ch->kind == CHILD_PORT || ch->kind == CHILD_MEMORY || ch->kind == CHILD_PEER ||
            ch->kind == CHILD_ALLOC) {
            PyObject *d = child_describe(ch);
            if (!d || PyList_Append(left, d) < 0) {
                Py_XDECREF(d);
                Py_DECREF(left);
                return NULL;
            }
            Py_DECREF(d);
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(c->leak_names); i++)
        if (PyList_Append(left, PyList_GET_ITEM(c->leak_names, i)) < 0) {
            Py_DECREF(left);
            return NULL;
        }

    gp_setup_lock(c);
    Py_BEGIN_ALLOW_THREADS
    st = gpuport_comm_destroy(handle);
    Py_END_ALLOW_THREADS
    c->comm = NULL;
    gp_setup_unlock(c);
    *status_p = st;

    /* Every handle of the communicator is gone with it. */
    Py_INCREF(c);
    while (c->children.next != &c->children) {
        child_obj *ch = c->children.next;
        switch (ch->kind) {
        case CHILD_REGION:
            gp_region_release((region_obj *)ch);
            break;
        case CHILD_ALLOC:
            gp_alloc_drop((alloc_obj *)ch);
            break;
        default:
            gp_chan_drop((chan_obj *)ch);
        }
        gp_child_unlink(ch);
    }
    PyList_SetSlice(c->leaked, 0, PY_SSIZE_T_MAX, NULL);
    PyList_SetSlice(c->leak_names, 0, PY_SSIZE_T_MAX, NULL);
    c->reg_prev->reg_next = c->reg_next;
    c->reg_next->reg_prev = c->reg_prev;
    c->reg_prev = c->reg_next = NULL;
    Py_DECREF(c); /* the module's reference */
    Py_DECREF(c);
    return left;
}

static PyObject *comm_close(comm_obj *c, PyObject *unused)
{
    PyObject *left;
    gpuport_status_t st;

    (void)unused;
    if (!c->comm)
        return PyList_New(0);
    left = comm_close_impl(c, 0, &st);
    if (!left)
        return NULL;
    if (PyList_GET_SIZE(left)) {
        PyObject *sep = PyUnicode_FromString(", ");
        PyObject *joined = sep ? PyUnicode_Join(sep, left) : NULL;
        Py_XDECREF(sep);
        if (joined) {
            gp_warn_leak("gpuport: Comm.close() on rank %d destroyed what was still open: %U",
                         c->rank, joined);
            Py_DECREF(joined);
        } else
            PyErr_Clear();
    }
    if (st != GPUPORT_OK) {
        Py_DECREF(left);
        return gp_raise(st, "gpuport_comm_destroy (rank %d)", c->rank);
    }
    return left;
}

/* The atexit hook: closes every communicator still open, saying what was
 * left and how long it took. */
static PyObject *py_close_all_at_exit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    while (open_comms.reg_next != &open_comms) {
        comm_obj *c = open_comms.reg_next;
        gpuport_status_t st;
        PyObject *left, *joined = NULL;
        double t0 = now_ms();
        int rank = c->rank;

        Py_INCREF(c);
        if (c->inflight) {
            PySys_WriteStderr("gpuport: at exit, rank %d: a communicator has %d calls in flight "
                              "in other threads; it is left to the process's exit\n",
                              rank, c->inflight);
            c->reg_prev->reg_next = c->reg_next;
            c->reg_next->reg_prev = c->reg_prev;
            c->reg_prev = c->reg_next = NULL;
            Py_DECREF(c);
            Py_DECREF(c);
            continue;
        }
        left = comm_close_impl(c, 1, &st);
        if (!left) {
            PyErr_WriteUnraisable((PyObject *)c);
            Py_DECREF(c);
            break;
        }
        if (PyList_GET_SIZE(left)) {
            PyObject *sep = PyUnicode_FromString(", ");
            joined = sep ? PyUnicode_Join(sep, left) : NULL;
            Py_XDECREF(sep);
        } else
            joined = PyUnicode_FromString("nothing");
        PySys_FormatStderr("gpuport: at exit, rank %d: closed a communicator that was not "
                           "closed, in %d ms (%s); left open: %S\n",
                           rank, (int)(now_ms() - t0), gpuport_status_string(st), joined);
        PyErr_Clear();
        Py_XDECREF(joined);
        Py_DECREF(left);
        Py_DECREF(c);
    }
    Py_RETURN_NONE;
}

static PyObject *py_open_comms(PyObject *self, PyObject *unused)
{
    PyObject *l = PyList_New(0);
    (void)self;
    (void)unused;
    for (comm_obj *c = open_comms.reg_next; l && c != &open_comms; c = c->reg_next)
        if (PyList_Append(l, (PyObject *)c) < 0)
            Py_CLEAR(l);
    return l;
}

PyMethodDef gp_comm_functions[] = {
    {"_close_all_at_exit", py_close_all_at_exit, METH_NOARGS,
     "Closes every communicator still open (the atexit hook)."},
    {"_open_comms", py_open_comms, METH_NOARGS, "The communicators not yet closed."},
    {NULL, NULL, 0, NULL}};

static PyObject *comm_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"mpi_comm", NULL};
    PyObject *mpi = Py_None, *world = NULL;
    MPI_Comm *mc;
    gpuport_comm_t handle = NULL;
    gpuport_status_t st;
    comm_obj *c;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:Comm", kw, &mpi))
        return NULL;
    if (mpi == Py_None) {
        PyObject *mod = PyImport_ImportModule("mpi4py.MPI");
        if (!mod)
            return NULL;
        world = PyObject_GetAttrString(mod, "COMM_WORLD");
        Py_DECREF(mod);
        if (!world)
            return NULL;
        mpi = world;
    }
    mc = PyMPIComm_Get(mpi);
    if (!mc) {
        Py_XDECREF(world);
        PyErr_Clear();
        return gp_raise(GPUPORT_ERR_INVALID_ARG, "Comm: expected an mpi4py communicator, got %s",
                        Py_TYPE(mpi)->tp_name);
    }
    Py_BEGIN_ALLOW_THREADS
    st = gpuport_comm_init_mpi(*mc, &handle);
    Py_END_ALLOW_THREADS
    Py_XDECREF(world);
    if (st != GPUPORT_OK)
        return gp_raise(st, "gpuport_comm_init_mpi");
    c = (comm_obj *)type->tp_alloc(type, 0);
    if (!c) {
        gpuport_comm_destroy(handle);
        return NULL;
    }
    c->comm = handle;
    c->setup = PyThread_allocate_lock();
    c->children.next = c->children.prev = &c->children;
    c->leaked = PyList_New(0);
    c->leak_names = PyList_New(0);
    c->rank = gpuport_comm_rank(handle);
    c->size = gpuport_comm_size(handle);
    c->gpu_mode = -1;
    if (!c->setup || !c->leaked || !c->leak_names) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    Py_INCREF(c); /* the module's: released by close() */
    c->reg_next = &open_comms;
    c->reg_prev = open_comms.reg_prev;
    open_comms.reg_prev->reg_next = c;
    open_comms.reg_prev = c;
    return (PyObject *)c;
}

static void comm_dealloc(comm_obj *c)
{
    /* Reached open only at interpreter teardown (the module holds open
     * ones): the handle is left to the process's exit, never destroyed from
     * here. */
    if (c->comm)
        gp_warn_leak("gpuport: a Comm (rank %d) was finalized open; its handle is left to "
                     "the process's exit",
                     c->rank);
    if (c->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)c);
    if (c->setup)
        PyThread_free_lock(c->setup);
    Py_XDECREF(c->leaked);
    Py_XDECREF(c->leak_names);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *comm_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

/* On an exception, a close refused because arrays are still referenced
 * (by the exception's frames) leaves the communicator to the atexit hook
 * instead of hiding the exception. */
static PyObject *comm_exit(comm_obj *c, PyObject *args)
{
    PyObject *r;
    int raising = PyTuple_GET_SIZE(args) > 0 && PyTuple_GET_ITEM(args, 0) != Py_None;

    r = comm_close(c, NULL);
    if (!r) {
        if (raising && PyErr_ExceptionMatches(gp_error_class)) {
            PyErr_WriteUnraisable((PyObject *)c);
            Py_RETURN_FALSE;
        }
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *comm_same_host(comm_obj *c, PyObject *arg)
{
    long peer = PyLong_AsLong(arg);
    int r;
    if (peer == -1 && PyErr_Occurred())
        return NULL;
    if (!c->comm)
        return gp_closed("the communicator");
    r = gpuport_comm_same_host(c->comm, (int)peer);
    if (r < 0)
        return gp_raise(GPUPORT_ERR_INVALID_ARG, "Comm.same_host(%ld): not a rank of 0 .. %d",
                        peer, c->size - 1);
    return PyBool_FromLong(r);
}

static PyObject *comm_stats(comm_obj *c, PyObject *unused)
{
    gpuport_comm_stats_t s;
    gpuport_status_t st;
    (void)unused;
    if (!c->comm)
        return gp_closed("the communicator");
    st = gpuport_comm_stats(c->comm, &s);
    if (st != GPUPORT_OK)
        return gp_raise(st, "gpuport_comm_stats");
    return Py_BuildValue("{sKsKsKsKsKsK}", "triggers", (unsigned long long)s.triggers,
                         "rejected", (unsigned long long)s.rejected, "flusher_items",
                         (unsigned long long)s.flusher_items, "proxy_cpu_ns",
                         (unsigned long long)s.proxy_cpu_ns, "flusher_cpu_ns",
                         (unsigned long long)s.flusher_cpu_ns, "host_inline",
                         (unsigned long long)s.host_inline);
}

static PyObject *comm_gpu_mode(comm_obj *c, PyObject *unused)
{
    int m;
    (void)unused;
    if (!c->comm)
        return gp_closed("the communicator");
    m = gp_comm_gpu_mode(c);
    return m < 0 ? NULL : PyBool_FromLong(m);
}

static PyObject *comm_local(comm_obj *c, void *which)
{
    if (!c->comm)
        return gp_closed("the communicator");
    if (which == (void *)0)
        return PyLong_FromLong(c->rank);
    if (which == (void *)1)
        return PyLong_FromLong(c->size);
    if (which == (void *)2)
        return PyLong_FromLong(gpuport_comm_local_rank(c->comm));
    return PyLong_FromLong(gpuport_comm_local_size(c->comm));
}

static PyObject *comm_closed(comm_obj *c, void *unused)
{
    (void)unused;
    return PyBool_FromLong(c->comm == NULL);
}

static PyObject *comm_leaks(comm_obj *c, void *unused)
{
    (void)unused;
    return PyList_GetSlice(c->leak_names, 0, PY_SSIZE_T_MAX);
}

static PyMethodDef comm_methods[] = {
    {"close", (PyCFunction)comm_close, METH_NOARGS,
     "close() -> list[str]\n\nDestroys the communicator (gpuport_comm_destroy). Local, not "
     "collective: no rank waits for another's close. Channels still open (and handles detached "
     "by finalizers) are closed with it, bounded by GPUPORT_TIMEOUT_MS; what was left is "
     "returned and reported by a gpuport.LeakWarning. Refused (ERR_BUSY) while gpuport.alloc "
     "arrays are alive or channel calls run in other threads. Idempotent."},
    {"__enter__", comm_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)comm_exit, METH_VARARGS, "Calls close()."},
    {"same_host", (PyCFunction)comm_same_host, METH_O,
     "same_host(peer) -> bool: whether peer runs on this host. Local."},
    {"stats", (PyCFunction)comm_stats, METH_NOARGS,
     "stats() -> dict: the proxy service's counters (gpuport_comm_stats). Local."},
    {"gpu_mode", (PyCFunction)comm_gpu_mode, METH_NOARGS,
     "gpu_mode() -> bool: whether the communicator runs in GPU mode. Local; the first call "
     "asks the library by a 1-byte gpuport_mem_alloc_device, freed at once."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_local, NULL, "this rank", (void *)0},
    {"size", (getter)comm_local, NULL, "ranks in the communicator", (void *)1},
    {"local_rank", (getter)comm_local, NULL, "this rank among its host's", (void *)2},
    {"local_size", (getter)comm_local, NULL, "ranks on this host", (void *)3},
    {"closed", (getter)comm_closed, NULL, "whether close() has run", NULL},
    {"leaks", (getter)comm_leaks, NULL,
     "handles detached by finalizers, kept until close()", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject comm_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuport.Comm",
    .tp_basicsize = sizeof(comm_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Comm(mpi_comm=None)\n\nA gpuport communicator over an mpi4py communicator "
              "(MPI.COMM_WORLD if None): gpuport_comm_init_mpi. Collective over mpi_comm: "
              "every rank creates it. Use as a context manager or call close().",
    .tp_new = comm_new,
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_methods = comm_methods,
    .tp_getset = comm_getset,
    .tp_weaklistoffset = offsetof(comm_obj, weakreflist),
};

int gp_comm_init(PyObject *m)
{
    if (import_mpi4py() < 0)
        return -1;
    if (PyType_Ready(&comm_type) < 0)
        return -1;
    Py_INCREF(&comm_type);
    return PyModule_AddObject(m, "Comm", (PyObject *)&comm_type);
}
