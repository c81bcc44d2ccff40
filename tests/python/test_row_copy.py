"""Row copies, bit-exact against NumPy and torch.

A permute that keeps the last dim last, (B, H, S, D) -> (B, S, H, D), or
(A, B, n) by (1, 0, 2), copies whole rows of the last dim: each unit is a
run of rows, copied by the SIMD path's row kernel (src/rows_x86.c, up to 4
KiB a row; plan.c's PL_ROWS) or, past that and on the paths without one,
by memcpy and inline moves.  Checked on rows of 3 to 9000 bytes around
every move width (two overlapping moves of 2 to 32 bytes, a loop whose last
move ends at the row's end), units too short for a group gather, every
element size, sources and destinations off their cache lines and off their
element alignment, guard bytes around every destination, 1 and 2 threads,
and a 12.9 MB copy whose rows prefetch their source (past 11 MiB: plan.c's
pl_rows_cached_max_bytes on any machine).  Units of a few short rows far
apart in src take src's dense dim instead (plan.c's pl_row_block_dim): 2 KiB
tiles of it that end mid-dim, the attention permute of float16, copies the
threads split and one of 3 rows a unit past 8 MiB; units under 8 KiB take
several iterations of the loop outside them (pl_fold_rows), the last fold
short.  Each SIMD path runs in its own interpreter with PYLAYOUT_SIMD set;
a path this CPU lacks is skipped, and the child reports the path it ran.
The C suite (tests/c/check_tiles.c, tcase "rows") checks the same kernels
on every path, under valgrind and the sanitizers too.
"""
from __future__ import annotations

import pytest

import pylayout as pl
from _gather_checks import COMMON
from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl` and `oracle` defined (and torch imported for it).
CHECKS = COMMON + r"""
ROW_BYTES = (3, 5, 7, 13, 21, 31, 33, 47, 63, 64, 65, 96, 127, 128, 129, 200, 255, 392, 1000, 4095, 4096, 4097,
             9000)

def run():
    cases = 0
    for threads in (1, 2):
        pl.set_num_threads(threads)
        for dtype in (np.uint8, np.float16, np.float32, np.float64, np.complex128):
            isz = np.dtype(dtype).itemsize
            for row in ROW_BYTES:
                n = max(1, row // isz)
                for a, b in ((3, 5), (7, 2)):
                    for off in (0, isz, 16 + isz // 2, 63):
                        if off % isz and oracle == "torch":
                            continue
                        x = source(a * b * n, dtype, row + a + off, off).reshape(a, b, n)
                        check(x.transpose(1, 0, 2))
                        cases += 1
            # (B, H, S, D) -> (B, S, H, D), the attention permute
            x = source(2 * 3 * 20 * 40, dtype, 7, isz).reshape(2, 3, 20, 40)
            check(x.transpose(0, 2, 1, 3))
            cases += 1
            # a few short rows a unit, a long dim packed in src: units along
            # it, 2 KiB tiles ending mid-dim, folded (pl_row_block_dim)
            for a, b, row in ((3, 1000, 3), (2, 777, 32), (5, 130, 100), (3, 301, 392), (4, 97, 500)):
                n = max(1, row // isz)
                x = source(a * b * n, dtype, row + b, isz).reshape(a, b, n)
                check(x.transpose(1, 0, 2))
                cases += 1
        # float16 heads of 64 (12 rows of 128 bytes a unit), 3 MB; 3 rows of
        # 32 bytes a unit, 1.9 MB: both split by the threads
        x = source(4 * 12 * 512 * 64, np.float16, 11, 2).reshape(4, 12, 512, 64)
        check(x.transpose(0, 2, 1, 3))
        x = source(3 * 20000 * 32, np.uint8, 12, 3).reshape(3, 20000, 32)
        check(x.transpose(1, 0, 2))
        # 3 rows a unit past 8 MiB (13.4 MB): still units along the dense dim
        x = source(3 * 140000 * 32, np.uint8, 13, 5).reshape(3, 140000, 32)
        check(x.transpose(1, 0, 2))
        # 12.9 MB of 64-byte rows in units of 9 KB: each row's source prefetched
        x = source(144 * 1400 * 64, np.uint8, 3, 5).reshape(144, 1400, 64)
        check(x.transpose(1, 0, 2))
        cases += 4
    print("simd=" + pl.info()["simd"], "cases", cases)

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_row_copies_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)


def test_attention_permute_is_a_torch_copy(torch):
    """(B, H, S, D) -> (B, S, H, D) of a torch tensor into a preallocated
    one: equal to torch's own copy, and its version counter bumped."""
    x = torch.randn(2, 8, 64, 40).permute(0, 2, 1, 3)
    d = torch.empty(x.shape)
    v = d._version
    pl.copy_into(d, x)
    assert torch.equal(d, x)
    assert d._version > v
