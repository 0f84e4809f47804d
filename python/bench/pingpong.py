"""Round trip of put_with_signal + wait (8 bytes by default, host memory)
from Python beside the same loop in C, on the same channel in the same run:
the difference is what the Python call path adds.

    mpirun -np 2 --bind-to none python3 python/bench/pingpong.py [--iters N] [--size B]

Rank 0 prints a table: median, p10 and p99 of the round trip for each path,
and the time Python adds per call (each round trip is four calls: a
put_with_signal and a wait on each rank).
"""
import argparse
import time

import numpy as np
from mpi4py import MPI

import gpuport


def python_loop(ch, iters, first, size):
    t = []
    put, wait, clock = ch.put_with_signal, ch.wait, time.perf_counter_ns
    for _ in range(iters):
        t0 = clock()
        if first:
            put(0, 0, size)
            wait()
        else:
            wait()
            put(0, 0, size)
        t.append(clock() - t0)
    t.sort()
    return t


def stats(t):
    n = len(t)
    return t[n // 2] / 1e3, t[n // 10] / 1e3, t[min(n - 1, n * 99 // 100)] / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3, help="alternate the two paths this often")
    a = ap.parse_args()
    world = MPI.COMM_WORLD
    if world.Get_size() != 2:
        raise SystemExit("run with 2 ranks")
    with gpuport.Comm(world) as comm:
        peer, first = 1 - comm.rank, comm.rank == 0
        src, dst = np.ones(max(a.size, 8), np.uint8), gpuport.alloc(comm, max(a.size, 8))
        rs, rd = gpuport.Region(comm, src), gpuport.Region(comm, dst)
        ch = gpuport.PortChannel(comm, peer, rs, rd)
        python_loop(ch, a.warmup, first, a.size)
        gpuport._gpuport._bench_pingpong(ch, a.warmup, first, a.size)
        res = {"C": [], "Python": []}
        for _ in range(a.repeat):
            res["C"] += gpuport._gpuport._bench_pingpong(ch, a.iters, first, a.size)
            res["Python"] += python_loop(ch, a.iters, first, a.size)
        ch.signal()
        ch.wait()
        transport = ch.transport
        ch.close()
        rs.close()
        rd.close()
        del dst
        if comm.rank == 0:
            c, p = stats(sorted(res["C"])), stats(sorted(res["Python"]))
            print("put_with_signal + wait round trip, %d bytes, %s, %d x %d round trips per path"
                  % (a.size, transport, a.repeat, a.iters))
            print("%-8s %12s %10s %10s" % ("path", "median us", "p10 us", "p99 us"))
            for name, s in (("C", c), ("Python", p)):
                print("%-8s %12.2f %10.2f %10.2f" % (name, s[0], s[1], s[2]))
            print("Python adds %.2f us per round trip (median), %.2f us per call (4 calls)"
                  % (p[0] - c[0], (p[0] - c[0]) / 4))


if __name__ == "__main__":
    main()
