"""pylayout/_symbolic.py holds the only Python copies of pylayout's layout
rules, for torch.compile's symbolic shapes.  Each must give the C core's
answer on every generated shape and layout."""
from __future__ import annotations

import random

import pytest

from pylayout import _core, _symbolic
from conftest import torch_layouts

FORMATS = ["contiguous", "fortran", "channels_last", "channels_last_3d"]


def _shapes(n, seed):
    rng = random.Random(seed)
    for _ in range(n):
        ndim = rng.randint(0, 6)
        yield tuple(rng.choice([0, 1, 1, 2, 3, 4, 7]) for _ in range(ndim))


def test_format_and_order_strides_match_the_core():
    rng = random.Random(5)
    checked = 0
    for shape in _shapes(3000, seed=11):
        for fmt in FORMATS:
            try:
                want = _core.format_strides(shape, fmt)
            except ValueError:
                with pytest.raises(ValueError):
                    _symbolic.format_strides(shape, fmt)
                continue
            assert tuple(_symbolic.format_strides(shape, fmt)) == want, (shape, fmt)
            checked += 1
        order = list(range(len(shape)))
        rng.shuffle(order)
        assert tuple(_symbolic.order_strides(shape, order)) == _core.order_strides(shape, order), (shape, order)
    assert checked > 6000


def test_canonical_and_complex_view_strides_match_the_core():
    torch = pytest.importorskip("torch", reason="the layouts come from torch (CI installs it)")
    views = 0
    for where, x in torch_layouts(torch, 3000, seed=404):
        assert tuple(_symbolic.canonical_strides(x.shape, x.stride())) == _core.canonical_strides(x), where
        if x.dim() and x.shape[-1] == 2:
            want = _core.complex_view_strides(x)
            got = _symbolic.complex_view_strides(x.shape, x.stride())
            if isinstance(want, str):
                # the twin leaves the alignment (torch's even storage offset) to torch.view_as_complex
                assert isinstance(got, str) or x.storage_offset() % 2, (where, want, got)
            else:
                assert tuple(got) == want, (where, want, got)
                views += 1
    assert views > 100
