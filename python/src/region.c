/*
 * region.c: gpuport.Region, a registration of any buffer (the buffer
 * protocol for host memory, __cuda_array_interface__ or DLPack for GPU
 * memory), and gpuport._gpuport.Alloc, memory from gpuport_mem_alloc(_device)
 * that exports itself to NumPy (buffer protocol) or CuPy and PyTorch
 * (__cuda_array_interface__) and is freed when nothing references it.
 */
#include "gpuport_py.h"

/* DLPack's ABI (dlpack.h, v0.x: the layout every producer still exports
 * under the capsule name "dltensor"). */
enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3, DL_CUDA_MANAGED = 13 };
typedef struct {
    int32_t device_type, device_id;
} dl_device_t;
typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} dl_dtype_t;
typedef struct {
    void *data;
    dl_device_t device;
    int32_t ndim;
    dl_dtype_t dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} dl_tensor_t;
typedef struct dl_managed {
    dl_tensor_t t;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed_t;

void gp_region_release(region_obj *r)
{
    r->mem = NULL;
    if (r->have_view) {
        PyBuffer_Release(&r->view);
        r->have_view = 0;
    }
    if (r->capsule) {
        dl_managed_t *m = PyCapsule_GetPointer(r->capsule, "used_dltensor");
        if (m && m->deleter)
            m->deleter(m);
        PyErr_Clear();
        Py_CLEAR(r->capsule);
    }
    Py_CLEAR(r->owner);
}

/* [ptr, ptr + size) of a __cuda_array_interface__ dict (contiguous only). */
static int from_cai(PyObject *cai, void **ptr_p, size_t *size_p)
{
    PyObject *data, *shape, *typestr, *strides;
    size_t n = 1, item;
    const char *ts;

    if (!PyDict_Check(cai))
        goto bad;
    data = PyDict_GetItemString(cai, "data");
    shape = PyDict_GetItemString(cai, "shape");
    typestr = PyDict_GetItemString(cai, "typestr");
    strides = PyDict_GetItemString(cai, "strides");
    if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1 || !shape ||
        !PyTuple_Check(shape) || !typestr || !PyUnicode_Check(typestr))
        goto bad;
    ts = PyUnicode_AsUTF8(typestr);
    if (!ts || strlen(ts) < 3 || (item = strtoul(ts + 2, NULL, 10)) == 0)
        goto bad;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (d < 0)
            goto bad;
        n *= (size_t)d;
    }
    if (strides && strides != Py_None) {
        size_t expect = item;
        for (Py_ssize_t i = PyTuple_GET_SIZE(shape) - 1; i >= 0; i--) {
            long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
            if (d > 1 && PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i)) != (long long)expect) {
                gp_raise(GPUPORT_ERR_INVALID_ARG,
                         "Region: the __cuda_array_interface__ array is not C-contiguous");
                return -1;
            }
            expect *= (size_t)d;
        }
    }
    *ptr_p = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    *size_p = n * item;
    if (PyErr_Occurred())
        return -1;
    return 0;
bad:
    PyErr_Clear();
    gp_raise(GPUPORT_ERR_INVALID_ARG, "Region: a malformed __cuda_array_interface__");
    return -1;
}

static int from_dlpack(region_obj *r, PyObject *obj, int *device_p)
{
    PyObject *dev, *cap;
    long type;
    dl_managed_t *m;
    size_t n = 1, item;

    dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (!dev)
        return -1;
    type = PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2
               ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 0))
               : -1;
    Py_DECREF(dev);
    if (type == DL_CPU || type == DL_CUDA_HOST)
        *device_p = 0;
    else if (type == DL_CUDA)
        *device_p = 1;
    else {
        PyErr_Clear();
        gp_raise(GPUPORT_ERR_NOT_SUPPORTED,
                 "Region: DLPack device type %ld is not supported (CPU, CUDA host and CUDA "
                 "device memory are; managed memory is refused by the library)",
                 type);
        return -1;
    }
    /* A device buffer is refused before it is exported to us. */
    if (*device_p && r->h.comm && gp_comm_gpu_mode(r->h.comm) == 0)
        return 1;
    cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (!cap)
        return -1;
    m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        Py_DECREF(cap);
        return -1;
    }
    PyCapsule_SetName(cap, "used_dltensor");
    r->capsule = cap;
    item = (size_t)m->t.dtype.bits * m->t.dtype.lanes / 8;
    for (int i = 0; i < m->t.ndim; i++)
        n *= (size_t)m->t.shape[i];
    if (m->t.strides) {
        int64_t expect = 1;
        for (int i = m->t.ndim - 1; i >= 0; i--) {
            if (m->t.shape[i] > 1 && m->t.strides[i] != expect) {
                gp_raise(GPUPORT_ERR_INVALID_ARG,
                         "Region: the DLPack tensor is not C-contiguous");
                return -1;
            }
            expect *= m->t.shape[i];
        }
    }
    r->ptr = (char *)m->t.data + m->t.byte_offset;
    r->size = n * item;
    return 0;
}

