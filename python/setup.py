"""Builds gpuport._gpuport against an installed gpuport (C library).

Where the library is: pkg-config's gpuport-mpi (PKG_CONFIG_PATH for a
prefix of your own), else the prefix in GPUPORT_PREFIX. The extension is
compiled with the MPI wrapper that libgpuport_mpi was built with (the
pkg-config variable mpicc; MPICC overrides), so that its mpi.h is that
MPI's, and linked with a run path to the library's directory. A CC in the
environment is the compiler that wrapper runs (OMPI_CC / MPICH_CC).
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "gpuport-mpi"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.strip()


def library():
    prefix = os.environ.get("GPUPORT_PREFIX")
    if prefix:
        prefix = os.path.realpath(prefix)
        inc, lib = os.path.join(prefix, "include"), os.path.join(prefix, "lib")
        mpicc = None
        pc = os.path.join(lib, "pkgconfig", "gpuport-mpi.pc")
        if os.path.isfile(pc):
            for line in open(pc):
                if line.startswith("mpicc="):
                    mpicc = line.split("=", 1)[1].strip()
        return inc, lib, mpicc
    inc = pkg_config("--variable=includedir")
    if inc is None:
        raise SystemExit(
            "gpuport: the C library was not found: pkg-config knows no gpuport-mpi. Install "
            "gpuport (make install), then set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig or "
            "GPUPORT_PREFIX=<prefix>")
    return (os.path.realpath(inc), os.path.realpath(pkg_config("--variable=libdir")),
            pkg_config("--variable=mpicc"))


inc, lib, mpicc = library()
mpicc = os.environ.get("MPICC") or mpicc or "mpicc"
# The wrapper compiles, so that mpi.h is that MPI's; a CC of the user's
# (set on some machines for every build) becomes the compiler the wrapper
# runs (OMPI_CC for Open MPI, MPICH_CC for MPICH) instead of replacing the
# wrapper, which left mpi.h unfound.
if os.environ.get("CC") and os.environ["CC"] != mpicc:
    os.environ.setdefault("OMPI_CC", os.environ["CC"])
    os.environ.setdefault("MPICH_CC", os.environ["CC"])
os.environ["CC"] = mpicc
os.environ.setdefault("LDSHARED", mpicc + " -shared")

import mpi4py  # noqa: E402

ext = Extension(
    "gpuport._gpuport",
    sources=["src/" + f for f in ("module.c", "comm.c", "region.c", "channel.c", "port_ops.c", "bench.c")],
    include_dirs=[inc, mpi4py.get_include()],
    library_dirs=[lib],
    runtime_library_dirs=[lib],
    libraries=["gpuport_mpi", "gpuport"],
    define_macros=[("GPUPORT_PY_INCLUDEDIR", '"%s"' % inc)],
    extra_compile_args=["-std=gnu11", "-Wall", "-Wno-missing-field-initializers"],
    depends=["src/gpuport_py.h"],
)

setup(ext_modules=[ext])
