"""gpuport from Python: communicators over mpi4py, regions of NumPy, CuPy or
PyTorch memory, and port, memory and peer channels.

Who takes part in each call is named in its docstring: "Collective" (every
rank of the communicator), "Pairwise" (this rank and the peer), "Local".
Nothing else talks to other ranks: no allocation, registration, finalizer or
attribute hides a collective. See python/README.md for the lifecycle rules.
"""

import atexit as _atexit
import os as _os

from mpi4py import MPI as _MPI  # noqa: F401  (MPI_Init before the library's use)

from gpuport._errors import Error, LeakWarning
from gpuport import _gpuport
from gpuport._gpuport import (  # noqa: F401
    Comm, Region, PortChannel, MemoryChannel, PeerChannel, Alloc,
    wait_all, flush_all, create_all, status_string, version,
    OK, ERR_INVALID_ARG, ERR_INVALID_CONFIG, ERR_OUT_OF_RANGE, ERR_NOT_SUPPORTED,
    ERR_NO_MEMORY, ERR_NO_RESOURCE, ERR_AGAIN, ERR_BUSY, ERR_TRANSPORT, ERR_PEER,
    ERR_CLOSED, ERR_TIMEOUT, ERR_VERSION, ERR_SHUTDOWN, ERR_INTERNAL,
    INT64, UINT64, FLOAT32, BFLOAT16,
    PORT_CHANNEL_DEV_SIZE, MEMORY_CHANNEL_DEV_SIZE, PEER_CHANNEL_DEV_SIZE,
)

__all__ = [
    "Comm", "Region", "PortChannel", "MemoryChannel", "PeerChannel", "Error", "LeakWarning",
    "alloc", "alloc_device", "include_dir", "wait_all", "flush_all", "create_all",
]


def include_dir():
    """The directory of the installed gpuport headers (gpuport/gpuport_device.h
    is inside), for CuPy RawKernel/RawModule options ("-I" + include_dir())
    or a PyTorch C++/CUDA extension's include_dirs."""
    d = _gpuport.INCLUDE_DIR
    if not _os.path.isfile(_os.path.join(d, "gpuport", "gpuport_device.h")):
        raise FileNotFoundError(
            "gpuport headers not found in %r, where the library was when this package was "
            "built; reinstall the package against the installed library" % d)
    return d


def _elements(shape, dtype):
    import numpy as np

    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = 1
    for s in shape:
        n *= int(s)
    return shape, dt, n


def alloc(comm, shape, dtype="uint8"):
    """A NumPy array of host memory from gpuport_mem_alloc (zeroed, mappable
    by same-host peers, so shm copies into it directly). Local. The array
    keeps the allocation alive; it is freed (gpuport_mem_free) when no view
    of it remains. Register it with Region(comm, array)."""
    import numpy as np

    shape, dt, n = _elements(shape, dtype)
    block = Alloc(comm, max(n * dt.itemsize, 1))
    return np.frombuffer(block, dtype=dt, count=n).reshape(shape)


def alloc_device(comm, shape, dtype="uint8", like="cupy"):
    """A CuPy array or PyTorch tensor (like="cupy" or "torch") of GPU memory
    from gpuport_mem_alloc_device (VMM memory: every transport, memory and
    peer channels). Local. GPU mode only: a host-only communicator raises
    Error(ERR_NOT_SUPPORTED). The array keeps the allocation alive."""
    import numpy as np

    shape, dt, n = _elements(shape, dtype)
    block = Alloc(comm, max(n * dt.itemsize, 1), device=True)
    if like == "cupy":
        import cupy

        raw = cupy.asarray(block)  # __cuda_array_interface__; keeps block alive
        return raw[: n * dt.itemsize].view(dt).reshape(shape)
    if like == "torch":
        import torch

        raw = torch.as_tensor(block, device="cuda")
        tdt = getattr(torch, dt.name)
        return raw[: n * dt.itemsize].view(tdt).reshape(shape)
    raise ValueError("like must be 'cupy' or 'torch', not %r" % (like,))


# Interpreter exit: close every communicator still open, each bounded by
# GPUPORT_TIMEOUT_MS, saying what was left. Registered after mpi4py's import,
# so it runs before MPI_Finalize.
_atexit.register(_gpuport._close_all_at_exit)
