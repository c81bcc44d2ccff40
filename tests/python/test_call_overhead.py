"""Behaviour of the per-call fast paths (issue 16, 1 KB calls): the same
results, identity, errors and kinds of result as before.  Nothing here is
timed: bench and `python -m pylayout bench --only "1 KB"` measure the speed."""
import numpy as np
import pytest

import pylayout as pl
from pylayout import _core

torch = pytest.importorskip("torch")


def test_numpy_small_copy_same_result_kind_and_flags():
    a = np.arange(256, dtype=np.float32).reshape(16, 16).T
    c = pl.contiguous(a)
    assert type(c) is np.ndarray and c.flags.c_contiguous and c.flags.writeable
    assert np.array_equal(c, a) and not np.shares_memory(c, a)
    assert pl.contiguous(c) is c
    assert pl.contiguous(c, copy=True) is not c


def test_numpy_read_only_input_copies_to_a_writeable_result():
    a = np.arange(256, dtype=np.float64).reshape(16, 16).T
    a.flags.writeable = False
    c = pl.contiguous(a)
    assert c.flags.writeable and np.array_equal(c, a)
    assert pl.contiguous(np.ascontiguousarray(a)).flags.writeable is True


def test_torch_small_copy_same_result_kind_and_identity():
    x = torch.randn(16, 16).t()
    c = pl.contiguous(x)
    assert type(c) is torch.Tensor and c.is_contiguous() and torch.equal(c, x)
    assert c.data_ptr() != x.data_ptr()
    assert pl.contiguous(c) is c


def test_torch_guards_still_refuse_at_the_core():
    x = torch.randn(4, 4, dtype=torch.complex64).t()
    with pytest.raises(BufferError, match="conjugate"):
        _core.contiguous(x.conj())
    with pytest.raises(BufferError, match="negative"):
        _core.contiguous(torch.randn(4, 4).t()._neg_view())
    with pytest.raises(BufferError, match="requires grad"):
        _core.contiguous(torch.randn(4, 4, requires_grad=True).t())


def test_autograd_routing_is_kept():
    x = torch.randn(4, 4, requires_grad=True).t()
    c = pl.contiguous(x)
    assert c.requires_grad and c.grad_fn is not None


def test_copy_keyword_keeps_its_meaning():
    a = np.zeros((8, 8), np.float32).T
    with pytest.raises(ValueError, match="copy=False"):
        pl.contiguous(a, copy=False)
    assert pl.contiguous(a, copy=None).flags.c_contiguous


def test_large_copies_still_release_the_gil():
    # above the small-copy size the copy runs without the GIL; results are the same
    a = np.arange(512 * 512, dtype=np.float32).reshape(512, 512).T
    assert np.array_equal(pl.contiguous(a), a)
    x = torch.arange(512 * 512, dtype=torch.float32).reshape(512, 512).t()
    assert torch.equal(pl.contiguous(x), x)


def test_producers_without_max_version_are_still_retried():
    class Legacy:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self):  # no keywords at all
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.arange(16, dtype=np.int32).reshape(4, 4).T
    c = pl.contiguous(Legacy(a))
    assert type(c) is pl.Tensor and np.array_equal(np.from_dlpack(c), a)