static PyObject *region_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"comm", "buffer", NULL};
    PyObject *co, *obj, *cai;
    comm_obj *c;
    region_obj *r;
    gpuport_status_t st;
    int device = 0, refused = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Region", kw, &co, &obj))
        return NULL;
    if (!(c = gp_comm_arg(co)))
        return NULL;
    r = (region_obj *)type->tp_alloc(type, 0);
    if (!r)
        return NULL;
    gp_child_link(c, &r->h, CHILD_REGION);
    /* GPU memory first: a GPU array type may also have the buffer protocol
     * (CuPy's ndarray has it and fails every export) */
    if ((cai = PyObject_GetAttrString(obj, "__cuda_array_interface__")) != NULL) {
        int rc = from_cai(cai, &r->ptr, &r->size);
        Py_DECREF(cai);
        if (rc < 0)
            goto err;
        device = 1;
        refused = gp_comm_gpu_mode(c);
        if (refused < 0)
            goto err;
        refused = !refused;
    } else if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
        goto err; /* the interface is there and failed (a closed allocation): its error */
    } else if (PyErr_Clear(), PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &r->view, PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS) < 0) {
            PyErr_Clear();
            if (PyObject_GetBuffer(obj, &r->view, PyBUF_ANY_CONTIGUOUS) < 0) {
                PyErr_Clear();
                gp_raise(GPUPORT_ERR_INVALID_ARG,
                         "Region: the %s buffer is not contiguous", Py_TYPE(obj)->tp_name);
                goto err;
            }
        }
        r->have_view = 1;
        r->ptr = r->view.buf;
        r->size = (size_t)r->view.len;
    } else if (PyErr_Clear(), PyObject_HasAttrString(obj, "__dlpack__")) {
        refused = from_dlpack(r, obj, &device);
        if (refused < 0)
            goto err;
    } else {
        gp_raise(GPUPORT_ERR_INVALID_ARG,
                 "Region: a %s has neither the buffer protocol (host memory) nor "
                 "__cuda_array_interface__ or __dlpack__ (GPU memory)",
                 Py_TYPE(obj)->tp_name);
        goto err;
    }
    if (refused) {
        gp_raise(GPUPORT_ERR_NOT_SUPPORTED,
                 "Region: the %s is GPU memory, but this communicator is host-only (GPU mode is "
                 "off: GPUPORT_GPU=off, no usable GPU, or a library built without CUDA); "
                 "register host memory instead",
                 Py_TYPE(obj)->tp_name);
        goto err;
    }
    r->device = device;
    Py_INCREF(obj);
    r->owner = obj;
    gp_setup_lock(c);
    Py_BEGIN_ALLOW_THREADS
    st = gpuport_mem_register(c->comm, r->ptr, r->size, &r->mem);
    Py_END_ALLOW_THREADS
    gp_setup_unlock(c);
    if (st != GPUPORT_OK) {
        gp_raise(st, "gpuport_mem_register(%p, %zu bytes)", r->ptr, r->size);
        goto err;
    }
    return (PyObject *)r;
err:
    gp_region_release(r);
    gp_child_unlink(&r->h);
    Py_DECREF(r);
    return NULL;
}

/* Finalizer: a deregistration is local and does not wait, so it is made
 * here, but only if the set-up lock is free at once; otherwise the
 * registration and its memory are left to the communicator's close. */
