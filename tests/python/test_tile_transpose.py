"""Tile transposes, bit-exact against NumPy and torch, on every SIMD path.

2-D transposes (uint8, float16, float32, float64) and 5-D permutes of the
(27,28,28,28,28).permute(2,3,1,4,0) kind, at 1 and 2 threads, small (cached
tiles) and above the streaming threshold (4 MiB; 8 MiB for float32 and float64 with
dst rows whole lines: the AVX-512 256-byte-run kernels; 1.5-3 MiB for uint8 and
float16 with rows a multiple of 2 KiB apart, 2 MiB a thread for float32
and float64 ones), with ragged sizes, and into destinations off their cache lines (a
view a few bytes into a larger buffer, whose other bytes must stay
untouched).  Each SIMD path runs in its own interpreter with PYLAYOUT_SIMD
set: the path is chosen once, at import.  A path this CPU lacks is
skipped, and the child reports the path it ran.  uint8 sources above the
threshold also start off their cache lines (1, 16 as NumPy's large arrays
do, and 37 bytes past one).  Copies of exactly 4 MiB into a dst off its
lines stream the columns after its first line, as larger ones do.
Destination rows shorter than 256 bytes and off their lines, from 48 source
rows up, are built whole in L1 and streamed out.  Destination rows a multiple
of a page apart, from the caches, go through L1 buffers, and so do uint8
sources whose rows are; those run again as planned for Intel cores and for
AMD's (PYLAYOUT_CORES), whose routes differ.
"""
from __future__ import annotations

import pytest

from _simd_children import ORACLES, PATHS, check_against

CHILD_TIMEOUT = 600

