"""pylayout's stride rules for torch.compile's symbolic shapes.

The C core answers every layout question, but it cannot see a SymInt: while
torch.compile traces (fake tensors, symbolic sizes), pylayout.torch computes
the few rules it needs here instead.  These are twins of C functions, kept in
this one module and checked against the C answers on generated shapes by
tests/python/test_symbolic.py.  Use them nowhere else: eager code calls the C
core (pylayout._core).
"""
from __future__ import annotations

from typing import Sequence

_RANK = {"channels_last": 4, "channels_last_3d": 5}


def dims_order(ndim: int, fmt: str) -> list[int]:
    """Dim order, outermost first, of a dense tensor in `fmt` (FORMAT_RANK check included)."""
    if fmt == "contiguous":
        return list(range(ndim))
    if fmt == "fortran":
        return list(range(ndim - 1, -1, -1))
    if ndim != _RANK[fmt]:
        raise ValueError(f"{fmt} needs a {_RANK[fmt]}-D tensor, got {ndim}-D")
    return [0] + list(range(2, ndim)) + [1]


def order_strides(shape: Sequence, order: Sequence[int]) -> list:
    """pylayout_order_strides: size-0 and size-1 dims count as 1."""
    strides: list = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step = step * max(shape[d], 1)
    return strides


def format_strides(shape: Sequence, fmt: str) -> list:
    """pylayout_format_strides (torch.empty(..., memory_format=)): for the
    channels_last formats, c10's plain products, so a size-0 dim zeroes the
    strides outside it."""
    if fmt in _RANK:
        dims_order(len(shape), fmt)  # rank check
        strides: list = [0] * len(shape)
        step = 1
        for d in [1] + list(range(len(shape) - 1, 1, -1)) + [0]:  # innermost first
            strides[d] = step
            step = step * shape[d]
        return strides
    return order_strides(shape, dims_order(len(shape), fmt))


def canonical_strides(shape: Sequence, strides: Sequence) -> list:
    """pylayout_canonical_strides: a size-1 dim takes the extent of the dims inside it."""
    out = list(strides)
    extent = 1
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] == 1:
            out[d] = extent
        extent = max(extent, abs(out[d]) * shape[d])
    return out


def complex_view_strides(shape: Sequence, strides: Sequence) -> list | str:
    """pylayout_view_as_complex's rule, as real strides for torch's view ops
    (twice the complex strides, then 1), or why no view exists.  The element
    alignment (torch's even storage offset) is torch.view_as_complex's own
    check while tracing."""
    n = len(shape)
    numel = 1
    for s in shape:
        numel = numel * s
    out = list(strides)
    if numel == 0:  # no memory: any even stride covers the same (none)
        return [2 * int(s / 2) for s in out[:-1]] + [1]
    if out[-1] != 1:
        return f"dim {n - 1} (real, imag) has stride {out[-1]}; a complex view needs the two parts adjacent"
    for d in range(n - 1):
        if shape[d] > 1 and out[d] % 2:
            return f"dim {d} (size {shape[d]}) has odd stride {out[d]}"
        out[d] = 2 * int(out[d] / 2)  # C division, as the core and torch halve
    return out
