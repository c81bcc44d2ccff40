"""torch's and NumPy's conventions: memory_format=, torch.preserve_format,
the Array API's copy=, NumPy scalar types as dtypes, and exception types
with messages that show what they complain about."""
from __future__ import annotations

import pytest

import pylayout as pl
from conftest import same_bits, torch_layouts




def test_memory_format_keyword(torch):
    x = torch.randn(2, 3, 4, 5)
    y = pl.contiguous(x, memory_format=torch.channels_last)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert pl.is_contiguous(y, memory_format=torch.channels_last) is True
    assert pl.is_contiguous(x, memory_format=torch.channels_last) is False
    assert pl.contiguous(y, memory_format=torch.channels_last) is y
    with pytest.raises(TypeError, match="not both"):
        pl.contiguous(x, "fortran", memory_format=torch.channels_last)
    with pytest.raises(TypeError, match="not both"):
        pl.is_contiguous(x, "fortran", memory_format=torch.channels_last)


def test_preserve_format_is_torchs(torch):
    """torch.preserve_format as clone() means it: a dense tensor keeps its
    strides, anything else is copied in its own stride order (c10's
    infer_dense_strides, pylayout_like_order in C)."""
    n = 0
    for where, x in torch_layouts(torch, 600, seed=99):
        ref = x.clone(memory_format=torch.preserve_format)
        y = pl.contiguous(x, torch.preserve_format)
        if x.numel() == 0:
            continue
        n += 1
        assert pl.is_contiguous(x, memory_format=torch.preserve_format) == pl.is_dense(x), where
        if y is x:
            assert pl.is_dense(x), where
            continue
        assert y.stride() == ref.stride(), f"{where}: pylayout {y.stride()} vs torch clone {ref.stride()}"
        assert same_bits(y, x), where
    assert n > 400


def test_copy_keyword(torch, np):
    a = np.arange(6.0).reshape(2, 3)
    assert pl.contiguous(a) is a and pl.contiguous(a, copy=None) is a
    c = pl.contiguous(a, copy=True)
    assert c is not a and not np.shares_memory(c, a) and (c == a).all()
    with pytest.raises(ValueError, match="copy=False"):
        pl.contiguous(a.T, copy=False)
    assert pl.contiguous(a, copy=False) is a
    assert pl.to_order(a, (0, 1), copy=False) is a
    t = pl.to_order(a, (0, 1), copy=True)
    assert t is not a and not np.shares_memory(t, a)
    with pytest.raises(ValueError, match="copy=False"):
        pl.to_order(a, (1, 0), copy=False)
    x = torch.randn(2, 3, 4, 5)
    for requires_grad in (False, True):
        x.requires_grad_(requires_grad)
        y = pl.contiguous(x, copy=True)
        assert y is not x and y.data_ptr() != x.data_ptr() and torch.equal(y, x)
        with pytest.raises(ValueError, match="copy=False"):
            pl.contiguous(x, "channels_last", copy=False)
        y = pl.to_order(x, (0, 1, 2, 3), copy=True)
        assert y.data_ptr() != x.data_ptr()


def test_numpy_scalar_types_are_dtypes(np, torch):
    for t in (np.float32, np.float16, np.int64, np.uint8, np.bool_, np.complex64):
        assert pl.empty((2, 3), t).dtype == np.dtype(t).name
    for t in (np.dtype("float64"), torch.float64, "float64"):
        assert pl.empty((2,), t).dtype == "float64"
    with pytest.raises(ValueError, match="unknown dtype"):
        pl.empty((2,), float)


def test_exception_types_and_messages(np, torch):
    for bad in (np.zeros((3, 2), np.int32), torch.zeros(3, 2, dtype=torch.int32)):
        with pytest.raises(TypeError, match="float16, float32 or float64"):
            pl.view_as_complex(bad)
    for bad in (np.zeros((4, 3), np.float32), torch.zeros(4, 3)):
        with pytest.raises(ValueError, match=r"got shape \(4, 3\)"):
            pl.view_as_complex(bad)
    with pytest.raises(ValueError, match=r"'C'.*'F'"):
        pl.contiguous(np.zeros(3), "row-major")
    with pytest.raises(TypeError, match="int32 but dst is float32"):
        pl.copy_into(np.zeros(3, np.float32), np.ones(3, np.int32))
