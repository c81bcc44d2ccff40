"""pylayout.torch: layout conversions that keep torch's autograd graph.

Import this module only where torch is installed.  Every function here takes
and returns torch tensors, works on tensors that require grad, and traces
under ``torch.compile(fullgraph=True)``:

- copying conversions (``contiguous``, ``to_order``, ``pack_complex``,
  ``unpack_complex`` with copies, and the packing path of
  ``view_as_complex``) are ``torch.library.custom_op``s, with
  ``register_autograd`` and ``register_fake``; their kernels are pylayout's
  parallel C copies;
- zero-copy results (``view_as_complex`` where memory allows,
  ``view_as_real``, ``canonicalize``, ``unpack_complex(copy=False)``) are
  built from torch's own view ops, because a custom op's outputs must not
  alias its inputs.

>>> import torch, pylayout.torch as plt
>>> x = torch.randn(2, 3, 4, 5, requires_grad=True)
>>> y = plt.contiguous(x, torch.channels_last)
>>> y.is_contiguous(memory_format=torch.channels_last), y.requires_grad
(True, True)
>>> y.sum().backward(); bool((x.grad == 1).all())
True
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch.library import custom_op

from . import _core

__all__ = [
    "canonicalize",
    "contiguous",
    "pack_complex",
    "to_order",
    "unpack_complex",
    "view_as_complex",
    "view_as_real",
]

_FORMAT_NAMES = {
    "contiguous": "contiguous", "C": "contiguous", "torch.contiguous_format": "contiguous",
    "channels_last": "channels_last", "torch.channels_last": "channels_last",
    "channels_last_3d": "channels_last_3d", "torch.channels_last_3d": "channels_last_3d",
    "fortran": "fortran", "F": "fortran",
}
_MEMORY_FORMATS = {
    "contiguous": torch.contiguous_format,
    "channels_last": torch.channels_last,
    "channels_last_3d": torch.channels_last_3d,
}


def format_name(fmt) -> str:
    """'contiguous', 'channels_last', 'channels_last_3d' or 'fortran' for a name or torch.memory_format."""
    name = _FORMAT_NAMES.get(fmt if isinstance(fmt, str) else str(fmt))
    if name is None:
        raise ValueError(f"unknown memory format {fmt!r}; use 'contiguous', 'channels_last', "
                         "'channels_last_3d', 'fortran' or a torch.memory_format")
    return name


def _dims_order(ndim: int, fmt: str) -> list[int]:
    """Dim order, outermost first, of a dense tensor in `fmt`."""
    if fmt == "contiguous":
        return list(range(ndim))
    if fmt == "fortran":
        return list(range(ndim - 1, -1, -1))
    rank = 4 if fmt == "channels_last" else 5
    if ndim != rank:
        raise ValueError(f"{fmt} needs a {rank}-D tensor, got {ndim}-D")
    return [0] + list(range(2, ndim)) + [1]


def _order_strides(shape: Sequence[int], order: Sequence[int]) -> list[int]:
    """pylayout_order_strides: size-0 dims count as 1, as torch's contiguous strides do."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def _format_strides(shape: Sequence[int], fmt: str) -> list[int]:
    """pylayout_format_strides, which matches torch.empty(..., memory_format=)."""
    if fmt in ("channels_last", "channels_last_3d"):
        _dims_order(len(shape), fmt)  # rank check
        order = [1] + list(range(len(shape) - 1, 1, -1)) + [0]  # innermost first
        strides = [0] * len(shape)
        step = 1
        for d in order:  # c10: plain products, so a size-0 dim zeroes the outer strides
            strides[d] = step
            step *= shape[d]
        return strides
    return _order_strides(shape, _dims_order(len(shape), fmt))


def _has_layout(x: torch.Tensor, strides: Sequence[int]) -> bool:
    """Dense with these strides, size-1 dims aside (torch's rule)."""
    if x.numel() == 0:
        return True
    return all(n == 1 or s == t for n, s, t in zip(x.shape, x.stride(), strides))


def _is_in_format(x: torch.Tensor, fmt: str) -> bool:
    if fmt in _MEMORY_FORMATS:
        if fmt != "contiguous" and x.dim() != (4 if fmt == "channels_last" else 5):
            return False
        return x.is_contiguous(memory_format=_MEMORY_FORMATS[fmt])
    return _has_layout(x, _order_strides(x.shape, _dims_order(x.dim(), fmt)))


