"""Strided gathers: x[..., ::k] into a dense result, bit-exact against NumPy and torch.

One channel of an interleaved image (img[..., 0] of an HWC uint8 image), one
coordinate of (N, 3) points, every k-th column: a dense dst filled from
every k-th element of src.  Steps of 2 have their own kernels (copy_x86.c),
steps of 3 to 8 the shuffle kernels of src/gather_x86.c, larger steps the
portable loop; step 0 (a source broadcast along the row) the fill kernels
of src/rows_x86.c.  Checked at 1 and 2 threads, with sources and destinations
off their cache lines and off their element alignment, lengths around each
kernel's vector width, rows that fuse and rows that do not, and guard bytes
around every destination that must stay untouched.  Each SIMD path runs in
its own interpreter with PYLAYOUT_SIMD set (the path is chosen once, at
import); a path this CPU lacks is skipped, and the child reports the path
it ran.  Sources that end on the last byte of their buffer are the C
suite's (tests/c/check_copy.c, under valgrind and AddressSanitizer).
"""
from __future__ import annotations

import pytest

import pylayout as pl
from _gather_checks import COMMON
from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl` and `oracle` defined (and torch imported for it).
CHECKS = COMMON + r"""
LENGTHS = list(range(1, 70)) + [127, 128, 129, 1000, 1031, 4099]

def run():
    cases = 0
    for threads in (1, 2):
        pl.set_num_threads(threads)
        for dtype in (np.uint8, np.int16, np.float32, np.float64, np.complex128):
            isz = np.dtype(dtype).itemsize
            for k in range(2, 10):
                for n in (LENGTHS if threads == 1 else LENGTHS[::7]):
                    for off in ((0, 16, 3) if isz > 1 else (0, 7)):
                        if off % isz and oracle == "torch":
                            continue  # NumPy allows sources off their element alignment, torch not
                        s = source(n * k, dtype, n * 10 + k, off)
                        check(s[::k])
                        check(s[k - 1::k])  # the last element is the buffer's last
                        cases += 2
                # 2-D: rows that fuse into one, rows that do not, an HWC image's channel
                for shape, step in (((7, 33 * k), (1, k)), ((5, 40 * k + 3), (1, k)),
                                    ((64, 130, k), None)):
                    a = source(int(np.prod(shape)), dtype, k, 16).reshape(shape)
                    views = [a[:, ::k], a[:, 1::k]] if step else [a[..., 0], a[..., k - 1], a[::2, :, 1]]
                    for v in views:
                        check(v)
                        cases += 1
            # step 0: a source broadcast along the row, x[..., :1].expand(...)
            # (the fill kernels of src/rows_x86.c), rows of every length
            # around 16, 32 and 64 bytes, each row's element its own
            for n in (LENGTHS if threads == 1 else LENGTHS[::7]):
                for off in ((0, 16, 3) if isz > 1 else (0, 7)):
                    if off % isz and oracle == "torch":
                        continue
                    s = source(5 * 3, dtype, n, off)
                    check(np.lib.stride_tricks.as_strided(s, (5, n), (3 * isz, 0)))
                    cases += 1
            s = source(((4 << 20) // (1000 * isz)) * 2, dtype, 1, 0)  # 4 MiB of dst: the threads split the rows
            check(np.lib.stride_tricks.as_strided(s, (len(s) // 2, 1000), (2 * isz, 0)))
            # 2 to 4 MiB of dst: the threads split the rows
            for k in (3, 4):
                a = source(((4 << 20) // isz + 128) * k, dtype, k, 0)
                check(a[::k])
                check(a.reshape(128, -1)[::2, 1::k])  # rows that do not fuse
                cases += 2
    print("simd=" + pl.info()["simd"], "cases", cases)

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_gathers_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)


def test_image_channel_and_point_coordinate(np, torch):
    """The cases users write: one channel of an HWC image, one coordinate of points."""
    g = torch.Generator().manual_seed(16)
    img = torch.randint(0, 256, (480, 640, 3), dtype=torch.uint8, generator=g)
    rgba = torch.randint(0, 256, (480, 640, 4), dtype=torch.uint8, generator=g)
    pts = torch.randn(100_003, 3, generator=g)
    for x in (img[..., 0], img[..., 2], rgba[..., 3], pts[:, 0], pts[:, 2], pts.double()[:, 1],
              pts.to(torch.bfloat16)[:, 1]):
        got = pl.contiguous(x)
        assert isinstance(got, torch.Tensor) and got.is_contiguous()
        assert torch.equal(got, x.contiguous())
        a = x.numpy() if x.dtype != torch.bfloat16 else None
        if a is not None:
            assert np.array_equal(pl.contiguous(a), np.ascontiguousarray(a))
