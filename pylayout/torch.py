"""pylayout.torch: layout conversions that keep torch's autograd graph.

Import this module only where torch is installed.  Every function here takes
and returns torch tensors, works on tensors that require grad, and traces
under ``torch.compile(fullgraph=True)``:

- copying conversions (``contiguous``, ``to_order``, ``pack_complex``,
  ``unpack_complex`` with copies, and the packing path of
  ``view_as_complex``) are ``torch.library.custom_op``s, with
  ``register_autograd`` and ``register_fake``; their kernels are pylayout's
  parallel C copies; ``copy_into`` is one too while torch.compile traces
  (it mutates dst, and is not differentiable);
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

from typing import TYPE_CHECKING, Sequence

import torch
from torch.library import custom_op

from . import _core, _symbolic

if TYPE_CHECKING:
    from ._typing import DTypeLike

__all__ = [
    "canonicalize",
    "contiguous",
    "copy_into",
    "empty",
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
    """'contiguous', 'channels_last', 'channels_last_3d', 'fortran' (or
    'preserve' for torch.preserve_format) for a name or torch.memory_format."""
    if fmt is torch.preserve_format:
        return "preserve"
    name = _FORMAT_NAMES.get(fmt if isinstance(fmt, str) else str(fmt))
    if name is None:
        raise ValueError(f"unknown memory format {fmt!r}; use 'contiguous', 'channels_last', "
                         "'channels_last_3d', 'fortran' or a torch.memory_format")
    return name


def _concrete(shape) -> bool:
    """Eager code with plain ints (a meta tensor's too): the C core answers.
    While torch.compile traces (Dynamo cannot call into C, and sizes may be
    symbolic): pylayout._symbolic, its tested twin."""
    return not torch.compiler.is_compiling() and all(type(s) is int for s in shape)


def _dims_order(ndim: int, fmt: str) -> list[int]:
    return _symbolic.dims_order(ndim, fmt)


def _order_strides(shape: Sequence[int], order: Sequence[int]) -> Sequence[int]:
    return _core.order_strides(shape, order) if _concrete(shape) else _symbolic.order_strides(shape, order)


def _format_strides(shape: Sequence[int], fmt: str) -> Sequence[int]:
    return _core.format_strides(shape, fmt) if _concrete(shape) else _symbolic.format_strides(shape, fmt)


def _has_layout(x: torch.Tensor, strides: Sequence[int]) -> bool:
    """Dense with these strides, size-1 dims aside (torch's rule)."""
    if x.numel() == 0:
        return True
    return all(n == 1 or s == t for n, s, t in zip(x.shape, x.stride(), strides))


def _is_in_format(x: torch.Tensor, fmt: str) -> bool:
    if not torch.compiler.is_compiling():  # pylayout's C rules, on any device
        return _core.is_contiguous(x, fmt)
    if fmt in _MEMORY_FORMATS:  # symbolic shapes: torch's rules (the same, tested against each other)
        if fmt != "contiguous" and x.dim() != (4 if fmt == "channels_last" else 5):
            return False
        return x.is_contiguous(memory_format=_MEMORY_FORMATS[fmt])
    return _has_layout(x, _order_strides(x.shape, _dims_order(x.dim(), fmt)))


def _on_device(x: torch.Tensor, strides) -> torch.Tensor:
    """Off the CPU (CUDA, meta, ...) pylayout decides the layout with its C
    rules and torch moves the bytes on x's device: a new tensor with exactly
    the strides the CPU path gives."""
    return torch.empty_strided(x.shape, strides, dtype=x.dtype, device=x.device).copy_(x)


_core._set_device_copy(_on_device)   # pylayout.contiguous's fast path off the CPU


def _plain(x: torch.Tensor) -> torch.Tensor:
    """The tensor pylayout's C core may read: conj/neg bits resolved, no grad."""
    return x.detach().resolve_conj().resolve_neg()


# --------------------------------------------------------------- copies


def _not_aliasing(x: torch.Tensor, plain: torch.Tensor, out: torch.Tensor, strides) -> torch.Tensor:
    """`out`, or a fresh copy when the core returned its input itself (x was
    already in layout): a custom op's output must not alias its input."""
    if out is plain:
        out = torch.empty_strided(x.shape, strides, dtype=x.dtype, device=x.device)
        out.copy_(plain)
    return out


def _converted(x: torch.Tensor, strides, convert) -> torch.Tensor:
    """x laid out with `strides` (pylayout's C answer for the conversion):
    off the CPU torch moves the bytes on x's device; on the CPU the core
    converts (convert(plain)), and the result never aliases x."""
    if not x.is_cpu:
        return _on_device(x, strides)
    plain = _plain(x)
    return _not_aliasing(x, plain, convert(plain), strides)


def _to_order(x: torch.Tensor, order: list[int]) -> torch.Tensor:
    return _converted(x, _core.order_strides(x.shape, order), lambda plain: _core.to_order(plain, order))


def _to_format(x: torch.Tensor, fmt: str) -> torch.Tensor:
    return _converted(x, _core.format_strides(x.shape, fmt), lambda plain: _core.to_format(plain, fmt))


def _eager(*xs: torch.Tensor) -> bool:
    """Whether an operation on `xs` may run its kernel right here, with no
    autograd.Function and custom op in between (_core.torch_eager's rule;
    asked uncompiled only)."""
    return all(_core.torch_eager(x) for x in xs)


@custom_op("pylayout::to_order", mutates_args=())
def _to_order_op(x: torch.Tensor, order: list[int]) -> torch.Tensor:
    return _to_order(x, order)


@_to_order_op.register_fake
def _(x, order):
    return torch.empty_strided(x.shape, _order_strides(x.shape, order), dtype=x.dtype, device=x.device)


def _identity_backward(ctx, grad):
    return grad, None


_to_order_op.register_autograd(_identity_backward)


@custom_op("pylayout::to_format", mutates_args=())
def _to_format_op(x: torch.Tensor, fmt: str) -> torch.Tensor:
    return _to_format(x, fmt)


@_to_format_op.register_fake
def _(x, fmt):
    return torch.empty_strided(x.shape, _format_strides(x.shape, fmt), dtype=x.dtype, device=x.device)


_to_format_op.register_autograd(_identity_backward)


class _Conversion(torch.autograd.Function):
    """A layout conversion (the custom ops above) for both modes of autograd:
    the values do not change, so backward passes the gradient through and
    forward mode (torch.func.jvp, dual tensors) converts the tangent the
    same way."""

    @staticmethod
    def forward(x, kind, arg):
        return _to_format_op(x, arg) if kind == "format" else _to_order_op(x, arg)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.kind, ctx.arg = inputs[1], inputs[2]

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None

    @staticmethod
    def jvp(ctx, x_t, kind_t, arg_t):
        return _Conversion.forward(x_t, ctx.kind, ctx.arg)


def _convert(x: torch.Tensor, kind: str, arg) -> torch.Tensor:
    # Dynamo cannot trace an autograd.Function with a jvp: compiled code
    # calls the custom op, whose registered autograd covers backward.
    if torch.compiler.is_compiling():
        return _Conversion.forward(x, kind, arg)
    if _eager(x):
        return _to_format(x, arg) if kind == "format" else _to_order(x, arg)
    return _Conversion.apply(x, kind, arg)


def _no_copy_allowed(copy, what: str) -> None:
    if copy is False:
        raise ValueError(f"copy=False, but the tensor is not {what}: converting it needs a copy")


def contiguous(x: torch.Tensor, format: str | torch.memory_format = "contiguous", *,
               copy: bool | None = None) -> torch.Tensor:
    """`x` dense in `format` ("contiguous", "channels_last", "channels_last_3d",
    "fortran", a torch.memory_format, or torch.preserve_format: dense stays as
    it is, else suggest_format), differentiably; `x` itself when it already
    is (as torch's .contiguous() does) unless copy=True; copy=False raises
    ValueError when a copy is needed."""
    fmt = format_name(format)
    if fmt == "preserve":  # torch's own meaning, so torch's own op
        if _core.is_dense(x) and not copy:
            return x
        if not _core.is_dense(x):
            _no_copy_allowed(copy, "dense")
        return x.clone(memory_format=torch.preserve_format)
    if _is_in_format(x, fmt):
        _dims_order(x.dim(), fmt)  # still refuse channels_last on a 3-D tensor
        if not copy:
            return x
    else:
        _no_copy_allowed(copy, fmt)
    return _convert(x, "format", fmt)


def empty(shape: Sequence[int], dtype: DTypeLike = torch.float32, *, format: str | torch.memory_format | None = None,
          order: Sequence[int] | None = None, device: torch.device | str | int | None = None) -> torch.Tensor:
    """A new uninitialised torch tensor on `device` (torch's default when
    None), dense in `format` or in the dim `order` (outermost first): the
    strides pylayout.empty gives on the CPU, by the same C rules, on any
    device.  dtype as for pylayout.empty.  User story 4's output, which a
    generated kernel writes in NHWC order, made so on the GPU.

    >>> import torch, pylayout.torch as plt
    >>> y = plt.empty((8, 16, 30, 30), format=torch.channels_last, device="meta")
    >>> y.is_contiguous(memory_format=torch.channels_last), y.stride(), y.dtype
    (True, (14400, 1, 480, 16), torch.float32)
    """
    if format is not None and order is not None:
        raise ValueError("give format or order, not both")
    shape = tuple(shape)
    name = _core.empty((0,), dtype).dtype  # pylayout's dtype rules; its names are torch's
    strides = (_core.order_strides(shape, order) if order is not None
               else _core.format_strides(shape, "contiguous" if format is None else format))
    return torch.empty_strided(shape, strides, dtype=getattr(torch, name), device=device)


def to_order(x: torch.Tensor, order: Sequence[int], *, copy: bool | None = None) -> torch.Tensor:
    """`x` dense with its dims laid out in `order` (outermost first), differentiably
    (copy as for contiguous())."""
    order = [int(d) for d in order]
    if sorted(order) != list(range(x.dim())):
        raise ValueError(f"order must be a permutation of 0..{x.dim() - 1}, got {order}")
    if _has_layout(x, _order_strides(x.shape, order)):
        if not copy:
            return x
    else:
        _no_copy_allowed(copy, "dense in that order")
    return _convert(x, "order", order)


# --------------------------------------------------------------- complex

_COMPLEX_OF = {torch.float16: torch.complex32, torch.float32: torch.complex64, torch.float64: torch.complex128}
_REAL_OF = {c: r for r, c in _COMPLEX_OF.items()}


def _pack(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    if not re.is_cpu:
        return _pack_on_device(re, im, torch.empty(re.shape, dtype=_COMPLEX_OF[re.dtype], device=re.device))
    return _core.pack_complex(_plain(re), _plain(im))


@custom_op("pylayout::pack_complex", mutates_args=())
def _pack_complex_op(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    return _pack(re, im)


def _pack_on_device(re: torch.Tensor, im: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """pack_complex off the CPU: one torch kernel writes both halves of out
    (a copy into each half, as before, took 3.1x torch.complex's GPU time:
    each pass writes every cache line of out).  On meta, where no bytes
    move, the two copies: torch.complex's meta kernel is Python
    (torch._refs), 100 us a call against 4.  Not for an out with torch's
    conjugate or negative bit, which view_as_real refuses and torch.complex
    honours, as it does on every other device."""
    if out.is_meta and not (out.is_conj() or out.is_neg()):
        parts = torch.view_as_real(out)
        parts[..., 0].copy_(re)
        parts[..., 1].copy_(im)
        return out
    return torch.complex(re, im, out=out)


@_pack_complex_op.register_fake
def _(re, im):
    return torch.empty(re.shape, dtype=_COMPLEX_OF[re.dtype], device=re.device)


def _pack_backward(ctx, grad):
    return grad.real, grad.imag


_pack_complex_op.register_autograd(_pack_backward)


def _unpack(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not z.is_cpu:
        dt = _REAL_OF[z.dtype]
        parts = torch.view_as_real(z.resolve_conj())
        return (torch.empty(z.shape, dtype=dt, device=z.device).copy_(parts[..., 0]),
                torch.empty(z.shape, dtype=dt, device=z.device).copy_(parts[..., 1]))
    re, im = _core.unpack_complex(_plain(z))
    return re, im


@custom_op("pylayout::unpack_complex", mutates_args=())
def _unpack_complex_op(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _unpack(z)


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


class _Pack(torch.autograd.Function):
    """pack_complex for both modes of autograd: it is linear, so the tangent
    of re + 1j*im is re_t + 1j*im_t."""

    @staticmethod
    def forward(re, im):
        return _pack_complex_op(re, im)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.like = inputs[0]

    @staticmethod
    def backward(ctx, grad):
        return _pack_backward(ctx, grad)

    @staticmethod
    def jvp(ctx, re_t, im_t):
        zero = None
        if re_t is None or im_t is None:
            zero = torch.zeros(ctx.like.shape, dtype=ctx.like.dtype, device=ctx.like.device)
        return _pack_complex_op(zero if re_t is None else re_t, zero if im_t is None else im_t)


class _Unpack(torch.autograd.Function):
    """unpack_complex (copies) for both modes of autograd."""

    @staticmethod
    def forward(z):
        return _unpack_complex_op(z)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _unpack_setup(ctx, inputs, output)

    @staticmethod
    def backward(ctx, grad_re, grad_im):
        return _unpack_backward(ctx, grad_re, grad_im)

    @staticmethod
    def jvp(ctx, z_t):
        return _unpack_complex_op(z_t)


def pack_complex(re: torch.Tensor, im: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """re + 1j*im as a new contiguous complex tensor, differentiably; or
    written into `out` (any strides, no autograd), on any device."""
    if re.dtype not in _COMPLEX_OF or im.dtype != re.dtype:
        raise TypeError(f"pack_complex needs two float16, float32 or float64 tensors of one dtype, "
                        f"got {re.dtype} and {im.dtype}")
    if re.shape != im.shape:
        raise ValueError(f"re and im must have the same shape, got {tuple(re.shape)} and {tuple(im.shape)}")
    if out is not None:
        if not torch.compiler.is_compiling() and any(_core.torch_route(t, False) for t in (re, im, out)):
            raise BufferError("pack_complex(re, im, out=out) writes into out, which autograd cannot follow "
                              "(a tensor requires grad, carries a forward-mode tangent or is a functorch "
                              "wrapper): call pack_complex(re, im) for a result that keeps the graph")
        if out.is_cpu:
            return _core.pack_complex(re, im, out=out)
        if out.dtype != _COMPLEX_OF[re.dtype]:
            raise TypeError(f"re must be {re.dtype} to pair with out's {out.dtype}".replace("torch.", ""))
        if out.shape != re.shape:
            raise ValueError(f"out has shape {tuple(out.shape)} but re has {tuple(re.shape)}")
        _same_device("pack_complex", re, im, out)
        return _pack_on_device(re, im, out)
    _same_device("pack_complex", re, im)
    if torch.compiler.is_compiling():  # see _convert
        return _pack_complex_op(re, im)
    return _pack(re, im) if _eager(re, im) else _Pack.apply(re, im)


def _same_device(what: str, *xs: torch.Tensor) -> None:
    devices = {x.device for x in xs}
    if len(devices) > 1:
        raise BufferError(f"{what} needs all its tensors on one device, got {sorted(map(str, devices))}; "
                          "pylayout does not move data between devices")


def _check_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """What the C copy checks, for the copies torch makes (off the CPU, and
    the fake tensors torch.compile traces)."""
    _same_device("copy_into", dst, src)
    if dst.dtype != src.dtype:
        raise TypeError(f"src is {src.dtype} but dst is {dst.dtype}: a layout copy never reinterprets "
                        "values; convert the dtype first".replace("torch.", ""))
    if dst.shape != src.shape:
        raise ValueError(f"src has shape {tuple(src.shape)} but dst has {tuple(dst.shape)}: both must have "
                         "the same shape")


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """pylayout's C copy on the CPU, torch's copy_ elsewhere (which bumps
    dst's version counter too)."""
    if dst.is_cpu and src.is_cpu:
        _core.copy_core(dst, src)
    else:
        _check_copy(dst, src)
        dst.copy_(src)


@custom_op("pylayout::copy_into", mutates_args=("dst",))
def _copy_into_op(dst: torch.Tensor, src: torch.Tensor) -> None:
    _copy(dst, src)


@_copy_into_op.register_fake
def _(dst, src):
    _check_copy(dst, src)


def copy_into(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Copy src into dst (any strides, same shape and dtype) on any device and
    return dst.  Not differentiable.  Under torch.compile, the custom op
    pylayout::copy_into, which mutates dst; uncompiled, the copy itself (no
    dispatcher in between)."""
    if torch.compiler.is_compiling():
        _copy_into_op(dst, src)
    else:
        _copy(dst, src)
    return dst


def unpack_complex(z: torch.Tensor, *, copy: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(real, imag) of `z`: new contiguous tensors, or zero-copy views with copy=False."""
    if z.dtype not in _REAL_OF:
        raise TypeError(f"unpack_complex needs a complex32, complex64 or complex128 tensor, got {z.dtype}")
    if not copy:
        r = torch.view_as_real(z.resolve_conj())
        return r[..., 0], r[..., 1]
    if torch.compiler.is_compiling():  # see _convert
        return _unpack_complex_op(z)
    return _unpack(z) if _eager(z) else _Unpack.apply(z)


def _complex_view_strides(x: torch.Tensor):
    """Real strides that make `x` acceptable to torch.view_as_complex without
    moving memory (pylayout's rule), or a str saying why memory forbids a view."""
    if x.dtype not in _COMPLEX_OF:
        raise TypeError(f"view_as_complex needs float16, float32 or float64, got {x.dtype}")
    if x.dim() == 0 or x.shape[-1] != 2:
        raise ValueError(f"view_as_complex needs a last dim of size 2 holding (real, imag); got shape {tuple(x.shape)}")
    if not _concrete(x.shape):
        # Dynamo cannot trace storage_offset(): the parity check is then
        # torch.view_as_complex's own, which raises rather than misreads.
        return _symbolic.complex_view_strides(x.shape, x.stride())
    strides = _core.complex_view_strides(x)
    if not isinstance(strides, str) and x.numel() and x.storage_offset() % 2:
        return f"storage offset {x.storage_offset()} is odd"  # torch's own requirement
    return list(strides) if not isinstance(strides, str) else strides


def view_as_complex(x: torch.Tensor, *, copy: bool | None = None) -> torch.Tensor:
    """Complex view of `x` (..., 2) whenever memory allows, differentiably.

    copy=None packs a copy when no view exists, copy=False raises ValueError
    naming the dim, copy=True always copies (see pylayout.view_as_complex)."""
    strides = _complex_view_strides(x)  # checks dtype and shape first, whatever `copy` says
    if copy:
        return torch.view_as_complex(_convert(x, "format", "contiguous"))  # the op always copies
    if isinstance(strides, str):
        if copy is False:
            advice = "" if "copy=None" in strides else "; pass copy=None to pack a copy"
            raise ValueError(f"no complex view exists: {strides}{advice}")
        # a fresh contiguous copy: contiguous(x) would return x itself when
        # only its (odd) storage offset forbids the view
        return torch.view_as_complex(_convert(x, "format", "contiguous"))
    if x.numel() == 0 and not torch.compiler.is_compiling() and x.storage_offset() % 2:
        # No memory is covered, but torch wants an even offset: the same
        # storage, one real element earlier.
        return torch.view_as_complex(x.as_strided(x.shape, strides, x.storage_offset() - 1))
    if strides != list(x.stride()):
        x = x.as_strided(x.shape, strides)  # keeps x's storage offset
    return torch.view_as_complex(x)


def view_as_real(z: torch.Tensor) -> torch.Tensor:
    """Real view of complex `z` with a trailing (real, imag) dim, differentiably."""
    if z.dtype not in _REAL_OF:
        raise TypeError(f"view_as_real needs a complex32, complex64 or complex128 tensor, got {z.dtype}")
    return torch.view_as_real(z.resolve_conj())


def canonicalize(x: torch.Tensor) -> torch.Tensor:
    """Zero-copy view of `x` with canonical strides on size-1 dims (see pylayout.canonicalize)."""
    if _concrete(x.shape):
        strides = list(_core.canonical_strides(x))
    else:
        strides = _symbolic.canonical_strides(x.shape, x.stride())
    if strides == list(x.stride()):
        return x
    return x.as_strided(x.shape, strides)  # keeps x's storage offset