def _plain(x: torch.Tensor) -> torch.Tensor:
    """The tensor pylayout's C core may read: conj/neg bits resolved, no grad."""
    return x.detach().resolve_conj().resolve_neg()


# --------------------------------------------------------------- copies


@custom_op("pylayout::to_order", mutates_args=())
def _to_order_op(x: torch.Tensor, order: list[int]) -> torch.Tensor:
    out = _core.to_order(_plain(x), order)
    if out is x or (isinstance(out, torch.Tensor) and out.data_ptr() == x.data_ptr() and x.numel()):
        out = torch.empty_strided(x.shape, _order_strides(x.shape, order), dtype=x.dtype, device=x.device)
        out.copy_(x)  # a custom op's output must not alias its input
    return out


@_to_order_op.register_fake
def _(x, order):
    return torch.empty_strided(x.shape, _order_strides(x.shape, order), dtype=x.dtype, device=x.device)


def _identity_backward(ctx, grad):
    return grad, None


_to_order_op.register_autograd(_identity_backward)


@custom_op("pylayout::to_format", mutates_args=())
def _to_format_op(x: torch.Tensor, fmt: str) -> torch.Tensor:
    out = _core.contiguous(_plain(x), fmt)
    if out is x or (out.data_ptr() == x.data_ptr() and x.numel()):
        out = torch.empty_strided(x.shape, _format_strides(x.shape, fmt), dtype=x.dtype, device=x.device)
        out.copy_(x)
    return out


@_to_format_op.register_fake
def _(x, fmt):
    return torch.empty_strided(x.shape, _format_strides(x.shape, fmt), dtype=x.dtype, device=x.device)


_to_format_op.register_autograd(_identity_backward)


def contiguous(x: torch.Tensor, format: str | torch.memory_format = "contiguous") -> torch.Tensor:
    """`x` dense in `format` ("contiguous", "channels_last", "channels_last_3d",
    "fortran" or a torch.memory_format), differentiably; `x` itself when it
    already is (as torch's .contiguous() does)."""
    fmt = format_name(format)
    if _is_in_format(x, fmt):
        _dims_order(x.dim(), fmt)  # still refuse channels_last on a 3-D tensor
        return x
    return _to_format_op(x, fmt)


def to_order(x: torch.Tensor, order: Sequence[int]) -> torch.Tensor:
    """`x` dense with its dims laid out in `order` (outermost first), differentiably."""
    order = [int(d) for d in order]
    if sorted(order) != list(range(x.dim())):
        raise ValueError(f"order must be a permutation of 0..{x.dim() - 1}, got {order}")
    if _has_layout(x, _order_strides(x.shape, order)):
        return x
    return _to_order_op(x, order)


# --------------------------------------------------------------- complex

_COMPLEX_OF = {torch.float16: torch.complex32, torch.float32: torch.complex64, torch.float64: torch.complex128}
_REAL_OF = {c: r for r, c in _COMPLEX_OF.items()}


