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
import sys as _sys
from typing import TYPE_CHECKING as _TYPE_CHECKING, Any as _Any, overload as _overload

try:
    from . import _core
except ImportError as _error:  # the source tree, imported before a build: see _source_tree.py
    from ._source_tree import hand_over as _hand_over

    _core = _hand_over(__name__, __file__, _error)
from . import _compile
from ._explain import explain, layout
from ._guards import LayoutError, LayoutWarning, require, requires
from ._core import (
    DLPACK_VERSION,
    Tensor,
    __version__,
    cache_info,
    from_dlpack,
    get_num_threads,
    is_contiguous,
    is_dense,
    set_cache_limit,
    set_num_threads,
    suggest_format,
)

if _TYPE_CHECKING:  # annotations below are strings: numpy and torch are optional at run time
    from collections.abc import Sequence

    import numpy as np
    import torch

    from ._typing import DTypeLike, Format, SupportsDLPack, _DLPackT, _DTypeT, _ShapeT

    _NDArray = np.ndarray[tuple[int, ...], np.dtype[_Any]]

__all__ = [
    "DLPACK_VERSION",
    "LayoutError",
    "LayoutWarning",
    "Tensor",
    "__version__",
    "cache_info",
    "canonicalize",
    "contiguous",
    "copy_into",
    "empty",
    "explain",
    "from_dlpack",
    "get_num_threads",
    "info",
    "is_contiguous",
    "is_dense",
    "layout",
    "pack_complex",
    "require",
    "requires",
    "set_cache_limit",
    "set_num_threads",
    "suggest_format",
    "to_order",
    "unpack_complex",
    "view_as_complex",
    "view_as_real",
]

FORMATS = ("contiguous", "channels_last", "channels_last_3d", "fortran")


_torch_hooks: "tuple[_Any, ...] | None" = None
_modules = _sys.modules  # looked up on every conversion
# Types seen that are not torch tensors (NumPy's ndarray, pylayout.Tensor,
# other producers): their calls go to the one-call C paths with no torch
# test, which is a third of a 1 KB call.  Torch tensors never enter: whether
# torch.compile is tracing is asked in Python, where it can see the answer.
_plain: "dict[type, None]" = {}
_PLAIN_MAX = 64


def _not_torch(x) -> bool:
    """Whether x is not a torch tensor; remembers its type in _plain if so."""
    hooks = _torch_hooks
    if hooks is None and "torch" in _modules:
        hooks = _hooks()
    if hooks is not None and isinstance(x, hooks[0]):
        return False
    if len(_plain) < _PLAIN_MAX:
        _plain[type(x)] = None
    return True


def _hooks() -> "tuple[_Any, ...] | None":
    """(torch.Tensor, is_compiling, is_functorch_wrapped_tensor, forward_ad)
    once torch is imported, else None: looked up once, since every call of a
    conversion asks (these lookups cost more than the checks)."""
    global _torch_hooks
    if _torch_hooks is None:
        torch = _sys.modules.get("torch")
        if torch is None:
            return None
        import torch.autograd.forward_ad as fwad

        _torch_hooks = (torch.Tensor, torch.compiler.is_compiling, torch._C._functorch.is_functorch_wrapped_tensor,
                        fwad)
    return _torch_hooks


def _carries_tangent(hooks, x) -> bool:
    """A forward-mode tangent: a dual tensor, or a torch.func transform's wrapper."""
    _, _, is_wrapped, fwad = hooks
    return bool(is_wrapped(x)) or (fwad._current_level >= 0 and fwad.unpack_dual(x).tangent is not None)


def _autograd(*xs):
    """pylayout.torch when any of `xs` is a torch tensor that it handles, else
    None: one whose values must stay visible to autograd (it requires grad,
    carries a forward-mode tangent, is functional or a functorch wrapper), that lives off
    the CPU (CUDA, meta, ...), where pylayout decides the layout and torch
    moves the bytes (the rule is _core.torch_route's, in C), or any torch
    tensor while torch.compile traces, which must see this answer."""
    hooks = _torch_hooks or _hooks()
    if hooks is None:
        return None
    tensor, is_compiling = hooks[0], hooks[1]
    for x in xs:
        if isinstance(x, tensor) and (is_compiling() or _core.torch_route(x)):
            from . import torch as pltorch

            return pltorch
    return None


