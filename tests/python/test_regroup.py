"""Regrouped copies, bit-exact against NumPy and torch.

A copy whose src holds groups of B elements packed and whose dst holds
groups of A other elements packed, both along one dim j: (A, N, B) -> (B, N,
A), small matrices between batch layouts, or planar data whose short channel
dim moves across.  Per j it is an A x B transpose, which the tiles took one
tile a unit (a few bytes from rows far apart: 0.3-2 GB/s in uint8, below
torch); plan.c's pl_regroup unzips the A src rows of a unit into an L1
buffer's planes and zips them into the B dst rows.  Checked for A and B of
2 to 8, every element size, j of 8 (the least), 9 and ragged against the
unit, an outer dim in either place, sources and destinations off their
cache lines and off their element alignment, guard bytes around every
destination, 1 and 2 threads, and copies past 8 MiB (units that prefetch
the next: plan.c's pl_stream_min_wide_bytes on any machine), including the
16-byte groups that go to the streamed tiles there
(pl_regroup_streams_wins).  Each SIMD path runs in its own interpreter
with PYLAYOUT_SIMD set; a path this CPU lacks is skipped, and the
child reports the path it ran.  The C suite (tests/c/check_tiles.c, tcase
"regroup") checks the same on every path, under valgrind and the
sanitizers too.
"""
from __future__ import annotations

import pytest

import pylayout as pl
from _gather_checks import COMMON
from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl` and `oracle` defined (and torch imported for it).
CHECKS = COMMON + r"""
AB = ((2, 2), (2, 3), (3, 7), (4, 4), (5, 8), (7, 2), (8, 8), (6, 3), (8, 5))

def run():
    cases = 0
    for threads in (1, 2):
        pl.set_num_threads(threads)
        for dtype in (np.uint8, np.float16, np.float32, np.float64, np.complex128):
            isz = np.dtype(dtype).itemsize
            for i, (a, b) in enumerate(AB):
                for j in (8, 9, 700 + i):
                    x = source(a * j * b, dtype, a * 10 + b + j, (isz * i) % 64).reshape(a, j, b)
                    check(x.transpose(2, 1, 0))
                    cases += 1
            # an outer dim outside both groups, and between them in dst
            x = source(3 * 4 * 100 * 7, dtype, 5, isz).reshape(3, 4, 100, 7)
            check(x.transpose(0, 3, 2, 1))
            x = source(4 * 50 * 3 * 2, dtype, 6, 0).reshape(4, 50, 3, 2)
            check(x.transpose(3, 2, 0, 1))
            cases += 2
        # past 8 MiB: units of 4 KiB that prefetch the next (8.8 and 9.6 MB),
        # complex groups of 3 x 4 (11.5 MB) and of 4 x 4, which the streamed
        # tiles take there (8.4 MB)
        for shape, dtype in (((3, 420000, 7), np.uint8), ((2, 300000, 4), np.float32),
                             ((3, 60000, 4), np.complex128), ((4, 33000, 4), np.complex128)):
            n = shape[0] * shape[1] * shape[2]
            check(source(n, dtype, 9, 3 * np.dtype(dtype).itemsize).reshape(shape).transpose(2, 1, 0))
            cases += 1
    print("simd=" + pl.info()["simd"], "cases", cases)

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_regrouped_copies_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)


def test_regrouped_torch_copy_bumps_the_version(torch):
    """(4, N, 7) -> (7, N, 4) of a torch tensor into a preallocated one:
    equal to torch's own copy, and dst's version counter bumped (rule 3)."""
    x = torch.randn(4, 5000, 7).permute(2, 1, 0)
    d = torch.empty(x.shape)
    v = d._version
    assert pl.copy_into(d, x) is d
    assert torch.equal(d, x)
    assert d._version > v
    assert torch.equal(pl.contiguous(x), x.contiguous())
