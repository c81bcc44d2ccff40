"""2-D transposes that fit in cache, bit-exact against NumPy and torch.

The cached 4-byte tiles (AVX-512 16x16 blocks, AVX2 8x8, SSE2 4x4, in strips
of 32 dst rows where dst rows are a multiple of 1 KiB apart) on every SIMD
path, at 1 and 2 threads: square sizes around the powers of two, rectangles
with thin tiles, sources that are views off their cache lines (sliced out of
a larger array, rows padded), and destinations a few bytes into a larger
buffer whose other bytes must stay untouched.  float32, float64 and 16-byte
elements whose dst rows all start the same whole number of elements into a
line take the aligned split (plan.c, PL_ALIGN_SPLIT_ROW_BYTES): the first
columns on their own, then the rest with every store on a line; float32 and
float64 rows of 512 bytes to 4 KiB instead take the wrapped tiles
(PL_WRAP_MAX_ROW_BYTES: heads of 1, 12 and 13 float32 and of 2, 3, 6 and
7 float64 elements, ragged row counts, several units at 2 threads; up to
2 MiB, and dst rows up to 8 KiB, where rows are a multiple of 2 KiB apart,
dst on a line or not; on AVX-512 also rows on a line that are not, such
as 128 x 128 float32 and 192 x 192 float64; and dense rows that are not a
whole number of lines long, each starting at its own place in a line, up
to 1 MiB, and 2 MiB on AVX-512 where src rows are a multiple of 2 KiB
apart), prefetching their next dst lines (on AVX2, at 1 thread, in groups
of 2 x 2 blocks that read whole src lines where src rows start on lines), and
walk them backwards when a copy repeats the one before it on the same
buffers (pl_repeats: the same copy three times into one dst); but where
src rows are a multiple of a page apart and off their lines, the split's
tiles.  Each path runs in its own interpreter with PYLAYOUT_SIMD set (the
path is chosen once, at import); a path this CPU lacks is skipped, and
the child reports the path it ran.
"""
from __future__ import annotations

import pytest