def _torch_views(x):
    """pylayout.torch for any torch tensor, else None.  A result that aliases
    a torch tensor's memory must be a torch view of it (made by torch's view
    ops on x, sharing its storage and version counter), never a tensor
    rebuilt over x's data pointer, which dangles once x.set_() or x.resize_()
    drops that memory."""
    hooks = _hooks()
    if hooks is None or not isinstance(x, hooks[0]):
        return None
    if _autograd(x) is None:  # pylayout.torch resolves these bits, copying: no view then
        if x.is_conj():
            raise BufferError("the tensor has torch's conjugate bit set, so its memory holds the unconjugated "
                              "values and no view shows the right ones; call x.resolve_conj() first")
        if x.is_neg():
            raise BufferError("the tensor has torch's negative bit set, so its memory holds the un-negated "
                              "values and no view shows the right ones; call x.resolve_neg() first")
    from . import torch as pltorch

    return pltorch


def _refuse_tangents(what, *xs):
    """A write into memory cannot carry a forward-mode tangent or a graph.
    Not asked while torch.compile traces (the functorch test is a builtin it
    cannot trace): there the write is pylayout.torch's, through a custom op
    that declares what it mutates and has no autograd formula."""
    hooks = _hooks()
    if hooks is None or hooks[1]():
        return
    for x in xs:
        if isinstance(x, hooks[0]) and _carries_tangent(hooks, x):
            raise TypeError(f"{what} writes memory directly, so it cannot carry a forward-mode tangent "
                            "(a torch.func transform or a dual tensor); use torch's own dst.copy_(src) there")


class _ViewOwner:
    """Keeps a NumPy view's memory alive through the array that owns it, so
    a view of a view of ... is one link from its memory (rule 2's NumPy twin:
    a loop of views neither grows nor recurses when freed)."""

    __slots__ = ("owner", "__array_interface__")

    def __init__(self, owner, interface):
        self.owner = owner
        self.__array_interface__ = interface


def _numpy_view(np, x, t):
    """An ndarray over the memory of the pylayout.Tensor view `t` of array
    `x`, holding x's memory owner rather than `t` (whose DLPack import holds
    x itself, and so every earlier view in a chain)."""
    base = x.base
    if isinstance(base, _ViewOwner):
        owner = base.owner
    elif isinstance(base, np.ndarray) or base is not None:
        owner = base
    else:
        owner = x
    interface = {
        "shape": t.shape,
        "typestr": np.dtype(t.dtype).str,
        "data": (t.data_ptr + t.byte_offset, t.readonly),
        "strides": tuple(s * t.itemsize for s in t.strides),
        "version": 3,
    }
    return np.asarray(_ViewOwner(owner, interface))


def _like(x, result, view=False):
    """Return `result` (a pylayout.Tensor) as the same kind of object as `x`.
    `view`: result aliases x's memory (only ever for non-torch x)."""
    if result is x or type(result) is not Tensor or type(x) is Tensor:
        return result
    np = _sys.modules.get("numpy")
    if np is not None and isinstance(x, np.ndarray):
        if result.dtype == "complex32":  # NumPy has no complex32: keep pylayout's view
            return result
        return _numpy_view(np, x, result) if view else np.from_dlpack(result)
    torch = _sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        assert not view, "torch views are made by pylayout.torch"
        return torch.from_dlpack(result)
    return result


if _TYPE_CHECKING:
    @_overload
    def contiguous(  # type: ignore[overload-overlap]  # a torch tensor is also a DLPack producer
        x: "torch.Tensor", format: "Format" = ..., *, memory_format: "Format | None" = ...,
        copy: "bool | None" = ...,
    ) -> "torch.Tensor": ...
    @_overload
    def contiguous(  # type: ignore[overload-overlap]
        x: "np.ndarray[_ShapeT, _DTypeT]", format: "Format" = ..., *, memory_format: "Format | None" = ...,
        copy: "bool | None" = ...,
    ) -> "np.ndarray[_ShapeT, _DTypeT]": ...
    @_overload
    def contiguous(
        x: "SupportsDLPack", format: "Format" = ..., *, memory_format: "Format | None" = ...,
        copy: "bool | None" = ...,
    ) -> "Tensor": ...
    def contiguous(
        x: "SupportsDLPack", format: "Format" = "contiguous", *, memory_format: "Format | None" = None,
        copy: "bool | None" = None,
    ) -> _Any: ...
