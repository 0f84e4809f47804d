"""Port channels on host memory: data moved and compared byte for byte."""
import os
import time

import numpy as np
import pytest

import gpuport


def pattern(rank, n, round_=0):
    return ((np.arange(n) * 7 + rank * 31 + round_ * 13) % 251).astype(np.uint8)


def finish(ch):
    """Both sides are done with the channel before either closes it (a
    close ends the peer's operations with ERR_CLOSED)."""
    ch.signal()
    ch.wait()


def test_pingpong_bytes(comm, partner):
    n, rounds = 4096, 50
    src = np.zeros(n, np.uint8)
    dst = gpuport.alloc(comm, n)
    with gpuport.Region(comm, src) as rs, gpuport.Region(comm, dst) as rd:
        ch = gpuport.PortChannel(comm, partner, rs, rd)
        forced = os.environ.get("GPUPORT_TRANSPORT", "auto")
        assert ch.transport == (forced if forced != "auto" else ch.transport)
        assert ch.transport in ("shm", "tcp")
        first = comm.rank < partner
        for i in range(rounds):
            if first:
                src[:] = pattern(comm.rank, n, i)
                ch.put_with_signal(0, 0, n)
                ch.wait()
                assert np.array_equal(dst, pattern(partner, n, i)), "round %d" % i
            else:
                ch.wait()
                assert np.array_equal(dst, pattern(partner, n, i)), "round %d" % i
                src[:] = pattern(comm.rank, n, i)
                ch.put_with_signal(0, 0, n)
            ch.flush()
        finish(ch)
        assert ch.signal_count() == rounds + 1   # nothing more is sent after finish
        ch.close()
        assert ch.closed
    del dst


def test_put_value_wait_until_poll(comm, partner):
    dst = gpuport.alloc(comm, 64, np.uint64)
    with gpuport.Region(comm, dst) as rd:
        ch = gpuport.PortChannel(comm, partner, None, rd)
        base = 1 << 40

        def send():
            ch.put_value(0, base + comm.rank)
            ch.put_value_with_signal(8, -1)          # a negative value: its 64 bits
            ch.signal()
            ch.signal()

        if comm.rank < partner:
            assert ch.poll() is False                # the partner sends only after us
            send()
            ch.wait_until(3)                         # three signals in one call
        else:
            ch.wait_until(3)
            send()
        if comm.rank > partner:
            assert ch.signal_count() == 3            # the partner's fourth comes after ours
        assert ch.signal_count() >= 3
        assert dst[0] == base + partner
        assert dst[1] == np.uint64(2**64 - 1)
        assert ch.status() == gpuport.OK
        ch.signal()
        deadline = time.monotonic() + 5
        while not ch.poll():                         # the fourth, by polling
            assert time.monotonic() < deadline, "no fourth signal"
        assert ch.signal_count() == 4
        ch.close()
    del dst


def test_get(comm, partner):
    n = 1000
    local = np.zeros(n, np.uint8)
    exposed = gpuport.alloc(comm, n)
    exposed[:] = pattern(comm.rank, n, 5)
    with gpuport.Region(comm, local) as rs, gpuport.Region(comm, exposed) as rd:
        ch = gpuport.PortChannel(comm, partner, rs, rd)
        ch.signal()          # my exposed bytes are written
        ch.wait()            # and so are the partner's
        ch.get(0, 0, n)
        ch.flush()
        assert np.array_equal(local, pattern(partner, n, 5))
        ch.get(100, 10, 20)  # offsets on both sides
        ch.flush()
        assert np.array_equal(local[10:30], pattern(partner, n, 5)[100:120])
        ch.signal()          # done reading: the partner may close
        ch.wait()
        ch.close()
    del exposed


def test_accumulate_and_atomic_add_all(comm):
    """Every rank adds into every other rank's memory over create_all."""
    size, me, k = comm.size, comm.rank, 10
    contrib_i = (np.arange(16, dtype=np.int64) + 1) * (me + 1)
    contrib_f = np.linspace(0.5, 8.0, 16, dtype=np.float32) * (me + 1)
    src = np.concatenate([contrib_i.view(np.uint8), contrib_f.view(np.uint8)])
    dst = gpuport.alloc(comm, 128 + 128 + 8 * size, np.uint8)
    with gpuport.Region(comm, src) as rs, gpuport.Region(comm, dst) as rd:
        chans = gpuport.create_all(comm, rs, rd)
        assert chans[me] is None and len(chans) == size
        peers = [c for c in chans if c is not None]
        for c in peers:
            c.accumulate(0, 0, 16, gpuport.INT64)
            c.accumulate(128, 128, 16, np.float32)
            for _ in range(k):
                c.atomic_add(256 + 8 * me, me + 1)
        gpuport.flush_all(peers)
        for c in peers:
            c.signal()
        gpuport.wait_all(peers)
        others = [r for r in range(size) if r != me]
        want_i = sum((np.arange(16, dtype=np.int64) + 1) * (r + 1) for r in others)
        want_f = sum(np.linspace(0.5, 8.0, 16, dtype=np.float32) * (r + 1) for r in others)
        assert np.array_equal(dst[:128].view(np.int64), want_i)
        assert np.allclose(dst[128:192].view(np.float32), want_f, rtol=1e-6)
        counters = dst[256:].view(np.int64)
        for r in range(size):
            assert counters[r] == (0 if r == me else k * (r + 1)), "counter of rank %d" % r
        for c in peers:   # nobody closes before everybody has read
            c.signal()
        gpuport.wait_all(peers)
        for c in peers:
            c.close()
    del dst


class DLPackOnly:
    """Host memory reached only through DLPack (no buffer protocol)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_host_region(comm, partner):
    n = 256
    src = np.zeros(n, np.uint8)
    dst = np.zeros(n, np.uint8)
    src[:] = pattern(comm.rank, n)
    rs = gpuport.Region(comm, DLPackOnly(src))
    rd = gpuport.Region(comm, DLPackOnly(dst))
    assert rs.size == n and not rs.device and rs.ptr == src.ctypes.data
    ch = gpuport.PortChannel(comm, partner, rs, rd)
    ch.put_with_signal(0, 0, n)
    ch.wait()
    ch.flush()
    assert np.array_equal(dst, pattern(partner, n))
    ch.signal()
    ch.wait()
    ch.close()
    rs.close()
    rd.close()


def test_peer_channel_host_mode(comm, partner):
    buf = gpuport.alloc(comm, 64)
    with gpuport.Region(comm, buf) as r:
        pc = gpuport.PeerChannel(comm, partner, r, r)
        assert pc.stores() is False      # host memory: every operation by the proxy
        with pytest.raises(gpuport.Error) as e:
            pc.device_handle()
        assert e.value.status == gpuport.ERR_NOT_SUPPORTED
        pc.close()
        assert pc.closed
    del buf


def test_include_dir():
    import os

    d = gpuport.include_dir()
    assert os.path.isfile(os.path.join(d, "gpuport", "gpuport_device.h"))
    assert gpuport.PORT_CHANNEL_DEV_SIZE > 64