from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl` and `oracle` ("numpy" or "torch") defined.
CHECKS = r"""
import numpy as np

SENT = 0xA5

def source(rows, cols, pad, off, seed, dtype=np.float32):
    # rows x cols view, rows (cols + pad) elements apart, starting off bytes
    # into its buffer; random bytes, so NaN payloads come through
    rng = np.random.default_rng(seed)
    size = np.dtype(dtype).itemsize
    n = rows * (cols + pad) * size + off + 64
    raw = rng.integers(0, 256, n, dtype=np.uint8)
    lo = (-raw.ctypes.data) % 64 + off
    full = raw[lo:lo + rows * (cols + pad) * size].view(dtype).reshape(rows, cols + pad)
    return full[:, :cols]

def as_bytes(x):
    if oracle == "torch":
        x = x.numpy()
    return np.ascontiguousarray(x).view(np.uint8).tobytes()

def check(a, dst_off):
    want = np.ascontiguousarray(a.T)
    view = a.T if oracle == "numpy" else torch.from_numpy(a).T
    got = pl.contiguous(view)
    assert as_bytes(got) == want.view(np.uint8).tobytes(), ("contiguous", a.shape)
    nbytes = a.size * a.itemsize
    raw = np.full(nbytes + dst_off + 192, SENT, np.uint8)
    lo = (-raw.ctypes.data) % 64 + dst_off
    region = raw[lo:lo + nbytes].view(a.dtype).reshape(want.shape)
    dst = region if oracle == "numpy" else torch.from_numpy(region)
    pl.copy_into(dst, view)
    assert raw[lo:lo + nbytes].tobytes() == want.view(np.uint8).tobytes(), ("copy_into", a.shape, dst_off)
    assert not np.any(raw[:lo] != SENT) and not np.any(raw[lo + nbytes:] != SENT), "guard bytes written"

def repeated(a, dst_off, times=6):
    # the same copy back to back into fresh outputs, checked afterwards: at 2
    # threads a run of 1 MiB-and-up copies engages the team from its second
    # copy on, with the split it keeps from copy to copy (threads.c)
    want = np.ascontiguousarray(a.T).view(np.uint8).tobytes()
    view = a.T if oracle == "numpy" else torch.from_numpy(a).T
    nbytes = a.size * 4
    raws, dsts = [], []
    for _ in range(times):
        raw = np.full(nbytes + dst_off + 192, SENT, np.uint8)
        lo = (-raw.ctypes.data) % 64 + dst_off
        region = raw[lo:lo + nbytes].view(np.float32).reshape(a.shape[::-1])
        raws.append((raw, lo))
        dsts.append(region if oracle == "numpy" else torch.from_numpy(region))
    for dst in dsts:
        pl.copy_into(dst, view)
    for k, (raw, lo) in enumerate(raws):
        assert raw[lo:lo + nbytes].tobytes() == want, ("repeated copy_into", k, a.shape, dst_off)
        assert not np.any(raw[:lo] != SENT) and not np.any(raw[lo + nbytes:] != SENT), "guard bytes written"

def again(a, dst_off, times=3):
    # the same copy into the same dst `times` times, its bytes reset before
    # each: a copy that repeats the one before it runs the wrapped tiles'
    # blocks last first (plan.c, pl_repeats), so every other one backwards
    want = np.ascontiguousarray(a.T).view(np.uint8).tobytes()
    view = a.T if oracle == "numpy" else torch.from_numpy(a).T
    nbytes = a.size * a.itemsize
    raw = np.empty(nbytes + dst_off + 192, np.uint8)
    lo = (-raw.ctypes.data) % 64 + dst_off
    region = raw[lo:lo + nbytes].view(a.dtype).reshape(a.shape[::-1])
    dst = region if oracle == "numpy" else torch.from_numpy(region)
    for k in range(times):
        raw[:] = SENT
        pl.copy_into(dst, view)
        assert raw[lo:lo + nbytes].tobytes() == want, ("again", k, a.shape, a.dtype, dst_off)
        assert not np.any(raw[:lo] != SENT) and not np.any(raw[lo + nbytes:] != SENT), "guard bytes written"

def run():
    cases = [(n, n, 0) for n in (16, 33, 64, 96, 127, 128, 200, 255, 256, 257, 362, 511, 512)]
    cases += [(256, 79, 0), (256, 97, 0), (512, 100, 0), (512, 47, 0), (1024, 70, 0), (768, 90, 0),
              (12, 300, 0), (15, 256, 0), (300, 70, 0), (70, 300, 0), (200, 200, 56), (256, 256, 256),
              (724, 362, 0), (100, 1024, 0), (97, 2048, 0), (40, 64, 960)]
    for threads in (1, 2):
        pl.set_num_threads(threads)
        for i, (rows, cols, pad) in enumerate(cases):
            for soff, doff in ((0, 0), (16, 16), (4, 60), (48, 12)):
                check(source(rows, cols, pad, soff, i), doff)
        for i, (rows, cols) in enumerate(((512, 512), (724, 362), (600, 520))):
            for soff, doff in ((0, 0), (16, 16), (4, 60)):
                repeated(source(rows, cols, 0, soff, 100 + i), doff)
        # dense dst rows of 512 B - 4 KiB (the wrapped tiles) on a line
        # and 1-15 elements before one, short last blocks, 1 MiB parallel;
        # src rows 4 KiB apart (off their lines: the split's tiles instead);
        # rows a multiple of 2 KiB apart past 1 MiB, up to 2 MiB (on a line
        # too: PL_WRAP_MAX_CROWDED_BYTES), and dst rows of 8 KiB
        # (PL_WRAP_MAX_CROWDED_ROW_BYTES)
        for i, (rows, cols, dtype) in enumerate(((128, 128, np.float32), (144, 77, np.float32),
                                                 (512, 512, np.float32), (1024, 70, np.float32),
                                                 (512, 17, np.float32), (64, 64, np.float64),
                                                 (256, 256, np.float64), (512, 100, np.float64),
                                                 (128, 1024, np.float32), (64, 512, np.float64),
                                                 (1024, 512, np.float32), (768, 512, np.float32),
                                                 (512, 512, np.float64), (384, 1024, np.float64),
                                                 (2048, 100, np.float32), (1024, 77, np.float64),
                                                 (320, 320, np.float32), (192, 192, np.float64),
                                                 (384, 128, np.float64),
                                                 # dst rows off their lines
                                                 (130, 130, np.float32), (260, 496, np.float32),
                                                 (500, 500, np.float32), (1000, 200, np.float32),
                                                 (700, 512, np.float32), (130, 300, np.float64),
                                                 (300, 130, np.float64), (190, 1024, np.float64))):
            for soff, doff in ((0, 0), (16, 16), (4, 60), (0, 8)):
                again(source(rows, cols, 0, soff, 300 + i, dtype), doff)
        # wider elements: dst rows of 512 bytes and more split at dst's
        # line where the offset is whole elements (8 / 16 / 48 bytes), and
        # stay whole where it is not (4, 12); ragged edges, 1 MiB and up
        # (the rest going parallel at 2 threads) included
        for dtype, shapes in ((np.float64, ((64, 64), (96, 96), (256, 256), (300, 128), (128, 77), (512, 512))),
                              (np.complex128, ((32, 32), (64, 64), (100, 64), (256, 256), (40, 300)))):
            for i, (rows, cols) in enumerate(shapes):
                for soff, doff in ((0, 0), (16, 16), (0, 48), (8, 8), (4, 12), (16, 40)):
                    check(source(rows, cols, 0, soff, 200 + i, dtype), doff)
    print("simd=" + pl.info()["simd"], "cases", len(cases))

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_incache_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)
