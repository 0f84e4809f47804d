/*
 * gpuport_py.h: what the files of the extension module gpuport._gpuport
 * share: the object layouts, the communicator's list of children, the
 * set-up lock and the error helpers. Only the extension's own files include
 * it.
 *
 * Lifecycle rules, enforced here and in comm.c:
 * - Every blocking library call runs with the GIL released.
 * - A finalizer (tp_dealloc) never blocks and never calls a collective or
 *   pairwise call: a channel dropped open is detached (its handle stays
 *   live in the communicator, whose close destroys it) and reported with a
 *   gpuport.LeakWarning; local releases (a registration, an allocation) are
 *   made only if the communicator's set-up lock is free at once.
 * - A communicator stays referenced by the module until close(), so it is
 *   never finalized open; the atexit hook closes what is left.
 */
#ifndef GPUPORT_PY_H
#define GPUPORT_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <gpuport/gpuport_device.h>
#include <gpuport/gpuport_mpi.h>

/* What a child of a communicator is. */
enum { CHILD_REGION = 1, CHILD_ALLOC, CHILD_PORT, CHILD_MEMORY, CHILD_PEER };

typedef struct comm_obj comm_obj;

/* The head of every object that lives inside a communicator: linked into
 * its list while open, so that close() can tell what was left and mark it
 * dead. */
typedef struct child_obj {
    PyObject_HEAD
    struct child_obj *prev, *next;
    comm_obj *comm; /* strong reference; NULL once closed */
    int kind;
    int busy;       /* calls in flight with the GIL released */
    PyObject *weakreflist;
} child_obj;

struct comm_obj {
    PyObject_HEAD
    gpuport_comm_t comm;      /* NULL once closed */
    PyThread_type_lock setup; /* one set-up call at a time (gpuport.h) */
    child_obj children;       /* sentinel of the open children */
    PyObject *leaked;         /* objects kept alive for detached handles (list) */
    PyObject *leak_names;     /* descriptions of the detached handles (list of str) */
    int rank, size;
    int gpu_mode;             /* -1 not yet known, 0 host-only, 1 GPU mode */
    int inflight;             /* channel calls in flight with the GIL released */
    comm_obj *reg_prev, *reg_next; /* the module's list of open communicators */
    PyObject *weakreflist;
};

typedef struct {
    child_obj h;
    gpuport_mem_t mem;
    void *ptr;
    size_t size;
    int device;          /* 1: GPU memory */
    int have_view;       /* view holds a buffer-protocol export */
    Py_buffer view;
    PyObject *owner;     /* the object registered */
    PyObject *capsule;   /* a DLPack capsule whose deleter runs at release */
} region_obj;

typedef struct {
    child_obj h;
    void *ptr;
    size_t size;
    int device;
    Py_ssize_t exports; /* buffer-protocol views alive */
} alloc_obj;

typedef struct {
    child_obj h;
    void *ch; /* gpuport_channel_t, _memory_channel_t or _peer_channel_t */
    int peer;
    PyObject *src, *dst; /* the regions, kept alive while the channel is */
} chan_obj;

extern PyTypeObject comm_type, region_type, alloc_type, port_type, memory_type, peer_type;
extern PyObject *gp_error_class, *gp_leak_warning;

/* Raises gpuport.Error(status, "<what>: <status text>"). Returns NULL. */
PyObject *gp_raise(gpuport_status_t status, const char *fmt, ...);
/* Raises gpuport.Error for a handle that is closed. */
PyObject *gp_closed(const char *what);

/* The communicator's set-up lock, taken with the GIL released if it is held
 * elsewhere; gp_setup_try takes it only if free (finalizers). */
void gp_setup_lock(comm_obj *c);
int gp_setup_try(comm_obj *c);
void gp_setup_unlock(comm_obj *c);

/* Children: link into / unlink from the communicator's list. */
void gp_child_link(comm_obj *c, child_obj *ch, int kind);
void gp_child_unlink(child_obj *ch);
/* A live communicator of an argument, or NULL with an exception set. */
comm_obj *gp_comm_arg(PyObject *o);
/* Whether the communicator runs in GPU mode (asked once); -1 on error. */
int gp_comm_gpu_mode(comm_obj *c);
/* Keeps obj alive until the communicator is closed, for a detached handle
 * described by name. */
void gp_comm_keep(comm_obj *c, PyObject *obj, PyObject *name);

/* Finalizer report: a LeakWarning (never raises). */
void gp_warn_leak(const char *fmt, ...);

/* Module parts. */
int gp_comm_init(PyObject *m);
int gp_region_init(PyObject *m);
int gp_channel_init(PyObject *m);
int gp_devchan_init(PyObject *m);
extern PyMethodDef gp_channel_functions[];
extern PyMethodDef gp_comm_functions[];
extern PyMethodDef gp_bench_functions[];

#endif
