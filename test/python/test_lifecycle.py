"""Lifecycle: finalizers never block or talk to a peer; close() of a
communicator ends within GPUPORT_TIMEOUT_MS and says what was left."""
import gc
import time
import warnings

import numpy as np
import pytest
from mpi4py import MPI

import gpuport
from conftest import TIMEOUT_S


def test_channel_dropped_without_close():
    comm = gpuport.Comm(MPI.COMM_WORLD)
    partner = comm.rank ^ 1
    if partner >= comm.size:
        comm.close()
        pytest.skip("no partner")
    dst = np.zeros(64, np.uint8)
    rd = gpuport.Region(comm, dst)
    ch = gpuport.PortChannel(comm, partner, rd, rd)
    ch.put_with_signal(0, 0, 8)
    ch.wait()
    t0 = time.monotonic()
    with pytest.warns(gpuport.LeakWarning, match="PortChannel to peer %d" % partner):
        del ch
        gc.collect()
    assert time.monotonic() - t0 < 1.0          # the finalizer did not wait (a destroy would)
    assert comm.leaks == ["PortChannel(peer %d), dropped without close()" % partner]
    # the region is still in use by the detached channel
    with pytest.raises(gpuport.Error) as e:
        rd.close()
    assert e.value.status == gpuport.ERR_BUSY
    del rd
    gc.collect()            # the region's finalizer keeps its memory for the channel
    t0 = time.monotonic()
    with pytest.warns(gpuport.LeakWarning, match="dropped without close"):
        left = comm.close()
    assert time.monotonic() - t0 < TIMEOUT_S
    assert "PortChannel(peer %d), dropped without close()" % partner in left
    assert comm.closed and comm.leaks == []


def test_comm_close_with_live_channel_ends_and_peer_sees_close():
    comm = gpuport.Comm(MPI.COMM_WORLD)
    partner = comm.rank ^ 1
    if partner >= comm.size:
        comm.close()
        pytest.skip("no partner")
    buf = np.zeros(64, np.uint8)
    r = gpuport.Region(comm, buf)
    ch = gpuport.PortChannel(comm, partner, r, r)
    closer = comm.rank < partner
    if closer:
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            left = comm.close()
        assert time.monotonic() - t0 < TIMEOUT_S
        assert len(left) == 1 and left[0].startswith("PortChannel(peer %d, " % partner)
        assert any("destroyed what was still open" in str(x.message) for x in w)
        assert ch.closed and r.closed        # marked dead with the communicator
        with pytest.raises(gpuport.Error) as e:
            ch.put(0, 0, 8)
        assert e.value.status == gpuport.ERR_INVALID_ARG
    else:
        t0 = time.monotonic()
        with pytest.raises(gpuport.Error) as e:
            ch.wait()
        assert e.value.status == gpuport.ERR_CLOSED
        assert time.monotonic() - t0 < TIMEOUT_S      # reported when seen, not at the timeout
        ch.close()
        r.close()
        assert comm.close() == []


def test_region_finalizer_releases_quietly(comm):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(100):
            gpuport.Region(comm, np.zeros(4096, np.uint8))   # dropped at once
        a = gpuport.alloc(comm, 1 << 16)
        del a
        gc.collect()
    assert [x for x in w if issubclass(x.category, gpuport.LeakWarning)] == []
    assert comm.leaks == []
