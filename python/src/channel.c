/*
 * channel.c: what the three channel classes share: creation (pairwise),
 * close(), the finalizer that detaches, device_handle(); and the classes
 * MemoryChannel and PeerChannel, which have no host operations in the C
 * API. PortChannel's operations are in port_ops.c.
 */
#include "gpuport_py.h"

typedef struct {
    const char *cls, *create, *destroy;
    gpuport_status_t (*make)(gpuport_comm_t, int, gpuport_mem_t, gpuport_mem_t, void **);
    gpuport_status_t (*destroy_fn)(void *);
    gpuport_status_t (*device)(void *, void *);
    size_t dev_size;
} chan_kind_t;

static gpuport_status_t port_make(gpuport_comm_t c, int p, gpuport_mem_t s, gpuport_mem_t d,
                                  void **ch)
{
    return gpuport_channel_create(c, p, s, d, (gpuport_channel_t *)ch);
}
static gpuport_status_t memory_make(gpuport_comm_t c, int p, gpuport_mem_t s, gpuport_mem_t d,
                                    void **ch)
{
    return gpuport_memory_channel_create(c, p, s, d, (gpuport_memory_channel_t *)ch);
}
static gpuport_status_t peer_make(gpuport_comm_t c, int p, gpuport_mem_t s, gpuport_mem_t d,
                                  void **ch)
{
    return gpuport_peer_channel_create(c, p, s, d, (gpuport_peer_channel_t *)ch);
}
static gpuport_status_t port_destroy(void *ch)
{
    return gpuport_channel_destroy(ch);
}
static gpuport_status_t memory_destroy(void *ch)
{
    return gpuport_memory_channel_destroy(ch);
}
static gpuport_status_t peer_destroy(void *ch)
{
    return gpuport_peer_channel_destroy(ch);
}
static gpuport_status_t port_device(void *ch, void *dev)
{
    return gpuport_channel_device(ch, dev);
}
static gpuport_status_t memory_device(void *ch, void *dev)
{
    return gpuport_memory_channel_device(ch, dev);
}
static gpuport_status_t peer_device(void *ch, void *dev)
{
    return gpuport_peer_channel_device(ch, dev);
}

static const chan_kind_t kinds[] = {
    [CHILD_PORT] = {"PortChannel", "gpuport_channel_create", "gpuport_channel_destroy",
                    port_make, port_destroy, port_device, sizeof(gpuport_port_channel_dev_t)},
    [CHILD_MEMORY] = {"MemoryChannel", "gpuport_memory_channel_create",
                      "gpuport_memory_channel_destroy", memory_make, memory_destroy,
                      memory_device, sizeof(gpuport_memory_channel_dev_t)},
    [CHILD_PEER] = {"PeerChannel", "gpuport_peer_channel_create", "gpuport_peer_channel_destroy",
                    peer_make, peer_destroy, peer_device, sizeof(gpuport_peer_channel_dev_t)},
};

void gp_chan_drop(chan_obj *k)
{
    k->ch = NULL;
    Py_CLEAR(k->src);
    Py_CLEAR(k->dst);
}

/* A Region of communicator c, or None (NULL handle). */
static int region_arg(comm_obj *c, PyObject *o, const char *which, int as_dst, gpuport_mem_t *m)
{
    region_obj *r;

    *m = NULL;
    if (o == Py_None)
        return 0;
    if (!PyObject_TypeCheck(o, &region_type)) {
        gp_raise(GPUPORT_ERR_INVALID_ARG, "%s must be a gpuport.Region or None, not %s", which,
                 Py_TYPE(o)->tp_name);
        return -1;
    }
    r = (region_obj *)o;
    if (!r->mem) {
        gp_closed(which);
        return -1;
    }
    if (r->h.comm != c) {
        gp_raise(GPUPORT_ERR_INVALID_ARG, "%s is a region of another communicator", which);
        return -1;
    }
    if (as_dst && r->have_view && r->view.readonly) {
        gp_raise(GPUPORT_ERR_INVALID_ARG, "%s is a read-only buffer: it can be a source only",
                 which);
        return -1;
    }
    *m = r->mem;
    return 0;
}

/* Wraps a created handle; the channel keeps its regions alive. */
PyObject *gp_chan_wrap(PyTypeObject *type, comm_obj *c, int kind, void *h, int peer,
                       PyObject *src, PyObject *dst)
{
    chan_obj *k = (chan_obj *)type->tp_alloc(type, 0);

    if (!k) {
        /* not reachable in practice; the comm's close destroys it */
        return NULL;
    }
    k->ch = h;
    k->peer = peer;
    if (src != Py_None) {
        Py_INCREF(src);
        k->src = src;
    }
    if (dst != Py_None) {
        Py_INCREF(dst);
        k->dst = dst;
    }
    gp_child_link(c, &k->h, kind);
    return (PyObject *)k;
}