else:
    # The C function: its common call is the C fast path with no Python
    # frame in front (the frame was most of a 1 KB array's conversion); the
    # rest of it is the Python half below.
    contiguous = _core.contiguous


def _contiguous(x, format="contiguous", *, memory_format=None, copy=None):
    """pylayout.contiguous in Python: the same function as the C one, whose
    fast path it repeats.  torch.compile traces it in the C function's place
    (see _compile.py), and the C function hands it calls with keywords."""
    if memory_format is None and copy is None:  # the common call, in one C call: see _core.convert_or_route
        # torch.compile traces the route below: it must not reach the C call
        hooks = _torch_hooks
        if type(x) in _plain or (hooks is not None and isinstance(x, hooks[0]) and not hooks[1]()) or _not_torch(x):
            result = _core.convert_or_route(x, format)
            if result is not NotImplemented:
                return result if type(result) is not Tensor or type(x) is Tensor else _like(x, result)
    return _contiguous_route(x, format, memory_format, copy)


def _contiguous_route(x, format, memory_format, copy):
    """contiguous past its fast path: torch's keyword, pylayout.torch's
    tensors, copy=, and whatever the fast path declined."""
    if memory_format is not None:
        if format != "contiguous":
            raise TypeError("give format or memory_format, not both")
        format = memory_format
    hooks = _torch_hooks  # once torch is in, only its tensors can route there: skip the call for others
    if hooks is None or isinstance(x, hooks[0]):
        route = _autograd(x)
        if route:
            return route.contiguous(x, format, copy=copy)
    # positional when copy is the default: no keyword dict to build and parse
    return _like(x, _core.to_format(x, format) if copy is None else _core.to_format(x, format, copy=copy))




@_overload
def empty(
    shape: "Sequence[int]", dtype: "DTypeLike" = ..., *, format: "Format | None" = ...,
    order: "Sequence[int] | None" = ..., device: None = ...,
) -> "Tensor": ...
@_overload
def empty(
    shape: "Sequence[int]", dtype: "DTypeLike" = ..., *, format: "Format | None" = ...,
    order: "Sequence[int] | None" = ..., device: "torch.device | str | int",
) -> "torch.Tensor": ...
def empty(shape: "Sequence[int]", dtype: "DTypeLike" = "float32", *, format: "Format | None" = None,
          order: "Sequence[int] | None" = None, device: "torch.device | str | int | None" = None) -> _Any:
    """A new uninitialised tensor, dense in `format` or in the dim `order`
    (outermost first).  dtype is a name, a torch or NumPy dtype, or a NumPy
    scalar type such as numpy.float32.  Without `device`, a CPU
    pylayout.Tensor; with one (a torch device or its name), a torch tensor
    there with the same strides (pylayout.torch.empty): an output laid out
    as a kernel expects, on the GPU too (user story 4).

    >>> import pylayout as pl
    >>> pl.empty((2, 3, 4, 5), 'float16', format='channels_last').strides
    (60, 1, 15, 3)
    >>> pl.empty((2, 3), order=(1, 0)).strides
    (1, 2)
    """
    if device is None:
        return _core.empty(shape, dtype, format=format, order=order)
    from . import torch as pltorch  # a device is torch's

    return pltorch.empty(shape, dtype, format=format, order=order, device=device)


@_overload
def to_order(  # type: ignore[overload-overlap]
    x: "torch.Tensor", order: "Sequence[int]", *, copy: "bool | None" = ...
) -> "torch.Tensor": ...
@_overload
def to_order(  # type: ignore[overload-overlap]
    x: "np.ndarray[_ShapeT, _DTypeT]", order: "Sequence[int]", *, copy: "bool | None" = ...
) -> "np.ndarray[_ShapeT, _DTypeT]": ...
@_overload
def to_order(x: "SupportsDLPack", order: "Sequence[int]", *, copy: "bool | None" = ...) -> "Tensor": ...
def to_order(x: "SupportsDLPack", order: "Sequence[int]", *, copy: "bool | None" = None) -> _Any:
    """Return `x` dense with its dims laid out in `order`, outermost first.

    `order` is a permutation of range(x.ndim); (0, 1, ..., n-1) is row-major
    and (n-1, ..., 0) is Fortran order.  Returns `x` itself when it already
    is laid out that way, else a copy of the same kind as `x` (a NumPy
    subclass such as np.matrix comes back as a plain ndarray); ``copy`` as
    for contiguous().

    >>> import numpy as np, pylayout as pl
    >>> a = np.zeros((2, 3, 4), dtype=np.int16)
    >>> pl.to_order(a, (2, 0, 1)).strides     # dim 2 outermost, dim 1 innermost
    (6, 2, 12)
    """
    route = _autograd(x)
    if route:
        return route.to_order(x, order, copy=copy)
    return _like(x, _core.to_order(x, order, copy=copy))