@custom_op("pylayout::pack_complex", mutates_args=())
def _pack_complex_op(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    return _core.pack_complex(_plain(re), _plain(im))


@_pack_complex_op.register_fake
def _(re, im):
    return torch.empty(re.shape, dtype=_COMPLEX_OF[re.dtype], device=re.device)


def _pack_backward(ctx, grad):
    return grad.real, grad.imag


_pack_complex_op.register_autograd(_pack_backward)


@custom_op("pylayout::unpack_complex", mutates_args=())
def _unpack_complex_op(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    re, im = _core.unpack_complex(_plain(z))
    return re, im


@_unpack_complex_op.register_fake
def _(z):
    dt = _REAL_OF[z.dtype]
    return torch.empty(z.shape, dtype=dt, device=z.device), torch.empty(z.shape, dtype=dt, device=z.device)


def _unpack_setup(ctx, inputs, output):
    ctx.shape, ctx.dtype = inputs[0].shape, inputs[0].dtype


def _unpack_backward(ctx, grad_re, grad_im):
    dt = _REAL_OF[ctx.dtype]
    if grad_re is None:
        grad_re = torch.zeros(ctx.shape, dtype=dt)
    if grad_im is None:
        grad_im = torch.zeros(ctx.shape, dtype=dt)
    return torch.complex(grad_re, grad_im)


_unpack_complex_op.register_autograd(_unpack_backward, setup_context=_unpack_setup)


def pack_complex(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """re + 1j*im as a new contiguous complex tensor, differentiably."""
    if re.dtype not in _COMPLEX_OF or im.dtype != re.dtype:
        raise TypeError(f"pack_complex needs two float16, float32 or float64 tensors of one dtype, "
                        f"got {re.dtype} and {im.dtype}")
    if re.shape != im.shape:
        raise ValueError(f"re and im must have the same shape, got {tuple(re.shape)} and {tuple(im.shape)}")
    return _pack_complex_op(re, im)


def unpack_complex(z: torch.Tensor, *, copy: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(real, imag) of `z`: new contiguous tensors, or zero-copy views with copy=False."""
    if z.dtype not in _REAL_OF:
        raise TypeError(f"unpack_complex needs a complex32, complex64 or complex128 tensor, got {z.dtype}")
    if not copy:
        r = torch.view_as_real(z.resolve_conj())
        return r[..., 0], r[..., 1]
    return _unpack_complex_op(z)


def _complex_view_strides(x: torch.Tensor):
    """Strides that make `x` acceptable to torch.view_as_complex without moving
    memory, or (dim, reason) when memory forbids a view."""
    n = x.dim()
    if x.dtype not in _COMPLEX_OF:
        raise TypeError(f"view_as_complex needs float16, float32 or float64, got {x.dtype}")
    if n == 0 or x.shape[-1] != 2:
        raise ValueError("view_as_complex needs a last dim of size 2 holding (real, imag)")
    strides = list(x.stride())
    if x.numel() == 0:
        # torch refuses odd strides even here; any even stride covers the same (no) memory
        return [s - s % 2 for s in strides[:-1]] + [1]
    if strides[-1] != 1:
        return n - 1, f"dim {n - 1} (real, imag) has stride {strides[-1]}; the parts must be adjacent"
    for d in range(n - 1):
        if x.shape[d] > 1 and strides[d] % 2:
            return d, f"dim {d} (size {x.shape[d]}) has odd stride {strides[d]}"
        if x.shape[d] == 1 and strides[d] % 2:
            strides[d] -= 1  # torch divides by 2 anyway; keep its result
    # Dynamo cannot trace storage_offset(); compiled code leaves the parity
    # check to torch.view_as_complex itself, which raises rather than misreads.
    if not torch.compiler.is_compiling() and x.storage_offset() % 2:
        return -1, f"storage offset {x.storage_offset()} is odd"
    return strides


def view_as_complex(x: torch.Tensor, *, copy: bool | None = None) -> torch.Tensor:
    """Complex view of `x` (..., 2) whenever memory allows, differentiably.

    copy=None packs a copy when no view exists, copy=False raises ValueError
    naming the dim, copy=True always copies (see pylayout.view_as_complex)."""
    if copy:
        return torch.view_as_complex(_to_format_op(x, "contiguous"))  # the op always copies
    strides = _complex_view_strides(x)
    if isinstance(strides, tuple):
        if copy is False:
            raise ValueError(f"no complex view exists: {strides[1]}; pass copy=None to pack a copy")
        # a fresh contiguous copy: contiguous(x) would return x itself when
        # only its (odd) storage offset forbids the view
        return torch.view_as_complex(_to_format_op(x, "contiguous"))
    if strides != list(x.stride()):
        x = x.as_strided(x.shape, strides)  # keeps x's storage offset
    return torch.view_as_complex(x)


def view_as_real(z: torch.Tensor) -> torch.Tensor:
    """Real view of complex `z` with a trailing (real, imag) dim, differentiably."""
    return torch.view_as_real(z.resolve_conj())


def canonicalize(x: torch.Tensor) -> torch.Tensor:
    """Zero-copy view of `x` with canonical strides on size-1 dims (see pylayout.canonicalize)."""
    strides = list(x.stride())
    extent = 1  # pylayout_canonical_strides: a size-1 dim takes the extent of the dims inside it
    for d in range(x.dim() - 1, -1, -1):
        if x.shape[d] == 1:
            strides[d] = extent
        extent = max(extent, abs(strides[d]) * x.shape[d])
    if strides == list(x.stride()):
        return x
    return x.as_strided(x.shape, strides)  # keeps x's storage offset