# Runs in the child with `pl`, `lib` (numpy or torch) and `oracle` defined.
CHECKS = r"""
import numpy as np

SENT = 0xA5

def source(shape, dtype, seed, src_off=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    # random bytes: float payloads (NaNs included) must come back bit-exact;
    # src_off: the source starts that many bytes past a cache line
    raw = np.frombuffer(bytearray(rng.bytes(n + 64 + src_off)), np.uint8)
    lo = (-raw.ctypes.data) % 64 + src_off
    return raw[lo:lo + n].view(dtype).reshape(shape)

def as_bytes(x):
    if oracle == "torch":
        x = x.numpy()
    return np.ascontiguousarray(x).view(np.uint8).tobytes()

def check(a, perm, dst_offs):
    # a: NumPy source; perm: None for the 2-D transpose; the oracle's copy
    # made once, pylayout's contiguous and copy_into once per dst offset
    if oracle == "numpy":
        view = a.T if perm is None else a.transpose(perm)
        want = np.ascontiguousarray(view)
    else:
        t = torch.from_numpy(a)
        view = t.T if perm is None else t.permute(perm)
        want = view.contiguous()
    want_bytes = as_bytes(want)
    for dst_off in dst_offs:
        check_once(view, want, want_bytes, a, perm, dst_off)

def check_once(view, want, want_bytes, a, perm, dst_off):
    got = pl.contiguous(view)
    assert type(got) is type(want), (type(got), type(want))
    assert tuple(got.shape) == tuple(want.shape)
    assert as_bytes(got) == want_bytes, ("contiguous", a.shape, a.dtype, perm)
    # into a dst dst_off bytes into a larger buffer, guards around it
    isz = a.dtype.itemsize
    nbytes = a.size * isz
    raw = np.full(nbytes + dst_off + 128 + 64, SENT, np.uint8)
    base = (-raw.ctypes.data) % 64  # raw[base] sits on a line
    lo = base + dst_off
    if dst_off % isz == 0:
        region = raw[lo:lo + nbytes].view(a.dtype).reshape(tuple(want.shape))
        dst = region if oracle == "numpy" else torch.from_numpy(region)
        pl.copy_into(dst, view)
        assert raw[lo:lo + nbytes].tobytes() == want_bytes, ("copy_into", a.shape, a.dtype, perm, dst_off)
        assert not np.any(raw[:lo] != SENT) and not np.any(raw[lo + nbytes:] != SENT), "guard bytes written"

def run():
    cases = []
    for dtype in (np.uint8, np.float32, np.float64):
        for shape in [(1, 7), (31, 17), (67, 129), (255, 257), (333, 190)]:
            cases.append((shape, dtype, None))
    # dst rows a multiple of 1 KiB apart (strips of dst rows, kernels.h): sources
    # (R, C) read transposed, dst rows R elements long, ragged C
    cases += [((1024, 77), np.uint8, None), ((4096, 45), np.uint8, None), ((2048, 50), np.uint8, None),
              ((1024, 200), np.float16, None), ((2048, 33), np.float16, None), ((512, 150), np.float16, None),
              ((1024, 61), np.float32, None), ((512, 150), np.float64, None), ((256, 99), np.float64, None),
              # float16: AVX-512 32x32 blocks in strips (rows not a multiple of 2 KiB
              # apart), ragged edges and tiles thinner than a block
              ((300, 301), np.float16, None), ((77, 1000), np.float16, None), ((1000, 45), np.float16, None)]
    # above PL_STREAM_MIN_BYTES (4 MiB), dst rows whole lines and not
    cases += [((2333, 2111), np.uint8, None), ((2304, 2304), np.uint8, None),
              # uint8 with dst rows whole lines: the AVX-512 kernel of
              # tile_bytes_x86.c on 256-row bands, with 64 rows past the
              # last band, columns past the last 64, a second 4096-column tile
              ((1088, 4200), np.uint8, None), ((2560, 1700), np.uint8, None), ((1280, 3333), np.uint8, None),
              # uint8 with dst rows off their lines: the same bands with cached
              # stores (tile_runs), several 1024-row tiles, rows past the last band
              ((1500, 3001), np.uint8, None), ((5, 700, 1300), np.uint8, (0, 2, 1)),
              # uint8 with dst rows whole lines and rows a multiple of 2 KiB
              # apart: on AVX2, 256 x 256 blocks staged through a heap buffer
              # (pl_stile1_staged_avx2), with 64 rows past the last block, 63
              # columns past it, a unit of 64 rows, one block down
              ((1088, 4096), np.uint8, None), ((2048, 2111), np.uint8, None),
              ((4160, 2048), np.uint8, None), ((320, 20480), np.uint8, None),
              ((1300, 1040), np.float32, None),
              # float32 / float64 with dst rows off their lines: on AVX-512 the
              # 256-byte runs through L1, their whole lines streamed (tile_runs)
              ((1100, 1001), np.float32, None), ((900, 1500), np.float32, None),
              ((700, 808), np.float64, None), ((800, 733), np.float64, None),
              ((900, 700), np.float64, None),
              # float16 (and float32 / float64 below AVX-512) with dst rows off
              # their lines: the same runs built in L1 by the cached tile
              ((1501, 1503), np.float16, None), ((1100, 2500), np.float16, None),
              # dst rows of 48-127 elements, shorter than a run and off their
              # lines: whole rows built in L1, streamed out as one block where
              # dense, one by one where apart (plan.c's PL_RUNS_MIN_SRC_ROWS);
              # 47 rows keep the cached tiles
              ((100, 21011), np.float16, None), ((127, 16600), np.float16, None),
              ((50, 21000), np.float32, None), ((60, 210, 170), np.float16, (1, 2, 0)),
              ((47, 44700), np.float16, None), ((60, 100, 360), np.float16, (2, 1, 0)),
              # float32 / float64 with dst rows whole lines stream from 8 MiB
              # (plan.c's PL_STREAM_MIN_WIDE_BYTES); under it they stay cached
              ((1440, 1488), np.float32, None), ((1064, 1000), np.float64, None),
              # exactly 4 MiB: into a dst off its lines the first columns are
              # split off, and the rest, just under the threshold, still streams
              ((1024, 1024), np.float32, None), ((2048, 2048), np.uint8, None),
              # float16 past the threshold, dst rows whole lines: the streamed
              # 32x32 blocks, rows past the last 32, columns past the last 32
              ((1600, 1472), np.float16, None), ((1536, 1536), np.float16, None),
              # 1- and 2-byte, rows a multiple of 2 KiB apart, under 4 MiB:
              # streamed from 1.5 MiB (dst rows a page apart) or from 1.5 MiB a
              # thread (plan.c's PL_STREAM_MIN_CROWDED_NARROW_BYTES)
              ((4096, 401), np.uint8, None), ((2048, 803), np.uint8, None), ((779, 4096), np.uint8, None),
              ((2048, 450), np.float16, None), ((1000, 1024), np.float16, None),
              # float32 / float64, rows a multiple of 2 KiB apart, 2-4 MiB: streamed
              # at 1 thread (PL_STREAM_MAX_CROWDED_CACHED_BYTES)
              ((1536, 500), np.float32, None), ((300, 1024), np.float64, None)]
    # dst rows a multiple of a page apart, src rows a line or more and not a
    # page apart, from the caches: units transposed into an L1 buffer,
    # copied out a dst run at a time (plan.c's PL_FUSE_CROWDED_DST_RUN_BYTES);
    # ragged src widths, a batch, float16 past the narrow crowded threshold,
    # float32 past 1 MiB, src rows 2 KiB apart
    crowded = [((4096, 128), np.uint8, None), ((4096, 77), np.uint8, None), ((8192, 70), np.uint8, None),
               ((2048, 130), np.float16, None), ((2048, 700), np.float16, None),
               ((1024, 128), np.float32, None), ((1024, 333), np.float32, None), ((2048, 61), np.float32, None),
               ((1024, 512), np.float32, None), ((3, 1024, 100), np.float32, (0, 2, 1)),
               # uint8 src rows a page apart, dst rows not: gathered into L1,
               # then transposed into dst (PL_FUSE_CROWDED_SRC_GATHER_BYTES)
               ((128, 4096), np.uint8, None), ((77, 4096), np.uint8, None), ((300, 8192), np.uint8, None),
               ((2, 130, 4096), np.uint8, (0, 2, 1))]
    cases += crowded
    perm = (2, 3, 1, 4, 0)
    for shape in [(27, 28, 3, 4, 28), (5, 6, 7, 6, 7), (3, 29, 5, 2, 31), (27, 28, 12, 12, 28),
                  (27, 28, 28, 12, 28), (26, 28, 29, 14, 27)]:
        cases.append((shape, np.float32, perm))
    for threads in (1, 2):
        pl.set_num_threads(threads)
        for i, (shape, dtype, p) in enumerate(cases):
            a = source(shape, dtype, i)
            check(a, p, (0, 8, 16, 3))
            if dtype == np.uint8 and a.size >= 4 << 20:
                # sources off their cache lines (rows not whole lines apart)
                for src_off in (1, 16, 37):
                    check(source(shape, dtype, i, src_off), p, (0,))
    # those routes as planned for Intel cores and for AMD's (PYLAYOUT_CORES,
    # src/cpu_features.h): float32 from 1 MiB, float16 from 1.5 MiB and uint8
    # src rows a page apart go through the buffers on one vendor's only
    import os
    for cores in ("amd", "intel"):
        os.environ["PYLAYOUT_CORES"] = cores
        for threads in (1, 2):
            pl.set_num_threads(threads)
            for i, (shape, dtype, p) in enumerate(crowded):
                check(source(shape, dtype, i), p, (0, 3))
    del os.environ["PYLAYOUT_CORES"]
    print("simd=" + pl.info()["simd"], "cases", len(cases))

run()
"""


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("path", PATHS)
def test_tiles_match_numpy_and_torch(path, oracle, request):
    check_against(CHECKS, path, oracle, CHILD_TIMEOUT, request)