static void region_dealloc(region_obj *r)
{
    comm_obj *c = r->h.comm;

    if (r->h.weakreflist)
        PyObject_ClearWeakRefs((PyObject *)r);
    if (c && r->mem) {
        gpuport_status_t st = GPUPORT_ERR_BUSY;
        if (gp_setup_try(c)) {
            st = gpuport_mem_deregister(r->mem);
            gp_setup_unlock(c);
        }
        if (st != GPUPORT_OK) {
            PyObject *name = PyUnicode_FromFormat("Region(%zu bytes), dropped while in use",
                                                  r->size);
            /* the memory must outlive the registration: keep its owner */
            gp_comm_keep(c, r->owner, name);
            Py_XDECREF(name);
            if (r->have_view)
                r->have_view = 0; /* the export stays, with its owner */
            r->capsule = NULL;   /* likewise: its deleter never runs */
        }
    }
    gp_region_release(r);
    gp_child_unlink(&r->h);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *region_close(region_obj *r, PyObject *unused)
{
    comm_obj *c = r->h.comm;
    gpuport_status_t st;

    (void)unused;
    if (!c || !r->mem)
        Py_RETURN_NONE;
    gp_setup_lock(c);
    st = gpuport_mem_deregister(r->mem);
    gp_setup_unlock(c);
    if (st != GPUPORT_OK)
        return gp_raise(st, "gpuport_mem_deregister (Region of %zu bytes)", r->size);
    gp_region_release(r);
    gp_child_unlink(&r->h);
    Py_RETURN_NONE;
}

static PyObject *region_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *region_exit(region_obj *r, PyObject *args)
{
    PyObject *x;
    (void)args;
    x = region_close(r, NULL);
    if (!x)
        return NULL;
    Py_DECREF(x);
    Py_RETURN_FALSE;
}

static PyObject *region_kind(region_obj *r, void *unused)
{
    gpuport_mem_info_t *info;
    gpuport_status_t st;
    PyObject *s;

    (void)unused;
    if (!r->mem || !r->h.comm)
        return gp_closed("the region");
    info = PyMem_Malloc(sizeof(*info));
    if (!info)
        return PyErr_NoMemory();
    gp_setup_lock(r->h.comm);
    st = gpuport_mem_info(r->mem, info);
    gp_setup_unlock(r->h.comm);
    s = st == GPUPORT_OK ? PyUnicode_FromString(gpuport_mem_kind_string(info->kind))
                         : gp_raise(st, "gpuport_mem_info");
    PyMem_Free(info);
    return s;
}

static PyObject *region_get(region_obj *r, void *which)
{
    switch ((intptr_t)which) {
    case 0:
        return PyLong_FromSize_t(r->size);
    case 1:
        return PyLong_FromVoidPtr(r->ptr);
    case 2:
        return PyBool_FromLong(r->device);
    case 3:
        return PyBool_FromLong(r->have_view && r->view.readonly);
    default:
        return PyBool_FromLong(r->mem == NULL);
    }
}

static PyMethodDef region_methods[] = {
    {"close", (PyCFunction)region_close, METH_NOARGS,
     "close(): gpuport_mem_deregister. Local. Raises Error(ERR_BUSY) while a live channel "
     "uses the region. Idempotent."},
    {"__enter__", region_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)region_exit, METH_VARARGS, "Calls close()."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef region_getset[] = {
    {"size", (getter)region_get, NULL, "bytes registered", (void *)0},
    {"ptr", (getter)region_get, NULL, "address of the first byte", (void *)1},
    {"device", (getter)region_get, NULL, "whether it is GPU memory", (void *)2},
    {"readonly", (getter)region_get, NULL, "a read-only buffer (a source only)", (void *)3},
    {"closed", (getter)region_get, NULL, "whether it is deregistered", (void *)4},
    {"kind", (getter)region_kind, NULL, "the library's memory kind (gpuport_mem_info)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject region_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuport.Region",
    .tp_basicsize = sizeof(region_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Region(comm, buffer)\n\nRegisters a buffer (gpuport_mem_register): host memory "
              "through the buffer protocol (NumPy, bytearray, memoryview), GPU memory through "
              "__cuda_array_interface__ or __dlpack__ (CuPy, PyTorch). Local. The region keeps "
              "the buffer alive until close().",
    .tp_new = region_new,
    .tp_dealloc = (destructor)region_dealloc,
    .tp_methods = region_methods,
    .tp_getset = region_getset,
    .tp_weaklistoffset = offsetof(child_obj, weakreflist),
};

/* ---- Alloc ---- */

void gp_alloc_drop(alloc_obj *a)
{
    a->ptr = NULL;
}

static PyObject *alloc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"comm", "size", "device", NULL};
    PyObject *co;
    Py_ssize_t size;
    int device = 0;
    comm_obj *c;
    alloc_obj *a;
    gpuport_status_t st;
    void *p = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "On|p:Alloc", kw, &co, &size, &device))
        return NULL;
    if (!(c = gp_comm_arg(co)))
        return NULL;
    if (size < 0)
        return gp_raise(GPUPORT_ERR_INVALID_ARG, "alloc: a negative size (%zd)", size);
    gp_setup_lock(c);
    Py_BEGIN_ALLOW_THREADS
    st = device ? gpuport_mem_alloc_device(c->comm, (size_t)size, &p)
                : gpuport_mem_alloc(c->comm, (size_t)size, &p);
    Py_END_ALLOW_THREADS
    gp_setup_unlock(c);
    if (st != GPUPORT_OK)
        return gp_raise(st, "%s(%zd bytes)",
                        device ? "gpuport_mem_alloc_device" : "gpuport_mem_alloc", size);
    a = (alloc_obj *)type->tp_alloc(type, 0);
    if (!a) {
        gp_setup_lock(c);
        gpuport_mem_free(c->comm, p);
        gp_setup_unlock(c);
        return NULL;
    }
    a->ptr = p;
    a->size = (size_t)size;
    a->device = device;
    gp_child_link(c, &a->h, CHILD_ALLOC);
    return (PyObject *)a;
}