# The C function, as contiguous is; torch.compile traces _copy_into in its
# place (to pylayout.torch's op pylayout::copy_into).
copy_into = _core.copy_into


def _copy_into(dst, src):
    """pylayout.copy_into in Python, the C function's half for keyword calls
    (as _contiguous is contiguous's)."""
    # the common call in one C call, as in contiguous
    if (type(dst) in _plain or _not_torch(dst)) and (type(src) in _plain or _not_torch(src)) or \
            not _torch_hooks[1]():  # type: ignore[index]  # set: _not_torch found a torch tensor
        result = _core.copy_into_or_route(dst, src)
        if result is not NotImplemented:
            return result
    return _copy_into_route(dst, src)


def _copy_into_route(dst, src):
    """copy_into past its fast path: pylayout.torch's tensors."""
    _refuse_tangents("copy_into", dst, src)
    route = _autograd(dst, src)
    if route:  # off the CPU: torch copies; on it, pylayout.torch calls the C copy
        return route.copy_into(dst, src)
    return _core.copy_core(dst, src)


_core._set_python_halves(_contiguous, _contiguous_route, _copy_into, _copy_into_route, _like)


_compile.trace_in_python(contiguous, _contiguous)
_compile.trace_in_python(copy_into, _copy_into)


@_overload
def view_as_complex(  # type: ignore[overload-overlap]
    x: "torch.Tensor", *, copy: "bool | None" = ...
) -> "torch.Tensor": ...
@_overload
def view_as_complex(  # type: ignore[overload-overlap]
    x: "np.ndarray[_Any, np.dtype[np.float32]]", *, copy: "bool | None" = ...
) -> "np.ndarray[tuple[int, ...], np.dtype[np.complex64]]": ...
@_overload
def view_as_complex(  # type: ignore[overload-overlap]
    x: "np.ndarray[_Any, np.dtype[np.float64]]", *, copy: "bool | None" = ...
) -> "np.ndarray[tuple[int, ...], np.dtype[np.complex128]]": ...
@_overload
def view_as_complex(x: "np.ndarray[_Any, np.dtype[np.float16]]", *, copy: "bool | None" = ...) -> "Tensor": ...
@_overload
def view_as_complex(  # type: ignore[overload-overlap]
    x: "np.ndarray[_Any, np.dtype[np.floating[_Any]]]", *, copy: "bool | None" = ...
) -> "np.ndarray[tuple[int, ...], np.dtype[np.complexfloating[_Any, _Any]]] | Tensor": ...
@_overload
def view_as_complex(x: "SupportsDLPack", *, copy: "bool | None" = ...) -> "Tensor": ...
def view_as_complex(x: "SupportsDLPack", *, copy: "bool | None" = None) -> _Any:
    """View a real tensor whose last dim holds (real, imag) as complex, zero-copy.

    The view exists whenever memory allows it: the last dim has size 2 and
    stride 1, the first element is aligned to the complex size, and every
    other dim of size > 1 has an even stride, in any order (transposed,
    channels_last, sliced).  Strides of size-1 and empty dims do not matter,
    unlike ``torch.view_as_complex`` (which refused size-1 dims with odd
    strides before pytorch#169780, which torch 2.11 has, and still refuses
    empty tensors).

    ``copy=None`` packs a new complex tensor when no view exists,
    ``copy=False`` raises ValueError naming the dim and stride that forbid it,
    ``copy=True`` always copies.  float16 pairs with complex32, float32 with
    complex64, float64 with complex128; a float16 NumPy array gives a
    pylayout.Tensor (NumPy has no complex32).

    >>> import numpy as np, pylayout as pl
    >>> x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)[:, :1]   # odd stride on a size-1 dim
    >>> z = pl.view_as_complex(x)
    >>> z.dtype, z.shape, z.ctypes.data == x.ctypes.data
    (dtype('complex64'), (2, 1), True)
    >>> pl.view_as_complex(np.zeros((3, 2))[::1, ::-1], copy=False)
    Traceback (most recent call last):
    ...
    ValueError: dim 1 (real, imag) has stride -1; ...
    """
    route = _torch_views(x)
    if route:
        return route.view_as_complex(x, copy=copy)
    t = x if type(x) is Tensor else _core.from_dlpack(x)
    z = _core.view_as_complex(t, copy=copy)
    return _like(x, z, view=z.data_ptr == t.data_ptr)  # a view keeps t's data pointer; a packed copy has its own