int gp_chan_regions(comm_obj *c, PyObject *src, PyObject *dst, gpuport_mem_t *s, gpuport_mem_t *d)
{
    if (region_arg(c, src, "src", 0, s) < 0 || region_arg(c, dst, "dst", 1, d) < 0)
        return -1;
    return 0;
}

static PyObject *chan_create(PyTypeObject *type, PyObject *args, PyObject *kwds, int kind)
{
    static char *kw[] = {"comm", "peer", "src", "dst", NULL};
    PyObject *co, *src = Py_None, *dst = Py_None;
    int peer;
    comm_obj *c;
    gpuport_mem_t s, d;
    void *h = NULL;
    gpuport_status_t st;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi|OO", kw, &co, &peer, &src, &dst))
        return NULL;
    if (!(c = gp_comm_arg(co)) || gp_chan_regions(c, src, dst, &s, &d) < 0)
        return NULL;
    gp_setup_lock(c);
    Py_BEGIN_ALLOW_THREADS
    st = kinds[kind].make(c->comm, peer, s, d, &h);
    Py_END_ALLOW_THREADS
    gp_setup_unlock(c);
    if (st != GPUPORT_OK)
        return gp_raise(st, "%s(peer %d) on rank %d", kinds[kind].create, peer, c->rank);
    return gp_chan_wrap(type, c, kind, h, peer, src, dst);
}

static PyObject *port_new(PyTypeObject *t, PyObject *a, PyObject *k)
{
    return chan_create(t, a, k, CHILD_PORT);
}
static PyObject *memory_new(PyTypeObject *t, PyObject *a, PyObject *k)
{
    return chan_create(t, a, k, CHILD_MEMORY);
}
static PyObject *peer_new(PyTypeObject *t, PyObject *a, PyObject *k)
{
    return chan_create(t, a, k, CHILD_PEER);
}

static PyObject *chan_close(chan_obj *k, PyObject *unused)
{
    comm_obj *c = k->h.comm;
    gpuport_status_t st;
    int kind = k->h.kind;

    (void)unused;
    if (!k->ch || !c)
        Py_RETURN_NONE;
    if (k->h.busy)
        return gp_raise(GPUPORT_ERR_BUSY, "%s.close: %d calls on it are in flight in other threads",
                        kinds[kind].cls, k->h.busy);
    k->h.busy++; /* no operation starts meanwhile */
    gp_setup_lock(c);
    Py_BEGIN_ALLOW_THREADS
    st = kinds[kind].destroy_fn(k->ch);
    Py_END_ALLOW_THREADS
    gp_setup_unlock(c);
    k->h.busy--;
    if (st == GPUPORT_ERR_TIMEOUT && kind == CHILD_PORT) {
        /* gpuport_channel_destroy keeps it until the communicator goes */
        PyObject *name = PyUnicode_FromFormat("PortChannel(peer %d), its close timed out", k->peer);
        gp_comm_keep(c, k->src, name);
        gp_comm_keep(c, k->dst, NULL);
        Py_XDECREF(name);
        gp_chan_drop(k);
        gp_child_unlink(&k->h);
    }
    if (st != GPUPORT_OK)
        return gp_raise(st, "%s (peer %d, rank %d)", kinds[kind].destroy, k->peer, c->rank);
    gp_chan_drop(k);
    gp_child_unlink(&k->h);
    Py_RETURN_NONE;
}

/* Finalizer: never a destroy (it waits for the peer); the handle is
 * detached: left live in the communicator, whose close destroys it, with
 * its regions kept alive until then. */
static void chan_dealloc(chan_obj *k)
{
    comm_obj *c = k->h.comm;

    if (k->h.weakreflist)
        PyObject_ClearWeakRefs((PyObject *)k);
    if (c && k->ch) {
        PyObject *name = PyUnicode_FromFormat("%s(peer %d), dropped without close()",
                                              kinds[k->h.kind].cls, k->peer);
        gp_comm_keep(c, k->src, name);
        gp_comm_keep(c, k->dst, NULL);
        Py_XDECREF(name);
        gp_warn_leak("gpuport: a %s to peer %d on rank %d was dropped without close(); it is "
                     "detached, not destroyed (a finalizer never waits for a peer): its handle "
                     "and regions stay until comm.close()",
                     kinds[k->h.kind].cls, k->peer, c->rank);
    }
    gp_chan_drop(k);
    gp_child_unlink(&k->h);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static PyObject *chan_device_handle(chan_obj *k, PyObject *unused)
{
    const chan_kind_t *kd = &kinds[k->h.kind];
    PyObject *b;
    gpuport_status_t st;

    (void)unused;
    if (!k->ch || !k->h.comm)
        return gp_closed(kd->cls);
    b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)kd->dev_size);
    if (!b)
        return NULL;
    memset(PyBytes_AS_STRING(b), 0, kd->dev_size);
    gp_setup_lock(k->h.comm);
    st = kd->device(k->ch, PyBytes_AS_STRING(b));
    gp_setup_unlock(k->h.comm);
    if (st != GPUPORT_OK) {
        Py_DECREF(b);
        return gp_raise(st, "%s.device_handle (peer %d)", kd->cls, k->peer);
    }
    return b;
}

