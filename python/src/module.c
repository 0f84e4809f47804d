/*
 * module.c: the module gpuport._gpuport: its constants, its error helpers
 * and its initialization. The Python package gpuport re-exports it.
 */
#include <stdarg.h>

#include "gpuport_py.h"

#ifndef GPUPORT_PY_INCLUDEDIR
#define GPUPORT_PY_INCLUDEDIR ""
#endif

PyObject *gp_error_class, *gp_leak_warning;

static const struct {
    const char *name;
    long value;
} constants[] = {
    {"OK", GPUPORT_OK},
    {"ERR_INVALID_ARG", GPUPORT_ERR_INVALID_ARG},
    {"ERR_INVALID_CONFIG", GPUPORT_ERR_INVALID_CONFIG},
    {"ERR_OUT_OF_RANGE", GPUPORT_ERR_OUT_OF_RANGE},
    {"ERR_NOT_SUPPORTED", GPUPORT_ERR_NOT_SUPPORTED},
    {"ERR_NO_MEMORY", GPUPORT_ERR_NO_MEMORY},
    {"ERR_NO_RESOURCE", GPUPORT_ERR_NO_RESOURCE},
    {"ERR_AGAIN", GPUPORT_ERR_AGAIN},
    {"ERR_BUSY", GPUPORT_ERR_BUSY},
    {"ERR_TRANSPORT", GPUPORT_ERR_TRANSPORT},
    {"ERR_PEER", GPUPORT_ERR_PEER},
    {"ERR_CLOSED", GPUPORT_ERR_CLOSED},
    {"ERR_TIMEOUT", GPUPORT_ERR_TIMEOUT},
    {"ERR_VERSION", GPUPORT_ERR_VERSION},
    {"ERR_SHUTDOWN", GPUPORT_ERR_SHUTDOWN},
    {"ERR_INTERNAL", GPUPORT_ERR_INTERNAL},
    {"INT64", GPUPORT_INT64},
    {"UINT64", GPUPORT_UINT64},
    {"FLOAT32", GPUPORT_FLOAT32},
    {"BFLOAT16", GPUPORT_BFLOAT16},
    {"PORT_CHANNEL_DEV_SIZE", (long)sizeof(gpuport_port_channel_dev_t)},
    {"MEMORY_CHANNEL_DEV_SIZE", (long)sizeof(gpuport_memory_channel_dev_t)},
    {"PEER_CHANNEL_DEV_SIZE", (long)sizeof(gpuport_peer_channel_dev_t)},
};

PyObject *gp_raise(gpuport_status_t status, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    PyObject *exc;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    exc = PyObject_CallFunction(gp_error_class, "is", (int)status, what);
    if (exc) {
        PyErr_SetObject(gp_error_class, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *gp_closed(const char *what)
{
    return gp_raise(GPUPORT_ERR_INVALID_ARG, "%s is closed", what);
}

void gp_warn_leak(const char *fmt, ...)
{
    va_list ap;
    PyObject *type, *value, *tb, *text;

    /* a finalizer may run while an exception is being raised */
    PyErr_Fetch(&type, &value, &tb);
    va_start(ap, fmt);
    text = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!text || PyErr_WarnEx(gp_leak_warning, PyUnicode_AsUTF8(text), 1) < 0)
        PyErr_WriteUnraisable(NULL);
    Py_XDECREF(text);
    PyErr_Restore(type, value, tb);
}

static PyObject *py_status_string(PyObject *self, PyObject *arg)
{
    long s = PyLong_AsLong(arg);
    (void)self;
    if (s == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(gpuport_status_string((gpuport_status_t)s));
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(gpuport_version_string());
}

static PyMethodDef module_methods[] = {
    {"status_string", py_status_string, METH_O,
     "status_string(status) -> str: the library's text of a status (gpuport_status_string)."},
    {"version", py_version, METH_NOARGS,
     "version() -> str: the library's version (gpuport_version_string)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "gpuport._gpuport",
    "The C binding of gpuport; use the package gpuport.", -1, module_methods,
    NULL, NULL, NULL, NULL};

static int add_functions(PyObject *m, PyMethodDef *defs)
{
    for (PyMethodDef *d = defs; d->ml_name; d++) {
        PyObject *f = PyCFunction_NewEx(d, NULL, PyModule_GetNameObject(m));
        if (!f || PyModule_AddObject(m, d->ml_name, f) < 0) {
            Py_XDECREF(f);
            return -1;
        }
    }
    return 0;
}

PyMODINIT_FUNC PyInit__gpuport(void)
{
    PyObject *m, *errors;

    errors = PyImport_ImportModule("gpuport._errors");
    if (!errors)
        return NULL;
    gp_error_class = PyObject_GetAttrString(errors, "Error");
    gp_leak_warning = PyObject_GetAttrString(errors, "LeakWarning");
    Py_DECREF(errors);
    if (!gp_error_class || !gp_leak_warning)
        return NULL;
    m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0)
            goto err;
    if (PyModule_AddStringConstant(m, "INCLUDE_DIR", GPUPORT_PY_INCLUDEDIR) < 0 ||
        PyModule_AddStringConstant(m, "HEADERS_VERSION",
                                   Py_STRINGIFY(GPUPORT_VERSION_MAJOR) "." Py_STRINGIFY(
                                       GPUPORT_VERSION_MINOR) "." Py_STRINGIFY(GPUPORT_VERSION_PATCH)) < 0)
        goto err;
    if (gp_comm_init(m) < 0 || gp_region_init(m) < 0 || gp_channel_init(m) < 0 ||
        gp_devchan_init(m) < 0)
        goto err;
    if (add_functions(m, gp_channel_functions) < 0 || add_functions(m, gp_comm_functions) < 0 ||
        add_functions(m, gp_bench_functions) < 0)
        goto err;
    return m;
err:
    Py_DECREF(m);
    return NULL;
}