@_overload
def view_as_real(z: "torch.Tensor") -> "torch.Tensor": ...  # type: ignore[overload-overlap]
@_overload
def view_as_real(  # type: ignore[overload-overlap]
    z: "np.ndarray[_Any, np.dtype[np.complex64]]",
) -> "np.ndarray[tuple[int, ...], np.dtype[np.float32]]": ...
@_overload
def view_as_real(  # type: ignore[overload-overlap]
    z: "np.ndarray[_Any, np.dtype[np.complex128]]",
) -> "np.ndarray[tuple[int, ...], np.dtype[np.float64]]": ...
@_overload
def view_as_real(  # type: ignore[overload-overlap]
    z: "np.ndarray[_Any, np.dtype[np.complexfloating[_Any, _Any]]]",
) -> "np.ndarray[tuple[int, ...], np.dtype[np.floating[_Any]]]": ...
@_overload
def view_as_real(z: "SupportsDLPack") -> "Tensor": ...
def view_as_real(z: "SupportsDLPack") -> _Any:
    """View a complex tensor as real with a trailing (real, imag) dim of size 2, zero-copy.

    >>> import numpy as np, pylayout as pl
    >>> r = pl.view_as_real(np.array([1 + 2j, 3 - 4j], dtype=np.complex64))
    >>> r.tolist()
    [[1.0, 2.0], [3.0, -4.0]]
    """
    route = _torch_views(z)
    if route:
        return route.view_as_real(z)
    return _like(z, _core.view_as_real(z), view=True)


@_overload
def pack_complex(re: "SupportsDLPack", im: "SupportsDLPack", *, out: "_DLPackT") -> "_DLPackT": ...
@_overload
def pack_complex(  # type: ignore[overload-overlap]
    re: "torch.Tensor", im: "torch.Tensor", *, out: None = ...
) -> "torch.Tensor": ...
@_overload
def pack_complex(  # type: ignore[overload-overlap]
    re: "np.ndarray[_ShapeT, np.dtype[np.float32]]", im: "_NDArray", *, out: None = ...
) -> "np.ndarray[_ShapeT, np.dtype[np.complex64]]": ...
@_overload
def pack_complex(  # type: ignore[overload-overlap]
    re: "np.ndarray[_ShapeT, np.dtype[np.float64]]", im: "_NDArray", *, out: None = ...
) -> "np.ndarray[_ShapeT, np.dtype[np.complex128]]": ...
@_overload
def pack_complex(
    re: "np.ndarray[_ShapeT, np.dtype[np.float16]]", im: "_NDArray", *, out: None = ...
) -> "Tensor": ...
@_overload
def pack_complex(  # type: ignore[overload-overlap]
    re: "np.ndarray[_ShapeT, np.dtype[np.floating[_Any]]]", im: "_NDArray", *, out: None = ...
) -> "np.ndarray[_ShapeT, np.dtype[np.complexfloating[_Any, _Any]]] | Tensor": ...
@_overload
def pack_complex(re: "SupportsDLPack", im: "SupportsDLPack", *, out: None = ...) -> "Tensor": ...
def pack_complex(re: "SupportsDLPack", im: "SupportsDLPack", *, out: "SupportsDLPack | None" = None) -> _Any:
    """Interleave planar real and imaginary parts into a complex tensor: re + 1j*im.

    `re` and `im` share a shape and a real dtype and may be broadcast views
    (stride 0).  The result is a new contiguous complex tensor of the same
    kind as `re`, or `out` (any strides) when given.  Parallel.

    >>> import numpy as np, pylayout as pl
    >>> pl.pack_complex(np.array([1.0, 2.0]), np.array([3.0, 4.0])).tolist()
    [(1+3j), (2+4j)]
    """
    if out is not None:
        _refuse_tangents("pack_complex(out=)", re, im, out)
    route = _autograd(re, im) if out is None else _autograd(re, im, out)
    if route:
        return route.pack_complex(re, im, out=out)
    result = _core.pack_complex(re, im, out=out)
    return result if out is not None else _like(re, result)


