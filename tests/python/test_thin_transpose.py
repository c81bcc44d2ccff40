"""Thin transposes: a side of 2 to 8 elements (issue 16).

NCHW -> NHWC with 3 to 8 channels, NHWC -> NCHW (the DataLoader direction) and
view_as_complex of a layout no complex view exists for are interleaves of a
few planes or their inverse, which the copy engine runs with its own kernel
family (src/interleave_x86.c, PL_THIN in src/plan.c).  Every result is
compared bit for bit with NumPy or torch, at 1 and 2 threads; the core
cases run again in child processes with PYLAYOUT_SIMD set to each path, so
the portable, SSE2 and AVX2 kernels are checked on a machine that would
otherwise only run its best path (a path the CPU lacks is skipped).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pylayout as pl
from _simd_children import skip_absent_path

DTYPES = ["uint8", "int16", "float32", "float64", "complex128"]


def _random(np, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)  # any bit pattern, NaNs included: compared as bytes


def _offset(np, a, nbytes):
    """a's values in a fresh buffer that starts nbytes into a 64-byte line."""
    buf = np.empty(a.nbytes + 64 + nbytes, dtype=np.uint8)
    start = (-buf.ctypes.data) % 64 + nbytes
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _same(np, got, want):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    saved = pl.get_num_threads()
    pl.set_num_threads(request.param)
    yield request.param
    pl.set_num_threads(saved)


LENGTHS = list(range(1, 71)) + [257, 1009, 65537]


PLANES = [2, 3, 4, 5, 6, 7, 8]  # 5 to 8: the thin kernels or the tiles, as plan.c's pl_thin_wins picks


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("P", PLANES)
def test_zip_and_unzip_against_numpy(np, threads, dtype, P):
    for n in LENGTHS:
        planes = _random(np, (2, P, n), dtype, seed=n * 10 + P)
        # planar -> packed (an interleave) and back (a de-interleave)
        _same(np, pl.contiguous(planes.transpose(0, 2, 1)), np.ascontiguousarray(planes.transpose(0, 2, 1)))
        packed = np.ascontiguousarray(planes.transpose(0, 2, 1))
        _same(np, pl.contiguous(packed.transpose(0, 2, 1)), planes)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("P", PLANES)
@pytest.mark.parametrize("soff, doff", [(0, 0), (1, 3), (17, 40), (8, 60)])
def test_unaligned_into(np, threads, dtype, P, soff, doff):
    itemsize = np.dtype(dtype).itemsize
    if (soff % itemsize or doff % itemsize) and itemsize > 1:
        soff, doff = soff * itemsize, doff * itemsize  # still off the lines, on whole elements
    n = 4099
    planes = _offset(np, _random(np, (P, n), dtype, seed=P), soff)
    want = np.ascontiguousarray(planes.T)
    dst = _offset(np, np.zeros_like(want), doff)
    pl.copy_into(dst, planes.T)
    _same(np, dst, want)
    back = _offset(np, np.zeros_like(planes), doff)
    pl.copy_into(back, _offset(np, want, soff).T)
    _same(np, back, planes)


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
@pytest.mark.parametrize("P", [3, 5, 8])
def test_above_streaming_threshold(np, threads, dtype, P):
    itemsize = np.dtype(dtype).itemsize
    n = (5 << 20) // (P * itemsize) + 7  # 5 MiB and a ragged end
    planes = _random(np, (P, n), dtype, seed=5)
    _same(np, pl.contiguous(planes.T), np.ascontiguousarray(planes.T))
    packed = np.ascontiguousarray(planes.T)
    _same(np, pl.contiguous(packed.T), planes)


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
def test_images_against_torch(torch, threads, dtype):
    dt = getattr(torch, dtype)
    for shape in [(2, 3, 224, 224), (3, 3, 17, 31), (1, 4, 33, 65), (2, 2, 9, 70), (2, 5, 64, 50), (1, 8, 33, 65)]:
        x = (torch.randint(0, 256, shape, dtype=torch.uint8) if dt == torch.uint8 else torch.randn(shape).to(dt))
        got = pl.contiguous(x, torch.channels_last)
        want = x.contiguous(memory_format=torch.channels_last)
        assert torch.equal(got, want) and got.stride() == want.stride()
        hwc = x.permute(0, 2, 3, 1).contiguous()  # decoded images: HWC
        got = pl.contiguous(hwc.permute(0, 3, 1, 2))
        want = hwc.permute(0, 3, 1, 2).contiguous()
        assert torch.equal(got, want) and got.stride() == want.stride()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_view_as_complex_without_a_view(torch, threads, dtype):
    dt = getattr(torch, dtype)
    for n in [1, 2, 31, 32, 33, 1000, 1 << 20]:
        x = torch.randn(2, n, dtype=dt).t()  # (n, 2), no complex view exists
        got = pl.view_as_complex(x)
        want = torch.view_as_complex(x.contiguous())
        assert torch.equal(torch.view_as_real(got), torch.view_as_real(want))


_CHILD = r"""
import numpy as np, pylayout as pl
rng = np.random.default_rng(0)
for threads in (1, 2):
    pl.set_num_threads(threads)
    for dtype in ("uint8", "uint16", "uint32", "uint64", "complex128"):
        for P in (2, 3, 4, 5, 6, 7, 8):
            for n in list(range(1, 70)) + [1009, 200003]:
                raw = rng.integers(0, 256, size=P * n * np.dtype(dtype).itemsize, dtype=np.uint8)
                planes = raw.view(dtype).reshape(P, n)
                packed = np.ascontiguousarray(planes.T)
                assert np.asarray(pl.contiguous(planes.T)).tobytes() == packed.tobytes(), (dtype, P, n)
                assert np.asarray(pl.contiguous(packed.T)).tobytes() == planes.tobytes(), (dtype, P, n)
print("ok", pl.info()["simd"])
"""


@pytest.mark.parametrize("simd", ["scalar", "sse2", "avx2", "avx512"])
def test_every_simd_path(np, simd):
    skip_absent_path(simd)
    env = dict(os.environ, PYLAYOUT_SIMD=simd)
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")
    if simd in ("scalar", "sse2"):  # every x86-64 CPU has these: the path must be the one asked for
        assert proc.stdout.split() == ["ok", simd]
