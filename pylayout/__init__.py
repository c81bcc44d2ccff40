"""pylayout: tensor layouts over DLPack.

Inspect and convert the memory layout of torch tensors, NumPy arrays and any
other DLPack producer, zero-copy wherever memory allows.  Results come back
as the same kind of object that went in.

>>> import numpy as np, pylayout as pl
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> pl.is_contiguous(a.T), pl.is_contiguous(a.T, "fortran")
(False, True)
>>> t = pl.from_dlpack(a)          # zero-copy view
>>> t.shape, t.strides, t.dtype
((2, 3), (3, 1), 'float32')
"""
from __future__ import annotations

import sys as _sys

from . import _core
from ._core import (
    DLPACK_VERSION,
    Tensor,
    __version__,
    empty,
    from_dlpack,
    get_num_threads,
    is_contiguous,
    is_dense,
    set_num_threads,
    suggest_format,
)

__all__ = [
    "DLPACK_VERSION",
    "Tensor",
    "__version__",
    "contiguous",
    "copy_into",
    "empty",
    "from_dlpack",
    "get_num_threads",
    "info",
    "is_contiguous",
    "is_dense",
    "set_num_threads",
    "suggest_format",
    "to_order",
]

FORMATS = ("contiguous", "channels_last", "channels_last_3d", "fortran")


def _like(x, result):
    """Return `result` (a pylayout.Tensor) as the same kind of object as `x`."""
    if result is x or type(result) is not Tensor or type(x) is Tensor:
        return result
    np = _sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        return np.from_dlpack(result)
    torch = _sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch.from_dlpack(result)
    return result


def contiguous(x, format="contiguous"):
    """Return `x` dense in `format`, copying only if it is not already.

    `format` is "contiguous", "channels_last" (4-D), "channels_last_3d"
    (5-D), "fortran", or one of torch's memory_format objects.  When `x`
    already satisfies the format, `x` itself comes back (no copy).  Otherwise
    a cache-blocked, parallel copy fills a new tensor of the same kind as `x`.

    >>> import numpy as np, pylayout as pl
    >>> a = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)
    >>> c = pl.contiguous(a)
    >>> type(c).__name__, c.flags.c_contiguous, bool((c == a).all())
    ('ndarray', True, True)
    >>> pl.contiguous(c) is c
    True
    """
    return _like(x, _core.contiguous(x, format))


def to_order(x, order):
    """Return `x` dense with its dims laid out in `order`, outermost first.

    `order` is a permutation of range(x.ndim); (0, 1, ..., n-1) is row-major
    and (n-1, ..., 0) is Fortran order.  Returns `x` itself when it already
    is laid out that way.

    >>> import numpy as np, pylayout as pl
    >>> a = np.zeros((2, 3, 4), dtype=np.int16)
    >>> pl.to_order(a, (2, 0, 1)).strides     # dim 2 outermost, dim 1 innermost
    (6, 2, 12)
    """
    return _like(x, _core.to_order(x, order))


def copy_into(dst, src):
    """Copy every element of `src` into `dst` (any strides) and return `dst`.

    Shapes and element sizes must match; `src` may broadcast (stride 0).
    Raises ValueError, without writing anything, if `dst` is read-only,
    overlaps itself or `src`, or does not match.

    >>> import numpy as np, pylayout as pl
    >>> out = np.zeros((3, 2), dtype=np.float64)
    >>> _ = pl.copy_into(out.T, np.ones((2, 3)))
    >>> float(out.sum())
    6.0
    """
    return _core.copy_into(dst, src)


def info() -> dict:
    """Versions and build facts: DLPack version, OpenMP, SIMD path, threads, peers."""
    d = dict(_core.build_info())
    for name in ("numpy", "torch"):
        try:
            mod = __import__(name)
            d[name] = mod.__version__
        except ImportError:
            d[name] = None
    return d
