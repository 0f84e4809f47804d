"""Errors: each raises gpuport.Error with the library's status, or a
Python TypeError/OverflowError for an argument of the wrong type."""
import time

import numpy as np
import pytest
from mpi4py import MPI

import gpuport
from conftest import TIMEOUT_S


@pytest.fixture
def chan(comm, partner):
    src = np.zeros(64, np.uint8)
    dst = gpuport.alloc(comm, 64)
    rs, rd = gpuport.Region(comm, src), gpuport.Region(comm, dst)
    ch = gpuport.PortChannel(comm, partner, rs, rd)
    yield ch
    ch.signal()     # both sides are done before either closes
    ch.wait()
    ch.close()
    rs.close()
    rd.close()


def status_of(fn, *args):
    with pytest.raises(gpuport.Error) as e:
        fn(*args)
    return e.value.status


def test_out_of_range(chan):
    assert status_of(chan.put, 0, 0, 65) == gpuport.ERR_OUT_OF_RANGE
    assert status_of(chan.put, 60, 0, 8) == gpuport.ERR_OUT_OF_RANGE
    assert status_of(chan.get, 0, 57, 8) == gpuport.ERR_OUT_OF_RANGE
    assert status_of(chan.put_value, 64, 1) == gpuport.ERR_OUT_OF_RANGE
    assert status_of(chan.put_value, 4, 1) == gpuport.ERR_INVALID_ARG     # not 8-aligned
    assert status_of(chan.accumulate, 0, 0, 9, gpuport.INT64) == gpuport.ERR_OUT_OF_RANGE
    assert status_of(chan.accumulate, 0, 0, 1, "int8") == gpuport.ERR_INVALID_ARG
    # nothing was queued: the channel is still fine
    assert chan.status() == gpuport.OK
    e = pytest.raises(gpuport.Error, chan.put, 0, 0, 65).value
    assert e.name == "ERR_OUT_OF_RANGE" and "PortChannel.put" in str(e)


def test_bad_argument_types(comm, partner, chan):
    with pytest.raises(TypeError):
        chan.put("0", 0, 8)
    with pytest.raises(TypeError):
        chan.put(0, 0)
    with pytest.raises(OverflowError):
        chan.put(-1, 0, 8)
    with pytest.raises(TypeError):
        chan.accumulate(0, 0, 1, 3.5)
    chan.put(np.int64(0), np.uint32(0), 8)     # NumPy integers are integers
    chan.flush()
    assert status_of(gpuport.Region, comm, 42) == gpuport.ERR_INVALID_ARG
    assert status_of(gpuport.Region, comm, np.zeros(64)[::2]) == gpuport.ERR_INVALID_ARG
    assert status_of(gpuport.Region, comm, bytearray()) == gpuport.ERR_INVALID_ARG  # size 0
    # a NumPy array where a Region is wanted: refused before any pairing
    assert status_of(gpuport.PortChannel, comm, partner, np.zeros(8)) == gpuport.ERR_INVALID_ARG
    # a read-only buffer cannot be a destination
    ro = gpuport.Region(comm, b"read-only bytes!")
    assert ro.readonly
    assert status_of(gpuport.PortChannel, comm, partner, None, ro) == gpuport.ERR_INVALID_ARG
    ro.close()
    with pytest.raises(gpuport.Error):
        gpuport.Comm("not a communicator")
    assert status_of(gpuport.wait_all, [chan, 3]) == gpuport.ERR_INVALID_ARG


class FakeCAI:
    """Claims GPU memory through __cuda_array_interface__."""
    __cuda_array_interface__ = {"shape": (1024,), "typestr": "|u1", "data": (0x7f0000000000, False),
                                "version": 3, "strides": None}


class FakeCAIWithBuffer(bytearray):
    """GPU memory through __cuda_array_interface__ on a type that also has
    the buffer protocol (as CuPy's ndarray, whose buffer export fails): the
    interface decides, not the buffer."""
    __cuda_array_interface__ = FakeCAI.__cuda_array_interface__


class FakeCudaDLPack:
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, stream=None):
        raise AssertionError("a device tensor must be refused before it is exported")


def test_device_memory_refused_in_host_mode(comm):
    if comm.gpu_mode():
        pytest.skip("this communicator runs in GPU mode; the refusal is for host-only ones")
    for obj in (FakeCAI(), FakeCAIWithBuffer(8), FakeCudaDLPack()):
        with pytest.raises(gpuport.Error) as e:
            gpuport.Region(comm, obj)
        assert e.value.status == gpuport.ERR_NOT_SUPPORTED
        assert "host-only" in e.value.message
    assert status_of(gpuport.alloc_device, comm, 16) == gpuport.ERR_NOT_SUPPORTED


def test_memory_channel_refused_in_host_mode(comm, partner):
    if comm.gpu_mode():
        pytest.skip("GPU mode: memory channels are made, not refused")
    buf = gpuport.alloc(comm, 64)
    with gpuport.Region(comm, buf) as r:
        assert status_of(gpuport.MemoryChannel, comm, partner, r, r) == gpuport.ERR_NOT_SUPPORTED
    del buf


def test_closed_and_busy(comm, partner):
    src = np.zeros(64, np.uint8)
    rs = gpuport.Region(comm, src)
    ch = gpuport.PortChannel(comm, partner, rs, None)
    assert status_of(rs.close) == gpuport.ERR_BUSY   # a live channel uses it
    ch.close()
    ch.close()                                       # idempotent
    assert status_of(ch.put, 0, 0, 8) == gpuport.ERR_INVALID_ARG
    assert status_of(ch.device_handle) == gpuport.ERR_INVALID_ARG
    rs.close()
    assert rs.closed


def test_wait_times_out(chan):
    t0 = time.monotonic()
    try:
        with pytest.raises(gpuport.Error) as e:
            chan.wait()         # neither side signals
        took = time.monotonic() - t0
    finally:
        # the fixture's closing handshake only after both sides timed out
        MPI.COMM_WORLD.Barrier()
    assert e.value.status == gpuport.ERR_TIMEOUT
    assert TIMEOUT_S * 0.9 <= took <= TIMEOUT_S + 3


def test_close_refused_while_alloc_alive():
    c = gpuport.Comm(MPI.COMM_WORLD)   # collective: every rank runs this test
    a = gpuport.alloc(c, 100, np.float32)
    a[:] = 1.5
    assert status_of(c.close) == gpuport.ERR_BUSY
    assert not c.closed
    assert float(a.sum()) == 150.0      # still usable
    del a
    assert c.close() == []
    assert c.closed
    assert status_of(gpuport.alloc, c, 8) == gpuport.ERR_INVALID_ARG
