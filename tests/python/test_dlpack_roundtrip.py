"""Zero-copy round trips through pylayout, proven by writing on one side and reading on the other.

  torch -> pylayout -> torch   (torch.from_dlpack(t) and pylayout._core._to_type(t, torch.Tensor))
  numpy -> pylayout -> numpy   (np.from_dlpack(t))
  torch -> pylayout -> numpy

Layouts: NAMED_LAYOUTS (contiguous, transposed, permuted 4-D/5-D, channels_last,
channels_last_3d, stepped slices, expands, size-0 dims, 0-d, storage offsets) for
every dtype, plus N_RANDOM seeded layouts from conftest.torch_layouts per route.
The leak checks (marked slow) run 100 000 round trips each and watch RSS and refcounts.
"""
from __future__ import annotations

import gc
import sys

import pytest

import pylayout as pl
from pylayout import _core
from conftest import rss_growth, skip_rss_under_asan, torch_layouts

N_RANDOM = 1500

TORCH_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
                "float64", "complex64", "complex128"]
NUMPY_DTYPES = [d for d in TORCH_DTYPES if d != "bfloat16"]
ITEMSIZE = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "float16": 2, "bfloat16": 2,
            "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


def _named_layouts(torch, dtype):
    """(name, tensor) pairs over fresh storage filled with distinct values."""

    def base(*shape):
        n = 1
        for s in shape:
            n *= s
        if shape:
            v = torch.arange(n, dtype=torch.float64).reshape(shape)
        else:
            v = torch.tensor(7.0, dtype=torch.float64)
        if dtype == torch.bool:
            return (v.to(torch.int64) % 2 == 1)
        if dtype.is_complex:
            return (v + 1j * (v + 0.5)).to(dtype)
        return (v % 100).to(dtype) if dtype in (torch.int8, torch.uint8) else v.to(dtype)

    cl, cl3 = torch.channels_last, torch.channels_last_3d
    return [
        ("contiguous", base(3, 4, 5)),
        ("1-d", base(17)),
        ("transposed", base(6, 7).t()),
        ("permuted-4d", base(2, 3, 4, 5).permute(2, 0, 3, 1)),
        ("permuted-5d", base(2, 3, 2, 4, 3).permute(4, 1, 3, 0, 2)),
        ("channels_last", base(2, 3, 4, 5).contiguous(memory_format=cl)),
        ("channels_last_3d", base(2, 3, 2, 4, 3).contiguous(memory_format=cl3)),
        ("sliced-steps", base(7, 9, 6)[1::2, ::3, 2:5]),
        ("sliced-offset", base(5, 6)[1:]),
        ("sliced-col-offset", base(5, 6)[:, 3:]),
        ("expanded", base(3, 1, 4).expand(3, 5, 4)),
        ("expanded-0d-to-2d", base(1, 1).expand(4, 6)),
        ("size-0", base(3, 0, 4)),
        ("size-0-permuted", base(3, 0, 4).permute(2, 0, 1)),
        ("0-d", base()),
        ("size-1-dims", base(1, 5, 1, 3)),
        ("channels_last-sliced", base(2, 6, 5, 4).contiguous(memory_format=cl)[:, 1::2, 1:, ::2]),
    ]


def _tdtype(torch, name):
    return getattr(torch, name)


def _poke_value(torch, dtype):
    if dtype == torch.bool:
        return True
    if dtype.is_complex:
        return complex(-3.0, 9.0)
    if dtype.is_floating_point:
        return -2.5
    return 99 if dtype == torch.uint8 else -99