@_overload
def unpack_complex(  # type: ignore[overload-overlap]
    z: "torch.Tensor", *, copy: bool = ...
) -> "tuple[torch.Tensor, torch.Tensor]": ...
@_overload
def unpack_complex(  # type: ignore[overload-overlap]
    z: "np.ndarray[_ShapeT, np.dtype[np.complex64]]", *, copy: bool = ...
) -> "tuple[np.ndarray[_ShapeT, np.dtype[np.float32]], np.ndarray[_ShapeT, np.dtype[np.float32]]]": ...
@_overload
def unpack_complex(  # type: ignore[overload-overlap]
    z: "np.ndarray[_ShapeT, np.dtype[np.complex128]]", *, copy: bool = ...
) -> "tuple[np.ndarray[_ShapeT, np.dtype[np.float64]], np.ndarray[_ShapeT, np.dtype[np.float64]]]": ...
@_overload
def unpack_complex(  # type: ignore[overload-overlap]
    z: "np.ndarray[_ShapeT, np.dtype[np.complexfloating[_Any, _Any]]]", *, copy: bool = ...
) -> "tuple[np.ndarray[_ShapeT, np.dtype[np.floating[_Any]]], np.ndarray[_ShapeT, np.dtype[np.floating[_Any]]]]": ...
@_overload
def unpack_complex(z: "SupportsDLPack", *, copy: bool = ...) -> "tuple[Tensor, Tensor]": ...
def unpack_complex(z: "SupportsDLPack", *, copy: bool = True) -> _Any:
    """Split a complex tensor into planar (real, imag) tensors.

    ``copy=True`` returns two new contiguous tensors; ``copy=False`` returns
    zero-copy strided views into `z` (stride 2 in real elements).

    >>> import numpy as np, pylayout as pl
    >>> re, im = pl.unpack_complex(np.array([1 + 2j, 3 - 4j]))
    >>> re.tolist(), im.tolist()
    ([1.0, 3.0], [2.0, -4.0])
    """
    route = _autograd(z) if copy else _torch_views(z)
    if route:
        return route.unpack_complex(z, copy=copy)
    re, im = _core.unpack_complex(z, copy=copy)
    return _like(z, re, view=not copy), _like(z, im, view=not copy)


@_overload
def canonicalize(x: "torch.Tensor") -> "torch.Tensor": ...  # type: ignore[overload-overlap]
@_overload
def canonicalize(  # type: ignore[overload-overlap]
    x: "np.ndarray[_ShapeT, _DTypeT]",
) -> "np.ndarray[_ShapeT, _DTypeT]": ...
@_overload
def canonicalize(x: "SupportsDLPack") -> "Tensor": ...
def canonicalize(x: "SupportsDLPack") -> _Any:
    """Zero-copy view of `x` whose size-1 dims carry canonical strides.

    A size-1 dim's stride never matters for which memory a tensor covers,
    but it trips code that checks strides (such as torch's view_as_complex
    before pytorch#169780, which torch 2.11 has).  The canonical stride is
    the one a compact layout of the inner dims gives.

    >>> import numpy as np, pylayout as pl
    >>> x = np.zeros((4, 2, 1), dtype=np.float32).transpose(0, 2, 1)
    >>> x.strides, pl.canonicalize(x).strides
    ((8, 4, 4), (8, 8, 4))
    """
    route = _torch_views(x)
    if route:
        return route.canonicalize(x)
    return _like(x, _core.canonicalize(x), view=True)


def info() -> "dict[str, _Any]":
    """Versions and build facts: DLPack version, OpenMP, SIMD path, threads, peers."""
    d = dict(_core.build_info())
    for name in ("numpy", "torch"):
        try:
            mod = __import__(name)
            d[name] = mod.__version__
        except ImportError:
            d[name] = None
    return d