static PyObject *chan_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *chan_exit(chan_obj *k, PyObject *args)
{
    PyObject *r;
    (void)args;
    r = chan_close(k, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *chan_get(chan_obj *k, void *which)
{
    if (which == (void *)0)
        return PyLong_FromLong(k->peer);
    return PyBool_FromLong(k->ch == NULL);
}

static PyObject *peer_stores(chan_obj *k, PyObject *unused)
{
    int r;
    (void)unused;
    if (!k->ch)
        return gp_closed("PeerChannel");
    r = gpuport_peer_channel_stores(k->ch);
    if (r < 0)
        return gp_raise(GPUPORT_ERR_INVALID_ARG, "gpuport_peer_channel_stores");
    return PyBool_FromLong(r);
}

static PyMethodDef chan_methods[] = {
    {"close", (PyCFunction)chan_close, METH_NOARGS,
     "close(): destroys the channel. PortChannel: local, but waits (up to GPUPORT_TIMEOUT_MS) "
     "for the peer's proxy to confirm. MemoryChannel, and PeerChannel with the store path: "
     "pairwise, returns once the peer closed its side too. Idempotent. A channel dropped "
     "without close() is never destroyed by the garbage collector: it is detached and "
     "reported (gpuport.LeakWarning), and comm.close() destroys it."},
    {"device_handle", (PyCFunction)chan_device_handle, METH_NOARGS,
     "device_handle() -> bytes: the plain-data handle for kernels (gpuport_*_device); "
     "copy it to GPU memory or pass it by value to a kernel compiled with the headers of "
     "gpuport.include_dir(). Local. Needs GPU mode (else Error ERR_NOT_SUPPORTED)."},
    {"__enter__", chan_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)chan_exit, METH_VARARGS, "Calls close()."},
    {NULL, NULL, 0, NULL}};

static PyMethodDef peer_methods[] = {
    {"stores", (PyCFunction)peer_stores, METH_NOARGS,
     "stores() -> bool: whether kernels carry small operations by their own stores "
     "(gpuport_peer_channel_stores). Local."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef chan_getset[] = {{"peer", (getter)chan_get, NULL, "the peer's rank", (void *)0},
                                    {"closed", (getter)chan_get, NULL, "closed or dropped",
                                     (void *)1},
                                    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject chan_base_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuport._Channel",
    .tp_basicsize = sizeof(chan_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "What the channel classes share.",
    .tp_dealloc = (destructor)chan_dealloc,
    .tp_methods = chan_methods,
    .tp_getset = chan_getset,
    .tp_weaklistoffset = offsetof(child_obj, weakreflist),
};

PyTypeObject memory_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuport.MemoryChannel",
    .tp_basicsize = sizeof(chan_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "MemoryChannel(comm, peer, src=None, dst=None)\n\nA memory channel "
              "(gpuport_memory_channel_create): kernels store into a same-host peer's GPU "
              "memory. Pairwise: the peer creates it too, naming this rank. GPU mode only. "
              "Host code has only close() and device_handle().",
    .tp_base = &chan_base_type,
    .tp_new = memory_new,
};

PyTypeObject peer_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuport.PeerChannel",
    .tp_basicsize = sizeof(chan_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PeerChannel(comm, peer, src=None, dst=None)\n\nA peer channel "
              "(gpuport_peer_channel_create): one channel for kernels that takes the fastest "
              "path to the peer. Pairwise: the peer creates it too, naming this rank. Host code "
              "has close(), stores() and device_handle().",
    .tp_base = &chan_base_type,
    .tp_new = peer_new,
    .tp_methods = peer_methods,
};

int gp_chan_new_port(PyTypeObject *t)
{
    t->tp_base = &chan_base_type;
    t->tp_new = port_new;
    return 0;
}

int gp_devchan_init(PyObject *m)
{
    if (PyType_Ready(&memory_type) < 0 || PyType_Ready(&peer_type) < 0)
        return -1;
    Py_INCREF(&memory_type);
    if (PyModule_AddObject(m, "MemoryChannel", (PyObject *)&memory_type) < 0)
        return -1;
    Py_INCREF(&peer_type);
    return PyModule_AddObject(m, "PeerChannel", (PyObject *)&peer_type);
}