def _indices(x, k=3, seed=0):
    """A few valid multi-indices of x (first, last, middle)."""
    shape = tuple(x.shape)
    if 0 in shape:
        return []
    out = {tuple(0 for _ in shape), tuple(s - 1 for s in shape), tuple(s // 2 for s in shape)}
    return sorted(out)[:k]


def _check_torch_alias(torch, src, dst, what):
    """src and dst are the same memory: shape/strides/ptr equal, a write to either shows in the other."""
    assert tuple(dst.shape) == tuple(src.shape), what
    assert dst.stride() == src.stride(), what
    assert dst.dtype == src.dtype, what
    if src.numel() > 0:
        assert dst.data_ptr() == src.data_ptr(), what
    assert torch.equal(dst, src), what
    v = _poke_value(torch, src.dtype)
    for idx in _indices(src):
        old = src[idx].clone()
        dst[idx] = v
        assert src[idx].item() == dst[idx].item() == v, (what, idx)
        src[idx] = old
        assert dst[idx].item() == old.item(), (what, idx)


def _check_numpy_alias(np, src, dst, what):
    assert dst.shape == src.shape, what
    assert dst.strides == src.strides, what
    assert dst.dtype == src.dtype, what
    if src.size > 0:
        assert dst.ctypes.data == src.ctypes.data, what
    assert np.array_equal(dst, src), what
    v = {"b": True}.get(src.dtype.kind, None)
    if v is None:
        v = -3 + 9j if src.dtype.kind == "c" else (-2.5 if src.dtype.kind == "f" else 99)
    for idx in _indices(src):
        old = src[idx].copy()
        dst[idx] = v
        assert src[idx] == dst[idx] == np.asarray(v).astype(src.dtype), (what, idx)
        src[idx] = old
        assert dst[idx] == old, (what, idx)


def _check_tensor_attrs(t, shape, strides_elems, dtype_name, data_ptr):
    assert t.shape == tuple(shape)
    assert t.strides == tuple(strides_elems)
    assert t.dtype == dtype_name
    assert t.device == (1, 0)
    assert t.ndim == len(shape)
    assert t.itemsize == ITEMSIZE[dtype_name]
    n = 1
    for s in shape:
        n *= s
    assert t.nbytes == n * ITEMSIZE[dtype_name]
    if n > 0:
        assert t.data_ptr == data_ptr
    assert t.byte_offset == 0  # torch and NumPy export byte_offset 0
    assert t.readonly is False


# ---------------------------------------------------------------- torch -> torch


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_pylayout_torch_named(torch, dtype):
    td = _tdtype(torch, dtype)
    for name, x in _named_layouts(torch, td):
        t = pl.from_dlpack(x)
        _check_tensor_attrs(t, x.shape, x.stride(), dtype, x.data_ptr())
        y = torch.from_dlpack(t)
        _check_torch_alias(torch, x, y, f"{dtype} {name} torch.from_dlpack")
        z = _core._to_type(t, torch.Tensor)
        assert type(z) is torch.Tensor
        _check_torch_alias(torch, x, z, f"{dtype} {name} _to_type")
        # the view keeps the memory alive after the original goes
        keep = x.clone()
        del x, t
        gc.collect()
        assert torch.equal(y, keep) and torch.equal(z, keep), name


def test_torch_pylayout_torch_random(torch):
    for desc, x in torch_layouts(torch, N_RANDOM, seed=11, dtype=torch.float64):
        t = pl.from_dlpack(x)
        assert t.shape == tuple(x.shape) and t.strides == x.stride(), desc
        if x.numel():
            assert t.data_ptr == x.data_ptr(), desc
        y = torch.from_dlpack(t)
        z = _core._to_type(t, torch.Tensor)
        for out in (y, z):
            assert tuple(out.shape) == tuple(x.shape) and out.stride() == x.stride(), desc
            if x.numel():
                assert out.data_ptr() == x.data_ptr(), desc
                idx = tuple(s - 1 for s in x.shape)
                out[idx] = 12345.0
                assert x[idx].item() == 12345.0, desc
                x[idx] = -1.0
                assert out[idx].item() == -1.0, desc


def test_torch_storage_offset_and_byte_offset(torch):
    x = torch.arange(30, dtype=torch.int32).reshape(5, 6)
    for v in (x[1:], x[:, 2:], x[3:, 1::2], x[4, 5]):
        t = pl.from_dlpack(v)
        assert t.byte_offset == 0
        assert t.data_ptr == v.data_ptr() == x.data_ptr() + v.storage_offset() * 4
        y = torch.from_dlpack(t)
        assert y.data_ptr() == v.data_ptr() and torch.equal(y, v)


# ---------------------------------------------------------------- numpy -> numpy


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_pylayout_numpy_named(torch, np, dtype):
    td = _tdtype(torch, dtype)
    for name, x in _named_layouts(torch, td):
        a = x.numpy()
        a_strides_el = tuple(s // a.itemsize for s in a.strides)
        t = pl.from_dlpack(a)
        _check_tensor_attrs(t, a.shape, a_strides_el, dtype, a.ctypes.data)
        b = np.from_dlpack(t)
        _check_numpy_alias(np, a, b, f"{dtype} {name}")
        # torch -> pylayout -> numpy: same memory as the torch tensor
        c = np.from_dlpack(pl.from_dlpack(x))
        _check_numpy_alias(np, a, c, f"{dtype} {name} torch->numpy")
        if x.numel():
            assert c.ctypes.data == x.data_ptr()


def test_numpy_only_layouts(np):
    """Layouts torch cannot express: negative strides, Fortran order, non-native... (native only)."""
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    cases = {
        "reversed": base[::-1],
        "reversed-steps": base[:, ::-2, 1:, ::-1],
        "fortran": np.asfortranarray(base),
        "fortran-sliced": np.asfortranarray(base)[1:, :, ::2],
        "broadcast": np.broadcast_to(np.arange(4.0), (3, 4)),
        "0-d": np.array(3.5),
        "size-0": np.empty((3, 0, 2)),
    }
    for name, a in cases.items():
        t = pl.from_dlpack(a)
        assert t.strides == tuple(s // a.itemsize for s in a.strides), name
        if a.size:
            assert t.data_ptr == a.ctypes.data, name
        b = np.from_dlpack(t)
        assert b.strides == a.strides and b.shape == a.shape, name
        if a.size:
            assert b.ctypes.data == a.ctypes.data, name
            assert np.shares_memory(a, b), name
        assert np.array_equal(a, b), name
        assert t.readonly is (not a.flags.writeable), name
        if a.flags.writeable and a.size:
            idx = tuple(s - 1 for s in a.shape)
            b[idx] = -7
            assert a[idx] == -7, name


def test_numpy_random_layouts(torch, np):
    for desc, x in torch_layouts(torch, N_RANDOM, seed=12, dtype=torch.int32):
        a = x.numpy()
        t = pl.from_dlpack(a)
        assert t.shape == a.shape and t.strides == tuple(s // 4 for s in a.strides), desc
        b = np.from_dlpack(t)
        assert b.shape == a.shape and b.strides == a.strides, desc
        if a.size:
            assert b.ctypes.data == a.ctypes.data, desc
            idx = tuple(s - 1 for s in a.shape)
            b[idx] = 424242
            assert a[idx] == 424242 and x[idx].item() == 424242, desc


def test_bfloat16_torch_only(torch, np):
    x = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4).t()
    t = pl.from_dlpack(x)
    assert t.dtype == "bfloat16" and t.itemsize == 2
    y = torch.from_dlpack(t)
    _check_torch_alias(torch, x, y, "bfloat16")
    with pytest.raises((BufferError, TypeError, ValueError, RuntimeError)):
        np.from_dlpack(t)  # NumPy has no bfloat16 (NumPy 2.4 raises RuntimeError "Unsupported dtype")


# ---------------------------------------------------------------- leaks


@pytest.mark.slow
@skip_rss_under_asan
def test_numpy_roundtrip_does_not_leak(np):
    a = np.arange(64, dtype=np.float32).reshape(8, 8).T
    rc = sys.getrefcount(a)

    def once():
        b = np.from_dlpack(pl.from_dlpack(a))
        assert b.ctypes.data == a.ctypes.data

    grew = rss_growth(once, 100_000, warmup=20_000)
    assert sys.getrefcount(a) == rc, "the NumPy producer's refcount was not restored"
    # a leaked managed tensor costs >= 80 bytes: 100 000 of them >= 8 MB
    assert grew < 2 * 1024 * 1024, f"RSS grew by {grew} bytes over 100 000 numpy round trips"


@pytest.mark.slow
@skip_rss_under_asan
def test_torch_roundtrip_does_not_leak(torch):
    x = torch.arange(64, dtype=torch.float32).reshape(8, 8).t()
    rc = sys.getrefcount(x)

    def once():
        y = torch.from_dlpack(pl.from_dlpack(x))
        assert y.data_ptr() == x.data_ptr()

    grew = rss_growth(once, 100_000, warmup=20_000)
    assert sys.getrefcount(x) == rc, "the torch producer's refcount was not restored"
    assert grew < 2 * 1024 * 1024, f"RSS grew by {grew} bytes over 100 000 torch round trips"


@pytest.mark.slow
@skip_rss_under_asan
def test_to_type_and_queries_do_not_leak(torch, np):
    x = torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    a = np.zeros((4, 5))
    rcx, rca = sys.getrefcount(x), sys.getrefcount(a)

    def once():
        _core._to_type(pl.from_dlpack(x), torch.Tensor)
        pl.is_contiguous(x, "channels_last")
        pl.suggest_format(x)
        pl.is_contiguous(a, "fortran")
        pl.from_dlpack(a.__dlpack__(max_version=(1, 0)))
        pl.from_dlpack(pl.from_dlpack(a).__dlpack__())

    grew = rss_growth(once, 30_000, warmup=5000)
    assert sys.getrefcount(x) == rcx and sys.getrefcount(a) == rca
    assert grew < 2 * 1024 * 1024, f"RSS grew by {grew} bytes"