/* Finalizer: gpuport_mem_free is local and does not wait; made only if
 * the set-up lock is free at once, else left to the communicator. */
static void alloc_dealloc(alloc_obj *a)
{
    comm_obj *c = a->h.comm;

    if (a->h.weakreflist)
        PyObject_ClearWeakRefs((PyObject *)a);
    if (c && c->comm && a->ptr) {
        gpuport_status_t st = GPUPORT_ERR_BUSY;
        if (gp_setup_try(c)) {
            st = gpuport_mem_free(c->comm, a->ptr);
            gp_setup_unlock(c);
        }
        if (st != GPUPORT_OK) {
            PyObject *name = PyUnicode_FromFormat("alloc(%zu bytes), freed with the communicator",
                                                  a->size);
            gp_comm_keep(c, NULL, name);
            Py_XDECREF(name);
        }
    }
    gp_child_unlink(&a->h);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static int alloc_getbuffer(alloc_obj *a, Py_buffer *view, int flags)
{
    if (!a->ptr) {
        PyErr_SetString(PyExc_BufferError, "gpuport: the allocation was freed with its communicator");
        return -1;
    }
    if (a->device) {
        PyErr_SetString(PyExc_BufferError,
                        "gpuport: GPU memory has no buffer protocol; use __cuda_array_interface__");
        return -1;
    }
    if (PyBuffer_FillInfo(view, (PyObject *)a, a->ptr, (Py_ssize_t)a->size, 0, flags) < 0)
        return -1;
    a->exports++;
    return 0;
}

static void alloc_releasebuffer(alloc_obj *a, Py_buffer *view)
{
    (void)view;
    a->exports--;
}

static PyBufferProcs alloc_as_buffer = {(getbufferproc)alloc_getbuffer,
                                        (releasebufferproc)alloc_releasebuffer};

static PyObject *alloc_cai(alloc_obj *a, void *unused)
{
    (void)unused;
    if (!a->device) {
        PyErr_SetString(PyExc_AttributeError, "host memory: use the buffer protocol");
        return NULL;
    }
    if (!a->ptr)
        return gp_closed("the allocation");
    return Py_BuildValue("{s(n)sss(NO)sisO}", "shape", (Py_ssize_t)a->size, "typestr", "|u1",
                         "data", PyLong_FromVoidPtr(a->ptr), Py_False, "version", 3, "strides",
                         Py_None);
}

static PyObject *alloc_get(alloc_obj *a, void *which)
{
    switch ((intptr_t)which) {
    case 0:
        return PyLong_FromSize_t(a->size);
    case 1:
        return PyLong_FromVoidPtr(a->ptr);
    case 2:
        return PyBool_FromLong(a->device);
    default:
        return PyLong_FromSsize_t(a->exports);
    }
}

static PyGetSetDef alloc_getset[] = {
    {"__cuda_array_interface__", (getter)alloc_cai, NULL, "GPU memory, for CuPy and PyTorch",
     NULL},
    {"size", (getter)alloc_get, NULL, "bytes", (void *)0},
    {"ptr", (getter)alloc_get, NULL, "address (0 once freed with the communicator)", (void *)1},
    {"device", (getter)alloc_get, NULL, "GPU memory", (void *)2},
    {"exports", (getter)alloc_get, NULL, "buffer-protocol views alive", (void *)3},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject alloc_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpuport.Alloc",
    .tp_basicsize = sizeof(alloc_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Alloc(comm, size, device=False)\n\nMemory from gpuport_mem_alloc (host, zeroed, "
              "mappable by same-host peers) or gpuport_mem_alloc_device (GPU); freed "
              "(gpuport_mem_free) when nothing references it. Local. Use gpuport.alloc(), which "
              "returns a NumPy view.",
    .tp_new = alloc_new,
    .tp_dealloc = (destructor)alloc_dealloc,
    .tp_as_buffer = &alloc_as_buffer,
    .tp_getset = alloc_getset,
    .tp_weaklistoffset = offsetof(child_obj, weakreflist),
};

int gp_region_init(PyObject *m)
{
    if (PyType_Ready(&region_type) < 0 || PyType_Ready(&alloc_type) < 0)
        return -1;
    Py_INCREF(&region_type);
    if (PyModule_AddObject(m, "Region", (PyObject *)&region_type) < 0)
        return -1;
    Py_INCREF(&alloc_type);
    return PyModule_AddObject(m, "Alloc", (PyObject *)&alloc_type);
}
