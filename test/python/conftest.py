"""Fixtures of the Python suite, which every rank of an mpirun job runs
(test/python/run.sh). One communicator serves the whole session; each test
then makes only pairwise or local calls (no MPI barrier), so a rank whose
test fails cannot hang the others beyond GPUPORT_TIMEOUT_MS, which is set
short here. Each test starts with an MPI barrier: after a test that failed
on one rank mid-exchange (its partner then timed out), the next starts
together on every rank instead of pairing calls of different tests."""
import os

os.environ.setdefault("GPUPORT_TIMEOUT_MS", "8000")

import pytest  # noqa: E402
from mpi4py import MPI  # noqa: E402

import gpuport  # noqa: E402

TIMEOUT_S = int(os.environ["GPUPORT_TIMEOUT_MS"]) / 1000.0


@pytest.fixture(scope="session")
def comm():
    if MPI.COMM_WORLD.Get_size() < 2:
        pytest.skip("needs 2 ranks or more: run under mpirun (test/python/run.sh)")
    c = gpuport.Comm(MPI.COMM_WORLD)
    yield c
    import gc

    gc.collect()
    try:
        c.close()
    except gpuport.Error as e:
        # a failed test's traceback still holds its arrays: the atexit hook
        # closes the communicator instead
        if e.status != gpuport.ERR_BUSY:
            raise


@pytest.fixture
def partner(comm):
    """This rank's partner: ranks pair as (0, 1), (2, 3), ..."""
    p = comm.rank ^ 1
    if p >= comm.size:
        pytest.skip("no partner for the last rank of an odd count")
    return p


@pytest.fixture(autouse=True)
def resync():
    MPI.COMM_WORLD.Barrier()
    yield
